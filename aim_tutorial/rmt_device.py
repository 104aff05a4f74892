"""The RIE and the denoising MMSE in JAX: what GAMP-RIE needs each iteration, on the device.

:mod:`aim_tutorial.rmt` computes the Stieltjes transform of ``Y = S + sqrt(delta) Z``, the
support of its spectrum, the cleaned eigenvalues of the rotation-invariant estimator (RIE) and
``mmse_rho(delta)`` in NumPy, with every safeguard a reader's extreme input needs (``delta`` from
1e-300 to 1e300, adaptive quadrature). This module computes the same quantities as pure JAX
functions of traced arrays: jitted, inside a ``lax.while_loop``, under ``vmap`` over instances,
on a GPU, with no trip to the host. The same formulas (chapter 2, ``book/02_random_matrices.md``):

* ``G(x - i0)`` from the cubic ``delta G^3 - (s + w + delta s) G^2 + (w s + 1) G - s = 0``
  (``s = sqrt(rho)``, ``w = x - s``), solved in closed form (Cardano, in the form of
  Numerical Recipes, section 5.6, free of the cancellation of the textbook form) and polished
  by Newton steps kept where they reduce the residual; the physical root chosen as in
  :func:`aim_tutorial.rmt.stieltjes`: on the support the root with ``Im G > 0``, off it the real
  root with ``z'(G) < 0``;
* the support edges, the critical values of the inverse function at the real roots of the
  quartic ``z'(g) = 0``, found by the Aberth-Ehrlich iteration (all four roots at once, a fixed
  number of steps) and Newton steps;
* ``xi(lambda) = lambda - 2 delta Re G(lambda)`` on the support, the edge's cleaned value
  ``s^3 / (s - g_c)^2`` off it (the rule ``outside="edge"`` of
  :func:`aim_tutorial.rmt.rie_eigenvalues`);
* ``mmse_rho(delta)``: ``delta - (4 pi^2/3) delta^2 int mu^3`` for ``delta <= 1``,
  ``1 - int mu (xi - s)^2`` above, the support cut at the points where the density is not
  smooth on its own scale (the neck of a gap that has closed or is about to open, and ``x = 0``
  for ``rho <= 1``) and each piece integrated by the tanh-sinh rule (Takahasi and Mori, Publ.
  RIMS 9 (1974)); the slope ``(2 rho - rho^2) delta`` below ``delta = 1e-9`` and the
  large-``delta`` expansion above ``1e6 max(1, 1/rho)``, as in
  :func:`aim_tutorial.rmt.mmse_denoising`.

Float64 throughout (the RIE cancels ``log10(delta)`` digits in ``lambda - 2 delta h``). The
range where these agree with :mod:`aim_tutorial.rmt` is measured in ``tests/test_rmt_device.py``;
outside it (``delta`` below ``DELTA_MIN`` or above ``DELTA_MAX``) :func:`in_range` is False
and GAMP-RIE falls back to the host.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks
from ._rmt_resolvent import _zprime  # pure arithmetic: traceable
from ._rmt_support import _w_of_G
from .rmt import _DELTA_SMALL, _large_delta_mmse
from .rmt import _rho as _host_rho

__all__ = ["DELTA_MAX", "DELTA_MIN", "in_range", "mmse_denoising", "rie_eigenvalues"]

DELTA_MIN = 1e-12
DELTA_MAX = 1e6

_NEWTON = 4  # Newton steps polishing each root of the cubic


def _cardano(a, b, c):
    """Cardano's quantities for ``x^3 + a x^2 + b x + c`` in the form of Numerical Recipes
    (section 5.6): ``Q``, ``R``, whether the three roots are real (``R^2 < Q^3``), and the pair
    ``A``, ``B`` of the one-real-root branch, ``A`` of the sign that avoids cancellation (where
    the three roots are real, ``A`` and ``B`` are not to be used)."""
    Q = (a * a - 3.0 * b) / 9.0
    R = (2.0 * a**3 - 9.0 * a * b + 27.0 * c) / 54.0
    three = R * R < Q**3
    sign = jnp.where(R >= 0, 1.0, -1.0)
    # (R^2 - Q^3 may round below 0 where the test above said otherwise: a double root)
    A = -sign * jnp.cbrt(jnp.abs(R) + jnp.sqrt(jnp.maximum(jnp.where(three, 0.0, R * R - Q**3), 0.0)))
    B = jnp.where(A != 0, Q / jnp.where(A != 0, A, 1.0), 0.0)
    return Q, R, three, A, B


def _complex_root(a, A, B):
    """The root of the pair with ``Im >= 0``, ``-(A + B)/2 - a/3 + i sqrt(3)/2 |A - B|``."""
    return (-(A + B) / 2.0 - a / 3.0) + 1j * jnp.abs(jnp.sqrt(3.0) / 2.0 * (A - B))


def _monic_cubic_roots(a, b, c):
    """The three roots of ``x^3 + a x^2 + b x + c`` (real coefficients; complex, stacked on a
    new last axis) by Cardano (:func:`_cardano`): three real roots by the trigonometric formula,
    else the real root ``A + B - a/3`` and the complex pair."""
    Q, R, three, A, B = _cardano(a, b, c)
    sq = jnp.sqrt(jnp.where(three, Q, 1.0))
    th = jnp.arccos(jnp.clip(jnp.where(three, R / sq**3, 0.0), -1.0, 1.0))
    k = jnp.arange(3)
    trig = -2.0 * sq[..., None] * jnp.cos((th[..., None] + 2.0 * jnp.pi * k) / 3.0) - a[..., None] / 3.0
    g = _complex_root(a, A, B)
    one = jnp.stack([A + B - a / 3.0 + 0j, g, jnp.conj(g)], axis=-1)
    return jnp.where(three[..., None], trig + 0j, one)


def _polish(r, coeffs, steps):
    """``steps`` Newton steps on the cubic ``coeffs`` (highest power first, each broadcasting with
    ``r[..., 0]``) at the roots ``r``, each kept only where it reduces the residual."""
    cc = [jnp.asarray(x)[..., None] for x in coeffs]

    def poly(g):
        return ((cc[0] * g + cc[1]) * g + cc[2]) * g + cc[3]

    for _ in range(steps):
        p = poly(r)
        dp = (3.0 * cc[0] * r + 2.0 * cc[1]) * r + cc[2]
        ok = jnp.abs(dp) > 1e-300
        r_new = jnp.where(ok, r - p / jnp.where(ok, dp, 1.0), r)
        r = jnp.where(jnp.abs(poly(r_new)) < jnp.abs(p), r_new, r)
    return r


def _coefficients(w, delta, s):
    """The cubic of :func:`_cubic_roots` as solved: ``delta >= 1`` (a boolean array) and the
    coefficients ``(h3, h2, h1, h0)``, highest power first, of the cubic in ``G`` there and of the
    cubic in ``u = 1/G`` (the same, reversed) below."""
    w, delta, s = jnp.broadcast_arrays(jnp.asarray(w, float), jnp.asarray(delta, float), jnp.asarray(s, float))
    c3, c2, c1, c0 = delta, -(s + w + delta * s), w * s + 1.0, -s
    big = delta >= 1.0
    return big, (jnp.where(big, c3, c0), jnp.where(big, c2, c1), jnp.where(big, c1, c2),
                 jnp.where(big, c0, c3))


def _cubic_roots(w, delta, s):
    """The three roots of ``delta G^3 - (s + w + delta s) G^2 + (w s + 1) G - s`` at real ``w``
    (complex, shape ``w.shape + (3,)``; ``delta`` and ``s`` broadcast with ``w``).

    For ``delta >= 1`` the monic cubic in ``G``; below, the cubic in ``u = 1/G``,
    ``-s u^3 + (w s + 1) u^2 - (s + w + delta s) u + delta = 0``, whose coefficients stay of
    order one as ``delta -> 0`` (in ``G`` they grow like ``1/delta``, and Cardano's formula
    would lose ``log10(1/delta)`` digits of the two roots of order one to the third, of order
    ``1/delta``). Roots by :func:`_monic_cubic_roots`, then Newton steps on the same cubic.
    """
    big, h = _coefficients(w, delta, s)
    r = _monic_cubic_roots(h[1] / h[0], h[2] / h[0], h[3] / h[0])
    r = _polish(r, h, _NEWTON)
    return jnp.where(big[..., None], r, 1.0 / r)


def _g_on_support(w, delta, s):
    """``G(x - i0)`` at real shifted points ``w`` where only its values on the support are
    needed (the density, and the Hilbert transform there): the complex root of the cubic alone,
    from Cardano's one-real-root branch and polished by Newton steps; where the cubic has three
    real roots (off the support, or within rounding of an edge) the result has ``Im G = 0`` and
    its real part is not to be used. A third of the work of :func:`_g_shifted`, which also
    chooses among real roots off the support."""
    big, h = _coefficients(w, delta, s)
    a = h[1] / h[0]
    _, _, three, A, B = _cardano(a, h[2] / h[0], h[3] / h[0])
    r = _polish(_complex_root(a, A, B)[..., None], h, _NEWTON)[..., 0]
    G = jnp.where(big, r, 1.0 / r)
    return jnp.where(three, G.real + 0j, G.real + 1j * jnp.abs(G.imag))


def _g_shifted(w, delta, s):
    """``G(x - i0)`` at real shifted points ``w = x - s`` (complex, ``Im >= 0``), the root choice of
    :func:`aim_tutorial.rmt.stieltjes`: on the cut the root with the largest imaginary part; off
    the support, all roots real, the one that minimises ``z'(G)`` (the branch of ``1/x``)."""
    r = _cubic_roots(w, delta, s)
    im = jnp.abs(r.imag)
    im = jnp.where(im > 1e-13 * jnp.abs(r), im, 0.0)
    k_im = jnp.argmax(im, axis=-1)
    g_cut = jnp.take_along_axis(r, k_im[..., None], axis=-1)[..., 0]
    g_cut = g_cut.real + 1j * jnp.abs(g_cut.imag)
    rr = r.real
    d3 = jnp.broadcast_to(jnp.asarray(delta, float), jnp.shape(w))[..., None]
    s3 = jnp.broadcast_to(jnp.asarray(s, float), jnp.shape(w))[..., None]
    zp = _zprime(rr, d3, s3)
    zp = jnp.where(jnp.isnan(zp) | (im != 0), jnp.inf, zp)
    k_re = jnp.argmin(zp, axis=-1)
    g_off = jnp.take_along_axis(rr, k_re[..., None], axis=-1)[..., 0]
    on_cut = jnp.max(im, axis=-1) > 0
    return jnp.where(on_cut, g_cut, g_off + 0j)


