"""``python -m training_hooks.importers trl|tinker|verl|jsonl|csv|roll|swift|openrlhf PATH --root ROOT [...]``

``jsonl`` and ``csv`` read any trainer's log through a key map (``--step KEY``, ``--map
MEANING=KEY``, ``--set NAME=VALUE``, ``--group-size N``: ``importers.keymap``); ``roll`` is the
same reader with ROLL's own keys mapped (``importers.roll``).

Exit status: 0 imported (a report follows); 1 refused, nothing written: the log is in the root
already (``--replace`` imports it again); 2 a bad path, file or argument (one line on stderr, the
root unchanged)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training_hooks import schema
from training_hooks.importers._core import AlreadyImported, import_run
from training_hooks.importers._describe import report_lines
from training_hooks.importers._pick import SOURCES, TOOLS
from training_hooks.importers._read import load_config
from training_hooks.importers._segments import SeveralRuns
from training_hooks.importers.keymap import key_map_of


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m training_hooks.importers",
        description="Import a TRL, Tinker cookbook, verl, ROLL, ms-swift or OpenRLHF run, or any "
        "trainer's JSON-lines or CSV log read through a key map (jsonl, csv: --step, --map, "
        "--set), into a gspo-dash runs folder.",
    )
    p.add_argument("source", choices=SOURCES, help="the tool that logged the run")
    p.add_argument("path", help="; ".join(spec.path_hint for spec in TOOLS.values()))
    p.add_argument(
        "--root",
        default="runs",
        help="runs folder or object-store URI (s3://bucket/prefix); default: runs",
    )
    p.add_argument("--name", default=None, help="run name (default: from the path)")
    p.add_argument("--run-id", default=None, help="folder name (an earlier import is replaced)")
    p.add_argument(
        "--algorithm",
        default=None,
        help="grpo or gspo when the files beside the log do not say (TRL, ms-swift: gspo = "
        "importance_sampling_level 'sequence'; verl: loss_mode gspo; OpenRLHF: policy_loss_type "
        "gspo); default: from the config "
        "beside the log, else 'unknown'",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="import a log that is in the root already (the same file or content) again, over "
        "the run it became; without it such an import is refused and the root left as it was",
    )
    p.add_argument(
        "--segment",
        default=None,
        help="a file holding several runs one after another (a log path reused across "
        "restarts): the run to import (1, 2, ...), or 'all' for each as its own run",
    )
    p.add_argument(
        "--tool-version",
        default=None,
        metavar="X.Y.Z",
        help="the version of the tool that wrote the log (for Unsloth: the TRL it ran on) when "
        "no file beside it states it; also the config key tool_version. The names are then read "
        "as that version logs them; the report prints the versions assumed",
    )
    p.add_argument(
        "--config",
        default=None,
        help="a JSON or YAML file of the run's settings; overrides what is found beside the log",
    )
    _key_map_arguments(p)
    return p


def _key_map_arguments(p: argparse.ArgumentParser) -> None:
    """``--step``, ``--map``, ``--set``, ``--group-size``: a log read through a key map."""
    keys = p.add_argument_group(
        "a log of your own keys (jsonl, csv; roll for its own keys ROLL does not log)"
    )
    keys.add_argument(
        "--step",
        default=None,
        metavar="KEY",
        help="the key holding the step (integers; 3.0 is 3); default: roll's system/step, else "
        "each record's index from 0 (said so in the import's record)",
    )
    keys.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="MEANING=KEY",
        help="what a key means: its values fill our column MEANING (e.g. --map "
        "reward=mean_reward --map kl=train/kl; repeat for each); an unknown MEANING is refused "
        "with the valid ones listed. Every other numeric key is kept under its own name",
    )
    keys.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the run (jsonl/csv: epsilon, epsilon_high, group_size, max_steps, "
        "max_grad_norm, one_update_per_row; roll: ROLL's names, e.g. enable_reference=false, "
        "pg_clip=0.2, max_steps=500); values read as JSON (true, 0.2)",
    )
    keys.add_argument(
        "--group-size", type=int, default=None, metavar="N", help="completions per prompt"
    )


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.key_map = None
    if args.step is not None or args.map or args.set or args.group_size is not None:
        try:  # a bad --map is refused whole (its list of meanings is longer than one line)
            args.key_map = key_map_of(
                args.source,
                step=args.step,
                maps=args.map,
                sets=args.set,
                group_size=args.group_size,
            )
        except ValueError as e:
            parser.error(str(e))
    try:
        config = None
        if args.config:
            config = load_config(Path(args.config))
            if config is None:
                raise ValueError(f"--config {args.config!r} is not a readable JSON/YAML mapping")
        segments = _segments(args, config)
        for k in segments:
            res = _import(args, config, k)
            rec = res["record"]
            what = f" ({rec.file_format})" if rec.file_format else ""
            print(f"imported {res['steps']} steps from {rec.file}{what} into {res['run_dir']}")
            for line in report_lines(rec, schema.read_run_info(res["run_dir"])):
                print(f"  {line}")
    except AlreadyImported as e:
        print(f"refused: {_one_line(e)}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    return 0


def _segments(args: argparse.Namespace, config) -> list[int | None]:
    """The runs of the file to import: the one ``--segment`` names, every one (``all``: found by
    reading the file once), or the file's only run (None)."""
    if args.segment is None:
        return [None]
    if args.segment != "all":
        try:
            return [int(args.segment)]
        except ValueError:
            raise ValueError(
                f"--segment must be a run number or 'all', got {args.segment!r}"
            ) from None
    from training_hooks.importers import _pick

    try:
        log = _pick.read(args.source, Path(args.path), config, None, args.key_map)
    except SeveralRuns as e:
        return list(range(1, len(e.segments) + 1))
    # a file whose only RL run is read without a choice still holds its other runs
    return list(range(1, log.segments + 1)) if log.segments else [None]


def _import(args: argparse.Namespace, config, segment: int | None):
    return import_run(
        args.source,
        args.path,
        root=args.root,
        name=args.name if segment is None or args.name is None else f"{args.name}-{segment}",
        algorithm=args.algorithm,
        run_id=args.run_id
        if segment is None or args.run_id is None
        else f"{args.run_id}-{segment}",
        config=config,
        replace=args.replace,
        segment=segment,
        tool_version=args.tool_version,
        key_map=args.key_map,
    )


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 400 else text[:397] + "..."
