"""A W&B run folder (``wandb/run-<time>-<id>/``) -> a SourceLog, read offline: nothing is fetched.

``files/output.log`` is the run's console as W&B captured it: TRL / Unsloth print one dict per
logging step there (read by ``trl_console``), verl its ``step:N - ...`` lines (``verl_console``).
``files/wandb-summary.json`` holds the last value of every logged key (HF's names: ``train/loss``;
``_step`` is W&B's own counter, not the trainer's step) and ``train/global_step``, the final
optimizer step; ``files/requirements.txt`` pins the exact tool version (``trl==0.24.0``);
``files/config.yaml`` (``key: {value: ...}``) the run's settings and ``files/wandb-metadata.json``
its start time, when they were kept.

The binary ``run-<id>.wandb`` beside ``files/`` (``wandb_store``) is read first when its history
holds per-step metrics: it holds every value at full precision, as logged, with the trainer's
step (TRL's ``train/global_step``) and the exit code, where the console holds what was printed
(rounded, long lines cut at 4,096 characters, nothing at all for a run whose loop printed no
metrics). ``output.log`` is read when the .wandb is absent or holds no metrics; the import's notes
and ``file_format`` say which was read.

The summary is compared with the console's last record (at the precision the console printed):
an import says whether the two files of the run agree, and where they do not.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from training_hooks.importers import _end, trl_console, verl_console, wandb_history, wandb_store
from training_hooks.importers._read import MAX_CONFIG_BYTES, SourceLog, is_number, load_config
from training_hooks.importers._sniff import VERL_CONSOLE, WANDB_STORE, Kind, sniff
from training_hooks.importers._spec import Settings
from training_hooks.tool_settings import read_settings

FILE_FORMAT = "W&B run folder"
FILES = "files"
CONSOLE = "output.log"
SUMMARY = "wandb-summary.json"
PINNED = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9_.-]+)\s*==\s*(?P<version>[0-9][0-9A-Za-z.+!-]*)\s*$", re.MULTILINE
)


def run_of_file(path: Path, kind: Kind | None) -> Path | None:
    """The W&B run folder a file belongs to when the file is that run's console
    (``files/output.log``) or its ``.wandb`` (``kind``: what ``sniff`` saw); else None."""
    if path.name != CONSOLE and kind is not WANDB_STORE:
        return None
    return run_folder(path)


def run_folder(path: Path) -> Path | None:
    """The W&B run folder ``path`` is, or is inside (``files/``, ``files/output.log``), or the
    only run of a ``wandb/`` folder (or of the ``wandb/`` in ``path``); None when it is none."""
    if path.is_file():
        path = path.parent
    if path.name == FILES and (path / CONSOLE).is_file():
        return path.parent
    if _is_run(path):
        return path
    base = path / "wandb" if (path / "wandb").is_dir() else path
    runs = sorted(p for p in base.glob("*run-*") if p.is_dir() and _is_run(p))
    if len(runs) > 1:
        raise ValueError(
            f"{base} holds {len(runs)} W&B runs ({', '.join(p.name for p in runs[:4])}"
            f"{', ...' if len(runs) > 4 else ''}): pass one"
        )
    return runs[0] if runs else None


def _is_run(path: Path) -> bool:
    """A W&B run folder: its console (``files/output.log``) or its binary run file is there."""
    return (path / FILES / CONSOLE).is_file() or wandb_store.find_store(path) is not None


def read(run: Path, tool: str, config: Mapping[str, Any] | None, segment: int | None) -> SourceLog:
    """The run in W&B run folder ``run`` as ``tool`` ("trl" or "verl") logged it: its .wandb
    history where it holds metrics, else its console (module docstring)."""
    files = run / FILES
    console = files / CONSOLE
    summary = load_config(files / SUMMARY) or {}
    version = _pinned(files / "requirements.txt", tool)
    cfg = _config(files / "config.yaml")
    store_file = wandb_store.find_store(run)
    store = wandb_store.read_store(store_file) if store_file is not None else None
    if store is not None and not cfg:
        cfg = dict(store.config)
    origin = (
        "config.yaml"
        if (files / "config.yaml").is_file() or store_file is None
        else f"{store_file.name} config"
    )
    settings: Settings = read_settings(tool, cfg, origin) if cfg else {}
    if config:
        settings.update(read_settings(tool, config, "--config"))
    if store is not None and (wandb_store.has_history(store) or not console.is_file()):
        return _from_store(run, store, tool, settings, segment, cfg, version)
    if not console.is_file():
        raise ValueError(f"{run} holds no {FILES}/{CONSOLE} and its .wandb no history")
    if tool == "verl" or sniff(console) is VERL_CONSOLE:
        if tool != "verl":
            raise ValueError(f"{console} holds verl console lines: {VERL_CONSOLE.hint(run)}")
        log = verl_console.read(console, segment)
        log = dataclasses.replace(log, file_format=f"{verl_console.FILE_FORMAT} in a {FILE_FORMAT}")
    else:
        step = trl_console.final_step(summary, "train/global_step")
        log = trl_console.read(
            console,
            settings,
            segment,
            final=(step, f"{SUMMARY} (train/global_step)") if step else None,
            first_step=bool(
                cfg.get("logging_first_step") or (config or {}).get("logging_first_step")
            ),
            name=run.name,
            file_format=f"{trl_console.FILE_FORMAT} in a {FILE_FORMAT}",
        )
    checks = agree(log, summary, tool) if summary else ()
    log = dataclasses.replace(log, end=end_evidence(log, settings, summary, tool))
    kept = [
        f.name
        for f in (files / "requirements.txt", files / "config.yaml", files / SUMMARY)
        if f.is_file()
    ]
    unsloth = _pinned(files / "requirements.txt", "unsloth") if tool == "trl" else None
    return dataclasses.replace(
        log,
        version=version or log.version,
        dialect_evidence=(f"requirements.txt pins unsloth=={unsloth}",) if unsloth else (),
        config={**cfg, **log.config},
        settings_files=tuple(str(files / n) for n in kept if n != SUMMARY),
        started_at=_started(files / "wandb-metadata.json"),
        cross_checks=checks,
        notes=(
            f"W&B run {run.name}: read files/{CONSOLE}"
            + (f"; compared with {SUMMARY}" if summary else f"; no {SUMMARY}")
            + (f"; the version from requirements.txt ({tool}=={version})" if version else ""),
            *log.notes,
        ),
    )


def _from_store(
    run: Path, store, tool: str, settings: Settings, segment, cfg, version
) -> SourceLog:
    """The run from its .wandb history (``wandb_history.tool_log``); the console read only for the
    end of the run (its progress bar, an error after the last step)."""
    files = run / FILES
    console = files / CONSOLE
    if segment not in (None, 1):
        raise ValueError(f"segment {segment}: a .wandb file holds one run")
    if not wandb_history.logs_tool(store, tool):  # a loop's own run that used W&B
        log = wandb_history.own_log(store.file, tool, None, store)
        why = (
            f"its history holds none of the keys every {tool} W&B run logs "
            f"({', '.join(wandb_history.TOOL_SIGNS[tool])}): read as a loop's own keys, each "
            "meaning guessed from its name"
        )
        return dataclasses.replace(
            log,
            version=version,
            settings_files=tuple(
                str(files / n) for n in ("requirements.txt", "config.yaml") if (files / n).is_file()
            ),
            notes=(f"W&B run {run.name}: read {store.file.name}; {why}", *log.notes),
        )
    log = wandb_history.tool_log(run, store, tool, settings)
    if console.is_file() and log.end is not None:
        log = dataclasses.replace(log, end=_with_console(log.end, console, tool, settings))
    why = (
        f"; {CONSOLE} not read (the .wandb holds every logged value at full precision)"
        if console.is_file()
        else ""
    )
    return dataclasses.replace(
        log,
        version=version,
        config={**cfg, **log.config},
        settings_files=tuple(
            str(files / n) for n in ("requirements.txt", "config.yaml") if (files / n).is_file()
        ),
        notes=(f"W&B run {run.name}: read {store.file.name}{why}", *log.notes),
    )


def _with_console(ev: _end.Evidence, console: Path, tool: str, settings: Settings) -> _end.Evidence:
    """The .wandb's end evidence with the console's (a progress bar's planned total and count,
    an error after the last step), which the .wandb does not hold."""
    try:
        if tool == "verl":
            got = verl_console.read(console, None).end
        else:
            got = trl_console.read(console, settings, None).end
    except ValueError:
        return ev
    if got is None:
        return ev
    ev = dataclasses.replace(ev.add(planned=got.planned, reached=got.reached))
    if ev.crash is None and got.crash is not None:
        ev = dataclasses.replace(ev, crash=got.crash)
    if ev.end_line.startswith("W&B's exit record") and any(p.steps for p in got.planned):
        ev = dataclasses.replace(  # a clean exit is no end of training where a plan is stated
            ev, end_line=got.end_line, note=f"{ev.end_line}: the process exited cleanly"
        )
    return ev


#: The trainer's own step counter in wandb-summary.json (its value at the last log), per tool.
SUMMARY_STEP = {"trl": "train/global_step", "verl": "training/global_step"}


def end_evidence(
    log: SourceLog, settings: Settings, summary: Mapping[str, Any], tool: str
) -> _end.Evidence | None:
    """The console's evidence of its end, with config.yaml's planned end (max_steps,
    num_train_epochs; verl's total_training_steps) and wandb-summary.json's step counter (the
    trainer's step at its last log: right even where the console's lines were cut)."""
    if log.end is None:
        return None
    key = SUMMARY_STEP[tool]
    step = trl_console.final_step(summary, key)
    last = max(log.steps) if log.steps and not log.step_axis else None
    epoch = summary.get("train/epoch") if tool == "trl" else None
    planned = _end.from_settings(settings, last, epoch if is_number(epoch) else None)
    reached = [_end.Reached(step, f"{SUMMARY} {key}", exact=True)] if step else []
    return log.end.add(planned=planned, reached=reached)


def _pinned(file: Path, tool: str) -> str | None:
    """The ``tool==X`` pin of a requirements file (W&B writes ``pip freeze`` there)."""
    try:
        if not file.is_file() or file.stat().st_size > MAX_CONFIG_BYTES:
            return None
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for m in PINNED.finditer(text):
        if m.group("name").lower().replace("_", "-") == tool:
            return m.group("version")
    return None


def _config(file: Path) -> dict[str, Any]:
    """W&B's config.yaml: ``key: {value: X}`` (older: ``{desc: ..., value: X}``) -> {key: X}."""
    data = load_config(file) if file.is_file() else None
    if not data:
        return {}
    return {
        str(k): v["value"]
        for k, v in data.items()
        if not str(k).startswith("_") and isinstance(v, Mapping) and "value" in v
    }


def _started(file: Path) -> float | None:
    meta = load_config(file) if file.is_file() else None
    when = meta.get("startedAt") if meta else None
    if not isinstance(when, str):
        return None
    try:
        return dt.datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def agree(log: SourceLog, summary: Mapping[str, Any], tool: str) -> tuple[str, ...]:
    """The console's last training row against wandb-summary.json's last values (``train/<name>``
    for TRL; the names as logged for verl), each at the precision the console printed it."""
    if not log.steps:
        return ()
    step = max(log.steps)
    row = log.steps[step]
    prefix = "train/" if tool == "trl" else ""
    same: list[str] = []
    differ: list[str] = []
    for name, x in sorted(row.items()):
        v = summary.get(prefix + name)
        if not is_number(x) or not is_number(v):
            continue
        (same if _agrees(float(x), float(v), log.printed_digits) else differ).append(
            f"{name} ({x!r} vs {v!r})"
        )
    out = []
    if same and not differ:
        out.append(
            f"{SUMMARY} agrees with the last record of {CONSOLE} (step {step}) on all {len(same)} "
            "metrics both hold"
            + (
                f", at the {log.printed_digits} significant digits the console printed"
                if log.printed_digits
                else ""
            )
        )
    elif differ:
        out.append(
            f"{SUMMARY} differs from the last record of {CONSOLE} (step {step}) on {len(differ)} "
            f"of {len(same) + len(differ)} metrics: {', '.join(differ[:6])}"
            + (", ..." if len(differ) > 6 else "")
        )
    final = trl_console.final_step(summary, "train/global_step") if tool == "trl" else None
    if final is not None:
        stated = log.settings.get("logging_steps")
        inferred = stated is not None and stated.origin.startswith("inferred")
        verdict = "equals" if final == step else "differs from"
        if not inferred:
            out.append(
                f"{SUMMARY} train/global_step {final} {verdict} the last record's step {step}"
            )
    return tuple(out)


def _agrees(x: float, v: float, digits: int | None) -> bool:
    """``x`` (as the console printed it: ``digits`` significant digits, None: in full) is ``v``."""
    return x == v or (digits is not None and float(f"{v:.{digits}g}") == x)
