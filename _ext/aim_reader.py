"""What the reader sees of the book's internals: labels, figure numbers, alt text, the proof index.

* The API page (book/api.md) is generated from the package's docstrings, which cite the
  chapters' equations by label, ``eq. (bo-se)``, ``eqs. (rep-psi) and (rep-dpsi)``, and
  their other numbered targets by kind and label, ``definition (def-aim)``,
  ``exercise (ex-rmt-1) of chapter 2``, ``section (sec-bo-one-curve)`` (the syntax that
  tests/test_doc_references.py checks). On the page each such label becomes the target's
  printed number, linked to it: ``eq. (4.3)``, "Definition 1.1", "Exercise 2.1",
  "Section 4.5" (an "of chapter N" after it is dropped: the number says it). Inline
  literals (````...````, also across a line break), literal blocks and doctest blocks
  are left as written.
* A figure drawn by a code cell is an image whose alt text would be its file path; it
  gets the figure's caption instead (the image of a figure without a caption keeps a
  generic description).
* Figures (and tables, listings) are numbered per chapter, "Fig. 4.3"; on the pages
  outside the numbered chapters (the introduction, the benchmarks) they are unnumbered,
  instead of sharing one book-wide counter ("Fig. 1" in the introduction, "Fig. 2" in
  the benchmarks).
* The index of definitions, propositions, conjectures and remarks (sphinx-proof's
  ``prf-prf.html``) lists each by its printed number and title, "Proposition 7.2
  (...)", grouped by chapter, instead of by its raw label.
"""

from __future__ import annotations

import re

from docutils import nodes

_LABEL = r"[A-Za-z][\w-]*"
#: ``eq.``/``eqs.`` and the chain of parenthesised labels after it
_EQ_REF = re.compile(rf"\b(eqs?\.)\s+(\({_LABEL}\)(?:\s*(?:-|–|,\s*and|,|and)\s*\({_LABEL}\))*)")
_ONE = re.compile(rf"\(({_LABEL})\)")
#: a numbered target other than an equation, by its kind: the role that prints its number
_ROLES = {"definition": "prf:ref", "proposition": "prf:ref", "conjecture": "prf:ref",
          "remark": "prf:ref", "theorem": "prf:ref", "lemma": "prf:ref",
          "exercise": "numref", "figure": "numref", "section": "numref"}
_KIND_REF = re.compile(rf"\b({'|'.join(_ROLES)})\s+\(({_LABEL})\)(\s+of chapter \d+)?", re.IGNORECASE)
# the book's labels (as tests/test_doc_references.py reads them)
_EQ_LABEL = re.compile(rf"\$\$\s*\(({_LABEL})\)")
_TARGET = re.compile(rf"^\(({_LABEL})\)=\s*$", re.MULTILINE)
_OPTION = re.compile(rf"^\s*:?(?:label|name):\s*({_LABEL})\s*$", re.MULTILINE)


def _numbered(segment: str, known) -> str:
    equations, others = known

    def chain(m):
        def one(k):
            label = k.group(1)
            return f":eq:`{label}`" if label in equations else k.group(0)

        return f"{m.group(1)} {_ONE.sub(one, m.group(2))}"

    def kind(m):
        if m.group(2) not in others:
            return m.group(0)
        return f":{_ROLES[m.group(1).lower()]}:`{m.group(2)}`"

    return _KIND_REF.sub(kind, _EQ_REF.sub(chain, segment))


def _book_labels(app):
    """``(equations, others)``: the labels of the book's display equations (``$$ (label)``
    in book/*.md), and those of its other targets (``(label)=``, ``:label:``, ``name:``)."""
    from pathlib import Path

    equations, others = set(), set()
    for md in Path(app.srcdir, "book").glob("*.md"):
        text = md.read_text(encoding="utf-8")
        equations.update(_EQ_LABEL.findall(text))
        others.update(_TARGET.findall(text) + _OPTION.findall(text))
    return equations, others - equations


