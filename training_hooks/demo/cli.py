"""The command line, ``python -m training_hooks.demo`` / ``gspo-dash-demo``: generated, then run.

Every field of ``DemoConfig`` (but ``algorithm``: ``--algorithms`` lists them) and of ``Session``
is an option ``--field-name`` whose type, default and help come from the field (``add_options``),
so the options cannot drift from the dataclasses. ``--mlflow URI`` / ``--no-mlflow`` is the one
hand-written pair (``Session.mlflow`` is a URI or a switch).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import time
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

from .config import DemoConfig, Session
from .faults import fault_help
from .loop import RunResult, build, train
from .report import Phase, ProgressLine, header, phases_text, results_table, run_label

DESCRIPTION = (
    "Train a small transformer policy with GRPO and GSPO on a synthetic verifiable task and "
    "record both runs (Parquet + MLflow)."
)


def _converter(tp: Any) -> tuple[Callable[[str], Any], str | None]:
    """How an option's text becomes a field's value: int, float, str, ``X | None``, ``tuple[X, ...]``
    (comma-separated). Returns the converter and a metavar (None: argparse's)."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (types.UnionType, typing.Union) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return _converter(inner)
    if typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis:
        item, _ = _converter(args[0])

        def comma_list(text: str) -> tuple:
            return tuple(item(x.strip()) for x in text.split(",") if x.strip())

        return comma_list, "A,B,..."
    if tp in (int, float, str):
        return tp, None
    raise TypeError(f"no command-line option for a field of type {tp!r}")


def add_options(parser: argparse._ActionsContainer, cls: type) -> list[str]:
    """Add ``--field-name`` for each field of dataclass ``cls`` (but those with ``cli=False``
    in their metadata); returns the fields' names. Help: the field's ``help``, then its default."""
    hints = typing.get_type_hints(cls)
    names = []
    for f in dataclasses.fields(cls):
        if not f.metadata.get("cli", True):
            continue
        convert, metavar = _converter(hints[f.name])
        help_text = f.metadata.get("help", "")
        if f.default is not None:
            shown = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
            help_text = f"{help_text.removesuffix('.')} (default: {shown})"
        parser.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=convert,
            default=f.default,
            metavar=metavar,
            help=help_text.replace("%", "%%"),
        )
        names.append(f.name)
    return names


