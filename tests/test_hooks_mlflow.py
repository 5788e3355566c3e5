"""MLflow sink and sync against real tracking stores: SQLite copies and a live `mlflow server`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient
from test_hooks import REQUIRED_SEQ, REQUIRED_STEP

from training_hooks import RunRecorder, sync
from training_hooks.schema import Step, mlflow_key, read_run_info
from training_hooks.sinks.mlflow import TAG_ALGORITHM, TAG_RUN_ID
from training_hooks.tables import read_table


def history(client: MlflowClient, run_id: str, column: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, mlflow_key(column)))


@pytest.mark.slow
def test_200_step_loop_with_both_sinks(mlflow_uri, tmp_path, make_batch):
    """Done-when: 200 steps, both sinks (MLflow in its default child process): pandas reads every
    column; MLflow has run, params, tags, metric history equal to Parquet, and the artifacts."""
    cfg = {"lr": 1e-6, "optim": {"beta1": 0.9}, "group_size": 4}
    batches = [make_batch(4, 4, 16, seed=s % 7, truncated=True, ref=True) for s in range(200)]
    with RunRecorder(
        root=tmp_path / "runs", name="gspo-lr1e-6", algorithm="gspo", config=cfg, mlflow=mlflow_uri
    ) as rec:
        for s, b in enumerate(batches):
            rec.log_step(s, **b, loss=0.01 * s, extra={"grad_norm": 1.0 + s, "lr": 1e-6})
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps"))
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    assert set(REQUIRED_STEP) <= set(steps.columns) and set(REQUIRED_SEQ) <= set(seqs.columns)
    assert steps[Step.STEP].tolist() == list(range(200)) and len(seqs) == 200 * 16
    assert steps[Step.KL_REF_MEAN].notna().all()

    info = read_run_info(rec.run_dir)
    assert info.status == "finished" and info.faults == []
    assert info.mlflow["tracking_uri"] == mlflow_uri
    client = MlflowClient(mlflow_uri)
    run = client.get_run(info.mlflow["run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == "gspo-lr1e-6"
    assert run.data.tags[TAG_RUN_ID] == rec.run_id and run.data.tags[TAG_ALGORITHM] == "gspo"
    assert run.data.params["lr"] == "1e-06" and run.data.params["optim.beta1"] == "0.9"
    assert run.data.params["gspo_dash.seq_eps_high"] == "0.0004"
    loss = history(client, run.info.run_id, Step.LOSS)
    assert loss == [(s, pytest.approx(0.01 * s)) for s in range(200)]
    for col in (Step.SEQ_CLIP_FRACTION, Step.TOKEN_CLIP_FRACTION, Step.KL_REF_MEAN, "grad_norm"):
        h = history(client, run.info.run_id, col)
        assert [s for s, _ in h] == list(range(200))
        np.testing.assert_allclose([v for _, v in h], steps[col], rtol=1e-12)
    arts = {f.path for f in client.list_artifacts(run.info.run_id, "gspo_dash/steps")}
    assert arts == {f"gspo_dash/steps/{f}" for f in os.listdir(os.path.join(rec.run_dir, "steps"))}


def test_log_batch_chunks_under_the_1000_metric_limit(
    mlflow_uri, tmp_path, make_batch, monkeypatch
):
    """40 extras x 50 steps = 3,400 points per buffer: every log_batch call carries <= 1000."""
    sizes = []
    real = MlflowClient.log_batch

    def spy(self, run_id, metrics=(), params=(), tags=(), **kw):
        if metrics:
            sizes.append(len(metrics))
        return real(self, run_id, metrics=metrics, params=params, tags=tags, **kw)

    monkeypatch.setattr(MlflowClient, "log_batch", spy)
    extra = {f"user/m{i}": float(i) for i in range(40)}
    b = make_batch(2, 2, 6)
    with RunRecorder(
        root=tmp_path / "runs", name="wide", mlflow=mlflow_uri, mlflow_process=False
    ) as rec:
        for s in range(50):
            rec.log_step(s, **b, extra=extra)
    assert max(sizes) == 1000 and len(sizes) >= 3
    run_id = read_run_info(rec.run_dir).mlflow["run_id"]
    client = MlflowClient(mlflow_uri)
    assert history(client, run_id, "user/m39") == [(s, 39.0) for s in range(50)]
    finite = pd.read_parquet(os.path.join(rec.run_dir, "steps")).drop(
        columns=[Step.SCHEMA_VERSION, Step.RUN_ID, Step.STEP, Step.WALL_TIME, Step.ALGORITHM]
    )
    assert sum(sizes) == int(np.isfinite(finite.to_numpy(dtype=float)).sum())  # NaN not logged


def test_mlflow_true_uses_env_or_cwd_sqlite(mlflow_db_template, tmp_path, monkeypatch, make_batch):
    """mlflow=True: MLFLOW_TRACKING_URI when set, else sqlite:///<cwd>/mlflow.db (made absolute)."""
    from training_hooks import resolve_tracking_uri

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri(True) == f"sqlite:///{tmp_path}/mlflow.db"
    assert resolve_tracking_uri(None) is None and resolve_tracking_uri(False) is None
    other = tmp_path / "other.db"
    shutil.copyfile(mlflow_db_template, other)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{other}")
    with RunRecorder(root=tmp_path / "runs", name="env", mlflow=True, mlflow_process=False) as rec:
        rec.log_step(0, **make_batch())
    info = read_run_info(rec.run_dir)
    assert info.mlflow["tracking_uri"] == f"sqlite:///{other}"
    assert (
        MlflowClient(f"sqlite:///{other}").get_run(info.mlflow["run_id"]).info.status == "FINISHED"
    )
    assert not (tmp_path / "mlflow.db").exists()


