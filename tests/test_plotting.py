"""The figure helpers of ``aim_tutorial.plotting``: the artists they return, and what they refuse."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from aim_tutorial import plotting  # noqa: E402


@pytest.fixture
def ax():
    fig, ax = plotting.subplots()
    yield ax
    plt.close(fig)


def test_new_names_are_exported():
    for name in ("theory_line", "experiment_points", "threshold", "level", "traces", "error_axes",
                 "phase_map"):
        assert name in plotting.__all__ and callable(getattr(plotting, name))


def test_helpers_work_on_a_figure_without_pyplot():
    # reproduce draws on a bare Figure
    ax = Figure().subplots()
    plotting.theory_line(ax, [0, 1], [1, 0])
    plotting.experiment_points(ax, [0.5], [0.4], [0.1])
    plotting.threshold(ax, 0.75)
    plotting.traces(ax, [[1.0, 0.1]], reference=0.05)
    assert len(ax.lines) >= 4


# --------------------------------------------------------------------------- theory_line


def test_theory_line_returns_the_line_with_label_and_style(ax):
    line = plotting.theory_line(ax, [0, 0.1, 0.2], [1, 0.5, 0], label="state evolution", color="k", ls="--")
    assert isinstance(line, Line2D) and line in ax.lines
    assert line.get_label() == "state evolution"
    assert line.get_linestyle() == "--" and line.get_color() == "k"
    np.testing.assert_array_equal(line.get_ydata(), [1, 0.5, 0])
    assert line.get_zorder() == 1.9                                   # under the markers


def test_theory_line_keeps_a_given_zorder_and_has_no_legend_entry_without_label(ax):
    line = plotting.theory_line(ax, [0, 1], [1, 0], zorder=5)
    assert line.get_zorder() == 5
    assert ax.get_legend_handles_labels() == ([], [])


@pytest.mark.parametrize("x, y, name", [([0, 1, 2], [1, 0], "y"), ([[0, 1]], [1, 0], "x"),
                                        ([0, 1], ["a", "b"], "y"), ([0, 1], [[1, 0]], "y")])
def test_theory_line_refuses_mismatched_input(ax, x, y, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        plotting.theory_line(ax, x, y)


# --------------------------------------------------------------------------- experiment_points


def test_experiment_points_returns_an_errorbar_container(ax):
    pts = plotting.experiment_points(ax, [0.1, 0.2], [0.5, 0.2], [0.05, 0.02], label="GAMP-RIE",
                                     color="C1", mfc="none")
    assert isinstance(pts, ErrorbarContainer) and pts in ax.containers
    assert pts.get_label() == "GAMP-RIE"
    markers = pts.lines[0]
    assert markers.get_marker() == "o" and markers.get_linestyle() == "None"
    assert markers.get_markerfacecolor() == "none"
    segs = pts.lines[2][0].get_segments()                             # the vertical bars
    np.testing.assert_allclose([s[:, 1] for s in segs], [[0.45, 0.55], [0.18, 0.22]])


def test_experiment_points_dodge_shifts_x_only(ax):
    a = plotting.experiment_points(ax, [0.1, 0.2], [0.5, 0.2], [0.05, 0.02], dodge=0.006)
    b = plotting.experiment_points(ax, [0.1, 0.2], [0.5, 0.2], [0.05, 0.02], dodge=-0.006)
    np.testing.assert_allclose(a.lines[0].get_xdata(), [0.106, 0.206])
    np.testing.assert_allclose(b.lines[0].get_xdata(), [0.094, 0.194])
    np.testing.assert_allclose(a.lines[0].get_ydata(), [0.5, 0.2])
    bar_x = [s[0, 0] for s in a.lines[2][0].get_segments()]
    np.testing.assert_allclose(bar_x, [0.106, 0.206])                  # the bars move with the markers


def test_experiment_points_without_err_and_with_asymmetric_err(ax):
    plain = plotting.experiment_points(ax, 0.6779, 0.3, fmt="s", ms=9)
    assert plain.has_yerr is False and plain.lines[0].get_marker() == "s"
    ci = plotting.experiment_points(ax, [0.1, 0.2], [0.5, 0.0], [[0.1, 0.0], [0.2, 0.1]])
    segs = ci.lines[2][0].get_segments()
    np.testing.assert_allclose([s[:, 1] for s in segs], [[0.4, 0.7], [0.0, 0.1]])


def test_experiment_points_are_listed_after_lines_in_drawing_order(ax):
    plotting.theory_line(ax, [0, 1], [1, 0], label="state evolution")
    plotting.experiment_points(ax, [0.5], [0.4], [0.1], label="T = 2")
    plotting.experiment_points(ax, [0.5], [0.3], label="this page")
    assert ax.get_legend_handles_labels()[1] == ["state evolution", "T = 2", "this page"]


@pytest.mark.parametrize("kwargs, name", [
    (dict(x=[0.1, 0.2], mean=[0.5]), "mean"),
    (dict(x=[[0.1, 0.2]], mean=[0.5, 0.2]), "x"),
    (dict(x=[0.1, 0.2], mean=[0.5, 0.2], err=[0.1]), "err"),
    (dict(x=[0.1, 0.2], mean=[0.5, 0.2], err=[[0.1, 0.1]]), "err"),
    (dict(x=[0.1, 0.2], mean=[0.5, 0.2], err=[0.1, -0.1]), "err"),
    (dict(x=[0.1, 0.2], mean=[0.5, 0.2], dodge=np.nan), "dodge"),
    (dict(x=[0.1, 0.2], mean=[0.5, 0.2], dodge=[0.1, 0.2]), "dodge"),
    (dict(x=[0.1, 0.2], mean=[0.5, 0.2], dodge="left"), "dodge"),
])
def test_experiment_points_refuses_bad_input(ax, kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        plotting.experiment_points(ax, **kwargs)


# --------------------------------------------------------------------------- threshold and level


def test_threshold_draws_one_dotted_line_per_value_labelled_once(ax):
    lines = plotting.threshold(ax, [0.4034, 0.5634], label="onsets")
    assert len(lines) == 2 and all(isinstance(ln, Line2D) for ln in lines)
    assert [float(ln.get_xdata()[0]) for ln in lines] == [0.4034, 0.5634]
    assert [ln.get_label() for ln in lines][0] == "onsets"
    assert ax.get_legend_handles_labels()[1] == ["onsets"]
    assert lines[0].get_linestyle() == ":" and lines[0].get_linewidth() == 1


def test_threshold_style_can_be_overridden_by_long_or_short_names(ax):
    (a,) = plotting.threshold(ax, 1.5, color="k")
    (b,) = plotting.threshold(ax, 0.75, linestyle="--", linewidth=2)
    assert a.get_color() == "k" and a.get_linestyle() == ":"
    assert b.get_linestyle() == "--" and b.get_linewidth() == 2


@pytest.mark.parametrize("x", [np.nan, [0.1, np.inf], [[0.1]], "a"])
def test_threshold_refuses_bad_x(ax, x):
    with pytest.raises(ValueError, match=r"^x "):
        plotting.threshold(ax, x)


def test_level_draws_a_horizontal_line(ax):
    ln = plotting.level(ax, np.float64(0.37), label="fixed point")
    assert isinstance(ln, Line2D) and ln.get_label() == "fixed point"
    assert list(ln.get_ydata()) == [0.37, 0.37] and ln.get_linestyle() == ":"
    assert plotting.level(ax, np.array(0.2)).get_ydata()[0] == 0.2     # a 0-d array is a number


@pytest.mark.parametrize("y", [np.nan, [0.1, 0.2], None, "0.1"])
def test_level_refuses_bad_y(ax, y):
    with pytest.raises(ValueError, match=r"^y "):
        plotting.level(ax, y)


# --------------------------------------------------------------------------- traces


def test_traces_one_line_per_row_on_a_log_axis(ax):
    runs = np.array([[1.0, 0.5, 0.3], [1.0, 0.2, 0.21]])
    lines = plotting.traces(ax, runs, labels=["a", "b"], colors=["C1", "C2"], lw=0.5)
    assert len(lines) == 2 and ax.get_yscale() == "log"
    assert [ln.get_label() for ln in lines] == ["a", "b"]
    assert [ln.get_color() for ln in lines] == ["C1", "C2"]
    assert lines[0].get_linewidth() == 0.5
    np.testing.assert_array_equal(lines[1].get_xdata(), [1, 2, 3])      # iterations from 1
    np.testing.assert_array_equal(lines[1].get_ydata(), [1.0, 0.2, 0.21])


def test_traces_ragged_sequence_one_label_for_the_bundle_and_reference(ax):
    lines = plotting.traces(ax, [[1.0, 0.5], [1.0, 0.4, 0.3, 0.2]], labels="single students",
                            logy=False, color="0.6", reference=0.25, reference_label="state evolution")
    assert len(lines) == 3 and ax.get_yscale() == "linear"
    assert [ln.get_label() for ln in lines[:2]][0] == "single students"
    assert ax.get_legend_handles_labels()[1] == ["single students", "state evolution"]
    assert lines[2].get_ydata()[0] == 0.25 and lines[2].get_linestyle() == ":"
    assert len(lines[1].get_xdata()) == 4


def test_traces_given_x_and_a_single_trace(ax):
    (line,) = plotting.traces(ax, [3.0, 2.0, 1.0], x=[0, 10, 20])
    np.testing.assert_array_equal(line.get_xdata(), [0, 10, 20])
    np.testing.assert_array_equal(line.get_ydata(), [3.0, 2.0, 1.0])


@pytest.mark.parametrize("args, kwargs, name", [
    (([[1.0, 0.5]],), dict(x=[0, 1, 2]), "x"),
    (([[1.0, 0.5], [1.0, 0.4]],), dict(labels=["a"]), "labels"),
    (([[1.0, 0.5], [1.0, 0.4]],), dict(colors=["C1"]), "colors"),
    (([[1.0, 0.5], [1.0, 0.4]],), dict(colors="C1"), "colors"),
    ((np.ones((2, 2, 2)),), {}, "values"),
    (([],), {}, "values"),
    (([[]],), {}, "values"),
    (([[1.0, 0.5]],), dict(reference=np.nan), "y"),
])
def test_traces_refuses_bad_input(ax, args, kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        plotting.traces(ax, *args, **kwargs)


# --------------------------------------------------------------------------- error_axes and phase_map


def test_error_axes_defaults_and_options(ax):
    assert plotting.error_axes(ax) is ax
    assert (ax.get_xlabel(), ax.get_ylabel()) == (r"$\alpha$", "error")
    plotting.error_axes(ax, xlabel=r"$\alpha/\rho$", ylabel=None, logx=True, logy=True)
    assert (ax.get_xlabel(), ax.get_ylabel()) == (r"$\alpha/\rho$", "error")
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_phase_map_returns_mesh_and_contours(ax):
    a, r = np.linspace(0, 1, 6), np.linspace(0.1, 1, 5)
    z = np.clip(1 - a[None, :] / (2 * r[:, None] - r[:, None] ** 2), 0, 1)
    mesh, iso = plotting.phase_map(ax, a, r, z, levels=[0.1, 0.5], linewidths=0.9)
    assert mesh.get_clim() == (0.0, 1.0) and mesh.get_cmap().name == "viridis"
    assert mesh.get_rasterized()
    assert list(iso.levels) == [0.1, 0.5]
    assert not ax.xaxis.get_major_ticks()[0].gridline.get_visible()
    assert plotting.phase_map(ax, a, r, z)[1] is None


@pytest.mark.parametrize("kwargs, name", [
    (dict(z=np.zeros((6, 5))), "z"),
    (dict(levels=[0.5, 0.1]), "levels"),
    (dict(levels=[]), "levels"),
])
def test_phase_map_refuses_bad_input(ax, kwargs, name):
    a, r = np.linspace(0, 1, 6), np.linspace(0.1, 1, 5)
    args = dict(z=np.zeros((5, 6)))
    args.update(kwargs)
    z = args.pop("z")
    with pytest.raises(ValueError, match=rf"^{name} "):
        plotting.phase_map(ax, a, r, z, **args)
