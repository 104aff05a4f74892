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
    assert "# seed: 3" in text and "# scale: smoke" in text and "aim_tutorial: " in text
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
    # more data, smaller error; and within 0.2 of SE at d = 30 (finite-size deviations ~ 1/sqrt(d) ~ 0.2
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
