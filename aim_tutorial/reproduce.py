"""Regenerate the figures of the paper and of the book, at three scales.

``python -m aim_tutorial reproduce FIGURE --scale smoke|book|paper [--out DIR]``
computes the data of one figure (or ``all``) with the package's public
functions, writes it to ``DIR/FIGURE.csv`` (a CSV whose commented header holds
the parameters, the seed, the scale, the package and JAX versions and the
device) and draws it to ``DIR/FIGURE.png`` and ``DIR/FIGURE.pdf``; ``DIR/FIGURE.manifest.json`` ties
the three together (figure, scale, seed, versions, command, start and end times, the SHA-256 of each
file and the CSV's row count). ``python -m aim_tutorial reproduce --list`` lists the figures.

No lost results:

* every argument (figure, scale, seed, ``--out``) is checked before the computation, which may take
  hours; a bad one exits with status 2 and a one-line message;
* the four files are written under temporary names in ``DIR`` and renamed into place together once
  all are complete, the manifest last (a Ctrl-C is held during the renames; a failed rename puts the
  previous files back): a fault or a Ctrl-C leaves the previous complete set, and no temporary file;
* the CSV states its row count in its header, and :func:`read_data` checks it and, when the manifest
  is there, the SHA-256: a truncated or mismatched file is refused with an error naming it;
* the files of another run (another scale or seed) of the same figure are not overwritten without
  ``--force`` (``force=True``); a rerun with the same scale and seed rewrites them (same numbers).

The sizes of every figure at every scale live in
``aim_tutorial.config._SIZES["reproduce"]``: ``smoke`` runs in seconds (it only
checks that the code runs), ``book`` uses the sizes of the rendered book,
``paper`` the sizes of the paper (``d = 200``, 32 initialisations), meant for
one GPU, which JAX uses automatically when one is attached; it also runs,
slower, on a CPU.

The command line keeps the compiled programs in JAX's persistent compilation cache
(:func:`aim_tutorial.config.compilation_cache`; ``--no-compile-cache`` turns it off): a sweep
compiles a program for every ``n = alpha d^2`` it meets, and a second run with the same sizes (another
``--seed``) reads them instead (the benchmarks page gives the times).

The figures:

========================  ==============================================================
``softmax-se``            Bayes-optimal error of softmax attention for several ``T``,
                          against ``alpha`` and against ``alpha (T^2 + T - 2)`` (chapter 4)
``hardmax-se``            hardmax, ``T = 2``: the exact score and the published one (chapter 4)
``hardmax-rescaled``      hardmax against ``alpha / rho`` for several ``rho`` (chapter 4)
``amp-se``                GAMP-RIE at finite ``d`` against state evolution, softmax (chapter 5)
``amp-hardmax``           GAMP-RIE with the exact hardmax score against both SE curves (chapter 5)
``gd-single``             single gradient-descent students against the MMSE (chapter 6)
``gd-averaged``           students averaged over initialisations against the MMSE (chapter 6)
``deep``                  two-layer students on deep attention, error per layer (chapter 7)
``causal``                GAMP-RIE on causal-softmax data against its state evolution (chapter 8)
========================  ==============================================================

The gradient-descent and deep figures run the same experiment as
``scripts/gd_paper_data.py`` and ``scripts/deep_gd_data.py`` (which write the
data files the chapters ship), through the same runners of one instance
(:mod:`aim_tutorial.experiments`, re-exported here) and the same key scheme, so that the
two agree when the sizes agree. The four files of a run are written together by the
private ``_runfiles.py``.

Example:
    >>> from aim_tutorial import reproduce
    >>> "softmax-se" in reproduce.list_figures()
    True
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import platform
import sys
import time
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from . import _checks
# the figures' computations and plots (and _key, _amp_options: the benchmarks read them here)
from ._figures import (_amp_options, _compute_amp_hardmax, _compute_amp_se, _compute_causal,  # noqa: F401
                       _compute_deep, _compute_gd, _compute_hardmax_rescaled, _compute_hardmax_se,
                       _compute_softmax_se, _key, _plot_amp, _plot_deep, _plot_gd, _plot_hardmax_rescaled,
                       _plot_hardmax_se, _plot_softmax_se)
from ._runfiles import HeldInterrupt, ResultsExistError, read_manifest
from ._runfiles import Staging as _Staging
from ._runfiles import check_out as _check_out
from ._runfiles import check_overwrite as _check_overwrite
from ._runfiles import manifest_path as _manifest_path
from ._runfiles import run_paths as _paths
from ._runfiles import prepare_out as _prepare_out
from ._runfiles import remove_created as _remove_created
from ._runfiles import sha256 as _sha256
from ._runfiles import write_to as _write_to
from .config import SCALES, _SIZES, compilation_cache
# the runners of one instance, re-exported: scripts/ and chapter 6 import them from here
from .experiments import (SAME_INSTANCE_SEED, amp_run, amp_runs, deep_data_set,  # noqa: F401
                          gd_amp_data_set, gd_data_set, same_instance_key)

__all__ = ["FIGURES", "FigureData", "FigureSpec", "HeldInterrupt", "ReproduceResult", "ResultsExistError",
           "SEED_MAX", "compute_figure", "figure_sizes", "list_figures", "plot_figure", "read_data",
           "read_manifest", "reproduce", "write_data"]


class FigureData(NamedTuple):
    """The data of one figure: a table and the parameters that produced it.

    Attributes:
        name: the figure's name (a key of :data:`FIGURES`).
        columns: column names.
        rows: a 2-d float array, one row a point (categorical columns are coded as numbers,
            the code being stated in ``params``).
        params: every parameter of the computation (sizes, seed, scale, ...), JSON-serialisable.
    """

    name: str
    columns: tuple
    rows: np.ndarray
    params: dict

    def column(self, col: str) -> np.ndarray:
        """One column by name."""
        return self.rows[:, self.columns.index(col)]


class FigureSpec(NamedTuple):
    """A figure that :func:`reproduce` knows how to make."""

    name: str
    summary: str
    source: str
    compute: Callable
    plot: Callable


class ReproduceResult(NamedTuple):
    """What :func:`reproduce` wrote."""

    data: FigureData
    csv: str
    png: str
    pdf: str
    seconds: float


_SIZE_KEY = {"gd-single": "gd", "gd-averaged": "gd"}  # one experiment, two figures


def figure_sizes(name: str, scale: str) -> dict:
    """The sizes of figure ``name`` at ``scale`` (from ``config._SIZES["reproduce"]``)."""
    name = _checks.one_of("figure", name, tuple(FIGURES))
    scale = _checks.one_of("scale", scale, SCALES)
    return dict(_SIZES["reproduce"][scale][_SIZE_KEY.get(name, name)])


# --------------------------------------------------------------------------- registry

FIGURES = {
    f.name: f
    for f in (
        FigureSpec("softmax-se", "Bayes-optimal error of softmax attention, T = 2..6, and its collapse",
                   "paper: softmax state evolution; chapter 4", _compute_softmax_se, _plot_softmax_se),
        FigureSpec("hardmax-se", "hardmax T = 2: state evolution with the exact and the published score",
                   "paper: hardmax state evolution; chapter 4", _compute_hardmax_se, _plot_hardmax_se),
        FigureSpec("hardmax-rescaled", "hardmax T = 2 against alpha / rho for several rho (exact score)",
                   "paper: hardmax against alpha / rho; chapter 4", _compute_hardmax_rescaled,
                   _plot_hardmax_rescaled),
        FigureSpec("amp-se", "GAMP-RIE at finite d against state evolution, softmax T = 2",
                   "paper: GAMP-RIE markers, softmax; chapter 5", _compute_amp_se, _plot_amp),
        FigureSpec("amp-hardmax", "GAMP-RIE with the exact hardmax score against both SE curves",
                   "paper: GAMP-RIE markers, hardmax; chapter 5", _compute_amp_hardmax, _plot_amp),
        FigureSpec("gd-single", "single gradient-descent students (Adam) against the MMSE",
                   "paper: gradient descent, single students; chapter 6", _compute_gd,
                   functools.partial(_plot_gd, which="single")),
        FigureSpec("gd-averaged", "students averaged over initialisations against the MMSE, T = 2..",
                   "paper: gradient descent, averaged students; chapter 6", _compute_gd,
                   functools.partial(_plot_gd, which="averaged")),
        FigureSpec("deep", "two-layer students on deep attention: error per layer",
                   "book only (the paper has L = 1); chapter 7", _compute_deep, _plot_deep),
        FigureSpec("causal", "GAMP-RIE on causal-softmax data against its state evolution, T = 3",
                   "book only (the paper has no mask); chapter 8", _compute_causal, _plot_amp),
    )
}


def list_figures() -> list:
    """Names of the figures :func:`reproduce` can make, in order."""
    return list(FIGURES)


# --------------------------------------------------------------------------- arguments

SEED_MAX = 2**32 - 1
"""The largest seed. ``jax.random.key`` takes a 64-bit integer, but with 32-bit JAX it keeps only
the low 32 bits (``2**32`` gives the key of ``0``) and it maps negative seeds onto large ones; seeds in
``[0, 2**32 - 1]`` give distinct keys, the same with and without ``jax_enable_x64``."""


def _check_seed(seed) -> int:
    """``seed`` an integer in ``[0, SEED_MAX]`` (bools, floats and strings rejected)."""
    seed = _checks.integer_at_least("seed", seed, 0)
    if seed > SEED_MAX:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1], got {seed!r}")
    return seed


# --------------------------------------------------------------------------- the data file's header


def _command(name: str, scale: str, seed: int) -> str:
    return f"python -m aim_tutorial reproduce {name} --scale {scale} --seed {seed}"


def _header(data: FigureData, scale: str, seed: int) -> dict:
    """The data file's header (:mod:`aim_tutorial.datafiles`): title, command, versions, seed, params."""
    from . import datafiles

    spec = FIGURES[data.name]
    return datafiles.make_header(f"{data.name}: {spec.summary}", command=_command(data.name, scale, seed),
                                 seed=seed, params=data.params, notes=[f"source: {spec.source}"])


