"""One format for every data file: a table (CSV) or a document (JSON) under one header.

Every stored result of the book (``aim_tutorial/data``), every file of ``scripts/`` and of
:mod:`aim_tutorial.reproduce` is written and read here. The header is machine-readable and the
same in both formats:

``title``
    what the file holds (one line);
``commands``
    the command lines that wrote it, in order (a run that appended rows adds its own);
``written``
    when (UTC);
``versions``
    ``aim_tutorial``, ``jax``, ``numpy``, ``python``, the device and the machine;
``seed``
    the root of every random key (``None`` for deterministic results);
``params``
    every parameter of the computation (a JSON object);
``rows``
    the number of data rows (tables), checked on reading: a truncated file is refused;
``notes``
    free text for the reader: how the columns are defined, how the file was made.

A table is a CSV file whose header lines start with ``#`` (``# key: JSON value``, one
``# note: text`` line a note), then the column names, then the rows. A document is a JSON
object ``{"header": {...}, "content": ...}``. Files are written under a temporary name and
renamed into place once complete, so a reader sees either the old file or the whole new one.

Example:
    >>> import numpy as np, os, tempfile
    >>> from aim_tutorial import datafiles
    >>> header = datafiles.make_header("squares", command="python -c ...", seed=None,
    ...                                params={"n": 3}, notes=["y = x^2"])
    >>> path = os.path.join(tempfile.mkdtemp(), "squares.csv")
    >>> datafiles.write_table(path, {"x": np.arange(3), "y": np.arange(3) ** 2}, header)
    >>> f = datafiles.read(path)
    >>> f.table["y"].tolist(), f.header["params"], f.header["rows"]
    ([0.0, 1.0, 4.0], {'n': 3}, 3)
"""

from __future__ import annotations

import contextlib

import csv
import datetime
import json
import os
import platform
import sys
import tempfile
from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from . import _checks

__all__ = ["DataFile", "append_rows", "current_versions", "listed", "locked", "make_header", "packaged", "read", "summary",
           "command_line", "remove_rows", "table_text", "write_document", "write_table"]

#: the first header key of a table, which names the format
MAGIC = "aim_tutorial data"
#: the header keys, in the order they are written
KEYS = ("title", "commands", "written", "versions", "seed", "params", "rows", "notes")


class DataFile(NamedTuple):
    """A data file read back by :func:`read`.

    Attributes:
        header: the header (a dict with the keys of :data:`KEYS`).
        table: a table's columns as a NumPy record array (numeric columns as floats, others as
            strings); ``None`` for a document.
        content: a document's content (JSON values); ``None`` for a table.
        path: where it was read from.
    """

    header: dict
    table: Optional[np.recarray]
    content: Any
    path: str

    @property
    def columns(self) -> tuple:
        """A table's column names."""
        return tuple(self.table.dtype.names) if self.table is not None else ()

    def column(self, name: str) -> np.ndarray:
        """One column of a table, by name (``ValueError`` naming the columns otherwise)."""
        if self.table is None or name not in self.columns:
            raise ValueError(f"{self.path}: no column {name!r}; it has {self.columns}")
        return np.asarray(self.table[name])


def current_versions() -> dict:
    """The versions and the machine that a header records."""
    import jax

    from . import __version__

    dev = jax.devices()[0]
    return {
        "aim_tutorial": __version__,
        "jax": jax.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "device": f"{dev.platform} ({dev.device_kind})",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "float64": bool(jax.config.jax_enable_x64),
    }


