"""The paper-scale finite-size figures, and float32 against float64, on an accelerator in one timed run.

Usage (from the repository root, on the machine with the GPU):
    python scripts/device_paper_run.py --out DIR --deadline 300 --jobs env amp-hardmax amp-se deep
    python scripts/device_paper_run.py --out DIR --deadline 20 --scale smoke --jobs env deep   # a check

Each job runs in its own process (so that one failure or hang costs only that job, and each
process has the accelerator's memory to itself), with its output in ``DIR/logs/JOB.log`` and a
time limit: what is left of ``--deadline`` (seconds from the start of this script) less a reserve
for packing the results. After each job ``DIR/summary.json`` says what ran, for how long and with
which exit status, and ``DIR/run.tar.gz`` holds the logs and the figures' files so far, so that a
run cut short keeps what it finished. The jobs:

``env``            the machine: ``nvidia-smi``, JAX's version, backend and devices, the algorithms' default
                   dtype, and the measured matrix-product rate in float32 and float64
                   (``benchmarks/run.py``'s ``matmul_rate``)
``amp-hardmax``,   ``python -m aim_tutorial reproduce FIGURE --scale paper`` (the figures' sizes are
``amp-se``,        ``aim_tutorial.config._SIZES["reproduce"]["paper"]``); ``gd`` computes
``deep``, ``gd``   ``gd-single`` and ``gd-averaged`` in one process (one computation, two figures)
``precision-gd``   ``benchmarks/precision.py`` (32 students x 1000 Adam steps, d = 100, float32 against
                   float64) on the accelerator
``precision-gamp`` ``benchmarks/precision.py --gamp`` on the accelerator
``gd-par``         the data of ``gd-single`` and ``gd-averaged`` at paper scale (d = 200, T = 2..6, 9 values of
                   x, 3 data seeds, 32 students x 1000 Adam steps) by ``scripts/gd_paper_data.py --scale paper``,
                   one process per T, all at once: each (T, x) is a new program, and the five processes
                   compile on the host's cores in parallel while sharing the accelerator
                   (``XLA_PYTHON_CLIENT_PREALLOCATE=false``); ``DIR/figures/gd_T{T}.csv``, a row per data set
``gd-missing``     the data sets of that grid that ``benchmarks/gpu/full_precision/gd_softmax_d200.csv`` has no
                   row for (:func:`gd_missing`), one process each, all at once;
                   ``DIR/figures/gd_T{T}_x{x}_seed{seed}.csv``, to be merged into that file with
                   ``scripts/merge_tables.py`` (as its header's note says the earlier parts were)
``gamp-batch``     ``benchmarks/gamp_targets.py batch``: 8 GAMP-RIE instances at d = 80 one after another and as
                   one program
``gd-vs-amp``      chapter 6's same-instance study at d = 400 and 800 (x = 0.4 and 0.8, T = 2, 4 data sets each,
                   32 students x 1000 Adam steps and GAMP-RIE on each) by ``scripts/gd_vs_amp.py``, twice: with
                   full float32 products (``AIM_MATMUL_PRECISION=highest``) and with XLA's default (TF32), one
                   after another; ``DIR/figures/gd_vs_amp_{highest,default}.csv``, the same instances in both.
                   Within one file the data sets of one (d, x) share their shapes, so each program compiles
                   once per (d, x)

The times of the figures are the wall times of their processes (start-up and compilation
included) and, in each figure's CSV, the ``seconds`` column of each point.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_ENV = r"""
import json, os, platform, shutil, subprocess, sys
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import jax
import aim_tutorial as aim
from aim_tutorial.config import algorithm_dtype
from run import matmul_rate
info = dict(python=platform.python_version(), jax=jax.__version__, backend=jax.default_backend(),
            devices=[str(d) for d in jax.devices()], algorithm_dtype=str(algorithm_dtype()),
            aim_tutorial=getattr(aim, "__version__", "?"), cpu_count=os.cpu_count())
if shutil.which("nvidia-smi"):
    info["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                         "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
rates = {}
for dtype in ("float32", "float64"):
    for m, k in SHAPES:
        rates[f"{dtype}_{m}x{k}"] = matmul_rate(m, k, dtype, 10) / 1e9
info["matmul_gflops"] = rates
print("RESULT" + json.dumps(info))
"""

_GD_PARTS = r"""
import os, subprocess, sys, time
t0 = time.monotonic()
env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
procs = []
for name, args in PARTS:
    out = os.path.join(sys.argv[1], f"{name}.csv")
    log = open(os.path.join(sys.argv[1], f"{name}.log"), "w")
    procs.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "gd_paper_data.py"), *args,
                                   "--out", out], stdout=log, stderr=subprocess.STDOUT, env=env))
