"""OpenRLHF (``openrlhf.cli.train_ppo_ray``, its GRPO: ``--algo.advantage.estimator group_norm``;
GSPO: ``--actor.policy_loss_type gspo``): its runs as it writes them -> a SourceLog.

OpenRLHF 0.11's ``PPOTrainer.fit`` hands each step's ``status`` dict (the actor's ``fit``: means
over the step's micro-batches and epochs; ``_compute_rollout_stats``: the rollout batch's) to
``save_logs_and_checkpoints``, which writes, every ``logger.logging_steps`` steps:

* TensorBoard (``utils/logging_utils.TensorboardLogger``): ``add_scalar("train/<key>", v,
  global_step)``; evaluation ``eval/<key>`` (``<tensorboard_dir>/<run_name>/events.out...``);
* W&B (``WandbLogger``): the same ``train/<key>`` with ``train/global_step``; the run folder's
  ``files/output.log`` holds the console, ``files/config.yaml`` the arguments;
* the console, every step: ``✨ Global step N: {...}`` (the status dict, printed by
  ``logger.info``), and ``✨ Evaluation completed in ..., global_step N, eval_metrics: {...}``.

The step is OpenRLHF's ``global_step`` (from 1: ``train_step`` returns it plus one). Keys are
mapped by their meaning in OpenRLHF's source (``metric_map``, the ``openrlhf`` rules); the
``train/`` prefix is looked through, the rest kept under their own names; evaluation keys
(``eval/*``; the console's ``eval_metrics`` as ``eval/<key>``) are apart from training ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from training_hooks.importers import tfevents, wandb_run
from training_hooks.importers._literal import parse_literal
from training_hooks.importers._read import SourceLog, as_step, is_number, load_config, merge_by_step
from training_hooks.importers._segments import Record, choose, segment_notes, split_by_step
from training_hooks.importers._sniff import EVENT, EVENT_FILE, sniff
from training_hooks.importers._spec import RunSettings, ToolSpec, no_facts, runs
from training_hooks.importers._text import read_lines
from training_hooks.tool_settings import OPENRLHF, read_settings

STEP_LINE = re.compile(r"Global step (\d+): (\{.*)$")
EVAL_LINE = re.compile(r"Evaluation completed in .*?, global_step (\d+), eval_metrics: (\{.*)$")
VALIDATION = ("eval/",)
WHAT = "OpenRLHF log (a TensorBoard event file, a W&B run folder or a console log)"
#: Console keys that are not numbers a step logs (the sample text and its reward).
NOT_METRICS = ("generated_samples",)


def read(path: Path, segment: int | None = None) -> SourceLog:
    """An event file, a W&B run folder (its ``files/output.log``, settings from
    ``files/config.yaml``), a console log, or a folder holding one of them."""
    if path.is_file():
        if sniff(path) is EVENT:
            return tfevents.read(path, OPENRLHF, segment)
        run = wandb_run.run_folder(path) if path.name == wandb_run.CONSOLE else None
        return _console(path, segment, run)
    run = wandb_run.run_folder(path)
    if run is not None:
        return _console(run / "files" / wandb_run.CONSOLE, segment, run)
    events = sorted(
        p
        for pattern in ("events.out.tfevents.*", "*/events.out.tfevents.*")
        for p in path.glob(pattern)
        if p.is_file() and EVENT_FILE.match(p.name)
    )
    if len(events) == 1:
        return tfevents.read(events[0], OPENRLHF, segment)
    if len(events) > 1:
        raise ValueError(f"path {str(path)!r} holds {len(events)} event files: pass one")
    logs = [p for p in sorted(path.iterdir()) if p.is_file() and p.suffix in (".log", ".out")]
    if len(logs) == 1:
        return _console(logs[0], segment, None)
    raise ValueError(f"path {str(path)!r} holds no single {WHAT}")


def _console(file: Path, segment: int | None, run: Path | None) -> SourceLog:
    """The ``Global step N: {...}`` lines (and the evaluation lines) of a console log."""
    records: list[Record] = []
    bad: list[dict[str, Any]] = []
    count = 0
    for line in read_lines(file):
        count = line.number
        m = STEP_LINE.search(line.text)
        e = EVAL_LINE.search(line.text) if m is None else None
        hit = m or e
        if hit is None:
            continue
        try:
            value, _ = parse_literal(hit.group(2))
        except ValueError as err:
            bad.append({"line": line.number, "reason": f"not a dict ({err})"})
            continue
        if not isinstance(value, dict):
            bad.append({"line": line.number, "reason": "not a dict"})
            continue
        prefix = "eval/" if e is not None else ""
        metrics = {
            f"{prefix}{k}": v
            for k, v in value.items()
            if isinstance(k, str) and k not in NOT_METRICS
        }
        records.append(Record(line.number, int(hit.group(1)), metrics))
    if not records:
        raise ValueError(f"{file} holds no OpenRLHF 'Global step N: {{...}}' line")
    segments = split_by_step(records, VALIDATION)
    seg = choose(segments, segment, file, "openrlhf")
    merged = merge_by_step((r.step, r.metrics) for r in seg.records)
    settings, files, config = _settings(run)
    last = seg.index == len(segments)
    return SourceLog(
        tool=OPENRLHF,
        file=file,
        name=(run.name if run is not None else file.stem) or OPENRLHF,
        steps=merged.steps,
        lines=count,
        malformed=tuple(bad),
        duplicate_steps=merged.duplicate_steps,
        settings=settings if last else {},
        settings_files=files if last else (),
        config=config if last else {},
        file_format="OpenRLHF console (W&B output.log)" if run else "OpenRLHF console log",
        notes=tuple(segment_notes(seg, len(segments))),
        segment=seg.index if len(segments) > 1 else None,
        segments=len(segments) if len(segments) > 1 else None,
    )


def _settings(run: Path | None) -> tuple[dict, tuple[str, ...], Mapping[str, Any]]:
    """OpenRLHF's arguments from a W&B run's ``config.yaml`` (``wandb.init(config=args)``): each
    key's ``value``."""
    if run is None:
        return {}, (), {}
    file = run / "files" / "config.yaml"
    raw = load_config(file) or {}
    cfg = {
        k: v.get("value", v) if isinstance(v, Mapping) else v
        for k, v in raw.items()
        if not str(k).startswith("_")
    }
    if not cfg:
        return {}, (), {}
    return read_settings(OPENRLHF, cfg, "config.yaml"), (str(file),), cfg


