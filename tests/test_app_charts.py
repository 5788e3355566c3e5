"""Figure builders and reductions on hand-made DataFrames (no Streamlit)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app import aggregate, charts
from app import echarts_grid as eg
from training_hooks.metric_map import Derived
from training_hooks.schema import Seq, Step


def _steps(n: int, **cols) -> pd.DataFrame:
    df = pd.DataFrame({Step.STEP: np.arange(n), Step.WALL_TIME: 1000.0 + 2.0 * np.arange(n)})
    for k, v in cols.items():
        df[k] = v
    return df


def _series(df, key="a", algo="gspo", color="#1f77b4", eps=None):
    return charts.RunSeries(key, key, algo, color, df, eps or {"seq": (3e-4, 4e-4)})


def test_ema_matches_hand_computation():
    """Debiased EMA with w=0.5 on [1, 0, 0]: m = .5, .25, .125 over 1-w^t = .5, .75, .875."""
    out = charts.ema(np.array([1.0, 0.0, 0.0]), 0.5)
    np.testing.assert_allclose(out, [1.0, 0.25 / 0.75, 0.125 / 0.875])
    np.testing.assert_array_equal(charts.ema(np.array([3.0, 4.0]), 0.0), [3.0, 4.0])
    with pytest.raises(ValueError, match="weight"):
        charts.ema(np.ones(3), 1.0)


def test_downsample_keeps_spike_and_bounds_points():
    """MinMaxLTTB cuts 100k points to <= 2000 and keeps a one-step spike and both ends."""
    n = 100_000
    x = np.arange(n, dtype=float)
    y = np.sin(x / 5000)
    y[54_321] = 50.0
    idx = charts.downsample_indices(x, y, 2000)
    assert len(idx) <= 2000
    assert 54_321 in idx and idx[0] == 0 and idx[-1] == n - 1
    assert len(charts.downsample_indices(x[:10], y[:10], 2000)) == 10


def test_envelope_keeps_extremes():
    """Bucketing (x, lo, hi) to 10 buckets keeps the global min of lo and max of hi."""
    x = np.arange(1000.0)
    lo = -np.ones(1000)
    hi = np.ones(1000)
    lo[517], hi[3] = -9.0, 7.0
    bx, blo, bhi = charts.envelope(x, lo, hi, 10)
    assert len(bx) == 10 and blo.min() == -9.0 and bhi.max() == 7.0
    assert blo[5] == -9.0 and bhi[0] == 7.0  # in the right buckets (500-599, 0-99)


def test_compare_figure_traces_smoothing_and_points():
    """Two runs: raw faint + EMA per run; dash by algorithm; every trace <= max_points."""
    n = 5000
    a = _steps(n, **{Step.REWARD_MEAN: np.linspace(0, 1, n), Step.REWARD_STD: 0.1})
    b = _steps(n, **{Step.REWARD_MEAN: np.linspace(1, 0, n), Step.REWARD_STD: 0.1})
    s = [_series(a, "a", "gspo"), _series(b, "b", "grpo", "#d62728")]
    panel = charts.PANELS_BY_KEY["reward"]
    fig = charts.compare_figure(s, panel, smoothing=0.6, max_points=500, bands=False)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 4  # raw + EMA for each run
    assert all(len(t.x) <= 500 for t in fig.data)
    dashes = {t.legendgroup: t.line.dash for t in lines}
    assert dashes == {"a": "solid", "b": "dash"}
    assert sorted(t.opacity if t.opacity is not None else 1.0 for t in lines) == [0.25, 0.25, 1, 1]
    # no smoothing: one trace per run; with bands: one filled band per run on top
    assert len(charts.compare_figure(s, panel, smoothing=0, bands=False).data) == 2
    banded = charts.compare_figure(s, panel, smoothing=0, bands=True)
    assert sum(t.fill == "toself" for t in banded.data) == 2
    # reward ± std band: upper edge = mean + std
    band = next(t for t in banded.data if t.fill == "toself")
    assert max(band.y) == pytest.approx(1.1)


def test_compare_figure_axes_units_eps_and_log():
    """x axis title follows the x choice; clip panels carry unit and eps; log y drops y <= 0."""
    n = 50
    df = _steps(
        n,
        **{
            Step.SEQ_CLIP_FRACTION: np.r_[0.0, np.full(n - 1, 0.1)],
            Step.NUM_TOKENS: 100,
            Derived.TOKENS_SEEN: 100.0 * np.arange(1, n + 1),
        },
    )
    s = [_series(df)]
    panel = charts.PANELS_BY_KEY["seq_clip"]
    fig = charts.compare_figure(s, panel, x=charts.X_TOKENS)
    assert fig.layout.xaxis.title.text == "response tokens seen"
    assert "sequence unit, ε 3e-4/4e-4" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == "fraction of sequences"
    assert "(ε 3e-4/4e-4)" in fig.data[0].name
    logfig = charts.compare_figure(s, panel, log_y=True)
    assert logfig.layout.yaxis.type == "log" and len(logfig.data[0].x) == n - 1
    # two runs with different eps: the title says so instead of lying
    s2 = s + [_series(df, "b", eps={"seq": (1e-3, 1e-3)})]
    assert "differs per run" in charts.compare_figure(s2, panel).layout.title.text


def test_compare_figure_seq_band_lines_and_empty():
    """The log-ratio panel draws GSPO's band at log(1-eps_low), log(1+eps_high); no data -> note."""
    df = _steps(
        10,
        **{
            Step.SEQ_LOG_RATIO_MEAN: 0.0,
            Step.SEQ_LOG_RATIO_MIN: -1e-3,
            Step.SEQ_LOG_RATIO_MAX: 1e-3,
        },
    )
    fig = charts.compare_figure([_series(df)], charts.PANELS_BY_KEY["seq_log_ratio"])
    ys = sorted(s.y0 for s in fig.layout.shapes)
    assert ys == pytest.approx([math.log(1 - 3e-4), math.log(1 + 4e-4)])
    empty = charts.compare_figure([_series(_steps(3))], charts.PANELS_BY_KEY["kl_ref"])
    assert len(empty.data) == 0 and "no data" in empty.layout.annotations[0].text


