"""The search page's snippets show no TeX source (_static/aim_search.js).

Sphinx's search page quotes each result's page text around the searched word; the
equations in that text are TeX, typeset by MathJax only on the page itself. The book's
script gives the snippet a plain-text form of each inline formula instead.
"""

_SNIPPETS = """async () => {
  for (let i = 0; i < 120; i++) {
    const done = document.querySelector('#search-results .search-summary, #search-results > p');
    if (done && /found|did not match/.test(done.textContent) &&
        document.querySelectorAll('#search-results p.context').length) break;
    await new Promise(r => setTimeout(r, 250));
  }
  await new Promise(r => setTimeout(r, 1000));  // the last summaries
  return [...document.querySelectorAll('#search-results p.context')].map(p => p.textContent);
}"""


_RESULTS = """async () => {
  for (let i = 0; i < 120; i++) {
    const done = document.querySelector('#search-results .search-summary, #search-results > p');
    if (done && /found|did not match/.test(done.textContent)) break;
    await new Promise(r => setTimeout(r, 250));
  }
  return document.querySelectorAll('#search-results li').length;
}"""


def test_search_snippets_show_no_tex(browser, book_server):
    page = browser.new_page()
    try:
        page.goto(f"{book_server}/search.html?q=softmax")
        if book_server.startswith("file:"):
            # from disk the browser lets Sphinx read the index (a script) but not the pages'
            # text (a fetch), so the results come without snippets: the results are listed
            assert page.evaluate(_RESULTS) >= 5
            snippets = []
        else:
            snippets = page.evaluate(_SNIPPETS)
            assert len(snippets) >= 5, snippets
        tex = [s for s in snippets if "\\" in s or "$" in s]
        assert not tex, f"snippets with TeX source: {tex[:3]}"
        plain = page.evaluate("(tex) => window.aimTexToText(tex)",
                              r"\tilde\alpha = \alpha(T^2+T-2), \mmse_\rho(1/\hat q)")
    finally:
        page.close()
    assert plain == "α̃ = α(T²+T−2), MMSEᵨ(1/q̂)", plain
