"""The downloads of the deployable site, written into the built book: <html>/downloads/.

  book.pdf                              the reader's book (make pdf)
  problem-set-N.pdf                     each chapter's exercises, without solutions (make pdf;
                                        the -solutions files are never published)
  aim-tutorial-student-edition.zip      the student edition (make student), one folder that
                                        opens from disk: aim-tutorial-student-edition/index.html
  slides/NN_<chapter>.html              each chapter's reveal.js deck (scripts/slides.py), with
  slides/reveal/                        reveal.js (make reveal) beside them

The chapter pages, the landing page and the teaching page link them when the book was built
with AIM_SITE=1 (_ext/aim_site.py; make site, make test).

--check: only check that the built site holds no test artefact (the output of a test: the
Colab render, screenshots, pytest's cache) and no solutions PDF.

Usage: python scripts/site_downloads.py --html _build/html --pdf _build/pdf \
           --student _build/student/_build/html --reveal .tools/reveal.js-X.Y.Z
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import slides  # noqa: E402

DOWNLOADS = "downloads"
STUDENT_ZIP = "aim-tutorial-student-edition.zip"
STUDENT_DIR = "aim-tutorial-student-edition"
REVEAL_FILES = ("reveal.js", "reveal.css", "white.css", "LICENSE")
PROBLEM_SET = re.compile(r"^problem-set-(\d+)\.pdf$")
# what a test leaves behind, never to be published
ARTEFACTS = ("_colab_render", "colab_render", "test-artefacts", "screenshots", ".pytest_cache",
             "__pycache__")


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        sys.exit(f"site-downloads: no {what} at {path}")
    return path


def student_zip(student_html: Path, target: Path) -> int:
    """The student edition's HTML as one zip, under one folder; returns the number of files."""
    _need(student_html / "index.html", "student edition (make student)")
    files = sorted(p for p in student_html.rglob("*") if p.is_file() and p.name != ".buildinfo")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for p in files:
            z.write(p, f"{STUDENT_DIR}/{p.relative_to(student_html).as_posix()}")
    return len(files)


def write(html: Path, pdf: Path, student: Path, reveal: Path) -> Path:
    _need(html / "index.html", "built book (make book)")
    out = html / DOWNLOADS
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    shutil.copyfile(_need(pdf / "book.pdf", "book PDF (make pdf)"), out / "book.pdf")
    sets = sorted((p for p in pdf.glob("problem-set-*.pdf") if PROBLEM_SET.match(p.name)),
                  key=lambda p: int(PROBLEM_SET.match(p.name).group(1)))
    chapters = slides.chapters()
    if len(sets) != len(chapters):
        sys.exit(f"site-downloads: {len(sets)} problem sets in {pdf} for {len(chapters)} chapters (make pdf)")
    for p in sets:
        shutil.copyfile(p, out / p.name)
    n = student_zip(student, out / STUDENT_ZIP)
    deck_dir = out / "slides"
    (deck_dir / "reveal").mkdir(parents=True)
    for name in REVEAL_FILES:
        shutil.copyfile(_need(reveal / name, "reveal.js (make reveal)"), deck_dir / "reveal" / name)
    decks = slides.write_decks(html, deck_dir, book_title=_book_title())
    print(f"site-downloads: {out}: book.pdf, {len(sets)} problem sets, the student edition "
          f"({n} files, {(out / STUDENT_ZIP).stat().st_size // 1024} KiB), {len(decks)} slide decks")
    return out


def _book_title() -> str:
    import yaml

    return yaml.safe_load((slides.REPO / "_config.yml").read_text(encoding="utf-8"))["title"]


def check(html: Path) -> list:
    """What in the built site is a test's output or a solutions PDF."""
    bad = [p for p in html.rglob("*") if p.name in ARTEFACTS]
    bad += [p for p in html.rglob("*solutions*.pdf")]
    return bad


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--html", type=Path, required=True)
    parser.add_argument("--pdf", type=Path)
    parser.add_argument("--student", type=Path)
    parser.add_argument("--reveal", type=Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.check:
        bad = check(args.html)
        if bad:
            sys.exit("the site holds test artefacts or solutions: " + ", ".join(map(str, bad[:10])))
        print(f"site-check: {args.html} holds no test artefact and no solutions PDF")
        return 0
    if not (args.pdf and args.student and args.reveal):
        parser.error("--pdf, --student and --reveal are needed (or --check)")
    start = time.monotonic()
    write(args.html, args.pdf, args.student, args.reveal)
    print(f"site-downloads: {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
