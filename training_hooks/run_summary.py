"""A run's summary (``schema.RunSummary``, run.json's ``summary``): what the Runs page shows of a
run without reading its step table. This module makes summaries, decides whether one is still
valid, and keeps the ones the dashboard makes.

Made: ``summarise_run(run_dir, info)`` reads the step table with the reader the dashboard uses
(``training_hooks.tables``) and judges it by the checks the Health page runs
(``training_hooks.findings.report_of``), so the Runs page's Health count from a summary is the
count the Health page gives from the table. The recorder calls it when it closes, the importers
when they write a run, ``bench/make_runs.py`` for its generated runs, the dashboard for a run
without one (``app.health_fill``). It imports no torch.

Valid: ``describes`` is the one decision: a summary is trusted only while it still describes the
run as discovered: the same summary layout and declared version of the checks
(``checks_version``), the same step parts, the same algorithm and eps; a kept one also while its
``kept_key`` is the run's. A running run's summary is out of date at its next flush; the app then
reads the table, as without one.

Kept (``keep``, ``read_kept``): beside the run (``<run>/dash_summary.json``) when the server may
write there: a local root, not in read-only mode, a run that is not running (its recorder writes
its own summary at close). Otherwise (read-only mode, an object store, a folder the server cannot
write) in a local cache, one file per run folder under ``cache_dir()``; nothing is written into
the root then. A kept summary's ``kept_key`` digests what it depends on: the declared version of
the checks and of the summary's layout, the run's table files (locally the steps and sequences
folders' stamps, which every part written or removed changes; on an object store each listed
part's name, size and mtime) and the settings of run.json the checks read (``facts_of``, without
the status and heartbeat, judged when the page is drawn).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from . import findings, storage, tables
from .schema import (
    SEQUENCES_DIR,
    STATUS_FINISHED,
    STATUS_RUNNING,
    STEPS_DIR,
    SUMMARY_VERSION,
    TABLE_DIRS,
    RunInfo,
    RunSummary,
    is_data_file,
    write_json_atomic,
)


def checks_version() -> str:
    """The version of the checks a summary's findings come from (``findings.CHECKS_VERSION``,
    declared and bumped when the findings can change; not a digest of their source)."""
    return f"v{findings.CHECKS_VERSION}"


def eps_pairs(info: RunInfo) -> dict[str, tuple[float, float]]:
    """The run's stated eps pairs by unit ("seq", "token"); a pair with an unknown half is left
    out (never judged with a default)."""
    pairs = {
        "seq": (info.seq_eps_low, info.seq_eps_high),
        "token": (info.token_eps_low, info.token_eps_high),
    }
    return {unit: (lo, hi) for unit, (lo, hi) in pairs.items() if lo is not None and hi is not None}


def folder_stamp(run_dir: str, table: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of a local run's ``table`` folder (or file: ``run.json``); None on an
    object store, or when it does not exist: every part written or removed there changes it
    (the stamps ``app.discovery`` takes of a run folder)."""
    if storage.is_uri(run_dir):
        return None
    try:
        st = os.stat(os.path.join(storage.local(run_dir), table))
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def summarise_run(
    run_dir: str,
    info: RunInfo | None,
    *,
    listed: Callable[[str], tables.PartFiles] = tables.list_now,
    algorithm: str | None = None,
) -> RunSummary:
    """The summary of the run in ``run_dir`` described by ``info`` (its algorithm and eps), from
    its step table on disk now. ``listed``: a table folder's parts (the app passes its shared
    listing); ``algorithm``: a folder without run.json (``info`` None), what its steps state."""
    stamps = {t: folder_stamp(run_dir, t) for t in (STEPS_DIR, SEQUENCES_DIR)}
    parts = {t: listed(storage.join(run_dir, t)) for t in TABLE_DIRS}
    with_parts = tuple(t for t in TABLE_DIRS if any(is_data_file(f.name) for f in parts[t]))
    df, files = tables.step_frame(str(run_dir), parts[STEPS_DIR])
    eps = eps_pairs(info) if info is not None else {}
    if info is not None:
        algorithm = str(info.algorithm or "?")
    # the status is judged by the reader, as of when it reads
    report = page_report(
        run_dir,
        info,
        df,
        status=STATUS_FINISHED,
        sequences=with_parts,
        algorithm=None if info is not None else algorithm,
    )
    problems = (findings.ERROR, findings.WARNING)
    return RunSummary(
        version=SUMMARY_VERSION,
        checks=checks_version(),
        steps=len(df),
        step_files=tuple((f.name, f.size) for f in files),
        steps_dir=stamps[STEPS_DIR],
        sequences_dir=stamps[SEQUENCES_DIR],
        tables=with_parts,
        algorithm=algorithm or "?",
        seq_eps=eps.get("seq"),
        token_eps=eps.get("token"),
        findings=tuple((f.code, f.severity) for f in report.findings if f.severity in problems),
        made_at=time.time(),
        coverage=(len(report.checked), len(report.not_checked)),
    )


