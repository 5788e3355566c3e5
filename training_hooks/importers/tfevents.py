"""TensorBoard event files (``events.out.tfevents.*``: TRL's ``report_to="tensorboard"``, verl's
``trainer.logger=[...,'tensorboard']``) -> a SourceLog.

An event file is a TFRecord stream: each record is its length, the length's masked CRC32C, an
``Event`` protobuf and its CRC. The records are framed and checked here, so that a damaged one
(its CRC wrong, or not an Event) is skipped and counted while the rest is read, and damage to a
length is stepped over by finding the next valid record; TensorBoard's own loader stops at the
first damaged record without a word, which would drop the rest of the run silently. The Events
are decoded with TensorBoard's own protobuf classes: the optional ``tensorboard`` extra
(``pip install 'gspo-dash[tensorboard]'``), named in the error when it is missing.

Scalars only (``simple_value``, or a one-element numeric tensor as newer writers store them); a
histogram, image or text is not a metric (TRL's ``args`` text is the run's settings and is read as
such). transformers' TensorBoard callback prefixes every name (``train/loss``, ``eval/loss``):
for TRL the names are turned back into the Trainer's own (``loss``, ``eval_loss``), so a metric
means the same here as in ``trainer_state.json``. Each step's wall time is the event file's own
clock (when its last event was written).
"""

from __future__ import annotations

import json
import mmap
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_hooks.importers import _end, trl_state
from training_hooks.importers._crc import masked_crc32c
from training_hooks.importers._read import SourceLog, merge_by_step
from training_hooks.importers._segments import Record, choose, segment_notes, split_by_step
from training_hooks.importers._spec import Settings
from training_hooks.tool_settings import read_settings

FILE_FORMAT = "TensorBoard event file"
EXTRA = "tensorboard"
INSTALL = "pip install 'gspo-dash[tensorboard]'"
MAX_FILE_BYTES = 4_000_000_000
MAX_RECORD_BYTES = 256 * 1024 * 1024  # a longer "length" is damage, not a record
TRL_SUMMARY = (*trl_state.SUMMARY_KEYS, "train_loss", "total_flos")
#: TensorFlow's DataType numbers -> how a value of that type is packed in ``tensor_content``.
_PACKED = {1: "<f", 2: "<d", 3: "<i", 4: "<B", 5: "<h", 6: "<b", 9: "<q", 10: "<?", 19: "<e"}
_BFLOAT16 = 14
_TEXT = 7  # DT_STRING


def event_pb2() -> Any:
    """TensorBoard's ``Event`` protobuf class; a ValueError naming the extra when it is missing."""
    try:
        from tensorboard.compat.proto import event_pb2 as module
    except ImportError as e:
        raise ValueError(
            f"reading a {FILE_FORMAT} needs TensorBoard's event reader, the optional '{EXTRA}' "
            f"extra, which is not installed: {INSTALL}"
        ) from e
    return module


@dataclass
class Framing:
    """What the TFRecord framing found besides the records."""

    records: int = 0
    damaged: list[dict[str, Any]] = field(default_factory=list)  # {"record": n, "reason": ...}
    truncated: int | None = None  # the number of a last record cut short


def frames(buf: bytes | mmap.mmap, found: Framing) -> Iterator[tuple[int, bytes]]:
    """(record number, payload) of every intact record; damage goes to ``found``."""
    pos, n, k = 0, len(buf), 0
    while pos < n:
        k += 1
        if n - pos < 12:
            found.truncated = k
            return
        header = bytes(buf[pos : pos + 8])
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", buf[pos + 8 : pos + 12])
        if masked_crc32c(header) != crc or length > MAX_RECORD_BYTES:
            nxt = _resync(buf, pos + 1)
            found.damaged.append(
                {
                    "record": k,
                    "reason": f"a damaged length at byte {pos}: {nxt - pos} bytes skipped",
                }
            )
            pos = nxt
            continue
        end = pos + 12 + length + 4
        if end > n:
            found.truncated = k
            return
        data = bytes(buf[pos + 12 : pos + 12 + length])
        (dcrc,) = struct.unpack("<I", buf[end - 4 : end])
        pos = end
        if masked_crc32c(data) != dcrc:
            found.damaged.append({"record": k, "reason": "its CRC does not match its bytes"})
            continue
        found.records += 1
        yield k, data


def _resync(buf: bytes | mmap.mmap, start: int) -> int:
    """The next offset holding a valid record header (its length's CRC matches), else the end."""
    for pos in range(start, len(buf) - 11):
        header = bytes(buf[pos : pos + 8])
        if (
            struct.unpack("<Q", header)[0] <= MAX_RECORD_BYTES
            and masked_crc32c(header) == struct.unpack("<I", buf[pos + 8 : pos + 12])[0]
        ):
            return pos
    return len(buf)


