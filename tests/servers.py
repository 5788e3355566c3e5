"""Servers the tests start themselves on 127.0.0.1: PostgreSQL, and ``mlflow server`` over SQLite
or over that PostgreSQL. The one place that launches ``mlflow server`` (``mlflow_server_process``)
and picks free ports (``free_port``).

Loaded as a plugin by ``conftest.py``. The session fixtures ``mlflow_server`` (SQLite store),
``postgres`` and ``team_mlflow`` start their servers on a thread right after collection (once the
``-m``/``-k`` selection is final) when a selected test asks for them, so initdb (about 5 s) and
MLflow's boot and schema migration (tens of seconds on a busy machine) overlap the tests that run
before. A server the selected tests do not ask for is never started.

PostgreSQL is Debian's ``postgresql`` package (``.ci/run`` installs it; its binaries live in
``/usr/lib/postgresql/<version>/bin``, off the PATH). ``initdb`` and ``postgres`` refuse to run as
root: as root the server runs as ``nobody`` in a temporary folder it owns; otherwise as the current
user. It listens on 127.0.0.1 only, on a free port, with its unix socket in that folder, password
authentication (scram-sha-256) and durability off (``fsync=off``: a test database). Missing
binaries or driver skip the tests with the reason, except where ``GSPO_DASH_REQUIRE_SERVERS=1``
(``.ci/run``, which installs both): there they fail.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

PG_START_TIMEOUT_S = 60.0
MLFLOW_START_TIMEOUT_S = 180.0  # mlflow server's import + migration on a loaded machine
UNPRIVILEGED_USER = "nobody"  # who runs PostgreSQL when the tests run as root
BINARIES = ("initdb", "postgres")


@dataclass(frozen=True)
class Postgres:
    """A running PostgreSQL server and the database made for MLflow."""

    port: int
    user: str
    password: str
    database: str
    folder: str  # data directory, socket and log live here
    host: str = "127.0.0.1"

    def uri(self, driver: str = "postgresql+psycopg2") -> str:
        """SQLAlchemy URI (the form ``mlflow server --backend-store-uri`` takes)."""
        return f"{driver}://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"


def unavailable(reason: str) -> None:
    """Skip the test for ``reason``; fail it instead under ``GSPO_DASH_REQUIRE_SERVERS=1`` (CI)."""
    if os.environ.get("GSPO_DASH_REQUIRE_SERVERS") == "1":
        pytest.fail(f"{reason} (GSPO_DASH_REQUIRE_SERVERS=1)")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port nobody listens on now (127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bin_dir() -> str | None:
    """Folder holding ``initdb`` and ``postgres``: ``$GSPO_DASH_PG_BIN``, Debian's newest
    ``/usr/lib/postgresql/<version>/bin``, else the PATH's; None when there is none."""
    candidates = [os.environ.get("GSPO_DASH_PG_BIN", "")]
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(versions, key=lambda p: int(p.split("/")[-2]), reverse=True)
    found = shutil.which("initdb")
    candidates.append(os.path.dirname(os.path.realpath(found)) if found else "")
    for folder in candidates:
        if folder and all(os.access(os.path.join(folder, b), os.X_OK) for b in BINARIES):
            return folder
    return None


