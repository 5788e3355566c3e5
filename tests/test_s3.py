"""Object storage as the runs root, against moto's S3 server on 127.0.0.1:
storage operations agree with the local ones, the recorder writes the same tables to S3 as to a
folder, compaction, resume, an outage, kill -9, importers and sync with s3:// roots."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from app_runs import REPO, STEPS, record_run
from s3_server import OutageProxy
from test_importers import TRL_STEP, _trl_state

from app import data
from app.discovery import discover
from training_hooks import RunRecorder, schema, storage, sync, tables
from training_hooks.importers import _cli as importers_cli
from training_hooks.schema import SEQUENCES_DIR, STEPS_DIR, Seq, Step


def _tables(run_dir: str) -> dict[str, pd.DataFrame]:
    """Every table of a run, without the columns that differ between two recordings."""
    out = {}
    for table in (STEPS_DIR, SEQUENCES_DIR, schema.TOKENS_DIR):
        df = tables.read_table(run_dir, table)
        out[table] = df.drop(columns=[Step.RUN_ID, Step.WALL_TIME], errors="ignore")
    return out


@pytest.mark.slow
def test_storage_operations_agree_with_the_local_folder(tmp_path, s3_root):
    """One set of operations, two routes: the same writes give the same listing, reads, sizes
    and deletes on a local folder and on S3; a failed atomic write leaves nothing."""
    results = []
    for base in (str(tmp_path / "root"), s3_root):
        for folder in ("a/steps", "b"):  # (on S3: only the bucket is made)
            storage.makedirs(storage.join(base, *folder.split("/")))
        storage.write_bytes(storage.join(base, "a", "run.json"), b'{"x": 1}')
        storage.write_bytes(storage.join(base, "a", "steps", "p1.parquet"), b"12345")
        with storage.atomic_path(storage.join(base, "b", "big.bin")) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"z" * 1000)
        with pytest.raises(RuntimeError), storage.atomic_path(storage.join(base, "c.bin")) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half")
            raise RuntimeError("writer died")
        listed = [(f.name, f.size) for f in storage.list_files(storage.join(base, "a"))]
        results.append(
            (
                listed,
                storage.read_bytes(storage.join(base, "a", "run.json")),
                storage.is_file(storage.join(base, "a", "run.json")),
                storage.is_dir(storage.join(base, "a")),
                storage.exists(storage.join(base, "c.bin")),
                storage.list_dirs(base),
            )
        )
        storage.delete(storage.join(base, "a", "steps", "p1.parquet"))
        storage.delete(storage.join(base, "a", "steps", "missing"))  # no error
        assert storage.list_files(storage.join(base, "a", "steps")) == []
    local, remote = results
    assert local == remote
    assert local == ([("run.json", 8)], b'{"x": 1}', True, True, False, ["a", "b"])
    names = [(f.name, f.size) for f in storage.list_tree(s3_root)]
    assert names == [("a/run.json", 8), ("b/big.bin", 1000)]


def test_fresh_objects_are_stamped_with_the_listing_time(s3_root, monkeypatch):
    """S3 mtimes have 1 s resolution: an object written within SETTLE_S of a listing gets the
    listing's time (a new cache key each listing); a settled one its own mtime."""
    storage.makedirs(s3_root)
    storage.write_bytes(storage.join(s3_root, "run.json"), b"{}")
    first = storage.list_tree(s3_root)
    time.sleep(0.01)
    second = storage.list_tree(s3_root)
    assert first[0].mtime_ns != second[0].mtime_ns  # not settled: each listing differs
    monkeypatch.setattr(storage, "SETTLE_S", 0.0)
    a, b = storage.list_tree(s3_root), storage.list_tree(s3_root)
    assert a == b and a[0].mtime_ns % 1_000_000_000 == 0  # S3's whole-second LastModified


def test_recorder_writes_the_same_run_to_s3_as_to_a_folder(tmp_path, s3_root):
    """RunRecorder(root="s3://...") writes the tables a local root gets, value for value, one
    object per table (6 steps, one flush), and run.json says finished."""
    local_dir = record_run(tmp_path, "same", "gspo", seed=7, spread=0.01)
    s3_dir = record_run(s3_root, "same", "gspo", seed=7, spread=0.01)
    assert s3_dir.startswith(s3_root + "/same-")
    local, remote = _tables(local_dir), _tables(s3_dir)
    for table in local:
        assert len(local[table]) > 0
        pd.testing.assert_frame_equal(local[table], remote[table])
    assert list(remote[STEPS_DIR][Step.STEP]) == list(range(STEPS))
    folders = [f.name.split("/")[0] for f in storage.list_tree(s3_dir)]
    assert folders == ["run.json", SEQUENCES_DIR, STEPS_DIR, schema.TOKENS_DIR]  # one part each
    info = schema.read_run_info(s3_dir)
    assert info.status == schema.STATUS_FINISHED and info.last_step == STEPS - 1
    assert info.faults == []


