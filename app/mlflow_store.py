"""Everything the app reads from an MLflow tracking store: its runs, and the step curves of runs
that exist only there (their metric history, names mapped to our columns).

Public MLflow API throughout (``search_experiments``, ``search_runs``, ``get_metric_history``),
but one place, ``_sampled_in_sql``: MLflow's client has no public call that samples a metric
history, and the public full read of a long run is too slow for a page (docs/benchmarks.md, "MLflow
against Parquet"); the public call is used whenever the sampled route does not answer.

Cached with ``st.cache_data``; a broken or missing store is a problem sentence, never an
exception.

The app only reads: it opens no store that MLflow would create, migrate or complete on opening
(``store_problem``), and a URI typed in the browser is opened only when the server was started with
it or it names an existing MLflow SQLite store (``typed_uri_problem``).
"""

from __future__ import annotations

import functools
import sqlite3
import time
import urllib.parse
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from app.records import SOURCE_MLFLOW, RunRef, Table, short_error
from gspo_metrics.spec import tool_algorithm
from training_hooks.metric_map import map_metric_names
from training_hooks.schema import STATUS_CRASHED, Step

MLFLOW_KEY_PREFIX = "mlflow:"
MLFLOW_POINTS_PER_METRIC = 2000
RUNNING_FOR_TOO_LONG_S = 24 * 3600  # a run still "running" after a day is declared crashed
TAGS_KEY = "_tags"  # RunRef.params of an MLflow run: its run-id tags, beside its params
WALL_TIME_POINTS = 500  # timestamps sampled per metric to interpolate each step's wall time
_STATUS = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "failed"}  # else running


SQLITE_PREFIX = "sqlite:///"
SQLITE_MAGIC = b"SQLite format 3\x00"
TRUSTED_HINT = (
    "start the server with it (--tracking-uri, MLFLOW_TRACKING_URI) or put it on the allow-list "
    "(--allow-tracking-uri, GSPO_DASH_TRACKING_URIS)"
)


# ----------------------------------------------------------------------------------------------
# which stores the app may open (never creating, migrating or writing one)
# ----------------------------------------------------------------------------------------------


def store_problem(uri: str) -> str | None:
    """Why the app must not open the store at ``uri``, or None when it may.

    Opening an MLflow store can write: MLflow creates a missing SQLite file and its parent folders,
    creates or migrates the tables of a file that lacks them, adds a missing default experiment,
    and a ``file:`` store creates its folder. So an SQLite store must already be a complete MLflow
    store (``sqlite_store_problem``) and a folder store must exist; other schemes (http, postgres,
    databricks) are opened as given."""
    if uri.startswith("sqlite:"):
        return sqlite_store_problem(uri)
    if uri.startswith("file:") or ("://" not in uri and not uri.startswith("databricks")):
        path = uri[len("file://") :] if uri.startswith("file://") else uri.removeprefix("file:")
        if not Path(path).is_dir():
            return f"MLflow store {uri!r}: the folder does not exist (the app never creates one)"
    return None


def sqlite_store_problem(uri: str) -> str | None:
    """Why ``sqlite:///PATH`` is not an MLflow store the app can read without writing, or None.

    PATH must be an existing regular file with SQLite's header, holding every table of this MLflow
    version's schema (what ``SqlAlchemyStore`` checks before migrating) and the default experiment
    (what it creates when missing); read through a read-only SQLite connection."""
    if not uri.startswith(SQLITE_PREFIX) or "?" in uri or uri == SQLITE_PREFIX:
        return f"MLflow store {uri!r}: an SQLite store is written sqlite:///PATH (no query)"
    path = Path(uri[len(SQLITE_PREFIX) :])
    if not path.is_file():
        return f"MLflow store {uri!r}: the database file does not exist (the app never creates one)"
    try:
        with open(path, "rb") as f:
            if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return f"MLflow store {uri!r}: the file is not an SQLite database"
        tables, has_default = _sqlite_contents(path)
    except (OSError, sqlite3.Error) as e:
        return f"MLflow store {uri!r} is unreadable ({short_error(e)})"
    missing = sorted(_mlflow_tables() - tables)
    if missing:
        return (
            f"MLflow store {uri!r} is not an MLflow store of this MLflow version (missing tables: "
            f"{', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); the app does not "
            "create or migrate stores (`mlflow db upgrade URI` migrates one)"
        )
    if not has_default:
        return f"MLflow store {uri!r} has no default experiment (opening it would write one)"
    return None


def _sqlite_contents(path: Path) -> tuple[frozenset[str], bool]:
    """(table names, whether the default experiment 0 exists), read with ``mode=ro``."""
    ro = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    con = sqlite3.connect(ro, uri=True, timeout=5)
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        has_default = False
        if "experiments" in names:
            row = con.execute("SELECT 1 FROM experiments WHERE experiment_id = 0").fetchone()
            has_default = row is not None
        return frozenset(names), has_default
    finally:
        con.close()


