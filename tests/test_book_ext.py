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


def test_vega_bundle_is_a_classic_script():
    """The Vega bundle runs as a classic script, which Chromium runs from file:// too (a
    module script it refuses there): vl-convert's module imports and exports nothing, so a
    strict function around it keeps its names out of the page's scope, as the module did."""
    import re
    import shutil
    import subprocess

    import vl_convert

    raw = vl_convert.javascript_bundle()
    # what a function could not hold, or a module would need
    assert "import.meta" not in raw
    statement = r"(^|[;}\s])(import\s*[{*\w][^;]*from\s*['\"]|export\s*(\{|default\b|const\b|function\b))"
    assert not re.search(statement, raw), "the bundle imports or exports"
    ext = _load_ext()
    script = ext.vega_bundle_script()
    assert script.startswith('(function () {\n"use strict";\n') and script.endswith("\n})();\n")
    assert "window.vegaEmbed=" in script.replace(" ", "")
    node = shutil.which("node")
    if node:         # a top-level await, say, would not parse inside the function
        out = subprocess.run([node, "--check", "-"], input=script, text=True, capture_output=True)
        assert out.returncode == 0, out.stderr[-2000:]


def test_download_button_points_at_the_colab_notebook():
    ext = _load_ext()
    buttons = [{"label": "download-buttons", "buttons": [
        {"label": "download-notebook-button", "url": "../_sources/book/01_model.ipynb", "text": ".ipynb"},
        {"label": "download-source-button", "url": "../_sources/book/01_model.md", "text": ".md"}]}]
    ext.point_download_button(buttons, "../notebooks/01_model.ipynb")
    nb, src = buttons[0]["buttons"]
    assert nb["url"] == "../notebooks/01_model.ipynb" and nb["tooltip"] == ext.NOTEBOOK_TOOLTIP
    assert src["url"] == "../_sources/book/01_model.md"
    # a page the theme gave no notebook button: one is added, first in the menu
    buttons = [{"label": "launch-buttons", "buttons": []},
               {"label": "download-buttons", "buttons": [{"label": "download-source-button", "url": "x.md"}]}]
    ext.point_download_button(buttons, "../notebooks/02_random_matrices.ipynb")
    assert buttons[1]["buttons"][0]["url"] == "../notebooks/02_random_matrices.ipynb"
    assert buttons[0]["buttons"] == []


def test_chapter_links_its_notebook_under_its_title():
    ext = _load_ext()
    body = '<section id="x"><h1>1. The model<a class="headerlink" href="#x">#</a></h1>\n<p>Text</p>'
    out = ext.notebook_line(body, "../notebooks/01_model.ipynb", "01_model.ipynb")
    head, line, rest = out.split("\n", 2)
    assert head.endswith("</h1>") and rest == "<p>Text</p>"
    assert 'class="aim-notebook-link"' in line and 'href="../notebooks/01_model.ipynb" download' in line


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


def test_pybtex_plugins_are_found_without_reading_the_entry_points(monkeypatch):
    """Every pybtex plugin is registered at run time when the extension loads: a lookup (the
    text backend of each name rendered for sorting and labels, each style of each
    bibliography) is then a dictionary read, not a pass over every installed distribution's
    entry points (2066 passes were 55 % of a build). The classes are those of the entry points."""
    from importlib.metadata import distributions

    import pybtex.plugin as plugin

    ext = _load_ext()
    entry = {(ep.group, ep.name): ep for dist in distributions() for ep in dist.entry_points
             if ep.group.startswith("pybtex.")}

    def no_scan(*args, **kwargs):
        raise AssertionError(f"pybtex read the entry points: {args} {kwargs}")

    monkeypatch.setattr(plugin, "entry_points", no_scan)
    assert ext._text("Zdeborov{\\'a}") == "Zdeborová"
    for group, name, alias in (("pybtex.backends", "text", True), ("pybtex.backends", "latex", False),
                               ("pybtex.style.formatting", "unsrt", False),
                               ("pybtex.style.names", "plain", False)):
        found = plugin.find_plugin(group, name)
        assert found is entry[(group + ".aliases" if alias else group, name)].load()
    # the book's own style (the class of the extension's first load in this process)
    assert plugin.find_plugin("pybtex.style.formatting", "aimstyle").__qualname__ == ext.AimStyle.__qualname__
    assert plugin.find_plugin("pybtex.database.input", filename="references.bib") is \
        entry[("pybtex.database.input.suffixes", ".bib")].load()
