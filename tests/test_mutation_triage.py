"""The mutation triage file stays in step with the code (fast; ``make mutation-ci`` runs the mutants).

Every ``[[curated]]`` mutant names a line of its module's source (``old``) that must exist exactly
once, else ``make mutation-ci`` cannot plant it ("the code moved: update the triage file"); this
test says so in the fast loop, before the slow CI step does.
"""

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRIAGE = tomllib.loads((ROOT / "mutation" / "triage.toml").read_text())


def _source(module: str) -> str:
    return (ROOT / "aim_tutorial" / (module.replace(".", "/") + ".py")).read_text()


@pytest.mark.parametrize("entry", TRIAGE["curated"], ids=lambda e: f"{e['module']}: {e['old'][:40]}")
def test_each_curated_mutant_names_one_line_of_its_module(entry):
    lines = [line.strip() for line in _source(entry["module"]).splitlines()]
    assert lines.count(entry["old"].strip()) == 1, (
        f"{entry['module']}: the line {entry['old']!r} is not in the source exactly once; "
        "update mutation/triage.toml")
    assert entry["new"] != entry["old"] and entry["select"]
