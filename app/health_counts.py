"""A run's Health count for the Runs page: from the summary its writer left in run.json
(``training_hooks.run_summary``) while that still describes the run, else from its step table:
the errors and warnings the Health page lists for the run (``health_cell``; the Runs page's cell
while summaries are still being made: ``app.health_fill.known_cell``).
"""

from __future__ import annotations

from app import data, ui
from app.records import SOURCE_PARQUET, RunRef
from training_hooks import findings, storage
from training_hooks.run_summary import checks_version, is_current
from training_hooks.schema import STEPS_DIR, SUMMARY_VERSION, RunSummary, is_data_file


def valid_summary(run: RunRef) -> RunSummary | None:
    """The run's summary when it describes the run as discovered (``run.stamp``): written by
    this version of the summary and of the checks, from the step parts on disk now (locally the
    steps and sequences folders' stamps, ``training_hooks.run_summary.is_current``; on an object
    store the listed step parts' names and sizes), for the run's algorithm and eps. None
    otherwise (or without one)."""
    s = run.info.summary if run.info is not None else None
    if s is None or run.source != SOURCE_PARQUET or not run.stamp:
        return None
    eps = ui.eps_of(run)
    if (s.algorithm, s.seq_eps, s.token_eps) != (run.algorithm, eps.get("seq"), eps.get("token")):
        return None
    if not storage.is_uri(run.path or ""):  # local: (run.json, steps, sequences) stamps
        return s if is_current(s, run.stamp[1], run.stamp[2]) else None
    if s.version != SUMMARY_VERSION or s.checks != checks_version():
        return None
    listed = tuple(  # an object store: (name, size, mtime) of each of the run's objects
        (rel.split("/", 1)[1], size)
        for rel, size, _ in run.stamp
        if rel.startswith(STEPS_DIR + "/") and is_data_file(rel.split("/", 1)[1])
    )
    return s if listed == s.step_files else None


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
