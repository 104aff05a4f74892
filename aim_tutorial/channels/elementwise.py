"""Elementwise channels ``y_ab = f(h_ab)`` (plus optional Gaussian noise on ``y``), exact in any ``T``.

Given ``omega``, the free entries ``h_ab`` (``a <= b``) are independent Gaussians,
``h_aa ~ N(omega_aa, 2V')`` and ``h_ab ~ N(omega_ab, V')``, and each ``y_ab`` depends on
its own ``h_ab`` only. So ``Z_out`` factorises over the ``T(T+1)/2`` entries,

    Z_out(y | omega, V) = prod_{a <= b} Z_1(y_ab | omega_ab, v_ab),   v_aa = 2V', v_ab = V',

and everything the book needs reduces to one scalar channel ``Z_1(y | omega, v)``:

- the score entry ``g = d log Z_1 / d omega = (E[h | y, omega] - omega) / v``
  (``Gamma_aa = g_aa``, ``Gamma_ab = g_ab / 2``);
- the state evolution ``q_hat / alpha = 2 [2 T I(2q, 2V') + (T(T-1)/2) I(q, V')]`` with
  the Fisher information of one entry ``I(q_s, v) = E[g^2]`` for ``omega ~ N(0, q_s)``,
  which by the Nishimori identity is ``I = (v - E Var(h | y, omega)) / v^2``;
- ``E log Z_out = T L(2q, 2V') + (T(T-1)/2) L(q, V')`` with ``L = E log Z_1``.

**Noiseless** (``label_noise = 0``). ``f`` must be strictly monotone outside a set of
flat intervals on which it is constant, with distinct values on distinct pieces (as
ReLU, a clipped or a step function, the sigmoid): then ``y`` either lands on a flat
value ``c`` (``h`` is known to lie in the intervals where ``f = c``) or determines
``h = f^{-1}(y)`` exactly. :func:`analyse` finds the pieces of ``f`` on a fine grid and
refines their ends by bisection (``f`` may jump where it reaches or leaves a flat value: the
image of a piece is between the one-sided limits of ``f`` at its ends). With ``P_c`` the
probability of the flat value ``c`` and ``Var_c`` the variance of the truncated Gaussian
``h | h in {f = c}``,

    I(q_s, v) = (1 - E_omega sum_c P_c Var_c / v) / v,

one-dimensional integrals of closed-form truncated-normal moments, done by composite
Gauss-Legendre quadrature with panels at both scales ``sqrt(q_s)`` and ``sqrt(v)``.
An ``f`` with no flat part (the sigmoid) is then the linear channel: ``I = 1/v``.

**With label noise** ``sigma^2 > 0`` (any ``f``): ``Z_1 = int N(h; omega, v) N(y; f(h), sigma^2) dh``
by composite Gauss-Legendre quadrature in ``h`` with panel breaks at the kinks of ``f``
(:func:`kinks`); ``I = E int (d_omega Z_1)^2 / Z_1 dy`` and ``L = E int Z_1 log Z_1 dy`` add the
trapezoidal rule in ``y`` and the composite rule of the noiseless case over ``omega``, with
sizes chosen from ``f`` and ``sigma`` (:func:`_noisy_point`). The state evolution reads
``I`` from a table along its line ``q_s + v = const`` (65 Chebyshev points in
``logit(v / (q_s + v))``). Measured against a closed form for ReLU (``tests/test_elementwise.py``):
relative error below ``1e-11`` at a point, ``5e-10`` through the table.

The noise on ``y`` is symmetric: one draw for each free entry ``a <= b``, mirrored.
Chapter 4, section "Attention beyond the softmax: ReLU, sigmoid and any elementwise map".
"""

from __future__ import annotations

import functools
import math
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, logsumexp
from numpy.lib.stride_tricks import sliding_window_view
from scipy import special as sps
from scipy.interpolate import BarycentricInterpolator

from .. import _checks
from ..counting import dof_fraction
from .base import Channel, check_symmetric, round_bits, log_npdf

