"""Interactive explorers of the Bayes-optimal error, drawn in the reader's browser.

The explorers of chapter 9 (and the hardmax figure of chapter 4) are Vega-Lite
charts built with Altair: every control is a Vega-Lite parameter bound to an
HTML input, and the curves are filtered and rescaled from tables of the state
evolution that the package ships (``aim_tutorial/data/explore_tables.csv``,
written by ``scripts/explore_tables.py``). Nothing is computed in Python when a
control moves, so the charts need no kernel: in the HTML book they run in the
page, offline (the book's build ships the Vega bundle that ``vl-convert-python``
carries); in Jupyter or Colab they are ordinary Altair charts.

Why one table serves all controls (chapter 9, replica predictions): the softmax
error depends on ``alpha`` and ``T`` only through ``x = alpha (T^2 + T - 2)`` and
not at all on ``beta``; the linear channel is the same curve at
``x = alpha (T^2 + T)``, and so is the sigmoid channel (an invertible map of ``h``:
chapter 4). The causal softmax (chapter 8) is the softmax curve at ``x = alpha (T^2 - T)``: a
masked row ``a`` reveals ``a - 1`` of its indices, ``T (T - 1) / 2`` directions in all against
``(T^2 + T - 2) / 2``, and its state evolution is the softmax's at the rescaled ``alpha``
(an identity, for every ``beta`` and noise). The ReLU channel ``y = max(h, 0)/T`` has its own curve, again one for
every ``T`` in ``x = alpha (T^2 + T)`` (ReLU is positively homogeneous: chapter 4,
section on elementwise maps). The hardmax channel has its own curves (``T = 2``).

Chapter 9. Functions:

* :func:`load_tables`: the tables as arrays, with their header.
* :func:`error_curve`: the curve an explorer draws, computed in Python from the
  same tables (what the browser test compares the page against).
* :func:`error_curve_explorer`, :func:`phase_explorer`, :func:`hardmax_explorer`:
  the charts;
* :func:`channel_explorer`: the same for any channel, solved when it is built.
* :func:`show`: display a chart in the book (inline, offline) or a notebook.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .counting import alpha_scale

__all__ = [
    "CHANNELS",
    "PHASE_CHANNELS",
    "T_RANGE",
    "LOG10_BETA_RANGE",
    "Tables",
    "load_tables",
    "samples_per_token_pair",
    "error_curve",
    "error_curve_explorer",
    "phase_explorer",
    "hardmax_explorer",
    "ChannelCurves",
    "channel_curves",
    "channel_explorer",
    "to_html",
    "show",
]

CHANNELS = ("softmax", "causal_softmax", "linear", "sigmoid", "relu", "hardmax")
#: The environment variable the book's build sets (``_ext/aim_book.py``): charts
#: are then written as inline HTML that loads the Vega bundle shipped with the page.
BOOK_BUILD_ENV = "AIM_BOOK_BUILD"
PHASE_CHANNELS = ("softmax", "causal_softmax", "linear", "sigmoid", "relu")
T_RANGE = (2, 8)
LOG10_BETA_RANGE = (-2.0, 2.0)
_TABLE_IDS = {"softmax": 0, "hardmax": 1, "hardmax-published": 2, "relu": 3}
#: the table each channel of the explorers is drawn from
TABLE_OF = {"softmax": "softmax", "causal_softmax": "softmax", "linear": "softmax", "sigmoid": "softmax",
            "relu": "relu", "hardmax": "hardmax"}


class Tables(NamedTuple):
    """The explorer tables (``explore_tables.csv``) as arrays.

    ``table`` is 0 (softmax, in ``x = alpha (T^2 + T - 2)``), 1 (hardmax, exact
    score, ``x = alpha``), 2 (hardmax, published score, noiseless; ``x = alpha``) or
    3 (ReLU, in ``x = alpha (T^2 + T)``).
    """

    table: np.ndarray
    rho: np.ndarray
    noise: np.ndarray
    x: np.ndarray
    mmse: np.ndarray
    converged: np.ndarray
    header: dict

    @property
    def rhos(self) -> tuple:
        return tuple(float(r) for r in np.unique(self.rho))

    @property
    def noises(self) -> tuple:
        return tuple(float(n) for n in np.unique(self.noise))

    def curve(self, table: str, rho: float, noise: float = 0.0):
        """``(x, mmse)`` of one tabulated curve; ``ValueError`` if the file does not hold it."""
        if table not in _TABLE_IDS:
            raise ValueError(f"table must be one of {tuple(_TABLE_IDS)}, got {table!r}")
        if rho not in self.rhos:
            raise ValueError(f"rho must be one of the tabulated width ratios {self.rhos}, got {rho!r}")
        noises = (0.0,) if table == "hardmax-published" else self.noises
        if noise not in noises:
            raise ValueError(f"noise must be one of the tabulated levels {noises} for the {table} "
                             f"table, got {noise!r}")
        sel = (self.table == _TABLE_IDS[table]) & (self.rho == rho) & (self.noise == noise)
        return self.x[sel], self.mmse[sel]


@lru_cache(maxsize=None)
def load_tables(path: str | None = None) -> Tables:
    """Read the explorer tables (default: the file shipped in ``aim_tutorial/data``)."""
    from . import datafiles

    f = datafiles.read(datafiles.packaged("explore_tables.csv") if path is None else path)
    t = f.table
    return Tables(t["channel"].astype(int), t["rho"], t["noise"], t["x"], t["mmse"], t["converged"].astype(bool),
                  f.header)


def samples_per_token_pair(T: int, channel: str) -> int:
    """``K`` with ``x = alpha K``: ``T^2 + T - 2`` (softmax), ``T^2 - T`` (causal softmax),
    ``T^2 + T`` (linear, sigmoid, ReLU), 1 (hardmax)."""
    if channel == "softmax":
        return alpha_scale(T)
    if channel == "causal_softmax":
        return alpha_scale(T, "causal")
    if channel in ("linear", "sigmoid", "relu"):
        return alpha_scale(T, "entrywise")
    if channel == "hardmax":
        return 1
    raise ValueError(f"channel must be one of {CHANNELS}, got {channel!r}")


def _samples_per_token_pair_expr(hardmax: bool) -> str:
    """:func:`samples_per_token_pair` as a Vega expression of the parameters ``channel`` and ``T``
    (``hardmax``: whether the chart offers that channel)."""
    return ("(channel == 'softmax' ? T * T + T - 2 : channel == 'causal_softmax' ? T * T - T : "
            + ("channel == 'hardmax' ? 1 : " if hardmax else "") + "T * T + T)")


def _x_pr(rho):
    return np.where(np.asarray(rho) <= 1, 2 * np.asarray(rho) - np.asarray(rho) ** 2, 1.0)


def error_curve(rho: float, T: int, channel: str, noise: float, tables: Tables | None = None) -> dict:
    """The curve the error explorer draws at these settings, from the tables.

    Returns ``alpha``, ``mmse`` (the tabulated points, rescaled by ``K`` of
    :func:`samples_per_token_pair`), ``alpha_pr`` (the perfect-recovery threshold,
    noiseless channels other than hardmax, else ``None``: ``x_PR / K`` with
    ``x_PR = 2 rho - rho^2`` for ``rho <= 1``, and twice that for ReLU) and, for the
    noiseless hardmax channel, ``published`` (``(alpha, mmse)`` with the published score).
    """
    tab = load_tables() if tables is None else tables
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {CHANNELS}, got {channel!r}")
    if channel == "hardmax" and T != 2:
        raise ValueError(f"the hardmax state evolution is tabulated at T = 2 only, got T = {T}")
    K = samples_per_token_pair(T, channel)
    x, m = tab.curve(TABLE_OF[channel], rho, noise)
    out = dict(alpha=x / K, mmse=m, alpha_pr=None, published=None)
    if channel != "hardmax" and noise == 0:
        out["alpha_pr"] = (2 if channel == "relu" else 1) * float(_x_pr(rho)) / K
    if channel == "hardmax" and noise == 0:
        xp, mp = tab.curve("hardmax-published", rho, 0.0)
        out["published"] = (xp, mp)
    return out


# ---------------------------------------------------------------------------------------------
# the charts

def _alt():
    import altair as alt

    return alt


def _short(v: float) -> str:
    """An error in ``[0, 1]`` to 5 decimals, in as few characters as CSV allows (``.12``, ``0``, ``1``)."""
    return f"{v:.5f}".rstrip("0").rstrip(".").removeprefix("0") or "0"


def _grid(tab: Tables, t: int):
    """``(log, x0, step)``: table ``t`` holds every curve on one grid, ``x = x0 + i step`` (or
    ``10^(x0 + i step)`` when ``log``), so the charts ship the index ``i`` instead of ``x``."""
    x = np.unique(tab.x[tab.table == t])
    for log in (False, True):
        u = np.log10(x) if log else x
        if log and not np.all(x > 0):
            continue
        step = (u[-1] - u[0]) / max(u.size - 1, 1)
        if np.allclose(u, u[0] + step * np.arange(u.size), rtol=0, atol=1e-6 * max(1.0, np.abs(u).max())):
            return log, float(u[0]), float(step)
    raise ValueError(f"table {t} is not on a uniform grid in x or log x")


def _csv(tab: Tables, tables: tuple, noise_only: float | None = None, zero_tails: bool = True) -> str:
    """The rows of the chosen tables as compact CSV: the table, the indices of ``rho``, of the
    noise and of ``x`` on the table's grid, and the error (5 decimals: 5e-6, far below what is
    drawn). Without ``zero_tails``, a run of zero errors at the end of a curve keeps only its
    first and last points (the line between them, and any interpolation, is the same zero)."""
    ids = [_TABLE_IDS[t] for t in tables]
    rhos, noises = tab.rhos, tab.noises
    rows = ["t,r,n,i,m"]
    for t in ids:
        log, x0, step = _grid(tab, t)
        for ri, rho in enumerate(rhos):
            for ni, noise in enumerate(noises):
                if noise_only is not None and noise != noise_only:
                    continue
                sel = (tab.table == t) & (tab.rho == rho) & (tab.noise == noise)
                if not sel.any():
                    continue
                x, m = tab.x[sel], np.round(tab.mmse[sel], 5)
                i = np.rint(((np.log10(x) if log else x) - x0) / step).astype(int)
                keep = np.ones(x.size, bool)
                if not zero_tails:
                    zero = m == 0
                    tail = zero & np.flip(np.cumprod(np.flip(zero))).astype(bool)  # the final run of zeros
                    if tail.sum() > 2:
                        keep[np.flatnonzero(tail)[1:-1]] = False
                rows += [f"{t},{ri},{ni},{k},{_short(v)}" for k, v in zip(i[keep], m[keep])]
    return "\n".join(rows)


def _decode(tab: Tables, tables: tuple) -> dict:
    """Vega expressions that turn the compact columns of :func:`_csv` back into ``rho``, ``noise``, ``x``."""
    x = "0"
    for t in reversed([_TABLE_IDS[t] for t in tables]):
        log, x0, step = _grid(tab, t)
        val = f"pow(10, {x0!r} + datum.i * {step!r})" if log else f"{x0!r} + datum.i * {step!r}"
        x = f"(datum.t == {t} ? {val} : {x})"
    return dict(rho=f"{json.dumps(list(tab.rhos))}[datum.r]", noise=f"{json.dumps(list(tab.noises))}[datum.n]",
                x=x)


def _chart(alt, tab, tables, noise_only=None, zero_tails=True):
    """A chart of the chosen tables, with the columns ``t, rho, noise, x, m`` decoded."""
    data = alt.InlineData(values=_csv(tab, tables, noise_only, zero_tails),
                          format=alt.CsvDataFormat(type="csv", parse={k: "number" for k in
                                                                      ("t", "r", "n", "i", "m")}))
    return alt.Chart(data).transform_calculate(**_decode(tab, tables))


#: the smallest type the charts use (px): axis labels, legends, read-outs; Vega's defaults
#: (10 px labels, 11 px titles) are too small to read beside the book's 16 px text
FONT_SIZE = 12


def _styled(chart):
    """The book's type sizes and no frame around the plot."""
    return (chart.configure_view(stroke=None)
            .configure_axis(labelFontSize=FONT_SIZE, titleFontSize=FONT_SIZE + 1)
            .configure_legend(labelFontSize=FONT_SIZE, titleFontSize=FONT_SIZE)
            .configure_title(fontSize=FONT_SIZE + 1))


