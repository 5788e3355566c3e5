"""Sequences: one step of one run, sequence by sequence, down to its tokens.

Opened from a Health finding as ``/sequences?run=<run>&step=<n>``: that run and step are shown,
and the sequences the recorder kept token records for because they explain the step (the
culprits: largest |log s|, largest token |log r|, a NaN/inf) come first and the first is selected.
"""

import numpy as np
import pandas as pd
import streamlit as st

from app import cell_text, charts, data, eps_format, ui
from training_hooks import columns
from training_hooks.findings.lag import ALL, OFF, ON
from training_hooks.names import REWARD_UNSCORABLE, unscored_function
from training_hooks.schema import Seq, Step, Tok

REASONS = {  # the recorder's reasons, culprits first (the order rows are listed in)
    "nonfinite": "NaN/inf inside the mask",
    "max_abs_log_s": "largest |log s| of the step",
    "max_abs_token_log_ratio": "largest token |log r| of the step",
    "baseline": "random (baseline)",
}
CULPRITS = ("nonfinite", "max_abs_log_s", "max_abs_token_log_ratio")
NO_REASON = "kept (no reason recorded)"  # token records of runs written before the reasons
RECORD = "token record"  # the table's column: why this sequence's tokens were kept

#: The columns the table shows, in its order, with headers a reader can parse: {column: (header,
#: what it holds, number format)}; what each holds is its column's declaration
#: (``training_hooks.columns.meaning``).
HEADERS = {
    c: (header, columns.meaning(c), fmt)
    for c, header, fmt in (
        (Seq.RANK, "rank", None),
        (Seq.GROUP, "group", None),
        (Seq.SAMPLE, "sample", None),
        (Seq.SEQ_LOG_RATIO, "log s", "%.3e"),
        (Seq.SEQ_CLIPPED, "outside seq band", None),
        (Seq.TOKEN_CLIP_FRACTION, "tokens outside band", "%.3f"),
        (Seq.ADVANTAGE, "advantage A", "%.3f"),
        (Seq.REWARD, "reward", None),
        (Seq.LENGTH, "length (tokens)", None),
        (Seq.TRUNCATED, "truncated", None),
        (Seq.TOKEN_LOG_RATIO_MIN, "token log r min", "%.3g"),
        (Seq.TOKEN_LOG_RATIO_MAX, "token log r max", "%.3g"),
        (Seq.KL_OLD, "KL old→new", "%.3g"),
        (Seq.KL_REF, "KL to ref", "%.3g"),
        (Seq.ENTROPY, "entropy", "%.3g"),
    )
}


S_FORMAT = "%.6f"  # the table's "s" column
#: The values a run may not give (their NaN means "not given"): a column of them that is NaN in
#: every row is not recorded, not a NaN (``gspo_metrics.spec``: "NaN without ...").
OPTIONAL = (Seq.KL_REF, Seq.ENTROPY, Seq.SAMPLER_KL, Seq.SAMPLER_LOGP_ABS_DIFF_MAX, Seq.ATTENUATION)
UNSCORED = "unscored (NaN)"  # a NaN reward: no reward was given for the completion
AS_TEXT = " Shown as text: it holds NaN or ±inf, written out (a null would read as None)."


def column_config(as_text: tuple[str, ...] = ()) -> dict:
    """The sequence table's headers (``HEADERS``, a help tooltip each) and number formats; the
    columns ``as_text`` hold NaN/inf written out (``cell_text``): text columns."""
    out = {
        "s": st.column_config.NumberColumn("s", format=S_FORMAT, help="sequence ratio exp(log s)"),
        RECORD: st.column_config.TextColumn(
            RECORD, help="why the recorder kept this sequence's token log-ratios (empty: not kept)"
        ),
    }
    if "s" in as_text:
        out["s"] = st.column_config.TextColumn("s", help="sequence ratio exp(log s)." + AS_TEXT)
    for col, (header, meaning, fmt) in HEADERS.items():
        if col in as_text:
            out[col] = st.column_config.TextColumn(header, help=meaning + "." + AS_TEXT)
        elif col in (Seq.SEQ_CLIPPED, Seq.TRUNCATED):
            out[col] = st.column_config.CheckboxColumn(header, help=meaning)
        else:
            out[col] = st.column_config.NumberColumn(header, help=meaning, format=fmt)
    return out