# ----------------------------------------------------------------------------
# the support edges
# ----------------------------------------------------------------------------

_ABERTH = 80  # Aberth-Ehrlich steps for the four roots of the quartic
_EDGE_NEWTON = 3


def _quartic_roots(c):
    """The four roots of ``c[0] x^4 + ... + c[4]`` (real, ``c[0] != 0``) by the Aberth-Ehrlich
    iteration: all four at once from a circle of the roots' geometric-mean radius, a fixed number
    of steps (cubic convergence once close), then Newton steps kept where they reduce the residual."""
    c = jnp.asarray(c, float) / c[0]
    dc = jnp.array([4.0, 3.0, 2.0, 1.0]) * c[:4]

    def p(z):
        return (((c[0] * z + c[1]) * z + c[2]) * z + c[3]) * z + c[4]

    def dp(z):
        return ((dc[0] * z + dc[1]) * z + dc[2]) * z + dc[3]

    radius = jnp.maximum(jnp.abs(c[4]) ** 0.25, 1e-3)
    z0 = radius * jnp.exp(1j * (2.0 * jnp.pi * jnp.arange(4) / 4 + 0.4))

    def step(_, z):
        ratio = p(z) / jnp.where(dp(z) != 0, dp(z), 1e-300)
        diff = z[:, None] - z[None, :]
        inv = jnp.where(jnp.eye(4, dtype=bool), 0.0, 1.0 / jnp.where(diff != 0, diff, 1e-300))
        corr = ratio / (1.0 - ratio * jnp.sum(inv, axis=1))
        return z - jnp.where(jnp.isfinite(corr), corr, 0.0)

    z = jax.lax.fori_loop(0, _ABERTH, step, z0)
    for _ in range(_EDGE_NEWTON):
        pz = p(z)
        znew = z - pz / jnp.where(dp(z) != 0, dp(z), 1e-300)
        z = jnp.where(jnp.abs(p(znew)) < jnp.abs(pz), znew, z)
    return z


