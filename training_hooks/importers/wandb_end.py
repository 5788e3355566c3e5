"""How a W&B run ended, read from its ``.wandb`` (``wandb_store``): the exit record and the
console W&B kept in the file (``output_raw`` records, else ``output``: the process's own text,
in pieces), read as a text log's end (``_end.Signs``); and the log calls W&B refused (its
"this data will be ignored" warning), which are values in no file.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from training_hooks.importers import _end
from training_hooks.importers._text import clean

if TYPE_CHECKING:
    from training_hooks.importers.wandb_store import Store
    from training_hooks.tool_settings import Setting

#: W&B's warning on a log call whose step is below the run's current step: W&B writes none of
#: that call's values ("Tried to log to step 0 that is less than the current step 2. Steps must
#: be monotonically increasing, so this data will be ignored."; wandb >= 0.10).
IGNORED_STEP = re.compile(
    r"Tried to log to step (?P<step>\d+) that is less than the current step (?P<current>\d+)"
)
_BREAKS = re.compile(r"\r\n|\n|\r")


def console_lines(store: Store) -> list[tuple[int, float | None, str]]:
    """The console W&B kept in the file (``output_raw``, else ``output`` records), as lines:
    (the number of the record that ends the line, that record's time, its text). The pieces are
    joined in order and split at line breaks (a carriage return too: a progress bar's redraws are
    lines of their own); a last piece with no break is a line."""
    out: list[tuple[int, float | None, str]] = []
    part = ""
    rec, when = 0, None
    for rec, when, text in store.console or store.console_cooked:
        pieces = _BREAKS.split(part + text)
        part = pieces.pop()
        out.extend((rec, when, p) for p in pieces)
    if part:
        out.append((rec, when, part))
    return out


@dataclass(frozen=True)
class ConsoleEnd:
    """What the console says of the end (``console_end``)."""

    sign: _end.Sign | None = None  # the error or interrupt it ends on, after the last history row
    loop_end: str = ""  # the loop's own end-of-training line after it, with where it is
    note: str = ""  # an error not taken as the end (``_end.Signs.verdict``)


def console_end(store: Store, lines: list[tuple[int, float | None, str]]) -> ConsoleEnd:
    """The console's lines after the last history row, read as a text log's (``_end.Signs``):
    an error or an interrupt there before any end-of-training line of the loop's own
    (``_end.LOOP_END``) is how the process ended; such a line is the end of training. "After"
    by the clock where the row and the lines carry one (W&B writes a step's row when the next
    step begins or the run finishes: after the console's last words, by record order), else by
    record order."""
    rows = store.metric_rows
    if not lines or not rows:
        return ConsoleEnd()
    signs = _end.Signs(loop_end=True)
    row = rows[-1]
    last = 0  # the console's last line at (or before) the last history row
    for i, (rec, when, text) in enumerate(lines, 1):
        signs.feed(clean(i, text, True))
        by_clock = row.timestamp is not None and when is not None
        if (when <= row.timestamp) if by_clock else (rec < row.record):  # type: ignore[operator]
            last = i
    got = signs.loop_end_after(last, len(lines))
    sign, note = signs.verdict(1, last, len(lines), got[0] if got else None)
    where = f"the console W&B kept in {store.file.name}"
    if sign is not None:
        sign = dataclasses.replace(sign, what=f"{sign.what}, in {where}")
    ended = f'the loop\'s end line "{got[1]}" (line {got[0]:,} of {where})' if got else ""
    return ConsoleEnd(sign, ended if sign is None else "", note)


def ignored_steps(store: Store, lines: list[tuple[int, float | None, str]]) -> list[dict[str, Any]]:
    """Each log call W&B refused (``IGNORED_STEP`` in its console): its values are not in the
    file. As ``records_cut`` entries marked ``"dropped": True`` (the run's logger dropped them,
    not the import: Health's ``steps_dropped``): ``{"line": the console line, "step": the step
    asked, "kept": 0, "dropped": True, "reason": ...}``."""
    out = []
    for i, (_, _, text) in enumerate(lines, 1):
        m = IGNORED_STEP.search(text)
        if m is not None:
            step, current = int(m.group("step")), int(m.group("current"))
            out.append(
                {
                    "line": i,
                    "step": step,
                    "kept": 0,
                    "dropped": True,
                    "reason": f"W&B ignored a log call (step {step} below its current step "
                    f"{current}: none of its values were written; console of {store.file.name})",
                }
            )
    return out


def end_evidence(
    store: Store,
    settings: Mapping[str, Setting],
    last: int | None,
    epoch: float | None,
    window: int = 1,
) -> _end.Evidence:
    """How the run ended, by the .wandb: the planned end its settings state, the last step its
    history logged, its exit record and its console (``console_end``). ``exit_code`` 0: the
    process exited cleanly, which is the end of training where the console holds the loop's own
    end line after the last row or no planned end is stated (a loop that breaks out early exits
    0 too: a stated plan decides). Non-zero: it failed, unless its console ends on an interrupt
    (Ctrl-C: ``KeyboardInterrupt`` exits 255), a stop asked for; the console's error, where it
    names one, is quoted before the bare code. No exit record (a process killed, a copy taken
    while it ran): the console's last error, else the plan decides, never "finished" without
    evidence."""
    name = store.file.name
    planned = _end.from_settings(settings, last, epoch)
    reached = [_end.Reached(last, f"{name}: its last history row")] if last is not None else []
    con = console_end(store, console_lines(store))
    end_line = note = ""
    crash = None
    said = f"W&B's exit record, exit_code {store.exit_code} (record {store.exit_record or 0:,} of {name})"
    if store.exit_code == 0:
        if con.loop_end:
            end_line = f"{con.loop_end}; {said}"
        elif any(p.steps is not None for p in planned):
            note = f"{said}: the process exited cleanly; the planned end decides"
        else:
            end_line = said
    elif con.sign is not None:
        crash = con.sign
        if store.exit_code is not None:
            crash = dataclasses.replace(crash, what=f"{crash.what}; {said}")
    elif store.exit_code is not None:
        crash = _end.Sign(
            store.exit_record or 0,
            f"exit_code {store.exit_code}",
            f"the record number in {name}: W&B's exit record, the process failed",
            "W&B exit code",
        )
    return _end.Evidence(
        planned=tuple(planned),
        reached=tuple(reached),
        end_line=end_line,
        window=max(window, 1),
        crash=crash,
        note="; ".join(n for n in (note, con.note) if n),
    )
