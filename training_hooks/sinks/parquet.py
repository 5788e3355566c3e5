"""The Parquet sink, the source of truth: step records to part files, then one compacted file.

``ParquetSink`` buffers records and writes one part per table (``steps``, ``sequences``,
``tokens``: the layout ``training_hooks.schema`` declares) every ``steps_per_file`` steps or every
flush interval; ``step_table``, ``sequence_table`` and ``token_table`` build the Arrow tables,
``write_parquet_atomic`` and ``compact_parquet`` write them. The run folder may be local or on an
object store (``training_hooks.storage``): a part is then one object uploaded whole, and
compaction uploads the compacted object before it deletes the parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .. import schema, storage
from ..schema import RECORD_TOKEN_COLUMNS, SCHEMA_VERSION, Seq, Step, Tok, parse_part_name
from ..supersede import superseded_rows

if TYPE_CHECKING:
    import pyarrow as pa

    from ..compute import StepRecord

# Encodings of every part and compacted file: dictionaries for the string columns only (run id,
# algorithm, completions: few distinct values), min/max statistics only on the columns readers
# filter row groups on. pyarrow's defaults (a dictionary and statistics for every column) make a
# part about 2x more expensive to write, for files of about the same size.
WRITE_OPTIONS: dict[str, Any] = {
    "use_dictionary": [
        Step.RUN_ID,
        Step.ALGORITHM,
        Seq.COMPLETION,
        Seq.PROMPT,
        Tok.TOKENS,
        Tok.REASON,
    ],
    "write_statistics": [Step.STEP, Seq.RANK],
}


def write_parquet_atomic(table, path: str) -> None:
    """Write ``table`` as ``path``, whole: locally a hidden temporary name in the same folder,
    fsync, rename; on an object store one upload (``training_hooks.storage.atomic_path``)."""
    import pyarrow.parquet as pq

    with schema.atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", **WRITE_OPTIONS)


@dataclass(eq=False)
class ParquetSink:
    """Buffers many steps per part file under ``run_dir/{steps,sequences,tokens}``.

    A part is written when ``steps_per_file`` steps are buffered or, by the worker, every
    ``flush_interval_s``; so a ``kill -9`` loses at most the last interval. Parts appear
    atomically.
    """

    name: ClassVar[str] = "parquet"

    run_dir: str
    """The run folder (``training_hooks.schema`` lays out its tables)."""
    _: KW_ONLY
    rank: int = 0
    """This process's rank: part names carry it, and ``close`` compacts this rank's parts only."""
    write_steps: bool = True
    """Write the step table (rank 0 only: the step rows are reduced over ranks)."""
    steps_per_file: int = 100
    """Steps buffered per part file."""
    heartbeat: Callable[[], None] | None = None
    """Runs after every flush, failed or not, and at close (rank 0: rewrite run.json)."""
    max_buffered_steps: int = 10_000
    """While writes fail, keep at most this many steps; older ones are dropped."""
    compact: bool = True
    """``close`` merges this rank's parts of each table into one ``compacted-*.parquet``."""

    def __post_init__(self) -> None:
        self.steps_per_file = max(1, int(self.steps_per_file))
        self._records: list[StepRecord] = []
        self._extra_keys: dict[str, None] = {}  # ordered set of extra step columns seen
        self._seq = 0
        self._done_batch: tuple | None = None  # the batch being retried, and its written tables
        self._done_tables: set[str] = set()

    # -- lifecycle
    def open(self) -> None:
        for table in schema.TABLE_DIRS:
            folder = storage.join(self.run_dir, table)
            storage.makedirs(folder)
            for f in storage.list_files(folder):  # resume: continue the part counter
                info = parse_part_name(f.name)
                if info is not None:
                    self._seq = max(self._seq, info["seq"] + 1)

    def write(self, record: StepRecord) -> None:
        self._records.append(record)
        for key in (*record.extra, *record.tensor_extra_keys):
            self._extra_keys.setdefault(key, None)
        if len(self._records) > self.max_buffered_steps:  # the disk has been failing for long
            del self._records[: len(self._records) - self.max_buffered_steps]

    def should_flush(self) -> bool:
        return len(self._records) >= self.steps_per_file

    def flush(self) -> None:
        try:
            while self._records:
                batch = self._records[: self.steps_per_file]
                self._write_parts(batch)
                del self._records[: len(batch)]
        finally:  # the heartbeat (and the faults it carries) goes on while parts fail
            if self.heartbeat is not None:
                self.heartbeat()

    def close(self, status: str) -> None:
        self.flush()
        if self.compact:
            for table in schema.TABLE_DIRS:
                if table == schema.STEPS_DIR and not self.write_steps:
                    continue
                self._compact(table)
        if self.heartbeat is not None:
            self.heartbeat()

    # -- writing
    def _path(self, table: str, first: int, last: int, prefix: str = "part") -> str:
        make = schema.part_name if prefix == "part" else schema.compacted_name
        name = make(first, last, self.rank, self._seq)
        self._seq += 1
        return storage.join(self.run_dir, table, name)

    def _write_parts(self, records: list[StepRecord]) -> None:
        steps = [r.step for r in records]
        first, last = min(steps), max(steps)
        builders: list[tuple[str, Callable[[list[StepRecord]], pa.Table | None]]] = [
            (schema.SEQUENCES_DIR, sequence_table),
            (schema.TOKENS_DIR, token_table),
        ]
        if self.write_steps:
            builders.append((schema.STEPS_DIR, lambda rs: step_table(rs, tuple(self._extra_keys))))
        # sequences first, then tokens, then steps: a reader that sees a step sees its sequences.
        # A table written before a failure is not written again when the batch is retried.
        done = self._done_tables if self._done_batch == (first, last, len(records)) else set()
        self._done_batch, self._done_tables = (first, last, len(records)), done
        for table, build in builders:
            if table in done:
                continue
            tbl = build(records)
            if tbl is not None:
                write_parquet_atomic(tbl, self._path(table, first, last))
            done.add(table)
        self._done_batch, self._done_tables = None, set()

    def _compact(self, table: str) -> None:
        folder = storage.join(self.run_dir, table)
        files = []
        for f in storage.list_files(folder):
            info = parse_part_name(f.name)
            if info is not None and info["rank"] == self.rank:
                files.append((info["first"], info["seq"], f.name, info["last"]))
        if len(files) < 2:
            return
        files.sort()  # by first step: files[0] starts the compacted range
        paths = [storage.join(folder, name) for _, _, name, _ in files]
        last = max(f[3] for f in files)
        compact_parquet(paths, self._path(table, files[0][0], last, prefix="compacted"))
        for p in paths:  # the compacted file is in place: the parts are now duplicates
            storage.delete(p)


