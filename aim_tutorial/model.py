"""The attention-indexed model: teacher, tokens, attention indices, channels.

Chapter 1 (``book/01_model.md``) teaches everything in this module; the
equation labels below refer to it. Shapes: ``d`` embedding dimension, ``T``
tokens a sequence, ``n`` samples, ``L`` layers.

Reference: Boncoraglio, Troiani, Erba, Zdeborova, *Bayes optimal learning of
attention-indexed models*, NeurIPS 2025 (arXiv 2506.01582), where the model is
introduced.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks

__all__ = [
    "teacher_width",
    "sample_teacher",
    "sample_tokens",
    "attention_indices",
    "symmetric_noise",
    "softmax",
    "hardmax",
    "apply_channel",
    "deep_as_aim",
    "deep_attention_literal",
    "sample_data",
    "sample_deep_data",
    "n_samples",
    "Instance",
    "make_instance",
]

# a registered name or an aim_tutorial.channels.Channel
Channel = Union[str, object]


def _channels():
    from . import channels  # the registry (imports this module's siblings only)

    return channels


def _itemsize() -> int:
    """Bytes an entry of the arrays JAX makes by default (8 with float64 enabled)."""
    return 8 if jax.config.jax_enable_x64 else 4


def _layers(name, value) -> list:
    """A non-empty list or tuple of per-layer arrays."""
    if not isinstance(value, (list, tuple)):
        raise _checks.ArgumentTypeError(f"{name} must be a list of L >= 1 arrays, one a layer, "
                                        f"got {type(value).__name__}")
    if len(value) < 1:
        raise ValueError(f"{name} must hold at least one layer (L >= 1), got an empty list")
    return list(value)


def _shape_of_matrices(name, shape) -> tuple:
    """A shape ``(..., T, T)`` of non-negative integers."""
    try:
        shape = tuple(shape)
    except TypeError:
        raise _checks.ArgumentTypeError(f"{name} must be a tuple of integers (..., T, T), got {shape!r}") from None
    for i, s in enumerate(shape):
        _checks.integer_at_least(f"{name}[{i}]", s, 0)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{name} must be (..., T, T) with two equal last sizes, got {shape}")
    return tuple(int(s) for s in shape)


def teacher_width(d: int, rho: float) -> int:
    """Width ``r = round(rho d)`` of the teacher's weights (at least 1)."""
    d = _checks.integer_at_least("d", d, 1)
    rho = _checks.positive("rho", rho)
    return max(1, int(round(rho * d)))


def sample_teacher(key: jax.Array, d: int, rho: float) -> jax.Array:
    """Sample a teacher ``S = W W^T / sqrt(r d)``, eq. (eq-teacher).

    ``W`` is ``(d, r)`` with iid N(0, 1) entries and ``r = round(rho d)``, so
    that ``E S = sqrt(r/d) I`` and ``Tr(S^2)/d -> 1 + rho``.

    Args:
        key: a ``jax.random`` key.
        d: embedding dimension, ``d >= 1``.
        rho: width ratio ``r/d``, ``rho > 0``.

    Returns:
        ``S``, shape ``(d, d)``, symmetric positive semi-definite, rank ``min(r, d)``.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> aim.sample_teacher(jax.random.key(0), 10, 0.5).shape
        (10, 10)
    """
    _checks.prng_key("key", key)
    r = teacher_width(d, rho)
    _checks.check_memory(f"sample_teacher(d={d}, rho={rho})", d * d + d * r, _itemsize())
    W = jax.random.normal(key, (d, r))
    return W @ W.T / jnp.sqrt(r * d)


def sample_tokens(key: jax.Array, n: int, T: int, d: int) -> jax.Array:
    """Tokens ``X``, shape ``(n, T, d)``, iid N(0, 1) entries (no ``1/sqrt(d)``)."""
    _checks.prng_key("key", key)
    n = _checks.integer_at_least("n", n, 1)
    T = _checks.integer_at_least("T", T, 1)
    d = _checks.integer_at_least("d", d, 1)
    _checks.check_memory(f"sample_tokens(n={n}, T={T}, d={d})", n * T * d, _itemsize())
    return jax.random.normal(key, (n, T, d))


@jax.jit
def _indices(X, S):
    d = X.shape[-1]
    h = jnp.einsum("...ad,de,...be->...ab", X, S, X) / jnp.sqrt(d)
    T = X.shape[-2]
    return h - jnp.trace(S) / jnp.sqrt(d) * jnp.eye(T, dtype=h.dtype)


