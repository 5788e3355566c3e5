"""MLflow sink: the step table's columns as MLflow metrics, batched, on the sink's own thread.

MLflow is slow (about 1,000-4,000 points/s into SQLite here, ~14 ms per ``log_batch``), so the sink
buffers ``steps_per_batch`` steps per call and splits each call under MLflow's limits (1000 metrics,
100 params, 100 tags per ``log_batch``). It may lag behind training; Parquet is the source of
truth and ``python -m training_hooks.sync`` replays a run from it. Opening a new SQLite store
migrates its schema (seconds): that happens in ``open``, on the sink's thread.

Metric keys are ``schema.mlflow_key(column)`` (``gspo_dash/loss``); non-finite values are skipped
(MLflow charts cannot draw them; ``nonfinite_count`` is logged). Timestamps are the step's
``wall_time`` in ms.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from . import schema

if TYPE_CHECKING:
    from .compute import StepRecord

MAX_METRICS_PER_BATCH = 1000  # mlflow.utils.validation.MAX_METRICS_PER_BATCH
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_PARAM_VALUE_LENGTH = 6000
TAG_RUN_ID = "gspo_dash.run_id"
TAG_ALGORITHM = "gspo_dash.algorithm"
TAG_SOURCE = "gspo_dash.source"
ARTIFACT_PATH = "gspo_dash"

_STATUS = {
    schema.STATUS_FINISHED: "FINISHED",
    schema.STATUS_FAILED: "FAILED",
    schema.STATUS_RUNNING: "RUNNING",
}


def resolve_tracking_uri(mlflow: Any) -> str | None:
    """None/False: off. True: ``MLFLOW_TRACKING_URI`` or ``sqlite:///<cwd>/mlflow.db``. str: itself.

    A relative SQLite path is made absolute now, so a later ``chdir`` cannot move the store.
    """
    if mlflow is None or mlflow is False:
        return None
    if mlflow is True:
        uri = os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    elif isinstance(mlflow, str | os.PathLike):
        uri = os.fspath(mlflow)
    else:
        raise ValueError(f"mlflow must be None, False, True or a tracking URI, got {mlflow!r}")
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + os.path.abspath(uri[len("sqlite:///") :])
    return uri


def run_params(info) -> dict[str, Any]:
    """The MLflow params of a run: its config plus the run settings, namespaced ``gspo_dash.*``."""
    params = dict(info.config)
    params.update(
        {
            "gspo_dash.algorithm": info.algorithm,
            "gspo_dash.seq_eps_low": info.seq_eps_low,
            "gspo_dash.seq_eps_high": info.seq_eps_high,
            "gspo_dash.token_eps_low": info.token_eps_low,
            "gspo_dash.token_eps_high": info.token_eps_high,
            "gspo_dash.reduction": info.reduction,
        }
    )
    return params


def flatten_params(config: Mapping[str, Any]) -> dict[str, str]:
    """Nested dict -> {"a.b": "value"}, values as strings cut to MLflow's 6000 characters."""
    return {k: str(v)[:MAX_PARAM_VALUE_LENGTH] for k, v in schema.flatten(config, ".").items()}


