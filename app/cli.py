"""``gspo-dash``: the dashboard with safe server settings, from any folder.

    gspo-dash [--root DIR] [--tracking-uri URI] [--host 127.0.0.1] [--port 8501] [--read-only]
              [--allow-tracking-uri URI ...] [--allowed-host NAME ...] [--server.headless true ...]

Any of Streamlit's own ``--section.option value`` flags (``--server.port 9000``,
``--server.headless true``, ``--theme.base dark``) is passed on to ``streamlit run`` and wins over
the defaults below; ``--server.address`` is judged like ``--host``.

Runs ``streamlit run app/main.py`` with ``SERVER_OPTIONS`` passed as command-line flags, so they
hold whatever folder it starts from (Streamlit reads ``.streamlit/config.toml`` only from the
working folder; the one at the repository root holds the same values, which a test checks).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from app.pages import MAIN

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
ALL_INTERFACES = ("0.0.0.0", "::", "")

#: Streamlit's settings for a safe default: loopback only, no usage statistics, no "Deploy"
#: button (``viewer`` hides the developer options), XSRF protection and CORS on, and WebSocket
#: connections only for loopback host names (a DNS-rebinding guard, as ``mlflow ui`` checks the
#: Host header). For a dashboard, not an app being written: no watching of its source files, and
#: no full garbage collection after every script run (with 50 runs' tables in memory it holds
#: the server for ~0.16 s per page load; Python's own collector still runs). ``.streamlit/
#: config.toml`` holds the same.
SERVER_OPTIONS: dict[str, object] = {
    "server.address": "127.0.0.1",
    "server.enableXsrfProtection": True,
    "server.enableCORS": True,
    "server.allowedHosts": list(LOOPBACK_HOSTS),
    "server.fileWatcherType": "none",
    "runner.postScriptGC": False,
    "browser.gatherUsageStats": False,
    "client.toolbarMode": "viewer",
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gspo-dash",
        description="The gspo-dash dashboard, listening on 127.0.0.1 unless --host says otherwise.",
    )
    p.add_argument("--root", help="folder holding one sub-folder per run (default ./runs)")
    p.add_argument("--tracking-uri", help="MLflow store whose runs are listed too")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument(
        "--read-only",
        action="store_true",
        help="team mode: root and tracking URI fixed, no import form, nothing written",
    )
    p.add_argument(
        "--allow-tracking-uri",
        action="append",
        default=[],
        metavar="URI",
        help="a tracking URI the sidebar may switch to (repeatable)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name browsers may use to reach the server (repeatable; e.g. a proxy's name)",
    )
    return p


def allowed_hosts(host: str, extra: Sequence[str]) -> list[str]:
    """Host names accepted on the WebSocket: loopback names, a specific ``--host`` and ``extra``;
    every name (``*``) when listening on all interfaces with no ``--allowed-host``."""
    if host in ALL_INTERFACES and not extra:
        return ["*"]
    named = [] if host in LOOPBACK_HOSTS or host in ALL_INTERFACES else [host]
    return list(dict.fromkeys([*LOOPBACK_HOSTS, *named, *extra]))


def option_flags(options: dict[str, object]) -> list[str]:
    """``streamlit run``'s flags for ``options``: ``--key value``, a list's values one flag each."""
    flags = []
    for key, value in options.items():
        for v in value if isinstance(value, list) else [value]:
            flags += [f"--{key}", str(v).lower() if isinstance(v, bool) else str(v)]
    return flags


def streamlit_options(extra: Sequence[str]) -> dict[str, object]:
    """Streamlit's own flags given to ``gspo-dash`` (``--server.port 9000``,
    ``--server.headless=true``), as {option: value}; a repeated option keeps every value (a list,
    as Streamlit takes ``--server.allowedHosts`` twice). Anything else is an error that names it."""
    out: dict[str, object] = {}
    items = list(extra)
    while items:
        flag = items.pop(0)
        name, eq, value = flag[2:].partition("=")
        if not flag.startswith("--") or "." not in name or not name.replace(".", "").isalnum():
            raise SystemExit(f"gspo-dash: unrecognized argument {flag!r} (see gspo-dash --help)")
        if not eq:
            if not items or items[0].startswith("--"):
                raise SystemExit(f"gspo-dash: {flag} needs a value")
            value = items.pop(0)
        prior = out.get(name)
        out[name] = (
            value if prior is None else [*(prior if isinstance(prior, list) else [prior]), value]
        )
    return out


def streamlit_command(args: argparse.Namespace, extra: Sequence[str] = ()) -> list[str]:
    """``python -m streamlit run app/main.py --<option> <value>... -- <app arguments>``;
    ``extra``: Streamlit's own flags, which win over ours (``streamlit_options``)."""
    given = streamlit_options(extra)
    host = str(given.get("server.address", args.host))
    options = SERVER_OPTIONS | {
        "server.address": host,
        "server.port": args.port,
        "server.allowedHosts": allowed_hosts(host, args.allowed_host),
    }
    options |= given
    cmd = [sys.executable, "-m", "streamlit", "run", MAIN, *option_flags(options)]
    app_args = []
    if args.root:
        app_args += ["--root", args.root]
    if args.tracking_uri:
        app_args += ["--tracking-uri", args.tracking_uri]
    if args.read_only:
        app_args.append("--read-only")
    for uri in args.allow_tracking_uri:
        app_args += ["--allow-tracking-uri", uri]
    return cmd + ["--", *app_args] if app_args else cmd


def main(argv: Sequence[str] | None = None) -> None:
    args, extra = parser().parse_known_args(argv)
    cmd = streamlit_command(args, extra)
    host = cmd[cmd.index("--server.address") + 1]
    if host in ALL_INTERFACES:
        print(
            "gspo-dash: listening on every interface: anyone who can reach its port can use the "
            "dashboard. Serve a team behind a login (see README, Security).",
            file=sys.stderr,
        )
    sys.stdout.flush()
    os.execv(cmd[0], cmd)  # signals reach streamlit directly


if __name__ == "__main__":
    main()
