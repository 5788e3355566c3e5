"""Which reader reads a path, for the tool the user named: ``trl`` on a folder finds a
``trainer_state.json`` (or the newest ``checkpoint-N/``'s), a W&B run, a TensorBoard event file or
a console log; ``verl`` the file logger's JSON lines, a console log, a W&B run or an event file;
``tinker`` its ``metrics.jsonl``. A file is read by what its first bytes show (``_sniff``), not by
its name; one that no reader of the tool reads gets a one-line error naming the format it looks
like and the command that reads it. What was found, read and compared is said in the record.

A JSON-lines log holding several runs one after another is split here (``_segments``): the
settings beside it then describe only the last run (a run rewrites its config file when it
starts), so the other runs get none of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from training_hooks.importers import (
    keymap,
    openrlhf,
    roll,
    swift,
    text_log,
    tfevents,
    tinker,
    trl,
    trl_console,
    verl,
    verl_console,
    wandb_run,
    wandb_store,
)
from training_hooks.importers._agree import compare
from training_hooks.importers._read import SourceLog, merge_by_step, read_json_lines
from training_hooks.importers._segments import Record, choose, segment_notes, split_by_step
from training_hooks.importers._sniff import (
    EVENT,
    EVENT_FILE,
    TINKER_JSONL,
    TRAINER_STATE,
    TRL_CONSOLE,
    VERL_CONSOLE,
    VERL_JSONL,
    WANDB_STORE,
    Kind,
    sniff,
    wrong_format,
)
from training_hooks.importers._spec import ToolSpec
from training_hooks.importers.keymap import KeyMap
from training_hooks.tool_settings import read_settings

CONSOLE_SUFFIXES = (".log", ".out", ".txt", ".err")
MAX_CANDIDATES = 200  # files looked at in a folder
MAX_COMPARED = 4  # other files of the run compared with the one read
TRL_WHAT = "TRL log (trainer_state.json, console dicts, TensorBoard event file or W&B run)"
VERL_WHAT = "verl log (file-logger JSON lines, console 'step:N' lines, event file or W&B run)"


Reader = Callable[[Path, "Mapping[str, Any] | None", "int | None", "KeyMap | None"], SourceLog]


def read(
    tool: str,
    path: Path,
    config: Mapping[str, Any] | None = None,
    segment: int | None = None,
    key_map: KeyMap | None = None,
) -> SourceLog:
    """The run at ``path`` as ``tool`` logged it (``segment``: which run of a file holding
    several, 1-based; ``key_map``: what the user states of a log of their own keys).

    Routed by name: a tool of ``READERS`` by its reader here, any other tool of ``TOOLS`` by
    its own ``ToolSpec.read``; an unknown tool is refused (never read by another tool's
    reader)."""
    if tool not in TOOLS:
        raise ValueError(f"source must be one of {tuple(TOOLS)}, got {tool!r}")
    if not path.exists():
        raise ValueError(f"path {str(path)!r} does not exist")
    if key_map is not None and tool not in KEY_MAP_TOOLS:
        raise ValueError(
            f"--step, --map, --set and --group-size are for {', '.join(KEY_MAP_TOOLS)} imports: "
            f"a {tool} log's keys and settings are read by their meaning in {tool}"
        )
    reader = READERS.get(tool)
    if tool in (keymap.JSONL, text_log.SPEC.name) and _own_wandb(path):
        log = wandb_store.own_log(path, tool, key_map)
    elif reader is not None:
        log = reader(path, config, segment, key_map)
    else:
        log = TOOLS[tool].read(path)
    if log.tool != tool:  # a reader answering for another tool is a wiring fault
        raise AssertionError(f"the {tool} import was read as a {log.tool} log")
    if log.segments:  # one name per run of the file, never one name for several runs
        log = dataclasses.replace(log, name=f"{log.name}-run{log.segment}")
    return log


def _own_wandb(path: Path) -> bool:
    """``path`` is a loop's own W&B run read by its .wandb: the file itself, or a W&B run folder
    holding one."""
    if path.is_file():
        return sniff(path) is WANDB_STORE
    try:
        run = wandb_run.run_folder(path)
    except ValueError:
        return False
    return run is not None and wandb_store.find_store(run) is not None


def _single(read_one: Callable[[Path, KeyMap | None], SourceLog]) -> Reader:
    """A reader of one run a file (a segment other than 1 refused) that takes a key map."""

    def reader(path, config, segment, key_map):
        if segment not in (None, 1):
            raise ValueError(f"segment {segment}: this reader reads one run a file")
        return read_one(path, key_map)

    return reader


# ----------------------------------------------------------------------------- TRL


def _trl(path: Path, config: Mapping[str, Any] | None, segment: int | None) -> SourceLog:
    if path.is_file():
        kind = sniff(path)
        if kind is EVENT:
            return _trl_events(path, segment)
        if (path.name == wandb_run.CONSOLE or kind is WANDB_STORE) and wandb_run.run_folder(
            path
        ) is not None:
            return wandb_run.read(wandb_run.run_folder(path) or path, "trl", config, segment)
        if kind is TRL_CONSOLE:
            return _trl_console(path, config, segment)
        if kind not in (None, TRAINER_STATE):
            raise wrong_format(path, "trl", TRL_WHAT)
        return _trl_state(path, segment)
    if _state_in(path) is not None:
        return _trl_state(path, segment)
    run = wandb_run.run_folder(path)
    if run is not None:
        return _found(wandb_run.read(run, "trl", config, segment), path)
    events = _events_in(path)
    if events:
        return _found(_trl_events(_one(events, path, "TensorBoard event files"), segment), path)
    consoles = _consoles_in(path, TRL_CONSOLE)
    if consoles:
        return _found(_trl_console(_one(consoles, path, "TRL console logs"), config, segment), path)
    raise ValueError(
        f"path {str(path)!r} holds no {TRL_WHAT}: no trainer_state.json (nor checkpoint-*/), "
        f"wandb/run-*, events.out.tfevents.* or *.log / *.out / *.txt with TRL records"
    )


def _state_in(folder: Path) -> Path | None:
    try:
        return trl.find_file(folder, (trl.STATE_FILE,), "*trainer_state*.json", "")
    except ValueError:
        return None


def _trl_state(path: Path, segment: int | None) -> SourceLog:
    """A trainer_state.json, compared with the event files of its output dir."""
    if segment not in (None, 1):
        raise ValueError(f"segment {segment}: a trainer_state.json holds one run")
    log = dataclasses.replace(trl.read(path), file_format="trainer_state.json")
    out = trl.output_folders(log.file)[-1]
    events = _events_in(out)[:MAX_COMPARED]
    checks: list[str] = []
    for ev in events:
        try:
            other = tfevents.read(ev, "trl")
        except ValueError as e:
            checks.append(f"{_rel(ev, out)} not compared: {e}")
            continue
        checks += compare(log, other, _rel(log.file, out), _rel(ev, out))
    found = [f"{_rel(log.file, out)} (trainer_state.json, read)"] + [
        f"{_rel(e, out)} ({tfevents.FILE_FORMAT}, compared)" for e in events
    ]
    notes = (f"found in {out}: {'; '.join(found)}",) if events or path.is_dir() else ()
    return dataclasses.replace(log, cross_checks=tuple(checks), notes=notes + log.notes)


def _trl_events(file: Path, segment: int | None) -> SourceLog:
    log = tfevents.read(file, "trl", segment)
    out = tfevents.output_dir(file)
    state = _state_in(out) if out != file.parent else None
    if state is None:
        return log
    checks = compare(log, trl.read(state), _rel(file, out), _rel(state, out))
    note = (
        f"found in {out}: {_rel(state, out)} (trainer_state.json of the same output dir, compared)"
    )
    return dataclasses.replace(log, cross_checks=tuple(checks), notes=(*log.notes, note))


def _trl_console(file: Path, config: Mapping[str, Any] | None, segment: int | None) -> SourceLog:
    """A console log; ``logging_steps`` (which places its records) from ``--config``, else from
    the files beside it (training arguments, a trainer_state.json)."""
    settings, files, version, beside = trl._beside(file)
    state = file.parent / trl.STATE_FILE
    if state.is_file():
        try:
            settings.update(trl._state_settings(state, trl.parse_json(state.read_text("utf-8"))))
            files += (str(state),)
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            pass
    if config:
        settings.update(read_settings("trl", config, "--config"))
    first = bool((config or {}).get("logging_first_step", beside.get("logging_first_step")))
    log = trl_console.read(file, settings, segment, first_step=first)
    return dataclasses.replace(
        log,
        settings_files=files,
        version=version,
        config=beside,
        dialect_evidence=trl.unsloth_evidence(file),
    )


# ----------------------------------------------------------------------------- verl


def _verl(path: Path, config: Mapping[str, Any] | None, segment: int | None) -> SourceLog:
    if path.is_file():
        kind = sniff(path)
        if kind is EVENT:
            return tfevents.read(path, "verl", segment)
        if (path.name == wandb_run.CONSOLE or kind is WANDB_STORE) and wandb_run.run_folder(
            path
        ) is not None:
            return wandb_run.read(wandb_run.run_folder(path) or path, "verl", config, segment)
        if kind is VERL_CONSOLE:
            return verl_console.read(path, segment)
        if kind not in (None, VERL_JSONL):
            raise wrong_format(path, "verl", VERL_WHAT)
    if path.is_file() or any(path.glob("*.jsonl")):
        return _json_runs(
            verl.read(path), verl._parse, ("val-",), segment, "verl file-logger JSON lines"
        )
    run = wandb_run.run_folder(path)
    if run is not None:
        return _found(wandb_run.read(run, "verl", config, segment), path)
    events = _events_in(path)
    if events:
        return _found(
            tfevents.read(_one(events, path, "TensorBoard event files"), "verl", segment), path
        )
    consoles = _consoles_in(path, VERL_CONSOLE)
    if consoles:
        return _found(verl_console.read(_one(consoles, path, "verl console logs"), segment), path)
    raise ValueError(
        f"path {str(path)!r} holds no {VERL_WHAT}: no *.jsonl, wandb/run-*, "
        "events.out.tfevents.* or *.log / *.out / *.txt with 'step:N - ...' lines"
    )


# ----------------------------------------------------------------------------- Tinker


def _tinker(path: Path, segment: int | None) -> SourceLog:
    if path.is_file():
        kind = sniff(path)
        if kind not in (None, TINKER_JSONL):
            raise wrong_format(path, "tinker", "Tinker metrics record")
    return _json_runs(tinker.read(path), tinker._parse, ("test/",), segment, "Tinker metrics.jsonl")


def _json_runs(
    log: SourceLog,
    parse: Callable[[Any], tuple[int, Mapping[str, Any]] | str],
    validation: tuple[str, ...],
    segment: int | None,
    what: str,
) -> SourceLog:
    """A JSON-lines log split into its runs (``_segments.split_by_step``): the one asked for."""
    records = []
    for n, obj in read_json_lines(log.file).objects:
        got = parse(obj)
        if not isinstance(got, str):
            records.append(Record(n, *got))
    segments = split_by_step(records, validation)
    seg = choose(segments, segment, log.file)
    notes = segment_notes(seg, len(segments))
    log = dataclasses.replace(log, file_format=log.file_format or what)
    if len(segments) == 1:
        return dataclasses.replace(log, notes=(*log.notes, *notes))
    merged = merge_by_step((r.step, r.metrics) for r in seg.records)
    last = seg.index == len(segments)
    a, b = seg.lines
    if not last and log.settings_files:
        notes.append(
            f"{', '.join(Path(f).name for f in log.settings_files)} beside the log is rewritten by "
            f"every run that starts: it describes run {len(segments)}, so this run's settings are "
            "unknown"
        )
    kept = {k: v for k, v in log.settings.items() if v.origin.startswith("the log")}
    settings = dict(log.settings) if last else kept
    ended: tuple[bool | None, str] = (None, "")
    evidence = None
    if log.tool == "verl":
        evidence = verl.end_of(merged.steps, settings)
    else:
        ended = tinker.end_of(merged.steps, settings)
    return dataclasses.replace(
        log,
        # how the run ended, from this run's own steps (against the settings it has)
        source_finished=ended[0],
        end_text=ended[1],
        end=evidence,
        steps=merged.steps,
        duplicate_steps=merged.duplicate_steps,
        malformed=tuple(d for d in log.malformed if a <= d.get("line", a) <= b),
        truncated_last_line=log.truncated_last_line if last else None,
        settings=settings,
        settings_files=log.settings_files if last else (),
        config=log.config if last else {},
        started_at=log.started_at if last else None,
        notes=(*log.notes, *notes),
        segment=seg.index,
        segments=len(segments),
    )


# ----------------------------------------------------------------------------- folders


def _events_in(folder: Path) -> list[Path]:
    """Event files in ``folder``, its ``runs/*/`` (the Trainer's) or one level below."""
    if not folder.is_dir():
        return []
    found: list[Path] = []
    for pattern in (
        "events.out.tfevents.*",
        "runs/*/events.out.tfevents.*",
        "*/events.out.tfevents.*",
    ):
        found += [p for p in folder.glob(pattern) if p.is_file() and EVENT_FILE.match(p.name)]
        if len(found) > MAX_CANDIDATES:
            break
    return sorted(set(found))


