"""Untrusted text stays text: a run whose name, config, extra metric name and
completions hold Markdown, HTML and script, and a run folder whose name does (so problem messages
hold it too), are drawn by every page as plain text: checked on the element tree in AppTest
(Markdown bodies, labels and help rendered with a CommonMark renderer that allows HTML, Plotly
strings) and in headless Chromium (no script runs, no element is created from the payload)."""

from __future__ import annotations

import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import launch
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from markdown_it import MarkdownIt
from test_security import PAGES, assert_clean, open_page, proto_dicts

from app.ui import md_escape
from training_hooks.schema import STEPS_DIR

MARK = "pwned"  # every payload holds it
PAYLOAD = (
    '<img src=x onerror="window.__pwned=1;alert(1)"> **bold** <script>window.__pwned=2</script> '
    "[link](javascript:window.__pwned=3) ![i](http://127.0.0.1:9/pwned.png) :red[red] $x^2$ "
    "&lt;b&gt; _em_ `code` # not a heading"
)
METRIC = "<b>m</b>%{y}_pwned"  # an extra step column (Plotly hover templates fill %{...})
FOLDER = "<img src=x onerror=window.__pwned=4>"  # a run folder name: named in problem messages
PAYLOADS = (PAYLOAD, METRIC, FOLDER)
MARKDOWN_FIELDS = {"body", "label", "help", "content"}  # proto fields Streamlit renders as Markdown


@pytest.fixture(scope="module")
def payload_root(tmp_path_factory) -> Path:
    """A run named PAYLOAD (config value and completions too, an extra column named METRIC) and a
    broken run folder named FOLDER."""
    import torch

    from training_hooks import RunRecorder

    root = tmp_path_factory.mktemp("payload")
    gen = torch.Generator().manual_seed(0)
    P, G, T = 2, 4, 6
    with RunRecorder(
        root=root,
        name=PAYLOAD,
        algorithm="gspo",
        config={"note": PAYLOAD, "lr": 1e-6},
        mlflow=False,
        token_samples=2,
        flush_interval_s=0.5,
    ) as rec:
        for step in range(4):
            old = -torch.rand(P * G, T, generator=gen) - 1  # log-probs <= 0 with the noise
            rec.log_step(
                step,
                rewards=torch.randint(0, 2, (P, G), generator=gen).float(),
                logprobs=old + 0.01 * torch.randn(P * G, T, generator=gen),
                old_logprobs=old,
                mask=torch.ones(P * G, T, dtype=torch.bool),
                completions=[PAYLOAD] * (P * G),
            )
    for part in (Path(rec.run_dir) / STEPS_DIR).glob("*.parquet"):
        t = pq.read_table(part)
        pq.write_table(t.append_column(METRIC, pa.array([0.5] * t.num_rows)), part)
    (root / FOLDER).mkdir()
    (root / FOLDER / "run.json").write_text("{not json")
    return root


class _Rendered(HTMLParser):
    """The tags and the text of an HTML fragment."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text = ""
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text += data


RENDER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _unescaped(md: str) -> str:
    return re.sub(r"\\(.)", r"\1", md)


def _strings(obj, key: str = "") -> list[tuple[str, str]]:
    """(key, string) of every string in a JSON-like ``obj``, with the dict key it sits under
    (a list's items keep their list's key)."""
    out = []
    stack = [(key, obj)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, dict):
            stack += list(v.items())
        elif isinstance(v, list):
            stack += [(key, x) for x in v]
        elif isinstance(v, str):
            out.append((key, v))
    return out


def _proto_strings(at) -> list[tuple[str, str, dict]]:
    """(field, string, proto dict) of every string in an AppTest's element tree."""
    return [(key, v, d) for d in proto_dicts(at._tree) for key, v in _strings(d)]


def _check_markdown(body: str) -> int:
    """Rendered as CommonMark with HTML allowed, ``body`` shows every payload it holds verbatim
    and creates no element from it; returns how many payloads it holds."""
    found = [p for p in PAYLOADS if p in _unescaped(body)]
    if not found:
        return 0
    r = _Rendered(RENDER.render(body))
    for p in found:
        assert p in r.text, (p, body)
    assert not {"img", "script", "a", "h1"} & set(r.tags), (r.tags, body)
    return len(found)


def _check_plotly(spec: str) -> int:
    """Every string of a Plotly figure holding a payload holds it as character references only
    (Plotly draws them as the characters), and any other string mentioning one (a run id made
    from the name) holds no markup; returns how many payloads the figure holds."""
    n = 0
    for _, v in _strings(json.loads(spec)):
        if MARK in v:
            found = [p for p in PAYLOADS if p in html.unescape(v)]
            assert found or not set(v) & set("<>"), v  # else a run id (slug): no markup
            for p in found:
                assert p not in v, v  # never raw markup
            n += len(found)
    return n


#: ECharts option keys whose strings ECharts renders as HTML or follows as links: no payload there
ECHARTS_MARKUP_KEYS = {"formatter", "link", "sublink"}


def _check_echarts(spec: str) -> int:
    """An ECharts option draws its strings as text (titles, names, dimensions: the characters
    themselves, so a payload is held verbatim); no payload may sit where ECharts reads markup or
    a link (ECHARTS_MARKUP_KEYS). The tooltip, which is HTML, escapes names: checked in
    Chromium (test_no_script_runs_in_chromium hovers the grid). Returns how many payloads."""
    n = 0
    for key, v in _strings(json.loads(spec)):
        if MARK in v:
            found = [p for p in PAYLOADS if p in v]
            assert not (found and key in ECHARTS_MARKUP_KEYS), (key, v)
            n += len(found)
    return n


