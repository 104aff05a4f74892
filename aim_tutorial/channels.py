"""Output channels: the partition function ``Z_out`` and its score.

Chapter 4 (``book/04_bayes_optimal_error.md``) teaches this module; chapter 3
(``book/03_replica.md``) derives where it enters, and its labels ``rep-*`` are
cited below. For one sample, the
attention indices are ``h = omega + sqrt(V) zeta`` with ``zeta`` a symmetric
Gaussian matrix, ``Var zeta_aa = 2``, ``Var zeta_ab = 1`` (``a != b``), i.e.
the density of ``h`` is proportional to ``exp(-||h - omega||_F^2 / (4 V))``.
The output channel gives

    Z_out(y | omega, V) = E_zeta P_out(y | omega + sqrt(V) zeta),       eq. (rep-zout)

and its **score** is the symmetric-matrix gradient (chapter 3, section "The output
channel and its Nishimori identity")

    Gamma_aa = g_aa,  Gamma_ab = Gamma_ba = g_ab / 2,
    g_ab = d log Z_out / d omega_ab   over the T(T+1)/2 entries a <= b,

so that ``d log Z_out = <Gamma, d omega>_F``; for an exactly observed ``h``,
``Gamma = (h - omega) / (2 V)``.

Channels (``noise`` = variance ``Delta`` of Gaussian noise added to ``h``
before the output function, ``Delta`` on the diagonal and ``Delta/2`` off it;
it only replaces ``V`` by ``V + Delta/2``):

``"linear"``
    ``y = h`` (+ noise): ``Gamma = (y - omega) / (2 V')``, ``V' = V + Delta/2``.
``"softmax"``
    row-wise softmax at inverse temperature ``beta > 0``: ``y`` fixes ``h`` up
    to one constant ``c 11^T``, ``h = c 11^T + M``; ``Gamma = (c* 11^T + M - omega) / (2 V')``
    with ``c* = mean(omega - M)`` over all ``T^2`` entries, eq. (rep-softmax-zout). ``M`` is built from
    the log-ratios ``phi_ab = (log y_ab - log y_aT) / beta`` (never by dividing
    small probabilities): ``M_ab = phi_Ta + phi_ab``.
``"hardmax"`` (``T = 2``)
    ``s_a = +1`` when token ``a`` attends to itself, ``u_a = omega_aa - omega_12``,
    ``r = sqrt(3 V')``, ``k_a = s_a u_a / r``, ``c = s_1 s_2 / 3``:
    ``Z_out = Phi_2(k_1, k_2; c)``, the bivariate normal CDF, eq. (rep-hardmax-zout). ``score="exact"``
    differentiates it; ``score="published"`` is the expression used for the
    published reference data, with the joint density ``phi_2`` in place of both
    partial derivatives (not a gradient: kept to reproduce those curves).

Reference: Boncoraglio, Troiani, Erba, Zdeborova, arXiv 2506.01582 (the output
channels and their scores).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, logsumexp

from . import _checks

CHANNELS = ("softmax", "linear", "hardmax")
SCORES = ("exact", "published")

_LOG_2PI = math.log(2.0 * math.pi)

# ---------------------------------------------------------------------------
# validation (skipped for traced values so that the functions work under jit)


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _validate(channel, y, omega, V, beta, noise, score):
    _checks.one_of("channel", channel, CHANNELS)
    _checks.one_of("score", score, SCORES)
    if score == "published" and channel != "hardmax":
        raise ValueError("score must be 'exact' unless channel='hardmax' (score='published' is a hardmax switch)")
    ys, ws = np.shape(y), np.shape(omega)
    if len(ws) < 2 or ws[-1] != ws[-2]:
        raise ValueError(f"omega must have shape (..., T, T), got shape {ws}")
    if ys != ws:
        raise ValueError(f"y and omega must have the same shape (..., T, T), got {ys} and {ws}")
    if channel == "hardmax" and ws[-1] != 2:
        raise ValueError(f"T must be 2 for channel='hardmax' (closed form), got T = {ws[-1]}")
    for name, val in (("V", V), ("beta", beta), ("noise", noise)):
        if _is_concrete(val) and np.ndim(val) != 0:
            raise ValueError(f"{name} must be a scalar, got shape {np.shape(val)}")
    if _is_concrete(V):
        _checks.positive("V", V)
    if _is_concrete(noise):
        _checks.nonnegative("noise", noise)
    if channel == "softmax" and _is_concrete(beta):
        _checks.positive("beta", beta)


def _frob_sq(A):
    return jnp.sum(A * A, axis=(-1, -2))


# ---------------------------------------------------------------------------
# linear and softmax: Gaussian measurements of h


def _softmax_M(y, beta):
    """``M`` with ``h = c 11^T + M`` from softmax outputs (log-ratios from logs)."""
    logy = jnp.log(y)
    phi = (logy - logy[..., -1:]) / beta  # phi_ab = h_ab - h_aT, phi_aT = 0
    M = phi[..., -1, :][..., :, None] + phi  # M_ab = phi_Ta + phi_ab
    return (M + jnp.swapaxes(M, -1, -2)) / 2


def _softmax_residual(y, omega, beta):
    M = _softmax_M(y, beta)
    cstar = jnp.mean(omega - M, axis=(-1, -2), keepdims=True)
    return cstar + M - omega


def _gauss_norm(T, Veff, n_free):
    """``log`` of the Gaussian normalisation of ``n_free`` measured combinations."""
    D = T * (T + 1) / 2
    # density of the D upper-triangle entries: variances 2V (diagonal), V (off)
    out = -D / 2 * _LOG_2PI - T / 2 * jnp.log(2 * Veff) - T * (T - 1) / 4 * jnp.log(Veff)
    if n_free < D:  # integrate out the constant direction c 11^T (|11^T|_F = T)
        out = out + 0.5 * jnp.log(4 * math.pi * Veff / T**2)
    return out


# ---------------------------------------------------------------------------
# hardmax T = 2: the bivariate normal CDF in log space



def _gl01(n):
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2  # nodes and weights on [0, 1]


_GL_RULES = {n: _gl01(n) for n in (24, 32, 48, 64)}
_CUT = 40.0  # log-integrand drop at which the integral is truncated (e^-40)


def _log_phi2(k1, k2, c, n_nodes: int = 64):
    """``log Phi_2(k1, k2; c)`` for ``|c| <= 1/3``, accurate in every tail.

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
    xi = a + (b - a) * _GL_X
    log_int = jnp.log((b - a) * _GL_W) + L(xi)
    # boundary: x = k1 - t, t = eps (exp(kap v) - 1), v in [0, 1]
    g = jnp.maximum(dL(k1)[0], 0.0)[..., None]
    tmax = (-g + jnp.sqrt(g * g + 2 * kmin * _CUT)) / kmin
    eps = 1 / (1 + g)
    kap = jnp.log1p(tmax / eps)
    ev = jnp.exp(kap * _GL_X)
    t = eps * (ev - 1)
    log_bnd = jnp.log(eps * kap * ev * _GL_W) + L(k1[..., None] - t)
    interior = (m0 <= k1)[..., None]
    return logsumexp(jnp.where(interior, log_int, log_bnd), axis=-1)


