"""Lecture slides of each chapter, generated from the chapter's own sources: a reveal.js deck.

What a deck shows is chosen from the chapter's MyST source (book/NN_*.md):
  - its title and the outline of its sections (the ``## `` headings);
  - its key equations: the labelled display equations that its "Key takeaways" cite
    ({eq}`label`), in the chapter's order, completed by its first labelled equations up to
    MIN_EQUATIONS, at most MAX_EQUATIONS;
  - its figures (the ``mystnb: figure:`` cells, with their ``name``), each on a slide of the
    section it is in;
  - its "Key takeaways", a few to a slide.
What it prints comes from the built page of the chapter (``--html``, the reader's book): the
equations with their numbers, the figures as the build executed them (the images are the
site's own ``_images``, referred to, not copied), and the takeaways with their references
resolved. Without a built page (``html_dir=None``) the equations are the source's TeX and the
takeaways its text: enough for the tests of the outline.

A chapter without a "Key takeaways" section is an error (ChapterSourceError).

The decks are written for ``<site>/downloads/slides/`` and refer to reveal.js beside them
(``reveal/``, copied there by scripts/site_downloads.py from ``make reveal``) and to the
book's MathJax (``<site>/mathjax``): they open from disk, offline.

Usage: python scripts/slides.py --html _build/html --out _build/html/downloads/slides
"""

from __future__ import annotations

import argparse
import html
import json
import posixpath
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "_ext"))
import aim_toc  # noqa: E402  (the chapters, as _toc.yml lists them)

MIN_EQUATIONS, MAX_EQUATIONS = 3, 6
TAKEAWAYS_PER_SLIDE = 2
TAKEAWAYS = "Key takeaways"
# where the decks are, relative to the site's root (the links and images are made relative)
DECK_DIR = "downloads/slides"


class ChapterSourceError(ValueError):
    """A chapter's source lacks what a deck needs (a title, a "Key takeaways" section)."""


@dataclass
class Equation:
    label: str
    tex: str
    section: str
    position: int


@dataclass
class Figure:
    label: str
    section: str
    position: int


@dataclass
class Outline:
    """What a chapter's source says its deck shows."""

    number: int
    title: str
    sections: list = field(default_factory=list)      # the ## headings, in order
    equations: list = field(default_factory=list)     # every labelled display equation
    figures: list = field(default_factory=list)       # every named figure
    takeaways: list = field(default_factory=list)     # the takeaways' items (MyST text)
    cited: list = field(default_factory=list)         # labels the takeaways cite with {eq}

    def key_equations(self) -> list:
        """The takeaways' equations, then the first labelled ones, in the chapter's order."""
        chosen = [e for e in self.equations if e.label in self.cited][:MAX_EQUATIONS]
        for e in self.equations:
            if len(chosen) >= MIN_EQUATIONS:
                break
            if e not in chosen:
                chosen.append(e)
        return sorted(chosen, key=lambda e: e.position)


_FENCE = re.compile(r"^(`{3,}|:{3,})")
_EQ_END = re.compile(r"^\$\$\s*\(([^)\s]+)\)\s*$")
_FIG_NAME = re.compile(r"^\s+name:\s*(\S+)\s*$")


