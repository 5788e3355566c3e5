"""Groups: where the learning signal comes from (and where it is zero)."""

import numpy as np
import streamlit as st

from app import aggregate, charts, ui
from training_hooks.schema import Seq

ctx = ui.page_header(
    "Groups",
    "Both GRPO and GSPO score each completion against its own group (same prompt): A = (r - mean) "
    "/ std. A group whose completions all got the same reward has A = 0 for every member and "
    "teaches nothing. These charts show how much of each step is such dead weight, and how the "
    "advantages are spread.",
)
run, window = ui.sequence_run_window(ctx)
t = ui.window_sequences(run, [Seq.STEP, Seq.RANK, Seq.GROUP, Seq.REWARD, Seq.ADVANTAGE], window)
df = t.df

zv = aggregate.zero_variance_by_reward(df)
st.plotly_chart(charts.zero_variance_figure(zv), key="zero_var")
share = zv[[aggregate.ZV_ALL_HIGH, aggregate.ZV_ALL_LOW, aggregate.ZV_OTHER]].to_numpy().sum(1)
st.caption(
    f"Mean over the window: {share.mean():.1%} of groups carry no signal "
    f"({zv[aggregate.ZV_ALL_HIGH].mean():.1%} all at the top reward: too easy; "
    f"{zv[aggregate.ZV_ALL_LOW].mean():.1%} all at the bottom: too hard). Rising green = the "
    "policy has solved those prompts; persistent red = prompts it cannot solve yet."
)

left, right = st.columns(2)
with left:
    adv = df[Seq.ADVANTAGE].to_numpy(np.float64)
    nonzero = adv[adv != 0]
    st.plotly_chart(
        charts.histogram_figure(
            [("advantage (non-zero)", nonzero, "#1f77b4")],
            title="Advantage distribution",
            xlabel="advantage A (std units)",
        ),
        key="adv_hist",
    )
    st.caption(
        f"{len(nonzero):,} of {len(adv):,} sequences have A ≠ 0 in the window. With binary "
        "rewards A takes few values per group size; heavy tails mean a lone success or failure "
        "in a group (A = ±√(G-1))."
    )
with right:
    step = ui.pick_step(np.unique(df[Seq.STEP].to_numpy()), key="group_step")
    one = df[df[Seq.STEP] == step]
    st.plotly_chart(charts.group_rewards_figure(one), key="group_rewards")
    st.caption(f"Step {step}: each group's completions (dots) and mean (bar).")

ui.notice_problems([run], t.problems)
