"""training_hooks: step scalars by hand and by two routes, the Parquet layout, validation, resume."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from diagnostics_oracle import oracle_diagnostics

from gspo_metrics import group_advantages, gspo_loss, sequence_diagnostics
from training_hooks import RunRecorder, step_diagnostics
from training_hooks.schema import (
    SEQUENCE_COLUMN_NAMES,
    STEP_COLUMN_NAMES,
    TOKEN_COLUMN_NAMES,
    Seq,
    Step,
    Tok,
    read_run_info,
)

F64 = torch.float64
NAN = float("nan")


# The required columns, spelled out once more so a schema edit cannot silently drop one.
REQUIRED_STEP = (
    "run_id step wall_time algorithm loss reward_mean reward_std seq_log_ratio_mean "
    "seq_log_ratio_std seq_log_ratio_min seq_log_ratio_max seq_clip_fraction "
    "seq_clip_low_fraction seq_clip_high_fraction token_clip_fraction token_clip_low_fraction "
    "token_clip_high_fraction zero_variance_groups zero_variance_fraction num_groups "
    "num_sequences num_tokens length_mean length_min length_max length_p90 truncated_fraction "
    "kl_ref_mean kl_old_mean entropy_mean nonfinite_count"
).split()
REQUIRED_SEQ = (
    "run_id step rank group sample length truncated reward advantage seq_log_ratio seq_clipped "
    "token_log_ratio_min token_log_ratio_max token_log_ratio_std token_clip_fraction kl_ref"
).split()


def hand_batch() -> dict:
    """P=2, G=2, T=4; token log-ratios d with old = -1 (logprobs d - 1: log-probs are <= 0),
    lengths 1..4, garbage under the padding."""
    d = torch.tensor(
        [
            [0.3, 9.0, 9.0, 9.0],  # s = 0.3: outside both ranges, A > 0 -> binds high
            [0.1, -0.1, NAN, 9.0],  # s = 0: inside; both tokens inside 0.8..1.2
            [-0.5, 0.0, 0.2, -9.0],  # s = -0.1: out low, but A = 0 -> never binds
            [0.0, 0.0, 0.0, 2e-4],  # s = 5e-5: inside log1p(4e-4) = 3.9992e-4
        ],
        dtype=F64,
    )
    mask = torch.arange(4)[None, :] < torch.tensor([1, 2, 3, 4])[:, None]
    return {
        "rewards": torch.tensor([[1.0, 0.0], [2.0, 2.0]], dtype=F64),
        "logprobs": d - 1,
        "old_logprobs": torch.full((4, 4), -1.0, dtype=F64),
        "mask": mask,
        "truncated": torch.tensor([True, False, False, True]),
        "loss": 1.5,
        "extra": {"grad_norm": 0.25},
    }


def check_hand_row(row: dict) -> None:
    a = 0.5 / 0.5001  # group 0: rewards (1, 0), mean .5, population std .5 -> A = +-0.99980
    assert row[Step.REWARD_MEAN] == pytest.approx(1.25)  # (1 + 0 + 2 + 2) / 4
    assert row[Step.REWARD_STD] == pytest.approx(math.sqrt(9 / 4 - 1.25**2))  # sqrt(.6875)
    assert row[Step.ADVANTAGE_MEAN] == pytest.approx(0.0, abs=1e-12)
    assert row[Step.ADVANTAGE_ABS_MEAN] == pytest.approx(2 * a / 4)
    assert row[Step.SEQ_LOG_RATIO_MEAN] == pytest.approx((0.3 + 0.0 - 0.1 + 5e-5) / 4)
    assert row[Step.SEQ_LOG_RATIO_MIN] == pytest.approx(-0.1)
    assert row[Step.SEQ_LOG_RATIO_MAX] == pytest.approx(0.3)
    assert row[Step.SEQ_CLIP_FRACTION] == 0.5  # rows 0 and 2 of 4 sequences
    assert row[Step.SEQ_CLIP_LOW_FRACTION] == 0.0  # row 2 is low but has A = 0
    assert row[Step.SEQ_CLIP_HIGH_FRACTION] == 0.25  # row 0
    # token-weighted: 3 of 10 tokens outside 0.8..1.2 (row 0: 0.3; row 2: -0.5, 0.2); the
    # sequence-weighted mean would be (1 + 0 + 2/3 + 0) / 4 = 0.4167
    assert row[Step.TOKEN_CLIP_FRACTION] == pytest.approx(0.3)
    assert row[Step.TOKEN_CLIP_HIGH_FRACTION] == pytest.approx(0.1)  # only row 0's has A > 0
    assert row[Step.TOKEN_CLIP_LOW_FRACTION] == 0.0
    assert row[Step.TOKEN_LOG_RATIO_ABS_MAX] == pytest.approx(0.5)
    assert row[Step.ZERO_VARIANCE_GROUPS] == 1 and row[Step.ZERO_VARIANCE_FRACTION] == 0.5
    assert (row[Step.NUM_GROUPS], row[Step.NUM_SEQUENCES], row[Step.NUM_TOKENS]) == (2, 4, 10)
    assert row[Step.LENGTH_MEAN] == 2.5
    assert (row[Step.LENGTH_MIN], row[Step.LENGTH_MAX]) == (1, 4)
    assert row[Step.LENGTH_P90] == pytest.approx(3.7)  # 3 + 0.7 * (4 - 3), linear interpolation
    assert row[Step.TRUNCATED_FRACTION] == 0.5
    tokens = [0.3, 0.1, -0.1, -0.5, 0.0, 0.2, 0.0, 0.0, 0.0, 2e-4]
    k3 = sum(math.expm1(x) - x for x in tokens) / 10  # KL(old || new), token-weighted
    assert row[Step.KL_OLD_MEAN] == pytest.approx(k3, rel=1e-9)
    assert math.isnan(row[Step.KL_REF_MEAN]) and math.isnan(row[Step.ENTROPY_MEAN])
    assert row[Step.NONFINITE_COUNT] == 0  # the NaN sits under the padding
    assert row[Step.LOSS] == 1.5 and row["grad_norm"] == 0.25
    assert row[Step.NUM_RANKS] == 1


def test_hand_computed_step_scalars():
    """step_diagnostics reproduces the hand arithmetic (token- vs sequence-weighted, p90, zero-var)."""
    row, seqs = step_diagnostics(**hand_batch(), step=7)
    check_hand_row(row)
    assert row[Step.STEP] == 7
    assert seqs[Seq.GROUP].tolist() == [0, 0, 1, 1] and seqs[Seq.SAMPLE].tolist() == [0, 1, 0, 1]
    assert seqs[Seq.LENGTH].tolist() == [1, 2, 3, 4]
    assert seqs[Seq.SEQ_CLIPPED].tolist() == [True, False, True, False]
    assert seqs[Seq.TRUNCATED].tolist() == [True, False, False, True]
    np.testing.assert_allclose(seqs[Seq.ADVANTAGE], [0.5 / 0.5001, -0.5 / 0.5001, 0, 0], rtol=1e-6)


def test_recorder_writes_the_hand_case(tmp_path):
    """The recorder's Parquet step row and sequence rows hold the same hand-computed numbers."""
    with RunRecorder(root=tmp_path, name="hand", algorithm="gspo", config={"lr": 1e-6}) as rec:
        rec.log_step(3, **hand_batch())
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps"))
    assert len(steps) == 1
    check_hand_row(steps.iloc[0].to_dict())
    assert steps[Step.RUN_ID].iloc[0] == rec.run_id and steps[Step.ALGORITHM].iloc[0] == "gspo"
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    assert seqs[Seq.LENGTH].tolist() == [1, 2, 3, 4] and set(seqs[Seq.STEP]) == {3}
    assert seqs[Seq.SEQ_LOG_RATIO].tolist() == pytest.approx([0.3, 0.0, -0.1, 5e-5], abs=1e-7)


