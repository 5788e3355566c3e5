"""The Compare page's per-run computations, cached per run: a selection change redraws only the runs
it adds, and a run's traces, policy-lag split and extra-metric statistics are recomputed only when
its step parts (size, mtime) change. A whole chart's option is cached too, on its runs' digests
and every option it is drawn with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import streamlit as st

from app.compare import panels, traces, view
from app.compare.panels import Panel, PanelSplit
from app.compare.series_math import finite_range
from app.data import Memo, load_sequences, table_files
from app.records import SOURCE_PARQUET, RunRef
from training_hooks.findings.lag import LagSplit, lag_split
from training_hooks.schema import SEQUENCES_DIR, STEPS_DIR, Seq


def run_digest(run: RunRef) -> str:
    """What a run's step curves depend on (its step parts' size and mtime, or its MLflow keys) as
    one short string: the cache key part a page computes once per run and passes to every cached
    call of that run (a run's steps folder is listed once, and a string hashes far faster than a
    tuple of every part's stamp)."""
    if run.source == SOURCE_PARQUET and run.path:
        signature: tuple = (run.key, table_files(run, STEPS_DIR))
    else:
        signature = (run.key, run.metric_keys, run.updated_at)
    return hashlib.blake2b(repr(signature).encode(), digest_size=16).hexdigest()


def run_traces(
    series: traces.RunSeries, panel: Panel, *, digest: str, **options
) -> list[traces.Trace | traces.Readout]:
    """``traces.run_traces`` for one run, cached on the run's files (``digest``: its
    ``run_digest``), the panel and the options (the steps subset among them)."""
    key = repr((digest, _drawn_as(series), panel.key, sorted(options.items())))
    return _run_traces(key, series, panel, options)


def _drawn_as(s: traces.RunSeries) -> tuple:
    """What a run's traces take from its series beyond its table: key, name, algorithm, colour,
    ε, bounds and mapped sources."""
    return (
        s.key,
        s.label,
        s.algorithm,
        s.color,
        sorted(s.eps.items()),
        sorted(s.bounds.items()),
        sorted(s.sources.items()),
    )


@st.cache_data(show_spinner=False, max_entries=4096)
def _run_traces(key: str, _series, _panel, _options: dict) -> list:
    # ``key`` alone is hashed: it names everything the traces depend on; the rest carry the data
    return traces.run_traces(_series, _panel, **_options)


def chart_key(
    series: Sequence[traces.RunSeries],
    digests: Mapping[str, str],
    panels: Sequence[Panel],
    how: Mapping[str, object],
) -> str:
    """The cache key of a chart of ``panels`` over ``series``: each run's files (``digests``: run
    key -> ``run_digest``), its name, algorithm, colour, ε, bounds and mapped sources, the panels
    whole, and ``how`` it is drawn (plain values: options, log panels, readout spacing)."""
    runs = [(digests[s.key], _drawn_as(s)) for s in series]
    drawn = sorted((k, sorted(v.items()) if isinstance(v, Mapping) else v) for k, v in how.items())
    return repr((runs, list(panels), drawn))


#: whole chart options on their ``chart_key``, shared by every session and not copied on a hit
#: (an option of a few MB would be unpickled on each page load): neither the pages nor
#: ``st.echarts_chart`` change one
CHARTS = Memo(max_entries=32)


#: per run's files (and its table's length): its rows' places on the rollout axis (read-only
#: arrays, shared; a frame built from one is a copy)
_ROLLOUT = Memo(max_entries=1024)
#: per shown runs' files, chosen panels and x axis: which panels have data (``split_by_data``)
_SPLITS = Memo(max_entries=64)


def with_rollout_position(df: pd.DataFrame, digest: str) -> pd.DataFrame:
    """``traces.with_rollout_position`` of a run's step table ``df``, the positions
    cached on the run's files (``digest``: ``run_digest``)."""

    def position(d: pd.DataFrame) -> np.ndarray:
        return _ROLLOUT.get((digest, len(d)), lambda: _read_only(traces.rollout_position(d)))

    return traces.with_rollout_position(df, position)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def split_by_data(
    series: Sequence[traces.RunSeries],
    digests: Mapping[str, str],
    chosen: Sequence[Panel],
    x: str,
) -> PanelSplit:
    """``panels.split_by_data`` of the series' step tables, cached on their runs' files
    (``digests``: run key -> ``run_digest``) and columns, the panels and the x axis."""
    key = (
        tuple((s.key, digests[s.key], tuple(s.df.columns)) for s in series),
        tuple(chosen),
        x,
    )
    got = _SPLITS.get(key, lambda: panels.split_by_data([s.df for s in series], chosen, x))
    return PanelSplit(list(got.drawn), list(got.unlogged), list(got.off_axis))  # lists: a copy


#: per run's files and its table's length: its lag split (frozen) and its extra columns' stats
#: (copied out). The length too: a live run's part may land between one session's listing and
#: its read, so one digest can name two reads (a split of the other one's rows would not fit)
_LAGS = Memo(max_entries=256)  # a split of 10k steps holds ~0.6 MB of Python objects
_EXTRA_STATS = Memo(max_entries=256)


def run_lag(df: pd.DataFrame, digest: str) -> LagSplit:
    """``lag_split`` of a run's step table ``df``, cached on the run's files (``digest``:
    its ``run_digest``) and the table's length (one entry per row of ``df``)."""
    return _LAGS.get((digest, len(df)), lambda: lag_split(df))


def run_extra_stats(df: pd.DataFrame, digest: str) -> dict[str, view.ExtraStats]:
    """``view.extra_stats`` of a run's step table ``df``, cached on the run's files and
    the table's length."""
    return dict(_EXTRA_STATS.get((digest, len(df)), lambda: view.extra_stats(df)))


def run_reward_range(run: RunRef) -> tuple[float, float] | None:
    """(min, max) of the run's per-sequence rewards, or None when it recorded none (the bounds of
    the Reward panel's ± std band), cached on the run's sequence parts."""
    if run.source != SOURCE_PARQUET or not run.path or not run.has_sequences:
        return None
    return _run_reward_range((run.key, table_files(run, SEQUENCES_DIR)), run)


@st.cache_data(show_spinner=False, max_entries=1024)
def _run_reward_range(sig, _run: RunRef) -> tuple[float, float] | None:
    t = load_sequences(_run, [Seq.REWARD])
    if Seq.REWARD not in t.df.columns:
        return None
    return finite_range([t.df[Seq.REWARD].to_numpy(np.float64, na_value=np.nan)])
