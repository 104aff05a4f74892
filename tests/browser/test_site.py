"""The deployable site (make site; make test builds it): its downloads, linked and working.

Every chapter page links its Colab notebook, its problem set and its slides; the landing page
and the teaching page link every download (the book PDF, the student edition as a zip, every
problem set and every deck) and say that the instructor edition is built, not published. Each
link resolves to a file of the site, from disk and served. The problem sets published hold no
solution; the zip is the student edition, under one folder, with no solution in it. Each deck
opens from disk, offline: reveal.js starts, its maths is typeset and fits its slide, its
figures load, its takeaways are there, and nothing is asked of the network.
Run after scripts/site_downloads.py (make site-downloads). AIM_SLIDE_SHOTS=1: a screenshot of
every slide, in AIM_BOOK_SCREENSHOTS/slides.
"""

import html
import importlib.util
import os
import re
import shutil
import subprocess
import urllib.request
import zipfile
from pathlib import Path

import aim_toc
import pytest
from book_browser import _WAIT_FOR_MATHJAX, HTML_DIR, REPO, SHOTS_DIR, ConsoleError
from bs4 import BeautifulSoup

DOWNLOADS = HTML_DIR / "downloads"
NUMBERS = {Path(doc).name: k for doc, k in aim_toc.chapter_numbers(REPO).items()}
CHAPTERS = list(NUMBERS)
ZIP = DOWNLOADS / "aim-tutorial-student-edition.zip"
ZIP_TOP = "aim-tutorial-student-edition"
LANDING, TEACHING = "book/intro.html", "book/teaching.html"