def page_findings(run_dir: str, info: RunInfo | None) -> list:
    """The findings of ``page_report`` (``Finding``s)."""
    return page_report(run_dir, info).findings


def page_report(
    run_dir: str,
    info: RunInfo | None,
    df: Any = None,
    *,
    status: str | None = None,
    sequences: tuple[str, ...] | None = None,
    algorithm: str | None = None,
) -> findings.HealthReport:
    """The Health page's report of the run in ``run_dir`` (findings and coverage): its step table
    (``df``, read as the dashboard reads it when not given) judged with run.json's settings
    (``status`` overrides the one stated) and, when it recorded sequences, the solved / failed
    split of its zero-variance groups. ``sequences``: the run's tables with files, when known;
    ``algorithm``: the one to judge by when run.json states none (a folder without one)."""
    if df is None:
        df, _ = tables.step_frame(str(run_dir))
    seqs = None
    if sequences is None or SEQUENCES_DIR in sequences:
        seqs = tables.read_listed(str(run_dir), SEQUENCES_DIR, findings.OUTCOME_COLUMNS, None)
    facts = findings.facts_of(info, status=status)
    if algorithm is not None:
        facts = replace(facts, algorithm=algorithm)
    return findings.report_of(facts, df, None if seqs is None else seqs.df)


def try_summarise_run(
    run_dir: str, info: RunInfo | None, **kwargs: Any
) -> tuple[RunSummary | None, str | None]:
    """``(summarise_run(run_dir, info, **kwargs), None)``, or ``(None, why)`` when it cannot be
    made (a table is unreadable): a missing summary only costs the app a read."""
    try:
        return summarise_run(run_dir, info, **kwargs), None
    except Exception as e:  # noqa: BLE001 -- a summary is a cache; the run is recorded anyway
        return None, f"{type(e).__name__}: {e}"


def summarise_root(root: str, *, workers: int | None = None) -> tuple[int, list[str]]:
    """Write the summary of every run under ``root`` that is not running (runs recorded before
    summaries existed, or summarised by other checks): ``(runs written, problems)``. A running
    run is skipped: its recorder rewrites run.json, and writes its summary when it closes. Run it
    on runs no recorder is resuming."""
    from concurrent.futures import ThreadPoolExecutor

    from .schema import RUN_JSON, read_run_info, run_folders

    names = [n for n in run_folders(root) if not n.startswith(".")]  # (an import's tmp: hidden)

    def one(name: str) -> tuple[int, str | None]:
        run_dir = storage.join(root, name)
        try:
            info = read_run_info(run_dir)
        except (OSError, ValueError, TypeError) as e:
            return 0, f"{name}: run.json is unreadable ({e})"
        if info.status == STATUS_RUNNING:
            return 0, None
        summary, why = try_summarise_run(run_dir, info)
        if summary is None:
            return 0, f"{name}: {why}"
        info.summary = summary
        write_json_atomic(storage.join(run_dir, RUN_JSON), info.to_json())
        return 1, None

    workers = workers or (16 if storage.is_uri(root) else 1)
    with ThreadPoolExecutor(workers) as pool:
        done = list(pool.map(one, names))
    return sum(n for n, _ in done), [why for _, why in done if why]


# ------------------------------------------------------------------------------- valid


class Discovered(Protocol):
    """A run folder as the dashboard discovered it (``app.records.RunRef``)."""

    @property
    def path(self) -> str | None: ...  # the run folder: a local path or an object-store URI
    @property
    def stamp(self) -> tuple: ...  # what it held then (``app.discovery``); () for no folder
    @property
    def info(self) -> RunInfo | None: ...  # its run.json
    @property
    def algorithm(self) -> str: ...  # run.json's, else what its steps state