def _strip_front_matter(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return "\n" * text[:end + 5].count("\n") + text[end + 5:]
    return text


def outline(source: str, number: int) -> Outline:
    """The deck's outline from a chapter's MyST source (``number``: the chapter's number)."""
    lines = _strip_front_matter(source).split("\n")
    title, section = None, ""
    fences = []           # the open fences: (marker, whether its content is code)
    sections, equations, figures = [], [], []
    takeaway_lines, in_takeaways = [], False
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m and fences and line.strip() == fences[-1][0]:          # a fence closed
            fences.pop()
            i += 1
            continue
        if m:                                                     # a fence opened
            info = line[len(m.group(1)):].strip()
            directive = re.match(r"\{([\w:-]+)\}", info)
            code = not directive or directive.group(1) in ("code-cell", "code-block", "code")
            fences.append((m.group(1), code))
            if info.startswith("{code-cell}"):                  # a cell's figure, by its name
                j = i + 1
                if j < len(lines) and lines[j].strip() == "---":
                    j += 1
                    in_figure = False
                    while j < len(lines) and lines[j].strip() != "---":
                        in_figure = in_figure or lines[j].strip() == "figure:"
                        n = _FIG_NAME.match(lines[j])
                        if in_figure and n:
                            figures.append(Figure(n.group(1), section, i))
                        j += 1
            if directive and directive.group(1) == "teaching-notes":
                in_takeaways = False
            i += 1
            continue
        if any(code for _, code in fences):
            i += 1
            continue
        if line.startswith("# ") and title is None:
            title = line[2:].strip()
        elif line.startswith("## "):
            section = line[3:].strip()
            sections.append(section)
            in_takeaways = section == TAKEAWAYS
        elif line.strip() == "$$" or (line.startswith("$$") and not line.rstrip().endswith("$$")):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("$$"):
                j += 1
            end = _EQ_END.match(lines[j]) if j < len(lines) else None
            if end:
                tex = "\n".join([line[2:]] + lines[i + 1:j]).strip()
                equations.append(Equation(end.group(1), tex, section, i))
            i = j + 1
            continue
        elif in_takeaways and not fences:
            takeaway_lines.append(line)
        i += 1
    if title is None:
        raise ChapterSourceError(f"chapter {number}: no title (a '# ' heading)")
    if TAKEAWAYS not in sections:
        raise ChapterSourceError(f"chapter {number} ({title}): no '## {TAKEAWAYS}' section, "
                                 "from which its slides take their summary")
    items = []
    for line in takeaway_lines:
        if line.startswith(("- ", "* ")):
            items.append(line[2:].strip())
        elif items and line.startswith("  ") and line.strip():
            items[-1] += " " + line.strip()
    if not items:
        raise ChapterSourceError(f"chapter {number} ({title}): its '## {TAKEAWAYS}' section "
                                 "has no items (a bulleted list)")
    cited = re.findall(r"\{eq\}`([^`]+)`", "\n".join(items))
    return Outline(number, title, sections, equations, figures, items, cited)


# -- the built page: the printed equations, figures and takeaways


def _inline(text: str) -> str:
    """A heading or an item of the source as HTML: $maths$ and `code` kept, the rest escaped."""
    # a role {eq}`label`, {numref}`Fig. %s <label>`: its label (the built page prints its number)
    text = re.sub(r"\{[a-z:]+\}`(?:[^`<]*<)?([^`>]+)>?`", r"\1", text)
    out = []
    for piece in re.split(r"(\$[^$]+\$|`[^`]+`)", text):
        if piece.startswith("$") and piece.endswith("$") and len(piece) > 1:
            out.append(r"\(" + html.escape(piece[1:-1], quote=False) + r"\)")
        elif piece.startswith("`") and piece.endswith("`") and len(piece) > 1:
            out.append("<code>" + html.escape(piece[1:-1]) + "</code>")
        else:
            piece = html.escape(piece, quote=False)
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", piece))
    return "".join(out)


class BuiltPage:
    """The chapter's page of the built book, its fragments rewritten for the deck's folder.

    Each fragment (an equation's block, a figure, the takeaways' section) is cut out of the
    page before it is parsed: the pages are large, the fragments small."""

    def __init__(self, html_dir: Path, doc: str):
        self.html_dir, self.doc = html_dir, doc
        path = html_dir / f"{doc}.html"
        if not path.is_file():
            raise FileNotFoundError(f"slides: no built page {path} (build the book first)")
        self.text = path.read_text(encoding="utf-8")

    def _fragment(self, pattern: str):
        from bs4 import BeautifulSoup

        m = re.search(pattern, self.text, re.S | re.I)      # docutils writes ids in lower case
        if not m:
            return None
        node = BeautifulSoup(m.group(0), "html.parser")
        for a in node.select("a.headerlink"):
            a.decompose()
        for a in node.select("a[href]"):
            a["href"] = self._url(a["href"])
        for img in node.select("img[src]"):
            img["src"] = self._url(img["src"])
            img.attrs.pop("loading", None)
        return node

    def _url(self, url: str) -> str:
        """A URL of the page, from the deck's folder (links and images)."""
        if re.match(r"^[a-z][a-z0-9+.-]*:", url) or url.startswith("//"):
            return url
        if url.startswith("#"):
            target = f"{self.doc}.html{url}"
        else:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(self.doc), url))
        return posixpath.relpath(target, DECK_DIR)

    def equation(self, label: str) -> str | None:
        node = self._fragment(rf'<div class="math[^"]*" id="equation-{re.escape(label)}">.*?</div>')
        return str(node) if node else None

    def figure(self, label: str) -> tuple[str, str] | None:
        """(the image's HTML, the caption's HTML) of a figure of the page."""
        node = self._fragment(rf'<figure[^>]* id="{re.escape(label)}"[^>]*>.*?</figure>')
        img = node and node.find("img")
        if not img:
            return None
        cap = node.find("figcaption")
        return str(img), (cap.decode_contents() if cap else "")

    def takeaways(self) -> list | None:
        """The takeaways' items as the book prints them (references resolved)."""
        node = self._fragment(r'<section id="key-takeaways">.*?</section>')
        ul = node and node.find(["ul", "ol"])
        if not ul:
            return None
        return [li.decode_contents() for li in ul.find_all("li", recursive=False)]


