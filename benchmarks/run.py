"""Benchmarks of the aim_tutorial package: state evolution, GAMP-RIE against d, gradient descent.

Usage (from the repository root):
    python benchmarks/run.py                 # the default sizes (a few minutes on 2 CPU cores)
    python benchmarks/run.py --quick         # tiny sizes, to check the script runs
    python benchmarks/run.py --amp-d 50 100 200 400 --gd-d 100 200   # larger sizes (a GPU)

For GAMP-RIE (per iteration) and gradient descent (per student-step, in float64 and
float32) it gives the floating-point operations (XLA's cost analysis of the compiled
program), their rate, and the rate of a matrix product of the same shape and dtype measured
in the same run: how far each is from the machine's limit. Gradient descent also runs with
its students on one device and spread over ``--devices`` host devices forced with
``XLA_FLAGS`` (a fresh process), and so do eight GAMP-RIE instances (``gamp_rie_batch``).
Every part is registered once, in :data:`PARTS` (the order of a full run); ``--only NAME ...``
reruns some parts alone into an existing ``results.json`` (``rerun`` in the file records which,
when and by what command).

Writes ``benchmarks/results.json`` (every number, with the machine, the versions,
the load average before and after) and ``benchmarks/gamp_scaling.png`` (time per iteration and
peak memory against d). The tables are rendered in one place, the book's benchmarks page
(``book/benchmarks.md``), which reads ``results.json``.
Every timing is the median of ``--repeats`` runs after one warm-up run (which pays
for compilation and the cached tables, reported separately as "cold"), each
ended by ``block_until_ready()`` on JAX outputs. Each GAMP-RIE size runs in a fresh
subprocess so that its peak resident memory (``resource.getrusage``) is its own;
``tracemalloc`` adds the peak of Python-side (numpy) allocations.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Callable, NamedTuple, Optional

HERE = os.path.dirname(os.path.abspath(__file__))


def _block(x):
    import jax

    return jax.block_until_ready(x)


def _timed(fn, repeats):
    """(cold seconds, median warm seconds, all warm seconds) of ``fn()``."""
    t0 = time.perf_counter()
    _block(fn())
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _block(fn())
        warm.append(time.perf_counter() - t0)
    return cold, statistics.median(warm), warm


def matmul_rate(m, k, dtype, repeats):
    """Measured rate (flop/s) of an ``(m, k) @ (k, k)`` matrix product in ``dtype``: the machine's
    limit for the contractions of GAMP-RIE and gradient descent, measured in the same run.

    The better of the product over all ``m`` rows and of one over a block of about 4 MB of rows
    (``aim_tutorial.amp.BLOCK_BYTES``), as GAMP-RIE takes its samples on a CPU: a product whose
    output passes 32 MB pays for mapping it afresh at every call, which is not arithmetic."""
    import jax
    import jax.numpy as jnp

    from aim_tutorial.amp import BLOCK_BYTES

    ka, kb = jax.random.split(jax.random.key(0))
    B = jax.random.normal(kb, (k, k), dtype=dtype)
    f = jax.jit(jnp.matmul)
    rates = []
    for rows in sorted({m, max(1, min(m, BLOCK_BYTES // (k * jnp.dtype(dtype).itemsize)))}):
        A = jax.random.normal(ka, (rows, k), dtype=dtype)
        _, warm, _ = _timed(lambda A=A: f(A, B), max(repeats, 5))
        rates.append(2.0 * rows * k * k / warm)
    return max(rates)


def machine():
    import jax
    import numpy as np
    import scipy

    import aim_tutorial

    dev = jax.devices()[0]
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return dict(
        date=f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        cpu=cpu,
        cpu_count=os.cpu_count(),
        affinity=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        device=f"{dev.platform} ({dev.device_kind})",
        python=platform.python_version(),
        jax=jax.__version__,
        numpy=np.__version__,
        scipy=scipy.__version__,
        aim_tutorial=aim_tutorial.__version__,
        loadavg_start=list(os.getloadavg()),
    )


# --------------------------------------------------------------------------- state evolution


def bench_se(repeats, n_softmax, n_hardmax):
    import numpy as np

    from aim_tutorial.state_evolution import solve_state_evolution

    out = {}
    a_soft = np.linspace(0.0, 0.2, n_softmax)
    cold, warm, allw = _timed(lambda: solve_state_evolution(a_soft, 0.5, T=2).mmse, repeats)
    out["softmax"] = dict(points=n_softmax, rho=0.5, T=2, cold_s=cold, warm_s=warm, warm_all_s=allw,
                          us_per_point=1e6 * warm / n_softmax)
    a_hard = np.geomspace(0.02, 5.0, n_hardmax)
    try:
        cold, warm, allw = _timed(lambda: solve_state_evolution(a_hard, 0.5, T=2, channel="hardmax").mmse, repeats)
    except Exception as e:  # reported, never silent
        print(f"  hardmax state evolution failed: {e!r}", flush=True)
        out["hardmax_error"] = repr(e)
        return out
    out["hardmax"] = dict(points=n_hardmax, rho=0.5, T=2, score="exact", cold_s=cold, warm_s=warm,
                          warm_all_s=allw, us_per_point=1e6 * warm / n_hardmax)
    return out


# --------------------------------------------------------------------------- GAMP-RIE


def amp_point(d, alpha, iters, repeats, dtype="float64"):
    """One size and dtype of the GAMP-RIE benchmark (run in a fresh process by :func:`bench_amp`)."""
    import jax

    import aim_tutorial as aim
    from aim_tutorial.amp import gamp_rie

    tracemalloc.start()
    k1, k2, k3 = jax.random.split(jax.random.key(d), 3)
    S = aim.sample_teacher(k1, d, 0.5)
    n = int(round(alpha * d * d))
    X, y = aim.sample_data(k2, S, n, 2)
    _block((X, y))

    def run():
        res = gamp_rie(X, y, 0.5, key=k3, max_iter=iters, tol=1e-300, min_iter=iters, patience=10**6,
                       dtype=dtype)
        return res

    t0 = time.perf_counter()
    res = run()
    _block(res.S_hat)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = run()
        _block(res.S_hat)
        warm.append((time.perf_counter() - t0) / max(res.n_iter, 1))
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    # the arithmetic of an iteration: the jitted half step (XLA's count; the host's RIE and
    # mmse are O(d) and O(1)) and the d x d eigendecomposition inside it
    from aim_tutorial.amp import gamp_rie_start

    problem, state = gamp_rie_start(X, y, 0.5, key=k3, dtype=dtype)
    flops = problem.half_step.flops(problem.X, problem.y, state.S_hat, state.c, state.Gamma,
                                    state.omega, state.V, 0.0, problem.alpha)
    rate = matmul_rate(n * 2, d, dtype, repeats)
    s_iter = statistics.median(warm)
    return dict(d=d, n=n, alpha=alpha, T=2, dtype=dtype, iters=int(res.n_iter), cold_s=cold,
                flops_per_iter=flops, gflops=flops / s_iter / 1e9, matmul_gflops=rate / 1e9,
                limit_s_per_iter=flops / rate, over_limit=s_iter / (flops / rate),
                s_per_iter=s_iter, s_per_iter_all=warm,
                peak_rss_mb=rss / 2**20, tracemalloc_peak_mb=py_peak / 2**20,
                data_mb=(X.size + y.size) * 8 / 2**20, naive_tensor_mb=n * d * d * 8 / 2**20)


def bench_amp(ds, alpha, iters, repeats, dtypes=("float64", "float32")):
    """The GAMP-RIE iteration at each size in each dtype, each in a fresh process (its peak memory
    its own); the exponent of the time against ``d`` is fitted on the float64 rows."""
    import numpy as np

    rows, all_rows = [], []
    for d in ds:
        for dtype in dtypes:
            cmd = [sys.executable, os.path.abspath(__file__), "--_amp-point", str(d), str(alpha), str(iters),
                   str(repeats), dtype]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            all_rows.append(row)
            if dtype == "float64":
                rows.append(row)
            print(f"  GAMP-RIE d = {d}, {dtype}: {row['s_per_iter'] * 1e3:.1f} ms/iteration, "
                  f"peak RSS {row['peak_rss_mb']:.0f} MB", flush=True)
    fit = {}
    if len(rows) >= 2:
        dd = np.log([r["d"] for r in rows])
        fit["time_exponent"] = float(np.polyfit(dd, np.log([r["s_per_iter"] for r in rows]), 1)[0])
        big = [r for r in rows if r["d"] >= np.median([r["d"] for r in rows])]
        if len(big) >= 2:
            fit["time_exponent_large_d"] = float(np.polyfit(np.log([r["d"] for r in big]),
                                                            np.log([r["s_per_iter"] for r in big]), 1)[0])
    return dict(alpha=alpha, T=2, rho=0.5, channel="softmax", iters=iters, rows=rows, rows_all_dtypes=all_rows,
                expected_exponent="4 at large d: O(n T d^2 + d^3) per iteration with n = alpha d^2", **fit)


# The reference cases and their targets, on 2 CPU cores, float64: the times of an
# independent implementation of the same algorithm (small) and of the arithmetic limit (big)
AMP_TARGETS = {
    "softmax_T3_d150_alpha0.05": dict(warm=0.27, cold=0.45),
    "hardmax_T2_d80_alpha1": dict(warm=0.95),
    "softmax_T2_d400_alpha0.13_80it": dict(warm=25.0),
    # 8 instances as one program (amp_device.gamp_rie_batch) against 8 runs of gamp_rie: warm speed-up
    "batch8_softmax_T2_d80_alpha0.3": dict(speedup=1.5),
    "batch8_hardmax_T2_d80_alpha1": dict(speedup=1.5),
}


XLA_ROUNDS = 3  # pairs of processes that time GAMP_COMPILER_OPTIONS against XLA's defaults


def _gamp_targets(which, cache, **env):
    """``benchmarks/gamp_targets.py which`` in a fresh process whose JAX persistent compilation
    cache is the directory ``cache`` (every program kept), ``env`` added to its environment: its
    ``RESULT`` line, a dict of cases."""
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1", **env)
    run = subprocess.run([sys.executable, os.path.join(HERE, "gamp_targets.py"), which],
                         capture_output=True, text=True, check=True, env=env)
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def bench_amp_targets(quick=False):
    """``benchmarks/gamp_targets.py small``, ``big`` and ``batch`` (``small`` only with ``quick``;
    ``batch`` in :data:`BATCH_ROUNDS` processes, :func:`bench_amp_batch`), each in a fresh process,
    with the targets beside them. Each runs with JAX's persistent
    compilation cache in a new empty directory; ``small`` runs twice, so that its cold time is
    given both ways: ``cold`` the first process (compilation included) and ``cold_cached`` a second
    process that reads the compiled programs from the cache (what a rerun of a chapter sees).
    Then what ``aim_tutorial.config.GAMP_COMPILER_OPTIONS`` changes: ``small`` in ``XLA_ROUNDS``
    pairs of fresh processes, with the options (``AIM_XLA_OPTIONS=tuned``) and with XLA's
    defaults (``default``), each with an empty cache: ``cold_xla_tuned``, ``warm_xla_tuned``,
    ``cold_xla_default``, ``warm_xla_default``, a list each. A small case's ``cold`` is then the
    median over the first process and those with the options (``cold_first_process`` the first)."""
    import tempfile

    from aim_tutorial.config import XLA_OPTIONS

    out = {}
    with tempfile.TemporaryDirectory() as cache:
        for which in ("small", "small") if quick else ("small", "small", "big"):
            for name, row in _gamp_targets(which, cache).items():
                if name in out:  # the second run of the same case: its cold time from the filled cache
                    out[name]["cold_cached"] = row["cold"]
                    out[name]["warm_second_process"] = row["warm"]
                else:
                    out[name] = row
    if not quick:
        out.update(bench_amp_batch())
    # the options against XLA's defaults: fresh processes, each with an empty cache, taken in turn
    # (tuned, default, tuned, ...) so that a shared machine's slow spells fall on both
    for _ in range(1 if quick else XLA_ROUNDS):
        for opt in XLA_OPTIONS:
            with tempfile.TemporaryDirectory() as cache:
                small = _gamp_targets("small", cache, AIM_XLA_OPTIONS=opt)
            for name, row in small.items():
                for what in ("cold", "warm"):
                    out[name].setdefault(f"{what}_xla_{opt}", []).append(row[what])
    for name, row in out.items():
        if "cold_xla_tuned" in row:  # the cold time: the median of every process that started empty
            row["cold_first_process"] = row["cold"]
            row["cold"] = statistics.median([row["cold"], *row["cold_xla_tuned"]])
        row["target"] = AMP_TARGETS.get(name, {})
        extra = f", {row['speedup']:.2f}x the sequential runs" if "speedup" in row else ""
        cached = (f" ({row['cold_cached']:.3f} s from the compilation cache; median cold / warm with the "
                  f"options {statistics.median(row['cold_xla_tuned']):.3f} / {statistics.median(row['warm_xla_tuned']):.3f} s,"
                  f" with XLA's defaults {statistics.median(row['cold_xla_default']):.3f} / "
                  f"{statistics.median(row['warm_xla_default']):.3f} s)" if "cold_cached" in row else "")
        print(f"  {name}: warm {row['warm']:.3f} s, cold {row['cold']:.3f} s{cached}{extra} "
              f"(targets {row['target']})", flush=True)
    return out


BATCH_ROUNDS = 3  # fresh processes of ``gamp_targets.py batch``: the batch's speed-up moves by 10-20 %


def bench_amp_batch(rounds=BATCH_ROUNDS):
    """``benchmarks/gamp_targets.py batch`` in ``rounds`` fresh processes, each with an empty
    compilation cache: the batch cases of :func:`bench_amp_targets`, with their targets. Each case
    is the process whose speed-up is the median, with every process's speed-up in
    ``speedup_runs`` (``--only amp_batch`` puts them into ``amp_targets``, the other cases kept)."""
    import tempfile

    runs = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as cache:
            runs.append(_gamp_targets("batch", cache))
    out = {}
    for name in runs[0]:
        rows = sorted((r[name] for r in runs), key=lambda row: row["speedup"])
        row = dict(rows[len(rows) // 2])
        row["speedup_runs"] = [r[name]["speedup"] for r in runs]
        row["target"] = AMP_TARGETS.get(name, {})
        out[name] = row
        print(f"  {name}: warm {row['warm']:.3f} s, cold {row['cold']:.3f} s, {row['speedup']:.2f}x the "
              f"sequential runs (median of {rounds} processes: "
              f"{', '.join(f'{v:.2f}' for v in row['speedup_runs'])}; targets {row['target']})", flush=True)
    return out


REPRODUCE_FIGURES = ("amp-se", "amp-hardmax")


def bench_reproduce_cache(quick=False):
    """``python -m aim_tutorial reproduce amp-se amp-hardmax`` (``--scale book``; ``smoke`` with
    ``quick``) in fresh processes: without the persistent compilation cache (``--no-compile-cache``,
    no ``JAX_COMPILATION_CACHE_DIR``), then twice with one new empty cache directory, the second run
    with another ``--seed`` (the same shapes: it reads the first run's programs). Wall times of the
    whole processes, and the cache's entries and size after them."""
    import shutil
    import tempfile

    scale = "smoke" if quick else "book"
    base = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    tmp = tempfile.mkdtemp(prefix="aim-reproduce-")
    cache = os.path.join(tmp, "cache")

    def run(seed, *extra, **env):
        cmd = [sys.executable, "-m", "aim_tutorial", "reproduce", *REPRODUCE_FIGURES, "--scale", scale,
               "--out", os.path.join(tmp, f"out{seed}"), "--seed", str(seed), "--no-progress", *extra]
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=dict(base, **env),
                       cwd=os.path.dirname(HERE))
        return time.perf_counter() - t0

    try:
        out = dict(figures=list(REPRODUCE_FIGURES), scale=scale,
                   no_cache_s=run(0, "--no-compile-cache"),
                   first_s=run(0, JAX_COMPILATION_CACHE_DIR=cache),
                   second_s=run(1, JAX_COMPILATION_CACHE_DIR=cache))
        files = [os.path.join(cache, f) for f in os.listdir(cache)]
        out.update(entries=len(files), cache_mb=sum(os.path.getsize(f) for f in files) / 2**20)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- gradient descent


