"""Compare: small multiples of every step metric, runs coloured, algorithm by line style."""

import streamlit as st

from app import charts, data, traces, ui
from training_hooks.metric_map import is_known_column
from training_hooks.schema import STEP_KEY_COLUMNS

PANEL_POINT_BUDGET = 6_000  # points per chart across all its traces (the browser's cost)

ctx = ui.page_header(
    "Compare runs",
    "Each chart is one metric over training for every shown run. Colour = run, line style = "
    "algorithm (GRPO dashed, GSPO solid). Clip fractions come in two units: the sequence unit "
    "(GSPO's ε, share of sequences) and the token unit (GRPO's ε, share of tokens); every run "
    "records both, so GRPO and GSPO sit on the same scale.",
)
shown = ui.shown_runs(
    ctx,
    empty="No runs to compare: the root is empty. See the Runs page.",
    defaulted="No runs selected: showing the {n} most recent. Pick runs in the sidebar or on the "
    "Runs page.",
)

with st.container(horizontal=True, vertical_alignment="bottom"):
    x_axis = st.segmented_control(
        "x axis",
        options=list(charts.X_AXES),
        format_func=lambda k: {
            charts.X_STEP: "step",
            charts.X_ELAPSED: "wall time",
            charts.X_TOKENS: "tokens",
        }[k],
        default=charts.X_STEP,
        key="x",
        bind="query-params",
        required=True,
    )
    smoothing = st.slider(
        "EMA smoothing",
        0.0,
        0.99,
        0.6,
        0.01,
        key="smooth",
        help="Debiased EMA (TensorBoard's); the raw series stays faint behind.",
    )
    max_points = st.select_slider(
        "max points / trace",
        [250, 500, 1000, 2000, 4000],
        value=1000,
        key="max_points",
        bind="query-params",
        help="Longer series are cut with min/max-preserving LTTB, so spikes survive.",
    )

series: list[charts.RunSeries] = []
problems: list[str] = []
extra_cols: dict[str, None] = {}
for run in shown:
    t = data.load_steps(run)
    problems += [f"{run.label}: {p}" for p in t.problems]
    if not len(t.df):
        problems.append(f"{run.label}: no steps to draw")
        continue
    for c in t.df.columns:
        if not is_known_column(c) and c not in STEP_KEY_COLUMNS and t.df[c].dtype.kind in "fiu":
            extra_cols[c] = None
    series.append(
        charts.RunSeries(
            key=run.key,
            label=run.name,
            algorithm=run.algorithm,
            color=ctx.colors.get(run.key, charts.PALETTE[0]),
            df=t.df,
            eps=ui.eps_of(run),
        )
    )

if not series:
    st.warning("None of the shown runs has a readable step table yet.", icon=":material/warning:")
    ui.notice_problems(shown, problems)
    st.stop()

panel_keys = [p.key for p in charts.PANELS] + [f"extra:{c}" for c in extra_cols]
titles = {p.key: p.title for p in charts.PANELS} | {f"extra:{c}": c for c in extra_cols}
with st.expander("Charts and log scales", icon=":material/tune:"):
    chosen = st.multiselect(
        "Charts", panel_keys, default=panel_keys, format_func=titles.get, key="panels"
    )
    bands = st.toggle(
        "Bands (reward ± std, log-ratio min..max)", value=len(series) <= 3, key="bands"
    )
    log_keys = st.pills(
        "Log-scale y",
        panel_keys,
        selection_mode="multi",
        format_func=lambda k: ui.md_escape(titles[k]),  # pills render Markdown
        default=[],
        key="logy",
    )

ui.timing("compare loaded")
st.plotly_chart(charts.legend_figure(series), key="legend", config={"displayModeBar": False})

per_trace = int(max(100, min(max_points, PANEL_POINT_BUDGET // max(1, len(series)))))
if per_trace < max_points:
    st.caption(
        f"{len(series)} runs: each trace is cut to {per_trace} points to keep the page fast."
    )

x_missing = [s.label for s in series if x_axis not in s.df.columns]
if x_missing:
    st.caption(f"No {charts.X_AXES[x_axis]} for: {ui.md_escape(', '.join(x_missing))} (not drawn).")

panels = [charts.PANELS_BY_KEY.get(k) or charts.extra_panel(k.split(":", 1)[1]) for k in chosen]
runs_by_key = {r.key: r for r in shown}
options = {"x": x_axis, "smoothing": smoothing, "max_points": per_trace, "bands": bands}
traces_by_panel = [
    [
        t
        for s in series
        for t in traces.run_traces(
            runs_by_key[s.key], s, p, log_y=p.key in (log_keys or []), **options
        )
    ]
    for p in panels
]
if panels:
    grid = charts.grid_figure(series, panels, traces_by_panel, x=x_axis, log_panels=log_keys or [])
    st.plotly_chart(grid, key="grid", config={"displaylogo": False})
    st.caption("X axes are linked: zoom one chart and all follow (double-click to reset).")
    with st.expander("What each chart means", icon=":material/help:", expanded=False):
        for p in panels:
            st.markdown(
                f"**{ui.md_escape(p.title)}** ({ui.md_escape(p.unit)}): {ui.md_escape(p.caption)}"
            )
else:
    st.info("No charts chosen (see 'Charts and log scales').", icon=":material/info:")

ui.timing("compare charts")
ui.notice_problems(shown, problems)
