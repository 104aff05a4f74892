"""Two-layer GAMP-RIE on deep-attention data against the per-layer state evolution (chapter 7).

Appends to ``aim_tutorial/data/deep_amp.csv`` one row a run of :func:`aim_tutorial.deep.deep_gamp_rie`
(``init="mean"``, damping 0.5, at most ``--max-iter`` iterations, ``Z_out`` by the midpoint rule with
``--n-nodes`` cells a direction) on the instance :func:`aim_tutorial.make_instance` with the key
``key(46)`` folded with ``d``, ``round(1000 x)`` and the seed, ``T = 2``, ``rho = (0.5, 0.5)``, ``beta = 1``,
``c = 1``, ``alpha = x / (T^2 + T - 2)``, outputs as log-probabilities (some probabilities are 1 in
float64 from d = 60 on). A run already in the file (same d, x, seed, n_nodes) is skipped, so the
same command continues a study stopped by ``--deadline``; every part's command goes into the header.

Usage:
    python scripts/deep_amp_data.py --d 60 --x 0.6 0.8 1.0 1.2 1.3 1.4 --seeds 2
    python scripts/deep_amp_data.py --d 100 --x 0.8 1.0 1.2 --seeds 2 --deadline 3600
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

import aim_tutorial as aim
from aim_tutorial import datafiles
from aim_tutorial.amp import GampRieOptions

SEED = 46  # the issue that asked for the algorithm
RHOS = (0.5, 0.5)
T = 2
DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data", "deep_amp.csv")
COLS = ["d", "x", "alpha", "seed", "n", "n_nodes", "err1", "err2", "tail1", "tail2", "min1", "min2", "pred1",
        "pred2", "qh11", "qh12", "qh22", "map_qh11", "map_qh12", "map_qh22", "map_se11", "map_se12", "map_se22",
        "ratio1", "ratio2", "cross_error", "q12", "n_iter", "status", "seconds"]
MAP_DRAWS = 2000  # outer draws of the state evolution's q_hat at the run's last V (common random numbers, key 5)
TAIL = 10  # iterations averaged in tail1, tail2


def instance_key(d: int, x: float, seed: int):
    k = jax.random.fold_in(jax.random.key(SEED), d)
    return jax.random.fold_in(jax.random.fold_in(k, int(round(1000 * x))), seed)


def run(d, x, seed, *, n_nodes, max_iter):
    """One run; the row's values in the order of ``COLS``."""
    alpha = x / (T * T + T - 2)
    Ss, X, y, n, _ = aim.make_instance(instance_key(d, x, seed), d, list(RHOS), alpha, T, channel="deep",
                                       log_outputs=True)
    t0 = time.time()
    r = aim.deep.deep_gamp_rie(X, y, RHOS, S_true=Ss, log_outputs=True, n_nodes=n_nodes,
                               options=GampRieOptions(init="mean", max_iter=max_iter))
    seconds = time.time() - t0
    S1, S2 = (np.asarray(S) for S in r.S_hat)
    T1, T2 = (np.asarray(S) for S in Ss)
    h = r.history
    tail = h.error[-TAIL:].mean(axis=0)
    low = h.error.min(axis=0)
    # the state evolution's map at the run's own last V: q = Q0 - diag(V), the q_hat it predicts there
    V = tuple(float(v) for v in r.mmse_pred)
    se = aim.deep.deep_q_hat(jax.random.key(5), alpha, aim.deep.limit_overlap_matrix(RHOS) - np.diag(V), V,
                             n_omega=MAP_DRAWS, n_nodes=n_nodes)
    return [d, x, alpha, seed, n, n_nodes, *h.error[-1], *tail, *low, *r.mmse_pred, h.q_hat[-1, 0, 0],
            h.q_hat[-1, 0, 1], h.q_hat[-1, 1, 1], se.q_hat[0, 0], se.q_hat[0, 1], se.q_hat[1, 1], se.stderr[0, 0],
            se.stderr[0, 1], se.stderr[1, 1], *h.nishimori_ratio[-1], float(np.sum((T1 - S1) * (T2 - S2)) / d),
            float(np.sum(S1 * S2) / d), r.n_iter, r.code.name.lower(), seconds]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, nargs="+", required=True)
    p.add_argument("--x", type=float, nargs="+", required=True, help="values of alpha (T^2 + T - 2)")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--n-nodes", type=int, default=64)
    p.add_argument("--max-iter", type=int, default=80)
    p.add_argument("--deadline", type=float, default=None,
                   help="stop before a run once this many seconds have passed (a part of the study)")
    p.add_argument("--redo", nargs="+", default=(), metavar="STATUS",
                   help="remove the runs of these --d, --x, --seeds and --n-nodes that stopped with one of these "
                        "statuses (say collapse) and run them again")
    p.add_argument("--out", default=DEFAULT_OUT)
    a = p.parse_args(argv)
    command = datafiles.command_line("scripts/deep_amp_data.py", argv)
    with datafiles.locked(a.out):
        if a.redo and os.path.exists(a.out):
            _remove(a, command)
        done = _start(a, command)
    t_all = time.time()
    for d in a.d:
        for s in range(a.seeds):
            for x in a.x:
                if (d, round(x, 6), s, a.n_nodes) in done:
                    continue
                if a.deadline is not None and time.time() - t_all > a.deadline:
                    print(f"deadline of {a.deadline:.0f} s reached; the same command continues", flush=True)
                    return
                row = run(d, x, s, n_nodes=a.n_nodes, max_iter=a.max_iter)
                with datafiles.locked(a.out):
                    datafiles.append_rows(a.out, {c: [v] for c, v in zip(COLS, row)}, add_command=False,
                                          fmt=".6g")
                r = dict(zip(COLS, row))
                print(f"d {d} x {x} seed {s}: err {r['err1']:.4f} {r['err2']:.4f} tail {r['tail1']:.4f} "
                      f"{r['tail2']:.4f} pred {r['pred1']:.4f} {r['pred2']:.4f} {r['status']} "
                      f"({r['n_iter']} it, {r['seconds']:.0f} s)", flush=True)
    with datafiles.locked(a.out):
        datafiles.append_rows(a.out, {c: [] for c in COLS}, add_command=False,
                              notes=[f"part wall time {time.time() - t_all:.0f} s ({command})"])


