"""State evolution: the Bayes-optimal error of single-layer attention-indexed models.

Chapter 4 (``book/04_bayes_optimal_error.md``) teaches this module; chapter 3
(``book/03_replica.md``) derives the equations. Labels ``bo-*`` are chapter 4's,
``rep-*`` chapter 3's. With ``Q0 = 1 + rho`` and the overlap ``q``, the
replica-symmetric fixed point is

    q = Q0 - mmse_rho(1 / q_hat),
    q_hat = 2 alpha E[2 sum_a g_aa^2 + sum_{a<b} g_ab^2] =: alpha H(q),    eq. (bo-se)

with ``g = grad log Z_out`` at ``V = Q0 - q`` (:mod:`aim_tutorial.channels`).
``q_hat`` is proportional to ``alpha`` at fixed ``q``, so with the error
``m = Q0 - q`` and ``Delta(m)`` the inverse of ``mmse_rho`` the fixed points at
``alpha`` are the roots in ``m`` of

    F(m) = alpha H(Q0 - m) Delta(m) - 1,                                   eq. (bo-root)

solved directly (no iteration, hence no critical slowing down near a
transition). Among several roots the one of largest free entropy

    Phi(q, q_hat) = -q q_hat / 4 + psi_rho(q_hat) + alpha E log Z_out,     eq. (rep-phi)
    psi_rho'(q_hat) = (Q0 - mmse_rho(1/q_hat)) / 4,                         eq. (rep-dpsi)

is chosen. ``H`` per channel:

- softmax (any ``T``, any ``beta > 0``): ``H = (T^2 + T - 2) / (m + Delta_h/2)``;
- linear: ``H = (T^2 + T) / (m + Delta_h/2)``;
- hardmax (``T = 2``, eq. (bo-hardmax)): ``H = 2 G(t) / (3 V')`` with ``V' = m + Delta_h/2``,
  ``t = q / V'`` and ``G`` a two-dimensional Gaussian integral of the score,
  computed once by deterministic quadrature in the rescaled variables
  ``kappa_a = u_a / sqrt(3 V')`` (cached);
- generic (a user function ``g``, Gaussian noise on ``y``, ``T <= 4``): ``H`` by
  Monte Carlo with common random numbers (:func:`generic_state_evolution`).

Reference: Boncoraglio, Troiani, Erba, Zdeborova, arXiv 2506.01582 (the replica
formula and its state evolution); Maillard et al., arXiv 2408.03733 (the
matrix-denoising part).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.interpolate import CubicSpline

from . import _checks
from . import channels as _ch

SE_CHANNELS = ("softmax", "linear", "hardmax")


def _mmse(delta, rho):
    from .rmt import mmse_denoising

    return mmse_denoising(delta, rho)


# ---------------------------------------------------------------------------
# results


class SEResult(NamedTuple):
    """Fixed point of the state evolution (arrays of the shape of ``alpha``; floats for a scalar).

    Attributes:
        alpha: sample complexity ``n / d^2``.
        mmse: Bayes-optimal error ``Q0 - q``.
        q: overlap.
        q_hat: conjugate overlap (``inf`` at perfect recovery).
        converged: whether the root was found to tolerance (``|F| < 1e-9``, or perfect recovery).
        iterations: bisection steps used.
        n_fixed_points: number of fixed points found at this ``alpha``.
        phi: free entropy at the chosen fixed point, up to an ``alpha``-independent constant
            (``inf`` at perfect recovery of the noiseless softmax/linear channels).
    """

    alpha: np.ndarray
    mmse: np.ndarray
    q: np.ndarray
    q_hat: np.ndarray
    converged: np.ndarray
    iterations: np.ndarray
    n_fixed_points: np.ndarray
    phi: np.ndarray


# ---------------------------------------------------------------------------
# thresholds


def alpha_perfect_recovery(rho: float, T: int = 2) -> float:
    """Perfect-recovery threshold of the noiseless softmax channel, eq. (bo-alpha-pr).

    ``alpha_PR = (2 rho - rho^2) / (T^2 + T - 2)`` for ``rho <= 1`` and
    ``1 / (T^2 + T - 2)`` for ``rho >= 1``: the ``d^2 (2 rho - rho^2)/2`` degrees of
    freedom of a rank-``rho d`` symmetric matrix (``d^2/2`` once it is full rank)
    against ``(T^2 + T - 2)/2`` linear measurements a sample.

    Args:
        rho: width ratio ``> 0``.
        T: tokens a sequence, ``>= 2``.

    Example:
        >>> import aim_tutorial as aim
        >>> aim.alpha_perfect_recovery(0.5, 2)
        0.1875

    Chapter 4, eq. (bo-alpha-pr).
    """
    rho = _checks.positive("rho", rho)
    T = _checks.integer_at_least("T", T, 2)
    dof = 2 * rho - rho * rho if rho <= 1 else 1.0
    return dof / (T * T + T - 2)


# ---------------------------------------------------------------------------
# the denoising side: Delta(m) = mmse^{-1}(m) and psi(q_hat), tabulated per rho

_LOG_DMIN, _LOG_DMAX, _N_DELTA = -6.0, 6.0, 241


class _DenoisingTable(NamedTuple):
    rho: float
    log_delta_of_log_m: CubicSpline  # log Delta as a function of log m
    psi_spline: CubicSpline  # antiderivative in u = log Delta of (Q0 - mmse) e^{-u} / 4
    u_max: float
    slope: float  # lim mmse/Delta at Delta -> 0
    log_m_min: float
    log_m_max: float


@functools.lru_cache(maxsize=64)
def _denoising_table(rho: float) -> _DenoisingTable:
    u = np.linspace(_LOG_DMIN * math.log(10), _LOG_DMAX * math.log(10), _N_DELTA)
    delta = np.exp(u)
    m = np.asarray(_mmse(delta, rho), dtype=float)
    m = np.where(delta > 1e3, np.minimum(m, 1.0 - 0.5 / delta), m)  # guard 1 - 1/Delta against rounding
    logm = np.log(m)
    if not np.all(np.diff(logm) > 0):
        # keep a strictly increasing table (rounding at the extremes)
        keep = np.concatenate([[True], np.diff(logm) > 0])
        logm, u_k = logm[keep], u[keep]
    else:
        u_k = u
    inv = CubicSpline(logm, u_k)
    Q0 = 1 + rho
    f = (Q0 - m) * np.exp(-u) / 4
    psi_spline = CubicSpline(u, f).antiderivative()
    slope = 2 * rho - rho * rho if rho <= 1 else 1.0
    return _DenoisingTable(rho, inv, psi_spline, float(u[-1]), slope, float(logm[0]), float(logm[-1]))


def _delta_of_m(tab: _DenoisingTable, m):
    """``Delta`` with ``mmse_rho(Delta) = m`` (vectorised, ``0 < m < 1``)."""
    m = np.asarray(m, dtype=float)
    lm = np.log(m)
    out = np.exp(tab.log_delta_of_log_m(np.clip(lm, tab.log_m_min, tab.log_m_max)))
    small = lm < tab.log_m_min
    out = np.where(small, m / tab.slope, out)
    big = lm > tab.log_m_max
    out = np.where(big, 1.0 / np.maximum(1.0 - m, 1e-300), out)
    return out


def _psi(tab: _DenoisingTable, q_hat):
    """``psi_rho(q_hat) = int_0^{q_hat} (Q0 - mmse(1/x))/4 dx`` (vectorised)."""
    q_hat = np.asarray(q_hat, dtype=float)
    Q0 = 1 + tab.rho
    u0 = -np.log(q_hat)
    tail = (Q0 - 1) * np.exp(-tab.u_max) / 4  # beyond the table, mmse ~ 1
    uc = np.clip(u0, _LOG_DMIN * math.log(10), tab.u_max)
    val = tab.psi_spline(tab.u_max) - tab.psi_spline(uc) + tail
    # below the table (q_hat > e^{12 ln 10}) mmse ~ slope * Delta
    lo = u0 < _LOG_DMIN * math.log(10)
    extra = Q0 / 4 * (q_hat - 10.0**(-_LOG_DMIN))
    return np.where(lo, val + extra, val)


def psi_denoising(q_hat, rho: float):
    """Free entropy of matrix denoising, ``psi_rho(q_hat) = int_0^{q_hat} (Q0 - mmse_rho(1/x))/4 dx``.

    Its derivative is ``(Q0 - mmse_rho(1/q_hat))/4``, eq. (rep-dpsi); normalised by ``psi(0) = 0``.

    Args:
        q_hat: ``>= 0``, scalar or array.
        rho: width ratio ``> 0``.

    Chapter 3, eqs. (rep-psi) and (rep-dpsi).
    """
    rho = _checks.positive("rho", rho)
    q = np.asarray(q_hat, dtype=float)
    if np.any(~(q >= 0)):
        raise ValueError("q_hat must be in [0, inf)")
    out = np.where(q > 0, _psi(_denoising_table(rho), np.maximum(q, 1e-300)), 0.0)
    return float(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------------
# hardmax T = 2: the score's second moment G(t) and E log Z_out, L(t), t = q / V'

_HM_T_SMALL = np.concatenate([[0.0], np.logspace(-6, 0, 49)])
_HM_T_LARGE = np.logspace(0, 9, 91)


def _hm_F(kappa1, kappa2):
    """Integrands over ``kappa = u / r`` of the hardmax tables, summed over the four outcomes.

    Returns ``(F_exact, F_published, F_log)``: ``sum_s Phi2 [2 (r g11)^2 + 2 (r g22)^2 + (r g12)^2]``
    for the exact and the published score, and ``sum_s Phi2 log Phi2``.
    """
    S1 = jnp.array([1.0, 1.0, -1.0, -1.0])
    S2 = jnp.array([1.0, -1.0, 1.0, -1.0])
    k1 = S1[:, None] * kappa1[None, :]
    k2 = S2[:, None] * kappa2[None, :]
    c = (S1 * S2 / 3.0)[:, None]
    sq = math.sqrt(8.0 / 9.0)
    logZ = _ch._log_phi2(k1, k2, jnp.broadcast_to(c, k1.shape), 32)
    l1 = _ch._log_npdf(k1) + jax.scipy.special.log_ndtr((k2 - c * k1) / sq)
    l2 = _ch._log_npdf(k2) + jax.scipy.special.log_ndtr((k1 - c * k2) / sq)
    # Phi2 (d_a / Phi2)(d_b / Phi2) = exp(l_a + l_b - logZ); (r g12)^2 = (s1 d1 + s2 d2)^2 / Phi2^2
    e11, e22, e12 = jnp.exp(2 * l1 - logZ), jnp.exp(2 * l2 - logZ), jnp.exp(l1 + l2 - logZ)
    f_ex = jnp.sum(3 * e11 + 3 * e22 + 2 * (S1 * S2)[:, None] * e12, axis=0)
    lp = -(k1 * k1 - 2 * c * k1 * k2 + k2 * k2) / (2 * sq * sq) - math.log(2 * math.pi * sq)
    f_pub = jnp.sum((4 + (S1 + S2)[:, None] ** 2) * jnp.exp(2 * lp - logZ), axis=0)
    f_l = jnp.sum(jnp.exp(logZ) * logZ, axis=0)
    return f_ex, f_pub, f_l


_hm_F_jit = jax.jit(_hm_F)

_KAPPA_BAND = 12.0  # beyond |kappa_1|, |kappa_2| > 12 every integrand is below e^-70


def _composite_nodes():
    """Nodes and weights on the real line: unit panels on [-12, 12], geometric panels beyond."""
    x6, w6 = np.polynomial.legendre.leggauss(6)
    x5, w5 = np.polynomial.legendre.leggauss(5)
    inner = np.arange(-_KAPPA_BAND, _KAPPA_BAND + 1e-9, 1.0)
    outer = _KAPPA_BAND * 1.5 ** np.arange(0, 40)
    outer = outer[outer < 4e5]

    def panels(brk, x, w):
        a, b = brk[:-1], brk[1:]
        return ((a + b)[:, None] / 2 + (b - a)[:, None] / 2 * x).ravel(), ((b - a)[:, None] / 2 * w).ravel()

    xi, wi = panels(inner, x6, w6)
    xo, wo = panels(outer, x5, w5)
    return np.concatenate([-xo[::-1], xi, xo]), np.concatenate([wo[::-1], wi, wo])


def _gauss2_logpdf(k1, k2, t):
    # covariance t [[1, 1/3], [1/3, 1]]: det = t^2 (8/9), inverse = (9/8)/t [[1, -1/3], [-1/3, 1]]
    quad = (9.0 / 8.0) * (k1 * k1 - (2.0 / 3.0) * k1 * k2 + k2 * k2) / t
    return -0.5 * quad - math.log(2 * math.pi) - 0.5 * np.log(t * t * 8.0 / 9.0)


class _HardmaxTable(NamedTuple):
    G_exact: Callable
    G_published: Callable
    L: Callable
    checks: dict


@functools.lru_cache(maxsize=1)
def _hardmax_table() -> _HardmaxTable:
    """``G(t)`` (exact and published score) and ``L(t) = E log Z_out``, tabulated once.

    ``t <= 1``: 40 x 40 Gauss-Hermite in ``kappa = sqrt(t) chol(C) z``. ``t >= 1``: the
    integrands are computed once on a fixed composite grid in ``kappa`` (unit panels on
    ``|kappa| <= 12``, geometric panels beyond, the region where both ``|kappa_a| > 12``
    dropped), and every ``t`` reweights them with its Gaussian density.
    """
    zx, zw = np.polynomial.hermite_e.hermegauss(40)
    zw = zw / zw.sum()
    Z1, Z2 = np.meshgrid(zx, zx, indexing="ij")
    W = np.outer(zw, zw).ravel()
    b = 1.0 / 3.0
    st = np.sqrt(_HM_T_SMALL)[:, None]
    k1 = (st * Z1.ravel()[None, :]).ravel()
    k2 = (st * (b * Z1 + math.sqrt(1 - b * b) * Z2).ravel()[None, :]).ravel()
    fs = [np.asarray(f).reshape(_HM_T_SMALL.size, -1) @ W for f in _hm_F_jit(jnp.asarray(k1), jnp.asarray(k2))]
    # large t: symmetric cross-shaped region of the composite grid
    x, w = _composite_nodes()
    inner = np.abs(x) <= _KAPPA_BAND
    I, J = np.triu_indices(x.size)
    keep = inner[I] | inner[J]
    I, J = I[keep], J[keep]
    vals = _hm_F_jit(jnp.asarray(x[I]), jnp.asarray(x[J]))
    mult = np.where(I == J, 1.0, 2.0) * w[I] * w[J]  # F(k1, k2) = F(k2, k1)
    P = np.exp(_gauss2_logpdf(x[I][None, :], x[J][None, :], _HM_T_LARGE[:, None]))
    fl = [(P * mult) @ np.asarray(v) for v in vals]
    tt = np.concatenate([_HM_T_SMALL[1:], _HM_T_LARGE[1:]])
    lt = np.log(tt)
    out = []
    for k, (small, large) in enumerate(zip(fs, fl)):
        yy = np.concatenate([small[1:], large[1:]])
        out.append(_table_fn(lt, yy, small[0], log_values=(k < 2)))
    checks = dict(at_t1_small=[f[-1] for f in fs], at_t1_large=[f[0] for f in fl], at_t0=[f[0] for f in fs])
    return _HardmaxTable(out[0], out[1], out[2], checks)


def _table_fn(lt, yy, y0, log_values):
    """Interpolant in ``log t`` (of ``log y`` when ``log_values``), linear to ``t = 0``, power law beyond."""
    spline = CubicSpline(lt, np.log(yy) if log_values else yy)
    t_lo, t_hi = math.exp(lt[0]), math.exp(lt[-1])
    slope_hi = float(spline(lt[-1], 1))

    def f(t):
        t = np.asarray(t, dtype=float)
        lt_ = np.log(np.clip(t, t_lo, t_hi))
        mid = np.exp(spline(lt_)) if log_values else spline(lt_)
        low = y0 + (yy[0] - y0) * t / t_lo
        if log_values:
            high = yy[-1] * np.exp(slope_hi * (np.log(np.maximum(t, t_hi)) - lt[-1]))
        else:
            high = yy[-1] * np.ones_like(t)  # E log Z -> 0 as t -> inf; |L(t_hi)| is tiny
        return np.where(t < t_lo, low, np.where(t > t_hi, high, mid))

    return f


def clear_tables() -> None:
    """Forget the cached tables (``mmse_rho`` per ``rho``, the hardmax integrals): for timings."""
    _denoising_table.cache_clear()
    _hardmax_table.cache_clear()


def hardmax_score_moment(t, score: str = "exact"):
    """``G(t) = E[2 (r g_11)^2 + 2 (r g_22)^2 + (r g_12)^2]`` of the hardmax channel (T = 2).

    ``r = sqrt(3 V')``; the expectation is over ``omega`` and ``y`` at overlap ratio
    ``t = q / V'``; then ``q_hat = 2 alpha G(t) / (3 V')``. At ``t = 0`` it is
    ``16 phi(0)^2 Phi(0)^2 / Phi_2(0,0;1/3) + 8 phi(0)^2 Phi(0)^2 / Phi_2(0,0;-1/3)`` for the exact score.

    Args:
        t: ``q / V' >= 0``, scalar or array.
        score: ``"exact"`` or ``"published"``.

    Chapter 4, eq. (bo-hardmax) (``G`` is its ``Upsilon``) and section "Hardmax: the exact score
    against the published one".
    """
    _checks.one_of("score", score, _ch.SCORES)
    tab = _hardmax_table()
    out = (tab.G_published if score == "published" else tab.G_exact)(np.asarray(t, dtype=float))
    return float(out) if np.ndim(out) == 0 else out


def hardmax_expected_log_partition(t):
    """``E log Z_out`` of the hardmax channel (T = 2) at ``t = q / V'`` (exact; one function of ``t``)."""
    out = _hardmax_table().L(np.asarray(t, dtype=float))
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------
# H(q) and E log Z_out per channel


