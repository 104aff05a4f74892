"""Argument validation shared by the public functions (private module).

Each helper raises ``ValueError`` naming the argument and its valid range.
"""

from __future__ import annotations

import math

import numpy as np


def positive(name: str, value, *, allow_inf: bool = False) -> float:
    """``value > 0`` (finite unless ``allow_inf``)."""
    v = _real(name, value)
    if not v > 0 or (math.isinf(v) and not allow_inf):
        rng = "(0, inf]" if allow_inf else "(0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v


def nonnegative(name: str, value, *, allow_inf: bool = False) -> float:
    """``value >= 0`` (finite unless ``allow_inf``)."""
    v = _real(name, value)
    if not v >= 0 or (math.isinf(v) and not allow_inf):
        rng = "[0, inf]" if allow_inf else "[0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v


def integer_at_least(name: str, value, low: int) -> int:
    """An integer ``>= low`` (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def one_of(name: str, value, options) -> str:
    """``value`` is one of ``options``."""
    if value not in options:
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")
    return value


def square_symmetric(name: str, M, *, atol: float = 1e-8):
    """A square symmetric 2-d array; returns it unchanged."""
    shape = np.shape(M)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name} must be a square (d, d) matrix, got shape {shape}")
    Mn = np.asarray(M)
    if not np.all(np.isfinite(Mn)):
        raise ValueError(f"{name} must have finite entries")
    scale = max(1.0, float(np.max(np.abs(Mn)))) if Mn.size else 1.0
    if Mn.size and float(np.max(np.abs(Mn - Mn.T))) > atol * scale:
        raise ValueError(f"{name} must be symmetric (|{name} - {name}^T| <= {atol:g} max|{name}|)")
    return M


def _real(name, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if math.isnan(v):
        raise ValueError(f"{name} must be a real number, got nan")
    return v