__all__ = [
    "Structure",
    "analyse",
    "kinks",
    "make",
    "flat_probability",
    "elementwise_channel",
]

_CLIP = 40.0  # standardised ends beyond +-40 carry probability below e^-800
_X_MAX, _N_GRID = 60.0, 120_001  # the grid on which f is analysed (spacing 1e-3)
_MAX_FLATS = 64  # more flat parts than this on the grid: a floating-point staircase, refused
_U_LOCAL = np.array([-40, -20, -12, -8, -5, -3, -2, -1, -0.5, 0, 0.5, 1, 2, 3, 5, 8, 12, 20, 40.0])
_U_GLOBAL = np.linspace(-14.0, 14.0, 57)
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
# with label noise: the table along q_s + v = S, in z = logit(v / S) from -12 to 9 (v / S from 6e-6
# to 0.9999), at 65 Chebyshev points (interpolation error 5e-10, against 2e-6 for a cubic spline
# on 65 equal steps)
_Z_LO, _Z_HI, _N_Z = -12.0, 9.0, 65
_Z_TABLE = (_Z_LO + _Z_HI) / 2 + (_Z_HI - _Z_LO) / 2 * np.cos(np.pi * (2 * np.arange(_N_Z) + 1) / (2 * _N_Z))


# ---------------------------------------------------------------------------
# the structure of a noiseless f


class Structure(NamedTuple):
    """Flat intervals and strictly monotone pieces of an elementwise map ``f``.

    Attributes:
        flat_a, flat_b: ends of the intervals where ``f`` is constant (``-inf``/``inf`` allowed).
        flat_c: the value of ``f`` on each of them.
        flat_group: index of the distinct value ``c`` of each interval (intervals with one value
            are one observation).
        piece_a, piece_b: ends of the strictly monotone pieces.
        piece_increasing: the direction of each piece.
        piece_lo, piece_hi: the image of each piece, an open interval (between the one-sided
            limits of ``f`` at the piece's ends; exactly the flat value where ``f`` is continuous).
    """

    flat_a: np.ndarray
    flat_b: np.ndarray
    flat_c: np.ndarray
    flat_group: np.ndarray
    piece_a: np.ndarray
    piece_b: np.ndarray
    piece_increasing: np.ndarray
    piece_lo: np.ndarray
    piece_hi: np.ndarray

    @property
    def n_groups(self) -> int:
        return int(self.flat_group.max()) + 1 if self.flat_group.size else 0


def _value_tol(c):
    """Two units in the last place: a flat value is matched (all but) exactly."""
    return 4.5e-16 * np.maximum(1.0, np.abs(c))


def analyse(f: Callable, x_max: float = _X_MAX, n_grid: int = _N_GRID) -> Structure:
    """Flat intervals and monotone pieces of ``f`` on ``[-x_max, x_max]`` (continued beyond).

    Raises:
        ValueError: ``f`` is not finite on the grid, or not one-to-one outside its flat
            parts (then ``y`` does not determine ``h``: give the channel ``label_noise > 0``);
            ``x_max`` not a positive number, ``n_grid`` not an integer ``>= 3``.
        TypeError: ``f`` not callable.
    """
    f, x_max, n_grid = _check_grid(f, x_max, n_grid)
    with jax.ensure_compile_time_eval():  # concrete arithmetic even when called inside a trace
        return _analyse(f, x_max, n_grid)


def _check_grid(f, x_max, n_grid):
    if not callable(f):
        raise _checks.ArgumentTypeError(f"f must be callable (one array to one array of the same shape), "
                                        f"got {type(f).__name__}")
    return f, _checks.positive("x_max", x_max), _checks.integer_at_least("n_grid", n_grid, 3)