def scalar(tensor: Any) -> float | None:
    """A one-element numeric TensorProto as float, else None."""
    dtype = tensor.dtype
    for name in ("float_val", "double_val", "int_val", "int64_val", "bool_val"):
        vals = getattr(tensor, name)
        if len(vals) == 1:
            return float(vals[0])
    if len(tensor.half_val) == 1:
        bits = int(tensor.half_val[0]) & 0xFFFF
        if dtype == _BFLOAT16:
            return float(struct.unpack("<f", struct.pack("<I", bits << 16))[0])
        return float(struct.unpack("<e", struct.pack("<H", bits))[0])
    content = bytes(tensor.tensor_content)
    if dtype == _BFLOAT16 and len(content) == 2:
        return float(struct.unpack("<f", b"\0\0" + content)[0])
    fmt = _PACKED.get(dtype)
    if fmt and content and len(content) == struct.calcsize(fmt):
        return float(struct.unpack(fmt, content)[0])
    return None


@dataclass
class Events:
    records: list[Record] = field(default_factory=list)
    clock: dict[int, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # tag -> text (TRL's args)
    other: set[str] = field(default_factory=set)  # tags that are no scalar
    first_time: float | None = None
    framing: Framing = field(default_factory=Framing)
    undecodable: list[dict[str, Any]] = field(default_factory=list)


def scan(file: Path, tool: str) -> Events:
    size = file.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{file} is {size:,} bytes, more than the {MAX_FILE_BYTES:,} read")
    proto = event_pb2()
    out = Events()
    if size == 0:
        return out
    with open(file, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        for k, data in frames(buf, out.framing):
            try:
                ev = proto.Event.FromString(data)
            except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
                out.undecodable.append(
                    {"record": k, "reason": f"not an Event ({type(e).__name__})"}
                )
                continue
            _event(ev, k, tool, out)
    return out


def _event(ev: Any, k: int, tool: str, out: Events) -> None:
    out.first_time = ev.wall_time if out.first_time is None else out.first_time
    metrics: dict[str, float] = {}
    for v in ev.summary.value:
        kind = v.WhichOneof("value")
        x = (
            v.simple_value
            if kind == "simple_value"
            else scalar(v.tensor)
            if kind == "tensor"
            else None
        )
        if kind == "tensor" and v.tensor.dtype == _TEXT and len(v.tensor.string_val) == 1:
            out.texts[v.tag] = v.tensor.string_val[0].decode("utf-8", errors="replace")
        elif x is None:
            out.other.add(v.tag)
        else:
            metrics[_name(v.tag, tool)] = float(x)
    if metrics:
        step = int(ev.step)
        out.records.append(Record(k, step, metrics))
        out.clock[step] = max(out.clock.get(step, ev.wall_time), ev.wall_time)


def _name(tag: str, tool: str) -> str:
    """transformers' ``rewrite_logs`` undone for TRL: ``train/x`` -> ``x``, ``eval/x`` ->
    ``eval_x``, ``test/x`` -> ``test_x``; verl logs its own names."""
    if tool != "trl":
        return tag
    for prefix, back in (("train/", ""), ("eval/", "eval_"), ("test/", "test_")):
        if tag.startswith(prefix) and len(tag) > len(prefix):
            return back + tag[len(prefix) :]
    return tag


def output_dir(file: Path) -> Path:
    """The Trainer's output dir of an event file written under ``<output_dir>/runs/<name>/``."""
    return file.parent.parent.parent if file.parent.parent.name == "runs" else file.parent


def read(file: Path, tool: str, segment: int | None = None) -> SourceLog:
    """The run (``segment`` of several) in a TensorBoard event file, as ``tool`` logged it."""
    found = scan(file, tool)
    if not found.records:
        raise ValueError(f"{file} holds no scalar in its {found.framing.records} events")
    validation = {"trl": ("eval_", "test_"), "openrlhf": ("eval/",)}.get(tool, ("val-",))
    segments = split_by_step(found.records, validation)
    seg = choose(segments, segment, file, tool)
    summary: dict[str, Any] = {}
    recs = []
    for r in seg.records:
        kept = {n: v for n, v in r.metrics.items() if not (tool == "trl" and n in TRL_SUMMARY)}
        summary.update({n: v for n, v in r.metrics.items() if n not in kept})
        if kept:
            recs.append((r.step, kept))
    merged = merge_by_step(recs)
    settings, files, version, config = _settings(file, tool, found)
    last = _last_window(seg.records, settings, merged.steps) if tool == "trl" else []
    clock = {s: t for s, t in found.clock.items() if s in merged.steps}
    return SourceLog(
        tool=tool,
        file=file,
        name=(output_dir(file).name if tool == "trl" else file.parent.name) or tool,
        steps=merged.steps,
        lines=found.framing.records + len(found.framing.damaged) + bool(found.framing.truncated),
        malformed=tuple(found.framing.damaged + found.undecodable),
        truncated_last_line=found.framing.truncated,
        duplicate_steps=merged.duplicate_steps,
        settings=settings,
        settings_files=files,
        config=config,
        version=version,
        started_at=found.first_time,
        last_timestamp=max(clock.values()) if clock else None,
        summary=summary,
        end=end_evidence(tool, seg.records, merged.steps, summary, settings),
        dialect_evidence=trl_state.unsloth_evidence(output_dir(file) / trl_state.STATE_FILE)
        if tool == "trl"
        else (),
        file_format=FILE_FORMAT,
        notes=tuple(_notes(found, tool, seg, len(segments)) + last),
        segment=seg.index if len(segments) > 1 else None,
        segments=len(segments) if len(segments) > 1 else None,
        wall_clock=clock,
        wall_clock_text="the event file's own clock (when each step's last event was written)",
    )


def end_evidence(
    tool: str,
    records: Sequence[Record],
    steps: Mapping[int, Mapping[str, Any]],
    summary: Mapping[str, Any],
    settings: Settings,
) -> _end.Evidence:
    """What an event file says of its run's end: the planned end its settings state (TRL's
    ``args``: max_steps, else num_train_epochs against the last logged epoch), its last step,
    and TRL's end-of-training scalars (``train_runtime``, logged at the final global_step)."""
    last = max(steps) if steps else None
    epochs = [m["epoch"] for s, m in sorted(steps.items()) if isinstance(m.get("epoch"), float)]
    planned = _end.from_settings(settings, last, epochs[-1] if epochs else None)
    at = [r.step for r in records if "train_runtime" in r.metrics]
    reached = [_end.Reached(last, "its last logged step")] if last is not None else []
    if at:
        reached.insert(0, _end.Reached(at[-1], "the step of its train_runtime scalar", exact=True))
    every = settings.get("logging_steps")
    window = every.value if every is not None and isinstance(every.value, int) else 1
    return _end.Evidence(
        tuple(planned),
        tuple(reached),
        end_line=f"the end-of-training scalars (train_runtime) at step {at[-1]}" if at else "",
        window=max(window, 1),
        end_expected=tool == "trl",
    )


def _settings(
    file: Path, tool: str, found: Events
) -> tuple[Settings, tuple[str, ...], str | None, dict[str, Any]]:
    """TRL: the training arguments the callback wrote as text (``args``), and the files beside the
    output dir (a model card's TRL version); verl: none."""
    if tool != "trl":
        return {}, (), None, {}
    settings, files, version, config = trl_state._beside(output_dir(file) / trl_state.STATE_FILE)
    text = found.texts.get("args/text_summary")
    args = _json(text) if text else None
    if args:
        settings = {**settings, **read_settings("trl", args, f"{file.name}: args")}
        config = {**config, **args}
        files = (*files, f"{file} (args)")
    return settings, files, version, config


def _last_window(
    records: Sequence[Record], settings: Settings, steps: Mapping[int, Any]
) -> list[str]:
    """TRL logs its metrics of the steps since the last logging step with the end-of-training
    summary: a row at a step off the logging_steps grid, without the loss. Said, not hidden."""
    at = [r.step for r in records if "train_runtime" in r.metrics]
    every = settings.get("logging_steps")
    if not at or every is None or not isinstance(every.value, int) or every.value <= 0:
        return []
    step = at[-1]
    if step % every.value == 0 or step not in steps:
        return []
    return [
        f"step {step} holds the metrics TRL logged with its end-of-training summary: the last, "
        f"partial logging window (steps {step - step % every.value + 1}-{step}, off the "
        f"logging_steps {every.value} grid)"
        + ("" if "loss" in steps[step] else "; the Trainer logs no loss there")
    ]


def _json(text: str) -> Mapping[str, Any] | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, Mapping) else None


def _notes(found: Events, tool: str, seg: Any, count: int) -> list[str]:
    out = [f"{found.framing.records} events read, {len(found.records)} holding scalars"]
    if tool == "trl":
        out.append(
            "names turned back into the Trainer's (train/loss -> loss, eval/loss -> eval_loss), "
            "as transformers' TensorBoard callback prefixed them"
        )
    if found.other:
        few = ", ".join(sorted(found.other)[:6])
        out.append(f"{len(found.other)} tags are no scalar (histograms, images, text): {few}")
    bad = len(found.framing.damaged) + len(found.undecodable)
    if bad:
        out.append(f"{bad} damaged records skipped; the records after them were read")
    return [*out, *segment_notes(seg, count)]
