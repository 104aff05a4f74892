"""The problem sets of the book: per chapter its exercises, and a second copy with the solutions.

Run by the reader's HTML build (``build-finished``, see ``aim_book.py``), like the Colab
notebooks: the exercises are taken from each chapter's ``## Exercises`` section, with the
numbers, titles and metadata the book gives them (``aim_teaching``), their references
turned into links to the published book (``aim_colab``'s converter, so a problem set
never prints "??"), and each solution's code cells with the outputs this build computed
(``_build/jupyter_execute``): the solutions printed are the ones the build ran.

It writes a small Jupyter Book project to ``_build/problems`` (``_config.yml``,
``_toc.yml``, ``problem-set-N.ipynb`` and ``problem-set-N-solutions.ipynb``), which
``make pdf`` builds with Jupyter Book's LaTeX builder into one PDF each.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import aim_toc
import nbformat
import yaml

from aim_colab import (_SOLUTION_MARK, _SOLUTION_SPLIT, ChapterConverter, Resolver,
                       _bib_labels)

_ANCHOR = re.compile(r'<a id="[^"]*"></a>\s*')
EXERCISES = re.compile(r"^## Exercises[ \t]*$", re.M)
REFERENCES = re.compile(r"^## References[ \t]*$", re.M)


def _exercise_cells(src):
    """The cells of the ``## Exercises`` section (first and last cut at the headings)."""
    cells, inside = [], False
    for cell in src.cells:
        text = cell.source
        if cell.cell_type == "markdown" and not inside and EXERCISES.search(text):
            inside = True
            text = text[EXERCISES.search(text).end():]
        elif not inside:
            continue
        if cell.cell_type == "markdown" and REFERENCES.search(text):
            text = text[:REFERENCES.search(text).start()]
            cells.append(("markdown", text, cell))
            break
        cells.append((cell.cell_type, text, cell))
    return cells


def executed_notebook(app, doc: str):
    """The chapter as this build executed it, with its outputs (``_build/jupyter_execute``,
    which ``aim_book`` completes from the execution cache)."""
    path = Path(app.outdir).parent / "jupyter_execute" / f"{doc}.ipynb"
    if not path.exists():
        raise FileNotFoundError(f"problem sets: no executed notebook {path}")
    nb = nbformat.read(path, as_version=4)
    if not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"):
        raise ValueError(f"problem sets: {path} has no outputs")
    return nb


def _outputs_by_source(nb) -> dict:
    return {c.source.strip(): c.get("outputs", []) for c in nb.cells if c.cell_type == "code"}


def problem_set(md_path: Path, doc: str, resolver: Resolver, bib_labels: dict,
                executed, book_title: str, solutions: bool):
    """One chapter's problem set (``solutions=False``) or its solutions, as a notebook."""
    import jupytext

    src = jupytext.read(md_path, fmt="md:myst")
    conv = ChapterConverter(resolver, doc, bib_labels)
    number = resolver.chapter_number(doc)
    title, url = resolver.env.titles[doc].astext(), resolver.url(doc)
    outputs = _outputs_by_source(executed) if solutions else {}
    state: dict = {"solution": None}
    kind = "solutions" if solutions else "problem set"
    head = (f"# Problem set {number}{' — solutions' if solutions else ''}: {title}\n\n"
            f"The exercises of [Chapter {number}]({url}) of *{book_title}*, numbered as in the "
            "book. Under each title: its difficulty (1, routine; 2, a derivation of a few steps; "
            "3, hard), the estimated time, the section it practises, and whether it needs a GPU.")
    head += (" Each solution's code ran in the book's build; its outputs are printed below it."
             if solutions else " The solutions are a separate document.")
    cells = [nbformat.v4.new_markdown_cell(head)]
    in_solution, count = False, 0
    for cell_type, text, cell in _exercise_cells(src):
        if cell_type == "code":
            if in_solution and solutions:
                key = cell.source.strip()
                if key not in outputs:
                    raise KeyError(f"problem sets: a solution cell of {doc} was not executed")
                code = nbformat.v4.new_code_cell(cell.source, outputs=outputs[key])
                code.execution_count = None
                cells.append(code)
            continue
        if cell_type != "markdown":
            continue
        for piece in _SOLUTION_SPLIT.split(text):
            mark = _SOLUTION_MARK.fullmatch(piece)
            if mark:
                in_solution = mark.group("kind") == "start"
                if in_solution and solutions:
                    cells.append(nbformat.v4.new_markdown_cell("### Solution"))
                continue
            if not piece.strip() or (in_solution and not solutions):
                continue
            md = _ANCHOR.sub("", conv._plain(piece, state)).strip()
            count += md.count("### Exercise ")
            md = md.replace("### Exercise ", "## Exercise ")
            if md:
                cells.append(nbformat.v4.new_markdown_cell(md))
    if count == 0:
        raise ValueError(f"problem sets: no exercise found in {md_path} ({kind})")
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python",
                                  "name": "python3"},
                   "aim_tutorial": {"generated_from": f"{doc}.md", "by": "_ext/aim_problems.py",
                                    "exercises": count}}
    for i, c in enumerate(nb.cells):
        c["id"] = f"cell-{i:03d}"
    return nb, number, title, count


