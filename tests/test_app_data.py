"""The dashboard's data layer on real recorded runs, damaged runs and a real MLflow SQLite store."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from app_runs import STEPS, app_modules

from app import data, mlflow_store
from app.discovery import discover, effective_status
from app.records import SOURCE_MLFLOW, SOURCE_PARQUET
from app.settings import Settings, parse_settings
from training_hooks.metric_map import Derived, map_metric_name, map_metric_names
from training_hooks.schema import SEQUENCES_DIR, STEPS_DIR, RunInfo, Seq, Step


def _run(root, name):
    return {r.name: r for r in discover(str(root)).runs}[name]


def test_app_imports_no_torch(fresh_imports):
    """Importing every app module (and the schema it reads) never imports torch."""
    modules = set(app_modules())
    assert {
        "app.data",
        "app.discovery",
        "app.compare.cache",
        "app.compare.page",
        "app.ui",
    } <= modules
    assert modules <= fresh_imports.app_loaded  # every one was imported
    assert "torch" not in fresh_imports.app_loaded, "torch imported"
    assert "training_hooks.schema" in fresh_imports.app_loaded


def test_recorded_runs_are_found(recorded_root):
    """The data layer finds both recorded runs, finished, with sequences and tokens tables."""
    found = discover(str(recorded_root))
    by_name = {r.name: r for r in found.runs}
    assert set(by_name) == {"grpo-small", "gspo-small"}
    for r in by_name.values():
        assert r.status == "finished"
        assert r.has_sequences and r.has_tokens
        assert r.last_step == STEPS - 1
        assert r.problems == ()
    assert found.problems == []


def test_parse_settings_precedence(tmp_path, monkeypatch):
    """--root/--tracking-uri beat the environment, which beats ./runs and ./mlflow.db."""
    monkeypatch.chdir(tmp_path)
    env = {"GSPO_DASH_ROOT": "/env/root", "MLFLOW_TRACKING_URI": "http://env:5000"}
    s = parse_settings(["--root", "/cli", "--tracking-uri", "sqlite:///x.db"], env)
    assert (s.root, s.tracking_uri) == ("/cli", "sqlite:///x.db")
    s = parse_settings(["-x", "-q", "tests/foo.py"], env)  # pytest's argv is ignored
    assert (s.root, s.tracking_uri) == ("/env/root", "http://env:5000")
    assert parse_settings([], {}) == Settings("runs", None)
    (tmp_path / "mlflow.db").write_bytes(b"")
    assert parse_settings([], {}).tracking_uri == "sqlite:///mlflow.db"


def test_mlflow_db_read_only_without_a_root(tmp_path, monkeypatch):
    """./mlflow.db is read on its own only when neither a root nor a tracking URI was given; with
    a root (command line or environment) a store is read only when named."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlflow.db").write_bytes(b"")
    assert parse_settings([], {}) == Settings("runs", "sqlite:///mlflow.db")
    assert parse_settings(["--root", "demo"], {}) == Settings("demo", None)
    assert parse_settings([], {"GSPO_DASH_ROOT": "demo"}) == Settings("demo", None)
    named = parse_settings(["--root", "demo", "--tracking-uri", "sqlite:///mlflow.db"], {})
    assert named == Settings("demo", "sqlite:///mlflow.db")
    assert parse_settings([], {"MLFLOW_TRACKING_URI": "http://h:5000"}).tracking_uri == (
        "http://h:5000"
    )


def test_steps_agree_with_sequences(recorded_root):
    """Two routes: the step table's reward_mean and length_mean equal the per-sequence means."""
    run = _run(recorded_root, "gspo-small")
    steps = data.load_steps(run).df
    seqs = data.load_sequences(run, [Seq.STEP, Seq.REWARD, Seq.LENGTH]).df
    assert list(steps[Step.STEP]) == list(range(STEPS))
    by_step = seqs.groupby(Seq.STEP)
    np.testing.assert_allclose(steps[Step.REWARD_MEAN], by_step[Seq.REWARD].mean(), rtol=1e-6)
    np.testing.assert_allclose(steps[Step.LENGTH_MEAN], by_step[Seq.LENGTH].mean(), rtol=1e-6)
    # lengths: T=10 with 1 + step % 3 masked positions -> 9, 8, 7, 9, 8, 7
    assert list(steps[Step.LENGTH_MEAN]) == [9, 8, 7, 9, 8, 7]
    # derived: binding = low + high; tokens seen = cumulative num_tokens
    np.testing.assert_allclose(
        steps[Derived.TOKEN_CLIP_BINDING],
        steps[Step.TOKEN_CLIP_LOW_FRACTION] + steps[Step.TOKEN_CLIP_HIGH_FRACTION],
    )
    np.testing.assert_allclose(steps[Derived.TOKENS_SEEN], np.cumsum(steps[Step.NUM_TOKENS]))


