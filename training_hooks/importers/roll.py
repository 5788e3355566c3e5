"""ROLL (Alibaba's RL trainer, github.com/alibaba/ROLL): its step metrics as JSON lines -> a
SourceLog, read by the key-map reader (``keymap``) with ROLL's own keys mapped by their meaning
(``metric_map``: the rules of source "roll", and why each holds).

ROLL's pipeline hands its trackers one flat dict per step (``BasePipeline``), ``system/step``
the global step among its keys; a ``metrics.jsonl`` of ROLL's is that dict a line (the log of
../shared/real_logs/other/rdan-grpo-roll-beingamanforever/ is one: its runtime writes every row
there before W&B). The step is ``system/step`` (a float; ``--step`` names another key). A run's
own keys (a reward of its own, a judge's counters) are kept under their own names; ``--map``
states what they mean, as for any ``jsonl`` log.

Settings: none is written beside such a log, so ``--set`` / ``--config`` state them, in ROLL's
words (``tool_settings.SETTING_KEYS["roll"]``): ``enable_reference`` decides what
``actor/kl_loss`` is (a KL to the reference model, or to the old policy: ROLL's default since
0.1.3 has no reference), ``importance_sampling`` the clip unit, ``pg_clip`` /
``use_pg_clip_range`` + ``pg_clip_low`` / ``pg_clip_high`` the clip range, ``max_steps`` the
planned end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from training_hooks.importers import keymap
from training_hooks.importers._read import SourceLog, as_step, find_file, is_number
from training_hooks.importers._spec import RunSettings, Settings, ToolSpec, one_run
from training_hooks.metric_map import SourceFormat
from training_hooks.schema import Step
from training_hooks.tool_settings import ROLL, Setting, reduction_of

STEP_KEY = "system/step"
CLIPPED = "token/total_response_length/clip"  # responses at max length (a count)
BATCH = "system/batch_size"  # responses of the step


def read(path: Path, key_map: keymap.KeyMap | None = None) -> SourceLog:
    """A ROLL metrics file (a folder: its ``metrics.jsonl``, else its only ``*.jsonl``)."""
    file = find_file(path, ("metrics.jsonl",), "*.jsonl", "ROLL metrics.jsonl")
    return keymap.keymap_log(
        ROLL,
        file,
        keymap.json_records(file),
        key_map,
        default_step=STEP_KEY,
        default_origin="ROLL's step key",
    )


def facts(log: SourceLog, fmt: SourceFormat, settings: Settings) -> Settings:
    """``enable_reference`` true where ``use_kl_loss`` or ``init_kl_coef > 0`` is stated: ROLL
    turns the reference on then (``base_config.__post_init__``)."""
    kl_loss, coef = settings.get("use_kl_loss"), settings.get("init_kl_coef")
    why = [
        f"use_kl_loss = true ({kl_loss.origin})" if kl_loss and kl_loss.value is True else "",
        f"init_kl_coef = {coef.value} ({coef.origin})"
        if coef and is_number(coef.value) and coef.value > 0
        else "",
    ]
    said = [w for w in why if w]
    if not said:
        return {}
    return {"enable_reference": Setting(True, f"ROLL turns the reference on: {'; '.join(said)}")}


def run_settings(s: Mapping[str, Any]) -> RunSettings:
    """The clip unit from ``importance_sampling`` ("token": GRPO's clipped token ratio, "seq":
    GSPO's sequence ratio), the clip range as ROLL reads it (``pg_clip_low`` / ``pg_clip_high``
    when ``use_pg_clip_range``, else ``pg_clip`` on both sides), only where stated."""
    level = s.get("importance_sampling")
    algorithm = {"token": "grpo", "seq": "gspo"}.get(level) if isinstance(level, str) else None
    eps = _clip_range(s)
    group = as_step(s.get("group_size"))
    return RunSettings(
        algorithm=algorithm,
        seq_eps=eps if level == "seq" else None,
        token_eps=eps if level == "token" else None,
        reduction=reduction_of(ROLL, s.get("loss_agg_mode")),
        group_size=group if group and group > 0 else None,
    )


def _clip_range(s: Mapping[str, Any]) -> tuple[float, float] | None:
    ranged = s.get("use_pg_clip_range")
    low, high, both = s.get("pg_clip_low"), s.get("pg_clip_high"), s.get("pg_clip")
    if ranged is True and is_number(low) and is_number(high):
        return float(low), float(high)
    if ranged is False and is_number(both):
        return float(both), float(both)
    return None


def derive(row: dict[str, float]) -> dict[str, float]:
    """truncated_fraction = token/total_response_length/clip / system/batch_size: the responses
    that reached the response length limit, over the step's responses."""
    clipped, batch = row.get(CLIPPED), row.get(BATCH)
    if clipped is None or batch is None or not (math.isfinite(clipped) and batch > 0):
        return {}
    return {Step.TRUNCATED_FRACTION: clipped / batch}


SPEC = ToolSpec(
    name=ROLL,
    read=one_run(read),
    facts=facts,
    run_settings=run_settings,
    algorithm_setting=("importance_sampling", {"grpo": "token", "gspo": "seq"}),
    end_of=keymap.end_of,
    takes_key_map=True,
    derive=derive,
    derived_from={Step.TRUNCATED_FRACTION: f"{CLIPPED} / {BATCH}"},
    path_hint="ROLL: its metrics.jsonl (one flat object per step, system/step the step) or its "
    "folder; settings by --set (enable_reference, importance_sampling, pg_clip, max_steps, ...)",
)
