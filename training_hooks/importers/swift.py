"""ms-swift (ModelScope's SWIFT, ``swift rlhf --rlhf_type grpo``): an output folder's
``logging.jsonl``, with ``args.json`` beside it -> a SourceLog.

ms-swift's progress and printer callbacks (``swift/trainers/patcher.py`` in 4.x,
``swift/trainers/callback.py`` in 3.x: ``add_train_message``) append every ``Trainer.log`` dict
to ``<output_dir>/logging.jsonl`` on rank 0, with ``"global_step/max_steps": "N/M"`` (the
Trainer's ``global_step`` and ``max_steps``), ``elapsed_time`` / ``remaining_time`` (and, in
3.x, ``percentage``) as text, and floats rounded to 8 decimals. The lines are:

* training lines: the GRPO trainer's metrics (its ``_metrics`` averaged over the logging window,
  as TRL's) and the Trainer's ``loss``, ``grad_norm``, ``learning_rate``, ``epoch``;
* evaluation lines: the same keys prefixed ``eval_`` (kept under their own names, apart from the
  training columns);
* the end-of-training line (``train_runtime``, ``train_loss``, ...), logged only when
  ``Trainer.train`` returns: the summary, not a row;
* the pipeline's final line (``last_model_checkpoint``, ``global_step``, ``log_history``, ...),
  written in a ``finally`` (also when training raised): its ``global_step`` is how far it got.

The step is the ``N`` of ``global_step/max_steps``, the planned end its ``M`` (also
``args.json``'s ``max_steps`` / ``num_train_epochs``; ``_end`` judges them). ``args.json`` is
ms-swift's ``RLHFArguments`` after ``__post_init__`` (its resolved values): the settings
(``tool_settings.SETTING_KEYS["swift"]``). The keys are mapped by their meaning in ms-swift's GRPO
trainer (``metric_map``, the ``swift`` rules), the rest kept under their own names.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gspo_metrics.spec import parse_algorithm, tool_algorithm
from training_hooks.importers import _end
from training_hooks.importers._read import (
    SourceLog,
    as_step,
    find_file,
    is_number,
    load_config,
    merge_by_step,
    read_json_lines,
)
from training_hooks.importers._segments import Record, choose, segment_notes, split_by_step
from training_hooks.importers._spec import RunSettings, ToolSpec, no_facts, runs
from training_hooks.tool_settings import IS_LEVEL, SWIFT, read_settings, reduction_of

LOG_FILE = "logging.jsonl"
ARGS_FILE = "args.json"
PROGRESS = "global_step/max_steps"
PROGRESS_TEXT = re.compile(r"^\s*(\d+)\s*/\s*(-?\d+)\s*$")
#: The Trainer's end-of-training record (logged when ``train`` returns).
SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second")
#: The pipeline's final record (``_save_trainer_state``: written also when training raised).
FINAL_KEYS = ("last_model_checkpoint", "log_history")
VALIDATION = ("eval_",)


@dataclasses.dataclass(frozen=True)
class _Lines:
    records: list[Record]
    planned: list[tuple[int, int, int]]  # (line, N, M) of every training line
    summary: dict[str, Any]
    summary_line: tuple[int, int] | None  # (line, N) of the train_runtime record
    final: tuple[int, int] | None  # (line, global_step) of the final record
    bad: list[dict[str, Any]]


def progress(value: Any) -> tuple[int, int] | None:
    """``"12/500"`` -> (12, 500); None for anything else."""
    m = PROGRESS_TEXT.match(value) if isinstance(value, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def _lines(objects: tuple[tuple[int, Any], ...], bad: tuple[dict[str, Any], ...]) -> _Lines:
    out = _Lines([], [], {}, None, None, list(bad))
    for n, obj in objects:
        if not isinstance(obj, dict):
            out.bad.append({"line": n, "reason": f"not a JSON object ({type(obj).__name__})"})
            continue
        if any(k in obj for k in FINAL_KEYS):
            step = as_step(obj.get("global_step"))
            if step is not None:
                out = dataclasses.replace(out, final=(n, step))
            continue
        got = progress(obj.get(PROGRESS))
        if got is None:
            reason = f"no {PROGRESS!r} 'N/M' (got {obj.get(PROGRESS)!r})"
            out.bad.append({"line": n, "reason": reason})
            continue
        step, total = got
        metrics = {k: v for k, v in obj.items() if k != PROGRESS}
        if any(k in obj for k in SUMMARY_KEYS):
            out.summary.update(metrics)
            out = dataclasses.replace(out, summary_line=(n, step))
            continue
        if _validation_only({k: v for k, v in metrics.items() if k != "epoch"}):
            # the callback's own keys (epoch, elapsed_time, ...) are its step's training line's
            metrics = {k: v for k, v in metrics.items() if k.startswith(VALIDATION)}
        else:
            out.planned.append((n, step, total))
        out.records.append(Record(n, step, metrics))
    return out


def read(path: Path, segment: int | None = None) -> SourceLog:
    """An ms-swift output folder (its ``logging.jsonl``; else the folder's only ``*.jsonl``) or
    the file itself; ``args.json`` beside it for the settings. A file holding several runs (an
    output folder reused with ``--add_version false``) is imported one run at a time."""
    file = find_file(path, (LOG_FILE,), "*.jsonl", "ms-swift logging.jsonl")
    args = load_config(file.parent / ARGS_FILE) or {}
    settings = read_settings(SWIFT, args, ARGS_FILE) if args else {}
    jl = read_json_lines(file)
    got = _lines(jl.objects, jl.malformed)
    if not got.records:
        first = f"; line {got.bad[0]['line']}: {got.bad[0]['reason']}" if got.bad else ""
        raise ValueError(
            f"{file} holds no ms-swift log line (a JSON object with {PROGRESS!r} 'N/M'){first}"
        )
    segments = split_by_step(got.records, VALIDATION)
    seg = choose(segments, segment, file, "swift")
    last = seg.index == len(segments)
    a, b = seg.lines
    notes = segment_notes(seg, len(segments))
    if not last and args:
        notes.append(
            f"{ARGS_FILE} beside the log is rewritten by every run that starts: it describes run "
            f"{len(segments)}, so this run's settings are unknown"
        )
    merged = merge_by_step((r.step, r.metrics) for r in seg.records)
    kept = settings if last else {}
    planned = [p for p in got.planned if a <= p[0] <= b]
    summary_line = got.summary_line if last else None
    final = got.final if last else None
    return SourceLog(
        tool=SWIFT,
        file=file,
        name=file.parent.name or SWIFT,
        steps=merged.steps,
        lines=jl.lines,
        malformed=tuple(sorted((d for d in got.bad if a <= d["line"] <= b), key=_line)),
        truncated_last_line=jl.truncated_last_line if last else None,
        duplicate_steps=merged.duplicate_steps,
        settings=kept,
        settings_files=(str(file.parent / ARGS_FILE),) if args and last else (),
        config=args if last else {},
        summary=got.summary if last else {},
        file_format=f"ms-swift {LOG_FILE}",
        notes=tuple(notes),
        end=_evidence(file, merged.steps, planned, summary_line, final, kept),
        segment=seg.index if len(segments) > 1 else None,
        segments=len(segments) if len(segments) > 1 else None,
    )


def _line(d: Mapping[str, Any]) -> int:
    return int(d.get("line", 0))


def _evidence(
    file: Path,
    steps: Mapping[int, Mapping[str, Any]],
    planned: list[tuple[int, int, int]],
    summary_line: tuple[int, int] | None,
    final: tuple[int, int] | None,
    settings: Mapping[str, Any],
) -> _end.Evidence:
    """The planned end: the ``M`` of the last training line (the Trainer's ``max_steps``), then
    ``args.json``'s ``max_steps`` (else ``num_train_epochs`` against the logged ``epoch``). How far
    it got: the end-of-training record's and the final record's ``global_step`` (exact), else the
    last training line's ``N`` (a line every ``logging_steps`` steps). The end-of-training record
    is what ``Trainer.train`` logs when it returns: its absence is evidence."""
    name = file.name
    plans: list[_end.Planned] = []
    if planned:
        n, step, total = planned[-1]
        if total > 0:
            plans.append(_end.Planned(total, f"{name} line {n}: {PROGRESS} {step}/{total}"))
    train = [s for s, m in steps.items() if not _validation_only(m)]
    last = max(train) if train else None
    plans += _end.from_settings(settings, last, _end.last_epoch(steps))
    reached: list[_end.Reached] = []
    if summary_line is not None:
        n, step = summary_line
        reached.append(_end.Reached(step, f"the end-of-training record, line {n}", exact=True))
    if final is not None:
        n, step = final
        reached.append(_end.Reached(step, f"the final record's global_step, line {n}", exact=True))
    if planned:
        n, step, _ = planned[-1]
        reached.append(_end.Reached(step, f"its last training line {n}"))
    every = settings.get("logging_steps")
    window = as_step(getattr(every, "value", None))
    return _end.Evidence(
        tuple(plans),
        tuple(reached),
        end_line=f"the end-of-training record (train_runtime), line {summary_line[0]}"
        if summary_line is not None
        else "",
        window=window if window is not None and window > 0 else 1,
        end_expected=True,
    )


def _validation_only(metrics: Mapping[str, Any]) -> bool:
    names = [k for k, v in metrics.items() if is_number(v)]
    return bool(names) and all(k.startswith(VALIDATION) for k in names)


#: ms-swift's ``importance_sampling_level`` -> the ratio level of the algorithm label:
#: "sequence_token" is the GSPO paper's GSPO-token (each token's weight has the sequence
#: ratio's value, clipped as it: GSPO's clip, with per-token advantages possible).
LEVELS = {"token": "token", "sequence": "sequence", "sequence_token": "sequence"}


def run_settings(s: Mapping[str, Any]) -> RunSettings:
    """The loss ms-swift ran (``loss_type`` at ``importance_sampling_level``: GRPO at the sequence
    level is GSPO), only where ``args.json`` states both and ``rlhf_type`` is grpo (or unstated);
    the clip range (``epsilon``, ``epsilon_high`` or ``epsilon``) in that level's unit; the
    aggregation; ``num_generations``."""
    rlhf = s.get("rlhf_type")
    level = LEVELS.get(s[IS_LEVEL]) if isinstance(s.get(IS_LEVEL), str) else None
    loss_type = s.get("loss_type")
    algorithm = None
    if rlhf in (None, "grpo") and loss_type is not None and level is not None:
        algorithm = tool_algorithm(SWIFT, loss_type, level)
    eps = None
    if is_number(s.get("epsilon")):
        high = s.get("epsilon_high")
        eps = (float(s["epsilon"]), float(high if is_number(high) else s["epsilon"]))
    parsed = parse_algorithm(algorithm)
    if parsed is not None and parsed.clip_unit is None:  # CISPO's cap, SAPO's gate: no clip eps
        eps = None
    group = as_step(s.get("group_size"))
    return RunSettings(
        algorithm=algorithm,
        seq_eps=eps if level == "sequence" else None,
        token_eps=eps if level == "token" else None,
        reduction=reduction_of(SWIFT, loss_type),
        group_size=group if group and group > 0 else None,
    )


SPEC = ToolSpec(
    name=SWIFT,
    read=runs(read),
    facts=no_facts,
    run_settings=run_settings,
    algorithm_setting=(IS_LEVEL, {"gspo": "sequence", "grpo": "token"}),
    duration="step_time",
    per_step=True,
    validation=VALIDATION,
    path_hint="ms-swift: an output folder (its logging.jsonl; args.json beside it is read) or "
    "the logging.jsonl",
)
