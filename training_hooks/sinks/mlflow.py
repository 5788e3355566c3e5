"""MLflow sink: the step table's columns as MLflow metrics, batched, on the sink's own thread.

MLflow is slow (docs/benchmarks.md), so the sink buffers ``steps_per_batch`` steps per call and
splits each call under MLflow's limits (``MAX_*_PER_BATCH``). It may lag behind training; Parquet
is the source of truth and ``python -m training_hooks.sync`` replays a run from it. Opening a new
SQLite store migrates its schema: that happens in ``open``, on the sink's thread.

Metric keys are ``schema.mlflow_key(column)`` (``gspo_dash/loss``); non-finite values are skipped
(MLflow charts cannot draw them; ``nonfinite_count`` is logged). Timestamps are the step's
``wall_time`` in ms.

Fail fast: a tracking server that refuses connections or does not answer must not cost the close
timeout. For an http(s) URI the sink probes ``/health`` (``probe_tracking_server``) before opening
the run; while a call to the child process is outstanding for more than ``LIVENESS_EVERY_S`` it
probes again; and a failed call is followed by a probe. A server that does not answer makes the
sink raise ``SinkFailed``: it is off for the rest of the run (a ``failed`` fault in run.json, or
``open``), its child is killed, training goes on and ``close()`` does not wait for it; ``python -m training_hooks.sync`` replays the run later. The child also bounds MLflow's own
HTTP retries (``CHILD_HTTP_ENV``, unless the environment sets them).
"""

from __future__ import annotations

import collections
import http.client
import json
import math
import os
import select
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

from .. import schema
from .base import SinkFailed

if TYPE_CHECKING:
    from ..compute import StepRecord

MAX_METRICS_PER_BATCH = 1000  # mlflow.utils.validation.MAX_METRICS_PER_BATCH
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAGS_PER_BATCH = 100
MAX_TAG_VALUE_LENGTH = 5000  # MLflow accepts 8000 characters (5000 in older servers)
TAG_RUN_ID = "gspo_dash.run_id"
TAG_ALGORITHM = "gspo_dash.algorithm"
TAG_SOURCE = "gspo_dash.source"
ARTIFACT_PATH = "gspo_dash"
PROBE_TIMEOUT_S = 5.0  # a tracking server's /health must answer within this (connect, then read)
LIVENESS_EVERY_S = 2.0  # a call to the child outstanding this long: probe the server again
#: MLflow's HTTP settings in the child process, unless the environment sets them: fewer retries and
#: a shorter timeout than MLflow's defaults, so a dead server is noticed in seconds, not minutes.
CHILD_HTTP_ENV = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}

