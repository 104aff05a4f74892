"""The Stieltjes transform ``G`` of the law of ``Y``: the roots of its cubic (private to :mod:`aim_tutorial.rmt`).

The cubic of :mod:`aim_tutorial.rmt`, eq. (eq-rmt-cubic), in the shifted variable
``w = z - sqrt(rho)``: its three roots (companion matrix and Newton steps, or scaling and deflation
at small ``delta``), the physical root on the real axis and off it, and the asymptotic forms at the
extremes (the moment series far from the support, the semicircle at huge ``delta``). Split out of
``rmt.py`` (issue 49); ``rmt`` imports these names back, so ``aim_tutorial.rmt._G_real_axis`` and
the like are the same objects.
"""

from __future__ import annotations

import numpy as np


# Below this delta the cubic is solved by scaling and deflation: its roots differ in size by up
# to ~1/delta (the largest is ~ w/delta off the bump of the atom), and the companion matrix gives
# the small ones to only ~eps/delta absolute. Two Newton steps repair that away from the edges, not at
# the near-double root of an edge: within 1e-10 of an edge the companion matrix was off by up to
# 6e-4 relative at delta = 1e-18, 4e-7 at 1e-10, 1.2e-7 at 1e-6, the deflated cubic by at most
# 2e-8 (the sqrt(eps) of a double root). At 1e-4 the companion matrix is the more accurate away
# from the edges (7e-15 against 4e-14 relative).
_DELTA_DEFLATE = 1e-6
# At and above _huge(rho) = _DELTA_HUGE max(1, 1e-4/rho) the law of Y is the semicircle of
# variance 1 + delta centred at sqrt(rho), up to a relative error kappa_3 / (1 + delta)^{3/2} =
# 1 / (sqrt(rho) delta^{3/2}) (and 3/(rho delta) on the cleaned values at the edges).
_DELTA_HUGE = 1e14



# Beyond this many spectral radii from sqrt(rho), G is its moment series (error _FAR^-5).
_FAR = 1e4



# ----------------------------------------------------------------------------
# the cubic and its roots
# ----------------------------------------------------------------------------


def _cubic_roots(w, delta, s):
    """All three roots of ``delta G^3 - (s + w + delta s) G^2 + (w s + 1) G - s``.

    ``w``, ``delta``, ``s`` broadcast; returns shape ``w.shape + (3,)``
    (complex). Companion-matrix eigenvalues, then two Newton steps, each kept only where it
    reduces the residual; below ``delta = _DELTA_DEFLATE`` by :func:`_cubic_roots_deflated`.

    Near an edge of the support two roots nearly coincide: the eigenvalues give them to
    ``~sqrt(eps)`` relative (the accuracy of a double root), but there ``p'`` is of the order of
    that error and ``p`` is rounding noise, so a Newton step can throw the root far off (by 49 %
    at ``delta = 10``, ``rho = 1e-4``, 1e-10 from an edge; by 40 % at ``delta = 1e-15`` when the
    companion matrix was used there), and Newton's linear convergence at a double root does not
    bring it back in two steps. Such a step raises the residual: refused.
    """
    w, delta, s = np.broadcast_arrays(np.asarray(w), np.asarray(delta, float), np.asarray(s, float))
    tiny = delta < _DELTA_DEFLATE
    if np.any(tiny):
        out = np.empty(w.shape + (3,), dtype=complex)
        out[tiny] = _cubic_roots_deflated(w[tiny], delta[tiny], s[tiny])
        if not np.all(tiny):
            out[~tiny] = _cubic_roots(w[~tiny], delta[~tiny], s[~tiny])
        return out
    real = not np.iscomplexobj(w)
    dtype = float if real else complex
    c3 = delta.astype(dtype)
    c2 = -(s + w + delta * s)
    c1 = w * s + 1.0
    c0 = (-s).astype(dtype)
    M = np.zeros(w.shape + (3, 3), dtype=dtype)
    M[..., 0, 0] = -c2 / c3
    M[..., 0, 1] = -c1 / c3
    M[..., 0, 2] = -c0 / c3
    M[..., 1, 0] = 1.0
    M[..., 2, 1] = 1.0
    r = np.linalg.eigvals(M).astype(complex)
    c3, c2, c1, c0 = (c[..., None] for c in (c3, c2, c1, c0))

    def poly(g):
        return ((c3 * g + c2) * g + c1) * g + c0

    p = poly(r)
    for _ in range(2):  # a step is kept only where it reduces the residual (double roots)
        dp = (3 * c3 * r + 2 * c2) * r + c1
        ok = np.abs(dp) > 1e-300
        r_new = np.where(ok, r - p / np.where(ok, dp, 1.0), r)
        p_new = poly(r_new)
        keep = ok & (np.abs(p_new) < np.abs(p))
        r, p = np.where(keep, r_new, r), np.where(keep, p_new, p)
    return r


