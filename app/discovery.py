"""Which runs there are: the run folders under a root, plus the runs that exist only in an MLflow
store, each as a ``RunRef`` with its status (a stale heartbeat makes a running run "crashed") and
its problems.

Cached on the root's fingerprint (``root_signature``: run folders and the stamps of their
run.json and tables), so a new run or a new part shows up on the next rerun.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import streamlit as st

from app.data import PartFiles, part_files
from app.mlflow_store import mlflow_runs
from app.records import SOURCE_PARQUET, Discovery, RunRef
from training_hooks.schema import (
    RUN_JSON,
    SCHEMA_VERSION,
    SEQUENCES_DIR,
    STATUS_CRASHED,
    STATUS_RUNNING,
    STEPS_DIR,
    TOKENS_DIR,
    ImportRecord,
    RunInfo,
    Step,
    read_run_info,
)

VERDICT_EVERY_S = 15  # "crashed" verdicts are re-evaluated this often even if nothing changed


def stale_after_s(info: RunInfo) -> float:
    """A running run whose heartbeat is older than this is declared crashed."""
    flush = info.flush_interval_s if info.flush_interval_s and info.flush_interval_s > 0 else 5.0
    return max(60.0, 10.0 * float(flush))


def effective_status(info: RunInfo, now: float | None = None) -> str:
    """``running`` with a heartbeat (``updated_at``) older than ``stale_after_s`` -> ``crashed``."""
    now = time.time() if now is None else now
    if (
        info.status == STATUS_RUNNING
        and info.updated_at
        and now - info.updated_at > stale_after_s(info)
    ):
        return STATUS_CRASHED
    return info.status


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def root_signature(root: str) -> tuple:
    """Cheap fingerprint of a root: its run folders, their run.json and step-part mtimes."""
    base = Path(root)
    try:
        dirs = sorted(
            (e for e in os.scandir(base) if e.is_dir() and not e.name.startswith(".")),
            key=lambda e: e.name,
        )
    except (FileNotFoundError, NotADirectoryError):
        return ()
    out = []
    for d in dirs:
        p = Path(d.path)
        out.append((d.name, _mtime(p / RUN_JSON), _mtime(p / STEPS_DIR), _mtime(p / SEQUENCES_DIR)))
    return tuple(out)


def discover(root: str, tracking_uri: str | None = None) -> Discovery:
    """All runs under ``root`` (Parquet) plus runs only in the MLflow store at ``tracking_uri``."""
    found = _discover_root(root, root_signature(root), int(time.time() // VERDICT_EVERY_S))
    runs = list(found.runs)
    problems = list(found.problems)
    if tracking_uri:
        ml_runs, ml_problems = mlflow_runs(tracking_uri)
        problems += ml_problems
        known_ids = {r.key for r in runs}
        known_ml = {
            str(r.info.mlflow.get("run_id")) for r in runs if r.info and r.info.mlflow.get("run_id")
        }
        for r in ml_runs:
            tag_ids = set(r.params.get("_tags", {}).values())
            if r.mlflow_run_id in known_ml or tag_ids & known_ids:
                continue  # the same run, already read from Parquet
            runs.append(r)
    return Discovery(runs, problems)


@st.cache_data(show_spinner=False, max_entries=32)
def _discover_root(root: str, signature: tuple, _tick: int) -> Discovery:
    # _tick (VERDICT_EVERY_S) re-evaluates "crashed" verdicts even when nothing on disk changed
    base = Path(root)
    if not base.exists():
        return Discovery([], [f"The root folder {root!r} does not exist."])
    if not base.is_dir():
        return Discovery([], [f"The root {root!r} is not a folder."])
    runs: list[RunRef] = []
    for name, *_ in signature:
        ref = _read_run_ref(base / name)
        if ref is not None:
            runs.append(ref)
    runs.sort(key=lambda r: -(r.updated_at or 0))
    problems = [] if runs else [f"No runs under {root!r} (a run is a folder with {RUN_JSON})."]
    return Discovery(runs, problems)


def _read_run_ref(run_dir: Path) -> RunRef | None:
    """The run in ``run_dir`` (None when it is not a run folder: no run.json and no step table)."""
    step_files = part_files(run_dir / STEPS_DIR)
    has_json = (run_dir / RUN_JSON).is_file()
    if not has_json and not step_files:
        return None
    has_sequences = bool(part_files(run_dir / SEQUENCES_DIR))
    has_tokens = bool(part_files(run_dir / TOKENS_DIR))
    problems: list[str] = []
    info: RunInfo | None = None
    if has_json:
        try:
            info = read_run_info(run_dir)
        except (OSError, ValueError, TypeError) as e:
            problems.append(f"run.json is unreadable: {e}")
    else:
        problems.append("run.json is missing: name, algorithm, eps and status are unknown")
    if not step_files:
        problems.append("no step table yet (steps/*.parquet)")
    if step_files and not has_sequences and not imported_tool(info):  # imports: step metrics only
        problems.append("no sequences table: the per-sequence pages have nothing to show")
    if info is not None and info.imported is not None:
        problems += import_problems(info.imported)
    if info is None:
        mtime = max((m for _, _, m in step_files), default=0) / 1e9 or None
        return RunRef(
            key=run_dir.name,
            name=run_dir.name,
            algorithm=_peek_algorithm(run_dir, step_files),
            status="unknown",
            source=SOURCE_PARQUET,
            path=str(run_dir),
            problems=tuple(problems),
            updated_at=mtime,
            has_sequences=has_sequences,
            has_tokens=has_tokens,
        )
    if info.schema_version != SCHEMA_VERSION:
        problems.append(
            f"run.json has schema_version {info.schema_version}, this app reads "
            f"{SCHEMA_VERSION}: columns may be missing"
        )
    return RunRef(
        key=info.run_id,
        name=info.name or info.run_id,
        algorithm=str(info.algorithm or "?"),
        status=effective_status(info),
        source=SOURCE_PARQUET,
        path=str(run_dir),
        info=info,
        problems=tuple(problems),
        last_step=info.last_step,
        updated_at=info.updated_at or None,
        has_sequences=has_sequences,
        has_tokens=has_tokens,
    )


RECORDED = RunInfo.__dataclass_fields__["source"].default  # a run written by training_hooks


def imported_tool(info: RunInfo | None) -> str | None:
    """The tool an imported run was logged by (trl, tinker, verl), None for a recorded run. An
    import never has per-sequence tables, so their absence is not a data problem."""
    if info is None or (info.imported is None and info.source == RECORDED):
        return None
    return info.imported.tool if info.imported is not None else info.source


MAX_LINES_NAMED = 5  # malformed lines named one by one in a problem sentence


def import_problems(rec: ImportRecord) -> list[str]:
    """What an import skipped or overrode in the source log: malformed lines (with their line
    numbers), a truncated last line, steps logged more than once."""
    out = []
    bad = [m for m in rec.malformed_lines if isinstance(m, dict)]
    if bad:
        named = ", ".join(
            f"line {m.get('line', '?')} ({m.get('reason', '?')})" for m in bad[:MAX_LINES_NAMED]
        )
        more = f" and {len(bad) - MAX_LINES_NAMED} more" if len(bad) > MAX_LINES_NAMED else ""
        out.append(f"import: {len(bad)} malformed line(s) of the log skipped: {named}{more}")
    if rec.truncated_last_line is not None:
        out.append(
            f"import: the log's last line (line {rec.truncated_last_line}) is truncated and was skipped"
        )
    if rec.duplicate_steps:
        steps = ", ".join(str(s) for s in rec.duplicate_steps[:20])
        more = " ..." if len(rec.duplicate_steps) > 20 else ""
        out.append(
            f"import: {len(rec.duplicate_steps)} step(s) logged more than once (the last value of "
            f"each metric kept): {steps}{more}"
        )
    return out


def _peek_algorithm(run_dir: Path, step_files: PartFiles) -> str:
    """The algorithm column of the first readable step part ("?" when none is)."""
    for name, *_ in step_files:
        try:
            t = pq.read_table(run_dir / STEPS_DIR / name, columns=[Step.ALGORITHM])
            if t.num_rows:
                return str(t.column(0)[0].as_py())
        except Exception:  # noqa: BLE001 - a bad file is reported by the table reader
            continue
    return "?"
