"""``_ext/aim_toc.py``: the chapters as ``_toc.yml`` lists them, the one list the build tooling, the
scripts and the tests read (a chapter whose file does not match a pattern is still a chapter)."""

from pathlib import Path
from types import SimpleNamespace

import aim_site
import aim_teaching
import aim_toc
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_the_books_chapters_are_its_numbered_parts_in_order():
    docs = aim_toc.chapters(ROOT)
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    numbered = [c["file"] for p in toc["parts"] if p.get("numbered") for c in p["chapters"]]
    assert docs == numbered and len(docs) == 9
    assert toc["root"] not in docs and "book/notation" not in docs
    assert all(p.is_file() for p in aim_toc.chapter_sources(ROOT))
    # today's files are numbered as the book numbers them
    assert {doc: int(Path(doc).name[:2]) for doc in docs} == aim_toc.chapter_numbers(ROOT)


def _toy_book(tmp_path: Path) -> Path:
    (tmp_path / "book").mkdir()
    for name in ("intro", "first", "10_untied", "notes"):
        (tmp_path / "book" / f"{name}.md").write_text(f"# {name}\n")
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump({
        "format": "jb-book", "root": "book/intro",
        "parts": [{"caption": "A", "numbered": True, "chapters": [{"file": "book/first"}]},
                  {"caption": "B", "numbered": True, "chapters": [{"file": "book/10_untied"}]},
                  {"caption": "Reference", "chapters": [{"file": "book/notes"}]}]}))
    return tmp_path


def test_a_chapter_is_found_whatever_its_file_is_called(tmp_path):
    root = _toy_book(tmp_path)
    assert aim_toc.chapters(root) == ["book/first", "book/10_untied"]
    assert aim_toc.chapter_numbers(root) == {"book/first": 1, "book/10_untied": 2}
    assert aim_teaching._chapter_sources(root) == [root / "book/first.md", root / "book/10_untied.md"]
    # the site's chapter links (problem set N, slides) number them as the book does
    app = SimpleNamespace(srcdir=str(root), env=SimpleNamespace(
        found_docs={"book/intro", "book/first", "book/10_untied", "book/notes"},
        titles={d: SimpleNamespace(astext=lambda d=d: d) for d in ("book/first", "book/10_untied")}))
    assert aim_site.chapters(app) == [(1, "book/first", "book/first"), (2, "book/10_untied", "book/10_untied")]


def test_no_table_of_contents_means_no_chapters(tmp_path):
    # a build of something else (the problem sets' project writes a toc without numbered parts)
    assert aim_toc.chapters(tmp_path) == []
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": "index",
                                                       "chapters": [{"file": "problem-set-1"}]}))
    assert aim_toc.chapters(tmp_path) == []
