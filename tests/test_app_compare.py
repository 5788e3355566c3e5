"""The Compare page: the steps control (policy lag), metrics beyond the built-in panels (groups,
constants, counters), the log s zoom, empty panels and the point budget. Pure parts on hand-made
tables; the page through AppTest on runs written by the real recorder."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pandas as pd
import plotly.io as pio
import pyarrow.parquet as pq
import pytest
from app_runs import run_ids
from hypothesis import given, settings
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp
from test_app_pages import _arr, _assert_clean, _grid, _open

from app import charts, lag, ui
from app import compare_view as cv
from training_hooks.metric_map import Derived
from training_hooks.schema import STEPS_DIR, Step

STEPS = 8  # steps of the recorded runs: even steps on-policy, odd steps off-policy


# --------------------------------------------------------------------------- pure: compare_view


def test_panel_subset_rule():
    """auto: off-policy for the clip/KL-old panels of a run with both kinds, else all; a user
    choice applies as is; an unknown choice is refused."""
    both = lag.lag_split(pd.DataFrame({Step.STEP: [0, 1], Step.POLICY_LAG: [0, 1]}))
    on_only = lag.lag_split(pd.DataFrame({Step.STEP: [0, 1], Step.POLICY_LAG: [0, 0]}))
    assert cv.panel_subset(True, cv.AUTO, both) == lag.OFF_POLICY
    assert cv.panel_subset(False, cv.AUTO, both) == lag.ALL
    assert cv.panel_subset(True, cv.AUTO, on_only) == lag.ALL
    assert cv.panel_subset(True, cv.AUTO, None) == lag.ALL
    assert cv.panel_subset(False, lag.ON_POLICY, on_only) == lag.ON_POLICY
    with pytest.raises(ValueError, match="choice must be one of"):
        cv.panel_subset(True, "some", both)


def test_subset_text_names_the_steps_per_run():
    assert cv.subset_text({"a": lag.OFF_POLICY, "b": lag.OFF_POLICY}) == "off-policy steps"
    assert cv.subset_text({"a": lag.OFF_POLICY, "b": lag.ALL}) == (
        "off-policy steps of a; all steps of b"
    )
    many = {f"r{i}": lag.ALL for i in range(4)} | {"x": lag.OFF_POLICY}
    assert cv.subset_text(many) == "all steps of 4 of 5 runs; off-policy steps of x"


def test_counters_and_groups():
    """Bookkeeping counters by full name or prefix (a duration ending in /step is no counter);
    groups by the first name component."""
    for name in ("epoch", "rollout", "policy_lag", "num_groups", "training/global_step"):
        assert cv.is_counter(name), name
    assert cv.is_counter("progress/done_frac")
    assert not cv.is_counter("timing_s/step") and not cv.is_counter("actor/grad_norm")
    assert cv.metric_group("actor/pg_loss") == "actor/"
    assert cv.metric_group("env/all/reward/total") == "env/"
    assert cv.metric_group("grad_norm") == cv.OTHER_GROUP
    assert cv.metric_group("/odd") == cv.OTHER_GROUP


def test_extra_stats_and_classify():
    """Constants (one value in every run that logged it) become values, counters vanish, the rest
    are curves by group; our own runs' unprefixed extras are drawn by default, foreign ones not."""
    own = pd.DataFrame(
        {
            Step.STEP: [0, 1, 2],
            Step.REWARD_MEAN: [0.1, 0.2, 0.3],  # a built-in column: not an extra
            "lr": [1e-6, 1e-6, 1e-6],
            "grad_norm": [1.0, np.nan, 3.0],
            "epoch": [0, 0, 1],
            "actor/x": [1.0, 2.0, 3.0],
            "note": ["a", "b", "c"],  # not numeric
            "empty": [np.nan] * 3,  # nothing logged
        }
    )
    imported = pd.DataFrame({Step.STEP: [0, 1], "lr": [2e-6, 2e-6], "actor/x": [1.0, 1.0]})
    stats = {"own": cv.extra_stats(own), "imp": cv.extra_stats(imported)}
    assert set(stats["own"]) == {"lr", "grad_norm", "epoch", "actor/x"}
    assert stats["own"]["grad_norm"] == cv.ExtraStats(2, 1.0, 3.0)
    ex = cv.classify_extras(stats, own=["own"])
    assert ex.counters == ("epoch",)
    assert ex.constants == (cv.Constant("lr", "own", 1e-6, 3), cv.Constant("lr", "imp", 2e-6, 2))
    # actor/x varies in one run: a curve (its constant run is drawn too, as a flat line)
    assert ex.groups == {cv.OTHER_GROUP: ("grad_norm",), "actor/": ("actor/x",)}
    assert ex.default_groups == (cv.OTHER_GROUP,) and ex.n_curves == 2
    assert cv.classify_extras(stats, own=[]).default_groups == ()
    frame = cv.constants_frame(ex.constants)
    assert frame.to_dict("records")[0] == {
        "metric": "lr",
        "run": "own",
        "value": "1e-06",
        "steps logged": 3,
    }


