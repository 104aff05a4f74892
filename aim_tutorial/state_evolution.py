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

is chosen. ``H`` and ``E log Z_out`` come from the channel (:mod:`aim_tutorial.channels`:
a registered name or a :class:`~aim_tutorial.channels.Channel`), for instance

- softmax (any ``T``, any ``beta > 0``): ``H = (T^2 + T - 2) / (m + Delta_h/2)``;
- linear, and noiseless sigmoid: ``H = (T^2 + T) / (m + Delta_h/2)``;
- hardmax (``T = 2``, eq. (bo-hardmax)): ``H = 2 G(t) / (3 V')`` with ``V' = m + Delta_h/2``,
  ``t = q / V'``, by deterministic quadrature (:mod:`aim_tutorial.channels.hardmax`);
- ReLU and any elementwise map: eq. (bo-ew-qhat), one Fisher information per entry by
  quadrature (:mod:`aim_tutorial.channels.elementwise`);
- generic (a user function ``g`` of the whole matrix, Gaussian noise on ``y``, ``T <= 4``):
  ``H`` by Monte Carlo with common random numbers (:func:`generic_state_evolution`).

The perfect-recovery threshold of a noiseless channel with exact measurements is
:func:`perfect_recovery_threshold`.

Reference: Boncoraglio, Troiani, Erba, Zdeborova, arXiv 2506.01582 (the replica
formula and its state evolution); Maillard et al., arXiv 2408.03733 (the
matrix-denoising part).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import numpy as np
from scipy.interpolate import CubicSpline

from . import _checks
from . import channels as _ch

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
# the channel side: q_hat / alpha = H(q) and E log Z_out, from the channel (aim_tutorial.channels)

hardmax_score_moment = _ch.hardmax.hardmax_score_moment
hardmax_expected_log_partition = _ch.hardmax.hardmax_expected_log_partition


def clear_tables() -> None:
    """Forget the cached tables (``mmse_rho`` per ``rho``, the hardmax integrals): for timings."""
    _denoising_table.cache_clear()
    _ch.hardmax._hardmax_table.cache_clear()


def _H(q, rho, ch, T, beta, noise, score):
    """``q_hat / alpha`` at overlap ``q`` (vectorised)."""
    q = np.asarray(q, dtype=float)
    return ch.se_H(q, 1 + rho - q + noise / 2, T, beta, score)


def _ElogZ(q, rho, ch, T, beta, noise):
    """``E log Z_out`` at overlap ``q`` up to a ``q``-independent constant."""
    q = np.asarray(q, dtype=float)
    return ch.se_ElogZ(q, 1 + rho - q + noise / 2, T, beta)


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
    ch = _validate(rho, T, channel, beta, noise, score)
    a = np.asarray(alpha, dtype=float)
    if np.any(~(a >= 0)):
        raise ValueError("alpha must be in [0, inf)")
    qq = np.asarray(q, dtype=float)
    if np.any(~(qq >= 0)) or np.any(~(qq < 1 + rho + noise / 2)):
        raise ValueError(f"q must be in [0, Q0) = [0, {1 + rho})")
    out = a * _H(qq, rho, ch, T, beta, noise, score)
    return float(out) if np.ndim(out) == 0 else out


def free_entropy(alpha, q, q_hat, rho, T: int = 2, channel="softmax", noise: float = 0.0, beta: float = 1.0):
    """Replica-symmetric free entropy ``Phi(q, q_hat)``, eq. (rep-phi) of chapter 3, up to a constant.

    ``Phi = -q q_hat / 4 + psi_rho(q_hat) + alpha E log Z_out(q)``; the stationarity
    conditions ``dPhi/dq_hat = 0`` and ``dPhi/dq = 0`` are eq. (rep-se).
    ``E log Z_out`` is exact up to a ``q``-independent constant (softmax/linear:
    ``-(K/4) log(Q0 - q + noise/2)``; hardmax: quadrature). The hardmax ``E log Z_out``
    is the one of the true channel: ``score`` does not enter.

    Chapter 3, eq. (rep-phi).
    """
    ch = _validate(rho, T, channel, beta, noise, "exact")
    tab = _denoising_table(float(rho))
    qh = np.asarray(q_hat, dtype=float)
    psi = np.where(qh > 0, _psi(tab, np.maximum(qh, 1e-300)), 0.0)  # psi_rho(0) = 0
    out = -np.asarray(q) * qh / 4 + psi + np.asarray(alpha) * _ElogZ(np.asarray(q, float), rho, ch, T, beta, noise)
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------
# the solver


def _validate(rho, T, channel, beta, noise, score):
    """The :class:`~aim_tutorial.channels.Channel` of ``channel``, after checking every argument."""
    _checks.positive("rho", rho)
    ch = _ch.get(channel)
    T = _checks.integer_at_least("T", T, 2)
    _checks.positive("beta", beta)
    _checks.nonnegative("noise", noise)
    if score not in ch.scores:
        if score in _ch.SCORES:
            raise ValueError(f"score must be 'exact' unless channel='hardmax' (score={score!r} is a hardmax switch)")
        raise ValueError(f"score must be one of {ch.scores} for channel {ch.name!r}, got {score!r}")
    _ch.check_settings(ch, T, beta, noise, score)
    return ch


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


def state_evolution(alpha, rho: float, T: int = 2, channel="softmax", beta: float = 1.0,
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
        channel: a registered name (``"softmax"``, ``"linear"``, ``"hardmax"``, ``"relu"``,
            ``"sigmoid"``; :func:`aim_tutorial.channels.registered`) or a
            :class:`~aim_tutorial.channels.Channel` (e.g. from :func:`aim_tutorial.elementwise_channel`).
        beta: inverse temperature ``> 0`` of the softmax and sigmoid channels (the softmax
            error does not depend on it).
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
    ch = _validate(rho, T, channel, beta, noise, score)
    scalar = np.ndim(alpha) == 0
    a = np.asarray(alpha, dtype=float)
    if a.ndim > 1:
        raise ValueError(f"alpha must be a scalar or a 1-d array, got shape {a.shape}")
    if np.any(~np.isfinite(a)) or np.any(a < 0):
        raise ValueError("alpha must be in [0, inf)")
    rho, noise = float(rho), float(noise)

    def Hfun(q):
        return _H(q, rho, ch, T, beta, noise, score)

    def Efun(q):
        return _ElogZ(q, rho, ch, T, beta, noise)

    a_pr = ch.perfect_recovery(rho, T, beta, noise)
    perfect = a_pr is not None
    if perfect:
        # the channel's threshold is where F(m) > 0 reaches m -> 0; if 1 / (H Delta) peaks
        # inside (0, 1) above it (beyond the tables' accuracy), that larger alpha is the threshold
        a_pr = _threshold(a_pr, _interior_threshold(rho, Hfun))
        # at alpha_PR within rounding the table's noise could fake roots at m -> 0
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


_TABLE_REL_ACCURACY = 1e-3  # of 1 / (H Delta) from the tabulated Delta(m) (measured: 4e-5)


def _threshold(closed_form: float, interior: float) -> float:
    return interior if interior > closed_form * (1 + _TABLE_REL_ACCURACY) else closed_form


def _interior_threshold(rho, Hfun) -> float:
    """``max_m 1 / (H(Q0 - m) Delta(m))`` over the solver's grid of ``m`` (0 if none is finite)."""
    tab = _denoising_table(float(rho))
    m = 1 / (1 + np.exp(-_Z_GRID))
    HD = Hfun(1 + rho - m) * _delta_of_m(tab, m)
    HD = HD[np.isfinite(HD) & (HD > 0)]
    return float(1.0 / HD.min()) if HD.size else 0.0


def perfect_recovery_threshold(rho: float, T: int = 2, channel="softmax", beta: float = 1.0,
                               noise: float = 0.0):
    """The perfect-recovery threshold ``alpha_PR`` of a channel, or ``None`` if it has none.

    Below it the state evolution has a fixed point of error ``> 0``; from it on, the error
    is 0. It is ``max(dof / lim_{V'->0} V' H, max_m 1/(H Delta)(m))``: the channel's
    exact measurements a sample against the teacher's degrees of freedom, unless the
    ratio ``1/(H Delta)`` peaks inside ``(0, 1)``.

    Example:
        >>> import aim_tutorial as aim
        >>> aim.perfect_recovery_threshold(0.5, 2, "relu")   # 2 (2 rho - rho^2) / (T^2 + T)
        0.25

    Chapter 4, section "Attention beyond the softmax: ReLU, sigmoid and any elementwise map".
    """
    ch = _validate(rho, T, channel, beta, noise, "exact")
    a_pr = ch.perfect_recovery(float(rho), T, float(beta), float(noise))
    if a_pr is None:
        return None
    rho, noise = float(rho), float(noise)
    interior = _interior_threshold(rho, lambda q: _H(q, rho, ch, T, beta, noise, "exact"))
    return float(_threshold(a_pr, interior))


# ---------------------------------------------------------------------------
# label-space error


def label_space_error(q, rho: float, T: int = 2, channel="softmax", beta: float = 1.0,
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
    ch = _validate(rho, T, channel, beta, noise, "exact")
    if ch.label_error is None:
        raise ValueError(f"the error on the outputs is not available for channel {ch.name!r}; "
                         f"it is for {tuple(n for n in _ch.registered() if _ch.get(n).label_error)}")
    qq = np.asarray(q, dtype=float)
    Vp = 1 + rho - qq + noise / 2
    out = ch.label_error(qq, Vp, T, beta, key, n_samples)
    return float(out) if np.ndim(out) == 0 else out


def _label_mc(key, q, Vp, T, beta, n_omega):
    return _ch.softmax.label_mc(key, q, Vp, T, beta, n_omega)


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
        f, lz, e = _ch.generic.generic_moments(g, z_omega, z_h, z_y, zeta, float(Q0 - m),
                                               float(m + noise / 2), label_noise, n_batches)
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
