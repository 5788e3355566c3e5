"""Benchmark of the dashboard at thousands of runs: ``bench_dashboard.py --scale``.

    python bench/bench_dashboard.py --scale [--scale-runs 2000 --scale-steps 10]
        [--compare-runs 50 --compare-steps 2000] [--no-s3 | --s3-endpoint URL] [--no-local]
        [--code DIR]

Generates (``bench/make_runs.py``; reused when its marker is there) a local root of
``--scale-runs`` small runs without a summary in run.json (another writer's runs, an older
gspo-dash's; ``--big-runs`` another) and the same runs in an S3 bucket (a moto server started on
127.0.0.1 unless ``--s3-endpoint`` names one; credentials from the environment), and a root of
``--compare-runs`` longer runs; then measures, in this process (imports done, app caches cold or
warm; the OS file cache is whatever it is):

1. discovery (``app.discovery.discover``): cold (``data.clear_caches()``) and warm (again); on S3
   also the listing alone and a warm call once the listing is older than ``LISTING_TTL_S``
   (served at once, renewed in the background).
2. the Runs page (AppTest): first render with cold caches (Streamlit's own start, its scan for
   components, timed apart: a server does it before any page is asked for), the rows it drew
   and how many of them were read (an object store's rows of runs still being read have no
   run id) and how many Health cells it filled,
   the median of 3 re-renders, when every cell was known (the background fill, from the first
   render's start), and a second server's first render on the same root (in-process caches
   forgotten: only what was kept on disk). Summaries kept by an earlier round are removed first.
3. Compare with ``--compare-runs`` runs selected (AppTest): first render and re-render, and the
   points each chart draws (per subplot, all traces) against the page's per-chart budget.

``--code DIR`` imports the app from another checkout (e.g. ``/work/main``, for a before/after in
one sitting; object-store roots are skipped when that code has no ``training_hooks.storage``).
Results are printed and written to bench/out/scale.json.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def ensure_root(
    root: str, runs: int, steps: int, groups: int = 4, group_size: int = 8, summary: bool = True
) -> float:
    """Write ``runs`` runs under ``root`` unless its marker says they are there; seconds taken.
    ``summary=False``: run.json holds no summary (another writer's runs, an older gspo-dash's).
    (Local markers are checked without the app's code: ``--code`` may name one without
    ``training_hooks.storage``; generate with this checkout first.)"""
    made = "summaries" if summary else "nosummaries"
    name = f".bench-{runs}x{steps}x{groups * group_size}-{made}"
    if "://" not in root and os.path.exists(os.path.join(root, name)):
        return 0.0
    from make_runs import make_root

    from training_hooks import storage

    marker = storage.join(root, name)
    if storage.exists(marker):
        return 0.0
    if not storage.is_uri(root) and os.path.exists(root):
        shutil.rmtree(root)
    t = time.perf_counter()
    make_root(
        root,
        runs=runs,
        steps=steps,
        groups=groups,
        group_size=group_size,
        tokens_per_step=0,
        summary=summary,
    )
    storage.write_bytes(marker, b"ok")
    return time.perf_counter() - t


def start_moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return proc, url
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("moto server did not start")


def bench_discovery(root: str) -> dict:
    from app import data
    from app.discovery import discover

    out: dict = {}
    data.clear_caches()
    remote = root.startswith(("s3://", "gs://"))
    if remote:
        out["listing_s"] = _timed(lambda: data.listing(root, max_age_s=0.0))
        data.clear_caches()
    found: list = []
    out["cold_s"] = _timed(lambda: found.append(discover(root)))
    out["runs"] = len(found[0].runs)
    out["warm_s"] = statistics.median(_timed(lambda: discover(root)) for _ in range(3))
    if remote:  # the listing has aged: served at once, renewed on a background thread
        ttl, data.LISTING_TTL_S = data.LISTING_TTL_S, 0.0
        out["warm_listing_expired_s"] = _timed(lambda: discover(root))
        data.LISTING_TTL_S = ttl
    return out


def _apptest(root: str, cwd: str):
    from streamlit.testing.v1 import AppTest

    from app import data
    from app.pages import MAIN

    os.environ["GSPO_DASH_ROOT"] = root
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    os.chdir(cwd)
    if hasattr(data, "clear_caches"):
        data.clear_caches()
    return AppTest.from_file(MAIN, default_timeout=3600)


def streamlit_start(at) -> float:
    """Seconds of what a Streamlit server does once when it starts, before any page is asked
    for (its scan of the installed packages for components), done here for ``at`` ahead of its
    first run (AppTest would do it in that run), so that a first render counts the page only."""
    if getattr(at, "_bidi_component_manager", True) is not None:
        return 0.0
    from streamlit.components.v2.component_manager import BidiComponentManager

    t = time.perf_counter()
    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    at._bidi_component_manager = manager
    return time.perf_counter() - t


def _run(at) -> float:
    t = time.perf_counter()
    at.run()
    took = time.perf_counter() - t
    assert not at.exception, [e.value for e in at.exception]
    return took


PENDING = "checking…"  # the Runs page's pending Health cell (app/app_pages/runs.py)
KEPT_FILE = "dash_summary.json"  # a summary the dashboard kept beside a run (training_hooks.run_summary.keep)


def forget_kept(root: str) -> int:
    """Remove the summaries an earlier round's dashboard kept beside the runs of a local
    ``root`` (and point its local cache at a new empty folder): every round starts without."""
    os.environ["GSPO_DASH_CACHE"] = tempfile.mkdtemp(prefix="gspo-dash-bench-cache-")
    if "://" in root:
        return 0
    n = 0
    for e in os.scandir(root):
        path = os.path.join(root, e.name, KEPT_FILE)
        if e.is_dir() and os.path.exists(path):
            os.remove(path)
            n += 1
    return n


def _filled(at) -> tuple[int, int] | None:
    """(rows, Health cells filled: neither pending nor empty) of the Runs page's table."""
    table = at.dataframe[0].value if len(at.dataframe) else None
    if table is None or "health" not in table.columns:
        return None
    cells = table["health"].astype(str)
    return len(table), int((cells.str.len().gt(0) & cells.ne(PENDING)).sum())