def attention_indices(X: jax.Array, S: jax.Array) -> jax.Array:
    """Attention indices ``h_ab = x_a^T S x_b / sqrt(d) - delta_ab Tr(S)/sqrt(d)``, eq. (eq-h).

    Args:
        X: tokens, shape ``(..., T, d)``.
        S: symmetric matrix, shape ``(d, d)``.

    Returns:
        ``h``, shape ``(..., T, T)``, symmetric in its last two axes.
    """
    _checks.real_array("X", X, min_ndim=2)
    _checks.square_symmetric("S", S)
    if np.shape(X)[-1] != np.shape(S)[0]:
        raise ValueError(
            f"X and S must share d: X has shape {np.shape(X)}, S has shape {np.shape(S)}"
        )
    return _indices(jnp.asarray(X), jnp.asarray(S))


def symmetric_noise(key: jax.Array, shape: Sequence[int], noise: float) -> jax.Array:
    """Symmetric Gaussian noise, variance ``noise`` on the diagonal and ``noise/2`` off it.

    ``shape`` is ``(..., T, T)``. This is the noise convention of the noisy
    channel (chapter 1, section "The model"): ``Z = sqrt(noise) (G + G^T)/2`` with G iid
    N(0, 1); ``noise`` is the channel's ``Delta``, called ``noise`` throughout the package
    (``delta`` is reserved for the matrix-denoising noise of :mod:`aim_tutorial.rmt`).
    """
    _checks.prng_key("key", key)
    noise = _checks.nonnegative("noise", noise)
    shape = _shape_of_matrices("shape", shape)
    _checks.check_memory(f"symmetric_noise(shape={shape})", int(np.prod(shape)), _itemsize())
    G = jax.random.normal(key, shape)
    return jnp.sqrt(noise) * (G + jnp.swapaxes(G, -1, -2)) / 2


def softmax(h: jax.Array, beta: float) -> jax.Array:
    """Row-wise softmax ``exp(beta h_ab) / sum_c exp(beta h_ac)``, by log-sum-exp.

    ``beta`` finite and ``>= 0`` (its limit ``beta -> inf`` is :func:`hardmax`); ``h`` a finite
    real array with at least one axis.
    """
    beta = _checks.nonnegative("beta", beta)
    _checks.real_array("h", h, min_ndim=1)
    return jax.nn.softmax(beta * h, axis=-1)


def hardmax(h: jax.Array) -> jax.Array:
    """Row-wise hardmax: row ``a`` is the one-hot indicator of ``argmax_b h_ab`` (``h`` finite)."""
    _checks.real_array("h", h, min_ndim=1)
    h = jnp.asarray(h)
    return jax.nn.one_hot(jnp.argmax(h, axis=-1), h.shape[-1], dtype=h.dtype)


def apply_channel(h: jax.Array, channel: Channel = "softmax", *, beta: float = 1.0) -> jax.Array:
    """The noiseless output function ``g(h)`` of a single-layer channel.

    Args:
        h: attention indices, shape ``(..., T, T)``.
        channel: a registered name (``"softmax"``, ``"hardmax"``, ``"linear"``, ``"relu"``,
            ``"sigmoid"``), a :class:`~aim_tutorial.channels.Channel`, or a plain callable
            mapping one ``(T, T)`` matrix to one ``(T, T)`` matrix (vectorised here with ``vmap``).
        beta: inverse temperature of the softmax and the sigmoid, ``beta >= 0``.
    """
    beta = _checks.nonnegative("beta", beta)
    _checks.real_array("h", h, min_ndim=2)
    if np.shape(h)[-1] != np.shape(h)[-2]:
        raise ValueError(f"h must have shape (..., T, T), got {np.shape(h)}")
    h = jnp.asarray(h)
    chs = _channels()
    if callable(channel) and not isinstance(channel, chs.Channel):
        g = channel
        for _ in range(h.ndim - 2):
            g = jax.vmap(g)
        return g(h)
    return chs.get(channel).output(h, beta)


