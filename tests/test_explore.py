"""aim_tutorial.explore: the tables behind the explorers, the charts built from them, and how they display."""

import json

import numpy as np
import pytest

import aim_tutorial as aim
from aim_tutorial import explore


def test_tables_cover_every_control_and_converged():
    tab = explore.load_tables()
    assert tab.converged.all()
    assert {0.05, 0.5, 1.0, 2.0} <= set(tab.rhos) and tab.noises[0] == 0.0 and len(tab.noises) >= 3
    assert tab.header["commands"] == ["python scripts/explore_tables.py"] and tab.header["seed"] is None
    for rho in tab.rhos:
        for noise in tab.noises:
            x, m = tab.curve("softmax", rho, noise)
            assert x[0] == 0 and m[0] == pytest.approx(1.0) and np.all(np.diff(m) <= 1e-9)
            assert tab.curve("hardmax", rho, noise)[0].size >= 64
            x, m = tab.curve("relu", rho, noise)
            assert x[0] == 0 and m[0] == pytest.approx(1.0) and np.all(np.diff(m) <= 1e-9)
        assert tab.curve("hardmax-published", rho)[0].size >= 64


@pytest.mark.slow
def test_tables_are_the_state_evolution():
    """A few curves of the file solved again (the chapters and the browser test check more)."""
    tab = explore.load_tables()
    x, m = tab.curve("softmax", 0.75, 0.05)
    assert np.max(np.abs(aim.solve_state_evolution(x / 4, 0.75, noise=0.05).mmse - m)) < 1e-6
    a, m = tab.curve("hardmax-published", 1.25)
    a, m = a[::8], m[::8]
    live = aim.solve_state_evolution(a, 1.25, channel="hardmax", score="published").mmse
    assert np.max(np.abs(live - m)) < 1e-4
    x, m = tab.curve("relu", 0.3, 0.2)
    x, m = x[::6], m[::6]
    assert np.max(np.abs(aim.solve_state_evolution(x / 20, 0.3, T=4, channel="relu", noise=0.2).mmse - m)) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.3, 0.5, 1.5])
def test_relu_and_sigmoid_curves_of_the_explorer(rho):
    """ReLU: its own table, in x = alpha (T^2 + T), with twice the linear threshold; sigmoid:
    the linear curve (the sigmoid is invertible), at every T, beta and noise."""
    relu = explore.error_curve(rho, 3, "relu", 0.0)
    lin = explore.error_curve(rho, 3, "linear", 0.0)
    assert relu["alpha_pr"] == pytest.approx(2 * lin["alpha_pr"])
    live = aim.solve_state_evolution(relu["alpha"][::10], rho, T=3, channel="relu").mmse
    assert np.max(np.abs(live - relu["mmse"][::10])) < 1e-6
    first_zero = relu["alpha"][np.argmax(relu["mmse"] < 1e-12)]
    assert abs(first_zero - relu["alpha_pr"]) <= relu["alpha"][1] - relu["alpha"][0] + 1e-12
    assert abs(relu["alpha_pr"] - aim.perfect_recovery_threshold(rho, 3, channel="relu")) < 1e-9
    sig = explore.error_curve(rho, 3, "sigmoid", 0.05)
    a = sig["alpha"][::16]
    live = aim.solve_state_evolution(a, rho, T=3, channel="sigmoid", beta=4.0, noise=0.05).mmse
    assert np.max(np.abs(live - sig["mmse"][::16])) < 1e-6


def test_error_curve_rescales_by_the_channel():
    soft = explore.error_curve(0.5, 3, "softmax", 0.0)
    lin = explore.error_curve(0.5, 3, "linear", 0.0)
    np.testing.assert_allclose(soft["alpha"] * 10, lin["alpha"] * 12)      # x = alpha K
    np.testing.assert_array_equal(soft["mmse"], lin["mmse"])
    assert soft["alpha_pr"] == pytest.approx(aim.alpha_perfect_recovery(0.5, 3))
    assert explore.error_curve(0.5, 3, "softmax", 0.2)["alpha_pr"] is None
    hard = explore.error_curve(0.5, 2, "hardmax", 0.0)
    assert hard["alpha_pr"] is None and hard["published"] is not None
    assert explore.error_curve(0.5, 2, "hardmax", 0.05)["published"] is None


@pytest.mark.parametrize("kwargs, match", [
    (dict(rho=0.5, T=2, channel="tanh", noise=0.0), "channel must be one of"),
    (dict(rho=0.5, T=3, channel="hardmax", noise=0.0), "T = 2 only"),
])
def test_error_curve_rejects_what_the_tables_do_not_hold(kwargs, match):
    with pytest.raises(ValueError, match=match):
        explore.error_curve(**kwargs)


def test_error_curve_rejects_untabulated_settings():
    with pytest.raises(ValueError, match=r"rho must be one of the tabulated .* got 0.55"):
        explore.error_curve(0.55, 2, "softmax", 0.0)
    with pytest.raises(ValueError, match=r"noise must be one of the tabulated levels \(0.0,\)"):
        explore.load_tables().curve("hardmax-published", 0.5, 0.05)
    with pytest.raises(ValueError, match="channel must be one of"):
        explore.samples_per_token_pair(2, "soft")


@pytest.mark.parametrize("build", [explore.error_curve_explorer, explore.phase_explorer,
                                   explore.hardmax_explorer])