def test_projection_and_step_filter(recorded_root):
    """Only the asked columns are read, and a step range reads only those steps' sequences."""
    run = _run(recorded_root, "grpo-small")
    t = data.load_steps(run, [Step.LOSS])
    assert set(t.df.columns) <= {Step.STEP, Step.WALL_TIME, Step.LOSS, Derived.ELAPSED_MIN}
    s = data.load_sequences(run, [Seq.STEP, Seq.SEQ_LOG_RATIO], (2, 3)).df
    assert list(s.columns) == [Seq.STEP, Seq.SEQ_LOG_RATIO]
    assert sorted(set(s[Seq.STEP])) == [2, 3] and len(s) == 2 * 12
    tok = data.load_tokens(run, 4).df
    # token_samples=3: 3 spread sequences, and the step's culprits (2 per reason, each sequence
    # once: at most 3 + 4 rows without NaN)
    assert set(tok["step"]) == {4} and 3 <= len(tok) <= 7
    assert {"baseline", "max_abs_log_s", "max_abs_token_log_ratio"} == set(tok["reason"])


def test_a_read_step_table_is_shared_but_never_changed_by_a_reader(recorded_root):
    """Step tables are cached once for every session (``data._step_table``): a second read is
    the same numbers without a new read, and what one reader does to its frame (a value
    written, a column added or replaced) reaches no other reader."""
    run = _run(recorded_root, "grpo-small")
    first = data.load_steps(run, [Step.LOSS]).df
    loss = first[Step.LOSS].to_numpy().copy()
    first.loc[first.index[0], Step.LOSS] = 123.0
    first["added"] = 1.0
    first[Step.STEP] = -1
    second = data.load_steps(run, [Step.LOSS]).df
    assert "added" not in second.columns and (second[Step.STEP] >= 0).all()
    np.testing.assert_array_equal(second[Step.LOSS].to_numpy(), loss)
    # pandas 3 copies on write: a hit shares the cached arrays; under pandas 2 it is a deep copy
    third = data.load_steps(run, [Step.LOSS]).df
    assert (
        np.shares_memory(second[Step.LOSS].to_numpy(), third[Step.LOSS].to_numpy())
        == data.COPIES_ON_WRITE
    )


def test_a_chart_is_made_once_while_other_callers_wait():
    """Two sessions asking for one missing chart (``cache.chart``, Streamlit's resource cache):
    the first makes it, the second waits for it instead of making it again; another key is not
    held up, and a failed make leaves the key to the next caller."""
    from app.compare import cache

    def chart(key, make):  # a test's own keys; options are (dict, height)
        return cache.chart(f"test-made-once-{key}", lambda: ({"made": make()}, 0))[0]["made"]

    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def slow() -> str:
        calls.append("first")
        started.set()
        release.wait(10)
        return "made once"

    def again() -> str:
        calls.append("second")
        return "made twice"

    got: dict[str, str] = {}
    first = threading.Thread(target=lambda: got.setdefault("a", chart("k", slow)))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: got.setdefault("b", chart("k", again)))
    second.start()
    assert chart("other", lambda: "free") == "free"  # not blocked by "k" being made
    time.sleep(0.2)  # the second caller is waiting on "k"
    release.set()
    first.join(10)
    second.join(10)
    assert got == {"a": "made once", "b": "made once"} and calls == ["first"]

    def fail() -> str:
        raise OSError("unreadable")

    with pytest.raises(OSError):
        chart("bad", fail)
    assert chart("bad", lambda: "read") == "read"


