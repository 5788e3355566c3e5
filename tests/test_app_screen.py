"""The screen says only what it shows: round axis ends and one x range across linked panels, float
noise said and drawn at 0, a NaN step drawn as a gap, a second column no line style can read as,
"out of range" told apart from "the clip binds", links with comma-separated runs, the per-lag
split, the rollout axis and the gradient-norm panel. Pure parts on hand-made tables with the
arithmetic in comments; the pages through AppTest on runs written by the real recorder."""

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
from test_app_pages import _arr, _assert_clean, _grid, _open, _open_link, _unescaped

from app import aggregate, ui
from app.compare import echarts_grid, plotly_traces, series_math, traces
from app.compare.panels import K3_FLOOR, LOGP_DIFF_FLOOR, PANELS_BY_KEY
from app.compare.view import PanelView
from app.records import RunRef
from training_hooks.schema import SEQUENCES_DIR, STEPS_DIR, Seq, Step

STEPS = 24  # 6 rollouts x 4 minibatches: lags 0, 1, 2, 3


def _series(df, key="r", algorithm="gspo", label=None) -> traces.RunSeries:
    return traces.RunSeries(
        key=key,
        label=label or key,
        algorithm=algorithm,
        color="#1f77b4",
        df=df,
        eps={"seq": (0.02, 0.03), "token": (0.2, 0.2)},
    )


# ------------------------------------------------------------------------------ axis ends


def test_nice_extent_hand_computed():
    """ECharts' rounded interval of span / 5 (1, 2, 3, 5, 10 x 10^k), refined on the widened range:
    0..199: 39.8 -> 30, [0, 210]; 210 / 5 = 42 -> 50, so from 0..199 again [0, 200], whose own
    interval nice(40) = 50 divides it. 0..23: 4.6 -> 5, [0, 25], 25 / 5 = 5 -> 5. 0..499: 99.8 ->
    100, [0, 500]. 3..17: 2.8 -> 3, [3, 18]; 15 / 5 = 3 -> 3."""
    assert series_math.nice_extent(0, 199) == (0.0, 200.0)
    assert series_math.nice_extent(0, 23) == (0.0, 25.0)
    assert series_math.nice_extent(0, 499) == (0.0, 500.0)
    assert series_math.nice_extent(3, 17) == (3.0, 18.0)
    assert series_math.nice_number(39.8) == 30.0 and series_math.nice_number(0.7) == 0.5
    with pytest.raises(ValueError, match="lo <= hi"):
        series_math.nice_extent(2, 1)


def test_tight_extent_and_round_labels():
    """An observed range ends on a round step near a twentieth of it: 0.2141522..0.95 -> span
    0.7358 / 20 = 0.0368 -> 0.05: [0.2, 0.95] (never a tick "0.2141522"); 0..1 stays 0..1."""
    assert series_math.tight_extent(0.2141522, 0.95) == (0.2, 0.95)
    assert series_math.tight_extent(0.0, 1.0) == (0.0, 1.0)
    assert series_math.is_round(0.25) and series_math.is_round(1e-5) and series_math.is_round(0)
    assert not series_math.is_round(0.2141522) and not series_math.is_round(4 * math.log(0.98))


def _line(key: str, x, y, role=traces.RAW) -> traces.Trace:
    return traces.Trace(
        role, key, key, key, np.asarray(x), np.asarray(y), traces.Style("#000000", width=1)
    )


def test_linked_panels_share_one_x_range():
    """A panel whose run logged steps 0-99 beside one of 0-499: both x axes run 0..500 (the
    chart's one range), and a page's range given as x_range wins."""
    panels = [PANELS_BY_KEY["reward"], PANELS_BY_KEY["sampler_kl"]]
    drawn_traces = [[_line("a", range(500), np.ones(500))], [_line("a", range(100), np.ones(100))]]
    series = [_series(pd.DataFrame({Step.STEP: range(500)}), key="a")]
    option, _ = echarts_grid.grid_option(series, panels, drawn_traces)
    assert [(a["min"], a["max"]) for a in option["xAxis"]] == [(0.0, 500.0)] * 2
    option, _ = echarts_grid.grid_option(series, panels, drawn_traces, x_range=(0, 199))
    assert [(a["min"], a["max"]) for a in option["xAxis"]] == [(0.0, 200.0)] * 2