def _now() -> str:
    return f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def make_header(title: str, *, command: Optional[str] = None, seed=None, params: Optional[Mapping] = None,
                notes: Sequence[str] = (), commands: Optional[Sequence[str]] = None,
                written: Optional[str] = None, versions: Optional[Mapping] = None) -> dict:
    """A header for :func:`write_table` / :func:`write_document`.

    Args:
        title: one line saying what the file holds.
        command: the command line that writes it (default: this process's, ``python`` and its
            arguments); or ``commands``, a list of them (a file made by several runs).
        seed: the root of the random keys, an integer, or ``None`` (deterministic).
        params: every parameter, JSON-serialisable.
        notes: lines of free text for the reader.
        commands: the command lines, when several runs made the file (instead of ``command``).
        written: the time (default: now).
        versions: the versions (default: :func:`current_versions`).
    """
    if not isinstance(title, str) or not title.strip() or "\n" in title:
        raise ValueError(f"title must be one non-empty line, got {title!r}")
    if commands is None:
        commands = [command if command is not None else _this_command()]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise _checks.ArgumentTypeError(f"seed must be an integer or None, got {seed!r}")
    header = {
        "title": title.strip(),
        "commands": [str(c) for c in commands],
        "written": written or _now(),
        "versions": dict(versions) if versions is not None else current_versions(),
        "seed": None if seed is None else int(seed),
        "params": dict(params or {}),
        "rows": None,
        "notes": [str(n) for n in notes],
    }
    json.dumps(header)  # JSON-serialisable, or a TypeError naming the culprit now
    return header


def _this_command() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith(".py"):
        argv[0] = os.path.relpath(argv[0]) if os.path.isabs(argv[0]) else argv[0]
    return " ".join(["python"] + argv)


def command_line(script: str, argv=None) -> str:
    """``python SCRIPT ARGS``: the command a header records, ``ARGS`` from ``argv`` (default: this
    process's arguments), so that a script's ``main(argv)`` records what it was given."""
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", script] + [str(a) for a in args])


def _atomic_write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _format(v, fmt: str) -> str:
    if isinstance(v, (str, np.str_)):
        if any(ch in v for ch in ',"\n#'):
            raise ValueError(f"a string cell may not hold a comma, quote, newline or '#', got {v!r}")
        return str(v)
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return format(float(v), fmt)


def _header_text(head: Mapping) -> str:
    out = [f"# {MAGIC}: {head['title']}"]
    for key in KEYS[1:]:
        if key == "notes":
            out += [f"# note: {line}" for note in head.get("notes", []) for line in (str(note).splitlines() or [""])]
        else:
            out.append(f"# {key}: {json.dumps(head.get(key), sort_keys=key != 'params')}")
    return "\n".join(out) + "\n"


def _rows_text(columns: Mapping[str, Sequence], fmt: str) -> tuple:
    names = list(columns)
    if not names:
        raise ValueError("columns must hold at least one column")
    for name in names:
        if not isinstance(name, str) or not name or any(ch in name for ch in ',"\n# '):
            raise ValueError(f"column names must be non-empty words without ',', '#' or spaces, got {name!r}")
    cols = [list(np.asarray(columns[n]).reshape(-1)) if not isinstance(columns[n], list) else columns[n]
            for n in names]
    n_rows = len(cols[0])
    if any(len(c) != n_rows for c in cols):
        raise ValueError(f"columns must have equal lengths, got {dict(zip(names, map(len, cols)))}")
    return names, [",".join(_format(c[i], fmt) for c in cols) for i in range(n_rows)]


def table_text(columns: Mapping[str, Sequence], header: Mapping, *, fmt: str = ".10g") -> str:
    """The text of a table file (what :func:`write_table` writes)."""
    names, rows = _rows_text(columns, fmt)
    head = dict(header)
    head["rows"] = len(rows)
    return _header_text(head) + "\n".join([",".join(names)] + rows) + "\n"


def write_table(path: str, columns: Mapping[str, Sequence], header: Mapping, *, fmt: str = ".10g") -> None:
    """Write a table: ``columns`` (name -> values: numbers or strings) under ``header``.

    Numbers are written with ``format(value, fmt)`` (integers as integers); the row count is
    added to the header. The file appears complete or not at all (temporary file and rename).
    """
    _atomic_write(os.fspath(path), table_text(columns, header, fmt=fmt))


