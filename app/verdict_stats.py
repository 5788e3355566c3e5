"""Which configuration is better, and how sure: the statistics of runs grouped over seeds (pure
numpy, no I/O, nothing drawn).

One score per run (``final_score``): the mean of a metric over the final fraction of the steps at
which the run logged it. Per group of runs (seeds of one configuration), the mean score with a
95% percentile bootstrap CI; per pair of groups (A, B):

    delta   = mean(A) - mean(B)
    CI      = the 2.5 and 97.5 percentiles of mean(A*) - mean(B*), where A* and B* are resampled
              with replacement each on its own (rliable's ``StratifiedIndependentBootstrap`` with
              one task; Agarwal et al. 2021)
    P(A>B)  = U / (n m), U the Mann-Whitney statistic of A over B: the share of the n m pairs
              (a, b) with a > b, a tie counting one half (rliable's ``probability_of_improvement``
              for one task)
    verdict = "A better" when the CI lies above 0, "B better" below 0, else "inconclusive"

Where this departs from the plain rule: a group of one run has no spread, so its bootstrap CI is a
point and any difference would "exclude 0"; a pair with a one-run group reads "inconclusive"
whatever the numbers (and every group under ``MIN_SEEDS`` runs is warned about).

Deterministic: each group's resamples come from a generator seeded with ``RESAMPLE_SEED`` and the
group's name (crc32), so a group's draws do not change with the other groups shown, and the page
and ``python -m app.verdict`` print the same numbers for the same runs. Vectorised:
``N_RESAMPLES`` means per group are one gather and one mean.

``pointwise_band`` is the curves' version: at each x, the mean over the seeds present there and a
percentile bootstrap band over those seeds (whole seeds resampled, shared across x).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

N_RESAMPLES = 10_000  # bootstrap resamples of each group's runs (the verdict)
#: per pattern of present seeds (the curves' pointwise band: a picture, whose 2.5% quantile moves
#: by ~1% of the band's width between generators at this count; bench/bench_verdict.py times it)
BAND_RESAMPLES = 500
CONFIDENCE = 0.95
RESAMPLE_SEED = 0
MIN_SEEDS = 3  # fewer runs in a group: warned about
DEFAULT_FINAL = 0.2  # the score: the mean over the final 20% of a run's logged steps
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class GroupScore:
    """One group's scores and their mean with its bootstrap CI."""

    name: str
    runs: tuple[str, ...]  # run ids, in the order of ``scores``
    scores: np.ndarray  # (n,) one score per run
    estimate: float  # mean of ``scores``
    ci: tuple[float, float]  # 95% percentile bootstrap CI of the mean

    @property
    def n(self) -> int:
        return len(self.scores)


@dataclass(frozen=True)
class PairVerdict:
    """Group ``a`` against group ``b``."""

    a: str
    b: str
    delta: float  # estimate(a) - estimate(b)
    ci: tuple[float, float]  # 95% percentile bootstrap CI of delta (each group resampled alone)
    p_better: float  # P(a > b) = U / (n m)
    verdict: str  # a's name, b's name, or INCONCLUSIVE


@dataclass(frozen=True)
class Verdict:
    groups: list[GroupScore]
    pairs: list[PairVerdict]
    warnings: list[str]


def final_score(steps: np.ndarray, values: np.ndarray, final: float = DEFAULT_FINAL) -> float:
    """The mean of ``values`` over the last ceil(final n) of the n steps at which they are finite
    (rows in any order, sorted by step here); NaN when no value is finite."""
    if not 0 < final <= 1:
        raise ValueError(f"final must be in (0, 1], got {final}")
    steps, values = np.asarray(steps, np.float64), np.asarray(values, np.float64)
    if steps.shape != values.shape or steps.ndim != 1:
        raise ValueError(
            f"steps and values must be 1-D of one length, got {steps.shape} and {values.shape}"
        )
    ok = np.isfinite(values) & np.isfinite(steps)
    if not ok.any():
        return math.nan
    v = values[ok][np.argsort(steps[ok], kind="stable")]
    k = max(1, math.ceil(final * len(v) - 1e-9))  # 0.2 x 10 is 2, not 3 by float noise
    return float(v[-k:].mean())


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng([RESAMPLE_SEED, zlib.crc32(name.encode("utf-8"))])


def bootstrap_means(scores: np.ndarray, name: str) -> np.ndarray:
    """(N_RESAMPLES,) means of ``scores`` resampled with replacement (the group ``name``'s
    deterministic generator)."""
    scores = np.asarray(scores, np.float64)
    if scores.ndim != 1 or not len(scores) or not np.isfinite(scores).all():
        raise ValueError(f"scores must be 1-D, non-empty and finite, got shape {scores.shape}")
    idx = _rng(name).integers(0, len(scores), size=(N_RESAMPLES, len(scores)))
    return scores[idx].mean(axis=1)


