"""Resilience: failing, hung and unreachable sinks, disk errors, kill -9, and resuming after it."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pandas as pd
import pytest

import training_hooks.sinks.parquet as sinks_mod
from training_hooks import RunRecorder
from training_hooks.schema import Step, read_run_info


def steps_on_disk(run_dir: str) -> list[int]:
    folder = os.path.join(run_dir, "steps")
    files = [f for f in os.listdir(folder) if f.endswith(".parquet") and not f.startswith(".")]
    if not files:
        return []
    df = pd.concat([pd.read_parquet(os.path.join(folder, f)) for f in files])
    return sorted(df[Step.STEP].tolist())


class ExplodingSink:
    """Raises on every flush."""

    name = "exploding"

    def __init__(self):
        self.writes = 0

    def open(self):
        pass

    def write(self, record):
        self.writes += 1

    def should_flush(self):
        return True

    def flush(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self, status):
        raise RuntimeError("cannot close either")


class HangingSink:
    """Blocks in flush until released (a tracking server that never answers)."""

    name = "hanging"

    def __init__(self):
        self.release = threading.Event()

    def open(self):
        pass

    def write(self, record):
        pass

    def should_flush(self):
        return True

    def flush(self):
        self.release.wait()

    def close(self, status):
        self.release.wait()


def test_raising_sink_warns_once_and_parquet_keeps_recording(tmp_path, make_batch):
    """A sink raising on every call: one warning, the fault in run.json, Parquet complete."""
    sink = ExplodingSink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with RunRecorder(root=tmp_path, name="boom", sinks=[sink], flush_interval_s=0.2) as rec:
            for s in range(12):
                rec.log_step(s, **make_batch(seed=s))
            rec.flush(timeout=10)
    ours = [w for w in caught if "exploding sink failed" in str(w.message)]
    assert len(ours) == 1 and issubclass(ours[0].category, RuntimeWarning)
    assert "No space left on device" in str(ours[0].message)
    assert sink.writes == 12
    info = read_run_info(rec.run_dir)
    assert info.status == "finished"
    kinds = {(f["sink"], f["kind"]) for f in info.faults}
    assert ("exploding", "flush") in kinds and ("exploding", "close") in kinds
    assert not any(f["sink"] == "parquet" for f in info.faults)
    assert steps_on_disk(rec.run_dir) == list(range(12))


def test_hung_sink_never_blocks_training_and_close_is_bounded(tmp_path, make_batch):
    """A sink hung forever: log_step stays fast, its full queue drops, close gives up in time."""
    sink = HangingSink()
    rec = RunRecorder(root=tmp_path, name="hang", sinks=[sink], queue_size=4, close_timeout_s=1.0)
    try:
        worst = 0.0
        for s in range(30):
            batch = make_batch(seed=s)
            time.sleep(0.02)  # the training step (a queue of 4 with no time between steps could
            # overflow the healthy Parquet sink too)
            t0 = time.perf_counter()
            rec.log_step(s, **batch)
            worst = max(worst, time.perf_counter() - t0)
        assert worst < 1.0  # log_step never waited on the hung sink
        t0 = time.monotonic()
        rec.close()
        assert time.monotonic() - t0 < 10.0
        info = read_run_info(rec.run_dir)
        assert info.status == "finished"
        kinds = {f["kind"] for f in info.faults if f["sink"] == "hanging"}
        assert {"queue_full", "hung"} <= kinds
        assert steps_on_disk(rec.run_dir) == list(range(30))
    finally:
        sink.release.set()


def test_disk_error_is_retried_without_losing_steps(tmp_path, make_batch, monkeypatch):
    """Part writes failing for a while (disk full): one fault, buffered steps written on recovery."""
    real = sinks_mod.write_parquet_atomic
    failing = {"on": True}

    def flaky(table, path, **kw):
        if failing["on"]:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(table, path, **kw)

    monkeypatch.setattr(sinks_mod, "write_parquet_atomic", flaky)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = RunRecorder(root=tmp_path, name="full", flush_interval_s=0.1, steps_per_file=3)
        for s in range(10):
            rec.log_step(s, **make_batch(seed=s))
        rec.flush(timeout=10)
        assert steps_on_disk(rec.run_dir) == []
        failing["on"] = False
        for s in range(10, 14):
            rec.log_step(s, **make_batch(seed=s))
        rec.close()
    assert len([w for w in caught if "parquet sink failed" in str(w.message)]) == 1
    assert steps_on_disk(rec.run_dir) == list(range(14))
    info = read_run_info(rec.run_dir)
    assert info.status == "finished"
    assert [f["kind"] for f in info.faults if f["sink"] == "parquet"][0] == "flush"


PERMISSION_CHILD = textwrap.dedent(
    """
    import json, os, sys, warnings
    import torch
    sys.path.insert(0, {tests!r})
    from conftest import _make_batch
    from training_hooks import RunRecorder
    warnings.simplefilter("ignore")
    rec = RunRecorder(root={root!r}, name="perm", flush_interval_s=0.1, steps_per_file=2)
    for s in range(4):
        rec.log_step(s, **_make_batch(seed=s))
    rec.flush(timeout=10)
    locked = [os.path.join(rec.run_dir, d) for d in ("steps", "sequences")]
    before = len(os.listdir(locked[0]))
    for d in locked:
        os.chmod(d, 0o555)
    for s in range(4, 10):
        rec.log_step(s, **_make_batch(seed=s))
    rec.flush(timeout=10)
    written_while_locked = len(os.listdir(locked[0]))
    for d in locked:
        os.chmod(d, 0o755)
    rec.close()
    print(json.dumps({{"run_dir": rec.run_dir, "before": before, "locked": written_while_locked}}))
    """
)


def test_permission_denied_is_a_fault_and_recovers(tmp_path):
    """Run folders made read-only mid-run (real EACCES): fault in run.json, training goes on, and
    the buffered steps land once the folder is writable again."""
    tests = os.path.dirname(os.path.abspath(__file__))
    code = PERMISSION_CHILD.format(tests=tests, root=str(tmp_path))
    cmd = [sys.executable, "-c", code]
    if os.geteuid() == 0:  # root ignores file modes unless it drops CAP_DAC_OVERRIDE
        capsh = shutil.which("capsh")
        if capsh is None:
            pytest.skip("running as root without capsh: cannot make a folder unwritable")
        cmd = [
            capsh,
            "--drop=cap_dac_override,cap_dac_read_search",
            "--",
            "-c",
            " ".join(map(_shell_quote, cmd)),
        ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["locked"] == result["before"] > 0  # nothing new appeared while locked
    info = read_run_info(result["run_dir"])
    perm = [f for f in info.faults if f["sink"] == "parquet"]
    assert perm and "Permission denied" in perm[0]["error"]
    assert info.status == "finished"
    assert steps_on_disk(result["run_dir"]) == list(range(10))


def _shell_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_mlflow_server_does_not_touch_training(tmp_path, make_batch, monkeypatch):
    """MLflow URI with nothing listening: a fault for mlflow, Parquet complete, close returns."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    uri = f"http://127.0.0.1:{_free_port()}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.monotonic()
        with RunRecorder(
            root=tmp_path, name="down", mlflow=uri, close_timeout_s=20, mlflow_process=False
        ) as rec:
            for s in range(8):
                rec.log_step(s, **make_batch(seed=s))
        assert time.monotonic() - t0 < 30
    assert any("mlflow sink failed" in str(w.message) for w in caught)
    info = read_run_info(rec.run_dir)
    assert info.status == "finished"
    assert [f["kind"] for f in info.faults if f["sink"] == "mlflow"] == ["open"]
    assert info.mlflow == {}
    assert steps_on_disk(rec.run_dir) == list(range(8))


