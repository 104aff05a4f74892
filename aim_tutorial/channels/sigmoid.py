"""Sigmoid attention: ``y_ab = sigmoid(beta h_ab - log T)`` (Ramapuram et al. 2024, bias ``b = -log L``).

An elementwise channel (:mod:`aim_tutorial.channels.elementwise`). The sigmoid is
strictly increasing, so a noiseless ``y`` reveals ``h = (logit(y) + log T) / beta``
exactly: the channel is the linear one, with the same error curve and threshold
``alpha_PR = (2 rho - rho^2) / (T^2 + T)``, for every ``beta``. In float64 the sigmoid
saturates: ``y = 1`` exactly once ``beta h - log T >= 36.74`` (``53 log 2``) and ``y = 0``
at and below ``-708.4`` (on XLA's CPU backend, which flushes results below the smallest
normal double to zero; with subnormals it would be ``-744.4``); such a ``y`` only says that
``h`` is beyond that point, and the channel treats it so (a censored entry), as the sampler
produces it. Both points are measured on the backend in use (:func:`_saturation`). With label noise on ``y``
the channel is no longer linear, and ``beta`` matters. Reference: Ramapuram et al.,
"Theory, analysis, and best practices for sigmoid self-attention", arXiv 2409.04431 (2024).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .base import register
from .elementwise import Structure, make

__all__ = [
    "SIGMOID",
]


@functools.cache
def _saturation() -> tuple:
    """``(s_lo, s_hi)``: ``jax.nn.sigmoid(s)`` is exactly 0 for ``s <= s_lo`` and exactly 1 for
    ``s >= s_hi``, found on the backend in use by bisection down to adjacent doubles (the
    sigmoid is monotone). Exact rounding would give ``s_lo = log(5e-324) = -744.4`` and
    ``s_hi = 53 log 2 = 36.74``; XLA on CPU flushes subnormal results to zero, so there the
    sigmoid is 0 from ``log(2.2e-308) = -708.4`` already, and another backend may differ."""
    f = jax.jit(jax.nn.sigmoid)

    def last(a, b, value):  # f(a) == value != f(b): the double nearest b at which f still equals value
        while True:
            m = 0.5 * (a + b)
            if m in (a, b):
                return a
            a, b = (m, b) if float(f(np.float64(m))) == value else (a, m)

    with jax.ensure_compile_time_eval():  # concrete values even when first called inside a trace
        return last(-800.0, -600.0, 0.0), last(40.0, 30.0, 1.0)


def _f_of(T, beta):
    return lambda h: jax.nn.sigmoid(beta * h - math.log(T))


def _structure(T, beta):
    xp = jnp if isinstance(beta, jax.core.Tracer) else np
    s_lo, s_hi = _saturation()
    lo = (s_lo + math.log(T)) / beta  # y = 0 below
    hi = (s_hi + math.log(T)) / beta  # y = 1 above
    inf = np.inf
    return Structure(flat_a=xp.stack([xp.asarray(-inf), hi]) if xp is jnp else np.array([-inf, hi]),
                     flat_b=xp.stack([lo, xp.asarray(inf)]) if xp is jnp else np.array([lo, inf]),
                     flat_c=np.array([0.0, 1.0]), flat_group=np.array([0, 1]),
                     piece_a=xp.stack([lo]) if xp is jnp else np.array([lo]),
                     piece_b=xp.stack([hi]) if xp is jnp else np.array([hi]),
                     piece_increasing=np.array([True]), piece_lo=np.array([0.0]), piece_hi=np.array([1.0]))


def _inverse_of(T, beta):
    return lambda y: (jnp.log(y) - jnp.log1p(-y) + math.log(T)) / beta


SIGMOID = register(make(
    "sigmoid", "y = sigmoid(beta h - log T), entrywise", _f_of, uses_beta=True, structure_of=_structure,
    inverse_of=_inverse_of))
