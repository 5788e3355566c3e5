"""Ratios: how far each update moved the policy, per sequence and per token, against the clip."""

import math

import numpy as np
import pandas as pd
import streamlit as st

from app import aggregate, charts, curve_words, eps_format, ui
from gspo_metrics.spec import clip_unit_of
from training_hooks.schema import Seq

ctx = ui.page_header(
    "Ratios",
    "GSPO clips on the sequence ratio s = exp(mean_t log π/π_old); GRPO clips every token's own "
    "ratio r_t. These charts show both for one run: where its sequence log-ratios sit against "
    "the sequence-unit band, how much token moves hide inside a sequence ratio near 1, and which "
    "lengths fall outside either band.",
)
cols = [
    Seq.STEP,
    Seq.SEQ_LOG_RATIO,
    Seq.SEQ_CLIPPED,
    Seq.LENGTH,
    Seq.TOKEN_LOG_RATIO_MIN,
    Seq.TOKEN_LOG_RATIO_MAX,
    Seq.TOKEN_CLIP_FRACTION,
]
# whether the clip binds on a sequence out of range (``aggregate.seq_clip_state``)
binding = (Seq.SEQ_CLIP_LOW, Seq.SEQ_CLIP_HIGH, Seq.ADVANTAGE)
run, _, shown, t = ui.sequence_table(ctx, cols, ratio_subject=True, optional=binding)
eps = ui.eps_of(run)
seq_eps = eps.get("seq")
tok_eps = eps.get("token")
unit = clip_unit_of(run.algorithm)  # the loss's clip unit: seq, token or None (no hard clip)
band_name = charts.seq_band_name(seq_eps, unit)
df = t.df
n_steps = int(df[Seq.STEP].nunique())
band = (math.log1p(-seq_eps[0]), math.log1p(seq_eps[1])) if seq_eps else None
log_s = df[Seq.SEQ_LOG_RATIO]


st.subheader("Sequence log-ratio distribution over steps")
SYMLOG, LINEAR, ZOOM = "symmetric log", "linear", "±3× the band"
scale = st.segmented_control(
    "Value axis",
    [SYMLOG, LINEAR, ZOOM] if band else [SYMLOG, LINEAR],
    default=SYMLOG,
    key="ratio_axis",
    help="Symmetric log: linear within the band's narrower ε, one step per decade beyond it, so "
    "the band and tails a thousand times wider are both visible. ±3× the band: linear, values "
    "beyond it piled on the edges.",
)
if scale == ZOOM and band:
    hist = aggregate.step_histogram(df, Seq.SEQ_LOG_RATIO, value_range=(3 * band[0], 3 * band[1]))
elif scale == LINEAR:
    hist = aggregate.step_histogram(df, Seq.SEQ_LOG_RATIO)
else:
    hist = aggregate.step_histogram(df, Seq.SEQ_LOG_RATIO, axis=aggregate.symlog_for(log_s, band))
hlines = []
if band and seq_eps:  # (band is known exactly when seq_eps is)
    hlines = [
        (band[0], f"log(1-{eps_format.fmt_eps(seq_eps[0])})"),
        (band[1], f"log(1+{eps_format.fmt_eps(seq_eps[1])})"),
    ]
st.plotly_chart(
    charts.step_heatmap_figure(
        hist,
        title=f"{ctx.label(run)}: log s per step, {shown.label} (colour = share of the step's sequences)",
        value_label="log s (nats)",
        hlines=hlines,
    ),
    key="ratio_heatmap",
)
notes = [f"{hist.rows:,} sequences on {shown.counted(n_steps)}."]
if band:
    inside = aggregate.share_inside(log_s, *band)
    notes.append(f"Red dashed lines: {band_name}; {inside:.1%} of these sequences lie inside it.")
else:
    notes.append("The sequence ε is unknown (not in run.json): no band drawn.")
if hist.outside:
    notes.append(
        f"{hist.outside:,} sequences beyond the axis range (0.5-99.5% quantiles or the zoom) are "
        "piled on its edges."
    )
if len(log_s) and (log_s == 0).all():
    notes.append(
        "Every log s shown is exactly 0: the ratio is 1 on every sequence (the log-probs equal the "
        "old ones: on-policy steps, or a policy that did not move)."
    )
st.caption(" ".join(notes))

left, right = st.columns(2)
with left:
    sample = aggregate.sample_rows(df, 6000)
    example = aggregate.hidden_move_example(sample, band)
    st.plotly_chart(
        charts.token_vs_sequence_figure(sample, seq_eps=seq_eps, loss_unit=unit, example=example),
        key="tok_vs_seq",
    )
    drawable = int(np.isfinite(pd.to_numeric(sample[Seq.SEQ_LOG_RATIO], errors="coerce")).sum())
    lines = [
        f"Each dot is a sequence ({drawable:,} of {len(df):,}"
        + (", sampled" if len(sample) < len(df) else "")
        + (
            f"; {len(sample) - drawable:,} with a NaN log s not drawn"
            if drawable < len(sample)
            else ""
        )
        + "). Height = spread of its token log-ratios (max - min)."
    ]
    if example is not None:
        clip = example.token_clip_fraction
        tokens_out = (
            f", and {clip:.0%} of its tokens lie outside the token band ({eps_format.eps_text(tok_eps)})"
            if clip is not None and math.isfinite(clip)
            else ""
        )
        lines.append(
            "The arrow marks the widest spread among sequences with log s inside the band: "
            f"s = {math.exp(example.log_s):.6g}, yet its token log-ratios span "
            f"{example.token_range:.3g} nats{tokens_out}."
        )
    else:
        lines.append("No sequence shown has a ratio near 1 hiding token moves (none marked).")
    lines.append(aggregate.binding_sentence(aggregate.seq_clip_state(df, band), unit))
    st.caption(" ".join(lines))
with right:
    buckets = aggregate.clip_by_length(df)
    st.plotly_chart(
        charts.clip_by_length_figure(buckets, seq_eps=seq_eps, token_eps=tok_eps, loss_unit=unit),
        key="clip_by_length",
    )
    said = [
        curve_words.shape_sentence(buckets["bucket"], buckets[column], what, ".1%")
        for column, what in (
            (Seq.SEQ_CLIPPED, "share of sequences outside the sequence band"),
            (Seq.TOKEN_CLIP_FRACTION, "mean share of tokens outside the token band"),
        )
        if column in buckets.columns
    ]
    st.caption(
        f"Length buckets are quantiles of the {len(df):,} sequences shown. " + " ".join(said)
    )

ui.notice_problems([run], t.problems)
