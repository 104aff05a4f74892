"""GAMP-RIE on causal-softmax data against the state evolution (chapter 8).

Writes ``aim_tutorial/data/causal_amp.csv``: one row a run of :func:`aim_tutorial.gamp_rie` with
``channel="causal_softmax"`` (package defaults: ``init="prior"``, damping 0.5, ``max_iter``) on a
fresh instance :func:`aim_tutorial.make_instance` ``(fold_in(key(seed), 1000 T + 100 i + s), d, rho,
alpha, T)``, ``alpha = frac * alpha_PR`` with ``alpha_PR = (2 rho - rho^2) / (T (T - 1))`` the
causal perfect-recovery threshold, and the state evolution's error at that ``alpha`` (column ``se``).
rho = 0.5, beta = 1, noiseless. Usage:

    python scripts/causal_amp_data.py                       # d = 100, T = 2 and 3, 4 seeds
    python scripts/causal_amp_data.py --d 100 --T 2 3 --seeds 4 --frac 0.2 0.4 0.6 0.8 0.9 1.1 1.2
"""

from __future__ import annotations

import argparse
import os
import time

import jax

import aim_tutorial as aim
from aim_tutorial import datafiles

RHO = 0.5
COLS = ["T", "d", "frac", "alpha", "seed", "n", "error", "se", "n_iter", "status", "seconds"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--T", type=int, nargs="+", default=(2, 3))
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--frac", type=float, nargs="+", default=(0.2, 0.4, 0.6, 0.8, 0.9, 1.1, 1.2))
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--seed", type=int, default=47)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data",
                                               "causal_amp.csv"))
    a = p.parse_args(argv)
    command = datafiles.command_line("scripts/causal_amp_data.py", argv)
    header = datafiles.make_header(
        "GAMP-RIE on causal-softmax data against the state evolution (chapter 8 of the aim-tutorial book).",
        command=command, seed=a.seed,
        params=dict(rho=RHO, beta=1.0, noise=0.0, d=a.d, T=list(a.T), seeds=a.seeds, frac=list(a.frac),
                    max_iter=a.max_iter),
        notes=["alpha = frac * (2 rho - rho^2) / (T (T - 1)); instance make_instance(fold_in(key(seed), "
               "1000 T + 100 i + s), d, rho, alpha, T, channel='causal_softmax'), i the index of frac, s the seed",
               "error = ||S_hat - S||_F^2 / d at the last iteration; se = solve_state_evolution(alpha, rho, T, "
               "channel='causal_softmax').mmse; gamp_rie with the package defaults and max_iter"])
    cols = {c: [] for c in COLS}
    key = jax.random.key(a.seed)
    for T in a.T:
        a_pr = aim.perfect_recovery_threshold(RHO, T, channel="causal_softmax")
        for i, frac in enumerate(a.frac):
            alpha = frac * a_pr
            se = float(aim.solve_state_evolution(alpha, RHO, T, channel="causal_softmax").mmse)
            for s in range(a.seeds):
                t0 = time.time()
                inst = aim.make_instance(jax.random.fold_in(key, 1000 * T + 100 * i + s), a.d, RHO, alpha, T,
                                         channel="causal_softmax")
                res = aim.gamp_rie(inst.X, inst.y, RHO, channel="causal_softmax", key=inst.key, S_true=inst.S,
                                   max_iter=a.max_iter)
                row = [T, a.d, frac, alpha, s, inst.n, float(res.error), se, int(res.n_iter), res.status.split(":")[0],
                       time.time() - t0]
                for c, v in zip(COLS, row):
                    cols[c].append(v)
                print(",".join(map(str, row)), flush=True)
    header["rows"] = len(cols["T"])
    datafiles.write_table(os.path.abspath(a.out), cols, header, fmt=".7g")


if __name__ == "__main__":
    main()
