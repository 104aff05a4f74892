"""What each figure of :mod:`aim_tutorial.reproduce` computes and how it is drawn (private).

One ``_compute_<figure>(sz, seed, progress)`` and one ``_plot_<figure>(data, fig)`` a figure (the
``compute`` and ``plot`` of its :class:`~aim_tutorial.reproduce.FigureSpec` in
:data:`aim_tutorial.reproduce.FIGURES`), and their helpers. Split out of ``reproduce.py`` (issue 49);
``reproduce`` keeps the registry, the files and the command line, and imports these names back
(``aim_tutorial.reproduce._key`` and ``_amp_options``, which the benchmarks read, are the same objects).
"""

from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np

from .counting import alpha_scale, dof_fraction
from .experiments import amp_runs, deep_data_set, gd_data_set


# --------------------------------------------------------------------------- helpers


def _tqdm(iterable, progress: bool, desc: str, total: Optional[int] = None):
    import warnings

    with warnings.catch_warnings():  # without ipywidgets tqdm.auto warns, then draws a text bar
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, disable=not progress, leave=False, dynamic_ncols=True)


def _key(seed: int, *folds: int):
    import jax

    k = jax.random.key(seed)
    for f in folds:
        k = jax.random.fold_in(k, int(f))
    return k



# --------------------------------------------------------------------------- state evolution figures


def _compute_softmax_se(sz, seed, progress):
    from .state_evolution import alpha_perfect_recovery, solve_state_evolution

    rho = sz["rho"]
    rows = []
    x = np.linspace(0.0, 1.05 * dof_fraction(rho), sz["n_alpha"])
    for T in _tqdm(sz["T"], progress, "softmax SE, T"):
        alpha = x / alpha_scale(T)
        res = solve_state_evolution(alpha, rho, T=T, channel="softmax")
        for a, xx, m, c in zip(alpha, x, res.mmse, res.converged):
            rows.append((T, a, xx, m, float(c)))
    params = dict(rho=rho, beta=1.0, noise=0.0, T=list(sz["T"]), n_alpha=sz["n_alpha"],
                  alpha_pr={str(T): alpha_perfect_recovery(rho, T) for T in sz["T"]})
    return ("T", "alpha", "x", "mmse", "converged"), rows, params


def _plot_softmax_se(data, fig):
    from .plotting import COLORS, error_axes, theory_line

    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    T_col, a, x, m = data.column("T"), data.column("alpha"), data.column("x"), data.column("mmse")
    for i, T in enumerate(np.unique(T_col)):
        s = T_col == T
        theory_line(ax1, a[s], m[s], color=COLORS[i % len(COLORS)], label=f"T = {int(T)}")
        theory_line(ax2, x[s], m[s], color=COLORS[i % len(COLORS)], ls="-" if i == 0 else "--",
                    lw=1.8 - 0.3 * i)
    error_axes(ax1, r"sample complexity $\alpha$", "mmse")
    error_axes(ax2, r"$\alpha\,(T^2+T-2)$", None)
    ax1.legend()


def _compute_hardmax_se(sz, seed, progress):
    from .state_evolution import solve_state_evolution

    rho = sz["rho"]
    alpha = np.geomspace(sz["alpha_min"], sz["alpha_max"], sz["n_alpha"])
    rows = []
    for code, score in _tqdm(enumerate(("exact", "published")), progress, "hardmax SE, score", total=2):
        res = solve_state_evolution(alpha, rho, T=2, channel="hardmax", score=score)
        rows += [(code, a, m, float(c)) for a, m, c in zip(alpha, res.mmse, res.converged)]
    params = dict(rho=rho, T=2, score_code={"0": "exact", "1": "published"}, n_alpha=sz["n_alpha"])
    return ("score", "alpha", "mmse", "converged"), rows, params


