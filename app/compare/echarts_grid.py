"""The Compare page's small multiples as one Apache ECharts option, drawn by ``st.echarts_chart``.

Why ECharts and not Plotly for this grid: the page loads no plotly.js, and ECharts draws every
panel's series on one canvas instead of an SVG per trace (docs/benchmarks.md, "Dashboard speed").

One chart holds every panel: panel i has grid i, x axis i and y axis i; its title (and the
``PanelView`` subtitle) sits above it, its unit on the y axis. Runs are coloured, the algorithm is
the line style (``app.line_style``: dotted for an unknown one), a sparse series has markers. The
traces are ``traces.run_traces``' records (``Trace``: raw, ema, second, band;
``Readout``), their text plain: ECharts draws strings as plain text, so run and metric names from
disk can never become markup. The tooltip alone is HTML: it shows series names (ECharts escapes
them) and fixed column labels, never a metric name from disk.

The hover: a run's lines are drawn from LTTB-cut points that differ per run, and ECharts' axis
tooltip lists only the series whose point lies nearest the pointer, so no drawn line takes part in
it. The runs' values instead sit in invisible ``readout`` series on x points shared by every run of
the chart (``series_math.readout_points``): the tooltip lists every run's value (and EMA, and
second column) at the x under the pointer. Up to READOUT_DETAIL_RUNS runs, each run has its own
readout series (the tooltip heads each run's values with its colour); beyond, a panel has one
readout series with a column per run (ECharts' cost grows with the number of series).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from app import line_style
from app.colors import rgba
from app.compare import series_math, traces
from app.compare.panels import Panel
from app.compare.view import PanelView

#: The grid's look: Streamlit's chart grey for text, its lines at 20% (legible on the light and
#: the dark theme alike), rows of fixed height.
GRID_TEXT = "#808495"
GRID_LINE = "rgba(128, 132, 149, 0.2)"
GRID_ROW_PX = 300  # one row of panels: title block, plot, x-axis block
GRID_TITLE_PX = 52  # a panel's title and subtitle, above its plot
GRID_XAXIS_PX = 42  # a panel's x tick labels and axis name, below its plot
COLUMNS = 2
PLOT_WIDTH_PCT = 100 // COLUMNS - 10  # a panel's plot, of the chart's width
PLOT_HEIGHT_PX = GRID_ROW_PX - GRID_TITLE_PX - GRID_XAXIS_PX
SLIDER_PX = 40  # the x zoom slider above the panels
#: the legend's width in the page's narrowest usual layout (the sidebar open, a laptop screen): a
#: wider page leaves a row empty, never cuts an entry
LEGEND_WIDTH_PX = 900
#: Points of the hover readout per run and chart: ``readout_size``
READOUT_POINTS = 200
#: Beyond this many runs the tooltip lists one value per run (the EMA when smoothed), not three,
#: from one readout series per panel (``_runs_readout_series``)
READOUT_DETAIL_RUNS = 8
#: Tooltip numbers: 4 significant digits, as the panels' other hovers (``run_traces``); the
#: readout sends no more (it was a third of the grid's JSON at 7 digits)
READOUT_DIGITS = 4
VALUE_FORMAT = f"%.{READOUT_DIGITS}g"
BAND_LINE = "#555"

_AXIS = {
    "splitLine": {"lineStyle": {"color": GRID_LINE}},
    "axisLine": {"show": False},
    "axisTick": {"show": False},
}


def readout_size(runs: int) -> int:
    """Readout points per run: READOUT_POINTS, fewer beyond 12 runs (a tooltip of 50 runs needs
    no finer x than ~50 points per chart; the readout is data the browser holds)."""
    return int(min(READOUT_POINTS, max(24, 2400 // max(runs, 1))))


def _pairs(x, y) -> list[list]:
    return [
        list(p)
        for p in zip(series_math.browser_array(x), series_math.browser_array(y), strict=True)
    ]


def _on(i: int) -> dict:
    return {"xAxisIndex": i, "yAxisIndex": i, "animation": False}


def _line_series(t: traces.Trace, i: int) -> dict:
    """A raw or EMA line, or the second column's dots (role ``second``), on panel ``i``."""
    sty = t.style
    dots = t.role == traces.SECOND
    s = {
        "id": f"{t.run}|{t.role}|{i}",
        "type": "scatter" if dots else "line",
        **_on(i),
        "name": t.name,
        "data": _pairs(t.x, t.y),
        "itemStyle": {"color": sty.color},
        "silent": True,
        "tooltip": {"show": False},  # the readout series is the hover (module docstring)
    }
    symbol = line_style.ECHARTS_SYMBOL[sty.symbol]
    if dots:
        s.update(symbol=symbol, symbolSize=sty.marker)
        s["itemStyle"]["opacity"] = sty.opacity
        return s
    markers = sty.marker is not None  # a sparse series (``line_style.is_sparse``)
    s["showSymbol"] = markers
    if markers:
        s.update(symbol=symbol, symbolSize=sty.marker, showAllSymbol=True)
    s["lineStyle"] = {
        "color": sty.color,
        "width": sty.width,
        "type": line_style.echarts_dash(sty.dash),
        "opacity": 1.0 if sty.opacity is None else sty.opacity,
    }
    return s


