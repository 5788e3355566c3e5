"""The Compare page: the steps control (policy lag), metrics beyond the built-in panels (groups,
constants, counters), the log s zoom, empty panels and the point budget. Pure parts on hand-made
tables; the page through AppTest on runs written by the real recorder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from app_runs import run_ids
from hypothesis import given, settings
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp
from test_app_pages import _arr, _assert_clean, _grid, _open

from app import ui
from app.compare import cache, echarts_grid, plotly_traces, series_math, traces, view
from app.compare.panels import PANELS, PANELS_BY_KEY, extra_panel
from training_hooks import importers
from training_hooks.findings import lag
from training_hooks.metric_map import Derived
from training_hooks.schema import STEPS_DIR, Step

#: steps of the recorded runs: even steps on-policy, odd steps off-policy; 20 of each kind, so
#: neither subset is a sparse series (``line_style.is_sparse``: markers, no EMA)
STEPS = 40


# --------------------------------------------------------------------------- pure: compare_view


def test_panel_subset_rule():
    """auto: off-policy for the clip/KL-old panels of a run with both kinds, else all; a user
    choice applies as is; an unknown choice is refused."""
    both = lag.lag_split(pd.DataFrame({Step.STEP: [0, 1], Step.POLICY_LAG: [0, 1]}))
    on_only = lag.lag_split(pd.DataFrame({Step.STEP: [0, 1], Step.POLICY_LAG: [0, 0]}))
    assert view.panel_subset(True, view.AUTO, both) == lag.OFF_POLICY
    assert view.panel_subset(False, view.AUTO, both) == lag.ALL
    assert view.panel_subset(True, view.AUTO, on_only) == lag.ALL
    assert view.panel_subset(True, view.AUTO, None) == lag.ALL
    assert view.panel_subset(False, lag.ON_POLICY, on_only) == lag.ON_POLICY
    with pytest.raises(ValueError, match="choice must be one of"):
        view.panel_subset(True, "some", both)


def test_subset_text_names_the_steps_per_run():
    assert view.subset_text({"a": lag.OFF_POLICY, "b": lag.OFF_POLICY}) == "off-policy steps"
    assert view.subset_text({"a": lag.OFF_POLICY, "b": lag.ALL}) == (
        "off-policy steps of a; all steps of b"
    )
    many = {f"r{i}": lag.ALL for i in range(4)} | {"x": lag.OFF_POLICY}
    assert view.subset_text(many) == "all steps of 4 of 5 runs; off-policy steps of x"


def test_counters_and_groups():
    """Bookkeeping counters by full name or prefix (a duration ending in /step is no counter);
    groups by the first name component."""
    for name in ("epoch", "rollout", "policy_lag", "num_groups", "training/global_step"):
        assert view.is_counter(name), name
    assert view.is_counter("progress/done_frac")
    assert not view.is_counter("timing_s/step") and not view.is_counter("actor/grad_norm")
    assert view.metric_group("actor/pg_loss") == "actor/"
    assert view.metric_group("env/all/reward/total") == "env/"
    assert view.metric_group("grad_norm") == view.OTHER_GROUP
    assert view.metric_group("/odd") == view.OTHER_GROUP


def test_extra_stats_and_classify():
    """Constants (one value in every run that logged it) become values, counters vanish, the rest
    are curves by group; our own runs' unprefixed extras are drawn by default, foreign ones not;
    grad_norm, which a built-in panel draws, is no extra."""
    own = pd.DataFrame(
        {
            Step.STEP: [0, 1, 2],
            Step.REWARD_MEAN: [0.1, 0.2, 0.3],  # a built-in column: not an extra
            "lr": [1e-6, 1e-6, 1e-6],
            "grad_norm": [1.0, 2.0, 3.0],  # the built-in Gradient norm panel's column
            "loss_scale": [1.0, np.nan, 3.0],
            "epoch": [0, 0, 1],
            "actor/x": [1.0, 2.0, 3.0],
            "note": ["a", "b", "c"],  # not numeric
            "empty": [np.nan] * 3,  # nothing logged
        }
    )
    imported = pd.DataFrame({Step.STEP: [0, 1], "lr": [2e-6, 2e-6], "actor/x": [1.0, 1.0]})
    stats = {"own": view.extra_stats(own), "imp": view.extra_stats(imported)}
    assert set(stats["own"]) == {"lr", "loss_scale", "epoch", "actor/x"}
    assert stats["own"]["loss_scale"] == view.ExtraStats(2, 1.0, 3.0)
    ex = view.classify_extras(stats, own=["own"])
    assert ex.counters == ("epoch",)
    assert ex.constants == (
        view.Constant("lr", "own", 1e-6, 3),
        view.Constant("lr", "imp", 2e-6, 2),
    )
    # actor/x varies in one run: a curve (its constant run is drawn too, as a flat line)
    assert ex.groups == {view.OTHER_GROUP: ("loss_scale",), "actor/": ("actor/x",)}
    assert ex.default_groups == (view.OTHER_GROUP,) and ex.n_curves == 2
    assert view.classify_extras(stats, own=[]).default_groups == ()
    frame = view.constants_frame(ex.constants)
    assert frame.to_dict("records")[0] == {
        "metric": "lr",
        "run": "own",
        "value": "1e-06",
        "steps logged": 3,
    }


def test_filter_names_words_in_any_order():
    names = ["actor/grad_norm", "critic/score/mean", "timing_s/gen", "grad_norm"]
    assert view.filter_names(names, "norm GRAD") == ["actor/grad_norm", "grad_norm"]
    assert view.filter_names(names, "") == names
    assert view.filter_names(names, "(.*") == []  # plain text, never a pattern


# ------------------------------------------------------------------------- pure: chart builders


def _series(df, key="r", algorithm="gspo", eps=None, label=None) -> traces.RunSeries:
    return traces.RunSeries(
        key=key,
        label=label or key,
        algorithm=algorithm,
        color="#1f77b4",
        df=df,
        eps=eps if eps is not None else {"seq": (3e-4, 4e-4), "token": (0.2, 0.2)},
    )


def _alternating(n=10) -> pd.DataFrame:
    steps = np.arange(n)
    off = steps % 2 == 1
    return pd.DataFrame(
        {
            Step.STEP: steps,
            Step.POLICY_LAG: off.astype(int),
            Step.SEQ_CLIP_FRACTION: np.where(off, 0.5 + 0.01 * steps, 0.0),
        }
    )


def test_run_traces_subset_and_ema_within_it():
    """Off-policy steps only: x = the odd steps, y = their values, and the EMA runs over those
    values alone (debiased EMA of [0.51, 0.53, 0.55, ...], never mixing in the zeros)."""
    s = _series(_alternating(40))
    s = traces.RunSeries(**{**vars(s), "lag": lag.lag_split(s.df)})
    p = PANELS_BY_KEY["seq_clip"]
    raw, smooth = traces.run_traces(s, p, smoothing=0.5, subset=lag.OFF_POLICY)
    np.testing.assert_array_equal(raw.x, np.arange(1, 40, 2))
    np.testing.assert_allclose(raw.y, 0.5 + 0.01 * np.arange(1, 40, 2), rtol=1e-7)
    # EMA weight 0.5, debiased: m1 = 0.51; m2 = (0.5*0.51 + 0.53)/(1.5) = 0.52333...
    np.testing.assert_allclose(smooth.y[:2], [0.51, (0.5 * 0.51 + 0.53) / 1.5], rtol=1e-6)
    assert "off-policy steps" in raw.name
    on = traces.run_traces(s, p, subset=lag.ON_POLICY)[0]
    np.testing.assert_array_equal(on.x, np.arange(0, 40, 2))
    assert set(np.asarray(on.y).tolist()) == {0.0}
    assert len(traces.run_traces(s, p, subset=lag.ALL)[0].x) == 40
    unknown = _series(pd.DataFrame({Step.STEP: [0, 1], Step.SEQ_CLIP_FRACTION: [0.1, 0.2]}))
    assert traces.run_traces(unknown, p, subset=lag.OFF_POLICY) == []  # lag unknown: no subset


def test_compact_keeps_values_in_smaller_types():
    steps = series_math.compact(np.array([0.0, 5.0, 4999.0]))
    assert steps.dtype == np.int32 and steps.tolist() == [0, 5, 4999]
    y = series_math.compact(np.array([1e-6, 0.25, 123.456]))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [1e-6, 0.25, 123.456], rtol=1e-7)
    assert series_math.compact(np.array([3e9, 4e9])).dtype == np.float32  # too large for int32


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hs.integers(0, 40),
        elements=hs.one_of(
            hs.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
            hs.floats(-1e3, 1e3),
        ),
    ),
    hs.sampled_from([4, 7]),
)
def test_browser_array_is_the_short_decimal(v, digits):
    """Two routes to one answer: the vectorised rounding equals Python's '%.{digits}g' of each
    value; non-finite values become None (a gap)."""
    out = series_math.browser_array(v, digits)
    assert len(out) == len(v)
    for got, x in zip(out, v.tolist(), strict=True):
        if not math.isfinite(x):
            assert got is None
        else:
            want = float(f"{x:.{digits}g}")
            assert got == (want if math.isfinite(want) else x), (x, got)  # ~1.8e308: kept
            assert abs(got - x) <= 0.5 * 10 ** (1 - digits) * abs(x)
    json.dumps(out, allow_nan=False)  # plain JSON: no NaN/Infinity tokens


def test_browser_array_keeps_ints_and_shortens_float32():
    assert series_math.browser_array(np.array([0, 5, 4999], np.int32)) == [0, 5, 4999]
    y = np.float32([0.1, 0.2, 1 / 3])
    assert series_math.browser_array(y) == [0.1, 0.2, 0.3333333]
    assert series_math.browser_array(y, 4) == [0.1, 0.2, 0.3333]
    assert len(json.dumps(series_math.browser_array(y))) < len(json.dumps(y.tolist())) / 1.5
    with pytest.raises(ValueError, match="digits must be in 1..15, got 0"):
        series_math.browser_array(y, 0)


def test_readout_spacing_is_round():
    """About n points over the span, rounded up to 1, 2 or 5 x 10^k."""
    assert series_math.readout_spacing(0, 4999, 200) == 50  # 24.995 -> 50
    assert series_math.readout_spacing(0, 4000, 200) == 20  # exactly 20
    assert series_math.readout_spacing(0, 99, 200) == 0.5  # 0.495 -> 0.5
    assert series_math.readout_spacing(0, 99, 200, whole=True) == 1  # steps: never between two
    assert series_math.readout_spacing(0, 1.3, 200) == pytest.approx(0.01)  # 0.0065 -> 0.01
    assert series_math.readout_spacing(0, 0, 200) == 1.0  # one point: any spacing
    assert series_math.readout_spacing(0, 5e6, 48) == 2e5  # tokens, 50 runs: 104,167 -> 200,000


def test_readout_points_hand_computed():
    """Spacing 2 over rows at x = [7, 0, 3, 4.5, 20] (own median spacing 2.75, half 1.375): the
    points 0..20 within 1.375 of a row are 0 (row 1, x 0), 2 (row 2, x 3), 4 (row 3, x 4.5),
    6 and 8 (row 0, x 7), 20 (row 4); 10..18 are farther."""
    at, rows = series_math.readout_points(np.array([7, 0, 3, 4.5, 20]), 2)
    assert at.tolist() == [0, 2, 4, 6, 8, 20] and at.dtype == np.int64
    assert rows.tolist() == [1, 2, 3, 0, 0, 4]
    # rows 10 apart (a run logging every 10 steps) reach every point within 5 of one
    at, rows = series_math.readout_points(np.array([0.0, 10, 20]), 1)
    assert at.tolist() == list(range(21)) and rows.tolist() == [0] * 6 + [1] * 10 + [2] * 5
    # wall time: fractional multiples, the same floats for every run
    at, _ = series_math.readout_points(np.array([0.1, 0.52, 1.0]), 0.2)
    np.testing.assert_array_equal(at, np.arange(1, 6) * 0.2)
    assert series_math.readout_points(np.array([]), 1)[0].size == 0
    with pytest.raises(ValueError, match="x must be finite, got 1 of 2 not"):
        series_math.readout_points(np.array([0.0, np.nan]), 1)
    with pytest.raises(ValueError, match="spacing must be a positive number, got 0"):
        series_math.readout_points(np.array([0.0]), 0)
    with pytest.raises(ValueError, match="readout points over x's range"):
        series_math.readout_points(np.array([0.0, 1e9]), 1)


@settings(max_examples=100, deadline=None)
@given(
    hnp.arrays(np.float64, hs.integers(1, 60), elements=hs.floats(-1e4, 1e4)),
    hs.sampled_from([0.5, 1.0, 2.0, 25.0, 100.0, 1000.0]),
)
@pytest.mark.slow
def test_readout_points_pick_the_nearest_row(x, spacing):
    """Brute force agrees: every kept point's row is a nearest row of x, and the points dropped
    are exactly the multiples of the spacing in x's range with no row within half a spacing (or
    half x's median spacing); points increase inside [min x, max x]."""
    at, rows = series_math.readout_points(x, spacing)
    k = np.arange(math.ceil(x.min() / spacing), math.floor(x.max() / spacing) + 1)
    own = float(np.median(np.diff(np.sort(x)))) / 2 if len(x) > 1 else 0.0
    near = [c for c in k * spacing if np.min(np.abs(x - c)) <= max(spacing / 2, own)]
    np.testing.assert_allclose(at, near)
    assert len(rows) == len(at) and np.all(np.diff(at) > 0)
    for a, r in zip(at, rows, strict=True):
        assert abs(x[r] - a) == np.min(np.abs(x - a))


