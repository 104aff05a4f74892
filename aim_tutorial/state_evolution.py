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

import math
from typing import Callable, NamedTuple

import jax
import numpy as np
from scipy.interpolate import CubicSpline

from . import _checks
from . import _se_solve
from . import channels as _ch
from ._se_denoising import _delta_of_m, _denoising_table, _psi
from ._se_solve import _ROUNDING_TOL, _Z_GRID, _Z_WIDE, SEStatus, _quiet, _rounding, _solve, _solve_wide
from .counting import alpha_scale, dof_fraction

# the private helpers' old addresses (tests/test_state_evolution.py reads them here)
from ._se_denoising import _increasing  # noqa: F401
from ._se_solve import _WIDE_ITER, _log_m_parts  # noqa: F401

__all__ = [
    "SE_STATUS",
    "SEResult",
    "SEStatus",
    "GenericSEResult",
    "solve_state_evolution",
    "generic_state_evolution",
    "alpha_perfect_recovery",
    "perfect_recovery_threshold",
    "psi_denoising",
    "q_hat_of",
    "free_entropy",
    "label_space_error",
    "clear_tables",
]


# ---------------------------------------------------------------------------
# results


class SEResult(NamedTuple):
    """Fixed point of the state evolution (arrays of the shape of ``alpha``; floats for a scalar).

    Attributes:
        alpha: sample complexity ``n / d^2``.
        mmse: Bayes-optimal error ``Q0 - q``.
        q: overlap.
        q_hat: conjugate overlap (``inf`` at perfect recovery).
        converged: whether the root was found to tolerance (``|F| < 1e-9``), or perfect recovery, or
            an error that rounds to 0 or to 1 (see ``status``).
        iterations: bisection steps used.
        n_fixed_points: number of fixed points found at this ``alpha``.
        phi: free entropy at the chosen fixed point, up to an ``alpha``-independent constant
            (``inf`` at perfect recovery of the noiseless softmax/linear channels).
        status: why, in words (strings of :data:`SE_STATUS`): ``"converged"``, ``"alpha = 0"``,
            ``"perfect recovery"``, ``"error below 1e-320, rounded to 0"`` (converged: the true
            error is below the smallest float), ``"error within 1e-16 of 1, rounded to 1"``
            (converged), ``"residual above 1e-9"`` (not converged), or
            ``"no fixed point: H is not finite"`` (not converged; ``mmse`` is then NaN).
            After the first eight fields, so that code unpacking them keeps working.
        code: the same as integer codes of :class:`SEStatus` (``SEStatus(code)``; its ``message``
            is the status string, its ``converged`` the flag).
    """

    alpha: np.ndarray
    mmse: np.ndarray
    q: np.ndarray
    q_hat: np.ndarray
    converged: np.ndarray
    iterations: np.ndarray
    n_fixed_points: np.ndarray
    phi: np.ndarray
    status: np.ndarray = None
    code: np.ndarray = None


#: The values of :attr:`SEResult.status` (the messages of :class:`SEStatus`, in order).
SE_STATUS = _se_solve.SE_STATUS  # (defined where the solver sets them)


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
    return dof_fraction(rho) / alpha_scale(T)


# ---------------------------------------------------------------------------
# validation helpers (generic checks that _checks lacks: real arrays of values in a range)


def _real_values(name: str, value, *, max_ndim=None, allow_empty: bool = False) -> np.ndarray:
    """A real scalar or array of finite numbers (no bools, strings, None, complex), as floats."""
    ndim = None if max_ndim is None else tuple(range(max_ndim + 1))
    _checks.real_array(name, value, ndim=ndim, allow_empty=allow_empty)
    return np.asarray(value, dtype=float)


def _nonneg_array(name: str, value, *, max_ndim=None, allow_empty: bool = False) -> np.ndarray:
    """Finite real values ``>= 0`` (scalar or array), as floats."""
    v = _real_values(name, value, max_ndim=max_ndim, allow_empty=allow_empty)
    if np.any(v < 0):
        raise ValueError(f"{name} must be in [0, inf), got {float(v[v < 0].ravel()[0])!r}")
    return v


