"""Metric names of other trainers -> gspo-dash step columns, in one table.

Used by the dashboard for runs that live only in an MLflow store (TRL's ``GRPOTrainer`` with
``report_to="mlflow"``, verl, our own hooks' MLflow sink) and meant to be reused by the importers
(TRL ``trainer_state.json``, Tinker ``metrics.jsonl``, verl's file logger). A name not in the table
keeps its own name and is drawn as an extra metric.

Definitions differ in places; the ``note`` of each entry says how, so a mapped curve is never read
as more than it is:

* TRL ``clip_ratio/region_mean`` and verl ``actor/pg_clipfrac`` count tokens where the clip *binds*
  (ratio below 1-eps with A<0, or above 1+eps with A>0). Our ``token_clip_fraction`` counts every
  token outside the range, whatever A's sign, so these map to the derived column
  ``Derived.TOKEN_CLIP_BINDING`` (= our low + high binding fractions), not to it.
* TRL 1.16 ``reward_std`` is the Bessel-corrected std over the whole batch; ours is the population
  std over the step's sequences (equal up to a factor sqrt(B/(B-1))).
* TRL's ``kl`` is the k3 estimate of KL(pi_theta || pi_ref), as ours, except that TRL 1.16 weights
  it by the importance ratio when ``use_bias_correction_kl`` is on (its default). verl's ``actor/ppo_kl`` is
  the k1 mean of log(pi_old/pi_theta), a (signed) estimate of the same direction as ``kl_old_mean``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from training_hooks.schema import MLFLOW_PREFIX, STEP_COLUMN_NAMES, Step


class Derived:
    """Columns the app computes from the step table (never stored on disk)."""

    TOKEN_CLIP_BINDING = "token_clip_binding_fraction"  # token_clip_low + token_clip_high
    SEQ_CLIP_BINDING = "seq_clip_binding_fraction"  # seq_clip_low + seq_clip_high
    TOKENS_SEEN = "tokens_seen"  # cumulative num_tokens (an x axis)
    ELAPSED_MIN = "elapsed_min"  # minutes since the run's first step (an x axis)


@dataclass(frozen=True)
class MetricMapping:
    source: str  # "trl", "verl", "tinker", "gspo_dash"
    name: str  # the foreign metric name
    column: str  # our step column (or a Derived column)
    note: str = ""


_TRL = "trl"
_VERL = "verl"
_TINKER = "tinker"

MAPPINGS: tuple[MetricMapping, ...] = (
    # TRL GRPOTrainer (names as logged by transformers' MLflowCallback / trainer_state.json)
    MetricMapping(_TRL, "loss", Step.LOSS),
    MetricMapping(_TRL, "reward", Step.REWARD_MEAN),
    MetricMapping(_TRL, "reward_std", Step.REWARD_STD, "batch std with Bessel's correction"),
    MetricMapping(_TRL, "frac_reward_zero_std", Step.ZERO_VARIANCE_FRACTION),
    MetricMapping(_TRL, "completions/mean_length", Step.LENGTH_MEAN),
    MetricMapping(_TRL, "completions/min_length", Step.LENGTH_MIN),
    MetricMapping(_TRL, "completions/max_length", Step.LENGTH_MAX),
    MetricMapping(_TRL, "completions/clipped_ratio", Step.TRUNCATED_FRACTION),
    MetricMapping(
        _TRL, "kl", Step.KL_REF_MEAN, "k3, token mean; ratio-weighted if use_bias_correction_kl"
    ),
    MetricMapping(_TRL, "entropy", Step.ENTROPY_MEAN),
    MetricMapping(_TRL, "clip_ratio/low_mean", Step.TOKEN_CLIP_LOW_FRACTION),
    MetricMapping(_TRL, "clip_ratio/high_mean", Step.TOKEN_CLIP_HIGH_FRACTION),
    MetricMapping(
        _TRL, "clip_ratio/region_mean", Derived.TOKEN_CLIP_BINDING, "where the clip binds"
    ),
    # verl (metrics dict of the PPO/GRPO trainer)
    MetricMapping(_VERL, "actor/pg_loss", Step.LOSS),
    MetricMapping(_VERL, "actor/pg_clipfrac", Derived.TOKEN_CLIP_BINDING, "where the clip binds"),
    MetricMapping(_VERL, "actor/ppo_kl", Step.KL_OLD_MEAN, "k1 estimate, signed"),
    MetricMapping(_VERL, "actor/kl_loss", Step.KL_REF_MEAN),
    MetricMapping(_VERL, "actor/entropy", Step.ENTROPY_MEAN),
    MetricMapping(_VERL, "response_length/mean", Step.LENGTH_MEAN),
    MetricMapping(_VERL, "response_length/min", Step.LENGTH_MIN),
    MetricMapping(_VERL, "response_length/max", Step.LENGTH_MAX),
    MetricMapping(_VERL, "response_length/clip_ratio", Step.TRUNCATED_FRACTION),
    MetricMapping(_VERL, "critic/score/mean", Step.REWARD_MEAN),
    # Tinker cookbook (metrics.jsonl)
    MetricMapping(_TINKER, "env/all/by_group/frac_mixed", "", "1 - zero-variance fraction"),
    MetricMapping(_TINKER, "optim/kl_sample_train_v1", Step.KL_OLD_MEAN),
    MetricMapping(_TINKER, "optim/entropy", Step.ENTROPY_MEAN),
)

#: Prefixes stripped before lookup: HF's wandb/tensorboard style "train/" namespace.
STRIP_PREFIXES = ("train/",)

_BY_NAME: dict[str, MetricMapping] = {m.name: m for m in MAPPINGS if m.column}

#: TRL under ``importance_sampling_level="sequence"`` (its GSPO): ``clip_ratio/*`` test the
#: *sequence* ratio, so they are our sequence-unit fractions.
TRL_SEQUENCE_LEVEL_CLIP = {
    "clip_ratio/low_mean": Step.SEQ_CLIP_LOW_FRACTION,
    "clip_ratio/high_mean": Step.SEQ_CLIP_HIGH_FRACTION,
    "clip_ratio/region_mean": Derived.SEQ_CLIP_BINDING,
}


def map_metric_name(name: str, *, sequence_level: bool = False) -> str:
    """Our column for a foreign metric name; unknown names come back unchanged.

    ``gspo_dash/<column>`` (our hooks' MLflow keys) -> ``<column>``; ``train/reward`` -> ``reward_mean``.
    ``sequence_level``: the run clipped a sequence ratio (TRL ``importance_sampling_level="sequence"``),
    so TRL's clip metrics map to the sequence-unit columns.
    """
    if name.startswith(MLFLOW_PREFIX):
        return name[len(MLFLOW_PREFIX) :]
    for prefix in STRIP_PREFIXES:
        if name.startswith(prefix) and name[len(prefix) :] in _BY_NAME:
            name = name[len(prefix) :]
            break
    if sequence_level and name in TRL_SEQUENCE_LEVEL_CLIP:
        return TRL_SEQUENCE_LEVEL_CLIP[name]
    mapping = _BY_NAME.get(name)
    return mapping.column if mapping else name


def map_metric_names(names: Iterable[str], *, sequence_level: bool = False) -> dict[str, str]:
    """{foreign name: column} for every name; when two names map to one column, ours wins
    (``gspo_dash/...``), then the first seen, and the loser keeps its own name."""
    out: dict[str, str] = {}
    taken: dict[str, str] = {}
    ordered = sorted(names, key=lambda n: (not n.startswith(MLFLOW_PREFIX), n))
    for name in ordered:
        column = map_metric_name(name, sequence_level=sequence_level)
        if column in taken:
            column = name
        taken[column] = name
        out[name] = column
    return out


def is_known_column(column: str) -> bool:
    """True for a declared step column or a derived one."""
    return column in STEP_COLUMN_NAMES or column in vars(Derived).values()
