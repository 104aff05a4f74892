"""The per-layer-RIE state evolution of two-layer deep attention (a conjecture): data of chapter 7.

Writes ``aim_tutorial/data/deep_se.csv`` with two kinds of rows:

``se``    the fixed point of :func:`aim_tutorial.deep.deep_state_evolution_diagonal`
          (per-layer errors V_1, V_2 and the full q_hat at the fixed point) on a grid
          of ``x = alpha (T^2 + T - 2)``, for T = 2, c = 1;
``qhat``  precise Monte Carlo values of the 2 x 2 ``q_hat / alpha`` at a few
          ``(V_1, V_2)`` with ``q_12 = sqrt(rho_1 rho_2)``, to show whether the
          off-diagonal entry (which the diagonal closure drops) vanishes.

rho = (0.5, 0.5), beta = 1 throughout. Usage:
    python scripts/deep_se_data.py            # the file shipped with the book (CPU, ~10 min)
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

from aim_tutorial import deep
from aim_tutorial.config import provenance

RHOS = (0.5, 0.5)
SE_GRID = [  # (T, c, xs)
    (2, 1.0, (0.5, 1.0, 1.5, 2.0)),
]
QHAT_POINTS = [(2, 1.0, (1.0, 1.0)), (2, 1.0, (0.3, 0.3)), (2, 1.0, (0.01, 0.5))]

COLS = ["kind", "T", "c", "x", "alpha", "V1", "V2", "qh11", "qh12", "qh22", "se11", "se12", "se22",
        "converged", "iterations", "seconds"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-omega", type=int, default=1500)
    p.add_argument("--n-inner", type=int, default=128)
    p.add_argument("--n-omega-qhat", type=int, default=4000)
    p.add_argument("--max-iter", type=int, default=25)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data",
                                               "deep_se.csv"))
    a = p.parse_args(argv)
    header = [
        "# Per-layer-RIE state evolution of two-layer deep attention, a conjecture (chapter 7 of the aim-tutorial book).",
        *(f"# {line}" for line in provenance("scripts/deep_se_data.py", argv)),
        f"# rho = {RHOS}, beta = 1, noiseless; q_hat by Monte Carlo: se rows n_omega = {a.n_omega}, "
        f"qhat rows n_omega = {a.n_omega_qhat}, n_inner = {a.n_inner} (twice, cross-fitted); damping 0.5, relative tol 1e-2, "
        f"max_iter {a.max_iter}, stop when every V_l < 1e-3",
        f"# seed = {a.seed}: key(seed) for every q_hat (common random numbers); "
        "se rows: V_l the per-layer errors at the fixed point and q_hat there; qhat rows: q_hat / alpha "
        "at the given V (q_12 = sqrt(rho_1 rho_2)) with Monte Carlo standard errors se*",
    ]
    out = os.path.abspath(a.out)
    with open(out, "w") as f:
        f.write("\n".join(header) + "\n" + ",".join(COLS) + "\n")

    def write(line):
        txt = ",".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in line)
        with open(out, "a") as f:
            f.write(txt + "\n")
        print(txt, flush=True)

    key = jax.random.key(a.seed)
    Q0 = deep.limit_overlap_matrix(RHOS)
    for T, c, V in QHAT_POINTS:
        t0 = time.time()
        r = deep.deep_q_hat(key, 1.0, Q0 - np.diag(V), V, T=T, c=c, n_omega=a.n_omega_qhat, n_inner=a.n_inner)
        write(["qhat", T, c, float("nan"), 1.0, V[0], V[1], r.q_hat[0, 0], r.q_hat[0, 1], r.q_hat[1, 1],
               r.stderr[0, 0], r.stderr[0, 1], r.stderr[1, 1], True, 0, time.time() - t0])
    for T, c, xs in SE_GRID:
        for x in xs:
            t0 = time.time()
            alpha = x / (T * T + T - 2)
            r = deep.deep_state_evolution_diagonal(key, alpha, RHOS, T=T, c=c, n_omega=a.n_omega,
                                                   n_inner=a.n_inner, max_iter=a.max_iter)
            qh = r.q_hat[0]
            write(["se", T, c, x, alpha, r.mmse[0, 0], r.mmse[0, 1], qh[0, 0], qh[0, 1], qh[1, 1],
                   float("nan"), float("nan"), float("nan"), bool(r.converged[0]), int(r.iterations[0]),
                   time.time() - t0])


if __name__ == "__main__":
    main()
