"""One output box per code cell: a cell's printed lines (stdout, stderr) are one stream box.

Reads the built HTML (no browser). A cell that prints in several places, or mixes
stderr and stdout, shows the reader several boxes for one computation; the chapters
build one string and print it once instead.
"""

from __future__ import annotations

import pytest
from test_numbering import PAGES, _article, _require_build, _soup


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_one_stream_box_per_cell(page):
    _require_build()
    split = []
    for out in _article(_soup(page)).select("div.cell_output"):
        streams = [d for d in out.find_all("div", recursive=False)
                   if {"output", "stream"} <= set(d.get("class", []))
                   or {"output", "stderr"} <= set(d.get("class", []))]
        if len(streams) > 1:
            first = streams[0].get_text(" ", strip=True)[:60]
            split.append(f"{len(streams)} boxes, starting {first!r}")
    assert not split, f"{page.name}: cells whose output is split: {split}"
