"""The entry points: every check of a run (``run_health``, ``run_findings``) and the checks that
need no future (``live_findings``: what the recorder runs while training).

A check is run the same way on the Health page and in the recorder: the recorder calls
``live_findings`` on the table it has so far; the page calls ``run_health`` on the table on disk,
which runs the same functions (and the trend checks, which compare a run's end with its start).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from gspo_metrics.spec import parse_algorithm
from training_hooks.findings import lag as lagmod
from training_hooks.findings.attenuation import check_attenuation
from training_hooks.findings.clip import HIGH as CLIP_SHARE_HIGH
from training_hooks.findings.clip import LOW as CLIP_SHARE_LOW
from training_hooks.findings.clip import check_clip_range
from training_hooks.findings.core import (
    BUILTIN_CODES,
    CLIP_HIGH,
    CLIP_LOW,
    CLIP_ONE_UPDATE,
    ERROR,
    INFO,
    KL_OLD_SPIKE,
    KL_REF_SPIKE,
    LOG_RATIO_SPIKE,
    NO_STEPS,
    NONFINITE,
    OK,
    OK_CODE,
    SAMPLER_MISMATCH,
    SEVERITY_ORDER,
    STALE_OLD_LOGPROBS,
    TASK_SATURATED,
    WARNING,
    ZERO_VARIANCE,
    Coverage,
    Finding,
    RunFacts,
    defaulted_settings,
    in_step_order,
    stated_eps_source,
    train_mask,
)
from training_hooks.findings.dropped import STEPS_DROPPED, check_steps_dropped, dropped_of
from training_hooks.findings.mismatch import check_sampler_mismatch
from training_hooks.findings.onpolicy import check_clip_one_update
from training_hooks.findings.raw import check_raw_values
from training_hooks.findings.resolution import RATIO_RESOLUTION_COARSE, check_ratio_resolution
from training_hooks.findings.signal import (
    check_learning_signal,
    check_truncation,
    group_outcomes,
    with_group_outcomes,
)
from training_hooks.findings.spikes import check_spikes, check_trends
from training_hooks.findings.status import (
    check_lag,
    check_nonfinite,
    check_status,
    import_status,
)
from training_hooks.findings.thresholds import RUN
from training_hooks.findings.unscored import REWARD_UNSCORED, check_reward_unscored
from training_hooks.schema import STATUS_FINISHED, RunInfo, Seq, flatten

#: The declared version of what the Health checks conclude. A run's summary
#: (``training_hooks.run_summary``, run.json's ``summary`` or one the dashboard kept) records the
#: version of the checks that made its findings, and is set aside when it differs. Bump it whenever
#: a check, a threshold (``thresholds.THRESHOLDS``) or the step-table reader
#: (``training_hooks.tables``) can change the findings a run gets (a code, a severity); a change of
#: wording, a docstring or a refactor that gives the same findings needs no bump.
#: ``tests/test_checks_version.py`` holds the findings of a fixed set of runs against
#: ``tests/checks_findings.json`` and fails when they change while this number does not.
CHECKS_VERSION = 2  # 2: attenuation checks; clip checks only for hard-clip losses (issue 32)


@dataclass(frozen=True)
class Check:
    """A check registered in ``CHECKS``: the codes it reports and its function."""

    codes: tuple[str, ...]
    """Its stable codes (they join ``CODES``), declared in its module."""
    check: Callable[[pd.DataFrame, Any, RunFacts, Coverage], list[Finding]]
    """``check(df, split, facts, cov)``: the run's step table in step order, its lag split
    (``lag.lag_split``), what the run states, and the coverage it adds its line to (``cov.ran``
    or ``cov.skipped``, with the reason)."""
    live: bool = False
    """It needs no future: the recorder runs it too (``live_findings``; its codes join
    ``LIVE_CODES``)."""


#: The checks that declare themselves, each in its own module (its codes and thresholds beside
#: it, or in ``thresholds``): one entry here runs it on the Health page (after the checks written
#: out in ``run_health``) and, live, in the recorder. Adding one also bumps ``CHECKS_VERSION``.
CHECKS: tuple[Check, ...] = (
    Check((STEPS_DROPPED,), check_steps_dropped),
    Check((REWARD_UNSCORED,), check_reward_unscored, live=True),
    Check((RATIO_RESOLUTION_COARSE,), check_ratio_resolution, live=True),
)

#: Every stable code a finding may carry (a contract: tests, the bench and the page match on them).
CODES: tuple[str, ...] = (*BUILTIN_CODES, *(code for c in CHECKS for code in c.codes))

#: The codes the recorder judges live (their checks need no future).
LIVE_CODES = (
    NONFINITE,
    SAMPLER_MISMATCH,
    STALE_OLD_LOGPROBS,
    KL_OLD_SPIKE,
    LOG_RATIO_SPIKE,
    KL_REF_SPIKE,
    CLIP_HIGH,
    CLIP_LOW,
    CLIP_ONE_UPDATE,
    ZERO_VARIANCE,
    TASK_SATURATED,
    *(code for c in CHECKS if c.live for code in c.codes),
)


@dataclass(frozen=True)
class HealthReport:
    """A run's findings (most severe first, one per code) and what was and was not checked."""

    findings: list[Finding]
    checked: dict[str, str]  # check -> caveat ("" when none)
    not_checked: dict[str, str]  # check -> why not (not logged, setting unknown, ...)

    def checked_line(self) -> str:
        """``"Checked: run status, non-finite values, ..."``; each caveat in brackets."""
        return "Checked: " + _listing(self.checked, "nothing")

    def not_checked_line(self) -> str:
        """``"Not checked: stale old log-probs (policy lag unknown), ..."``."""
        return "Not checked: " + _listing(self.not_checked, "nothing (every check ran)")


