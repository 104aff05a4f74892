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


def _load_reader():
    spec = importlib.util.spec_from_file_location("aim_reader", ROOT / "_ext" / "aim_reader.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _App:
    """What ``_process_docstring`` reads of the Sphinx application: the source directory."""

    srcdir = str(ROOT)


def _docstring(*lines):
    reader = _load_reader()
    lines = list(lines)
    reader._process_docstring(_App(), "function", "f", None, {}, lines)
    return lines


def test_docstring_labels_become_number_roles():
    """eq./definition/exercise/proposition/section labels of the book become the roles that
    print their numbers; "of chapter N" after one goes; unknown labels stay as written."""
    out = _docstring("Sample the model, definition (def-aim) of chapter 1.",
                     "The law of ``Z`` (exercise (ex-rmt-1) of chapter 2), eq. (bo-se),",
                     "known up to a constant (proposition (prop-deep-decouple)); Chapter 4,",
                     "section (sec-bo-one-curve). Not a label: (cross-fitting), eq. (no-such-eq).")
    assert out == ["Sample the model, :prf:ref:`def-aim`.",
                   "The law of ``Z`` (:numref:`ex-rmt-1`), eq. :eq:`bo-se`,",
                   "known up to a constant (:prf:ref:`prop-deep-decouple`); Chapter 4,",
                   ":numref:`sec-bo-one-curve`. Not a label: (cross-fitting), eq. (no-such-eq)."]


def test_docstring_literals_are_left_alone_across_lines():
    """An inline literal that wraps to the next line hides nothing after it closes, and
    shows nothing inside it; literal and doctest blocks stay as written."""
    out = _docstring("q: overlap (``q_12 =",
                     "    sqrt(rho_1 rho_2)`` when they decouple, eq. (eq-deep-se)), ``eq. (bo-se)``.",
                     "",
                     "Example::",
                     "",
                     "    eq. (bo-se)",
                     "",
                     ">>> 'eq. (bo-se)'")
    assert out[1] == "    sqrt(rho_1 rho_2)`` when they decouple, eq. :eq:`eq-deep-se`), ``eq. (bo-se)``."
    assert out[3:] == ["Example::", "", "    eq. (bo-se)", "", ">>> 'eq. (bo-se)'"]
