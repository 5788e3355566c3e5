"""MLflow at team scale: 8 recorders (6 runs and one distributed run of 2 gloo ranks, each its own
process) log at once to an ``mlflow server`` on PostgreSQL, and a 9th whose tracking server is
down logs to Parquet only. Then ``python -m training_hooks.sync`` backfills it, every metric is in
MLflow exactly once (its history equals the Parquet step table), and the dashboard, pointed at the
server alone, lists the runs and draws their curves, read sampled by the server.

The single runs keep MLflow's client in the recorder's sink thread (``mlflow_process=False``: 6
fewer interpreters importing MLflow on a machine with few cores); the distributed run uses the default,
a child process, so both routes meet the server.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from app_runs import REPO

from training_hooks.schema import STEP_KEY_COLUMNS, STEPS_DIR, Step, mlflow_key, read_run_info
from training_hooks.sinks.mlflow import TAG_RUN_ID

pytestmark = pytest.mark.slow

STEPS = 40
P, G, T = 2, 4, 8
SINGLE_RUNS = 6  # + 2 ranks of one distributed run = 8 recorders logging at once
RECORDERS_TIMEOUT_S = 300
OFFLINE = "team-offline"
DDP = "team-ddp"


@dataclass(frozen=True)
class Recorder:
    """One recording process: run ``name``, logging to ``uri``; rank ``rank`` of ``world``."""

    root: str
    name: str
    algorithm: str
    seed: int
    uri: str
    rank: int = 0
    world: int = 1
    master_port: int = 0
    child: bool = False  # the MLflow client in its own process (the default)


def _batch(seed: int, step: int, rank: int) -> dict:
    """log_step's tensors for one step of one rank, drawn from (seed, step, rank)."""
    from conftest import _make_batch

    return _make_batch(P, G, T, seed=10_000 * seed + 100 * step + rank, spread=0.05, ref=True)


def _record(r: Recorder) -> None:
    """A training loop of ``STEPS`` steps with a ``RunRecorder`` (in a spawned process)."""
    import torch
    import torch.distributed as dist

    from training_hooks import RunRecorder

    torch.set_num_threads(1)
    if r.name == OFFLINE:  # the server is down: give up at once instead of MLflow's ~2 min retry
        os.environ.update(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT="5")
    if r.world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(r.master_port))
        dist.init_process_group("gloo", rank=r.rank, world_size=r.world)
    try:
        with RunRecorder(
            root=r.root,
            name=r.name,
            algorithm=r.algorithm,
            config={"seed": r.seed},
            mlflow=r.uri,
            mlflow_steps_per_batch=8,  # 5 log_batch calls per run, interleaved with the others'
            mlflow_process=r.child,
            flush_interval_s=1.0,
            close_timeout_s=120.0,
        ) as rec:
            for step in range(STEPS):
                loss = 0.01 * r.seed + 0.001 * step * (r.rank + 1)
                extra = {"lr": 1e-6 * (1 + step % 5), "grad_norm": 1.0 + r.seed + 0.1 * step}
                rec.log_step(step, **_batch(r.seed, step, r.rank), loss=loss, extra=extra)
    finally:
        if r.world > 1:
            dist.destroy_process_group()


def _recorders(root: str, url: str, dead_url: str, master_port: int) -> list[Recorder]:
    algos = ("grpo", "gspo")
    out = [Recorder(root, f"team-{i}", algos[i % 2], i + 1, url) for i in range(SINGLE_RUNS)]
    out += [Recorder(root, DDP, "gspo", 50, url, rank, 2, master_port, True) for rank in range(2)]
    return out + [Recorder(root, OFFLINE, "grpo", 70, dead_url)]


SYNC_LINE = re.compile(r"^(\S+): (created|updated) mlflow run ")


