"""Sampler/trainer mismatch: the trainer's log-probs of the sampled tokens differ from the
sampler's (ratios not 1 at a declared lag 0, or a mismatch metric out of its usual band). The
finding names the metric it read, as the run's log named it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from training_hooks.findings import lag as lagmod
from training_hooks.findings.core import (
    INFO,
    NOT_LOGGED,
    SEVERITY_ORDER,
    WARNING,
    Coverage,
    Finding,
    RunFacts,
    at_steps,
    col,
    column,
    find_column,
    listed,
    train_mask,
    worst,
)
from training_hooks.findings.lag import steps_of
from training_hooks.findings.thresholds import MISMATCH
from training_hooks.schema import Step

SAMPLER_MISMATCH = "sampler_mismatch"  # the stable code of ``check_sampler_mismatch``

K3 = "k3"  # k3 = r - 1 - log r per token, token mean (nats/token)
ABS_KL = "abs_kl"  # a signed KL estimate (k1): judged on |kl|
CHI2 = "chi2"  # chi-square per token: E[r^2] - 1
IS_MEAN = "is_mean"  # mean importance weight pi_trainer / pi_sampler
ABS_LOGP = "abs_logp"  # mean |log p_trainer - log p_sampler|: k3 >= mean^2 / 2 (Jensen, k3 ≈ Δ²/2)


@dataclass(frozen=True)
class MismatchMetric:
    """A sampler/trainer mismatch metric Health reads when the run has it."""

    name: str  # column name; a foreign one also matches behind a tool prefix ("verl/...")
    kind: str  # K3, ABS_KL, CHI2, IS_MEAN or ABS_LOGP
    source: str  # the tool that logs it under this name ("" for ours: named by ``RunFacts``)


#: Ours first, then the foreign names the importers keep (TRL's sampling/*, verl's rollout_corr/*,
#: Tinker's optim/kl_sample_train_v2 = 0.5 mean Δ², equal to k3 to second order in Δ).
MISMATCH_METRICS = (
    MismatchMetric(Step.SAMPLER_KL_MEAN, K3, ""),
    MismatchMetric("rollout_corr/k3_kl", K3, "verl"),
    MismatchMetric("rollout_corr/kl", ABS_KL, "verl"),
    MismatchMetric("rollout_corr/chi2_token", CHI2, "verl"),
    MismatchMetric("rollout_corr/rollout_is_mean", IS_MEAN, "verl"),
    MismatchMetric("sampling/importance_sampling_ratio/mean", IS_MEAN, "TRL"),
    MismatchMetric("sampling/sampling_logp_difference/mean", ABS_LOGP, "TRL"),
    MismatchMetric("optim/kl_sample_train_v2", K3, "Tinker"),
)


@dataclass(frozen=True)
class MismatchPart:
    """One piece of sampler-mismatch evidence."""

    severity: str
    text: str
    rows: np.ndarray  # bool per row: the steps it is about
    score: np.ndarray  # per row: larger = worse (picks the culprits)
    basis: int  # the steps it rests on


def _k3_band(v: float) -> str:
    dense, alarm = MISMATCH.k3_dense.value, MISMATCH.kl_alarm.value
    if v > alarm:
        return f"above verl's alarm ({alarm:g})"
    if v > dense:
        return f"above the usual band of a dense model ({MISMATCH.k3_floor.value:g}–{dense:g}), inside a MoE's ({dense:g}–{alarm:g})"
    return f"inside the usual band of a dense model ({MISMATCH.k3_floor.value:g}–{dense:g})"


def _judge_mismatch(kind: str, y: np.ndarray) -> tuple[str | None, np.ndarray]:
    """(severity, rows that reach it) for one metric's per-step values; (None, ...) when fine."""
    with np.errstate(invalid="ignore"):
        if kind == ABS_LOGP:
            y = y**2 / 2  # a lower bound of k3 (Jensen on k3 ≈ Δ²/2)
        if kind in (K3, ABS_LOGP):  # info: the run's median is above float noise
            warn = y > MISMATCH.kl_alarm.value
            info = (y > MISMATCH.k3_floor.value) & (np.nanmedian(y) > MISMATCH.k3_floor.value)
        elif kind == ABS_KL:
            warn, info = np.abs(y) > MISMATCH.kl_alarm.value, np.zeros(len(y), bool)
        elif kind == CHI2:
            warn, info = y > MISMATCH.chi2_token.value, np.zeros(len(y), bool)
        else:  # IS_MEAN
            warn = (y < MISMATCH.is_mean_low.value) | (y > MISMATCH.is_mean_high.value)
            info = np.zeros(len(y), bool)
    if warn.any():
        return WARNING, warn
    if info.any():
        return INFO, info
    return None, warn