# -- the deck

_STYLE = """
.reveal { font-size: 30px; }
.reveal h1, .reveal h2, .reveal h3 { text-transform: none; }
.reveal h1 { font-size: 1.8em; } .reveal h2 { font-size: 1.35em; } .reveal h3 { font-size: 1.1em; }
.reveal .slides section.title-slide { padding-top: 150px; }
.reveal .slides section { text-align: left; }
.reveal .slides section.title-slide { text-align: center; }
.reveal .chapter { color: #2a76dd; font-size: 0.9em; margin-bottom: 0.2em; }
.reveal .note { color: #555; font-size: 0.6em; }
.reveal ul.outline { font-size: 0.72em; columns: 2; column-gap: 2em; }
.reveal ul.takeaways { font-size: 0.78em; line-height: 1.35; }
.reveal ul.takeaways li { margin-bottom: 0.6em; }
.reveal .eq { margin: 1.5em 0; font-size: 1.25em; }
.reveal .eq .math { display: flex; flex-direction: row-reverse; align-items: center; }
.reveal .eq .eqno { margin-left: 1em; color: #555; }
.reveal .eq mjx-container[display="true"] { flex: 1 1 auto; margin: 0; }
.reveal .fig { text-align: center; }
.reveal .fig img { height: 470px; width: auto; max-width: 100%; object-fit: contain; margin: 0; border: 0; box-shadow: none; }
.reveal .caption { font-size: 0.55em; color: #333; line-height: 1.3; text-align: left; }
.reveal .caption p { margin: 0; }
.reveal a { color: #2a76dd; }
"""

# Display maths wider than its slide is scaled down to fit, once typeset (reveal.js shows a
# slide's content at one scale: a wide equation would run off the slide).
_SCRIPT = """
// [width of the typeset maths, room for it beside its number], unscaled by reveal.js
function mathsWidth(c) {
  const box = c.closest('.math') || c.parentElement, eqno = box.querySelector('.eqno');
  const m = c.querySelector('mjx-math');
  return [m ? m.offsetWidth : c.scrollWidth, box.clientWidth - (eqno ? eqno.offsetWidth + 24 : 0) - 4];
}
function fitMaths(slide) {
  if (!slide) return;
  slide.querySelectorAll('mjx-container[display="true"]').forEach(c => {
    c.style.fontSize = '';
    const [wide, room] = mathsWidth(c);
    if (room > 0 && wide > room) c.style.fontSize = Math.floor(100 * room / wide) + '%';
  });
}
Reveal.initialize({width: 1280, height: 720, margin: 0.04, center: false, hash: true,
                   transition: 'none', slideNumber: 'c/t'});
Reveal.on('ready', e => { window.deckReady = true; });
Reveal.on('slidechanged', e => fitMaths(e.currentSlide));
window.mathsTypeset = MathJax.startup.promise.then(() => {
  fitMaths(Reveal.getCurrentSlide()); Reveal.layout(); return true; });
"""


def _mathjax_config(macros: dict) -> str:
    config = {"tex": {"macros": macros, "inlineMath": [["\\(", "\\)"]],
                      "displayMath": [["\\[", "\\]"]]},
              "startup": {"typeset": True}}
    return "window.MathJax = " + json.dumps(config) + ";"


def _macros() -> dict:
    import yaml

    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    return config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]


