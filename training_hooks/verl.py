"""Record a verl run with gspo-dash: a verl plugin, on when ``GSPO_DASH_VERL`` names the runs root.

verl (0.9.x) imports every entry point of the group ``verl.plugins`` on ``import verl``, in every
process; this module is one and does nothing unless ``GSPO_DASH_VERL`` is set (a folder,
``s3://...`` or ``gs://...``). Then ``install`` wraps ``BaseEngine.train_batch``: a
``train_batch`` whose loss is verl's ``ppo_loss`` is one optimizer step; the wrapped loss keeps
each micro-batch's tensors, detached, after verl's own call, and after verl's optimizer step they
are one ``RunRecorder.log_step``. ``GSPO_DASH_VERL_NAME``, ``GSPO_DASH_VERL_OPTIONS``,
``GSPO_DASH_VERL_ON_FINDING`` and ``configure(**kwargs)`` tune the run. Any error of the recorder
(a bad input, a failing sink) is a warning, once, and training goes on. What is recorded, what
stays unknown and why training is unchanged: docs/verl.md.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import json
import math
import os
import sys
import threading
import warnings
from typing import Any

from gspo_metrics.spec import clip_unit_of, tool_algorithm

ENV_ROOT = "GSPO_DASH_VERL"
"""The runs root; unset or empty: the plugin does nothing."""
ENV_NAME = "GSPO_DASH_VERL_NAME"
"""The run's name (default: verl's experiment name when the worker sees it)."""
ENV_OPTIONS = "GSPO_DASH_VERL_OPTIONS"
"""A JSON object of more ``RunRecorder`` keyword arguments."""
ENV_ON_FINDING = "GSPO_DASH_VERL_ON_FINDING"
"""``module:attribute`` of a callable passed to ``RunRecorder(on_finding=...)``."""


#: ``ActorConfig`` fields stored in run.json (``config``) and as MLflow params.
VERL_SETTINGS = (
    "strategy",
    "ppo_mini_batch_size",
    "ppo_micro_batch_size_per_gpu",
    "use_dynamic_bsz",
    "ppo_max_token_len_per_gpu",
    "ppo_epochs",
    "shuffle",
    "clip_ratio",
    "clip_ratio_low",
    "clip_ratio_high",
    "clip_ratio_c",
    "loss_agg_mode",
    "loss_scale_factor",
    "entropy_coeff",
    "use_kl_loss",
    "kl_loss_coef",
    "kl_loss_type",
    "rollout_n",
)

_ENGINE_MODULE = "verl.workers.engine.base"
_WORKERS_MODULE = "verl.workers.engine_workers"
_PATCHED = "_gspo_dash_patched"
_lock = threading.Lock()
_options: dict[str, Any] = {}


def configure(**recorder_kwargs: Any) -> None:
    """More ``RunRecorder`` keyword arguments for this process's run (``on_finding``, ``mlflow``,
    ...), merged over ``GSPO_DASH_VERL_OPTIONS``; call before the first training step."""
    if "algorithm" in recorder_kwargs or "root" in recorder_kwargs:
        raise ValueError("algorithm comes from verl's loss_mode and root from GSPO_DASH_VERL")
    _options.update(recorder_kwargs)


# ---------------------------------------------------------------------- install (import time)
class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches verl's modules right after they execute, wherever they are imported from."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _PATCHERS:
            return None
        sys.meta_path.remove(self)  # find the real spec without finding ourselves
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(fullname, module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]  # this loader only
        return spec


def install() -> bool:
    """Record this process's verl steps (if ``GSPO_DASH_VERL`` is set); True when on."""
    if not os.environ.get(ENV_ROOT, "").strip():
        return False
    with _lock:
        if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _PatchOnImport())
        for name in _PATCHERS:
            if name in sys.modules:
                _patch(name, sys.modules[name])
    return True


def _patch(name: str, module: Any) -> None:
    try:
        _PATCHERS[name](module)
    except Exception as e:  # noqa: BLE001 - a verl we do not know: train unrecorded
        _warn_once("patch", f"cannot hook verl's {name} ({type(e).__name__}: {e}); not recording")


