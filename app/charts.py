"""Pure figure builders: DataFrames in, ``plotly.graph_objects.Figure`` out. No Streamlit here.

Conventions on every chart: one colour per run (``run_colors``), line style by algorithm (GRPO
dashed, GSPO solid, unknown dotted: ``app.line_style``), units on the axes, and at most ``max_points`` points per trace: long series
are cut with min/max-preserving LTTB (``tsdownsample.MinMaxLTTBDownsampler``), so a one-step spike
survives downsampling; bands are cut by a per-bucket min/max envelope, which keeps every extreme.
"""

from __future__ import annotations

import html
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.aggregate import (
    ZV_ALL_HIGH,
    ZV_ALL_LOW,
    ZV_OTHER,
    HiddenMove,
    StepHistogram,
    SymLog,
)
from app.compare_view import (
    SEQ_BAND_ZOOM,
    SUBSET_TEXT,
    PanelView,
    count_outside,
    seq_band_range,
    short_list,
    subset_text,
)
from app.lag import ALL, LagSplit, lag_split
from app.line_style import MARKER_SIZE, dash_for, is_sparse
from app.panels import PANELS, PANELS_BY_KEY, Panel, extra_panel, has_data  # noqa: F401
from training_hooks.metric_map import Derived
from training_hooks.schema import Seq, Step

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#393b79",
    "#ad494a",
    "#637939",
    "#7b4173",
    "#e7ba52",
    "#3182bd",
)
DEFAULT_MAX_POINTS = 2000
PANEL_HEIGHT = 290

X_STEP = Step.STEP
X_ELAPSED = Derived.ELAPSED_MIN
X_TOKENS = Derived.TOKENS_SEEN
X_AXES = {
    X_STEP: "optimizer step",
    X_ELAPSED: "wall time (minutes since start)",
    X_TOKENS: "response tokens seen",
}
#: a run without the x axis's column, in a note (never "no tokens seen": that reads as zero)
X_UNLOGGED = {X_STEP: "no step", X_ELAPSED: "no wall time", X_TOKENS: "no token counts"}


def color_slot(key: str) -> int:
    """The palette slot a run key prefers: crc32 of the key (fixed across processes, unlike
    Python's salted ``hash``) modulo the palette's size."""
    return zlib.crc32(str(key).encode("utf-8")) % len(PALETTE)


def run_colors(keys: Sequence[str], distinct: Sequence[str] = ()) -> dict[str, str]:
    """A colour per run key, derived from the key alone (``color_slot``), so a run keeps its
    colour when other runs come and go. The runs of ``distinct`` (those on screen, oldest first)
    get different colours while the palette lasts: one whose slot an earlier of them holds takes
    the next free slot, so only the later of two clashing runs moves."""
    out = {k: PALETTE[color_slot(k)] for k in keys}
    taken: set[int] = set()
    for k in dict.fromkeys(distinct):
        slot = color_slot(k)
        if len(taken) < len(PALETTE):
            while slot in taken:
                slot = (slot + 1) % len(PALETTE)
        taken.add(slot)
        out[k] = PALETTE[slot]
    return out


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


# ---------------------------------------------------------------------------------------------
# series maths (pure numpy)
# ---------------------------------------------------------------------------------------------


def downsample_indices(x: np.ndarray, y: np.ndarray, n_out: int) -> np.ndarray:
    """Indices of at most ``n_out`` points of (x, y) chosen by MinMaxLTTB (keeps spikes).

    ``x`` must be non-decreasing and ``y`` finite; shorter series come back whole."""
    n = len(y)
    if n <= n_out or n_out < 3:
        return np.arange(n)
    from tsdownsample import MinMaxLTTBDownsampler

    xs = np.asarray(x, dtype=np.float64)
    ys = np.ascontiguousarray(y, dtype=np.float64)
    if np.any(np.diff(xs) < 0):  # not sorted: fall back to index order
        xs = np.arange(n, dtype=np.float64)
    return np.asarray(MinMaxLTTBDownsampler().downsample(xs, ys, n_out=n_out), dtype=np.int64)


def ema(y: np.ndarray, weight: float) -> np.ndarray:
    """Debiased exponential moving average (TensorBoard's smoothing): weight 0 = raw, 0.99 = heavy.

    m_t = w m_{t-1} + (1-w) y_t,  shown as m_t / (1 - w^t); non-finite values are skipped."""
    if not 0 <= weight < 1:
        raise ValueError(f"weight must be in [0, 1), got {weight}")
    y = np.asarray(y, dtype=np.float64)
    if weight == 0 or len(y) == 0:
        return y.copy()
    s = pd.Series(np.where(np.isfinite(y), y, np.nan))
    return s.ewm(alpha=1 - weight, adjust=True, ignore_na=True).mean().to_numpy()


