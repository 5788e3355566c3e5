"""AppTest drives every page on runs written by the real hooks, and on damaged and empty roots."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from app_runs import HTML_COMPLETION, STEPS, run_ids
from streamlit.testing.v1 import AppTest

from app import pages
from app.pages import MAIN
from training_hooks.metric_map import Derived
from training_hooks.schema import STEPS_DIR, Step

PAGES = tuple(page.url_path for page in pages.PAGES)  # every page of the app
TIMEOUT = 60


def _open(page: str, state: dict | None = None) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.run()
    if page != pages.HOME.url_path:
        at.switch_page(pages.script(page)).run()
    return at


def _figs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def _arr(v) -> np.ndarray:
    """A Plotly JSON array: a list, or Plotly 7's typed array {"dtype": ..., "bdata": base64,
    "shape": "rows, columns" for a 2-D one}."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        shape = v.get("shape")
        return a.reshape([int(n) for n in str(shape).split(",")]) if shape else a
    return np.asarray(v)


def _titles(at: AppTest) -> list[str]:
    return [(f["layout"].get("title") or {}).get("text", "") for f in _figs(at)]


def _grid(at: AppTest, which: tuple[str, ...] = ("grid", "more")) -> dict[str, dict]:
    """The Compare page's small multiples, over its ECharts grids (keys ``grid-N`` for the
    built-in panels, ``more-N`` for the metrics asked for): {panel title: {"traces": [...],
    "readouts": [...], "xaxis": {...}, "yaxis": {...}, "subtitle": str}}, each drawn trace as a
    Plotly-like dict (x, y, name, legendgroup = run key, role: raw / ema / band / second) read
    from the series; readouts are the hover series (rows of x and values)."""
    out = {}
    for el in at.get("echarts_chart"):
        if el.proto.id.rsplit("-", 2)[-2] not in which:
            continue
        spec = json.loads(el.proto.spec)
        for i, title in enumerate(spec["title"]):
            traces, readouts = [], []
            for s in spec["series"]:
                key, role = s["id"].split("|")[:2]
                if s["xAxisIndex"] != i or role in ("band-low", "band-line"):
                    continue
                if role == "readout":
                    readouts.append({"legendgroup": key, "data": s["data"]})
                    continue
                t = {
                    "x": [p[0] for p in s["data"]],
                    "y": [p[1] for p in s["data"]],
                    "name": s.get("name", ""),
                    "legendgroup": key,
                    "role": "band" if role == "band-height" else role,
                    "opacity": s.get("lineStyle", {}).get("opacity", 1.0),
                }
                traces.append(t)
            ya, xa = spec["yAxis"][i], spec["xAxis"][i]
            yaxis = {"type": ya["type"]} if ya["type"] == "log" else {}
            if "max" in ya:
                yaxis["range"] = [ya["min"], ya["max"]]
            out[title["text"]] = {
                "traces": traces,
                "readouts": readouts,
                "xaxis": {"title": {"text": xa["name"]}},
                "yaxis": yaxis,
                "subtitle": title.get("subtext", ""),
            }
    return out


def _unescaped(md: str) -> str:
    """A Markdown body with its backslash escapes removed (what the reader sees)."""
    return re.sub(r"\\(.)", r"\1", md)


def _assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


