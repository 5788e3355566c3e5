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
    read: Callable[[Path], SourceLog]
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

    @property
    def display_name(self) -> str:
        """The tool's one name in user text (its ``Trainer.display_name``: "Tinker cookbook")."""
        return display_name(self.name)


def no_facts(log: SourceLog, fmt: SourceFormat, settings: Settings) -> Settings:
    """``ToolSpec.facts`` of a tool whose log states no settings beyond those already read
    (ms-swift, OpenRLHF, a key-mapped log): none."""
    return {}