def test_step_histogram_columns_sum_to_one():
    """Per-step histograms: each step column sums to 1; values outside the range are counted."""
    df = pd.DataFrame(
        {Seq.STEP: np.repeat([0, 1, 2], 4), Seq.SEQ_LOG_RATIO: [0, 0, 1, 1, 0, 0, 0, 0, 5, 1, 1, 1]}
    )
    h = aggregate.step_histogram(df, Seq.SEQ_LOG_RATIO, value_bins=2, value_range=(0, 1))
    assert h.z.shape == (2, 3)
    np.testing.assert_allclose(h.z.sum(0), 1.0)
    np.testing.assert_allclose(h.z[:, 0], [0.5, 0.5])  # step 0: two 0s, two 1s
    np.testing.assert_allclose(h.z[:, 1], [1.0, 0.0])
    assert h.outside == 1 and h.rows == 12
    fig = charts.step_heatmap_figure(h, title="t", value_label="log s", hlines=[(0.5, "x")])
    assert fig.data[0].type == "heatmap" and len(fig.layout.shapes) == 1


def test_zero_variance_by_reward_hand_case():
    """Step 0: groups [1,1], [0,0], [1,0] -> 1/3 all-max, 1/3 all-min; step 1: [.5,.5],[1,0]."""
    df = pd.DataFrame(
        {
            Seq.STEP: [0] * 6 + [1] * 4,
            Seq.GROUP: [0, 0, 1, 1, 2, 2, 0, 0, 1, 1],
            Seq.REWARD: [1, 1, 0, 0, 1, 0, 0.5, 0.5, 1, 0],
        }
    )
    out = aggregate.zero_variance_by_reward(df).set_index(Seq.STEP)
    assert out.loc[0, aggregate.ZV_ALL_HIGH] == pytest.approx(1 / 3)
    assert out.loc[0, aggregate.ZV_ALL_LOW] == pytest.approx(1 / 3)
    assert out.loc[1, aggregate.ZV_OTHER] == pytest.approx(1 / 2)
    assert out.loc[1, aggregate.ZV_ALL_HIGH] == 0 and list(out["groups"]) == [3, 2]
    fig = charts.zero_variance_figure(out.reset_index())
    assert [t.stackgroup for t in fig.data] == ["zv"] * 3


