"""The integrals of one entry of an elementwise channel (private to :mod:`aim_tutorial.channels.elementwise`).

The score and ``log Z_1`` of the scalar channel ``y = f(h)`` (+ label noise), in JAX, and the
state-evolution integrals ``I`` and ``L`` of one entry, by composite Gauss-Legendre quadrature
over ``omega`` (and ``h``, ``y`` with label noise): the methods of the module docstring of
:mod:`aim_tutorial.channels.elementwise`. Split out of ``elementwise.py`` (issue 49);
``elementwise`` imports the names that :func:`~aim_tutorial.channels.elementwise.make` uses back
(``aim_tutorial.channels.elementwise._noisy_point`` is the same object).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, logsumexp
from numpy.lib.stride_tricks import sliding_window_view
from scipy import special as sps

from .base import log_npdf

if TYPE_CHECKING:
    from .elementwise import Structure


_CLIP = 40.0  # standardised ends beyond +-40 carry probability below e^-800



_U_LOCAL = np.array([-40, -20, -12, -8, -5, -3, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 5, 8, 12, 20, 40.0])
_U_GLOBAL = np.linspace(-14.0, 14.0, 57)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)



# ---------------------------------------------------------------------------
# the scalar channel, noiseless (JAX: the score and log Z_1)


def _log_diff_ndtr(alpha, beta):
    """``log(Phi(beta) - Phi(alpha))`` for ``alpha <= beta``, stable in both tails."""
    upper = alpha > 0
    hi = jnp.where(upper, log_ndtr(-alpha), log_ndtr(beta))
    lo = jnp.where(upper, log_ndtr(-beta), log_ndtr(alpha))
    d = jnp.minimum(lo - hi, -1e-300)
    return hi + jnp.log(-jnp.expm1(d))


def _invert(f, st: Structure, y, inverse=None):
    """``h = f^{-1}(y)`` on the monotone piece whose image holds ``y`` (``nan`` if none).

    By bisection on every piece at once, or with ``inverse`` when it is known in closed form.
    """
    if inverse is not None:
        inside = jnp.zeros(y.shape, dtype=bool)
        for lo, hi in zip(st.piece_lo, st.piece_hi):
            inside = inside | ((y > lo) & (y < hi))
        return jnp.where(inside, inverse(y), jnp.nan)
    if st.piece_a.size == 0:
        return jnp.full(y.shape, jnp.nan)
    big = 1e4
    a = jnp.asarray(np.maximum(st.piece_a, -big))
    b = jnp.asarray(np.minimum(st.piece_b, big))
    inc = jnp.asarray(st.piece_increasing)
    yy = y[..., None]
    lo = jnp.broadcast_to(a, yy.shape[:-1] + a.shape)
    hi = jnp.broadcast_to(b, lo.shape)

    def body(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        right = (f(mid) < yy) == inc  # the root lies to the right of mid
        return jnp.where(right, mid, lo), jnp.where(right, hi, mid)

    lo, hi = jax.lax.fori_loop(0, 110, body, (lo, hi))
    root = 0.5 * (lo + hi)
    inside = (yy > jnp.asarray(st.piece_lo)) & (yy < jnp.asarray(st.piece_hi))
    h = jnp.sum(jnp.where(inside, root, 0.0), axis=-1)
    return jnp.where(jnp.any(inside, axis=-1), h, jnp.nan)


def _entry_noiseless(f, st: Structure, y, omega, v, inverse=None):
    """``(log Z_1, g)`` of one entry, elementwise over arrays (``log Z_1`` without the Jacobian of ``f``)."""
    sv = jnp.sqrt(v)
    h = jax.lax.stop_gradient(_invert(f, st, y, inverse))
    h_safe = jnp.where(jnp.isnan(h), omega, h)
    z = (h_safe - omega) / sv
    logz_d = log_npdf(z) - jnp.log(sv)
    g_d = z / sv
    if st.flat_c.size == 0:
        return logz_d, g_d
    c = jnp.asarray(st.flat_c)
    match = jnp.abs(y[..., None] - c) <= 4.5e-16 * jnp.maximum(1.0, jnp.abs(c))
    al = jnp.clip((jnp.asarray(st.flat_a) - omega[..., None]) / sv[..., None], -_CLIP, _CLIP)
    be = jnp.clip((jnp.asarray(st.flat_b) - omega[..., None]) / sv[..., None], -_CLIP, _CLIP)
    be = jnp.maximum(be, al + 1e-300)
    logzk = _log_diff_ndtr(al, be)
    in_flat = jnp.any(match, axis=-1)
    logz_f = logsumexp(jnp.where(match, logzk, -jnp.inf), axis=-1)
    logz_f = jnp.where(in_flat, logz_f, 0.0)
    num = jnp.exp(log_npdf(al) - logz_f[..., None]) - jnp.exp(log_npdf(be) - logz_f[..., None])
    g_f = jnp.sum(jnp.where(match, num, 0.0), axis=-1) / sv
    nan = jnp.isnan(h) & ~in_flat
    logz = jnp.where(in_flat, logz_f, jnp.where(nan, jnp.nan, logz_d))
    g = jnp.where(in_flat, g_f, jnp.where(nan, jnp.nan, g_d))
    return logz, g


# ---------------------------------------------------------------------------
# the scalar channel with label noise (JAX)


_GL8_X, _GL8_W = np.polynomial.legendre.leggauss(8)
_ZMAX = 10.0  # the h-integrals with label noise cover omega +- 10 sqrt(v) (mass outside: 1.5e-23)


def _h_rule(omega, v, kinks, n_pan):
    """Composite 8-point Gauss-Legendre rule in ``h`` over ``omega +- 10 sqrt(v)``: ``n_pan`` equal
    panels, each end of a flat interval of ``f`` inside (a kink) one more break, so that every
    panel integrates a smooth function. Returns ``h``, the weights, and ``log N(h; omega, v)``,
    shape ``(..., (n_pan + len(kinks)) * 8)``."""
    sv = jnp.sqrt(v)
    lo, hi = omega - _ZMAX * sv, omega + _ZMAX * sv
    edges = lo[..., None] + (hi - lo)[..., None] * jnp.linspace(0.0, 1.0, n_pan + 1)
    if len(kinks):
        k = jnp.clip(jnp.asarray(kinks, dtype=edges.dtype), lo[..., None], hi[..., None])
        edges = jnp.sort(jnp.concatenate([edges, k], axis=-1), axis=-1)
    a, b = edges[..., :-1], edges[..., 1:]
    h = ((a + b)[..., None] / 2 + (b - a)[..., None] / 2 * _GL8_X).reshape(a.shape[:-1] + (-1,))
    w = ((b - a)[..., None] / 2 * _GL8_W).reshape(a.shape[:-1] + (-1,))
    logp = -0.5 * (h - omega[..., None]) ** 2 / v[..., None] - 0.5 * jnp.log(2 * math.pi * v[..., None])
    return h, w, logp


def _entry_noisy(f, sigma2, kinks, n_pan, y, omega, v):
    """``(log Z_1, g)`` with Gaussian label noise, by the kink-aware rule :func:`_h_rule`."""
    h, w, logp = _h_rule(omega, v, kinks, n_pan)
    e = logp - 0.5 * (y[..., None] - f(h)) ** 2 / sigma2 - 0.5 * jnp.log(2 * math.pi * sigma2)
    top = jnp.max(e, axis=-1, keepdims=True)
    p = w * jnp.exp(e - top)  # zero-width panels (a kink outside the window) have w = 0
    Z = jnp.sum(p, axis=-1)
    logz = top[..., 0] + jnp.log(Z)
    g = jnp.sum(p * (h - omega[..., None]), axis=-1) / Z / v
    return logz, g


# ---------------------------------------------------------------------------
# the state-evolution integrals of one entry (numpy)


def _flat_terms(st: Structure, omega, v):
    """``S = sum_c P_c Var_c / v`` and the flat part of ``E log Z_1``, at each ``omega`` (arrays)."""
    sv = np.sqrt(v)[..., None]
    al = np.clip((st.flat_a - omega[..., None]) / sv, -_CLIP, _CLIP)
    be = np.clip((st.flat_b - omega[..., None]) / sv, -_CLIP, _CLIP)
    upper = al > 0
    logzk = np.where(upper, sps.log_ndtr(-al) + np.log(-np.expm1(np.minimum(sps.log_ndtr(-be) - sps.log_ndtr(-al), -1e-300))),
                     sps.log_ndtr(be) + np.log(-np.expm1(np.minimum(sps.log_ndtr(al) - sps.log_ndtr(be), -1e-300))))
    lpa, lpb = -0.5 * al * al - 0.5 * math.log(2 * math.pi), -0.5 * be * be - 0.5 * math.log(2 * math.pi)
    S = np.zeros(np.shape(omega))
    plogp = np.zeros(np.shape(omega))
    m2_all = np.zeros(np.shape(omega))
    ptot = np.zeros(np.shape(omega))
    for gi in range(st.n_groups):
        k = st.flat_group == gi
        lz = sps.logsumexp(logzk[..., k], axis=-1)
        r1 = np.sum(np.exp(lpa[..., k] - lz[..., None]) - np.exp(lpb[..., k] - lz[..., None]), axis=-1)
        r2 = np.sum(np.exp(logzk[..., k] - lz[..., None]) + al[..., k] * np.exp(lpa[..., k] - lz[..., None])
                    - be[..., k] * np.exp(lpb[..., k] - lz[..., None]), axis=-1)
        P = np.exp(lz)
        S += P * np.maximum(r2 - r1 * r1, 0.0)
        plogp += P * lz
        m2_all += P * r2
        ptot += P
    return S, plogp, m2_all, ptot


def _omega_rule(st: Structure, q_s, v):
    """Composite Gauss-Legendre nodes and weights of ``omega ~ N(0, q_s)``, with panels at scale ``sqrt(v)``
    around every finite end of a flat interval (rows: one per ``(q_s, v)``)."""
    return _omega_rule_at(np.concatenate([st.flat_a, st.flat_b]), q_s, v)


def _omega_rule_at(ends, q_s, v):
    """:func:`_omega_rule` with local panels around the points ``ends`` (the kinks of ``f``)."""
    q_s, v = np.broadcast_arrays(np.asarray(q_s, float), np.asarray(v, float))
    ends = np.asarray(ends, float)
    ends = ends[np.isfinite(ends)]
    sq, sv = np.sqrt(q_s).ravel()[:, None], np.sqrt(v).ravel()[:, None]
    pts = [sq * _U_GLOBAL[None, :]]
    for e in ends:
        pts.append(e + sv * _U_LOCAL[None, :])
    brk = np.sort(np.clip(np.concatenate(pts, axis=1), -14 * sq, 14 * sq), axis=1)
    a, b = brk[:, :-1], brk[:, 1:]
    x = (a + b)[..., None] / 2 + (b - a)[..., None] / 2 * _GL_X
    w = (b - a)[..., None] / 2 * _GL_W
    x, w = x.reshape(x.shape[0], -1), w.reshape(w.shape[0], -1)
    w = w * np.exp(-0.5 * x * x / sq**2)
    return x, w / np.sum(w, axis=1, keepdims=True), q_s.shape


def _entry_se_noiseless(st: Structure, q_s, v):
    """``(I, L)`` of one entry: Fisher information and ``E log Z_1`` (up to a constant), noiseless."""
    q_s, v = np.broadcast_arrays(np.asarray(q_s, float), np.asarray(v, float))
    if st.flat_c.size == 0:
        return 1.0 / v, -0.5 * np.log(2 * math.pi * v) - 0.5
    if q_s.size == 0:
        return np.zeros(q_s.shape), np.zeros(q_s.shape)
    # rows where h (marginally N(0, q_s + v)) lands in a flat part with probability below
    # 1e-18: E S <= that probability (Var(h | flat) <= v), so I = 1/v to float64 accuracy
    sd = np.sqrt(q_s + v)[..., None]
    p_flat = np.sum(sps.ndtr(st.flat_b / sd) - sps.ndtr(st.flat_a / sd), axis=-1)
    need = p_flat >= 1e-18
    if not np.all(need):
        I0, L0 = 1.0 / v, -0.5 * np.log(2 * math.pi * v) - 0.5
        if not np.any(need):
            return I0, L0
        In, Ln = _entry_se_noiseless(st, q_s[need], v[need])
        I0, L0 = np.array(I0, dtype=float), np.array(L0, dtype=float)
        I0[need], L0[need] = In, Ln
        return I0, L0
    zero = q_s <= 0  # omega = 0 exactly: one node
    x, w, shape = _omega_rule(st, np.where(zero, 1.0, q_s), v)
    x, w = np.where(zero.ravel()[:, None], 0.0, x), np.where(zero.ravel()[:, None], 1.0 / x.shape[1], w)
    vv = v.ravel()[:, None]
    S, plogp, m2, ptot = _flat_terms(st, x, np.broadcast_to(vv, x.shape))
    I = (1.0 - np.sum(w * S, axis=1)) / v.ravel()
    L = np.sum(w * (plogp + (1 - ptot) * (-0.5 * np.log(2 * math.pi * vv)) - 0.5 * (1 - m2)), axis=1)
    return I.reshape(shape), L.reshape(shape)


@functools.partial(jax.jit, static_argnames=("f", "kinks", "n_pan", "n_y", "batch"))
def _entry_se_noisy_jit(f, sigma2, kinks, n_pan, n_y, batch, xo, wo, v):
    """``(I, L)`` with label noise at the ``omega`` nodes ``xo`` (weights ``wo``): for each node,
    ``Z_1(y)`` and its ``omega``-derivative on a grid of ``y`` (the rule :func:`_h_rule` over
    ``h``), then ``I = int (dZ_1)^2 / Z_1 dy`` and ``L = int Z_1 log Z_1 dy`` by the
    trapezoidal rule in ``y`` (spectrally accurate: the integrands are smooth on the scale
    ``sigma``, and the grid has at least 4 points a ``sigma``)."""
    h, w, logp = _h_rule(xo, jnp.full(xo.shape, v), kinks, n_pan)
    prior = w * jnp.exp(logp)
    fh = f(h)
    sig = jnp.sqrt(sigma2)

    def one(args):
        fh_o, pr_o, h_o, om = args
        # the y where Z_1(y | omega) lives: f over omega +- 10 sqrt(v), widened by 10 sigma
        y = jnp.linspace(jnp.min(fh_o) - 10 * sig, jnp.max(fh_o) + 10 * sig, n_y)
        dy = y[1] - y[0]
        kern = jnp.exp(-0.5 * (y[:, None] - fh_o[None, :]) ** 2 / sigma2) / jnp.sqrt(2 * math.pi * sigma2)
        Z = kern @ pr_o
        dZ = kern @ (pr_o * (h_o - om)) / v
        ok = Z > 1e-300
        Zs = jnp.where(ok, Z, 1.0)
        return (jnp.sum(jnp.where(ok, dZ * dZ / Zs, 0.0)) * dy, jnp.sum(jnp.where(ok, Z * jnp.log(Zs), 0.0)) * dy)

    I, L = jax.lax.map(one, (fh, prior, h, xo), batch_size=batch)
    return jnp.sum(wo * I), jnp.sum(wo * L)


@functools.partial(jax.jit, static_argnames=("f", "kinks"))
def _output_variance(f, kinks, xo, wo, v):
    """``E_omega Var(f(h) | omega)``, ``h ~ N(omega, v)``, at the ``omega`` nodes ``xo`` (weights ``wo``)."""
    h, w, logp = _h_rule(xo, jnp.full(xo.shape, v), kinks, 64)
    p = w * jnp.exp(logp)
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    fh = f(h)
    m1 = jnp.sum(p * fh, axis=-1)
    return jnp.sum(wo * jnp.maximum(jnp.sum(p * (fh - m1[:, None]) ** 2, axis=-1), 0.0))


def _bucket(n, lo, hi):
    """``n`` rounded up to a power of two in ``[lo, hi]`` (few shapes: few compilations)."""
    return int(min(max(lo, 2 ** math.ceil(math.log2(max(n, 1)))), hi))


def _noisy_point(f, sigma2, kinks, q_s, v, n_pan=None, n_y=None):
    """``(I, L)`` of one entry with label noise at ``(q_s, v)``, with sizes chosen from ``f``
    and panel breaks at its ``kinks`` (:func:`kinks`)."""
    x, w, _ = _omega_rule_at(kinks, q_s, v)
    x, w = x[0], w[0]
    keep = w > 1e-20 * w.max()
    x, w = x[keep], w[keep] / w[keep].sum()
    pad = -x.size % 128  # a few lengths only: a few compilations
    x, w = np.concatenate([x, np.zeros(pad)]), np.concatenate([w, np.zeros(pad)])
    sig, sv = math.sqrt(sigma2), math.sqrt(v)
    R = float(np.max(np.abs(x))) + _ZMAX * sv
    grid = np.linspace(-R, R, 4001)
    fg = np.asarray(f(jnp.asarray(grid)))
    slope = float(np.max(np.abs(np.diff(fg)) / (grid[1] - grid[0])))
    # Z_1(y) is the h-rule's sum of Gaussians N(y; f(h_i), sigma^2): a rule with nodes closer
    # than sigma in f integrates the convolution with error ~ exp(-2 pi^2 (sigma / gap)^2), so
    # two nodes a width sigma / |f'| in h (four panels of 8 nodes: 1e-13), and the y-integrands,
    # smooth on the scale sigma, need two trapezoid points a sigma (error ~ exp(-80))
    if n_pan is None:
        n_pan = _bucket(2 * (2 * _ZMAX * sv * slope / sig) / 8, 16, 1024)
    if n_y is None:  # the widest range of f over one window omega +- 10 sqrt(v)
        win = int(np.ceil(2 * _ZMAX * sv / (grid[1] - grid[0]))) + 1
        if win >= fg.size:
            spread = float(fg.max() - fg.min())
        else:
            view = sliding_window_view(fg, win)[:: max(1, win // 8)]
            spread = float(np.max(view.max(axis=1) - view.min(axis=1)))
        n_y = _bucket((spread + 20 * sig) / (sig / 2), 128, 1 << 15)
    n_h = (n_pan + len(kinks)) * 8
    # omega nodes a pass: the kernel's (batch, n_y, n_h) block about 2.4 MB, in cache (32 MB blocks
    # made every pass wait on memory: benchmarks/design_history.json)
    batch = max(1, int(3e5 // (n_y * n_h)))
    I, L = _entry_se_noisy_jit(f, sigma2, kinks, n_pan, n_y, batch, jnp.asarray(x), jnp.asarray(w), float(v))
    return float(I), float(L)
