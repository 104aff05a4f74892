"""The students of gradient descent, shared by :mod:`aim_tutorial.gd` and ``aim_tutorial.deep.gd``.

A private module: its names have no leading underscore because both modules import them (no module
imports another module's ``_private`` names), and they are not part of the public API (neither
module's ``__all__`` lists them). It holds what a one-layer and a deep student have in common:

- the checks of their arguments: tokens and labels (:func:`tokens_and_labels`), weights
  (:func:`weights`), arrays and scalars that may be traced (:func:`array`, :func:`scalar`);
- a student's attention indices and matrix without validation (:func:`unchecked_indices`,
  :func:`unchecked_matrix`), traced inside training;
- the training driver (:func:`train_students`): the students stacked on a leading axis, trained
  together in jitted chunks (:func:`scan_students`, :func:`run_chunk`), and each one's report,
  including whether it diverged (:func:`divergence`, with the bounds :data:`LOSS_FACTOR` and
  :data:`NORM_FACTOR`, and the codes of :class:`GDStatus`).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _checks
from ._checks import traced
from ._status import Coded
from .config import algorithm_dtype, algorithm_products, spread_devices

__all__ = ["GDStatus", "LOSS_FACTOR", "NORM_FACTOR", "array", "divergence", "largest_divisor_at_most", "make_optimizer",
           "run_chunk", "scalar", "scan_students", "tokens_and_labels", "train_students", "unchecked_indices",
           "unchecked_matrix", "weights"]


# --------------------------------------------------------------------------- validation

LOSS_FACTOR = 1e3  # a loss above this many times its reference has diverged
NORM_FACTOR = 1e2  # ||S_k||_F^2 / d above this many times the problem's scale has diverged


def array(name, value, ndim=None, *, min_ndim=None):
    """A real array, possibly traced (rank and kind always, finiteness when concrete), as an array."""
    _checks.real_array(name, value, ndim=ndim, min_ndim=min_ndim)
    return value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)


def scalar(name, value, check):
    """``check(name, value)`` unless ``value`` is traced (then only: a real scalar)."""
    if traced(value):
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got a traced array of shape {value.shape}")
        return value
    check(name, value)
    return value  # unchanged: the computation sees what it saw before the check


def tokens_and_labels(X, y, d=None):
    """``X`` ``(n, T, d)`` and ``y`` ``(n, T, T)``, ``n, T, d >= 1``, consistent (and with ``d``)."""
    if np.ndim(X) != 3:
        raise ValueError(f"X must have shape (n, T, d), got shape {np.shape(X)}")
    n, T, dX = np.shape(X)
    if n < 1:
        raise ValueError(f"X must hold at least one sample (n >= 1), got shape {np.shape(X)}: no data to train on")
    if T < 1 or dX < 1:
        raise ValueError(f"X must have shape (n, T, d) with T, d >= 1, got shape {np.shape(X)}")
    if d is not None and dX != d:
        raise ValueError(f"X must have shape (n, T, d) with d = {d} (the rows of W), got shape {np.shape(X)}")
    if y is not None and np.shape(y) != (n, T, T):
        raise ValueError(f"y must have shape (n, T, T) = {(n, T, T)} (as X), got shape {np.shape(y)}")
    X = array("X", X, 3)
    if y is not None:
        y = array("y", y, 3)
    return X, y


def weights(W, name="W", min_ndim=None):
    """Weights ``(d, r')`` (or ``(..., d, r')`` with ``min_ndim``), ``d, r' >= 1``."""
    if np.ndim(W) != 2 and min_ndim is None or np.ndim(W) < (min_ndim or 2):
        raise ValueError(f"{name} must have shape {'(..., d, r)' if min_ndim else '(d, r)'}, got shape {np.shape(W)}")
    if min(np.shape(W)) < 1:
        raise ValueError(f"{name} must have shape (d, r) with d, r >= 1, got shape {np.shape(W)}")
    return array(name, W, None if min_ndim else 2, min_ndim=min_ndim)


class GDStatus(Coded):
    """How a student of gradient descent ended: the code of each student's ``status``.

    Every student runs all its steps; the code says whether it ended well (``COMPLETED``) or
    which divergence rule its record meets, checked in this order (the first that applies):
    a non-finite loss, non-finite weights at the end, a loss above ``LOSS_FACTOR`` times its
    reference, a matrix ``||S_k||_F^2 / d`` above ``NORM_FACTOR`` times the problem's scale.
    The status strings of :class:`aim_tutorial.gd.GDResult` add the step and the values.

    Example:
        >>> from aim_tutorial.gd import GDStatus
        >>> GDStatus.LOSS.diverged, int(GDStatus.COMPLETED), GDStatus.COMPLETED.message
        (True, 0, 'completed: every step was run, the loss and the weights finite and within their bounds')
    """

    COMPLETED = 0, "completed: every step was run, the loss and the weights finite and within their bounds"
    NONFINITE_LOSS = 1, "non-finite: the loss became NaN or infinite"
    NONFINITE_WEIGHTS = 2, "non-finite: the weights are not finite at the end"
    LOSS = 3, "diverged: the loss passed LOSS_FACTOR times its reference max(initial loss, ||y||_F^2/d)"
    NORM = 4, "diverged: ||S_k||_F^2/d (of some layer) passed NORM_FACTOR times the scale of the problem"

    @property
    def diverged(self) -> bool:
        """The student diverged (every code but ``COMPLETED``)."""
        return self is not GDStatus.COMPLETED