@functools.cache
def _mlflow_tables() -> frozenset[str]:
    """The tables MLflow's SQL store needs (it creates the missing ones when it opens a store)."""
    try:
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401 - registers the ORM tables
        from mlflow.store.db.base_sql_model import Base

        return frozenset(t for t in Base.metadata.tables if not t.startswith("alembic_"))
    except Exception:  # noqa: BLE001 - another MLflow layout: the tables every version has
        return frozenset({"experiments", "runs", "metrics", "latest_metrics", "params", "tags"})


def typed_uri_problem(uri: str, trusted: Collection[str]) -> str | None:
    """The sidebar's rule for a tracking URI typed in the browser: one the server was started with
    (``trusted``: its own and the allow-list) is opened as is; otherwise only an existing MLflow
    SQLite store (``sqlite_store_problem``). Anything else (http, https, file, postgres, ...) is
    refused, so the browser cannot make the server connect elsewhere or create a store."""
    if uri in trusted:
        return None
    if uri.startswith("sqlite:"):
        return sqlite_store_problem(uri)
    return (
        f"Tracking URI {uri!r} refused: from the browser only an existing MLflow SQLite store "
        f"(sqlite:///PATH) can be opened; to use another store, {TRUSTED_HINT}."
    )


# ----------------------------------------------------------------------------------------------
# the runs table
# ----------------------------------------------------------------------------------------------


@st.cache_data(show_spinner=False, ttl=30, max_entries=8)
def mlflow_runs(tracking_uri: str) -> tuple[list[RunRef], list[str]]:
    """Runs of every experiment in the store (``search_runs``; no metric histories)."""
    why = store_problem(tracking_uri)
    if why:
        return [], [why]
    try:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=tracking_uri)
        ids = [e.experiment_id for e in client.search_experiments()]
        if not ids:
            return [], []
        found = client.search_runs(ids, max_results=1000)
    except Exception as e:  # noqa: BLE001 - a broken store must not break the page
        return [], [f"MLflow store {tracking_uri!r} is unreadable ({short_error(e)})"]
    now = time.time()
    return [_run_ref(r, tracking_uri, now) for r in found], []


def _algorithm(tags: dict, params: dict) -> str:
    """Ours tag it; TRL logs ``loss_type`` and ``importance_sampling_level`` (the loss at its
    level: ``tool_algorithm``); else unknown ("?")."""
    algo = tags.get("algorithm") or tags.get("gspo_dash.algorithm") or params.get("algorithm")
    if not algo and "loss_type" in params:
        algo = tool_algorithm(
            "trl", params.get("loss_type"), params.get("importance_sampling_level")
        )
    return str(algo or "?").lower()


def _run_ref(r, tracking_uri: str, now: float) -> RunRef:
    """The app's record of one ``mlflow.entities.Run``."""
    tags, params = dict(r.data.tags), dict(r.data.params)
    status = _STATUS.get(r.info.status, "running")
    end = (r.info.end_time or 0) / 1000 or None
    start = (r.info.start_time or 0) / 1000 or None
    if status == "running" and start and now - start > RUNNING_FOR_TOO_LONG_S:
        status = STATUS_CRASHED
    return RunRef(
        key=MLFLOW_KEY_PREFIX + r.info.run_id,
        name=r.info.run_name or r.info.run_id,
        algorithm=_algorithm(tags, params),
        status=status,
        source=SOURCE_MLFLOW,
        tracking_uri=tracking_uri,
        mlflow_run_id=r.info.run_id,
        metric_keys=tuple(sorted(r.data.metrics)),
        params={**params, TAGS_KEY: {k: v for k, v in tags.items() if "run_id" in k}},
        updated_at=end or start,
        problems=("MLflow-only run: step curves only, no per-sequence pages",),
    )


# ----------------------------------------------------------------------------------------------
# step curves of MLflow-only runs
# ----------------------------------------------------------------------------------------------


def run_params(run: RunRef) -> tuple[tuple[str, str], ...]:
    """An MLflow-only run's params (its logged settings) as sorted pairs: ``mlflow_steps``'s
    ``params`` (hashable, so part of the cache key)."""
    return tuple(sorted((str(k), str(v)) for k, v in run.params.items() if k != TAGS_KEY))


