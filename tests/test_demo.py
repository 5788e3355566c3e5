"""The demo: its task checker by hand, its sampler's EOS/truncation masking, and a short end-to-end
run through the real RunRecorder into Parquet and a real MLflow SQLite store."""

from __future__ import annotations

import glob
import math
import os
import random
import re

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from training_hooks import schema, tables
from training_hooks.demo import (
    DemoConfig,
    ProgressLine,
    RunResult,
    Session,
    StepStats,
    build,
    main,
    parse_args,
    results_table,
    run,
    train,
)
from training_hooks.demo.config import DEMO_GSPO_EPS
from training_hooks.demo.policy import Policy, action_logprobs, sample
from training_hooks.demo.report import header
from training_hooks.demo.task import Prompt, Task, target
from training_hooks.schema import Step

TASK = Task("abc", ("copy", "rev", "sort", "dup"), 1, 4)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The demo's tiny matrices run fastest on one thread (a second one spins on a shared CPU)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


A, B_, C = 1, 2, 3  # action ids of a, b, c; <eos> is 0
EOS = 0


# ---------------------------------------------------------------- the task


def test_targets_by_hand():
    """copy/rev/sort/dup of 'bca' are 'bca', 'acb', 'abc', 'bbccaa'."""
    assert target("copy", "bca") == "bca"
    assert target("rev", "bca") == "acb"
    assert target("sort", "bca") == "abc"
    assert target("dup", "bca") == "bbccaa"
    with pytest.raises(ValueError, match="op must be one of"):
        target("shout", "abc")


@pytest.mark.parametrize(
    ("op", "symbols", "actions", "truncated", "reward"),
    [
        ("rev", "bca", [A, C, B_, EOS], False, 1.0),  # acb<eos>: right
        ("rev", "bca", [A, C, B_, EOS, C, C], False, 1.0),  # after <eos> is ignored
        ("rev", "bca", [B_, C, A, EOS], False, 0.0),  # that is copy, not rev
        ("rev", "bca", [A, C, B_], False, 0.0),  # right symbols but no <eos>
        ("rev", "bca", [A, C, B_, B_, B_, B_], True, 0.0),  # truncated
        ("rev", "bca", [A, C, EOS], False, 0.0),  # too short
        ("rev", "bca", [A, C, B_, A, EOS], False, 0.0),  # too long
        ("sort", "cab", [A, B_, C, EOS], False, 1.0),
        ("dup", "ab", [A, A, B_, B_, EOS], False, 1.0),
        ("dup", "ab", [A, B_, EOS], False, 0.0),
        ("copy", "c", [C, EOS], False, 1.0),
        ("copy", "c", [EOS], False, 0.0),  # empty answer
    ],
)
def test_checker_hand_cases(op, symbols, actions, truncated, reward):
    """The checker accepts exactly target + <eos>, untruncated."""
    assert TASK.check(Prompt(op, symbols), actions, truncated) == reward


def test_checker_rejects_non_actions():
    """A prompt-only token id in a completion is a ValueError naming the actions."""
    with pytest.raises(ValueError, match="actions"):
        TASK.check(Prompt("copy", "a"), [TASK.PAD, EOS], False)


def test_vocabulary_and_prompt_layout():
    """Actions come first (<eos>=0, a=1, b=2, c=3); prompts are left-padded to max_len + 3."""
    assert (TASK.EOS, TASK.sym_id, TASK.num_actions) == (0, {"a": 1, "b": 2, "c": 3}, 4)
    assert TASK.prompt_len == 7
    ids = TASK.prompt_ids(Prompt("rev", "ba"))
    assert ids == [TASK.PAD, TASK.PAD, TASK.BOS, TASK.op_id["rev"], B_, A, TASK.SEP]
    assert TASK.vocab_size == max(TASK.op_id.values()) + 1
    assert TASK.longest_answer == 8  # dup of 4 symbols
    assert TASK.decode([B_, A, EOS, C], False) == "ba<eos>"
    assert TASK.decode([B_, A, C], True) == "bac..."


def test_teacher_demonstrations():
    """Without noise the teacher writes answer + <eos>; rambling demos are T symbols, no <eos>."""
    rng = random.Random(0)
    assert TASK.demonstration(Prompt("rev", "abc"), rng, 9) == [C, B_, A, EOS]
    assert TASK.demonstration(Prompt("dup", "abcc"), rng, 6) == [A, A, B_, B_, C, C]  # cut at T
    demos = [TASK.demonstration(Prompt("copy", "ab"), rng, 5, noise=1.0) for _ in range(300)]
    assert all(d != [A, B_, EOS] for d in demos)  # noise=1 always errs
    rambling = [d for d in demos if EOS not in d]
    assert rambling and all(len(d) == 5 for d in rambling)
    assert 60 < len(rambling) < 140  # one error kind in three


