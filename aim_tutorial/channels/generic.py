"""The generic channel ``y = g(h) + sqrt(label_noise) xi`` for any output function ``g``, by Monte Carlo.

``g`` maps one ``(T, T)`` matrix to one ``(T, T)`` matrix and ``xi`` is iid Gaussian on all
``T^2`` entries. ``Z_out`` and its score are importance-sampling averages over prior
draws of ``h`` (:func:`generic_output_score`); the state evolution estimates
``q_hat / alpha`` with common random numbers (:func:`generic_moments`), and the error on the
outputs by Monte Carlo over ``omega`` and ``h`` (:func:`generic_label_mc`). As a
:class:`~aim_tutorial.channels.Channel` (:func:`generic_channel`) it runs through every
algorithm of the package; :func:`aim_tutorial.state_evolution.generic_state_evolution`
adds Monte Carlo error bars. For a ``g`` that acts entry by entry,
:func:`aim_tutorial.channels.elementwise_channel` is exact and faster.
Chapter 4, section (sec-bo-one-curve).
"""

from __future__ import annotations

import functools
import math
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from scipy.interpolate import CubicSpline

from .. import _checks
from .base import Channel, check_symmetric, round_bits, frob_sq as _frob_sq, symmetric_gaussian

__all__ = [
    "GenericScore",
    "generic_output_score",
    "generic_moments",
    "generic_channel",
    "generic_label_mc",
]


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


def generic_output_score(key, g: Callable, y, omega, V, *, label_noise: float, n_samples: int = 4096):
    """Score of the generic channel ``y = g(h) + sqrt(label_noise) xi`` by Monte Carlo.

    ``Z_out = E_zeta N(y; g(omega + sqrt(V) zeta), label_noise I)`` and, by Gaussian
    integration by parts, ``Gamma = E_post[h - omega] / (2V)`` where ``E_post``
    weights the samples ``h_i = omega + sqrt(V) zeta_i`` by their likelihood. The
    same ``zeta_i`` (common random numbers) serve every ``omega``. The estimate is
    ``sum_i w_i (zeta_i - zeta_bar) / (2 sqrt(V))``, the draws about their sample mean
    ``zeta_bar`` (a control variate: ``E zeta = 0`` is known). Without it the estimate
    carried ``zeta_bar / (2 sqrt(V))`` at every ``omega``, which put ``||zeta_bar||^2 / V``
    (about ``T (T + 1) / (n_samples V)``) into ``4 ||Gamma||^2``: negligible against the
    signal at small ``label_noise``, but it swamped it (of order ``2 T (T + 1) / label_noise``)
    once ``label_noise`` exceeded about ``n_samples V`` (issue 50).

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

    Raises:
        ValueError or TypeError naming the argument: among them ``g`` not hashable (it is a static
        argument of ``jax.jit``), failing when traced, not returning a real ``(T, T)`` array, or
        returning NaN or inf on the prior draws (a non-finite score).

    Chapter 4, section (sec-bo-one-curve).
    """
    _checks.prng_key("key", key)
    if not callable(g):
        raise _checks.ArgumentTypeError(f"g must be callable (one (T, T) matrix to one (T, T) matrix), "
                                        f"got {type(g).__name__}")
    _checks.positive("V", V)
    _checks.positive("label_noise", label_noise)
    n_samples = _checks.integer_at_least("n_samples", n_samples, 2)
    if np.shape(y) != np.shape(omega) or len(np.shape(omega)) < 2 or np.shape(omega)[-1] != np.shape(omega)[-2]:
        raise ValueError(f"y and omega must have the same shape (..., T, T), got {np.shape(y)} and {np.shape(omega)}")
    check_symmetric("omega", omega)
    _checks.real_array("y", y)
    _checks.check_memory(f"generic_output_score(n_samples={n_samples})",
                         n_samples * int(np.prod(np.shape(omega))))
    T = np.shape(omega)[-1]
    check_output_function("g", g, T)
    zeta = symmetric_gaussian(key, (n_samples, T, T))
    out = _generic_score(g, jnp.asarray(y, jnp.float64), jnp.asarray(omega, jnp.float64), zeta,
                         float(V), float(label_noise))
    if not bool(jnp.all(jnp.isfinite(out.score))):
        raise ValueError("g must return finite values: the score is not finite (g gave NaN or inf on some "
                         "of the prior draws h = omega + sqrt(V) zeta)")
    return out