def _select(alt, name, options, value, label):
    return alt.param(name=name, value=value,
                     bind=alt.binding_select(options=list(options), name=label + " "))


def _slider(alt, name, lo, hi, step, value, label):
    return alt.param(name=name, value=value,
                     bind=alt.binding_range(min=lo, max=hi, step=step, name=label + " "))


def error_curve_explorer(tables: Tables | None = None, width: int = 460, height: int = 300):
    """The error explorer: the Bayes-optimal error against ``alpha`` for any setting.

    Controls: channel, width ratio ``rho`` and noise ``Delta`` (the tabulated
    values), ``T`` (2 to 8), ``log10 beta`` (-2 to 2: the curve does not move,
    claim 1 of chapter 9), the plotted range ``[alpha_min, alpha_max]`` and a
    cursor ``alpha`` whose error is read off (linear interpolation between the
    tabulated points). The plotted range is a part of the tabulated one, in per cent
    (by default all of it: the curve fills the chart at every ``T``); "α from" above
    "α to" draws the range between them and says so. A cursor outside the tables is
    read at the table's end, and the read-out says so. The dotted rule is ``alpha_PR``
    (noiseless, every channel but hardmax); for the noiseless hardmax channel the dashed
    curve is the one the published score gives. The sigmoid channel draws the linear
    curve (its map is invertible: the curve of outputs kept exactly, where float64 ones
    saturate at large beta) and says so.
    """
    alt = _alt()
    tab = load_tables() if tables is None else tables
    rhos, noises = tab.rhos, tab.noises
    p = dict(
        channel=_select(alt, "channel", CHANNELS, "softmax", "channel"),
        rho=_select(alt, "rho", rhos, 0.5 if 0.5 in rhos else rhos[0], "width ratio ρ"),
        T=_slider(alt, "T", *T_RANGE, 1, 2, "tokens T"),
        lbeta=_slider(alt, "log10_beta", *LOG10_BETA_RANGE, 0.1, 0.0, "log10 β"),
        noise=_select(alt, "noise", noises, 0.0, "noise Δ"),
        amin=_slider(alt, "alpha_from", 0, 99, 1, 0, "α from, % of table"),
        amax=_slider(alt, "alpha_to", 1, 100, 1, 100, "α to, % of table"),
        acur=_slider(alt, "alpha", 0.0, 1.0, 0.001, 0.1, "cursor α"),
    )
    K = _samples_per_token_pair_expr(hardmax=True)
    PR = f"(channel == 'relu' ? 2 : 1) * (rho <= 1 ? 2 * rho - rho * rho : 1) / {K}"
    # the tabulated range of alpha for this channel and T: the softmax table ends at
    # x = X_MAX, the ReLU one at X_RELU, the hardmax one spans [A_MIN, A_MAX]
    x_max, x_relu = float(tab.x[tab.table == 0].max()), float(tab.x[tab.table == 3].max())
    a_min, a_max = float(tab.x[tab.table == 1].min()), float(tab.x[tab.table == 1].max())
    end = f"(channel == 'hardmax' ? {a_max} : (channel == 'relu' ? {x_relu} : {x_max}) / {K})"
    start = f"(channel == 'hardmax' ? {a_min} : 0)"
    lo, hi = "min(alpha_from, alpha_to)", "max(max(alpha_from, alpha_to), min(alpha_from, alpha_to) + 1)"
    dom = alt.ExprRef(f"[{end} * {lo} / 100, {end} * {hi} / 100]")
    x_enc = alt.X("alpha:Q", title="sample complexity α", scale=alt.Scale(domain=dom, nice=False),
                  axis=alt.Axis(tickCount=8, labelOverlap=True))
    y_enc = alt.Y("m:Q", title="Bayes-optimal error", scale=alt.Scale(domain=[0, 1.02]))
    label = alt.Color("curve:N", title=None,
                      scale=alt.Scale(domain=["state evolution", "published score"],
                                      range=["#1f77b4", "#d62728"]),
                      legend=None)
    base = (_chart(alt, tab, ("softmax", "hardmax", "hardmax-published", "relu"), zero_tails=False)
            .transform_filter("datum.rho == rho && datum.noise == noise")
            .transform_filter("channel == 'hardmax' ? T == 2 && (datum.t == 1 || datum.t == 2) "
                              ": datum.t == (channel == 'relu' ? 3 : 0)")
            .transform_calculate(alpha=f"datum.x / {K}",
                                 curve="datum.t == 2 ? 'published score' : 'state evolution'"))
    line = base.mark_line(clip=True, point=False).encode(
        x=x_enc, y=y_enc, color=label,
        strokeDash=alt.condition("datum.t == 2", alt.value([5, 3]), alt.value([1, 0])),
        order="x:Q", detail="t:N")
    line = line.properties(name="curve")
    # the cursor: linear interpolation between the two tabulated points around alpha,
    # read at the end of the tabulated range when alpha is outside it (and the read-out says so)
    clamp = f"clamp(alpha, {start}, {end} * (1 - 1e-9))"
    cursor = (base.transform_filter("datum.t != 2")
              .transform_calculate(ac=clamp)
              .transform_window(a2="lead(alpha)", m2="lead(m)", sort=[alt.SortField("x")])
              .transform_filter("datum.alpha <= datum.ac && datum.a2 > datum.ac")
              .transform_calculate(m_at="datum.m + (datum.m2 - datum.m) * (datum.ac - datum.alpha)"
                                        " / (datum.a2 - datum.alpha)",
                                   alpha_at="datum.ac"))
    dot = cursor.mark_point(filled=True, size=70, color="black", clip=True).encode(
        x=alt.X("alpha_at:Q"), y=alt.Y("m_at:Q"))
    dot = dot.properties(name="cursor")
    one = alt.Chart(alt.InlineData(values=[{"z": 0}]))
    pr = (one.transform_filter("noise == 0 && channel != 'hardmax'")
          .transform_calculate(a_pr=PR)
          .mark_rule(strokeDash=[2, 2], color="gray", clip=True).encode(x="a_pr:Q"))
    pr = pr.properties(name="alpha_pr")
    readout = (one.transform_calculate(
        text="(channel == 'hardmax' && T != 2 ? 'hardmax: tabulated at T = 2 only' : "
             "channel == 'sigmoid' ? 'sigmoid: the linear curve (exact outputs)' : '') + "
             "(alpha_from > alpha_to ? ((channel == 'hardmax' && T != 2) || channel == 'sigmoid' ? "
             "'\\n' : '') + '“α from” is above “α to”: drawn between them' : '')")
        .mark_text(align="left", baseline="top", x=8, y=6, fontSize=FONT_SIZE, color="#a00",
                   lineBreak="\n").encode(text="text:N")
        .properties(name="note"))
    layered = alt.layer(line, pr, dot, readout).properties(width=width, height=height)
    # the read-out line under the plot: cursor, error, threshold, beta
    text = (cursor.transform_calculate(
        a_pr=f"noise == 0 && channel != 'hardmax' ? {PR} : -1")
        .transform_calculate(
            text="'cursor α = ' + format(alpha, '.3f') + ' · error = ' + format(datum.m_at, '.4f') + "
                 "(datum.a_pr >= 0 ? ' · α_PR = ' + format(datum.a_pr, '.4f') : '') + "
                 "(datum.ac != alpha ? '\\nthe cursor is outside the table (α from ' + "
                 "format(" + start + ", '.3~g') + ' to ' + format(" + end + ", '.3~g') + "
                 "'): its error is read at α = ' + format(datum.ac, '.3f') : '') + "
                 "'\\nβ = ' + format(pow(10, log10_beta), '.3g') + ' (no effect)' + "
                 "(channel == 'hardmax' && noise == 0 ? ' · red dashed: published score' : '')")
        .mark_text(align="left", baseline="top", x=0, y=2, fontSize=FONT_SIZE, lineBreak="\n")
        .encode(text="text:N")
        .properties(width=width, height=3 * (FONT_SIZE + 3) + 4, name="readout"))
    chart = alt.vconcat(layered, text, spacing=4).add_params(*p.values())
    return _styled(chart).properties(title="")


