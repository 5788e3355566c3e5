"""Health, as the pages read it: the findings of ``training_hooks.findings`` (one torch-free
implementation shared with the recorder, which runs the checks that need no future while the run
trains) for a ``RunRef``, with the run's settings from its run.json and, for runs that record
sequences, the split of zero-variance groups into solved and failed from their rewards
(``report_of``, which a run's summary uses too).

The codes, severities and checks have one home, ``training_hooks.findings``: the pages, the bench
and the tests import them from there; this module adds only what needs a ``RunRef``.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from training_hooks.findings import HealthReport, facts_of, report_of

__all__ = ["report_for"]


def report_for(run, steps_df: pd.DataFrame, sequences: pd.DataFrame | None = None) -> HealthReport:
    """The ``HealthReport`` of a ``RunRef``'s step table: its run.json's settings (algorithm,
    status as the app judges it, ε, an import's sources), plus ``sequences`` (columns
    ``OUTCOME_COLUMNS``) for the solved / failed split when the run recorded them."""
    facts = facts_of(
        run.info, status=run.status, updated_at=run.updated_at, last_step=run.last_step
    )
    if run.info is None:  # an MLflow-only run: the algorithm its tags state
        facts = replace(facts, algorithm=run.algorithm)
    return report_of(facts, steps_df, sequences)
