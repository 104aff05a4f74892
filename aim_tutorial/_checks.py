"""Argument validation shared by the public functions (private module).

Each helper raises an error naming the argument and its valid range:
``ValueError`` for a value out of range, :class:`ArgumentTypeError` (a ``TypeError``
that is also a ``ValueError``, as NumPy's ``AxisError`` is both an ``IndexError`` and a
``ValueError``) for a value of the wrong kind: a bool or a string where a number is
expected, a float where a size is expected, a complex array where a real one is.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

__all__ = [
    "ArgumentTypeError",
    "boolean",
    "check_memory",
    "user_function",
    "finite",
    "in_range",
    "integer_at_least",
    "nonnegative",
    "one_hot",
    "one_of",
    "positive",
    "prng_key",
    "real",
    "real_array",
    "row_stochastic",
    "square_symmetric",
    "traced",
]


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong kind (caught by ``except TypeError`` and ``except ValueError``)."""


# ----------------------------------------------------------------------------
# scalars
# ----------------------------------------------------------------------------


def traced(value) -> bool:
    """A JAX tracer (inside ``jit``, ``grad`` or ``vmap``): its values cannot be checked."""
    import jax

    return isinstance(value, jax.core.Tracer)


_traced = traced  # the name this module's checks and model.py use (mutation/triage.toml names model's lines)


def real(name: str, value, *, allow_nan: bool = False) -> float:
    """A real number (not a bool, a string, None or a complex); returned as a float.

    A traced scalar (inside ``jit`` or ``grad``) is returned unchanged: only its kind is checked.
    """
    if _traced(value):
        if np.ndim(value) != 0 or not np.issubdtype(value.dtype, np.floating) and not np.issubdtype(
            value.dtype, np.integer
        ):
            raise ArgumentTypeError(f"{name} must be a real number, got a traced {value.dtype}{value.shape}")
        return value
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, (str, bytes)):
        raise ArgumentTypeError(f"{name} must be a real number, got {value!r}")
    if np.issubdtype(getattr(value, "dtype", np.float64), np.bool_):  # a 0-d boolean array
        raise ArgumentTypeError(f"{name} must be a real number, got the boolean {value!r}")
    if isinstance(value, complex) or np.iscomplexobj(value):
        raise ArgumentTypeError(f"{name} must be a real number, got the complex {value!r}")
    if np.ndim(value) != 0:
        raise ArgumentTypeError(f"{name} must be a real number (a scalar), got an array of shape {np.shape(value)}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{name} must be a real number, got {value!r}") from None
    if math.isnan(v) and not allow_nan:
        raise ValueError(f"{name} must be a real number, got nan")
    return v


_real = real  # the name used before; kept for the modules that import it


def finite(name: str, value) -> float:
    """A finite real number."""
    v = real(name, value)
    if _traced(v):
        return v
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def positive(name: str, value, *, allow_inf: bool = False) -> float:
    """``value > 0`` (finite unless ``allow_inf``)."""
    v = real(name, value)
    if _traced(v):
        return v
    if not v > 0 or (math.isinf(v) and not allow_inf):
        rng = "(0, inf]" if allow_inf else "(0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v


def nonnegative(name: str, value, *, allow_inf: bool = False) -> float:
    """``value >= 0`` (finite unless ``allow_inf``)."""
    v = real(name, value)
    if _traced(v):
        return v
    if not v >= 0 or (math.isinf(v) and not allow_inf):
        rng = "[0, inf]" if allow_inf else "[0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v


