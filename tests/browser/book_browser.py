"""The browser test's machinery: the built book, served locally or opened from disk, loaded
offline in Chromium.

Environment variables:
  AIM_BOOK_HTML         the built HTML book (default: <repo>/_build/html)
  AIM_BOOK_SCREENSHOTS  where the full-page screenshots go (default: <html>/../screenshots);
                        "off": none (make test: a full-page screenshot of a long chapter took
                        9-10 s, most of the time of loading it, and CI keeps none of them)

Chromium is Debian's (`chromium` on the PATH), driven by Playwright; no browser is
downloaded. Every page is opened both ways a reader opens the book (OPENED): from a local
server, and from disk (file://, where Chromium runs no module script, for one). Every
request that does not go to the book (the server, or the built folder on disk) is aborted
and recorded.
"""

import contextlib
import functools
import http.server
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup

REPO = Path(__file__).resolve().parents[2]
HTML_DIR = Path(os.environ.get("AIM_BOOK_HTML", REPO / "_build" / "html")).resolve()
SHOTS = os.environ.get("AIM_BOOK_SCREENSHOTS", str(HTML_DIR.parent / "screenshots"))
SHOTS_DIR = None if SHOTS == "off" else Path(SHOTS).resolve()
# How the book is opened: served over HTTP from 127.0.0.1, and from disk (file://).
OPENED = ("served", "file")
# The laptop case first (the text column is then about 700 px; the screenshots), then wider.
WIDTHS = (1280, 1400)
HEIGHT = 800
# Generated pages that are not the book's text.
SKIPPED_PAGES = {"genindex.html", "search.html", "py-modindex.html", "prf-prf.html"}
# The site's downloads (scripts/site_downloads.py): the slides are not pages of the book
# (tests/browser/test_site.py opens them).
DOWNLOADS = "downloads"
PAGE_TIMEOUT_S = 60  # loading, typesetting, images, screenshot: each at most this long
REFRESH = re.compile(r"url=(.+)$", re.IGNORECASE)

# The scripts run in the page. MathJax typesets once its startup promise resolves.
_WAIT_FOR_MATHJAX = """async (timeoutMs) => {
  const out = {present: !!window.MathJax, startup: false, error: null, timedOut: false};
  const st = window.MathJax && window.MathJax.startup;
  if (!st || !st.promise) return out;
  out.startup = true;
  const timeout = new Promise(r => setTimeout(() => r('timeout'), timeoutMs));
  try {
    out.timedOut = (await Promise.race([st.promise.then(() => 'ok'), timeout])) === 'timeout';
  } catch (e) { out.error = String((e && e.message) || e); }
  return out;
}"""

_WAIT_FOR_IMAGES = """async (timeoutMs) => {
  const imgs = [...document.images];
  imgs.forEach(img => { img.loading = 'eager'; });
  const settle = img => img.complete ? Promise.resolve() :
    new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r); });
  await Promise.race([Promise.all(imgs.map(settle)),
                      new Promise(r => setTimeout(r, timeoutMs))]);
  await document.fonts.ready;
}"""

_NEXT_FRAME = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"

