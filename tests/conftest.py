import jax
import pytest

import aim_tutorial  # noqa: F401  (enables float64)


@pytest.fixture
def key():
    """A fixed ``jax.random`` key; tests derive sub-keys from it."""
    return jax.random.key(20250601)


def pytest_configure(config):
    assert jax.config.jax_enable_x64, "aim_tutorial must enable float64 on import"
