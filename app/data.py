"""The tables of a run, as the pages read them: steps, sequences, tokens (one cached data layer).

Parquet runs are read here. Every read is cached with ``st.cache_data`` on the file paths *and*
their (size, mtime), so a live run's new parts show up on the next rerun without a restart, and an
unchanged run costs nothing. Reads project columns and filter rows in pyarrow (row-group statistics
on ``step``, and files skipped by the step range in their names), so a step curve never touches
the per-sequence table. The step table of an MLflow-only run comes from ``app.mlflow_store``.

Bad data never raises here: an unreadable file, an older schema or a missing table come back as
``Table.problems`` (plain sentences naming the run and the reason) beside whatever could be read.
Outside Streamlit (tests, benchmarks) ``st.cache_data`` still works; nothing here draws.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import streamlit as st

from app import mlflow_store
from app.records import SOURCE_MLFLOW, SOURCE_PARQUET, RunRef, Table, short_error
from training_hooks.metric_map import Derived
from training_hooks.schema import (
    METADATA_KEY,
    SCHEMA_VERSION,
    SEQUENCE_COLUMNS,
    SEQUENCES_DIR,
    STEP_COLUMNS,
    STEPS_DIR,
    TOKEN_COLUMNS,
    TOKENS_DIR,
    Seq,
    Step,
    arrow_schema,
    is_data_file,
    parse_part_name,
)

PartFiles = tuple[tuple[str, int, int], ...]  # (name, size, mtime_ns) of each part, by name


def part_files(folder: Path) -> PartFiles:
    """(name, size, mtime_ns) of the finished Parquet parts in ``folder``, sorted by name: what a
    read of the folder depends on, so also its cache key."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return ()
    out = []
    for e in entries:
        if is_data_file(e.name):
            try:
                stat = e.stat()
            except FileNotFoundError:  # replaced by compaction meanwhile
                continue
            out.append((e.name, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(out))


def clear_caches() -> None:
    """Forget every cached read (the Refresh button)."""
    st.cache_data.clear()


# ----------------------------------------------------------------------------------------------
# the loaders the pages call
# ----------------------------------------------------------------------------------------------


def load_steps(run: RunRef, columns: Iterable[str] | None = None) -> Table:
    """The step table of a run, one row per step (deduplicated, sorted), plus derived columns.

    Parquet runs read only ``columns`` (all when None); MLflow-only runs read the store's metric
    history (slow: about 1 s per 1,000 points; cached)."""
    if run.source == SOURCE_MLFLOW:
        t = mlflow_store.mlflow_steps(
            run.tracking_uri or "",
            run.mlflow_run_id or "",
            run.metric_keys,
            params=mlflow_store.run_params(run),
        )
    else:
        folder = Path(run.path or "") / STEPS_DIR
        want = None
        if columns is not None:
            cols = tuple(dict.fromkeys(columns))
            want = tuple(dict.fromkeys((Step.STEP, Step.WALL_TIME, *_sources_of(cols))))
        t = _read_parts(str(folder), part_files(folder), want, None, STEP_COLUMNS)
    df, problems = t.df, list(t.problems)
    if len(df) and Step.STEP in df.columns:
        df = df.drop_duplicates(subset=[Step.STEP], keep="last").sort_values(Step.STEP)
        df = df.reset_index(drop=True)
    elif len(df):
        problems.append("the step table has no 'step' column")
        df = df.iloc[0:0]
    return Table(add_derived(df), problems)


def load_sequences(
    run: RunRef,
    columns: Iterable[str] | None = None,
    step_range: tuple[int, int] | None = None,
) -> Table:
    """Per-sequence rows of a run, optionally only steps in ``step_range`` (inclusive)."""
    if run.source != SOURCE_PARQUET or not run.path:
        return Table(pd.DataFrame(), [f"{run.label}: no sequences table (MLflow-only run)"])
    folder = Path(run.path) / SEQUENCES_DIR
    files = part_files(folder)
    if not files:
        return Table(pd.DataFrame(), [f"{run.label}: no sequences table"])
    cols = tuple(dict.fromkeys(columns)) if columns is not None else None
    rng = (int(step_range[0]), int(step_range[1])) if step_range is not None else None
    t = _read_parts(str(folder), files, cols, rng, SEQUENCE_COLUMNS)
    return Table(t.df, [f"{run.label}: {p}" for p in t.problems])


def load_tokens(run: RunRef, step: int) -> Table:
    """The per-token rows (sampled sequences) of one step; empty when the run has no tokens/."""
    if run.source != SOURCE_PARQUET or not run.path:
        return Table(pd.DataFrame(), [])
    folder = Path(run.path) / TOKENS_DIR
    files = part_files(folder)
    if not files:
        return Table(pd.DataFrame(), [])
    t = _read_parts(str(folder), files, None, (int(step), int(step)), TOKEN_COLUMNS)
    return Table(t.df, [f"{run.label}: {p}" for p in t.problems])


def sequence_steps(run: RunRef) -> np.ndarray:
    """The steps that have per-sequence rows (sorted)."""
    t = load_sequences(run, [Seq.STEP])
    if not len(t.df):
        return np.array([], dtype=np.int64)
    return np.unique(t.df[Seq.STEP].to_numpy())


# ----------------------------------------------------------------------------------------------
# derived step columns
# ----------------------------------------------------------------------------------------------


def _sources_of(cols: tuple[str, ...]) -> tuple[str, ...]:
    """The stored columns to read for ``cols`` (a Derived column reads what it is derived from)."""
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


# ----------------------------------------------------------------------------------------------
# Parquet parts
# ----------------------------------------------------------------------------------------------


def _version_of(schema: pa.Schema) -> int | None:
    meta = schema.metadata or {}
    raw = meta.get(METADATA_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _outside(name: str, step_range: tuple[int, int] | None) -> bool:
    """True when the file's name says it holds no step of ``step_range`` (names without a step
    range are read and filtered by their rows)."""
    part = parse_part_name(name) if step_range is not None else None
    return part is not None and (part["last"] < step_range[0] or part["first"] > step_range[1])


@st.cache_data(show_spinner=False, max_entries=256)
def _read_parts(
    folder: str,
    files: PartFiles,
    columns: tuple[str, ...] | None,
    step_range: tuple[int, int] | None,
    declared: tuple[tuple[str, str], ...],
) -> Table:
    """Read ``files`` of ``folder`` (the table's ``declared`` (name, type) columns); ``files``
    (with size and mtime) is also the cache key."""
    frames: list[pd.DataFrame] = []
    problems: list[str] = []
    missing: set[str] = set()
    versions: set[int | None] = set()
    expected = tuple(name for name, _ in declared)
    for name, _, _ in files:
        if _outside(name, step_range):
            continue
        where = f"{os.path.basename(folder)}/{name}"
        path = os.path.join(folder, name)
        try:
            pf = pq.ParquetFile(path)
            schema = pf.schema_arrow
            versions.add(_version_of(schema))
            present = set(schema.names)
            wanted = [c for c in (columns or schema.names) if c in present]
            asked = expected if columns is None else columns
            missing |= {c for c in asked if c not in present and c in expected}
            filters = None
            if step_range is not None and Step.STEP in present:
                filters = [(Step.STEP, ">=", step_range[0]), (Step.STEP, "<=", step_range[1])]
            table = pq.read_table(path, columns=wanted, filters=filters)
            table, bad = _conform(table, declared)
            if (columns is None or Step.STEP in columns) and Step.STEP not in table.column_names:
                raise ValueError(f"no usable {Step.STEP!r} column ({'; '.join(bad) or 'missing'})")
            frames.append(table.to_pandas())
            problems += [f"{where}: {b}" for b in bad]
        except Exception as e:  # noqa: BLE001 - any unreadable file is reported, not raised
            problems.append(f"{where} is unreadable ({short_error(e)})")
    problems += _schema_problems(os.path.basename(folder), missing, versions)
    frames = [f for f in frames if len(f)]
    if not frames:
        return Table(pd.DataFrame(columns=list(columns or ())), problems)
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return Table(df, problems)


def _conform(table: pa.Table, declared: tuple[tuple[str, str], ...]) -> tuple[pa.Table, list[str]]:
    """``table`` with each declared column cast to its declared type (a lossless cast only); a
    column that cannot be is left out, and said so."""
    types = {f.name: f.type for f in arrow_schema(declared)}
    bad = []
    for name in table.column_names:
        want = types.get(name)
        if want is None or table.schema.field(name).type == want:
            continue
        try:
            column = table[name].cast(want, safe=True)
            table = table.set_column(table.column_names.index(name), name, column)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            bad.append(f"column {name!r} is {table.schema.field(name).type}, not {want}: left out")
            table = table.drop_columns([name])
    return table, bad


def _schema_problems(table: str, missing: set[str], versions: set[int | None]) -> list[str]:
    """Sentences for columns the files lack and for files written by a newer schema."""
    out = []
    if missing:
        out.append(f"{table}: older or partial schema, missing " + ", ".join(sorted(missing)))
    newer = sorted(v for v in versions if v is not None and v > SCHEMA_VERSION)
    if newer:
        out.append(
            f"{table} was written with schema v{newer[-1]}, newer than this app (v{SCHEMA_VERSION})"
        )
    return out
