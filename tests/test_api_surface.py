"""The public signatures, pinned: every argument's name, kind (positional, keyword-only) and default.

A default is part of what a function computes when it is not given (``beta=1.0``, ``damping=0.5``,
``T=2``): changing one silently changes every result that relies on it, and the chapters rely on
many. This test compares each public function's ``inspect.signature`` (and each options tuple's
field defaults) with ``tests/data/api_signatures.json``. When the API changes on purpose, rewrite
the file and review its diff:

    python tests/test_api_surface.py --update

Mutation testing (``scripts/mutation.py``) counts on it: a default moved by one, or a ``*`` (the
start of the keyword-only arguments) turned into ``/``, changes no result the other tests compute
with explicit arguments.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from pathlib import Path

import pytest

PINNED = Path(__file__).parent / "data" / "api_signatures.json"
MODULES = ["aim_tutorial"] + ["aim_tutorial." + m for m in (
    "model", "rmt", "rmt_device", "state_evolution", "amp", "amp_kernel", "amp_device", "gd", "deep", "counting", "replica", "config", "channels",
    "channels.base", "channels.softmax", "channels.linear", "channels.hardmax", "channels.elementwise",
    "channels.relu", "channels.sigmoid", "channels.generic", "channels.causal")]


def _stable(text: str) -> str:
    """A signature's text without object addresses (``<function f at 0x7f...>`` -> ``<function f>``)."""
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def surface() -> dict:
    """``{module.name: signature text, or {"fields", "defaults"} for a NamedTuple}`` of every name in
    the ``__all__`` of the package and of its core modules."""
    out = {}
    for name in MODULES:
        mod = importlib.import_module(name)
        for attr in getattr(mod, "__all__", ()):
            obj = getattr(mod, attr)
            key = f"{name}.{attr}"
            if isinstance(obj, type) and hasattr(obj, "_field_defaults"):
                out[key] = {"fields": list(obj._fields),
                            "defaults": {k: _stable(repr(v)) for k, v in obj._field_defaults.items()}}
            elif callable(obj):
                try:
                    out[key] = _stable(str(inspect.signature(obj)))
                except (TypeError, ValueError):  # a builtin without a signature
                    continue
    return out


def test_public_signatures_are_pinned():
    pinned = json.loads(PINNED.read_text())
    now = surface()
    changed = {k: (pinned.get(k), now.get(k)) for k in sorted(set(pinned) | set(now)) if pinned.get(k) != now.get(k)}
    assert not changed, ("public signatures differ from tests/data/api_signatures.json (was, now); if on "
                         "purpose, run python tests/test_api_surface.py --update:\n"
                         + "\n".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changed.items()))


@pytest.mark.parametrize("name", ["beta", "c", "damping", "noise"])
def test_pinned_file_holds_the_usual_defaults(name):
    """The file is not empty nor stale in an obvious way: the common settings appear with their
    documented defaults (beta = 1, c = 1, damping 0.5 for GAMP-RIE, noise = 0)."""
    text = PINNED.read_text()
    expected = {"beta": "beta: 'float' = 1.0", "c": "c: 'float' = 1.0", "damping": '"damping": "0.5"',
                "noise": "noise: 'float' = 0.0"}[name]
    assert expected in text


if __name__ == "__main__":
    if "--update" in sys.argv:
        PINNED.parent.mkdir(parents=True, exist_ok=True)
        PINNED.write_text(json.dumps(surface(), indent=1, sort_keys=True) + "\n")
        print(f"wrote {PINNED} ({len(surface())} names)")
    else:
        print(json.dumps(surface(), indent=1, sort_keys=True))