EXPECTED_CHARTS = {
    "runs": 0,
    "compare": 2,  # the legend strip, the built-in panels (grad_norm among them: no extra left)
    "health": 0,
    "ratios": 3,
    "groups": 3,
    "lengths": 4,
    "sequences": 1,
}


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_recorded_runs(page, recorded_root, app_env):
    """Each page renders the two recorded runs: no exception, no error, the expected charts."""
    app_env(recorded_root)
    at = _open(page)
    _assert_clean(at)
    assert at.title[0].value
    charts_drawn = len(at.get("plotly_chart")) + len(at.get("echarts_chart"))
    assert charts_drawn == EXPECTED_CHARTS[page], _titles(at)
    if page == "runs":
        df = at.dataframe[0].value
        assert sorted(df["name"]) == ["grpo-small", "gspo-small"]
        assert set(df["status"]) == {"finished"} and set(df["last step"]) == {STEPS - 1}
    if page == "compare":  # a legend strip and the small multiples
        grid = _grid(at)
        # 13 built-in panels + Gradient norm (the runs' extra grad_norm, a built-in panel now)
        assert len(grid) == 13 + 1 and "Gradient norm" in grid
        assert "Sequence-unit clip fraction — sequence unit, ε 3e-4/4e-4" in grid
        assert list(_grid(at, ("more",))) == []  # no other extra: no second chart
        # two runs, bands on (<= 3 runs): reward = 2 bands + raw per run (STEPS points: sparse,
        # drawn with markers and not smoothed)
        assert [t["role"] for t in grid["Reward"]["traces"]].count("band") == 2
        assert len(grid["Reward"]["traces"]) == 4
        assert all(
            {t["legendgroup"] for t in p["traces"]} == set(run_ids(recorded_root).values())
            for p in grid.values()
        )
        loss = grid["Loss"]["traces"][0]  # raw series of the first run: the recorded 0.25 * step
        np.testing.assert_allclose(_arr(loss["y"]), 0.25 * _arr(loss["x"]))
    if page == "health":
        assert len(at.expander) >= 2
    if page == "sequences":
        # the completion is model output: shown as plain code text, never as Markdown/HTML
        codes = [c.value for c in at.code]
        md = " ".join(m.value for m in at.markdown)
        assert len(codes) == 1 and codes[0].startswith(HTML_COMPLETION)
        assert "<script>" not in md and "**not bold**" not in md


def test_compare_widgets_change_the_figures(recorded_root, app_env):
    """x axis, smoothing, log scale and chart choice each change the drawn figure JSON."""
    app_env(recorded_root)
    at = _open("compare")
    reward = _grid(at)["Reward"]
    assert reward["xaxis"]["title"]["text"] == "optimizer step"
    assert len(reward["traces"]) == 4  # std band and raw for each of the 2 runs (sparse: no EMA)

    at.button_group(key="x").set_value(Derived.TOKENS_SEEN).run()
    _assert_clean(at)
    assert _grid(at)["Reward"]["xaxis"]["title"]["text"] == "response tokens seen"

    at.slider(key="smooth").set_value(0.0).run()
    assert len(_grid(at)["Reward"]["traces"]) == 4  # still no EMA trace for either run
    at.toggle(key="bands").set_value(False).run()
    assert len(_grid(at)["Reward"]["traces"]) == 2

    at.button_group(key="logy").set_value(["kl_ref"]).run()
    grid = _grid(at)
    assert grid["KL to reference"]["yaxis"]["type"] == "log"
    assert "type" not in grid["Reward"]["yaxis"]

    at.multiselect(key="panels").set_value(["reward", "loss"]).run()
    assert list(_grid(at, ("grid",))) == ["Reward", "Loss"]


def test_selection_filters_every_chart(recorded_root, app_env):
    """Selecting one run (the URL-bound ``runs`` widget) leaves only it in the legend and charts.

    (AppTest does not load bound query parameters; the browser test checks ?runs=... itself.)"""
    app_env(recorded_root)
    ids = run_ids(recorded_root)
    at = _open("compare", {"runs": [ids["gspo-small"]]})
    _assert_clean(at)
    assert at.sidebar.multiselect(key="runs").value == [ids["gspo-small"]]
    figs = [json.loads(el.proto.spec) for el in at.get("echarts_chart")]
    assert [t["name"] for t in figs[0]["series"]] == ["gspo-small · GSPO"]
    keys = {t["id"].split("|")[0] for f in figs[1:] for t in f["series"] if t["id"][0] != "|"}
    assert keys == {ids["gspo-small"]}  # (an id of no run, "|band-line|...", is GSPO's band)
    at.sidebar.multiselect(key="runs").set_value([ids["grpo-small"], ids["gspo-small"]]).run()
    assert len(json.loads(at.get("echarts_chart")[0].proto.spec)["series"]) == 2


