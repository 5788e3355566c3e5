"""Benchmark of the dashboard (``--scale``: see bench_scale.py).

    python bench/bench_dashboard.py [--root DIR] [--runs 20 --steps 5000 --seqs 256] [--no-browser]
                                    [--loads 3 --views 2] [--code DIR] [--cold-only] [--profile]
                                    [--no-mlflow]
    python bench/bench_dashboard.py --grouped [--configs 5 --seeds 10 --steps 5000 --parts 1] [--code DIR]
    python bench/bench_dashboard.py --scale [--scale-runs 2000 --scale-steps 10] [--no-s3]

Measures, on a generated root of ``runs`` runs x ``steps`` steps x ``seqs`` sequences per step
(``bench/make_runs.py``; reused if already there):

1. AppTest, Compare page: first render (cold caches) with the default view (the 6 most recent
   runs) and with all runs selected; re-render after changing the selection (a run removed; other,
   not yet read runs swapped in); re-render after changing the smoothing.
2. Headless Chromium against ``streamlit run``: seconds from navigation to the first drawn chart
   of panels, to all charts drawn and to the end of the last long task, on /compare (default view)
   and with every run in ?runs=: in a new browser profile each time (cold), in one profile after
   a first load (warm), and reached from the Runs page by a click in the sidebar (nav).
   ``--code DIR`` serves another checkout's app instead (a before/after in one sitting);
   ``--cold-only`` skips the warm and nav loads; ``--profile`` adds one more cold load of each
   view under Chromium's CPU profiler and prints where its main thread's time went, by script
   file (``profile_by_file_ms``). Each goal (``GOALS``) is printed beside its median.
``--grouped``: instead, a root of ``configs`` configurations x ``seeds`` seeds (each run stating
its seed; ``make_runs.make_grouped_root``, 32 sequences per step) and one view, Compare with every
run: grouped by ratio level (GSPO / GRPO) by default, so the grouped charts (means, bands, faint seeds) and the
verdict; cold loads only, timed as in 2. (goal ``GOALS["grouped"]``).

3. MLflow for comparison: one run of 10,000 steps x 20 metrics logged to a fresh SQLite store;
   time to load it back with ``MlflowClient.get_metric_history`` (what MLflow-only runs cost)
   against reading the same numbers from Parquet.

Results are printed and written to bench/out/dashboard.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))  # launch.py: serve the app, open Chromium

import bench_scale  # noqa: E402
from launch import CHROMIUM, launch_chromium, serve  # noqa: E402

from app.pages import MAIN  # noqa: E402


def ensure_root(root: Path, runs: int, steps: int, seqs: int) -> float:
    marker = root / f".bench-{runs}x{steps}x{seqs}"
    if marker.exists():
        return 0.0
    from make_runs import make_root

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t = time.perf_counter()
    groups = max(1, seqs // 16)
    make_root(root, runs=runs, steps=steps, groups=groups, group_size=seqs // groups)
    marker.write_text("ok")
    return time.perf_counter() - t


def bench_apptest(root: Path) -> dict:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from app.discovery import discover

    os.environ["GSPO_DASH_ROOT"] = str(root)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    keys = [r.key for r in discover(str(root)).runs]
    st.cache_data.clear()
    out = {}

    def timed(at) -> float:
        t = time.perf_counter()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return time.perf_counter() - t

    # warm the imports (plotly, pyarrow, ...) once, as a running server would have them
    warm = AppTest.from_file(MAIN, default_timeout=120)
    warm.session_state["panels"] = ["reward"]
    warm.switch_page("app_pages/health.py")
    warm.run()
    st.cache_data.clear()

    at = AppTest.from_file(MAIN, default_timeout=120)
    at.switch_page("app_pages/compare.py")
    out["compare_first_render_default_s"] = timed(at)  # cold caches, 6 most recent runs
    out["compare_rerender_same_s"] = timed(at)
    at.slider(key="smooth").set_value(0.9)
    out["compare_rerender_smoothing_s"] = timed(at)
    six = list(at.sidebar.multiselect(key="runs").value) or keys[:6]
    at.sidebar.multiselect(key="runs").set_value(keys[:6][1:])
    out["compare_rerender_one_run_removed_s"] = timed(at)
    at.sidebar.multiselect(key="runs").set_value(keys[6:12])  # runs not read yet
    out["compare_rerender_six_new_runs_s"] = timed(at)
    _ = six

    st.cache_data.clear()
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.session_state["runs"] = keys
    at.switch_page("app_pages/compare.py")
    out["compare_first_render_all_runs_s"] = timed(at)
    out["compare_rerender_all_runs_s"] = timed(at)
    at.sidebar.multiselect(key="runs").set_value(keys[:2])
    out["compare_rerender_all_to_two_s"] = timed(at)
    out["runs"] = len(keys)
    return out


#: The page's drawing state, polled: [script running, charts, charts drawn, charts of panels
#: drawn]. ECharts (the Compare grid): drawn = its canvas is there (ECharts paints it in the same
#: task); a chart of panels is one taller than the legend strip. Plotly (the other pages, and
#: older checkouts' Compare): drawn = its SVG is there; of panels = a line is drawn.
_DRAW_STATE_JS = """() => {
  const ec = [...document.querySelectorAll('[data-testid=stEChartsChart]')];
  const ecDrawn = ec.filter(e => [...e.querySelectorAll('canvas')].some(c => c.width > 0));
  const ecPanels = ecDrawn.filter(e => [...e.querySelectorAll('canvas')]
    .some(c => c.clientHeight > 200));
  const ps = [...document.querySelectorAll('.js-plotly-plot')];
  const lines = ps.filter(p => [...p.querySelectorAll('.scatterlayer path.js-line')]
    .some(l => (l.getAttribute('d') || '').length > 20));
  return [!!document.querySelector('[data-testid=stStatusWidget]'), ec.length + ps.length,
          ecDrawn.length + ps.filter(p => p.querySelector('.main-svg')).length,
          ecPanels.length + lines.length];
}"""
#: Size of what the browser was asked to draw: figures, traces, points, JSON characters.
_FIGURES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => ({
  traces: p.data.length,
  points: (p._fullData || []).reduce((n, t) => n + (t._length || 0), 0),
  subplots: Object.keys(p.layout).filter(k => k.startsWith('yaxis')).length,
  json_chars: JSON.stringify({data: p.data, layout: p.layout},
                             (k, v) => ArrayBuffer.isView(v) ? Array.from(v) : v).length,
}))"""
#: plotly.js alone: each figure of the page redrawn by a separate Plotly into a bare div, timed.
_REPLAY_JS = """async () => {
  const out = [];
  for (const p of document.querySelectorAll('.js-plotly-plot')) {
    const div = document.createElement('div');
    div.style.width = p.clientWidth + 'px';
    document.body.appendChild(div);
    const data = JSON.parse(JSON.stringify(p.data));
    const layout = JSON.parse(JSON.stringify(p.layout));
    const t = performance.now();
    await window.Plotly.newPlot(div, data, layout);
    out.push(performance.now() - t);
    window.Plotly.purge(div);
    div.remove();
  }
  return out;
}"""


