"""Where the app looks for runs: CLI arguments after ``--``, then the environment, then defaults."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = "runs"
DEFAULT_MLFLOW_DB = "mlflow.db"
ENV_ROOT = "GSPO_DASH_ROOT"
ENV_TRACKING = "MLFLOW_TRACKING_URI"


@dataclass(frozen=True)
class Settings:
    root: str  # the folder holding one sub-folder per run
    tracking_uri: str | None  # an MLflow store whose runs are listed too; None: none


def parse_settings(argv: Sequence[str] | None = None, env: dict | None = None) -> Settings:
    """Root and tracking URI from ``argv`` (``--root``, ``--tracking-uri``), else the environment
    (``GSPO_DASH_ROOT``, ``MLFLOW_TRACKING_URI``), else ``./runs`` and ``./mlflow.db`` if present.
    Unknown arguments are ignored (under ``AppTest`` argv is pytest's)."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--root")
    parser.add_argument("--tracking-uri")
    args, _ = parser.parse_known_args(list(argv or []))
    root = args.root or env.get(ENV_ROOT) or DEFAULT_ROOT
    uri = args.tracking_uri or env.get(ENV_TRACKING)
    if not uri and Path(DEFAULT_MLFLOW_DB).is_file():
        uri = f"sqlite:///{DEFAULT_MLFLOW_DB}"
    return Settings(root=root, tracking_uri=uri or None)
