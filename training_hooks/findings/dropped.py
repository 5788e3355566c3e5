"""Steps a recorded run did not record: ``log_step`` refused their inputs after the first step
(a log-prob above 0, a NaN where none may be, a step out of order), or a trainer's hook could not
assemble them. The recorder drops such a step, warns and keeps a fault in run.json (``sink``
``log_step``, see ``training_hooks.recorder.RunRecorder.drop_step``) instead of ending the run;
this check says so on the Health page, so a gap in the curves is never read as nothing.

``steps_dropped``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from training_hooks.findings.core import WARNING, Coverage, Finding, RunFacts

STEPS_DROPPED = "steps_dropped"
#: run.json's fault "sink" of a dropped step, and its "kind" (``dropped_kind``; stable: files
#: keep them). The recorder writes them (``RunRecorder.drop_step``), this module reads them.
DROPPED_SINK = "log_step"
_STEP_RE = re.compile(r"^step (-?\d+) dropped$")


def dropped_kind(step: Any) -> str:
    """The fault "kind" of dropped step ``step`` (``dropped_of`` reads the step back)."""
    return f"step {step} dropped"


def dropped_of(
    faults: Sequence[Mapping[str, Any]],
) -> tuple[int, tuple[tuple[int | None, str], ...]]:
    """``(count, kept)`` of a run.json's ``faults``: how many steps were dropped (the kept entries
    and the ones counted as ``suppressed``), and the kept ones as (step, reason)."""
    kept: list[tuple[int | None, str]] = []
    count = 0
    for f in faults:
        if not isinstance(f, Mapping) or f.get("sink") != DROPPED_SINK:
            continue
        m = _STEP_RE.match(str(f.get("kind", "")))
        kept.append((int(m.group(1)) if m else None, str(f.get("error", ""))))
        suppressed = f.get("suppressed", 0)
        count += 1 + (suppressed if isinstance(suppressed, int) and suppressed > 0 else 0)
    return count, tuple(kept)


def logger_dropped(
    records_cut: Sequence[Mapping[str, Any]],
) -> tuple[int, tuple[tuple[int | None, str], ...]] | None:
    """``(count, kept)`` of the points an imported run's own logger dropped (an import's
    ``records_cut`` entries marked ``"dropped"``: W&B's "this data will be ignored" on a log call
    below its current step), as ``dropped_of``; None when the import names none."""
    got = [d for d in records_cut if isinstance(d, Mapping) and d.get("dropped")]
    if not got:
        return None
    return len(got), tuple(
        (d["step"] if isinstance(d.get("step"), int) else None, str(d.get("reason", "")))
        for d in got
    )


def check_steps_dropped(
    df: pd.DataFrame, split: Any, facts: RunFacts, cov: Coverage
) -> list[Finding]:
    """A warning naming the dropped steps and why, on a run recorded by ``RunRecorder``, or on an
    import whose run's logger says it dropped logged points (``logger_dropped``; an import
    naming none is not judged, its damaged records are ``records_cut``)."""
    if facts.dropped_steps is None:
        return []
    count, kept = facts.dropped_steps
    imported = facts.imported is not None
    cov.ran("points dropped by the run's logger" if imported else "steps dropped by the recorder")
    if count == 0:
        return []
    steps = tuple(s for s, _ in kept if s is not None)
    first = kept[0][1].splitlines()[0][:240] if kept else ""
    shown = ", ".join(str(s) for s in steps[:8]) + (", ..." if count > len(steps[:8]) else "")
    if imported:
        asked = sorted(set(steps))
        return [
            Finding(
                STEPS_DROPPED,
                WARNING,
                f"{count} logged point{'s' if count != 1 else ''} dropped by the run's logger",
                f"The run's logger refused {count} log call{'s' if count != 1 else ''} and wrote "
                f"none of their values (at steps {', '.join(map(str, asked[:8]))}"
                f"{', ...' if len(asked) > 8 else ''}). First: {first}. Those values are in no "
                "file the import read: missing from every chart and check.",
                "Log every value of a step in one call, or with W&B give each series its own "
                "step axis (wandb.define_metric('eval/*', step_metric='step')) so a later call "
                "for an earlier step is kept.",
                steps=steps,
            )
        ]
    return [
        Finding(
            STEPS_DROPPED,
            WARNING,
            f"{count} step{'s' if count != 1 else ''} not recorded",
            f"The recorder refused the inputs of {count} step{'s' if count != 1 else ''} after "
            f"the first (steps {shown}) and dropped them; training went on. First reason: "
            f"{first}. Their rows are missing from every chart and check.",
            "Fix what the reason names at those steps (run.json 'faults' lists each, sink "
            "'log_step'); RunRecorder(strict=True) raises at the first refusal instead.",
            steps=steps,  # (no culprits: a dropped step has nothing to open)
        )
    ]
