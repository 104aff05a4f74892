"""Shared readers for the edition and PDF tests (run after make editions and make pdf)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import aim_toc
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILDS = {"reader": ROOT / "_build" / "html",
          "student": ROOT / "_build" / "student" / "_build" / "html",
          "instructor": ROOT / "_build" / "instructor" / "_build" / "html"}
PDF = ROOT / "_build" / "pdf"
CHAPTERS = aim_toc.chapter_sources(ROOT)
SOLUTION = re.compile(r"^```\{solution-start\}\s*(?P<label>\S+)\n(?:.*?\n)?```\s*\n(?P<body>.*?)^```\{solution-end\}",
                      re.M | re.S)
EXERCISE = re.compile(r"^```\{exercise\}[^\n]*\n:label:\s*(?P<label>\S+)", re.M)
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<code>.*?)^```", re.M | re.S)


def squash(text: str) -> str:
    """Text without whitespace or hyphens, ligatures expanded (NFKC): what a page, or a PDF
    with its line-end hyphenation, shares with the source."""
    import unicodedata

    return re.sub(r"[\s\-‐↪]+", "", unicodedata.normalize("NFKC", text))


def _plain_run(prose: str) -> str | None:
    """The first run of at least seven (else five) plain words: no maths, markup or references."""
    for least in (7, 5):
        for line in prose.split("\n"):
            for piece in re.split(r"\$[^$]*\$|\{[a-z:-]+\}`[^`]*`|\*\*|[`*_()\[\]]", line):
                words = piece.strip(" .,;:").split()
                if len(words) >= least and all(re.fullmatch(r"[A-Za-z,;:.'’-]+", w) for w in words):
                    return " ".join(words)
    return None


@lru_cache(maxsize=None)
def solutions() -> tuple:
    """(label, a plain sentence of its prose or None, a line of its code) per solution: the
    first code line that no chapter has outside its solutions."""
    out = []
    outside = "\n".join(SOLUTION.sub("", p.read_text(encoding="utf-8")) for p in CHAPTERS)
    for path in CHAPTERS:
        text = path.read_text(encoding="utf-8")
        for m in SOLUTION.finditer(text):
            body = m.group("body")
            prose = CODE_CELL.sub("", body)
            prose = re.sub(r"\$\$.*?\$\$", "", prose, flags=re.S)
            code = "\n".join(c.group("code") for c in CODE_CELL.finditer(body))
            first = next((ln for ln in code.split("\n") if ln.strip() and len(ln.strip()) > 12
                          and not ln.lstrip().startswith(("#", "---", "tags:"))
                          and ln.strip() not in outside), None)
            out.append((m.group("label"), _plain_run(prose), first))
    return tuple(out)


def exercise_labels() -> list[str]:
    return [m.group("label") for p in CHAPTERS for m in EXERCISE.finditer(p.read_text(encoding="utf-8"))]


@lru_cache(maxsize=None)
def site_text(edition: str) -> dict:
    """Every HTML and JavaScript file of an edition's build: path -> its text, tags removed."""
    root = BUILDS[edition]
    if not (root / "index.html").exists():
        pytest.fail(f"no {edition} build at {root}: run make "
                    f"{'build-strict' if edition == 'reader' else edition} first")
    pages = {}
    for path in root.rglob("*"):
        if path.suffix in (".html", ".js", ".txt", ".md", ".ipynb", ".json") and "_static" not in path.parts \
                and "mathjax" not in path.parts:
            text = path.read_text(encoding="utf-8", errors="replace")
            if path.suffix == ".html":
                text = re.sub(r"<script\b.*?</script>", " ", text, flags=re.S)
                text = html.unescape(re.sub(r"<[^>]+>", "", text))
            pages[path.relative_to(root).as_posix()] = text
    return pages


@lru_cache(maxsize=None)
def search_terms(edition: str) -> set:
    text = (BUILDS[edition] / "searchindex.js").read_text(encoding="utf-8")
    data = json.loads(text[text.index("(") + 1: text.rindex(")")])
    return set(data["terms"]), set(data.get("alltitles", {}))


@lru_cache(maxsize=None)
def pdf_text(name: str) -> str:
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is missing (make tex installs poppler-utils)")
    path = PDF / name
    if not path.exists():
        pytest.fail(f"no {path}: run make pdf first")
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True,
                          text=True, check=True).stdout
