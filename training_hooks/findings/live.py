"""Findings while the run trains: the recorder's side of the Health checks (torch-free).

``LiveFindings`` keeps the step rows it is given (and, per step, the common reward of each
zero-variance group, for the solved / failed split), and ``evaluate`` runs ``live_findings`` (the
checks that need no future: ``LIVE_CODES``) on the table so far: the same functions the Health
page runs on the table on disk. A code is reported the first time it fires, and once more if it
later fires at a higher severity; a note (info) is reported only when it rests on at least
``min_basis`` steps (the first evaluations of a run rest on a handful). The recorder runs it on a
sink's thread (``training_hooks.sinks.findings``), never on the training thread.

``LiveFinding.line`` is what the recorder prints:
``gspo-dash: step 312: clip_high (warning, a live note; the run's Health page has the full
finding): GSPO clips 73% of sequences (mean seq_clip_fraction ...``, at most ``LINE_CHARS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from training_hooks.findings.core import INFO, MAX_STEPS, SEVERITY_ORDER, Finding, RunFacts
from training_hooks.findings.run import live_findings
from training_hooks.findings.signal import (
    object_columns,
    outcome_shares,
    with_group_outcomes,
    zero_variance_values,
)
from training_hooks.findings.thresholds import RUN
from training_hooks.schema import Step

LINE_CHARS = 400  # a printed line is at most this long (the evidence in run.json is whole)
#: What every printed line says of itself, and what a shortened one ends with.
LIVE_NOTE = "a live note; the run's Health page has the full finding"
CUT = " ... [cut: run.json and the Health page have it whole]"


@dataclass(frozen=True)
class LiveFinding:
    """A finding as the recorder reports it: at which step it first fired, and the finding."""

    run_id: str
    step: int  # the last step of the table it was found on
    code: str
    severity: str
    title: str
    evidence: str
    advice: str
    steps: tuple[int, ...]  # the steps it is about (at most 50)

    @property
    def line(self) -> str:
        """One line for the training log, at most ``LINE_CHARS``: says it is a live note (the
        Health page has the full finding); longer evidence is cut between words, and says so."""
        head = f"gspo-dash: step {self.step}: {self.code} ({self.severity}, {LIVE_NOTE}): "
        text = head + self.evidence
        if len(text) <= LINE_CHARS:
            return text
        kept = text[: LINE_CHARS - len(CUT) + 1]
        space = kept.rfind(" ")  # (the character after ``kept`` may start a word: drop a part)
        kept = kept[:space] if space > len(head) else kept[: LINE_CHARS - len(CUT)]
        return kept.rstrip(" ,;:(") + CUT

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["steps"] = list(self.steps)
        return d


class LiveFindings:
    """See the module docstring. ``report`` is called with each new ``LiveFinding``."""

    def __init__(self, facts: RunFacts, report: Callable[[LiveFinding], None], run_id: str = ""):
        self.facts = facts
        self.report = report
        self.run_id = run_id
        self.reported: dict[str, LiveFinding] = {}
        self._df = pd.DataFrame()  # the rows of earlier evaluations
        self._rows: list[Mapping[str, Any]] = []  # rows not yet in _df
        self._n_rows = 0
        # per step with rewards: its step and number of groups; per zero-variance group: its
        # step and its common reward
        self._steps: list[int] = []
        self._groups: list[int] = []
        self._zero_step: list[int] = []
        self._zero_value: list[float] = []
        self._r_hi, self._r_lo = -np.inf, np.inf
        self._evaluated = 0  # rows at the last evaluation

    @property
    def rows(self) -> int:
        """Steps added so far."""
        return self._n_rows

    def seed(self, earlier: list[Mapping[str, Any]]) -> None:
        """Findings reported before (a resumed run's run.json ``findings``): not reported again
        unless they fire at a higher severity."""
        for d in earlier:
            try:
                f = LiveFinding(**{**d, "steps": tuple(d.get("steps", ()))})
            except TypeError:
                continue  # not one of ours: ignored
            before = self.reported.get(f.code)
            if f.severity in SEVERITY_ORDER and (
                before is None or SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[before.severity]
            ):
                self.reported[f.code] = f

    def add(self, row: Mapping[str, Any], reward_P_G: np.ndarray | None = None) -> None:
        """One step's row (the step table's columns) and its rewards (P, G), if known."""
        self._rows.append(row)
        self._n_rows += 1
        if reward_P_G is not None and np.size(reward_P_G):
            r = np.asarray(reward_P_G, np.float64)
            finite = r[np.isfinite(r)]
            if len(finite):
                self._r_hi = max(self._r_hi, float(finite.max()))
                self._r_lo = min(self._r_lo, float(finite.min()))
            step, values = int(row[Step.STEP]), zero_variance_values(r)
            self._steps.append(step)
            self._groups.append(r.shape[0])
            self._zero_step += [step] * len(values)
            self._zero_value += values.tolist()

    def table(self) -> pd.DataFrame:
        """The step table so far, with the solved / failed shares when rewards were given (only
        the rows added since the last call are converted)."""
        if self._rows:
            new = object_columns(pd.DataFrame(self._rows))
            self._df = new if self._df.empty else pd.concat([self._df, new], ignore_index=True)
            self._rows = []
        df = self._df
        if self._steps and np.isfinite(self._r_hi):
            shares = outcome_shares(
                self._steps, self._groups, self._zero_step, self._zero_value, self._r_hi, self._r_lo
            )
            df = with_group_outcomes(df, shares)
        return df

    def evaluate(self) -> list[LiveFinding]:
        """Run the live checks on the table so far (when it has new rows); report what is new."""
        if self._n_rows == self._evaluated:
            return []
        self._evaluated = self._n_rows
        df = self.table()
        last = int(pd.to_numeric(df[Step.STEP], errors="coerce").max())
        new = [self._live(f, last) for f in live_findings(df, self.facts) if self._is_new(f)]
        for f in new:
            self.reported[f.code] = f
            self.report(f)
        return new

    def _is_new(self, f: Finding) -> bool:
        if f.severity == INFO and f.basis is not None and f.basis < RUN.min_basis.value:
            return False
        before = self.reported.get(f.code)
        return before is None or SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[before.severity]

    def _live(self, f: Finding, step: int) -> LiveFinding:
        steps = f.steps[:MAX_STEPS]
        return LiveFinding(
            self.run_id, step, f.code, f.severity, f.title, f.evidence, f.advice, steps
        )


def callback_from_spec(spec: str) -> Callable[[LiveFinding], Any]:
    """``"package.module:function"`` -> that function: how a process that cannot pass a Python
    callable (a verl worker started by Ray, configured by environment variables) names its
    ``on_finding``. A clear ValueError when it cannot be loaded."""
    module, sep, name = str(spec).partition(":")
    if not sep or not module or not name:
        raise ValueError(f"on_finding spec must be 'package.module:function', got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"on_finding spec {spec!r} cannot be loaded: {e}") from e
    if not callable(fn):
        raise ValueError(f"on_finding spec {spec!r} names {type(fn).__name__}, not a callable")
    return fn
