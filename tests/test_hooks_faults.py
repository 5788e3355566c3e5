"""Resilience: failing, hung and unreachable sinks, disk errors, kill -9, and resuming after it;
a dead tracking server noticed in seconds."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pandas as pd
import pytest
from servers import free_port, mlflow_server_process, unavailable

import training_hooks.sinks.parquet as sinks_mod
from training_hooks import RunRecorder
from training_hooks.schema import Step, read_run_info
from training_hooks.sinks.base import SinkFailed
from training_hooks.sinks.mlflow import CHILD_HTTP_ENV, _child_env, probe_tracking_server


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


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_unreachable_mlflow_server_does_not_touch_training(tmp_path, make_batch, monkeypatch):
    """MLflow URI with nothing listening: a fault for mlflow, Parquet complete, close returns."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    uri = f"http://127.0.0.1:{free_port()}"
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


@pytest.mark.slow
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


# ---------------------------------------------------------------------------------- fail fast


@contextlib.contextmanager
def _silent_port():
    """A port that accepts connections (the kernel's backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@contextlib.contextmanager
def _health_only_server():
    """An HTTP server that answers GET /health (404 for /<prefix>/health) and never answers
    anything else (a tracking server whose API hangs while it looks alive)."""
    release = threading.Event()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            line = self.rfile.readline().decode("latin-1")
            if " /health " in line:
                self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOK")
            elif "/health " in line:  # under another prefix: an error status, still an answer
                self.wfile.write(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            else:
                release.wait(120)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def _record(rec: RunRecorder, make_batch, steps: range, pause_s: float = 0.05) -> float:
    """Log ``steps`` (a short pause each, the training step); returns the time of the last one."""
    for s in steps:
        rec.log_step(s, **make_batch(seed=s))
        time.sleep(pause_s)
    return time.monotonic()


@pytest.mark.slow
@pytest.mark.parametrize("server", ["refused", "silent"])
def test_dead_tracking_server_costs_seconds(server, tmp_path, make_batch):
    """A tracking URI nobody listens on, or a socket that accepts and never answers: the sink's
    /health probe fails at open (an "open" fault naming it), training goes on, close() returns
    within 10 s of the last step with the default close_timeout_s (60 s), the MLflow child is
    gone, and Parquet holds every step."""
    ctx = (
        _silent_port()
        if server == "silent"
        else contextlib.nullcontext(f"http://127.0.0.1:{free_port()}")
    )
    with ctx as uri, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = RunRecorder(root=tmp_path, name=f"dead-{server}", mlflow=uri)
        last = _record(rec, make_batch, range(8))
        rec.close()
        close_s = time.monotonic() - last
    print(f"{server}: close() returned {close_s:.2f} s after the last step")
    assert close_s < 10.0
    assert any("mlflow sink failed" in str(w.message) for w in caught)
    info = read_run_info(rec.run_dir)
    assert info.status == "finished" and info.mlflow == {}
    faults = [f for f in info.faults if f["sink"] == "mlflow"]
    assert [f["kind"] for f in faults] == ["open"]
    assert "does not answer" in faults[0]["error"] and "training_hooks.sync" in faults[0]["error"]
    child = rec.mlflow_sink._child
    assert child is not None and child.proc.wait(timeout=10) is not None
    assert steps_on_disk(rec.run_dir) == list(range(8))


@pytest.mark.slow
def test_api_that_hangs_behind_a_live_health_check_is_abandoned(tmp_path, make_batch):
    """/health answers but MLflow's calls hang: the sink waits (the server looks alive), close()
    abandons it after close_timeout_s, reports it hung and kills its child; Parquet is whole."""
    with _health_only_server() as uri:
        rec = RunRecorder(root=tmp_path, name="mute", mlflow=uri, close_timeout_s=2.0)
        last = _record(rec, make_batch, range(5))
        rec.close()
        assert time.monotonic() - last < 10.0
        child = rec.mlflow_sink._child
        assert child is not None and child.proc.wait(timeout=10) is not None  # killed
    info = read_run_info(rec.run_dir)
    assert info.status == "finished"
    assert [f["kind"] for f in info.faults if f["sink"] == "mlflow"] == ["hung"]
    assert steps_on_disk(rec.run_dir) == list(range(5))


@pytest.mark.slow
def test_probe_names_what_is_wrong():
    """probe_tracking_server: None for an answering server (any HTTP status) or a non-HTTP store;
    the reason for a refused or silent one, within its timeout."""
    with _health_only_server() as uri:
        assert probe_tracking_server(uri) is None
        assert probe_tracking_server(uri + "/prefix/") is None  # 404 on /prefix/health: alive
    assert probe_tracking_server("sqlite:///x.db") is None
    assert "refused" in probe_tracking_server(f"http://127.0.0.1:{free_port()}")
    with _silent_port() as uri:
        t0 = time.monotonic()
        assert "timed out" in probe_tracking_server(uri, timeout_s=1.0)
        assert time.monotonic() - t0 < 3.0


def test_child_bounds_mlflow_http_retries(monkeypatch):
    """The MLflow child gets bounded HTTP retries and timeouts unless the user set their own."""
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
    env = _child_env()
    assert env["MLFLOW_HTTP_REQUEST_TIMEOUT"] == CHILD_HTTP_ENV["MLFLOW_HTTP_REQUEST_TIMEOUT"]
    assert env["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"
    assert int(CHILD_HTTP_ENV["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]) <= 2
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ  # the parent's environment is untouched


class FailingSink(ExplodingSink):
    """Gives up for good on its second flush (SinkFailed), counting every call it gets."""

    name = "giving-up"

    def __init__(self):
        super().__init__()
        self.flushes = self.closes = self.aborts = 0

    def should_flush(self):
        return False  # only when asked

    def flush(self):
        self.flushes += 1
        if self.flushes >= 2:
            raise SinkFailed("server gone")

    def close(self, status):
        self.closes += 1

    def abort(self):
        self.aborts += 1


def test_sink_failed_turns_the_sink_off(tmp_path, make_batch):
    """SinkFailed: one "failed" fault, abort() called, no more writes, flushes or close for it,
    and close() does not wait for it."""
    sink = FailingSink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = RunRecorder(root=tmp_path, name="off", sinks=[sink], flush_interval_s=60)
        rec.log_step(0, **make_batch(seed=0))
        assert rec.flush(timeout=10)
        rec.log_step(1, **make_batch(seed=1))
        assert rec.flush(timeout=10)  # the failing flush is answered, not left waiting
        for s in range(2, 6):
            rec.log_step(s, **make_batch(seed=s))
        rec.close()
    assert (sink.writes, sink.flushes, sink.closes, sink.aborts) == (2, 2, 0, 1)
    info = read_run_info(rec.run_dir)
    assert [(f["kind"], f["error"]) for f in info.faults if f["sink"] == "giving-up"] == [
        ("failed", "server gone")
    ]
    assert steps_on_disk(rec.run_dir) == list(range(6))


@contextlib.contextmanager
def _mlflow_server(db):
    """`mlflow server` over the SQLite store ``db`` (the test freezes and kills it); yields
    (process, url) once /health answers."""
    try:
        with mlflow_server_process(f"sqlite:///{db}", os.path.dirname(db)) as (proc, url):
            yield proc, url
    except RuntimeError as e:  # did not start: its log tail says why
        unavailable(str(e))


def _run_against(root, url: str, name: str, make_batch, stop) -> tuple[RunRecorder, float]:
    """Steps 0-9 reach MLflow, ``stop()`` breaks the server, steps 10-19 follow, close();
    returns the recorder and how long close() took after the last step."""
    rec = RunRecorder(
        root=root, name=name, mlflow=url, flush_interval_s=0.5, mlflow_steps_per_batch=5
    )
    _record(rec, make_batch, range(10))
    assert rec.flush(timeout=180) and not rec.faults, rec.faults
    stop()
    last = _record(rec, make_batch, range(10, 20), pause_s=0.1)
    rec.close()
    return rec, time.monotonic() - last


@pytest.mark.slow
def test_tracking_server_dying_mid_run_then_sync(tmp_path, make_batch, mlflow_db_template):
    """A real `mlflow server` frozen (SIGSTOP: accepts, never answers) or killed mid-run: the
    sink gives up (a "failed" fault), close() returns within seconds of the last step, Parquet
    holds every step; after a restart, `python -m training_hooks.sync` fills the killed run's
    MLflow history: every metric at every step exactly once."""
    db = tmp_path / "server.db"
    shutil.copyfile(mlflow_db_template, db)
    root = tmp_path / "runs"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _mlflow_server(db) as (proc, url):
            frozen, frozen_s = _run_against(
                root, url, "frozen", make_batch, lambda: os.killpg(proc.pid, signal.SIGSTOP)
            )
            os.killpg(proc.pid, signal.SIGCONT)
            killed, killed_s = _run_against(
                root, url, "killed", make_batch, lambda: os.killpg(proc.pid, signal.SIGKILL)
            )
    print(f"close() after the last step: server frozen {frozen_s:.2f} s, killed {killed_s:.2f} s")
    assert killed_s < 10.0 and frozen_s < 15.0
    for rec in (frozen, killed):
        info = read_run_info(rec.run_dir)
        assert info.status == "finished" and steps_on_disk(rec.run_dir) == list(range(20))
        faults = [f for f in info.faults if f["sink"] == "mlflow"]
        assert [f["kind"] for f in faults] == ["failed"], faults
        assert "does not answer" in faults[0]["error"]

    with _mlflow_server(db) as (_, url):
        cmd = [sys.executable, "-m", "training_hooks.sync", killed.run_dir, "--tracking-uri", url]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        from mlflow.tracking import MlflowClient

        client = MlflowClient(url)
        run_id = read_run_info(killed.run_dir).mlflow["run_id"]
        keys = client.get_run(run_id).data.metrics
        assert len(keys) > 10
        for key in keys:
            steps = sorted(m.step for m in client.get_metric_history(run_id, key))
            assert steps == list(range(20)), key