def _overlap(q, rho: float) -> np.ndarray:
    """Overlaps ``q`` in ``[0, Q0]``, ``Q0 = 1 + rho`` (finite real scalar or array), as floats."""
    qq = _real_values("q", q)
    bad = (qq < 0) | (qq > 1 + rho)
    if np.any(bad):
        raise ValueError(f"q must be in [0, Q0] = [0, 1 + rho] = [0, {1 + rho:g}], got {float(qq[bad].ravel()[0])!r}")
    return qq


def _broadcast(**arrays) -> tuple:
    """The broadcast shape of the named arrays, or a ``ValueError`` naming them."""
    try:
        return np.broadcast_shapes(*(np.shape(a) for a in arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(a)}" for k, a in arrays.items())
        raise ValueError(f"{' and '.join(arrays)} must broadcast to one shape, got {shapes}") from None


# ---------------------------------------------------------------------------
# the denoising side: Delta(m) = mmse^{-1}(m) and psi(q_hat), tabulated per rho (_se_denoising)


def psi_denoising(q_hat, rho: float):
    """Free entropy of matrix denoising, ``psi_rho(q_hat) = int_0^{q_hat} (Q0 - mmse_rho(1/x))/4 dx``.

    Its derivative is ``(Q0 - mmse_rho(1/q_hat))/4``, eq. (rep-dpsi); normalised by ``psi(0) = 0``.

    Args:
        q_hat: ``>= 0``, scalar or array.
        rho: width ratio in ``[1e-6, 1e24]`` (:data:`aim_tutorial.rmt.RHO_MIN`, ``RHO_MAX``).

    Chapter 3, eqs. (rep-psi) and (rep-dpsi).
    """
    rho = _checks.positive("rho", rho)
    q = _nonneg_array("q_hat", q_hat)
    with np.errstate(divide="ignore"):
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


def q_hat_of(alpha, q, rho, T: int = 2, *, channel: str = "softmax", beta: float = 1.0, noise: float = 0.0,
             score: str = "exact"):
    """``q_hat = 2 alpha E[2 sum_a g_aa^2 + sum_{a<b} g_ab^2]`` at overlap ``q``, eq. (bo-se).

    Args:
        alpha: ``>= 0``, finite, scalar or array.
        q: overlap in ``[0, Q0]``, ``Q0 = 1 + rho``, scalar or array (broadcast with ``alpha``).
        rho: ``> 0``.
        T, channel, beta, noise, score: as :func:`solve_state_evolution`.

    Returns:
        ``q_hat`` (float or array). At ``q = Q0`` without noise (``V' = 0``: exact measurements) it is
        ``inf`` for ``alpha > 0`` (and 0 at ``alpha = 0``): the correct value, the limit ``q -> Q0`` (the
        Fisher information of noiseless measurements), which the state evolution uses (``mmse = 0``
        there), not an overflow; ``q > Q0`` is refused. With a tiny noise it is large and finite
        (hardmax at ``noise = 1e-310``: 1.7e155).

    Example:
        >>> import aim_tutorial as aim
        >>> round(aim.q_hat_of(0.1, 1.0, 0.5), 6)   # 4 alpha / (Q0 - q)
        0.8

    Chapter 4, eq. (bo-se).
    """
    ch = _validate(rho, T, channel, beta, noise, score)
    rho, noise = float(rho), float(noise)
    a = _nonneg_array("alpha", alpha)
    qq = _overlap(q, rho)
    _broadcast(alpha=a, q=qq)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        H = _H(qq, rho, ch, T, beta, noise, score)
        H = np.where(1 + rho - qq + noise / 2 > 0, H, np.inf)  # V' = 0: exact measurements
        out = np.where(a > 0, a * H, 0.0)
    return float(out) if np.ndim(out) == 0 else out


def free_entropy(alpha, q, q_hat, rho, T: int = 2, *, channel="softmax", noise: float = 0.0, beta: float = 1.0):
    """Replica-symmetric free entropy ``Phi(q, q_hat)``, eq. (rep-phi) of chapter 3, up to a constant.

    ``Phi = -q q_hat / 4 + psi_rho(q_hat) + alpha E log Z_out(q)``; the stationarity
    conditions ``dPhi/dq_hat = 0`` and ``dPhi/dq = 0`` are eq. (rep-se).
    ``E log Z_out`` is exact up to a ``q``-independent constant (softmax/linear:
    ``-(K/4) log(Q0 - q + noise/2)``; hardmax: quadrature). The hardmax ``E log Z_out``
    is the one of the true channel: ``score`` does not enter.

    Args:
        alpha: ``>= 0``, finite; q: overlap in ``[0, Q0]``; q_hat: ``>= 0``, finite (scalars or
            arrays that broadcast together); rho, T, channel, noise, beta: as :func:`solve_state_evolution`.

    Returns:
        float or array. At ``q = Q0`` without noise the softmax and linear ``E log Z_out`` (the log
        density of exact measurements) is ``+inf``, and so is ``Phi`` for ``alpha > 0``.

    Chapter 3, eq. (rep-phi).
    """
    ch = _validate(rho, T, channel, beta, noise, "exact")
    rho, noise = float(rho), float(noise)
    a = _nonneg_array("alpha", alpha)
    qq = _overlap(q, rho)
    qh = _nonneg_array("q_hat", q_hat)
    _broadcast(alpha=a, q=qq, q_hat=qh)
    tab = _denoising_table(rho)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        psi = np.where(qh > 0, _psi(tab, np.maximum(qh, 1e-300)), 0.0)  # psi_rho(0) = 0
        E = _ElogZ(qq, rho, ch, T, beta, noise)
        out = -qq * qh / 4 + psi + np.where(a > 0, a * E, 0.0)
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------
# the solver (its two scans: _se_solve)


def _validate(rho, T, channel, beta, noise, score):
    """The :class:`~aim_tutorial.channels.Channel` of ``channel``, after checking every argument."""
    _checks.positive("rho", rho)
    ch = _ch.get(channel)
    T = _checks.integer_at_least("T", T, 2)
    if T > 10**150:
        raise ValueError(f"T must be at most 1e150 (T^2 must be a float), got {T}")
    _checks.positive("beta", beta)
    _checks.nonnegative("noise", noise)
    if not isinstance(score, str):
        raise _checks.ArgumentTypeError(f"score must be one of {ch.scores} (a string), got {score!r}")
    if score not in ch.scores:
        if score in _ch.SCORES:
            raise ValueError(f"score must be 'exact' unless channel='hardmax' (score={score!r} is a hardmax switch)")
        raise ValueError(f"score must be one of {ch.scores} for channel {ch.name!r}, got {score!r}")
    _ch.check_settings(ch, T, beta, noise, score)
    return ch


def solve_state_evolution(alpha, rho: float, T: int = 2, *, channel="softmax", beta: float = 1.0,
                          noise: float = 0.0, score: str = "exact") -> SEResult:
    """Bayes-optimal error of a single-layer AIM: the state-evolution fixed point, eqs. (bo-se)-(bo-root).

    Solves ``alpha H(q) Delta(Q0 - q) = 1`` directly for a whole grid of ``alpha``
    (bisection in the error ``m = Q0 - q`` after a scan that finds every root),
    and keeps the fixed point of largest free entropy, eq. (rep-phi). Softmax: the
    error depends on ``alpha (T^2 + T - 2)`` only and not on ``beta``; it reaches 0
    at :func:`alpha_perfect_recovery` when ``noise = 0``.

    Args:
        alpha: sample complexity ``>= 0``, finite, scalar or 1-d array.
        rho: width ratio in ``[1e-6, 1e24]`` (below ``1e-4`` the table of ``mmse_rho`` reaches ``Delta = 1e4/rho``,
            interpolated in ``logit(m)``: about 0.5 % accurate there).
        T: tokens a sequence, ``>= 2`` (``2`` for hardmax).
        channel: a registered name (``"softmax"``, ``"linear"``, ``"hardmax"``, ``"relu"``,
            ``"sigmoid"``; :func:`aim_tutorial.channels.registered`) or a
            :class:`~aim_tutorial.channels.Channel` (e.g. from :func:`aim_tutorial.elementwise_channel`).
        beta: inverse temperature ``> 0`` of the softmax and sigmoid channels (the softmax
            error does not depend on it).
        noise: variance ``Delta >= 0`` of the Gaussian noise on ``h``.
        score: hardmax only: ``"exact"``, or ``"published"`` to reproduce the published curves.

    Every valid setting gives a finite error in ``[0, 1]`` and a ``status``. The scan covers the
    errors ``1.9e-12 <= m <= 1 - 1.9e-12``; where it finds no root (an error below it: tiny noise,
    large ``alpha``, the hardmax at small ``rho``; or above it: tiny ``alpha``), where a root is
    not converged, or where ``V' = Q0 - q`` computed from ``q`` is rounded by more than ``1e-6``
    (``rho`` large, ``m`` small), the roots are searched again in ``logit(m)`` over the whole range
    of floats (``1e-320`` to ``1``), in logs, with ``H`` at ``V' = m + noise/2`` and, below the
    table of ``mmse_rho``, its small-error asymptote ``mmse_rho(Delta) = (2 rho - rho^2) Delta``
    (``Delta`` from ``rho = 1`` on), so ``Delta(m) = m / (2 rho - rho^2)``.

    Returns:
        :class:`SEResult` (floats for a scalar ``alpha``, arrays otherwise; ``status`` a string or
        an array of strings).

    Example:
        >>> import aim_tutorial as aim
        >>> round(aim.solve_state_evolution(0.1, 0.5).mmse, 3)
        0.392

    Chapter 4. Reference: arXiv 2506.01582 (its state-evolution equations).
    """
    ch = _validate(rho, T, channel, beta, noise, score)
    a = _nonneg_array("alpha", alpha, max_ndim=1, allow_empty=True)
    _checks.check_memory(f"solve_state_evolution({a.size} values of alpha)", 3 * a.size * _Z_WIDE.size)
    scalar = a.ndim == 0
    rho, noise = float(rho), float(noise)
    Q0 = 1 + rho

    def Hfun(q):
        return _H(q, rho, ch, T, beta, noise, score)

    def Efun(q):
        return _ElogZ(q, rho, ch, T, beta, noise)

    def Hm(m):  # at the error m itself (V' = m + noise/2 without rounding)
        m = np.asarray(m, dtype=float)
        return ch.se_H(Q0 - m, m + noise / 2, T, beta, score)

    def Em(m):
        m = np.asarray(m, dtype=float)
        return ch.se_ElogZ(Q0 - m, m + noise / 2, T, beta)

    a_pr = ch.perfect_recovery(rho, T, beta, noise)
    perfect = a_pr is not None
    if perfect:
        # the channel's threshold is where F(m) > 0 reaches m -> 0; if 1 / (H Delta) peaks
        # inside (0, 1) above it (beyond the tables' accuracy), that larger alpha is the threshold
        a_pr = _threshold(a_pr, _interior_threshold(rho, Hfun, noise))
        # at alpha_PR within rounding the table's noise could fake roots at m -> 0
        pr = a >= a_pr * (1 - 1e-9)
    else:
        pr = np.zeros(a.shape, dtype=bool)
    al, mmse, q_hat, conv, its, nfp, phi, (ia, mr) = _solve(np.where(pr, 0.0, a), rho, Hfun, Efun, perfect,
                                                             roots=True)
    al = np.atleast_1d(a).astype(float)
    prr = np.atleast_1d(pr)
    mmse, q_hat, phi = np.where(prr, 0.0, mmse), np.where(prr, np.inf, q_hat), np.where(prr, np.inf, phi)
    conv, its, nfp = np.where(prr, True, conv), np.where(prr, 0, its), np.where(prr, 1, nfp)
    status = np.where(prr, SE_STATUS[2], np.where(al == 0, SE_STATUS[1],
                                                  np.where(conv, SE_STATUS[0], SE_STATUS[5]))).astype(object)
    # Redo over the whole range of floats, in m itself, where the scan cannot be trusted: no root
    # in [1.9e-12, 1 - 1.9e-12] (an error below the scan: tiny noise, large alpha; or above it:
    # tiny alpha), a root (or a perfect recovery) where V' = Q0 - q is rounded (large rho), or a
    # root not converged (1 - m rounded near m = 1: Delta = 1/(1 - m) loses digits, tiny alpha).
    rounded = np.zeros(al.size, dtype=bool)
    rounded[ia[_rounding(Q0, mr, noise) > _ROUNDING_TOL]] = True
    m_first = 1 / (1 + np.exp(-_Z_GRID[0]))
    scan_pr = (mmse == 0) & bool(_rounding(Q0, m_first, noise) > _ROUNDING_TOL)
    redo = ~prr & (np.isnan(mmse) | rounded | scan_pr | ~conv)  # (alpha = 0: mmse = 1, never redone)
    if np.any(redo):
        mmse[redo], q_hat[redo], conv[redo], its[redo], nfp[redo], phi[redo], status[redo] = _solve_wide(
            al[redo], rho, Hm, Em, perfect)
    q = 1 + rho - mmse
    code = np.array([SE_STATUS.index(st) for st in status.tolist()], dtype=int)
    res = SEResult(al, mmse, q, q_hat, conv, its, nfp, phi, np.array(status.tolist(), dtype=str), code)
    if scalar:
        res = SEResult(*(x[0].item() for x in res))
    return res


_TABLE_REL_ACCURACY = 1e-3  # of 1 / (H Delta) from the tabulated Delta(m) (measured: 4e-5)


def _threshold(closed_form: float, interior: float) -> float:
    return interior if interior > closed_form * (1 + _TABLE_REL_ACCURACY) else closed_form


@_quiet
def _interior_threshold(rho, Hfun, noise: float = 0.0) -> float:
    """``max_m 1 / (H(Q0 - m) Delta(m))`` over the solver's grid of ``m`` (0 if none is finite),
    leaving out the ``m`` where ``V' = Q0 - q`` is rounded by more than ``1e-6`` (large ``rho``)."""
    tab = _denoising_table(float(rho))
    m = 1 / (1 + np.exp(-_Z_GRID))
    HD = Hfun(1 + rho - m) * _delta_of_m(tab, m)
    HD = HD[np.isfinite(HD) & (HD > 0) & (_rounding(1 + rho, m, noise) <= _ROUNDING_TOL)]
    return float(1.0 / HD.min()) if HD.size else 0.0


def perfect_recovery_threshold(rho: float, T: int = 2, *, channel="softmax", beta: float = 1.0,
                               noise: float = 0.0):
    """The perfect-recovery threshold ``alpha_PR`` of a channel, or ``None`` if it has none.

    Below it the state evolution has a fixed point of error ``> 0``; from it on, the error
    is 0. It is ``max(dof / lim_{V'->0} V' H, max_m 1/(H Delta)(m))``: the channel's
    exact measurements a sample against the teacher's degrees of freedom, unless the
    ratio ``1/(H Delta)`` peaks inside ``(0, 1)``.

    Example:
        >>> import aim_tutorial as aim
        >>> aim.perfect_recovery_threshold(0.5, 2, channel="relu")   # 2 (2 rho - rho^2) / (T^2 + T)
        0.25

    Chapter 4, section "Attention beyond the softmax: ReLU, sigmoid and any elementwise map".
    """
    ch = _validate(rho, T, channel, beta, noise, "exact")
    a_pr = ch.perfect_recovery(float(rho), T, float(beta), float(noise))
    if a_pr is None:
        return None
    rho, noise = float(rho), float(noise)
    interior = _interior_threshold(rho, lambda q: _H(q, rho, ch, T, beta, noise, "exact"), noise)
    return float(_threshold(a_pr, interior))


# ---------------------------------------------------------------------------
# label-space error


def label_space_error(q, rho: float, T: int = 2, *, channel="softmax", beta: float = 1.0,
                      noise: float = 0.0, key=None, n_samples: int = 200_000):
    """Bayes-optimal error on the outputs, ``E_omega[E ||g(h)||^2 - ||E g(h)||^2]``, eq. (bo-label).

    ``omega ~ N(0, q C)``, ``h | omega ~ N(omega, (Q0 - q + noise/2) C)``, summed over
    the ``T^2`` entries of ``y``. Hardmax (T = 2) in closed form,
    ``1 - (2/pi) arcsin(t / (1 + t))``, ``t = q / V'``; softmax T = 2 by nested
    composite Gauss-Legendre quadrature, refined at the sigmoid's step (accurate to 1e-10 up to
    ``beta = 1000``); softmax ``T > 2`` and the generic channel (:func:`aim_tutorial.generic_channel`)
    by Monte Carlo (``key`` required); elementwise channels by quadrature, panelled at the kinks of the map.

    Args:
        q: overlap(s) from :func:`solve_state_evolution`, in ``[0, Q0]`` (finite, scalar or array); at
            ``q = Q0`` without noise the error is exactly 0 (``y = g(omega)`` is known).
        rho, T, channel, beta, noise: as :func:`solve_state_evolution` (``linear`` gives
            ``E ||h - E h||^2 = (Q0 - q + noise/2)(T^2 + T)``).
        key: ``jax.random`` key, needed only for Monte Carlo.
        n_samples: Monte Carlo samples (``omega`` draws x 64 ``h`` draws each), an integer ``>= 64``.

    Chapter 4, section "Noise and the error on the outputs".
    """
    ch = _validate(rho, T, channel, beta, noise, "exact")
    if ch.label_error is None:
        raise ValueError(f"the error on the outputs is not available for channel {ch.name!r}; "
                         f"it is for {tuple(n for n in _ch.registered() if _ch.get(n).label_error)}")
    rho, noise = float(rho), float(noise)
    qq = _overlap(q, rho)
    if key is not None:
        _checks.prng_key("key", key)
    n_samples = _checks.integer_at_least("n_samples", n_samples, 64)
    _checks.check_memory(f"label_space_error(n_samples={n_samples})", 4 * n_samples * T * T)
    Vp = 1 + rho - qq + noise / 2
    # q = Q0 without noise on h: h = omega is known, and so is g(h): its variance is 0 (label noise
    # or not: the error is the one on g(h)); elsewhere the channel's formula (V' = 1 is only a
    # placeholder for the points it does not need)
    exact = Vp <= 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        out = ch.label_error(qq, np.where(exact, 1.0, Vp), T, beta, key, n_samples)
    out = np.where(exact, 0.0, out)
    return float(out) if np.ndim(out) == 0 else out


def _label_mc(key, q, Vp, T, beta, n_omega):
    return _ch.softmax.label_mc(key, q, Vp, T, beta, n_omega)


# ---------------------------------------------------------------------------
# generic channel: H(q) by Monte Carlo with common random numbers


@_quiet
def _propagated_std(mmse, rho, lm, log_H, log_H_rep):
    """Standard error of the roots ``mmse`` of ``alpha H Delta = 1`` from that of ``log H``.

    ``log_H`` (``n_m``) the estimate on the grid ``lm = log m``; ``log_H_rep`` (``n_m, R``) ``R``
    independent replicas of it, each ``1/R`` of the draws: the standard error of the full estimate
    is their spread over ``sqrt(R)``. Implicit-function theorem at the root:
    ``sd(m) = sd(log H(m)) / |d log(H Delta) / dm|``. 0 where ``mmse`` is not inside the grid's
    range (``alpha = 0``: ``mmse = 1`` exactly)."""
    tab = _denoising_table(float(rho))
    R = log_H_rep.shape[1]
    sd_grid = np.std(log_H_rep, axis=1, ddof=1) / math.sqrt(R)
    hs = CubicSpline(lm, log_H)
    out = np.zeros(np.shape(mmse))
    inside = np.isfinite(mmse) & (mmse > 0) & (mmse < 1)
    m = np.clip(np.where(inside, mmse, math.exp(lm[0])), math.exp(lm[0]), math.exp(lm[-1]))
    sd = np.interp(np.log(m), lm, sd_grid)
    # d log(H Delta) / dm = (d log H / d log m + d log Delta / d log m) / m
    h = 1e-4
    d_log_delta = (np.log(_delta_of_m(tab, m * math.exp(h))) - np.log(_delta_of_m(tab, m * math.exp(-h)))) / (2 * h)
    slope = (hs(np.log(m), 1) + d_log_delta) / m
    out[inside] = (sd / np.abs(slope))[inside]
    return np.where(np.isnan(mmse), np.nan, out)


class GenericSEResult(NamedTuple):
    """Fixed point of the generic channel's state evolution (arrays over ``alpha``).

    Attributes:
        alpha, mmse, q, q_hat, converged, n_fixed_points: as :class:`SEResult`.
        mmse_std: Monte Carlo standard error of ``mmse``: the error of ``H`` (from ``n_batches``
            independent replicas) propagated through the fixed point (implicit-function theorem).
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
    ``mmse_std`` is the Monte Carlo error of ``H`` propagated through the fixed point by the
    implicit-function theorem: at the root ``alpha H Delta = 1``, so an error ``dH`` moves it by
    ``dm = -d log H / (d log(H Delta) / dm)``. The standard error of ``log H`` at the root comes
    from ``n_batches`` independent replicas of the estimate, each with its own ``omega`` draws
    *and its own prior draws* ``zeta`` (``1/n_batches`` of each: the error of the shared prior
    draws is in it too), their spread over ``sqrt(n_batches)``. It is the error of the fixed point
    (measured: within a factor 2 of the spread of ``mmse`` over independent keys), not the
    importance-sampling bias (``q_hat`` low by a few % at 2048 prior draws).

    The score centres the prior draws about their sample mean ``zeta_bar``
    (:func:`aim_tutorial.channels.generic_output_score`). Without it ``H`` carried
    ``||zeta_bar||^2 / V'`` (about ``T (T + 1) / (n_zeta V')``; measured: ``H V'`` was
    ``||zeta_bar||^2`` to 2 % seed by seed at ``label_noise = 1e6``), the same at every
    ``omega``, so no ``n_omega`` averaged it out: a positive bias that swamped the signal,
    about ``2 T (T + 1) / label_noise``, once ``label_noise`` exceeded about ``n_zeta V'``. At
    ``label_noise = 1e6``, ``alpha = 10``, ``rho = 0.5`` the error came out 0.991 +- 0.004 at the
    default sizes and 0.64 (mean of 8 keys) at ``n_zeta = 256``, for the prior's 1; now
    0.9999 +- 0.0003. At chapter 4's settings the centring moves the error by at most 0.05 of
    its ``mmse_std``.

    Args:
        key: ``jax.random`` key.
        alpha: sample complexity, scalar or 1-d array, ``>= 0``.
        rho: width ratio in ``[1e-6, 1e24]`` (:data:`aim_tutorial.rmt.RHO_MIN`, ``RHO_MAX``).
        g: output function, one ``(T, T)`` matrix to one ``(T, T)`` matrix (hashable: a
            module-level function or a ``functools.partial``).
        T: tokens a sequence, ``2 <= T <= 4``.
        label_noise: variance of the iid Gaussian noise on every entry of ``y``, ``> 0``.
        noise: variance of the Gaussian noise on ``h`` (diagonal ``noise``, off ``noise/2``), ``>= 0``.
        n_omega, n_zeta: Monte Carlo sizes (outer ``omega`` draws; inner prior draws).
        n_m: number of grid points in ``m``.
        n_batches: replicas for the error bar (divides ``n_omega``; ``n_zeta >= 2 n_batches``).

    Returns:
        :class:`GenericSEResult`.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> r = aim.generic_state_evolution(jax.random.key(0), 0.2, 0.5, lambda h: h, label_noise=0.5,
        ...                                 n_omega=256, n_zeta=256, n_m=8)
        >>> r.mmse.shape
        (1,)

    Chapter 4, section (sec-bo-one-curve).
    """
    _checks.prng_key("key", key)
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
    if n_zeta < 2 * n_batches:
        raise ValueError(f"n_zeta must be at least 2 n_batches (prior draws for each replica), "
                         f"got {n_zeta} and {n_batches}")
    _ch.generic.check_output_function("g", g, T)
    a = np.atleast_1d(_nonneg_array("alpha", alpha, max_ndim=1))
    _checks.check_memory(f"generic_state_evolution(n_omega={n_omega}, n_zeta={n_zeta})",
                         2 * n_omega * n_zeta * T * T)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    z_omega = _ch.symmetric_gaussian(k1, (n_omega, T, T))
    z_h = _ch.symmetric_gaussian(k2, (n_omega, T, T))
    z_y = jax.random.normal(k3, (n_omega, T, T))
    zeta = _ch.symmetric_gaussian(k4, (n_zeta, T, T))
    Q0 = 1 + rho
    m_grid = 1 / (1 + np.exp(-np.linspace(-7.0, 5.0, n_m)))  # errors from 1e-3 to 0.993
    Hb, Eb, ess, Hr = [], [], [], []
    nb_omega = n_omega // n_batches
    for m in m_grid:
        q, Vp = float(Q0 - m), float(m + noise / 2)
        f, lz, e = _ch.generic.generic_moments(g, z_omega, z_h, z_y, zeta, q, Vp, label_noise, n_batches)
        Hb.append(np.asarray(f))
        Eb.append(np.asarray(lz))
        ess.append(float(e))
        # the replicas of the error bar: omega batch b with its own prior draws zeta[b::n_batches]
        Hr.append([float(_ch.generic.generic_moments(
            g, z_omega[b * nb_omega:(b + 1) * nb_omega], z_h[b * nb_omega:(b + 1) * nb_omega],
            z_y[b * nb_omega:(b + 1) * nb_omega], zeta[b::n_batches], q, Vp, label_noise, 1)[0][0])
            for b in range(n_batches)])
    Hb, Eb, Hr = np.array(Hb), np.array(Eb), np.array(Hr)  # (n_m, n_batches)
    if not (np.all(np.isfinite(Hb)) and np.all(np.isfinite(Eb)) and np.all(np.isfinite(Hr))):
        raise ValueError("g must return finite values: the Monte Carlo estimates of q_hat / alpha are not "
                         "finite (g gave NaN or inf on some of the draws h of the attention indices)")
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
    mmse_std = _propagated_std(mmse, rho, lm, np.log(Hb.mean(axis=1)), np.log(np.maximum(Hr, 1e-300)))
    # outside the grid of m the interpolant is clamped: flag it (a root at an end of the grid, within
    # the rounding of the root, 1e-12 relative, is not outside: 2.2e-16 above m_grid[-1] was flagged)
    conv = conv & (mmse >= m_grid[0] * (1 - 1e-12)) & (mmse <= m_grid[-1] * (1 + 1e-12)) | (a == 0)
    return GenericSEResult(al, mmse, Q0 - mmse, q_hat, conv, nfp, mmse_std, m_grid, Hb.mean(axis=1), min(ess))
