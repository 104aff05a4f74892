"""Regenerate the figures of the paper and of the book, at three scales.

``python -m aim_tutorial reproduce FIGURE --scale smoke|book|paper [--out DIR]``
computes the data of one figure (or ``all``) with the package's public
functions, writes it to ``DIR/FIGURE.csv`` (a CSV whose commented header holds
the parameters, the seed, the scale, the package and JAX versions and the
device) and draws it to ``DIR/FIGURE.png`` and ``DIR/FIGURE.pdf``.
``python -m aim_tutorial reproduce --list`` lists the figures.

The sizes of every figure at every scale live in
``aim_tutorial.config._SIZES["reproduce"]``: ``smoke`` runs in seconds (it only
checks that the code runs), ``book`` uses the sizes of the rendered book,
``paper`` the sizes of the paper (``d = 200``, 32 initialisations), meant for
one GPU, which JAX uses automatically when one is attached; it also runs,
slower, on a CPU.

The figures:

========================  ==============================================================
``softmax-se``            Bayes-optimal error of softmax attention for several ``T``,
                          against ``alpha`` and against ``alpha (T^2 + T - 2)`` (chapter 4)
``hardmax-se``            hardmax, ``T = 2``: the exact score and the published one (chapter 4)
``hardmax-rescaled``      hardmax against ``alpha / rho`` for several ``rho`` (chapter 4)
``amp-se``                GAMP-RIE at finite ``d`` against state evolution, softmax (chapter 5)
``amp-hardmax``           GAMP-RIE with the exact hardmax score against both SE curves (chapter 5)
``gd-single``             single gradient-descent students against the MMSE (chapter 6)
``gd-averaged``           students averaged over initialisations against the MMSE (chapter 6)
``deep``                  two-layer students on deep attention, error per layer (chapter 7)
========================  ==============================================================

The gradient-descent and deep figures run the same experiment as
``scripts/gd_paper_data.py`` and ``scripts/deep_gd_data.py`` (which write the
data files the chapters ship), through the same public functions
(:func:`aim_tutorial.gd.train_gd`, :func:`aim_tutorial.gd.averaged_errors`,
:func:`aim_tutorial.deep.train_deep_gd`) and the same key scheme, so that the
two agree when the sizes agree.

Example:
    >>> from aim_tutorial import reproduce
    >>> "softmax-se" in reproduce.list_figures()
    True
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
import platform
import sys
import time
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from . import _checks
from .config import SCALES, _SIZES

__all__ = [
    "FIGURES",
    "FigureData",
    "FigureSpec",
    "ReproduceResult",
    "compute_figure",
    "figure_sizes",
    "list_figures",
    "plot_figure",
    "read_data",
    "reproduce",
    "write_data",
]


class FigureData(NamedTuple):
    """The data of one figure: a table and the parameters that produced it.

    Attributes:
        name: the figure's name (a key of :data:`FIGURES`).
        columns: column names.
        rows: a 2-d float array, one row a point (categorical columns are coded as numbers,
            the code being stated in ``params``).
        params: every parameter of the computation (sizes, seed, scale, ...), JSON-serialisable.
    """

    name: str
    columns: tuple
    rows: np.ndarray
    params: dict

    def column(self, col: str) -> np.ndarray:
        """One column by name."""
        return self.rows[:, self.columns.index(col)]


class FigureSpec(NamedTuple):
    """A figure that :func:`reproduce` knows how to make."""

    name: str
    summary: str
    source: str
    compute: Callable
    plot: Callable


class ReproduceResult(NamedTuple):
    """What :func:`reproduce` wrote."""

    data: FigureData
    csv: str
    png: str
    pdf: str
    seconds: float


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


_SIZE_KEY = {"gd-single": "gd", "gd-averaged": "gd"}  # one experiment, two figures


def figure_sizes(name: str, scale: str) -> dict:
    """The sizes of figure ``name`` at ``scale`` (from ``config._SIZES["reproduce"]``)."""
    name = _checks.one_of("figure", name, tuple(FIGURES))
    scale = _checks.one_of("scale", scale, SCALES)
    return dict(_SIZES["reproduce"][scale][_SIZE_KEY.get(name, name)])


def _K(T: int) -> int:
    return T * T + T - 2


# --------------------------------------------------------------------------- state evolution figures


def _compute_softmax_se(sz, seed, progress):
    from .state_evolution import alpha_perfect_recovery, state_evolution

    rho = sz["rho"]
    rows = []
    x = np.linspace(0.0, 1.05 * (2 * rho - rho * rho if rho <= 1 else 1.0), sz["n_alpha"])
    for T in _tqdm(sz["T"], progress, "softmax SE, T"):
        alpha = x / _K(T)
        res = state_evolution(alpha, rho, T=T, channel="softmax")
        for a, xx, m, c in zip(alpha, x, res.mmse, res.converged):
            rows.append((T, a, xx, m, float(c)))
    params = dict(rho=rho, beta=1.0, noise=0.0, T=list(sz["T"]), n_alpha=sz["n_alpha"],
                  alpha_pr={str(T): alpha_perfect_recovery(rho, T) for T in sz["T"]})
    return ("T", "alpha", "x", "mmse", "converged"), rows, params


def _plot_softmax_se(data, fig):
    from .plotting import COLORS

    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    T_col, a, x, m = data.column("T"), data.column("alpha"), data.column("x"), data.column("mmse")
    for i, T in enumerate(np.unique(T_col)):
        s = T_col == T
        ax1.plot(a[s], m[s], color=COLORS[i % len(COLORS)], label=f"T = {int(T)}")
        ax2.plot(x[s], m[s], color=COLORS[i % len(COLORS)], ls="-" if i == 0 else "--", lw=1.8 - 0.3 * i)
    ax1.set_xlabel(r"sample complexity $\alpha$")
    ax1.set_ylabel("mmse")
    ax2.set_xlabel(r"$\alpha\,(T^2+T-2)$")
    ax1.legend()


def _compute_hardmax_se(sz, seed, progress):
    from .state_evolution import state_evolution

    rho = sz["rho"]
    alpha = np.geomspace(sz["alpha_min"], sz["alpha_max"], sz["n_alpha"])
    rows = []
    for code, score in _tqdm(enumerate(("exact", "published")), progress, "hardmax SE, score", total=2):
        res = state_evolution(alpha, rho, T=2, channel="hardmax", score=score)
        rows += [(code, a, m, float(c)) for a, m, c in zip(alpha, res.mmse, res.converged)]
    params = dict(rho=rho, T=2, score_code={"0": "exact", "1": "published"}, n_alpha=sz["n_alpha"])
    return ("score", "alpha", "mmse", "converged"), rows, params


def _plot_hardmax_se(data, fig):
    from .plotting import COLORS

    ax = fig.subplots()
    sc, a, m = data.column("score"), data.column("alpha"), data.column("mmse")
    for code, label, ls in ((0, "exact score", "-"), (1, "published score", "--")):
        s = sc == code
        ax.plot(a[s], m[s], ls, color=COLORS[code], label=label)
    ax.set_xscale("log")
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel("mmse")
    ax.legend()


def _compute_hardmax_rescaled(sz, seed, progress):
    from .state_evolution import state_evolution

    x = np.geomspace(sz["x_min"], sz["x_max"], sz["n_alpha"])  # alpha / rho
    rows = []
    for rho in _tqdm(sz["rhos"], progress, "hardmax SE, rho"):
        res = state_evolution(x * rho, rho, T=2, channel="hardmax")
        # the error relative to its alpha = 0 value Q0 - rho = 1
        rows += [(rho, xx, xx * rho, m, float(c)) for xx, m, c in zip(x, res.mmse, res.converged)]
    params = dict(rhos=list(sz["rhos"]), T=2, score="exact", n_alpha=sz["n_alpha"])
    return ("rho", "alpha_over_rho", "alpha", "mmse", "converged"), rows, params


def _plot_hardmax_rescaled(data, fig):
    from .plotting import COLORS

    ax = fig.subplots()
    r, x, m = data.column("rho"), data.column("alpha_over_rho"), data.column("mmse")
    for i, rho in enumerate(np.unique(r)):
        s = r == rho
        ax.plot(x[s], m[s], color=COLORS[i % len(COLORS)], label=rf"$\rho$ = {rho:g}")
    ax.set_xscale("log")
    ax.set_xlabel(r"$\alpha/\rho$")
    ax.set_ylabel("mmse")
    ax.legend()


# --------------------------------------------------------------------------- GAMP-RIE figures


def _amp_points(sz, seed, progress, channel, scores_se):
    import jax

    from . import model
    from .amp import gamp_rie
    from .state_evolution import state_evolution

    rho, d, T = sz["rho"], sz["d"], 2
    alphas = np.asarray(sz["alphas"], dtype=float)
    rows = []
    pts = [(i, a, s) for i, a in enumerate(alphas) for s in range(sz["seeds"])]
    for i, a, s in _tqdm(pts, progress, f"GAMP-RIE {channel}, d={d}"):
        k_s, k_d, k_a = jax.random.split(_key(seed, i, s), 3)
        S = model.sample_teacher(k_s, d, rho)
        n = max(1, int(round(a * d * d)))
        X, y = model.sample_data(k_d, S, n, T, channel=channel)
        t0 = time.perf_counter()
        # hardmax: adaptive damping from 0, as in chapter 5 (half damping crawls at large alpha)
        damp = dict(damping=0.0, adaptive_damping=True, tol=1e-6) if channel == "hardmax" else {}
        res = gamp_rie(X, y, rho, channel=channel, key=k_a, S_true=S, max_iter=sz["max_iter"], **damp)
        rows.append((1, a, s, float(res.error), float(res.converged), float(res.diverged), res.n_iter,
                     time.perf_counter() - t0))
    a_line = np.linspace(0.0, alphas.max() * 1.1, sz["n_line"])
    for code, score in scores_se:
        kw = dict(score=score) if channel == "hardmax" else {}
        se = state_evolution(a_line, rho, T=T, channel=channel, **kw)
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


def _mean_std_by(x, v, ok):
    xs = np.unique(x)
    mean = np.array([np.mean(v[(x == u) & ok]) if np.any((x == u) & ok) else np.nan for u in xs])
    std = np.array([np.std(v[(x == u) & ok]) if np.sum((x == u) & ok) > 1 else 0.0 for u in xs])
    return xs, mean, std


def _plot_amp(data, fig):
    from .plotting import COLORS

    ax = fig.subplots()
    k, a, m = data.column("kind"), data.column("alpha"), data.column("mmse")
    s = k == 0
    ax.plot(a[s], m[s], color=COLORS[0], label="state evolution")
    s = k == 2
    if np.any(s):
        ax.plot(a[s], m[s], "--", color=COLORS[2], label="state evolution, published score")
    s = k == 1
    ok = data.column("diverged") == 0
    xs, mean, std = _mean_std_by(a[s], m[s], ok[s])
    ax.errorbar(xs, mean, yerr=std, fmt="o", color=COLORS[1], capsize=3,
                label=f"GAMP-RIE, d = {data.params['d']}")
    ax.set_xlabel(r"sample complexity $\alpha$")
    ax.set_ylabel("mmse")
    ax.set_ylim(bottom=-0.02)
    ax.legend()


# --------------------------------------------------------------------------- gradient descent


@functools.lru_cache(maxsize=4)
def _gd_runs(sz_items, seed, progress):
    """One run of the gradient-descent experiment, shared by ``gd-single`` and ``gd-averaged``."""
    import jax

    from . import model
    from .gd import averaged_errors, train_gd

    sz = dict(sz_items)
    d, rho, n_init = sz["d"], sz["rho"], sz["n_init"]
    Ks = [2**j for j in range(int(math.log2(n_init)) + 1)]
    pts = [(s, T, i, x) for s in range(sz["seeds"]) for T in sz["T"] for i, x in enumerate(sz["x"])]
    rows = []
    for s, T, i, x in _tqdm(pts, progress, f"gradient descent, d={d}, {n_init} students"):
        alpha = x / _K(T)
        n = max(1, int(round(alpha * d * d)))
        # the key scheme of scripts/gd_paper_data.py
        k_s, k_d, k_i = jax.random.split(_key(seed, T, i, s), 3)
        S = model.sample_teacher(k_s, d, rho)
        X, y = model.sample_data(k_d, S, n, T)
        t0 = time.perf_counter()
        res = train_gd(k_i, X, y, rho, n_init=n_init, steps=sz["steps"], lr=sz["lr"], S_true=S,
                       record_every=sz["steps"], progress=False)
        err = np.asarray(res.error_students[:, -1])
        avg = averaged_errors(res.S_students, S, Ks)
        rows.append((T, alpha, x, s, n, err.mean(), err.std(ddof=1) if n_init > 1 else 0.0, *avg,
                     int(np.sum(np.asarray(res.finite))), time.perf_counter() - t0))
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
    from .state_evolution import state_evolution

    x = np.linspace(0.0, x_max, n)
    return x, state_evolution(x / _K(2), rho, T=2).mmse


def _plot_gd(data, fig, which):
    from .plotting import COLORS

    ax = fig.subplots()
    T_col, x = data.column("T"), data.column("x")
    if which == "single":
        v, label = data.column("single_mean"), "single student"
    else:
        K = data.params["n_init"]
        v, label = data.column(f"avg_K{K}"), f"average of {K} students"
    xl, ml = _se_line(data.params["rho"], 1.1 * float(np.max(x)))
    ax.plot(xl, ml, color="k", label="mmse (state evolution)")
    if which == "single":
        ax.plot(xl, 2 * ml, ":", color="k", label="2 mmse")
    ok = np.ones_like(x, dtype=bool)
    for i, T in enumerate(np.unique(T_col)):
        s = T_col == T
        xs, mean, std = _mean_std_by(x[s], v[s], ok[s])
        if which == "single" and data.params["seeds"] == 1:
            std = np.array([np.mean(data.column("single_std")[s][x[s] == u]) for u in xs])
        ax.errorbar(xs, mean, yerr=std, fmt="o", color=COLORS[(i + 1) % len(COLORS)], capsize=3,
                    label=f"{label}, T = {int(T)}")
    ax.set_xlabel(r"$\alpha\,(T^2+T-2)$")
    ax.set_ylabel(r"error $\|\hat S - S\|_F^2/d$")
    ax.set_ylim(bottom=-0.02)
    ax.legend(fontsize=8)
    ax.text(0.98, 0.6, f"d = {data.params['d']}", transform=ax.transAxes, ha="right")


# --------------------------------------------------------------------------- deep attention


def _compute_deep(sz, seed, progress):
    import jax

    from . import deep, model

    d, rhos, T, c = sz["d"], list(sz["rhos"]), sz["T"], sz["c"]
    rows = []
    for x in _tqdm(sz["x"], progress, f"two-layer students, d={d}"):
        # the key scheme of scripts/deep_gd_data.py
        widths_code = round(1000 * rhos[0]) * 10000 + round(1000 * rhos[1])
        key = _key(seed, T, round(1000 * x), widths_code)
        k_teach, k_data, k_init = jax.random.split(key, 3)
        Ss = deep.sample_deep_teacher(k_teach, d, rhos)
        alpha = x / _K(T)
        n = max(1, int(round(alpha * d * d)))
        X, y = model.sample_data(k_data, Ss, n=n, T=T, channel="deep", beta=1.0, c=c)
        t0 = time.perf_counter()
        res = deep.train_deep_gd(k_init, X, y, rhos, n_init=sz["n_init"], steps=sz["steps"], lr=sz["lr"],
                                 beta=1.0, c=c, S_true=Ss)
        e = np.asarray(res.error_students[:, :, -1])
        em = np.asarray(res.error_mean[:, -1])
        rows.append((x, alpha, n, e[:, 0].mean(), e[:, 0].std(), em[0], e[:, 1].mean(), e[:, 1].std(), em[1],
                     int(np.sum(np.asarray(res.finite))), time.perf_counter() - t0))
    cols = ("x", "alpha", "n", "single1_mean", "single1_std", "avg1", "single2_mean", "single2_std", "avg2",
            "n_finite", "seconds")
    params = dict(d=d, rhos=rhos, T=T, c=c, beta=1.0, n_init=sz["n_init"], steps=sz["steps"], lr=sz["lr"],
                  optimizer="adam", x_count=deep.deep_alpha_count(rhos, T) * _K(T),
                  x_definition="alpha (T^2 + T - 2)")
    return cols, rows, params


def _plot_deep(data, fig):
    from .plotting import COLORS

    ax = fig.subplots()
    x = data.column("x")
    for ell in (1, 2):
        ax.errorbar(x, data.column(f"single{ell}_mean"), yerr=data.column(f"single{ell}_std"), fmt="o",
                    mfc="none", color=COLORS[ell - 1], capsize=3, label=f"layer {ell}, single student")
        ax.plot(x, data.column(f"avg{ell}"), "s-", color=COLORS[ell - 1], lw=1,
                label=f"layer {ell}, average of {data.params['n_init']}")
    ax.axvline(data.params["x_count"], color="k", ls=":", lw=1, label="counting threshold")
    ax.set_xlabel(r"$\alpha\,(T^2+T-2)$")
    ax.set_ylabel(r"error $\|\hat S_l - S_l\|_F^2/d$")
    ax.set_ylim(bottom=-0.02)
    ax.legend(fontsize=8)


# --------------------------------------------------------------------------- registry

FIGURES = {
    f.name: f
    for f in (
        FigureSpec("softmax-se", "Bayes-optimal error of softmax attention, T = 2..6, and its collapse",
                   "paper: softmax state evolution; chapter 4", _compute_softmax_se, _plot_softmax_se),
        FigureSpec("hardmax-se", "hardmax T = 2: state evolution with the exact and the published score",
                   "paper: hardmax state evolution; chapter 4", _compute_hardmax_se, _plot_hardmax_se),
        FigureSpec("hardmax-rescaled", "hardmax T = 2 against alpha / rho for several rho (exact score)",
                   "paper: hardmax against alpha / rho; chapter 4", _compute_hardmax_rescaled,
                   _plot_hardmax_rescaled),
        FigureSpec("amp-se", "GAMP-RIE at finite d against state evolution, softmax T = 2",
                   "paper: GAMP-RIE markers, softmax; chapter 5", _compute_amp_se, _plot_amp),
        FigureSpec("amp-hardmax", "GAMP-RIE with the exact hardmax score against both SE curves",
                   "paper: GAMP-RIE markers, hardmax; chapter 5", _compute_amp_hardmax, _plot_amp),
        FigureSpec("gd-single", "single gradient-descent students (Adam) against the MMSE",
                   "paper: gradient descent, single students; chapter 6", _compute_gd,
                   functools.partial(_plot_gd, which="single")),
        FigureSpec("gd-averaged", "students averaged over initialisations against the MMSE, T = 2..",
                   "paper: gradient descent, averaged students; chapter 6", _compute_gd,
                   functools.partial(_plot_gd, which="averaged")),
        FigureSpec("deep", "two-layer students on deep attention: error per layer",
                   "book only (the paper has L = 1); chapter 7", _compute_deep, _plot_deep),
    )
}


def list_figures() -> list:
    """Names of the figures :func:`reproduce` can make, in order."""
    return list(FIGURES)


def _header(data: FigureData, scale: str, seed: int) -> list:
    import jax

    from . import __version__

    spec = FIGURES[data.name]
    dev = jax.devices()[0]
    return [
        f"aim_tutorial reproduce: {data.name}: {spec.summary}",
        f"source: {spec.source}",
        f"scale: {scale}",
        f"seed: {seed}",
        f"aim_tutorial: {__version__}, jax: {jax.__version__}, device: {dev.platform} ({dev.device_kind}), "
        f"python: {platform.python_version()}, machine: {platform.machine()}",
        f"written: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
        f"command: python -m aim_tutorial reproduce {data.name} --scale {scale} --seed {seed}",
        "params: " + json.dumps(data.params, sort_keys=True),
    ]


def compute_figure(name: str, scale: str = "smoke", seed: int = 0, progress: bool = False) -> FigureData:
    """Compute the data of figure ``name`` at ``scale`` (no files written).

    Args:
        name: one of :func:`list_figures`.
        scale: ``"smoke"``, ``"book"`` or ``"paper"``.
        seed: root of every random key (``jax.random.key(seed)`` folded per point).
        progress: show ``tqdm`` progress bars.

    Returns:
        :class:`FigureData`.
    """
    name = _checks.one_of("figure", name, tuple(FIGURES))
    scale = _checks.one_of("scale", scale, SCALES)
    seed = _checks.integer_at_least("seed", seed, 0)
    sz = figure_sizes(name, scale)
    cols, rows, params = FIGURES[name].compute(sz, seed, bool(progress))
    params = dict(params, scale=scale, seed=seed)
    return FigureData(name, tuple(cols), np.asarray(rows, dtype=float).reshape(-1, len(cols)), params)


def write_data(data: FigureData, path: str, scale: str, seed: int) -> None:
    """Write ``data`` as a CSV with a commented header (parameters, seed, versions, device)."""
    with open(path, "w") as f:
        for line in _header(data, scale, seed):
            f.write(f"# {line}\n")
        f.write(",".join(data.columns) + "\n")
        for row in data.rows:
            f.write(",".join(f"{v:.10g}" for v in row) + "\n")


def read_data(path: str) -> FigureData:
    """Read a file written by :func:`write_data` back into a :class:`FigureData`."""
    header, body = {}, []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                k, _, v = line[1:].strip().partition(": ")
                header[k] = v
            else:
                body.append(line.strip())
    cols = tuple(body[0].split(","))
    rows = np.array([[float(v) for v in line.split(",")] for line in body[1:] if line], dtype=float)
    name = header["aim_tutorial reproduce"].split(":")[0]
    return FigureData(name, cols, rows.reshape(-1, len(cols)), json.loads(header["params"]))


def plot_figure(data: FigureData):
    """Draw ``data`` on a new :class:`matplotlib.figure.Figure` (no pyplot, any backend)."""
    from matplotlib.figure import Figure

    from .plotting import use_style

    use_style()
    wide = data.name == "softmax-se"
    fig = Figure(figsize=(9.0, 3.6) if wide else (6.0, 3.8), layout="constrained")
    FIGURES[data.name].plot(data, fig)
    return fig


def reproduce(name: str, scale: str = "smoke", out: str = "reproduced", seed: int = 0,
              progress: bool = False) -> ReproduceResult:
    """Compute figure ``name`` at ``scale`` and write ``out/name.csv``, ``.png`` and ``.pdf``.

    Args:
        name: one of :func:`list_figures`.
        scale: ``"smoke"`` (seconds), ``"book"`` (the book's sizes) or ``"paper"`` (the paper's; a GPU).
        out: output directory (created if needed).
        seed: root of every random key.
        progress: show ``tqdm`` progress bars.

    Returns:
        :class:`ReproduceResult` with the data and the paths written.

    Example:
        >>> import tempfile
        >>> from aim_tutorial.reproduce import reproduce
        >>> r = reproduce("softmax-se", "smoke", out=tempfile.mkdtemp())
        >>> r.csv.endswith("softmax-se.csv")
        True
    """
    t0 = time.perf_counter()
    data = compute_figure(name, scale, seed, progress)
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, data.name)
    write_data(data, base + ".csv", scale, seed)
    fig = plot_figure(data)
    fig.savefig(base + ".png")
    fig.savefig(base + ".pdf")
    return ReproduceResult(data, base + ".csv", base + ".png", base + ".pdf", time.perf_counter() - t0)


# --------------------------------------------------------------------------- command line


def _parser():
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m aim_tutorial",
        description="Companion package of the aim-tutorial book. Subcommand: reproduce.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser(
        "reproduce",
        help="regenerate a figure of the paper or the book",
        description="Regenerate a figure of the paper or of the book: writes DIR/FIGURE.csv "
        "(data, with parameters, seed and versions in its header), DIR/FIGURE.png and DIR/FIGURE.pdf.",
    )
    r.add_argument("figure", nargs="*", help="figure name(s), or 'all'; see --list")
    r.add_argument("--list", action="store_true", help="list the figures and exit")
    r.add_argument("--scale", default="smoke", help="smoke (seconds), book (minutes), paper (one GPU)")
    r.add_argument("--out", default="reproduced", help="output directory (default: ./reproduced)")
    r.add_argument("--seed", type=int, default=0, help="root of every random key (default 0)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m aim_tutorial``; returns the exit status."""
    p = _parser()
    a = p.parse_args(argv)
    if a.list:
        width = max(map(len, FIGURES))
        for f in FIGURES.values():
            print(f"{f.name:<{width}}  {f.summary}  [{f.source}]")
        return 0
    if not a.figure:
        p.error("reproduce: give a figure name (or 'all'), or --list")
    names = list(FIGURES) if a.figure == ["all"] else a.figure
    try:
        _checks.one_of("scale", a.scale, SCALES)
        for name in names:
            _checks.one_of("figure", name, tuple(FIGURES))
    except ValueError as e:
        p.error(str(e))
    import jax

    print(f"devices: {jax.devices()}", flush=True)
    for name in names:
        res = reproduce(name, a.scale, a.out, a.seed, progress=not a.no_progress)
        print(f"{name}: {len(res.data.rows)} rows in {res.seconds:.1f} s -> {res.csv}, {res.png}, {res.pdf}",
              flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
