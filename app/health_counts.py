"""A run's Health count for the Runs page: from the summary its writer left in run.json
(``training_hooks.run_summary``) while that still describes the run, else from its step table:
the errors and warnings the Health page lists for the run (``health_cell``; the Runs page's cell
while summaries are still being made: ``app.health_fill.known_cell``).
"""

from __future__ import annotations

from app import data, ui
from app.records import RunRef
from training_hooks import findings
from training_hooks.run_summary import valid_summary
from training_hooks.schema import RunSummary


def health_cell(run: RunRef) -> tuple[int, int, int, int]:
    """(errors, warnings, checks that ran, checks that could not) on the Health page for ``run``
    (a Parquet run): from the summary while it is up to date and records its coverage, else from
    one read of the step table."""
    s = valid_summary(run)
    if s is None or s.coverage is None:
        report = ui.health_report(run, data.load_steps(run).df)
        found = [f.severity for f in report.findings]
        ran, not_ran = len(report.checked), len(report.not_checked)
        return found.count(findings.ERROR), found.count(findings.WARNING), ran, not_ran
    return cell_of(run, s)


def cell_of(run: RunRef, s: RunSummary) -> tuple[int, int, int, int]:
    """``health_cell`` from the run's summary ``s`` (which records its coverage): its findings
    plus the run's status judged now (a stale heartbeat is a crash, whenever it is read)."""
    status = findings.check_status(run.status, run.updated_at, run.last_step)
    found = [severity for _, severity in s.findings] + [f.severity for f in status]
    ran, not_ran = s.coverage or (0, 0)
    return found.count(findings.ERROR), found.count(findings.WARNING), ran, not_ran


def health_counts(run: RunRef) -> tuple[int, int]:
    """(errors, warnings) the Health page lists for ``run`` (a Parquet run)."""
    return health_cell(run)[:2]
