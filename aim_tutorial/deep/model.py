"""Deep attention, the model: the teachers, the output, its inversion and the exact moments.

The teacher has one matrix a layer, ``S_l = W_l W_l^T / sqrt(r_l d)``, and the output is
eq. (eq-deep-aim) of chapter 7 (:func:`deep_output`). When every layer's attention map is
observed, the indices are recovered up to one constant a layer (:func:`observed_maps_to_indices`).
The joint indices have exact second moments, ``Q kron C`` with ``Q_lm = Tr(S_l S_m)/d``
(:func:`overlap_matrix`, :func:`index_covariance`), whose limit for independent teachers is
:func:`limit_overlap_matrix`; :func:`deep_alpha_count` is the counting threshold.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from .._students import array as _array
from .._students import scalar as _scalar
from ..counting import alpha_scale, dof_fraction
from ._common import finite_output as _finite_output
from ._common import unchecked_output as _deep_output
from ._common import width_ratios as _rhos

__all__ = [
    "deep_alpha_count",
    "deep_output",
    "index_covariance",
    "limit_overlap_matrix",
    "observed_maps_to_indices",
    "overlap_matrix",
    "sample_deep_teacher",
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
    from ..model import _sample_teachers

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