def test_task_argument_checks():
    """Bad task arguments raise ValueError naming them."""
    with pytest.raises(ValueError, match="alphabet"):
        Task("aab")
    with pytest.raises(ValueError, match="ops"):
        Task(ops=("copy", "shout"))
    with pytest.raises(ValueError, match="min_len"):
        Task(min_len=3, max_len=2)


# ---------------------------------------------------------------- the sampler


class Scripted(nn.Module):
    """A fake policy: row b emits symbol 'a' until completion position stop[b], then <eos>."""

    def __init__(self, prompt_len: int, stop: list[int]):
        super().__init__()
        self.prompt_len = prompt_len
        self.stop = torch.tensor(stop)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        B, L = ids.shape
        t = torch.arange(L)[None, :] - self.prompt_len + 1  # completion position scored here
        logits = torch.full((B, L, 4), -30.0)
        logits[..., A] = 0.0
        eos_now = t >= self.stop[:, None]
        logits[..., EOS] = torch.where(eos_now, 30.0, -30.0)
        return logits

    def forward_cached(self, ids, past=None):
        """The sampler's incremental interface; the "cache" is simply the context so far."""
        full = ids if past is None else torch.cat([past, ids], dim=1)
        return self.forward(full)[:, -ids.shape[1] :], full


def test_sample_masks_after_eos_and_flags_truncation():
    """Stops at 0, 2 and 3 give lengths 1, 3, 4 with <eos> masked in; a stop beyond T truncates."""
    T = 4
    prompts = TASK.encode_prompts([Prompt("copy", "ab")] * 4)
    pol = Scripted(TASK.prompt_len, [0, 2, 3, 99])
    ro = sample(
        pol,
        prompts,
        max_new_tokens=T,
        eos_id=EOS,
        pad_id=TASK.PAD,
        generator=torch.Generator().manual_seed(0),
    )
    assert ro.mask.sum(1).tolist() == [1, 3, 4, 4]
    assert ro.truncated.tolist() == [False, False, False, True]
    assert ro.actions.tolist() == [
        [EOS, EOS, EOS, EOS],
        [A, A, EOS, EOS],
        [A, A, A, EOS],
        [A, A, A, A],
    ]
    # after <eos> the input ids are padding, and the prompt is untouched
    comp = ro.ids[:, TASK.prompt_len :]
    assert comp[0].tolist() == [EOS, TASK.PAD, TASK.PAD, TASK.PAD]
    assert comp[1].tolist() == [A, A, EOS, TASK.PAD]
    assert torch.equal(ro.ids[:, : TASK.prompt_len], prompts)
    # padded positions hold log-prob 0; sampled ones log(1 - ~e^-60) ~ 0 too, but finite
    assert (ro.sample_logprobs[~ro.mask] == 0).all()
    assert torch.isfinite(ro.sample_logprobs).all()
    # checked as answers to "copy aa": only the 2-symbol completion aa<eos> is right
    rewards = [
        TASK.check(Prompt("copy", "aa"), a, t)
        for a, t in zip(ro.actions.tolist(), ro.truncated.tolist(), strict=True)
    ]
    assert rewards == [0.0, 1.0, 0.0, 0.0]


def test_sampled_logprobs_equal_one_forward():
    """Two routes to log pi_old: the sampler's per-token log-probs equal one full forward's."""
    torch.manual_seed(0)
    pol = Policy(TASK.vocab_size, TASK.num_actions, TASK.prompt_len + 6).eval()
    prompts = TASK.encode_prompts(TASK.sample_prompts(16, random.Random(0)))
    ro = sample(
        pol,
        prompts,
        max_new_tokens=6,
        eos_id=EOS,
        pad_id=TASK.PAD,
        generator=torch.Generator().manual_seed(1),
    )
    with torch.no_grad():
        lp, ent = action_logprobs(pol, ro.ids, ro.actions, with_entropy=True)
    torch.testing.assert_close(torch.where(ro.mask, lp, 0.0), ro.sample_logprobs, rtol=0, atol=1e-5)
    # a near-uniform initial policy over 4 actions has entropy close to log 4
    assert ent.shape == (16, 6)
    assert (ent - math.log(4)).abs().max() < 0.05


