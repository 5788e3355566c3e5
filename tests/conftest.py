"""Shared fixtures: a pre-migrated MLflow SQLite store copied per test, a batch factory, the
dashboard's runs (two tiny runs recorded once per session, a writable copy per test, the AppTest
environment), the servers of ``servers.py`` (PostgreSQL, ``mlflow server``) and ``s3_server.py``
(moto), and the test tiers: a test that uses a server is in the slow tier.

A new MLflow SQLite store spends seconds migrating its schema on first open, so the session
migrates one template database once and every test gets its own copy.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.register_assert_rewrite("servers", "s3_server", "app_runs")

import torch  # noqa: E402
from app_runs import record_run  # noqa: E402
from hypothesis import settings  # noqa: E402
from s3_server import s3_root, s3_server  # noqa: E402, F401 -- fixtures (moto's S3 server)
from servers import FIXTURE_SERVERS  # noqa: E402 -- the fixtures that start a server

pytest_plugins = ("servers",)

# the dashboard's local cache of summaries (app.kept_summaries): the session's own, never ~/.cache
os.environ.setdefault("GSPO_DASH_CACHE", os.path.join(__import__("tempfile").mkdtemp(), "cache"))


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
    _below_zero(batch)
    if entropy:
        batch["entropy"] = torch.rand(B, T, generator=gen, dtype=dtype) * 2
    if truncated:
        batch["truncated"] = torch.rand(B, generator=gen) < 0.3
    return batch


def _below_zero(batch: dict) -> None:
    """Log-probs are <= 0 (the recorder refuses one above 0): when the noise lifted any above 0,
    every log-prob tensor is shifted down by the largest (the diagnostics read differences only)."""
    names = [k for k in ("logprobs", "old_logprobs", "ref_logprobs") if k in batch]
    top = max(float(batch[k].max()) for k in names)
    if top > 0:
        for k in names:
            batch[k] = batch[k] - top


@pytest.fixture
def make_batch():
    """Factory: ``make_batch(P, G, T, seed=..., ref=..., entropy=..., truncated=...)``."""
    return _make_batch


# Hypothesis example counts by tier: a test without its own ``max_examples`` tries 100 examples
# (Hypothesis's default) in the full suite and 20 in the quick tier; a test that states its count
# (``@settings(max_examples=N)``) tries N in both.
settings.register_profile("full", max_examples=100)
settings.register_profile("quick", max_examples=20)


def pytest_configure(config):
    # torch's intra-op pool on a shared machine with few cores: keep the suite from oversubscribing
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    if not config.getoption("hypothesis_profile", None):  # --hypothesis-profile NAME wins
        quick = "not slow" in (config.getoption("markexpr", "") or "")
        settings.load_profile("quick" if quick else "full")


# ----------------------------------------------------------------------------- test tiers

# A test that uses one of these starts (or waits for) a server: it belongs to the slow tier
# whatever its own marks say, so the quick tier (`pytest -m "not slow"`) never starts one.
SERVER_FIXTURES = frozenset(FIXTURE_SERVERS) | {"s3_server", "s3_root"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(session, config, items):
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


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


@pytest.fixture(scope="session", autouse=True)
def _component_scan_once():
    """Each new AppTest scans every installed distribution's metadata for Streamlit components
    (``manifest_scanner.scan_component_manifests``: a parse of each package's METADATA); the
    installed packages do not change during a session, so every AppTest gets the first scan's
    answer. Only when a collected test module imported Streamlit (no import here otherwise)."""
    if "streamlit" not in sys.modules:
        yield
        return
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a Streamlit without v2 components scans nothing
        yield
        return
    patch = pytest.MonkeyPatch()
    scan = functools.cache(manifest_scanner.scan_component_manifests)
    patch.setattr(manifest_scanner, "scan_component_manifests", scan)
    yield
    patch.undo()


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
