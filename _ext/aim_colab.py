"""The Colab notebooks of the book, generated from the chapters (those ``_toc.yml`` numbers: ``aim_toc``).

Run by the HTML build (``build-finished``, see ``aim_book.py``): the numbers of
equations, figures, propositions and exercises are the ones Sphinx gave them, read
from the build environment, so the notebook says "(2.6)" and "Proposition 3.1"
exactly where the HTML book does. Each chapter becomes ``_build/colab/book/NAME.ipynb``
(``make colab`` copies them to ``book/``, where the launch buttons point; ``make
colab-check`` fails when a committed one is stale).

What a notebook holds, in plain Jupyter Markdown that Colab, JupyterLab and GitHub render:

* a first code cell that installs the release of the package that matches the book
  (``pyproject.toml``'s version and repository: the tag ``v<version>``; ``AIM_INSTALL_SOURCE``
  overrides it) with pip constraints that keep the runtime's jax, jaxlib and numpy, prints what
  it installed and warns in one line when the runtime's JAX is outside the tested range
  (``aim_tutorial.config.check_runtime_jax``), and a
  second that prints the device and the precision and picks the problem sizes
  (``AIM_SCALE=paper`` on a GPU runtime, ``book`` otherwise, unless already set);
* directives as Markdown: "**Proposition 3.1** (title)", exercises under a heading,
  solutions folded in ``<details>`` (their code cells folded as Colab forms);
* cross-references and citations as links into the published book
  (``html.baseurl``); equation numbers as ``\\tag``; the book's TeX macros
  expanded in place (so no renderer needs them defined); a reference list at the end;
* the code cells of the chapter, without outputs; figure captions after the cell
  that draws the figure.

sphinx-tojupyter (QuantEcon's builder) was tried first: it writes every myst-nb
code cell as a Markdown code block, so its notebooks do not run.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import aim_toc
import nbformat

INSTALL_ENV = "AIM_INSTALL_SOURCE"
# what the install cell keeps of the runtime (pip constraints): Colab's GPU build of JAX
KEEP = ("jax", "jaxlib", "numpy")
# the cell every chapter used to carry; the generated install cell replaces it
_OLD_INSTALL = re.compile(r"^# In Colab only: install the book's package")

_ROLE = re.compile(r"\{(eq|numref|ref|prf:ref|cite|cite:p|cite:t|doc)\}`([^`]*)`")
_DIRECTIVE = re.compile(r"^(?P<fence>```+|:::+)\{(?P<name>[a-z:-]+)\}[ \t]*(?P<arg>[^\n]*)\n"
                        r"(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)
_SOLUTION_MARK = re.compile(r"(^```\{solution-(?P<kind>start|end)\}(?P<arg>[^\n]*)\n(?::[a-z-]+:[^\n]*\n)*```[ \t]*$)",
                            re.M)
_SOLUTION_SPLIT = re.compile(r"(^```\{solution-(?:start|end)\}[^\n]*\n(?::[a-z-]+:[^\n]*\n)*```[ \t]*$)", re.M)
_OPTION = re.compile(r"^:([a-z-]+):[ \t]*(.*)$")
_TARGET = re.compile(r"^\((?P<label>[A-Za-z0-9_.:-]+)\)=[ \t]*$", re.M)
_LABELLED_MATH = re.compile(r"^\$\$[ \t]*\n(?P<tex>.*?)\n\$\$[ \t]*\((?P<label>[A-Za-z0-9_.:-]+)\)[ \t]*$",
                            re.M | re.S)
_PRF_TITLES = {"definition": "Definition", "proposition": "Proposition", "theorem": "Theorem",
               "lemma": "Lemma", "remark": "Remark", "conjecture": "Conjecture",
               "corollary": "Corollary", "example": "Example", "proof": "Proof",
               "algorithm": "Algorithm", "property": "Property", "observation": "Observation"}


class Resolver:
    """Numbers, titles and URLs of the book's labels, from the Sphinx environment."""

    def __init__(self, env, baseurl: str, macros: dict, numfig_format: dict):
        self.env, self.base = env, baseurl.rstrip("/") + "/"
        self.macros = macros
        self.fmt = numfig_format
        self.std = env.domaindata["std"]["labels"]
        self.math = env.domaindata["math"]["objects"]
        self.numbers = {}                 # id -> (docname, kind, "3.1")
        for doc, kinds in env.toc_fignumbers.items():
            for kind, ids in kinds.items():
                for node_id, num in ids.items():
                    self.numbers[node_id] = (doc, kind, ".".join(map(str, num)))

    def url(self, doc: str, anchor: str = "") -> str:
        return f"{self.base}{doc}.html" + (f"#{anchor}" if anchor else "")

    def chapter_number(self, doc: str) -> str:
        num = self.env.toc_secnumbers.get(doc, {}).get("")
        return ".".join(map(str, num)) if num else ""

    def eq(self, label: str):
        doc, _ = self.math[label]
        node_id = f"equation-{label}".lower()          # Sphinx's ids are lower case
        _, _, num = self.numbers[node_id]
        return f"({num})", self.url(doc, node_id)

    def section(self, label: str):
        doc, anchor, title = self.std[label.lower()]
        return title, self.url(doc, anchor), doc, anchor

    def numbered(self, label: str):
        """(kind, number, url) of a figure, a prf box, an exercise or a numbered chapter."""
        doc, anchor, _ = self.std.get(label.lower(), (None, label, None))
        if anchor in self.numbers:
            doc, kind, num = self.numbers[anchor]
            return kind, num, self.url(doc, anchor)
        title, url, doc, anchor = self.section(label)
        secnums = self.env.toc_secnumbers.get(doc, {})
        key = "" if label.startswith("ch-") else f"#{anchor}"
        num = secnums.get(key) or secnums.get(f"#{anchor}")
        if not num:             # a target that is not the section's first id (as Sphinx looks it up)
            node = self._doctree(doc).ids.get(anchor)
            num = secnums.get("#" + node["ids"][0]) if node is not None and node.get("ids") else None
        return "section", ".".join(map(str, num)) if num else "", url

    def _doctree(self, doc: str):
        trees = self.__dict__.setdefault("_trees", {})
        if doc not in trees:
            trees[doc] = self.env.get_doctree(doc)
        return trees[doc]

    def number_of(self, label: str) -> str:
        """"3.1" for a numbered label (a figure, an exercise, a prf box); "" and a warning otherwise."""
        _, anchor, _ = self.std.get(label.lower(), (None, label.lower(), None))
        if anchor not in self.numbers:
            from sphinx.util import logging

            logging.getLogger(__name__).warning(f"Colab notebooks: {label!r} has no number")
            return ""
        return self.numbers[anchor][2]

    def expand_macros(self, text: str) -> str:
        for name, value in self.macros.items():
            text = re.sub(r"\\" + name + r"(?![A-Za-z])", lambda m, v=value: v, text)
        return text