def _analyse(f, x_max, n_grid):
    x = np.linspace(-x_max, x_max, n_grid)
    fx = np.asarray(f(jnp.asarray(x)), dtype=float)
    if fx.shape != x.shape:
        raise ValueError(f"f must act elementwise (same shape out as in), got shape {fx.shape} for {x.shape}")
    if not np.all(np.isfinite(fx)):
        raise ValueError(f"f must be finite on [-{x_max:g}, {x_max:g}]")

    def f1(h):
        return float(f(jnp.asarray(h)))

    n_cell = n_grid - 1
    flat = np.diff(fx) == 0  # exactly constant: a flat value is an exact observation
    # runs of flat cells: cells s..e-1, points s..e
    brk = np.flatnonzero(np.diff(flat.astype(int))) + 1
    starts, ends = np.concatenate([[0], brk]), np.concatenate([brk, [n_cell]])
    runs = [(int(s), int(e)) for s, e in zip(starts, ends) if flat[s]]
    if len(runs) > _MAX_FLATS:
        raise ValueError(f"f has {len(runs)} flat parts on [-{x_max:g}, {x_max:g}], more than {_MAX_FLATS}: a "
                         "smooth map that rounds to a staircase in float64 (tanh beyond |h| = 17) is not "
                         "one-to-one there; give label_noise > 0, or a map that stays strictly monotone")
    # the ends of each flat interval, refined by bisection into the grid cell next to it; each
    # end also gives the one-sided limit of f just outside the flat (f at the last bisection
    # point off the flat), the image end of the monotone piece beyond it
    fl_a, fl_b, fl_c = [], [], []
    right_of = {}  # cell -> (end, point, value) of the flat that ends at its left point
    left_of = {}  # cell -> (end, point, value) of the flat that starts at its right point
    for s, e in runs:
        c = fx[s]
        if s == 0:
            a = -np.inf
        else:
            a, out = _refine(f, x[s - 1], x[s], c)
            left_of[s - 1] = (a, out, _limit(f1, a, out, c, x[s - 1]))
        if e == n_cell:
            b = np.inf
        else:
            b, out = _refine(f, x[e + 1], x[e], c)
            right_of[e] = (b, out, _limit(f1, b, out, c, x[e + 1]))
        fl_a.append(a), fl_b.append(b), fl_c.append(c)
    # the direction of each cell off the flats, on its part outside them: a cell next to a flat
    # holds the flat's end, and f may jump there (a step, a map that leaves its flat value with
    # a jump), so its direction is that of f from just outside the flat to the cell's other end;
    # a cell that holds nothing but jumps (0) is no part of a monotone piece
    sign = np.where(flat, 0, np.sign(np.diff(fx))).astype(int)
    for i in set(right_of) | set(left_of):
        pl, vl = (right_of[i][1], right_of[i][2]) if i in right_of else (x[i], fx[i])
        pr, vr = (left_of[i][1], left_of[i][2]) if i in left_of else (x[i + 1], fx[i + 1])
        sign[i] = int(np.sign(vr - vl)) if pl < pr else 0
    # monotone pieces: runs of cells of one direction; each ends at the flat next to it (its
    # refined end, with the one-sided limit of f there), at a grid point between two pieces, or
    # at +-inf
    brk = np.flatnonzero(np.diff(sign)) + 1
    starts, ends = np.concatenate([[0], brk]), np.concatenate([brk, [n_cell]])
    pc_a, pc_b, pc_inc, lo, hi = [], [], [], [], []
    for s, e in zip(starts, ends):
        if sign[s] == 0:
            continue
        if s == 0:
            a, fa = -np.inf, fx[0]
        elif s in right_of:
            a, _, fa = right_of[s]
        else:
            a, fa = x[s], fx[s]
        if e == n_cell:
            b, fb = np.inf, fx[-1]
        elif e - 1 in left_of:
            b, _, fb = left_of[e - 1]
        else:
            b, fb = x[e], fx[e]
        pc_a.append(a), pc_b.append(b), pc_inc.append(sign[s] > 0)
        lo.append(min(fa, fb)), hi.append(max(fa, fb))
    pc_a, pc_b = np.array(pc_a, float), np.array(pc_b, float)
    lo, hi = np.array(lo, float), np.array(hi, float)
    # one-to-one outside the flat parts: the images are disjoint, and no flat value inside one
    order = np.argsort(lo)
    for i, j in zip(order[:-1], order[1:]):
        if lo[j] < hi[i] - 1e-12 * max(1.0, abs(hi[i])):
            raise ValueError("f is not one-to-one outside its flat parts (two pieces share values): "
                             "a noiseless y does not determine h; give label_noise > 0")
    for c in fl_c:
        if np.any((lo + _value_tol(c) < c) & (c < hi - _value_tol(c))):
            raise ValueError(f"f takes its flat value {c:g} also on a monotone piece: "
                             "a noiseless y does not determine h; give label_noise > 0")
    fl_c = np.array(fl_c, float)
    groups = np.zeros(fl_c.size, dtype=int)
    uniq: list[float] = []
    for k, c in enumerate(fl_c):
        for gi, u in enumerate(uniq):
            if abs(c - u) <= _value_tol(u):
                groups[k] = gi
                break
        else:
            uniq.append(c)
            groups[k] = len(uniq) - 1
    # an unbounded monotone piece: its image continues beyond the grid
    for k in range(pc_a.size):
        inc = pc_inc[k]
        if pc_a[k] == -np.inf:
            if inc:
                lo[k] = -np.inf
            else:
                hi[k] = np.inf
        if pc_b[k] == np.inf:
            if inc:
                hi[k] = np.inf
            else:
                lo[k] = -np.inf
    return Structure(np.array(fl_a, float), np.array(fl_b, float), fl_c, groups, pc_a, pc_b,
                     np.array(pc_inc, bool), lo, hi)