def test_run_traces_readout_shares_x_between_runs():
    """Two runs logged on different steps (every step, every second step) get readout points on
    one x grid, with the raw value and the EMA of the row nearest each point."""
    a = _series(pd.DataFrame({Step.STEP: np.arange(40), Step.LOSS: np.arange(40.0)}), key="a")
    b_loss = 10.0 + 5 * np.arange(20)  # 10, 15, 20, ... at steps 0, 2, 4, ...
    b = _series(pd.DataFrame({Step.STEP: np.arange(0, 40, 2), Step.LOSS: b_loss}), key="b")
    p = PANELS_BY_KEY["loss"]
    ra = traces.run_traces(a, p, smoothing=0.5, readout=2)[-1]
    rb = traces.run_traces(b, p, smoothing=0.5, readout=2)[-1]
    assert ra.role == rb.role == "readout"
    assert ra.x.tolist() == rb.x.tolist() == list(range(0, 40, 2))
    assert ra.y.tolist() == list(range(0, 40, 2)) and rb.y.tolist() == b_loss.tolist()
    # debiased EMA, weight 0.5, of b: 10; (0.5*10*0.5 + 0.5*15)/(1-0.25) = 13.33 at step 2
    np.testing.assert_allclose(rb.ema, series_math.ema(b_loss, 0.5))
    assert rb.ema[1] == pytest.approx((0.25 * 10 + 0.5 * 15) / 0.75)
    assert [t.role for t in traces.run_traces(a, p, smoothing=0.5)] == ["raw", "ema"]