def test_resume_continues_the_same_mlflow_run(mlflow_uri, tmp_path, make_batch):
    """Reopening a run id logs into the same MLflow run: history 0..5 without a second run."""
    root = tmp_path / "runs"
    kw = {"mlflow": mlflow_uri, "config": {"lr": 1}, "mlflow_process": False}
    with RunRecorder(root=root, name="res", **kw) as rec:
        for s in range(3):
            rec.log_step(s, **make_batch(seed=s))
    first = read_run_info(rec.run_dir).mlflow["run_id"]
    with RunRecorder(root=root, run_id=rec.run_id, **kw) as rec2:
        for s in range(3, 6):
            rec2.log_step(s, **make_batch(seed=s))
    assert read_run_info(rec.run_dir).mlflow["run_id"] == first
    client = MlflowClient(mlflow_uri)
    assert [s for s, _ in history(client, first, Step.NUM_SEQUENCES)] == list(range(6))
    assert len(client.search_runs([client.get_run(first).info.experiment_id])) == 1


@pytest.mark.slow
def test_sync_replays_offline_runs_idempotently(mlflow_uri, tmp_path, make_batch, capsys):
    """sync creates one MLflow run per Parquet run with every step; a second sync adds nothing."""
    root = tmp_path / "runs"
    ids = []
    for algo in ("grpo", "gspo"):
        with RunRecorder(root=root, name=f"off-{algo}", algorithm=algo, config={"a": 1}) as rec:
            for s in range(7):
                rec.log_step(s, **make_batch(seed=s), extra={"lr": 0.1})
        ids.append(rec.run_id)
    assert sync.main([str(root), "--tracking-uri", mlflow_uri]) == 0
    assert sync.main([str(root), "--tracking-uri", mlflow_uri]) == 0
    out = capsys.readouterr().out
    assert out.count("created mlflow run") == 2 and out.count("0 new steps") == 2
    client = MlflowClient(mlflow_uri)
    exp = client.get_experiment_by_name("gspo-dash")
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.data.tags[TAG_RUN_ID] for r in runs) == sorted(ids)
    for r in runs:
        assert r.info.status == "FINISHED"
        steps = read_table(root / r.data.tags[TAG_RUN_ID], "steps")
        h = history(client, r.info.run_id, Step.SEQ_LOG_RATIO_MEAN)
        assert [s for s, _ in h] == list(range(7))
        np.testing.assert_allclose([v for _, v in h], steps[Step.SEQ_LOG_RATIO_MEAN], rtol=1e-12)
        assert r.data.params["a"] == "1"


@pytest.mark.slow
def test_sync_command_line(mlflow_uri, tmp_path, make_batch):
    """`python -m training_hooks.sync ROOT --tracking-uri URI` works as a command."""
    root = tmp_path / "runs"
    with RunRecorder(root=root, name="cli") as rec:
        rec.log_step(0, **make_batch())
    out = subprocess.run(
        [sys.executable, "-m", "training_hooks.sync", str(root), "--tracking-uri", mlflow_uri],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"{rec.run_id}: created mlflow run" in out.stdout and "1 new steps" in out.stdout


@pytest.mark.slow
def test_against_a_live_mlflow_server(mlflow_server, tmp_path, make_batch):
    """A recorder pointed at `mlflow server` over HTTP logs metrics, params and artifacts there."""
    with RunRecorder(
        root=tmp_path / "runs",
        name="remote",
        algorithm="grpo",
        config={"lr": 3e-6},
        mlflow=mlflow_server,
        mlflow_steps_per_batch=10,
        mlflow_process=False,
    ) as rec:
        for s in range(25):
            rec.log_step(s, **make_batch(seed=s), loss=torch.tensor(float(s)))
    info = read_run_info(rec.run_dir)
    assert info.faults == [] and info.mlflow["tracking_uri"] == mlflow_server
    client = MlflowClient(mlflow_server)
    run = client.get_run(info.mlflow["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["lr"] == "3e-06"
    assert history(client, run.info.run_id, Step.LOSS) == [(s, float(s)) for s in range(25)]
    names = {f.path for f in client.list_artifacts(run.info.run_id, "gspo_dash")}
    assert "gspo_dash/run.json" in names and "gspo_dash/steps" in names