def mismatch_metrics_read(df: pd.DataFrame, facts: RunFacts) -> list[tuple[MismatchMetric, str]]:
    """(metric, its name as the run's log named it) for each mismatch metric the run logged:
    ours (an import's mapped column: the foreign metric it was read from), then a tool's kept
    under its own name (behind any prefix)."""
    out = []
    for m in MISMATCH_METRICS:
        name = find_column(df, m.name)
        y = col(df, name)
        if name is not None and y is not None and np.isfinite(y).any():
            out.append((m, facts.logged_as(name) if not m.source else f"{m.source} {m.name}"))
    return out


def _mismatch_metric_parts(df: pd.DataFrame, facts: RunFacts) -> list[MismatchPart]:
    """One part per mismatch metric the run has and that says something."""
    out = []
    for m, label in mismatch_metrics_read(df, facts):
        name = find_column(df, m.name)
        if name is None:  # mismatch_metrics_read found it
            raise KeyError(f"the step table has no column for {m.name!r}")
        y = column(df, name)
        if label != name:
            label = f"{label} (stored as {name})"
        sev, rows = _judge_mismatch(m.kind, y)
        if sev is None:
            continue
        med = float(np.nanmedian(y))
        text = f"{label}: median {med:.3g} over {int(np.isfinite(y).sum())} steps"
        if m.kind == K3:
            text += f", {_k3_band(med)}"
        elif m.kind == ABS_LOGP:
            text += f", so k3 ≳ {med**2 / 2:.2g}: {_k3_band(med**2 / 2)}"
        else:
            text += f"; beyond verl's alarm bound at {int(rows.sum())} steps"
        score = np.abs(np.log(np.abs(y))) if m.kind == IS_MEAN else np.abs(y)
        out.append(MismatchPart(sev, text, rows, score, int(np.isfinite(y).sum())))
    return out


def _shift_text(c: float, spread: float) -> str:
    """The known causes of a systematic per-token shift ``c`` of log r = log π_trainer - log π_old."""
    head = (
        f"every sequence is shifted the same way: median log s = {c:+.3g} per token "
        f"(ratio {np.exp(c):.3g}) with a spread of only {spread:.2g} across sequences, a "
        "systematic difference, not noise. "
    )
    if c < 0:
        return head + (
            "The sampler gave the sampled tokens more probability than the trainer: top-p/top-k "
            f"applied when sampling only (c ≈ log of the kept mass: here a kept mass ≈ "
            f"{np.exp(c):.2f}), or a sampling temperature < 1 the trainer does not apply"
        )
    return head + (
        "The trainer gives the sampled tokens more probability than the sampler did: a sampling "
        "temperature > 1 the trainer does not apply, or truncation (top-k/top-p) applied in the "
        "trainer only"
    )