def run_settings(s: Mapping[str, Any]) -> RunSettings:
    """``policy_loss_type`` "ppo": PPO's clip on token ratios (our grpo loss; OpenRLHF's GRPO is
    it with ``group_norm`` advantages), "gspo": GSPO's on the sequence ratio; the clip range
    ``eps_clip_low_high`` (else ``eps_clip`` on both sides) in that unit;
    ``n_samples_per_prompt``."""
    loss = s.get("policy_loss_type")
    algorithm = {"ppo": "grpo", "gspo": "gspo"}.get(loss) if isinstance(loss, str) else None
    pair, both = s.get("eps_clip_low_high"), s.get("eps_clip")
    eps = None
    if isinstance(pair, list | tuple) and len(pair) == 2 and all(is_number(x) for x in pair):
        eps = (float(pair[0]), float(pair[1]))
    elif is_number(both):
        eps = (float(both), float(both))
    group = as_step(s.get("group_size"))
    return RunSettings(
        algorithm=algorithm,
        seq_eps=eps if loss == "gspo" else None,
        token_eps=eps if loss == "ppo" else None,
        group_size=group if group and group > 0 else None,
    )


def end_of(log: SourceLog, settings: Mapping[str, Any]) -> tuple[bool | None, str]:
    """OpenRLHF plans episodes over its prompts, not a number of steps no file writes: unknown."""
    return None, (
        "OpenRLHF writes no planned number of steps (it runs num_episodes over the prompt "
        f"dataset); last step {max(log.steps) if log.steps else '?'}"
    )


SPEC = ToolSpec(
    name=OPENRLHF,
    read=runs(read),
    facts=no_facts,
    run_settings=run_settings,
    algorithm_setting=("policy_loss_type", {"grpo": "ppo", "gspo": "gspo"}),
    validation=VALIDATION,
    end_of=end_of,
    path_hint="OpenRLHF: a TensorBoard event file (<tensorboard_dir>/<run_name>/), a W&B run "
    "folder (wandb/run-*: its output.log and config.yaml) or a console log ('Global step N: "
    "{...}' lines)",
)
