"""Import runs logged by TRL, Tinker cookbook and verl into gspo-dash run folders.

    python -m training_hooks.importers trl    OUTPUT_DIR_OR_trainer_state.json --root runs
    python -m training_hooks.importers tinker LOG_DIR_OR_metrics.jsonl          --root runs
    python -m training_hooks.importers verl   PROJECT/EXPERIMENT.jsonl          --root runs

Each source becomes ``ROOT/<run_id>/run.json`` (``source`` = "trl" | "tinker" | "verl", status
``finished``) plus ``ROOT/<run_id>/steps/compacted-*.parquet`` with the schema's step columns (NaN
where the tool logs nothing comparable) and every other numeric metric as an extra float64 column
under its own name. There is no per-sequence table: these tools log step scalars only.

Formats read (as the tools write them):

* TRL: ``trainer_state.json`` (written by ``transformers.Trainer`` at every save), whose
  ``log_history`` is a list of ``{"step": N, "loss": ..., "reward": ..., ...}`` dicts; entries of one
  step are merged, the end-of-training summary (``train_runtime``, ``train_loss``, ...) goes to
  run.json. Given a folder, the newest ``checkpoint-*/trainer_state.json`` (or the folder's own).
* Tinker cookbook: ``metrics.jsonl`` from ``ml_log.JsonLogger``, one ``{"step": N, metric: value}``
  object a line; ``config.json`` beside it (``log_hparams``) becomes the run's config.
* verl: the file logger (``trainer.logger=[...,'file']``) writes ``<project>/<experiment>.jsonl``,
  one ``{"step": N, "data": {metric: value}}`` object a line.

Metric names are mapped with the dashboard's table (``training_hooks.metric_map``, one table for MLflow-only
runs and for these importers), plus what only an importer can do:

* Tinker: ``zero_variance_fraction = env/all/by_group/frac_all_good + frac_all_bad`` (groups whose
  rewards are all equal); the three parts stay as extras.
* TRL with ``importance_sampling_level="sequence"`` (``--algorithm gspo``): TRL's
  ``clip_ratio/low_mean``/``high_mean`` are then tested on the *sequence* ratio and averaged per
  sequence, which is our ``seq_clip_low/high_fraction``; with token-level ratios (GRPO) they are
  ``token_clip_low/high_fraction``.
* ``clip_ratio/region_mean`` (TRL) and ``actor/pg_clipfrac`` (verl) count tokens where the clip
  *binds* (ratio below 1-eps with A<0 or above 1+eps with A>0; verl computes it as
  ``pg_losses2 > pg_losses1``). Our ``token_clip_fraction`` counts every token outside the range,
  whatever A's sign, so they are stored as ``token_clip_binding_fraction`` (the dashboard's derived
  low+high column; ``seq_clip_binding_fraction`` for TRL GSPO), never as ``token_clip_fraction``.
* verl's ``actor/ppo_kl`` is the k1 mean of log(pi_old/pi_theta) (signed), stored as
  ``kl_old_mean`` (ours is the k3 estimate of the same direction); Tinker's
  ``optim/kl_sample_train_v1`` likewise (sampler vs trainer, k1).
* A foreign name equal to one of our column names but meaning something else (TRL's cumulative
  ``num_tokens``) is stored as ``<tool>/<name>``.

This module imports no torch (the dashboard's runs page uses it; ``training_hooks/__init__`` is lazy).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from training_hooks import schema
from training_hooks.metric_map import MAPPINGS, map_metric_name

Step = schema.Step

SOURCES = ("trl", "tinker", "verl")
UNKNOWN_ALGORITHM = "unknown"

TINKER_ALL_GOOD = "env/all/by_group/frac_all_good"
TINKER_ALL_BAD = "env/all/by_group/frac_all_bad"

# names the dashboard's table maps (possibly to a column of the same name, like TRL's "loss")
_TABLE_NAMES = frozenset(m.name for m in MAPPINGS if m.column)
# an end-of-training summary entry of TRL's log_history
_TRL_SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second")


class ImportResult(dict):
    """``{"run_id", "run_dir", "steps", "columns"}`` of an imported run."""


# ----------------------------------------------------------------------------- readers


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Objects of a JSON-lines file; a torn last line (a run still writing) is skipped."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}: line {i + 1} is not valid JSON: {e}") from e
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: line {i + 1} is not a JSON object")
        out.append(obj)
    return out


def _merge_by_step(records: Iterable[tuple[int, Mapping[str, Any]]]) -> dict[int, dict[str, Any]]:
    """{step: metrics}, later records of a step overriding earlier ones."""
    steps: dict[int, dict[str, Any]] = {}
    for step, metrics in records:
        steps.setdefault(int(step), {}).update(metrics)
    return steps


def _find_file(path: Path, name: str, what: str) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise ValueError(f"path {str(path)!r} does not exist")
    if (path / name).is_file():
        return path / name
    ckpts = sorted(
        (p for p in path.glob(f"checkpoint-*/{name}") if p.parent.name[11:].isdigit()),
        key=lambda p: int(p.parent.name[11:]),
    )
    if ckpts:
        return ckpts[-1]
    raise ValueError(f"path {str(path)!r} holds no {name} ({what})")


def read_trl(path: str | os.PathLike) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """TRL ``trainer_state.json`` -> ({step: metrics}, extra run info)."""
    file = _find_file(Path(path), "trainer_state.json", "TRL/transformers trainer state")
    with open(file, encoding="utf-8") as f:
        try:
            state = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{file} is not valid JSON: {e}") from e
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{file} has no 'log_history' list: not a trainer_state.json")
    records, summary = [], {}
    for i, entry in enumerate(history):
        if not isinstance(entry, dict) or "step" not in entry:
            raise ValueError(f"{file}: log_history[{i}] has no 'step'")
        if any(k in entry for k in _TRL_SUMMARY_KEYS):
            summary.update({k: v for k, v in entry.items() if k != "step"})
            continue
        records.append((entry["step"], {k: v for k, v in entry.items() if k != "step"}))
    info = {
        "file": str(file),
        "summary": summary,
        "trainer_state": {
            k: state[k]
            for k in ("global_step", "max_steps", "num_train_epochs", "logging_steps", "epoch")
            if k in state
        },
    }
    return _merge_by_step(records), info


def read_tinker(path: str | os.PathLike) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """Tinker cookbook ``metrics.jsonl`` (+ ``config.json``) -> ({step: metrics}, run info)."""
    file = _find_file(Path(path), "metrics.jsonl", "Tinker cookbook metrics")
    rows = _read_jsonl(file)
    records = []
    for i, row in enumerate(rows):
        step = row.get("step", i)
        records.append((step, {k: v for k, v in row.items() if k != "step"}))
    info: dict[str, Any] = {"file": str(file)}
    cfg = file.parent / "config.json"
    if cfg.is_file():
        try:
            info["config"] = json.loads(cfg.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            pass
    return _merge_by_step(records), info


def read_verl(path: str | os.PathLike) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """verl file-logger ``<experiment>.jsonl`` -> ({step: metrics}, run info)."""
    file = Path(path)
    if file.is_dir():
        found = sorted(file.glob("*.jsonl"))
        if len(found) != 1:
            raise ValueError(
                f"path {str(file)!r} holds {len(found)} .jsonl files; pass the experiment's file"
            )
        file = found[0]
    if not file.is_file():
        raise ValueError(f"path {str(file)!r} does not exist")
    records = []
    for i, row in enumerate(_read_jsonl(file)):
        data = row.get("data")
        if not isinstance(data, dict) or "step" not in row:
            raise ValueError(
                f'{file}: line {i + 1} is not verl\'s {{"step": N, "data": {{...}}}} record'
            )
        records.append((row["step"], data))
    return _merge_by_step(records), {
        "file": str(file),
        "project": file.parent.name,
        "experiment": file.stem,
    }


READERS = {"trl": read_trl, "tinker": read_tinker, "verl": read_verl}


# ----------------------------------------------------------------------------- mapping


def guess_algorithm(source: str, config: Mapping[str, Any] | None) -> str:
    """ "gspo" / "grpo" from a run's config when it says so, else "unknown".

    TRL: ``importance_sampling_level`` ("sequence" -> gspo, "token" -> grpo). verl:
    ``policy_loss.loss_mode == "gspo"``, or ``adv_estimator == "grpo"``. Tinker cookbook: a
    ``loss_fn`` naming gspo, or importance_sampling/ppo with group rollouts (grpo).
    """
    if not config:
        return UNKNOWN_ALGORITHM
    flat = schema.flatten(config, "/")

    def find(suffix: str) -> list[str]:
        return [str(v).lower() for k, v in flat.items() if k == suffix or k.endswith("/" + suffix)]

    level = find("importance_sampling_level")
    if level:
        return "gspo" if level[0] == "sequence" else "grpo"
    if "gspo" in find("loss_mode") or any("gspo" in v for v in find("loss_fn")):
        return "gspo"
    if "grpo" in find("adv_estimator"):
        return "grpo"
    if source == "tinker" and find("loss_fn") and find("group_size"):
        return "grpo"
    return UNKNOWN_ALGORITHM


def _eps_from_config(cfg: Mapping[str, Any], algorithm: str) -> dict[str, float]:
    """The clip range a config states (TRL ``epsilon[_low|_high]``, verl ``clip_ratio[_low|_high]``)
    as RunInfo eps fields of the algorithm's unit (sequence for gspo, token otherwise)."""
    flat = schema.flatten(cfg, "/")

    def get(suffix: str) -> float | None:
        for k, v in flat.items():
            if (k == suffix or k.endswith("/" + suffix)) and _as_float(v) is not None:
                return float(v)
        return None

    for base in ("epsilon", "clip_ratio"):
        low = get(base + "_low")
        low = low if low is not None else get(base)
        high = get(base + "_high")
        high = high if high is not None else low
        if low is not None and high is not None:
            unit = "seq" if algorithm == "gspo" else "token"
            return {f"{unit}_eps_low": low, f"{unit}_eps_high": high}
    return {}


