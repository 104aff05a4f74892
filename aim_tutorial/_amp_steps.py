"""The jitted half-iteration of GAMP-RIE and its products in blocks of samples (private to :mod:`aim_tutorial.amp`).

The quadratic forms ``x_a^T S x_b``, the prior input, the compiled half-step (``omega``, the output
score, ``q_hat`` and the prior input, eqs. (amp-omega)-(amp-prior) of chapter 5) and the prior step
``S_new = O diag(xi) O^T``. Split out of ``amp.py`` (issue 49); ``amp`` imports these names back
(``aim_tutorial.amp._quadratic_forms`` is the same object). The block sizes
:data:`BLOCK_BYTES` and :data:`UNBLOCKED_BYTES` are read here: a test or benchmark that changes
them sets them on this module.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from .config import algorithm_products, compiled_flops, gamp_jit


def _channels():
    return importlib.import_module("aim_tutorial.channels")


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


BLOCK_BYTES = 4 * 2**20  # the tokens of one block of samples, on a CPU
UNBLOCKED_BYTES = 16 * 2**20  # all samples at once up to these tokens


_UNBLOCKED = threading.local()  # .on: trace without blocks (for XLA's count of operations)


@contextlib.contextmanager
def _unblocked():
    """Programs traced in this context take all samples at once. XLA's cost analysis counts the
    body of a loop once, not once per block, so the count of operations comes from these."""
    _UNBLOCKED.on = True
    try:
        yield
    finally:
        _UNBLOCKED.on = False


def _block_rows(X) -> int:
    """How many samples of ``X`` ``(n, T, d)`` the ``O(n T d^2)`` products take at a time.

    On a CPU, when the tokens take more than :data:`UNBLOCKED_BYTES`, blocks of about
    :data:`BLOCK_BYTES` of tokens: one product over all ``n`` samples writes temporaries so large
    that the C library maps them afresh at every call (zero-filled by the kernel, and out of
    cache); below 16 MB the sums keep their order. On a GPU or TPU all samples are done at once
    (``n``): its allocator keeps its buffers, and small blocks would leave it idle. Measured:
    the benchmarks page, ``benchmarks/design_history.json``.
    """
    n, T, d = X.shape
    itemsize = jnp.dtype(X.dtype).itemsize
    if jax.default_backend() != "cpu" or n * T * d * itemsize <= UNBLOCKED_BYTES or getattr(_UNBLOCKED, "on", False):
        return n
    return max(1, BLOCK_BYTES // (T * d * itemsize))


@gamp_jit
@algorithm_products
def _quadratic_forms(X, S):
    """``F[n, a, b] = x_a^T S x_b`` for tokens ``X`` ``(n, T, d)`` and a symmetric ``S``: one
    ``(n T, d) x (d, d)`` product, then the ``T^2`` dot products of each sample, in blocks of
    samples on a CPU when ``X`` is large (:func:`_block_rows`).

    A jitted function of its own, called before the rest of the half step: in one program with
    the elementwise operations that follow it XLA fuses them and the product slows down. The sum
    is a broadcast product, not ``einsum("nad,nbd->nab")``, which XLA runs as ``n`` tiny
    products one at a time. Measured: the benchmarks page, ``benchmarks/design_history.json``.
    """
    n, T, d = X.shape

    def forms(x):
        k = x.shape[0]
        XS = (x.reshape(k * T, d) @ S).reshape(k, T, d)
        return jnp.sum(XS[:, :, None, :] * x[:, None, :, :], axis=-1)

    m = _block_rows(X)
    if m >= n:
        return forms(X)
    C = n // m

    def block(i, F):  # slices of X in the loop: a reshape of X[:C m] would copy it
        return jax.lax.dynamic_update_slice_in_dim(F, forms(jax.lax.dynamic_slice_in_dim(X, i * m, m)), i * m, 0)

    F = jax.lax.fori_loop(0, C, block, jnp.zeros((n, T, T), X.dtype))
    return F if C * m == n else F.at[C * m:].set(forms(X[C * m:]))


def _prior_input(X, Gamma):
    """:func:`prior_input` without the checks (inside the jitted iteration)."""
    n, T, d = X.shape

    def part(x, g):
        # Gamma_mu X_mu as T^2 scaled rows, not as an einsum or a broadcast of X: XLA shares a
        # broadcast of X between this and omega and writes it out (266 MB at d = 400)
        k = x.shape[0]
        GX = jnp.stack([sum(g[:, a, b, None] * x[:, b] for b in range(T)) for a in range(T)], axis=1)
        return GX.reshape(k * T, d).T @ x.reshape(k * T, d)

    m = _block_rows(X)
    if m >= n:
        B = part(X, Gamma)
    else:
        C = n // m

        def block(i, acc):
            return acc + part(jax.lax.dynamic_slice_in_dim(X, i * m, m), jax.lax.dynamic_slice_in_dim(Gamma, i * m, m))

        B = jax.lax.fori_loop(0, C, block, jnp.zeros((d, d), X.dtype))
        if C * m < n:
            B = B + part(X[C * m:], Gamma[C * m:])
    B = (B + B.T) / 2
    return B - jnp.sum(jnp.trace(Gamma, axis1=-2, axis2=-1)) * jnp.eye(d, dtype=X.dtype)


@functools.lru_cache(maxsize=None)
def _make_half_step(channel, beta: float, noise: float, score: str, q_hat_from: str = "square",
                    log_outputs: bool = False):
    """Jitted output half of an iteration for one channel (cached per channel settings); with
    ``log_outputs`` ``y`` holds ``log y`` (the channel's ``log_score``)."""
    channel = _channels().get(channel)
    channel_score = channel.log_score if log_outputs else channel.score

    def score_fn(y, omega, V):
        # in omega's dtype: a channel's float64 constants (quadrature nodes) would promote float32
        G = channel_score(y, omega, V + noise / 2, beta, score).astype(omega.dtype)
        return (G + jnp.swapaxes(G, -1, -2)) / 2

    def rest(forms, X, y, S_hat, c, Gamma_old, omega_old, V_old, damping, alpha):
        n, T, d = X.shape
        sqd = jnp.sqrt(jnp.asarray(d, X.dtype))
        eye_T = jnp.eye(T, dtype=X.dtype)
        omega_new = (
            forms / sqd
            - jnp.trace(S_hat) / sqd * eye_T
            - 2.0 * c * Gamma_old
        )
        omega = damping * omega_old + (1.0 - damping) * omega_new
        V = damping * V_old + (1.0 - damping) * c
        # the score and its derivatives along the free entries: one evaluation of the score,
        # then its linearisation applied to each direction (forward mode)
        Gamma, score_lin = jax.linearize(lambda w: score_fn(y, w, V), omega)
        q_hat_square = 4.0 * alpha * jnp.mean(jnp.sum(Gamma**2, axis=(-2, -1)))
        # -E[dg/domega] over the T(T+1)/2 free entries (a <= b), by forward-mode autodiff
        iu, ju = np.triu_indices(T)
        E = np.zeros((len(iu), T, T))
        E[np.arange(len(iu)), iu, ju] = 1.0
        E[np.arange(len(iu)), ju, iu] = 1.0
        pick = np.zeros((len(iu), T, T))
        pick[np.arange(len(iu)), iu, ju] = 1.0

        dG = jax.vmap(lambda Ek: score_lin(jnp.broadcast_to(Ek, omega.shape)))(jnp.asarray(E, omega.dtype))  # (K, n, T, T)
        # 2 sum_a dg_aa/domega_aa + sum_{a<b} dg_ab/domega_ab, with g_aa = Gamma_aa, g_ab = 2 Gamma_ab
        q_hat_derivative = -4.0 * alpha * jnp.mean(jnp.einsum("knab,kab->n", dG, jnp.asarray(pick, omega.dtype)))
        q_hat = q_hat_square if q_hat_from == "square" else q_hat_derivative
        # on the Nishimori line E g^2 = -E g': the ratio is 1 up to finite-size corrections
        ratio = q_hat_square / q_hat_derivative
        R = S_hat + _prior_input(X, (2.0 / (q_hat * d**1.5)) * Gamma)
        lam, O = jnp.linalg.eigh(R)
        return omega, V, Gamma, q_hat, lam, O, ratio

    return _HalfStep(algorithm_products(rest))


class _HalfStep:
    """The output half of an iteration: :func:`_quadratic_forms` (``O(n T d^2)``), then the jitted
    rest (the score, ``q_hat``, ``B`` in ``O(n T d^2)`` and the eigendecomposition of ``R``), two
    programs (see :func:`_quadratic_forms` for why). ``step(X, y, S_hat, c, Gamma_old, omega_old,
    V_old, damping, alpha)`` returns ``(omega, V, Gamma, q_hat, lam, O, ratio)``."""

    def __init__(self, rest_fn):
        self._rest_fn = rest_fn  # the Python function, for programs traced anew (flops)
        self.rest = gamp_jit(rest_fn)

    def __call__(self, X, y, S_hat, *args):
        return self.rest(_quadratic_forms(X, S_hat), X, y, S_hat, *args)

    def _compiled(self, X, y, S_hat, *args, fresh: bool = False):
        forms = jax.eval_shape(_quadratic_forms, X, S_hat)
        if not fresh:
            return [_quadratic_forms.lower(X, S_hat).compile(), self.rest.lower(forms, X, y, S_hat, *args).compile()]
        # new functions, so that JAX traces them again (its trace cache is per function)
        quad, rest = _quadratic_forms.__wrapped__, self._rest_fn
        return [gamp_jit(lambda *a: quad(*a)).lower(X, S_hat).compile(),
                gamp_jit(lambda *a: rest(*a)).lower(forms, X, y, S_hat, *args).compile()]

    def flops(self, X, y, S_hat, *args) -> float:
        """XLA's count of the floating-point operations of one call (its cost analysis), of the
        programs over all samples at once: the count of a program in blocks has its loop's body once."""
        with _unblocked():
            return float(sum(compiled_flops(c) for c in self._compiled(X, y, S_hat, *args, fresh=True)))

    def temp_bytes(self, X, y, S_hat, *args) -> Optional[int]:
        """The temporaries of one call, in bytes: the larger of the two programs' (XLA's memory
        analysis) plus the forms handed from one to the other; ``None`` where the backend has
        no memory analysis."""
        mems = [c.memory_analysis() for c in self._compiled(X, y, S_hat, *args)]
        if any(m is None for m in mems):
            return None
        n, T, _ = np.shape(X)
        return int(max(m.temp_size_in_bytes for m in mems) + n * T * T * jnp.dtype(X.dtype).itemsize)


@gamp_jit
@algorithm_products
def _prior_step(O, xi, S_hat, S_true):
    """``S_new = O diag(xi) O^T``, the residual ``||S_new - S_hat||^2/d`` and the error against ``S_true``."""
    d = S_hat.shape[0]
    S_new = (O * xi) @ O.T
    S_new = (S_new + S_new.T) / 2
    residual = jnp.sum((S_new - S_hat) ** 2) / d
    error = jnp.sum((S_new - S_true) ** 2) / d
    return S_new, residual, error, jnp.all(jnp.isfinite(S_new))
