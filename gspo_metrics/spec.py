"""Torch-free declarations shared by the math, the hooks, the on-disk schema and the app.

Importing this module imports no torch (``gspo_metrics/__init__`` loads its torch parts lazily),
so ``training_hooks.schema`` and the dashboard can read these names on a laptop.

``PER_SEQUENCE`` is the one list of per-sequence numbers. Everything else reads it:
``SEQUENCE_DIAGNOSTICS`` (what ``sequence_diagnostics`` returns, in this order), the row of each
diagnostic in the routes' stack, the recorder's per-sequence rows and columns
(``training_hooks.compute``, ``training_hooks.layout.SEQ_ROWS``), the sequence table's columns
``training_hooks.schema.Seq`` / ``SEQUENCE_COLUMNS`` (in this order on disk), the step means and
their reduction (``training_hooks.step_reduction``).

Adding a diagnostic is one entry here (its column, type, meaning, its step mean if any, the
tables' version that adds it) plus its form in ``gspo_metrics.diagnostics._diagnostics`` (the
import fails while a declared diagnostic has none) and, in the tests, its equation in the oracle
(``tests/diagnostics_oracle.py``); the test comparing the two iterates over this list. The sequence table's column, the step table's mean column, the step
reduction and the tables' version follow from the entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: GSPO's sequence-unit clip range (eps_low, eps_high): s outside [1 - 3e-4, 1 + 4e-4] is clipped
#: (Zheng et al. 2025, section 5.1; Tinker's defaults).
GSPO_EPS: tuple[float, float] = (3e-4, 4e-4)
#: GRPO's / PPO's token-unit clip range (eps_low, eps_high): r_t outside [0.8, 1.2] is clipped.
GRPO_EPS: tuple[float, float] = (0.2, 0.2)


@dataclass(frozen=True)
class StepMean:
    """A per-sequence value's mean over a step's sequences S (all ranks): a step-table column."""

    column: str
    """The step-table column (float64)."""
    weight: Literal["sequences", "tokens"]
    """"sequences": the plain mean over S; "tokens": each sequence weighted by its masked length
    |M_b|, i.e. the mean over the step's masked tokens M (for a value that is itself a per-token
    mean or fraction)."""
    meaning: str
    """One line: what the step column holds."""


@dataclass(frozen=True)
class SequenceValue:
    """One per-sequence number: a column of the sequence table (one row per sequence b), and the
    step-table column of its mean if it has one (what reads it: the module docstring)."""

    name: str
    """The column name, and the key in ``sequence_diagnostics``' result."""
    dtype: Literal["int32", "float32", "bool"]
    """The sequence table's Arrow type. Whole numbers ("int32") are int64 tensors in
    ``sequence_diagnostics``' result, the others (flags included) floating."""
    meaning: str
    """One line: what the number is (r_t = pi_theta / pi_old of token t, s = GSPO's ratio)."""
    source: Literal["diagnostics", "caller"] = "diagnostics"
    """"diagnostics": computed by ``sequence_diagnostics``; "caller": given to ``log_step`` (the
    attenuation: read from the ``LossOutput`` given as its ``loss``)."""
    step_mean: StepMean | None = None
    """Its mean over the step, a step-table column; None: no such column (or one reduced
    otherwise, written out in ``training_hooks.step_reduction``)."""
    since: int = 1
    """The tables' version (``training_hooks.columns.SCHEMA_VERSION``) that added it: a value
    added later says the next version here, and the tables' version follows."""