def _process_docstring(app, what, name, obj, options, lines):
    known = getattr(app, "aim_reader_targets", None)  # read once a build (not kept in the env)
    if known is None:
        known = app.aim_reader_targets = _book_labels(app)
    literal_indent = None  # inside a literal block: the indentation of its introducing line
    doctest = False
    in_literal = False  # inside an inline literal opened on an earlier line of the paragraph
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            in_literal = False
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        if doctest:
            if not stripped:
                doctest = False
            continue
        if stripped.startswith(">>>"):
            doctest = True
            continue
        parts = line.split("``")
        # the parts outside inline literals: the even ones, or the odd ones if a literal
        # opened on an earlier line is still open
        outside = 1 if in_literal else 0
        lines[i] = "``".join(_numbered(p, known) if k % 2 == outside else p
                             for k, p in enumerate(parts))
        if len(parts) % 2 == 0:
            in_literal = not in_literal
        if stripped.endswith("::"):
            literal_indent = indent


def _alt_text(app, doctree, docname):
    for fig in doctree.findall(nodes.figure):
        caption = next(iter(fig.findall(nodes.caption)), None)
        text = " ".join(caption.astext().split()) if caption is not None else ""
        for img in fig.findall(nodes.image):
            alt = img.get("alt", "")
            if not alt or alt == img.get("uri") or "/" in alt or alt.endswith((".png", ".svg")):
                img["alt"] = text or "A figure drawn by the code cell above."


def _unnumbered_outside_chapters(app, env):
    """Drop the figure, table and listing numbers of the pages outside the numbered chapters.

    Sphinx numbers such objects of every page that has no section number with one
    counter for the whole book; runs after its own numbering (``env-get-updated``).
    """
    for docname, numbers in env.toc_fignumbers.items():
        if not env.toc_secnumbers.get(docname):
            for figtype in ("figure", "table", "code-block"):
                numbers.pop(figtype, None)
    return []


def _proof_index():
    """sphinx-proof's index (``prf-prf.html``), by printed number and title instead of label."""
    from sphinx_proof.domain import ProofIndex

    class NumberedProofIndex(ProofIndex):
        localname = "Index of definitions, propositions and remarks"

        def generate(self, docnames=None):
            env = self.domain.env
            proofs = getattr(env, "proof_list", {})
            by_doc: dict[str, list] = {}
            for anchor, entry in proofs.items():
                if docnames is None or entry["docname"] in docnames:
                    by_doc.setdefault(entry["docname"], []).append((anchor, entry))
            groups = []
            for docname, entries in by_doc.items():
                chapter = env.toc_secnumbers.get(docname, {}).get("", ())
                title = env.titles[docname].astext() if docname in env.titles else docname
                heading = f"{'.'.join(map(str, chapter))}. {title}" if chapter else title
                doctree = env.get_doctree(docname)
                titles, order = {}, {}
                for node in doctree.findall(nodes.Element):
                    if node.get("label") in proofs and node.get("ids"):
                        order.setdefault(node["label"], len(order))
                        caption = next(iter(node.findall(nodes.title)), None)
                        text = " ".join(caption.astext().split()) if caption is not None else ""
                        if text.startswith("(") and text.endswith(")"):
                            text = text[1:-1]
                        titles[node["label"]] = text
                rows = []
                for anchor, entry in entries:
                    number = env.toc_fignumbers.get(docname, {}).get(entry["countertype"], {}).get(anchor)
                    kind = entry["realtype"].title()
                    name = f"{kind} {'.'.join(map(str, number))}" if number else kind
                    # name, subtype, docname, anchor, extra (shown in brackets), qualifier, description
                    rows.append((order.get(anchor, len(order)), (name, 0, docname, anchor,
                                                                 titles.get(anchor, ""), "", "")))
                rows.sort(key=lambda r: r[0])  # in the order of the chapter
                groups.append((chapter or (float("inf"),), heading, [r[1] for r in rows]))
            groups.sort(key=lambda g: (g[0], g[1]))
            return [(heading, rows) for _, heading, rows in groups], False

    return NumberedProofIndex


def _plain_index_names(app, exception):
    """The index's names are words ("Proposition 7.2"), not code: no monospace."""
    from pathlib import Path

    page = Path(app.outdir, "prf-prf.html")
    if exception is None and app.builder.format == "html" and page.exists():
        html = page.read_text(encoding="utf-8")
        page.write_text(re.sub(r'<code class="xref">(.*?)</code>', r'<span class="xref">\1</span>', html),
                        encoding="utf-8")


def setup(app):
    from sphinx_proof.domain import ProofDomain

    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("doctree-resolved", _alt_text)
    app.connect("env-get-updated", _unnumbered_outside_chapters, priority=900)
    ProofDomain.indices = [_proof_index()]
    app.connect("build-finished", _plain_index_names)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