def column_for(source: str, name: str, algorithm: str) -> str:
    """Our step column for a foreign metric (its own name when we have no equivalent)."""
    column = map_metric_name(name, sequence_level=source == "trl" and algorithm == "gspo")
    in_table = name.removeprefix("train/") in _TABLE_NAMES
    if not in_table and column in schema.STEP_COLUMN_NAMES:
        return f"{source}/{name}"  # never let an unmapped namesake pose as our column
    return column


def _as_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    return None


def map_steps(
    source: str, steps: Mapping[int, Mapping[str, Any]], algorithm: str
) -> tuple[dict[int, dict[str, float]], dict[str, str]]:
    """({step: {column: value}}, {foreign name: column}); non-numeric values are dropped.

    When two foreign names map to one column, the first in sorted order wins and the other keeps
    its own name (so nothing is lost).
    """
    names = sorted({k for m in steps.values() for k, v in m.items() if _as_float(v) is not None})
    mapping: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        col = column_for(source, name, algorithm)
        if col in taken or col in schema.STEP_KEY_COLUMNS:
            col = name if name not in schema.STEP_COLUMN_NAMES else f"{source}/{name}"
        taken.add(col)
        mapping[name] = col
    out: dict[int, dict[str, float]] = {}
    for step, metrics in steps.items():
        row: dict[str, float] = {}
        for name, v in metrics.items():
            x = _as_float(v)
            if x is not None:
                row[mapping[name]] = x
        if source == "tinker":
            good, bad = row.get(TINKER_ALL_GOOD), row.get(TINKER_ALL_BAD)
            if good is not None and bad is not None and Step.ZERO_VARIANCE_FRACTION not in row:
                row[Step.ZERO_VARIANCE_FRACTION] = good + bad
        out[step] = row
    return out, mapping