def hand_sampler() -> torch.Tensor:
    """Sampler log-probs for ``hand_batch`` (old = -1, lengths 1..4): u = old - sampler is
    [-.1 | .2, 0 | 0, 0, -.3 | 0, 0, 0, 0] on the masked tokens, garbage under the padding."""
    return (
        torch.tensor(
            [
                [0.1, 9.0, NAN, -9.0],
                [-0.2, 0.0, NAN, 9.0],
                [0.0, 0.0, 0.3, float("inf")],
                [0.0, 0.0, 0.0, 0.0],
            ],
            dtype=F64,
        )
        - 1
    )


def check_hand_lag_row(row: dict) -> None:
    """The lag and sampler columns of ``hand_batch`` with ``hand_sampler``, rollout 5, lag 1.

    k3(u) = e^u - 1 - u: k3(-.1) = .9048374180359595 - .9 = .0048374180359595,
    k3(.2) = .0214027581601699, k3(-.3) = .7408182206817179 - .7 = .0408182206817179; the
    token-weighted mean is their sum over the 10 tokens, .0670583968778473 / 10 (the
    sequence-weighted mean would be (k3(-.1) + k3(.2) / 2 + k3(-.3) / 3) / 4 = .00660...)."""
    assert row[Step.SAMPLER_KL_MEAN] == pytest.approx(0.00670583968778473, rel=1e-12)
    assert row[Step.SAMPLER_LOGP_ABS_DIFF_MAX] == pytest.approx(0.3, rel=1e-15)
    assert (row[Step.ROLLOUT], row[Step.POLICY_LAG]) == (5, 1)
    assert row[Step.NONFINITE_COUNT] == 0  # NaN and inf under the padding only


