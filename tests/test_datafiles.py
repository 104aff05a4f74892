"""``aim_tutorial.datafiles``: the tables and documents every data file of the book is written in."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from aim_tutorial import datafiles


def _table(path, rows=((1, 0.5, "a"), (2, 0.25, "b"))):
    header = datafiles.make_header("A test table.", command="python make.py", seed=7, params={"d": 3})
    cols = {"k": [r[0] for r in rows], "v": [r[1] for r in rows], "s": [r[2] for r in rows]}
    datafiles.write_table(path, cols, header)


def test_a_table_reads_back_as_written(tmp_path):
    path = tmp_path / "t.csv"
    _table(path)
    got = datafiles.read(path)
    assert got.columns == ("k", "v", "s") and got.header["rows"] == 2 and got.header["seed"] == 7
    assert list(got.column("k")) == [1.0, 2.0] and list(got.column("s")) == ["a", "b"]
    assert got.header["commands"] == ["python make.py"] and got.header["params"] == {"d": 3}
    with pytest.raises(ValueError, match="no column"):
        got.column("w")


def test_append_keeps_the_rows_there_byte_for_byte(tmp_path):
    path = tmp_path / "t.csv"
    _table(path)
    body = path.read_text().splitlines()[-3:]
    datafiles.append_rows(path, {"k": [3], "v": [0.125], "s": ["c"]}, command="python more.py", notes=["part 2"])
    text = path.read_text().splitlines()
    assert text[-4:-1] == body and text[-1] == "3,0.125,c"
    got = datafiles.read(path)
    assert got.header["rows"] == 3 and got.header["commands"][-1] == "python more.py"
    assert got.header["notes"][-1] == "part 2"
    with pytest.raises(ValueError, match="columns"):
        datafiles.append_rows(path, {"k": [4]})


def test_remove_rows_keeps_the_others_byte_for_byte(tmp_path):
    path = tmp_path / "t.csv"
    _table(path, rows=((1, 0.5, "a"), (2, 0.25, "b"), (3, 0.125, "a")))
    lines = path.read_text().splitlines()
    n = datafiles.remove_rows(path, lambda r: r["s"] == "a", add_command=False, notes=["a removed"])
    assert n == 2
    got = datafiles.read(path)            # the row count is right, so the file verifies
    assert got.header["rows"] == 1 and list(got.column("k")) == [2.0]
    assert got.header["commands"] == ["python make.py"] and got.header["notes"] == ["a removed"]
    assert path.read_text().splitlines()[-1] == lines[-2]
    assert datafiles.remove_rows(path, lambda r: False, command="python again.py") == 0
    assert datafiles.read(path).header["commands"][-1] == "python again.py"


def test_a_truncated_or_edited_table_is_refused(tmp_path):
    path = tmp_path / "t.csv"
    _table(path)
    text = path.read_text()
    path.write_text(text[:-1])                                    # last line incomplete
    with pytest.raises(ValueError, match="truncated"):
        datafiles.read(path)
    path.write_text(text + "3,0.1,c\n")                            # a row the header does not count
    with pytest.raises(ValueError, match="header states 2 rows"):
        datafiles.read(path)
    assert len(datafiles.read(path, verify=False).table) == 3


_APPEND = """
import sys
from aim_tutorial import datafiles
path, start = sys.argv[1], int(sys.argv[2])
for k in range(start, start + 10):
    with datafiles.locked(path):
        datafiles.append_rows(path, {"k": [k], "v": [0.0], "s": ["p"]}, add_command=False)
"""


def test_parts_appending_at_once_lose_nothing_under_the_lock(tmp_path):
    path = str(tmp_path / "t.csv")
    _table(path, rows=())
    procs = [subprocess.Popen([sys.executable, "-c", _APPEND, path, str(s)]) for s in (0, 100)]
    assert [p.wait(120) for p in procs] == [0, 0]
    got = datafiles.read(path)
    assert got.header["rows"] == 20
    assert sorted(got.column("k")) == sorted(list(range(10)) + list(range(100, 110)))
    assert np.all(got.column("v") == 0)