def _hardmax_parts(y, omega, Veff):
    s1 = jnp.where(y[..., 0, 0] > 0.5, 1.0, -1.0)
    s2 = jnp.where(y[..., 1, 1] > 0.5, 1.0, -1.0)
    r = jnp.sqrt(3 * Veff)
    k1 = s1 * (omega[..., 0, 0] - omega[..., 0, 1]) / r
    k2 = s2 * (omega[..., 1, 1] - omega[..., 0, 1]) / r
    c = s1 * s2 / 3
    return s1, s2, r, k1, k2, c


def _log_npdf(x):
    return -0.5 * x * x - 0.5 * _LOG_2PI


def _hardmax_score(y, omega, Veff, published):
    s1, s2, r, k1, k2, c = _hardmax_parts(y, omega, Veff)
    logZ = _log_phi2(k1, k2, c)
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
# public functions


@partial(jax.jit, static_argnames=("channel", "score"))
def _output_score(channel, y, omega, V, beta, noise, score):
    Veff = V + noise / 2
    if channel == "linear":
        return (y - omega) / (2 * Veff)
    if channel == "softmax":
        return _softmax_residual(y, omega, beta) / (2 * Veff)
    return _hardmax_score(y, omega, Veff, score == "published")


def output_score(channel: str, y, omega, V, *, beta=1.0, noise=0.0, score: str = "exact"):
    """Score ``Gamma = grad_omega log Z_out(y | omega, V)`` as a symmetric matrix.

    ``Gamma_aa = d log Z_out / d omega_aa`` and ``Gamma_ab = Gamma_ba = (1/2) d log Z_out /
    d omega_ab`` (``a < b``), so ``d log Z_out = <Gamma, d omega>_F``. Closed forms:
    linear ``(y - omega)/(2V')``; softmax ``(c* 11^T + M - omega)/(2V')`` with
    ``c* = mean(omega - M)``; hardmax (T = 2) through ``Phi_2`` (module docstring).
    ``V' = V + noise/2``.

    Args:
        channel: ``"softmax"``, ``"linear"`` or ``"hardmax"``.
        y: outputs, shape ``(..., T, T)`` (softmax: probabilities, all > 0;
            hardmax: one-hot rows, T = 2).
        omega: means of ``h``, symmetric, shape ``(..., T, T)``.
        V: variance scale, scalar ``> 0`` (``Var h_aa = 2V``, ``Var h_ab = V``).
        beta: softmax inverse temperature ``> 0`` (the score does not depend on
            it beyond reading ``y``).
        noise: variance ``Delta >= 0`` of the noise on ``h``.
        score: ``"exact"``, or ``"published"`` (hardmax only: the published,
            non-gradient expression).

    Returns:
        ``Gamma``, shape ``(..., T, T)``, symmetric.

    Example:
        >>> import jax.numpy as jnp, aim_tutorial as aim
        >>> h = jnp.array([[0.3, -0.2], [-0.2, 0.1]])
        >>> G = aim.output_score("linear", h, jnp.zeros((2, 2)), 0.5)
        >>> bool(jnp.allclose(G, h))   # (h - omega) / (2 V)
        True

    Chapter 4; the score and its matrix form: chapter 3, section "The output channel and its
    Nishimori identity". Reference: arXiv 2506.01582.
    """
    _validate(channel, y, omega, V, beta, noise, score)
    y = jnp.asarray(y, dtype=jnp.float64)
    omega = jnp.asarray(omega, dtype=jnp.float64)
    return _output_score(channel, y, omega, jnp.asarray(V, jnp.float64), jnp.asarray(beta, jnp.float64),
                         jnp.asarray(noise, jnp.float64), score)


