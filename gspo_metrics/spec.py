"""Torch-free declarations shared by the math, the hooks, the on-disk schema and the app.

Importing this module imports no torch (``gspo_metrics/__init__`` loads its torch parts lazily),
so ``training_hooks.schema`` and the dashboard can read these names on a laptop.

``PER_SEQUENCE`` is the one list of per-sequence numbers. Everything else reads it:
``SEQUENCE_DIAGNOSTICS`` (what ``sequence_diagnostics`` returns, in this order), the row of each
diagnostic in the routes' stack, the recorder's per-sequence rows and columns
(``training_hooks.compute``), and the sequence table's columns ``training_hooks.schema.Seq`` /
``SEQUENCE_COLUMNS`` (in this order on disk).

Adding a diagnostic is one entry here plus its math in each route: the reference route
(``gspo_metrics.diagnostics``) and the eager-torch route (``gspo_metrics.eager``); the test
comparing the routes iterates over this list.
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
class SequenceValue:
    """One per-sequence number: a column of the sequence table (one row per sequence b)."""

    name: str
    """The column name, and the key in ``sequence_diagnostics``' result."""
    dtype: Literal["int32", "float32", "bool"]
    """The sequence table's Arrow type. Whole numbers ("int32") are int64 tensors in
    ``sequence_diagnostics``' result, the others (flags included) floating."""
    meaning: str
    """One line: what the number is (r_t = pi_theta / pi_old of token t, s = GSPO's ratio)."""
    source: Literal["diagnostics", "caller"] = "diagnostics"
    """"diagnostics": computed by ``sequence_diagnostics``; "caller": given to ``log_step``."""


_D = SequenceValue
#: The per-sequence numbers, in the sequence table's column order.
PER_SEQUENCE: tuple[SequenceValue, ...] = (
    _D("length", "int32", "masked tokens |M_b|"),
    _D("truncated", "bool", "the completion hit the length limit (null if not given)", "caller"),
    _D("reward", "float32", "the sequence's reward", "caller"),
    _D("advantage", "float32", "the sequence's advantage (the masked mean if per token)"),
    _D("seq_log_ratio", "float32", "log s = masked mean of the token log-ratios log r_t"),
    _D("seq_clipped", "bool", "s outside the sequence-unit range (Tinker's clipped fraction)"),
    _D("seq_clip_low", "float32", "fraction of tokens where GSPO's clip binds low: s low, A < 0"),
    _D(
        "seq_clip_high", "float32", "fraction of tokens where GSPO's clip binds high: s high, A > 0"
    ),
    _D("token_log_ratio_min", "float32", "smallest log r_t over the masked tokens"),
    _D("token_log_ratio_max", "float32", "largest log r_t over the masked tokens"),
    _D("token_log_ratio_std", "float32", "population std of log r_t over the masked tokens"),
    _D("token_clip_fraction", "float32", "fraction of tokens whose r_t is outside the token range"),
    _D(
        "token_clip_low_fraction", "float32", "fraction where GRPO's clip binds low: r_t low, A < 0"
    ),
    _D("token_clip_high_fraction", "float32", "fraction where it binds high: r_t high, A > 0"),
    _D("kl_ref", "float32", "k3 estimate of KL(pi_theta || pi_ref); NaN without ref_logprobs"),
    _D("kl_old", "float32", "k3 estimate of KL(pi_old || pi_theta)"),
    _D(
        "sampler_kl",
        "float32",
        "k3 estimate of KL(pi_sampler || pi_old), d = log pi_old - log pi_sampler: the trainer's "
        "log-prob of the sampling policy against the inference engine's; NaN without "
        "sampler_logprobs",
    ),
    _D(
        "sampler_logp_abs_diff_max",
        "float32",
        "largest |log pi_old - log pi_sampler| over the masked tokens; NaN without sampler_logprobs",
    ),
    _D("entropy", "float32", "masked mean of the per-token entropy; NaN without entropy"),
    _D("nonfinite_count", "int32", "masked positions where any input is NaN or inf"),
)
del _D

#: What ``sequence_diagnostics`` returns, in ``PER_SEQUENCE`` order (the rows of its stack).
SEQUENCE_DIAGNOSTICS: tuple[str, ...] = tuple(
    v.name for v in PER_SEQUENCE if v.source == "diagnostics"
)
#: The per-sequence values the caller gives (rewards, truncation), in ``PER_SEQUENCE`` order.
CALLER_VALUES: tuple[str, ...] = tuple(v.name for v in PER_SEQUENCE if v.source == "caller")
#: Diagnostics that count something (int32 on disk): int64 in ``sequence_diagnostics``' result.
WHOLE_NUMBERS: tuple[str, ...] = tuple(v.name for v in PER_SEQUENCE if v.dtype == "int32")
