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


def test_deep_exports_the_public_names_of_its_modules_once():
    """``aim_tutorial.deep`` is a subpackage (issue 49): its ``__all__`` is exactly the union of its five
    modules' ``__all__``, each name from one module, the same objects, so ``aim_tutorial.deep.<name>`` is
    the one address of each (and the API page documents each once, there)."""
    deep = importlib.import_module("aim_tutorial.deep")
    mods = [importlib.import_module(f"aim_tutorial.deep.{m}") for m in ("model", "gd", "channel", "state_evolution", "gamp")]
    names = [n for m in mods for n in m.__all__]
    assert len(set(names)) == len(names) and sorted(names) == sorted(deep.__all__)
    assert all(getattr(deep, n) is getattr(m, n) for m in mods for n in m.__all__)


def test_reproduce_re_exports_what_moved_out_of_it():
    """The runners moved to ``experiments`` and the file transaction to ``_runfiles`` (issue 49):
    ``reproduce`` still gives the same objects (scripts and chapter 6 import them from there), and a
    runner is in one ``__all__`` only (documented once, under ``experiments``)."""
    from aim_tutorial import _runfiles, experiments, reproduce

    assert all(getattr(reproduce, n) is getattr(experiments, n) for n in experiments.__all__)
    assert not set(experiments.__all__) & set(reproduce.__all__)
    for n in ("HeldInterrupt", "ResultsExistError", "read_manifest"):
        assert n in reproduce.__all__ and getattr(reproduce, n) is getattr(_runfiles, n)