def bench_gd(ds, n_init, steps, repeats, dtypes=("float64", "float32"), big_steps=10):
    """Full-batch Adam at each ``d`` of ``ds``: ``n_init`` students, ``steps`` steps (``big_steps``
    above d = 100, where a student-step costs O(n T d r) = O(d^4) and a few steps give its rate)."""
    import jax
    import jax.numpy as jnp

    import aim_tutorial as aim
    from aim_tutorial.config import compiled_flops
    from aim_tutorial._students import make_optimizer as _make_optimizer
    from aim_tutorial._students import run_chunk as _run_chunk
    from aim_tutorial.gd import _ChannelLoss, gd_loss, train_gd

    rows = []
    for d in ds:
        x = 0.4
        alpha = x / 4
        n = int(round(alpha * d * d))
        k1, k2, k3 = jax.random.split(jax.random.key(d), 3)
        S = aim.sample_teacher(k1, d, 0.5)
        X, y = aim.sample_data(k2, S, n, 2)
        _block((X, y))
        r = int(round(0.5 * d))
        n_steps = steps if d <= 100 else min(steps, big_steps)
        for dtype in dtypes:
            def fit(k3=k3, X=X, y=y, dtype=dtype, n_steps=n_steps):
                return train_gd(k3, X, y, 0.5, n_init=n_init, steps=n_steps, lr=0.1, progress=False,
                                dtype=dtype).S_hat

            cold, warm, allw = _timed(fit, repeats)
            # one student-step: the loss and its gradient (Adam's update is O(d r) more)
            Xc, yc = jnp.asarray(X, dtype), jnp.asarray(y, dtype)
            step = jax.jit(jax.value_and_grad(lambda W, Xc=Xc, yc=yc: gd_loss(W, Xc, yc, channel="softmax")))
            flops = compiled_flops(step.lower(jnp.zeros((d, r), dtype)).compile())
            rate = matmul_rate(n * 2, d, dtype, repeats)
            # the same steps as one program (train_gd cuts a run into 20 jitted chunks for its
            # progress bar; a chunk allocates its temporaries afresh, which a run of 10 steps pays
            # 10 times and a run of 1000 steps 20 times)
            W0 = jnp.asarray(0.1 * jax.random.normal(k3, (n_init, d, r)), dtype)
            carry = (W0, jax.vmap(_make_optimizer("adam", 0.1).init)(W0))
            chunk_args = (Xc, yc, (jnp.asarray(1.0, dtype), jnp.asarray(0.0, dtype)), None, jnp.asarray(0.1, dtype))
            chunk_kw = dict(student_loss=_ChannelLoss("softmax"), errors=None, optimizer="adam", n_records=1,
                            record_every=n_steps)
            _, warm_one, _ = _timed(lambda: _run_chunk(carry, *chunk_args, **chunk_kw)[0][0], repeats)
            per_step = warm_one / (n_init * n_steps)
            rows.append(dict(d=d, n=n, T=2, n_init=n_init, steps=n_steps, dtype=dtype, cold_s=cold, warm_s=warm,
                             warm_all_s=allw, warm_one_program_s=warm_one, steps_per_s=n_init * n_steps / warm,
                             samples_per_s=n_init * n_steps * n / warm, flops_per_student_step=flops,
                             gflops=flops / per_step / 1e9, matmul_gflops=rate / 1e9,
                             over_limit=per_step / (flops / rate)))
            print(f"  GD d = {d}, {dtype}: {rows[-1]['steps_per_s']:.0f} student-steps/s, "
                  f"{rows[-1]['gflops']:.1f} GFLOP/s against {rows[-1]['matmul_gflops']:.1f} for a "
                  "matrix product", flush=True)
    return dict(optimizer="adam", lr=0.1, rho=0.5, alpha=0.1, rows=rows)


