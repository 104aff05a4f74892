"""Every reference in the package's docstrings and comments resolves in the book.

The citation syntax of ``aim_tutorial/*.py`` (docstrings and ``#`` comments):

* an equation: ``eq. (bo-se)``; several: ``eqs. (bo-se)-(bo-root)``,
  ``eqs. (rep-psi) and (rep-dpsi)``, ``eqs. (a), (b) and (c)``;
* another numbered target, by its kind: ``definition (def-aim)``,
  ``proposition (prop-deep-decouple)``, ``exercise (ex-rmt-1)``, likewise
  ``conjecture``, ``remark``, ``figure``, ``section (sec-amp-onsager)``;
* a section without a label, by its heading in double quotes:
  ``section "A failure mode: collapse"``;
* optionally the chapter, ``... of chapter 4`` after the reference or
  ``chapter 4, ...`` before it; the label or heading must then be in that chapter
  (chapter N is ``book/0N_*.md``, the order of ``_toc.yml``).

A label is what the book defines in ``book/*.md``: the label after a closing
``$$`` of a display equation, a ``(label)=`` target, and the ``:label:`` or
``name:`` option of a directive or figure. This test fails listing every cited
label or heading the book does not define, every ``eq.`` not followed by a
``(label)``, and every bare ``(label)`` (a parenthesised word with the prefix of
a book label or of a package module, e.g. ``(deep-aim)``) outside that syntax.
Papers are cited by author and arXiv number, without equation or section
numbers that nobody here can check.

It also fails on any mention of the internal specification document (the pattern
is assembled below so that this file does not contain it) anywhere in the
package, the book, the scripts, the tests and the README.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "aim_tutorial"
BOOK = ROOT / "book"

_LABEL = r"[A-Za-z][\w-]*"
_KINDS = (r"eqs?\.|exercises?|propositions?|definitions?|conjectures?|remarks?|figures?|sections?")
_CHAIN = rf"\(({_LABEL})\)(?:\s*(?:-|–|,\s*and|,|and)\s*\({_LABEL}\))*"
#: a labelled reference: kind, labels, and the chapter before (``chapter N, ``) or after (`` of chapter N``)
REF = re.compile(rf"(?:\bchapter (?P<pre>\d+), )?\b(?P<kind>{_KINDS})\s+(?P<chain>{_CHAIN})"
                 rf"(?:\s+of chapter (?P<post>\d+))?", re.IGNORECASE)
#: a section cited by its heading
SECTION = re.compile(r'(?:\bchapter (?P<pre>\d+), )?\bsection "(?P<title>[^"]+)"(?:\s+of chapter (?P<post>\d+))?',
                     re.IGNORECASE)
#: ``eq.``/``eqs.`` not followed by a parenthesised label
LOOSE_EQ = re.compile(r"\beqs?\.(?!\s*\()", re.IGNORECASE)
#: a bare parenthesised label-like word
BARE = re.compile(r"\((?P<label>[a-z][A-Za-z0-9]*(?:-[\w]+)+)\)")
#: ``Chapter N (``book/0M_...``)``: N must be M
CHAPTER_FILE = re.compile(r"\bchapter (\d+) \(``book/(\d+)_", re.IGNORECASE)
#: the internal specification document, never to be mentioned
FORBIDDEN = re.compile("AIM" + r"[_\s-]?" + "SPEC", re.IGNORECASE)

_EQ_LABEL = re.compile(rf"\$\$\s*\(({_LABEL})\)")
_TARGET = re.compile(rf"^\(({_LABEL})\)=\s*$")
_OPTION = re.compile(rf"^\s*:?(?:label|name):\s*({_LABEL})\s*$")
_FENCE = re.compile(r"^(`{3,}|~{3,})")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")


def _chapter_of(md: Path):
    m = re.match(r"(\d+)_", md.name)
    return int(m.group(1)) if m else None


def book_targets():
    """``(labels, headings)``: label -> chapter (None outside chapters 1-9), and the set of
    ``(chapter, heading)`` of every section heading outside fenced blocks."""
    labels, headings = {}, set()
    for md in sorted(BOOK.glob("*.md")):
        chapter = _chapter_of(md)
        fence = None
        for line in md.read_text(encoding="utf-8").splitlines():
            for rx in (_EQ_LABEL, _TARGET, _OPTION):
                for label in rx.findall(line):
                    labels.setdefault(label, chapter)
            m = _FENCE.match(line)
            if m:
                mark = m.group(1)
                if fence is None:
                    fence = mark
                elif mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip()[len(mark):]:
                    fence = None
                continue
            if fence is None and (h := _HEADING.match(line)):
                headings.add((chapter, " ".join(h.group(1).split())))
    return labels, headings


def _modules():
    """The package's top-level modules and those of ``deep/`` (``deep.py`` until issue 49 split it;
    ``channels/`` is not scanned yet)."""
    return sorted(PACKAGE.glob("*.py")) + sorted((PACKAGE / "deep").glob("*.py"))


def package_texts():
    """``(where, text)`` for every module, class and function docstring and every comment."""
    out = []
    for path in _modules():
        src = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    line = node.body[0].lineno
                    out.append((f"{rel}:{line}", doc))
        comments, start = [], None
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                start = start or tok.start[0]
                comments.append(tok.string.lstrip("#"))
            elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                if comments:                      # a run of comments is one text (a reference may wrap)
                    out.append((f"{rel}:{start}", "\n".join(comments)))
                comments, start = [], None
        if comments:
            out.append((f"{rel}:{start}", "\n".join(comments)))
    return out


def label_prefixes(labels):
    """Prefixes that make a parenthesised word look like a label: the book's and the modules'."""
    prefixes = {label.split("-")[0] for label in labels if "-" in label}
    prefixes |= {p.stem.lstrip("_") for p in PACKAGE.glob("*.py")} | {"deep", "se"}
    return prefixes - {""}


def problems_in(text, labels, headings, prefixes):
    """Every unresolved or malformed reference in one docstring or comment."""
    text = " ".join(text.split())
    found = []
    rest = text
    for m in REF.finditer(text):
        chapter = m.group("pre") or m.group("post")
        for label in re.findall(rf"\(({_LABEL})\)", m.group("chain")):
            if label not in labels:
                found.append(f"{m.group('kind')} ({label}): the book defines no label {label!r}")
            elif chapter and labels[label] != int(chapter):
                found.append(f"({label}) is in chapter {labels[label]}, not chapter {chapter}")
        rest = rest[:m.start()] + " " * (m.end() - m.start()) + rest[m.end():]
    for m in SECTION.finditer(text):
        chapter, title = m.group("pre") or m.group("post"), m.group("title")
        chapters = {c for c, h in headings if h == title}
        if not chapters:
            found.append(f'section "{title}": no such heading in the book')
        elif chapter and int(chapter) not in chapters:
            found.append(f'section "{title}" is not in chapter {chapter}')
    for m in LOOSE_EQ.finditer(rest):
        found.append(f"{rest[m.start():m.start() + 30]!r}: write eq. (label)")
    for m in BARE.finditer(rest):
        if m.group("label").split("-")[0] in prefixes:
            found.append(f"bare ({m.group('label')}): cite it as eq. (label) or <kind> (label)")
    for n, m in CHAPTER_FILE.findall(text):
        if int(n) != int(m):
            found.append(f"chapter {n} is book/{m}_*.md")
    return found


def test_book_defines_labels():
    labels, headings = book_targets()
    assert {"bo-se", "eq-h", "def-aim", "ex-rmt-1", "ch-model", "fig-spectrum-S"} <= set(labels)
    assert labels["bo-se"] == 4 and labels["eq-rmt-cubic"] == 2
    assert (5, "A failure mode: collapse") in headings


def test_the_checker_catches_bad_references():
    labels, headings = book_targets()
    prefixes = label_prefixes(labels)

    def check(text):
        return problems_in(text, labels, headings, prefixes)

    assert check("eq. (bo-se) of chapter 4; eqs. (rep-psi) and (rep-dpsi); exercise (ex-rmt-1)") == []
    assert check('chapter 5, section "A failure mode: collapse"; eqs. (bo-se)-(bo-root)') == []
    assert len(check("eq. (se-q)")) == 1
    assert len(check("eqs. (bo-se)-(no-such-label)")) == 1
    assert len(check("eq. (bo-se) of chapter 3")) == 1
    assert len(check("the loss (gd-loss) and eq. deep-M")) == 2
    assert len(check('section "No such heading"')) == 1
    assert len(check("Chapter 4 (``book/03_replica.md``)")) == 1
    assert check("cross-fitting (cross-fitting) and (T - 1)") == []


def test_docstrings_cite_only_labels_the_book_defines():
    labels, headings = book_targets()
    prefixes = label_prefixes(labels)
    bad = [f"{where}: {p}" for where, text in package_texts()
           for p in problems_in(text, labels, headings, prefixes)]
    assert not bad, "references the book does not resolve:\n" + "\n".join(bad)


def _scanned_files():
    roots = [PACKAGE, ROOT / "scripts", ROOT / "tests", ROOT / "_ext", ROOT / "docs", ROOT / "benchmarks"]
    files = [ROOT / "README.md", *sorted(BOOK.glob("*.md"))]
    for root in roots:
        files += sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return files


def test_no_mention_of_the_internal_spec():
    hits = []
    for path in _scanned_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue                              # binary files (figures)
        for n, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "the internal spec is not a source readers have; cite the book or the paper:\n" + \
        "\n".join(hits)
