"""Publishing: the one place of the version and the URLs, and the tested JAX range."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

import aim_tutorial
from aim_tutorial.config import TESTED_JAX, _release, check_runtime_jax

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
REPO, BOOK = PROJECT["urls"]["Repository"], PROJECT["urls"]["Book"]


# -- the tested range of JAX


@pytest.mark.parametrize("version", ["0.4.30", "0.5", "0.7.2", "0.10.2", "0.10.2.dev20260101", "v0.6.0"])
def test_check_runtime_jax_inside(version):
    assert check_runtime_jax(version, tested=("0.4.30", "0.10.2")) is None


@pytest.mark.parametrize("version", ["0.4.29", "0.4.3", "0.10.3", "0.11", "1.0.0"])
def test_check_runtime_jax_outside_is_one_line_naming_the_range(version):
    line = check_runtime_jax(version, tested=("0.4.30", "0.10.2"))
    assert line.startswith("WARNING: ") and len(line.splitlines()) == 1
    assert f"JAX {version} " in line and "(jax 0.4.30 to 0.10.2)" in line


def test_check_runtime_jax_default_range_and_installed_version(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"jax": "0.3.25"}[name])
    line = check_runtime_jax()
    assert "JAX 0.3.25" in line and TESTED_JAX[0] in line and TESTED_JAX[1] in line
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"jax": TESTED_JAX[1]}[name])
    assert check_runtime_jax() is None


def test_version_comparison_is_numeric():
    assert _release("0.10.2") > _release("0.9.9") > _release("0.4.30") > _release("0.4.4")
    assert _release("0.5") == _release("0.5.0")
    with pytest.raises(ValueError, match="version"):
        _release("jax")


def test_tested_range_holds_the_pinned_jax():
    """The exact pin that make test runs with lies inside TESTED_JAX, above pyproject's floor."""
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    low, high = (_release(v) for v in TESTED_JAX)
    assert low <= _release(pins["jax"]) <= high and pins["jaxlib"] == pins["jax"]
    floor = next(d for d in PROJECT["dependencies"] if d.startswith("jax>="))[len("jax>="):]
    assert _release(floor) <= low


# -- one place for the version and the URLs


def test_version_is_pyprojects():
    assert aim_tutorial.__version__ == VERSION, (
        "the installed metadata is stale: reinstall the package (make install)")
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.py"], capture_output=True,
                             text=True, check=True).stdout.split()
    written = [f for f in tracked if re.search(r"^__version__\s*=\s*['\"]", (ROOT / f).read_text(), re.M)]
    assert not written, f"a version written outside pyproject.toml: {written}"


def _tracked_text():
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True,
                           check=True).stdout.split()
    for f in files:
        if Path(f).suffix in {".md", ".py", ".yml", ".yaml", ".toml", ".txt", ".sh", ".cfg", ".js",
                              ".ipynb"} or Path(f).name == "Makefile":
            path = ROOT / f
            if path.is_file():
                yield f, path.read_text(encoding="utf-8", errors="replace")


def test_urls_agree_everywhere():
    """Every link to the book's GitHub Pages site is into the book, every link to the project's
    GitHub owner is the repository, and _config.yml (Jupyter Book's repository button and
    baseurl) names the same two as pyproject.toml."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == REPO and config["html"]["baseurl"] == BOOK
    owner = REPO.rsplit("/", 2)[-2]
    bad = []
    for name, text in _tracked_text():
        for url in re.findall(rf"https?://{re.escape(owner)}\.github\.io\b[^\s\"')\]>`]*", text):
            if not url.startswith(BOOK):
                bad.append((name, url))
        for url in re.findall(rf"https://github\.com/{re.escape(owner)}/[\w.-]+", text):
            if url.removesuffix(".git") != REPO:
                bad.append((name, url))
    assert not bad, bad[:10]