GD_TARGET = dict(d=100, alpha=0.1, n_init=32, steps=1000, speedup=1.7, error_diff=1e-3)


def bench_gd_target(quick=False):
    """The gradient-descent target: 32 students x 1000 Adam steps at d = 100 (softmax, T = 2,
    rho = 0.5, alpha = 0.1, lr 0.1), in float64 and in float32, one cold run and the median of three
    warm runs each; the speed-up of float32 and the difference of the two final errors
    ``||S_hat - S||_F^2 / d``. (Timed by hand, not by ``_timed``: the cold run's estimate gives the
    error, which a separate run would cost 20 s more.)"""
    import jax
    import numpy as np

    import aim_tutorial as aim
    from aim_tutorial.gd import train_gd

    t = dict(GD_TARGET)
    if quick:
        t.update(d=20, n_init=2, steps=20)
    d = t["d"]
    n = int(round(t["alpha"] * d * d))
    k1, k2, k3 = jax.random.split(jax.random.key(d), 3)
    S = aim.sample_teacher(k1, d, 0.5)
    X, y = aim.sample_data(k2, S, n, 2)
    _block((X, y, S))
    out = dict(t, n=n)
    for dtype in ("float64", "float32"):
        def fit(dtype=dtype):
            return train_gd(k3, X, y, 0.5, n_init=t["n_init"], steps=t["steps"], lr=0.1, progress=False,
                            dtype=dtype).S_hat

        t0 = time.perf_counter()
        S_hat = np.asarray(_block(fit()), dtype=float)
        cold = time.perf_counter() - t0
        allw = []
        for _ in range(1 if quick else 3):
            t0 = time.perf_counter()
            _block(fit())
            allw.append(time.perf_counter() - t0)
        warm = statistics.median(allw)
        out[dtype] = dict(cold_s=cold, warm_s=warm, warm_all_s=allw, error=float(np.sum((S_hat - np.asarray(S)) ** 2) / d))
    out["measured_speedup"] = out["float64"]["warm_s"] / out["float32"]["warm_s"]
    out["measured_error_diff"] = abs(out["float64"]["error"] - out["float32"]["error"])
    print(f"  GD {t['n_init']} students x {t['steps']} steps, d = {d}: float64 {out['float64']['warm_s']:.2f} s, "
          f"float32 {out['float32']['warm_s']:.2f} s ({out['measured_speedup']:.2f}x; target {t['speedup']}x), "
          f"errors differ by {out['measured_error_diff']:.1e}", flush=True)
    return out


