"""Sinks persist step records; each runs on its own background thread behind a bounded queue.

A ``Sink`` buffers in ``write`` (cheap), persists in ``flush`` (slow: disk, network) and finishes
in ``close``. A ``SinkWorker`` owns one sink and one daemon thread: it materialises records (waits
for the device-to-host copy), calls ``write``, flushes when the sink asks (``should_flush``) or
every ``flush_interval_s``, and turns every exception into a reported fault instead of a crash.
Nothing a sink does can block or kill the training thread: ``put`` never waits (a full queue drops
the record and reports it), and ``close`` gives up on a hung sink after a bounded wait.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from . import schema
from .compute import StepRecord
from .schema import SCHEMA_VERSION, Seq, Step, Tok, parse_part_name

log = logging.getLogger("training_hooks")

FaultCallback = Callable[[str, str, str], None]  # (sink name, kind, message)


@runtime_checkable
class Sink(Protocol):
    """What a ``SinkWorker`` drives. Every method runs on the sink's own thread."""

    name: str

    def open(self) -> None:
        """Acquire resources (create folders, connect). An exception disables the sink."""

    def write(self, record: StepRecord) -> None:
        """Buffer one materialised record. Must be cheap."""

    def should_flush(self) -> bool:
        """True when the buffer is big enough to persist now."""

    def flush(self) -> None:
        """Persist the buffer. On failure raise and keep the buffer: it is retried later."""

    def close(self, status: str) -> None:
        """Flush and release; ``status`` is the run's final status.

        A sink may also define ``abort()``: called (from another thread) when the sink is
        abandoned because it did not finish in time.
        """


class NullSink:
    """A sink that records nothing (the loop never branches on "is tracking on")."""

    name = "null"

    def open(self) -> None:
        pass

    def write(self, record: StepRecord) -> None:
        pass

    def should_flush(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def close(self, status: str) -> None:
        pass


# ----------------------------------------------------------------------------- Parquet


# Encodings of every part and compacted file: dictionaries for the string columns only (run id,
# algorithm, completions: few distinct values), min/max statistics only on the columns readers
# filter row groups on. pyarrow's defaults (a dictionary and statistics for every column) make a
# part about 2x more expensive to write, for files of about the same size.
WRITE_OPTIONS: dict[str, Any] = {
    "use_dictionary": [Step.RUN_ID, Step.ALGORITHM, Seq.COMPLETION, Tok.TOKENS],
    "write_statistics": [Step.STEP, Seq.RANK],
}


def write_parquet_atomic(table, path: str, *, compression: str = "zstd") -> None:
    """Write ``table`` to a hidden temporary name in the same folder, fsync, rename to ``path``."""
    import pyarrow.parquet as pq

    with schema.atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression=compression, **WRITE_OPTIONS)


class ParquetSink:
    """Buffers many steps per part file under ``run_dir/{steps,sequences,tokens}``.

    A part is written when ``steps_per_file`` steps are buffered or, by the worker, every
    ``flush_interval_s``; so a ``kill -9`` loses at most the last interval. Parts are zstd
    compressed and appear atomically. ``close`` merges this rank's parts of each table into one
    ``compacted-*.parquet``. ``heartbeat`` (rank 0: rewrite run.json) runs after every flush.
    Only ``write_steps`` sinks (rank 0) write the step table.
    """

    name = "parquet"

    def __init__(
        self,
        run_dir: str,
        *,
        rank: int = 0,
        write_steps: bool = True,
        steps_per_file: int = 100,
        compression: str = "zstd",
        heartbeat: Callable[[], None] | None = None,
        max_buffered_steps: int = 10_000,
        compact: bool = True,
    ):
        self.run_dir = run_dir
        self.rank = rank
        self.write_steps = write_steps
        self.steps_per_file = max(1, int(steps_per_file))
        self.compression = compression
        self.heartbeat = heartbeat
        self.max_buffered_steps = max_buffered_steps
        self.compact = compact
        self.dropped_steps = 0
        self._records: list[StepRecord] = []
        self._extra_keys: dict[str, None] = {}  # ordered set of extra step columns seen
        self._seq = 0
        self._done_batch: tuple | None = None  # the batch being retried, and its written tables
        self._done_tables: set[str] = set()

    # -- lifecycle
    def open(self) -> None:
        for table in schema.TABLE_DIRS:
            folder = os.path.join(self.run_dir, table)
            os.makedirs(folder, exist_ok=True)
            for name in os.listdir(folder):  # resume: continue the part counter
                info = parse_part_name(name)
                if info is not None:
                    self._seq = max(self._seq, info["seq"] + 1)

    def write(self, record: StepRecord) -> None:
        self._records.append(record)
        for key in record.extra:
            self._extra_keys.setdefault(key, None)
        for key in record.tensor_extra_keys:
            self._extra_keys.setdefault(key, None)
        if len(self._records) > self.max_buffered_steps:  # the disk has been failing for long
            drop = len(self._records) - self.max_buffered_steps
            del self._records[:drop]
            self.dropped_steps += drop

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
        return os.path.join(self.run_dir, table, name)

    def _write_parts(self, records: list[StepRecord]) -> None:
        steps = [r.step for r in records]
        first, last = min(steps), max(steps)
        builders = [(schema.SEQUENCES_DIR, sequence_table), (schema.TOKENS_DIR, token_table)]
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
                write_parquet_atomic(
                    tbl, self._path(table, first, last), compression=self.compression
                )
            done.add(table)
        self._done_batch, self._done_tables = None, set()

    def _compact(self, table: str) -> None:
        folder = os.path.join(self.run_dir, table)
        files = []
        for name in os.listdir(folder):
            info = parse_part_name(name)
            if info is not None and info["rank"] == self.rank:
                files.append((info["first"], info["seq"], name))
        if len(files) < 2:
            return
        files.sort()
        paths = [os.path.join(folder, name) for _, _, name in files]
        first = min(f[0] for f in files)
        last = max(parse_part_name(f[2])["last"] for f in files)
        target = self._path(table, first, last, prefix="compacted")
        compact_parquet(paths, target, compression=self.compression)
        for p in paths:  # the compacted file is in place: the parts are now duplicates
            os.unlink(p)


