"""Findings about a run: the Health checks, torch-free, shared by the dashboard and the recorder.

    from training_hooks.findings import run_health, facts_of
    report = run_health(step_table, facts_of(run_info))
    report.findings, report.checked_line(), report.not_checked_line()

One implementation of each check serves both: the Health page runs every check on the table on
disk (``run_health``; ``run_findings`` returns its findings), the recorder runs the checks that
need no future (``live_findings``, ``LIVE_CODES``) on the table it has so far, on its own thread
(``training_hooks.findings.live``). Each finding has a stable ``code`` (``CODES``, a contract);
every threshold is a ``Threshold`` in ``THRESHOLDS`` with its unit and source.

Modules: ``core`` (codes, ``Finding``, ``RunFacts``, ``Coverage``, table readers), ``thresholds``,
``lag`` (policy lag per step), ``status`` (how the run ended, non-finite values, stale old
log-probs), ``mismatch`` (sampler/trainer), ``clip``, ``signal`` (constant reward, zero-variance
and solved groups, truncation), ``spikes`` (spikes and trends), ``run`` (the entry points),
``raw`` (what the raw values show: gradient norm, loss scale, no learning signal, reward
components, KL level), ``onpolicy`` (clipping at one update per batch), ``attenuation`` (every
loss's trust region in one unit), ``live`` (the recorder's side).
"""

from training_hooks.findings.core import (
    ATTENUATION_HIGH,
    ATTENUATION_LOW,
    ATTENUATION_ONE_SIDED,
    CLIP_HIGH,
    CLIP_LOW,
    CLIP_ONE_UPDATE,
    CODES,
    CRASHED,
    ENTROPY_COLLAPSE,
    ERROR,
    FAILED,
    GRAD_NORM_SPIKE,
    GRAD_OVER_CLIP,
    INFO,
    KL_OLD_SPIKE,
    KL_REF_HIGH,
    KL_REF_SPIKE,
    LENGTH_BLOWUP,
    LENGTH_COLLAPSE,
    LOG_RATIO_SPIKE,
    LOSS_SPIKE,
    NAN_CELLS,
    NO_SIGNAL,
    NO_STEPS,
    NONFINITE,
    NOT_JUDGED,
    OK,
    OK_CODE,
    ON_POLICY_ONLY,
    REWARD_PINNED,
    RUNNING,
    SAMPLER_MISMATCH,
    SEVERITY_ORDER,
    STALE_OLD_LOGPROBS,
    STOPPED_EARLY,
    TASK_SATURATED,
    TRUNCATION,
    WARNING,
    ZERO_VARIANCE,
    Coverage,
    Finding,
    RunFacts,
    fmt_eps,
    in_step_order,
    lag_groups,
    train_mask,
)
from training_hooks.findings.run import (
    LIVE_CODES,
    OUTCOME_COLUMNS,
    HealthReport,
    facts_of,
    live_findings,
    report_of,
    run_findings,
    run_health,
)
from training_hooks.findings.signal import group_outcomes, with_group_outcomes
from training_hooks.findings.spikes import rolling_baseline, row_nanmedian, spike_mask
from training_hooks.findings.status import STATUS_STOPPED_EARLY, check_status, import_status
from training_hooks.findings.thresholds import RAW, THRESHOLDS, RawThresholds, Threshold, th
from training_hooks.findings.version import CHECKS_VERSION

__all__ = [
    "ATTENUATION_HIGH",
    "ATTENUATION_LOW",
    "ATTENUATION_ONE_SIDED",
    "CHECKS_VERSION",
    "CLIP_HIGH",
    "CLIP_LOW",
    "CODES",
    "NAN_CELLS",
    "CLIP_ONE_UPDATE",
    "KL_REF_HIGH",
    "REWARD_PINNED",
    "NO_SIGNAL",
    "LOSS_SPIKE",
    "GRAD_OVER_CLIP",
    "GRAD_NORM_SPIKE",
    "CRASHED",
    "ENTROPY_COLLAPSE",
    "ERROR",
    "FAILED",
    "INFO",
    "KL_OLD_SPIKE",
    "KL_REF_SPIKE",
    "LENGTH_BLOWUP",
    "LENGTH_COLLAPSE",
    "LIVE_CODES",
    "LOG_RATIO_SPIKE",
    "NONFINITE",
    "NOT_JUDGED",
    "NO_STEPS",
    "OK",
    "OK_CODE",
    "OUTCOME_COLUMNS",
    "ON_POLICY_ONLY",
    "RUNNING",
    "SAMPLER_MISMATCH",
    "SEVERITY_ORDER",
    "STALE_OLD_LOGPROBS",
    "STATUS_STOPPED_EARLY",
    "STOPPED_EARLY",
    "TASK_SATURATED",
    "RAW",
    "RawThresholds",
    "THRESHOLDS",
    "TRUNCATION",
    "WARNING",
    "ZERO_VARIANCE",
    "Coverage",
    "Finding",
    "HealthReport",
    "RunFacts",
    "Threshold",
    "check_status",
    "facts_of",
    "fmt_eps",
    "group_outcomes",
    "import_status",
    "in_step_order",
    "lag_groups",
    "live_findings",
    "report_of",
    "rolling_baseline",
    "row_nanmedian",
    "run_findings",
    "run_health",
    "spike_mask",
    "th",
    "train_mask",
    "with_group_outcomes",
]
