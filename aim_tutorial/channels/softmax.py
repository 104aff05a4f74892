"""The softmax channel: ``y = softmax(beta h)`` row by row, any ``T``, any ``beta > 0``.

``y`` fixes ``h`` up to one constant ``c 11^T``: ``h = c 11^T + M`` with ``M`` built from
the log-ratios ``phi_ab = (log y_ab - log y_aT) / beta`` (never by dividing small
probabilities), ``M_ab = phi_Ta + phi_ab``. Hence ``Gamma = (c* 11^T + M - omega) / (2 V')``
with ``c* = mean(omega - M)`` over the ``T^2`` entries, eq. (rep-softmax-zout), and
``q_hat / alpha = (T^2 + T - 2) / V'``: the error depends on ``alpha (T^2 + T - 2)`` only,
not on ``beta``. Chapter 4; reference: arXiv 2506.01582.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import expit

from .. import _checks
from .base import Channel, frob_sq, gauss_norm, register, symmetric_gaussian
from ..counting import alpha_scale, dof_fraction

__all__ = [
    "SOFTMAX",
    "residual",
    "label_mc",
]


def _M(y, beta):
    """``M`` with ``h = c 11^T + M`` from softmax outputs (log-ratios from logs)."""
    return _M_log(jnp.log(y), beta)


def _M_log(logy, beta):
    """``M`` from the log-probabilities ``log y`` (finite at any ``beta``, :func:`_M` without the log)."""
    phi = (logy - logy[..., -1:]) / beta  # phi_ab = h_ab - h_aT, phi_aT = 0
    M = phi[..., -1, :][..., :, None] + phi  # M_ab = phi_Ta + phi_ab
    return (M + jnp.swapaxes(M, -1, -2)) / 2


def residual(y, omega, beta, log_outputs=False):
    M = _M_log(y, beta) if log_outputs else _M(y, beta)
    cstar = jnp.mean(omega - M, axis=(-1, -2), keepdims=True)
    return cstar + M - omega


def _score(y, omega, Vp, beta, score):
    return residual(y, omega, beta) / (2 * Vp)


def _log_partition(y, omega, Vp, beta):
    T = omega.shape[-1]
    return gauss_norm(T, Vp, T * (T + 1) // 2 - 1) - frob_sq(residual(y, omega, beta)) / (4 * Vp)


def _log_score(logy, omega, Vp, beta, score):
    return residual(logy, omega, beta, log_outputs=True) / (2 * Vp)


def _log_log_partition(logy, omega, Vp, beta):
    T = omega.shape[-1]
    return gauss_norm(T, Vp, T * (T + 1) // 2 - 1) - frob_sq(residual(logy, omega, beta, True)) / (4 * Vp)


_ATOL = 1e-6  # rows of probabilities sum to 1, rows of log-probabilities have log-sum-exp 0, to this


def _check_outputs(name, y, beta, log_outputs):
    yn = np.asarray(y, dtype=float)
    if log_outputs:
        if np.any(yn > 0):
            raise ValueError(f"{name} must hold log-probabilities (log_outputs=True): it has positive entries "
                             f"(probabilities? pass log_outputs=False, or the logs)")
        lse = np.logaddexp.reduce(yn, axis=-1)
        err = float(np.max(np.abs(lse))) if lse.size else 0.0
        if err > _ATOL:
            raise ValueError(f"{name} must hold log-probabilities (log_outputs=True): the log-sum-exp of its rows "
                             f"is 0 +- {err:.3g}, not 0")
        return
    if np.any(yn < 0):
        raise ValueError(f"{name} must be row-stochastic (softmax outputs): it has negative entries")
    if np.any(yn == 0):
        one_hot = bool(np.all((yn == 0) | (yn == 1)))
        raise ValueError(
            f"{name} has entries exactly 0: softmax probabilities that underflowed (beta |h_ab - h_ac| "
            f"beyond about 745), whose log-ratios are lost. Pass the log-probabilities instead: "
            f"sample_data(..., log_outputs=True) and log_outputs=True here"
            + (" (all its rows are one-hot: if they are hardmax outputs, use channel='hardmax')" if one_hot else ""))
    _checks.row_stochastic(name, y, atol=_ATOL)


def _H(q, Vp, T, beta, score):
    return alpha_scale(T) / Vp


def _ElogZ(q, Vp, T, beta):
    return -alpha_scale(T) / 4 * np.log(Vp)


def _perfect(rho, T, beta, noise):
    return dof_fraction(rho) / alpha_scale(T) if noise == 0 else None


_GL8_X, _GL8_W = np.polynomial.legendre.leggauss(8)
_STEP = np.array([-60.0, -30, -15, -8, -4, -2, -1, 0, 1, 2, 4, 8, 15, 30, 60])  # breaks, in widths of the step
_BASE = np.linspace(-12.0, 12.0, 25)  # breaks over +-12 standard deviations


def _normal_rule(center, width):
    """Composite 8-point Gauss-Legendre nodes ``z`` and weights of a standard normal average over
    ``|z| <= 12`` (mass outside 2e-33), with breaks at ``center + width * _STEP`` besides the base
    ones, so that every panel holds a smooth piece of an integrand with one sharp step of width
    ``width`` at ``center``. ``center``, ``width``: shape ``(n,)``; nodes and weights ``(n, 8 * 38)``."""
    br = np.clip(center[:, None] + width[:, None] * _STEP, -12.0, 12.0)
    e = np.sort(np.concatenate([np.broadcast_to(_BASE, (len(center), _BASE.size)), br], axis=1), axis=1)
    a, b = e[:, :-1, None], e[:, 1:, None]
    z = ((a + b) / 2 + (b - a) / 2 * _GL8_X).reshape(len(center), -1)
    w = ((b - a) / 2 * _GL8_W).reshape(len(center), -1) * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return z, w


def _label_error_T2(q, Vp, beta):
    """``4 E_u Var(sigmoid(beta x) | u)``, ``x = u + s z``, ``u ~ N(0, 3q)``, ``s^2 = 3V'``: the
    output error of the softmax at ``T = 2`` (each row is ``(sigmoid(beta x), 1 - sigmoid(beta x))``,
    ``x = h_11 - h_12`` of variance 3). Nested composite Gauss-Legendre rules
    (:func:`_normal_rule`) with breaks at the sigmoid's step, of width ``1 / (beta s)`` in ``z``,
    and at the width ``s + 1/beta`` of the variance in ``u``: fixed Gauss-Hermite rules miss the
    step once ``beta s`` is large (160 nodes: -16 % at ``beta = 50``, ``V' = 0.01``)."""
    qq, Vp = np.broadcast_arrays(np.asarray(q, dtype=float), np.asarray(Vp, dtype=float))
    out = np.zeros(qq.shape)
    for idx in np.ndindex(qq.shape):
        a, s = math.sqrt(3 * qq[idx]), math.sqrt(3 * Vp[idx])
        if a > 0:
            zu, wu = _normal_rule(np.zeros(1), np.array([(s + 1 / beta) / a]))
            u, wu = a * zu[0], wu[0]
        else:
            u, wu = np.zeros(1), np.ones(1)
        z, w = _normal_rule(-u / s, np.full(u.shape, 1 / (beta * s)))
        sig = expit(beta * (u[:, None] + s * z))
        m1 = np.sum(w * sig, axis=1)
        m2 = np.sum(w * sig * sig, axis=1)
        out[idx] = 4 * np.sum(wu * np.maximum(m2 - m1 * m1, 0.0))  # two rows, each 2 Var(sigmoid)
    return out


def _label_error(q, Vp, T, beta, key, n_samples):
    """Softmax ``T = 2`` by nested quadrature (:func:`_label_error_T2`); ``T > 2`` by Monte Carlo (``key``)."""
    qq, Vp = np.asarray(q, dtype=float), np.asarray(Vp, dtype=float)
    if T == 2:
        return _label_error_T2(qq, Vp, float(beta))
    if key is None:
        raise ValueError("key must be a jax.random key for softmax with T > 2 (Monte Carlo)")
    n_samples = _checks.integer_at_least("n_samples", n_samples, 64)
    return np.vectorize(lambda qv, vv: label_mc(key, qv, vv, T, beta, n_samples // 64))(qq, Vp)


@functools.partial(jax.jit, static_argnames=("T", "n_omega"))
def _label_mc_jit(key, q, Vp, T, beta, n_omega):
    k1, k2 = jax.random.split(key)
    om = jnp.sqrt(q) * symmetric_gaussian(k1, (n_omega, 1, T, T))
    h = om + jnp.sqrt(Vp) * symmetric_gaussian(k2, (n_omega, 64, T, T))
    y = jax.nn.softmax(beta * h, axis=-1)
    A = jnp.mean(jnp.sum(y * y, axis=(-1, -2)), axis=1)  # inner mean of ||y||^2
    ybar = jnp.mean(y, axis=1)
    B = jnp.sum(ybar * ybar, axis=(-1, -2))
    return jnp.mean(A - B) * 64 / 63  # unbiased E tr Cov(y | omega)


def label_mc(key, q, Vp, T, beta, n_omega):
    """Monte Carlo ``E tr Cov(y | omega)`` of the softmax channel (``n_omega`` draws x 64)."""
    return float(_label_mc_jit(key, q, Vp, T, beta, n_omega))


def _check(T, beta, noise, score):
    if T < 2:
        raise ValueError("T must be >= 2 for channel='softmax' (T = 1 carries no information)")


SOFTMAX = register(Channel(
    name="softmax", summary="y = softmax(beta h), row-wise", output=lambda h, beta: jax.nn.softmax(beta * h, axis=-1),
    score=_score, log_partition=_log_partition, se_H=_H, se_ElogZ=_ElogZ, perfect_recovery=_perfect,
    label_error=_label_error, check=_check, check_outputs=_check_outputs, log_score=_log_score,
    log_log_partition=_log_log_partition, uses_beta=True))