def check_output_function(name: str, g, T: int):
    """``g`` is a hashable, JAX-traceable map of one ``(T, T)`` float matrix to one real ``(T, T)`` matrix
    (:func:`aim_tutorial._checks.user_function`); else a ``ValueError`` or ``TypeError`` naming ``name``."""
    return _checks.user_function(name, g, (T, T), (T, T), f"one (T, T) = ({T}, {T}) matrix", hashable=True,
                                 floating=False)


@partial(jax.jit, static_argnames=("g",))
def _generic_score(g, y, omega, zeta, V, label_noise):
    T = omega.shape[-1]
    gv = jax.vmap(g)
    batch = omega.shape[:-2]
    om = omega.reshape((-1, T, T))
    yy = y.reshape((-1, T, T))

    # the draws about their own mean in the numerator: E zeta = 0 is known, and the sample mean
    # zeta_bar would add zeta_bar / (2 sqrt(V)) to Gamma at every omega (see generic_output_score)
    zc = zeta - jnp.mean(zeta, axis=0)

    def one(o, yo):
        h = o + jnp.sqrt(V) * zeta
        out = gv(h)
        logw = -_frob_sq(out - yo) / (2 * label_noise) - T * T / 2 * jnp.log(2 * math.pi * label_noise)
        lse = logsumexp(logw)
        w = jnp.exp(logw - lse)
        G = jnp.einsum("i,iab->ab", w, zc) / (2 * jnp.sqrt(V))
        return G, lse - jnp.log(zeta.shape[0]), 1.0 / jnp.sum(w * w)

    G, lz, ess = jax.vmap(one)(om, yy)
    return GenericScore(G.reshape(batch + (T, T)), lz.reshape(batch), ess.reshape(batch))


@partial(jax.jit, static_argnames=("g", "n_batches"))
def generic_moments(g, z_omega, z_h, z_y, zeta, q, Vp, label_noise, n_batches):
    """Batch means of ``4 ||Gamma||_F^2`` (``q_hat / alpha``) and of ``log Z_out`` at overlap ``q``.

    ``omega = sqrt(q) z_omega``, ``h = omega + sqrt(Vp) z_h``, ``y = g(h) + sqrt(label_noise) z_y``
    and the score from the prior draws ``zeta``: the same random numbers at every ``(q, Vp)``
    (common random numbers), so the estimates are smooth functions of ``q``.

    Returns:
        ``(fisher, log_z, ess)``: batch means of shape ``(n_batches,)``, and the mean effective
        sample size of the importance weights.
    """
    omega = jnp.sqrt(q) * z_omega
    h = omega + jnp.sqrt(Vp) * z_h
    y = jax.vmap(g)(h) + jnp.sqrt(label_noise) * z_y
    out = _generic_score(g, y, omega, zeta, Vp, label_noise)
    fisher = 4 * jnp.sum(out.score * out.score, axis=(-1, -2))
    nb = n_batches
    return (fisher.reshape(nb, -1).mean(axis=1), out.log_partition.reshape(nb, -1).mean(axis=1),
            jnp.mean(out.ess))


@partial(jax.jit, static_argnames=("g", "T", "n_omega"))
def _label_mc_jit(g, key, q, Vp, T, n_omega):
    k1, k2 = jax.random.split(key)
    om = jnp.sqrt(q) * symmetric_gaussian(k1, (n_omega, 1, T, T))
    h = om + jnp.sqrt(Vp) * symmetric_gaussian(k2, (n_omega, 64, T, T))
    y = jax.vmap(jax.vmap(g))(h)
    A = jnp.mean(jnp.sum(y * y, axis=(-1, -2)), axis=1)  # inner mean of ||g(h)||^2
    ybar = jnp.mean(y, axis=1)
    per = (A - jnp.sum(ybar * ybar, axis=(-1, -2))) * 64 / 63  # unbiased tr Cov(g(h) | omega), each omega
    return jnp.mean(per), jnp.std(per) / jnp.sqrt(n_omega)