def test_records_hold_plain_text_and_each_renderer_formats_it():
    """A run named with markup and a percent sign: the records carry the name as it is; Plotly
    gets it as character references (it renders tags and fills %{...}), ECharts as it is (it draws
    text), and the band, lines and readout come out of one record list for both."""
    name = "<b>a&b</b> 50%"
    df = pd.DataFrame({Step.STEP: np.arange(30), Step.REWARD_MEAN: np.linspace(0, 1, 30)})
    df[Step.REWARD_STD] = 0.1
    s = _series(df, label=name)
    p = PANELS_BY_KEY["reward"]
    records = traces.run_traces(s, p, smoothing=0.5, readout=1)
    assert [t.role for t in records] == ["band", "raw", "ema", "readout"]
    assert all(t.label == name for t in records)
    band = records[0]
    np.testing.assert_allclose(band.y - band.lo, 0.2, rtol=1e-6)  # mean ± 0.1
    fig = plotly_traces.compare_figure([s], p, smoothing=0.5)
    assert [t.name for t in fig.data] == [
        "&lt;b&gt;a&amp;b&lt;/b&gt; 50&#37;" + x for x in (" band", "", "")
    ]
    assert fig.data[2].hovertemplate.startswith("&lt;b&gt;a&amp;b&lt;/b&gt; 50&#37;<br>")
    assert "(EMA)" in fig.data[2].hovertemplate and "(EMA)" not in fig.data[1].hovertemplate
    spec = _spec(echarts_grid.grid_option([s], [p], [records])[0])
    names = {x["id"].split("|")[1]: x.get("name") for x in spec["series"]}
    assert names == {
        "band-low": None,
        "band-height": None,
        "raw": name,
        "ema": name,
        "readout": name,
    }


# --------------------------------------------------------------------------- the ECharts grid


def _spec(option) -> dict:
    """The option as the browser gets it (JSON), so a test sees no numpy value."""
    return json.loads(json.dumps(option, allow_nan=False))


def _on_panel(spec, i, role=None) -> list[dict]:
    return [
        s
        for s in spec["series"]
        if s["xAxisIndex"] == i and (role is None or s["id"].split("|")[1] == role)
    ]


def test_grid_option_draws_every_trace_as_plain_json():
    """Raw line, EMA and readout of one run on two panels: each panel's series on its own axes,
    the points as plain numbers, dash by algorithm, only the readout in the tooltip."""
    df = pd.DataFrame({Step.STEP: np.arange(24), Step.REWARD_MEAN: 0.1 * np.arange(1, 25)})
    s = _series(df, algorithm="grpo")
    panels = [PANELS_BY_KEY["reward"], PANELS_BY_KEY["loss"]]
    drawn_traces = [traces.run_traces(s, p, smoothing=0.5, readout=1) for p in panels]
    option, height = echarts_grid.grid_option([s], panels, drawn_traces)
    spec = _spec(option)
    assert (
        height == echarts_grid.SLIDER_PX + echarts_grid.GRID_ROW_PX
    )  # two panels side by side: one row
    assert [x["id"] for x in spec["series"]] == ["r|raw|0", "r|ema|0", "r|readout|0"]
    raw, ema_line, readout = spec["series"]
    assert raw["data"][:4] == [[0, 0.1], [1, 0.2], [2, 0.3], [3, 0.4]] and len(raw["data"]) == 24
    assert raw["showSymbol"] is False  # 24 points on 24 rows: not sparse
    assert raw["lineStyle"]["type"] == "dashed" and raw["lineStyle"]["opacity"] == 0.25
    assert ema_line["lineStyle"]["width"] == 2
    assert raw["tooltip"] == ema_line["tooltip"] == {"show": False}
    assert "tooltip" not in readout and readout["lineStyle"]["opacity"] == 0
    assert readout["dimensions"] == ["optimizer step", "value", "EMA"]
    assert readout["data"][0] == [0, 0.1, 0.1]
    assert spec["tooltip"]["trigger"] == "axis" and spec["tooltip"]["valueFormatter"] == "%.4g"
    # both panels' x axes move together; the second has no data and says so in its cell
    assert all(z["xAxisIndex"] == [0, 1] for z in spec["dataZoom"])
    (note,) = spec["graphic"]
    assert note["style"]["text"] == "no data for the selected runs"
    with pytest.raises(ValueError, match="one list per panel"):
        echarts_grid.grid_option([s], panels, drawn_traces[:1])


def test_grid_option_bands_stack_low_edge_and_height():
    """A band (reward ± std) becomes its lower edge plus its height, stacked whatever their signs
    (ECharts' default stacks only same-sign values): the area spans [mean - std, mean + std]."""
    df = pd.DataFrame(
        {
            Step.STEP: np.arange(4),
            Step.REWARD_MEAN: [0.5, 0.6, 0.1, 0.8],
            Step.REWARD_STD: [0.1, 0.1, 0.2, 0.2],
        }
    )
    s = _series(df)
    p = PANELS_BY_KEY["reward"]
    spec = _spec(echarts_grid.grid_option([s], [p], [traces.run_traces(s, p, bands=True)])[0])
    low, height = _on_panel(spec, 0, "band-low")[0], _on_panel(spec, 0, "band-height")[0]
    assert low["stack"] == height["stack"] and "areaStyle" in height and "areaStyle" not in low
    assert low["stackStrategy"] == height["stackStrategy"] == "all"
    np.testing.assert_allclose([y for _, y in low["data"]], [0.4, 0.5, -0.1, 0.6], atol=1e-6)
    np.testing.assert_allclose([y for _, y in height["data"]], [0.2, 0.2, 0.4, 0.4], atol=1e-6)


def test_log_s_panel_zooms_on_gspo_band_and_counts_outside():
    """4x GSPO's band (3e-4/4e-4): [4 log(1-3e-4), 4 log(1+4e-4)] = [-1.20018e-3, 1.59968e-3];
    of the means [0, 1e-3, -2e-3, 5e-4, 2e-3] two lie outside."""
    df = pd.DataFrame(
        {Step.STEP: np.arange(5), Step.SEQ_LOG_RATIO_MEAN: [0, 1e-3, -2e-3, 5e-4, 2e-3]}
    )
    p = PANELS_BY_KEY["seq_log_ratio"]
    panel_view = traces.panel_view([_series(df)], p, {"r": lag.ALL}, ["r"])
    lo, hi = panel_view.y_range
    assert lo == pytest.approx(4 * math.log1p(-3e-4)) and hi == pytest.approx(4 * math.log1p(4e-4))
    assert "2 of 5 points outside" in panel_view.subtitle and panel_view.subtitle.startswith(
        "all steps"
    )
    # only GRPO runs: no zoom; zoom off: none either
    grpo = traces.panel_view([_series(df, algorithm="grpo")], p, {"r": lag.ALL}, ["r"])
    assert grpo.y_range is None
    off = traces.panel_view([_series(df)], p, {"r": lag.ALL}, ["r"], zoom_band=False)
    assert off.y_range is None
    s = _series(df)
    spec = _spec(
        echarts_grid.grid_option([s], [p], [traces.run_traces(s, p)], views=[panel_view])[0]
    )
    assert [spec["yAxis"][0]["min"], spec["yAxis"][0]["max"]] == pytest.approx([lo, hi])
    lines = _on_panel(spec, 0, "band-line")
    # dotted lines across the run's steps at log(1-eps_low) and log(1+eps_high), labelled; the
    # low label below its line, the high one above: they cannot overlap
    assert [ln["data"][0][1] for ln in lines] == pytest.approx(
        [math.log1p(-3e-4), math.log1p(4e-4)]
    )
    assert all(sorted(x for x, _ in ln["data"]) == [0, 4] for ln in lines)
    offsets = [ln["endLabel"]["offset"][1] for ln in lines]
    assert offsets[0] > 0 > offsets[1]
    assert lines[1]["endLabel"]["formatter"] == "log(1+ε_high) = 0.0004"