def _kind_word(kind: str) -> str:
    return {"figure": "Fig.", "displaymath": "Equation", "exercise": "Exercise", "table": "Table",
            "section": "Section"}.get(kind, _PRF_TITLES.get(kind, kind.capitalize()))


class ChapterConverter:
    """One chapter's MyST Markdown cells to plain Jupyter Markdown."""

    def __init__(self, resolver: Resolver, doc: str, bib_labels: dict):
        self.r, self.doc, self.bib = resolver, doc, bib_labels
        self.cited: list = []

    # -- roles
    def role(self, m: re.Match) -> str:
        try:
            return self._role(m)
        except KeyError as e:
            # a failed cell in a development build leaves a figure unnumbered; under -W
            # (make test) this warning fails the build
            from sphinx.util import logging

            logging.getLogger(__name__).warning(
                f"Colab notebook of {self.doc}: unresolved reference {m.group(0)} ({e})")
            return m.group(2)

    def _role(self, m: re.Match) -> str:
        name, content = m.group(1), m.group(2)
        explicit = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", content)
        text, label = (explicit.group(1), explicit.group(2)) if explicit else (None, content)
        if name == "eq":
            num, url = self.r.eq(label)
            return f"[{num}]({url})"
        if name in ("ref", "doc"):
            title, url, _, _ = self.r.section(label)
            return f"[{text or title}]({url})"
        if name in ("numref", "prf:ref"):
            kind, num, url = self.r.numbered(label)
            if text:
                shown = text.replace("%s", num).replace("{number}", num)
            elif kind in _PRF_TITLES or kind == "exercise":       # as the book shows them
                shown = f"{_kind_word(kind)} {num}"
            else:
                fmt = self.r.fmt.get(kind)
                shown = fmt.replace("%s", num) if fmt else f"{_kind_word(kind)} {num}"
            return f"[{shown}]({url})"
        if name.startswith("cite"):
            keys = [k.strip() for k in content.split(",") if k.strip()]
            links = []
            for k in keys:
                if k not in self.cited:
                    self.cited.append(k)
                links.append(f"[{self.bib[k]}]({self.r.url(self.doc, 'references')})")
            return "[" + "; ".join(links) + "]"
        raise ValueError(f"{self.doc}: unknown role {{{name}}}")

    # -- maths and targets
    def labelled_math(self, m: re.Match) -> str:
        num, _ = self.r.eq(m.group("label"))
        return (f'<a id="equation-{m.group("label").lower()}"></a>\n\n'
                f"$$\n{m.group('tex')}\n\\tag{{{num[1:-1]}}}\n$$")

    # -- directives
    def directive(self, m: re.Match, state: dict) -> str:
        name, arg = m.group("name"), m.group("arg").strip()
        lines = m.group("body").split("\n")
        opts = {}
        while lines and _OPTION.match(lines[0]):
            k, v = _OPTION.match(lines[0]).groups()
            opts[k] = v.strip()
            lines.pop(0)
        body = "\n".join(lines).strip("\n")
        body = _DIRECTIVE.sub(lambda mm: self.directive(mm, state), body)
        label = opts.get("label", "")
        anchor = f'<a id="{label}"></a>\n\n' if label else ""
        if name.startswith("prf:"):
            kind = name[4:]
            word = _PRF_TITLES.get(kind, kind.capitalize())
            num = self.r.number_of(label) if label else ""
            head = f"**{word}{' ' + num if num else ''}**" + (f" ({arg})" if arg else "")
            return f"{anchor}> {head}\n>\n" + "\n".join(f"> {ln}" if ln else ">" for ln in body.split("\n"))
        if name == "exercise":
            num = self.r.number_of(label)
            return (f"{anchor}### Exercise {num}" + (f": {arg}" if arg else "")
                    + f"\n\n{self.exercise_meta(opts)}{body}")
        if name == "teaching-notes":                        # the instructor edition's only
            return ""
        if name == "bibliography":
            return "__BIBLIOGRAPHY__"
        if name in ("note", "warning", "tip", "important", "admonition"):
            head = arg if name == "admonition" else name.capitalize()
            if "dropdown" in opts.get("class", ""):          # folded in the book: folded here
                return f"{anchor}<details><summary><b>{head}</b></summary>\n\n{body}\n\n</details>"
            return f"> **{head}**\n>\n" + "\n".join(f"> {ln}" if ln else ">" for ln in body.split("\n"))
        raise ValueError(f"{self.doc}: no Markdown form for the directive {{{name}}}")

    def exercise_meta(self, opts: dict) -> str:
        """The exercise's metadata line, as the book shows it (``aim_teaching.meta_words``)."""
        import aim_teaching

        if not all(k in opts for k in aim_teaching.META):
            return ""
        meta = aim_teaching.parse_meta(opts)
        before, fmt, after = aim_teaching.meta_words(meta)
        _, num, url = self.r.numbered(meta["practises"])
        return f"*{before}[{fmt.replace('%s', num)}]({url}){after}*\n\n"

    def _plain(self, text: str, state: dict) -> str:
        text = _LABELLED_MATH.sub(self.labelled_math, text)
        text = _TARGET.sub(lambda m: f'<a id="{m.group("label")}"></a>', text)
        text = _DIRECTIVE.sub(lambda m: self.directive(m, state), text)
        text = _ROLE.sub(self.role, text)
        return self.r.expand_macros(text)

    def markdown(self, text: str, state: dict) -> str:
        """One Markdown cell. A solution's prose is folded in ``<details>``; as a
        ``<details>`` cannot span cells, each cell of a solution folds its own part."""
        out, folded = [], False
        for piece in _SOLUTION_SPLIT.split(text):
            mark = _SOLUTION_MARK.fullmatch(piece)
            if mark and mark.group("kind") == "start":
                num = self.r.number_of(mark.group("arg").strip())
                state["solution"] = num
                out.append(f"#### Solution to Exercise {num}\n\n<details><summary>Show the solution"
                           "</summary>\n")
                folded = True
            elif mark:
                state["solution"] = None
                if folded:
                    out.append("\n</details>\n")
                folded = False
            elif piece.strip():
                if state.get("solution") is not None and not folded:
                    out.append("<details><summary>Show the solution (continued)</summary>\n")
                    folded = True
                out.append(self._plain(piece, state))
        if folded:
            out.append("\n</details>")
        text = "\n".join(out)
        text = re.sub(r"<details><summary>[^<]*</summary>\s*</details>", "", text)
        return re.sub(r"\n{3,}", "\n\n", text).strip()

    def heading(self, text: str) -> str:
        num = self.r.chapter_number(self.doc)
        return re.sub(r"^# (?!\d)", f"# {num}. " if num else "# ", text, count=1, flags=re.M)