def _x_of_g(g, delta, s):
    """The inverse function ``z(g) = 1/g + s^2/(s - g) + delta g`` (an edge, computed directly)."""
    return 1.0 / g + s * s / (s - g) + delta * g


def _critical_points(delta, s):
    """The four roots of ``z'(g) = 0``, ``delta g^4 - 2 delta s g^3 + (delta s^2 + s^2 - 1) g^2
    + 2 s g - s^2 = 0`` (complex); below ``delta = 1`` solved in ``u = 1/g``, whose
    coefficients (the same, reversed) keep the roots of sizes within ``1/sqrt(delta)``."""
    cg = jnp.stack([delta, -2.0 * delta * s, delta * s * s + s * s - 1.0, 2.0 * s, -s * s])
    big = delta >= 1.0
    q = _quartic_roots(jnp.where(big, cg, cg[::-1]))
    return jnp.where(big, q, 1.0 / q)


def _real_critical_points(q, s):
    """The real critical points among the four ``q`` (:func:`_critical_points`): ``g1 < 0`` and
    ``0 < g2 < s``, whose critical values are the outer edges, and the smallest and largest of the
    other real ones (``lo``, ``hi``; infinite where there are none), with whether there are two of
    them (a gap, or the pair of a gap that has just closed, come out real)."""
    real = jnp.abs(q.imag) <= 1e-9 * (1.0 + jnp.abs(q))
    g = jnp.where(real, q.real, jnp.nan)
    g1 = jnp.max(jnp.where(g < 0, g, -jnp.inf))
    g2 = jnp.min(jnp.where((g > 0) & (g < s), g, jnp.inf))
    other = real & (g != g1) & (g != g2)
    lo = jnp.min(jnp.where(other, g, jnp.inf))
    hi = jnp.max(jnp.where(other, g, -jnp.inf))
    return g1, g2, lo, hi, jnp.sum(other) == 2


