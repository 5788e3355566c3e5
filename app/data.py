"""The dashboard's one data layer: finds runs, reads their Parquet tables, lists MLflow-only runs.

Every read is cached with ``st.cache_data`` on the file paths *and* their (size, mtime), so a live
run's new parts show up on the next rerun without a restart, and an unchanged run costs nothing.
Reads project columns and filter rows in pyarrow (row-group statistics on ``step``), so a step
curve never touches the per-sequence table.

Bad data never raises here: an unreadable file, a missing ``run.json``, an older schema or a missing
table come back as ``problems`` (plain sentences naming the run and the reason) beside whatever
could be read.

Outside Streamlit (tests, benchmarks) ``st.cache_data`` still works; nothing here draws.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import streamlit as st

from app.cols import (
    METADATA_KEY,
    RUN_JSON,
    SCHEMA_VERSION,
    SEQUENCES_DIR,
    STATUS_CRASHED,
    STATUS_FINISHED,
    STATUS_RUNNING,
    STEPS_DIR,
    TOKENS_DIR,
    RunInfo,
    Step,
    is_data_file,
    read_run_info,
)
from training_hooks.metric_map import Derived, map_metric_names

DEFAULT_ROOT = "runs"
DEFAULT_MLFLOW_DB = "mlflow.db"
ENV_ROOT = "GSPO_DASH_ROOT"
ENV_TRACKING = "MLFLOW_TRACKING_URI"

SOURCE_PARQUET = "parquet"
SOURCE_MLFLOW = "mlflow"
MLFLOW_KEY_PREFIX = "mlflow:"


# ----------------------------------------------------------------------------------------------
# configuration: CLI args after `--`, then environment, then defaults
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    root: str
    tracking_uri: str | None


def parse_settings(argv: Sequence[str] | None = None, env: dict | None = None) -> Settings:
    """Root and tracking URI from ``argv`` (``--root``, ``--tracking-uri``), else the environment
    (``GSPO_DASH_ROOT``, ``MLFLOW_TRACKING_URI``), else ``./runs`` and ``./mlflow.db`` if present.
    Unknown arguments are ignored (under ``AppTest`` argv is pytest's)."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--root")
    parser.add_argument("--tracking-uri")
    args, _ = parser.parse_known_args(list(argv or []))
    root = args.root or env.get(ENV_ROOT) or DEFAULT_ROOT
    uri = args.tracking_uri or env.get(ENV_TRACKING)
    if not uri and Path(DEFAULT_MLFLOW_DB).is_file():
        uri = f"sqlite:///{DEFAULT_MLFLOW_DB}"
    return Settings(root=root, tracking_uri=uri or None)


# ----------------------------------------------------------------------------------------------
# runs
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRef:
    """One run the app can show, from a run folder or from an MLflow store."""

    key: str  # unique in the app: the run_id, or "mlflow:<mlflow run id>"
    name: str
    algorithm: str  # "grpo", "gspo" or "?" when unknown
    status: str  # as written (running/finished/failed) or the app's verdict "crashed"
    source: str  # SOURCE_PARQUET or SOURCE_MLFLOW
    path: str | None = None  # the run folder (Parquet runs)
    info: RunInfo | None = None
    problems: tuple[str, ...] = ()
    tracking_uri: str | None = None
    mlflow_run_id: str | None = None
    metric_keys: tuple[str, ...] = ()  # MLflow-only runs: the logged metric names
    params: dict = field(default_factory=dict, hash=False, compare=False)
    last_step: int | None = None
    updated_at: float | None = None
    has_sequences: bool = False
    has_tokens: bool = False

    @property
    def label(self) -> str:
        return self.name if self.name == self.key else f"{self.name} ({self.key})"


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


def _files(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime_ns) of the finished Parquet parts in ``folder``, sorted by name."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return ()
    out = []
    for e in entries:
        if is_data_file(e.name):
            try:
                st_ = e.stat()
            except FileNotFoundError:  # replaced by compaction meanwhile
                continue
            out.append((e.name, st_.st_size, st_.st_mtime_ns))
    return tuple(sorted(out))


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


@dataclass
class Discovery:
    runs: list[RunRef]
    problems: list[str]  # about the root itself


def discover(root: str, tracking_uri: str | None = None) -> Discovery:
    """All runs under ``root`` (Parquet) plus runs only in the MLflow store at ``tracking_uri``."""
    found = _discover_root(root, root_signature(root), int(time.time() // 15))
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
    # _tick (15 s) re-evaluates "crashed" verdicts even when nothing on disk changed
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
    step_files = _files(run_dir / STEPS_DIR)
    seq_files = _files(run_dir / SEQUENCES_DIR)
    tok_files = _files(run_dir / TOKENS_DIR)
    has_json = (run_dir / RUN_JSON).is_file()
    if not has_json and not step_files:
        return None  # not a run folder
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
    if step_files and not seq_files:
        problems.append("no sequences table: the per-sequence pages have nothing to show")
    if info is not None:
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
            has_sequences=bool(seq_files),
            has_tokens=bool(tok_files),
        )
    algorithm = _peek_algorithm(run_dir, step_files)
    mtime = max((m for _, _, m in step_files), default=0) / 1e9 or None
    return RunRef(
        key=run_dir.name,
        name=run_dir.name,
        algorithm=algorithm,
        status="unknown",
        source=SOURCE_PARQUET,
        path=str(run_dir),
        info=None,
        problems=tuple(problems),
        updated_at=mtime,
        has_sequences=bool(seq_files),
        has_tokens=bool(tok_files),
    )


def _peek_algorithm(run_dir: Path, step_files) -> str:
    for name, *_ in step_files:
        try:
            t = pq.read_table(run_dir / STEPS_DIR / name, columns=[Step.ALGORITHM])
            if t.num_rows:
                return str(t.column(0)[0].as_py())
        except Exception:  # noqa: BLE001 - a bad file is reported by the table reader
            continue
    return "?"


# ----------------------------------------------------------------------------------------------
# Parquet tables
# ----------------------------------------------------------------------------------------------


@dataclass
class Table:
    """A read table and what went wrong while reading it."""

    df: pd.DataFrame
    problems: list[str]


def _version_of(schema: pa.Schema) -> int | None:
    meta = schema.metadata or {}
    raw = meta.get(METADATA_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _part_range(name: str) -> tuple[int, int] | None:
    """(first, last) step from ``part-<first>-<last>-...``; None for other names (compacted)."""
    bits = name.split("-")
    if len(bits) >= 3 and bits[0] == "part" and bits[1].isdigit() and bits[2].isdigit():
        return int(bits[1]), int(bits[2])
    return None


@st.cache_data(show_spinner=False, max_entries=256)
def _read_parts(
    folder: str,
    files: tuple[tuple[str, int, int], ...],
    columns: tuple[str, ...] | None,
    step_range: tuple[int, int] | None,
    expected: tuple[str, ...],
) -> Table:
    """Read ``files`` of ``folder``; ``files`` (with size and mtime) is also the cache key."""
    frames: list[pd.DataFrame] = []
    problems: list[str] = []
    missing_all: set[str] = set()
    versions: set[int | None] = set()
    for name, _, _ in files:
        if step_range is not None:
            rng = _part_range(name)
            if rng is not None and (rng[1] < step_range[0] or rng[0] > step_range[1]):
                continue
        path = os.path.join(folder, name)
        try:
            pf = pq.ParquetFile(path)
            schema = pf.schema_arrow
            versions.add(_version_of(schema))
            present = set(schema.names)
            wanted = [c for c in (columns or schema.names) if c in present]
            if columns is not None:
                missing_all |= {c for c in columns if c not in present and c in expected}
            else:
                missing_all |= {c for c in expected if c not in present}
            filters = None
            if step_range is not None and Step.STEP in present:
                filters = [(Step.STEP, ">=", step_range[0]), (Step.STEP, "<=", step_range[1])]
            table = pq.read_table(path, columns=wanted, filters=filters)
            frames.append(table.to_pandas())
        except Exception as e:  # noqa: BLE001 - any unreadable file is reported, not raised
            problems.append(f"{os.path.basename(folder)}/{name} is unreadable ({_short(e)})")
    if missing_all:
        problems.append(
            f"{os.path.basename(folder)}: older or partial schema, missing "
            + ", ".join(sorted(missing_all))
        )
    newer = sorted(v for v in versions if v is not None and v > SCHEMA_VERSION)
    if newer:
        problems.append(
            f"{os.path.basename(folder)} was written with schema v{newer[-1]}, "
            f"newer than this app (v{SCHEMA_VERSION})"
        )
    frames = [f for f in frames if len(f)]
    if not frames:
        return Table(pd.DataFrame(columns=list(columns or ())), problems)
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return Table(df, problems)


def _short(e: Exception) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 160 else text[:157] + "..."


def load_steps(run: RunRef, columns: Iterable[str] | None = None) -> Table:
    """The step table of a run, one row per step (deduplicated, sorted), plus derived columns.

    Parquet runs read only ``columns`` (all when None); MLflow-only runs read the store's metric
    history (slow: about 1 s per 1,000 points; cached)."""
    cols = tuple(dict.fromkeys(columns)) if columns is not None else None
    if run.source == SOURCE_MLFLOW:
        t = mlflow_steps(
            run.tracking_uri or "",
            run.mlflow_run_id or "",
            run.metric_keys,
            sequence_level=run.algorithm == "gspo",
        )
        df = t.df
        problems = list(t.problems)
    else:
        folder = Path(run.path or "") / STEPS_DIR
        want = None
        if cols is not None:
            want = tuple(dict.fromkeys((Step.STEP, Step.WALL_TIME, *_sources_of(cols))))
        from app.cols import STEP_COLUMN_NAMES

        t = _read_parts(str(folder), _files(folder), want, None, STEP_COLUMN_NAMES)
        df = t.df
        problems = list(t.problems)
    if len(df) and Step.STEP in df.columns:
        df = df.drop_duplicates(subset=[Step.STEP], keep="last").sort_values(Step.STEP)
        df = df.reset_index(drop=True)
    elif len(df):
        problems.append("the step table has no 'step' column")
        df = df.iloc[0:0]
    return Table(add_derived(df), problems)


def _sources_of(cols: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for c in cols:
        if c == Derived.TOKEN_CLIP_BINDING:
            out += [c, Step.TOKEN_CLIP_LOW_FRACTION, Step.TOKEN_CLIP_HIGH_FRACTION]
        elif c == Derived.SEQ_CLIP_BINDING:
            out += [c, Step.SEQ_CLIP_LOW_FRACTION, Step.SEQ_CLIP_HIGH_FRACTION]
        elif c == Derived.TOKENS_SEEN:
            out += [Step.NUM_TOKENS]
        elif c == Derived.ELAPSED_MIN:
            out += [Step.WALL_TIME]
        else:
            out.append(c)
    return tuple(out)


def add_derived(df: pd.DataFrame) -> pd.DataFrame:
    """Adds the Derived columns that can be computed from what ``df`` has (pure)."""
    df = df.copy()
    pairs = (
        (Derived.TOKEN_CLIP_BINDING, Step.TOKEN_CLIP_LOW_FRACTION, Step.TOKEN_CLIP_HIGH_FRACTION),
        (Derived.SEQ_CLIP_BINDING, Step.SEQ_CLIP_LOW_FRACTION, Step.SEQ_CLIP_HIGH_FRACTION),
    )
    for out, lo, hi in pairs:
        if out not in df.columns and lo in df.columns and hi in df.columns:
            df[out] = df[lo].astype(float) + df[hi].astype(float)
    if Step.NUM_TOKENS in df.columns and Derived.TOKENS_SEEN not in df.columns:
        df[Derived.TOKENS_SEEN] = df[Step.NUM_TOKENS].astype(float).fillna(0).cumsum()
    if Step.WALL_TIME in df.columns and Derived.ELAPSED_MIN not in df.columns and len(df):
        wt = df[Step.WALL_TIME].astype(float)
        df[Derived.ELAPSED_MIN] = (wt - wt.min()) / 60.0
    return df


def load_sequences(
    run: RunRef,
    columns: Iterable[str] | None = None,
    step_range: tuple[int, int] | None = None,
) -> Table:
    """Per-sequence rows of a run, optionally only steps in ``step_range`` (inclusive)."""
    from app.cols import SEQUENCE_COLUMN_NAMES

    if run.source != SOURCE_PARQUET or not run.path:
        return Table(pd.DataFrame(), [f"{run.label}: no sequences table (MLflow-only run)"])
    folder = Path(run.path) / SEQUENCES_DIR
    files = _files(folder)
    if not files:
        return Table(pd.DataFrame(), [f"{run.label}: no sequences table"])
    cols = tuple(dict.fromkeys(columns)) if columns is not None else None
    rng = (int(step_range[0]), int(step_range[1])) if step_range is not None else None
    t = _read_parts(str(folder), files, cols, rng, SEQUENCE_COLUMN_NAMES)
    return Table(t.df, [f"{run.label}: {p}" for p in t.problems])


def load_tokens(run: RunRef, step: int) -> Table:
    """The per-token rows (sampled sequences) of one step; empty when the run has no tokens/."""
    from app.cols import TOKEN_COLUMN_NAMES

    if run.source != SOURCE_PARQUET or not run.path:
        return Table(pd.DataFrame(), [])
    folder = Path(run.path) / TOKENS_DIR
    files = _files(folder)
    if not files:
        return Table(pd.DataFrame(), [])
    t = _read_parts(str(folder), files, None, (int(step), int(step)), TOKEN_COLUMN_NAMES)
    return Table(t.df, [f"{run.label}: {p}" for p in t.problems])


def sequence_steps(run: RunRef) -> np.ndarray:
    """The steps that have per-sequence rows (sorted)."""
    from app.cols import Seq

    t = load_sequences(run, [Seq.STEP])
    if not len(t.df):
        return np.array([], dtype=np.int64)
    return np.unique(t.df[Seq.STEP].to_numpy())


# ----------------------------------------------------------------------------------------------
# MLflow: the runs table, and curves for runs that exist only there
# ----------------------------------------------------------------------------------------------


def _store_exists(uri: str) -> tuple[bool, str]:
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///") :]
        if not Path(path).is_file():
            return False, f"MLflow store {uri!r}: the database file does not exist"
    if uri.startswith("file:") or ("://" not in uri and not uri.startswith("databricks")):
        path = uri[len("file://") :] if uri.startswith("file://") else uri.removeprefix("file:")
        if not Path(path).exists():
            return False, f"MLflow store {uri!r}: the folder does not exist"
    return True, ""


@st.cache_data(show_spinner=False, ttl=30, max_entries=8)
def mlflow_runs(tracking_uri: str) -> tuple[list[RunRef], list[str]]:
    """Runs of every experiment in the store (``search_runs``; no metric histories)."""
    ok, why = _store_exists(tracking_uri)
    if not ok:
        return [], [why]
    try:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=tracking_uri)
        exps = client.search_experiments()
        ids = [e.experiment_id for e in exps]
        if not ids:
            return [], []
        found = client.search_runs(ids, max_results=1000)
    except Exception as e:  # noqa: BLE001 - a broken store must not break the page
        return [], [f"MLflow store {tracking_uri!r} is unreadable ({_short(e)})"]
    now = time.time()
    refs = []
    for r in found:
        tags = dict(r.data.tags)
        params = dict(r.data.params)
        algo = (
            tags.get("algorithm")
            or tags.get("gspo_dash.algorithm")
            or params.get("algorithm")
            or ("gspo" if params.get("importance_sampling_level") == "sequence" else None)
            or ("grpo" if "importance_sampling_level" in params else "?")
        )
        status = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "failed"}.get(
            r.info.status, "running"
        )
        end = (r.info.end_time or 0) / 1000 or None
        start = (r.info.start_time or 0) / 1000 or None
        updated = end or start
        if status == "running" and start and now - start > 24 * 3600:
            status = STATUS_CRASHED
        name = r.info.run_name or r.info.run_id
        refs.append(
            RunRef(
                key=MLFLOW_KEY_PREFIX + r.info.run_id,
                name=name,
                algorithm=str(algo).lower(),
                status=status if status != STATUS_FINISHED else STATUS_FINISHED,
                source=SOURCE_MLFLOW,
                tracking_uri=tracking_uri,
                mlflow_run_id=r.info.run_id,
                metric_keys=tuple(sorted(r.data.metrics)),
                params={**params, "_tags": {k: v for k, v in tags.items() if "run_id" in k}},
                updated_at=updated,
                problems=("MLflow-only run: step curves only, no per-sequence pages",),
            )
        )
    return refs, []


MLFLOW_POINTS_PER_METRIC = 2000


def _metric_points(client, run_id: str, key: str, max_points: int | None):
    """(steps, values, timestamps_ms) of one metric. With ``max_points``, stores that sample in
    SQL (the SQLAlchemy store behind sqlite/postgres URIs) return at most that many evenly spaced
    points, first and last kept; others fall back to the full ``get_metric_history``."""
    hist = None
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    if max_points and store is not None and type(store).__name__ == "SqlAlchemyStore":
        try:
            hist = store.get_metric_history_bulk_interval([run_id], key, max_points, None, None)
        except Exception:  # noqa: BLE001 - older MLflow: use the public call
            hist = None
    if hist is None:
        hist = client.get_metric_history(run_id, key)
    n = len(hist)
    return (
        np.fromiter((m.step for m in hist), np.int64, n),
        np.fromiter((m.value for m in hist), np.float64, n),
        np.fromiter((m.timestamp for m in hist), np.float64, n),
    )


@st.cache_data(show_spinner="Reading metric history from MLflow...", max_entries=16, ttl=60)
def mlflow_steps(
    tracking_uri: str,
    run_id: str,
    keys: tuple[str, ...],
    max_points: int | None = MLFLOW_POINTS_PER_METRIC,
    sequence_level: bool = False,
) -> Table:
    """One row per step from the metric history of every key, names mapped to our columns.

    MLflow is slow to read (about 14 s for 10,000 steps x 20 metrics from SQLite here), so by
    default each metric is sampled to ``max_points`` points in the store; ``None`` reads all."""
    problems: list[str] = []
    try:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=tracking_uri)
    except Exception as e:  # noqa: BLE001
        return Table(pd.DataFrame(), [f"MLflow {tracking_uri!r}: {_short(e)}"])
    names = map_metric_names(keys, sequence_level=sequence_level)
    series = {}
    wall: dict[int, float] = {}
    sampled = False
    for key in keys:
        try:
            steps, vals, ts = _metric_points(client, run_id, key, max_points)
        except Exception as e:  # noqa: BLE001
            problems.append(f"MLflow metric {key!r}: {_short(e)}")
            continue
        if not len(steps):
            continue
        sampled |= bool(max_points) and len(steps) >= max_points
        s = pd.Series(vals, index=steps)
        series[names[key]] = s[~s.index.duplicated(keep="last")]
        for st_, t in zip(
            steps[:: max(1, len(steps) // 500)], ts[:: max(1, len(steps) // 500)], strict=True
        ):
            wall.setdefault(int(st_), t / 1000.0)
    if not series:
        return Table(pd.DataFrame(columns=[Step.STEP]), problems)
    if sampled:
        problems.append(
            f"read from MLflow sampled to {max_points} points per metric (MLflow is slow to read "
            "in full); record with training_hooks or import the run for every step"
        )
    df = pd.DataFrame(series).sort_index()
    df.index.name = Step.STEP
    df = df.reset_index()
    if Step.WALL_TIME not in df.columns and wall:
        w = pd.Series(wall).sort_index()
        df[Step.WALL_TIME] = np.interp(df[Step.STEP], w.index.to_numpy(), w.to_numpy())
    return Table(df, problems)


def clear_caches() -> None:
    """Forget every cached read (the Refresh button)."""
    st.cache_data.clear()


# ----------------------------------------------------------------------------------------------
# drawn traces, cached per run (a selection change redraws only the runs it adds)
# ----------------------------------------------------------------------------------------------


def run_signature(run: RunRef) -> tuple:
    """What a run's step curves depend on: its step parts (size, mtime), or its MLflow keys."""
    if run.source == SOURCE_PARQUET and run.path:
        return (run.key, _files(Path(run.path) / STEPS_DIR))
    return (run.key, run.metric_keys, run.updated_at)


def run_traces(run: RunRef, series, panel, **options) -> list[dict]:
    """``charts.run_traces`` for one run, cached on the run's files, the panel and the options."""
    return _run_traces(
        run_signature(run),
        series.label,
        series.color,
        repr(sorted(series.eps.items())),
        panel.key,
        tuple(sorted(options.items())),
        series,
        panel,
    )


@st.cache_data(show_spinner=False, max_entries=4096)
def _run_traces(sig, label, color, eps, panel_key, options, _series, _panel) -> list[dict]:
    from app.charts import run_traces as build

    return build(_series, _panel, **dict(options))