def test_single_run_pages_follow_run_and_step(recorded_root, app_env):
    """Sequences: the table has B rows of the chosen step; changing the step changes the rows."""
    app_env(recorded_root)
    ids = run_ids(recorded_root)
    at = _open("sequences", {"run": ids["grpo-small"]})
    _assert_clean(at)
    assert at.selectbox(key="run").value == ids["grpo-small"]
    assert at.number_input(key="step").value == STEPS - 1
    assert len(at.dataframe[0].value) == 12
    at.number_input(key="step").set_value(2).run()
    _assert_clean(at)
    assert "at step 2" in " ".join(c.value for c in at.caption)


@pytest.mark.slow
def test_bad_data_is_named_not_raised(root_copy, app_env):
    """Corrupt part, missing run.json, older schema, no sequences: pages name the run and why."""
    ids = run_ids(root_copy)
    grpo, gspo = root_copy / ids["grpo-small"], root_copy / ids["gspo-small"]
    (grpo / STEPS_DIR / "part-000000900-000000901-r0000-000001.parquet").write_bytes(b"garbage")
    for part in (gspo / STEPS_DIR).glob("*.parquet"):
        t = pq.read_table(part).drop_columns([Step.KL_OLD_MEAN])
        pq.write_table(t, part)
    for p in (gspo / "sequences").glob("*"):
        p.unlink()
    (gspo / "run.json").unlink()
    (root_copy / "junk-run").mkdir()
    (root_copy / "junk-run" / "run.json").write_text("{not json")
    app_env(root_copy)
    for page in PAGES:
        at = _open(page)
        _assert_clean(at)
        raw = " ".join(
            [m.value for m in at.markdown]
            + [e.label for e in at.expander]
            + [w.value for w in at.warning]
            + [i.value for i in at.info]
        )
        text = _unescaped(raw)
        if page in ("runs", "compare", "health"):
            assert "Data problems" in text, page
            assert "unreadable" in text
        if page == "compare":
            assert "kl\\_old\\_mean" in raw  # the missing column is named (escaped Markdown)
            assert "run.json is missing" in text


@pytest.mark.slow
def test_empty_root_says_so(tmp_path, app_env):
    """An empty root: every page shows a message instead of charts."""
    app_env(tmp_path)
    for page in PAGES:
        at = _open(page)
        _assert_clean(at)
        msgs = " ".join([i.value for i in at.info] + [w.value for w in at.warning])
        assert "No run" in msgs or "no run" in msgs.lower(), (page, msgs)
        assert len(at.get("plotly_chart")) == 0


@pytest.mark.slow
def test_mlflow_only_run_on_the_pages(recorded_root, app_env, mlflow_uri, monkeypatch):
    """A TRL-style run only in MLflow is listed beside the Parquet runs and drawn on Compare with
    its names mapped (a sequence-level TRL run's clip_ratio/region_mean -> the sequence binding
    panel); per-sequence pages skip it."""
    from test_app_data import _log_trl_run

    run_id = _log_trl_run(mlflow_uri)
    app_env(recorded_root)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    at = _open("runs")
    _assert_clean(at)
    df = at.dataframe[0].value
    assert "trl-gspo" in set(df["name"]) and len(df) == 3
    key = f"mlflow:{run_id}"
    at = _open("compare", {"runs": [key]})
    _assert_clean(at)
    grid = _grid(at)
    binding = next(p for t, p in grid.items() if t.startswith("Sequence clip binding"))
    assert binding["traces"]
    # the logged 0.002 as the browser gets it: 7 significant digits (series_math.browser_array)
    np.testing.assert_array_equal(_arr(binding["traces"][0]["y"]), 0.002)
    assert "custom/foo" not in grid  # a foreign group waits until asked for
    assert "custom/ (1)" in at.multiselect(key="groups").options
    at.multiselect(key="groups").set_value(["custom/"]).run()
    assert "custom/foo" in _grid(at)  # an unmapped metric keeps its own name
    at = _open("ratios", {"runs": [key]})
    _assert_clean(at)  # falls back to the runs that have sequences
    assert len(at.get("plotly_chart")) == 3


