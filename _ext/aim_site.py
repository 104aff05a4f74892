"""The deployable site's links to its downloads (make site, make test: AIM_SITE=1).

scripts/site_downloads.py writes the downloads into the built book (``downloads/``): the book
as a PDF, each chapter's problem set (without solutions), the student edition as a zip and
each chapter's lecture slides. When the reader's book is built with the environment variable
AIM_SITE=1, this extension links them:
  - each numbered chapter, under the line that links its notebook: its problem set and slides;
  - the landing page and the teaching page: every download, and that the instructor edition,
    which holds the solutions, is built (``make instructor``), not published.
Without AIM_SITE (``make book``: a reader without TeX has no PDFs) the pages link nothing
that the build does not write. The editions (AIM_EDITION) never link them.
"""

from __future__ import annotations

import os
from pathlib import Path

import aim_toc

DOWNLOADS = "downloads"
STUDENT_ZIP = "aim-tutorial-student-edition.zip"
STUDENT_DIR = "aim-tutorial-student-edition"
LANDING, TEACHING = "book/intro", "book/teaching"
INSTRUCTOR = ("The instructor edition holds the solutions and each chapter's teaching notes, "
              "so it is built, not published: from a clone of the repository, "
              "<code>make instructor</code> builds it into "
              "<code>_build/instructor/_build/html</code>.")


def enabled(app) -> bool:
    return (os.environ.get("AIM_SITE") == "1" and app.builder.format == "html"
            and getattr(app.config, "aim_edition", "reader") == "reader")


def chapters(app) -> list:
    """(number, docname, title) of the numbered chapters, in order."""
    return [(k, doc, app.env.titles[doc].astext())
            for doc, k in aim_toc.chapter_numbers(app.srcdir).items() if doc in app.env.found_docs]


def problem_set(number: int) -> str:
    return f"{DOWNLOADS}/problem-set-{number}.pdf"


def slides(doc: str) -> str:
    return f"{DOWNLOADS}/slides/{Path(doc).name}.html"


def chapter_line(number: int, doc: str, pathto) -> str:
    ps, deck = pathto(problem_set(number), 1), pathto(slides(doc), 1)
    return (f'<p class="aim-site-links">This chapter\'s problem set, without solutions: '
            f'<a class="reference download aim-problem-set" href="{ps}">'
            f'<code class="docutils literal notranslate"><span class="pre">problem-set-{number}.pdf</span></code></a>; '
            f'its lecture slides (reveal.js, they open offline): '
            f'<a class="reference external aim-slides" href="{deck}">'
            f'<code class="docutils literal notranslate"><span class="pre">{Path(doc).name}.html</span></code></a>.</p>')


def downloads_box(app, pathto) -> str:
    """Every download of the site, and where the instructor edition comes from."""
    chs = chapters(app)
    sets = " · ".join(f'<a class="reference download aim-problem-set" href="{pathto(problem_set(n), 1)}">{n}</a>'
                      for n, _, _ in chs)
    decks = "".join(f'<li><a class="reference external aim-slides" href="{pathto(slides(doc), 1)}">'
                    f"{n}. {title}</a></li>" for n, doc, title in chs)
    return (
        '<div class="admonition aim-downloads">\n<p class="admonition-title">Downloads</p>\n<ul>\n'
        f'<li>The book as a PDF: <a class="reference download aim-book-pdf" href="{pathto(DOWNLOADS + "/book.pdf", 1)}">'
        '<code class="docutils literal notranslate"><span class="pre">book.pdf</span></code></a></li>\n'
        f'<li>The student edition, without solutions, to open from disk (unzip it and open '
        f'<code>{STUDENT_DIR}/index.html</code>): <a class="reference download aim-student-zip" '
        f'href="{pathto(DOWNLOADS + "/" + STUDENT_ZIP, 1)}"><code class="docutils literal notranslate">'
        f'<span class="pre">{STUDENT_ZIP}</span></code></a></li>\n'
        f"<li>The problem sets, one PDF a chapter, without solutions: chapter {sets}</li>\n"
        f'<li>Lecture slides of each chapter (reveal.js, generated from the chapter; they open '
        f'offline):<ul>{decks}</ul></li>\n'
        f"</ul>\n<p>{INSTRUCTOR}</p>\n</div>\n")


def _insert_after_heading(body: str, box: str, section_id: str | None = None) -> str:
    """``box`` after the page's title (or after the heading of the section ``section_id``)."""
    start = body.find(f'id="{section_id}"') if section_id else 0
    if start == -1:
        start = 0
    end = body.find("</h2>" if section_id and start else "</h1>", start)
    if end == -1:
        return box + body
    end = body.find(">", end) + 1
    return body[:end] + "\n" + box + body[end:]


def _page_links(app, pagename, templatename, context, doctree):
    if not enabled(app) or not context.get("body"):
        return
    pathto = context["pathto"]
    number = aim_toc.chapter_numbers(app.srcdir).get(pagename)
    if number is not None:
        line = chapter_line(number, pagename, pathto)
        body = context["body"]
        # under the line that links the notebook (aim_book), else under the title
        at = body.find('<p class="aim-notebook-link">')
        if at != -1:
            end = body.find("</p>", at) + len("</p>")
            context["body"] = body[:end] + "\n" + line + body[end:]
        else:
            context["body"] = _insert_after_heading(body, line)
    elif pagename == LANDING:
        context["body"] = _insert_after_heading(context["body"], downloads_box(app, pathto))
    elif pagename == TEACHING:
        context["body"] = _insert_after_heading(context["body"], downloads_box(app, pathto),
                                                "editions-and-printed-material")


def setup(app):
    # after aim_book's notebook line (priority 502)
    app.connect("html-page-context", _page_links, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
