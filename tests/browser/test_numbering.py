"""The book's numbering is consistent: per chapter, and every reference says the target's number.

Reads the built HTML (no browser needed): chapter N's title is numbered N; each numbered
object defined on chapter N's page (equation, figure, table, exercise, definition,
proposition, ...) carries a number N.k; and every internal link whose text names a
number ("Exercise 2.1", "Fig. 5.2", "(3.14)", "Proposition 3.4") points at an object
that has exactly that number and kind.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aim_toc
import pytest
from book_browser import HTML_DIR as HTML
from book_browser import _soup, book_pages

PAGES = [HTML / p for p in book_pages()]
NUMBERS = {Path(doc).name: k for doc, k in aim_toc.chapter_numbers().items()}
CHAPTERS = [p for p in PAGES if p.stem in NUMBERS]

NUMBER = r"(\d+(?:\.\d+)*)"
KINDS = ("Fig.", "Table", "Listing", "Exercise", "Solution", "Definition", "Proposition", "Theorem",
         "Lemma", "Remark", "Conjecture", "Corollary", "Example", "Algorithm", "Property",
         "Assumption", "Axiom", "Criterion", "Observation", "Proof")


def _chapter_number(path: Path) -> int:
    return NUMBERS[path.stem]


def _article(soup):
    return soup.find("article") or soup.find("main") or soup


@lru_cache(maxsize=None)
def _targets(path: Path) -> dict[str, str]:
    """Map element id -> the number label it displays ("Exercise 2.1", "(2.3)", "Fig. 2.4")."""
    soup = _soup(path)
    out: dict[str, str] = {}
    for eqno in soup.select("div.math span.eqno"):
        div = eqno.find_parent("div")
        text = eqno.get_text(" ", strip=True).replace("#", "").strip()
        if div is not None and div.get("id"):
            out[div["id"]] = text
    for num in soup.select("span.caption-number"):
        holder = num.find_parent(lambda t: t.get("id") is not None)
        if holder is not None:
            out.setdefault(holder["id"], num.get_text(strip=True).rstrip(":"))
    # sphinx-proof / sphinx-exercise titles: "Exercise 2.1 (title)" in the admonition title
    for box in soup.select("div.admonition[id], div.proof[id], div.exercise[id]"):
        title = box.find(class_="admonition-title")
        if title is not None:
            m = re.match(rf"\s*({'|'.join(map(re.escape, KINDS))})\s+{NUMBER}", title.get_text(" "))
            if m:
                out.setdefault(box["id"], f"{m.group(1)} {m.group(2)}")
    return out


def _require_build():
    if not CHAPTERS:
        pytest.fail(f"no built book at {HTML}: build it first (make build-strict)")


def test_book_is_built():
    _require_build()
    assert len(CHAPTERS) >= 8, [p.name for p in CHAPTERS]


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_title_and_objects_are_numbered_per_chapter(page):
    n = _chapter_number(page)
    h1 = _article(_soup(page)).find("h1")
    assert h1 is not None, f"{page.name}: no title"
    assert h1.get_text(" ", strip=True).startswith(f"{n}."), (
        f"{page.name}: title {h1.get_text(strip=True)!r} is not numbered {n}."
    )
    bad = {i: lab for i, lab in _targets(page).items()
           if not re.search(rf"(^|\s|\(){n}\.\d+", lab)}
    assert not bad, f"{page.name}: objects not numbered {n}.k: {bad}"


def _links(page: Path):
    for a in _article(_soup(page)).select("a.reference.internal[href]"):
        text = a.get_text(" ", strip=True)
        if re.search(r"\d", text):
            yield a, text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_references_render_their_targets_number(page):
    """A link text that names a number names the number (and kind) its target displays."""
    _require_build()
    wrong = []
    for a, text in _links(page):
        url = urlsplit(a["href"])
        if not url.fragment:
            continue
        target_page = (page.parent / unquote(url.path)).resolve() if url.path else page
        if not target_page.exists():
            continue  # broken links are the browser test's business
        label = _targets(target_page).get(unquote(url.fragment))
        if label is None:
            continue  # a section or a bibliography entry: no number to compare
        m_text = re.search(NUMBER, text)
        m_label = re.search(NUMBER, label)
        kind = label.split()[0] if not label.startswith("(") else None
        same_number = m_text and m_label and m_text.group(1) == m_label.group(1)
        kind_ok = kind is None or kind.rstrip(".") in text or text.startswith("(")
        # a hand-written kind word in the link must agree with the target's kind
        other_kind = [k for k in KINDS if k.rstrip(".").lower() in text.lower() and kind
                      and k.rstrip(".") != kind.rstrip(".")]
        if not same_number or not kind_ok or other_kind:
            wrong.append(f"link {text!r} -> #{url.fragment} which is {label!r}")
    assert not wrong, f"{page.name}: " + "; ".join(wrong)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_no_doubled_kind_words(page):
    """No "proposition Proposition 3.4" or "exercise Exercise 6" in the text."""
    _require_build()
    text = _article(_soup(page)).get_text(" ")
    doubled = re.findall(
        rf"\b(({'|'.join(k.rstrip('.') for k in KINDS)})s?\s+\2\s+{NUMBER})", text, flags=re.I
    )
    assert not doubled, f"{page.name}: doubled kind words: {[d[0] for d in doubled]}"


OTHER_PAGES = [p for p in PAGES if p not in CHAPTERS]


@pytest.mark.parametrize("page", OTHER_PAGES, ids=lambda p: p.stem)
def test_pages_outside_the_chapters_number_no_figures(page):
    """The introduction's and the benchmarks' figures are unnumbered (not "Fig. 1", "Fig. 2"
    of one counter shared by the pages outside the chapters)."""
    _require_build()
    numbers = [n.get_text(strip=True) for n in _article(_soup(page)).select("span.caption-number")]
    assert not numbers, f"{page.name}: numbered objects outside the chapters: {numbers}"


def test_proof_index_names_each_result_by_its_number():
    """sphinx-proof's index lists "Proposition 7.2" (linked to it, which displays that
    number), grouped under the chapter's numbered title, never a raw label."""
    _require_build()
    index = HTML / "prf-prf.html"
    soup = _soup(index)
    entries = soup.select("table.indextable a[href]")
    assert len(entries) >= 10, f"{index.name}: {len(entries)} entries"
    wrong = []
    for a in entries:
        text = a.get_text(" ", strip=True)
        url = urlsplit(a["href"])
        if not url.fragment:
            continue  # the jump links to the chapter groups
        label = _targets((index.parent / unquote(url.path)).resolve()).get(unquote(url.fragment))
        if label is None or text != label:
            wrong.append(f"{text!r} -> {a['href']} ({label!r})")
    assert not wrong, "; ".join(wrong)
    groups = [c.get_text(" ", strip=True) for c in soup.select("tr.cap strong")]
    assert groups and all(re.match(r"\d\. \S", g) for g in groups), groups


def test_api_page_shows_no_raw_labels():
    """The docstrings' references (eq. (bo-se), definition (def-aim), section (sec-...))
    appear on the API page as the targets' numbers."""
    _require_build()
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_doc_references import book_targets

    labels, _ = book_targets()
    article = _article(_soup(HTML / "book" / "api.html"))
    for literal in article.select("code, pre"):
        literal.decompose()
    raw = sorted({m for m in re.findall(r"\(([A-Za-z][\w-]*)\)", article.get_text(" ")) if m in labels})
    assert not raw, f"api.html: raw labels {raw}"
