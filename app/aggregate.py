"""Pure DataFrame -> DataFrame/array reductions behind the per-sequence pages (no Streamlit).

Each takes a per-sequence frame (columns ``Seq.*``) and returns the small thing a chart draws, so
the browser never receives a million points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from training_hooks.schema import Seq


@dataclass(frozen=True)
class SymLog:
    """A symmetric-log value axis: y = sign(x) · log10(1 + |x| / scale), linear within about
    ±scale and one unit per decade beyond, so a band of width ~scale and tails decades wider
    share one chart."""

    scale: float

    def forward(self, x: np.ndarray | float) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return np.sign(x) * np.log10(1 + np.abs(x) / self.scale)

    def inverse(self, y: np.ndarray | float) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        return np.sign(y) * self.scale * (10 ** np.abs(y) - 1)


@dataclass(frozen=True)
class StepHistogram:
    """Per-step-bin histograms: ``z[i, j]`` = share of the rows of step bin ``j`` in value bin ``i``."""

    step_centers: np.ndarray  # (S,)
    value_edges: np.ndarray  # (V + 1,), on the ``axis`` scale when there is one
    z: np.ndarray  # (V, S), each column sums to 1 (or 0 when the bin is empty)
    rows: int
    outside: int  # rows outside the value range (clipped to the edge bins)
    axis: SymLog | None = None  # the value axis is symmetric-log (edges are transformed values)


def step_histogram(
    df: pd.DataFrame,
    value: str,
    *,
    step_bins: int = 150,
    value_bins: int = 60,
    value_range: tuple[float, float] | None = None,
    axis: SymLog | None = None,
) -> StepHistogram:
    """Histogram of ``value`` per step bin. Default range: the 0.5-99.5% quantiles (outliers go to
    the edge bins and are counted in ``outside``). With ``axis``, the bins are equal on that
    symmetric-log scale (``value_range`` stays in the value's own units).

    Columns are the steps present, not a grid over the step range: a table holding every other
    step (one policy-lag subset) gets one column per step it has, never an empty column for a step
    it left out; beyond ``step_bins`` steps, consecutive present steps share a column, centred on
    their mean step."""
    if value not in df.columns or Seq.STEP not in df.columns:
        raise ValueError(f"df must have columns {Seq.STEP!r} and {value!r}, has {list(df.columns)}")
    v = df[value].to_numpy(np.float64)
    s = df[Seq.STEP].to_numpy(np.float64)
    ok = np.isfinite(v) & np.isfinite(s)
    v, s = v[ok], s[ok]
    if len(v) == 0:
        empty = np.zeros((value_bins, 0))
        return StepHistogram(np.array([]), np.array([0.0, 1.0]), empty, 0, 0, axis)
    if axis is not None:
        v = axis.forward(v)
    if value_range is None:
        lo, hi = np.quantile(v, [0.005, 0.995])
    else:
        lo, hi = value_range if axis is None else axis.forward(np.asarray(value_range))
    if not hi > lo:
        half = max(abs(lo) * 1e-3, 1e-9)
        lo, hi = lo - half, hi + half
    outside = int(((v < lo) | (v > hi)).sum())
    v = np.clip(v, lo, hi)
    present, at = np.unique(s, return_inverse=True)  # (S_present,), each row's index in it
    columns = max(1, min(step_bins, len(present)))
    col_of_step = np.arange(len(present)) * columns // len(present)  # consecutive steps share
    v_edges = np.linspace(lo, hi, value_bins + 1)
    counts, _, _ = np.histogram2d(
        v, col_of_step[at], bins=[v_edges, np.arange(columns + 1) - 0.5]
    )  # (V, columns)
    totals = counts.sum(0, keepdims=True)
    z = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    centers = np.bincount(col_of_step, weights=present) / np.bincount(col_of_step)
    return StepHistogram(centers, v_edges, z, int(ok.sum()), outside, axis)


def symlog_for(values: pd.Series | np.ndarray, band: tuple[float, float] | None) -> SymLog:
    """The symmetric-log axis for ``values``: linear within the narrower half of ``band`` (e.g.
    GSPO's ε), else within the 10th percentile of the non-zero |values| (1.0 when all are 0)."""
    if band is not None:
        return SymLog(float(min(abs(band[0]), abs(band[1]))))
    v = np.abs(np.asarray(values, dtype=np.float64))
    v = v[np.isfinite(v) & (v > 0)]
    return SymLog(float(np.quantile(v, 0.1)) if len(v) else 1.0)


def share_inside(values: pd.Series | np.ndarray, lo: float, hi: float) -> float:
    """Share of the finite ``values`` in ``[lo, hi]`` (NaN when there is none)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(((v >= lo) & (v <= hi)).mean()) if len(v) else float("nan")


#: how a sequence stands against the sequence-unit clip (``seq_clip_state``)
INSIDE, BINDS, OUT_NOT_BINDING, OUT = "inside", "binds", "out, not binding", "out"


def seq_clip_state(df: pd.DataFrame, band: tuple[float, float] | None) -> np.ndarray:
    """Per sequence of ``df``: INSIDE the sequence band, or outside it (``seq_clipped``) and then
    BINDS (the clip removes its gradient: s above 1+ε_high with A > 0, or below 1-ε_low with
    A < 0) or OUT_NOT_BINDING (the advantage's sign keeps the unclipped term, or A = 0); OUT
    where the data cannot tell the two apart.

    Binding is read from the recorder's ``seq_clip_low`` + ``seq_clip_high`` (the share of the
    sequence's tokens where the clip binds: > 0 binds) where recorded, else from the advantage's
    sign and log s against ``band`` (log(1-ε_low), log(1+ε_high)); with neither, OUT."""
    n = len(df)
    out = np.full(n, INSIDE, dtype=object)
    if Seq.SEQ_CLIPPED not in df.columns:
        return out
    outside = df[Seq.SEQ_CLIPPED].to_numpy(bool, na_value=False)
    binds = np.full(n, np.nan)  # 1 binds, 0 does not, NaN unknown
    if Seq.SEQ_CLIP_LOW in df.columns and Seq.SEQ_CLIP_HIGH in df.columns:
        share = df[Seq.SEQ_CLIP_LOW].to_numpy(np.float64, na_value=np.nan) + df[
            Seq.SEQ_CLIP_HIGH
        ].to_numpy(np.float64, na_value=np.nan)
        binds = np.where(np.isfinite(share), (share > 0).astype(np.float64), np.nan)
    if band is not None and Seq.ADVANTAGE in df.columns and Seq.SEQ_LOG_RATIO in df.columns:
        a = df[Seq.ADVANTAGE].to_numpy(np.float64, na_value=np.nan)
        log_s = df[Seq.SEQ_LOG_RATIO].to_numpy(np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            by_sign = ((log_s > band[1]) & (a > 0)) | ((log_s < band[0]) & (a < 0))
        known = np.isfinite(a) & np.isfinite(log_s)
        binds = np.where(np.isnan(binds) & known, by_sign.astype(np.float64), binds)
    out[outside] = OUT
    out[outside & (binds == 1)] = BINDS
    out[outside & (binds == 0)] = OUT_NOT_BINDING
    return out


def binding_sentence(state: np.ndarray, loss_unit: str | None) -> str:
    """A caption's sentence from ``seq_clip_state``'s ``state``: how many sequences lie out of
    range, and on how many of them the clip binds (``loss_unit`` "seq") or would bind."""
    n_out = int((state != INSIDE).sum())
    if not n_out:
        return "No sequence shown lies out of range."
    binds = int((state == BINDS).sum())
    keeps = int((state == OUT_NOT_BINDING).sum())
    unknown = n_out - binds - keeps
    own = loss_unit == "seq"  # else the loss clips tokens (or is unknown): a clip would bind
    verb, removed = ("binds", "is removed") if own else ("would bind", "would be removed")
    text = (
        f"{n_out:,} of {len(state):,} sequences lie out of range; out of range is not clipped: "
        f"the {'' if own else 'sequence '}clip {verb} on {binds:,} (s above 1+ε_high with A > 0, "
        f"or below 1-ε_low with A < 0: the gradient {removed}) and not on {keeps:,} (the "
        "advantage's sign keeps the unclipped term, or A = 0)"
    )
    if loss_unit == "token":
        text += "; this run's loss clips tokens, not sequences"
    if unknown:
        text += f"; {unknown:,} have no recorded advantage, so it is not known"
    return text + "."


def clip_by_length(df: pd.DataFrame, buckets: int = 8) -> pd.DataFrame:
    """Clip rates per length bucket (quantile buckets): columns bucket (label: the shortest and
    longest length it holds), lo, hi (those lengths), sequences,
    seq_clipped (share of sequences outside GSPO's range), token_clip_fraction (mean over the
    bucket's sequences of the share of their tokens outside GRPO's range)."""
    rates = [Seq.SEQ_CLIPPED, Seq.TOKEN_CLIP_FRACTION]
    if Seq.LENGTH not in df.columns or len(df) == 0:
        return pd.DataFrame(columns=["bucket", "lo", "hi", "sequences", *rates])
    length = df[Seq.LENGTH].to_numpy(np.float64)
    have = [c for c in rates if c in df.columns]
    out = pd.DataFrame({"_b": _quantile_bucket(length, buckets), "_len": length})
    for c in have:
        out[c] = df[c].to_numpy(np.float64)
    g = out.groupby("_b")
    res = g.size().rename("sequences").to_frame()
    for c in have:
        res[c] = g[c].mean()
    res["lo"] = g["_len"].min()
    res["hi"] = g["_len"].max()
    # labelled by the lengths the bucket holds, not by its quantile edges
    res["bucket"] = [bucket_label(a, b) for a, b in zip(res["lo"], res["hi"], strict=True)]
    return res.reset_index(drop=True)


@dataclass(frozen=True)
class HiddenMove:
    """One sequence whose ratio near 1 hides larger token moves (the Ratios scatter marks it)."""

    log_s: float  # its sequence log-ratio
    token_range: float  # max - min of its token log-ratios
    token_clip_fraction: float | None  # share of its tokens outside the token band (if recorded)


def _quantile_bucket(values: np.ndarray, buckets: int) -> np.ndarray:
    """Each value's quantile bucket (0 to at most ``buckets`` - 1; one bucket when all are equal)."""
    edges = np.unique(np.quantile(values, np.linspace(0, 1, buckets + 1)))
    if len(edges) < 2:
        edges = np.array([values.min(), values.min() + 1])
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)


def bucket_label(lo: float, hi: float) -> str:
    """ "6" or "6-8": the values a bucket holds."""
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def hidden_move_example(df: pd.DataFrame, band: tuple[float, float] | None) -> HiddenMove | None:
    """The sequence that best shows a ratio near 1 hiding token moves: among the sequences whose
    log s lies inside ``band`` (log(1-ε), log(1+ε); else the half with the smallest |log s|), the one
    with the widest token log-ratio range (max - min). None when no such sequence has a range at
    least 5x its |log s| (then no point on screen shows it)."""
    need = (Seq.SEQ_LOG_RATIO, Seq.TOKEN_LOG_RATIO_MIN, Seq.TOKEN_LOG_RATIO_MAX)
    if not all(c in df.columns for c in need):
        return None
    x = df[Seq.SEQ_LOG_RATIO].to_numpy(np.float64)
    y = (df[Seq.TOKEN_LOG_RATIO_MAX] - df[Seq.TOKEN_LOG_RATIO_MIN]).to_numpy(np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    if band is not None:
        ok &= (x >= band[0]) & (x <= band[1])
    elif ok.any():
        ok &= np.abs(x) <= np.median(np.abs(x[ok]))
    if not ok.any():
        return None
    i = int(np.flatnonzero(ok)[np.argmax(y[ok])])
    if not (y[i] > 0 and y[i] >= 5 * abs(x[i])):
        return None
    frac = None
    if Seq.TOKEN_CLIP_FRACTION in df.columns:
        frac = float(df[Seq.TOKEN_CLIP_FRACTION].iloc[i])
    return HiddenMove(float(x[i]), float(y[i]), frac)


ZV_ALL_HIGH = "all at max reward"
ZV_ALL_LOW = "all at min reward"
ZV_OTHER = "all equal (other)"
ZV_CONSTANT = "reward constant (no signal)"
#: The classes of a zero-variance group, by its shared reward (``zero_variance_by_reward``).
ZV_CLASSES = (ZV_ALL_HIGH, ZV_ALL_LOW, ZV_OTHER, ZV_CONSTANT)


def constant_reward(df: pd.DataFrame) -> float | None:
    """The one reward every sequence of ``df`` got (NaN, an unscored one, aside), or None when
    they differ (or none has a reward): a constant reward gives no signal anywhere, whatever its
    value, so its groups are neither "all correct" nor "all wrong"."""
    r = pd.to_numeric(df[Seq.REWARD], errors="coerce").dropna() if Seq.REWARD in df else None
    if r is None or not len(r) or r.min() != r.max():
        return None
    return float(r.iloc[0])


def zero_variance_by_reward(df: pd.DataFrame) -> pd.DataFrame:
    """Per step, the share of groups whose rewards are all equal, split by that shared reward:
    the highest reward of ``df`` (e.g. all correct), its lowest (all wrong), or another value;
    when every reward of ``df`` is the same (``constant_reward``) there is no top or bottom, and
    every such group is ``ZV_CONSTANT``. Returns columns step, groups, and one column per class
    (fractions of the step's groups)."""
    for c in (Seq.STEP, Seq.GROUP, Seq.REWARD):
        if c not in df.columns:
            raise ValueError(f"df must have column {c!r}")
    keys = [Seq.STEP, Seq.GROUP] + ([Seq.RANK] if Seq.RANK in df.columns else [])
    g = df.groupby(keys, sort=False)[Seq.REWARD].agg(["min", "max"]).reset_index()
    r_hi = float(df[Seq.REWARD].max())
    r_lo = float(df[Seq.REWARD].min())
    zero = g["min"] == g["max"]
    shared = np.where(
        g["min"] >= r_hi, ZV_ALL_HIGH, np.where(g["min"] <= r_lo, ZV_ALL_LOW, ZV_OTHER)
    )
    if r_hi == r_lo:  # one reward everywhere: no top, no bottom
        shared = np.full(len(g), ZV_CONSTANT)
    g["cls"] = np.where(~zero, "", shared)
    total = g.groupby(Seq.STEP).size().rename("groups")
    out = total.to_frame()
    for name in ZV_CLASSES:
        out[name] = g[g["cls"] == name].groupby(Seq.STEP).size().reindex(out.index).fillna(0)
        out[name] = out[name] / out["groups"]
    out.index.name = Seq.STEP
    return out.reset_index()


def correlation_text(df: pd.DataFrame, x: str, y: str, x_name: str, y_name: str) -> str:
    """ "Pearson correlation of length and reward: 0.12." over the rows where both are known,
    or why it is undefined: fewer than two such rows, or a constant ``y`` or ``x`` (no variance:
    a constant reward carries no signal, a fixed length is a padded or capped one)."""
    d = df[[x, y]].apply(pd.to_numeric, errors="coerce").dropna()
    head = f"Pearson correlation of {x_name} and {y_name}"
    if len(d) < 2:
        return f"{head}: undefined ({len(d)} completion{'s' if len(d) != 1 else ''} with both)."
    flat = []
    if d[y].min() == d[y].max():
        flat.append(f"every {y_name} is {d[y].iloc[0]:.6g} (constant: no signal)")
    if d[x].min() == d[x].max():
        flat.append(f"every {x_name} is {d[x].iloc[0]:.6g} (constant)")
    if flat:
        return f"{head}: undefined, {' and '.join(flat)}."
    return f"{head}: {float(d[x].corr(d[y])):.2f}."


def sample_rows(df: pd.DataFrame, n: int) -> pd.DataFrame:
    """At most ``n`` rows, uniformly sampled with a fixed seed (for scatter plots)."""
    if len(df) <= n:
        return df
    return df.sample(n=n, random_state=0)


def binned_mean(df: pd.DataFrame, x: str, y: str, buckets: int = 12) -> pd.DataFrame:
    """Mean, standard deviation and standard error of ``y`` per quantile bucket of ``x``: columns x
    (bucket mean of x), lo and hi (the bucket's x range), bucket (its label), mean, std, sem, count. Buckets with one
    row have std and sem NaN."""
    if x not in df.columns or y not in df.columns:
        raise ValueError(f"df must have columns {x!r} and {y!r}")
    d = pd.DataFrame({"x": df[x].astype(float), "y": df[y].astype(float)}).dropna()
    if len(d) == 0:
        return pd.DataFrame(columns=["x", "lo", "hi", "bucket", "mean", "std", "sem", "count"])
    d["b"] = _quantile_bucket(d["x"].to_numpy(), buckets)
    g = d.groupby("b")
    out = pd.DataFrame(
        {"x": g["x"].mean(), "lo": g["x"].min(), "hi": g["x"].max(), "mean": g["y"].mean()}
    )
    out["std"] = g["y"].std(ddof=1)
    out["count"] = g.size()
    out["sem"] = out["std"] / np.sqrt(out["count"])
    out["bucket"] = [bucket_label(a, b) for a, b in zip(out["lo"], out["hi"], strict=True)]
    return out.reset_index(drop=True)