def compact_parquet(paths: list[str], target: str, *, compression: str = "zstd") -> None:
    """Merge Parquet files (schemas may differ by extra columns) into ``target``, atomically.

    Streams file by file, batching rows into row groups of about 64k rows, so memory stays
    bounded by a row group rather than the run.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = [pq.read_schema(p) for p in paths]
    unified = pa.unify_schemas(schemas, promote_options="permissive")
    unified = unified.with_metadata(schemas[0].metadata or {})
    with schema.atomic_path(target) as tmp:
        with pq.ParquetWriter(tmp, unified, compression=compression, **WRITE_OPTIONS) as writer:
            pending, rows = [], 0
            for p in paths:
                t = pq.ParquetFile(p).read()  # (pq.read_table would import pyarrow.dataset)
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
    rows = [r.row for r in records]
    nan = float("nan")
    arrays = []
    for f in sch:
        name = f.name
        if name == Step.SCHEMA_VERSION:
            arrays.append(pa.array(np.full(len(rows), SCHEMA_VERSION, dtype=np.int16)))
        else:  # a missing float is NaN, a missing int (rollout, policy_lag) is null
            missing = None if pa.types.is_integer(f.type) else nan
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
    arrays = []
    for f in sch:
        name = f.name
        if name == Seq.SCHEMA_VERSION:
            arrays.append(pa.array(np.full(n, SCHEMA_VERSION, dtype=np.int16)))
        elif name == Seq.RUN_ID:
            arrays.append(
                pa.array([records[0].run_id] * n, type=f.type) if n else pa.array([], f.type)
            )
        elif name == Seq.COMPLETION:
            if all(r.completions is None for r in records):
                arrays.append(pa.nulls(n, f.type))
            else:
                vals: list = []
                for r in records:
                    vals.extend(
                        r.completions if r.completions is not None else [None] * r.batch_size
                    )
                arrays.append(pa.array(vals, type=f.type))
        elif name == Seq.TRUNCATED and any(r.seq[name] is None for r in records):
            vals = []
            for r in records:
                t = r.seq[name]
                vals.extend(t.tolist() if t is not None else [None] * r.batch_size)
            arrays.append(pa.array(vals, type=f.type))
        else:
            arr = np.concatenate([r.seq[name] for r in records])
            arrays.append(pa.array(arr.astype(_NUMPY[str(f.type)], copy=False), type=f.type))
    return pa.table(arrays, schema=sch)


def token_table(records: list[StepRecord]):
    """The token-table Arrow table, or None when no record sampled tokens."""
    import pyarrow as pa

    recs = [r for r in records if r.tokens]
    if not recs:
        return None
    sch = schema.token_schema()
    cols: dict[str, list] = {name: [] for name in sch.names}
    for r in recs:
        t = r.tokens
        k = len(t["group"])
        cols[Tok.SCHEMA_VERSION] += [SCHEMA_VERSION] * k
        cols[Tok.RUN_ID] += [r.run_id] * k
        cols[Tok.STEP] += [r.step] * k
        cols[Tok.RANK] += [r.rank] * k
        cols[Tok.GROUP] += t["group"]
        cols[Tok.SAMPLE] += t["sample"]
        cols[Tok.TOKEN_LOG_RATIOS] += t["token_log_ratios"]
        cols[Tok.ADVANTAGES] += t["advantages"]
        cols[Tok.TOKENS] += [None] * k
    return pa.table([pa.array(cols[f.name], type=f.type) for f in sch], schema=sch)


# ----------------------------------------------------------------------------- worker

_FLUSH, _CLOSE = "flush", "close"


class SinkWorker:
    """Runs one sink on a daemon thread; see the module docstring.

    Records wait in a bounded FIFO and the thread handles them in bursts: it wakes when a flush
    is due (every ``flush_interval_s``), when half the queue is full, or for a ``flush``/``close``
    command, then writes every waiting record and flushes if the sink asks. One wake-up per
    interval instead of one per step costs the training process less CPU (and fewer GIL hand-offs
    and cold caches); Parquet still flushes at least every ``flush_interval_s``.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        flush_interval_s: float = 5.0,
        queue_size: int = 1000,
        on_fault: FaultCallback | None = None,
    ):
        self.sink = sink
        self.name = getattr(sink, "name", type(sink).__name__)
        self.flush_interval_s = float(flush_interval_s)
        self.on_fault = on_fault
        self.disabled = False
        self.dropped = 0
        self.busy_since: float | None = None
        self.cpu_s: float | None = None  # the thread's CPU seconds, once it has ended
        self._maxsize = max(1, int(queue_size))
        self._wake_at = max(1, self._maxsize // 2)
        self._items: collections.deque = collections.deque()  # records and commands, FIFO
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"gspo-dash-{self.name}", daemon=True
        )
        self._closed = False
        self._started = False

    def start(self) -> SinkWorker:
        self._started = True
        self._thread.start()
        return self

    # -- caller side (training thread): never blocks
    def put(self, record: StepRecord) -> None:
        if self.disabled or self._closed:
            return
        n = len(self._items)  # (deque append/popleft/len are atomic: no lock needed)
        if n >= self._maxsize:
            self.dropped += 1
            if self.dropped == 1:
                self._fault(
                    "queue_full", "the sink fell behind; dropping steps until it catches up"
                )
            return
        self._items.append(record)
        if n + 1 >= self._wake_at:
            self._wake.set()

    def _command(self, item: tuple) -> None:
        self._items.append(item)  # never dropped, even when the queue is full
        self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Ask the sink to flush now; wait up to ``timeout`` s (None: forever). True if done."""
        done = threading.Event()
        if self.disabled or self._closed or not self._started:
            return True
        self._command((_FLUSH, done))
        return done.wait(timeout)

    def close(self, status: str, timeout: float | None = 60.0) -> bool:
        """Flush, close the sink and join; gives up after ``timeout`` s. True if it finished."""
        if self._closed:
            return not self._thread.is_alive()
        self._closed = True
        if not self._started:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        self._command((_CLOSE, status))
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._thread.join(remaining)
        if self._thread.is_alive():
            abort = getattr(self.sink, "abort", None)
            if callable(abort):  # e.g. stop the MLflow child process
                try:
                    abort()
                except Exception:  # noqa: BLE001
                    pass
            busy = self.busy_since
            how = f" (busy for {time.monotonic() - busy:.1f} s)" if busy is not None else ""
            self._fault(
                "hung", f"did not finish within {timeout} s{how}; abandoned, its thread is a daemon"
            )
            return False
        return True

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- the sink's thread
    def _fault(self, kind: str, message: str) -> None:
        if self.on_fault is not None:
            try:
                self.on_fault(self.name, kind, message)
                return
            except Exception:  # noqa: BLE001 -- the fault reporter must not kill the worker
                pass
        log.warning("gspo-dash %s sink: %s: %s", self.name, kind, message)

    def _call(self, kind: str, fn: Callable, *args: Any) -> bool:
        self.busy_since = time.monotonic()
        try:
            fn(*args)
            return True
        except BaseException as e:  # noqa: BLE001 -- a sink must never kill the worker
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            self._fault(kind, detail)
            return False
        finally:
            self.busy_since = None

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self.cpu_s = time.thread_time()  # this thread's CPU time, for overhead accounting

    def _write(self, record: StepRecord) -> None:
        self.sink.write(record.materialize())

    def _loop(self) -> None:
        if not self._call("open", self.sink.open):
            self.disabled = True
            self._drain()
            return
        next_flush = time.monotonic() + self.flush_interval_s
        while True:
            self._wake.wait(max(0.0, next_flush - time.monotonic()))
            self._wake.clear()  # (anything added after this is seen by the loop below)
            while self._items:
                item = self._items.popleft()
                if isinstance(item, StepRecord):
                    if self._call("write", self._write, item) and self.sink.should_flush():
                        self._call("flush", self.sink.flush)
                        next_flush = time.monotonic() + self.flush_interval_s
                elif item[0] == _FLUSH:
                    self._call("flush", self.sink.flush)
                    next_flush = time.monotonic() + self.flush_interval_s
                    item[1].set()
                elif item[0] == _CLOSE:
                    self._call("close", self.sink.close, item[1])
                    return
            if time.monotonic() >= next_flush:
                self._call("flush", self.sink.flush)
                next_flush = time.monotonic() + self.flush_interval_s

    def _drain(self) -> None:
        """A disabled sink: consume and discard until close, so flush/close callers return."""
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._items:
                item = self._items.popleft()
                if isinstance(item, tuple) and item[0] == _FLUSH:
                    item[1].set()
                elif isinstance(item, tuple) and item[0] == _CLOSE:
                    return
