"""Replay Parquet runs into MLflow: ``python -m training_hooks.sync ROOT --tracking-uri URI``.

For runs recorded offline (``mlflow=None``) or while the tracking server was down. ROOT is a local
folder or an object-store URI (``s3://bucket/prefix``: ``training_hooks.storage``). Parquet is the
source of truth; for each run folder under ROOT (or ROOT itself when it holds a run.json) this
finds the MLflow run tagged with the gspo-dash run id (or creates it), logs the params and tags,
every step not yet in MLflow (steps after the last one MLflow has for ``num_sequences``), the run's
Parquet files as artifacts, and the final status. Running it twice logs nothing new.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections.abc import Sequence

from . import schema, storage, tables
from .sinks.mlflow import (
    ARTIFACT_PATH,
    MAX_METRICS_PER_BATCH,
    MLFLOW_STATUS,
    TAG_ALGORITHM,
    TAG_RUN_ID,
    TAG_SOURCE,
    chunks,
    find_run,
    get_or_create_experiment,
    log_params,
    resolve_tracking_uri,
    row_metrics,
    run_params,
)

PROGRESS_KEY = schema.mlflow_key(schema.Step.NUM_SEQUENCES)


def run_dirs(root: str) -> list[str]:
    """ROOT itself if it is a run folder, else its sub-folders holding a run.json, sorted."""
    if storage.is_file(storage.join(root, schema.RUN_JSON)):
        return [root]
    return [storage.join(root, n) for n in schema.run_folders(root)]


def _log_artifacts(client, run_id: str, run_dir: str) -> None:
    """Upload the run folder's files (an object-store run is copied to a local folder first)."""
    if not storage.is_uri(run_dir):
        client.log_artifacts(run_id, run_dir, artifact_path=ARTIFACT_PATH)
        return
    with tempfile.TemporaryDirectory(prefix="gspo-dash-sync-") as tmp:
        storage.download_tree(run_dir, tmp)
        client.log_artifacts(run_id, tmp, artifact_path=ARTIFACT_PATH)


def sync_run(
    client, run_dir: str, *, experiment: str = "gspo-dash", artifacts: bool = True
) -> dict:
    """Bring one run folder's MLflow run up to date; returns what was done."""
    from mlflow.entities import Metric, RunTag

    info = schema.read_run_info(run_dir)
    steps = tables.read_table(run_dir, schema.STEPS_DIR)
    exp_id = get_or_create_experiment(client, experiment)
    run = find_run(client, exp_id, info.run_id)
    created = run is None
    if created:
        run = client.create_run(
            exp_id,
            start_time=int(info.created_at * 1000) if info.created_at else None,
            run_name=info.name,
            tags={
                TAG_RUN_ID: info.run_id,
                TAG_ALGORITHM: info.algorithm,
                TAG_SOURCE: "gspo_dash.sync",
            },
        )
    run_id = run.info.run_id
    log_params(client, run_id, run_params(info))
    client.log_batch(run_id, tags=[RunTag("gspo_dash.status", info.status)])

    done = -1
    if not created:
        history = client.get_metric_history(run_id, PROGRESS_KEY)
        if history:
            done = max(m.step for m in history)
    metrics = []
    new_steps = 0
    for row in steps.to_dict("records"):
        step = int(row[schema.Step.STEP])
        if step <= done:
            continue
        new_steps += 1
        wall = row.get(schema.Step.WALL_TIME)
        ts = int(wall * 1000) if wall is not None and math.isfinite(wall) else 0
        metrics += [Metric(k, v, ts, step) for k, v in row_metrics(row)]
    for part in chunks(metrics, MAX_METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=part)
    if artifacts and info.status != schema.STATUS_RUNNING:
        _log_artifacts(client, run_id, run_dir)
    if info.status in (schema.STATUS_FINISHED, schema.STATUS_FAILED):
        end = int(info.ended_at * 1000) if info.ended_at else None
        client.set_terminated(run_id, status=MLFLOW_STATUS[info.status], end_time=end)
    return {
        "run_id": info.run_id,
        "mlflow_run_id": run_id,
        "created": created,
        "new_steps": new_steps,
        "metrics": len(metrics),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training_hooks.sync",
        description="Replay gspo-dash Parquet runs into an MLflow tracking store.",
    )
    parser.add_argument("root", help="a runs folder (ROOT/<run_id>/run.json) or one run folder")
    parser.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)",
    )
    parser.add_argument("--experiment", default="gspo-dash", help="MLflow experiment name")
    parser.add_argument("--run", action="append", default=None, help="only this run id (repeat)")
    parser.add_argument("--no-artifacts", action="store_true", help="do not upload Parquet files")
    args = parser.parse_args(argv)

    if not storage.is_dir(args.root):
        parser.error(f"{args.root!r} is not a folder")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=resolve_tracking_uri(args.tracking_uri))
    failures = 0
    dirs = run_dirs(args.root)
    if args.run:
        dirs = [d for d in dirs if storage.basename(d) in set(args.run)]
    if not dirs:
        print(f"no runs under {args.root}", file=sys.stderr)
        return 1
    for d in dirs:
        try:
            r = sync_run(client, d, experiment=args.experiment, artifacts=not args.no_artifacts)
        except Exception as e:  # noqa: BLE001 -- one broken run must not stop the others
            failures += 1
            print(f"{storage.basename(d)}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        verb = "created" if r["created"] else "updated"
        print(
            f"{r['run_id']}: {verb} mlflow run {r['mlflow_run_id']}, "
            f"{r['new_steps']} new steps ({r['metrics']} metric points)"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
