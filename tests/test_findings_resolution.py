"""The ratio's resolution against ε: what the recorder writes (``logprob_bits``, the grid the
ratios move on and the smallest non-zero |log s| and |log r_t| of each step, run.json's
``logprob_dtype``) and Health's ``ratio_resolution_coarse``.

The arithmetic: bfloat16 keeps 8 significant bits, so a log-prob in [-4, -2) lies on multiples of
2^(1 + 1 - 8) = 2^-6 = 0.015625 (its grid step q). One token of a 20-token sequence moved by one
such step gives |log r_t| = 0.015625 and |log s| = 0.015625 / 20 = 7.8125e-4, which is also the
sequence grid sum_t q_t / L^2 = 20 q / 400; above GSPO's band, whose wider side is
log(1 + 4e-4) = 3.9992e-4 (the narrower -log(1 - 3e-4) = 3.0005e-4). The float32 control moves a
token by 1.96e-3 (float32's grid at -3 is 2^-22): |log s| = 9.8e-5, inside the band.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from training_hooks import RunRecorder, schema, tables
from training_hooks.compute import logprob_bits, step_diagnostics
from training_hooks.findings import facts_of, run_health
from training_hooks.findings.core import Coverage, RunFacts
from training_hooks.findings.resolution import (
    NAME,
    RATIO_RESOLUTION_COARSE,
    band_half_width,
    check_ratio_resolution,
)
from training_hooks.ratio_grid import grid_step
from training_hooks.schema import Step

P, G, T = 2, 4, 20
B = P * G
GSPO_EPS = (3e-4, 4e-4)
BF16_STEP = 2.0**-6  # bfloat16's grid in [2, 4)


def _batch(dtype: torch.dtype, moves: dict[int, float]) -> dict:
    """old = -3 everywhere; token 5 of sequence b moved by ``moves[b]`` (others unmoved)."""
    old = torch.full((B, T), -3.0, dtype=dtype)
    new = old.clone()
    for b, d in moves.items():
        new[b, 5] = torch.tensor(-3.0 + d, dtype=dtype)
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
    return dict(
        rewards=rewards, logprobs=new, old_logprobs=old, mask=torch.ones(B, T, dtype=torch.bool)
    )


def test_logprob_bits_are_the_coarser_dtypes_significant_bits():
    assert logprob_bits(torch.bfloat16) == 8
    assert logprob_bits(torch.float16) == 11
    assert logprob_bits(torch.float32) == 24
    assert logprob_bits(torch.float64) == 53
    assert logprob_bits(torch.float32, torch.bfloat16) == 8
    assert logprob_bits(torch.int64) is None


def test_bfloat16_steps_are_coarser_than_gspo_eps_and_float32_ones_are_not():
    """One token moved by one bfloat16 step: |log r_t| = 2^-6, |log s| = 2^-6/20 = 7.8125e-4;
    three steps on another sequence do not lower the minimum. float32: 1.96e-3/20 = 9.8e-5."""
    row, _ = step_diagnostics(**_batch(torch.bfloat16, {0: BF16_STEP, 3: -3 * BF16_STEP}))
    assert row[Step.LOGPROB_BITS] == 8
    # every token at -3 (or next to it, still in [2, 4)): q = 2^-6, log s's grid 2^-6 / 20
    assert row[Step.TOKEN_LOG_RATIO_GRID] == BF16_STEP
    torch.testing.assert_close(row[Step.SEQ_LOG_RATIO_GRID], 7.8125e-4, rtol=1e-6, atol=0)
    assert row[Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO] == 0.015625
    torch.testing.assert_close(
        row[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO], 7.8125e-4, rtol=1e-6, atol=0
    )
    assert row[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO] > band_half_width(GSPO_EPS)
    torch.testing.assert_close(band_half_width(GSPO_EPS), math.log1p(4e-4), rtol=1e-12, atol=0)

    b32 = _batch(torch.float32, {0: 1.96e-3, 3: 0.05})
    d = float(b32["logprobs"][0, 5] - b32["old_logprobs"][0, 5])  # 1.96e-3 on float32's grid
    row32, _ = step_diagnostics(**b32)
    assert row32[Step.LOGPROB_BITS] == 24
    assert row32[Step.TOKEN_LOG_RATIO_GRID] == 2.0**-22  # float32 at -3
    torch.testing.assert_close(row32[Step.SEQ_LOG_RATIO_GRID], 2.0**-22 / T, rtol=1e-6, atol=0)
    torch.testing.assert_close(row32[Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO], d, rtol=1e-7, atol=0)
    torch.testing.assert_close(row32[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO], d / T, rtol=1e-6, atol=0)
    assert 9.79e-5 < row32[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO] < 9.81e-5 < band_half_width(GSPO_EPS)


def test_nothing_moved_is_nan_and_a_nan_token_is_not_the_resolution():
    """On-policy (every ratio 1): no step was seen, NaN (not 0, not inf). A NaN log-prob is
    skipped: the finest step is the other sequence's."""
    row, _ = step_diagnostics(**_batch(torch.bfloat16, {}))
    assert math.isnan(row[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO])
    assert math.isnan(row[Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO])
    batch = _batch(torch.float32, {1: 0.25})
    batch["logprobs"][0, 2] = math.nan
    row, _ = step_diagnostics(**batch)
    assert row[Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO] == 0.25
    torch.testing.assert_close(row[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO], 0.25 / T, rtol=1e-6, atol=0)


