"""Shared fixtures: a pre-migrated MLflow SQLite store copied per test, a batch factory, the
dashboard's runs (two tiny runs recorded once per session, a writable copy per test, the AppTest
environment), the servers of ``servers.py`` (PostgreSQL, ``mlflow server``) and ``s3_server.py``
(moto), every real log imported once (``real_logs``), one fresh interpreter for the torch-free
imports (``fresh_imports``), and the test tiers: a test that uses a server is in the slow tier.

A new MLflow SQLite store spends seconds migrating its schema on first open, so the session
migrates one template database once and every test gets its own copy.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.register_assert_rewrite("servers", "s3_server", "app_runs")

# The suite's process holds torch, transformers, MLflow and Streamlit (millions of objects), so
# each full collection of Python's cycle collector walks them all: with the default thresholds
# (700, 10, 10) the quick tier ran ~25 full collections, ~4.7 s of its ~44 s of CPU (measured with
# gc.callbacks, 2026-12-03). A first generation of 50,000 objects leaves ~50 young collections and
# no full one in the quick tier (~1 s in all), the peak memory within 2%; refcounting still frees
# everything that is not in a cycle at once.
_GC_THRESHOLD = gc.get_threshold()
gc.set_threshold(50_000, *_GC_THRESHOLD[1:])

import torch  # noqa: E402
from app_runs import app_modules, record_run  # noqa: E402
from hypothesis import settings  # noqa: E402
from s3_server import s3_root, s3_server  # noqa: E402, F401 -- fixtures (moto's S3 server)
from servers import FIXTURE_SERVERS  # noqa: E402 -- the fixtures that start a server

pytest_plugins = ("servers",)

# the dashboard's local cache of summaries (training_hooks.run_summary.keep): the session's own, never ~/.cache
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


def pytest_unconfigure(config):
    gc.set_threshold(*_GC_THRESHOLD)


def pytest_configure(config):
    # torch's intra-op pool on a shared machine with few cores: keep the suite from oversubscribing
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    if not config.getoption("hypothesis_profile", None):  # --hypothesis-profile NAME wins
        quick = "not slow" in (config.getoption("markexpr", "") or "")
        settings.load_profile("quick" if quick else "full")


# ----------------------------------------------------------------------------- torch-free imports

REPO = Path(__file__).resolve().parent.parent


def loaded_by(groups) -> list[set[str]]:
    """The modules one fresh interpreter (in the repository's root) holds after importing each
    group of ``groups`` in turn (each on top of the ones before)."""
    code = (
        "import json, sys\n"
        "for group in json.loads(sys.argv[1]):\n"
        "    [__import__(m) for m in group]\n"
        "    print(json.dumps(sorted(sys.modules)))"
    )
    cmd = [sys.executable, "-c", code, json.dumps([list(g) for g in groups])]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return [set(json.loads(line)) for line in r.stdout.splitlines()]


class FreshImports:
    """What a fresh interpreter loads: ``app`` (every dashboard module but the page script, and
    the metric map) and then the importers load in one interpreter for all the tests that ask
    (a new one costs ~0.5 s of imports). ``loads_torch(module)`` answers from it when ``module``
    was loaded there while torch was not (so none of what it imports loads torch), else from an
    interpreter of its own."""

    def __init__(self):
        self.app = app_modules()
        self.app_loaded, self._then = loaded_by(
            [[*self.app, "training_hooks.metric_map"], ["training_hooks.importers"]]
        )

    def loads_torch(self, module: str) -> bool:
        for loaded in (self.app_loaded, self._then):
            if module in loaded and "torch" not in loaded:
                return False
        return "torch" in loaded_by([[module]])[0]


@pytest.fixture(scope="session")
def fresh_imports() -> FreshImports:
    return FreshImports()


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


class RealLogs:
    """Every real log imported once (``real_logs``): ``root`` holds the runs, ``runs[(tool, path,
    segment)]`` is one run's folder (``path`` as ``str``, ``segment`` None for a file of one run,
    else 1, 2, ... for each run of a file that holds several)."""

    def __init__(self, root: Path, runs: dict[tuple[str, str, int | None], Path]):
        self.root, self.runs = root, runs

    def segments(self, tool: str, path) -> list[Path]:
        """The run folders imported from ``path`` (one, or one per run of a file of several)."""
        found = {seg: d for (t, p, seg), d in self.runs.items() if (t, p) == (tool, str(path))}
        return [found[k] for k in sorted(found, key=lambda k: k or 0)]

    def copy_to(self, dst: Path, folders=None) -> Path:
        """A writable copy of ``folders`` (every run when None) under ``dst``."""
        dst.mkdir(parents=True, exist_ok=True)
        for d in self.runs.values() if folders is None else folders:
            shutil.copytree(d, dst / d.name)
        return dst


@pytest.fixture(scope="session")
def real_logs(tmp_path_factory) -> RealLogs:
    """Every log under ../shared/real_logs/ (``test_importers_real.real_logs``) imported once per
    session with the importer's defaults into one root, a file of several runs as one run per
    segment; an event file is left out without the optional tensorboard extra. Read-only: a test
    that opens the dashboard on it, or writes, works on ``copy_to``. Skips when the folder is
    absent (a plain clone)."""
    from test_importers_real import REAL
    from test_importers_real import real_logs as find_logs

    from training_hooks import importers

    if REAL is None:
        pytest.skip("../shared/real_logs/ is absent")
    root = tmp_path_factory.mktemp("real-logs")
    runs: dict[tuple[str, str, int | None], Path] = {}
    for tool, path in find_logs():
        try:
            res = importers.import_run(tool, path, root=root)
            runs[tool, str(path), None] = Path(res["run_dir"])
        except importers.SeveralRuns as e:  # a file of several runs: each imported as its own
            for k in range(1, len(e.segments) + 1):
                res = importers.import_run(tool, path, root=root, segment=k)
                runs[tool, str(path), k] = Path(res["run_dir"])
        except ValueError as e:  # an event file without the optional tensorboard extra
            if "'tensorboard' extra" not in str(e):
                raise
    return RealLogs(root, runs)


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
