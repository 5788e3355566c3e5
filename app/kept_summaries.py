"""Where a summary the dashboard computed is kept, so the next server start on the same root
need not compute it again (``keep``, ``read_kept``).

Beside the run (``<run>/dash_summary.json``) when the server may write there: a local root, not
in read-only mode, a run that is not running (its recorder writes its own summary at close).
Otherwise (read-only mode, an object store, a folder the server cannot write) in a local cache,
one file per run folder under ``cache_dir()``; nothing is written into the root then.

A kept summary is used only while its ``kept_key`` matches the run's: the declared version of
the checks (``findings.CHECKS_VERSION``) and of the summary's layout, the run's table files
(locally the steps and sequences folders' stamps, which every part written or removed changes;
on an object store each listed part's name, size and mtime) and the settings of run.json the
checks read (``facts_of``, without the status and heartbeat, judged when the page is drawn).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from app.records import SOURCE_PARQUET, RunRef
from training_hooks import findings, storage
from training_hooks.schema import (
    SEQUENCES_DIR,
    STATUS_RUNNING,
    STEPS_DIR,
    SUMMARY_VERSION,
    RunSummary,
    is_data_file,
    write_json_atomic,
)

KEPT_FILE = "dash_summary.json"  # beside run.json, when the server may write there
ENV_CACHE = "GSPO_DASH_CACHE"  # the local cache's folder (default ~/.cache/gspo-dash)
KEPT_FORMAT = 1


def cache_dir() -> str:
    """The local cache's folder for summaries: ``$GSPO_DASH_CACHE/summaries``, else
    ``$XDG_CACHE_HOME/gspo-dash/summaries``, else ``~/.cache/gspo-dash/summaries``."""
    base = os.environ.get(ENV_CACHE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "gspo-dash",
    )
    return os.path.join(base, "summaries")


def cached_object(run_dir: str, stamp: tuple[int, int]) -> str:
    """The local cache's folder for an object-store run's run.json as listed with ``stamp``
    (size, mtime): one folder per state of the object (``app.discovery``)."""
    name = hashlib.sha1(str(run_dir).encode()).hexdigest()[:32]
    return os.path.join(os.path.dirname(cache_dir()), "run_json", f"{name}-{stamp[0]}-{stamp[1]}")


def _table_stamp(run: RunRef) -> list:
    """What the run's findings read of its files: locally the (size, mtime_ns) of its steps and
    sequences folders (discovery's stamp); on an object store its listed step and sequence
    parts."""
    if not storage.is_uri(run.path or ""):
        return [run.stamp[1], run.stamp[2]]
    tables = (STEPS_DIR + "/", SEQUENCES_DIR + "/")
    return sorted(
        [rel, size, mtime]
        for rel, size, mtime in run.stamp
        if rel.startswith(tables) and "/" not in rel.split("/", 1)[1] and is_data_file(rel)
    )


def kept_key(run: RunRef) -> str:
    """A digest of what a kept summary of ``run`` depends on (module docstring)."""
    facts = dataclasses.asdict(findings.facts_of(run.info))
    for moving in ("status", "updated_at", "last_step", "now"):
        facts.pop(moving, None)
    what = [
        findings.CHECKS_VERSION,
        SUMMARY_VERSION,
        _table_stamp(run),
        facts,
        None if run.info is not None else run.algorithm,
    ]
    text = json.dumps(what, sort_keys=True, default=repr)
    return hashlib.sha1(text.encode()).hexdigest()


def _beside(run: RunRef) -> str:
    return os.path.join(storage.local(run.path or ""), KEPT_FILE)


def _cached(run: RunRef) -> str:
    name = hashlib.sha1(str(run.path).encode()).hexdigest()[:32]
    return os.path.join(cache_dir(), name + ".json")


def _may_write_beside(run: RunRef, writable: bool) -> bool:
    local = not storage.is_uri(run.path or "")
    running = run.info is None or run.info.status == STATUS_RUNNING
    return writable and local and not running and os.access(storage.local(run.path or ""), os.W_OK)


def read_kept(run: RunRef) -> RunSummary | None:
    """The summary kept for ``run`` (beside it, else in the local cache) while its key is the
    run's ``kept_key``; None otherwise."""
    if run.source != SOURCE_PARQUET or not run.path or not run.stamp:
        return None
    key = None
    places = [_cached(run)] if storage.is_uri(run.path) else [_beside(run), _cached(run)]
    for path in places:
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
        except (OSError, ValueError):
            continue
        key = kept_key(run) if key is None else key
        if isinstance(raw, dict) and raw.get("format") == KEPT_FORMAT and raw.get("key") == key:
            try:
                return RunSummary.from_json(raw.get("summary") or {})
            except (ValueError, TypeError):
                continue
    return None


def keep(run: RunRef, summary: RunSummary, *, writable: bool) -> str | None:
    """Write ``summary`` of ``run`` beside it (``writable``: the server may write into the root)
    else into the local cache; why it could not be kept, or None. A running run's summary is not
    kept: its next flush sets it aside."""
    if run.info is not None and run.info.status == STATUS_RUNNING:
        return None
    body = {"format": KEPT_FORMAT, "key": kept_key(run), "summary": summary.to_json()}
    why = None
    targets = ([_beside(run)] if _may_write_beside(run, writable) else []) + [_cached(run)]
    for path in targets:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_json_atomic(path, body)
            return None
        except OSError as e:
            why = f"{path}: {e.strerror or e}"
    return why