def test_policy_size_and_shared_initialisation():
    """The default policy has a few hundred thousand parameters; GRPO and GSPO start identical."""
    kw = dict(warmup_steps=3, warmup_batch=8)
    _, p1, ref1 = build(DemoConfig(algorithm="grpo", **kw))
    _, p2, _ = build(DemoConfig(algorithm="gspo", **kw))
    n = sum(p.numel() for p in p1.parameters())
    assert 150_000 < n < 500_000
    for a, b in zip(p1.state_dict().values(), p2.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    for a, b in zip(p1.state_dict().values(), ref1.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert not any(p.requires_grad for p in ref1.parameters())


def test_config_checks():
    """Bad configs raise ValueError naming the field; each algorithm's default clip range, and
    whose it is (GRPO the paper's, GSPO the demo's)."""
    with pytest.raises(ValueError, match="algorithm"):
        DemoConfig(algorithm="ppo")
    with pytest.raises(ValueError, match="group_size"):
        DemoConfig(group_size=1)
    with pytest.raises(ValueError, match="minibatches"):
        DemoConfig(prompts_per_step=6, minibatches=4)
    gspo, grpo = DemoConfig(algorithm="gspo"), DemoConfig(algorithm="grpo")
    assert gspo.eps == DEMO_GSPO_EPS == (0.02, 0.03) and gspo.eps_source == "demo"
    assert grpo.eps == (0.2, 0.2) and grpo.eps_source == "paper"
    assert DemoConfig(algorithm="gspo", eps_low=3e-4, eps_high=4e-4).eps_source == "paper"
    assert DemoConfig(algorithm="gspo", eps_low=0.1).eps_source == "option"


def test_off_policy_minibatches_move_the_ratio():
    """Only the first optimizer step of a rollout is on-policy: later ones clip in GSPO's unit."""
    cfg = DemoConfig(
        algorithm="gspo", steps=2, prompts_per_step=8, group_size=4, minibatches=4, warmup_steps=3
    )
    res = train(cfg)
    assert len(res.stats) == 8 and len(res.rollout_rewards) == 2
    assert res.stats[0].seq_clip_fraction == 0.0  # ratio exactly 1
    assert res.stats[4].seq_clip_fraction == 0.0
    assert max(s.seq_clip_fraction for s in res.stats) > 0.0


# ---------------------------------------------------------------- faults (--inject)


def test_inject_parsing_and_when_a_fault_acts():
    """NAME@STEP for the one-step faults (required), NAME[@STEP] "from STEP on" for the others;
    bad names and steps are ValueErrors naming --inject's field and the valid names."""
    from training_hooks.demo.faults import FAULTS, Faults

    f = Faults.parse(["lr-spike@4", "sampler-noise@6", "length-collapse"])
    assert [f.on("lr-spike", s) for s in (3, 4, 5)] == [False, True, False]
    assert [f.on("sampler-noise", s) for s in (5, 6, 40)] == [False, True, True]
    assert f.on("length-collapse", 0) and not f.on("all-same-reward", 10)
    for bad, message in (
        ("lr-spike", "lr-spike needs a step, lr-spike@STEP"),
        ("nan-logprobs@x", "STEP must be an int"),
        ("stale-old-logprobs@-2", "STEP must be >= 0"),
        ("dropout@3", "unknown fault 'dropout'; valid: " + ", ".join(FAULTS)),
    ):
        with pytest.raises(ValueError, match="^inject: .*" + re.escape(message)):
            DemoConfig(inject=(bad,))
    cfg = DemoConfig(inject=("entropy-collapse", "nan-logprobs@7"))
    assert cfg.inject == ("entropy-collapse@0", "nan-logprobs@7")
    assert cfg.stored()["inject"] == "entropy-collapse@0,nan-logprobs@7"


def test_fault_transforms_by_hand():
    """Each fault's transform on tiny tensors: the lr factor, the NaN's position, the reshaped
    rewards, the logit scale per rollout, the sampler's noise."""
    from training_hooks.demo import faults as F

    f = F.Faults.parse(
        ["lr-spike@2", "nan-logprobs@1", "length-collapse", "entropy-collapse@3", "sampler-noise@4"]
    )
    assert [f.lr_factor(s) for s in (1, 2, 3)] == [1.0, F.LR_SPIKE_FACTOR, 1.0]
    # NaN at row 0's first masked token (t = 1), the graph kept
    logp = torch.zeros(2, 3, requires_grad=True)
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]], dtype=torch.bool)
    out = f.nan_logprobs(1, logp, mask)
    assert out.isnan().tolist() == [[False, True, False], [False, False, False]]
    assert out.requires_grad and f.nan_logprobs(2, logp, mask) is logp
    # length-collapse: r - 1.0 (length - 1): lengths [[1, 3], [5, 2]], rewards [[0, 1], [1, 0]]
    # -> [[0 - 0, 1 - 2], [1 - 4, 0 - 1]]
    assert F.LENGTH_PENALTY == 1.0
    rewards = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    lengths = torch.tensor([[1.0, 3.0], [5.0, 2.0]])
    assert f.rewards(0, rewards, lengths).tolist() == [[0.0, -1.0], [-3.0, -1.0]]
    same = F.Faults.parse(["all-same-reward@2"])
    assert same.rewards(1, rewards, lengths) is rewards
    assert same.rewards(2, rewards, lengths).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    # entropy-collapse@3 with 2 optimizer steps per rollout: the rollouts start at 0, 2, 4, 6;
    # the first at or after step 3 is step 4 (scale 1), then 1.15 at step 6, 1.3 at step 8
    scales = [f.logit_scale(s, 2) for s in (2, 4, 6, 8)]
    assert scales == pytest.approx([1.0, 1.0, 1.15, 1.3])
    # sampler-noise: none before step 4; then logits + N(0, 0.6^2) from its own generator
    assert f.sampler_logits(2, torch.Generator()) is None
    noisy = f.sampler_logits(4, torch.Generator().manual_seed(0))
    x = torch.zeros(2000, 4)
    d = noisy(x) - x
    assert abs(d.std().item() - F.SAMPLER_NOISE_STD) < 0.03 and abs(d.mean().item()) < 0.03