def _consoles_in(folder: Path, kind: Kind) -> list[Path]:
    cands = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in CONSOLE_SUFFIXES
    )
    return [p for p in cands[:MAX_CANDIDATES] if sniff(p) is kind]


def _one(files: list[Path], folder: Path, what: str) -> Path:
    if len(files) > 1:
        listed = ", ".join(_rel(f, folder) for f in files[:4]) + (", ..." if len(files) > 4 else "")
        raise ValueError(f"path {str(folder)!r} holds {len(files)} {what} ({listed}): pass one")
    return files[0]


def _found(log: SourceLog, folder: Path) -> SourceLog:
    """The record names what was found in the folder given."""
    note = f"found in {folder}: {_rel(log.file, folder)} ({log.file_format})"
    return dataclasses.replace(log, notes=(note, *log.notes))


def _rel(file: Path, folder: Path) -> str:
    try:
        return str(file.relative_to(folder))
    except ValueError:
        return str(file)


#: Every tool an import reads, by name: its ``ToolSpec`` (settings, key mappings, display name).
TOOLS: dict[str, ToolSpec] = {
    "trl": trl.SPEC,
    "tinker": tinker.SPEC,
    "verl": verl.SPEC,
    "jsonl": keymap.SPEC_JSONL,
    "csv": keymap.SPEC_CSV,
    "roll": roll.SPEC,
    "swift": swift.SPEC,
    "openrlhf": openrlhf.SPEC,
    "text": text_log.SPEC,
}
SOURCES = tuple(TOOLS)
#: The tools read by a reader here (several formats, runs a file, a key map); every other tool
#: of ``TOOLS`` is read by its own ``ToolSpec.read``.
READERS: dict[str, Reader] = {
    "trl": lambda path, config, segment, key_map: _trl(path, config, segment),
    "verl": lambda path, config, segment, key_map: _verl(path, config, segment),
    "tinker": lambda path, config, segment, key_map: _tinker(path, segment),
    keymap.JSONL: _single(keymap.read_jsonl),
    keymap.CSV: _single(keymap.read_csv),
    text_log.SPEC.name: _single(text_log.read),
    roll.SPEC.name: _single(roll.read),
    swift.SPEC.name: lambda path, config, segment, key_map: swift.read(path, segment),
    openrlhf.SPEC.name: lambda path, config, segment, key_map: openrlhf.read(path, segment),
}
#: The tools whose logs take a key map (``--step``, ``--map``, ``--set``, ``--group-size``).
KEY_MAP_TOOLS = (keymap.JSONL, keymap.CSV, roll.SPEC.name, text_log.SPEC.name)