# --------------------------------------------------------------------------- public functions


def compute_figure(name: str, scale: str = "smoke", seed: int = 0, progress: bool = False) -> FigureData:
    """Compute the data of figure ``name`` at ``scale`` (no files written).

    Args:
        name: one of :func:`list_figures`.
        scale: ``"smoke"``, ``"book"`` or ``"paper"``.
        seed: root of every random key (``jax.random.key(seed)`` folded per point), an integer
            in ``[0, 2**32 - 1]`` (:data:`SEED_MAX`).
        progress: show ``tqdm`` progress bars.

    Returns:
        :class:`FigureData`.
    """
    name = _checks.one_of("figure", name, tuple(FIGURES))
    scale = _checks.one_of("scale", scale, SCALES)
    seed = _check_seed(seed)
    sz = figure_sizes(name, scale)
    cols, rows, params = FIGURES[name].compute(sz, seed, bool(progress))
    params = dict(params, scale=scale, seed=seed)
    return FigureData(name, tuple(cols), np.asarray(rows, dtype=float).reshape(-1, len(cols)), params)


def _write_csv(f, data: FigureData, scale: str, seed: int) -> None:
    """The CSV text of ``data`` (a :mod:`aim_tutorial.datafiles` table) to the open file ``f``."""
    from . import datafiles

    columns = {c: data.rows[:, i] for i, c in enumerate(data.columns)}
    f.write(datafiles.table_text(columns, _header(data, scale, seed), fmt=".10g"))


