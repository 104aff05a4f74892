"""The per-layer-RIE state evolution of two-layer deep attention (a conjecture): data of chapter 7.

Writes ``aim_tutorial/data/deep_se.csv`` with three kinds of rows:

``qhat``   precise Monte Carlo values of the 2 x 2 ``q_hat / alpha`` at a few
           ``(V_1, V_2)`` with ``q_12 = sqrt(rho_1 rho_2)``, to show whether the
           off-diagonal entry (which the diagonal closure drops) vanishes;
``bias``   the sum rule ``(q_hat_11 V_1 + q_hat_22 V_2) / x`` (limit 1 as V -> 0) at
           ``alpha = 1`` against the inner Monte Carlo size ``n_inner``: the bias of
           the self-normalised estimate;
``bisect`` rows of ``--bisect``: like ``se``, at the midpoints of a bisection for the end of
           the fixed points (a midpoint that stops at max_iter is taken as its upper end);
``se``     the fixed point of :func:`aim_tutorial.deep.deep_state_evolution_diagonal`
           (per-layer errors V_1, V_2, the full q_hat there, its status) on a grid
           of ``x = alpha (T^2 + T - 2)``, T = 2, c = 1, by continuation in x; at a
           fixed point n_inner is raised 4-fold (to at most 8192) until the relative
           standard error of each q_hat_ll is below 10 % (se11, se22: those errors).

rho = (0.5, 0.5), beta = 1 throughout. Usage:
    python scripts/deep_se_data.py            # the file shipped with the book (CPU; cost in its rows)
    python scripts/deep_se_data.py --se-only --append   # only the se rows, added to the file
    python scripts/deep_se_data.py --se-only --append --x 2.0 2.5   # two more points (from V = (1, 1))
    python scripts/deep_se_data.py --se-only --append --bisect 1.4 1.5 3 --V-start V1 V2   # the threshold
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

from aim_tutorial import deep
from aim_tutorial import datafiles

RHOS = (0.5, 0.5)
SE_XS = (0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0, 2.5)
T_SE, C_SE = 2, 1.0
QHAT_POINTS = [(2, 1.0, (1.0, 1.0)), (2, 1.0, (0.3, 0.3)), (2, 1.0, (0.01, 0.5)), (2, 1.0, (0.05, 0.03))]
BIAS = [((0.3, 0.3), (32, 128, 512, 2048, 8192)), ((0.058, 0.035), (32, 128, 512, 2048, 8192)),
        ((5.5e-3, 3.6e-3), (32, 128, 512, 2048, 8192)), ((0.157, 0.0097), (2048, 8192, 32768))]
REL_SE = 0.10  # at a fixed point, n_inner is raised 4-fold until q_hat_ll's relative s.e. is below this
MAX_INNER = 8192

COLS = ["kind", "T", "c", "x", "alpha", "n_inner", "V1", "V2", "qh11", "qh12", "qh22", "se11", "se12",
        "se22", "status", "iterations", "residual", "seconds"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-omega", type=int, default=600)
    p.add_argument("--n-inner", type=int, default=2048)
    p.add_argument("--n-omega-qhat", type=int, default=2000)
    p.add_argument("--max-iter", type=int, default=120)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--se-only", action="store_true", help="only the se rows (not qhat, bias)")
    p.add_argument("--x", type=float, nargs="+", default=SE_XS, help="the grid of x (continued from the first)")
    p.add_argument("--append", action="store_true", help="add the rows to the file, after a line with this command")
    p.add_argument("--bisect", type=float, nargs=3, metavar=("X_LO", "X_HI", "STEPS"), default=None,
                   help="locate the end of learning: X_LO a fixed point, X_HI perfect recovery; STEPS midpoints, "
                        "each continued from the last fixed point (with --V-start: the fixed point at X_LO)")
    p.add_argument("--V-start", type=float, nargs=2, default=None, help="(V_1, V_2) to start the first x from")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data",
                                               "deep_se.csv"))
    a = p.parse_args(argv)
    command = datafiles.command_line("scripts/deep_se_data.py", argv)
    header = datafiles.make_header(
        "Per-layer-RIE state evolution of two-layer deep attention, a conjecture (chapter 7 of the aim-tutorial "
        "book).", command=command, seed=a.seed,
        params=dict(rho=list(RHOS), beta=1.0, noise=0.0, T=T_SE, c=C_SE, n_omega=a.n_omega, n_inner=a.n_inner,
                    n_omega_qhat=a.n_omega_qhat, max_inner=MAX_INNER, rel_se=REL_SE, max_iter=a.max_iter,
                    V_stop=1e-3, V_floor=1e-4),
        notes=[
            f"rho = {RHOS}, beta = 1, noiseless, T = {T_SE}, c = {C_SE}; q_hat by Monte Carlo, cross-fitted: se "
            f"rows n_omega = {a.n_omega}, n_inner from {a.n_inner} (column n_inner: the one used); qhat rows "
            f"n_omega = {a.n_omega_qhat}, n_inner = {a.n_inner}; bias rows n_omega = {a.n_omega}",
            "solver: undamped steps from V = (1, 1), continued along x, to relative change 3e-2, then scipy's "
            f"hybr on log F(V) = log V (xtol 1e-6); V_stop 1e-3, V_floor 1e-4, max_iter {a.max_iter} "
            "evaluations a point",
            f"seed = {a.seed}: key(seed) for every q_hat (common random numbers); qhat rows: q_hat / alpha at the "
            "given V (q_12 = sqrt(rho_1 rho_2)) with Monte Carlo standard errors se*; bias rows: qh11, qh22 are "
            "q_hat_ll V_l / x (their sum has limit 1 as V -> 0), se* their standard errors; se rows: se11, "
            "se22 the relative standard errors of q_hat_11, q_hat_22 at the fixed point, n_inner the M it took",
        ])
    out = os.path.abspath(a.out)
    if a.append:  # the rows from here on come from this command (the header records it)
        datafiles.append_rows(out, {c: [] for c in COLS}, command=command)
    else:
        datafiles.write_table(out, {c: [] for c in COLS}, header)

    def write(line):
        datafiles.append_rows(out, {col: [v] for col, v in zip(COLS, line)}, add_command=False, fmt=".6g")
        print(",".join(map(str, line)), flush=True)

    nan = float("nan")
    key = jax.random.key(a.seed)
    Q0 = deep.limit_overlap_matrix(RHOS)
    for T, c, V in [] if a.se_only else QHAT_POINTS:
        t0 = time.time()
        r = deep.deep_q_hat(key, 1.0, Q0 - np.diag(V), V, T=T, c=c, n_omega=a.n_omega_qhat, n_inner=a.n_inner)
        write(["qhat", T, c, nan, 1.0, a.n_inner, V[0], V[1], r.q_hat[0, 0], r.q_hat[0, 1], r.q_hat[1, 1],
               r.stderr[0, 0], r.stderr[0, 1], r.stderr[1, 1], "", 0, nan, time.time() - t0])
    x1 = T_SE * T_SE + T_SE - 2.0  # alpha = 1
    for V, inners in [] if a.se_only else BIAS:
        for ni in inners:
            t0 = time.time()
            r = deep.deep_q_hat(key, 1.0, Q0 - np.diag(V), V, T=T_SE, c=C_SE, n_omega=a.n_omega, n_inner=ni)
            qv = np.diag(r.q_hat) * np.array(V) / x1
            sv = np.diag(r.stderr) * np.array(V) / x1
            write(["bias", T_SE, C_SE, x1, 1.0, ni, V[0], V[1], qv[0], r.q_hat[0, 1], qv[1], sv[0], r.stderr[0, 1],
                   sv[1], "", 0, nan, time.time() - t0])

    def solve(x, start, n_inner, max_iter):
        alpha = x / (T_SE * T_SE + T_SE - 2)
        r = deep.deep_state_evolution_diagonal(key, alpha, RHOS, T=T_SE, c=C_SE, n_omega=a.n_omega,
                                               n_inner=n_inner, damping=0.0, max_iter=max_iter,
                                               V_start=start)
        return r, alpha

    def point(x, start, kind="se"):
        """Solve at x (raising n_inner at a fixed point as above), write the row, return (status, V)."""
        t0, n_inner, calls = time.time(), a.n_inner, 0
        while True:
            r, alpha = solve(x, start, n_inner, a.max_iter)
            calls += int(r.iterations[0])
            V = r.mmse[0]
            se = np.full(2, np.nan)
            if r.status[0] == "fixed point":  # the Monte Carlo accuracy of q_hat at the fixed point
                q = deep.deep_q_hat(key, alpha, Q0 - np.diag(V), tuple(V), T=T_SE, c=C_SE,
                                    n_omega=a.n_omega, n_inner=n_inner)
                se = np.diag(q.stderr) / np.diag(q.q_hat)
                if se.max() > REL_SE and n_inner < MAX_INNER:
                    n_inner, start = 4 * n_inner, V
                    continue
            break
        qh = r.q_hat[0]
        write([kind, T_SE, C_SE, x, alpha, n_inner, V[0], V[1], qh[0, 0], qh[0, 1], qh[1, 1],
               se[0], nan, se[1], r.status[0], calls, float(r.residual[0]), time.time() - t0])
        print(f"x = {x:.4f}: {r.status[0]}, V = {V}, {time.time() - t0:.0f} s", flush=True)
        return r.status[0], V

    start = None if a.V_start is None else tuple(a.V_start)
    if a.bisect is not None:
        lo, hi, steps = a.bisect
        for _ in range(int(steps)):
            mid = round((lo + hi) / 2, 6)
            status, V = point(mid, start, kind="bisect")
            if status == "fixed point":
                lo, start = mid, V
            else:
                hi = mid
        print(f"the end of learning lies in ({lo}, {hi}]", flush=True)
        return
    for x in a.x:
        status, V = point(x, start)
        if status == "fixed point":
            start = V


if __name__ == "__main__":
    main()
