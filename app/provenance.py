"""Where an imported run came from, in words and tables: run.json's ``imported`` record (tool,
format, version or version range with its evidence, the source path, each setting and the file it
came from, the settings no file stated, and what happened to every foreign metric name). Pure: the
Health card and the Runs page's detail view draw these (``app.ui.import_details``).

Every text here comes from run.json, written from files the user pointed at: untrusted, shown as
text only.
"""

from __future__ import annotations

import time

import pandas as pd

from training_hooks.importers import TOOLS
from training_hooks.importers._describe import (
    assumed_range,
    dropped_calls_text,
    key_map_lines,
    records_cut_text,
    status_text,
    value_text,
    version_text,
    wall_time_text,
)
from training_hooks.importers._describe import unknown_settings as unknown_settings  # re-export
from training_hooks.schema import ImportRecord, RunInfo

#: What happened to a foreign metric name, in the order the keys table lists them.
MAPPED, RENAMED, KEPT, NOT_STORED, NOT_NUMERIC = (
    "mapped",
    "renamed",
    "kept",
    "not stored",
    "not numeric",
)


def source_lines(info: RunInfo) -> list[str]:
    """Sentences (plain text) on where an imported run came from; [] for a recorded run."""
    rec = info.imported
    if rec is None:
        return []
    spec = TOOLS.get(rec.tool)
    tool = spec.display_name if spec else rec.tool
    read = f" ({rec.file_format})" if rec.file_format else ""
    lines = [
        f"Imported from {tool}: {rec.format or 'format unknown'}.",
        f"Version: {version_text(rec)}.",
        f"Names read as: {assumed_range(rec)}.",
        f"Source: {rec.path or '?'}"
        + (f" (file read: {rec.file}{read})" if rec.file else "")
        + ".",
        "Settings files: "
        + (", ".join(rec.settings_files) if rec.settings_files else "none found beside the log")
        + ".",
    ]
    status = status_text(rec)
    if status:
        lines.append(f"Status: {status}.")
    if rec.step_axis:
        lines.append(f"Step axis: {rec.step_axis}.")
    if records_cut_text(rec):
        lines.append(f"Records cut: {records_cut_text(rec)}.")
    if dropped_calls_text(rec):
        lines.append(f"Points dropped: {dropped_calls_text(rec)}.")
    if rec.assumed_defaults:
        lines.append(
            "Assumed defaults (no file states them): "
            + ", ".join(
                f"{k} = {value_text(v.get('value'))} ({v.get('from')})"
                for k, v in rec.assumed_defaults.items()
                if isinstance(v, dict)
            )
            + "."
        )
    if rec.imported_at:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(rec.imported_at))
        lines.append(f"Imported at {when}; {rec.rows} rows from {rec.lines or '?'} entries.")
    if rec.wall_time:
        lines.append(f"Wall time: {wall_time_text(rec)}.")
    if rec.segment:
        lines.append(f"Run {rec.segment} of the runs that file holds one after another.")
    lines += [f"{line[0].upper()}{line[1:]}." for line in key_map_lines(rec)]
    lines += [f"Read: {n.removeprefix('read ')}." for n in rec.reader_notes]
    lines += [f"Compared: {c}." for c in rec.cross_checks]
    return lines


def settings_frame(rec: ImportRecord) -> pd.DataFrame:
    """One row per setting the import found: its value and where it came from."""
    rows = [
        {"setting": k, "value": _text(v.get("value")), "from": _text(v.get("from"))}
        if isinstance(v, dict)
        else {"setting": k, "value": _text(v), "from": "?"}
        for k, v in rec.settings.items()
    ]
    return pd.DataFrame(rows, columns=["setting", "value", "from"])


def keys_frame(rec: ImportRecord) -> pd.DataFrame:
    """One row per foreign metric name: what happened to it (mapped to our column, renamed
    ``<tool>/<name>``, kept under its own name, not stored, not numeric), where it is stored, and
    why."""
    notes = rec.notes
    assumed: dict[str, list[str]] = {}
    for a in rec.assumptions:
        name, _, what = a.partition(": ")
        assumed.setdefault(name, []).append(what)
    rows = []
    for n, col in rec.mapped.items():
        why = notes.get(n) or "the same quantity as our column"
        if assumed.get(n):
            why += "; assumes " + ", ".join(assumed[n])
        rows.append((n, MAPPED, col, why))
    for n, stored in rec.renamed.items():
        rows.append((n, RENAMED, stored, notes.get(n) or "its meaning differs from our column"))
    for n in rec.unmapped:
        rows.append((n, KEPT, n, notes.get(n) or "no column of ours holds this quantity"))
    for n, why in rec.nulled.items():
        rows.append((n, NOT_STORED, "", why))
    for n in rec.dropped_non_numeric:
        rows.append((n, NOT_NUMERIC, "", "its values are text or lists"))
    return pd.DataFrame(rows, columns=["foreign key", "what happened", "stored as", "why"])


def fate_counts(rec: ImportRecord) -> str:
    """ "6 mapped, 7 renamed, 12 kept, 0 not stored" for a caption."""
    n = {
        MAPPED: len(rec.mapped),
        RENAMED: len(rec.renamed),
        KEPT: len(rec.unmapped),
        NOT_STORED: len(rec.nulled),
    }
    text = ", ".join(f"{v} {k}" for k, v in n.items())
    if rec.dropped_non_numeric:
        text += f", {len(rec.dropped_non_numeric)} not numeric"
    return text


def _text(v) -> str:
    return "unknown" if v is None else str(v)
