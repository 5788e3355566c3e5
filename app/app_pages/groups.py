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
# rewards do not depend on the policy lag; a run that reuses each batch (several epochs) counts
# its groups once per pass, and its on-policy steps are the first pass: the control is offered
run, _, shown, t = ui.sequence_table(
    ctx, [Seq.STEP, Seq.RANK, Seq.GROUP, Seq.REWARD, Seq.ADVANTAGE], ratio_subject=False
)
df = t.df

zv = aggregate.zero_variance_by_reward(df)
st.plotly_chart(charts.zero_variance_figure(zv), key="zero_var")
share = zv[list(aggregate.ZV_CLASSES)].to_numpy().sum(1)
constant = aggregate.constant_reward(df)
half = len(zv) // 2
change = ""
if half and constant is None:
    early, late = zv.iloc[:half], zv.iloc[half:]
    change = (
        f" From the first half of these steps to the second: all at the top "
        f"{early[aggregate.ZV_ALL_HIGH].mean():.1%} → {late[aggregate.ZV_ALL_HIGH].mean():.1%}, "
        f"all at the bottom {early[aggregate.ZV_ALL_LOW].mean():.1%} → "
        f"{late[aggregate.ZV_ALL_LOW].mean():.1%}."
    )
if constant is not None:
    st.caption(
        f"Every reward shown is {constant:.6g}: the reward is constant over the "
        f"{shown.counted(len(zv))} shown, so every group carries no signal ({share.mean():.1%} "
        "of groups). That is not a solved task (all at the top) nor a failed one (all at the "
        "bottom): nothing tells one completion from another. Check that the reward function "
        "reads the completions (a parsing error or a constant return scores every answer the "
        "same)."
    )
else:
    st.caption(
        f"Mean over the {shown.counted(len(zv))} shown: {share.mean():.1%} of groups carry no "
        f"signal ({zv[aggregate.ZV_ALL_HIGH].mean():.1%} all at the run's top reward, "
        f"{zv[aggregate.ZV_ALL_LOW].mean():.1%} all at its bottom reward)." + change
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
    binary = set(np.unique(df[Seq.REWARD].dropna().to_numpy(np.float64)).tolist()) <= {0.0, 1.0}
    st.caption(
        f"{len(nonzero):,} of {len(adv):,} sequences shown have A ≠ 0."
        + (
            f" Rewards here are 0/1, so A takes few values per group size; the largest |A| "
            f"shown is {np.abs(nonzero).max():.3g} (a lone success or failure in a group of G "
            "gets √(G-1) with the population std)."
            if binary and len(nonzero)
            else ""
        )
    )
with right:
    step = ui.pick_step(np.unique(df[Seq.STEP].to_numpy()), key="group_step")
    one = df[df[Seq.STEP] == step]
    st.plotly_chart(charts.group_rewards_figure(one), key="group_rewards")
    per_group = one.groupby([c for c in (Seq.RANK, Seq.GROUP) if c in one.columns], sort=False)[
        Seq.REWARD
    ].agg(["min", "max"])
    flat = per_group[per_group["min"] == per_group["max"]]
    st.caption(
        f"Step {step}: each group's completions (dots) and mean reward (bar). "
        f"{len(flat)} of {len(per_group)} groups have every reward equal (grey bar and grey "
        "dash at their reward: no signal)."
    )

ui.notice_problems([run], t.problems)
