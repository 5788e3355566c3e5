"""Metric names of other trainers -> gspo-dash step columns: one table, per tool and version.

Used by the importers (TRL ``trainer_state.json``, Tinker ``metrics.jsonl``, verl's file logger)
and by the dashboard for runs that live only in an MLflow store. Torch-free.

Each ``MetricMapping`` says which versions of the tool it holds for (``since`` / ``until``), which
settings must be known to hold (``requires``: the clip unit, a default that changed between
versions), which tool defaults it relies on when the log does not say (``assumes``; the import
report lists them), and how the meaning differs from our column (``note``). A name whose meaning
differs from our column in the detected version (``column=""``), or whose meaning cannot be pinned
(the version range spans a change, a required setting is unknown), keeps the prefixed name
``<tool>/<name>`` and never fills ours. Names not in the table keep their own names. A metric the
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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from training_hooks.schema import MLFLOW_PREFIX, STEP_COLUMN_NAMES, Step
from training_hooks.tool_settings import IS_LEVEL as _LEVEL
from training_hooks.tool_settings import TINKER as _TINKER
from training_hooks.tool_settings import TRL as _TRL
from training_hooks.tool_settings import VERL as _VERL
from training_hooks.tool_settings import read_settings

Version = tuple[int, ...]
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

    @property
    def versions(self) -> str:
        """The versions this holds for, as text (``"trl >=0.17,<0.27"``, ``"trl all versions"``)."""
        parts = [f">={_vtext(self.since)}"] if self.since else []
        parts += [f"<{_vtext(self.until)}"] if self.until else []
        return f"{self.source} {','.join(parts) or 'all versions'}"


@dataclass(frozen=True)
class OffWhen:
    """A metric the tool logs (as 0) although the feature is off: not stored when ``setting``
    has one of ``values``."""

    source: str
    name: str
    setting: str
    values: tuple[Any, ...]
    reason: str


_ONE_LOG = (("logging_steps", (1,)),)  # TRL: a row is one optimizer step, not a window mean
_MOA = (("multi_objective_aggregation", ("sum_then_normalize",)),)  # TRL >= 0.27 default
_GROUP_STD = (("scale_rewards", ("group", "none", True, False)),)  # TRL default "group"
_SINGLE_TURN = (("single_turn", (True,)),)  # Tinker: every turns_per_episode == 1
_ONE_UPDATE = (("one_update_per_row", (True,)),)  # verl: ppo_epochs 1 and one mini-batch
_TOKEN_MEAN = (("loss_agg_mode", ("token-mean",)),)  # verl default
_WINDOW = "; TRL averages it over the logging_steps optimizer steps of the row"


def _trl_clip(name: str, token_col: str, seq_col: str, what: str) -> tuple[MetricMapping, ...]:
    note = f"share of {what} where the clip binds{_WINDOW}"
    return (
        MetricMapping(_TRL, name, token_col, (0, 17), (0, 20), note=note + " (token ratios only)"),
        MetricMapping(_TRL, name, token_col, (0, 20), requires=((_LEVEL, ("token",)),), note=note),
        MetricMapping(_TRL, name, seq_col, (0, 20), requires=((_LEVEL, ("sequence",)),), note=note),
    )


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


# ------------------------------------------------------------------------- formats and versions


@dataclass(frozen=True)
class SourceFormat:
    """What a log's names (and files) say about the tool and its version."""

    source: str
    label: str  # e.g. "TRL >=0.17,<0.27 trainer_state.json"
    since: Version | None = None  # the version is >= this
    until: Version | None = None  # ... and < this
    evidence: tuple[str, ...] = ()
    version: str | None = None  # exact, when a file says so

    @property
    def version_range(self) -> str | None:
        parts = [f">={_vtext(self.since)}"] if self.since else []
        parts += [f"<{_vtext(self.until)}"] if self.until else []
        return ",".join(parts) or None


