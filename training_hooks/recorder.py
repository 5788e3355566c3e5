"""``RunRecorder``: attach to a GRPO/GSPO loop, one ``log_step`` per optimizer step.

    with RunRecorder(root="runs", name="gspo-lr1e-6", algorithm="gspo", config=cfg) as rec:
        for step in range(n):
            ...
            rec.log_step(step, rewards=rewards_P_G, logprobs=logp_B_T, old_logprobs=old_B_T,
                         mask=mask_B_T, loss=out, extra={"grad_norm": gn, "lr": lr})

``algorithm`` names the loss that trains (``gspo_metrics.spec.algorithm_label``: "gspo", "grpo",
"dapo", "cispo", ...); not given, it is "unknown". ``loss`` given as a ``LossOutput`` (any
registered loss's) also records its ``per_sequence["attenuation"]``.

``log_step`` validates (ValueError before anything is written), reduces on the tensors' device
(one host sync, for the data-dependent checks: an empty mask row, a non-finite input), starts
one host transfer and enqueues the step; background threads write Parquet (the source of truth)
and MLflow. A failing or hung sink is reported (a warning, once per sink, and
``run.json["faults"]``) and never stops training or the other sink.
"""

from __future__ import annotations

import atexit
import dataclasses
import getpass
import logging
import os
import secrets
import socket
import sys
import threading
import time
import warnings
import weakref
from typing import Any

import torch

from gspo_metrics.spec import UNKNOWN_ALGORITHM

from . import schema, storage
from .compute import Reduction, dist_info, reduce_step, skip_step_collectives
from .findings.dropped import DROPPED_SINK, dropped_kind
from .inputs import StepArgs, StepInputs
from .params import takes_params_of
from .recorder_settings import SETTING_SOURCES, RecorderSettings
from .schema import RunInfo, write_json_atomic
from .sinks import NullSink, ParquetSink, Sink, SinkWorker
from .sinks.findings import findings_sink
from .sinks.mlflow import announce_store, resolve_tracking_uri, run_params
from .tool_versions import installed_version

log = logging.getLogger("training_hooks")

_MAX_FAULTS_PER_SINK = 20
_DROP_WARNINGS = 3  # the first few dropped steps warn; run.json counts them all


def new_run_id(name: str) -> str:
    """``<name>-<UTC yyyymmdd-HHMMSS>-<4 hex>``: sortable, unique, safe as a folder name."""
    return f"{schema.slug(name)}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def library_versions() -> dict[str, str]:
    import numpy
    import pyarrow

    import gspo_metrics

    out = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "gspo_dash_schema": str(schema.SCHEMA_VERSION),
    }
    if dash := installed_version("gspo-dash"):
        out["gspo_dash"] = dash
    out["gspo_metrics"] = getattr(gspo_metrics, "__version__", out.get("gspo_dash", ""))
    return out


class RunState:
    """The run's ``RunInfo`` behind a lock; rank 0 persists it to ``run.json``."""

    def __init__(self, run_dir: str, info: RunInfo, *, persist: bool):
        self.run_dir = run_dir
        self.info = info
        self.persist = persist
        self.lock = threading.Lock()
        self._warned: set[str] = set()

    def write(self) -> None:
        """Heartbeat: set ``updated_at`` and rewrite ``run.json`` atomically (rank 0 only)."""
        if not self.persist:
            return
        with self.lock:
            self.info.updated_at = time.time()
            data = self.info.to_json()
        write_json_atomic(storage.join(self.run_dir, schema.RUN_JSON), data)

    def fault(self, sink: str, kind: str, message: str, *, warn: bool = True) -> None:
        """Record a sink failure in run.json (bounded) and warn once per sink (unless ``warn``
        is False: the caller warns in its own words)."""
        now = time.time()
        with self.lock:
            faults = self.info.faults
            mine = [f for f in faults if f.get("sink") == sink]
            if len(mine) < _MAX_FAULTS_PER_SINK:
                faults.append({"sink": sink, "kind": kind, "error": message[:2000], "time": now})
            else:
                mine[-1]["suppressed"] = int(mine[-1].get("suppressed", 0)) + 1
            first = warn and sink not in self._warned
            self._warned.add(sink)
        if first:
            warnings.warn(
                f"gspo-dash: the {sink} sink failed ({kind}: {message.splitlines()[-1][:300]}); "
                "training continues and the other sinks keep recording; see run.json 'faults'",
                RuntimeWarning,
                stacklevel=2,
            )
        if warn:  # (else the caller warns in its own words: one message, not two)
            log.warning("gspo-dash %s sink %s: %s", sink, kind, message)


