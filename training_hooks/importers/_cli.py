"""``python -m training_hooks.importers trl|tinker|verl PATH --root ROOT [--algorithm ..] ...``"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from training_hooks import schema
from training_hooks.importers._core import SOURCES, TOOLS, AlreadyImported, import_run
from training_hooks.importers._read import load_config
from training_hooks.importers._summary import report_lines


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m training_hooks.importers",
        description="Import a TRL, Tinker cookbook or verl run into a gspo-dash runs folder.",
    )
    p.add_argument("source", choices=SOURCES, help="the tool that logged the run")
    p.add_argument(
        "path", help="; ".join(f"{name}: {spec.path_hint}" for name, spec in TOOLS.items())
    )
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
        help="grpo or gspo when the files beside the log do not say (TRL: gspo = "
        "importance_sampling_level 'sequence'; verl: loss_mode gspo); default: from the config "
        "beside the log, else 'unknown'",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="import a log that is in the root already (the same file or content) again, over "
        "the run it became; without it such an import is refused and the root left as it was",
    )
    p.add_argument(
        "--config",
        default=None,
        help="a JSON or YAML file of the run's settings; overrides what is found beside the log",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Exit 0 with a report on success, or with "already imported as run X" when the log is in the
    root already (nothing written); 2 with a one-line reason (root unchanged) on failure."""
    args = _parser().parse_args(argv)
    try:
        config = None
        if args.config:
            config = load_config(Path(args.config))
            if config is None:
                raise ValueError(f"--config {args.config!r} is not a readable JSON/YAML mapping")
        res = import_run(
            args.source,
            args.path,
            root=args.root,
            name=args.name,
            algorithm=args.algorithm,
            run_id=args.run_id,
            config=config,
            replace=args.replace,
        )
    except AlreadyImported as e:
        print(_one_line(e))
        return 0
    except (ValueError, OSError) as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    print(f"imported {res['steps']} steps from {res['record'].file} into {res['run_dir']}")
    info = schema.read_run_info(res["run_dir"])
    for line in report_lines(res["record"], info):
        print(f"  {line}")
    return 0


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 400 else text[:397] + "..."
