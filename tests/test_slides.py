"""The slide generator (scripts/slides.py): what a chapter's deck takes from its source."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import slides  # noqa: E402

SOURCE = """---
kernelspec:
  name: python3
---

(ch-x)=
# A chapter with $d$ tokens

## Overview

```{code-cell} ipython3
# a comment, not a heading
x = 1
```

```{prf:definition} A thing
$$
h = x^\\top S x
$$ (eq-h)
```

$$
y = g(h)
$$ (eq-y)

$$
\\text{unlabelled}
$$

## Results

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: A curve.
    name: fig-curve
---
plt.show()
```

$$
z = 2
$$ (eq-z)

## Key takeaways

- The indices {eq}`eq-z` are
  Gaussian ($Q_0 = 1+\\rho$).
- **Two**: see {numref}`fig-curve`.

```{teaching-notes}
- not a takeaway
```

## Exercises
"""


def test_outline_of_a_chapter_source():
    out = slides.outline(SOURCE, 3)
    assert out.title == "A chapter with $d$ tokens"
    assert out.sections == ["Overview", "Results", "Key takeaways", "Exercises"]
    # labelled equations only, those in directives too, none from code cells
    assert [e.label for e in out.equations] == ["eq-h", "eq-y", "eq-z"]
    assert out.equations[0].tex == "h = x^\\top S x" and out.equations[2].section == "Results"
    assert [(f.label, f.section) for f in out.figures] == [("fig-curve", "Results")]
    assert out.takeaways == ["The indices {eq}`eq-z` are Gaussian ($Q_0 = 1+\\rho$).",
                             "**Two**: see {numref}`fig-curve`."]
    assert out.cited == ["eq-z"]
    # the cited equation first, completed up to MIN_EQUATIONS, in the chapter's order
    assert slides.MIN_EQUATIONS == 3 and [e.label for e in out.key_equations()] == ["eq-h", "eq-y", "eq-z"]


def test_no_takeaways_is_a_clear_error():
    source = SOURCE.replace("## Key takeaways", "## Summary")
    with pytest.raises(slides.ChapterSourceError, match="chapter 3 .*no '## Key takeaways' section"):
        slides.outline(source, 3)
    with pytest.raises(slides.ChapterSourceError, match="no title"):
        slides.outline("## Key takeaways\n\n- one\n", 3)


def test_deck_from_the_source_alone(tmp_path):
    md = tmp_path / "03_thing.md"
    md.write_text(SOURCE, encoding="utf-8")
    deck = slides.deck(md, None, "The book", number=3)
    assert deck.count("<section") == 2 + 3 + 1     # title, outline, 3 equations, 1 takeaways slide
    assert "A chapter with \\(d\\) tokens" in deck and "h = x^\\top S x" in deck
    assert "Gaussian (\\(Q_0 = 1+\\rho\\))" in deck and "<strong>Two</strong>" in deck
    assert 'src="reveal/reveal.js"' in deck and 'src="../../mathjax/tex-mml-chtml.js"' in deck
    assert "http" not in deck.replace("https://revealjs.com", "")    # nothing from the network


def test_every_chapter_has_a_deck_outline():
    for number, md in enumerate(slides.chapters(), start=1):
        out = slides.outline(md.read_text(encoding="utf-8"), number)
        assert out.takeaways and out.key_equations(), md.name
        assert set(out.cited) <= {e.label for e in out.equations}, md.name


# -- the pages' links to the downloads (_ext/aim_site.py)


def _load_site_ext():
    import importlib.util

    spec = importlib.util.spec_from_file_location("aim_site", ROOT / "_ext" / "aim_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _App:
    srcdir = str(ROOT)  # the book's _toc.yml numbers the chapters

    class builder:
        format = "html"

    class config:
        aim_edition = "reader"

    class env:
        found_docs = {"book/intro", "book/01_model", "book/02_random_matrices", "book/teaching"}
        titles = {"book/01_model": type("T", (), {"astext": lambda self: "The model"})(),
                  "book/02_random_matrices": type("T", (), {"astext": lambda self: "Matrices"})()}


def _pathto(target, _file):
    return "../" + target


def test_site_links_only_with_aim_site_in_the_readers_book(monkeypatch):
    ext = _load_site_ext()
    monkeypatch.delenv("AIM_SITE", raising=False)
    assert not ext.enabled(_App)
    monkeypatch.setenv("AIM_SITE", "1")
    assert ext.enabled(_App)
    monkeypatch.setattr(_App.config, "aim_edition", "student")
    assert not ext.enabled(_App)


def test_chapter_page_gets_its_problem_set_and_slides_under_the_notebook_line(monkeypatch):
    ext = _load_site_ext()
    monkeypatch.setenv("AIM_SITE", "1")
    body = '<h1>1. The model</h1>\n<p class="aim-notebook-link">nb</p>\n<p>Text</p>'
    context = {"body": body, "pathto": _pathto}
    ext._page_links(_App, "book/01_model", "page.html", context, None)
    lines = context["body"].split("\n")
    assert lines[1] == '<p class="aim-notebook-link">nb</p>' and 'class="aim-site-links"' in lines[2]
    assert 'href="../downloads/problem-set-1.pdf"' in lines[2]
    assert 'href="../downloads/slides/01_model.html"' in lines[2]


def test_landing_and_teaching_pages_list_every_download(monkeypatch):
    ext = _load_site_ext()
    monkeypatch.setenv("AIM_SITE", "1")
    for page in ("book/intro", "book/teaching"):
        context = {"body": '<section id="editions-and-printed-material"><h1>T</h1><h2>E</h2><p>x</p>',
                   "pathto": _pathto}
        ext._page_links(_App, page, "page.html", context, None)
        box = context["body"]
        for href in ("downloads/book.pdf", "downloads/aim-tutorial-student-edition.zip",
                     "downloads/problem-set-1.pdf", "downloads/problem-set-2.pdf",
                     "downloads/slides/01_model.html", "downloads/slides/02_random_matrices.html"):
            assert f'href="../{href}"' in box, (page, href)
        assert "built, not published" in box and "make instructor" in box and "solutions.pdf" not in box