def in_range(name: str, value, low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> float:
    """A real number in the interval from ``low`` to ``high`` (closed unless told open)."""
    v = real(name, value)
    if _traced(v):
        return v
    ok_low = v > low if low_open else v >= low
    ok_high = v < high if high_open else v <= high
    if not (ok_low and ok_high):
        rng = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v


def integer_at_least(name: str, value, low: int) -> int:
    """An integer ``>= low`` (bools, floats and strings rejected)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ArgumentTypeError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def boolean(name: str, value) -> bool:
    """A bool (Python or NumPy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def one_of(name: str, value, options) -> str:
    """``value`` is one of ``options``."""
    try:
        ok = value in options
    except TypeError:  # an unhashable value
        ok = False
    if not ok or isinstance(value, (bool, np.bool_)) and not any(isinstance(o, bool) for o in options):
        raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")
    return value


def prng_key(name: str, key):
    """One JAX random key (new-style ``jax.random.key``, shape ``()``, or a raw ``uint32[2]``).

    A batch of keys (``jax.random.split(key, 3)``) is refused with a ``ValueError`` naming the
    argument: every function of the package takes one key (inside ``jax.vmap`` each traced key is one).
    """
    import jax

    if isinstance(key, jax.Array):
        typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
        if typed or key.dtype == np.uint32 and key.shape[-1:] == (2,):
            batch = key.shape if typed else key.shape[:-1]
            if batch:  # jax.random's own error names neither the argument nor the function
                raise ValueError(f"{name} must be one JAX random key, got a batch of keys of shape {batch}: "
                                 "pass one key (keys[i]), or jax.vmap the function over the batch")
            return key
    raise ArgumentTypeError(
        f"{name} must be a JAX random key (jax.random.key(seed)), got {type(key).__name__}"
        + (f" of dtype {key.dtype} and shape {key.shape}" if hasattr(key, "dtype") else "")
    )


# ----------------------------------------------------------------------------
# arrays
# ----------------------------------------------------------------------------


def real_array(name: str, value, *, ndim=None, min_ndim=None, shape=None, allow_empty: bool = False):
    """A finite real array (NumPy or JAX), checked and returned unchanged.

    ``ndim`` an int or a tuple of allowed ranks; ``min_ndim`` a lower bound on the rank;
    ``shape`` a tuple whose ``None`` entries match any size (trailing axes).
    """
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise ArgumentTypeError(f"{name} must be a real array, got {type(value).__name__}")
    # a traced array (inside jit, grad or vmap): kind and shape are checked, values cannot be
    arr = _shape_struct(value) if _traced(value) else np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in "USV":
        raise ArgumentTypeError(f"{name} must be a real array, got dtype {arr.dtype}")
    if arr.dtype.kind == "c":
        raise ArgumentTypeError(f"{name} must be a real array, got the complex dtype {arr.dtype}")
    if arr.dtype.kind == "b":
        raise ArgumentTypeError(f"{name} must be a real array, got a boolean array")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} axes, got shape {arr.shape}")
    if min_ndim is not None and arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axes, got shape {arr.shape}")
    if shape is not None:
        tail = arr.shape[len(arr.shape) - len(shape):] if arr.ndim >= len(shape) else None
        if tail is None or any(want is not None and want != got for want, got in zip(shape, tail)):
            want = "(" + ", ".join("..." if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} must not be empty, got shape {arr.shape}")
    if _traced(value):
        return value
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must have finite entries (it has NaN or inf)")
    return value


def square_symmetric(name: str, M, *, atol: float = 1e-8):
    """A square symmetric 2-d finite real array; returns it unchanged."""
    shape = np.shape(M)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name} must be a square (d, d) matrix, got shape {shape}")
    real_array(name, M)
    if _traced(M):
        return M
    Mn = np.asarray(M)
    scale = max(1.0, float(np.max(np.abs(Mn)))) if Mn.size else 1.0
    if Mn.size and float(np.max(np.abs(Mn - Mn.T))) > atol * scale:
        raise ValueError(f"{name} must be symmetric (|{name} - {name}^T| <= {atol:g} max|{name}|)")
    return M


def row_stochastic(name: str, y, *, atol: float = 1e-6):
    """Rows of nonnegative entries summing to 1 (softmax outputs, last axis); returns ``y``."""
    real_array(name, y, min_ndim=1)
    yn = np.asarray(y, dtype=float)
    if np.any(yn < 0):
        raise ValueError(f"{name} must be row-stochastic (softmax outputs): it has negative entries")
    err = float(np.max(np.abs(yn.sum(axis=-1) - 1.0)))
    if err > atol:
        raise ValueError(f"{name} must be row-stochastic (softmax outputs): its rows sum to 1 +- {err:.3g}")
    return y


