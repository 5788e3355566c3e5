"""The Compare page's traces in no renderer's terms: for one run and one panel (``app.compare.panels``),
the lines it draws (raw, EMA, second column, band) as ``Trace`` records and the values its hover
lists as a ``Readout``. Text here is plain (a run or metric name from disk as it is); each
renderer formats the records its own way and escapes what its format needs
(``app.compare.echarts_grid`` for the Compare grid, ``app.compare.plotly_traces`` for Plotly).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from app.compare.panels import Panel, has_data
from app.compare.series_math import compact, downsample_indices, ema, envelope, readout_points
from app.compare.view import (
    SEQ_BAND_ZOOM,
    SUBSET_TEXT,
    PanelView,
    below_floor,
    count_outside,
    seq_band_range,
    short_list,
    subset_text,
)
from app.eps_format import eps_text, fmt_eps
from app.line_style import DOT, MARKER_SIZE, OPEN_TRIANGLE, SECOND_MARKER_SIZE, dash_for, is_sparse
from gspo_metrics.spec import clip_unit_of
from training_hooks.findings.lag import ALL, LagSplit, lag_split
from training_hooks.metric_map import Derived
from training_hooks.schema import Step

DEFAULT_MAX_POINTS = 2000

X_STEP = Step.STEP
X_ELAPSED = Derived.ELAPSED_MIN
X_TOKENS = Derived.TOKENS_SEEN
#: the rollout axis: a step's rollout number, its rollout's optimizer steps spread evenly within
#: it (``rollout_position``), so runs with different minibatches per rollout line up by rollout
X_ROLLOUT = "rollout_position"
X_AXES = {
    X_STEP: "optimizer step",
    X_ROLLOUT: "rollout (its optimizer steps spread within it)",
    X_ELAPSED: "wall time (minutes since start)",
    X_TOKENS: "response tokens seen",
}
#: a run without the x axis's column, in a note (never "no tokens seen": that reads as zero)
X_UNLOGGED = {
    X_STEP: "no step",
    X_ROLLOUT: "no rollout number",
    X_ELAPSED: "no wall time",
    X_TOKENS: "no token counts",
}
#: x axes whose values are whole numbers (the readout and zoom labels have no decimals)
WHOLE_X = (X_STEP, X_TOKENS)


def rollout_position(df: pd.DataFrame) -> np.ndarray:
    """Each row's place on the rollout axis: its rollout number r plus k/n, where it is the k-th
    (from 0, in row order) of the n rows of rollout r; NaN where the rollout is not known (never
    a rollout 0). A rollout's on-policy step sits at r, its later minibatches between r and r+1."""
    if Step.ROLLOUT not in df.columns:
        return np.full(len(df), np.nan)
    r = pd.to_numeric(df[Step.ROLLOUT], errors="coerce").astype(float).reset_index(drop=True)
    known = r.notna()
    out = np.full(len(df), np.nan)
    if known.any():
        groups = r[known].groupby(r[known], sort=False)
        k = groups.cumcount().to_numpy(np.float64)
        n = groups.transform("size").to_numpy(np.float64)
        out[known.to_numpy()] = r[known].to_numpy() + k / n
    return out


def with_rollout_position(
    df: pd.DataFrame, position: Callable[[pd.DataFrame], np.ndarray] = rollout_position
) -> pd.DataFrame:
    """``df`` with the rollout axis's column (``position(df)``, ``rollout_position`` unless a
    cached one) when it has a rollout column and lacks that one (a new frame sharing ``df``'s
    columns: pandas copies on write), else ``df`` itself."""
    if X_ROLLOUT in df.columns or Step.ROLLOUT not in df.columns:
        return df
    return df.assign(**{X_ROLLOUT: position(df)})


#: a trace's role: what it draws
BAND, RAW, EMA, SECOND, READOUT = "band", "raw", "ema", "second", "readout"


@dataclass(frozen=True)
class Style:
    """How a trace looks: its run's colour, its algorithm's dash (``app.line_style``), a line
    width (0: no line), an opacity (None: opaque), a marker size at every point (None: no
    markers) and its shape (``line_style.DOT`` or ``OPEN_TRIANGLE``) and, for a band, the fill's
    opacity."""

    color: str
    dash: str = "solid"
    width: float = 0.0
    opacity: float | None = None
    marker: int | None = None
    fill_opacity: float = 0.0
    symbol: str = DOT


