"""Gradient descent against GAMP-RIE on the same instances: chapter 6's same-instance comparison.

For every (d, T, x, data seed) one teacher and one data set (:func:`aim_tutorial.make_instance`), on
which both run: GAMP-RIE from its own start, and ``n_init`` students trained by full-batch Adam (the
published setting: lr 0.1, 1000 steps, W ~ N(0, 1)). A row holds GAMP-RIE's error and its own
prediction, the students' errors, the error of the average of the first K students (K = 1, 2, 4,
..., n_init), the K -> infinity estimate (:func:`aim_tutorial.gd.extrapolated_error`, unbiased, with
its jackknife error), and the gaps ``avg_K{n_init} - amp_error`` and ``gd_Kinf - amp_error``. The
finite size of the data set enters both algorithms alike, so the gap is the comparison that cancels
it (up to how far GAMP-RIE is from the finite-d Bayes error).

Rows are appended one data set at a time to ``--out``, whose header gains every run's command; a
data set already in the file is skipped, so a run can be stopped (``--deadline`` seconds, checked
before each data set) and continued by the same command: the parts of at most two hours the study
is made of.

Usage:
    python scripts/gd_vs_amp.py --d 50 100 --T 2 4 --x 0.4 0.6 0.7 0.75 0.8 0.9 --seeds 8 --deadline 7000
    python scripts/gd_vs_amp.py --d 300 --T 2 --x 0.4 0.8 --seeds 4
    python scripts/gd_vs_amp.py --d 30 --T 2 --x 0.4 --seeds 1 --n-init 4 --steps 50 --out /tmp/smoke.csv
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from aim_tutorial import datafiles
from aim_tutorial.counting import alpha_scale
from aim_tutorial.experiments import SAME_INSTANCE_SEED, gd_amp_data_set, same_instance_key

DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "aim_tutorial", "data", "gd_vs_amp.csv")
ROOT_SEED = SAME_INSTANCE_SEED  # the root of every key (45: the issue that asked for the study)
KEY_COLS = ("d", "T", "x", "seed", "variant")


def instance_key(d: int, T: int, x: float, seed: int):
    """:func:`aim_tutorial.experiments.same_instance_key`: an instance is named by d, T, x and its seed."""
    return same_instance_key(d, T, x, seed)


def _row_key(d, T, x, seed, variant):
    return int(d), int(T), round(float(x), 6), int(seed), str(variant)


def columns(n_init: int) -> list:
    Ks = [2**j for j in range(int(np.log2(n_init)) + 1)]
    return (["d", "T", "alpha", "x", "seed", "variant", "n", "amp_error", "amp_pred", "amp_converged",
             "amp_n_iter", "amp_seconds", "gd_single_mean", "gd_single_std"] + [f"avg_K{K}" for K in Ks]
            + ["gd_Kinf", "gd_Kinf_se", "gap_Kmax", "gap_Kinf", "gd_final_loss", "gd_n_finite", "gd_seconds"])


def data_set(d, T, x, seed, *, rho, n_init, steps, lr, optimizer="adam", max_iter=300, variant="adam",
             init_scale=1.0):
    """Both algorithms on one instance; returns the row's values in the order of :func:`columns`."""
    alpha = x / alpha_scale(T)
    r = gd_amp_data_set(instance_key(d, T, x, seed), d, rho, alpha, T, n_init=n_init, steps=steps, lr=lr,
                        optimizer=optimizer, init_scale=init_scale, max_iter=max_iter)
    a = r["amp"]
    return [d, T, alpha, x, seed, variant, r["n"], a["error"], a["mmse_pred"], int(a["converged"]),
            a["n_iter"], a["wall_s"], r["single_mean"], r["single_std"], *r["avg_K"], r["e_inf"],
            r["e_inf_se"], r["avg_K"][-1] - a["error"], r["e_inf"] - a["error"], r["final_loss_mean"],
            r["n_finite"], r["seconds"]]


def _setting(a) -> str:
    return (f"{'Adam' if a.optimizer == 'adam' else 'plain gradient descent'}, lr {a.lr}, {a.steps} steps, "
            f"{a.n_init} students, W ~ N(0, {a.init_scale}^2)")


