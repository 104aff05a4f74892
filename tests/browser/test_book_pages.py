"""Every page of the built book, in headless Chromium, offline, as a reader sees it.

Each page is loaded once (at 1280 x 800, then the window is widened to 1400); one test
per page (and, for the layout, per width) per kind of check: no request to the network,
no failed local request, no JavaScript error, maths typeset by MathJax without error,
no TeX or MyST left raw in the text, no broken image or internal link, no displayed
equation wider than its column. A full-page screenshot of each page (1280 px wide) is
kept in AIM_BOOK_SCREENSHOTS (default `_build/screenshots`). Build the book first.
"""

import re
from urllib.parse import unquote, urlsplit

import pytest
from book_browser import HTML_DIR, WIDTHS, anchors, book_pages, has_math, local_file, redirect_pages

PAGES = book_pages()
IDS = [p.removesuffix(".html") for p in PAGES]
SLACK_PX = 2
CONTEXT = 40  # characters of text shown on each side of an offending match
MAX_SHOWN = 40  # problems listed in a failure message

# TeX that MathJax should have typeset: delimiters and commands left in the text.
RAW_TEX = {
    "TeX delimiter": re.compile(r"\\[()\[\]]|\$\$"),
    "TeX command": re.compile(r"\\[A-Za-z]{2,}"),
    "dollar maths": re.compile(r"(?<![\w$])\$[^$\s](?:[^$\n]{0,100}?[^$\s])?\$(?![\w$])"),
}
# MyST that the parser should have turned into a reference, a directive or a target.
RAW_MYST = {
    "role": re.compile(r"\{(?:ref|numref|eq|doc|cite(?::\w+)?|term|download|abbr|math|[a-z]+:[a-z]+)\}"),
    "directive fence": re.compile(r"(?:```|:::)\{"),
    "directive option": re.compile(r"(?:^|\s):(?:label|class|name|nonumber|caption|width|align|tags):\s"),
    "target": re.compile(r"^\s*\([\w.:-]+\)=\s*$"),
    "unresolved reference": re.compile(r"\?\?\?"),
}


def pytest_generate_tests(metafunc):
    """Parametrise the checks over the book's pages (`page`) and the viewport widths (`width`)."""
    if "page" in metafunc.fixturenames:
        metafunc.parametrize("page", PAGES, ids=IDS)
    if "width" in metafunc.fixturenames:
        metafunc.parametrize("width", WIDTHS, ids=[f"{w}px" for w in WIDTHS])


def fail_with(problems, report, what, width=None):
    """Fail naming the page, the width if it matters, and the problems found, one a line."""
    if problems:
        at = f" at {width} px" if width else ""
        more = [f"... and {len(problems) - MAX_SHOWN} more"] if len(problems) > MAX_SHOWN else []
        shown = problems[:MAX_SHOWN] + more
        pytest.fail(f"{report.page}{at}: {len(problems)} {what}:\n  " + "\n  ".join(shown), pytrace=False)


def matches_in_text(texts, patterns):
    """'kind in <where>: ...context...' for each match of `patterns` in the page's text nodes."""
    found = []
    for where, text in texts:
        for kind, pattern in patterns.items():
            for m in pattern.finditer(text):
                snippet = text[max(0, m.start() - CONTEXT) : m.end() + CONTEXT]
                found.append(f"{kind} '{m.group()}' in {where}: ...{' '.join(snippet.split())}...")
    return found


def broken_links(report):
    """Links to a file missing from the build, or to an #anchor missing on its target page."""
    problems = []
    for link in report.content["links"]:
        target = local_file(link["href"], report.url.removesuffix(report.page))
        if target is None:
            continue  # a link out of the book: not followed offline
        label = f"{link['raw']!r} ({link['text']!r}, {link['where']})"
        fragment = unquote(urlsplit(link["href"]).fragment)
        if not target.is_file():
            problems.append(f"{label}: no {target.relative_to(HTML_DIR)} in the build")
        elif fragment and target.suffix == ".html" and fragment not in anchors(target):
            problems.append(f"{label}: no id {fragment!r} on {target.relative_to(HTML_DIR)}")
    return problems