def row_metrics(row: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(mlflow key, value) of every finite metric of a step-table row (extras included)."""
    out = []
    for col, value in row.items():
        if col in schema.STEP_KEY_COLUMNS or isinstance(value, str) or value is None:
            continue
        try:
            v = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            out.append((schema.mlflow_key(col), v))
    return out


def chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def get_or_create_experiment(client, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return exp.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # a concurrent creator won the race
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def find_run(client, experiment_id: str, gspo_run_id: str):
    """The MLflow run tagged with this gspo-dash run id, or None."""
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.`{TAG_RUN_ID}` = '{gspo_run_id}'", max_results=1
    )
    return runs[0] if runs else None


def log_params(client, run_id: str, params: Mapping[str, Any], *, new_run: bool = False) -> None:
    """Log params in batches of 100, skipping keys already logged (resume, sync)."""
    from mlflow.entities import Param

    existing = {} if new_run else client.get_run(run_id).data.params
    flat = flatten_params(params)
    todo = [Param(k, v) for k, v in flat.items() if k not in existing]
    for part in chunks(todo, MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=part)


class MlflowBackend:
    """The MLflow calls of one run, through ``MlflowClient`` with an explicit run id.

    Runs in a child process by default (see ``MlflowSink``), or in the sink's thread.
    """

    def __init__(self, tracking_uri: str):
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=tracking_uri)  # SQLite: migrates on first use
        self.tracking_uri = tracking_uri
        self.run_id: str | None = None

    def open(
        self,
        experiment: str,
        run_name: str,
        gspo_run_id: str,
        algorithm: str,
        params: Mapping[str, Any],
        resume_run_id: str | None,
        resume: bool,
    ) -> dict[str, Any]:
        from mlflow.entities import RunTag

        client = self.client
        exp_id = get_or_create_experiment(client, experiment)
        run = None
        if resume_run_id:
            try:
                run = client.get_run(resume_run_id)
            except Exception:  # noqa: BLE001 -- gone: look it up by tag, else start a new one
                run = None
        if run is None and resume and gspo_run_id:  # resumed, or synced meanwhile
            run = find_run(client, exp_id, gspo_run_id)
        tags = {
            TAG_RUN_ID: gspo_run_id,
            TAG_ALGORITHM: algorithm,
            TAG_SOURCE: "gspo_dash",
            "mlflow.runName": run_name,
        }
        new_run = run is None
        if new_run:
            run = client.create_run(exp_id, run_name=run_name or None, tags=tags)
        else:
            client.update_run(run.info.run_id, status="RUNNING")
            client.log_batch(run.info.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        self.run_id = run.info.run_id
        log_params(client, self.run_id, params, new_run=new_run)
        return {
            "tracking_uri": self.tracking_uri,
            "experiment": experiment,
            "experiment_id": exp_id,
            "run_id": self.run_id,
        }

    def log(self, metrics: list) -> int:
        """Log [key, value, timestamp ms, step] entries, at most 1000 per ``log_batch``."""
        from mlflow.entities import Metric

        for part in chunks(metrics, MAX_METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=[Metric(*m) for m in part])
        return len(metrics)

    def finish(self, status: str, artifact_dir: str | None) -> None:
        if artifact_dir and os.path.isdir(artifact_dir):
            self.client.log_artifacts(self.run_id, artifact_dir, artifact_path=ARTIFACT_PATH)
        self.client.set_terminated(self.run_id, status=_STATUS.get(status, "FINISHED"))


class _ChildBackend:
    """``MlflowBackend`` in a child process (``_CHILD_MAIN``; ``python -m training_hooks.mlflow_sink
    URI`` runs the same loop).

    One JSON line per call on its stdin, one JSON reply per line on its stdout. The child holds
    its own GIL: MLflow's Python-heavy client (SQLAlchemy, HTTP) and its import and SQLite
    migration never compete with the training thread for the parent's GIL, and it runs at the
    lowest CPU priority (``priority.idle_process``), so on a busy machine it lags rather than
    slowing training.
    It exits when the parent does (EOF on stdin).
    """

    def __init__(self, tracking_uri: str):
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, tracking_uri],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def call(self, op: str, **kwargs: Any) -> Any:
        self.proc.stdin.write(json.dumps({"op": op, **kwargs}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the MLflow child process exited (code {self.proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"MLflow {op}: {reply['error']}")
        return reply.get("result")

    def open(self, **kwargs: Any) -> dict[str, Any]:
        return self.call("open", **kwargs)

    def log(self, metrics: list) -> int:
        return self.call("log", metrics=metrics)

    def finish(self, status: str, artifact_dir: str | None) -> None:
        self.call("finish", status=status, artifact_dir=artifact_dir)
        self.stop()

    def stop(self, timeout: float = 10.0) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except Exception:  # noqa: BLE001
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


# The child's entry point: its priority drops before it imports mlflow or this module (the
# package's lazy __init__ and ``priority`` import nothing else), so only the interpreter's own
# start-up (about 0.1 s of CPU) runs at normal priority.
_CHILD_MAIN = """\
import sys
from training_hooks.priority import idle_process
idle_process()
from training_hooks.mlflow_sink import _serve
sys.exit(_serve(sys.argv[1]))
"""


def _serve(tracking_uri: str) -> int:
    """The child's loop: execute JSON calls on an ``MlflowBackend`` until stdin closes."""
    import sys
    import traceback

    replies = sys.stdout
    sys.stdout = sys.stderr  # nothing but replies on the pipe
    backend = None
    for line in sys.stdin:
        try:
            msg = json.loads(line)
            op = msg.pop("op")
            if backend is None:
                backend = MlflowBackend(tracking_uri)
            if op not in ("open", "log", "finish"):
                raise ValueError(f"unknown op {op!r}")
            reply = {"result": getattr(backend, op)(**msg)}
        except Exception as e:  # noqa: BLE001 -- reported to the parent, which records a fault
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            reply = {"error": detail[-2000:]}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


class MlflowSink:
    """One MLflow run per gspo-dash run; by default its client lives in a child process.

    ``process=True`` (default) runs ``MlflowBackend`` in a child process, so MLflow's CPU-bound
    Python never holds the training process's GIL; ``process=False`` runs it in the sink's
    thread. Either way the sink's thread buffers ``steps_per_batch`` steps per call.
    """

    name = "mlflow"

    def __init__(
        self,
        tracking_uri: str,
        *,
        experiment: str = "gspo-dash",
        run_name: str = "",
        gspo_run_id: str = "",
        algorithm: str = "",
        params: Mapping[str, Any] | None = None,
        resume_run_id: str | None = None,
        resume: bool = False,
        steps_per_batch: int = 50,
        artifact_dir: str | None = None,
        on_open: Callable[[dict[str, Any]], None] | None = None,
        process: bool = True,
    ):
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_name = run_name
        self.gspo_run_id = gspo_run_id
        self.algorithm = algorithm
        self.params = flatten_params(dict(params or {}))
        self.resume_run_id = resume_run_id
        self.resume = resume
        self.steps_per_batch = max(1, int(steps_per_batch))
        self.artifact_dir = artifact_dir
        self.on_open = on_open
        self.process = process
        self.backend: MlflowBackend | _ChildBackend | None = None
        self._child: _ChildBackend | None = None
        self.run_id: str | None = None
        self._pending: list = []  # [key, value, timestamp ms, step] not yet logged
        self._steps = 0  # steps in _pending

    def open(self) -> None:
        backend = _ChildBackend(self.tracking_uri) if self.process else None
        self._child = backend  # so that abort() can stop a child hung while opening
        try:
            if backend is None:
                backend = MlflowBackend(self.tracking_uri)
            details = backend.open(
                experiment=self.experiment,
                run_name=self.run_name,
                gspo_run_id=self.gspo_run_id,
                algorithm=self.algorithm,
                params=self.params,
                resume_run_id=self.resume_run_id,
                resume=self.resume,
            )
        except BaseException:
            if isinstance(backend, _ChildBackend):
                backend.kill()
            raise
        self.backend = backend
        self.run_id = details["run_id"]
        if self.on_open is not None:
            self.on_open(details)

    def write(self, record: StepRecord) -> None:
        ts = int(record.wall_time * 1000)
        for key, value in row_metrics(record.row):
            self._pending.append([key, value, ts, record.step])
        self._steps += 1

    def should_flush(self) -> bool:
        return self._steps >= self.steps_per_batch

    def flush(self) -> None:
        while self._pending:  # chunk by chunk, dropping each once MLflow has it (no duplicates)
            part = self._pending[:MAX_METRICS_PER_BATCH]
            self.backend.log(part)
            del self._pending[: len(part)]
        self._steps = 0

    def close(self, status: str) -> None:
        if self.backend is None:
            return
        self.flush()
        self.backend.finish(status, self.artifact_dir)

    def abort(self) -> None:
        """Called when the sink is abandoned (hung): stop the child process."""
        if self._child is not None:
            self._child.kill()


if __name__ == "__main__":
    import sys

    sys.exit(_serve(sys.argv[1]))
