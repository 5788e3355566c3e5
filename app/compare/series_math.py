"""Series maths for the charts (pure numpy): LTTB downsampling that keeps spikes, the debiased EMA,
min/max envelopes of bands, the shared readout points of a hover, and arrays as the browser
needs them."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd


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
    return ema_columns(np.asarray(y, np.float64)[:, None], weight)[:, 0]


def ema_columns(y: np.ndarray, weight: float) -> np.ndarray:
    """``ema`` of each column of ``y`` (rows, columns) at once; a column's
    non-finite values are skipped (at a finite value the result is the EMA of that column's
    finite values alone)."""
    if not 0 <= weight < 1:
        raise ValueError(f"weight must be in [0, 1), got {weight}")
    y = np.asarray(y, np.float64)
    if y.ndim != 2:
        raise ValueError(f"y must be (rows, columns), got shape {y.shape}")
    if weight == 0 or not y.size:
        return y.copy()
    frame = pd.DataFrame(np.where(np.isfinite(y), y, np.nan))
    return frame.ewm(alpha=1 - weight, adjust=True, ignore_na=True).mean().to_numpy(np.float64)


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


#: readout spacings: these times a power of ten
_NICE = (1.0, 2.0, 5.0, 10.0)
READOUT_MAX_POINTS = 100_000


def finite_range(arrays: Iterable[np.ndarray]) -> tuple[float, float] | None:
    """(min, max) of the finite values of ``arrays``, or None when there are none."""
    lo, hi = math.inf, -math.inf
    for a in arrays:
        v = np.asarray(a, np.float64)
        v = v[np.isfinite(v)]
        if len(v):
            lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
    return (lo, hi) if hi >= lo else None


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
        r_i = float(f"{v[i]:.{digits}g}")
        out[i] = r_i if math.isfinite(r_i) else float(v[i])  # rounded past float64's largest
    if not finite.all():
        out = [x if math.isfinite(x) else None for x in out]
    return out


# ------------------------------------------------------------------------------ axis ends


def nice_number(value: float) -> float:
    """ECharts' rounded "nice" number for a tick interval: 1, 2, 3, 5 or 10 times the power of ten
    at or below ``value`` (its ``numberUtil.nice(value, true)``: a fraction below 1.5 -> 1,
    2.5 -> 2, 4 -> 3, 7 -> 5, else 10)."""
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"value must be a positive number, got {value}")
    exp = math.floor(math.log10(value))
    f = value / 10.0**exp
    nf = 1.0 if f < 1.5 else 2.0 if f < 2.5 else 3.0 if f < 4 else 5.0 if f < 7 else 10.0
    return _tidy(nf * 10.0**exp)


def _tidy(v: float) -> float:
    """``v`` without float dust: 0.30000000000000004 -> 0.3 (12 significant digits)."""
    return float(f"{v:.12g}")


def nice_extent(lo: float, hi: float, split: int = 5) -> tuple[float, float]:
    """[lo, hi] widened to multiples of the tick interval ECharts picks for the widened range
    itself (``nice_number`` of its span / ``split``, ECharts' default 5 ticks): an axis given
    these ends gets its ticks on round numbers and no odd label at an end ("210" after "200").
    The interval is refined until the widened range's own interval divides its ends (at most a
    few rounds: the interval only grows)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"need finite lo <= hi, got lo={lo}, hi={hi}")
    if lo == hi:
        pad = abs(lo) or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_number((hi - lo) / split)
    for _ in range(8):
        a, b = _tidy(math.floor(lo / step) * step), _tidy(math.ceil(hi / step) * step)
        again = nice_number((b - a) / split)
        if again == step:
            return a, b
        step = again
    return a, b


def tight_extent(lo: float, hi: float, parts: int = 20) -> tuple[float, float]:
    """[lo, hi] widened to the next multiples of a round step near (hi - lo) / ``parts`` (1, 2
    or 5 x 10^k): an axis that ends at its values' observed range (0/1 rewards end at 0 and 1)
    without a tick label of seven digits at an end ("0.2141522" becomes "0.2")."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"need finite lo <= hi, got lo={lo}, hi={hi}")
    if lo == hi:
        return lo, hi
    raw = (hi - lo) / parts
    k = math.floor(math.log10(raw))
    step = next(m * 10.0**k for m in (1.0, 2.0, 5.0, 10.0) if m * 10.0**k >= raw)
    return _tidy(math.floor(lo / step) * step), _tidy(math.ceil(hi / step) * step)


def is_round(value: float, digits: int = 2) -> bool:
    """True when ``value`` is written in at most ``digits`` significant digits (0, 1, 0.25,
    1e-5): an axis end that can carry a label."""
    return math.isfinite(value) and (value == 0 or float(f"{value:.{digits}g}") == _tidy(value))