class _Capture:
    """A recorder stand-in: keeps each log_step's arguments (tensors cloned)."""

    def __init__(self):
        self.steps = []

    def log_step(self, step, **kw):
        kw = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        self.steps.append((step, kw))


def test_faults_in_the_loop():
    """One short GRPO run with four faults: step 3 holds one NaN log-prob inside its mask, its
    gradient norm is NaN, its update is skipped and the weights stay finite; from step 4 the
    old log-probs are the current policy's (ratios exactly 1 at lag 1) while policy_lag still
    alternates 0, 1; from step 6 the sampler's log-probs differ from the trainer's; the lr of
    step 6 is 30x."""
    cfg = DemoConfig(
        algorithm="grpo",
        steps=4,
        prompts_per_step=8,
        group_size=4,
        minibatches=2,
        warmup_steps=20,
        warmup_batch=16,
        inject=("lr-spike@6", "nan-logprobs@3", "stale-old-logprobs@4", "sampler-noise@6"),
    )
    rec = _Capture()
    train(cfg, rec)
    kw = dict(rec.steps)
    assert [s for s, _ in rec.steps] == list(range(8))
    assert [kw[s]["policy_lag"] for s in range(8)] == [0, 1] * 4
    assert [kw[s]["rollout"] for s in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [kw[s]["extra"]["lr"] / cfg.lr for s in range(5, 8)] == [1.0, 30.0, 1.0]
    nan_at = [int(kw[s]["logprobs"][kw[s]["mask"]].isnan().sum()) for s in range(8)]
    assert nan_at == [0, 0, 0, 1, 0, 0, 0, 0]  # and the skipped update kept the weights finite
    assert kw[3]["advantages"].abs().sum() > 0  # (a gradient the NaN reaches)
    assert [bool(kw[s]["extra"]["grad_norm"].isfinite()) for s in range(8)] == [True] * 3 + [
        False
    ] + [True] * 4
    for s in (5, 7):  # stale: lag 1, yet log pi_theta == log pi_old on every masked token
        m = kw[s]["mask"]
        assert torch.equal(kw[s]["logprobs"][m], kw[s]["old_logprobs"][m])
    # (not vacuous: the policy did move since step 5's batch was sampled, by step 4's update)
    moved = kw[5]["logprobs"] - kw[5]["sampler_logprobs"]
    assert moved[kw[5]["mask"]].abs().max() > 1e-3
    # the sampler against the trainer's log pi_old at the sampling policy: float rounding until
    # the noise starts (step 5 and 7 left out: their old log-probs are stale)
    for s in (0, 1, 2, 3, 4, 6):
        m = kw[s]["mask"]
        gap = (kw[s]["sampler_logprobs"] - kw[s]["old_logprobs"])[m].abs().max().item()
        assert (gap > 0.05) if s >= 6 else (gap < 1e-5), (s, gap)


# ---------------------------------------------------------------- end to end


def _read(run_dir: str, table: str) -> pd.DataFrame:
    files = sorted(glob.glob(os.path.join(run_dir, table, "*.parquet")))
    assert files, f"no {table} parquet in {run_dir}"
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


@pytest.mark.slow
def test_demo_end_to_end_records_every_column(tmp_path, mlflow_uri, capsys):
    """A 3-step demo of both algorithms writes both runs with every schema column, finite."""
    out = tmp_path / "runs"
    args = [
        "--out",
        str(out),
        "--steps",
        "3",
        "--group-size",
        "4",
        "--prompts-per-step",
        "4",
        "--minibatches",
        "2",
        "--warmup-steps",
        "5",
        "--mlflow",
        mlflow_uri,
        "--threads",
        "1",
    ]
    results = run(args)
    text = capsys.readouterr().out
    assert f"Open the dashboard on both runs: gspo-dash --root {out}\n" in text
    assert "reward 1st 1/5" in text and "faults injected: none" in text
    for phase in ("warm start", "training grpo", "writing gspo", "total"):
        assert re.search(rf"^  {phase} +\d+\.\d ", text, re.M), phase
    assert [r.config.algorithm for r in results] == ["grpo", "gspo"]

    for res in results:
        info = schema.read_run_info(res.run_dir)
        assert info.status == schema.STATUS_FINISHED
        assert info.algorithm == res.config.algorithm and info.group_size == 4
        assert info.reduction == "seq_mean_token_mean"
        # both runs measure both units with the same ranges: GRPO's token ε, the demo's GSPO ε
        assert (info.token_eps_low, info.token_eps_high) == (0.2, 0.2)
        assert (info.seq_eps_low, info.seq_eps_high) == DEMO_GSPO_EPS
        source = {"grpo": ("paper", "0.2/0.2"), "gspo": ("demo", "0.0003/0.0004")}
        assert (info.config["eps_source"], info.config["paper_eps"]) == source[info.algorithm]
        steps = _read(res.run_dir, schema.STEPS_DIR)
        assert set(schema.STEP_COLUMN_NAMES) <= set(steps.columns)
        assert steps[schema.Step.STEP].tolist() == list(range(6))  # 3 rollouts x 2 minibatches
        # the rollout index and the policy lag (2 minibatches: the second step is one update
        # behind), as their own columns, not as extras
        assert steps[schema.Step.ROLLOUT].tolist() == [0, 0, 1, 1, 2, 2]
        assert steps[schema.Step.POLICY_LAG].tolist() == [0, 1, 0, 1, 0, 1]
        assert not {"rollout", "epoch"} & (set(steps.columns) - set(schema.STEP_COLUMN_NAMES))
        # the sampler's log-probs (KV cache, float32) against one full forward: float rounding
        assert (steps[schema.Step.SAMPLER_LOGP_ABS_DIFF_MAX] < 1e-5).all()
        assert (steps[schema.Step.SAMPLER_KL_MEAN].abs() < 1e-10).all()
        # the attenuation is unknown (NaN) for a sequence with no gradient (A = 0), so a step mean
        # is known exactly when the step has a sequence of that sign (checked below)
        att = (Step.ATTENUATION_MEAN, Step.ATTENUATION_POS_MEAN, Step.ATTENUATION_NEG_MEAN)
        # the smallest non-zero |log ratio| is unknown (NaN) on a step where no ratio moved: the
        # on-policy steps (lag 0), whose log-probs are the old ones, and here every step (this
        # short run's reward is 0: no advantage, no gradient, the policy never moves)
        nonzero = (Step.SEQ_LOG_RATIO_ABS_MIN_NONZERO, Step.TOKEN_LOG_RATIO_ABS_MIN_NONZERO)
        on = steps[schema.Step.POLICY_LAG] == 0
        assert steps.loc[on, list(nonzero)].isna().all().all()
        moved = steps[list(nonzero)].stack().dropna()
        assert (moved > 0).all()
        if (steps[schema.Step.SEQ_LOG_RATIO_MEAN].abs() == 0).all():
            assert moved.empty
        metrics = [c for c in schema.STEP_METRIC_COLUMNS if c not in (*att, *nonzero)]
        numeric = steps[metrics + ["lr", "grad_norm"]]
        bad = [c for c in numeric.columns if not numeric[c].map(math.isfinite).all()]
        assert not bad, f"step metrics not finite: {bad}"
        assert (steps[schema.Step.NONFINITE_COUNT] == 0).all()
        assert (steps[schema.Step.NUM_SEQUENCES] == 8).all()  # 2 groups of 4 per minibatch

        seqs = _read(res.run_dir, schema.SEQUENCES_DIR)
        assert set(schema.SEQUENCE_COLUMN_NAMES) <= set(seqs.columns)
        assert len(seqs) == 6 * 8
        texts = [schema.Seq.COMPLETION, schema.Seq.PROMPT]
        # (the attenuation is NaN where A = 0: checked below)
        unknown_where_a0 = [schema.Seq.ATTENUATION]
        num = seqs.drop(
            columns=[schema.Seq.RUN_ID, schema.Seq.TRUNCATED, *texts, *unknown_where_a0]
        )
        assert math.isfinite(num.to_numpy(dtype=float).sum()), "a sequence column is not finite"
        # the prompt apart ("rev abc ="), the completion alone ("cba<eos>")
        assert seqs[schema.Seq.PROMPT].str.endswith(" =").all()
        assert not seqs[schema.Seq.COMPLETION].str.contains(" = ").any()
        # a completion ends with <eos> exactly when it was not truncated
        ends = seqs[schema.Seq.COMPLETION].str.endswith("<eos>")
        assert (ends == ~seqs[schema.Seq.TRUNCATED]).all()
        assert set(seqs[schema.Seq.REWARD].unique()) <= {0.0, 1.0}
        # the loss's attenuation: known where the sequence has a gradient (A != 0), in [0, 1]
        # (GRPO's and GSPO's clips only remove weight); each step mean over its sign's sequences
        adv, a = seqs[schema.Seq.ADVANTAGE], seqs[schema.Seq.ATTENUATION]
        assert (a.notna() == (adv != 0)).all() and a.dropna().between(0.0, 1.0).all()
        by_step = steps.set_index(Step.STEP)
        for col, side in (
            (Step.ATTENUATION_POS_MEAN, adv > 0),
            (Step.ATTENUATION_NEG_MEAN, adv < 0),
        ):
            want = a[side].groupby(seqs[schema.Seq.STEP][side]).mean()
            got = by_step[col].dropna()
            assert sorted(got.index) == sorted(want.index), col
            assert np.allclose(got.loc[want.index], want, atol=1e-6), col
        toks = _read(res.run_dir, schema.TOKENS_DIR)  # --token-samples default 8 per step
        assert set(schema.TOKEN_COLUMN_NAMES) <= set(toks.columns)
        assert len(toks) == 6 * 8
        lengths = toks[schema.Tok.TOKEN_LOG_RATIOS].map(len)
        assert (lengths >= 1).all() and (lengths <= 6).all()  # masked tokens only, T = 6
        # each kept sequence's token texts: one per masked token, the completion spelled out
        assert (toks[schema.Tok.TOKENS].map(len) == lengths).all()
        keys = [schema.Seq.STEP, schema.Seq.GROUP, schema.Seq.SAMPLE]
        joined = toks.merge(seqs, on=keys)
        spelled = joined[schema.Tok.TOKENS].map("".join)
        assert (spelled == joined[schema.Seq.COMPLETION].str.replace("...", "")).all()
        # the in-process rewards match the recorded ones (one route per minibatch row)
        per_rollout = seqs.groupby(seqs[schema.Seq.STEP] // 2)[schema.Seq.REWARD].mean()
        torch.testing.assert_close(per_rollout.tolist(), res.rollout_rewards, rtol=0, atol=1e-6)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_uri)
    exp = client.get_experiment_by_name("gspo-dash")
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.data.tags.get("mlflow.runName") for r in runs) == ["demo-grpo", "demo-gspo"]
    for r in runs:
        assert schema.mlflow_key(schema.Step.REWARD_MEAN) in r.data.metrics