def test_clip_by_length_and_binned_mean():
    """Two length buckets: short sequences clipped 1/2, long 0/2; binned means by hand."""
    df = pd.DataFrame(
        {
            Seq.LENGTH: [10, 10, 100, 100],
            Seq.SEQ_CLIPPED: [True, False, False, False],
            Seq.TOKEN_CLIP_FRACTION: [0.2, 0.0, 0.1, 0.1],
            Seq.REWARD: [1, 0, 1, 1],
        }
    )
    out = aggregate.clip_by_length(df, buckets=2)
    assert list(out["sequences"]) == [2, 2]
    np.testing.assert_allclose(out[Seq.SEQ_CLIPPED], [0.5, 0.0])
    np.testing.assert_allclose(out[Seq.TOKEN_CLIP_FRACTION], [0.1, 0.1])
    b = aggregate.binned_mean(df, Seq.LENGTH, Seq.REWARD, buckets=2)
    np.testing.assert_allclose(b["mean"], [0.5, 1.0])
    np.testing.assert_allclose(b["sem"], [math.sqrt(0.5) / math.sqrt(2), 0.0])
    assert len(charts.clip_by_length_figure(out).data) == 2


def test_token_vs_sequence_and_token_bars():
    """The explainer's [4, .5, .5, 1]: log s = 0, token range log 8; bars outside 0.2 are red."""
    lr = np.log([4.0, 0.5, 0.5, 1.0])
    df = pd.DataFrame(
        {
            Seq.SEQ_LOG_RATIO: [lr.mean()],
            Seq.TOKEN_LOG_RATIO_MIN: [lr.min()],
            Seq.TOKEN_LOG_RATIO_MAX: [lr.max()],
            Seq.SEQ_CLIPPED: [False],
            Seq.LENGTH: [4],
        }
    )
    fig = charts.token_vs_sequence_figure(df, seq_eps=(3e-4, 4e-4))
    assert fig.data[0].x[0] == pytest.approx(0.0, abs=1e-12)
    assert fig.data[0].y[0] == pytest.approx(math.log(8))
    bars = charts.token_bars_figure(lr, token_eps=(0.2, 0.2), seq_log_ratio=float(lr.mean()))
    colors = list(bars.data[0].marker.color)
    assert colors == ["#d62728", "#d62728", "#d62728", "#1f77b4"]  # only ratio 1 is inside
    assert "3 of 4 outside" in bars.layout.title.text


def test_legend_and_group_rewards():
    """The legend strip has one entry per run, its colour and its algorithm's dash (no symbol);
    zero-variance groups are grey bars."""
    s = [_series(_steps(3), "a"), _series(_steps(3), "b", "grpo")]
    leg, height = eg.legend_option(s)
    entries = leg["legend"]["data"]
    assert [e["name"] for e in entries] == ["a · GSPO", "b · GRPO"] and height == 52
    assert [e["lineStyle"]["type"] for e in entries] == ["solid", "dashed"]
    assert all(e["itemStyle"]["opacity"] == 0 for e in entries)
    assert [x["name"] for x in leg["series"]] == ["a · GSPO", "b · GRPO"]
    df = pd.DataFrame({Seq.GROUP: [0, 0, 1, 1], Seq.REWARD: [1.0, 1.0, 1.0, 0.0]})
    fig = charts.group_rewards_figure(df)
    assert list(fig.data[0].y) == [1.0, 0.5]
    assert list(fig.data[0].marker.color) == ["#bbbbbb", "#1f77b4"]


