"""What the pages say of a NaN, an unscored reward and a constant reward or length.

* Sequences: a NaN log-ratio reads "NaN" (Arrow would hand the grid a null, drawn "None"), a NaN
  reward "unscored (NaN)", the NaN token is marked on the bars and counted apart in the title;
  the step's per-function unscored counts are said beside the table.
* Groups: a constant reward's groups are "reward constant (no signal)", never "all at max reward".
* Lengths: the correlation of length and reward is undefined when either is constant, and says so.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from test_app_pages import _arr, _open

from app import aggregate, cell_text, charts
from training_hooks import RunRecorder
from training_hooks.schema import Seq


def _clean(page: str, state: dict | None = None):
    at = _open(page, state)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def _fig(at, key: str) -> dict:
    for el in at.get("plotly_chart"):
        if key in el.proto.id:
            return json.loads(el.proto.spec)
    raise AssertionError(f"no chart {key!r}")


# ------------------------------------------------------------------------------------------
# the pure parts
# ------------------------------------------------------------------------------------------


def test_number_text_and_nonfinite_columns_by_hand():
    assert cell_text.number_text(1.5e-3, "%.3e") == "1.500e-03"
    assert cell_text.number_text(math.nan, "%.3e") == "NaN"
    assert cell_text.number_text(-math.inf) == "-inf" and cell_text.number_text(math.inf) == "+inf"
    assert cell_text.number_text(math.nan, None, "unscored (NaN)") == "unscored (NaN)"
    assert cell_text.number_text(0.25) == "0.25"
    view = pd.DataFrame(
        {
            "a": [0.5, math.nan],  # a NaN value: text
            "b": [1.0, 2.0],  # finite: stays a number
            "kl": [math.nan, math.nan],  # optional and NaN everywhere: not given, left alone
            "c": [math.inf, 1.0],
        }
    )
    out, changed = cell_text.nonfinite_as_text(
        view, {"a": "%.2f", "b": None, "kl": "%.3g", "c": "%.1f"}, {"a": "gone"}, ("kl",)
    )
    assert changed == ["a", "c"]
    assert out["a"].tolist() == ["0.50", "gone"] and out["c"].tolist() == ["+inf", "1.0"]
    assert out["b"].dtype.kind == "f" and out["kl"].isna().all()


def test_token_bars_count_a_nan_apart_and_mark_it():
    """log r = [0.1, -0.2, NaN, 0.0] against ε 0.2: 0 of 4 outside [log 0.8, log 1.2] =
    [-0.223, 0.182], 1 NaN; the NaN token has a marker at 0 named "NaN"; +inf is outside."""
    fig = charts.token_bars_figure(np.array([0.1, -0.2, math.nan, 0.0]), token_eps=(0.2, 0.2))
    assert "(0 of 4 outside the token band, 1 NaN)" in fig.layout.title.text
    marks = [t for t in fig.data if t.name == "NaN / inf (no bar)"]
    assert len(marks) == 1 and list(marks[0].x) == [2] and list(marks[0].y) == [0.0]
    assert list(marks[0].text) == ["NaN"]
    fig = charts.token_bars_figure(np.array([0.1, math.inf, math.nan]), token_eps=(0.2, 0.2))
    assert "(1 of 3 outside the token band, 1 NaN)" in fig.layout.title.text
    assert list(next(t for t in fig.data if t.name.startswith("NaN")).text) == ["+inf", "NaN"]
    clean = charts.token_bars_figure(np.array([0.1, 0.3]), token_eps=(0.2, 0.2))
    assert "NaN" not in clean.layout.title.text and len(clean.data) == 1


def test_constant_reward_groups_are_not_solved():
    """Every reward 0.5: all 3 groups zero-variance, each "reward constant", none "all at max"."""
    df = pd.DataFrame({Seq.STEP: [0] * 6, Seq.GROUP: [0, 0, 1, 1, 2, 2], Seq.REWARD: 0.5})
    out = aggregate.zero_variance_by_reward(df).set_index(Seq.STEP)
    assert out.loc[0, aggregate.ZV_CONSTANT] == 1.0
    assert out.loc[0, aggregate.ZV_ALL_HIGH] == 0 and out.loc[0, aggregate.ZV_ALL_LOW] == 0
    assert aggregate.constant_reward(df) == 0.5
    names = [t.name for t in charts.zero_variance_figure(out.reset_index()).data]
    assert aggregate.ZV_CONSTANT in names
    # a varying reward: the usual classes, no constant trace
    df.loc[0, Seq.REWARD] = 1.0
    out = aggregate.zero_variance_by_reward(df).set_index(Seq.STEP)
    assert out.loc[0, aggregate.ZV_CONSTANT] == 0 and aggregate.constant_reward(df) is None
    assert out.loc[0, aggregate.ZV_ALL_LOW] == pytest.approx(2 / 3)
    names = [t.name for t in charts.zero_variance_figure(out.reset_index()).data]
    assert aggregate.ZV_CONSTANT not in names


def test_correlation_text_says_why_it_is_undefined():
    df = pd.DataFrame({Seq.LENGTH: [1, 2, 3, 4], Seq.REWARD: [0.0, 0.0, 1.0, 1.0]})
    # r = cov / (sd sd): x - 2.5 = [-1.5, -.5, .5, 1.5], y - .5 = [-.5, -.5, .5, .5]:
    # sum xy = 2, sum x^2 = 5, sum y^2 = 1: r = 2 / sqrt(5) = 0.894
    got = aggregate.correlation_text(df, Seq.LENGTH, Seq.REWARD, "length", "reward")
    assert got == "Pearson correlation of length and reward: 0.89."
    df[Seq.REWARD] = 0.0
    got = aggregate.correlation_text(df, Seq.LENGTH, Seq.REWARD, "length", "reward")
    assert got == (
        "Pearson correlation of length and reward: undefined, every reward is 0 "
        "(constant: no signal)."
    )
    df[Seq.LENGTH] = 20
    got = aggregate.correlation_text(df, Seq.LENGTH, Seq.REWARD, "length", "reward")
    assert got.endswith(
        "every reward is 0 (constant: no signal) and every length is 20 (constant)."
    )
    one = aggregate.correlation_text(df.iloc[:1], Seq.LENGTH, Seq.REWARD, "length", "reward")
    assert one == "Pearson correlation of length and reward: undefined (1 completion with both)."


# ------------------------------------------------------------------------------------------
# the pages
# ------------------------------------------------------------------------------------------

B, T = 4, 4


def _record_nan(root) -> str:
    """Step 0 clean; step 1: log-prob NaN at (1, 2), so sequence 1's log s is NaN, and its reward
    NaN (no function scored it); two reward functions' unscored counts as TRL's hook records
    them (judge 2, fmt 1, no score at all 1). Every sequence's tokens kept."""
    old = -torch.ones(B, T)
    logp = old + torch.tensor([0.1, -0.2, 0.3, 0.0]).repeat(B, 1)
    mask = torch.ones(B, T, dtype=torch.bool)
    with RunRecorder(
        root=root, name="nan", algorithm="grpo", mlflow=False, token_samples=B, group_size=2
    ) as rec:
        rec.log_step(0, rewards=torch.tensor([[1.0, 0.0], [0.0, 1.0]]), logprobs=logp,
                     old_logprobs=old, mask=mask)  # fmt: skip
        nan_logp = logp.clone()
        nan_logp[1, 2] = math.nan
        rec.log_step(
            1,
            rewards=torch.tensor([[1.0, math.nan], [0.0, 1.0]]),
            logprobs=nan_logp,
            old_logprobs=old,
            mask=mask,
            advantages=torch.tensor([0.0, 0.0, -1.0, 1.0]),
            extra={
                "rewards/judge/unscored": 2.0,
                "rewards/fmt/unscored": 1.0,
                "rewards/unscorable": 1.0,
            },
        )
    return rec.run_id


