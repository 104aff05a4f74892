"""The :class:`Channel` type, the registry of named channels, and the shared Gaussian helpers.

A channel is everything the book's algorithms need to know about ``P_out(y | h)`` for
one sample: the output map (the sampler, gradient descent), ``log Z_out`` and its
score (GAMP-RIE, the free entropy), and the two functions of the overlap that the
state evolution needs. Every function of the package that takes ``channel=`` resolves
it here with :func:`get`: a registered name or a :class:`Channel` object; an unknown
name is a ``ValueError`` that lists the registered ones.

Conventions (chapter 3, section "The output channel and its Nishimori identity"): for
one sample the attention indices are ``h = omega + sqrt(V) zeta``, ``Var zeta_aa = 2``,
``Var zeta_ab = 1``; Gaussian noise of variance ``Delta`` on ``h`` (``Delta`` on the
diagonal, ``Delta/2`` off it) only replaces ``V`` by ``V' = V + Delta/2``, so every
channel function below receives ``V'``. The score is ``Gamma_aa = g_aa``,
``Gamma_ab = g_ab / 2`` with ``g_ab = d log Z_out / d omega_ab`` over ``a <= b``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks

__all__ = [
    "Channel",
    "register",
    "registered",
    "get",
    "check_settings",
    "check_outputs",
    "check_symmetric",
    "frob_sq",
    "gauss_norm",
    "log_npdf",
    "symmetric_gaussian",
]

_LOG_2PI = math.log(2.0 * math.pi)


def _no_check(T, beta, noise, score):
    return None


@dataclass(frozen=True, eq=False)
class Channel:
    """An output channel ``P_out(y | h)`` of a single-layer AIM.

    Registered channels are looked up by name (:func:`get`); a ``Channel`` object can be
    passed wherever a name can. Objects compare and hash by identity, so that one
    channel is one static argument of the jitted functions.

    Attributes:
        name: the registry name.
        summary: one line for tables and error messages.
        output: ``output(h, beta) -> y``, the noiseless output map on ``(..., T, T)``.
        score: ``score(y, omega, Vp, beta, score) -> Gamma`` (JAX, traceable, symmetric).
        log_partition: ``log_partition(y, omega, Vp, beta) -> log Z_out`` (JAX, traceable),
            up to terms that depend on ``y`` only.
        se_H: ``se_H(q, Vp, T, beta, score) -> q_hat / alpha`` at overlap ``q`` (numpy,
            vectorised over ``q`` and ``Vp``), eq. (bo-se).
        se_ElogZ: ``se_ElogZ(q, Vp, T, beta) -> E log Z_out`` up to a ``q``-independent
            constant, eq. (rep-phi) (numpy).
        perfect_recovery: ``perfect_recovery(rho, T, beta, noise) -> alpha_PR`` or ``None``
            when the channel has no perfect-recovery threshold.
        label_error: optional ``label_error(q, Vp, T, beta, key, n_samples)``, the
            Bayes-optimal error on the outputs, eq. (bo-label).
        sample: ``sample(key, h, beta) -> y`` (defaults to ``output``; a channel with its
            own label noise adds it here).
        check: ``check(T, beta, noise, score)`` raises ``ValueError`` for settings the
            channel does not support (the common checks are done by :func:`get`'s callers).
        check_outputs: optional ``check_outputs(name, y, beta, log_outputs)``, raises ``ValueError``
            (naming the argument ``name``) when the concrete array ``y`` (finite, shape ``(..., T, T)``,
            already checked by :func:`check_outputs`) cannot be outputs of the channel: softmax rows
            that are not probabilities, hardmax rows that are not one-hot, values outside the range
            of an elementwise map. ``None``: any finite ``y`` is accepted.
        log_score, log_log_partition: optional ``score`` and ``log_partition`` of the channel given
            the log-outputs ``log y`` instead of ``y`` (same signatures); ``None`` when the channel
            takes no ``log_outputs=True`` (only the softmax, whose probabilities underflow, has them).
        differentiable: whether ``output`` is differentiable in ``h`` (gradient descent).
        scores: the ``score=`` switches it accepts (``"exact"`` always).
        uses_beta: whether ``beta`` enters the channel.
        exact_se: whether ``se_H``/``se_ElogZ`` are deterministic (closed form or quadrature).
        label_noise: variance of the Gaussian noise the channel adds to ``y`` (0 if none).
        structure: elementwise channels without label noise: ``structure(T, beta)``, the flat
            intervals and monotone pieces of the map (:class:`aim_tutorial.channels.elementwise.Structure`).
    """

    name: str
    summary: str
    output: Callable
    score: Callable
    log_partition: Callable
    se_H: Callable
    se_ElogZ: Callable
    perfect_recovery: Callable = field(default=lambda rho, T, beta, noise: None)
    label_error: Optional[Callable] = None
    sample: Optional[Callable] = None
    check: Callable = _no_check
    check_outputs: Optional[Callable] = None
    log_score: Optional[Callable] = None
    log_log_partition: Optional[Callable] = None
    differentiable: bool = True
    scores: tuple = ("exact",)
    uses_beta: bool = False
    exact_se: bool = True
    label_noise: float = 0.0
    structure: Optional[Callable] = None

    def draw(self, key, h, beta):
        """``y`` for indices ``h`` (with the channel's own label noise, if any)."""
        if self.sample is not None:
            return self.sample(key, h, beta)
        return self.output(h, beta)

    def __repr__(self):
        return f"Channel({self.name!r}: {self.summary})"


_REGISTRY: dict[str, Channel] = {}


def register(channel: Channel) -> Channel:
    """Add ``channel`` to the registry under ``channel.name`` (a name is registered once)."""
    if not isinstance(channel, Channel):
        raise TypeError(f"channel must be a Channel, got {type(channel).__name__}")
    if channel.name in _REGISTRY and _REGISTRY[channel.name] is not channel:
        raise ValueError(f"a channel named {channel.name!r} is already registered")
    _REGISTRY[channel.name] = channel
    return channel


def registered() -> tuple:
    """The names of the registered channels, in registration order."""
    return tuple(_REGISTRY)


def get(channel, allowed=None) -> Channel:
    """The :class:`Channel` for a registered name or a ``Channel`` object.

    Args:
        channel: a name (see :func:`registered`) or a :class:`Channel`.
        allowed: optional predicate ``Channel -> bool``, or tuple of names, of the
            channels the caller supports; others are a ``ValueError``.

    Raises:
        ValueError: an unknown name, listing the known ones; a channel the caller does not support.
        TypeError: neither a string nor a ``Channel``.
    """
    if isinstance(channel, Channel):
        ch = channel
    elif isinstance(channel, str):
        if channel not in _REGISTRY:
            raise ValueError(f"channel must be one of {registered()} or a Channel, got {channel!r}")
        ch = _REGISTRY[channel]
    else:
        raise TypeError(f"channel must be a registered name {registered()} or a Channel, "
                        f"got {type(channel).__name__}")
    if allowed is not None:
        ok = allowed(ch) if callable(allowed) else ch.name in allowed
        if not ok:
            names = tuple(n for n, c in _REGISTRY.items() if (allowed(c) if callable(allowed) else n in allowed))
            raise ValueError(f"channel must be one of {names} here, got {ch.name!r}")
    return ch


def check_settings(ch: Channel, T, beta, noise, score) -> None:
    """The checks every channel shares, then the channel's own."""
    _checks.one_of("score", score, ch.scores)
    if ch.uses_beta and _is_concrete(beta):
        _checks.positive("beta", beta)
    if _is_concrete(noise):
        _checks.nonnegative("noise", noise)
    ch.check(T, beta, noise, score)


def check_outputs(ch: Channel, name: str, y, T: int, beta, *, log_outputs: bool = False) -> None:
    """Check outputs ``y`` of ``ch`` for ``T`` tokens: real, finite, shape ``(..., T, T)``, then the
    channel's own :attr:`Channel.check_outputs`. Skipped for traced values (inside ``jit``/``grad``).

    ``log_outputs=True`` says that ``y`` holds ``log y`` (a channel with :attr:`Channel.log_score`).
    """
    log_outputs = _checks.boolean("log_outputs", log_outputs)
    if log_outputs and ch.log_score is None:
        raise ValueError(f"log_outputs=True is defined only for channels whose outputs can underflow "
                         f"(softmax), not for channel {ch.name!r}")
    if not _is_concrete(y):
        return
    _checks.real_array(name, y, min_ndim=2)
    if np.shape(y)[-2:] != (T, T):
        raise ValueError(f"{name} must have shape (..., T, T) = (..., {T}, {T}), got {np.shape(y)}")
    if ch.check_outputs is not None:
        ch.check_outputs(name, y, beta, log_outputs)


def check_symmetric(name: str, A, *, atol: float = 1e-8):
    """A finite real array of shape ``(..., T, T)``, symmetric in its last two axes (to ``atol`` of its
    largest entry, at least 1); skipped for traced values. Returns ``A``."""
    if not _is_concrete(A):
        return A
    _checks.real_array(name, A, min_ndim=2)
    shape = np.shape(A)
    if shape[-1] != shape[-2]:
        raise ValueError(f"{name} must have shape (..., T, T) (square in its last two axes), got shape {shape}")
    An = np.asarray(A, dtype=float)
    scale = max(1.0, float(np.max(np.abs(An))))
    if float(np.max(np.abs(An - np.swapaxes(An, -1, -2)))) > atol * scale:
        raise ValueError(f"{name} must be symmetric in its last two axes (|{name} - {name}^T| <= {atol:g} "
                         f"max(1, max|{name}|))")
    return A


# ---------------------------------------------------------------------------
# helpers shared by the channel files


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def round_bits(x, bits: int = 40):
    """``x`` rounded to ``bits`` significant bits (40: about 12 significant digits), elementwise, as
    a float64 array: the key that groups the points of a state-evolution line that differ only by
    rounding (a fixed number of decimals would keep 6 significant digits at ``1e-6`` and none below
    ``5e-13``, and split points that differ by rounding at ``1e4``). Zeros, infinities and NaNs
    stay as they are."""
    m, e = np.frexp(np.asarray(x, dtype=float))
    return np.ldexp(np.round(m * 2.0**bits) / 2.0**bits, e)


def frob_sq(A):
    return jnp.sum(A * A, axis=(-1, -2))


def gauss_norm(T, Veff, n_free):
    """``log`` of the Gaussian normalisation of ``n_free`` measured combinations of ``h``."""
    D = T * (T + 1) / 2
    # density of the D upper-triangle entries: variances 2V (diagonal), V (off)
    out = -D / 2 * _LOG_2PI - T / 2 * jnp.log(2 * Veff) - T * (T - 1) / 4 * jnp.log(Veff)
    if n_free < D:  # integrate out the constant direction c 11^T (|11^T|_F = T)
        out = out + 0.5 * jnp.log(4 * math.pi * Veff / T**2)
    return out


def log_npdf(x):
    return -0.5 * x * x - 0.5 * _LOG_2PI


def symmetric_gaussian(key, shape):
    """Symmetric Gaussian ``zeta``, ``Var zeta_aa = 2``, ``Var zeta_ab = 1``, shape ``(..., T, T)``.

    Args:
        key: a ``jax.random`` key.
        shape: a sequence of integers ``>= 0``, at least two, the last two equal (``(..., T, T)``).

    Example:
        >>> import jax, aim_tutorial as aim
        >>> aim.channels.symmetric_gaussian(jax.random.key(0), (5, 3, 3)).shape
        (5, 3, 3)
    """
    _checks.prng_key("key", key)
    shape = _shape("shape", shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"shape must be (..., T, T), at least two sizes, the last two equal, got {shape}")
    _checks.check_memory(f"symmetric_gaussian(shape={shape})", math.prod(shape))
    G = jax.random.normal(key, shape)
    return (G + jnp.swapaxes(G, -1, -2)) / math.sqrt(2)


def _shape(name: str, shape) -> tuple:
    """A shape: a sequence of integers ``>= 0`` (not a bare integer, a string or floats)."""
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise _checks.ArgumentTypeError(f"{name} must be a sequence of integers >= 0, got {shape!r}")
    return tuple(_checks.integer_at_least(f"{name}[{i}]", s, 0) for i, s in enumerate(shape))
