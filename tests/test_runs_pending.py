"""The Runs page's Health column as it comes (issue 34): a run whose summary is missing shows a
pending cell, never "ok" nor a count; the summaries are made off the page's thread, newest
first, and kept (beside the run, or in the local cache in read-only mode and on object stores),
so a second server start fills every cell at once; a kept summary is set aside only when the
run's files or the declared version of the checks change."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from app_runs import record_run

from app import data, health_fill, ui
from app.discovery import discover
from training_hooks import findings, schema
from training_hooks import run_summary as summary_module
from training_hooks.findings import ERROR, WARNING
from training_hooks.run_summary import KEPT_FILE, kept_key, read_kept

PENDING = "checking…"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Three recorded runs (no findings: their cells read "ok" once checked), their run.json
    summaries removed, as another writer or an older gspo-dash leaves them."""
    root = tmp_path_factory.mktemp("made")
    for i, (algo, spread) in enumerate([("gspo", 0.02), ("grpo", 0.02), ("gspo", 0.3)]):
        record_run(root, f"r{i}", algo, seed=i, spread=spread)
    return root


def _root(made, tmp_path) -> str:
    """A copy of ``made`` without summaries, each run with its own folder stamps."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(made, root)
    for run in os.listdir(root):
        path = root / run / schema.RUN_JSON
        raw = json.loads(path.read_text())
        raw.pop("summary", None)
        path.write_text(json.dumps(raw))
    return str(root)


@pytest.fixture
def app_at(monkeypatch, tmp_path):
    """An AppTest of the dashboard on a root, with its own local summary cache."""
    from streamlit.testing.v1 import AppTest

    from app.pages import MAIN

    monkeypatch.setenv(summary_module.ENV_CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)

    def make(root: str, read_only: bool = False):
        monkeypatch.setenv("GSPO_DASH_ROOT", root)
        if read_only:
            monkeypatch.setenv("GSPO_DASH_READ_ONLY", "1")
        data.clear_caches()  # a new server: only what was kept on disk is known
        return AppTest.from_file(MAIN, default_timeout=300)

    yield make
    health_fill.wait(120)


def _health(at) -> dict[str, str]:
    assert not at.exception, [e.value for e in at.exception]
    df = at.dataframe[0].value
    return dict(zip(df["name"], df["health"].astype(str), strict=True))


def _page_cell(run) -> str:
    """The cell the Health page's own report gives (the checks run on the step table), worded
    as the Runs page words it."""
    report = ui.health_report(run, data.load_steps(run).df)
    n_err = sum(f.severity == ERROR for f in report.findings)
    n_warn = sum(f.severity == WARNING for f in report.findings)
    ran, not_ran = len(report.checked), len(report.not_checked)
    little = f"{ran} of {ran + not_ran} checked" if not_ran > ran else ""
    if not n_err and not n_warn:
        return f"nothing found, {little}" if little else "ok"
    found = f"{n_err} err · {n_warn} warn" if n_err else f"{n_warn} warn"
    return f"{found}; {little}" if little else found


def test_a_pending_cell_never_shows_ok(made, tmp_path, app_at, monkeypatch):
    """While the summaries are being made every Health cell reads "checking…" (no "ok", no
    digit) and the page says how many are left; once made, each cell is the Health page's."""
    root = _root(made, tmp_path)
    gate = threading.Event()
    real = summary_module.summarise_run

    def held(*args, **kwargs):
        gate.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(summary_module, "summarise_run", held)
    at = app_at(root)
    at.run()
    cells = _health(at)
    assert set(cells.values()) == {PENDING}
    assert not any(ch.isdigit() for v in cells.values() for ch in v)
    captions = [c.value for c in at.caption]
    assert any("Health: 3 of 3 runs still being checked" in c for c in captions), captions
    gate.set()
    assert health_fill.wait(120)
    at.run()
    runs = {r.name: r for r in discover(root).runs}
    cells = _health(at)
    assert cells == {name: _page_cell(run) for name, run in runs.items()}
    assert PENDING not in cells.values()
    assert not any("still being checked" in c.value for c in at.caption)


def test_runs_being_read_are_rows_of_their_folders_and_the_page_is_drawn_once(
    tmp_path, app_at, monkeypatch
):
    """Listed runs whose run.json is still being read are rows holding their folder's name and
    no other value (never "ok", no run id to select); a read that ends while the page is drawn
    does not draw it a second time in the same render (the poll redraws it later)."""
    from app.records import Discovery

    calls: list[str] = []

    def listed(root, uri=None, wait_s=None):
        calls.append(root)
        return Discovery([], [], 2, ("new-run", "old-run"))

    monkeypatch.setattr(ui, "discover", listed)
    monkeypatch.setattr(ui, "reading", lambda root: 0)  # both read meanwhile
    at = app_at(str(tmp_path))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(calls) == 1
    assert "Reading 2 runs' run.json" in at.info[0].value
    table = at.dataframe[0].value
    assert list(table["name"]) == ["new-run", "old-run"] and set(table["run id"]) == {""}
    assert set(table["health"]) == {PENDING} and table["last step"].isna().all()
    others = table.drop(columns=["name", "run id", "health", "last step"])
    assert set(others.stack()) == {"reading…"}
    assert at.selectbox(key="detail_run").options == []