def test_tight_reward_axis_ends_on_round_numbers():
    """A reward band cut to rewards 0.2141522..0.95: the y axis ends at 0.2 and 0.95 (a round
    step of the range), not at the values' seven digits; the tooltip keeps 4 digits."""
    panel = PANELS_BY_KEY["reward"]
    x = np.arange(10)
    band = traces.Trace(
        traces.BAND,
        "a",
        "a",
        "a band",
        x,
        np.full(10, 0.95),
        traces.Style("#000000"),
        np.full(10, 0.2141522),
    )
    series = [_series(pd.DataFrame({Step.STEP: x}), key="a")]
    view = PanelView(tight=True)
    option, _ = echarts_grid.grid_option(
        series, [panel], [[band, _line("a", x, np.full(10, 0.6))]], views=[view]
    )
    (axis,) = option["yAxis"]
    assert (axis["min"], axis["max"]) == (0.2, 0.95)
    assert option["tooltip"]["valueFormatter"] == "%.4g"


def test_plotly_hover_formats_x_by_axis():
    """Steps and tokens are whole numbers in the hover (%{x:,.0f}), wall time 4 digits."""
    t = _line("a", [0, 1], [0.5, 0.25])
    panel = PANELS_BY_KEY["reward"]
    assert "%{x:,.0f}" in plotly_traces.plotly_trace(t, panel, traces.X_STEP)["hovertemplate"]
    assert "%{x:.4g}" in plotly_traces.plotly_trace(t, panel, traces.X_ELAPSED)["hovertemplate"]


# ------------------------------------------------------------------------------ float noise


def _mismatch_frame(kl: np.ndarray, diff: np.ndarray) -> pd.DataFrame:
    n = len(kl)
    return pd.DataFrame(
        {
            Step.STEP: np.arange(n),
            Step.SAMPLER_KL_MEAN: kl,
            Step.SAMPLER_LOGP_ABS_DIFF_MAX: diff,
        }
    )


def test_noise_floor_said_and_drawn_at_zero():
    """k3 of 1e-15..8.5e-14 (the demo's float32 noise) is below Health's floor 1e-5: the panel
    says so with the largest value and runs its y axis 0..1 in units of 1e-5, where the noise sits
    at 8.5e-14 / 1e-5 = 8.5e-9 (flat at 0). |Δ log p| up to 3.3e-6 is below sqrt(2 x 1e-5) =
    0.0045. A run above the floor beside it: no such note, the axis is the values' own."""
    assert K3_FLOOR == 1e-5 and LOGP_DIFF_FLOOR == pytest.approx(0.004472136)
    kl = np.linspace(1e-15, 8.5e-14, 20)
    quiet = _series(_mismatch_frame(kl, np.full(20, 3.3e-6)), key="q")
    panel = PANELS_BY_KEY["sampler_kl"]
    view = traces.panel_view([quiet], panel, {"q": "all"}, ["q"])
    assert (
        view.subtitle
        == "all steps · float noise: every value below 1e-5 (largest 8.5e-14), drawn at 0"
    )
    assert view.y_range == (0.0, 1e-5) and view.noise_floor == 1e-5
    drawn_traces = traces.run_traces(quiet, panel)
    option, _ = echarts_grid.grid_option([quiet], [panel], [drawn_traces], views=[view])
    (axis,) = option["yAxis"]
    assert (axis["min"], axis["max"]) == (0.0, 1.0) and axis["name"] == "nats / token (×1e-5)"
    assert axis["axisLabel"] == {"showMinLabel": True, "showMaxLabel": True}
    drawn = [p[1] for s in option["series"] if s["id"] == "q|raw|0" for p in s["data"]]
    assert max(drawn) == pytest.approx(8.5e-9, rel=1e-3)
    diff = traces.panel_view([quiet], PANELS_BY_KEY["sampler_logp_diff"], {"q": "all"}, ["q"])
    assert "float noise: every value below 4.5e-3 (largest 3.3e-6)" in diff.subtitle

    loud = _series(_mismatch_frame(np.full(20, 0.02), np.full(20, 0.5)), key="l")
    both = traces.panel_view([quiet, loud], panel, {"q": "all", "l": "all"}, ["q", "l"])
    assert "float noise" not in both.subtitle and both.y_range is None and both.noise_floor is None