def test_empty_panel_note_sits_in_its_own_cell():
    """The note of an empty panel lies inside that panel's plot area (the right column here)."""
    df = pd.DataFrame({Step.STEP: np.arange(4), Step.REWARD_MEAN: [0.1, 0.2, 0.3, 0.4]})
    s = [_series(df)]
    panels = [PANELS_BY_KEY["reward"], PANELS_BY_KEY["kl_ref"]]
    tr = [traces.run_traces(s[0], p) for p in panels]
    views = [
        view.PanelView(),
        view.PanelView(empty_note="no data in the off-policy steps shown"),
    ]
    spec = _spec(echarts_grid.grid_option(s, panels, tr, views=views)[0])
    (note,) = spec["graphic"]
    assert note["style"]["text"] == "no data in the off-policy steps shown"
    grid = spec["grid"][1]
    left, width = float(grid["left"].rstrip("%")), float(grid["width"].rstrip("%"))
    assert left < float(note["left"].rstrip("%")) < left + width
    assert grid["top"] < note["top"] < grid["top"] + grid["height"]
    assert float(spec["grid"][0]["left"].rstrip("%")) + width < left  # not on the left panel


def test_metric_names_are_text_in_the_grid():
    """A metric or run name from disk reaches ECharts as the characters themselves (ECharts
    draws strings as text; the tooltip escapes them: tests/test_app_browser.py)."""
    name = "<a href='x'>evil</a> 50%"
    df = pd.DataFrame({Step.STEP: [0, 1, 2], name: [1.0, 2.0, 3.0]})
    s = _series(df, label="<b>run</b>")
    p = extra_panel(name)
    spec = _spec(echarts_grid.grid_option([s], [p], [traces.run_traces(s, p, readout=1)])[0])
    assert spec["title"][0]["text"] == name
    assert {x["name"] for x in spec["series"]} == {"<b>run</b>"}
    assert spec["series"][-1]["dimensions"] == ["optimizer step", "value"]  # no name from disk


def test_fraction_axes_start_at_zero():
    """A flat 0 (e.g. no truncation) reads as 0 on an axis from 0, not on a 0-centred one."""
    df = pd.DataFrame({Step.STEP: [0, 1, 2], Step.TRUNCATED_FRACTION: [0.0, 0.0, 0.0]})
    p = PANELS_BY_KEY["truncation"]
    s = [_series(df)]
    option, _ = echarts_grid.grid_option(
        s,
        [p],
        [traces.run_traces(s[0], p)],
        views=[traces.panel_view(s, p, {}, ["r"])],
    )
    assert option["yAxis"][0]["min"] == 0 and "max" not in option["yAxis"][0]


def test_readout_lists_one_value_per_run_beyond_eight_runs():
    """Two runs, smoothed: a readout series per run with value and EMA. Nine runs: one readout
    series for the panel, a column per run with its EMA alone (its value when not smoothed: r8's
    10 points are sparse), rows at the union of the runs' readout points, empty where a run has
    no point (r8 starts at step 10)."""
    p = PANELS_BY_KEY["loss"]

    def run(i: int, first: int = 0) -> traces.RunSeries:  # loss = 10 i + step
        steps = np.arange(first, 20)
        return _series(pd.DataFrame({Step.STEP: steps, Step.LOSS: 10.0 * i + steps}), key=f"r{i}")

    two = [run(0), run(1)]
    drawn_traces = [t for s in two for t in traces.run_traces(s, p, smoothing=0.5, readout=1)]
    readouts = _on_panel(_spec(echarts_grid.grid_option(two, [p], [drawn_traces])[0]), 0, "readout")
    assert [r["id"] for r in readouts] == ["r0|readout|0", "r1|readout|0"]
    assert all(r["dimensions"] == ["optimizer step", "value", "EMA"] for r in readouts)

    nine = [run(i) for i in range(8)] + [run(8, first=10)]
    drawn_traces = [t for s in nine for t in traces.run_traces(s, p, smoothing=0.5, readout=1)]
    spec = _spec(echarts_grid.grid_option(nine, [p], [drawn_traces])[0])
    (readout,) = _on_panel(spec, 0, "readout")
    assert readout["id"] == "|readout|0"
    assert [d["displayName"] for d in readout["dimensions"]] == ["optimizer step"] + [
        f"r{i} · EMA" for i in range(8)
    ] + ["r8 · value"]
    assert len({d["name"] for d in readout["dimensions"]}) == 10
    assert readout["encode"]["tooltip"] == list(range(1, 10))
    rows = readout["data"]
    assert [r[0] for r in rows] == list(range(20))
    # step 0: each run's first value is its EMA: 10 i; r8 has no step 0
    assert rows[0] == [0, 0, 10, 20, 30, 40, 50, 60, 70, None]
    # step 1, weight 0.5, debiased: (0.25 v0 + 0.5 v1) / 0.75, at 4 significant digits; r0:
    # 0.5 / 0.75 = 0.6667; r1: (2.5 + 5.5) / 0.75 = 10.667 -> 10.67
    assert rows[1][1:3] == [0.6667, 10.67]
    assert [r[9] for r in rows[9:12]] == [None, 90, 91]  # r8's values: 80 + step
    for j in range(8):  # every column is the run's EMA at 4 significant digits
        expect = series_math.ema(10.0 * j + np.arange(20), 0.5)
        np.testing.assert_allclose([r[j + 1] for r in rows], expect, rtol=5e-4)


def test_chart_key_names_everything_a_chart_is_drawn_from():
    """The whole-chart cache key: the same inputs (options in any order) give one key; a change
    of any run's files, name, algorithm, colour, ε, bounds or sources, of the panels or of an
    option gives another."""
    df = pd.DataFrame({Step.STEP: [0, 1], Step.LOSS: [1.0, 2.0]})
    opts = {"x": Step.STEP, "steps": "auto", "smoothing": 0.6, "max_points": 500, "bands": False}
    how = {"opts": opts, "log_keys": [], "zoom_band": True, "readout": 50.0}
    panels = [PANELS_BY_KEY["loss"]]

    def key(series=None, digests=None, panels=panels, how=how) -> str:
        series = series or [_series(df, key="a"), _series(df, key="b")]
        return cache.chart_key(series, digests or {"a": "d1", "b": "d2"}, panels, how)

    base = key()
    reordered = {
        "readout": 50.0,
        "zoom_band": True,
        "log_keys": [],
        "opts": dict(reversed(opts.items())),
    }
    assert key(how=reordered) == base
    changed = [
        key(digests={"a": "d1", "b": "d3"}),  # a run's step parts changed
        key(series=[_series(df, key="a"), _series(df, key="b", label="b2")]),
        key(series=[_series(df, key="a"), _series(df, key="b", algorithm="grpo")]),
        key(series=[_series(df, key="a"), _series(df, key="b", eps={"seq": (1e-3, 1e-3)})]),
        key(panels=[PANELS_BY_KEY["reward"]]),
        key(panels=[extra_panel("grad_norm")]),
        key(how={**how, "opts": {**opts, "smoothing": 0.9}}),
        key(how={**how, "log_keys": ["loss"]}),
        key(how={**how, "zoom_band": False}),
        key(how={**how, "readout": 20.0}),
    ]
    recolored = [_series(df, key="a"), _series(df, key="b")]
    recolored[1].color = "#ff7f0e"
    bounded = [_series(df, key="a"), _series(df, key="b")]
    bounded[1].bounds = {Step.REWARD_MEAN: (0.0, 1.0)}
    mapped = [_series(df, key="a"), _series(df, key="b")]
    mapped[1].sources = {Step.LOSS: "loss/policy_avg"}
    changed += [key(series=recolored), key(series=bounded), key(series=mapped)]
    assert len({base, *changed}) == len(changed) + 1