def _cubic_roots_deflated(w, delta, s):
    """The roots of :func:`_cubic_roots` when their sizes differ by many decades (tiny ``delta``).

    The monic cubic ``G^3 + a2 G^2 + a1 G + a0`` (coefficients of size up to ``1/delta``) is
    scaled by a power of two ``gamma`` of the size of its largest root, so that its companion
    matrix has entries of order one: that gives the largest root ``R`` to full relative
    accuracy (polished by Newton in the scaled variable). The other two are the roots of
    ``G^2 - sigma G + pi`` with ``pi = -a0/R`` and ``sigma = (a1 - pi)/R`` (Vieta, free of
    cancellation), each polished by two Newton steps on the cubic. 1-d arrays in, ``(n, 3)`` out.
    """
    w = np.asarray(w)
    dtype = complex if np.iscomplexobj(w) else float
    c2 = -(s + w + delta * s)
    c1 = w * s + 1.0
    a2, a1, a0 = c2 / delta, c1 / delta, (-s / delta).astype(dtype)
    with np.errstate(divide="ignore"):
        big = np.maximum.reduce([np.abs(a2), np.sqrt(np.abs(a1)), np.cbrt(np.abs(a0))])
    gam = np.exp2(np.round(np.log2(np.maximum(big, 1e-300))))
    b2, b1, b0 = a2 / gam, a1 / gam / gam, a0 / gam / gam / gam
    M = np.zeros(w.shape + (3, 3), dtype=dtype)
    M[..., 0, 0], M[..., 0, 1], M[..., 0, 2] = -b2, -b1, -b0
    M[..., 1, 0] = 1.0
    M[..., 2, 1] = 1.0
    y = np.linalg.eigvals(M).astype(complex)
    k = np.argmax(np.abs(y), axis=-1)
    Y = np.take_along_axis(y, k[..., None], axis=-1)[..., 0]
    for _ in range(3):  # Newton in the scaled variable (no overflow)
        p = ((Y + b2) * Y + b1) * Y + b0
        dp = (3 * Y + 2 * b2) * Y + b1
        ok = np.abs(dp) > 1e-300
        Y = np.where(ok, Y - p / np.where(ok, dp, 1.0), Y)
    R = gam * Y
    pi = -a0 / R
    sigma = (a1 - pi) / R
    disc = np.sqrt(sigma * sigma - 4 * pi + 0j)
    q = 0.5 * np.where(np.abs(sigma + disc) >= np.abs(sigma - disc), sigma + disc, sigma - disc)
    r1 = q
    r2 = np.where(q != 0, pi / np.where(q != 0, q, 1.0), 0.0)
    r = np.stack([R, r1, r2], axis=-1)
    c3, c2, c1, c0 = delta[..., None], c2[..., None], c1[..., None], -s[..., None]
    small = np.abs(r) < 0.5 * np.abs(R)[..., None]  # the deflated roots; R is already exact

    def poly(g):
        return ((c3 * g + c2) * g + c1) * g + c0

    with np.errstate(over="ignore", invalid="ignore"):  # R ~ w/delta overflows delta R^3: not polished
        for _ in range(2):  # a step is kept only where it reduces the residual (double roots)
            p = poly(r)
            dp = (3 * c3 * r + 2 * c2) * r + c1
            ok = small & (np.abs(dp) > 1e-300) & np.isfinite(p) & np.isfinite(dp)
            r_new = np.where(ok, r - p / np.where(ok, dp, 1.0), r)
            r = np.where(ok & (np.abs(poly(r_new)) < np.abs(p)), r_new, r)
    return r