def _edges(delta, s):
    """The support of the spectrum of ``Y`` as two intervals ``(2, 4)``: rows ``(a, b, G(a), G(b))``
    in ``x`` (not shifted), and whether the second is a separate interval (a gap at small
    ``delta``, ``rho < 1``); with one interval the second row repeats the first. As
    :func:`aim_tutorial.rmt.support_edges`: the critical values of the inverse function at the
    real roots of the quartic ``z'(g) = 0``, the gap where ``z' < 0`` between two further roots.

    Below ``delta = 1`` the quartic is solved in ``u = 1/g`` (coefficients of order one)."""
    delta, s = jnp.asarray(delta, float), jnp.asarray(s, float)
    g1, g2, lo, hi, two_others = _real_critical_points(_critical_points(delta, s), s)
    straddle = ((lo < 0) & (0 < hi)) | ((lo < s) & (s < hi))
    mid = 0.5 * (lo + hi)
    zp_mid = -1.0 / mid**2 + s * s / (s - mid) ** 2 + delta
    left, right = _w_of_G(g1, delta, s), _w_of_G(g2, delta, s)
    a, b = _w_of_G(hi, delta, s), _w_of_G(lo, delta, s)
    gap = two_others & ~straddle & (zp_mid < 0) & (left <= a) & (a < b) & (b <= right)
    x1, x2 = _x_of_g(g1, delta, s), _x_of_g(g2, delta, s)
    xa, xb = _x_of_g(hi, delta, s), _x_of_g(lo, delta, s)
    one = jnp.stack([x1, x2, g1, g2])
    first = jnp.where(gap, jnp.stack([x1, xa, g1, hi]), one)
    second = jnp.where(gap, jnp.stack([xb, x2, lo, g2]), one)
    return jnp.stack([first, second]), gap


