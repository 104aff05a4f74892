"""What the reader sees of the book's internals: equation labels and image alt text.

* The API page (book/api.md) is generated from the package's docstrings, which cite the
  chapters' equations by label, ``eq. (bo-se)``, ``eqs. (rep-psi) and (rep-dpsi)``
  (the syntax that tests/test_doc_references.py checks). On the page each such label
  becomes the equation's printed number, linked to it: ``eq. (4.3)``. Inline literals
  (````...````), literal blocks and doctest blocks are left as written.
* A figure drawn by a code cell is an image whose alt text would be its file path; it
  gets the figure's caption instead (the image of a figure without a caption keeps a
  generic description).
"""

from __future__ import annotations

import re

from docutils import nodes

_LABEL = r"[A-Za-z][\w-]*"
#: ``eq.``/``eqs.`` and the chain of parenthesised labels after it
_EQ_REF = re.compile(rf"\b(eqs?\.)\s+(\({_LABEL}\)(?:\s*(?:-|–|,\s*and|,|and)\s*\({_LABEL}\))*)")
_ONE = re.compile(rf"\(({_LABEL})\)")


def _numbered(segment: str, known) -> str:
    def chain(m):
        def one(k):
            label = k.group(1)
            return f":eq:`{label}`" if label in known else k.group(0)

        return f"{m.group(1)} {_ONE.sub(one, m.group(2))}"

    return _EQ_REF.sub(chain, segment)


def _equation_labels(app):
    """The labels of the book's display equations (``$$ (label)`` in book/*.md)."""
    from pathlib import Path

    labels = set()
    for md in Path(app.srcdir, "book").glob("*.md"):
        labels.update(re.findall(rf"\$\$\s*\(({_LABEL})\)", md.read_text(encoding="utf-8")))
    return labels


def _process_docstring(app, what, name, obj, options, lines):
    known = app.env.aim_reader_labels if hasattr(app.env, "aim_reader_labels") else None
    if known is None:
        known = app.env.aim_reader_labels = _equation_labels(app)
    literal_indent = None  # inside a literal block: the indentation of its introducing line
    doctest = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
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
        # even parts are outside inline literals
        lines[i] = "``".join(_numbered(p, known) if k % 2 == 0 else p for k, p in enumerate(parts))
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


def setup(app):
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("doctree-resolved", _alt_text)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