class RunRecorder:
    """Record every step's diagnostics of a GRPO/GSPO run to Parquet (and MLflow).

    ``RunRecorder(root="runs", name=None, algorithm="unknown", config=None, mlflow=None, *,
    run_id=None, seq_eps=..., ...)``: the arguments are the fields of ``RecorderSettings``, each
    documented there, and declared only there: ``takes_params_of`` gives ``__init__`` their
    signature, so mypy checks the names and types at call sites against the dataclass itself
    (``RunRecorder.from_settings`` takes a built one). Use it as a context manager, or call
    ``close``.
    """

    @takes_params_of(RecorderSettings)
    def __init__(self, s: RecorderSettings) -> None:
        self._start(s)

    @classmethod
    def from_settings(cls, settings: RecorderSettings) -> RunRecorder:
        """A recorder with these settings (``RunRecorder(**fields)`` builds them from keywords)."""
        rec = cls.__new__(cls)
        rec._start(settings)
        return rec

    def _start(self, s: RecorderSettings) -> None:
        self.settings = s
        self.tracking_uri = resolve_tracking_uri(s.mlflow)
        self._init_fields(s)
        if self.is_main:
            announce_store(s.mlflow, self.tracking_uri)  # mlflow=True: where, printed once
        self._join_run(s)  # distributed: every rank takes rank 0's run id
        self.state = RunState(self.run_dir, self._run_info(s), persist=self.is_main)
        parquet_ok = self._create_folders()
        self._workers = self._start_sinks(s, parquet_ok)
        _LIVE.add(self)

    # ------------------------------------------------------------------ setup steps
    def _init_fields(self, s: RecorderSettings) -> None:
        self.algorithm = s.algorithm
        self.group_size = s.group_size  # the run's G: from the settings, the run, or step one
        self.distributed, self.rank, self.world_size = dist_info(s.distributed)
        self.is_main = self.rank == 0
        self.resumed = False
        self.last_step: int | None = None  # the run's largest step (a resumed run's included)
        self._logged_step: int | None = None  # the last step this recorder logged
        self._dropped = 0  # steps refused after the first (``_drop_step``)
        self._device: torch.device | None = None  # the last recorded step's device
        self._closed = False
        self._lock = threading.Lock()
        self._workspace: dict = {}  # reused (B, T) scratch buffers of sequence_diagnostics
        self._compute_lock = threading.Lock()

    def _join_run(self, s: RecorderSettings) -> None:
        """The run's id (rank 0's under ``torch.distributed``) and folder."""
        run_id = s.run_id or new_run_id(s.run_name)
        if self.distributed:  # one run id for every rank: rank 0's
            import torch.distributed as dist

            box = [run_id]
            dist.broadcast_object_list(box, src=0)
            run_id = box[0]
        self.run_id = run_id
        self.run_dir = storage.join(s.root, run_id)
        # the steps' reduction (on the device; over ranks when distributed)
        self._reduction = Reduction(
            *s.clip_ranges,
            s.token_samples,
            None if self.distributed else False,
            run_id,
            s.algorithm,
        )

    def _run_info(self, s: RecorderSettings) -> RunInfo:
        """This run's ``RunInfo``: a new one, or the one on disk when resuming."""
        now = time.time()
        seq_eps, token_eps = s.clip_ranges
        info = RunInfo(
            run_id=self.run_id,
            name=s.run_name,
            algorithm=s.algorithm,
            seq_eps_low=seq_eps[0],
            seq_eps_high=seq_eps[1],
            token_eps_low=token_eps[0],
            token_eps_high=token_eps[1],
            reduction=s.reduction,
            group_size=s.group_size,
            config=s.config,
            versions=library_versions(),
            created_at=now,
            updated_at=now,
            status=schema.STATUS_RUNNING,
            host=socket.gethostname(),
            pid=os.getpid(),
            flush_interval_s=s.flush_interval_s,
        )
        # which of ε and the reduction the user gave; the others are defaults, and say so
        info.other[SETTING_SOURCES] = s.setting_sources
        if storage.exists(storage.join(self.run_dir, schema.RUN_JSON)):
            info = self._resume(info)  # (the run's own settings and their sources kept)
        info.other.setdefault("world_size", self.world_size)
        try:
            info.other.setdefault("user", getpass.getuser())
        except Exception:  # noqa: BLE001
            pass
        return info

    def _create_folders(self) -> bool:
        """Rank 0 creates the run's folders and writes run.json; False (and a fault) if it
        cannot. Distributed, every rank waits for it."""
        ok = True
        if self.is_main:
            try:
                for table in schema.TABLE_DIRS:  # folders exist as soon as the recorder does
                    storage.makedirs(storage.join(self.run_dir, table))
                self.state.write()
            except OSError as e:
                ok = False
                self.state.fault("parquet", "open", f"{type(e).__name__}: {e}")
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()  # rank 0 has created the run folder
        return ok

    def _start_sinks(self, s: RecorderSettings, parquet_ok: bool) -> list[SinkWorker]:
        """Parquet (every rank), MLflow and the user's sinks (rank 0), each on its thread."""
        # imported once here, not on the writer thread while training runs (pyarrow imports
        # pandas lazily when it first builds an array from a list: about a second of GIL)
        import pandas  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        sinks: list[Sink] = []
        self.parquet = None
        if parquet_ok:
            self.parquet = ParquetSink(
                self.run_dir,
                rank=self.rank,
                write_steps=self.is_main,
                steps_per_file=s.steps_per_file,
                heartbeat=self.state.write if self.is_main else None,
            )
            sinks.append(self.parquet)
        self.mlflow_sink = None
        if self.is_main and self.tracking_uri is not None:
            self.mlflow_sink = self._mlflow_sink(s, self.tracking_uri)
        if self.is_main and s.findings_every:  # closed before MLflow: its last tags get there
            sinks.append(findings_sink(self.state, s, self.mlflow_sink))
        if self.mlflow_sink is not None:
            sinks.append(self.mlflow_sink)
        if self.is_main:
            sinks += s.sinks
        workers = [
            SinkWorker(
                sink,
                flush_interval_s=s.flush_interval_s,
                queue_size=s.queue_size,
                on_fault=self.state.fault,
            )
            for sink in sinks
        ]
        for w in workers:
            w.start()
        return workers

    def _mlflow_sink(self, s: RecorderSettings, tracking_uri: str) -> Sink:
        from .sinks.mlflow import MlflowSink

        info = self.state.info
        same_store = info.mlflow.get("tracking_uri") == tracking_uri
        return MlflowSink(
            tracking_uri,
            experiment=s.experiment,
            run_name=s.run_name,
            gspo_run_id=self.run_id,
            algorithm=self.algorithm,
            params=run_params(info),
            resume_run_id=info.mlflow.get("run_id") if same_store else None,
            resume=self.resumed,
            steps_per_batch=s.mlflow_steps_per_batch,
            artifact_dir=self.run_dir if s.mlflow_artifacts else None,
            on_open=self._on_mlflow_open,
            process=s.mlflow_process,
        )

    def _resume(self, info: RunInfo) -> RunInfo:
        old = schema.read_run_info(self.run_dir)
        if info.algorithm == UNKNOWN_ALGORITHM and old.algorithm != UNKNOWN_ALGORITHM:
            # not told: the run's own label holds (the steps appended carry it too)
            info.algorithm = self.algorithm = old.algorithm
            self._reduction = dataclasses.replace(self._reduction, algorithm=old.algorithm)
        # a run recorded as unknown takes the label a resume states; a stated label stays
        if old.algorithm not in (info.algorithm, UNKNOWN_ALGORITHM):
            raise ValueError(
                f"run {old.run_id!r} was recorded with algorithm {old.algorithm!r}; "
                f"cannot resume it as {info.algorithm!r}"
            )
        self.resumed = True
        old.algorithm = info.algorithm  # (equal, or stated now for a run recorded as unknown)
        old.status = schema.STATUS_RUNNING
        old.ended_at = None
        old.updated_at = info.updated_at
        old.host, old.pid = info.host, info.pid
        old.versions = info.versions
        old.flush_interval_s = info.flush_interval_s
        if info.config:
            old.config = info.config
        if old.group_size is None:
            old.group_size = info.group_size
        if self.group_size is None:
            self.group_size = old.group_size
        old.other.setdefault("resumed_at", []).append(info.created_at)
        old.summary = None  # (new steps will follow: made again at close)
        self.last_step = old.last_step
        return old

    def _on_mlflow_open(self, details: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.info.mlflow = dict(details)

    # ------------------------------------------------------------------ the API
    @takes_params_of(StepArgs)
    def log_step(self, args: StepArgs) -> None:
        """Record one optimizer step (see the module docstring). Never waits on disk or network.

        ``log_step(step, *, rewards, logprobs, old_logprobs, mask, ...)``: the arguments are the
        fields of ``training_hooks.inputs.StepArgs``, declared only there (name, type, default,
        shape and meaning; listed below), B = P*G sequences ordered group by group. ``token_texts``
        are read when the step is written, after this returns: leave them unchanged. Bad input
        raises ValueError before anything is recorded on the first call (the user is watching);
        after it, a refused value drops that step, with a RuntimeWarning and a fault in run.json,
        and training goes on (``strict=True``: raises). Distributed: every rank must call it for
        every step (it runs collectives). ``rollout`` and ``policy_lag`` are null in the step
        table when not given; ``sampler_logprobs`` give the sampler/trainer mismatch
        (``sampler_kl_mean``, ``sampler_logp_abs_diff_max``).
        """
        if self._closed:
            raise RuntimeError(f"run {self.run_id!r} is closed; log_step after close()")
        try:
            inputs = self._checked_inputs(args)
            self._reduce(inputs)
        except (ValueError, TypeError) as e:  # after the first step: dropped, unless strict
            if self._logged_step is None or self.settings.strict:
                raise
            self.drop_step(args.step, e, device=getattr(args.logprobs, "device", None))
            return
        self._logged(inputs)

    def _logged(self, inputs: StepInputs) -> None:
        """After a step was recorded: the run's group size and log-prob dtypes (its first
        step's), its last step."""
        if self.group_size is None:
            self.group_size = inputs.group_size
            with self.state.lock:
                self.state.info.group_size = inputs.group_size
        if self._logged_step is None:
            self._note_dtypes(inputs)
        self._logged_step = inputs.step
        self.last_step = inputs.step if self.last_step is None else max(self.last_step, inputs.step)
        with self.state.lock:
            self.state.info.last_step = self.last_step

    def _note_dtypes(self, inputs: StepInputs) -> None:
        """run.json's ``other``: ``logprob_dtype`` (of ``logprobs``, e.g. "bfloat16") and, when
        it differs, ``old_logprob_dtype``, as this recorder's first step gave them: the grid the
        ratios lie on (its resolution against ε: the step table's ``logprob_bits`` and
        ``seq_log_ratio_abs_min_nonzero``, the Health check ``ratio_resolution_coarse``)."""
        new = str(inputs.logprobs.dtype).removeprefix("torch.")
        old = str(inputs.old_logprobs.dtype).removeprefix("torch.")
        with self.state.lock:
            other = self.state.info.other
            other["logprob_dtype"] = new
            if old != new:
                other["old_logprob_dtype"] = old
            else:
                other.pop("old_logprob_dtype", None)

    def _checked_inputs(self, args: StepArgs) -> StepInputs:
        """``StepInputs.check`` of one call, and its step after the last one logged."""
        inputs = StepInputs.check(args, group_size=self.group_size)
        self._check_step_order(inputs.step)
        return inputs

    def drop_step(self, step: Any, error: Exception, *, device: Any = None) -> None:
        """Drop a step that could not be recorded after the first one (``log_step`` refused its
        inputs; a trainer hook could not assemble them): a fault in run.json (``sink``
        "log_step", ``kind`` "step N dropped", the reason), a RuntimeWarning for the first few,
        and the step's collectives taken with nothing to add (distributed: no other rank waits
        on this one; ``device``: the step's, else the last recorded step's). run.json is rank
        0's: another rank's drop is its warning and its log line."""
        reason = f"{type(error).__name__}: {error}"
        with self.state.lock:
            self._dropped += 1
            n = self._dropped
        self.state.fault(DROPPED_SINK, dropped_kind(step), reason, warn=False)
        if n <= _DROP_WARNINGS:
            more = (
                "; further dropped steps are counted in run.json, not warned"
                if n == _DROP_WARNINGS
                else ""
            )
            warnings.warn(
                f"gspo-dash: step {step} was not recorded ({reason.splitlines()[0][:300]}); "
                f"training continues; run.json 'faults' keeps it (strict=True raises instead){more}",
                RuntimeWarning,
                stacklevel=3,  # the caller of log_step
            )
        device = device if isinstance(device, torch.device) else self._device
        if device is not None:
            skip_step_collectives(self._reduction, device)

    def _check_step_order(self, step: int) -> None:
        """Steps only grow within one recorder: a step at or below the last one it logged is a
        ValueError naming both. (A resumed run starts afresh: the steps it logs again supersede
        the earlier rows of those steps, ``training_hooks.supersede``.)"""
        last = self._logged_step
        if last is not None and step <= last:
            raise ValueError(
                f"step {step} is at or below the last step logged, {last}: steps must increase "
                "(one log_step per optimizer step); nothing was recorded for this call"
            )

    def _reduce(self, inputs: StepInputs) -> None:
        """Reduce the step on its tensors' device and hand it to the sinks."""
        with self._compute_lock:  # the workspace buffers are not shareable between threads
            record = reduce_step(inputs, self._reduction, self._workspace)
        self._device = inputs.logprobs.device
        for w in self._workers:
            w.put(record)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Persist everything logged so far (waits up to ``timeout`` s per sink). True if done."""
        return all([w.flush(timeout) for w in self._workers])

    @property
    def faults(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return [dict(f) for f in self.state.info.faults]

    def close(self, status: str | None = None) -> None:
        """Flush and close every sink; status ``finished`` (default) or ``failed``.

        Bounded: a hung sink is abandoned after ``close_timeout_s`` (reported in run.json).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _LIVE.discard(self)
        status = status or schema.STATUS_FINISHED
        if status not in schema.STATUSES:
            raise ValueError(f"status must be one of {schema.STATUSES}, got {status!r}")
        timeout = self.settings.close_timeout_s
        parquet_workers = [w for w in self._workers if w.sink is self.parquet]
        other_workers = [w for w in self._workers if w.sink is not self.parquet]
        for w in parquet_workers:
            w.close(status, timeout)
        if self.distributed and status == schema.STATUS_FINISHED:
            self._barrier()  # every rank's parts are compacted before rank 0 uploads them
        if self.is_main and self.parquet is not None:
            self._summarise()
        with self.state.lock:
            self.state.info.status = status
            self.state.info.ended_at = time.time()
        self._write_state()  # final status on disk before the (slow) MLflow upload
        if other_workers:
            for w in other_workers:
                w.close(status, timeout)
            self._write_state()  # with the MLflow run id and any fault raised while closing

    def _summarise(self) -> None:
        """The run's summary (``training_hooks.run_summary``) into run.json, from its step table as
        closed (parts compacted), for the dashboard's Runs page. Never fails the close."""
        from .run_summary import try_summarise_run

        summary, why = try_summarise_run(self.run_dir, self.state.info)
        if why is not None:
            log.info("gspo-dash: no run summary for %s (%s)", self.run_id, why)
        with self.state.lock:
            self.state.info.summary = summary

    def _barrier(self) -> None:
        """Wait for the other ranks, at most ``close_timeout_s`` (a dead rank must not hang us)."""
        import datetime

        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            work = dist.barrier(async_op=True)
            work.wait(timeout=datetime.timedelta(seconds=self.settings.close_timeout_s))
        except Exception as e:  # noqa: BLE001
            self.state.fault("distributed", "barrier", f"{type(e).__name__}: {e}")

    def _write_state(self) -> None:
        try:
            self.state.write()
        except OSError as e:
            self.state.fault("parquet", "run.json", f"{type(e).__name__}: {e}")

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(schema.STATUS_FAILED if exc_type is not None else schema.STATUS_FINISHED)

    def __repr__(self) -> str:
        return f"RunRecorder(run_id={self.run_id!r}, run_dir={self.run_dir!r}, rank={self.rank})"


_LIVE: weakref.WeakSet[RunRecorder] = weakref.WeakSet()


@atexit.register
def _close_live_recorders() -> None:
    """A recorder never closed: close it at exit (failed if an exception ended the program)."""
    failed = getattr(sys, "last_type", None) is not None or getattr(sys, "last_exc", None)
    for rec in list(_LIVE):
        try:
            rec.close(schema.STATUS_FAILED if failed else schema.STATUS_FINISHED)
        except Exception:  # noqa: BLE001
            pass


__all__ = ["NullSink", "ParquetSink", "RecorderSettings", "RunRecorder", "RunState", "SinkWorker"]