def test_runs_page_imports_a_verl_log(root_copy, app_env, tmp_path):
    """The Runs page's import form turns a verl file-logger log into a run listed beside ours;
    a bad path gives an error message naming it, not a traceback."""
    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    log.write_text(
        "".join(
            json.dumps({"step": s, "data": {"critic/score/mean": 0.1 * s, "actor/ppo_kl": 1e-3}})
            + "\n"
            for s in (1, 2, 3)
        )
    )
    app_env(root_copy)
    at = _open("runs")
    _assert_clean(at)
    assert len(at.dataframe[0].value) == 2
    at.selectbox(key="import_source").select("verl")
    at.text_input(key="import_path").input(str(tmp_path / "missing.jsonl"))
    at.button(key="import_submit").click().run()
    assert not at.exception
    assert any("missing.jsonl" in _unescaped(e.value) for e in at.error)
    at.text_input(key="import_path").input(str(log))
    at.text_input(key="import_name").input("verl-exp")
    at.button(key="import_submit").click().run()
    _assert_clean(at)
    df = at.dataframe[0].value
    assert "verl-exp" in set(df["name"]) and len(df) == 3
    assert any("Imported 3 steps" in s.value for s in at.success)


def test_runs_page_imports_a_log_of_own_keys_through_a_key_map(root_copy, app_env, tmp_path):
    """The form's key map (as the CLI's --step / --map / --set / --group-size): a JSON-lines log
    of a loop's own keys becomes a run whose reward is the mapped key; a meaning we do not know
    is an error naming it, and a key map for a tool that reads its own keys is refused."""
    from training_hooks import schema

    log = tmp_path / "loop.jsonl"
    log.write_text(
        "".join(json.dumps({"it": s, "mean_r": 0.25 * s, "odd": 7}) + "\n" for s in (1, 2, 3, 4))
    )
    app_env(root_copy)
    at = _open("runs")
    at.selectbox(key="import_source").select("jsonl")
    at.text_input(key="import_path").input(str(log))
    at.text_area(key="import_key_map").input("rewrd=mean_r")
    at.button(key="import_submit").click().run()
    assert not at.exception
    assert any("'rewrd' is not one of our meanings" in _unescaped(e.value) for e in at.error)
    at.text_area(key="import_key_map").input("reward=mean_r\n")
    at.text_input(key="import_step_key").input("it")
    at.text_area(key="import_settings").input("epsilon=0.2")
    at.number_input(key="import_group_size").set_value(8)
    at.text_input(key="import_name").input("own-loop")
    at.button(key="import_submit").click().run()
    _assert_clean(at)
    assert any("Imported 4 steps" in s.value for s in at.success)
    (run,) = [p for p in root_copy.iterdir() if p.name.startswith("own-loop")]
    rec = schema.read_run_info(run).imported
    assert rec.key_map == {
        "map": {"reward_mean": {"from": "--map", "key": "mean_r"}},
        "step": {"from": "--step", "key": "it"},
    }
    assert rec.settings["group_size"]["value"] == 8
    assert rec.settings["epsilon"] == {"value": 0.2, "from": "--set epsilon"}
    steps = pd.read_parquet(run / "steps")
    assert steps["step"].tolist() == [1, 2, 3, 4]
    assert steps["reward_mean"].tolist() == [0.25, 0.5, 0.75, 1.0]
    # a key map given to a tool that reads its own keys: refused, nothing imported
    at.selectbox(key="import_source").select("trl")
    at.button(key="import_submit").click().run()
    assert not at.exception and at.error


