"""Global configuration: the precision policy and problem sizes, in one place.

Importing :mod:`aim_tutorial` imports this module first, which switches JAX to
double precision (``jax_enable_x64``); it stays on.

Precision policy
    *Theory* (random matrices, state evolution, the channels' quadratures, the
    RIE) always computes in float64. The *algorithms* that learn from data
    (gradient descent, :func:`aim_tutorial.gd.train_gd` and
    :func:`aim_tutorial.deep.train_deep_gd`, and GAMP-RIE, :func:`aim_tutorial.gamp_rie`)
    run in the dtype that :func:`algorithm_dtype` resolves: they cast their data,
    starting point and teacher to it, iterate in it and return arrays in it (GAMP-RIE
    keeps the RIE's cleaned eigenvalues and ``mmse_rho`` in float64). The order is

    1. an explicit ``dtype=`` argument: ``"float32"``, ``"float64"``, or a
       NumPy / JAX float32 or float64 dtype (``np.float32``, ``jnp.float64``, ...);
    2. the environment variable ``AIM_DTYPE`` (``float32`` or ``float64``);
    3. the platform (:func:`jax.default_backend`): float64 on ``"cpu"`` (the
       book's numbers are reproducible bit for bit), float32 on a GPU or TPU.

    Anything else is a ``ValueError`` naming ``dtype`` (or ``AIM_DTYPE``).

    The algorithms' matrix products run at full float32 precision
    (:func:`algorithm_products`, ``"highest"``): by default XLA computes float32 products on
    recent NVIDIA GPUs with TF32 tensor cores (about 3 significant digits), and on one H200
    that moved GAMP-RIE's errors near perfect recovery by up to 2e-3, as much as the seeds do
    (``benchmarks/gpu_compare.py``). ``AIM_MATMUL_PRECISION=default`` gives XLA's default back
    (faster products on such GPUs); the products of float64 programs are float64 either way.

    On a 2-core
    CPU float32 trains 1.76 times faster than float64 (32 students x 1000 Adam steps at
    d = 100) and changes the errors by about 1e-7; GAMP-RIE's errors move by at most
    1.5e-7 on chapter 5's settings. ``benchmarks/precision.py`` (and ``--gamp``) measures both.

Every chapter reads its problem sizes
from :func:`sizes`, chosen by the environment variable ``AIM_SCALE``:

``smoke``
    tiny sizes, seconds per chapter: checks that the code runs.
``book`` (default)
    the sizes of the rendered book and of CI: about a minute per chapter on a
    2-core CPU, large enough for every assertion in the book to be meaningful.
``paper``
    the sizes of the paper (d = 200 and beyond): meant for a GPU.
"""

from __future__ import annotations

import functools
import os
from types import MappingProxyType

import jax
import numpy as np

__all__ = [
    "DTYPES",
    "SCALES",
    "MATMUL_PRECISIONS",
    "algorithm_dtype",
    "algorithm_products",
    "GAMP_COMPILER_OPTIONS",
    "XLA_OPTIONS",
    "gamp_jit",
    "matmul_precision",
    "compiled_flops",
    "compilation_cache",
    "TESTED_JAX",
    "check_runtime_jax",
    "scale",
    "sizes",
    "spread_devices",
]

jax.config.update("jax_enable_x64", True)

SCALES = ("smoke", "book", "paper")
DTYPES = ("float32", "float64")  # the dtypes the algorithms may run in


def _dtype_name(value):
    """``"float32"`` / ``"float64"`` for a name or a float32/float64 dtype, else ``None``."""
    if isinstance(value, str):
        name = value.strip().lower()
        return name if name in DTYPES else None
    if isinstance(value, (bool, int, float, complex)) or value is None:  # np.dtype(3) or np.dtype(None) would pass
        return None
    try:
        name = np.dtype(value).name
    except (TypeError, ValueError):
        return None
    return name if name in DTYPES else None