def _remove(a, command) -> None:
    """Remove the runs of this part that stopped with a status of ``a.redo``, saying so in the header."""
    xs = {round(x, 6) for x in a.x}

    def mine(r):
        return (int(r["d"]) in a.d and round(float(r["x"]), 6) in xs and int(r["seed"]) < a.seeds
                and int(r["n_nodes"]) == a.n_nodes and str(r["status"]) in a.redo)

    gone = [r for r in datafiles.read(a.out).table if mine(r)]
    note = (f"removed to run again ({command}): " + "; ".join(
        f"d {int(r['d'])} x {float(r['x']):g} seed {int(r['seed'])} ({r['status']} at iteration {int(r['n_iter'])})"
        for r in gone)) if gone else f"nothing to remove ({command})"
    if gone:
        datafiles.remove_rows(a.out, mine, add_command=False, notes=[note])
    print(note, flush=True)


def _start(a, command) -> set:
    """The runs already in ``a.out`` (their keys), after adding this part's command to its header; or a new
    file with this part's header."""
    done = set()
    if os.path.exists(a.out):
        t = datafiles.read(a.out).table
        done = {(int(t["d"][i]), round(float(t["x"][i]), 6), int(t["seed"][i]), int(t["n_nodes"][i]))
                for i in range(len(t))}
        datafiles.append_rows(a.out, {c: [] for c in COLS}, command=command)
    else:
        header = datafiles.make_header(
            "Two-layer GAMP-RIE on deep-attention data against the per-layer state evolution "
            "(chapter 7 of the aim-tutorial book).",
            commands=[command], seed=SEED,
            params=dict(T=T, rhos=list(RHOS), beta=1.0, c=1.0, init="mean", damping=0.5, outputs="log"),
            notes=["instance: aim.make_instance(key, d, rhos, alpha, T, channel='deep', log_outputs=True), key = "
                   "key(46) folded with d, round(1000 x) and the seed; alpha = x / (T^2 + T - 2)",
                   "err1, err2: ||S_hat_l - S_l||_F^2 / d at the last iteration; tail1, tail2: their mean over "
                   f"the last {TAIL} iterations; min1, min2: their smallest; pred1, pred2: the algorithm's "
                   "predicted errors c_l at the last iteration",
                   "qh11, qh12, qh22: q_hat at the last iteration; ratio1, ratio2: its Nishimori ratios (on 256 "
                   "samples); cross_error: Tr((S_1 - S_hat_1)(S_2 - S_hat_2)) / d; q12: Tr(S_hat_1 S_hat_2) / d",
                   f"map_qh*, map_se*: the state evolution's q_hat at the run's last V = (pred1, pred2), q = Q0 - "
                   f"diag(V) (aim.deep.deep_q_hat(key(5), alpha, q, V, n_omega={MAP_DRAWS}, n_nodes)), and its "
                   "standard errors",
                   "status: why the run stopped, the name of its aim_tutorial.amp_kernel.Status; seconds: wall time of the "
                   "run on the machine that ran the part"])
        datafiles.write_table(a.out, {c: [] for c in COLS}, header)
    return done


if __name__ == "__main__":
    main()