def _start(a, cols, command) -> set:
    """The rows already in ``a.out`` (their keys), after adding this run's command to its header; or a new
    file with this run's header."""
    if os.path.exists(a.out):
        t = datafiles.read(a.out).table
        if list(t.dtype.names) != cols:
            raise SystemExit(f"{a.out} has the columns {t.dtype.names}, this run writes {cols}")
        done = {_row_key(*(t[c][i] for c in KEY_COLS)) for i in range(len(t))}
        datafiles.append_rows(a.out, {c: [] for c in cols}, command=command,
                              notes=[f"variant {a.variant}: {_setting(a)}"])
        return done
    params = dict(rho=a.rho, beta=1.0, noise=0.0, channel="softmax", n_init=a.n_init, init="W ~ N(0, 1)",
                  batch="full", weight_decay=0.0, root_seed=ROOT_SEED,
                  variants={a.variant: _setting(a)})
    header = datafiles.make_header(
        "Gradient descent and GAMP-RIE on the same instances, softmax attention-indexed model "
        "(chapter 6 of the aim-tutorial book).",
        commands=[command], seed=ROOT_SEED, params=params,
        notes=["the key of a data set: key(root_seed) folded with d, T, round(1000 x) and the data seed; "
               "aim.make_instance gives the teacher, the data and the algorithms' key (GAMP-RIE's start "
               "and the students' initialisations)",
               "errors are ||S - S_true||_F^2 / d; avg_KK: the mean of the first K students' S; gd_Kinf: "
               "the unbiased K -> infinity estimate (aim.gd.extrapolated_error) and gd_Kinf_se its "
               "jackknife error; gap_Kmax = avg_K(n_init) - amp_error, gap_Kinf = gd_Kinf - amp_error",
               "amp_pred: GAMP-RIE's own prediction of its error; amp_converged 1 or 0; seconds are "
               "wall times on the machine that ran the part"])
    datafiles.write_table(a.out, {c: [] for c in cols}, header)
    return set()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--d", type=int, nargs="+", required=True)
    p.add_argument("--T", type=int, nargs="+", default=[2, 4])
    p.add_argument("--x", type=float, nargs="+", required=True, help="values of alpha (T^2 + T - 2)")
    p.add_argument("--seeds", type=int, default=8, help="data sets a point")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--rho", type=float, default=0.5)
    p.add_argument("--n-init", type=int, default=32)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--optimizer", choices=("adam", "gd"), default="adam")
    p.add_argument("--init-scale", type=float, default=1.0, help="students start from W ~ N(0, s^2)")
    p.add_argument("--variant", default="adam",
                   help="the label of the optimiser's setting in the file (one label, one setting)")
    p.add_argument("--max-iter", type=int, default=300, help="GAMP-RIE's iterations at most")
    p.add_argument("--deadline", type=float, default=None,
                   help="stop before a data set once this many seconds have passed (a part of the study)")
    p.add_argument("--out", default=DEFAULT_OUT)
    a = p.parse_args(argv)
    if a.n_init < 3 or a.n_init & (a.n_init - 1):
        p.error("--n-init must be a power of 2, at least 4")
    cols = columns(a.n_init)
    command = datafiles.command_line("scripts/gd_vs_amp.py", argv)
    with datafiles.locked(a.out):
        done = _start(a, cols, command)
    t_all = time.time()
    todo = [(d, T, x, s) for d in a.d for T in a.T for s in range(a.first_seed, a.first_seed + a.seeds)
            for x in a.x]
    for d, T, x, s in todo:
        if _row_key(d, T, x, s, a.variant) in done:
            continue
        if a.deadline is not None and time.time() - t_all > a.deadline:
            print(f"deadline of {a.deadline:.0f} s reached; the same command continues the study", flush=True)
            break
        row = data_set(d, T, x, s, rho=a.rho, n_init=a.n_init, steps=a.steps, lr=a.lr, optimizer=a.optimizer,
                       max_iter=a.max_iter, variant=a.variant, init_scale=a.init_scale)
        with datafiles.locked(a.out):
            datafiles.append_rows(a.out, {c: [v] for c, v in zip(cols, row)}, add_command=False, fmt=".6g")
        r = dict(zip(cols, row))
        print(f"d {d} T {T} x {x:.3f} seed {s}: amp {r['amp_error']:.4f} avg{a.n_init} "
              f"{r[f'avg_K{a.n_init}']:.4f} Kinf {r['gd_Kinf']:.4f}±{r['gd_Kinf_se']:.4f} "
              f"({r['amp_seconds']:.1f} + {r['gd_seconds']:.1f} s, total {time.time() - t_all:.0f} s)",
              flush=True)
    with datafiles.locked(a.out):
        datafiles.append_rows(a.out, {c: [] for c in cols}, add_command=False,
                              notes=[f"part wall time {time.time() - t_all:.0f} s ({command})"])


if __name__ == "__main__":
    main()