@pytest.mark.parametrize("key", ["reward", "length", "seq_log_ratio", "loss"])
def test_fifty_runs_stay_within_the_point_budget(key):
    """50 runs x 5,000 steps, smoothing and bands on: a panel's traces hold <= 6,000 points."""
    rng = np.random.default_rng(0)
    n = 5000
    base = {
        Step.STEP: np.arange(n),
        Step.REWARD_MEAN: rng.random(n),
        Step.REWARD_STD: rng.random(n),
        Step.LOSS: rng.random(n),
        Step.LENGTH_MEAN: rng.random(n) * 100,
        Step.LENGTH_P90: rng.random(n) * 200,
        Step.SEQ_LOG_RATIO_MEAN: rng.normal(0, 1e-3, n),
        Step.SEQ_LOG_RATIO_MIN: -0.01 + rng.random(n) * 1e-3,
        Step.SEQ_LOG_RATIO_MAX: 0.01 + rng.random(n) * 1e-3,
    }
    series = [_series(pd.DataFrame(base), key=f"r{i}") for i in range(50)]
    p = PANELS_BY_KEY[key]
    opts = {"smoothing": 0.6, "bands": True}
    pts = traces.trace_points(p, 50, budget=6000, max_points=500, **opts)
    total = sum(
        len(t.x) * (2 if t.role == traces.BAND else 1)  # a band: two edges
        for s in series
        for t in traces.run_traces(s, p, max_points=pts, **opts)
    )
    assert 0.5 * 6000 < total <= 6000, (pts, total)
    assert traces.trace_points(p, 2, budget=6000, max_points=500, **opts) == 500


def test_legend_wraps_long_names():
    """Entries take 51 + 7 px per character, packed greedily into 900 px."""
    assert echarts_grid.legend_rows([10] * 3) == 1  # 3 x 121 px
    assert echarts_grid.legend_rows([60] * 7) == 7  # 471 px each: two would take 942 px
    assert echarts_grid.legend_rows([60] * 2, width_px=942) == 1
    assert echarts_grid.legend_rows([100, 10, 10]) == 2  # 751 + 121 = 872 fits; + 121 does not
    assert echarts_grid.legend_rows([100] * 3, width_px=2000) == 2
    _, height = echarts_grid.legend_option(
        [_series(_alternating(), key=f"r{i}") for i in range(50)]
    )
    assert height == 30 + 22 * echarts_grid.legend_rows([len("r0 · GSPO")] * 50)


# ---------------------------------------------------------------------------- the page (AppTest)


def _record(root, name, algorithm, *, alternate: bool, extra=None, seed=0):
    """A run by the real recorder: logp == old_logp exactly on even steps (on-policy, measured),
    old + 0.3 noise on odd steps when ``alternate`` (off-policy); no ref log-probs (no KL ref)."""
    import torch

    from training_hooks import RunRecorder

    gen = torch.Generator().manual_seed(seed)
    P, G, T = 2, 4, 6
    with RunRecorder(
        root=root, name=name, algorithm=algorithm, mlflow=False, group_size=G, flush_interval_s=0.2
    ) as rec:
        for step in range(STEPS):
            old = -torch.rand(P * G, T, generator=gen) * 3 - 2  # log-probs <= 0 with the noise
            off = alternate and step % 2 == 1
            logp = old + 0.3 * torch.randn(P * G, T, generator=gen) if off else old.clone()
            rec.log_step(
                step,
                rewards=torch.randint(0, 2, (P, G), generator=gen).float(),
                logprobs=logp,
                old_logprobs=old,
                mask=torch.ones(P * G, T, dtype=torch.bool),
                extra=extra(step) if extra else None,
            )
        return rec.run_dir


def _extras(step: int) -> dict:
    return {
        "grad_norm": 1.0 + step,  # drawn by the built-in Gradient norm panel
        "loss_scale": 2.0 + 0.5 * step,  # an unprefixed extra of our own: drawn by default
        "lr": 1e-6,  # constant: a value, not a line
        "epoch": step // 4,  # counters: never drawn
        "training/global_step": step,
        "progress/done_frac": step / STEPS,
        "actor/pg_loss": 0.1 * step,
        "actor/entropy_bonus": 0.01 * step,
        "timing_s/gen": 2.0 + step % 3,
    }


@pytest.fixture(scope="module")
def lag_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("lag")
    _record(root, "alt", "gspo", alternate=True, extra=_extras, seed=1)
    _record(root, "onpol", "grpo", alternate=False, seed=2)
    return root


def _steps_table(root, name) -> pd.DataFrame:
    df = pq.read_table(root / run_ids(root)[name] / STEPS_DIR).to_pandas()
    return df.sort_values(Step.STEP).reset_index(drop=True)


def _run_trace(panel: dict, key: str, ema: bool = False) -> dict:
    (t,) = [
        t
        for t in panel["traces"]
        if t["legendgroup"] == key and t["role"] == ("ema" if ema else "raw")
    ]
    return t


def test_steps_control_filters_the_clip_panels(lag_root, app_env):
    """Default (auto): the clip panel shows the alternating run's off-policy steps only, values as
    in its step table, EMA over them alone; the on-policy-only run shows all its steps; Reward
    shows all steps. Choosing a subset applies it to every panel."""
    app_env(lag_root)
    ids = run_ids(lag_root)
    table = _steps_table(lag_root, "alt")
    odd = table[table[Step.STEP] % 2 == 1]
    at = _open("compare", {"runs": [ids["alt"], ids["onpol"]]})
    _assert_clean(at)
    # the grid is one ECharts chart (PROTOTYPE branch: no Plotly on the page)
    (el,) = [e for e in at.get("echarts_chart") if e.proto.id.rsplit("-", 2)[-2] == "grid"]
    assert not at.get("plotly_chart")
    assert at.button_group(key="steps").value == view.AUTO
    grid = _grid(at)
    clip = grid["Sequence-unit clip fraction — sequence unit, ε 3e-4/4e-4"]
    assert clip["subtitle"] == "off-policy steps of alt; all steps of onpol"
    raw = _run_trace(clip, ids["alt"])
    np.testing.assert_array_equal(_arr(raw["x"]), range(1, STEPS, 2))
    np.testing.assert_array_equal(_arr(raw["y"]), odd[Step.SEQ_CLIP_FRACTION].to_numpy(np.float32))
    assert (odd[Step.SEQ_CLIP_FRACTION] > 0).all()  # off-policy steps do clip here
    smooth = _run_trace(clip, ids["alt"], ema=True)
    expected = series_math.ema(odd[Step.SEQ_CLIP_FRACTION].to_numpy(), 0.6)
    np.testing.assert_allclose(_arr(smooth["y"]), expected, rtol=1e-6)
    np.testing.assert_array_equal(_arr(_run_trace(clip, ids["onpol"])["x"]), range(STEPS))
    for title in ("KL old → new", "Token clip binding (low + high) — token unit, ε 0.2/0.2"):
        assert grid[title]["subtitle"].startswith("off-policy steps of alt")
    assert grid["Reward"]["subtitle"] == "all steps"
    np.testing.assert_array_equal(_arr(_run_trace(grid["Reward"], ids["alt"])["x"]), range(STEPS))
    assert "off-policy steps of 1 run(s)" in " ".join(c.value for c in at.caption)

    at.button_group(key="steps").set_value(lag.ON_POLICY).run()
    grid = _grid(at)
    clip = grid["Sequence-unit clip fraction — sequence unit, ε 3e-4/4e-4"]
    raw = _run_trace(clip, ids["alt"])
    np.testing.assert_array_equal(_arr(raw["x"]), range(0, STEPS, 2))
    assert set(_arr(raw["y"]).tolist()) == {0.0}  # on-policy: nothing clips
    assert grid["Reward"]["subtitle"] == "on-policy steps"

    at.button_group(key="steps").set_value(lag.ALL).run()
    raw = _run_trace(
        _grid(at)["Sequence-unit clip fraction — sequence unit, ε 3e-4/4e-4"], ids["alt"]
    )
    np.testing.assert_array_equal(_arr(raw["x"]), range(STEPS))


