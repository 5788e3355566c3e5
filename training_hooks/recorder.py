"""``RunRecorder``: attach to a GRPO/GSPO loop, one ``log_step`` per optimizer step.

    with RunRecorder(root="runs", name="gspo-lr1e-6", algorithm="gspo", config=cfg) as rec:
        for step in range(n):
            ...
            rec.log_step(step, rewards=rewards_P_G, logprobs=logp_B_T, old_logprobs=old_B_T,
                         mask=mask_B_T, loss=out, extra={"grad_norm": gn, "lr": lr})

``log_step`` validates (ValueError before anything is written), reduces on the tensors' device,
starts one host transfer and enqueues the step; background threads write Parquet (the source of
truth) and MLflow. A failing or hung sink is reported (a warning, once per sink, and
``run.json["faults"]``) and never stops training or the other sink.

On a GPU the reductions are queued on the device (one host sync, for the data-dependent checks:
an empty mask row, a non-finite input). On the CPU they are one call of the fused numba kernel
(``gspo_metrics.fused``, loaded on a background thread when the recorder starts), and when torch
leaves a core spare, large steps are copied and reduced on a background thread at idle priority
instead (``deferred``).
"""

from __future__ import annotations

import atexit
import dataclasses
import getpass
import logging
import math
import os
import re
import secrets
import socket
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gspo_metrics.diagnostics import check_diagnostics_inputs, fused_available

from . import schema
from .compute import (
    DEFAULT_SEQ_EPS,
    DEFAULT_TOKEN_EPS,
    StepRecord,
    _dist_info,
    _loss_tensor,
    check_step_inputs,
    compute_step,
)
from .deferred import DeferredCompute, SnapshotSlot
from .schema import RunInfo, write_json_atomic
from .sinks import NullSink, ParquetSink, Sink, SinkWorker
from .sinks.mlflow import resolve_tracking_uri, run_params

log = logging.getLogger("training_hooks")

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MAX_FAULTS_PER_SINK = 20


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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
    try:
        from importlib.metadata import version

        out["gspo_dash"] = version("gspo-dash")
    except Exception:  # noqa: BLE001
        pass
    try:  # the fused CPU kernel's compiler, when installed (read without importing it)
        out["numba"] = version("numba")
    except Exception:  # noqa: BLE001
        pass
    out["gspo_metrics"] = getattr(gspo_metrics, "__version__", out.get("gspo_dash", ""))
    return out


def _config_dict(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "__dict__"):  # argparse.Namespace and friends
        return dict(vars(config))
    raise ValueError(
        f"config must be a dict, a dataclass or a namespace, got {type(config).__name__}"
    )


def _check_eps_pair(name: str, eps: Any) -> tuple[float, float]:
    if not isinstance(eps, tuple | list) or len(eps) != 2:
        raise ValueError(f"{name} must be a pair (eps_low, eps_high), got {eps!r}")
    lo, hi = (float(e) for e in eps)
    if not (0.0 <= lo < 1.0 and hi >= 0.0 and math.isfinite(hi)):
        raise ValueError(f"{name} must have 0 <= eps_low < 1 and eps_high >= 0, got {eps!r}")
    return lo, hi


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
        write_json_atomic(os.path.join(self.run_dir, schema.RUN_JSON), data)

    def fault(self, sink: str, kind: str, message: str) -> None:
        """Record a sink failure in run.json (bounded) and warn once per sink."""
        now = time.time()
        with self.lock:
            faults = self.info.faults
            mine = [f for f in faults if f.get("sink") == sink]
            if len(mine) < _MAX_FAULTS_PER_SINK:
                faults.append({"sink": sink, "kind": kind, "error": message[:2000], "time": now})
            else:
                mine[-1]["suppressed"] = int(mine[-1].get("suppressed", 0)) + 1
            first = sink not in self._warned
            self._warned.add(sink)
        if first:
            warnings.warn(
                f"gspo-dash: the {sink} sink failed ({kind}: {message.splitlines()[-1][:300]}); "
                "training continues and the other sinks keep recording; see run.json 'faults'",
                RuntimeWarning,
                stacklevel=2,
            )
        log.warning("gspo-dash %s sink %s: %s", sink, kind, message)