@partial(jax.jit, static_argnames=("channel",))
def _log_partition(channel, y, omega, V, beta, noise):
    Veff = V + noise / 2
    T = omega.shape[-1]
    if channel == "linear":
        return _gauss_norm(T, Veff, T * (T + 1) // 2) - _frob_sq(y - omega) / (4 * Veff)
    if channel == "softmax":
        R = _softmax_residual(y, omega, beta)
        return _gauss_norm(T, Veff, T * (T + 1) // 2 - 1) - _frob_sq(R) / (4 * Veff)
    _, _, _, k1, k2, c = _hardmax_parts(y, omega, Veff)
    return _log_phi2(k1, k2, c)


def log_partition(channel: str, y, omega, V, *, beta=1.0, noise=0.0):
    """``log Z_out(y | omega, V)``, eq. (rep-zout), batched over leading axes.

    - hardmax (T = 2): ``log Phi_2(k_1, k_2; c)``, the exact log-probability of ``y``.
    - linear: the Gaussian log-density of the ``T(T+1)/2`` entries ``y_ab``, ``a <= b``,
      with variances ``2V'`` (diagonal) and ``V'`` (off), ``V' = V + noise/2``.
    - softmax: the Gaussian log-density of the ``T(T+1)/2 - 1`` measured combinations
      of ``h`` (``h`` modulo ``c 11^T``): ``-||c* 11^T + M - omega||_F^2/(4V') -
      ((T^2+T-2)/4) log V'`` plus a constant; it omits the ``y``-dependent
      Jacobian from ``y`` to the log-ratios, which depends neither on ``omega``
      nor on ``V``, so its gradients in ``omega`` and ``V`` are exact.

    Args: as :func:`output_score` (``score`` is not needed: ``Z_out`` is one function).

    Returns:
        ``log Z_out``, shape ``(...)``.

    Example:
        >>> import jax, jax.numpy as jnp, aim_tutorial as aim
        >>> y = jnp.array([[1.0, 0.0], [0.0, 1.0]]); w = jnp.zeros((2, 2))
        >>> G = aim.output_score("hardmax", y, w, 1.0)
        >>> g = jax.grad(lambda w: aim.log_partition("hardmax", y, w, 1.0))(w)
        >>> bool(jnp.allclose(G, (g + g.T) / 2))   # symmetric gradient
        True

    Chapter 4; eqs. (rep-zout), (rep-softmax-zout) and (rep-hardmax-zout) of chapter 3.
    """
    _validate(channel, y, omega, V, beta, noise, "exact")
    y = jnp.asarray(y, dtype=jnp.float64)
    omega = jnp.asarray(omega, dtype=jnp.float64)
    return _log_partition(channel, y, omega, jnp.asarray(V, jnp.float64), jnp.asarray(beta, jnp.float64),
                          jnp.asarray(noise, jnp.float64))


def symmetric_gradient(f: Callable, omega):
    """Symmetric-matrix gradient of a scalar function of a symmetric matrix.

    ``jax.grad`` treats the ``T^2`` entries as independent; the derivative along
    the symmetric direction ``E_ab + E_ba`` is ``G_ab + G_ba``, so the Frobenius
    gradient within symmetric matrices is ``(G + G^T)/2``. This is the
    convention of :func:`output_score`.
    """
    G = jax.grad(f)(omega)
    return (G + jnp.swapaxes(G, -1, -2)) / 2


# ---------------------------------------------------------------------------
# generic channel: y = g(h) + sqrt(noise_y) xi, by Monte Carlo


class GenericScore(NamedTuple):
    """Monte Carlo output step of the generic channel.

    Attributes:
        score: ``Gamma``, shape ``(..., T, T)``.
        log_partition: ``log Z_out`` estimate (log of the sample mean), shape ``(...)``.
        ess: effective sample size of the importance weights, shape ``(...)``.
    """

    score: jax.Array
    log_partition: jax.Array
    ess: jax.Array


def symmetric_gaussian(key, shape):
    """Symmetric Gaussian ``zeta``, ``Var zeta_aa = 2``, ``Var zeta_ab = 1``, shape ``(..., T, T)``."""
    G = jax.random.normal(key, tuple(shape))
    return (G + jnp.swapaxes(G, -1, -2)) / math.sqrt(2)


def generic_output_score(key, g: Callable, y, omega, V, *, label_noise: float, n_samples: int = 4096):
    """Score of the generic channel ``y = g(h) + sqrt(label_noise) xi`` by Monte Carlo.

    ``Z_out = E_zeta N(y; g(omega + sqrt(V) zeta), label_noise I)`` and, by Gaussian
    integration by parts, ``Gamma = E_post[h - omega] / (2V)`` where ``E_post``
    weights the samples ``h_i = omega + sqrt(V) zeta_i`` by their likelihood. The
    same ``zeta_i`` (common random numbers) serve every ``omega``.

    Args:
        key: ``jax.random`` key.
        g: output function, one ``(T, T)`` matrix to one ``(T, T)`` matrix.
        y: outputs, shape ``(..., T, T)``.
        omega: means, shape ``(..., T, T)``.
        V: scalar ``> 0``.
        label_noise: variance of the iid Gaussian noise on each entry of ``y``, ``> 0``.
        n_samples: Monte Carlo samples, ``>= 2``.

    Returns:
        :class:`GenericScore`.

    Chapter 4, section "One curve for every temperature and every $T$".
    """
    _checks.positive("V", V)
    _checks.positive("label_noise", label_noise)
    n_samples = _checks.integer_at_least("n_samples", n_samples, 2)
    if np.shape(y) != np.shape(omega) or len(np.shape(omega)) < 2 or np.shape(omega)[-1] != np.shape(omega)[-2]:
        raise ValueError(f"y and omega must have the same shape (..., T, T), got {np.shape(y)} and {np.shape(omega)}")
    T = np.shape(omega)[-1]
    zeta = symmetric_gaussian(key, (n_samples, T, T))
    return _generic_score(g, jnp.asarray(y, jnp.float64), jnp.asarray(omega, jnp.float64), zeta,
                          float(V), float(label_noise))


@partial(jax.jit, static_argnames=("g",))
def _generic_score(g, y, omega, zeta, V, label_noise):
    T = omega.shape[-1]
    gv = jax.vmap(g)
    batch = omega.shape[:-2]
    om = omega.reshape((-1, T, T))
    yy = y.reshape((-1, T, T))

    def one(o, yo):
        h = o + jnp.sqrt(V) * zeta
        out = gv(h)
        logw = -_frob_sq(out - yo) / (2 * label_noise) - T * T / 2 * jnp.log(2 * math.pi * label_noise)
        lse = logsumexp(logw)
        w = jnp.exp(logw - lse)
        G = jnp.einsum("i,iab->ab", w, jnp.sqrt(V) * zeta) / (2 * V)
        return G, lse - jnp.log(zeta.shape[0]), 1.0 / jnp.sum(w * w)

    G, lz, ess = jax.vmap(one)(om, yy)
    return GenericScore(G.reshape(batch + (T, T)), lz.reshape(batch), ess.reshape(batch))