def test_live_run_refreshes(root_copy):
    """A new step part on disk shows up on the next read (cache keyed on file mtimes)."""
    run = _run(root_copy, "grpo-small")
    before = data.load_steps(run).df
    folder = root_copy / run.key / STEPS_DIR
    part = sorted(folder.glob("*.parquet"))[0]
    t = pq.read_table(part)
    extra = t.slice(t.num_rows - 1, 1)
    extra = extra.set_column(
        extra.schema.get_field_index(Step.STEP), Step.STEP, pa.array([99], pa.int64())
    )
    pq.write_table(extra, folder / "part-000000099-000000099-r0000-999999.parquet")
    after = data.load_steps(run).df
    assert len(after) == len(before) + 1 and after[Step.STEP].iloc[-1] == 99


def test_corrupt_and_half_written_parts(root_copy):
    """A corrupt part is named as unreadable, the rest is still read; temp files are ignored."""
    run = _run(root_copy, "gspo-small")
    folder = root_copy / run.key / STEPS_DIR
    (folder / "part-000000500-000000501-r0000-000777.parquet").write_bytes(b"PAR1 garbage")
    (folder / ".tmp-part-000000600.parquet").write_bytes(b"half a file")
    t = data.load_steps(run)
    assert len(t.df) == STEPS
    assert (
        len(t.problems) == 1 and "part-000000500" in t.problems[0] and "unreadable" in t.problems[0]
    )


def test_missing_run_json(root_copy):
    """Without run.json the run is still listed: algorithm from the step table, status unknown."""
    run = _run(root_copy, "grpo-small")
    (root_copy / run.key / "run.json").unlink()
    r = {x.key: x for x in discover(str(root_copy)).runs}[run.key]
    assert r.status == "unknown" and r.algorithm == "grpo" and r.info is None
    assert any("run.json is missing" in p for p in r.problems)
    assert len(data.load_steps(r).df) == STEPS


def test_older_schema_and_no_sequences(root_copy):
    """Missing columns (an older writer) are named; a run without sequences/ says so."""
    run = _run(root_copy, "gspo-small")
    folder = root_copy / run.key / STEPS_DIR
    for part in folder.glob("*.parquet"):
        t = pq.read_table(part).drop_columns([Step.KL_OLD_MEAN, Step.TOKEN_LOG_RATIO_ABS_MAX])
        pq.write_table(t.replace_schema_metadata({b"gspo_dash.schema_version": b"0"}), part)
    for p in (root_copy / run.key / SEQUENCES_DIR).glob("*"):
        p.unlink()
    (root_copy / run.key / SEQUENCES_DIR).rmdir()
    r = {x.key: x for x in discover(str(root_copy)).runs}[run.key]
    assert not r.has_sequences
    assert any("no sequences table" in p for p in r.problems)
    t = data.load_steps(r)
    assert Step.KL_OLD_MEAN not in t.df.columns and len(t.df) == STEPS
    assert any("kl_old_mean" in p and "token_log_ratio_abs_max" in p for p in t.problems)
    assert data.load_sequences(r).df.empty


def test_crashed_verdict():
    """status running + heartbeat older than max(60 s, 10 flush intervals) -> crashed."""
    info = RunInfo(run_id="a", name="a", algorithm="gspo", updated_at=1000.0, flush_interval_s=5.0)
    assert effective_status(info, now=1000.0 + 59) == "running"
    assert effective_status(info, now=1000.0 + 61) == "crashed"
    info.flush_interval_s = 30.0  # 10 x 30 s = 300 s
    assert effective_status(info, now=1000.0 + 299) == "running"
    info.status = "finished"
    assert effective_status(info, now=1e9) == "finished"


def test_empty_and_missing_root(tmp_path):
    """An empty root and a missing root give a problem sentence, no runs, no exception."""
    assert discover(str(tmp_path)).problems[0].startswith("No runs under")
    assert "does not exist" in discover(str(tmp_path / "nope")).problems[0]


def test_metric_map():
    """TRL/verl/ours map to our columns; region_mean maps to the binding fraction; rest unchanged."""
    assert map_metric_name("clip_ratio/region_mean") == Derived.TOKEN_CLIP_BINDING
    assert map_metric_name("clip_ratio/low_mean") == Step.TOKEN_CLIP_LOW_FRACTION
    assert map_metric_name("frac_reward_zero_std") == Step.ZERO_VARIANCE_FRACTION
    assert map_metric_name("completions/mean_length") == Step.LENGTH_MEAN
    assert map_metric_name("train/kl") == Step.KL_REF_MEAN
    assert map_metric_name("actor/pg_clipfrac") == Derived.TOKEN_CLIP_BINDING
    assert map_metric_name("actor/ppo_kl") == Step.KL_OLD_MEAN
    assert map_metric_name("response_length/mean") == Step.LENGTH_MEAN
    assert map_metric_name("gspo_dash/seq_clip_fraction") == Step.SEQ_CLIP_FRACTION
    assert map_metric_name("my/custom") == "my/custom"
    # a clash: ours wins, the other keeps its own name
    m = map_metric_names(["kl", "gspo_dash/kl_ref_mean"])
    assert m == {"gspo_dash/kl_ref_mean": Step.KL_REF_MEAN, "kl": "kl"}


