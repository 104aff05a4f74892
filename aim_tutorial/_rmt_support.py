"""The support of the law of ``Y`` and the quadrature over it (private to :mod:`aim_tutorial.rmt`).

The edges of the support, eq. (eq-rmt-edges): the critical values of the inverse function
``z(G)`` at the real roots of the quartic ``z'(g) = 0``; and the vectorised adaptive
Gauss-Legendre quadrature of powers of the density over those intervals (for
:func:`aim_tutorial.rmt.spectral_integral` and :func:`aim_tutorial.rmt.mmse_denoising`). Split out
of ``rmt.py`` (issue 49); ``rmt`` imports these names back, so ``aim_tutorial.rmt._edges_x`` and
the like are the same objects.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ._rmt_resolvent import _G_real_axis, _huge, _zprime


# Below this delta the quartic of the edges has roots of very different sizes (the noise is far
# below the scale of S): they are found by scaling (the Newton polygon).
_DELTA_TINY = 1e-20



# ----------------------------------------------------------------------------
# support
# ----------------------------------------------------------------------------


def _w_of_G(G, delta, s):
    """Shifted inverse function ``z(G) - s = 1/G + G/(1 - G/s) + delta G``."""
    return 1.0 / G + G / (1.0 - G / s) + delta * G


def _roots_scaled(coeffs) -> np.ndarray:
    """Roots of a real polynomial (highest power first) whose roots differ in size by many decades.

    Newton polygon: each edge of the upper convex hull of ``(k, log|c_k|)`` gives a group of
    roots of size ``gamma`` (as many as the edge is long); the polynomial in ``y = g/gamma``,
    divided by its largest coefficient (computed in logs: no overflow), has those roots at
    ``|y| ~ 1``; the terms of the powers along the edge give them to leading order (a companion
    matrix with entries of order one), and Newton steps on the whole scaled polynomial, kept
    where they reduce the residual, polish them.
    """
    c = np.asarray(coeffs, dtype=float)
    n = c.size - 1
    powers = np.arange(n, -1, -1)
    nz = c != 0
    with np.errstate(divide="ignore"):
        logc = np.log(np.abs(c))
    pts = sorted(zip(powers[nz], logc[nz]))
    hull: list = []
    for pt in pts:  # upper hull, by increasing power
        while (
            len(hull) >= 2
            and (
                (hull[-1][0] - hull[-2][0]) * (pt[1] - hull[-2][1])
                - (hull[-1][1] - hull[-2][1]) * (pt[0] - hull[-2][0])
            )
            >= 0
        ):
            hull.pop()
        hull.append(pt)
    # merge the edges whose root sizes differ by less than 1e4: one well-conditioned group
    groups = [list(hull[:2])]
    for pt in hull[2:]:
        (pa, la), (pb, lb) = groups[-1][-2], groups[-1][-1]
        if abs((la - lb) / (pb - pa) - (lb - pt[1]) / (pt[0] - pb)) < math.log(1e4):
            groups[-1].append(pt)
        else:
            groups.append([groups[-1][-1], pt])
    roots = []
    for grp in groups:
        (p0, l0), (p1, l1) = grp[0], grp[-1]
        lg = (l0 - l1) / (p1 - p0)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            b = np.where(nz, np.sign(c) * np.exp(np.minimum(logc + powers * lg - (l1 + p1 * lg), 700.0)), 0.0)
        # the group's roots are those of the terms of powers p0..p1 (the others lie below the hull)
        y = np.roots(b[n - p1 : n - p0 + 1]).astype(complex)
        for _ in range(4):
            p, dp = np.polyval(b, y), np.polyval(np.polyder(b), y)
            ok = np.abs(dp) > 1e-300
            y_new = np.where(ok, y - p / np.where(ok, dp, 1.0), y)
            y = np.where(np.abs(np.polyval(b, y_new)) < np.abs(p), y_new, y)
        roots.extend(math.exp(lg) * y)
    return np.array(roots, dtype=complex)


def _edges_g(delta: float, s: float) -> list[tuple[float, float, float, float]]:
    """Support intervals ``(a, b, G(a), G(b))`` in the shifted variable ``w = x - s`` (a new list
    each call, of the tuples :func:`_edges_g_cached` keeps)."""
    return list(_edges_g_cached(float(delta), float(s)))


@functools.lru_cache(maxsize=256)
def _edges_g_cached(delta: float, s: float) -> tuple[tuple[float, float, float, float], ...]:
    """Support intervals ``(a, b, G(a), G(b))`` in the shifted variable ``w = x - s``.

    Cached: an iteration of GAMP-RIE asks for the edges of one ``delta`` twice (its RIE and
    its ``mmse_rho``), a state-evolution table for each ``delta`` of its grid.

    ``G`` at an edge is the critical point ``g_c`` of the inverse function whose critical value
    the edge is: exact, no root of the cubic needed. At ``delta >= _huge(s)`` the semicircle
    of variance ``v = 1 + delta``: ``(-2 sqrt(v), 2 sqrt(v), -1/sqrt(v), 1/sqrt(v))``.
    """
    if delta >= _huge(s):
        r = math.sqrt(1.0 + delta)
        return ((-2.0 * r, 2.0 * r, -1.0 / r, 1.0 / r),)
    # z'(G) = 0  <=>  delta G^4 - 2 delta s G^3 + (delta s^2 + s^2 - 1) G^2 + 2 s G - s^2 = 0
    coeffs = [delta, -2 * delta * s, delta * s * s + s * s - 1, 2 * s, -s * s]
    q = np.roots(coeffs) if delta >= _DELTA_TINY else _roots_scaled(coeffs)
    g = np.sort(q[np.abs(q.imag) <= 1e-9 * (1 + np.abs(q))].real)
    gl = g[g < 0]
    gr = g[(g > 0) & (g < s)]
    if gl.size == 0 or gr.size == 0:  # pragma: no cover - excluded by theory
        raise RuntimeError(f"support edges not found for delta={delta}, rho={s * s}")
    g1, g2 = gl.max(), gr.min()
    left, right = _w_of_G(g1, delta, s), _w_of_G(g2, delta, s)
    gaps = []
    others = np.array([v for v in g if v not in (g1, g2)])
    for lo, hi in itertools.pairwise(others):
        if lo < 0 < hi or lo < s < hi:
            continue
        mid = 0.5 * (lo + hi)
        with np.errstate(divide="ignore"):  # mid on the pole s: z' = +inf, no gap
            zp_mid = _zprime(mid, delta, s)
        if zp_mid < 0:
            a, b = _w_of_G(hi, delta, s), _w_of_G(lo, delta, s)
            if left <= a < b <= right:  # (<=: a bump narrower than the rounding of w, tiny delta)
                gaps.append((a, b, hi, lo))
    gaps.sort()
    edges, start, g_start = [], left, g1
    for a, b, g_a, g_b in gaps:
        edges.append((start, a, g_start, g_a))
        start, g_start = b, g_b
    edges.append((start, right, g_start, g2))
    return tuple((float(a), float(b), float(ga), float(gb)) for a, b, ga, gb in edges)


def _edges_shifted(delta: float, s: float) -> list[tuple[float, float]]:
    """Support intervals in the shifted variable ``w = x - s``."""
    return [(a, b) for a, b, _, _ in _edges_g(delta, s)]



def _edges_x(delta: float, s: float) -> list[tuple[float, float, float, float]]:
    """Support intervals ``(a, b, G(a), G(b))`` in ``x`` (not shifted).

    The edges are ``z(g_c) = 1/g_c + s^2/(s - g_c) + delta g_c`` computed directly, not as
    ``w + s``: the bump of the zero eigenvalues (``rho < 1``), of width ``~4 sqrt(delta (1 - rho))``
    at small ``delta``, can be narrower than the rounding of ``w = x - s``.
    """
    out = []
    huge = delta >= _huge(s)
    for a, b, ga, gb in _edges_g(delta, s):
        if huge:
            xa, xb = a + s, b + s
        else:
            xa = 1.0 / ga + s * s / (s - ga) + delta * ga
            xb = 1.0 / gb + s * s / (s - gb) + delta * gb
        out.append((xa, xb, ga, gb))
    return out



# ----------------------------------------------------------------------------
# quadrature of powers of the density
# ----------------------------------------------------------------------------

_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)


def _panel_rule(t0, t1):
    """Gauss-Legendre nodes/weights on panels ``[t0, t1]`` (arrays of shape (P,)) -> (P, 10)."""
    h = 0.5 * (t1 - t0)
    c = 0.5 * (t1 + t0)
    return c[:, None] + h[:, None] * _GL_X[None, :], h[:, None] * _GL_W[None, :]


def _integrand(t, a, b, delta, s, power):
    """Integrand in ``t`` with ``x = a + (b - a)(1 - cos t)/2`` (shifted variable ``w = x - s``).

    ``power`` an int ``p``: ``mu(x)^p dx/dt``. ``power == "xi2"``:
    ``mu(x) (w - 2 delta h(x))^2 dx/dt``, the second moment of the RIE's
    cleaned eigenvalues about ``sqrt(rho)``.
    """
    x = a + (b - a) * 0.5 * (1.0 - np.cos(t))
    G = _G_real_axis(x, delta, s)
    mu = np.clip(G.imag, 0, None) / np.pi
    jac = 0.5 * (b - a) * np.sin(t)
    if power == "xi2":
        return mu * (x - 2 * delta * G.real) ** 2 * jac
    return mu**power * jac


def _integrate_items(a, b, delta, s, power, owner=None, rtol=1e-12, max_rounds=30, n0=12, max_panels=20_000):
    """``int_a^b mu^power`` for many items at once, by vectorised adaptive Gauss-Legendre.

    Each item ``k`` is one interval ``[a_k, b_k]`` of the support of
    ``mu_{delta_k}`` (width ratio ``s_k^2``). The substitution
    ``x = a + (b - a)(1 - cos t)/2`` turns square-root edges into smooth
    integrands on ``t in [0, pi]``; a panel is accepted when its 10-point
    rule and the sum of the 10-point rules on its halves agree within
    ``rtol`` times the integral of its ``owner`` (the items of one
    ``(delta, rho)`` pair share an owner) times the panel's share of
    ``[0, pi]``; or within 1e-8 of that when halving stopped reducing the
    error (rounding noise of the roots). Otherwise it is halved. Returns
    (integrals, converged flags) per item.
    """
    m = a.size
    owner = np.arange(m) if owner is None else np.asarray(owner)
    n_own = int(owner.max()) + 1 if m else 0
    item = np.repeat(np.arange(m), n0)
    edges_t = np.linspace(0.0, np.pi, n0 + 1)
    t0 = np.tile(edges_t[:-1], m)
    t1 = np.tile(edges_t[1:], m)
    total = np.zeros(m)
    scale = None
    floor = np.maximum(1e-8, 1e-14 * delta) if power == "xi2" else np.full(m, 1e-8)
    parent_err = np.full(item.size, np.inf)
    converged = np.ones(m, dtype=bool)
    for rnd in range(max_rounds):
        tm = 0.5 * (t0 + t1)
        # coarse rule on the whole panel and fine rule on its two halves
        tc, wc = _panel_rule(t0, t1)
        tl, wl = _panel_rule(t0, tm)
        tr, wr = _panel_rule(tm, t1)
        T = np.concatenate([tc, tl, tr], axis=1)  # (P, 30)
        k = item[:, None]
        f = _integrand(T, a[k], b[k], delta[k], s[k], power)
        coarse = np.sum(f[:, :10] * wc, axis=1)
        fine = np.sum(f[:, 10:20] * wl, axis=1) + np.sum(f[:, 20:] * wr, axis=1)
        err = np.abs(fine - coarse)
        if scale is None:  # the owner's integral, from the first pass
            per_item = np.bincount(item, weights=fine, minlength=m)
            per_owner = np.bincount(owner, weights=per_item, minlength=n_own)
            scale = np.maximum(np.abs(per_owner[owner]), 1e-300)
        share = scale[item] * np.maximum((t1 - t0) / np.pi, 2.0**-20)
        ok = err <= rtol * share + 1e-14 * np.abs(fine)
        # rounding floor: a halving that did not divide the error by 4 means
        # the error estimate is rounding noise; accept it once it is below the
        # floor (1e-8; for "xi2" the cancellation in w - 2 delta h costs
        # log10(delta) digits, so 1e-14 delta when larger)
        ok |= (err <= floor[item] * share) & (err >= 0.25 * parent_err)
        last = rnd == max_rounds - 1 or 2 * np.count_nonzero(~ok) > max_panels
        if last:
            converged[np.unique(item[~ok])] = False
            ok[:] = True
        total += np.bincount(item[ok], weights=fine[ok], minlength=m)
        bad = ~ok
        if not np.any(bad):
            break
        item = np.concatenate([item[bad], item[bad]])
        parent_err = np.concatenate([err[bad], err[bad]])
        t0, t1 = np.concatenate([t0[bad], tm[bad]]), np.concatenate([tm[bad], t1[bad]])
    return total, converged


def _support_items(delta, rho):
    """Flatten the support intervals of every (delta, rho) pair into quadrature items."""
    owner, A, B, D, Sv = [], [], [], [], []
    for i, (dl, rh) in enumerate(zip(delta, rho)):
        s = math.sqrt(rh)
        for a, b in _edges_shifted(dl, s):
            owner.append(i)
            A.append(a)
            B.append(b)
            D.append(dl)
            Sv.append(s)
    return (np.array(owner), np.array(A), np.array(B), np.array(D), np.array(Sv))