def test_panels_cover_the_issue_metrics():
    """Every metric the Compare page must show has a panel, and each panel has a unit."""
    cols = {p.column for p in charts.PANELS}
    for c in (
        Step.REWARD_MEAN,
        Step.LOSS,
        Step.SEQ_LOG_RATIO_MEAN,
        Step.SEQ_CLIP_FRACTION,
        Step.TOKEN_CLIP_FRACTION,
        Step.ZERO_VARIANCE_FRACTION,
        Step.LENGTH_MEAN,
        Step.TRUNCATED_FRACTION,
        Step.KL_REF_MEAN,
        Step.KL_OLD_MEAN,
        Step.ENTROPY_MEAN,
    ):
        assert c in cols
    assert all(p.unit for p in charts.PANELS)
    assert charts.PANELS_BY_KEY["length"].second == Step.LENGTH_P90


def test_grid_option_places_panels_on_their_own_axes():
    """Panel i's series go to axes i; log panels get a log y; panels fill rows of two."""
    df = _steps(20, **{Step.REWARD_MEAN: np.linspace(0, 1, 20), Step.KL_REF_MEAN: 0.01})
    s = [_series(df)]
    panels = [
        charts.PANELS_BY_KEY["reward"],
        charts.PANELS_BY_KEY["kl_ref"],
        charts.PANELS_BY_KEY["entropy"],
    ]
    traces = [charts.run_traces(s[0], p, smoothing=0.5, bands=False) for p in panels]
    option, height = eg.grid_option(s, panels, traces, log_panels=["kl_ref"])
    assert [x["xAxisIndex"] for x in option["series"]] == [0, 0, 1, 1]  # entropy: no column
    assert [x["yAxisIndex"] for x in option["series"]] == [0, 0, 1, 1]
    assert [y["type"] for y in option["yAxis"]] == ["value", "log", "value"]
    assert [t["text"] for t in option["title"]] == [p.title for p in panels]
    assert [g["text"] for g in [n["style"] for n in option["graphic"]]] == [
        "no data for the selected runs"
    ]
    # row 1 holds panels 1-2 side by side, row 2 panel 3, below
    tops = [g["top"] for g in option["grid"]]
    assert tops[0] == tops[1] == tops[2] - eg.GRID_ROW_PX
    assert height == eg.SLIDER_PX + 2 * eg.GRID_ROW_PX
    with pytest.raises(ValueError, match="one list per panel"):
        eg.grid_option(s, panels, traces[:2])


def test_run_colour_is_derived_from_its_key():
    """crc32("a") % 16 = 3, crc32("b") % 16 = 9, crc32("run-1") % 16 = 3: each key's colour is
    its palette slot, whatever other runs exist; of two runs on screen that want slot 3, the
    first (the older) keeps it and the other takes the next free slot, 4."""
    P = charts.PALETTE
    assert [charts.color_slot(k) for k in ("a", "b", "run-1")] == [3, 9, 3]
    assert charts.run_colors(["a"]) == {"a": P[3]}
    assert charts.run_colors(["x", "a", "b", "run-1"]) == {
        "x": P[charts.color_slot("x")],
        "a": P[3],
        "b": P[9],
        "run-1": P[3],
    }
    on_screen = charts.run_colors(["a", "b", "run-1"], ["a", "run-1"])
    assert on_screen == {"a": P[3], "b": P[9], "run-1": P[4]}
    assert charts.run_colors(["a", "run-1"], ["run-1", "a"]) == {"run-1": P[3], "a": P[4]}


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30, unique=True))
def test_run_colours_distinct_on_screen_and_stable(keys):
    """Runs on screen get distinct colours while the palette lasts; the first of them always
    has its own key's colour, and no run's colour depends on the runs off screen."""
    shown = keys[: len(charts.PALETTE)]
    colors = charts.run_colors(keys, shown)
    assert len({colors[k] for k in shown}) == len(shown)
    assert colors[shown[0]] == charts.PALETTE[charts.color_slot(shown[0])]
    assert {k: colors[k] for k in shown} == charts.run_colors(shown, shown)
