"""The teaching material of the book: exercise metadata, editions, teaching notes, reading times.

Loaded by ``aim_book.py``. One set of sources, three editions, chosen by the Sphinx
configuration value ``aim_edition`` (default: the environment variable ``AIM_EDITION``,
else ``"reader"``; the ``make book``, ``make student`` and ``make instructor`` targets):

* ``reader``: the public book; each solution folded under its exercise.
* ``student``: no solution anywhere. The solutions are removed from the document trees
  when they are read, so they reach neither the pages nor the search index; the page
  sources (``_sources``), their download buttons and the launch buttons (whose notebooks
  hold the solutions) are left out. Exercises keep the reader's numbers.
* ``instructor``: the solutions shown unfolded, and each chapter's teaching notes.

What this module adds to the MyST sources:

* the ``{exercise}`` directive of sphinx-exercise with four required options, the one
  place an exercise's metadata is written::

      :difficulty: 2       1 (routine), 2 (a derivation of a few steps), 3 (hard)
      :time: 30            minutes, the code check included
      :practises: model-counting   the label of the section it practises
      :gpu: no             yes when its solution needs a GPU

  rendered as a line under the exercise's title and collected for the exercise table;
* ``{teaching-notes}``: a chapter's notes for the instructor (what to stress, common
  mistakes, what to run live), shown in the instructor edition only;
* ``{exercise-table}``: every exercise of the book with its metadata, one row each;
* ``{reading-time}`label```: the estimated reading time of a chapter or a section,
  computed from its source by :func:`reading_minutes`.

The build checks (warnings, errors under ``-W``) that every exercise carries its
metadata and has exactly one solution, that every solution runs code, and that every
numbered chapter has teaching notes.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import aim_toc
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

EDITIONS = ("reader", "student", "instructor")
META = ("difficulty", "time", "practises", "gpu")
DIFFICULTY = {1: "routine", 2: "a derivation", 3: "hard"}

# reading speed of technical prose, and the time a line of displayed mathematics takes
WORDS_PER_MINUTE = 150
MINUTES_PER_MATH_LINE = 0.5


# -- option parsers -------------------------------------------------------------------
def _difficulty(value: str) -> int:
    try:
        level = int(value)
    except (TypeError, ValueError):
        level = None
    if level not in DIFFICULTY:
        raise ValueError(f"difficulty must be 1, 2 or 3, got {value!r}")
    return level


def _minutes(value: str) -> int:
    try:
        minutes = int(value)
    except (TypeError, ValueError):
        minutes = 0
    if not 1 <= minutes <= 600:
        raise ValueError(f"time must be a whole number of minutes in 1..600, got {value!r}")
    return minutes


def _gpu(value: str) -> bool:
    if value not in ("yes", "no"):
        raise ValueError(f"gpu must be yes or no, got {value!r}")
    return value == "yes"


def parse_meta(options: dict) -> dict:
    """An exercise's metadata from its directive options as written (the directive's parsers)."""
    return {"difficulty": _difficulty(options["difficulty"]), "time": _minutes(options["time"]),
            "practises": directives.unchanged_required(options["practises"]).strip(),
            "gpu": _gpu(options["gpu"])}


def meta_words(meta: dict) -> tuple[str, str, str]:
    """(before the section reference, the section format, after it) of an exercise's line."""
    level = meta["difficulty"]
    return (f"Difficulty {level} of 3 ({DIFFICULTY[level]}) · about {meta['time']} min · practises ",
            "Chapter %s" if meta["practises"].startswith("ch-") else "Section %s",
            " · " + ("needs a GPU" if meta["gpu"] else "runs on a CPU"))


def _numref(target: str, fmt: str, docname: str) -> addnodes.pending_xref:
    return addnodes.pending_xref("", nodes.inline("", fmt), refdomain="std", reftype="numref",
                                 reftarget=target, refexplicit=True, refdoc=docname, refwarn=True)