# ----------------------------------------------------------------------------- writing


def _wall_times(
    source: str, rows: Mapping[int, Mapping[str, float]], end: float
) -> dict[int, float]:
    """Estimated wall time per step when the tool logs step durations, else NaN.

    verl logs ``timing_s/step`` and Tinker cookbook ``time/total`` (seconds per step): the run is
    assumed to end at ``end`` (the log file's modification time) and the durations are summed back.
    """
    key = {"verl": "timing_s/step", "tinker": "time/total"}.get(source)
    ordered = sorted(rows)
    if key is None or not ordered or not all(key in rows[s] for s in ordered):
        return {s: math.nan for s in ordered}
    durations = [rows[s][key] for s in ordered]
    if not all(math.isfinite(d) and d >= 0 for d in durations):
        return {s: math.nan for s in ordered}
    t = end - sum(durations)
    out = {}
    for s, d in zip(ordered, durations, strict=True):
        t += d
        out[s] = t
    return out


def _write_steps(run_dir: Path, run_id: str, algorithm: str, rows, wall) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ordered = sorted(rows)
    declared = dict(schema.STEP_COLUMNS)
    extra = tuple(sorted({c for r in rows.values() for c in r if c not in declared}))
    for name in extra:
        schema.validate_extra_key(name)
    arrow_schema = schema.step_schema(extra)
    fixed = {
        Step.SCHEMA_VERSION: [schema.SCHEMA_VERSION] * len(ordered),
        Step.RUN_ID: [run_id] * len(ordered),
        Step.STEP: ordered,
        Step.WALL_TIME: [wall[s] for s in ordered],
        Step.ALGORITHM: [algorithm] * len(ordered),
    }
    cols: dict[str, list] = {}
    for field in arrow_schema:
        name = field.name
        if name in fixed:
            cols[name] = fixed[name]
        elif pa.types.is_integer(field.type):
            vals = [rows[s].get(name) for s in ordered]
            cols[name] = [
                int(v) if v is not None and math.isfinite(v) and v == int(v) else None for v in vals
            ]
        else:
            cols[name] = [rows[s].get(name, math.nan) for s in ordered]
    table = pa.Table.from_pydict(cols, schema=arrow_schema)
    folder = run_dir / schema.STEPS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    first, last = (ordered[0], ordered[-1]) if ordered else (0, 0)
    final = folder / schema.compacted_name(first, last, 0, 0)
    with schema.atomic_path(final) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return [f.name for f in arrow_schema]