def _plot_hardmax_se(data, fig):
    from .plotting import COLORS, error_axes, theory_line

    ax = fig.subplots()
    sc, a, m = data.column("score"), data.column("alpha"), data.column("mmse")
    for code, label, ls in ((0, "exact score", "-"), (1, "published score", "--")):
        s = sc == code
        theory_line(ax, a[s], m[s], ls=ls, color=COLORS[code], label=label)
    error_axes(ax, r"sample complexity $\alpha$", "mmse", logx=True)
    ax.legend()


def _compute_hardmax_rescaled(sz, seed, progress):
    from .state_evolution import solve_state_evolution

    x = np.geomspace(sz["x_min"], sz["x_max"], sz["n_alpha"])  # alpha / rho
    rows = []
    for rho in _tqdm(sz["rhos"], progress, "hardmax SE, rho"):
        res = solve_state_evolution(x * rho, rho, T=2, channel="hardmax")
        # the error relative to its alpha = 0 value Q0 - rho = 1
        rows += [(rho, xx, xx * rho, m, float(c)) for xx, m, c in zip(x, res.mmse, res.converged)]
    params = dict(rhos=list(sz["rhos"]), T=2, score="exact", n_alpha=sz["n_alpha"])
    return ("rho", "alpha_over_rho", "alpha", "mmse", "converged"), rows, params


def _plot_hardmax_rescaled(data, fig):
    from .plotting import COLORS, error_axes, theory_line

    ax = fig.subplots()
    r, x, m = data.column("rho"), data.column("alpha_over_rho"), data.column("mmse")
    for i, rho in enumerate(np.unique(r)):
        s = r == rho
        theory_line(ax, x[s], m[s], color=COLORS[i % len(COLORS)], label=rf"$\rho$ = {rho:g}")
    error_axes(ax, r"$\alpha/\rho$", "mmse", logx=True)
    ax.legend()


# --------------------------------------------------------------------------- GAMP-RIE figures


def _amp_options(channel: str) -> dict:
    """The GAMP-RIE options of the figures besides ``max_iter``: for the hardmax adaptive damping
    from 0, as in chapter 5 (half damping is slower at large alpha); the defaults otherwise."""
    return dict(damping=0.0, adaptive_damping=True, tol=1e-6) if channel == "hardmax" else {}


def _amp_points(sz, seed, progress, channel, scores_se):

    from .state_evolution import solve_state_evolution

    rho, d, T = sz["rho"], sz["d"], sz.get("T", 2)
    alphas = np.asarray(sz["alphas"], dtype=float)
    rows = []
    # the seeds of one alpha together: one program over every accelerator (amp_runs), one after
    # another on a CPU
    for i, a in _tqdm(list(enumerate(alphas)), progress, f"GAMP-RIE {channel}, d={d}"):
        runs = amp_runs([_key(seed, i, s) for s in range(sz["seeds"])], d, rho, a, T, channel=channel,
                        max_iter=sz["max_iter"], **_amp_options(channel))
        for s, r in enumerate(runs):
            rows.append((1, a, s, r["error"], float(r["converged"]), float(r["diverged"]), r["n_iter"],
                         r["wall_s"]))
    a_line = np.linspace(0.0, alphas.max() * 1.1, sz["n_line"])
    for code, score in scores_se:
        kw = dict(score=score) if channel == "hardmax" else {}
        se = solve_state_evolution(a_line, rho, T=T, channel=channel, **kw)
        rows += [(0 if code == 0 else 1 + code, a, -1, m, float(c), 0.0, 0, 0.0)
                 for a, m, c in zip(a_line, se.mmse, se.converged)]
    params = dict(rho=rho, T=T, d=d, channel=channel, seeds=sz["seeds"], alphas=list(alphas),
                  max_iter=sz["max_iter"], kind_code={"0": "state evolution (exact score)", "1": "GAMP-RIE",
                                                      "2": "state evolution (published score)"})
    cols = ("kind", "alpha", "seed", "mmse", "converged", "diverged", "n_iter", "seconds")
    return cols, rows, params


