"""The book's Sphinx helpers (``_ext/aim_book.py``) that do not need a build."""

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_ext():
    spec = importlib.util.spec_from_file_location("aim_book", ROOT / "_ext" / "aim_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_merge_streams_leaves_the_executed_notebook_alone():
    """A print the kernel sent as two messages renders as one box; the notebook keeps both."""
    ext = _load_ext()
    ext._patch_merge_streams()
    ext._patch_merge_streams()          # idempotent: a second build in one process
    from myst_nb.core import render

    outputs = [nbformat.v4.new_output("stream", name="stdout", text="a table\n"),
               nbformat.v4.new_output("stream", name="stdout", text="\n"),
               nbformat.v4.new_output("stream", name="stdout", text="more\n")]
    merged = render.coalesce_streams(outputs)
    assert [o["text"] for o in merged] == ["a table\nmore\n"]
    assert [o["text"] for o in outputs] == ["a table\n", "\n", "more\n"]
