"""The per-layer-RIE state evolution of two-layer deep attention with a deterministic inner integral (chapter 7).

Writes ``aim_tutorial/data/deep_se_quad.csv``. ``q_hat`` is computed by
:func:`aim_tutorial.deep.deep_q_hat` with ``n_nodes``: ``Z_out`` of eq. (eq-deep-Zout) by a
deterministic midpoint rule on a uniform grid over the first layer's indices (no inner Monte Carlo,
no cross-fitting); the outer average over ``n_omega`` draws of (omega, data) is the only
stochastic part, with a common key (common random numbers: the map is a deterministic
function of V). Row kinds:

``se``      the fixed point of :func:`aim_tutorial.deep.deep_state_evolution_diagonal` on a grid of
            ``x = alpha (T^2 + T - 2)``, continued along x from the last fixed point;
``bisect``  midpoints of a bisection for the end of learning between the largest grid x with a
            fixed point and the smallest grid x above it with perfect recovery, until the bracket is
            at most ``--bisect-width`` wide (a midpoint that stops at max_iter counts as its upper end);
``qhat``    (``--part qhat``) ``q_hat / alpha`` at given ``(V_1, V_2)`` (``q_12 = sqrt(rho_1 rho_2)``), by the
            rule with ``n_nodes`` (column) and by the inner Monte Carlo of the package with ``n_inner``
            (column, ``n_nodes = 0``), on the same outer draws, and the standard errors over them;
``pair``    (``--part pair``) the same comparison per outer draw: qh* the mean over the draws of the Monte Carlo's
            per-draw ``q_hat / alpha`` minus the quadrature's, se* the standard error of that mean (the paired
            difference: the inner Monte Carlo's bias and noise, without the outer draws' spread);
``conv``    (``--part conv``) ``q_hat / alpha`` against ``n_nodes`` at given V, same outer draws: the rule's error.

rho = (0.5, 0.5), beta = 1, noiseless, T = 2, c = 1 throughout. Usage:
    python scripts/deep_se_quad_data.py --part qhat --n-nodes 128 --n-omega 16384      # V = (1, 1), new file
    python scripts/deep_se_quad_data.py --part conv --nodes 32 64 96 128 --n-omega 2048 --append
    python scripts/deep_se_quad_data.py --part se --append    # the se and bisect rows
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

from aim_tutorial import datafiles, deep
from aim_tutorial.deep import channel as deep_channel

RHOS = (0.5, 0.5)
T_SE, C_SE = 2, 1.0
SE_XS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.45,
         1.5, 1.55, 1.6, 1.7, 1.8, 2.0, 2.5)
COLS = ["kind", "x", "alpha", "n_omega", "n_nodes", "n_inner", "V1", "V2", "qh11", "qh12", "qh22", "se11", "se12",
        "se22", "status", "iterations", "residual", "seconds"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=("se", "qhat", "pair", "conv"), default="se")
    p.add_argument("--n-omega", type=int, default=400)
    p.add_argument("--n-nodes", type=int, default=32)
    p.add_argument("--max-iter", type=int, default=120)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--x", type=float, nargs="+", default=SE_XS)
    p.add_argument("--bisect-width", type=float, default=0.01)
    p.add_argument("--V", type=float, nargs=2, default=(1.0, 1.0), help="(V_1, V_2) of --part qhat / conv")
    p.add_argument("--nodes", type=int, nargs="+", default=(16, 24, 32, 48, 64), help="n_nodes of --part conv")
    p.add_argument("--n-inner", type=int, default=2048, help="inner Monte Carlo of --part qhat")
    p.add_argument("--bisect", type=float, nargs=2, metavar=("X_LO", "X_HI"), default=None,
                   help="only the bisection, from this bracket (X_LO a fixed point, X_HI none), with --V-start")
    p.add_argument("--V-start", type=float, nargs=2, default=None, help="(V_1, V_2) to start from (the fixed "
                   "point at X_LO)")
    p.add_argument("--append", action="store_true")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data",
                                               "deep_se_quad.csv"))
    a = p.parse_args(argv)
    command = datafiles.command_line("scripts/deep_se_quad_data.py", argv)
    out = os.path.abspath(a.out)
    if a.append:
        datafiles.append_rows(out, {c: [] for c in COLS}, command=command)
    else:
        header = datafiles.make_header(
            "Per-layer-RIE state evolution of two-layer deep attention (a conjecture), Z_out by deterministic "
            "quadrature (chapter 7 of the aim-tutorial book).", command=command, seed=a.seed,
            params=dict(rho=list(RHOS), beta=1.0, noise=0.0, T=T_SE, c=C_SE, n_omega=a.n_omega, n_nodes=a.n_nodes,
                        max_iter=a.max_iter, V_stop=1e-3, V_floor=1e-4, bisect_width=a.bisect_width),
            notes=[
                "q_hat by aim_tutorial.deep.deep_q_hat(..., n_nodes=N): Z_out by the midpoint rule on a uniform N x N "
                "grid over [-7, 7]^2 in the first layer's two softmax-visible directions (standardised); the outer "
                "average over n_omega draws of (omega, data) with key(seed) at every call (common random numbers); "
                "se* are the standard errors of that outer average",
                "solver: undamped steps from V = (1, 1), continued along x from the last fixed point, to relative "
                "change 3e-2, then scipy's hybr on log F(V) = log V (xtol 1e-6); V_stop 1e-3 (perfect recovery), "
                f"V_floor 1e-4, max_iter {a.max_iter} evaluations a point",
                "qhat rows: n_nodes > 0 the quadrature, n_nodes = 0 the inner Monte Carlo (n_inner draws, cross-fitted) "
                "on the same outer draws; se rows: se11, se22 the relative standard errors of q_hat_11, q_hat_22 at "
                "the fixed point",
            ])
        datafiles.write_table(out, {c: [] for c in COLS}, header)

    def write(line):
        datafiles.append_rows(out, {col: [v] for col, v in zip(COLS, line)}, add_command=False, fmt=".7g")
        print(",".join(map(str, line)), flush=True)

    nan = float("nan")
    key = jax.random.key(a.seed)
    Q0 = deep.limit_overlap_matrix(RHOS)
    K1 = T_SE * T_SE + T_SE - 2

    if a.part == "pair":
        V = tuple(a.V)
        q = Q0 - np.diag(V)
        Cd = np.array([2.0, 1.0, 2.0])
        t0, diffs = time.time(), []
        for b, start in enumerate(range(0, a.n_omega, deep_channel._BATCH)):
            m = min(deep_channel._BATCH, a.n_omega - start)
            kb = jax.random.fold_in(key, b)
            sub = min(m, deep_channel._quad_batch_size(2, a.n_nodes))
            G = np.asarray(deep_channel._q_hat_quad_batch(kb, q[0, 0], q[1, 1], q[0, 1], *V, 1.0, C_SE, T=T_SE,
                                                          n_omega=m, n_nodes=a.n_nodes, sub=sub))
            GA, GB = deep_channel._q_hat_batch(kb, q[0, 0], q[1, 1], q[0, 1], *V, 1.0, C_SE, T=T_SE, n_omega=m,
                                               n_inner=a.n_inner)
            Hm = np.einsum("nlk,k,nmk->nlm", np.asarray(GA), Cd, np.asarray(GB))
            diffs.append(Hm + np.swapaxes(Hm, -1, -2) - 2 * np.einsum("nlk,k,nmk->nlm", G, Cd, G))
        d = np.concatenate(diffs)
        mu, se = d.mean(axis=0), d.std(axis=0) / np.sqrt(d.shape[0])
        write(["pair", nan, 1.0, a.n_omega, a.n_nodes, a.n_inner, V[0], V[1], mu[0, 0], mu[0, 1], mu[1, 1],
               se[0, 0], se[0, 1], se[1, 1], "", 0, nan, time.time() - t0])
        return

    if a.part in ("qhat", "conv"):
        V = tuple(a.V)
        q = Q0 - np.diag(V)
        runs = [(n, None) for n in a.nodes] if a.part == "conv" else [(a.n_nodes, None), (0, a.n_inner)]
        for n, ni in runs:
            t0 = time.time()
            if n:
                r = deep.deep_q_hat(key, 1.0, q, V, T=T_SE, c=C_SE, n_omega=a.n_omega, n_nodes=n)
            else:
                r = deep.deep_q_hat(key, 1.0, q, V, T=T_SE, c=C_SE, n_omega=a.n_omega, n_inner=ni)
            write([a.part, nan, 1.0, a.n_omega, n, ni or 0, V[0], V[1], r.q_hat[0, 0], r.q_hat[0, 1], r.q_hat[1, 1],
                   r.stderr[0, 0], r.stderr[0, 1], r.stderr[1, 1], "", 0, nan, time.time() - t0])
        return

    def point(x, start, kind):
        t0 = time.time()
        alpha = x / K1
        r = deep.deep_state_evolution_diagonal(key, alpha, RHOS, T=T_SE, c=C_SE, n_omega=a.n_omega,
                                               n_nodes=a.n_nodes, damping=0.0, max_iter=a.max_iter, V_start=start)
        V, st = r.mmse[0], r.status[0]
        se = np.full(2, nan)
        if st == "fixed point":
            qq = deep.deep_q_hat(key, alpha, Q0 - np.diag(V), tuple(V), T=T_SE, c=C_SE, n_omega=a.n_omega,
                                 n_nodes=a.n_nodes)
            se = np.diag(qq.stderr) / np.diag(qq.q_hat)
        qh = r.q_hat[0]
        write([kind, x, alpha, a.n_omega, a.n_nodes, 0, V[0], V[1], qh[0, 0], qh[0, 1], qh[1, 1], se[0], nan, se[1],
               st, int(r.iterations[0]), float(r.residual[0]), time.time() - t0])
        return st, V

    if a.bisect is not None:
        results = [(a.bisect[0], "fixed point", np.asarray(a.V_start)), (a.bisect[1], "max_iter", None)]
    else:
        results = []
    start = None if a.V_start is None else tuple(a.V_start)
    for x in [] if a.bisect is not None else a.x:
        st, V = point(x, start, "se")
        results.append((x, st, V))
        if st == "fixed point":
            start = tuple(V)
    fps = [(x, V) for x, st, V in results if st == "fixed point"]
    if not fps:
        return
    lo, Vlo = max(fps, key=lambda t: t[0])
    above = [x for x, st, _ in results if st != "fixed point" and x > lo]
    if not above:
        return
    hi = min(above)
    start = tuple(Vlo)
    while hi - lo > a.bisect_width + 1e-12:
        mid = round((lo + hi) / 2, 6)
        st, V = point(mid, start, "bisect")
        if st == "fixed point":
            lo, start = mid, tuple(V)
        else:
            hi = mid
    print(f"the end of learning lies in ({lo}, {hi}]", flush=True)


if __name__ == "__main__":
    main()