def _proc_table() -> dict[int, tuple[int, float, str]]:
    """{pid: (parent pid, CPU seconds incl. reaped children, command line)} from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # exited meanwhile
            continue
        # after the command: state ppid ...; utime stime cutime cstime are fields 14-17 of stat
        out[int(d.name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / tick, cmd)
    return out


def cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by this process's descendants: the browser (every Chromium
    process) and the dashboard server (the ``streamlit run`` process). CPU time, unlike wall
    time, hardly depends on what else the machine runs."""
    table = _proc_table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out = {"browser": 0.0, "server": 0.0}
    todo = list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        _, cpu, cmd = table[pid]
        if "chrom" in cmd.split(" ", 1)[0]:
            out["browser"] += cpu
        elif "streamlit" in cmd and " run " in cmd:
            out["server"] += cpu
    return out


#: Chromium's Performance.getMetrics names of the main thread's busy time, by kind.
_BUSY = {
    "task": "TaskDuration",
    "script": "ScriptDuration",
    "layout": "LayoutDuration",
    "style": "RecalcStyleDuration",
}


#: Installed in every page before its scripts: the end times (performance.now(), ms) of the
#: main thread's long tasks (> 50 ms: parsing a chart's data, drawing it, React's renders), and
#: the times at which a Plotly figure finished drawing (plotly.js emits "plotly_afterplot" on the
#: figure's div through its ``emit``, set when the figure is created).
_AFTERPLOT_INIT_JS = """
window.__longtasks = [];
new PerformanceObserver(l => { for (const e of l.getEntries())
  window.__longtasks.push(e.startTime + e.duration); }).observe({type: 'longtask', buffered: true});
window.__afterplot = [];
Object.defineProperty(HTMLElement.prototype, 'emit', {configurable: true, get() { return undefined; },
  set(fn) {
    Object.defineProperty(this, 'emit', {configurable: true, writable: true, value: function (ev) {
      if (ev === 'plotly_afterplot') window.__afterplot.push(performance.now());
      return fn.apply(this, arguments);
    }});
  }});
"""