def _new_server(at_root: str, cwd: str):
    """A new server's app: every in-process cache forgotten (``data.clear_caches``), so only
    what was kept on disk is known."""
    return _apptest(at_root, cwd)


POLL_S = 2.0  # the sidebar's poll while runs are being read (app.ui.READING_POLL_S)


def _all_read(at, runs: int) -> bool:
    """Whether the page's table holds ``runs`` rows, every one read (a run id)."""
    table = at.dataframe[0].value if len(at.dataframe) else None
    return table is not None and int(table["run id"].astype(str).ne("").sum()) >= runs


def _poll(at, root: str, discovery) -> int:
    """Draw the page again every ``POLL_S``, as the sidebar's poll does in a browser (AppTest
    runs no fragment timer), until it shows every listed run read; the number of redraws."""
    from app import data

    n = 0
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        busy = discovery.reading(root) or (
            hasattr(data, "listing_in_progress") and data.listing_in_progress(root)
        )
        if not busy:
            runs = sum(name[0] != "." for name in data.listing(root).runs)
            _run(at)
            n += 1
            if _all_read(at, runs):
                return n
        time.sleep(POLL_S)
    return n


def bench_runs_page(root: str, cwd: str, *, second: bool = True, warm: int = 3) -> dict:
    """The Runs page (AppTest): first render with cold caches (the server's first, imports
    excluded) and the Health cells it fills, the median of ``warm`` re-renders; then (``second``)
    the wait until every Health cell is known (the background fill; at once for a code that
    computes them in the render) and a second server's first render on the same root."""
    at = _apptest(root, cwd)
    out: dict = {"streamlit_start_s": streamlit_start(at)}
    cold = _run(at)
    out["cold_s"] = cold
    if (f := _filled(at)) is not None:
        out["rows"], out["health_filled"] = f
        out["rows_read"] = int(at.dataframe[0].value["run id"].astype(str).ne("").sum())
    from app import discovery, ui

    if hasattr(ui, "REMOTE_WAIT_S"):
        out["remote_wait_s"] = ui.REMOTE_WAIT_S

    if hasattr(discovery, "reading") and "://" in root:  # an object store's run.json, read
        # in the background
        t = time.perf_counter()
        out["polls"] = _poll(at, root, discovery)
        out["all_read_s"] = cold + time.perf_counter() - t  # from the first render's start
    if warm:
        times = [_run(at) for _ in range(warm)]
        out |= {"warm_s": statistics.median(times), "warm_all_s": times}
    if not second:
        return out
    try:
        from app import health_fill
    except ImportError:
        health_fill = None
    if health_fill is not None:
        t = time.perf_counter()
        health_fill.wait(3600)
        out["fill_all_s"] = cold + time.perf_counter() - t  # from the first render's start
    at2 = _new_server(root, cwd)
    streamlit_start(at2)
    out["second_cold_s"] = _run(at2)
    if (f := _filled(at2)) is not None:
        out["second_health_filled"] = f[1]
    # an object store: when its page showed every run read, and its cells
    if hasattr(discovery, "reading") and "://" in root:
        t = time.perf_counter()
        _poll(at2, root, discovery)
        out["second_all_read_s"] = out["second_cold_s"] + time.perf_counter() - t
        if (f := _filled(at2)) is not None:
            out["second_health_filled_then"] = f[1]
    return out