def test_unlogged_panels_fold_into_one_line(lag_root, app_env):
    """No run logged ref log-probs, loss, entropy, truncation or the sampler's log-probs: those
    panels draw no empty frame; one caption names them all; the drawn panels are exactly those
    whose column a step table holds a value of."""
    app_env(lag_root)
    at = _open("compare", {"runs": list(run_ids(lag_root).values())})
    _assert_clean(at)
    grid = _grid(at, ("grid",))
    unlogged = [
        "Loss",
        "Truncated completions",
        "KL to reference",
        "Mismatch: KL(sampler ‖ trainer)",
    ]
    for title in unlogged:
        assert title not in grid
    assert all(p["traces"] for p in grid.values())  # no empty frame
    (line,) = [c.value for c in at.caption if c.value.startswith("Not logged by the shown runs")]
    for title in unlogged + ["Entropy", "Mismatch: max |log p sampler − log p trainer|"]:
        assert ui.md_escape(title) in line
    assert "Reward" not in line
    (spec,) = [json.loads(e.proto.spec) for e in at.get("echarts_chart") if "grid" in e.proto.id]
    assert spec.get("graphic") == []
    from training_hooks.tables import add_derived

    tables = [add_derived(_steps_table(lag_root, n)) for n in ("alt", "onpol")]
    logged = [
        p.title for p in PANELS if any(p.column in t and t[p.column].notna().any() for t in tables)
    ]
    assert [t["text"].split(" — ")[0] for t in spec["title"]] == logged


def _inside(v: float, domain: list[float]) -> bool:
    return domain[0] < v < domain[1]


def test_foreign_groups_collapsed_constants_and_counters(lag_root, app_env):
    """Extras beyond the schema: the run's own unprefixed one drawn by default after the built-in
    panels; prefixed groups only when asked (or searched); the constant lr in the constants table;
    the counters (epoch, training/global_step, progress/*) never drawn, named in a caption;
    grad_norm among the built-in panels (Gradient norm), not among the extras."""
    app_env(lag_root)
    ids = run_ids(lag_root)
    at = _open("compare", {"runs": [ids["alt"]]})
    _assert_clean(at)
    assert list(_grid(at, ("more",))) == ["loss_scale"]
    drawn = _grid(at)
    grad = _run_trace(drawn["Gradient norm"], ids["alt"])
    np.testing.assert_array_equal(_arr(grad["x"]), range(STEPS))
    np.testing.assert_allclose(_arr(grad["y"]), 1.0 + np.arange(STEPS), rtol=1e-6)
    assert "grad_norm" not in drawn
    for counter in ("epoch", "training/global_step", "progress/done_frac", "lr"):
        assert counter not in drawn
    groups = at.multiselect(key="groups")
    assert groups.options == ["other (1)", "actor/ (2)", "timing_s/ (1)"]
    labels = [e.label for e in at.expander if "Constant" in e.label]
    assert labels == ["Constant over the run: lr"]  # the metric named before it is opened
    assert not [d for d in at.dataframe if "metric" in d.value.columns]  # built when opened
    at.session_state["constants_table"] = True  # the expander opened (it reruns the script)
    at.run()
    consts = [d.value for d in at.dataframe if "metric" in d.value.columns]
    assert consts[0].to_dict("records") == [
        {"metric": "lr", "run": "alt", "value": "1e-06", "steps logged": STEPS}
    ]
    caption = " ".join(c.value for c in at.caption)
    names = ("epoch", "progress/done_frac", "training/global_step")
    assert ", ".join(ui.md_escape(n) for n in names) in caption

    groups.set_value(["actor/"]).run()
    more = _grid(at, ("more",))
    assert list(more) == ["actor/entropy_bonus", "actor/pg_loss"]
    pg = more["actor/pg_loss"]["traces"][0]
    np.testing.assert_allclose(_arr(pg["y"]), 0.1 * np.arange(STEPS), rtol=1e-6)

    at.multiselect(key="groups").set_value([]).run()
    at.text_input(key="metric_search").set_value("GEN").run()
    assert list(_grid(at, ("more",))) == ["timing_s/gen"]


@pytest.mark.slow
def test_fifty_runs_on_the_page_keep_the_budget(tmp_path, app_env):
    """50 selected runs x 600 steps: every panel of every figure holds <= 6,000 points."""
    import sys

    from app_runs import REPO

    sys.path.insert(0, str(REPO / "bench"))
    from make_runs import make_root

    make_root(tmp_path, runs=50, steps=600, groups=2, group_size=4, tokens_per_step=0)
    app_env(tmp_path)
    at = _open("compare", {"runs": list(run_ids(tmp_path).values())})
    _assert_clean(at)
    grid = _grid(at)
    assert len(grid) >= 13
    for title, panel in grid.items():
        points = sum(len(_arr(t["x"])) for t in panel["traces"])
        assert points <= 6000, (title, points)
    assert len(_grid(at)["Reward"]["traces"]) == 100  # raw + EMA of each run
    assert "50 runs share each chart's 6,000 points" in " ".join(c.value for c in at.caption)


def test_derived_binding_column_still_a_panel():
    """The derived binding fractions are built-in panels, not extras."""
    assert PANELS_BY_KEY["seq_clip_binding"].column == Derived.SEQ_CLIP_BINDING
    assert not view.extra_stats(pd.DataFrame({Derived.SEQ_CLIP_BINDING: [0.1, 0.2]}))


@pytest.fixture(scope="module")
def real_root(real_logs, tmp_path_factory):
    """Every real log under ../shared/real_logs/ imported into one root (a copy of the session's
    import, ``real_logs``; skip when absent)."""
    return real_logs.copy_to(tmp_path_factory.mktemp("real"))


SAMPLER_KL_KEYS = ("rollout_corr/k3_kl", "optim/kl_sample_train_v2")


def _source_logs(root, run_id: str, keys: tuple[str, ...]) -> bool:
    """Whether the source file of an imported run (its segment, for a file of several runs)
    logs a number under one of ``keys``, read from the source here, not from the import."""
    from test_importers_real import source_runs

    imported = json.loads((root / run_id / "run.json").read_text())["imported"]
    runs = source_runs(imported["tool"], Path(imported["path"]))
    seg = imported.get("segment")
    rows = runs[int(seg.split(" of ")[0]) - 1] if seg else runs[-1]
    return any(isinstance(m.get(k), (int, float)) for m in rows.values() for k in keys)


@pytest.mark.slow
def test_real_logs_builtin_panels_first_foreign_groups_collapsed(real_root, app_env):
    """Every real log selected together: one figure of built-in panels (not one chart per
    foreign metric: 927 before), both Tinker runs' reward in the Reward panel, the foreign metrics
    offered as groups, undrawn until asked; a group asked for draws at most 24 panels."""
    app_env(real_root)
    ids = run_ids(real_root)
    assert len(ids) >= 7
    at = _open("compare", {"runs": list(ids.values())})
    _assert_clean(at)
    assert len(at.get("echarts_chart")) == 2  # the legend strip and the built-in panels
    grid = _grid(at)
    assert next(iter(grid)) == "Reward"
    # panels no import logged fold into one line; the rest are drawn, each with data
    (line,) = [c.value for c in at.caption if c.value.startswith("Not logged by the shown runs")]
    folded = ("Sequence log-ratio log s", "Token-unit clip fraction")
    assert all(ui.md_escape(t) in line for t in folded) and not set(folded) & set(grid)
    assert all(p["traces"] for p in grid.values()) and 8 <= len(grid) < len(PANELS)
    # verl's rollout_corr/k3_kl and Tinker's optim/kl_sample_train_v2: the sampler panel
    sampler = grid["Mismatch: KL(sampler ‖ trainer)"]
    verl = {k for n, k in ids.items() if n.startswith("deepseek")}
    logs_sampler_kl = {k for k in ids.values() if _source_logs(real_root, k, SAMPLER_KL_KEYS)}
    assert verl | {ids["tinker-rl-lab-arithmetic"]} <= logs_sampler_kl
    assert {t["legendgroup"] for t in sampler["traces"]} == logs_sampler_kl
    tinker = {k for k in ids.values() if "-tinker-" in k}
    reward_runs = {t["legendgroup"] for t in grid["Reward"]["traces"]}
    assert len(tinker) >= 2 and reward_runs == set(ids.values())
    options = at.multiselect(key="groups").options
    for group in ("actor/", "critic/", "timing_s/", "val-core/", "trl/", "env/"):
        assert any(o.startswith(group + " (") for o in options), (group, options)
    at.multiselect(key="groups").set_value(["val-aux/"]).run()
    more = _grid(at, ("more",))
    assert 0 < len(more) <= 24 and all(t.startswith("val-aux/") for t in more)
    assert "metrics match: drawing the first 24" in " ".join(c.value for c in at.caption)


