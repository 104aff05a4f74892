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
from scipy import special as sps
from scipy.interpolate import BarycentricInterpolator

from .. import _checks
from ..counting import dof_fraction
from ._elementwise_integrals import (_entry_noiseless, _entry_noisy, _entry_se_noiseless, _noisy_point,
                                     _omega_rule_at, _output_variance)
from .base import Channel, check_symmetric, round_bits

__all__ = [
    "Structure",
    "analyse",
    "kinks",
    "make",
    "flat_probability",
    "elementwise_channel",
]

_X_MAX, _N_GRID = 60.0, 120_001  # the grid on which f is analysed (spacing 1e-3)
_MAX_FLATS = 64  # more flat parts than this on the grid: a floating-point staircase, refused
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
# the channel (the integrals of one entry: _elementwise_integrals)


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
    structure, kinks_at, kinks_of = _structure_functions(f_of, uses_beta, structure_of)
    score, log_partition = _score_functions(f_of, sigma2, score_panels, inverse_of, structure, kinks_of)
    se_both, perfect_recovery, label_error = _se_functions(f_of, sigma2, nodes, structure, kinks_at)
    check_outputs, output, sample = _output_functions(name, f_of, sigma2, uses_beta, structure)

    return Channel(name=name, summary=summary, output=output, score=score, log_partition=log_partition,
                   se_H=lambda q, Vp, T, beta, score: se_both(q, Vp, T, beta)[0],
                   se_ElogZ=lambda q, Vp, T, beta: se_both(q, Vp, T, beta, direct=True)[1],
                   perfect_recovery=perfect_recovery, label_error=label_error, sample=sample,
                   check_outputs=check_outputs, uses_beta=uses_beta, label_noise=sigma2,
                   structure=structure if sigma2 == 0 else None)


def _structure_functions(f_of, uses_beta, structure_of):
    """For :func:`make`: ``structure(T, beta)`` (the noiseless :class:`Structure`), ``kinks_at(T, beta)``
    (the kinks of ``f``, cached) and ``kinks_of(T, beta)`` (the same as static floats, or none)."""
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
    return structure, kinks_at, kinks_of


def _score_functions(f_of, sigma2, score_panels, inverse_of, structure, kinks_of):
    """For :func:`make`: the channel's ``score`` and ``log_partition`` (``Gamma`` and ``log Z_out``
    from the score and ``log Z_1`` of each free entry)."""
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
    return score, log_partition


def _se_functions(f_of, sigma2, nodes, structure, kinks_at):
    """For :func:`make`: the state evolution's ``se_both`` (``H`` and ``E log Z_out`` from the entries'
    integrals, through the table along ``q_s + v = S`` with label noise), ``perfect_recovery`` and
    ``label_error``."""
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
    return se_both, perfect_recovery, label_error


def _output_functions(name, f_of, sigma2, uses_beta, structure):
    """For :func:`make`: ``check_outputs``, ``output`` and ``sample`` (with the label noise)."""
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
    return check_outputs, output, sample


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
