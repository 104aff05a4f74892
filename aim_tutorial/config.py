"""Global configuration: float64 and problem sizes, in one place.

Importing :mod:`aim_tutorial` imports this module first, which switches JAX to
double precision (``jax_enable_x64``). Every chapter reads its problem sizes
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

import os
from types import MappingProxyType

import jax

jax.config.update("jax_enable_x64", True)

SCALES = ("smoke", "book", "paper")


def scale() -> str:
    """The current scale, read from ``AIM_SCALE`` (default ``"book"``)."""
    value = os.environ.get("AIM_SCALE", "book").strip().lower()
    if value not in SCALES:
        raise ValueError(f"AIM_SCALE must be one of {SCALES}, got {value!r}")
    return value


# Problem sizes of each chapter at each scale. A chapter reads its own entry
# with ``sizes("model")``; add an entry here, never hard-code sizes in a chapter.
_SIZES = {
    "model": {
        "smoke": dict(d=60, n=400, d_spectrum=200, d_grid=(20, 40, 80)),
        "book": dict(d=200, n=4000, d_spectrum=1000, d_grid=(25, 50, 100, 200, 400)),
        "paper": dict(d=400, n=20000, d_spectrum=2000, d_grid=(50, 100, 200, 400, 800)),
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
