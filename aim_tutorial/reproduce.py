"""Regenerate the figures of the paper and of the book, at three scales.

``python -m aim_tutorial reproduce FIGURE --scale smoke|book|paper [--out DIR]``
computes the data of one figure (or ``all``) with the package's public
functions, writes it to ``DIR/FIGURE.csv`` (a CSV whose commented header holds
the parameters, the seed, the scale, the package and JAX versions and the
device) and draws it to ``DIR/FIGURE.png`` and ``DIR/FIGURE.pdf``; ``DIR/FIGURE.manifest.json`` ties
the three together (figure, scale, seed, versions, command, start and end times, the SHA-256 of each
file and the CSV's row count). ``python -m aim_tutorial reproduce --list`` lists the figures.

No lost results:

* every argument (figure, scale, seed, ``--out``) is checked before the computation, which may take
  hours; a bad one exits with status 2 and a one-line message;
* the four files are written under temporary names in ``DIR`` and renamed into place together once
  all are complete, the manifest last (a Ctrl-C is held during the renames; a failed rename puts the
  previous files back): a fault or a Ctrl-C leaves the previous complete set, and no temporary file;
* the CSV states its row count in its header, and :func:`read_data` checks it and, when the manifest
  is there, the SHA-256: a truncated or mismatched file is refused with an error naming it;
* the files of another run (another scale or seed) of the same figure are not overwritten without
  ``--force`` (``force=True``); a rerun with the same scale and seed rewrites them (same numbers).

The sizes of every figure at every scale live in
``aim_tutorial.config._SIZES["reproduce"]``: ``smoke`` runs in seconds (it only
checks that the code runs), ``book`` uses the sizes of the rendered book,
``paper`` the sizes of the paper (``d = 200``, 32 initialisations), meant for
one GPU, which JAX uses automatically when one is attached; it also runs,
slower, on a CPU.

The command line keeps the compiled programs in JAX's persistent compilation cache
(:func:`aim_tutorial.config.compilation_cache`; ``--no-compile-cache`` turns it off): a sweep
compiles a program for every ``n = alpha d^2`` it meets, and a second run with the same sizes (another
``--seed``) reads them instead (the benchmarks page gives the times).

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
from .config import SCALES, _SIZES, compilation_cache
from .counting import alpha_scale, dof_fraction

__all__ = [
    "amp_run",
    "amp_runs",
    "deep_data_set",
    "gd_data_set",
    "gd_amp_data_set",
    "same_instance_key",
    "FIGURES",
    "FigureData",
    "FigureSpec",
    "HeldInterrupt",
    "ReproduceResult",
    "ResultsExistError",
    "SEED_MAX",
    "compute_figure",
    "figure_sizes",
    "list_figures",
    "plot_figure",
    "read_data",
    "read_manifest",
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


# --------------------------------------------------------------------------- one instance of each experiment
# (shared with scripts/: amp_experiments.py, gd_paper_data.py and deep_gd_data.py call these)


def _amp_summary(res, wall_s: float, **extra) -> dict:
    """The fields of a GAMP-RIE result that the runners report (``amp_run``, ``amp_runs``, ...)."""
    return dict(error=float(res.error), mmse_pred=float(res.mmse_pred), n_iter=int(res.n_iter),
                converged=bool(res.converged), diverged=bool(res.diverged), status=res.status, **extra,
                wall_s=wall_s)


def _gd_summary(res, S, n_init: int) -> dict:
    """The students' errors that the runners report: single (mean, std over the students), the
    averages of the first K = 1, 2, 4, ..., n_init, the final loss and the finite count."""
    from .gd import averaged_errors

    Ks = [2**j for j in range(int(math.log2(n_init)) + 1)]
    err = np.asarray(res.error_students[:, -1])
    return dict(single_mean=float(err.mean()), single_std=float(err.std(ddof=1)) if n_init > 1 else 0.0,
                avg_K=[float(v) for v in averaged_errors(res.S_students, S, Ks=Ks)], Ks=Ks,
                final_loss_mean=float(np.mean(res.final_loss)), n_finite=int(np.sum(np.asarray(res.finite))))


def amp_run(key, d: int, rho: float, alpha: float, T: int = 2, *, channel="softmax", **options) -> dict:
    """GAMP-RIE on one instance (:func:`aim_tutorial.make_instance` of ``key``), from its own start.

    Returns a dict: ``error``, ``mmse_pred``, ``n_iter``, ``converged``, ``diverged``, ``status``, ``n``
    and ``wall_s`` (the run's wall time); ``options`` go to :func:`aim_tutorial.gamp_rie`.
    """
    from . import model
    from .amp import gamp_rie

    S, X, y, n, k_start = model.make_instance(key, d, rho, alpha, T, channel=channel)
    t0 = time.perf_counter()
    res = gamp_rie(X, y, rho, channel=channel, key=k_start, S_true=S, **options)
    return _amp_summary(res, time.perf_counter() - t0, n=n)


def amp_runs(keys, d: int, rho: float, alpha: float, T: int = 2, *, channel="softmax", batch=None,
             **options) -> list:
    """:func:`amp_run` on the instances of ``keys`` (one dict each, in their order).

    ``batch=True`` runs them as one program (:func:`aim_tutorial.amp_device.gamp_rie_batch`, the loop
    on the device, the instances split over every visible device; the same results up to
    rounding, ``wall_s`` the batch's time over the instances); ``False`` one after another;
    ``None`` (default) batches on an accelerator (GPU, TPU) and runs them one after another on a
    CPU, as the book's data files were made (on a CPU the batch is faster warm too, 1.2-2.9 times
    for 8 instances at ``d = 80`` on the benchmarks page, but compiles a program of its own).
    """
    import jax
    import jax.numpy as jnp

    keys = list(keys)
    if not keys:
        raise ValueError("keys must hold at least one jax.random key, got none")
    if batch is None:
        batch = jax.default_backend() != "cpu"
    batch = _checks.boolean("batch", batch)
    if not batch:
        return [amp_run(k, d, rho, alpha, T, channel=channel, **options) for k in keys]
    from . import model
    from .amp import GampRieOptions
    from .amp_device import gamp_rie_batch

    insts = [model.make_instance(k, d, rho, alpha, T, channel=channel) for k in keys]
    X, y, S = (jnp.stack([getattr(inst, f) for inst in insts]) for f in ("X", "y", "S"))
    t0 = time.perf_counter()
    res = gamp_rie_batch(X, y, rho, channel=channel, keys=[inst.key for inst in insts], S_true=S,
                         options=GampRieOptions(**options))
    wall = (time.perf_counter() - t0) / len(keys)
    return [_amp_summary(r, wall, n=inst.n) for r, inst in zip(res, insts)]


def gd_data_set(key, d: int, rho: float, alpha: float, T: int, *, n_init: int, steps: int, lr: float) -> dict:
    """``n_init`` students trained by full-batch Adam on one instance (:func:`aim_tutorial.make_instance`).

    Returns a dict: ``n``, ``single_mean`` and ``single_std`` (over the students, ``ddof=1``), ``avg_K``
    (the errors of the average of the first K students, K = 1, 2, 4, ..., ``n_init``), ``Ks``,
    ``final_loss_mean``, ``n_finite`` and ``seconds`` (training wall time).
    """
    from . import model
    from .gd import train_gd

    S, X, y, n, k_init = model.make_instance(key, d, rho, alpha, T)
    t0 = time.perf_counter()
    res = train_gd(k_init, X, y, rho, n_init=n_init, steps=steps, lr=lr, S_true=S, record_every=steps,
                   progress=False)
    return dict(n=n, **_gd_summary(res, S, n_init), seconds=time.perf_counter() - t0)


SAME_INSTANCE_SEED = 45  # the root of the keys of chapter 6's same-instance study (scripts/gd_vs_amp.py)


def same_instance_key(d: int, T: int, x: float, seed: int, root: int = SAME_INSTANCE_SEED):
    """The key of a data set of the same-instance study: ``key(root)`` folded with ``d``, ``T``,
    ``round(1000 x)`` and the data seed, so that a data set is named by these alone."""
    import jax

    k = jax.random.key(root)
    for v in (d, T, int(round(1000 * x)), seed):
        k = jax.random.fold_in(k, v)
    return k


def gd_amp_data_set(key, d: int, rho: float, alpha: float, T: int, *, n_init: int, steps: int, lr: float,
                    optimizer: str = "adam", init_scale: float = 1.0, max_iter: int = 300) -> dict:
    """GAMP-RIE and ``n_init`` gradient-descent students on the same instance (chapter 6's comparison).

    One :func:`aim_tutorial.make_instance` of ``key``: its teacher and data are given to both
    algorithms, its algorithm key to GAMP-RIE's start and to the students' initialisations. Returns a
    dict: ``n``, ``amp`` (:func:`amp_run`'s fields besides ``n``), ``single_mean``, ``single_std``,
    ``avg_K`` and ``Ks`` (as :func:`gd_data_set`), ``e_inf`` and ``e_inf_se``
    (:func:`aim_tutorial.gd.extrapolated_error`), ``final_loss_mean``, ``n_finite`` and ``seconds``
    (the students' training wall time).
    """
    from . import model
    from .amp import gamp_rie
    from .gd import extrapolated_error, train_gd

    S, X, y, n, k_alg = model.make_instance(key, d, rho, alpha, T)
    t0 = time.perf_counter()
    res = gamp_rie(X, y, rho, key=k_alg, S_true=S, max_iter=max_iter)
    amp = _amp_summary(res, time.perf_counter() - t0)
    t0 = time.perf_counter()
    gd = train_gd(k_alg, X, y, rho, n_init=n_init, steps=steps, lr=lr, optimizer=optimizer, S_true=S,
                  record_every=steps, progress=False, init_scale=init_scale)
    gd.S_hat.block_until_ready()
    seconds = time.perf_counter() - t0
    e_inf, e_se = extrapolated_error(gd.S_students, S) if n_init >= 3 else (float("nan"), float("nan"))
    return dict(n=n, amp=amp, **_gd_summary(gd, S, n_init), e_inf=e_inf, e_inf_se=e_se, seconds=seconds)


def deep_data_set(key, d: int, rhos, alpha: float, T: int, *, c: float, n_init: int, steps: int,
                  lr: float) -> dict:
    """Two-layer students on one deep-attention instance (:func:`aim_tutorial.make_instance`, ``beta = 1``).

    Returns a dict: ``n``, ``single_mean``, ``single_std`` (per layer, over the students), ``avg`` (per
    layer, the error of the average), ``final_loss_mean``, ``n_finite`` and ``seconds``.
    """
    from . import deep, model

    Ss, X, y, n, k_init = model.make_instance(key, d, list(rhos), alpha, T, channel="deep", beta=1.0, c=c)
    t0 = time.perf_counter()
    res = deep.train_deep_gd(k_init, X, y, list(rhos), n_init=n_init, steps=steps, lr=lr, beta=1.0, c=c,
                             S_true=Ss)
    res.S_hat.block_until_ready()
    seconds = time.perf_counter() - t0
    e = np.asarray(res.error_students[:, :, -1])  # (K, L)
    em = np.asarray(res.error_mean[:, -1])
    return dict(n=n, single_mean=e.mean(axis=0).tolist(), single_std=e.std(axis=0).tolist(), avg=em.tolist(),
                final_loss_mean=float(np.mean(res.final_loss)), n_finite=int(np.sum(np.asarray(res.finite))),
                seconds=seconds)


def _amp_options(channel: str) -> dict:
    """The GAMP-RIE options of the figures besides ``max_iter``: for the hardmax adaptive damping
    from 0, as in chapter 5 (half damping is slower at large alpha); the defaults otherwise."""
    return dict(damping=0.0, adaptive_damping=True, tol=1e-6) if channel == "hardmax" else {}


def _amp_points(sz, seed, progress, channel, scores_se):

    from .state_evolution import solve_state_evolution

    rho, d, T = sz["rho"], sz["d"], 2
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


# --------------------------------------------------------------------------- arguments

SEED_MAX = 2**32 - 1
"""The largest seed. ``jax.random.key`` takes a 64-bit integer, but with 32-bit JAX it keeps only
the low 32 bits (``2**32`` gives the key of ``0``) and it maps negative seeds onto large ones; seeds in
``[0, 2**32 - 1]`` give distinct keys, the same with and without ``jax_enable_x64``."""


def _check_seed(seed) -> int:
    """``seed`` an integer in ``[0, SEED_MAX]`` (bools, floats and strings rejected)."""
    seed = _checks.integer_at_least("seed", seed, 0)
    if seed > SEED_MAX:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1], got {seed!r}")
    return seed


def _check_out(out) -> str:
    """``out`` a directory that exists and is writable, or that can be created; nothing is created.

    Refused: ``''``, an existing file that is not a directory, a path under a file (``/dev/null/x``),
    a broken symbolic link, a directory this process cannot write in.
    """
    if isinstance(out, bytes) or not isinstance(out, (str, os.PathLike)):
        raise _checks.ArgumentTypeError(f"out must be a directory path (a str), got {out!r}")
    out = os.fspath(out)
    if not isinstance(out, str):
        raise _checks.ArgumentTypeError(f"out must be a directory path (a str), got {out!r}")
    if out == "" or "\0" in out:
        raise ValueError(f"out must be a directory path, got {out!r}")
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise ValueError(f"out: {out!r} exists and is not a directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise ValueError(f"out: cannot write in the directory {out!r} (permission denied)")
        return out
    p = os.path.abspath(out)
    while not os.path.exists(p):
        if os.path.lexists(p):
            raise ValueError(f"out: {p!r} is a broken symbolic link")
        parent = os.path.dirname(p)
        if parent == p:  # pragma: no cover - the root always exists
            break
        p = parent
    if not os.path.isdir(p):
        raise ValueError(f"out: cannot create {out!r}: {p!r} is not a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"out: cannot create {out!r}: no permission to write in {p!r}")
    return out


def _prepare_out(out: str) -> list:
    """Create ``out`` (checked by :func:`_check_out`) and prove that a file can be written in it.

    Returns the directories created (deepest last), for :func:`_remove_created` on failure.
    Raises ``ValueError`` when the directory cannot be created or written (a read-only file
    system, a quota, a race with another process).
    """
    created = []
    p = os.path.abspath(out)
    missing = []
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:  # pragma: no cover
            break
        p = parent
    try:
        for d in reversed(missing):
            os.mkdir(d)
            created.append(d)
        path = _new_temp(out, ".write-probe")
        os.remove(path)
    except OSError as e:
        _remove_created(created)
        raise ValueError(f"out: cannot write in {out!r}: {e.strerror or e}") from None
    return created


def _remove_created(created: list) -> None:
    """Remove the directories :func:`_prepare_out` created, if they are still empty."""
    for d in reversed(created):
        try:
            os.rmdir(d)
        except OSError:
            break


# --------------------------------------------------------------------------- files of one run


def _paths(out: str, name: str) -> dict:
    """The four files of figure ``name`` in ``out``."""
    base = os.path.join(out, name)
    return {"csv": base + ".csv", "png": base + ".png", "pdf": base + ".pdf",
            "manifest": base + ".manifest.json"}


def _read_header(path: str) -> dict:
    """The header of a CSV written by :func:`write_data` (read without the completeness checks)."""
    from . import datafiles

    return datafiles.read(path, verify=False).header


def _existing_run(out: str, name: str) -> Optional[dict]:
    """What the files of figure ``name`` already in ``out`` say about the run that wrote them.

    ``None`` when there are none; else a dict with ``scale`` and ``seed`` (``None`` when the
    files cannot tell) and ``source``, the file that told.
    """
    paths = _paths(out, name)
    present = [p for p in paths.values() if os.path.lexists(p)]
    if not present:
        return None
    for p in present:
        if os.path.isdir(p):
            raise ValueError(f"out: {p!r} is a directory; a figure file cannot be written there")
    man = paths["manifest"]
    if os.path.lexists(man):
        try:
            with open(man, encoding="utf-8") as f:
                m = json.load(f)
            return dict(scale=m["scale"], seed=m["seed"], figure=m.get("figure", name), source=man)
        except (OSError, ValueError, KeyError, TypeError):
            return dict(scale=None, seed=None, figure=None, source=man, why="unreadable manifest")
    if os.path.lexists(paths["csv"]):
        try:
            h = _read_header(paths["csv"])
            return dict(scale=h["params"]["scale"], seed=int(h["seed"]), figure=name, source=paths["csv"])
        except (OSError, ValueError, KeyError):
            return dict(scale=None, seed=None, figure=None, source=paths["csv"],
                        why="no scale and seed in it")
    return dict(scale=None, seed=None, figure=None, source=present[0], why="no CSV or manifest beside it")


class ResultsExistError(FileExistsError):
    """The output directory holds another run's results for this figure (pass ``force=True``)."""


def _check_overwrite(out: str, name: str, scale: str, seed: int, force: bool) -> None:
    """Refuse to replace the files of another run (another scale or seed) unless ``force``.

    The same figure, scale and seed may be rewritten: it reproduces the same numbers (with,
    perhaps, a newer version of the package, which the new manifest records).
    """
    old = _existing_run(out, name)
    if old is None or force:
        return
    if old["scale"] == scale and old["seed"] == seed and old["figure"] == name:
        return
    if old["scale"] is None:
        what = f"files of an unknown run ({old['why']}: {old['source']})"
    else:
        what = f"another run's results (scale {old['scale']}, seed {old['seed']}, from {old['source']})"
    raise ResultsExistError(
        f"{os.path.join(out, name)}.* hold {what}, not those of this run (scale {scale}, seed {seed}): "
        "refusing to overwrite them; pass --force (force=True) to replace them, or choose another --out"
    )


def _new_temp(directory: str, suffix: str) -> str:
    """Create an empty temporary file in ``directory`` (mode 0666 less the umask, like ``open``)."""
    import secrets

    for _ in range(100):
        path = os.path.join(directory, f".{suffix.lstrip('.')}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        os.close(fd)
        return path
    raise FileExistsError(f"cannot create a temporary file in {directory!r}")  # pragma: no cover


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - not on every platform
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class HeldInterrupt(KeyboardInterrupt):
    """A Ctrl-C held while a complete set of files was renamed into place, raised once it was."""


class _DeferInterrupt:
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it: the renames are not cut in half."""

    def __enter__(self):
        import signal
        import threading

        self.got, self.prev = None, None
        # only in the main thread, and only over a handler set from Python (one that can be put back)
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is not None:
            try:
                self.prev = signal.signal(signal.SIGINT, self._hold)
            except (ValueError, OSError):  # pragma: no cover - no signals here
                self.prev = None
        return self

    def _hold(self, signum, frame):
        self.got = (signum, frame)

    def __exit__(self, *exc):
        import signal

        if self.prev is not None:
            signal.signal(signal.SIGINT, self.prev)
        if self.got is not None and exc[0] is None:
            if self.prev is signal.default_int_handler or self.prev == signal.SIG_DFL:
                raise HeldInterrupt
            if callable(self.prev):
                self.prev(*self.got)
        return False


class _Staging:
    """Files written under temporary names in their final directory, renamed into place together.

    ``new(final)`` creates a temporary file for ``final``; ``commit()`` renames every temporary onto
    its final name, in the order they were made (the manifest last), with Ctrl-C held until the last
    rename; if a rename fails the files already replaced are put back (from hard links made just
    before). Leaving the ``with`` block without ``commit()`` (an error, a ``KeyboardInterrupt``)
    removes the temporaries: the previous files are never touched.
    """

    def __init__(self, directory: str):
        self.directory = directory
        self.files = []  # (temporary, final)

    def __enter__(self):
        return self

    def new(self, final: str) -> str:
        tmp = _new_temp(self.directory, os.path.basename(final))
        self.files.append((tmp, final))
        return tmp

    def commit(self) -> None:
        with _DeferInterrupt():
            done, backups = [], []
            try:
                for tmp, final in self.files:
                    existed, backup = os.path.lexists(final), None
                    if existed:
                        backup = _new_temp(self.directory, os.path.basename(final) + ".old")
                        os.remove(backup)
                        try:
                            os.link(final, backup, follow_symlinks=False)
                            backups.append(backup)
                        except OSError:  # a file system without hard links: no way back for this one
                            backup = None
                    os.replace(tmp, final)
                    done.append((final, existed, backup))
            except BaseException:
                for final, existed, backup in reversed(done):  # put the previous files back
                    try:
                        if backup is not None:
                            os.replace(backup, final)
                        elif not existed:
                            os.remove(final)
                        # else: the new file stays; the previous manifest, kept, no longer matches it
                    except OSError:  # pragma: no cover - the manifest check still catches it
                        pass
                raise
            finally:
                for b in backups:
                    try:
                        os.remove(b)
                    except OSError:
                        pass
            self.files = []
            _fsync_dir(self.directory)

    def __exit__(self, *exc):
        for tmp, _ in self.files:
            try:
                os.remove(tmp)
            except OSError:
                pass
        self.files = []
        return False


def _sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _command(name: str, scale: str, seed: int) -> str:
    return f"python -m aim_tutorial reproduce {name} --scale {scale} --seed {seed}"


def _header(data: FigureData, scale: str, seed: int) -> dict:
    """The data file's header (:mod:`aim_tutorial.datafiles`): title, command, versions, seed, params."""
    from . import datafiles

    spec = FIGURES[data.name]
    return datafiles.make_header(f"{data.name}: {spec.summary}", command=_command(data.name, scale, seed),
                                 seed=seed, params=data.params, notes=[f"source: {spec.source}"])


# --------------------------------------------------------------------------- public functions


def compute_figure(name: str, scale: str = "smoke", seed: int = 0, progress: bool = False) -> FigureData:
    """Compute the data of figure ``name`` at ``scale`` (no files written).

    Args:
        name: one of :func:`list_figures`.
        scale: ``"smoke"``, ``"book"`` or ``"paper"``.
        seed: root of every random key (``jax.random.key(seed)`` folded per point), an integer
            in ``[0, 2**32 - 1]`` (:data:`SEED_MAX`).
        progress: show ``tqdm`` progress bars.

    Returns:
        :class:`FigureData`.
    """
    name = _checks.one_of("figure", name, tuple(FIGURES))
    scale = _checks.one_of("scale", scale, SCALES)
    seed = _check_seed(seed)
    sz = figure_sizes(name, scale)
    cols, rows, params = FIGURES[name].compute(sz, seed, bool(progress))
    params = dict(params, scale=scale, seed=seed)
    return FigureData(name, tuple(cols), np.asarray(rows, dtype=float).reshape(-1, len(cols)), params)


def _write_csv(f, data: FigureData, scale: str, seed: int) -> None:
    """The CSV text of ``data`` (a :mod:`aim_tutorial.datafiles` table) to the open file ``f``."""
    from . import datafiles

    columns = {c: data.rows[:, i] for i, c in enumerate(data.columns)}
    f.write(datafiles.table_text(columns, _header(data, scale, seed), fmt=".10g"))


def _write_to(tmp: str, mode: str, writer: Callable) -> None:
    """Open ``tmp``, let ``writer(f)`` fill it, and flush it to the disk."""
    with open(tmp, mode, **({"encoding": "utf-8", "newline": "\n"} if "b" not in mode else {})) as f:
        writer(f)
        f.flush()
        os.fsync(f.fileno())


def write_data(data: FigureData, path: str, scale: str, seed: int) -> None:
    """Write ``data`` as a CSV with a commented header (parameters, seed, row count, versions, device).

    The file is written under a temporary name in the same directory and renamed onto ``path``
    only once complete: ``path`` holds either its previous content or the whole new file.
    """
    path = os.fspath(path)
    with _Staging(os.path.dirname(path) or ".") as st:
        _write_to(st.new(path), "w", lambda f: _write_csv(f, data, scale, seed))
        st.commit()


def _manifest_path(csv_path: str) -> str:
    stem = csv_path[:-4] if csv_path.endswith(".csv") else csv_path
    return stem + ".manifest.json"


def read_data(path: str, *, verify: bool = True) -> FigureData:
    """Read a file written by :func:`write_data` back into a :class:`FigureData`.

    The file must be complete (:func:`aim_tutorial.datafiles.read`: it ends with a newline and holds
    the number of rows its header states) and, when a manifest ``FIGURE.manifest.json`` lies beside it
    (written by :func:`reproduce`), match the row count and the SHA-256 the manifest records. A file
    that fails (truncated by a fault, written by an interrupted run, edited by hand) raises
    ``ValueError`` naming it. ``verify=False`` skips these checks (to inspect such a file).
    """
    import hashlib

    from . import datafiles

    path = os.fspath(path)
    verify = _checks.boolean("verify", verify)
    f = datafiles.read(path, verify=verify)
    name = f.header["title"].split(":")[0]
    if f.table is None or name not in FIGURES:
        raise ValueError(f"{path}: not a CSV written by aim_tutorial.reproduce (its title names no figure)")
    cols = f.columns
    rows = np.column_stack([np.asarray(f.table[c], dtype=float) for c in cols]).reshape(-1, len(cols))
    man = _manifest_path(path)
    if verify and os.path.exists(man):
        try:
            with open(man, encoding="utf-8") as fm:
                entry = json.load(fm)["files"]["csv"]
            want_sha, want_rows, want_name = entry["sha256"], int(entry["rows"]), entry["name"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: its manifest {man} cannot be read ({e!r})") from None
        if want_name != os.path.basename(path):
            raise ValueError(f"{path}: its manifest {man} describes {want_name}, not this file")
        with open(path, "rb") as fb:
            raw = fb.read()
        if hashlib.sha256(raw).hexdigest() != want_sha or want_rows != len(rows):
            raise ValueError(
                f"{path} does not match its manifest {man} (SHA-256 or row count differ: "
                f"{len(rows)} rows, {want_rows} recorded): an incomplete or interrupted write, or an "
                "edit; rerun the figure to rewrite both (read_data(..., verify=False) reads it anyway)"
            )
    return FigureData(name, cols, rows, f.header["params"])


def read_manifest(out: str, name: str, *, verify: bool = True) -> dict:
    """The manifest of figure ``name`` in directory ``out`` (``FileNotFoundError`` if there is none).

    With ``verify`` (the default), every file it lists (CSV, PNG, PDF) must be there with the
    SHA-256 it records, else ``ValueError`` naming the file: the set is one run's, complete.
    """
    out = os.fspath(out)
    verify = _checks.boolean("verify", verify)
    man = _paths(out, name)["manifest"]
    with open(man, encoding="utf-8") as f:
        try:
            m = json.load(f)
        except ValueError as e:
            raise ValueError(f"{man}: not a readable manifest ({e})") from None
    if verify:
        try:
            files = [(e["name"], e["sha256"]) for e in m["files"].values()]
            if any(not isinstance(f, str) or f != os.path.basename(f) or f in ("", ".", "..")
                   for f, _ in files):
                raise TypeError
        except (KeyError, TypeError, AttributeError):
            raise ValueError(f"{man}: not a manifest written by aim_tutorial.reproduce") from None
        for fname, sha in files:
            path = os.path.join(out, fname)
            if not os.path.exists(path):
                raise ValueError(f"{path} is missing: the set of {man} is incomplete")
            if _sha256(path) != sha:
                raise ValueError(f"{path} does not match its manifest {man} (SHA-256 differs): an "
                                 "interrupted write or an edit; rerun the figure to rewrite the set")
    return m


def plot_figure(data: FigureData):
    """Draw ``data`` on a new :class:`matplotlib.figure.Figure` (no pyplot, any backend)."""
    from matplotlib.figure import Figure

    from .plotting import use_style

    use_style()
    wide = data.name == "softmax-se"
    fig = Figure(figsize=(9.0, 3.6) if wide else (6.0, 3.8), layout="constrained")
    FIGURES[data.name].plot(data, fig)
    return fig


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _write_set(data: FigureData, out: str, scale: str, seed: int, started: str) -> dict:
    """Write the CSV, PNG, PDF and manifest of one run: all under temporary names, then renamed."""
    import jax

    from . import __version__

    paths = _paths(out, data.name)
    with _Staging(out) as st:
        tmp = {k: st.new(paths[k]) for k in ("csv", "png", "pdf", "manifest")}  # renamed in this order
        _write_to(tmp["csv"], "w", lambda f: _write_csv(f, data, scale, seed))
        fig = plot_figure(data)
        _write_to(tmp["png"], "wb", lambda f: fig.savefig(f, format="png"))
        _write_to(tmp["pdf"], "wb", lambda f: fig.savefig(f, format="pdf"))
        dev = jax.devices()[0]
        manifest = {
            "manifest": "aim_tutorial reproduce",
            "manifest_version": 1,
            "figure": data.name,
            "scale": scale,
            "seed": seed,
            "aim_tutorial": __version__,
            "jax": jax.__version__,
            "device": f"{dev.platform} ({dev.device_kind})",
            "python": platform.python_version(),
            "command": _command(data.name, scale, seed),
            "started": started,
            "finished": _utc_now(),
            "files": {
                k: {"name": os.path.basename(paths[k]), "sha256": _sha256(tmp[k]),
                    "bytes": os.path.getsize(tmp[k])}
                for k in ("csv", "png", "pdf")
            },
        }
        manifest["files"]["csv"]["rows"] = int(len(data.rows))
        manifest["files"]["csv"]["columns"] = list(data.columns)
        _write_to(tmp["manifest"], "w", lambda f: f.write(json.dumps(manifest, indent=2) + "\n"))
        st.commit()
    return manifest


def reproduce(name: str, scale: str = "smoke", out: str = "reproduced", seed: int = 0,
              progress: bool = False, *, force: bool = False) -> ReproduceResult:
    """Compute figure ``name`` at ``scale`` and write ``out/name.{csv,png,pdf}`` and ``.manifest.json``.

    Every argument is checked, and ``out`` created and tried, before the computation starts.
    The four files are written under temporary names in ``out`` and renamed into place together,
    the manifest (figure, scale, seed, versions, command, start and end times, the SHA-256 of each
    file, the CSV's row count) last, once all are complete: an error or a Ctrl-C leaves the
    previous set as it was and no temporary file behind.

    Args:
        name: one of :func:`list_figures`.
        scale: ``"smoke"`` (seconds), ``"book"`` (the book's sizes) or ``"paper"`` (the paper's; a GPU).
        out: output directory (created if needed; not ``''``, not an existing file).
        seed: root of every random key, an integer in ``[0, 2**32 - 1]``.
        progress: show ``tqdm`` progress bars.
        force: replace the files of another run (another scale or seed) of this figure in ``out``;
            without it they raise :class:`ResultsExistError` (before computing). A rerun with the
            same scale and seed replaces its files without ``force``: it reproduces the same numbers.

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
    started = _utc_now()
    name = _checks.one_of("figure", name, tuple(FIGURES))
    scale = _checks.one_of("scale", scale, SCALES)
    seed = _check_seed(seed)
    force = _checks.boolean("force", force)
    out = _check_out(out)
    if os.path.isdir(out):
        _check_overwrite(out, name, scale, seed, force)
    created = _prepare_out(out)
    try:
        data = compute_figure(name, scale, seed, progress)
        _write_set(data, out, scale, seed, started)
    except BaseException:
        _remove_created(created)
        raise
    paths = _paths(out, data.name)
    return ReproduceResult(data, paths["csv"], paths["png"], paths["pdf"], time.perf_counter() - t0)


# --------------------------------------------------------------------------- command line


def _seed_arg(text: str) -> int:
    import argparse

    try:
        return _check_seed(int(text, 10))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32 - 1], got {text!r}") from None


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
        "(data, with parameters, seed, row count and versions in its header), DIR/FIGURE.png, DIR/FIGURE.pdf "
        "and DIR/FIGURE.manifest.json (scale, seed, command, times and the SHA-256 of each file). "
        "The files are renamed into place together once all are written: an interrupted run leaves "
        "the previous ones as they were.",
    )
    r.add_argument("figure", nargs="*", help="figure name(s), or 'all'; see --list")
    r.add_argument("--list", action="store_true", help="list the figures and exit")
    r.add_argument("--scale", default="smoke", help="smoke (seconds), book (minutes), paper (one GPU)")
    r.add_argument("--out", default="reproduced", help="output directory (default: ./reproduced)")
    r.add_argument("--seed", type=_seed_arg, default=0,
                   help="root of every random key, an integer in [0, 2**32 - 1] (default 0)")
    r.add_argument("--force", action="store_true",
                   help="replace another run's results (another scale or seed) in DIR; without it they are "
                   "kept and the command stops before computing (the same scale and seed are rewritten)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.add_argument("--no-compile-cache", action="store_true",
                   help="do not turn on JAX's persistent compilation cache (by default the compiled programs "
                   "are kept in JAX_COMPILATION_CACHE_DIR, else ~/.cache/aim_tutorial/jax, and a later run "
                   "reads them; a JAX_COMPILATION_CACHE_DIR in the environment still turns it on)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m aim_tutorial``; returns the exit status.

    Every argument is checked before anything is computed; a bad one exits with status 2 and a
    one-line message. An interrupted run (Ctrl-C) exits with status 130, a failed write with 1,
    leaving the previous files of the figure being written as they were.
    """
    p = _parser()
    a = p.parse_args(argv)
    if a.list:
        width = max(map(len, FIGURES))
        for f in FIGURES.values():
            print(f"{f.name:<{width}}  {f.summary}  [{f.source}]")
        return 0
    if not a.figure:
        p.error("reproduce: give a figure name (or 'all'), or --list")
    names = list(FIGURES) if a.figure == ["all"] else list(dict.fromkeys(a.figure))
    try:
        _checks.one_of("scale", a.scale, SCALES)
        for name in names:
            _checks.one_of("figure", name, tuple(FIGURES))
        out = _check_out(a.out)
        if os.path.isdir(out):
            for name in names:
                _check_overwrite(out, name, a.scale, a.seed, a.force)
        created = _prepare_out(out)
    except (ValueError, ResultsExistError) as e:
        p.error(str(e))
    done, name = [], names[0]
    try:
        import jax

        if not a.no_compile_cache:
            print(f"compilation cache: {compilation_cache()}", flush=True)
        print(f"devices: {jax.devices()}", flush=True)
        for name in names:
            res = reproduce(name, a.scale, out, a.seed, progress=not a.no_progress, force=a.force)
            done.append(name)
            print(f"{name}: {len(res.data.rows)} rows in {res.seconds:.1f} s -> {res.csv}, {res.png}, "
                  f"{res.pdf}", flush=True)
    except HeldInterrupt:  # Ctrl-C during the renames: held until the set was complete
        done.append(name)
        print(f"\ninterrupted after {name} was written (written: {', '.join(done)})", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        _remove_created(created if not done else [])
        print(f"\ninterrupted during {name}: its previous files in {out} are as they were"
              + (f" (written: {', '.join(done)})" if done else ""), file=sys.stderr)
        return 130
    except OSError as e:
        _remove_created(created if not done else [])
        print(f"error: {e}; the previous files of {name} are untouched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