def percentile_ci(draws: np.ndarray) -> np.ndarray:
    """The CONFIDENCE percentile interval of ``draws`` along the last axis: (..., 2) of (lo, hi)."""
    tail = (1 - CONFIDENCE) / 2
    return np.moveaxis(np.quantile(draws, [tail, 1 - tail], axis=-1), 0, -1)


def p_better(a: np.ndarray, b: np.ndarray) -> float:
    """P(A > B) = U / (n m): the share of pairs (a_i, b_j) with a_i > b_j, ties counting 1/2."""
    a, b = np.asarray(a, np.float64)[:, None], np.asarray(b, np.float64)[None, :]
    return float(((a > b).sum() + 0.5 * (a == b).sum()) / (a.size * b.size))


def compare(scores: Mapping[str, tuple[Sequence[str], Sequence[float]]]) -> Verdict:
    """The verdict over ``scores``: {group name: (run ids, one score per run)}, groups in the
    given order; every pair (i < j) once, as (a = group i, b = group j)."""
    groups, draws, warnings = [], [], []
    for name, (runs, values) in scores.items():
        v = np.asarray(values, np.float64)
        if len(runs) != len(v):
            raise ValueError(f"group {name!r}: {len(runs)} run ids for {len(v)} scores")
        means = bootstrap_means(v, name)
        lo, hi = percentile_ci(means)
        groups.append(GroupScore(name, tuple(runs), v, float(v.mean()), (float(lo), float(hi))))
        draws.append(means)
        if len(v) < MIN_SEEDS:
            warnings.append(
                f"{name}: {len(v)} seed{'s' * (len(v) != 1)} (fewer than {MIN_SEEDS}: the "
                "interval is unreliable"
                + ("; a one-run group is never called better or worse)" if len(v) == 1 else ")")
            )
    i, j = np.triu_indices(len(groups), k=1)
    if not len(i):
        return Verdict(groups, [], warnings)
    stacked = np.stack(draws)
    cis = percentile_ci(stacked[i] - stacked[j])  # (pairs, 2)
    pairs = []
    for (lo, hi), ia, ib in zip(cis, i, j, strict=True):
        a, b = groups[ia], groups[ib]
        word = INCONCLUSIVE
        if min(a.n, b.n) >= 2 and lo > 0:
            word = a.name
        elif min(a.n, b.n) >= 2 and hi < 0:
            word = b.name
        delta = a.estimate - b.estimate
        pairs.append(
            PairVerdict(
                a.name, b.name, delta, (float(lo), float(hi)), p_better(a.scores, b.scores), word
            )
        )
    return Verdict(groups, pairs, warnings)


def pointwise_band(
    y: np.ndarray, name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lo, hi, count) at each column of ``y`` (seeds, X), NaN where a seed has no value:
    the mean over the seeds present at that x, the 95% percentile bootstrap band of that mean
    (whole seeds resampled: one set of multinomial weights per pattern of present seeds, shared
    by its columns), the number of seeds present. Mean NaN where no seed is present; band NaN
    where fewer than 2 are."""
    y = np.asarray(y, np.float64)
    if y.ndim != 2:
        raise ValueError(f"y must be (seeds, X), got shape {y.shape}")
    present = np.isfinite(y)
    count = present.sum(axis=0)
    filled = np.where(present, y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, filled.sum(axis=0) / count, np.nan)
    lo = np.full(y.shape[1], np.nan)
    hi = np.full(y.shape[1], np.nan)
    rng = _rng(name)
    if len(y) <= 62:  # one integer per column's pattern of present seeds: a 1-D unique
        codes = present.T.astype(np.int64) @ (1 << np.arange(len(y), dtype=np.int64))
        _, first, which = np.unique(codes, return_index=True, return_inverse=True)
    else:
        _, first, which = np.unique(present.T, axis=0, return_index=True, return_inverse=True)
    for p, col in enumerate(first):
        pattern = present[:, col]
        k = int(pattern.sum())
        if k < 2:
            continue
        cols = np.flatnonzero(which.ravel() == p)
        weights = rng.multinomial(k, np.full(k, 1.0 / k), size=BAND_RESAMPLES).astype(np.float64)
        means = np.einsum("rk,kc->rc", weights, y[pattern][:, cols]) / k  # (R, k) x (k, cols)
        lo[cols], hi[cols] = percentile_ci(means.T).T
    return mean, lo, hi, count