def deep_as_aim(hs: Sequence[jax.Array], *, beta: float = 1.0, c: float = 1.0) -> jax.Array:
    """Deep attention written as an AIM: the output from the indices ``h^1..h^L`` alone.

    ``B_0 = I``; ``A_l = B_{l-1} h^l B_{l-1}^T``; ``B_l = (c I + softmax_beta(A_l)) B_{l-1}``;
    output ``softmax_beta(A_L)``: the right-hand side of eq. (eq-deep).

    Args:
        hs: list of ``L`` arrays of shape ``(..., T, T)``.
        beta: inverse temperature, ``beta >= 0``.
        c: skip (residual) strength.
    """
    beta = _checks.nonnegative("beta", beta)
    c = _checks.finite("c", c)
    hs = _layers("hs", hs)
    for ell, h in enumerate(hs):
        _checks.real_array(f"hs[{ell}]", h, min_ndim=2)
        if np.shape(h)[-1] != np.shape(h)[-2] or np.shape(h) != np.shape(hs[0]):
            raise ValueError(f"hs[{ell}] must have the shape (..., T, T) of hs[0], {np.shape(hs[0])}, "
                             f"got {np.shape(h)}")
    out = _deep_forward([jnp.asarray(h) for h in hs], beta, c)
    if not (_checks._traced(out) or _checks._traced(beta) or _checks._traced(c)
            or any(_checks._traced(h) for h in hs)) and not bool(jnp.all(jnp.isfinite(out))):
        raise ValueError("deep_as_aim: the output is not finite although hs, beta and c are: B_l = (c I + P_l) "
                         "B_(l-1) grows like (1 + |c|)^l and beta A_l overflowed; use a smaller |c|, beta or hs")
    return out


def _deep_forward(hs, beta, c, log_outputs=False):
    """The forward pass of :func:`deep_as_aim` without checks (traceable; ``hs`` a sequence of
    ``(..., T, T)`` arrays, e.g. the rows of a stacked ``(L, ..., T, T)`` array); with
    ``log_outputs`` the log-probabilities of the last softmax (by log-sum-exp)."""
    T = hs[0].shape[-1]
    B = jnp.broadcast_to(jnp.eye(T, dtype=hs[0].dtype), hs[0].shape)
    for h in hs[:-1]:
        P = jax.nn.softmax(beta * (B @ h @ jnp.swapaxes(B, -1, -2)), axis=-1)
        B = (c * jnp.eye(T, dtype=h.dtype) + P) @ B
    last = jax.nn.log_softmax if log_outputs else jax.nn.softmax
    return last(beta * (B @ hs[-1] @ jnp.swapaxes(B, -1, -2)), axis=-1)


def deep_attention_literal(
    X: jax.Array, Ss: Sequence[jax.Array], *, beta: float = 1.0, c: float = 1.0
) -> jax.Array:
    """Deep attention computed layer by layer on the tokens, the first line of eq. (eq-deep).

    ``X_0 = X``; ``A_l = X_{l-1} S_l X_{l-1}^T / sqrt(d) - (Tr S_l / sqrt(d)) B_{l-1} B_{l-1}^T``;
    ``X_l = (c I + softmax_beta(A_l)) X_{l-1}``; output ``softmax_beta(A_L)``.
    Tracks ``B_{l-1}`` only to remove the divergent mean part of the attention.

    Args:
        X: tokens, shape ``(..., T, d)``: a NumPy or JAX array, or nested lists (converted to a
            JAX array, as ``jnp.asarray`` does; the result is that of the same array).
        Ss: list of ``L`` symmetric ``(d, d)`` matrices.
    """
    beta = _checks.nonnegative("beta", beta)
    c = _checks.finite("c", c)
    _checks.real_array("X", X, min_ndim=2)
    Ss = _layers("Ss", Ss)
    d = np.shape(X)[-1]
    for ell, S in enumerate(Ss):
        _checks.square_symmetric(f"Ss[{ell}]", S)
        if np.shape(S) != (d, d):
            raise ValueError(f"Ss[{ell}] must have shape (d, d) = {(d, d)} (d from X), got {np.shape(S)}")
    X = jnp.asarray(X)
    T = X.shape[-2]
    Xl = X
    B = jnp.broadcast_to(jnp.eye(T, dtype=X.dtype), X.shape[:-2] + (T, T))

    def attention(S):
        A = jnp.einsum("...ad,de,...be->...ab", Xl, S, Xl) / jnp.sqrt(d)
        return softmax(A - jnp.trace(S) / jnp.sqrt(d) * (B @ jnp.swapaxes(B, -1, -2)), beta)

    for S in Ss[:-1]:
        M = c * jnp.eye(T, dtype=X.dtype) + attention(jnp.asarray(S))
        Xl = M @ Xl
        B = M @ B
    return attention(jnp.asarray(Ss[-1]))