def write_problem_sets(app, exception=None):
    """``build-finished`` of the reader's HTML build: the problem-set project in ``_build/problems``."""
    if exception is not None or app.builder.format != "html" or app.config.aim_edition != "reader":
        return
    cfg = app.config
    resolver = Resolver(app.env, cfg.html_baseurl, cfg.mathjax3_config["tex"]["macros"],
                        cfg.numfig_format)
    srcdir, build = Path(app.srcdir), Path(app.outdir).parent
    labels, _ = _bib_labels(srcdir / "book" / "references.bib")
    out = build / "problems"
    out.mkdir(parents=True, exist_ok=True)
    book_title = cfg.html_title
    pages, listing = [], []
    chapters = set(aim_toc.chapters(srcdir))
    for doc in sorted(d for d in app.env.found_docs if d in chapters):
        for solutions in (False, True):
            nb, number, title, count = problem_set(
                srcdir / f"{doc}.md", doc, resolver, labels,
                executed_notebook(app, doc) if solutions else None, book_title, solutions)
            name = f"problem-set-{number}" + ("-solutions" if solutions else "")
            (out / f"{name}.ipynb").write_text(
                json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
            pages.append(name)
            listing.append({"name": name, "chapter": int(number), "solutions": solutions,
                            "exercises": count})
    index = ["# Problem sets", "", f"The exercises of *{book_title}*, one set a chapter, "
             "with and without solutions.", ""] + [f"- {{doc}}`{p}`" for p in pages]
    (out / "index.md").write_text("\n".join(index) + "\n", encoding="utf-8")
    (out / "_toc.yml").write_text(yaml.safe_dump(
        {"format": "jb-book", "root": "index", "chapters": [{"file": p} for p in pages]}),
        encoding="utf-8")
    (out / "problem_sets.json").write_text(json.dumps(listing, indent=1) + "\n", encoding="utf-8")
    config = {
        "title": f"{book_title}: problem sets", "author": cfg.author,
        "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"},
        "parse": {"myst_enable_extensions": ["amsmath", "dollarmath"]},
        # one PDF a page (make pdf: --individualpages), as articles
        "latex": {"latex_engine": "xelatex", "use_jupyterbook_latex": False,
                  "latex_documents": {"theme": "howto"}},
        "sphinx": {
            "extra_extensions": ["sphinxcontrib.rsvgconverter"],
            "config": {
                "latex_elements": {
                    "tableofcontents": "",
                    "papersize": "a4paper",
                    # the titles carry the book's numbers; LaTeX adds none of its own
                    "preamble": "\\setcounter{secnumdepth}{-2}\n",
                },
                "latex_show_urls": "no",
                "suppress_warnings": ["mystnb.unknown_mime_type"],
                "nb_mime_priority_overrides": [["latex", "image/svg+xml", 15]],
            },
        },
    }
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