def _listing(items: Mapping[str, str], empty: str) -> str:
    if not items:
        return empty + "."
    return "; ".join(f"{k} ({v})" if v else k for k, v in items.items()) + "."


def _live_checks(df: pd.DataFrame, split, facts: RunFacts, cov: Coverage) -> list[Finding]:
    lag_found = check_lag(df, split, cov)
    return [
        *check_nonfinite(df, cov, facts),
        *lag_found,
        *check_sampler_mismatch(df, split, facts, cov),
        *_clip_checks(df, split, facts, cov),
        *check_learning_signal(df, facts, cov),
        *check_spikes(df, split, cov),
        *(f for c in CHECKS if c.live for f in c.check(df, split, facts, cov)),
    ]


def _clip_checks(df: pd.DataFrame, split, facts: RunFacts, cov: Coverage) -> list[Finding]:
    """The clip share against its usual band, or, in a run that takes one update per batch
    (nothing should clip there, whatever ε), ``clip_at_one_update`` instead."""
    found = check_clip_one_update(df, facts, cov)
    if facts.updates_per_batch != 1:
        return found + check_clip_range(df, split, facts, cov)
    for name in (CLIP_SHARE_HIGH, CLIP_SHARE_LOW):
        cov.skipped(name, "one update per batch: judged as clip at one update per batch")
    return found


#: Findings whose fault leaves every ratio at 1, so nothing can clip: stale old log-probs
#: (π_old recomputed from π), and a learning signal that is gone (every advantage 0: no update
#: moves the policy). Where one fired as an error, clip_low is not a finding of its own.
CLIP_LOW_EXPLAINED_BY = (STALE_OLD_LOGPROBS, ZERO_VARIANCE)


def explain_clip_low(found: list[Finding]) -> list[Finding]:
    """``found`` with ``clip_low`` folded into the error that explains it (``CLIP_LOW_EXPLAINED_BY``):
    that finding's evidence gains the clip share, and clip_low is dropped. Otherwise unchanged."""
    low = next((f for f in found if f.code == CLIP_LOW), None)
    cause = next(
        (f for f in found if f.code in CLIP_LOW_EXPLAINED_BY and f.severity == ERROR), None
    )
    if low is None or cause is None:
        return found
    head = low.evidence.split(" (", 1)[0]  # "GSPO clips 0% of sequences"
    note = (
        f" It also explains the clip share: {head} (ratios at 1 clip nothing), so the clip share "
        "is not reported as a finding of its own."
    )
    return [
        replace(f, evidence=f.evidence + note) if f is cause else f for f in found if f is not low
    ]


def live_findings(df: pd.DataFrame, facts: RunFacts) -> list[Finding]:
    """The findings of ``LIVE_CODES`` on the table so far (the recorder's route)."""
    df = in_step_order(df)
    found = _live_checks(df, lagmod.lag_split(df), facts, Coverage())
    return _finish(explain_clip_low([f for f in found if f.code in LIVE_CODES]))