def append_rows(path: str, columns: Mapping[str, Sequence], *, add_command: bool = True,
                command: Optional[str] = None, notes: Sequence[str] = (), fmt: str = ".10g") -> None:
    """Append rows to a table written by :func:`write_table` (the same columns, in its order).

    The rows already there are kept byte for byte; the header gains ``command`` (default: this
    process's; none with ``add_command=False``, for a run that appends row by row) and ``notes``,
    and its row count is updated; the file is rewritten through a temporary file, so it is never
    half-appended. Columns of length 0 add only the notes.
    """
    path = os.fspath(path)
    old = read(path)
    if set(columns) != set(old.columns):
        raise ValueError(f"columns must be the table's {old.columns}, got {tuple(columns)}")
    _, new_rows = _rows_text({n: columns[n] for n in old.columns}, fmt)
    _rewrite(path, old.header, _body(path) + new_rows, add_command, command, notes)


def _body(path: str) -> list:
    """A table's column line and data lines, as written."""
    with open(path, encoding="utf-8") as f:
        return [ln for ln in f.read().splitlines() if ln.strip() and not ln.startswith("#")]


def _rewrite(path: str, header: Mapping, body: list, add_command: bool, command: Optional[str],
             notes: Sequence[str]) -> None:
    """Write ``body`` (column line and data lines) under ``header`` with the command, notes and row
    count of this change."""
    header = dict(header)
    if add_command:
        header["commands"] = list(header["commands"]) + [command if command is not None else _this_command()]
    header["notes"] = list(header["notes"]) + [str(n) for n in notes]
    header["rows"] = len(body) - 1
    _atomic_write(path, _header_text(header) + "\n".join(body) + "\n")


def remove_rows(path: str, where, *, add_command: bool = True, command: Optional[str] = None,
                notes: Sequence[str] = ()) -> int:
    """Remove the rows of a table for which ``where(row)`` is true (``row``: a dict of the row's
    values as :func:`read` gives them), for a study that computes them again; the other rows are
    kept byte for byte, the header gains ``command`` (default: this process's; none with
    ``add_command=False``) and ``notes``. Returns how many rows were removed."""
    path = os.fspath(path)
    old = read(path)
    body, t = _body(path), old.table
    drop = [bool(where({c: t[c][i] for c in old.columns})) for i in range(len(t))]
    _rewrite(path, old.header, [body[0]] + [ln for ln, d in zip(body[1:], drop) if not d], add_command, command,
             notes)
    return sum(drop)