_S: Literal["sequences"] = "sequences"
_T: Literal["tokens"] = "tokens"
_SEQ_RANGE = (
    "[1-eps_low, 1+eps_high], the sequence unit (GSPO's eps; Tinker's gspo_clipped_fraction)"
)
#: The per-sequence numbers, in the sequence table's column order.
PER_SEQUENCE: tuple[SequenceValue, ...] = (
    SequenceValue("length", "int32", "masked tokens |M_b|"),
    SequenceValue(
        "truncated",
        "bool",
        "the completion hit the length limit (null if not given)",
        "caller",
    ),
    SequenceValue(
        "reward",
        "float32",
        "the sequence's reward",
        "caller",
        StepMean("reward_mean", _S, "mean reward over S"),
    ),
    SequenceValue(
        "advantage",
        "float32",
        "the sequence's advantage (the masked mean if per token)",
        step_mean=StepMean("advantage_mean", _S, "mean advantage over S"),
    ),
    SequenceValue(
        "seq_log_ratio",
        "float32",
        "log s = masked mean of the token log-ratios log r_t",
        step_mean=StepMean("seq_log_ratio_mean", _S, "mean log s over S"),
    ),
    SequenceValue(
        "seq_clipped",
        "bool",
        "s outside the sequence-unit range (Tinker's clipped fraction)",
        step_mean=StepMean(
            "seq_clip_fraction", _S, "fraction of S whose s lies outside " + _SEQ_RANGE
        ),
    ),
    SequenceValue(
        "seq_clip_low",
        "float32",
        "fraction of tokens where GSPO's clip binds low: s low, A < 0",
        step_mean=StepMean(
            "seq_clip_low_fraction",
            _S,
            "mean over S of the fraction of tokens where the clip binds low (s < 1-eps_low, A < 0; "
            "0 or 1 with per-sequence advantages)",
        ),
    ),
    SequenceValue(
        "seq_clip_high",
        "float32",
        "fraction of tokens where GSPO's clip binds high: s high, A > 0",
        step_mean=StepMean(
            "seq_clip_high_fraction", _S, "the same where it binds high (s > 1+eps_high, A > 0)"
        ),
    ),
    SequenceValue("token_log_ratio_min", "float32", "smallest log r_t over the masked tokens"),
    SequenceValue("token_log_ratio_max", "float32", "largest log r_t over the masked tokens"),
    SequenceValue(
        "token_log_ratio_std", "float32", "population std of log r_t over the masked tokens"
    ),
    SequenceValue(
        "token_clip_fraction",
        "float32",
        "fraction of tokens whose r_t is outside the token range",
        step_mean=StepMean(
            "token_clip_fraction",
            _T,
            "fraction of M whose r_t lies outside the token unit's range (GRPO's eps): "
            "sum_b n_b f_b / sum_b n_b over the per-sequence fractions f_b (n_b = |M_b|)",
        ),
    ),
    SequenceValue(
        "token_clip_low_fraction",
        "float32",
        "fraction where GRPO's clip binds low: r_t low, A < 0",
        step_mean=StepMean(
            "token_clip_low_fraction",
            _T,
            "fraction of M where the token clip binds low: r_t low, A < 0 (TRL's "
            "clip_ratio/low_mean)",
        ),
    ),
    SequenceValue(
        "token_clip_high_fraction",
        "float32",
        "fraction where it binds high: r_t high, A > 0",
        step_mean=StepMean(
            "token_clip_high_fraction",
            _T,
            "fraction of M where it binds high: r_t high, A > 0 (TRL's clip_ratio/high_mean)",
        ),
    ),
    SequenceValue(
        "attenuation",
        "float32",
        "share of the plain importance-weighted gradient sum_t |rho A| the loss's trust region "
        "removed (the loss's per_sequence['attenuation']); NaN when the loss given to log_step "
        "did not say it, or the sequence has no plain gradient (A = 0)",
        "caller",
        since=4,
    ),
    SequenceValue(
        "kl_ref",
        "float32",
        "k3 estimate of KL(pi_theta || pi_ref); NaN without ref_logprobs",
        step_mean=StepMean(
            "kl_ref_mean", _T, "token-weighted k3 estimate of KL(pi_theta || pi_ref)"
        ),
    ),
    SequenceValue(
        "kl_old",
        "float32",
        "k3 estimate of KL(pi_old || pi_theta)",
        step_mean=StepMean(
            "kl_old_mean", _T, "token-weighted k3 estimate of KL(pi_old || pi_theta)"
        ),
    ),
    SequenceValue(
        "sampler_kl",
        "float32",
        "k3 estimate of KL(pi_sampler || pi_old), d = log pi_old - log pi_sampler: the trainer's "
        "log-prob of the sampling policy against the inference engine's; NaN without "
        "sampler_logprobs",
        step_mean=StepMean(
            "sampler_kl_mean",
            _T,
            "token-weighted k3 estimate of KL(pi_sampler || pi_trainer) at equal weights, "
            "r = pi_trainer / pi_sampler, k3 = r - 1 - log r",
        ),
        since=3,
    ),
    SequenceValue(
        "sampler_logp_abs_diff_max",
        "float32",
        "largest |log pi_old - log pi_sampler| over the masked tokens; NaN without sampler_logprobs",
        since=3,
    ),
    SequenceValue(
        "entropy",
        "float32",
        "masked mean of the per-token entropy; NaN without entropy",
        step_mean=StepMean(
            "entropy_mean", _T, "token-weighted mean entropy (like the token clip fractions)"
        ),
    ),
    SequenceValue("nonfinite_count", "int32", "masked positions where any input is NaN or inf"),
)
del _S, _T, _SEQ_RANGE