def _bib_labels(bibfile: Path):
    """Key -> in-text label ("Boncoraglio et al., 2025") and key -> Markdown entry, in the book's style."""
    from pybtex.database import parse_file
    from pybtex.plugin import find_plugin

    data = parse_file(str(bibfile))
    style = find_plugin("pybtex.style.formatting", "aimstyle")()
    labels, entries = {}, {}
    for entry in style.format_entries(style.sort(data.entries.values())):
        labels[entry.key] = entry.label
        entries[entry.key] = entry.text.render_as("markdown")
    return labels, entries


def release(root: Path) -> dict:
    """The one place of the version, the repository and the published book: ``pyproject.toml``
    (``[project] version`` and ``[project.urls]``)."""
    project = tomllib.loads((Path(root) / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {"version": project["version"], "repository": project["urls"]["Repository"],
            "book": project["urls"]["Book"]}


def release_source(repo_url: str, version: str) -> str:
    """The pip requirement of the release: the repository's tag ``v<version>``."""
    return f"aim-tutorial @ git+{repo_url}@v{version}"


def install_cells(repo_url: str, version: str):
    source = release_source(repo_url, version)
    install = f'''# Install the book's package, aim-tutorial {version}: the release that matches this book, from
# the repository's tag v{version} (the sdist and wheel that the repository's workflow builds from
# that tag are the same package). pip is given the runtime's own jax, jaxlib and numpy as
# constraints, so it keeps them (Colab's GPU build of JAX). Set {INSTALL_ENV} to install from
# elsewhere (a local checkout, a wheel).
import importlib, importlib.metadata as metadata, importlib.util, os, subprocess, sys, tempfile

AIM_VERSION = "{version}"
AIM_SOURCE = os.environ.get("{INSTALL_ENV}", "{source}")
KEEP = ("{'", "'.join(KEEP)}")


def installed(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


if "google.colab" in sys.modules or importlib.util.find_spec("aim_tutorial") is None:
    constraints = os.path.join(tempfile.gettempdir(), "aim_constraints.txt")
    with open(constraints, "w") as f:
        f.writelines(f"{{name}}=={{installed(name)}}\\n" for name in KEEP if installed(name))
    print(f"installing aim-tutorial from {{AIM_SOURCE}} ...")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", constraints, AIM_SOURCE],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"could not install aim-tutorial from {{AIM_SOURCE}}:\\n"
                           f"{{done.stderr[-3000:]}}\\nCheck the runtime's network, or set "
                           "{INSTALL_ENV} to a checkout or a wheel of the package.")
    importlib.invalidate_caches()
print("installed:", ", ".join(f"{{name}} {{installed(name)}}" for name in ("aim-tutorial",) + KEEP))
if installed("aim-tutorial") != AIM_VERSION:
    print(f"this book is for aim-tutorial {{AIM_VERSION}}; set {INSTALL_ENV} to install another")
from aim_tutorial.config import check_runtime_jax  # noqa: E402

if (warning := check_runtime_jax()) is not None:
    print(warning, file=sys.stderr)'''
    device = '''# Device, precision and problem sizes. On a GPU runtime the chapter runs at the
# paper's sizes (AIM_SCALE=paper); on a CPU at the book's. Set AIM_SCALE before this
# cell to choose (smoke, book or paper). The theory computes in float64; the algorithms
# in float32 on a GPU and float64 on a CPU (AIM_DTYPE=float32 or float64 to choose).
import os

import jax

GPU = any(d.platform == "gpu" for d in jax.devices())
os.environ.setdefault("AIM_SCALE", "paper" if GPU else "book")
import aim_tutorial  # noqa: E402  (switches JAX to float64)

# Keep the compiled programs (JAX's persistent compilation cache), so that running the
# notebook again in this runtime reads them instead of compiling; delete the line to turn it off.
compile_cache = aim_tutorial.config.compilation_cache()
print(f"devices: {jax.devices()}\\nprecision: "
      f"{'float64' if jax.config.jax_enable_x64 else 'float32'} (theory), "
      f"{aim_tutorial.config.algorithm_dtype().name} (algorithms); "
      f"AIM_SCALE = {os.environ['AIM_SCALE']}\\ncompiled programs kept in {compile_cache}")'''
    return install, device


def convert(md_path: Path, doc: str, resolver: Resolver, bib, repo_url: str, version: str):
    """The Colab notebook of one chapter."""
    import jupytext

    labels, entries = bib
    src = jupytext.read(md_path, fmt="md:myst")
    conv = ChapterConverter(resolver, doc, labels)
    state: dict = {"solution": None}
    cells = []
    install, device = install_cells(repo_url, version)
    first_code = True
    for cell in src.cells:
        if cell.cell_type == "markdown":
            text = conv.markdown(cell.source, state)
            if not cells:
                text = conv.heading(text)
            if text:
                cells.append(nbformat.v4.new_markdown_cell(text))
            continue
        if cell.cell_type != "code":
            continue
        if first_code:
            cells += [nbformat.v4.new_code_cell(install), nbformat.v4.new_code_cell(device)]
            first_code = False
        if _OLD_INSTALL.match(cell.source):
            continue
        meta = {}
        tags = [t for t in cell.metadata.get("tags", []) if t.startswith("nbval") is False]
        source = cell.source
        folded = {"hide-input", "remove-input", "hide-cell", "remove-cell"} & set(tags)
        if folded or state.get("solution") is not None:
            title = ("Solution code" if state.get("solution") is not None else
                     "Code of the figure" if "mystnb" in cell.metadata else "Checks and helpers")
            source = f"# @title {title} (folded in the book; double-click to show)\n" + source
            meta["cellView"] = "form"
            meta["jupyter"] = {"source_hidden": True}
        if tags:
            meta["tags"] = tags
        cells.append(nbformat.v4.new_code_cell(source, metadata=meta))
        fig = cell.metadata.get("mystnb", {}).get("figure")
        if fig and fig.get("caption"):
            name = fig.get("name", "")
            num = resolver.number_of(name)
            caption = conv.markdown(str(fig["caption"]), {"solution": None})
            cells.append(nbformat.v4.new_markdown_cell(
                (f'<a id="{name}"></a>\n\n' if name else "") + f"**Fig. {num}.** {caption}"))
    refs = "\n".join(f"- {entries[k]}" for k in sorted(conv.cited, key=lambda k: labels[k]))
    for c in cells:
        if c.cell_type == "markdown" and "__BIBLIOGRAPHY__" in c.source:
            c.source = c.source.replace("__BIBLIOGRAPHY__", refs or "(no references)")
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "accelerator": "GPU",
        "colab": {"provenance": [], "gpuType": "T4", "toc_visible": True},
        "aim_tutorial": {"generated_from": f"{doc}.md", "by": "_ext/aim_colab.py",
                         "book": resolver.url(doc)},
    }
    for i, c in enumerate(nb.cells):
        c["id"] = f"cell-{i:03d}"          # stable ids: regenerating changes nothing
    return nb


def write_notebooks(app, exception=None):
    """``build-finished``: every chapter's Colab notebook into ``_build/colab/``."""
    if exception is not None or app.builder.format != "html":
        return
    cfg = app.config
    srcdir = Path(app.srcdir)
    rel = release(srcdir)
    repo_url, baseurl = rel["repository"], rel["book"]
    # _config.yml must name them too (Jupyter Book's repository button and html.baseurl): the
    # same values as pyproject.toml, or the build stops here
    configured = (cfg.html_theme_options.get("repository_url", ""), cfg.html_baseurl)
    if configured != (repo_url, baseurl):
        raise ValueError(f"_config.yml's repository.url and html.baseurl {configured} differ from "
                         f"pyproject.toml's [project.urls] Repository and Book {(repo_url, baseurl)}")
    macros = cfg.mathjax3_config["tex"]["macros"]
    resolver = Resolver(app.env, baseurl, macros, cfg.numfig_format)
    bib = _bib_labels(srcdir / "book" / "references.bib")
    out = Path(app.outdir).parent / "colab"
    chapters = set(aim_toc.chapters(srcdir))
    for doc in sorted(app.env.found_docs):
        if doc not in chapters:
            continue
        nb = convert(srcdir / f"{doc}.md", doc, resolver, bib, repo_url, rel["version"])
        path = out / f"{doc}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
                        encoding="utf-8")