def test_runs_page_imports_a_console_log_and_one_run_of_several(root_copy, app_env, tmp_path):
    """The form reads a TRL console log with the logging_steps typed in (its dicts carry no
    step), and a Tinker file holding two runs: refused without a run number (the error says so),
    imported with one."""
    log = tmp_path / "train.log"
    log.write_text(
        "{'loss': 0.5, 'reward': 0.25, 'epoch': 0.5}\n{'loss': 0.4, 'reward': 0.5, 'epoch': 1.0}\n"
    )
    two = tmp_path / "metrics.jsonl"
    two.write_text("".join(json.dumps({"step": s, "reward/mean": 0.5}) + "\n" for s in (0, 1, 0)))
    app_env(root_copy)
    at = _open("runs")
    at.selectbox(key="import_source").select("trl")
    at.text_input(key="import_path").input(str(log))
    at.number_input(key="import_logging_steps").set_value(5)
    at.text_input(key="import_tool_version").input("0.16.0")
    at.button(key="import_submit").click().run()
    _assert_clean(at)
    assert any("Imported 2 steps" in s.value for s in at.success)
    from training_hooks import schema

    imported = [schema.read_run_info(p) for p in root_copy.iterdir() if (p / "run.json").is_file()]
    (rec,) = [i.imported for i in imported if i.imported and i.imported.file == str(log)]
    assert rec.file_format == "TRL console log" and rec.rows == 2
    assert rec.settings["logging_steps"] == {"value": 5, "from": "--config: logging_steps"}
    assert rec.version == "0.16.0" and "version 0.16.0 stated by the user" in " ".join(rec.evidence)
    at.text_input(key="import_tool_version").input("")
    at.selectbox(key="import_source").select("tinker")
    at.text_input(key="import_path").input(str(two))
    at.number_input(key="import_logging_steps").set_value(None)
    at.button(key="import_submit").click().run()
    assert not at.exception
    assert any("holds 2 runs one after another" in _unescaped(e.value) for e in at.error)
    at.number_input(key="import_segment").set_value(2)
    at.button(key="import_submit").click().run()
    _assert_clean(at)
    assert any("Imported 1 steps" in s.value for s in at.success)


# ----------------------------------------------------------------------------- one identity per run


def _twin(root, run_id: str = "grpo-twin") -> str:
    """A second run named "grpo-small" under ``root`` (a copy of the first with its own id and a
    later start); returns its id."""
    import shutil

    src = root / run_ids(root)["grpo-small"]
    dst = root / run_id
    shutil.copytree(src, dst)
    info = json.loads((dst / "run.json").read_text())
    info.update(run_id=run_id, created_at=(info.get("created_at") or 0) + 60)
    (dst / "run.json").write_text(json.dumps(info))
    return run_id


def _open_link(page: str, query: dict) -> AppTest:
    """AppTest on ``page`` opened from a link with ``query`` (the URL's query parameters)."""
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page != "runs":
        at.switch_page(f"app_pages/{page}.py").run()
    return at


@pytest.mark.slow
def test_same_name_runs_are_two_runs_everywhere(root_copy, app_env):
    """Two runs named grpo-small: Compare's legend has two entries "grpo-small [id]" and the grid
    draws each under its own label (hover names them apart); Health's table and cards name both
    apart; the colours differ; a run's colour is the one its key gives, whatever else is shown."""
    first = run_ids(root_copy)["grpo-small"]
    twin = _twin(root_copy)
    app_env(root_copy)
    at = _open("compare", {"runs": [first, twin]})
    _assert_clean(at)
    legend = json.loads(at.get("echarts_chart")[0].proto.spec)
    names = [e["name"] for e in legend["legend"]["data"]]
    assert names == [f"grpo-small [{first}] · GRPO", f"grpo-small [{twin}] · GRPO"]
    colors = [e["lineStyle"]["color"] for e in legend["legend"]["data"]]
    assert colors[0] != colors[1]
    reward = _grid(at)["Reward"]
    by_key = {t["legendgroup"]: t["name"] for t in reward["traces"] if t["role"] == "raw"}
    assert by_key == {first: f"grpo-small [{first}]", twin: f"grpo-small [{twin}]"}
    at.switch_page("app_pages/health.py").run()
    _assert_clean(at)
    assert list(at.dataframe[0].value["run"]) == [f"grpo-small [{first}]", f"grpo-small [{twin}]"]
    heads = [_unescaped(e.label) for e in at.expander if "steps" in e.label]
    assert any(h.startswith(f"grpo-small [{first}] · GRPO") for h in heads)
    assert any(h.startswith(f"grpo-small [{twin}] · GRPO") for h in heads)