rcs = [p.wait() for p in procs]
print("RESULT" + repr(dict(rcs=rcs, wall_s=round(time.monotonic() - t0, 2))).replace("'", '"'), flush=True)
sys.exit(max(abs(r) for r in rcs))
"""

_SAME_PARTS = r"""
import os, subprocess, sys, time
t0 = time.monotonic()
rcs, walls = [], []
for name, precision, args in PARTS:  # one after another: each has the accelerator to itself
    env = dict(os.environ, AIM_MATMUL_PRECISION=precision)
    out = os.path.join(sys.argv[1], f"{name}.csv")
    t1 = time.monotonic()
    with open(os.path.join(sys.argv[1], f"{name}.log"), "w") as log:
        rcs.append(subprocess.call([sys.executable, os.path.join(ROOT, "scripts", "gd_vs_amp.py"), *args,
                                    "--out", out], stdout=log, stderr=subprocess.STDOUT, env=env))
    walls.append(round(time.monotonic() - t1, 2))
print("RESULT" + repr(dict(rcs=rcs, walls=walls, wall_s=round(time.monotonic() - t0, 2))).replace("'", '"'),
      flush=True)
sys.exit(max(abs(r) for r in rcs))
"""


def _same_parts(scale: str) -> list:
    """``gd-vs-amp``'s parts: (name, matrix-product precision, arguments of scripts/gd_vs_amp.py). The same
    instances (their keys name them) with full float32 products and with XLA's default (TF32 on recent
    NVIDIA GPUs), so that the two files can be compared row by row."""
    if scale == "smoke":
        args = ["--d", "10", "14", "--T", "2", "--x", "0.4", "0.8", "--seeds", "1", "--n-init", "4", "--steps", "10",
                "--max-iter", "20"]
    else:
        args = ["--d", "400", "800", "--T", "2", "--x", "0.4", "0.8", "--seeds", "4"]
    return [(f"gd_vs_amp_{p}", p, args) for p in ("highest", "default")]


#: the paper-scale GD data on the GPU so far (gd-missing runs the data sets it lacks)
GD_GPU_TABLE = os.path.join(ROOT, "benchmarks", "gpu", "full_precision", "gd_softmax_d200.csv")


def gd_missing(path: str = GD_GPU_TABLE) -> list:
    """The data sets ``(T, x, seed)`` of ``scripts/gd_paper_data.py --scale paper``'s grid (its ``T``, ``x``
    and ``seeds``, from the table's ``params``) that the table at ``path`` has no row for, sorted."""
    from aim_tutorial import datafiles

    t = datafiles.read(path)
    prm = t.header["params"]
    have = {(int(T), round(float(x), 6), int(s)) for T, x, s in zip(t.column("T"), t.column("x"), t.column("seed"))}
    grid = [(T, round(float(x), 6), s) for T in prm["T"] for x in prm["x"]
            for s in range(prm["first_seed"], prm["first_seed"] + prm["seeds"])]
    return sorted(g for g in grid if g not in have)


def _gd_parts(scale: str) -> tuple:
    """``gd-par``'s parts (one a T) and ``gd-missing``'s (one a missing data set), as (name, arguments)."""
    if scale == "smoke":
        base = ["--d", "16", "--n-init", "2", "--steps", "50"]
        par = [(f"gd_T{T}", base + ["--seeds", "1", "--x", "0.2", "0.6", "--T", str(T)]) for T in (2, 3)]
        missing = [(2, 0.2, 2), (3, 0.6, 2)]
    else:
        base = ["--scale", "paper"]
        par = [(f"gd_T{T}", base + ["--T", str(T)]) for T in (2, 3, 4, 5, 6)]
        missing = gd_missing()
    rest = [(f"gd_T{T}_x{x:g}_seed{s}", base + ["--T", str(T), "--x", f"{x:g}", "--first-seed", str(s), "--seeds", "1"])
            for T, x, s in missing]
    return par, rest


_FIGURES = r"""
import sys
from aim_tutorial import reproduce
for name in sys.argv[2:]:
    reproduce.reproduce(name, SCALE, out=sys.argv[1], progress=True, force=True)
    print("DONE", name, flush=True)
"""