def divergence(loss, final_loss, norms, scales, loss_ref, steps, layered=False):
    """Per student: ``(diverged (K,) bool, status tuple of K str, codes tuple of K GDStatus)``.

    ``loss`` ``(K, steps)`` before each step, ``final_loss`` ``(K,)``, ``norms`` ``(K, L)``
    ``||S_{k,l}||_F^2 / d``, ``scales`` ``(L,)``, ``loss_ref`` ``(K,)``.
    """
    loss, final_loss = np.asarray(loss), np.asarray(final_loss)
    norms, scales, loss_ref = np.asarray(norms), np.asarray(scales), np.asarray(loss_ref)
    K = loss.shape[0]
    status, codes = [], []
    for k in range(K):
        curve = np.append(loss[k], final_loss[k])  # entry s: the loss after s steps
        bad = ~np.isfinite(curve)
        over = np.isfinite(curve) & (curve > LOSS_FACTOR * loss_ref[k])
        big = norms[k] > NORM_FACTOR * scales
        what = "||S_{k,l}||_F^2/d" if layered else "||S_k||_F^2/d"
        if bad.any():
            s = int(np.argmax(bad))
            code, msg = GDStatus.NONFINITE_LOSS, f"non-finite: the loss is {curve[s]} after {s} steps"
        elif not np.all(np.isfinite(norms[k])):
            code, msg = GDStatus.NONFINITE_WEIGHTS, "non-finite: the weights are not finite at the end"
        elif over.any():
            s = int(np.argmax(over))
            code = GDStatus.LOSS
            msg = (f"diverged: the loss is {curve[s]:.3g} after {s} steps, more than {LOSS_FACTOR:g} times its "
                   f"reference {loss_ref[k]:.3g} = max(initial loss, ||y||_F^2/d) (lower lr)")
        elif big.any():
            l = int(np.argmax(big))
            layer = f" of layer {l + 1}" if layered else ""
            code = GDStatus.NORM
            msg = (f"diverged: {what}{layer} = {norms[k, l]:.3g} at the end, more than {NORM_FACTOR:g} times "
                   f"the scale {scales[l]:.3g} of the problem (lower lr)")
        else:
            code, msg = GDStatus.COMPLETED, f"completed {steps} steps"
        status.append(msg)
        codes.append(code)
    diverged = np.array([c.diverged for c in codes], dtype=bool)
    return diverged, tuple(status), tuple(codes)


# --------------------------------------------------------------------------- model pieces


def unchecked_indices(W, X):
    """:func:`aim_tutorial.gd.student_indices` without validation (traced inside training)."""
    d, r = W.shape
    T = X.shape[-2]
    norm = d * jnp.sqrt(r)
    P = X @ W  # (n, T, r)
    # the T^2 products of each sample's rows, pair by pair: XLA on a CPU ran the einsum
    # "nar,nbr->nab" as n tiny matrix products one at a time
    h = jnp.stack([jnp.stack([jnp.sum(P[..., a, :] * P[..., b, :], axis=-1) for b in range(T)], axis=-1)
                   for a in range(T)], axis=-2) / norm
    return h - (jnp.sum(W * W) / norm) * jnp.eye(T, dtype=h.dtype)


def unchecked_matrix(W):
    """:func:`aim_tutorial.gd.student_matrix` without validation (weights that training made non-finite are reported)."""
    d, r = W.shape[-2], W.shape[-1]
    return W @ jnp.swapaxes(W, -1, -2) / jnp.sqrt(r * d)


# --------------------------------------------------------------------------- training


def make_optimizer(optimizer, lr):
    if optimizer == "adam":
        return optax.adam(lr)
    return optax.sgd(lr)