# -- the exercise directive with its metadata ----------------------------------------
def _exercise_directive():
    from sphinx_exercise.directive import ExerciseDirective

    class MetaExercise(ExerciseDirective):
        __doc__ = ExerciseDirective.__doc__
        option_spec = {**ExerciseDirective.option_spec, "difficulty": _difficulty,
                       "time": _minutes, "practises": directives.unchanged_required, "gpu": _gpu}

        def run(self):
            meta = {k: self.options.pop(k) for k in META if k in self.options}
            label = self.options.get("label")
            missing = [k for k in META if k not in meta]
            if not label or missing:
                logger.warning(f"exercise {label or '(no :label:)'}: every exercise needs a :label: "
                               f"and the options {', '.join(':' + k + ':' for k in META)} "
                               f"(missing: {', '.join(missing) or 'label'})",
                               location=(self.env.docname, self.lineno))
                return super().run()
            out = super().run()
            node = out[0] if out else None
            if node is None:
                return out
            before, fmt, after = meta_words(meta)
            line = nodes.paragraph(classes=["exercise-meta"])
            line += nodes.emphasis("", before)
            emph = nodes.emphasis()
            emph += _numref(meta["practises"], fmt, self.env.docname)
            line += emph
            line += nodes.emphasis("", after)
            content = next((s for s in node.findall(nodes.section)
                            if "exercise-content" in s["ids"]), None)
            (content if content is not None else node).insert(0, line)
            title = self.arguments[0] if self.arguments else ""
            registry = self.env.__dict__.setdefault("aim_exercises", {})
            registry[label] = {"doc": self.env.docname, "title": title, "line": self.lineno, **meta}
            return out

    return MetaExercise


# -- solutions by edition -------------------------------------------------------------
class EditionSolutions(SphinxTransform):
    """Record every solution; remove it (student) or unfold it (instructor).

    Runs after sphinx-exercise has merged each ``solution-start``/``solution-end``
    pair into one node with the cells between them (its priority 10)."""

    default_priority = 15

    def apply(self):
        from sphinx_exercise.nodes import solution_node

        edition = self.config.aim_edition
        registry = self.env.__dict__.setdefault("aim_solutions", {})
        for node in list(self.document.findall(solution_node)):
            target = node.get("target_label", "")
            code = any("cell" in c.get("classes", []) for c in node.findall(nodes.container))
            registry.setdefault(target, []).append({"doc": self.env.docname, "code": code})
            if edition == "student":
                node.parent.remove(node)
            elif edition == "instructor":
                node["classes"] = [c for c in node["classes"] if c != "dropdown"]


# -- teaching notes -------------------------------------------------------------------
class TeachingNotes(SphinxDirective):
    """A chapter's notes for the instructor: in the instructor edition only."""

    has_content = True

    def run(self):
        self.env.__dict__.setdefault("aim_teaching_notes", set()).add(self.env.docname)
        if self.config.aim_edition != "instructor":
            return []
        box = nodes.admonition(classes=["teaching-notes"])
        box += nodes.title("", "Teaching notes (instructor edition)")
        self.state.nested_parse(self.content, self.content_offset, box)
        return [box]


# -- the exercise table ---------------------------------------------------------------
class exercise_table(nodes.General, nodes.Element):
    """Where ``{exercise-table}`` puts the table (filled once every page is read)."""


class ExerciseTableDirective(SphinxDirective):
    has_content = False

    def run(self):
        return [exercise_table()]


def _sort_key(item):
    label, meta = item
    return (meta["doc"], meta["line"])