# ------------------------------------------------------------- charts that do not lie by omission


def _spec_of(at, which: str = "grid") -> dict:
    (el,) = [e for e in at.get("echarts_chart") if e.proto.id.rsplit("-", 2)[-2] == which]
    return json.loads(el.proto.spec)


def _series_of(spec: dict, title: str) -> list[dict]:
    i = [t["text"] for t in spec["title"]].index(title)
    return [s for s in spec["series"] if s["xAxisIndex"] == i]


def test_reward_band_stays_within_the_rewards(lag_root, app_env):
    """0/1 rewards: mean ± std would reach below 0 and above 1; the drawn band (its lower edge
    plus its stacked height) stays within [0, 1], and reaches both ends somewhere."""
    app_env(lag_root)
    ids = run_ids(lag_root)
    table = _steps_table(lag_root, "alt")
    m, sd = table[Step.REWARD_MEAN], table[Step.REWARD_STD]
    assert (m + sd).max() > 1 or (m - sd).min() < 0  # the unbounded band leaves [0, 1]
    at = _open("compare", {"runs": [ids["alt"]]})
    _assert_clean(at)
    reward = _series_of(_spec_of(at), "Reward")
    (low,) = [s for s in reward if "|band-low|" in s["id"]]
    (height,) = [s for s in reward if "|band-height|" in s["id"]]
    lo = np.array([p[1] for p in low["data"]])
    hi = lo + np.array([p[1] for p in height["data"]])
    assert lo.min() >= 0 and hi.max() <= 1 + 1e-6
    np.testing.assert_allclose(lo, np.clip(m - sd, 0, 1), atol=1e-6)
    i = [t["text"] for t in _spec_of(at)["title"]].index("Reward")
    axis = _spec_of(at)["yAxis"][i]  # the axis ends at the band's ends, not past them
    assert (axis["min"], axis["max"]) == (0.0, 1.0)


def test_real_logs_unknown_algorithm_dotted_and_named(real_root, app_env):
    """Imports whose algorithm no file states: dotted lines and "algorithm unknown" in the legend;
    the verl runs (adv_estimator grpo) dashed."""
    app_env(real_root)
    ids = run_ids(real_root)
    at = _open("compare", {"runs": list(ids.values())})
    _assert_clean(at)
    legend = json.loads(at.get("echarts_chart")[0].proto.spec)["legend"]["data"]
    styles = {(e["name"].rsplit(" · ", 1)[1], e["lineStyle"]["type"]) for e in legend}
    assert styles == {("algorithm unknown", "dotted"), ("GRPO", "dashed")}
    algo = {
        k: json.loads((real_root / k / "run.json").read_text())["algorithm"] for k in ids.values()
    }
    tinker = {k for k in ids.values() if "-tinker-" in k}
    assert tinker and all(algo[k] == "unknown" for k in tinker)  # no Tinker file states a loss
    raw = [s for s in _series_of(_spec_of(at), "Reward") if "|raw|" in s["id"]]
    assert {s["id"].split("|")[0] for s in raw} == set(ids.values())
    for s in raw:
        want = "dotted" if algo[s["id"].split("|")[0]] == "unknown" else "dashed"
        assert s["lineStyle"]["type"] == want
    assert "algorithm unknown dotted" in at.caption[0].value


def test_real_logs_tokens_axis_leaves_off_runs_without_counts(real_root, app_env):
    """x = tokens: the Tinker run with token counts is drawn from its first count on; the TRL run
    without counts is left off (no line at x = 0) and named in the panel's note and a caption."""
    app_env(real_root)
    ids = run_ids(real_root)
    tinker, trl = ids["tinker-rl-lab-arithmetic"], ids["agent-memory-redteam"]
    at = _open("compare", {"runs": [tinker, trl]})
    at.button_group(key="x").set_value(Derived.TOKENS_SEEN).run()
    _assert_clean(at)
    reward = _grid(at, ("grid",))["Reward"]
    assert {t["legendgroup"] for t in reward["traces"]} == {tinker}
    assert reward["subtitle"] == "all steps · no token counts: agent-memory-redteam"
    raw = next(t for t in reward["traces"] if t["role"] == "raw")
    assert min(raw["x"]) > 0
    said = [c.value for c in at.caption]
    left_off = "Left off this x axis (no token counts): " + ui.md_escape("agent-memory-redteam")
    assert left_off + "." in said, said
    # Loss: logged by the TRL run only, which has no tokens: named on a line, no empty frame
    assert "Loss" not in _grid(at, ("grid",))
    (line,) = [c for c in said if c.startswith("Logged only by runs left off this x axis")]
    assert "Loss" in line


@pytest.mark.slow
def test_real_logs_sparse_validation_lines_have_markers(real_root, app_env):
    """verl val-core lines: 31 points on 301 rows and a single point on 300 rows; both drawn with
    a marker at each point, no EMA (the peak shown is the logged one)."""
    app_env(real_root)
    ids = run_ids(real_root)
    runs = [k for n, k in ids.items() if n.startswith("deepseek")]
    at = _open("compare", {"runs": runs})
    at.text_input(key="metric_search").set_value("val-core AIME mean@16").run()
    _assert_clean(at)
    spec = _spec_of(at, "more")
    title = "val-core/AIME/acc/mean@16"
    drawn = _series_of(spec, title)
    assert not [s for s in drawn if "|ema|" in s["id"]]
    raw = [s for s in drawn if "|raw|" in s["id"]]
    assert sorted(len(s["data"]) for s in raw) == [1, 31]
    assert all(s["showSymbol"] and s["symbolSize"] == 6 for s in raw)
    for s in raw:
        key = s["id"].split("|")[0]
        logged = _steps_table_of(real_root, key)[title].dropna()
        assert max(p[1] for p in s["data"]) == pytest.approx(logged.max(), rel=1e-6)


def _steps_table_of(root, key) -> pd.DataFrame:
    df = pq.read_table(root / key / STEPS_DIR).to_pandas()
    return df.sort_values(Step.STEP).reset_index(drop=True)


def test_real_logs_search_finds_a_mapped_metric_by_its_source(real_root, app_env):
    """Searching "critic score" finds Reward (verl critic/score/mean), says so, draws it under
    More metrics, and its hover names the source."""
    app_env(real_root)
    ids = run_ids(real_root)
    verl = ids["deepseek1.5b_sync_8gpu_clip_low0.2_high0.28_seed0"]
    at = _open("compare", {"runs": [verl]})
    at.text_input(key="metric_search").set_value("critic score").run()
    _assert_clean(at)
    said = " ".join(c.value for c in at.caption)
    assert ui.md_escape("verl critic/score/mean is drawn as Reward") in said
    more = _grid(at, ("more",))
    assert "Reward" in more
    (readout,) = [s for s in _series_of(_spec_of(at, "more"), "Reward") if "|readout|" in s["id"]]
    assert readout["dimensions"][1] == "value (verl critic/score/mean)"
    assert not [i for i in at.info if "No metric matches" in i.value]