def kinks(f: Callable, x_max: float = _X_MAX, n_grid: int = _N_GRID, max_kinks: int = 16) -> tuple:
    """The kinks of ``f`` (jumps of its slope) on ``[-x_max, x_max]``, for the quadratures with label noise.

    A kink is a cell where the second difference of ``f`` stands out (above ``1e-9`` of the
    largest first difference and 100 times its neighbours); it is placed where the secant
    lines on its two sides cross (exact for piecewise-linear maps). A smooth ``f`` (``tanh``)
    has none, ReLU one at 0, a clip two, leaky ReLU one. At most ``max_kinks`` (the largest).
    """
    f, x_max, n_grid = _check_grid(f, x_max, n_grid)
    max_kinks = _checks.integer_at_least("max_kinks", max_kinks, 0)
    with jax.ensure_compile_time_eval():
        x = np.linspace(-x_max, x_max, n_grid)
        fx = np.asarray(f(jnp.asarray(x)), dtype=float)
    if fx.shape != x.shape or not np.all(np.isfinite(fx)):
        return ()
    d1 = np.diff(fx)
    d2 = np.abs(np.diff(d1))  # d2[i] sits at x[i + 1]
    floor = 1e-9 * max(float(np.max(np.abs(d1))), 1e-300)
    nb = np.maximum(np.concatenate([[0.0], d2[:-1]]), np.concatenate([d2[1:], [0.0]]))
    nb2 = np.maximum(np.concatenate([[0.0, 0.0], d2[:-2]]), np.concatenate([d2[2:], [0.0, 0.0]]))
    # a kink between grid points shows in two adjacent second differences: compare with the
    # cells two away
    cand = np.flatnonzero((d2 > floor) & (d2 >= nb) & (d2 > 100 * nb2))
    out = []
    h = x[1] - x[0]
    for i in cand[np.argsort(-d2[cand])][:max_kinks]:
        j = i + 1  # the grid point at the kink
        if j < 3 or j > n_grid - 4:
            continue
        sl, sr = (fx[j - 1] - fx[j - 3]) / (2 * h), (fx[j + 3] - fx[j + 1]) / (2 * h)
        if sl == sr:
            continue
        xk = (fx[j + 1] - fx[j - 1] + sl * x[j - 1] - sr * x[j + 1]) / (sl - sr)
        out.append(float(np.clip(xk, x[j - 2], x[j + 2])))
    return tuple(sorted(set(out)))


