"""Benchmark of the dashboard (issue 5, section 6; ``--scale``: issue 15, see bench_scale.py).

    python bench/bench_dashboard.py [--root DIR] [--runs 20 --steps 5000 --seqs 256] [--no-browser]
                                    [--no-mlflow]
    python bench/bench_dashboard.py --scale [--scale-runs 2000 --scale-steps 10] [--no-s3]

Measures, on a generated root of ``runs`` runs x ``steps`` steps x ``seqs`` sequences per step
(``bench/make_runs.py``; reused if already there):

1. AppTest, Compare page: first render (cold caches) with the default view (the 6 most recent
   runs) and with all runs selected; re-render after changing the selection (a run removed; other,
   not yet read runs swapped in); re-render after changing the smoothing.
2. Headless Chromium against ``streamlit run``: seconds from navigation to the first drawn Plotly
   chart and to all charts drawn, on /compare (default view) and with every run in ?runs=.
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

import bench_scale  # noqa: E402

from app.launch import CHROMIUM, MAIN, launch_chromium, serve  # noqa: E402


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


def bench_browser(root: Path) -> dict:
    if not os.path.exists(CHROMIUM):
        return {"skipped": f"{CHROMIUM} missing"}
    from playwright.sync_api import sync_playwright

    from app.discovery import discover

    names = [r.name for r in discover(str(root)).runs]
    out: dict = {}
    with serve(root, cwd=tempfile.mkdtemp(prefix="gspo-dash-bench-")) as base:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1500, "height": 1000})

            def load(url: str) -> tuple[float, float, int]:
                """Seconds to the first drawn Plotly chart (the legend strip) and to the grid of
                small multiples drawn (the page's second chart, with every panel's lines)."""
                t = time.perf_counter()
                page.goto(url)
                page.wait_for_selector(".js-plotly-plot .main-svg", timeout=120_000)
                first = time.perf_counter() - t
                page.wait_for_function(
                    "() => { const p = document.querySelectorAll('.js-plotly-plot');"
                    " return p.length >= 2 && p[1].querySelectorAll('path.js-line').length > 0"
                    " && !document.querySelector('[data-testid=stStatusWidget]'); }",
                    timeout=180_000,
                )
                return first, time.perf_counter() - t, page.locator(".js-plotly-plot").count()

            runs_q = "&".join(f"runs={n}" for n in names)
            for label, url in (
                ("default_cold", f"{base}/compare"),
                ("default_warm", f"{base}/compare"),
                ("all_runs", f"{base}/compare?{runs_q}"),
                ("all_runs_warm", f"{base}/compare?{runs_q}"),
            ):
                first, every, n = load(url)
                out[f"{label}_first_chart_s"] = first
                out[f"{label}_grid_drawn_s"] = every
                out[f"{label}_charts"] = n
            browser.close()
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gspo-dash-bench-root"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--seqs", type=int, default=256)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--no-mlflow", action="store_true")
    ap.add_argument("--no-apptest", action="store_true")
    ap.add_argument("--out", default=str(HERE / "out" / "dashboard.json"))
    bench_scale.add_arguments(ap)  # --scale: thousands of runs, local and S3 (bench_scale.py)
    a = ap.parse_args()
    if a.scale:
        bench_scale.main(a)
        return
    root = Path(a.root)
    res: dict = {"config": vars(a), "load_avg_start": os.getloadavg()}
    res["generate_s"] = ensure_root(root, a.runs, a.steps, a.seqs)
    if not a.no_apptest:
        res["apptest"] = bench_apptest(root)
        print(json.dumps(res["apptest"], indent=1))
    if not a.no_browser:
        res["browser"] = bench_browser(root)
        print(json.dumps(res["browser"], indent=1))
    if not a.no_mlflow:
        res["mlflow"] = bench_mlflow()
        print(json.dumps(res["mlflow"], indent=1))
    res["load_avg_end"] = os.getloadavg()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
