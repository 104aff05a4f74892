"""The causal softmax channel: ``y_ab = softmax_{b <= a}(beta h_ab)``, 0 above the diagonal.

A decoder's causal mask: token ``a`` attends to tokens ``b <= a`` only. Row ``a`` of ``y`` fixes
``h_a1, ..., h_aa`` up to one constant ``c_a`` (through the log-ratios
``phi_ab = (log y_ab - log y_aa) / beta = h_ab - h_aa``), and the entries below and on the diagonal
belong to one row each. So ``h = M + sum_a c_a E_a`` with ``M_ab = M_ba = phi_ab`` (``b <= a``)
and ``E_a`` the symmetric 0/1 matrix with ones at ``(a, b)`` and ``(b, a)``, ``b <= a``: the
``E_a`` have disjoint supports and ``||E_a||_F^2 = 2a - 1`` (``a = 1, ..., T``). With the Gaussian
density of ``h``, ``exp(-||h - omega||_F^2 / (4 V'))``, integrating out each ``c_a`` gives

    c*_a = <omega - M, E_a>_F / (2a - 1),   R = M + sum_a c*_a E_a - omega,
    log Z_out = -||R||_F^2 / (4 V') - (T(T - 1)/4) log V' + const,   Gamma = R / (2 V'),

a Gaussian over the ``T(T+1)/2 - T = T(T-1)/2`` measured directions (the first row, ``y_11 = 1``,
says nothing). Hence ``q_hat / alpha = T(T-1) / V'`` and ``E log Z_out = -(T(T-1)/4) log V'``:
the state evolution of the causal softmax at ``alpha`` is the softmax's at
``alpha T(T-1) / (T^2 + T - 2)``, at every ``beta`` and noise, and its noiseless
perfect-recovery threshold is ``(2 rho - rho^2) / (T(T-1))`` (:func:`counting.alpha_scale` with
``kind="causal"``). ``T = 1`` carries no information. The error on the outputs is half the
softmax's at ``T = 2`` (only row 2 is random), Monte Carlo beyond. There are no ``log_outputs``: the
masked entries have ``log y = -inf``, and the softmax's log-outputs machinery is not extended to them
(at large ``beta`` probabilities on and below the diagonal underflow and :func:`check_outputs` refuses
them by name). Chapter 8 (``book/08_attention_in_practice.md``).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from .. import _checks
from ..counting import alpha_scale, dof_fraction
from .base import Channel, frob_sq, register, symmetric_gaussian

__all__ = [
    "CAUSAL_SOFTMAX",
    "causal_softmax",
    "log_ratio_matrix",
    "residual",
]

_LOG_2PI = math.log(2.0 * math.pi)


def _lower(T):
    """The causal mask: ``True`` at ``b <= a``."""
    return jnp.tril(jnp.ones((T, T), dtype=bool))


def causal_softmax(h, beta=1.0):
    """``y_ab = exp(beta h_ab) / sum_{c <= a} exp(beta h_ac)`` for ``b <= a``, 0 above the diagonal.

    Args:
        h: attention indices, a finite real array of shape ``(..., T, T)``, ``T >= 1`` (checked when
            concrete; traceable under ``jit`` and ``grad``).
        beta: inverse temperature, finite and ``>= 0``.

    Raises:
        ValueError or TypeError naming ``h`` or ``beta``: a shape that is not ``(..., T, T)``, non-finite
        entries, ``beta < 0``.

    Example:
        >>> import jax.numpy as jnp
        >>> from aim_tutorial.channels.causal import causal_softmax
        >>> y = causal_softmax(jnp.array([[0.0, 5.0], [1.0, 1.0]]))
        >>> [[float(v) for v in row] for row in y]
        [[1.0, 0.0], [0.5, 0.5]]
    """
    if not isinstance(beta, jax.core.Tracer):
        beta = _checks.nonnegative("beta", beta)
    if not isinstance(h, jax.core.Tracer):
        _checks.real_array("h", h, min_ndim=2)
        if np.shape(h)[-1] != np.shape(h)[-2]:
            raise ValueError(f"h must have shape (..., T, T), got {np.shape(h)}")
        h = jnp.asarray(h, dtype=jnp.float64)
    return _output(h, beta)


def _output(h, beta):
    T = h.shape[-1]
    L = _lower(T)
    z = jnp.where(L, beta * h, -jnp.inf)
    z = z - jax.lax.stop_gradient(jnp.max(z, axis=-1, keepdims=True))
    e = jnp.where(L, jnp.exp(jnp.where(L, z, 0.0)), 0.0)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def log_ratio_matrix(y, beta):
    """``M`` with ``h = M + sum_a c_a E_a``: ``M_ab = M_ba = (log y_ab - log y_aa) / beta``, ``b <= a``.

    Args:
        y: causal-softmax outputs, shape ``(..., T, T)`` (JAX-traceable; not checked here: the
            public functions that take ``y`` check it).
        beta: inverse temperature ``> 0``.

    Example:
        >>> import jax.numpy as jnp
        >>> from aim_tutorial.channels.causal import causal_softmax, log_ratio_matrix
        >>> h = jnp.array([[0.3, 1.0], [1.0, -0.5]])
        >>> M = log_ratio_matrix(causal_softmax(h), 1.0)   # h - M = c_1 E_1 + c_2 E_2
        >>> [round(float(v), 6) for v in (M[1, 0], M[0, 1], M[1, 1])]
        [1.5, 1.5, 0.0]
    """
    T = y.shape[-1]
    L = _lower(T)
    logy = jnp.log(jnp.where(L, y, 1.0))  # the masked entries are never read
    diag = jnp.diagonal(logy, axis1=-2, axis2=-1)[..., :, None]
    phi = jnp.where(L, (logy - diag) / beta, 0.0)
    return phi + jnp.swapaxes(jnp.where(jnp.eye(T, dtype=bool), 0.0, phi), -1, -2)


def _block_of(T):
    """``A -> (<A, E_a>_F)_a`` and ``c -> sum_a c_a E_a``, as (T, T) index data."""
    idx = np.maximum.outer(np.arange(T), np.arange(T))  # entry (i, j) belongs to E_{max(i, j)}
    return jnp.asarray(idx), jnp.asarray(2.0 * np.arange(T) + 1.0)  # ||E_a||^2 = 2a - 1 (a from 1)


def residual(y, omega, beta):
    """``R = M + sum_a c*_a E_a - omega``: the part of ``M - omega`` that ``y`` measures."""
    T = omega.shape[-1]
    idx, norms = _block_of(T)
    D = omega - log_ratio_matrix(y, beta)
    onehot = jax.nn.one_hot(idx, T, dtype=D.dtype)  # (T, T, T): [i, j, a] = 1 if (i, j) in E_a
    c = jnp.einsum("...ij,ija->...a", D, onehot) / norms
    return jnp.einsum("...a,ija->...ij", c, onehot) - D


def _gauss_norm(T, Vp):
    """``log`` normalisation: the Gaussian of the ``T(T+1)/2`` entries with each ``c_a`` integrated out."""
    D = T * (T + 1) / 2
    out = -D / 2 * _LOG_2PI - T / 2 * jnp.log(2 * Vp) - T * (T - 1) / 4 * jnp.log(Vp)
    for a in range(1, T + 1):
        out = out + 0.5 * jnp.log(4 * math.pi * Vp / (2 * a - 1))
    return out


def _score(y, omega, Vp, beta, score):
    return residual(y, omega, beta) / (2 * Vp)


def _log_partition(y, omega, Vp, beta):
    T = omega.shape[-1]
    return _gauss_norm(T, Vp) - frob_sq(residual(y, omega, beta)) / (4 * Vp)


_ATOL = 1e-6  # the rows on and below the diagonal sum to 1 to this


def _check_outputs(name, y, beta, log_outputs):
    yn = np.asarray(y, dtype=float)
    T = yn.shape[-1]
    upper = np.triu(np.ones((T, T), dtype=bool), 1)
    if np.any(yn[..., upper] != 0):
        raise ValueError(f"{name} must be causal-softmax outputs: 0 above the diagonal (b > a), "
                         f"got nonzero entries there")
    low = yn[..., ~upper]
    if np.any(low < 0):
        raise ValueError(f"{name} must be causal-softmax outputs: its entries on and below the diagonal "
                         f"are probabilities, got negative entries")
    if np.any(low == 0):
        raise ValueError(f"{name} has entries exactly 0 on or below the diagonal: causal-softmax "
                         f"probabilities that underflowed (beta |h_ab - h_ac| beyond about 745), whose "
                         f"log-ratios are lost")
    _checks.row_stochastic(name, y, atol=_ATOL)


def _H(q, Vp, T, beta, score):
    return alpha_scale(T, "causal") / Vp


def _ElogZ(q, Vp, T, beta):
    return -alpha_scale(T, "causal") / 4 * np.log(Vp)


def _perfect(rho, T, beta, noise):
    return dof_fraction(rho) / alpha_scale(T, "causal") if noise == 0 else None


@functools.partial(jax.jit, static_argnames=("T", "n_omega"))
def _label_mc_jit(key, q, Vp, T, beta, n_omega):
    k1, k2 = jax.random.split(key)
    om = jnp.sqrt(q) * symmetric_gaussian(k1, (n_omega, 1, T, T))
    h = om + jnp.sqrt(Vp) * symmetric_gaussian(k2, (n_omega, 64, T, T))
    y = _output(h, beta)
    A = jnp.mean(jnp.sum(y * y, axis=(-1, -2)), axis=1)
    ybar = jnp.mean(y, axis=1)
    B = jnp.sum(ybar * ybar, axis=(-1, -2))
    return jnp.mean(A - B) * 64 / 63  # unbiased E tr Cov(y | omega)


def _label_error(q, Vp, T, beta, key, n_samples):
    """``T = 2``: half the softmax's ``T = 2`` quadrature (row 1 is ``(1, 0)``, row 2 is the softmax's
    row ``(sigmoid(beta x), 1 - sigmoid(beta x))``, ``x = h_21 - h_22`` of variance 3); ``T > 2`` by
    Monte Carlo (``key``)."""
    qq, Vp = np.asarray(q, dtype=float), np.asarray(Vp, dtype=float)
    if T == 2:
        from .softmax import SOFTMAX

        return SOFTMAX.label_error(qq, Vp, 2, beta, None, n_samples) / 2
    if key is None:
        raise ValueError("key must be a jax.random key for channel='causal_softmax' with T > 2 (Monte Carlo)")
    n_samples = _checks.integer_at_least("n_samples", n_samples, 64)
    return np.vectorize(lambda qv, vv: float(_label_mc_jit(key, qv, vv, T, beta, n_samples // 64)))(qq, Vp)


def _check(T, beta, noise, score):
    if T < 2:
        raise ValueError("T must be >= 2 for channel='causal_softmax' (T = 1 carries no information: y = 1)")


CAUSAL_SOFTMAX = register(Channel(
    name="causal_softmax", summary="y = softmax(beta h) over b <= a, row-wise (causal mask)",
    output=_output, score=_score, log_partition=_log_partition, se_H=_H, se_ElogZ=_ElogZ,
    perfect_recovery=_perfect, label_error=_label_error, check=_check, check_outputs=_check_outputs,
    uses_beta=True))