class RunRecorder:
    """Record every step's diagnostics of a GRPO/GSPO run to Parquet (and MLflow).

    Args:
        root: folder holding one sub-folder per run (``root/<run_id>``).
        name: human-readable run name (default: the algorithm).
        algorithm: what trains ("grpo", "gspo", ...); both clip units are computed anyway.
        config: the run's hyper-parameters (dict, dataclass or namespace); stored in run.json and
            logged as MLflow params.
        mlflow: None/False (off), True (``MLFLOW_TRACKING_URI`` or ``sqlite:///mlflow.db`` in the
            working directory), or a tracking URI.
        run_id: resume this run if ``root/<run_id>`` exists (append, status back to running),
            else start a new run with this id. Default: ``<name>-<time>-<hex>``.
        seq_eps: GSPO's sequence-unit clip range (eps_low, eps_high).
        token_eps: GRPO's token-unit clip range (eps_low, eps_high).
        reduction: the loss reduction, recorded in run.json ("sum", "token_mean", ...).
        group_size: G; checked against ``rewards.shape[1]`` (default: taken from the first step).
        flush_interval_s: Parquet parts and the run.json heartbeat are written at least this
            often, so a ``kill -9`` loses at most this much.
        steps_per_file: steps buffered per Parquet part.
        token_samples: per step, store the per-token log-ratios of this many sequences (spread
            evenly over the batch) in ``tokens/``; 0 (default) turns the table off.
        experiment: the MLflow experiment name.
        mlflow_steps_per_batch: steps buffered per MLflow ``log_batch`` call.
        mlflow_artifacts: upload the run folder (Parquet, run.json) to MLflow at close.
        mlflow_process: run the MLflow client in a child process (default), so its Python never
            holds this process's GIL; False runs it in the sink's thread.
        close_timeout_s: how long ``close`` waits for each sink before abandoning it.
        sinks: extra ``Sink`` objects, each run on its own thread like the built-in ones.
        distributed: None (auto: use ``torch.distributed`` when initialised), or False.
        compute_thread: CPU tensors of at least ``defer_min_elements`` (B * T), one process:
            ``log_step`` checks the step and copies its tensors, and a background thread
            reduces the copy at idle priority (``training_hooks.deferred``), as a GPU would queue
            the work. None (default): on when torch uses fewer intra-op threads than the process
            has cores (a spare core to reduce on); when it uses them all, a background reduction
            only competes with training (bench/bench_hooks.py), so the caller reduces. GPU
            tensors and ``torch.distributed`` always reduce on the caller's thread (on the
            device).
    """

    defer_min_elements = 1 << 16  # smaller CPU steps cost ~1 ms of op overhead: reduce in place

    def __init__(
        self,
        root: str | os.PathLike = "runs",
        name: str | None = None,
        algorithm: str = "gspo",
        config: Any = None,
        mlflow: bool | str | None = None,
        *,
        run_id: str | None = None,
        seq_eps: tuple[float, float] = DEFAULT_SEQ_EPS,
        token_eps: tuple[float, float] = DEFAULT_TOKEN_EPS,
        reduction: str = "sum",
        group_size: int | None = None,
        flush_interval_s: float = 5.0,
        steps_per_file: int = 100,
        token_samples: int = 0,
        experiment: str = "gspo-dash",
        mlflow_steps_per_batch: int = 50,
        mlflow_artifacts: bool = True,
        mlflow_process: bool = True,
        close_timeout_s: float = 60.0,
        queue_size: int = 1000,
        sinks: Sequence[Sink] = (),
        distributed: bool | None = None,
        compute_thread: bool | None = None,
    ):
        if not isinstance(algorithm, str) or not algorithm:
            raise ValueError(f"algorithm must be a non-empty string, got {algorithm!r}")
        name = name if name is not None else algorithm
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self.seq_eps = _check_eps_pair("seq_eps", seq_eps)
        self.token_eps = _check_eps_pair("token_eps", token_eps)
        if group_size is not None and (not isinstance(group_size, int) or group_size < 1):
            raise ValueError(f"group_size must be a positive int, got {group_size!r}")
        if not flush_interval_s > 0:
            raise ValueError(f"flush_interval_s must be > 0, got {flush_interval_s!r}")
        if not isinstance(token_samples, int) or token_samples < 0:
            raise ValueError(f"token_samples must be an int >= 0, got {token_samples!r}")
        if run_id is not None and not _RUN_ID_RE.match(str(run_id)):
            raise ValueError(
                f"run_id {run_id!r} must be 1-128 characters of letters, digits, '.', '_', '-'"
            )
        self.algorithm = algorithm
        self.group_size = group_size
        self.token_samples = token_samples
        self.flush_interval_s = float(flush_interval_s)
        self.close_timeout_s = float(close_timeout_s)
        self.tracking_uri = resolve_tracking_uri(mlflow)
        config = _config_dict(config)

        dist_on, self.rank, self.world_size = _dist_info(distributed)
        self.distributed = dist_on
        root = os.fspath(root)
        run_id = run_id or new_run_id(name)
        if dist_on:  # one run id for every rank: rank 0's
            import torch.distributed as dist

            box = [run_id]
            dist.broadcast_object_list(box, src=0)
            run_id = box[0]
        self.run_id = run_id
        self.root = root
        self.run_dir = os.path.join(root, run_id)
        self.is_main = self.rank == 0
        self._closed = False
        self._lock = threading.Lock()
        self.last_step: int | None = None
        self._workspace: dict = {}  # reused (B, T) scratch buffers of sequence_diagnostics
        self._compute_lock = threading.Lock()
        self._log_step_cpu_s = 0.0  # CPU time spent inside log_step (the caller's thread)
        self._steps_logged = 0

        now = time.time()
        info = RunInfo(
            run_id=run_id,
            name=name,
            algorithm=algorithm,
            seq_eps_low=self.seq_eps[0],
            seq_eps_high=self.seq_eps[1],
            token_eps_low=self.token_eps[0],
            token_eps_high=self.token_eps[1],
            reduction=reduction,
            group_size=group_size,
            config=config,
            versions=library_versions(),
            created_at=now,
            updated_at=now,
            status=schema.STATUS_RUNNING,
            host=socket.gethostname(),
            pid=os.getpid(),
            flush_interval_s=self.flush_interval_s,
        )
        self.resumed = False
        existing = os.path.join(self.run_dir, schema.RUN_JSON)
        if os.path.exists(existing):
            info = self._resume(info, existing)
        info.other.setdefault("world_size", self.world_size)
        try:
            info.other.setdefault("user", getpass.getuser())
        except Exception:  # noqa: BLE001
            pass
        self.state = RunState(self.run_dir, info, persist=self.is_main)

        # --- sinks: Parquet (every rank), MLflow (rank 0), user sinks (rank 0)
        # imported once here, not on the writer thread while training runs (pyarrow imports
        # pandas lazily when it first builds an array from a list: about a second of GIL)
        import pandas  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        self._workers: list[SinkWorker] = []
        parquet_ok = True
        if self.is_main:
            try:
                for table in schema.TABLE_DIRS:  # folders exist as soon as the recorder does
                    os.makedirs(os.path.join(self.run_dir, table), exist_ok=True)
                self.state.write()
            except OSError as e:
                parquet_ok = False
                self.state.fault("parquet", "open", f"{type(e).__name__}: {e}")
        if dist_on:
            import torch.distributed as dist

            dist.barrier()  # rank 0 has created the run folder
        if parquet_ok:
            self.parquet = ParquetSink(
                self.run_dir,
                rank=self.rank,
                write_steps=self.is_main,
                steps_per_file=steps_per_file,
                heartbeat=self.state.write if self.is_main else None,
            )
            self._workers.append(self._worker(self.parquet, queue_size))
        else:
            self.parquet = None
        self.mlflow_sink = None
        if self.is_main and self.tracking_uri is not None:
            from .sinks.mlflow import MlflowSink

            self.mlflow_sink = MlflowSink(
                self.tracking_uri,
                experiment=experiment,
                run_name=name,
                gspo_run_id=run_id,
                algorithm=algorithm,
                params=run_params(info),
                resume_run_id=info.mlflow.get("run_id")
                if info.mlflow.get("tracking_uri") == self.tracking_uri
                else None,
                resume=self.resumed,
                steps_per_batch=mlflow_steps_per_batch,
                artifact_dir=self.run_dir if mlflow_artifacts else None,
                on_open=self._on_mlflow_open,
                process=mlflow_process,
            )
            self._workers.append(self._worker(self.mlflow_sink, queue_size))
        if self.is_main:
            for s in sinks:
                self._workers.append(self._worker(s, queue_size))
        for w in self._workers:
            w.start()
        self._deferred = None
        if compute_thread is None:
            compute_thread = torch.get_num_threads() < _usable_cores()
        if compute_thread and not dist_on:
            self._deferred = DeferredCompute(self._forward, self.state.fault)
        # Load the fused CPU kernel (numba: ~1 s from its disk cache, a few seconds the first
        # time on a machine) while the caller sets up its model, not in the first log_step.
        threading.Thread(target=fused_available, name="gspo-fused-load", daemon=True).start()
        _LIVE.add(self)

    # ------------------------------------------------------------------ setup helpers
    def _worker(self, sink: Sink, queue_size: int) -> SinkWorker:
        return SinkWorker(
            sink,
            flush_interval_s=self.flush_interval_s,
            queue_size=queue_size,
            on_fault=self.state.fault,
        )

    def _resume(self, info: RunInfo, path: str) -> RunInfo:
        old = schema.read_run_info(self.run_dir)
        if old.algorithm != info.algorithm:
            raise ValueError(
                f"run {old.run_id!r} was recorded with algorithm {old.algorithm!r}; "
                f"cannot resume it as {info.algorithm!r}"
            )
        self.resumed = True
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
        self.last_step = old.last_step
        return old

    def _on_mlflow_open(self, details: dict[str, Any]) -> None:
        with self.state.lock:
            self.state.info.mlflow = dict(details)

    # ------------------------------------------------------------------ the API
    def log_step(
        self,
        step: int,
        *,
        rewards: torch.Tensor,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        mask: torch.Tensor,
        advantages: torch.Tensor | None = None,
        ref_logprobs: torch.Tensor | None = None,
        loss: Any = None,
        entropy: torch.Tensor | None = None,
        truncated: torch.Tensor | None = None,
        extra: Mapping[str, Any] | None = None,
        completions: Sequence[str | None] | None = None,
    ) -> None:
        """Record one optimizer step (see the module docstring). Never waits on disk or network.

        Shapes: ``rewards`` (P, G), sequences ordered group by group; ``logprobs``,
        ``old_logprobs``, ``mask``, ``ref_logprobs``, ``entropy`` (B, T) with B = P*G;
        ``advantages`` (B,) or (B, T) (default: ``group_advantages(rewards)``); ``loss`` a
        ``LossOutput`` (or scalar); ``truncated`` (B,) bool; ``extra`` name -> scalar;
        ``completions`` B strings. Bad input raises ValueError before anything is recorded.
        Distributed: every rank must call it for every step (it runs collectives).
        """
        if self._closed:
            raise RuntimeError(f"run {self.run_id!r} is closed; log_step after close()")
        t0 = time.thread_time()
        args = (
            step,
            rewards,
            logprobs,
            old_logprobs,
            mask,
            advantages,
            ref_logprobs,
            loss,
            entropy,
            truncated,
            extra,
            completions,
        )
        deferred = self._deferred
        slot = None
        if (
            deferred is not None
            and isinstance(logprobs, torch.Tensor)
            and logprobs.device.type == "cpu"  # (a GPU queues the work itself)
            and logprobs.numel() >= self.defer_min_elements
        ):
            slot = deferred.acquire()  # None when the thread is behind: compute here
        if slot is not None:
            try:
                step, group_size = self._submit(slot, *args)
            except BaseException:
                deferred.release(slot)
                raise
        else:
            with self._compute_lock:  # the workspace buffers are not shareable between threads
                record = self._compute(*args)
            step, group_size = record.step, record.group_size
            if deferred is not None:
                deferred.put(record)  # after any queued steps
            else:
                self._forward(record)
        if self.group_size is None:
            self.group_size = group_size
            with self.state.lock:
                self.state.info.group_size = group_size
        self.last_step = step
        with self.state.lock:
            self.state.info.last_step = step
        self._log_step_cpu_s += time.thread_time() - t0
        self._steps_logged += 1

    def _forward(self, record: StepRecord) -> None:
        for w in self._workers:
            w.put(record)

    def _submit(
        self,
        slot: SnapshotSlot,
        step,
        rewards,
        logprobs,
        old_logprobs,
        mask,
        advantages,
        ref_logprobs,
        loss,
        entropy,
        truncated,
        extra,
        completions,
    ):
        """Check everything ``compute_step`` would (ValueError here, at ``log_step``), copy the
        tensors into ``slot`` and queue ``compute_step`` on the copy. Returns (step, G)."""
        wall_time = time.time()
        step, rewards_P_G, truncated, host_extra, dev_extra, completions = check_step_inputs(
            step,
            rewards=rewards,
            logprobs=logprobs,
            truncated=truncated,
            extra=extra,
            completions=completions,
            group_size=self.group_size,
        )
        check_diagnostics_inputs(
            logprobs,
            old_logprobs,
            mask,
            advantages,
            seq_eps=self.seq_eps,
            token_eps=self.token_eps,
            ref_logprobs=ref_logprobs,
            entropy=entropy,
            nonempty=True,  # the empty-row error belongs to this call, not the thread's
        )
        loss_t = _loss_tensor(loss, logprobs.device, torch.float64)
        copy = slot.copy
        kwargs = dict(
            rewards=rewards_P_G.detach().clone(),
            logprobs=copy("logprobs", logprobs),
            old_logprobs=copy("old_logprobs", old_logprobs),
            mask=copy("mask", mask),
            advantages=None if advantages is None else copy("advantages", advantages),
            ref_logprobs=None if ref_logprobs is None else copy("ref_logprobs", ref_logprobs),
            entropy=None if entropy is None else copy("entropy", entropy),
            truncated=None if truncated is None else truncated.detach().clone(),
            loss=None if loss_t is None else loss_t.clone(),
            extra={**host_extra, **{k: v.clone() for k, v in dev_extra.items()}},
            completions=completions,
        )
        G = rewards_P_G.shape[1]

        def job(workspace: dict) -> StepRecord:
            return compute_step(
                step,
                **kwargs,
                seq_eps=self.seq_eps,
                token_eps=self.token_eps,
                group_size=G,
                token_samples=self.token_samples,
                distributed=False,
                run_id=self.run_id,
                algorithm=self.algorithm,
                workspace=workspace,
                wall_time=wall_time,
            )

        self._deferred.submit(job, slot)
        return step, G

    def _compute(
        self,
        step,
        rewards,
        logprobs,
        old_logprobs,
        mask,
        advantages,
        ref_logprobs,
        loss,
        entropy,
        truncated,
        extra,
        completions,
    ):
        return compute_step(
            step,
            rewards=rewards,
            logprobs=logprobs,
            old_logprobs=old_logprobs,
            mask=mask,
            advantages=advantages,
            ref_logprobs=ref_logprobs,
            loss=loss,
            entropy=entropy,
            truncated=truncated,
            extra=extra,
            completions=completions,
            seq_eps=self.seq_eps,
            token_eps=self.token_eps,
            group_size=self.group_size,
            token_samples=self.token_samples,
            distributed=None if self.distributed else False,
            run_id=self.run_id,
            algorithm=self.algorithm,
            workspace=self._workspace,
        )

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Persist everything logged so far (waits up to ``timeout`` s per sink). True if done."""
        reduced = self._deferred is None or self._deferred.drain(timeout)
        return all([reduced] + [w.flush(timeout) for w in self._workers])

    def cpu_stats(self) -> dict[str, float]:
        """CPU seconds the recorder used: in ``log_step`` (the caller's thread) and, after
        ``close``, in the background reduction thread ("compute", when there is one) and in
        each sink's thread (the MLflow child process is not included)."""
        out = {"steps": float(self._steps_logged), "log_step": self._log_step_cpu_s}
        if self._deferred is not None and self._deferred.cpu_s is not None:
            out[self._deferred.name] = self._deferred.cpu_s
        for w in self._workers:
            if w.cpu_s is not None:
                out[w.name] = w.cpu_s
        return out

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
        if self._deferred is not None:  # every logged step reaches the sinks before they close
            self._deferred.close(self.close_timeout_s)
        parquet_workers = [w for w in self._workers if w.sink is self.parquet]
        other_workers = [w for w in self._workers if w.sink is not self.parquet]
        for w in parquet_workers:
            w.close(status, self.close_timeout_s)
        if self.distributed and status == schema.STATUS_FINISHED:
            self._barrier()  # every rank's parts are compacted before rank 0 uploads them
        with self.state.lock:
            self.state.info.status = status
            self.state.info.ended_at = time.time()
        self._write_state()  # final status on disk before the (slow) MLflow upload
        if other_workers:
            for w in other_workers:
                w.close(status, self.close_timeout_s)
            self._write_state()  # with the MLflow run id and any fault raised while closing

    def _barrier(self) -> None:
        """Wait for the other ranks, at most ``close_timeout_s`` (a dead rank must not hang us)."""
        import datetime

        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            work = dist.barrier(async_op=True)
            work.wait(timeout=datetime.timedelta(seconds=self.close_timeout_s))
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


__all__ = ["NullSink", "ParquetSink", "RunRecorder", "RunState", "SinkWorker"]