def _sampled_in_sql(client, run_id: str, key: str, max_points: int) -> list | None:
    """At most ``max_points`` evenly spaced points of one metric (first and last kept), sampled
    in SQL by the store, or None where that is not available.

    PRIVATE MLflow API, on purpose and only here (no public client call samples):
    ``client._tracking_client.store`` and its ``get_metric_history_bulk_interval``. Two routes to
    the same SQL sampling:
    - a database URI (sqlite, postgresql, mysql): the client's ``SqlAlchemyStore`` samples;
    - a tracking server (http/https URI): the client's ``RestStore`` has no sampling of its own
      (MLflow's generic method reads every point, then samples), so ask the server's endpoint
      ``GET /api/2.0/mlflow/metrics/get-history-bulk-interval`` (what MLflow's UI calls to draw
      long curves; at most 2,500 points per run), and the server's store samples in SQL.
    Any other store, a renamed attribute, a changed signature or a refused request returns None,
    and the caller uses the public call."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    kind = type(store).__name__
    try:
        if store is not None and kind == "SqlAlchemyStore":
            return store.get_metric_history_bulk_interval([run_id], key, max_points, None, None)
        if kind == "RestStore":
            return _sampled_by_server(store, run_id, key, max_points)
    except Exception:  # noqa: BLE001 - another MLflow version: the public call instead
        return None
    return None


BULK_INTERVAL_ENDPOINT = "/api/2.0/mlflow/metrics/get-history-bulk-interval"


def _sampled_by_server(store, run_id: str, key: str, max_points: int) -> list:
    """The tracking server's sampled history of one metric, as ``mlflow.entities.Metric``s; the
    request carries the client's credentials and TLS settings (``store.get_host_creds``)."""
    from mlflow.entities import Metric
    from mlflow.utils.rest_utils import http_request_safe

    params = {"run_ids": [run_id], "metric_key": key, "max_results": int(max_points)}
    resp = http_request_safe(store.get_host_creds(), BULK_INTERVAL_ENDPOINT, "GET", params=params)
    return [
        Metric(key, float(m["value"]), int(m["timestamp"]), int(m["step"]))
        for m in resp.json().get("metrics", [])
    ]


def _metric_points(client, run_id: str, key: str, max_points: int | None):
    """(steps, values, timestamps_ms, sampled) of one metric: sampled to ``max_points`` where the
    store can (``sampled``: it may have more points), else the full history (``max_points=None``:
    always the full history)."""
    hist = _sampled_in_sql(client, run_id, key, max_points) if max_points else None
    sampled = hist is not None and max_points is not None and len(hist) >= max_points
    if hist is None:
        hist = client.get_metric_history(run_id, key)
    n = len(hist)
    return (
        np.fromiter((m.step for m in hist), np.int64, n),
        np.fromiter((m.value for m in hist), np.float64, n),
        np.fromiter((m.timestamp for m in hist), np.float64, n),
        sampled,
    )


@st.cache_data(show_spinner="Reading metric history from MLflow...", max_entries=16, ttl=60)
def mlflow_steps(
    tracking_uri: str,
    run_id: str,
    keys: tuple[str, ...],
    max_points: int | None = MLFLOW_POINTS_PER_METRIC,
    params: tuple[tuple[str, str], ...] = (),
) -> Table:
    """One row per step from the metric history of every key, names mapped to our columns as an
    import maps them, with the run's ``params`` (``run_params``) as its settings.

    MLflow is slow to read in full (see the module's docstring), so by default each metric is
    sampled to ``max_points`` points in the store; ``None`` reads all."""
    if why := store_problem(tracking_uri):
        return Table(pd.DataFrame(), [why])
    try:
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=tracking_uri)
    except Exception as e:  # noqa: BLE001
        return Table(pd.DataFrame(), [f"MLflow {tracking_uri!r}: {short_error(e)}"])
    # the run's params pin the names' meaning (tool version, clip unit, KL estimator); a name whose
    # meaning they leave open keeps a prefixed name of its own (metric_map.map_metric_names)
    names = map_metric_names(keys, settings=dict(params))
    problems: list[str] = []
    series: dict[str, pd.Series] = {}
    wall: dict[int, float] = {}
    sampled = False
    for key in keys:
        try:
            steps, vals, ts, cut = _metric_points(client, run_id, key, max_points)
        except Exception as e:  # noqa: BLE001
            problems.append(f"MLflow metric {key!r}: {short_error(e)}")
            continue
        if not len(steps):
            continue
        sampled |= cut
        s = pd.Series(vals, index=steps)
        series[names[key]] = s[~s.index.duplicated(keep="last")]
        every = max(1, len(steps) // WALL_TIME_POINTS)
        for step, t in zip(steps[::every], ts[::every], strict=True):
            wall.setdefault(int(step), t / 1000.0)
    if not series:
        return Table(pd.DataFrame(columns=[Step.STEP]), problems)
    if sampled:
        problems.append(
            f"read from MLflow sampled to {max_points} points per metric (MLflow is slow to read "
            "in full); record with training_hooks or import the run for every step"
        )
    return Table(_step_frame(series, wall), problems)


def _step_frame(series: dict[str, pd.Series], wall: dict[int, float]) -> pd.DataFrame:
    """Columns side by side on the union of their steps; wall time interpolated between the
    sampled timestamps when the run did not log one."""
    df = pd.DataFrame(series).sort_index()
    df.index.name = Step.STEP
    df = df.reset_index()
    if Step.WALL_TIME not in df.columns and wall:
        w = pd.Series(wall).sort_index()
        df[Step.WALL_TIME] = np.interp(df[Step.STEP], w.index.to_numpy(), w.to_numpy())
    return df