def test_one_entry_import_is_visible(tmp_path, app_env):
    """A TRL log of one entry: its reward (0.5) is one point drawn as a marker, not an empty
    line; panels it did not log fold into the one line."""
    from training_hooks import importers

    src = tmp_path / "trainer_state.json"
    entry = {"step": 1, "epoch": 0.01, "reward": 0.5, "loss": 0.1, "completion_length": 40.0}
    src.write_text(json.dumps({"global_step": 1, "log_history": [entry]}))
    root = tmp_path / "root"
    importers.import_run("trl", src, root=root)
    app_env(root)
    at = _open("compare")
    _assert_clean(at)
    (raw,) = [s for s in _series_of(_spec_of(at), "Reward") if "|raw|" in s["id"]]
    assert raw["data"] == [[1, 0.5]] and raw["showSymbol"] is True
    assert any(c.value.startswith("Not logged by the shown runs") for c in at.caption)


# ------------------------------------------------------- logged under another name, clip units


def _trl_import(root, name: str, extra: dict) -> str:
    """A TRL >= 0.26 trainer_state.json (step_time dates it) of 3 rows holding ``extra``: kl
    (use_bias_correction_kl unknown there) and clip_ratio/region_mean (its unit unknown) are
    kept as trl/kl and trl/clip_ratio/region_mean. Returns the run id."""
    folder = root.parent / f"src-{name}"
    folder.mkdir(parents=True)
    rows = [
        {"step": s, "loss": 0.1 * s, "reward": 0.5, "step_time": 2.0, **extra} for s in (1, 2, 3)
    ]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": rows}))
    return importers.import_run("trl", folder, root=root, name=name)["run_id"]


def test_stand_ins_name_the_foreign_metric_per_chart_column(tmp_path):
    """trl/kl stands in for KL to reference, trl/clip_ratio/region_mean for both binding charts
    (its unit unknown), each with the import's reason; a chart no foreign name fills gets none."""
    root = tmp_path / "runs"
    rid = _trl_import(root, "a", {"kl": 0.02, "clip_ratio/region_mean": 0.1})
    from training_hooks import schema

    info = schema.read_run_info(root / rid)
    df = pd.DataFrame({"trl/kl": [0.02] * 3, "trl/clip_ratio/region_mean": [0.1] * 3})
    cols = [Step.KL_REF_MEAN, "token_clip_binding_fraction", "seq_clip_binding_fraction"]
    found = view.stand_ins([("a", info, df), ("b", None, df)], cols + [Step.ENTROPY_MEAN])
    assert set(found) == set(cols)
    (kl,) = found[Step.KL_REF_MEAN]
    assert (kl.run, kl.stored, kl.foreign) == ("a", "trl/kl", "kl")
    assert "use_bias_correction_kl" in kl.why
    assert found["seq_clip_binding_fraction"][0].stored == "trl/clip_ratio/region_mean"
    # a foreign column with no value in the run's table stands in for nothing
    assert view.stand_ins([("a", info, df.iloc[:0])], cols) == {}


def test_clip_units_line_is_per_run():
    """Both units only when every shown run has both; otherwise each run by what it holds."""
    both = pd.DataFrame({Step.SEQ_CLIP_FRACTION: [0.1], Step.TOKEN_CLIP_FRACTION: [0.2]})
    tok = pd.DataFrame({"token_clip_binding_fraction": [0.1]})
    none = pd.DataFrame({Step.LOSS: [1.0]})
    assert view.clip_units_line([("r", both)]).startswith("Every shown run records both")
    line = view.clip_units_line([("r", both), ("i", tok), ("n", none)])
    assert line == (
        "Clip units per run: both units: r; one unit only: i (token); no clip fraction: n "
        "(an import holds what its log had)."
    )


def test_compare_tells_logged_under_another_name_from_not_logged(tmp_path, app_env):
    """An import storing trl/kl: "KL to reference" is not in the Not-logged line but in the
    logged-under-another-name one (with the reason); the toggle draws trl/kl under its own
    name; the header's unit claim is per run (this import records no clip unit)."""
    root = tmp_path / "runs"
    rid = _trl_import(root, "kept", {"kl": 0.02})
    app_env(root)
    at = _open("compare", {"runs": [rid]})
    _assert_clean(at)
    captions = [c.value for c in at.caption]
    (not_logged,) = [c for c in captions if c.startswith("Not logged by the shown runs")]
    assert "KL to reference" not in not_logged and "Entropy" in not_logged
    (other,) = [c.replace("\\", "") for c in captions if c.startswith("Logged under another name")]
    assert "KL to reference: trl/kl in kept" in other and "use_bias_correction_kl" in other
    assert any(
        c.replace("\\", "").startswith("Clip units per run: no clip fraction: kept")
        for c in captions
    ), captions
    assert "KL to reference" not in _grid(at)
    at.toggle(key="stand_ins").set_value(True).run()
    _assert_clean(at)
    assert list(_grid(at, ("stand_in",))) == ["trl/kl"]


def test_a_step_part_landing_mid_rerun_leaves_no_split_of_other_rows(
    root_copy, app_env, monkeypatch
):
    """A live run's part that lands between Compare's read of the run's steps and its
    ``cache.run_digest``: what was cached for that read (lag split, extra stats, traces) never
    serves the next rerun, which reads the new step. Before: the split of the 6 rows read was kept
    under the digest of the 7 steps on disk, and the next rerun's off-policy mask (6 entries) met
    the 7-row table (the page raised)."""
    from app.compare import cache

    run_id = run_ids(root_copy)["grpo-small"]
    folder = root_copy / run_id / STEPS_DIR
    (part,) = sorted(folder.glob("*.parquet"))
    t = pq.read_table(part)
    extra = t.slice(t.num_rows - 1, 1)
    extra = extra.set_column(
        extra.schema.get_field_index(Step.STEP), Step.STEP, pa.array([99], pa.int64())
    )
    digest, landed = cache.run_digest, []

    def part_lands_first(run):
        if run.key == run_id and not landed:  # after the page's first read of the run's steps
            pq.write_table(extra, folder / "part-000000099-000000099-r0000-999999.parquet")
            landed.append(run.key)
        return digest(run)

    monkeypatch.setattr(cache, "run_digest", part_lands_first)
    app_env(root_copy)
    at = _open("compare", {"runs": [run_id]})
    _assert_clean(at)
    assert landed
    at.button_group(key="steps").set_value(lag.OFF_POLICY).run()  # the next rerun: 7 steps
    _assert_clean(at)
    reward = _run_trace(_grid(at)["Reward"], run_id)
    assert _arr(reward["x"]).tolist() == [0, 1, 2, 3, 4, 5, 99]  # every step is off-policy


def test_run_steps_are_one_read_and_its_lag_split_and_stats(lag_root):
    """A run's cached steps (``cache.run_steps``) are one read: its lag split and extra stats are
    those of the table it holds (so they always fit it), a hit gives the same numbers, and what
    one reader does to its frame reaches no other reader."""
    from app import data
    from app.compare import cache
    from app.discovery import discover

    (run,) = [r for r in discover(str(lag_root)).runs if r.name == "alt"]
    df = data.load_steps(run).df
    digest = cache.run_digest(run)
    steps = cache.run_steps(run, digest)
    split = steps.lag
    assert split == lag.lag_split(df) and split.step == tuple(range(STEPS))
    assert split.step == tuple(steps.df[Step.STEP]) == tuple(steps.table.df[Step.STEP])
    assert (split.n_on, split.n_off) == ((STEPS + 1) // 2, STEPS // 2)  # even steps on-policy
    got = steps.stats["loss_scale"]
    assert (got.points, got.low, got.high) == (STEPS, 2.0, 2.0 + 0.5 * (STEPS - 1))
    steps.df["loss_scale"] = -1.0
    steps.stats.clear()
    again = cache.run_steps(run, digest)
    assert again.stats["loss_scale"].points == STEPS and again.lag is split
    np.testing.assert_array_equal(again.df["loss_scale"], 2.0 + 0.5 * np.arange(STEPS))