#: What ``sequence_diagnostics`` returns, in ``PER_SEQUENCE`` order (the rows of its stack).
SEQUENCE_DIAGNOSTICS: tuple[str, ...] = tuple(
    v.name for v in PER_SEQUENCE if v.source == "diagnostics"
)
#: The per-sequence values the caller gives (rewards, truncation, the loss's attenuation), in
#: ``PER_SEQUENCE`` order.
CALLER_VALUES: tuple[str, ...] = tuple(v.name for v in PER_SEQUENCE if v.source == "caller")
#: Diagnostics that count something (int32 on disk): int64 in ``sequence_diagnostics``' result.
WHOLE_NUMBERS: tuple[str, ...] = tuple(v.name for v in PER_SEQUENCE if v.dtype == "int32")
#: The values with a step mean, in ``PER_SEQUENCE`` order.
STEP_MEANS: tuple[SequenceValue, ...] = tuple(v for v in PER_SEQUENCE if v.step_mean is not None)


# ----------------------------------------------------------------------------- the losses
@dataclass(frozen=True)
class LossInfo:
    """What kind of trust region a registered loss has: for the code that labels and judges a run
    (torch-free, so the hooks' findings and the dashboard read it without the math)."""

    level: Literal["token", "sequence", "either"]
    """The ratio its attenuation is measured against: "token" (r_t), "sequence" (s_b), or
    "either" (the loss takes ``level=``)."""
    hard_clip: bool
    """A clip on the ratio can give tokens exactly zero gradient; ``per_sequence`` then holds the
    clip statistics (out_of_range, clip_low, clip_high) in the loss's unit and eps."""
    bounded: bool
    """``attenuation`` lies in [0, 1] for every input and parameter value."""


_CLIP = LossInfo("either", hard_clip=True, bounded=True)
_PENALTY = LossInfo("token", hard_clip=False, bounded=False)
_DPPO = LossInfo("token", hard_clip=False, bounded=True)
#: Every loss ``gspo_metrics.LOSSES`` registers (its math in ``gspo_metrics.losses*``), by name.
LOSS_INFO: dict[str, LossInfo] = {
    "grpo": _CLIP,
    "gspo": LossInfo("sequence", hard_clip=True, bounded=True),
    "dapo": _CLIP,
    "bnpo": _CLIP,
    "dr_grpo": _CLIP,
    "luspo": _CLIP,
    "gmpo": LossInfo("sequence", hard_clip=True, bounded=False),
    "cispo": LossInfo("either", hard_clip=False, bounded=False),
    "vespo": LossInfo("token", hard_clip=False, bounded=False),
    "dppo_tv": _DPPO,
    "dppo_kl": _DPPO,
    "gpg": LossInfo("token", hard_clip=False, bounded=False),
    "sapo": LossInfo("either", hard_clip=False, bounded=True),
    "dro": _PENALTY,
    "kl_cov": _PENALTY,
}
del _CLIP, _PENALTY, _DPPO

# ----------------------------------------------------------------------------- a run's algorithm
#: The algorithm of a run no one declared the loss of: never taken for a known loss.
UNKNOWN_ALGORITHM = "unknown"
#: The label's suffix of a loss that takes either level, run at the sequence level (TRL's
#: ``importance_sampling_level="sequence"``): ``"dapo-seq"``. GRPO's clip at the sequence level
#: is GSPO (TRL's own name for it), labelled ``"gspo"``.
SEQUENCE_SUFFIX = "-seq"
#: Losses whose hard clip is on each token's ratio whatever the ratio level their attenuation
#: is measured against: GMPO clips log r_t in [-eps_low, eps_high] (the token unit with
#: eps = (1 - e^-eps_low, e^eps_high - 1)), then takes the geometric mean.
TOKEN_CLIP_LOSSES = frozenset({"gmpo"})