def test_filter_names_words_in_any_order():
    names = ["actor/grad_norm", "critic/score/mean", "timing_s/gen", "grad_norm"]
    assert cv.filter_names(names, "norm GRAD") == ["actor/grad_norm", "grad_norm"]
    assert cv.filter_names(names, "") == names
    assert cv.filter_names(names, "(.*") == []  # plain text, never a pattern


# ------------------------------------------------------------------------- pure: chart builders


def _series(df, key="r", algorithm="gspo", eps=None, label=None) -> charts.RunSeries:
    return charts.RunSeries(
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
    values alone (debiased EMA of [0.51, 0.53, 0.55, 0.57, 0.59], never mixing in the zeros)."""
    s = _series(_alternating())
    s = charts.RunSeries(**{**vars(s), "lag": lag.lag_split(s.df)})
    p = charts.PANELS_BY_KEY["seq_clip"]
    raw, smooth = charts.run_traces(s, p, smoothing=0.5, subset=lag.OFF_POLICY)
    np.testing.assert_array_equal(raw["x"], [1, 3, 5, 7, 9])
    np.testing.assert_allclose(raw["y"], [0.51, 0.53, 0.55, 0.57, 0.59], rtol=1e-7)
    # EMA weight 0.5, debiased: m1 = 0.51; m2 = (0.5*0.51 + 0.53)/(1.5) = 0.52333...
    np.testing.assert_allclose(smooth["y"][:2], [0.51, (0.5 * 0.51 + 0.53) / 1.5], rtol=1e-6)
    assert "off-policy steps" in raw["name"]
    on = charts.run_traces(s, p, subset=lag.ON_POLICY)[0]
    np.testing.assert_array_equal(on["x"], [0, 2, 4, 6, 8])
    assert set(np.asarray(on["y"]).tolist()) == {0.0}
    assert len(charts.run_traces(s, p, subset=lag.ALL)[0]["x"]) == 10
    unknown = _series(pd.DataFrame({Step.STEP: [0, 1], Step.SEQ_CLIP_FRACTION: [0.1, 0.2]}))
    assert charts.run_traces(unknown, p, subset=lag.OFF_POLICY) == []  # lag unknown: no subset


def test_compact_keeps_values_in_smaller_types():
    steps = charts.compact(np.array([0.0, 5.0, 4999.0]))
    assert steps.dtype == np.int32 and steps.tolist() == [0, 5, 4999]
    y = charts.compact(np.array([1e-6, 0.25, 123.456]))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [1e-6, 0.25, 123.456], rtol=1e-7)
    assert charts.compact(np.array([3e9, 4e9])).dtype == np.float32  # too large for int32


@settings(max_examples=200, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hs.integers(0, 40),
        elements=hs.one_of(
            hs.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
            hs.floats(-1e3, 1e3),
        ),
    )
)
def test_browser_array_is_the_7_digit_decimal(v):
    """Two routes to one answer: the vectorised rounding equals Python's '%.7g' of each value (the
    shortest decimal within float32's precision); non-finite values become None (a gap)."""
    out = charts.browser_array(v)
    assert len(out) == len(v)
    for got, x in zip(out, v.tolist(), strict=True):
        if not math.isfinite(x):
            assert got is None
        else:
            assert got == float(f"{x:.7g}"), (x, got)
            assert abs(got - x) <= 5e-7 * abs(x)
    json.dumps(out, allow_nan=False)  # plain JSON: no NaN/Infinity tokens


def test_browser_array_keeps_ints_and_shortens_float32():
    assert charts.browser_array(np.array([0, 5, 4999], np.int32)) == [0, 5, 4999]
    arr = charts.browser_array(np.float32([0.5]))
    assert copy.deepcopy(arr) is arr  # plotly's Figure copies its data: not these lists
    y = np.float32([0.1, 0.2, 1 / 3])
    assert charts.browser_array(y) == [0.1, 0.2, 0.3333333]
    assert len(json.dumps(charts.browser_array(y))) < len(json.dumps(y.tolist())) / 1.5


def test_data_revision_changes_with_any_value():
    a = [{"x": np.arange(3), "y": np.float32([0.1, 0.2, 0.3])}]
    b = [{"x": np.arange(3), "y": np.float32([0.1, 0.2, 0.3])}]
    c = [{"x": np.arange(3), "y": np.float32([0.1, 0.2, 0.30001])}]
    d = [{"x": np.arange(3), "y": np.float32([0.1, 0.2, 0.3])}] * 2
    assert charts.data_revision(a) == charts.data_revision(b)
    assert len({charts.data_revision(t) for t in (a, c, d)}) == 3


def test_grid_figure_is_cheap_to_redraw():
    """What keeps plotly.js from recomputing the grid when Streamlit hands it a copy: no template
    object (a new one forces a full redraw), plain arrays (typed arrays are decoded anew on each
    redraw) under a datarevision digest, and no axis that measures labels for its margins."""
    df = pd.DataFrame({Step.STEP: np.arange(6), Step.REWARD_MEAN: np.linspace(0.1, 0.6, 6)})
    s = _series(df)
    panels = [charts.PANELS_BY_KEY["reward"], charts.PANELS_BY_KEY["loss"]]
    traces = [charts.run_traces(s, p, smoothing=0.5) for p in panels]
    fig = charts.grid_figure([s], panels, traces)
    spec = json.loads(pio.to_json(fig, validate=False))
    lay = spec["layout"]
    assert lay["template"] == "none" and "bdata" not in json.dumps(spec)
    assert lay["datarevision"] == charts.data_revision([t for ts in traces for t in ts])
    axes = [k for k in lay if k.startswith(("xaxis", "yaxis"))]
    assert len(axes) == 4
    for k in axes:
        assert lay[k]["automargin"] is False and lay[k]["ticklabeloverflow"] == "allow"
    raw = spec["data"][0]
    assert raw["x"] == [0, 1, 2, 3, 4, 5]
    assert raw["y"] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert lay["paper_bgcolor"] == lay["plot_bgcolor"] == "rgba(0, 0, 0, 0)"


def test_log_s_panel_zooms_on_gspo_band_and_counts_outside():
    """4x GSPO's band (3e-4/4e-4): [4 log(1-3e-4), 4 log(1+4e-4)] = [-1.20018e-3, 1.59968e-3];
    of the means [0, 1e-3, -2e-3, 5e-4, 2e-3] two lie outside."""
    df = pd.DataFrame(
        {Step.STEP: np.arange(5), Step.SEQ_LOG_RATIO_MEAN: [0, 1e-3, -2e-3, 5e-4, 2e-3]}
    )
    p = charts.PANELS_BY_KEY["seq_log_ratio"]
    view = charts.panel_view([_series(df)], p, {"r": lag.ALL}, ["r"])
    lo, hi = view.y_range
    assert lo == pytest.approx(4 * math.log1p(-3e-4)) and hi == pytest.approx(4 * math.log1p(4e-4))
    assert "2 of 5 points outside" in view.subtitle and view.subtitle.startswith("all steps")
    # only GRPO runs: no zoom; zoom off: none either
    grpo = charts.panel_view([_series(df, algorithm="grpo")], p, {"r": lag.ALL}, ["r"])
    assert grpo.y_range is None
    off = charts.panel_view([_series(df)], p, {"r": lag.ALL}, ["r"], zoom_band=False)
    assert off.y_range is None
    fig = charts.grid_figure([_series(df)], [p], [[{"type": "scatter", "x": [0], "y": [0]}]])
    labels = [a for a in fig.layout.annotations if a.text.startswith("log(")]
    # the two band labels sit on opposite sides of their lines: they cannot overlap
    assert sorted(a.yanchor for a in labels) == ["bottom", "top"]


def test_empty_panel_note_sits_in_its_own_cell():
    """The note of an empty panel lies inside that panel's cell, not on a panel with data (Plotly
    draws no axes for a subplot without traces, so an axis-relative note fell on the first one)."""
    df = pd.DataFrame({Step.STEP: np.arange(4), Step.REWARD_MEAN: [0.1, 0.2, 0.3, 0.4]})
    s = [_series(df)]
    panels = [charts.PANELS_BY_KEY["reward"], charts.PANELS_BY_KEY["kl_ref"]]
    tr = [charts.run_traces(s[0], p) for p in panels]
    views = [cv.PanelView(), cv.PanelView(empty_note="no data in the off-policy steps shown")]
    fig = charts.grid_figure(s, panels, tr, views=views)
    (note,) = [a for a in fig.layout.annotations if a.text.startswith("no data")]
    assert note.text == "no data in the off-policy steps shown"
    assert note.xref == "paper" and note.yref == "paper"
    x2, y2 = fig.layout.xaxis2.domain, fig.layout.yaxis2.domain
    assert x2[0] < note.x < x2[1] and y2[0] < note.y < y2[1]
    assert not fig.layout.xaxis.domain[0] < note.x < fig.layout.xaxis.domain[1]


def test_metric_names_are_text_in_figures():
    """A metric or run name from disk is escaped in Plotly's HTML-like titles and trace names."""
    name = "<a href='x'>evil</a>"
    df = pd.DataFrame({Step.STEP: [0, 1, 2], name: [1.0, 2.0, 3.0]})
    s = _series(df, label="<b>run</b>")
    p = charts.extra_panel(name)
    fig = charts.grid_figure([s], [p], [charts.run_traces(s, p)])
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "<a" not in texts and "&lt;a href='x'&gt;evil&lt;/a&gt;" in texts
    assert fig.data[0].name == "&lt;b&gt;run&lt;/b&gt;"
    assert "<b>run" not in fig.data[0].hovertemplate


def test_fraction_axes_start_at_zero():
    """A flat 0 (e.g. no truncation) reads as 0 on an axis from 0, not on a 0-centred one."""
    df = pd.DataFrame({Step.STEP: [0, 1, 2], Step.TRUNCATED_FRACTION: [0.0, 0.0, 0.0]})
    p = charts.PANELS_BY_KEY["truncation"]
    s = [_series(df)]
    fig = charts.grid_figure(
        s, [p], [charts.run_traces(s[0], p)], views=[charts.panel_view(s, p, {}, ["r"])]
    )
    assert fig.layout.yaxis.rangemode == "nonnegative"


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
    p = charts.PANELS_BY_KEY[key]
    opts = {"smoothing": 0.6, "bands": True}
    pts = charts.trace_points(p, 50, budget=6000, max_points=500, **opts)
    total = sum(
        len(t["x"]) for s in series for t in charts.run_traces(s, p, max_points=pts, **opts)
    )
    assert 0.5 * 6000 < total <= 6000, (pts, total)
    assert charts.trace_points(p, 2, budget=6000, max_points=500, **opts) == 500


def test_legend_wraps_long_names():
    assert charts._legend_rows([10] * 3) == 1
    assert charts._legend_rows([60] * 7) == 4  # 470 px each: two fit a 1,100 px row
    # one 526 px name sets the columns' width: 2 columns, so six entries take 3 rows, though
    # greedy packing would put 4 short ones side by side
    assert charts._legend_rows([68, 56, 35, 27, 30, 34]) == 3
    assert charts._legend_rows([68, 10, 10, 10, 10, 10, 10], width_px=1000) == 7


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
            old = -torch.rand(P * G, T, generator=gen) * 3
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
        "grad_norm": 1.0 + step,
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
        if t["legendgroup"] == key
        and "fill" not in t  # not the band
        and ("(EMA)" in t["hovertemplate"]) == ema
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
    # the grid goes out without Streamlit's Plotly theme, as plain arrays (grid_figure's docstring)
    (el,) = [e for e in at.get("plotly_chart") if e.proto.id.rsplit("-", 2)[-2] == "grid"]
    assert el.proto.theme == "" and "bdata" not in el.proto.spec
    assert at.button_group(key="steps").value == cv.AUTO
    grid = _grid(at)
    clip = grid["Sequence-unit clip fraction — sequence unit, ε 3e-4/4e-4"]
    assert clip["subtitle"] == "off-policy steps of alt; all steps of onpol"
    raw = _run_trace(clip, ids["alt"])
    np.testing.assert_array_equal(_arr(raw["x"]), [1, 3, 5, 7])
    np.testing.assert_array_equal(_arr(raw["y"]), odd[Step.SEQ_CLIP_FRACTION].to_numpy(np.float32))
    assert (odd[Step.SEQ_CLIP_FRACTION] > 0).all()  # off-policy steps do clip here
    smooth = _run_trace(clip, ids["alt"], ema=True)
    expected = charts.ema(odd[Step.SEQ_CLIP_FRACTION].to_numpy(), 0.6)
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
    np.testing.assert_array_equal(_arr(raw["x"]), [0, 2, 4, 6])
    assert set(_arr(raw["y"]).tolist()) == {0.0}  # on-policy: nothing clips
    assert grid["Reward"]["subtitle"] == "on-policy steps"

    at.button_group(key="steps").set_value(lag.ALL).run()
    raw = _run_trace(
        _grid(at)["Sequence-unit clip fraction — sequence unit, ε 3e-4/4e-4"], ids["alt"]
    )
    np.testing.assert_array_equal(_arr(raw["x"]), range(STEPS))


def test_empty_panel_says_so_on_its_own_cell(lag_root, app_env):
    """No run logged ref log-probs (nor loss, entropy, truncation): each of those panels has no
    trace and its own note, inside its own cell; panels with data carry none."""
    app_env(lag_root)
    at = _open("compare", {"runs": list(run_ids(lag_root).values())})
    _assert_clean(at)
    assert _grid(at)["KL to reference"]["traces"] == []
    notes = []
    for el in at.get("plotly_chart"):
        lay = json.loads(el.proto.spec)["layout"]
        heads = [a["text"] for a in lay.get("annotations", []) if a["text"].startswith("<b>")]
        for a in lay.get("annotations", []):
            if a["text"].startswith("no data"):
                cells = [
                    h
                    for i, h in enumerate(heads)
                    if _inside(a["x"], lay[f"xaxis{i + 1 if i else ''}"]["domain"])
                    and _inside(a["y"], lay[f"yaxis{i + 1 if i else ''}"]["domain"])
                ]
                notes.append((a["text"], cells))
    grid = _grid(at)
    empty = sorted(t for t, p in grid.items() if not p["traces"])
    assert "KL to reference" in empty and "Reward" not in empty
    # one note per empty panel, each inside its own panel's cell
    assert sorted(cells[0].split("</b>")[0][3:] for _, cells in notes) == empty
    assert {text for text, _ in notes} == {"no data for the selected runs"}


def _inside(v: float, domain: list[float]) -> bool:
    return domain[0] < v < domain[1]


def test_foreign_groups_collapsed_constants_and_counters(lag_root, app_env):
    """Extras beyond the schema: the run's own unprefixed one drawn by default after the built-in
    panels; prefixed groups only when asked (or searched); the constant lr in the constants table;
    the counters (epoch, training/global_step, progress/*) never drawn, named in a caption."""
    app_env(lag_root)
    ids = run_ids(lag_root)
    at = _open("compare", {"runs": [ids["alt"]]})
    _assert_clean(at)
    assert list(_grid(at, ("more",))) == ["grad_norm"]
    drawn = _grid(at)
    for counter in ("epoch", "training/global_step", "progress/done_frac", "lr"):
        assert counter not in drawn
    groups = at.multiselect(key="groups")
    assert groups.options == ["other (1)", "actor/ (2)", "timing_s/ (1)"]
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
    assert charts.PANELS_BY_KEY["seq_clip_binding"].column == Derived.SEQ_CLIP_BINDING
    assert not cv.extra_stats(pd.DataFrame({Derived.SEQ_CLIP_BINDING: [0.1, 0.2]}))


@pytest.fixture(scope="module")
def real_root(tmp_path_factory):
    """Every real log under ../shared/real_logs/ imported into one root (skip when absent)."""
    from test_importers_real import REAL, real_logs

    from training_hooks import importers

    if REAL is None:
        pytest.skip("../shared/real_logs/ is absent")
    root = tmp_path_factory.mktemp("real")
    for tool, path in real_logs():
        importers.import_run(tool, path, root=root)
    return root


def test_real_logs_builtin_panels_first_foreign_groups_collapsed(real_root, app_env):
    """The seven real logs selected together: one figure of built-in panels (not one chart per
    foreign metric: 927 before), both Tinker runs' reward in the Reward panel, the foreign metrics
    offered as groups, undrawn until asked; a group asked for draws at most 24 panels."""
    app_env(real_root)
    ids = run_ids(real_root)
    assert len(ids) == 7
    at = _open("compare", {"runs": list(ids.values())})
    _assert_clean(at)
    assert len(at.get("plotly_chart")) == 2  # the legend strip and the built-in panels
    grid = _grid(at)
    assert next(iter(grid)) == "Reward" and len(grid) == len(charts.PANELS)
    tinker = {k for n, k in ids.items() if "tinker" in n or "cog-rl" in n}
    assert len(tinker) == 2
    reward_runs = {t["legendgroup"] for t in grid["Reward"]["traces"]}
    assert tinker <= reward_runs and len(reward_runs) == 7
    options = at.multiselect(key="groups").options
    for group in ("actor/", "critic/", "timing_s/", "val-core/", "trl/", "env/"):
        assert any(o.startswith(group + " (") for o in options), (group, options)
    at.multiselect(key="groups").set_value(["val-aux/"]).run()
    more = _grid(at, ("more",))
    assert 0 < len(more) <= 24 and all(t.startswith("val-aux/") for t in more)
    assert "metrics match: drawing the first 24" in " ".join(c.value for c in at.caption)