def test_grid_step_by_hand():
    """q(x) = 2^(e - p) with x = m 2^e, 0.5 <= |m| < 1: bfloat16 -3 (e 2): 2^-6; -0.01 (e -6):
    2^-14; -1 (e 1): 2^-7; float16 -3: 2^-9; float32 -3: 2^-22; 0 and NaN: no grid (0)."""
    x = torch.tensor([-3.0, -0.01, -1.0, 0.0, math.nan], dtype=torch.bfloat16)
    assert grid_step(x).tolist() == [2.0**-6, 2.0**-14, 2.0**-7, 0.0, 0.0]
    assert grid_step(torch.tensor([-3.0], dtype=torch.float16)).tolist() == [2.0**-9]
    assert grid_step(torch.tensor([-3.0])).tolist() == [2.0**-22]


def test_a_fine_token_does_not_hide_the_coarse_grid():
    """bfloat16, 14 tokens at -3 (q 2^-6) and 6 at -0.01 (q 2^-14) per sequence; one confident
    token moves one step: the finest |log s| is 2^-14 / 20 = 3.05e-6, inside the band, yet log s
    moves in steps of (14 2^-6 + 6 2^-14) / 400 = 5.48e-4 for an average token, beyond it."""
    batch = _batch(torch.bfloat16, {})
    batch["old_logprobs"][:, 14:] = -0.01
    batch["logprobs"] = batch["old_logprobs"].clone()
    batch["logprobs"][0, 15] = batch["old_logprobs"][0, 15] + 2.0**-14
    row, _ = step_diagnostics(**batch)
    torch.testing.assert_close(
        row[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO], 2.0**-14 / T, rtol=1e-6, atol=0
    )
    want = (14 * 2.0**-6 + 6 * 2.0**-14) / T**2
    torch.testing.assert_close(row[Step.SEQ_LOG_RATIO_GRID], want, rtol=1e-6, atol=0)
    assert row[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO] < band_half_width(GSPO_EPS) < want
    df = pd.DataFrame([row] * 6).assign(**{Step.STEP: range(6)})
    (found,) = check_ratio_resolution(df, None, RunFacts("gspo", seq_eps=GSPO_EPS), Coverage())
    assert "log s moved in steps of 5.48e-4 (median; one grid step of an average token" in (
        found.evidence
    )
    assert "the finest log s seen there: 3.05e-6" in found.evidence


def _record(tmp_path, dtype: torch.dtype, moves: dict[int, float], name: str, steps: int = 12):
    with RunRecorder(
        root=tmp_path, name=name, algorithm="gspo", seq_eps=GSPO_EPS, mlflow=False, group_size=G
    ) as rec:
        for s in range(steps):
            rec.log_step(s, **_batch(dtype, moves))
    info = schema.read_run_info(rec.run_dir)
    steps_df = tables.read_table(rec.run_dir, schema.STEPS_DIR).sort_values(Step.STEP)
    return info, steps_df


def test_recorded_bfloat16_gspo_run_gets_the_finding(tmp_path):
    """12 steps of bfloat16 log-probs, each with one token moved one step: every step's finest
    |log s| is 7.8125e-4 > 3.9992e-4, so the clip share (1 of 8 sequences: 12.5%) is rounding."""
    info, steps = _record(tmp_path, torch.bfloat16, {0: BF16_STEP}, "bf16")
    assert info.other["logprob_dtype"] == "bfloat16" and "old_logprob_dtype" not in info.other
    assert (steps[Step.LOGPROB_BITS] == 8).all()
    np.testing.assert_allclose(steps[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO], 7.8125e-4, rtol=1e-6)
    np.testing.assert_allclose(steps[Step.SEQ_CLIP_FRACTION], 1 / 8)
    report = run_health(steps, facts_of(info))
    found = {f.code: f for f in report.findings}[RATIO_RESOLUTION_COARSE]
    assert found.severity == "warning" and found.steps == tuple(range(12))
    assert "bfloat16 (8 significant bits" in found.evidence
    assert "2^-6 ≈ 0.0156" in found.evidence
    assert "At 12 of the 12 steps whose ratios moved" in found.evidence
    assert "log s moved in steps of 7.81e-4 (median;" in found.evidence
    assert "above 4.00e-4, the wider side of the sequence band of ε 3e-4/4e-4" in found.evidence
    assert "(the finest log s seen there: 7.81e-4)" in found.evidence
    assert "12.5% of sequences" in found.evidence
    assert "float32" in found.advice
    assert NAME in report.checked