def _wait_drawn(page, t0: float, since_ms: float, timeout_s: float, quiet_s: float) -> dict:
    """Poll the page from ``t0`` (perf_counter) until every chart is drawn and the page stayed
    quiet for ``quiet_s``; ``since_ms``: the page's performance.now() at ``t0``."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Performance.enable")
    busy0 = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    cpu0 = cpu_seconds()
    first = None
    last, last_change, cpu = None, time.perf_counter(), cpu0
    while time.perf_counter() - t0 < timeout_s:
        state = page.evaluate(_DRAW_STATE_JS)
        now = time.perf_counter()
        if first is None and state[3] >= 1:  # a first figure of panels drawn
            first = now - t0
        if state != last:
            last, last_change, cpu = state, now, cpu_seconds()
        elif not state[0] and state[3] and state[1] == state[2] and now - last_change > quiet_s:
            busy = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            plots = [t for t in page.evaluate("window.__afterplot || []") if t >= since_ms]
            tasks = [t for t in page.evaluate("window.__longtasks || []") if t >= since_ms]
            return {
                **{f"cpu_{k}_s": cpu[k] - cpu0[k] for k in cpu},
                "first_panel_s": first,
                "all_drawn_s": last_change - t0,
                # the end of the main thread's last long task: every chart drawn, redraws
                # included (Streamlit's frontend redraws a Plotly figure once after its first
                # draw), and the page answers input again; the same for ECharts and Plotly
                "settled_s": (max(tasks) - since_ms) / 1000 if tasks else None,
                "plotly_draws": len(plots),
                "charts": state[1],
                # the page's main thread: seconds inside tasks (scripts, style, layout, paint),
                # wall clock (a loaded machine stretches them; the cpu_* numbers do not)
                **{f"main_thread_{k}_s": busy[m] - busy0.get(m, 0.0) for k, m in _BUSY.items()},
            }
        time.sleep(0.05)
    raise TimeoutError(f"{page.url} not drawn within {timeout_s} s (last state {last})")


def _draw_times(page, url: str, timeout_s: float = 180.0, quiet_s: float = 1.5) -> dict:
    """Load ``url`` and poll the page: seconds to the first small-multiples figure with a drawn
    line (``first_panel_s``), to the last change of the drawing state once the script has
    finished (``all_drawn_s``: every chart there and drawn; the page then stayed quiet for
    ``quiet_s``) and to the end of the main thread's last long task (``settled_s``)."""
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    return _wait_drawn(page, t0, 0.0, timeout_s, quiet_s)


def _nav_times(page, base: str, timeout_s: float = 180.0, quiet_s: float = 1.5) -> dict:
    """The way a user mostly reaches Compare: from the Runs page, a click on Compare in the
    sidebar (Streamlit's single-page app: no page load, no new WebSocket). Seconds from the click,
    as ``_draw_times``; ``again_*``: back to Runs and to Compare once more (the chart code
    loaded)."""
    out = {}
    page.goto(f"{base}/runs")
    for label in ("", "again_"):
        if label:
            page.click(_NAV_LINK.format("runs"))
        page.wait_for_function(_ON_RUNS_JS, timeout=timeout_s * 1000, polling=100)
        page.wait_for_timeout(1500)
        since = page.evaluate("performance.now()")
        t0 = time.perf_counter()
        page.click(_NAV_LINK.format("compare"))
        times = _wait_drawn(page, t0, since, timeout_s, quiet_s)
        out.update({f"{label}{k}": v for k, v in times.items()})
    return out