def algorithm_dtype(dtype=None) -> np.dtype:
    """The dtype the algorithms compute in: ``dtype``, else ``AIM_DTYPE``, else by platform.

    Args:
        dtype: ``"float32"``, ``"float64"``, a NumPy or JAX float32/float64 dtype, or ``None``
            (then the environment variable ``AIM_DTYPE``, then float64 on a CPU and
            float32 on a GPU or TPU: :func:`jax.default_backend`).

    Returns:
        ``np.dtype("float32")`` or ``np.dtype("float64")``.

    Raises:
        ValueError: ``dtype`` (or ``AIM_DTYPE``, when it decides) is not one of :data:`DTYPES`.

    Example:
        >>> import jax.numpy as jnp
        >>> from aim_tutorial.config import algorithm_dtype
        >>> algorithm_dtype("float32"), algorithm_dtype(jnp.float64)
        (dtype('float32'), dtype('float64'))
    """
    if dtype is not None:
        name = _dtype_name(dtype)
        if name is None:
            raise ValueError(f"dtype must be one of {DTYPES} (a name or a NumPy/JAX dtype) or None, got {dtype!r}")
        return np.dtype(name)
    env = os.environ.get("AIM_DTYPE", "").strip()
    if env:
        name = _dtype_name(env)
        if name is None:
            raise ValueError(f"AIM_DTYPE must be one of {DTYPES} (or unset), got {env!r}")
        return np.dtype(name)
    return np.dtype("float64" if jax.default_backend() == "cpu" else "float32")


MATMUL_PRECISIONS = ("highest", "default")  # the algorithms' matrix-product precisions (AIM_MATMUL_PRECISION)


def matmul_precision() -> str:
    """The precision of the algorithms' matrix products: ``AIM_MATMUL_PRECISION``, else ``"highest"``.

    ``"highest"``: full float32 products (and float64 ones in float64); ``"default"``: XLA's
    default, which on recent NVIDIA GPUs computes float32 products with TF32 (a 10-bit mantissa).

    Raises:
        ValueError: ``AIM_MATMUL_PRECISION`` is set to anything but one of :data:`MATMUL_PRECISIONS`.

    Example:
        >>> from aim_tutorial.config import matmul_precision
        >>> matmul_precision() in ("highest", "default")
        True
    """
    env = os.environ.get("AIM_MATMUL_PRECISION", "").strip().lower()
    if not env:
        return "highest"
    if env not in MATMUL_PRECISIONS:
        raise ValueError(f"AIM_MATMUL_PRECISION must be one of {MATMUL_PRECISIONS} (or unset), got {env!r}")
    return env


def algorithm_products(fn):
    """``fn`` traced with the algorithms' matrix-product precision (:func:`matmul_precision`).

    For the Python functions that the algorithms hand to :func:`jax.jit`: the precision is fixed
    in the program when it is traced (the first call with given shapes), as
    ``precision=`` on each of its matrix products.
    """

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        with jax.default_matmul_precision(matmul_precision()):
            return fn(*args, **kwargs)

    return traced


#: XLA options of GAMP-RIE's programs (:func:`gamp_jit`). On a CPU, XLA's newer fusion emitters
#: compile these programs more slowly than its older ones and run them no faster; gradient
#: descent, which gained nothing either way, keeps XLA's defaults (measured: the benchmarks page,
#: ``benchmarks/design_history.json``). The
#: options apply to CPU programs only (:func:`gamp_jit` compiles without them for a GPU or TPU).
#: The option changes how XLA writes the elementwise loops, so results can move at rounding
#: level. ``AIM_XLA_OPTIONS=default`` (set before importing :mod:`aim_tutorial`) gives XLA's
#: defaults back; ``benchmarks/run.py`` times the cold runs both ways.
GAMP_COMPILER_OPTIONS = MappingProxyType({"xla_cpu_use_fusion_emitters": False})
XLA_OPTIONS = ("tuned", "default")  # the values of AIM_XLA_OPTIONS


