"""The typed records that cross the app's module boundaries: a run the app can show (``RunRef``), a
read table with its problems (``Table``, declared in ``training_hooks.tables`` beside the reader
it shares with a run's summary), what a root holds (``Discovery``); and the one way an exception
becomes part of a problem sentence (``short_error``, from there too).

Problems are plain sentences naming the run and the reason; the readers return them beside whatever
could be read and never raise on bad data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from training_hooks.schema import RunInfo
from training_hooks.tables import Table, short_error  # noqa: F401 -- (their one home)

SOURCE_PARQUET = "parquet"
SOURCE_MLFLOW = "mlflow"


@dataclass(frozen=True)
class RunRef:
    """One run the app can show, from a run folder or from an MLflow store."""

    key: str  # unique in the app: the run_id, or "mlflow:<mlflow run id>"
    name: str
    algorithm: str  # the loss that ran ("grpo", "gspo", "cispo": spec.algorithm_label), "?" unknown
    status: str  # as written (running/finished/failed) or the app's verdict "crashed"
    source: str  # SOURCE_PARQUET or SOURCE_MLFLOW
    path: str | None = None  # the run folder (Parquet runs): a local path or an object-store URI
    info: RunInfo | None = None
    problems: tuple[str, ...] = ()
    tracking_uri: str | None = None
    mlflow_run_id: str | None = None
    metric_keys: tuple[str, ...] = ()  # MLflow-only runs: the logged metric names
    params: dict = field(default_factory=dict, hash=False, compare=False)
    last_step: int | None = None
    updated_at: float | None = None
    has_sequences: bool = False
    has_tokens: bool = False
    stamp: tuple = ()  # Parquet runs: what the folder held when discovered (app.discovery)

    @property
    def label(self) -> str:
        return self.name if self.name == self.key else f"{self.name} ({self.key})"


@dataclass(frozen=True)
class Discovery:
    """The runs found under a root (and in an MLflow store), newest first."""

    runs: list[RunRef]
    problems: list[str]  # about the root or the store itself
    reading: int = 0  # run folders listed whose run.json is still being read (not in ``runs``)
    pending: tuple[str, ...] = ()  # those folders' names, in the order they are read