def write_data(data: FigureData, path: str, scale: str, seed: int) -> None:
    """Write ``data`` as a CSV with a commented header (parameters, seed, row count, versions, device).

    The file is written under a temporary name in the same directory and renamed onto ``path``
    only once complete: ``path`` holds either its previous content or the whole new file.
    """
    path = os.fspath(path)
    with _Staging(os.path.dirname(path) or ".") as st:
        _write_to(st.new(path), "w", lambda f: _write_csv(f, data, scale, seed))
        st.commit()


def read_data(path: str, *, verify: bool = True) -> FigureData:
    """Read a file written by :func:`write_data` back into a :class:`FigureData`.

    The file must be complete (:func:`aim_tutorial.datafiles.read`: it ends with a newline and holds
    the number of rows its header states) and, when a manifest ``FIGURE.manifest.json`` lies beside it
    (written by :func:`reproduce`), match the row count and the SHA-256 the manifest records. A file
    that fails (truncated by a fault, written by an interrupted run, edited by hand) raises
    ``ValueError`` naming it. ``verify=False`` skips these checks (to inspect such a file).
    """
    import hashlib

    from . import datafiles

    path = os.fspath(path)
    verify = _checks.boolean("verify", verify)
    f = datafiles.read(path, verify=verify)
    name = f.header["title"].split(":")[0]
    if f.table is None or name not in FIGURES:
        raise ValueError(f"{path}: not a CSV written by aim_tutorial.reproduce (its title names no figure)")
    cols = f.columns
    rows = np.column_stack([np.asarray(f.table[c], dtype=float) for c in cols]).reshape(-1, len(cols))
    man = _manifest_path(path)
    if verify and os.path.exists(man):
        try:
            with open(man, encoding="utf-8") as fm:
                entry = json.load(fm)["files"]["csv"]
            want_sha, want_rows, want_name = entry["sha256"], int(entry["rows"]), entry["name"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: its manifest {man} cannot be read ({e!r})") from None
        if want_name != os.path.basename(path):
            raise ValueError(f"{path}: its manifest {man} describes {want_name}, not this file")
        with open(path, "rb") as fb:
            raw = fb.read()
        if hashlib.sha256(raw).hexdigest() != want_sha or want_rows != len(rows):
            raise ValueError(
                f"{path} does not match its manifest {man} (SHA-256 or row count differ: "
                f"{len(rows)} rows, {want_rows} recorded): an incomplete or interrupted write, or an "
                "edit; rerun the figure to rewrite both (read_data(..., verify=False) reads it anyway)"
            )
    return FigureData(name, cols, rows, f.header["params"])


def plot_figure(data: FigureData):
    """Draw ``data`` on a new :class:`matplotlib.figure.Figure` (no pyplot, any backend)."""
    from matplotlib.figure import Figure

    from .plotting import use_style

    use_style()
    wide = data.name == "softmax-se"
    fig = Figure(figsize=(9.0, 3.6) if wide else (6.0, 3.8), layout="constrained")
    FIGURES[data.name].plot(data, fig)
    return fig


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _write_set(data: FigureData, out: str, scale: str, seed: int, started: str) -> dict:
    """Write the CSV, PNG, PDF and manifest of one run: all under temporary names, then renamed."""
    import jax

    from . import __version__

    paths = _paths(out, data.name)
    with _Staging(out) as st:
        tmp = {k: st.new(paths[k]) for k in ("csv", "png", "pdf", "manifest")}  # renamed in this order
        _write_to(tmp["csv"], "w", lambda f: _write_csv(f, data, scale, seed))
        fig = plot_figure(data)
        _write_to(tmp["png"], "wb", lambda f: fig.savefig(f, format="png"))
        _write_to(tmp["pdf"], "wb", lambda f: fig.savefig(f, format="pdf"))
        dev = jax.devices()[0]
        manifest = {
            "manifest": "aim_tutorial reproduce",
            "manifest_version": 1,
            "figure": data.name,
            "scale": scale,
            "seed": seed,
            "aim_tutorial": __version__,
            "jax": jax.__version__,
            "device": f"{dev.platform} ({dev.device_kind})",
            "python": platform.python_version(),
            "command": _command(data.name, scale, seed),
            "started": started,
            "finished": _utc_now(),
            "files": {
                k: {"name": os.path.basename(paths[k]), "sha256": _sha256(tmp[k]),
                    "bytes": os.path.getsize(tmp[k])}
                for k in ("csv", "png", "pdf")
            },
        }
        manifest["files"]["csv"]["rows"] = int(len(data.rows))
        manifest["files"]["csv"]["columns"] = list(data.columns)
        _write_to(tmp["manifest"], "w", lambda f: f.write(json.dumps(manifest, indent=2) + "\n"))
        st.commit()
    return manifest


def reproduce(name: str, scale: str = "smoke", out: str = "reproduced", seed: int = 0,
              progress: bool = False, *, force: bool = False) -> ReproduceResult:
    """Compute figure ``name`` at ``scale`` and write ``out/name.{csv,png,pdf}`` and ``.manifest.json``.

    Every argument is checked, and ``out`` created and tried, before the computation starts.
    The four files are written under temporary names in ``out`` and renamed into place together,
    the manifest (figure, scale, seed, versions, command, start and end times, the SHA-256 of each
    file, the CSV's row count) last, once all are complete: an error or a Ctrl-C leaves the
    previous set as it was and no temporary file behind.

    Args:
        name: one of :func:`list_figures`.
        scale: ``"smoke"`` (seconds), ``"book"`` (the book's sizes) or ``"paper"`` (the paper's; a GPU).
        out: output directory (created if needed; not ``''``, not an existing file).
        seed: root of every random key, an integer in ``[0, 2**32 - 1]``.
        progress: show ``tqdm`` progress bars.
        force: replace the files of another run (another scale or seed) of this figure in ``out``;
            without it they raise :class:`ResultsExistError` (before computing). A rerun with the
            same scale and seed replaces its files without ``force``: it reproduces the same numbers.

    Returns:
        :class:`ReproduceResult` with the data and the paths written.

    Example:
        >>> import tempfile
        >>> from aim_tutorial.reproduce import reproduce
        >>> r = reproduce("softmax-se", "smoke", out=tempfile.mkdtemp())
        >>> r.csv.endswith("softmax-se.csv")
        True
    """
    t0 = time.perf_counter()
    started = _utc_now()
    name = _checks.one_of("figure", name, tuple(FIGURES))
    scale = _checks.one_of("scale", scale, SCALES)
    seed = _check_seed(seed)
    force = _checks.boolean("force", force)
    out = _check_out(out)
    if os.path.isdir(out):
        _check_overwrite(out, name, scale, seed, force)
    created = _prepare_out(out)
    try:
        data = compute_figure(name, scale, seed, progress)
        _write_set(data, out, scale, seed, started)
    except BaseException:
        _remove_created(created)
        raise
    paths = _paths(out, data.name)
    return ReproduceResult(data, paths["csv"], paths["png"], paths["pdf"], time.perf_counter() - t0)


# --------------------------------------------------------------------------- command line


def _seed_arg(text: str) -> int:
    import argparse

    try:
        return _check_seed(int(text, 10))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**32 - 1], got {text!r}") from None