@dataclass(frozen=True)
class Algorithm:
    """A run's ``algorithm`` label read back: the loss that ran and at which ratio level."""

    loss: str
    """A ``LOSS_INFO`` name."""
    level: Literal["token", "sequence"]
    """The ratio level it ran at."""

    @property
    def info(self) -> LossInfo:
        return LOSS_INFO[self.loss]

    @property
    def clip_unit(self) -> Literal["seq", "token"] | None:
        """The unit its hard clip is in ("seq": on s_b, "token": on r_t); None: no hard clip."""
        if not self.info.hard_clip:
            return None
        if self.loss in TOKEN_CLIP_LOSSES or self.level == "token":
            return "token"
        return "seq"


def algorithm_label(loss: str, level: str | None = None) -> str:
    """The ``algorithm`` a run of ``loss`` at ``level`` is recorded under: the loss's name
    (``"cispo"``), with ``SEQUENCE_SUFFIX`` for a loss that takes either level run at the
    sequence level (``"cispo-seq"``), GRPO's sequence level being ``"gspo"``. ``level`` None: the
    loss's own (the token level where it takes either). ValueError for an unknown loss or level."""
    if loss not in LOSS_INFO:
        raise ValueError(f"unknown loss {loss!r}; known: {', '.join(sorted(LOSS_INFO))}")
    own = LOSS_INFO[loss].level
    if level not in (None, "token", "sequence"):
        raise ValueError(f"level must be 'token' or 'sequence', got {level!r}")
    if own != "either" and level not in (None, own):
        raise ValueError(f"loss {loss!r} runs at the {own} level only, got level={level!r}")
    if own != "either" or level != "sequence":
        return loss
    return "gspo" if loss == "grpo" else loss + SEQUENCE_SUFFIX


def parse_algorithm(label: object) -> Algorithm | None:
    """The ``Algorithm`` of a recorded ``algorithm`` label (``algorithm_label``'s inverse, any
    case); None for "unknown", "?", an empty or any other label (a loss no one declared)."""
    if not isinstance(label, str):
        return None
    name = label.strip().lower()
    level: Literal["token", "sequence"] = "token"
    if name.endswith(SEQUENCE_SUFFIX):
        name, level = name[: -len(SEQUENCE_SUFFIX)], "sequence"
        if name not in LOSS_INFO or LOSS_INFO[name].level != "either" or name == "grpo":
            return None  # (grpo at the sequence level is recorded as "gspo")
        return Algorithm(name, level)
    info = LOSS_INFO.get(name)
    if info is None:
        return None
    return Algorithm(name, "sequence" if info.level == "sequence" else "token")


#: The primary axis of a run's algorithm: its ratio level, named by the algorithm that defines it.
#: A sequence-level ratio (s_b = exp(mean_t log r_t), clipped or weighted per sequence) is GSPO's
#: (TRL's ``importance_sampling_level="sequence"``), a token-level one (r_t per token) GRPO's.
RATIO_NAMES: dict[str, str] = {"sequence": "GSPO", "token": "GRPO"}
#: The losses that are PPO's clip surrogate with another aggregation of its per-token terms (and
#: their paper's ε): the qualifier "<name> aggregation" ("GSPO (DAPO aggregation)").
AGGREGATIONS: dict[str, str] = {
    "dapo": "DAPO",
    "bnpo": "BNPO",
    "dr_grpo": "Dr. GRPO",
    "luspo": "LUSPO",
}
#: Every other loss (not GRPO's clip, GSPO's or an aggregation of them), by its paper's name: the
#: qualifier "<name> loss" ("GRPO (CISPO loss)": CISPO's weight on token ratios).
LOSS_NAMES: dict[str, str] = {
    "gmpo": "GMPO",
    "cispo": "CISPO",
    "vespo": "VESPO",
    "dppo_tv": "DPPO-TV",
    "dppo_kl": "DPPO-KL",
    "gpg": "GPG",
    "sapo": "SAPO",
    "dro": "DRO",
    "kl_cov": "KL-Cov",
}