#: (tool, a metric name present, absent name that voids the rule or "", since, until, why).
VERSION_EVIDENCE: tuple[tuple[str, str, str, Version | None, Version | None, str], ...] = (
    (_TRL, "completion_length", "", None, (0, 17), "completion_length: TRL <= 0.16"),
    (_TRL, "completion_length", "num_tokens", None, (0, 16), "no num_tokens: TRL <= 0.15"),
    (_TRL, "num_tokens", "", (0, 16), None, "num_tokens: TRL >= 0.16"),
    (_TRL, "completions/mean_length", "", (0, 17), None, "completions/*: TRL >= 0.17"),
    (_TRL, "frac_reward_zero_std", "", (0, 18), None, "frac_reward_zero_std: TRL >= 0.18"),
    (_TRL, "entropy", "", (0, 20), None, "entropy: TRL >= 0.20"),
    (_TRL, "sampling/sampling_logp_difference/mean", "", (0, 23), None, "sampling/*: TRL >= 0.23"),
    (_TRL, "step_time", "", (0, 26), None, "step_time: TRL >= 0.26"),
    (_TRL, "cispo_clip_ratio", "", (0, 27), None, "cispo_clip_ratio: TRL >= 0.27"),
    (_TRL, "tools/call_frequency", "", (0, 27), None, "tools/*: TRL >= 0.27"),
    (_TRL, "vespo/phi_seq_mean", "", (1, 0), None, "vespo/*: TRL >= 1.0"),
)

_FORMAT_LABELS = {
    _TRL: "TRL GRPOTrainer log",
    _VERL: "verl metrics",
    _TINKER: "Tinker cookbook metrics",
}

#: Named generations of a tool's log format: (since, until, name).
GENERATIONS: dict[str, tuple[tuple[Version | None, Version | None, str], ...]] = {
    _TRL: (
        (None, (0, 16), "TRL <=0.15 / Unsloth"),
        ((0, 16), (1, 0), "TRL 0.16-0.2x"),
        ((1, 0), None, "TRL 1.x"),
    ),
}


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
    if names & trl:
        return _TRL
    return None


def detect_format(source: str, names: Iterable[str], version: str | None = None) -> SourceFormat:
    """The version range the metric names imply (``VERSION_EVIDENCE``), narrowed to ``version``
    when a file beside the log states it."""
    names = set(names)
    since: Version | None = None
    until: Version | None = None
    evidence = []
    for tool, name, unless, lo, hi, why in VERSION_EVIDENCE:
        if tool != source or name not in names or (unless and unless in names):
            continue
        evidence.append(why)
        since = lo if lo is not None and (since is None or lo > since) else since
        until = hi if hi is not None and (until is None or hi < until) else until
    exact = parse_version(version) if version else None
    # names of different generations (a fork, Unsloth): no version has them all; say which
    disagree = exact is None and since is not None and until is not None and since >= until
    if disagree:
        since = until = None
    if exact is not None:
        since, until = exact, (*exact[:-1], exact[-1] + 1)
        evidence.append(f"version {version} stated beside the log")
    fmt = SourceFormat(source, "", since, until, tuple(evidence), version)
    label = _label(fmt, names)
    if disagree:
        label += f" (key families of different versions: {'; '.join(evidence)})"
    return SourceFormat(source, label, since, until, tuple(evidence), version)


def _label(fmt: SourceFormat, names: set[str]) -> str:
    """The format's name, its generation where the version range lies within one, the range."""
    label = _FORMAT_LABELS.get(fmt.source, fmt.source)
    if fmt.source == _TINKER:
        label += " (rl/train.py)" if any(n.startswith("env/all/") for n in names) else " (a loop)"
    for lo, hi, name in GENERATIONS.get(fmt.source, ()):
        if _covers(MetricMapping(fmt.source, "", "", lo, hi), fmt.since, fmt.until):
            label = name
    return f"{label} ({fmt.version_range})" if fmt.version_range else label