def generic_label_mc(g: Callable, key, q, Vp, T: int, n_omega: int):
    """The error on the outputs ``E_omega tr Cov(g(h) | omega)`` of the map ``g`` by Monte Carlo, eq. (bo-label).

    ``omega = sqrt(q) zeta_1``, ``h = omega + sqrt(Vp) zeta_2`` (symmetric Gaussian ``zeta``): ``n_omega``
    draws of ``omega`` and 64 of ``h`` for each; the covariance of each ``omega`` is the unbiased one (64/63),
    as for the softmax (:func:`aim_tutorial.channels.softmax.label_mc`). The label noise does not enter: the
    error is the one on ``g(h)``.

    Args:
        g: the channel's map, one ``(T, T)`` matrix to one ``(T, T)`` matrix (hashable, JAX-traceable).
        key: ``jax.random`` key.
        q: overlap ``>= 0``; Vp: ``V' > 0``.
        T: tokens, ``>= 2``; n_omega: draws of ``omega``, ``>= 1``.

    Returns:
        ``(mean, standard_error)``: the estimate and its Monte Carlo standard error (the spread of the
        ``n_omega`` per-``omega`` values over ``sqrt(n_omega)``).
    """
    _checks.prng_key("key", key)
    q = _checks.nonnegative("q", q)
    Vp = _checks.positive("Vp", Vp)
    T = _checks.integer_at_least("T", T, 2)
    n_omega = _checks.integer_at_least("n_omega", n_omega, 1)
    check_output_function("g", g, T)
    _checks.check_memory(f"generic_label_mc(n_omega={n_omega})", 2 * 64 * n_omega * T * T)
    m, se = _label_mc_jit(g, key, jnp.asarray(q, jnp.float64), jnp.asarray(Vp, jnp.float64), T, n_omega)
    return float(m), float(se)


_FRAC = 1 / (1 + np.exp(-np.linspace(-8.0, 4.0, 16)))  # V' / (q + V'): from 3e-4 to 0.98


