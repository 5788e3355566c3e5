"""The server's side of the grouped Compare: CPU seconds of its first render with cold caches.

    python bench/bench_compare_render.py [--root DIR] [--code DIR ...] [--alternations 3]

On the ``bench_dashboard.py --grouped`` root (``--root`` + ``-grouped``: 5 configurations x 10
seeds x 5,000 steps, made by ``make_runs.make_grouped_root`` when missing), each checkout in
``--code`` (default: this one) runs in a fresh Python process of its own (``PYTHONPATH``): Streamlit
AppTest warms the imports on the Health page, forgets every cache (``data.clear_caches``), then
renders Compare with every run shown (grouped by ratio level by default: the verdict and the grouped
charts) and renders it again. Timed from outside the product: the process's CPU seconds
(``time.process_time``, every thread) and the wall seconds around each ``AppTest.run``. The
checkouts take turns, ``--alternations`` times, so a change of the machine's load hits each;
medians are printed, and every figure is written to bench/out/compare_render.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(root: str) -> dict:
    """One cold first render and one rerender of Compare on ``root`` (in this process)."""
    os.environ["GSPO_DASH_ROOT"] = root
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    from streamlit.testing.v1 import AppTest

    from app import data
    from app.discovery import discover
    from app.pages import MAIN

    keys = [r.key for r in discover(root).runs]
    warm = AppTest.from_file(MAIN, default_timeout=600)
    warm.session_state["panels"] = ["reward"]
    warm.switch_page("app_pages/health.py")
    warm.run()
    data.clear_caches()
    at = AppTest.from_file(MAIN, default_timeout=600)
    at.session_state["runs"] = keys
    at.switch_page("app_pages/compare.py")
    out = {"runs": len(keys)}
    for name in ("first", "rerender"):
        wall, cpu = time.perf_counter(), time.process_time()
        at.run()
        out[f"{name}_cpu_s"] = time.process_time() - cpu
        out[f"{name}_wall_s"] = time.perf_counter() - wall
        if at.exception:
            raise SystemExit(f"the Compare page raised: {[e.value for e in at.exception]}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "gspo-dash-bench-root"))
    ap.add_argument("--code", action="append", help="a checkout to time (repeatable)")
    ap.add_argument("--alternations", type=int, default=3)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(HERE / "out" / "compare_render.json"))
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child)))
        return
    if a.alternations < 1:
        raise SystemExit(f"--alternations must be >= 1, got {a.alternations}")
    sys.path.insert(0, str(HERE))
    from make_runs import make_grouped_root

    root = Path(a.root + "-grouped")
    marker = root / ".bench-grouped-5x10x5000x32"  # the root bench_dashboard.py --grouped makes
    if not marker.exists():
        root.mkdir(parents=True, exist_ok=True)
        make_grouped_root(root, 5, 10, 5000, groups=2, group_size=16)
        marker.write_text("ok")
    codes = [str(Path(c).resolve()) for c in (a.code or [str(HERE.parent)])]
    runs: dict[str, list[dict]] = {c: [] for c in codes}
    for _ in range(a.alternations):
        for c in codes:
            env = {**os.environ, "PYTHONPATH": c}
            load = os.getloadavg()[0]
            got = subprocess.run(
                [sys.executable, __file__, "--child", str(root)],
                env=env,
                cwd=c,
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(got.stdout.strip().splitlines()[-1])
            r["load_avg"] = load
            runs[c].append(r)
            print(c, json.dumps(r), flush=True)
    summary = {
        c: {
            k: statistics.median(r[k] for r in rs)
            for k in ("first_cpu_s", "first_wall_s", "rerender_cpu_s")
        }
        for c, rs in runs.items()
    }
    print(json.dumps(summary, indent=1))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"runs": runs, "median": summary}, indent=1))


if __name__ == "__main__":
    main()
