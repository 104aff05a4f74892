"""Each chapter's notebook download is its Colab notebook (_ext/aim_book.py, _ext/aim_colab.py).

Reads the built HTML (no browser): the header's ``.ipynb`` button and the link under the
chapter's title both name ``notebooks/NAME.ipynb`` in the site, which is the notebook the
build generated for Colab (``_build/colab/book``), in plain Jupyter Markdown: no MyST
directive, role or target, and none of the book's TeX macros, which plain Jupyter would
show raw (the MyST notebook the theme's button gave had 9 directives, 27 roles and 30 such
macros in chapter 1).
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

import nbformat
import pytest
import yaml
from book_browser import HTML_DIR, REPO
from test_numbering import CHAPTERS, _require_build, _soup

MACROS = yaml.safe_load((REPO / "_config.yml").read_text())["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
MYST = re.compile(r"(?:```|:::)\{|\{(?:eq|numref|ref|prf:ref|cite(?::\w+)?|doc)\}`|^\([\w.:-]+\)=\s*$", re.M)
MACRO = re.compile(r"\\(" + "|".join(sorted(map(re.escape, MACROS), key=len, reverse=True)) + r")(?![A-Za-z])")


def _target(page, href):
    return (HTML_DIR / urljoin(page.relative_to(HTML_DIR).as_posix(), href)).resolve()


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_notebook_download_is_the_colab_notebook(page):
    _require_build()
    soup = _soup(page)
    button = soup.select_one("a.btn-download-notebook-button")
    link = soup.select_one("p.aim-notebook-link a[href]")
    assert button is not None and link is not None, f"{page.name}: no notebook download"
    expected = HTML_DIR / "notebooks" / f"{page.stem}.ipynb"
    assert _target(page, button["href"]) == expected, button["href"]
    assert _target(page, link["href"]) == expected, link["href"]
    assert expected.is_file(), f"no {expected.relative_to(HTML_DIR)} in the site"
    generated = HTML_DIR.parent / "colab" / "book" / f"{page.stem}.ipynb"
    assert expected.read_bytes() == generated.read_bytes(), "not the notebook this build generated"
    nb = nbformat.read(expected, as_version=4)
    nbformat.validate(nb)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert not MYST.findall(markdown), f"{page.name}: MyST left {MYST.findall(markdown)[:5]}"
    assert not MACRO.findall(markdown), f"{page.name}: book macros left {MACRO.findall(markdown)[:5]}"
