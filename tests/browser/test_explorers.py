"""The in-page explorers (aim_tutorial.explore) in headless Chromium, offline.

Each test loads the built page afresh, served and from disk (file://; the `book_server`
fixture), moves controls the way the page's own inputs do (setting the input and firing
its event), and reads the drawn data back from the Vega scenegraph: the data of every mark
item and its position on the screen. The drawn curves are compared with
aim_tutorial.state_evolution solved here. Where scripts do not run, or the Vega bundle
does not load, each explorer's place says so.
"""

import re

import numpy as np
import pytest
from book_browser import HTML_DIR

import aim_tutorial as aim

EXPLORE = "book/09_explore.html"
HARDMAX = "book/04_bayes_optimal_error.html"
VIEWS = {EXPLORE: ("explorer-curve", "explorer-phase"), HARDMAX: ("explorer-hardmax",)}
# What the explorers may add to a page (the Vega bundle, 0.9 MB, and each chart's spec
# with its data): the book's pages already weigh about 4.3 MB, most of it the theme's
# icon font script (1.5 MB) and MathJax (1.2 MB).
EXPLORER_WEIGHT_BUDGET = 2.0e6
# Between tabulated points the read-out interpolates linearly; chapter 9 measures that
# interpolation against direct solves (2e-3). Drawn points are tabulated values: 1e-4.
TOL_DRAWN, TOL_INTERP = 1e-4, 2e-3

_MARKS = """([id, pattern, canonical]) => {
  const re = new RegExp(pattern), out = [];
  const keep = d => Object.fromEntries(Object.entries(d || {}).filter(
      ([k, v]) => typeof v === 'number' || typeof v === 'string'));
  const r2 = v => Math.round((v || 0) * 100) / 100;
  function walk(node) {
    if (!node) return;
    if (node.marktype && re.test(node.name || '')) {
      for (const it of node.items || []) {
        const item = {datum: keep(it.datum), x: it.x, y: it.y,
                      text: it.text === undefined ? null : String(it.text)};
        out.push(canonical ? JSON.stringify([Object.entries(item.datum).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0),
                                             r2(item.x), r2(item.y), item.text]) : item);
      }
      return;
    }
    for (const it of node.items || []) walk(it);
  }
  walk(window.aimViews[id].scenegraph().root);
  return canonical ? out.sort().join('\\n') : out;
}"""

_SET = """async ([id, name, value]) => {
  const el = document.querySelector(`#${id} [name="${name}"]`);
  if (!el) throw new Error(`no control ${name} in #${id}`);
  el.value = String(value);
  el.dispatchEvent(new Event(el.tagName === 'SELECT' ? 'change' : 'input', {bubbles: true}));
  await window.aimViews[id].runAsync();
  return {shown: el.value, signal: window.aimViews[id].signal(name)};
}"""

_CONTROLS = """(id) => [...document.querySelectorAll(`#${id} .vega-bindings [name]`)].map(el => ({
  name: el.getAttribute('name'), tag: el.tagName, value: el.value,
  min: el.min, max: el.max, options: el.tagName === 'SELECT' ? [...el.options].map(o => o.value) : null}))"""


def _require_build():
    if not (HTML_DIR / EXPLORE).is_file():
        pytest.fail(f"no built book at {HTML_DIR}: run `make book` first (or set AIM_BOOK_HTML)")


