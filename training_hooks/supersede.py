"""A step logged again replaces its earlier rows: which rows of which Parquet file a newer write
supersedes.

Within one recorder steps only increase (``RunRecorder.log_step`` refuses a step at or below the
last one it logged). A resumed run (a new recorder on an existing run id) may log steps again, from
a checkpoint: the newer write of a step replaces every row of that step the earlier writes hold,
in each table. A sequence or token table keeps that step's batch only (two batches of one step are
never merged, whatever their sizes), a step table one row per step.

One rule, applied by every reader (``training_hooks.tables``: ``read_files``, ``read_table``) and
by compaction (``sinks.parquet.compact_parquet``), so a closed run's files hold one write per step:
writes are ordered by the part name's counter (``seq``, which a resumed recorder continues), per
rank (each rank writes its own rows). A file whose name does not parse (``schema.parse_part_name``)
is never superseded and supersedes nothing. Files whose names' step ranges do not overlap hold no
step twice, so readers skip the row-level work for them (``overlapping``). Numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


def superseded_steps(files: Sequence[tuple[str, Any]]) -> dict[str, np.ndarray]:
    """For each file (its name, the steps of its rows), the steps a newer write of the same rank
    also holds: that file's rows of these steps are superseded (an empty array: none are).
    ``files`` may come in any order."""
    out: dict[str, np.ndarray] = {}
    by_rank: dict[int, list[tuple[int, str, np.ndarray]]] = {}
    for name, steps in files:
        u = np.unique(np.asarray(steps, dtype=np.int64))
        p = parse_part_name(name)
        if p is None:
            out[name] = u[:0]
        else:
            by_rank.setdefault(p["rank"], []).append((p["seq"], name, u))
    for writes in by_rank.values():
        seen = np.empty(0, dtype=np.int64)
        for _, name, u in sorted(writes, key=lambda w: w[0], reverse=True):  # newest first
            out[name] = np.intersect1d(u, seen, assume_unique=True)
            seen = np.union1d(seen, u)
    return out


def latest_frames(named: Sequence[tuple[str, Any]], step: str = "step") -> list[Any]:
    """The frames (pandas DataFrames, one per file: ``(file name, frame)``) with the rows a newer
    write supersedes left out, in the given order. Frames without a ``step`` column are kept."""
    names = [n for n, f in named if step in f.columns]
    if not overlapping(names):
        return [f for _, f in named]
    dropped = superseded_steps([(n, f[step].to_numpy()) for n, f in named if step in f.columns])
    out = []
    for name, frame in named:
        drop = dropped.get(name)
        if drop is not None and len(drop):
            frame = frame[~np.isin(frame[step].to_numpy(np.int64), drop)]
        out.append(frame)
    return out
