"""A step's summary: the per-sequence rows (K, B) reduced to a vector of sums and a vector of
minima, and the step-table row computed from them.

Sums and minima are what make the reduction exact over ranks: each is all-reduced (SUM, MIN;
maxima negated) and the step row is computed once from the totals, so every step scalar is the
one a single process would compute on the concatenated batch, never a mean of per-rank means.
``summarize`` is one formula for both places it runs: torch on the device (distributed) and numpy
on the host (one process). ``step_row`` turns the totals into the row (each column's meaning:
``training_hooks.columns``).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
import torch

from gspo_metrics import zero_variance_groups
from gspo_metrics.spec import STEP_MEANS

from .layout import SEQ_ROW, SEQ_ROWS, Layout
from .schema import Seq, Step

#: The counts that open the summary's sums (over ranks: ranks, sequences, groups, ...).
COUNTS = ("ranks", "sequences", "groups", "truncated_n", "loss_n")
#: Rows whose population std the step row gives (their sums of squares are summed).
SQUARED = (Seq.REWARD, Seq.ADVANTAGE, Seq.SEQ_LOG_RATIO)
#: Rows averaged over tokens (each sequence weighted by its length): the values whose step mean
#: is declared token-weighted (``gspo_metrics.spec.StepMean``).
TOKEN_WEIGHTED = tuple(v.name for v in STEP_MEANS if v.step_mean and v.step_mean.weight == "tokens")
#: The attenuation's step means: every sequence whose attenuation is known, A > 0, A < 0.
ATTENUATION_SIGNS = ("all", "pos", "neg")
#: The summary's vector of sums (all-reduced with SUM), part by part.
SUMS = Layout.of(
    {
        "counts": (len(COUNTS),),
        "zero_var": (2,),  # zero-variance groups and groups judged (``zero_variance_counts``)
        "rows": (len(SEQ_ROWS),),  # per-row sums over the sequences
        "squares": (len(SQUARED),),
        "adv_abs": (1,),  # sum of |advantage|
        "token_weighted": (len(TOKEN_WEIGHTED),),  # sums of length * row
        "attenuation": (2 * len(ATTENUATION_SIGNS),),  # (sum, count) of the known, per sign
        "loss": (1,),
        "grid": (2,),  # ``ratio_grid.token_stats``' grid_sum and seq_grid_sum
    }
)
#: The summary's vector of minima (all-reduced with MIN): maxima are negated.
MINS = (
    "seq_log_ratio_min",
    "-seq_log_ratio_max",
    "length_min",
    "-length_max",
    "-abs_token_max",
    "-sampler_abs_diff_max",
    "seq_abs_log_ratio_min_nonzero",
    "token_abs_log_ratio_min_nonzero",
)
_SQUARED_ROWS = [SEQ_ROW[name] for name in SQUARED]
_TOKEN_WEIGHTED_ROWS = [SEQ_ROW[name] for name in TOKEN_WEIGHTED]


def zero_variance_counts(rewards_P_G, lib):
    """(2,) float64: the zero-variance groups among the groups whose rewards are all known
    (finite), and how many groups those are. A group with a NaN reward (unknown: verl's split
    groups) is neither counted nor judged: its zero-variance state is unknown, not "no"."""
    known_P = lib.isfinite(rewards_P_G).all(-1)
    zero_P = zero_variance_groups(rewards_P_G) & known_P
    if lib is torch:
        return torch.stack([zero_P.sum(), known_P.sum()]).to(torch.float64)
    return np.array([zero_P.sum(), known_P.sum()], dtype=np.float64)


def summarize(seq_K_B, counts, zero_var, loss, token_stats, lib):
    """The step summary of the (K, B) per-sequence rows: ``(sums, mins)`` as ``SUMS``, ``MINS``.

    One formula for both places it runs: torch tensors on the device (distributed: the vectors
    are then all-reduced with SUM and MIN) and numpy arrays on the host (one process, in
    ``StepRecord.materialize``); ``lib`` is ``torch`` or ``numpy``. ``counts`` as ``COUNTS``,
    ``zero_var`` (2,) ``zero_variance_counts``, ``loss`` (1,) the loss (0 when none),
    ``token_stats`` (3,) ``ratio_grid.token_stats`` of the step's tokens (the smallest non-zero
    |log r_t|, a minimum; the grid sums, sums).
    """
    cat = torch.cat if lib is torch else np.concatenate
    sq_3_B = seq_K_B[_SQUARED_ROWS]
    length_B = seq_K_B[SEQ_ROW[Seq.LENGTH]]
    parts = {
        "counts": counts,
        "zero_var": zero_var,
        "rows": seq_K_B.sum(1),
        "squares": (sq_3_B * sq_3_B).sum(1),
        "adv_abs": abs(seq_K_B[SEQ_ROW[Seq.ADVANTAGE]]).sum().reshape(1),
        "token_weighted": (seq_K_B[_TOKEN_WEIGHTED_ROWS] * length_B).sum(1),
        "attenuation": _attenuation_sums(seq_K_B, length_B, lib),
        "loss": loss,
        "grid": token_stats[1:3],
    }
    sums = cat([parts[name] for name in SUMS])
    slr_B = seq_K_B[SEQ_ROW[Seq.SEQ_LOG_RATIO]]
    # min/max propagate NaN in both libraries (torch: not aminmax, slower on small tensors)
    abs_max = lib.maximum(
        abs(seq_K_B[SEQ_ROW[Seq.TOKEN_LOG_RATIO_MIN]]),
        abs(seq_K_B[SEQ_ROW[Seq.TOKEN_LOG_RATIO_MAX]]),
    ).max()
    sampler_max = seq_K_B[SEQ_ROW[Seq.SAMPLER_LOGP_ABS_DIFF_MAX]].max()  # (NaN: not given)
    moved_B = (slr_B != 0) & lib.isfinite(slr_B)  # the resolution: +inf when nothing moved
    slr_res = lib.where(moved_B, abs(slr_B), lib.full_like(slr_B, math.inf)).min()
    mins = [slr_B.min(), -slr_B.max(), length_B.min(), -length_B.max(), -abs_max, -sampler_max]
    mins += [slr_res, token_stats[0]]
    return sums, lib.stack(mins)


def _attenuation_sums(seq_K_B, length_B, lib):
    """(6,): the sum and the number of the known (finite) attenuations, over every sequence, those
    with A > 0 and those with A < 0 (``ATTENUATION_SIGNS``). A NaN (unknown) counts nowhere."""
    att_B = seq_K_B[SEQ_ROW[Seq.ATTENUATION]]
    adv_B = seq_K_B[SEQ_ROW[Seq.ADVANTAGE]]
    zero_B = length_B * 0  # (lengths are finite: a zero and a one of the rows' dtype)
    one_B = zero_B + 1
    known_B = lib.isfinite(att_B)
    out = []
    for sel_B in (known_B, known_B & (adv_B > 0), known_B & (adv_B < 0)):
        out += [lib.where(sel_B, att_B, zero_B).sum(), lib.where(sel_B, one_B, zero_B).sum()]
    return lib.stack(out)


def _p90(x: np.ndarray) -> float:
    """numpy's default ("linear") 90th percentile, without np.percentile's fixed overhead."""
    n = len(x)
    if n == 0:
        return math.nan
    a = np.sort(x)
    h = (n - 1) * 0.9
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    return float(a[lo] + (h - lo) * (a[hi] - a[lo]))


def _finite_or_nan(x: float) -> float:
    """A minimum over nothing (+inf: no ratio moved) as NaN: no step was seen, not an infinite one."""
    return float(x) if math.isfinite(x) else math.nan


def _div(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


class StepKeys(Protocol):
    """What ``step_row`` reads of a step's record (``compute.StepRecord``) besides the summary:
    the row's keys and the values the caller gave."""

    run_id: str
    step: int
    wall_time: float
    algorithm: str
    rollout: int | None
    policy_lag: int | None
    logprob_bits: int | None
    extra: dict[str, float]


