"""Automatic findings about a run, as pure functions of its step table (no Streamlit).

Each check takes the step DataFrame (columns ``Step.*``) and returns a list of ``Finding``; the
Health page only lays them out. Thresholds are module constants so the tests and the page's
captions quote the same numbers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from app.charts import fmt_eps
from training_hooks.schema import STATUS_CRASHED, STATUS_FAILED, STATUS_RUNNING, Step

ERROR = "error"
WARNING = "warning"
INFO = "info"
OK = "ok"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2, OK: 3}

ON_POLICY_TOL = 1e-7  # |log s| and token |log r| below this at every step = ratios identically 1
#: Typical clip fractions (median over the second half of a run) per algorithm, in its own unit.
EXPECTED_CLIP = {
    "gspo": (Step.SEQ_CLIP_FRACTION, 0.01, 0.40, "sequences", "seq"),
    "grpo": (Step.TOKEN_CLIP_FRACTION, 1e-4, 0.10, "tokens", "token"),
}
ZERO_VAR_WARN = 0.5
ZERO_VAR_ERROR = 0.9
SPIKE_MADS = 12.0  # a spike is above median + SPIKE_MADS * MAD (and SPIKE_FACTOR x the median)
SPIKE_FACTOR = 5.0
LENGTH_COLLAPSE = 0.5  # late median length / early median length
LENGTH_BLOWUP = 2.0
TRUNCATION_WARN = 0.2


@dataclass(frozen=True)
class Finding:
    severity: str  # ERROR, WARNING, INFO or OK
    title: str
    evidence: str
    advice: str
    steps: tuple[int, ...] = ()  # where to look


def _col(df: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in df.columns:
        return None
    return pd.to_numeric(df[name], errors="coerce").to_numpy(np.float64)


def _steps(df: pd.DataFrame) -> np.ndarray:
    if Step.STEP in df.columns:
        return df[Step.STEP].to_numpy()
    return np.arange(len(df))


def check_on_policy(df: pd.DataFrame) -> list[Finding]:
    """Ratios identically 1 at every step (log s and every token log r are 0)."""
    cols = [
        c
        for c in (Step.SEQ_LOG_RATIO_MIN, Step.SEQ_LOG_RATIO_MAX, Step.TOKEN_LOG_RATIO_ABS_MAX)
        if c in df.columns
    ]
    if not cols or len(df) == 0:
        return []
    vals = np.concatenate([np.abs(_col(df, c)) for c in cols])
    vals = vals[np.isfinite(vals)]
    if len(vals) == 0 or vals.max() > ON_POLICY_TOL:
        return []
    return [
        Finding(
            WARNING,
            "Ratios are identically 1: every update is fully on-policy",
            f"max |log ratio| over {len(df)} steps is {vals.max():.1e} (sequence and token).",
            "Each batch gets a single gradient step from the policy that sampled it, so nothing is "
            "ever clipped and the clip fractions and KL old→new say nothing. That is fine for "
            "plain on-policy training; to exercise the clip, reuse a batch for ≥2 updates "
            "(TRL num_iterations, verl ppo_epochs) or check old_logprobs are not recomputed from "
            "the current policy.",
        )
    ]


def check_clip_range(
    df: pd.DataFrame, algorithm: str, eps: tuple[float, float] | None = None
) -> list[Finding]:
    """The algorithm's own clip fraction (median over the second half) far outside its usual range."""
    spec = EXPECTED_CLIP.get(str(algorithm).lower())
    if spec is None:
        return []
    column, lo, hi, what, unit = spec
    v = _col(df, column)
    if v is None:
        return []
    v = v[len(v) // 2 :]
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return []
    med = float(np.median(v))
    eps_txt = f" with ε {fmt_eps(eps[0])}/{fmt_eps(eps[1])}" if eps else ""
    evidence = (
        f"median {column} over the second half = {med:.3g} of {what}{eps_txt}; "
        f"usual {algorithm.upper()} range {lo:g}–{hi:g}."
    )
    if med > hi:
        return [
            Finding(
                WARNING,
                f"{algorithm.upper()} clips far more than usual ({unit} unit)",
                evidence,
                "Most of the batch gets no gradient. The step size is large for this ε: lower the "
                "learning rate or the number of updates per batch, or (GSPO) check ε is in "
                "sequence units (3e-4/4e-4), not GRPO's 0.2.",
            )
        ]
    if med < lo:
        ratio_on = check_on_policy(df)
        return [
            Finding(
                INFO,
                f"{algorithm.upper()} almost never clips ({unit} unit)",
                evidence,
                "The clip is inactive: either the update is on-policy"
                + (" (it is: see above)" if ratio_on else "")
                + ", or ε is too wide for this step size (GSPO with GRPO's ε=0.2 never clips).",
            )
        ]
    return []


def check_zero_variance(df: pd.DataFrame) -> list[Finding]:
    """Most groups have equal rewards (no learning signal), median over the last quarter."""
    v = _col(df, Step.ZERO_VARIANCE_FRACTION)
    if v is None:
        return []
    late = v[-max(1, len(v) // 4) :]
    late = late[np.isfinite(late)]
    if len(late) == 0:
        return []
    med = float(np.median(late))
    if med < ZERO_VAR_WARN:
        return []
    sev = ERROR if med >= ZERO_VAR_ERROR else WARNING
    return [
        Finding(
            sev,
            "Most groups are zero-variance: little or no learning signal",
            f"median zero_variance_fraction over the last quarter of the run = {med:.0%} of groups.",
            "Groups where every completion gets the same reward have zero advantage in GRPO and "
            "GSPO alike. Sample harder (or easier) prompts, drop saturated prompts (DAPO's dynamic "
            "sampling), increase the group size, or use a denser reward.",
        )
    ]


def _spikes(y: np.ndarray) -> np.ndarray:
    fin = np.isfinite(y)
    if fin.sum() < 10:
        return np.zeros(len(y), bool)
    med = np.median(y[fin])
    mad = np.median(np.abs(y[fin] - med))
    thresh = max(med + SPIKE_MADS * 1.4826 * mad, abs(med) * SPIKE_FACTOR)
    return fin & (y > thresh) & (y > 0)


def check_spikes(df: pd.DataFrame) -> list[Finding]:
    """KL (to reference, old→new) or |log-ratio| far above the run's own median at some steps."""
    out = []
    steps = _steps(df)
    checks = [
        (Step.KL_OLD_MEAN, "KL old→new"),
        (Step.KL_REF_MEAN, "KL to reference"),
    ]
    series = [(c, label, _col(df, c)) for c, label in checks]
    lo, hi = _col(df, Step.SEQ_LOG_RATIO_MIN), _col(df, Step.SEQ_LOG_RATIO_MAX)
    if lo is not None and hi is not None:
        series.append(("|seq_log_ratio| max", "sequence |log-ratio|", np.maximum(-lo, hi)))
    for column, label, y in series:
        if y is None:
            continue
        mask = _spikes(y)
        if not mask.any():
            continue
        idx = np.flatnonzero(mask)
        worst = idx[np.argmax(y[idx])]
        med = float(np.median(y[np.isfinite(y)]))
        out.append(
            Finding(
                WARNING,
                f"{label} spikes at {len(idx)} step{'s' if len(idx) > 1 else ''}",
                f"worst at step {steps[worst]}: {column} = {y[worst]:.3g}, "
                f"{y[worst] / med if med else math.inf:.0f}x the run's median {med:.3g}"
                f" (steps {', '.join(str(s) for s in steps[idx[:8]])}"
                f"{', ...' if len(idx) > 8 else ''}).",
                "One batch moved the policy much further than the others: look at that step on "
                "the Sequences page (which sequences, which lengths). Common causes: a very long "
                "or degenerate completion, a reward outlier, a learning-rate warm-up ending, or "
                "stale old_logprobs. Gradient clipping or a smaller ε bounds it.",
                tuple(int(s) for s in steps[idx[:50]]),
            )
        )
    return out


def check_lengths(df: pd.DataFrame) -> list[Finding]:
    """Median length of the last 10% of steps vs the first 10% (collapse / blow-up), truncation."""
    v = _col(df, Step.LENGTH_MEAN)
    out = []
    if v is not None and np.isfinite(v).sum() >= 10:
        fin = v[np.isfinite(v)]
        k = max(1, len(fin) // 10)
        early, late = float(np.median(fin[:k])), float(np.median(fin[-k:]))
        if early > 0:
            r = late / early
            if r <= LENGTH_COLLAPSE:
                out.append(
                    Finding(
                        WARNING,
                        "Completion length collapsed",
                        f"median length fell from {early:.0f} to {late:.0f} tokens ({r:.2f}x).",
                        "Short answers are being rewarded (or long ones punished). With a token-sum or "
                        "token-mean loss GRPO favours lengths the reward prefers; check the reward for "
                        "a length bias and read some completions on the Sequences page.",
                    )
                )
            elif r >= LENGTH_BLOWUP:
                out.append(
                    Finding(
                        WARNING,
                        "Completion length blew up",
                        f"median length grew from {early:.0f} to {late:.0f} tokens ({r:.1f}x).",
                        "Long completions dominate token-summed losses and truncation follows. Check "
                        "for repetition loops, add a length penalty or overlong filtering (DAPO), or "
                        "compare with a length-normalised reduction.",
                    )
                )
    t = _col(df, Step.TRUNCATED_FRACTION)
    if t is not None:
        late_t = t[-max(1, len(t) // 10) :]
        late_t = late_t[np.isfinite(late_t)]
        if len(late_t) and float(np.median(late_t)) >= TRUNCATION_WARN:
            out.append(
                Finding(
                    WARNING,
                    "Many completions are truncated",
                    f"median truncated_fraction over the last 10% of steps = {np.median(late_t):.0%}.",
                    "Truncated completions usually get a wrong-answer reward for the wrong reason. "
                    "Raise the generation limit, mask truncated sequences out of the loss, or penalise "
                    "overlong answers.",
                )
            )
    return out


def check_nonfinite(df: pd.DataFrame) -> list[Finding]:
    """NaN/inf inside the mask (nonfinite_count) or non-finite step metrics."""
    steps = _steps(df)
    bad_steps: set[int] = set()
    parts = []
    nf = _col(df, Step.NONFINITE_COUNT)
    if nf is not None:
        idx = np.flatnonzero(np.nan_to_num(nf, nan=0) > 0)
        if len(idx):
            bad_steps.update(int(s) for s in steps[idx])
            parts.append(
                f"{int(np.nansum(nf))} non-finite input values inside the mask at {len(idx)} steps"
            )
    for c in (Step.LOSS, Step.REWARD_MEAN, Step.SEQ_LOG_RATIO_MEAN, Step.KL_OLD_MEAN):
        y = _col(df, c)
        if y is None:
            continue
        idx = np.flatnonzero(np.isinf(y) | (np.isnan(y) & np.isfinite(y).any()))
        if len(idx):
            bad_steps.update(int(s) for s in steps[idx])
            parts.append(f"{c} is NaN/inf at {len(idx)} steps")
    if not parts:
        return []
    first = sorted(bad_steps)[:8]
    return [
        Finding(
            ERROR,
            "Non-finite values",
            "; ".join(parts) + f" (first: {', '.join(map(str, first))}).",
            "A NaN in log-probs or rewards poisons the loss and the optimizer state. Find the "
            "first bad step; usual causes are -inf log-probs from a masked vocabulary entry, a "
            "0/0 advantage (std without eps) or an overflow in bf16.",
            tuple(sorted(bad_steps)[:50]),
        )
    ]


def check_status(
    status: str, updated_at: float | None, last_step: int | None, now: float | None = None
) -> list[Finding]:
    """A run that stopped without finishing (crashed: stale heartbeat) or that failed."""
    now = time.time() if now is None else now
    ago = f"{(now - updated_at) / 60:.0f} min ago" if updated_at else "at an unknown time"
    where = f" at step {last_step}" if last_step is not None else ""
    if status == STATUS_CRASHED:
        return [
            Finding(
                ERROR,
                "Stopped without finishing (crashed)",
                f"status is still 'running' but the last heartbeat was {ago}{where}.",
                "The process died without closing the recorder (kill -9, OOM killer, node "
                "failure). Every step older than the flush interval is on disk; check the job's "
                "logs, then resume with the same run id.",
            )
        ]
    if status == STATUS_FAILED:
        return [
            Finding(
                ERROR,
                "The run failed",
                f"the recorder closed with status 'failed'{where}, last update {ago}.",
                "The training loop raised; see run.json's faults and the job's traceback.",
            )
        ]
    if status == STATUS_RUNNING:
        return [
            Finding(
                INFO,
                "Running",
                f"last heartbeat {ago}{where}.",
                "Live: this page refreshes when new steps land.",
            )
        ]
    return []


def run_findings(
    df: pd.DataFrame,
    *,
    algorithm: str,
    status: str,
    updated_at: float | None = None,
    last_step: int | None = None,
    seq_eps: tuple[float, float] | None = None,
    token_eps: tuple[float, float] | None = None,
    now: float | None = None,
) -> list[Finding]:
    """Every check, most severe first; a single OK finding when nothing is wrong."""
    eps = seq_eps if str(algorithm).lower() == "gspo" else token_eps
    found = [
        *check_status(status, updated_at, last_step, now),
        *check_nonfinite(df),
        *check_on_policy(df),
        *check_clip_range(df, algorithm, eps),
        *check_zero_variance(df),
        *check_spikes(df),
        *check_lengths(df),
    ]
    if len(df) == 0:
        found.append(
            Finding(
                INFO,
                "No steps recorded yet",
                "the step table is empty.",
                "Wait for the first flush (a few seconds) or check the run's root.",
            )
        )
    if not any(f.severity in (ERROR, WARNING) for f in found):
        found.append(Finding(OK, "Nothing unusual", f"{len(df)} steps checked.", ""))
    return sorted(found, key=lambda f: SEVERITY_ORDER[f.severity])
