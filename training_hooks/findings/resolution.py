"""The ratio's resolution against ε: ``ratio_resolution_coarse``.

A log-prob held in a floating dtype of p significant bits lies on a grid whose step near 2^e is
2^(e + 1 - p): bfloat16 (p = 8) holds a log-prob near -3 to multiples of 2^-6 ≈ 0.0156. A token's
log-ratio log r_t = log π - log π_old moves on that grid, and GSPO's sequence log-ratio
log s = mean_t log r_t in steps of grid / L: 7.8e-4 over a 20-token sequence, coarser than the
paper's ε of 3e-4/4e-4. Where a step's smallest non-zero |log ratio| in the loss's clip unit (the
recorder's ``seq_log_ratio_abs_min_nonzero`` or ``token_log_ratio_abs_min_nonzero``) lies beyond
both edges of the band [log(1 - ε_low), log(1 + ε_high)], every ratio that moved at all lies
outside it: that step's clip share counts rounding, not how far the policy moved.

Judged on a recorded run (an import's log states no dtype: not listed there) at the steps whose log-probs have at most ``RESOLUTION.low_precision_bits`` significant bits
(``logprob_bits``; bfloat16, float16) and whose ratios moved. Float32 log-probs are not judged:
their grid near -3 is 2^-22, so a coarse smallest step there is the policy's own move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gspo_metrics.spec import clip_unit_of
from training_hooks.findings.core import (
    NOT_LOGGED,
    SETTING_UNKNOWN,
    WARNING,
    Coverage,
    Finding,
    RunFacts,
    col,
    flagged,
    fmt_eps,
    fmt_steps,
    logged,
    pct,
)
from training_hooks.findings.thresholds import RESOLUTION
from training_hooks.schema import Step

RATIO_RESOLUTION_COARSE = "ratio_resolution_coarse"
#: Its line on the Health card (Checked / Not checked).
NAME = "ratio resolution against ε"

#: The floating dtypes by their significant bits (``Step.LOGPROB_BITS``).
DTYPE_OF_BITS = {8: "bfloat16", 11: "float16", 24: "float32", 53: "float64"}


@dataclass(frozen=True)
class _Unit:
    """What the check reads in one clip unit."""

    column: str  # the step's smallest non-zero |log ratio| in this unit
    clip: str  # the step's clip share in this unit
    ratio: str  # how the evidence writes the ratio
    word: str  # "sequence" or "token"


_UNITS = {
    "seq": _Unit(Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO, Step.SEQ_CLIP_FRACTION, "|log s|", "sequence"),
    "token": _Unit(
        Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO, Step.TOKEN_CLIP_FRACTION, "|log r_t|", "token"
    ),
}


def _num(x: float) -> str:
    """3 significant digits, small values as 7.81e-4."""
    if x == 0 or abs(x) >= 0.01:
        return f"{x:.3g}"
    m, e = f"{x:.2e}".split("e")
    return f"{m}e{int(e)}"


def dtype_name(bits: float) -> str:
    """The dtype of ``bits`` significant bits: "bfloat16", ..., else "a 9-bit float"."""
    return DTYPE_OF_BITS.get(int(bits), f"a {int(bits)}-bit float")


def band_half_width(eps: tuple[float, float]) -> float:
    """The band's wider side in log space, max(-log(1 - ε_low), log(1 + ε_high)): a |log ratio|
    beyond it lies outside [1 - ε_low, 1 + ε_high] on either side."""
    lo, hi = eps
    return max(-math.log1p(-lo) if lo < 1 else math.inf, math.log1p(hi))


def _known(eps: Any) -> tuple[float, float] | None:
    """The run's (ε_low, ε_high) as positive finite floats; None when it does not state both."""
    if eps is None or len(eps) != 2 or any(e is None for e in eps):
        return None
    try:
        lo, hi = float(eps[0]), float(eps[1])
    except (TypeError, ValueError):
        return None
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) and lo > 0 and hi > 0 else None


