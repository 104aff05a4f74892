"""Deep attention: two (or more) attention layers as one attention-indexed model.

Chapter 7 (``book/07_deep_attention.md``) teaches this module; the equation
labels below refer to it. The teacher has one matrix a layer,
``S_l = W_l W_l^T / sqrt(r_l d)``, ``rho_l = r_l / d``, and the output is

    B_0 = I,  A_l = B_{l-1} h^l B_{l-1}^T,  B_l = (c I + softmax_beta(A_l)) B_{l-1},
    y = softmax_beta(A_L),                                          eq. (eq-deep-aim)

with ``h^l`` the attention indices of ``S_l`` on the original tokens
(:func:`aim_tutorial.model.deep_as_aim`). What the module provides:

- **exact second moments** of the joint indices: conditionally on the teachers,
  ``Cov(h^l_ab, h^m_a'b') = Q_lm (delta_aa' delta_bb' + delta_ab' delta_ba')`` with
  ``Q_lm = Tr(S_l S_m)/d`` (:func:`overlap_matrix`, :func:`index_covariance`),
  and the limit ``Q_lm -> delta_lm (1 + rho_l) + (1 - delta_lm) sqrt(rho_l rho_m)``
  for independent teachers (:func:`limit_overlap_matrix`), eq. (eq-deep-Q0);
- the **counting threshold** ``sum_l (2 rho_l - rho_l^2) / (T^2 + T - 2)``
  (:func:`deep_alpha_count`), eq. (eq-deep-count);
- a **two-layer student** trained by full-batch Adam, vmapped over
  initialisations, at cost ``O(n T d r)`` a step (:func:`train_deep_gd`);
- the **output channel of deep attention in the Gaussian-equivalent model**:
  its log-partition ``log Z_out`` by Monte Carlo over the first layer's indices,
  the L x L conjugate overlap ``q_hat`` (:func:`deep_q_hat`) and a per-layer-RIE
  state evolution that keeps only the diagonal of ``q_hat``
  (:func:`deep_state_evolution_diagonal`): a **conjecture**, tested in the chapter
  against averaged gradient descent.

Reference: Boncoraglio, Troiani, Erba, Zdeborova, *Bayes optimal learning of
attention-indexed models*, NeurIPS 2025 (arXiv 2506.01582), which introduces deep
attention as an AIM; the multi-layer theory here is this book's.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks
from .config import algorithm_dtype
from .counting import alpha_scale, dof_fraction
from .gd import (_array, _scalar, _student_indices, _student_matrix, _tokens_and_labels, _traced, _train_students,
                 _weights)

__all__ = [
    "DeepGDResult",
    "DeepQHat",
    "DeepSEResult",
    "deep_alpha_count",
    "deep_log_zout",
    "deep_loss",
    "deep_output",
    "deep_q_hat",
    "deep_state_evolution_diagonal",
    "deep_student_output",
    "index_covariance",
    "limit_overlap_matrix",
    "observed_maps_to_indices",
    "overlap_matrix",
    "sample_deep_teacher",
    "train_deep_gd",
]


# --------------------------------------------------------------------------- the model


def sample_deep_teacher(key: jax.Array, d: int, rhos: Sequence[float]) -> list:
    """Independent teachers ``S_l = W_l W_l^T / sqrt(r_l d)``, one a layer.

    Args:
        key: a ``jax.random`` key (split into one key a layer).
        d: embedding dimension, ``d >= 1``.
        rhos: width ratios ``rho_l > 0``, one a layer (``L = len(rhos) >= 1``).

    Returns:
        list of ``L`` arrays of shape ``(d, d)``.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> [S.shape for S in aim.deep.sample_deep_teacher(jax.random.key(0), 8, [0.5, 1.0])]
        [(8, 8), (8, 8)]
    """
    from .model import _sample_teachers

    key = _checks.prng_key("key", key)
    d = _checks.integer_at_least("d", d, 1)
    return _sample_teachers(key, d, _rhos(rhos))


def deep_output(hs, beta, c):
    """Traceable eq. (eq-deep-aim): the output from stacked indices ``hs`` of shape ``(L, ..., T, T)``.

    Same maths as :func:`aim_tutorial.model.deep_as_aim`, traceable: ``beta`` and ``c``
    may be traced (``jit``, ``grad``); shapes are always checked, values (finite
    ``hs``, ``beta >= 0``, finite ``c``) when they are concrete.

    Args:
        hs: ``(L, ..., T, T)``, ``L, T >= 1``, the indices of the ``L`` layers: one stacked array,
            or a list of ``L`` arrays of one shape ``(..., T, T)``, which is stacked (``jnp.asarray``:
            the same output as the stacked array); integer indices are converted to float64.
        beta: inverse temperature ``>= 0``.
        c: skip strength (finite).

    Returns:
        ``(..., T, T)``, row-stochastic.

    Raises:
        ValueError: a shape that is not ``(L, ..., T, T)``, a value out of range, or (concrete
            inputs) an output that overflowed (``(1 + |c|)^L`` and ``beta`` too large for float64).

    Example:
        >>> import jax.numpy as jnp
        >>> from aim_tutorial.deep import deep_output
        >>> deep_output(jnp.zeros((2, 3, 3)), 1.0, 1.0).sum(axis=-1).tolist()
        [1.0, 1.0, 1.0]
    """
    hs = _array("hs", hs, min_ndim=3)
    shape = hs.shape
    if shape[-1] != shape[-2] or min(shape) < 1:
        raise ValueError(f"hs must have shape (L, ..., T, T) with L, T >= 1, got shape {shape}")
    if not jnp.issubdtype(hs.dtype, jnp.floating):
        hs = jnp.asarray(hs, dtype=jnp.float64)
    _scalar("beta", beta, _checks.nonnegative)
    _scalar("c", c, _checks.finite)
    return _finite_output("deep_output", _deep_output(hs, beta, c), hs, beta, c)


def _finite_output(what, out, *inputs):
    """``out``, or a ``ValueError`` if it is not finite while every input is concrete (finite)."""
    if any(_traced(v) for v in inputs) or _traced(out) or bool(jnp.all(jnp.isfinite(out))):
        return out
    raise ValueError(f"{what}: the output is not finite although the inputs are: B_l = (c I + P_l) B_(l-1) "
                     "grows like (1 + |c|)^l and beta A_l overflowed float64; use a smaller |c|, beta or "
                     "smaller indices")


def _deep_output(hs, beta, c):
    """:func:`deep_output` without its checks: the forward pass of :func:`aim_tutorial.model.deep_as_aim`
    on the stacked indices (traced inside training)."""
    from .model import _deep_forward

    return _deep_forward([hs[ell] for ell in range(hs.shape[0])], beta, c)


def observed_maps_to_indices(P_maps, beta, c):
    """Recover every layer's indices, up to one constant each, from all the attention maps.

    If the maps ``P_l = softmax_beta(A_l)`` of *every* layer are observed, then
    ``B_{l-1}`` is known and ``A_l`` is known up to ``kappa 1 1^T`` (proposition (prop-deep-decouple));
    since ``B_{l-1} 1 = (1 + c)^{l-1} 1``, ``h^l = B_{l-1}^{-1} A_l B_{l-1}^{-T}`` is
    known up to a constant times ``1 1^T``. This returns the representative whose
    ``(T, T)`` entry is zero, eq. (eq-deep-decouple).

    Args:
        P_maps: ``(L, ..., T, T)`` row-stochastic attention maps with positive entries.
        beta: inverse temperature ``> 0``.
        c: skip strength (finite) such that every ``B_l`` is invertible.

    Returns:
        ``(L, ..., T, T)``: ``h^l - h^l_TT 1 1^T`` for every layer.

    Raises:
        ValueError: maps that are not ``(L, ..., T, T)`` softmax outputs (rows summing to 1,
            entries ``> 0``: a zero has no logarithm), ``beta <= 0``, ``c`` not finite, or a
            ``B_l`` that is singular (then ``h`` is not determined by the maps).
    """
    beta = _checks.positive("beta", beta)
    c = _checks.finite("c", c)
    _checks.real_array("P_maps", P_maps, min_ndim=3)
    if np.shape(P_maps)[-1] != np.shape(P_maps)[-2]:
        raise ValueError(f"P_maps must have shape (L, ..., T, T), got shape {np.shape(P_maps)}")
    _checks.row_stochastic("P_maps", P_maps)
    if not np.all(np.asarray(P_maps) > 0):
        raise ValueError("P_maps must have positive entries (softmax outputs; a zero has no logarithm)")
    P_maps = jnp.asarray(P_maps)
    T = P_maps.shape[-1]
    eye = jnp.eye(T, dtype=P_maps.dtype)
    B = jnp.broadcast_to(eye, P_maps.shape[1:])
    out = []
    for ell in range(P_maps.shape[0]):
        logP = jnp.log(P_maps[ell])
        phi = (logP - logP[..., -1:]) / beta  # phi_ab = A_ab - A_aT
        M = phi + jnp.swapaxes(phi[..., -1:, :], -1, -2)  # A_ab - A_TT = phi_ab + phi_Ta
        cond = float(np.max(np.linalg.cond(np.asarray(B).reshape(-1, T, T))))
        if not cond < 1e12:
            raise ValueError(f"c = {c!r} makes B_{ell} (the product of the c I + P_m, m <= {ell}) singular "
                             f"(condition number {cond:.3g}): the indices of layer {ell + 1} are not determined "
                             "by the maps")
        Binv = jnp.linalg.inv(B)
        h = Binv @ M @ jnp.swapaxes(Binv, -1, -2)
        out.append(h - h[..., -1:, -1:])
        B = (c * eye + P_maps[ell]) @ B
    return jnp.stack(out)


# --------------------------------------------------------------------------- exact moments


def overlap_matrix(Ss, Rs=None) -> np.ndarray:
    """The L x L overlap matrix ``Q_lm = Tr(S_l R_m) / d``, eq. (eq-deep-cov).

    With ``Rs = None`` this is ``Tr(S_l S_m)/d``, the matrix that sets the exact
    covariance of the joint attention indices (:func:`index_covariance`).

    Args:
        Ss: ``L`` matrices of shape ``(d, d)`` (list or ``(L, d, d)`` array).
        Rs: optional second list of ``L'`` matrices, shape ``(d, d)`` each.

    Returns:
        NumPy array of shape ``(L, L')``.

    Raises:
        ValueError: an empty list, matrices that are not square, symmetric, finite and of one shape.

    Example:
        >>> import numpy as np, aim_tutorial as aim
        >>> aim.deep.overlap_matrix([np.eye(3), 2 * np.eye(3)]).tolist()
        [[1.0, 2.0], [2.0, 4.0]]
    """
    _matrices("Ss", Ss)
    if Rs is not None:
        _matrices("Rs", Rs)
    A = np.asarray(jnp.stack([jnp.asarray(S) for S in Ss]))
    B = A if Rs is None else np.asarray(jnp.stack([jnp.asarray(R) for R in Rs]))
    if A.ndim != 3 or A.shape[1] != A.shape[2] or B.shape[1:] != A.shape[1:]:
        raise ValueError(f"Ss and Rs must hold (d, d) matrices of one shape, got {A.shape} and {B.shape}")
    Q = np.einsum("lij,mij->lm", A, B) / A.shape[1]
    if not np.all(np.isfinite(Q)):
        raise ValueError("overlap_matrix: Tr(S_l R_m)/d overflowed float64: the entries of Ss (or Rs) are too large")
    return Q


def _matrices(name, Ss):
    """A non-empty list (or ``(L, d, d)`` array) of symmetric finite ``(d, d)`` matrices of one shape."""
    if Ss is None or isinstance(Ss, (str, bytes, dict, set)) or not hasattr(Ss, "__len__"):
        raise _checks.ArgumentTypeError(f"{name} must be a list of (d, d) matrices, got {type(Ss).__name__}")
    if hasattr(Ss, "shape") and np.ndim(Ss) != 3:
        raise ValueError(f"{name} must be a list of (d, d) matrices or an (L, d, d) array, got shape {np.shape(Ss)}")
    if len(Ss) < 1:
        raise ValueError(f"{name} must hold at least one (d, d) matrix, got none")
    for i, S in enumerate(Ss):
        _checks.square_symmetric(f"{name}[{i}]", S, atol=1e-6)
        if np.shape(S) != np.shape(Ss[0]):
            raise ValueError(f"{name}[{i}] must have the shape {np.shape(Ss[0])} of {name}[0], got {np.shape(S)}")


def index_covariance(Q, T: int) -> np.ndarray:
    """Covariance of the stacked upper triangles of ``h^1..h^L``: ``Q kron C``, eq. (eq-deep-cov).

    Conditionally on the teachers and for Gaussian tokens, exactly (at every
    ``d``): ``Cov(h^l_ab, h^m_a'b') = Q_lm (delta_aa' delta_bb' + delta_ab' delta_ba')``,
    so on the entries ``a <= b`` (order of ``np.triu_indices(T)``), layer-major,
    the covariance is ``kron(Q, C)`` with ``C = diag(2 if a = b else 1)``.

    Args:
        Q: overlap matrix ``(L, L)``, symmetric positive semi-definite.
        T: tokens a sequence, ``>= 2`` (one token carries no attention).

    Returns:
        array of shape ``(L D, L D)``, ``D = T(T+1)/2``.

    Example:
        >>> import numpy as np, aim_tutorial as aim
        >>> aim.deep.index_covariance(np.eye(1), 2).diagonal().tolist()
        [2.0, 1.0, 2.0]
    """
    T = _checks.integer_at_least("T", T, 2)
    _checks.square_symmetric("Q", Q)
    Qn = np.asarray(Q, dtype=float)
    if np.linalg.eigvalsh(Qn).min() < -1e-10 * max(1.0, float(np.abs(Qn).max())):
        raise ValueError(f"Q must be positive semi-definite (an overlap matrix Tr(S_l S_m)/d), got {Qn.tolist()}")
    _checks.check_memory(f"index_covariance(T={T})", (len(Qn) * T * (T + 1) // 2) ** 2)
    i, j = np.triu_indices(T)
    C = np.diag(np.where(i == j, 2.0, 1.0))
    return np.kron(np.asarray(Q, dtype=float), C)


def limit_overlap_matrix(rhos: Sequence[float]) -> np.ndarray:
    """Limit of ``Tr(S_l S_m)/d`` for independent teachers, eq. (eq-deep-Q0).

    ``Q0_ll = 1 + rho_l`` and ``Q0_lm = sqrt(rho_l rho_m)`` (``l != m``): the means
    ``E S_l = sqrt(rho_l) I`` are common to all layers, while the fluctuations
    ``S_l - sqrt(rho_l) I`` are asymptotically free and traceless, hence orthogonal.
    At finite ``d`` the off-diagonal expectation is exactly ``sqrt(r_l r_m)/d``.

    Example:
        >>> import aim_tutorial as aim
        >>> aim.deep.limit_overlap_matrix([0.5, 0.5]).round(3).tolist()
        [[1.5, 0.5], [0.5, 1.5]]
    """
    r = np.asarray(_rhos(rhos))
    with np.errstate(over="ignore"):
        off = np.sqrt(np.outer(r, r))
    if not np.all(np.isfinite(off)):  # rho_l rho_m overflows: the same numbers, another order
        off = np.outer(np.sqrt(r), np.sqrt(r))
    return off + np.diag(np.ones_like(r))


def deep_alpha_count(rhos: Sequence[float], T: int) -> float:
    """Counting threshold of noiseless deep softmax attention, eq. (eq-deep-count).

    ``sum_l dof(rho_l) / (T^2 + T - 2)`` with ``dof(rho) = 2 rho - rho^2`` for
    ``rho <= 1`` and ``1`` beyond: the degrees of freedom of all layers (per
    ``d^2/2``) against the ``T(T+1)/2 - 1`` constraints a sample. A lower bound on
    the sample complexity of perfect recovery; that it is the threshold is a
    conjecture (chapter 7).

    Example:
        >>> import aim_tutorial as aim
        >>> aim.deep.deep_alpha_count([0.5, 0.5], 2)
        0.375
    """
    T = _checks.integer_at_least("T", T, 2)
    return sum(dof_fraction(r) for r in _rhos(rhos)) / alpha_scale(T)


def _rhos(rhos):
    if rhos is None or isinstance(rhos, (str, bytes, dict, set)):
        raise _checks.ArgumentTypeError(f"rhos must be a non-empty sequence of width ratios, got {rhos!r}")
    try:
        ndim = np.ndim(rhos)
    except ValueError:  # a ragged nested list
        ndim = -1
    if ndim != 1 or len(rhos) < 1:
        raise ValueError(f"rhos must be a non-empty sequence of width ratios, got {rhos!r}")
    return [_checks.positive(f"rhos[{i}]", r) for i, r in enumerate(rhos)]


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
        y: outputs ``(n, T, T)`` of a deep teacher (``sample_data(..., channel="deep")``).
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
        >>> X, y = aim.sample_data(k2, Ss, n=100, T=2, channel="deep")
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


# --------------------------------------------------------------------------- the output channel (L = 2)
#
# In the Gaussian-equivalent model the two layers' indices, given the estimates
# omega = (omega^1, omega^2), are h^l = omega^l + sqrt(V_l) zeta^l with V diagonal
# (as before eq. (eq-deep-qhat)). Noiseless softmax output: y fixes A_2 = B(h^1) h^2 B(h^1)^T up to a
# constant, i.e. the D - 1 log-ratios ell_ab = A_ab - A_TT (a <= b, (a, b) != (T, T)),
# D = T(T+1)/2. Given h^1, ell is linear in h^2, so
#
#     Z_out(ell | omega, V) = E_{h^1 ~ N(omega^1, V_1 C)} N(ell; Pi L_B omega^2, V_2 Pi L_B C L_B^T Pi^T),
#
# (eq. (eq-deep-Zout)), with L_B the D x D matrix of h -> B h B^T on upper triangles and Pi
# the projection onto ell. The expectation over h^1 is done by Monte Carlo.


def _sym_basis(T):
    """``(K, T, T)`` symmetric basis: ``E_k`` has ones at ``(a, b)`` and ``(b, a)``, ``a <= b``."""
    i, j = np.triu_indices(T)
    E = np.zeros((len(i), T, T))
    E[np.arange(len(i)), i, j] = 1.0
    E[np.arange(len(i)), j, i] = 1.0
    return E


def _quotient(T):
    """``(K - 1, K)`` matrix ``Pi``: upper-triangle vector of ``A`` -> ``A_ab - A_TT``."""
    K = T * (T + 1) // 2
    Pi = np.zeros((K - 1, K))
    Pi[np.arange(K - 1), np.arange(K - 1)] = 1.0
    Pi[:, K - 1] = -1.0  # the last upper-triangle entry is (T, T)
    return Pi


def _small_cholesky_solve(A, b):
    """``(L^{-1} b, log diag L)`` for the Cholesky factor ``L`` of a small SPD ``A``.

    Written out entry by entry (the size is static and at most ``T(T+1)/2 - 1``):
    batched LAPACK calls inside this program deadlocked XLA's CPU thread pool
    on 2 cores with jax 0.10.2 (every thread waiting, for some random draws).
    """
    n = A.shape[-1]
    L = [[None] * n for _ in range(n)]
    for k in range(n):
        s = A[k, k] - sum(L[k][m] * L[k][m] for m in range(k))
        L[k][k] = jnp.sqrt(s)
        for i in range(k + 1, n):
            L[i][k] = (A[i, k] - sum(L[i][m] * L[k][m] for m in range(k))) / L[k][k]
    r = []
    for i in range(n):
        r.append((b[i] - sum(L[i][m] * r[m] for m in range(i))) / L[i][i])
    return jnp.stack(r), jnp.log(jnp.stack([L[k][k] for k in range(n)]))


def _log_zout_one(D, om1, om2, zeta1, V1, V2, beta, c, T):
    """``log Z_out`` of one sample by Monte Carlo over ``zeta1`` ``(M, K)``; om1, om2 ``(K,)`` upper triangles."""
    E = jnp.asarray(_sym_basis(T))
    Pi = jnp.asarray(_quotient(T))
    i, j = np.triu_indices(T)
    Cd = jnp.asarray(np.where(i == j, 2.0, 1.0))

    def one(z):
        u1 = om1 + jnp.sqrt(V1 * Cd) * z
        h1 = jnp.einsum("k,kab->ab", u1, E)
        B = c * jnp.eye(T) + jax.nn.softmax(beta * h1, axis=-1)
        LB = jnp.einsum("ac,kcd,bd->kab", B, E, B)[:, i, j].T  # (K out, K in)
        M = Pi @ LB
        mean = M @ om2
        cov = V2 * (M * Cd) @ M.T
        r, log_diag = _small_cholesky_solve(cov, D - mean)
        return -0.5 * jnp.sum(r * r) - jnp.sum(log_diag) - 0.5 * (T * (T + 1) // 2 - 1) * jnp.log(2 * jnp.pi)

    logs = jax.vmap(one)(zeta1)
    return jax.scipy.special.logsumexp(logs) - jnp.log(zeta1.shape[0])


def _log_lik_nodes(D, om2, u, V2, beta, c):
    """``log N(D; M(u) omega^2, V_2 M(u) C M(u)^T)`` for ``T = 2``, ``u`` ``(N, 3)`` upper triangles of ``h^1``.

    The same value as the Gaussian of :func:`_log_zout_one`, written without the covariance
    ``V_2 M C M^T``, whose smallest eigenvalue scales like ``det(B)^4``: once ``det B`` falls
    below about ``1e-4`` (softmax saturated towards a singular ``B``, which the tail nodes of a
    quadrature rule reach) its Cholesky factor has no correct digit, and it returns NaN or
    garbage. Instead: the ``h^2`` with output ``D`` are ``H_0(D) + t 1 1^T``, ``H_0 = B^{-1} A^* B^{-T}``
    with ``A^* = [[D_1, D_2], [D_2, 0]]``, so with ``h^2 ~ N(omega^2, V_2 C)`` (``C = diag(2, 1, 2)``)

        N(D; M omega^2, V_2 M C M^T) = |det B|^(-3) (1 + c)^2 int dt N(H_0 + t e; omega^2, V_2 C),

    the Jacobian of ``(D, t) -> h^2`` being ``det(L_{B^{-1}}) (1 + c)^2 = det(B)^(-(T+1)) (1 + c)^2``,
    and the ``t`` integral is Gaussian: ``(2 pi V_2)^(-1/2) (det C)^(-1/2) a^(-1/2) exp(-r_perp^T C^{-1} r_perp /
    (2 V_2))`` with ``r = H_0 - omega^2``, ``a = e^T C^{-1} e = 2``, ``r_perp = r - (e^T C^{-1} r / a) e``.
    ``det B = (1 + c)(c - 1 + P_11 + P_22)`` is a sum of positive terms for ``c >= 1``.
    """
    Cinv = jnp.array([0.5, 1.0, 0.5])
    P11 = jax.nn.sigmoid(beta * (u[..., 0] - u[..., 1]))  # softmax of the rows (u0, u1) and (u1, u2)
    P22 = jax.nn.sigmoid(beta * (u[..., 2] - u[..., 1]))
    det = (1.0 + c) * (c - 1.0 + P11 + P22)
    # adj(B) = [[c + P22, -P12], [-P21, c + P11]], P12 = 1 - P11, P21 = 1 - P22; N = adj A* adj^T
    a11, a12, a21, a22 = c + P22, P11 - 1.0, P22 - 1.0, c + P11
    D1, D2 = D[0], D[1]
    x11, x12 = a11 * D1 + a12 * D2, a11 * D2
    x21, x22 = a21 * D1 + a22 * D2, a21 * D2
    H0 = jnp.stack([x11 * a11 + x12 * a12, x11 * a21 + x12 * a22, x21 * a21 + x22 * a22], axis=-1) / det[..., None]**2
    r = H0 - om2
    r = r - 0.5 * jnp.sum(Cinv * r, axis=-1, keepdims=True)
    quad = jnp.sum(Cinv * r * r, axis=-1) / V2
    const = 2.0 * jnp.log(1.0 + c) - jnp.log(2 * jnp.pi * V2) - 0.5 * jnp.log(8.0)  # (det C a)^(1/2) = 8^(1/2)
    return -3.0 * jnp.log(jnp.abs(det)) + const - 0.5 * quad


def _quotient_factor_t2():
    """``R`` ``(3, 2)``: ``u = omega^1 + sqrt(V_1) R xi``, ``xi ~ N(0, I_2)``, has the law of ``h^1`` up to ``t 1 1^T``."""
    Pi = _quotient(2)
    Cd = np.array([2.0, 1.0, 2.0])
    return np.vstack([np.linalg.cholesky((Pi * Cd) @ Pi.T), np.zeros((1, 2))])


_BOX = 7.0  # the grid covers xi in [-_BOX, _BOX]^2 (prior mass outside: about 1e-11)


def _log_zout_grid(D, om1, om2, V1, V2, beta, c, n_nodes):
    """``log Z_out`` of one sample, ``T = 2``, by the midpoint rule on a uniform grid over the first layer.

    ``Z_out = int N(xi; 0, I_2) exp(lik(omega^1 + sqrt(V_1) R xi)) dxi`` over the two directions of ``h^1``
    that the softmax sees (:func:`_quotient_factor_t2`), the likelihood in the stable form of
    :func:`_log_lik_nodes`: the midpoint rule with ``n_nodes x n_nodes`` cells on ``[-7, 7]^2``. The
    integrand vanishes (below ``1e-11`` of the prior) at the edges, so the rule converges like the
    trapezoidal rule of a smooth function, geometrically once the cell width ``14 / n_nodes`` resolves
    the integrand's narrowest feature. That width shrinks like ``sqrt(V_2 / V_1)`` (and the integrand
    can have several narrow modes: Monte Carlo from the prior misses them, a Gaussian rule centred on
    one mode misses the others), so the rule is for moderate ``V``; chapter 7 measures its error.
    """
    R = jnp.asarray(_quotient_factor_t2())
    h = 2 * _BOX / n_nodes
    g = -_BOX + h * (np.arange(n_nodes) + 0.5)
    I, J = np.meshgrid(g, g, indexing="ij")
    xi = jnp.asarray(np.stack([I.ravel(), J.ravel()], axis=1))
    logw = jnp.asarray(2 * np.log(h) - np.log(2 * np.pi) - 0.5 * (I.ravel() ** 2 + J.ravel() ** 2))
    u = om1 + jnp.sqrt(V1) * xi @ R.T
    return jax.scipy.special.logsumexp(logw + _log_lik_nodes(D, om2, u, V2, beta, c))


_BATCH = 256  # omega samples a compiled call; larger batches go through a Python loop


def _q_hat_mc(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_inner):
    """Mean and standard error of the per-sample ``q_hat / alpha`` over ``n_omega`` samples.

    The samples are drawn in batches of at most ``_BATCH``, batch ``b`` from
    ``fold_in(key, b)``, each batch one compiled call (of one shape) that
    returns the cross-fitted scores; their products are summed in NumPy, so
    that memory stays bounded for any ``n_omega``.
    """
    i, j = np.triu_indices(T)
    Cd = np.where(i == j, 2.0, 1.0)
    total = np.zeros((2, 2))
    total_sq = np.zeros((2, 2))
    for b, start in enumerate(range(0, n_omega, _BATCH)):
        m = min(_BATCH, n_omega - start)
        GA, GB = _q_hat_batch(jax.random.fold_in(key, b), q11, q22, q12, V1, V2, beta, c,
                              T=T, n_omega=m, n_inner=n_inner)
        H = np.einsum("nlk,k,nmk->nlm", np.asarray(GA), Cd, np.asarray(GB))
        H = H + np.swapaxes(H, -1, -2)  # per-sample 2 sym(g_A,l^T C g_B,m)
        total += H.sum(axis=0)
        total_sq += (H * H).sum(axis=0)
    mean = total / n_omega
    var = np.maximum(total_sq / n_omega - mean**2, 0.0)
    return mean, np.sqrt(var / n_omega)


@partial(jax.jit, static_argnames=("T", "n_omega", "n_inner"))
def _q_hat_batch(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_inner):
    """The two cross-fitted scores ``(g_A, g_B)``, each ``(n_omega, 2, K)``, of one batch."""
    K = T * (T + 1) // 2
    _, _, k3, k4 = jax.random.split(key, 4)
    # omega: covariance q kron C; Cholesky of the 2 x 2 q (q_11 = 0 forces q_12 = 0: then l21 = 0, exactly)
    D, om1, om2 = _outer_draws(key, q11, q22, q12, V1, V2, beta, c, T, n_omega)
    # two independent inner Monte Carlo sets: E[g_A g_B^T] has no noise-variance bias (cross-fitting)
    inner_a = jax.random.normal(k3, (n_omega, n_inner, K))
    inner_b = jax.random.normal(k4, (n_omega, n_inner, K))

    def score(Dm, o1, o2, z):
        def f(a, b):
            return _log_zout_one(Dm, a, b, z, V1, V2, beta, c, T)

        return jnp.stack(jax.grad(f, argnums=(0, 1))(o1, o2))  # (2, K)

    def both(args):
        Dm, o1, o2, za, zb = args
        return score(Dm, o1, o2, za), score(Dm, o1, o2, zb)

    return jax.vmap(both)((D, om1, om2, inner_a, inner_b))  # (n, 2, K) each


_NODE_BATCH = 2**18  # quadrature: omega samples times nodes in one compiled call


def _quad_batch_size(T, n_nodes):
    """Omega samples a compiled call for the quadrature (at most ``_BATCH``, about ``_NODE_BATCH`` node evaluations)."""
    N = n_nodes**2
    return max(1, min(_BATCH, _NODE_BATCH // N))


def _q_hat_quad(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_nodes):
    """Mean and standard error of the per-sample ``q_hat / alpha``, ``Z_out`` by deterministic quadrature (``T = 2``).

    The outer samples (omega and the true indices) are those of :func:`_q_hat_mc` with the same
    key (batch ``b`` of ``_BATCH`` from ``fold_in(key, b)``, the same splits); the inner integral of
    eq. (eq-deep-Zout) is the midpoint rule of :func:`_log_zout_grid`, so each sample's score is
    a deterministic function of its draw: no cross-fitting is needed and the only error left is
    the outer Monte Carlo's, measured by the standard error, plus the rule's (measured against
    ``n_nodes`` in chapter 7).
    """
    i, j = np.triu_indices(T)
    Cd = np.where(i == j, 2.0, 1.0)
    total = np.zeros((2, 2))
    total_sq = np.zeros((2, 2))
    sub = _quad_batch_size(T, n_nodes)
    for b, start in enumerate(range(0, n_omega, _BATCH)):
        m = min(_BATCH, n_omega - start)
        G = np.asarray(_q_hat_quad_batch(jax.random.fold_in(key, b), q11, q22, q12, V1, V2, beta, c,
                                         T=T, n_omega=m, n_nodes=n_nodes, sub=min(sub, m)))
        H = 2 * np.einsum("nlk,k,nmk->nlm", G, Cd, G)  # per-sample 2 g_l^T C g_m
        total += H.sum(axis=0)
        total_sq += (H * H).sum(axis=0)
    mean = total / n_omega
    var = np.maximum(total_sq / n_omega - mean**2, 0.0)
    return mean, np.sqrt(var / n_omega)


def _outer_draws(key, q11, q22, q12, V1, V2, beta, c, T, n_omega):
    """The outer samples of one batch: the data ``D`` ``(n, K - 1)`` and the means ``omega^1, omega^2`` ``(n, K)``.

    The same draws as :func:`_q_hat_batch` (keys ``split(key, 4)[:2]``).
    """
    K = T * (T + 1) // 2
    i, j = np.triu_indices(T)
    Cd = jnp.asarray(np.where(i == j, 2.0, 1.0))
    Pi = jnp.asarray(_quotient(T))
    E = jnp.asarray(_sym_basis(T))
    k1, k2, _, _ = jax.random.split(key, 4)
    l11 = jnp.sqrt(jnp.maximum(q11, 0.0))
    l21 = jnp.where(l11 > 0, q12 / jnp.where(l11 > 0, l11, 1.0), 0.0)
    l22 = jnp.sqrt(jnp.maximum(q22 - l21 * l21, 0.0))
    g = jax.random.normal(k1, (n_omega, 2, K)) * jnp.sqrt(Cd)
    om1 = l11 * g[:, 0]
    om2 = l21 * g[:, 0] + l22 * g[:, 1]
    zt = jax.random.normal(k2, (n_omega, 2, K)) * jnp.sqrt(Cd)
    u1 = om1 + jnp.sqrt(V1) * zt[:, 0]
    u2 = om2 + jnp.sqrt(V2) * zt[:, 1]
    h1 = jnp.einsum("nk,kab->nab", u1, E)
    h2 = jnp.einsum("nk,kab->nab", u2, E)
    B = c * jnp.eye(T) + jax.nn.softmax(beta * h1, axis=-1)
    A = B @ h2 @ jnp.swapaxes(B, -1, -2)
    return A[:, i, j] @ Pi.T, om1, om2


@partial(jax.jit, static_argnames=("T", "n_omega", "n_nodes", "sub"))
def _q_hat_quad_batch(key, q11, q22, q12, V1, V2, beta, c, *, T, n_omega, n_nodes, sub):
    """The scores ``g`` ``(n_omega, 2, K)`` of one batch, ``Z_out`` by the rule of :func:`_log_zout_grid`."""
    D, om1, om2 = _outer_draws(key, q11, q22, q12, V1, V2, beta, c, T, n_omega)

    def score(Dm, o1, o2):
        def f(a, b):
            return _log_zout_grid(Dm, a, b, V1, V2, beta, c, n_nodes)

        return jnp.stack(jax.grad(f, argnums=(0, 1))(o1, o2))  # (2, K)

    # sub samples at a time (memory: sub x nodes evaluations)
    return jax.lax.map(lambda a: score(*a), (D, om1, om2), batch_size=sub)


class DeepQHat(NamedTuple):
    """Result of :func:`deep_q_hat`.

    Attributes:
        q_hat: ``(2, 2)``, the conjugate overlap matrix ``q_hat_lm`` (proportional to ``alpha``).
        stderr: ``(2, 2)``, Monte Carlo standard errors over the ``omega`` samples.
    """

    q_hat: np.ndarray
    stderr: np.ndarray


def deep_q_hat(key, alpha, q, V, T: int = 2, beta: float = 1.0, c: float = 1.0,
               n_omega: int = 4000, n_inner: int = 512, n_nodes: Optional[int] = None) -> DeepQHat:
    """Conjugate overlaps of two-layer deep attention in the Gaussian-equivalent model, eq. (eq-deep-qhat).

    ``q_hat_lm = 2 alpha E[ g_l^T C g_m ]`` with ``g_l = d log Z_out / d omega^l`` (on
    the ``D = T(T+1)/2`` entries ``a <= b``), ``C = diag(2 if a = b else 1)``,
    ``omega ~ N(0, q kron C)``, ``h^l = omega^l + sqrt(V_l) zeta^l`` and ``Z_out``
    of eq. (eq-deep-Zout) estimated with ``n_inner`` Monte Carlo draws of the first
    layer's indices; the outer expectation uses ``n_omega`` draws. The score of a
    Monte Carlo estimate of ``log Z_out`` is noisy, and ``E[g g^T]`` of a noisy ``g``
    is biased upwards by the noise variance (by a factor of ten at ``n_inner = 16``):
    each sample's score is therefore computed twice, from two independent inner
    sets ``A`` and ``B``, and ``E[g_A^T C g_B]`` is used (cross-fitting), which
    leaves only the ``O(1/n_inner)`` bias of each self-normalised estimate.

    Args:
        key: ``jax.random`` key (common random numbers: the same key gives the same answer).
        alpha: sample complexity ``>= 0``.
        q: ``(2, 2)`` overlap matrix of the estimates, positive semi-definite (``q_12 =
            sqrt(rho_1 rho_2)`` when the layers decouple, eq. (eq-deep-se)). Nothing divides
            by ``q``: it is only the covariance of ``omega``, so a singular ``q`` (down to
            ``q = 0``, ``omega = 0``: nothing known yet) is its exact limit.
        V: ``(V_1, V_2)``, the per-layer errors, each ``> 0``.
        T: tokens a sequence, ``>= 2``.
        beta: inverse temperature ``> 0``.
        c: skip strength ``>= 0``.
        n_omega, n_inner: Monte Carlo sizes (``n_inner`` is not used when ``n_nodes`` is given).
        n_nodes: ``None`` (default): ``Z_out`` by ``n_inner`` Monte Carlo draws, cross-fitted as above.
            An integer ``>= 2`` (``T = 2`` only): ``Z_out`` by the deterministic midpoint rule on an
            ``n_nodes x n_nodes`` grid over the two directions of ``h^1`` that the softmax sees (a
            constant added to every entry of ``h^1`` leaves it unchanged), with the likelihood in a
            form that stays accurate where ``B`` is nearly singular. Each score is then a
            deterministic function of its outer draw: no cross-fitting and no inner bias; the outer
            average over ``n_omega`` draws (the same draws as the Monte Carlo path with the same key)
            is the only stochastic part, and ``stderr`` is its standard error. The rule needs cells
            narrower than the integrand's features, whose width shrinks like ``sqrt(V_2 / V_1)``:
            chapter 7 measures its error (``n_nodes = 128`` and ``256`` agree within a tenth of the
            outer standard error at ``V = (1, 1)``, ``(0.036, 0.0036)``, ``(0.019, 0.0014)`` and
            ``(0.0044, 0.0003)``; ``n_nodes = 64`` is off by more than it at ``(0.036, 0.0036)``).

    Returns:
        :class:`DeepQHat`.

    Raises:
        ValueError: an argument out of range (each error names it; ``n_nodes`` must be an integer
            ``>= 2`` and is refused for ``T != 2``), or a Monte Carlo
            estimate that is not finite (it says which settings to change).

    Example:
        >>> import jax, numpy as np, aim_tutorial as aim
        >>> r = aim.deep.deep_q_hat(jax.random.key(0), 0.5, np.array([[0.6, 0.5], [0.5, 0.6]]),
        ...                         (0.9, 0.9), n_omega=64, n_inner=32)
        >>> r.q_hat.shape
        (2, 2)

    Chapter 7. The limit ``V_1 -> 0`` (first layer known) gives
    ``q_hat_22 = alpha (T^2 + T - 2) / V_2`` exactly, the one-layer softmax value.
    """
    key = _checks.prng_key("key", key)
    alpha = _checks.nonnegative("alpha", alpha)
    T, beta, c, n_omega, n_inner = _channel_settings(T, beta, c, n_omega, n_inner)
    n_nodes = _node_count(T, n_nodes)
    if np.shape(q) != (2, 2):
        raise ValueError(f"q must be a (2, 2) positive semi-definite matrix, got shape {np.shape(q)}")
    _checks.square_symmetric("q", q)
    q = np.asarray(q, dtype=float)
    if q.shape != (2, 2) or np.linalg.eigvalsh(q).min() < -1e-12:
        raise ValueError(f"q must be a (2, 2) positive semi-definite matrix, got {q.tolist()}")
    V1, V2 = _two_errors(V)
    if n_nodes is None:
        m, s = _q_hat_mc(key, q[0, 0], q[1, 1], q[0, 1], V1, V2, beta, c, T=T, n_omega=n_omega, n_inner=n_inner)
    else:
        m, s = _q_hat_quad(key, q[0, 0], q[1, 1], q[0, 1], V1, V2, beta, c, T=T, n_omega=n_omega, n_nodes=n_nodes)
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s))):
        raise ValueError(f"deep_q_hat: the Monte Carlo estimate is not finite at q = {q.tolist()}, V = {(V1, V2)}, "
                         f"beta = {beta}, c = {c}: B = c I + softmax is (nearly) singular; use c > 0 or a smaller beta")
    return DeepQHat(alpha * np.asarray(m), alpha * np.asarray(s))


def _channel_settings(T, beta, c, n_omega, n_inner):
    """The settings :func:`deep_q_hat` and the state evolution share, checked (with a memory estimate)."""
    T = _checks.integer_at_least("T", T, 2)
    beta = _checks.positive("beta", beta)
    c = _checks.nonnegative("c", c)
    n_omega = _checks.integer_at_least("n_omega", n_omega, 2)
    n_inner = _checks.integer_at_least("n_inner", n_inner, 1)
    K = T * (T + 1) // 2
    # one batch: two inner sets (n, n_inner, K) and, per draw, the K x K maps and their gradients
    _checks.check_memory(f"deep_q_hat(T={T}, n_inner={n_inner})", 8 * min(n_omega, _BATCH) * n_inner * K * K)
    return T, beta, c, n_omega, n_inner


def _node_count(T, n_nodes):
    """``None`` or an integer ``>= 2``, the grid cells a direction of the quadrature (``T = 2`` only; memory estimate)."""
    if n_nodes is None:
        return None
    n_nodes = _checks.integer_at_least("n_nodes", n_nodes, 2)
    if T != 2:
        raise ValueError(f"n_nodes (the deterministic quadrature of Z_out) is implemented for T = 2, got T = {T}; "
                         "use n_nodes=None (Monte Carlo) for T > 2")
    # one batch: per (omega draw, node) a few dozen float64 numbers and their gradients
    _checks.check_memory(f"deep_q_hat(T={T}, n_nodes={n_nodes})", 8 * 64 * _quad_batch_size(T, n_nodes) * n_nodes**2)
    return n_nodes


def _two_errors(V):
    """``(V_1, V_2)``, each ``> 0`` and finite."""
    if isinstance(V, (str, bytes)) or np.shape(V) != (2,):
        raise ValueError(f"V must hold two per-layer errors (V_1, V_2), got {V!r}")
    return _checks.positive("V[0]", V[0]), _checks.positive("V[1]", V[1])


class _OutOfCalls(Exception):
    """The root finder of :func:`deep_state_evolution_diagonal` reached ``max_iter`` evaluations."""


class DeepSEResult(NamedTuple):
    """Result of :func:`deep_state_evolution_diagonal` (one entry per ``alpha``).

    Attributes:
        alpha: ``(A,)``.
        mmse: ``(A, 2)`` per-layer errors ``V_l = Q0_ll - q_ll`` at the fixed point.
        q_hat: ``(A, 2, 2)``, the full ``q_hat`` at the fixed point (its off-diagonal
            entry is what the diagonal closure neglects).
        converged: ``(A,)`` bool, a fixed point was found or perfect recovery reached.
        iterations: ``(A,)``, evaluations of the map (damped steps plus root-finder calls),
            at most ``max_iter``; one more evaluation at the returned ``V`` gives ``q_hat``
            and ``residual``.
        status: ``(A,)`` strings, why each stopped: ``"fixed point"`` (the root
            finder met ``tol``), ``"perfect recovery"`` (every ``V_l < V_stop``) or
            ``"max_iter"`` (neither, within ``max_iter`` evaluations).
        residual: ``(A,)``, ``max_l |log F_l(V) - log V_l|`` at the returned ``V``
            (``nan`` for perfect recovery).
    """

    alpha: np.ndarray
    mmse: np.ndarray
    q_hat: np.ndarray
    converged: np.ndarray
    iterations: np.ndarray
    status: tuple = ()
    residual: np.ndarray | None = None


def deep_state_evolution_diagonal(key, alpha, rhos: Sequence[float], T: int = 2, beta: float = 1.0,
                                  c: float = 1.0, n_omega: int = 1000, n_inner: int = 2048,
                                  damping: float = 0.5, tol: float = 1e-6, max_iter: int = 200,
                                  V_floor: float = 1e-4, V_stop: float = 1e-3, warm_tol: float = 3e-2,
                                  V_start=None, n_nodes: Optional[int] = None) -> DeepSEResult:
    """Per-layer-RIE state evolution of two-layer deep attention: a **conjecture**, eq. (eq-deep-se).

    The fixed point, reached from ``V = (1, 1)`` (``alpha = 0``), of the map

        q = [[Q0_11 - V_1, sqrt(rho_1 rho_2)], [sqrt(rho_1 rho_2), Q0_22 - V_2]],
        q_hat = deep_q_hat(alpha, q, V),
        F_l(V) = mmse_{rho_l}(1 / q_hat_ll),

    i.e. each layer is denoised by its own RIE with the noise ``1/q_hat_ll`` and the
    off-diagonal ``q_hat_12`` is dropped. This is exact when the output channel
    gives ``q_hat_12 = 0`` (e.g. when every layer's attention map is observed,
    eq. (eq-deep-decouple)); for deep attention ``q_hat_12 != 0`` and the prior term
    couples the layers through a spherical integral that the book does not solve.
    With common random numbers (the same ``key`` at every call) ``F`` is a smooth
    deterministic function of ``V``, so the fixed point is solved for, in two stages:
    damped steps ``V <- (1 - damping) F(V) + damping V`` until the relative change
    is below ``warm_tol``, then Powell's hybrid method (``scipy.optimize.root``) on
    ``log F(V) = log V``. Near the perfect-recovery threshold the damped map's
    contraction factor tends to one, so the damped steps alone would need hundreds
    of calls; if the root finder fails, or lands below ``V_stop``, the damped steps
    go on until every ``V_l < V_stop`` (perfect recovery) or ``max_iter``.

    Args:
        key: ``jax.random`` key for :func:`deep_q_hat`.
        alpha: scalar or 1-d array, ``>= 0``.
        rhos: ``(rho_1, rho_2)``.
        T, beta, c, n_omega, n_inner: as :func:`deep_q_hat`. The self-normalised
            estimate of ``q_hat_11`` is biased upwards at small ``V`` unless
            ``n_inner`` is large (chapter 7 measures it): hence the default 2048.
        damping: fraction of the old ``V`` kept in the damped steps, in ``[0, 1)``.
        tol: relative tolerance of the root finder on ``V`` (``xtol``), ``> 0``.
        max_iter: most evaluations of ``F`` in the iteration for one ``alpha``, ``>= 1``
            (the root finder is stopped there too).
        V_floor: smallest ``V`` used in the channel (the Monte Carlo is unreliable below).
        V_stop: once every ``V_l < V_stop`` the iteration is taken to go to perfect
            recovery and stops.
        warm_tol: relative change at which the damped steps hand over to the root finder.
        V_start: optional ``(V_1, V_2)`` start instead of ``(1, 1)`` (continuation along
            increasing ``alpha``: the map is monotone, so from above any fixed point the
            damped steps stay above the largest one).
        n_nodes: as :func:`deep_q_hat`: ``None`` for the inner Monte Carlo, an integer for the
            Gauss-Hermite rule (then ``n_inner`` is not used).

    Returns:
        :class:`DeepSEResult`; ``status`` says why each ``alpha`` stopped.

    Chapter 7.
    """
    from scipy.optimize import root

    from .rmt import mmse_denoising

    key = _checks.prng_key("key", key)
    rhos = _rhos(rhos)
    if len(rhos) != 2:
        raise ValueError(f"rhos must hold two width ratios (L = 2), got {rhos!r}")
    T, beta, c, n_omega, n_inner = _channel_settings(T, beta, c, n_omega, n_inner)
    n_nodes = _node_count(T, n_nodes)
    damping = _checks.nonnegative("damping", damping)
    if damping >= 1:
        raise ValueError(f"damping must be in [0, 1), got {damping!r}")
    max_iter = _checks.integer_at_least("max_iter", max_iter, 1)
    tol = _checks.positive("tol", tol)
    warm_tol = _checks.positive("warm_tol", warm_tol)
    V_floor = _checks.positive("V_floor", V_floor)
    V_stop = _checks.positive("V_stop", V_stop)
    if V_floor >= 1:
        raise ValueError(f"V_floor must be in (0, 1) (the error at alpha = 0 is 1), got {V_floor!r}")
    if isinstance(alpha, (bool, np.bool_)):
        raise _checks.ArgumentTypeError(f"alpha must be a scalar or 1-d array in [0, inf), got {alpha!r}")
    _checks.real_array("alpha", alpha, ndim=(0, 1))
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if a.ndim != 1 or np.any(a < 0) or not np.all(np.isfinite(a)):
        raise ValueError("alpha must be a scalar or 1-d array in [0, inf)")
    if V_start is not None:
        _checks.real_array("V_start", V_start, ndim=1)
    start = np.ones(2) if V_start is None else np.asarray(V_start, dtype=float)
    if start.shape != (2,) or np.any(~(start > 0)) or np.any(start > 1):
        raise ValueError(f"V_start must be two errors (V_1, V_2) in (0, 1] (the error at alpha = 0 is 1; "
                         f"above it q is not an overlap matrix), got {V_start!r}")
    Q0 = limit_overlap_matrix(rhos)
    out_V = np.ones((a.size, 2))
    out_qh = np.zeros((a.size, 2, 2))
    conv = np.zeros(a.size, dtype=bool)
    its = np.zeros(a.size, dtype=int)
    status = ["fixed point"] * a.size
    resid = np.full(a.size, np.nan)
    for idx, al in enumerate(a):
        if al == 0:
            conv[idx], resid[idx] = True, 0.0
            continue
        calls = [0]

        def F(V, al=al, calls=calls):
            calls[0] += 1
            # (above V_l = 1, q = Q0 - diag(V) is no overlap matrix: its determinant turns negative;
            # the root finder, stepping in log V, may probe there, and F is flat at its value at 1)
            Vc = np.clip(V, V_floor, 1.0)
            qh = deep_q_hat(key, al, Q0 - np.diag(Vc), tuple(Vc), T=T, beta=beta, c=c,
                            n_omega=n_omega, n_inner=n_inner, n_nodes=n_nodes).q_hat
            return np.array([mmse_denoising(1.0 / max(qh[l, l], 1e-12), rhos[l]) for l in range(2)]), qh

        def damped(V, until, calls=calls):
            while calls[0] < max_iter:
                new = (1 - damping) * F(V)[0] + damping * V
                change = np.max(np.abs(new - V) / np.maximum(V, V_floor))
                V = new
                if np.all(V < V_stop) or change < until:
                    break
            return V

        V = damped(start.copy(), warm_tol)
        state = "max_iter"
        if np.all(V < V_stop):
            state = "perfect recovery"
        elif calls[0] < max_iter:
            def G(u, calls=calls):
                if calls[0] >= max_iter:  # (hybr's maxfev does not count its probes: the budget is ours)
                    raise _OutOfCalls
                return np.log(np.maximum(F(np.exp(u))[0], 1e-300)) - u

            try:
                sol = root(G, np.log(V), method="hybr",
                           options=dict(xtol=tol, maxfev=max(max_iter - calls[0], 1)))
                Vr, found = np.exp(sol.x), sol.success
            except _OutOfCalls:
                Vr, found = V, False
            if found and np.all(Vr >= V_stop):
                V, state = Vr, "fixed point"
            else:  # no root above V_stop: the damped steps decide
                V = damped(V, 0.0)
                if np.all(V < V_stop):
                    state = "perfect recovery"
        its[idx] = calls[0]  # (at most max_iter; the evaluation below reports q_hat and the residual)
        Fv, qh = F(V)
        if state != "perfect recovery":
            resid[idx] = float(np.max(np.abs(np.log(Fv) - np.log(V))))
        out_V[idx], out_qh[idx] = V, qh
        status[idx], conv[idx] = state, state != "max_iter"
    return DeepSEResult(a, out_V, out_qh, conv, its, tuple(status), resid)


def deep_log_zout(D, omega1, omega2, zeta, V, T: int = 2, beta: float = 1.0, c: float = 1.0):
    """Monte Carlo ``log Z_out`` of two-layer deep attention for one sample, eq. (eq-deep-Zout).

    Args:
        D: ``(K - 1,)``, the output as ``A_ab - A_TT`` over ``a <= b``, ``(a, b) != (T, T)``.
        omega1, omega2: ``(K,)`` upper triangles (order of ``np.triu_indices(T)``) of the means.
        zeta: ``(M, K)`` standard normals: the first layer's indices are
            ``omega1 + sqrt(V_1 C) zeta``.
        V: ``(V_1, V_2)``, each ``> 0``.
        T, beta, c: tokens, inverse temperature, skip strength.

    Returns:
        scalar ``log (1/M) sum_j N(D; Pi L_{B_j} omega2, V_2 Pi L_{B_j} C L_{B_j}^T Pi^T)``.

    Raises:
        ValueError: shapes that do not match ``T``, an empty ``zeta`` (``M = 0``), entries that
            are not finite, ``V_l <= 0``, ``beta <= 0``, ``c < 0``, or a result that is not
            finite (a singular ``B``: ``c = 0`` with a singular attention map).
    """
    T = _checks.integer_at_least("T", T, 2)
    beta = _checks.positive("beta", beta)
    c = _checks.nonnegative("c", c)
    K = T * (T + 1) // 2
    for name, val, n in (("D", D, K - 1), ("omega1", omega1, K), ("omega2", omega2, K)):
        if np.shape(val) != (n,):
            raise ValueError(f"{name} must have shape ({n},) for T = {T}, got {np.shape(val)}")
        _checks.real_array(name, val, ndim=1)
    if np.ndim(zeta) != 2 or np.shape(zeta)[1] != K or np.shape(zeta)[0] < 1:
        raise ValueError(f"zeta must have shape (M, {K}) with M >= 1, got {np.shape(zeta)}")
    _checks.real_array("zeta", zeta, ndim=2)
    V1, V2 = _two_errors(V)
    out = _log_zout_one(jnp.asarray(D), jnp.asarray(omega1), jnp.asarray(omega2), jnp.asarray(zeta),
                        V1, V2, beta, c, T)
    if not bool(jnp.isfinite(out)):
        raise ValueError(f"deep_log_zout is not finite ({float(out)}): the covariance of D is singular for some "
                         f"zeta (B = c I + softmax singular at c = {c}); use c > 0")
    return out