class ExplorerPage:
    """A page of the book with its explorers drawn, and what it logged and loaded."""

    def __init__(self, browser, base, path, width=1280):
        self.page = browser.new_page(viewport={"width": width, "height": 800})
        self.errors, self.outside, self.bytes = [], [], {}
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def route(r):
            if r.request.url.startswith(base):
                r.continue_()
            else:
                self.outside.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.on("response", self._count)
        self.page.goto(f"{base}{path}", wait_until="load")
        n = len(VIEWS[path])
        # every chart of the page drawn (the views of VIEWS and any other, as chapter 9's own-channel one)
        self.page.wait_for_function(
            f"window.aimViews && Object.keys(window.aimViews).length >= {n} && "
            "Object.keys(window.aimViews).length === document.querySelectorAll('.aim-vega').length",
            timeout=30_000)

    def _count(self, response):
        try:
            self.bytes[response.url] = len(response.body())
        except Exception:  # a redirect or an aborted request has no body
            pass

    def marks(self, view, name):
        return self.page.evaluate(_MARKS, [view, f"^{name}(_\\d+)?_marks$", False])

    def set(self, view, name, value):
        return self.page.evaluate(_SET, [view, name, value])

    def controls(self, view):
        return {c["name"]: c for c in self.page.evaluate(_CONTROLS, view)}

    def snapshot(self, view, names):
        """What the view draws: the data and screen position of every item of the named marks,
        as one canonical string a mark (items sorted, their fields sorted by name, positions to
        0.01 px), made in the page: handing the 2576 cells of the phase explorer's heat map to
        Python as objects took 1.7-2.9 s a snapshot, most of its every-control test."""
        return {name: self.page.evaluate(_MARKS, [view, f"^{name}(_\\d+)?_marks$", True]) for name in names}

    def close(self):
        self.page.close()


@pytest.fixture
def open_page(browser, book_server):
    _require_build()
    pages = []

    def _open(path, width=1280):
        pages.append(ExplorerPage(browser, book_server, path, width))
        return pages[-1]

    yield _open
    for p in pages:
        p.close()


def _curve(page, view, name="curve"):
    pts = [m["datum"] for m in page.marks(view, name)]
    return pts


@pytest.mark.parametrize("path", sorted(VIEWS))
def test_explorers_draw_on_load_offline(open_page, path):
    page = open_page(path)
    for view in VIEWS[path]:
        assert page.marks(view, "curve" if view != "explorer-phase" else "heat"), view
    assert not page.errors, f"{path}: console errors {page.errors}"
    assert not page.outside, f"{path}: requests outside the book {page.outside}"
    bundle = sum(n for url, n in page.bytes.items() if "vega-bundle.js" in url)
    specs = page.page.evaluate("""() => [...document.querySelectorAll('.aim-vega + script')]
                                        .reduce((n, s) => n + s.textContent.length, 0)""")
    assert bundle > 0 and specs > 0
    added, total = bundle + specs, sum(page.bytes.values())
    print(f"{path}: {total / 1e6:.2f} MB in all, of which the explorers {added / 1e6:.2f} MB")
    assert added < EXPLORER_WEIGHT_BUDGET, f"{path}: the explorers add {added / 1e6:.2f} MB"


# control -> a new value; the marks whose drawing must change ("beta" changes only the text)
CURVE_MOVES = [("channel", "linear", ("curve", "cursor", "alpha_pr")),
               ("rho", 1.5, ("curve", "cursor", "alpha_pr")),
               ("T", 4, ("curve", "cursor", "alpha_pr")),
               ("log10_beta", 1.5, ("readout",)),
               ("noise", 0.2, ("curve", "cursor")),
               ("alpha_from", 40, ("curve", "cursor")),
               ("alpha_to", 50, ("curve", "cursor")),
               ("alpha", 0.05, ("cursor", "readout"))]
CURVE_MARKS = ("curve", "cursor", "alpha_pr", "readout")


def _move_each_control(page, view, moves, marks, check=None, restore=False):
    """Set each control to its new value, assert the named marks were redrawn, set it back.

    `check(name, before, after)` adds assertions for one control; with `restore`, the
    drawing after setting a control back must be the original one.
    """
    assert set(page.controls(view)) == {name for name, _, _ in moves}
    before = page.snapshot(view, marks)
    for name, value, moved in moves:
        old = page.controls(view)[name]["value"]
        page.set(view, name, value)
        after = page.snapshot(view, marks)
        for mark in moved:
            assert after[mark] != before[mark], f"{name} = {value} left {mark} unchanged"
        if check is not None:
            check(name, before, after)
        page.set(view, name, old)
        if restore:
            assert page.snapshot(view, marks) == before, f"resetting {name} did not restore"