def unscored_note(run, step: int) -> str:
    """What the step's extras say of reward functions that returned no score (TRL's None:
    ``rewards/<fn>/unscored``), or "" when the run recorded none at this step."""
    steps = data.load_steps(run).df
    if not len(steps) or Step.STEP not in steps.columns:
        return ""
    row = steps[steps[Step.STEP] == step]
    if not len(row):
        return ""
    counts = {}
    for c in steps.columns:
        fn = unscored_function(c)
        v = row.iloc[0][c] if fn is not None else None
        if v is not None and np.isfinite(v) and v > 0:
            counts[fn] = int(v)
    if not counts:
        return ""
    said = ", ".join(f"{ui.md_escape(fn)} for {n}" for fn, n in counts.items())
    none = row.iloc[0].get(REWARD_UNSCORABLE)
    none_text = ""
    if none is not None and np.isfinite(none) and none > 0:
        none_text = f" {int(none)} had no score from any function: their reward reads {UNSCORED}."
    return (
        f"At this step reward functions returned None (no score): {said} of the step's "
        "completions. Where another function scored the completion, TRL counted the missing "
        "score as 0 in its reward (its row shows that sum, not a score of 0); the table does not "
        f"record which rows those are.{none_text}"
    )


ctx = ui.page_header(
    "Sequences",
    "One step of one run, a row per sequence: its sequence log-ratio (log s), whether it lies "
    "outside the sequence band, the share of its tokens outside the token band, advantage, reward "
    "and length. Select a row to see its token log-ratios against the token band (each bar "
    "labelled with its token where the run recorded the texts), its prompt and its completion.",
)
run = ui.pick_run(ctx)
if run is None:
    st.stop()


def _linked_step() -> int | None:
    """The step a link asks for (?step=n, or the step picker's state)."""
    raw = st.query_params.get("step", st.session_state.get("step"))
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


all_steps = data.sequence_steps(run)
shown = ui.steps_control(run, ratio_subject=True, keep_step=_linked_step())
steps = (
    all_steps if shown.subset == ALL else np.intersect1d(all_steps, shown.split.steps(shown.subset))
)
step = ui.pick_step(steps)
if step is None:
    st.info(
        f"{ui.md_escape(ctx.label(run))} has no readable per-sequence rows among the {shown.label}.",
        icon=":material/info:",
    )
    ui.notice_problems([run], data.load_sequences(run, [Seq.STEP]).problems)
    st.stop()

t = data.load_sequences(run, None, (step, step))
df = t.df
if not len(df):
    st.info(f"No sequences at step {step}.", icon=":material/info:")
    ui.notice_problems([run], t.problems)
    st.stop()
ui.require_columns(run, df, [Seq.GROUP, Seq.SAMPLE, Seq.SEQ_LOG_RATIO], t.problems)


def _ident(frame: pd.DataFrame, cols) -> pd.Series:
    """(rank, group, sample) of each row as one hashable key (rank 0 where not recorded)."""
    rank = frame[cols.RANK] if cols.RANK in frame.columns else pd.Series(0, index=frame.index)
    return pd.Series(
        list(zip(rank.fillna(0).astype(int), frame[cols.GROUP], frame[cols.SAMPLE], strict=True)),
        index=frame.index,
    )


def _records(tdf: pd.DataFrame) -> dict:
    """(rank, group, sample) -> why its tokens were kept ("kept (no reason recorded)" where the run predates the
    reasons); several reasons for one sequence are joined."""
    if not len(tdf):
        return {}
    why = (
        tdf[Tok.REASON].fillna(NO_REASON).astype(str)
        if Tok.REASON in tdf.columns
        else pd.Series(NO_REASON, index=tdf.index)
    )
    out: dict = {}
    for key, reason in zip(_ident(tdf, Tok), why, strict=True):
        label = REASONS.get(reason, reason)
        out[key] = label if key not in out else f"{out[key]}; {label}"
    return out


def _order(keys: pd.Series, records: dict) -> np.ndarray:
    """Row order: culprits first, then the other token records, then the rest (stable)."""
    culprit = {REASONS[c] for c in CULPRITS}

    def rank(key) -> int:
        rec = records.get(key)
        if rec is None:
            return 2
        return 0 if any(part in culprit for part in rec.split("; ")) else 1

    return np.argsort([rank(k) for k in keys], kind="stable")


def show_texts(row: pd.Series) -> None:
    """The sequence's prompt and completion, each in its own labelled box, as plain text (model
    output and prompts are untrusted); says which the run did not record."""
    for col, label, what in (
        (Seq.PROMPT, "Prompt", "the group's prompt"),
        (Seq.COMPLETION, "Completion", "the model's output"),
    ):
        text = row.get(col)
        if isinstance(text, str) and text:
            st.markdown(f"**{label}** ({what}, shown as plain text)")
            st.code(text, language=None, wrap_lines=True)
        else:
            st.caption(f"No {label.lower()} text recorded for this sequence.")


toks = data.load_tokens(run, step)
tdf = toks.df
if not {Tok.GROUP, Tok.SAMPLE} <= set(tdf.columns):  # a damaged tokens part: no token records
    tdf = tdf.iloc[0:0]
records = _records(tdf)
df = df.iloc[_order(_ident(df, Seq), records)].reset_index(drop=True)
keys = _ident(df, Seq)
show_cols = [c for c in HEADERS if c in df.columns]
if Seq.RANK in show_cols and df[Seq.RANK].nunique() <= 1:
    show_cols.remove(Seq.RANK)