# ------------------------------------------------------------------------------ NaN steps


def test_nan_step_is_a_gap_never_a_dip():
    """Steps 0..39 with the value NaN at step 5: the raw line and its EMA break there (a NaN point
    at x 5, half-way between 4 and 6), no point of the line is 0, and the grid sends the break
    as null; the readout has no value at step 5. A sparse series (8 points) is not broken."""
    y = 0.5 + 0.01 * np.arange(40)
    y[5] = np.nan
    s = _series(pd.DataFrame({Step.STEP: np.arange(40), Step.SEQ_CLIP_FRACTION: y}))
    panel = PANELS_BY_KEY["seq_clip"]
    drawn_traces = traces.run_traces(s, panel, smoothing=0.6, readout=1.0)
    raw, ema, readout = drawn_traces
    for t in (raw, ema):
        x, v = np.asarray(t.x, np.float64), np.asarray(t.y, np.float64)
        (gap,) = np.flatnonzero(np.isnan(v))
        assert x[gap] == 5 and x[gap - 1] == 4 and x[gap + 1] == 6
        assert np.nanmin(v) > 0.4  # never a dip to 0
    assert 5 not in np.asarray(readout.x).tolist()
    option, _ = echarts_grid.grid_option([s], [panel], [drawn_traces])
    line = next(d for d in option["series"] if d["id"] == "r|raw|0")
    assert [5, None] in line["data"]
    sparse = _series(
        pd.DataFrame({Step.STEP: np.arange(8), Step.SEQ_CLIP_FRACTION: [0.1, np.nan] * 4})
    )
    (line,) = traces.run_traces(sparse, panel)
    assert not np.isnan(np.asarray(line.y, np.float64)).any()  # markers, no breaks


# ----------------------------------------------------------------- the second column's marks


def test_p90_is_open_triangles_whatever_the_line_style():
    """An unknown algorithm's mean line is dotted; its p90 is never a line but open triangles
    (ECharts emptyTriangle, Plotly triangle-up-open), named so in the panel's title."""
    df = pd.DataFrame(
        {Step.STEP: np.arange(30), Step.LENGTH_MEAN: np.full(30, 4.0), Step.LENGTH_P90: 6.0}
    )
    s = _series(df, algorithm="unknown")
    panel = PANELS_BY_KEY["length"]
    assert panel.title == "Completion length: mean (line), p90 (open triangles)"
    drawn_traces = traces.run_traces(s, panel)
    option, _ = echarts_grid.grid_option([s], [panel], [drawn_traces])
    by_role = {d["id"].split("|")[1]: d for d in option["series"]}
    assert by_role["raw"]["type"] == "line" and by_role["raw"]["lineStyle"]["type"] == "dotted"
    second = by_role["second"]
    assert second["type"] == "scatter" and second["symbol"] == "emptyTriangle"
    assert "lineStyle" not in second
    (p90,) = [t for t in drawn_traces if isinstance(t, traces.Trace) and t.role == traces.SECOND]
    assert (
        plotly_traces.plotly_trace(p90, panel, traces.X_STEP)["marker"]["symbol"]
        == "triangle-up-open"
    )


# ------------------------------------------------------------------- out of range vs binding