def _log_trl_run(uri: str, steps: int = 30, params: dict | None = None) -> str:
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("trl")
    run = client.create_run(exp, run_name="trl-gspo")
    now = int(time.time() * 1000)
    metrics = []
    for s in range(steps):
        for key, v in {
            "reward": 0.1 + 0.01 * s,
            "kl": 0.001 * s,
            "clip_ratio/region_mean": 0.002,
            "completions/mean_length": 100.0 + s,
            "frac_reward_zero_std": 0.25,
            "entropy": 1.0,
            "loss": 0.5,
            "custom/foo": float(s * s),
        }.items():
            metrics.append(Metric(key, v, now + s * 1000, s))
    params = {"importance_sampling_level": "sequence", "loss_type": "grpo", **(params or {})}
    client.log_batch(
        run.info.run_id, metrics=metrics, params=[Param(k, v) for k, v in params.items()]
    )
    client.set_terminated(run.info.run_id)
    return run.info.run_id


@pytest.mark.slow
def test_mlflow_only_run(mlflow_uri, tmp_path):
    """A TRL-style run only in MLflow is listed (algorithm from its params: loss_type grpo at the
    sequence level, TRL's GSPO) and its curves come
    back under our column names, values exact, other metrics under their own names."""
    run_id = _log_trl_run(mlflow_uri)
    empty = tmp_path / "empty-root"
    empty.mkdir()
    found = discover(str(empty), mlflow_uri)
    (r,) = [x for x in found.runs if x.source == SOURCE_MLFLOW]
    assert r.key == f"mlflow:{run_id}" and r.algorithm == "gspo" and r.status == "finished"
    df = data.load_steps(r).df
    assert list(df[Step.STEP]) == list(range(30))
    np.testing.assert_allclose(df[Step.REWARD_MEAN], 0.1 + 0.01 * np.arange(30))
    # TRL's `kl` is our k3 KL to the reference only without bias correction; the params do not
    # say (use_bias_correction_kl unknown), so it keeps a name of its own, values exact
    assert Step.KL_REF_MEAN not in df.columns
    np.testing.assert_allclose(df["trl/kl"], 0.001 * np.arange(30))
    # a TRL run with importance_sampling_level='sequence': clip_ratio/* are sequence-unit
    np.testing.assert_allclose(df[Derived.SEQ_CLIP_BINDING], 0.002)
    np.testing.assert_allclose(df[Step.LENGTH_MEAN], 100.0 + np.arange(30))
    np.testing.assert_allclose(df["custom/foo"], np.arange(30) ** 2)
    np.testing.assert_allclose(df[Step.WALL_TIME] - df[Step.WALL_TIME].iloc[0], np.arange(30))
    assert data.load_sequences(r).df.empty


def test_mlflow_only_run_params_pin_the_kl(mlflow_uri):
    """With use_bias_correction_kl=False in the run's params, TRL's `kl` is our kl_ref_mean."""
    run_id = _log_trl_run(mlflow_uri, steps=5, params={"use_bias_correction_kl": "False"})
    (r,) = [x for x in mlflow_store.mlflow_runs(mlflow_uri)[0] if x.mlflow_run_id == run_id]
    df = data.load_steps(r).df
    np.testing.assert_allclose(df[Step.KL_REF_MEAN], 0.001 * np.arange(5))
    assert "trl/kl" not in df.columns