view = df[show_cols].copy()
view.insert(0, "s", np.exp(view[Seq.SEQ_LOG_RATIO].astype(float)))
view.insert(1, RECORD, [records.get(k, "") for k in keys])
formats = {"s": S_FORMAT, **{c: fmt for c, (_, _, fmt) in HEADERS.items()}}
view, as_text = cell_text.nonfinite_as_text(view, formats, {Seq.REWARD: UNSCORED}, OPTIONAL)
with_tokens = [i for i, k in enumerate(keys) if k in records]
sel = st.dataframe(
    view,
    key="seq_table",
    on_select="rerun",
    selection_mode="single-row",
    selection_default={"selection": {"rows": with_tokens[:1] or [0]}},
    hide_index=True,
    height=360,
    column_config=column_config(tuple(as_text)),
)
lag_of = dict(zip(shown.split.step, shown.split.lag_class, strict=True))
lag_words: dict[str | None, str] = {ON: "an on-policy step", OFF: "an off-policy step"}
lag_word = lag_words.get(lag_of.get(step), "a step of unknown lag")
n_culprit = sum(any(REASONS[c] in records[k] for c in CULPRITS) for k in keys if k in records)
st.caption(
    f"{len(view)} sequences at step {step} ({lag_word}); {len(with_tokens)} with token records"
    + (f", {n_culprit} kept because they explain the step (listed first)" if n_culprit else "")
    + ". Click a column header to sort."
    + (
        " Cells holding NaN or ±inf are written out (NaN, +inf, -inf); their columns ("
        + ", ".join(HEADERS[c][0] if c in HEADERS else c for c in as_text)
        + ") are shown as text and sort as text."
        if as_text
        else ""
    )
)
n_unscored = int(df[Seq.REWARD].isna().sum()) if Seq.REWARD in df.columns else 0
if n_unscored:
    st.caption(
        f"Reward {UNSCORED} on {n_unscored} of these {len(df)} sequences: the run gave no reward "
        "for them (TRL: every reward function returned None; TRL left them out of their group's "
        "mean and gave them advantage 0). Not a reward of 0."
    )
if note := unscored_note(run, step):
    st.caption(note)
rows = sel.selection.rows if sel is not None and hasattr(sel, "selection") else []
if not rows:
    st.info("Select a row to see its tokens.", icon=":material/touch_app:")
    ui.notice_problems([run], t.problems + toks.problems)
    st.stop()

row = df.iloc[rows[0]]
key = keys.iloc[rows[0]]
st.subheader(
    f"Group {row.get(Seq.GROUP)}, sample {row.get(Seq.SAMPLE)}"
    + (f", rank {key[0]}" if key[0] else "")
)
match = tdf[_ident(tdf, Tok) == key] if len(tdf) else tdf
token_eps = ui.eps_of(run).get("token")
if len(match):
    rec = match.iloc[0]
    token_log_r = np.asarray(rec[Tok.TOKEN_LOG_RATIOS], dtype=np.float64)
    tokens = rec.get(Tok.TOKENS)
    tokens = [str(x) for x in tokens] if tokens is not None else None
    st.plotly_chart(
        charts.token_bars_figure(
            token_log_r,
            token_eps=token_eps,
            seq_log_ratio=float(row[Seq.SEQ_LOG_RATIO]),
            tokens=tokens,
        ),
        key="token_bars",
    )
    st.caption(
        f"Token record: {ui.md_escape(records[key])}. Bars: each token's log r_t"
        + (
            f"; red bars lie outside the token band ({eps_format.eps_text(token_eps)}, shaded)"
            if token_eps
            else "; the run's token ε is unknown, so no band is drawn"
        )
        + ". The dotted line is log s, the mean of the bars."
        + (
            f" {int((~np.isfinite(token_log_r)).sum())} token(s) hold NaN or ±inf: no bar, marked ✕ at 0 "
            "with its value (a NaN is counted apart, neither inside the band nor outside it; "
            "log s is then not finite either)."
            if not np.isfinite(token_log_r).all()
            else ""
        )
    )
else:
    st.info(
        "No token-level record for this sequence: the recorder keeps per-token log-ratios for a "
        "bounded sample of sequences per step (tokens/ table). Its summary: token log-ratio range "
        f"[{cell_text.number_text(row.get(Seq.TOKEN_LOG_RATIO_MIN, np.nan), '%.3g')}, "
        f"{cell_text.number_text(row.get(Seq.TOKEN_LOG_RATIO_MAX, np.nan), '%.3g')}].",
        icon=":material/info:",
    )
    if records:
        st.caption(
            f"Token records at this step ({len(records)}, listed first in the table): "
            + ", ".join(
                f"group {g} sample {s_}: {ui.md_escape(why)}" for (_, g, s_), why in records.items()
            )
            + "."
        )

show_texts(row)

ui.notice_problems([run], t.problems + toks.problems)