# ----------------------------------------------------------------------------
# the RIE and mmse_rho
# ----------------------------------------------------------------------------


def in_range(delta):
    """Whether ``delta`` lies in ``[DELTA_MIN, DELTA_MAX]``, where :func:`rie_eigenvalues` and
    :func:`mmse_denoising` agree with :mod:`aim_tutorial.rmt` (a traced boolean under ``jit``)."""
    return (delta >= DELTA_MIN) & (delta <= DELTA_MAX)


def _scalar(name, value, check=None):
    """A scalar checked when concrete by ``check(value)`` (default: positive; a ``ValueError``
    naming it), passed through when traced."""
    if isinstance(value, jax.core.Tracer):
        if np.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)} (vmap over it instead)")
        return jnp.asarray(value, float)
    return jnp.asarray(_checks.positive(name, value) if check is None else check(value), float)


def rie_eigenvalues(lam, delta, rho, outside: str = "edge"):
    """The RIE's cleaned eigenvalues in JAX, as :func:`aim_tutorial.rmt.rie_eigenvalues`.

    ``lambda - 2 delta Re G(lambda)`` on the support of the limiting spectrum of
    ``Y = S + sqrt(delta) Z``; off it, with ``outside="edge"``, the cleaned value
    ``sqrt(rho)^3 / (sqrt(rho) - g_c)^2`` of the nearest edge, with ``"continuation"`` the same
    formula continued. Pure JAX: jit, vmap (over ``delta`` and ``rho`` too) and any device.
    Agrees with :func:`aim_tutorial.rmt.rie_eigenvalues` to about 1e-12 (times ``max(1, sqrt(rho))``)
    for ``delta`` in ``[DELTA_MIN, DELTA_MAX]`` (``tests/test_rmt_device.py``), except for an
    eigenvalue within about 1e-6 of the support's width from an edge, where both are limited by
    the conditioning of the double root of the cubic there.

    Args:
        lam: eigenvalues, a finite real array (float64).
        delta: noise variance, a scalar ``> 0``.
        rho: width ratio, a scalar in ``[rmt.RHO_MIN, rmt.RHO_MAX] = [1e-6, 1e24]`` (checked when
            concrete, as on the host).
        outside: ``"edge"`` or ``"continuation"``.

    Returns:
        float64 array of the shape of ``lam``.

    Example:
        >>> import numpy as np, aim_tutorial as aim
        >>> from aim_tutorial import rmt_device
        >>> lam = np.linspace(-0.5, 4.0, 7)
        >>> bool(np.allclose(rmt_device.rie_eigenvalues(lam, 0.1, 0.5), aim.rie_eigenvalues(lam, 0.1, 0.5)))
        True
    """
    _checks.real_array("lam", lam, allow_empty=True)
    delta, rho = _scalar("delta", delta), _scalar("rho", rho, _host_rho)  # the host's range of rho
    _checks.one_of("outside", outside, ("edge", "continuation"))
    lam = jnp.asarray(lam, float)
    s = jnp.sqrt(rho)
    if outside == "continuation":
        return lam - 2.0 * delta * _g_shifted(lam - s, delta, s).real
    # the edge rule reads G on the support only: the complex root of the cubic suffices
    G = _g_on_support(lam - s, delta, s)
    bulk = lam - 2.0 * delta * G.real
    E, gap = _edges(delta, s)
    inside = ((lam > E[0, 0]) & (lam < E[0, 1])) | (gap & (lam > E[1, 0]) & (lam < E[1, 1]))
    inside = inside & (G.imag > 0)  # within rounding of an edge the roots come out real
    pts = jnp.stack([E[0, 0], E[0, 1], jnp.where(gap, E[1, 0], jnp.inf), jnp.where(gap, E[1, 1], jnp.inf)])
    g_e = jnp.stack([E[0, 2], E[0, 3], E[1, 2], E[1, 3]])
    vals = s**3 / (s - g_e) ** 2
    nearest = jnp.argmin(jnp.abs(lam[..., None] - pts), axis=-1)
    return jnp.where(inside, bulk, vals[nearest])


