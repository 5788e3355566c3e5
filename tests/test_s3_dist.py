"""One distributed run on S3: 2 gloo ranks write into one run folder (each rank its own sequence
parts), while the dashboard (AppTest) reads the bucket; afterwards every step of both ranks is
there, compacted per rank."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from servers import free_port
from test_hooks_dist import PROMPTS, G, batch

from app import data, ui
from app.discovery import discover
from training_hooks import RunRecorder, schema, storage, tables
from training_hooks.schema import SEQUENCES_DIR, STEPS_DIR, Seq, Step

MIN_STEPS = 4


def _worker(rank: int, world: int, port: int, root: str, stop_file: str) -> None:
    """Log steps until rank 0 sees ``stop_file`` (after MIN_STEPS), the flag broadcast to both."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        kw = {"name": "ddp-s3", "algorithm": "gspo", "mlflow": False}
        with RunRecorder(
            root, **kw, run_id="ddp-s3", steps_per_file=1, flush_interval_s=0.2
        ) as rec:
            step, stop = 0, torch.zeros(1)
            while not stop.item():
                rec.log_step(step, **batch(step % 3, rank), loss=1.0)
                step += 1
                time.sleep(0.1)
                stop[0] = float(rank == 0 and step >= MIN_STEPS and os.path.exists(stop_file))
                dist.broadcast(stop, src=0)
    finally:
        dist.destroy_process_group()


def _runs_table(at) -> dict:
    df = at.dataframe[0].value
    df = df.data if hasattr(df, "data") else df  # a Styler or a DataFrame
    return df.set_index("run id").to_dict("index")


@pytest.mark.slow
def test_two_ranks_write_one_s3_run_while_the_dashboard_reads(s3_root, tmp_path, monkeypatch):
    """Ranks 0 and 1 (gloo) record one run to S3; the Runs and Compare pages read it while it
    runs (status running) and after (finished, every step); each rank's sequences are there."""
    from streamlit.testing.v1 import AppTest

    from app.pages import MAIN

    stop_file = str(tmp_path / "stop")
    ctx = mp.start_processes(
        _worker,
        args=(2, free_port(), s3_root, stop_file),
        nprocs=2,
        join=False,
        start_method="spawn",
    )
    try:
        run_dir = storage.join(s3_root, "ddp-s3")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # wait for two flushed steps
            if len(tables.read_table(run_dir, STEPS_DIR, columns=[Step.STEP])) >= 2:
                break
            time.sleep(0.5)
        monkeypatch.setenv("GSPO_DASH_ROOT", s3_root)
        monkeypatch.setattr(ui, "REMOTE_WAIT_S", None)  # the first render waits for run.json
        monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
        monkeypatch.chdir(tmp_path)
        data.clear_caches()
        at = AppTest.from_file(MAIN, default_timeout=180).run()
        assert not at.exception, [e.value for e in at.exception]
        row = _runs_table(at)["ddp-s3"]
        assert row["status"] == "running" and row["last step"] >= 1
        at.switch_page("app_pages/compare.py").run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.get("echarts_chart")
    finally:
        open(stop_file, "w").close()
        while not ctx.join(timeout=180):
            pass

    info = schema.read_run_info(run_dir)
    n = info.last_step + 1
    assert info.status == "finished" and info.other["world_size"] == 2 and info.faults == []
    assert n >= MIN_STEPS
    assert list(tables.read_table(run_dir, STEPS_DIR)[Step.STEP]) == list(range(n))
    seqs = tables.read_table(run_dir, SEQUENCES_DIR)
    per_rank = seqs.groupby(Seq.RANK)[Seq.STEP].agg(["nunique", "size"])
    assert per_rank.to_dict("index") == {
        r: {"nunique": n, "size": n * PROMPTS[r] * G} for r in range(2)
    }
    names = [f.name for f in storage.list_tree(run_dir)]
    seq_objects = sorted(x.split("/")[1] for x in names if x.startswith(SEQUENCES_DIR))
    assert [schema.parse_part_name(x)["rank"] for x in seq_objects] == [0, 1]
    assert all(x.startswith("compacted-") for x in seq_objects)  # each rank compacted its own

    data.clear_caches()
    (run,) = discover(s3_root).runs
    assert run.status == "finished" and run.last_step == n - 1