#: The Runs page is shown: its table, and no chart left from Compare.
_ON_RUNS_JS = """() => location.pathname.endsWith('/runs')
  && !document.querySelector('.js-plotly-plot, [data-testid=stEChartsChart]')
  && !!document.querySelector('[data-testid=stDataFrame]')"""
_NAV_LINK = "[data-testid=stSidebarNav] a[href$='/{}']"


#: Goals of the Compare page in the browser: median seconds of a cold load to its last long task.
GOALS = {"default_6_runs": 3.0, "all_runs": 5.0, "grouped": 3.0}


def _profiled_load(page, url: str, top: int = 14) -> dict:
    """One load of ``url`` under Chromium's sampling CPU profiler (DevTools Protocol), until
    drawn as ``_draw_times``: {script file or V8 category: self milliseconds}, the largest
    ``top``. "(idle)" is the main thread waiting (on the server, on the network)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 500})
    cdp.send("Profiler.start")
    _draw_times(page, url)
    prof = cdp.send("Profiler.stop")["profile"]
    frames = {n["id"]: n["callFrame"] for n in prof["nodes"]}
    by_file: dict[str, float] = {}
    for node, dt in zip(prof["samples"], prof["timeDeltas"], strict=True):
        f = frames[node]
        name = f["url"].rsplit("/", 1)[-1] or f["functionName"] or "(anonymous)"
        by_file[name] = by_file.get(name, 0.0) + dt / 1000
    ranked = sorted(by_file.items(), key=lambda kv: -kv[1])
    return {k: round(v) for k, v in ranked[:top]}


def print_goals(browser: dict) -> None:
    """Each goal beside its measurement (median cold seconds to the last long task)."""
    for view, goal in GOALS.items():
        got = browser.get(view, {}).get("cold", {}).get("median_settled_s")
        if got is not None:
            verdict = "met" if got <= goal else "NOT met"
            print(
                f"goal: Compare {view} cold <= {goal:g} s | measured median {got:.2f} s {verdict}"
            )
    print(f"load average (1, 5, 15 min): {browser.get('load_avg')}")


def _median(values: list[float]) -> float:
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def _closing(page, measure, *args) -> dict:
    """``measure(page, *args)``, then the page closed: a page left open keeps its Streamlit session
    (and the live refresh) running beside the next measurement."""
    try:
        return measure(page, *args)
    finally:
        page.close()


def _summary(times: list[dict]) -> dict:
    keys = [k for k in times[0] if k.endswith("_s")]
    return {
        "loads": times,
        **{
            f"median_{k}": _median([t[k] for t in times])
            for k in keys
            if all(t[k] is not None for t in times)
        },
    }


def bench_browser(
    root: Path,
    loads: int = 3,
    views: int = 2,
    code: Path | None = None,
    cold_only: bool = False,
    profile: bool = False,
    grouped: bool = False,
) -> dict:
    """Headless Chromium on ``streamlit run``: /compare (the 6 most recent runs) and with every run
    in ?runs= (``views``: 1 = only the first), ``loads`` times each in a new browser profile
    (``cold``: nothing cached, every static file fetched and compiled anew), then for the default
    view in one profile after a first load (``warm``: the browser's HTTP and code caches, as for a
    returning user), then reached from the Runs page by a click (``nav``, see ``_nav_times``).
    Wall-clock seconds and the page's main-thread busy seconds; then what the page drew (figures,
    traces, points, JSON) and plotly.js's own draw time for it (each figure redrawn by a
    standalone plotly.js in the same page). ``code``: serve another checkout's app (``--code``);
    ``cold_only``: no warm or nav loads; ``profile``: one more cold load under the CPU profiler;
    ``grouped``: one view only, ``grouped`` (every run: a ``--grouped`` root)."""
    if not os.path.exists(CHROMIUM):
        return {"skipped": f"{CHROMIUM} missing"}
    import plotly
    from playwright.sync_api import sync_playwright

    from app.discovery import discover

    names = [r.name for r in discover(str(root)).runs]
    out: dict = {}
    cwd = Path(tempfile.mkdtemp(prefix="gspo-dash-bench-"))
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    viewport = {"width": 1500, "height": 1000}
    main = MAIN
    if code is not None:  # that checkout's modules first in the server (its main.py adds itself)
        main = str(code / "app" / "main.py")
        paths = [str(code), os.environ.get("PYTHONPATH", "")]
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    with serve(root, cwd=cwd, main=main) as base, sync_playwright() as p:
        browser = launch_chromium(p)

        def fresh_page(context=None):
            page = (context or browser.new_context(viewport=viewport)).new_page()
            page.add_init_script(_AFTERPLOT_INIT_JS)
            return page

        runs_q = "&".join(f"runs={n}" for n in names)
        shown = (
            [("grouped", f"{base}/compare?{runs_q}")]
            if grouped
            else [
                ("default_6_runs", f"{base}/compare"),
                ("all_runs", f"{base}/compare?{runs_q}"),
            ][:views]
        )
        for label, url in shown:
            times = []
            for _ in range(loads):
                page = fresh_page()
                times.append(_draw_times(page, url))
                last = page
                if len(times) < loads:
                    page.context.close()
            res: dict = {"cold": _summary(times)}
            res["figures"] = last.evaluate(_FIGURES_JS)  # Plotly figures (an older checkout's grid)
            if res["figures"]:
                last.add_script_tag(path=str(plotly_js))
                res["plotly_alone_ms"] = [round(x) for x in last.evaluate(_REPLAY_JS)]
            last.context.close()
            if profile:
                page = fresh_page()
                res["profile_by_file_ms"] = _profiled_load(page, url)
                page.context.close()
            if label == "default_6_runs" and not cold_only:
                context = browser.new_context(viewport=viewport)
                _closing(fresh_page(context), _draw_times, url)  # fills the caches; not counted
                res["warm"] = _summary(
                    [_closing(fresh_page(context), _draw_times, url) for _ in range(loads)]
                )
                res["nav"] = _summary(
                    [_closing(fresh_page(context), _nav_times, base) for _ in range(loads)]
                )
                context.close()
            out[label] = res
        browser.close()
    out["load_avg"] = os.getloadavg()
    return out


def bench_mlflow(steps: int = 10_000, metrics: int = 20) -> dict:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    from app import mlflow_store
    from training_hooks.schema import STEP_METRIC_COLUMNS, mlflow_key

    tmp = Path(tempfile.mkdtemp(prefix="gspo-dash-bench-mlflow-"))
    uri = f"sqlite:///{tmp}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("bench")
    run = client.create_run(exp, run_name="bench-10k")
    rid = run.info.run_id
    names = [mlflow_key(c) for c in STEP_METRIC_COLUMNS[:metrics]]
    rng = np.random.default_rng(0)
    values = rng.random((steps, len(names)))
    now = int(time.time() * 1000)
    t = time.perf_counter()
    batch = []
    for s in range(steps):
        for j, k in enumerate(names):
            batch.append(Metric(k, float(values[s, j]), now + s, s))
        if len(batch) >= 1000 - len(names):
            client.log_batch(rid, metrics=batch)
            batch = []
    if batch:
        client.log_batch(rid, metrics=batch)
    client.set_terminated(rid)
    log_s = time.perf_counter() - t

    t = time.perf_counter()
    for k in names:
        hist = client.get_metric_history(rid, k)
        assert len(hist) == steps
    hist_s = time.perf_counter() - t

    import streamlit as st

    st.cache_data.clear()
    t = time.perf_counter()
    tbl = mlflow_store.mlflow_steps(uri, rid, tuple(names), None)
    app_s = time.perf_counter() - t
    assert len(tbl.df) == steps
    t = time.perf_counter()
    tbl = mlflow_store.mlflow_steps(uri, rid, tuple(names))  # the app's default: sampled in SQL
    app_sampled_s = time.perf_counter() - t
    assert len(tbl.df) <= mlflow_store.MLFLOW_POINTS_PER_METRIC

    df = pd.DataFrame(values, columns=[n.split("/", 1)[1] for n in names])
    df.insert(0, "step", np.arange(steps))
    pq.write_table(pa.Table.from_pandas(df), tmp / "steps.parquet", compression="zstd")
    t = time.perf_counter()
    back = pq.read_table(tmp / "steps.parquet").to_pandas()
    parquet_s = time.perf_counter() - t
    assert len(back) == steps
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "points": steps * len(names),
        "log_batch_s": log_s,
        "get_metric_history_s": hist_s,
        "app_mlflow_steps_full_s": app_s,
        "app_mlflow_steps_sampled_s": app_sampled_s,
        "sampled_points_per_metric": mlflow_store.MLFLOW_POINTS_PER_METRIC,
        "parquet_read_s": parquet_s,
    }


def bench_grouped(a: argparse.Namespace) -> None:
    """``--grouped``: the grouped Compare, cold, in headless Chromium (bench/out/grouped.json)."""
    from make_runs import make_grouped_root

    root = Path(a.root + "-grouped")
    marker = root / f".bench-grouped-{a.configs}x{a.seeds}x{a.steps}x32-{a.parts}parts"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        per_part = -(-a.steps // max(1, a.parts))
        make_grouped_root(
            root, a.configs, a.seeds, a.steps, groups=2, group_size=16, steps_per_part=per_part
        )
        marker.write_text("ok")
    code = Path(a.code).resolve() if a.code else None
    res = {"config": vars(a), "load_avg_start": os.getloadavg()}
    res["browser"] = bench_browser(root, a.loads, 1, code, True, a.profile, grouped=True)
    print(json.dumps(res, indent=1))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).with_name("grouped.json").write_text(json.dumps(res, indent=1))
    print_goals(res["browser"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gspo-dash-bench-root"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--seqs", type=int, default=256)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--no-mlflow", action="store_true")
    ap.add_argument("--no-apptest", action="store_true")
    ap.add_argument("--loads", type=int, default=3, help="browser loads per view")
    ap.add_argument("--views", type=int, default=2, help="1: only the default view")
    ap.add_argument("--cold-only", action="store_true", help="no warm or nav loads")
    ap.add_argument("--profile", action="store_true", help="one more cold load, CPU-profiled")
    ap.add_argument("--out", default=str(HERE / "out" / "dashboard.json"))
    ap.add_argument("--grouped", action="store_true", help="the grouped Compare (see above)")
    ap.add_argument("--configs", type=int, default=5, help="--grouped: configurations")
    ap.add_argument("--seeds", type=int, default=10, help="--grouped: seeds per configuration")
    ap.add_argument(
        "--parts",
        type=int,
        default=1,
        help="--grouped: Parquet parts per run's table (1: a finished run as the recorder's close "
        "leaves it, compacted; 10: a run of 5,000 steps still being written, 500 steps a part)",
    )
    bench_scale.add_arguments(ap)  # --scale: thousands of runs, local and S3 (bench_scale.py)
    a = ap.parse_args()
    if a.scale:
        bench_scale.main(a)
        return
    if a.grouped:
        bench_grouped(a)
        return
    root = Path(a.root)
    res: dict = {"config": vars(a), "load_avg_start": os.getloadavg()}
    res["generate_s"] = ensure_root(root, a.runs, a.steps, a.seqs)
    if not a.no_apptest:
        res["apptest"] = bench_apptest(root)
        print(json.dumps(res["apptest"], indent=1))
    if not a.no_browser:
        code = Path(a.code).resolve() if a.code else None
        res["browser"] = bench_browser(root, a.loads, a.views, code, a.cold_only, a.profile)
        print(json.dumps(res["browser"], indent=1))
        print_goals(res["browser"])
    if not a.no_mlflow:
        res["mlflow"] = bench_mlflow()
        print(json.dumps(res["mlflow"], indent=1))
    res["load_avg_end"] = os.getloadavg()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    if "browser" in res:
        print_goals(res["browser"])


if __name__ == "__main__":
    main()