def scan_students(carry, student_loss, opt, errors, *, n_records, record_every):
    """Train stacked students together: ``n_records`` blocks of ``record_every`` optimiser steps.

    The loop of :func:`train_students`, the driver of :func:`aim_tutorial.gd.train_gd` and
    :func:`aim_tutorial.deep.train_deep_gd` (call it inside a jitted function; ``n_records`` and
    ``record_every`` are static integers ``>= 1``). ``carry = (Ws, opt_state)`` holds the
    students' weights stacked on a leading axis of size ``K`` (any pytree) and
    the vmapped optimiser state; ``student_loss(W)`` is one student's loss;
    the gradient of the summed loss is the per-student gradient, and
    ``opt.update`` is vmapped so that each student has its own Adam moments.
    ``errors(Ws)`` returns ``(per-student errors, error of the average)`` and
    is recorded after every block.

    Returns:
        ``(carry, losses (K, n_records * record_every), errors (n_records, ...),
        errors of the average (n_records, ...))``.
    """

    n_records = _checks.integer_at_least("n_records", n_records, 1)
    record_every = _checks.integer_at_least("record_every", record_every, 1)

    def total(Ws):
        losses = jax.vmap(student_loss)(Ws)
        return jnp.sum(losses), losses

    def step(c, _):
        Ws, state = c
        (_, losses), g = jax.value_and_grad(total, has_aux=True)(Ws)
        upd, state = jax.vmap(opt.update)(g, state, Ws)
        return (optax.apply_updates(Ws, upd), state), losses

    def block(c, _):
        c, losses = jax.lax.scan(step, c, None, length=record_every)
        err, err_mean = errors(c[0])
        return c, (losses, err, err_mean)

    carry, (losses, err, err_mean) = jax.lax.scan(block, carry, None, length=n_records)
    # losses: (n_records, record_every, K) -> (K, n_records * record_every)
    return carry, losses.reshape(-1, losses.shape[-1]).T, err, err_mean


@partial(jax.jit, static_argnames=("student_loss", "errors", "optimizer", "n_records", "record_every"))
@algorithm_products
def run_chunk(carry, X, y, params, S_true, lr, *, student_loss, errors, optimizer, n_records, record_every):
    """``n_records * record_every`` steps; the new carry, the losses and the errors recorded (records last)."""

    def record(Ws):
        return ((), ()) if errors is None else errors(Ws, S_true)

    carry, losses, err, err_mean = scan_students(
        carry, lambda W: student_loss(W, X, y, *params), make_optimizer(optimizer, lr), record,
        n_records=n_records, record_every=record_every)
    if errors is None:
        return carry, losses, None, None
    return carry, losses, jnp.moveaxis(err, 0, -1), jnp.moveaxis(err_mean, 0, -1)


def largest_divisor_at_most(m, cap):
    cap = max(1, min(m, cap))
    for k in range(cap, 0, -1):
        if m % k == 0:
            return k
    return 1