def test_every_control_of_the_error_explorer_moves_the_drawing(open_page):
    page = open_page(EXPLORE)

    def beta_moves_only_the_readout(name, before, after):
        if name == "log10_beta":     # claim 1 of chapter 9: beta moves nothing but its read-out
            assert after["curve"] == before["curve"] and after["cursor"] == before["cursor"]
            assert "β = 31.6" in after["readout"]  # the read-out text, in its canonical string

    _move_each_control(page, "explorer-curve", CURVE_MOVES, CURVE_MARKS,
                       check=beta_moves_only_the_readout, restore=True)
    assert not page.errors


SETTINGS = [dict(rho=0.5, T=3, channel="softmax", noise=0.05, alpha=0.021),
            dict(rho=1.5, T=2, channel="linear", noise=0.0, alpha=0.07),
            dict(rho=0.2, T=2, channel="hardmax", noise=0.2, alpha=0.5),
            dict(rho=0.5, T=3, channel="relu", noise=0.0, alpha=0.09),
            dict(rho=0.75, T=4, channel="sigmoid", noise=0.05, alpha=0.02),
            dict(rho=1.0, T=3, channel="causal_softmax", noise=0.0, alpha=0.1)]


@pytest.mark.parametrize("st", SETTINGS, ids=lambda s: s["channel"])
def test_drawn_curve_is_the_state_evolution(open_page, st):
    page = open_page(EXPLORE)
    view = "explorer-curve"
    for name in ("channel", "rho", "T", "noise", "alpha"):
        page.set(view, name, st[name])
    pts = sorted((d["alpha"], d["m"]) for d in _curve(page, view) if d.get("t") != 2)
    alpha, drawn = np.array(pts).T
    assert alpha.size >= 60, f"only {alpha.size} points drawn"
    live = aim.solve_state_evolution(alpha, st["rho"], T=st["T"], channel=st["channel"],
                               noise=st["noise"], beta=2.0).mmse
    gap = float(np.max(np.abs(drawn - live)))
    assert gap < TOL_DRAWN, (st, gap)
    # the cursor and its read-out
    (cur,) = [m["datum"] for m in page.marks(view, "cursor")]
    assert abs(cur["alpha_at"] - st["alpha"]) < 1e-12
    at = float(aim.solve_state_evolution(st["alpha"], st["rho"], T=st["T"], channel=st["channel"],
                                   noise=st["noise"], beta=2.0).mmse)
    assert abs(cur["m_at"] - at) < TOL_INTERP, (st, cur["m_at"], at)
    (text,) = [m["text"] for m in page.marks(view, "readout")]
    assert f"error = {cur['m_at']:.4f}" in text
    if st["channel"] != "hardmax" and st["noise"] == 0:
        a_pr = aim.perfect_recovery_threshold(st["rho"], st["T"], channel=st["channel"])
        (rule,) = [m["datum"] for m in page.marks(view, "alpha_pr")]
        assert abs(rule["a_pr"] - a_pr) < 1e-12
        assert f"α_PR = {a_pr:.4f}" in text
    (note,) = [m["text"] for m in page.marks(view, "note")]
    assert ("linear curve" in note) == (st["channel"] == "sigmoid")


def test_published_hardmax_curve_is_overlaid(open_page):
    page = open_page(EXPLORE)
    view = "explorer-curve"
    page.set(view, "channel", "hardmax")
    pts = _curve(page, view)
    pub = sorted((d["alpha"], d["m"]) for d in pts if d["t"] == 2)
    exact = dict((d["alpha"], d["m"]) for d in pts if d["t"] == 1)
    assert pub and exact
    a, m = np.array([p for p in pub if p[0] >= 0.02]).T
    live = aim.solve_state_evolution(a, 0.5, channel="hardmax", score="published").mmse
    assert float(np.max(np.abs(m - live))) < TOL_DRAWN
    assert all(exact[x] <= y + 1e-9 for x, y in pub)        # the exact error is lower
    page.set(view, "noise", 0.05)                           # the published curve is noiseless only
    assert not [d for d in _curve(page, view) if d["t"] == 2]
    page.set(view, "T", 3)                                  # hardmax is tabulated at T = 2 only
    assert not _curve(page, view)
    (note,) = [m["text"] for m in page.marks(view, "note")]
    assert "T = 2 only" in note


