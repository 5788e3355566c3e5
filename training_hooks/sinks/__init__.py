"""Sinks persist step records; each runs on its own background thread behind a bounded queue.

- ``base``: the ``Sink`` protocol, ``NullSink``, ``SinkFailed`` (a sink giving up for the rest of
  the run), and ``SinkWorker`` (the thread that drives one sink and turns its failures into
  reported faults).
- ``parquet``: ``ParquetSink``, the source of truth, and the Arrow table builders and writers.
- ``mlflow``: ``MlflowSink`` (MLflow's client in a child process), and the MLflow helpers that
  ``training_hooks.sync`` shares with it.

Importing this package imports no torch (``python -m training_hooks.sync`` relies on it).
"""

from __future__ import annotations

from .base import FaultCallback, NullSink, Sink, SinkFailed, SinkWorker
from .mlflow import MlflowSink, resolve_tracking_uri
from .parquet import ParquetSink

__all__ = [
    "FaultCallback",
    "MlflowSink",
    "NullSink",
    "ParquetSink",
    "Sink",
    "SinkFailed",
    "SinkWorker",
    "resolve_tracking_uri",
]
