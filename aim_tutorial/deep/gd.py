"""Deep attention, the students: a deep student's output and loss, trained by gradient descent.

Student ``k`` has one weight matrix a layer, tied queries and keys, ``S_{k,l} = W_{k,l} W_{k,l}^T /
sqrt(r_l d)``, and the teacher's ``beta`` and ``c`` (eq. (eq-deep-student) of chapter 7). The
students are trained together by full-batch Adam and averaged per layer (:func:`train_deep_gd`),
by the training driver they share with :func:`aim_tutorial.gd.train_gd`.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from .._checks import traced as _traced
from .._students import scalar as _scalar
from .._students import tokens_and_labels as _tokens_and_labels
from .._students import train_students as _train_students
from .._students import unchecked_indices as _student_indices
from .._students import unchecked_matrix as _student_matrix
from .._students import weights as _weights
from ..config import algorithm_dtype
from ._common import finite_output as _finite_output
from ._common import unchecked_output as _deep_output
from ._common import width_ratios as _rhos

__all__ = ["DeepGDResult", "deep_loss", "deep_student_output", "train_deep_gd"]


# --------------------------------------------------------------------------- the student


def deep_student_output(Ws, X, *, beta=1.0, c=1.0):
    """A deep student's output, eq. (eq-deep-student), at cost ``O(n T d r)``.

    Each layer has tied weights, ``S_l = W_l W_l^T / sqrt(r_l d)``, its own trace
    subtracted; the indices are ``P_l P_l^T / (d sqrt(r_l)) - ||W_l||^2/(d sqrt(r_l)) I``
    with ``P_l = X W_l``, then eq. (eq-deep-aim).

    Args:
        Ws: tuple of ``L`` weight matrices, shapes ``(d, r_l)``.
        X: tokens ``(n, T, d)``.
        beta: inverse temperature.
        c: skip strength.

    Returns:
        ``(n, T, T)``.

    Raises:
        ValueError: no layer, weights that are not ``(d, r_l)`` with ``X``'s ``d``, ``X`` not
            ``(n, T, d)`` with ``n, T, d >= 1``, ``beta < 0``, ``c`` not finite, entries that are
            not finite (values are checked outside ``jit``).
    """
    Ws = _student_weights(Ws, X)
    _scalar("beta", beta, _checks.nonnegative)
    _scalar("c", c, _checks.finite)
    out = _deep_student_output(Ws, X, beta, c)
    return _finite_output("deep_student_output", out, X, beta, c, *Ws)


def _student_weights(Ws, X):
    """A non-empty sequence of ``(d, r_l)`` weights, ``X`` ``(n, T, d)`` with the same ``d``."""
    if isinstance(Ws, (str, bytes, dict, set)) or not hasattr(Ws, "__len__") or hasattr(Ws, "ndim") and Ws.ndim != 3:
        raise _checks.ArgumentTypeError(f"Ws must be a tuple of L >= 1 weight matrices (d, r_l), got "
                                        f"{type(Ws).__name__}")
    if len(Ws) < 1:
        raise ValueError("Ws must hold at least one layer's weights (L >= 1), got none")
    Ws = tuple(_weights(W, f"Ws[{i}]") for i, W in enumerate(Ws))
    if np.ndim(X) == 3 and np.shape(X)[-1] != Ws[0].shape[0]:
        raise ValueError(f"Ws and X must share d: Ws[0] is {Ws[0].shape} (d = {Ws[0].shape[0]}), X is "
                         f"{np.shape(X)} (n, T, d)")
    _tokens_and_labels(X, None, Ws[0].shape[0])
    for i, W in enumerate(Ws):
        if W.shape[0] != Ws[0].shape[0]:
            raise ValueError(f"Ws[{i}] must have shape (d, r) with d = {Ws[0].shape[0]} (as Ws[0]), got {W.shape}")
    return Ws


def _deep_student_output(Ws, X, beta, c):
    hs = jnp.stack([_student_indices(W, X) for W in Ws])
    return _deep_output(hs, beta, c)


def deep_loss(Ws, X, y, *, beta=1.0, c=1.0):
    """Square loss of a deep student, ``(1/d) sum_mu sum_ab (y_hat_ab - y_ab)^2``, eq. (eq-deep-loss).

    ``y`` is ``(n, T, T)`` like the output, row-stochastic (checked outside ``jit``); the other
    arguments as :func:`deep_student_output`.
    """
    Ws = _student_weights(Ws, X)
    X, y = _tokens_and_labels(X, y)
    if not _traced(y):
        _checks.row_stochastic("y", y)
    _scalar("beta", beta, _checks.nonnegative)
    _scalar("c", c, _checks.finite)
    return _deep_loss(Ws, X, y, beta, c)


def _deep_loss(Ws, X, y, beta, c):
    """:func:`deep_loss` without validation (traced inside training)."""
    d = X.shape[-1]
    return jnp.sum((_deep_student_output(Ws, X, beta, c) - y) ** 2) / d


class DeepGDResult(NamedTuple):
    """Result of :func:`train_deep_gd` (``L`` layers, ``K = n_init`` students, ``R`` records).

    The arrays are in the dtype the students were trained in (``train_deep_gd(..., dtype=)``,
    see :func:`aim_tutorial.config.algorithm_dtype`): float64 by default on a CPU.

    Attributes:
        S_hat: ``(L, d, d)``, per layer the average of the students' ``S_l``.
        S_students: ``(K, L, d, d)``, each student's matrices.
        W: tuple of ``L`` arrays ``(K, d, r_l)``, the final weights.
        loss: ``(K, steps)``, each student's loss before each step.
        final_loss: ``(K,)``.
        record_steps: ``(R + 1,)`` steps at which errors were recorded (0 = initialisation).
        error_students: ``(K, L, R + 1)`` errors ``||S_{k,l} - S_l||_F^2 / d``, or ``None``.
        error_mean: ``(L, R + 1)`` errors of the averaged ``S_hat``, or ``None``.
        finite: ``(K,)`` bool, whether each student's loss stayed finite.
        widths: the student widths ``(r_1, ..., r_L)``.
        diverged: ``(K,)`` NumPy bool, whether each student diverged: a non-finite loss or
            weights, a loss above ``gd.LOSS_FACTOR`` times ``max(initial loss, ||y||_F^2/d)``, or
            some ``||S_{k,l}||_F^2/d`` above ``gd.NORM_FACTOR`` times the layer's scale
            ``max(1 + rho_l, (d + r_l + 1)/d, ||S_true_l||_F^2/d)``.
        status: tuple of ``K`` strings, why each student stopped (``"completed N steps"``, or
            ``"non-finite: ..."`` / ``"diverged: ..."`` with the step, the value and the bound).
        codes: tuple of ``K`` :class:`aim_tutorial.gd.GDStatus` members, the same as codes.
    """

    S_hat: jax.Array
    S_students: jax.Array
    W: tuple
    loss: jax.Array
    final_loss: jax.Array
    record_steps: np.ndarray
    error_students: Optional[jax.Array]
    error_mean: Optional[jax.Array]
    finite: jax.Array
    widths: tuple
    diverged: Optional[np.ndarray] = None
    status: tuple = ()
    codes: tuple = ()


def _deep_errors(Ws, S_true):
    """``(K, L)`` per-student errors and ``(L,)`` errors of the average."""
    d = S_true.shape[-1]
    Ss = jnp.stack([_student_matrix(W) for W in Ws], axis=1)  # (K, L, d, d)
    err = jnp.sum((Ss - S_true[None]) ** 2, axis=(-1, -2)) / d
    err_mean = jnp.sum((jnp.mean(Ss, axis=0) - S_true) ** 2, axis=(-1, -2)) / d
    return err, err_mean


def train_deep_gd(
    key: jax.Array,
    X,
    y,
    rhos: Sequence[float],
    *,
    n_init: int = 1,
    steps: int = 1000,
    lr: float = 0.1,
    beta: float = 1.0,
    c: float = 1.0,
    S_true=None,
    widths: Optional[Sequence[int]] = None,
    record_every: Optional[int] = None,
    dtype=None,
    devices=None,
) -> DeepGDResult:
    """Train ``n_init`` deep students by full-batch Adam and average them per layer, eq. (eq-deep-loss).

    Student ``k`` has weights ``W_{k,l} ~ N(0, 1)`` of shape ``(d, r_l)``, one a
    layer, tied queries and keys, ``S_{k,l} = W_{k,l} W_{k,l}^T / sqrt(r_l d)``
    with its trace subtracted, the teacher's ``beta`` and ``c``, and minimises
    ``(1/d) sum_mu ||y_hat(X_mu) - y_mu||_F^2``. All students run in one jitted
    program (``vmap`` over students, ``lax.scan`` over steps); a step costs
    ``O(n_init n T d sum_l r_l)``, no ``(n, d, d)`` tensor is formed. The
    estimator of layer ``l`` is the average ``S_hat_l = mean_k S_{k,l}``.

    Args:
        key: ``jax.random`` key for the initialisations.
        X: tokens ``(n, T, d)``.
        y: outputs ``(n, T, T)`` of a deep teacher (``sample_deep_data(...)``).
        rhos: the teacher's width ratios, one a layer; default student widths
            ``r_l = round(rho_l d)`` (matched widths).
        n_init: number of students, ``>= 1``.
        steps: Adam steps, ``>= 1``.
        lr: learning rate ``> 0`` (0.1 is the published one-layer setting).
        beta: inverse temperature ``> 0``.
        c: skip strength ``>= 0``.
        S_true: the teachers (list of ``L`` ``(d, d)`` matrices), optional; when
            given, per-layer errors are recorded along training.
        widths: student widths ``r_l >= 1``, overriding the matched default.
        record_every: record errors every this many steps (default about 50
            records); must divide ``steps``.
        dtype: the dtype of the training, ``"float32"`` or ``"float64"`` (or a NumPy/JAX dtype);
            ``None``: the environment variable ``AIM_DTYPE``, else float64 on a CPU and float32
            on a GPU/TPU (:func:`aim_tutorial.config.algorithm_dtype`). ``X``, ``y``, the initial
            weights (drawn in float64, then cast) and ``S_true`` are cast to it, and every step
            runs in it.
        devices: the JAX devices the students are spread over (default: every visible
            device, as many of them as divide ``n_init``; :func:`aim_tutorial.config.spread_devices`).

    Returns:
        :class:`DeepGDResult`, with per student ``diverged`` and ``status`` (why it stopped);
        its arrays are in ``dtype``.

    Raises:
        ValueError: an argument out of its range, each error naming it: no data (``n = 0``),
            shapes of ``X``, ``y``, ``S_true``, ``widths`` that do not match, entries that are
            not finite, ``y`` not row-stochastic, ``lr`` not in ``(0, inf)``, counts that are not
            integers, a ``dtype`` that is not float32 or float64.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        >>> Ss = aim.deep.sample_deep_teacher(k1, 12, [0.5, 0.5])
        >>> X, y = aim.sample_deep_data(k2, Ss, n=100, T=2)
        >>> res = aim.train_deep_gd(k3, X, y, [0.5, 0.5], n_init=2, steps=20, S_true=Ss)
        >>> res.S_hat.shape, res.error_mean.shape
        ((2, 12, 12), (2, 21))

    Chapter 7, eqs. (eq-deep-student)-(eq-deep-loss).
    """
    key = _checks.prng_key("key", key)
    rhos = _rhos(rhos)
    L = len(rhos)
    n_init = _checks.integer_at_least("n_init", n_init, 1)
    steps = _checks.integer_at_least("steps", steps, 1)
    lr = _checks.positive("lr", lr)
    beta = _checks.positive("beta", beta)
    c = _checks.nonnegative("c", c)
    dtype = algorithm_dtype(dtype)
    X, y = _tokens_and_labels(X, y)
    _checks.row_stochastic("y", y)
    n, T, d = np.shape(X)
    if widths is None:
        widths = [max(1, int(round(r * d))) for r in rhos]
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__len__") or np.ndim(widths) != 1:
        raise ValueError(f"widths must hold one width a layer (L = {L}), got {widths!r}")
    if len(widths) != L:
        raise ValueError(f"widths must hold one width a layer (L = {L}), got {widths!r}")
    widths = tuple(_checks.integer_at_least(f"widths[{i}]", w, 1) for i, w in enumerate(widths))
    _checks.check_memory("train_deep_gd", 4 * n_init * d * sum(widths) + n_init * L * d * d + 2 * n * T * max(d, T))
    if S_true is not None:
        if isinstance(S_true, (str, bytes)) or not hasattr(S_true, "__len__"):
            raise ValueError(f"S_true must hold one (d, d) matrix a layer (L = {L}), got {type(S_true).__name__}")
        if len(S_true) != L:
            raise ValueError(f"S_true must hold one (d, d) matrix a layer (L = {L}), got {len(S_true)}")
        for i, S in enumerate(S_true):
            if np.shape(S) != (d, d):
                raise ValueError(f"S_true[{i}] must have shape (d, d) = {(d, d)}, got {np.shape(S)}")
            _checks.square_symmetric(f"S_true[{i}]", S)
        S_true = jnp.stack([jnp.asarray(S, dtype=jnp.float64) for S in S_true])  # cast to dtype by _train_students

    W0 = tuple(jax.random.normal(k, (n_init, d, w)) for k, w in zip(jax.random.split(key, L), widths))
    trained = _train_students(
        W0, _deep_loss, X, y, (beta, c), rhos=rhos, steps=steps, lr=lr, optimizer="adam",
        errors=None if S_true is None else _deep_errors, S_true=S_true, record_every=record_every, records=50,
        dtype=dtype, devices=devices)
    return DeepGDResult(widths=widths, **trained)
