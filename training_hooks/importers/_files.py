"""A tool's files in a folder (event files, console logs: one of them, or a one-line error naming
them all) and a JSON-lines log split into its runs: what the tools' readers share when they find
and pick the file to read (``ToolSpec.read`` of trl, verl and Tinker).

A JSON-lines log holding several runs one after another is split here (``_segments``): the
settings beside it then describe only the last run (a run rewrites its config file when it
starts), so the other runs get none of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from training_hooks.importers._end import Evidence
from training_hooks.importers._read import SourceLog, merge_by_step, read_json_lines
from training_hooks.importers._segments import Record, choose, segment_notes, split_by_step
from training_hooks.importers._sniff import EVENT_FILE, Kind, sniff
from training_hooks.importers._spec import Settings

CONSOLE_SUFFIXES = (".log", ".out", ".txt", ".err")
MAX_CANDIDATES = 200  # files looked at in a folder
MAX_COMPARED = 4  # other files of the run compared with the one read

#: How a run of a JSON-lines log ended, from its own steps and settings: (finished, how the
#: source says so, the end evidence).
EndOf = Callable[[Mapping[int, Any], Settings], tuple["bool | None", str, "Evidence | None"]]


def json_runs(
    log: SourceLog,
    parse: Callable[[Any], tuple[int, Mapping[str, Any]] | str],
    validation: tuple[str, ...],
    segment: int | None,
    what: str,
    end_of: EndOf,
) -> SourceLog:
    """A JSON-lines log split into its runs (``_segments.split_by_step``): the one asked for."""
    records = []
    for n, obj in read_json_lines(log.file).objects:
        got = parse(obj)
        if not isinstance(got, str):
            records.append(Record(n, *got))
    segments = split_by_step(records, validation)
    seg = choose(segments, segment, log.file, log.tool)
    notes = segment_notes(seg, len(segments))
    log = dataclasses.replace(log, file_format=log.file_format or what)
    if len(segments) == 1:
        return dataclasses.replace(log, notes=(*log.notes, *notes))
    merged = merge_by_step((r.step, r.metrics) for r in seg.records)
    last = seg.index == len(segments)
    a, b = seg.lines
    if not last and log.settings_files:
        notes.append(
            f"{', '.join(Path(f).name for f in log.settings_files)} beside the log is rewritten by "
            f"every run that starts: it describes run {len(segments)}, so this run's settings are "
            "unknown"
        )
    kept = {k: v for k, v in log.settings.items() if v.origin.startswith("the log")}
    settings = dict(log.settings) if last else kept
    # how the run ended, from this run's own steps (against the settings it has)
    finished, text, evidence = end_of(merged.steps, settings)
    return dataclasses.replace(
        log,
        source_finished=finished,
        end_text=text,
        end=evidence,
        steps=merged.steps,
        duplicate_steps=merged.duplicate_steps,
        malformed=tuple(d for d in log.malformed if a <= d.get("line", a) <= b),
        truncated_last_line=log.truncated_last_line if last else None,
        settings=settings,
        settings_files=log.settings_files if last else (),
        config=log.config if last else {},
        started_at=log.started_at if last else None,
        notes=(*log.notes, *notes),
        segment=seg.index,
        segments=len(segments),
    )


def events_in(folder: Path) -> list[Path]:
    """Event files in ``folder``, its ``runs/*/`` (the Trainer's) or one level below."""
    if not folder.is_dir():
        return []
    found: list[Path] = []
    for pattern in (
        "events.out.tfevents.*",
        "runs/*/events.out.tfevents.*",
        "*/events.out.tfevents.*",
    ):
        found += [p for p in folder.glob(pattern) if p.is_file() and EVENT_FILE.match(p.name)]
        if len(found) > MAX_CANDIDATES:
            break
    return sorted(set(found))


def consoles_in(folder: Path, kind: Kind) -> list[Path]:
    cands = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in CONSOLE_SUFFIXES
    )
    return [p for p in cands[:MAX_CANDIDATES] if sniff(p) is kind]


def one(files: list[Path], folder: Path, what: str) -> Path:
    if len(files) > 1:
        listed = ", ".join(rel(f, folder) for f in files[:4]) + (", ..." if len(files) > 4 else "")
        raise ValueError(f"path {str(folder)!r} holds {len(files)} {what} ({listed}): pass one")
    return files[0]


def found(log: SourceLog, folder: Path) -> SourceLog:
    """The record names what was found in the folder given."""
    note = f"found in {folder}: {rel(log.file, folder)} ({log.file_format})"
    return dataclasses.replace(log, notes=(note, *log.notes))


def rel(file: Path, folder: Path) -> str:
    try:
        return str(file.relative_to(folder))
    except ValueError:
        return str(file)
