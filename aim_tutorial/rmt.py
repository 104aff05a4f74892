"""Random-matrix toolkit: free convolution, the RIE denoiser and the denoising MMSE.

Chapter 2 (``book/02_random_matrices.md``) teaches everything in this module;
the equation labels below refer to it. The scalar-equivalent problem of the
whole book is *matrix denoising*

    Y = S + sqrt(delta) Z,                                          eq. (eq-rmt-denoising)

with ``S = W W^T / sqrt(r d)`` (width ratio ``rho = r/d``) and ``Z`` a GOE
matrix whose spectrum is the semicircle on ``[-2, 2]``. The spectral law of
``Y`` is the free additive convolution of ``sqrt(rho)`` times a
Marchenko-Pastur law with a semicircle of variance ``delta``; its Stieltjes
transform ``G(z) = int mu(t) / (z - t) dt`` solves the cubic, eq. (eq-rmt-cubic),

    (delta/sqrt(rho)) G^3 - (z/sqrt(rho) + delta) G^2 + (z + 1/sqrt(rho) - sqrt(rho)) G - 1 = 0.

Numerically everything is done in the shifted variable ``w = z - sqrt(rho)``
(the cubic multiplied by ``sqrt(rho)``), which keeps the coefficients of
order one when ``rho`` is large:

    delta G^3 - (s + w + delta s) G^2 + (w s + 1) G - s = 0,   s = sqrt(rho).

The support edges are the critical values of the inverse function
``z(G) = 1/G + R_S(G) + delta G`` (eqs. (eq-rmt-R) and (eq-rmt-edges)), i.e. ``z(g)`` at the real roots
``g`` of the quartic ``z'(g) = 0``; ``x`` lies outside the support exactly when
``x = z(g)`` for a real ``g`` with ``z'(g) < 0`` (Biane).

The functions here are NumPy/SciPy code (an eigendecomposition and a cubic
per eigenvalue), not traced by JAX; they accept and return JAX arrays where an
array is expected.

References: Bun, Bouchaud, Potters, *Cleaning large correlation matrices*,
Phys. Rep. 666 (2017); Ledoit, Peche, PTRF 151 (2011); Maillard, Troiani,
Martin, Krzakala, Zdeborova, arXiv 2408.03733 (the MMSE formula);
Boncoraglio, Troiani, Erba, Zdeborova, arXiv 2506.01582 (where matrix denoising
enters the attention-indexed model).
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks

__all__ = [
    "SpectralLaw",
    "hilbert_transform",
    "marchenko_pastur_density",
    "mmse_denoising",
    "rie_denoise",
    "rie_eigenvalues",
    "sample_goe",
    "semicircle_density",
    "spectral_density",
    "spectral_integral",
    "stieltjes",
    "support_edges",
]

# Below this delta use the small-delta slope: mmse = c(rho) delta + O(delta^{3/2}).
_DELTA_SMALL = 1e-9


class SpectralLaw(NamedTuple):
    """A spectral law made of a continuous part and an atom at 0."""

    density: np.ndarray  #: continuous part of the density at the requested points
    atom: float  #: weight of the atom at 0


# ----------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------


def _like(out, x):
    """A Python scalar when ``x`` is a scalar, else the array ``out``."""
    return out.item() if np.ndim(x) == 0 else out


def _positive_array(name, value) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.size == 0:
        return arr
    if not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(f"{name} must be in (0, inf), got {value!r}")
    return arr


# ----------------------------------------------------------------------------
# the two ingredients
# ----------------------------------------------------------------------------


def marchenko_pastur_density(x, rho: float) -> SpectralLaw:
    """Spectral law of ``S = W W^T / sqrt(r d)``: sqrt(rho) times Marchenko-Pastur, eq. (eq-rmt-RS).

    Continuous part on ``[a, b]``, ``a, b = (1 -+ sqrt(rho))^2 / sqrt(rho)``:

        mu_S(x) = sqrt(rho) sqrt((b - x)(x - a)) / (2 pi x),

    plus an atom of weight ``max(0, 1 - rho)`` at 0 (the ``d - r`` zero eigenvalues).

    Args:
        x: points, any shape.
        rho: width ratio, ``rho > 0``.

    Returns:
        :class:`SpectralLaw` with ``density`` (shape of ``x``) and ``atom``.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import aim_tutorial as aim
        >>> round(aim.marchenko_pastur_density([1.0], 0.5).atom, 3)
        0.5
    """
    rho = _checks.positive("rho", rho)
    s = math.sqrt(rho)
    a, b = (1 - s) ** 2 / s, (1 + s) ** 2 / s
    x = np.asarray(x, dtype=float)
    inside = (x > a) & (x < b) & (x > 0)
    xs = np.where(inside, x, 0.5 * (a + b))
    dens = np.where(inside, s * np.sqrt(np.abs((b - xs) * (xs - a))) / (2 * np.pi * xs), 0.0)
    return SpectralLaw(density=dens, atom=max(0.0, 1.0 - rho))


def semicircle_density(x, delta: float = 1.0) -> np.ndarray:
    """Semicircle law of variance ``delta``: ``sqrt(4 delta - x^2) / (2 pi delta)`` on ``|x| <= 2 sqrt(delta)``.

    The spectral law of ``sqrt(delta) Z``, ``Z`` GOE (exercise (ex-rmt-1) of chapter 2).

    Example:
        >>> import aim_tutorial as aim
        >>> float(aim.semicircle_density(0.0, 1.0)) == 1 / 3.141592653589793
        True
    """
    delta = _checks.positive("delta", delta)
    x = np.asarray(x, dtype=float)
    return np.sqrt(np.clip(4 * delta - x**2, 0, None)) / (2 * np.pi * delta)


def sample_goe(key: jax.Array, d: int) -> jax.Array:
    """A GOE matrix ``Z = (A + A^T)/sqrt(2 d)``: off-diagonal variance 1/d, diagonal 2/d.

    Its spectrum converges to the semicircle on ``[-2, 2]``.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import jax, aim_tutorial as aim
        >>> aim.sample_goe(jax.random.key(0), 5).shape
        (5, 5)
    """
    d = _checks.integer_at_least("d", d, 1)
    A = jax.random.normal(key, (d, d))
    return (A + A.T) / jnp.sqrt(2.0 * d)


# ----------------------------------------------------------------------------
# the cubic and its roots
# ----------------------------------------------------------------------------


def _cubic_roots(w, delta, s):
    """All three roots of ``delta G^3 - (s + w + delta s) G^2 + (w s + 1) G - s``.

    ``w``, ``delta``, ``s`` broadcast; returns shape ``w.shape + (3,)``
    (complex). Companion-matrix eigenvalues, then two Newton steps.
    """
    w, delta, s = np.broadcast_arrays(np.asarray(w), np.asarray(delta, float), np.asarray(s, float))
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
    for _ in range(2):
        p = ((c3 * r + c2) * r + c1) * r + c0
        dp = (3 * c3 * r + 2 * c2) * r + c1
        ok = np.abs(dp) > 1e-300
        r = np.where(ok, r - p / np.where(ok, dp, 1.0), r)
    return r


def _zprime(G, delta, s):
    """Derivative of the inverse function ``z(G) = 1/G + s/(1 - G/s) + delta G``."""
    return -1.0 / G**2 + s**2 / (s - G) ** 2 + delta


def _G_real_axis(w, delta, s):
    """``G(x - i0)`` at real shifted points ``w = x - s`` (complex, ``Im >= 0``).

    On the cut: the root with the largest imaginary part. Off the support all
    roots are real: the one with ``z'(G) < 0`` (the branch continuous with ``1/x``).
    """
    r = _cubic_roots(np.asarray(w, dtype=float), delta, s)
    im = np.abs(r.imag)
    im = np.where(im > 1e-13 * np.abs(r), im, 0.0)  # a root is complex beyond rounding
    k_im = np.argmax(im, axis=-1)
    g_cut = np.take_along_axis(r, k_im[..., None], axis=-1)[..., 0]
    g_cut = g_cut.real + 1j * np.abs(g_cut.imag)
    # off the support: the real root that minimises z'(G)
    rr = r.real
    zp = np.where(im == 0, _zprime(rr, np.asarray(delta)[..., None], np.asarray(s)[..., None]), np.inf)
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


def stieltjes(z, delta: float, rho: float):
    """Stieltjes transform ``G(z) = int mu_delta(t) / (z - t) dt`` of the law of ``Y``, eq. (eq-rmt-cubic).

    Solves the cubic of the module docstring and selects the physical root:
    for ``Im z != 0`` the root with ``Im G Im z < 0`` that satisfies the
    subordination relation ``G = G_S(z - delta G)`` with the physical branch
    of ``G_S``; for real ``z = x`` the boundary value ``G(x - i0)``, whose
    imaginary part is ``pi mu(x) >= 0`` and whose real part is the Hilbert
    transform.

    Args:
        z: points, real or complex, any shape.
        delta: noise variance, ``delta > 0``.
        rho: width ratio, ``rho > 0``.

    Returns:
        complex array of the shape of ``z``.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import aim_tutorial as aim
        >>> abs(aim.stieltjes(100j, 0.1, 0.5) - 1 / (100j)) < 1e-3
        True
    """
    delta = _checks.positive("delta", delta)
    rho = _checks.positive("rho", rho)
    s = math.sqrt(rho)
    z_in = z
    z = np.asarray(z)
    if not np.iscomplexobj(z) or np.all(z.imag == 0):
        return _like(_G_real_axis(np.asarray(z.real, dtype=float) - s, delta, s), z_in)
    r = _cubic_roots(z - s, delta, s)
    zi = z.imag[..., None]
    omega = z[..., None] - delta * r
    gs = _G_S_phys(omega, s)
    bad = (r.imag * zi >= 0) & (zi != 0)
    score = np.abs(r - gs) + np.where(bad, np.inf, 0.0)
    k = np.argmin(score, axis=-1)
    out = np.take_along_axis(r, k[..., None], axis=-1)[..., 0]
    real_pts = z.imag == 0
    if np.any(real_pts):
        out = np.where(real_pts, _G_real_axis(z.real - s, delta, s), out)
    return _like(out, z_in)


def spectral_density(x, delta: float, rho: float) -> np.ndarray:
    """Density ``mu_delta(x) = Im G(x - i0) / pi`` of the spectrum of ``Y = S + sqrt(delta) Z``.

    The free convolution of :func:`marchenko_pastur_density` (with its atom)
    and :func:`semicircle_density` of variance ``delta``, eq. (eq-rmt-inversion).

    Args:
        x: real points, any shape.
        delta: noise variance, ``delta > 0``.
        rho: width ratio, ``rho > 0``.

    Returns:
        array of the shape of ``x``, nonnegative, integrating to 1.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import numpy as np, aim_tutorial as aim
        >>> x = np.linspace(-1, 5, 3001)
        >>> round(float(np.trapezoid(aim.spectral_density(x, 0.1, 0.5), x)), 3)
        1.0
    """
    delta = _checks.positive("delta", delta)
    rho = _checks.positive("rho", rho)
    s = math.sqrt(rho)
    xa = np.asarray(x, dtype=float)
    return _like(np.clip(_G_real_axis(xa - s, delta, s).imag, 0, None) / np.pi, x)


def hilbert_transform(x, delta: float, rho: float) -> np.ndarray:
    """Hilbert transform ``h(x) = p.v. int mu_delta(t) / (x - t) dt = Re G(x)``, eq. (eq-rmt-inversion).

    Defined on the whole real line (eigenvalues of a finite ``Y`` may fall
    outside the limiting support; there ``G`` is real).

    Args:
        x: real points, any shape.
        delta: noise variance, ``delta > 0``.
        rho: width ratio, ``rho > 0``.

    Returns:
        array of the shape of ``x``.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import aim_tutorial as aim
        >>> abs(float(aim.hilbert_transform(1e4, 0.1, 0.5)) - 1e-4) < 1e-7
        True
    """
    delta = _checks.positive("delta", delta)
    rho = _checks.positive("rho", rho)
    s = math.sqrt(rho)
    xa = np.asarray(x, dtype=float)
    return _like(_G_real_axis(xa - s, delta, s).real, x)


# ----------------------------------------------------------------------------
# support
# ----------------------------------------------------------------------------


def _w_of_G(G, delta, s):
    """Shifted inverse function ``z(G) - s = 1/G + G/(1 - G/s) + delta G``."""
    return 1.0 / G + G / (1.0 - G / s) + delta * G


def _edges_shifted(delta: float, s: float) -> list[tuple[float, float]]:
    """Support intervals in the shifted variable ``w = x - s``."""
    # z'(G) = 0  <=>  delta G^4 - 2 delta s G^3 + (delta s^2 + s^2 - 1) G^2 + 2 s G - s^2 = 0
    q = np.roots([delta, -2 * delta * s, delta * s * s + s * s - 1, 2 * s, -s * s])
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
        if _zprime(mid, delta, s) < 0:
            a, b = _w_of_G(hi, delta, s), _w_of_G(lo, delta, s)
            if left < a < b < right:
                gaps.append((a, b))
    gaps.sort()
    edges, start = [], left
    for a, b in gaps:
        edges.append((start, a))
        start = b
    edges.append((start, right))
    return edges


def support_edges(delta: float, rho: float) -> list[tuple[float, float]]:
    """Support of ``mu_delta``: a list of one or two intervals ``(a, b)``, eq. (eq-rmt-edges).

    The edges are the critical values ``z(g)`` of the inverse function
    ``z(G) = 1/G + sqrt(rho)/(1 - G/sqrt(rho)) + delta G`` at the real roots
    of ``z'(g) = 0`` (a quartic); the gap, when there is one, is the image
    of a second interval of real ``g`` on which ``z' < 0``. Two intervals
    appear when ``rho < 1`` and ``delta`` is small (the zero eigenvalues of
    ``S`` form their own bump).

    Args:
        delta: noise variance, ``delta > 0``.
        rho: width ratio, ``rho > 0``.

    Returns:
        sorted list of ``(a, b)`` float pairs.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import aim_tutorial as aim
        >>> [(round(a, 3), round(b, 3)) for a, b in aim.support_edges(0.05, 0.5)]
        [(-0.342, 4.142)]
    """
    delta = _checks.positive("delta", delta)
    rho = _checks.positive("rho", rho)
    s = math.sqrt(rho)
    return [(float(a + s), float(b + s)) for a, b in _edges_shifted(delta, s)]


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


def spectral_integral(delta, rho, power: int = 3, rtol: float = 1e-12):
    """``int mu_delta(x)^power dx`` over the support, by adaptive quadrature, eq. (eq-rmt-mmse).

    ``power=1`` is the total mass (1 up to quadrature error), ``power=3``
    enters the MMSE. Vectorised over ``delta`` and ``rho`` (broadcast).

    Args:
        delta: noise variance(s), ``delta > 0``.
        rho: width ratio(s), ``rho > 0``.
        power: the exponent ``p`` of ``mu^p``.
        rtol: relative tolerance of the adaptive quadrature.

    Returns:
        float or array of the broadcast shape.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import aim_tutorial as aim
        >>> abs(aim.spectral_integral(0.1, 0.5, power=1) - 1) < 1e-12
        True
    """
    d_arr = _positive_array("delta", delta)
    r_arr = _positive_array("rho", rho)
    d_b, r_b = np.broadcast_arrays(d_arr, r_arr)
    shape = d_b.shape
    d_f, r_f = d_b.ravel(), r_b.ravel()
    owner, A, B, D, Sv = _support_items(d_f, r_f)
    vals, conv = _integrate_items(A, B, D, Sv, power, owner=owner, rtol=rtol)
    _warn_unconverged(conv, owner, d_f, r_f)
    out = np.bincount(owner, weights=vals, minlength=d_f.size).reshape(shape)
    return float(out) if out.ndim == 0 else out


def _warn_unconverged(converged, owner, delta, rho):
    """Report (never silently) a quadrature that hit its panel or round limit."""
    if not np.all(converged):
        bad = np.unique(owner[~converged])
        pairs = ", ".join(f"(delta={delta[i]:.3g}, rho={rho[i]:.3g})" for i in bad[:5])
        warnings.warn(
            f"spectral quadrature did not reach its tolerance at {bad.size} point(s): {pairs}; "
            "the result is accurate to about 1e-8 relative",
            RuntimeWarning,
            stacklevel=3,
        )


def _small_delta_slope(rho):
    """``lim mmse/delta`` as ``delta -> 0``: ``2 rho - rho^2`` for ``rho <= 1``, else 1."""
    return np.where(rho <= 1, 2 * rho - rho**2, 1.0)


def mmse_denoising(delta, rho):
    """MMSE of matrix denoising ``Y = S + sqrt(delta) Z``, per ``(1/d)||.||_F^2``, eq. (eq-rmt-mmse).

        mmse_rho(delta) = delta - (4 pi^2 / 3) delta^2 int mu_delta(x)^3 dx.

    It goes from ``(2 rho - rho^2) delta`` (``rho <= 1``; ``delta`` for
    ``rho >= 1``) at small ``delta`` to ``1 - 1/delta`` at large ``delta``.
    For ``delta <= 1`` this formula is evaluated as written; for ``delta > 1``
    (where it would lose ``log10(delta)`` digits to cancellation) the
    equivalent form ``1 - int mu(x) (xi(x) - sqrt(rho))^2 dx`` is used, with
    ``xi`` the RIE's cleaned eigenvalue (eq. (eq-rmt-mmse-xi): the Pythagorean
    identity ``E||S - S_hat||^2 = E||S||^2 - E||S_hat||^2`` of the posterior
    mean). The integrals are computed by vectorised adaptive Gauss-Legendre
    on each support interval after the substitution
    ``x = a + (b - a)(1 - cos t)/2`` (relative accuracy about 1e-12). Below
    ``delta = 1e-9`` the small-``delta`` slope is used (error below 1e-13).

    Args:
        delta: noise variance, ``delta > 0``, scalar or array.
        rho: width ratio, ``rho > 0``, scalar or array (broadcast with ``delta``).

    Returns:
        float (scalar inputs) or array of the broadcast shape. A quadrature
        that stops short of its tolerance issues a ``RuntimeWarning``.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import aim_tutorial as aim
        >>> round(aim.mmse_denoising(1.0, 0.5), 5)
        0.39695

    Reference: Maillard et al., arXiv 2408.03733 (the denoising MMSE formula);
    Bun, Bouchaud, Potters, Phys. Rep. 666 (2017).
    """
    d_arr = _positive_array("delta", delta)
    r_arr = _positive_array("rho", rho)
    d_b, r_b = np.broadcast_arrays(d_arr, r_arr)
    shape = d_b.shape
    d_f, r_f = d_b.ravel().copy(), r_b.ravel().copy()
    out = np.empty(d_f.size)
    small = d_f < _DELTA_SMALL
    out[small] = _small_delta_slope(r_f[small]) * d_f[small]
    for low_noise in (True, False):
        sel = ~small & ((d_f <= 1.0) if low_noise else (d_f > 1.0))
        if not np.any(sel):
            continue
        dm, rm = d_f[sel], r_f[sel]
        owner, A, B, D, Sv = _support_items(dm, rm)
        vals, conv = _integrate_items(A, B, D, Sv, 3 if low_noise else "xi2", owner=owner)
        _warn_unconverged(conv, owner, dm, rm)
        integral = np.bincount(owner, weights=vals, minlength=dm.size)
        if low_noise:  # delta - (4 pi^2/3) delta^2 int mu^3: no cancellation for delta <= 1
            out[sel] = dm - (4 * np.pi**2 / 3) * dm**2 * integral
        else:  # 1 - int mu (xi - sqrt(rho))^2: no cancellation for delta > 1
            out[sel] = 1.0 - integral
    out = out.reshape(shape)
    return float(out) if out.ndim == 0 else out


# ----------------------------------------------------------------------------
# the RIE
# ----------------------------------------------------------------------------


def rie_eigenvalues(lam, delta: float, rho: float) -> np.ndarray:
    """Cleaned eigenvalues ``xi(lambda) = lambda - 2 delta h(lambda)``, ``h`` = :func:`hilbert_transform`, eq. (eq-rmt-rie).

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import aim_tutorial as aim
        >>> abs(float(aim.rie_eigenvalues(1e3, 0.1, 0.5)) - 1e3) < 1e-3
        True
    """
    lam_a = np.asarray(lam, dtype=float)
    return _like(lam_a - 2 * delta * np.asarray(hilbert_transform(lam_a, delta, rho)), lam)


def rie_denoise(Y, delta: float, rho: float):
    """Rotation-invariant estimator (RIE) of ``S`` from ``Y = S + sqrt(delta) Z``, eq. (eq-rmt-rie).

    Eigendecompose ``Y = O diag(lambda) O^T`` and return
    ``O diag(lambda_i - 2 delta h(lambda_i)) O^T``, ``h = Re G`` the Hilbert
    transform of the limiting spectral law of ``Y``. It is the posterior mean
    (Bayes-optimal) as ``d -> infinity`` for rotation-invariant priors.

    Args:
        Y: symmetric matrix, shape ``(d, d)`` (NumPy or JAX array).
        delta: noise variance, ``delta > 0``.
        rho: width ratio of the prior ``S = W W^T / sqrt(r d)``, ``rho > 0``.

    Returns:
        symmetric ``(d, d)`` array, of the same kind (NumPy/JAX) as ``Y``.

    Taught in chapter 2 (``book/02_random_matrices.md``).

    Example:
        >>> import jax, aim_tutorial as aim
        >>> k1, k2 = jax.random.split(jax.random.key(0))
        >>> S = aim.sample_teacher(k1, 50, 0.5)
        >>> aim.rie_denoise(S + 0.3 * aim.sample_goe(k2, 50), 0.09, 0.5).shape
        (50, 50)

    Reference: Bun, Allez, Bouchaud, Potters, IEEE Trans. Inf. Theory 62 (2016);
    Ledoit, Peche, PTRF 151 (2011).
    """
    delta = _checks.positive("delta", delta)
    rho = _checks.positive("rho", rho)
    _checks.square_symmetric("Y", Y)
    is_jax = isinstance(Y, jax.Array)
    Yn = np.asarray(Y, dtype=float)
    Yn = 0.5 * (Yn + Yn.T)
    lam, O = np.linalg.eigh(Yn)
    xi = rie_eigenvalues(lam, delta, rho)
    out = (O * xi) @ O.T
    out = 0.5 * (out + out.T)
    return jnp.asarray(out) if is_jax else out
