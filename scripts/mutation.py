"""Mutation testing of the scientific core with cosmic-ray (https://cosmic-ray.readthedocs.io).

    python scripts/mutation.py [MODULE ...] [--jobs N]   # every mutant of the named modules (default: all)
    python scripts/mutation.py [MODULE ...] --sample N   # the first N of each in a fixed random order
    python scripts/mutation.py --curated                 # the curated mutants CI runs: all must be killed
    python scripts/mutation.py --report                  # rewrite mutation/REPORT.md from the last runs
    python scripts/mutation.py MODULE --recheck          # the last run's survivors against the current tests

A mutant is one small change to the source (``a + b`` -> ``a - b``, ``-x`` -> ``+x``, a constant
changed by one, ``<`` -> ``>=``, ...); it is *killed* when the tests of its module fail. Each module
is tested only against its own test files (``tests/modules.toml``, the one map of modules to
tests; its modules marked ``mutate = true`` are the ones tested here), stopping at the first
failure: first the fast tests (not marked ``slow``) that run the mutated line (one run of them
under coverage, one context per test, tells which), then, if it survives those,
all the module's fast tests, then each survivor again with the slow ones (a kill is a kill
whichever test made it; a survivor has met every test of its module);
the mutants run in a fixed random order (``_draw``: a hash of each), so that a run stopped at
any point, or limited by ``--sample N``, has run a uniform random sample of its module, whose kill
rate the report gives with its 95 % interval;
the mutants run in a copy of the package
(``mutation/work/tree-PID-K``: two runs at once never share one), so the working tree is never
touched, ``--jobs`` modules at a time.

Why cosmic-ray (8.x): it writes each mutant to the file on disk and runs the test command in a
fresh process, so the functions under ``jax.jit`` or ``functools.lru_cache`` decorators are mutated
like the others and no process is forked after JAX has started its threads. mutmut 3 skips
decorated functions and forks its workers from the process that ran the tests.

The operators are a curated set of the realistic one-line slips of numerical code (``OPERATORS``):
``+``/``-`` and ``*``/``/`` swapped, a sign dropped, a constant off by one, a comparison negated or
moved across its boundary, ``True``/``False``, ``and``/``or``, a loop run zero times, ``break`` for
``continue``. Surviving mutants are triaged in ``mutation/triage.toml``: each is either killed by a
test added since (it then no longer survives) or listed as ``[[equivalent]]`` with the reason
(a mutant that cannot change any result, e.g. a tolerance of ``1e-9`` made ``2e-9``).

Outputs: ``mutation/REPORT.md`` (kill rate per module, run time, the untriaged survivors) and
``mutation/results/MODULE.json`` (every mutant of the module's last run and its outcome: the
sessions under ``mutation/work/`` do not outlive their machine; the report and ``--recheck`` read
the record when there is no session);
exit status 1 when a mutant survives that the triage does not explain, or a curated one survives.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import math
import os
import queue
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "mutation" / "work"
TRIAGE = ROOT / "mutation" / "triage.toml"
REPORT = ROOT / "mutation" / "REPORT.md"
# the committed record of each module's last run (mutation/work/ is a local scratch directory and
# does not outlive its machine): the report, a recheck and the next session read it
RESULTS = ROOT / "mutation" / "results"

# module -> (source file, the test files that are its own): read from the one map of modules to
# tests, tests/modules.toml (its modules marked mutate = true are the scientific core tested here).
MODULE_MAP = ROOT / "tests" / "modules.toml"


def _expand(entry, groups):
    """A tests list of tests/modules.toml with its "@group" and "@hostile[module]" references resolved."""
    out = []
    for t in entry:
        if not t.startswith("@"):
            out.append(t)
        elif "[" in t:                       # "@hostile[rmt]": a parametrised test of the group's node id
            name, param = t[1:].split("[", 1)
            out.append(f"{groups[name]}[{param}")
        else:
            out += _expand(groups[t[1:]], groups)
    return out


def module_map(path=MODULE_MAP):
    """Every module of the package: ``{name: (source file, tests, mutate)}`` from tests/modules.toml."""
    doc = tomllib.loads(Path(path).read_text())
    groups = doc.get("groups", {})
    out = {}
    for name, entry in doc["modules"].items():
        parts = [] if name == "aim_tutorial" else name.split(".")
        base = Path("aim_tutorial", *parts)
        src = base / "__init__.py" if (ROOT / base).is_dir() or name == "aim_tutorial" else base.with_suffix(".py")
        out[name] = (src.as_posix(), _expand(entry["tests"], groups), bool(entry.get("mutate", False)))
    return out


MODULES = {name: (src, tests) for name, (src, tests, mutate) in module_map().items() if mutate}

# every module's mutants also meet the pinned public signatures (a default moved by one, a "*" of the
# keyword-only arguments turned into "/": tests/test_api_surface.py)
_API = "tests/test_api_surface.py::test_public_signatures_are_pinned"
MODULES = {name: (src, tests + [_API]) for name, (src, tests) in MODULES.items()}

# the operators kept (cosmic-ray names, matched in full)
OPERATORS = [
    r"core/ReplaceBinaryOperator_(Add_Sub|Sub_Add|Mul_Div|Div_Mul|Pow_Mul)",
    r"core/ReplaceComparisonOperator_(Lt_GtE|LtE_Gt|Gt_LtE|GtE_Lt|Eq_NotEq|NotEq_Eq|Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt)",
    r"core/ReplaceUnaryOperator_USub_UAdd",
    r"core/ReplaceUnaryOperator_Delete_Not",
    r"core/NumberReplacer",
    r"core/Replace(TrueWithFalse|FalseWithTrue|AndWithOr|OrWithAnd|BreakWithContinue)",
    r"core/ZeroIterationForLoop",
]


def _python() -> str:
    return sys.executable


def _test_command(tests, extra="", fast=True) -> str:
    marker = "-m 'not slow' " if fast else ""
    # (the plugins are not auto-loaded, _env(): nbval's Jupyter imports alone took 2 s of each mutant)
    return (f"{_python()} -m pytest -x -q -p no:cacheprovider -p _hypothesis_pytestplugin {marker}"
            f"{' '.join(map(shlex.quote, tests))} {extra}").strip()


def _env() -> dict:
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only Hypothesis's plugin, named in _test_command
    # every mutant recompiles only what its change touches (JAX's persistent compilation cache)
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(WORK / "jax_cache"))
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    env.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
    return env


def _tree(k) -> Path:
    """A fresh copy of the package and its tests, where the mutants are written."""
    tree = WORK / f"tree-{os.getpid()}-{k}"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    atexit.register(shutil.rmtree, tree, ignore_errors=True)  # this process's copies go with it
    shutil.copytree(ROOT / "aim_tutorial", tree / "aim_tutorial", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", tree / "tests", ignore=shutil.ignore_patterns("__pycache__", "browser"))
    # (the scripts too: tests/test_gd.py runs the script that writes gd's data file)
    shutil.copytree(ROOT / "scripts", tree / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    shutil.copytree(tree / "aim_tutorial", tree / ".pristine" / "aim_tutorial")  # restores a timed-out mutant
    return tree


def _config(name: str, tree: Path, timeout: float) -> Path:
    src, tests = MODULES[name]
    cfg = WORK / f"{name}.toml"
    cfg.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(src)}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(_test_command(tests))}\n\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n\n"
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = {json.dumps(_excluded_operators())}\n")
    return cfg


def _excluded_operators() -> list:
    """cosmic-ray filters by exclusion: every operator that no pattern of ``OPERATORS`` keeps."""
    out = subprocess.run([_bin("cosmic-ray"), "operators"], capture_output=True,
                         text=True, check=True).stdout.split()
    keep = [re.compile(p + "$") for p in OPERATORS]
    return ["^" + re.escape(op) + "$" for op in out if not any(k.match(op) for k in keep)]


def _bin(tool: str) -> str:
    return str(Path(_python()).parent / tool)


def _mutate_and_test(src: str, operator: str, occ: int, command: str, tree: Path,
                     timeout: float | None = None) -> dict:
    """One mutant, written, tested with ``command`` and undone by cosmic-ray: its JSON result
    (``test_outcome``, ``worker_outcome``, ``output``, ``diff``). Past ``timeout`` seconds the
    test command is killed (coreutils' ``timeout``: cosmic-ray runs it in a session of its own,
    which killing cosmic-ray's group does not reach, so a hung test run used to go on for as long
    as the machine ran), and the outcome is ``timeout`` (a mutant that makes a loop endless is
    killed); cosmic-ray itself, if it does not return 30 s later, is killed with its group and the
    source put back from the pristine copy."""
    outer = None
    if timeout is not None:
        command = f"timeout -s KILL {math.ceil(timeout)} {command}"
        outer = timeout + 30.0
    t0 = time.monotonic()
    proc = subprocess.Popen([_bin("cosmic-ray"), "mutate-and-test", src, operator, str(occ), command],
                            cwd=tree, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=outer)
        res = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        if timeout is not None and str(res.get("test_outcome")).lower() == "killed" and time.monotonic() - t0 >= timeout:
            res.update(worker_outcome="timeout", test_outcome=None, output=f"over {timeout:.0f} s")
        return res
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        shutil.copy(tree / ".pristine" / src, tree / src)
        return {"worker_outcome": "timeout", "test_outcome": None, "output": f"over {timeout:.0f} s",
                "diff": _raw_diff(src, operator, occ, tree)}


def _baseline_seconds(tree: Path, tests) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(_test_command(tests), shell=True, cwd=tree, env=_env(), capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"the unmutated tests fail in {tree}: {tests}\n{r.stdout[-2000:]}")
    return time.perf_counter() - t0


def _resume_from_record(name: str, session: Path) -> None:
    """A new session (another machine) takes over the outcomes of the committed record of an
    unfinished run of the same source, so that the run goes on where it stopped."""
    rec = _record(name)
    if rec is None or rec["source_sha256"] != _source_hash(name):
        return
    con = sqlite3.connect(session)
    jobs = {(op, occ): job for job, op, occ in con.execute(
        "select m.job_id, m.operator_name, m.occurrence from mutation_specs m left join work_results r "
        "on m.job_id = r.job_id where r.job_id is null")}
    verdicts = {}
    for m in rec["mutants"]:
        job = jobs.get((m["operator"], m["occurrence"]))
        if job is None:
            continue
        worker, test = {"killed": ("NORMAL", "KILLED"), "timeout": ("TIMEOUT", None),
                        "incompetent": ("INCOMPETENT", None)}.get(m["outcome"], ("NORMAL", "SURVIVED"))
        diff = f"--- a\n+++ b\n-{m['old']}\n+{m['new']}\n"
        con.execute("insert into work_results (worker_outcome, output, test_outcome, diff, job_id) "
                    "values (?, ?, ?, ?, ?)", (worker, "from mutation/results", test, diff, job))
        if m["outcome"] in ("killed-slow", "survived"):
            verdicts[job] = "killed" if m["outcome"] == "killed-slow" else "survived"
    con.commit()
    (WORK / f"{name}.slow.json").write_text(json.dumps(verdicts))
    (WORK / f"{name}.time").write_text(f"{rec.get('seconds') or 0:.0f} 0\n")


def _coverage_map(name: str, tree: Path, slow: bool = False) -> dict:
    """Line of the module -> the node ids of its fast (or ``slow``) tests that run it, from one run
    of those tests under coverage with one context per test (a plugin switches it at each test's
    setup). A line run only at import (a constant, a ``def``) maps to no test: its mutants meet
    every test."""
    from coverage import CoverageData

    src, tests = MODULES[name]
    files = sorted({src, *(t.split("::")[0] for t in tests)})
    stamp = hashlib.sha256(b"".join((tree / f).read_bytes() for f in files)).hexdigest()
    saved = WORK / f"{name}.{'slow' if slow else 'fast'}-lines.json"
    if saved.exists() and json.loads(saved.read_text())["stamp"] == stamp:  # same source, same tests
        return {int(k): v for k, v in json.loads(saved.read_text())["lines"].items()}
    data_file = WORK / f"{name}.coverage"
    rc = WORK / f"{name}.coveragerc"
    rc.write_text(f"[run]\ndata_file = {data_file}\ninclude = {src}\n")
    (WORK / "_mutation_contexts.py").write_text(_CONTEXT_PLUGIN)
    data_file.unlink(missing_ok=True)
    cmd = [_python(), "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "_hypothesis_pytestplugin", "-p", "_mutation_contexts", "-m", "slow" if slow else "not slow", *tests]
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(WORK), env.get("PYTHONPATH")]))
    durations = WORK / f"{name}.durations.json"
    env["MUTATION_DURATIONS"] = str(durations)
    r = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if r.returncode not in (0, 5):  # (5: no test is marked slow)
        raise SystemExit(f"the unmutated tests fail under coverage in {tree}:\n{r.stdout[-2000:]}")
    cov = CoverageData(basename=str(data_file))
    cov.read()
    path = next((f for f in cov.measured_files() if f.endswith(src)), None)
    if path is None:  # no test ran (none is marked slow): every line maps to no test
        saved.write_text(json.dumps({"stamp": stamp, "lines": {}}))
        return {}
    took = json.loads(durations.read_text()) if durations.exists() else {}
    ids = {}
    for line, contexts in cov.contexts_by_lineno(path).items():
        # the node ids of the tests (context "": the import), the quickest first: with -x, a mutant
        # that a quick test kills costs no more than that test
        ids[line] = sorted((c for c in contexts if c), key=lambda c: (took.get(c, math.inf), c))
    saved.write_text(json.dumps({"stamp": stamp, "lines": ids}))
    return ids


def _tests_of(lines: dict, first_line, rows) -> list | None:
    """The tests that run the rows ``rows`` of a mutant (a line of a statement that spans several
    counts with the statement's first line): ``None`` when no test runs any of them, ``[]`` when
    one of them runs only at import (every test then meets the mutant), else their union."""
    per_row = []
    for row in rows:
        hit = [lines[r] for r in dict.fromkeys((row, first_line(row))) if r in lines]
        per_row.append(None if not hit else list(dict.fromkeys(t for h in hit for t in h)) if all(hit) else [])
    if all(h is None for h in per_row):
        return None
    if any(not h for h in per_row):
        return []
    return list(dict.fromkeys(t for h in per_row for t in h))  # (each row's tests come quickest first)


def _first_line(name: str):
    """Row -> the first row of the statement it belongs to (coverage's parser of the module)."""
    from coverage.parser import PythonParser

    parser = PythonParser(text=(ROOT / MODULES[name][0]).read_text(), filename=MODULES[name][0])
    parser.parse_source()
    return parser.first_line


# a pytest plugin for the coverage run: each test's lines (its fixtures' too) under its node id
_CONTEXT_PLUGIN = '''"""Coverage contexts named by pytest node ids, and each test's time (written by scripts/mutation.py)."""
import json
import os
import sys
import time

import coverage
import pytest


def _switch(name):
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(name)


DURATIONS = {}


def _clear_caches():
    """Each test computes afresh what it uses: the package's lru_caches and JAX's traces are
    emptied, so that a cached or traced line counts for every test that needs it, not only for
    the first one."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("aim_tutorial"):
            for obj in list(vars(mod).values()):
                clear = getattr(obj, "cache_clear", None)
                if callable(clear):
                    clear()
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _clear_caches()
    _switch(item.nodeid)
    t0 = time.perf_counter()
    yield
    DURATIONS[item.nodeid] = time.perf_counter() - t0
    _switch("")


def pytest_sessionfinish(session):
    path = os.environ.get("MUTATION_DURATIONS")
    if path:
        with open(path, "w") as f:
            json.dump(DURATIONS, f)
'''


def _failed(out: dict) -> bool:
    """A kill by a failing test (or a test's error), not by a command that ran no test."""
    return (str(out.get("test_outcome")).lower() == "killed"
            and re.search(r"\b\d+ (failed|errors?)\b", out.get("output") or "") is not None)


def _fast_pass(name: str, session: Path, tree: Path, timeout: float, sample: int | None = None) -> None:
    """Each mutant of the session without a result (of the first ``sample`` drawn), first against the fast tests that run its line
    (coverage), then, if it survives them, against all the module's fast tests; the result is
    written to the session as cosmic-ray would (so a stopped pass resumes)."""
    src, tests = MODULES[name]
    con = sqlite3.connect(session)
    specs = con.execute(
        "select m.job_id, m.operator_name, m.occurrence, m.start_pos_row, m.end_pos_row, r.job_id is null "
        "from mutation_specs m left join work_results r on m.job_id = r.job_id "
        "where coalesce(lower(r.worker_outcome), '') != 'skipped'").fetchall()
    # in the order of their draw (_draw): a run stopped anywhere has run a uniform random sample
    specs.sort(key=lambda s: _draw(name, s[1], s[2]))
    todo = [s[:5] for s in specs[:sample] if s[5]]
    if not todo:
        return
    lines, first_line = _coverage_map(name, tree), _first_line(name)
    full = _test_command(tests)
    tfile = WORK / f"{name}.time"
    t0, before = time.perf_counter(), float(tfile.read_text().split()[0]) if tfile.exists() else 0.0
    for job, op, occ, row0, row1 in todo:
        sel = _tests_of(lines, first_line, range(row0, row1 + 1))
        if sel is None:
            # no fast test runs the line (nor the import): none can see the change (the tests are
            # deterministic, and a change to a line cannot make it reached); the slow pass decides
            out = {"worker_outcome": "normal", "test_outcome": "survived", "output": "no fast test runs the line",
                   "diff": _raw_diff(src, op, occ, tree)}
        else:
            # the tests that run the line ([]: it runs at import, so every test), then all of them
            # unless a test failed (pytest's usage errors, "no tests ran", are no kill)
            out = _mutate_and_test(src, op, occ, _test_command(sel), tree, timeout) if sel else {}
            if not _failed(out):
                out = _mutate_and_test(src, op, occ, full, tree, timeout)
        con.execute("insert into work_results (worker_outcome, output, test_outcome, diff, job_id) "
                    "values (?, ?, ?, ?, ?)",
                    (str(out.get("worker_outcome", "abnormal")).upper(), (out.get("output") or "")[-4000:],
                     (str(out["test_outcome"]).upper() if out.get("test_outcome") else None),
                     out.get("diff", ""), job))
        con.commit()
        tfile.write_text(f"{before + time.perf_counter() - t0:.0f} 0\n")  # a stopped run keeps its time


def _draw(name: str, operator: str, occurrence: int) -> float:
    """A mutant's place in the random order of the runs, uniform in [0, 1): from a hash of the
    module, operator and occurrence, so the same on every machine. The mutants drawn below the
    first one not run yet are a uniform random sample of the module's mutants (``_sample``)."""
    h = hashlib.sha256(f"{name}:{operator}:{occurrence}".encode()).hexdigest()
    return int(h[:15], 16) / 16**15


def _triaged_equivalent(name: str, survivor) -> bool:
    """Whether the triage explains a survivor ``(job, operator, occurrence, diff)`` as equivalent
    (no test can kill it: the slow pass and a recheck skip it)."""
    old, new = _diff_lines(survivor[3] or "")
    m = {"module": name, "operator": survivor[1], "old": old, "new": new}
    return _is_equivalent(m, _triage()["equivalent"]) is not None


def _survivors(con) -> list:
    """(job, operator, occurrence, diff) of each mutant of a session that the fast tests missed."""
    return con.execute(
        "select m.job_id, m.operator_name, m.occurrence, r.diff from mutation_specs m join work_results r "
        "on m.job_id = r.job_id where lower(r.worker_outcome) = 'normal' and lower(r.test_outcome) = 'survived'"
    ).fetchall()


def _slow_pass(name: str, survivors, tree: Path, verdicts: dict) -> None:
    """Each survivor ``(job, operator, occurrence)`` without a verdict, against the module's tests
    with the slow ones; the verdicts are saved after each, so a stopped pass resumes."""
    src, tests = MODULES[name]
    slow_file = WORK / f"{name}.slow.json"
    slow_cmd = _test_command(tests, "-m slow", fast=False)
    todo = [sv for sv in survivors if sv[0] not in verdicts]
    if not todo:
        return
    lines, first_line = _coverage_map(name, tree, slow=True), _first_line(name)  # which slow tests run each line
    con = sqlite3.connect(WORK / f"{name}.sqlite")
    rows = dict(((j, (r0, r1)) for j, r0, r1 in con.execute(
        "select job_id, start_pos_row, end_pos_row from mutation_specs")))
    for job, op, occ in todo:
        r0, r1 = rows.get(job, (0, 0))
        sel = _tests_of(lines, first_line, range(r0, r1 + 1))
        if sel is None:
            killed = False  # no slow test runs the line: none can see the change
        else:
            # the slow tests that run the line ([]: it runs at import, so all of them); a mutant that
            # makes them run past 20 minutes (an endless loop) is killed, as in the fast pass
            out = _mutate_and_test(src, op, occ, _test_command(sel, fast=False) if sel else slow_cmd, tree,
                                   timeout=1200.0)
            # (pytest exits 5 when no test is marked slow: a survivor too)
            killed = _failed(out) or out.get("worker_outcome") == "timeout"
        verdicts[job] = "killed" if killed else "survived"
        slow_file.write_text(json.dumps(verdicts))


def run_module(name: str, k: int, fresh: bool = False, sample: int | None = None) -> dict:
    """Every mutant of one module (or the first ``sample`` drawn) in copy ``k``: init and filter (unless a session is there to
    resume), exec with the fast tests, then each survivor against the slow tests."""
    tree = _tree(k)
    src, tests = MODULES[name]
    t0 = time.perf_counter()
    base = _baseline_seconds(tree, tests)
    cfg = _config(name, tree, timeout=max(120.0, 4 * base))
    session = WORK / f"{name}.sqlite"
    slow_file = WORK / f"{name}.slow.json"
    env = _env()
    if fresh or not session.exists():
        session.unlink(missing_ok=True)
        slow_file.unlink(missing_ok=True)
        (WORK / f"{name}.time").unlink(missing_ok=True)
        (WORK / f"{name}.sha256").write_text(_source_hash(name))  # the source its mutants are made from
        for cmd in ([_bin("cosmic-ray"), "init", str(cfg), str(session)],
                    [_bin("cr-filter-operators"), str(session), str(cfg)],
                    [_bin("cr-filter-pragma"), str(session)]):
            subprocess.run(cmd, cwd=tree, env=env, check=True, capture_output=True)
        if not fresh:
            _resume_from_record(name, session)
    _fast_pass(name, session, tree, timeout=max(120.0, 4 * base), sample=sample)  # resumes: only mutants without a result
    # the survivors of the fast tests, again against the tests marked slow (the fast ones passed)
    verdicts = json.loads(slow_file.read_text()) if slow_file.exists() else {}
    con = sqlite3.connect(session)
    t_slow = time.perf_counter()
    _slow_pass(name, [s[:3] for s in _survivors(con) if not _triaged_equivalent(name, s)], tree, verdicts)
    seconds = time.perf_counter() - t0
    prev = WORK / f"{name}.time"  # (the fast pass keeps it up to date; the slow pass adds to it)
    total = float(prev.read_text().split()[0]) if prev.exists() else seconds
    prev.write_text(f"{total + (time.perf_counter() - t_slow):.0f} {base:.1f}\n")
    return {"module": name, "seconds": seconds, "baseline": base}


def recheck_module(name: str, k: int) -> dict:
    """The survivors of a module's last run, again against the current tests (fast, then slow):
    after tests were added, without running every mutant again. A survivor now killed is recorded
    as killed in the session; the slow verdicts are recomputed. Refused when the source changed
    since the run (the mutant's diff differs from the stored one: run the module afresh)."""
    tree = _tree(k)
    src, tests = MODULES[name]
    session = WORK / f"{name}.sqlite"
    if not session.exists():
        if _record(name) is None:
            raise SystemExit(f"{name}: no run to recheck (run: python scripts/mutation.py {name})")
        return _recheck_record(name, tree)
    t0 = time.perf_counter()
    con = sqlite3.connect(session)
    surv = [sv for sv in _survivors(con) if not _triaged_equivalent(name, sv)]
    fast_cmd = _test_command(tests)
    rows = dict(((j, (r0, r1)) for j, r0, r1 in con.execute(
        "select job_id, start_pos_row, end_pos_row from mutation_specs")))
    lines, first_line = _coverage_map(name, tree), _first_line(name)
    still, now_killed = [], 0
    for job, op, occ, diff in surv:
        # the tests that run the line first (a quick kill), then all the fast tests
        sel = _tests_of(lines, first_line, range(rows[job][0], rows[job][1] + 1))
        out = _mutate_and_test(src, op, occ, _test_command(sel), tree) if sel else {}
        if not _failed(out):
            out = _mutate_and_test(src, op, occ, fast_cmd, tree)
        if _diff_lines(out.get("diff", "")) != _diff_lines(diff or ""):
            raise SystemExit(f"{name}: {src} changed since its run ({op} #{occ} is another mutant now); "
                             f"run it afresh: python scripts/mutation.py {name} --fresh")
        if _failed(out):
            con.execute("update work_results set test_outcome = 'KILLED' where job_id = ?", (job,))
            con.commit()
            now_killed += 1
        else:
            still.append((job, op, occ))
    verdicts = {}  # the slow verdicts are recomputed for the survivors left
    (WORK / f"{name}.slow.json").write_text("{}")
    _slow_pass(name, still, tree, verdicts)
    print(f"{name}: {now_killed} of {len(surv)} survivors now killed by the fast tests, "
          f"{sum(v == 'killed' for v in verdicts.values())} more by the slow ones", flush=True)
    return {"module": name, "seconds": time.perf_counter() - t0, "baseline": float("nan")}


def _recheck_record(name: str, tree: Path) -> dict:
    """``recheck_module`` from the committed record of the last run (no session on this machine):
    its survivors, fast tests then slow, and the record rewritten with the new outcomes."""
    t0 = time.perf_counter()
    src, tests = MODULES[name]
    rec = _record(name)
    fast_cmd, slow_cmd = _test_command(tests), _test_command(tests, "-m slow", fast=False)
    todo = [m for m in rec["mutants"] if m["outcome"] in ("survived", "unchecked")
            and _is_equivalent(dict(m, module=name), _triage()["equivalent"]) is None]
    fast_kills = slow_kills = 0
    for m in todo:
        out = _mutate_and_test(src, m["operator"], m["occurrence"], fast_cmd, tree)
        if _diff_lines(out.get("diff", "")) != (m["old"], m["new"]):
            raise SystemExit(f"{name}: {src} changed since its run ({m['operator']} #{m['occurrence']} is "
                             f"another mutant now); run it afresh: python scripts/mutation.py {name} --fresh")
        if _failed(out):
            m["outcome"], fast_kills = "killed", fast_kills + 1
        else:
            out = _mutate_and_test(src, m["operator"], m["occurrence"], slow_cmd, tree)
            killed = _failed(out)
            m["outcome"] = "killed-slow" if killed else "survived"
            slow_kills += killed
        _write_record(rec)  # a stopped recheck keeps its verdicts
    _write_record(rec)
    print(f"{name}: {fast_kills} of {len(todo)} survivors now killed by the fast tests, "
          f"{slow_kills} more by the slow ones", flush=True)
    return {"module": name, "seconds": time.perf_counter() - t0, "baseline": float("nan")}


# --------------------------------------------------------------------------- results and triage


def _diff_lines(diff: str):
    """The original and the mutated line of a one-line mutant's unified diff."""
    old = [ln[1:] for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    new = [ln[1:] for ln in diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return " ".join(s.strip() for s in old), " ".join(s.strip() for s in new)


def _source_hash(name: str) -> str:
    return hashlib.sha256((ROOT / MODULES[name][0]).read_bytes()).hexdigest()


def _record(name: str):
    f = RESULTS / f"{name}.json"
    return json.loads(f.read_text()) if f.exists() else None


def _write_record(rec: dict) -> None:
    """One mutant a line, so that a rerun's changes read as a short diff."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    body = ",\n".join(json.dumps({k: v for k, v in m.items() if k != "module"}, sort_keys=True)
                      for m in rec["mutants"])
    head = json.dumps({k: v for k, v in rec.items() if k != "mutants"}, sort_keys=True)[:-1]
    (RESULTS / f"{rec['module']}.json").write_text(head + ', "mutants": [\n' + body + "\n]}\n")


def save_record(name: str) -> None:
    """Write ``mutation/results/NAME.json`` from the module's session on this machine: every
    mutant (operator, occurrence, line, original and mutated text, outcome), the mutants not run
    yet, the run time and the hash of the source the mutants were made from."""
    session = WORK / f"{name}.sqlite"
    if not session.exists():
        return
    muts = _results_from_session(name)
    if not muts:  # nothing ran yet: keep the record there is
        return
    tfile = WORK / f"{name}.time"
    RESULTS.mkdir(parents=True, exist_ok=True)
    sha = WORK / f"{name}.sha256"
    rec = {"module": name, "source": MODULES[name][0],
           "source_sha256": sha.read_text().strip() if sha.exists() else _source_hash(name),
           "seconds": float(tfile.read_text().split()[0]) if tfile.exists() else None,
           "not_run": pending(name), "sample_below": _sample_cut(name), "mutants": muts}
    _write_record(rec)


def _sample_cut(name: str) -> float:
    """Every mutant drawn (``_draw``) below this has run: they are the module's random sample
    (1.0 when all ran). From the session on this machine, else from the committed record."""
    session = WORK / f"{name}.sqlite"
    if not session.exists():
        rec = _record(name) or {}
        return rec.get("sample_below", 1.0 if rec.get("not_run") == 0 else 0.0)
    con = sqlite3.connect(session)
    left = con.execute("select m.operator_name, m.occurrence from mutation_specs m left join work_results r "
                       "on m.job_id = r.job_id where r.job_id is null").fetchall()
    return min((_draw(name, op, occ) for op, occ in left), default=1.0)


def _wilson(k: int, n: int, z: float = 1.96):
    """The Wilson score interval of a proportion k / n (95 % for z = 1.96)."""
    if n == 0:
        return float("nan"), float("nan")
    p, d = k / n, 1 + z * z / n
    c, h = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def results(name: str) -> list:
    """One dict per mutant that ran: operator, line, original and mutated text, outcome (from the
    session on this machine, else from the committed record of the last run)."""
    session = WORK / f"{name}.sqlite"
    if not session.exists():
        rec = _record(name)
        return [dict(m, module=name) for m in rec["mutants"]] if rec else []
    return _results_from_session(name)


def _results_from_session(name: str) -> list:
    session = WORK / f"{name}.sqlite"
    con = sqlite3.connect(session)
    rows = con.execute(
        "select m.job_id, m.operator_name, m.occurrence, m.start_pos_row, r.worker_outcome, r.test_outcome, "
        "r.diff from mutation_specs m join work_results r on m.job_id = r.job_id "
        "order by m.start_pos_row, m.operator_name, m.occurrence").fetchall()
    sk = WORK / f"{name}.slow.json"
    verdicts = json.loads(sk.read_text()) if sk.exists() else {}
    out = []
    for job, op, occ, row, worker, test, diff in rows:
        worker, test = (worker or "").lower(), (test or "").lower()
        if worker == "skipped":  # filtered out (operator not kept, or a pragma)
            continue
        old, new = _diff_lines(diff or "")
        outcome = test if worker == "normal" else worker
        if outcome == "survived":  # the fast tests missed it: what did the slow ones say?
            outcome = {"killed": "killed-slow", None: "unchecked"}.get(verdicts.get(job), "survived")
        out.append({"module": name, "operator": op, "occurrence": occ, "line": row, "old": old, "new": new,
                    "outcome": outcome})
    return out


def pending(name: str) -> int:
    """Mutants of the module's session that have not run yet (a run stopped before its end)."""
    session = WORK / f"{name}.sqlite"
    if not session.exists():
        rec = _record(name)
        return rec["not_run"] if rec else 0
    con = sqlite3.connect(session)
    return con.execute("select count(*) from mutation_specs m left join work_results r on m.job_id = r.job_id "
                       "where r.job_id is null").fetchone()[0]


def _triage() -> dict:
    if not TRIAGE.exists():
        return {"equivalent": [], "curated": []}
    data = tomllib.loads(TRIAGE.read_text())
    return {"equivalent": data.get("equivalent", []), "curated": data.get("curated", [])}


def _is_equivalent(m: dict, equivalents) -> str | None:
    for e in equivalents:
        if (e["module"] == m["module"] and e["operator"] == m["operator"]
                and e["old"].strip() == m["old"] and e["new"].strip() == m["new"]):
            return e["reason"]
    return None


def _equivalent_kind(m: dict, equivalents) -> str | None:
    """``exact`` or ``numerical`` (the triage's ``kind``) for a mutant the triage explains."""
    for e in equivalents:
        if (e["module"] == m["module"] and e["operator"] == m["operator"]
                and e["old"].strip() == m["old"] and e["new"].strip() == m["new"]):
            return e.get("kind", "exact")
    return None


NOTES = "<!-- hand-written notes on the runs below: --report keeps them -->"


def report() -> int:
    tri = _triage()
    notes = REPORT.read_text().split(NOTES, 1)[1] if REPORT.exists() and NOTES in REPORT.read_text() else "\n"
    lines = ["# Mutation testing of the scientific core", "",
             "Made by `python scripts/mutation.py` (cosmic-ray; see its docstring for the operators and",
             "the test files of each module). Kill rate = killed / (mutants - equivalent); timeouts count",
             "as killed, incompetent mutants (that cannot run at all) are left out.", "",
             "A mutant the fast tests missed is run again against the slow ones; `unchecked` counts those",
             "whose second run had not happened when the run stopped (the kill rate is then a range), and",
             "`not run` those the stopped run had not reached (a rerun resumes there).", "",
             "The mutants run in a random order (a hash of each, the same on every machine), so that a",
             "stopped run has run a uniform random sample of its module: `random sample` is the kill rate",
             "of the non-equivalent mutants drawn before the first one not run, with its 95 % Wilson",
             "interval (the earlier line-ordered runs of rmt, state_evolution and model count where their",
             "mutants fall in that order).", "",
             "The equivalent mutants are of two kinds (`kind` in `mutation/triage.toml`): *exact* ones change",
             "no output at all (a redundant guard, a placeholder in a masked branch, a cache size), *numerical*",
             "ones change outputs only below the accuracy that is measured and tested (a Newton step after",
             "convergence, a switch between two forms that agree to rounding, a quadrature tolerance's",
             "bookkeeping). `equivalent` shows them as exact + numerical; the strict rate counts the",
             "numerical ones as survivors.", "",
             "| module | mutants run | not run | killed (by slow tests) | timeout | survived | equivalent | unchecked "
             "| incompetent | kill rate (run) | strict | random sample (95 % CI) | run (s) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    untriaged = []
    for name in MODULES:
        save_record(name)  # the committed record follows this machine's session, when there is one
        res = results(name)
        if not res:
            continue
        killed = sum(m["outcome"] in ("killed", "killed-slow") for m in res)
        by_slow = sum(m["outcome"] == "killed-slow" for m in res)
        timeout = sum(m["outcome"] == "timeout" for m in res)
        incompetent = sum(m["outcome"] == "incompetent" for m in res)
        unchecked = sum(m["outcome"] == "unchecked" for m in res)
        surv = [m for m in res if m["outcome"] == "survived"]
        # a survivor of the fast tests explained in the triage is equivalent whatever the slow ones say
        equiv = [m for m in res if m["outcome"] in ("survived", "unchecked") and _is_equivalent(m, tri["equivalent"])]
        unchecked -= sum(m["outcome"] == "unchecked" for m in equiv)
        left = [m for m in res if m["outcome"] in ("survived", "unchecked")
                and not _is_equivalent(m, tri["equivalent"])]
        untriaged += left
        # the strict rate counts the survivors that change results below the tested accuracy
        # (kind = "numerical" in the triage) as survivors; only the exact equivalents are left out
        numerical = sum(_equivalent_kind(m, tri["equivalent"]) == "numerical" for m in equiv)
        strict_denom = len(res) - incompetent - len(equiv) + numerical
        strict = f"{100 * (killed + timeout) / strict_denom:.1f} %" if strict_denom else "-"
        denom = len(res) - incompetent - len(equiv)
        lo = (killed + timeout) / denom if denom else float("nan")
        hi = (killed + timeout + unchecked) / denom if denom else float("nan")
        # an unchecked survivor may yet be killed by the slow tests: the rate lies between lo and hi
        rate_text = f"{100 * lo:.1f} %" if not unchecked else f"{100 * lo:.1f}-{100 * hi:.1f} %"
        # the random sample: the mutants drawn below the first not run (all of them after a full run)
        cut = _sample_cut(name)
        smp = [m for m in res if _draw(name, m["operator"], m["occurrence"]) < cut and m["outcome"] != "incompetent"
               and not (m["outcome"] in ("survived", "unchecked") and _is_equivalent(m, tri["equivalent"]))]
        s_lo = sum(m["outcome"] in ("killed", "killed-slow", "timeout") for m in smp)
        s_hi = s_lo + sum(m["outcome"] == "unchecked" for m in smp)
        if pending(name) == 0 or not smp:
            sample_text = "(all run)" if pending(name) == 0 else "-"
        else:
            a, b = _wilson(s_lo, len(smp))[0], _wilson(s_hi, len(smp))[1]
            sample_text = (f"{100 * s_lo / len(smp):.1f}" + (f"-{100 * s_hi / len(smp):.1f}" if s_hi > s_lo else "")
                           + f" % of {len(smp)} ({100 * a:.0f}-{100 * b:.0f} %)")
        rec = _record(name)
        if rec and rec["source_sha256"] != _source_hash(name):
            rate_text += " (source changed since the run)"
        tfile, rec = WORK / f"{name}.time", _record(name)
        secs = (tfile.read_text().split()[0] if tfile.exists()
                else f"{rec['seconds']:.0f}" if rec and rec.get("seconds") else "?")
        lines.append(f"| {name} | {len(res)} | {pending(name)} | {killed} ({by_slow}) | {timeout} | {len(surv)} | "
                     f"{len(equiv) - numerical} + {numerical} | {unchecked} | {incompetent} | {rate_text} | {strict} | "
                     f"{sample_text} | {secs} |")
    lines += ["", f"## Survivors of the fast tests not triaged ({len(untriaged)})", ""]
    for m in untriaged:
        pending_slow = " (slow pass pending)" if m["outcome"] == "unchecked" else ""
        lines.append(f"- `{m['module']}` line {m['line']}, {m['operator'].split('/')[-1]}{pending_slow}: "
                     f"`{m['old']}` -> `{m['new']}`")
    REPORT.write_text("\n".join(lines) + "\n\n" + NOTES + notes)
    print("\n".join(lines))
    return 1 if untriaged else 0


# --------------------------------------------------------------------------- the curated subset (CI)


def _occurrence(name: str, operator: str, old: str, new: str, tree: Path, cfg: Path):
    """The occurrence number of the mutant ``old -> new`` of ``operator`` (cosmic-ray counts them)."""
    session = WORK / f"curated-{name}.sqlite"
    if not session.exists():
        subprocess.run([_bin("cosmic-ray"), "init", str(cfg), str(session)], cwd=tree, env=_env(),
                       check=True, capture_output=True)
    con = sqlite3.connect(session)
    rows = con.execute("select occurrence, start_pos_row from mutation_specs where operator_name = ?",
                       (operator,)).fetchall()
    src = (tree / MODULES[name][0]).read_text().splitlines()
    hits = [occ for occ, row in rows if old.strip() in src[row - 1]]
    return hits


def _raw_diff(src: str, operator: str, occ: int, tree: Path) -> str:
    """The unified diff of one mutant, without running any test (the command is ``true``)."""
    return _mutate_and_test(src, operator, occ, "true", tree).get("diff") or ""


def _mutant_diff(src: str, operator: str, occ: int, tree: Path):
    """The original and mutated line of one mutant, without running any test."""
    return _diff_lines(_raw_diff(src, operator, occ, tree))


def curated(jobs: int = 1) -> int:
    """Each curated mutant (``[[curated]]`` in the triage file) must be killed by its tests.

    The mutants are found first, one after another in one copy; then ``jobs`` of them are
    tested at a time, each in its own copy of the package (their tests run in one process).
    """
    tri = _triage()
    if not tri["curated"]:
        print("no [[curated]] mutants in", TRIAGE)
        return 1
    jobs = max(1, jobs)
    trees = [_tree("ci")] + [_tree(f"ci-{k}") for k in range(1, jobs)]  # not copies a full run uses
    for f in WORK.glob("curated-*.sqlite"):
        f.unlink()
    failed = 0
    t_all = time.perf_counter()
    todo = []  # (curated entry, module file, occurrence, test command)
    for c in tri["curated"]:
        name = c["module"]
        src, tests = MODULES[name]
        cfg = _config(name, trees[0], timeout=600)
        occs = _occurrence(name, c["operator"], c["old"], c["new"], trees[0], cfg)
        cmd = _test_command(c.get("tests", tests), f"-k {json.dumps(c['select'])}" if "select" in c else "",
                            fast=False)
        match = [occ for occ in occs if c["new"].strip() in _mutant_diff(src, c["operator"], occ, trees[0])[1]]
        if not match:  # the code moved, or another mutant of the same operator on this line
            failed += 1
            print(f"NOT FOUND {name} {c['operator']}: {c['old']} -> {c['new']} (the code moved: update the "
                  f"triage file)", flush=True)
            continue
        todo.append((c, src, match[0], cmd))
    free = queue.Queue()
    for tree in trees:
        free.put(tree)

    def one(item):
        c, src, occ, cmd = item
        tree = free.get()
        try:
            t0 = time.perf_counter()
            out = _mutate_and_test(src, c["operator"], occ, cmd, tree)
        finally:
            free.put(tree)
        old, new = _diff_lines(out.get("diff") or "")
        outcome = str(out.get("test_outcome") or out.get("worker_outcome")).lower()
        # killed by a failing test, not by a test that could not even be collected
        ok = outcome == "killed" and re.search(r"\b\d+ failed\b", out.get("output") or "") is not None
        print(f"{'killed  ' if ok else 'SURVIVED'} {c['module']}: {old} -> {new}  "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        return ok

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        failed += sum(not ok for ok in pool.map(one, todo))
    print(f"curated mutants: {len(tri['curated']) - failed} of {len(tri['curated'])} killed "
          f"in {time.perf_counter() - t_all:.0f} s ({jobs} at a time)")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help=f"core modules (default: all): {', '.join(MODULES)}")
    ap.add_argument("--jobs", type=int, default=1, help="modules run at a time, each in its own copy")
    ap.add_argument("--curated", action="store_true", help="run the curated mutants only (CI)")
    ap.add_argument("--report", action="store_true", help="only rewrite the report from the last runs")
    ap.add_argument("--fresh", action="store_true", help="start the modules' sessions afresh (default: resume)")
    ap.add_argument("--recheck", action="store_true",
                    help="run only the last run's survivors again, against the current tests")
    ap.add_argument("--sample", type=int, default=None, metavar="N",
                    help="run only the first N mutants of each module in the random order (a uniform "
                         "sample; a later, larger N goes on from there)")
    args = ap.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        ap.error(f"--sample must be a positive number of mutants, not {args.sample}")
    WORK.mkdir(parents=True, exist_ok=True)
    if args.curated:
        return curated(args.jobs)
    if not args.report:
        names = args.modules or list(MODULES)
        bad = [n for n in names if n not in MODULES]
        if bad:
            ap.error(f"unknown module(s) {bad}; the core modules are {list(MODULES)}")
        jobs = max(1, args.jobs)
        free = queue.Queue()
        for k in range(jobs):
            free.put(k)

        def one(name):
            k = free.get()  # a copy no other module is using
            try:
                r = recheck_module(name, k) if args.recheck else run_module(name, k, args.fresh, args.sample)
                print(f"{r['module']}: {r['seconds']:.0f} s (tests unmutated: {r['baseline']:.1f} s)", flush=True)
                return r
            except SystemExit as e:  # (one module's unmutated tests failing does not stop the others)
                print(f"{name}: not run: {e}", flush=True)
                return None
            finally:
                free.put(k)

        with ThreadPoolExecutor(max_workers=jobs) as ex:
            results_ = list(ex.map(one, names))
        if not all(results_):
            report()
            return 2
    return report()


if __name__ == "__main__":
    sys.exit(main())