@dataclass(frozen=True, eq=False)  # arrays: no elementwise ==
class Trace:
    """One run's line (or dots, or band) on one panel. ``label`` is the run's name on the panel
    (its label, the clip unit's ε, the steps shown), ``name`` this trace's (the label, with the
    second column's name or "band"); both plain text. A band's upper edge is ``y``, its lower
    edge ``lo``; x and y are ``compact`` arrays, cut to the trace's point budget."""

    role: str
    run: str
    label: str
    name: str
    x: np.ndarray
    y: np.ndarray
    style: Style
    lo: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Readout:
    """A run's values at the readout points ``x`` shared by every run of a chart
    (``series_math.readout_points``): its value ``y``, EMA and second column (None when not drawn),
    and ``source``, the foreign metric the column was mapped from (None for the run's own)."""

    run: str
    label: str
    color: str
    x: np.ndarray
    y: np.ndarray
    ema: np.ndarray | None = None
    second: np.ndarray | None = None
    source: str | None = None
    role: ClassVar[str] = READOUT


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
        """Boolean mask over ``df``'s rows: the steps of ``subset`` (``lag.SUBSETS``)."""
        if subset == ALL:
            return np.ones(len(self.df), bool)
        return (self.lag or lag_split(self.df)).mask(subset)


def panel_title(panel: Panel, series: Sequence[RunSeries]) -> str:
    """The panel's title (plain text: extra panels are titled with a metric name from disk), with
    the clip unit of clip panels and its ε: "ε 3e-4/4e-4" when every run that states one shares
    it, else that it differs per run."""
    t = panel.title
    if panel.clip_unit:
        t += " — sequence unit" if panel.clip_unit == "seq" else " — token unit"
        vals = {e for s in series if (e := s.eps.get(panel.clip_unit)) is not None}
        if len(vals) == 1:
            t += f", {eps_text(next(iter(vals)))}"
        elif vals:
            t += ", ε differs per run (see hover)"
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
) -> list[Trace | Readout]:
    """The traces one run contributes to ``panel``: band, raw (faint when smoothed), EMA, second
    column, on the steps of ``subset`` only (``lag.SUBSETS``; the EMA runs over those steps,
    never across the others). At most ``max_points * trace_weight(...)`` points in all. Empty
    when the run lacks the column, the x axis or steps in the subset.

    ``readout`` (a spacing, ``series_math.readout_spacing``) adds a ``Readout``: the run's value,
    EMA and second column at the rows nearest the multiples of the spacing
    (``series_math.readout_points``), for a hover that lists every run at one x."""
    df = s.df
    if panel.column not in df.columns or x not in df.columns:
        return []
    xv_all = df[x].to_numpy(np.float64)
    yv_all = df[panel.column].to_numpy(np.float64)
    on_axis = s.rows(subset) & np.isfinite(xv_all)
    ok = on_axis & np.isfinite(yv_all)
    if log_y:
        ok &= yv_all > 0
    if not ok.any():
        return []
    xv, yv = xv_all[ok], yv_all[ok]
    sparse = is_sparse(int(ok.sum()), int(on_axis.sum()))
    # a dense series breaks where a step shown has no finite value (a NaN diagnostic is unknown,
    # never 0); a sparse one has a marker at each point instead. Per point, the count of such
    # steps before it: two points have a gap between them when their counts differ
    gaps = None if sparse else np.cumsum(on_axis & ~np.isfinite(yv_all))[ok]
    label = _trace_name(s, panel, subset)
    out: list[Trace | Readout] = []
    if bands and (band := _band_trace(s, panel, label, ok, max(max_points // 4, 2), x, log_y)):
        out.append(band)
    smooth = smoothing > 0 and len(yv) > 2 and not sparse
    dash = dash_for(s.algorithm)
    raw_style = Style(s.color, dash, 1, 0.25) if smooth else Style(s.color, dash, 1.8, 1.0)
    if sparse:  # a marker at every point: a single point is visible, a gap is not bridged unseen
        raw_style = Style(s.color, dash, 1.8, 1.0, marker=MARKER_SIZE)
    out.append(_line(s, RAW, label, label, xv, yv, max_points, raw_style, gaps))
    fewer = max(max_points // 2, 3)
    ys = ema(yv, smoothing) if smooth else None
    if ys is not None:
        out.append(_line(s, EMA, label, label, xv, ys, fewer, Style(s.color, dash, 2), gaps))
    y2 = _second_column(s, panel, ok)
    if y2 is not None:
        fin = np.isfinite(y2)
        marks = Style(s.color, dash, 0, 0.8, SECOND_MARKER_SIZE, symbol=OPEN_TRIANGLE)
        name2 = f"{label} · {panel.second_label}"
        out.append(_line(s, SECOND, label, name2, xv[fin], y2[fin], fewer, marks))
    if readout is not None:
        at, rows = readout_points(xv, readout)
        pick = {k: v[rows] if v is not None else None for k, v in (("ema", ys), ("second", y2))}
        source = s.sources.get(panel.column)
        out.append(Readout(s.key, label, s.color, at, yv[rows], **pick, source=source))
    return out


def _second_column(s: RunSeries, panel: Panel, ok: np.ndarray) -> np.ndarray | None:
    """The panel's second column on the rows ``ok``, or None when the run has no finite value of
    it there."""
    if not panel.second or panel.second not in s.df.columns:
        return None
    y2 = s.df[panel.second].to_numpy(np.float64)[ok]
    return y2 if np.isfinite(y2).any() else None


def _trace_name(s: RunSeries, panel: Panel, subset: str) -> str:
    """A run's trace name on ``panel``: its label, the clip unit's ε, the steps shown."""
    name = s.label
    if panel.clip_unit and s.eps.get(panel.clip_unit):
        name += f" ({eps_text(s.eps[panel.clip_unit])})"
    if subset != ALL:
        name += f" · {SUBSET_TEXT[subset]}"
    return name


def _line(
    s: RunSeries,
    role: str,
    label: str,
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    max_points: int,
    style: Style,
    gaps: np.ndarray | None = None,
) -> Trace:
    """One run's line (or dots), cut to ``max_points`` by LTTB; ``gaps`` (per point, the count of
    steps shown without a value before it) puts a NaN point (a break in the line) between two
    kept points with unknown steps between them, half-way in x."""
    idx = downsample_indices(x, y, max_points)
    xs, ys = x[idx], y[idx]
    if gaps is not None and len(idx) > 1:
        after = np.flatnonzero(np.diff(gaps[idx]) > 0)  # a gap between point i and i + 1
        if len(after):
            mid = (xs[after] + xs[after + 1]) / 2
            xs = np.insert(xs.astype(np.float64), after + 1, mid)
            ys = np.insert(ys.astype(np.float64), after + 1, np.nan)
    return Trace(role, s.key, label, name, compact(xs), compact(ys), style)


def _band_trace(
    s: RunSeries, panel: Panel, label: str, ok: np.ndarray, n_out: int, x: str, log_y: bool
) -> Trace | None:
    """The run's band on the rows ``ok``: (lower, upper) columns, or mean ± std cut to the
    values' observed range (``RunSeries.bounds``); cut to ``n_out`` points by a min/max
    envelope. None when the panel has no band or the run lacks its columns or finite values."""
    if panel.band is None:
        return None
    df = s.df
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
    edges = compact(np.concatenate([bhi, blo]))  # one type for both edges
    style = Style(s.color, fill_opacity=panel.band_opacity)
    n = len(bx)
    return Trace(BAND, s.key, label, f"{s.label} band", compact(bx), edges[:n], style, edges[n:])


def trace_weight(panel: Panel, *, smoothing: float, bands: bool) -> float:
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
    with traces; those without a finite value of the x column ``x`` named apart), for the log s
    panel a zoom onto GSPO's band with the points outside it counted (``zoom_band``, when a GSPO
    run with a known sequence ε is shown), and for a panel with a float-noise floor whose every
    value shown lies below it, that fact (``PanelView.noise_floor``)."""
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
        gspo = [
            e
            for s in series
            if clip_unit_of(s.algorithm) == "seq" and (e := s.eps.get("seq")) is not None
        ]
        if gspo:
            y_range = seq_band_range(gspo)
            out, total = count_outside(_shown(series, panel, subsets), y_range)
            widest = max(gspo, key=lambda e: e[0] + e[1])
            whose = (
                "GSPO's band"
                if len(set(gspo)) == 1
                else f"the widest GSPO band of the runs (ε {fmt_eps(widest[0])}/{fmt_eps(widest[1])})"
            )
            parts.append(
                f"zoomed to {SEQ_BAND_ZOOM:g}x {whose}: {out} of {total} points outside the view"
            )
    floor = panel.noise_floor  # every value the drawn runs show below it: float noise
    top = None if floor is None else below_floor(_shown(series, panel, subsets, drawn), floor)
    if floor is not None and top is not None:
        parts.append(
            f"float noise: every value below {fmt_eps(floor)} (largest {fmt_eps(top)}), drawn at 0"
        )
        y_range = (0.0, floor)
    kinds = set(subsets.values()) - {ALL}
    empty = "no data for the selected runs"
    if len(no_x) == len(series):
        empty = f"{X_UNLOGGED.get(x, 'no ' + x)} in the selected runs"
    elif kinds:
        empty = f"no data in the {' / '.join(SUBSET_TEXT[k] for k in sorted(kinds))} shown"
    tight = any(panel.column in s.bounds for s in series if s.key in drawn)
    return PanelView(
        " · ".join(p for p in parts if p),
        y_range,
        empty,
        panel.nonnegative,
        tight,
        floor if top is not None else None,
    )


def _shown(
    series: Sequence[RunSeries],
    panel: Panel,
    subsets: dict[str, str],
    runs: Sequence[str] | None = None,
) -> list[np.ndarray]:
    """``panel``'s column on the steps each run shows (``subsets``), per run (of ``runs``: keys,
    else every one) that has the column."""
    return [
        s.df[panel.column].to_numpy(np.float64)[s.rows(subsets.get(s.key, ALL))]
        for s in series
        if panel.column in s.df.columns and (runs is None or s.key in runs)
    ]


def clip_band_lines(series: Sequence[RunSeries], panel: Panel) -> list[tuple[float, str]]:
    """GSPO's clip range as [(log(1-ε_low), 'log(1-ε_low)'), (log(1+ε_high), 'log(1+ε_high)')]:
    only on the sequence log-ratio panel (sequence unit, a band), and only when every run shares
    one sequence ε (else [])."""
    if panel.clip_unit != "seq" or panel.band is None:
        return []
    eps_set = {e for s in series if (e := s.eps.get("seq"))}
    if len(eps_set) != 1:
        return []
    lo, hi = next(iter(eps_set))
    return [(math.log1p(-lo), "log(1-ε_low)"), (math.log1p(hi), "log(1+ε_high)")]


# ------------------------------------------------------------------------ the per-lag split

#: the x column of the per-lag charts: the declared policy lag
X_LAG = Step.POLICY_LAG
X_LAG_NAME = "policy lag (optimizer steps since the batch was sampled)"
LAG_COUNT_LABEL = "steps at this lag"


def declared_lags(s: RunSeries) -> np.ndarray:
    """The distinct declared policy lags of the run's steps, sorted (empty when none is
    declared: a measured lag tells on- from off-policy, not how far off)."""
    lags = [v for v in (s.lag or lag_split(s.df)).lag if v is not None]
    return np.unique(np.asarray(lags, np.int64))


def splits_by_lag(series: Sequence[RunSeries]) -> bool:
    """True when some run declares two or more off-policy lags (1 and 2, ...): only then does a
    split by lag show more than the on/off-policy split of the "steps" control."""
    return any(int((declared_lags(s) >= 1).sum()) >= 2 for s in series)


def lag_traces(s: RunSeries, panel: Panel) -> list[Trace | Readout]:
    """The run's mean of ``panel``'s column at each declared policy lag, over every step of that
    lag with a finite value: a line with a marker at each lag, and its readout (the mean and
    ``LAG_COUNT_LABEL``, the steps it averages, as the second column). Empty when the run has no
    declared lag or no value of the column."""
    if panel.column not in s.df.columns:
        return []
    lag = np.array([np.nan if v is None else v for v in (s.lag or lag_split(s.df)).lag])
    y = s.df[panel.column].to_numpy(np.float64)
    ok = np.isfinite(lag) & np.isfinite(y)
    if not ok.any():
        return []
    frame = pd.DataFrame({"lag": lag[ok].astype(np.int64), "y": y[ok]})
    by = frame.groupby("lag")["y"].agg(["mean", "size"])
    x = by.index.to_numpy(np.int64)
    mean = by["mean"].to_numpy(np.float64)
    label = _trace_name(s, panel, ALL)
    style = Style(s.color, dash_for(s.algorithm), 1.8, 1.0, marker=MARKER_SIZE)
    line = Trace(RAW, s.key, label, label, compact(x), compact(mean), style)
    count = by["size"].to_numpy(np.int64)
    return [line, Readout(s.key, label, s.color, x, mean, second=count)]


def lag_view(series: Sequence[RunSeries], panel: Panel, drawn: Sequence[str]) -> PanelView:
    """The per-lag chart's view of ``panel``: what its points are, and which runs have none."""
    missing = [s.label for s in series if s.key not in drawn]
    parts = ["mean over each run's steps at each declared lag"]
    if drawn and missing:
        parts.append("no declared lag or value: " + short_list(missing, len(series)))
    return PanelView(
        " · ".join(parts),
        empty_note="no declared policy lag in the selected runs",
        nonnegative=panel.nonnegative,
    )
