"""The vendored snapshot of Colab's GPU runtime (.ci/colab_runtime_gpu.txt) and the floors.

make test runs every Colab notebook in an environment pinned to the snapshot (scripts/colab_check.sh,
COLAB_ENVS=shipped); the package's floors (pyproject.toml) are the snapshot's versions, so that run
is also the run at the floors. These tests keep the three (snapshot, floors, TESTED_JAX) in step.
"""

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

from aim_tutorial.config import TESTED_JAX, _release

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / ".ci" / "colab_runtime_gpu.txt"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _script():
    spec = importlib.util.spec_from_file_location("colab_snapshot", ROOT / "scripts" / "colab_snapshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


snap = _script()
TEXT = SNAPSHOT.read_text()
PINS = snap.parse_snapshot(TEXT)


def test_snapshot_says_where_it_comes_from():
    assert "googlecolab/backend-info" in TEXT
    assert re.fullmatch(r"[0-9a-f]{40}", snap.header_value(TEXT, "commit"))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", snap.header_value(TEXT, "date"))
    assert re.fullmatch(r"3\.\d+\.\d+", snap.header_value(TEXT, "python"))
    assert len(PINS) > 100  # the whole pip freeze, not a hand-picked list


def test_floors_are_the_snapshot():
    """Every dependency's floor is Colab's version: the Colab-as-shipped run tests the floors."""
    deps = snap.dependencies((ROOT / "pyproject.toml").read_text())
    assert {n for n, _, _ in deps} == {re.split(r"[<>=~ ]", d)[0] for d in PYPROJECT["dependencies"]}
    wrong = [(n, v, PINS.get(snap.canonical(n))) for n, op, v in deps
             if op != ">=" or PINS.get(snap.canonical(n)) != v]
    assert not wrong, f"floors that are not Colab's versions (name, floor, Colab): {wrong}"


def test_python_floor_admits_colab():
    floor = re.fullmatch(r">=(3\.\d+)", PYPROJECT["requires-python"]).group(1)
    assert _release(floor) <= _release(snap.header_value(TEXT, "python"))


def test_tested_jax_starts_at_colab():
    """The oldest JAX the book is tested with is the one Colab ships (the shipped run)."""
    assert TESTED_JAX[0] == PINS["jax"] == PINS["jaxlib"]


def test_book_pins_satisfy_the_floors():
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    pins = {snap.canonical(k): v for k, v in pins.items()}
    low = [(n, pins.get(snap.canonical(n)), v) for n, _, v in snap.dependencies((ROOT / "pyproject.toml").read_text())
           if _release(pins[snap.canonical(n)]) < _release(v)]
    assert not low, f"requirements.txt pins below the floors: {low}"


def test_snapshot_round_trip(tmp_path, monkeypatch):
    """The refresh script keeps name==version lines, drops URL lines, reads the Python version."""
    src = tmp_path / "backend-info"
    src.mkdir()
    (src / "pip-freeze.gpu.txt").write_text("# comment\nJAX==0.9.0\njax_cuda12_plugin==0.9.0\n"
                                           "pkg @ https://example.org/pkg.whl\nnumpy==2.3.0\n")
    (src / "os-info-gpu.txt").write_text("# generated\nUbuntu 24.04 LTS\nPython 3.14.1\n")
    monkeypatch.setattr(snap, "SNAPSHOT", tmp_path / "out.txt")
    pins = snap.write_snapshot(*snap._read_source(type("A", (), {
        "source_dir": str(src), "date": "2027-01-02", "commit": "f" * 40, "url": None})()))
    assert pins == {"jax": "0.9.0", "jax-cuda12-plugin": "0.9.0", "numpy": "2.3.0"}
    text = (tmp_path / "out.txt").read_text()
    assert snap.header_value(text, "python") == "3.14.1"
    assert "left out: 1" in text and "example.org" not in text
    with pytest.raises(ValueError, match="no '# nothing:'"):
        snap.header_value(text, "nothing")
