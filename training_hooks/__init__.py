"""training_hooks: record every step of a GRPO/GSPO loop to Parquet and MLflow, off the hot path.

    from training_hooks import RunRecorder, step_diagnostics

``RunRecorder`` (settings: ``RecorderSettings``) checks a step's inputs once (``log_step``'s
arguments: ``StepArgs``; checked: ``StepInputs``), computes every diagnostic with ``gspo_metrics`` on the tensors' device (``compute.reduce_step``),
moves the small per-sequence results to the host in one transfer, and hands them to background
sinks (``ParquetSink``, the source of truth; ``MlflowSink``). ``step_diagnostics`` returns the same
numbers without recording them. The on-disk format is declared in ``training_hooks.schema``.

Names are imported lazily, so ``training_hooks.schema`` and ``python -m training_hooks.sync`` do
not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_EXPORTS = {
    "DEFAULT_SEQ_EPS": "compute",
    "DEFAULT_TOKEN_EPS": "compute",
    "StepRecord": "compute",
    "step_diagnostics": "compute",
    "StepArgs": "inputs",
    "StepInputs": "inputs",
    "RecorderSettings": "recorder",
    "RunRecorder": "recorder",
    "RunState": "recorder",
    "new_run_id": "recorder",
    "NullSink": "sinks",
    "ParquetSink": "sinks",
    "Sink": "sinks",
    "SinkWorker": "sinks",
    "MlflowSink": "sinks",
    "resolve_tracking_uri": "sinks",
}

__all__ = [
    "DEFAULT_SEQ_EPS",
    "DEFAULT_TOKEN_EPS",
    "MlflowSink",
    "NullSink",
    "ParquetSink",
    "RecorderSettings",
    "RunRecorder",
    "RunState",
    "Sink",
    "SinkWorker",
    "StepArgs",
    "StepInputs",
    "StepRecord",
    "new_run_id",
    "resolve_tracking_uri",
    "step_diagnostics",
]

if TYPE_CHECKING:
    from .compute import (
        DEFAULT_SEQ_EPS,
        DEFAULT_TOKEN_EPS,
        StepRecord,
        step_diagnostics,
    )
    from .inputs import StepArgs, StepInputs
    from .recorder import RecorderSettings, RunRecorder, RunState, new_run_id
    from .sinks import MlflowSink, NullSink, ParquetSink, Sink, SinkWorker, resolve_tracking_uri


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'training_hooks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