class FillExerciseTable(SphinxPostTransform):
    """Replace each ``exercise_table`` by the table, before references are resolved."""

    default_priority = 3          # before the exercise references (4) and Sphinx's resolver (10)

    def run(self, **kwargs):
        for placeholder in list(self.document.findall(exercise_table)):
            placeholder.replace_self(self.table())

    def table(self):
        registry = getattr(self.env, "aim_exercises", {})
        heads = ["Exercise", "Title", "Difficulty", "Minutes", "Section practised", "GPU"]
        table = nodes.table(classes=["exercise-table"])
        group = nodes.tgroup(cols=len(heads))
        table += group
        for width in (10, 46, 10, 10, 14, 8):
            group += nodes.colspec(colwidth=width)
        head, body = nodes.thead(), nodes.tbody()
        group += head
        group += body
        head += self.row([nodes.Text(h) for h in heads])
        for label, meta in sorted(registry.items(), key=_sort_key):
            title = nodes.inline()
            title += self.inline_maths(meta["title"])
            body += self.row([_numref(label, "Exercise %s", self.env.docname), title,
                              nodes.Text(str(meta["difficulty"])), nodes.Text(str(meta["time"])),
                              _numref(meta["practises"], "%s", self.env.docname),
                              nodes.Text("yes" if meta["gpu"] else "no")])
        return table

    @staticmethod
    def inline_maths(text: str):
        out = []
        for i, piece in enumerate(re.split(r"\$([^$]+)\$", text)):
            if i % 2:
                out.append(nodes.math(piece, piece))
            elif piece:
                out.append(nodes.Text(piece))
        return out

    @staticmethod
    def row(cells):
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            para = nodes.paragraph()
            para += cell
            entry += para
            row += entry
        return row


# -- exercise numbers in the PDF ------------------------------------------------------
def exercise_number(env, label: str) -> str | None:
    """"4.1": the chapter's number and the exercise's place in it, as the HTML book numbers it.

    The LaTeX build needs it: there sphinx-exercise numbers an exercise within its section
    ("Exercise 1.11.1") and Sphinx refers to it by a label that sphinx-exercise's LaTeX
    does not define (an "Exercise ??" in the PDF)."""
    registry = getattr(env, "aim_exercises", {})
    if label not in registry:
        return None
    doc = registry[label]["doc"]
    mine = sorted((m["line"], k) for k, m in registry.items() if m["doc"] == doc)
    place = [k for _, k in mine].index(label) + 1
    secnum = env.toc_secnumbers.get(doc, {}).get("")
    chapter = secnum[0] if secnum else aim_toc.chapter_numbers(env.srcdir)[doc]
    return f"{chapter}.{place}"


def _patch_exercise_numbers():
    """sphinx-exercise's titles of exercises and solutions in LaTeX: the book's numbers."""
    from sphinx_exercise import post_transforms

    original = getattr(post_transforms.get_node_number, "aim_original", post_transforms.get_node_number)

    def get_node_number(app, node, typ):
        if typ == "exercise" and app.builder.format == "latex":
            number = exercise_number(app.env, node.get("label", ""))
            if number:
                return number
        return original(app, node, typ)

    get_node_number.aim_original = original
    post_transforms.get_node_number = get_node_number


class LatexExerciseReferences(SphinxPostTransform):
    """In the PDF, a reference to an exercise reads "Exercise 4.1" and links to it."""

    default_priority = 4            # before sphinx-exercise's (5) and Sphinx's (10) resolvers
    formats = ("latex",)

    def run(self, **kwargs):
        registry = getattr(self.env, "aim_exercises", {})
        for ref in list(self.document.findall(addnodes.pending_xref)):
            label = ref.get("reftarget", "")
            if ref.get("refdomain") != "std" or label not in registry:
                continue
            number = exercise_number(self.env, label)
            text = ref.astext() if ref.get("refexplicit") and "%s" in ref.astext() else "Exercise %s"
            shown = text.replace("%s", number).replace("{number}", number)
            ref.replace_self(nodes.raw("", f"\\hyperref[exercise:{label}]{{{shown}}}", format="latex"))


# -- reading times ---------------------------------------------------------------------
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
_HEADING = re.compile(r"^(#{1,6})\s")
_TARGET = re.compile(r"^\((?P<label>[A-Za-z0-9_.:-]+)\)=\s*$")
_SKIPPED = re.compile(r"\{(code-cell|code-block|code|teaching-notes|bibliography|solution-start|solution-end)\}")