@pytest.mark.slow
def test_recorded_run_is_not_listed_twice(mlflow_uri, tmp_path):
    """A run recorded to Parquet and MLflow appears once (from Parquet)."""
    root = tmp_path / "runs"
    pytest.importorskip("torch")
    import torch

    from training_hooks import RunRecorder

    with RunRecorder(root=root, name="both", algorithm="grpo", mlflow=mlflow_uri) as rec:
        B, T = 4, 6
        rec.log_step(
            0,
            rewards=torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
            logprobs=-torch.ones(B, T),
            old_logprobs=-torch.ones(B, T),
            mask=torch.ones(B, T, dtype=torch.bool),
        )
    info = json.loads((root / rec.run_id / "run.json").read_text())
    assert info.get("mlflow", {}).get("run_id"), info.get("faults")
    found = discover(str(root), mlflow_uri)
    assert [r.name for r in found.runs] == ["both"]
    assert found.runs[0].source == SOURCE_PARQUET


def test_unreadable_mlflow_store(tmp_path):
    """A tracking URI pointing nowhere is a problem sentence, not an exception."""
    found = discover(str(tmp_path), f"sqlite:///{tmp_path}/missing.db")
    assert found.runs == [] and any("does not exist" in p for p in found.problems)
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database")
    found = discover(str(tmp_path), f"sqlite:///{bad}")
    assert found.runs == [] and any("unreadable" in p for p in found.problems)


def test_mlflow_history_is_sampled_in_the_store(mlflow_uri):
    """3,000 logged steps come back as <= 100 evenly spaced points (first and last kept) by
    default, and all 3,000 with max_points=None; the sampling is reported as a problem."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(tracking_uri=mlflow_uri)
    run = client.create_run(client.create_experiment("long"))
    rid = run.info.run_id
    ms = [Metric("gspo_dash/loss", float(s), 1000 + s, s) for s in range(3000)]
    for i in range(0, 3000, 1000):
        client.log_batch(rid, metrics=ms[i : i + 1000])
    t = mlflow_store.mlflow_steps(mlflow_uri, rid, ("gspo_dash/loss",), 100)
    steps = t.df[Step.STEP].to_numpy()
    assert 90 <= len(steps) <= 100 and steps[0] == 0 and steps[-1] == 2999
    np.testing.assert_array_equal(t.df[Step.LOSS], steps)  # value = step: rows stay aligned
    assert any("sampled to 100 points" in p for p in t.problems)
    full = mlflow_store.mlflow_steps(mlflow_uri, rid, ("gspo_dash/loss",), None)
    assert len(full.df) == 3000 and not full.problems


def test_mlflow_history_falls_back_to_the_public_call(mlflow_uri, monkeypatch):
    """Where the store cannot sample (the private route answers None), the public
    get_metric_history reads every point, and nothing claims the curve was sampled."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(tracking_uri=mlflow_uri)
    rid = client.create_run(client.create_experiment("public")).info.run_id
    client.log_batch(
        rid, metrics=[Metric("gspo_dash/loss", 0.5 * s, 1000 + s, s) for s in range(300)]
    )
    monkeypatch.setattr(mlflow_store, "_sampled_in_sql", lambda *args: None)
    t = mlflow_store.mlflow_steps(mlflow_uri, rid, ("gspo_dash/loss",), 100)
    assert list(t.df[Step.STEP]) == list(range(300)) and not t.problems
    np.testing.assert_array_equal(t.df[Step.LOSS], 0.5 * np.arange(300))


def test_parts_joined_in_arrow_read_as_one_conversion_per_file(tmp_path):
    """Three step parts of one schema (no step twice) are joined in Arrow and converted once;
    the frame, its dtypes and its NaN cells (a NaN logged at step 4, a null at step 7) equal a
    per-file conversion concatenated; a fourth part of another schema takes the per-file path."""
    import pandas as pd

    from training_hooks import tables
    from training_hooks.findings.core import NAN_CELLS
    from training_hooks.schema import STEP_COLUMNS

    folder = tmp_path / STEPS_DIR
    folder.mkdir()
    loss = [0.5, 0.4, 0.3, np.nan, float("nan"), 0.1, 0.2, None, 0.3]
    for k in range(3):
        rows = slice(3 * k, 3 * k + 3)
        t = pa.table(
            {
                Step.STEP: pa.array(range(3 * k, 3 * k + 3), pa.int64()),
                Step.LOSS: pa.array(loss[rows], pa.float64(), from_pandas=False),
            }
        )
        pq.write_table(t, folder / f"part-{3 * k:09d}-{3 * k + 2:09d}-r0000-{k:06d}.parquet")
    files = tables.list_now(str(folder))
    got = tables.read_files(str(folder), files, None, None, STEP_COLUMNS, False)
    want = pd.concat([pq.read_table(folder / f.name).to_pandas() for f in files], ignore_index=True)
    pd.testing.assert_frame_equal(got.df, want)
    # np.nan in a list given to pa.array (from_pandas=False) is a NaN; None is a null
    assert got.df.attrs[NAN_CELLS] == {Step.LOSS: (3, 4)}
    extra = pa.table({Step.STEP: pa.array([9], pa.int64()), "grad_norm": [1.5]})
    pq.write_table(extra, folder / "part-000000009-000000009-r0000-000003.parquet")
    files = tables.list_now(str(folder))
    mixed = tables.read_files(str(folder), files, None, None, STEP_COLUMNS, False)
    assert mixed.df[Step.STEP].tolist() == list(range(10))
    assert mixed.df["grad_norm"].isna().sum() == 9 and mixed.df["grad_norm"].iloc[9] == 1.5
    assert mixed.df.attrs[NAN_CELLS] == {Step.LOSS: (3, 4)}


