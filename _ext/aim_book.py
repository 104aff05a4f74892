"""Sphinx helpers for the aim-tutorial book (loaded through ``_config.yml``).

* ``aimstyle``: the pybtex style of the bibliographies. It is pybtex's ``unsrt``
  (which already links ``doi``, ``eprint`` and ``url`` fields), with author-year
  labels ("Boncoraglio et al., 2025") that read like the author-year citations
  in the text ("[Boncoraglio et al., 2025]"), and entries sorted by author,
  year and title on the plain-text names (``Zdeborov{\\'a}`` sorts as
  "zdeborova"). Two entries of one list with the same label get "2016a",
  "2016b" (ordered by title; the in-text citation keeps the plain year).
* Each script once on a page (Sphinx 7.4 emitted two inline scripts twice).
* Launch buttons (Colab) only on pages that have a Colab notebook
  ``book/NAME.ipynb``: a page that is executed but ships no notebook (the
  benchmarks appendix) gets none, instead of a button that opens its ``.md``.
* The ``.ipynb`` download of a chapter is its Colab notebook (``aim_colab``: plain
  Jupyter Markdown), copied into the site as ``notebooks/NAME.ipynb``, and each chapter
  links it under its title. The theme's button gave the MyST notebook, whose
  directives, roles and macros plain Jupyter shows raw. Not in the student edition,
  whose notebooks would hold the solutions.
* One output box per stream and cell (``nb_merge_streams``), without writing the
  merge back: myst-nb's ``coalesce_streams`` edits the first stream output in
  place, so the executed notebook kept the merged text *and* the later pieces
  (nbval then saw a print twice). We hand it a copy. The kernel splits a single
  ``print`` into two stream messages whenever its flush timer fires between the
  text and the newline, which happens on a loaded machine.
* The explorers (:mod:`aim_tutorial.explore`): the build sets ``AIM_BOOK_BUILD``
  before any notebook runs, so a chart is written as inline HTML that draws
  itself with ``window.vegaEmbed``; the Vega bundle of ``vl-convert-python``
  (Vega, Vega-Lite and Vega-Embed, no network) is written once into
  ``_static`` as a classic script (it runs from ``file://`` too) and loaded only by
  the pages that hold a chart.
"""

from __future__ import annotations

import copy
import os
import unicodedata
from collections import Counter
from pathlib import Path

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle as AuthorYearTitleSort
from sphinx.domains.std import StandardDomain


def _text(latex: str) -> str:
    """Plain text of a LaTeX string: ``Zdeborov{\\'a}`` -> ``Zdeborová``."""
    return Text.from_latex(latex).render_as("text")


def _surname(person) -> str:
    return _text(" ".join(person.prelast_names + person.last_names))


