"""Safe by default: the server listens on loopback only (the README's command and
``gspo-dash``), read-only mode writes nothing, and what a browser types (tracking URIs, import paths,
URL query parameters) cannot make the server create files, open stores or connect elsewhere."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import socket
import sqlite3
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from launch import running
from servers import free_port
from streamlit.testing.v1 import AppTest

from app import cli, pages
from app.mlflow_store import sqlite_store_problem, store_problem, typed_uri_problem
from app.pages import MAIN
from app.settings import Settings, import_root, import_source, parse_settings

REPO = Path(__file__).resolve().parents[1]
PAGES = tuple(page.url_path for page in pages.PAGES)  # every page of the app
TIMEOUT = 60


# ----------------------------------------------------------------------------- helpers


def tree_snapshot(*folders: Path) -> dict[str, tuple[int, int, str]]:
    """{path: (size, mtime_ns, sha1)} of every file and folder under ``folders``."""
    out = {}
    for folder in folders:
        for dirpath, _dirnames, filenames in os.walk(folder):
            out[dirpath] = (0, 0, "dir")
            for name in filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                digest = hashlib.sha1(Path(p).read_bytes()).hexdigest() if os.path.isfile(p) else ""
                out[p] = (st.st_size, st.st_mtime_ns, digest)
    return out


def open_page(page: str, state: dict | None = None, query: dict | None = None) -> AppTest:
    """AppTest on ``page`` (after the Runs page), with session state and URL query parameters."""
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    if page != pages.HOME.url_path:
        at.switch_page(pages.script(page)).run()
    return at


def proto_dicts(node):
    """Every element and block of an AppTest tree under ``node``, as a dict of its proto."""
    proto = getattr(node, "proto", None)
    if proto is not None:
        yield MessageToDict(proto)
    for child in (getattr(node, "children", None) or {}).values():
        yield from proto_dicts(child)


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of the TCP sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, p = local.split(":")
            if state != "0A" or int(p, 16) != port:  # 0A = LISTEN
                continue
            raw = bytes.fromhex(addr)  # 32-bit words in host (little-endian) order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(socket.inet_ntop(family, raw))
    return found


def _other_address() -> str | None:
    """A non-loopback IPv4 address of this host, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing interface
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def _websocket_status(port: int, host: str, origin: str) -> int:
    """HTTP status of a WebSocket upgrade to the app's stream with these Host and Origin headers."""
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request.encode())
        return int(s.recv(200).split()[1])