def _compute_amp_se(sz, seed, progress):
    return _amp_points(sz, seed, progress, "softmax", [(0, "exact")])


def _compute_amp_hardmax(sz, seed, progress):
    return _amp_points(sz, seed, progress, "hardmax", [(0, "exact"), (1, "published")])


def _compute_causal(sz, seed, progress):
    return _amp_points(sz, seed, progress, "causal_softmax", [(0, "exact")])


def _mean_std_by(x, v, ok):
    xs = np.unique(x)
    mean = np.array([np.mean(v[(x == u) & ok]) if np.any((x == u) & ok) else np.nan for u in xs])
    std = np.array([np.std(v[(x == u) & ok]) if np.sum((x == u) & ok) > 1 else 0.0 for u in xs])
    return xs, mean, std


def _plot_amp(data, fig):
    from .plotting import COLORS, error_axes, experiment_points, theory_line

    ax = fig.subplots()
    k, a, m = data.column("kind"), data.column("alpha"), data.column("mmse")
    s = k == 0
    theory_line(ax, a[s], m[s], color=COLORS[0], label="state evolution")
    s = k == 2
    if np.any(s):
        theory_line(ax, a[s], m[s], ls="--", color=COLORS[2], label="state evolution, published score")
    s = k == 1
    ok = data.column("diverged") == 0
    xs, mean, std = _mean_std_by(a[s], m[s], ok[s])
    experiment_points(ax, xs, mean, std, color=COLORS[1], capsize=3,
                      label=f"GAMP-RIE, d = {data.params['d']}")
    error_axes(ax, r"sample complexity $\alpha$", "mmse")
    ax.set_ylim(bottom=-0.02)
    ax.legend()


# --------------------------------------------------------------------------- gradient descent


@functools.lru_cache(maxsize=4)
def _gd_runs(sz_items, seed, progress):
    """One run of the gradient-descent experiment, shared by ``gd-single`` and ``gd-averaged``."""

    sz = dict(sz_items)
    d, rho, n_init = sz["d"], sz["rho"], sz["n_init"]
    Ks = [2**j for j in range(int(math.log2(n_init)) + 1)]
    pts = [(s, T, i, x) for s in range(sz["seeds"]) for T in sz["T"] for i, x in enumerate(sz["x"])]
    rows = []
    for s, T, i, x in _tqdm(pts, progress, f"gradient descent, d={d}, {n_init} students"):
        alpha = x / alpha_scale(T)
        # the key scheme of scripts/gd_paper_data.py
        r = gd_data_set(_key(seed, T, i, s), d, rho, alpha, T, n_init=n_init, steps=sz["steps"], lr=sz["lr"])
        rows.append((T, alpha, x, s, r["n"], r["single_mean"], r["single_std"], *r["avg_K"], r["n_finite"],
                     r["seconds"]))
    cols = ("T", "alpha", "x", "seed", "n", "single_mean", "single_std", *[f"avg_K{K}" for K in Ks],
            "n_finite", "seconds")
    params = dict(d=d, rho=rho, beta=1.0, T=list(sz["T"]), x=list(sz["x"]), seeds=sz["seeds"], n_init=n_init,
                  optimizer="adam", lr=sz["lr"], steps=sz["steps"], x_definition="alpha (T^2 + T - 2)",
                  errors="||S - S_true||_F^2 / d; avg_KK: mean of the first K students")
    return cols, rows, params


def _compute_gd(sz, seed, progress):
    return _gd_runs(tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in sz.items())),
                    seed, progress)


def _se_line(rho, x_max, n=200):
    from .state_evolution import solve_state_evolution

    x = np.linspace(0.0, x_max, n)
    return x, solve_state_evolution(x / alpha_scale(2), rho, T=2).mmse


