"""The hardmax channel (``T = 2``): row ``a`` of ``y`` is the one-hot indicator of ``argmax_b h_ab``.

``s_a = +1`` when token ``a`` attends to itself, ``u_a = omega_aa - omega_12``,
``r = sqrt(3 V')``, ``k_a = s_a u_a / r``, ``c = s_1 s_2 / 3``:
``Z_out = Phi_2(k_1, k_2; c)``, the bivariate normal CDF, eq. (rep-hardmax-zout). Its logarithm
comes from Plackett's identity by Gauss-Legendre where that is accurate, from a quadrature in
log space elsewhere (:func:`_log_phi2_third`, :func:`_log_phi2`).
``score="exact"`` differentiates it; ``score="published"`` is the expression used for the
published reference data, with the joint density ``phi_2`` in place of both partial
derivatives (not a gradient: kept to reproduce those curves).

The state evolution needs ``G(t) = E[2 (r g_11)^2 + 2 (r g_22)^2 + (r g_12)^2]`` and
``E log Z_out`` as functions of ``t = q / V'`` only, eq. (bo-hardmax): ``q_hat / alpha =
2 G(t) / (3 V')``. Both are computed once by deterministic quadrature in the rescaled
variables ``kappa_a = u_a / sqrt(3 V')`` and cached. The error on the outputs is
``1 - (2/pi) arcsin(t / (1 + t))``. Chapter 4, section "Hardmax: the exact score against
the published one"; reference: arXiv 2506.01582.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, logsumexp
from scipy.interpolate import CubicSpline

from .. import _checks
from .base import _LOG_2PI, Channel, log_npdf as _log_npdf, register

__all__ = [
    "HARDMAX",
    "SCORES",
    "hardmax_score_moment",
    "hardmax_expected_log_partition",
    "output",
]
SCORES = ("exact", "published")


# ---------------------------------------------------------------------------
# log Phi_2 and the score


def _gl01(n):
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2  # nodes and weights on [0, 1]


_GL_RULES = {n: _gl01(n) for n in (24, 32, 48, 64)}
_CUT = 40.0  # log-integrand drop at which the integral is truncated (e^-40)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _log_phi2(k1, k2, c, n_nodes: int = 64):
    """``log Phi_2(k1, k2; c)`` for ``|c| <= 1/3``, accurate in every tail.

    Differentiated by its closed-form derivatives (:func:`_log_phi2_jvp`), not through the
    quadrature and its Newton steps.

    ``Phi_2 = int_{-inf}^{k1} phi(x) Phi((k2 - c x)/s) dx``, ``s = sqrt(1 - c^2)``.
    The log-integrand ``L`` is concave with ``L'' in [-1, -1 + c^2/s^2]``, so it is
    integrated in log space by Gauss-Legendre around its mode (interior case) or
    on a geometric grid from the end point ``k1`` (mode beyond ``k1``).
    """
    _GL_X, _GL_W = _GL_RULES[n_nodes]
    k1, k2, c = jnp.broadcast_arrays(k1, k2, c)
    s = jnp.sqrt(1 - c * c)
    kappa_min = 1 - c * c / (s * s)  # lower bound on -L''

    def L(x):
        if x.ndim > k2.ndim:  # quadrature nodes on a trailing axis
            return -0.5 * x * x - 0.5 * _LOG_2PI + log_ndtr((k2[..., None] - c[..., None] * x) / s[..., None])
        return -0.5 * x * x - 0.5 * _LOG_2PI + log_ndtr((k2 - c * x) / s)

    def dL(x):
        z = (k2 - c * x) / s
        lam = jnp.exp(-0.5 * z * z - 0.5 * _LOG_2PI - log_ndtr(z))
        return -x - (c / s) * lam, lam, z

    def newton(_, x):
        d1, lam, z = dL(x)
        d2 = -1 + (c * c) / (s * s) * (-lam * (lam + z))
        # -lam (lam + z) lies in (-1, 0); clip it (rounding in far tails)
        d2 = jnp.clip(d2, -1.0, -kappa_min)
        return x - d1 / d2

    # start at the mode's asymptote (c k2 when k2 << 0, 0 when k2 >> 0); contraction <= 1/8 a step
    m0 = jax.lax.fori_loop(0, 14, newton, c * jnp.minimum(k2, 0.0))
    half = jnp.sqrt(2 * _CUT / kappa_min)[..., None]
    kmin = kappa_min[..., None]
    # interior: [m0 - half, min(k1, m0 + half)]
    a = m0[..., None] - half
    b = jnp.minimum(k1[..., None], m0[..., None] + half)
    # boundary: x = k1 - t, t = eps (exp(kap v) - 1), v in [0, 1]
    g = jnp.maximum(dL(k1)[0], 0.0)[..., None]
    tmax = (-g + jnp.sqrt(g * g + 2 * kmin * _CUT)) / kmin
    eps = 1 / (1 + g)
    kap = jnp.log1p(tmax / eps)
    ev = jnp.exp(kap * _GL_X)
    t = eps * (ev - 1)
    interior = (m0 <= k1)[..., None]
    # the nodes and weights of the rule that applies, then the integrand once: log_ndtr at n_nodes
    # points, not at both rules' 2 n_nodes (the same values, faster: benchmarks/design_history.json)
    x = jnp.where(interior, a + (b - a) * _GL_X, k1[..., None] - t)
    log_w = jnp.where(interior, jnp.log((b - a) * _GL_W), jnp.log(eps * kap * ev * _GL_W))
    return logsumexp(log_w + L(x), axis=-1)


def _log_phi2_tangent(k1, k2, c, out, tangents):
    """The tangent of ``log Phi_2 = out`` along ``tangents = (t1, t2, tc)``: ``d/dk1 = phi(k1)
    Phi((k2 - c k1)/s) / Phi_2`` (and ``k1 <-> k2``), ``d/dc = phi_2(k1, k2; c) / Phi_2`` (Plackett's
    identity), ``s = sqrt(1 - c^2)``."""
    t1, t2, tc = tangents
    sq = jnp.sqrt(1 - c * c)
    g1 = jnp.exp(_log_npdf(k1) + log_ndtr((k2 - c * k1) / sq) - out)
    g2 = jnp.exp(_log_npdf(k2) + log_ndtr((k1 - c * k2) / sq) - out)
    gc = jnp.exp(-(k1 * k1 - 2 * c * k1 * k2 + k2 * k2) / (2 * sq * sq) - _LOG_2PI - jnp.log(sq) - out)
    return g1 * t1 + g2 * t2 + gc * tc


@_log_phi2.defjvp
def _log_phi2_jvp(n_nodes, primals, tangents):
    """The derivatives of ``log Phi_2`` in closed form (:func:`_log_phi2_tangent`). In a GAMP-RIE
    iteration the score's derivatives go through these, not autodiff through the quadrature (slower:
    the benchmarks page, ``benchmarks/design_history.json``)."""
    k1, k2, c = jnp.broadcast_arrays(*primals)
    out = _log_phi2(k1, k2, c, n_nodes)
    return out, _log_phi2_tangent(k1, k2, c, out, tangents)


# log Phi_2 at the hardmax's correlations c = +-1/3 (_log_phi2_third): Plackett's identity with
# t = sin(theta), Gauss-Legendre on [0, asin(1/3)] at _THIRD_NODES nodes


def _third_rule(n):
    x, w = np.polynomial.legendre.leggauss(n)
    theta, half = (x + 1) / 2 * math.asin(1 / 3), math.asin(1 / 3) / 2
    return np.sin(theta), np.cos(theta) ** 2, np.log(w * half) - _LOG_2PI  # log(weight / 2 pi)


_THIRD_NODES = 16
_THIRD_SIN, _THIRD_COS2, _THIRD_LOGW = _third_rule(_THIRD_NODES)
_THIRD_SPREAD_EDGE, _THIRD_SPREAD_BUMP = 20.0, 6.0  # how much the log-integrand may vary over the nodes
# the quadrature of _log_phi2 runs on 1/_THIRD_BATCH of the entries at a time: after the first
# iterations of a GAMP-RIE run few samples need it (measured: benchmarks/design_history.json)
_THIRD_BATCH = 200


def _log_phi2_third_fast(k1, k2, c):
    """The Drezner-Wesolowsky value of ``log Phi_2(k1, k2; c)``, ``c = +-1/3``, on flat arrays, and
    where it is accurate (``ok``; elsewhere :func:`_log_phi2_third` calls :func:`_log_phi2`)."""
    dt = k1.dtype
    sgn = jnp.sign(c)[:, None]
    E = (-(k1[:, None] ** 2 + k2[:, None] ** 2 - 2 * sgn * k1[:, None] * k2[:, None] * jnp.asarray(_THIRD_SIN, dt))
         / (2 * jnp.asarray(_THIRD_COS2, dt)))
    B = logsumexp(E + jnp.asarray(_THIRD_LOGW, dt), axis=-1)  # log |I|
    # log Phi(k): JAX's default asymptotic series below k = -20 (3 terms) is off by 2e-9 at k = -21
    A = log_ndtr(k1, series_order=10) + log_ndtr(k2, series_order=10)
    gap = B - A
    out = jnp.where(c > 0, jnp.logaddexp(A, B), A + jnp.log1p(-jnp.exp(jnp.minimum(gap, math.log(0.5)))))
    # Gauss-Legendre is accurate (5e-15 relative to max(1, |log Phi_2|) against _log_phi2 on 400,000
    # random points up to |k| = 60) when the integrand is largest at an end of [0, asin c] and
    # varies by less than e^20 over the nodes, or has its bump inside and varies by less than e^6
    spread = jnp.max(E, axis=-1) - jnp.min(E, axis=-1)
    top = jnp.argmax(E, axis=-1)
    edge = (top == 0) | (top == _THIRD_NODES - 1)
    accurate = jnp.where(edge, spread < _THIRD_SPREAD_EDGE, spread < _THIRD_SPREAD_BUMP)
    # |I| <= asin(1/3) / (2 pi) exp(-(k1^2 + k2^2) / 3): below e^-40 Phi(k1) Phi(k2) it cannot matter
    negligible = math.log(math.asin(1 / 3) / (2 * math.pi)) - (k1 * k1 + k2 * k2) / 3 - A < -40.0
    ok = ((accurate & ((c > 0) | (gap < math.log(0.5)))) | negligible) & jnp.isfinite(out)
    # the nodes are those of |c| = 1/3 (s1 s2 / 3 is exactly the rounded 1/3): any other c to the quadrature
    return out, ok & (jnp.abs(c) == jnp.asarray(1 / 3, dt))


@jax.custom_jvp
def _log_phi2_third(k1, k2, c):
    """``log Phi_2(k1, k2; c)``, fast at ``c = +-1/3`` (the hardmax channel's; any other ``c``,
    ``|c| <= 1/3``, goes to :func:`_log_phi2` whole): the value of :func:`_log_phi2`, closer to the
    exact one (median error 3e-17 against 8e-16 relative to ``max(1, |log Phi_2|)``, mpmath at 60
    digits and more), in a ninth of its time at the samples of a GAMP-RIE run (the benchmarks page, ``benchmarks/design_history.json``).

    Plackett's identity with ``t = sin(theta)`` (the form of Drezner and Wesolowsky; Genz 2004,
    Statistics and Computing 14, 251): ``Phi_2 = Phi(k1) Phi(k2) + I``, ``I = (1 / 2 pi)
    int_0^{asin c} exp(-(k1^2 + k2^2 - 2 k1 k2 sin theta) / (2 cos^2 theta)) d theta``, by
    Gauss-Legendre at ``_THIRD_NODES`` nodes in log space. Used where that is accurate
    (:func:`_log_phi2_third_fast`): for ``c < 0`` (``I < 0``) only where ``|I| < Phi(k1) Phi(k2) / 2``,
    so that the difference loses at most one bit. The other entries (at ``c < 0`` both ``k``
    negative, where ``Phi_2 << Phi(k1) Phi(k2)``; the far tails: 0-1.6 % of the samples of a
    run) go to :func:`_log_phi2`, ``1/_THIRD_BATCH`` of the entries at a time, as often as needed.
    """
    k1, k2, c = jnp.broadcast_arrays(k1, k2, c)
    shape = k1.shape
    k1, k2, c = k1.ravel(), k2.ravel(), c.ravel()
    size = k1.size
    if size == 0:
        return jnp.zeros(shape, k1.dtype)
    out, ok = _log_phi2_third_fast(k1, k2, c)
    K = max(1, -(-size // _THIRD_BATCH))

    def more(carry):
        return jnp.any(carry[1])

    def quadrature(carry):
        out, todo = carry
        idx = jnp.nonzero(todo, size=K, fill_value=size)[0]  # past the end: dropped
        pick = [a.at[idx].get(mode="clip") for a in (k1, k2, c)]
        vals = _log_phi2(*pick).astype(out.dtype)
        return out.at[idx].set(vals, mode="drop"), todo.at[idx].set(False, mode="drop")

    out, _ = jax.lax.while_loop(more, quadrature, (out, ~ok))
    return out.reshape(shape)


@_log_phi2_third.defjvp
def _log_phi2_third_jvp(primals, tangents):
    k1, k2, c = jnp.broadcast_arrays(*primals)
    out = _log_phi2_third(k1, k2, c)
    return out, _log_phi2_tangent(k1, k2, c, out, tangents)


def _hardmax_parts(y, omega, Veff):
    s1 = jnp.where(y[..., 0, 0] > 0.5, 1.0, -1.0)
    s2 = jnp.where(y[..., 1, 1] > 0.5, 1.0, -1.0)
    r = jnp.sqrt(3 * Veff)
    k1 = s1 * (omega[..., 0, 0] - omega[..., 0, 1]) / r
    k2 = s2 * (omega[..., 1, 1] - omega[..., 0, 1]) / r
    c = s1 * s2 / 3
    return s1, s2, r, k1, k2, c


def _hardmax_score(y, omega, Veff, published):
    s1, s2, r, k1, k2, c = _hardmax_parts(y, omega, Veff)
    logZ = _log_phi2_third(k1, k2, c)
    sq = jnp.sqrt(1 - c * c)
    if published:
        log_phi2 = -(k1 * k1 - 2 * c * k1 * k2 + k2 * k2) / (2 * (1 - c * c)) - _LOG_2PI - jnp.log(sq)
        d1 = d2 = jnp.exp(log_phi2 - logZ)
        g12 = -(s1 * d1 + s2 * d2) / r
    else:
        d1 = jnp.exp(_log_npdf(k1) + log_ndtr((k2 - c * k1) / sq) - logZ)
        d2 = jnp.exp(_log_npdf(k2) + log_ndtr((k1 - c * k2) / sq) - logZ)
        g12 = -(s1 * d1 + s2 * d2) / r
    g11 = s1 * d1 / r
    g22 = s2 * d2 / r
    row0 = jnp.stack([g11, g12 / 2], axis=-1)
    row1 = jnp.stack([g12 / 2, g22], axis=-1)
    return jnp.stack([row0, row1], axis=-2)



# ---------------------------------------------------------------------------
# the state-evolution integrals G(t), L(t), t = q / V'

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
    logZ = _log_phi2(k1, k2, jnp.broadcast_to(c, k1.shape), 32)
    l1 = _log_npdf(k1) + jax.scipy.special.log_ndtr((k2 - c * k1) / sq)
    l2 = _log_npdf(k2) + jax.scipy.special.log_ndtr((k1 - c * k2) / sq)
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

    # the power law beyond t_hi, log y = tail[0] + tail[1] (log t - tail[2]), for callers whose t overflows
    f.tail = (float(np.log(yy[-1])), slope_hi, float(lt[-1])) if log_values else None
    return f


def _ratio_array(t):
    """``t = q / V'``: a finite real scalar or array, ``>= 0`` (the tables are defined there only)."""
    _checks.real_array("t", t, allow_empty=True)
    if np.any(np.asarray(t, dtype=float) < 0):
        raise ValueError("t = q / V' must be >= 0")
    return t


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
    _checks.one_of("score", score, SCORES)
    t = _ratio_array(t)
    tab = _hardmax_table()
    out = (tab.G_published if score == "published" else tab.G_exact)(np.asarray(t, dtype=float))
    return float(out) if np.ndim(out) == 0 else out