def gd_devices_point(d, n_init, steps, repeats):
    """Gradient descent with the students on one device and spread over every device
    (run in a process with forced host devices by :func:`bench_gd_devices`)."""
    import jax

    import aim_tutorial as aim
    from aim_tutorial.gd import train_gd

    n = int(round(0.1 * d * d))
    k1, k2, k3 = jax.random.split(jax.random.key(d), 3)
    S = aim.sample_teacher(k1, d, 0.5)
    X, y = aim.sample_data(k2, S, n, 2)
    from aim_tutorial.config import spread_devices

    out = dict(d=d, n=n, n_init=n_init, steps=steps, devices=len(spread_devices(n_init)))
    for name, devices in (("one", jax.devices()[:1]), ("all", None)):
        def fit(devices=devices):
            return train_gd(k3, X, y, 0.5, n_init=n_init, steps=steps, progress=False, devices=devices).S_hat

        cold, warm, _ = _timed(fit, repeats)
        out[f"{name}_warm_s"], out[f"{name}_cold_s"] = warm, cold
    return out


def _on_forced_devices(flag, args, count):
    """This script run with ``flag args`` in a fresh process with ``count`` host devices forced by
    ``XLA_FLAGS`` (they must be set before JAX starts); the JSON row it prints last."""
    cmd = [sys.executable, os.path.abspath(__file__), flag, *map(str, args)]
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={count}")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, timeout=1800)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_gd_devices(d, n_init, steps, repeats, count=4):
    """The same training on 1 and on ``count`` forced host devices (``XLA_FLAGS``), in a fresh process."""
    row = _on_forced_devices("--_gd-devices-point", (d, n_init, steps, repeats), count)
    print(f"  GD d = {d} on {row['devices']} host devices: {row['all_warm_s']:.2f} s, on one: "
          f"{row['one_warm_s']:.2f} s", flush=True)
    return row


