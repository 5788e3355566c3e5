"""End to end: `streamlit run app/main.py` on 127.0.0.1, opened in headless Chromium."""

from __future__ import annotations

import io
import json
import os
import shutil
import time

import launch
import numpy as np
import pytest
from app_runs import run_ids

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def server(root_copy, tmp_path):
    """A streamlit server on a free port over a copy of the recorded runs; stopped afterwards."""
    if not os.path.exists(launch.CHROMIUM):
        pytest.skip(f"{launch.CHROMIUM} is missing (Debian package 'chromium')")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    try:
        with launch.serve(root_copy, cwd=tmp_path) as base:
            yield base
    except launch.AppDidNotStart as e:
        pytest.fail(str(e))


def test_compare_page_draws_in_chromium(server, root_copy, tmp_path):
    """Chromium opens /compare?runs=<run name>: Plotly draws, the legend holds only that run, the URL
    keeps the selection, a screenshot is saved; then a run that appears on disk shows up on the
    open Runs page without a reload (live refresh). No request leaves the machine (the tab's icon
    once came from a font server)."""
    from urllib.parse import urlsplit

    from playwright.sync_api import sync_playwright

    name = "gspo-small"  # bound widgets put the run's (unique) name in the URL
    shot = tmp_path / "compare.png"
    with sync_playwright() as p:
        browser = launch.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            urls: list[str] = []
            page.on("request", lambda r: urls.append(r.url))
            t0 = time.perf_counter()
            page.goto(f"{server}/compare?runs={name}")
            charts = "[data-testid=stEChartsChart] canvas"
            page.wait_for_selector(charts, timeout=60_000)
            first_chart_s = time.perf_counter() - t0
            # the legend strip and the built-in panels (the run's grad_norm among them: no chart of
            # extra metrics is left; ECharts: canvases)
            page.wait_for_function(
                f"() => document.querySelectorAll('{charts}').length >= 2", timeout=60_000
            )
            assert page.locator("h1", has_text="Compare runs").count() == 1
            assert f"runs={name}" in page.url
            page.wait_for_timeout(1000)
            # the grid's canvas holds drawn lines: many distinct colours, not a blank plot
            grid = page.locator(charts).nth(1)
            png = grid.screenshot()
            from PIL import Image

            img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
            assert len(np.unique(img, axis=0)) > 50
            assert not page.locator("[data-testid=stException]").count()
            page.screenshot(path=str(shot))

            page.goto(server)
            page.wait_for_selector("text=2 of 2 runs shown", timeout=60_000)
            src = root_copy / run_ids(root_copy)["grpo-small"]
            dst = root_copy / "grpo-copy"
            shutil.copytree(src, dst)
            info = json.loads((dst / "run.json").read_text())
            info.update(run_id="grpo-copy", name="grpo-copy")
            (dst / "run.json").write_text(json.dumps(info))
            page.wait_for_selector("text=3 of 3 runs shown", timeout=30_000)
        finally:
            browser.close()
    off_machine = [
        u
        for u in urls
        if urlsplit(u).scheme in ("http", "https", "ws", "wss")
        and urlsplit(u).hostname not in ("127.0.0.1", "localhost")
    ]
    assert urls and not off_machine, off_machine
    assert shot.stat().st_size > 20_000
    print(f"first chart drawn after {first_chart_s:.1f} s; screenshot {shot}")