def _zprime(G, delta, s):
    """Derivative of the inverse function ``z(G) = 1/G + s/(1 - G/s) + delta G``."""
    return -1.0 / G**2 + s**2 / (s - G) ** 2 + delta


def _huge(s):
    """The ``delta`` from which the semicircle of variance ``1 + delta`` is used (``s = sqrt(rho)``)."""
    return _DELTA_HUGE * np.maximum(1.0, 1e-4 / np.square(s))


def _radius(delta, s):
    """A bound on ``|t - s|`` over the support (``S``: ``[1/s - 2, 1/s + 2]`` and ``-s``; noise ``2 sqrt(delta)``)."""
    return np.maximum(s, 1.0 / s + 2.0) + 2.0 * np.sqrt(delta)


def _G_series(w, delta, s):
    """Far field: ``G = 1/w + c2/w^3 + c3/w^4 + c4/w^5`` with the centred moments of ``mu_delta``.

    The free cumulants of ``Y - s`` are ``0, 1 + delta, 1/s, 1/s^2, ...`` (``R_S(g) = s/(1 - g/s)``
    plus ``delta g``), so ``c2 = 1 + delta``, ``c3 = 1/s``, ``c4 = 1/s^2 + 2 (1 + delta)^2``; the
    relative error is below ``(radius/|w|)^5``.
    """
    u = _recip(w)
    v = 1.0 + delta
    return u * (1.0 + u * u * (v + u * (1.0 / s + u * (1.0 / s**2 + 2.0 * v * v))))


def _recip(w):
    """``1/w``; for complex ``w`` scaled first, so that ``|w|^2`` does not overflow (``|w|`` up to 1e308)."""
    w = np.asarray(w)
    if not np.iscomplexobj(w):
        return 1.0 / w
    m = np.maximum(np.abs(w.real), np.abs(w.imag))
    m = np.where(m > 0, m, 1.0)
    return (1.0 / m) / (w / m)


def _G_semicircle(w, v, real_axis):
    """Stieltjes transform of the semicircle of variance ``v`` at ``w`` (no overflow for any finite ``w``).

    ``real_axis``: the boundary value ``G(w - i0)`` (``Im G >= 0``) at real ``w``.
    """
    h = 0.5 * np.asarray(w, dtype=complex)
    r = np.sqrt(v)
    m = np.maximum(np.maximum(np.abs(h.real), np.abs(h.imag)), r)  # scaled: no overflow
    hm, rm = h / m, r / m
    q = np.sqrt((hm - rm) * (hm + rm))
    d1, d2 = hm + q, hm - q
    # the physical root is the smaller one (|G| < 1/r off the support): the larger denominator
    big = np.abs(d1) >= np.abs(d2)
    G = _recip(np.where(big, d1, d2)) / m
    if real_axis:
        return G.real + 1j * np.abs(G.imag)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # (0 far from the support)
        other = _recip(np.where(big, d2, d1)) / m  # (equal moduli on the support: Im G Im z <= 0 decides)
    return np.where(G.imag * np.imag(w) > 0, other, G)


def _G_real_axis(w, delta, s):
    """``G(x - i0)`` at real shifted points ``w = x - s`` (complex, ``Im >= 0``).

    The cubic (:func:`_G_real_axis_exact`), except far from the support (the moment series,
    :func:`_G_series`) and at ``delta >= _huge(s)`` (the semicircle of variance ``1 + delta``).
    """
    w, delta, s = np.broadcast_arrays(
        np.asarray(w, dtype=float), np.asarray(delta, float), np.asarray(s, float)
    )
    huge = delta >= _huge(s)
    far = np.abs(w) > _FAR * _radius(delta, s)
    if not np.any(huge | far):
        return _G_real_axis_exact(w, delta, s)
    out = np.empty(w.shape, dtype=complex)
    out[huge] = _G_semicircle(w[huge], 1.0 + delta[huge], real_axis=True)
    sel = far & ~huge
    out[sel] = _G_series(w[sel], delta[sel], s[sel])
    rest = ~(huge | far)
    if np.any(rest):
        out[rest] = _G_real_axis_exact(w[rest], delta[rest], s[rest])
    return out


