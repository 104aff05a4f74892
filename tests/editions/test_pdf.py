"""The printable book and problem sets (make pdf): they build, hold every chapter and
every exercise with the HTML book's numbers, print no unresolved reference ("??"), and the
problem sets without solutions hold none."""

from __future__ import annotations

import json
import re

import pytest

from conftest import CHAPTERS, ROOT, exercise_labels, pdf_text, solutions, squash

LISTING = ROOT / "_build" / "problems" / "problem_sets.json"


def _expected_numbers() -> dict[int, list[str]]:
    """Chapter -> its exercise numbers ("1.1", "1.2"), as the HTML book numbers them."""
    out = {}
    for k, path in enumerate(CHAPTERS, start=1):
        count = len(re.findall(r"^```\{exercise\}", path.read_text(encoding="utf-8"), re.M))
        out[k] = [f"{k}.{i}" for i in range(1, count + 1)]
    return out


def test_book_pdf_has_every_chapter_and_exercise():
    text = pdf_text("book.pdf")
    assert "??" not in text, [ln for ln in text.split("\n") if "??" in ln][:5]
    assert re.search(r"Exercise \d+\.\d+\.\d+", text) is None     # not numbered by section
    titles = [re.search(r"^# (.+)$", p.read_text(encoding="utf-8"), re.M).group(1) for p in CHAPTERS]
    squashed = squash(text)
    for title in titles:                       # plain-text titles (the ones without maths)
        if "$" not in title:
            assert squash(title) in squashed, title
    found = set(re.findall(r"Exercise (\d+\.\d+) \(", text))
    expected = {n for numbers in _expected_numbers().values() for n in numbers}
    assert found == expected, (sorted(found ^ expected))
    assert len(expected) == len(exercise_labels())
    # each exercise is printed once, each solution once (the PDF has no folding)
    for number in expected:
        assert len(re.findall(rf"^\s*Exercise {re.escape(number)} \(", text, re.M)) == 1, number
        assert len(re.findall(rf"Solution to Exercise {re.escape(number)} \(", text)) == 1, number


def test_problem_sets():
    listing = json.loads(LISTING.read_text())
    expected = _expected_numbers()
    assert sorted({p["chapter"] for p in listing}) == sorted(expected)
    assert len(listing) == 2 * len(expected)
    by_chapter = {}
    for p in listing:
        text = pdf_text(f"{p['name']}.pdf")
        assert "??" not in text, p["name"]
        found = re.findall(r"Exercise (\d+\.\d+):", text)
        assert found == expected[p["chapter"]], (p["name"], found)
        assert p["exercises"] == len(found)
        solutions_printed = len(re.findall(r"^\s*Solution\s*$", text, re.M))
        assert solutions_printed == (len(found) if p["solutions"] else 0), p["name"]
        assert len(re.findall(r"Difficulty [123] of 3", text)) == len(found), p["name"]
        by_chapter.setdefault(p["chapter"], {})[p["solutions"]] = squash(text)
    # each solution's code (printed verbatim, unlike its maths): in the solutions only
    for label, _, code in solutions():
        code = code.split("  #")[0]             # without its comment (typeset, not verbatim)
        chapter = next(k for k in expected if label in _labels_of(k))
        assert squash(code) in by_chapter[chapter][True], (label, code)
        assert squash(code) not in by_chapter[chapter][False], (label, code)


def _labels_of(chapter: int) -> list[str]:
    text = CHAPTERS[chapter - 1].read_text(encoding="utf-8")
    return re.findall(r"^```\{exercise\}[^\n]*\n:label:\s*(\S+)", text, re.M)


def test_figures_are_vector():
    """Every figure of the HTML book is in the PDF, drawn as vectors (its SVG converted to
    PDF), the explorers as their first view; none is printed as its text repr."""
    tex = (ROOT / "_build" / "latex" / "book.tex").read_text(encoding="utf-8")
    html = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "_build" / "html" / "book").glob("*.html"))
    figures = len(re.findall(r'<img [^>]*\.svg', html)) + html.count('class="aim-vega"')
    graphics = re.findall(r"includegraphics(?:\[[^]]*\])?\{\{([^}]*)\}(\.[a-z]+)\}", tex)
    assert len(graphics) >= figures > 30, (len(graphics), figures)
    assert {ext for _, ext in graphics} == {".pdf"}, graphics
    assert "Figure size" not in tex


@pytest.mark.parametrize("chapter, least", [("Benchmarks", 8), ("Notation", 5)])
def test_tables_fit_their_columns(chapter, least):
    """The tables of the benchmarks page (up to ten columns) and of the notation page (long code
    names) print every cell inside its column: no overfull line in them in the LaTeX log. Sphinx
    lets tabulary squeeze a column to three digits, and "float64" printed as "float6" until the
    book's preamble set eight; inline code broke only after . , ; ? ! /, and
    ``alpha_perfect_recovery`` ran 64 pt into the next column until it could break after ``_``."""
    tex = (ROOT / "_build" / "latex" / "book.tex").read_text(encoding="utf-8").splitlines()
    log = (ROOT / "_build" / "latex" / "book.log").read_text(encoding="utf-8", errors="replace")
    chapters = [i for i, line in enumerate(tex, 1) if line.startswith(r"\chapter{")]
    first = next(i for i in chapters if rf"\chapter{{{chapter}}}" in tex[i - 1])
    last = next((i for i in chapters if i > first), len(tex))
    tables, start = [], None
    for i, line in enumerate(tex, 1):
        if re.search(r"\\begin\{(tabulary|longtable)\}", line):  # longtable: above 30 rows
            start = i
        elif re.search(r"\\end\{(tabulary|longtable)\}", line) and start is not None:
            if first <= start <= last:
                tables.append((start, i))
            start = None
    assert len(tables) >= least, tables
    over = [(float(m[1]), int(m[2])) for m in
            re.finditer(r"Overfull \\hbox \(([\d.]+)pt too wide\) in paragraph at lines (\d+)--\d+", log)]
    inside = [(pt, line) for pt, line in over if any(a <= line <= b for a, b in tables) and pt > 1.0]
    assert not inside, inside