def test_hand_computed_lag_and_sampler_columns(tmp_path):
    """rollout and policy_lag are written as given (null when not given); sampler_kl_mean is
    token-weighted, sampler_logp_abs_diff_max the max over the masked tokens; without sampler
    log-probs both are NaN (unknown), never 0."""
    kw = dict(rollout=5, policy_lag=1, sampler_logprobs=hand_sampler())
    row, seqs = step_diagnostics(**hand_batch(), **kw)
    check_hand_lag_row(row)
    np.testing.assert_allclose(seqs[Seq.SAMPLER_LOGP_ABS_DIFF_MAX], [0.1, 0.2, 0.3, 0.0], rtol=1e-6)
    with RunRecorder(root=tmp_path, name="lag") as rec:
        rec.log_step(0, **hand_batch(), **kw)
        rec.log_step(1, **hand_batch())
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps")).set_index(Step.STEP)
    check_hand_lag_row(steps.loc[0].to_dict())
    arrow = pq.read_table(os.path.join(rec.run_dir, "steps")).schema
    assert str(arrow.field(Step.ROLLOUT).type) == str(arrow.field(Step.POLICY_LAG).type) == "int64"
    assert pd.isna(steps.loc[1, Step.ROLLOUT]) and pd.isna(steps.loc[1, Step.POLICY_LAG])
    assert math.isnan(steps.loc[1, Step.SAMPLER_KL_MEAN])
    assert math.isnan(steps.loc[1, Step.SAMPLER_LOGP_ABS_DIFF_MAX])
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    assert seqs[seqs[Seq.STEP] == 1][Seq.SAMPLER_KL].isna().all()


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"rollout": -1}, "rollout must be >= 0, got -1"),
        ({"rollout": 1.0}, "rollout must be an int, got 1.0"),
        ({"policy_lag": True}, "policy_lag must be an int, got True"),
        ({"policy_lag": "1"}, "policy_lag must be an int, got '1'"),
        ({"sampler_logprobs": torch.zeros(4, 3)}, r"sampler_logprobs has shape \(4, 3\)"),
        ({"extra": {"rollout": 1}}, "'rollout' is a built-in step column"),
    ],
)
def test_bad_lag_arguments_are_named(tmp_path, kw, message):
    """Bad rollout / policy_lag / sampler_logprobs raise a ValueError naming the argument;
    nothing is recorded."""
    with RunRecorder(root=tmp_path, name="bad") as rec:
        with pytest.raises(ValueError, match=message):
            rec.log_step(0, **{**hand_batch(), **kw})
        assert rec.last_step is None


def test_step_scalars_equal_aggregates_of_the_sequence_table(make_batch):
    """Two routes: every step scalar equals the matching (weighted) aggregate of its sequences."""
    b = make_batch(6, 4, 20, seed=3, spread=0.2, dtype=F64, ref=True, entropy=True, truncated=True)
    adv_bt = torch.randn(24, 20, dtype=F64, generator=torch.Generator().manual_seed(1))
    row, s = step_diagnostics(**b, advantages=adv_bt)
    n = s[Seq.LENGTH].astype(float)

    def tok_w(col):
        return (s[col].astype(float) * n).sum() / n.sum()

    assert row[Step.TOKEN_CLIP_FRACTION] == pytest.approx(tok_w(Seq.TOKEN_CLIP_FRACTION), rel=1e-6)
    assert row[Step.TOKEN_CLIP_LOW_FRACTION] == pytest.approx(
        tok_w(Seq.TOKEN_CLIP_LOW_FRACTION), rel=1e-6
    )
    assert row[Step.KL_REF_MEAN] == pytest.approx(tok_w(Seq.KL_REF), rel=1e-6)
    assert row[Step.KL_OLD_MEAN] == pytest.approx(tok_w(Seq.KL_OLD), rel=1e-6)
    assert row[Step.ENTROPY_MEAN] == pytest.approx(tok_w(Seq.ENTROPY), rel=1e-6)
    assert row[Step.SEQ_CLIP_FRACTION] == pytest.approx(s[Seq.SEQ_CLIPPED].mean())
    assert row[Step.SEQ_CLIP_LOW_FRACTION] == pytest.approx(s[Seq.SEQ_CLIP_LOW].mean(), rel=1e-6)
    assert row[Step.SEQ_LOG_RATIO_STD] == pytest.approx(
        np.std(s[Seq.SEQ_LOG_RATIO].astype(float)), rel=1e-5
    )
    assert row[Step.REWARD_STD] == pytest.approx(np.std(s[Seq.REWARD].astype(float)), rel=1e-6)
    assert row[Step.LENGTH_P90] == pytest.approx(np.percentile(n, 90))
    assert row[Step.TRUNCATED_FRACTION] == pytest.approx(s[Seq.TRUNCATED].mean())
    assert row[Step.NUM_TOKENS] == int(b["mask"].sum())
    # the sequence table is gspo_metrics.sequence_diagnostics, float32 on disk
    d = sequence_diagnostics(
        b["logprobs"],
        b["old_logprobs"],
        b["mask"],
        adv_bt,
        ref_logprobs=b["ref_logprobs"],
        entropy=b["entropy"],
    )
    for col in (Seq.SEQ_LOG_RATIO, Seq.TOKEN_LOG_RATIO_STD, Seq.KL_REF, Seq.TOKEN_CLIP_FRACTION):
        np.testing.assert_allclose(s[col], d[col].float().numpy(), rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 1])