def wide_equations(equations):
    """Displayed equations that, with their number, do not fit their block, or overflow it."""
    problems = []
    for eq in equations:
        if not eq["shown"]:
            problems.append(f"{eq['id']}: not displayed (zero width) even with every fold open")
            continue
        tex = " ".join(eq["tex"].split())[:80]
        if eq["math"] + eq["eqno"] > eq["block"] + SLACK_PX:
            problems.append(
                f"{eq['id']}: maths {eq['math']:.0f} px + number {eq['eqno']:.0f} px"
                f" > column {eq['block']:.0f} px: {tex}"
            )
        elif max(eq["scroll"] - eq["client"], eq["blockScroll"] - eq["blockClient"]) > SLACK_PX:
            problems.append(
                f"{eq['id']}: overflows its column (scroll width {max(eq['scroll'], eq['blockScroll'])} px"
                f" > {min(eq['client'], eq['blockClient'])} px): {tex}"
            )
    return problems


def test_book_is_built():
    """The built book is there, with its index and its pages (never a pass on zero pages)."""
    assert HTML_DIR.is_dir(), f"no built book at {HTML_DIR}: run `make book` first (or set AIM_BOOK_HTML)"
    assert (HTML_DIR / "index.html").is_file(), f"no index.html in {HTML_DIR}: is the build complete?"
    chapters = [p for p in PAGES if re.fullmatch(r"book/\d\d_\w+\.html", p)]
    assert chapters, f"no book/NN_*.html page in {HTML_DIR}: is the build complete?"


@pytest.mark.parametrize("stub,target", sorted(redirect_pages().items()))
def test_redirect_target_exists(stub, target):
    """A redirect page (index.html) sends to a page of the build."""
    assert (HTML_DIR / stub).parent.joinpath(urlsplit(target).path).is_file(), f"{stub} -> {target}: missing"


def test_no_network_request(rendered, page):
    """The page asks nothing of the network: everything it needs is in the build."""
    report = rendered(page)
    fail_with([f"request to the network: {u}" for u in report.external], report, "requests to the network")


def test_local_requests_ok(rendered, page):
    """Every file the page loads (script, style, font, image, MathJax component) is found."""
    report = rendered(page)
    fail_with([f"{url}: {why}" for url, why in report.failed.items()], report, "failed local requests")


def test_no_console_error(rendered, page):
    """No JavaScript error: neither console.error nor an uncaught exception.

    The browser's own "Failed to load resource" line for a request that the two checks
    above report already (to the network, or failed locally) is not counted twice.
    """
    report = rendered(page)
    reported = set(report.external) | set(report.failed)
    errors = [e for e in report.console if not (e.kind == "resource" and e.url in reported)]
    fail_with([e.text for e in errors], report, "JavaScript errors")


def test_mathjax_renders(rendered, page):
    """MathJax loads and typesets the page's maths without an error."""
    report = rendered(page)
    mj, content, problems = report.mathjax, report.content, []
    if has_math(page):
        if not mj.get("startup"):
            problems.append("MathJax not loaded (no MathJax.startup.promise) on a page with maths")
        elif mj.get("timedOut"):
            problems.append("MathJax.startup.promise still pending after the timeout")
        elif content["containers"] == 0:
            problems.append("MathJax typeset nothing on a page with maths")
    if mj.get("error"):
        problems.append(f"MathJax.startup.promise rejected: {mj['error']}")
    problems += [f"MathJax error '{e['error']}' in {e['where']}: {e['tex']}" for e in content["merrors"]]
    fail_with(problems, report, "MathJax problems")


def test_no_raw_tex(rendered, page):
    """No TeX left untypeset in the text (outside code and pre)."""
    report = rendered(page)
    fail_with(matches_in_text(report.content["texts"], RAW_TEX), report, "pieces of untypeset TeX")


def test_no_raw_myst(rendered, page):
    """No MyST left unparsed in the text (outside code and pre): roles, fences, targets, ???."""
    report = rendered(page)
    fail_with(matches_in_text(report.content["texts"], RAW_MYST), report, "pieces of raw MyST")


def test_internal_links(rendered, page):
    """Every link inside the book names a file of the build and, if any, an id on that page."""
    report = rendered(page)
    fail_with(broken_links(report), report, "broken internal links")


def test_images_load(rendered, page, width):
    """Every image is loaded and has a size."""
    report = rendered(page)
    images = report.layout[width]["images"]
    problems = [
        f"{i['src']} ({i['where']}): " + ("broken" if i["complete"] else "still loading")
        for i in images
        if not (i["complete"] and i["naturalWidth"])
    ]
    fail_with(problems, report, "broken images", width)


def test_equations_fit(rendered, page, width):
    """Every displayed equation and its number fit the text column; none overflows."""
    report = rendered(page)
    problems = wide_equations(report.layout[width]["equations"])
    fail_with(problems, report, "displayed equations too wide", width)