def gamp_jit(fn=None, **kwargs):
    """:func:`jax.jit` with :data:`GAMP_COMPILER_OPTIONS` on a CPU, for GAMP-RIE's programs;
    usable as a decorator (``@gamp_jit``) or called (``gamp_jit(fn, static_argnums=...)``).

    The program compiled is chosen at each call by :func:`jax.default_backend`: with the options
    on ``"cpu"``, plain :func:`jax.jit` on a GPU or TPU (whose compilers have no use for a CPU
    option). With the environment variable ``AIM_XLA_OPTIONS=default``, plain :func:`jax.jit`
    everywhere (``tuned`` or unset: the options); it is read when a program is defined, most
    of them when :mod:`aim_tutorial` is imported. The result has ``lower``, ``trace`` and
    ``__wrapped__`` as a jitted function has; called inside another trace (``jax.jit``,
    ``jax.eval_shape``, ``jax.vmap``) it runs the function itself, since a nested program
    takes no compiler options.

    Raises:
        ValueError: ``AIM_XLA_OPTIONS`` is set to anything but one of :data:`XLA_OPTIONS`.

    Example:
        >>> import jax.numpy as jnp
        >>> from aim_tutorial.config import gamp_jit
        >>> float(gamp_jit(lambda a: 2 * a)(jnp.float64(1.5)))
        3.0
    """
    if fn is None:
        return functools.partial(gamp_jit, **kwargs)
    env = os.environ.get("AIM_XLA_OPTIONS", "").strip().lower() or "tuned"
    if env not in XLA_OPTIONS:
        raise ValueError(f"AIM_XLA_OPTIONS must be one of {XLA_OPTIONS} (or unset), got {env!r}")
    if env == "default":
        return jax.jit(fn, **kwargs)
    return _CpuTunedJit(fn, kwargs)


@functools.lru_cache(maxsize=None)
def _cpu_options_known() -> bool:
    """Whether this jaxlib's XLA has :data:`GAMP_COMPILER_OPTIONS` (a newer one may have dropped an
    option: it then refuses the program with "No such compile option"); one tiny program, once."""
    try:
        jax.jit(lambda a: a + 1, compiler_options=dict(GAMP_COMPILER_OPTIONS)).lower(np.float64(0.0)).compile()
    except Exception:  # noqa: BLE001 - XLA's error type differs between versions
        return False
    return True


class _CpuTunedJit:
    """Two jitted versions of one function, with :data:`GAMP_COMPILER_OPTIONS` and without; the
    backend picks one at each call (:func:`gamp_jit`)."""

    def __init__(self, fn, kwargs):
        functools.update_wrapper(self, fn)
        self._tuned = jax.jit(fn, compiler_options=dict(GAMP_COMPILER_OPTIONS), **kwargs)
        self._plain = jax.jit(fn, **kwargs)

    def _pick(self):
        return self._tuned if jax.default_backend() == "cpu" and _cpu_options_known() else self._plain

    def __call__(self, *args, **kwargs):
        if any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((args, kwargs))):
            # inside another trace (jit, eval_shape, vmap): the function itself, since a nested
            # program takes no compiler options and the outer one compiles it anyway
            return self.__wrapped__(*args, **kwargs)
        return self._pick()(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self._pick().lower(*args, **kwargs)

    def trace(self, *args, **kwargs):
        return self._pick().trace(*args, **kwargs)

    def eval_shape(self, *args, **kwargs):
        return self._pick().eval_shape(*args, **kwargs)


def spread_devices(count: int, devices=None) -> list:
    """The devices an axis of ``count`` independent items (students, instances) is split over.

    Args:
        count: the length of the axis, ``>= 1``.
        devices: a sequence of JAX devices, or ``None`` for every visible device
            (:func:`jax.devices`; on several hosts, after :func:`jax.distributed.initialize`,
            every device of every host).

    Returns:
        the first ``m`` of them, ``m`` the largest number of devices that divides ``count``
        (each device takes ``count / m`` items): one device on a machine with one.

    Raises:
        ValueError: ``count`` not a positive integer, or ``devices`` empty.

    Example:
        >>> import jax
        >>> from aim_tutorial.config import spread_devices
        >>> spread_devices(8, jax.devices()[:1]) == jax.devices()[:1]
        True
    """
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("devices must hold at least one device, got none")
    m = max(k for k in range(1, len(devices) + 1) if count % k == 0)
    return devices[:m]


def compiled_flops(compiled) -> float:
    """The floating-point operations of one call of a compiled JAX program, as XLA's cost
    analysis counts them (``jax.jit(f).lower(*args).compile()``); ``nan`` where the backend
    gives no count.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from aim_tutorial.config import compiled_flops
        >>> a = jnp.ones((8, 8))
        >>> compiled_flops(jax.jit(jnp.matmul).lower(a, a).compile()) >= 2 * 8 ** 3 - 8 ** 2
        True
    """
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    if not cost or "flops" not in cost:
        return float("nan")
    return float(cost["flops"])


def compilation_cache(path=None) -> str:
    """Turn on JAX's persistent compilation cache, so that a later process reads the compiled
    programs instead of compiling them again; returns the cache's directory.

    A sweep compiles a program for each shape it meets (each ``n = alpha d^2``), and a second run
    with the same shapes (another seed) reads them from the cache instead: the benchmarks page
    times ``python -m aim_tutorial reproduce amp-se amp-hardmax --scale book`` both ways
    (``python benchmarks/run.py --only reproduce_cache``). ``reproduce``'s command line and the setup
    cell of the Colab notebooks call this; the package does not on import, since the setting is
    global to JAX.

    Args:
        path: the cache's directory (created by JAX on first use). ``None``: the directory that
            ``JAX_COMPILATION_CACHE_DIR`` (or ``jax.config``) already names, else
            ``$XDG_CACHE_HOME/aim_tutorial/jax`` (``~/.cache/aim_tutorial/jax``).

    Every program is cached, however quickly it compiles (JAX's default skips those under a
    second, nearly all of ours), unless ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` or
    ``JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES`` say otherwise. JAX's key for an entry holds
    the program, its compiler options, the jaxlib version and the device, so one directory
    serves them all.

    Raises:
        TypeError: ``path`` that is not a string or a path.
        ValueError: an empty ``path``.
    """
    if path is None:
        path = jax.config.jax_compilation_cache_dir or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "aim_tutorial", "jax")
    elif not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a string or an os.PathLike directory, got {type(path).__name__}")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"path must name a directory as text, got an os.PathLike of {type(path).__name__}")
    if not path.strip():
        raise ValueError("path must name a directory, got an empty string")
    jax.config.update("jax_compilation_cache_dir", path)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES" not in os.environ:
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return path