@pytest.mark.slow
def test_link_names_a_shared_name_and_a_missing_run(root_copy, app_env):
    """?runs=grpo-small (a name two runs now carry) selects both and says so; a value that names
    no run is named in a warning ("not found: ..."), escaped, never dropped in silence; a run id
    works as well as a label."""
    first = run_ids(root_copy)["grpo-small"]
    gspo = run_ids(root_copy)["gspo-small"]
    twin = _twin(root_copy)
    app_env(root_copy)
    at = _open_link("compare", {"runs": ["grpo-small", "does-not-exist<b>*x*</b>"]})
    assert not at.exception
    assert set(at.sidebar.multiselect(key="runs").value) == {first, twin}
    warnings = [_unescaped(w.value) for w in at.warning]
    assert any(
        f"'grpo-small' names 2 runs, all shown: grpo-small [{first}], grpo-small [{twin}]" in w
        for w in warnings
    ), warnings
    assert any("not found: 'does-not-exist<b>*x*</b>'" in w for w in warnings), warnings
    assert not any("<b>" in w.value for w in at.warning)  # escaped: the tags are text
    legend = json.loads(at.get("echarts_chart")[0].proto.spec)
    assert len(legend["legend"]["data"]) == 2

    at = _open_link("compare", {"runs": gspo})  # a run id
    assert at.sidebar.multiselect(key="runs").value == [gspo]
    assert not at.warning
    at = _open_link("compare", {"runs": "nope"})  # nothing found: the default, said so
    assert at.sidebar.multiselect(key="runs").value == []
    assert any("not found: 'nope'" in _unescaped(w.value) for w in at.warning)
    assert any("showing the 3 most recent" in c.value for c in at.caption)


@pytest.mark.slow
def test_run_link_names_a_missing_or_shared_run(root_copy, app_env):
    """?run= on a single-run page: a value no run answers to, or a name two runs carry, is named
    in a warning while the picker shows another run."""
    _twin(root_copy)
    app_env(root_copy)
    at = _open_link("sequences", {"run": "nope"})
    assert not at.exception
    assert any("not found: 'nope'" in _unescaped(w.value) for w in at.warning)
    at = _open_link("lengths", {"run": "grpo-small"})
    assert not at.exception
    assert any(
        "not found: 'grpo-small' names 2 runs" in _unescaped(w.value) and "pick one" in w.value
        for w in at.warning
    )


def test_runs_table_tells_runs_apart_first(root_copy, app_env):
    """The Runs table starts with what tells runs apart and what to judge them by: name, run id,
    start time, algorithm, status, health."""
    twin = _twin(root_copy)
    app_env(root_copy)
    at = _open("runs")
    _assert_clean(at)
    df = at.dataframe[0].value
    assert list(df.columns[:6]) == [
        "name",
        "run id",
        "started (UTC)",
        "algorithm",
        "status",
        "health",
    ]
    assert twin in set(df["run id"])
    assert (df["name"] == "grpo-small").sum() == 2 and df["run id"].is_unique
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", s) for s in df["started (UTC)"])


# ----------------------------------------------------------------------------- where a run came from

VERL_CFG = {
    "config": {
        "actor_rollout_ref": {
            "actor": {"clip_ratio": 0.2, "loss_agg_mode": "token-mean", "ppo_epochs": 1},
            "rollout": {"n": 4},
        },
        "algorithm": {"adv_estimator": "grpo"},
    }
}


def _verl_import(root, tmp_path) -> tuple[str, object]:
    """A verl log (a mapped, a renamed, a kept, a not-stored and a text key) with its config
    beside, imported into ``root``; returns (run id, log path)."""
    from training_hooks.importers import import_run

    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    rows = [
        {
            "critic/score/mean": 0.1 * s,
            "rollout_corr/kl": -1e-4,
            "timing_s/step": 30.0,
            "actor/kl_loss": 0.0,
            "training/rollout_probs_diff_top1_token_text": "<b>x</b>",
        }
        for s in (1, 2, 3)
    ]
    cfg = json.loads(json.dumps(VERL_CFG))
    cfg["config"]["actor_rollout_ref"]["actor"]["use_kl_loss"] = False
    log.write_text(
        "".join(
            json.dumps({"step": s, "data": r}) + "\n" for s, r in zip((1, 2, 3), rows, strict=True)
        )
    )
    (log.parent / "exp.config.json").write_text(json.dumps(cfg))
    return import_run("verl", log, root=root, name="verl-exp")["run_id"], log


