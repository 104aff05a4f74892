"""The tables behind the explorers of chapter 9 (book/09_explore.md).

Writes ``aim_tutorial/data/explore_tables.csv``: the state-evolution error of

- the softmax channel (any T, any beta: one curve in ``x = alpha (T^2 + T - 2)``,
  which is also the linear channel's curve in ``x = alpha (T^2 + T)``), and
- the hardmax channel at T = 2 (exact score; here ``x = alpha``), and
- the hardmax channel at T = 2 with the published score, noiseless (the curve
  that reproduces the published data; chapter 4 shows why it is not the
  Bayes-optimal one),
- the ReLU channel ``y = max(h, 0)/T`` (any T: one curve in ``x = alpha (T^2 + T)``,
  chapter 4, section on elementwise maps; the sigmoid channel is the linear curve),

on a grid of width ratios ``rho``, noise levels ``Delta`` and ``x``. The chapter
recomputes a few of these curves live and checks that they agree with the file.
Computing every table costs a few seconds of CPU per ``rho`` (the denoising table
of :mod:`aim_tutorial.state_evolution`) and the ReLU tables (quadrature) about 6 s
per ``(rho, Delta)``: 758 s in all on the 2-core machine, with other work running
(the header of the file records the time); no randomness.

Usage:
    python scripts/explore_tables.py            # the file shipped with the book
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from aim_tutorial import datafiles
from aim_tutorial.state_evolution import solve_state_evolution

RHOS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0, 1.25, 1.5, 2.0)
NOISES = (0.0, 0.05, 0.2, 0.5)
X_SOFT = np.linspace(0.0, 2.0, 161)
X_RELU = np.linspace(0.0, 3.0, 241)   # the same step as X_SOFT; x_PR(relu) = 2 (2 rho - rho^2) <= 2
A_HARD = np.geomspace(1e-3, 10.0, 81)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "aim_tutorial", "data",
                   "explore_tables.csv")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=OUT)
    a = p.parse_args(argv)

    t_all = time.time()
    rows = []
    for rho in RHOS:
        for noise in NOISES:
            r = solve_state_evolution(X_SOFT / 4, rho, T=2, noise=noise)
            rows += [(0, rho, noise, x, m, int(c)) for x, m, c in zip(X_SOFT, r.mmse, r.converged)]
            r = solve_state_evolution(A_HARD, rho, T=2, channel="hardmax", noise=noise)
            rows += [(1, rho, noise, x, m, int(c)) for x, m, c in zip(A_HARD, r.mmse, r.converged)]
            r = solve_state_evolution(X_RELU / 6, rho, T=2, channel="relu", noise=noise)
            rows += [(3, rho, noise, x, m, int(c)) for x, m, c in zip(X_RELU, r.mmse, r.converged)]
        r = solve_state_evolution(A_HARD, rho, T=2, channel="hardmax", score="published")
        rows += [(2, rho, 0.0, x, m, int(c)) for x, m, c in zip(A_HARD, r.mmse, r.converged)]
        print(f"rho = {rho}: done ({time.time() - t_all:.0f} s)", flush=True)
    header = datafiles.make_header(
        "State-evolution tables of the explorers of chapter 9 (aim-tutorial book).",
        command=datafiles.command_line("scripts/explore_tables.py", argv),
        seed=None,
        params=dict(T=2, rho=list(RHOS), noise=list(NOISES), x_softmax=f"linspace(0, 2, {X_SOFT.size})",
                    alpha_hardmax=f"geomspace(1e-3, 10, {A_HARD.size})", x_relu=f"linspace(0, 3, {X_RELU.size})",
                    channels=["softmax", "hardmax", "hardmax (published score)", "relu"]),
        notes=[
            f"computed in {time.time() - t_all:.0f} s",
            "deterministic (no seed): aim_tutorial.solve_state_evolution at T = 2",
            "channel 0 = softmax: x = alpha (T^2 + T - 2), the same curve for every T and beta;",
            "channel 1 = hardmax, T = 2, exact score: x = alpha",
            "channel 2 = hardmax, T = 2, published score, noiseless only: x = alpha",
            "channel 3 = relu (y = max(h, 0)/T), at T = 2: x = alpha (T^2 + T), the same curve for every T",
            "mmse = Q0 - q, the Bayes-optimal error ||S_hat - S||_F^2 / d; "
            "converged as reported by solve_state_evolution",
        ])
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    names = ("channel", "rho", "noise", "x", "mmse", "converged")
    datafiles.write_table(a.out, {name: [r[i] for r in rows] for i, name in enumerate(names)}, header, fmt=".7g")
    print(f"wrote {len(rows)} rows to {a.out} in {time.time() - t_all:.0f} s")


if __name__ == "__main__":
    main()
