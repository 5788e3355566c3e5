"""How an imported run ended: its planned end, read from every source a format carries, against
how far it got, and whether the log holds an end-of-training line.

A planned end is a number of optimizer steps (TRL ``max_steps``, verl ``total_training_steps``
or its ``Total training steps: N`` line, a progress bar's total ``19/55990``, Tinker's
``max_steps``) or of epochs (``num_train_epochs``, read against the ``epoch`` the rows log). How
far it got is the trainer's own counter where the log has one (``global_step``, a progress
bar's count: exact) else its last logged step (a row every ``window`` steps, so the true end
may lie up to ``window - 1`` steps after it). An end-of-training line is what a trainer writes
only when training returns (TRL's ``train_runtime`` record, verl's ``Final validation
metrics``).

The verdict (``judge``):

* the run reached its planned end, or the log holds an end-of-training line: finished;
* its last step is below its planned end by more than a logging window, without an
  end-of-training line: stopped early, unless the file is a state saved while training ran (a
  mid-run checkpoint, ``Evidence.mid_run``): that says only that the run reached its step, so
  unknown;
* otherwise (no source gives the planned end, or the last logged step is within a window of it
  and no counter says more): unknown, never "finished" without evidence of the end;
* the trainer's own step counter (exact) still at 0 of a planned end, no source saying more, in
  a log that holds records (rollouts printed, scored): no optimizer step ever ran, the run
  failed (``Ending.failed``).

Each verdict comes with the sentence that cites its sources (``Ending.text``): "planned 55,990
steps (verl progress bar, line 412: 19/55990); last step 238 (its last step line); no
end-of-training line".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: What an unknown end names as the sources it looked for.
SOURCES_LOOKED_FOR = (
    "max_steps, total_training_steps, num_train_epochs against epoch, a progress bar's total"
)
#: An estimate of the planned steps from epochs (printed with a few digits) is this close only.
EPOCH_TOLERANCE = 0.01


@dataclass(frozen=True)
class Planned:
    """A planned end as one source states it."""

    steps: int | None
    """The planned last optimizer step (None: only epochs are known, and no step to scale by)."""
    source: str
    """Where it was read: "verl progress bar (line 412: 19/55990)", "trainer_state.json:
    max_steps"."""
    epochs: float | None = None
    """The planned epochs, when that is what the source states (``steps`` is then estimated)."""

    def text(self) -> str:
        if self.epochs is not None:
            est = f" ≈ {self.steps:,} steps" if self.steps is not None else ""
            unit = "epoch" if self.epochs == 1 else "epochs"
            return f"planned {self.epochs:g} {unit}{est} ({self.source})"
        return f"planned {self.steps:,} steps ({self.source})"

    def to_json(self) -> dict[str, Any]:
        """run.json's ``imported.planned_end``."""
        return {"steps": self.steps, "epochs": self.epochs, "from": self.source}


@dataclass(frozen=True)
class Reached:
    """How far the run got, as one source says."""

    step: int
    source: str
    exact: bool = False
    """The trainer's own step counter (``global_step``, a progress bar's count), not the last
    step a row was logged at."""


@dataclass(frozen=True)
class Evidence:
    """Everything a log says about its end (``judge`` decides)."""

    planned: tuple[Planned, ...] = ()
    """Every planned end found, most trusted first."""
    reached: tuple[Reached, ...] = ()
    """How far it got, most trusted first (the exact counters first)."""
    end_line: str = ""
    """The end-of-training line or record, named with where it is ("the end-of-training record
    (train_runtime), line 638"; "" when the log has none)."""
    window: int = 1
    """Steps between two logged rows (TRL's ``logging_steps``; 1 for one row a step)."""
    end_expected: bool = True
    """The format writes an end-of-training line when training returns (a TRL console or
    trainer_state, a verl console): its absence is then evidence."""
    mid_run: str = ""
    """Why the file's last step need not be the run's (a checkpoint's state, saved while training
    ran: "checkpoint-100/ is a save made while training ran ..."); "" when the file is the run's
    last word. A run short of its planned end is then unknown, not stopped early."""
    note: str = ""
    """What else the reader found about the end, added to the verdict's text (the output
    folder's other checkpoints, a later state of the same run)."""

    def add(self, *, planned: Sequence[Planned] = (), reached: Sequence[Reached] = ()) -> Evidence:
        """More sources, less trusted than those found already (they come after them)."""
        return Evidence(
            (*self.planned, *planned),
            (*self.reached, *reached),
            self.end_line,
            self.window,
            self.end_expected,
            self.mid_run,
            self.note,
        )