def _blocks(lines):
    """Each line with whether it lies in prose (not in code, a solution or notes)."""
    stack, in_solution = [], False            # open fences, and whether their text is skipped
    for line in lines:
        s = line.strip()
        m = _FENCE.match(s)
        if m and stack and not m.group("info").strip() and m.group("fence") == stack[-1][0]:
            stack.pop()
            yield line, False
            continue
        if m and (m.group("info").strip() or not stack or not stack[-1][1]):
            info = m.group("info").strip()
            if "{solution-start}" in info:
                in_solution = True
            elif "{solution-end}" in info:
                in_solution = False
            skip = bool(stack and stack[-1][1]) or not info.startswith("{") or bool(_SKIPPED.search(info))
            stack.append((m.group("fence"), skip))
            yield line, False
            continue
        yield line, not in_solution and not (stack and stack[-1][1])


def prose_and_equations(markdown: str) -> tuple[int, int]:
    """Words of prose and lines of displayed mathematics of MyST Markdown.

    Code (code cells, code blocks), solutions, teaching notes, the bibliography, the
    front matter, directive options, comments and targets are not read; an inline
    formula or a cross-reference counts as one word; a displayed equation (``$$ ... $$``
    or an ``amsmath`` environment) counts its lines (at least one), none of its words."""
    lines = markdown.split("\n")
    if lines and lines[0].strip() == "---":                   # front matter
        lines = lines[next((k for k in range(1, len(lines)) if lines[k].strip() == "---"), 0) + 1:]
    words = maths = 0
    in_math, this, env = False, 0, ""
    delimiter = re.compile(r"^(\$\$.*|\\(begin|end)\{[a-z*]+\}(\{[^}]*\})?)$")
    for line, prose in _blocks(lines):
        s = line.strip()
        if not prose:
            continue
        if in_math:
            closing = (s.startswith("$$") or s.endswith("$$")) if not env else s.startswith(f"\\end{{{env}}}")
            if s and not delimiter.match(s):
                this += 1
            if closing:
                in_math = False
                maths += max(this, 1)
            continue
        if not s or _TARGET.match(s) or s.startswith("<!--") or re.match(r"^:[a-z-]+:", s):
            continue
        begin = re.match(r"^\\begin\{((?:equation|align|gather|multline)\*?)\}", s)
        if s.startswith("$$") or begin:
            env = begin.group(1) if begin else ""
            if s.count("$$") >= 2 or (begin and f"\\end{{{env}}}" in s):
                maths += 1                                   # an equation on one line
            else:
                in_math, this = True, 0
            continue
        text = re.sub(r"\$[^$]+\$", " formula ", s)
        text = re.sub(r"\{[a-z:-]+\}`[^`]*`", " ref ", text)
        words += len(re.findall(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*", text))
    return words, maths


def reading_minutes(markdown: str) -> int:
    """Estimated reading time of MyST Markdown, in whole minutes (at least 1): prose at
    ``WORDS_PER_MINUTE``, plus ``MINUTES_PER_MATH_LINE`` per line of displayed maths."""
    words, maths = prose_and_equations(markdown)
    return max(1, math.ceil(words / WORDS_PER_MINUTE + MINUTES_PER_MATH_LINE * maths))


def section_source(markdown: str, label: str) -> str | None:
    """The source of the section (or chapter) whose heading follows ``(label)=``."""
    lines = markdown.split("\n")
    prose = [p for _, p in _blocks(lines)]
    for k, line in enumerate(lines):
        m = _TARGET.match(line.strip())
        if not m or m.group("label") != label:
            continue
        head = next((j for j in range(k + 1, len(lines)) if lines[j].strip()), None)
        level = _HEADING.match(lines[head]) if head is not None else None
        if level is None:
            return None
        depth = len(level.group(1))
        end = next((j for j in range(head + 1, len(lines)) if prose[j]
                    and (h := _HEADING.match(lines[j])) and len(h.group(1)) <= depth), len(lines))
        return "\n".join(lines[head:end])
    return None


def _chapter_sources(srcdir: Path):
    return aim_toc.chapter_sources(srcdir)


def reading_time_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{reading-time}`label```: "25 min", the reading time of that chapter or section."""
    env = inliner.document.settings.env
    label = text.strip()
    for path in _chapter_sources(Path(env.srcdir)):
        source = section_source(path.read_text(encoding="utf-8"), label)
        if source is not None:
            env.note_dependency(str(path))
            return [nodes.inline(rawtext, f"{reading_minutes(source)} min",
                                 classes=["reading-time"])], []
    msg = inliner.reporter.error(f"reading-time: no chapter or section labelled {label!r}",
                                 line=lineno)
    return [inliner.problematic(rawtext, rawtext, msg)], [msg]


# -- edition settings and checks ------------------------------------------------------
def configure_edition(app, config):
    edition = config.aim_edition
    if edition not in EDITIONS:
        raise ValueError(f"aim_edition must be one of {', '.join(EDITIONS)}, got {edition!r}")
    if edition == "reader":
        return
    config.html_title = f"{config.html_title or config.project} ({edition} edition)"
    if edition == "student":
        # the sources and the notebooks the buttons open hold the solutions
        config.html_copy_source = False
        config.html_show_sourcelink = False
        opts = dict(config.html_theme_options)
        opts.pop("launch_buttons", None)
        opts["use_download_button"] = False
        config.html_theme_options = opts


def _purge(app, env, docname):
    exercises = getattr(env, "aim_exercises", {})
    for label in [k for k, v in exercises.items() if v["doc"] == docname]:
        del exercises[label]
    solutions = getattr(env, "aim_solutions", {})
    for label in list(solutions):
        solutions[label] = [s for s in solutions[label] if s["doc"] != docname]
        if not solutions[label]:
            del solutions[label]
    getattr(env, "aim_teaching_notes", set()).discard(docname)


def _merge(app, env, docnames, other):
    env.__dict__.setdefault("aim_exercises", {}).update(getattr(other, "aim_exercises", {}))
    mine = env.__dict__.setdefault("aim_solutions", {})
    for key, found in getattr(other, "aim_solutions", {}).items():
        mine.setdefault(key, []).extend(found)
    env.__dict__.setdefault("aim_teaching_notes", set()).update(
        getattr(other, "aim_teaching_notes", set()))


def check_consistency(app, env):
    exercises = getattr(env, "aim_exercises", {})
    solutions = getattr(env, "aim_solutions", {})
    for label, meta in sorted(exercises.items()):
        found = solutions.get(label, [])
        where = (meta["doc"], meta["line"])
        if len(found) != 1:
            logger.warning(f"exercise {label}: {len(found)} solutions (each exercise has one)",
                           location=where)
        elif not found[0]["code"]:
            logger.warning(f"exercise {label}: its solution runs no code (each solution checks "
                           "its answer in a code cell)", location=where)
    for label in sorted(set(solutions) - set(exercises)):
        logger.warning(f"a solution to {label!r}, which is not an exercise with metadata")
    notes = getattr(env, "aim_teaching_notes", set())
    chapters = set(aim_toc.chapters(env.srcdir))
    for doc in sorted(d for d in env.found_docs if d in chapters):
        if doc not in notes:
            logger.warning(f"{doc}: a chapter without teaching notes ({{teaching-notes}})",
                           location=doc)


def setup(app):
    app.setup_extension("sphinx_exercise")
    app.add_config_value("aim_edition", os.environ.get("AIM_EDITION", "reader"), "env")
    app.add_directive("exercise", _exercise_directive(), override=True)
    app.add_directive("teaching-notes", TeachingNotes)
    app.add_directive("exercise-table", ExerciseTableDirective)
    app.add_node(exercise_table)
    app.add_role("reading-time", reading_time_role)
    app.add_transform(EditionSolutions)
    app.add_post_transform(FillExerciseTable)
    app.add_post_transform(LatexExerciseReferences)
    _patch_exercise_numbers()
    app.connect("config-inited", configure_edition)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", check_consistency)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