def test_seq_clip_state_hand_computed():
    """ε 0.02/0.03: band log(0.98) = -0.0202 .. log(1.03) = 0.0296. s = 1.09 (log 0.0862) with
    A = -0.71 is out of range and not binding (A < 0 above the band: the min keeps the unclipped
    term); with A = +0.5 it binds; s = 0.9 (log -0.105) binds with A < 0, not with A > 0; A = 0
    never binds; inside is inside. Recorded seq_clip_low/high win over the sign rule; without
    an advantage the state is unknown (OUT)."""
    band = (math.log(0.98), math.log(1.03))
    df = pd.DataFrame(
        {
            Seq.SEQ_LOG_RATIO: [
                0.0,
                math.log(1.09),
                math.log(1.09),
                math.log(0.9),
                math.log(0.9),
                math.log(1.09),
            ],
            Seq.SEQ_CLIPPED: [False, True, True, True, True, True],
            Seq.ADVANTAGE: [0.3, -0.71, 0.5, -0.3, 0.3, 0.0],
        }
    )
    A = aggregate
    expected = [A.INSIDE, A.OUT_NOT_BINDING, A.BINDS, A.BINDS, A.OUT_NOT_BINDING, A.OUT_NOT_BINDING]
    assert aggregate.seq_clip_state(df, band).tolist() == expected
    recorded = df.assign(**{Seq.SEQ_CLIP_LOW: [0.0] * 6, Seq.SEQ_CLIP_HIGH: [0, 0, 0, 0, 1.0, 0]})
    assert aggregate.seq_clip_state(recorded, band).tolist()[3:5] == [A.OUT_NOT_BINDING, A.BINDS]
    no_adv = df.drop(columns=[Seq.ADVANTAGE])
    assert aggregate.seq_clip_state(no_adv, band).tolist() == [A.INSIDE] + [A.OUT] * 5
    text = aggregate.binding_sentence(aggregate.seq_clip_state(df, band), "seq")
    assert text.startswith(
        "5 of 6 sequences lie out of range; out of range is not clipped: the clip binds on 2 "
    )
    assert "and not on 3 " in text and "the gradient is removed" in text
    grpo = aggregate.binding_sentence(aggregate.seq_clip_state(df, band), "token")
    assert "the sequence clip would bind on 2 " in grpo and "would be removed" in grpo
    assert grpo.endswith("this run's loss clips tokens, not sequences.")


# ---------------------------------------------------------------------- links with commas


def _ref(key: str, name: str) -> RunRef:
    return RunRef(key=key, name=name, algorithm="gspo", status="finished", source="parquet")


def test_link_runs_comma_separated_or_repeated():
    """?runs=a,b is two runs, as ?runs=a&runs=b; a run whose name holds a comma is found whole;
    a part no run answers to is named ("not found"), the rest selected."""
    runs = [_ref("k1", "a"), _ref("k2", "b"), _ref("k3", "c,d")]
    labels = ui.stable_labels(runs)
    assert ui.resolve_link(["a,b"], runs, labels) == (["k1", "k2"], [])
    assert ui.resolve_link(["a", "b"], runs, labels) == (["k1", "k2"], [])
    assert ui.resolve_link(["c,d"], runs, labels) == (["k3"], [])
    keys, notes = ui.resolve_link(["a, nope<b> ,,k2"], runs, labels)
    assert keys == ["k1", "k2"] and notes == ["not found: 'nope<b>' (no run has this name or id)"]


