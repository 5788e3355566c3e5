"""One module per trainer whose logs are imported: its facts (``facts.Trainer``: one display name,
settings keys, loss aggregations, key mappings by version and setting, version evidence, tool
defaults, the module of its importer), as data. ``TRAINERS`` is the registry every generic reader
of those facts goes through (``metric_map``, ``tool_settings``, ``tool_versions``, the Health
checks' words, and ``importers._pick.TOOLS``, which imports each ``Trainer.importer``: the reading
of its files, its ``ToolSpec``). Torch-free, no I/O."""

from __future__ import annotations

from training_hooks.trainers import keymap, openrlhf, roll, swift, text, tinker, trl, verl
from training_hooks.trainers.facts import Trainer

__all__ = ["TRAINERS", "Trainer", "display_name"]

#: Every trainer, by the name its importer and rules use, in the order the CLI and the Runs page
#: list them (and names are tried in: a ``<tool>/<name>`` column, a rule a name several tools log).
TRAINERS: dict[str, Trainer] = {
    t.name: t
    for t in (
        trl.TRAINER,
        tinker.TRAINER,
        verl.TRAINER,
        keymap.JSONL_TRAINER,
        keymap.CSV_TRAINER,
        roll.TRAINER,
        swift.TRAINER,
        openrlhf.TRAINER,
        text.TRAINER,
    )
}


def display_name(tool: str) -> str:
    """The tool's name in user text (the name itself for a tool not in ``TRAINERS``)."""
    t = TRAINERS.get(tool)
    return t.display_name if t else tool