def test_same_name_runs_are_two_legend_entries_in_chromium(server, root_copy):
    """Two runs named grpo-small (a copy under its own id): /compare?runs=grpo-small shows both,
    two legend entries "grpo-small [<id>] · GRPO" (read from the legend's ARIA description, which
    ECharts writes from the drawn series), and a warning saying the name is shared; a link value
    that names no run is named in a warning."""
    from playwright.sync_api import sync_playwright

    first = run_ids(root_copy)["grpo-small"]
    # made beside the root, then moved in whole: the server never lists a half-made twin (the
    # copied run.json still naming the first run's id)
    src, tmp = root_copy / first, root_copy.parent / "grpo-twin.tmp"
    shutil.copytree(src, tmp)
    info = json.loads((tmp / "run.json").read_text())
    info.update(run_id="grpo-twin")
    (tmp / "run.json").write_text(json.dumps(info))
    tmp.rename(root_copy / "grpo-twin")
    with sync_playwright() as p:
        browser = launch.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.goto(f"{server}/compare?runs=grpo-small&runs=no-such-run")
            legend = page.locator("[data-testid=stEChartsChart]").first
            legend.wait_for(timeout=60_000)
            # the page may first draw the runs read so far (the twin's run.json is new to the
            # server): wait for the drawn legend to hold both, then check what it says
            names = [f"grpo-small [{first}] · GRPO", "grpo-small [grpo-twin] · GRPO"]
            page.wait_for_function(
                "(names) => { const a = (document.querySelector('[data-testid=stEChartsChart]')"
                "?.getAttribute('aria-label') || ''); return names.every(n => a.includes(n)); }",
                arg=names,
                timeout=60_000,
            )
            aria = legend.get_attribute("aria-label")
            assert "2 series" in aria, aria
            assert (
                f"grpo-small [{first}] · GRPO" in aria and "grpo-small [grpo-twin] · GRPO" in aria
            )
            alerts = " ".join(page.locator("[data-testid=stAlert]").all_inner_texts())
            assert "'grpo-small' names 2 runs, all shown" in alerts, alerts
            assert "not found: 'no-such-run'" in alerts, alerts
            assert not page.locator("[data-testid=stException]").count()
        finally:
            browser.close()


def test_many_runs_hover_lists_every_run_in_chromium(tmp_path):
    """Nine runs (beyond the detailed hover's eight): hovering the first panel lists every run
    with one number each, from the panel's one readout series; a run named with markup is shown
    as those characters in the tooltip (HTML), no element made of it."""
    import sys
    from urllib.parse import urlencode

    from app_runs import REPO
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(REPO / "bench"))
    from make_runs import make_root

    if not os.path.exists(launch.CHROMIUM):
        pytest.skip(f"{launch.CHROMIUM} is missing (Debian package 'chromium')")
    root = tmp_path / "root"
    dirs = make_root(root, runs=9, steps=300, groups=2, group_size=4, tokens_per_step=0)
    names = [os.path.basename(d) for d in dirs]  # a run's name is its folder's
    odd = "<b>nine</b> & co"
    info = json.loads((root / names[-1] / "run.json").read_text())
    (root / names[-1] / "run.json").write_text(json.dumps({**info, "name": odd}))
    shown = [*names[:-1], odd]
    tooltip = (
        "() => [...document.querySelectorAll('div')].filter(d => d.style.zIndex === '9999999'"
        " && d.style.display !== 'none' && d.style.opacity !== '0')"
    )
    with launch.serve(root, cwd=tmp_path) as base, sync_playwright() as p:
        browser = launch.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            page.goto(f"{base}/compare?" + urlencode({"runs": shown}, doseq=True))
            grid = page.locator("[data-testid=stEChartsChart]").nth(1)
            grid.wait_for(timeout=60_000)
            page.wait_for_function(
                "() => [...document.querySelectorAll('[data-testid=stEChartsChart] canvas')]"
                ".some(c => c.clientHeight > 200)",
                timeout=60_000,
            )
            page.wait_for_timeout(1000)
            box = grid.bounding_box()
            for fx in (0.2, 0.3):  # a point of the first panel's plot (Reward)
                page.mouse.move(box["x"] + fx * box["width"], box["y"] + 150)
                page.wait_for_timeout(500)
            text = page.evaluate(tooltip + ".map(d => d.innerText).join('\\n')")
            tags = page.evaluate(tooltip + ".map(d => d.querySelectorAll('b').length)")
        finally:
            browser.close()
    lines = text.splitlines()
    for name in shown:  # its label, what the number is, the number
        (i,) = [k for k, line in enumerate(lines) if line.startswith(f"{name} · ")]
        assert lines[i] == f"{name} · EMA", lines
        float(lines[i + 1])
    assert f"{len(names)} runs" in lines
    assert tags == [0], text