def _sampling_settings(key, n, T, beta, label_noise, log_outputs):
    """The settings :func:`sample_data` and :func:`sample_deep_data` share, checked (the key too)."""
    _checks.prng_key("key", key)
    return (_checks.integer_at_least("n", n, 1), _checks.integer_at_least("T", T, 1),
            _checks.positive("beta", beta), _checks.nonnegative("label_noise", label_noise),
            _checks.boolean("log_outputs", log_outputs))


def sample_data(
    key: jax.Array,
    S,
    n: int,
    T: int,
    *,
    channel: Channel = "softmax",
    beta: float = 1.0,
    noise: float = 0.0,
    label_noise: float = 0.0,
    log_outputs: bool = False,
):
    """Sample ``n`` sequences of the attention-indexed model, definition (def-aim) of chapter 1.

    Args:
        key: a ``jax.random`` key.
        S: the teacher, shape ``(d, d)``.
        n: number of samples, ``n >= 1``.
        T: tokens a sequence, ``T >= 1``.
        channel: a channel of the registry: its name (``"softmax"`` at inverse temperature
            ``beta``, ``"hardmax"``, ``"linear"`` (``y = h``), ``"relu"``, ``"sigmoid"``,
            ``"causal_softmax"``; :func:`aim_tutorial.channels.registered`) or a
            :class:`~aim_tutorial.channels.Channel` (its own label noise included), such as
            ``aim.generic_channel(g)`` for any map ``g`` of a ``(T, T)`` matrix or
            ``aim.elementwise_channel(f)`` for an entrywise one. Two attention layers are not a
            channel: their data come from :func:`sample_deep_data`.
        beta: inverse temperature, ``beta > 0`` (as everywhere in the package: the
            theory and GAMP-RIE need it; ``beta -> 0`` is the uniform output).
        noise: variance ``Delta >= 0`` of the Gaussian noise added to ``h``
            before ``g`` (``Delta`` on the diagonal, ``Delta/2`` off it).
        label_noise: variance of iid Gaussian noise added to every entry of
            ``y`` after ``g``, ``>= 0``.
        log_outputs: ``channel="softmax"`` only: return the log-probabilities
            ``log softmax(beta h)`` (computed by log-sum-exp, finite at any ``beta``) instead of the
            probabilities, whose small entries underflow to exactly 0 once ``beta |h_ab - h_ac|``
            exceeds about 745 (``beta >= 100`` at ``d`` of a few hundred). GAMP-RIE and the softmax
            score take them with ``log_outputs=True``.

    Returns:
        ``(X, y)`` of shapes ``(n, T, d)`` and ``(n, T, T)``.

    Raises:
        ValueError: an argument out of its range, a name that is not registered (``"deep"``
            included: :func:`sample_deep_data`), ``log_outputs`` with another channel.
        TypeError: a channel that is neither a name nor a ``Channel`` (a bare function: wrap it
            in ``aim.generic_channel`` or ``aim.elementwise_channel``).

    Example:
        >>> import jax, aim_tutorial as aim
        >>> S = aim.sample_teacher(jax.random.key(0), 20, 0.5)
        >>> X, y = aim.sample_data(jax.random.key(1), S, n=5, T=3)
        >>> X.shape, y.shape
        ((5, 3, 20), (5, 3, 3))
    """
    n, T, beta, label_noise, log_outputs = _sampling_settings(key, n, T, beta, label_noise, log_outputs)
    noise = _checks.nonnegative("noise", noise)
    chs = _channels()
    if isinstance(channel, str) and channel == "deep":
        raise ValueError("channel='deep' is not a channel of the registry: the data of two (or more) attention "
                         "layers come from aim.sample_deep_data(key, [S_1, ..., S_L], n, T, beta=..., c=...)")
    if isinstance(channel, str) and channel not in chs.registered():
        raise ValueError(f"channel must be one of {chs.registered()} or a Channel, got {channel!r}")
    if not isinstance(channel, (str, chs.Channel)):
        hint = (": wrap a function in aim.generic_channel(g) (any map of the (T, T) indices) or "
                "aim.elementwise_channel(f) (an entrywise one)" if callable(channel) else "")
        raise TypeError(f"channel must be a registered name or a Channel, got {type(channel).__name__}{hint}")
    if log_outputs and (not isinstance(channel, str) or channel != "softmax" or label_noise > 0):
        raise ValueError("log_outputs=True is defined for channel='softmax' without label_noise only "
                         f"(and for aim.sample_deep_data), got channel={channel!r}, label_noise={label_noise!r}")
    k_x, k_noise, k_label = jax.random.split(key, 3)
    if isinstance(S, (list, tuple)):
        raise ValueError("S must be one (d, d) matrix (the layers of deep attention: aim.sample_deep_data)")
    _checks.square_symmetric("S", S)
    d = np.shape(S)[0]
    X = sample_tokens(k_x, n, T, d)
    h = _indices(X, jnp.asarray(S))
    if noise > 0:
        h = h + symmetric_noise(k_noise, h.shape, noise)
    if log_outputs:
        y = jax.nn.log_softmax(beta * h, axis=-1)
    else:
        y = chs.get(channel).draw(jax.random.fold_in(k_label, 1), h, beta)
    if label_noise > 0:
        y = y + jnp.sqrt(label_noise) * jax.random.normal(k_label, y.shape)
    return X, y


