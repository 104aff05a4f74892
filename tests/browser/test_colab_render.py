"""The Colab notebooks rendered as a notebook front end renders them, in headless Chromium.

Each book/NN_*.ipynb is converted with nbconvert (its Markdown rendered by mistune,
as in Jupyter), typeset by the book's own MathJax 3 with the delimiters Jupyter and
Colab use ($...$ and $$...$$), offline, from disk. The rendered pages are written beside
the site (_build/test-artefacts/colab_render), not into it: the site holds no test's
output. No maths error and no undefined control sequence is allowed, and every link into
the published book must name a page and an anchor that the built book has.
"""

import re
from pathlib import Path
from urllib.parse import urlsplit

import aim_toc
import nbformat
import pytest
import yaml
from book_browser import _COLLECT, _WAIT_FOR_MATHJAX, HTML_DIR, REPO, anchors

NOTEBOOKS = [p.with_suffix(".ipynb") for p in aim_toc.chapter_sources(REPO)]
BASEURL = yaml.safe_load((REPO / "_config.yml").read_text())["html"]["baseurl"]
OUT = HTML_DIR.parent / "test-artefacts" / "colab_render"
MATHJAX_DIR = HTML_DIR / "mathjax"
MATHJAX = """<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']],
  displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true}};</script>
<script src="%s"></script>""" % (MATHJAX_DIR / "tex-mml-chtml.js").as_uri()


def _render(path: Path) -> Path:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(path, as_version=4))
    # nbconvert's own MathJax block is MathJax 2 from a CDN: the book's MathJax 3 instead
    body = re.sub(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", lambda m: MATHJAX,
                  body, flags=re.S)
    body = re.sub(r'<script[^>]+src="https?://[^"]+"[^>]*>\s*</script>', "", body)
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{path.stem}.html"
    out.write_text(body, encoding="utf-8")
    return out


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_maths_renders(browser, nb):
    if not (HTML_DIR / "index.html").is_file():
        pytest.fail(f"no built book at {HTML_DIR}: run `make book` first")
    html = _render(nb)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    outside = []
    allowed = (OUT.as_uri() + "/", MATHJAX_DIR.as_uri() + "/")
    page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(allowed)
               else (outside.append(r.request.url), r.abort()))
    try:
        page.goto(html.as_uri(), wait_until="load")
        state = page.evaluate(_WAIT_FOR_MATHJAX, 60_000)
        assert state["present"] and state["startup"] and not state["timedOut"], state
        assert not state["error"], state["error"]
        report = page.evaluate(_COLLECT, True)
    finally:
        page.close()
    assert report["containers"] > 20, "the notebook's maths was not typeset"
    assert not report["merrors"], f"{nb.name}: maths errors {report['merrors'][:5]}"
    raw = [t for _, t in report["texts"] if re.search(r"\$[^$\s][^$]*\$|\\\\[a-zA-Z]+\{", t)]
    assert not raw, f"{nb.name}: untypeset TeX {raw[:5]}"
    assert not outside, f"{nb.name}: requests outside the book {outside[:5]}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_links_resolve_in_the_book(nb):
    if not (HTML_DIR / "index.html").is_file():
        pytest.fail(f"no built book at {HTML_DIR}: run `make book` first")
    text = "\n".join(c.source for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "markdown")
    broken = []
    for url in re.findall(r"\]\((" + re.escape(BASEURL) + r"[^)\s]+)\)", text):
        parts = urlsplit(url[len(BASEURL):])
        page = HTML_DIR / parts.path
        if not page.is_file():
            broken.append(url)
        elif parts.fragment and parts.fragment not in anchors(page):
            broken.append(url)
    assert not broken, f"{nb.name}: links to no page or anchor of the book: {sorted(set(broken))[:10]}"
