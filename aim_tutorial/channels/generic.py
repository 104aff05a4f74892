"""The generic channel ``y = g(h) + sqrt(label_noise) xi`` for any output function ``g``, by Monte Carlo.

``g`` maps one ``(T, T)`` matrix to one ``(T, T)`` matrix and ``xi`` is iid Gaussian on all
``T^2`` entries. ``Z_out`` and its score are importance-sampling averages over prior
draws of ``h`` (:func:`generic_output_score`); the state evolution estimates
``q_hat / alpha`` with common random numbers
(:func:`aim_tutorial.state_evolution.generic_state_evolution`). For a ``g`` that acts
entry by entry, :func:`aim_tutorial.channels.elementwise_channel` is exact and faster.
Chapter 4, section "One curve for every temperature and every $T$".
"""

from __future__ import annotations

import math
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .. import _checks
from .base import frob_sq as _frob_sq, symmetric_gaussian


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
