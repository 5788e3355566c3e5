"""Run the dashboard as a user does, for the end-to-end tests and the benchmark
(``bench/bench_dashboard.py``): ``streamlit run app/main.py`` in a child process on a free local
port, opened in Debian's headless Chromium. Test code: not part of the installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servers import free_port

from app import cli
from app.pages import MAIN

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
]


class AppDidNotStart(RuntimeError):
    """The server did not answer its health check in time (the message holds its log)."""


@contextmanager
def running(
    cmd: list[str],
    *,
    cwd: str | os.PathLike,
    port: int,
    log_path: Path,
    env: dict[str, str] | None = None,
    timeout_s: float = 30.0,
) -> Iterator[subprocess.Popen]:
    """Run a dashboard command (``streamlit run ...``, ``gspo-dash ...``) in ``cwd``, its output
    in ``log_path``, until ``/_stcore/health`` answers on 127.0.0.1:``port``; yield the process
    and stop it on exit. Raises ``AppDidNotStart`` (with the log) when it exits or does not
    answer within ``timeout_s``."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while not _healthy(f"http://127.0.0.1:{port}"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise AppDidNotStart("the dashboard did not start: " + log_path.read_text())
                time.sleep(0.2)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextmanager
def serve(
    root: str | os.PathLike,
    *,
    cwd: str | os.PathLike,
    timeout_s: float = 30.0,
    main: str | os.PathLike = MAIN,
) -> Iterator[str]:
    """``streamlit run app/main.py -- --root ROOT`` on 127.0.0.1 with the settings ``gspo-dash``
    passes (``app.cli.SERVER_OPTIONS``; no MLflow store), its output in
    ``cwd/streamlit.log``; yields the base URL once ``/_stcore/health`` answers and stops the server
    on exit. Raises ``AppDidNotStart`` (with the log) when it does not answer within ``timeout_s``.
    ``main``: another checkout's ``app/main.py`` (a benchmark's before/after)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    options = cli.SERVER_OPTIONS | {"server.port": port, "server.headless": True}
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        os.fspath(main),
        *cli.option_flags(options),
    ] + ["--", "--root", os.fspath(root)]
    log_path = Path(cwd) / "streamlit.log"
    with running(cmd, cwd=cwd, port=port, log_path=log_path, env=env, timeout_s=timeout_s):
        yield f"http://127.0.0.1:{port}"


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def launch_chromium(playwright):
    """Debian's Chromium, headless, through a ``sync_playwright()`` handle (never a downloaded
    browser build)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