PHASE_MOVES = [("T", 3, ("heat", "cursor")), ("noise", 0.5, ("heat", "cursor")),
               ("channel", "relu", ("heat", "cursor")), ("cursor_rho", 1.0, ("cursor", "readout")),
               ("cursor_alpha", 0.2, ("cursor", "readout"))]


def test_every_control_of_the_phase_explorer_moves_the_drawing(open_page):
    page = open_page(EXPLORE)
    view = "explorer-phase"
    _move_each_control(page, view, PHASE_MOVES, ("heat", "cursor", "readout"))
    # the cursor reads off the state evolution
    for rho, alpha, T, noise, channel in ((0.3, 0.04, 2, 0.0, "softmax"), (1.25, 0.02, 3, 0.05, "softmax"),
                                          (0.5, 0.1, 2, 0.0, "relu"), (0.75, 0.03, 3, 0.2, "relu"),
                                          (0.5, 0.2, 2, 0.05, "causal_softmax")):
        for name, value in (("T", T), ("noise", noise), ("channel", channel), ("cursor_rho", rho),
                            ("cursor_alpha", alpha)):
            page.set(view, name, value)
        (cur,) = [m["datum"] for m in page.marks(view, "cursor")]
        live = float(aim.solve_state_evolution(alpha, rho, T=T, noise=noise, channel=channel).mmse)
        assert abs(cur["m_at"] - live) < TOL_INTERP, (rho, alpha, T, cur["m_at"], live)
        (text,) = [m["text"] for m in page.marks(view, "readout")]
        assert f"error = {cur['m_at']:.4f}" in text
    assert not page.errors


def test_hardmax_explorer_of_chapter_4(open_page):
    page = open_page(HARDMAX)
    view = "explorer-hardmax"
    drawn = {}
    for rho in (0.5, 2.0):
        page.set(view, "rho", rho)
        pts = _curve(page, view)
        for t, score in ((1, "exact"), (2, "published")):
            a, m = np.array(sorted((d["x"], d["m"]) for d in pts if d["t"] == t and d["x"] >= 0.02)).T
            live = aim.solve_state_evolution(a, rho, channel="hardmax", score=score).mmse
            assert float(np.max(np.abs(m - live))) < TOL_DRAWN, (rho, score)
            drawn[rho, score] = m
    assert not np.allclose(drawn[0.5, "exact"], drawn[2.0, "exact"])
    assert not page.errors


def test_controls_clamp_to_the_tables(open_page):
    page = open_page(EXPLORE)
    tables = aim.explore.load_tables()
    for view in VIEWS[EXPLORE]:
        for name, c in page.controls(view).items():
            if c["tag"] == "SELECT":
                opts = {float(o) if re.fullmatch(r"[\d.]+", o) else o for o in c["options"]}
                expected = {"rho": set(tables.rhos), "cursor_rho": set(tables.rhos),
                            "noise": set(tables.noises)}.get(name)
                if expected is not None:
                    assert opts == expected, (view, name, opts)
                continue
            lo, hi = float(c["min"]), float(c["max"])
            for bad, edge in ((hi * 10 + 5, hi), (lo - 10, lo)):
                got = page.set(view, name, bad)
                assert float(got["shown"]) == edge and float(got["signal"]) == edge, (view, name, got)
    assert not page.errors