# The JAX releases the book has been run with, oldest and newest (inclusive). The oldest is the
# JAX of Colab's GPU runtime (.ci/colab_runtime_gpu.txt), which is also pyproject.toml's floor:
# make test runs every Colab notebook with it (scripts/colab_check.sh, the "shipped" run); between
# lie the exact pin of requirements.txt (the unit tests, the build, nbval); the newest is the
# newest JAX that `make colab-run` installed and ran every notebook with ("newest" run).
# Widen it after a `make colab-run` that passed with a JAX outside; tests/test_colab_runtime.py
# checks the oldest against the snapshot, tests/test_colab.py the pin of requirements.txt.
TESTED_JAX = ("0.7.2", "0.12.1")  # make colab-run, 8 notebooks passed in both runs, 2026-12-06


def _release(version: str) -> tuple:
    """The release numbers of a version string: ``"0.4.36.dev20241122"`` -> ``(0, 4, 36)``."""
    import re

    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(version))
    if match is None:
        raise ValueError(f"version must start with release numbers such as 0.10.2, got {version!r}")
    numbers = [int(part) for part in match.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:  # 0.5 == 0.5.0
        numbers.pop()
    return tuple(numbers)


def check_runtime_jax(version=None, tested=None):
    """The one-line warning when a JAX version lies outside the tested range, else ``None``.

    The Colab notebooks' install cell prints it: they keep the runtime's own JAX (its GPU
    build), which may be older or newer than any JAX the book was run with.

    Args:
        version: a JAX version string; default: the installed ``jax`` distribution's.
        tested: ``(oldest, newest)`` tested versions, inclusive; default :data:`TESTED_JAX`.

    Returns:
        ``None`` inside the range; otherwise one line that names the version and the range.

    Example:
        >>> check_runtime_jax("0.10.2", tested=("0.4.30", "0.10.2")) is None
        True
        >>> line = check_runtime_jax("0.4.26", tested=("0.4.30", "0.10.2"))
        >>> line.startswith("WARNING: this runtime's JAX 0.4.26 is outside the range")
        True
        >>> "(jax 0.4.30 to 0.10.2)" in line and len(line.splitlines()) == 1
        True
    """
    if version is None:
        from importlib.metadata import version as installed

        version = installed("jax")
    low, high = TESTED_JAX if tested is None else tested
    if _release(low) <= _release(version) <= _release(high):
        return None
    span = f"jax {low}" if low == high else f"jax {low} to {high}"
    return (f"WARNING: this runtime's JAX {version} is outside the range aim-tutorial was tested with "
            f"({span}); the chapters may fail or give other numbers.")


def scale() -> str:
    """The current scale, read from ``AIM_SCALE`` (default ``"book"``)."""
    value = os.environ.get("AIM_SCALE", "book").strip().lower()
    if value not in SCALES:
        raise ValueError(f"AIM_SCALE must be one of {SCALES}, got {value!r}")
    return value


# Problem sizes of each chapter at each scale. A chapter reads its own entry
# with ``sizes("model")``; add an entry here, never hard-code sizes in a chapter.
_SIZES = {
    "explore": {  # chapter 9: live state evolutions checked against aim_tutorial/data/explore_tables.csv
        "smoke": dict(live_rhos=(0.5,), live_hardmax=False),
        "book": dict(live_rhos=(0.5, 1.0), live_hardmax=True),
        "paper": dict(live_rhos=(0.1, 0.5, 1.0, 2.0), live_hardmax=True),
    },
    "amp": {
        # smoke: the chapter's checks are finite-size statements that need d >= 60; fewer live runs only
        "smoke": dict(d_small=60, d_track=120, d_live=80, n_live=1, d_spectrum=200, d_hardmax=60, d_sizes=(60,),
                      d_timing=(40, 80), n_fresh=4, d_cavity=60, n_cavity=4),
        "book": dict(d_small=60, d_track=120, d_live=80, n_live=1, d_spectrum=200, d_hardmax=60, d_sizes=(60, 80),
                     d_timing=(60, 80, 120), n_fresh=8, d_cavity=100, n_cavity=4),
        "paper": dict(d_small=60, d_track=200, d_live=150, n_live=4, d_spectrum=600, d_hardmax=80,
                      d_sizes=(50, 100, 200), d_timing=(50, 100, 200, 400), n_fresh=24,
                      d_cavity=200, n_cavity=8),
    },
    # python -m aim_tutorial reproduce: one entry a figure (gd-single and gd-averaged share "gd")
    "reproduce": {
        "smoke": {
            "softmax-se": dict(rho=0.5, T=(2, 3), n_alpha=24),
            "hardmax-se": dict(rho=0.5, alpha_min=0.05, alpha_max=3.0, n_alpha=6),
            "hardmax-rescaled": dict(rhos=(0.5,), x_min=0.1, x_max=10.0, n_alpha=6),
            "amp-se": dict(rho=0.5, d=40, alphas=(0.05, 0.13), seeds=1, max_iter=60, n_line=24),
            "amp-hardmax": dict(rho=0.5, d=24, alphas=(0.3, 1.0), seeds=1, max_iter=60, n_line=8),
            "gd": dict(d=16, rho=0.5, T=(2,), x=(0.2, 0.6), seeds=1, n_init=2, steps=50, lr=0.1),
            "deep": dict(d=12, rhos=(0.5, 0.5), T=2, c=1.0, x=(1.0, 3.0), n_init=2, steps=50, lr=0.1),
            "causal": dict(rho=0.5, T=3, d=40, alphas=(0.05, 0.1), seeds=1, max_iter=60, n_line=24),
        },
        "book": {
            "softmax-se": dict(rho=0.5, T=(2, 3, 4, 6), n_alpha=256),
            "hardmax-se": dict(rho=0.5, alpha_min=0.02, alpha_max=5.0, n_alpha=30),
            "hardmax-rescaled": dict(rhos=(0.05, 0.5, 5.0), x_min=0.1, x_max=20.0, n_alpha=30),
            "amp-se": dict(rho=0.5, d=80, alphas=(0.03, 0.06, 0.09, 0.12, 0.15, 0.18, 0.22), seeds=2,
                           max_iter=200, n_line=128),
            "amp-hardmax": dict(rho=0.5, d=60, alphas=(0.2, 0.4, 0.68, 1.0, 1.6), seeds=2, max_iter=200,
                                n_line=30),
            "gd": dict(d=60, rho=0.5, T=(2, 3), x=(0.2, 0.4, 0.6, 0.8, 1.0), seeds=1, n_init=8, steps=1000,
                       lr=0.1),
            "deep": dict(d=30, rhos=(0.5, 0.5), T=2, c=1.0, x=(0.5, 1.0, 1.5, 2.0, 3.0, 4.0), n_init=4,
                         steps=1000, lr=0.1),
            # alpha / alpha_PR = 0.2, 0.4, 0.6, 0.8, 0.9, 1.1, 1.2 at alpha_PR = 0.75 / 6 (chapter 8's ratios)
            "causal": dict(rho=0.5, T=3, d=80, alphas=(0.025, 0.05, 0.075, 0.1, 0.1125, 0.1375, 0.15), seeds=2,
                           max_iter=200, n_line=128),
        },
        "paper": {
            "softmax-se": dict(rho=0.5, T=(2, 3, 4, 5, 6), n_alpha=1024),
            "hardmax-se": dict(rho=0.5, alpha_min=0.02, alpha_max=10.0, n_alpha=128),
            "hardmax-rescaled": dict(rhos=(0.01, 0.1, 0.5, 5.0), x_min=0.1, x_max=50.0, n_alpha=128),
            "amp-se": dict(rho=0.5, d=200, alphas=tuple(round(0.015 * k, 3) for k in range(1, 15)), seeds=5,
                           max_iter=300, n_line=256),
            "amp-hardmax": dict(rho=0.5, d=150, alphas=(0.1, 0.2, 0.3, 0.5, 0.68, 1.0, 1.6, 2.5), seeds=3,
                                max_iter=300, n_line=128),
            "gd": dict(d=200, rho=0.5, T=(2, 3, 4, 5, 6), x=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0),
                       seeds=3, n_init=32, steps=1000, lr=0.1),
            "deep": dict(d=100, rhos=(0.5, 0.5), T=2, c=1.0, x=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0), n_init=8,
                         steps=1000, lr=0.1),
            "causal": dict(rho=0.5, T=3, d=200, alphas=(0.025, 0.05, 0.075, 0.1, 0.1125, 0.1375, 0.15), seeds=4,
                           max_iter=300, n_line=256),
        },
    },
    "replica": {
        "smoke": dict(d=40, n=4000, n_mc=4000, d_rie=150, d_energy=(100, 200), n_gh=40),
        "book": dict(d=120, n=20000, n_mc=12000, d_rie=300, d_energy=(200, 600), n_gh=40),
        "paper": dict(d=400, n=100000, n_mc=200000, d_rie=1500, d_energy=(500, 3000), n_gh=80),
    },
    "model": {
        "smoke": dict(d=60, n=400, d_spectrum=200, d_grid=(20, 40, 80)),
        "book": dict(d=200, n=4000, d_spectrum=1000, d_grid=(25, 50, 100, 200, 400)),
        "paper": dict(d=400, n=20000, d_spectrum=2000, d_grid=(50, 100, 200, 400, 800)),
    },
    "deep": {
        "smoke": dict(d_cov=20, n_cov=4000, d_live=16, n_init_live=2, steps_live=300, x_live=(1.0, 4.0),
                      n_omega_live=200),
        "book": dict(d_cov=40, n_cov=20000, d_live=30, n_init_live=4, steps_live=400, x_live=(1.0, 3.0),
                     n_omega_live=1000),
        "paper": dict(d_cov=100, n_cov=100000, d_live=60, n_init_live=8, steps_live=1000, x_live=(1.0, 2.0, 3.0),
                      n_omega_live=4000),
    },
    "practice": {  # chapter 8: live GAMP-RIE on causal data (d, T, alpha / alpha_PR, seeds); kurtosis samples
        "smoke": dict(d_amp=100, T_amp=2, frac_amp=(0.6, 1.2), n_amp=1, n_kurt=100_000,
                      n_tokens=20_000),
        "book": dict(d_amp=100, T_amp=2, frac_amp=(0.6, 1.2), n_amp=1, n_kurt=100_000,
                     n_tokens=50_000),
        "paper": dict(d_amp=200, T_amp=2, frac_amp=(0.2, 0.4, 0.6, 0.8, 0.9, 1.1, 1.3), n_amp=2,
                      n_kurt=1_000_000, n_tokens=200_000),
    },
    "rmt": {  # chapter 2: d_hist one spectrum; d_grid x seeds the finite-size rate; d_compare the estimator figure
        "smoke": dict(d_hist=100, d_grid=(50, 100, 200), seeds=2, d_compare=100, n_compare=3, d_tangent=100),
        "book": dict(d_hist=1000, d_grid=(50, 100, 200, 400), seeds=6, d_compare=300, n_compare=6, d_tangent=400),
        "paper": dict(d_hist=2000, d_grid=(100, 200, 400, 800, 1600), seeds=8, d_compare=1000, n_compare=8,
                      d_tangent=1000),
    },
    "bayes_optimal": {  # chapter 4: curve points, phase-diagram rows, Monte Carlo sizes
        "smoke": dict(n_alpha=48, n_rho_phase=3, n_mc=20_000, n_omega=128, n_zeta=1024, n_m=8,
                      rhos=(0.5, 1.0), rhos_hardmax=(0.5,)),
        "book": dict(n_alpha=160, n_rho_phase=8, n_mc=60_000, n_omega=512, n_zeta=4096, n_m=10,
                     rhos=(0.1, 0.2, 0.3, 0.5, 1.0, 2.0), rhos_hardmax=(0.1, 0.5, 1.0, 2.0)),
        "paper": dict(n_alpha=400, n_rho_phase=24, n_mc=400_000, n_omega=2048, n_zeta=16384, n_m=20,
                      rhos=(0.1, 0.2, 0.3, 0.5, 1.0, 2.0), rhos_hardmax=(0.1, 0.5, 1.0, 2.0)),
    },
    "elementwise": {  # chapter 4, ReLU and sigmoid attention: curve points, GAMP-RIE and averaged Adam
        "smoke": dict(n_alpha=24, d=24, seeds=1, alphas=(0.12, 0.35), n_init=4, steps=150, n_mc=8_000),
        "book": dict(n_alpha=48, d=40, seeds=2, alphas=(0.12, 0.35), n_init=4, steps=300, n_mc=40_000),
        "paper": dict(n_alpha=160, d=120, seeds=4, alphas=(0.06, 0.12, 0.18, 0.35), n_init=16, steps=1500,
                      n_mc=400_000),
    },
    "gd": {  # chapter 6: live gradient-descent runs (the d = 80 / 200 grids come from scripts/gd_paper_data.py)
        # same: the live same-instance data set of the section on GAMP-RIE (d, students, steps); at
        # book and paper scale the stored study's own setting, so that it reproduces a stored row
        "smoke": dict(d=20, n_init=8, steps=300, seeds=1, Ts=(2,), xs=(0.4,), x_pr=1.2, d_small=16, n_explore=8,
                      same=(16, 4, 50)),
        "book": dict(d=60, n_init=16, steps=400, seeds=2, Ts=(2, 4), xs=(0.2, 0.4, 0.6), x_pr=1.2, d_small=16,
                     n_explore=8, same=(50, 32, 1000)),
        "paper": dict(d=100, n_init=32, steps=1000, seeds=4, Ts=(2, 3, 4, 5, 6), xs=(0.2, 0.4, 0.6, 0.8),
                      x_pr=1.2, d_small=16, n_explore=32, same=(50, 32, 1000)),
    },
}


def sizes(chapter: str) -> MappingProxyType:
    """Problem sizes of ``chapter`` at the current :func:`scale` (read-only mapping).

    Example:
        >>> from aim_tutorial.config import sizes
        >>> sizes("model")["d"] > 0
        True
    """
    if chapter not in _SIZES:
        raise ValueError(f"chapter must be one of {sorted(_SIZES)}, got {chapter!r}")
    return MappingProxyType(dict(_SIZES[chapter][scale()]))
