"""One figure style for the whole book: vector output, lowercase labels, no titles.

Every chapter calls :func:`use_style` once in its setup cell and draws with
:func:`subplots`, so that a figure has the same size, fonts and line widths on
every page. The sizes are chosen for the book's text column (about 7.0 in at
96 px/in in the HTML theme): a figure is shown at its natural size, never shrunk,
so its fonts stay at ``font.size``.

The figure kinds that recur in the chapters and in :mod:`aim_tutorial.reproduce` have thin
helpers, each one matplotlib call on a given ``Axes`` that returns its artists and passes any
other keyword on: an error against ``alpha`` is :func:`theory_line` (state evolution) plus
:func:`experiment_points` (finite-``d`` markers with error bars, optionally dodged) plus
:func:`threshold` (vertical lines at ``alpha_PR`` and the like), labelled by :func:`error_axes`;
iteration traces are :func:`traces` (log ``y``, with a :func:`level` for the fixed point); a phase
diagram is :func:`phase_map`.

Example:
    >>> import aim_tutorial as aim
    >>> aim.plotting.use_style()
    >>> fig, ax = aim.plotting.subplots()
    >>> _ = ax.plot([0, 1], [0, 1], label="theory")
    >>> _ = aim.plotting.legend_outside(ax)
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

__all__ = ["ALPHA_LABEL", "COLORS", "STYLE", "error_axes", "experiment_points", "figsize", "legend_outside", "level",
           "phase_map", "subplots", "theory_line", "threshold", "traces", "use_style"]

#: width of the book's text column, in inches (a figure this wide is not shrunk)
COLUMN_WIDTH = 7.0

STYLE = {
    "figure.figsize": (6.0, 3.8),
    "figure.dpi": 110,
    "savefig.dpi": 200,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 11,
    "axes.labelsize": 11,
    "legend.fontsize": 10,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
    "errorbar.capsize": 2.5,
    "svg.hashsalt": "aim-tutorial",  # deterministic ids in the SVG output
    "svg.fonttype": "path",  # text as outlines: the same glyphs in every browser
}

#: colours for theory lines and experiment markers, in order
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


def figsize(ncols: int = 1, nrows: int = 1) -> tuple[float, float]:
    """The book's figure size for a grid of ``nrows x ncols`` panels, in inches.

    One panel is 6.0 x 3.8 in; two or more side by side share the column width,
    each panel at least 2.3 in wide (three fit the column), so nothing is shrunk.
    """
    if not (isinstance(ncols, int) and isinstance(nrows, int)) or ncols < 1 or nrows < 1:
        raise ValueError(f"ncols and nrows must be positive integers, got {ncols!r}, {nrows!r}")
    if ncols == 1:
        return (6.0, 3.8 * nrows)
    height = {2: 3.4, 3: 2.9}.get(ncols, 2.6)
    return (max(COLUMN_WIDTH, 2.4 * ncols), height * nrows)


def subplots(nrows: int = 1, ncols: int = 1, **kwargs):
    """``plt.subplots`` at the book's size (:func:`figsize`), with constrained layout."""
    kwargs.setdefault("figsize", figsize(ncols, nrows))
    kwargs.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, **kwargs)


def legend_outside(target, where: str = "right", **kwargs):
    """A legend outside the data: right of an axes, or below a whole figure.

    Args:
        target: a matplotlib ``Axes`` (legend of its artists) or ``Figure``
            (one legend for the labelled artists of all its axes, duplicates dropped).
        where: ``"right"`` (beside the axes) or ``"below"`` (under the axes or figure).
        **kwargs: passed on to ``legend`` (``ncols``, ``title``, ...).
    """
    if where not in ("right", "below"):
        raise ValueError(f"where must be 'right' or 'below', got {where!r}")
    if isinstance(target, mpl.figure.Figure):
        handles, labels = [], []
        for ax in target.axes:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        kwargs.setdefault("ncols", min(len(labels), 4) or 1)
        return target.legend(handles, labels, loc="outside lower center", **kwargs)
    if where == "right":
        return target.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), **kwargs)
    kwargs.setdefault("ncols", 3)
    return target.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), **kwargs)