def step_row(
    rec: StepKeys, sums: np.ndarray, mins: np.ndarray, lengths: np.ndarray
) -> dict[str, Any]:
    """The step-table row from the summary (``SUMS``, ``MINS``) and all ranks' lengths."""
    sums = sums.tolist()  # Python floats: cheaper scalar arithmetic
    count = dict(zip(COUNTS, sums[SUMS["counts"]], strict=True))
    row_sum = dict(zip(SEQ_ROWS, sums[SUMS["rows"]], strict=True))
    sq = dict(zip(SQUARED, sums[SUMS["squares"]], strict=True))
    tokw = dict(zip(TOKEN_WEIGHTED, sums[SUMS["token_weighted"]], strict=True))
    low = dict(zip(MINS, mins.tolist(), strict=True))
    (zero_var, judged), (adv_abs,) = sums[SUMS["zero_var"]], sums[SUMS["adv_abs"]]
    att = sums[SUMS["attenuation"]]
    grid_sum, seq_grid_sum = sums[SUMS["grid"]]
    att_mean = {sign: _div(att[2 * i], att[2 * i + 1]) for i, sign in enumerate(ATTENUATION_SIGNS)}
    n, n_tok = count["sequences"], row_sum[Seq.LENGTH]

    def mean(name: str) -> float:
        return _div(row_sum[name], n)

    def std(name: str) -> float:
        m = mean(name)
        var = _div(sq[name], n) - m * m
        return math.sqrt(max(var, 0.0)) if math.isfinite(var) else math.nan

    def tok_mean(name: str) -> float:
        return _div(tokw[name], n_tok)

    nonfinite = row_sum[Seq.NONFINITE_COUNT]
    row: dict[str, Any] = {
        Step.RUN_ID: rec.run_id,
        Step.STEP: int(rec.step),
        Step.WALL_TIME: rec.wall_time,
        Step.ALGORITHM: rec.algorithm,
        Step.LOSS: _div(sums[SUMS["loss"]][0], count["loss_n"]),
        Step.REWARD_STD: std(Seq.REWARD),
        Step.ADVANTAGE_STD: std(Seq.ADVANTAGE),
        Step.ADVANTAGE_ABS_MEAN: _div(adv_abs, n),
        Step.SEQ_LOG_RATIO_STD: std(Seq.SEQ_LOG_RATIO),
        Step.SEQ_LOG_RATIO_MIN: float(low["seq_log_ratio_min"]),
        Step.SEQ_LOG_RATIO_MAX: float(-low["-seq_log_ratio_max"]),
        Step.TOKEN_LOG_RATIO_ABS_MAX: float(-low["-abs_token_max"]),
        # (null / NaN when no group's rewards are known: unknown, not 0)
        Step.ZERO_VARIANCE_GROUPS: int(zero_var) if judged > 0 else None,
        Step.ZERO_VARIANCE_FRACTION: _div(zero_var, judged),
        Step.NUM_GROUPS: int(count["groups"]),
        Step.NUM_SEQUENCES: int(n),
        Step.NUM_TOKENS: int(n_tok),
        Step.LENGTH_MEAN: _div(n_tok, n),
        Step.LENGTH_MIN: float(low["length_min"]),
        Step.LENGTH_MAX: float(-low["-length_max"]),
        Step.LENGTH_P90: _p90(lengths),
        Step.TRUNCATED_FRACTION: _div(row_sum[Seq.TRUNCATED], count["truncated_n"]),
        Step.NONFINITE_COUNT: int(nonfinite) if math.isfinite(nonfinite) else 0,
        Step.NUM_RANKS: int(count["ranks"]),
        Step.ROLLOUT: rec.rollout,
        Step.POLICY_LAG: rec.policy_lag,
        Step.SAMPLER_LOGP_ABS_DIFF_MAX: float(-low["-sampler_abs_diff_max"]),
        Step.ATTENUATION_MEAN: att_mean["all"],
        Step.ATTENUATION_POS_MEAN: att_mean["pos"],
        Step.ATTENUATION_NEG_MEAN: att_mean["neg"],
        Step.LOGPROB_BITS: rec.logprob_bits,
        Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO: _finite_or_nan(low["seq_abs_log_ratio_min_nonzero"]),
        Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO: _finite_or_nan(
            low["token_abs_log_ratio_min_nonzero"]
        ),
        Step.TOKEN_LOG_RATIO_GRID: _div(grid_sum, n_tok),
        Step.SEQ_LOG_RATIO_GRID: _div(seq_grid_sum, n),
    }
    for v in STEP_MEANS:  # each declared step mean (``gspo_metrics.spec.StepMean``)
        m = v.step_mean
        if m is not None:
            row[m.column] = tok_mean(v.name) if m.weight == "tokens" else mean(v.name)
    row.update(rec.extra)
    return row
