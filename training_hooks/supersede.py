"""The superseding rule: a step logged again replaces its earlier rows.

Within one recorder steps only increase (``RunRecorder.log_step`` refuses a step at or below the
last one it logged). A resumed run (a new recorder on an existing run id) may log steps again, from
a checkpoint: the newer write of a step replaces every row of that step the earlier writes hold,
in each table. A sequence or token table keeps that step's batch only (two batches of one step are
never merged, whatever their sizes), a step table one row per step.

Writes are ordered by the part name's counter (``seq``, which a resumed recorder continues), per
rank (each rank writes its own rows); a compacted file is a newer write of the steps it merged, so
the parts it replaces (left on disk between its write and their deletion, or by a crash there)
lose every row to it. A file whose name does not parse (``schema.parse_part_name``) is never
superseded and supersedes nothing.

One function applies the rule, ``superseded_rows``, for the reader (``training_hooks.tables``) and
the writer (``sinks.parquet.compact_parquet``), so a closed run's files hold one write per step.
Files whose names' step ranges do not overlap hold no step twice: the steps of their rows are
then never read (``overlapping``). Numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .schema import parse_part_name


def overlapping(names: Iterable[str]) -> bool:
    """Whether two files of one rank have overlapping step ranges, by their names (only then can
    a row be superseded)."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    for name in names:
        p = parse_part_name(name)
        if p is not None:
            ranges.setdefault(p["rank"], []).append((p["first"], p["last"]))
    for spans in ranges.values():
        spans.sort()
        for (_, last), (first, _) in zip(spans, spans[1:], strict=False):
            if first <= last:
                return True
    return False


def superseded_rows(names: Sequence[str], steps_of: Callable[[str], Any]) -> dict[str, np.ndarray]:
    """For each file of ``names`` whose rows a newer write of the same rank supersedes, the steps
    of those rows (a file missing from the result loses none). ``steps_of(name)``: the steps of
    a file's rows, asked only when the names' step ranges overlap. ``names`` may come in any
    order."""
    if not overlapping(names):
        return {}
    out: dict[str, np.ndarray] = {}
    by_rank: dict[int, list[tuple[int, str]]] = {}
    for name in names:
        if (p := parse_part_name(name)) is not None:
            by_rank.setdefault(p["rank"], []).append((p["seq"], name))
    for writes in by_rank.values():
        seen = np.empty(0, dtype=np.int64)
        for _, name in sorted(writes, reverse=True):  # newest first
            u = np.unique(np.asarray(steps_of(name), dtype=np.int64))
            if len(drop := np.intersect1d(u, seen, assume_unique=True)):
                out[name] = drop
            seen = np.union1d(seen, u)
    return out


def latest_frames(named: Sequence[tuple[str, Any]], step: str = "step") -> list[Any]:
    """The frames (pandas DataFrames, one per file: ``(file name, frame)``) with the rows a newer
    write supersedes left out, in the given order. Frames without a ``step`` column are kept."""
    frames = {n: f for n, f in named if step in f.columns}
    dropped = superseded_rows(list(frames), lambda n: frames[n][step].to_numpy())
    return [
        f[~np.isin(f[step].to_numpy(np.int64), dropped[n])] if n in dropped else f for n, f in named
    ]
