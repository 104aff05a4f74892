"""A link to an equation inside a folded derivation opens the box (_static/aim_open_target.js).

The derivations of chapter 3 are dropdown admonitions, folded by sphinx-togglebutton; an
equation in one of them, e.g. {eq}`rep-energy-k`, is cited from outside the box. Loading
the page at that fragment, or changing the fragment to it, must leave the equation shown.
"""

import pytest

PAGE = "book/03_replica.html"
TARGETS = ("equation-rep-energy-k", "equation-rep-hs")

# the target's folded ancestors, and whether it takes up space on the page
_STATE = """(id) => {
  const el = document.getElementById(id);
  if (!el) return null;
  const folded = [];
  for (let n = el; n && n !== document.body; n = n.parentElement) {
    if (n.classList.contains('toggle-hidden') || (n.tagName === 'DETAILS' && !n.open))
      folded.push(n.tagName + '.' + [...n.classList].join('.'));
  }
  const box = el.getBoundingClientRect();
  return {folded, height: box.height, inBox: !!el.closest('.dropdown, details')};
}"""


def _settle(page):
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)


@pytest.mark.parametrize("target", TARGETS)
def test_loading_at_a_folded_equation_opens_its_box(browser, book_server, target):
    page = browser.new_page()
    try:
        page.goto(f"{book_server}/{PAGE}#{target}")
        _settle(page)
        state = page.evaluate(_STATE, target)
        assert state is not None, f"no #{target} on {PAGE}"
        assert state["inBox"], f"#{target} is not inside a folded box: the test checks nothing"
        assert state["folded"] == [] and state["height"] > 0, state
    finally:
        page.close()


def test_following_a_link_to_a_folded_equation_opens_its_box(browser, book_server):
    page = browser.new_page()
    try:
        page.goto(f"{book_server}/{PAGE}")
        _settle(page)
        target = TARGETS[0]
        before = page.evaluate(_STATE, target)
        assert before["folded"], f"#{target} is not folded on a plain load: {before}"
        page.evaluate("(id) => { window.location.hash = id; }", target)
        page.wait_for_timeout(300)
        after = page.evaluate(_STATE, target)
        assert after["folded"] == [] and after["height"] > 0, after
    finally:
        page.close()
