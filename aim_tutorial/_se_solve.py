"""The two scans that solve the state evolution's fixed-point equation (private to :mod:`aim_tutorial.state_evolution`).

The roots in ``m`` of ``alpha H(Q0 - m) Delta(m) = 1``, eq. (bo-root): on a grid of ``z = logit(m)``
with bisection inside each cell of a sign change (:func:`_solve`), and over the whole range of
floats for the ends of ``m`` (:func:`_solve_wide`). Split out of ``state_evolution.py`` (issue 49);
``state_evolution`` imports these names back. :data:`SE_STATUS` is defined here (the statuses of
:func:`_solve_wide`) and documented as ``aim_tutorial.state_evolution.SE_STATUS``. The table
functions are read from :mod:`aim_tutorial._se_denoising` here: a test that replaces one for the
solvers sets it on this module.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._se_denoising import _delta_of_m, _denoising_table, _log_delta, _psi
from ._status import Coded


class SEStatus(Coded):
    """Why the state evolution stopped at one ``alpha``: the codes of ``SEResult.code``.

    Each member's message is the status string of :class:`aim_tutorial.state_evolution.SEResult`
    (``status``, the strings of ``SE_STATUS``, in this order).

    Example:
        >>> from aim_tutorial.state_evolution import SEStatus
        >>> SEStatus.RESIDUAL.message, SEStatus.RESIDUAL.converged, SEStatus.ROUNDED_TO_0.converged
        ('residual above 1e-9', False, True)
    """

    CONVERGED = 0, "converged"
    ALPHA_ZERO = 1, "alpha = 0"
    PERFECT_RECOVERY = 2, "perfect recovery"
    ROUNDED_TO_0 = 3, "error below 1e-320, rounded to 0"
    ROUNDED_TO_1 = 4, "error within 1e-16 of 1, rounded to 1"
    RESIDUAL = 5, "residual above 1e-9"
    NO_FIXED_POINT = 6, "no fixed point: H is not finite"

    @property
    def converged(self) -> bool:
        """The root was found, or perfect recovery, or an error that rounds to 0 or to 1 (codes 0-4)."""
        return self <= SEStatus.ROUNDED_TO_1


SEStatus.__module__ = "aim_tutorial.state_evolution"  # its public home (state_evolution imports it back)

# the values of SEResult.status (documented as aim_tutorial.state_evolution.SE_STATUS): the messages
SE_STATUS = tuple(m.message for m in SEStatus)



_Z_GRID = np.linspace(-27.0, 27.0, 541)  # m = sigmoid(z): resolves both ends of (0, 1)


def _quiet(f):
    """``f`` without NumPy's floating-point warnings (``H`` at ``V' = 0`` is ``inf``, handled by sign)."""
    @functools.wraps(f)
    def quiet(*args, **kwargs):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            return f(*args, **kwargs)
    return quiet


def _sign_changes(F):
    """Cells ``[i, i + 1]`` of each row of ``F`` where its sign changes, a value exactly 0 counted as
    positive: a root that falls on a scan point (``F = 0`` there, which an ``alpha = 1 / (H Delta)``
    at a scan point gives) is a root, at that point; NaN has no sign and makes no change."""
    pos, ok = F >= 0, ~np.isnan(F)
    return (pos[:, :-1] != pos[:, 1:]) & ok[:, :-1] & ok[:, 1:]


@_quiet
def _solve(alpha, rho, Hfun, Efun, perfect_possible, roots=False):
    """Roots in ``m`` of ``alpha H(Q0 - m) Delta(m) = 1`` for every ``alpha`` (vectorised).

    The scan covers ``m`` in ``[1.9e-12, 1 - 1.9e-12]``; ``roots=True`` also returns every root
    ``(index of alpha, m)`` found (for :func:`solve_state_evolution`'s checks)."""
    tab = _denoising_table(float(rho))
    Q0 = 1 + rho
    alpha = np.atleast_1d(np.asarray(alpha, dtype=float))
    m_grid = 1 / (1 + np.exp(-_Z_GRID))
    HD = Hfun(Q0 - m_grid) * _delta_of_m(tab, m_grid)  # F = alpha * HD - 1
    F = alpha[:, None] * HD[None, :] - 1
    cross = _sign_changes(F)
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
    out = (alpha, mmse, q_hat, conv, np.where(nfp > 0, n_iter, 0), nfp, phi)
    return out + ((ia, mr),) if roots else out



# the whole range of floats in z = logit(m): m from e^-736 (1e-320) to 1 - e^-40 (rounds to 1);
# unit steps beyond the main scan, where H Delta is a power law of m or of 1 - m
_Z_WIDE = np.concatenate([np.arange(-736.0, -27.0, 1.0), _Z_GRID, np.arange(28.0, 41.0, 1.0)])
_WIDE_ITER = 64


def _log_m_parts(z):
    """``log m`` and ``log(1 - m)`` for ``m = 1 / (1 + e^-z)``, accurate at both ends."""
    z = np.asarray(z, dtype=float)
    l1p = np.log1p(np.exp(-np.abs(z)))
    return np.where(z < 0, z - l1p, -l1p), np.where(z < 0, -l1p, -z - l1p)



@_quiet
def _solve_wide(alpha, rho, Hm, Em, perfect_possible):
    """Roots of eq. (bo-root) over the whole range of floats, for ``alpha > 0`` (vectorised).

    ``Hm(m)`` and ``Em(m)`` are ``H`` and ``E log Z_out`` at the error ``m`` itself
    (``V' = m + noise/2``, not ``Q0 - q``, which rounds away an error below ``1e-16 Q0``).
    ``F > 0`` is decided in logs, ``log alpha + log H(m) + log Delta(m) > 0``, on a scan of
    ``z = logit(m)`` from ``-736`` (``m = 1e-320``) to ``40`` (``m`` rounds to 1), then by
    bisection in ``z``. Returns ``(mmse, q_hat, converged, iterations, n_fixed_points, phi, status)``.
    """
    tab = _denoising_table(float(rho))
    Q0 = 1 + rho
    alpha = np.atleast_1d(np.asarray(alpha, dtype=float))
    la = np.log(alpha)
    perfect_possible = bool(perfect_possible)

    def log_hd(z):
        log_m, log_1m = _log_m_parts(z)
        m = np.exp(log_m)
        lh = np.log(Hm(m))
        # H that overflows (K / V' at V' < 1e-308) or underflows says nothing: NaN, no crossing
        return np.where(np.isfinite(lh), lh, np.nan) + _log_delta(tab, log_m, log_1m), m

    lhd, _ = log_hd(_Z_WIDE)
    S = la[:, None] + lhd[None, :]  # sign of F
    cross = _sign_changes(S)
    fin = np.isfinite(lhd)
    if not fin.any():
        fin[0] = True  # every value NaN: no sign anywhere
    S_first, S_last = S[:, np.argmax(fin)], S[:, fin.size - 1 - np.argmax(fin[::-1])]
    ia, iz = np.nonzero(cross)
    lo, hi, slo = _Z_WIDE[iz], _Z_WIDE[iz + 1], S[ia, iz]
    for _ in range(_WIDE_ITER):
        mid = (lo + hi) / 2
        sm = la[ia] + log_hd(mid)[0]
        same = np.sign(sm) == np.sign(slo)
        lo, slo, hi = np.where(same, mid, lo), np.where(same, sm, slo), np.where(same, hi, mid)
    sr, mr = log_hd((lo + hi) / 2)
    fr = np.expm1(la[ia] + sr)
    qr = Q0 - mr
    qhr = alpha[ia] * Hm(mr)

    def phi_of(a, q, qh, m):
        psi = np.where(qh > 0, _psi(tab, np.maximum(qh, 1e-300)), 0.0)
        out = -q * qh / 4 + psi + a * Em(m)
        return np.where(np.isinf(qh), np.inf, out)

    phir = phi_of(alpha[ia], qr, qhr, mr)

    na = alpha.size
    mmse, q_hat, phi = np.full(na, np.nan), np.full(na, np.nan), np.full(na, np.nan)
    conv = np.zeros(na, dtype=bool)
    status = np.full(na, SE_STATUS[6], dtype=object)
    nfp = np.bincount(ia, minlength=na)
    best = np.full(na, -np.inf)
    for j in range(ia.size):  # keep the root of largest free entropy (NaN: only if it is alone)
        a = ia[j]
        score = phir[j] if not np.isnan(phir[j]) else -np.inf
        if score > best[a] or np.isnan(mmse[a]):
            best[a], phi[a], mmse[a], q_hat[a] = score, phir[j], mr[j], qhr[j]
            conv[a] = abs(fr[j]) < 1e-9
            status[a] = SE_STATUS[0] if conv[a] else SE_STATUS[5]
    none = nfp == 0
    # no sign change: F >= 0 down to m = 1e-320 (perfect recovery, or an error below the floats;
    # 0 counts as positive, as in _sign_changes), or F < 0 up to m = 1 - 4e-18 (an error that
    # rounds to 1); NaN H: say so
    low, high = none & (S_first >= 0), none & (S_last < 0)
    idx = low & perfect_possible
    mmse[idx], q_hat[idx], conv[idx], phi[idx], status[idx] = 0.0, np.inf, True, np.inf, SE_STATUS[2]
    for idx, m_end, st in ((low & (not perfect_possible), math.exp(_Z_WIDE[0]), SE_STATUS[3]),
                           (high & ~low, 1.0, SE_STATUS[4])):
        if np.any(idx):
            qh = alpha[idx] * Hm(np.array([m_end]))
            mmse[idx] = 0.0 if m_end < 0.5 else 1.0
            q_hat[idx] = qh
            phi[idx] = phi_of(alpha[idx], Q0 - mmse[idx], qh, m_end)
            conv[idx], status[idx] = True, st
    return mmse, q_hat, conv, np.where(nfp > 0, _WIDE_ITER, 0), nfp, phi, status


def _rounding(Q0: float, m, noise: float):
    """Relative error of ``V' = Q0 - q + noise/2`` computed from ``q = Q0 - m`` (rounded)."""
    m = np.asarray(m, dtype=float)
    return np.abs((Q0 - (Q0 - m)) - m) / (m + noise / 2)


_ROUNDING_TOL = 1e-6  # relative error of V' beyond which the scan in q is redone in m itself
