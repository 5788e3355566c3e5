"""W&B's binary run file (``run-<id>.wandb``, beside ``files/``), read with no wandb package.

The file is W&B's datastore (its transaction log): a 7-byte header (``:W&B``, magic ``0xBEE1``
little-endian, version 0), then LevelDB log blocks of 32 KiB counted from the file's first byte.
Each chunk has a 7-byte header (checksum uint32, length uint16, type uint8: FULL 1, FIRST 2,
MIDDLE 3, LAST 4) and its payload; a block's last < 7 bytes are zero padding. The checksum is
CRC-32 (IEEE, zlib's) over the type byte and the payload, unmasked: wandb's Python writer
(``wandb/sdk/internal/datastore.py``: ``zlib.crc32(data, crc32(type))``) and wandb-core's
(``core/internal/transactionlog/writer.go``: ``CRCAlgoIEEE``) both write it; LevelDB's own masked
CRC-32C (``core/pkg/leveldb/crc.go``, ``CRCAlgoCustom``) is accepted too. A chunk header of
zeros is a zeroed (preallocated) block: skipped, not damage.

Each whole payload is a protobuf ``wandb.internal.Record``, decoded here by a small wire-format
reader (varint, 64-bit, length-delimited, 32-bit; groups refused) that reads only the fields
named below and skips every other. Field numbers from ``wandb/proto/wandb_internal.proto`` and
``wandb/proto/wandb_telemetry.proto`` of github:wandb/wandb at commit
b6e29505884ea60c79ca12091f1f75bd39d2f955 (2026-08-21):

* ``Record``: ``history`` 2, ``summary`` 3, ``config`` 5, ``telemetry`` 11, ``run`` 17,
  ``exit`` 18 (``num`` 1 is the record's number);
* ``HistoryRecord``: ``item`` 1 (``HistoryItem``: ``key`` 1, ``nested_key`` 2, ``value_json``
  16), ``step`` 2 (``HistoryStep.num`` 1); ``SummaryRecord`` / ``ConfigRecord``: ``update`` 1,
  ``remove`` 2, items as ``HistoryItem``;
* ``RunRecord``: ``run_id`` 1, ``entity`` 2, ``project`` 3, ``config`` 4, ``display_name`` 8,
  ``starting_step`` 14, ``start_time`` 17 (``google.protobuf.Timestamp``: ``seconds`` 1,
  ``nanos`` 2), ``resumed`` 18, ``telemetry`` 19;
* ``OutputRecord`` (``output`` 4) / ``OutputRawRecord`` (``output_raw`` 13): ``line`` 3, the
  console's text as the process wrote it (raw: pieces of lines, carriage returns kept);
* ``RunExitRecord``: ``exit_code`` 1 (int32); ``TelemetryRecord``: ``python_version`` 4,
  ``cli_version`` 5 (wandb's own version), ``huggingface_version`` 6.

What is kept: every history row (``_step``: W&B's own step counter; ``_runtime`` seconds since
the start and ``_timestamp`` the wall clock), its numeric values (JSON numbers, NaN and infinity
included; a nested value flattened with ``/``; media, tables and histograms counted and left
out), the summary's and config's last values, the run's id, project, name and start, the exit
code. A damaged chunk (bad checksum, a length past its block, an unknown type, a record missing
its FIRST or LAST part) loses the records it carried: the rest of its block is skipped and reading
resumes at the next block; a file cut mid-record keeps every record before the cut. Each damage
is counted (``Store.cut``: ``records_cut`` of the import), never silent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_hooks.importers import _end
from training_hooks.importers._crc import masked_crc32c
from training_hooks.importers._read import SourceLog, as_step, merge_by_step
from training_hooks.importers._sniff import HEADER_LEN, is_store
from training_hooks.importers._spec import Settings
from training_hooks.importers._text import clean
from training_hooks.names import few
from training_hooks.tool_settings import Setting

# ----------------------------------------------------------------------------- the datastore

BLOCK_LEN = 32 * 1024
CHUNK_HEADER = struct.Struct("<IHB")
CHUNK_HEADER_LEN = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
#: The largest .wandb file read (a larger one is refused, never read in part silently).
MAX_BYTES = 2_000_000_000

# ----------------------------------------------------------------------------- protobuf fields

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5

RECORD_NUM = 1
RECORD_HISTORY = 2
RECORD_SUMMARY = 3
RECORD_OUTPUT = 4
RECORD_CONFIG = 5
RECORD_TELEMETRY = 11
RECORD_OUTPUT_RAW = 13
RECORD_RUN = 17
RECORD_EXIT = 18

HISTORY_ITEM = 1
HISTORY_STEP = 2
HISTORY_STEP_NUM = 1
ITEM_KEY = 1
ITEM_NESTED_KEY = 2
ITEM_VALUE_JSON = 16
UPDATE = 1  # SummaryRecord / ConfigRecord
REMOVE = 2

RUN_ID = 1
RUN_ENTITY = 2
RUN_PROJECT = 3
RUN_CONFIG = 4
RUN_DISPLAY_NAME = 8
RUN_STARTING_STEP = 14
RUN_START_TIME = 17
RUN_RESUMED = 18
RUN_TELEMETRY = 19
TIMESTAMP_SECONDS = 1
TIMESTAMP_NANOS = 2

EXIT_CODE = 1
OUTPUT_TIME = 2  # OutputRecord / OutputRawRecord: output_type 1, timestamp 2, line 3
OUTPUT_LINE = 3

TELEMETRY_PYTHON_VERSION = 4
TELEMETRY_CLI_VERSION = 5
TELEMETRY_HF_VERSION = 6

#: History keys W&B adds to every row.
STEP_KEY = "_step"
RUNTIME_KEY = "_runtime"
TIMESTAMP_KEY = "_timestamp"


class ProtoError(ValueError):
    """A payload that is no valid protobuf message."""


@dataclass(frozen=True)
class Row:
    """One history record: W&B's ``_step``, its numeric values, its clock."""

    record: int  # the record's number among the records read (1-based)
    step: int | None
    values: Mapping[str, float | int]
    timestamp: float | None
    runtime: float | None