#: The goals (first render, seconds: local 2,000 runs, S3 2,000 runs), printed beside them.
GOALS = {"local": 3.0, "s3": 5.0}


def _s(x) -> str:
    return "-" if x is None else f"{x:.2f}s"


def print_goals(res: dict) -> None:
    """One line per root (runs without summaries): the first render and its Health cells filled,
    the warm re-render, when every cell was filled, a second server's first render and its
    cells filled; the goal beside the first render."""
    print(f"\nRuns page ({res['code']}; load average {res.get('load_avg_end')})")
    head = ("root", "runs", "first", "goal", "filled", "warm", "all filled", "2nd server", "filled")
    print("{:<10} {:>6} {:>8} {:>6} {:>7} {:>7} {:>10} {:>10} {:>7}".format(*head))
    for where in ("local", "local_big", "s3"):
        page = res.get(where, {}).get("runs_page")
        if not page:
            continue
        n = res[where]["discovery"]["runs"]
        goal = GOALS.get(where)
        print(
            f"{where:<10} {n:>6} {_s(page['cold_s']):>8} {_s(goal):>6}"
            f" {page.get('health_filled', '?')!s:>7} {_s(page.get('warm_s')):>7}"
            f" {_s(page.get('fill_all_s')):>10} {_s(page.get('second_cold_s')):>10}"
            f" {page.get('second_health_filled', '-')!s:>7}"
        )
        listed = res[where]["discovery"].get("listing_s")
        if listed is not None:  # the first render's parts: the listing, the wait, the page
            print(
                f"{'':<10} listing alone {_s(listed)}, wait {_s(page.get('remote_wait_s'))},"
                f" rows {page.get('rows', '?')} ({page.get('rows_read', '?')} read);"
                f" Streamlit's start (not in 'first') {_s(page.get('streamlit_start_s'))}"
            )


def _points(x) -> int:
    """Number of values in a Plotly array (a list, or plotly's typed-array {dtype, bdata})."""
    if x is None:
        return 0
    if isinstance(x, dict) and "bdata" in x:
        size = {"f8": 8, "f4": 4, "i4": 4, "i2": 2, "i1": 1, "u1": 1, "u2": 2, "u4": 4, "i8": 8}
        return len(base64.b64decode(x["bdata"])) // size.get(x.get("dtype", "f8"), 8)
    return len(x)


def chart_points(at) -> list[int]:
    """Points per subplot (all traces on its axes) over every Plotly chart the page drew."""
    per_panel: list[int] = []
    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        counts: dict[tuple, int] = {}
        for tr in fig.get("data", []):
            axes = (tr.get("xaxis", "x"), tr.get("yaxis", "y"))
            counts[axes] = counts.get(axes, 0) + _points(tr.get("y"))
        per_panel += counts.values()
    return per_panel


def _budget(code: Path) -> int | None:
    text = (code / "app" / "app_pages" / "compare.py").read_text()
    m = re.search(r"POINT_BUDGET\s*=\s*([\d_]+)", text) or re.search(
        r"POINT_BUDGET\s*=\s*([\d_]+)", (code / "app" / "charts.py").read_text()
    )
    return int(m.group(1).replace("_", "")) if m else None


def bench_compare(root: str, cwd: str, code: Path, n: int) -> dict:
    from app.discovery import discover

    keys = [r.key for r in discover(root).runs][:n]
    at = _apptest(root, cwd)
    at.session_state["runs"] = keys
    at.switch_page("app_pages/compare.py")
    streamlit_start(at)
    cold = _run(at)
    warm = statistics.median(_run(at) for _ in range(3))
    points = chart_points(at)
    return {
        "runs": len(keys),
        "cold_s": cold,
        "warm_s": warm,
        "charts": len(at.get("plotly_chart")),
        "subplots": len(points),
        "max_points_per_subplot": max(points, default=0),
        "point_budget_per_chart": _budget(code),
    }


