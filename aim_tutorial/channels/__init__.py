"""Output channels: the partition function ``Z_out``, its score, and the registry of channels.

Chapter 4 (``book/04_bayes_optimal_error.md``) teaches this subpackage; chapter 3
(``book/03_replica.md``) derives where it enters, and its labels ``rep-*`` are cited
below. For one sample the attention indices are ``h = omega + sqrt(V) zeta`` with
``zeta`` a symmetric Gaussian matrix, ``Var zeta_aa = 2``, ``Var zeta_ab = 1``
(``a != b``). The output channel gives

    Z_out(y | omega, V) = E_zeta P_out(y | omega + sqrt(V) zeta),       eq. (rep-zout)

and its **score** is the symmetric-matrix gradient (chapter 3, section "The output
channel and its Nishimori identity")

    Gamma_aa = g_aa,  Gamma_ab = Gamma_ba = g_ab / 2,
    g_ab = d log Z_out / d omega_ab   over the T(T+1)/2 entries a <= b,

so that ``d log Z_out = <Gamma, d omega>_F``. Gaussian noise of variance ``Delta`` on
``h`` (``Delta`` on the diagonal, ``Delta/2`` off it) only replaces ``V`` by ``V + Delta/2``.

One file a channel, each registering a :class:`Channel` (:mod:`.base`):

- ``"linear"`` (:mod:`.linear`): ``y = h``;
- ``"softmax"`` (:mod:`.softmax`): row-wise softmax at inverse temperature ``beta``;
- ``"hardmax"`` (:mod:`.hardmax`, ``T = 2``): the one-hot argmax of each row;
- ``"relu"`` (:mod:`.relu`): ``y = max(h, 0)/T`` entry by entry;
- ``"sigmoid"`` (:mod:`.sigmoid`): ``y = sigmoid(beta h - log T)`` entry by entry;
- ``"causal_softmax"`` (:mod:`.causal`): the softmax of row ``a`` over ``b <= a``, 0 above the diagonal;

and :func:`elementwise_channel` makes the channel of any entrywise map (:mod:`.elementwise`).
The generic channel ``y = g(h) + noise`` of any matrix map ``g`` is estimated by Monte
Carlo (:func:`generic_channel`, :mod:`.generic`). Adding a channel: CONTRIBUTING.md.

Reference: Boncoraglio, Troiani, Erba, Zdeborova, arXiv 2506.01582 (the output
channels and their scores).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from .base import (Channel, check_outputs, check_settings, check_symmetric, get, register,  # noqa: F401
                   registered, symmetric_gaussian)
from . import linear, softmax, hardmax, relu, sigmoid, causal  # noqa: F401,E402  (the registry, in this order)
from .elementwise import elementwise_channel  # noqa: F401
from .generic import GenericScore, generic_channel, generic_output_score  # noqa: F401
from .base import _is_concrete
from .. import _checks

__all__ = [
    "Channel",
    "check_outputs",
    "check_settings",
    "check_symmetric",
    "get",
    "register",
    "registered",
    "symmetric_gaussian",
    "elementwise_channel",
    "GenericScore",
    "generic_channel",
    "generic_output_score",
    "SCORES",
    "output_score",
    "log_partition",
    "symmetric_gradient",
]

SCORES = hardmax.SCORES


def _validate(channel, y, omega, V, beta, noise, score, log_outputs=False):
    ch = get(channel)
    ws = np.shape(omega)
    if len(ws) < 2 or ws[-1] != ws[-2]:
        raise ValueError(f"omega must have shape (..., T, T), got shape {ws}")
    if np.shape(y) != ws:
        raise ValueError(f"y and omega must have the same shape (..., T, T), got {np.shape(y)} and {ws}")
    for name, val in (("V", V), ("beta", beta), ("noise", noise)):
        if _is_concrete(val) and np.ndim(val) != 0:
            raise ValueError(f"{name} must be a scalar, got shape {np.shape(val)}")
    if _is_concrete(V):
        _checks.positive("V", V)
    if _is_concrete(beta):
        _checks.finite("beta", beta)
    if _is_concrete(noise):
        _checks.nonnegative("noise", noise)
    if score not in ch.scores:
        if score in SCORES:
            raise ValueError(f"score must be 'exact' unless channel='hardmax' (score={score!r} is a hardmax switch)")
        raise ValueError(f"score must be one of {ch.scores} for channel {ch.name!r}, got {score!r}")
    check_settings(ch, ws[-1], beta, noise, score)
    check_symmetric("omega", omega)
    check_outputs(ch, "y", y, ws[-1], beta, log_outputs=log_outputs)
    return ch


# ---------------------------------------------------------------------------
# public functions


@partial(jax.jit, static_argnames=("channel", "score", "log_outputs"))
def _output_score(channel, y, omega, V, beta, noise, score, log_outputs=False):
    fn = channel.log_score if log_outputs else channel.score
    return fn(y, omega, V + noise / 2, beta, score)


def output_score(channel, y, omega, V, *, beta=1.0, noise=0.0, score: str = "exact", log_outputs: bool = False):
    """Score ``Gamma = grad_omega log Z_out(y | omega, V)`` as a symmetric matrix.

    ``Gamma_aa = d log Z_out / d omega_aa`` and ``Gamma_ab = Gamma_ba = (1/2) d log Z_out /
    d omega_ab`` (``a < b``), so ``d log Z_out = <Gamma, d omega>_F``. Closed forms:
    linear ``(y - omega)/(2V')``; softmax ``(c* 11^T + M - omega)/(2V')`` with
    ``c* = mean(omega - M)``; hardmax (T = 2) through ``Phi_2`` (module docstring).
    ``V' = V + noise/2``.

    Args:
        channel: a registered name (:func:`registered`: ``"softmax"``, ``"linear"``,
            ``"hardmax"``, ``"relu"``, ``"sigmoid"``) or a :class:`Channel`.
        y: outputs, shape ``(..., T, T)``, finite and possible outputs of the channel (softmax:
            rows of probabilities, all > 0, or their logs with ``log_outputs=True``; hardmax: one-hot
            rows, T = 2; linear and elementwise channels: symmetric, in the range of the map).
        omega: means of ``h``, symmetric, shape ``(..., T, T)``.
        V: variance scale, scalar ``> 0`` (``Var h_aa = 2V``, ``Var h_ab = V``).
        beta: softmax inverse temperature ``> 0`` (the score does not depend on
            it beyond reading ``y``).
        noise: variance ``Delta >= 0`` of the noise on ``h``.
        score: ``"exact"``, or ``"published"`` (hardmax only: the published,
            non-gradient expression).
        log_outputs: ``y`` holds the log-probabilities ``log softmax(beta h)`` (softmax only; as
            :func:`aim_tutorial.sample_data` gives them with ``log_outputs=True``): finite at any
            ``beta``, where the probabilities underflow to 0.

    Returns:
        ``Gamma``, shape ``(..., T, T)``, symmetric.

    Raises:
        ValueError: a shape that does not match, ``omega`` not symmetric, non-finite entries, ``V <= 0``,
            ``noise < 0``, or ``y`` that the channel cannot output (negative or underflowed softmax
            probabilities, hardmax rows that are not one-hot, ...). The checks of arrays are skipped
            for traced values (inside ``jax.jit``, ``jax.grad``).

    Example:
        >>> import jax.numpy as jnp, aim_tutorial as aim
        >>> h = jnp.array([[0.3, -0.2], [-0.2, 0.1]])
        >>> G = aim.output_score("linear", h, jnp.zeros((2, 2)), 0.5)
        >>> bool(jnp.allclose(G, h))   # (h - omega) / (2 V)
        True

    Chapter 4; the score and its matrix form: chapter 3, section "The output channel and its
    Nishimori identity". Reference: arXiv 2506.01582.
    """
    ch = _validate(channel, y, omega, V, beta, noise, score, log_outputs)
    y = jnp.asarray(y, dtype=jnp.float64)
    omega = jnp.asarray(omega, dtype=jnp.float64)
    args = (ch, y, omega, jnp.asarray(V, jnp.float64), jnp.asarray(beta, jnp.float64),
            jnp.asarray(noise, jnp.float64), score)
    return _output_score(*args, log_outputs=True) if log_outputs else _output_score(*args)


@partial(jax.jit, static_argnames=("channel", "log_outputs"))
def _log_partition(channel, y, omega, V, beta, noise, log_outputs=False):
    fn = channel.log_log_partition if log_outputs else channel.log_partition
    return fn(y, omega, V + noise / 2, beta)


def log_partition(channel, y, omega, V, *, beta=1.0, noise=0.0, log_outputs: bool = False):
    """``log Z_out(y | omega, V)``, eq. (rep-zout), batched over leading axes.

    - hardmax (T = 2): ``log Phi_2(k_1, k_2; c)``, the exact log-probability of ``y``.
    - linear: the Gaussian log-density of the ``T(T+1)/2`` entries ``y_ab``, ``a <= b``,
      with variances ``2V'`` (diagonal) and ``V'`` (off), ``V' = V + noise/2``.
    - softmax: the Gaussian log-density of the ``T(T+1)/2 - 1`` measured combinations
      of ``h`` (``h`` modulo ``c 11^T``): ``-||c* 11^T + M - omega||_F^2/(4V') -
      ((T^2+T-2)/4) log V'`` plus a constant; it omits the ``y``-dependent
      Jacobian from ``y`` to the log-ratios, which depends neither on ``omega``
      nor on ``V``, so its gradients in ``omega`` and ``V`` are exact.

    Args: as :func:`output_score` (``score`` is not needed: ``Z_out`` is one function); with
    ``log_outputs=True`` (softmax) ``y`` holds ``log y`` and the result is the same function.

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
    ch = _validate(channel, y, omega, V, beta, noise, "exact", log_outputs)
    y = jnp.asarray(y, dtype=jnp.float64)
    omega = jnp.asarray(omega, dtype=jnp.float64)
    args = (ch, y, omega, jnp.asarray(V, jnp.float64), jnp.asarray(beta, jnp.float64),
            jnp.asarray(noise, jnp.float64))
    return _log_partition(*args, log_outputs=True) if log_outputs else _log_partition(*args)


def symmetric_gradient(f: Callable, omega):
    """Symmetric-matrix gradient of a scalar function of a symmetric matrix.

    ``jax.grad`` treats the ``T^2`` entries as independent; the derivative along
    the symmetric direction ``E_ab + E_ba`` is ``G_ab + G_ba``, so the Frobenius
    gradient within symmetric matrices is ``(G + G^T)/2``. This is the
    convention of :func:`output_score`.

    Args:
        f: a scalar function of a ``(..., T, T)`` array (JAX-traceable).
        omega: the point, a real array of shape ``(..., T, T)``; a concrete one (an integer array or
            nested lists included) is converted to float64, so that the gradient is a float64 array.

    Raises:
        ValueError or TypeError naming ``f`` (concrete ``omega``): ``f`` not callable, failing when
        traced, not returning a real float scalar, or with a gradient that is not finite at ``omega``.
    """
    if not callable(f):
        raise _checks.ArgumentTypeError(f"f must be a callable (a scalar function of omega), got {type(f).__name__}")
    if _is_concrete(omega):
        _checks.real_array("omega", omega, min_ndim=2)
    if len(np.shape(omega)) < 2 or np.shape(omega)[-1] != np.shape(omega)[-2]:
        raise ValueError(f"omega must have shape (..., T, T), got shape {np.shape(omega)}")
    concrete = _is_concrete(omega)
    omega = jnp.asarray(omega, dtype=jnp.float64) if concrete else omega
    if concrete:
        _checks.user_function("f", f, omega.shape, (), f"omega (shape {omega.shape})")
    G = jax.grad(f)(omega)
    G = (G + jnp.swapaxes(G, -1, -2)) / 2
    if concrete and not bool(jnp.all(jnp.isfinite(G))):
        raise ValueError("f must have a finite gradient at omega: jax.grad(f)(omega) has NaN or inf entries "
                         "(f itself may be NaN or not differentiable there)")
    return G


