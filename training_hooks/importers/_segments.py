"""Several runs in one file: where a log restarts, and one run picked out of it.

A log path reused across restarts holds the records of several runs one after another (Tinker's
``metrics.jsonl`` appended to by six starts; a console log of a job restarted in the same
shell). Merging them by step would average nothing but silently overwrite: step 0 of the last
run replacing step 0 of the first. So a file is split where a record logs again a metric its
step already holds *and* that step is at or before the run's first step (a new run starting
over); a record that logs again a later step is a resume from a checkpoint (its values supersede
the earlier ones, and the import says so); a record whose step is lower than the one before but
logs new metrics (an eval line written late) is merged and said. A file holding several runs is
imported one run at a time (``segment``), never merged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Record:
    """One logged record: where it was read (line or entry number), its step, its metrics."""

    line: int
    step: int
    metrics: Mapping[str, Any]


@dataclass(frozen=True)
class Segment:
    """One run of a file: its records in file order and why it starts where it does."""

    index: int  # 1-based
    records: tuple[Record, ...]
    why: str  # "" for the first; else where and why a new run starts here
    notes: tuple[str, ...] = field(default=())  # resumes and out-of-order records within it

    @property
    def lines(self) -> tuple[int, int]:
        return self.records[0].line, self.records[-1].line

    @property
    def steps(self) -> tuple[int, int]:
        steps = [r.step for r in self.records]
        return min(steps), max(steps)

    def describe(self) -> str:
        (a, b), (s, t) = self.lines, self.steps
        where = f"line {a}" if a == b else f"lines {a}-{b}"
        return f"run {self.index}: {where}, step{'' if s == t else 's'} {s}" + (
            "" if s == t else f"-{t}"
        )


class SeveralRuns(ValueError):
    """A file holding several runs was imported without saying which (``segment``)."""

    def __init__(self, file: Path | str, segments: Sequence[Segment]):
        starts = ", ".join(s.why for s in segments[1:9]) + (", ..." if len(segments) > 9 else "")
        super().__init__(
            f"{file} holds {len(segments)} runs one after another, not one: a new run starts at "
            f"{starts}; import one with --segment N (1-{len(segments)}; the last is "
            f"{segments[-1].describe()}) or each as its own run with --segment all"
        )
        self.segments = tuple(segments)


def split_by_step(records: Iterable[Record], validation: tuple[str, ...] = ()) -> list[Segment]:
    """The runs of a file whose records carry steps (see the module docstring). Metrics whose
    names start with ``validation`` (eval lines sharing a train step) never start a run."""
    segments: list[list[Record]] = [[]]
    whys = [""]
    notes: list[list[str]] = [[]]
    seen: dict[int, set[str]] = {}
    prev: Record | None = None
    for rec in records:
        names = {n for n in rec.metrics if not (validation and n.startswith(validation))}
        cur = segments[-1]
        again = names & seen.get(rec.step, set())
        if cur and again and rec.step <= cur[0].step:
            assert prev is not None
            whys.append(f"line {rec.line} (step {rec.step} after step {prev.step})")
            segments.append([])
            notes.append([])
            seen = {}
        elif again:
            notes[-1].append(
                f"line {rec.line}: step {rec.step} logged again after step {prev.step if prev else '?'}"
                " (a resume from a checkpoint): its later values kept"
            )
        elif prev is not None and cur and rec.step < prev.step:
            notes[-1].append(
                f"line {rec.line}: step {rec.step} written after step {prev.step} (out of order), "
                "merged with its step"
            )
        segments[-1].append(rec)
        seen.setdefault(rec.step, set()).update(names)
        prev = rec
    return [
        Segment(i + 1, tuple(recs), whys[i], tuple(notes[i]))
        for i, recs in enumerate(segments)
        if recs
    ]


def split_at(items: Sequence[T], starts: Mapping[int, str]) -> list[tuple[list[T], str]]:
    """``items`` cut before each index in ``starts`` (index -> why a run starts there): the
    runs' items, each with why it starts ("" for the first)."""
    out: list[tuple[list[T], str]] = []
    cur: list[T] = []
    why = ""
    for i, item in enumerate(items):
        if i in starts and cur:
            out.append((cur, why))
            cur, why = [], starts[i]
        cur.append(item)
    if cur:
        out.append((cur, why))
    return out


def choose(segments: Sequence[Segment], segment: int | None, file: Path | str) -> Segment:
    """The run to import: the only one, or the ``segment``-th (1-based); several without a
    choice raise ``SeveralRuns`` naming where each starts."""
    if not segments:
        raise ValueError(f"{file} holds no records")
    if segment is None:
        if len(segments) > 1:
            raise SeveralRuns(file, segments)
        return segments[0]
    if isinstance(segment, bool) or not isinstance(segment, int):
        raise ValueError(f"segment must be a run number (1-{len(segments)}), got {segment!r}")
    if not 1 <= segment <= len(segments):
        raise ValueError(
            f"segment {segment}: {file} holds {len(segments)} run{'s' if len(segments) > 1 else ''}"
            f" (1-{len(segments)})"
        )
    return segments[segment - 1]


def segment_notes(seg: Segment, count: int) -> list[str]:
    """The import record's sentences on which run of the file this is."""
    if count <= 1:
        return list(seg.notes)
    return [
        f"the file holds {count} runs one after another; this is {seg.describe()}"
        + (f", starting at {seg.why}" if seg.why else ""),
        *seg.notes,
    ]