def _K(T, channel):
    return T * T + T - 2 if channel == "softmax" else T * T + T


def _H(q, rho, T, channel, noise, score):
    """``q_hat / alpha`` at overlap ``q`` (vectorised)."""
    Q0 = 1 + rho
    Vp = Q0 - q + noise / 2
    if channel in ("softmax", "linear"):
        return _K(T, channel) / Vp
    tab = _hardmax_table()
    G = tab.G_published if score == "published" else tab.G_exact
    return 2 * G(q / Vp) / (3 * Vp)


def _ElogZ(q, rho, T, channel, noise):
    """``E log Z_out`` at overlap ``q`` up to a ``q``-independent constant."""
    Q0 = 1 + rho
    Vp = Q0 - q + noise / 2
    if channel in ("softmax", "linear"):
        return -_K(T, channel) / 4 * np.log(Vp)
    return _hardmax_table().L(q / Vp)


def q_hat_of(alpha, q, rho, T: int = 2, channel: str = "softmax", beta: float = 1.0, noise: float = 0.0,
             score: str = "exact"):
    """``q_hat = 2 alpha E[2 sum_a g_aa^2 + sum_{a<b} g_ab^2]`` at overlap ``q``, eq. (bo-se).

    Args:
        alpha: ``>= 0``; q: overlap in ``[0, Q0)``; rho ``> 0``; T, channel, beta, noise, score as
        :func:`state_evolution`.

    Returns:
        ``q_hat`` (float or array).

    Example:
        >>> import aim_tutorial as aim
        >>> round(aim.q_hat_of(0.1, 1.0, 0.5), 6)   # 4 alpha / (Q0 - q)
        0.8

    Chapter 4, eq. (bo-se).
    """
    _validate(rho, T, channel, beta, noise, score)
    a = np.asarray(alpha, dtype=float)
    if np.any(~(a >= 0)):
        raise ValueError("alpha must be in [0, inf)")
    qq = np.asarray(q, dtype=float)
    if np.any(~(qq >= 0)) or np.any(~(qq < 1 + rho + noise / 2)):
        raise ValueError(f"q must be in [0, Q0) = [0, {1 + rho})")
    out = a * _H(qq, rho, T, channel, noise, score)
    return float(out) if np.ndim(out) == 0 else out