def test_a_link_waits_for_runs_still_being_read(monkeypatch):
    """An object store's first render may hold none of the link's runs (their run.json still
    being read): the link is resolved again as runs arrive, says nothing is "not found" until
    every run is read, and stops once the user picks other runs."""

    class Params:
        def get_all(self, key):
            return ["b,nope"] if key == "runs" else []

    state: dict = {}
    monkeypatch.setattr(ui.st, "session_state", state)
    monkeypatch.setattr(ui.st, "query_params", Params())
    a, b = _ref("k1", "a"), _ref("k2", "b")
    ui._runs_from_link([a], ui.stable_labels([a]), reading=1999)
    keys, notes = state[ui.LINK_KEY]
    assert keys == [] and notes == [
        "1999 runs are still being read: the link's runs are added as they are"
    ]
    state["runs"] = []  # the bound picker, drawn with none of them
    ui._runs_from_link([a, b], ui.stable_labels([a, b]), reading=0)  # every run read
    assert state[ui.LINK_KEY] == (["k2"], ["not found: 'nope' (no run has this name or id)"])
    assert ui.LINK_OPEN not in state
    # the user picks other runs while reads go on: the link no longer moves the picker
    state.clear()
    ui._runs_from_link([a], ui.stable_labels([a]), reading=5)
    state["runs"] = ["k1"]
    ui._runs_from_link([a, b], ui.stable_labels([a, b]), reading=3)
    assert ui.LINK_OPEN not in state and state[ui.LINK_KEY][0] == []


# ------------------------------------------------------------------ rollout axis and lags


def test_rollout_position_hand_computed():
    """Rollout 0 has steps 0-3: positions 0, 0.25, 0.5, 0.75; rollout 1 has two steps: 1, 1.5; an
    unknown rollout is NaN (never rollout 0)."""
    df = pd.DataFrame({Step.ROLLOUT: [0, 0, 0, 0, 1, 1, None]})
    got = traces.rollout_position(df)
    np.testing.assert_array_equal(got[:6], [0, 0.25, 0.5, 0.75, 1, 1.5])
    assert np.isnan(got[6])
    assert traces.X_ROLLOUT in traces.with_rollout_position(df).columns


def test_lag_traces_hand_computed():
    """KL old→new at declared lags 0, 1, 2, 3, 0, 1, 2, 3: means (0, 0) -> 0, (0.1, 0.3) -> 0.2,
    (0.2, 0.6) -> 0.4, (0.4, NaN) -> 0.4 over one step; the readout counts the steps."""
    df = pd.DataFrame(
        {
            Step.STEP: range(8),
            Step.POLICY_LAG: [0, 1, 2, 3] * 2,
            Step.KL_OLD_MEAN: [0, 0.1, 0.2, 0.4, 0, 0.3, 0.6, np.nan],
        }
    )
    s = _series(df)
    assert traces.declared_lags(s).tolist() == [
        0,
        1,
        2,
        3,
    ] and traces.splits_by_lag([s])
    line, readout = traces.lag_traces(s, PANELS_BY_KEY["kl_old"])
    np.testing.assert_array_equal(line.x, [0, 1, 2, 3])
    np.testing.assert_allclose(line.y, [0, 0.2, 0.4, 0.4], rtol=1e-6)
    assert readout.second.tolist() == [2, 2, 2, 1]
    on_off = _series(df.assign(**{Step.POLICY_LAG: [0, 1] * 4}))
    assert not traces.splits_by_lag([on_off])  # lags 0/1 only: the steps control says it all


# --------------------------------------------------------------------- pages, recorded runs


def _record(root, name: str, *, sampler_noise: float, steps: int = STEPS, seed: int = 0):
    """A GSPO run by the real recorder: rollout = step // 4, policy_lag = step % 4 (logprobs move
    further from old_logprobs with the lag: exactly equal at lag 0), the sampler's log-probs
    ``sampler_noise`` away from the trainer's, and grad_norm as an extra."""
    import torch

    from training_hooks import RunRecorder

    gen = torch.Generator().manual_seed(seed)
    P, G, T = 2, 4, 6
    with RunRecorder(
        root=root, name=name, algorithm="gspo", mlflow=False, group_size=G, flush_interval_s=0.2
    ) as rec:
        for step in range(steps):
            lag = step % 4
            old = -torch.rand(P * G, T, generator=gen) * 3 - 2  # log-probs <= 0 with the noise
            logp = old + 0.05 * lag * torch.randn(P * G, T, generator=gen)
            rec.log_step(
                step,
                rewards=torch.randint(0, 2, (P, G), generator=gen).float(),
                logprobs=logp,
                old_logprobs=old,
                mask=torch.ones(P * G, T, dtype=torch.bool),
                sampler_logprobs=old + sampler_noise * torch.randn(P * G, T, generator=gen),
                rollout=step // 4,
                policy_lag=lag,
                extra={"grad_norm": 1.0 + step},
            )
        return Path(rec.run_dir)