def _refine(f, x_out, x_in, c):
    """The end of a flat interval between ``x_out`` (f != c) and ``x_in`` (f == c), by bisection.

    Returns ``(end, out)``: the last point found on the flat and the first off it, next to each
    other (within ``|x_out - x_in| 2^-80`` or an ulp)."""
    tol = _value_tol(c)
    a, b = float(x_out), float(x_in)
    for _ in range(80):
        mid = 0.5 * (a + b)
        if abs(float(f(jnp.asarray(mid))) - c) <= tol:
            b = mid
        else:
            a = mid
    return b, a


def _limit(f1, end, out, c, x_far):
    """The one-sided limit of ``f`` at the end ``end`` of a flat interval (value ``c``), from the side
    of the point ``out`` just off it: ``c`` where ``f`` is continuous there, else (a jump) ``f(out)``.

    ``f(out)`` differs from ``c`` by rounding (the flat's tolerance :func:`_value_tol`, the overlap
    accuracy ``1e-12`` of the images) plus the slope of ``f`` (measured from ``out`` to the grid point
    ``x_far`` beyond it) times the gap ``|out - end|``; a larger difference is a jump."""
    v = f1(out)
    slope = abs(f1(x_far) - v) / abs(x_far - out) if x_far != out else 0.0
    if abs(v - c) <= 1e-12 * max(1.0, abs(c)) + 4 * slope * abs(out - end):
        return c
    return v


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


# ---------------------------------------------------------------------------
# the channel