def sample_deep_data(
    key: jax.Array,
    S,
    n: int,
    T: int,
    *,
    beta: float = 1.0,
    c: float = 1.0,
    label_noise: float = 0.0,
    log_outputs: bool = False,
):
    """Sample ``n`` sequences of deep attention, ``L`` softmax layers with skip strength ``c`` (chapter 7).

    The tokens and the label noise are drawn from ``key`` as :func:`sample_data` draws them (one
    layer gives its softmax data, bit for bit); the outputs are :func:`deep_as_aim` of the ``L``
    layers' attention indices.

    Args:
        key: a ``jax.random`` key.
        S: the teachers, a list ``[S_1, ..., S_L]`` of ``(d, d)`` symmetric matrices, ``L >= 1``.
        n: number of samples, ``n >= 1``.
        T: tokens a sequence, ``T >= 1``.
        beta: inverse temperature of every layer, ``beta > 0``.
        c: skip strength, finite.
        label_noise: variance of iid Gaussian noise added to every entry of ``y``, ``>= 0``.
        log_outputs: return the logs of the last layer's attention ``A_L`` (computed by
            log-sum-exp: finite at any ``beta``), whose entries are exactly 1 or lost to rounding
            beside 1 from about 37 on (two-layer outputs at ``beta = 1``, ``d = 60``); two-layer
            GAMP-RIE (:func:`aim_tutorial.deep.deep_gamp_rie`) takes them with ``log_outputs=True``.
            Not with ``label_noise``.

    Returns:
        ``(X, y)`` of shapes ``(n, T, d)`` and ``(n, T, T)``.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> Ss = aim.deep.sample_deep_teacher(jax.random.key(0), 20, [0.5, 0.5])
        >>> X, y = aim.sample_deep_data(jax.random.key(1), Ss, n=5, T=3, c=1.0)
        >>> X.shape, y.shape
        ((5, 3, 20), (5, 3, 3))
    """
    n, T, beta, label_noise, log_outputs = _sampling_settings(key, n, T, beta, label_noise, log_outputs)
    c = _checks.finite("c", c)
    if log_outputs and label_noise > 0:
        raise ValueError(f"log_outputs=True is defined without label_noise only, got label_noise={label_noise!r}")
    if not isinstance(S, (list, tuple)):
        raise ValueError("S must be a list [S_1, ..., S_L] of (d, d) matrices, one a layer")
    Ss = list(S)
    if len(Ss) < 1:
        raise ValueError("S must hold at least one layer (L >= 1)")
    for ell, S_l in enumerate(Ss):
        _checks.square_symmetric(f"S[{ell}]", S_l)
        if np.shape(S_l) != np.shape(Ss[0]):
            raise ValueError(f"S[{ell}] must have the shape of S[0], {np.shape(Ss[0])}, got {np.shape(S_l)}")
    k_x, _, k_label = jax.random.split(key, 3)  # the keys of sample_data (no noise on h here)
    d = np.shape(Ss[0])[0]
    X = sample_tokens(k_x, n, T, d)
    hs = [_indices(X, jnp.asarray(S_l)) for S_l in Ss]
    y = _deep_forward(hs, beta, c, log_outputs=True) if log_outputs else deep_as_aim(hs, beta=beta, c=c)
    if label_noise > 0:
        y = y + jnp.sqrt(label_noise) * jax.random.normal(k_label, y.shape)
    return X, y


