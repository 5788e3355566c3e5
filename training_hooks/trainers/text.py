"""A loop's own printed lines (``importers.text_log``), keys mapped by the names it prints: no
tool's rules; its settings stated in our own words, as a key-mapped log's (``trainers.keymap``)."""

from __future__ import annotations

from training_hooks.trainers.facts import Trainer
from training_hooks.trainers.keymap import SETTING_KEYS

TEXT = "text"

TRAINER = Trainer(
    name=TEXT,
    display_name="a log of its own keys (text lines)",
    format_label="a loop's own text log, keys mapped by name",
    importer="training_hooks.importers.text_log",
    setting_keys=SETTING_KEYS,
)