def _jobs(scale: str, figs: str) -> dict:
    py = sys.executable
    fig = lambda *names: [py, "-c", _FIGURES.replace("SCALE", repr(scale)), figs, *names]  # noqa: E731
    precision = [py, os.path.join(ROOT, "benchmarks", "precision.py")]
    quick = ["--steps", "50", "--n-init", "4", "--d", "30"] if scale == "smoke" else []
    # the matrix products whose rates env measures: a large square one and GAMP-RIE's at the
    # paper's sizes ((2 n, d) @ (d, d), n = alpha d^2 at the largest alpha of amp-se and d = 80)
    shapes = ((256, 256),) if scale == "smoke" else ((8192, 8192), (2 * 8400, 200), (2 * 1600, 80))
    par, rest = _gd_parts(scale)
    gd_parts = lambda parts: [py, "-c", f"ROOT = {ROOT!r}\nPARTS = {parts!r}\n" + _GD_PARTS, figs]  # noqa: E731
    return {
        "env": [py, "-c", f"ROOT = {ROOT!r}\nSHAPES = {shapes!r}\n" + _ENV],
        "amp-hardmax": fig("amp-hardmax"),
        "amp-se": fig("amp-se"),
        "deep": fig("deep"),
        "gd": fig("gd-single", "gd-averaged"),
        "precision-gd": precision + ["--repeats", "1", *quick, "--out", "OUT/precision_gd.json"],
        "precision-gamp": precision + ["--gamp", "--out", "OUT/precision_gamp.json"],
        "gd-par": gd_parts(par),
        "gd-missing": gd_parts(rest),
        "gamp-batch": [py, os.path.join(ROOT, "benchmarks", "gamp_targets.py"), "batch"],
        "gd-vs-amp": [py, "-c", f"ROOT = {ROOT!r}\nPARTS = {_same_parts(scale)!r}\n" + _SAME_PARTS, figs],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--deadline", type=float, required=True, help="seconds for the whole run")
    p.add_argument("--reserve", type=float, default=15.0, help="seconds kept for packing the results")
    p.add_argument("--scale", default="paper", choices=("smoke", "book", "paper"))
    p.add_argument("--jobs", nargs="+", required=True)
    a = p.parse_args(argv)
    t_start = time.monotonic()
    out = os.path.abspath(a.out)
    logs, figs = os.path.join(out, "logs"), os.path.join(out, "figures")
    os.makedirs(logs, exist_ok=True)
    os.makedirs(figs, exist_ok=True)
    jobs = _jobs(a.scale, figs)
    unknown = [j for j in a.jobs if j not in jobs]
    if unknown:
        p.error(f"unknown jobs {unknown}; known: {sorted(jobs)}")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONUNBUFFERED="1")
    summary = dict(started=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   scale=a.scale, deadline_s=a.deadline, argv=sys.argv[1:], jobs=[])
    for name in a.jobs:
        left = a.deadline - a.reserve - (time.monotonic() - t_start)
        if left < 5:
            summary["jobs"].append(dict(job=name, skipped="no time left"))
            continue
        cmd = [c.replace("OUT/", out + "/") for c in jobs[name]]
        t0 = time.monotonic()
        with open(os.path.join(logs, f"{name}.log"), "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
            try:
                rc = proc.wait(timeout=left)
                timed_out = False
            except subprocess.TimeoutExpired:
                proc.kill()
                rc, timed_out = proc.wait(), True
        wall = time.monotonic() - t0
        row = dict(job=name, rc=rc, timed_out=timed_out, wall_s=round(wall, 2), limit_s=round(left, 1))
        with open(os.path.join(logs, f"{name}.log")) as f:
            text = f.read()
        results = [ln for ln in text.splitlines() if ln.startswith("RESULT")]
        if results:
            row["result"] = json.loads(results[-1][len("RESULT"):])
        summary["jobs"].append(row)
        print(f"[{time.monotonic() - t_start:7.1f} s] {name}: rc {rc}{' (timed out)' if timed_out else ''}, "
              f"{wall:.1f} s", flush=True)
        _pack(out, summary)
    summary["total_s"] = round(time.monotonic() - t_start, 2)
    _pack(out, summary)
    return 0


def _pack(out: str, summary: dict) -> None:
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    tmp = os.path.join(out, "run.tar.gz.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for sub in ("logs", "figures"):
            tar.add(os.path.join(out, sub), arcname=sub)
        for name in os.listdir(out):
            if name.endswith(".json") and name != "summary.json":
                tar.add(os.path.join(out, name), arcname=name)
    os.replace(tmp, os.path.join(out, "run.tar.gz"))


if __name__ == "__main__":
    sys.exit(main())