def test_recorded_full_inputs_equal_the_oracle(tmp_path, make_batch, seed):
    """Two routes to one answer: a step logged with every input (reference and sampler
    log-probs, entropy, rollout and lag), read back from Parquet, holds the oracle's diagnostics
    (``diagnostics_oracle``, the equations, float64) rounded to float32, and step scalars equal
    to the oracle rows' aggregates."""
    b = make_batch(8, 8, 300, seed=seed, spread=0.3, ref=True, entropy=True, truncated=True)
    gen = torch.Generator().manual_seed(seed + 10)
    b["sampler_logprobs"] = b["old_logprobs"] + 0.2 * torch.randn(64, 300, generator=gen)
    b["mask"][3, 5:] = False  # a short sequence
    adv = group_advantages(b["rewards"]).flatten()
    with RunRecorder(root=tmp_path, name="full", flush_interval_s=60) as rec:
        rec.log_step(0, **b, advantages=adv, rollout=4, policy_lag=1)
        run_dir = rec.run_dir
    seq = pd.read_parquet(os.path.join(run_dir, "sequences"))
    step = pd.read_parquet(os.path.join(run_dir, "steps")).iloc[0]
    optional = ("ref_logprobs", "entropy", "sampler_logprobs")
    ref = oracle_diagnostics(
        b["logprobs"].double(),
        b["old_logprobs"].double(),
        b["mask"],
        adv.double(),
        **{k: b[k].double() for k in optional},
    )
    for name, want in ref.items():
        if want.dtype == torch.int64:
            np.testing.assert_array_equal(seq[name].to_numpy(), want.numpy(), err_msg=name)
        else:  # float32 on disk
            got = seq[name].to_numpy(dtype=np.float64)
            np.testing.assert_allclose(
                got, want.float().double(), rtol=3e-6, atol=1e-7, err_msg=name
            )
    n = ref["length"].double()
    assert step[Step.SAMPLER_KL_MEAN] == pytest.approx(
        float((ref["sampler_kl"] * n).sum() / n.sum()), rel=1e-6
    )
    assert step[Step.SAMPLER_LOGP_ABS_DIFF_MAX] == pytest.approx(
        float(ref["sampler_logp_abs_diff_max"].max()), rel=1e-6
    )
    assert step[Step.KL_REF_MEAN] == pytest.approx(
        float((ref["kl_ref"] * n).sum() / n.sum()), rel=1e-6
    )
    assert (step[Step.ROLLOUT], step[Step.POLICY_LAG]) == (4, 1)


def test_default_advantages_are_group_advantages_and_loss_output_is_read(make_batch):
    """Omitted advantages are group_advantages(rewards); a LossOutput's loss becomes the loss column."""
    b = make_batch(3, 4, 10, seed=5)
    out = gspo_loss(b["logprobs"], b["old_logprobs"], torch.ones(12), b["mask"])
    row, s = step_diagnostics(**b, loss=out)
    expected = group_advantages(b["rewards"]).flatten().numpy()
    np.testing.assert_allclose(s[Seq.ADVANTAGE], expected, rtol=1e-6)
    assert row[Step.LOSS] == pytest.approx(out.loss.item())


def test_parquet_layout_parts_compaction_and_run_json(tmp_path, make_batch):
    """23 steps, 5 per part: parts while running, one zstd compacted file per table at close."""
    cfg = {"lr": 1e-6, "group_size": 4}
    rec = RunRecorder(root=tmp_path, name="layout", algorithm="grpo", config=cfg, steps_per_file=5)
    expected = []
    for step in range(23):
        b = make_batch(seed=step, truncated=True)
        extra = {"lr": 1e-6} if step < 10 else {"lr": 1e-6, "grad_norm": torch.tensor(0.5 + step)}
        rec.log_step(step, **b, extra=extra)
        expected.append(step_diagnostics(**b, extra=extra, step=step)[0])
    assert rec.flush(timeout=30)
    parts = sorted(os.listdir(os.path.join(rec.run_dir, "steps")))
    assert len(parts) == 5 and parts[0].startswith("part-000000000-000000004-r0000")
    info = read_run_info(rec.run_dir)
    assert info.status == "running" and info.last_step == 22 and info.group_size == 4
    rec.close()

    info = read_run_info(rec.run_dir)
    assert info.status == "finished" and info.ended_at >= info.created_at
    assert info.config == cfg and info.algorithm == "grpo" and info.faults == []
    assert (info.seq_eps_low, info.seq_eps_high) == (3e-4, 4e-4)
    assert (info.token_eps_low, info.token_eps_high) == (0.2, 0.2)
    assert info.versions["torch"] == torch.__version__
    for table in ("steps", "sequences"):
        files = os.listdir(os.path.join(rec.run_dir, table))
        assert len(files) == 1 and files[0].startswith("compacted-"), files
        meta = pq.ParquetFile(os.path.join(rec.run_dir, table, files[0])).metadata
        assert meta.row_group(0).column(0).compression == "ZSTD"
        assert meta.metadata[b"gspo_dash.schema_version"] == b"5"
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps"))
    assert list(steps.columns) == [*STEP_COLUMN_NAMES, "lr", "grad_norm"]
    assert set(REQUIRED_STEP) <= set(steps.columns)
    assert steps[Step.STEP].tolist() == list(range(23))
    assert (steps[Step.SCHEMA_VERSION] == 5).all()
    # schema v2's lag and sampler columns: null (not 0) when the loop did not give them
    assert steps[[Step.ROLLOUT, Step.POLICY_LAG, Step.SAMPLER_KL_MEAN]].isna().all().all()
    assert steps["grad_norm"].iloc[:10].isna().all()  # NaN where not given
    assert steps["grad_norm"].iloc[10:].tolist() == [0.5 + s for s in range(10, 23)]
    for col in (Step.SEQ_LOG_RATIO_MEAN, Step.TOKEN_CLIP_FRACTION, Step.KL_OLD_MEAN):
        np.testing.assert_allclose(steps[col], [e[col] for e in expected], rtol=1e-12)
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    assert list(seqs.columns) == list(SEQUENCE_COLUMN_NAMES)
    assert set(REQUIRED_SEQ) <= set(seqs.columns)
    assert len(seqs) == 23 * 16 and (seqs[Seq.RANK] == 0).all()
    assert not [
        f
        for d in ("steps", "sequences")
        for f in os.listdir(os.path.join(rec.run_dir, d))
        if f.startswith(".")
    ]


