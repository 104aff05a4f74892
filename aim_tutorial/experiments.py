"""One instance of each experiment: the runners that the figures, the scripts and the chapters share.

Each runner draws its instance with :func:`aim_tutorial.make_instance` (so that an instance is named by
its key), runs one algorithm on it (or two: :func:`gd_amp_data_set`) and returns a dict of plain
numbers, the fields of one row of a data file:

- :func:`amp_run`, :func:`amp_runs`: GAMP-RIE on one instance, or on several (one program on an
  accelerator, :func:`aim_tutorial.amp_device.gamp_rie_batch`);
- :func:`gd_data_set`: ``n_init`` gradient-descent students and their averages (chapter 6);
- :func:`gd_amp_data_set`, with the keys of :func:`same_instance_key`: GAMP-RIE and the students on
  the same instance (chapter 6's comparison);
- :func:`deep_data_set`: two-layer students on one deep-attention instance (chapter 7).

``python -m aim_tutorial reproduce`` (:mod:`aim_tutorial.reproduce`) computes its figures with them,
and ``scripts/amp_experiments.py``, ``gd_paper_data.py``, ``gd_vs_amp.py`` and ``deep_gd_data.py``
write the book's data files with them, with the same key schemes, so that the two agree when the
sizes agree. :mod:`aim_tutorial.reproduce` re-exports them (``from aim_tutorial.reproduce import
amp_run`` works as before).

Example:
    >>> from aim_tutorial import experiments
    >>> int(experiments.SAME_INSTANCE_SEED)
    45
"""

from __future__ import annotations

import math
import time

import numpy as np

from . import _checks

__all__ = [
    "SAME_INSTANCE_SEED",
    "amp_run",
    "amp_runs",
    "deep_data_set",
    "gd_amp_data_set",
    "gd_data_set",
    "same_instance_key",
]


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
