"""Fixtures of the browser test: the built book, served locally and from disk, offline, in
headless Chromium.

The machinery (paths, page list, what is collected from each page) is in book_browser.py.
"""

import shutil

import pytest
from book_browser import HTML_DIR, OPENED, Renderer, serve


@pytest.fixture(scope="session", params=OPENED, ids=OPENED)
def book_server(request):
    """The base URL of the built book, both ways a reader opens it: served from 127.0.0.1 on
    a free port ("served"), and from disk ("file", a file:// URL, as the README says)."""
    if not HTML_DIR.is_dir():
        pytest.fail(f"no built book at {HTML_DIR}: run `make book` first (or set AIM_BOOK_HTML)")
    if request.param == "file":
        yield HTML_DIR.as_uri() + "/"
        return
    with serve(HTML_DIR) as base:
        yield base


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium under Playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("no `chromium` on the PATH: apt-get install chromium")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def rendered(browser, book_server):
    """`rendered(page)`: the PageReport of a page of the book (each page loaded once)."""
    return Renderer(browser, book_server)


def pytest_collection_modifyitems(items):
    """Keep every check of one page, opened one way, on one pytest-xdist worker.

    `rendered` loads a page once a worker (Renderer); with plain `--dist load` the checks of
    a page are spread over the workers, so each of them loaded, typeset and screenshot most
    pages. The group (page, how it is opened) is honoured by `--dist loadgroup`
    (make browser), and without xdist it changes nothing.
    """
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "rendered" in getattr(item, "fixturenames", ()) and "page" in params:
            item.add_marker(pytest.mark.xdist_group(f"{params['page']}|{params.get('book_server', '')}"))