def _parser():
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m aim_tutorial",
        description="Companion package of the aim-tutorial book. Subcommand: reproduce.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser(
        "reproduce",
        help="regenerate a figure of the paper or the book",
        description="Regenerate a figure of the paper or of the book: writes DIR/FIGURE.csv "
        "(data, with parameters, seed, row count and versions in its header), DIR/FIGURE.png, DIR/FIGURE.pdf "
        "and DIR/FIGURE.manifest.json (scale, seed, command, times and the SHA-256 of each file). "
        "The files are renamed into place together once all are written: an interrupted run leaves "
        "the previous ones as they were.",
    )
    r.add_argument("figure", nargs="*", help="figure name(s), or 'all'; see --list")
    r.add_argument("--list", action="store_true", help="list the figures and exit")
    r.add_argument("--scale", default="smoke", help="smoke (seconds), book (minutes), paper (one GPU)")
    r.add_argument("--out", default="reproduced", help="output directory (default: ./reproduced)")
    r.add_argument("--seed", type=_seed_arg, default=0,
                   help="root of every random key, an integer in [0, 2**32 - 1] (default 0)")
    r.add_argument("--force", action="store_true",
                   help="replace another run's results (another scale or seed) in DIR; without it they are "
                   "kept and the command stops before computing (the same scale and seed are rewritten)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")
    r.add_argument("--no-compile-cache", action="store_true",
                   help="do not turn on JAX's persistent compilation cache (by default the compiled programs "
                   "are kept in JAX_COMPILATION_CACHE_DIR, else ~/.cache/aim_tutorial/jax, and a later run "
                   "reads them; a JAX_COMPILATION_CACHE_DIR in the environment still turns it on)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of ``python -m aim_tutorial``; returns the exit status.

    Every argument is checked before anything is computed; a bad one exits with status 2 and a
    one-line message. An interrupted run (Ctrl-C) exits with status 130, a failed write with 1,
    leaving the previous files of the figure being written as they were.
    """
    p = _parser()
    a = p.parse_args(argv)
    if a.list:
        width = max(map(len, FIGURES))
        for f in FIGURES.values():
            print(f"{f.name:<{width}}  {f.summary}  [{f.source}]")
        return 0
    if not a.figure:
        p.error("reproduce: give a figure name (or 'all'), or --list")
    names = list(FIGURES) if a.figure == ["all"] else list(dict.fromkeys(a.figure))
    try:
        _checks.one_of("scale", a.scale, SCALES)
        for name in names:
            _checks.one_of("figure", name, tuple(FIGURES))
        out = _check_out(a.out)
        if os.path.isdir(out):
            for name in names:
                _check_overwrite(out, name, a.scale, a.seed, a.force)
        created = _prepare_out(out)
    except (ValueError, ResultsExistError) as e:
        p.error(str(e))
    done, name = [], names[0]
    try:
        import jax

        if not a.no_compile_cache:
            print(f"compilation cache: {compilation_cache()}", flush=True)
        print(f"devices: {jax.devices()}", flush=True)
        for name in names:
            res = reproduce(name, a.scale, out, a.seed, progress=not a.no_progress, force=a.force)
            done.append(name)
            print(f"{name}: {len(res.data.rows)} rows in {res.seconds:.1f} s -> {res.csv}, {res.png}, "
                  f"{res.pdf}", flush=True)
    except HeldInterrupt:  # Ctrl-C during the renames: held until the set was complete
        done.append(name)
        print(f"\ninterrupted after {name} was written (written: {', '.join(done)})", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        _remove_created(created if not done else [])
        print(f"\ninterrupted during {name}: its previous files in {out} are as they were"
              + (f" (written: {', '.join(done)})" if done else ""), file=sys.stderr)
        return 130
    except OSError as e:
        _remove_created(created if not done else [])
        print(f"error: {e}; the previous files of {name} are untouched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