def free_entropy(alpha, q, q_hat, rho, T: int = 2, channel: str = "softmax", noise: float = 0.0):
    """Replica-symmetric free entropy ``Phi(q, q_hat)``, eq. (rep-phi) of chapter 3, up to a constant.

    ``Phi = -q q_hat / 4 + psi_rho(q_hat) + alpha E log Z_out(q)``; the stationarity
    conditions ``dPhi/dq_hat = 0`` and ``dPhi/dq = 0`` are eq. (rep-se).
    ``E log Z_out`` is exact up to a ``q``-independent constant (softmax/linear:
    ``-(K/4) log(Q0 - q + noise/2)``; hardmax: quadrature). The hardmax ``E log Z_out``
    is the one of the true channel: ``score`` does not enter.

    Chapter 3, eq. (rep-phi).
    """
    _validate(rho, T, channel, 1.0, noise, "exact")
    tab = _denoising_table(float(rho))
    qh = np.asarray(q_hat, dtype=float)
    out = -np.asarray(q) * qh / 4 + _psi(tab, qh) + np.asarray(alpha) * _ElogZ(np.asarray(q, float), rho, T,
                                                                              channel, noise)
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------
# the solver


def _validate(rho, T, channel, beta, noise, score):
    _checks.positive("rho", rho)
    _checks.one_of("channel", channel, SE_CHANNELS)
    T = _checks.integer_at_least("T", T, 2)
    if channel == "hardmax" and T != 2:
        raise ValueError(f"T must be 2 for channel='hardmax', got {T}")
    _checks.positive("beta", beta)
    _checks.nonnegative("noise", noise)
    _checks.one_of("score", score, _ch.SCORES)
    if score == "published" and channel != "hardmax":
        raise ValueError("score must be 'exact' unless channel='hardmax'")


