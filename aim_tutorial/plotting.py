"""One figure style for the whole book: vector output, lowercase labels, no titles.

Every chapter calls :func:`use_style` once in its setup cell and draws with
:func:`subplots`, so that a figure has the same size, fonts and line widths on
every page. The sizes are chosen for the book's text column (about 7.0 in at
96 px/in in the HTML theme): a figure is shown at its natural size, never shrunk,
so its fonts stay at ``font.size``.

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

__all__ = ["COLORS", "STYLE", "figsize", "legend_outside", "subplots", "use_style"]

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