def run(args) -> dict:
    code = Path(args.code).resolve() if args.code else HERE.parent
    sys.path.insert(0, str(code))
    sys.path.insert(1, str(HERE))
    res: dict = {"code": str(code), "load_avg_start": os.getloadavg()}
    base = Path(args.scale_root)
    base.mkdir(parents=True, exist_ok=True)
    cwd = tempfile.mkdtemp(prefix="gspo-dash-bench-scale-")

    def local_root(where: str, runs: int, second: bool) -> None:
        """Discovery and the Runs page on a local root of ``runs`` runs without summaries in
        run.json, into ``res[where]``."""
        root = str(base / f"local-{runs}-nosum")
        res[f"generate_{where}_s"] = ensure_root(root, runs, args.scale_steps, summary=False)
        forget_kept(root)
        res[where] = {
            "discovery": bench_discovery(root),
            "runs_page": bench_runs_page(root, cwd, second=second, warm=0 if runs > 5000 else 3),
        }
        print(json.dumps(res[where], indent=1), flush=True)

    if not args.no_local:
        local_root("local", args.scale_runs, second=True)
    if args.compare_runs:
        croot = str(base / f"compare-{args.compare_runs}x{args.compare_steps}")
        res["generate_compare_s"] = ensure_root(croot, args.compare_runs, args.compare_steps)
        res["compare"] = bench_compare(croot, cwd, code, args.compare_runs)
        print(json.dumps(res["compare"], indent=1), flush=True)
    has_storage = (code / "training_hooks" / "storage.py").exists()
    if not args.no_s3 and has_storage:
        res["s3"] = bench_s3(args, cwd)
        print(json.dumps(res["s3"], indent=1), flush=True)
    if args.big_runs:  # last: its summaries are still being made when the bench ends
        local_root("local_big", args.big_runs, second=False)
    res["load_avg_end"] = os.getloadavg()
    return res


def bench_s3(args, cwd: str) -> dict:
    proc = None
    endpoint = args.s3_endpoint
    if not endpoint:
        proc, endpoint = start_moto()
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    for k, v in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench")):
        os.environ.setdefault(k, v)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        root = f"{args.s3_bucket.rstrip('/')}/nosum-{args.scale_runs}"
        out: dict = {"endpoint": endpoint, "moto": proc is not None}
        out["generate_s"] = ensure_root(root, args.scale_runs, args.scale_steps, summary=False)
        forget_kept(root)
        out["discovery"] = bench_discovery(root)
        forget_kept(root)  # a new local cache: the page's first render reads every run.json
        # a code without a background fill keeps nothing: its second server is its first
        kept = (Path(args.code or HERE.parent) / "app" / "health_fill.py").exists()
        out["runs_page"] = bench_runs_page(root, cwd, second=kept)
        return out
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


def add_arguments(ap) -> None:
    ap.add_argument("--scale", action="store_true", help="run this benchmark (bench_scale.py)")
    ap.add_argument("--scale-runs", type=int, default=2000)
    ap.add_argument("--scale-steps", type=int, default=10)
    ap.add_argument("--big-runs", type=int, default=0, help="also a local root of this many runs")
    ap.add_argument(
        "--scale-root", default=os.path.join(tempfile.gettempdir(), "gspo-dash-bench-scale")
    )
    ap.add_argument("--compare-runs", type=int, default=50, help="0: skip Compare")
    ap.add_argument("--compare-steps", type=int, default=2000)
    ap.add_argument("--no-s3", action="store_true")
    ap.add_argument("--no-local", action="store_true", help="skip the local root of --scale-runs")
    ap.add_argument("--s3-endpoint", default=None, help="default: start moto on 127.0.0.1")
    ap.add_argument("--s3-bucket", default="s3://gspo-dash-bench")
    ap.add_argument("--code", default=None, help="import the app from this checkout")
    ap.add_argument("--scale-out", default=str(HERE / "out" / "scale.json"))


def main(args) -> None:
    res = run(args)
    Path(args.scale_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.scale_out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    print_goals(res)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    main(parser.parse_args())
