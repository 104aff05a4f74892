"""Tests of ``python -m aim_tutorial reproduce`` (aim_tutorial/reproduce.py).

Every figure runs at smoke scale; the checks are properties that hold at any size
(the softmax collapse over T, the perfect-recovery threshold, the convexity bound
"the average of students is never worse than the students on average", the
exact hardmax score beating the published one at large alpha), plus the file
format and the command-line errors.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from aim_tutorial import reproduce as rp
from aim_tutorial.config import SCALES


@pytest.fixture(autouse=True)
def cache_calls(monkeypatch):
    """The command line turns on JAX's persistent compilation cache, a setting global to JAX: here
    that only records the calls (tests/test_config.py runs the real one in fresh processes)."""
    calls = []
    monkeypatch.setattr(rp, "compilation_cache", lambda: calls.append(1) or "/fake/cache")
    return calls


def test_list_names_every_figure(capsys):
    assert rp.main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out
    for name in rp.list_figures():
        assert name in out
    # the figures the paper and the book need
    for name in ("softmax-se", "hardmax-se", "amp-se", "gd-single", "gd-averaged", "deep"):
        assert name in rp.list_figures()


def test_every_figure_has_sizes_at_every_scale():
    for name in rp.list_figures():
        szs = [rp.figure_sizes(name, s) for s in SCALES]
        assert szs[0].keys() == szs[1].keys() == szs[2].keys()
        if "d" in szs[0]:  # smoke <= book <= paper
            assert szs[0]["d"] < szs[1]["d"] < szs[2]["d"]
    assert rp.figure_sizes("gd-single", "paper")["d"] == 200  # the published size


@pytest.mark.parametrize("bad", ["softmax", "", "all", "SE"])
def test_invalid_figure_raises(bad):
    with pytest.raises(ValueError, match="figure must be one of"):
        rp.compute_figure(bad, "smoke")


@pytest.mark.parametrize("bad", ["huge", "Smoke", ""])
def test_invalid_scale_raises(bad):
    with pytest.raises(ValueError, match="scale must be one of"):
        rp.compute_figure("softmax-se", bad)


def test_cli_errors_are_clear(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        rp.main(["reproduce", "no-such-figure", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert "figure must be one of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        rp.main(["reproduce", "softmax-se", "--scale", "galactic", "--out", str(tmp_path)])
    assert e.value.code == 2
    assert "scale must be one of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rp.main(["reproduce"])  # neither a figure nor --list
    assert not any(tmp_path.iterdir())  # nothing written on an error


@pytest.mark.slow
def test_softmax_se_smoke_files_and_claims(tmp_path):
    res = rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=3)
    for p in (res.csv, res.png, res.pdf):
        assert os.path.getsize(p) > 0
    with open(res.csv) as f:
        text = f.read()
    assert "# seed: 3\n" in text and '"scale": "smoke"' in text and '"aim_tutorial": ' in text
    assert "# commands: [\"python -m aim_tutorial reproduce softmax-se --scale smoke --seed 3\"]" in text
    back = rp.read_data(res.csv)
    assert back.columns == res.data.columns and back.name == "softmax-se"
    np.testing.assert_allclose(back.rows, res.data.rows, rtol=1e-9)
    assert back.params == json.loads(json.dumps(res.data.params))
    T, x, m = back.column("T"), back.column("x"), back.column("mmse")
    Ts = np.unique(T)
    assert len(Ts) >= 2
    # the error depends on T only through x = alpha (T^2 + T - 2): identical columns (deterministic, 1e-8)
    np.testing.assert_allclose(m[T == Ts[0]], m[T == Ts[1]], atol=1e-8)
    # reference value (chapters 3 and 4 check it too): T = 2, rho = 0.5, alpha = 0.1 (x = 0.4) -> 0.392;
    # 1e-2 covers linear interpolation on the 24-point smoke grid
    s = T == 2
    assert abs(np.interp(0.4, x[s], m[s]) - 0.392) < 1e-2
    # 1 at alpha = 0, 0 beyond perfect recovery x_PR = 2 rho - rho^2 = 0.75
    assert abs(m[s][0] - 1) < 1e-9
    assert np.all(m[s][x[s] > 0.75 + 1e-9] < 1e-9)
    assert back.params["alpha_pr"]["2"] == pytest.approx(0.1875)


@pytest.mark.slow
def test_hardmax_se_exact_below_published():
    data = rp.compute_figure("hardmax-se", "smoke")
    sc, a, m = data.column("score"), data.column("alpha"), data.column("mmse")
    ex, pub = m[sc == 0], m[sc == 1]
    assert np.all(data.column("converged") == 1)
    assert np.all(np.diff(ex) < 0)  # the error decreases with alpha
    # at alpha = 3 the exact error is ~0.011, the published curve stays far above (as in chapter 4)
    assert abs(np.interp(np.log(3.0), np.log(a[sc == 0]), ex) - 0.0110) < 2e-3
    assert pub[-1] > 5 * ex[-1]


@pytest.mark.slow
def test_hardmax_rescaled_smoke():
    data = rp.compute_figure("hardmax-rescaled", "smoke")
    r, m = data.column("rho"), data.column("mmse")
    assert len(np.unique(r)) >= 1 and np.all((m >= 0) & (m <= 1 + 1e-9))
    np.testing.assert_allclose(data.column("alpha"), data.column("alpha_over_rho") * r, rtol=1e-12)


@pytest.mark.slow
def test_amp_se_smoke(tmp_path):
    res = rp.reproduce("amp-se", "smoke", out=str(tmp_path))
    d = res.data
    amp = d.column("kind") == 1
    a, m = d.column("alpha")[amp], d.column("mmse")[amp]
    assert np.all(np.isfinite(m)) and np.all(d.column("diverged")[amp] == 0)
    # more data, smaller error; and within 0.2 of SE at d = 40 (finite-size deviations ~ 1/sqrt(d) ~ 0.2
    # with a few tens of iterations; the chapter checks the agreement at larger d)
    assert m[np.argmax(a)] < m[np.argmin(a)]
    se = d.column("kind") == 0
    for ai, mi in zip(a, m):
        assert abs(mi - np.interp(ai, d.column("alpha")[se], d.column("mmse")[se])) < 0.2


@pytest.mark.slow
def test_amp_hardmax_smoke_beats_published_curve():
    d = rp.compute_figure("amp-hardmax", "smoke")
    k, a, m = d.column("kind"), d.column("alpha"), d.column("mmse")
    amp = k == 1
    assert np.all(np.isfinite(m[amp])) and np.all(d.column("diverged")[amp] == 0)
    # GAMP-RIE with the exact score goes below the published "optimal" curve (chapter 5, section
    # "Hardmax: beating the published curve"):
    # at alpha = 1 the published-score SE is ~0.33 and AMP at d = 24 reaches ~0.1; margin 0.1
    a_amp, m_amp = a[amp], m[amp]
    pub = np.interp(a_amp, a[k == 2], m[k == 2])
    i = np.argmax(a_amp)
    assert m_amp[i] < pub[i] - 0.1


@pytest.mark.slow
def test_gd_single_and_averaged_share_one_run(tmp_path):
    r1 = rp.reproduce("gd-single", "smoke", out=str(tmp_path))
    r2 = rp.reproduce("gd-averaged", "smoke", out=str(tmp_path))
    np.testing.assert_array_equal(r1.data.rows, r2.data.rows)  # the same experiment, computed once
    d = r1.data
    K = d.params["n_init"]
    assert np.all(d.column("n_finite") == K)
    # convexity: ||mean_k S_k - S||^2 <= mean_k ||S_k - S||^2, an identity-level check of the averaging
    assert np.all(d.column(f"avg_K{K}") <= d.column("single_mean") + 1e-12)
    np.testing.assert_allclose(d.column("x"), d.column("alpha") * (d.column("T") ** 2 + d.column("T") - 2))


@pytest.mark.slow
def test_deep_smoke(tmp_path):
    d = rp.reproduce("deep", "smoke", out=str(tmp_path)).data
    assert np.all(d.column("n_finite") == d.params["n_init"])
    for ell in (1, 2):
        assert np.all(d.column(f"avg{ell}") <= d.column(f"single{ell}_mean") + 1e-12)
    assert d.params["x_count"] == pytest.approx(1.5)  # 2 (2 rho - rho^2) at rho = 0.5


@pytest.mark.slow
def test_module_entry_point(tmp_path):
    # the wiring of ``python -m aim_tutorial`` (the figures themselves are run in-process above)
    out = subprocess.run([sys.executable, "-m", "aim_tutorial", "reproduce", "--list"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert all(name in out.stdout for name in rp.list_figures())
    bad = subprocess.run([sys.executable, "-m", "aim_tutorial", "reproduce", "nope"], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert bad.returncode == 2 and "figure must be one of" in bad.stderr


# --------------------------------------------------------------------------- no lost results (issue 17)
#
# These tests replace the computation by a stub (``fake_compute``: 48 rows shaped like softmax-se, in
# microseconds) and inject faults into the writing: the files, the plots and the renames are the real ones.

import signal  # noqa: E402

_FILES = ("softmax-se.csv", "softmax-se.png", "softmax-se.pdf", "softmax-se.manifest.json")


def _fake_data(name="softmax-se", scale="smoke", seed=0):
    T = np.repeat([2.0, 3.0], 24)
    x = np.tile(np.linspace(0.0, 0.8, 24), 2)
    m = np.clip(1 - x / 0.75, 0, 1) + 1e-3 * seed  # the seed shows in the numbers
    rows = np.column_stack([T, x / (T * T + T - 2), x, m, np.ones_like(x)])
    return rp.FigureData(name, ("T", "alpha", "x", "mmse", "converged"), rows,
                         dict(rho=0.5, scale=scale, seed=seed))


@pytest.fixture
def fake_compute(monkeypatch):
    """Replace the computation by a stub; ``calls`` records each call."""
    calls = []

    def compute(name, scale="smoke", seed=0, progress=False):
        calls.append((name, scale, seed))
        return _fake_data(name, scale, seed)

    monkeypatch.setattr(rp, "compute_figure", compute)
    return calls


def open_text(path):
    with open(path) as f:
        return f.read()


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _assert_consistent(d, seed):
    """The four files of softmax-se in ``d``, nothing else, agreeing with the manifest."""
    import hashlib

    assert sorted(p.name for p in d.iterdir()) == sorted(_FILES)  # no temporary file left
    man = rp.read_manifest(str(d), "softmax-se")
    assert man["figure"] == "softmax-se" and man["seed"] == seed and man["scale"] == "smoke"
    for kind in ("csv", "png", "pdf"):
        f = man["files"][kind]
        assert hashlib.sha256((d / f["name"]).read_bytes()).hexdigest() == f["sha256"]
    data = rp.read_data(str(d / "softmax-se.csv"))  # verifies row count and hash
    rp.read_manifest(str(d), "softmax-se")  # verifies the hash of every file
    assert len(data.rows) == man["files"]["csv"]["rows"] == 48 and data.params["seed"] == seed


def test_reproduce_writes_a_consistent_set_with_a_manifest(tmp_path, fake_compute):
    res = rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=5)
    assert fake_compute == [("softmax-se", "smoke", 5)]
    _assert_consistent(tmp_path, 5)
    man = rp.read_manifest(str(tmp_path), "softmax-se")
    assert man["command"] == "python -m aim_tutorial reproduce softmax-se --scale smoke --seed 5"
    assert man["started"] <= man["finished"] and man["aim_tutorial"]
    assert "# rows: 48\n" in open_text(res.csv)


def _fault_csv(monkeypatch):
    # the disk fills after the header and 5 rows of the CSV have been written
    real = rp._write_csv

    def partial(f, data, scale, seed):
        class Full:
            def write(self, text):
                lines = text.splitlines(keepends=True)
                n_header = sum(line.startswith("#") for line in lines) + 1
                f.write("".join(lines[:n_header + 5]))
                raise OSError(28, "No space left on device (injected)")

        real(Full(), data, scale, seed)

    monkeypatch.setattr(rp, "_write_csv", partial)
    return OSError


def _fault_plot(monkeypatch):
    # Ctrl-C after the CSV is written, before the PNG
    def interrupted(data):
        raise KeyboardInterrupt

    monkeypatch.setattr(rp, "plot_figure", interrupted)
    return KeyboardInterrupt


def _fault_pdf(monkeypatch):
    # the PDF writer fails after the CSV and PNG are written
    real = rp._write_to

    def write_to(tmp, mode, writer):
        if ".pdf." in os.path.basename(tmp):
            raise OSError(5, "Input/output error (injected)")
        return real(tmp, mode, writer)

    monkeypatch.setattr(rp, "_write_to", write_to)
    return OSError


def _failing_rename(monkeypatch, target):
    real = os.replace

    def replace(src, dst):
        if str(dst).endswith(target) and ".tmp" in str(src):
            raise OSError(5, "Input/output error (injected)")
        return real(src, dst)

    monkeypatch.setattr(rp.os, "replace", replace)
    return OSError


def _fault_rename(monkeypatch):
    # the CSV is renamed into place, then renaming the PNG fails: the previous CSV must be put back
    return _failing_rename(monkeypatch, "softmax-se.png")


def _fault_manifest_rename(monkeypatch):
    # CSV, PNG and PDF renamed into place, then the manifest's rename fails: all three put back
    return _failing_rename(monkeypatch, "softmax-se.manifest.json")


@pytest.mark.parametrize("fault", [_fault_csv, _fault_plot, _fault_pdf, _fault_rename,
                                   _fault_manifest_rename],
                         ids=["mid-csv", "ctrl-c-before-png", "pdf", "rename", "manifest-rename"])
@pytest.mark.parametrize("force", [False, True], ids=["same-seed", "other-seed-forced"])
def test_a_fault_keeps_the_previous_set(tmp_path, fake_compute, monkeypatch, fault, force):
    rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=0)
    before = _snapshot(tmp_path)
    exc = fault(monkeypatch)
    with pytest.raises(exc):
        rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=7 if force else 0, force=force)
    monkeypatch.undo()
    assert _snapshot(tmp_path) == before  # intact, byte for byte, and no temporary file
    _assert_consistent(tmp_path, 0)


def test_a_failed_rename_without_hard_links_is_detected(tmp_path, fake_compute, monkeypatch):
    # on a file system without hard links the previous CSV cannot be put back: the kept manifest
    # then no longer matches the new CSV, and read_data says so
    rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=0)

    def no_link(*a, **k):
        raise OSError(1, "Operation not permitted (injected)")

    monkeypatch.setattr(rp.os, "link", no_link)
    _fault_rename(monkeypatch)
    with pytest.raises(OSError):
        rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=7, force=True)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(_FILES)  # no temporary file
    with pytest.raises(ValueError, match="does not match its manifest"):
        rp.read_data(str(tmp_path / "softmax-se.csv"))


def test_ctrl_c_during_the_renames_is_held_until_the_set_is_complete(tmp_path, fake_compute, monkeypatch,
                                                                        capsys):
    # Python's own Ctrl-C handler, whatever an earlier test in this worker left: a handler that is
    # neither it nor SIG_DFL receives the held signal instead of a HeldInterrupt (by design)
    ambient = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_during_the_renames(tmp_path, capsys, monkeypatch)
    finally:
        signal.signal(signal.SIGINT, ambient)


def _ctrl_c_during_the_renames(tmp_path, capsys, monkeypatch):
    rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=0)
    real, n = os.replace, []

    def replace(src, dst):
        n.append(dst)
        if len(n) == 1:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C between the first rename and the others
        return real(src, dst)

    monkeypatch.setattr(rp.os, "replace", replace)
    with pytest.raises(rp.HeldInterrupt):  # a KeyboardInterrupt
        rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=7, force=True)
    assert len(n) == 4  # every rename ran; the interrupt came after
    _assert_consistent(tmp_path, 7)  # the new set, complete
    # the command line says which figure was written
    n.clear()
    assert rp.main(["reproduce", "softmax-se", "--out", str(tmp_path), "--seed", "8", "--force",
                    "--no-progress"]) == 130
    assert "interrupted after softmax-se was written" in capsys.readouterr().err
    monkeypatch.undo()
    _assert_consistent(tmp_path, 8)


def test_cli_turns_on_the_compilation_cache_unless_told_not_to(tmp_path, fake_compute, cache_calls, capsys):
    assert rp.main(["reproduce", "softmax-se", "--out", str(tmp_path), "--no-progress"]) == 0
    assert cache_calls == [1] and "compilation cache: /fake/cache" in capsys.readouterr().out
    assert rp.main(["reproduce", "softmax-se", "--out", str(tmp_path), "--no-progress", "--no-compile-cache"]) == 0
    assert cache_calls == [1] and "compilation cache" not in capsys.readouterr().out
    assert rp.main(["reproduce", "--list"]) == 0 and cache_calls == [1]


def test_cli_ctrl_c_exits_130_and_keeps_the_previous_set(tmp_path, fake_compute, monkeypatch, capsys):
    assert rp.main(["reproduce", "softmax-se", "--out", str(tmp_path), "--no-progress"]) == 0
    before = _snapshot(tmp_path)
    _fault_plot(monkeypatch)
    assert rp.main(["reproduce", "softmax-se", "--out", str(tmp_path), "--no-progress"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before


def test_write_data_is_atomic(tmp_path, monkeypatch):
    path = str(tmp_path / "f.csv")
    rp.write_data(_fake_data(), path, "smoke", 0)
    before = _snapshot(tmp_path)

    def broken(f, data, scale, seed):
        f.write("# aim_tutorial reproduce: softmax-se: partial\n")
        raise OSError(28, "No space left on device (injected)")

    monkeypatch.setattr(rp, "_write_csv", broken)
    with pytest.raises(OSError):
        rp.write_data(_fake_data(seed=3), path, "smoke", 3)
    assert _snapshot(tmp_path) == before


def test_read_data_refuses_a_truncated_csv(tmp_path):
    path = tmp_path / "softmax-se.csv"  # no manifest: the header's row count detects it
    rp.write_data(_fake_data(), str(path), "smoke", 0)
    lines = path.read_text().splitlines(keepends=True)
    n_header = sum(line.startswith("#") for line in lines) + 1
    path.write_text("".join(lines[:n_header + 5]))  # 5 complete rows of 48
    with pytest.raises(ValueError, match=r"softmax-se\.csv: truncated or incomplete: .* 48 rows, it holds 5"):
        rp.read_data(str(path))
    assert len(rp.read_data(str(path), verify=False).rows) == 5  # on request, for inspection
    path.write_text("".join(lines)[:-3])  # cut inside the last row
    with pytest.raises(ValueError, match=r"softmax-se\.csv: truncated"):
        rp.read_data(str(path))
    path.write_text("".join(lines[:3]))  # cut inside the header
    with pytest.raises(ValueError, match=r"softmax-se\.csv: not a table written by aim_tutorial"):
        rp.read_data(str(path))


def test_read_data_checks_the_manifest(tmp_path, fake_compute):
    res = rp.reproduce("softmax-se", "smoke", out=str(tmp_path))
    text = open_text(res.csv)
    assert "\n2,0,0,1,1\n" in text
    with open(res.csv, "w") as f:  # same row count, one number changed
        f.write(text.replace("\n2,0,0,1,1\n", "\n2,0,0,0.5,1\n"))
    with pytest.raises(ValueError, match=r"softmax-se\.csv does not match its manifest"):
        rp.read_data(res.csv)
    with pytest.raises(ValueError, match=r"softmax-se\.csv does not match its manifest"):
        rp.read_manifest(str(tmp_path), "softmax-se")
    with open(res.csv, "w") as f:
        f.write(text)
    rp.read_manifest(str(tmp_path), "softmax-se")
    os.remove(res.png)
    with pytest.raises(ValueError, match=r"softmax-se\.png is missing"):
        rp.read_manifest(str(tmp_path), "softmax-se")
    assert rp.read_manifest(str(tmp_path), "softmax-se", verify=False)["seed"] == 0


def test_read_data_refuses_a_csv_without_a_row_count(tmp_path):
    # the header's row count is what detects truncation: a file without one (hand-made, or of an older
    # format) is refused, naming what it lacks
    path = tmp_path / "old.csv"
    rp.write_data(_fake_data(), str(path), "smoke", 0)
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if not line.startswith("# rows:")))
    with pytest.raises(ValueError, match=r"old\.csv: its header lacks \['rows'\]"):
        rp.read_data(str(path))


@pytest.fixture
def a_file(tmp_path):
    p = tmp_path / "a-file"
    p.write_text("not a directory\n")
    return str(p)


@pytest.mark.parametrize("args, message", [
    (["softmax-se", "--out", ""], "out must be a directory path"),
    (["softmax-se", "--out", "/dev/null/x"], "'/dev/null' is not a directory"),
    (["softmax-se", "--out", "A_FILE"], "exists and is not a directory"),
    (["softmax-se", "--out", "A_FILE/sub"], "is not a directory"),
    (["softmax-se", "--seed", "-1"], r"--seed: must be an integer in \[0, 2\*\*32 - 1\]"),
    (["softmax-se", "--seed", str(2**70)], r"--seed: must be an integer in \[0, 2\*\*32 - 1\]"),
    (["softmax-se", "--seed", str(2**32)], r"--seed: must be an integer in \[0, 2\*\*32 - 1\]"),
    (["softmax-se", "--seed", "2**70"], "--seed: must be an integer"),
    (["softmax-se", "--seed", "1.5"], "--seed: must be an integer"),
    (["no-such-figure"], "figure must be one of"),
    (["softmax-se", "--scale", "galactic"], "scale must be one of"),
    (["all", "--scale", "huge"], "scale must be one of"),
])
def test_cli_bad_arguments_exit_2_before_computing(args, message, tmp_path, a_file, fake_compute, capsys):
    args = [a.replace("A_FILE", a_file) for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "out")]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(SystemExit) as e:
        rp.main(["reproduce", *args, "--no-progress"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert "error:" in last and __import__("re").search(message, last), err
    assert fake_compute == []  # never computed
    assert sorted(os.listdir(tmp_path)) == before  # nothing created


@pytest.mark.parametrize("kwargs, exc", [
    (dict(out=""), ValueError),
    (dict(out="/dev/null/x"), ValueError),
    (dict(seed=-1), ValueError),
    (dict(seed=2**70), ValueError),
    (dict(seed=2**32), ValueError),
    (dict(seed=True), TypeError),
    (dict(seed=1.0), TypeError),
    (dict(force="yes"), TypeError),
    (dict(scale="huge"), ValueError),
    (dict(name="nope"), ValueError),
])
def test_api_bad_arguments_raise_before_computing(kwargs, exc, tmp_path, fake_compute):
    kw = dict(name="softmax-se", scale="smoke", out=str(tmp_path / "out"))
    kw.update(kwargs)
    with pytest.raises(exc):
        rp.reproduce(**kw)
    assert fake_compute == [] and not (tmp_path / "out").exists()


def test_seed_range_is_the_one_of_distinct_keys():
    import jax

    assert rp._check_seed(rp.SEED_MAX) == 2**32 - 1
    keys = [tuple(np.asarray(jax.random.key_data(jax.random.key(s)))) for s in (0, 1, rp.SEED_MAX)]
    assert len(set(keys)) == 3


def test_overwriting_another_run_needs_force(tmp_path, fake_compute, capsys):
    out = str(tmp_path)
    rp.reproduce("softmax-se", "smoke", out=out, seed=0)
    before = _snapshot(tmp_path)
    fake_compute.clear()
    for args in (["--seed", "1"], ["--scale", "book"]):  # another seed, another scale
        with pytest.raises(SystemExit) as e:
            rp.main(["reproduce", "softmax-se", "--out", out, "--no-progress", *args])
        assert e.value.code == 2
        assert "another run's results (scale smoke, seed 0" in capsys.readouterr().err
    with pytest.raises(rp.ResultsExistError, match="force"):
        rp.reproduce("softmax-se", "smoke", out=out, seed=1)
    assert fake_compute == [] and _snapshot(tmp_path) == before
    # the same scale and seed: rewritten without --force (the same numbers)
    assert rp.main(["reproduce", "softmax-se", "--out", out, "--no-progress"]) == 0
    _assert_consistent(tmp_path, 0)
    # --force: replaced
    assert rp.main(["reproduce", "softmax-se", "--out", out, "--no-progress", "--seed", "1", "--force"]) == 0
    _assert_consistent(tmp_path, 1)
    assert fake_compute == [("softmax-se", "smoke", 0), ("softmax-se", "smoke", 1)]


def test_files_of_unknown_or_older_runs_are_protected(tmp_path, fake_compute):
    # a CSV of an older version (no manifest): its header tells the seed
    rp.write_data(_fake_data(seed=3), str(tmp_path / "softmax-se.csv"), "smoke", 3)
    with pytest.raises(rp.ResultsExistError, match="seed 3"):
        rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=0)
    rp.reproduce("softmax-se", "smoke", out=str(tmp_path), seed=3)  # its own seed: rewritten
    _assert_consistent(tmp_path, 3)
    # a figure with neither CSV nor manifest: nobody can tell which run made it
    other = tmp_path / "other"
    other.mkdir()
    (other / "softmax-se.png").write_bytes(b"\x89PNG")
    with pytest.raises(rp.ResultsExistError, match="unknown run"):
        rp.reproduce("softmax-se", "smoke", out=str(other))
    assert fake_compute == [("softmax-se", "smoke", 3)]
    rp.reproduce("softmax-se", "smoke", out=str(other), force=True)
    _assert_consistent(other, 0)


def test_a_failed_run_removes_the_directories_it_created(tmp_path, monkeypatch):
    def boom(name, scale="smoke", seed=0, progress=False):
        raise RuntimeError("injected")

    monkeypatch.setattr(rp, "compute_figure", boom)
    with pytest.raises(RuntimeError):
        rp.reproduce("softmax-se", "smoke", out=str(tmp_path / "a" / "b"))
    assert list(tmp_path.iterdir()) == []


def test_amp_runs_batch_gives_the_runs_one_after_another():
    """The seeds of one alpha as one program (what a sweep does with several devices) or one after
    another: the same iterations, statuses and errors (to rounding)."""
    import jax

    from aim_tutorial.reproduce import amp_runs

    keys = [jax.random.key(i) for i in range(3)]
    one = amp_runs(keys, 16, 0.5, 0.3, 2, batch=False, max_iter=30)
    together = amp_runs(keys, 16, 0.5, 0.3, 2, batch=True, max_iter=30)
    for a, b in zip(one, together):
        assert (a["n_iter"], a["status"], a["n"]) == (b["n_iter"], b["status"], b["n"])
        assert abs(a["error"] - b["error"]) <= 1e-9 and abs(a["mmse_pred"] - b["mmse_pred"]) <= 1e-9
