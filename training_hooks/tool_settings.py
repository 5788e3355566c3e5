"""Settings beside a foreign log: where each tool's config (or the MLflow params) holds the
settings the metric map's rules depend on (``SETTING_KEYS``), read as ours (``read_settings``),
and a tool's loss aggregation under our name (``reduction_of``). Torch-free."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gspo_metrics.spec import TOKEN_CLIP_LOSSES, parse_algorithm
from training_hooks.schema import flatten

#: The tools whose logs are imported, by the names their importers and rules use: ``jsonl`` and
#: ``csv`` are any trainer's log read through a key map (``importers.keymap``); ``roll`` is
#: ROLL's, its keys shipped in ``metric_map``.
TRL, VERL, TINKER = "trl", "verl", "tinker"
JSONL, CSV, ROLL, TEXT = "jsonl", "csv", "roll", "text"
SWIFT, OPENRLHF = "swift", "openrlhf"
#: Each tool's name in text.
TOOL_NAMES = {
    TRL: "TRL",
    VERL: "verl",
    TINKER: "Tinker",
    JSONL: "JSON lines with a key map",
    CSV: "CSV with a key map",
    TEXT: "a loop's own text log",
    ROLL: "ROLL",
    SWIFT: "ms-swift",
    OPENRLHF: "OpenRLHF",
}
#: TRL's setting for the clip unit ("token" or "sequence": its GSPO)
IS_LEVEL = "importance_sampling_level"
#: Our name of a setting -> where each tool's config holds it (dotted paths; a config nested
#: deeper matches on the path's tail). MLflow params of the same names are read the same way.
SETTING_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    TRL: {
        "epsilon": ("epsilon",),
        "epsilon_high": ("epsilon_high",),
        IS_LEVEL: (IS_LEVEL,),
        "group_size": ("num_generations",),
        "loss_type": ("loss_type",),
        "beta": ("beta",),
        "num_iterations": ("num_iterations",),
        "steps_per_generation": ("steps_per_generation",),
        "gradient_accumulation_steps": ("gradient_accumulation_steps",),
        "max_grad_norm": ("max_grad_norm",),
        "scale_rewards": ("scale_rewards",),
        "use_bias_correction_kl": ("use_bias_correction_kl",),
        "multi_objective_aggregation": ("multi_objective_aggregation",),
        "logging_steps": ("logging_steps",),
        "max_steps": ("max_steps",),  # -1: run num_train_epochs
        "num_train_epochs": ("num_train_epochs",),
    },
    VERL: {
        "clip_ratio_low": ("actor_rollout_ref.actor.clip_ratio_low",),
        "clip_ratio_high": ("actor_rollout_ref.actor.clip_ratio_high",),
        "clip_ratio": ("actor_rollout_ref.actor.clip_ratio",),
        "loss_agg_mode": ("actor_rollout_ref.actor.loss_agg_mode",),
        "loss_mode": ("actor_rollout_ref.actor.policy_loss.loss_mode",),
        "use_kl_loss": ("actor_rollout_ref.actor.use_kl_loss",),
        "kl_loss_type": ("actor_rollout_ref.actor.kl_loss_type",),
        "ppo_epochs": ("actor_rollout_ref.actor.ppo_epochs",),
        "ppo_mini_batch_size": ("actor_rollout_ref.actor.ppo_mini_batch_size",),
        "group_size": ("actor_rollout_ref.rollout.n",),
        "train_batch_size": ("data.train_batch_size",),
        "adv_estimator": ("algorithm.adv_estimator",),
        "total_training_steps": ("trainer.total_training_steps",),
    },
    TINKER: {
        # the cookbook's G; a flat ``group_size`` is a custom loop's own word (one Tinker loop's
        # config says group_size 8 where its log shows 8 groups of 16), so it is not read as G
        "group_size": ("dataset_builder.group_size",),
        "loss_fn": ("loss_fn",),
        "clip_low_threshold": ("loss_fn_config.clip_low_threshold",),
        "clip_high_threshold": ("loss_fn_config.clip_high_threshold",),
        "num_substeps": ("num_substeps",),
        "kl_penalty_coef": ("kl_penalty_coef",),
        "max_steps": ("max_steps",),  # a loop's config (rl/train.py has none)
    },
    # any trainer (``--set NAME=VALUE`` or ``--config``): our own words. epsilon / epsilon_high
    # are the clip range in the clip unit of --algorithm; max_steps the planned end (the status)
    JSONL: {
        k: (k,)
        for k in (
            "epsilon",
            "epsilon_high",
            "group_size",
            "max_steps",
            "max_grad_norm",
            "one_update_per_row",
        )
    },
    # ROLL's pipeline config (``roll/configs/base_config.py``, ``pipeline/rlvr/rlvr_config.py``)
    ROLL: {
        "pg_clip": ("pg_clip",),
        "use_pg_clip_range": ("use_pg_clip_range",),
        "pg_clip_low": ("pg_clip_low",),
        "pg_clip_high": ("pg_clip_high",),
        "importance_sampling": ("importance_sampling",),
        "loss_agg_mode": ("loss_agg_mode",),
        "enable_reference": ("enable_reference",),
        "use_kl_loss": ("use_kl_loss",),
        "init_kl_coef": ("init_kl_coef",),
        "adv_estimator": ("adv_estimator",),
        "group_size": ("num_return_sequences_in_group",),
        "max_steps": ("max_steps",),
        "max_grad_norm": ("max_grad_norm",),
    },
    # ms-swift's args.json (RLHFArguments after __post_init__: its resolved values)
    SWIFT: {
        "rlhf_type": ("rlhf_type",),
        "epsilon": ("epsilon",),
        "epsilon_high": ("epsilon_high",),
        IS_LEVEL: (IS_LEVEL,),
        "group_size": ("num_generations",),
        "loss_type": ("loss_type",),
        "beta": ("beta",),
        "kl_in_reward": ("kl_in_reward",),
        "scale_rewards": ("scale_rewards",),
        "advantage_estimator": ("advantage_estimator",),
        "num_iterations": ("num_iterations",),
        "gradient_accumulation_steps": ("gradient_accumulation_steps",),
        "max_grad_norm": ("max_grad_norm",),
        "logging_steps": ("logging_steps",),
        "max_steps": ("max_steps",),  # -1: run num_train_epochs
        "num_train_epochs": ("num_train_epochs",),
        "log_entropy": ("log_entropy",),
        "use_liger_kernel": ("use_liger_kernel",),
    },
    # OpenRLHF's arguments (train_ppo_ray; 0.11's nested names, older flat ones match the tail)
    OPENRLHF: {
        "policy_loss_type": ("policy_loss_type",),
        "eps_clip_low_high": ("eps_clip_low_high",),
        "eps_clip": ("eps_clip",),
        "group_size": ("n_samples_per_prompt",),
        "advantage_estimator": ("advantage.estimator", "advantage_estimator"),
        "use_kl_loss": ("kl.use_loss", "use_kl_loss"),
        "kl_estimator": ("kl.estimator", "kl_estimator"),
        "init_kl_coef": ("kl.init_coef", "init_kl_coef"),
        "num_episodes": ("num_episodes",),
        "max_epochs": ("max_epochs",),
    },
}
SETTING_KEYS[CSV] = SETTING_KEYS[TEXT] = SETTING_KEYS[JSONL]

#: A tool's loss aggregation -> ours (``RunInfo.reduction``); others are kept as "<tool>:<value>".
REDUCTIONS: dict[tuple[str, str], str] = {
    (VERL, "token-mean"): "token_mean",
    (VERL, "seq-mean-token-mean"): "seq_mean_token_mean",
    (TRL, "grpo"): "seq_mean_token_mean",
    (TRL, "bnpo"): "token_mean",
    (TRL, "dapo"): "token_mean",
    (ROLL, "token-mean"): "token_mean",
    (ROLL, "seq-mean-token-mean"): "seq_mean_token_mean",
    (SWIFT, "grpo"): "seq_mean_token_mean",
    (SWIFT, "bnpo"): "token_mean",
    (SWIFT, "dapo"): "token_mean",
}


@dataclass(frozen=True)
class Setting:
    value: Any
    origin: str  # where it was read: "<file>: <key>", "MLflow param <key>", "the log: ..."


def read_settings(source: str, config: Mapping[str, Any], origin: str) -> dict[str, Setting]:
    """The settings of ``SETTING_KEYS[source]`` that ``config`` states (nested or flat, "." or "/"
    separated keys; MLflow's string values parsed as JSON literals where they are ones)."""
    flat = {k.replace("/", "."): v for k, v in flatten(config, ".").items()}
    out: dict[str, Setting] = {}
    for name, paths in SETTING_KEYS.get(source, {}).items():
        for path in paths:
            hits = [k for k in flat if k == path or k.endswith("." + path)]
            if hits:
                key = min(hits, key=len)
                out[name] = Setting(_literal(flat[key]), f"{origin}: {key}")
                break
    return out


def _literal(value: Any) -> Any:
    """MLflow params are strings: "0.2" -> 0.2, "True"/"true" -> True, "None" -> None."""
    if not isinstance(value, str):
        return value
    text = {"True": "true", "False": "false", "None": "null"}.get(value, value)
    try:
        return json.loads(text)
    except ValueError:
        return value


def reduction_of(source: str, value: Any) -> str | None:
    """Our name for a tool's loss aggregation (``None`` when unknown)."""
    if value is None:
        return None
    return REDUCTIONS.get((source, str(value)), f"{source}:{value}")


def verl_token_eps(algorithm: str | None, eps: tuple[float, float]) -> tuple[float, float]:
    """The token unit's eps of verl's clip_ratio_low/high: as they are, but GMPO's, which clip
    log r_t in [-low, high], are r_t's range [e^-low, e^high] (the eps 1 - e^-low, e^high - 1)."""
    parsed = parse_algorithm(algorithm)
    if parsed is None or parsed.loss not in TOKEN_CLIP_LOSSES:
        return eps
    return (-math.expm1(-eps[0]), math.expm1(eps[1]))
