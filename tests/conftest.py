import importlib.util
import sys
from pathlib import Path

import jax
import pytest

import aim_tutorial  # noqa: F401  (enables float64)

# the build's own helpers (_ext: the Sphinx extensions, aim_toc's list of chapters) import as Sphinx
# imports them
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))


@pytest.fixture(scope="session")
def load_file():
    """``load_file("scripts/mutation.py")``: a repository file that is not a package module (a script,
    a benchmark runner), imported by its path, once a session."""
    root, cache = Path(__file__).resolve().parents[1], {}

    def load(relpath):
        if relpath not in cache:
            spec = importlib.util.spec_from_file_location(Path(relpath).stem + "_under_test", root / relpath)
            cache[relpath] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(cache[relpath])
        return cache[relpath]

    return load


@pytest.fixture
def key():
    """A fixed ``jax.random`` key; tests derive sub-keys from it."""
    return jax.random.key(20250601)


def pytest_configure(config):
    assert jax.config.jax_enable_x64, "aim_tutorial must enable float64 on import"