def test_explorer_of_a_user_channel(open_page):
    """Chapter 9, "Your own channel": the clip map's curves, solved when the page was built."""
    import jax.numpy as jnp

    page = open_page(EXPLORE)
    view = "explorer-clip"
    ch = aim.elementwise_channel(lambda h: jnp.clip(h, -0.5, 1.0), name="clip")
    drawn_at = {}
    for noise in (0.2, 0.0):
        page.set(view, "noise", noise)
        a, drawn = np.array(sorted((d["alpha"], d["m"]) for d in _curve(page, view))).T
        assert a.size == 60
        live = aim.solve_state_evolution(a[::6], 0.5, T=2, channel=ch, noise=noise).mmse
        assert float(np.max(np.abs(drawn[::6] - live))) < TOL_DRAWN, noise
        drawn_at[noise] = drawn
    assert np.all(drawn_at[0.2] > drawn_at[0.0])
    assert not page.errors


# -------------------------------------------------------------------------------------------
# what a reader sees: messages, legends, type sizes, a phone's width, numbers and captions

def _readout(page, view):
    (text,) = [m["text"] for m in page.marks(view, "readout")]
    return text


def test_cursor_outside_the_table_says_so(open_page):
    """The cursor is read at the end of the tables when it is past them, and the read-out
    says so, with the slider's own alpha (it once showed 0.150 while the slider said 0.3)."""
    page = open_page(EXPLORE)
    view = "explorer-curve"
    page.set(view, "T", 3)                                   # softmax, T = 3: the table ends at 2 / 10
    page.set(view, "alpha", 0.3)
    text = _readout(page, view)
    assert text.startswith("cursor α = 0.300") and "outside the table (α from 0 to 0.2)" in text, text
    assert "read at α = 0.200" in text, text
    page.set(view, "alpha", 0.15)                            # inside: no such line
    assert "outside" not in _readout(page, view)
    view = "explorer-phase"
    page.set(view, "T", 5)                                   # the table ends at 2 / 28
    page.set(view, "cursor_alpha", 0.4)
    text = _readout(page, view)
    assert "α = 0.400" in text and "above the table (α ≤ 0.0714)" in text, text
    assert "read at α = 0.071" in text, text
    assert not page.errors


def _plot_width(page, view):
    """The plot's width (the explorer's default), which the x scale spans."""
    import inspect

    return inspect.signature(aim.explore.error_curve_explorer).parameters["width"].default


def test_default_range_fits_the_curve_and_an_inverted_one_says_so(open_page):
    """By default the plotted range is the whole table at every T (a T = 3 curve fills the
    chart); "α from" above "α to" draws the range between them, with a note."""
    page = open_page(EXPLORE)
    view = "explorer-curve"
    width = _plot_width(page, view)
    for T in (2, 3, 8):
        page.set(view, "T", T)
        xs = [m["x"] for m in page.marks(view, "curve")]
        assert max(xs) == pytest.approx(width, abs=1), (T, max(xs), width)
        assert min(xs) == pytest.approx(0, abs=1), (T, min(xs))
    (note,) = [m["text"] for m in page.marks(view, "note")]
    assert note == ""
    page.set(view, "alpha_from", 60)
    page.set(view, "alpha_to", 20)
    inside = [m for m in page.marks(view, "curve") if -1 <= m["x"] <= width + 1]
    assert len(inside) > 10, "an inverted range drew nothing"
    (note,) = [m["text"] for m in page.marks(view, "note")]
    assert "“α from” is above “α to”" in note, note
    assert not page.errors


_LEGEND = """(id) => [...document.querySelectorAll(`#${id} svg g.role-legend`)].map(g => ({
  title: [...g.querySelectorAll('.role-legend-title text')].map(t => t.textContent).join(' '),
  gradient: g.querySelectorAll('.role-legend-gradient path, .role-legend-gradient rect').length}))"""


def test_phase_explorer_has_a_colour_legend(open_page):
    page = open_page(EXPLORE)
    legends = page.page.evaluate(_LEGEND, "explorer-phase")
    assert [lg["title"] for lg in legends] == ["error"], legends
    assert legends[0]["gradient"] >= 1, legends


_FONTS = """(id) => [...document.querySelectorAll(`#${id} svg text, #${id} .vega-bindings label`)]
  .filter(t => t.textContent.trim())
  .map(t => [t.textContent.trim().slice(0, 30), parseFloat(getComputedStyle(t).fontSize)])"""