@contextlib.contextmanager
def locked(path: str):
    """Hold an exclusive lock on ``path + ".lock"`` (``fcntl.flock``, POSIX) for the ``with`` block.

    For the parts of a study that append to one file at once: each :func:`append_rows` reads the
    file and rewrites it, so two processes appending together could lose each other's rows; under
    the lock they take turns. The lock file stays (``aim_tutorial/data/*.lock`` is ignored by git).

    Example:
        >>> import os, tempfile
        >>> from aim_tutorial import datafiles
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> with datafiles.locked(path):
        ...     os.path.exists(path + ".lock")
        True
    """
    import fcntl

    with open(os.fspath(path) + ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_document(path: str, content: Any, header: Mapping) -> None:
    """Write a JSON document ``{"header": header, "content": content}`` (complete or not at all)."""
    head = dict(header)
    text = json.dumps({"header": head, "content": content}, indent=1) + "\n"
    _atomic_write(os.fspath(path), text)


def summary(header: Mapping, *, notes: Sequence[str] = (), width: int = 88) -> str:
    """The provenance of a file for the reader: its commands, date, versions, seed and parameters.

    Args:
        header: a header (``DataFile.header``).
        notes: also print the notes that start with one of these strings.
        width: wrap the lines at this width.
    """
    import textwrap

    v = header.get("versions") or {}
    params = ", ".join(f"{k} = {json.dumps(p)}" for k, p in (header.get("params") or {}).items())
    lines = [f"command: {c}" for c in header.get("commands", [])]
    lines.append(f"written {header.get('written')}, " + ", ".join(f"{k} {x}" for k, x in v.items()))
    lines.append(f"seed: {header.get('seed')}" if header.get("seed") is not None else "deterministic (no seed)")
    lines.append(f"params: {params}")
    lines += [n for n in header.get("notes", []) if notes and str(n).startswith(tuple(notes))]
    return "\n".join(textwrap.fill(line, width, subsequent_indent="    ") for line in lines)


def listed(prefix: str = "", suffix: str = "") -> tuple:
    """The names of the data files shipped in ``aim_tutorial/data`` (with this prefix and suffix)."""
    from importlib.resources import files

    return tuple(sorted(f.name for f in (files("aim_tutorial") / "data").iterdir()
                        if f.name.endswith((".csv", ".json")) and f.name.startswith(prefix)
                        and f.name.endswith(suffix)))


def packaged(name: str) -> str:
    """The path of a data file shipped in ``aim_tutorial/data`` (``ValueError`` listing them)."""
    from importlib.resources import files

    available = listed()
    if not isinstance(name, str) or name not in available:
        raise ValueError(f"name must be one of the data files {available}, got {name!r}")
    return str(files("aim_tutorial") / "data" / name)


def _column(values: list) -> np.ndarray:
    try:
        return np.array([float(v) for v in values], dtype=float)
    except ValueError:
        return np.array(values, dtype=str)


def read(path: str, *, verify: bool = True) -> DataFile:
    """Read a table (``.csv``) or a document (``.json``) written by this module.

    ``path`` is a file path, or the name of a file in ``aim_tutorial/data`` (:func:`packaged`).
    With ``verify`` (the default) a table must end with a newline and hold the number of rows its
    header states; anything else (truncated, hand-edited, another format) raises ``ValueError``
    naming the file.
    """
    path = os.fspath(path) if not isinstance(path, str) else path
    verify = _checks.boolean("verify", verify)
    if isinstance(path, str) and os.sep not in path and not os.path.exists(path):
        path = packaged(path)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a data file written by aim_tutorial (not UTF-8 text)") from None
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
            header, content = doc["header"], doc["content"]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a document written by aim_tutorial.datafiles ({e!r})") from None
        _check_header(path, header)
        return DataFile(header, None, content, path)
    if verify and raw and not raw.endswith(b"\n"):
        raise ValueError(f"{path}: truncated (its last line is incomplete); rewrite it")
    header: dict = {"notes": []}
    body = []
    for line in text.splitlines():
        if line.startswith("#"):
            key, _, value = line[1:].strip().partition(": ")
            if key == MAGIC:
                header["title"] = value
            elif key == "note":
                header["notes"].append(value)
            elif key in KEYS:
                try:
                    header[key] = json.loads(value)
                except ValueError:
                    raise ValueError(f"{path}: its header line '{key}' is not JSON: {value!r}") from None
            else:
                raise ValueError(f"{path}: unknown header line {line!r}")
        elif line.strip():
            body.append(line)
    if "title" not in header or not body:
        raise ValueError(f"{path}: not a table written by aim_tutorial.datafiles (no '# {MAGIC}:' line, "
                         "or no column line)")
    _check_header(path, header)
    rows = list(csv.reader(body))
    names, data = rows[0], rows[1:]
    bad = [i for i, r in enumerate(data) if len(r) != len(names)]
    if bad:
        raise ValueError(f"{path}: data line {bad[0] + 1} has {len(data[bad[0]])} fields, the column line "
                         f"{len(names)}: a damaged file")
    if verify and header["rows"] != len(data):
        raise ValueError(f"{path}: truncated or incomplete: its header states {header['rows']} rows, it holds "
                         f"{len(data)}")
    cols = [_column([r[j] for r in data]) for j in range(len(names))]
    table = np.rec.fromarrays(cols, names=names) if data else np.rec.fromarrays(
        [np.zeros(0) for _ in names], names=names)
    return DataFile(header, table, None, path)


def _check_header(path: str, header) -> None:
    if not isinstance(header, dict):
        raise ValueError(f"{path}: its header is not an object")
    missing = [k for k in KEYS if k not in header and not (k == "rows" and path.endswith(".json"))]
    if missing:
        raise ValueError(f"{path}: its header lacks {missing} (written by an older aim_tutorial?)")