def _editions_helpers():
    """tests/editions/conftest.py (the solutions' sentences and code), loaded by its path."""
    spec = importlib.util.spec_from_file_location("editions_helpers", REPO / "tests" / "editions" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", autouse=True)
def site_built():
    if not (DOWNLOADS / "slides").is_dir():
        pytest.fail(f"no downloads in {HTML_DIR}: run make site-downloads (or make site) first")


def _number(chapter):
    return NUMBERS[chapter]


def expected_downloads():
    return (["downloads/book.pdf", "downloads/aim-tutorial-student-edition.zip"]
            + [f"downloads/problem-set-{_number(c)}.pdf" for c in CHAPTERS]
            + [f"downloads/slides/{c}.html" for c in CHAPTERS])


def _links(page):
    """The site-relative paths of a built page's links (without #fragment)."""
    soup = BeautifulSoup((HTML_DIR / page).read_text(encoding="utf-8"), "html.parser")
    out = set()
    for a in soup.select("a[href]"):
        href = a["href"].split("#")[0]
        if href and not re.match(r"^[a-z]+:", href):
            out.add(Path(page).parent.joinpath(href).as_posix())
    return {_norm(p) for p in out}


def _norm(path):
    parts = []
    for part in path.split("/"):
        if part == "..":
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def _resolves(base, path):
    """Whether the site serves `path`: the file, from disk; a 200 with its bytes, served."""
    if base.startswith("file:"):
        return (HTML_DIR / path).is_file()
    with urllib.request.urlopen(base + path, timeout=30) as r:      # 127.0.0.1 only
        return r.status == 200 and len(r.read()) == (HTML_DIR / path).stat().st_size


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_page_links_its_notebook_problem_set_and_slides(book_server, chapter):
    links = _links(f"book/{chapter}.html")
    wanted = [f"notebooks/{chapter}.ipynb", f"downloads/problem-set-{_number(chapter)}.pdf",
              f"downloads/slides/{chapter}.html"]
    assert not [w for w in wanted if w not in links], f"{chapter}: missing links among {sorted(links)}"
    assert not [w for w in wanted if not _resolves(book_server, w)], f"{chapter}: a link does not resolve"


@pytest.mark.parametrize("page", [LANDING, TEACHING])
def test_landing_and_teaching_pages_link_every_download(book_server, page):
    links = _links(page)
    missing = [d for d in expected_downloads() if d not in links]
    assert not missing, f"{page}: no link to {missing}"
    assert all(_resolves(book_server, d) for d in expected_downloads())
    text = " ".join(BeautifulSoup((HTML_DIR / page).read_text(encoding="utf-8"), "html.parser").get_text().split())
    assert "built, not published" in text and "make instructor" in text, page
    assert not [link for link in links if "solutions" in link], page


def test_nothing_published_holds_the_solutions():
    assert not list(HTML_DIR.rglob("*solutions*.pdf"))
    helpers = _editions_helpers()
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is missing (make tex installs poppler-utils)")
    for chapter in CHAPTERS:
        n = _number(chapter)
        text = subprocess.run(["pdftotext", "-layout", str(DOWNLOADS / f"problem-set-{n}.pdf"), "-"],
                              capture_output=True, text=True, check=True).stdout
        assert f"Problem set {n}" in text and "solutions" not in text.split("\n", 3)[0].lower()
        assert not re.search(r"^\s*Solution\s*$", text, re.M), f"problem-set-{n}.pdf prints a solution"
    # the student edition's zip: one folder that opens from disk, and no solution in it
    with zipfile.ZipFile(ZIP) as z:
        names = z.namelist()
        assert f"{ZIP_TOP}/index.html" in names and f"{ZIP_TOP}/book/intro.html" in names
        assert all(n.startswith(ZIP_TOP + "/") for n in names)
        texts = {}
        for name in names:
            if name.endswith((".html", ".js", ".ipynb", ".json", ".txt")) and "/_static/" not in name \
                    and "/mathjax/" not in name:
                text = z.read(name).decode("utf-8", errors="replace")
                if name.endswith(".html"):
                    text = re.sub(r"<script\b.*?</script>", " ", text, flags=re.S)
                    text = html.unescape(re.sub(r"<[^>]+>", "", text))
                texts[name] = helpers.squash(text)
    assert not [n for n in names if "solutions" in n.rsplit("/", 1)[-1]]
    for label, sentence, code in helpers.solutions():
        for needle in filter(None, (sentence, code)):
            where = [n for n, t in texts.items() if helpers.squash(needle) in t]
            assert not where, f"the student edition's zip: the solution of {label} in {where}: {needle!r}"


# -- the decks, from disk, offline

_DECK_STATE = """async (timeoutMs) => {
  const t0 = Date.now();
  while (!(window.Reveal && Reveal.isReady && Reveal.isReady()) && Date.now() - t0 < timeoutMs)
    await new Promise(r => setTimeout(r, 50));
  if (window.mathsTypeset) await window.mathsTypeset;
  const slides = Reveal.getSlides(), height = Reveal.getConfig().height, out = [];
  for (let i = 0; i < slides.length; i++) {
    Reveal.slide(i);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const s = Reveal.getCurrentSlide();
    const wide = [...s.querySelectorAll('mjx-container[display="true"]')].filter(
      c => { const [w, room] = mathsWidth(c); return w > room + 2; }).length;
    out.push({i, kind: s.dataset.equation ? 'equation' : s.dataset.figure ? 'figure' :
              s.classList.contains('takeaways-slide') ? 'takeaways' : 'other',
              height: s.scrollHeight, room: height, wide,
              text: s.innerText.trim().length,
              images: [...s.querySelectorAll('img')].map(im => im.complete && im.naturalWidth > 0)});
  }
  Reveal.slide(0);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), raw = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode())
    if (!n.parentElement.closest('mjx-container, script, style') && /\\$\\$|\\\\\\[|\\\\\\(/.test(n.nodeValue))
      raw.push(n.nodeValue.slice(0, 80));
  return {ready: Reveal.isReady(), slides: out, raw,
          maths: document.querySelectorAll('mjx-container').length,
          merrors: document.querySelectorAll('mjx-merror').length};
}"""


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_deck_opens_offline_from_disk(browser, chapter):
    deck = DOWNLOADS / "slides" / f"{chapter}.html"
    assert deck.is_file(), f"no deck {deck}"
    assert deck.stat().st_size < 200_000, f"{deck.name}: {deck.stat().st_size} bytes, not a small deck"
    soup = BeautifulSoup(deck.read_text(encoding="utf-8"), "html.parser")
    refs = [t.get("href") or t.get("src") for t in soup.select("a[href], img[src], script[src], link[href]")]
    site_root = HTML_DIR.resolve()
    broken = [r for r in refs if not re.match(r"^[a-z]+:", r) and not r.startswith("#")
              and not (deck.parent / r.split("#")[0]).resolve().is_file()]
    outside_site = [r for r in refs if not re.match(r"^[a-z]+:", r) and not r.startswith("#")
                    and site_root not in (deck.parent / r.split("#")[0]).resolve().parents]
    assert not broken and not outside_site, f"{chapter}: links to no file of the site {broken + outside_site}"
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    tab = context.new_page()
    outside, console = [], []
    site = HTML_DIR.as_uri() + "/"
    tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(site)
              else (outside.append(r.request.url), r.abort("blockedbyclient")))
    tab.on("console", lambda m: m.type == "error" and console.append(ConsoleError.of(m).text))
    tab.on("pageerror", lambda e: console.append(ConsoleError.uncaught(e).text))
    try:
        tab.goto(deck.as_uri(), wait_until="load", timeout=60_000)
        mathjax = tab.evaluate(_WAIT_FOR_MATHJAX, 60_000)
        state = tab.evaluate(_DECK_STATE, 60_000)
        if os.environ.get("AIM_SLIDE_SHOTS") and SHOTS_DIR is not None:      # every slide, to look at
            shots = SHOTS_DIR / "slides" / chapter
            shots.mkdir(parents=True, exist_ok=True)
            for s in state["slides"]:
                tab.evaluate(f"Reveal.slide({s['i']})")
                tab.wait_for_timeout(100)
                tab.screenshot(path=str(shots / f"{s['i']:02d}.png"))
    finally:
        context.close()
    assert not outside, f"{chapter}: requests outside the site {outside[:5]}"
    assert not console, f"{chapter}: console errors {console[:5]}"
    assert mathjax["present"] and not mathjax["timedOut"] and not mathjax["error"], mathjax
    assert state["ready"], f"{chapter}: reveal.js did not start"
    assert state["maths"] > 0 and not state["merrors"] and not state["raw"], state["raw"][:5]
    kinds = [s["kind"] for s in state["slides"]]
    assert "equation" in kinds and "figure" in kinds and "takeaways" in kinds, kinds
    assert all(all(s["images"]) for s in state["slides"]), f"{chapter}: an image did not load"
    assert all(s["text"] > 0 for s in state["slides"]), f"{chapter}: an empty slide"
    wide = [s["i"] for s in state["slides"] if s["wide"]]
    assert not wide, f"{chapter}: maths wider than slides {wide}"
    tall = [(s["i"], s["height"]) for s in state["slides"] if s["height"] > s["room"] + 2]
    assert not tall, f"{chapter}: slides taller than the deck's {state['slides'][0]['room']} px: {tall}"
