"""The three editions of the book (make build-strict, make editions): the student edition
holds no solution, not in its pages, its search index or any file it ships; the instructor
edition holds every solution, unfolded, and each chapter's teaching notes; the exercises
are numbered alike in all three."""

from __future__ import annotations

import re

import pytest

from conftest import BUILDS, CHAPTERS, exercise_labels, search_terms, site_text, solutions, squash

EDITIONS = ("reader", "student", "instructor")


def test_every_solution_has_a_recognisable_sentence_and_code():
    found = solutions()
    assert sorted(label for label, _, _ in found) == sorted(exercise_labels())
    for label, _sentence, code in found:
        assert code, f"{label}: its solution runs no code"
    # most solutions also have a sentence of plain words (some are all maths)
    assert sum(1 for _, sentence, _ in found if sentence) >= 0.8 * len(found)


@pytest.mark.parametrize("edition", EDITIONS)
def test_solution_text(edition):
    """Each solution's first plain sentence and first code line: absent from every file of
    the student edition, present in the reader's and the instructor's."""
    pages = {path: squash(text) for path, text in site_text(edition).items()}
    for label, sentence, code in solutions():
        for needle in filter(None, (sentence, code)):
            where = [p for p, text in pages.items() if squash(needle) in text]
            if edition == "student":
                assert not where, f"student edition: the solution of {label} in {where}: {needle!r}"
            else:
                assert where, f"{edition} edition: the solution of {label} is missing: {needle!r}"


def _solution_only_stems() -> set:
    """Stems (Sphinx's English stemmer, as its search index) of the words that the reader's
    book prints only inside its solutions."""
    from bs4 import BeautifulSoup
    from sphinx.search.en import SearchEnglish

    stem = SearchEnglish({}).stem
    inside, outside = set(), set()
    for page in BUILDS["reader"].rglob("*.html"):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        main = soup.find("main") or soup
        for div in main.select("div.solution"):
            inside |= {stem(w.lower()) for w in re.findall(r"[A-Za-z]{4,}", div.get_text(" "))}
            div.decompose()
        outside |= {stem(w.lower()) for w in re.findall(r"[A-Za-z]+", main.get_text(" "))}
    return inside - outside


def test_search_index_of_the_student_edition_has_no_solution():
    stems = _solution_only_stems()
    assert len(stems) >= 10, stems          # enough words to tell the editions apart
    for edition in EDITIONS:
        terms, titles = search_terms(edition)
        leaked = stems & terms
        if edition == "student":
            assert not leaked, f"student search index: words of the solutions only: {sorted(leaked)}"
            assert not [t for t in titles if t.startswith("Solution")], titles
        else:
            assert len(leaked) > 0.8 * len(stems), (edition, sorted(stems - terms))


def test_student_edition_ships_no_source_and_no_notebook_button():
    root = BUILDS["student"]
    assert not (root / "_sources").exists()
    for page in root.glob("book/0*.html"):
        text = page.read_text(encoding="utf-8")
        assert "colab.research.google.com" not in text, page.name
        assert "download-source-button" not in text, page.name


def _exercise_numbers(edition: str, page: str) -> set[str]:
    """The numbers of the exercises of a chapter's page (not those it refers to elsewhere)."""
    text = site_text(edition)[page]
    chapter = str(int(page.split("/")[-1][:2]))
    return {n for n in re.findall(r"Exercise (\d+\.\d+)", text) if n.split(".")[0] == chapter}


@pytest.mark.parametrize("edition", ["student", "instructor"])
def test_exercises_are_numbered_as_in_the_reader_edition(edition):
    numbered = 0
    for path in CHAPTERS:
        page = f"book/{path.stem}.html"
        reader = _exercise_numbers("reader", page)
        assert _exercise_numbers(edition, page) == reader, (edition, page)
        numbered += len(reader)
    assert numbered == len(exercise_labels())


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_exercise_shows_its_metadata(edition):
    pages = site_text(edition)
    lines = [ln for p in (f"book/{c.stem}.html" for c in CHAPTERS)
             for ln in re.findall(r"Difficulty [123] of 3 \([a-z ]+\) · about \d+ min · practises "
                                  r"(?:Section|Chapter) [\d.]+ · (?:runs on a CPU|needs a GPU)", pages[p])]
    assert len(lines) == len(exercise_labels()), lines


def test_teaching_notes_in_the_instructor_edition_only():
    for edition in EDITIONS:
        pages = site_text(edition)
        for path in CHAPTERS:
            text = pages[f"book/{path.stem}.html"]
            has = "Teaching notes (instructor edition)" in text
            assert has == (edition == "instructor"), (edition, path.name)


def test_instructor_solutions_are_unfolded():
    for path in CHAPTERS:
        raw = (BUILDS["instructor"] / "book" / f"{path.stem}.html").read_text(encoding="utf-8")
        assert re.search(r'class="[^"]*\bsolution\b[^"]*\bdropdown\b', raw) is None, path.name
        raw_reader = (BUILDS["reader"] / "book" / f"{path.stem}.html").read_text(encoding="utf-8")
        assert re.search(r'class="[^"]*\bsolution\b[^"]*\bdropdown\b', raw_reader), path.name