@pytest.fixture(scope="module")
def screen_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("screen")
    _record(root, "quiet", sampler_noise=1e-7)  # float32 noise: k3 ~1e-14
    _record(root, "loud", sampler_noise=0.3, steps=12, seed=1)
    return root


def _steps(run_dir: Path) -> pd.DataFrame:
    df = pq.read_table(run_dir / STEPS_DIR).to_pandas()
    return df.sort_values(Step.STEP).reset_index(drop=True)


def test_compare_lag_split_rollout_axis_and_one_x_range(screen_root, app_env):
    """Two runs of 24 and 12 steps: every panel's x axis runs 0..25 (nice extent of 0..23); the
    per-lag chart has each run's mean KL old→new at lags 0-3 as in its step table; the rollout
    axis puts step k at k // 4 + (k % 4) / 4; the Gradient norm panel draws grad_norm."""
    app_env(screen_root)
    ids = run_ids(screen_root)
    at = _open("compare", {"runs": [ids["quiet"], ids["loud"]]})
    _assert_clean(at)
    spec = next(json.loads(e.proto.spec) for e in at.get("echarts_chart") if "grid-0" in e.proto.id)
    assert {(a["min"], a["max"]) for a in spec["xAxis"]} == {(0.0, 25.0)}
    grid = _grid(at)
    grad = [t for t in grid["Gradient norm"]["traces"] if t["role"] == "raw"]
    assert {t["legendgroup"] for t in grad} == {ids["quiet"], ids["loud"]}

    (lag_el,) = [e for e in at.get("echarts_chart") if e.proto.id.endswith("lag-split")]
    lag_spec = json.loads(lag_el.proto.spec)
    i = [t["text"] for t in lag_spec["title"]].index("KL old → new")
    assert lag_spec["xAxis"][i]["interval"] == 1 and lag_spec["xAxis"][i]["max"] == 3.0
    for name in ("quiet", "loud"):
        table = _steps(screen_root / ids[name])
        want = table.groupby(Step.POLICY_LAG)[Step.KL_OLD_MEAN].mean()
        (line,) = [s for s in lag_spec["series"] if s["id"] == f"{ids[name]}|raw|{i}"]
        assert [p[0] for p in line["data"]] == [0, 1, 2, 3]
        np.testing.assert_allclose([p[1] for p in line["data"]], want.to_numpy(), rtol=1e-5)
        assert want.iloc[0] == 0 and want.iloc[3] > want.iloc[1] > 0  # further at a later lag

    at.button_group(key="x").set_value(traces.X_ROLLOUT).run()
    _assert_clean(at)
    reward = _grid(at)["Reward"]
    (raw,) = [
        t for t in reward["traces"] if t["legendgroup"] == ids["quiet"] and t["role"] == "raw"
    ]
    k = np.arange(STEPS)
    np.testing.assert_allclose(_arr(raw["x"]), k // 4 + (k % 4) / 4)


def test_compare_noise_panel_and_nan_step(screen_root, app_env, tmp_path):
    """The quiet run alone: its sampler/trainer mismatch is float noise (k3 below 1e-5), said in
    the panel's subtitle and drawn at 0 on a 0..1 (×1e-5) axis. A step whose diagnostics are NaN
    (the step table rewritten by hand) is a null in the drawn line, never a 0."""
    import shutil

    ids = run_ids(screen_root)
    root = tmp_path / "root"
    shutil.copytree(screen_root / ids["quiet"], root / ids["quiet"])
    (part,) = sorted((root / ids["quiet"] / STEPS_DIR).glob("*.parquet"))
    table = pq.read_table(part)
    df = table.to_pandas()
    df.loc[df[Step.STEP] == 9, [Step.SEQ_CLIP_FRACTION, Step.KL_OLD_MEAN]] = np.nan
    pq.write_table(pa.Table.from_pandas(df, schema=table.schema, preserve_index=False), part)
    app_env(root)
    at = _open("compare", {"runs": [ids["quiet"]], "steps": "all"})
    _assert_clean(at)
    grid = _grid(at)
    (title,) = [t for t in grid if t.startswith("Mismatch: KL")]
    kl = _steps(root / ids["quiet"])[Step.SAMPLER_KL_MEAN]
    assert kl.abs().max() < K3_FLOOR
    assert "float noise: every value below 1e-5" in grid[title]["subtitle"]
    spec = next(json.loads(e.proto.spec) for e in at.get("echarts_chart") if "grid-0" in e.proto.id)
    axis = spec["yAxis"][[t["text"] for t in spec["title"]].index(title)]
    assert (axis["min"], axis["max"]) == (0.0, 1.0) and axis["name"] == "nats / token (×1e-5)"
    (clip_title,) = [t for t in grid if t.startswith("Sequence-unit clip fraction")]
    (raw,) = [t for t in grid[clip_title]["traces"] if t["role"] == "raw"]
    at9 = [y for x, y in zip(raw["x"], raw["y"], strict=True) if x == 9]
    assert at9 == [None]


@pytest.mark.slow
def test_link_with_a_comma_list(recorded_root, app_env):
    """?runs=<id>,<id> selects both runs; a part that names no run is named in an escaped
    warning while the others are shown."""
    ids = run_ids(recorded_root)
    app_env(recorded_root)
    both = f"{ids['grpo-small']},{ids['gspo-small']}"
    at = _open_link("compare", {"runs": both})
    assert not at.exception
    assert at.sidebar.multiselect(key="runs").value == [ids["grpo-small"], ids["gspo-small"]]
    assert not at.warning
    at = _open_link("compare", {"runs": "gspo-small,no<b>pe</b>"})
    assert at.sidebar.multiselect(key="runs").value == [ids["gspo-small"]]
    warnings = [_unescaped(w.value) for w in at.warning]
    assert any("not found: 'no<b>pe</b>'" in w for w in warnings), warnings
    assert not any("<b>" in w.value for w in at.warning)


def test_ratios_caption_counts_binding_by_hand(screen_root, app_env):
    """The Ratios caption's out-of-range and binding counts are those of the run's off-policy
    sequences, recomputed here from its sequence table: out of range = seq_clipped; binding =
    seq_clip_low + seq_clip_high > 0."""
    app_env(screen_root)
    ids = run_ids(screen_root)
    at = _open("ratios", {"run": ids["quiet"]})
    _assert_clean(at)
    run_dir = screen_root / ids["quiet"]
    seqs = pq.read_table(run_dir / SEQUENCES_DIR).to_pandas()
    off = _steps(run_dir).query(f"{Step.POLICY_LAG} >= 1")[Step.STEP]
    seqs = seqs[seqs[Seq.STEP].isin(off)]
    out = seqs[Seq.SEQ_CLIPPED].astype(bool)
    binds = out & ((seqs[Seq.SEQ_CLIP_LOW] + seqs[Seq.SEQ_CLIP_HIGH]) > 0)
    assert 0 < binds.sum() < out.sum()  # the run was made so: some bind, some do not
    text = " ".join(c.value for c in at.caption)
    assert (
        f"{out.sum():,} of {len(seqs):,} sequences lie out of range; out of range is not "
        f"clipped: the clip binds on {binds.sum():,} "
    ) in text
    assert f"and not on {(out & ~binds).sum():,} " in text
    fig = next(
        json.loads(e.proto.spec) for e in at.get("plotly_chart") if "tok_vs_seq" in e.proto.id
    )
    counts = {t["name"]: len(_arr(t["x"])) for t in fig["data"]}
    assert counts["out of range, clip binds (gradient removed)"] == binds.sum()
