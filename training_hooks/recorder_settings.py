"""``RecorderSettings``: everything a ``RunRecorder`` is told when it starts, checked once.

A frozen dataclass so the settings are one value and one declaration: ``RunRecorder``'s
arguments are its fields, taken by ``params.takes_params_of`` (not written out again), and a bad setting
is a ValueError naming it before any folder or sink exists.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from gspo_metrics.checks import check_eps_pair
from gspo_metrics.spec import GRPO_EPS, GSPO_EPS, UNKNOWN_ALGORITHM

from .sinks import Sink
from .sinks.findings import check_cpu_share

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: ``token_samples``' default: enough for the token view, a small share of ``log_step``'s cost.
DEFAULT_TOKEN_SAMPLES = 8
#: The settings whose value, when not given, is a default; run.json's ``setting_sources`` says
#: which of them the user stated ("stated") and which are the default ("default").
DEFAULTS: dict[str, Any] = {"seq_eps": GSPO_EPS, "token_eps": GRPO_EPS, "reduction": "sum"}
STATED, DEFAULT = "stated", "default"
SETTING_SOURCES = "setting_sources"  # run.json's key


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


@dataclass(frozen=True)
class RecorderSettings:
    """Everything a ``RunRecorder`` is told when it starts; checked when built (ValueError
    naming the setting). ``RunRecorder(root, name, algorithm, config, mlflow, *, ...)`` takes
    these fields as its arguments (the first five also by position): a new setting is a field
    here, with its docstring, and nothing else."""

    root: str | os.PathLike = "runs"
    """Folder holding one sub-folder per run (``root/<run_id>``): a local path, or an object-store
    URI (``s3://bucket/prefix``, ``gs://...``; ``training_hooks.storage``)."""
    name: str | None = None
    """Human-readable run name (default: the algorithm)."""
    algorithm: str = UNKNOWN_ALGORITHM
    """The loss that trains, as ``gspo_metrics.spec.algorithm_label`` names it ("grpo", "gspo",
    "dapo", "cispo", "sapo-seq", ...; ``loss_for(tool, settings).algorithm`` gives it from a
    tool's settings). Not given: "unknown", never taken for a known loss (Health then judges
    no clip share). Both clip units are computed anyway."""
    config: Any = None
    """The run's hyper-parameters (dict, dataclass or namespace): in run.json, MLflow params."""
    mlflow: bool | str | None = None
    """None/False (off), True (``MLFLOW_TRACKING_URI`` or ``sqlite:///mlflow.db`` in the
    working directory), or a tracking URI."""
    _: KW_ONLY  # the fields below are keyword-only
    run_id: str | None = None
    """Resume this run if ``root/<run_id>`` exists (append, status back to running), else start a
    new run with this id. Default: ``<name>-<time>-<hex>``. A resumed run may log a step again
    (from a checkpoint): its new rows replace the earlier ones of that step."""
    seq_eps: tuple[float, float] | None = None
    """GSPO's sequence-unit clip range (eps_low, eps_high). None (not given): the paper's 3e-4 /
    4e-4 (``gspo_metrics.spec.GSPO_EPS``), recorded in run.json as the default, not as stated
    (``setting_sources``)."""
    token_eps: tuple[float, float] | None = None
    """GRPO's token-unit clip range (eps_low, eps_high). None (not given): 0.2 / 0.2
    (``gspo_metrics.spec.GRPO_EPS``), recorded as the default, as ``seq_eps``."""
    reduction: str | None = None
    """The loss reduction, recorded in run.json ("sum", "token_mean", ...). None (not given):
    "sum", recorded as the default."""
    group_size: int | None = None
    """G; checked against ``rewards.shape[1]`` (default: taken from the first step)."""
    flush_interval_s: float = 5.0
    """Parquet parts and the run.json heartbeat are written at least this often, so a
    ``kill -9`` loses at most this much."""
    steps_per_file: int = 100
    """Steps buffered per Parquet part."""
    token_samples: int = DEFAULT_TOKEN_SAMPLES
    """Per step, store the per-token log-ratios of this many sequences (spread evenly over the
    batch) in ``tokens/``, with up to three culprits per reason, for the Sequences page's token
    view; 0 turns the table off."""
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
    strict: bool = False
    """What ``log_step`` does with inputs it refuses after the first step it recorded (a
    log-prob above 0, a NaN where none may be, a step out of order): False drops that step,
    warns and records it in run.json's ``faults`` (the run goes on; Health's ``steps_dropped``);
    True raises the ValueError, as on the first call (a test, a debugging session)."""
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
    findings_cpu_share: float | None = 0.02
    """The share of one core the live checks may take on average: after an evaluation that cost c
    CPU-seconds the next waits c / share seconds (later steps are checked then, none skipped),
    which only matters when steps come faster than the checks run (a CPU demo). None: every
    ``findings_every`` steps whatever it costs."""
    on_finding: Callable[[Any], Any] | str | None = None
    """Called with each new live finding (``training_hooks.findings.live.LiveFinding``: step,
    code, severity, title, evidence, advice) on the findings thread; what it raises is a fault,
    never an error in training. A string ``"package.module:function"`` names one (for a process
    that cannot be handed a callable, e.g. a verl worker)."""

    @property
    def setting_sources(self) -> dict[str, str]:
        """``{"seq_eps": "stated" | "default", "token_eps": ..., "reduction": ...}``: which of
        ``DEFAULTS`` the user gave (run.json ``setting_sources``)."""
        return dict(self.__dict__["_sources"])

    @property
    def clip_ranges(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """``(seq_eps, token_eps)`` as used: as given, else the defaults (``__post_init__``
        fills them in; ``setting_sources`` says which)."""
        assert self.seq_eps is not None and self.token_eps is not None
        return self.seq_eps, self.token_eps

    @property
    def run_name(self) -> str:
        """The run's name: ``name``, else the algorithm (as ``__post_init__`` sets ``name``)."""
        return self.name if self.name is not None else self.algorithm

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
        check_cpu_share("findings_cpu_share", self.findings_cpu_share)
        if self.on_finding is not None and not callable(self.on_finding):
            from .findings.live import callback_from_spec

            object.__setattr__(self, "on_finding", callback_from_spec(self.on_finding))
        if self.run_id is not None and not _RUN_ID_RE.match(str(self.run_id)):
            raise ValueError(
                f"run_id {self.run_id!r} must be 1-128 characters of letters, digits, '.', '_', '-'"
            )
        sources = {k: STATED if getattr(self, k) is not None else DEFAULT for k in DEFAULTS}
        object.__setattr__(self, "_sources", sources)
        for key, default in DEFAULTS.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, default)
        if not isinstance(self.reduction, str) or not self.reduction:
            raise ValueError(f"reduction must be a non-empty string, got {self.reduction!r}")
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
