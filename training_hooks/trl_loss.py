"""The loss a TRL run trains with, for ``training_hooks.trl``: its ``algorithm`` label and its
attenuation on a recorded step (``gspo_metrics.loss_for("trl", settings)``); no TRL import."""

from __future__ import annotations

import time
import warnings
from typing import Any

import torch

from gspo_metrics.losses import LossOutput
from gspo_metrics.spec import RATIO_NAMES, parse_algorithm, tool_algorithm

from .names import slug

#: The longest model part of a default run name (a Hub id's last component, cut)
MODEL_NAME_CHARS = 40


def trl_algorithm(trainer: Any) -> str:
    """The run's ``algorithm`` label: TRL's ``loss_type`` at its ``importance_sampling_level``
    (``gspo_metrics.spec.tool_algorithm``: "dapo", "cispo", "sapo-seq", "gspo" for grpo at the
    sequence level...); "unknown" for a loss_type this version of gspo-dash does not know."""
    args = trainer.args
    level = getattr(trainer, "importance_sampling_level", None)
    return tool_algorithm("trl", getattr(args, "loss_type", None), level)


def default_run_name(algorithm: str, model: str | None, when: float | None = None) -> str:
    """The name of a run ``attach`` is not given one: its ratio level, the loss after it when it is
    not GRPO's / GSPO's clip, the model (a Hub id's or folder's last component) and the UTC start
    (``when``: seconds since the epoch; now when None). "gspo-Qwen2.5-0.5B-1207-0930" (TRL's
    GSPO recipe), "gspo-dapo-..." (TRL's default loss_type at the sequence level), "grpo-dapo-...",
    "trl-..." for a loss gspo-dash does not know (``spec.ratio_name``, ``spec.algorithm_words``)."""
    parsed = parse_algorithm(algorithm)
    if parsed is None:
        head = "trl"
    else:
        head = RATIO_NAMES[parsed.level].lower()
        if parsed.loss not in ("grpo", "gspo"):
            head += "-" + parsed.loss.replace("_", "-")
    last = (model or "").rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
    part = slug(last)[:MODEL_NAME_CHARS].strip("-.") if last else ""
    stamp = time.strftime("%m%d-%H%M", time.gmtime(time.time() if when is None else when))
    return "-".join(p for p in (head, part, stamp) if p)


def tool_loss(trainer: Any) -> Any:
    """``loss_for("trl", ...)`` of the trainer's settings (its policy term), for the attenuation;
    None (and a warning) when it cannot be built."""
    from gspo_metrics.tool_losses import TRL_DEFAULTS, loss_for

    args = trainer.args
    settings = {k: getattr(args, k) for k in TRL_DEFAULTS if hasattr(args, k)}
    settings["importance_sampling_level"] = getattr(trainer, "importance_sampling_level", "token")
    try:
        return loss_for("trl", settings, policy_only=True)
    except ValueError as e:
        warnings.warn(
            f"gspo-dash: the attenuation of this TRL loss is not recorded: {e}",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def loss_output(tool_loss: Any, rows: Any, adv: torch.Tensor, loss: torch.Tensor) -> Any:
    """``LossOutput(loss, {"attenuation": ...})``: TRL's loss with the attenuation of
    ``tool_loss`` on the step's rows (``_StepRows``: their detached log-probs, old log-probs and
    mask; ``adv`` their advantages), NaN on a row TRL's loss ignores (its mask zeroed); ``loss``
    itself (and a warning) when the attenuation cannot be computed: it is then unknown."""
    try:
        with torch.no_grad():
            out = tool_loss(rows.need("logps"), rows.need("old"), adv, rows.need("mask"))
        att = out.per_sequence["attenuation"]
        att = torch.where(rows.need("loss_masked") > 0, torch.nan, att)
    except Exception as e:  # noqa: BLE001 - never stops training; the attenuation is unknown
        warnings.warn(
            f"gspo-dash: the attenuation of TRL's {tool_loss.tool_loss} loss is not recorded "
            f"({type(e).__name__}: {e})",
            RuntimeWarning,
            stacklevel=3,
        )
        return loss
    return LossOutput(loss, {"attenuation": att})
