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
def serve(
    root: str | os.PathLike,
    *,
    cwd: str | os.PathLike,
    timeout_s: float = 30.0,
    main: str | os.PathLike = MAIN,
) -> Iterator[str]:
    """``streamlit run app/main.py -- --root ROOT`` on 127.0.0.1 (no MLflow store), its output in
    ``cwd/streamlit.log``; yields the base URL once ``/_stcore/health`` answers and stops the server
    on exit. Raises ``AppDidNotStart`` (with the log) when it does not answer within ``timeout_s``.
    ``main``: another checkout's ``app/main.py`` (a benchmark's before/after)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    log_path = Path(cwd) / "streamlit.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", os.fspath(main)]
            + ["--server.port", str(port), "--server.address", "127.0.0.1"]
            + ["--server.headless", "true", "--browser.gatherUsageStats", "false"]
            + ["--", "--root", os.fspath(root)],
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(base, proc, timeout_s, log, log_path)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _wait_healthy(base: str, proc: subprocess.Popen, timeout_s: float, log, log_path) -> None:
    deadline = time.time() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.time() > deadline or proc.poll() is not None:
            log.flush()
            raise AppDidNotStart("streamlit did not start: " + log_path.read_text())
        time.sleep(0.2)


def launch_chromium(playwright):
    """Debian's Chromium, headless, through a ``sync_playwright()`` handle (never a downloaded
    browser build)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