def test_periodic_flush_without_explicit_flush(tmp_path, make_batch):
    """Parts and the run.json heartbeat appear within the flush interval with no flush() call."""
    import time

    rec = RunRecorder(root=tmp_path, name="hb", flush_interval_s=0.2, steps_per_file=1000)
    rec.log_step(0, **make_batch())
    t0 = read_run_info(rec.run_dir).updated_at
    deadline = time.time() + 10
    while time.time() < deadline and not os.listdir(os.path.join(rec.run_dir, "steps")):
        time.sleep(0.05)
    assert os.listdir(os.path.join(rec.run_dir, "steps"))
    beat = time.time() + 0.5  # heartbeat keeps beating: a later one within 2.5 intervals
    while time.time() < beat and read_run_info(rec.run_dir).updated_at <= t0:
        time.sleep(0.02)
    assert read_run_info(rec.run_dir).updated_at > t0
    rec.close()


def test_tokens_and_completions(tmp_path, make_batch):
    """token_samples=3 stores 3 spread sequences' masked token log-ratios (the baseline) and the
    step's culprits, each row's values those of its sequence; completions are kept."""
    b = make_batch(2, 4, 9, seed=11, dtype=F64)
    texts = [f"answer {i}" for i in range(8)]
    with RunRecorder(root=tmp_path, name="tok", token_samples=3) as rec:
        rec.log_step(0, **b, completions=texts)
    tok = pd.read_parquet(os.path.join(rec.run_dir, "tokens"))
    assert list(tok.columns) == list(TOKEN_COLUMN_NAMES)
    tok = tok.sort_values([Tok.GROUP, Tok.SAMPLE])
    keys = zip(tok[Tok.GROUP], tok[Tok.SAMPLE], tok[Tok.REASON], strict=True)
    rows = {4 * g + s: r for g, s, r in keys}
    # the baseline: indices 0, 4, 7 spread over B = 8 (kept under another reason if a culprit)
    assert {0, 4, 7} <= set(rows)
    d_bt = torch.where(b["mask"], b["logprobs"] - b["old_logprobs"], 0.0)
    log_s = d_bt.sum(1) / b["mask"].sum(1)
    tok_max = d_bt.abs().amax(1)
    # the culprits: the two largest |log s| and the two largest token |log r| (no NaN here)
    culprits = set(log_s.abs().argsort()[-2:].tolist()) | set(tok_max.argsort()[-2:].tolist())
    assert set(rows) == {0, 4, 7} | culprits
    for i in log_s.abs().argsort()[-2:].tolist():
        assert rows[i] == "max_abs_log_s"
    assert [bi for bi, r in rows.items() if r == "baseline"] == [
        bi for bi in (0, 4, 7) if bi not in culprits
    ]
    adv = group_advantages(b["rewards"]).flatten()
    for (_, r), bi in zip(tok.iterrows(), sorted(rows), strict=True):
        m = b["mask"][bi]
        want = (b["logprobs"][bi] - b["old_logprobs"][bi])[m].float().numpy()
        np.testing.assert_allclose(r[Tok.TOKEN_LOG_RATIOS], want, rtol=1e-6)
        np.testing.assert_allclose(r[Tok.ADVANTAGES], np.full(int(m.sum()), adv[bi]), rtol=1e-6)
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    assert seqs[Seq.COMPLETION].tolist() == texts
    assert seqs[Seq.PROMPT].isna().all() and tok[Tok.TOKENS].isna().all()  # not given: null


def test_prompts_and_token_texts_are_stored_apart(tmp_path, make_batch):
    """prompts (one per group) land on each of the group's rows, apart from the completion; a
    kept sequence's token texts are its masked positions' texts, aligned with its log-ratios."""
    b = make_batch(2, 4, 9, seed=11, dtype=F64)
    prompts = ["sort cab =", "rev ab ="]
    token_texts = [[f"t{i}.{t}" for t in range(9)] for i in range(8)]
    token_texts[3] = None  # a row without texts
    with RunRecorder(root=tmp_path, name="tok", token_samples=8) as rec:
        rec.log_step(0, **b, prompts=prompts, token_texts=token_texts)
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    seqs = seqs.sort_values([Seq.GROUP, Seq.SAMPLE])
    assert seqs[Seq.PROMPT].tolist() == ["sort cab ="] * 4 + ["rev ab ="] * 4
    assert seqs[Seq.COMPLETION].isna().all()
    tok = pd.read_parquet(os.path.join(rec.run_dir, "tokens"))
    assert len(tok) == 8  # every sequence kept (token_samples = B)
    for _, r in tok.iterrows():
        i = 4 * r[Tok.GROUP] + r[Tok.SAMPLE]
        m = b["mask"][i].tolist()
        if i == 3:
            assert r[Tok.TOKENS] is None
            continue
        want = [f"t{i}.{t}" for t in range(9) if m[t]]
        assert list(r[Tok.TOKENS]) == want and len(want) == len(r[Tok.TOKEN_LOG_RATIOS])