def deck(md_path: Path, html_dir: Path | None = None, book_title: str = "", number: int | None = None) -> str:
    """The reveal.js deck (HTML) of a chapter; ``html_dir``: the built book, or None; ``number``: the
    chapter's number (default: the book's, from ``_toc.yml``)."""
    if number is None:
        numbers = aim_toc.chapter_numbers(md_path.resolve().parents[1])
        if f"book/{md_path.stem}" not in numbers:
            raise ValueError(f"{md_path} is not a chapter of _toc.yml: give its number")
        number = numbers[f"book/{md_path.stem}"]
    out = outline(md_path.read_text(encoding="utf-8"), number)
    doc = f"book/{md_path.stem}"
    page = BuiltPage(html_dir, doc) if html_dir else None
    chapter_url = posixpath.relpath(f"{doc}.html", DECK_DIR)
    slides = []
    slides.append(
        '<section class="title-slide">'
        f'<p class="chapter">Chapter {number}</p><h1 class="heading">{_inline(out.title)}</h1>'
        + (f"<p>{html.escape(book_title)}</p>" if book_title else "")
        + f'<p class="note">Slides generated from the chapter\'s source ({md_path.name}); '
        f'the chapter: <a href="{chapter_url}">{html.escape(chapter_url.split("/")[-1])}</a></p>'
        "</section>")
    shown = [s for s in out.sections if s not in ("Exercises", "References")]
    slides.append('<section><h2>Outline</h2><ul class="outline heading">'
                  + "".join(f"<li>{_inline(s)}</li>" for s in shown) + "</ul></section>")
    items = [("eq", e.position, e) for e in out.key_equations()]
    items += [("fig", f.position, f) for f in out.figures]
    for kind, _, item in sorted(items, key=lambda t: t[1]):
        heading = f'<h3 class="heading">{_inline(item.section)}</h3>' if item.section else ""
        if kind == "eq":
            body = page.equation(item.label) if page else None
            body = body or (r'<div class="math">\[' + html.escape(item.tex, quote=False) + r"\]</div>")
            slides.append(f'<section data-equation="{item.label}">{heading}<div class="eq">{body}</div></section>')
        else:
            fig = page.figure(item.label) if page else None
            if fig is None:
                continue
            img, caption = fig
            slides.append(f'<section data-figure="{item.label}">{heading}<div class="fig">{img}</div>'
                          f'<div class="caption">{caption}</div></section>')
    takeaways = (page.takeaways() if page else None) or [_inline(t) for t in out.takeaways]
    groups = [takeaways[i:i + TAKEAWAYS_PER_SLIDE] for i in range(0, len(takeaways), TAKEAWAYS_PER_SLIDE)]
    for k, group in enumerate(groups, 1):
        part = f" ({k}/{len(groups)})" if len(groups) > 1 else ""
        slides.append(f'<section class="takeaways-slide"><h2>{TAKEAWAYS}{part}</h2><ul class="takeaways">'
                      + "".join(f"<li>{li}</li>" for li in group) + "</ul></section>")
    title = f"Chapter {number}: {out.title}"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{html.escape(re.sub(r"[$`]", "", title))} (slides)</title>
<link rel="stylesheet" href="reveal/reveal.css">
<link rel="stylesheet" href="reveal/white.css">
<style>{_STYLE}</style>
<script>{_mathjax_config(_macros())}</script>
<script src="../../mathjax/tex-mml-chtml.js"></script>
</head>
<body>
<div class="reveal"><div class="slides">
{chr(10).join(slides)}
</div></div>
<script src="reveal/reveal.js"></script>
<script>{_SCRIPT}</script>
</body>
</html>
"""


def chapters(root: Path = REPO) -> list:
    """The chapters' sources, in the book's order (``_toc.yml``'s numbered parts)."""
    return aim_toc.chapter_sources(root)


def deck_name(md_path: Path) -> str:
    return f"{md_path.stem}.html"


def write_decks(html_dir: Path, out_dir: Path, book_title: str = "") -> list:
    """Every chapter's deck into ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for md in chapters():
        target = out_dir / deck_name(md)
        target.write_text(deck(md, html_dir, book_title), encoding="utf-8")
        written.append(target)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--html", type=Path, required=True, help="the built book (_build/html)")
    parser.add_argument("--out", type=Path, required=True, help="where the decks go")
    args = parser.parse_args(argv)
    for path in write_decks(args.html, args.out):
        print(f"slides: {path} ({path.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    sys.exit(main())
