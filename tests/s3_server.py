"""A local S3-compatible server for the tests: moto's server mode on 127.0.0.1.

``s3_server`` (session fixture) starts ``python -m moto.server -H 127.0.0.1 -p PORT`` on a free
port, points the standard AWS environment at it (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``) for the session, and stops it at the end;
``s3_root`` gives each test its own bucket. ``OutageProxy`` sits between a client and the server
and can refuse every connection (an S3 outage) until it is told to forward again.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest
from servers import free_port

ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")


def _wait_until_up(url: str, proc: subprocess.Popen, log_path: str, timeout_s: float = 60) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    with open(log_path) as f:
        tail = f.read()[-1500:]
    pytest.skip(f"moto server did not answer on {url} within {timeout_s:.0f} s: {tail}")


@pytest.fixture(scope="session")
def s3_server():
    """The endpoint URL of a moto S3 server on 127.0.0.1; the AWS environment points at it."""
    pytest.importorskip("moto")
    port = free_port()
    log_path = os.path.join(tempfile.mkdtemp(prefix="gspo-dash-moto-"), "moto.log")
    log = open(log_path, "w")  # noqa: SIM115 -- closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    saved = {k: os.environ.get(k) for k in ENV}
    try:
        _wait_until_up(url, proc, log_path)
        os.environ.update(
            AWS_ENDPOINT_URL=url,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
        )
        yield url
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=5)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        log.close()


@pytest.fixture
def s3_root(s3_server) -> str:
    """A fresh bucket and prefix for one test: ``s3://gspo-<hex>/runs``."""
    return f"s3://gspo-{secrets.token_hex(4)}/runs"


class OutageProxy:
    """A TCP proxy to ``target_port`` on 127.0.0.1; while ``down`` it resets every connection
    (new and open ones), as an unreachable S3 endpoint would."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.down = False
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_down(self, down: bool) -> None:
        self.down = down
        if down:
            with self._lock:
                for s in list(self._open):
                    _close(s)
                self._open.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            if self.down:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if self.down:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            _close(src)
            _close(dst)

    def close(self) -> None:
        self.set_down(True)
        _close(self._sock)


def _close(s: socket.socket) -> None:
    try:
        s.close()
    except OSError:
        pass