def compact_parquet(paths: list[str], target: str) -> None:
    """Merge Parquet files (schemas may differ by extra columns) into ``target``, atomically.

    Streams file by file, batching rows into row groups of about 64k rows, so memory stays
    bounded by a row group rather than the run. A step a newer file holds again (a resumed run
    logged it again) is kept from the newest write only (``training_hooks.supersede``).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    named = {storage.basename(p): p for p in paths}

    def steps_of(name: str):
        return (
            pq.ParquetFile(storage.open_input(named[name]))
            .read(columns=[Step.STEP])[Step.STEP]
            .to_numpy()
        )

    dropped = superseded_rows(list(named), steps_of)
    schemas = [pq.read_schema(storage.open_input(p)) for p in paths]
    unified = pa.unify_schemas(schemas, promote_options="permissive")
    unified = unified.with_metadata(schemas[0].metadata or {})
    with schema.atomic_path(target) as tmp:
        with pq.ParquetWriter(tmp, unified, compression="zstd", **WRITE_OPTIONS) as writer:
            pending, rows = [], 0
            for p in paths:
                t = pq.ParquetFile(storage.open_input(p)).read()  # (not pq.read_table: no dataset)
                if (drop := dropped.get(storage.basename(p))) is not None:
                    t = t.filter(pc.invert(pc.is_in(t[Step.STEP], value_set=pa.array(drop))))
                for f in unified:
                    if f.name not in t.column_names:
                        t = t.append_column(f, pa.nulls(t.num_rows, f.type))
                pending.append(t.select(unified.names).cast(unified))
                rows += t.num_rows
                if rows >= 65_536:
                    writer.write_table(pa.concat_tables(pending))
                    pending, rows = [], 0
            if pending:
                writer.write_table(pa.concat_tables(pending))


def step_table(records: list[StepRecord], extra_keys: tuple[str, ...] = ()):
    """The step-table Arrow table of materialised records (extras NaN where not given)."""
    import pyarrow as pa

    sch = schema.step_schema(extra_keys)
    rows = [r.materialized()[0] for r in records]
    arrays = []
    for f in sch:
        name = f.name
        if name == Step.SCHEMA_VERSION:
            arrays.append(pa.array(np.full(len(rows), SCHEMA_VERSION, dtype=np.int16)))
        else:  # a missing float is NaN, a missing int (rollout, policy_lag) is null
            missing = None if pa.types.is_integer(f.type) else float("nan")
            values = [row.get(name, missing) for row in rows]
            arrays.append(pa.array(values, type=f.type, from_pandas=False))
    return pa.table(arrays, schema=sch)


# Arrow type name -> numpy dtype (pyarrow's own to_pandas_dtype imports pandas: a second)
_NUMPY = {
    "bool": np.bool_,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "float": np.float32,
    "double": np.float64,
}


def sequence_table(records: list[StepRecord]):
    """The sequence-table Arrow table of materialised records (all of one rank)."""
    import pyarrow as pa

    sch = schema.sequence_schema()
    n = sum(r.batch_size for r in records)
    seqs = [r.materialized()[1] for r in records]
    arrays = []
    for f in sch:
        name = f.name
        if name == Seq.SCHEMA_VERSION:
            arrays.append(pa.array(np.full(n, SCHEMA_VERSION, dtype=np.int16)))
        elif name == Seq.RUN_ID:
            arrays.append(
                pa.array([records[0].run_id] * n, type=f.type) if n else pa.array([], f.type)
            )
        elif name in (Seq.COMPLETION, Seq.PROMPT) or (
            name == Seq.TRUNCATED and any(s[name] is None for s in seqs)
        ):  # B values, or None (B nulls), per record
            vals: list = []
            for r, s in zip(records, seqs, strict=True):
                t = s[name]
                vals.extend([None] * r.batch_size if t is None else list(t))
            arrays.append(pa.array(vals, type=f.type))
        else:
            arr = np.concatenate([s[name] for s in seqs])
            if arr.dtype == object:  # a flag with unknown (None) values: nulls
                arrays.append(pa.array(arr.tolist(), type=f.type))
            else:
                arrays.append(pa.array(arr.astype(_NUMPY[str(f.type)], copy=False), type=f.type))
    return pa.table(arrays, schema=sch)


def token_table(records: list[StepRecord]):
    """The token-table Arrow table, or None when no record sampled tokens."""
    import pyarrow as pa

    recs = [(r, r.tokens) for r in records if r.tokens]
    if not recs:
        return None
    sch = schema.token_schema()
    cols: dict[str, list] = {name: [] for name in sch.names}
    for r, t in recs:
        k = len(t[Tok.GROUP])
        cols[Tok.SCHEMA_VERSION] += [SCHEMA_VERSION] * k
        cols[Tok.RUN_ID] += [r.run_id] * k
        cols[Tok.STEP] += [r.step] * k
        cols[Tok.RANK] += [r.rank] * k
        for name in RECORD_TOKEN_COLUMNS:
            cols[name] += t[name]
    return pa.table([pa.array(cols[f.name], type=f.type) for f in sch], schema=sch)