def run_health(df: pd.DataFrame, facts: RunFacts) -> HealthReport:
    """Every check on a run's step table (the Health page's route)."""
    df = in_step_order(df)
    split = lagmod.lag_split(df)
    cov = Coverage()
    cov.ran("run status")
    found = [
        *check_status(
            facts.status, facts.updated_at, facts.last_step, facts.now, facts.stopped_early
        ),
        *_live_checks(df, split, facts, cov),
        *check_trends(df, split, cov),
        *check_truncation(df, cov),
        *check_attenuation(df, split, _loss_text(facts.algorithm), cov),
        *check_raw_values(df, facts, cov),
        *(f for c in CHECKS if not c.live for f in c.check(df, split, facts, cov)),
    ]
    if len(df) == 0:
        found.append(
            Finding(
                NO_STEPS,
                INFO,
                "No steps recorded yet",
                "the step table is empty.",
                "Wait for the first flush (a few seconds) or check the run's root.",
            )
        )
    found = _finish(explain_clip_low(found))
    if not any(f.severity in (ERROR, WARNING) for f in found):
        found.append(_nothing_unusual(df, cov))
    return HealthReport(found, dict(cov.checked), dict(cov.not_checked))


def _loss_text(algorithm: str) -> str:
    """The run's loss as the attenuation findings name it: "DAPO", "SAPO-SEQ", or "The loss"."""
    parsed = parse_algorithm(algorithm)
    return "The loss" if parsed is None else str(algorithm).upper()


#: The sequence-table columns the solved / failed split of zero-variance groups reads.
OUTCOME_COLUMNS = (Seq.STEP, Seq.RANK, Seq.GROUP, Seq.REWARD)


def report_of(
    facts: RunFacts, steps_df: pd.DataFrame, sequences: pd.DataFrame | None = None
) -> HealthReport:
    """The ``HealthReport`` of a step table judged with ``facts``, plus ``sequences`` (columns
    ``OUTCOME_COLUMNS``) for the solved / failed split of zero-variance groups when the run
    recorded them: what the Health page shows, and what a run's summary records beside it."""
    df = steps_df
    if sequences is not None and len(sequences) and Seq.REWARD in sequences.columns:
        df = with_group_outcomes(steps_df, group_outcomes(sequences))
    return run_health(df, facts)


def run_findings(
    df: pd.DataFrame,
    *,
    algorithm: str,
    status: str,
    updated_at: float | None = None,
    last_step: int | None = None,
    seq_eps: tuple[float | None, float | None] | None = None,
    token_eps: tuple[float | None, float | None] | None = None,
    now: float | None = None,
    facts: RunFacts | None = None,
) -> list[Finding]:
    """Every check, most severe first; one finding per code; a single OK finding when nothing is
    wrong. ``algorithm`` "grpo"/"gspo" (anything else: unknown); ``seq_eps`` / ``token_eps`` the
    run's (low, high) clip range per unit, None or (None, None) when the run does not state it.
    ``facts`` (an import's sources, whether a row is one update) overrides the other arguments."""
    if facts is None:
        facts = RunFacts(
            algorithm=algorithm,
            status=status,
            updated_at=updated_at,
            last_step=last_step,
            seq_eps=seq_eps,
            token_eps=token_eps,
            now=now,
        )
    return run_health(df, facts).findings


def _finish(found: list[Finding]) -> list[Finding]:
    """Most severe first, one per code; a judgement resting on fewer than ``min_basis`` steps
    says so and is a note (info), never a warning or an error."""
    out = []
    for f in found:
        if f.basis is not None and f.basis < RUN.min_basis.value:
            few = f" This rests on {f.basis} step{'s' if f.basis != 1 else ''} only (fewer than "
            few += f"{RUN.min_basis.value:g}): a note, not a verdict."
            sev = INFO if f.severity in (ERROR, WARNING) else f.severity
            f = replace(f, severity=sev, evidence=f.evidence + few)
        out.append(f)
    codes = [f.code for f in out]
    assert len(codes) == len(set(codes)), codes  # one finding (one advice) per code
    return sorted(out, key=lambda f: SEVERITY_ORDER[f.severity])


