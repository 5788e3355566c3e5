"""Attenuation, every loss's trust region in one unit, on the most recent off-policy steps.

The attenuation of a sequence is the share of its plain importance-weighted policy gradient
(sum_t |rho_t A_t|) the loss's trust region removed (``gspo_metrics.losses``' docstring): a hard
clip's binding tokens, CISPO's cap, SAPO's gate. The recorder keeps its step mean over the
sequences (``attenuation_mean``) and over those with A > 0 and A < 0; these checks read them for
every loss (a loss with a hard clip is also judged on its clip share, ``findings.clip``):

- ``attenuation_high``: the mean over the last ``clip_window`` off-policy steps is above
  ``attenuation_warn_high``: the trust region, not the advantage, shapes most of the update;
- ``attenuation_low``: its size is below ``attenuation_warn_low``: the trust region does not act
  (a note: fine if intended);
- ``attenuation_one_sided``: one advantage sign's mean is at least ``attenuation_side_min`` and
  ``attenuation_side_ratio`` times the other's: the trust region acts on one sign only.

On-policy steps (ratio 1) attenuate nothing; when no step is known off-policy every step is read
and the mean is a lower bound (the high check runs and says so; the low one is not checked).
Imports have no attenuation column (no tool logs it): the checks are listed as not checked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gspo_metrics.spec import algorithm_words
from training_hooks.findings import lag as lagmod
from training_hooks.findings.core import (
    INFO,
    LAG_UNKNOWN,
    NOT_LOGGED,
    WARNING,
    Coverage,
    Finding,
    RunFacts,
    col,
    flagged,
    pct,
)
from training_hooks.findings.lag import steps_of
from training_hooks.findings.thresholds import ATTENUATION, RUN
from training_hooks.schema import Step

# The stable codes of ``check_attenuation``.
ATTENUATION_HIGH = "attenuation_high"
ATTENUATION_LOW = "attenuation_low"
ATTENUATION_ONE_SIDED = "attenuation_one_sided"
ATTENUATION_CODES = (ATTENUATION_HIGH, ATTENUATION_LOW, ATTENUATION_ONE_SIDED)

HIGH = "attenuation too high"
LOW = "attenuation too low"
ONE_SIDED = "attenuation one-sided"


def _rows(df: pd.DataFrame, split: lagmod.LagSplit, y: np.ndarray) -> tuple[np.ndarray, bool]:
    """The rows judged (the last ``clip_window`` off-policy rows with a value, else of every row)
    and whether they are known off-policy."""
    off = split.mask(lagmod.OFF_POLICY)
    pool = (off if off.any() else np.ones(len(df), bool)) & np.isfinite(y)
    rows = np.zeros(len(df), bool)
    idx = np.flatnonzero(pool)
    rows[idx[-int(RUN.clip_window.value) :]] = True
    return rows, bool(off.any())


def loss_text(algorithm: str) -> str:
    """The run's loss as the attenuation findings name it (``spec.algorithm_words``): "GRPO (SAPO
    loss)", "GSPO (CISPO loss)", or "The loss"."""
    return algorithm_words(algorithm) or "The loss"


def check_attenuation(
    df: pd.DataFrame, split: lagmod.LagSplit, facts: RunFacts, cov: Coverage
) -> list[Finding]:
    """The attenuation checks (module docstring), the run's loss named in the text ("GRPO",
    "CISPO", "The loss" when unknown: ``loss_text``); ``cov`` says what was judged."""
    loss = loss_text(facts.algorithm)
    y = col(df, Step.ATTENUATION_MEAN)
    if y is None or not np.isfinite(y).any():
        return cov.skipped(HIGH, NOT_LOGGED, LOW, ONE_SIDED)
    rows, off_known = _rows(df, split, y)
    n = int(rows.sum())
    mean = float(np.mean(y[rows]))
    kind = "off-policy steps" if off_known else "steps, none known off-policy"
    basis = f"mean attenuation_mean over the last {n} {kind}"
    steps = steps_of(df)
    found: list[Finding] = []
    cov.ran(HIGH, "" if off_known else LAG_UNKNOWN + ": a lower bound")
    if mean > ATTENUATION.warn_high.value:
        over = rows & (y > ATTENUATION.warn_high.value)
        found.append(
            Finding(
                ATTENUATION_HIGH,
                WARNING if n >= RUN.min_basis.value else INFO,
                f"{loss}'s trust region removes most of the gradient",
                f"{loss} removes {pct(mean)} of the plain importance-weighted gradient ({basis}); "
                f"Health warns above {pct(ATTENUATION.warn_high.value)}.",
                "The policy moves further per update than the trust region allows: lower the "
                "learning rate or the updates per batch, or widen the trust region if intended.",
                *flagged(steps, over, y),
                basis=n,
            )
        )
    if not off_known:
        cov.skipped(LOW, LAG_UNKNOWN)
    else:
        cov.ran(LOW)
        if abs(mean) < ATTENUATION.warn_low.value:
            found.append(
                Finding(
                    ATTENUATION_LOW,
                    INFO,
                    f"{loss}'s trust region does not act",
                    f"{loss} removes {pct(mean)} of the plain gradient ({basis}); Health notes "
                    f"below {pct(ATTENUATION.warn_low.value)}.",
                    "The trust region is inactive at this step size: fine if intended; "
                    "otherwise the update has no trust region.",
                    basis=n,
                )
            )
    found += _one_sided(df, rows, off_known, loss, basis, cov)
    return found


def _one_sided(df, rows, off_known, loss, basis, cov) -> list[Finding]:
    pos, neg = col(df, Step.ATTENUATION_POS_MEAN), col(df, Step.ATTENUATION_NEG_MEAN)
    if pos is None or neg is None:
        return cov.skipped(ONE_SIDED, NOT_LOGGED)
    both = rows & np.isfinite(pos) & np.isfinite(neg)
    if not both.any():
        return cov.skipped(ONE_SIDED, "no step with both signs' attenuation")
    if not off_known:
        return cov.skipped(ONE_SIDED, LAG_UNKNOWN)
    cov.ran(ONE_SIDED)
    p, m = float(np.mean(pos[both])), float(np.mean(neg[both]))
    big, small = max(abs(p), abs(m)), min(abs(p), abs(m))
    if big < ATTENUATION.side_min.value or big < ATTENUATION.side_ratio.value * small:
        return []
    side = "A > 0" if abs(p) > abs(m) else "A < 0"
    return [
        Finding(
            ATTENUATION_ONE_SIDED,
            INFO,
            f"{loss}'s trust region acts on {side} only",
            f"{loss} removes {pct(p)} of the plain gradient of sequences with A > 0 and "
            f"{pct(m)} of those with A < 0 ({basis.replace('attenuation_mean', 'per sign')}); "
            f"Health notes a ratio above {ATTENUATION.side_ratio.value:g}x.",
            "One side of the update is held back and the other is not: with an asymmetric "
            "range (DAPO's clip-higher, CISPO's upper cap) that is the design; otherwise the "
            "policy drifts one way (check the sampler mismatch and the learning rate).",
            basis=int(both.sum()),
        )
    ]
