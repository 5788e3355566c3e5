"""Two files of one run compared (a ``trainer_state.json`` and the run's TensorBoard event file):
whether they agree, and where they do not. The words go into the import record.

An event file stores float32 (TensorBoard's scalars); the state stores the float64 the Trainer
logged. A value agrees when the state's value rounded to float32 is the event file's."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from training_hooks.importers._read import SourceLog, is_number
from training_hooks.names import few

MAX_LISTED = 6


def f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _same(a: float, b: float) -> bool:
    if a != a and b != b:  # both NaN
        return True
    try:
        return a == b or f32(a) == f32(b)
    except OverflowError:  # beyond float32: compare as logged
        return a == b


def compare(read: SourceLog, other: SourceLog, read_name: str, other_name: str) -> list[str]:
    """Sentences on how ``other`` (another file of the run) matches ``read`` (the file imported):
    the steps each has alone, the metrics each has alone, the values that differ."""
    a, b = read.steps, other.steps
    common = sorted(set(a) & set(b))
    if not common:
        return [f"{other_name} shares no step with {read_name}: not the same run (not compared)"]
    names = sorted({n for s in common for n in a[s] if n in b[s]})
    differ: list[str] = []
    points = 0
    for s in common:
        for n in names:
            x, y = a[s].get(n), b[s].get(n)
            if is_number(x) and is_number(y):
                points += 1
                if not _same(float(x), float(y)):
                    differ.append(f"{n} at step {s} ({x!r} vs {y!r})")
    out = []
    span = f"{common[0]}-{common[-1]}" if len(common) > 1 else str(common[0])
    if differ:
        out.append(
            f"{other_name} differs from {read_name} at {len(differ)} of {points} values of the "
            f"{len(common)} steps both hold: {few(differ, MAX_LISTED, '; ')}"
        )
    else:
        out.append(
            f"{other_name} agrees with {read_name}: {points} values of {len(names)} metrics at the "
            f"{len(common)} steps both hold ({span}) are equal (at float32, the event file's precision)"
        )
    out += _alone(a, b, read_name, other_name) + _alone(b, a, other_name, read_name)
    return out


def _alone(
    a: Mapping[int, Mapping[str, Any]], b: Mapping[int, Mapping[str, Any]], a_name: str, b_name: str
) -> list[str]:
    steps = sorted(set(a) - set(b))
    out = []
    if steps:
        what = [
            f"step {s} ({', '.join(sorted(a[s])[:MAX_LISTED])}{', ...' if len(a[s]) > MAX_LISTED else ''})"
            for s in steps
        ]
        out.append(
            f"{a_name} has {len(steps)} step{'s' * (len(steps) > 1)} {b_name} lacks: {few(what, MAX_LISTED, '; ')}"
        )
    only = sorted(
        {n for s in set(a) & set(b) for n in a[s]} - {n for s in set(a) & set(b) for n in b[s]}
    )
    if only:
        out.append(
            f"{a_name} alone holds {len(only)} metrics at the common steps: {few(only, MAX_LISTED, '; ')}"
        )
    return out