def train_students(W0, student_loss, X, y, params, *, rhos, steps, lr, optimizer="adam", errors=None, S_true=None,
                    record_every=None, records=100, chunks=1, progress=False, desc="students",
                    dtype=None, devices=None) -> dict:
    """The training driver of :func:`aim_tutorial.gd.train_gd` and :func:`aim_tutorial.deep.train_deep_gd`.

    Trains the ``K`` students stacked in ``W0`` together (:func:`scan_students`, jitted, in
    ``chunks`` calls of equal size), then reports each: losses, errors, its matrices, and whether
    it diverged (:func:`divergence`). The callers validate the arguments.

    Args:
        W0: the initial weights on a leading axis of size ``K``: one array ``(K, d, r')`` (a
            one-layer student) or a tuple of ``L`` layers ``(K, d, r_l)``.
        student_loss: ``student_loss(W, X, y, *params)``, one student's loss. A static argument of the jitted
            chunk, so hashable by value (a module-level function, ``aim_tutorial.gd._ChannelLoss``): a new
            closure at every call would compile again.
        X, y: tokens ``(n, T, d)`` and labels ``(n, T, T)``.
        params: the loss's real scalars (traced: one compilation for all their values).
        rhos: the teacher's width ratios, one a layer: the scale of the divergence test.
        steps, lr, optimizer: validated; ``optimizer`` one of :data:`aim_tutorial.gd.OPTIMIZERS`.
        errors: ``errors(Ws, S_true) -> (per-student errors, errors of the average)``, recorded at
            step 0 and every ``record_every`` steps (records on the last axis), or ``None``.
        S_true: the teacher as ``errors`` takes it (``(d, d)``, or ``(L, d, d)`` with layers).
        record_every: must divide ``steps``; ``None``: about ``records`` records.
        chunks: about this many jitted calls, the updates of the ``tqdm`` bar (``progress``, ``desc``).
        dtype: the dtype of the training, resolved by :func:`aim_tutorial.config.algorithm_dtype`:
            ``X``, ``y``, ``W0``, ``S_true``, ``params`` and ``lr`` are cast to it, the loop runs in
            it and the returned arrays are in it.
        devices: the devices the students are spread over (:func:`aim_tutorial.config.spread_devices`:
            default every visible device, as many as divide ``K``): the student axis of the
            weights and of the optimiser's state is sharded over a one-axis mesh, the data are
            replicated, and the jitted chunks run on all of them at once (one device: as before).

    Returns:
        a dict of the fields :class:`aim_tutorial.gd.GDResult` and ``DeepGDResult`` share (``S_hat`` ... ``status``).
    """
    dtype = algorithm_dtype(dtype)
    if record_every is None:
        record_every = largest_divisor_at_most(steps, max(1, steps // records))
    record_every = _checks.integer_at_least("record_every", record_every, 1)
    if steps % record_every:
        raise ValueError(f"record_every must divide steps={steps}, got {record_every}")
    n_rec = steps // record_every
    per_chunk = largest_divisor_at_most(n_rec, max(1, -(-n_rec // chunks)))  # chunks of equal size: one compile
    X = jnp.asarray(X, dtype=dtype)
    y = jnp.asarray(y, dtype=dtype)
    layered = not hasattr(W0, "shape")
    W0 = tuple(jnp.asarray(w, dtype=dtype) for w in W0) if layered else jnp.asarray(W0, dtype=dtype)
    if S_true is not None:
        S_true = jnp.asarray(S_true, dtype=dtype)
    d = X.shape[-1]
    K = (W0[0] if layered else W0).shape[0]
    spread = spread_devices(K, devices)
    if len(spread) > 1:               # students over the devices, the data on each of them
        mesh = Mesh(np.asarray(spread), ("students",))
        W0 = jax.device_put(W0, NamedSharding(mesh, PartitionSpec("students")))
        X, y = jax.device_put((X, y), NamedSharding(mesh, PartitionSpec()))
        if S_true is not None:
            S_true = jax.device_put(S_true, NamedSharding(mesh, PartitionSpec()))

    carry = (W0, jax.vmap(make_optimizer(optimizer, lr).init)(W0))
    args = (X, y, tuple(jnp.asarray(p, dtype=dtype) for p in params), S_true, jnp.asarray(lr, dtype=dtype))
    kw = {"student_loss": student_loss, "errors": errors, "optimizer": optimizer, "n_records": per_chunk,
          "record_every": record_every}
    losses, errs, errs_mean = [], [], []
    if errors is not None:
        e0, em0 = errors(W0, S_true)
        errs.append(e0[..., None])
        errs_mean.append(em0[..., None])
    blocks = range(n_rec // per_chunk)
    if progress:
        import warnings

        with warnings.catch_warnings():  # without ipywidgets tqdm.auto warns, then draws a text bar
            warnings.simplefilter("ignore")
            from tqdm.auto import tqdm

        blocks = tqdm(blocks, desc=desc, unit="chunk")
    for _ in blocks:
        carry, l, e, em = run_chunk(carry, *args, **kw)
        losses.append(l)
        if errors is not None:
            errs.append(e)
            errs_mean.append(em)
    W = carry[0]
    final_loss = jax.vmap(student_loss, in_axes=(0, None, None) + (None,) * len(params))(W, X, y, *params)
    loss = jnp.concatenate(losses, axis=1)
    finite = jnp.all(jnp.isfinite(loss), axis=1) & jnp.isfinite(final_loss)
    S_students = jnp.stack([unchecked_matrix(w) for w in W], axis=1) if layered else unchecked_matrix(W)

    # divergence: per layer the scale max(teacher's Tr(S^2)/d, a random student's, the given teacher's)
    widths = [w.shape[-1] for w in (W if layered else [W])]
    scales = [max(1.0 + rho, (d + r + 1) / d) for rho, r in zip(rhos, widths)]
    if S_true is not None:
        scales = [max(sc, float(jnp.sum(S * S)) / d) for sc, S in zip(scales, S_true if layered else [S_true])]
    norms = jnp.sum(S_students * S_students, axis=(-1, -2)).reshape(len(loss), -1) / d  # (K, L)
    loss_ref = np.maximum(np.asarray(loss[:, 0]), float(jnp.sum(y * y)) / d)
    diverged, status, codes = divergence(loss, final_loss, norms, scales, loss_ref, steps, layered=layered)
    # the fields GDResult and DeepGDResult share (each adds its widths)
    return dict(
        S_hat=jnp.mean(S_students, axis=0),
        S_students=S_students,
        W=W,
        loss=loss,
        final_loss=final_loss,
        record_steps=np.arange(0, steps + 1, record_every),
        error_students=None if errors is None else jnp.concatenate(errs, axis=-1),
        error_mean=None if errors is None else jnp.concatenate(errs_mean, axis=-1),
        finite=finite,
        diverged=diverged,
        status=status,
        codes=codes,
    )