def _patch_engine(module: Any) -> None:
    engine = module.BaseEngine
    original = engine.__dict__["train_batch"]
    if getattr(original, _PATCHED, False):
        return

    @functools.wraps(original)
    def train_batch(self, data, loss_function):
        config = ppo_config(loss_function)
        if config is None:
            return original(self, data, loss_function)
        session = _session()
        capture = _MicroBatches(loss_function)
        try:  # set by verl's train_mini_batch on a batch's last mini-batch: the policy lag
            from verl.utils import tensordict_utils as tu

            flag = tu.get_non_tensor_data(data=data, key="update_lr_scheduler", default=None)
        except Exception:  # noqa: BLE001 - unknown: rollout and lag null
            flag = None
        outputs = original(self, data, capture)
        session.record(self, config, capture, flag, outputs)
        return outputs

    setattr(train_batch, _PATCHED, True)
    engine.train_batch = train_batch


def _patch_workers(module: Any) -> None:
    """Keep the experiment name verl hands an actor worker (its rollout trace config)."""
    worker = getattr(module, "ActorRolloutRefWorker", None)
    if worker is None or getattr(worker.__init__, _PATCHED, False):
        return
    original = worker.__init__

    @functools.wraps(original)
    def __init__(self, config, *args, **kwargs):
        original(self, config, *args, **kwargs)
        try:
            name = config.rollout.trace.experiment_name
            if isinstance(name, str) and name:
                _session().experiment_name = name
        except Exception:  # noqa: BLE001 - no trace config: no name
            pass

    setattr(__init__, _PATCHED, True)
    worker.__init__ = __init__


_PATCHERS = {_ENGINE_MODULE: _patch_engine, _WORKERS_MODULE: _patch_workers}


def ppo_config(loss_function: Any) -> Any:
    """The ``ActorConfig`` of a ``functools.partial(verl ppo_loss, config=...)``, else None."""
    if not isinstance(loss_function, functools.partial):
        return None
    func = loss_function.func
    if (
        getattr(func, "__name__", "") != "ppo_loss"
        or getattr(func, "__module__", "") != "verl.workers.utils.losses"
    ):
        return None
    return loss_function.keywords.get("config")


# ---------------------------------------------------------------------- one optimizer step
_TENSOR_FIELDS = {  # verl's batch key -> ours (the ones present are kept)
    "response_mask": "mask",
    "old_log_probs": "old",
    "advantages": "adv",
    "ref_log_prob": "ref",
    "rollout_log_probs": "sampler",
    "token_level_scores": "scores",
}