def test_token_sample_keeps_the_culprits(tmp_path):
    """A hand-made step: the sequences that explain it are kept with their reason, once each,
    beside the spread baseline; an on-policy step (every ratio exactly 1) keeps the baseline only.

    B = 8 (P = 2, G = 4), T = 3, log r = 0 everywhere but: row 2 d = [1, -1, 0] (log s = 0, token
    |log r| = 1); row 5 d = [.3, .3, .3] (log s = .3); row 6 d = [.1, 0, 0] (log s = .0333,
    token .1); row 3 a NaN log-prob at t = 1 (inside its mask); row 1 a NaN under its padding.
    Culprits (top 2 per reason, a NaN score counting as the largest): nonfinite {3} (the other
    counts are 0: dropped); max_abs_log_s {3 (taken), 5}; max_abs_token_log_ratio {3 (taken), 2}.
    Baseline (token_samples = 3): rows 0, 4, 7."""
    old = torch.full((8, 3), -1.0, dtype=F64)
    logp = old.clone()
    logp[2] += torch.tensor([1.0, -1.0, 0.0], dtype=F64)
    logp[5] += 0.3
    logp[6, 0] += 0.1
    logp[3, 1] = NAN
    logp[1, 2] = NAN
    mask = torch.ones(8, 3, dtype=torch.bool)
    mask[1, 2] = False
    rewards = torch.tensor([[1.0, 0, 0, 1], [0, 1, 1, 0]])
    with RunRecorder(root=tmp_path, name="culprits", token_samples=3) as rec:
        rec.log_step(0, rewards=rewards, logprobs=logp, old_logprobs=old, mask=mask)
        rec.log_step(1, rewards=rewards, logprobs=old, old_logprobs=old, mask=mask)
    tok = pd.read_parquet(os.path.join(rec.run_dir, "tokens")).sort_values(
        [Tok.STEP, Tok.GROUP, Tok.SAMPLE]
    )
    got = {
        (st, 4 * g + s): r
        for st, g, s, r in zip(
            tok[Tok.STEP], tok[Tok.GROUP], tok[Tok.SAMPLE], tok[Tok.REASON], strict=True
        )
    }
    assert got == {
        (0, 0): "baseline",
        (0, 2): "max_abs_token_log_ratio",
        (0, 3): "nonfinite",
        (0, 4): "baseline",
        (0, 5): "max_abs_log_s",
        (0, 7): "baseline",
        (1, 0): "baseline",
        (1, 4): "baseline",
        (1, 7): "baseline",
    }
    row3 = tok[(tok[Tok.STEP] == 0) & (tok[Tok.GROUP] == 0) & (tok[Tok.SAMPLE] == 3)].iloc[0]
    assert row3[Tok.TOKEN_LOG_RATIOS][0] == 0.0 and math.isnan(row3[Tok.TOKEN_LOG_RATIOS][1])
    row2 = tok[(tok[Tok.STEP] == 0) & (tok[Tok.GROUP] == 0) & (tok[Tok.SAMPLE] == 2)].iloc[0]
    assert row2[Tok.TOKEN_LOG_RATIOS].tolist() == [1.0, -1.0, 0.0]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"rewards": torch.zeros(3, 4)}, r"rewards has shape \(3, 4\) but logprobs has B = 16"),
        (
            {"mask": torch.ones(16, 5)},
            r"mask has shape \(16, 5\) but logprobs has shape \(16, 12\)",
        ),
        ({"old_logprobs": torch.zeros(16)}, r"old_logprobs must have shape \(B, T\)"),
        ({"advantages": torch.zeros(15)}, r"advantages has shape \(15,\)"),
        ({"truncated": torch.zeros(4, dtype=torch.bool)}, r"truncated has shape \(4,\)"),
        ({"entropy": torch.zeros(16, 3)}, r"entropy has shape \(16, 3\)"),
        (
            {"extra": {"g": torch.ones(3)}},
            r"extra\['g'\] must be a scalar, got a tensor of shape \(3,\)",
        ),
        ({"extra": {"loss": 1.0}}, r"'loss' is a built-in step column"),
        ({"completions": ["a"]}, r"completions has 1 entries but there are B = 16"),
        ({"prompts": ["a"] * 16}, r"prompts has 16 entries but there are P = 4"),
        ({"prompts": [1, 2, 3, 4]}, r"prompts\[0\] must be a str or None, got int"),
        ({"token_texts": [["a"] * 12] * 15}, r"token_texts must be a list of B = 16 rows"),
        ({"token_texts": [["a"] * 11] * 16}, r"token_texts\[0\] has 11 entries but there are T"),
        ({"token_texts": ["abc"] * 16}, r"token_texts\[0\] must be a list of T = 12 strings"),
        ({"loss": torch.ones(2)}, r"loss must be a scalar"),
    ],
)
def test_bad_input_raises_before_anything_is_written(tmp_path, make_batch, change, message):
    """Each malformed argument raises a ValueError naming it and its shape; no row is written."""
    with RunRecorder(root=tmp_path, name="bad") as rec:
        with pytest.raises(ValueError, match=message):
            rec.log_step(0, **{**make_batch(), **change})
        assert rec.flush(timeout=10)
        assert os.listdir(os.path.join(rec.run_dir, "sequences")) == []