def _sort_text(latex: str) -> str:
    """Sorting form of a LaTeX string: plain text, lower case, accents dropped."""
    decomposed = unicodedata.normalize("NFKD", _text(latex).lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


class AuthorYearTitleSortingStyle(AuthorYearTitleSort):
    """pybtex's author-year-title sort, on names without LaTeX markup or accents."""

    def person_key(self, person):
        return "  ".join(
            _sort_text(" ".join(parts))
            for parts in (
                person.prelast_names + person.last_names,
                person.first_names + person.middle_names,
                person.lineage_names,
            )
        )


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels "Surname, 2020", "A and B, 2020", "A et al., 2020"; a, b, ... on clashes."""

    def _label(self, entry) -> str:
        persons = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [_surname(p) for p in persons]
        if not names:
            who = entry.fields.get("title", entry.key)[:20]
        elif len(names) == 1:
            who = names[0]
        elif len(names) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        return f"{who}, {entry.fields.get('year', 'n.d.')}"

    def format_labels(self, sorted_entries):
        labels = [self._label(e) for e in sorted_entries]
        count = Counter(labels)
        seen: Counter = Counter()
        for label in labels:
            if count[label] > 1:
                seen[label] += 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
            else:
                yield label


class AimStyle(UnsrtStyle):
    default_label_style = "aim_author_year"
    default_sorting_style = "aim_author_year_title"


def _register_installed_pybtex_plugins():
    """Every installed pybtex plugin registered at run time, once.

    pybtex looks a plugin up (``find_plugin``: the text backend of every
    ``render_as("text")``, each style of each bibliography) first among the plugins registered
    at run time, then among the entry points of every installed distribution, reading each
    one's metadata again on every call. The book's build made 2066 such lookups, 130 s of the
    240 s of a profiled HTML build (cProfile; about 55 % of a build unprofiled, the same in
    the editions and the PDF). Registered here from one pass over the entry points, each
    lookup is a dictionary read; the classes are the same ones the entry points load (an alias,
    such as the backend ``text``, also under its group's own name, where pybtex looks first).
    """
    from importlib.metadata import distributions

    for ep in (ep for dist in distributions() for ep in dist.entry_points):
        if ep.group.startswith("pybtex."):
            try:
                klass = ep.load()
            except Exception:  # a plugin that does not import stays an entry point
                continue
            register_plugin(ep.group, ep.name, klass, force=True)
            if ep.group.endswith(".aliases"):  # an alias ("text") is looked up under the
                # group itself first, where only a run-time plugin spares the scan
                register_plugin(ep.group.rsplit(".", 1)[0], ep.name, klass, force=True)


_register_installed_pybtex_plugins()
register_plugin("pybtex.style.labels", "aim_author_year", AuthorYearLabelStyle)
register_plugin("pybtex.style.sorting", "aim_author_year_title", AuthorYearTitleSortingStyle)
register_plugin("pybtex.style.formatting", "aimstyle", AimStyle)


def _drop_launch_buttons(app, pagename, templatename, context, doctree):
    """Remove the notebook marker of executed pages that ship no Colab notebook."""
    meta = app.env.metadata.get(pagename, {})
    if "kernelspec" in meta:
        src = Path(app.env.doc2path(pagename))
        if not src.with_suffix(".ipynb").exists():
            meta.pop("kernelspec")


NOTEBOOKS = "notebooks"
NOTEBOOK_TOOLTIP = "Download this chapter as a Jupyter notebook (runs in Colab or Jupyter)"


def _ships_notebook(app, pagename) -> bool:
    """Whether the page is a chapter with a Colab notebook that this edition may give out."""
    import aim_toc

    return (pagename in aim_toc.chapters(app.srcdir)
            and Path(app.srcdir, pagename).with_suffix(".ipynb").is_file()
            and getattr(app.config, "aim_edition", "reader") != "student")


def point_download_button(header_buttons, url: str) -> None:
    """The header's ``.ipynb`` download set to ``url`` (added to the download menu if the
    theme gave the page none)."""
    for group in header_buttons:
        if group.get("label") != "download-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("label") == "download-notebook-button":
                button.update(url=url, tooltip=NOTEBOOK_TOOLTIP)
                return
        group.setdefault("buttons", []).insert(0, {
            "type": "link", "url": url, "text": ".ipynb", "icon": "fas fa-code",
            "tooltip": NOTEBOOK_TOOLTIP, "label": "download-notebook-button"})
        return


def notebook_line(body: str, url: str, name: str) -> str:
    """The chapter's body with a line under its title that links its notebook."""
    line = (f'<p class="aim-notebook-link">This chapter as a Jupyter notebook, for Colab, '
            f'JupyterLab or Jupyter: <a class="reference download" href="{url}" download>'
            f'<code class="docutils literal notranslate"><span class="pre">{name}</span></code></a></p>')
    head, sep, rest = body.partition("</h1>")
    return head + sep + "\n" + line + rest if sep else line + body


def _colab_notebook_download(app, pagename, templatename, context, doctree):
    if app.builder.format != "html" or not _ships_notebook(app, pagename):
        return
    name = Path(pagename).name + ".ipynb"
    url = context["pathto"](f"{NOTEBOOKS}/{name}", 1)
    point_download_button(context.get("header_buttons") or [], url)
    if context.get("body"):
        context["body"] = notebook_line(context["body"], url, name)


def _copy_colab_notebooks(app, exception):
    """The Colab notebooks this build wrote (``_build/colab``) into the site, for the links."""
    if exception is not None or app.builder.format != "html":
        return
    import shutil

    written = Path(app.outdir).parent / "colab"
    for doc in sorted(app.env.found_docs):
        if _ships_notebook(app, doc) and (written / f"{doc}.ipynb").is_file():
            target = Path(app.outdir) / NOTEBOOKS / f"{Path(doc).name}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(written / f"{doc}.ipynb", target)


def _script_key(js):
    if isinstance(js, str):
        return (js, ())
    return (js.filename or "", tuple(sorted((k, str(v)) for k, v in js.attributes.items())))


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    """Emit each script once.

    With Sphinx 7.4, sphinx-thebe's and sphinx-togglebutton's inline scripts are
    registered twice (filename ``None`` once, ``""`` once), so every page declared
    ``THEBE_JS_URL`` twice: a JavaScript error on every page.
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        key = _script_key(js)
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


_coalesce_streams = None


def _coalesce_copy(outputs):
    return _coalesce_streams(copy.deepcopy(outputs))


def _patch_merge_streams():
    from myst_nb.core import render

    global _coalesce_streams
    if render.coalesce_streams is not _coalesce_copy:
        _coalesce_streams = render.coalesce_streams
        render.coalesce_streams = _coalesce_copy


class _StandardDomainDoctreesReadOnce(StandardDomain):
    """Sphinx's standard domain, each page's doctree unpickled once for the ``numref`` roles.

    Sphinx (7.4) resolves a ``numref`` by unpickling the whole doctree of the target's page to
    find the labelled node and its type; the chapters' doctrees carry their executed outputs,
    and the book's 290 numrefs cost about a quarter of an HTML build (cProfile). Here the
    lookup reads a doctree kept from the first numref into its page, in the write phase only
    (the memo is emptied when the sources have been read and when the build ends); the lookup
    only reads the node, so the numbers are those of Sphinx's own path.
    """

    _memo: dict = {}

    def _resolve_numref_xref(self, env, fromdocname, builder, typ, target, node, contnode):
        memo, read = self._memo, env.get_doctree

        def get_doctree(docname):
            if docname not in memo:
                memo[docname] = read(docname)
            return memo[docname]

        env.get_doctree = get_doctree
        try:
            return super()._resolve_numref_xref(env, fromdocname, builder, typ, target, node, contnode)
        finally:
            del env.get_doctree

    @classmethod
    def forget(cls, *_args):
        cls._memo.clear()


VEGA_BUNDLE = "vega-bundle.js"


def _vega_bundle_if_charts(app, pagename, templatename, context, doctree):
    if 'class="aim-vega"' in (context.get("body") or ""):
        # a classic script, deferred (run before the page's load event, after its charts'
        # inline scripts, which wait for it): Chromium runs no module script from file://
        app.add_js_file(VEGA_BUNDLE, loading_method="defer")


def vega_bundle_script() -> str:
    """vl-convert's bundle of Vega, Vega-Lite and Vega-Embed as a classic script.

    ``vl_convert.javascript_bundle()`` is written as an ES module: it imports and exports
    nothing, and assigns ``window.vegaEmbed``, ``window.vega`` and ``window.vegaLite``; a
    module only kept its top-level names (one is ``_``) out of the page's global scope,
    and ran in strict mode. A strict function around it does both, and a classic script
    runs from ``file://`` too, where Chromium refuses module scripts (CORS). The test
    (tests/test_book_ext.py) checks that the bundle still has no import, export, top-level
    ``await`` or ``import.meta``, which a function could not hold."""
    import vl_convert

    return '(function () {\n"use strict";\n' + vl_convert.javascript_bundle() + "\n})();\n"


def _write_vega_bundle(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / VEGA_BUNDLE).write_text(vega_bundle_script(), encoding="utf-8")


def _executed_with_outputs(app, exception):
    """Each ``_build/jupyter_execute`` notebook with the outputs its page shows.

    With ``execute_notebooks: cache`` (build-strict, the editions) myst-nb 1.4 renders the
    outputs it took from the cache but writes the notebook it read, without them: nbval
    then had nothing to compare, and the problem sets no outputs to print. The notebook
    is merged with its cache record, as myst-nb merged it for the page."""
    if exception is not None or app.config.nb_execution_mode != "cache":
        return
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(app.config.nb_execution_cache_path)
    for path in sorted((Path(app.outdir).parent / "jupyter_execute").rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):
            continue
        try:
            _, merged = cache.merge_match_into_notebook(nb)
        except KeyError:        # not a cached page (a page that never ran)
            continue
        nbformat.write(merged, path)


# The narrowest a column of a PDF table gets: 8 digits. Sphinx's tabulary tables squeeze a
# column down to 3 digits (sphinxlatextables.sty), which the benchmarks page's tables of ten
# columns overran: "float64" printed as "float6", 11700 as "1170".
_TYMIN = "\\setlength{\\tymin}{8\\fontcharwd\\font`0 }"

# Inline code may break after an underscore. Sphinx breaks inline literals only after . , ; ? ! /
# (sphinxlatexliterals.sty), and a name such as alpha_perfect_recovery in a narrow column of the
# notation page ran up to 64 pt into the next one.
_UNDERSCORE_BREAKS = (
    "\\makeatletter\\let\\aim@upquote\\sphinxupquote"
    "\\protected\\def\\sphinxupquote#1{{\\let\\aim@us\\_\\def\\_{\\aim@us\\discretionary{}{}{}}"
    "\\aim@upquote{#1}}}\\makeatother"
)


def _latex_macros(app, config):
    """The book's TeX macros (``mathjax3_config``) in the LaTeX preamble: one definition; and
    the narrowest width of a table's column (``_TYMIN``); breaks after underscores in inline code
    (``_UNDERSCORE_BREAKS``)."""
    macros = config.mathjax3_config.get("tex", {}).get("macros", {})
    lines = [f"\\providecommand{{\\{name}}}{{}}\\renewcommand{{\\{name}}}{{{body}}}"
             for name, body in macros.items()] + [_TYMIN, _UNDERSCORE_BREAKS]
    elements = dict(config.latex_elements)
    elements["preamble"] = elements.get("preamble", "") + "\n" + "\n".join(lines) + "\n"
    config.latex_elements = elements


def setup(app):
    _patch_merge_streams()
    app.add_domain(_StandardDomainDoctreesReadOnce, override=True)
    app.connect("env-updated", _StandardDomainDoctreesReadOnce.forget)
    app.connect("build-finished", _StandardDomainDoctreesReadOnce.forget)
    # exercise metadata, the three editions, teaching notes, reading times
    app.setup_extension("aim_teaching")
    app.connect("config-inited", _latex_macros)
    # the executed notebooks with their outputs (nbval, the problem sets): before the next
    app.connect("build-finished", _executed_with_outputs)
    # the problem sets (make pdf), from the chapters and this build's numbering and outputs
    import aim_problems

    app.connect("build-finished", aim_problems.write_problem_sets)
    # read by aim_tutorial.explore.show in every kernel the build starts
    os.environ["AIM_BOOK_BUILD"] = "1"
    app.connect("html-page-context", _vega_bundle_if_charts, priority=400)
    app.connect("build-finished", _write_vega_bundle)
    # the Colab notebooks, from the chapters and this build's numbering
    import aim_colab

    app.connect("build-finished", aim_colab.write_notebooks)
    # ... and into the site, where each chapter's .ipynb download points (after the theme's
    # buttons, priority 501)
    app.connect("build-finished", _copy_colab_notebooks)
    app.connect("html-page-context", _colab_notebook_download, priority=502)
    # before sphinx-book-theme's own handler (default priority 500)
    app.connect("html-page-context", _drop_launch_buttons, priority=100)
    # after every extension has added its scripts
    app.connect("html-page-context", _dedupe_scripts, priority=1000)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