def use_style() -> None:
    """Apply the book's matplotlib style and vector (SVG) output in notebooks.

    Call once in a chapter's setup cell. Outside IPython only the style is set.
    """
    mpl.rcParams.update(STYLE)
    mpl.rcParams["axes.prop_cycle"] = mpl.cycler(color=list(COLORS))
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # pragma: no cover - plain Python
        return
    if get_ipython() is not None:
        # SVG for the HTML book; no date in the file, so reruns give the same bytes
        set_matplotlib_formats("svg", metadata={"Date": None})


# --------------------------------------------------------------------------- recurring figure kinds
#
# Thin wrappers over one matplotlib call each: they take an ``Axes``, return the artists, and pass
# every other keyword on to matplotlib, so that a figure cell still reads as matplotlib code.

def _vector(value, name: str) -> np.ndarray:
    """``value`` as a 1-d float array (a number is one point); a ValueError naming ``name`` if not."""
    try:
        arr = np.atleast_1d(np.asarray(value, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {type(value).__name__}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {arr.shape}")
    return arr


def _finite_number(value, name: str) -> float:
    """``value`` (a number, or a 0-d array) as a finite float; a ValueError naming ``name`` if not."""
    if np.ndim(value) != 0 or isinstance(value, (str, bytes, bool)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number, got {value!r}") from None
    if not np.isfinite(out):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return out


def _same_length(x: np.ndarray, y: np.ndarray, name: str) -> None:
    if len(y) != len(x):
        raise ValueError(f"{name} must have one value for each x ({len(x)}), got {len(y)}")


def theory_line(ax, x, y, *, label=None, **kwargs):
    """A theory curve (state evolution, a closed form) as a line, under the markers.

    The line is drawn at ``zorder`` 1.9 (below markers and error bars, above the grid) unless
    ``zorder`` is given, so experiment markers stay visible wherever they are drawn in the cell.

    Args:
        ax: the matplotlib ``Axes``.
        x: the abscissae (1-d).
        y: the curve, one value for each ``x``.
        label: the legend entry (``None``: none).
        **kwargs: passed on to ``ax.plot`` (``color``, ``ls``, ``lw``, ...).

    Returns:
        The ``Line2D``.

    Example:
        >>> import numpy as np
        >>> import aim_tutorial as aim
        >>> fig, ax = aim.plotting.subplots()
        >>> a = np.linspace(0, 0.5, 3)
        >>> line = aim.plotting.theory_line(ax, a, np.clip(1 - 4 * a, 0, None), color="k",
        ...                                 label="state evolution")
        >>> line.get_label(), line.get_ydata().tolist()
        ('state evolution', [1.0, 0.0, 0.0])
        >>> aim.plotting.plt.close(fig)
    """
    x = _vector(x, "x")
    y = _vector(y, "y")
    _same_length(x, y, "y")
    kwargs.setdefault("zorder", 1.9)
    (line,) = ax.plot(x, y, label=label, **kwargs)
    return line


def experiment_points(ax, x, mean, err=None, *, label=None, dodge: float = 0.0, fmt: str = "o", **kwargs):
    """Finite-``d`` experiments as markers with error bars (mean and standard error, or std).

    Drawn with ``ax.errorbar`` also without ``err`` (markers only), so that every series of
    experiment markers is an ``ErrorbarContainer``: the legend lists them after the lines, in the
    order drawn.

    Args:
        ax: the matplotlib ``Axes``.
        x: the abscissae (1-d; a number is one point).
        mean: the value at each ``x`` (mean over runs, or one run).
        err: the error bars: ``None`` (none), one half-length for each point (1-d, e.g. the
            standard error ``std / sqrt(runs)`` or the standard deviation), or a ``(2, n)``
            array of the lengths below and above (e.g. a confidence interval). Not negative.
        label: the legend entry (``None``: none).
        dodge: a horizontal shift added to ``x``, in data units, so that the error bars of
            series at the same ``x`` do not overlap (e.g. ``(-1) ** j * 0.006`` for series
            ``j``); the data are not changed.
        fmt: the marker (and line) format, ``"o"`` by default.
        **kwargs: passed on to ``ax.errorbar`` (``color``, ``mfc``, ``ms``, ``capsize``, ...).

    Returns:
        The ``ErrorbarContainer`` (``.lines[0]`` holds the markers at the dodged ``x``).

    Example:
        >>> import aim_tutorial as aim
        >>> fig, ax = aim.plotting.subplots()
        >>> pts = aim.plotting.experiment_points(ax, [0.1, 0.2], [0.5, 0.2], [0.05, 0.02],
        ...                                      dodge=0.01, label="GAMP-RIE, d = 100")
        >>> pts.get_label(), pts.lines[0].get_xdata().tolist()
        ('GAMP-RIE, d = 100', [0.11, 0.21000000000000002])
        >>> aim.plotting.plt.close(fig)
    """
    x = _vector(x, "x")
    mean = _vector(mean, "mean")
    _same_length(x, mean, "mean")
    if err is not None:
        try:
            err = np.asarray(err, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"err must be numbers, got {type(err).__name__}") from None
        if err.shape not in ((len(x),), (2, len(x))):
            raise ValueError(f"err must have shape ({len(x)},) or (2, {len(x)}), got {err.shape}")
        if np.any(err < 0):
            raise ValueError("err must not be negative (error bars are lengths)")
    dodge = _finite_number(dodge, "dodge")
    return ax.errorbar(x + dodge, mean, yerr=err, fmt=fmt, label=label, **kwargs)


def threshold(ax, x, *, label=None, **kwargs):
    """Vertical dotted line(s) at threshold(s) on the ``x`` axis (e.g. ``alpha_PR``).

    Gray, dotted, 1 pt wide unless ``color``, ``ls`` or ``lw`` are given.

    Args:
        ax: the matplotlib ``Axes``.
        x: one threshold or several.
        label: the legend entry, given to the first line only (``None``: none).
        **kwargs: passed on to ``ax.axvline``.

    Returns:
        The list of ``Line2D``, one for each threshold.

    Example:
        >>> import aim_tutorial as aim
        >>> fig, ax = aim.plotting.subplots()
        >>> lines = aim.plotting.threshold(ax, [0.1875, 0.25], label="perfect recovery")
        >>> [float(ln.get_xdata()[0]) for ln in lines], lines[0].get_linestyle()
        ([0.1875, 0.25], ':')
        >>> aim.plotting.plt.close(fig)
    """
    xs = _vector(x, "x")
    if not np.all(np.isfinite(xs)):
        raise ValueError(f"x must be finite, got {xs.tolist()}")
    kwargs = {"color": "gray", "ls": ":", "lw": 1, **_aliases(kwargs)}
    return [ax.axvline(v, label=label if i == 0 else None, **kwargs) for i, v in enumerate(xs)]


def level(ax, y, *, label=None, **kwargs):
    """A horizontal reference line, e.g. the state-evolution fixed point under iteration traces.

    Gray (``"0.5"``), dotted, 1 pt wide unless ``color``, ``ls`` or ``lw`` are given.

    Args:
        ax: the matplotlib ``Axes``.
        y: the level (a finite number).
        label: the legend entry (``None``: none).
        **kwargs: passed on to ``ax.axhline``.

    Returns:
        The ``Line2D``.

    Example:
        >>> import aim_tutorial as aim
        >>> fig, ax = aim.plotting.subplots()
        >>> aim.plotting.level(ax, 0.37, label="fixed point").get_ydata()[0]
        0.37
        >>> aim.plotting.plt.close(fig)
    """
    y = _finite_number(y, "y")
    kwargs = {"color": "0.5", "ls": ":", "lw": 1, **_aliases(kwargs)}
    return ax.axhline(y, label=label, **kwargs)


def _aliases(kwargs: dict) -> dict:
    """``linestyle``/``linewidth``/``c`` under their short names, so that defaults do not clash."""
    out = dict(kwargs)
    for long, short in (("linestyle", "ls"), ("linewidth", "lw"), ("c", "color")):
        if long in out:
            out[short] = out.pop(long)
    return out


def _traces(values) -> list:
    """``values`` as a list of 1-d float arrays: a 2-d array's rows, or a sequence of 1-d traces."""
    if isinstance(values, (list, tuple)):
        if len(values) and all(np.ndim(v) == 0 for v in values):
            values = [values]                                    # a list of numbers: one trace
        rows = []
        for v in values:
            try:
                r = np.asarray(v, dtype=float)
            except (TypeError, ValueError):
                raise ValueError("values must be traces of numbers") from None
            if r.ndim != 1:
                raise ValueError(f"values must be a sequence of 1-d traces, got one of shape {r.shape}")
            rows.append(r)
    else:
        try:
            arr = np.asarray(values, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"values must be numbers, got {type(values).__name__}") from None
        if arr.ndim not in (1, 2):
            raise ValueError(f"values must be one trace (1-d) or one per row (2-d), got shape {arr.shape}")
        rows = [arr] if arr.ndim == 1 else list(arr)
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("values must hold at least one non-empty trace")
    return rows


def traces(ax, values, x=None, *, labels=None, colors=None, logy: bool = True, reference=None,
           reference_label=None, **kwargs):
    """Iteration traces: error or residual against iteration, one line per run or setting.

    Args:
        ax: the matplotlib ``Axes``.
        values: one trace (1-d), one per row (2-d: runs x iterations) or a sequence of 1-d
            traces (their lengths may differ).
        x: the iterations (1-d, as long as every trace); ``None``: ``1, 2, ...`` for each trace.
        labels: one legend entry per trace (``None`` entries allowed), or one string given to the
            first trace only (one entry for a bundle of runs); ``None``: no entries.
        colors: one colour per trace; ``None``: ``color`` in ``kwargs``, or the colour cycle.
        logy: a logarithmic ``y`` axis (the default).
        reference: a horizontal reference level (e.g. the state-evolution fixed point), drawn
            with :func:`level`; ``None``: none.
        reference_label: the legend entry of the reference level.
        **kwargs: passed on to every ``ax.plot`` (``lw``, ``color``, ``ls``, ...).

    Returns:
        The list of ``Line2D``, one per trace, then the reference line when ``reference`` is given.

    Example:
        >>> import numpy as np
        >>> import aim_tutorial as aim
        >>> fig, ax = aim.plotting.subplots()
        >>> runs = np.array([[1.0, 0.5, 0.3], [1.0, 0.2, 0.21]])
        >>> lines = aim.plotting.traces(ax, runs, labels=["theta = 0.5", "adaptive"],
        ...                             reference=0.2, reference_label="state evolution")
        >>> len(lines), ax.get_yscale(), lines[0].get_xdata().tolist()
        (3, 'log', [1, 2, 3])
        >>> aim.plotting.plt.close(fig)
    """
    rows = _traces(values)
    if x is not None:
        x = _vector(x, "x")
        for r in rows:
            if len(r) != len(x):
                raise ValueError(f"x must be as long as every trace ({len(x)}), got a trace of {len(r)}")
    if isinstance(labels, str):
        labels = [labels] + [None] * (len(rows) - 1)
    elif labels is None:
        labels = [None] * len(rows)
    elif len(labels) != len(rows):
        raise ValueError(f"labels must have one entry per trace ({len(rows)}), got {len(labels)}")
    if colors is not None and (isinstance(colors, str) or len(colors) != len(rows)):
        raise ValueError(f"colors must have one colour per trace ({len(rows)}), got {colors!r}")
    lines = []
    for i, (r, lab) in enumerate(zip(rows, labels)):
        kw = dict(kwargs) if colors is None else {**kwargs, "color": colors[i]}
        (line,) = ax.plot(np.arange(1, len(r) + 1) if x is None else x, r, label=lab, **kw)
        lines.append(line)
    if logy:
        ax.set_yscale("log")
    if reference is not None:
        lines.append(level(ax, reference, label=reference_label))
    return lines


#: the default abscissa label of an error figure: the sample complexity alpha, in TeX.
#:
#: :meta hide-value:
ALPHA_LABEL = r"$\alpha$"


def error_axes(ax, xlabel: str = ALPHA_LABEL, ylabel: str = "error", *, logx: bool = False,
               logy: bool = False):
    """Label the axes of an error figure (alpha, :data:`ALPHA_LABEL`, and ``error`` by default).

    Log scales on request.

    Args:
        ax: the matplotlib ``Axes``.
        xlabel: the ``x`` label (``None``: left as it is).
        ylabel: the ``y`` label (``None``: left as it is; e.g. the right panel of a shared ``y``).
        logx: a logarithmic ``x`` axis.
        logy: a logarithmic ``y`` axis.

    Returns:
        ``ax``.

    Example:
        >>> import aim_tutorial as aim
        >>> fig, ax = aim.plotting.subplots()
        >>> ax = aim.plotting.error_axes(ax, ylabel="MMSE", logx=True)
        >>> ax.get_xlabel() == aim.plotting.ALPHA_LABEL, ax.get_ylabel(), ax.get_xscale()
        (True, 'MMSE', 'log')
        >>> aim.plotting.plt.close(fig)
    """
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    return ax


def phase_map(ax, x, y, z, *, levels=None, cmap: str = "viridis", vmin: float = 0.0, vmax: float = 1.0,
              **contour_kwargs):
    """A phase diagram: an error map over a 2-d grid (e.g. ``(alpha, rho)``), with iso-error lines.

    The map is drawn with ``pcolormesh`` (Gouraud shading, rasterised inside the SVG), the
    iso-error lines with ``contour`` (white, 1 pt, unless ``colors`` or ``linewidths`` are given),
    and the grid is turned off. Labels of the lines (``ax.clabel``), the colour bar and the
    boundary lines stay in the cell.

    Args:
        ax: the matplotlib ``Axes``.
        x: the grid's abscissae (1-d).
        y: the grid's ordinates (1-d).
        z: the error, shape ``(len(y), len(x))``.
        levels: the iso-error levels (increasing); ``None``: no lines.
        cmap, vmin, vmax: the colour map and its range (``viridis`` on ``[0, 1]``).
        **contour_kwargs: passed on to ``ax.contour``.

    Returns:
        ``(mesh, contours)``: the ``QuadMesh`` (for ``fig.colorbar``) and the ``ContourSet``, or
        ``None`` without ``levels``.

    Example:
        >>> import numpy as np
        >>> import aim_tutorial as aim
        >>> fig, ax = aim.plotting.subplots()
        >>> a, r = np.linspace(0, 1, 5), np.linspace(0.1, 1, 4)
        >>> z = np.clip(1 - a[None, :] / (2 * r[:, None] - r[:, None] ** 2), 0, 1)
        >>> mesh, iso = aim.plotting.phase_map(ax, a, r, z, levels=[0.25, 0.5])
        >>> iso.levels.tolist(), mesh.get_clim()
        ([0.25, 0.5], (0.0, 1.0))
        >>> aim.plotting.plt.close(fig)
    """
    x = _vector(x, "x")
    y = _vector(y, "y")
    z = np.asarray(z, dtype=float)
    if z.shape != (len(y), len(x)):
        raise ValueError(f"z must have shape (len(y), len(x)) = ({len(y)}, {len(x)}), got {z.shape}")
    mesh = ax.pcolormesh(x, y, z, shading="gouraud", cmap=cmap, vmin=vmin, vmax=vmax, rasterized=True)
    contours = None
    if levels is not None:
        levels = _vector(levels, "levels")
        if len(levels) == 0 or np.any(np.diff(levels) <= 0):
            raise ValueError(f"levels must be increasing, got {levels.tolist()}")
        contour_kwargs.setdefault("colors", "w")
        contour_kwargs.setdefault("linewidths", 1)
        contours = ax.contour(x, y, z, levels=levels, **contour_kwargs)
    ax.grid(False)
    return mesh, contours
