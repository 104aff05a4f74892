"""One figure style for the whole book (lowercase labels, no titles)."""

from __future__ import annotations

import matplotlib as mpl

STYLE = {
    "figure.figsize": (6.0, 3.8),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "font.size": 11,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "lines.markersize": 5,
}

#: colours for theory lines and experiment markers, in order
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


def use_style() -> None:
    """Apply the book's matplotlib style (call once in a chapter's setup cell)."""
    mpl.rcParams.update(STYLE)
    mpl.rcParams["axes.prop_cycle"] = mpl.cycler(color=list(COLORS))