def test_recorded_float32_control_gets_none(tmp_path):
    info, steps = _record(tmp_path, torch.float32, {0: 1.96e-3}, "fp32")
    assert info.other["logprob_dtype"] == "float32"
    np.testing.assert_allclose(steps[Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO], 9.8e-5, rtol=1e-3)
    report = run_health(steps, facts_of(info))
    assert RATIO_RESOLUTION_COARSE not in {f.code for f in report.findings}
    np.testing.assert_allclose(steps[Step.SEQ_LOG_RATIO_GRID], 2.0**-22 / T, rtol=1e-6)
    assert NAME in report.checked


def test_mixed_dtypes_are_noted_and_the_coarser_one_counts(tmp_path):
    batch = _batch(torch.float32, {0: 0.1})
    batch["logprobs"] = batch["logprobs"].to(torch.bfloat16)
    with RunRecorder(root=tmp_path, name="mixed", mlflow=False, group_size=G) as rec:
        rec.log_step(0, **batch)
    info = schema.read_run_info(rec.run_dir)
    assert info.other["logprob_dtype"] == "bfloat16"
    assert info.other["old_logprob_dtype"] == "float32"
    steps = tables.read_table(rec.run_dir, schema.STEPS_DIR)
    assert steps[Step.LOGPROB_BITS].tolist() == [8]


def _table(bits, grid, finest=None) -> pd.DataFrame:
    """A GSPO step table: ``finest`` the smallest non-zero |log s| (default: the grid, NaN where
    the grid is NaN: nothing moved)."""
    n = len(grid)
    return pd.DataFrame(
        {
            Step.STEP: np.arange(n),
            Step.LOGPROB_BITS: bits,
            Step.SEQ_LOG_RATIO_GRID: grid,
            Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO: grid if finest is None else finest,
        }
    )


GSPO = RunFacts(algorithm="gspo", seq_eps=GSPO_EPS)


def test_the_check_judges_the_moved_steps_and_says_what_it_skipped():
    """Half the moved steps coarse: a finding (>= 0.5); fewer: none. On-policy steps (nothing
    moved: NaN) are not judged. Unknown dtype, ε or clip: not checked, with the reason."""
    grid = [7.8e-4, 7.8e-4, 1e-4, 1e-4, np.nan, np.nan]
    found = check_ratio_resolution(_table(8, grid), None, GSPO, Coverage())
    assert [f.steps for f in found] == [(0, 1)] and found[0].basis == 4
    assert "At 2 of the 4 steps whose ratios moved (steps 0, 1)" in found[0].evidence
    # the grid is coarse but no ratio moved (on-policy): nothing to judge
    on_policy = _table(8, [7.8e-4] * 3, [np.nan] * 3)
    cov = Coverage()
    assert check_ratio_resolution(on_policy, None, GSPO, cov) == []
    assert cov.checked[NAME] == "no ratio moved (every step on-policy)"
    cov = Coverage()
    assert check_ratio_resolution(_table(8, [7.8e-4, 1e-4, 1e-4, np.nan]), None, GSPO, cov) == []
    assert NAME in cov.checked
    # the token unit: GRPO's band (ε 0.2: log 1.2 = 0.182) holds bfloat16's 2^-6 steps
    grpo = RunFacts(algorithm="grpo", token_eps=(0.2, 0.2))
    tok = pd.DataFrame(
        {
            Step.STEP: [0, 1],
            Step.LOGPROB_BITS: 8,
            Step.TOKEN_LOG_RATIO_GRID: 2.0**-6,
            Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO: 2.0**-6,
        }
    )
    cov = Coverage()
    assert check_ratio_resolution(tok, None, grpo, cov) == [] and NAME in cov.checked
    cov = Coverage()  # an import: its log states no dtype, so the check is not listed
    no_dtype = _table(8, grid).drop(columns=[Step.LOGPROB_BITS])
    facts = RunFacts("gspo", seq_eps=GSPO_EPS, tool="verl")
    assert check_ratio_resolution(no_dtype, None, facts, cov) == []
    assert NAME not in cov.not_checked and NAME not in cov.checked
    for df, facts, why in (
        (no_dtype, GSPO, "dtype was not recorded"),
        (_table(8, grid), RunFacts(algorithm="gspo"), "ε"),
        (_table(8, grid), RunFacts(algorithm="cispo", seq_eps=GSPO_EPS), "hard clip"),
    ):
        cov = Coverage()
        assert check_ratio_resolution(df, None, facts, cov) == []
        assert why in cov.not_checked[NAME]