def check_ratio_resolution(
    df: pd.DataFrame, split: Any, facts: RunFacts, cov: Coverage
) -> list[Finding]:
    """``ratio_resolution_coarse`` (warning): at ``RESOLUTION.coarse_share`` or more of the
    half-precision steps whose ratios moved, the smallest non-zero |log ratio| in the loss's clip
    unit lies beyond the band (``band_half_width``)."""
    bits = logged(df, Step.LOGPROB_BITS)
    if bits is None and facts.tool is not None:
        return []  # an import: no log format states the dtype (not applicable, not listed)
    if bits is None:
        return cov.skipped(
            NAME, "the log-probs' dtype was not recorded (a run recorded before it was)"
        )
    unit_key = clip_unit_of(facts.algorithm)
    if unit_key is None:
        return cov.skipped(NAME, f"{SETTING_UNKNOWN}: the loss's hard clip (or it has none)")
    eps = _known(facts.eps)
    if eps is None:
        return cov.skipped(NAME, f"{SETTING_UNKNOWN}: ε")
    unit = _UNITS[unit_key]
    res = col(df, unit.column)
    if res is None:
        return cov.skipped(NAME, f"{NOT_LOGGED}: the smallest non-zero {unit.ratio}")
    low = np.isfinite(bits) & (bits <= RESOLUTION.low_precision_bits.value)
    judged = low & np.isfinite(res)
    caveat = "judged at the recorder's default ε" if facts.eps_is_default else ""
    if not low.any():
        finest = dtype_name(float(np.nanmin(bits)))
        cov.ran(NAME, f"log-probs in {finest}: its grid is far finer than ε")
        return []
    if not judged.any():
        cov.ran(NAME, "no ratio moved at a step with half-precision log-probs")
        return []
    cov.ran(NAME, caveat)
    half = band_half_width(eps)
    coarse = judged & (res > half)
    n_judged, n_coarse = int(judged.sum()), int(coarse.sum())
    if n_coarse < RESOLUTION.coarse_share.value * n_judged:
        return []
    return [_finding(df, facts, unit, eps, half, bits, res, judged, coarse)]


def _finding(df, facts, unit: _Unit, eps, half, bits, res, judged, coarse) -> Finding:
    steps_all = df[Step.STEP].to_numpy() if Step.STEP in df.columns else np.arange(len(df))
    steps, culprits = flagged(steps_all, coarse, res)
    n_judged, n_coarse = int(judged.sum()), int(coarse.sum())
    b = int(np.nanmin(bits[judged]))
    grid = 2.0 ** (2 - b)  # the grid near -3 (in [2, 4): 2^(1 + 1 - p))
    at = res[coarse]
    eps_text = f"{fmt_eps(eps[0])}/{fmt_eps(eps[1])}"
    default = (
        " (the recorder's default: the run did not state its ε)" if facts.eps_is_default else ""
    )
    clip = col(df, unit.clip)
    clip_text = ""
    if clip is not None and np.isfinite(clip[coarse]).any():
        mean_clip = float(np.nanmean(clip[coarse]))
        clip_text = f" There the clip share was {pct(mean_clip)} of {unit.word}s on average."
    evidence = (
        f"The log-probs are {dtype_name(b)} ({b} significant bits: a log-prob near -3 moves in "
        f"steps of 2^{2 - b} ≈ {grid:.3g}). At {n_coarse} of the {n_judged} steps whose ratios "
        f"moved (steps {fmt_steps(steps)}), the smallest non-zero {unit.ratio} was above "
        f"{_num(half)}, the wider side of the {unit.word} band of ε {eps_text}{default} (median "
        f"{_num(float(np.median(at)))}, finest {_num(float(np.min(at)))}): every {unit.word} whose "
        f"ratio moved at all lies outside [1 - ε, 1 + ε], so its clip share counts rounding as "
        f"much as the policy's move.{clip_text}"
    )
    advice = (
        "Compute the log-probs in float32 (upcast the logits before log_softmax, e.g. "
        "logits.float().log_softmax(-1); TRL: cast_lm_head_to_fp32=True where the LM head is "
        f"untied) and compare the clip share; until then read it as the share of {unit.word}s "
        "whose ratio moved at all, not as the trust region acting."
    )
    return Finding(
        RATIO_RESOLUTION_COARSE,
        WARNING,
        f"Ratio resolution coarser than ε: the {unit.word} clip share counts rounding",
        evidence,
        advice,
        steps=steps,
        culprits=culprits,
        basis=n_judged,
    )