# ---------------------------------------------------------------------------
# one instance of the learning problem: the sizes, the teacher, the data, one key scheme


def n_samples(alpha: float, d: int) -> int:
    """Number of samples ``n = round(alpha d^2)`` (at least 1) at sample complexity ``alpha``.

    Args:
        alpha: sample complexity ``n / d^2``, finite and ``> 0``.
        d: embedding dimension, ``d >= 1``.

    Example:
        >>> import aim_tutorial as aim
        >>> aim.n_samples(0.1, 50)
        250
    """
    alpha = _checks.positive("alpha", alpha)
    d = _checks.integer_at_least("d", d, 1)
    return max(1, int(round(alpha * d * d)))


def _sample_teachers(key, d, rhos) -> list:
    """One teacher a layer, from ``key`` split in ``len(rhos)`` (:func:`aim_tutorial.deep.sample_deep_teacher`)."""
    return [sample_teacher(k, d, r) for k, r in zip(jax.random.split(key, len(rhos)), rhos)]


class Instance(NamedTuple):
    """One instance of the learning problem, from :func:`make_instance`.

    Attributes:
        S: the teacher ``(d, d)``; for ``channel="deep"`` the list ``[S_1, ..., S_L]``.
        X: tokens ``(n, T, d)``.
        y: outputs ``(n, T, T)``.
        n: number of samples, ``round(alpha d^2)``.
        key: a key for the algorithm run on the instance (its initialisation),
            independent of the keys of ``S`` and ``(X, y)``.
    """

    S: object
    X: jax.Array
    y: jax.Array
    n: int
    key: jax.Array


def make_instance(key: jax.Array, d: int, rho, alpha: float, T: int = 2, *,
                  channel: Channel = "softmax", beta: float = 1.0, noise: float = 0.0,
                  c: float = 1.0, label_noise: float = 0.0, log_outputs: bool = False) -> Instance:
    """Teacher, data and sizes of one instance, with the package's one key scheme.

    ``key`` is split in three: the teacher (:func:`sample_teacher`, or one teacher a layer
    for ``channel="deep"``), the data (:func:`sample_data`, or :func:`sample_deep_data` for
    ``channel="deep"``; ``n = round(alpha d^2)`` samples) and the algorithm (``Instance.key``).
    Every experiment of the book, ``reproduce`` and ``scripts/`` builds its instances this way,
    so an instance is named by its key alone.

    Args:
        key: a ``jax.random`` key.
        d: embedding dimension, ``d >= 1``.
        rho: width ratio ``r/d > 0``; for ``channel="deep"`` a list of ratios, one a layer.
        alpha: sample complexity ``n / d^2 > 0``.
        T: tokens a sequence, ``>= 1``.
        channel: as :func:`sample_data`, or ``"deep"``: two or more softmax layers
            (:func:`sample_deep_data`, skip strength ``c``).
        beta, noise, label_noise, log_outputs: as :func:`sample_data`; ``c``: as
            :func:`sample_deep_data` (``channel="deep"`` only).

    Returns:
        :class:`Instance` ``(S, X, y, n, key)``.

    Example:
        >>> import jax, aim_tutorial as aim
        >>> inst = aim.make_instance(jax.random.key(0), 20, 0.5, 0.1, T=3)
        >>> inst.S.shape, inst.X.shape, inst.y.shape, inst.n
        ((20, 20), (40, 3, 20), (40, 3, 3), 40)
    """
    key = _checks.prng_key("key", key)
    d = _checks.integer_at_least("d", d, 1)
    n = n_samples(alpha, d)
    k_teacher, k_data, k_algorithm = jax.random.split(key, 3)
    if isinstance(channel, str) and channel == "deep":
        if noise > 0:
            raise ValueError("noise must be 0 for channel='deep' (noise on h is defined for one layer)")
        S = _sample_teachers(k_teacher, d, _layers("rho", rho))
        X, y = sample_deep_data(k_data, S, n, T, beta=beta, c=c, label_noise=label_noise, log_outputs=log_outputs)
    else:
        S = sample_teacher(k_teacher, d, rho)
        X, y = sample_data(k_data, S, n, T, channel=channel, beta=beta, noise=noise, label_noise=label_noise,
                           log_outputs=log_outputs)
    return Instance(S, X, y, n, k_algorithm)
