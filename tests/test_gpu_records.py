"""The GPU runs' records: ``scripts/merge_tables.py`` (tables written in parts) and
``benchmarks/gpu_compare.py --stored`` (a GPU run against stored float64 errors)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from aim_tutorial import datafiles

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import merge_tables  # noqa: E402


def _part(path, T, seeds, xs, command):
    cols = {"T": [], "seed": [], "x": [], "err": []}
    for s in seeds:
        for x in xs:
            cols["T"].append(T), cols["seed"].append(s), cols["x"].append(x), cols["err"].append(T + s + x)
    header = datafiles.make_header("a part", command=command, seed=6,
                                   params=dict(T=[T], seeds=len(seeds), rho=0.5), notes=["a note"])
    datafiles.write_table(str(path), cols, header)


def test_merge_sorts_keeps_commands_and_notes_and_marks_parts(tmp_path):
    _part(tmp_path / "a.csv", 3, [0, 1], [0.2, 0.1], "python make a")
    _part(tmp_path / "b.csv", 2, [1], [0.1], "python make b")
    out = tmp_path / "m.csv"
    n = merge_tables.merge(str(out), [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")], ["T", "seed", "x"],
                           params={"T": [2, 3]}, extra_notes=["16 missing"], part_column="part")
    assert n == 5
    t = datafiles.read(str(out))
    assert t.columns == ("T", "seed", "x", "err", "part")
    assert t.column("T").tolist() == [2, 3, 3, 3, 3]
    assert t.column("x").tolist() == [0.1, 0.1, 0.2, 0.1, 0.2]
    assert t.column("part").tolist() == [1, 0, 0, 0, 0]
    assert np.allclose(t.column("err"), t.column("T") + t.column("seed") + t.column("x"))
    h = t.header
    assert h["commands"] == ["python make a", "python make b"] and h["seed"] == 6
    assert h["params"] == {"T": [2, 3], "seeds": 2, "rho": 0.5}
    assert h["notes"][0] == "a note" and h["notes"].count("a note") == 1
    assert any(n.startswith("the parts' parameters differ in T ([3], [2]), seeds (2, 1)") for n in h["notes"])
    assert "16 missing" in h["notes"] and h["notes"][-1].startswith("merged from 2 parts by")


def test_merge_refuses_repeated_rows_other_columns_and_unknown_sort_columns(tmp_path):
    _part(tmp_path / "a.csv", 2, [0], [0.1], "python make a")
    _part(tmp_path / "b.csv", 2, [0], [0.1, 0.3], "python make b")
    parts = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    with pytest.raises(ValueError, match=r"rows repeated in the parts \(T, seed, x\): \[\(2.0, 0.0, 0.1\)\]"):
        merge_tables.merge(str(tmp_path / "m.csv"), parts, ["T", "seed", "x"])
    with pytest.raises(ValueError, match=r"--sort columns \['d'\] are not in the tables"):
        merge_tables.merge(str(tmp_path / "m.csv"), parts, ["d"])
    with pytest.raises(ValueError, match="--part-column 'err' is already a column"):
        merge_tables.merge(str(tmp_path / "m.csv"), parts[:1], ["T"], part_column="err")
    datafiles.write_table(str(tmp_path / "c.csv"), {"T": [2]}, datafiles.make_header("other", command="c"))
    with pytest.raises(ValueError, match="c.csv: columns"):
        merge_tables.merge(str(tmp_path / "m.csv"), parts[:1] + [str(tmp_path / "c.csv")], ["T"])
    assert not (tmp_path / "m.csv").exists()


def test_merge_command_line_parses_set_and_refuses_bad_items(tmp_path):
    _part(tmp_path / "a.csv", 2, [0], [0.1], "python make a")
    script = os.path.join(ROOT, "scripts", "merge_tables.py")
    r = subprocess.run([sys.executable, script, str(tmp_path / "m.csv"), str(tmp_path / "a.csv"), "--sort", "x",
                        "--set", "T=[2,3]", "--note", "hello"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    h = datafiles.read(str(tmp_path / "m.csv")).header
    assert h["params"]["T"] == [2, 3] and "hello" in h["notes"]
    r = subprocess.run([sys.executable, script, str(tmp_path / "n.csv"), str(tmp_path / "a.csv"), "--set", "T"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "--set takes KEY=JSON, got 'T'" in r.stderr


def test_gpu_compare_stored_reproduces_the_committed_comparison(tmp_path):
    gpu = os.path.join(ROOT, "benchmarks", "gpu")
    out = tmp_path / "compare.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "gpu_compare.py"), "--gpu-dir",
                        os.path.join(gpu, "full_precision"), "--stored", os.path.join(gpu, "cpu_float64.json"),
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    new = json.loads(out.read_text())["figures"]
    with open(os.path.join(gpu, "full_precision", "compare.json")) as f:
        old = json.load(f)["figures"]
    assert [f["figure"] for f in new] == ["amp-hardmax"]
    assert [q["max_abs_diff"] for q in new[0]["points"]] == [q["max_abs_diff"] for q in old[0]["points"]]
    # the stored float64 errors are the ones compared with: the differences are theirs
    with open(os.path.join(gpu, "cpu_float64.json")) as f:
        stored = json.load(f)
    ref = next(f for f in stored["figures"] if f["figure"] == "amp-hardmax")
    for q, p in zip(new[0]["points"], ref["points"]):
        assert q["error_cpu_float64"] == p["error_cpu_float64"]
        assert q["max_abs_diff"] == pytest.approx(np.max(np.abs(np.subtract(q["error_gpu_float32"],
                                                                            p["error_cpu_float64"]))))