@dataclass(frozen=True)
class Ending:
    """The verdict: True finished, False stopped early, None unknown; and why, citing sources."""

    finished: bool | None
    text: str
    planned: Planned | None = None
    failed: bool = False
    """No optimizer step ran (the trainer's counter never left 0): ``finished`` is False."""


def from_epochs(epochs: float, source: str, step: int | None, epoch: float | None) -> Planned:
    """A planned end of ``epochs`` epochs, in steps where a logged (step, epoch) pair scales it
    (steps per epoch = step / epoch: the trainer's epoch is its step over the steps an epoch)."""
    steps = None
    if step is not None and epoch is not None and epoch > 0:
        steps = round(epochs * step / epoch)
    return Planned(steps, source, epochs)


def from_settings(
    settings: Mapping[str, Any], step: int | None, epoch: float | None
) -> list[Planned]:
    """The planned ends a tool's settings state (values ``tool_settings.Setting``): TRL's
    ``max_steps`` (-1: none), verl's ``total_training_steps``; else TRL's ``num_train_epochs``
    (the Trainer runs epochs only when max_steps is not set), scaled by a logged (step, epoch)."""
    out = []
    for key in ("max_steps", "total_training_steps"):
        got = settings.get(key)
        n = _count(getattr(got, "value", None))
        if got is not None and n is not None:
            out.append(Planned(n, got.origin))
    epochs = settings.get("num_train_epochs")
    value = getattr(epochs, "value", None)
    if not out and epochs is not None and isinstance(value, int | float) and _positive(value):
        out.append(from_epochs(float(value), epochs.origin, step, epoch))
    return out


def _count(value: Any) -> int | None:
    """A positive whole number of steps (``500``, ``500.0``), else None (-1, None, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value <= 0 or value != int(value):
        return None
    return int(value)


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def judge(ev: Evidence) -> Ending:
    """The verdict of ``ev`` (see the module docstring)."""
    planned = next((p for p in ev.planned if p.steps is not None), None)
    reached = max(ev.reached, key=lambda r: (r.step, r.exact)) if ev.reached else None
    parts = [planned.text()] if planned is not None else []
    if reached is not None:
        parts.append(
            f"{'reached step' if reached.exact else 'last step'} {reached.step:,} "
            f"({reached.source})"
        )
    others = _others(ev, planned)
    if ev.end_line:
        parts.append(ev.end_line)
    elif ev.end_expected:
        parts.append("no end-of-training line")
    text = "; ".join(parts) + others + (f"; {ev.note}" if ev.note else "")
    steps = planned.steps if planned is not None else None
    if steps is None or reached is None:
        if ev.end_line:
            return Ending(True, text, planned)
        why = f"no source gives the planned end ({SOURCES_LOOKED_FOR})"
        return Ending(None, why + (f"; {text}" if text else ""), planned)
    tolerance = round(steps * EPOCH_TOLERANCE) if planned and planned.epochs is not None else 0
    if reached.step >= steps - tolerance:
        return Ending(True, text, planned)
    if ev.end_line:  # training returned before its planned end (an early-stopping callback)
        return Ending(True, text + "; it ended before its planned end", planned)
    if reached.exact and reached.step == 0:
        never = (
            "; the trainer's step counter never left 0 while the log printed records: no "
            "optimizer step ran"
        )
        return Ending(False, text + never, planned, failed=True)
    short = steps - reached.step
    window = 1 if reached.exact else max(ev.window, 1)
    if short < window + tolerance:
        near = (
            f"; the last logged step is within one logging window ({window} steps) of the "
            "planned end: whether it reached it is unknown"
        )
        return Ending(None, text + near, planned)
    if ev.mid_run:  # the file stops where it was saved, not (known to be) where the run did
        return Ending(None, f"{text}; {ev.mid_run}", planned)
    return Ending(False, text, planned)


def _others(ev: Evidence, planned: Planned | None) -> str:
    """ "; also ..." for other sources of the planned end that disagree with the one used."""
    if planned is None:
        return ""
    differ = [
        p
        for p in ev.planned
        if p.steps is not None
        and planned.steps is not None
        and abs(p.steps - planned.steps) > (p.steps * EPOCH_TOLERANCE if p.epochs else 0)
    ]
    if not differ:
        return ""
    return "; other sources differ: " + ", ".join(p.text() for p in differ[:3])