def _band_series(t: traces.Trace, i: int) -> list[dict]:
    """A band as two stacked areas: the lower edge (not drawn) and the band's height above it
    (filled)."""
    x, lo, hi = (np.asarray(v, np.float64) for v in (t.x, t.lo, t.y))
    base = {
        "type": "line",
        **_on(i),
        "stack": f"{t.run}|band|{i}",
        # stack the height on the lower edge whatever their signs (the default, "samesign", puts
        # a positive height on 0 when the edge is negative: the band then starts at 0)
        "stackStrategy": "all",
        "symbol": "none",
        "silent": True,
        "lineStyle": {"width": 0},
        "tooltip": {"show": False},
    }
    return [
        {**base, "id": f"{t.run}|band-low|{i}", "data": _pairs(x, lo)},
        {
            **base,
            "id": f"{t.run}|band-height|{i}",
            "data": _pairs(x, hi - lo),
            "areaStyle": {"color": rgba(t.style.color, t.style.fill_opacity), "opacity": 1},
        },
    ]


def _readout_series(t: traces.Readout, i: int, panel: Panel, x_name: str, scale: str = "") -> dict:
    """The run's hover on panel ``i``: an undrawn line whose tooltip shows the run's value, EMA
    and second column at the shared readout points (``series_math.readout_points``). ``scale``:
    the unit of values drawn in units of 10^k (``tiny``)."""
    # fixed labels: the tooltip is HTML, and a metric name from disk has no business there; a
    # mapped column's source name is one of ``metric_map``'s own (``app.compare.sources``)
    columns = [("y", f"value ({t.source})" if t.source else "value")]
    if t.ema is not None:
        columns.append(("ema", "EMA"))
    if t.second is not None:
        columns.append(("second", panel.second_label))
    if scale:
        columns = [(k, f"{label} {scale}") for k, label in columns]
    values = [series_math.browser_array(getattr(t, k), READOUT_DIGITS) for k, _ in columns]
    data = [list(row) for row in zip(series_math.browser_array(t.x), *values, strict=True)]
    return {
        "id": f"{t.run}|readout|{i}",
        "type": "line",
        **_on(i),
        "name": t.label,
        "data": data,
        "dimensions": [x_name] + [label for _, label in columns],
        "encode": {"x": 0, "y": 1, "tooltip": list(range(1, len(columns) + 1))},
        "symbol": "none",
        "silent": True,
        "lineStyle": {"opacity": 0, "width": 0},
        "color": t.color,
        "z": 0,
    }


def _band_lines(
    series: Sequence[traces.RunSeries],
    panel: Panel,
    i: int,
    panel_traces: Sequence[traces.Trace | traces.Readout],
) -> list[dict]:
    """GSPO's clip range on the sequence log-ratio panel ``i`` (``traces.clip_band_lines``):
    a dotted line across the x range of ``traces`` per bound, labelled at its left end, above
    every run's lines."""
    lines = traces.clip_band_lines(series, panel)
    drawn = [t.x for t in panel_traces if len(t.x)]
    if not (lines and drawn):
        return []
    lo, hi = min(float(np.min(v)) for v in drawn), max(float(np.max(v)) for v in drawn)
    return [_band_line(i, k, y, name, lo, hi) for k, (y, name) in enumerate(lines)]


