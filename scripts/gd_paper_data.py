"""Averaged and single-student gradient descent over a grid of (T, alpha): the data of chapter 6.

Writes ``aim_tutorial/data/gd_softmax.csv``: for every token count T, every
``x = alpha (T^2 + T - 2)`` of the grid and every data seed, one teacher and one
data set, ``n_init`` students trained by full-batch Adam (the published setting:
lr 0.1, 1000 steps, no weight decay), and the errors ``||S - S_true||_F^2 / d``
of single students (mean and std over students) and of the average of the first
K students, K = 1, 2, 4, ..., n_init.

Usage:
    python scripts/gd_paper_data.py                 # d = 80: the book's grid (CPU; see its header)
    python scripts/gd_paper_data.py --scale paper   # d = 200, the published size (meant for a GPU)
    python scripts/gd_paper_data.py --d 60 --seeds 1 --x 0.4 --T 2   # one point, to time it
    python scripts/gd_paper_data.py --d 40 60 80 100 120 --seeds 4 --x 0.4 0.6 --T 2 4 \
        --out aim_tutorial/data/gd_finite_size.csv     # chapter 6's finite-size study (one d after another)

With several values of ``--d`` the file gains a first column ``d``.

Rows are appended as they are computed (each append rewrites the file through a temporary file, with
its row count), so an interrupted run leaves a complete, usable file.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

from aim_tutorial import datafiles
from aim_tutorial.counting import alpha_scale
from aim_tutorial.experiments import gd_data_set

DEFAULT_X = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
SCALES = {  # d, seeds
    "cpu": (80, 1),
    "paper": (200, 3),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", choices=sorted(SCALES), default="cpu")
    p.add_argument("--d", type=int, nargs="+", default=None,
                   help="dimension(s) (overrides --scale); several give a finite-size study, one d after another")
    p.add_argument("--seeds", type=int, default=None, help="data seeds per point (overrides --scale)")
    p.add_argument("--first-seed", type=int, default=0, help="index of the first data seed (to add seeds to a file)")
    p.add_argument("--T", type=int, nargs="+", default=[2, 3, 4, 5, 6])
    p.add_argument("--x", type=float, nargs="+", default=list(DEFAULT_X),
                   help="values of alpha (T^2 + T - 2)")
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--n-init", type=int, default=32)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=6)
    p.add_argument("--append", action="store_true", help="append rows to an existing file (no new header)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data",
                                               "gd_softmax.csv"))
    a = p.parse_args(argv)
    d, seeds = SCALES[a.scale]
    ds = a.d or [d]
    seeds = a.seeds or seeds
    Ks = [2**j for j in range(int(np.log2(a.n_init)) + 1)]
    cols = ["d", "T", "alpha", "x", "seed", "n", "single_mean", "single_std"] + [f"avg_K{K}" for K in Ks] + [
        "final_loss_mean", "n_finite", "seconds"]
    command = datafiles.command_line("scripts/gd_paper_data.py", argv)
    params = dict(d=ds, seeds=seeds, first_seed=a.first_seed, T=a.T, x=a.x, rho=a.rho, beta=1.0, noise=0.0,
                  channel="softmax", n_init=a.n_init, init="W ~ N(0, 1)", optimizer="adam", lr=a.lr,
                  steps=a.steps, weight_decay=0.0, batch="full")
    header = datafiles.make_header(
        "Gradient descent on the softmax attention-indexed model (chapter 6 of the aim-tutorial book).",
        command=command, seed=a.seed, params=params,
        notes=[f"the key of a data set: key(seed) folded with (T, index of x in {DEFAULT_X}, data seed), then "
               "aim.make_instance (teacher, data and the students' initialisation)",
               "errors are ||S - S_true||_F^2 / d; single_* over the n_init students; avg_KK is the error of the "
               "mean of the first K students' S; n = round(alpha d^2); x = alpha (T^2 + T - 2); seconds: the "
               "wall time of a data set"])
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    if a.append and os.path.exists(a.out):
        datafiles.append_rows(a.out, {c: [] for c in cols}, command=command)
    else:
        datafiles.write_table(a.out, {c: [] for c in cols}, header)
    t_all = time.time()
    base = jax.random.key(a.seed)
    for d, s, T, x in ((d, s, T, x) for d in ds for s in range(a.first_seed, a.first_seed + seeds)
                       for T in a.T for x in a.x):  # one data set at a time
        # the key depends on the value of x (its index in the default grid), not on the list given
        i = DEFAULT_X.index(x) if x in DEFAULT_X else int(round(1000 * x))
        alpha = x / alpha_scale(T)
        k = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(base, T), i), s)
        r = gd_data_set(k, d, a.rho, alpha, T, n_init=a.n_init, steps=a.steps, lr=a.lr)
        row = [d, T, alpha, x, s, r["n"], r["single_mean"], r["single_std"], *r["avg_K"], r["final_loss_mean"],
               r["n_finite"], r["seconds"]]
        datafiles.append_rows(a.out, {c: [v] for c, v in zip(cols, row)}, add_command=False, fmt=".6g")
        print(f"d {d} seed {s} T {T} x {x:.2f} n {r['n']}: single {r['single_mean']:.4f} avg{a.n_init} "
              f"{r['avg_K'][-1]:.4f} ({r['seconds']:.1f} s, total {time.time() - t_all:.0f} s)", flush=True)
    datafiles.append_rows(a.out, {c: [] for c in cols}, add_command=False,
                          notes=[f"total wall time {time.time() - t_all:.0f} s ({command})"])

if __name__ == "__main__":
    main()