@contextmanager
def _server(cmd: list[str], cwd: Path, port: int, logs: Path):
    """Run a dashboard command in ``cwd`` until /_stcore/health answers on 127.0.0.1:port (its
    output in ``logs``); stop it after."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    env |= {"PYTHONPATH": str(REPO), "STREAMLIT_SERVER_HEADLESS": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log_path = logs / f"server-{port}.log"
    with running(cmd, cwd=cwd, port=port, log_path=log_path, env=env, timeout_s=90):
        yield log_path


def _assert_loopback_only(port: int) -> None:
    """Listening on 127.0.0.1 alone; another address of this host is refused; WebSocket
    connections are refused for a foreign Host (DNS rebinding) or a foreign Origin."""
    assert _listening_addresses(port) == {"127.0.0.1"}
    other = _other_address()
    if other is not None:
        with pytest.raises(OSError):
            socket.create_connection((other, port), timeout=3).close()
    here = f"127.0.0.1:{port}"
    assert _websocket_status(port, here, f"http://{here}") == 101
    assert _websocket_status(port, f"localhost:{port}", f"http://localhost:{port}") == 101
    assert _websocket_status(port, f"evil.example:{port}", f"http://evil.example:{port}") == 403
    assert _websocket_status(port, here, "http://evil.example") == 403


# ----------------------------------------------------------------------------- 1. loopback


def test_config_toml_holds_the_cli_settings():
    """`.streamlit/config.toml` (the README's command) and `gspo-dash` apply the same settings."""
    conf = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    flat = {f"{section}.{k}": v for section, opts in conf.items() for k, v in opts.items()}
    assert flat == cli.SERVER_OPTIONS
    assert flat["server.address"] == "127.0.0.1" and flat["client.toolbarMode"] == "viewer"
    assert flat["browser.gatherUsageStats"] is False
    assert flat["server.enableXsrfProtection"] is True


def test_console_script_is_declared():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["gspo-dash"] == "app.cli:main"


def test_cli_builds_the_streamlit_command():
    """Defaults: 127.0.0.1:8501, loopback Host names; app arguments only when given."""
    cmd = cli.streamlit_command(cli.parser().parse_args([]))
    assert cmd[:5] == [sys.executable, "-m", "streamlit", "run", MAIN]
    pairs = list(zip(cmd[5::2], cmd[6::2], strict=True))
    assert ("--server.address", "127.0.0.1") in pairs and ("--server.port", "8501") in pairs
    assert [v for k, v in pairs if k == "--server.allowedHosts"] == [
        "localhost",
        "127.0.0.1",
        "::1",
    ]
    assert ("--client.toolbarMode", "viewer") in pairs
    assert ("--browser.gatherUsageStats", "false") in pairs
    assert "--" not in cmd

    args = ["--root", "/r", "--tracking-uri", "sqlite:///m.db", "--read-only", "--port", "9000"]
    cmd = cli.streamlit_command(cli.parser().parse_args(args))
    assert cmd[cmd.index("--") :] == [
        "--",
        *("--root", "/r", "--tracking-uri", "sqlite:///m.db", "--read-only"),
    ]
    assert parse_settings(cmd[cmd.index("--") + 1 :], {}) == Settings(
        "/r", "sqlite:///m.db", read_only=True
    )


def test_cli_passes_streamlit_flags_through():
    """`gspo-dash --server.port 9000 --server.headless true`: Streamlit's own flags reach
    `streamlit run` and win over the defaults; a flag that is neither ours nor Streamlit's form
    is refused by name; --server.address is judged as --host (allowed Host names follow it)."""
    args, extra = cli.parser().parse_known_args(
        ["--root", "/r", "--server.port", "9000", "--server.headless", "true", "--theme.base=dark"]
    )
    cmd = cli.streamlit_command(args, extra)
    flags = cmd[5 : cmd.index("--")]
    pairs = list(zip(flags[::2], flags[1::2], strict=True))
    assert [v for k, v in pairs if k == "--server.port"] == ["9000"]  # not 8501 as well
    assert ("--server.headless", "true") in pairs and ("--theme.base", "dark") in pairs
    assert cmd[cmd.index("--") :] == ["--", "--root", "/r"]
    cmd = cli.streamlit_command(*cli.parser().parse_known_args(["--server.address", "10.0.0.5"]))
    pairs = list(zip(cmd[5::2], cmd[6::2], strict=True))
    assert [v for k, v in pairs if k == "--server.address"] == ["10.0.0.5"]
    assert "10.0.0.5" in [v for k, v in pairs if k == "--server.allowedHosts"]
    for bad in (["--bogus"], ["--server.port"], ["server.port", "1"]):
        with pytest.raises(SystemExit, match="gspo-dash"):
            cli.streamlit_options(bad)


def test_allowed_hosts_follow_the_listening_address():
    assert cli.allowed_hosts("127.0.0.1", []) == ["localhost", "127.0.0.1", "::1"]
    assert cli.allowed_hosts("10.0.0.5", []) == ["localhost", "127.0.0.1", "::1", "10.0.0.5"]
    assert cli.allowed_hosts("0.0.0.0", []) == ["*"]  # every interface: no name to check
    assert cli.allowed_hosts("0.0.0.0", ["dash.example"])[-1] == "dash.example"


@pytest.mark.slow
def test_readme_command_listens_on_loopback_only(tmp_path):
    """`streamlit run app/main.py` from the checkout (the README's command, no address flag):
    127.0.0.1 only, no "Network URL", foreign Host/Origin WebSockets refused."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", "app/main.py", "--server.port", str(port)]
    with _server(cmd + ["--", "--root", str(tmp_path)], REPO, port, tmp_path) as log:
        _assert_loopback_only(port)
        text = log.read_text()
    assert f"http://127.0.0.1:{port}" in text and "Network URL" not in text


@pytest.mark.slow
def test_gspo_dash_listens_on_loopback_only_from_any_folder(tmp_path):
    """`gspo-dash` (app.cli:main) started in a folder without config.toml: the same guarantees."""
    port = free_port()
    cmd = [sys.executable, "-m", "app.cli", "--port", str(port), "--root", str(tmp_path)]
    with _server(cmd, tmp_path, port, tmp_path):
        _assert_loopback_only(port)


# ----------------------------------------------------------------------------- 2. read-only


def test_settings_read_only_and_allow_list():
    env = {"GSPO_DASH_READ_ONLY": "1", "GSPO_DASH_TRACKING_URIS": "http://a:5000, http://b"}
    s = parse_settings(["--tracking-uri", "http://me", "--allow-tracking-uri", "http://c"], env)
    assert s.read_only and s.allowed_uris == ("http://c", "http://a:5000", "http://b")
    assert s.trusted_uris() == {"http://me", "http://c", "http://a:5000", "http://b"}
    assert parse_settings(["--read-only"], {}).read_only
    assert not parse_settings([], {"GSPO_DASH_READ_ONLY": "0"}).read_only
    assert parse_settings([], {"GSPO_DASH_READ_ONLY": "true"}).read_only


@pytest.mark.slow
def test_read_only_mode_writes_nothing(root_copy, app_env, mlflow_uri, monkeypatch, tmp_path):
    """GSPO_DASH_READ_ONLY=1: root and URI shown as text (no inputs, state injection ignored), no
    import form, every page draws, and no file under the cwd, the root or the store changes."""
    from test_app_data import _log_trl_run

    _log_trl_run(mlflow_uri)
    app_env(root_copy)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_uri)
    monkeypatch.setenv("GSPO_DASH_READ_ONLY", "1")
    before = tree_snapshot(tmp_path)
    injected = {"root": "/", "tracking_uri": "sqlite:///made-by-browser.db", "import_path": "/etc"}
    for page in PAGES:
        at = open_page(page, injected)
        assert_clean(at)
        assert at.title[0].value
        typed = {t.key for t in at.text_input}
        # no root, URI or import path input anywhere: only the Runs filter, Compare's search
        # and the verdict's GROUP=COLUMN items (view state, never a path)
        assert typed <= {"runs_filter", "metric_search", "verdict_group_metrics"}, typed
        assert [c.value for c in at.sidebar.code] == [str(root_copy), mlflow_uri]
        if page == "runs":
            assert len(at.dataframe[0].value) == 3  # two Parquet runs and the MLflow-only one
            assert not at.get("form")
            assert not [e for e in at.expander if "Import" in e.label]
    assert tree_snapshot(tmp_path) == before
    assert not (tmp_path / "made-by-browser.db").exists() and not (tmp_path / "mlruns").exists()


AUTH = {  # the [auth] section of .streamlit/secrets.toml (Streamlit's OIDC login)
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "not-a-secret",
    "client_id": "gspo-dash",
    "client_secret": "not-a-secret",
    "server_metadata_url": "https://accounts.example.com/.well-known/openid-configuration",
}


@pytest.mark.slow
def test_oidc_login_gates_every_page(root_copy, app_env):
    """With an [auth] section in secrets.toml, a visitor sees a login button and nothing else (no
    sidebar, no runs); once logged in, the pages draw and the sidebar offers a logout."""
    app_env(root_copy)
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.secrets["auth"] = AUTH
    at.run()
    assert not at.exception
    assert [b.key for b in at.button] == ["login"] and not at.sidebar.text_input
    assert not at.dataframe and not at.get("plotly_chart") and not at.warning
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.secrets["auth"] = AUTH
    at.user["is_logged_in"] = True
    at.run()
    assert_clean(at)
    assert len(at.dataframe[0].value) == 2
    assert at.sidebar.button(key="logout").label == "Log out"


# ----------------------------------------------------------------------------- 3. URIs


def _sqlite_file(path: Path, sql: str) -> Path:
    con = sqlite3.connect(path)
    con.executescript(sql)
    con.close()
    return path


def test_typed_tracking_uri_rules(tmp_path, mlflow_uri):
    """Typed in the browser: only the server's URIs or an existing, complete MLflow SQLite store.
    Refused URIs name the reason; checking one creates, migrates or changes nothing."""
    store = Path(mlflow_uri[len("sqlite:///") :])
    assert typed_uri_problem(mlflow_uri, set()) is None
    trusted = {"http://tracking:5000"}
    assert typed_uri_problem("http://tracking:5000", trusted) is None
    for uri in ("http://127.0.0.1:1", "https://example.com", "file:///tmp", "/tmp", "mlruns"):
        assert "refused" in typed_uri_problem(uri, trusted), uri
    assert "refused" in typed_uri_problem("postgresql://u@db/mlflow", trusted)

    plain = _sqlite_file(tmp_path / "plain.db", "CREATE TABLE x (a);")
    old = _sqlite_file(tmp_path / "old.db", "CREATE TABLE experiments (experiment_id);")
    no_default = tmp_path / "no-default.db"
    shutil.copyfile(store, no_default)
    _sqlite_file(no_default, "DELETE FROM experiments WHERE experiment_id = 0;")
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "text.db").write_text("not a database" * 10)
    cases = {
        f"sqlite:///{tmp_path}/new/folder/m.db": "does not exist",
        f"sqlite:///{tmp_path}/empty.db": "not an SQLite database",
        f"sqlite:///{tmp_path}/text.db": "not an SQLite database",
        f"sqlite:///{plain}": "missing tables",
        f"sqlite:///{old}": "missing tables",
        f"sqlite:///{no_default}": "no default experiment",
        f"sqlite:///{tmp_path}": "does not exist",  # a folder
        f"sqlite:///{store}?mode=rwc": "no query",
        "sqlite://": "no query",
    }
    before = tree_snapshot(tmp_path)
    for uri, why in cases.items():
        assert why in typed_uri_problem(uri, trusted), uri
        assert why in store_problem(uri), uri  # the same rule for the server's own URI
    assert sqlite_store_problem(mlflow_uri) is None
    assert tree_snapshot(tmp_path) == before
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_sidebar_refuses_typed_uris_without_touching_anything(root_copy, app_env, tmp_path):
    """Typed in the sidebar: an http URI is refused without a connection (a listening socket
    sees none); a missing SQLite store is refused and not created; pages still draw."""
    app_env(root_copy)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        at = open_page("runs")
        before = tree_snapshot(tmp_path)
        for uri in (f"http://127.0.0.1:{port}", f"sqlite:///{tmp_path}/made/here.db"):
            at.sidebar.text_input(key="tracking_uri").input(uri).run()
            assert not at.exception
            assert any("refused" in e.value or "does not exist" in e.value for e in at.error)
            assert len(at.dataframe[0].value) == 2  # the Parquet runs are still listed
        with pytest.raises(TimeoutError):
            listener.accept()  # the server never connected to the typed URI
    finally:
        listener.close()
    assert tree_snapshot(tmp_path) == before


# ----------------------------------------------------------------------------- 3. paths


def test_import_source_rules(tmp_path):
    """An import path must resolve to an existing readable regular file or folder."""
    f = tmp_path / "log.jsonl"
    f.write_text("{}\n")
    (tmp_path / "link").symlink_to(f)
    assert import_source(f" {f} ") == f
    assert import_source(str(tmp_path / "link")) == f  # symlinks are resolved
    assert import_source(str(tmp_path)) == tmp_path
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it would block the server forever
    (tmp_path / "to-fifo").symlink_to(fifo)
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    refused = {
        str(tmp_path / "missing.jsonl"): "does not exist",
        str(fifo): "neither a regular file nor a folder",
        str(tmp_path / "to-fifo"): "neither a regular file nor a folder",
        "/dev/zero": "neither a regular file nor a folder",
        str(tmp_path / "loop"): "does not exist",
        "": "not a path",
        "a\x00b": "not a path",
    }
    for path, why in refused.items():
        with pytest.raises(ValueError, match=why):
            import_source(path)
    with pytest.raises(ValueError, match="not an existing folder"):
        import_root(str(tmp_path / "no-root"))
    assert import_root(str(tmp_path)) == tmp_path


@pytest.mark.slow
def test_import_form_refuses_bad_paths_and_missing_roots(root_copy, app_env, tmp_path):
    """The Runs page's import form: a FIFO or a device is refused with a message; an import into
    a root that does not exist is refused and creates no folder."""
    app_env(root_copy)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    log = tmp_path / "exp.jsonl"
    log.write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n')
    at = open_page("runs")
    before = tree_snapshot(tmp_path)
    for path in (str(fifo), "/dev/zero"):
        at.selectbox(key="import_source").select("verl")
        at.text_input(key="import_path").input(path)
        at.button(key="import_submit").click().run()
        assert not at.exception
        assert any("neither a regular file nor a folder" in e.value for e in at.error)
    missing = tmp_path / "nowhere" / "runs"
    at.sidebar.text_input(key="root").input(str(missing)).run()
    at.text_input(key="import_path").input(str(log))
    at.button(key="import_submit").click().run()
    assert any("not an existing folder" in e.value for e in at.error)
    assert tree_snapshot(tmp_path) == before and not missing.parent.exists()


# ----------------------------------------------------------------------------- 3. query string


ALLOWED_URL_KEYS = {"runs", "run", "step", "group_step", "steps", "x", "max_points", "groups"}


def _query_reads(tree: ast.Module) -> list[ast.AST]:
    """The argument of every ``st.query_params`` read in a module (``.get(arg)`` or
    ``.get_all(arg)`` only; any other use fails the audit)."""
    args = []
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "query_params"):
            continue
        get = parents.get(node)
        call = parents.get(get)
        ok = isinstance(get, ast.Attribute) and get.attr in ("get", "get_all")
        ok = ok and isinstance(call, ast.Call)
        assert ok and call.args, f"st.query_params used other than .get(key), line {node.lineno}"
        args.append(call.args[0])
    return args


def _bound_keys(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """Keys of the widgets bound to the query string in one module: constants, and for a key
    passed in a parameter, {function: parameter} (with the parameter's default)."""
    keys: set[str] = set()
    via_param: dict[str, str] = {}
    owner: dict[ast.AST, ast.FunctionDef | None] = {}
    for fn in [tree] + [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        for node in ast.walk(fn):  # inner functions come later and overwrite: innermost wins
            owner[node] = fn if isinstance(fn, ast.FunctionDef) else None
    for node, fn in owner.items():
        if not isinstance(node, ast.Call):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if not (isinstance(kw.get("bind"), ast.Constant) and kw["bind"].value == "query-params"):
            continue
        key = kw.get("key")
        if isinstance(key, ast.Constant):
            keys.add(key.value)
            continue
        assert isinstance(key, ast.Name) and fn is not None, f"computed key, line {node.lineno}"
        via_param[fn.name] = key.id
        args = fn.args.args + fn.args.kwonlyargs
        defaults = [None] * (len(fn.args.args) - len(fn.args.defaults))
        defaults += fn.args.defaults + fn.args.kw_defaults
        for arg, default in zip(args, defaults, strict=True):
            if arg.arg == key.id and isinstance(default, ast.Constant):
                keys.add(default.value)
    return keys, via_param


def test_only_view_state_is_bound_to_the_url():
    """Audit of app/: widgets bound to the query string, and direct ``st.query_params.get``
    reads, are view state (runs, run, step, steps subset, axis, point budget), never a path or
    a URI."""
    trees = {path: ast.parse(path.read_text()) for path in (REPO / "app").rglob("*.py")}
    bound: set[str] = set()
    via_param: dict[str, str] = {}
    for path, tree in trees.items():
        for arg in _query_reads(tree):  # a constant view key, or a picker's own ``key``
            ok = isinstance(arg, ast.Constant) and arg.value in ALLOWED_URL_KEYS
            assert ok or (isinstance(arg, ast.Name) and arg.id == "key"), f"{path}:{arg.lineno}"
        keys, params = _bound_keys(tree)
        bound |= keys
        via_param |= params
    for tree in trees.values():  # call sites that pass their own key
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                for k in node.keywords:
                    if name in via_param and k.arg == via_param[name]:
                        assert isinstance(k.value, ast.Constant), f"{name} at {node.lineno}"
                        bound.add(k.value.value)
    assert via_param == {"pick_run": "key", "pick_step": "key", "steps_control": "key"}
    assert bound == ALLOWED_URL_KEYS


@pytest.mark.slow
def test_query_string_cannot_set_paths_or_uris(root_copy, app_env, tmp_path):
    """?root=/&tracking_uri=...&import_path=... on every page: the server's root is read, no
    store is opened or created, nothing is imported."""
    app_env(root_copy)
    query = {
        "root": "/",
        "tracking_uri": f"sqlite:///{tmp_path}/from-url.db",
        "import_path": "/etc/passwd",
        "run": "../../etc",
        "runs": "/etc",
    }
    before = tree_snapshot(tmp_path)
    bound = set()
    for page in PAGES:
        at = open_page(page, query=query)
        assert_clean(at)
        assert at.sidebar.text_input(key="root").value == str(root_copy)
        assert at.sidebar.text_input(key="tracking_uri").value == ""
        bound |= {d["queryParamKey"] for d in proto_dicts(at._tree) if "queryParamKey" in d}
    assert tree_snapshot(tmp_path) == before
    assert {"runs", "run", "step", "x", "max_points"} <= bound <= ALLOWED_URL_KEYS