def generic_channel(g: Callable, label_noise: float, name: str = "generic", *, T: int = 2,
                    n_samples: int = 4096, n_omega: int = 1024, seed: int = 0) -> Channel:
    """The channel ``y = g(h) + sqrt(label_noise) xi`` of any matrix map ``g``, by Monte Carlo.

    ``xi`` is iid standard Gaussian on all ``T^2`` entries. The score and ``log Z_out`` are
    importance-sampling averages over ``n_samples`` prior draws (:func:`generic_output_score`),
    the same draws for every call (seed ``seed``), so the channel is one deterministic
    function that GAMP-RIE can iterate. The state evolution's ``q_hat / alpha`` and
    ``E log Z_out`` are Monte Carlo averages over ``n_omega`` draws of ``(omega, h, y)``
    with the same score (:func:`generic_moments`), with common random numbers, at 16 points
    of each line ``q + V' = const`` that the solver walks (``V' / (q + V')`` from ``3e-4``
    to ``0.98``), interpolated in ``log V'`` and clamped beyond. Its Monte Carlo error is
    not propagated: for error bars use
    :func:`aim_tutorial.state_evolution.generic_state_evolution`. The error on the outputs,
    :func:`aim_tutorial.label_space_error` (``key`` required), is a Monte Carlo average too
    (:func:`generic_label_mc`: ``n_samples // 64`` draws of ``omega``, 64 of ``h`` each), with standard
    error ``generic_label_mc(...)[1]``; on the softmax map at ``T = 2`` it agrees with the softmax
    channel's quadrature within 4 of them (``tests/test_channels.py``).

    The self-normalised importance sampling underestimates ``q_hat / alpha``: on the linear
    map with ``label_noise = 0.3`` (``T = 2``, ``rho = 0.5``, 4 seeds) by 6.5 %, 3.0 % and
    1.6 % (+- 2.2, 1.4, 0.8 %) with 512, 2048 and 8192 prior draws, so the error comes out
    slightly high; raise ``n_samples`` where that matters. (Measured before the draws were
    centred in the score, :func:`generic_output_score`; the centring removes a positive term
    ``T (T + 1) / (n_samples V')`` that mattered only at small ``V'``.)

    Args:
        g: one ``(T, T)`` matrix to one ``(T, T)`` matrix, JAX-traceable (differentiable for
            gradient descent); hashable (a module-level function or a ``functools.partial``).
        label_noise: variance of the noise on ``y``, ``> 0`` (it keeps the importance weights
            from degenerating).
        name: the name shown in tables; the channel is not registered.
        T: the tokens a sequence that the channel accepts, ``2 <= T <= 4`` (beyond, the importance
            weights of ``n_samples`` draws degenerate).
        n_samples: prior draws of the score, ``>= 64``; n_omega: draws of the state-evolution
            averages, ``>= 64``, a multiple of 8.
        seed: seed of the Monte Carlo draws.

    Returns:
        a :class:`Channel` (``exact_se = False``).

    Example:
        >>> import aim_tutorial as aim
        >>> ch = aim.generic_channel(aim.hardmax, label_noise=0.05, n_samples=512, n_omega=256)
        >>> float(aim.solve_state_evolution(0.3, 0.5, channel=ch).mmse) > 0
        True

    Chapter 4, section (sec-bo-one-curve).
    """
    if not callable(g):
        raise TypeError(f"g must be callable (one (T, T) matrix to one (T, T) matrix), got {type(g).__name__}")
    label_noise = _checks.positive("label_noise", label_noise)
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    T_ch = _checks.integer_at_least("T", T, 2)
    if T_ch > 4:
        raise ValueError(f"T must be in [2, 4] for the generic channel, got {T}")
    n_samples = _checks.integer_at_least("n_samples", n_samples, 64)
    n_omega = _checks.integer_at_least("n_omega", n_omega, 64)
    if n_omega % 8:
        raise ValueError(f"n_omega must be a multiple of 8, got {n_omega}")
    seed = _checks.integer_at_least("seed", seed, 0)
    k_zeta, k1, k2, k3 = jax.random.split(jax.random.key(seed), 4)
    zeta = symmetric_gaussian(k_zeta, (n_samples, T_ch, T_ch))  # the prior draws of the score
    draws = (symmetric_gaussian(k1, (n_omega, T_ch, T_ch)), symmetric_gaussian(k2, (n_omega, T_ch, T_ch)),
             jax.random.normal(k3, (n_omega, T_ch, T_ch)))  # omega, h and the label noise

    def output(h, beta):
        gv = g
        for _ in range(h.ndim - 2):
            gv = jax.vmap(gv)
        return gv(h)

    def sample(key, h, beta):
        y = output(h, beta)
        return y + math.sqrt(label_noise) * jax.random.normal(key, y.shape, dtype=y.dtype)

    def score(y, omega, Vp, beta, score):
        return _generic_score(g, y, omega, zeta, Vp, label_noise).score

    def log_partition(y, omega, Vp, beta):
        return _generic_score(g, y, omega, zeta, Vp, label_noise).log_partition

    along = _se_along(g, draws, zeta, label_noise)

    def label_error(q, Vp, T, beta, key, n_samples):
        """Eq. (bo-label) by Monte Carlo: ``n_samples // 64`` draws of ``omega``, 64 of ``h`` each
        (:func:`generic_label_mc`); ``key`` required."""
        if key is None:
            raise ValueError(f"key must be a jax.random key for the generic channel {name!r} (the error on "
                             f"the outputs is a Monte Carlo average)")
        n_om = max(1, int(n_samples) // 64)
        return np.vectorize(lambda qv, vv: generic_label_mc(g, key, float(qv), float(vv), T_ch, n_om)[0])(
            np.asarray(q, float), np.asarray(Vp, float))

    def check(T, beta, noise, score):
        if T != T_ch:
            raise ValueError(f"T must be {T_ch} for this generic channel (made with T={T_ch}), got {T}")

    return Channel(name=name, summary=f"y = g(h) + noise of variance {label_noise:g} (Monte Carlo)",
                   output=output, score=score, log_partition=log_partition,
                   se_H=lambda q, Vp, T, beta, score: along(q, Vp, "H"),
                   se_ElogZ=lambda q, Vp, T, beta: along(q, Vp, "L"),
                   label_error=label_error, sample=sample, check=check, exact_se=False,
                   label_noise=label_noise)


def _se_along(g, draws, zeta, label_noise):
    """For :func:`generic_channel`: ``along(q, Vp, which)``, the state evolution's ``q_hat / alpha``
    (``which = "H"``) or ``E log Z_out`` (``"L"``), interpolated from 16 Monte Carlo points of each line
    ``q + V' = S`` (a table per ``S``, cached)."""
    @functools.lru_cache(maxsize=64)
    def table(S):
        H, L = [], []
        for fr in _FRAC:
            f, lz, _ = generic_moments(g, *draws, zeta, float(S * (1 - fr)), float(S * fr), label_noise, 8)
            H.append(float(jnp.mean(f)))
            L.append(float(jnp.mean(lz)))
        lv = np.log(S * _FRAC)
        return CubicSpline(lv, np.log(H)), CubicSpline(lv, np.array(L)), lv[0], lv[-1]

    def along(q, Vp, which):
        q, Vp = np.broadcast_arrays(np.asarray(q, float), np.asarray(Vp, float))
        S = round_bits(q + Vp)
        out = np.empty(S.shape)
        for s_ in np.unique(S):
            k = S == s_
            tabs = table(float(s_))
            lv = np.clip(np.log(Vp[k]), tabs[2], tabs[3])
            out[k] = np.exp(tabs[0](lv)) if which == "H" else tabs[1](lv)
        return out

    return along
