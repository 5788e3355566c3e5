"""Lengths: how long the completions are, how often they are cut, and what length buys."""

import numpy as np
import streamlit as st

from app import aggregate, charts, colors, curve_words, data, ui
from app.compare import panels, plotly_traces, series_math, traces
from training_hooks.schema import Seq, Step

ctx = ui.page_header(
    "Lengths",
    "GRPO's token-summed or token-averaged losses give long completions more weight, which can "
    "drive length up; GSPO's sequence ratio is length-normalised. These charts show the length "
    "distribution over training, truncation, and whether reward or ratio depend on length.",
)
run, window, shown, t = ui.sequence_table(
    ctx, [Seq.STEP, Seq.LENGTH, Seq.TRUNCATED, Seq.REWARD, Seq.SEQ_LOG_RATIO], ratio_subject=False
)
df = t.df


steps_t = data.load_steps(run, [Step.LENGTH_MEAN, Step.LENGTH_P90, Step.TRUNCATED_FRACTION])
sdf = shown.keep(steps_t.df, Step.STEP) if len(steps_t.df) else steps_t.df
if len(sdf):
    sdf = sdf[(sdf[Step.STEP] >= window[0]) & (sdf[Step.STEP] <= window[1])]
lines = []
for column, name, dash in ((Step.LENGTH_MEAN, "mean", "solid"), (Step.LENGTH_P90, "p90", "dot")):
    if column in sdf.columns and sdf[column].notna().any():
        x, y = sdf[Step.STEP].to_numpy(np.float64), sdf[column].to_numpy(np.float64)
        idx = series_math.downsample_indices(x, y, 1000)
        lines.append((x[idx], y[idx], name, dash))
lo_len, hi_len = int(df[Seq.LENGTH].min()), int(df[Seq.LENGTH].max())
if hi_len - lo_len + 1 <= 60:  # short completions: one bin per length, no empty stripes
    hist = aggregate.step_histogram(
        df, Seq.LENGTH, value_bins=hi_len - lo_len + 1, value_range=(lo_len - 0.5, hi_len + 0.5)
    )
else:
    hist = aggregate.step_histogram(df, Seq.LENGTH)
st.plotly_chart(
    charts.step_heatmap_figure(
        hist,
        title=f"{ctx.label(run)}: completion length per step, {shown.label}",
        value_label="length (tokens)",
        lines=lines,
    ),
    key="length_heatmap",
)
drawn = " and ".join(
    f"{name} ({'solid' if dash == 'solid' else 'dotted'})" for *_, name, dash in lines
)
flags = df[Seq.TRUNCATED].dropna() if Seq.TRUNCATED in df.columns else df.iloc[0:0]
st.caption(
    "Colour = share of the step's completions at that length"
    + (f"; white lines: the step's {drawn} length" if lines else "")
    + (
        f". {flags.astype(float).mean():.2%} of the {len(flags):,} completions shown were truncated."
        if len(flags)
        else ". Truncation was not recorded for this run."
    )
)

if Step.TRUNCATED_FRACTION in sdf.columns and sdf[Step.TRUNCATED_FRACTION].notna().any():
    series = [
        traces.RunSeries(
            run.key, ctx.label(run), run.algorithm, ctx.colors.get(run.key, colors.PALETTE[0]), sdf
        )
    ]
    panel = panels.PANELS_BY_KEY["truncation"]
    st.plotly_chart(plotly_traces.compare_figure(series, panel, smoothing=0.6), key="trunc")

left, right = st.columns(2)
sample = aggregate.sample_rows(df, 5000)
with left:
    binned = aggregate.binned_mean(df, Seq.LENGTH, Seq.REWARD)
    st.plotly_chart(
        charts.binned_mean_figure(
            binned, title="Reward vs length", xlabel="length (tokens)", ylabel="mean reward"
        ),
        key="reward_vs_length",
    )
    st.caption(
        f"Mean reward per length bucket (quantiles, ± 1 s.e.) over the {len(df):,} completions "
        f"shown; {aggregate.correlation_text(df, Seq.LENGTH, Seq.REWARD, 'length', 'reward')} "
        + curve_words.shape_sentence(binned["bucket"], binned["mean"], "mean reward", ".3g")
    )
with right:
    st.plotly_chart(
        charts.scatter_figure(
            sample,
            Seq.LENGTH,
            Seq.SEQ_LOG_RATIO,
            title="Sequence log-ratio vs length",
            xlabel="length (tokens)",
            ylabel="log s (nats)",
        ),
        key="ratio_vs_length",
    )
    spread = aggregate.binned_mean(df, Seq.LENGTH, Seq.SEQ_LOG_RATIO)
    st.caption(
        f"Each dot is a sequence ({len(sample):,} of {len(df):,}). log s is a mean over the "
        "sequence's tokens. "
        + curve_words.shape_sentence(
            spread["bucket"], spread["std"], "spread of log s (std per length bucket)", ".2g"
        )
    )

ui.notice_problems([run], t.problems + steps_t.problems)