KILL_CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from conftest import _make_batch
    from training_hooks import RunRecorder
    rec = RunRecorder(root={root!r}, name="killed", run_id="killed-run", flush_interval_s=0.3,
                      steps_per_file=1000)
    step = 0
    while True:
        rec.log_step(step, **_make_batch(seed=step))
        print(step, flush=True)
        step += 1
        time.sleep(0.02)
    """
)


def test_kill_9_keeps_flushed_steps_and_run_resumes(tmp_path, make_batch):
    """kill -9 mid-run: every step logged more than a flush interval before is readable, run.json
    says running (not finished); reopening the run id appends and finishes it."""
    tests = os.path.dirname(os.path.abspath(__file__))
    code = KILL_CHILD.format(tests=tests, root=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        while True:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(proc.stderr.read()[-3000:])
            if int(line) >= 15:
                marked = int(line)
                break
        time.sleep(2.0)  # > flush_interval_s (0.3 s) plus a part write on a busy machine
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    run_dir = os.path.join(tmp_path, "killed-run")
    on_disk = steps_on_disk(run_dir)
    assert set(range(marked + 1)) <= set(on_disk), (marked, on_disk)
    assert on_disk == list(range(len(on_disk))), on_disk  # no gap, no duplicate, no half part
    assert not [f for f in os.listdir(os.path.join(run_dir, "steps")) if not f.endswith(".parquet")]
    info = read_run_info(run_dir)
    assert info.status == "running" and info.ended_at is None
    assert time.time() - info.updated_at < 30  # the heartbeat the app uses to call it crashed

    last = on_disk[-1]
    with RunRecorder(root=tmp_path, run_id="killed-run", algorithm="gspo") as rec:
        assert rec.resumed and rec.last_step is not None
        for s in range(last + 1, last + 4):
            rec.log_step(s, **make_batch(seed=s))
    assert steps_on_disk(run_dir) == list(range(last + 4))
    info = read_run_info(run_dir)
    assert info.status == "finished" and info.name == "killed"


def test_mlflow_server_that_never_answers_is_abandoned_at_close(tmp_path, make_batch):
    """A tracking server that accepts connections but never replies: close() returns after
    close_timeout_s, reports the MLflow sink as hung, kills its child process; Parquet is whole."""
    blackhole = socket.socket()
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(16)  # connections complete in the backlog; nothing ever answers
    uri = f"http://127.0.0.1:{blackhole.getsockname()[1]}"
    try:
        rec = RunRecorder(root=tmp_path, name="mute", mlflow=uri, close_timeout_s=2.0)
        for s in range(5):
            rec.log_step(s, **make_batch(seed=s))
        t0 = time.monotonic()
        rec.close()
        assert time.monotonic() - t0 < 15.0
        child = rec.mlflow_sink._child
        if child is not None:  # the child had started: abandoned means killed
            assert child.proc.wait(timeout=10) is not None
    finally:
        blackhole.close()
    info = read_run_info(rec.run_dir)
    assert info.status == "finished"
    assert [f["kind"] for f in info.faults if f["sink"] == "mlflow"] == ["hung"]
    assert steps_on_disk(rec.run_dir) == list(range(5))