def test_charts_are_valid_vega_lite_with_bounded_controls(build):
    spec = build().to_dict()                 # Altair validates against the Vega-Lite schema
    params = spec["params"]
    assert params
    for p in params:
        bind = p["bind"]
        if bind["input"] == "range":
            assert bind["min"] <= p["value"] <= bind["max"], p
        else:
            assert p["value"] in bind["options"], p
    assert len(json.dumps(spec)) < 600_000    # the page weight the browser test bounds


def test_show_writes_inline_html_only_in_the_book_build(monkeypatch):
    chart = explore.hardmax_explorer()
    monkeypatch.delenv(explore.BOOK_BUILD_ENV, raising=False)
    assert explore.show(chart) is chart
    monkeypatch.setenv(explore.BOOK_BUILD_ENV, "1")
    bundle = explore.show(chart, "explorer-x")._repr_mimebundle_()
    html = bundle["text/html"]
    # where scripts do not run, the chart's place says so
    assert html.startswith('<div class="aim-vega" id="explorer-x"><noscript><p class="aim-vega-message">'
                           + explore.NO_SCRIPT_MESSAGE + "</p></noscript></div>")
    # the static first view, for the PDF: the chart's own SVG
    assert bundle["image/svg+xml"].lstrip().startswith("<svg") and "</svg>" in bundle["image/svg+xml"]
    assert 'document.getElementById("explorer-x")' in html and "vegaEmbed(el, spec" in html
    assert "</script>" in html and "http" not in html.split("spec")[0]
    assert "https://" not in html.replace("https://vega.github.io/schema", "")
    # the bundle missing at the page's load event, or drawing failing: said in place
    assert json.dumps(explore.NO_BUNDLE_MESSAGE) in html and '"load"' in html and "say(msg.failed" in html


def _vega(chart):
    import vl_convert

    return vl_convert.vegalite_to_vega(chart.to_dict())


def _find(node, key):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _find(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _find(v, key)


@pytest.mark.parametrize("build", [explore.error_curve_explorer, explore.phase_explorer,
                                   explore.hardmax_explorer])
def test_charts_type_is_readable(build):
    """Axis labels, titles and legends at 12 px or more (Vega's defaults: 10 and 11 px)."""
    config = build().to_dict()["config"]
    assert config["axis"]["labelFontSize"] >= 12 and config["axis"]["titleFontSize"] >= 12
    assert config["legend"]["labelFontSize"] >= 12 and config["legend"]["titleFontSize"] >= 12
    sizes = [m.get("fontSize") for m in _find(build().to_dict(), "mark") if isinstance(m, dict)
             and m.get("type") == "text"]
    assert all(s is not None and s >= 12 for s in sizes), sizes


def test_phase_explorer_has_a_colour_gradient_legend():
    """The cells' colour has a legend (the cells' outline, on the same field, once hid it)."""
    legends = [lg for lgs in _find(_vega(explore.phase_explorer()), "legends") for lg in lgs]
    assert len(legends) == 1 and legends[0]["fill"] == "color" and "stroke" not in legends[0], legends
    assert legends[0]["title"] == "error" and legends[0].get("type", "gradient") == "gradient"


def test_error_explorer_range_and_cursor_controls():
    """The plotted range is a part of the table in per cent (all of it by default: a T = 3
    curve fills the chart), the cursor's slider spans the tables' alphas up to 1."""
    params = {p["name"]: p for p in explore.error_curve_explorer().to_dict()["params"]}
    assert (params["alpha_from"]["value"], params["alpha_to"]["value"]) == (0, 100)
    assert params["alpha_to"]["bind"]["max"] == 100 and params["alpha_from"]["bind"]["min"] == 0
    assert (params["alpha"]["bind"]["min"], params["alpha"]["bind"]["max"]) == (0.0, 1.0)


@pytest.mark.slow
def test_channel_explorer_draws_the_state_evolution_of_any_channel():
    import jax.numpy as jnp

    ch = aim.elementwise_channel(lambda h: jnp.clip(h, -0.5, 1.0), name="clip")
    a = np.linspace(0.01, 0.5, 12)
    c = explore.channel_curves(ch, rhos=(0.5, 1.0), Ts=(2,), noises=(0.0, 0.2), alphas=a)
    assert c.mmse.shape == (2, 1, 2, a.size)
    np.testing.assert_allclose(c.mmse[1, 0, 1], aim.solve_state_evolution(a, 1.0, T=2, channel=ch, noise=0.2).mmse)
    spec = explore.channel_explorer(ch, rhos=(0.5, 1.0), Ts=(2,), noises=(0.0, 0.2), alphas=a,
                                    curves=c).to_dict()
    rows = spec["datasets"][spec["data"]["name"]].splitlines()
    assert rows[0] == "r,T,n,i,m" and len(rows) == 1 + c.mmse.size
    r, T, n, i, m = rows[1 + 3 * a.size + 5].split(",")       # rho = 1.0, noise = 0.2, alpha[5]
    assert (int(r), int(T), int(n), int(i)) == (1, 2, 1, 5)
    assert abs(float(m) - c.mmse[1, 0, 1, 5]) <= 5e-6
    assert {p["name"] for p in spec["params"]} == {"rho", "T", "noise"}
    with pytest.raises(ValueError, match="alphas must be"):
        explore.channel_curves(ch, alphas=[0.1])
    with pytest.raises(ValueError, match="channel must be one of"):
        explore.channel_curves("nope")
