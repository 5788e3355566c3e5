"""Import runs logged by TRL, Tinker cookbook, verl and ROLL, and any trainer's JSON-lines or CSV
log read through a key map, into gspo-dash run folders.

    python -m training_hooks.importers trl    OUTPUT_DIR | trainer_state.json | train.log |
                                              events.out.tfevents.* | wandb/run-*   --root runs
    python -m training_hooks.importers tinker LOG_DIR_OR_metrics.jsonl                --root runs
    python -m training_hooks.importers verl   EXPERIMENT.jsonl | job.log | events.out.tfevents.* |
                                              wandb/run-*                             --root runs
    python -m training_hooks.importers jsonl  metrics.jsonl --step step --map reward=mean_reward
                                              --map kl=train/kl [--set epsilon=0.2]
                                              [--group-size 8]                --root runs
    python -m training_hooks.importers csv    log.csv (the same)               --root runs
    python -m training_hooks.importers roll   metrics.jsonl [--set enable_reference=false]
                                              [--map reward=my/reward]        --root runs
    (--algorithm grpo|gspo, --config settings.json|.yaml, --name, --run-id, --replace,
     --segment N|all)

    from training_hooks.importers import import_run
    import_run("verl", "logs/proj/exp.jsonl", root="runs")  # -> ImportResult

Each log becomes ``ROOT/<run_id>/run.json`` (``source`` = the tool, ``imported`` = a
``schema.ImportRecord``: format and version detected, the path as given, the kind of file read and
what the reader found or assumed, another file of the run compared, the settings found and where,
malformed lines, duplicate and validation-only steps, which names were mapped, renamed, kept or not
stored, the tool defaults relied on, how wall time was built) plus
``ROOT/<run_id>/steps/compacted-*.parquet``: our step columns where the tool logs the same
quantity (null where it does not: unknown is not zero), every other numeric metric as a float64
column under its own name, or ``<tool>/<name>`` when it resembles one of ours but means something
else (``training_hooks.metric_map`` says which, per tool version). No per-sequence table: these
tools log step scalars only.

The reader is picked from the path (``_pick``): TRL's ``trainer_state.json`` (``trl``), its console
dicts (``trl_console``), TensorBoard event files (``tfevents``, the optional ``tensorboard``
extra), W&B run folders (``wandb_run``); Tinker's ``metrics.jsonl`` (``tinker``); verl's file
logger (``verl``) and console (``verl_console``). Settings (clip range, loss aggregation, group
size, clip unit, updates per batch) come from the files beside the log or printed in it,
``--config`` overrides them, and what none states stays null in run.json. A bad file raises
``ValueError`` with a one-line reason (the CLI exits 2; a file of another format is named, with
the command that reads it) and leaves the root unchanged. A file holding several runs one after
another raises ``SeveralRuns`` naming where each starts (unless exactly one of them is an RL run:
that one is read, the others named as skipped); ``segment=N`` imports one. A log already
in the root (the same file, or the same content, and the same run of it) is not imported twice:
``AlreadyImported`` ("already imported as run X", the CLI exits 1), unless ``replace=True``
(``--replace``) imports it again over that run.

This package imports no torch (the dashboard's Runs page calls ``import_run``).
"""

from __future__ import annotations

from training_hooks.importers._cli import main
from training_hooks.importers._core import (
    UNKNOWN_ALGORITHM,
    AlreadyImported,
    ImportResult,
    import_run,
)
from training_hooks.importers._describe import ImportDescription, describe, markdown_table
from training_hooks.importers._pick import SOURCES, TOOLS
from training_hooks.importers._segments import SeveralRuns
from training_hooks.importers.keymap import KeyMap, key_map_of

__all__ = [
    "AlreadyImported",
    "SOURCES",
    "TOOLS",
    "UNKNOWN_ALGORITHM",
    "ImportResult",
    "ImportDescription",
    "KeyMap",
    "SeveralRuns",
    "import_run",
    "key_map_of",
    "main",
    "markdown_table",
    "describe",
]