def _G_real_axis_exact(w, delta, s):
    """``G(x - i0)`` at real shifted points ``w = x - s`` (complex, ``Im >= 0``), from the cubic.

    On the cut: the root with the largest imaginary part. Off the support all
    roots are real: the one with ``z'(G) < 0`` (the branch continuous with ``1/x``).

    The roots are compared by ``z'(G)`` relative to the size of its terms,
    ``z'(G) / (1/G^2 + s^2/(s - G)^2 + delta)``, not by ``z'`` itself: each root's ``z'`` is
    only known to the rounding of its own terms. Within about 1e-12 (relative) of an edge the
    two roots that meet there come out real and (nearly) equal, with ``z'`` zero up to that
    rounding, about ``1e-12 / G^2`` (either root is ``G`` at the edge to the accuracy of a double
    root); the third root, ``~ x/delta`` for small ``delta``, has ``z' ~ delta > 0``: below the
    pair's rounding for ``delta`` up to about ``1e-12 / G^2`` (1e-8 at ``rho = 1e-4``, where
    ``G ~ 0.01`` at the edges), but with a relative ``z'`` of about 1. Dividing by a positive
    number keeps the sign of ``z'``: away from the edges (one root with ``z' < 0``, none with
    ``z'`` near 0; no point of a grid over ``delta`` in ``[1e-19, 1e6]``, ``rho`` in ``[1e-4, 1e3]``
    had two clearly negative) the choice is the one by ``z'`` itself.
    """
    r = _cubic_roots(np.asarray(w, dtype=float), delta, s)
    im = np.abs(r.imag)
    im = np.where(im > 1e-13 * np.abs(r), im, 0.0)  # a root is complex beyond rounding
    k_im = np.argmax(im, axis=-1)
    g_cut = np.take_along_axis(r, k_im[..., None], axis=-1)[..., 0]
    g_cut = g_cut.real + 1j * np.abs(g_cut.imag)
    # off the support: the real root that minimises z'(G)
    rr = r.real
    d3, s3 = np.asarray(delta)[..., None], np.asarray(s)[..., None]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore", under="ignore"):
        # z' relative to the size of its terms (see above): a root ~ 1/delta that overflows gives
        # 0/0 or delta/delta, never below the pair at an edge; a nan is never chosen
        zp = _zprime(rr, d3, s3) / (1.0 / rr**2 + s3**2 / (s3 - rr) ** 2 + d3)
    zp = np.where(np.isnan(zp), np.inf, zp)
    zp = np.where(im == 0, zp, np.inf)
    k_re = np.argmin(zp, axis=-1)
    g_off = np.take_along_axis(rr, k_re[..., None], axis=-1)[..., 0]
    on_cut = np.max(im, axis=-1) > 0
    return np.where(on_cut, g_cut, g_off + 0j)


def _G_S_phys(omega, s):
    """Stieltjes transform of the law of S (with the atom) at complex ``omega`` (shifted back)."""
    z = omega
    # (z/s) G^2 - (z + 1/s - s) G + 1 = 0
    A = z / s
    B = -(z + 1 / s - s)
    disc = np.sqrt(B * B - 4 * A + 0j)
    r1 = (-B + disc) / (2 * A)
    r2 = (-B - disc) / (2 * A)
    # the physical root has Im G Im z < 0 and |G| <= 1/|Im z|
    score1 = (r1.imag * z.imag < 0) & (np.abs(r1) <= 1 / np.abs(z.imag) * (1 + 1e-9))
    return np.where(score1, r1, r2)