@dataclass
class Store:
    """What a .wandb file holds (module docstring)."""

    file: Path
    rows: list[Row] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    entity: str | None = None
    project: str | None = None
    display_name: str | None = None
    start_time: float | None = None
    starting_step: int | None = None
    resumed: bool = False
    exit_code: int | None = None
    exit_record: int | None = None  # the exit record's number
    wandb_version: str | None = None
    python_version: str | None = None
    huggingface_version: str | None = None
    records: int = 0  # whole records read
    cut: list[dict[str, Any]] = field(default_factory=list)  # damage, as records_cut
    skipped_values: dict[str, int] = field(default_factory=dict)  # non-numeric key -> count
    bad_records: int = 0  # whole records whose protobuf did not decode
    # the console's pieces: (record, its time (seconds since the epoch) or None, text)
    console: list[tuple[int, float | None, str]] = field(default_factory=list)  # output_raw
    console_cooked: list[tuple[int, float | None, str]] = field(default_factory=list)  # output

    @property
    def metric_rows(self) -> list[Row]:
        """The history rows holding a value other than W&B's own."""
        return [r for r in self.rows if r.values]


# ----------------------------------------------------------------------------- wire format


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtoError("varint cut at the end of the message")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtoError("varint longer than 10 bytes")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field of message ``buf``: an int for varint and
    fixed fields, the bytes of a length-delimited one. ProtoError on a malformed message."""
    pos = 0
    n = len(buf)
    while pos < n:
        tag, pos = _varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        if num == 0:
            raise ProtoError("field number 0")
        if wire == VARINT:
            value, pos = _varint(buf, pos)
            yield num, wire, value
        elif wire == FIXED64:
            if pos + 8 > n:
                raise ProtoError("64-bit field cut")
            yield num, wire, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == LEN:
            size, pos = _varint(buf, pos)
            if pos + size > n:
                raise ProtoError("length-delimited field past the end of the message")
            yield num, wire, bytes(buf[pos : pos + size])
            pos += size
        elif wire == FIXED32:
            if pos + 4 > n:
                raise ProtoError("32-bit field cut")
            yield num, wire, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise ProtoError(f"wire type {wire} (groups are not written by W&B)")


def _int64(v: int) -> int:
    """A varint read as a signed 64-bit integer (int32/int64: negatives are 10-byte varints)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(v: int | bytes) -> str:
    return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else ""


# ----------------------------------------------------------------------------- chunks


