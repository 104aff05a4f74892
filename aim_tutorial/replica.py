"""The replica computation: Gaussian-equivalent indices and the matrix-denoising free entropy.

Chapter 3 (``book/03_replica.md``) teaches this module. Two ingredients of the
replica-symmetric free entropy live here:

1. **Gaussian equivalence of the attention indices.** For ``k`` students
   ``S^1..S^k`` with overlaps ``Q^{ab} = Tr(S^a S^b)/d``, the indices
   ``h^a_ij = Tr(Z_ij S^a)`` are, at large ``d``, jointly Gaussian with
   ``Cov(h^a_ij, h^b_ij) = Q^{ab} C_ij``, ``C_ii = 2``, ``C_ij = 1`` (``i != j``),
   distinct upper-triangle entries independent, eq. (rep-gauss-eq).
   :func:`index_variances` gives ``C`` and :func:`sample_equivalent_indices`
   samples the Gaussian model.

2. **The prior term** ``psi_rho(q_hat)``: the free entropy of the denoising
   problem ``Y = sqrt(q_hat) S + Z`` (``Z`` GOE), computed here *without*
   the MMSE, from the logarithmic energy of the spectral density (the
   large-``d`` HCIZ integral / Dyson entropy):

       I(Delta) = Sigma(mu_Delta)/2 - log(Delta)/4 + 1/8,        eq. (rep-mi)
       psi_rho(q_hat) = q_hat Q0 / 4 - I(1/q_hat),               eq. (rep-psi)

   with ``Sigma(mu) = int int log|x - y| mu(x) mu(y) dx dy``. Its derivative is
   ``(Q0 - mmse_rho(1/q_hat))/4`` (the I-MMSE relation, eq. (rep-dpsi)); the chapter checks this
   by finite differences, an independent check of the RIE MMSE.

The spectral density ``mu_Delta`` of ``S + sqrt(Delta) Z`` is found from the cubic
equation for its Stieltjes transform (eq. (eq-rmt-cubic) of chapter 2), its support from the
discriminant of that cubic, and the double integral by a Chebyshev expansion
of ``log|cos t - cos s|`` on each interval of the support (spectrally accurate).

References: Barbier, Krzakala, Macris, Miolane, Zdeborova, PNAS 116 (2019) 5451
(GLM); Maillard, Troiani, Martin, Krzakala, Zdeborova, arXiv 2408.03733
(matrix GLM with an RIE prior); Matytsin, Nucl. Phys. B 411 (1994) 805 and
Guionnet, Zeitouni, J. Funct. Anal. 188 (2002) 461 (HCIZ asymptotics);
Boncoraglio, Troiani, Erba, Zdeborova, arXiv 2506.01582 (attention-indexed models).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.fft

from . import _checks, rmt

__all__ = [
    "DenoisingSpectrum",
    "denoising_free_entropy",
    "denoising_mutual_information",
    "denoising_spectrum",
    "index_variances",
    "log_energy",
    "sample_equivalent_indices",
    "upper_triangle",
]


# ---------------------------------------------------------------------------
# 1. Gaussian equivalence of the attention indices


def upper_triangle(h):
    """The ``T(T+1)/2`` entries ``h_ab``, ``a <= b``, in row-major order.

    Args:
        h: array of shape ``(..., T, T)``.

    Returns:
        array of shape ``(..., T(T+1)/2)``; the order is that of ``np.triu_indices(T)``.

    Example:
        >>> import numpy as np, aim_tutorial as aim
        >>> aim.replica.upper_triangle(np.arange(4.0).reshape(2, 2)).tolist()
        [0.0, 1.0, 3.0]
    """
    _checks.real_array("h", h, min_ndim=2)
    shape = np.shape(h)
    if shape[-1] != shape[-2]:
        raise ValueError(f"h must have shape (..., T, T), got shape {shape}")
    i, j = np.triu_indices(shape[-1])
    return h[..., i, j]


def index_variances(T: int) -> np.ndarray:
    """Diagonal of ``C``: the covariance structure of the attention indices, eq. (rep-gauss-eq).

    ``Cov(h_ab, h'_ab) = q C_ab`` with ``C_aa = 2``, ``C_ab = 1`` (``a < b``), in
    the order of :func:`upper_triangle`; distinct entries are uncorrelated, so
    ``C`` is diagonal in these coordinates.

    Args:
        T: tokens a sequence, ``T >= 1``.

    Returns:
        array of shape ``(T(T+1)/2,)``.

    Example:
        >>> import aim_tutorial as aim
        >>> aim.replica.index_variances(2).tolist()
        [2.0, 1.0, 2.0]
    """
    T = _checks.integer_at_least("T", T, 1)
    i, j = np.triu_indices(T)
    return np.where(i == j, 2.0, 1.0)


def sample_equivalent_indices(key: jax.Array, Q, n: int, T: int) -> jax.Array:
    """Sample the Gaussian-equivalent indices of ``k`` replicas, eq. (rep-gauss-eq).

    ``h^a = sum_b L_ab zeta^b`` with ``L L^T = Q`` and ``zeta^b`` iid symmetric Gaussian
    matrices (``Var zeta_ii = 2``, ``Var zeta_ij = 1``), so that
    ``Cov(h^a_ij, h^b_ij) = Q_ab C_ij``.

    Args:
        key: a ``jax.random`` key.
        Q: overlap matrix, shape ``(k, k)``, symmetric positive semi-definite.
        n: samples, ``n >= 1``.
        T: tokens a sequence, ``T >= 1``.

    Returns:
        array of shape ``(n, k, T, T)``, symmetric in its last two axes.

    Example:
        >>> import jax, numpy as np, aim_tutorial as aim
        >>> h = aim.replica.sample_equivalent_indices(jax.random.key(0), np.eye(2), 5, 3)
        >>> h.shape
        (5, 2, 3, 3)
    """
    key = _checks.prng_key("key", key)
    n = _checks.integer_at_least("n", n, 1)
    T = _checks.integer_at_least("T", T, 1)
    _checks.square_symmetric("Q", Q)
    Qn = np.asarray(Q, dtype=float)
    w, U = np.linalg.eigh(Qn)
    if w.min() < -1e-10 * max(1.0, abs(w).max()):
        raise ValueError(f"Q must be positive semi-definite, got smallest eigenvalue {w.min():.3g}")
    L = U * np.sqrt(np.clip(w, 0.0, None))  # L L^T = Q
    k = Qn.shape[0]
    G = jax.random.normal(key, (n, k, T, T))
    zeta = (G + jnp.swapaxes(G, -1, -2)) / jnp.sqrt(2.0)
    return jnp.einsum("ab,nbij->naij", jnp.asarray(L), zeta)


# ---------------------------------------------------------------------------
# 2. The spectral density of Y = S + sqrt(Delta) Z and its logarithmic energy


def _discriminant_poly(delta, rho):
    """Discriminant of the cubic in G as a polynomial in x (numpy.polynomial, low first)."""
    P = np.polynomial.Polynomial
    s = np.sqrt(rho)
    a = P([delta / s])
    b = P([-delta, -1 / s])
    c = P([1 / s - s, 1.0])
    d = P([-1.0])
    return 18 * a * b * c * d - 4 * b**3 * d + b**2 * c**2 - 4 * a * c**3 - 27 * a**2 * d**2


def _support(delta, rho):
    """The intervals of the support, from :func:`aim_tutorial.rmt.support_edges` (chapter 2)."""
    return np.array(rmt.support_edges(delta, rho), dtype=float)


def _split_at_necks(intervals, delta, rho):
    """Split the intervals at their necks: where the two intervals of the support have just merged.

    Just past the merging of two intervals the density has a thin neck (a deep, narrow minimum)
    at the real part of a complex pair of roots of the discriminant close to the real axis; the
    Chebyshev rule of :func:`denoising_spectrum` converges only as slowly as that pair is close.
    Split there, the density is smooth on each piece up to the split point, where it does not
    vanish: the midpoint rule then gets the endpoint correction of Euler-Maclaurin (see
    :func:`_end_corrected_weights`). Returns the new intervals, or None when there is no neck.
    """
    roots = _discriminant_poly(delta, rho).roots()
    cut = []
    for lo, hi in intervals:
        R = 0.5 * (hi - lo)
        for r in roots:
            if r.imag > 0 and lo + 1e-3 * R < r.real < hi - 1e-3 * R and r.imag < 0.05 * R:
                cut.append(r.real)
    if not cut:
        return None
    out = []
    for lo, hi in intervals:
        pts = [lo, *sorted(c for c in cut if lo < c < hi), hi]
        out.extend(itertools.pairwise(pts))
    return np.array(out)


def _end_corrected_weights(weights, intervals, delta, rho, n_nodes):
    """Subtract the Euler-Maclaurin term ``(h^2/24) R mu(end)`` at interval ends where ``mu != 0``.

    The midpoint rule in ``theta`` for ``f = mu(c + R cos theta) R sin theta`` has the error
    ``(h^2/24)(f'(pi) - f'(0)) + O(h^4)``, with ``f'(0) = R mu(c + R)`` and ``f'(pi) = -R mu(c - R)``;
    both vanish at the square-root edges of the support, not at a split point.
    """
    c = intervals.mean(axis=1)
    R = 0.5 * (intervals[:, 1] - intervals[:, 0])
    h = np.pi / n_nodes
    right = _density(c + R, delta, rho)  # theta -> 0
    left = _density(c - R, delta, rho)  # theta -> pi
    w = weights.copy()
    w[:, 0] -= h * h / 24 * R * right
    w[:, -1] -= h * h / 24 * R * left
    return w


def _density(x, delta, rho):
    """``mu_Delta(x)``: chapter 2's density, :func:`aim_tutorial.rmt.spectral_density`."""
    return rmt.spectral_density(np.asarray(x, dtype=float), delta, rho)


_MAX_NODES = 16384


class DenoisingSpectrum(NamedTuple):
    """The spectral density ``mu_Delta`` of ``Y = S + sqrt(Delta) Z`` on Chebyshev nodes.

    Attributes:
        intervals: support, shape ``(m, 2)`` (``m = 1`` or ``2`` intervals).
        x: nodes, shape ``(m, N)``; ``x = c + R cos(theta)`` on each interval.
        weights: quadrature weights ``mu(x) dx`` at the nodes, shape ``(m, N)``
            (they sum to 1).
        density: ``mu_Delta(x)`` at the nodes, shape ``(m, N)``.
        theta: the angles, midpoints ``(j + 1/2) pi / N``, shape ``(N,)``.
        mass_error: ``|1 - sum(weights)|``, the quadrature's own error gauge.
        converged: whether ``mass_error <= tol``.
    """

    intervals: np.ndarray
    x: np.ndarray
    weights: np.ndarray
    density: np.ndarray
    theta: np.ndarray
    mass_error: float
    converged: bool


def denoising_spectrum(delta: float, rho: float, n_nodes: int = 256, tol: float = 1e-10) -> DenoisingSpectrum:
    """Spectral density of ``Y = S + sqrt(delta) Z`` on Chebyshev nodes of its support.

    ``S`` is the teacher (``sqrt(rho)`` times Marchenko-Pastur), ``Z`` is GOE
    (semicircle on ``[-2, 2]``); ``mu = Im G(x - i0)/pi`` with ``G`` a root of
    ``(delta/s) G^3 - (x/s + delta) G^2 + (x + 1/s - s) G - 1 = 0``, ``s = sqrt(rho)``.
    On each interval ``[c - R, c + R]`` of the support, ``x = c + R cos theta``;
    ``mu(x) R sin(theta)`` is smooth and periodic in ``theta`` (square-root
    edges), so the midpoint rule in ``theta`` converges exponentially.

    Args:
        delta: noise variance, ``delta > 0``.
        rho: width ratio, ``rho > 0``.
        n_nodes: initial nodes per interval, ``>= 8``; doubled (up to 16384)
            until the total mass is 1 within ``tol``. Many nodes are needed only
            near the ``delta`` where the support splits in two (a thin neck).
        tol: tolerance on ``|1 - mass|``, ``> 0``.

    Returns:
        :class:`DenoisingSpectrum`; ``converged`` is False if the mass is
        still off by more than ``tol`` at 16384 nodes (``mass_error`` says by how much).

    Example:
        >>> import aim_tutorial as aim
        >>> sp = aim.replica.denoising_spectrum(1.0, 0.5)
        >>> round(float(sp.weights.sum()), 10)
        1.0

    Chapter 3, eq. (rep-psi); the density itself is chapter 2's.
    """
    delta = _checks.positive("delta", delta)
    rho = _checks.positive("rho", rho)
    n_nodes = _checks.integer_at_least("n_nodes", n_nodes, 8)
    tol = _checks.positive("tol", tol)
    intervals = _support(delta, rho)
    first = _spectrum_on(intervals, delta, rho, n_nodes, tol, corrected=False)
    if first.converged:
        return first
    # a thin neck (just past the merging of two intervals): split there and retry
    split = _split_at_necks(intervals, delta, rho)
    if split is None:
        return first
    second = _spectrum_on(split, delta, rho, n_nodes, tol, corrected=True)
    return second if second.mass_error < first.mass_error else first


def _spectrum_on(intervals, delta, rho, n_nodes, tol, *, corrected):
    """The doubling loop of :func:`denoising_spectrum` on given intervals."""
    c = intervals.mean(axis=1, keepdims=True)
    R = (intervals[:, 1:] - intervals[:, :1]) / 2
    while True:
        theta = (np.arange(n_nodes) + 0.5) * np.pi / n_nodes
        x = c + R * np.cos(theta)
        dens = _density(x, delta, rho)
        weights = dens * R * np.sin(theta) * (np.pi / n_nodes)
        if corrected:
            weights = _end_corrected_weights(weights, intervals, delta, rho, n_nodes)
        err = abs(1.0 - float(weights.sum()))
        if err <= tol or n_nodes >= _MAX_NODES:
            return DenoisingSpectrum(intervals, x, weights, dens, theta, err, err <= tol)
        n_nodes *= 2


def _mmse_from_spectrum(sp: DenoisingSpectrum, delta: float) -> float:
    """``delta - (4 pi^2/3) delta^2 int mu^3``: chapter 2's MMSE, on this module's nodes (a cross-check)."""
    return float(delta - 4 * np.pi**2 / 3 * delta**2 * np.sum(sp.density**2 * sp.weights))


def log_energy(delta: float, rho: float, n_nodes: int = 256) -> float:
    """Logarithmic energy ``Sigma(mu_Delta) = int int log|x - y| mu(x) mu(y) dx dy``, eq. (rep-mi).

    On one interval ``[c - R, c + R]`` with ``x = c + R cos t``, ``y = c + R cos s``,
    ``log|cos t - cos s| = -log 2 - sum_k (2/k) cos(k t) cos(k s)``, so with
    ``f(t) = mu(x) R sin t`` of mass ``m`` and cosine coefficients
    ``f_k = int_0^pi f(t) cos(k t) dt``:
    ``int int = m^2 (log R - log 2) - sum_k (2/k) f_k^2``. Pairs of distinct
    intervals are smooth and integrated by the product rule.

    Args:
        delta: noise variance, ``delta > 0``.
        rho: width ratio, ``rho > 0``.
        n_nodes: initial nodes per interval (refined by :func:`denoising_spectrum`;
            the error decays exponentially in it).

    Returns:
        ``Sigma(mu_Delta)``; for the semicircle of variance ``delta`` (``rho`` small
        and no signal) it is ``log(delta)/2 - 1/4``.

    Example:
        >>> import aim_tutorial as aim
        >>> round(aim.replica.log_energy(1.0, 0.5), 4)
        0.0591

    Chapter 3, eq. (rep-mi). Reference: Voiculescu's free entropy; Guionnet
    and Zeitouni (2002) for the spherical-integral asymptotics it enters.
    """
    sp = denoising_spectrum(delta, rho, n_nodes)
    if not sp.converged:
        raise RuntimeError(
            f"the spectral quadrature did not converge at delta={delta}, rho={rho} "
            f"(mass error {sp.mass_error:.2e} at {sp.theta.size} nodes)"
        )
    R = (sp.intervals[:, 1] - sp.intervals[:, 0]) / 2
    N = sp.theta.size
    k = np.arange(1, N)
    total = 0.0
    for i in range(len(R)):
        w = sp.weights[i]
        m = w.sum()
        fk = scipy.fft.dct(w, type=2)[1:] / 2  # f_k = sum_j w_j cos(k theta_j)
        total += m * m * (np.log(R[i]) - np.log(2.0)) - np.sum(2.0 / k * fk * fk)
        for j in range(i + 1, len(R)):  # the pair (i, j) and its mirror (j, i)
            total += 2.0 * _pair_energy(sp.x[i], w, sp.x[j], sp.weights[j])
    return float(total)


def _pair_energy(xi, wi, xj, wj, block: int = 2048) -> float:
    """``sum_ab wi_a wj_b log|xi_a - xj_b|`` by blocks of rows (bounded memory at 16384 nodes)."""
    out = 0.0
    for start in range(0, xi.size, block):
        sl = slice(start, start + block)
        out += float(wi[sl] @ np.log(np.abs(xi[sl, None] - xj[None, :])) @ wj)
    return out


def denoising_mutual_information(delta: float, rho: float, n_nodes: int = 256) -> float:
    """Mutual information ``lim I(S; Y)/d^2`` of ``Y = S + sqrt(delta) Z``, eq. (rep-mi).

    ``I = Sigma(mu_Delta)/2 - log(delta)/4 + 1/8``: the entropy of a rotation-
    invariant matrix is, to leading order ``d^2``, half the logarithmic energy of
    its spectrum (the Vandermonde Jacobian), and the GOE noise of variance
    ``delta`` has ``Sigma = log(delta)/2 - 1/4``.

    Args:
        delta: noise variance, ``delta > 0``.
        rho: width ratio, ``rho > 0``.
        n_nodes: nodes per interval.

    Returns:
        the mutual information per ``d^2`` (nats), ``>= 0``; it behaves like
        ``1/(4 delta)`` as ``delta -> infinity``. Above ``delta = 1e4 max(1, rho^-1/2)``
        (where the three terms above cancel to ``1e-16 log(delta)`` against
        ``1/(4 delta)``: at ``delta = 1e16`` the formula gave 0 or a negative
        number) the large-``delta`` expansion is used, the integral of the I-MMSE
        relation ``dI/d(1/delta) = mmse/4`` with ``mmse = 1/(1 + q) - q^2/rho +
        (4 rho - 1) q^3/rho^2 + O(q^4)``, ``q = 1/delta``:
        ``I = (log(1 + q) - q^3/(3 rho) + (4 rho - 1) q^4/(4 rho^2))/4``.

    Example:
        >>> import aim_tutorial as aim
        >>> 0 < aim.replica.denoising_mutual_information(1.0, 0.5) < 0.25
        True

    Chapter 3, eq. (rep-mi).
    """
    delta = _checks.positive("delta", delta)
    rho = _checks.positive("rho", rho)
    if delta > _MI_LARGE_DELTA * max(1.0, rho**-0.5):
        q = 1.0 / delta
        return 0.25 * (float(np.log1p(q)) - q**3 / (3 * rho) + (4 * rho - 1) * q**4 / (4 * rho**2))
    sigma = log_energy(delta, rho, n_nodes)
    return 0.5 * sigma - 0.25 * float(np.log(delta)) + 0.125


# above this delta (times max(1, rho^-1/2)) the mutual information is its large-delta expansion:
# there the log-energy formula has lost ~1e-16 delta log(delta) (relative) and the expansion's
# error is O(delta^-4 rho^-3) (relative)
_MI_LARGE_DELTA = 1e4


def denoising_free_entropy(q_hat: float, rho: float, n_nodes: int = 256) -> float:
    """Prior term ``psi_rho(q_hat)`` of the replica free entropy, eq. (rep-psi).

    ``psi_rho(q_hat) = lim (1/d^2) E log int dP(S) exp(-(d q_hat/4) Tr S^2 +
    (d q_hat/2) Tr S S0 + (d sqrt(q_hat)/2) Tr Z S)`` equals
    ``q_hat Q0/4 - I(1/q_hat)`` with ``Q0 = 1 + rho`` and ``I`` from
    :func:`denoising_mutual_information`; ``psi_rho(0) = 0``. Its derivative is
    ``(Q0 - mmse_rho(1/q_hat))/4``.

    Args:
        q_hat: conjugate overlap (signal-to-noise ratio), ``q_hat >= 0``.
        rho: width ratio, ``rho > 0``.
        n_nodes: nodes per interval.

    Returns:
        ``psi_rho(q_hat)``, a convex increasing function.

    Example:
        >>> import aim_tutorial as aim
        >>> aim.replica.denoising_free_entropy(0.0, 0.5)
        0.0

    Chapter 3, eq. (rep-psi). Reference: Maillard et al., arXiv 2408.03733.
    """
    q_hat = _checks.nonnegative("q_hat", q_hat)
    rho = _checks.positive("rho", rho)
    if q_hat == 0.0:
        return 0.0
    return q_hat * (1.0 + rho) / 4.0 - denoising_mutual_information(1.0 / q_hat, rho, n_nodes)