def _log(rec: RunRecorder, steps, make_batch) -> None:
    for step in steps:
        rec.log_step(step, **make_batch(2, 4, 6, seed=step), loss=float(step))


@pytest.mark.slow
def test_resume_on_s3(s3_root, make_batch):
    """Resuming an S3 run appends: 3 + 3 steps, one compacted object per table, and run.json
    records the resume."""
    kw = {"algorithm": "grpo", "mlflow": False, "steps_per_file": 1, "run_id": "resumed-1"}
    with RunRecorder(s3_root, **kw) as rec:
        _log(rec, range(3), make_batch)
    with RunRecorder(s3_root, **kw) as rec:
        assert rec.resumed and rec.last_step == 2
        _log(rec, range(3, 6), make_batch)
    run_dir = storage.join(s3_root, "resumed-1")
    steps = tables.read_table(run_dir, STEPS_DIR)
    assert list(steps[Step.STEP]) == [0, 1, 2, 3, 4, 5]
    assert list(steps[Step.LOSS]) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert len(tables.read_table(run_dir, SEQUENCES_DIR)) == 6 * 8
    info = schema.read_run_info(run_dir)
    assert info.status == "finished" and len(info.other["resumed_at"]) == 1
    listed = [f.name for f in storage.list_tree(run_dir)]
    (step_object,) = [n.split("/")[1] for n in listed if n.startswith(STEPS_DIR)]
    assert step_object.startswith("compacted-")  # the 2nd close merged the 1st's and 3 parts
    assert {k: schema.parse_part_name(step_object)[k] for k in ("first", "last")} == {
        "first": 0,
        "last": 5,
    }


# the S3 case starts moto's server (requested by name below, so the tier hook cannot see it)
@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.slow)])
def test_a_reader_between_compaction_and_deletes_sees_each_row_once(
    where, tmp_path, request, make_batch
):
    """Between the compacted object's upload and the parts' deletes a reader lists both: the
    readers skip what the compacted file supersedes, even with a projection lacking the keys."""
    root = str(tmp_path) if where == "local" else request.getfixturevalue("s3_root")
    kw = {"algorithm": "gspo", "mlflow": False, "run_id": "window", "steps_per_file": 2}
    with RunRecorder(root, **kw) as rec:
        _log(rec, range(4), make_batch)
    run_dir = storage.join(root, "window")
    for table in (STEPS_DIR, SEQUENCES_DIR):
        (listed,) = tables.list_now(storage.join(run_dir, table))
        compacted = storage.join(run_dir, table, listed.name)
        assert listed.name.startswith("compacted-")
        t = pq.read_table(storage.open_input(compacted))
        steps = t.column(Step.STEP).to_numpy()
        for seq, (lo, hi) in enumerate([(0, 1), (2, 3)]):  # the parts it replaced, put back
            part = t.filter(pa.array((steps >= lo) & (steps <= hi)))
            with storage.atomic_path(
                storage.join(run_dir, table, schema.part_name(lo, hi, 0, seq))
            ) as tmp:
                pq.write_table(part, tmp)
        assert len(storage.list_files(storage.join(run_dir, table))) == 3
    assert list(tables.read_table(run_dir, STEPS_DIR)[Step.STEP]) == [0, 1, 2, 3]
    assert len(tables.read_table(run_dir, SEQUENCES_DIR, columns=[Seq.REWARD])) == 4 * 8
    data.clear_caches()
    (run,) = discover(root).runs
    assert list(data.load_steps(run).df[Step.STEP]) == [0, 1, 2, 3]
    assert len(data.load_sequences(run, [Seq.REWARD]).df) == 4 * 8
    assert len(data.load_sequences(run, [Seq.REWARD], (1, 2)).df) == 2 * 8


@pytest.mark.slow
def test_an_s3_outage_is_a_fault_and_the_parts_are_retried(
    s3_server, s3_root, monkeypatch, make_batch
):
    """S3 unreachable mid-run: log_step never waits, the failures are faults (warned, in
    run.json), and once S3 answers again the parts that failed are written: no step is lost."""
    port = int(s3_server.rsplit(":", 1)[1])
    proxy = OutageProxy(port)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)  # the recorder talks through the proxy
    try:
        rec = RunRecorder(
            s3_root, algorithm="gspo", mlflow=False, run_id="outage", flush_interval_s=0.2
        )
        _log(rec, range(2), make_batch)
        assert rec.flush(timeout=60)
        proxy.set_down(True)
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning, match="parquet sink failed"):
            _log(rec, range(2, 5), make_batch)
            deadline = time.monotonic() + 60
            while not rec.faults and time.monotonic() < deadline:
                time.sleep(0.1)
        assert time.monotonic() - t0 < 60
        assert rec.faults and rec.faults[0]["sink"] == "parquet"
        proxy.set_down(False)
        rec.close()
    finally:
        proxy.close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    run_dir = storage.join(s3_root, "outage")
    assert list(tables.read_table(run_dir, STEPS_DIR)[Step.STEP]) == [0, 1, 2, 3, 4]
    assert len(tables.read_table(run_dir, SEQUENCES_DIR)) == 5 * 8
    info = schema.read_run_info(run_dir)
    assert info.status == "finished" and info.faults and info.faults[0]["sink"] == "parquet"