def _crc_ok(kind: int, data: bytes, crc: int) -> bool:
    if zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF == crc:
        return True
    return masked_crc32c(bytes([kind]) + data) == crc


def payloads(buf: bytes, cut: list[dict[str, Any]]) -> Iterator[bytes]:
    """The whole payloads of datastore ``buf`` (past its header), in order; each damage is
    appended to ``cut`` as ``{"line": the next record's number, "step": None, "kept": 0,
    "reason": ...}`` and reading resumes at the next block."""
    pos = HEADER_LEN
    n = len(buf)
    pending: bytearray | None = None
    whole = 0  # payloads yielded

    def damage(why: str) -> None:
        cut.append({"line": whole + 1, "step": None, "kept": 0, "reason": why})

    while pos < n:
        block_end = (pos // BLOCK_LEN + 1) * BLOCK_LEN
        if block_end - pos < CHUNK_HEADER_LEN:  # the block's trailer: zero padding
            pos = block_end
            continue
        if pos + CHUNK_HEADER_LEN > n:
            if any(buf[pos:n]):
                damage(f"the file ends inside a chunk header at byte {pos:,}")
            pending = None
            break
        crc, length, kind = CHUNK_HEADER.unpack_from(buf, pos)
        if crc == 0 and length == 0 and kind == 0:  # a zeroed (preallocated) block
            if pending is not None:
                damage(f"a record's FIRST part is not followed by the rest (byte {pos:,})")
                pending = None
            pos = block_end
            continue
        end = pos + CHUNK_HEADER_LEN + length
        if end > block_end:
            damage(f"a chunk at byte {pos:,} is longer than its block: the block is skipped")
            pending, pos = None, block_end
            continue
        if end > n:
            damage(f"the file is cut inside a record at byte {pos:,} (of {n:,})")
            pending = None
            break
        data = bytes(buf[pos + CHUNK_HEADER_LEN : end])
        if kind not in (FULL, FIRST, MIDDLE, LAST) or not _crc_ok(kind, data, crc):
            why = "bad checksum" if kind in (FULL, FIRST, MIDDLE, LAST) else f"chunk type {kind}"
            damage(f"{why} at byte {pos:,}: the rest of its block is skipped")
            pending, pos = None, block_end
            continue
        pos = end
        if kind in (FULL, FIRST) and pending is not None:
            damage(f"a record's FIRST part is not followed by its LAST (byte {pos:,})")
            pending = None
        if kind == FULL:
            whole += 1
            yield data
        elif kind == FIRST:
            pending = bytearray(data)
        elif pending is None:
            damage(f"a record's {'MIDDLE' if kind == MIDDLE else 'LAST'} part without its FIRST")
        elif kind == MIDDLE:
            pending += data
        else:
            whole += 1
            yield bytes(pending + data)
            pending = None
    if pending is not None:
        damage("the file ends inside a record (its LAST part is missing)")


# ----------------------------------------------------------------------------- records


def _item(buf: bytes) -> tuple[str, Any] | None:
    """A History/Summary/ConfigItem: (key, value) with nested keys joined by "/"; None when its
    value is no JSON."""
    key = ""
    nested: list[str] = []
    raw = ""
    for num, _, v in fields(buf):
        if num == ITEM_KEY:
            key = _text(v)
        elif num == ITEM_NESTED_KEY:
            nested.append(_text(v))
        elif num == ITEM_VALUE_JSON:
            raw = _text(v)
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return ("/".join(nested) if nested else key), value


def _numbers(key: str, value: Any, out: dict[str, float | int], skipped: dict[str, int]) -> None:
    """``value`` of history key ``key`` into ``out``: numbers kept (bools as 0/1), a mapping
    flattened with "/" unless it is a W&B media object (``_type``), anything else counted."""
    if isinstance(value, bool):
        out[key] = int(value)
    elif isinstance(value, int | float):
        out[key] = value
    elif isinstance(value, Mapping) and "_type" not in value:
        for k, v in value.items():
            _numbers(f"{key}/{k}", v, out, skipped)
    else:
        skipped[key] = skipped.get(key, 0) + 1


def _history(store: Store, buf: bytes) -> None:
    values: dict[str, Any] = {}
    step_num: int | None = None
    for num, _, v in fields(buf):
        if num == HISTORY_ITEM and isinstance(v, bytes):
            got = _item(v)
            if got is not None:
                values[got[0]] = got[1]
        elif num == HISTORY_STEP and isinstance(v, bytes):
            for n2, w2, s in fields(v):
                if n2 == HISTORY_STEP_NUM and w2 == VARINT and isinstance(s, int):
                    step_num = _int64(s)
    step = values.pop(STEP_KEY, step_num)
    runtime = values.pop(RUNTIME_KEY, None)
    stamp = values.pop(TIMESTAMP_KEY, None)
    kept: dict[str, float | int] = {}
    for k, value in values.items():
        _numbers(k, value, kept, store.skipped_values)
    store.rows.append(
        Row(
            store.records,
            step if isinstance(step, int) and not isinstance(step, bool) else step_num,
            kept,
            float(stamp) if _finite(stamp) else None,
            float(runtime) if _finite(runtime) else None,
        )
    )


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _updates(target: dict[str, Any], buf: bytes) -> None:
    """A SummaryRecord / ConfigRecord applied to ``target`` (update, then remove)."""
    for num, _, v in fields(buf):
        if not isinstance(v, bytes):
            continue
        got = _item(v)
        if got is None:
            continue
        if num == UPDATE:
            target[got[0]] = got[1]
        elif num == REMOVE:
            target.pop(got[0], None)


def _telemetry(store: Store, buf: bytes) -> None:
    for num, _, v in fields(buf):
        if num == TELEMETRY_CLI_VERSION and _text(v):
            store.wandb_version = _text(v)
        elif num == TELEMETRY_PYTHON_VERSION and _text(v):
            store.python_version = _text(v)
        elif num == TELEMETRY_HF_VERSION and _text(v):
            store.huggingface_version = _text(v)


def _run(store: Store, buf: bytes) -> None:
    for num, wire, v in fields(buf):
        if num == RUN_ID:
            store.run_id = _text(v) or store.run_id
        elif num == RUN_ENTITY:
            store.entity = _text(v) or store.entity
        elif num == RUN_PROJECT:
            store.project = _text(v) or store.project
        elif num == RUN_DISPLAY_NAME:
            store.display_name = _text(v) or store.display_name
        elif num == RUN_STARTING_STEP and wire == VARINT and isinstance(v, int):
            store.starting_step = _int64(v)
        elif num == RUN_RESUMED and wire == VARINT:
            store.resumed = bool(v)
        elif num == RUN_CONFIG and isinstance(v, bytes):
            _updates(store.config, v)
        elif num == RUN_TELEMETRY and isinstance(v, bytes):
            _telemetry(store, v)
        elif num == RUN_START_TIME and isinstance(v, bytes):
            store.start_time = _timestamp(v) or store.start_time


def _timestamp(buf: bytes) -> float | None:
    """A ``google.protobuf.Timestamp``: seconds since the epoch (None when not after it)."""
    secs = nanos = 0
    for num, wire, t in fields(buf):
        if num == TIMESTAMP_SECONDS and wire == VARINT and isinstance(t, int):
            secs = _int64(t)
        elif num == TIMESTAMP_NANOS and wire == VARINT and isinstance(t, int):
            nanos = _int64(t)
    return secs + nanos / 1e9 if secs > 0 else None


def _exit(store: Store, buf: bytes) -> None:
    code = 0  # proto3: an exit_code of 0 is not written
    for num, wire, v in fields(buf):
        if num == EXIT_CODE and wire == VARINT and isinstance(v, int):
            code = _int64(v)
    store.exit_code = code
    store.exit_record = store.records


def _record(store: Store, buf: bytes) -> None:
    for num, _, v in fields(buf):
        if not isinstance(v, bytes):
            continue
        if num == RECORD_HISTORY:
            _history(store, v)
        elif num == RECORD_SUMMARY:
            _updates(store.summary, v)
        elif num == RECORD_CONFIG:
            _updates(store.config, v)
        elif num == RECORD_RUN:
            _run(store, v)
        elif num == RECORD_EXIT:
            _exit(store, v)
        elif num in (RECORD_OUTPUT_RAW, RECORD_OUTPUT):
            text, when = "", None
            for n2, _, x in fields(v):
                if n2 == OUTPUT_LINE:
                    text += _text(x)
                elif n2 == OUTPUT_TIME and isinstance(x, bytes):
                    when = _timestamp(x)
            target = store.console if num == RECORD_OUTPUT_RAW else store.console_cooked
            target.append((store.records, when, text))
        elif num == RECORD_TELEMETRY:
            _telemetry(store, v)


def read_store(file: Path) -> Store:
    """Every record of the .wandb ``file`` (module docstring); ValueError when it is no W&B
    datastore or larger than ``MAX_BYTES``."""
    size = file.stat().st_size
    if size > MAX_BYTES:
        raise ValueError(f"{file} is {size:,} bytes, over the {MAX_BYTES:,} read")
    buf = file.read_bytes()
    if not is_store(buf[:HEADER_LEN]):
        raise ValueError(f"{file} is no W&B datastore (no ':W&B' header)")
    store = Store(file)
    for data in payloads(buf, store.cut):
        store.records += 1
        try:
            _record(store, data)
        except (ProtoError, RecursionError) as e:
            store.bad_records += 1
            store.cut.append(
                {"line": store.records, "step": None, "kept": 0, "reason": f"not a record ({e})"}
            )
    store.config = _plain_config(store.config)
    return store


def _plain_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Config values as the run set them: W&B's internal ``_wandb`` key dropped, a
    ``{"value": X}`` wrapper (config.yaml's form) unwrapped."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if k.startswith("_"):
            continue
        if isinstance(v, Mapping) and set(v) <= {"value", "desc"} and "value" in v:
            v = v["value"]
        out[k] = v
    return out


def find_store(run: Path) -> Path | None:
    """The ``run-<id>.wandb`` of W&B run folder ``run`` (the only ``*.wandb`` there)."""
    found = sorted(p for p in run.glob("*.wandb") if p.is_file())
    return found[0] if len(found) == 1 else None


# ----------------------------------------------------------------------------- its console

#: W&B's warning on a log call whose step is below the run's current step: W&B writes none of
#: that call's values ("Tried to log to step 0 that is less than the current step 2. Steps must
#: be monotonically increasing, so this data will be ignored."; wandb >= 0.10).
IGNORED_STEP = re.compile(
    r"Tried to log to step (?P<step>\d+) that is less than the current step (?P<current>\d+)"
)
_BREAKS = re.compile(r"\r\n|\n|\r")


def console_lines(store: Store) -> list[tuple[int, float | None, str]]:
    """The console W&B kept in the file (``output_raw``, else ``output`` records), as lines:
    (the number of the record that ends the line, that record's time, its text). The pieces are
    joined in order and split at line breaks (a carriage return too: a progress bar's redraws are
    lines of their own); a last piece with no break is a line."""
    out: list[tuple[int, float | None, str]] = []
    part = ""
    rec, when = 0, None
    for rec, when, text in store.console or store.console_cooked:
        pieces = _BREAKS.split(part + text)
        part = pieces.pop()
        out.extend((rec, when, p) for p in pieces)
    if part:
        out.append((rec, when, part))
    return out


@dataclass(frozen=True)
class ConsoleEnd:
    """What the console says of the end (``console_end``)."""

    sign: _end.Sign | None = None  # the error or interrupt it ends on, after the last history row
    loop_end: str = ""  # the loop's own end-of-training line after it, with where it is
    note: str = ""  # an error not taken as the end (``_end.Signs.verdict``)


def console_end(store: Store, lines: list[tuple[int, float | None, str]]) -> ConsoleEnd:
    """The console's lines after the last history row, read as a text log's (``_end.Signs``):
    an error or an interrupt there before any end-of-training line of the loop's own
    (``_end.LOOP_END``) is how the process ended; such a line is the end of training. "After"
    by the clock where the row and the lines carry one (W&B writes a step's row when the next
    step begins or the run finishes: after the console's last words, by record order), else by
    record order."""
    rows = store.metric_rows
    if not lines or not rows:
        return ConsoleEnd()
    signs = _end.Signs(loop_end=True)
    row = rows[-1]
    last = 0  # the console's last line at (or before) the last history row
    for i, (rec, when, text) in enumerate(lines, 1):
        signs.feed(clean(i, text, True))
        by_clock = row.timestamp is not None and when is not None
        if (when <= row.timestamp) if by_clock else (rec < row.record):  # type: ignore[operator]
            last = i
    got = signs.loop_end_after(last, len(lines))
    sign, note = signs.verdict(1, last, len(lines), got[0] if got else None)
    where = f"the console W&B kept in {store.file.name}"
    if sign is not None:
        sign = dataclasses.replace(sign, what=f"{sign.what}, in {where}")
    ended = f'the loop\'s end line "{got[1]}" (line {got[0]:,} of {where})' if got else ""
    return ConsoleEnd(sign, ended if sign is None else "", note)


def ignored_steps(store: Store, lines: list[tuple[int, float | None, str]]) -> list[dict[str, Any]]:
    """Each log call W&B refused (``IGNORED_STEP`` in its console): its values are not in the
    file. As ``records_cut`` entries marked ``"dropped": True`` (the run's logger dropped them,
    not the import: Health's ``steps_dropped``): ``{"line": the console line, "step": the step
    asked, "kept": 0, "dropped": True, "reason": ...}``."""
    out = []
    for i, (_, _, text) in enumerate(lines, 1):
        m = IGNORED_STEP.search(text)
        if m is not None:
            step, current = int(m.group("step")), int(m.group("current"))
            out.append(
                {
                    "line": i,
                    "step": step,
                    "kept": 0,
                    "dropped": True,
                    "reason": f"W&B ignored a log call (step {step} below its current step "
                    f"{current}: none of its values were written; console of {store.file.name})",
                }
            )
    return out


# ----------------------------------------------------------------------------- as a SourceLog

#: The trainer's own step counter in a history row, per tool (TRL: the Trainer's
#: ``train/global_step``; verl logs with ``step=global_step``, so W&B's ``_step`` is its step).
TRAINER_STEP = {"trl": "train/global_step"}
#: Planned-end keys of a loop's own config (its names vary): steps, then epochs.
OWN_PLANNED = ("max_steps", "total_steps", "total_training_steps", "num_train_epochs")


def has_history(store: Store) -> bool:
    """The file holds per-step metrics (history rows with a value of the run's own)."""
    return bool(store.metric_rows)


def end_evidence(
    store: Store,
    settings: Mapping[str, Setting],
    last: int | None,
    epoch: float | None,
    window: int = 1,
) -> _end.Evidence:
    """How the run ended, by the .wandb: the planned end its settings state, the last step its
    history logged, its exit record and its console (``console_end``). ``exit_code`` 0: the
    process exited cleanly, which is the end of training where the console holds the loop's own
    end line after the last row or no planned end is stated (a loop that breaks out early exits
    0 too: a stated plan decides). Non-zero: it failed, unless its console ends on an interrupt
    (Ctrl-C: ``KeyboardInterrupt`` exits 255), a stop asked for; the console's error, where it
    names one, is quoted before the bare code. No exit record (a process killed, a copy taken
    while it ran): the console's last error, else the plan decides, never "finished" without
    evidence."""
    name = store.file.name
    planned = _end.from_settings(settings, last, epoch)
    reached = [_end.Reached(last, f"{name}: its last history row")] if last is not None else []
    con = console_end(store, console_lines(store))
    end_line = note = ""
    crash = None
    said = f"W&B's exit record, exit_code {store.exit_code} (record {store.exit_record or 0:,} of {name})"
    if store.exit_code == 0:
        if con.loop_end:
            end_line = f"{con.loop_end}; {said}"
        elif any(p.steps is not None for p in planned):
            note = f"{said}: the process exited cleanly; the planned end decides"
        else:
            end_line = said
    elif con.sign is not None:
        crash = con.sign
        if store.exit_code is not None:
            crash = dataclasses.replace(crash, what=f"{crash.what}; {said}")
    elif store.exit_code is not None:
        crash = _end.Sign(
            store.exit_record or 0,
            f"exit_code {store.exit_code}",
            f"the record number in {name}: W&B's exit record, the process failed",
            "W&B exit code",
        )
    return _end.Evidence(
        planned=tuple(planned),
        reached=tuple(reached),
        end_line=end_line,
        window=max(window, 1),
        crash=crash,
        note="; ".join(n for n in (note, con.note) if n),
    )


def _wall_clock(rows: list[tuple[int, Row]]) -> dict[int, float]:
    return {s: r.timestamp for s, r in rows if r.timestamp is not None}


def tool_log(run: Path, store: Store, tool: str, settings: Settings) -> SourceLog:
    """The history of ``store`` as ``tool`` ("trl", "verl") logged it: TRL's names turned back
    into the Trainer's (``train/loss`` -> ``loss``, ``eval/loss`` -> ``eval_loss``, as for its
    TensorBoard events), the step its trainer's counter (TRL ``train/global_step``; verl's
    ``_step``, which verl sets to its global step); rows of one step merged."""
    from training_hooks.importers.tfevents import _name

    step_key = TRAINER_STEP.get(tool)
    rows: list[tuple[int, Row]] = []
    records: list[tuple[int, dict[str, Any]]] = []
    by_w: list[str] = []
    for r in store.metric_rows:
        own = r.values.get(step_key) if step_key else None
        step = as_step(own) if own is not None else r.step
        if step is None:
            continue
        if step_key and own is None:
            by_w.append(str(r.record))
        metrics = {
            (_name(k, tool) if tool == "trl" else k): v
            for k, v in r.values.items()
            if k != step_key
        }
        rows.append((step, r))
        records.append((step, metrics))
    if not records:
        raise ValueError(f"{store.file} holds no history row with a step")
    merged = merge_by_step(records)
    last = max(merged.steps)
    epochs = [m["epoch"] for _, m in records if _finite(m.get("epoch"))]
    window = settings.get("logging_steps")
    w = window.value if window is not None and isinstance(window.value, int) else 1
    end = end_evidence(store, settings, last, float(epochs[-1]) if epochs else None, w)
    notes = [
        f"read {store.file.name} (W&B's binary run file): {store.records:,} records, "
        f"{len(store.metric_rows):,} history rows with metrics, {len(merged.steps):,} steps"
        + (f"; wandb {store.wandb_version}" if store.wandb_version else ""),
        (
            f"the step: {step_key} of each row (the trainer's counter; W&B's _step counts log calls)"
            if step_key
            else f"the step: W&B's _step ({tool} logs with step=its global step)"
        ),
    ]
    if by_w:
        notes.append(f"{len(by_w)} rows without {step_key} placed at W&B's _step")
    notes += _store_notes(store, merged.duplicate_steps)
    return SourceLog(
        tool=tool,
        file=store.file,
        name=store.display_name or run.name,
        steps=merged.steps,
        lines=store.records,
        duplicate_steps=merged.duplicate_steps,
        settings=settings,
        summary=dict(store.summary),
        started_at=store.start_time,
        last_timestamp=max(_wall_clock(rows).values(), default=None),
        file_format="W&B run file (.wandb) in a W&B run folder",
        notes=tuple(notes),
        wall_clock=_wall_clock(rows),
        wall_clock_text=f"{store.file.name}: each history row's _timestamp",
        end=end,
        records_cut=(*store.cut, *ignored_steps(store, console_lines(store))),
        config=dict(store.config),
    )


def _store_notes(store: Store, duplicates: tuple[int, ...]) -> list[str]:
    out = []
    if store.skipped_values:
        keys = sorted(store.skipped_values)
        out.append(
            f"{len(keys)} history keys hold no number (media, tables, text) and are not read: "
            + few(keys, 6)
        )
    if duplicates:
        out.append(
            f"{len(duplicates)} steps are logged by several history rows "
            f"({few([str(s) for s in duplicates], 8)}): for each key the later value is kept"
        )
    if store.cut:
        out.append(
            f"{len(store.cut)} damaged or cut places in {store.file.name}: the records there are "
            "lost, every record before and after them read"
        )
    if store.exit_code is None:
        out.append(f"{store.file.name} holds no exit record (the run was killed or still running)")
    return out


#: What every W&B run of a tool logs: TRL's (HF's ``WandbCallback``) ``train/global_step`` on each
#: log call; verl's metric sections. A history with none of it is a loop's own run that used W&B,
#: not the tool's (``logs_tool``).
TOOL_SIGNS: dict[str, tuple[str, ...]] = {
    "trl": ("train/global_step",),
    "verl": ("actor/", "critic/", "response_length/", "timing_s/", "training/global_step"),
}
#: W&B's section of the training split (its panels group ``train/x``): the name after it carries
#: the meaning.
TRAIN_SECTIONS = ("train/", "training/")
#: Sections of values that are no training step's (held-out evaluation, end-of-run summaries):
#: a key there is never guessed as a training meaning (``eval/reward`` is not the reward).
OTHER_SECTIONS = ("eval", "evaluation", "val", "valid", "validation", "test", "final", "best")


def logs_tool(store: Store, tool: str) -> bool:
    """The history holds a key every W&B run of ``tool`` logs (``TOOL_SIGNS``; True for a tool
    with none listed)."""
    signs = TOOL_SIGNS.get(tool)
    if not signs:
        return True
    return any(k.startswith(signs) for r in store.metric_rows for k in r.values)


def _guesses(keys: list[str], key_map: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """``text_log.guesses`` with a training section dropped from a key (``train/reward_mean`` is
    guessed as ``reward_mean``) where no key of that name is logged as well; keys of an
    evaluation or summary section (``OTHER_SECTIONS``) not guessed."""
    from training_hooks.importers import keymap, text_log

    plain = set(keys)
    alias = {}
    for k in keys:
        sec = next((s for s in TRAIN_SECTIONS if k.startswith(s)), None)
        base = k[len(sec) :] if sec else k
        alias[k if base != k and (base in plain or base in alias) else base] = k
    guessed = [
        a for a, k in alias.items() if "/" not in k or k.split("/")[0].lower() not in OTHER_SECTIONS
    ]
    meaning, record = text_log.guesses(guessed, key_map or keymap.KeyMap())
    back = {alias.get(k, k): c for k, c in meaning.items()}
    for said in record.values():
        if (
            isinstance(said, dict)
            and said.get("key") in alias
            and alias[said["key"]] != said["key"]
        ):
            said["key"] = alias[said["key"]]
            said["from"] = f"{said.get('from', '')}; W&B's training section ({said['key']}) dropped"
    return back, record


def own_log(path: Path, tool: str, key_map: Any, store: Store | None = None) -> SourceLog:
    """A loop's own W&B run (the ``jsonl`` / ``text`` imports, or a ``trl`` / ``verl`` one whose
    history holds none of the tool's keys: ``logs_tool``): every numeric history key kept under
    its own name, W&B's ``_step`` the step (``--step KEY`` names another), each key's meaning
    guessed from its name (``text_log.guesses``: the text importer's table, recorded as guessed,
    a training section ``train/`` dropped first; ``--map`` overrides)."""
    from training_hooks.importers import keymap

    run = path.parent if path.is_file() else path
    file = path if path.is_file() else find_store(run)
    if file is None:
        raise ValueError(f"{path} holds no single run-<id>.wandb")
    store = store if store is not None and store.file == file else read_store(file)
    rows = tuple(
        (r.record, {STEP_KEY: r.step, **r.values}) for r in store.metric_rows if r.step is not None
    )
    records = keymap.Records(rows, (), None, store.records, "W&B run file (.wandb)")
    log = keymap.keymap_log(
        tool, file, records, key_map, default_step=STEP_KEY, default_origin="W&B's _step"
    )
    keys = list(dict.fromkeys(k for _, r in rows for k in r if k != (key_map and key_map.step)))
    meaning, record = _guesses([k for k in keys if k != STEP_KEY], key_map)
    settings = dict(log.settings)
    for k in OWN_PLANNED:
        if k in store.config and k not in settings:
            name = "max_steps" if k == "total_steps" else k
            settings.setdefault(name, Setting(store.config[k], f"{file.name} config: {k}"))
    stamps = {
        s: r.timestamp for r in store.metric_rows if (s := r.step) is not None and r.timestamp
    }
    last = max(log.steps) if log.steps else None
    epoch = next(
        (
            float(m["epoch"])
            for _, m in sorted(log.steps.items(), reverse=True)
            if _finite(m.get("epoch"))
        ),
        None,
    )
    return dataclasses.replace(
        log,
        name=store.display_name or run.name,
        settings=settings,
        config=dict(store.config),
        summary=dict(store.summary),
        started_at=store.start_time,
        wall_clock=stamps if (key_map is None or key_map.step is None) else {},
        wall_clock_text=f"{file.name}: each history row's _timestamp",
        end=end_evidence(store, settings, last, epoch),
        records_cut=(*store.cut, *ignored_steps(store, console_lines(store))),
        key_map=meaning,
        key_record={**log.key_record, "map": record},
        notes=(
            f"read {file.name} (W&B's binary run file): {store.records:,} records, "
            f"{len(rows):,} history rows with metrics",
            *log.notes,
            *_store_notes(store, ()),
        ),
    )