def parse_version(text: str) -> Version | None:
    """ "0.23.0" -> (0, 23, 0); the leading numeric parts only; None when there are none."""
    parts = []
    for bit in str(text).strip().lstrip("v").split("."):
        digits = "".join(c for c in bit if c.isdigit()) if bit[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def _vtext(v: Version | None) -> str:
    return ".".join(map(str, v)) if v else "?"


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
            and _known_in(ctx, off.setting, off.values)
        ):
            return Resolution(name, None, None, off.reason)
    cands = [m for m in _BY_NAME.get(key, ()) if m.source == ctx.fmt.source or not ctx.fmt.source]
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


def _known_in(ctx: Context, setting: str, values: tuple[Any, ...]) -> bool:
    return setting in ctx.settings and _matches(ctx.settings[setting], values)


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
    hold) and all must agree on a column; otherwise the name is kept as ``<tool>/<name>``."""
    lo, hi = ctx.fmt.since, ctx.fmt.until
    cuts = sorted({b for m in cands for b in (m.since, m.until) if b and _inside(b, lo, hi)})
    bounds = [lo, *cuts, hi]
    columns, assumed, notes = set(), [], []
    for a, b in zip(bounds, bounds[1:], strict=False):
        here = [m for m in cands if _covers(m, a, b)]
        picked, why = _pick(here, ctx)
        if picked is None:
            return Resolution(name, None, f"{ctx.fmt.source}/{name}", why)
        columns.add(picked.column)
        notes.append(picked.note)
        assumed += [
            f"{s} = {v[0]!r} (tool default)" for s, v in picked.assumes if s not in ctx.settings
        ]
    if len(columns) != 1:
        return Resolution(
            name,
            None,
            f"{ctx.fmt.source}/{name}",
            f"its meaning changed within this log's possible versions ({ctx.fmt.version_range})",
        )
    column = columns.pop()
    if not column:
        return Resolution(name, None, f"{ctx.fmt.source}/{name}", notes[0])
    note = "; ".join(dict.fromkeys(n for n in notes if n))
    return Resolution(name, column, column, note, tuple(dict.fromkeys(assumed)))


def _inside(v: Version, lo: Version | None, hi: Version | None) -> bool:
    return (lo is None or v > lo) and (hi is None or v < hi)


def _covers(m: MetricMapping, a: Version | None, b: Version | None) -> bool:
    """The mapping holds on the whole segment [a, b) (None = unbounded)."""
    lo_ok = m.since is None or (a is not None and a >= m.since)
    hi_ok = m.until is None or (b is not None and b <= m.until)
    return lo_ok and hi_ok


def _pick(here: list[MetricMapping], ctx: Context) -> tuple[MetricMapping | None, str]:
    if not here:
        return None, f"its meaning is not known for this log's version ({ctx.fmt.version_range})"
    why = ""
    for m in here:
        missing = [s for s, _ in m.requires if s not in ctx.settings]
        wrong = [
            s
            for s, v in m.requires + m.assumes
            if s in ctx.settings and not _matches(ctx.settings[s], v)
        ]
        if not missing and not wrong:
            return m, ""
        if not why:
            why = (
                f"{', '.join(missing)} not given (its meaning depends on it)"
                if missing
                else f"{wrong[0]} = {ctx.settings[wrong[0]]!r} changes its meaning"
            )
    return None, why


# ------------------------------------------------------------------------- the dashboard's calls


def map_metric_name(name: str, *, sequence_level: bool = False) -> str:
    """Our column for a foreign metric name by name alone (lenient: the newest meaning; versions
    and settings unchecked); unknown names come back unchanged. ``gspo_dash/<column>`` (our hooks'
    MLflow keys) -> ``<column>``; ``train/reward`` -> ``reward_mean``. ``sequence_level``: TRL
    ``importance_sampling_level="sequence"``, so TRL's clip metrics map to sequence units."""
    ctx = Context(SourceFormat("", ""), {_LEVEL: "sequence" if sequence_level else "token"}, True)
    res = resolve(name, ctx)
    return res.column or name


def map_metric_names(
    names: Iterable[str],
    *,
    sequence_level: bool = False,
    settings: Mapping[str, Any] | None = None,
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


def is_known_column(column: str) -> bool:
    """True for a declared step column or a derived one."""
    return column in STEP_COLUMN_NAMES or column in vars(Derived).values()