def _sync(root: Path, url: str, *args: str) -> dict[str, str]:
    """``python -m training_hooks.sync ROOT --tracking-uri URL``: {gspo-dash run id: its line}."""
    done = subprocess.run(
        [sys.executable, "-m", "training_hooks.sync", str(root), "--tracking-uri", url, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [(SYNC_LINE.match(line), line) for line in done.stdout.splitlines()]
    return {m.group(1): line for m, line in lines if m}


@dataclass(frozen=True)
class Team:
    root: Path
    url: str
    run_dirs: dict[str, Path]  # run name -> its folder
    first_sync: dict[str, str]  # gspo-dash run id -> the first sync's line


def _forkserver():
    """A forkserver that imports torch and MLflow once, started now (its imports overlap whatever
    runs next): 9 interpreters importing them would cost about a minute of CPU on 2 cores."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "mlflow.tracking", "training_hooks.recorder", __name__])
    multiprocessing.forkserver.ensure_running()
    return ctx


def _run_at_once(ctx, todo: list[Recorder]) -> None:
    """Every recorder in its own process, all at once; each must exit 0."""
    procs = [ctx.Process(target=_record, args=(r,), name=f"{r.name}/{r.rank}") for r in todo]
    for p in procs:
        p.start()
    for p in procs:
        p.join(RECORDERS_TIMEOUT_S)
    for p in procs:
        if p.is_alive():
            p.kill()
    assert [p.exitcode for p in procs] == [0] * len(procs), [(p.name, p.exitcode) for p in procs]


@pytest.fixture(scope="module")
def team(team_mlflow_boot, tmp_path_factory) -> Team:
    """The 9 recorders run at once, then the first sync of the whole root."""
    from servers import free_port

    ctx = _forkserver()
    url = team_mlflow_boot.mlflow_url()  # booting since collection
    root = tmp_path_factory.mktemp("team-runs")
    _run_at_once(ctx, _recorders(str(root), url, f"http://127.0.0.1:{free_port()}", free_port()))
    run_dirs = {read_run_info(d).name: d for d in root.iterdir()}
    return Team(root, url, run_dirs, _sync(root, url))


def _parquet_points(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{mlflow key: [(step, value)]} of every finite numeric value in the run's step table."""
    steps = pd.read_parquet(run_dir / STEPS_DIR)
    out = {}
    for col in steps.columns:
        if col in STEP_KEY_COLUMNS or steps[col].dtype.kind not in "fiub":
            continue
        values = steps[col].astype("float64")
        ok = np.isfinite(values)
        if ok.any():
            out[mlflow_key(col)] = list(zip(steps[Step.STEP][ok], values[ok], strict=True))
    return out


def _mlflow_points(client, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """{key: [(step, value)]} of every metric of an MLflow run: its full history
    (``get_metric_history``, 4 requests at a time), step-sorted."""
    keys = sorted(client.get_run(run_id).data.metrics)
    with ThreadPoolExecutor(4) as pool:
        histories = pool.map(lambda k: client.get_metric_history(run_id, k), keys)
        return {
            k: sorted((m.step, m.value) for m in h) for k, h in zip(keys, histories, strict=True)
        }


def _mlflow_run(client, run_dir: Path):
    """The one MLflow run tagged with this folder's gspo-dash run id."""
    info = read_run_info(run_dir)
    exp = client.get_experiment_by_name("gspo-dash")
    found = client.search_runs([exp.experiment_id], f"tags.`{TAG_RUN_ID}` = '{info.run_id}'")
    assert len(found) == 1, (info.name, len(found))
    return found[0]


def test_recorders_logged_at_once_and_the_offline_run_was_backfilled(team):
    """8 runs' folders (the 2 ranks share one); each live run opened its MLflow run and logged
    without a fault; the offline run recorded the sink's failure and kept every step in Parquet;
    the first sync created its MLflow run with all 40 steps and added nothing to the others."""
    names = {f"team-{i}" for i in range(SINGLE_RUNS)} | {DDP, OFFLINE}
    assert set(team.run_dirs) == names
    for name, run_dir in team.run_dirs.items():
        info = read_run_info(run_dir)
        assert info.status == "finished", name
        assert len(pd.read_parquet(run_dir / STEPS_DIR)) == STEPS, name
        line = team.first_sync[info.run_id]
        if name == OFFLINE:
            assert not info.mlflow.get("run_id") and any(f["sink"] == "mlflow" for f in info.faults)
            assert "created mlflow run" in line and f" {STEPS} new steps" in line, line
        else:
            assert info.mlflow["tracking_uri"] == team.url and info.faults == [], name
            assert "updated mlflow run" in line and " 0 new steps" in line, line
    assert read_run_info(team.run_dirs[DDP]).other["world_size"] == 2


def test_every_metric_arrives_exactly_once(team):
    """For each run, MLflow's metric keys are the step table's finite columns, and each key's full
    history is the Parquet column: same steps, each once, same values (float64, exact)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=team.url)
    for name, run_dir in team.run_dirs.items():
        want = _parquet_points(run_dir)
        got = _mlflow_points(client, _mlflow_run(client, run_dir).info.run_id)
        assert len(want) > 30 and set(got) == set(want), (name, set(got) ^ set(want))
        for key, points in want.items():
            assert got[key] == points, (name, key)
            assert len({s for s, _ in got[key]}) == len(got[key]), (name, key)  # no step twice


def test_sync_again_adds_nothing(team):
    """Syncing the backfilled run again finds it up to date: 0 new steps, history unchanged."""
    from mlflow import MlflowClient

    offline = team.run_dirs[OFFLINE]
    again = _sync(team.root, team.url, "--run", offline.name)
    assert list(again) == [offline.name]
    assert "updated mlflow run" in again[offline.name], again
    assert " 0 new steps (0 metric points)" in again[offline.name], again
    client = MlflowClient(tracking_uri=team.url)
    got = _mlflow_points(client, _mlflow_run(client, offline).info.run_id)
    assert got == _parquet_points(offline)


def test_curves_of_a_server_run_are_sampled_by_the_server(team, monkeypatch):
    """Read from the tracking server at 10 points per metric: at most 10 rows, first and last
    step kept, each value the Parquet one at its step, reported as sampled; the full history is
    never read (``get_metric_history`` would fail)."""
    from mlflow import MlflowClient

    from app import mlflow_store

    run_dir = team.run_dirs["team-1"]
    run = _mlflow_run(MlflowClient(tracking_uri=team.url), run_dir)
    keys = tuple(sorted(run.data.metrics))

    def no_full_reads(*args, **kwargs):
        raise AssertionError("the full metric history was read")

    monkeypatch.setattr(MlflowClient, "get_metric_history", no_full_reads)
    mlflow_store.mlflow_steps.clear()
    t = mlflow_store.mlflow_steps(team.url, run.info.run_id, keys, 10)
    steps = t.df[Step.STEP].to_numpy()
    assert 2 <= len(steps) <= 10 and steps[0] == 0 and steps[-1] == STEPS - 1
    assert any("sampled to 10 points" in p for p in t.problems), t.problems
    parquet = pd.read_parquet(run_dir / STEPS_DIR).set_index(Step.STEP)
    for col in (Step.LOSS, Step.REWARD_MEAN, "grad_norm"):
        np.testing.assert_array_equal(t.df[col], parquet.loc[steps, col])


def test_dashboard_lists_the_server_runs_and_draws_their_curves(team, app_env, monkeypatch):
    """``--tracking-uri http://...`` with an empty root: the Runs page lists the 8 runs from the
    server; Compare draws each selected run's loss curve equal to its Parquet column."""
    from mlflow import MlflowClient
    from test_app_pages import _arr, _assert_clean, _grid, _open  # AppTest helpers

    empty = team.root.parent / "empty-root"
    empty.mkdir(exist_ok=True)
    app_env(empty)
    monkeypatch.setattr(sys, "argv", ["app/main.py", "--tracking-uri", team.url])
    at = _open("runs")
    _assert_clean(at)
    assert set(at.dataframe[0].value["name"]) == set(team.run_dirs)

    client = MlflowClient(tracking_uri=team.url)
    shown = {
        f"mlflow:{_mlflow_run(client, team.run_dirs[n]).info.run_id}": n
        for n in ("team-0", DDP, OFFLINE)
    }
    at = _open("compare", {"runs": list(shown), "smooth": 0.0})  # raw curves
    _assert_clean(at)
    loss = next(p for title, p in _grid(at).items() if title.startswith("Loss"))
    drawn = {t["legendgroup"]: t for t in loss["traces"]}
    assert set(drawn) == set(shown)
    for key, name in shown.items():
        parquet = pd.read_parquet(team.run_dirs[name] / STEPS_DIR)
        np.testing.assert_array_equal(_arr(drawn[key]["x"]), parquet[Step.STEP])
        # the figure holds the recorded values as float32 once, then 7 significant digits
        f32 = parquet[Step.LOSS].to_numpy(np.float32).astype(np.float64)
        np.testing.assert_array_equal(_arr(drawn[key]["y"]), [float(f"{v:.7g}") for v in f32])