class _MicroBatches:
    """verl's loss function, called as verl calls it; keeps each micro-batch's tensors after."""

    def __init__(self, loss_function: Any):
        self.loss_function = loss_function
        self.items: list[dict[str, Any]] = []
        self.error: str | None = None

    def __getattr__(self, name: str) -> Any:  # .func, .keywords: the partial's
        return getattr(self.__dict__["loss_function"], name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.loss_function(*args, **kwargs)
        model_output, data = kwargs.get("model_output"), kwargs.get("data")
        if model_output is not None and data is not None and self.error is None:
            try:
                self.items.append(_micro_batch(model_output, data, out))
            except Exception as e:  # noqa: BLE001
                self.error = f"{type(e).__name__}: {e}"
        return out


def _micro_batch(model_output: Any, data: Any, out: Any) -> dict[str, Any]:
    """One micro-batch, detached and padded to (B, T) as ``ppo_loss`` reads it."""
    import torch
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import no_padding_2_padding

    with torch.no_grad():
        mb: dict[str, Any] = {
            "logps": no_padding_2_padding(model_output["log_probs"], data).detach().float()
        }
        entropy = model_output.get("entropy", None)
        if entropy is not None:
            mb["entropy"] = no_padding_2_padding(entropy, data).detach().float()
        keys = [k for k in _TENSOR_FIELDS if k in data.keys()]
        padded = data.select(*keys).to_padded_tensor()
        for key in keys:
            mb[_TENSOR_FIELDS[key]] = padded[key].detach()
        uid = tu.get(data, "uid")
        mb["uid"] = None if uid is None else [str(u) for u in uid]
        loss = out[0] if isinstance(out, tuple) else out
        mb["loss"] = loss.detach().float().reshape(())
    return mb


def _step_rows(items: list[dict[str, Any]], G: int) -> tuple[dict[str, Any], Any, bool]:
    """One optimizer step's micro-batches as one batch, group by group when the groups are known:
    ``(tensors, rewards, groups_known)``.

    ``tensors[key]`` (B, T) right-padded with 0 to the widest T (or (B,) for per-sequence
    values), rows in group order; ``rewards`` (P, G), NaN when unknown; ``groups_known`` whether
    the rows hold whole groups of ``G`` identified by ``uid`` with their scores."""
    import torch

    from ._trl_rows import _concat

    keys = [k for k in items[0] if k not in ("uid", "loss") and all(k in mb for mb in items)]
    cat = {k: _concat(items, k) for k in keys}
    B = cat["logps"].shape[0]
    uids = [u for mb in items for u in (mb["uid"] or [None] * mb["logps"].shape[0])]
    order = _group_order(uids, G) if "scores" in cat else None
    if order is None:
        if B % G:
            G = 1
        return cat, torch.full((B // G, G), math.nan), False
    idx = torch.tensor(order)
    cat = {k: v[idx] for k, v in cat.items()}
    rewards = (cat["scores"].float() * cat["mask"].float()).sum(-1).reshape(-1, G)
    return cat, rewards, True


def _group_order(uids: list[str | None], G: int) -> list[int] | None:
    """Row indices group by group (groups in first-seen order), or None when a uid is missing
    or a group does not have exactly G rows."""
    groups: dict[str, list[int]] = {}
    for i, u in enumerate(uids):
        if u is None:
            return None
        groups.setdefault(u, []).append(i)
    if any(len(rows) != G for rows in groups.values()):
        return None
    return [i for rows in groups.values() for i in rows]


# ---------------------------------------------------------------------- one run per engine
class _Session:
    """This process's recording: the experiment name verl gave its worker, and one run per
    engine (``_Run``): each engine's training is its own run, and an engine that trains again
    with another loss (a second ``loss_mode``, other clip settings) starts a new one."""

    def __init__(self):
        self.experiment_name: str | None = None
        self.runs: dict[int, _Run] = {}  # id(engine) -> its run (the run keeps the engine)

    def record(self, engine, config, capture: _MicroBatches, flag: Any, outputs: Any) -> None:
        key = run_key(config)
        run = self.runs.get(id(engine))
        if run is not None and run.key != key:  # the engine trains another loss: a new run
            run.close()
            run = None
        if run is None:
            run = self.runs[id(engine)] = _Run(engine, key, self.experiment_name)
        run.record(config, capture, flag, outputs)

    def close(self, status: str | None = None) -> None:
        runs, self.runs = list(self.runs.values()), {}
        for run in runs:
            run.close(status)


def run_key(config: Any) -> tuple[Any, ...]:
    """What makes two ``train_batch`` calls of one engine the same training: the loss mode and
    the policy-loss settings read (``verl_loss_settings``), as a hashable tuple."""
    return tuple(sorted((k, repr(v)) for k, v in verl_loss_settings(config).items()))


class _Run:
    """One engine's training: its recorder (opened at its first step), its step and lag counters,
    and the loss it trains (``loss_for("verl", ...)``, for the attenuation)."""

    def __init__(self, engine: Any, key: tuple[Any, ...], experiment_name: str | None):
        self.engine = engine  # its id is the run's key in _Session.runs
        self.key = key
        self.experiment_name = experiment_name
        self.recorder: Any = None
        self.tool_loss: Any = None
        self.step = 0
        self.rollout = 0
        self.lag = 0
        self.failed = False

    def record(self, config, capture: _MicroBatches, flag: Any, outputs: Any) -> None:
        self.step += 1
        known = isinstance(flag, bool)
        rollout, lag = (self.rollout, self.lag) if known else (None, None)
        if known:
            self.rollout, self.lag = (self.rollout + 1, 0) if flag else (self.rollout, self.lag + 1)
        if self.failed or not self._ready(capture):
            return
        if self.recorder is None:
            try:
                self.recorder = self._open(config)
            except Exception as e:  # noqa: BLE001 - never stops training
                self.failed = True
                _warn_once("open", f"cannot start the run ({type(e).__name__}: {e}); not recording")
                return
        try:
            self._log(config, capture, rollout, lag, outputs)
        except Exception as e:  # noqa: BLE001 - never stops training
            _warn_once("record", f"step {self.step} not recorded ({type(e).__name__}: {e})")

    def close(self, status: str | None = None) -> None:
        rec, self.recorder = self.recorder, None
        if rec is not None:
            rec.close(status)

    def _ready(self, capture: _MicroBatches) -> bool:
        """Whether every rank records this step. Under ``torch.distributed`` the recorder runs
        collectives, so the ranks agree first (one all-reduce of a flag): all record or none.
        Model parallelism (a world larger than the data-parallel size: several ranks see the
        same sequences, or only the last pipeline stage sees the loss) is not recorded."""
        import torch
        import torch.distributed as dist

        ready = capture.error is None and bool(capture.items)
        if not (dist.is_available() and dist.is_initialized()):
            if not ready:
                _warn_once(
                    "capture", f"step {self.step} not recorded: {capture.error or 'no loss'}"
                )
            return ready
        if self.engine.get_data_parallel_size() != dist.get_world_size():
            self.failed = True  # the same on every rank: no collective is started
            _warn_once("parallel", "model parallelism (tensor, pipeline, sequence) is not recorded")
            return False
        cuda = dist.get_backend() == "nccl"
        device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        flag = torch.tensor([1.0 if ready else 0.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        if flag.item() < 1.0:
            why = capture.error or "a rank's micro-batches did not reach the loss"
            _warn_once("capture", f"step {self.step} not recorded on any rank: {why}")
            return False
        return True

    def _open(self, config: Any) -> Any:
        from gspo_metrics.tool_losses import loss_for

        from .recorder import RunRecorder
        from .trainers.verl import token_eps as verl_token_eps

        loss_mode = _loss_mode(config)
        # the loss of loss_mode: vanilla "grpo", "gspo", geo_mean "gmpo"...; "unknown" for a mode
        # this version does not reproduce (clip_cov, a custom one)
        algorithm = tool_algorithm("verl", loss_mode)
        try:
            self.tool_loss = loss_for("verl", verl_loss_settings(config))
        except ValueError as e:  # a mode it does not reproduce: the attenuation is unknown
            _warn_once("attenuation", f"no attenuation recorded: {e}")
        opts: dict[str, Any] = {}
        raw = os.environ.get(ENV_OPTIONS, "").strip()
        if raw:
            opts.update(json.loads(raw))
        on_finding = os.environ.get(ENV_ON_FINDING, "").strip()
        if on_finding:  # "module:function": RunRecorder loads it (findings.live.callback_from_spec)
            opts["on_finding"] = on_finding
        opts.update(_options)
        unit = clip_unit_of(algorithm)
        if unit is not None:  # the eps of the loss's own clip unit (no hard clip: neither, and
            # a clip setting such a loss never reads is not checked)
            eps = clip_range(config)
            if unit == "token":  # GMPO's clip of log r_t: r_t's range
                eps = verl_token_eps(algorithm, eps)
            opts.setdefault("seq_eps" if unit == "seq" else "token_eps", eps)
        opts.setdefault("reduction", str(config.loss_agg_mode))
        opts.setdefault(
            "name", os.environ.get(ENV_NAME) or self.experiment_name or f"verl-{loss_mode}"
        )
        cfg = verl_settings(config)
        cfg.update(opts.pop("config", None) or {})
        rec = RunRecorder(
            root=os.environ[ENV_ROOT].strip(), algorithm=algorithm, config=cfg, **opts
        )
        with rec.state.lock:
            rec.state.info.source = "verl"
        return rec

    def _log(self, config, capture: _MicroBatches, rollout, lag, outputs) -> None:
        import torch

        G = int(config.rollout_n) if isinstance(getattr(config, "rollout_n", None), int) else 1
        t, rewards, groups_known = _step_rows(capture.items, G)
        extra: dict[str, Any] = {
            "verl/micro_batches": len(capture.items),
            "verl/groups_known": float(groups_known),
            "grad_norm": _grad_norm(outputs),
        }
        self.recorder.log_step(
            self.step,
            rewards=rewards.to(t["logps"].device),
            logprobs=t["logps"],
            old_logprobs=t["old"].float(),
            mask=t["mask"],
            advantages=t["adv"].float(),
            ref_logprobs=t["ref"].float() if "ref" in t else None,
            entropy=t.get("entropy"),
            sampler_logprobs=t["sampler"].float() if "sampler" in t else None,
            loss=self._loss_output(t, torch.stack([mb["loss"] for mb in capture.items]).sum()),
            rollout=rollout,
            policy_lag=lag,
            extra=extra,
        )

    def _loss_output(self, t: dict[str, Any], loss: Any) -> Any:
        """verl's loss, with the attenuation of verl's loss mode (``loss_for("verl", ...)``) on
        the step's rows when it can be computed (else the loss alone: the attenuation unknown)."""
        import torch

        from gspo_metrics.losses import LossOutput

        if self.tool_loss is None:
            return loss
        try:
            with torch.no_grad():
                out = self.tool_loss(t["logps"], t["old"].float(), t["adv"].float(), t["mask"])
        except Exception as e:  # noqa: BLE001 - never stops training
            self.tool_loss = None
            _warn_once("attenuation", f"no attenuation recorded ({type(e).__name__}: {e})")
            return loss
        return LossOutput(loss, {"attenuation": out.per_sequence["attenuation"]})


def _grad_norm(outputs: Any) -> float | None:
    try:
        value = outputs["metrics"].get("grad_norm")
    except Exception:  # noqa: BLE001
        return None
    if value is None:
        return None
    return float(value.detach().item() if hasattr(value, "detach") else value)


def clip_range(config: Any) -> tuple[float, float]:
    """verl's clip range ``(clip_ratio_low, clip_ratio_high)``, as ``loss_for("verl", ...)``
    reads it (``tool_losses.verl_eps``: each falls back on ``clip_ratio`` when unset)."""
    from gspo_metrics.tool_losses import verl_eps

    return verl_eps(verl_loss_settings(config))


def verl_loss_settings(config: Any) -> dict[str, Any]:
    """The ``ActorConfig``'s settings ``loss_for("verl", ...)`` reads (``VERL_DEFAULTS``' names,
    flat, those of ``policy_loss`` included), as verl holds them: the ones it has."""
    from gspo_metrics.tool_losses import VERL_DEFAULTS

    # a dict, or verl's PolicyLossConfig: a Mapping whose ``in`` raises AttributeError, so .get
    policy_loss = getattr(config, "policy_loss", None) or {}
    out: dict[str, Any] = {}
    for key in VERL_DEFAULTS:
        value = policy_loss.get(key, getattr(config, key, _MISSING))
        if value is not _MISSING:
            out[key] = value
    out["loss_mode"] = _loss_mode(config)
    return out


_MISSING = object()


def _loss_mode(config: Any) -> str:
    policy_loss = getattr(config, "policy_loss", None) or {}  # (as in verl_loss_settings)
    return str(policy_loss.get("loss_mode", "vanilla"))


def verl_settings(config: Any) -> dict[str, Any]:
    """The run's verl settings: ``VERL_SETTINGS`` of the ``ActorConfig``, ``loss_mode`` and
    verl's version."""
    from .tool_versions import installed_version

    out: dict[str, Any] = {}
    for key in VERL_SETTINGS:
        value = getattr(config, key, None)
        if isinstance(value, bool | int | float | str) or value is None:
            out[key] = value
    out["loss_mode"] = _loss_mode(config)
    out["verl_version"] = installed_version("verl")
    return out


_SESSION: _Session | None = None
_warned: set[str] = set()


def _session() -> _Session:
    global _SESSION
    with _lock:
        if _SESSION is None:
            _SESSION = _Session()
        return _SESSION


def close(status: str | None = None) -> None:
    """Close this process's runs (also done at exit); the next step opens a new one."""
    global _SESSION
    with _lock:
        session, _SESSION = _SESSION, None
        _warned.clear()
    if session is not None:
        session.close(status)


def _warn_once(kind: str, message: str) -> None:
    if kind in _warned:
        return
    _warned.add(kind)
    warnings.warn(f"gspo-dash verl plugin: {message}; training goes on", RuntimeWarning, 2)


install()

__all__ = [
    "ENV_NAME",
    "ENV_ON_FINDING",
    "ENV_OPTIONS",
    "ENV_ROOT",
    "VERL_SETTINGS",
    "clip_range",
    "close",
    "configure",
    "install",
    "ppo_config",
    "verl_loss_settings",
    "verl_settings",
]
