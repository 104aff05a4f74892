"""Counting: the teacher's degrees of freedom and the measurements one sample gives.

Two numbers recur through the book (chapter 4, eq. (bo-alpha-pr)). A symmetric
``d x d`` matrix of rank ``r = rho d`` has ``d^2 (2 rho - rho^2) / 2`` degrees of freedom
(``d^2 / 2`` once ``rho >= 1``): :func:`dof_fraction` is their fraction ``2 rho - rho^2`` of
``d^2 / 2``, also the small-noise slope ``lim mmse_rho(Delta) / Delta`` of chapter 2. One sample
determines, near perfect recovery, the ``T (T + 1) / 2`` independent entries of the symmetric
index matrix ``h`` through an entrywise channel, one fewer through the softmax (``h + c 1 1^T``
leaves every row's softmax unchanged), ``T (T - 1) / 2`` through the causal softmax (row ``a`` fixes
its ``a`` entries ``h_ab``, ``b <= a``, up to a constant of its own): :func:`alpha_scale` is twice that
count, the factor of ``x = alpha alpha_scale(T)`` through which the error depends on ``alpha`` and ``T``
(``T^2 + T - 2``, ``T^2 + T`` and ``T^2 - T``). This module imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["alpha_scale", "dof_fraction"]


def dof_fraction(rho):
    """``2 rho - rho^2`` for ``rho <= 1``, else 1: the teacher's degrees of freedom over ``d^2 / 2``.

    Args:
        rho: width ratio ``r / d > 0`` (a number or an array).

    Returns:
        a float for a number, an array otherwise.

    Example:
        >>> from aim_tutorial.counting import dof_fraction
        >>> dof_fraction(0.5), dof_fraction(2.0)
        (0.75, 1.0)
    """
    if np.ndim(rho) == 0:
        rho = float(rho)
        return 2 * rho - rho * rho if rho <= 1 else 1.0
    rho = np.asarray(rho, dtype=float)
    return np.where(rho <= 1, 2 * rho - rho * rho, 1.0)


def alpha_scale(T: int, kind: str = "softmax") -> int:
    """The factor in ``x = alpha alpha_scale(T)``: ``T^2 + T - 2`` (softmax), ``T^2 + T`` (entrywise),
    ``T^2 - T`` (causal softmax).

    Args:
        T: tokens a sequence, ``>= 1``.
        kind: ``"softmax"``, ``"entrywise"`` (the linear channel and every elementwise map) or
            ``"causal"`` (the causal softmax, chapter 8).

    Example:
        >>> from aim_tutorial.counting import alpha_scale
        >>> alpha_scale(2), alpha_scale(2, "entrywise"), alpha_scale(3, "causal")
        (4, 6, 6)
    """
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 1:
        raise ValueError(f"T must be an integer >= 1, got {T!r}")
    if kind == "softmax":
        return int(T * T + T - 2)
    if kind == "entrywise":
        return int(T * T + T)
    if kind == "causal":
        return int(T * T - T)
    raise ValueError(f"kind must be 'softmax', 'entrywise' or 'causal', got {kind!r}")