def one_hot(name: str, y):
    """Rows that are one-hot (hardmax outputs, last axis); returns ``y``."""
    real_array(name, y, min_ndim=1)
    yn = np.asarray(y)
    if not (np.all((yn == 0) | (yn == 1)) and np.all(yn.sum(axis=-1) == 1)):
        raise ValueError(f"{name} must be one-hot along its last axis (hardmax outputs)")
    return y


def _shape_struct(value):
    """Shape, rank, size and dtype of a traced array, as NumPy would report them."""

    class _S:
        shape = tuple(value.shape)
        ndim = len(value.shape)
        size = int(np.prod(value.shape)) if value.shape else 1
        dtype = np.dtype(value.dtype)

    return _S


# ----------------------------------------------------------------------------
# functions given by the user
# ----------------------------------------------------------------------------


def user_function(name: str, f, arg_shape: tuple, out_shape: tuple, what: str, *, hashable: bool = False,
                  floating: bool = True):
    """A JAX-traceable callable ``f`` that maps a float64 array of ``arg_shape`` to a real array of
    ``out_shape`` (``()``: a scalar), checked by tracing it once (``jax.eval_shape``, nothing computed).
    ``floating``: the output must be a float array (``jax.grad`` needs one), else integers pass too.

    ``what`` describes the argument in the messages (``"one (T, T) matrix"``);
    ``hashable``: ``f`` must be hashable too (a static argument of ``jax.jit``: a module-level function
    or a ``functools.partial``, not an object whose class sets ``__hash__ = None``). Every failure is
    an :class:`ArgumentTypeError` (not callable, not hashable, or it raised while traced) or a
    ``ValueError`` (a wrong shape or dtype) naming ``name``. Returns ``f``.
    """
    import jax

    if not callable(f):
        raise ArgumentTypeError(f"{name} must be callable (a function of {what}), got {type(f).__name__}")
    if hashable:
        try:
            hash(f)
        except TypeError:
            raise ArgumentTypeError(f"{name} must be hashable (a static argument of jax.jit: a module-level "
                                    f"function or a functools.partial), got an unhashable {type(f).__name__}") from None
    try:
        out = jax.eval_shape(f, jax.ShapeDtypeStruct(tuple(arg_shape), np.float64))
    except Exception as e:  # noqa: BLE001 - any failure of the user's function, reported as such
        raise ArgumentTypeError(f"{name} must be a JAX-traceable function of {what}; traced on a float64 array "
                                f"of shape {tuple(arg_shape)} it failed: {type(e).__name__}: {e}") from e
    shape, dtype = getattr(out, "shape", None), getattr(out, "dtype", None)
    kinds = "f" if floating else "fiu"
    if shape != tuple(out_shape) or dtype is None or np.dtype(dtype).kind not in kinds:
        got = (f"a {np.dtype(dtype).name} array of shape {shape}" if shape is not None and dtype is not None
               else type(out).__name__)
        kind = "a real float array" if floating else "a real array"
        raise ValueError(f"{name} must map {what} to {kind} of shape {tuple(out_shape)}; it returns {got}")
    return f


# ----------------------------------------------------------------------------
# memory
# ----------------------------------------------------------------------------


def _memory_bytes() -> int:
    """Physical memory of this machine (0 if unknown)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 0


def check_memory(what: str, n_elements, itemsize: int = 8, *, fraction: float = 0.5) -> None:
    """Refuse, before anything is allocated, a request of more than ``fraction`` of the memory.

    ``n_elements`` the number of array entries the request makes (the largest array,
    or the sum of those alive at once), ``itemsize`` bytes per entry. The limit is
    ``fraction`` of the machine's physical memory (or of ``AIM_MAX_BYTES`` when set).
    """
    need = int(n_elements) * int(itemsize)
    env = os.environ.get("AIM_MAX_BYTES")
    limit = int(float(env)) if env else int(fraction * _memory_bytes())
    if limit > 0 and need > limit:
        raise ValueError(
            f"{what} needs about {need / 2**30:.3g} GiB, more than the {limit / 2**30:.3g} GiB this "
            "machine can give it (half its memory; set AIM_MAX_BYTES to change the limit): "
            "ask for a smaller size"
        )