#: gspo-dash run status -> MLflow run status.
MLFLOW_STATUS = {
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


_ANNOUNCED: set[str] = set()  # the stores ``announce_store`` printed (once per process)


def announce_store(setting: Any, uri: str | None) -> str | None:
    """With ``mlflow=True`` (the user named no store), print once per process on stderr where
    the MLflow store is: the tracking URI and whence it came (``MLFLOW_TRACKING_URI`` or the
    default, a SQLite file in the working folder), and for a local SQLite store the ``mlruns``
    folder beside the working folder where MLflow puts the artifacts of an experiment it
    creates. Returns the line printed (None when nothing was)."""
    if setting is not True or uri is None or uri in _ANNOUNCED:
        return None
    _ANNOUNCED.add(uri)
    whence = (
        "from MLFLOW_TRACKING_URI"
        if os.environ.get("MLFLOW_TRACKING_URI")
        else "the default with mlflow=True"
    )
    line = f"gspo-dash: MLflow store {uri} ({whence})"
    if uri.startswith("sqlite:///"):
        mlruns = os.path.join(os.getcwd(), "mlruns")
        line += f"; MLflow puts the artifacts of an experiment it creates in {mlruns}"
    line += "; pass mlflow='<tracking URI>' to choose another"
    import sys

    print(line, file=sys.stderr, flush=True)
    return line


def probe_tracking_server(uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the tracking server at an http(s) ``uri`` is not answering (refused, timed out, reset),
    or None when it answered ``GET /health`` with anything (any status: it is alive) or ``uri`` is
    not http(s). Liveness only: no credentials are sent and TLS certificates are not checked.
    Proxies are those of the environment, as MLflow's own requests."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port else ""
    url = f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}/health"
    tls = ssl.create_default_context()
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=tls) as reply:
            reply.read(64)
    except urllib.error.HTTPError:
        return None  # an HTTP status: the server answered
    except (OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", None) or e
        return f"the tracking server {uri} does not answer ({reason}; probe of /health, {timeout_s:g} s)"
    return None


#: The child's MLflow log level unless the user's environment sets one: its INFO lines
#: ("Creating initial MLflow database tables...") would interleave with the training's output;
#: its warnings and errors still show.
CHILD_LOG_ENV = {"MLFLOW_LOGGING_LEVEL": "WARNING"}


def _child_env() -> dict[str, str]:
    """The child's environment: ours, with MLflow's HTTP retries bounded (``CHILD_HTTP_ENV``) and
    its INFO lines off (``CHILD_LOG_ENV``); a variable the user set wins."""
    return {**CHILD_HTTP_ENV, **CHILD_LOG_ENV, **os.environ}


def run_params(info) -> dict[str, Any]:
    """The MLflow params of a run: its config plus the run settings, namespaced ``gspo_dash.*``."""
    return {
        **info.config,
        "gspo_dash.algorithm": info.algorithm,
        "gspo_dash.seq_eps_low": info.seq_eps_low,
        "gspo_dash.seq_eps_high": info.seq_eps_high,
        "gspo_dash.token_eps_low": info.token_eps_low,
        "gspo_dash.token_eps_high": info.token_eps_high,
        "gspo_dash.reduction": info.reduction,
    }


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
    todo = [Param(k, v) for k, v in flatten_params(params).items() if k not in existing]
    for part in chunks(todo, MAX_PARAMS_PER_BATCH):
        client.log_batch(run_id, params=part)


@dataclass(frozen=True)
class MlflowRun:
    """Which MLflow run a gspo-dash run logs to; ``MlflowBackend.open`` finds or creates it."""

    experiment: str = "gspo-dash"
    """MLflow experiment (created if missing, restored if deleted)."""
    run_name: str = ""
    """MLflow run name (``mlflow.runName``)."""
    gspo_run_id: str = ""
    """The gspo-dash run id, tagged ``gspo_dash.run_id``: how a resumed run finds its MLflow run."""
    algorithm: str = ""
    """Tagged ``gspo_dash.algorithm``."""
    params: Mapping[str, str] = field(default_factory=dict)
    """Flat params (``flatten_params``); keys already logged are skipped."""
    resume_run_id: str | None = None
    """The MLflow run id this run logged to before (from its run.json), tried first."""
    resume: bool = False
    """Resuming: without ``resume_run_id``, look the run up by its ``gspo_dash.run_id`` tag."""


class MlflowBackend:
    """The MLflow calls of one run, through ``MlflowClient`` with an explicit run id.

    Runs in a child process by default (see ``MlflowSink``), or in the sink's thread.
    """

    def __init__(self, tracking_uri: str):
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=tracking_uri)  # SQLite: migrates on first use
        self.tracking_uri = tracking_uri
        self.run_id: str | None = None

    def open(self, spec: MlflowRun) -> dict[str, Any]:
        """Find (resume) or create the run ``spec`` names, tag it, log its params; its details."""
        from mlflow.entities import RunTag

        client = self.client
        exp_id = get_or_create_experiment(client, spec.experiment)
        run = None
        if spec.resume_run_id:
            try:
                run = client.get_run(spec.resume_run_id)
            except Exception:  # noqa: BLE001 -- gone: look it up by tag, else start a new one
                run = None
        if run is None and spec.resume and spec.gspo_run_id:  # resumed, or synced meanwhile
            run = find_run(client, exp_id, spec.gspo_run_id)
        tags = {
            TAG_RUN_ID: spec.gspo_run_id,
            TAG_ALGORITHM: spec.algorithm,
            TAG_SOURCE: "gspo_dash",
            "mlflow.runName": spec.run_name,
        }
        new_run = run is None
        if run is None:
            run = client.create_run(exp_id, run_name=spec.run_name or None, tags=tags)
        else:
            client.update_run(run.info.run_id, status="RUNNING")
            client.log_batch(run.info.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        self.run_id = run_id = run.info.run_id
        log_params(client, run_id, spec.params, new_run=new_run)
        return {
            "tracking_uri": self.tracking_uri,
            "experiment": spec.experiment,
            "experiment_id": exp_id,
            "run_id": run_id,
        }

    def _open_run_id(self) -> str:
        """The id of the run ``open`` found or created; a clear error before ``open``."""
        if self.run_id is None:
            raise RuntimeError("MlflowBackend: no MLflow run is open (call open() first)")
        return self.run_id

    def log(self, metrics: list) -> None:
        """Log [key, value, timestamp ms, step] entries, at most 1000 per ``log_batch``."""
        from mlflow.entities import Metric

        for part in chunks(metrics, MAX_METRICS_PER_BATCH):
            self.client.log_batch(self._open_run_id(), metrics=[Metric(*m) for m in part])

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Set run tags (a finding the recorder reported live: ``gspo_dash.finding.<code>``)."""
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:MAX_TAG_VALUE_LENGTH]) for k, v in tags.items()]
        for part in chunks(items, MAX_TAGS_PER_BATCH):
            self.client.log_batch(self._open_run_id(), tags=part)

    def finish(self, status: str, artifact_dir: str | None) -> None:
        run_id = self._open_run_id()
        if artifact_dir and os.path.isdir(artifact_dir):
            self.client.log_artifacts(run_id, artifact_dir, artifact_path=ARTIFACT_PATH)
        self.client.set_terminated(run_id, status=MLFLOW_STATUS.get(status, "FINISHED"))


class _ChildBackend:
    """``MlflowBackend`` in a child process (``_CHILD_MAIN``).

    One JSON line per call on its stdin, one JSON reply per line on its stdout. The child holds
    its own GIL: MLflow's Python-heavy client (SQLAlchemy, HTTP) and its import and SQLite
    migration never compete with the training thread for the parent's GIL.
    It exits when the parent does (EOF on stdin).
    """

    def __init__(self, tracking_uri: str, liveness: Callable[[], str | None] | None = None):
        import subprocess
        import sys

        self.liveness = liveness  # while a reply is late: why the server is gone, or None
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, tracking_uri],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=_child_env(),
        )
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None  # set by PIPE; Popen types them Optional
        self.stdin, self.stdout = stdin, stdout

    def call(self, op: str, **kwargs: Any) -> Any:
        self.stdin.write(json.dumps({"op": op, **kwargs}) + "\n")
        self.stdin.flush()
        self._await_reply()
        line = self.stdout.readline()
        if not line:
            raise RuntimeError(f"the MLflow child process exited (code {self.proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"MLflow {op}: {reply['error']}")
        return reply.get("result")

    def _await_reply(self) -> None:
        """Wait for the child's reply; every ``LIVENESS_EVERY_S`` without one, ask ``liveness``:
        a server that is gone kills the child and raises ``SinkFailed``. A slow child (a busy
        machine, a big upload) whose server answers is waited for."""
        while self.liveness is not None:
            try:
                ready, _, _ = select.select([self.stdout], [], [], LIVENESS_EVERY_S)
            except (OSError, ValueError):  # no select() on pipes here: wait in readline
                return
            if ready:
                return
            why = self.liveness()
            if why:
                self.kill()
                raise SinkFailed(why)

    def open(self, spec: MlflowRun) -> dict[str, Any]:
        return self.call("open", spec=asdict(spec))

    def log(self, metrics: list) -> None:
        self.call("log", metrics=metrics)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.call("set_tags", tags=dict(tags))

    def finish(self, status: str, artifact_dir: str | None) -> None:
        self.call("finish", status=status, artifact_dir=artifact_dir)
        self.stop()

    def stop(self, timeout: float = 10.0) -> None:
        try:
            self.stdin.close()
            self.proc.wait(timeout=timeout)
        except Exception:  # noqa: BLE001
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


# The child's entry point.
_CHILD_MAIN = """\
import sys
from training_hooks.sinks.mlflow import _serve
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
            if op not in ("open", "log", "set_tags", "finish"):
                raise ValueError(f"unknown op {op!r}")
            if op == "open":
                msg["spec"] = MlflowRun(**msg["spec"])
            reply = {"result": getattr(backend, op)(**msg)}
        except Exception as e:  # noqa: BLE001 -- reported to the parent, which records a fault
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            reply = {"error": detail[-2000:]}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


@dataclass(eq=False)
class MlflowSink:
    """One MLflow run per gspo-dash run; by default its client lives in a child process.

    ``process=True`` (default) runs ``MlflowBackend`` in a child process, so MLflow's CPU-bound
    Python never holds the training process's GIL; ``process=False`` runs it in the sink's
    thread. Either way the sink's thread buffers ``steps_per_batch`` steps per call. The fields
    from ``experiment`` to ``resume`` are ``MlflowRun``'s (``params`` may be nested: flattened).
    """

    name: ClassVar[str] = "mlflow"

    tracking_uri: str
    """Where MLflow runs are stored (``resolve_tracking_uri`` gives one)."""
    _: KW_ONLY
    experiment: str = "gspo-dash"
    run_name: str = ""
    gspo_run_id: str = ""
    algorithm: str = ""
    params: Mapping[str, Any] | None = None
    resume_run_id: str | None = None
    resume: bool = False
    steps_per_batch: int = 50
    """Steps buffered per ``log_batch`` call (each call is split under MLflow's limits)."""
    artifact_dir: str | None = None
    """Uploaded as the run's artifacts (under ``gspo_dash/``) at close; None: nothing."""
    on_open: Callable[[dict[str, Any]], None] | None = None
    """Called with the run's details (tracking URI, experiment, MLflow run id) once it is open."""
    process: bool = True
    """Run MLflow's client in a child process (True) or in the sink's thread (False)."""

    def __post_init__(self) -> None:
        self.params = flatten_params(dict(self.params or {}))
        self.steps_per_batch = max(1, int(self.steps_per_batch))
        self.backend: MlflowBackend | _ChildBackend | None = None
        self._child: _ChildBackend | None = None
        self._pending: list = []  # [key, value, timestamp ms, step] not yet logged
        self._steps = 0  # steps in _pending
        self._tags: collections.deque = collections.deque()  # (key, value) from other threads

    def spec(self) -> MlflowRun:
        """The MLflow run this sink logs to."""
        return MlflowRun(**{f.name: getattr(self, f.name) for f in fields(MlflowRun)})

    def open(self) -> None:
        """Start the child (it imports MLflow meanwhile), probe the server, open the run."""
        child = _ChildBackend(self.tracking_uri, self._gone) if self.process else None
        self._child = child  # so that abort() can stop a child hung while opening
        backend: MlflowBackend | _ChildBackend | None = child
        try:
            if why := probe_tracking_server(self.tracking_uri):
                raise SinkFailed(f"{why}; {self._replay_hint()}")
            if backend is None:
                backend = MlflowBackend(self.tracking_uri)
            details = backend.open(self.spec())
        except BaseException:
            if isinstance(backend, _ChildBackend):
                backend.kill()
            raise
        self.backend = backend
        if self.on_open is not None:
            self.on_open(details)

    def write(self, record: StepRecord) -> None:
        ts = int(record.wall_time * 1000)
        for key, value in row_metrics(record.materialized()[0]):
            self._pending.append([key, value, ts, record.step])
        self._steps += 1

    def should_flush(self) -> bool:
        return self._steps >= self.steps_per_batch

    def add_tags(self, tags: Mapping[str, str]) -> None:
        """Queue run tags, from any thread; they are set at the sink's next flush."""
        self._tags.extend(tags.items())  # (deque.extend is atomic: no lock needed)

    def flush(self) -> None:
        """Log the buffer chunk by chunk, dropping each once MLflow has it (no duplicates). A
        failed call whose server no longer answers raises ``SinkFailed``; otherwise the error
        propagates and the buffer is retried at the next flush."""
        backend = self.backend
        if backend is None:
            raise RuntimeError("MlflowSink: flush before open (no MLflow run to log to)")
        while self._pending:
            part = self._pending[:MAX_METRICS_PER_BATCH]
            try:
                backend.log(part)
            except SinkFailed:
                raise
            except Exception as e:
                if why := self._gone():
                    raise SinkFailed(why) from e
                raise
            del self._pending[: len(part)]
        self._steps = 0
        if self._tags:
            items = list(self._tags)
            backend.set_tags(dict(items))  # (a failure keeps them queued: retried next flush)
            for _ in items:
                self._tags.popleft()

    def close(self, status: str) -> None:
        if self.backend is None:
            return
        try:
            self.flush()
            self.backend.finish(status, self.artifact_dir)
        finally:
            if self._child is not None:
                self._child.stop()  # (already stopped after a successful finish)

    def _gone(self) -> str | None:
        """Why this sink cannot go on (its child exited, its server does not answer), or None."""
        child = self._child
        why: str | None
        if child is not None and child.proc.poll() is not None:
            why = f"the MLflow child process exited (code {child.proc.returncode})"
        else:
            why = probe_tracking_server(self.tracking_uri)
        return f"{why}; {self._replay_hint()}" if why else None

    def _replay_hint(self) -> str:
        return (
            "MLflow logging is off for the rest of this run (Parquet is complete); replay it with "
            f"`python -m training_hooks.sync ROOT --tracking-uri {self.tracking_uri}`"
        )

    def abort(self) -> None:
        """Called when the sink is abandoned (hung): stop the child process."""
        if self._child is not None:
            self._child.kill()
