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
import functools
import getpass
import inspect
import logging
import os
import re
import secrets
import socket
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gspo_metrics.checks import check_eps_pair
from gspo_metrics.diagnostics import fused_available
from gspo_metrics.spec import GRPO_EPS, GSPO_EPS

from . import schema, storage
from .compute import Reduction, StepRecord, dist_info, reduce_step
from .deferred import DeferredCompute
from .inputs import StepInputs
from .schema import RunInfo, write_json_atomic
from .sinks import NullSink, ParquetSink, Sink, SinkWorker
from .sinks.findings import findings_sink
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


@dataclass(frozen=True)
class RecorderSettings:
    """Everything a ``RunRecorder`` is told when it starts; checked when built (ValueError
    naming the setting). ``RunRecorder(root, name, algorithm, config, mlflow, *, ...)`` takes
    these fields as its arguments (the first five also by position)."""

    root: str | os.PathLike = "runs"
    """Folder holding one sub-folder per run (``root/<run_id>``): a local path, or an object-store
    URI (``s3://bucket/prefix``, ``gs://...``; ``training_hooks.storage``)."""
    name: str | None = None
    """Human-readable run name (default: the algorithm)."""
    algorithm: str = "gspo"
    """What trains ("grpo", "gspo", ...); both clip units are computed anyway."""
    config: Any = None
    """The run's hyper-parameters (dict, dataclass or namespace): in run.json, MLflow params."""
    mlflow: bool | str | None = None
    """None/False (off), True (``MLFLOW_TRACKING_URI`` or ``sqlite:///mlflow.db`` in the
    working directory), or a tracking URI."""
    run_id: str | None = None
    """Resume this run if ``root/<run_id>`` exists (append, status back to running), else start a
    new run with this id. Default: ``<name>-<time>-<hex>``."""
    seq_eps: tuple[float, float] = GSPO_EPS
    """GSPO's sequence-unit clip range (eps_low, eps_high)."""
    token_eps: tuple[float, float] = GRPO_EPS
    """GRPO's token-unit clip range (eps_low, eps_high)."""
    reduction: str = "sum"
    """The loss reduction, recorded in run.json ("sum", "token_mean", ...)."""
    group_size: int | None = None
    """G; checked against ``rewards.shape[1]`` (default: taken from the first step)."""
    flush_interval_s: float = 5.0
    """Parquet parts and the run.json heartbeat are written at least this often, so a
    ``kill -9`` loses at most this much."""
    steps_per_file: int = 100
    """Steps buffered per Parquet part."""
    token_samples: int = 0
    """Per step, store the per-token log-ratios of this many sequences (spread evenly over the
    batch) in ``tokens/``; 0 turns the table off."""
    experiment: str = "gspo-dash"
    """The MLflow experiment name."""
    mlflow_steps_per_batch: int = 50
    """Steps buffered per MLflow ``log_batch`` call."""
    mlflow_artifacts: bool = True
    """Upload the run folder (Parquet, run.json) to MLflow at close."""
    mlflow_process: bool = True
    """Run the MLflow client in a child process, so its Python never holds this process's GIL;
    False runs it in the sink's thread."""
    close_timeout_s: float = 60.0
    """How long ``close`` waits for each sink before abandoning it."""
    queue_size: int = 1000
    """Steps each sink's queue holds; when a sink falls that far behind, new steps are dropped
    for it until it catches up (a fault in run.json), never waited for."""
    sinks: Sequence[Sink] = ()
    """Extra ``Sink`` objects, each run on its own thread like the built-in ones (rank 0)."""
    distributed: bool | None = None
    """None (auto: use ``torch.distributed`` when initialised), or False."""
    findings_every: int = 10
    """Run the Health checks that need no future (``training_hooks.findings.LIVE_CODES``) every
    this many steps (and 2% of the steps so far) on their own thread, never the training thread;
    0: off. The first time a code fires the recorder prints one line, adds it to run.json's
    ``findings``, tags the MLflow run and calls ``on_finding`` (rank 0; docs/health.md)."""
    on_finding: Callable[[Any], Any] | str | None = None
    """Called with each new live finding (``training_hooks.findings.live.LiveFinding``: step,
    code, severity, title, evidence, advice) on the findings thread; what it raises is a fault,
    never an error in training. A string ``"package.module:function"`` names one (for a process
    that cannot be handed a callable, e.g. a verl worker)."""
    compute_thread: bool | None = None
    """CPU tensors of at least ``RunRecorder.defer_min_elements`` (B * T), one process:
    ``log_step`` checks the step and copies its tensors, and a background thread reduces the
    copy at idle priority (``training_hooks.deferred``), as a GPU would queue the work. None: on
    when torch uses fewer intra-op threads than the process has cores (a spare core to reduce
    on); when it uses them all, a background reduction only competes with training
    (bench/bench_hooks.py), so the caller reduces. GPU tensors and ``torch.distributed`` always
    reduce on the caller's thread (on the device)."""

    def __post_init__(self) -> None:
        if not isinstance(self.algorithm, str) or not self.algorithm:
            raise ValueError(f"algorithm must be a non-empty string, got {self.algorithm!r}")
        name = self.name if self.name is not None else self.algorithm
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        group_size = self.group_size
        if group_size is not None and (not isinstance(group_size, int) or group_size < 1):
            raise ValueError(f"group_size must be a positive int, got {group_size!r}")
        if not self.flush_interval_s > 0:
            raise ValueError(f"flush_interval_s must be > 0, got {self.flush_interval_s!r}")
        if not isinstance(self.token_samples, int) or self.token_samples < 0:
            raise ValueError(f"token_samples must be an int >= 0, got {self.token_samples!r}")
        if not isinstance(self.findings_every, int) or self.findings_every < 0:
            raise ValueError(f"findings_every must be an int >= 0, got {self.findings_every!r}")
        if self.on_finding is not None and not callable(self.on_finding):
            from .findings.live import callback_from_spec

            object.__setattr__(self, "on_finding", callback_from_spec(self.on_finding))
        if self.run_id is not None and not _RUN_ID_RE.match(str(self.run_id)):
            raise ValueError(
                f"run_id {self.run_id!r} must be 1-128 characters of letters, digits, '.', '_', '-'"
            )
        normalised = {
            "root": os.fspath(self.root),
            "name": name,
            "config": _config_dict(self.config),
            "seq_eps": check_eps_pair("seq_eps", self.seq_eps),
            "token_eps": check_eps_pair("token_eps", self.token_eps),
            "flush_interval_s": float(self.flush_interval_s),
            "close_timeout_s": float(self.close_timeout_s),
        }
        for key, value in normalised.items():
            object.__setattr__(self, key, value)


