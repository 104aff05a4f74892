"""Fixtures of the browser test: the built book served locally, offline, in headless Chromium.

The machinery (paths, page list, what is collected from each page) is in book_browser.py.
"""

import shutil

import pytest
from book_browser import HTML_DIR, Renderer, serve


@pytest.fixture(scope="session")
def book_server():
    """The base URL of the built book, served from 127.0.0.1 on a free port."""
    if not HTML_DIR.is_dir():
        pytest.fail(f"no built book at {HTML_DIR}: run `make book` first (or set AIM_BOOK_HTML)")
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
