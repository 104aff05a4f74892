import sys
from pathlib import Path

import jax
import pytest

import aim_tutorial  # noqa: F401  (enables float64)

# the build's own helpers (_ext: the Sphinx extensions, aim_toc's list of chapters) import as Sphinx
# imports them
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))


@pytest.fixture
def key():
    """A fixed ``jax.random`` key; tests derive sub-keys from it."""
    return jax.random.key(20250601)


def pytest_configure(config):
    assert jax.config.jax_enable_x64, "aim_tutorial must enable float64 on import"