_SETTING_NAMES = frozenset(f.name for f in dataclasses.fields(RecorderSettings))


class RunRecorder:
    """Record every step's diagnostics of a GRPO/GSPO run to Parquet (and MLflow).

    ``RunRecorder(root="runs", name=None, algorithm="gspo", config=None, mlflow=None, *,
    run_id=None, seq_eps=..., ...)``: the arguments are the fields of ``RecorderSettings``, each
    documented there. Use it as a context manager, or call ``close``.
    """

    defer_min_elements = 1 << 16  # smaller CPU steps cost ~1 ms of op overhead: reduce in place

    def __init__(
        self,
        root: str | os.PathLike = "runs",
        name: str | None = None,
        algorithm: str = "gspo",
        config: Any = None,
        mlflow: bool | str | None = None,
        **settings: Any,
    ):
        for key in settings.keys() - _SETTING_NAMES:
            raise TypeError(f"RunRecorder() got an unexpected keyword argument {key!r}")
        s = RecorderSettings(root, name, algorithm, config, mlflow, **settings)
        self.settings = s
        self.tracking_uri = resolve_tracking_uri(s.mlflow)
        self._init_fields(s)
        self._join_run(s)  # distributed: every rank takes rank 0's run id
        self.state = RunState(self.run_dir, self._run_info(s), persist=self.is_main)
        parquet_ok = self._create_folders()
        self._workers = self._start_sinks(s, parquet_ok)
        self._deferred = self._start_background_compute(s)
        # Load the fused CPU kernel (numba: ~1 s from its disk cache, a few seconds the first
        # time on a machine) while the caller sets up its model, not in the first log_step.
        threading.Thread(target=fused_available, name="gspo-fused-load", daemon=True).start()
        _LIVE.add(self)

    # ------------------------------------------------------------------ setup steps
    def _init_fields(self, s: RecorderSettings) -> None:
        self.algorithm = s.algorithm
        self.group_size = s.group_size  # the run's G: from the settings, the run, or step one
        self.distributed, self.rank, self.world_size = dist_info(s.distributed)
        self.is_main = self.rank == 0
        self.root = s.root
        self.resumed = False
        self.last_step: int | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._workspace: dict = {}  # reused (B, T) scratch buffers of sequence_diagnostics
        self._compute_lock = threading.Lock()
        self._log_step_cpu_s = 0.0  # CPU time spent inside log_step (the caller's thread)
        self._steps_logged = 0

    def _join_run(self, s: RecorderSettings) -> None:
        """The run's id (rank 0's under ``torch.distributed``) and folder."""
        run_id = s.run_id or new_run_id(s.name)
        if self.distributed:  # one run id for every rank: rank 0's
            import torch.distributed as dist

            box = [run_id]
            dist.broadcast_object_list(box, src=0)
            run_id = box[0]
        self.run_id = run_id
        self.run_dir = storage.join(s.root, run_id)
        # the steps' reduction: here (on the device, over ranks) or on the background thread
        self._reduction = Reduction(
            s.seq_eps,
            s.token_eps,
            s.token_samples,
            None if self.distributed else False,
            run_id,
            s.algorithm,
        )

    def _run_info(self, s: RecorderSettings) -> RunInfo:
        """This run's ``RunInfo``: a new one, or the one on disk when resuming."""
        now = time.time()
        info = RunInfo(
            run_id=self.run_id,
            name=s.name,
            algorithm=s.algorithm,
            seq_eps_low=s.seq_eps[0],
            seq_eps_high=s.seq_eps[1],
            token_eps_low=s.token_eps[0],
            token_eps_high=s.token_eps[1],
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
        if storage.exists(storage.join(self.run_dir, schema.RUN_JSON)):
            info = self._resume(info)
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
            self.mlflow_sink = self._mlflow_sink(s)
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

    def _mlflow_sink(self, s: RecorderSettings) -> Sink:
        from .sinks.mlflow import MlflowSink

        info = self.state.info
        same_store = info.mlflow.get("tracking_uri") == self.tracking_uri
        return MlflowSink(
            self.tracking_uri,
            experiment=s.experiment,
            run_name=s.name,
            gspo_run_id=self.run_id,
            algorithm=s.algorithm,
            params=run_params(info),
            resume_run_id=info.mlflow.get("run_id") if same_store else None,
            resume=self.resumed,
            steps_per_batch=s.mlflow_steps_per_batch,
            artifact_dir=self.run_dir if s.mlflow_artifacts else None,
            on_open=self._on_mlflow_open,
            process=s.mlflow_process,
        )

    def _start_background_compute(self, s: RecorderSettings) -> DeferredCompute | None:
        """The background reduction thread (``training_hooks.deferred``), when it is on."""
        compute_thread = s.compute_thread
        if compute_thread is None:
            compute_thread = torch.get_num_threads() < _usable_cores()
        if not compute_thread or self.distributed:
            return None
        return DeferredCompute(self._forward, self.state.fault)

    def _resume(self, info: RunInfo) -> RunInfo:
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
        old.summary = None  # (new steps will follow: made again at close)
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
        rollout: int | None = None,
        policy_lag: int | None = None,
        sampler_logprobs: torch.Tensor | None = None,
        prompts: Sequence[str | None] | None = None,
        token_texts: Sequence[Sequence[str] | None] | None = None,
    ) -> None:
        """Record one optimizer step (see the module docstring). Never waits on disk or network.

        Shapes: ``rewards`` (P, G), sequences ordered group by group; ``logprobs``,
        ``old_logprobs``, ``mask``, ``ref_logprobs``, ``entropy``, ``sampler_logprobs`` (B, T)
        with B = P*G; ``advantages`` (B,) or (B, T) (default: ``group_advantages(rewards)``);
        ``loss`` a ``LossOutput`` (or scalar); ``truncated`` (B,) bool; ``extra`` name ->
        scalar; ``completions`` B strings (the model's output only); ``prompts`` P strings (a
        group's prompt, stored apart); ``token_texts`` B rows of T decoded tokens (one per
        position; kept for the sequences whose token log-ratios are kept, to label them). Bad
        input raises ValueError before anything is recorded. Distributed: every rank must call
        it for every step (it runs collectives).

        Policy lag: ``rollout`` is the index of the batch of samples this step trains on,
        ``policy_lag`` the number of optimizer steps since the policy that produced
        ``old_logprobs`` (0: on-policy; a second minibatch or epoch on one batch: 1, 2, ...);
        non-negative ints, null in the step table when not given. ``sampler_logprobs``: the
        log-probs the inference engine (vLLM, SGLang) reported when it sampled the tokens, for
        the sampler/trainer mismatch (``sampler_kl_mean``, ``sampler_logp_abs_diff_max``).
        """
        if self._closed:
            raise RuntimeError(f"run {self.run_id!r} is closed; log_step after close()")
        t0 = time.thread_time()
        inputs = StepInputs.check(
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
            prompts=prompts,
            token_texts=token_texts,
            rollout=rollout,
            policy_lag=policy_lag,
            sampler_logprobs=sampler_logprobs,
            group_size=self.group_size,
        )
        self._reduce(inputs)
        if self.group_size is None:
            self.group_size = inputs.group_size
            with self.state.lock:
                self.state.info.group_size = inputs.group_size
        self.last_step = inputs.step
        with self.state.lock:
            self.state.info.last_step = inputs.step
        self._log_step_cpu_s += time.thread_time() - t0
        self._steps_logged += 1

    def _reduce(self, inputs: StepInputs) -> None:
        """Reduce the step and hand it to the sinks: from a snapshot on the background thread
        when it has a free slot (large CPU steps), else here."""
        deferred = self._deferred
        slot = None
        if (
            deferred is not None
            and inputs.logprobs.device.type == "cpu"  # (a GPU queues the work itself)
            and inputs.logprobs.numel() >= self.defer_min_elements
        ):
            slot = deferred.acquire()  # None when the thread is behind: compute here
        if slot is not None:
            try:
                # the token-level errors (an empty mask row too) belong to this call
                inputs.check_tokens(self.settings.seq_eps, self.settings.token_eps)
                snapshot = inputs.snapshot(slot.copy)
            except BaseException:
                deferred.release(slot)
                raise
            deferred.submit(functools.partial(reduce_step, snapshot, self._reduction), slot)
            return
        with self._compute_lock:  # the workspace buffers are not shareable between threads
            record = reduce_step(inputs, self._reduction, self._workspace)
        if deferred is not None:
            deferred.put(record)  # after any queued steps
        else:
            self._forward(record)

    def _forward(self, record: StepRecord) -> None:
        for w in self._workers:
            w.put(record)

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
        timeout = self.settings.close_timeout_s
        if self._deferred is not None:  # every logged step reaches the sinks before they close
            self._deferred.close(timeout)
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
        """The run's summary (``training_hooks.summary``) into run.json, from its step table as
        closed (parts compacted), for the dashboard's Runs page. Never fails the close."""
        from .summary import try_summarise_run

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


def _signature_of_settings() -> inspect.Signature:
    """``RunRecorder.__init__``'s signature as ``RecorderSettings`` declares it (for help() and
    editors): its named parameters, then every other field as a keyword-only parameter."""
    P = inspect.Parameter
    named = inspect.signature(RunRecorder.__init__).parameters
    params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    for f in dataclasses.fields(RecorderSettings):
        kind = P.POSITIONAL_OR_KEYWORD if f.name in named else P.KEYWORD_ONLY
        params.append(P(f.name, kind, default=f.default, annotation=f.type))
    return inspect.Signature(params)


RunRecorder.__init__.__signature__ = _signature_of_settings()

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