def describes(
    s: RunSummary, *, path: str, stamp: tuple, algorithm: str, eps: dict[str, Any]
) -> bool:
    """Whether ``s`` describes the run in ``path`` as discovered (``stamp``: locally the
    (run.json, steps, sequences) stamps of ``app.discovery``, on an object store each listed
    object's (path, size, mtime)): made by this summary layout and these checks, for the run's
    ``algorithm`` and ``eps`` (``eps_pairs``), from the step parts on disk now (locally the
    steps and sequences folders' stamps; on an object store the listed step parts' names and
    sizes). The one decision of whether a summary is still valid."""
    if (s.version, s.checks) != (SUMMARY_VERSION, checks_version()):
        return False
    if (s.algorithm, s.seq_eps, s.token_eps) != (algorithm, eps.get("seq"), eps.get("token")):
        return False
    if not storage.is_uri(path):
        steps, sequences = stamp[1], stamp[2]
        return (
            s.steps_dir is not None
            and steps is not None
            and s.steps_dir == tuple(steps)
            and s.sequences_dir == (None if sequences is None else tuple(sequences))
        )
    listed = tuple(  # an object store: (name, size, mtime) of each of the run's objects
        (rel.split("/", 1)[1], size)
        for rel, size, _ in stamp
        if rel.startswith(STEPS_DIR + "/") and is_data_file(rel.split("/", 1)[1])
    )
    return listed == s.step_files


def valid(s: RunSummary | None, run: Discovered) -> RunSummary | None:
    """``s`` (run.json's summary or a kept one) while it describes ``run`` (``describes``), else
    None."""
    if s is None or not run.path or not run.stamp:
        return None
    eps = eps_pairs(run.info) if run.info is not None else {}
    ok = describes(s, path=run.path, stamp=run.stamp, algorithm=run.algorithm, eps=eps)
    return s if ok else None


def valid_summary(run: Discovered) -> RunSummary | None:
    """Run.json's summary of ``run`` while it describes the run (``valid``), else None."""
    return valid(run.info.summary if run.info is not None else None, run)


# -------------------------------------------------------------------------------- kept

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


def _table_stamp(run: Discovered) -> list:
    """What the run's findings read of its files: locally the (size, mtime_ns) of its steps and
    sequences folders (discovery's stamp); on an object store its listed step and sequence
    parts."""
    if not storage.is_uri(run.path or ""):
        return [run.stamp[1], run.stamp[2]]
    folders = (STEPS_DIR + "/", SEQUENCES_DIR + "/")
    return sorted(
        [rel, size, mtime]
        for rel, size, mtime in run.stamp
        if rel.startswith(folders) and "/" not in rel.split("/", 1)[1] and is_data_file(rel)
    )


def kept_key(run: Discovered) -> str:
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


def _beside(run: Discovered) -> str:
    return os.path.join(storage.local(run.path or ""), KEPT_FILE)


def _cached(run: Discovered) -> str:
    name = hashlib.sha1(str(run.path).encode()).hexdigest()[:32]
    return os.path.join(cache_dir(), name + ".json")


def _may_write_beside(run: Discovered, writable: bool) -> bool:
    local = not storage.is_uri(run.path or "")
    running = run.info is None or run.info.status == STATUS_RUNNING
    return writable and local and not running and os.access(storage.local(run.path or ""), os.W_OK)


def read_kept(run: Discovered) -> RunSummary | None:
    """The summary kept for ``run`` (beside it, else in the local cache) while its key is the
    run's ``kept_key`` and it describes the run (``valid``); None otherwise."""
    if not run.path or not run.stamp:
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
                kept = RunSummary.from_json(raw.get("summary") or {})
            except (ValueError, TypeError):
                continue
            if valid(kept, run) is not None:
                return kept
    return None


def keep(run: Discovered, summary: RunSummary, *, writable: bool) -> str | None:
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


# ----------------------------------------------------------------------------- command


def main(argv: list[str] | None = None) -> int:
    """``python -m training_hooks.run_summary ROOT``: write the summaries of a root's runs."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m training_hooks.run_summary",
        description="Write the summary (run.json 'summary') of every run under ROOT that is not "
        "running, so the dashboard's Runs page need not read their step tables.",
    )
    ap.add_argument("root", help="a runs root: a folder, or s3://bucket/prefix, gs://...")
    args = ap.parse_args(argv)
    n, problems = summarise_root(args.root)
    for p in problems:
        print(p)
    print(f"{n} run summaries written under {args.root}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
