"""The teaching machinery of the book (``_ext/aim_teaching.py``) without a build: the reading
times, the exercise metadata and the teaching notes as the chapters write them."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import aim_toc
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = aim_toc.chapter_sources(ROOT)


def _ext():
    sys.path.insert(0, str(ROOT / "_ext"))
    spec = importlib.util.spec_from_file_location("aim_teaching", ROOT / "_ext" / "aim_teaching.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


T = _ext()


def test_prose_words_and_lines_of_maths():
    text = "\n".join([
        "---", "kernelspec: {name: python3}", "---", "(sec-x)=", "## A title of four", "",
        "One two three $x^2$ and {eq}`e-1`.", "", "$$", r"a = b\\", "c = d", "$$ (e-1)", "",
        r"\begin{align}", r"\begin{aligned}", "u", r"\end{aligned}", r"\end{align}",
        "```{code-cell} ipython3", "print('not read')", "```",
        "```{exercise} Read", ":label: ex-1", ":difficulty: 1", "", "Read this.", "```",
        "```{solution-start} ex-1", ":class: dropdown", "```", "Not read either.",
        "```{solution-end}", "```", "```{teaching-notes}", "Hidden notes.", "```", "Last."])
    words, maths = T.prose_and_equations(text)
    # "A title of four" (4), "One two three formula and ref" (6), "Read this" (2),
    # "Last" (1); a directive's title is not counted; maths: two lines, then one
    assert (words, maths) == (13, 3)
    assert T.reading_minutes(text) == 2          # 13/150 + 3/2 = 1.59 -> 2
    assert T.reading_minutes("") == 1


def test_reading_time_grows_with_the_text():
    prose = "word " * 150
    assert T.reading_minutes(prose) == 1
    assert T.reading_minutes(prose * 10) == 10
    assert T.reading_minutes(prose + "\n\n$$\nx\n$$\n\n$$\ny\n$$\n") == 2


def test_section_source_stops_at_the_next_heading_of_its_level():
    text = "(a)=\n## A\ntext a\n### sub\nmore\n```{code-cell}\n# not a heading\n```\n## B\ntext b"
    assert T.section_source(text, "a").split("\n")[-1] == "```"
    assert "text b" not in T.section_source(text, "a")
    assert T.section_source(text, "missing") is None


@pytest.mark.parametrize("bad", ["0", "4", "two", ""])
def test_difficulty_is_one_two_or_three(bad):
    with pytest.raises(ValueError, match="difficulty must be 1, 2 or 3"):
        T._difficulty(bad)


@pytest.mark.parametrize("bad", ["0", "-5", "half an hour", "601"])
def test_time_is_minutes(bad):
    with pytest.raises(ValueError, match="time must be a whole number of minutes"):
        T._minutes(bad)


def test_gpu_is_yes_or_no():
    assert T._gpu("yes") and not T._gpu("no")
    with pytest.raises(ValueError, match="gpu must be yes or no"):
        T._gpu("maybe")


def test_edition_must_be_known():
    class Config:
        aim_edition = "teacher"
    with pytest.raises(ValueError, match="aim_edition must be one of reader, student, instructor"):
        T.configure_edition(None, Config())


def _labels():
    labels = []
    for path in sorted((ROOT / "book").glob("*.md")):
        labels += re.findall(r"^\(([A-Za-z0-9_.:-]+)\)=\s*$", path.read_text(encoding="utf-8"), re.M)
    return labels


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_exercises_carry_their_metadata_and_notes(path):
    """What the build checks, early: every exercise's four options, valid, and a section
    that exists; one solution each; one block of teaching notes before the exercises."""
    text = path.read_text(encoding="utf-8")
    labels = _labels()
    blocks = re.findall(r"^```\{exercise\}[^\n]*\n((?::[a-z-]+:[^\n]*\n)+)", text, re.M)
    assert blocks, path.name
    for block in blocks:
        opts = dict(re.findall(r"^:([a-z-]+):\s*(.*)$", block, re.M))
        assert set(T.META) <= set(opts), (path.name, opts)
        T._difficulty(opts["difficulty"]), T._minutes(opts["time"]), T._gpu(opts["gpu"])
        assert labels.count(opts["practises"]) == 1, (path.name, opts["practises"])
        assert text.count(f"```{{solution-start}} {opts['label']}\n") == 1, opts["label"]
    notes = [m.start() for m in re.finditer(r"^```\{teaching-notes\}", text, re.M)]
    assert len(notes) == 1 and notes[0] < text.index("\n## Exercises"), path.name


def test_the_patched_sphinx_exercise_function_is_the_one_the_patch_was_written_for():
    """``aim_teaching._patch_exercise_numbers`` replaces sphinx-exercise's ``get_node_number`` (a
    third-party internal) in ``sphinx_exercise.post_transforms``; the patch is right only while that
    module calls the function by that global name with ``(app, node, typ)`` and the function is the
    one it wraps. A new sphinx-exercise that changes either fails here, not silently in the PDF's
    exercise numbers: read its new code, adapt the patch, then pin the new hash."""
    import hashlib
    import inspect

    from sphinx_exercise import post_transforms, utils

    src = inspect.getsource(getattr(post_transforms.get_node_number, "aim_original",
                                    post_transforms.get_node_number))
    assert hashlib.sha256(src.encode()).hexdigest() == (
        "43b5c253247d23b5f5e21f048b96678ffa0f972e24099681c79eb0c059608b13"), src
    assert utils.get_node_number.__name__ == "get_node_number"
    calls = re.findall(r"\bget_node_number\(([^)]*)\)", inspect.getsource(post_transforms))
    assert calls and all(len(c.split(",")) == 3 for c in calls), calls
    # the call sites read the module's global, which is what the patch replaces
    assert "from .utils import get_node_number" in inspect.getsource(post_transforms)
