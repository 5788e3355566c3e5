"""A run's Parquet tables read from its folder: the one place that opens them. The dashboard
(``app.data``, which caches it, and ``app.discovery``), a run's summary
(``training_hooks.run_summary``, written by the recorder and the importers) and scripts
(``read_table(run_dir, "steps")``) all read through ``read_files``, so the table a summary judges
is the table the pages judge, and every reader leaves out the rows a newer write supersedes
(``training_hooks.supersede``, the one rule). Pure pyarrow and pandas: no Streamlit, no torch.
What is read (names, types, files) is declared in ``training_hooks.schema``; the reader imports
only it, ``supersede`` and ``storage``.

Bad data never raises here: an unreadable file, an older schema or a missing table come back as
``Table.problems`` (plain sentences naming the reason) beside whatever could be read.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import storage
from .schema import (
    METADATA_KEY,
    NAN_CELLS,
    SCHEMA_VERSION,
    STEPS_DIR,
    TABLE_COLUMNS,
    TABLE_KEYS,
    Derived,
    Step,
    arrow_schema,
    is_data_file,
    parse_part_name,
)
from .storage import FileStamp
from .supersede import latest_frames, overlapping

PartFiles = tuple[FileStamp, ...]  # (name, size, mtime_ns) of each part, by name
#: ``DataFrame.attrs`` key of a table read with ``skip``: {declared column the files hold but
#: that was not read: whether its frame column would be numeric}
UNREAD_COLUMNS = "gspo_dash.unread_columns"


@dataclass(frozen=True)
class Table:
    """A read table and what went wrong while reading it."""

    df: pd.DataFrame
    problems: list[str]
    unreadable: tuple[str, ...] = ()
    """The problems of files that could not be read at all (``read_table`` raises on them)."""


def short_error(e: Exception) -> str:
    """``Type: message``, cut to 160 characters, for a problem sentence."""
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 160 else text[:157] + "..."


def known_cumsum(values: pd.Series) -> pd.Series:
    """Running total of ``values`` in row order, unknown (NaN) from the first unknown value on: a
    step whose count was not logged is not a step of 0, so no total after it is known. All NaN for
    a run that logged no count (never a line at 0)."""
    v = pd.to_numeric(values, errors="coerce").astype(float)
    known = v.notna().cummin()
    return v.where(known).cumsum().where(known)


def add_derived(df: pd.DataFrame) -> pd.DataFrame:
    """Adds the Derived columns that can be computed from what ``df`` has (pure). The new columns
    are added at once (``assign``): one by one, each would copy a wide frame's blocks again."""
    new: dict[str, pd.Series] = {}
    pairs = (
        (Derived.TOKEN_CLIP_BINDING, Step.TOKEN_CLIP_LOW_FRACTION, Step.TOKEN_CLIP_HIGH_FRACTION),
        (Derived.SEQ_CLIP_BINDING, Step.SEQ_CLIP_LOW_FRACTION, Step.SEQ_CLIP_HIGH_FRACTION),
    )
    for out, lo, hi in pairs:
        if out not in df.columns and lo in df.columns and hi in df.columns:
            new[out] = df[lo].astype(float) + df[hi].astype(float)
    if Step.NUM_TOKENS in df.columns and Derived.TOKENS_SEEN not in df.columns:
        new[Derived.TOKENS_SEEN] = known_cumsum(df[Step.NUM_TOKENS])
    if Step.WALL_TIME in df.columns and Derived.ELAPSED_MIN not in df.columns and len(df):
        wt = df[Step.WALL_TIME].astype(float)
        new[Derived.ELAPSED_MIN] = (wt - wt.min()) / 60.0
    return df.assign(**new) if new else df.copy()


