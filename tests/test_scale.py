"""Many runs: discovery and the Runs page read each run once per state of its
files. A rerun with nothing changed reads no run.json and no Parquet file; a changed run is the
only one read again; an S3 root is listed once (the whole prefix), not once per run. (The
2,000-run timings are in bench/bench_dashboard.py --scale.)"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from app_runs import record_run

from app import data, discovery, ui
from training_hooks import schema, storage

LOCAL_RUNS = 200
S3_RUNS = 60


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> str:
    """A small recorded run (6 steps) to clone."""
    return record_run(tmp_path_factory.mktemp("one"), "seed", "gspo", seed=3, spread=0.02)


def _clone(src: str, root: str, n: int) -> list[str]:
    """``n`` copies of the run folder ``src`` under ``root`` (run-0000, ...), each run.json with
    its own run id and name."""
    files = {}
    for folder, _, names in os.walk(src):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, src)] = f.read()
    info = json.loads(files.pop(schema.RUN_JSON))

    def one(i: int) -> str:
        run_id = f"run-{i:04d}"
        run_dir = storage.join(root, run_id)
        for rel, content in files.items():
            storage.makedirs(storage.join(run_dir, os.path.dirname(rel)))
            storage.write_bytes(storage.join(run_dir, *rel.split(os.sep)), content)
        schema.write_json_atomic(
            storage.join(run_dir, schema.RUN_JSON), {**info, "run_id": run_id, "name": run_id}
        )
        return run_id

    with ThreadPoolExecutor(16 if storage.is_uri(root) else 1) as pool:
        return list(pool.map(one, range(n)))


class Calls:
    """Counts calls of functions, by name, while they stay patched."""

    def __init__(self, monkeypatch):
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._mp = monkeypatch

    def count(self, owner, name: str, only=None) -> None:
        """Count calls of ``owner.name`` (``only(first argument)``: those it is true of)."""
        fn = getattr(owner, name)

        def counted(*args, **kwargs):
            if only is None or only(args[0]):
                with self._lock:
                    self.counts[name] = self.counts.get(name, 0) + 1
            return fn(*args, **kwargs)

        self._mp.setattr(owner, name, counted)

    def take(self) -> dict[str, int]:
        with self._lock:
            out, self.counts = self.counts, {}
        return out


def _app(root, monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    from app.pages import MAIN

    monkeypatch.setenv("GSPO_DASH_ROOT", root)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    data.clear_caches()
    return AppTest.from_file(MAIN, default_timeout=600)


def _table(at) -> list[dict]:
    assert not at.exception, [e.value for e in at.exception]
    df = at.dataframe[0].value
    df = df.data if hasattr(df, "data") else df
    return df.drop(columns=["last update"]).to_dict("records")


@pytest.mark.slow
def test_runs_page_rerun_reads_no_run_at_scale(one_run, tmp_path, monkeypatch):
    """200 local runs: the first render reads every run.json once, their Health cells pending;
    the background fill reads each step table once; then a rerun reads none and shows the same
    table; a run whose run.json changed is the only one read again."""
    from app import health_fill

    root = str(tmp_path / "root")
    _clone(one_run, root, LOCAL_RUNS)
    calls = Calls(monkeypatch)
    calls.count(discovery, "read_run_info")
    calls.count(storage, "open_input")
    at = _app(root, monkeypatch, tmp_path)
    first = _table(at.run())
    assert len(first) == LOCAL_RUNS  # (the clones' summaries describe other folders: pending)
    assert health_fill.wait(600)
    read = calls.take()
    assert read["read_run_info"] == LOCAL_RUNS and read["open_input"] >= LOCAL_RUNS
    cold = _table(at.run())
    assert {r["health"] for r in cold} == {cold[0]["health"]} and cold[0]["health"] != "checking…"
    calls.take()
    assert _table(at.run()) == cold
    assert calls.take() == {}  # nothing read on a rerun
    run_dir = os.path.join(root, "run-0007")
    info = schema.read_run_info(run_dir)
    info.name = "renamed"
    schema.write_json_atomic(os.path.join(run_dir, schema.RUN_JSON), info.to_json())
    after = _table(at.run())
    assert calls.take() == {"read_run_info": 1}  # its step table: still cached
    assert [r["name"] for r in after].count("renamed") == 1 and len(after) == LOCAL_RUNS


@pytest.mark.slow
def test_s3_root_is_listed_once_not_per_run(one_run, s3_root, tmp_path, monkeypatch):
    """60 runs on S3: discovery lists the whole prefix in one listing and reads each run.json
    once (the Health column from its summary, no step table read); a rerun within LISTING_TTL_S lists nothing and reads nothing; an older listing is
    renewed by one background listing of the prefix (still no run read again)."""
    _clone(one_run, s3_root, S3_RUNS)
    # just written: let their stamps be their mtimes now (else they settle in SETTLE_S seconds,
    # a change of stamp that reads them once more; test_s3 checks the settling)
    monkeypatch.setattr(storage, "SETTLE_S", 0.0)
    calls = Calls(monkeypatch)
    for name in ("list_tree", "list_files", "read_bytes", "open_input"):
        calls.count(storage, name, only=storage.is_uri)  # (the local cache is read through it too)
    at = _app(s3_root, monkeypatch, tmp_path)
    monkeypatch.setattr(ui, "REMOTE_WAIT_S", None)  # the first render waits for every run.json
    # the listing stays fresh for the whole first render (on a loaded machine it can take longer
    # than LISTING_TTL_S, and a background renewal would then be counted as a second listing)
    monkeypatch.setattr(data, "LISTING_TTL_S", 3600.0)
    cold = _table(at.run())
    assert len(cold) == S3_RUNS
    first = calls.take()
    assert first["list_tree"] == 1 and "list_files" not in first
    # each run.json once; no step table: the Health column comes from the runs' summaries
    assert first["read_bytes"] == S3_RUNS and first.get("open_input", 0) == 0
    assert _table(at.run()) == cold
    assert calls.take() == {}
    monkeypatch.setattr(data, "LISTING_TTL_S", 0.0)
    before = data.listing(s3_root)
    deadline = time.monotonic() + 60
    while data.listing(s3_root, max_age_s=3600) is before and time.monotonic() < deadline:
        time.sleep(0.05)  # the background listing
    assert data.listing(s3_root, max_age_s=3600) is not before
    monkeypatch.setattr(data, "LISTING_TTL_S", 3600.0)
    calls.take()
    assert _table(at.run()) == cold
    assert calls.take() == {}
