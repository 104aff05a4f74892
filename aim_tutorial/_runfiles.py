"""The files of one run of a figure, written as one transaction (private module of :mod:`aim_tutorial.reproduce`).

A run of ``python -m aim_tutorial reproduce`` writes four files, ``FIGURE.csv``, ``.png``, ``.pdf`` and
``.manifest.json``; this module makes them one set:

- the output directory is checked before anything is computed (:func:`check_out`), then created and
  tried (:func:`prepare_out`; :func:`remove_created` takes back what it created);
- the files of another run (another scale or seed) are not overwritten unless forced
  (:func:`existing_run`, :func:`check_overwrite`, :class:`ResultsExistError`);
- the files are written under temporary names in their directory and renamed into place together
  (:class:`Staging`), with a Ctrl-C held until the last rename (:class:`DeferInterrupt`, then
  :class:`HeldInterrupt`) and the replaced files put back from hard links if a rename fails;
- the manifest records each file's SHA-256 (:func:`sha256`), and :func:`read_manifest` checks the set.

Its names have no leading underscore because :mod:`aim_tutorial.reproduce` imports them (no module
imports another module's ``_private`` names); the public ones (:class:`HeldInterrupt`,
:class:`ResultsExistError`, :func:`read_manifest`) are exported by :mod:`aim_tutorial.reproduce`.
"""

from __future__ import annotations

import json
import os
from typing import Callable, Optional

from . import _checks

__all__ = ["DeferInterrupt", "HeldInterrupt", "ResultsExistError", "Staging", "check_out", "check_overwrite",
           "existing_run", "fsync_dir", "manifest_path", "new_temp", "prepare_out", "read_header",
           "read_manifest", "remove_created", "run_paths", "sha256", "write_to"]


# --------------------------------------------------------------------------- the output directory


