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
class StepHistogram:
    """Per-step-bin histograms: ``z[i, j]`` = share of the rows of step bin ``j`` in value bin ``i``."""

    step_centers: np.ndarray  # (S,)
    value_edges: np.ndarray  # (V + 1,)
    z: np.ndarray  # (V, S), each column sums to 1 (or 0 when the bin is empty)
    rows: int
    outside: int  # rows outside the value range (clipped to the edge bins)


def step_histogram(
    df: pd.DataFrame,
    value: str,
    *,
    step: str = Seq.STEP,
    step_bins: int = 150,
    value_bins: int = 60,
    value_range: tuple[float, float] | None = None,
) -> StepHistogram:
    """Histogram of ``value`` per step bin. Default range: the 0.5-99.5% quantiles (outliers go to
    the edge bins and are counted in ``outside``)."""
    if value not in df.columns or step not in df.columns:
        raise ValueError(f"df must have columns {step!r} and {value!r}, has {list(df.columns)}")
    v = df[value].to_numpy(np.float64)
    s = df[step].to_numpy(np.float64)
    ok = np.isfinite(v) & np.isfinite(s)
    v, s = v[ok], s[ok]
    if len(v) == 0:
        return StepHistogram(np.array([]), np.array([0.0, 1.0]), np.zeros((value_bins, 0)), 0, 0)
    if value_range is None:
        lo, hi = np.quantile(v, [0.005, 0.995])
    else:
        lo, hi = value_range
    if not hi > lo:
        half = max(abs(lo) * 1e-3, 1e-9)
        lo, hi = lo - half, hi + half
    outside = int(((v < lo) | (v > hi)).sum())
    v = np.clip(v, lo, hi)
    s_lo, s_hi = s.min(), s.max()
    n_steps = int(s_hi - s_lo) + 1
    step_bins = max(1, min(step_bins, n_steps))
    s_edges = np.linspace(s_lo, s_hi + 1, step_bins + 1)
    v_edges = np.linspace(lo, hi, value_bins + 1)
    counts, _, _ = np.histogram2d(v, s, bins=[v_edges, s_edges])
    totals = counts.sum(0, keepdims=True)
    z = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    centers = (s_edges[:-1] + s_edges[1:]) / 2 - 0.5
    return StepHistogram(centers, v_edges, z, int(ok.sum()), outside)


def clip_by_length(df: pd.DataFrame, buckets: int = 8) -> pd.DataFrame:
    """Clip rates per length bucket (quantile buckets): columns bucket (label), lo, hi, sequences,
    seq_clipped (share of sequences outside GSPO's range), token_clip_fraction (mean over the
    bucket's sequences of the share of their tokens outside GRPO's range)."""
    need = [Seq.LENGTH, Seq.SEQ_CLIPPED, Seq.TOKEN_CLIP_FRACTION]
    have = [c for c in need if c in df.columns]
    if Seq.LENGTH not in have or len(df) == 0:
        return pd.DataFrame(columns=["bucket", "lo", "hi", "sequences", *need[1:]])
    length = df[Seq.LENGTH].to_numpy(np.float64)
    edges = np.unique(np.quantile(length, np.linspace(0, 1, buckets + 1)))
    if len(edges) < 2:
        edges = np.array([length.min(), length.min() + 1])
    idx = np.clip(np.searchsorted(edges, length, side="right") - 1, 0, len(edges) - 2)
    out = pd.DataFrame({"_b": idx})
    for c in need[1:]:
        if c in df.columns:
            out[c] = df[c].to_numpy(np.float64)
    g = out.groupby("_b")
    res = g.size().rename("sequences").to_frame()
    for c in need[1:]:
        if c in out.columns:
            res[c] = g[c].mean()
    res["lo"] = edges[res.index]
    res["hi"] = edges[res.index + 1]
    res["bucket"] = [f"{int(a)}-{int(b)}" for a, b in zip(res["lo"], res["hi"], strict=True)]
    return res.reset_index(drop=True)


ZV_ALL_HIGH = "all at max reward"
ZV_ALL_LOW = "all at min reward"
ZV_OTHER = "all equal (other)"


def zero_variance_by_reward(df: pd.DataFrame) -> pd.DataFrame:
    """Per step, the share of groups whose rewards are all equal, split by that shared reward:
    the run's highest reward (e.g. all correct), its lowest (all wrong), or another value.
    Returns columns step, groups, and one column per class (fractions of the step's groups)."""
    for c in (Seq.STEP, Seq.GROUP, Seq.REWARD):
        if c not in df.columns:
            raise ValueError(f"df must have column {c!r}")
    keys = [Seq.STEP, Seq.GROUP] + ([Seq.RANK] if Seq.RANK in df.columns else [])
    g = df.groupby(keys, sort=False)[Seq.REWARD].agg(["min", "max"]).reset_index()
    r_hi = float(df[Seq.REWARD].max())
    r_lo = float(df[Seq.REWARD].min())
    zero = g["min"] == g["max"]
    cls = np.where(
        ~zero,
        "",
        np.where(g["min"] >= r_hi, ZV_ALL_HIGH, np.where(g["min"] <= r_lo, ZV_ALL_LOW, ZV_OTHER)),
    )
    g["cls"] = cls
    total = g.groupby(Seq.STEP).size().rename("groups")
    out = total.to_frame()
    for name in (ZV_ALL_HIGH, ZV_ALL_LOW, ZV_OTHER):
        out[name] = g[g["cls"] == name].groupby(Seq.STEP).size().reindex(out.index).fillna(0)
        out[name] = out[name] / out["groups"]
    out.index.name = Seq.STEP
    return out.reset_index()


def sample_rows(df: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """At most ``n`` rows, uniformly sampled with a fixed seed (for scatter plots)."""
    if len(df) <= n:
        return df
    return df.sample(n=n, random_state=seed)


def binned_mean(df: pd.DataFrame, x: str, y: str, buckets: int = 12) -> pd.DataFrame:
    """Mean and standard error of ``y`` per quantile bucket of ``x``: columns x (bucket mean of
    x), mean, sem, count. Buckets with one row have sem NaN."""
    if x not in df.columns or y not in df.columns:
        raise ValueError(f"df must have columns {x!r} and {y!r}")
    d = pd.DataFrame({"x": df[x].astype(float), "y": df[y].astype(float)}).dropna()
    if len(d) == 0:
        return pd.DataFrame(columns=["x", "mean", "sem", "count"])
    edges = np.unique(np.quantile(d["x"], np.linspace(0, 1, buckets + 1)))
    if len(edges) < 2:
        edges = np.array([d["x"].min(), d["x"].min() + 1])
    d["b"] = np.clip(np.searchsorted(edges, d["x"], side="right") - 1, 0, len(edges) - 2)
    g = d.groupby("b")
    out = pd.DataFrame({"x": g["x"].mean(), "mean": g["y"].mean(), "count": g.size()})
    out["sem"] = g["y"].std(ddof=1) / np.sqrt(out["count"])
    return out.reset_index(drop=True)
