"""``FindingsSink``: the Health checks that need no future, run live on the sink's own thread.

Its ``SinkWorker`` hands it each materialised step (the training thread only appends to a queue);
every ``every`` steps (at least 2% of the run's steps apart, and at close) it runs
``training_hooks.findings.live.LiveFindings.evaluate`` on the steps so far and passes each new
finding to ``report`` (the recorder prints it, writes it to run.json, tags the MLflow run and calls
the user's ``on_finding``). A failing check is a sink fault, never an exception in training.
``cpu_share`` caps what the checks cost when steps come faster than they run (a CPU demo, a tiny
model): an evaluation that took c CPU-seconds is followed by none for c / ``cpu_share`` seconds;
the steps wait for the next one, none is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from training_hooks.findings.core import RunFacts, defaulted_settings, stated_eps_source
from training_hooks.findings.live import LiveFinding, LiveFindings
from training_hooks.schema import STATUS_RUNNING, Seq

if TYPE_CHECKING:
    from ..compute import StepRecord


def check_cpu_share(name: str, value: object) -> None:
    """A ValueError naming ``name`` unless ``value`` is None or a number in (0, 1]."""
    ok = isinstance(value, int | float) and 0 < value <= 1
    if value is not None and not ok:
        raise ValueError(f"{name} must be in (0, 1] or None, got {value!r}")


class FindingsSink:
    """See the module docstring. ``every``: steps between two evaluations (>= 1); ``cpu_share``:
    in (0, 1], or None (every ``every`` steps whatever they cost)."""

    name = "findings"

    def __init__(
        self,
        facts: RunFacts,
        report: Callable[[LiveFinding], None],
        *,
        every: int = 10,
        cpu_share: float | None = None,
        run_id: str = "",
    ):
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an int >= 1, got {every!r}")
        check_cpu_share("cpu_share", cpu_share)
        self.live = LiveFindings(facts, report, run_id)
        self.every = every
        self.cpu_share = cpu_share
        self._new = 0  # steps since the last evaluation
        self._not_before = 0.0  # time.monotonic() before which no evaluation starts (cpu_share)

    def open(self) -> None:
        pass

    def write(self, record: StepRecord) -> None:
        row, seq = record.materialized()
        reward_B = seq.get(Seq.REWARD)
        reward_P_G = None
        if reward_B is not None and record.group_size:
            reward_P_G = reward_B.reshape(-1, record.group_size)  # (B,) -> (P, G)
        self.live.add(row, reward_P_G)
        self._new += 1

    def should_flush(self) -> bool:
        """``every`` new steps, and at least 2% of the run's steps: checking a long run's table
        costs more, so its evaluations are spaced out (a constant share of a core)."""
        due = self._new >= max(self.every, self.live.rows // 50)
        return due and time.monotonic() >= self._not_before

    def flush(self) -> None:
        if self.should_flush():  # (the worker also flushes on a timer: a deferred one runs then)
            self._new = 0
            cpu0 = time.thread_time()
            self.live.evaluate()
            if self.cpu_share is not None:
                cost = time.thread_time() - cpu0
                self._not_before = time.monotonic() + cost / self.cpu_share

    def close(self, status: str) -> None:
        self._new = 0
        self.live.evaluate()


class FindingReporter:
    """What the recorder does with a new live finding, in this order: print its line (stderr), add it to
    run.json's ``findings`` (rank 0 writes run.json now), queue the MLflow tag
    ``gspo_dash.finding.<code>`` (set at the MLflow sink's next flush), call ``on_finding``. Runs
    on the findings sink's thread; an ``on_finding`` that raises is reported as a fault of the
    ``on_finding`` sink, once, and does not stop the others."""

    def __init__(self, state, *, mlflow_sink=None, on_finding=None):
        self.state = state  # the recorder's RunState: lock, info, write(), fault()
        self.mlflow_sink = mlflow_sink
        self.on_finding = on_finding

    def __call__(self, f: LiveFinding) -> None:
        import sys

        print(f.line, file=sys.stderr, flush=True)  # beside warnings: stdout may be data
        with self.state.lock:
            self.state.info.other.setdefault("findings", []).append(f.to_json())
        self.state.write()
        if self.mlflow_sink is not None:
            self.mlflow_sink.add_tags({f"gspo_dash.finding.{f.code}": f.line})
        if self.on_finding is not None:
            try:
                self.on_finding(f)
            except Exception as e:  # noqa: BLE001 -- the user's callback never stops recording
                self.state.fault("on_finding", "callback", f"{type(e).__name__}: {e}")


def findings_sink(state, settings, mlflow_sink=None) -> FindingsSink:
    """The recorder's live findings sink, from its ``RunState`` and ``RecorderSettings``
    (``findings_every``, ``findings_cpu_share``, ``on_finding``, algorithm and both ε); a resumed
    run's earlier findings (run.json) are not reported again."""
    s = settings
    facts = RunFacts(
        s.algorithm,
        STATUS_RUNNING,
        seq_eps=s.seq_eps,
        token_eps=s.token_eps,
        eps_source=stated_eps_source(state.info.config),
        defaults=defaulted_settings(state.info.other),
    )
    report = FindingReporter(state, mlflow_sink=mlflow_sink, on_finding=s.on_finding)
    sink = FindingsSink(
        facts,
        report,
        every=s.findings_every,
        cpu_share=s.findings_cpu_share,
        run_id=state.info.run_id,
    )
    sink.live.seed(state.info.other.get("findings", []))
    return sink
