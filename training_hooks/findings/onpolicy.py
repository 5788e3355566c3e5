"""Clipping where the run takes one update per batch (``clip_at_one_update``).

With one optimizer update per sampled batch the policy being updated is the policy that sampled
(π_old = π): every ratio π/π_old is 1 up to float noise and nothing can clip, whatever ε. A clip
share above ``RAW.one_update_clip`` then measures a mismatch between the log-probs the loss takes
as π_old (the sampler's, or computed when the batch was generated) and the ones recomputed for
the update, not the policy's movement: a learning rate has nothing to do with it.

"One update per batch" is what the run states (TRL ``num_iterations``, verl ``ppo_epochs`` with
``ppo_mini_batch_size`` = ``train_batch_size``) or, where the log states nothing, the tool's
default (TRL's ``num_iterations=1``), said as such (``RunFacts.updates_origin``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from training_hooks.findings.core import (
    NOT_LOGGED,
    SETTING_UNKNOWN,
    WARNING,
    Coverage,
    Finding,
    RunFacts,
    flagged,
    logged,
    pct,
)
from training_hooks.findings.lag import LagSplit, steps_of
from training_hooks.findings.thresholds import RAW, RUN
from training_hooks.metric_map import Derived
from training_hooks.schema import Step

CLIP_ONE_UPDATE = "clip_at_one_update"  # the stable code of ``check_clip_one_update``
NAME = "clip at one update per batch"
#: The clip share as runs log it, ours first: outside the range (tokens, sequences), where the
#: clip binds, then TRL's region share (``clip_ratio`` before 0.17) and verl's ``pg_clipfrac``
#: under their own names or the importer's ``<tool>/`` prefix.
CLIP_SHARES = (
    (Step.TOKEN_CLIP_FRACTION, "tokens"),
    (Step.SEQ_CLIP_FRACTION, "sequences"),
    (Derived.TOKEN_CLIP_BINDING, "tokens"),
    (Derived.SEQ_CLIP_BINDING, "sequences"),
    ("clip_ratio/region_mean", "tokens or sequences"),
    ("trl/clip_ratio/region_mean", "tokens or sequences"),
    ("clip_ratio", "tokens"),
    ("trl/clip_ratio", "tokens"),
    ("actor/pg_clipfrac", "tokens"),
    ("verl/actor/pg_clipfrac", "tokens"),
)


def clip_share(df: pd.DataFrame) -> tuple[str, str, np.ndarray] | None:
    """(column, unit, per-step share) of the first clip share of ``CLIP_SHARES`` the run logs."""
    for name, unit in CLIP_SHARES:
        y = logged(df, name)
        if y is not None:
            return name, unit, y
    return None


def check_clip_one_update(
    df: pd.DataFrame, split: LagSplit, facts: RunFacts, cov: Coverage
) -> list[Finding]:
    """``clip_at_one_update`` (see the module docstring): the mean clip share of the run's last
    ``clip_window`` steps above ``one_update_clip`` in a run that takes one update per batch."""
    if facts.updates_per_batch is None:
        return cov.skipped(NAME, f"{SETTING_UNKNOWN}: updates per batch")
    if facts.updates_per_batch != 1:
        return cov.skipped(NAME, "the run takes more than one update per batch")
    got = clip_share(df)
    if got is None:
        return cov.skipped(NAME, NOT_LOGGED)
    name, unit, y = got
    idx = np.flatnonzero(np.isfinite(y))[-int(RUN.clip_window.value) :]
    cov.ran(NAME, facts.updates_origin)
    mean = float(np.mean(y[idx]))
    if mean <= RAW.one_update_clip.value:
        return []
    steps = steps_of(df)
    over = idx[y[idx] > RAW.one_update_clip.value]
    return [
        Finding(
            CLIP_ONE_UPDATE,
            WARNING,
            "Clipping at one update per batch: sampled and recomputed log-probs disagree",
            f"mean {facts.logged_as(name)} = {pct(mean)} of {unit} over {len(idx)} steps "
            f"(highest {pct(float(np.max(y[idx])))} at step {steps[idx[np.argmax(y[idx])]]}), in "
            f"a run that takes one update per batch ({facts.updates_origin}). There π_old is "
            "the policy being updated, so π/π_old is 1 up to float noise and nothing should "
            f"clip (Health warns above {pct(RAW.one_update_clip.value)}).",
            "The clip is acting on a mismatch between the log-probs the loss takes as π_old (the "
            "sampler's, or computed when the batch was generated) and the ones recomputed for "
            "the update, not on how far the policy moved: a smaller learning rate will not "
            "change it. Compare the two on these steps (Health's sampler/trainer mismatch; TRL's "
            "sampling/* metrics with vLLM importance sampling; verl's rollout_corr/*). Usual "
            "causes: a sampler in another dtype or with other kernels (bf16 vLLM against an fp32 "
            "trainer), a temperature or top-p at sampling that scoring does not apply, weights "
            "synced late to the sampler, or a batch that is in fact reused "
            "(steps_per_generation > gradient_accumulation_steps, num_iterations > 1).",
            *flagged(steps, over, y),
            basis=len(idx),
        )
    ]
