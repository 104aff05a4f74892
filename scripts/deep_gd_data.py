"""Two-layer students on data from a two-layer teacher: the precomputed data of chapter 7.

Writes ``aim_tutorial/data/deep_gd.csv``: for every configuration (T, c, widths)
and every ``x = alpha (T^2 + T - 2)`` of its grid, one pair of teachers
``S_1, S_2`` and one data set ``(X, y)`` from deep attention (beta = 1), then
``n_init`` two-layer students trained by full-batch Adam (lr 0.1) with
:func:`aim_tutorial.deep.train_deep_gd`, and per layer the errors
``||S - S_l||_F^2 / d`` of single students (mean, std over students) and of the
average of the students.

Three sweeps:
    main   : rho = (0.5, 0.5), c = 1, T = 2 and 3, x on a grid through the counting threshold 1.5;
    skip   : rho = (0.5, 0.5), T = 2, c in {0, 0.5, 2, 4} at a few x (same teachers and tokens as main);
    widths : T = 2, c = 1, rho = (0.25, 1) and (1, 0.25).

Usage:
    python scripts/deep_gd_data.py                  # the file shipped with the book (CPU, ~30 min)
    python scripts/deep_gd_data.py --d 30 --sweep main --T 2 --x 2.0   # one point, to time it

Rows are appended as they are computed, so an interrupted run leaves a usable file.
"""

from __future__ import annotations

import argparse
import os

import jax

from aim_tutorial import datafiles
from aim_tutorial.counting import alpha_scale
from aim_tutorial.experiments import deep_data_set

X_MAIN = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
X_SKIP = (1.0, 2.0, 3.0)
C_SKIP = (0.0, 0.5, 2.0, 4.0)
X_WIDTHS = (1.0, 2.0, 3.0, 4.0)
RHO_WIDTHS = ((0.25, 1.0), (1.0, 0.25))

COLS = ["sweep", "T", "c", "rho1", "rho2", "x", "alpha", "n", "seed"]
for _l in (1, 2):
    COLS += [f"single{_l}_mean", f"single{_l}_std", f"avg{_l}"]
COLS += ["final_loss_mean", "n_finite", "seconds"]


def configurations(sweeps, Ts, xs_override):
    out = []
    if "main" in sweeps:
        for T in Ts:
            for x in xs_override or X_MAIN:
                out.append(("main", T, 1.0, (0.5, 0.5), x))
    if "skip" in sweeps:
        for c in C_SKIP:
            for x in xs_override or X_SKIP:
                out.append(("skip", 2, c, (0.5, 0.5), x))
    if "widths" in sweeps:
        for rh in RHO_WIDTHS:
            for x in xs_override or X_WIDTHS:
                out.append(("widths", 2, 1.0, rh, x))
    return out


def run_point(seed, d, T, c, rhos, x, n_init, steps, lr):
    # teacher and tokens depend on (seed, T, x, rhos) only, so the skip sweep shares them with main
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), T), int(round(1000 * x)))
    key = jax.random.fold_in(key, int(round(1000 * rhos[0])) * 10000 + int(round(1000 * rhos[1])))
    alpha = x / alpha_scale(T)
    r = deep_data_set(key, d, rhos, alpha, T, c=c, n_init=n_init, steps=steps, lr=lr)
    vals = []
    for ell in range(2):
        vals += [r["single_mean"][ell], r["single_std"][ell], r["avg"][ell]]
    return [alpha, r["n"]], vals, r["final_loss_mean"], r["n_finite"], r["seconds"]

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, default=40)
    p.add_argument("--sweep", nargs="+", default=["main", "skip", "widths"], choices=["main", "skip", "widths"])
    p.add_argument("--T", type=int, nargs="+", default=[2, 3])
    p.add_argument("--x", type=float, nargs="+", default=None, help="values of alpha (T^2 + T - 2)")
    p.add_argument("--n-init", type=int, default=8)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data",
                                               "deep_gd.csv"))
    a = p.parse_args(argv)
    command = datafiles.command_line("scripts/deep_gd_data.py", argv)
    header = datafiles.make_header(
        "Two-layer students on deep attention (chapter 7 of the aim-tutorial book).", command=command,
        seed=a.seed, params=dict(d=a.d, L=2, beta=1.0, noise=0.0, channel="deep", n_init=a.n_init,
                                 optimizer="adam", lr=a.lr, steps=a.steps, batch="full", T=a.T, sweeps=a.sweep),
        notes=[
            f"d = {a.d}, L = 2, beta = 1, noiseless deep softmax attention; students of matched widths, "
            f"n_init = {a.n_init}, optimizer = adam, lr = {a.lr}, steps = {a.steps}, full batch",
            f"seed = {a.seed}: key(seed) folded with (T, 1000 x, widths), then aim.make_instance: teachers, "
            "tokens and inits from it (the skip sweep reuses the teachers and tokens of main)",
            "errors are ||S - S_l||_F^2 / d for layer l = 1, 2; single*_mean/std over students; avg* is the "
            "error of the mean of the students; n = round(alpha d^2); x = alpha (T^2 + T - 2)",
        ])
    out = os.path.abspath(a.out)
    datafiles.write_table(out, {c: [] for c in COLS}, header)
    for sweep, T, c, rhos, x in configurations(a.sweep, a.T, a.x):
        row, vals, fl, nf, secs = run_point(a.seed, a.d, T, c, rhos, x, a.n_init, a.steps, a.lr)
        line = [sweep, T, c, rhos[0], rhos[1], x] + row + [a.seed] + vals + [fl, nf, secs]
        datafiles.append_rows(out, {col: [v] for col, v in zip(COLS, line)}, add_command=False, fmt=".6g")
        print(",".join(map(str, line)), flush=True)

if __name__ == "__main__":
    main()