def test_cli_rejects_unknown_algorithm(capsys):
    """--algorithms with an unknown name exits with status 2 and names the valid ones."""
    with pytest.raises(SystemExit) as exc:
        main(["--algorithms", "grpo,ppo", "--no-mlflow"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown 'ppo'" in err and "grpo, gspo" in err


def test_cli_options_are_the_dataclass_fields():
    """Every DemoConfig field (but algorithm) and every Session field is an option, with the
    dataclass's default; the hand-written CLI's options are all still there."""
    import dataclasses

    from training_hooks.demo.cli import build_parser

    parser = build_parser()[0]
    flags = {s for a in parser._actions for s in a.option_strings}
    fields = [*dataclasses.fields(DemoConfig), *dataclasses.fields(Session)]
    assert {"--" + f.name.replace("_", "-") for f in fields} - flags == {"--algorithm"}
    assert {
        "--out",
        "--steps",
        "--algorithms",
        "--seed",
        "--group-size",
        "--prompts-per-step",
        "--minibatches",
        "--epochs",
        "--lr",
        "--kl-coef",
        "--warmup-steps",
        "--token-samples",
        "--device",
        "--threads",
        "--name-prefix",
        "--mlflow",
        "--no-mlflow",
    } <= flags  # the options of the hand-written CLI
    session, configs = parse_args([])
    assert session == Session() and session.mlflow is True
    assert configs == [DemoConfig(algorithm="grpo"), DemoConfig(algorithm="gspo")]


def test_cli_values_reach_the_configs():
    """Typed values (comma lists, optional floats) reach every run's config; the unset eps of
    each algorithm keeps that algorithm's default."""
    session, configs = parse_args(
        ["--algorithms", "gspo", "--ops", "copy, dup", "--eps-low", "0.1", "--steps", "3"]
        + ["--no-mlflow", "--token-samples", "2", "--max-new-tokens", "9"]
    )
    assert (session.algorithms, session.mlflow, session.token_samples) == (("gspo",), False, 2)
    (cfg,) = configs
    assert (cfg.algorithm, cfg.ops, cfg.steps, cfg.max_new_tokens) == (
        "gspo",
        ("copy", "dup"),
        3,
        9,
    )
    assert (cfg.eps_low, cfg.eps_high) == (0.1, 0.03)  # eps_high: the demo's GSPO default
    assert cfg.stored()["ops"] == "copy,dup"
    assert parse_args(["--mlflow", "sqlite:///x.db"])[0].mlflow == "sqlite:///x.db"


def test_cli_reports_a_bad_config_by_its_option(capsys):
    """A value the dataclass rejects exits with status 2, naming the option."""
    with pytest.raises(SystemExit) as exc:
        parse_args(["--group-size", "1"])
    assert exc.value.code == 2
    assert "--group-size must be >= 2" in capsys.readouterr().err


def test_results_table_fifths_and_off_policy_means():
    """10 rollouts: first fifth = mean of 2 rollouts, last = last 2; '*' skips the lag-0 steps;
    the rate leaves the first rollout out; one run is "the run", never "both runs"."""
    cfg = DemoConfig(steps=10, minibatches=2)
    # optimizer step i: lag i % 2; clip 0 on the on-policy step, 0.6 / 0.02 on the other;
    # entropy 1 - 0.02 i
    stats = [
        StepStats(i // 2, 0.0, 0.6 * (i % 2), 0.02 * (i % 2), 3.0, 0.0, 0.5, 1 - 0.02 * i, i % 2)
        for i in range(20)
    ]
    rewards = [0.1, 0.3, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.7, 0.9]
    res = RunResult(cfg, stats, rewards, first_rollout_time=1.0, train_time=5.5)
    assert res.fifths() == pytest.approx((0.2, 0.8))
    assert res.mean("seq_clip_fraction") == pytest.approx(0.3)
    assert res.mean("seq_clip_fraction", off_policy_only=True) == pytest.approx(0.6)
    assert res.mean("token_clip_fraction", off_policy_only=True) == pytest.approx(0.02)
    assert res.rollouts_per_s == pytest.approx(9 / 4.5)  # rollouts 2-10 in 5.5 - 1.0 s
    text = results_table([res])
    row = text.splitlines()[1].split()
    # entropy: steps 0-3 -> 1 - 0.02 * 1.5 = 0.97; steps 16-19 -> 1 - 0.02 * 17.5 = 0.65
    assert row == ["gspo", "0.200", "0.800", "2.00%", "60.0%", "0.97/0.65", "0.000/0.000"] + [
        "5.5",
        "2.0",
    ]
    assert "rollout steps 1-2 and 9-10 of 10" in text
    assert "measured on the run," in text and "both runs" not in text
    assert "faults injected" not in text  # none injected
    injected = RunResult(
        DemoConfig(steps=10, minibatches=2, inject=("lr-spike@8",)), stats, rewards
    )
    two = results_table([res, injected])
    assert "faults injected in gspo: none\nfaults injected in gspo: lr-spike@8 (at step 8)" in two
    assert "faults injected in both runs: lr-spike@8 (at step 8)" in results_table([injected] * 2)


def test_header_states_eps_and_faults():
    """The header names each algorithm's clip range and whose it is, and the injected faults
    with when they act."""
    inject = ("lr-spike@8", "sampler-noise")
    configs = [DemoConfig(algorithm=a, inject=inject) for a in ("grpo", "gspo")]
    text = header(configs, "my runs", None)
    assert "GRPO clip range: 0.2/0.2 per token, the paper's\n" in text
    assert "GSPO clip range: 0.02/0.03 per sequence, the demo's (the paper's: 3e-4/4e-4)" in text
    assert "faults injected: lr-spike@8 (at step 8), sampler-noise@0 (from step 0)" in text
    assert "recording to my runs (Parquet); MLflow off" in text
    assert "4 minibatches x 1 epoch(s) = 4 optimizer steps (policy lag 0..3)" in text


def test_progress_line_names_what_each_value_covers():
    """Each value says which rollouts it covers: the rate from rollout 2 on, the others over the
    last 10 rollouts, the clip shares over their off-policy steps only."""
    import io

    out = io.StringIO()  # not a terminal: one line per 10% of the run (here every rollout)
    line = ProgressLine("grpo", 12, stream=out)
    for r in range(12):
        # rollout r: reward 0.04 r; the lag-1 step clips 2% of tokens and 30% of sequences
        line(
            r,
            [
                StepStats(r, 0.04 * r, 0.0, 0.0, 3.0, 0.0, 0.0, 0.7, 0),
                StepStats(r, 0.04 * r, 0.3, 0.02, 3.0, 0.0, 0.0, 0.7, 1),
            ],
        )
    lines = out.getvalue().splitlines()
    assert len(lines) == 12
    assert lines[0].startswith("grpo [          ] 1/12 | rate from rollout 2 on | rollout 1: ")
    assert re.search(r"\| \d+\.\d rollouts/s over rollout 2 \| rollouts 1-2: ", lines[1])
    # the last line: rollouts 3-12, reward 0.04 * mean(2..11) = 0.04 * 6.5 = 0.26
    assert re.search(r"rollouts/s over rollouts 2-12 \| rollouts 3-12: reward 0.26, ", lines[-1])
    assert lines[-1].endswith("off-policy clip 2.0% of tokens, 30% of sequences, length 3.0")


@pytest.mark.slow
def test_cli_one_run_with_faults(tmp_path, capsys):
    """One algorithm: "the run", never "both runs"; the dashboard command quotes --out; the
    injected fault is in the header and the summary."""
    out = tmp_path / "my runs"
    run(
        ["--algorithms", "gspo", "--out", str(out), "--no-mlflow", "--inject", "lr-spike@1"]
        + ["--steps", "1", "--group-size", "4", "--prompts-per-step", "4", "--minibatches", "2"]
        + ["--warmup-steps", "5"]
    )
    text = capsys.readouterr().out
    assert "both runs" not in text
    assert f"Open the dashboard on the run: gspo-dash --root '{out}'\n" in text
    assert "faults injected: lr-spike@1 (at step 1)" in text
    assert "faults injected in the run: lr-spike@1 (at step 1)" in text
    assert "mlflow ui" not in text


def test_seeds_make_one_config_per_seed_and_algorithm(capsys):
    """--seeds 3 --seed 5: runs of seeds 5, 6, 7 for each algorithm, seed by seed, named
    demo-ALGO-sSEED; the default stays one run per algorithm named demo-ALGO; --seeds 0 is
    refused by its option."""
    session, configs = parse_args(["--seeds", "3", "--seed", "5", "--steps", "2"])
    assert [(c.algorithm, c.seed) for c in configs] == [
        (a, s) for s in (5, 6, 7) for a in ("grpo", "gspo")
    ]
    assert {c.steps for c in configs} == {2}
    assert [session.run_name(c) for c in configs[:2]] == ["demo-grpo-s5", "demo-gspo-s5"]
    default, (one, _) = parse_args([])
    assert default.seeds == 1 and default.run_name(one) == "demo-grpo"
    assert "3 seeds (5-7)" in header(configs, "runs", None).splitlines()[0]
    with pytest.raises(SystemExit):
        parse_args(["--seeds", "0"])
    assert "--seeds must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_seeds_record_every_seed(tmp_path, capsys):
    """Two seeds of both algorithms: four runs named by seed, each storing its seed; the printout
    names the verdict's command."""
    out = tmp_path / "runs"
    run(
        ["--seeds", "2", "--out", str(out), "--no-mlflow", "--steps", "1", "--group-size", "4"]
        + ["--prompts-per-step", "4", "--minibatches", "2", "--warmup-steps", "2"]
    )
    text = capsys.readouterr().out
    infos = [schema.read_run_info(p) for p in sorted(out.iterdir())]
    assert sorted((i.name, i.config["seed"]) for i in infos) == [
        ("demo-grpo-s0", 0),
        ("demo-grpo-s1", 1),
        ("demo-gspo-s0", 0),
        ("demo-gspo-s1", 1),
    ]
    assert "grpo s1 " in text and f"python -m app.verdict {out} --by algorithm" in text


# ---------------------------------------------------------------- the default regime


@pytest.mark.slow
def test_default_demo_is_in_the_real_regime(tmp_path, capsys):
    """The default demo (Parquet only), read back from disk: both runs learn, GRPO clips a real
    run's share of its off-policy tokens, GSPO of its off-policy sequences (its own ε, stated in
    run.json), the entropy does not collapse and the Health page finds no warning or error
    (REGIME_BANDS, docs/demo.md)."""
    from training_hooks import findings
    from training_hooks.demo.config import REGIME_BANDS
    from training_hooks.run_summary import page_findings

    def within(name, value):
        lo, hi = REGIME_BANDS[name]
        return (lo is None or value >= lo) and (hi is None or value <= hi)

    results = run(["--out", str(tmp_path / "runs"), "--no-mlflow"])
    capsys.readouterr()
    for res in results:
        info = schema.read_run_info(res.run_dir)
        steps = tables.read_table(res.run_dir, schema.STEPS_DIR)
        S = schema.Step
        assert len(steps) == DemoConfig().optimizer_steps
        per_rollout = steps.groupby(S.ROLLOUT)
        reward = per_rollout[S.REWARD_MEAN].mean()  # equal-sized minibatches
        k = len(reward) // 5
        gain = reward.iloc[-k:].mean() - reward.iloc[:k].mean()
        assert within("gain", gain), (info.algorithm, gain)
        off = steps[steps[S.POLICY_LAG] > 0]
        if info.algorithm == "grpo":
            tok = off[S.TOKEN_CLIP_FRACTION].mean()  # the step mean, as the demo prints it
            assert within("grpo_tok_clip_off", tok), tok
        else:
            assert (info.seq_eps_low, info.seq_eps_high) == DEMO_GSPO_EPS
            assert info.config["eps_source"] == "demo"
            seq = off[S.SEQ_CLIP_FRACTION].mean()
            assert within("gspo_seq_clip_off", seq), seq
        entropy = per_rollout[S.ENTROPY_MEAN].mean()
        kept = entropy.iloc[-k:].mean() / entropy.iloc[:k].mean()
        assert within("entropy_kept", kept), (info.algorithm, kept)
        found = page_findings(res.run_dir, info)  # what the Health page lists
        alarms = [f.code for f in found if f.severity in (findings.ERROR, findings.WARNING)]
        assert alarms == [], (info.algorithm, alarms)
