"""Nothing the reader needs is cut off at a phone's width (390 px) or at the laptop's.

* A displayed equation wider than the column scrolls sideways inside its own box
  (MathJax's ``mjx-container``), which then takes the whole column (its number goes under
  it) and shows an edge shadow where there is more (_static/aim.css).
* The text outputs of code cells wrap at the box edge: no line runs past it (chapter 9's
  table of checks has lines of 137 characters).
"""

import pytest
from book_browser import _UNFOLD

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}

_EQUATIONS = """() => [...document.querySelectorAll('div.math')].map(d => {
  const m = d.querySelector('mjx-container[display="true"]');
  if (!m) return null;
  const s = getComputedStyle(m), eqno = d.querySelector('.eqno');
  const col = d.parentElement.getBoundingClientRect(), box = d.getBoundingClientRect();
  const n = eqno ? eqno.getBoundingClientRect() : null;
  return {id: d.id || d.textContent.slice(0, 40), scroll: m.scrollWidth, client: m.clientWidth,
          box: box.width, boxRight: box.right, colRight: col.right, overflowX: s.overflowX,
          shadow: s.backgroundImage.includes('radial-gradient'),
          eqnoInside: !n || (n.left >= box.left - 1 && n.right <= box.right + 1)};
}).filter(x => x)"""

_OUTPUTS = """() => [...document.querySelectorAll('div.cell_output pre')].map((p, i) => {
  let hidden = p.scrollWidth - p.clientWidth;
  for (let e = p.parentElement; e && !e.classList.contains('cell_output'); e = e.parentElement)
    hidden = Math.max(hidden, e.scrollWidth - e.clientWidth);
  return {i, hidden, text: p.textContent.slice(0, 60)};
}).filter(x => x.hidden > 1)"""


def _load(browser, base, path, viewport):
    page = browser.new_page(viewport=viewport)
    page.goto(f"{base}/{path}")
    page.wait_for_load_state("load")
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate(_UNFOLD)  # the folded derivations too
    page.wait_for_timeout(300)
    return page


@pytest.mark.parametrize("chapter", ["03_replica", "07_deep_attention"])
def test_wide_equations_scroll_in_their_box_at_phone_width(browser, book_server, chapter):
    page = _load(browser, book_server, f"book/{chapter}.html", PHONE)
    try:
        eqs = page.evaluate(_EQUATIONS)
    finally:
        page.close()
    wide = [e for e in eqs if e["scroll"] > e["client"] + 1]
    assert wide, f"{chapter}: no equation wider than a phone's column: the test checks nothing"
    bad = [e for e in eqs if e["boxRight"] > e["colRight"] + 1 or not e["eqnoInside"]]
    assert not bad, f"{chapter}: equation boxes past the column, or numbers cut: {bad[:3]}"
    bad = [e for e in wide if e["overflowX"] not in ("auto", "scroll") or not e["shadow"]
           or e["client"] < e["box"] - 2]
    assert not bad, f"{chapter}: wide equations that do not scroll over the whole column: {bad[:3]}"


@pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["390px", "1280px"])
def test_output_lines_wrap_instead_of_running_past_the_box(browser, book_server, viewport):
    page = _load(browser, book_server, "book/09_explore.html", viewport)
    try:
        cut = page.evaluate(_OUTPUTS)
    finally:
        page.close()
    assert not cut, f"09_explore at {viewport['width']} px: output lines past the box edge: {cut}"