def version_of(schema: pa.Schema) -> int | None:
    meta = schema.metadata or {}
    raw = meta.get(METADATA_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def outside(name: str, step_range: tuple[int, int] | None) -> bool:
    """True when the file's name says it holds no step of ``step_range`` (names without a step
    range are read and filtered by their rows)."""
    if step_range is None:
        return False
    part = parse_part_name(name)
    return part is not None and (part["last"] < step_range[0] or part["first"] > step_range[1])


class Vanished(Exception):
    """A listed file was gone when read (compaction replaced it): list again."""


def read_files(
    folder: str,
    files: PartFiles,
    columns: tuple[str, ...] | None,
    step_range: tuple[int, int] | None,
    declared: tuple[tuple[str, str], ...],
    skip_vanished: bool,
    skip: tuple[str, ...] = (),
) -> Table:
    """Read ``files`` of ``folder`` (each file's columns among ``columns``, its rows in
    ``step_range``), each ``declared`` (name, type) column cast to its type (``conform``), the
    rows a newer write supersedes left out (``training_hooks.supersede``);
    unreadable files, columns of the wrong type and missing declared columns become problems. A
    vanished file raises ``Vanished`` (never cached) unless ``skip_vanished``.

    ``skip``: declared columns not to read where a file stores them with their declared type (so
    nothing is said about them that a full read would say: a column of the wrong type is read,
    to be reported); the table is otherwise the full read's, with ``attrs[UNREAD_COLUMNS]``
    naming the columns left unread. For a page that lists every column but draws a few."""
    read: list[tuple[str, pa.Table]] = []
    nans: dict[str, list[int]] = {}
    problems: list[str] = []
    unreadable: list[str] = []
    missing: set[str] = set()
    versions: set[int | None] = set()
    unread: dict[str, bool] = {}
    table = storage.basename(folder)
    expected = tuple(name for name, _ in declared)
    types = _declared_types(declared)
    skipped = set(skip) - {Step.STEP}
    for name, size, _ in files:
        if outside(name, step_range):
            continue
        try:
            path = storage.join(folder, name)
            # a local part is read at once: pre-buffering (coalesced reads on background I/O
            # threads, for an object store's latency) only adds thread hand-offs to a local read
            pf = pq.ParquetFile(storage.open_input(path, size), pre_buffer=storage.is_uri(path))
            schema = pf.schema_arrow
            versions.add(version_of(schema))
            present = set(schema.names)
            wanted = [c for c in (columns or schema.names) if c in present]
            if skipped:
                file_types = dict(zip(schema.names, schema.types, strict=True))
                left = {c for c in wanted if c in skipped and file_types[c] == types.get(c)}
                wanted = [c for c in wanted if c not in left]
                for c in left:
                    unread[c] = pa.types.is_integer(types[c]) or pa.types.is_floating(types[c])
            if Step.STEP in present and Step.STEP not in wanted:  # (to tell a newer write's rows)
                wanted.append(Step.STEP)
            asked = expected if columns is None else columns
            missing |= {c for c in asked if c not in present and c in expected}
            rows = step_range if Step.STEP in present else None
            got, bad = conform(read_file(pf, wanted, rows), declared)
            if (columns is None or Step.STEP in columns) and Step.STEP not in got.column_names:
                raise ValueError(f"no usable {Step.STEP!r} column ({'; '.join(bad) or 'missing'})")
            read.append((name, got))
            problems += [f"{table}/{name}: {b}" for b in bad]
        except FileNotFoundError as e:
            if not skip_vanished:
                raise Vanished(name) from e
        except Exception as e:  # noqa: BLE001 - any unreadable file is reported, not raised
            unreadable.append(f"{table}/{name} is unreadable ({short_error(e)})")
    problems += unreadable + schema_problems(table, missing, versions)
    df = _frame(read, nans)
    if df is None:
        return Table(pd.DataFrame(columns=list(columns or ())), problems, tuple(unreadable))
    if columns is not None and Step.STEP not in columns and Step.STEP in df.columns:
        df = df.drop(columns=[Step.STEP])
    df.attrs[NAN_CELLS] = {c: tuple(sorted(set(v))) for c, v in nans.items()}
    if skipped:
        df.attrs[UNREAD_COLUMNS] = dict(sorted(unread.items()))
    return Table(df, problems, tuple(unreadable))


def _frame(read: list[tuple[str, pa.Table]], nans: dict[str, list[int]]) -> pd.DataFrame | None:
    """The files' rows in one frame (None when none has a row), a step logged again from its
    newest write only (``latest_frames``); the steps of their NaN cells added to ``nans``
    (``add_nan_cells``). When no two files can hold one step and every file has one schema
    (the usual run), the tables are joined in Arrow and converted once: a conversion per file
    has a fixed cost, paid once instead of once per part."""
    kept = [(n, t) for n, t in read if t.num_rows]
    stepped = [n for n, t in read if Step.STEP in t.column_names]
    if not kept:
        return None
    # one schema: compared, not hashed (pyarrow 21 cannot hash a schema with metadata)
    first = kept[0][1].schema
    if (
        len(kept) > 1
        and not overlapping(stepped)
        and all(t.schema.equals(first) for _, t in kept[1:])
        and not any(pa.types.is_dictionary(f.type) for f in kept[0][1].schema)
    ):
        joined = pa.concat_tables([t for _, t in kept])
        add_nan_cells(nans, joined)
        df = joined.to_pandas()
        df.index = pd.RangeIndex(len(df))  # as pd.concat(..., ignore_index=True)
        return df
    for _, t in read:
        add_nan_cells(nans, t)
    frames = [f for f in latest_frames([(n, t.to_pandas()) for n, t in read]) if len(f)]
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def add_nan_cells(into: dict[str, list[int]], t: pa.Table) -> None:
    """Adds to ``into`` the steps at which a float column of ``t`` holds NaN (a value the run
    logged), not null (a step the column was not logged at): pandas reads both as NaN, so the
    frame carries them in ``attrs[NAN_CELLS]`` (``training_hooks.schema``)."""
    if Step.STEP not in t.column_names:
        return
    step = t.column(Step.STEP)
    for name in t.column_names:
        c = t.column(name)
        if c.type not in (pa.float32(), pa.float64()) or c.null_count == len(c):
            continue
        isnan = pc.fill_null(pc.is_nan(c), False)
        if pc.any(isnan).as_py():
            into.setdefault(name, []).extend(pc.filter(step, isnan).to_pylist())


def conform(table: pa.Table, declared: tuple[tuple[str, str], ...]) -> tuple[pa.Table, list[str]]:
    """``table`` with each declared column cast to its declared type (a lossless cast only); a
    column that cannot be is left out, and said so."""
    types = _declared_types(declared)
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


@functools.lru_cache(maxsize=64)
def _declared_types(declared: tuple[tuple[str, str], ...]) -> dict[str, pa.DataType]:
    """{name: Arrow type} of ``declared`` (built once per table, not once per file read)."""
    return {f.name: f.type for f in arrow_schema(declared)}


def read_file(pf: pq.ParquetFile, columns: list[str], step_range: tuple[int, int] | None):
    """``columns`` of one Parquet file; with ``step_range``, only its rows in that range.

    The whole file's ``columns`` are read, then filtered: no row group is skipped by its ``step``
    statistics. The fuzz tests found both ways of skipping unsafe on a damaged part: reading the
    statistics from Python aborted the process, and Arrow's dataset reader (``filters=``) hung.
    Reading a projection is cheap: only the named columns are decoded (docs/benchmarks.md has
    the times)."""
    if step_range is None:
        return pf.read(columns=columns)
    lo, hi = step_range
    t = pf.read(columns=list(dict.fromkeys([*columns, Step.STEP])))
    step = t.column(Step.STEP)
    keep = pc.and_(pc.greater_equal(step, lo), pc.less_equal(step, hi))
    return t.filter(keep).select(columns)


def schema_problems(table: str, missing: set[str], versions: set[int | None]) -> list[str]:
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


def one_row_per_step(t: Table) -> Table:
    """A read step table deduplicated on ``step`` (the last write wins), sorted, derived columns
    added."""
    df, problems = t.df, list(t.problems)
    if len(df) and Step.STEP in df.columns:
        step = df[Step.STEP].to_numpy()
        if not (step.dtype.kind in "iu" and np.all(step[1:] > step[:-1])):  # else: as it is
            df = df.drop_duplicates(subset=[Step.STEP], keep="last").sort_values(Step.STEP)
        df = df.reset_index(drop=True)
    elif len(df):
        problems.append("the step table has no 'step' column")
        df = df.iloc[0:0]
    return Table(add_derived(df), problems)


def list_now(folder: str) -> PartFiles:
    """The folder's parts, listed now (not from a shared listing)."""
    return tuple(f for f in storage.list_files(folder) if is_data_file(f.name))


def read_listed(
    run_dir: str,
    table: str,
    columns: tuple[str, ...] | None,
    step_range: tuple[int, int] | None,
    read: Callable[..., Table] = read_files,
    listed: Callable[[str], PartFiles] = list_now,
) -> Table | None:
    """A run's ``table`` (its declared columns: ``schema.TABLE_COLUMNS``) from the parts
    ``listed`` lists, by ``read`` (None when the table has no part). The app passes its cached listing and
    reader. A part gone between the listing and the read (compaction) makes it list the folder
    again, now, once."""
    folder = storage.join(run_dir, table)
    for attempt in range(2):
        files = listed(folder) if attempt == 0 else list_now(folder)
        if not files:
            return None
        try:
            return read(folder, files, columns, step_range, TABLE_COLUMNS[table], attempt > 0)
        except Vanished:
            continue
    return None  # (not reached: the second attempt skips vanished files)


def step_frame(run_dir: str, listed: PartFiles | None = None) -> tuple[pd.DataFrame, PartFiles]:
    """A run folder's step table exactly as the app's ``load_steps`` gives it (all columns, one
    row per step, derived columns), read now and not cached, with the step parts listed (all of
    them, as discovery lists them). For writers of a run's summary
    (``training_hooks.run_summary``), whose findings must be the pages' findings; the app's
    ``load_steps`` is this read, cached. ``listed``: the folder's parts when already listed."""
    folder = storage.join(run_dir, STEPS_DIR)
    listed = list_now(folder) if listed is None else listed
    t = read_files(folder, listed, None, None, TABLE_COLUMNS[STEPS_DIR], skip_vanished=True)
    return one_row_per_step(t).df, listed


def read_table(run_dir: str | os.PathLike, table: str, columns=None) -> pd.DataFrame:
    """A run's table (``"steps"``, ``"sequences"``, ``"tokens"``) as one DataFrame, read now and
    not cached: ``read_files`` over every file, oldest write first (columns may differ by
    extras), rows deduplicated on ``TABLE_KEYS`` keeping the last written, sorted by the keys;
    ``columns`` (default all) read with the keys, dropped unless asked for. A file that cannot be
    read raises ValueError."""
    keys = TABLE_KEYS.get(table, ())
    want = None if columns is None else tuple(dict.fromkeys([*columns, *keys]))
    folder = storage.join(str(run_dir), table)
    files = tuple(sorted(list_now(folder), key=_write_order))
    t = read_files(folder, files, want, None, TABLE_COLUMNS.get(table, ()), skip_vanished=True)
    if t.unreadable:
        raise ValueError("; ".join(t.unreadable))
    df = t.df
    present = [k for k in keys if k in df.columns]
    if present and len(df):
        df = df.drop_duplicates(subset=present, keep="last").sort_values(present, ignore_index=True)
    if columns is not None:
        df = df[[c for c in columns if c in df.columns]]
    return df


def _write_order(f: FileStamp) -> tuple[int, int]:
    """A file's place in write order: (rank, counter); a name that does not parse first."""
    p = parse_part_name(f.name)
    return (p["rank"], p["seq"]) if p else (-1, 0)


def first_value(run_dir: str, table: str, column: str, files: PartFiles) -> object:
    """``column``'s value in the first row of the first of ``files`` (a table's parts) that has
    one, None when none has."""
    folder = storage.join(run_dir, table)
    for f in files:
        t = read_files(folder, (f,), (column,), None, TABLE_COLUMNS[table], skip_vanished=True)
        if column in t.df.columns and len(t.df):
            return t.df[column].iloc[0]
    return None