_Z_GRID = np.linspace(-27.0, 27.0, 541)  # m = sigmoid(z): resolves both ends of (0, 1)


def _solve(alpha, rho, Hfun, Efun, perfect_possible):
    """Roots in ``m`` of ``alpha H(Q0 - m) Delta(m) = 1`` for every ``alpha`` (vectorised)."""
    tab = _denoising_table(float(rho))
    Q0 = 1 + rho
    alpha = np.atleast_1d(np.asarray(alpha, dtype=float))
    m_grid = 1 / (1 + np.exp(-_Z_GRID))
    HD = Hfun(Q0 - m_grid) * _delta_of_m(tab, m_grid)  # F = alpha * HD - 1
    F = alpha[:, None] * HD[None, :] - 1
    sgn = np.sign(F)
    cross = (sgn[:, :-1] < 0) & (sgn[:, 1:] > 0) | (sgn[:, :-1] > 0) & (sgn[:, 1:] < 0)
    ia, iz = np.nonzero(cross)
    lo, hi = _Z_GRID[iz], _Z_GRID[iz + 1]
    flo = F[ia, iz]
    n_iter = 60
    for _ in range(n_iter):
        mid = (lo + hi) / 2
        mm = 1 / (1 + np.exp(-mid))
        fm = alpha[ia] * Hfun(Q0 - mm) * _delta_of_m(tab, mm) - 1
        same = np.sign(fm) == np.sign(flo)
        lo = np.where(same, mid, lo)
        flo = np.where(same, fm, flo)
        hi = np.where(same, hi, mid)
    zr = (lo + hi) / 2
    mr = 1 / (1 + np.exp(-zr))
    fr = alpha[ia] * Hfun(Q0 - mr) * _delta_of_m(tab, mr) - 1
    qr = Q0 - mr
    qhr = alpha[ia] * Hfun(qr)
    phir = -qr * qhr / 4 + _psi(tab, qhr) + alpha[ia] * Efun(qr)

    na = alpha.size
    mmse = np.full(na, np.nan)
    q_hat = np.full(na, np.nan)
    phi = np.full(na, -np.inf)
    conv = np.zeros(na, dtype=bool)
    nfp = np.bincount(ia, minlength=na)
    for j in range(ia.size):  # keep the root of largest free entropy
        a = ia[j]
        if phir[j] > phi[a]:
            phi[a], mmse[a], q_hat[a] = phir[j], mr[j], qhr[j]
            conv[a] = abs(fr[j]) < 1e-9
    none = nfp == 0
    if np.any(none):
        # no interior root: alpha = 0 (mmse = 1), or perfect recovery (F < 0 on all of (0, 1))
        a0 = alpha == 0
        idx = none & a0
        mmse[idx], q_hat[idx], conv[idx], phi[idx] = 1.0, 0.0, True, 0.0
        above = F[:, 0] > 0  # F > 0 on all of (0, 1): only m = 0 is left
        idx = none & ~a0 & above & perfect_possible
        mmse[idx], q_hat[idx], conv[idx], phi[idx] = 0.0, np.inf, True, np.inf
    return alpha, mmse, q_hat, conv, np.where(nfp > 0, n_iter, 0), nfp, phi