# Folded content (hidden code, solutions, dropdowns) is checked too: open every fold.
_UNFOLD = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
}"""

# Everything the checks need, in one call; the text, links and MathJax errors only if
# `withText` (they are the same at every width), the layout always.
_COLLECT = """(withText) => {
  // 'p.caption in #section-id': the element and the nearest ancestor with an id.
  const where = el => {
    if (!el || el.nodeType !== 1) return '?';
    let s = el.tagName.toLowerCase();
    if (el.id) return s + '#' + el.id;
    if (el.classList.length) s += '.' + [...el.classList].slice(0, 2).join('.');
    const up = el.parentElement && el.parentElement.closest('[id]');
    return up ? s + ' in #' + up.id : s;
  };
  const box = el => el ? el.getBoundingClientRect() : {width: 0, left: 0, right: 0};
  const CODE = 'pre, code, kbd, samp, script, style, noscript, template, textarea, ' +
               'mjx-container, .highlight';
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = withText && walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.nodeValue.trim() || !el || el.closest(CODE)) continue;
    texts.push([where(el), n.nodeValue]);
  }
  // The TeX source of each item MathJax typeset, to name the maths of an error.
  const source = new Map();
  const doc = window.MathJax && MathJax.startup && MathJax.startup.document;
  if (doc && doc.math) for (const item of doc.math) source.set(item.typesetRoot, item.math);
  // TeX errors, and undefined macros (MathJax shows them in red, as text).
  const error = (e, message) => {
    const c = e.closest('mjx-container');
    return {where: where(c && c.parentElement), error: message, tex: (c && source.get(c)) || ''};
  };
  const all = selector => withText ? [...document.querySelectorAll(selector)] : [];
  const merrors = [
    ...all('mjx-merror').map(
      e => error(e, e.getAttribute('data-mjx-error') || '')),
    ...all('mjx-assistive-mml mtext[mathcolor="red"]').map(
      e => error(e, 'undefined control sequence ' + e.textContent))];
  const images = [...document.images].map(img => ({
    src: img.currentSrc || img.src, where: where(img), complete: img.complete,
    naturalWidth: img.naturalWidth}));
  const links = all('a[href]').map(a => ({
    raw: a.getAttribute('href'), href: a.href, where: where(a),
    text: a.textContent.trim().slice(0, 60)}));
  const equations = [...document.querySelectorAll('mjx-container[display="true"]')].map(c => {
    const block = c.closest('div.math') || c.parentElement;
    const eqno = block.querySelector(':scope > .eqno');
    const math = c.querySelector('mjx-math');
    return {
      id: block.id || where(block), tex: source.get(c) || '',
      block: box(block).width, blockScroll: block.scrollWidth, blockClient: block.clientWidth,
      math: box(math).width, eqno: box(eqno).width,
      scroll: c.scrollWidth, client: c.clientWidth, shown: box(block).width > 0};
  });
  return {texts, merrors, images, links, equations,
          containers: document.querySelectorAll('mjx-container').length};
}"""


@dataclass
class ConsoleError:
    """A JavaScript error: kind 'console', 'resource' (a failed load) or 'exception'."""

    kind: str
    text: str
    url: str = ""

    @classmethod
    def of(cls, message):
        """From a Playwright console message of type error."""
        url = message.location.get("url", "")
        kind = "resource" if message.text.startswith("Failed to load resource") else "console"
        line = message.location.get("lineNumber", "")
        return cls(kind, f"console.error: {message.text} ({url}:{line})", url)

    @classmethod
    def uncaught(cls, error):
        """From an uncaught exception of the page, with where it was thrown."""
        frames = [line.strip() for line in (error.stack or "").splitlines()]
        at = next((f for f in frames if f.startswith("at ")), "")
        return cls("exception", f"uncaught {error.name}: {error.message} {at}".rstrip())


@dataclass
class PageReport:
    """What one page showed in the browser: one load, then its layout at each viewport width."""

    page: str
    url: str
    external: list = field(default_factory=list)  # URLs of aborted requests to the network
    failed: dict = field(default_factory=dict)  # {URL: status or reason} of local requests
    console: list = field(default_factory=list)  # ConsoleErrors
    mathjax: dict = field(default_factory=dict)  # the result of _WAIT_FOR_MATHJAX
    layout: dict = field(default_factory=dict)  # {width: the result of _COLLECT at that width}

    @property
    def content(self):
        """What _COLLECT found at the first width: text, links, MathJax errors and layout."""
        return self.layout[WIDTHS[0]]


def book_pages(html_dir=HTML_DIR):
    """The book's pages, as paths relative to `html_dir` (no generated or redirect pages)."""
    if not html_dir.is_dir():
        return []
    return sorted(
        p.relative_to(html_dir).as_posix()
        for p in html_dir.rglob("*.html")
        if not any(part.startswith("_") for part in p.relative_to(html_dir).parts)
        and p.relative_to(html_dir).parts[0] != DOWNLOADS
        and p.name not in SKIPPED_PAGES
        and redirect_target(p) is None
    )


def redirect_pages(html_dir=HTML_DIR):
    """The pages that only redirect (index.html): {relative path: target relative path}."""
    if not html_dir.is_dir():
        return {}
    return {
        p.relative_to(html_dir).as_posix(): target
        for p in html_dir.glob("*.html")
        if (target := redirect_target(p)) is not None
    }


@functools.lru_cache(maxsize=None)
def _soup(path):
    """The parsed static HTML of a built file."""
    return BeautifulSoup(Path(path).read_text(encoding="utf-8"), "html.parser")


def redirect_target(path):
    """The URL a `<meta http-equiv="refresh">` page sends to, or None."""
    meta = _soup(path).find("meta", attrs={"http-equiv": re.compile("refresh", re.I)})
    m = meta and REFRESH.search(meta.get("content", ""))
    return m.group(1).strip().strip("'\"") if m else None


@functools.lru_cache(maxsize=None)
def anchors(path):
    """The ids (and `<a name>`s) of a built HTML file: the targets `page.html#id` may name."""
    soup = _soup(path)
    return {t["id"] for t in soup.find_all(id=True)} | {
        t["name"] for t in soup.find_all("a", attrs={"name": True})
    }


