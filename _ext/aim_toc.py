"""The book's chapters, as ``_toc.yml`` lists them: the one place the build tooling, the scripts
and the tests learn which pages are chapters.

A chapter is a page of a part marked ``numbered: true`` (chapter N is the N-th such page, in the
order of ``_toc.yml``: its equations, figures and exercises are numbered N.1, N.2, ...); the root
page and the unnumbered reference pages are not chapters. A new chapter is one line in
``_toc.yml``: the Colab notebooks, the teaching metadata, the slides and the tests find it here,
whatever its file is called.

Used by the Sphinx extensions (``aim_book``, ``aim_colab``, ``aim_problems``, ``aim_site``,
``aim_teaching``; Sphinx puts ``_ext`` on the path), by ``scripts/slides.py`` and by the tests
(``tests/conftest.py`` puts ``_ext`` on the path).
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TOC = "_toc.yml"


def chapters(root: Path | str = ROOT, toc: str = TOC) -> list[str]:
    """The chapters' document names (``"book/01_model"``), in the book's order: the pages of the
    parts of ``root/toc`` marked ``numbered: true``. No table of contents there (a build of
    something else, such as the problem sets): none."""
    path = Path(root) / toc
    if not path.is_file():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return [entry["file"] for part in data.get("parts", []) if part.get("numbered")
            for entry in part.get("chapters", [])]


def chapter_sources(root: Path | str = ROOT, toc: str = TOC) -> list[Path]:
    """The chapters' MyST sources (``root/book/01_model.md``), in the book's order."""
    return [Path(root) / f"{doc}.md" for doc in chapters(root, toc)]


def chapter_numbers(root: Path | str = ROOT, toc: str = TOC) -> dict[str, int]:
    """Each chapter's number by its document name (``{"book/01_model": 1, ...}``)."""
    return {doc: k for k, doc in enumerate(chapters(root, toc), start=1)}