def state_evolution(alpha, rho: float, T: int = 2, channel: str = "softmax", beta: float = 1.0,
                    noise: float = 0.0, score: str = "exact") -> SEResult:
    """Bayes-optimal error of a single-layer AIM: the state-evolution fixed point, eqs. (bo-se)-(bo-root).

    Solves ``alpha H(q) Delta(Q0 - q) = 1`` directly for a whole grid of ``alpha``
    (bisection in the error ``m = Q0 - q`` after a scan that finds every root),
    and keeps the fixed point of largest free entropy, eq. (rep-phi). Softmax: the
    error depends on ``alpha (T^2 + T - 2)`` only and not on ``beta``; it reaches 0
    at :func:`alpha_perfect_recovery` when ``noise = 0``.

    Args:
        alpha: sample complexity ``>= 0``, scalar or 1-d array.
        rho: width ratio ``> 0``.
        T: tokens a sequence, ``>= 2`` (``2`` for hardmax).
        channel: ``"softmax"``, ``"linear"`` or ``"hardmax"``.
        beta: softmax inverse temperature ``> 0`` (the result does not depend on it).
        noise: variance ``Delta >= 0`` of the Gaussian noise on ``h``.
        score: hardmax only: ``"exact"``, or ``"published"`` to reproduce the published curves.

    Returns:
        :class:`SEResult` (floats for a scalar ``alpha``, arrays otherwise).

    Example:
        >>> import aim_tutorial as aim
        >>> round(aim.state_evolution(0.1, 0.5).mmse, 3)
        0.392

    Chapter 4. Reference: arXiv 2506.01582 (its state-evolution equations).
    """
    _validate(rho, T, channel, beta, noise, score)
    scalar = np.ndim(alpha) == 0
    a = np.asarray(alpha, dtype=float)
    if a.ndim > 1:
        raise ValueError(f"alpha must be a scalar or a 1-d array, got shape {a.shape}")
    if np.any(~np.isfinite(a)) or np.any(a < 0):
        raise ValueError("alpha must be in [0, inf)")
    rho, noise = float(rho), float(noise)

    def Hfun(q):
        return _H(q, rho, T, channel, noise, score)

    def Efun(q):
        return _ElogZ(q, rho, T, channel, noise)

    perfect = channel in ("softmax", "linear") and noise == 0
    if perfect:
        # the nontrivial root exists iff alpha < alpha_PR (Delta(m)/m increases from 1/slope);
        # at alpha_PR within rounding the table's noise could fake roots at m -> 0
        a_pr = (2 * rho - rho * rho if rho <= 1 else 1.0) / _K(T, channel)
        pr = a >= a_pr * (1 - 1e-9)
    else:
        pr = np.zeros(a.shape, dtype=bool)
    al, mmse, q_hat, conv, its, nfp, phi = _solve(np.where(pr, 0.0, a), rho, Hfun, Efun, perfect)
    al = np.atleast_1d(a).astype(float)
    prr = np.atleast_1d(pr)
    mmse, q_hat, phi = np.where(prr, 0.0, mmse), np.where(prr, np.inf, q_hat), np.where(prr, np.inf, phi)
    conv, its, nfp = np.where(prr, True, conv), np.where(prr, 0, its), np.where(prr, 1, nfp)
    q = 1 + rho - mmse
    res = SEResult(al, mmse, q, q_hat, conv, its, nfp, phi)
    if scalar:
        res = SEResult(*(x[0].item() for x in res))
    return res


