"""The denoising side of the state evolution, tabulated per ``rho`` (private to :mod:`aim_tutorial.state_evolution`).

``Delta(m)``, the inverse of ``m = mmse_rho(Delta)`` (:func:`aim_tutorial.rmt.mmse_denoising`), and the
denoising free entropy ``psi_rho(q_hat)``, eq. (rep-psi), from one table per ``rho``; ``log Delta``
at both ends of ``m`` for the whole-range solver. Split out of ``state_evolution.py`` (issue 49);
``state_evolution`` imports these names back (``aim_tutorial.state_evolution._denoising_table`` is
the same cached function).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from scipy.interpolate import CubicSpline

from .counting import dof_fraction


def _mmse(delta, rho):
    from .rmt import mmse_denoising

    return mmse_denoising(delta, rho)



# ---------------------------------------------------------------------------
# the denoising side: Delta(m) = mmse^{-1}(m) and psi(q_hat), tabulated per rho

_LOG_DMIN, _LOG_DMAX, _N_DELTA = -6.0, 6.0, 241


class _DenoisingTable(NamedTuple):
    rho: float
    log_delta_of_log_m: CubicSpline  # log Delta as a function of log m
    # int_u^{u_max} (Q0 - mmse) e^{-u'} / 4 du' (u = log Delta), a spline in v = -u: summed from the
    # top of the table down, so that small q_hat = e^{-u} (small values) lose no digits
    psi_spline: CubicSpline
    u_max: float
    slope: float  # lim mmse/Delta at Delta -> 0
    log_m_min: float
    log_m_max: float
    logit: bool = False  # small rho: the inverse is a spline of log Delta in x = logit(m), not log m
    x_min: float = 0.0  # its range in x (logit tables)
    x_max: float = 0.0


def _increasing(v):
    """The entries of ``v`` above every entry before them: a strictly increasing subsequence that
    the spline of the inverse can use (the MMSE is increasing in Delta; its rounding at the
    extremes of the table may not be)."""
    v = np.asarray(v, dtype=float)
    return v > np.maximum.accumulate(np.concatenate([[-np.inf], v[:-1]]))


def _tail_integral(u, f) -> CubicSpline:
    """``v -> int_{-v}^{u[-1]} f(u') du'`` from the cubic spline of ``f`` on the grid ``u``: the
    integral from the top of the grid down. (The antiderivative from ``u[0]`` up, differenced at
    ``u[-1]``, would lose every digit of the small values: at rho = 1e-5 it is 2.5e5 at the top,
    where psi(1e-8) = 2.5e-14.)"""
    return CubicSpline(-u[::-1], f[::-1]).antiderivative()


@functools.lru_cache(maxsize=64)
def _denoising_table(rho: float) -> _DenoisingTable:
    # small rho: mmse_rho(Delta) ~ (2 rho) Delta saturates only at Delta ~ 1/(2 rho); below rho = 1e-4
    # the table goes on to 1e4/rho (20 points a decade), where 1 / (1 - mmse) = Delta (1 + O(1/(rho Delta)))
    log_dmax = _LOG_DMAX if rho >= 1e-4 else math.ceil(math.log10(1e4 / rho) - 1e-9)
    n_delta = _N_DELTA + 20 * int(log_dmax - _LOG_DMAX)
    u = np.linspace(_LOG_DMIN * math.log(10), log_dmax * math.log(10), n_delta)
    delta = np.exp(u)
    m = np.asarray(_mmse(delta, rho), dtype=float)
    m = np.where(delta > 1e3, np.minimum(m, 1.0 - 0.5 / delta), m)  # guard 1 - 1/Delta against rounding
    logm = np.log(m)
    if log_dmax > _LOG_DMAX:
        # m runs from 1e-6 rho to 1 - rho/100 over the decades: log Delta is smooth (linear at
        # both ends) in x = logit(m), where it is steep in log m near m = 1
        x = logm - np.log1p(-m)
        keep = _increasing(x)
        x, u_k = x[keep], u[keep]
        inv = CubicSpline(x, u_k)
        Q0 = 1 + rho
        f = (Q0 - m) * np.exp(-u) / 4
        psi_spline = _tail_integral(u, f)
        slope = dof_fraction(rho)
        # the bounds in log m are not used by this table (it is indexed by x): NaN
        return _DenoisingTable(rho, inv, psi_spline, float(u[-1]), slope, math.nan, math.nan,
                               True, float(x[0]), float(x[-1]))
    keep = _increasing(logm)
    logm, u_k = logm[keep], u[keep]
    inv = CubicSpline(logm, u_k)
    Q0 = 1 + rho
    f = (Q0 - m) * np.exp(-u) / 4
    psi_spline = _tail_integral(u, f)
    slope = dof_fraction(rho)
    return _DenoisingTable(rho, inv, psi_spline, float(u[-1]), slope, float(logm[0]), float(logm[-1]))


def _delta_of_m(tab: _DenoisingTable, m):
    """``Delta`` with ``mmse_rho(Delta) = m`` (vectorised, ``0 < m < 1``)."""
    m = np.asarray(m, dtype=float)
    lm = np.log(m)
    if tab.logit:
        with np.errstate(divide="ignore"):
            x = lm - np.log1p(-m)
        out = np.exp(tab.log_delta_of_log_m(np.clip(x, tab.x_min, tab.x_max)))
        out = np.where(x < tab.x_min, m / tab.slope, out)
        return np.where(x > tab.x_max, 1.0 / np.maximum(1.0 - m, 1e-300), out)
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
    val = tab.psi_spline(-uc) + tail
    # below the table (q_hat > e^{12 ln 10}) mmse ~ slope * Delta: int (Q0 - slope / x) / 4 dx
    lo = u0 < _LOG_DMIN * math.log(10)
    q_max = 10.0**(-_LOG_DMIN)
    with np.errstate(divide="ignore", invalid="ignore"):
        extra = Q0 / 4 * (q_hat - q_max) - tab.slope / 4 * np.log(np.maximum(q_hat, q_max) / q_max)
    # above the table (q_hat < e^{-u_max}) mmse ~ 1: int_0^{q_hat} (Q0 - 1) / 4 dx, continuous with tail
    hi = u0 > tab.u_max
    return np.where(lo, val + extra, np.where(hi, (Q0 - 1) * q_hat / 4, val))



def _log_delta(tab: _DenoisingTable, log_m, log_1m):
    """``log Delta(m)`` from ``log m`` and ``log(1 - m)``: the table, ``m / slope`` below it
    (the small-``Delta`` asymptote of ``mmse_rho``), ``1 / (1 - m)`` above it."""
    if tab.logit:
        x = log_m - log_1m
        inside = tab.log_delta_of_log_m(np.clip(x, tab.x_min, tab.x_max))
        return np.where(x < tab.x_min, log_m - math.log(tab.slope), np.where(x > tab.x_max, -log_1m, inside))
    inside = tab.log_delta_of_log_m(np.clip(log_m, tab.log_m_min, tab.log_m_max))
    return np.where(log_m < tab.log_m_min, log_m - math.log(tab.slope),
                    np.where(log_m > tab.log_m_max, -log_1m, inside))
