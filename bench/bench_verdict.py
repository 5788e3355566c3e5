"""Benchmark: the verdict's statistics and the grouped Compare charts' server-side build.

    python bench/bench_verdict.py [--groups 10] [--seeds 10] [--repeats 20]
                                  [--configs 5] [--chart-seeds 10] [--steps 5000]

1. ``app.verdict_stats.compare`` on ``--groups`` groups of ``--seeds`` scores (10,000 resamples
   per group, every pair): the first call (cold: numpy's first quantile and generator calls) and
   the median of ``--repeats`` more. Goal: <= 0.3 s (issue 33, "the verdict for 10 groups x 10
   seeds <= 0.3 s server-side").
2. The grouped charts: ``--configs`` groups x ``--chart-seeds`` seeds x ``--steps`` steps on every
   built-in panel (synthetic random-walk columns, EMA 0.6 as the page's default), timed from the
   runs' step tables to the ECharts option (``grouping.grouped_option``, uncached: the
   page caches it whole, so this is a first draw) and the option's JSON size. The browser's side of the same view is
   ``bench/bench_dashboard.py``'s.

Timestamps around the calls (``time.perf_counter``); nothing in the product counts for it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import pandas as pd

from app import run_groups as rg
from app import verdict_stats as vs
from app.compare import grouping, panels, traces, view
from app.records import RunRef
from training_hooks.schema import Step


def bench_compare(groups: int, seeds: int, repeats: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    scores = {
        f"g{i}": ([f"r{i}-{j}" for j in range(seeds)], rng.normal(0.1 * i, 1.0, seeds))
        for i in range(groups)
    }
    t0 = time.perf_counter()
    vs.compare(scores)
    cold = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        vs.compare(scores)
        times.append(time.perf_counter() - t0)
    return cold, statistics.median(times)


def bench_chart(configs: int, seeds: int, steps: int) -> tuple[float, int, int]:
    rng = np.random.default_rng(1)
    columns = [p.column for p in panels.PANELS]
    frames = [
        [
            pd.DataFrame(
                {Step.STEP: np.arange(steps)}
                | {c: np.cumsum(rng.normal(size=steps)) for c in columns}
            )
            for _ in range(seeds)
        ]
        for _ in range(configs)
    ]
    groups = []
    for i, dfs in enumerate(frames):
        series = [
            traces.RunSeries(f"g{i}-s{k}", f"g{i}-s{k}", "?", "#1f77b4", df)
            for k, df in enumerate(dfs)
        ]
        refs = tuple(RunRef(s.key, s.key, "?", "finished", "parquet") for s in series)
        groups.append((rg.RunGroup(f"g{i}", f"g{i}", refs), "#1f77b4", series))
    t0 = time.perf_counter()
    option, _ = grouping.grouped_option(
        groups, panels.PANELS, x=Step.STEP, steps=view.AUTO, smoothing=0.6, max_points=500
    )
    size = len(json.dumps(option))
    return time.perf_counter() - t0, size, len(option["title"]) - 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--configs", type=int, default=5)
    ap.add_argument("--chart-seeds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=5000)
    a = ap.parse_args()
    cold, warm = bench_compare(a.groups, a.seeds, a.repeats)
    pairs = a.groups * (a.groups - 1) // 2
    ok = warm <= 0.3
    print(
        f"verdict, {a.groups} groups x {a.seeds} seeds ({pairs} pairs, {vs.N_RESAMPLES:,} "
        f"resamples per group): first call {cold:.3f} s, median of {a.repeats} {warm:.3f} s "
        f"(goal <= 0.3 s: {'met' if ok else 'NOT met'})"
    )
    t, size, n = bench_chart(a.configs, a.chart_seeds, a.steps)
    print(
        f"grouped charts, {a.configs} configurations x {a.chart_seeds} seeds x {a.steps:,} steps, "
        f"{n} panels: built in {t:.2f} s, option {size / 1e6:.2f} MB of JSON"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
