"""ReLU attention: ``y_ab = max(h_ab, 0) / T`` (Wortsman et al. 2023, ``relu(QK^T)/L``).

An elementwise channel (:mod:`aim_tutorial.channels.elementwise`): a positive entry
reveals ``h_ab = T y_ab`` exactly, a zero only that ``h_ab <= 0`` (a censored Gaussian).
Per entry of prior variance ``v`` and ``omega ~ N(0, q_s)``,

    I(q_s, v) = (1 - E_omega[Phi(-omega/sqrt(v)) Var(h | h <= 0, omega) / v]) / v,

and as ``V' -> 0`` half of the entries are exact measurements: ``V' q_hat / alpha ->
(T^2 + T)/2``, so noiseless ReLU attention is recovered perfectly from

    alpha_PR = 2 (2 rho - rho^2) / (T^2 + T)     (rho <= 1; 2 / (T^2 + T) for rho >= 1),

twice the linear channel's threshold (chapter 4, section "Attention beyond the softmax").
Reference: Wortsman, Lee, Gilmer, Kornblith, "Replacing softmax with ReLU in vision
transformers", arXiv 2309.08586 (2023).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .base import register
from .elementwise import Structure, make

__all__ = [
    "RELU",
]

_STRUCTURE = Structure(flat_a=np.array([-np.inf]), flat_b=np.array([0.0]), flat_c=np.array([0.0]),
                       flat_group=np.array([0]), piece_a=np.array([0.0]), piece_b=np.array([np.inf]),
                       piece_increasing=np.array([True]), piece_lo=np.array([0.0]), piece_hi=np.array([np.inf]))


def _f_of(T, beta):
    return lambda h: jnp.maximum(h, 0.0) / T


RELU = register(make(
    "relu", "y = max(h, 0) / T, entrywise", _f_of, structure_of=lambda T, beta: _STRUCTURE,
    inverse_of=lambda T, beta: (lambda y: T * y)))
