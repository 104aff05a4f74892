"""Merge data tables written in parts (e.g. one process per T, or a run and its continuation) into one.

Usage:
    python scripts/merge_tables.py OUT PART.csv [PART.csv ...] [--sort T seed x] [--title "..."]

The parts must have the same columns (``aim_tutorial.datafiles`` tables). The merged file keeps the
first part's title, versions, seed and parameters (``--set`` replaces some; a note names
those in which the parts differ), lists every part's commands, keeps their notes,
adds a note naming this merge, and refuses two rows with the same values in the ``--sort`` columns
(a data set computed twice). Rows are sorted by the ``--sort`` columns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from aim_tutorial import datafiles  # noqa: E402


def merge(out: str, parts: list, sort: list, title: str | None = None, params: dict | None = None,
          extra_notes=(), part_column: str | None = None, argv=None) -> int:
    tables = [datafiles.read(p) for p in parts]
    cols = tables[0].columns
    for p, t in zip(parts, tables):
        if t.columns != cols:
            raise ValueError(f"{p}: columns {t.columns} are not the first part's {cols}")
    missing = [c for c in sort if c not in cols]
    if missing:
        raise ValueError(f"--sort columns {missing} are not in the tables {cols}")
    data = {c: np.concatenate([t.column(c) for t in tables]) for c in cols}
    if part_column:
        if part_column in cols:
            raise ValueError(f"--part-column {part_column!r} is already a column of the tables")
        data[part_column] = np.concatenate([np.full(len(t.column(cols[0])), i) for i, t in enumerate(tables)])
        cols = (*cols, part_column)
        notes_part = [f"{part_column}: the index of the part a row comes from, in the order of the commands"]
    else:
        notes_part = []
    order = np.lexsort([data[c] for c in reversed(sort)]) if sort else np.arange(len(data[cols[0]]))
    data = {c: v[order] for c, v in data.items()}
    keys = list(zip(*(data[c].tolist() for c in sort))) if sort else []
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"rows repeated in the parts ({', '.join(sort)}): {dup}")
    h0 = tables[0].header
    commands = [c for t in tables for c in t.header["commands"]]
    notes = list(dict.fromkeys(n for t in tables for n in t.header["notes"]))
    differ = sorted(k for k in h0["params"] if any(t.header["params"].get(k) != h0["params"][k] for t in tables))
    if differ:
        notes.append("the parts' parameters differ in " + ", ".join(
            f"{k} ({', '.join(json.dumps(t.header['params'].get(k)) for t in tables)})" for k in differ))
    notes.extend(notes_part)
    notes.extend(extra_notes)
    notes.append(f"merged from {len(parts)} parts by "
                 f"{datafiles.command_line('scripts/merge_tables.py', argv)}")
    header = datafiles.make_header(title or h0["title"], commands=commands, seed=h0["seed"],
                                   params={**h0["params"], **(params or {})}, notes=notes, versions=h0["versions"])
    datafiles.write_table(out, {c: data[c].tolist() for c in cols}, header, fmt=".6g")
    return len(order)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("parts", nargs="+")
    p.add_argument("--sort", nargs="*", default=[], help="columns to sort by (and that identify a row)")
    p.add_argument("--title", default=None, help="the merged file's title (default: the first part's)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=JSON",
                   help="parameters of the merged file that replace the first part's (e.g. 'T=[2,3]')")
    p.add_argument("--part-column", default=None,
                   help="add a column of this name: the index of the part each row comes from")
    p.add_argument("--note", action="append", default=[], help="a note for the merged file's header")
    a = p.parse_args(argv)
    params = {}
    for item in a.set:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--set takes KEY=JSON, got {item!r}")
        params[key] = json.loads(value)
    n = merge(a.out, a.parts, a.sort, a.title, params, a.note, a.part_column, argv)
    print(f"wrote {a.out}: {n} rows from {len(a.parts)} parts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