def check_out(out) -> str:
    """``out`` a directory that exists and is writable, or that can be created; nothing is created.

    Refused: ``''``, an existing file that is not a directory, a path under a file (``/dev/null/x``),
    a broken symbolic link, a directory this process cannot write in.
    """
    if isinstance(out, bytes) or not isinstance(out, (str, os.PathLike)):
        raise _checks.ArgumentTypeError(f"out must be a directory path (a str), got {out!r}")
    out = os.fspath(out)
    if not isinstance(out, str):
        raise _checks.ArgumentTypeError(f"out must be a directory path (a str), got {out!r}")
    if out == "" or "\0" in out:
        raise ValueError(f"out must be a directory path, got {out!r}")
    if os.path.exists(out):
        if not os.path.isdir(out):
            raise ValueError(f"out: {out!r} exists and is not a directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise ValueError(f"out: cannot write in the directory {out!r} (permission denied)")
        return out
    p = os.path.abspath(out)
    while not os.path.exists(p):
        if os.path.lexists(p):
            raise ValueError(f"out: {p!r} is a broken symbolic link")
        parent = os.path.dirname(p)
        if parent == p:  # pragma: no cover - the root always exists
            break
        p = parent
    if not os.path.isdir(p):
        raise ValueError(f"out: cannot create {out!r}: {p!r} is not a directory")
    if not os.access(p, os.W_OK | os.X_OK):
        raise ValueError(f"out: cannot create {out!r}: no permission to write in {p!r}")
    return out


def prepare_out(out: str) -> list:
    """Create ``out`` (checked by :func:`check_out`) and prove that a file can be written in it.

    Returns the directories created (deepest last), for :func:`remove_created` on failure.
    Raises ``ValueError`` when the directory cannot be created or written (a read-only file
    system, a quota, a race with another process).
    """
    created = []
    p = os.path.abspath(out)
    missing = []
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:  # pragma: no cover
            break
        p = parent
    try:
        for d in reversed(missing):
            os.mkdir(d)
            created.append(d)
        path = new_temp(out, ".write-probe")
        os.remove(path)
    except OSError as e:
        remove_created(created)
        raise ValueError(f"out: cannot write in {out!r}: {e.strerror or e}") from None
    return created


def remove_created(created: list) -> None:
    """Remove the directories :func:`prepare_out` created, if they are still empty."""
    for d in reversed(created):
        try:
            os.rmdir(d)
        except OSError:
            break


# --------------------------------------------------------------------------- the files of one run


def run_paths(out: str, name: str) -> dict:
    """The four files of figure ``name`` in ``out``."""
    base = os.path.join(out, name)
    return {"csv": base + ".csv", "png": base + ".png", "pdf": base + ".pdf",
            "manifest": base + ".manifest.json"}


def read_header(path: str) -> dict:
    """The header of a CSV written by :func:`aim_tutorial.reproduce.write_data` (read without its checks)."""
    from . import datafiles

    return datafiles.read(path, verify=False).header


def existing_run(out: str, name: str) -> Optional[dict]:
    """What the files of figure ``name`` already in ``out`` say about the run that wrote them.

    ``None`` when there are none; else a dict with ``scale`` and ``seed`` (``None`` when the
    files cannot tell) and ``source``, the file that told.
    """
    paths = run_paths(out, name)
    present = [p for p in paths.values() if os.path.lexists(p)]
    if not present:
        return None
    for p in present:
        if os.path.isdir(p):
            raise ValueError(f"out: {p!r} is a directory; a figure file cannot be written there")
    man = paths["manifest"]
    if os.path.lexists(man):
        try:
            with open(man, encoding="utf-8") as f:
                m = json.load(f)
            return dict(scale=m["scale"], seed=m["seed"], figure=m.get("figure", name), source=man)
        except (OSError, ValueError, KeyError, TypeError):
            return dict(scale=None, seed=None, figure=None, source=man, why="unreadable manifest")
    if os.path.lexists(paths["csv"]):
        try:
            h = read_header(paths["csv"])
            return dict(scale=h["params"]["scale"], seed=int(h["seed"]), figure=name, source=paths["csv"])
        except (OSError, ValueError, KeyError):
            return dict(scale=None, seed=None, figure=None, source=paths["csv"],
                        why="no scale and seed in it")
    return dict(scale=None, seed=None, figure=None, source=present[0], why="no CSV or manifest beside it")


class ResultsExistError(FileExistsError):
    """The output directory holds another run's results for this figure (pass ``force=True``)."""


def check_overwrite(out: str, name: str, scale: str, seed: int, force: bool) -> None:
    """Refuse to replace the files of another run (another scale or seed) unless ``force``.

    The same figure, scale and seed may be rewritten: it reproduces the same numbers (with,
    perhaps, a newer version of the package, which the new manifest records).
    """
    old = existing_run(out, name)
    if old is None or force:
        return
    if old["scale"] == scale and old["seed"] == seed and old["figure"] == name:
        return
    if old["scale"] is None:
        what = f"files of an unknown run ({old['why']}: {old['source']})"
    else:
        what = f"another run's results (scale {old['scale']}, seed {old['seed']}, from {old['source']})"
    raise ResultsExistError(
        f"{os.path.join(out, name)}.* hold {what}, not those of this run (scale {scale}, seed {seed}): "
        "refusing to overwrite them; pass --force (force=True) to replace them, or choose another --out"
    )


# --------------------------------------------------------------------------- writing them together


def new_temp(directory: str, suffix: str) -> str:
    """Create an empty temporary file in ``directory`` (mode 0666 less the umask, like ``open``)."""
    import secrets

    for _ in range(100):
        path = os.path.join(directory, f".{suffix.lstrip('.')}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        os.close(fd)
        return path
    raise FileExistsError(f"cannot create a temporary file in {directory!r}")  # pragma: no cover


def fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - not on every platform
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class HeldInterrupt(KeyboardInterrupt):
    """A Ctrl-C held while a complete set of files was renamed into place, raised once it was."""


class DeferInterrupt:
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it: the renames are not cut in half."""

    def __enter__(self):
        import signal
        import threading

        self.got, self.prev = None, None
        # only in the main thread, and only over a handler set from Python (one that can be put back)
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is not None:
            try:
                self.prev = signal.signal(signal.SIGINT, self._hold)
            except (ValueError, OSError):  # pragma: no cover - no signals here
                self.prev = None
        return self

    def _hold(self, signum, frame):
        self.got = (signum, frame)

    def __exit__(self, *exc):
        import signal

        if self.prev is not None:
            signal.signal(signal.SIGINT, self.prev)
        if self.got is not None and exc[0] is None:
            if self.prev is signal.default_int_handler or self.prev == signal.SIG_DFL:
                raise HeldInterrupt
            if callable(self.prev):
                self.prev(*self.got)
        return False


class Staging:
    """Files written under temporary names in their final directory, renamed into place together.

    ``new(final)`` creates a temporary file for ``final``; ``commit()`` renames every temporary onto
    its final name, in the order they were made (the manifest last), with Ctrl-C held until the last
    rename; if a rename fails the files already replaced are put back (from hard links made just
    before). Leaving the ``with`` block without ``commit()`` (an error, a ``KeyboardInterrupt``)
    removes the temporaries: the previous files are never touched.
    """

    def __init__(self, directory: str):
        self.directory = directory
        self.files = []  # (temporary, final)

    def __enter__(self):
        return self

    def new(self, final: str) -> str:
        tmp = new_temp(self.directory, os.path.basename(final))
        self.files.append((tmp, final))
        return tmp

    def commit(self) -> None:
        with DeferInterrupt():
            done, backups = [], []
            try:
                for tmp, final in self.files:
                    existed, backup = os.path.lexists(final), None
                    if existed:
                        backup = new_temp(self.directory, os.path.basename(final) + ".old")
                        os.remove(backup)
                        try:
                            os.link(final, backup, follow_symlinks=False)
                            backups.append(backup)
                        except OSError:  # a file system without hard links: no way back for this one
                            backup = None
                    os.replace(tmp, final)
                    done.append((final, existed, backup))
            except BaseException:
                for final, existed, backup in reversed(done):  # put the previous files back
                    try:
                        if backup is not None:
                            os.replace(backup, final)
                        elif not existed:
                            os.remove(final)
                        # else: the new file stays; the previous manifest, kept, no longer matches it
                    except OSError:  # pragma: no cover - the manifest check still catches it
                        pass
                raise
            finally:
                for b in backups:
                    try:
                        os.remove(b)
                    except OSError:
                        pass
            self.files = []
            fsync_dir(self.directory)

    def __exit__(self, *exc):
        for tmp, _ in self.files:
            try:
                os.remove(tmp)
            except OSError:
                pass
        self.files = []
        return False


def sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_to(tmp: str, mode: str, writer: Callable) -> None:
    """Open ``tmp``, let ``writer(f)`` fill it, and flush it to the disk."""
    with open(tmp, mode, **({"encoding": "utf-8", "newline": "\n"} if "b" not in mode else {})) as f:
        writer(f)
        f.flush()
        os.fsync(f.fileno())


# --------------------------------------------------------------------------- the manifest


def manifest_path(csv_path: str) -> str:
    stem = csv_path[:-4] if csv_path.endswith(".csv") else csv_path
    return stem + ".manifest.json"


def read_manifest(out: str, name: str, *, verify: bool = True) -> dict:
    """The manifest of figure ``name`` in directory ``out`` (``FileNotFoundError`` if there is none).

    With ``verify`` (the default), every file it lists (CSV, PNG, PDF) must be there with the
    SHA-256 it records, else ``ValueError`` naming the file: the set is one run's, complete.
    """
    out = os.fspath(out)
    verify = _checks.boolean("verify", verify)
    man = run_paths(out, name)["manifest"]
    with open(man, encoding="utf-8") as f:
        try:
            m = json.load(f)
        except ValueError as e:
            raise ValueError(f"{man}: not a readable manifest ({e})") from None
    if verify:
        try:
            files = [(e["name"], e["sha256"]) for e in m["files"].values()]
            if any(not isinstance(f, str) or f != os.path.basename(f) or f in ("", ".", "..")
                   for f, _ in files):
                raise TypeError
        except (KeyError, TypeError, AttributeError):
            raise ValueError(f"{man}: not a manifest written by aim_tutorial.reproduce") from None
        for fname, sha in files:
            path = os.path.join(out, fname)
            if not os.path.exists(path):
                raise ValueError(f"{path} is missing: the set of {man} is incomplete")
            if sha256(path) != sha:
                raise ValueError(f"{path} does not match its manifest {man} (SHA-256 differs): an "
                                 "interrupted write or an edit; rerun the figure to rewrite the set")
    return m