def test_empty_mask_row_raises(tmp_path, make_batch):
    """A sequence whose mask marks no token is rejected at log_step, naming the row."""
    b = make_batch()
    b["mask"][5] = False
    with RunRecorder(root=tmp_path, name="empty") as rec:
        with pytest.raises(ValueError, match=r"marks no token in row\(s\) \[5\]"):
            rec.log_step(0, **b)
    assert read_run_info(rec.run_dir).last_step is None


def test_nonfinite_inside_mask_counted_writer_survives(tmp_path, make_batch):
    """NaN/inf inside the mask land in nonfinite_count; padding garbage does not; the run finishes."""
    b = make_batch(2, 2, 6, seed=2)
    b["logprobs"][0, 0] = float("nan")  # inside the mask (column 0 is always marked)
    b["old_logprobs"][3, 0] = float("inf")
    pad = (~b["mask"]).nonzero()[0]
    b["logprobs"][pad[0], pad[1]] = float("nan")  # under the padding: ignored
    with RunRecorder(root=tmp_path, name="nan") as rec:
        rec.log_step(0, **b)
        rec.log_step(1, **make_batch(2, 2, 6, seed=3))
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps"))
    assert steps[Step.NONFINITE_COUNT].tolist() == [2, 0]
    assert math.isnan(steps[Step.SEQ_LOG_RATIO_MEAN].iloc[0])
    assert np.isfinite(steps[Step.SEQ_LOG_RATIO_MEAN].iloc[1])
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    assert seqs[seqs[Seq.STEP] == 0][Seq.NONFINITE_COUNT].tolist() == [1, 0, 0, 1]
    info = read_run_info(rec.run_dir)
    assert info.status == "finished" and info.faults == []


def test_unknown_clip_fractions_are_nan_and_null_on_disk_never_zero(tmp_path):
    """Step 0: every log-prob NaN. Step 1: the second of three sequences all NaN (the hand case
    of ``test_diagnostics.test_a_nan_sequence_among_finite_ones_is_nan_alone``). What the step
    and sequence tables hold, read back from Parquet: a clip fraction of an unknown ratio is NaN
    (its flag ``seq_clipped`` null), never 0; a step mean over a NaN sequence is NaN, as
    ``seq_log_ratio_mean`` always was; the counts and the known sequences keep their numbers."""
    nan, l15, l05 = NAN, math.log(1.5), math.log(0.5)
    step1 = torch.tensor([[l15, 0.0], [nan, nan], [l05, 7.0]]) - 2  # log-probs <= 0, old -2
    common = dict(rewards=torch.tensor([[1.0, 1.0, 0.0]]), advantages=torch.tensor([1, 1, -1.0]))
    mask = torch.tensor([[1, 1], [1, 1], [1, 0]], dtype=torch.bool)
    with RunRecorder(root=tmp_path, name="nan", findings_every=0) as rec:
        rec.log_step(
            0, logprobs=torch.full((3, 2), nan), old_logprobs=torch.zeros(3, 2), mask=mask, **common
        )
        old = torch.full((3, 2), -2.0)
        rec.log_step(1, logprobs=step1, old_logprobs=old, mask=mask, **common)
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps")).set_index(Step.STEP)
    clip_columns = [
        Step.SEQ_CLIP_FRACTION,
        Step.SEQ_CLIP_LOW_FRACTION,
        Step.SEQ_CLIP_HIGH_FRACTION,
        Step.TOKEN_CLIP_FRACTION,
        Step.TOKEN_CLIP_LOW_FRACTION,
        Step.TOKEN_CLIP_HIGH_FRACTION,
    ]
    for step in (0, 1):
        for column in [*clip_columns, Step.SEQ_LOG_RATIO_MEAN, Step.KL_OLD_MEAN]:
            assert math.isnan(steps.loc[step, column]), (step, column)
    assert steps[Step.NONFINITE_COUNT].tolist() == [5, 2]  # 2 + 2 + 1 masked, then row 1's 2
    assert steps[Step.NUM_TOKENS].tolist() == [5, 5]
    assert steps.loc[1, Step.ADVANTAGE_MEAN] == pytest.approx(1 / 3)  # (1 + 1 - 1) / 3
    seqs = pd.read_parquet(os.path.join(rec.run_dir, "sequences"))
    s0, s1 = (seqs[seqs[Seq.STEP] == k].sort_values(Seq.SAMPLE) for k in (0, 1))
    assert s0[Seq.SEQ_CLIPPED].isna().all()  # null, not False
    assert s0[Seq.TOKEN_CLIP_FRACTION].isna().all() and s0[Seq.SEQ_CLIP_LOW].isna().all()
    assert s1[Seq.SEQ_CLIPPED].tolist() == [True, None, True]
    np.testing.assert_allclose(s1[Seq.TOKEN_CLIP_FRACTION], [0.5, nan, 1.0])
    np.testing.assert_allclose(s1[Seq.SEQ_CLIP_HIGH], [1.0, nan, 0.0])
    np.testing.assert_allclose(s1[Seq.SEQ_CLIP_LOW], [0.0, nan, 1.0])
    np.testing.assert_allclose(s1[Seq.SEQ_LOG_RATIO], [l15 / 2, nan, l05], rtol=1e-6)
    assert s1[Seq.NONFINITE_COUNT].tolist() == [0, 2, 0]