@pytest.mark.parametrize("eps", [(3e-4, 4e-4), (0.2, 0.28)])
def test_band_half_width_is_the_wider_side(eps):
    lo, hi = eps
    assert band_half_width(eps) == max(-math.log1p(-lo), math.log1p(hi))


def _noisy_run(tmp_path, dtype: torch.dtype) -> tuple[pd.DataFrame, list[str]]:
    """8 steps of a GSPO run (ε 3e-4/4e-4), 16 sequences of 20 tokens over a vocabulary of 11:
    log-probs from random logits, the policy's logits moved by 1e-3 N(0, 1) on odd steps (even
    steps on-policy), rounded to ``dtype``. Returns the steps and Health's codes."""
    gen = torch.Generator().manual_seed(0)
    with RunRecorder(
        root=tmp_path, name=str(dtype), algorithm="gspo", seq_eps=GSPO_EPS, mlflow=False
    ) as rec:
        for s in range(8):
            logits = torch.randn(16, T, 11, generator=gen)
            tok = torch.randint(0, 11, (16, T, 1), generator=gen)

            def lp(x, tok=tok):
                return torch.log_softmax(x.to(dtype).float(), -1).to(dtype).gather(-1, tok)[..., 0]

            moved = logits + 1e-3 * torch.randn(16, T, 11, generator=gen)
            rec.log_step(
                s,
                rewards=torch.randint(0, 2, (4, 4), generator=gen).float(),
                logprobs=lp(moved) if s % 2 else lp(logits),
                old_logprobs=lp(logits),
                mask=torch.ones(16, T, dtype=torch.bool),
            )
    info = schema.read_run_info(rec.run_dir)
    steps = tables.read_table(rec.run_dir, schema.STEPS_DIR).sort_values(Step.STEP)
    return steps, [f.code for f in run_health(steps, facts_of(info)).findings]


def test_the_same_move_clips_far_more_in_bfloat16_and_only_that_run_is_told(tmp_path):
    """One policy move, rounded to bfloat16 or kept in float32: bfloat16's log s grid (~7.9e-4)
    is beyond the band, its clip share on the moved steps 56% against float32's 19% (3x); the
    finding fires on the bfloat16 run only."""
    b16, codes16 = _noisy_run(tmp_path / "bf16", torch.bfloat16)
    f32, codes32 = _noisy_run(tmp_path / "fp32", torch.float32)
    odd = b16[Step.STEP].to_numpy() % 2 == 1
    assert b16[Step.SEQ_LOG_RATIO_GRID][odd].median() > band_half_width(GSPO_EPS)
    assert f32[Step.SEQ_LOG_RATIO_GRID][odd].median() < 1e-7
    clip16 = b16[Step.SEQ_CLIP_FRACTION][odd].mean()
    clip32 = f32[Step.SEQ_CLIP_FRACTION][odd].mean()
    assert clip16 >= 2 * clip32 > 0, (clip16, clip32)  # (0.5625, 0.1875) on CPU, torch 2.13
    assert RATIO_RESOLUTION_COARSE in codes16 and RATIO_RESOLUTION_COARSE not in codes32


def test_clip_high_advice_is_led_by_the_rounding_when_both_fire():
    """Two cards, one run: clip_high must not advise a lower learning rate alone while
    ratio_resolution_coarse says the share is rounding; without the latter it is unchanged."""
    from training_hooks.findings import CLIP_HIGH, WARNING, Finding
    from training_hooks.findings.run import explain_clip_high

    clip = Finding(CLIP_HIGH, WARNING, "GSPO clips far more", "56% of sequences", "Lower the lr.")
    coarse = Finding(RATIO_RESOLUTION_COARSE, WARNING, "coarse", "4.69e-4 > 4e-4", "float32.")
    got = {f.code: f for f in explain_clip_high([clip, coarse])}
    assert got[CLIP_HIGH].advice.startswith("First rule out rounding: ")
    assert (
        got[CLIP_HIGH].advice.endswith("Lower the lr.") and got[RATIO_RESOLUTION_COARSE] == coarse
    )
    assert explain_clip_high([clip]) == [clip]
