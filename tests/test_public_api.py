"""The public surface: every module of the package says what it exports (``__all__``), and says it truly."""

import importlib
import pkgutil

import pytest

import aim_tutorial

MODULES = ["aim_tutorial"] + sorted(
    m.name for m in pkgutil.walk_packages(aim_tutorial.__path__, "aim_tutorial.")
    if not m.name.rsplit(".", 1)[-1].startswith("_"))


@pytest.mark.parametrize("name", MODULES)
def test_module_declares_all_and_every_name_exists(name):
    mod = importlib.import_module(name)
    assert isinstance(getattr(mod, "__all__", None), (list, tuple)), f"{name} has no __all__"
    assert len(set(mod.__all__)) == len(mod.__all__), f"{name}.__all__ repeats a name"
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    assert not [n for n in mod.__all__ if n.startswith("_")], f"{name}.__all__ exports a private name"
