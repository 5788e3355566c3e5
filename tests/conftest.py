"""Shared fixtures: a pre-migrated MLflow SQLite store copied per test, a live `mlflow server`,
a batch factory, the dashboard's runs (two tiny runs recorded once per session, a writable
copy per test, the AppTest environment), and an S3-compatible server (``s3_server.py``).

A new MLflow SQLite store spends seconds migrating its schema on first open, so the session
migrates one template database once and every test gets its own copy. `mlflow server` takes tens
of seconds to boot on a busy 2-core machine, so when a collected test asks for it, it is started
right after collection and boots while the other tests run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from app_runs import record_run
from s3_server import s3_root, s3_server  # noqa: F401 -- fixtures (moto's S3 server)


@pytest.fixture(scope="session")
def mlflow_db_template(tmp_path_factory) -> str:
    """Path of an MLflow SQLite database migrated once per session (do not write to it)."""
    folder = tmp_path_factory.mktemp("mlflow-template")
    path = str(folder / "mlflow.db")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{path}")
    client.search_experiments()  # creates and migrates the schema
    client._tracking_client.store.engine.dispose()  # release the file before it is copied
    return path


@pytest.fixture
def mlflow_uri(mlflow_db_template, tmp_path, monkeypatch) -> str:
    """A fresh, already-migrated SQLite tracking URI in this test's tmp dir (also the cwd)."""
    path = tmp_path / "mlflow.db"
    shutil.copyfile(mlflow_db_template, path)
    monkeypatch.chdir(tmp_path)  # artifacts default to ./mlruns: keep them in tmp
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return f"sqlite:///{path}"


def _make_batch(
    P: int = 4,
    G: int = 4,
    T: int = 12,
    *,
    seed: int = 0,
    spread: float = 1e-3,
    dtype: torch.dtype = torch.float32,
    ref: bool = False,
    entropy: bool = False,
    truncated: bool = False,
) -> dict:
    """Random log_step keyword arguments: rewards (P, G), (B, T) logprobs around old ones, mask."""
    gen = torch.Generator().manual_seed(seed)
    B = P * G
    old = -torch.rand(B, T, generator=gen, dtype=dtype) * 3
    logp = old + spread * torch.randn(B, T, generator=gen, dtype=dtype)
    mask = torch.rand(B, T, generator=gen) < 0.75
    mask[:, 0] = True
    batch = {
        "rewards": torch.randint(0, 3, (P, G), generator=gen).to(dtype),
        "logprobs": logp,
        "old_logprobs": old,
        "mask": mask,
    }
    if ref:
        batch["ref_logprobs"] = old + 0.05 * torch.randn(B, T, generator=gen, dtype=dtype)
    if entropy:
        batch["entropy"] = torch.rand(B, T, generator=gen, dtype=dtype) * 2
    if truncated:
        batch["truncated"] = torch.rand(B, generator=gen) < 0.3
    return batch


@pytest.fixture
def make_batch():
    """Factory: ``make_batch(P, G, T, seed=..., ref=..., entropy=..., truncated=...)``."""
    return _make_batch


def pytest_configure(config):
    # torch's intra-op pool on a shared 2-core machine: keep the suite from oversubscribing
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


# ----------------------------------------------------------------------------- mlflow server

_SERVER: dict = {}
SERVER_START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_mlflow_server() -> None:
    folder = tempfile.mkdtemp(prefix="gspo-dash-mlflow-server-")
    port = _free_port()
    log = open(os.path.join(folder, "server.log"), "w")  # noqa: SIM115 -- closed at session end
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{folder}/server.db",
            "--artifacts-destination",
            os.path.join(folder, "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=folder,
        # no job runner: MLflow 3.x otherwise starts ~10 huey worker processes the tests never use
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped with every worker it spawns
    )
    _SERVER.update(
        proc=proc, url=f"http://127.0.0.1:{port}", folder=folder, log=log, t0=time.monotonic()
    )


def pytest_collection_modifyitems(session, config, items):
    if any("mlflow_server" in getattr(item, "fixturenames", ()) for item in items):
        _start_mlflow_server()


def pytest_sessionfinish(session, exitstatus):
    proc = _SERVER.get("proc")
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    _SERVER["log"].close()
    shutil.rmtree(_SERVER["folder"], ignore_errors=True)


@pytest.fixture
def mlflow_server() -> str:
    """URL of a real `mlflow server` on 127.0.0.1 (random free port), shared by the session.

    Skips, with the server's log tail, only if it does not answer /health within 60 s.
    """
    if not _SERVER:
        _start_mlflow_server()
    proc, url = _SERVER["proc"], _SERVER["url"]
    t0 = time.monotonic()  # 60 s from now: the server may also have booted since collection
    while time.monotonic() - t0 < SERVER_START_TIMEOUT_S and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return url
        except OSError:
            time.sleep(0.25)
    _SERVER["log"].flush()
    with open(os.path.join(_SERVER["folder"], "server.log")) as f:
        tail = f.read()[-1200:]
    pytest.skip(
        f"mlflow server did not answer on {url} within {SERVER_START_TIMEOUT_S:.0f} s: {tail}"
    )


# ----------------------------------------------------------------------------- dashboard runs


@pytest.fixture(scope="session")
def recorded_root(tmp_path_factory) -> Path:
    """A root with a GRPO and a GSPO run written by the real recorder (read-only: copy to edit)."""
    root = tmp_path_factory.mktemp("recorded")
    record_run(root, "grpo-small", "grpo", seed=1, spread=0.05)
    record_run(root, "gspo-small", "gspo", seed=2, spread=1e-3)
    return root


@pytest.fixture
def root_copy(recorded_root, tmp_path) -> Path:
    """A writable copy of ``recorded_root``."""
    dst = tmp_path / "root"
    shutil.copytree(recorded_root, dst)
    return dst


@pytest.fixture
def app_env(monkeypatch, tmp_path):
    """Environment for AppTest: root from GSPO_DASH_ROOT, no MLflow, a clean cwd, fresh caches."""
    import streamlit as st

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    st.cache_data.clear()

    def set_root(root) -> None:
        monkeypatch.setenv("GSPO_DASH_ROOT", os.fspath(root))

    return set_root