KILL_SCRIPT = """
import sys, time, torch
from training_hooks import RunRecorder
rec = RunRecorder(sys.argv[1], algorithm="gspo", mlflow=False, run_id="killed",
                  flush_interval_s=0.2, steps_per_file=2)
print(rec.run_dir, flush=True)
for step in range(10_000):
    g = torch.Generator().manual_seed(step)
    old = -torch.rand(8, 6, generator=g) - 1
    rec.log_step(step, rewards=torch.randint(0, 2, (2, 4), generator=g).float(),
                 logprobs=old + 0.01, old_logprobs=old, mask=torch.ones(8, 6, dtype=torch.bool))
    if step % 3 == 2:
        assert rec.flush(timeout=60)
        print(step, flush=True)   # every step up to here is in S3
    time.sleep(0.02)
"""


@pytest.mark.slow
def test_kill_9_mid_run_leaves_every_flushed_step_readable(s3_root):
    """A recording process killed with SIGKILL mid-run: every step it had flushed to S3 is
    readable (steps and sequences), through the app's data layer too; the run says running."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, s3_root],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        run_dir = proc.stdout.readline().strip()
        flushed = -1
        while flushed < 8:
            line = proc.stdout.readline()
            assert line, "the recording process ended early"
            flushed = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    steps = tables.read_table(run_dir, STEPS_DIR)
    assert set(range(flushed + 1)) <= set(steps[Step.STEP])
    seqs = tables.read_table(run_dir, SEQUENCES_DIR, columns=[Seq.STEP])
    assert set(range(flushed + 1)) <= set(seqs[Seq.STEP])
    assert (seqs.groupby(Seq.STEP).size() == 8).all()
    data.clear_caches()
    (run,) = discover(s3_root).runs
    assert run.info.status == "running" and run.has_sequences
    assert set(range(flushed + 1)) <= set(data.load_steps(run).df[Step.STEP])


def test_importer_and_sync_with_an_s3_root(tmp_path, s3_root, mlflow_uri):
    """`python -m training_hooks.importers ... --root s3://...` writes a run the app lists;
    importing the grown log again says it was imported and leaves the bucket as it was, and with
    --replace replaces it (the old object deleted); `python -m training_hooks.sync s3://...`
    replays it into MLflow with its files as artifacts."""
    out = tmp_path / "trl-out"
    history = [{**TRL_STEP, "step": s, "reward": 0.25 * s} for s in (1, 2, 3)]
    _trl_state(out, history)
    args = ["trl", str(out), "--root", s3_root, "--run-id", "trl-one", "--algorithm", "grpo"]
    assert importers_cli.main(args) == 0
    run_dir = storage.join(s3_root, "trl-one")
    first = [f.name for f in storage.list_tree(run_dir)]
    _trl_state(out, [*history, {**TRL_STEP, "step": 4, "reward": 1.0}])
    assert importers_cli.main(args) == 1  # refused, already imported: nothing written
    assert [f.name for f in storage.list_tree(run_dir)] == first
    assert importers_cli.main([*args, "--replace"]) == 0
    second = [f.name for f in storage.list_tree(run_dir)]
    assert len(second) == 2 and not set(first) & set(second) - {"run.json"}
    steps = tables.read_table(run_dir, STEPS_DIR)
    assert list(steps[Step.STEP]) == [1, 2, 3, 4]
    assert list(steps[Step.REWARD_MEAN]) == [0.25, 0.5, 0.75, 1.0]
    data.clear_caches()
    (run,) = discover(s3_root).runs
    assert run.key == "trl-one" and run.info.source == "trl" and run.last_step == 4

    assert sync.main([s3_root, "--tracking-uri", mlflow_uri]) == 0
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    (ml_run,) = client.search_runs(client.search_experiments()[0].experiment_id.split())
    hist = client.get_metric_history(ml_run.info.run_id, schema.mlflow_key(Step.REWARD_MEAN))
    assert sorted((m.step, m.value) for m in hist) == [(1, 0.25), (2, 0.5), (3, 0.75), (4, 1.0)]
    arts = client.list_artifacts(ml_run.info.run_id, "gspo_dash")
    assert {a.path.split("/")[-1] for a in arts} >= {"run.json", STEPS_DIR}
    assert sync.main([s3_root, "--tracking-uri", mlflow_uri]) == 0  # twice: nothing new
    assert len(client.get_metric_history(ml_run.info.run_id, hist[0].key)) == 4
