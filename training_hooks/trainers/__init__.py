"""One module per trainer whose logs are imported: its facts (``facts.Trainer``: one display name,
settings keys, loss aggregations, key mappings by version and setting, version evidence, tool
defaults), as data. ``TRAINERS`` is the registry every generic reader of those facts goes through
(``metric_map``, ``tool_settings``, ``tool_versions``, the Health checks' words); the reading of
each tool's files is its importer's (``importers/<tool>.py``, ``importers._pick.TOOLS``).
Torch-free, no I/O."""

from __future__ import annotations

from training_hooks.trainers import keymap, openrlhf, roll, swift, text, tinker, trl, verl
from training_hooks.trainers.facts import Trainer

#: Every trainer, by the name its importer and rules use (the order is the order names are tried
#: in: a ``<tool>/<name>`` column, a rule a name several tools log).
TRAINERS: dict[str, Trainer] = {
    t.name: t
    for t in (
        trl.TRAINER,
        verl.TRAINER,
        tinker.TRAINER,
        keymap.JSONL_TRAINER,
        keymap.CSV_TRAINER,
        text.TRAINER,
        roll.TRAINER,
        swift.TRAINER,
        openrlhf.TRAINER,
    )
}


def display_name(tool: str) -> str:
    """The tool's name in user text (the name itself for a tool not in ``TRAINERS``)."""
    t = TRAINERS.get(tool)
    return t.display_name if t else tool