def ratio_name(label: object) -> str | None:
    """The name of a recorded ``algorithm`` label's ratio level (``RATIO_NAMES``): "GSPO" for
    every loss run on the sequence ratio ("gspo", "dapo-seq", "cispo-seq", "gmpo"), "GRPO" on
    the token ratio ("grpo", "dapo", "cispo"); None for a label no known loss has."""
    parsed = parse_algorithm(label)
    return None if parsed is None else RATIO_NAMES[parsed.level]


def algorithm_words(label: object) -> str | None:
    """A recorded ``algorithm`` label in words, the ratio level first (``ratio_name``) and what
    the loss adds in brackets: "GSPO" / "GRPO" (PPO's clip on that ratio, as the papers define
    them), "GSPO (DAPO aggregation)" (TRL's ``loss_type="dapo"`` at the sequence level), "GRPO
    (CISPO loss)"; None for a label no known loss has (never taken for a known one). The one
    wording of a run's algorithm on every page, legend and Health finding."""
    parsed = parse_algorithm(label)
    if parsed is None:
        return None
    level = RATIO_NAMES[parsed.level]
    if parsed.loss in ("grpo", "gspo"):
        return level
    if parsed.loss in AGGREGATIONS:
        return f"{level} ({AGGREGATIONS[parsed.loss]} aggregation)"
    return f"{level} ({LOSS_NAMES[parsed.loss]} loss)"


def clip_unit_of(label: object) -> Literal["seq", "token"] | None:
    """``parse_algorithm(label).clip_unit``: the unit of the loss's hard clip; None without one
    (CISPO, SAPO, ...) or for a label no known loss has."""
    parsed = parse_algorithm(label)
    return None if parsed is None else parsed.clip_unit


# ----------------------------------------------------------------------------- the tools' names
#: TRL 1.16's ``loss_type`` -> our loss (``gspo_metrics.tool_losses`` adds TRL's reduction).
TRL_LOSS_TYPES: dict[str, str] = {
    "grpo": "grpo",
    "bnpo": "bnpo",
    "dr_grpo": "dr_grpo",
    "dapo": "dapo",
    "luspo": "luspo",
    "cispo": "cispo",
    "sapo": "sapo",
    "vespo": "vespo",
}
#: ms-swift 4.6's ``loss_type`` (GRPO) -> our loss (its ``real`` and ``fipo`` have none here).
SWIFT_LOSS_TYPES: dict[str, str] = {
    n: n for n in ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo")
}
#: verl 0.9.1's ``policy_loss.loss_mode`` -> our loss.
VERL_LOSS_MODES: dict[str, str] = {
    "vanilla": "grpo",
    "gspo": "gspo",
    "sapo": "sapo",
    "cispo": "cispo",
    "geo_mean": "gmpo",
    "gpg": "gpg",
    "dppo_tv": "dppo_tv",
    "dppo_kl": "dppo_kl",
    "dro": "dro",
    "kl_cov": "kl_cov",
}


def tool_algorithm(tool: str, loss_name: object, level: object = None) -> str:
    """The ``algorithm`` label of a ``tool`` run ("trl" or "verl") whose loss the tool names
    ``loss_name`` (TRL's and ms-swift's ``loss_type``, verl's ``loss_mode``) at ratio ``level``
    (TRL's and ms-swift's ``importance_sampling_level``; verl's ratios are per token). ``UNKNOWN_ALGORITHM`` when the
    name is not stated (None) or not one of the tool's known names, or TRL's level is unstated:
    never a default."""
    names = {"trl": TRL_LOSS_TYPES, "verl": VERL_LOSS_MODES, "swift": SWIFT_LOSS_TYPES}.get(tool)
    if names is None:
        raise ValueError(f"tool must be 'trl', 'swift' or 'verl', got {tool!r}")
    loss = names.get(loss_name) if isinstance(loss_name, str) else None
    if loss is None:
        return UNKNOWN_ALGORITHM
    if tool == "verl" or LOSS_INFO[loss].level != "either":
        return algorithm_label(loss)
    if level not in ("token", "sequence"):
        return UNKNOWN_ALGORITHM
    return algorithm_label(loss, str(level))