def amp_devices_point(d, B, repeats):
    """``B`` GAMP-RIE instances (softmax, ``T = 2``, ``alpha = 0.3``) as one program
    (``gamp_rie_batch``) on one device and split over every visible device, warm and cold, with
    the largest difference of their errors (run in a process with forced host devices by
    :func:`bench_amp_devices`)."""
    import jax
    import numpy as np

    import aim_tutorial as aim
    from aim_tutorial.amp_device import gamp_rie_batch

    insts = [aim.make_instance(jax.random.key(s), d, 0.5, 0.3, 2) for s in range(B)]
    X, y, S = (np.stack([getattr(i, f) for i in insts]) for f in ("X", "y", "S"))
    keys = [i.key for i in insts]
    out = dict(d=d, n=int(X.shape[1]), instances=B, devices=len(jax.devices()))
    errors = {}
    for name, devices in (("one", jax.devices()[:1]), ("all", jax.devices())):
        res = []

        def fit(devices=devices):
            res[:] = gamp_rie_batch(X, y, 0.5, S_true=S, keys=keys, devices=devices)
            return res[-1].S_hat

        cold, warm, _ = _timed(fit, repeats)
        out[f"{name}_warm_s"], out[f"{name}_cold_s"] = warm, cold
        errors[name] = [r.error for r in res]
        out[f"{name}_iters"] = [r.n_iter for r in res]
    out["max_error_diff"] = max(abs(a - b) for a, b in zip(errors["one"], errors["all"]))
    return out


