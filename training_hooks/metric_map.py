"""Metric names of other trainers -> gspo-dash step columns: one table, per tool and version.

Used by the importers (TRL ``trainer_state.json``, Tinker ``metrics.jsonl``, verl's file logger)
and by the dashboard for runs that live only in an MLflow store. Torch-free.

Each ``MetricMapping`` says which versions of the tool it holds for (``since`` / ``until``), which
settings must be known to hold (``requires``: the clip unit, a default that changed between
versions), which tool defaults it relies on when the log does not say (``assumes``; the import
report lists them), and how the meaning differs from our column (``note``). A name whose meaning
differs from our column in the detected version (``column=""``), or whose meaning cannot be pinned
(the version range spans a change, a required setting is unknown), keeps the prefixed name
``<tool>/<name>`` and never fills ours. The range is cut to the name's own versions (the log
holds it, so it is at least as new as the name's first ``since``); a required setting no file
states is taken from the tool's default where one default decides it over the segment
(``tool_versions.DEFAULTS``, reported as assumed). A ``dialect`` rule (Unsloth's trainer)
replaces the tool's rules for its name. Names not in the table keep their own names. A metric the
tool logs as 0 because the feature is off (``OFF_WHEN``) is not stored at all (unknown, not zero).

Definitions, read from each tool's source (TRL ``grpo_trainer.py`` v0.14-v1.16, verl ``dp_actor.py``
and ``rollout_corr_helper.py`` v0.4-v0.7, tinker-cookbook ``rl/metrics.py``, ``rl/metric_util.py``):

* TRL ``reward_std`` is the mean over groups of the within-group std until 0.26 (a different
  quantity: ``trl/reward_std``), the Bessel-corrected batch std from 0.27 (ours is the population
  std: equal up to sqrt(B/(B-1))). TRL <= 0.15 ``kl`` averages each sequence's token mean
  (sequence-weighted, ``trl/kl``); 0.16-0.25 it is the token mean of k3, as ours; from 0.26
  ``use_bias_correction_kl`` (default False until 1.9, True in 1.16) multiplies k3 by the ratio.
  TRL's ``clip_ratio/*`` count where the clip *binds* (ratio out of range on the side A pushes): our
  binding fractions, in token units or (``importance_sampling_level="sequence"``, TRL >= 0.20)
  sequence units. TRL averages every metric over ``logging_steps`` optimizer steps, so its per-batch
  minima/maxima are ours only when ``logging_steps == 1``. ``num_tokens`` is cumulative prompt +
  completion tokens (``trl/num_tokens``).
* verl ``actor/pg_clipfrac`` is the token share where the clip binds (``pg_losses2 > pg_losses1``);
  ``actor/ppo_kl`` the k1 mean of log(pi_old/pi_theta) (signed; ours is k3 of the same direction);
  ``actor/kl_loss`` is logged as 0.0 when ``use_kl_loss`` is off, and (like ``actor/pg_loss``) is
  summed over the step's mini-batches from 0.7 and scaled per micro-batch before; a verl row is one
  rollout batch (``ppo_epochs`` x mini-batches optimizer steps). ``rollout_corr/k3_kl`` is k3 of
  KL(pi_rollout || pi_train) (our ``sampler_kl_mean``), ``rollout_corr/kl`` its k1
  (``verl/rollout_corr/kl``); ``training/rollout_probs_diff_*`` compare probabilities, not log-probs
  (own names).
* Tinker ``optim/kl_sample_train_v1`` is the mean of d = log p_sampler - log p_trainer (k1),
  ``_v2`` is mean(d^2)/2 (k2). Per token k3 = e^-d - 1 + d = d^2/2 - d^3/6 + ..., so v2 agrees with
  k3 to second order and is >= 0 like it: v2 fills ``sampler_kl_mean``, v1 is
  ``tinker/optim/kl_sample_train_v1``. ``optim/entropy`` is -mean log p of the sampled tokens (a
  one-sample estimate of the sampler's entropy). ``env/all/*`` are per episode: lengths, token and
  sequence counts are ours only for single-turn episodes (``turns_per_episode == 1``).
* ROLL (``pipeline/rlvr/actor_worker.py`` from its first commit of 2025-05 to main of 2026-08, a
  mean over the step's micro-batches; from v0.2.0 the names carry their reduction,
  ``actor/kl_loss@sum``): ``actor/kl_loss`` is k3 of log pi_base - log pi_theta (clamped to
  +-10) where the base is the reference model, or, with ``enable_reference`` false (its default
  from 0.1.3), the old policy: the pipeline then sets ``ref_log_probs = old_log_probs``, so it is
  a KL to the old policy (``kl_old_mean``). ``actor/approxkl`` is mean (log pi_theta -
  log pi_old)^2 / 2 (k2, k3 to second order), ``actor/policykl`` its signed k1 (own name);
  ``actor/clipfrac`` the share where the clip binds (``surr2 < surr1``), aggregated with
  ``loss_agg_mode`` (seq-mean-token-mean by default: each sequence's share, averaged);
  ``actor/ppo_ratio_*_clipfrac`` count a ratio out of range whatever the advantage's sign (not
  where the clip binds; before 0.2.0 over the padded tensor): own names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from training_hooks.schema import MLFLOW_PREFIX, STEP_COLUMN_NAMES, Step
from training_hooks.tool_settings import IS_LEVEL as _LEVEL
from training_hooks.tool_settings import OPENRLHF as _OPENRLHF
from training_hooks.tool_settings import ROLL as _ROLL
from training_hooks.tool_settings import SWIFT as _SWIFT
from training_hooks.tool_settings import TINKER as _TINKER
from training_hooks.tool_settings import TOOL_NAMES, read_settings
from training_hooks.tool_settings import TRL as _TRL
from training_hooks.tool_settings import VERL as _VERL
from training_hooks.tool_versions import (  # noqa: F401 -- re-exported (metric_map's API)
    DEFAULTS,
    UNSLOTH,
    VERSION_EVIDENCE,
    SourceFormat,
    Version,
    covers,
    default_for,
    detect_format,
    parse_version,
    value_text,
)

Condition = tuple[str, tuple[Any, ...]]  # (setting, the values that give our meaning)


class Derived:
    """Columns the app computes from the step table (an importer may store them directly)."""

    TOKEN_CLIP_BINDING = "token_clip_binding_fraction"  # token_clip_low + token_clip_high
    SEQ_CLIP_BINDING = "seq_clip_binding_fraction"  # seq_clip_low + seq_clip_high
    TOKENS_SEEN = "tokens_seen"  # cumulative num_tokens (an x axis)
    ELAPSED_MIN = "elapsed_min"  # minutes since the run's first step (an x axis)


@dataclass(frozen=True)
class MetricMapping:
    source: str  # "trl", "verl", "tinker"
    name: str  # the foreign metric name
    column: str  # our step column (or a Derived one); "" = differs: kept as "<tool>/<name>"
    since: Version | None = None  # first version with this meaning (None: as old as the name)
    until: Version | None = None  # first version without it (None: still current)
    requires: tuple[Condition, ...] = ()  # settings that must be known and match
    assumes: tuple[Condition, ...] = ()  # tool defaults relied on when the log does not say
    note: str = ""
    dialect: str = ""  # "": the tool's own rule; UNSLOTH: the rule in that dialect only
    yields: bool = False  # another name filling the same column in the log is stored there


@dataclass(frozen=True)
class OffWhen:
    """A metric the tool logs (as 0) although the feature is off: not stored when ``setting``
    has one of ``values``."""

    source: str
    name: str
    setting: str
    values: tuple[Any, ...]
    reason: str


#: the extra our recorder, the TRL and verl hooks and TRL's logs keep the gradient norm under (before
#: clipping); verl's logged ``actor/grad_norm`` is stored there too (the dashboard's panel draws it)
GRAD_NORM = "grad_norm"

_ONE_LOG = (("logging_steps", (1,)),)  # TRL: a row is one optimizer step, not a window mean
_MOA = (("multi_objective_aggregation", ("sum_then_normalize",)),)  # TRL >= 0.27 default
_GROUP_STD = (("scale_rewards", ("group", "none", True, False)),)  # TRL default "group"
_SINGLE_TURN = (("single_turn", (True,)),)  # Tinker: every turns_per_episode == 1
_ONE_UPDATE = (("one_update_per_row", (True,)),)  # verl: ppo_epochs 1 and one mini-batch
_TOKEN_MEAN = (("loss_agg_mode", ("token-mean",)),)  # verl default
_WINDOW = "; TRL averages it over the logging_steps optimizer steps of the row"
_WITH_REF = (("enable_reference", (True,)),)  # ROLL: a reference model's log-probs
_NO_REF = (("enable_reference", (False,)),)  # ROLL: ref_log_probs = old_log_probs
_MICRO = "; mean over the step's micro-batches"
_NO_KL_REWARD = (("kl_in_reward", (False,)),)  # ms-swift: the KL is in the loss, not the reward
_SWIFT_WINDOW = "; ms-swift averages it over the logging_steps optimizer steps of the line"


def _swift_clip(name: str, token_col: str, seq_col: str, what: str) -> tuple[MetricMapping, ...]:
    """ms-swift's clip_ratio/* (``grpo_trainer._compute_loss``, 3.4-4.6): the share of ``what``
    where the clip binds (``(coef_1 < 1 - eps_low) & (A < 0)``, ``(coef_1 > 1 + eps_high) &
    (A > 0)``), a token mean (``masked_batch_mean``) at the token level; at the sequence level
    coef_1 is one ratio a sequence, and before 4.4 so is A: a share of sequences. From 4.4 A is
    per token, so the share is over tokens (each sequence weighed by its length): own name. At
    ``sequence_token`` (GSPO-token) it is over tokens in every version."""
    note = f"share of {what} where the clip binds" + _SWIFT_WINDOW
    seq = (
        "token share of sequences where the sequence ratio's clip binds (ms-swift >= 4.4: "
        "advantages per token, so each sequence is weighed by its length; ours counts sequences)"
    )
    level = _LEVEL
    return (
        MetricMapping(_SWIFT, name, token_col, (3, 4), requires=((level, ("token",)),), note=note),
        MetricMapping(
            _SWIFT, name, seq_col, (3, 4), (4, 4), requires=((level, ("sequence",)),), note=note
        ),
        MetricMapping(_SWIFT, name, "", (4, 4), requires=((level, ("sequence",)),), note=seq),
        MetricMapping(
            _SWIFT,
            name,
            "",
            (3, 4),
            requires=((level, ("sequence_token",)),),
            note="GSPO-token: a token share of sequences where the clip binds (ours counts "
            "sequences)",
        ),
    )


def _trl_clip(name: str, token_col: str, seq_col: str, what: str) -> tuple[MetricMapping, ...]:
    note = f"share of {what} where the clip binds{_WINDOW}"
    return (
        MetricMapping(_TRL, name, token_col, (0, 17), (0, 20), note=note + " (token ratios only)"),
        MetricMapping(_TRL, name, token_col, (0, 20), requires=((_LEVEL, ("token",)),), note=note),
        MetricMapping(_TRL, name, seq_col, (0, 20), requires=((_LEVEL, ("sequence",)),), note=note),
    )


def _trl_liger_clip() -> tuple[MetricMapping, ...]:
    """``clip_ratio`` on TRL's Liger loss path (``compute_liger_loss``, TRL 0.17-1.13): Liger's
    ``metrics[-1]`` = sum(is_clipped * mask) / sum(mask), is_clipped = (ratio < 1 - eps_low and
    A < 0) or (ratio > 1 + eps_high and A > 0) (liger-kernel >= 0.5.6): TRL's own region_mean.
    At the sequence level (TRL >= 1.0) it weighs a sequence by its tokens; for CISPO it is the
    share over the cap (TRL's cispo_clip_ratio); for SAPO / VESPO it is 0. Before 1.0 the Liger
    path ran token ratios only (from 0.20 TRL refused another level)."""
    liger = "TRL's Liger loss path (compute_liger_loss, TRL 0.17-1.13): "
    binds = liger + "share of tokens where the clip binds (TRL's clip_ratio/region_mean)" + _WINDOW
    cispo = liger + "CISPO: share of A > 0 tokens whose ratio exceeds the cap epsilon_high (TRL's "
    cispo += "own path logs it as cispo_clip_ratio); not a clip share"
    gated = liger + "SAPO / VESPO gate the ratio without a clip: Liger logs 0"
    seq = liger + "share of tokens in sequences where GSPO's sequence clip binds: each sequence "
    seq += "weighed by its length (ours counts sequences)" + _WINDOW
    token = Derived.TOKEN_CLIP_BINDING
    rules: tuple[tuple[str, Version, Version, tuple[Condition, ...], str], ...] = (
        ("", (0, 17), (1, 14), (("loss_type", ("cispo",)),), cispo),
        ("", (0, 17), (1, 14), (("loss_type", ("sapo", "vespo")),), gated),
        (token, (0, 17), (1, 0), (), binds),
        (token, (1, 0), (1, 14), ((_LEVEL, ("token",)),), binds),
        ("", (1, 0), (1, 14), ((_LEVEL, ("sequence",)),), seq),
    )
    return tuple(MetricMapping(_TRL, "clip_ratio", *r[:4], note=r[4]) for r in rules)


MAPPINGS: tuple[MetricMapping, ...] = (
    # ---------------------------------------------------------------- TRL GRPOTrainer
    MetricMapping(
        _TRL, "loss", Step.LOSS, note="the Trainer's loss (policy loss + beta*KL)" + _WINDOW
    ),
    MetricMapping(_TRL, "reward", Step.REWARD_MEAN, until=(0, 27), note="mean reward" + _WINDOW),
    MetricMapping(
        _TRL, "reward", Step.REWARD_MEAN, (0, 27), assumes=_MOA, note="mean reward" + _WINDOW
    ),
    MetricMapping(
        _TRL,
        "reward_std",
        Step.REWARD_STD,
        (0, 22),
        (0, 27),
        requires=(("scale_rewards", ("batch",)),),
        note="batch std with Bessel's correction (scale_rewards='batch')" + _WINDOW,
    ),
    MetricMapping(
        _TRL,
        "reward_std",
        "",
        until=(0, 27),
        note="mean over groups of the within-group std: not a batch std",
    ),
    MetricMapping(
        _TRL,
        "reward_std",
        Step.REWARD_STD,
        (0, 27),
        assumes=_MOA,
        note="batch std with Bessel's correction (ours: population std)" + _WINDOW,
    ),
    MetricMapping(_TRL, "frac_reward_zero_std", Step.ZERO_VARIANCE_FRACTION, (0, 18), (0, 22)),
    MetricMapping(
        _TRL,
        "frac_reward_zero_std",
        Step.ZERO_VARIANCE_FRACTION,
        (0, 22),
        (0, 27),
        assumes=_GROUP_STD,
    ),
    MetricMapping(
        _TRL,
        "frac_reward_zero_std",
        Step.ZERO_VARIANCE_FRACTION,
        (0, 27),
        assumes=_GROUP_STD + _MOA,
    ),
    MetricMapping(
        _TRL, "completion_length", Step.LENGTH_MEAN, until=(0, 17), note="mean" + _WINDOW
    ),
    MetricMapping(
        _TRL, "completions/mean_length", Step.LENGTH_MEAN, (0, 17), note="mean" + _WINDOW
    ),
    MetricMapping(
        _TRL, "completions/min_length", Step.LENGTH_MIN, (0, 17), requires=_ONE_LOG, note=_WINDOW
    ),
    MetricMapping(
        _TRL, "completions/max_length", Step.LENGTH_MAX, (0, 17), requires=_ONE_LOG, note=_WINDOW
    ),
    MetricMapping(
        _TRL,
        "completions/clipped_ratio",
        Step.TRUNCATED_FRACTION,
        (0, 17),
        note="share of completions that did not end with EOS" + _WINDOW,
    ),
    MetricMapping(
        _TRL, "kl", "", until=(0, 16), note="mean over sequences of each one's token-mean k3"
    ),
    MetricMapping(_TRL, "kl", Step.KL_REF_MEAN, (0, 16), (0, 26), note="k3, token mean" + _WINDOW),
    MetricMapping(
        _TRL,
        "kl",
        Step.KL_REF_MEAN,
        (0, 26),
        requires=(("use_bias_correction_kl", (False,)),),
        note="k3, token mean; times the importance ratio when use_bias_correction_kl" + _WINDOW,
    ),
    MetricMapping(
        _TRL, "entropy", Step.ENTROPY_MEAN, (0, 20), note="token mean of the full entropy" + _WINDOW
    ),
    *_trl_clip(
        "clip_ratio/low_mean", Step.TOKEN_CLIP_LOW_FRACTION, Step.SEQ_CLIP_LOW_FRACTION, "A<0"
    ),
    *_trl_clip(
        "clip_ratio/high_mean", Step.TOKEN_CLIP_HIGH_FRACTION, Step.SEQ_CLIP_HIGH_FRACTION, "A>0"
    ),
    *_trl_clip(
        "clip_ratio/region_mean", Derived.TOKEN_CLIP_BINDING, Derived.SEQ_CLIP_BINDING, "all"
    ),
    MetricMapping(
        _TRL,
        "clip_ratio",
        "",
        (0, 16),
        (0, 17),
        note="share of tokens whose clipped term exceeds the unclipped one (per_token_loss1 < "
        "per_token_loss2): the ratio out of range on the side the min does not clip, so the clip "
        "does not bind there; not our binding or out-of-range fraction",
    ),
    *_trl_liger_clip(),
    MetricMapping(
        _TRL,
        "num_tokens",
        "",
        (0, 16),
        note="cumulative prompt + completion tokens (num_input_tokens_seen), not per step",
    ),
    MetricMapping(
        _TRL,
        "sampling/sampling_logp_difference/max",
        Step.SAMPLER_LOGP_ABS_DIFF_MAX,
        (0, 23),
        requires=_ONE_LOG,
        note="max |log p_trainer - log p_vLLM| over the batch (vLLM IS correction on)" + _WINDOW,
    ),
    # ------------------------------------------- Unsloth's GRPO trainer (TRL's, its compute_loss)
    MetricMapping(
        _TRL,
        "completion_length",
        Step.LENGTH_MEAN,
        dialect=UNSLOTH,
        yields=True,
        note="Unsloth's compute_loss: mean completion tokens per sequence of each micro-batch "
        "(the main process's)" + _WINDOW + "; TRL's completions/mean_length goes first",
    ),
    MetricMapping(
        _TRL,
        "kl",
        "",
        dialect=UNSLOTH,
        note="Unsloth's compute_loss: per micro-batch, the mean over sequences of each one's "
        "token-mean k3 to the reference (sequence-weighted; ours is the token mean)",
    ),
    MetricMapping(
        _TRL,
        "sampling/sampling_logp_difference/max",
        "",
        dialect=UNSLOTH,
        note="Unsloth's compute_loss: the max of each micro-batch, averaged over them (not the "
        "batch max)",
    ),
    # ---------------------------------------------------------------- verl (file logger, MLflow)
    MetricMapping(_VERL, "critic/score/mean", Step.REWARD_MEAN, note="mean sequence score"),
    MetricMapping(_VERL, "response_length/mean", Step.LENGTH_MEAN),
    MetricMapping(_VERL, "response_length/min", Step.LENGTH_MIN),
    MetricMapping(_VERL, "response_length/max", Step.LENGTH_MAX),
    MetricMapping(
        _VERL,
        "response_length/clip_ratio",
        Step.TRUNCATED_FRACTION,
        note="share of responses that reached max_response_length",
    ),
    MetricMapping(
        _VERL,
        "actor/pg_clipfrac",
        Derived.TOKEN_CLIP_BINDING,
        requires=(("loss_mode", ("vanilla",)),),
        note="token share where the clip binds, mean over micro-batches",
    ),
    MetricMapping(
        _VERL,
        "actor/pg_clipfrac",
        Derived.SEQ_CLIP_BINDING,
        requires=(("loss_mode", ("gspo",)),),
        note="token share where GSPO's sequence clip binds, mean over micro-batches",
    ),
    MetricMapping(
        _VERL,
        "actor/ppo_kl",
        Step.KL_OLD_MEAN,
        note="k1 mean of log pi_old - log pi_theta (signed; ours is k3), mean over micro-batches",
    ),
    MetricMapping(
        _VERL,
        "actor/entropy",
        Step.ENTROPY_MEAN,
        assumes=_TOKEN_MEAN,
        note="aggregated with loss_agg_mode, mean over micro-batches",
    ),
    MetricMapping(
        _VERL,
        "actor/kl_loss",
        Step.KL_REF_MEAN,
        requires=(("use_kl_loss", (True,)), ("kl_loss_type", ("low_var_kl", "k3"))) + _ONE_UPDATE,
        assumes=_TOKEN_MEAN,
        note="k3 (low_var_kl, clamped to +-10) aggregated with loss_agg_mode",
    ),
    MetricMapping(
        _VERL,
        "actor/pg_loss",
        Step.LOSS,
        requires=_ONE_UPDATE,
        note="summed over the row's mini-batches (verl >= 0.7) or scaled per micro-batch",
    ),
    MetricMapping(
        _VERL,
        "actor/grad_norm",
        GRAD_NORM,
        note="L2 norm before clipping (clip_grad_norm_'s return), mean over the row's "
        "optimizer steps when it holds several mini-batches; ours and TRL's grad_norm",
    ),
    MetricMapping(
        _VERL,
        "rollout_corr/k3_kl",
        Step.SAMPLER_KL_MEAN,
        note="k3 of KL(pi_rollout || pi_train), token mean; from verl 0.6.1 the actor recomputes "
        "it against the current policy per micro-batch, so with several mini-batches it also "
        "holds the policy's own drift (actor/ppo_kl)",
    ),
    MetricMapping(
        _VERL,
        "rollout_corr/kl",
        "",
        note="k1 mean of log p_rollout - log p_train (signed); sampler_kl_mean is rollout_corr/k3_kl",
    ),
    # ---------------------------------------------------------------- Tinker cookbook
    MetricMapping(_TINKER, "env/all/reward/total", Step.REWARD_MEAN, note="mean total per episode"),
    MetricMapping(_TINKER, "env/all/ac_tokens_per_turn", Step.LENGTH_MEAN, requires=_SINGLE_TURN),
    MetricMapping(_TINKER, "env/all/total_ac_tokens", Step.NUM_TOKENS, requires=_SINGLE_TURN),
    MetricMapping(_TINKER, "env/all/total_episodes", Step.NUM_SEQUENCES, requires=_SINGLE_TURN),
    MetricMapping(
        _TINKER,
        "optim/kl_sample_train_v2",
        Step.SAMPLER_KL_MEAN,
        note="k2 = mean(d^2)/2, d = log p_sampler - log p_trainer: k3 to second order in d",
    ),
    MetricMapping(
        _TINKER,
        "optim/kl_sample_train_v1",
        "",
        note="k1 = mean(log p_sampler - log p_trainer): signed; sampler_kl_mean is _v2",
    ),
    MetricMapping(
        _TINKER,
        "optim/entropy",
        Step.ENTROPY_MEAN,
        note="-mean log p of the sampled tokens under the sampler (a one-sample estimate)",
    ),
    MetricMapping(
        _TINKER, "reward/mean", Step.REWARD_MEAN, note="a recipe loop's mean reward per rollout"
    ),
    MetricMapping(
        _TINKER, "mean_reward", Step.REWARD_MEAN, note="a loop's mean reward per rollout"
    ),
    MetricMapping(
        _TINKER,
        "loss:sum",
        Step.LOSS,
        note="the loss forward_backward returned, summed over the batch's tokens (Tinker's "
        "losses are sums, not means)",
    ),
    MetricMapping(
        _TINKER,
        "off_policy/lag_batches",
        Step.POLICY_LAG,
        note="batches between the sampling and the trained policy (one optimizer step a batch)",
    ),
    # ---------------------------------------------------------------- ROLL
    *(
        m
        for suffix, since, until in (("", None, (0, 2, 0)), ("@sum", (0, 2, 0), None))
        for m in (
            MetricMapping(
                _ROLL,
                "actor/total_loss" + suffix,
                Step.LOSS,
                since,
                until,
                note="(weighted pg loss + kl_loss_coef x kl_loss when use_kl_loss) x rl_loss_coef "
                "- entropy_loss_coef x entropy, aggregated with loss_agg_mode" + _MICRO,
            ),
            MetricMapping(
                _ROLL,
                "actor/kl_loss" + suffix,
                Step.KL_REF_MEAN,
                since,
                until,
                requires=_WITH_REF,
                note="k3 with the ratio pi_ref/pi_theta (clamped to +-10), aggregated with "
                "loss_agg_mode" + _MICRO,
            ),
            MetricMapping(
                _ROLL,
                "actor/kl_loss" + suffix,
                Step.KL_OLD_MEAN,
                since,
                until,
                requires=_NO_REF,
                note="no reference model: ROLL sets ref_log_probs = old_log_probs, so this is "
                "k3 with the ratio pi_old/pi_theta (ours: pi_theta/pi_old; equal to second "
                "order), clamped to +-10, aggregated with loss_agg_mode" + _MICRO,
            ),
            MetricMapping(
                _ROLL,
                "actor/approxkl" + suffix,
                Step.KL_OLD_MEAN,
                since,
                until,
                yields=True,
                note="k2 = mean (log pi_theta - log pi_old)^2 / 2: k3 to second order, "
                "aggregated with loss_agg_mode" + _MICRO + "; actor/kl_loss goes first",
            ),
            MetricMapping(
                _ROLL,
                "actor/clipfrac" + suffix,
                Derived.TOKEN_CLIP_BINDING,
                since,
                until,
                requires=(("importance_sampling", ("token",)),),
                note="share where the clip binds (surr2 < surr1), aggregated with loss_agg_mode "
                "(seq-mean-token-mean by default: each sequence's share, averaged)" + _MICRO,
            ),
            MetricMapping(
                _ROLL,
                "actor/clipfrac" + suffix,
                Derived.SEQ_CLIP_BINDING,
                since,
                until,
                requires=(("importance_sampling", ("seq",)),),
                note="token share where the sequence ratio's clip binds, aggregated with "
                "loss_agg_mode" + _MICRO,
            ),
        )
    ),
    MetricMapping(
        _ROLL,
        "actor_train/grad_norm",
        GRAD_NORM,
        note="the strategy's <worker>/grad_norm: the norm before clipping, mean over the step's "
        "optimizer steps",
    ),
    MetricMapping(
        _ROLL,
        "critic/score/mean",
        Step.REWARD_MEAN,
        note="mean response score (MetricsManager.add_values_metrics), before any KL penalty",
    ),
    MetricMapping(_ROLL, "token/response_length/mean", Step.LENGTH_MEAN),
    MetricMapping(_ROLL, "token/response_length/max", Step.LENGTH_MAX),
    MetricMapping(_ROLL, "token/response_length/min", Step.LENGTH_MIN),
    # ---------------------------------------------------------------- ms-swift GRPOTrainer
    MetricMapping(
        _SWIFT,
        "loss",
        Step.LOSS,
        note="the Trainer's loss (policy loss + beta x KL, aggregated by loss_type)"
        + _SWIFT_WINDOW,
    ),
    MetricMapping(
        _SWIFT,
        "grad_norm",
        GRAD_NORM,
        note="the Trainer's gradient norm before clipping; ours and TRL's grad_norm",
    ),
    MetricMapping(
        _SWIFT,
        "reward",
        Step.REWARD_MEAN,
        requires=_NO_KL_REWARD,
        note="mean of the group means of the weighted sum of the reward functions"
        + _SWIFT_WINDOW
        + " (with kl_in_reward the reward minus beta x KL)",
    ),
    MetricMapping(
        _SWIFT,
        "reward_std",
        "",
        note="mean over groups of the within-group std (scale_rewards group / none / gdpo; the "
        "batch std with 'batch'): not our batch std",
    ),
    MetricMapping(
        _SWIFT,
        "frac_reward_zero_std",
        Step.ZERO_VARIANCE_FRACTION,
        (3, 7),
        note="share of groups whose rewards' std is 0 (torch.isclose)" + _SWIFT_WINDOW,
    ),
    MetricMapping(
        _SWIFT, "completions/mean_length", Step.LENGTH_MEAN, (3, 3), note="mean" + _SWIFT_WINDOW
    ),
    MetricMapping(
        _SWIFT,
        "completions/min_length",
        Step.LENGTH_MIN,
        (3, 3),
        requires=_ONE_LOG,
        note=_SWIFT_WINDOW,
    ),
    MetricMapping(
        _SWIFT,
        "completions/max_length",
        Step.LENGTH_MAX,
        (3, 3),
        requires=_ONE_LOG,
        note=_SWIFT_WINDOW,
    ),
    MetricMapping(
        _SWIFT,
        "completions/clipped_ratio",
        Step.TRUNCATED_FRACTION,
        (3, 3),
        note="share of completions truncated at max_completion_length" + _SWIFT_WINDOW,
    ),
    MetricMapping(
        _SWIFT,
        "kl",
        Step.KL_REF_MEAN,
        (3, 3),
        requires=_NO_KL_REWARD,
        note="k3 of log pi_ref - log pi_theta, token mean (clamped to +-10 from 4.2)"
        + _SWIFT_WINDOW,
    ),
    MetricMapping(
        _SWIFT,
        "kl",
        "",
        (3, 3),
        requires=(("kl_in_reward", (True,)),),
        note="kl_in_reward: the mean over sequences of each one's summed log pi_old - log pi_ref "
        "(k1, a sum over tokens)",
    ),
    MetricMapping(
        _SWIFT,
        "entropy/mean",
        "",
        (3, 7),
        note="mean over completions of each completion's token-mean entropy (sequence-weighted; "
        "ours is the token mean)",
    ),
    MetricMapping(
        _SWIFT,
        "clip_ratio",
        "",
        (3, 3),
        note="3.3: the token share with the ratio out of range whatever the advantage's sign; from "
        "3.5 the Liger loss path's clip share: neither is one of our binding fractions here",
    ),
    *_swift_clip(
        "clip_ratio/low_mean", Step.TOKEN_CLIP_LOW_FRACTION, Step.SEQ_CLIP_LOW_FRACTION, "A<0"
    ),
    *_swift_clip(
        "clip_ratio/high_mean", Step.TOKEN_CLIP_HIGH_FRACTION, Step.SEQ_CLIP_HIGH_FRACTION, "A>0"
    ),
    *_swift_clip(
        "clip_ratio/region_mean", Derived.TOKEN_CLIP_BINDING, Derived.SEQ_CLIP_BINDING, "all"
    ),
    # ---------------------------------------------------------------- OpenRLHF (0.11)
    MetricMapping(
        _OPENRLHF,
        "rollout/reward_mean",
        Step.REWARD_MEAN,
        note="mean reward of the step's rollout batch (_compute_rollout_stats)",
    ),
    MetricMapping(
        _OPENRLHF,
        "rollout/reward_std",
        Step.REWARD_STD,
        note="the rollout batch's std with Bessel's correction (ours: population std)",
    ),
    MetricMapping(_OPENRLHF, "rollout/response_length_mean", Step.LENGTH_MEAN),
    MetricMapping(
        _OPENRLHF,
        "rollout/truncated_rate",
        Step.TRUNCATED_FRACTION,
        note="share of the rollout batch's responses truncated at the generation limit",
    ),
    MetricMapping(
        _OPENRLHF,
        "ppo_clip_ratio",
        Derived.TOKEN_CLIP_BINDING,
        requires=(("policy_loss_type", ("ppo",)),),
        note="token share where the clip binds (surr2 < surr1), token-weighted over the step's "
        "micro-batches and epochs",
    ),
    MetricMapping(
        _OPENRLHF,
        "ppo_clip_ratio",
        "",
        requires=(("policy_loss_type", ("gspo",)),),
        note="GSPO: the token share of sequences whose sequence ratio's clip binds (each "
        "sequence weighed by its length; ours counts sequences)",
    ),
    MetricMapping(
        _OPENRLHF,
        "ppo_kl",
        Step.KL_OLD_MEAN,
        note="k1 mean of log pi_old - log pi_theta (signed; ours is k3), token-weighted over "
        "the step's micro-batches",
    ),
    MetricMapping(
        _OPENRLHF,
        "actor_grad_norm",
        GRAD_NORM,
        note="the actor's gradient norm at the step's last optimizer step",
    ),
    MetricMapping(
        _OPENRLHF,
        "policy_loss",
        "",
        note="the clipped surrogate alone (no KL or entropy term), token-weighted over the "
        "step's micro-batches and epochs: not the loss optimised",
    ),
    MetricMapping(
        _OPENRLHF,
        "kl",
        "",
        note="with algo.kl.use_loss the KL loss (estimator k1/k2/k3, token mean), else each "
        "sample's mean KL to the reference from the experience maker: its meaning depends on "
        "settings the console does not print",
    ),
)

OFF_WHEN: tuple[OffWhen, ...] = (
    OffWhen(_VERL, "actor/kl_loss", "use_kl_loss", (False,), "use_kl_loss=false: logged 0.0"),
    OffWhen(_TRL, "kl", "beta", (0, 0.0), "beta = 0: no reference model, no KL"),
)

#: Prefixes stripped before lookup: HF's wandb/tensorboard style "train/" namespace.
STRIP_PREFIXES = ("train/",)

_BY_NAME: dict[str, tuple[MetricMapping, ...]] = {}
for _m in MAPPINGS:
    _BY_NAME[_m.name] = (*_BY_NAME.get(_m.name, ()), _m)
del _m


def detect_source(names: Iterable[str]) -> str | None:
    """The tool whose metric names these are (``None`` when nothing identifies one)."""
    names = set(names)
    if any(n.startswith(("actor/", "critic/", "timing_s/", "response_length/")) for n in names):
        return _VERL
    if any(n.startswith(("env/all/", "optim/kl_sample_train")) for n in names) or (
        "reward/mean" in names and "progress/batch" in names
    ):
        return _TINKER
    trl = {m.name for m in MAPPINGS if m.source == _TRL} | {e[1] for e in VERSION_EVIDENCE}
    return _TRL if names & trl else None


# ------------------------------------------------------------------------- resolving a name


@dataclass(frozen=True)
class Context:
    """What is known about a log: its format (tool, version range) and settings (a missing key
    is unknown). ``lenient`` ignores versions and unknown settings: the name's newest meaning
    that no known setting contradicts (the dashboard's name-only lookup)."""

    fmt: SourceFormat
    settings: Mapping[str, Any] = field(default_factory=dict)
    lenient: bool = False


@dataclass(frozen=True)
class Resolution:
    name: str  # the foreign name
    column: str | None  # our column when mapped
    stored: str | None  # where its values go (our column, its name, "<tool>/<name>"); None: dropped
    reason: str = ""  # why it is not mapped, or how its meaning differs
    assumed: tuple[str, ...] = ()  # tool defaults relied on
    yields: bool = False  # another name mapped to ``column`` takes it first


def resolve(name: str, ctx: Context) -> Resolution:
    """Where a foreign metric goes under ``ctx`` (see the module docstring)."""
    if name.startswith(MLFLOW_PREFIX):
        col = name[len(MLFLOW_PREFIX) :]
        return Resolution(name, col, col)
    key = _lookup_key(name)
    for off in OFF_WHEN:
        if (
            off.name == key
            and off.source == ctx.fmt.source
            and off.setting in ctx.settings
            and _matches(ctx.settings[off.setting], off.values)
        ):
            return Resolution(name, None, None, off.reason)
    cands = [m for m in _BY_NAME.get(key, ()) if m.source == ctx.fmt.source or not ctx.fmt.source]
    own = [m for m in cands if m.dialect and m.dialect == ctx.fmt.dialect]
    cands = own or [m for m in cands if not m.dialect]  # a dialect's rule replaces the tool's
    if not cands:
        return Resolution(name, None, _own_name(ctx.fmt.source, name))
    if ctx.lenient:
        return _resolve_lenient(name, cands, ctx)
    return _resolve_strict(name, cands, ctx)


def _lookup_key(name: str) -> str:
    for prefix in STRIP_PREFIXES:
        if name.startswith(prefix) and name[len(prefix) :] in _BY_NAME:
            return name[len(prefix) :]
    return name


def _matches(value: Any, values: tuple[Any, ...]) -> bool:
    # 1 == True in Python: compare booleans by identity so "use_kl_loss: 1" is not True
    return any(v is value if isinstance(v, bool) else v == value for v in values)


def _own_name(source: str | None, name: str) -> str:
    """A foreign name as stored when it is not ours: never one of our column names."""
    if name in STEP_COLUMN_NAMES or name in vars(Derived).values():
        return f"{source or 'foreign'}/{name}"
    return name


def _resolve_lenient(name: str, cands: list[MetricMapping], ctx: Context) -> Resolution:
    newest_first = sorted(cands, key=lambda m: m.since or (), reverse=True)
    for m in newest_first:
        conds = m.requires + m.assumes
        if m.column and not any(
            s in ctx.settings and not _matches(ctx.settings[s], v) for s, v in conds
        ):
            return Resolution(name, m.column, m.column, m.note)
    return Resolution(name, None, name)


def _resolve_strict(name: str, cands: list[MetricMapping], ctx: Context) -> Resolution:
    """Every version segment of the log's range must pick a mapping (the first whose settings
    hold, a setting no file states taken from the tool's default where one decides it over the
    segment) and all must agree on a column; otherwise the name is kept as ``<tool>/<name>``.

    The name is in the log, so only the versions that log it are possible: the range is cut to
    the name's own (its earliest ``since`` to its latest ``until``; a floor says when a key
    appeared, not that its meaning is in doubt)."""
    fmt = ctx.fmt
    lo, hi = _existence(cands, fmt.since, fmt.until)
    if lo is not None and hi is not None and lo >= hi:
        span = SourceFormat("", "", *_existence(cands, None, None)).range_text
        return Resolution(
            name,
            None,
            f"{fmt.source}/{name}",
            f"{_tool_name(fmt.source)} {fmt.range_text} does not log {name} (it logs it in "
            f"{span}): another trainer's key, its meaning here unknown",
        )
    cuts = sorted({b for m in cands for b in (m.since, m.until) if b and _inside(b, lo, hi)})
    bounds = [lo, *cuts, hi]
    columns, assumed, notes, yields = set(), [], [], False
    for a, b in zip(bounds, bounds[1:], strict=False):
        here = [m for m in cands if covers(m.since, m.until, a, b)]
        picked, why, defaults = _pick(here, ctx, a, b)
        if picked is None:
            return Resolution(name, None, f"{fmt.source}/{name}", why)
        columns.add(picked.column)
        notes.append(picked.note)
        yields = yields or picked.yields
        assumed += [
            f"{s} = {value_text(v[0])} (tool default)"
            for s, v in picked.assumes
            if s not in ctx.settings
        ] + defaults
    if len(columns) != 1:
        return Resolution(
            name,
            None,
            f"{fmt.source}/{name}",
            f"its meaning changed within this log's possible versions ({fmt.range_text})",
        )
    column = columns.pop()
    if not column:
        return Resolution(name, None, f"{fmt.source}/{name}", notes[0])
    note = "; ".join(dict.fromkeys(n for n in notes if n))
    return Resolution(name, column, column, note, tuple(dict.fromkeys(assumed)), yields)


def _existence(
    cands: list[MetricMapping], lo: Version | None, hi: Version | None
) -> tuple[Version | None, Version | None]:
    """[lo, hi) cut to the versions that log the name (every mapping of it bounded there)."""
    if cands and all(m.since for m in cands):
        floor = min(m.since for m in cands if m.since)
        lo = floor if lo is None or floor > lo else lo
    if cands and all(m.until for m in cands):
        ceiling = max(m.until for m in cands if m.until)
        hi = ceiling if hi is None or ceiling < hi else hi
    return lo, hi


def _tool_name(source: str) -> str:
    return TOOL_NAMES.get(source, source or "the tool")


def _inside(v: Version, lo: Version | None, hi: Version | None) -> bool:
    return (lo is None or v > lo) and (hi is None or v < hi)


def _pick(
    here: list[MetricMapping], ctx: Context, a: Version | None, b: Version | None
) -> tuple[MetricMapping | None, str, list[str]]:
    """The first mapping of ``here`` whose settings hold on [a, b), the defaults it relied on."""
    if not here:
        why = f"its meaning is not known for this log's version ({ctx.fmt.range_text})"
        return None, why, []
    all_missing: list[str] = []
    wrong_first = ""
    for m in here:
        missing, defaults = [], []
        for s, values in m.requires:
            if s in ctx.settings:
                continue
            got = default_for(ctx.fmt, s, a, b)
            if got is not None and _matches(got[0], values):
                defaults.append(f"{s} = {value_text(got[0])} ({got[1]})")
            else:
                missing.append(s)
        wrong = [
            s
            for s, v in m.requires + m.assumes
            if s in ctx.settings and not _matches(ctx.settings[s], v)
        ]
        if not missing and not wrong:
            return m, "", defaults
        if m.column or not any(x.column for x in here):  # a setting that could map it
            all_missing += [x for x in missing if x not in all_missing]
        if wrong and not wrong_first:
            wrong_first = f"{wrong[0]} = {value_text(ctx.settings[wrong[0]])} changes its meaning"
    if not all_missing:  # every mapping's stated settings rule it out
        return None, wrong_first or "its settings rule out every meaning known", []
    # a setting no file states leaves the meaning open (every one any mapping here needs, named)
    changes = [
        x
        for x in all_missing
        if any(d.setting == x and d.source == ctx.fmt.source for d in DEFAULTS)
    ]
    why = f"{', '.join(all_missing)} not given (its meaning depends on it" + (
        f"; {_tool_name(ctx.fmt.source)}'s default for it changes within {ctx.fmt.range_text})"
        if changes
        else ")"
    )
    return None, why, []


# ------------------------------------------------------------------------- the dashboard's calls


def map_metric_name(name: str, *, sequence_level: bool = False) -> str:
    """Our column for a foreign metric name by name alone (lenient: the newest meaning; versions
    and settings unchecked); unknown names come back unchanged. ``gspo_dash/<column>`` (our hooks'
    MLflow keys) -> ``<column>``; ``train/reward`` -> ``reward_mean``. ``sequence_level``: TRL
    ``importance_sampling_level="sequence"``, so TRL's clip metrics map to sequence units."""
    ctx = Context(SourceFormat("", ""), {_LEVEL: "sequence" if sequence_level else "token"}, True)
    return resolve(name, ctx).column or name


def map_metric_names(
    names: Iterable[str], *, sequence_level: bool = False, settings: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """{foreign name: column} for every name; when two names map to one column, ours wins
    (``gspo_dash/...``), then the first seen, and the loser keeps its own name.

    With ``settings`` (e.g. an MLflow run's params), names are resolved as an import resolves them:
    the tool and version range from the names, the settings from ``settings`` (``SETTING_KEYS``),
    and a name whose meaning cannot be pinned is kept as ``<tool>/<name>``. Without, by name alone
    (``map_metric_name``)."""
    names = list(names)
    ctx = None
    if settings is not None:
        source = detect_source(names) or ""
        known = {k: s.value for k, s in read_settings(source, settings, "params").items()}
        ctx = Context(detect_format(source, names), known)
    out: dict[str, str] = {}
    taken: dict[str, str] = {}
    for name in sorted(names, key=lambda n: (not n.startswith(MLFLOW_PREFIX), n)):
        if ctx is None:
            column = map_metric_name(name, sequence_level=sequence_level)
        else:
            column = resolve(name, ctx).stored or name
        if column in taken:
            column = name
        taken[column] = name
        out[name] = column
    return out


def candidate_columns(source: str, name: str) -> set[str]:
    """Our columns ``source``'s metric ``name`` fills in some version or setting (empty when
    none): where a name kept as ``<tool>/<name>`` would go if its meaning were pinned."""
    key = _lookup_key(name)
    return {m.column for m in _BY_NAME.get(key, ()) if m.source == source and m.column}


def is_known_column(column: str) -> bool:
    """True for a declared step column, a derived one or ``GRAD_NORM``."""
    return column in STEP_COLUMN_NAMES or column in vars(Derived).values() or column == GRAD_NORM
