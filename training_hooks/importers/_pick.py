"""Which tool reads a path: the one the user named, by its ``ToolSpec`` in ``TOOLS`` (its ``read``
is its readers' dispatch: ``trl`` on a folder finds a ``trainer_state.json`` or the newest
``checkpoint-N/``'s, a W&B run, a TensorBoard event file or a console log; ``verl`` the file
logger's JSON lines, a console log, a W&B run or an event file; ``tinker`` its ``metrics.jsonl``).
There is no default tool: an unknown tool is refused, and a reader answering for another tool is a
wiring fault. A file is read by what its first bytes show (``_sniff``), not by its name; one that
no reader of the tool reads gets a one-line error naming the format it looks like and the command
that reads it. What was found, read and compared is said in the record.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from training_hooks.importers._read import SourceLog
from training_hooks.importers._spec import ToolSpec
from training_hooks.importers.keymap import KeyMap
from training_hooks.trainers import TRAINERS, Trainer


def read(
    tool: str,
    path: Path,
    config: Mapping[str, Any] | None = None,
    segment: int | None = None,
    key_map: KeyMap | None = None,
) -> SourceLog:
    """The run at ``path`` as ``tool`` logged it (``segment``: which run of a file holding
    several, 1-based; ``key_map``: what the user states of a log of their own keys), read by the
    tool's ``ToolSpec.read``."""
    if tool not in TOOLS:
        raise ValueError(f"source must be one of {tuple(TOOLS)}, got {tool!r}")
    if not path.exists():
        raise ValueError(f"path {str(path)!r} does not exist")
    if key_map is not None and not TOOLS[tool].takes_key_map:
        raise ValueError(
            f"--step, --map, --set and --group-size are for {', '.join(KEY_MAP_TOOLS)} imports: "
            f"a {tool} log's keys and settings are read by their meaning in {tool}"
        )
    if tool in OWN_KEYS and _own_wandb(path):  # a loop's own W&B run: its .wandb's history
        from training_hooks.importers import wandb_history

        log = wandb_history.own_log(path, tool, key_map)
    else:
        log = TOOLS[tool].read(path, config, segment, key_map)
    if log.tool != tool:  # a reader answering for another tool is a wiring fault
        raise AssertionError(f"the {tool} import was read as a {log.tool} log")
    if log.segments:  # one name per run of the file, never one name for several runs
        log = dataclasses.replace(log, name=f"{log.name}-run{log.segment}")
    return log


def _spec(trainer: Trainer) -> ToolSpec:
    """The ``ToolSpec`` that ``trainer.importer`` names ("module" or "module:NAME")."""
    module, _, name = trainer.importer.partition(":")
    spec = getattr(importlib.import_module(module), name or "SPEC", None)
    if not isinstance(spec, ToolSpec) or spec.name != trainer.name:
        raise AssertionError(f"{trainer.importer} holds no ToolSpec named {trainer.name!r}")
    return spec


#: Every tool an import reads, by name: its ``ToolSpec`` (its readers' dispatch, the settings its
#: config states), the one each trainer of ``training_hooks.trainers.TRAINERS`` names.
TOOLS: dict[str, ToolSpec] = {name: _spec(t) for name, t in TRAINERS.items()}
SOURCES = tuple(TOOLS)
#: The tools whose logs take a key map (``--step``, ``--map``, ``--set``, ``--group-size``).
KEY_MAP_TOOLS = tuple(name for name, spec in TOOLS.items() if spec.takes_key_map)

#: The tools that read a log of a loop's own keys, whose W&B run (a folder, or its ``.wandb``) is
#: read from the ``.wandb``'s history (``wandb_history.own_log``).
OWN_KEYS = ("jsonl", "text")


def _own_wandb(path: Path) -> bool:
    """``path`` is a loop's own W&B run read by its .wandb: the file itself, or a W&B run folder
    holding one."""
    from training_hooks.importers import wandb_run, wandb_store
    from training_hooks.importers._sniff import WANDB_STORE, sniff

    if path.is_file():
        return sniff(path) is WANDB_STORE
    try:
        run = wandb_run.run_folder(path)
    except ValueError:
        return False
    return run is not None and wandb_store.find_store(run) is not None
