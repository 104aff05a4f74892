"""Code lines the reader sees fit the text column (a source-level check of the chapters).

The chapters are Jupytext MyST Markdown: a code cell is a fence
```{code-cell} ipython3, then optionally its metadata, either as short options
(`:tags: [hide-input]`) or as a YAML block between two `---` lines. A visible code
line is at most 88 characters; a line of a folded cell (`hide-input`, `hide-cell`:
the reader can unfold it) at most 99; removed cells (`remove-input`,
`remove-cell`) are not shown and not checked.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

import aim_toc
import pytest
import yaml

BOOK = Path(__file__).resolve().parents[2] / "book"
CHAPTERS = aim_toc.chapter_sources(BOOK.parent)
VISIBLE_LIMIT = 88
FOLDED_LIMIT = 99
FOLDED_TAGS = {"hide-input", "hide-cell"}
REMOVED_TAGS = {"remove-input", "remove-cell"}
FENCE = re.compile(r"^(`{3,})\{code-cell\}")
SHORT_OPTION = re.compile(r"^:([\w-]+):\s*(.*)$")


@dataclass
class CodeCell:
    """One code cell of a chapter: where its code starts, its tags and its lines."""

    path: Path
    first_line: int  # 1-based line number in the .md file of the first code line
    tags: set = field(default_factory=set)
    lines: list = field(default_factory=list)

    @property
    def limit(self):
        """The longest line allowed (None: the cell is not shown at all)."""
        if self.tags & REMOVED_TAGS:
            return None
        return FOLDED_LIMIT if self.tags & FOLDED_TAGS else VISIBLE_LIMIT


def _read_metadata(lines, i):
    """Parse the cell metadata starting at lines[i]; return (metadata dict, index of the code)."""
    if i < len(lines) and lines[i].strip() == "---":
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "---")
        return yaml.safe_load("\n".join(lines[i + 1 : end])) or {}, end + 1
    meta = {}
    while i < len(lines) and (m := SHORT_OPTION.match(lines[i])):
        meta[m.group(1)] = yaml.safe_load(m.group(2))
        i += 1
    return meta, i


def code_cells(path):
    """Every code cell of the Jupytext MyST file `path`, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    cells, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        meta, i = _read_metadata(lines, i + 1)
        tags = meta.get("tags") or []
        cell = CodeCell(path, i + 1, set([tags] if isinstance(tags, str) else tags))
        while i < len(lines) and lines[i].rstrip() != m.group(1):
            cell.lines.append(lines[i])
            i += 1
        cells.append(cell)
        i += 1
    return cells


def too_long(path):
    """The lines of `path` longer than their cell allows, as 'file:line: N > limit: code'."""
    offenders = []
    for cell in code_cells(path):
        if cell.limit is None:
            continue
        for k, line in enumerate(cell.lines):
            if len(line) > cell.limit:
                offenders.append(
                    f"{path.relative_to(BOOK.parent)}:{cell.first_line + k}: "
                    f"{len(line)} > {cell.limit} chars: {line.strip()[:70]}"
                )
    return offenders


def test_chapters_found():
    """The check reads the chapters (it must never pass on an empty set)."""
    assert CHAPTERS, f"no chapter in {BOOK.parent}/_toc.yml"
    assert all(code_cells(p) for p in CHAPTERS), "a chapter without code cells: parser broken?"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_code_lines_fit(path):
    """No line of a visible code cell is longer than 88 characters (99 in a folded cell)."""
    offenders = too_long(path)
    if offenders:
        print(f"{len(offenders)} code lines too long in {path.name}:", *offenders, sep="\n  ")
    assert not offenders, f"{len(offenders)} code lines too long:\n  " + "\n  ".join(offenders)
