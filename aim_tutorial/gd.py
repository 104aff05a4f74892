"""Gradient descent on the attention-indexed model: single students and their average.

Chapter 6 (``book/06_gradient_descent.md``) teaches this module; the equation
labels below refer to it. A **student** has the teacher's architecture,

    S_hat = W W^T / sqrt(r' d),    W in R^{d x r'},
    h_hat_ab = x_a^T S_hat x_b / sqrt(d) - delta_ab Tr(S_hat) / sqrt(d),
    y_hat = g(h_hat)  (same channel as the teacher),                     eq. (eq-gd-student)

and is trained by full-batch Adam (or plain gradient descent) on the square loss

    L(W) = (1/d) sum_mu sum_ab (y_hat_ab(X_mu) - y_ab^mu)^2
           + weight_decay * Tr(S_hat),                                    eq. (eq-gd-loss)

Since ``S_hat`` is positive semi-definite, ``Tr(S_hat) = ||W||_F^2 / sqrt(r' d)``
is both the nuclear norm of ``S_hat`` and an L2 penalty on ``W`` ("weight
decay"), normalised so that ``weight_decay`` is of order one.

``n_init`` students start from independent ``W ~ N(0, 1)`` and are trained
together in one jitted program (``vmap`` over students, ``lax.scan`` over
steps). The cost of a step is ``O(n T d r')`` per student: the tokens are
projected first, ``P = X W`` of shape ``(n, T, r')``, and
``h_hat = P P^T / (d sqrt(r')) - ||W||_F^2 / (d sqrt(r')) I``, eq. (eq-gd-fast); no ``(n, d, d)``
tensor is ever formed.

Reference: Boncoraglio, Troiani, Erba, Zdeborova, *Bayes optimal learning of
attention-indexed models*, NeurIPS 2025 (arXiv 2506.01582), the gradient-descent
experiments (Adam, lr 0.1, 1000 steps, d = 200, 32 initialisations).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import _checks
from .config import algorithm_dtype, algorithm_products, spread_devices

__all__ = ["GDResult", "train_gd", "student_indices", "student_matrix", "gd_loss", "averaged_errors",
           "extrapolated_error", "load_gd_data"]

OPTIMIZERS = ("adam", "gd")


class GDResult(NamedTuple):
    """Result of :func:`train_gd`.

    The arrays are in the dtype the students were trained in (``train_gd(..., dtype=)``, see
    :func:`aim_tutorial.config.algorithm_dtype`): float64 by default on a CPU.

    Attributes:
        S_hat: ``(d, d)``, the average of the students' ``S`` (the estimator of
            the posterior mean).
        S_students: ``(n_init, d, d)``, each student's ``S = W W^T / sqrt(r' d)``.
        W: ``(n_init, d, r')``, the students' final weights.
        loss: ``(n_init, steps)``, each student's loss, eq. (eq-gd-loss), before each step.
        final_loss: ``(n_init,)``, each student's loss after the last step.
        record_steps: ``(R + 1,)``, the steps at which errors were recorded
            (``0`` is the initialisation).
        error_students: ``(n_init, R + 1)``, ``||S_k - S_true||_F^2 / d`` along
            training, or ``None`` without ``S_true``.
        error_mean: ``(R + 1,)``, ``||mean_k S_k - S_true||_F^2 / d`` along
            training, or ``None`` without ``S_true``.
        finite: ``(n_init,)`` bool, whether each student's loss stayed finite
            (a student that diverged is reported here, never dropped silently).
        width: the student width ``r'``.
        diverged: ``(n_init,)`` NumPy bool, whether each student diverged: a non-finite
            loss or weights, a loss above ``LOSS_FACTOR`` times its reference
            ``max(initial loss, ||y||_F^2 / d)``, or ``||S_k||_F^2 / d`` above ``NORM_FACTOR``
            times the scale ``max(1 + rho, (d + r' + 1)/d, ||S_true||_F^2/d)`` (the teacher's
            ``Tr(S^2)/d``, a random student's, the given teacher's). Every student runs
            all ``steps``; a diverged one is reported, never dropped.
        status: tuple of ``n_init`` strings, why each student stopped: ``"completed N
            steps"``, or ``"non-finite: ..."`` / ``"diverged: ..."`` with the step, the
            value and the bound it passed.
    """

    S_hat: jax.Array
    S_students: jax.Array
    W: jax.Array
    loss: jax.Array
    final_loss: jax.Array
    record_steps: np.ndarray
    error_students: Optional[jax.Array]
    error_mean: Optional[jax.Array]
    finite: jax.Array
    width: int
    diverged: Optional[np.ndarray] = None
    status: tuple = ()


# --------------------------------------------------------------------------- validation

LOSS_FACTOR = 1e3  # a loss above this many times its reference has diverged
NORM_FACTOR = 1e2  # ||S_k||_F^2 / d above this many times the problem's scale has diverged


_traced = _checks._traced  # a JAX tracer (inside jit, grad, vmap): its shape can be checked, not its values


def _array(name, value, ndim=None, *, min_ndim=None):
    """A real array, possibly traced (rank and kind always, finiteness when concrete), as an array."""
    _checks.real_array(name, value, ndim=ndim, min_ndim=min_ndim)
    return value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)


def _scalar(name, value, check):
    """``check(name, value)`` unless ``value`` is traced (then only: a real scalar)."""
    if _traced(value):
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got a traced array of shape {value.shape}")
        return value
    check(name, value)
    return value  # unchanged: the computation sees what it saw before the check


def _finite_result(what, out, *inputs):
    """``out``, or a ``ValueError`` when it is not finite although every input is concrete and finite."""
    if any(_traced(v) for v in inputs) or _traced(out) or bool(jnp.all(jnp.isfinite(out))):
        return out
    raise ValueError(f"{what}: the result is not finite although the inputs are: they are too large for "
                     "float64 (it overflowed); rescale them")


def _tokens_and_labels(X, y, d=None):
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
    X = _array("X", X, 3)
    if y is not None:
        y = _array("y", y, 3)
    return X, y


def _beta_check(ch):
    """``beta > 0`` for a channel it enters (softmax, sigmoid: at 0 the output ignores ``h``), else ``>= 0``."""
    return _checks.positive if ch.uses_beta else _checks.nonnegative


def _labels_match(y, ch):
    """Labels the channel can produce, where that is checkable: softmax outputs are row-stochastic."""
    if ch.name == "softmax" and ch.label_noise == 0 and not _traced(y):
        _checks.row_stochastic("y", y)


def _divergence(loss, final_loss, norms, scales, loss_ref, steps, layered=False):
    """Per student: ``(diverged (K,) bool, status tuple of K str)`` from the training record.

    ``loss`` ``(K, steps)`` before each step, ``final_loss`` ``(K,)``, ``norms`` ``(K, L)``
    ``||S_{k,l}||_F^2 / d``, ``scales`` ``(L,)``, ``loss_ref`` ``(K,)``.
    """
    loss, final_loss = np.asarray(loss), np.asarray(final_loss)
    norms, scales, loss_ref = np.asarray(norms), np.asarray(scales), np.asarray(loss_ref)
    K = loss.shape[0]
    diverged = np.zeros(K, dtype=bool)
    status = []
    for k in range(K):
        curve = np.append(loss[k], final_loss[k])  # entry s: the loss after s steps
        bad = ~np.isfinite(curve)
        over = np.isfinite(curve) & (curve > LOSS_FACTOR * loss_ref[k])
        big = norms[k] > NORM_FACTOR * scales
        what = "||S_{k,l}||_F^2/d" if layered else "||S_k||_F^2/d"
        if bad.any():
            s = int(np.argmax(bad))
            msg = f"non-finite: the loss is {curve[s]} after {s} steps"
        elif not np.all(np.isfinite(norms[k])):
            msg = "non-finite: the weights are not finite at the end"
        elif over.any():
            s = int(np.argmax(over))
            msg = (f"diverged: the loss is {curve[s]:.3g} after {s} steps, more than {LOSS_FACTOR:g} times its "
                   f"reference {loss_ref[k]:.3g} = max(initial loss, ||y||_F^2/d) (lower lr)")
        elif big.any():
            l = int(np.argmax(big))
            layer = f" of layer {l + 1}" if layered else ""
            msg = (f"diverged: {what}{layer} = {norms[k, l]:.3g} at the end, more than {NORM_FACTOR:g} times "
                   f"the scale {scales[l]:.3g} of the problem (lower lr)")
        else:
            msg = f"completed {steps} steps"
        diverged[k] = not msg.startswith("completed")
        status.append(msg)
    return diverged, tuple(status)


# --------------------------------------------------------------------------- model pieces


def student_indices(W: jax.Array, X: jax.Array) -> jax.Array:
    """The student's attention indices from its weights, eq. (eq-gd-student), in ``O(n T d r')``.

    ``h_hat = P P^T / (d sqrt(r')) - (||W||_F^2 / (d sqrt(r'))) I`` with ``P = X W``,
    which equals ``x_a^T S_hat x_b / sqrt(d) - delta_ab Tr(S_hat)/sqrt(d)`` for
    ``S_hat = W W^T / sqrt(r' d)``.

    Args:
        W: weights, shape ``(d, r')``.
        X: tokens, shape ``(n, T, d)``.

    Returns:
        ``h_hat``, shape ``(n, T, T)``.

    Raises:
        ValueError: ``W`` not ``(d, r')`` or ``X`` not ``(n, T, d)`` with the same ``d``, ``n, T, d,
            r' >= 1``, or (outside ``jit``) entries that are not finite.
    """
    W = _weights(W)
    X, _ = _tokens_and_labels(X, None, W.shape[0])
    return _finite_result("student_indices", _student_indices(W, X), W, X)


def _student_indices(W, X):
    """:func:`student_indices` without validation (traced inside training)."""
    d, r = W.shape
    T = X.shape[-2]
    norm = d * jnp.sqrt(r)
    P = X @ W  # (n, T, r)
    # the T^2 products of each sample's rows, pair by pair: XLA on a CPU ran the einsum
    # "nar,nbr->nab" as n tiny matrix products one at a time
    h = jnp.stack([jnp.stack([jnp.sum(P[..., a, :] * P[..., b, :], axis=-1) for b in range(T)], axis=-1)
                   for a in range(T)], axis=-2) / norm
    return h - (jnp.sum(W * W) / norm) * jnp.eye(T, dtype=h.dtype)


def _weights(W, name="W", min_ndim=None):
    """Weights ``(d, r')`` (or ``(..., d, r')`` with ``min_ndim``), ``d, r' >= 1``."""
    if np.ndim(W) != 2 and min_ndim is None or np.ndim(W) < (min_ndim or 2):
        raise ValueError(f"{name} must have shape {'(..., d, r)' if min_ndim else '(d, r)'}, got shape {np.shape(W)}")
    if min(np.shape(W)) < 1:
        raise ValueError(f"{name} must have shape (d, r) with d, r >= 1, got shape {np.shape(W)}")
    return _array(name, W, None if min_ndim else 2, min_ndim=min_ndim)


def student_matrix(W: jax.Array) -> jax.Array:
    """``S_hat = W W^T / sqrt(r' d)`` for weights ``W`` of shape ``(..., d, r')``, ``d, r' >= 1``.

    Example:
        >>> import jax.numpy as jnp
        >>> from aim_tutorial.gd import student_matrix
        >>> student_matrix(jnp.ones((2, 2))).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    W = _weights(W, min_ndim=2)
    return _finite_result("student_matrix", _student_matrix(W), W)


def _student_matrix(W):
    """:func:`student_matrix` without validation (weights that training made non-finite are reported)."""
    d, r = W.shape[-2], W.shape[-1]
    return W @ jnp.swapaxes(W, -1, -2) / jnp.sqrt(r * d)


def _channel_out(h, channel, beta):
    return channel.output(h, beta)


def _differentiable(ch) -> bool:
    return ch.differentiable


def _channel(channel):
    from . import channels

    ch = channels.get(channel)  # an unknown name: a ValueError listing the registered ones
    if not _differentiable(ch):
        names = tuple(n for n in channels.registered() if _differentiable(channels.get(n)))
        raise ValueError(f"channel {ch.name!r} is not differentiable (its output is piecewise constant in h, "
                         f"so the loss has zero gradient almost everywhere): gradient descent needs a "
                         f"differentiable channel, one of {names} or a differentiable Channel")
    return ch


def gd_loss(W: jax.Array, X: jax.Array, y: jax.Array, *, channel="softmax", beta: float = 1.0,
            weight_decay: float = 0.0) -> jax.Array:
    """The training loss of one student, eq. (eq-gd-loss).

    ``(1/d) sum_mu sum_ab (g(h_hat)_ab - y_ab)^2 + weight_decay * ||W||_F^2 / sqrt(r' d)``.

    Args:
        W: weights, shape ``(d, r')``.
        X: tokens, shape ``(n, T, d)``.
        y: labels, shape ``(n, T, T)``.
        channel: a channel with a differentiable output (``"softmax"``, ``"linear"``, ``"relu"``,
            ``"sigmoid"``, or a :class:`~aim_tutorial.channels.Channel`).
        beta: inverse temperature of the softmax and the sigmoid, ``> 0`` for them (``>= 0`` otherwise).
        weight_decay: strength of the penalty ``Tr(S_hat)``.

    Returns:
        a scalar.

    Raises:
        ValueError: shapes that do not match (``W`` ``(d, r')``, ``X`` ``(n, T, d)``, ``y``
            ``(n, T, T)``, ``n >= 1``), a channel that is unknown or not differentiable
            (``"hardmax"``), ``beta < 0``, ``weight_decay < 0``, entries that are not finite, or
            ``y`` that is not row-stochastic for ``"softmax"`` (values are checked outside ``jit``).
    """
    ch = _channel(channel)
    W = _weights(W)
    X, y = _tokens_and_labels(X, y, W.shape[0])
    _labels_match(y, ch)
    beta = _scalar("beta", beta, _beta_check(ch))
    weight_decay = _scalar("weight_decay", weight_decay, _checks.nonnegative)
    d, r = W.shape
    y_hat = _channel_out(_student_indices(W, X), ch, beta)
    data = jnp.sum((y_hat - y) ** 2) / d
    return _finite_result("gd_loss", data + weight_decay * jnp.sum(W * W) / jnp.sqrt(r * d), W, X, y, beta,
                          weight_decay)


def _errors(Ws, S_true):
    """Per-student errors and the error of the average, ``||.||_F^2 / d``."""
    d = S_true.shape[0]
    Ss = _student_matrix(Ws)
    err = jnp.sum((Ss - S_true) ** 2, axis=(1, 2)) / d
    err_mean = jnp.sum((jnp.mean(Ss, axis=0) - S_true) ** 2) / d
    return err, err_mean


def averaged_errors(S_students: jax.Array, S_true: jax.Array, *, Ks=None) -> np.ndarray:
    """Error of the average of the first ``K`` students, ``||mean_{k<K} S_k - S||_F^2 / d``.

    If the students were independent posterior samples this would be
    ``MMSE (1 + 1/K)`` on average, eq. (eq-gd-average).

    Args:
        S_students: ``(n_init, d, d)``.
        S_true: ``(d, d)``: an array, or nested lists (converted to an array: the same errors).
        Ks: the values of ``K`` (default ``1, 2, 4, ..., n_init``); each in ``[1, n_init]``.

    Returns:
        array of the errors, one per ``K``.

    Raises:
        ValueError: ``S_students`` not a stack ``(n_init, d, d)`` (a single ``(d, d)`` is refused),
            ``S_true`` not ``(d, d)`` symmetric with the students' ``d`` (no broadcasting),
            entries that are not finite, or a ``K`` that is not an integer in ``[1, n_init]``.
    """
    if np.ndim(S_students) != 3 or np.shape(S_students)[1] != np.shape(S_students)[2]:
        raise ValueError(f"S_students must be a stack of students' matrices, shape (n_init, d, d), got shape "
                         f"{np.shape(S_students)}")
    _checks.real_array("S_students", S_students, ndim=3)
    K_max, d = np.shape(S_students)[:2]
    if np.shape(S_true) != (d, d):
        raise ValueError(f"S_true must have shape (d, d) = {(d, d)}, the students' shape, got shape "
                         f"{np.shape(S_true)}")
    _checks.square_symmetric("S_true", S_true)
    if Ks is None:
        Ks = [2**j for j in range(int(math.log2(K_max)) + 1)]
    if np.ndim(Ks) != 1:
        raise ValueError(f"Ks must be a sequence of integers in [1, n_init={K_max}], got {Ks!r}")
    if not hasattr(S_students, "shape"):  # a list of matrices
        S_students = jnp.asarray(S_students)
    if not hasattr(S_true, "shape"):
        S_true = jnp.asarray(S_true)
    out = []
    for i, K in enumerate(Ks):
        K = _checks.integer_at_least(f"Ks[{i}]", K, 1)
        if K > K_max:
            raise ValueError(f"Ks[{i}] must be in [1, n_init={K_max}], got {K}")
        M = jnp.mean(S_students[:K], axis=0)
        out.append(float(jnp.sum((M - S_true) ** 2)) / S_true.shape[0])
    return np.asarray(out)


def extrapolated_error(S_students: jax.Array, S_true: jax.Array) -> tuple:
    """The error of the average of infinitely many students, estimated from ``K`` of them.

    If the students are independent draws around a mean ``m`` (the same teacher and data, independent
    initialisations), the average of ``K`` of them has expected error ``||m - S||_F^2 / d + v / K``,
    where ``v = E||S_k - m||_F^2 / d``. The unbiased estimate of the ``K -> infinity`` limit is the
    U-statistic over distinct pairs,

        ``e_inf = (1 / (K (K - 1))) sum_{k != l} <S_k - S, S_l - S>_F / d``,

    equal to ``||mean_k S_k - S||^2/d - (1/(K(K-1))) sum_k ||S_k - mean||^2/d``. Its standard error is
    the jackknife's (leave one student out). It measures what the students' average tends to, not the
    Bayes error: students that are not posterior samples tend to something else.

    Args:
        S_students: ``(K, d, d)``, ``K >= 3``.
        S_true: ``(d, d)``, symmetric.

    Returns:
        ``(e_inf, standard_error)``, two floats; ``e_inf`` may be slightly negative when the limit
        is 0 (it is unbiased, not clipped).

    Raises:
        ValueError: shapes as :func:`averaged_errors`, or fewer than 3 students.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> S = jnp.eye(4)
        >>> noise = jax.random.normal(jax.random.key(0), (64, 4, 4))
        >>> e, se = extrapolated_error(S + 0.1 + (noise + noise.transpose(0, 2, 1)) / 2, S)
        >>> abs(e - 0.04) < 3 * se + 1e-3
        True
    """
    averaged_errors(S_students, S_true, Ks=[1])  # the shape and value checks
    K, d = np.shape(S_students)[:2]
    if K < 3:
        raise ValueError(f"S_students must hold at least 3 students (the extrapolation and its error), "
                         f"got {K}")
    D = (jnp.asarray(S_students) - jnp.asarray(S_true)).reshape(K, -1)
    G = np.asarray(D @ D.T, dtype=np.float64) / d  # <S_k - S, S_l - S> / d
    total, diag, rows = G.sum(), np.trace(G), G.sum(axis=1)
    e_inf = (total - diag) / (K * (K - 1))
    loo = (total - 2 * rows + np.diag(G) - diag + np.diag(G)) / ((K - 1) * (K - 2))
    se = math.sqrt((K - 1) / K * float(np.sum((loo - loo.mean()) ** 2)))
    return float(e_inf), se


# --------------------------------------------------------------------------- training


def _make_optimizer(optimizer, lr):
    if optimizer == "adam":
        return optax.adam(lr)
    return optax.sgd(lr)


def scan_students(carry, student_loss, opt, errors, *, n_records, record_every):
    """Train stacked students together: ``n_records`` blocks of ``record_every`` optimiser steps.

    The loop of :func:`_train_students`, the driver of :func:`train_gd` and
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
def _run_chunk(carry, X, y, params, S_true, lr, *, student_loss, errors, optimizer, n_records, record_every):
    """``n_records * record_every`` steps; the new carry, the losses and the errors recorded (records last)."""

    def record(Ws):
        return ((), ()) if errors is None else errors(Ws, S_true)

    carry, losses, err, err_mean = scan_students(
        carry, lambda W: student_loss(W, X, y, *params), _make_optimizer(optimizer, lr), record,
        n_records=n_records, record_every=record_every)
    if errors is None:
        return carry, losses, None, None
    return carry, losses, jnp.moveaxis(err, 0, -1), jnp.moveaxis(err_mean, 0, -1)


def _largest_divisor_at_most(m, cap):
    cap = max(1, min(m, cap))
    for k in range(cap, 0, -1):
        if m % k == 0:
            return k
    return 1


class _ChannelLoss(NamedTuple):
    """One student's loss :func:`gd_loss` with its channel: hashable by value, a static argument of the jit."""

    channel: object

    def __call__(self, W, X, y, beta, weight_decay):
        return gd_loss(W, X, y, channel=self.channel, beta=beta, weight_decay=weight_decay)


def _train_students(W0, student_loss, X, y, params, *, rhos, steps, lr, optimizer="adam", errors=None, S_true=None,
                    record_every=None, records=100, chunks=1, progress=False, desc="students",
                    dtype=None, devices=None) -> dict:
    """The training driver of :func:`train_gd` and :func:`aim_tutorial.deep.train_deep_gd`.

    Trains the ``K`` students stacked in ``W0`` together (:func:`scan_students`, jitted, in
    ``chunks`` calls of equal size), then reports each: losses, errors, its matrices, and whether
    it diverged (:func:`_divergence`). The callers validate the arguments.

    Args:
        W0: the initial weights on a leading axis of size ``K``: one array ``(K, d, r')`` (a
            one-layer student) or a tuple of ``L`` layers ``(K, d, r_l)``.
        student_loss: ``student_loss(W, X, y, *params)``, one student's loss. A static argument of the jitted
            chunk, so hashable by value (a module-level function, :class:`_ChannelLoss`): a new
            closure at every call would compile again.
        X, y: tokens ``(n, T, d)`` and labels ``(n, T, T)``.
        params: the loss's real scalars (traced: one compilation for all their values).
        rhos: the teacher's width ratios, one a layer: the scale of the divergence test.
        steps, lr, optimizer: validated; ``optimizer`` one of :data:`OPTIMIZERS`.
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
        a dict of the fields :class:`GDResult` and ``DeepGDResult`` share (``S_hat`` ... ``status``).
    """
    dtype = algorithm_dtype(dtype)
    if record_every is None:
        record_every = _largest_divisor_at_most(steps, max(1, steps // records))
    record_every = _checks.integer_at_least("record_every", record_every, 1)
    if steps % record_every:
        raise ValueError(f"record_every must divide steps={steps}, got {record_every}")
    n_rec = steps // record_every
    per_chunk = _largest_divisor_at_most(n_rec, max(1, -(-n_rec // chunks)))  # chunks of equal size: one compile
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

    carry = (W0, jax.vmap(_make_optimizer(optimizer, lr).init)(W0))
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
        carry, l, e, em = _run_chunk(carry, *args, **kw)
        losses.append(l)
        if errors is not None:
            errs.append(e)
            errs_mean.append(em)
    W = carry[0]
    final_loss = jax.vmap(student_loss, in_axes=(0, None, None) + (None,) * len(params))(W, X, y, *params)
    loss = jnp.concatenate(losses, axis=1)
    finite = jnp.all(jnp.isfinite(loss), axis=1) & jnp.isfinite(final_loss)
    S_students = jnp.stack([_student_matrix(w) for w in W], axis=1) if layered else _student_matrix(W)

    # divergence: per layer the scale max(teacher's Tr(S^2)/d, a random student's, the given teacher's)
    widths = [w.shape[-1] for w in (W if layered else [W])]
    scales = [max(1.0 + rho, (d + r + 1) / d) for rho, r in zip(rhos, widths)]
    if S_true is not None:
        scales = [max(sc, float(jnp.sum(S * S)) / d) for sc, S in zip(scales, S_true if layered else [S_true])]
    norms = jnp.sum(S_students * S_students, axis=(-1, -2)).reshape(len(loss), -1) / d  # (K, L)
    loss_ref = np.maximum(np.asarray(loss[:, 0]), float(jnp.sum(y * y)) / d)
    diverged, status = _divergence(loss, final_loss, norms, scales, loss_ref, steps, layered=layered)
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
    )


def train_gd(
    key: jax.Array,
    X,
    y,
    rho: float,
    *,
    n_init: int = 1,
    steps: int = 1000,
    lr: float = 0.1,
    channel="softmax",
    beta: float = 1.0,
    optimizer: str = "adam",
    width: Optional[int] = None,
    weight_decay: float = 0.0,
    S_true=None,
    record_every: Optional[int] = None,
    progress: Optional[bool] = None,
    dtype=None,
    devices=None,
    init_scale: float = 1.0,
) -> GDResult:
    """Train ``n_init`` students by full-batch gradient descent and average them, eq. (eq-gd-loss).

    Each student ``S_k = W_k W_k^T / sqrt(r' d)`` starts from ``W_k ~ N(0, 1)``
    (independent keys) and minimises
    ``(1/d) sum_mu sum_ab (g(h_hat(X_mu))_ab - y_ab^mu)^2 + weight_decay Tr(S_k)``
    with Adam (``optimizer="adam"``) or plain gradient descent (``"gd"``) at
    learning rate ``lr``, full batch. All students run in one jitted program
    (``vmap`` over students, ``lax.scan`` over steps, a ``tqdm`` bar over
    chunks of the scan). The estimator is ``S_hat = mean_k S_k``
    (eq. (eq-gd-average)), which approaches the posterior mean when each student
    behaves like a posterior sample.

    Args:
        key: ``jax.random`` key for the initialisations.
        X: tokens, shape ``(n, T, d)``.
        y: labels, shape ``(n, T, T)``.
        rho: width ratio of the teacher, ``rho > 0``; the default student width
            is ``r = round(rho d)``.
        n_init: number of students (random initialisations), ``>= 1``.
        steps: optimisation steps, ``>= 1``.
        lr: learning rate, ``> 0``. Adam at ``lr = 0.1`` is the published
            setting; plain gradient descent needs a rate of order
            ``1 / (alpha d)`` (the loss is a sum over ``n = alpha d^2`` samples).
        channel: a channel with a differentiable output: ``"softmax"`` (inverse temperature
            ``beta``), ``"linear"``, ``"relu"``, ``"sigmoid"``, or a
            :class:`~aim_tutorial.channels.Channel` (its label noise, if any, is in ``y``).
        beta: inverse temperature, ``beta > 0`` for the channels it enters (softmax, sigmoid:
            at ``beta = 0`` their output ignores ``h`` and nothing can be learnt), else ``>= 0``.
        optimizer: ``"adam"`` or ``"gd"``.
        width: student width ``r' >= 1`` (default ``round(rho d)``); larger
            than the teacher's for an over-parametrised student.
        weight_decay: penalty ``weight_decay * Tr(S_hat)`` added to the loss, ``>= 0``.
        S_true: the teacher ``(d, d)``, optional; when given, errors are
            recorded along training.
        record_every: record errors every this many steps (default: about 100
            records); must divide ``steps``.
        progress: show a ``tqdm`` bar (default: only for runs expected to take
            more than a few seconds).
        dtype: the dtype of the training, ``"float32"`` or ``"float64"`` (or a NumPy/JAX dtype);
            ``None``: the environment variable ``AIM_DTYPE``, else float64 on a CPU and float32
            on a GPU/TPU (:func:`aim_tutorial.config.algorithm_dtype`). ``X``, ``y``, the initial
            weights (drawn in float64, then cast: both dtypes start from the same students) and
            ``S_true`` are cast to it, and every step runs in it.
        devices: the JAX devices the students are spread over (default: every visible
            device, as many of them as divide ``n_init``; :func:`aim_tutorial.config.spread_devices`).
            Each device trains its share of the students; the results are those of one device.
        init_scale: the students start from ``W_k ~ N(0, init_scale^2)``, ``init_scale > 0``
            (default 1, the published setting; ``S_k`` then starts at ``init_scale^2`` times the
            scale of the teacher's).

    Returns:
        :class:`GDResult` with ``S_hat``, ``S_students``, loss curves
        ``(n_init, steps)``, error curves, a per-student ``finite`` flag, and per student
        ``diverged`` and ``status`` (why it stopped: all steps done, or the loss or the
        norm of ``S_k`` that passed its bound, and when). Its arrays are in ``dtype``.

    Raises:
        ValueError: an argument out of its range (each error names it): no data (``n = 0``),
            ``X``/``y`` shapes that do not match, entries that are not finite, softmax labels
            that are not row-stochastic, a channel that is unknown or not differentiable,
            ``lr`` not in ``(0, inf)``, an unknown optimizer, counts that are not integers, a
            ``dtype`` that is not float32 or float64.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        >>> S = aim.sample_teacher(k1, 20, 0.5)
        >>> X, y = aim.sample_data(k2, S, n=200, T=2)
        >>> res = aim.train_gd(k3, X, y, 0.5, n_init=4, steps=100, S_true=S)
        >>> res.S_students.shape, res.loss.shape
        ((4, 20, 20), (4, 100))

    Reference: arXiv 2506.01582, the gradient-descent experiments; taught in
    chapter 6 (``book/06_gradient_descent.md``).
    """
    key = _checks.prng_key("key", key)
    rho = _checks.positive("rho", rho)
    n_init = _checks.integer_at_least("n_init", n_init, 1)
    steps = _checks.integer_at_least("steps", steps, 1)
    lr = _checks.positive("lr", lr)
    init_scale = _checks.positive("init_scale", init_scale)
    channel = _channel(channel)
    beta = _beta_check(channel)("beta", beta)
    weight_decay = _checks.nonnegative("weight_decay", weight_decay)
    _checks.one_of("optimizer", optimizer, OPTIMIZERS)
    dtype = algorithm_dtype(dtype)
    X, y = _tokens_and_labels(X, y)
    _labels_match(y, channel)
    n, T, d = np.shape(X)
    if width is None:
        width = max(1, int(round(rho * d)))
    width = _checks.integer_at_least("width", width, 1)
    if progress is not None:
        progress = _checks.boolean("progress", progress)
    # alive at once: the weights with Adam's two moments, the students' matrices, the data
    _checks.check_memory("train_gd", 4 * n_init * d * width + n_init * d * d + 2 * n * T * max(d, T))
    if S_true is not None:
        if np.shape(S_true) != (d, d):
            raise ValueError(f"S_true must have shape (d, d) = {(d, d)}, got shape {np.shape(S_true)}")
        _checks.square_symmetric("S_true", S_true)
        S_true = jnp.asarray(S_true, dtype=jnp.float64)  # cast to dtype by _train_students
    if progress is None:
        progress = 6.0 * steps * n_init * n * T * d * width > 2e11  # about 10 s on a laptop core

    trained = _train_students(
        init_scale * jax.random.normal(key, (n_init, d, width)), _ChannelLoss(channel), X, y,
        (beta, weight_decay),
        rhos=[rho], steps=steps, lr=lr, optimizer=optimizer, errors=None if S_true is None else _errors,
        S_true=S_true, record_every=record_every, records=100, chunks=20, progress=progress,
        desc=f"train_gd ({n_init} students, {steps} steps)", dtype=dtype, devices=devices)
    return GDResult(width=width, **trained)


# --------------------------------------------------------------------------- precomputed data


class GDData(NamedTuple):
    """The precomputed grid of ``scripts/gd_paper_data.py`` (see :func:`load_gd_data`).

    Attributes:
        table: numpy record array, one row per ``(T, x, seed)`` (per ``(d, T, x, seed)`` in the
            files with a ``d`` column); columns ``[d,] T, alpha, x, seed, n, single_mean, single_std,
            avg_K1, ..., avg_K32, final_loss_mean, n_finite, seconds``.
        header: the file's header (:mod:`aim_tutorial.datafiles`: ``title``, ``commands``,
            ``written``, ``versions``, ``seed``, ``params``, ``rows``, ``notes``).
        d: the dimension the file was computed at; ``None`` for a finite-size study (several
            dimensions: its ``d`` column says which row has which).
    """

    table: np.ndarray
    header: dict
    d: int


def load_gd_data(name: str = "gd_softmax.csv") -> GDData:
    """Load a data file written by ``scripts/gd_paper_data.py`` from ``aim_tutorial/data``.

    Example:
        >>> from aim_tutorial.gd import load_gd_data
        >>> load_gd_data().d, load_gd_data().header["seed"]
        (80, 6)
    """
    from . import datafiles

    available = datafiles.listed(prefix="gd_", suffix=".csv")
    if not isinstance(name, str) or name not in available:
        raise ValueError(f"name must be one of the data files {available}, got {name!r}")
    data = datafiles.read(datafiles.packaged(name))
    if "d" in data.columns:  # a finite-size study: the dimension of each row
        ds = np.unique(data.table["d"])
        return GDData(table=data.table, header=data.header, d=int(ds[0]) if len(ds) == 1 else None)
    return GDData(table=data.table, header=data.header, d=int(data.header["params"]["d"]))
