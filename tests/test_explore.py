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
    assert any(line.startswith("command: python scripts/explore_tables.py") for line in tab.header)
    for rho in tab.rhos:
        for noise in tab.noises:
            x, m = tab.curve("softmax", rho, noise)
            assert x[0] == 0 and m[0] == pytest.approx(1.0) and np.all(np.diff(m) <= 1e-9)
            assert tab.curve("hardmax", rho, noise)[0].size >= 64
        assert tab.curve("hardmax-published", rho)[0].size >= 64


def test_tables_are_the_state_evolution():
    """A few curves of the file solved again (the chapters and the browser test check more)."""
    tab = explore.load_tables()
    x, m = tab.curve("softmax", 0.75, 0.05)
    assert np.max(np.abs(aim.state_evolution(x / 4, 0.75, noise=0.05).mmse - m)) < 1e-6
    a, m = tab.curve("hardmax-published", 1.25)
    a, m = a[::8], m[::8]
    live = aim.state_evolution(a, 1.25, channel="hardmax", score="published").mmse
    assert np.max(np.abs(live - m)) < 1e-4


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
    (dict(rho=0.5, T=2, channel="relu", noise=0.0), "channel must be one of"),
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
    html = explore.show(chart, "explorer-x").data
    assert html.startswith('<div class="aim-vega" id="explorer-x"></div>')
    assert 'vegaEmbed("#explorer-x"' in html and "</script>" in html and "http" not in html.split("spec")[0]
    assert "https://" not in html.replace("https://vega.github.io/schema", "")
