"""Ratios: how far each update moved the policy, per sequence and per token, against the clip."""

import math

import streamlit as st

from app import aggregate, charts, ui
from training_hooks.schema import Seq

ctx = ui.page_header(
    "Ratios",
    "GSPO clips on the sequence ratio s = exp(mean_t log π/π_old); GRPO clips every token's own "
    "ratio r_t. These charts show both for one run: where its sequence log-ratios sit against "
    "GSPO's band, how much token moves hide inside a sequence ratio near 1, and which lengths "
    "get clipped.",
)
run, window = ui.sequence_run_window(ctx)
eps = ui.eps_of(run)
seq_eps = eps.get("seq")
tok_eps = eps.get("token")

cols = [
    Seq.STEP,
    Seq.SEQ_LOG_RATIO,
    Seq.SEQ_CLIPPED,
    Seq.LENGTH,
    Seq.TOKEN_LOG_RATIO_MIN,
    Seq.TOKEN_LOG_RATIO_MAX,
    Seq.TOKEN_CLIP_FRACTION,
]
t = ui.window_sequences(run, cols, window)
df = t.df

st.subheader("Sequence log-ratio distribution over steps")
vrange = None
if seq_eps:
    near = (3 * math.log1p(-seq_eps[0]), 3 * math.log1p(seq_eps[1]))
    lr = df[Seq.SEQ_LOG_RATIO]
    share_near = float(((lr >= near[0]) & (lr <= near[1])).mean())
    zoom = st.toggle(
        f"Zoom the value axis to GSPO's clip band (±3× ε; {share_near:.0%} of sequences lie there)",
        value=share_near >= 0.8,
        key="ratio_zoom",
    )
    vrange = near if zoom else None
hist = aggregate.step_histogram(df, Seq.SEQ_LOG_RATIO, value_range=vrange)
hlines = []
if seq_eps:
    hlines = [
        (math.log1p(-seq_eps[0]), f"log(1-{charts.fmt_eps(seq_eps[0])})"),
        (math.log1p(seq_eps[1]), f"log(1+{charts.fmt_eps(seq_eps[1])})"),
    ]
st.plotly_chart(
    charts.step_heatmap_figure(
        hist,
        title=f"{run.name}: log s per step (colour = share of the step's sequences)",
        value_label="log s (nats)",
        hlines=hlines,
    ),
    key="ratio_heatmap",
)
if seq_eps:
    lr = df[Seq.SEQ_LOG_RATIO]
    inside = float(((lr >= hlines[0][0]) & (lr <= hlines[1][0])).mean())
    piled = (
        f"{hist.outside:,} sequences beyond the axis range are piled on its edges. "
        if hist.outside
        else ""
    )
    st.caption(
        f"{hist.rows:,} sequences. Red dashed lines: GSPO's clip band (sequence unit, ε "
        f"{charts.fmt_eps(seq_eps[0])}/{charts.fmt_eps(seq_eps[1])}); {inside:.1%} of sequences "
        f"lie inside it. {piled}A GRPO run is not clipped on s, so its distribution is usually far "
        "wider than this band; a GSPO run spreads around it and clips what falls outside."
    )
else:
    st.caption(f"{hist.rows:,} sequences (no eps recorded: run.json missing).")

left, right = st.columns(2)
with left:
    sample = aggregate.sample_rows(df, 6000)
    st.plotly_chart(charts.token_vs_sequence_figure(sample, seq_eps=seq_eps), key="tok_vs_seq")
    st.caption(
        "Each dot is a sequence (up to 6,000 sampled). Height = spread of its token log-ratios. "
        "Dots high above log s ≈ 0 are sequences whose ratio looks untouched while single tokens "
        "moved a lot: GSPO keeps them (s inside the band), GRPO would clip those tokens."
    )
with right:
    buckets = aggregate.clip_by_length(df)
    st.plotly_chart(charts.clip_by_length_figure(buckets), key="clip_by_length")
    st.caption(
        "Blue: share of sequences outside GSPO's band per length bucket. Orange: mean share of "
        "their tokens outside GRPO's token band"
        + (f" (ε {tok_eps[0]:g}/{tok_eps[1]:g})" if tok_eps else "")
        + ". Long sequences average more tokens, so their s moves less per token."
    )

ui.notice_problems([run], t.problems)
