"""The mutation triage file stays in step with the code (fast; ``make mutation-ci`` runs the mutants).

Every ``[[curated]]`` mutant names a line of its module's source (``old``) that must exist exactly
once, else ``make mutation-ci`` cannot plant it ("the code moved: update the triage file"); this
test says so in the fast loop, before the slow CI step does.
"""

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRIAGE = tomllib.loads((ROOT / "mutation" / "triage.toml").read_text())


def _source(module: str) -> str:
    return (ROOT / "aim_tutorial" / (module.replace(".", "/") + ".py")).read_text()


@pytest.mark.parametrize("entry", TRIAGE["curated"], ids=lambda e: f"{e['module']}: {e['old'][:40]}")
def test_each_curated_mutant_names_one_line_of_its_module(entry):
    lines = [line.strip() for line in _source(entry["module"]).splitlines()]
    assert lines.count(entry["old"].strip()) == 1, (
        f"{entry['module']}: the line {entry['old']!r} is not in the source exactly once; "
        "update mutation/triage.toml")
    assert entry["new"] != entry["old"] and entry["select"]


# ----------------------------------------------------------------------------------------------
# the runner's bookkeeping (scripts/mutation.py): the committed records and the test selection
# ----------------------------------------------------------------------------------------------

import importlib.util  # noqa: E402
import json  # noqa: E402

_spec = importlib.util.spec_from_file_location("mutation_runner", ROOT / "scripts" / "mutation.py")
mutation = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutation)

_OUTCOMES = {"killed", "killed-slow", "survived", "timeout", "incompetent", "unchecked", "abnormal", "exception"}


@pytest.mark.parametrize("record", sorted((ROOT / "mutation" / "results").glob("*.json")), ids=lambda p: p.stem)
def test_each_committed_record_names_its_mutants(record):
    rec = json.loads(record.read_text())
    assert rec["module"] == record.stem and rec["module"] in mutation.MODULES
    assert rec["source"] == mutation.MODULES[rec["module"]][0] and len(rec["source_sha256"]) == 64
    assert rec["mutants"] and rec["not_run"] >= 0
    for m in rec["mutants"]:
        assert m["outcome"] in _OUTCOMES, m
        assert m["old"] != m["new"] and m["line"] >= 1 and m["occurrence"] >= 0 and m["operator"].startswith("core/")


def test_a_record_is_read_back_as_written(tmp_path, monkeypatch):
    monkeypatch.setattr(mutation, "RESULTS", tmp_path)
    monkeypatch.setattr(mutation, "WORK", tmp_path / "work")  # no session on this machine
    muts = [{"operator": "core/NumberReplacer", "occurrence": 3, "line": 7, "old": "a = 1", "new": "a = 2",
             "outcome": "survived"}]
    mutation._write_record({"module": "rmt", "source": "aim_tutorial/rmt.py", "source_sha256": "0" * 64,
                            "seconds": 12.0, "not_run": 5, "mutants": muts})
    assert mutation.results("rmt") == [dict(muts[0], module="rmt")]
    assert mutation.pending("rmt") == 5
    assert len((tmp_path / "rmt.json").read_text().splitlines()) == 3  # one mutant a line: short diffs


def test_a_mutant_meets_the_tests_that_run_its_lines():
    lines = {10: ["tests/a.py::t1"], 11: ["tests/a.py::t2"], 20: [], 30: ["tests/a.py::t3"]}
    first = {12: 11, 31: 30}.get
    first_line = lambda row: first(row, row)  # noqa: E731
    assert mutation._tests_of(lines, first_line, [10]) == ["tests/a.py::t1"]
    assert mutation._tests_of(lines, first_line, [10, 11]) == ["tests/a.py::t1", "tests/a.py::t2"]
    # the continuation line of a statement counts with its first line
    assert mutation._tests_of(lines, first_line, [12]) == ["tests/a.py::t2"]
    # a line run at import (a default, a constant) meets every test: []
    assert mutation._tests_of(lines, first_line, [20]) == []
    assert mutation._tests_of(lines, first_line, [10, 20]) == []
    # a line no test runs: None (no test can see the change)
    assert mutation._tests_of(lines, first_line, [40]) is None
    # the first lines of real statements, from coverage's parser of the module
    fl = mutation._first_line("_rmt_support")  # the hull test of the support's edges (rmt.py before issue 49)
    src = (ROOT / "aim_tutorial" / "_rmt_support.py").read_text().splitlines()
    row = next(i for i, s in enumerate(src, 1) if s.strip() == ">= 0")  # the hull test's last line
    assert src[fl(row) - 1].strip() == "while ("