def _check_chart(spec: str) -> int:
    """``_check_plotly`` for a Plotly figure, ``_check_echarts`` for an ECharts option."""
    obj = json.loads(spec)
    return _check_plotly(spec) if "layout" in obj or "data" in obj else _check_echarts(spec)


def test_md_escape_round_trips_through_commonmark():
    """md_escape(text) renders to exactly text (line breaks as spaces), for every payload."""
    samples = PAYLOADS + ("1. a\n---\n> q", "    indented", "a\\b | c ~~d~~ <!-- x --> &amp;")
    for s in samples:
        r = _Rendered(RENDER.render(md_escape(s)))
        assert r.text.strip() == " ".join(s.splitlines()).strip(), s
        assert set(r.tags) <= {"p"}, (s, r.tags)


@pytest.mark.slow
def test_every_page_shows_untrusted_text_as_text(payload_root, app_env):
    """Every page over the payload runs: no exception; no HTML element; every Markdown body,
    label, help text and pill holding a payload shows it verbatim; Plotly strings hold it as
    character references, ECharts strings as text outside markup keys; the names do reach the
    pages (the check is not vacuous)."""
    app_env(payload_root)
    seen = {}
    for page in PAGES:
        at = open_page(page)
        assert not at.exception, [e.value for e in at.exception]
        n = seen[page] = {"markdown": 0, "charts": 0}
        for field, value, proto in _proto_strings(at):
            assert "allowHtml" not in proto and "unsafeAllowJavascript" not in proto
            if field in MARKDOWN_FIELDS:
                n["markdown"] += _check_markdown(value)
            elif field == "spec":
                n["charts"] += _check_chart(value)
        assert not at.get("html")
    # where the payloads reach Markdown: the runs table's problems and filters, Compare's
    # captions and chart help, Health's expander labels and evidence; charts: Compare's series
    # names, titles and legend (ECharts), the Ratios and Lengths figures (Plotly)
    least = {"runs": (2, 0), "compare": (3, 10), "health": (4, 0), "ratios": (0, 1)}
    for page, (markdown, charts) in least.items():
        assert seen[page]["markdown"] >= markdown and seen[page]["charts"] >= charts, seen


@pytest.mark.slow
def test_sequences_page_completion_is_code(payload_root, app_env):
    """The completion (model output) is shown in a code box, verbatim."""
    app_env(payload_root)
    at = open_page("sequences")
    assert_clean(at)
    assert PAYLOAD in [c.value for c in at.code]


# ----------------------------------------------------------------------------- Chromium

BROWSER_PAGES = ("", "compare", "health", "sequences")  # "": Runs (the problems name FOLDER)


def _hover_charts(page) -> None:
    """Hover the first panel of each ECharts grid: its tooltip (HTML) shows the run's name as
    text."""
    tooltip = (
        "() => [...document.querySelectorAll('div')].filter(d => d.style.zIndex === '9999999'"
        " && d.style.display !== 'none' && d.style.opacity !== '0').map(d => d.textContent)"
        ".join('\\n')"
    )
    page.get_by_text("What each chart means").wait_for(timeout=60_000)  # below every chart
    charts = page.locator('[data-testid="stEChartsChart"]')
    page.wait_for_function(
        "n => document.querySelectorAll('[data-testid=stEChartsChart] canvas').length >= n",
        arg=charts.count(),
    )
    texts = []
    for i in range(1, charts.count()):  # 0 is the legend strip
        chart = charts.nth(i)
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        box = chart.bounding_box()
        for fx in (0.15, 0.25, 0.35):  # a point of the first panel's plot
            page.mouse.move(box["x"] + fx * box["width"], box["y"] + 150)
            page.wait_for_timeout(400)
            texts.append(page.evaluate(tooltip))
    shown = "\n".join(texts)
    assert PAYLOAD in shown, shown


@pytest.mark.browser
@pytest.mark.slow
def test_no_script_runs_in_chromium(payload_root, tmp_path):
    """Chromium opens the pages that show the payloads: no dialog opens, nothing sets
    window.__pwned, no <img>/<script>/javascript: link comes from the payloads, and the page's text
    holds the payload verbatim (``**bold** <script>`` as characters)."""
    if not os.path.exists(launch.CHROMIUM):
        pytest.skip(f"{launch.CHROMIUM} is missing (Debian package 'chromium')")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    dialogs: list[str] = []
    with launch.serve(payload_root, cwd=tmp_path) as base, sync_api.sync_playwright() as p:
        browser = launch.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            for path in BROWSER_PAGES:
                page.goto(f"{base}/{path}")
                if path == "compare":  # the run's name as text: the constants table (and its
                    # METRIC), built when its expander is opened
                    page.get_by_text("Constant over the run").click(timeout=90_000)
                shown = FOLDER if path == "" else "**bold** <script>"  # drawn as text
                page.wait_for_function(  # the payload is on the page, as characters
                    f"() => document.body.textContent.includes({json.dumps(shown)})",
                    timeout=90_000,
                )
                if path == "compare":  # ECharts' tooltips are HTML: show them, names and all
                    _hover_charts(page)
                page.wait_for_timeout(1000)  # onerror handlers and scripts would have run
                found = page.evaluate(
                    """() => ({
                        pwned: window.__pwned ?? null,
                        imgs: document.querySelectorAll('img[src="x"], img[src*="pwned"]').length,
                        links: document.querySelectorAll('a[href^="javascript"]').length,
                        scripts: [...document.scripts].filter(s => s.text.includes('pwned')).length,
                    })"""
                )
                assert found == {"pwned": None, "imgs": 0, "links": 0, "scripts": 0}, path
                assert not page.locator("[data-testid=stException]").count()
        finally:
            browser.close()
    assert dialogs == []
