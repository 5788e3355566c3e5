"""What an import could not read whole: records cut or damaged in the log (a W&B ``output.log``
keeps 4,096 characters of a line; a file cut mid-write; a progress bar written into a record).
The importer keeps each one's parsed prefix (the metrics before the cut, never a value the cut
may have shortened) and counts it in run.json's ``imported.records_cut``; this check says how
many, and what is missing. Registered in ``findings.run.CHECKS``."""

from __future__ import annotations

import pandas as pd

from training_hooks.findings.core import INFO, WARNING, Coverage, Finding, RunFacts, fmt_steps
from training_hooks.findings.thresholds import RUN

#: The stable code of ``check_records_cut`` (a contract: tests, the bench and the page match on it).
RECORDS_CUT = "records_cut"
CHECK = "records read whole"
_LINES_NAMED = 6  # lines named in the evidence


def check_records_cut(df: pd.DataFrame, split, facts: RunFacts, cov: Coverage) -> list[Finding]:
    """``records_cut``: the import kept cut or damaged records by their parsed prefix. A warning
    from ``records_cut_warn`` of the records read (the metrics after each cut miss that many
    steps), else a note. Nothing for a recorded run (it has no log to cut)."""
    rec = facts.imported
    if rec is None:
        return []
    # (points the run's logger dropped are ``steps_dropped``'s, not a cut of the import)
    cut = [d for d in rec.records_cut if isinstance(d, dict) and not d.get("dropped")]
    read = max(rec.rows, len(cut))
    cov.ran(CHECK, f"{len(cut)} of {read} records cut" if cut else "")
    if not cut:
        return []
    share = len(cut) / read if read else 1.0
    kept = sorted(int(d.get("kept", 0)) for d in cut)
    steps = sorted(int(d["step"]) for d in cut if isinstance(d.get("step"), int))
    lines = ", ".join(str(d.get("line", "?")) for d in cut[:_LINES_NAMED])
    lines += ", ..." if len(cut) > _LINES_NAMED else ""
    reasons = sorted({str(d.get("reason", "")).split(";")[0] for d in cut})
    where = f" at steps {fmt_steps(steps)}" if steps else ""
    evidence = (
        f"{len(cut)} of the {read} records read were cut or damaged ({'; '.join(reasons)}): "
        f"each keeps the {kept[0]}{'' if kept[0] == kept[-1] else f'-{kept[-1]}'} metrics before "
        f"its cut, exact; the metrics after it are missing{where} (line {lines})."
    )
    severe = share >= RUN.records_cut_warn.value
    return [
        Finding(
            RECORDS_CUT,
            WARNING if severe else INFO,
            "Records cut in the log: their first metrics kept, the rest missing",
            evidence,
            "The values kept are the log's own. For the metrics lost at those steps, import "
            "another file of the run: W&B's output.log keeps 4,096 characters of a line, so "
            "prefer verl's file logger (trainer.logger=['file']: its .jsonl), the TensorBoard "
            "events, or the console captured outside W&B.",
            tuple(steps),
        )
    ]
