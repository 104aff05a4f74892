"""The linear channel ``y = h`` (plus Gaussian noise of variance ``Delta`` on ``h``).

``Z_out`` is the Gaussian density of the ``T(T+1)/2`` entries ``y_ab``, ``a <= b``, with
variances ``2V'`` (diagonal) and ``V'`` (off): ``Gamma = (y - omega) / (2 V')``,
``q_hat / alpha = (T^2 + T) / V'`` and ``E log Z_out = -((T^2 + T)/4) log V'`` plus a
constant. Noiseless, it is recovered perfectly above ``alpha_PR = (2 rho - rho^2)/(T^2 + T)``
(``1/(T^2 + T)`` for ``rho >= 1``), eq. (bo-alpha-pr) with ``T^2 + T`` measurements.
Chapter 4.
"""

from __future__ import annotations

import numpy as np

from ..counting import alpha_scale, dof_fraction
from .base import Channel, check_symmetric, frob_sq, gauss_norm, register

__all__ = [
    "LINEAR",
]


def _score(y, omega, Vp, beta, score):
    return (y - omega) / (2 * Vp)


def _log_partition(y, omega, Vp, beta):
    T = omega.shape[-1]
    return gauss_norm(T, Vp, T * (T + 1) // 2) - frob_sq(y - omega) / (4 * Vp)


def _H(q, Vp, T, beta, score):
    return alpha_scale(T, "entrywise") / Vp


def _ElogZ(q, Vp, T, beta):
    return -alpha_scale(T, "entrywise") / 4 * np.log(Vp)


def _perfect(rho, T, beta, noise):
    return dof_fraction(rho) / alpha_scale(T, "entrywise") if noise == 0 else None


def _label_error(q, Vp, T, beta, key, n_samples):
    return Vp * alpha_scale(T, "entrywise")


def _check_outputs(name, y, beta, log_outputs):
    check_symmetric(name, y)  # y = h (+ symmetric noise)


LINEAR = register(Channel(
    name="linear", summary="y = h", output=lambda h, beta: h, score=_score, log_partition=_log_partition,
    se_H=_H, se_ElogZ=_ElogZ, perfect_recovery=_perfect, label_error=_label_error,
    check_outputs=_check_outputs))