def _band_line(i: int, k: int, y: float, name: str, lo: float, hi: float) -> dict:
    """Bound ``k`` of panel ``i``'s clip range: a dotted line at ``y`` from x ``lo`` to ``hi``,
    its label (``name = y``) at its left end."""
    # the low line's label below it, the high line's above: they never overlap
    label = {
        "show": True,
        "formatter": f"{name} = {y:.2g}",
        # at the line's end, which is its left end; inside the plot, below or above the line
        "distance": -2,
        "offset": [4, 9 if y < 0 else -9],
        "align": "left",
        "fontSize": 10,
        # a chip over the runs' lines: dark text on near-white, on either theme
        "color": "#333",
        "backgroundColor": "rgba(255, 255, 255, 0.85)",
        "padding": [1, 3],
    }
    return {
        "id": f"|band-line|{i}|{k}",  # of no run
        "type": "line",
        **_on(i),
        "data": [[hi, y], [lo, y]],
        "symbol": "none",
        "endLabel": label,
        "silent": True,
        "tooltip": {"show": False},
        "lineStyle": {"type": "dotted", "color": BAND_LINE, "width": 1.5},
        "z": 5,
    }


def _cell(i: int) -> tuple[int, int]:
    """(top px, left %) of panel ``i``'s cell (below the zoom slider); its plot sits
    GRID_TITLE_PX lower and 6 % further right, PLOT_WIDTH_PCT wide and PLOT_HEIGHT_PX high."""
    r, c = divmod(i, COLUMNS)
    return SLIDER_PX + r * GRID_ROW_PX, c * (100 // COLUMNS)


def grid_option(
    series: Sequence[traces.RunSeries],
    panels: Sequence[Panel],
    traces_by_panel: Sequence[Sequence[traces.Trace | traces.Readout]],
    *,
    x: str = traces.X_STEP,
    log_panels: Sequence[str] = (),
    views: Sequence[PanelView] | None = None,
    x_range: tuple[float, float] | None = None,
    x_name: str | None = None,
) -> tuple[dict, int]:
    """(option, height px) for ``st.echarts_chart``: ``panels`` as small multiples in rows of
    COLUMNS, x axes linked (a zoom on one zooms all) over one x range: ``x_range`` (the page's,
    shared with its other charts) else the span of every panel's panel_traces, widened to round ticks
    (``series_math.nice_extent``), so a panel whose runs logged fewer steps is drawn on its
    neighbours' axis. ``traces_by_panel[i]`` are ``run_traces`` records for panel i;
    ``views[i]`` its subtitle, y range, empty note, floors; ``log_panels`` the keys of panels with
    a log y axis; ``x_name`` the x axis's name (default: ``traces.X_AXES``'). A panel
    without panel_traces keeps its axes and says why."""
    n = len(panels)
    views = list(views) if views is not None else [PanelView() for _ in panels]
    if n != len(traces_by_panel):
        raise ValueError(
            f"traces_by_panel must have one list per panel ({n}), got {len(traces_by_panel)}"
        )
    if n != len(views):
        raise ValueError(f"views must have one PanelView per panel ({n}), got {len(views)}")
    x_name = x_name or traces.X_AXES.get(x, x)
    detail = len(series) <= READOUT_DETAIL_RUNS
    x_ends = _x_ends(x_range, traces_by_panel)
    grids, xs, ys, out, titles, notes = [], [], [], [], [], []
    for i, (panel, panel_traces, view) in enumerate(
        zip(panels, traces_by_panel, views, strict=True)
    ):
        grids.append(_plot_area(i))
        titles.append(_title(i, traces.panel_title(panel, series), view.subtitle))
        xs.append(_x_axis(i, x, x_name, x_ends))
        log_y = panel.key in log_panels
        zoomed = log_y or view.y_range or traces.clip_band_lines(series, panel)
        exp = None if zoomed else tiny(panel_traces)
        if view.noise_floor is not None and not log_y and view.noise_floor < TINY:
            exp = math.floor(math.log10(view.noise_floor))  # the axis in units of the floor's
        if exp is not None:
            panel_traces = [_scaled(t, exp) for t in panel_traces]
        ys.append(_y_axis(i, panel, view, log_y, exp, panel_traces))
        scale = f"×1e{exp}" if exp is not None else ""
        out += _panel_series(panel_traces, i, panel, x_name, detail, scale)
        out += _band_lines(series, panel, i, panel_traces)
        if not panel_traces:
            notes.append(_empty_note(i, view.empty_note))
    option = {
        "animation": False,
        "textStyle": {"color": GRID_TEXT},
        "title": titles,
        "grid": grids,
        "xAxis": xs,
        "yAxis": ys,
        "series": out,
        "graphic": notes,
        "tooltip": {
            "trigger": "axis",
            "confine": True,
            "valueFormatter": VALUE_FORMAT,
            "axisPointer": {"type": "line"},
        },
        "dataZoom": _zoom(n, x),
    }
    return option, SLIDER_PX + max(1, math.ceil(n / COLUMNS)) * GRID_ROW_PX


def _panel_series(
    panel_traces: Sequence[traces.Trace | traces.Readout],
    i: int,
    panel: Panel,
    x_name: str,
    detail: bool,
    scale: str,
) -> list[dict]:
    """The ECharts series of panel ``i``'s panel_traces, in their order; with ``detail``, a readout
    series per run, else one for every run of the panel, last."""
    out: list[dict] = []
    readouts = [t for t in panel_traces if isinstance(t, traces.Readout)]
    for t in panel_traces:
        if isinstance(t, traces.Readout):
            if detail:
                out.append(_readout_series(t, i, panel, x_name, scale))
        elif t.role == traces.BAND:
            out += _band_series(t, i)
        else:
            out.append(_line_series(t, i))
    if readouts and not detail:
        out.append(_runs_readout_series(readouts, i, x_name, scale))
    return out


def _runs_readout_series(
    readouts: Sequence[traces.Readout], i: int, x_name: str, scale: str = ""
) -> dict:
    """Every run's hover on panel ``i`` in one undrawn line: rows at the union of the runs' readout
    points (shared multiples of one spacing), a column per run with its EMA when it has one, else
    its value, empty where the run has no point. The column's name is the run's label and what it
    holds (plain text: ECharts escapes it in the tooltip); ``scale`` as ``_readout_series``."""
    xs = np.unique(np.concatenate([np.asarray(r.x) for r in readouts]))
    table = np.full((len(xs), len(readouts)), np.nan)  # (points, runs)
    names = []
    for j, r in enumerate(readouts):
        table[np.searchsorted(xs, r.x), j] = r.ema if r.ema is not None else r.y
        what = "EMA" if r.ema is not None else f"value ({r.source})" if r.source else "value"
        names.append(f"{r.label} · {what}" + (f" {scale}" if scale else ""))
    values = series_math.browser_array(table.ravel(), READOUT_DIGITS)
    n = len(readouts)
    data = [[x, *values[k * n : (k + 1) * n]] for k, x in enumerate(series_math.browser_array(xs))]
    return {
        "id": f"|readout|{i}",  # of no run
        "type": "line",
        **_on(i),
        "name": f"{n} runs",
        "data": data,
        # names that cannot clash (a run's label may read as the x axis's name); the tooltip
        # shows the display names
        "dimensions": [{"name": "x", "displayName": x_name}]
        + [{"name": f"run{j}", "displayName": name} for j, name in enumerate(names)],
        "encode": {"x": 0, "y": 1, "tooltip": list(range(1, n + 1))},
        "symbol": "none",
        "silent": True,
        "lineStyle": {"opacity": 0, "width": 0},
        "color": GRID_TEXT,  # its tooltip markers: one colour for every run, the text's
        "z": 0,
    }


def _plot_area(i: int) -> dict:
    """Panel ``i``'s plot (an ECharts grid) within its cell."""
    top, left = _cell(i)
    return {
        "left": f"{left + 6}%",
        "width": f"{PLOT_WIDTH_PCT}%",
        "top": top + GRID_TITLE_PX,
        "height": PLOT_HEIGHT_PX,
    }


def _title(i: int, title: str, subtitle: str) -> dict:
    """Panel ``i``'s title and subtitle (plain text), above its plot."""
    top, left = _cell(i)
    return {
        "text": title,
        "subtext": subtitle,
        "left": f"{left + 5}%",
        "top": top + 4,
        "itemGap": 4,
        "textStyle": {"fontSize": 13, "fontWeight": "bold", "color": GRID_TEXT},
        "subtextStyle": {"fontSize": 11, "color": GRID_TEXT},
    }


def _x_ends(
    x_range: tuple[float, float] | None,
    traces_by_panel: Sequence[Sequence[traces.Trace | traces.Readout]],
) -> tuple[float, float] | None:
    """The chart's one x range: ``x_range``, else the span of every trace's x; widened to round
    ticks (``series_math.nice_extent``). None when there is nothing to span."""
    if x_range is None:
        x_range = series_math.finite_range(t.x for ts in traces_by_panel for t in ts)
    return series_math.nice_extent(*x_range) if x_range is not None else None


def _x_axis(i: int, x: str, x_name: str, ends: tuple[float, float] | None = None) -> dict:
    """Panel ``i``'s x axis, named ``x_name``, over ``ends`` (the chart's one x range)."""
    axis = {
        **_AXIS,
        "gridIndex": i,
        "type": "value",
        "scale": True,
        "name": x_name,
        "nameLocation": "middle",
        "nameGap": 24,
        # the readout's shared x points are whole steps and tokens: no decimals
        "axisPointer": {"label": {"precision": 0 if x in traces.WHOLE_X else "auto"}},
    }
    if ends is not None:
        axis["min"], axis["max"] = ends
    return axis


def whole_x_axis(option: dict, lo: int, hi: int) -> None:
    """Turn a ``grid_option``'s x axes into a whole-number axis from ``lo`` to ``hi`` with a tick
    at each whole number (the per-lag charts: lags 0, 1, 2, 3; half a lag means nothing), and drop
    its zoom (a handful of points has nothing to zoom into)."""
    ends = (lo - 0.5, hi + 0.5) if lo == hi else (float(lo), float(hi))
    for axis in option["xAxis"]:
        axis.update(min=ends[0], max=ends[1], interval=1, minInterval=1)
        axis["axisPointer"] = {"label": {"precision": 0}}
    option["dataZoom"] = []


def _empty_note(i: int, text: str) -> dict:
    """Why panel ``i`` draws nothing, centred on its plot."""
    top, left = _cell(i)
    return {
        "type": "text",
        "left": f"{left + 6 + PLOT_WIDTH_PCT // 2}%",
        "top": top + GRID_TITLE_PX + PLOT_HEIGHT_PX // 2,
        "style": {"text": text, "fill": GRID_TEXT, "fontSize": 12, "textAlign": "center"},
    }


def _zoom(n: int, x: str) -> list[dict]:
    """The x zoom of ``n`` panels, linked: the slider above the panels (drag its ends), or
    ctrl + wheel / pinch on a panel (plain wheel scrolls the page); drag pans a zoomed panel."""
    return [
        {
            "type": "slider",
            "xAxisIndex": list(range(n)),
            "top": 6,
            "height": SLIDER_PX - 16,
            "left": "6%",
            "right": "4%",
            "showDataShadow": False,
            "filterMode": "none",
            "labelPrecision": 0 if x in traces.WHOLE_X else "auto",
            "textStyle": {"color": GRID_TEXT},
        },
        {
            "type": "inside",
            "xAxisIndex": list(range(n)),
            "zoomOnMouseWheel": "ctrl",
            "moveOnMouseWheel": False,
            "moveOnMouseMove": True,
            "filterMode": "none",
        },
    ]


#: A panel whose values all lie below this in size is drawn in units of 10^k (its axis name says
#: "×1e-15"): ECharts writes axis labels as plain decimals ("0.0000000000000025"), which overflow
#: the cell, and the spec cannot carry a JavaScript label formatter
TINY = 1e-3
#: the y values of a trace (a band's lower edge among them) and of a readout
_Y_FIELDS = {traces.Trace: ("y", "lo"), traces.Readout: ("y", "ema", "second")}


def tiny(panel_traces: Sequence[traces.Trace | traces.Readout]) -> int | None:
    """k (floor of log10 of the largest |y|) when every finite y of ``traces`` is below TINY in
    size and one is not 0, else None."""
    return tiny_exponent(
        np.asarray(getattr(t, k), np.float64)
        for t in panel_traces
        for k in _Y_FIELDS[type(t)]
        if getattr(t, k) is not None
    )


def tiny_exponent(values: Iterable[np.ndarray]) -> int | None:
    """k = floor(log10 max |y|) over the finite ``values`` when all are below TINY in size and one
    is not 0, else None."""
    ends = series_math.finite_range(np.abs(v) for v in values)
    top = ends[1] if ends is not None else 0.0
    return math.floor(math.log10(top)) if 0 < top < TINY else None


def _scaled(t: traces.Trace | traces.Readout, exp: int) -> traces.Trace | traces.Readout:
    """A copy of ``t`` with its y values in units of 10^exp."""
    fields = _Y_FIELDS[type(t)]
    scaled: dict[str, Any] = {
        k: np.asarray(getattr(t, k), np.float64) / 10.0**exp
        for k in fields
        if getattr(t, k) is not None
    }
    return dataclasses.replace(t, **scaled)


def _y_axis(
    i: int,
    panel: Panel,
    view: PanelView,
    log_y: bool,
    exp: int | None = None,
    panel_traces: Sequence[traces.Trace | traces.Readout] = (),
) -> dict:
    """Panel ``i``'s y axis, named with its unit (and the 10^exp its values are drawn in, the
    ``traces``' own scale): log, or zoomed to ``view.y_range`` (in the same units; an end is
    labelled only where it is a round number), or from the values' observed range (widened to a
    round step, ``series_math.tight_extent``), or from 0."""
    axis = {
        **_AXIS,
        "gridIndex": i,
        "type": "log" if log_y else "value",
        "scale": True,
        "name": panel.unit + (f" (×1e{exp})" if exp is not None else ""),
        "nameLocation": "middle",
        "nameGap": 46,
    }
    if log_y:
        return axis
    if view.y_range is not None:
        lo, hi = (v / 10.0**exp if exp is not None else v for v in view.y_range)
        axis["min"], axis["max"] = lo, hi
        # a zoom's ends are mostly no round numbers: no label there ("-0.0808")
        show = {"showMinLabel": series_math.is_round(lo), "showMaxLabel": series_math.is_round(hi)}
        axis["axisLabel"] = show
    elif view.tight and (extent := _y_extent(panel_traces)) is not None:
        # the drawn extent is the values' observed range (``PanelView``), to a round step
        axis["min"], axis["max"] = series_math.tight_extent(*extent)
    elif view.nonnegative:
        axis["min"] = 0
    return axis


def _y_extent(
    panel_traces: Sequence[traces.Trace | traces.Readout],
) -> tuple[float, float] | None:
    """(min, max) of every finite y the ``traces`` draw (a band's lower edge included; a readout
    draws nothing), or None."""
    return series_math.finite_range(
        v
        for t in panel_traces
        if not isinstance(t, traces.Readout)
        for v in (t.y, t.lo)
        if v is not None
    )


def legend_rows(chars: Sequence[int], width_px: int = LEGEND_WIDTH_PX) -> int:
    """Rows ECharts' legend wraps into: entries of ``chars`` characters (~7 px each at 12 px, plus
    the 28 px line, its 5 px gap and the 18 px gap to the next entry), laid out greedily in
    ``width_px``."""
    rows, used = 1, 0
    for n in chars:
        w = 51 + 7 * n
        if used and used + w > width_px:
            rows, used = rows + 1, 0
        used += w
    return rows


def legend_option(series: Sequence[traces.RunSeries]) -> tuple[dict, int]:
    """(option, height px): a legend strip, one entry per run in its colour with its algorithm's
    dash (the grid draws no legend of its own)."""
    names = [f"{s.label} · {line_style.algorithm_text(s.algorithm)}" for s in series]
    styles = [
        {"color": s.color, "width": 2.5, "type": line_style.echarts_type(s.algorithm)}
        for s in series
    ]
    items = [
        {"type": "line", "name": name, "data": [], "symbol": "none", "lineStyle": style}
        for name, style in zip(names, styles, strict=True)
    ]
    # the entries' own styles: a line in the run's colour and its algorithm's dash, no symbol
    entries = [
        {"name": name, "lineStyle": style, "itemStyle": {"opacity": 0}}
        for name, style in zip(names, styles, strict=True)
    ]
    rows = legend_rows([len(n) for n in names])
    option = {
        "animation": False,
        "aria": {"enabled": True},  # the runs' names for screen readers (and the browser test)
        "legend": {
            "type": "plain",
            "data": entries,
            "left": 0,
            "top": 0,
            "itemWidth": 28,
            "itemGap": 18,
            "selectedMode": False,  # hiding a run here would not hide it in the grid
            "textStyle": {"color": GRID_TEXT, "fontSize": 12},
        },
        "grid": {"show": False, "left": 0, "right": 0, "height": 0, "top": 22 * rows + 8},
        "xAxis": {"show": False},
        "yAxis": {"show": False},
        "series": items,
    }
    return option, 30 + 22 * rows
