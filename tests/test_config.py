"""Tests of :func:`aim_tutorial.config.compilation_cache`, each in a fresh process: the setting is
global to JAX, and a process's first compilation fixes its cache."""

import json
import os
import subprocess
import sys

import pytest

from aim_tutorial import config

# a program compiled after the cache is turned on, and JAX's count of the cache's hits and misses
_PROGRAM = """
import json, sys
import jax, jax.numpy as jnp
import aim_tutorial as aim
events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append(name))
jnp.ones(3) * 2  # a compilation before the cache is turned on
path = aim.config.compilation_cache(*sys.argv[1:])
jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.ones(7)).block_until_ready()
print("RESULT" + json.dumps(dict(
    path=path, hits=events.count("/jax/compilation_cache/cache_hits"),
    misses=events.count("/jax/compilation_cache/cache_misses"),
    min_secs=jax.config.jax_persistent_cache_min_compile_time_secs,
    min_bytes=jax.config.jax_persistent_cache_min_entry_size_bytes)))
"""


def _run(*args, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT"))}
    out = subprocess.run([sys.executable, "-c", _PROGRAM, *args], capture_output=True, text=True, check=True,
                         env=dict(clean, **env))
    return json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")][-1][len("RESULT"):])


def test_a_second_process_reads_the_programs_of_the_first(tmp_path):
    cache = str(tmp_path / "cache")
    first = _run(cache)
    assert first["path"] == cache and first["misses"] >= 1 and first["hits"] == 0
    # every program is kept, however quickly it compiles (JAX's default: those over 1 s only)
    assert first["min_secs"] == 0.0 and first["min_bytes"] == -1
    entries = sorted(os.listdir(cache))
    assert any(e.startswith("jit__lambda") for e in entries)
    second = _run(cache)
    assert second["hits"] >= 1 and second["misses"] == 0
    assert sorted(os.listdir(cache)) == entries


def test_the_default_directory(tmp_path):
    # JAX_COMPILATION_CACHE_DIR, when set, is kept; else XDG_CACHE_HOME/aim_tutorial/jax
    assert _run(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "mine"))["path"] == str(tmp_path / "mine")
    r = _run(XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert r["path"] == str(tmp_path / "xdg" / "aim_tutorial" / "jax")
    assert os.listdir(r["path"])
    # thresholds set in the environment are the user's
    r = _run(str(tmp_path / "c"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="5")
    assert r["min_secs"] == 5.0  # nothing here compiles for 5 s: nothing is kept
    assert not any(e.startswith("jit__lambda") for e in (os.listdir(r["path"]) if os.path.isdir(r["path"]) else []))


@pytest.mark.parametrize("path, error, match", [
    (3, TypeError, "path must be a string"),
    (True, TypeError, "path must be a string"),
    (b"/tmp/x", TypeError, "path must be a string"),
    ("", ValueError, "path must name a directory"),
    ("   ", ValueError, "path must name a directory"),
])
def test_bad_paths(path, error, match):
    with pytest.raises(error, match=match):
        config.compilation_cache(path)
