"""What the server was started with: CLI arguments after ``--``, then the environment, then
defaults. The browser can change none of it; what the sidebar may change (a root, a tracking URI
on the allow-list or an existing MLflow SQLite store) is checked against it (``app.ui``,
``app.mlflow_store.typed_uri_problem``).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = "runs"
DEFAULT_MLFLOW_DB = "mlflow.db"
ENV_ROOT = "GSPO_DASH_ROOT"
ENV_TRACKING = "MLFLOW_TRACKING_URI"
ENV_READ_ONLY = "GSPO_DASH_READ_ONLY"
ENV_ALLOWED_URIS = "GSPO_DASH_TRACKING_URIS"
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Settings:
    root: str  # the folder holding one sub-folder per run
    tracking_uri: str | None  # an MLflow store whose runs are listed too; None: none
    read_only: bool = False  # team mode: root and URI fixed, no import form, nothing written
    allowed_uris: tuple[str, ...] = ()  # tracking URIs the sidebar may switch to (besides ours)

    def trusted_uris(self) -> frozenset[str]:
        """The URIs the server was started with: its own and the allow-list."""
        return frozenset(self.allowed_uris + ((self.tracking_uri,) if self.tracking_uri else ()))


def parse_settings(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> Settings:
    """Root and tracking URI from ``argv`` (``--root``, ``--tracking-uri``), else the environment
    (``GSPO_DASH_ROOT``, ``MLFLOW_TRACKING_URI``), else ``./runs``. ``./mlflow.db`` (if present) is
    read on its own only when neither a root nor a tracking URI was given: with an explicit root,
    an MLflow store is read only when named.
    Read-only mode: ``--read-only`` or ``GSPO_DASH_READ_ONLY=1``. Extra tracking URIs the sidebar
    may switch to: ``--allow-tracking-uri URI`` (repeatable) plus ``GSPO_DASH_TRACKING_URIS``
    (separated by commas or spaces). Unknown arguments are ignored (under ``AppTest`` argv is
    pytest's)."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--root")
    parser.add_argument("--tracking-uri")
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--allow-tracking-uri", action="append", default=[])
    args, _ = parser.parse_known_args(list(argv or []))
    given_root = args.root or env.get(ENV_ROOT)
    root = given_root or DEFAULT_ROOT
    uri = args.tracking_uri or env.get(ENV_TRACKING)
    if not uri and not given_root and Path(DEFAULT_MLFLOW_DB).is_file():
        uri = f"sqlite:///{DEFAULT_MLFLOW_DB}"
    read_only = args.read_only or str(env.get(ENV_READ_ONLY, "")).strip().lower() in _TRUE
    allowed = args.allow_tracking_uri + re.split(r"[,\s]+", env.get(ENV_ALLOWED_URIS) or "")
    return Settings(
        root=root,
        tracking_uri=uri or None,
        read_only=read_only,
        allowed_uris=tuple(dict.fromkeys(u for u in allowed if u)),
    )


# ------------------------------------------------ paths typed in the browser (the import form)


def import_source(text: str) -> Path:
    """The import form's source path: resolved (symlinks followed; relative to the server's working
    folder), and an existing, readable regular file or folder. Anything else (missing, a device,
    a FIFO, a socket, unreadable) raises ValueError saying why, before anything is opened."""
    raw = text.strip()
    if not raw or "\x00" in raw:
        raise ValueError(f"{raw!r} is not a path")
    try:
        path = Path(raw).resolve(strict=True)
        is_dir, is_file = path.is_dir(), path.is_file()
    except (OSError, RuntimeError) as e:  # missing, a symlink loop, no permission
        why = getattr(e, "strerror", None) or e
        raise ValueError(f"{raw!r} does not exist or cannot be reached ({why})") from e
    if not (is_dir or is_file):
        raise ValueError(f"{str(path)!r} is neither a regular file nor a folder")
    if not os.access(path, os.R_OK | (os.X_OK if is_dir else 0)):
        raise ValueError(f"{str(path)!r} is not readable by the server")
    return path


def import_root(root: str) -> Path:
    """The root an import writes into: an existing folder (the form never creates one)."""
    path = Path(root)
    if not path.is_dir():
        raise ValueError(
            f"the runs root {root!r} is not an existing folder; an import writes only into one"
        )
    return path