def test_exception_in_with_block_marks_failed(tmp_path, make_batch):
    """Leaving the with-block on an exception records status 'failed' and keeps the logged steps."""
    with pytest.raises(RuntimeError, match="boom"):
        with RunRecorder(root=tmp_path, name="fail") as rec:
            rec.log_step(0, **make_batch())
            raise RuntimeError("boom")
    assert read_run_info(rec.run_dir).status == "failed"
    assert len(pd.read_parquet(os.path.join(rec.run_dir, "steps"))) == 1
    with pytest.raises(RuntimeError, match="closed"):
        rec.log_step(1, **make_batch())


def test_resume_appends_and_finishes(tmp_path, make_batch):
    """Reopening a run id appends new steps to the same folder, running again, then finished."""
    with RunRecorder(root=tmp_path, name="res", algorithm="gspo", steps_per_file=3) as rec:
        for s in range(5):
            rec.log_step(s, **make_batch(seed=s))
    created = read_run_info(rec.run_dir).created_at
    rec2 = RunRecorder(root=tmp_path, run_id=rec.run_id, algorithm="gspo", steps_per_file=3)
    assert rec2.run_dir == rec.run_dir and rec2.resumed
    info = read_run_info(rec.run_dir)
    assert info.status == "running" and info.ended_at is None and info.created_at == created
    for s in range(5, 9):
        rec2.log_step(s, **make_batch(seed=s))
    rec2.close()
    info = read_run_info(rec.run_dir)
    assert info.status == "finished" and info.name == "res" and len(info.other["resumed_at"]) == 1
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps"))
    assert steps[Step.STEP].tolist() == list(range(9))
    assert len(pd.read_parquet(os.path.join(rec.run_dir, "sequences"))) == 9 * 16
    with pytest.raises(ValueError, match="cannot resume it as 'grpo'"):
        RunRecorder(root=tmp_path, run_id=rec.run_id, algorithm="grpo")


def test_resume_states_the_algorithm_a_run_did_not(tmp_path, make_batch):
    """A run recorded without an algorithm ("unknown") takes the one a resume states; a resume
    that states none keeps the run's."""
    with RunRecorder(root=tmp_path, name="u") as rec:
        rec.log_step(0, **make_batch(seed=0))
    assert read_run_info(rec.run_dir).algorithm == "unknown"
    with RunRecorder(root=tmp_path, run_id=rec.run_id, algorithm="gspo") as rec2:
        rec2.log_step(1, **make_batch(seed=1))
    assert read_run_info(rec.run_dir).algorithm == "gspo"
    with RunRecorder(root=tmp_path, run_id=rec.run_id) as rec3:
        rec3.log_step(2, **make_batch(seed=2))
    assert read_run_info(rec.run_dir).algorithm == "gspo"


def test_run_json_is_valid_json_with_schema_version(tmp_path, make_batch):
    """run.json holds the required fields, JSON-clean (no NaN), with schema_version."""
    with RunRecorder(
        root=tmp_path,
        name="j",
        algorithm="gspo",
        seq_eps=(1e-3, 2e-3),
        token_eps=(0.2, 0.28),
        reduction="seq_mean_token_mean",
        config={"beta": float("nan")},
    ) as rec:
        rec.log_step(0, **make_batch())
    with open(os.path.join(rec.run_dir, "run.json")) as f:
        data = json.load(f)
    for key in (
        "run_id",
        "name",
        "algorithm",
        "seq_eps_low",
        "seq_eps_high",
        "token_eps_low",
        "token_eps_high",
        "reduction",
        "group_size",
        "config",
        "versions",
        "created_at",
        "ended_at",
        "status",
        "schema_version",
    ):
        assert key in data, key
    assert data["seq_eps_high"] == 2e-3 and data["token_eps_high"] == 0.28
    assert data["reduction"] == "seq_mean_token_mean" and data["config"] == {"beta": None}
    # the recorder's token eps are used: step_diagnostics with the same eps agrees
    steps = pd.read_parquet(os.path.join(rec.run_dir, "steps"))
    row, _ = step_diagnostics(**make_batch(), seq_eps=(1e-3, 2e-3), token_eps=(0.2, 0.28))
    assert steps[Step.SEQ_CLIP_FRACTION].iloc[0] == row[Step.SEQ_CLIP_FRACTION]


def test_sinks_follow_the_protocol(tmp_path, make_batch):
    """ParquetSink, MlflowSink and NullSink satisfy the Sink protocol; extra sinks see every step."""
    from training_hooks import MlflowSink, NullSink, ParquetSink, Sink

    assert isinstance(ParquetSink(str(tmp_path)), Sink)
    assert isinstance(MlflowSink("sqlite:///x.db"), Sink) and isinstance(NullSink(), Sink)

    class Counting(NullSink):
        name = "counting"
        steps: list = []

        def write(self, record):
            self.steps.append((record.step, record.row[Step.NUM_SEQUENCES]))

    with RunRecorder(root=tmp_path, name="proto", sinks=[NullSink(), Counting()]) as rec:
        for s in range(3):
            rec.log_step(s, **make_batch(seed=s))
    assert Counting.steps == [(0, 16), (1, 16), (2, 16)]
    assert read_run_info(rec.run_dir).faults == []
