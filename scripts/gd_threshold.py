"""Perfect recovery of gradient descent and GAMP-RIE, located by bisection in x on nested data sets.

For every (d, T, data seed) one teacher and ``n_max`` samples (enough for ``--x-hi``); the data set at
``x = alpha (T^2 + T - 2)`` is its first ``n = round(alpha d^2)`` samples, so that on one instance
the error falls as x grows (more data, the same teacher) and a bisection in x is well posed. An
algorithm *recovers* the teacher at x when its error ``||S_hat - S||_F^2 / d`` is below ``--eps``:
for gradient descent, the median of ``--n-init`` single students trained by the published Adam
(lr 0.1, ``--steps`` steps) from the instance's algorithm key; for GAMP-RIE its estimate from its own
start. Each threshold is bracketed to ``--tol`` in x, and a row gives the bracket, the evaluations,
and whether the bracket was valid (no recovery at ``--x-lo``, recovery at ``--x-hi``); an invalid one
is reported, never bisected. The state evolution's threshold is ``x_PR = 2 rho - rho^2`` (0.75 at
rho = 0.5). Rows are appended to ``--out`` one (d, T, seed) at a time; rows already there are
skipped, so the same command continues an interrupted run (``--deadline`` seconds).

Usage:
    python scripts/gd_threshold.py --d 50 100 --seeds 4 --deadline 7000
    python scripts/gd_threshold.py --d 16 --seeds 1 --n-init 2 --steps 50 --out /tmp/thr.csv  # smoke
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import jax
import numpy as np

from aim_tutorial import datafiles, model
from aim_tutorial.amp import gamp_rie
from aim_tutorial.counting import alpha_scale
from aim_tutorial.gd import train_gd

DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data", "gd_threshold.csv")
ROOT_SEED = 4503  # issue 45, item 3
COLUMNS = ["d", "T", "seed", "algorithm", "x_lo", "x_hi", "valid", "evaluations", "err_lo", "err_hi", "eps",
           "seconds"]


def nested_instance(d, T, seed, rho, x_max):
    """Teacher, the largest data set (n_max samples) and the algorithms' key of one (d, T, seed)."""
    k = jax.random.key(ROOT_SEED)
    for v in (d, T, seed):
        k = jax.random.fold_in(k, v)
    k_teacher, k_data, k_alg = jax.random.split(k, 3)
    S = model.sample_teacher(k_teacher, d, rho)
    n_max = model.n_samples(x_max / alpha_scale(T), d)
    X, y = model.sample_data(k_data, S, n_max, T)
    return S, X, y, k_alg


def error_at(algorithm, x, *, S, X, y, k_alg, T, rho, n_init, steps, lr, max_iter):
    """The algorithm's error on the first n(x) samples."""
    d = S.shape[0]
    n = model.n_samples(x / alpha_scale(T), d)
    if algorithm == "amp":
        return float(gamp_rie(X[:n], y[:n], rho, key=k_alg, S_true=S, max_iter=max_iter).error)
    res = train_gd(k_alg, X[:n], y[:n], rho, n_init=n_init, steps=steps, lr=lr, S_true=S, record_every=steps,
                   progress=False)
    return float(np.median(np.asarray(res.error_students[:, -1])))