def build_parser() -> tuple[argparse.ArgumentParser, list[str], list[str]]:
    """The parser, and the option names that belong to ``DemoConfig`` and to ``Session``."""
    parser = argparse.ArgumentParser(
        prog="gspo-dash-demo",
        description=DESCRIPTION,
        epilog=fault_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    session = parser.add_argument_group("session (what this invocation runs and where it records)")
    session_names = add_options(session, Session)
    mlflow = session.add_mutually_exclusive_group()
    mlflow.add_argument(
        "--mlflow",
        default=True,
        metavar="URI",
        help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or sqlite:///mlflow.db)",
    )
    mlflow.add_argument(
        "--no-mlflow",
        dest="mlflow",
        action="store_const",
        const=False,  # (the default, True, is --mlflow's: both set dest mlflow)
        help="record to Parquet only",
    )
    config = parser.add_argument_group("run settings (DemoConfig; stored as each run's config)")
    config_names = add_options(config, DemoConfig)
    config.add_argument(
        "--inject",
        dest="inject",
        action="append",
        default=[],
        metavar="NAME[@STEP]",
        help="inject a fault into every run (repeatable): one of the faults listed below",
    )
    return parser, config_names, [*session_names, "mlflow"]


def parse_args(argv: Sequence[str] | None = None) -> tuple[Session, list[DemoConfig]]:
    """The session and one ``DemoConfig`` per algorithm; a bad value exits with status 2."""
    parser, config_names, session_names = build_parser()
    ns = parser.parse_args(argv)
    try:
        session = Session(**{k: getattr(ns, k) for k in session_names})
        settings = {k: getattr(ns, k) for k in config_names}
        return session, session.configs(**settings, inject=tuple(ns.inject))
    except ValueError as e:  # the dataclasses' checks; their messages start with the field
        names = [*config_names, *session_names, "inject"]
        parser.error(re.sub(r"^(\w+)", lambda m: _flag(m[1], names), str(e)))


def _flag(word: str, names: list[str]) -> str:
    return "--" + word.replace("_", "-") if word in names else word


def record_run(config: DemoConfig, session: Session) -> RunResult:
    """Train one run, recorded by a ``RunRecorder`` under ``session.out``, with a progress line;
    the result's ``write_time`` is the recorder's close (the last Parquet parts, MLflow's metrics
    and artifacts). Runs are recorded one after the other: a fresh SQLite MLflow store is
    migrated by the first run's MLflow process, and a second one migrating it at the same time
    would fail."""
    from training_hooks import RunRecorder

    with RunRecorder(
        root=session.out,
        name=session.run_name(config),
        algorithm=config.algorithm,
        config=config.stored(),
        mlflow=session.mlflow,
        reduction=config.reduction,
        group_size=config.group_size,
        token_samples=session.token_samples,
        **config.clip_ranges(),
    ) as recorder:
        progress = ProgressLine(run_label(config, session.seeds), config.steps)
        result = train(config, recorder, progress)
        result.run_dir = str(recorder.run_dir)
        t0 = time.perf_counter()
    result.write_time = time.perf_counter() - t0
    return result


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``); None where that is unknown."""
    try:
        with open("/proc/self/stat") as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(after_name[19])  # field 22, starttime, in clock ticks since boot
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def cpu_text() -> str:
    """The CPU time this process and its finished child processes (MLflow's) used, and the load:
    on a shared machine the wall clock stretches with other jobs, the CPU time much less."""
    t = os.times()
    own, children = t.user + t.system, t.children_user + t.children_system
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"CPU time (s): this process {own:.1f}, its child processes (MLflow) {children:.1f}; "
        f"load average {load:.1f} over the last minute on {os.cpu_count()} CPUs"
    )


def run(argv: Sequence[str] | None = None) -> list[RunResult]:
    """The command line: train and record every requested algorithm, print the results table, the
    time of each phase and the commands that open the runs."""
    import torch

    from training_hooks.sinks.mlflow import resolve_tracking_uri

    started = process_age()
    t0 = time.perf_counter()
    session, configs = parse_args(argv)
    torch.set_num_threads(session.threads)
    uri = resolve_tracking_uri(session.mlflow)
    print(header(configs, session.out, uri), flush=True)
    phases = [] if started is None else [Phase("start-up", started, "python, torch, imports")]
    t1 = time.perf_counter()
    one_of_seed = {c.seed: c for c in configs}  # a seed's runs share its warm start
    for c in one_of_seed.values():
        build(c)  # the warm start, cached: every run of the seed starts from it
    warm = f"{configs[0].warmup_steps} supervised steps, shared by the runs"
    if len(one_of_seed) > 1:
        warm = f"{configs[0].warmup_steps} supervised steps per seed, shared by its runs"
    phases.append(Phase("warm start", time.perf_counter() - t1, warm))
    sinks = "the last Parquet parts, MLflow's metrics and artifacts" if uri else "Parquet"
    results = []
    for config in configs:
        results.append(record_run(config, session))
        r = results[-1]
        what = f"{config.steps} rollout steps, {config.optimizer_steps} optimizer steps"
        name = run_label(config, session.seeds)
        phases.append(Phase(f"training {name}", r.train_time, what))
        phases.append(Phase(f"writing {name}", r.write_time, f"at close: {sinks}"))
    elapsed = time.perf_counter() - t0
    known = sum(p.seconds for p in phases) - (started or 0.0)
    what = "each run's set-up (recorder, policy copy), printing"
    phases.append(Phase("other", elapsed - known, what))
    print()
    print(results_table(results, session.seeds))
    print()
    print(phases_text(phases, None if started is None else started + elapsed))
    print(cpu_text())
    print()
    for r in results:
        print(f"{run_label(r.config, session.seeds)}: {r.run_dir}")
    runs = "both runs" if len(results) == 2 else ("the run" if len(results) == 1 else "the runs")
    print(f"Open the dashboard on {runs}: gspo-dash --root {shlex.quote(session.out)}")
    if session.seeds > 1:
        print(
            "Which algorithm is better, and how sure (the seeds grouped): python -m app.verdict "
            f"{shlex.quote(session.out)} --by algorithm --metric reward_mean"
        )
    if uri:
        print(f"The same runs in MLflow: mlflow ui --backend-store-uri {shlex.quote(uri)}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point (``gspo-dash-demo``): exit status 0."""
    run(argv)
    return 0
