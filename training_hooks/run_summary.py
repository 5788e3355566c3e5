"""A run's summary (``schema.RunSummary``, run.json's ``summary``): what the Runs page shows of a
run without reading its step table, made once by whoever writes the run.

``summarise_run(run_dir, info)`` reads the step table with the reader the dashboard uses
(``training_hooks.tables``) and judges it by the checks the Health page runs
(``training_hooks.findings.report_of``), so the Runs page's Health count from a summary is the
count the Health page gives from the table. The recorder calls it when it closes, the importers when they
write a run, ``bench/make_runs.py`` for its generated runs. It imports no torch.

The app trusts a summary only while it still describes the run (``app.health_counts``): the same step
parts, the same declared version of the checks (``checks_version``), the same algorithm and eps. A running run's
summary is out of date at its next flush; the app then reads the table, as without one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from . import findings, storage, tables
from .schema import (
    SEQUENCE_COLUMNS,
    SEQUENCES_DIR,
    STATUS_FINISHED,
    STEPS_DIR,
    SUMMARY_VERSION,
    TABLE_DIRS,
    RunInfo,
    RunSummary,
    is_data_file,
)


def checks_version() -> str:
    """The version of the checks a summary's findings come from (``findings.CHECKS_VERSION``,
    declared and bumped when the findings can change; not a digest of their source)."""
    return f"v{findings.CHECKS_VERSION}"


def eps_pairs(info: RunInfo) -> dict[str, tuple[float, float]]:
    """The run's stated eps pairs by unit ("seq", "token"); a pair with an unknown half is left
    out (never judged with a default)."""
    pairs = {
        "seq": (info.seq_eps_low, info.seq_eps_high),
        "token": (info.token_eps_low, info.token_eps_high),
    }
    return {unit: (lo, hi) for unit, (lo, hi) in pairs.items() if lo is not None and hi is not None}


def folder_stamp(run_dir: str, table: str) -> tuple[int, int] | None:
    """(size, mtime_ns) of a local run's ``table`` folder (None on an object store, or when it
    does not exist): every part written or removed there changes it (the stamp
    ``app.discovery`` takes of the steps and sequences folders)."""
    if storage.is_uri(run_dir):
        return None
    try:
        st = os.stat(os.path.join(storage.local(run_dir), table))
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def is_current(summary: RunSummary, steps: tuple | None, sequences: tuple | None) -> bool:
    """Whether a local run's summary was made by this code and checks, from the step and
    sequence folders whose stamps are ``steps`` and ``sequences`` now."""
    return (
        summary.version == SUMMARY_VERSION
        and summary.checks == checks_version()
        and summary.steps_dir is not None
        and steps is not None
        and summary.steps_dir == tuple(steps)
        and summary.sequences_dir == (None if sequences is None else tuple(sequences))
    )


def summarise_run(
    run_dir: str,
    info: RunInfo | None,
    *,
    listed: Callable[[str], tables.PartFiles] = tables.list_now,
    algorithm: str | None = None,
) -> RunSummary:
    """The summary of the run in ``run_dir`` described by ``info`` (its algorithm and eps), from
    its step table on disk now. ``listed``: a table folder's parts (the app passes its shared
    listing); ``algorithm``: a folder without run.json (``info`` None), what its steps state."""
    stamps = {t: folder_stamp(run_dir, t) for t in (STEPS_DIR, SEQUENCES_DIR)}
    parts = {t: listed(storage.join(run_dir, t)) for t in TABLE_DIRS}
    with_parts = tuple(t for t in TABLE_DIRS if any(is_data_file(f.name) for f in parts[t]))
    df, files = tables.step_frame(str(run_dir), parts[STEPS_DIR])
    eps = eps_pairs(info) if info is not None else {}
    if info is not None:
        algorithm = str(info.algorithm or "?")
    # the status is judged by the reader, as of when it reads
    report = page_report(
        run_dir,
        info,
        df,
        status=STATUS_FINISHED,
        sequences=with_parts,
        algorithm=None if info is not None else algorithm,
    )
    problems = (findings.ERROR, findings.WARNING)
    return RunSummary(
        version=SUMMARY_VERSION,
        checks=checks_version(),
        steps=len(df),
        step_files=tuple((f.name, f.size) for f in files),
        steps_dir=stamps[STEPS_DIR],
        sequences_dir=stamps[SEQUENCES_DIR],
        tables=with_parts,
        algorithm=algorithm or "?",
        seq_eps=eps.get("seq"),
        token_eps=eps.get("token"),
        findings=tuple((f.code, f.severity) for f in report.findings if f.severity in problems),
        made_at=time.time(),
        coverage=(len(report.checked), len(report.not_checked)),
    )


def page_findings(run_dir: str, info: RunInfo | None) -> list:
    """The findings of ``page_report`` (``Finding``s)."""
    return page_report(run_dir, info).findings


def page_report(
    run_dir: str,
    info: RunInfo | None,
    df: Any = None,
    *,
    status: str | None = None,
    sequences: tuple[str, ...] | None = None,
    algorithm: str | None = None,
) -> findings.HealthReport:
    """The Health page's report of the run in ``run_dir`` (findings and coverage): its step table
    (``df``, read as the dashboard reads it when not given) judged with run.json's settings
    (``status`` overrides the one stated) and, when it recorded sequences, the solved / failed
    split of its zero-variance groups. ``sequences``: the run's tables with files, when known;
    ``algorithm``: the one to judge by when run.json states none (a folder without one)."""
    if df is None:
        df, _ = tables.step_frame(str(run_dir))
    seqs = None
    if sequences is None or SEQUENCES_DIR in sequences:
        seqs = tables.read_listed(
            str(run_dir), SEQUENCES_DIR, findings.OUTCOME_COLUMNS, None, SEQUENCE_COLUMNS
        )
    facts = findings.facts_of(info, status=status)
    if algorithm is not None:
        facts = replace(facts, algorithm=algorithm)
    return findings.report_of(facts, df, None if seqs is None else seqs.df)


def try_summarise_run(
    run_dir: str, info: RunInfo | None, **kwargs: Any
) -> tuple[RunSummary | None, str | None]:
    """``(summarise_run(run_dir, info, **kwargs), None)``, or ``(None, why)`` when it cannot be
    made (a table is unreadable): a missing summary only costs the app a read."""
    try:
        return summarise_run(run_dir, info, **kwargs), None
    except Exception as e:  # noqa: BLE001 -- a summary is a cache; the run is recorded anyway
        return None, f"{type(e).__name__}: {e}"


def summarise_root(root: str, *, workers: int | None = None) -> tuple[int, list[str]]:
    """Write the summary of every run under ``root`` that is not running (runs recorded before
    summaries existed, or summarised by other checks): ``(runs written, problems)``. A running
    run is skipped: its recorder rewrites run.json, and writes its summary when it closes. Run it
    on runs no recorder is resuming."""
    from concurrent.futures import ThreadPoolExecutor

    from .schema import RUN_JSON, STATUS_RUNNING, read_run_info, run_folders, write_json_atomic

    names = [n for n in run_folders(root) if not n.startswith(".")]  # (an import's tmp: hidden)

    def one(name: str) -> tuple[int, str | None]:
        run_dir = storage.join(root, name)
        try:
            info = read_run_info(run_dir)
        except (OSError, ValueError, TypeError) as e:
            return 0, f"{name}: run.json is unreadable ({e})"
        if info.status == STATUS_RUNNING:
            return 0, None
        summary, why = try_summarise_run(run_dir, info)
        if summary is None:
            return 0, f"{name}: {why}"
        info.summary = summary
        write_json_atomic(storage.join(run_dir, RUN_JSON), info.to_json())
        return 1, None

    workers = workers or (16 if storage.is_uri(root) else 1)
    with ThreadPoolExecutor(workers) as pool:
        done = list(pool.map(one, names))
    return sum(n for n, _ in done), [why for _, why in done if why]


def main(argv: list[str] | None = None) -> int:
    """``python -m training_hooks.run_summary ROOT``: write the summaries of a root's runs."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m training_hooks.run_summary",
        description="Write the summary (run.json 'summary') of every run under ROOT that is not "
        "running, so the dashboard's Runs page need not read their step tables.",
    )
    ap.add_argument("root", help="a runs root: a folder, or s3://bucket/prefix, gs://...")
    args = ap.parse_args(argv)
    n, problems = summarise_root(args.root)
    for p in problems:
        print(p)
    print(f"{n} run summaries written under {args.root}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
