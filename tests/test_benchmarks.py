"""The benchmarks are registered in one place (``benchmarks/run.py``'s ``PARTS``) and rendered in one
place (the book's benchmarks page, which reads ``benchmarks/results.json``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_part_of_results_is_registered_and_rendered_by_the_book(load_file):
    run = load_file("benchmarks/run.py")
    res = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    bookkeeping = {"machine", "command", "loadavg_end", "rerun"}
    # every part the file holds is a registered one (or the part a registered one updates)
    written = {name if part.into is None else part.into for name, part in run.PARTS.items()}
    assert set(res) - bookkeeping <= written, set(res) - bookkeeping - written
    # every registered part is rendered by the book's page, which reads it from the file by its key
    page = (ROOT / "book" / "benchmarks.md").read_text()
    read = set(re.findall(r'res\["([a-z_]+)"\]|res\.get\("([a-z_]+)"|"([a-z_]+)" in res', page))
    read = {k for triple in read for k in triple if k}
    assert written <= read, written - read
    # the rerun records name registered parts; the full run's order is the registry's
    assert set(res.get("rerun", {})) <= set(run.PARTS)
    full = [n for n, p in run.PARTS.items() if p.full]
    assert [k for k in res if k in full] == [k for k in full if k in res]
    assert not (ROOT / "benchmarks" / "results.md").exists(), "the page renders the tables; no second copy"


def test_only_accepts_exactly_the_registered_parts(load_file, capsys):
    run = load_file("benchmarks/run.py")
    import pytest

    with pytest.raises(SystemExit):
        run.main(["--only", "no_such_part"])
    assert "invalid choice" in capsys.readouterr().err
