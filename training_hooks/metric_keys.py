"""The table of every foreign metric name the importers know (``MAPPINGS``), by tool and version:
the name a tool logs, our column it fills (or none), and the settings and versions under which it
has that meaning; ``OFF_WHEN``, the settings under which a name logs nothing. Data only: what to
do with a name is ``training_hooks.metric_map``'s (which re-exports these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from training_hooks.schema import Derived, Step
from training_hooks.tool_settings import IS_LEVEL as _LEVEL
from training_hooks.tool_settings import OPENRLHF as _OPENRLHF
from training_hooks.tool_settings import ROLL as _ROLL
from training_hooks.tool_settings import SWIFT as _SWIFT
from training_hooks.tool_settings import TINKER as _TINKER
from training_hooks.tool_settings import TRL as _TRL
from training_hooks.tool_settings import VERL as _VERL
from training_hooks.tool_versions import UNSLOTH, Version

Condition = tuple[str, tuple[Any, ...]]  # (setting, the values that give our meaning)


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
