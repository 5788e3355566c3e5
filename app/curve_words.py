"""A curve over length buckets in words, agreeing with what the eye sees on the chart: "rises",
"falls", "rises then falls" (an inner peak), "falls then rises" (an inner dip), or "moves up and
down", with the values it rests on and the statistic named (Spearman's ρ of bucket order and
value), so a caption never says "no steady trend" under a curve that falls from 0.88 to 0.17.

With R = max - min over the buckets:
- an inner peak at i (the maximum, not at an end): v_i - v_first >= TURN_SHARE·R and
  v_i - v_last >= TURN_SHARE·R; an inner dip: the same at the minimum; both: up and down;
- else a direction when |v_last - v_first| >= END_SHARE·R ("unevenly" when |ρ| < STEADY_RHO);
- else up and down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

RISES = "rises"
FALLS = "falls"
PEAK = "rises then falls"
DIP = "falls then rises"
FLAT = "is flat"
UP_AND_DOWN = "moves up and down"
TURN_SHARE = 0.3  # an inner extreme counts when both sides move this share of the range
END_SHARE = 0.5  # the ends differ by this share of the range: a direction
STEADY_RHO = 0.6  # a direction with |ρ| below this is said to be uneven


@dataclass(frozen=True)
class Shape:
    """A curve's shape over buckets in x order, and the values a sentence quotes."""

    words: str  # RISES, FALLS, PEAK, DIP, FLAT or UP_AND_DOWN
    rho: float  # Spearman's ρ of bucket order and value (NaN when flat)
    labels: tuple[str, ...]  # the buckets quoted: first, [inner extreme,] last
    values: tuple[float, ...]
    buckets: int  # finite buckets


def spearman(values: np.ndarray) -> float:
    """Spearman's ρ of bucket order (0, 1, ...) and ``values`` (average ranks for ties)."""
    v = pd.Series(np.asarray(values, np.float64))
    return float(pd.Series(np.arange(len(v)), dtype=float).corr(v, method="spearman"))


def _turns(v: np.ndarray, i: int) -> bool:
    """True when ``v[i]`` is an inner extreme both ends lie TURN_SHARE of the range away from."""
    if not 0 < i < len(v) - 1:
        return False
    return min(abs(v[i] - v[0]), abs(v[i] - v[-1])) >= TURN_SHARE * float(v.max() - v.min())


def curve_shape(labels: Sequence[str], values: Sequence[float]) -> Shape | None:
    """The shape of ``values`` over buckets labelled ``labels`` (module docstring); None with
    fewer than two finite buckets."""
    v = np.asarray(values, np.float64)
    if len(v) != len(labels):
        raise ValueError(f"labels and values must have one entry each, got {len(labels)}, {len(v)}")
    keep = np.isfinite(v)
    v, names = v[keep], [str(x) for x, k in zip(labels, keep, strict=True) if k]
    if len(v) < 2:
        return None
    ends = ((names[0], names[-1]), (float(v[0]), float(v[-1])))
    span = float(v.max() - v.min())
    if span == 0:
        return Shape(FLAT, float("nan"), *ends, len(v))
    rho = spearman(v)
    turns = [
        (w, i) for w, i in ((PEAK, int(np.argmax(v))), (DIP, int(np.argmin(v)))) if _turns(v, i)
    ]
    if len(turns) == 2:  # an inner peak and an inner dip: a wave, no one shape
        return Shape(UP_AND_DOWN, rho, *ends, len(v))
    if turns:
        (words, i), last = turns[0], len(v) - 1
        picked = (names[0], names[i], names[last]), (float(v[0]), float(v[i]), float(v[last]))
        return Shape(words, rho, *picked, len(v))
    change = float(v[-1] - v[0])
    if abs(change) >= END_SHARE * span:
        return Shape(RISES if change > 0 else FALLS, rho, *ends, len(v))
    return Shape(UP_AND_DOWN, rho, *ends, len(v))


def shape_sentence(labels: Sequence[str], values: Sequence[float], what: str, fmt: str) -> str:
    """A sentence saying how ``what`` (one value per length bucket, labelled in tokens) changes
    with length, with the values quoted in ``fmt`` and Spearman's ρ beyond two buckets ("" when
    there is nothing to say)."""
    s = curve_shape(labels, values)
    if s is None:
        return ""
    if s.words == FLAT:
        return f"The {what} is {s.values[0]:{fmt}} in every length bucket."
    quoted = [f"{v:{fmt}} at length {x}" for x, v in zip(s.labels, s.values, strict=True)]
    if len(quoted) == 3:
        quoted[1] = ("peak " if s.words == PEAK else "lowest ") + quoted[1]
    uneven = s.words in (RISES, FALLS) and s.buckets > 2 and abs(s.rho) < STEADY_RHO
    text = (
        f"The {what} {s.words} with length{', unevenly' if uneven else ''} ({', '.join(quoted)})."
    )
    if s.buckets > 2:
        text += f" Spearman ρ of bucket order and {what} over {s.buckets} buckets: {s.rho:.2f}."
    return text