def make(name: str, summary: str, f_of: Callable, *, label_noise: float = 0.0, uses_beta: bool = False,
         structure_of: Optional[Callable] = None, inverse_of: Optional[Callable] = None,
         nodes: Optional[tuple] = None, score_panels: int = 64) -> Channel:
    """The :class:`Channel` of ``y_ab = f(h_ab)`` (+ label noise), from ``f_of(T, beta) -> f``.

    Args:
        name, summary: as :class:`Channel`.
        f_of: ``f_of(T, beta)``, the scalar map for ``T`` tokens (``beta`` may be a traced value).
        label_noise: variance of the Gaussian noise on each free entry of ``y``.
        uses_beta: whether ``f`` depends on ``beta``.
        structure_of: ``structure_of(T, beta)``, the noiseless :class:`Structure` (default:
            :func:`analyse` of ``f_of(T, 1.0)``, for an ``f`` whose structure does not depend on
            ``beta``); its arrays may be JAX arrays of a traced ``beta``.
        inverse_of: ``inverse_of(T, beta)``, the inverse of ``f`` on its monotone pieces in closed
            form (default: bisection).
        nodes: with label noise, ``(n_panels, n_y)`` of the state-evolution integrals (default:
            chosen from ``f`` and the noise at each point, :func:`_noisy_point`).
        score_panels: with label noise, the Gauss-Legendre panels (8 nodes each) over ``h`` of
            ``Z_1`` and the score.
    """
    sigma2 = float(label_noise)

    analysed = functools.lru_cache(maxsize=64)(lambda T: analyse(f_of(T, 1.0)))

    def structure(T, beta=1.0):
        return structure_of(T, beta) if structure_of is not None else analysed(T)

    @functools.lru_cache(maxsize=64)
    def kinks_at(T, beta):
        return kinks(_hashable(f_of, T, beta))

    def kinks_of(T, beta):
        """The kinks of ``f`` (:func:`kinks`) as static floats; none for a traced ``beta`` of a
        ``beta``-dependent ``f`` (its panels then have no breaks)."""
        if uses_beta:
            try:
                beta = float(beta)
            except (TypeError, jax.errors.ConcretizationTypeError):
                return ()
        return kinks_at(T, float(beta) if uses_beta else 1.0)

    def entry(y, omega, Vp, beta):
        T = omega.shape[-1]
        f = f_of(T, beta)
        v = jnp.where(jnp.eye(T, dtype=bool), 2 * Vp, Vp) * jnp.ones_like(omega)
        if sigma2 > 0:
            return _entry_noisy(f, sigma2, kinks_of(T, beta), score_panels, y, omega, v)
        inverse = inverse_of(T, beta) if inverse_of is not None else None
        return _entry_noiseless(f, structure(T, beta), y, omega, v, inverse)

    upper = functools.lru_cache(maxsize=16)(lambda T: np.triu(np.ones((T, T), dtype=bool)))

    def score(y, omega, Vp, beta, score):
        _, g = entry(y, omega, Vp, beta)
        T = omega.shape[-1]
        eye = np.eye(T, dtype=bool)
        G = jnp.where(upper(T), jnp.where(eye, g, g / 2), 0.0)  # Gamma_aa = g_aa, Gamma_ab = g_ab / 2
        return G + jnp.swapaxes(jnp.where(eye, 0.0, G), -1, -2)

    def log_partition(y, omega, Vp, beta):
        logz, _ = entry(y, omega, Vp, beta)
        return jnp.sum(jnp.where(upper(omega.shape[-1]), logz, 0.0), axis=(-1, -2))

    @functools.lru_cache(maxsize=256)
    def noisy_table(T, beta, S):
        """``log(v I)`` and ``L`` along ``q_s + v = S`` (the state evolution's line), in ``z = logit(v/S)``."""
        frac = 1 / (1 + np.exp(-_Z_TABLE))
        out = [noisy_point(T, beta, float(S * (1 - fr)), float(S * fr)) for fr in frac]
        vI = np.array([float(o[0]) for o in out]) * S * frac
        L = np.array([float(o[1]) for o in out])
        return BarycentricInterpolator(_Z_TABLE, np.log(vI)), BarycentricInterpolator(_Z_TABLE, L)

    @functools.lru_cache(maxsize=4096)
    def noisy_point(T, beta, q_s, v):
        return _noisy_point(_hashable(f_of, T, beta), sigma2, kinks_at(T, beta), q_s, v, *(nodes or (None, None)))

    def entry_se(q_s, v, T, beta, direct=False):
        """``(I, L)`` of one entry; with label noise ``I`` from the table along ``q_s + v = S``
        (the state evolution's line), or both directly at each point when ``direct``."""
        if sigma2 == 0:
            return _entry_se_noiseless(structure(T, float(beta)), q_s, v)
        qs_, v_ = np.broadcast_arrays(np.asarray(q_s, float), np.asarray(v, float))
        if qs_.size == 0:
            return np.zeros(qs_.shape), np.zeros(qs_.shape)
        if direct:
            pts = [noisy_point(T, float(beta), float(a), float(b)) for a, b in zip(qs_.ravel(), v_.ravel())]
            return (np.array([p[0] for p in pts]).reshape(qs_.shape), np.array([p[1] for p in pts]).reshape(qs_.shape))
        S = round_bits(qs_ + v_)
        I = np.empty(S.shape)
        for s_ in np.unique(S):
            k = S == s_
            lvi, _ = noisy_table(T, float(beta), float(s_))
            z = np.clip(np.log(v_[k] / s_) - np.log1p(-np.minimum(v_[k] / s_, 1 - 1e-16)), _Z_LO, _Z_HI)
            I[k] = np.exp(lvi(z)) / v_[k]
        return I, np.full(S.shape, np.nan)

    def se_both(q, Vp, T, beta, direct=False):
        nd, no = T, T * (T - 1) / 2  # free diagonal and off-diagonal entries
        q, Vp = np.asarray(q, float), np.asarray(Vp, float)
        Id, Ld = entry_se(2 * q, 2 * Vp, T, beta, direct)
        Io, Lo = entry_se(q, Vp, T, beta, direct)
        return 2 * (2 * nd * Id + no * Io), nd * Ld + no * Lo

    def perfect_recovery(rho, T, beta, noise):
        if sigma2 > 0 or noise > 0:
            return None
        st = structure(T, float(beta))
        Q0 = 1 + rho
        p_d, p_o = flat_probability(st, 2 * Q0), flat_probability(st, Q0)
        dof = dof_fraction(rho)
        lim = 2 * T * (1 - p_d) + T * (T - 1) * (1 - p_o)  # lim_{V' -> 0} V' q_hat / alpha
        return dof / lim if lim > 0 else None

    def label_error(q, Vp, T, beta, key, n_samples):
        """Eq. (bo-label): ``E_omega sum_ab Var(f(h_ab) | omega)``, by quadrature (``key`` unused):
        ``T`` diagonal entries (``omega ~ N(0, 2q)``, ``v = 2V'``) and ``T(T-1)`` off it."""
        f = _hashable(f_of, T, float(beta))
        k = kinks_at(T, float(beta))
        q, Vp = np.broadcast_arrays(np.asarray(q, float), np.asarray(Vp, float))
        out = np.zeros(q.shape)
        for idx in np.ndindex(q.shape):
            if Vp[idx] <= 0:
                continue
            tot = 0.0
            for mult, q_s, v in ((T, 2 * q[idx], 2 * Vp[idx]), (T * (T - 1), q[idx], Vp[idx])):
                if mult == 0:
                    continue
                x, w, _ = _omega_rule_at(k, max(q_s, 1e-300), v)
                tot += mult * float(_output_variance(f, k, jnp.asarray(x[0]), jnp.asarray(w[0]), v))
            out[idx] = tot
        return out

    def check_outputs(name_y, y, beta, log_outputs):
        """``y`` symmetric (one draw an entry ``a <= b``) and, without label noise, in the range of ``f``:
        on a flat value or inside the image of a monotone piece (elsewhere the score is ``nan``)."""
        check_symmetric(name_y, y)
        if sigma2 > 0:
            return
        yn = np.asarray(y, dtype=float)
        T = yn.shape[-1]
        try:
            b = float(beta) if uses_beta else 1.0
        except (TypeError, jax.errors.ConcretizationTypeError):  # a traced beta: no concrete structure
            return
        st = structure(T, b)
        ok = np.zeros(yn.shape, dtype=bool)
        for c in np.asarray(st.flat_c, dtype=float):
            ok |= np.abs(yn - c) <= _value_tol(c)
        for lo, hi in zip(np.asarray(st.piece_lo, dtype=float), np.asarray(st.piece_hi, dtype=float)):
            ok |= (yn > lo) & (yn < hi)
        if not np.all(ok):
            bad = yn[~ok].ravel()[0]
            raise ValueError(f"{name_y} must be outputs of channel {name!r}: it has entries outside the range of "
                             f"its map (for example {bad!r}), which no h gives")

    def output(h, beta):
        return f_of(h.shape[-1], beta)(h)

    def sample(key, h, beta):
        y = output(h, beta)
        if sigma2 > 0:
            xi = jax.random.normal(key, y.shape, dtype=y.dtype)
            xi = jnp.triu(xi) + jnp.swapaxes(jnp.triu(xi, 1), -1, -2)  # one draw an entry a <= b
            y = y + math.sqrt(sigma2) * xi
        return y

    return Channel(name=name, summary=summary, output=output, score=score, log_partition=log_partition,
                   se_H=lambda q, Vp, T, beta, score: se_both(q, Vp, T, beta)[0],
                   se_ElogZ=lambda q, Vp, T, beta: se_both(q, Vp, T, beta, direct=True)[1],
                   perfect_recovery=perfect_recovery, label_error=label_error, sample=sample,
                   check_outputs=check_outputs, uses_beta=uses_beta, label_noise=sigma2,
                   structure=structure if sigma2 == 0 else None)