def test_only_a_failing_test_is_a_kill():
    assert mutation._failed({"test_outcome": "killed", "output": "F\n1 failed, 3 passed in 2.0s"})
    assert mutation._failed({"test_outcome": "killed", "output": "E\n1 error in 2.0s"})
    # pytest's exit status 4 (a node id it cannot find) or 5 (no test collected) is no kill
    assert not mutation._failed({"test_outcome": "killed", "output": "\nno tests ran in 0.81s\n"})
    assert not mutation._failed({"test_outcome": "survived", "output": "3 passed in 2.0s"})


def test_a_new_session_resumes_from_the_record(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setattr(mutation, "RESULTS", tmp_path)
    monkeypatch.setattr(mutation, "WORK", tmp_path)
    monkeypatch.setattr(mutation, "_source_hash", lambda name: "a" * 64)
    session = tmp_path / "rmt.sqlite"
    con = sqlite3.connect(session)
    con.execute("create table mutation_specs (job_id, operator_name, occurrence, start_pos_row, end_pos_row)")
    con.execute("create table work_results (worker_outcome, output, test_outcome, diff, job_id)")
    ops = [("j1", "core/NumberReplacer", 0), ("j2", "core/NumberReplacer", 1), ("j3", "core/NumberReplacer", 2)]
    con.executemany("insert into mutation_specs values (?, ?, ?, 1, 1)", ops)
    con.commit()
    muts = [dict(operator="core/NumberReplacer", occurrence=0, line=1, old="a = 1", new="a = 2", outcome="killed"),
            dict(operator="core/NumberReplacer", occurrence=1, line=1, old="a = 1", new="a = 0", outcome="killed-slow")]
    mutation._write_record({"module": "rmt", "source": "aim_tutorial/rmt.py", "source_sha256": "a" * 64,
                            "seconds": 30.0, "not_run": 1, "mutants": muts})
    mutation._resume_from_record("rmt", session)
    rows = dict(con.execute("select job_id, test_outcome from work_results").fetchall())
    assert rows == {"j1": "KILLED", "j2": "SURVIVED"}  # j3 is left to run
    assert json.loads((tmp_path / "rmt.slow.json").read_text()) == {"j2": "killed"}
    assert [(m["old"], m["new"], m["outcome"]) for m in mutation._results_from_session("rmt")] == [
        ("a = 1", "a = 2", "killed"), ("a = 1", "a = 0", "killed-slow")]
    # a record of another source is not taken over
    monkeypatch.setattr(mutation, "_source_hash", lambda name: "b" * 64)
    con.execute("delete from work_results")
    con.commit()
    mutation._resume_from_record("rmt", session)
    assert con.execute("select count(*) from work_results").fetchone()[0] == 0


def test_the_draw_is_a_fixed_uniform_order():
    """A mutant's place in the random order depends on its module, operator and occurrence only, and
    the places of many mutants are uniform on [0, 1): Kolmogorov-Smirnov on 5000 of them."""
    from scipy import stats

    u = [mutation._draw("rmt", "core/NumberReplacer", k) for k in range(5000)]
    assert u == [mutation._draw("rmt", "core/NumberReplacer", k) for k in range(5000)]
    assert mutation._draw("rmt", "core/NumberReplacer", 0) != mutation._draw("amp", "core/NumberReplacer", 0)
    assert all(0 <= x < 1 for x in u)
    assert stats.kstest(u, "uniform").pvalue > 1e-3


def test_the_sample_is_every_mutant_drawn_below_the_first_not_run(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setattr(mutation, "WORK", tmp_path)
    con = sqlite3.connect(tmp_path / "rmt.sqlite")
    con.execute("create table mutation_specs (job_id, operator_name, occurrence, start_pos_row, end_pos_row)")
    con.execute("create table work_results (worker_outcome, output, test_outcome, diff, job_id)")
    op = "core/NumberReplacer"
    con.executemany("insert into mutation_specs values (?, ?, ?, 1, 1)", [(f"j{k}", op, k) for k in range(6)])
    order = sorted(range(6), key=lambda k: mutation._draw("rmt", op, k))
    for k in order[:3]:  # the first three drawn have run
        con.execute("insert into work_results values ('NORMAL', '', 'KILLED', '', ?)", (f"j{k}",))
    con.commit()
    assert mutation._sample_cut("rmt") == mutation._draw("rmt", op, order[3])
    con.execute("insert into work_results values ('NORMAL', '', 'KILLED', '', ?)", (f"j{order[5]}",))
    con.commit()  # one run out of order (a line-ordered run) does not move the cut
    assert mutation._sample_cut("rmt") == mutation._draw("rmt", op, order[3])
    for k in order[3:5]:
        con.execute("insert into work_results values ('NORMAL', '', 'KILLED', '', ?)", (f"j{k}",))
    con.commit()
    assert mutation._sample_cut("rmt") == 1.0  # all ran


def test_the_wilson_interval():
    """Against the closed form's textbook values (Agresti and Coull 1998, Newcombe 1998: 81 of 263,
    95 %: 0.2553 to 0.3662) and its limits."""
    lo, hi = mutation._wilson(81, 263)
    assert lo == pytest.approx(0.2553, abs=5e-5) and hi == pytest.approx(0.3662, abs=5e-5)
    assert mutation._wilson(10, 10)[1] == 1.0 and mutation._wilson(0, 10)[0] == 0.0
    assert mutation._wilson(57, 60)[0] == pytest.approx(0.8628, abs=5e-4)


def test_each_equivalent_says_its_kind_and_why():
    for e in TRIAGE["equivalent"]:
        assert e.get("kind", "exact") in ("exact", "numerical"), e
        assert len(e["reason"]) > 15 and e["old"] != e["new"], e


def test_a_hung_test_run_is_stopped_at_the_timeout_and_leaves_no_process(tmp_path):
    """A mutant whose tests hang is a timeout, and its test run is killed then: cosmic-ray runs the
    test command in a session of its own, which killing cosmic-ray's group missed, and two hung
    runs once went on for half an hour beside the next mutants."""
    import subprocess
    import time
    import uuid

    (tmp_path / ".pristine").mkdir()
    for where in (tmp_path, tmp_path / ".pristine"):
        (where / "mod.py").write_text("x = 1 + 2\n")
    tag = uuid.uuid4().hex
    t0 = time.monotonic()
    out = mutation._mutate_and_test("mod.py", "core/NumberReplacer", 0,
                                    f"python -c 'import time; time.sleep(120)  # {tag}'", tmp_path, timeout=3.0)
    assert out["worker_outcome"] == "timeout" and out["test_outcome"] is None
    assert time.monotonic() - t0 < 60
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True).stdout.split()
    assert left == [], left
    assert (tmp_path / "mod.py").read_text() == "x = 1 + 2\n"  # the source is put back


def test_each_test_node_of_the_module_map_exists():
    """A test id in ``MODULES`` (a module's bad-input sweep, the pinned signatures) that pytest does not
    collect would make every mutant of that module fail its test command before any test runs: a module
    that is split or renamed changes the sweep's ids (``deep`` became ``deep.model``, ``deep.gd``, ...)."""
    import subprocess
    import sys

    nodes = sorted({t for _, tests in mutation.MODULES.values() for t in tests if "::" in t})
    files = sorted({t.split("::")[0] for t in nodes})
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
                         cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert [t for t in nodes if t not in out] == []