def _run_as() -> pwd.struct_passwd | None:
    """The unprivileged account to run PostgreSQL as when we are root; None: ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        unavailable(f"running as root and there is no {UNPRIVILEGED_USER!r} user for PostgreSQL")


def _private_folder(owner: pwd.struct_passwd | None) -> str:
    """A 0700 temp folder owned by ``owner`` (the server's data, socket, password file, log)."""
    folder = tempfile.mkdtemp(prefix="gspo-dash-pg-")
    if owner is not None:
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    return folder


def _init_cluster(bindir: str, folder: str, owner, user: str, password: str) -> None:
    pwfile = os.path.join(folder, "pwfile")
    with open(pwfile, "w") as f:
        f.write(password + "\n")
    if owner is not None:
        os.chown(pwfile, owner.pw_uid, owner.pw_gid)
    cmd = [os.path.join(bindir, "initdb"), "-D", os.path.join(folder, "data"), "-U", user]
    cmd += ["--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8", "--no-locale"]
    cmd += ["--no-sync"]
    done = subprocess.run(
        cmd, user=owner.pw_name if owner else None, cwd=folder, capture_output=True, text=True
    )
    os.unlink(pwfile)
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed ({done.returncode}): {done.stderr[-1500:]}")


def _start_server(bindir: str, folder: str, owner, port: int) -> subprocess.Popen:
    cmd = [os.path.join(bindir, "postgres"), "-D", os.path.join(folder, "data")]
    cmd += ["-h", "127.0.0.1", "-p", str(port), "-k", folder]
    for setting in ("fsync=off", "synchronous_commit=off", "full_page_writes=off"):
        cmd += ["-c", setting]
    log = open(os.path.join(folder, "server.log"), "w")  # noqa: SIM115 -- the child holds it
    if owner is not None:
        os.chown(log.name, owner.pw_uid, owner.pw_gid)
    with log:
        return subprocess.Popen(
            cmd,
            user=owner.pw_name if owner else None,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in pytest reaches only us; we stop it
        )


def _log_tail(folder: str, name: str, n: int = 1500) -> str:
    try:
        with open(os.path.join(folder, name), errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def _create_database(pg: Postgres, proc: subprocess.Popen) -> None:
    """Wait until the server accepts a login, then create ``pg.database``."""
    import psycopg2

    t0 = time.monotonic()
    while True:
        try:
            conn = psycopg2.connect(
                host=pg.host, port=pg.port, user=pg.user, password=pg.password, dbname="postgres"
            )
            break
        except psycopg2.OperationalError:
            if proc.poll() is not None or time.monotonic() - t0 > PG_START_TIMEOUT_S:
                raise RuntimeError(
                    f"PostgreSQL did not start: {_log_tail(pg.folder, 'server.log')}"
                ) from None
            time.sleep(0.2)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{pg.database}"')
    finally:
        conn.close()


def stop_group(proc: subprocess.Popen, first: int = signal.SIGTERM, wait_s: float = 5.0) -> None:
    """Signal ``proc``'s process group (``first``, then SIGKILL) and reap it."""
    for sig in (first, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def running_postgres(database: str = "mlflow") -> Iterator[Postgres]:
    """initdb a temp cluster, start it on 127.0.0.1:<free port>, create ``database``; stop it and
    delete everything on exit. Skips when the binaries or psycopg2 are missing."""
    bindir = postgres_bin_dir()
    if bindir is None:
        unavailable("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")
    try:
        import psycopg2  # noqa: F401 -- MLflow's driver for postgresql+psycopg2:// URIs
    except ImportError:
        unavailable("psycopg2 is missing (pip install psycopg2-binary)")
    owner = _run_as()
    folder = _private_folder(owner)
    pg = Postgres(free_port(), "gspo", secrets.token_hex(12), database, folder)
    proc = None
    try:
        _init_cluster(bindir, folder, owner, pg.user, pg.password)
        proc = _start_server(bindir, folder, owner, pg.port)
        _create_database(pg, proc)
        yield pg
    finally:
        if proc is not None:
            stop_group(proc, signal.SIGINT)  # SIGINT: PostgreSQL's "fast" shutdown
        shutil.rmtree(folder, ignore_errors=True)


def _wait_healthy(url: str, proc: subprocess.Popen, log_path: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < MLFLOW_START_TIMEOUT_S and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    with open(log_path, errors="replace") as f:
        tail = f.read()[-1500:]
    raise RuntimeError(f"mlflow server at {url} did not start: {tail}")


@contextlib.contextmanager
def mlflow_server_process(
    backend_store_uri: str, folder: str | None = None
) -> Iterator[tuple[subprocess.Popen, str]]:
    """``mlflow server`` on 127.0.0.1:<free port> over ``backend_store_uri``, artifacts proxied
    into ``folder`` (a temp folder, deleted on exit, when not given); yields (process, URL) once
    /health answers, and stops its process group on exit, even a frozen one (SIGSTOP)."""
    own = folder is None
    folder = folder or tempfile.mkdtemp(prefix="gspo-dash-mlflow-")
    port = free_port()
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri]
    cmd += ["--artifacts-destination", os.path.join(folder, "artifacts")]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    # the GenAI job consumers (several processes) serve nothing these tests use
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log_path = os.path.join(folder, f"server-{port}.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # stopped with every worker it spawns
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log_path)
        yield proc, url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)  # a test may have frozen it
        stop_group(proc)
        if own:
            shutil.rmtree(folder, ignore_errors=True)


class _Boot:
    """PostgreSQL, then (when asked) the ``mlflow server`` on it, each started on a thread so that
    they boot while other tests run; the fixtures wait for them; stopped at session end."""

    def __init__(self):
        self.stack = contextlib.ExitStack()
        self.postgres: Postgres | None = None
        self.url: str | None = None
        self.sqlite_url: str | None = None
        self.errors: dict[str, BaseException] = {}
        self.threads: dict[str, threading.Thread] = {}

    def _thread(self, name: str, target) -> threading.Thread:
        def run() -> None:
            try:
                target()
            except BaseException as e:  # noqa: BLE001 -- pytest.skip's too: raised by wait()
                self.errors[name] = e

        thread = threading.Thread(target=run, name=f"gspo-dash-{name}", daemon=True)
        thread.start()
        return thread

    def _start_postgres(self) -> None:
        self.postgres = self.stack.enter_context(running_postgres())

    def _start_mlflow(self) -> None:
        self.wait("postgres")
        _, self.url = self.stack.enter_context(mlflow_server_process(self.postgres.uri()))

    def _start_sqlite_mlflow(self) -> None:
        folder = self.stack.enter_context(tempfile.TemporaryDirectory(prefix="gspo-dash-mlflow-"))
        uri = f"sqlite:///{folder}/server.db"
        _, self.sqlite_url = self.stack.enter_context(mlflow_server_process(uri, folder))

    def start(self, name: str) -> None:
        """Start server ``name`` ("postgres", "mlflow" on it, "sqlite_mlflow") on a thread."""
        if name == "mlflow":
            self.start("postgres")
        if name not in self.threads:
            target = {
                "postgres": self._start_postgres,
                "mlflow": self._start_mlflow,
                "sqlite_mlflow": self._start_sqlite_mlflow,
            }[name]
            self.threads[name] = self._thread(name, target)

    def wait(self, name: str) -> None:
        self.threads[name].join()
        if name in self.errors:
            raise self.errors[name]

    def postgres_server(self) -> Postgres:
        """The PostgreSQL server, once it accepts logins."""
        self.start("postgres")
        self.wait("postgres")
        return self.postgres

    def mlflow_url(self) -> str:
        """The ``mlflow server`` on PostgreSQL: its URL, once it answers /health."""
        self.start("mlflow")
        self.wait("mlflow")
        return self.url

    def sqlite_mlflow_url(self) -> str:
        """The ``mlflow server`` on SQLite: its URL, once it answers /health."""
        self.start("sqlite_mlflow")
        self.wait("sqlite_mlflow")
        return self.sqlite_url

    def stop(self) -> None:
        for thread in self.threads.values():
            thread.join()
        self.stack.close()


_BOOT: list[_Boot] = []  # the session's, once started

# which server each fixture needs
FIXTURE_SERVERS = {
    "postgres": "postgres",
    "team_mlflow_boot": "mlflow",
    "team_mlflow": "mlflow",
    "mlflow_server": "sqlite_mlflow",
}


def _boot() -> _Boot:
    if not _BOOT:
        _BOOT.append(_Boot())
    return _BOOT[0]


def pytest_collection_finish(session):
    """Start the servers the selected tests need, once the selection is final."""
    wanted = set().union(*(getattr(item, "fixturenames", ()) for item in session.items))
    for fixture, server in FIXTURE_SERVERS.items():
        if fixture in wanted:
            _boot().start(server)


def pytest_sessionfinish(session, exitstatus):
    while _BOOT:
        _BOOT.pop().stop()


def _ready(get):
    try:
        return get()
    except RuntimeError as e:  # the server did not start: its log tail says why
        unavailable(str(e))


@pytest.fixture(scope="session")
def postgres() -> Postgres:
    """A PostgreSQL server for the session (database ``mlflow``), on 127.0.0.1."""
    return _ready(_boot().postgres_server)


@pytest.fixture(scope="session")
def team_mlflow_boot() -> _Boot:
    """The session's servers, still booting: ``.mlflow_url()`` waits for the ``mlflow server``
    (for a test with work to do meanwhile)."""
    boot = _boot()
    boot.start("mlflow")
    return boot


@pytest.fixture(scope="session")
def team_mlflow(team_mlflow_boot) -> str:
    """URL of an ``mlflow server`` backed by the session's PostgreSQL, on 127.0.0.1."""
    return _ready(team_mlflow_boot.mlflow_url)


@pytest.fixture(scope="session")
def mlflow_server() -> str:
    """URL of an ``mlflow server`` over a SQLite store, on 127.0.0.1, shared by the session."""
    return _ready(_boot().sqlite_mlflow_url)