def _plot_gd(data, fig, which):
    from .plotting import COLORS, error_axes, experiment_points, theory_line

    ax = fig.subplots()
    T_col, x = data.column("T"), data.column("x")
    if which == "single":
        v, label = data.column("single_mean"), "single student"
    else:
        K = data.params["n_init"]
        v, label = data.column(f"avg_K{K}"), f"average of {K} students"
    xl, ml = _se_line(data.params["rho"], 1.1 * float(np.max(x)))
    theory_line(ax, xl, ml, color="k", label="mmse (state evolution)")
    if which == "single":
        theory_line(ax, xl, 2 * ml, ls=":", color="k", label="2 mmse")
    ok = np.ones_like(x, dtype=bool)
    for i, T in enumerate(np.unique(T_col)):
        s = T_col == T
        xs, mean, std = _mean_std_by(x[s], v[s], ok[s])
        if which == "single" and data.params["seeds"] == 1:
            std = np.array([np.mean(data.column("single_std")[s][x[s] == u]) for u in xs])
        experiment_points(ax, xs, mean, std, color=COLORS[(i + 1) % len(COLORS)], capsize=3,
                          label=f"{label}, T = {int(T)}")
    error_axes(ax, r"$\alpha\,(T^2+T-2)$", r"error $\|\hat S - S\|_F^2/d$")
    ax.set_ylim(bottom=-0.02)
    ax.legend(fontsize=8)
    ax.text(0.98, 0.6, f"d = {data.params['d']}", transform=ax.transAxes, ha="right")


# --------------------------------------------------------------------------- deep attention


def _compute_deep(sz, seed, progress):

    from . import deep

    d, rhos, T, c = sz["d"], list(sz["rhos"]), sz["T"], sz["c"]
    rows = []
    for x in _tqdm(sz["x"], progress, f"two-layer students, d={d}"):
        # the key scheme of scripts/deep_gd_data.py
        widths_code = round(1000 * rhos[0]) * 10000 + round(1000 * rhos[1])
        key = _key(seed, T, round(1000 * x), widths_code)
        alpha = x / alpha_scale(T)
        r = deep_data_set(key, d, rhos, alpha, T, c=c, n_init=sz["n_init"], steps=sz["steps"], lr=sz["lr"])
        rows.append((x, alpha, r["n"], r["single_mean"][0], r["single_std"][0], r["avg"][0], r["single_mean"][1],
                     r["single_std"][1], r["avg"][1], r["n_finite"], r["seconds"]))
    cols = ("x", "alpha", "n", "single1_mean", "single1_std", "avg1", "single2_mean", "single2_std", "avg2",
            "n_finite", "seconds")
    params = dict(d=d, rhos=rhos, T=T, c=c, beta=1.0, n_init=sz["n_init"], steps=sz["steps"], lr=sz["lr"],
                  optimizer="adam", x_count=deep.deep_alpha_count(rhos, T) * alpha_scale(T),
                  x_definition="alpha (T^2 + T - 2)")
    return cols, rows, params


def _plot_deep(data, fig):
    from .plotting import COLORS, error_axes, experiment_points, threshold

    ax = fig.subplots()
    x = data.column("x")
    for ell in (1, 2):
        experiment_points(ax, x, data.column(f"single{ell}_mean"), data.column(f"single{ell}_std"),
                          mfc="none", color=COLORS[ell - 1], capsize=3, label=f"layer {ell}, single student")
        ax.plot(x, data.column(f"avg{ell}"), "s-", color=COLORS[ell - 1], lw=1,
                label=f"layer {ell}, average of {data.params['n_init']}")
    threshold(ax, data.params["x_count"], color="k", label="counting threshold")
    error_axes(ax, r"$\alpha\,(T^2+T-2)$", r"error $\|\hat S_l - S_l\|_F^2/d$")
    ax.set_ylim(bottom=-0.02)
    ax.legend(fontsize=8)