def _de_rule(h: float = 1.0 / 32, K: int = 96):
    """The tanh-sinh (double-exponential) rule on ``[-1, 1]`` (Takahasi, Mori, Publ. RIMS 9 (1974)):
    nodes ``tanh(pi/2 sinh(k h))``, ``|k| <= K``, given as their distances ``1 + x`` and ``1 - x`` to
    the two ends (exact near either end), and the weights. The nodes crowd double-exponentially
    at the ends: the square-root edges of the density and a narrow feature at a breakpoint cost
    no more nodes than a smooth integrand."""
    k = np.arange(-K, K + 1) * h
    u = 0.5 * np.pi * np.sinh(k)
    w = h * 0.5 * np.pi * np.cosh(k) / np.cosh(u) ** 2
    return 2.0 / (1.0 + np.exp(-2.0 * u)), 2.0 / (1.0 + np.exp(2.0 * u)), w


_DE_P, _DE_M, _DE_W = _de_rule()


def _breakpoints(delta, s):
    """Where the density is not smooth on the scale of its support, inside an interval: the
    neck ``Re z(g)`` at a complex pair of critical points (near a gap that has just closed, or
    is about to open, the density dips towards a cusp there), and ``x = 0`` for ``rho <= 1``
    (the bump of the zero eigenvalues of ``S``, of width ``~sqrt(delta)``, or the hard edge of
    Marchenko-Pastur at ``rho = 1``). ``nan`` where there is none.

    Within about 1e-11 (relative) of the width ratio where the gap closes, the pair of critical
    points is a double root of the quartic, found only to about 1e-5: it can come out real
    although :func:`_edges` finds no gap between their critical values (they are not ordered, or
    the gap is below rounding). The neck is then the mean of those two critical values. Without
    it the cusp lay inside a tanh-sinh segment and the MMSE jumped there (by 3.8e-7, 4.8e-5
    relative, at ``delta = 0.01``; by 1.7e-4, 8.5e-4 relative, at ``delta = 0.9``); with it the
    device agrees with the host to 1.4e-13 relative across ``rho_c``. Where there is a gap,
    :func:`_segments` does not use the neck."""
    q = _critical_points(delta, s)
    complex_ = jnp.abs(q.imag) > 1e-9 * (1.0 + jnp.abs(q))
    neck = jnp.max(jnp.where(complex_ & (q.imag > 0), _x_of_g(q, delta, s).real, -jnp.inf))
    _, _, lo, hi, two_others = _real_critical_points(q, s)
    lo, hi = jnp.where(two_others, lo, 1.0), jnp.where(two_others, hi, 1.0)  # (finite placeholders)
    pair = 0.5 * (_x_of_g(lo, delta, s) + _x_of_g(hi, delta, s))
    neck = jnp.where(jnp.isfinite(neck), neck, jnp.where(two_others, pair, jnp.nan))
    zero = jnp.where(s <= 1.0, 0.0, jnp.nan)
    return neck, zero


def _segments(delta, s):
    """The support cut into three segments ``(lo, hi)`` (arrays of 3; an empty one has
    ``lo = hi``) whose ends are the edges and the breakpoints (:func:`_breakpoints`): one interval
    split at the neck and at 0 where they fall inside it, or, with a gap (four real critical
    points: no neck), the bump of the zero eigenvalues split at 0 and the bulk."""
    E, gap = _edges(delta, s)
    neck, zero = _breakpoints(delta, s)
    a, b = E[0, 0], E[0, 1]
    inside = [jnp.where((p > a) & (p < b), p, jnp.nan) for p in (neck, zero)]
    p1 = jnp.fmin(inside[0], inside[1])
    p2 = jnp.fmax(inside[0], inside[1])
    p1 = jnp.where(jnp.isnan(p1), a, p1)
    p2 = jnp.where(jnp.isnan(p2), p1, p2)
    x1, xa, xb, x2 = E[0, 0], E[0, 1], E[1, 0], E[1, 1]
    z = jnp.where((zero > x1) & (zero < xa), zero, x1)
    lo = jnp.where(gap, jnp.stack([x1, z, xb]), jnp.stack([a, p1, p2]))
    hi = jnp.where(gap, jnp.stack([z, xa, x2]), jnp.stack([p1, p2, b]))
    return lo, hi