def bench_amp_devices(d, B, repeats, count=4):
    """GAMP-RIE instances on 1 and on ``count`` forced host devices (``XLA_FLAGS``), in a fresh process."""
    row = _on_forced_devices("--_amp-devices-point", (d, B, repeats), count)
    print(f"  GAMP-RIE, {B} instances at d = {d} on {row['devices']} host devices: {row['all_warm_s']:.2f} s, "
          f"on one: {row['one_warm_s']:.2f} s (errors within {row['max_error_diff']:.1e})", flush=True)
    return row


# --------------------------------------------------------------------------- outputs


def write_outputs(res, out):
    """``results.json`` and ``gamp_scaling.png`` in the folder ``out`` (the book's benchmarks page,
    ``book/benchmarks.md``, is the one place that renders the file's tables)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    plot(res, os.path.join(out, "gamp_scaling.png"))


def plot(res, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    import aim_tutorial as aim

    aim.plotting.use_style()
    rows = res["amp"]["rows"]
    d = np.array([r["d"] for r in rows], dtype=float)
    t = np.array([r["s_per_iter"] for r in rows])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax1.loglog(d, t, "o", label="GAMP-RIE")
    if len(d) >= 2:
        ax1.loglog(d, t[-1] * (d / d[-1]) ** 4, ":", color="k", label=r"$\propto d^4$")
    ax1.set_xlabel("d")
    ax1.set_ylabel("seconds per iteration")
    ax1.legend()
    ax2.loglog(d, [r["peak_rss_mb"] for r in rows], "o", label="peak resident memory")
    ax2.loglog(d, [r["data_mb"] for r in rows], "s", label="data X, y")
    ax2.loglog(d, [r["naive_tensor_mb"] for r in rows], "--", color="k",
               label=r"an $n\times d\times d$ tensor")
    ax2.set_xlabel("d")
    ax2.set_ylabel("MB")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def _report_se(out):
    for k in ("softmax", "hardmax"):
        if k in out:
            print(f"  {k}, {out[k]['points']} points: {out[k]['warm_s'] * 1e3:.1f} ms warm, "
                  f"{out[k]['cold_s']:.2f} s cold", flush=True)


class Part(NamedTuple):
    """A part of the benchmarks: what it prints as it starts, and how it runs from the parsed
    arguments; ``into``: the key of ``results.json`` it writes (its own name) or updates."""

    label: str
    run: Callable
    into: Optional[str] = None
    full: bool = True  # a part of the full run (amp_batch is a rerun of amp_targets' batch cases only)
    report: Optional[Callable] = None  # prints a summary of the part's results as it ends


#: Every benchmark, in the order of a full run; ``--only NAME ...`` runs some of them into an existing
#: ``results.json``. A new benchmark: its function above, one entry here, its table on the book's page.
PARTS = {
    "se": Part("state evolution", lambda a: bench_se(a.repeats, 256, 30), report=_report_se),
    "amp": Part("GAMP-RIE", lambda a: bench_amp(a.amp_d, a.amp_alpha, a.amp_iters, a.repeats)),
    "amp_targets": Part("GAMP-RIE targets", lambda a: bench_amp_targets(a.quick)),
    "amp_batch": Part("GAMP-RIE batches", lambda a: bench_amp_batch(), into="amp_targets", full=False),
    "gd": Part("gradient descent", lambda a: bench_gd(a.gd_d, a.gd_n_init, a.gd_steps, a.repeats)),
    "gd_target": Part("gradient descent target", lambda a: bench_gd_target(a.quick)),
    "gd_devices": Part("gradient descent on forced host devices",
                       lambda a: bench_gd_devices(min(a.gd_d[-1], 100), a.gd_n_init, a.gd_steps, a.repeats,
                                                  a.devices)),
    "amp_devices": Part("GAMP-RIE instances on forced host devices",
                        lambda a: bench_amp_devices(40 if a.quick else 80, 8, a.repeats, a.devices)),
    "reproduce_cache": Part("reproduce with and without the compilation cache",
                            lambda a: bench_reproduce_cache(a.quick)),
}


def _run_part(name, a, res):
    part = PARTS[name]
    print(f"{part.label} ...", flush=True)
    out = part.run(a)
    if part.into is None:
        res[name] = out
    else:
        res[part.into].update(out)
    if part.report is not None:
        part.report(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes, to check the script")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--amp-d", type=int, nargs="+", default=[50, 100, 150, 200, 300, 400])
    p.add_argument("--amp-alpha", type=float, default=0.13)
    p.add_argument("--amp-iters", type=int, default=8)
    p.add_argument("--gd-d", type=int, nargs="+", default=[50, 100, 200, 400])
    p.add_argument("--gd-n-init", type=int, default=8)
    p.add_argument("--gd-steps", type=int, default=200)
    p.add_argument("--out", default=HERE, help="output directory (default: benchmarks/)")
    p.add_argument("--devices", type=int, default=4, help="forced host devices of the device benchmarks")
    p.add_argument("--_amp-point", nargs=5, help=argparse.SUPPRESS)
    p.add_argument("--_gd-devices-point", nargs=4, help=argparse.SUPPRESS)
    p.add_argument("--_amp-devices-point", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("--only", nargs="+", choices=tuple(PARTS),
                   help="run only these parts and put them into the existing results.json (amp_batch: the "
                        "batch cases of amp_targets alone)")
    a = p.parse_args(argv)
    if a._amp_point:
        d, alpha, iters, repeats, dtype = a._amp_point
        print(json.dumps(amp_point(int(d), float(alpha), int(iters), int(repeats), dtype)))
        return
    if a._gd_devices_point:
        d, n_init, steps, repeats = map(int, a._gd_devices_point)
        print(json.dumps(gd_devices_point(d, n_init, steps, repeats)))
        return
    if a._amp_devices_point:
        d, B, repeats = map(int, a._amp_devices_point)
        print(json.dumps(amp_devices_point(d, B, repeats)))
        return
    command = "python benchmarks/run.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if a.only:
        path = os.path.join(a.out, "results.json")
        with open(path) as f:
            res = json.load(f)
        for name in a.only:
            _run_part(name, a, res)
            res.setdefault("rerun", {})[name] = dict(command=command, loadavg_end=list(os.getloadavg()),
                                                     date=machine()["date"])
        write_outputs(res, a.out)
        print(f"put {', '.join(a.only)} into {path}")
        return
    if a.quick:
        a.repeats, a.amp_d, a.amp_iters, a.gd_d, a.gd_n_init, a.gd_steps = 1, [20, 30], 3, [20], 2, 20
    res = dict(machine=machine(), command=command)
    for name, part in PARTS.items():
        if part.full:
            _run_part(name, a, res)
    res["loadavg_end"] = list(os.getloadavg())
    write_outputs(res, a.out)
    print(f"wrote {a.out}/results.json, gamp_scaling.png")


if __name__ == "__main__":
    main()