def has_math(page):
    """Whether the static HTML of `page` has maths for MathJax to typeset."""
    return _soup(HTML_DIR / page).find(class_="math") is not None


def local_file(url, base):
    """The built file a URL of the book names (None for any other URL); `base` is the book's
    root, on the local server or on disk."""
    if not url.startswith(base):
        return None
    path = unquote(urlsplit(url).path)[len(unquote(urlsplit(base).path)):].lstrip("/")
    target = HTML_DIR / path
    return target / "index.html" if path == "" or path.endswith("/") else target


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves a directory without logging each request to stderr."""

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory):
    """Serve `directory` from 127.0.0.1 on a free port, in a thread; yield the base URL."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def settle(tab, pending, quiet_s=0.5):
    """Wait until no request of `tab` has been in flight for `quiet_s`; return those still pending.

    (Playwright's "networkidle" state is not used: Chromium does not always report it.)
    """
    deadline, quiet_since = time.monotonic() + PAGE_TIMEOUT_S, time.monotonic()
    while time.monotonic() < deadline:
        if pending:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return []
        tab.wait_for_timeout(100)
    return list(pending)


class Renderer:
    """Loads each page once, on demand, and keeps its report for every check."""

    def __init__(self, browser, base):
        self.browser, self.base, self.reports = browser, base, {}

    def __call__(self, page):
        """The report of `page` (loaded the first time it is asked for).

        A page that could not be loaded fails every check that asks for it, with the reason,
        and is not loaded again.
        """
        if page not in self.reports:
            try:
                self.reports[page] = self._load(page)
            except Exception as exc:  # any failure of the browser is the page's
                self.reports[page] = exc
        report = self.reports[page]
        if isinstance(report, Exception):
            pytest.fail(f"{page} could not be loaded: {report}", pytrace=False)
        return report

    def _load(self, page):
        """Open `page` at the first width; wait for MathJax, images, fonts and the network;
        screenshot it; open every fold; collect at each width, resizing the viewport."""
        report, pending = PageReport(page, self.base + page), set()
        # A fresh context for each page: every page is read as by a first-time visitor.
        context = self.browser.new_context(viewport={"width": WIDTHS[0], "height": HEIGHT})
        tab = context.new_page()
        tab.route("**/*", lambda route: self._route(report, route))
        tab.on("console", lambda m: m.type == "error" and report.console.append(ConsoleError.of(m)))
        tab.on("pageerror", lambda e: report.console.append(ConsoleError.uncaught(e)))
        tab.on("response", lambda r: r.status >= 400 and report.failed.setdefault(r.url, f"HTTP {r.status}"))
        tab.on("request", lambda r: pending.add(r))
        tab.on("requestfinished", lambda r: pending.discard(r))
        tab.on("requestfailed", lambda r: self._request_failed(report, r) or pending.discard(r))
        timeout_ms = PAGE_TIMEOUT_S * 1000
        try:
            tab.goto(report.url, wait_until="load", timeout=timeout_ms)
            report.mathjax = tab.evaluate(_WAIT_FOR_MATHJAX, timeout_ms)
            tab.evaluate(_WAIT_FOR_IMAGES, timeout_ms)
            for request in settle(tab, pending):
                report.failed[request.url] = f"still loading after {PAGE_TIMEOUT_S} s"
            if SHOTS_DIR is not None:
                opened = "" if self.base.startswith("http") else "file"   # from disk: a folder of its own
                shot = SHOTS_DIR / opened / Path(page).with_suffix(".png")
                shot.parent.mkdir(parents=True, exist_ok=True)
                tab.screenshot(path=str(shot), full_page=True, timeout=timeout_ms)
            tab.evaluate(_UNFOLD)
            for width in WIDTHS:
                tab.set_viewport_size({"width": width, "height": HEIGHT})
                tab.evaluate(_NEXT_FRAME)
                report.layout[width] = tab.evaluate(_COLLECT, width == WIDTHS[0])
        finally:
            context.close()
        return report

    def _route(self, report, route):
        """Let requests to the book (server or folder) through; abort (and record) every other one."""
        if route.request.url.startswith(self.base):
            route.continue_()
        else:
            report.external.append(route.request.url)
            route.abort("blockedbyclient")

    def _request_failed(self, report, request):
        """Record a request to the book that failed (those to the network are aborted by `_route`)."""
        if request.url.startswith(self.base):
            report.failed.setdefault(request.url, request.failure)