def mmse_denoising(delta, rho):
    """``mmse_rho(delta)`` in JAX, as :func:`aim_tutorial.rmt.mmse_denoising`, by a fixed rule.

    ``delta - (4 pi^2/3) delta^2 int mu^3`` for ``delta <= 1``, ``1 - int mu (xi - sqrt(rho))^2``
    above (no cancellation either side), each interval of the support split at its
    breakpoints (the neck of a gap that has closed or is about to open, and ``x = 0`` for
    ``rho <= 1``: the bump of the zero eigenvalues of ``S``) and each of the (at most three)
    pieces integrated by the tanh-sinh rule of Takahasi and Mori (193 nodes), whose nodes crowd double-exponentially at
    the ends: square-root edges and a narrow bump at a breakpoint converge as fast as a smooth
    integrand. The slope ``(2 rho - rho^2) delta`` (``rho <= 1``; ``delta`` above) below
    ``delta = 1e-9`` and ``1/(1 + 1/delta) - (1 - (4 - 1/rho)/delta) / (rho delta^2)`` above
    ``1e6 max(1, 1/rho)``, as on the host. Relative agreement with the adaptive quadrature of
    :func:`aim_tutorial.rmt.mmse_denoising` (tolerance 1e-12): about 1e-12 for ``delta`` in
    ``[DELTA_MIN, DELTA_MAX]`` (``tests/test_rmt_device.py``). Pure JAX: jit, vmap, any device.

    Args:
        delta: noise variance, a scalar ``> 0``.
        rho: width ratio, a scalar in ``[rmt.RHO_MIN, rmt.RHO_MAX] = [1e-6, 1e24]`` (checked when
            concrete, as on the host).

    Returns:
        a float64 scalar array.

    Example:
        >>> import aim_tutorial as aim
        >>> from aim_tutorial import rmt_device
        >>> abs(float(rmt_device.mmse_denoising(1.0, 0.5)) - aim.mmse_denoising(1.0, 0.5)) < 1e-12
        True
    """
    delta, rho = _scalar("delta", delta), _scalar("rho", rho, _host_rho)  # the host's range of rho
    s = jnp.sqrt(rho)
    lo, hi = _segments(delta, s)
    low = delta <= 1.0
    # the tanh-sinh nodes of each segment, (3, 193), counted from the nearer end
    x = jnp.where(jnp.asarray(_DE_P) <= 1.0, lo[:, None] + (hi - lo)[:, None] * 0.5 * _DE_P,
                  hi[:, None] - (hi - lo)[:, None] * 0.5 * _DE_M)
    G = _g_on_support(x - s, delta, s)  # once for either integrand (a select under vmap runs both branches)
    mu = jnp.maximum(G.imag, 0.0) / jnp.pi
    f = jnp.where(low, mu**3, mu * (x - s - 2.0 * delta * G.real) ** 2)
    integral = jnp.sum(jnp.where(hi > lo, 0.5 * (hi - lo) * jnp.sum(f * _DE_W, axis=-1), 0.0))
    quad = jnp.where(low, delta - (4.0 * jnp.pi**2 / 3.0) * delta**2 * integral, 1.0 - integral)
    slope = jnp.where(rho <= 1.0, 2.0 * rho - rho * rho, 1.0) * delta  # counting.dof_fraction(rho) delta
    large = _large_delta_mmse(delta, rho)
    # the host's switches: rmt._DELTA_SMALL, and rmt._large_delta_switch(rho) = 1e6 max(1, 1/rho)
    return jnp.where(delta < _DELTA_SMALL, slope, jnp.where(delta > 1e6 * jnp.maximum(1.0, 1.0 / rho), large, quad))
