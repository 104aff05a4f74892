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
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks
from ._checks import traced as _traced
from ._students import LOSS_FACTOR, NORM_FACTOR  # noqa: F401  (the divergence bounds, as gd.LOSS_FACTOR)
from ._students import GDStatus
from ._students import scalar as _scalar
from ._students import tokens_and_labels as _tokens_and_labels
from ._students import train_students as _train_students
from ._students import unchecked_indices as _student_indices
from ._students import unchecked_matrix as _student_matrix
from ._students import weights as _weights
from .config import algorithm_dtype

__all__ = ["GDResult", "GDStatus", "train_gd", "student_indices", "student_matrix", "gd_loss", "averaged_errors",
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
        codes: tuple of ``n_init`` :class:`GDStatus` members, the same as codes
            (``GDStatus.COMPLETED``, or the divergence rule that applies).
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
    codes: tuple = ()


# --------------------------------------------------------------------------- validation


def _finite_result(what, out, *inputs):
    """``out``, or a ``ValueError`` when it is not finite although every input is concrete and finite."""
    if any(_traced(v) for v in inputs) or _traced(out) or bool(jnp.all(jnp.isfinite(out))):
        return out
    raise ValueError(f"{what}: the result is not finite although the inputs are: they are too large for "
                     "float64 (it overflowed); rescale them")


def _beta_check(ch):
    """``beta > 0`` for a channel it enters (softmax, sigmoid: at 0 the output ignores ``h``), else ``>= 0``."""
    return _checks.positive if ch.uses_beta else _checks.nonnegative


def _labels_match(y, ch):
    """Labels the channel can produce, where that is checkable: softmax outputs are row-stochastic."""
    if ch.name == "softmax" and ch.label_noise == 0 and not _traced(y):
        _checks.row_stochastic("y", y)


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


class _ChannelLoss(NamedTuple):
    """One student's loss :func:`gd_loss` with its channel: hashable by value, a static argument of the jit."""

    channel: object

    def __call__(self, W, X, y, beta, weight_decay):
        return gd_loss(W, X, y, channel=self.channel, beta=beta, weight_decay=weight_decay)


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
    rho, n_init, steps, lr, init_scale, channel, beta, weight_decay, dtype = _settings(
        rho, n_init, steps, lr, init_scale, channel, beta, weight_decay, optimizer, dtype)
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
    S_true = _teacher(S_true, d)
    if progress is None:
        progress = 6.0 * steps * n_init * n * T * d * width > 2e11  # about 10 s on a laptop core

    trained = _train_students(
        init_scale * jax.random.normal(key, (n_init, d, width)), _ChannelLoss(channel), X, y,
        (beta, weight_decay),
        rhos=[rho], steps=steps, lr=lr, optimizer=optimizer, errors=None if S_true is None else _errors,
        S_true=S_true, record_every=record_every, records=100, chunks=20, progress=progress,
        desc=f"train_gd ({n_init} students, {steps} steps)", dtype=dtype, devices=devices)
    return GDResult(width=width, **trained)


def _settings(rho, n_init, steps, lr, init_scale, channel, beta, weight_decay, optimizer, dtype):
    """The settings of :func:`train_gd`, checked in its order; the channel resolved, the dtype too."""
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
    return rho, n_init, steps, lr, init_scale, channel, beta, weight_decay, dtype


def _teacher(S_true, d):
    """``None``, or the teacher ``(d, d)``, symmetric and finite, as a float64 array."""
    if S_true is not None:
        if np.shape(S_true) != (d, d):
            raise ValueError(f"S_true must have shape (d, d) = {(d, d)}, got shape {np.shape(S_true)}")
        _checks.square_symmetric("S_true", S_true)
        S_true = jnp.asarray(S_true, dtype=jnp.float64)  # cast to dtype by _train_students
    return S_true


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