def _nothing_unusual(df: pd.DataFrame, cov: Coverage) -> Finding:
    n_read = int(train_mask(df).sum())
    read = "" if n_read == len(df) else f"; {n_read} of them hold metrics these checks read"
    n_run, n_not = len(cov.checked), len(cov.not_checked)
    evidence = f"{len(df)} steps checked{read}."
    title = "Nothing unusual"
    if n_not:
        evidence += f" {n_run} checks ran and {n_not} could not (see Not checked)."
    if n_not > n_run:
        title = "Nothing unusual in the little that could be checked"
        evidence += " Most checks could not run: this is not a clean bill of health."
    return Finding(OK_CODE, OK, title, evidence, "")


def facts_of(info: RunInfo | None, *, status: str | None = None, **overrides) -> RunFacts:
    """The ``RunFacts`` of a run.json: its algorithm, status and ε; for an import, the tool, the
    foreign metric each column was read from and whether a row is one optimizer update."""
    if info is None:
        return RunFacts(status=status or STATUS_FINISHED, one_update_per_row=None, **overrides)
    imp = info.imported
    facts = RunFacts(
        algorithm=info.algorithm,
        status=status or import_status(info),
        updated_at=info.updated_at,
        last_step=info.last_step,
        seq_eps=(info.seq_eps_low, info.seq_eps_high),
        token_eps=(info.token_eps_low, info.token_eps_high),
        tool=imp.tool if imp is not None else None,
        sources={v: k for k, v in imp.mapped.items()} if imp is not None else {},
        one_update_per_row=_one_update_per_row(info),
        eps_source=stated_eps_source(info.config),
        max_grad_norm=stated_max_grad_norm(info),
        stopped_early=imp.stopped_early if imp is not None else None,
        defaults=defaulted_settings(info.other),
        dropped_steps=dropped_of(info.faults) if imp is None else None,
    )
    updates, origin = _updates(info)
    facts = replace(facts, updates_per_batch=updates, updates_origin=origin)
    return replace(facts, **overrides)


def _one_update_per_row(info: RunInfo) -> bool | None:
    """True for a recorded run (one ``log_step`` per optimizer step); for an import, what its
    settings say (verl's ``one_update_per_row``), else unknown."""
    if info.imported is None:  # RunRecorder (its own loop, TRL's attach): one row per update
        return True
    got = _setting(info, "one_update_per_row")
    return got[0] if got is not None and isinstance(got[0], bool) else None


#: Where a run's config states its gradient clip (dotted paths, matched on the tail): TRL /
#: transformers, verl's actor, Tinker's cookbook.
MAX_GRAD_NORM_KEYS = ("max_grad_norm", "actor_rollout_ref.actor.grad_clip", "grad_clip")


def _setting(info: RunInfo, name: str):
    """An import's setting ``name`` as found beside the log: (value, where) or None."""
    imp = info.imported
    got = (imp.settings or {}).get(name) if imp is not None else None
    if isinstance(got, Mapping) and "value" in got:
        return got["value"], str(got.get("from", ""))
    return None


def stated_max_grad_norm(info: RunInfo) -> float | None:
    """The gradient clip a run states: an import's setting ``max_grad_norm``, else its config's
    (``MAX_GRAD_NORM_KEYS``); None when nothing states it (never the tool's default)."""
    got = _setting(info, "max_grad_norm")
    values = [got[0]] if got is not None else []
    if isinstance(info.config, Mapping):
        flat = {k.replace("/", "."): v for k, v in flatten(info.config, ".").items()}
        for key in MAX_GRAD_NORM_KEYS:
            values += [v for k, v in sorted(flat.items()) if k == key or k.endswith("." + key)]
    for v in values:
        if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
            return float(v)
    return None


def _updates(info: RunInfo) -> tuple[int | None, str]:
    """(optimizer updates per sampled batch, where that comes from) of an import: TRL's
    ``num_iterations`` as stated, else TRL's default of 1, said as such; verl's
    ``one_update_per_row`` (ppo_epochs 1, one mini-batch per batch). (None, "") otherwise."""
    imp = info.imported
    if imp is None:
        return None, ""
    if imp.tool == "trl":
        got = _setting(info, "num_iterations")
        if got is not None and isinstance(got[0], int) and not isinstance(got[0], bool):
            return got[0], f"num_iterations = {got[0]}, {got[1]}"
        return 1, "TRL's default num_iterations = 1; the log does not state it"
    if imp.tool == "verl":
        got = _setting(info, "one_update_per_row")
        if got is not None and got[0] is True:
            return 1, got[1]
    return None, ""
