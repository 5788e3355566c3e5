"""Sequences: one step of one run, sequence by sequence, down to its tokens."""

import numpy as np
import pandas as pd
import streamlit as st

from app import charts, data, ui
from training_hooks.schema import Seq, Tok

ctx = ui.page_header(
    "Sequences",
    "One step of one run, a row per sequence: its sequence log-ratio (GSPO's log s), whether GSPO "
    "clips it, the share of its tokens GRPO would clip, advantage, reward and length. Select a "
    "row to see its token log-ratios against the clip band, and its completion text if recorded.",
)
run = ui.pick_run(ctx, need_sequences=True)
if run is None:
    st.stop()
steps = data.sequence_steps(run)
step = ui.pick_step(steps)
if step is None:
    st.info(
        f"{ui.md_escape(run.name)} has no readable per-sequence rows yet.", icon=":material/info:"
    )
    ui.notice_problems([run])
    st.stop()

t = data.load_sequences(run, None, (step, step))
df = t.df
if not len(df):
    st.info(f"No sequences at step {step}.", icon=":material/info:")
    ui.notice_problems([run], t.problems)
    st.stop()

show_cols = [
    c
    for c in (
        Seq.RANK,
        Seq.GROUP,
        Seq.SAMPLE,
        Seq.SEQ_LOG_RATIO,
        Seq.SEQ_CLIPPED,
        Seq.TOKEN_CLIP_FRACTION,
        Seq.ADVANTAGE,
        Seq.REWARD,
        Seq.LENGTH,
        Seq.TRUNCATED,
        Seq.TOKEN_LOG_RATIO_MIN,
        Seq.TOKEN_LOG_RATIO_MAX,
        Seq.KL_OLD,
        Seq.KL_REF,
        Seq.ENTROPY,
    )
    if c in df.columns
]
if Seq.RANK in show_cols and df[Seq.RANK].nunique() <= 1:
    show_cols.remove(Seq.RANK)
view = df[show_cols].reset_index(drop=True)
view.insert(0, "s", np.exp(view[Seq.SEQ_LOG_RATIO].astype(float)))
toks = data.load_tokens(run, step)
tdf = toks.df
recorded = set()
if len(tdf):
    rank_t = tdf[Tok.RANK] if Tok.RANK in tdf.columns else 0
    recorded = set(
        zip(pd.Series(rank_t, index=tdf.index), tdf[Tok.GROUP], tdf[Tok.SAMPLE], strict=True)
    )
rank_s = df[Seq.RANK] if Seq.RANK in df.columns else pd.Series(0, index=df.index)
has_tokens = [
    (r, g, s_) in recorded for r, g, s_ in zip(rank_s, df[Seq.GROUP], df[Seq.SAMPLE], strict=True)
]
view.insert(1, "tokens", has_tokens)
first_with_tokens = [i for i, h in enumerate(has_tokens) if h][:1] or [0]
sel = st.dataframe(
    view,
    key="seq_table",
    on_select="rerun",
    selection_mode="single-row",
    selection_default={"selection": {"rows": first_with_tokens}},
    hide_index=True,
    height=360,
    column_config={
        "s": st.column_config.NumberColumn("s", format="%.6f", help="sequence ratio exp(log s)"),
        Seq.SEQ_LOG_RATIO: st.column_config.NumberColumn("log s", format="%.3e"),
        Seq.SEQ_CLIPPED: st.column_config.CheckboxColumn("GSPO clipped"),
        Seq.TOKEN_CLIP_FRACTION: st.column_config.NumberColumn("token clip frac", format="%.3f"),
        Seq.ADVANTAGE: st.column_config.NumberColumn("A", format="%.3f"),
        "tokens": st.column_config.CheckboxColumn("tokens", help="token log-ratios recorded"),
    },
)
st.caption(
    f"{len(view)} sequences at step {step}; {sum(has_tokens)} with token-level records "
    "(✓ in 'tokens'). Click a column header to sort."
)
rows = sel.selection.rows if sel is not None and hasattr(sel, "selection") else []
if not rows:
    st.info("Select a row to see its tokens.", icon=":material/touch_app:")
    ui.notice_problems([run], t.problems)
    st.stop()

row = df.iloc[rows[0]]
ident = {
    Seq.RANK: row.get(Seq.RANK),
    Seq.GROUP: row.get(Seq.GROUP),
    Seq.SAMPLE: row.get(Seq.SAMPLE),
}
st.subheader(
    f"Group {ident[Seq.GROUP]}, sample {ident[Seq.SAMPLE]}"
    + (f", rank {ident[Seq.RANK]}" if ident[Seq.RANK] not in (None, 0) else "")
)
match = pd.DataFrame()
if len(tdf):
    m = (tdf[Tok.GROUP] == ident[Seq.GROUP]) & (tdf[Tok.SAMPLE] == ident[Seq.SAMPLE])
    if Tok.RANK in tdf.columns and ident[Seq.RANK] is not None:
        m &= tdf[Tok.RANK] == ident[Seq.RANK]
    match = tdf[m]
eps = ui.eps_of(run)
if len(match):
    rec = match.iloc[0]
    lr = np.asarray(rec[Tok.TOKEN_LOG_RATIOS], dtype=np.float64)
    tokens = rec.get(Tok.TOKENS)
    tokens = [str(x) for x in tokens] if tokens is not None else None
    st.plotly_chart(
        charts.token_bars_figure(
            lr,
            token_eps=eps.get("token", (0.2, 0.2)),
            seq_log_ratio=float(row[Seq.SEQ_LOG_RATIO]),
            tokens=tokens,
        ),
        key="token_bars",
    )
    st.caption(
        "Bars: each token's log r_t; red bars lie outside GRPO's token band (shaded), where GRPO "
        "would clip that token. The dotted line is log s, the mean of the bars, which is all GSPO "
        "clips on."
    )
else:
    st.info(
        "No token-level record for this sequence: the recorder keeps per-token log-ratios for a "
        "bounded sample of sequences per step (tokens/ table). Its summary: token log-ratio range "
        f"[{row.get(Seq.TOKEN_LOG_RATIO_MIN, float('nan')):.3g}, "
        f"{row.get(Seq.TOKEN_LOG_RATIO_MAX, float('nan')):.3g}].",
        icon=":material/info:",
    )
    if len(tdf):
        st.caption(
            f"Sampled at this step: {len(tdf)} sequences (groups/samples "
            + ", ".join(f"{g}/{s}" for g, s in zip(tdf[Tok.GROUP], tdf[Tok.SAMPLE], strict=True))
            + ")."
        )

text = row.get(Seq.COMPLETION) if Seq.COMPLETION in df.columns else None
if isinstance(text, str) and text:
    st.markdown("**Completion** (model output, shown as plain text)")
    st.code(text, language=None, wrap_lines=True)
else:
    st.caption("No completion text recorded for this sequence.")

ui.notice_problems([run], t.problems + toks.problems)