def phase_explorer(tables: Tables | None = None, width: int = 420, height: int = 300):
    """The phase diagram in ``(rho, alpha)`` with a cursor that reads off the error.

    Controls: ``T``, noise ``Delta``, channel (softmax, linear, sigmoid or ReLU), and the cursor
    (``rho`` among the tabulated values, ``alpha`` on a slider). The white line
    is ``alpha_PR(rho)`` (noiseless; twice the softmax-type count for ReLU). Cells span the midpoints between tabulated
    width ratios and sample complexities.
    """
    alt = _alt()
    tab = load_tables() if tables is None else tables
    rhos, noises = np.array(tab.rhos), tab.noises
    edges = np.concatenate([[rhos[0] - (rhos[1] - rhos[0]) / 2], (rhos[1:] + rhos[:-1]) / 2,
                            [rhos[-1] + (rhos[-1] - rhos[-2]) / 2]])
    x0, _ = tab.curve("softmax", rhos[0], 0.0)
    dx = float(x0[1] - x0[0])
    rho_lo = {f"{r:g}": float(lo) for r, lo in zip(rhos, edges[:-1])}
    rho_hi = {f"{r:g}": float(hi) + 0.004 for r, hi in zip(rhos, edges[1:])}   # no hairline gaps
    p = dict(
        T=_slider(alt, "T", *T_RANGE, 1, 2, "tokens T"),
        noise=_select(alt, "noise", noises, 0.0, "noise Δ"),
        channel=_select(alt, "channel", PHASE_CHANNELS, "softmax", "channel"),
        rc=_select(alt, "cursor_rho", tuple(float(r) for r in rhos), 0.5 if 0.5 in rhos else rhos[0],
                   "cursor ρ"),
        ac=_slider(alt, "cursor_alpha", 0.0, float(x0[-1]) / 4, 0.001, 0.1, "cursor α"),
    )
    K = _samples_per_token_pair_expr(hardmax=False)
    x_top = f"(channel == 'relu' ? {float(tab.x[tab.table == 3].max())} : {float(x0[-1])})"
    base = (_chart(alt, tab, ("softmax", "relu"))
            .transform_filter("datum.noise == noise && datum.t == (channel == 'relu' ? 3 : 0)")
            .transform_calculate(alpha=f"datum.x / {K}",
                                 a_lo=f"max(0, datum.x - {0.52 * dx}) / {K}",
                                 a_hi=f"(datum.x + {0.52 * dx}) / {K}",
                                 r_lo=f"{json.dumps(rho_lo)}[datum.rho + '']",
                                 r_hi=f"{json.dumps(rho_hi)}[datum.rho + '']"))
    heat = base.mark_rect(clip=True, strokeWidth=0.5).encode(
        x=alt.X("r_lo:Q", title="width ratio ρ", scale=alt.Scale(domain=[0, float(edges[-1])], nice=False)),
        x2="r_hi:Q",
        y=alt.Y("a_lo:Q", title="sample complexity α",
                scale=alt.Scale(domain=alt.ExprRef(f"[0, {x_top} / {K}]"), nice=False)),
        y2="a_hi:Q",
        color=alt.Color("m:Q", title="error", scale=alt.Scale(scheme="viridis", domain=[0, 1]),
                        legend=alt.Legend(orient="right", gradientLength=height - 40)),
        # each cell outlined in its own colour: no hairlines between cells (its scale and
        # legend kept apart from the colour's, whose legend is then a gradient)
        stroke=alt.Stroke("m:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]), legend=None),
        tooltip=[alt.Tooltip("rho:Q", title="ρ"), alt.Tooltip("alpha:Q", title="α", format=".4f"),
                 alt.Tooltip("m:Q", title="error", format=".4f")]).properties(name="heat")
    grid = np.linspace(float(edges[0]), float(edges[-1]), 241)
    pr_rows = [{"r": float(r), "xpr": float(_x_pr(r))} for r in grid]
    pr = (alt.Chart(alt.InlineData(values=pr_rows)).transform_filter("noise == 0")
          .transform_calculate(a_pr=f"(channel == 'relu' ? 2 : 1) * datum.xpr / {K}")
          .mark_line(color="white", strokeWidth=2).encode(x="r:Q", y="a_pr:Q"))
    end = f"{x_top} / {K}"
    cur = (base.transform_filter("datum.rho == cursor_rho")
           .transform_calculate(ac=f"clamp(cursor_alpha, 0, {end} * (1 - 1e-9))")
           .transform_window(a2="lead(alpha)", m2="lead(m)", sort=[alt.SortField("x")])
           .transform_filter("datum.alpha <= datum.ac && datum.a2 > datum.ac")
           .transform_calculate(m_at="datum.m + (datum.m2 - datum.m) * (datum.ac - datum.alpha)"
                                     " / (datum.a2 - datum.alpha)",
                                r_at="cursor_rho", a_at="datum.ac"))
    mark = cur.mark_point(shape="cross", size=160, color="red", filled=True, strokeWidth=1).encode(
        x="r_at:Q", y="a_at:Q").properties(name="cursor")
    text = (cur.transform_calculate(
        text="'cursor ρ = ' + format(cursor_rho, '~g') + ' · α = ' + format(cursor_alpha, '.3f') + "
             "' · error = ' + format(datum.m_at, '.4f') + "
             "(datum.ac != cursor_alpha ? '\\nthe cursor is above the table (α ≤ ' + "
             "format(" + end + ", '.3~g') + "
             "'): its error is read at α = ' + format(datum.ac, '.3f') : '')")
        .mark_text(align="left", baseline="top", x=0, y=2, fontSize=FONT_SIZE, lineBreak="\n")
        .encode(text="text:N")
        .properties(width=width, height=2 * (FONT_SIZE + 3) + 4, name="readout"))
    plot = (alt.layer(heat, pr, mark).resolve_scale(stroke="independent")
            .resolve_legend(stroke="independent").properties(width=width, height=height))
    chart = alt.vconcat(plot, text,
                        spacing=4).add_params(*p.values())
    return _styled(chart)


def hardmax_explorer(tables: Tables | None = None, width: int = 460, height: int = 280):
    """The noiseless hardmax error (T = 2), exact score against the published one, for any tabulated ``rho``."""
    alt = _alt()
    tab = load_tables() if tables is None else tables
    rhos = tab.rhos
    rho = _select(alt, "rho", rhos, 0.5 if 0.5 in rhos else rhos[0], "width ratio ρ")
    line = (_chart(alt, tab, ("hardmax", "hardmax-published"), noise_only=0.0)
            .transform_filter("datum.rho == rho")
            .transform_calculate(curve="datum.t == 2 ? 'published score' : 'exact score'")
            .mark_line().encode(
                x=alt.X("x:Q", title="sample complexity α", scale=alt.Scale(type="log")),
                y=alt.Y("m:Q", title="Bayes-optimal error", scale=alt.Scale(domain=[0, 1.02])),
                color=alt.Color("curve:N", title=None,
                                scale=alt.Scale(domain=["exact score", "published score"],
                                                range=["#1f77b4", "#d62728"]),
                                legend=alt.Legend(orient="top-right")),
                strokeDash=alt.condition("datum.t == 2", alt.value([5, 3]), alt.value([1, 0])),
                order="x:Q", detail="t:N").properties(name="curve"))
    return _styled(line.add_params(rho).properties(width=width, height=height))


class ChannelCurves(NamedTuple):
    """The state-evolution errors behind :func:`channel_explorer`.

    ``mmse[i, j, k]`` is the curve over ``alpha`` at ``rhos[i]``, ``Ts[j]``, ``noises[k]``.
    """

    rhos: tuple
    Ts: tuple
    noises: tuple
    alpha: np.ndarray
    mmse: np.ndarray


def channel_curves(channel, rhos=(0.5,), Ts=(2, 3), noises=(0.0,), alphas=None, beta: float = 1.0) -> ChannelCurves:
    """The state evolution of ``channel`` on a grid of settings (default ``alphas``: 120 points
    on ``[0.005, 0.6]``), for :func:`channel_explorer`."""
    from . import channels as _chs
    from .state_evolution import solve_state_evolution

    ch = _chs.get(channel)
    a = np.linspace(0.005, 0.6, 120) if alphas is None else np.asarray(alphas, dtype=float)
    if a.ndim != 1 or a.size < 2 or np.any(~np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"alphas must be a 1-d grid of at least 2 values in [0, inf), got {alphas!r}")
    rhos, Ts, noises = tuple(float(r) for r in rhos), tuple(int(T) for T in Ts), tuple(float(n) for n in noises)
    if not (rhos and Ts and noises):
        raise ValueError("rhos, Ts and noises must each hold at least one value")
    m = np.array([[[solve_state_evolution(a, r, T=T, channel=ch, beta=beta, noise=nz).mmse for nz in noises]
                   for T in Ts] for r in rhos])
    return ChannelCurves(rhos, Ts, noises, a, m)


def channel_explorer(channel, rhos=(0.5,), Ts=(2, 3), noises=(0.0,), alphas=None, beta: float = 1.0,
                     width: int = 460, height: int = 300, curves: ChannelCurves | None = None):
    """An error explorer for any channel: a registered name or a :class:`~aim_tutorial.channels.Channel`
    (``aim.elementwise_channel(f)``, ``aim.generic_channel(g, ...)``, your own).

    The state evolution is solved here, once (:func:`channel_curves`), for every ``rho`` in
    ``rhos``, ``T`` in ``Ts`` and noise in ``noises``; in the page the reader then chooses
    among them, with no kernel. The curve drawn is the solved one (5 decimals), with a
    tooltip along it. ``curves``: the result of :func:`channel_curves` for the same
    arguments, if already solved.
    """
    from . import channels as _chs

    alt = _alt()
    ch = _chs.get(channel)
    c = channel_curves(ch, rhos, Ts, noises, alphas, beta) if curves is None else curves
    rows = ["r,T,n,i,m"] + [f"{ri},{T},{ni},{i},{_short(v)}"
                            for ri in range(len(c.rhos)) for Ti, T in enumerate(c.Ts) for ni in range(len(c.noises))
                            for i, v in enumerate(c.mmse[ri, Ti, ni]) if np.isfinite(v)]
    data = alt.InlineData(values="\n".join(rows),
                          format=alt.CsvDataFormat(type="csv", parse={k: "number" for k in ("r", "T", "n", "i", "m")}))
    p = dict(rho=_select(alt, "rho", c.rhos, c.rhos[0], "width ratio ρ"),
             T=_select(alt, "T", c.Ts, c.Ts[0], "tokens T"),
             noise=_select(alt, "noise", c.noises, c.noises[0], "noise Δ"))
    line = (alt.Chart(data)
            .transform_calculate(rho=f"{json.dumps(list(c.rhos))}[datum.r]",
                                 noise=f"{json.dumps(list(c.noises))}[datum.n]",
                                 alpha=f"{json.dumps([float(x) for x in c.alpha])}[datum.i]")
            .transform_filter("datum.rho == rho && datum.T == T && datum.noise == noise")
            .mark_line().encode(
                x=alt.X("alpha:Q", title="sample complexity α"),
                y=alt.Y("m:Q", title="Bayes-optimal error", scale=alt.Scale(domain=[0, 1.02])),
                order="alpha:Q",
                tooltip=[alt.Tooltip("alpha:Q", title="α", format=".4f"),
                         alt.Tooltip("m:Q", title="error", format=".4f")])
            .properties(name="curve", title=f"{ch.name}: {ch.summary}"))
    return _styled(line.add_params(*p.values()).properties(width=width, height=height))


# ---------------------------------------------------------------------------------------------
# display

_counter = [0]

#: what a page says in place of a chart where scripts do not run (``<noscript>``), where the
#: Vega bundle did not load, and where drawing failed (then with the error)
NO_SCRIPT_MESSAGE = ("This explorer is drawn in the page by JavaScript, which does not run here: "
                     "open the page in a browser with JavaScript on, or run the chapter's notebook.")
NO_BUNDLE_MESSAGE = ("This explorer could not be drawn: its script (_static/vega-bundle.js, "
                     "part of the built book) did not load.")
FAILED_MESSAGE = "This explorer could not be drawn: "


def to_html(chart, div_id: str | None = None) -> str:
    """The chart as an HTML fragment for a page that loads the Vega bundle (``window.vegaEmbed``).

    The fragment registers the Vega view as ``window.aimViews[div_id]`` once drawn
    (the book's browser test reads the drawn data from it). The bundle is a deferred
    script: it has run by the page's ``load`` event, and if ``window.vegaEmbed`` is
    missing then, or drawing fails, the chart's place says so (``.aim-vega-message``);
    where scripts do not run at all, a ``<noscript>`` does.
    """
    _counter[0] += 1
    div_id = div_id or f"aim-vega-{_counter[0]}"
    spec = json.dumps(chart.to_dict(), separators=(",", ":")).replace("</", "<\\/")
    msg = json.dumps({"bundle": NO_BUNDLE_MESSAGE, "failed": FAILED_MESSAGE})
    return (f'<div class="aim-vega" id="{div_id}"><noscript><p class="aim-vega-message">'
            f'{NO_SCRIPT_MESSAGE}</p></noscript></div>\n<script type="text/javascript">\n'
            f'(function () {{\n  var spec = {spec};\n  var msg = {msg};\n'
            f'  var el = document.getElementById("{div_id}");\n'
            f'  function say(text) {{\n'
            f'    var p = document.createElement("p");\n'
            f'    p.className = "aim-vega-message";\n    p.textContent = text;\n'
            f'    el.appendChild(p);\n  }}\n'
            f'  function draw() {{\n'
            f'    if (!window.vegaEmbed) {{\n'
            f'      if (document.readyState !== "complete") {{\n'
            f'        return window.addEventListener("load", draw, {{once: true}});\n      }}\n'
            f'      return say(msg.bundle);\n    }}\n'
            f'    vegaEmbed(el, spec, {{actions: false, renderer: "svg"}}).then(function (r) {{\n'
            f'      (window.aimViews = window.aimViews || {{}})["{div_id}"] = r.view;\n'
            f'    }}).catch(function (e) {{ say(msg.failed + e); console.error(e); }});\n  }}\n'
            f'  draw();\n}})();\n</script>')


def show(chart, div_id: str | None = None):
    """Display a chart: inline HTML in the book's build, the Altair chart itself elsewhere.

    In Jupyter and Colab the returned chart renders with the notebook's own Vega
    (JupyterLab ships it; Colab loads it); in the book's build (``AIM_BOOK_BUILD``
    set) the page carries its own bundle and the chart needs no network.
    """
    if os.environ.get(BOOK_BUILD_ENV):
        return _BookChart(to_html(chart, div_id), chart)
    return chart


class _BookChart:
    """The chart in the book: the live HTML for the pages, and a static SVG of its first
    view for the builders that cannot run it (the PDF), in one output."""

    def __init__(self, html: str, chart):
        self.html, self.chart = html, chart

    def _repr_mimebundle_(self, include=None, exclude=None):
        import vl_convert

        svg = vl_convert.vegalite_to_svg(self.chart.to_dict())
        return {"text/html": self.html, "image/svg+xml": svg}