def envelope(
    x: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_out: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bucket (x, lo, hi) into ``n_out`` consecutive buckets: first x, min lo, max hi of each."""
    n = len(x)
    if n <= n_out:
        return np.asarray(x), np.asarray(lo), np.asarray(hi)
    starts = np.linspace(0, n, n_out, endpoint=False).astype(np.int64)
    starts = np.unique(starts)
    return (
        np.asarray(x)[starts],
        np.minimum.reduceat(np.asarray(lo, np.float64), starts),
        np.maximum.reduceat(np.asarray(hi, np.float64), starts),
    )


# ---------------------------------------------------------------------------------------------
# the Compare page's traces (the panels themselves: ``app.panels``)
# ---------------------------------------------------------------------------------------------


@dataclass
class RunSeries:
    """One run's step table plus what the charts need to draw it."""

    key: str
    label: str
    algorithm: str
    color: str
    df: pd.DataFrame
    eps: dict[str, tuple[float, float]] = field(default_factory=dict)  # {"seq": (lo, hi), ...}
    lag: LagSplit | None = None  # its steps by policy lag (computed from df when None)
    #: {column: (lo, hi)}: the observed range of the values a column summarises (a reward band
    #: is cut to it: mean ± std of 0/1 rewards would reach below 0 and above 1)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: {column: "tool name"}: the foreign metric a column was mapped from (an import), for the hover
    sources: dict[str, str] = field(default_factory=dict)

    def rows(self, subset: str) -> np.ndarray:
        """Boolean mask over ``df``'s rows: the steps of ``subset`` (``app.lag.SUBSETS``)."""
        if subset == ALL:
            return np.ones(len(self.df), bool)
        return (self.lag or lag_split(self.df)).mask(subset)


def plot_text(text: object) -> str:
    """Text from disk for a Plotly string (title, trace name, hover text), drawn as itself: Plotly
    renders a few HTML tags (``<b>``, ``<a href>``, ``<br>``, ...) and fills ``%{...}`` in hover
    templates, so ``&``, ``<``, ``>`` and ``%`` become character references (which Plotly draws as
    the characters)."""
    return html.escape(str(text), quote=False).replace("%", "&#37;")


def fmt_eps(x: float) -> str:
    """3e-4 style for small eps, plain otherwise."""
    if x and abs(x) < 0.01:
        m, e = f"{x:.1e}".split("e")
        return f"{float(m):g}e{int(e)}"
    return f"{x:g}"


def eps_text(eps: tuple[float, float] | None) -> str:
    """'ε 3e-4/4e-4' for a known (low, high) pair, 'ε unknown' for None."""
    return f"ε {fmt_eps(eps[0])}/{fmt_eps(eps[1])}" if eps else "ε unknown"


def eps_label(series: Sequence[RunSeries], unit: str) -> str:
    """'ε 3e-4/4e-4' when every run shares the unit's eps; else 'ε per run'."""
    vals = {s.eps.get(unit) for s in series if s.eps.get(unit) is not None}
    if not vals:
        return ""
    if len(vals) == 1:
        lo, hi = next(iter(vals))
        return f"ε {fmt_eps(lo)}/{fmt_eps(hi)}"
    return "ε differs per run (see hover)"


def panel_title(panel: Panel, series: Sequence[RunSeries]) -> str:
    """The panel's title (escaped: extra panels are titled with a metric name from disk), with the
    clip unit and ε of clip panels."""
    t = plot_text(panel.title)
    if panel.clip_unit:
        unit = "sequence unit" if panel.clip_unit == "seq" else "token unit"
        eps = eps_label(series, panel.clip_unit)
        t += f" — {unit}" + (f", {eps}" if eps else "")
    return t


def run_traces(
    s: RunSeries,
    panel: Panel,
    *,
    x: str = X_STEP,
    smoothing: float = 0.0,
    log_y: bool = False,
    max_points: int = DEFAULT_MAX_POINTS,
    bands: bool = True,
    subset: str = ALL,
    readout: float | None = None,
) -> list[dict]:
    """The traces (plain Plotly dicts) one run contributes to ``panel``: band, raw (faint when
    smoothed), EMA, second column, on the steps of ``subset`` only (``app.lag.SUBSETS``; the EMA
    runs over those steps, never across the others). At most ``max_points * trace_weight(...)``
    points in all. Empty when the run lacks the column, the x axis or steps in the subset. Each
    trace's ``meta`` names its role: band, raw, ema, second.

    ``readout`` (a spacing, ``readout_spacing``) adds one more dict, role ``readout`` (not a
    Plotly trace): the run's value, EMA and second column at the rows nearest the multiples of the
    spacing (``readout_points``), for a hover that lists every run at one x."""
    df = s.df
    if panel.column not in df.columns or x not in df.columns:
        return []
    xv_all = df[x].to_numpy(np.float64)
    yv_all = df[panel.column].to_numpy(np.float64)
    ok = s.rows(subset) & np.isfinite(xv_all) & np.isfinite(yv_all)
    if log_y:
        ok &= yv_all > 0
    if not ok.any():
        return []
    xv, yv = xv_all[ok], yv_all[ok]
    sparse = is_sparse(int(ok.sum()), int((s.rows(subset) & np.isfinite(xv_all)).sum()))
    name = _trace_name(s, panel, subset)
    what = plot_text(panel.title)
    source = s.sources.get(panel.column)
    shown_as = what + (f" (from {plot_text(source)})" if source else "")
    hover = f"{name}<br>{X_AXES.get(x, x)} %{{x}}<br>{shown_as} %{{y:.4g}}<extra></extra>"
    out: list[dict] = []
    if bands and panel.band is not None:
        band = _band_trace(s, panel, df, x, ok, max(max_points // 4, 2), log_y)
        if band:
            out.append(band)
    smooth = smoothing > 0 and len(yv) > 2 and not sparse
    raw_width, raw_opacity = (1, 0.25) if smooth else (1.8, 1.0)
    raw = _line(s, xv, yv, max_points, name, hover, raw_width, raw_opacity, "raw")
    if sparse:  # a marker at every point: a single point is visible, a gap is not bridged unseen
        raw.update(mode="lines+markers", marker={"color": s.color, "size": MARKER_SIZE})
    out.append(raw)
    fewer = max(max_points // 2, 3)
    ys = ema(yv, smoothing) if smooth else None
    if ys is not None:
        ema_hover = hover.replace("%{y:.4g}", "%{y:.4g} (EMA)")
        out.append(_line(s, xv, ys, fewer, name, ema_hover, 2, role="ema"))
    y2 = None
    if panel.second and panel.second in df.columns:
        y2 = df[panel.second].to_numpy(np.float64)[ok]
        fin = np.isfinite(y2)
        if fin.any():
            name2 = f"{name} · {panel.second_label}"
            hover2 = hover.replace(what, panel.second_label)
            dots = _line(s, xv[fin], y2[fin], fewer, name2, hover2, 0, 0.8, "second")
            dots.update(mode="markers", marker={"color": s.color, "size": 3})
            out.append(dots)
        else:
            y2 = None
    if readout is not None:
        at, rows = readout_points(xv, readout)
        values = {"y": yv, "ema": ys, "second": y2}
        values = {k: v[rows] for k, v in values.items() if v is not None}
        out.append(
            {"meta": "readout", "name": name, "legendgroup": s.key, "color": s.color, "x": at}
            | ({"source": source} if source else {})
            | values
        )
    return out


def _trace_name(s: RunSeries, panel: Panel, subset: str) -> str:
    """A run's trace name on ``panel``: its label, the clip unit's ε, the steps shown."""
    name = plot_text(s.label)
    if panel.clip_unit and s.eps.get(panel.clip_unit):
        lo, hi = s.eps[panel.clip_unit]
        name += f" (ε {fmt_eps(lo)}/{fmt_eps(hi)})"
    if subset != ALL:
        name += f" · {SUBSET_TEXT[subset]}"
    return name


#: readout spacings: these times a power of ten
_NICE = (1.0, 2.0, 5.0, 10.0)
READOUT_MAX_POINTS = 100_000


def readout_spacing(lo: float, hi: float, n: int, *, whole: bool = False) -> float:
    """The spacing of about ``n`` readout points over [lo, hi]: the smallest of 1, 2, 5 x 10^k at
    least (hi - lo) / n, and at least 1 when ``whole`` (steps, tokens). A round number, so it
    changes only when the span grows past one: a run's readout (and its cached traces) survive
    most selection changes."""
    raw = (hi - lo) / max(n, 1)
    if not (math.isfinite(raw) and raw > 0):
        return 1.0
    if whole and raw <= 1:
        return 1.0
    k = math.floor(math.log10(raw))
    for m in _NICE:
        if m * 10.0**k >= raw * (1 - 1e-12):
            return m * 10.0**k
    return 10.0 ** (k + 1)


def readout_points(x: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """(at, rows): the multiples of ``spacing`` within [min x, max x] that lie within half a
    spacing (or half of ``x``'s own median spacing, if wider: a run logged every k steps reaches
    every point between its rows) of some value of ``x``, and for each the row of ``x`` nearest to
    it (the first of a tie). Runs share these points wherever their rows reach, so one hover can
    list every run at one x. Whole numbers for a whole spacing (steps, tokens)."""
    x = np.asarray(x, np.float64)
    if not np.isfinite(x).all():
        raise ValueError(f"x must be finite, got {int((~np.isfinite(x)).sum())} of {len(x)} not")
    if not (math.isfinite(spacing) and spacing > 0):
        raise ValueError(f"spacing must be a positive number, got {spacing}")
    if not len(x):
        return np.empty(0), np.empty(0, np.int64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    k0, k1 = math.ceil(xs[0] / spacing), math.floor(xs[-1] / spacing)
    if k1 - k0 + 1 > READOUT_MAX_POINTS:
        raise ValueError(
            f"spacing {spacing} gives {k1 - k0 + 1} readout points over x's range "
            f"[{xs[0]}, {xs[-1]}] (at most {READOUT_MAX_POINTS})"
        )
    k = np.arange(k0, k1 + 1)
    at = k * int(spacing) if float(spacing).is_integer() else k * spacing
    if not len(at):
        return at, np.empty(0, np.int64)
    j = np.clip(np.searchsorted(xs, at), 1, max(len(xs) - 1, 1))
    left = np.clip(j - 1, 0, len(xs) - 1)
    right = np.clip(j, 0, len(xs) - 1)
    pick = np.where(np.abs(xs[left] - at) <= np.abs(xs[right] - at), left, right)
    own = float(np.median(np.diff(xs))) / 2 if len(xs) > 1 else 0.0
    keep = np.abs(xs[pick] - at) <= max(spacing / 2, own)
    return at[keep], order[pick[keep]]


def compact(values: np.ndarray) -> np.ndarray:
    """Finite values as the browser needs them: int32 when they are integers that fit (steps), else
    float32 (7 significant digits, more than a chart or its 4-digit hover shows): half the memory
    of the cached traces, and half the JSON where Plotly sends them as typed binary arrays (single
    charts); the Compare grid sends them as plain 7-digit numbers (``browser_array``)."""
    v = np.asarray(values)
    if v.dtype.kind in "iu" or (len(v) and np.all(np.mod(v, 1) == 0)):
        if len(v) == 0 or np.abs(v).max() < 2**31:
            return v.astype(np.int32)
    return v.astype(np.float32)


def browser_array(values, digits: int = 7) -> list:
    """An array as plain JSON numbers for the browser: integers as ints, floats to ``digits``
    significant digits (7: float32's precision; about 10 characters where float32's exact decimal
    takes 19), non-finite values as None (a gap in a line, an empty tooltip value)."""
    if not 1 <= digits <= 15:
        raise ValueError(f"digits must be in 1..15, got {digits}")
    v = np.asarray(values)
    if v.dtype.kind in "iub":
        return v.astype(np.int64).tolist()
    v = v.astype(np.float64)
    finite = np.isfinite(v)
    ok = finite & (v != 0)
    exp = np.zeros(len(v), np.int64)
    exp[ok] = digits - 1 - np.floor(np.log10(np.abs(v[ok]))).astype(np.int64)
    exact = np.abs(exp) <= 22  # 10^k is exact in float64 up to 1e22
    scale = np.power(10.0, np.where(exact, np.abs(exp), 0))
    # round(v * 10^k) / 10^k is the correctly rounded decimal of ``digits`` digits, so its repr
    # is that decimal
    r = np.where(exp >= 0, np.round(v * scale) / scale, np.round(v / scale) * scale)
    out = r.tolist()
    for i in np.flatnonzero(ok & ~exact):  # |v| outside ~1e-16..1e28: rare, one by one
        r = float(f"{v[i]:.{digits}g}")
        out[i] = r if math.isfinite(r) else float(v[i])  # rounded past float64's largest
    if not finite.all():
        out = [x if math.isfinite(x) else None for x in out]
    return out


def trace_weight(panel: Panel, *, smoothing: float = 0.0, bands: bool = True) -> float:
    """Points one run draws on ``panel`` per point of its raw line (``run_traces``): the raw line
    (1), its EMA (1/2), the band's two edges (2 x 1/4), the second column (1/2)."""
    w = 1.0
    w += 0.5 if smoothing > 0 else 0.0
    w += 0.5 if bands and panel.band is not None else 0.0
    w += 0.5 if panel.second else 0.0
    return w


def trace_points(
    panel: Panel, runs: int, *, budget: int, max_points: int, smoothing: float, bands: bool
) -> int:
    """The raw-line points per run that keep ``panel``'s traces for ``runs`` runs within
    ``budget`` points in all (and at most ``max_points``; never below 3, what LTTB needs)."""
    per_run = budget / (max(1, runs) * trace_weight(panel, smoothing=smoothing, bands=bands))
    return int(max(3, min(max_points, per_run)))


def panel_view(
    series: Sequence[RunSeries],
    panel: Panel,
    subsets: dict[str, str],
    drawn: Sequence[str],
    *,
    zoom_band: bool = True,
    x: str = X_STEP,
) -> PanelView:
    """How the grid shows ``panel`` beyond its traces, computed on the steps it shows: which steps
    (``subsets``: run key -> subset), which runs have nothing to draw (``drawn``: keys of the runs
    with traces; those without a finite value of the x column ``x`` named apart), and for the log s panel a zoom onto GSPO's band with the points outside it
    counted (``zoom_band``, when a GSPO run with a known sequence ε is shown)."""
    labels = {s.key: s.label for s in series}
    parts = [subset_text({labels[k]: v for k, v in subsets.items() if k in labels})]
    no_x = {s.key for s in series if not has_data(s.df, x)}
    missing = [s.label for s in series if s.key not in drawn and s.key not in no_x]
    if no_x:
        unlogged = [s.label for s in series if s.key in no_x]
        parts.append(f"{X_UNLOGGED.get(x, 'no ' + x)}: " + short_list(unlogged, len(series)))
    if drawn and missing:
        parts.append("no data: " + short_list(missing, len(series)))
    y_range = None
    if zoom_band and drawn and panel.clip_unit == "seq" and panel.band is not None:
        gspo = [s.eps.get("seq") for s in series if s.algorithm.lower() == "gspo"]
        y_range = seq_band_range(gspo) if gspo else None
        if y_range is not None:
            shown = [
                s.df[panel.column].to_numpy(np.float64)[s.rows(subsets.get(s.key, ALL))]
                for s in series
                if panel.column in s.df.columns
            ]
            out, total = count_outside(shown, y_range)
            parts.append(
                f"zoomed to {SEQ_BAND_ZOOM:g}x GSPO's band: {out} of {total} points outside "
                "the view"
            )
    kinds = set(subsets.values()) - {ALL}
    empty = "no data for the selected runs"
    if len(no_x) == len(series):
        empty = f"{X_UNLOGGED.get(x, 'no ' + x)} in the selected runs"
    elif kinds:
        empty = f"no data in the {' / '.join(SUBSET_TEXT[k] for k in sorted(kinds))} shown"
    tight = any(panel.column in s.bounds for s in series if s.key in drawn)
    return PanelView(" · ".join(p for p in parts if p), y_range, empty, panel.nonnegative, tight)


def _line(
    s: RunSeries,
    x: np.ndarray,
    y: np.ndarray,
    max_points: int,
    name: str,
    hover: str,
    width: float,
    opacity: float | None = None,
    role: str = "raw",
) -> dict:
    """One run's line trace (its colour, its algorithm's dash), cut to ``max_points`` by LTTB."""
    idx = downsample_indices(x, y, max_points)
    trace = {
        "type": "scatter",
        "x": compact(x[idx]),
        "y": compact(y[idx]),
        "mode": "lines",
        "name": name,
        "legendgroup": s.key,
        "hovertemplate": hover,
        "line": {"color": s.color, "dash": dash_for(s.algorithm), "width": width},
        "meta": role,
    }
    if opacity is not None:
        trace["opacity"] = opacity
    return trace


def compare_figure(
    series: Sequence[RunSeries], panel: Panel, *, height: int = PANEL_HEIGHT, **options
) -> go.Figure:
    """One small multiple: ``panel``'s metric for every run, titled with its unit and eps, GSPO's
    band lines on the log-ratio panel. ``options`` are ``run_traces``'s (x, smoothing, log_y,
    max_points, bands)."""
    traces = [t for s in series for t in run_traces(s, panel, **options)]
    x, log_y = options.get("x", X_STEP), options.get("log_y", False)
    shapes, notes = _clip_band_lines(series, panel)
    if not traces:
        notes.append(_centered_note("no data for the selected runs"))
    layout = _layout_dict(panel_title(panel, series), X_AXES.get(x, x), panel.unit, height, log_y)
    layout.update(shapes=shapes, annotations=notes, showlegend=False)
    # traces and layout are built here from known-good dicts: skip plotly's per-property validation
    # (it costs ~30 ms per chart; the Compare page draws a dozen)
    return go.Figure(data=traces, layout=layout, _validate=False)


def clip_band_lines(series: Sequence[RunSeries], panel: Panel) -> list[tuple[float, str]]:
    """GSPO's clip range as [(log(1-ε_low), 'log(1-ε_low)'), (log(1+ε_high), 'log(1+ε_high)')]:
    only on the sequence log-ratio panel (sequence unit, a band), and only when every run shares
    one sequence ε (else [])."""
    if panel.clip_unit != "seq" or panel.band is None:
        return []
    eps_set = {s.eps.get("seq") for s in series if s.eps.get("seq")}
    if len(eps_set) != 1:
        return []
    lo, hi = next(iter(eps_set))
    return [(math.log1p(-lo), "log(1-ε_low)"), (math.log1p(hi), "log(1+ε_high)")]


def _clip_band_lines(series: Sequence[RunSeries], panel: Panel) -> tuple[list[dict], list[dict]]:
    """(shapes, annotations): ``clip_band_lines`` as dotted lines across a Plotly figure,
    labelled."""
    shapes, notes = [], []
    for y, text in clip_band_lines(series, panel):
        ref = {"xref": "x domain", "yref": "y"}
        shapes.append(
            {
                "type": "line",
                **ref,
                "x0": 0,
                "x1": 1,
                "y0": y,
                "y1": y,
                "line": {"color": "#555", "dash": "dot", "width": 1},
            }
        )
        # the low line's label sits below it, the high line's above it: they never overlap
        notes.append(
            {
                "text": f"{text} = {y:.2g}",
                **ref,
                "x": 0,
                "y": y,
                "xanchor": "left",
                "yanchor": "top" if y < 0 else "bottom",
                "showarrow": False,
                "bgcolor": "rgba(255,255,255,0.75)",
                "font": {"size": 10, "color": "#333"},
            }
        )
    return shapes, notes


def _band_trace(s: RunSeries, panel: Panel, df, x, ok, n_out, log_y) -> dict | None:
    lo_col, hi_col = panel.band
    xv = df[x].to_numpy(np.float64)[ok]
    if lo_col == "±":
        if hi_col not in df.columns:
            return None
        m = df[panel.column].to_numpy(np.float64)[ok]
        sd = df[hi_col].to_numpy(np.float64)[ok]
        lo, hi = m - sd, m + sd
        if panel.column in s.bounds:  # mean ± std, cut to the values' observed range
            lo, hi = np.clip(lo, *s.bounds[panel.column]), np.clip(hi, *s.bounds[panel.column])
    else:
        if lo_col not in df.columns or hi_col not in df.columns:
            return None
        lo = df[lo_col].to_numpy(np.float64)[ok]
        hi = df[hi_col].to_numpy(np.float64)[ok]
    fin = np.isfinite(lo) & np.isfinite(hi)
    if log_y:
        fin &= lo > 0
    if not fin.any():
        return None
    bx, blo, bhi = envelope(xv[fin], lo[fin], hi[fin], n_out)
    return {
        "type": "scatter",
        "mode": "lines",
        "x": compact(np.concatenate([bx, bx[::-1]])),
        "y": compact(np.concatenate([bhi, blo[::-1]])),
        "fill": "toself",
        "fillcolor": _rgba(s.color, panel.band_opacity),
        "line": {"width": 0},
        "hoverinfo": "skip",
        "showlegend": False,
        "legendgroup": s.key,
        "name": f"{plot_text(s.label)} band",
        "meta": "band",
    }


LEGEND_TOP = {
    "orientation": "h",
    "x": 0,
    "xanchor": "left",
    "y": 1.0,
    "yanchor": "bottom",
    "font": {"size": 11},
}


def _layout_dict(title, xtitle, ytitle, height, log_y=False) -> dict:
    yaxis = {"title": {"text": plot_text(ytitle), "font": {"size": 11}}}
    if log_y:
        yaxis["type"] = "log"
    return {
        "title": {
            "text": plot_text(title),
            "font": {"size": 14},
            "x": 0,
            "xanchor": "left",
            "y": 0.98,
            "yanchor": "top",
            "yref": "container",
        },
        "height": height,
        "margin": {"l": 60, "r": 15, "t": 40, "b": 45},
        "hovermode": "closest",
        "xaxis": {"title": {"text": plot_text(xtitle), "font": {"size": 11}}},
        "yaxis": yaxis,
    }


def _layout(fig, title, xtitle, ytitle, height, log_y=False) -> None:
    fig.update_layout(_layout_dict(title, xtitle, ytitle, height, log_y))


def _centered_note(text: str, xref: str = "paper", yref: str = "paper", size: int = 13) -> dict:
    """A grey note in the middle of a plot (an empty chart says why it is empty)."""
    return {
        "text": text,
        "showarrow": False,
        "x": 0.5,
        "y": 0.5,
        "xref": xref,
        "yref": yref,
        "font": {"size": size, "color": "#888"},
    }


def _empty_note(fig: go.Figure, text: str) -> None:
    fig.add_annotation(_centered_note(text))


# ---------------------------------------------------------------------------------------------
# per-sequence pages
# ---------------------------------------------------------------------------------------------


def symlog_ticks(axis: SymLog, lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Tick positions (on the symmetric-log scale, within [lo, hi]) and labels (in the value's own
    units): 0 and ±1 per decade from the axis's linear scale up, e.g. 1e-3, 0.01, 0.1 (decades
    below the scale would all sit on top of 0)."""
    first = math.ceil(math.log10(axis.scale))
    values = [0.0] + [sign * 10.0**e for e in range(first, 4) for sign in (1, -1)]
    pos = axis.forward(np.array(values))
    keep = [(float(p), v) for p, v in zip(pos, values, strict=True) if lo <= p <= hi]
    keep.sort()
    return [p for p, _ in keep], [("-" if v < 0 else "") + fmt_eps(abs(v)) for _, v in keep]


def step_heatmap_figure(
    hist: StepHistogram,
    *,
    title: str,
    value_label: str,
    hlines: Sequence[tuple[float, str]] = (),
    lines: Sequence[tuple[np.ndarray, np.ndarray, str, str]] = (),
    height: int = 380,
) -> go.Figure:
    """Per-step histograms as a heatmap (x step, y value, colour = share of the step's rows),
    with optional horizontal reference lines ``(value, label)`` (clip band) and overlaid white
    line series ``(x, y, name, dash)`` (named in the caption: white has no legend swatch). A
    symmetric-log histogram (``hist.axis``) gets ticks and hover in the value's own units."""
    fig = go.Figure()
    axis = hist.axis
    if hist.z.size:
        centers = (hist.value_edges[:-1] + hist.value_edges[1:]) / 2
        own = axis.inverse(centers) if axis is not None else centers
        fig.add_trace(
            go.Heatmap(
                x=hist.step_centers,
                y=centers,
                z=hist.z,
                customdata=np.broadcast_to(own[:, None], hist.z.shape),
                colorscale="Viridis",
                colorbar={"title": {"text": "share", "side": "right"}, "thickness": 12},
                hovertemplate="step %{x:.0f}<br>"
                + value_label
                + " %{customdata:.4g}<br>share %{z:.3f}<extra></extra>",
            )
        )
    else:
        _empty_note(fig, "no rows")
    for xs, ys, name, dash in lines:
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name=name,
                line={"color": "white", "width": 1.5, "dash": dash},
            )
        )
    for y, txt in hlines:
        fig.add_hline(
            y=float(axis.forward(y)) if axis is not None else y,
            line={"color": "#ff4b4b", "dash": "dash", "width": 1.5},
            annotation_text=txt,
            annotation_font_color="#ff4b4b",
            annotation_font_size=11,
            annotation_position="top right" if y >= 0 else "bottom right",
        )
    ytitle = value_label + (" (symmetric log scale)" if axis is not None else "")
    _layout(fig, title, "optimizer step", ytitle, height)
    if axis is not None and hist.z.size:
        tickvals, ticktext = symlog_ticks(axis, hist.value_edges[0], hist.value_edges[-1])
        fig.update_yaxes(tickvals=tickvals, ticktext=ticktext)
    fig.update_layout(showlegend=False, margin={"t": 62})
    return fig


def seq_band_name(seq_eps: tuple[float, float] | None, loss_unit: str | None) -> str:
    """What the sequence-unit band is on this run: GSPO's range where the run's loss clips on s
    (``loss_unit == "seq"``), a measured band where it does not (GRPO), plain where the loss's unit
    is unknown; with its ε when known."""
    eps = eps_text(seq_eps)
    if loss_unit == "seq":
        return f"GSPO's range ({eps}, the loss clips here)"
    if loss_unit == "token":
        return f"sequence band ({eps}, measured: this loss clips tokens)"
    return f"sequence band ({eps})"


def token_vs_sequence_figure(
    df: pd.DataFrame,
    *,
    seq_eps: tuple[float, float] | None = None,
    loss_unit: str | None = None,
    example: HiddenMove | None = None,
    height: int = 420,
) -> go.Figure:
    """Each sequence: x = its sequence log-ratio log s, y = the spread of its token log-ratios
    (max - min), coloured by whether it lies outside the sequence band (``seq_clipped``). Points
    near x = 0 high up are sequences whose ratio ~1 hides large token moves; ``example`` (from
    ``aggregate.hidden_move_example``, a sequence of ``df``) gets an arrow on its very point."""
    need = (Seq.SEQ_LOG_RATIO, Seq.TOKEN_LOG_RATIO_MIN, Seq.TOKEN_LOG_RATIO_MAX)
    fig = go.Figure()
    title = "Token vs sequence: a ratio near 1 can hide large token moves"
    axes = ("sequence log-ratio log s (nats)", "token log-ratio range max-min (nats)")
    if not all(c in df.columns for c in need) or len(df) == 0:
        _empty_note(fig, "no per-sequence token spread recorded")
        _layout(fig, title, *axes, height)
        return fig
    x = df[Seq.SEQ_LOG_RATIO].to_numpy(np.float64)
    y = (df[Seq.TOKEN_LOG_RATIO_MAX] - df[Seq.TOKEN_LOG_RATIO_MIN]).to_numpy(np.float64)
    clipped = (
        df[Seq.SEQ_CLIPPED].to_numpy(bool)
        if Seq.SEQ_CLIPPED in df.columns
        else np.zeros(len(x), bool)
    )
    length = df[Seq.LENGTH].to_numpy() if Seq.LENGTH in df.columns else np.full(len(x), np.nan)
    band = seq_band_name(seq_eps, loss_unit)
    outside = "outside " + band + (": clipped" if loss_unit == "seq" else "")
    for mask, name, color in ((clipped, outside, "#d62728"), (~clipped, "inside", "#1f77b4")):
        if mask.any():
            fig.add_trace(
                go.Scattergl(
                    x=x[mask],
                    y=y[mask],
                    mode="markers",
                    name=name,
                    marker={"color": color, "size": 5, "opacity": 0.55},
                    customdata=length[mask],
                    hovertemplate="log s %{x:.3g}<br>token range %{y:.3g}<br>length %{customdata}"
                    "<extra></extra>",
                )
            )
    if seq_eps:
        for v in (math.log1p(-seq_eps[0]), math.log1p(seq_eps[1])):
            fig.add_vline(x=v, line={"color": "#ff4b4b", "dash": "dash", "width": 1})
    if example is not None:
        ex, ey = example.log_s, example.token_range
        fig.add_annotation(
            text=f"log s = {ex:.2g} (s = {math.exp(ex):.6g}), token range {ey:.2g}",
            x=ex,
            y=ey,
            showarrow=True,
            arrowhead=2,
            ax=110,
            ay=-45,
            font={"size": 11},
            bgcolor="rgba(255,255,255,0.85)",
        )
    _layout(fig, title, *axes, height)
    fig.update_layout(legend=LEGEND_TOP, margin={"t": 62})
    return fig


def clip_by_length_figure(
    df: pd.DataFrame,
    *,
    seq_eps: tuple[float, float] | None = None,
    token_eps: tuple[float, float] | None = None,
    loss_unit: str | None = None,
    height: int = 340,
) -> go.Figure:
    """Bars per length bucket: share of sequences outside the sequence band, and mean share of
    tokens outside the token band; each named by its ε and whether the run's loss clips there."""
    fig = go.Figure()
    role = {"seq": "", "token": ""}
    if loss_unit in role:
        role = {u: " (the loss's unit)" if u == loss_unit else " (measured)" for u in role}
    names = {
        Seq.SEQ_CLIPPED: f"share of sequences outside the sequence band, {eps_text(seq_eps)}"
        + role["seq"],
        Seq.TOKEN_CLIP_FRACTION: f"share of tokens outside the token band, {eps_text(token_eps)}"
        + role["token"],
    }
    if len(df) == 0:
        _empty_note(fig, "no sequences")
    else:
        for column, color in ((Seq.SEQ_CLIPPED, "#1f77b4"), (Seq.TOKEN_CLIP_FRACTION, "#ff7f0e")):
            if column in df.columns:
                fig.add_trace(
                    go.Bar(
                        x=df["bucket"],
                        y=df[column],
                        name=names[column],
                        marker_color=color,
                        customdata=df["sequences"],
                        hovertemplate="%{x} tokens<br>%{y:.3f}<br>%{customdata} sequences"
                        "<extra></extra>",
                    )
                )
    _layout(
        fig,
        "Clip rate by completion length",
        "length bucket (tokens, quantiles)",
        "clip fraction",
        height,
    )
    fig.update_xaxes(type="category")  # "5-6" is a label, not a number
    fig.update_layout(barmode="group", legend=LEGEND_TOP, margin={"t": 80})
    return fig


def zero_variance_figure(
    df: pd.DataFrame, *, max_points: int = 1500, height: int = 340
) -> go.Figure:
    """Stacked areas over steps: share of groups with no learning signal, by shared reward."""
    fig = go.Figure()
    colors = {ZV_ALL_HIGH: "#2ca02c", ZV_ALL_LOW: "#d62728", ZV_OTHER: "#7f7f7f"}
    if len(df) == 0:
        _empty_note(fig, "no groups")
    else:
        step = df[Seq.STEP].to_numpy(np.float64)
        idx = np.arange(len(df))
        if len(df) > max_points:  # bucket means keep the areas honest (shares, not extremes)
            b = np.linspace(0, len(df), max_points, endpoint=False).astype(np.int64)
            idx = np.unique(b)
        for name in (ZV_ALL_LOW, ZV_ALL_HIGH, ZV_OTHER):
            if name not in df.columns:
                continue
            v = df[name].to_numpy(np.float64)
            if len(idx) < len(v):
                v = np.add.reduceat(v, idx) / np.diff(np.append(idx, len(v)))
            fig.add_trace(
                go.Scatter(
                    x=step[idx],
                    y=v,
                    name=name,
                    stackgroup="zv",
                    mode="lines",
                    line={"width": 0.5, "color": colors[name]},
                    hovertemplate="step %{x}<br>%{y:.3f} of groups<extra>" + name + "</extra>",
                )
            )
    _layout(
        fig,
        "Zero-variance groups by their shared reward",
        "optimizer step",
        "fraction of groups",
        height,
    )
    fig.update_yaxes(range=[0, 1])
    fig.update_layout(legend=LEGEND_TOP, margin={"t": 62})
    return fig


def histogram_figure(
    groups: Sequence[tuple[str, np.ndarray, str]],
    *,
    title: str,
    xlabel: str,
    bins: int = 60,
    height: int = 320,
) -> go.Figure:
    """Overlaid histograms (probability density) of several samples: (name, values, colour)."""
    fig = go.Figure()
    any_ = False
    for name, values, color in groups:
        v = np.asarray(values, dtype=np.float64)
        v = v[np.isfinite(v)]
        if len(v) == 0:
            continue
        any_ = True
        fig.add_trace(
            go.Histogram(
                x=v, name=name, nbinsx=bins, histnorm="probability", marker_color=color, opacity=0.6
            )
        )
    if not any_:
        _empty_note(fig, "no values")
    _layout(fig, title, xlabel, "share", height)
    fig.update_layout(barmode="overlay", legend=LEGEND_TOP, margin={"t": 62})
    return fig


def group_rewards_figure(df: pd.DataFrame, *, height: int = 340) -> go.Figure:
    """One step: every sequence's reward by group (dots), the group mean (bar)."""
    fig = go.Figure()
    if len(df) == 0 or Seq.REWARD not in df.columns:
        _empty_note(fig, "no sequences at this step")
    else:
        keys = [Seq.RANK, Seq.GROUP] if Seq.RANK in df.columns else [Seq.GROUP]
        labels = (
            df[keys].astype(str).agg(":".join, axis=1)
            if len(keys) > 1
            else df[Seq.GROUP].astype(str)
        )
        if Seq.RANK in df.columns and df[Seq.RANK].nunique() == 1:
            labels = df[Seq.GROUP].astype(str)
        d = pd.DataFrame({"g": labels.to_numpy(), "r": df[Seq.REWARD].to_numpy(np.float64)})
        m = d.groupby("g", sort=False)["r"].agg(["mean", "std", "min", "max"])
        zero = (m["min"] == m["max"]).to_numpy()
        fig.add_trace(
            go.Bar(
                x=m.index,
                y=m["mean"],
                name="group mean",
                marker_color=np.where(zero, "#bbbbbb", "#1f77b4"),
                hovertemplate="group %{x}<br>mean %{y:.3f}<extra></extra>",
            )
        )
        if zero.any():  # a bar of height 0 draws nothing: mark every no-signal group's level
            fig.add_trace(
                go.Scatter(
                    x=m.index[zero],
                    y=m["mean"][zero],
                    mode="markers",
                    name="no signal (all rewards equal)",
                    marker={
                        "symbol": "line-ew-open",
                        "size": 22,
                        "color": "#888888",
                        "line": {"width": 4, "color": "#888888"},
                    },
                    hovertemplate="group %{x}<br>every reward = %{y:.3g}: A = 0, no signal"
                    "<extra></extra>",
                )
            )
        fig.add_trace(
            go.Scatter(
                x=d["g"],
                y=d["r"],
                mode="markers",
                name="sequence reward",
                marker={"color": "#222", "size": 5, "opacity": 0.6},
                hovertemplate="group %{x}<br>reward %{y:.3f}<extra></extra>",
            )
        )
    _layout(
        fig,
        "Reward per group (grey bar = zero-variance group: no signal)",
        "group",
        "reward",
        height,
    )
    fig.update_xaxes(type="category")
    fig.update_layout(legend=LEGEND_TOP, margin={"t": 62})
    return fig


def scatter_figure(
    df: pd.DataFrame,
    x: str,
    y: str,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    color_by: str | None = None,
    height: int = 340,
) -> go.Figure:
    """A plain scatter of two per-sequence columns (caller samples the rows)."""
    fig = go.Figure()
    if len(df) == 0 or x not in df.columns or y not in df.columns:
        _empty_note(fig, "no sequences")
    else:
        marker = {"size": 5, "opacity": 0.5, "color": "#1f77b4"}
        if color_by and color_by in df.columns:
            marker.update(
                color=df[color_by].astype(float).to_numpy(),
                colorscale="RdBu",
                showscale=True,
                colorbar={"title": {"text": color_by}, "thickness": 12},
            )
        fig.add_trace(
            go.Scattergl(
                x=df[x].to_numpy(),
                y=df[y].to_numpy(),
                mode="markers",
                marker=marker,
                hovertemplate=f"{xlabel} %{{x:.4g}}<br>{ylabel} %{{y:.4g}}<extra></extra>",
            )
        )
    _layout(fig, title, xlabel, ylabel, height)
    return fig


def token_bars_figure(
    token_log_ratios: np.ndarray,
    *,
    token_eps: tuple[float, float] | None,
    seq_log_ratio: float | None = None,
    tokens: Sequence[str] | None = None,
    height: int = 320,
) -> go.Figure:
    """One sequence's token log-ratios as bars, the token clip band [log(1-ε), log(1+ε)] shaded,
    bars outside it red, and the sequence's log s as a line. ``token_eps`` None (the run's token ε
    is unknown): no band, every bar blue, and the title says so."""
    v = np.asarray(token_log_ratios, dtype=np.float64)
    if token_eps is not None:
        lo, hi = math.log1p(-token_eps[0]), math.log1p(token_eps[1])
        outside = (v < lo) | (v > hi)
    else:
        outside = np.zeros(len(v), bool)
    fig = go.Figure()
    text = [plot_text(t) for t in tokens] if tokens is not None and len(tokens) == len(v) else None
    fig.add_trace(
        go.Bar(
            x=np.arange(len(v)),
            y=v,
            marker_color=np.where(outside, "#d62728", "#1f77b4"),
            hovertext=text,
            name="log r_t",
            hovertemplate="token %{x}<br>log r %{y:.4g}"
            + ("<br>%{hovertext}" if text else "")
            + "<extra></extra>",
        )
    )
    if token_eps is not None:
        fig.add_hrect(
            y0=lo,
            y1=hi,
            fillcolor="rgba(44,160,44,0.12)",
            line_width=0,
            layer="below",
            annotation_text=f"token band ({eps_text(token_eps)})",
            annotation_position="top left",
            annotation_font_size=10,
        )
    if seq_log_ratio is not None and math.isfinite(seq_log_ratio):
        fig.add_hline(
            y=seq_log_ratio,
            line={"color": "#000", "dash": "dot", "width": 1.5},
            annotation_text=f"log s = {seq_log_ratio:.4g}",
            annotation_position="bottom right",
        )
    fig.update_xaxes(token_ticks(tokens if text else None, len(v)))
    title = (
        f"Token log-ratios ({int(outside.sum())} of {len(v)} outside the token band)"
        if token_eps is not None
        else f"Token log-ratios ({len(v)} tokens; token ε unknown: no band drawn)"
    )
    finite = np.abs(v[np.isfinite(v)])
    if token_eps is not None and len(finite) and 0 < finite.max() < 0.25 * min(-lo, hi):
        top = 1.3 * float(finite.max())  # bars far inside the band: zoom to them
        fig.update_yaxes(range=[-top, top])
        title += "; zoomed in: the shaded band extends beyond the view"
    xtitle = "token (its text as recorded)" if text else "token position"
    _layout(fig, title, xtitle, "log r_t = log π/π_old (nats)", height)
    return fig


TOKEN_LABELS_MAX = 60  # token texts under the bars; beyond, every k-th (the hover has them all)
TOKEN_CHARS_MAX = 10  # characters of a token's label (the hover has it whole)


def token_label(token: str) -> str:
    """A token's text as a tick label: spaces shown as ␣, line breaks as ⏎, tabs as ⇥ (else a
    leading space or a newline token is invisible), cut to TOKEN_CHARS_MAX, escaped for Plotly."""
    shown = str(token).replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥")
    if len(shown) > TOKEN_CHARS_MAX:
        shown = shown[: TOKEN_CHARS_MAX - 1] + "…"
    return plot_text(shown)


def token_ticks(tokens: Sequence[str] | None, n: int) -> dict:
    """The token chart's x axis: each bar labelled with its token's text where the run recorded
    it (every k-th when there are more than TOKEN_LABELS_MAX), else whole-number positions at a
    1-2-5 spacing (never a fractional token)."""
    if tokens is not None and len(tokens) == n and n:
        every = math.ceil(n / TOKEN_LABELS_MAX)
        at = list(range(0, n, every))
        return {
            "tickmode": "array",
            "tickvals": at,
            "ticktext": [token_label(tokens[i]) for i in at],
            "tickangle": -60 if n > 12 else 0,
            "tickfont": {"size": 11 if n <= 30 else 9},
        }
    step = 1
    while n / step > 20:  # 1, 2, 5, 10, 20, 50, ...
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": "d"}


def binned_mean_figure(
    df: pd.DataFrame, *, title: str, xlabel: str, ylabel: str, height: int = 340
) -> go.Figure:
    """Mean of y per x bucket with ± 1 standard-error bars (from ``aggregate.binned_mean``)."""
    fig = go.Figure()
    if len(df) == 0:
        _empty_note(fig, "no sequences")
    else:
        fig.add_trace(
            go.Scatter(
                x=df["x"],
                y=df["mean"],
                mode="lines+markers",
                name="mean",
                error_y={"type": "data", "array": df["sem"].fillna(0), "visible": True},
                customdata=df["count"],
                line={"color": "#1f77b4"},
                hovertemplate=xlabel + " %{x:.0f}<br>mean %{y:.3f}<br>%{customdata} sequences"
                "<extra></extra>",
            )
        )
    _layout(fig, title, xlabel, ylabel, height)
    return fig