@pytest.mark.parametrize("path", sorted(VIEWS))
def test_explorer_type_is_readable(open_page, path):
    """No text of an explorer (axes, legends, read-outs, controls) under 12 px (Vega's own
    defaults are 10 and 11 px)."""
    page = open_page(path)
    for view in page.page.evaluate("() => [...document.querySelectorAll('.aim-vega')].map(e => e.id)"):
        sizes = page.page.evaluate(_FONTS, view)
        assert sizes, view
        small = [(t, px) for t, px in sizes if px < 12]
        assert not small, (view, small[:5])


_BOXES = """() => [...document.querySelectorAll('.aim-vega')].map(e => ({id: e.id,
  svg: e.querySelector('svg').getBoundingClientRect().toJSON(),
  controls: [...e.querySelectorAll('.vega-bind')].map(b => [b.querySelector('[name]').name,
    b.getBoundingClientRect().left, b.getBoundingClientRect().right])}))"""


@pytest.mark.parametrize("path", sorted(VIEWS))
def test_explorers_fit_a_phone(open_page, path):
    """At a phone's width (375 px) every control and the whole chart are on the screen."""
    width = 375
    page = open_page(path, width=width)
    for box in page.page.evaluate(_BOXES):
        assert 0 <= box["svg"]["left"] and box["svg"]["right"] <= width, box
        cut = [c for c in box["controls"] if c[1] < 0 or c[2] > width]
        assert not cut, (box["id"], cut)


_FIGURES = """() => [...document.querySelectorAll('.aim-vega')].map(e => {
  const fig = e.closest('figure');
  return {id: e.id, number: fig && fig.querySelector('.caption-number') ?
            fig.querySelector('.caption-number').textContent.trim() : null,
          caption: fig && fig.querySelector('figcaption') ?
            fig.querySelector('figcaption').textContent.trim() : ''};
})"""


@pytest.mark.parametrize("path", sorted(VIEWS))
def test_every_explorer_has_a_number_and_a_caption(open_page, path):
    page = open_page(path)
    chapter = int(path.split("/")[1][:2])
    figures = page.page.evaluate(_FIGURES)
    assert {f["id"] for f in figures} >= set(VIEWS[path])
    for f in figures:
        assert f["number"] and re.fullmatch(rf"Fig\. {chapter}\.\d+:?", f["number"]), f
        assert len(f["caption"]) > 40, f


@pytest.mark.parametrize("path", sorted(VIEWS))
def test_explorers_say_why_without_scripts(browser, book_server, path):
    """Where scripts do not run (<noscript>), or the Vega bundle does not load, each
    explorer's place holds a visible message instead of an empty box."""
    _require_build()
    n = len(VIEWS[path]) + (path == EXPLORE)         # chapter 9's own-channel explorer too
    for scripts in (False, True):
        context = browser.new_context(java_script_enabled=scripts, viewport={"width": 1280, "height": 800})
        page = context.new_page()
        outside = []

        def route(r):
            url = r.request.url
            if not url.startswith(book_server):
                outside.append(url)
                r.abort()
            elif url.endswith("/_static/vega-bundle.js"):   # the bundle lost (scripts on)
                r.abort()
            else:
                r.continue_()

        page.route("**/*", route)
        try:
            page.goto(f"{book_server}{path}", wait_until="load")
            page.wait_for_timeout(300)
            shown = page.evaluate("""() => [...document.querySelectorAll('.aim-vega')].map(e => {
              const m = e.querySelector('.aim-vega-message');
              return m ? [m.textContent, m.getBoundingClientRect().height] : null; })""")
        finally:
            context.close()
        assert len(shown) == n and all(m and m[1] > 0 for m in shown), (scripts, shown)
        expected = aim.explore.NO_BUNDLE_MESSAGE if scripts else aim.explore.NO_SCRIPT_MESSAGE
        assert all(m[0] == expected for m in shown), (scripts, shown)
        assert not outside, outside