def bisect(err, lo, hi, eps, tol):
    """The bracket [lo, hi] of the first x where err(x) < eps, to tol; (lo, hi, valid, evals, e_lo, e_hi)."""
    e_lo, e_hi = err(lo), err(hi)
    evals = 2
    if not (e_lo >= eps and e_hi < eps):
        return lo, hi, False, evals, e_lo, e_hi
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        e = err(mid)
        evals += 1
        if e < eps:
            hi, e_hi = mid, e
        else:
            lo, e_lo = mid, e
    return lo, hi, True, evals, e_lo, e_hi


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, nargs="+", required=True)
    p.add_argument("--T", type=int, nargs="+", default=[2])
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--x-lo", type=float, default=0.6)
    p.add_argument("--x-hi", type=float, default=1.4)
    p.add_argument("--tol", type=float, default=0.01, help="the width of the final bracket in x")
    p.add_argument("--eps", type=float, default=1e-3, help="recovery: an error below this")
    p.add_argument("--n-init", type=int, default=4, help="students an evaluation (their median error)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--max-iter", type=int, default=300, help="GAMP-RIE's iterations at most")
    p.add_argument("--algorithms", nargs="+", choices=("gd", "amp"), default=["gd", "amp"])
    p.add_argument("--deadline", type=float, default=None)
    p.add_argument("--out", default=DEFAULT_OUT)
    a = p.parse_args(argv)
    if not 0 < a.x_lo < a.x_hi:
        p.error(f"--x-lo and --x-hi must satisfy 0 < x_lo < x_hi, got {a.x_lo}, {a.x_hi}")
    command = datafiles.command_line("scripts/gd_threshold.py", argv)
    setting = dict(rho=a.rho, eps=a.eps, tol=a.tol, x_lo=a.x_lo, x_hi=a.x_hi, n_init=a.n_init, steps=a.steps,
                   lr=a.lr, optimizer="adam", init="W ~ N(0, 1)", max_iter=a.max_iter, root_seed=ROOT_SEED)
    if os.path.exists(a.out):
        t = datafiles.read(a.out).table
        done = {(int(r["d"]), int(r["T"]), int(r["seed"]), str(r["algorithm"])) for r in t}
        datafiles.append_rows(a.out, {c: [] for c in COLUMNS}, command=command, notes=[f"setting {setting}"])
    else:
        done = set()
        header = datafiles.make_header(
            "Perfect-recovery thresholds of gradient descent and GAMP-RIE by bisection on nested data sets "
            "(chapter 6 of the aim-tutorial book).", commands=[command], seed=ROOT_SEED, params=setting,
            notes=["the key of an instance: key(root_seed) folded with d, T and the data seed, split in three "
                   "(teacher, data, algorithms); the data set at x is the first round(x / (T^2+T-2) d^2) "
                   "samples", "recovery: error < eps; gradient descent: the median of n_init single students",
                   "valid 0: the bracket [x_lo, x_hi] did not hold a change (err_lo < eps or err_hi >= eps)"])
        datafiles.write_table(a.out, {c: [] for c in COLUMNS}, header)
    t_all = time.time()
    for d in a.d:
        for T in a.T:
            for s in range(a.first_seed, a.first_seed + a.seeds):
                todo = [alg for alg in a.algorithms if (d, T, s, alg) not in done]
                if not todo:
                    continue
                if a.deadline is not None and time.time() - t_all > a.deadline:
                    print(f"deadline of {a.deadline:.0f} s reached; the same command continues", flush=True)
                    return
                S, X, y, k_alg = nested_instance(d, T, s, a.rho, a.x_hi)
                for alg in todo:
                    t0 = time.time()
                    err = functools.partial(error_at, alg, S=S, X=X, y=y, k_alg=k_alg, T=T, rho=a.rho,
                                            n_init=a.n_init, steps=a.steps, lr=a.lr, max_iter=a.max_iter)
                    lo, hi, valid, evals, e_lo, e_hi = bisect(err, a.x_lo, a.x_hi, a.eps, a.tol)
                    row = [d, T, s, alg, lo, hi, int(valid), evals, e_lo, e_hi, a.eps, time.time() - t0]
                    datafiles.append_rows(a.out, {c: [v] for c, v in zip(COLUMNS, row)}, add_command=False,
                                          fmt=".6g")
                    print(f"d {d} T {T} seed {s} {alg}: x in [{lo:.4f}, {hi:.4f}] valid {valid} "
                          f"({evals} evaluations, {time.time() - t0:.0f} s)", flush=True)
    datafiles.append_rows(a.out, {c: [] for c in COLUMNS}, add_command=False,
                          notes=[f"part wall time {time.time() - t_all:.0f} s ({command})"])


if __name__ == "__main__":
    main()