# ---------------------------------------------------------------------------
# label-space error


def label_space_error(q, rho: float, T: int = 2, channel: str = "softmax", beta: float = 1.0,
                      noise: float = 0.0, key=None, n_samples: int = 200_000):
    """Bayes-optimal error on the outputs, ``E_omega[E ||g(h)||^2 - ||E g(h)||^2]``, eq. (bo-label).

    ``omega ~ N(0, q C)``, ``h | omega ~ N(omega, (Q0 - q + noise/2) C)``, summed over
    the ``T^2`` entries of ``y``. Hardmax (T = 2) in closed form,
    ``1 - (2/pi) arcsin(t / (1 + t))``, ``t = q / V'``; softmax T = 2 by nested
    Gauss-Hermite quadrature; softmax ``T > 2`` by Monte Carlo (``key`` required).

    Args:
        q: overlap(s) from :func:`state_evolution`, in ``[0, Q0]``.
        rho, T, channel, beta, noise: as :func:`state_evolution` (``linear`` gives
            ``E ||h - E h||^2 = (Q0 - q + noise/2)(T^2 + T)``).
        key: ``jax.random`` key, needed only for Monte Carlo.
        n_samples: Monte Carlo samples (``omega`` draws x 64 ``h`` draws each).

    Chapter 4, section "Noise and the error on the outputs".
    """
    _validate(rho, T, channel, beta, noise, "exact")
    qq = np.asarray(q, dtype=float)
    Vp = 1 + rho - qq + noise / 2
    if channel == "linear":
        out = Vp * (T * T + T)
    elif channel == "hardmax":
        t = qq / Vp
        out = 1 - (2 / np.pi) * np.arcsin(t / (1 + t))
    elif T == 2:
        x, w = np.polynomial.hermite_e.hermegauss(160)
        w = w / w.sum()
        u = np.sqrt(3 * qq)[..., None, None] * x[:, None]  # outer over omega
        xs = u + np.sqrt(3 * Vp)[..., None, None] * x[None, :]
        sig = 1 / (1 + np.exp(-beta * xs))
        m1 = np.sum(w[None, :] * sig, axis=-1)
        m2 = np.sum(w[None, :] * sig * sig, axis=-1)
        var = np.sum(w * (m2 - m1 * m1), axis=-1)
        out = 4 * var  # two rows, each row: 2 Var(sigma)
    else:
        if key is None:
            raise ValueError("key must be a jax.random key for softmax with T > 2 (Monte Carlo)")
        n_samples = _checks.integer_at_least("n_samples", n_samples, 64)
        out = np.vectorize(lambda qv, vv: _label_mc(key, qv, vv, T, beta, n_samples // 64))(qq, Vp)
    return float(out) if np.ndim(out) == 0 else out


@functools.partial(jax.jit, static_argnames=("T", "n_omega"))
def _label_mc_jit(key, q, Vp, T, beta, n_omega):
    k1, k2 = jax.random.split(key)
    om = jnp.sqrt(q) * _ch.symmetric_gaussian(k1, (n_omega, 1, T, T))
    h = om + jnp.sqrt(Vp) * _ch.symmetric_gaussian(k2, (n_omega, 64, T, T))
    y = jax.nn.softmax(beta * h, axis=-1)
    A = jnp.mean(jnp.sum(y * y, axis=(-1, -2)), axis=1)  # inner mean of ||y||^2
    ybar = jnp.mean(y, axis=1)
    B = jnp.sum(ybar * ybar, axis=(-1, -2))
    return jnp.mean(A - B) * 64 / 63  # unbiased E tr Cov(y | omega)


def _label_mc(key, q, Vp, T, beta, n_omega):
    return float(_label_mc_jit(key, q, Vp, T, beta, n_omega))


# ---------------------------------------------------------------------------
# generic channel: H(q) by Monte Carlo with common random numbers


class GenericSEResult(NamedTuple):
    """Fixed point of the generic channel's state evolution (arrays over ``alpha``).

    Attributes:
        alpha, mmse, q, q_hat, converged, n_fixed_points: as :class:`SEResult`.
        mmse_std: Monte Carlo standard error of ``mmse`` (from ``n_batches`` independent batches).
        m_grid, H_grid: the errors ``m`` where ``H = q_hat / alpha`` was estimated, and the estimates.
        min_ess: smallest mean effective sample size of the importance weights over the grid.
    """

    alpha: np.ndarray
    mmse: np.ndarray
    q: np.ndarray
    q_hat: np.ndarray
    converged: np.ndarray
    n_fixed_points: np.ndarray
    mmse_std: np.ndarray
    m_grid: np.ndarray
    H_grid: np.ndarray
    min_ess: float


@functools.partial(jax.jit, static_argnames=("g", "n_batches"))
def _generic_H(g, z_omega, z_h, z_y, zeta, q, Vp, label_noise, n_batches):
    """Batch means of ``4 ||Gamma||_F^2`` and of ``log Z_out`` at overlap ``q`` (CRN samples)."""
    omega = jnp.sqrt(q) * z_omega
    h = omega + jnp.sqrt(Vp) * z_h
    gv = jax.vmap(g)
    y = gv(h) + jnp.sqrt(label_noise) * z_y
    out = _ch._generic_score(g, y, omega, zeta, Vp, label_noise)
    fisher = 4 * jnp.sum(out.score * out.score, axis=(-1, -2))
    nb = n_batches
    return (fisher.reshape(nb, -1).mean(axis=1), out.log_partition.reshape(nb, -1).mean(axis=1),
            jnp.mean(out.ess))


def generic_state_evolution(key, alpha, rho: float, g: Callable, T: int = 2, *, label_noise: float,
                            noise: float = 0.0, n_omega: int = 2048, n_zeta: int = 2048, n_m: int = 20,
                            n_batches: int = 8) -> GenericSEResult:
    """State evolution of the generic channel ``y = g(h + noise) + sqrt(label_noise) xi`` by Monte Carlo.

    ``H(q) = q_hat / alpha = 4 E ||Gamma||_F^2`` is estimated at ``n_m`` errors ``m = Q0 - q``
    with :func:`aim_tutorial.channels.generic_output_score` and the same random numbers
    for every ``m`` (common random numbers: the estimate is a smooth function of ``m``),
    interpolated in ``log m``, and eq. (bo-root) is solved as for the closed-form channels.
    ``mmse_std`` comes from ``n_batches`` independent batches of ``omega`` draws.

    Args:
        key: ``jax.random`` key.
        alpha: sample complexity, scalar or 1-d array, ``>= 0``.
        rho: width ratio ``> 0``.
        g: output function, one ``(T, T)`` matrix to one ``(T, T)`` matrix (hashable: a
            module-level function or a ``functools.partial``).
        T: tokens a sequence, ``2 <= T <= 4``.
        label_noise: variance of the iid Gaussian noise on every entry of ``y``, ``> 0``.
        noise: variance of the Gaussian noise on ``h`` (diagonal ``noise``, off ``noise/2``), ``>= 0``.
        n_omega, n_zeta: Monte Carlo sizes (outer ``omega`` draws; inner prior draws).
        n_m: number of grid points in ``m``.
        n_batches: batches for the error bar (divides ``n_omega``).

    Returns:
        :class:`GenericSEResult`.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> r = aim.generic_state_evolution(jax.random.key(0), 0.2, 0.5, lambda h: h, label_noise=0.5,
        ...                                 n_omega=256, n_zeta=256, n_m=8)
        >>> r.mmse.shape
        (1,)

    Chapter 4, section "One curve for every temperature and every $T$".
    """
    rho = _checks.positive("rho", rho)
    T = _checks.integer_at_least("T", T, 2)
    if T > 4:
        raise ValueError(f"T must be in [2, 4] for the generic channel, got {T}")
    label_noise = _checks.positive("label_noise", label_noise)
    noise = _checks.nonnegative("noise", noise)
    n_omega = _checks.integer_at_least("n_omega", n_omega, 2)
    n_zeta = _checks.integer_at_least("n_zeta", n_zeta, 2)
    n_m = _checks.integer_at_least("n_m", n_m, 4)
    n_batches = _checks.integer_at_least("n_batches", n_batches, 2)
    if n_omega % n_batches:
        raise ValueError(f"n_batches must divide n_omega, got {n_batches} and {n_omega}")
    if not callable(g):
        raise ValueError("g must be callable: one (T, T) matrix to one (T, T) matrix")
    a = np.atleast_1d(np.asarray(alpha, dtype=float))
    if a.ndim > 1 or np.any(~np.isfinite(a)) or np.any(a < 0):
        raise ValueError("alpha must be a scalar or 1-d array in [0, inf)")
    k1, k2, k3, k4 = jax.random.split(key, 4)
    z_omega = _ch.symmetric_gaussian(k1, (n_omega, T, T))
    z_h = _ch.symmetric_gaussian(k2, (n_omega, T, T))
    z_y = jax.random.normal(k3, (n_omega, T, T))
    zeta = _ch.symmetric_gaussian(k4, (n_zeta, T, T))
    Q0 = 1 + rho
    m_grid = 1 / (1 + np.exp(-np.linspace(-7.0, 5.0, n_m)))  # errors from 1e-3 to 0.993
    Hb, Eb, ess = [], [], []
    for m in m_grid:
        f, lz, e = _generic_H(g, z_omega, z_h, z_y, zeta, float(Q0 - m), float(m + noise / 2), label_noise,
                              n_batches)
        Hb.append(np.asarray(f))
        Eb.append(np.asarray(lz))
        ess.append(float(e))
    Hb, Eb = np.array(Hb), np.array(Eb)  # (n_m, n_batches)
    lm = np.log(m_grid)

    def solve(Hcol, Ecol):
        hs = CubicSpline(lm, np.log(Hcol))
        es = CubicSpline(lm, Ecol)

        def Hfun(q):
            mm = np.clip(Q0 - np.asarray(q, float), m_grid[0], m_grid[-1])
            return np.exp(hs(np.log(mm)))

        def Efun(q):
            mm = np.clip(Q0 - np.asarray(q, float), m_grid[0], m_grid[-1])
            return es(np.log(mm))

        return _solve(a, rho, Hfun, Efun, False)

    al, mmse, q_hat, conv, _, nfp, _ = solve(Hb.mean(axis=1), Eb.mean(axis=1))
    per = np.array([solve(Hb[:, b], Eb[:, b])[1] for b in range(n_batches)])
    mmse_std = np.nanstd(per, axis=0, ddof=1) / math.sqrt(n_batches)
    # outside the grid of m the interpolant is clamped: flag it
    conv = conv & (mmse >= m_grid[0]) & (mmse <= m_grid[-1]) | (a == 0)
    return GenericSEResult(al, mmse, Q0 - mmse, q_hat, conv, nfp, mmse_std, m_grid, Hb.mean(axis=1), min(ess))
