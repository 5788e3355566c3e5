"""Completions a reward function left unscored: ``reward_unscored``.

TRL (1.0 - 1.16) lets a reward function return ``None`` for a completion it cannot judge. It turns
the ``None`` into NaN and sums the functions' weighted rewards with ``nansum``: beside functions
that did score the completion, the abstaining one counts as 0, which moves the completion's
reward, its group's mean and so every advantage of the group. A completion no function scored is
"unscorable": TRL leaves it out of the group's mean and std and gives it advantage 0 (its signal
is lost). The TRL hook counts both per step (``training_hooks.trl.unscored_counts``):
``rewards/<fn>/unscored`` per function and ``rewards/unscorable`` (``training_hooks.names``); any
log that carries those columns is judged the same way; an import without them is not listed (no
tool's log counts them: a total reward that disagrees with its components is another check's). An unscored completion is a fact, not a
statistic: one is enough for the warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from training_hooks.findings.core import (
    NOT_LOGGED,
    WARNING,
    Coverage,
    Finding,
    RunFacts,
    col,
    column,
    fmt_steps,
    listed,
    worst,
)
from training_hooks.names import REWARD_UNSCORABLE, few, unscored_function
from training_hooks.schema import Step

REWARD_UNSCORED = "reward_unscored"
#: Its line on the Health card (Checked / Not checked).
NAME = "rewards left unscored"


@dataclass(frozen=True)
class _Unscored:
    """One reward function's unscored counts, per step (NaN: not logged at that step)."""

    function: str
    counts: np.ndarray

    @property
    def hit(self) -> np.ndarray:
        return np.nan_to_num(self.counts) > 0


def unscored_columns(df: pd.DataFrame) -> dict[str, str]:
    """{reward function: its ``rewards/<fn>/unscored`` column} of a step table."""
    out: dict[str, str] = {}
    for c in df.columns:
        fn = unscored_function(c)
        if fn is not None:
            out.setdefault(fn, c)
    return out


def _unscorable_column(df: pd.DataFrame) -> str | None:
    for c in df.columns:
        if isinstance(c, str) and (c == REWARD_UNSCORABLE or c.endswith("/" + REWARD_UNSCORABLE)):
            return c
    return None


def check_reward_unscored(
    df: pd.DataFrame, split: Any, facts: RunFacts, cov: Coverage
) -> list[Finding]:
    """``reward_unscored`` (warning) when a reward function left a completion unscored at any
    step; its evidence names each function, how many completions at which steps, and whether
    the other functions scored them (TRL then counts the abstainer as 0)."""
    columns = unscored_columns(df)
    if not columns and facts.tool is not None:
        return []  # an import: TRL's logs carry no such count (reward_total_mismatch's ground)
    if not columns:
        why = f"{NOT_LOGGED}: no per-function unscored counts, which TRL's hook records"
        return cov.skipped(NAME, why)
    cov.ran(NAME)
    found = [_Unscored(fn, column(df, c)) for fn, c in columns.items()]
    found = [u for u in found if u.hit.any()]
    if not found:
        return []
    steps = df[Step.STEP].to_numpy() if Step.STEP in df.columns else np.arange(len(df))
    c_all = _unscorable_column(df)
    none_scored = col(df, c_all) if c_all is not None else None
    n_seq = col(df, Step.NUM_SEQUENCES)
    per_step = np.nanmax(np.stack([np.nan_to_num(u.counts) for u in found]), axis=0)
    hit = per_step > 0
    found.sort(key=lambda u: -float(np.nansum(u.counts)))
    names = [u.function for u in found]
    lines = [_function_line(u, steps, n_seq) for u in found]
    title = (
        f"Reward function {names[0]} left completions unscored"
        if len(found) == 1
        else f"{len(found)} reward functions left completions unscored"
    )
    evidence = " ".join(lines) + " " + _effect(found, none_scored, len(columns), _once(df))
    advice = (
        f"Make {few(names, 3, ' and ')} return a score for every completion (or leave out of "
        "the batch what it cannot judge): beside the other functions' scores TRL reads a None "
        "as 0, which biases the group's advantages; a completion no function scores teaches "
        "nothing. Open the steps listed on the Sequences page to see the rows."
    )
    return [
        Finding(
            REWARD_UNSCORED,
            WARNING,
            title,
            evidence,
            advice,
            steps=listed(steps[hit]),
            culprits=worst(steps[hit], per_step[hit]),
        )
    ]


def _function_line(u: _Unscored, steps: np.ndarray, n_seq: np.ndarray | None) -> str:
    """ "judge returned None for completions at 3 of 4 steps (steps 1, 2, 4): up to 5 at step 2
    (of the 16 it recorded)." """
    hit = u.hit
    counts = np.nan_to_num(u.counts)
    top = int(np.argmax(counts))
    of = ""
    if n_seq is not None and np.isfinite(n_seq[top]):
        of = f" (of the {int(n_seq[top])} it recorded)"
    logged = int(np.isfinite(u.counts).sum())
    n = int(hit.sum())
    where = f"step {int(steps[hit][0])}" if n == 1 else f"steps {fmt_steps(steps[hit])}"
    return (
        f"{u.function} returned None for completions at {n} of {logged} "
        f"step{'s' if logged != 1 else ''} ({where}): up to {int(counts[top])} at step "
        f"{int(steps[top])}{of}."
    )


def _once(df: pd.DataFrame) -> np.ndarray | None:
    """The rows that count each batch of samples once (the first step of each ``rollout``: a
    batch trained on at several steps carries the same counts at each); None when the table
    does not say which rows share a batch."""
    rollout = col(df, Step.ROLLOUT)
    if rollout is None or not np.isfinite(rollout).all():
        return None
    return ~pd.Series(rollout).duplicated().to_numpy()


def _effect(found: list[_Unscored], none_scored: np.ndarray | None, n_functions: int, once) -> str:
    """What TRL made of them: counted as 0 beside the other functions' scores, or left out.
    ``once``: the rows that count each batch of samples once (None: unknown, summed over steps)."""
    if n_functions == 1:
        return (
            "It is the run's only reward function, so TRL left those completions out of their "
            "group's mean and std and gave them advantage 0: their signal is lost (their reward "
            "is NaN, shown as unscored)."
        )
    zero = (
        "TRL summed the other functions' scores with nansum: the abstaining function counted "
        "as 0, which moved the completion's reward, its group's mean and every advantage of that "
        "group."
    )
    if none_scored is None:
        return (
            f"Where another function scored the completion, {zero} Whether some had no score "
            "from any function was not logged."
        )
    none = np.nan_to_num(none_scored)
    rows = np.ones(len(none), bool) if once is None else once
    partial = sum(int(np.clip(np.nan_to_num(u.counts) - none, 0, None)[rows].sum()) for u in found)
    how = (
        "each batch of samples counted once"
        if once is not None
        else "summed over steps: a batch trained on at several steps counts at each"
    )
    out = []
    if partial:
        out.append(f"For {partial} of them ({how}) another function did score: {zero}")
    if none.sum() > 0:
        out.append(
            f"Up to {int(none.max())} a step had no score from any function: TRL left those out "
            "of their group's mean and gave them advantage 0."
        )
    return " ".join(out)
