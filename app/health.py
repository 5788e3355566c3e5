"""Automatic findings about a run, as pure functions of its step table (no Streamlit).

``run_findings(df, algorithm=..., status=...)`` returns ``Finding``s, each with a stable ``code``
from ``CODES`` (one finding per code per run, so its advice is said once). Every check is split by
policy lag (``app.lag``): on-policy steps have ratio 1 by construction, so the clip and KL old→new
checks read off-policy steps only, and spikes and trends are judged against steps of the same lag
nearby (a rolling median and MAD over same-lag neighbours), so alternating lags and a slow drift
never alarm. A setting the run does not state (algorithm, ε) is never judged with a default.

Every threshold is a ``Threshold`` in ``THRESHOLDS`` with its unit and its source; the tests and
the page quote the same numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from app import lag as lagmod
from app.charts import fmt_eps
from gspo_metrics.spec import GRPO_EPS, GSPO_EPS
from training_hooks.schema import (
    STATUS_CRASHED,
    STATUS_FAILED,
    STATUS_RUNNING,
    STEP_METRIC_COLUMNS,
    Step,
)

ERROR = "error"
WARNING = "warning"
INFO = "info"
OK = "ok"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2, OK: 3}

# The stable codes (a contract: tests, the bench and the page match on them).
ON_POLICY_ONLY = "on_policy_only"
STALE_OLD_LOGPROBS = "stale_old_logprobs"
SAMPLER_MISMATCH = "sampler_mismatch"
CLIP_HIGH = "clip_high"
CLIP_LOW = "clip_low"
ZERO_VARIANCE = "zero_variance"
KL_REF_SPIKE = "kl_ref_spike"
KL_OLD_SPIKE = "kl_old_spike"
LOG_RATIO_SPIKE = "log_ratio_spike"
ENTROPY_COLLAPSE = "entropy_collapse"
LENGTH_COLLAPSE = "length_collapse"
LENGTH_BLOWUP = "length_blowup"
TRUNCATION = "truncation"
NONFINITE = "nonfinite"
CRASHED = "crashed"
FAILED = "failed"
CODES = (
    ON_POLICY_ONLY,
    STALE_OLD_LOGPROBS,
    SAMPLER_MISMATCH,
    CLIP_HIGH,
    CLIP_LOW,
    ZERO_VARIANCE,
    KL_REF_SPIKE,
    KL_OLD_SPIKE,
    LOG_RATIO_SPIKE,
    ENTROPY_COLLAPSE,
    LENGTH_COLLAPSE,
    LENGTH_BLOWUP,
    TRUNCATION,
    NONFINITE,
    CRASHED,
    FAILED,
)
# Informational codes outside that set: nothing to report, live run, no steps, a check skipped
# because the run does not state a setting it needs.
OK_CODE = "ok"
RUNNING = "running"
NO_STEPS = "no_steps"
NOT_JUDGED = "not_judged"


@dataclass(frozen=True)
class Threshold:
    value: float
    unit: str
    source: str


PAPER_GSPO = (
    "GSPO paper (Zheng et al. 2025, arXiv 2507.18071: its clipping-fraction figure, two orders of "
    "magnitude between GSPO and GRPO) and verl's GSPO PR"
)
VERL_RC = "verl docs/algo/rollout_corr.md (check_rollout_correction_health)"
OURS = "ours (no published band): "
THRESHOLDS: dict[str, Threshold] = {
    # clip share of off-policy steps, each algorithm in its own unit (share outside [1-ε, 1+ε])
    "gspo_clip_usual_low": Threshold(0.10, "share of sequences", PAPER_GSPO),
    "gspo_clip_usual_high": Threshold(0.30, "share of sequences", PAPER_GSPO),
    "gspo_clip_warn_high": Threshold(
        0.50,
        "share of sequences",
        PAPER_GSPO + "; warn at 5/3 of the band's top: our column counts every sequence outside "
        "the range whatever its advantage (zero-advantage groups included), more than the share "
        "where the clip binds",
    ),
    "gspo_clip_warn_low": Threshold(
        0.02, "share of sequences", PAPER_GSPO + "; 5x below the band's bottom"
    ),
    "grpo_clip_usual_low": Threshold(3e-4, "share of tokens", PAPER_GSPO),
    "grpo_clip_usual_high": Threshold(0.01, "share of tokens", PAPER_GSPO),
    "grpo_clip_warn_high": Threshold(
        0.05,
        "share of tokens",
        PAPER_GSPO + "; 5x the band's top (DAPO's clip-higher runs sit near 1-2%)",
    ),
    "grpo_clip_warn_low": Threshold(
        3e-5, "share of tokens", PAPER_GSPO + "; 10x below the band's bottom"
    ),
    # sampler/trainer mismatch (k3 = r - 1 - log r per token, token mean)
    "mismatch_k3_dense": Threshold(
        1e-3,
        "nats/token (k3)",
        "verl rollout-correction docs and the issue: dense models "
        "1e-5..1e-3, MoE 1e-3..1e-1; above 1e-3 is said (info), dense or MoE unknown",
    ),
    "mismatch_k3_floor": Threshold(
        1e-5, "nats/token (k3)", "bottom of the dense band (same source): below it, float noise"
    ),
    "mismatch_kl_alarm": Threshold(0.1, "nats/token (|kl|, k3)", VERL_RC + ": alarm |kl| > 0.1"),
    "mismatch_chi2_token": Threshold(1.0, "chi2 per token", VERL_RC + ": alarm chi2_token > 1"),
    "mismatch_is_mean_low": Threshold(0.5, "IS weight mean", VERL_RC + ": mean outside [0.5, 2]"),
    "mismatch_is_mean_high": Threshold(2.0, "IS weight mean", VERL_RC + ": mean outside [0.5, 2]"),
    "mismatch_shift": Threshold(
        0.01,
        "nats per token",
        OURS + "a 1% per-token ratio offset; random bf16 noise averages "
        "out of a sequence mean, a one-sided temperature or top-p does not",
    ),
    "mismatch_shift_snr": Threshold(
        3.0, "|mean| / std of log s", OURS + "every sequence shifted the same way"
    ),
    "mismatch_token_max": Threshold(
        0.01,
        "nats (max token |log r| at lag 0, when no KL old→new is recorded)",
        OURS + "above bf16's rounding of a log-prob near -1 (2**-8 = 0.004)",
    ),
    "stale_share": Threshold(
        0.5, "share of lag>=1 steps", OURS + "a few exact steps can be a zero learning rate"
    ),
    "zero_var_warn": Threshold(0.5, "share of groups", OURS + "half the batch gives no signal"),
    "zero_var_error": Threshold(0.9, "share of groups", OURS + "almost no signal is left"),
    "spike_mads": Threshold(
        6.0,
        "robust sigmas of log y (1.4826 MAD)",
        OURS + "the largest seen on healthy runs is 3.7 (the demo's KL old→new, KL to reference "
        "and log-ratio, 2 x 240 steps) and 5.3 (Tinker's sampler KL, 100 steps)",
    ),
    "spike_factor": Threshold(5.0, "x the rolling median", OURS + "half an order of magnitude"),
    "spike_window": Threshold(12, "same-lag steps each side", OURS),
    "spike_min_neighbours": Threshold(8, "same-lag steps", OURS + "fewer: not judged"),
    "spike_min_past": Threshold(
        4,
        "same-lag steps before it",
        OURS + "a run's first updates are its largest (Adam's first steps move every weight by "
        "about the learning rate): judged against later steps only, they read as spikes (the "
        "demo, seed 1: KL old→new 21x at its first off-policy step)",
    ),
    "entropy_collapse": Threshold(
        0.2,
        "late / early median entropy",
        "DAPO (Yu et al. 2025, arXiv 2503.14476): without clip-higher the entropy falls steeply "
        "early in training, what they call entropy collapse; a 5x fall is ours",
    ),
    "length_collapse": Threshold(0.5, "late / early median length", OURS + "halved"),
    "length_blowup": Threshold(2.0, "late / early median length", OURS + "doubled"),
    "truncation": Threshold(0.2, "share of sequences", OURS + "one in five hits the limit"),
    "trend_min_steps": Threshold(10, "steps per lag group", OURS + "fewer: not judged"),
}


def th(name: str) -> float:
    return THRESHOLDS[name].value


@dataclass(frozen=True)
class Finding:
    code: str  # one of CODES (or OK_CODE, RUNNING, NO_STEPS, NOT_JUDGED)
    severity: str  # ERROR, WARNING, INFO or OK
    title: str
    evidence: str
    advice: str
    steps: tuple[int, ...] = ()  # every step the finding is about
    culprits: tuple[int, ...] = ()  # the few steps to open on the Sequences page, worst first


# ---------------------------------------------------------------------------------------------
# Reading the step table


def _col(df: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in df.columns:
        return None
    return pd.to_numeric(df[name], errors="coerce").to_numpy(np.float64, na_value=np.nan)


def _steps(df: pd.DataFrame) -> np.ndarray:
    if Step.STEP in df.columns:
        return pd.to_numeric(df[Step.STEP], errors="coerce").fillna(-1).to_numpy(np.int64)
    return np.arange(len(df))


def _fmt_steps(steps, limit: int = 8) -> str:
    s = [str(int(x)) for x in steps]
    return ", ".join(s[:limit]) + (f", ... ({len(s)} in all)" if len(s) > limit else "")


def _at_steps(steps: np.ndarray, train: np.ndarray) -> str:
    """ "every step" when ``steps`` are all the training rows, else the list."""
    return "at every step" if len(steps) == int(train.sum()) else f"steps {_fmt_steps(steps)}"


def _worst(steps: np.ndarray, score: np.ndarray, n: int = 3) -> tuple[int, ...]:
    """The ``n`` steps with the largest ``score``, worst first (the culprits to open)."""
    order = np.argsort(-np.nan_to_num(score, nan=-np.inf), kind="stable")[:n]
    return tuple(int(steps[i]) for i in order)


#: Columns that count/identify rather than measure training: a row holding nothing else is not a
#: training step.
_BOOKKEEPING = {Step.NUM_RANKS, Step.ROLLOUT, Step.POLICY_LAG}
TRAIN_COLUMNS = tuple(c for c in STEP_METRIC_COLUMNS if c not in _BOOKKEEPING)


def train_mask(df: pd.DataFrame) -> np.ndarray:
    """Rows that hold at least one training metric of ours: an imported log's validation-only line
    (every train metric null; verl's step-0 validation) is not a step with a NaN loss."""
    has = np.zeros(len(df), bool)
    for c in TRAIN_COLUMNS:
        if c in df.columns:
            has |= ~np.isnan(_col(df, c))  # inf is a value (and a finding)
    return has


def in_step_order(df: pd.DataFrame) -> pd.DataFrame:
    if Step.STEP in df.columns:
        df = df.sort_values(Step.STEP, kind="stable")
    return df.reset_index(drop=True)


def lag_groups(split: lagmod.LagSplit) -> np.ndarray:
    """Per row, the set of same-lag steps it is judged against: its declared lag ("lag=2"), else
    its measured class ("on"/"off"), else "unknown"."""
    return np.array(
        [
            f"lag={lag}" if lag is not None else (c if c is not None else "unknown")
            for lag, c in zip(split.lag, split.lag_class, strict=True)
        ],
        dtype=object,
    )


# ---------------------------------------------------------------------------------------------
# Robust baseline: rolling median and MAD over same-lag neighbours


def rolling_baseline(y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the median and the MAD (median |v - median|) of the finite values of the rows in
    the same group within ``spike_window`` group rows on each side, the row itself left out; NaN
    where fewer than ``spike_min_neighbours`` such values or fewer than ``spike_min_past`` before
    it. Rows are taken in the order given (step order). A centred window follows a trend: on a
    line the median is the row's own value."""
    h = int(th("spike_window"))
    need = int(th("spike_min_neighbours"))
    past = int(th("spike_min_past"))
    med = np.full(len(y), np.nan)
    mad = np.full(len(y), np.nan)
    for g in dict.fromkeys(groups.tolist()):
        idx = np.flatnonzero(groups == g)
        padded = np.concatenate([np.full(h, np.nan), y[idx], np.full(h, np.nan)])
        win = np.lib.stride_tricks.sliding_window_view(padded, 2 * h + 1).copy()  # (n, 2h+1)
        win[:, h] = np.nan  # leave the row itself out
        ok = np.isfinite(win).sum(axis=1) >= need
        ok &= np.isfinite(win[:, :h]).sum(axis=1) >= past  # a past to compare with
        if not ok.any():
            continue
        w = win[ok]
        m = row_nanmedian(w)
        med[idx[ok]] = m
        mad[idx[ok]] = row_nanmedian(np.abs(w - m[:, None]))
    return med, mad


def row_nanmedian(w: np.ndarray) -> np.ndarray:
    """Median of each row's finite values (each row has at least one): the two middle values of
    the sorted row (sorting puts NaN last), averaged. ``np.nanmedian`` is 10x slower here."""
    k = np.isfinite(w).sum(axis=1)
    s = np.sort(w, axis=1)
    lo = np.take_along_axis(s, ((k - 1) // 2)[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(s, (k // 2)[:, None], axis=1)[:, 0]
    return (lo + hi) / 2


def spike_mask(y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(spike rows, the rolling median they were judged against). Judged on log y, since KL and
    |log-ratio| series are positive and heavy-tailed (the demo's KL old→new spans four orders of
    magnitude within a few steps): a spike is
    ``log y - med > spike_mads * 1.4826 * MAD`` (median and MAD of the same-lag neighbours' log y;
    1.4826 MAD is the standard deviation of Gaussian noise) and ``y > spike_factor * e^med``.
    Values <= 0 (a KL that was never positive, a k1 estimate below 0) are not judged."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ly = np.log(np.where(y > 0, y, np.nan))
    med, mad = rolling_baseline(ly, groups)
    judged = np.isfinite(ly) & np.isfinite(med)
    with np.errstate(invalid="ignore"):
        jump = ly - med
        high = (jump > th("spike_mads") * 1.4826 * mad) & (jump > np.log(th("spike_factor")))
    return judged & high, np.exp(med)


# ---------------------------------------------------------------------------------------------
# Checks. Each returns at most one Finding per code.


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
                CRASHED,
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
                FAILED,
                ERROR,
                "The run failed",
                f"the recorder closed with status 'failed'{where}, last update {ago}.",
                "The training loop raised; see run.json's faults and the job's traceback.",
            )
        ]
    if status == STATUS_RUNNING:
        return [
            Finding(
                RUNNING,
                INFO,
                "Running",
                f"last heartbeat {ago}{where}.",
                "Live: this page refreshes when new steps land.",
            )
        ]
    return []


#: Step metrics whose NaN is a finding (inf is one in any column of this list).
NONFINITE_COLUMNS = (Step.LOSS, Step.REWARD_MEAN, Step.SEQ_LOG_RATIO_MEAN, Step.KL_OLD_MEAN)


def check_nonfinite(df: pd.DataFrame) -> list[Finding]:
    """NaN/inf inside the mask (``nonfinite_count``), or a NaN/inf step metric on a training row.

    Rows without any training metric (``train_mask``: a validation-only line) are skipped; a
    metric that is NaN on every row was never logged (no reference model, a source without it),
    so its NaN is not a finding."""
    df = df[train_mask(df)]
    steps = _steps(df)
    bad: set[int] = set()
    parts = []
    nf = _col(df, Step.NONFINITE_COUNT)
    if nf is not None:
        idx = np.flatnonzero(np.nan_to_num(nf, nan=0) > 0)
        if len(idx):
            bad.update(int(s) for s in steps[idx])
            parts.append(
                f"{int(np.nansum(nf))} non-finite input values inside the mask at {len(idx)} steps"
            )
    for c in NONFINITE_COLUMNS:
        y = _col(df, c)
        if y is None:
            continue
        idx = np.flatnonzero(np.isinf(y) | (np.isnan(y) & np.isfinite(y).any()))
        if len(idx):
            bad.update(int(s) for s in steps[idx])
            parts.append(f"{c} is NaN/inf at {len(idx)} steps")
    if not parts:
        return []
    ordered = sorted(bad)
    return [
        Finding(
            NONFINITE,
            ERROR,
            "Non-finite values",
            "; ".join(parts) + f" (first: {_fmt_steps(ordered)}).",
            "A NaN in log-probs or rewards poisons the loss and the optimizer state. Open the "
            "first bad step; usual causes are -inf log-probs from a masked vocabulary entry, a "
            "0/0 advantage (std without eps) or an overflow in bf16.",
            tuple(ordered[:50]),
            tuple(ordered[:3]),
        )
    ]


def check_lag(df: pd.DataFrame, split: lagmod.LagSplit) -> list[Finding]:
    """``on_policy_only`` (no off-policy step) and ``stale_old_logprobs`` (a declared lag >= 1
    with every token ratio exactly 1 on at least ``stale_share`` of those steps). A step whose
    earlier updates had no signal (every group zero-variance: all advantages 0, a null gradient)
    is left out: its policy did not move, so ratios of exactly 1 are right there."""
    out = []
    steps = _steps(df)
    ratio = _col(df, Step.TOKEN_LOG_RATIO_ABS_MAX)
    lag = np.array([np.nan if v is None else v for v in split.lag], float)
    if ratio is not None:
        declared_off = (lag >= 1) & np.isfinite(ratio) & ~_after_null_updates(df, lag)
        exact = declared_off & (np.abs(ratio) <= lagmod.MEASURED_ON_TOL)
        n_off, n_exact = int(declared_off.sum()), int(exact.sum())
        if n_off and n_exact / n_off >= th("stale_share"):
            out.append(_stale(steps[exact], n_exact, n_off))
    if split.n_off == 0 and split.n_on > 0:
        out.append(_on_policy_only(split, ratio))
    return out


def _after_null_updates(df: pd.DataFrame, lag: np.ndarray) -> np.ndarray:
    """Per row: the ``lag`` updates before it (the rows just above) all had every group
    zero-variance, so none of them moved the policy (False where that is unknown)."""
    zv = _col(df, Step.ZERO_VARIANCE_FRACTION)
    out = np.zeros(len(df), bool)
    if zv is None:
        return out
    null = zv >= 1.0
    for i, k in enumerate(lag):
        if np.isfinite(k) and 1 <= k <= i:
            out[i] = bool(null[i - int(k) : i].all())
    return out


def _on_policy_only(split: lagmod.LagSplit, ratio: np.ndarray | None) -> Finding:
    how = {
        lagmod.DECLARED: "declared (policy_lag = 0)",
        lagmod.MEASURED: f"measured (every token |log-ratio| ≤ {lagmod.MEASURED_ON_TOL:g})",
    }.get(split.source, "declared or measured")
    unknown = f"; {split.n_unknown} steps of unknown lag" if split.n_unknown else ""
    on = split.mask(lagmod.ON_POLICY)
    exact = ratio is None or bool(np.all(np.abs(ratio[on]) <= lagmod.MEASURED_ON_TOL))
    why = (
        "so its ratios are 1 and nothing is clipped"
        if exact
        else "so clip and KL old→new measure only the sampler/trainer mismatch (see below)"
    )
    advice = (
        f"Each batch gets a single gradient step from the policy that sampled it, {why}: fine for "
        "plain on-policy training. To use the clip, reuse a batch for ≥ 2 updates (TRL "
        "num_iterations, verl ppo_epochs)."
    )
    if split.source != lagmod.DECLARED:
        advice += (
            " If the loop does reuse batches, old_logprobs are recomputed from the current "
            "policy: pass policy_lag to log_step and Health will say so."
        )
    return Finding(
        ON_POLICY_ONLY,
        INFO,
        "Every step is on-policy: clip and KL old→new say nothing",
        f"{split.n_on} on-policy steps, {how}{unknown}; no off-policy step.",
        advice,
    )


def _stale(steps: np.ndarray, n_exact: int, n_off: int) -> Finding:
    return Finding(
        STALE_OLD_LOGPROBS,
        ERROR,
        "Off-policy steps with ratios exactly 1: old log-probs are stale",
        f"{n_exact} of {n_off} steps with a declared policy_lag ≥ 1 have every token "
        f"|log-ratio| ≤ {lagmod.MEASURED_ON_TOL:g} (steps {_fmt_steps(steps)}).",
        "The policy moved since the batch was sampled, yet π/π_old = 1: old_logprobs were "
        "recomputed from the current policy (or copied from the new log-probs) instead of kept "
        "from the sampling policy, so the clip never acts and the update has no trust region. "
        "Compute old_logprobs once per batch, before the first update, and reuse them.",
        tuple(int(s) for s in steps[:50]),
        tuple(int(s) for s in steps[:3]),
    )


# ---------------------------------------------------------------------------------------------
# Sampler/trainer mismatch

K3 = "k3"  # k3 = r - 1 - log r per token, token mean (nats/token)
ABS_KL = "abs_kl"  # a signed KL estimate (k1): judged on |kl|
CHI2 = "chi2"  # chi-square per token: E[r^2] - 1
IS_MEAN = "is_mean"  # mean importance weight pi_trainer / pi_sampler
ABS_LOGP = "abs_logp"  # mean |log p_trainer - log p_sampler|: k3 >= mean^2 / 2 (Jensen, k3 ≈ Δ²/2)


@dataclass(frozen=True)
class MismatchMetric:
    """A sampler/trainer mismatch metric Health reads when the run has it."""

    name: (
        str  # column name; a foreign one also matches behind a tool prefix ("trl/...", "verl/...")
    )
    kind: str  # K3, ABS_KL, CHI2, IS_MEAN or ABS_LOGP
    source: str


#: Ours first, then the foreign names the importers keep (TRL's sampling/*, verl's rollout_corr/*,
#: Tinker's optim/kl_sample_train_v2 = 0.5 mean Δ², equal to k3 to second order in Δ).
MISMATCH_METRICS = (
    MismatchMetric(Step.SAMPLER_KL_MEAN, K3, "recorded (sampler_logprobs)"),
    MismatchMetric("rollout_corr/k3_kl", K3, "verl"),
    MismatchMetric("rollout_corr/kl", ABS_KL, "verl"),
    MismatchMetric("rollout_corr/chi2_token", CHI2, "verl"),
    MismatchMetric("rollout_corr/rollout_is_mean", IS_MEAN, "verl"),
    MismatchMetric("sampling/importance_sampling_ratio/mean", IS_MEAN, "TRL"),
    MismatchMetric("sampling/sampling_logp_difference/mean", ABS_LOGP, "TRL"),
    MismatchMetric("optim/kl_sample_train_v2", K3, "Tinker (k2)"),
)


@dataclass(frozen=True)
class MismatchPart:
    """One piece of sampler-mismatch evidence."""

    severity: str
    text: str
    rows: np.ndarray  # bool per row: the steps it is about
    score: np.ndarray  # per row: larger = worse (picks the culprits)


def _find_column(df: pd.DataFrame, name: str) -> str | None:
    if name in df.columns:
        return name
    tails = [c for c in df.columns if isinstance(c, str) and c.endswith("/" + name)]
    return tails[0] if tails else None


def _k3_band(v: float) -> str:
    dense, alarm = th("mismatch_k3_dense"), th("mismatch_kl_alarm")
    if v > alarm:
        return f"above verl's alarm ({alarm:g})"
    if v > dense:
        return f"above the usual band of a dense model ({th('mismatch_k3_floor'):g}–{dense:g}), inside a MoE's ({dense:g}–{alarm:g})"
    return f"inside the usual band of a dense model ({th('mismatch_k3_floor'):g}–{dense:g})"


def _judge_mismatch(kind: str, y: np.ndarray) -> tuple[str | None, np.ndarray]:
    """(severity, rows that reach it) for one metric's per-step values; (None, ...) when fine."""
    with np.errstate(invalid="ignore"):
        if kind == ABS_LOGP:
            y = y**2 / 2  # a lower bound of k3 (Jensen on k3 ≈ Δ²/2)
        if kind in (K3, ABS_LOGP):  # info: the run's median is above float noise
            warn = y > th("mismatch_kl_alarm")
            info = (y > th("mismatch_k3_floor")) & (np.nanmedian(y) > th("mismatch_k3_floor"))
        elif kind == ABS_KL:
            warn, info = np.abs(y) > th("mismatch_kl_alarm"), np.zeros(len(y), bool)
        elif kind == CHI2:
            warn, info = y > th("mismatch_chi2_token"), np.zeros(len(y), bool)
        else:  # IS_MEAN
            warn = (y < th("mismatch_is_mean_low")) | (y > th("mismatch_is_mean_high"))
            info = np.zeros(len(y), bool)
    if warn.any():
        return WARNING, warn
    if info.any():
        return INFO, info
    return None, warn


def _mismatch_metric_parts(df: pd.DataFrame) -> list[MismatchPart]:
    """One part per mismatch metric the run has and that says something."""
    out = []
    for m in MISMATCH_METRICS:
        col = _find_column(df, m.name)
        y = _col(df, col) if col else None
        if y is None or not np.isfinite(y).any():
            continue
        sev, rows = _judge_mismatch(m.kind, y)
        if sev is None:
            continue
        med = float(np.nanmedian(y))
        text = f"{col} ({m.source}): median {med:.3g} over {int(np.isfinite(y).sum())} steps"
        if m.kind == K3:
            text += f", {_k3_band(med)}"
        elif m.kind == ABS_LOGP:
            text += f", so k3 ≳ {med**2 / 2:.2g}: {_k3_band(med**2 / 2)}"
        else:
            text += f"; beyond verl's alarm bound at {int(rows.sum())} steps"
        score = np.abs(np.log(np.abs(y))) if m.kind == IS_MEAN else np.abs(y)
        out.append(MismatchPart(sev, text, rows, score))
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
    ratio = _col(df, Step.TOKEN_LOG_RATIO_ABS_MAX)
    lag0 = np.array([v == 0 for v in split.lag], bool)
    if ratio is None or not lag0.any():
        return []
    with np.errstate(invalid="ignore"):
        noisy = lag0 & (np.abs(ratio) > lagmod.MEASURED_ON_TOL)
    if not noisy.any():
        return []
    k3 = _col(df, Step.KL_OLD_MEAN)
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
            parts.append(MismatchPart(sev, text, rows, k3))
    elif np.nanmedian(ratio[noisy]) > th("mismatch_token_max"):
        parts.append(MismatchPart(INFO, head, noisy, ratio))
    mean, std = _col(df, Step.SEQ_LOG_RATIO_MEAN), _col(df, Step.SEQ_LOG_RATIO_STD)
    if mean is not None and std is not None and np.isfinite(mean[noisy]).any():
        c, spread = float(np.nanmedian(mean[noisy])), float(np.nanmedian(std[noisy]))
        if abs(c) > th("mismatch_shift") and abs(c) > th("mismatch_shift_snr") * spread:
            parts.append(MismatchPart(WARNING, _shift_text(c, spread), noisy, np.abs(mean)))
    return parts


def check_sampler_mismatch(df: pd.DataFrame, split: lagmod.LagSplit) -> list[Finding]:
    """``sampler_mismatch``: at lag 0 the trainer's log-probs of the sampled tokens differ from the
    sampler's (ratios not 1 at declared lag 0, or a mismatch metric out of its usual band)."""
    parts = _lag0_parts(df, split) + _mismatch_metric_parts(df)
    if not parts:
        return []
    steps = _steps(df)
    rows = np.zeros(len(df), bool)
    for p in parts:
        rows |= p.rows
    worst = min(parts, key=lambda p: SEVERITY_ORDER[p.severity])
    flagged = np.flatnonzero(rows)
    return [
        Finding(
            SAMPLER_MISMATCH,
            worst.severity,
            "Sampler and trainer disagree on the sampled tokens' log-probs",
            "; ".join(p.text for p in parts) + f" ({_at_steps(steps[flagged], train_mask(df))}).",
            "The engine that sampled (vLLM, SGLang) and the trainer score the same tokens "
            "differently, so even on-policy ratios are not 1 and the clip acts on noise. Check "
            "both sides use the same dtype and weights and the same temperature / top-p / top-k "
            "(or none); correct what remains with truncated importance sampling (TRL "
            "vllm_importance_sampling_correction, verl algorithm.rollout_correction).",
            tuple(int(s) for s in steps[flagged][:50]),
            _worst(steps[worst.rows], worst.score[worst.rows]),
        )
    ]


# ---------------------------------------------------------------------------------------------
# Clip share, in the algorithm's own unit, on off-policy steps


@dataclass(frozen=True)
class ClipSpec:
    column: str  # share outside [1 - eps_low, 1 + eps_high] in the algorithm's unit
    binding: tuple[str, str]  # low / high shares where the clip binds (a lower bound of column)
    unit: str
    what: str
    reference_eps: tuple[float, float]  # the ε the usual band was measured at


CLIP_SPECS = {
    "gspo": ClipSpec(
        Step.SEQ_CLIP_FRACTION,
        (Step.SEQ_CLIP_LOW_FRACTION, Step.SEQ_CLIP_HIGH_FRACTION),
        "sequence",
        "sequences",
        GSPO_EPS,
    ),
    "grpo": ClipSpec(
        Step.TOKEN_CLIP_FRACTION,
        (Step.TOKEN_CLIP_LOW_FRACTION, Step.TOKEN_CLIP_HIGH_FRACTION),
        "token",
        "tokens",
        GRPO_EPS,
    ),
}


def _known_eps(eps) -> tuple[float, float] | None:
    if eps is None or len(eps) != 2 or any(e is None for e in eps):
        return None
    try:
        lo, hi = float(eps[0]), float(eps[1])
    except (TypeError, ValueError):
        return None
    return (lo, hi) if np.isfinite(lo) and np.isfinite(hi) else None


def _clip_series(df: pd.DataFrame, spec: ClipSpec) -> tuple[np.ndarray | None, bool]:
    """(per-step clip share, exact): the outside-range share, else the binding low + high (a lower
    bound of it: only clip_high can then be judged)."""
    y = _col(df, spec.column)
    if y is not None and np.isfinite(y).any():
        return y, True
    lo, hi = _col(df, spec.binding[0]), _col(df, spec.binding[1])
    if lo is None or hi is None or not np.isfinite(lo + hi).any():
        return None, False
    return lo + hi, False


def _not_judged(what: str, why: str) -> Finding:
    return Finding(
        NOT_JUDGED,
        INFO,
        f"Not judged: {what}",
        why,
        "Health never judges a run on a setting it does not know. Import with --algorithm / "
        "--config (or a config file beside the log) to state it.",
    )


def check_clip_range(
    df: pd.DataFrame, split: lagmod.LagSplit, algorithm: str, eps
) -> list[Finding]:
    """``clip_high`` / ``clip_low``: the median clip share of the off-policy steps outside the
    algorithm's usual range, in its own unit, with the run's ε. Unknown algorithm or ε: not
    judged. Unknown lag: only clip_high, over all steps (on-policy steps clip 0 and can only lower
    the median, so a high median is still true of the off-policy ones)."""
    algo = str(algorithm).lower()
    spec = CLIP_SPECS.get(algo)
    known = _known_eps(eps)
    if spec is None or known is None:
        probes = [c for s in CLIP_SPECS.values() for c in (s.column, *s.binding)]
        if any(np.isfinite(_col(df, c)).any() for c in probes if c in df.columns):
            why = "the run does not state its algorithm" if spec is None else "its ε is unknown"
            return [_not_judged("the clip share", f"{why}, so its usual range is unknown.")]
        return []
    share, exact = _clip_series(df, spec)
    if share is None:
        return []
    off = split.mask(lagmod.OFF_POLICY)
    rows = (off if off.any() else np.ones(len(df), bool)) & np.isfinite(share)
    if not rows.any():
        return []
    med = float(np.median(share[rows]))
    r = ClipReading(algo, spec, known, share, rows, med, exact, off.any(), split.n_unknown > 0)
    if r.median > th(f"{algo}_clip_warn_high"):
        return [_clip_finding(df, r, high=True)]
    if r.median < th(f"{algo}_clip_warn_low") and exact and r.lag_known:
        return [_clip_finding(df, r, high=False)]
    return []


@dataclass(frozen=True)
class ClipReading:
    """What ``check_clip_range`` read, for the finding's text."""

    algo: str
    spec: ClipSpec
    eps: tuple[float, float]  # the run's
    share: np.ndarray  # per-step clip share
    rows: np.ndarray  # the steps judged (off-policy, or all when the lag is unknown)
    median: float
    exact: bool  # share is the outside-range column (else the binding sum, a lower bound)
    lag_known: bool  # the run has off-policy steps (else every step is judged)
    some_unknown: bool  # some steps' lag is unknown


def _clip_evidence(df: pd.DataFrame, r: ClipReading, bound: float, high: bool) -> str:
    spec, n = r.spec, int(r.rows.sum())
    which = f"{n} off-policy steps" if r.lag_known else f"all {n} steps, none known off-policy"
    measure = spec.column if r.exact else f"{spec.binding[0]} + {spec.binding[1]} (where it binds)"
    ref = spec.reference_eps
    text = (
        f"{r.algo.upper()} clips {_pct(r.median)} of {spec.what} (median {measure} over {which}; "
        f"ε {fmt_eps(r.eps[0])}/{fmt_eps(r.eps[1])} in the {spec.unit} unit). Usual: "
        f"{_pct(th(r.algo + '_clip_usual_low'))}–{_pct(th(r.algo + '_clip_usual_high'))} at ε "
        f"{fmt_eps(ref[0])}/{fmt_eps(ref[1])}; Health warns {'above' if high else 'below'} "
        f"{_pct(bound)}."
    )
    if not r.lag_known and r.some_unknown:
        text += " The lag is unknown: on-policy steps, if any, only lower this median."
    if r.exact and all(c in df.columns for c in spec.binding):
        b = _col(df, spec.binding[0]) + _col(df, spec.binding[1])
        if np.isfinite(b[r.rows]).any():
            text += f" The clip binds on {_pct(float(np.nanmedian(b[r.rows])))} of {spec.what}."
    return text


def _clip_finding(df: pd.DataFrame, r: ClipReading, *, high: bool) -> Finding:
    gspo = r.algo == "gspo"
    bound = th(f"{r.algo}_clip_warn_{'high' if high else 'low'}")
    if high:
        advice = (
            "The policy moves further per update than this ε allows, so the clip stops the "
            "gradient of many samples: lower the learning rate or the number of updates per "
            "batch"
            + (", or check ε is GSPO's sequence-unit 3e-4/4e-4, not GRPO's 0.2." if gspo else ".")
        )
    else:
        advice = (
            "The clip is inactive: ε is wide for this step size"
            + (" (GSPO with GRPO's token ε 0.2 never clips)." if gspo else ".")
            + " Fine if intended; otherwise the update has no trust region."
        )
    wide = min(r.eps) >= 10 * min(r.spec.reference_eps)  # ε in the wrong unit, most likely
    steps = _steps(df)
    over = r.rows & ((r.share > bound) if high else (r.share < bound))
    score = r.share if high else -r.share
    return Finding(
        CLIP_HIGH if high else CLIP_LOW,
        WARNING if high or wide else INFO,
        f"{r.algo.upper()} clips {'far more' if high else 'far less'} than usual "
        f"({r.spec.unit} unit)",
        _clip_evidence(df, r, bound, high),
        advice,
        tuple(int(s) for s in steps[over][:50]),
        _worst(steps[over], score[over]),
    )


# ---------------------------------------------------------------------------------------------
# Learning signal, spikes and trends


def late_median(df: pd.DataFrame, column: str, part: int) -> tuple[float, int] | None:
    """(median, finite values) of ``column`` over the last 1/``part`` of the rows; None without."""
    v = _col(df, column)
    if v is None:
        return None
    late = v[-max(1, len(v) // part) :]
    late = late[np.isfinite(late)]
    return (float(np.median(late)), len(late)) if len(late) else None


def check_zero_variance(df: pd.DataFrame) -> list[Finding]:
    """Most groups have equal rewards (no learning signal): median over the last quarter."""
    got = late_median(df, Step.ZERO_VARIANCE_FRACTION, 4)
    if got is None or got[0] < th("zero_var_warn"):
        return []
    med, n = got
    sev = ERROR if med >= th("zero_var_error") else WARNING
    return [
        Finding(
            ZERO_VARIANCE,
            sev,
            "Most groups are zero-variance: little or no learning signal",
            f"median zero_variance_fraction over the last quarter of the run ({n} steps) "
            f"= {_pct(med)} of groups.",
            "Groups where every completion gets the same reward have zero advantage in GRPO and "
            "GSPO alike. Sample harder (or easier) prompts, drop saturated prompts (DAPO's dynamic "
            "sampling), increase the group size, or use a denser reward.",
        )
    ]


@dataclass(frozen=True)
class SpikeCheck:
    code: str
    label: str
    off_policy_only: bool  # on-policy steps are 0 by construction (KL old→new, log-ratio)
    advice: str


_SPIKE_ADVICE = (
    "Open the step on the Sequences page: which sequences and tokens moved. Common causes: a very "
    "long or degenerate completion, a reward outlier, a learning-rate warm-up ending"
)
SPIKE_CHECKS = (
    SpikeCheck(
        KL_OLD_SPIKE,
        "KL old→new",
        True,
        "One update moved the policy much further than its same-lag neighbours. "
        + _SPIKE_ADVICE
        + ". Gradient clipping or a smaller learning rate bounds it.",
    ),
    SpikeCheck(
        LOG_RATIO_SPIKE,
        "|log-ratio|",
        True,
        "Some sequence's ratio moved far more than at the neighbouring steps of the same lag. "
        + _SPIKE_ADVICE
        + "; a single token with a huge log-ratio is often a low-probability sampled token.",
    ),
    SpikeCheck(
        KL_REF_SPIKE,
        "KL to reference",
        False,
        "The policy jumped away from the reference model at these steps. "
        + _SPIKE_ADVICE
        + ". A larger KL coefficient or a smaller learning rate damps it.",
    ),
)


def _spike_series(df: pd.DataFrame, code: str) -> tuple[str, np.ndarray] | None:
    """(column label, per-step values) a spike check reads; None when the run lacks it."""
    if code == KL_OLD_SPIKE:
        y = _col(df, Step.KL_OLD_MEAN)
        return (Step.KL_OLD_MEAN, y) if y is not None else None
    if code == KL_REF_SPIKE:
        y = _col(df, Step.KL_REF_MEAN)
        return (Step.KL_REF_MEAN, y) if y is not None else None
    lo, hi = _col(df, Step.SEQ_LOG_RATIO_MIN), _col(df, Step.SEQ_LOG_RATIO_MAX)
    if lo is not None and hi is not None and np.isfinite(hi).any():
        return "max |log s| (sequence)", np.fmax(-lo, hi)
    y = _col(df, Step.TOKEN_LOG_RATIO_ABS_MAX)
    return (Step.TOKEN_LOG_RATIO_ABS_MAX, y) if y is not None else None


def check_spikes(df: pd.DataFrame, split: lagmod.LagSplit) -> list[Finding]:
    """``kl_old_spike``, ``log_ratio_spike``, ``kl_ref_spike``: a step far above the rolling median
    of its same-lag neighbours (``spike_mask``); ``steps`` names exactly the spike steps."""
    out = []
    steps = _steps(df)
    groups = lag_groups(split)
    on = split.mask(lagmod.ON_POLICY)
    for check in SPIKE_CHECKS:
        got = _spike_series(df, check.code)
        if got is None:
            continue
        label, y = got
        if check.off_policy_only:
            y = np.where(on, np.nan, y)
        mask, med = spike_mask(y, groups)
        if not mask.any():
            continue
        idx = np.flatnonzero(mask)
        rel = y[idx] / med[idx]
        w = idx[np.argmax(rel)]
        times = f"{y[w] / med[w]:.0f}x"
        out.append(
            Finding(
                check.code,
                WARNING,
                f"{check.label} spikes at {len(idx)} step{'s' if len(idx) > 1 else ''}",
                f"worst at step {steps[w]}: {label} = {y[w]:.3g}, {times} the median {med[w]:.3g} "
                f"of its same-lag neighbours (steps {_fmt_steps(steps[idx])}).",
                check.advice,
                tuple(int(s) for s in steps[idx][:50]),
                _worst(steps[idx], rel),
            )
        )
    return out


def _pct(v: float) -> str:
    return f"{v * 100:.3g}%"


def early_late(y: np.ndarray, groups: np.ndarray) -> list[tuple[str, float, float]]:
    """Per lag group with at least ``trend_min_steps`` finite values: (group, median of its first
    10% of steps, median of its last 10%), rows in step order."""
    out = []
    for g in dict.fromkeys(groups.tolist()):
        v = y[groups == g]
        v = v[np.isfinite(v)]
        if len(v) < th("trend_min_steps"):
            continue
        k = max(1, len(v) // 10)
        out.append((str(g), float(np.median(v[:k])), float(np.median(v[-k:]))))
    return out


@dataclass(frozen=True)
class TrendCheck:
    code: str
    column: str
    threshold: str  # a THRESHOLDS key: late/early ratio
    falls: bool  # True: fires at ratio <= threshold; False: at ratio >= threshold
    title: str
    unit: str
    advice: str


TREND_CHECKS = (
    TrendCheck(
        ENTROPY_COLLAPSE,
        Step.ENTROPY_MEAN,
        "entropy_collapse",
        True,
        "Entropy collapsed",
        "nats/token",
        "The policy has become nearly deterministic on its own samples, so groups stop "
        "differing and exploration stops (DAPO's entropy collapse). Raise ε_high (DAPO's "
        "clip-higher), add an entropy bonus, or sample at a higher temperature.",
    ),
    TrendCheck(
        LENGTH_COLLAPSE,
        Step.LENGTH_MEAN,
        "length_collapse",
        True,
        "Completion length collapsed",
        "tokens",
        "Short answers are being rewarded (or long ones punished). A token-summed or token-mean "
        "loss weighs lengths differently: check the reward for a length bias and read some "
        "completions on the Sequences page.",
    ),
    TrendCheck(
        LENGTH_BLOWUP,
        Step.LENGTH_MEAN,
        "length_blowup",
        False,
        "Completion length blew up",
        "tokens",
        "Long completions dominate token-summed losses and truncation follows. Check for "
        "repetition loops, add a length penalty or overlong filtering (DAPO), or compare with a "
        "length-normalised reduction.",
    ),
)


def check_trends(df: pd.DataFrame, split: lagmod.LagSplit) -> list[Finding]:
    """``entropy_collapse``, ``length_collapse``, ``length_blowup``: the median of the last 10% of
    steps against the first 10%, within each lag group; fires only when every judged group
    crosses the threshold (one lag's artefact never alarms)."""
    out = []
    groups = lag_groups(split)
    for check in TREND_CHECKS:
        y = _col(df, check.column)
        if y is None:
            continue
        per = [(g, a, b) for g, a, b in early_late(y, groups) if a > 0]
        if not per:
            continue
        limit = th(check.threshold)
        ratios = [b / a for _, a, b in per]
        hit = all(r <= limit for r in ratios) if check.falls else all(r >= limit for r in ratios)
        if not hit:
            continue
        what = "; ".join(f"{_group_label(g)}: {a:.3g} → {b:.3g} ({b / a:.2g}x)" for g, a, b in per)
        out.append(
            Finding(
                check.code,
                WARNING,
                check.title,
                f"median {check.column} ({check.unit}), first 10% of steps → last 10%: {what}. "
                f"Health warns at {'≤' if check.falls else '≥'} {limit:g}x.",
                check.advice,
            )
        )
    return out


def _group_label(g: str) -> str:
    if g.startswith("lag="):
        n = g[4:]
        return f"steps at lag {n}" + (" (on-policy)" if n == "0" else "")
    return {"on": "on-policy steps", "off": "off-policy steps", "unknown": "all steps"}[g]


def check_truncation(df: pd.DataFrame) -> list[Finding]:
    """Median ``truncated_fraction`` over the last 10% of steps at or above ``truncation``."""
    got = late_median(df, Step.TRUNCATED_FRACTION, 10)
    if got is None or got[0] < th("truncation"):
        return []
    return [
        Finding(
            TRUNCATION,
            WARNING,
            "Many completions are truncated",
            f"median truncated_fraction over the last 10% of steps ({got[1]}) = "
            f"{_pct(got[0])} of sequences.",
            "Truncated completions usually get a wrong-answer reward for the wrong reason. Raise "
            "the generation limit, mask truncated sequences out of the loss, or penalise overlong "
            "answers.",
        )
    ]


# ---------------------------------------------------------------------------------------------


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
) -> list[Finding]:
    """Every check, most severe first; one finding per code; a single OK finding when nothing is
    wrong. ``algorithm`` "grpo"/"gspo" (anything else: unknown); ``seq_eps`` / ``token_eps`` the
    run's (low, high) clip range per unit, None or (None, None) when the run does not state it."""
    df = in_step_order(df)
    split = lagmod.lag_split(df)
    eps = seq_eps if str(algorithm).lower() == "gspo" else token_eps
    found = [
        *check_status(status, updated_at, last_step, now),
        *check_nonfinite(df),
        *check_lag(df, split),
        *check_sampler_mismatch(df, split),
        *check_clip_range(df, split, algorithm, eps),
        *check_zero_variance(df),
        *check_spikes(df, split),
        *check_trends(df, split),
        *check_truncation(df),
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
    if not any(f.severity in (ERROR, WARNING) for f in found):
        n_read = int(train_mask(df).sum())
        read = "" if n_read == len(df) else f"; {n_read} of them hold metrics these checks read"
        found.append(Finding(OK_CODE, OK, "Nothing unusual", f"{len(df)} steps checked{read}.", ""))
    codes = [f.code for f in found]
    assert len(codes) == len(set(codes)), codes  # one finding (one advice) per code
    return sorted(found, key=lambda f: SEVERITY_ORDER[f.severity])