def _details_text(at: AppTest) -> str:
    return " ".join(_unescaped(m.value) for m in [*at.markdown, *at.caption])


@pytest.mark.slow
def test_runs_details_and_health_card_say_where_an_import_came_from(root_copy, app_env, tmp_path):
    """The Runs page's detail view and the Health card of an imported verl run state the tool,
    the format, the version as detected, the source path and the kind of file read, each setting
    with the file it came from, the settings no file states, and every foreign key: mapped, renamed, kept, not stored
    (with the reason)."""
    run_id, log = _verl_import(root_copy, tmp_path)
    app_env(root_copy)
    at = _open("runs")
    _assert_clean(at)
    at.selectbox(key="detail_run").set_value(run_id).run()
    _assert_clean(at)
    for where in (at, None):
        if where is None:  # the same on the Health card
            at = _open("health", {"runs": [run_id]})
            _assert_clean(at)
        text = _details_text(at)
        assert "Imported from verl: verl metrics." in text
        assert "Version: unknown (no file states it and no metric name dates it)." in text
        assert f"Source: {log} (file read: {log} (verl file-logger JSON lines))." in text
        assert f"Settings files: {log.parent / 'exp.config.json'}." in text
        assert "Foreign keys: 1 mapped, 1 renamed, 1 kept, 1 not stored, 1 not numeric." in text
        unknown = next(c for c in at.caption if c.value.startswith("Settings found"))
        assert "clip_ratio_low" in _unescaped(unknown.value)  # a verl setting no file states
        assert "sequence-unit ε (low / high)" in _unescaped(unknown.value)
        frames = {tuple(d.value.columns): d.value for d in at.dataframe}
        settings = frames[("setting", "value", "from")].set_index("setting")
        assert settings.loc["clip_ratio", "value"] == "0.2"
        assert settings.loc["clip_ratio", "from"] == (
            "exp.config.json: actor_rollout_ref.actor.clip_ratio"
        )
        keys = frames[("foreign key", "what happened", "stored as", "why")].set_index("foreign key")
        assert keys.loc["critic/score/mean", "what happened"] == "mapped"
        assert keys.loc["critic/score/mean", "stored as"] == Step.REWARD_MEAN
        assert keys.loc["rollout_corr/kl", "stored as"] == "verl/rollout_corr/kl"
        assert keys.loc["timing_s/step", "what happened"] == "kept"
        assert keys.loc["actor/kl_loss", "what happened"] == "not stored"
        assert keys.loc["actor/kl_loss", "why"] == "use_kl_loss=false: logged 0.0"
        assert keys.loc["training/rollout_probs_diff_top1_token_text", "what happened"] == (
            "not numeric"
        )


@pytest.mark.slow
def test_import_form_refuses_a_second_import_of_the_same_log(root_copy, app_env, tmp_path):
    """The import form, given a log already in the root: "already imported as run X", the root
    left as it was; with "Replace" ticked it is imported again over run X."""
    run_id, log = _verl_import(root_copy, tmp_path)
    app_env(root_copy)
    before = {p: p.read_bytes() for p in root_copy.rglob("*") if p.is_file()}
    at = _open("runs")
    at.selectbox(key="import_source").select("verl")
    at.text_input(key="import_path").input(str(log))
    at.button(key="import_submit").click().run()
    _assert_clean(at)
    assert any(f"already imported as run {run_id}" in _unescaped(i.value) for i in at.info)
    assert {p: p.read_bytes() for p in root_copy.rglob("*") if p.is_file()} == before
    at.checkbox(key="import_replace").check()
    at.button(key="import_submit").click().run()
    _assert_clean(at)
    assert any(f"as run {run_id}" in _unescaped(s.value) for s in at.success)
    assert len(at.dataframe[0].value) == 3