@pytest.mark.slow
def test_sequences_page_writes_nan_out_and_marks_its_token(tmp_path, app_env):
    app_env(tmp_path)
    run = _record_nan(tmp_path)
    at = _clean("sequences", {"run": run, "step": 1})
    table = at.dataframe[0].value
    # the NaN sequence is a culprit ("nonfinite"), listed first and selected
    assert table.iloc[0][Seq.SEQ_LOG_RATIO] == "NaN" and table.iloc[0]["s"] == "NaN"
    assert table.iloc[0][Seq.REWARD] == "unscored (NaN)"
    assert table.iloc[1:][Seq.SEQ_LOG_RATIO].tolist() == ["5.000e-02"] * 3  # (0.1-0.2+0.3+0)/4
    assert sorted(table.iloc[1:][Seq.REWARD].tolist()) == ["0", "1", "1"]
    columns = json.loads(at.dataframe[0].proto.columns)
    assert "holds NaN or ±inf" in columns[Seq.SEQ_LOG_RATIO]["help"]
    as_text = [c for c in columns if "holds NaN or ±inf" in columns[c].get("help", "")]
    assert Seq.KL_REF not in as_text  # NaN in every row: no ref_logprobs given, not a NaN
    bars = _fig(at, "token_bars")
    assert "(0 of 4 outside the token band, 1 NaN)" in bars["layout"]["title"]["text"]
    mark = next(t for t in bars["data"] if t.get("name") == "NaN / inf (no bar)")
    assert _arr(mark["x"]).tolist() == [2] and mark["text"] == ["NaN"]
    text = _captions(at)
    assert "Reward unscored (NaN) on 1 of these 4 sequences" in text and "Not a reward of 0" in text
    assert "judge for 2, fmt for 1 of the step's completions" in text
    assert "1 had no score from any function" in text
    assert (
        "their columns (s, log s, tokens outside band, reward, token log r min, token log r max, "
        "KL old→new) are shown as text" in text
    )
    assert "1 token(s) hold NaN or ±inf: no bar, marked ✕ at 0" in text
    # step 0: nothing non-finite, nothing unscored: numbers stay numbers, no note
    at = _clean("sequences", {"run": run, "step": 0})
    assert at.dataframe[0].value[Seq.SEQ_LOG_RATIO].dtype.kind == "f"
    assert "unscored" not in _captions(at) and "returned None" not in _captions(at)


