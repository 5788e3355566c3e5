"""Lengths: how long the completions are, how often they are cut, and what length buys."""

import numpy as np
import streamlit as st

from app import aggregate, charts, data, ui
from training_hooks.schema import Seq, Step

ctx = ui.page_header(
    "Lengths",
    "GRPO's token-summed or token-averaged losses give long completions more weight, which can "
    "drive length up; GSPO's sequence ratio is length-normalised. These charts show the length "
    "distribution over training, truncation, and whether reward or ratio depend on length.",
)
run, window = ui.sequence_run_window(ctx)
t = ui.window_sequences(
    run, [Seq.STEP, Seq.LENGTH, Seq.TRUNCATED, Seq.REWARD, Seq.SEQ_LOG_RATIO], window
)
df = t.df

steps_t = data.load_steps(run, [Step.LENGTH_MEAN, Step.LENGTH_P90, Step.TRUNCATED_FRACTION])
sdf = steps_t.df
if window and len(sdf):
    sdf = sdf[(sdf[Step.STEP] >= window[0]) & (sdf[Step.STEP] <= window[1])]
lines = []
if Step.LENGTH_MEAN in sdf.columns and len(sdf):
    idx = charts.downsample_indices(
        sdf[Step.STEP].to_numpy(np.float64), sdf[Step.LENGTH_MEAN].to_numpy(np.float64), 1000
    )
    lines.append((sdf[Step.STEP].to_numpy()[idx], sdf[Step.LENGTH_MEAN].to_numpy()[idx], "mean"))
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
        title=f"{run.name}: completion length per step",
        value_label="length (tokens)",
        lines=lines,
    ),
    key="length_heatmap",
)
trunc = float(df[Seq.TRUNCATED].mean()) if Seq.TRUNCATED in df.columns else float("nan")
st.caption(
    f"Colour = share of the step's completions at that length; white line = mean. "
    f"{trunc:.2%} of completions in the window were truncated."
)

if Step.TRUNCATED_FRACTION in sdf.columns and len(sdf):
    series = [
        charts.RunSeries(
            run.key, run.name, run.algorithm, ctx.colors.get(run.key, charts.PALETTE[0]), sdf
        )
    ]
    panel = charts.PANELS_BY_KEY["truncation"]
    st.plotly_chart(charts.compare_figure(series, panel, smoothing=0.6, height=260), key="trunc")

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
    corr = df[[Seq.LENGTH, Seq.REWARD]].astype(float).corr().iloc[0, 1]
    st.caption(
        f"Mean reward per length bucket (quantiles, ± 1 s.e.). Pearson correlation over the window: {corr:.2f}. "
        "A strong negative slope means truncation or rambling is punished."
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
    st.caption(
        "log s is a mean over tokens, so long sequences have a narrower spread of log s: "
        "under GSPO's fixed band they are clipped less often."
    )

ui.notice_problems([run], t.problems + steps_t.problems)
