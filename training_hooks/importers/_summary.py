"""What an imported run holds, in a line per run (the README's table) and in words (the CLI)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from training_hooks import schema
from training_hooks.metric_map import Derived

#: Our columns an import can fill: the step table's metrics, then the derived ones it may store.
OUR_COLUMNS = schema.STEP_METRIC_COLUMNS + (Derived.TOKEN_CLIP_BINDING, Derived.SEQ_CLIP_BINDING)


@dataclass(frozen=True)
class ImportSummary:
    run_id: str
    tool: str
    format: str
    version: str  # exact version, else the range the names imply, else "unknown"
    label: str  # the generation and version as the README's table shows it
    rows: int
    filled: tuple[str, ...]  # our columns with at least one value (wall_time included)
    unknown: tuple[str, ...]  # our columns with none
    settings_unknown: tuple[str, ...]  # run.json settings left null


def summarize(run_dir: str | os.PathLike) -> ImportSummary:
    """Read an imported run back and say which of our columns it fills."""
    info = schema.read_run_info(run_dir)
    steps = schema.read_table(run_dir, schema.STEPS_DIR)
    rec = info.imported or schema.ImportRecord(tool=info.source, format="")
    has = {c for c in steps.columns if steps[c].notna().any()}
    cols = (schema.Step.WALL_TIME, *OUR_COLUMNS)
    filled = tuple(c for c in cols if c in has)
    unknown = tuple(c for c in cols if c not in has and c in schema.STEP_COLUMN_NAMES)
    run_fields = ("seq_eps_low", "token_eps_low", "reduction", "group_size")
    return ImportSummary(
        run_id=info.run_id,
        tool=rec.tool,
        format=rec.format,
        version=rec.version or rec.version_range or "unknown",
        label=_label(rec),
        rows=len(steps),
        filled=filled,
        unknown=unknown,
        settings_unknown=tuple(f for f in run_fields if getattr(info, f) is None),
    )


def _label(rec: schema.ImportRecord) -> str:
    base = rec.format.split(" (>")[0].split(" (<")[0] if rec.version else rec.format
    if rec.version:
        return f"{base}, version {rec.version}"
    return base if rec.version_range else f"{base}, version unknown"


def markdown_table(rows: list[tuple[str, ImportSummary]]) -> str:
    """One line per (log label, summary): tool and version, rows, our columns filled / unknown."""
    out = [
        "| log | tool, version | rows | our columns filled | our columns unknown |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, s in rows:
        filled = ", ".join(f"`{c}`" for c in s.filled) or "none"
        out.append(
            f"| `{label}` | {s.label} | {s.rows} | {len(s.filled)}: {filled} | {len(s.unknown)} |"
        )
    return "\n".join(out)


def report_lines(rec: schema.ImportRecord, limit: int = 12) -> list[str]:
    """The import report in a few lines (the CLI prints them; the app shows the same record)."""
    lines = [f"format: {rec.format}" + (f" (version {rec.version})" if rec.version else "")]
    lines.append(
        f"{len(rec.mapped)} metrics mapped to our columns, {len(rec.unmapped)} kept under their "
        f"own names, {len(rec.renamed)} renamed <tool>/<name> (meaning differs or unknown)"
    )
    if rec.truncated_last_line:
        lines.append(f"line {rec.truncated_last_line}: a truncated last line, skipped")
    if rec.malformed_lines:
        where = [str(d.get("line", d.get("entry"))) for d in rec.malformed_lines]
        lines.append(f"{len(where)} malformed lines skipped: {_few(where, limit)}")
    if rec.duplicate_steps:
        lines.append(
            f"{len(rec.duplicate_steps)} steps logged twice (the last value wins): "
            + _few([str(s) for s in rec.duplicate_steps], limit)
        )
    if rec.validation_only_steps:
        steps = [str(s) for s in rec.validation_only_steps]
        lines.append(f"validation-only rows at steps {_few(steps, limit)}")
    for n, why in rec.nulled.items():
        lines.append(f"not stored: {n} ({why})")
    lines.append(
        "settings: "
        + (", ".join(f"{k}={v['value']!r}" for k, v in rec.settings.items()) or "none found")
    )
    lines.append(f"wall time: {rec.wall_time}")
    return lines


def _few(items: list[str], limit: int) -> str:
    return ", ".join(items[:limit]) + (f", ... ({len(items)} in all)" if len(items) > limit else "")
