"""TRL / Unsloth console output: the dict transformers prints once per logging step
(``{'loss': 0.0125, 'grad_norm': 0.75, 'reward': 0.625, ...}``) -> a SourceLog.

What a run leaves when ``trainer_state.json`` was never saved or was lost with the machine: a
``train.log`` / ``slurm-*.out`` / W&B ``output.log``. The dicts sit between progress bars,
warnings and generated text; Unsloth (and transformers 5) print every value as a quoted string
with 4 significant digits (``'loss': '0.0002517'``), which are read as those numbers. A record is
parsed as a literal (``_literal``: never evaluated), and a damaged one (cut, garbled by a progress
bar written into it) is skipped and counted.

A dict carries no step. stdout is buffered, so the dicts come in bursts, long after their step:
the progress bar beside one does not give it. A training record's step is therefore its position
times ``logging_steps`` (the k-th record is step k x logging_steps, as the Trainer logs every
``logging_steps`` optimizer steps; a damaged training record keeps its place), with
``logging_steps`` from ``--config`` or a file beside the log, else inferred from a final step a
file states (W&B's ``train/global_step``) when exactly one value fits, else unknown: then the
steps are the records' numbers and the import says so. An eval record (``eval_*`` keys only)
takes the step of the training record before it; the end-of-training record (``train_runtime``)
is the summary. The epoch (or ``num_tokens``) going back, or a record after the summary, starts
another run: a file holding several is imported one run at a time (``_segments``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_hooks.importers._literal import (
    LiteralError,
    number_text,
    parse_literal,
    significant_digits,
)
from training_hooks.importers._read import SourceLog, as_step, first_bad, is_number, merge_by_step
from training_hooks.importers._segments import Record, Segment, choose, segment_notes, split_at
from training_hooks.importers._sniff import TRL_DICT_START
from training_hooks.importers._spec import Settings
from training_hooks.importers._text import LineStats, cleaning_note, read_lines, redraws
from training_hooks.importers.trl import SUMMARY_KEYS
from training_hooks.tool_settings import Setting

FILE_FORMAT = "TRL console log"
EVAL_PREFIXES = ("eval_", "test_")
TRAIN, EVAL, SUMMARY, DAMAGED = "train", "eval", "summary", "damaged"
MAX_NAME = 256  # a longer metric name is damage, not a name
GARBLE = ("%|", "it/s]", "s/it]", "\ufffd")  # a progress bar (or broken bytes) inside a name


@dataclass
class Entry:
    line: int
    kind: str  # TRAIN, EVAL, SUMMARY, or DAMAGED (a training record that did not parse)
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dicts:
    """What a scan of the log found."""

    entries: list[Entry]
    malformed: list[dict[str, Any]]
    stats: LineStats
    truncated: int | None = None
    as_text: int = 0  # values printed as quoted text
    digits: int = 0  # the most significant digits such a value carried
    other: int = 0  # lines holding no record


def scan(file: Path) -> Dicts:
    """Every record of a console log, in file order (a line may hold several, after a progress
    bar's redraw or in a burst)."""
    out = Dicts([], [], LineStats())
    for ln in read_lines(file, out.stats):
        found = False
        for piece in redraws(ln.text):
            pos = 0
            while (m := TRL_DICT_START.search(piece, pos)) is not None:
                found = True
                pos = _one(piece, m.start(), ln.number, ln.ended, out)
        out.other += not found
    return out


def _one(piece: str, start: int, line: int, ended: bool, out: Dicts) -> int:
    """Parse the record at ``piece[start]``; returns where to look for the next one."""
    is_eval = piece[start:].lstrip("{ '\"").startswith(EVAL_PREFIXES)
    try:
        value, end = parse_literal(piece, start)
    except LiteralError as e:
        if e.incomplete and not ended:
            out.truncated = line
        else:
            out.malformed.append({"line": line, "reason": f"a damaged record ({e})"})
        if not is_eval:
            out.entries.append(Entry(line, DAMAGED))
        return len(piece) if e.incomplete else max(e.pos, start + 1)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        out.malformed.append({"line": line, "reason": "a record that is not a dict of names"})
        return end
    bad = next((k for k in value if len(k) > MAX_NAME or any(g in k for g in GARBLE)), None)
    if bad is not None:  # a progress bar written into the record: its values are not trusted
        out.malformed.append({"line": line, "reason": f"a damaged record (name {bad[:60]!r})"})
        if not is_eval:
            out.entries.append(Entry(line, DAMAGED))
        return end
    metrics = {k: _value(v, out) for k, v in value.items()}
    if any(k in metrics for k in SUMMARY_KEYS):
        kind = SUMMARY
    elif all(k.startswith(EVAL_PREFIXES) or k == "epoch" for k in metrics):
        kind = EVAL
    else:
        kind = TRAIN
    out.entries.append(Entry(line, kind, metrics))
    return end


def _value(v: Any, out: Dicts) -> Any:
    if isinstance(v, str):
        x = number_text(v)
        if x is not None:
            out.as_text += 1
            out.digits = max(out.digits, significant_digits(v) or 0)
            return x
    return v


def runs_of(entries: Sequence[Entry]) -> dict[int, str]:
    """Where another run starts (entry index -> why): a training record after the summary, or
    whose epoch or cumulative num_tokens is below the training record's before it."""
    starts: dict[int, str] = {}
    prev: Entry | None = None
    summary: Entry | None = None
    for i, e in enumerate(entries):
        if e.kind == SUMMARY:
            summary = e
        if e.kind != TRAIN:
            continue
        if summary is not None:
            starts[i] = f"line {e.line} (after the end-of-training record at line {summary.line})"
        elif prev is not None:
            for key in ("epoch", "num_tokens"):
                a, b = _num(prev.metrics.get(key)), _num(e.metrics.get(key))
                if a is not None and b is not None and b < a:
                    starts[i] = f"line {e.line} ({key} {b:g} after {a:g} at line {prev.line})"
                    break
        prev, summary = e, None
    return starts


def _num(v: Any) -> float | None:
    return float(v) if is_number(v) else None


@dataclass(frozen=True)
class Steps:
    """How a run's records get their steps: every ``every`` optimizer steps (None: unknown, the
    records' numbers are used), and the sentence saying so."""

    every: int | None
    text: str
    setting: Setting | None = None  # logging_steps, when it was inferred here


def logging_steps(settings: Settings, trains: int, final: tuple[int, str] | None) -> Steps:
    """``logging_steps`` as stated (settings), else inferred from the final step a file gives
    (``final``: step, where) when one integer L has floor(final / L) == trains, else unknown."""
    placed = "the dicts carry no step: the k-th training record is step k x logging_steps"
    stated = settings.get("logging_steps")
    if stated is not None and isinstance(stated.value, int) and stated.value > 0:
        return Steps(stated.value, f"{placed} ({stated.value}, from {stated.origin})")
    if final is not None and trains > 0:
        step, where = final
        fits = [
            n
            for n in range(max(1, step // (trains + 1)), step // trains + 1)
            if step // n == trains
        ]
        if len(fits) == 1:
            why = f"inferred: {where} gives the last step {step} and the log holds {trains} training records"
            return Steps(
                fits[0], f"{placed} ({fits[0]}, {why}; no file states it)", Setting(fits[0], why)
            )
    return Steps(
        None,
        f"the dicts carry no step and no file states logging_steps: steps are the training "
        f"records' numbers 1-{trains}, not optimizer steps (give --config with logging_steps)",
    )


#: Why a TRL log without its end-of-training record stopped before its end.
END_MISSING = (
    "no end-of-training record (train_runtime): the Trainer logs one when training returns, so "
    "the run stopped (or was still running) at its last logged step"
)


def read(
    file: Path,
    settings: Settings,
    segment: int | None = None,
    *,
    final: tuple[int, str] | None = None,
    first_step: bool = False,
    name: str = "",
    file_format: str = FILE_FORMAT,
) -> SourceLog:
    """The run (``segment`` of several) in a console log. ``settings``: what ``--config`` and the
    files beside it state (``logging_steps`` places the records); ``final``: a file's final step,
    to infer ``logging_steps`` from; ``first_step``: ``logging_first_step`` (record 1 is step 1)."""
    found = scan(file)
    if not _has_train(found.entries):
        raise ValueError(
            f"{file} holds no TRL console record ({{'loss': ..., ...}} per logging step)"
            + first_bad(found.malformed)
        )
    runs = [r for r in split_at(found.entries, runs_of(found.entries)) if _has_train(r[0])]
    placed = [
        _place(entries, settings, final if i == len(runs) - 1 else None, first_step)
        for i, (entries, _) in enumerate(runs)
    ]
    segments = [Segment(i + 1, tuple(p.records), runs[i][1]) for i, p in enumerate(placed)]
    seg = choose(segments, segment, file)
    run = placed[seg.index - 1]
    merged = merge_by_step((r.step, r.metrics) for r in run.records)
    notes = [run.how.text, *_notes(found, seg, len(segments), runs[seg.index - 1][0])]
    first, last = runs[seg.index - 1][0][0].line, runs[seg.index - 1][0][-1].line
    return SourceLog(
        tool="trl",
        file=file,
        name=name or _name(file),
        steps=merged.steps,
        lines=found.stats.lines,
        malformed=tuple(d for d in found.malformed if first <= d["line"] <= last),
        truncated_last_line=found.truncated if seg.index == len(segments) else None,
        duplicate_steps=merged.duplicate_steps,
        settings={**settings, **({"logging_steps": run.how.setting} if run.how.setting else {})},
        summary=run.summary,
        source_finished=bool(run.summary),
        end_text="" if run.summary else END_MISSING,
        file_format=file_format,
        notes=tuple(notes),
        printed_digits=found.digits or None,
        segment=seg.index if len(segments) > 1 else None,
        segments=len(segments) if len(segments) > 1 else None,
    )


@dataclass(frozen=True)
class Placed:
    records: list[Record]
    summary: dict[str, Any]
    how: Steps


def _place(
    entries: Sequence[Entry], settings: Settings, final: tuple[int, str] | None, first_step: bool
) -> Placed:
    """Steps for a run's records: training record k at k x logging_steps (record 1 at step 1
    with logging_first_step), an eval record at the step before it, the summary apart."""
    how = logging_steps(settings, sum(e.kind in (TRAIN, DAMAGED) for e in entries), final)
    every = how.every or 1
    records: list[Record] = []
    summary: dict[str, Any] = {}
    k, last = 0, 0
    for e in entries:
        if e.kind in (TRAIN, DAMAGED):
            k += 1
            last = 1 if first_step and k == 1 else (k - 1 if first_step else k) * every
            if e.kind == TRAIN:
                records.append(Record(e.line, last, e.metrics))
        elif e.kind == EVAL:
            records.append(Record(e.line, last, e.metrics))
        else:
            summary.update(e.metrics)
    return Placed(records, summary, how)


def _has_train(entries: Sequence[Entry]) -> bool:
    return any(e.kind == TRAIN for e in entries)


def _notes(found: Dicts, seg: Segment, count: int, entries: Sequence[Entry]) -> list[str]:
    kinds = [e.kind for e in entries]
    out = [
        f"{kinds.count(TRAIN)} training, {kinds.count(EVAL)} eval and {kinds.count(SUMMARY)} "
        f"end-of-training records read; {found.other} other lines (progress bars, warnings, "
        "text) skipped",
        *cleaning_note(found.stats),
        *segment_notes(seg, count),
    ]
    if kinds.count(DAMAGED):
        out.append(
            f"{kinds.count(DAMAGED)} damaged training records skipped; each keeps its place, so "
            "the steps after it stay right"
        )
    if found.as_text:
        out.append(
            f"{found.as_text} values were printed as quoted text (Unsloth / transformers 5), with at "
            f"most {found.digits} significant digits: stored as those numbers"
        )
    return out


def _name(file: Path) -> str:
    generic = {"output", "train", "training", "log", "logs", "stdout", "console", "out"}
    return (file.parent.name if file.stem.lower() in generic else file.stem) or "trl"


def final_step(summary: Mapping[str, Any], key: str) -> int | None:
    step = as_step(summary.get(key))
    return step if step is not None and step > 0 else None