def test_a_filled_cell_does_not_draw_the_first_render_twice(made, tmp_path, app_at, monkeypatch):
    """The Health poll redraws the page when cells filled since it was drawn: not within the
    page's own render (a summary made meanwhile shows on the next poll)."""
    root = _root(made, tmp_path)
    real = ui.discover
    calls: list[str] = []
    monkeypatch.setattr(ui, "discover", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(health_fill, "left", lambda waiting: 0)  # all filled meanwhile
    at = app_at(root)
    at.run()
    assert set(_health(at).values()) == {PENDING} and len(calls) == 1


def test_a_second_server_fills_every_cell_from_the_kept_summaries(made, tmp_path, app_at):
    """The first server keeps each summary beside its run; a second one shows every cell at once
    without reading a step table (summarise_run would fail if it were called)."""
    root = _root(made, tmp_path)
    at = app_at(root)
    at.run()
    assert health_fill.wait(120)
    at.run()
    first = _health(at)
    assert PENDING not in first.values()
    assert all(os.path.exists(os.path.join(root, r, KEPT_FILE)) for r in os.listdir(root))
    assert not os.path.exists(summary_module.cache_dir())  # nothing in the local cache
    at2 = app_at(root)
    orig = summary_module.summarise_run
    summary_module.summarise_run = None  # type: ignore[assignment]  (called: TypeError)
    try:
        at2.run()
    finally:
        summary_module.summarise_run = orig
    assert _health(at2) == first


def _run(root: str, name: str):
    """The run named ``name`` as a new discovery finds it."""
    data.clear_caches()
    return next(r for r in discover(root).runs if r.name == name)


def _files(root: str) -> dict[str, tuple[int, int]]:
    out = {}
    for folder, _, names in os.walk(root):
        for n in names:
            st = os.stat(os.path.join(folder, n))
            out[os.path.join(folder, n)] = (st.st_size, st.st_mtime_ns)
    return out


def test_read_only_mode_keeps_summaries_in_the_local_cache_only(made, tmp_path, app_at):
    """Read-only mode writes nothing into the root: the summaries go to the local cache (one
    file per run), from where a second read-only server fills every cell at once."""
    root = _root(made, tmp_path)
    before = _files(root)
    at = app_at(root, read_only=True)
    at.run()
    assert health_fill.wait(120)
    at.run()
    first = _health(at)
    assert _files(root) == before
    assert len(os.listdir(summary_module.cache_dir())) == 3
    at2 = app_at(root, read_only=True)
    at2.run()
    assert _health(at2) == first and PENDING not in first.values()


def test_a_kept_summary_is_set_aside_only_when_what_it_depends_on_changes(
    made, tmp_path, app_at, monkeypatch
):
    """Renaming a run keeps its kept summary; another declared CHECKS_VERSION, another eps or a
    new step part sets it aside (and the page computes it again)."""
    root = _root(made, tmp_path)
    at = app_at(root)
    at.run()
    assert health_fill.wait(120)

    run = _run(root, "r0")
    assert read_kept(run) is not None
    path = os.path.join(run.path, schema.RUN_JSON)
    raw = json.loads(open(path).read())
    raw["name"] = "renamed"
    open(path, "w").write(json.dumps(raw))
    renamed = _run(root, "renamed")
    assert kept_key(renamed) == kept_key(run) and read_kept(renamed) is not None
    with monkeypatch.context() as m:
        m.setattr(findings, "CHECKS_VERSION", findings.CHECKS_VERSION + 1)
        assert read_kept(renamed) is None
    raw["seq_eps_high"] = 5e-4
    open(path, "w").write(json.dumps(raw))
    assert read_kept(_run(root, "renamed")) is None
    raw["seq_eps_high"] = renamed.info.seq_eps_high
    open(path, "w").write(json.dumps(raw))
    assert read_kept(_run(root, "renamed")) is not None
    steps = os.path.join(run.path, schema.STEPS_DIR)
    part = sorted(os.listdir(steps))[0]
    os.link(os.path.join(steps, part), os.path.join(steps, "part-extra.parquet"))
    grown = _run(root, "renamed")
    assert read_kept(grown) is None and health_fill.known(grown) is None


@pytest.mark.slow
def test_s3_runs_write_nothing_into_the_bucket_and_are_read_once(s3_root, tmp_path, app_at):
    """Runs on S3 without summaries: the summaries are made and kept in the local cache, the
    bucket is not written to; a second server start reads no object again (run.json from the
    local cache, the Health cells from the kept summaries) and fills every cell at once."""
    import sys

    from app_runs import REPO

    sys.path.insert(0, str(REPO / "bench"))
    from make_runs import make_run

    from training_hooks import storage

    for i in range(3):
        make_run(s3_root, f"s3-{i}", steps=20, seed=i, tokens_per_step=0, summary=False)
    storage.SETTLE_S, settle = 0.0, storage.SETTLE_S  # their stamps: their mtimes now
    ui.REMOTE_WAIT_S, wait_s = None, ui.REMOTE_WAIT_S  # the first render waits for run.json
    try:
        before = storage.list_tree(s3_root)
        at = app_at(s3_root)
        at.run()
        assert set(_health(at).values()) <= {PENDING} | {"ok"} and health_fill.wait(120)
        at.run()
        first = _health(at)
        assert PENDING not in first.values() and storage.list_tree(s3_root) == before
        reads = []
        real = storage.read_bytes, storage.open_input
        remote = storage.is_uri  # (the local cache is read through storage too)
        storage.read_bytes = lambda p, *a: remote(p) and reads.append(p) or real[0](p, *a)
        storage.open_input = lambda p, *a: remote(p) and reads.append(p) or real[1](p, *a)
        try:
            at2 = app_at(s3_root)
            at2.run()
        finally:
            storage.read_bytes, storage.open_input = real
        assert _health(at2) == first and reads == []
    finally:
        storage.SETTLE_S, ui.REMOTE_WAIT_S = settle, wait_s


@pytest.mark.slow
def test_s3_run_json_is_read_in_the_background_once(s3_root, tmp_path, app_at, monkeypatch):
    """On an object store the page does not wait for every run.json: it draws after
    ``ui.REMOTE_WAIT_S`` with the runs read so far, the others as rows of their listed folders
    (no value but the name; at first from the root's top level, while its whole listing runs)
    and says how many are still being read; a
    rerun meanwhile joins the reads in flight (each run.json read once), and the next render
    shows every run."""
    import sys

    from app_runs import REPO

    sys.path.insert(0, str(REPO / "bench"))
    from make_runs import make_run

    from app import discovery
    from training_hooks import storage

    for i in range(3):
        make_run(s3_root, f"bg-{i}", steps=5, seed=i, tokens_per_step=0, summary=False)
    monkeypatch.setattr(storage, "SETTLE_S", 0.0)  # their stamps: their mtimes now
    monkeypatch.setattr(data, "LISTING_TTL_S", 3600.0)
    monkeypatch.setattr(ui, "REMOTE_WAIT_S", 0.1)
    gate = threading.Event()
    reads: list[str] = []
    real_read, real_bytes = discovery._read_run_ref, storage.read_bytes

    def gated(*args):
        assert gate.wait(120)
        return real_read(*args)

    def counted(path, *args):
        if storage.is_uri(path):
            reads.append(path)
        return real_bytes(path, *args)

    listed = threading.Event()
    real_tree = storage.list_tree

    def held_listing(*args, **kwargs):
        assert listed.wait(120)
        return real_tree(*args, **kwargs)

    monkeypatch.setattr(discovery, "_read_run_ref", gated)
    monkeypatch.setattr(storage, "read_bytes", counted)
    monkeypatch.setattr(storage, "list_tree", held_listing)  # the root's whole listing
    at = app_at(s3_root)
    for held in ("the whole listing", "run.json"):
        at.run()  # drawn while the listing, then the reads are held
        assert not at.exception, [e.value for e in at.exception]
        assert "Reading 3 runs' run.json" in at.info[0].value, held
        table = at.dataframe[0].value  # the listed folders, nothing else known
        assert sorted(table["name"]) == ["bg-0", "bg-1", "bg-2"] and set(table["run id"]) == {""}
        assert set(table["health"]) == {PENDING} and set(table["status"]) == {"reading…"}
        assert table["last step"].isna().all()
        assert any("Reading 3 more runs' run.json" in c.value for c in at.sidebar.caption)
        assert discovery.reading(s3_root) == 3 and not reads
        listed.set()
        deadline = time.monotonic() + 120
        while not data.listed(s3_root) and time.monotonic() < deadline:
            time.sleep(0.05)
    at.run()  # a rerun while they are read: no second read is started
    assert discovery.reading(s3_root) == 3
    gate.set()
    deadline = time.monotonic() + 120
    while discovery.reading(s3_root) and time.monotonic() < deadline:
        time.sleep(0.05)
    at.run()
    assert sorted(_health(at)) == ["bg-0", "bg-1", "bg-2"]
    assert sorted(reads) == sorted(storage.join(s3_root, f"bg-{i}", "run.json") for i in range(3))
    assert not any("Reading" in c.value for c in at.sidebar.caption)