def hardmax_expected_log_partition(t):
    """``E log Z_out`` of the hardmax channel (T = 2) at ``t = q / V'`` (exact; one function of ``t``)."""
    t = _ratio_array(t)
    out = _hardmax_table().L(np.asarray(t, dtype=float))
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------
# the channel


def output(h, beta=None):
    """Row-wise hardmax: row ``a`` is the one-hot indicator of ``argmax_b h_ab``."""
    return jax.nn.one_hot(jnp.argmax(h, axis=-1), h.shape[-1], dtype=h.dtype)


def _score(y, omega, Vp, beta, score):
    return _hardmax_score(y, omega, Vp, score == "published")


def _log_partition(y, omega, Vp, beta):
    _, _, _, k1, k2, c = _hardmax_parts(y, omega, Vp)
    return _log_phi2_third(k1, k2, c)


def _H(q, Vp, T, beta, score):
    tab = _hardmax_table()
    G = tab.G_published if score == "published" else tab.G_exact
    q, Vp = np.asarray(q, dtype=float), np.asarray(Vp, dtype=float)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        out = 2 * G(q / Vp) / (3 * Vp)
        # a subnormal V' (noise below 2e-308 at q = Q0): q / V' overflows to inf, where the table's tail
        # gave G = 0, and q_hat = 0 instead of ~1e154; the tail's power law in logs has no overflow
        fix = (q > 0) & (Vp > 0) & ~(np.isfinite(out) & (out > 0))
        if np.any(fix):
            ly, slope, lt_hi = G.tail
            lq, lv = np.log(np.where(fix, q, 1.0)), np.log(np.where(fix, Vp, 1.0))
            out = np.where(fix, np.exp(math.log(2 / 3) + ly + slope * (lq - lv - lt_hi) - lv), out)
    return out


def _ElogZ(q, Vp, T, beta):
    return _hardmax_table().L(q / Vp)


def _label_error(q, Vp, T, beta, key, n_samples):
    with np.errstate(over="ignore", divide="ignore"):
        t = np.asarray(q, dtype=float) / Vp
    # t = inf (a subnormal V'): t / (1 + t) is 1 there, not inf / inf
    return 1 - (2 / np.pi) * np.arcsin(np.where(np.isinf(t), 1.0, t / (1 + t)))


def _check(T, beta, noise, score):
    if T != 2:
        raise ValueError(f"T must be 2 for channel='hardmax' (closed form), got T = {T}")


def _check_outputs(name, y, beta, log_outputs):
    _checks.one_hot(name, y)


HARDMAX = register(Channel(
    name="hardmax", summary="one-hot argmax of each row (T = 2)", output=output, score=_score,
    log_partition=_log_partition, se_H=_H, se_ElogZ=_ElogZ, label_error=_label_error, check=_check,
    check_outputs=_check_outputs, differentiable=False, scores=SCORES))