@functools.lru_cache(maxsize=64)
def _hashable(f_of, T, beta):
    """One function object for ``f_of(T, beta)`` (a static argument of the jitted integrals)."""
    return f_of(T, beta)


def flat_probability(st: Structure, var) -> float:
    """``P(h in a flat interval)`` for ``h ~ N(0, var)``."""
    if not isinstance(st, Structure):
        raise _checks.ArgumentTypeError(f"st must be a Structure (from analyse), got {type(st).__name__}")
    s = math.sqrt(_checks.positive("var", var))
    return float(np.sum(sps.ndtr(st.flat_b / s) - sps.ndtr(st.flat_a / s)))


def elementwise_channel(f: Callable, label_noise: float = 0.0, name: Optional[str] = None, *,
                        nodes: Optional[tuple] = None) -> Channel:
    """The channel ``y_ab = f(h_ab) + sqrt(label_noise) xi_ab`` (``xi`` symmetric, one draw an entry ``a <= b``).

    Usable wherever a channel is: :func:`aim_tutorial.sample_data`, :func:`aim_tutorial.state_evolution`,
    :func:`aim_tutorial.free_entropy`, :func:`aim_tutorial.gamp_rie`, :func:`aim_tutorial.train_gd`.

    Args:
        f: a JAX-traceable scalar map applied entry by entry (``jax.nn.relu``, ``jnp.arcsinh``,
            ``lambda h: jnp.clip(h, -1, 1)``; with label noise any map, ``jnp.tanh`` or
            ``h**2``); with ``label_noise = 0`` it must be strictly monotone outside flat
            intervals, with distinct values on distinct pieces.
        label_noise: variance ``>= 0`` of the Gaussian noise on each free entry of ``y``.
        name: the name shown in tables (default ``"elementwise"``); the channel is not registered.
        nodes: with label noise, ``(n_panels, n_y)``: the Gauss-Legendre panels (8 nodes each)
            over ``h`` and the trapezoid points over ``y`` of the state-evolution integrals (the
            score, a single integral over ``h`` for each sample, uses 64 panels).
            By default they are chosen at each point from ``f`` and the noise (two nodes a
            width ``sigma / |f'|`` of the likelihood, two points a ``sigma``), with panel
            breaks at the kinks of ``f`` (:func:`kinks`) and local panels around them over
            ``omega``. Measured against a closed form (ReLU, ``T = 2``, ``label_noise = 0.01``,
            ``V'/q`` from 0.5 to ``7e-5``): relative error below ``4e-12``; the state evolution
            interpolates a table of them (``5e-10``). A state-evolution point costs about
            0.1 s, a curve about 15 s.

    Returns:
        a :class:`Channel`.

    Raises:
        ValueError: ``label_noise < 0``, or a noiseless ``f`` that does not determine ``h`` (not
            one-to-one outside its flat parts, or rounded to a staircase in float64 as ``tanh``
            is beyond ``|h| = 17``).
        TypeError: ``f`` not callable, or ``name`` not a string.

    Example:
        >>> import jax.numpy as jnp, aim_tutorial as aim
        >>> ch = aim.elementwise_channel(jnp.arcsinh)       # invertible: the linear channel
        >>> a = aim.solve_state_evolution(0.1, 0.5, channel=ch).mmse
        >>> b = aim.solve_state_evolution(0.1, 0.5, channel="linear").mmse
        >>> abs(a - b) < 1e-12
        True

    Chapter 4, section "Attention beyond the softmax: ReLU, sigmoid and any elementwise map".
    """
    if not callable(f):
        raise TypeError(f"f must be callable (one array to one array of the same shape), got {type(f).__name__}")
    label_noise = _checks.nonnegative("label_noise", label_noise)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    st = analyse(f) if label_noise == 0 else None  # a noiseless f that does not determine h fails here
    summary = "y = f(h) entrywise" + (f", label noise {label_noise:g}" if label_noise else "")
    if nodes is not None:
        if not isinstance(nodes, (tuple, list)) or len(nodes) != 2:
            raise ValueError(f"nodes must be a pair (n_panels, n_y), got {nodes!r}")
        nodes = (_checks.integer_at_least("nodes[0]", nodes[0], 4), _checks.integer_at_least("nodes[1]", nodes[1], 64))
    return make(name or "elementwise", summary, lambda T, beta: f, label_noise=label_noise,
                structure_of=(lambda T, beta: st) if st is not None else None, nodes=nodes)