def _record_constant(root) -> str:
    """6 steps, every reward 0.0 and every completion 4 tokens long."""
    gen = torch.Generator().manual_seed(0)
    with RunRecorder(root=root, name="flat", algorithm="gspo", mlflow=False, group_size=2) as rec:
        for s in range(6):
            old = -torch.rand(B, T, generator=gen) - 1
            logp = old + 1e-3 * torch.randn(B, T, generator=gen)
            rec.log_step(s, rewards=torch.zeros(2, 2), logprobs=logp, old_logprobs=old,
                         mask=torch.ones(B, T, dtype=torch.bool))  # fmt: skip
    return rec.run_id


@pytest.mark.slow
def test_groups_and_lengths_say_a_constant_reward_is_no_signal(tmp_path, app_env):
    app_env(tmp_path)
    run = _record_constant(tmp_path)
    at = _clean("groups", {"run": run})
    text = _captions(at)
    assert "Every reward shown is 0: the reward is constant" in text
    assert "not a solved task" in text and "all at the run's top reward" not in text
    areas = _fig(at, "zero_var")["data"]
    constant = next(t for t in areas if t["name"] == aggregate.ZV_CONSTANT)
    assert _arr(constant["y"]).tolist() == [1.0] * 6
    high = next(t for t in areas if t["name"] == aggregate.ZV_ALL_HIGH)
    assert _arr(high["y"]).tolist() == [0.0] * 6

    at = _clean("lengths", {"run": run})
    text = _captions(at)
    assert ": nan" not in text
    assert (
        "Pearson correlation of length and reward: undefined, every reward is 0 (constant: no "
        "signal) and every length is 4 (constant)." in text
    )
