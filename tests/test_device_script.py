"""scripts/device_paper_run.py, the one prepared script of the GPU's paper-scale run, at smoke scale."""

import json
import os
import subprocess
import sys
import tarfile

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "device_paper_run.py")


def _run(tmp_path, *args):
    return subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path / "out"), *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)


@pytest.mark.slow
def test_device_script_runs_jobs_and_packs_what_finished(tmp_path):
    r = _run(tmp_path, "--scale", "smoke", "--deadline", "300", "--jobs", "env", "deep")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [j["job"] for j in s["jobs"]] == ["env", "deep"]
    assert all(j["rc"] == 0 and not j["timed_out"] for j in s["jobs"])
    env = s["jobs"][0]["result"]
    assert env["backend"] == "cpu" and env["algorithm_dtype"] == "float64"
    assert set(env["matmul_gflops"]) == {"float32_256x256", "float64_256x256"}
    assert all(v > 0 for v in env["matmul_gflops"].values())
    with tarfile.open(tmp_path / "out" / "run.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"logs/env.log", "logs/deep.log", "figures/deep.csv", "figures/deep.manifest.json"} <= names


def test_device_script_skips_jobs_past_its_deadline_and_refuses_unknown_ones(tmp_path):
    r = _run(tmp_path, "--scale", "smoke", "--deadline", "1", "--jobs", "env", "gd")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["jobs"] == [dict(job="env", skipped="no time left"), dict(job="gd", skipped="no time left")]
    r = _run(tmp_path, "--deadline", "10", "--jobs", "env", "train")
    assert r.returncode == 2 and "unknown jobs ['train']" in r.stderr


@pytest.mark.slow
def test_device_script_gd_par_runs_one_process_per_T_and_keeps_their_tables(tmp_path):
    r = _run(tmp_path, "--scale", "smoke", "--deadline", "300", "--jobs", "gd-par")
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    (job,) = s["jobs"]
    assert job["rc"] == 0 and job["result"]["rcs"] == [0, 0]
    from aim_tutorial import datafiles

    for T in (2, 3):
        t = datafiles.read(str(tmp_path / "out" / "figures" / f"gd_T{T}.csv"))
        assert set(t.column("T")) == {T} and len(t.column("x")) == 2
        assert np.all(t.column("n_finite") == 2)
    with tarfile.open(tmp_path / "out" / "run.tar.gz") as tar:
        assert {"figures/gd_T2.csv", "figures/gd_T3.csv", "figures/gd_T2.log"} <= set(tar.getnames())


def test_gd_missing_names_the_grid_s_data_sets_without_a_row():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import device_paper_run as dpr
    finally:
        sys.path.pop(0)
    from aim_tutorial import datafiles

    t = datafiles.read(dpr.GD_GPU_TABLE)
    prm = t.header["params"]
    rows = {(int(T), round(float(x), 6), int(s)) for T, x, s in zip(t.column("T"), t.column("x"), t.column("seed"))}
    missing = dpr.gd_missing()
    grid = len(prm["T"]) * len(prm["x"]) * prm["seeds"]
    assert len(missing) + len(rows) == grid and not set(missing) & rows
    assert all(T in prm["T"] and x in prm["x"] and s < prm["first_seed"] + prm["seeds"] for T, x, s in missing)
    # one process a data set, with its own key: --first-seed s --seeds 1 (x's index in the grid names the key)
    _, rest = dpr._gd_parts("paper")
    assert len(rest) == len(missing)
    for (T, x, s), (name, args) in zip(missing, rest):
        assert name == f"gd_T{T}_x{x:g}_seed{s}"
        assert args[args.index("--first-seed") + 1] == str(s) and args[args.index("--seeds") + 1] == "1"


@pytest.mark.slow
def test_device_script_gd_missing_runs_one_process_per_data_set(tmp_path):
    r = _run(tmp_path, "--scale", "smoke", "--deadline", "300", "--jobs", "gd-missing")
    assert r.returncode == 0, r.stderr
    (job,) = json.loads((tmp_path / "out" / "summary.json").read_text())["jobs"]
    assert job["rc"] == 0 and job["result"]["rcs"] == [0, 0]
    from aim_tutorial import datafiles

    for T, x in ((2, 0.2), (3, 0.6)):
        t = datafiles.read(str(tmp_path / "out" / "figures" / f"gd_T{T}_x{x:g}_seed2.csv"))
        assert list(t.column("T")) == [T] and list(t.column("x")) == [x] and list(t.column("seed")) == [2]


@pytest.mark.slow
def test_device_script_gd_vs_amp_runs_both_precisions_on_the_same_instances(tmp_path):
    r = _run(tmp_path, "--scale", "smoke", "--deadline", "500", "--jobs", "gd-vs-amp")
    assert r.returncode == 0, r.stderr
    (job,) = json.loads((tmp_path / "out" / "summary.json").read_text())["jobs"]
    assert job["rc"] == 0 and job["result"]["rcs"] == [0, 0]
    from aim_tutorial import datafiles

    hi, de = (datafiles.read(str(tmp_path / "out" / "figures" / f"gd_vs_amp_{p}.csv")).table
              for p in ("highest", "default"))
    assert len(hi) == len(de) == 4
    for c in ("d", "x", "seed", "n"):
        np.testing.assert_array_equal(hi[c], de[c])
    # on a CPU both precisions are full precision: the same numbers
    np.testing.assert_allclose(hi["amp_error"], de["amp_error"], rtol=1e-6)
