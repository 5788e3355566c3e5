"""What each tool module supplies to the import (one ``ToolSpec`` per tool, no I/O here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training_hooks.importers._read import SourceLog
from training_hooks.metric_map import SourceFormat
from training_hooks.tool_settings import Setting
from training_hooks.trainers import display_name

Settings = dict[str, Setting]
#: A tool's reader: ``(path, config, segment, key_map) -> SourceLog``: the run at ``path`` (a file
#: or a folder holding it; ``config``: ``--config``'s settings; ``segment``: which run of a file
#: holding several, 1-based; ``key_map``: a ``keymap.KeyMap``, what the user states of a log of
#: their own keys, for a tool that ``takes_key_map``: typed ``Any`` as ``keymap`` imports this).
Reader = Callable[[Path, "Mapping[str, Any] | None", "int | None", Any], SourceLog]


@dataclass(frozen=True)
class RunSettings:
    """The run.json settings a tool's config states (``None``: not stated)."""

    algorithm: str | None = None
    seq_eps: tuple[float, float] | None = None
    token_eps: tuple[float, float] | None = None
    reduction: str | None = None
    group_size: int | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool's reader and the rules that need its knowledge.

    ``duration``: the metric holding a row's duration in seconds (per optimizer step for TRL's
    ``step_time``, whose rows average ``logging_steps`` steps: ``per_step``). ``validation``:
    prefixes of validation/eval metrics (a row holding only those is validation-only)."""

    name: str
    read: Reader  # the tool's readers' dispatch: which reader reads the path given
    facts: Callable[[SourceLog, SourceFormat, Settings], Settings]
    run_settings: Callable[[Mapping[str, Any]], RunSettings]
    algorithm_setting: tuple[str, dict[str, Any]] | None = None  # --algorithm -> a setting
    duration: str | None = None
    per_step: bool = False
    validation: tuple[str, ...] = ()
    derive: Callable[[dict[str, float]], dict[str, float]] = field(default=lambda row: {})
    derived_from: Mapping[str, str] = field(default_factory=dict)  # column -> its formula
    end_of: Callable[[SourceLog, Settings], tuple[bool | None, str]] | None = None
    """Whether the run reached its planned end, from every setting the import knows (``--set``,
    ``--config`` too): (finished, how the source says so); for a reader that cannot tell
    alone. Used only where the reader left ``source_finished`` unknown."""
    path_hint: str = ""  # what the import reads, for the CLI's help and the dashboard's form
    takes_key_map: bool = False  # --step, --map, --set, --group-size (``keymap.KeyMap``)

    @property
    def display_name(self) -> str:
        """The tool's one name in user text (its ``Trainer.display_name``: "Tinker cookbook")."""
        return display_name(self.name)


def one_run(read: Callable[[Path, Any], SourceLog]) -> Reader:
    """The ``Reader`` of a reader of one run a file (a segment other than 1 refused) that takes a
    key map: ``read(path, key_map)``."""

    def reader(path, config, segment, key_map):
        if segment not in (None, 1):
            raise ValueError(f"segment {segment}: this reader reads one run a file")
        return read(path, key_map)

    return reader


def runs(read: Callable[[Path, int | None], SourceLog]) -> Reader:
    """The ``Reader`` of a reader of ``read(path, segment)``."""
    return lambda path, config, segment, key_map: read(path, segment)


def no_facts(log: SourceLog, fmt: SourceFormat, settings: Settings) -> Settings:
    """``ToolSpec.facts`` of a tool whose log states no settings beyond those already read
    (ms-swift, OpenRLHF, a key-mapped log): none."""
    return {}