def _lag0_parts(df: pd.DataFrame, split: lagmod.LagSplit) -> list[MismatchPart]:
    """The declared lag-0 steps whose ratios are not 1 (old_logprobs from the sampler disagree
    with the trainer's): size by k3 old→new there, and a systematic shift when every sequence's
    log s moves the same way."""
    ratio = col(df, Step.TOKEN_LOG_RATIO_ABS_MAX)
    lag0 = np.array([v == 0 for v in split.lag], bool)
    if ratio is None or not lag0.any():
        return []
    with np.errstate(invalid="ignore"):
        noisy = lag0 & (np.abs(ratio) > lagmod.MEASURED_ON_TOL)
    if not noisy.any():
        return []
    k3 = col(df, Step.KL_OLD_MEAN)
    k3 = np.where(noisy, k3, np.nan) if k3 is not None else np.full(len(df), np.nan)
    head = (
        f"at {int(noisy.sum())} of {int(lag0.sum())} steps with policy_lag 0 the ratios are not "
        f"1: max token |log-ratio| up to {np.nanmax(ratio[noisy]):.3g}"
    )
    parts = []
    if np.isfinite(k3).any():
        sev, rows = _judge_mismatch(K3, k3)
        med = float(np.nanmedian(k3))
        if sev is not None:
            text = f"{head}, k3 old→new median {med:.3g} ({_k3_band(med)})"
            parts.append(MismatchPart(sev, text, rows, k3, int(noisy.sum())))
    elif np.nanmedian(ratio[noisy]) > MISMATCH.token_max.value:
        parts.append(MismatchPart(INFO, head, noisy, ratio, int(noisy.sum())))
    mean, std = col(df, Step.SEQ_LOG_RATIO_MEAN), col(df, Step.SEQ_LOG_RATIO_STD)
    if mean is not None and std is not None and np.isfinite(mean[noisy]).any():
        c, spread = float(np.nanmedian(mean[noisy])), float(np.nanmedian(std[noisy]))
        if abs(c) > MISMATCH.shift.value and abs(c) > MISMATCH.shift_snr.value * spread:
            parts.append(
                MismatchPart(WARNING, _shift_text(c, spread), noisy, np.abs(mean), int(noisy.sum()))
            )
    return parts


def check_sampler_mismatch(
    df: pd.DataFrame,
    split: lagmod.LagSplit,
    facts: RunFacts,
    cov: Coverage,
) -> list[Finding]:
    """``sampler_mismatch``: at lag 0 the trainer's log-probs of the sampled tokens differ from the
    sampler's (ratios not 1 at declared lag 0, or a mismatch metric out of its usual band)."""
    _cover(df, split, facts, cov)
    parts = _lag0_parts(df, split) + _mismatch_metric_parts(df, facts)
    if not parts:
        return []
    steps = steps_of(df)
    rows = np.zeros(len(df), bool)
    for p in parts:
        rows |= p.rows
    top = min(parts, key=lambda p: SEVERITY_ORDER[p.severity])
    flagged = np.flatnonzero(rows)
    text = "; ".join(p.text for p in parts) + f" ({at_steps(steps[flagged], train_mask(df))})."
    if facts.one_update_per_row is False:
        text += (
            " Each row spans several optimizer updates: a metric recomputed against the current "
            "policy per mini-batch also holds the policy's own drift within the step."
        )
    return [
        Finding(
            SAMPLER_MISMATCH,
            top.severity,
            "Sampler and trainer disagree on the sampled tokens' log-probs",
            text,
            "The engine that sampled (vLLM, SGLang) and the trainer score the same tokens "
            "differently, so even on-policy ratios are not 1 and the clip acts on noise. Check "
            "both sides use the same dtype and weights and the same temperature / top-p / top-k "
            "(or none); correct what remains with truncated importance sampling (TRL "
            "vllm_importance_sampling_correction, verl algorithm.rollout_correction).",
            listed(steps[flagged]),
            worst(steps[top.rows], top.score[top.rows]),
            basis=max(p.basis for p in parts),
        )
    ]


def _cover(df: pd.DataFrame, split: lagmod.LagSplit, facts: RunFacts, cov: Coverage) -> None:
    """What the mismatch check reads: the metrics by their logged names, and the lag-0 ratios."""
    read = [label for _, label in mismatch_metrics_read(df, facts)]
    lag0 = any(v == 0 for v in split.lag)
    if lag0 and col(df, Step.TOKEN_LOG_RATIO_ABS_MAX) is not None:
        read.append("token log-ratios at policy_lag 0")
    if read:
        cov.ran("sampler/trainer mismatch", ", ".join(read))
    else:
        cov.skipped(
            "sampler/trainer mismatch",
            NOT_LOGGED + ": no sampler log-probs, no mismatch metric, no declared lag-0 ratios",
        )