def import_run(
    source: str,
    path: str | os.PathLike,
    *,
    root: str | os.PathLike = "runs",
    name: str | None = None,
    algorithm: str | None = None,
    run_id: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> ImportResult:
    """Import one run logged by ``source`` ("trl", "tinker", "verl") from ``path`` into ``root``.

    Args:
        name: the run's display name (default: derived from the path).
        algorithm: "grpo" / "gspo" when known (default: guessed from ``config`` or the tool's saved
            config, else "unknown"). For TRL it decides which clip columns TRL's clip metrics fill.
        run_id: the folder name (default ``<name>-<source>-<4 hex>``); an existing folder is
            replaced (re-importing a log that grew is how a running job is refreshed).
        config: the run's hyper-parameters, stored in run.json (merged over a saved config).
    """
    if source not in READERS:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    src = Path(path)
    steps, info = READERS[source](src)
    if not steps:
        raise ValueError(f"{info.get('file', src)} holds no metrics")
    cfg = dict(info.pop("config", None) or {})
    if config:
        cfg.update(config)
    algo = algorithm or guess_algorithm(source, cfg)
    if not isinstance(algo, str) or not algo:
        raise ValueError(f"algorithm must be a non-empty string, got {algorithm!r}")
    rows, mapping = map_steps(source, steps, algo)
    file = Path(info["file"])
    if name is None:
        name = info.get("experiment") or (
            file.parent.parent.name
            if file.parent.name.startswith("checkpoint-")
            else file.parent.name
        )
        name = name or source
    run_id = run_id or f"{schema.slug(name)}-{source}-{secrets.token_hex(2)}"
    run_dir = Path(root) / run_id
    if run_dir.exists():
        for sub in schema.TABLE_DIRS:
            for f in (run_dir / sub).glob("*.parquet") if (run_dir / sub).is_dir() else ():
                f.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    end = file.stat().st_mtime
    wall = _wall_times(source, rows, end)
    columns = _write_steps(run_dir, run_id, algo, rows, wall)
    eps = _eps_from_config(cfg, algo)
    finite_wall = [w for w in wall.values() if math.isfinite(w)]
    run_info = schema.RunInfo(
        run_id=run_id,
        name=name,
        algorithm=algo,
        config=cfg,
        versions={"gspo_dash_schema": str(schema.SCHEMA_VERSION)},
        created_at=min(finite_wall) if finite_wall else end,
        updated_at=end,
        ended_at=end,
        status=schema.STATUS_FINISHED,
        last_step=max(rows),
        source=source,
        other={
            "imported_from": str(file.resolve()),
            "imported_at": time.time(),
            "metric_mapping": {k: v for k, v in mapping.items() if k != v},
            **{k: v for k, v in info.items() if k != "file"},
        },
        **eps,
    )
    schema.write_json_atomic(run_dir / schema.RUN_JSON, run_info.to_json())
    return ImportResult(run_id=run_id, run_dir=str(run_dir), steps=len(rows), columns=columns)


# ----------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m training_hooks.importers",
        description="Import a TRL, Tinker cookbook or verl run into a gspo-dash runs folder.",
    )
    p.add_argument("source", choices=SOURCES, help="the tool that logged the run")
    p.add_argument(
        "path",
        help="trl: output/checkpoint dir or trainer_state.json; tinker: log dir or metrics.jsonl; "
        "verl: the file logger's <project>/<experiment>.jsonl",
    )
    p.add_argument("--root", default="runs", help="runs folder (default: runs)")
    p.add_argument("--name", default=None, help="run name (default: from the path)")
    p.add_argument("--run-id", default=None, help="folder name (replaced if it exists)")
    p.add_argument(
        "--algorithm",
        default=None,
        help="grpo or gspo when the log does not say (TRL: gspo = importance_sampling_level "
        "'sequence'); default: guessed from the saved config, else 'unknown'",
    )
    p.add_argument("--config", default=None, help="a JSON file of the run's hyper-parameters")
    args = p.parse_args(argv)
    config = None
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            config = json.load(f)
    try:
        res = import_run(
            args.source,
            args.path,
            root=args.root,
            name=args.name,
            algorithm=args.algorithm,
            run_id=args.run_id,
            config=config,
        )
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"imported {res['steps']} steps into {res['run_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