def test_skipped_columns_read_as_the_full_table_without_them(root_copy):
    """``load_steps(skip=...)``: the full table but the skipped schema columns, which it names
    (with whether each is numeric: the verdict lists them); a skipped column one part stores with
    the wrong type is read there and reported as a full read reports it; Compare's metric choices
    are the full table's."""
    import pandas as pd

    from app.compare import grouping, traces, view
    from training_hooks.tables import UNREAD_COLUMNS

    run = _run(root_copy, "gspo-small")
    skip = view.unread_step_columns(run.info)
    assert Step.NUM_GROUPS in skip and Step.RUN_ID in skip and Step.LOSS not in skip
    full, part = data.load_steps(run), data.load_steps(run, skip=skip)
    kept = [c for c in full.df.columns if c not in skip]
    assert list(part.df.columns) == kept and len(kept) < len(full.df.columns)
    pd.testing.assert_frame_equal(part.df, full.df[kept])
    assert part.problems == full.problems == []
    unread = part.df.attrs[UNREAD_COLUMNS]
    assert set(unread) == set(skip) & set(full.df.columns)
    assert unread[Step.NUM_GROUPS] is True and unread[Step.RUN_ID] is False
    assert UNREAD_COLUMNS not in full.df.attrs

    def series(df):
        return [traces.RunSeries(key="k", label="k", algorithm="gspo", color="#000", df=df)]

    assert grouping.metric_options(series(part.df)) == grouping.metric_options(series(full.df))
    assert Step.NUM_GROUPS in grouping.metric_options(series(part.df))

    folder = root_copy / run.key / STEPS_DIR
    first = sorted(folder.glob("*.parquet"))[0]
    t = pq.read_table(first)
    i = t.schema.get_field_index(Step.NUM_GROUPS)
    t = t.set_column(i, Step.NUM_GROUPS, pa.array(["many"] * t.num_rows, pa.string()))
    pq.write_table(t, first)
    run = _run(root_copy, "gspo-small")
    full, part = data.load_steps(run), data.load_steps(run, skip=skip)
    assert len(full.problems) == 1 and "'num_groups' is string, not int64" in full.problems[0]
    assert part.problems == full.problems
    pd.testing.assert_frame_equal(part.df, full.df[[c for c in full.df.columns if c not in skip]])


def test_verdict_on_a_column_compare_left_unread(recorded_root):
    """Compare's verdict scores the tables the page read unless the scored column was left
    unread there: then each run's whole table is read, so the verdict is a full read's."""
    from app import run_groups as rg
    from app.compare import grouping, view

    runs = discover(str(recorded_root)).runs
    read = {r.key: data.load_steps(r, skip=view.unread_step_columns(r.info)) for r in runs}
    for metric in (Step.NUM_SEQUENCES, Step.LOSS):
        got = grouping.report(runs, rg.ALGORITHM, metric, 0.5, read=read)
        want = grouping.report(runs, rg.ALGORITHM, metric, 0.5)
        assert got.verdict.groups and got.verdict == want.verdict and not got.left_out
        assert [g.estimate for g in got.verdict.groups] == [g.estimate for g in want.verdict.groups]
        assert all(np.isfinite(g.estimate) for g in got.verdict.groups)
