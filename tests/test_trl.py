"""TRL GRPOTrainer cross-check: what gspo-dash records equals what TRL logs, and training is unchanged.

A tiny randomly initialised Llama (hidden 32, 2 layers) and a WordLevel tokenizer are built in the
test and saved to a temporary folder (nothing is downloaded), then trained for 4 steps with
num_iterations=2, so steps 2 and 4 re-use step 1's and 3's completions with a policy that moved
(ratios leave 1). For GRPO (importance_sampling_level="token", loss_type="dapo", recorded by the ``RecordedGRPOTrainer``
subclass) and GSPO ("sequence", loss_type="grpo", recorded by ``attach`` on a plain trainer): our recorded clip fractions, KL, entropy, lengths, rewards and
truncation agree with TRL's own log for the same step (same definitions), and the parameters and
TRL's logged metrics equal those of the same run without our hooks.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

trl = pytest.importorskip("trl", reason="trl is not installed: pip install 'gspo-dash[trl]'")

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import (  # noqa: E402
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    PrinterCallback,
)
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from training_hooks import importers, schema, tables  # noqa: E402
from training_hooks.findings import facts_of  # noqa: E402
from training_hooks.schema import Step  # noqa: E402
from training_hooks.trl import (  # noqa: E402
    COMPLETION_CHARS,
    TRL_KL,
    RecordedGRPOTrainer,
    attach,
    bounded_text,
    completion_text,
    unsupported_layout,
)  # noqa: E402

WORDS = ["a", "b", "c", "d", "e", "f", "g", "h"]
PROMPTS = [" ".join(WORDS[i : i + 3]) for i in range(6)]  # the dataset's prompts
STEPS = 4
# fields of TRL's log that measure time, not training
TIME_KEYS = {"step_time", "train_runtime", "train_samples_per_second", "train_steps_per_second"}


def tiny_llama(folder: Path) -> Path:
    """A random tiny Llama and a WordLevel tokenizer over ``WORDS``, saved in ``folder`` like a
    Hub checkpoint (also bench/bench_trl_recipes.py's model)."""
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = 1
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """``tiny_llama`` in a folder of the module's."""
    return tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def reward_a(completions, **kwargs):
    """Fraction of the completion's words that are "a" (continuous: groups rarely tie)."""
    out = []
    for c in completions:
        w = c.split()
        out.append(w.count("a") / len(w) if w else 0.0)
    return out


def _train(
    model_dir: Path,
    out: Path,
    level: str,
    *,
    record: bool,
    cls=GRPOTrainer,
    steps=STEPS,
    loss_type: str | None = None,
    unnamed: bool = False,
    **settings,
):
    """``settings`` (GRPOConfig fields) override the run's clip range and the others; ``unnamed``:
    ``attach`` is given no name (its default name is the run's)."""
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    prompts = list(PROMPTS)
    eps = dict(epsilon=0.2) if level == "token" else dict(epsilon=3e-4, epsilon_high=4e-4)
    eps.update(settings)
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        max_steps=steps,
        num_iterations=2,
        learning_rate=0.05,
        beta=0.04,
        importance_sampling_level=level,
        loss_type=loss_type or ("dapo" if level == "token" else "grpo"),
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        dataloader_num_workers=0,
        use_bias_correction_kl=level == "token",
        disable_tqdm=True,
        **eps,
    )
    kwargs = dict(
        model=str(model_dir),
        reward_funcs=reward_a,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
    )
    opts = {"root": str(out / "runs")} | ({} if unnamed else {"name": f"trl-{level}"})
    if record and level == "token" and cls is GRPOTrainer:  # the subclass route
        trainer = RecordedGRPOTrainer(**kwargs, gspo_dash=opts)
    else:
        trainer = cls(**kwargs)
        if record:  # the two-line route on a plain trainer
            attach(trainer, **opts)
    trainer.remove_callback(PrinterCallback)  # keep the test output quiet
    trainer.train()
    return trainer


def _logs(trainer) -> dict[int, dict]:
    """TRL's own log, one dict per step (the end-of-training summary left out)."""
    return {
        e["step"]: e for e in trainer.state.log_history if "train_runtime" not in e and "loss" in e
    }


@pytest.fixture(scope="module", params=["token", "sequence"])
def runs(request, model_dir, tmp_path_factory):
    """The same TRL run twice: with our hooks attached and without."""
    level = request.param
    base = tmp_path_factory.mktemp(f"trl-{level}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recorded = _train(model_dir, base / "with", level, record=True)
        plain = _train(model_dir, base / "without", level, record=False)
    return level, recorded, plain


def _our_steps(trainer) -> pd.DataFrame:
    folder = Path(trainer.gspo_dash_run_dir) / schema.STEPS_DIR
    return pd.read_parquet(sorted(folder.glob("*.parquet"))).set_index(Step.STEP).sort_index()


@pytest.mark.slow
def test_recorded_metrics_equal_trl_logged_metrics(runs):
    """Per step: clip fractions (low/high/region), KL, entropy, lengths, rewards agree with TRL's log."""
    level, recorded, _ = runs
    ours, theirs = _our_steps(recorded), _logs(recorded)
    assert list(ours.index) == list(range(1, STEPS + 1)) == sorted(theirs)
    lo, hi = (
        (Step.TOKEN_CLIP_LOW_FRACTION, Step.TOKEN_CLIP_HIGH_FRACTION)
        if level == "token"
        else (Step.SEQ_CLIP_LOW_FRACTION, Step.SEQ_CLIP_HIGH_FRACTION)
    )
    worst: dict[str, float] = {}

    def check(step: int, ours_value: float, trl_key: str, tol: float = 1e-6) -> None:
        diff = abs(float(ours_value) - float(theirs[step][trl_key]))
        worst[trl_key] = max(worst.get(trl_key, 0.0), diff)
        assert diff <= tol, (step, trl_key, ours_value, theirs[step][trl_key])

    for s in ours.index:
        row = ours.loc[s]
        check(s, row[lo], "clip_ratio/low_mean")
        check(s, row[hi], "clip_ratio/high_mean")
        check(s, row[lo] + row[hi], "clip_ratio/region_mean")
        # TRL's kl: k3 times the ratio under use_bias_correction_kl (the token run), else plain k3
        check(s, row[TRL_KL] if level == "token" else row[Step.KL_REF_MEAN], "kl", 1e-5)
        check(s, row[Step.ENTROPY_MEAN], "entropy", 1e-5)
        check(s, row[Step.LOSS], "loss", 1e-5)
        if "completions/mean_length" in theirs[s]:  # logged at generation steps (1 and 3)
            check(s, row[Step.LENGTH_MEAN], "completions/mean_length")
            check(s, row[Step.LENGTH_MIN], "completions/min_length")
            check(s, row[Step.LENGTH_MAX], "completions/max_length")
            check(s, row[Step.TRUNCATED_FRACTION], "completions/clipped_ratio")
            check(s, row[Step.REWARD_MEAN], "reward")
            check(s, row[Step.ZERO_VARIANCE_FRACTION], "frac_reward_zero_std")
            # TRL's reward_std is Bessel's over the batch; ours the population std
            n = row[Step.NUM_SEQUENCES]
            check(s, row[Step.REWARD_STD] * math.sqrt(n / (n - 1)), "reward_std")
    # the check is not vacuous: completions were re-used with a moved policy and clipped
    assert (
        set(theirs[1]) >= {"completions/mean_length"} and "completions/mean_length" not in theirs[2]
    )
    assert ours.loc[[2, 4], Step.SEQ_LOG_RATIO_STD].gt(0).all()
    assert ours.loc[[2, 4], [lo, hi]].to_numpy().sum() > 0
    assert ours[Step.KL_REF_MEAN].gt(0).any()
    print(f"\n{level}: max |ours - TRL| per metric: {worst}")


def _our_table(trainer, table: str) -> pd.DataFrame:
    return tables.read_table(trainer.gspo_dash_run_dir, table)


@pytest.mark.slow
def test_lag_grad_norm_rewards_and_text_are_what_trl_did(runs):
    """num_iterations=2: TRL generates at steps 1 and 3 (its log has completion lengths there
    only), so the rollouts are 0, 0, 1, 1 and the policy lags 0, 1, 0, 1; grad_norm and
    rewards/<fn>/mean equal TRL's log; every sequence carries its completion's text, the text
    TRL rewarded (reward_a of it is the recorded reward), the same at both steps of a
    generation; the per-token sample is on (8 per step) with its reasons."""
    _, recorded, _ = runs
    ours, theirs = _our_steps(recorded), _logs(recorded)
    generated = [s for s in sorted(theirs) if "completions/mean_length" in theirs[s]]
    assert generated == [1, 3]
    assert ours[Step.ROLLOUT].tolist() == [0, 0, 1, 1]
    assert ours[Step.POLICY_LAG].tolist() == [0, 1, 0, 1]
    for s in ours.index:
        assert ours.loc[s, "grad_norm"] == theirs[s]["grad_norm"]  # the same float32 value
        gen = max(g for g in generated if g <= s)  # the generation this step trains on
        got = ours.loc[s, "rewards/reward_a/mean"]
        assert abs(got - theirs[gen]["rewards/reward_a/mean"]) < 1e-6, (s, got)
    assert ours[Step.SAMPLER_KL_MEAN].isna().all()  # no vLLM: no sampler log-probs (unknown)
    seqs = _our_table(recorded, schema.SEQUENCES_DIR)
    texts = seqs[schema.Seq.COMPLETION]
    assert texts.map(lambda t: isinstance(t, str)).all()
    assert texts.map(len).max() <= COMPLETION_CHARS
    assert all(set(t.split()) <= set(WORDS) for t in texts)
    want = reward_a(texts.tolist())
    assert (seqs[schema.Seq.REWARD] - pd.Series(want)).abs().max() < 1e-6
    by_step = seqs.sort_values([schema.Seq.GROUP, schema.Seq.SAMPLE]).groupby(schema.Seq.STEP)
    per_step = {s: g[schema.Seq.COMPLETION].tolist() for s, g in by_step}
    assert per_step[1] == per_step[2] and per_step[3] == per_step[4]
    assert per_step[1] != per_step[3]
    # each group's prompt, stored apart from its completions: one of the dataset's, shared by
    # the group's rows
    by_group = seqs.groupby([schema.Seq.STEP, schema.Seq.GROUP])[schema.Seq.PROMPT]
    assert (by_group.nunique() == 1).all()
    assert set(seqs[schema.Seq.PROMPT]) <= set(PROMPTS)
    tok = _our_table(recorded, schema.TOKENS_DIR)
    assert set(tok[schema.Tok.STEP]) == {1, 2, 3, 4}
    assert set(tok[schema.Tok.REASON]) <= set(schema.TOKEN_SAMPLE_REASONS)
    assert (tok.groupby(schema.Tok.STEP).size() >= 8).all()  # the baseline: all 8 sequences


def test_completion_text_is_bounded_and_marked():
    """A completion's text is kept whole up to COMPLETION_CHARS characters; a longer one is cut
    there and says how much was cut; conversational completions give their contents."""
    assert bounded_text("a b") == "a b"
    exact = "x" * COMPLETION_CHARS
    assert bounded_text(exact) == exact
    cut = bounded_text("y" * (COMPLETION_CHARS + 25))
    assert cut.startswith("y" * COMPLETION_CHARS) and cut.endswith("[cut: 25 more characters]")
    assert cut[COMPLETION_CHARS] == "…"
    msgs = [{"role": "assistant", "content": "hello"}, {"role": "tool", "content": [{"text": "x"}]}]
    assert completion_text(msgs) == "hello\nx"
    assert completion_text(None) is None


class _SamplerShiftTrainer(GRPOTrainer):
    """Pretends vLLM sampled: sampling_per_token_logps = old_per_token_logps - 0.1 (TRL keeps
    that key for its importance-sampling correction)."""

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        out["sampling_per_token_logps"] = out["old_per_token_logps"] - 0.1
        return out


@pytest.mark.slow
def test_sampler_logprobs_from_trl_reach_the_sampler_columns(model_dir, tmp_path):
    """When TRL holds sampling_per_token_logps, attach records them as sampler_logprobs: with
    u = old - sampler = 0.1 on every token, sampler_kl_mean = e^0.1 - 1 - 0.1 = 0.0051709 and
    sampler_logp_abs_diff_max = 0.1 (float32 rounding of old - 0.1 aside)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = _train(
            model_dir, tmp_path, "sequence", record=True, cls=_SamplerShiftTrainer, steps=2
        )
    ours = _our_steps(trainer)
    want = math.expm1(0.1) - 0.1
    assert want == pytest.approx(0.005170918075647624)
    assert (ours[Step.SAMPLER_KL_MEAN] - want).abs().max() < 1e-6
    assert (ours[Step.SAMPLER_LOGP_ABS_DIFF_MAX] - 0.1).abs().max() < 1e-6
    assert ours[Step.POLICY_LAG].tolist() == [0, 1]


@pytest.mark.slow
def test_run_json_holds_the_trl_settings(runs):
    """run.json: source trl, algorithm the loss TRL ran (loss_type "dapo" at the token level,
    "grpo" at the sequence level: GSPO), TRL's eps in its unit; Health's facts read TRL's
    settings from it: 2 updates per batch (num_iterations 2), max_grad_norm 1.0, β 0.04."""
    level, recorded, _ = runs
    info = schema.read_run_info(recorded.gspo_dash_run_dir)
    assert info.source == "trl" and info.status == schema.STATUS_FINISHED
    assert info.algorithm == ("dapo" if level == "token" else "gspo")
    if level == "token":
        assert (info.token_eps_low, info.token_eps_high) == (0.2, 0.2)
    else:
        assert (info.seq_eps_low, info.seq_eps_high) == (3e-4, 4e-4)
    cfg = info.config
    assert cfg["importance_sampling_level"] == level and cfg["num_iterations"] == 2
    assert cfg["loss_type"] == info.reduction and "scale_rewards" in cfg
    assert cfg["steps_per_generation"] == 1 and info.group_size == 4
    facts = facts_of(info)
    assert (facts.updates_per_batch, facts.max_grad_norm, facts.kl_coef) == (2, 1.0, 0.04)
    # reward_weights unset: TRL applies 1 to each function, recorded as applied, not as stated
    assert cfg["reward_weights"] is None and cfg["reward_funcs"]
    assert cfg["reward_weights_applied"] == {fn: 1.0 for fn in cfg["reward_funcs"]}
    assert facts.reward_weights == cfg["reward_weights_applied"]
    assert facts.reward_weights_origin.startswith("TRL's reward_weights (unset")
    seqs = Path(recorded.gspo_dash_run_dir) / schema.SEQUENCES_DIR
    df = pd.read_parquet(sorted(seqs.glob("*.parquet")))
    assert len(df) == STEPS * 8 and set(df["group"]) == {0, 1} and set(df["sample"]) == {0, 1, 2, 3}


@pytest.mark.slow
def test_trls_defaults_at_the_sequence_level_are_gspo_dapo_named_and_noted(model_dir, tmp_path):
    """importance_sampling_level="sequence" with TRL 1.16's loss_type "dapo" and ε 0.2, β 0.04,
    attached without a name: algorithm "dapo-seq", named "gspo-dapo-<model folder>-<MMDD-HHMM>"
    (not "trl-dapo"), in words "GSPO (DAPO aggregation)" (its ratio level first), and Health's
    gspo_recipe_departs names the three departures from TRL's recipe for the paper's GSPO."""
    from gspo_metrics.spec import algorithm_words
    from training_hooks.findings import run_health
    from training_hooks.findings.recipe import GSPO_RECIPE_DEPARTS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = _train(
            model_dir,
            tmp_path,
            "sequence",
            record=True,
            steps=2,
            loss_type="dapo",
            epsilon=0.2,
            epsilon_high=0.2,
            unnamed=True,
        )
    info = schema.read_run_info(trainer.gspo_dash_run_dir)
    assert info.algorithm == "dapo-seq"
    assert algorithm_words(info.algorithm) == "GSPO (DAPO aggregation)"
    model = Path(model_dir).name
    assert info.name.startswith(f"gspo-dapo-{model}-") and len(info.name.rsplit("-", 2)[-2]) == 4
    report = run_health(_our_steps(trainer).reset_index(), facts_of(info))
    (f,) = [f for f in report.findings if f.code == GSPO_RECIPE_DEPARTS]
    assert "with 3 settings other than the recipe" in f.evidence
    assert "ε 0.2/0.2 in the sequence unit" in f.evidence and "β 0.04, config beta" in f.evidence


@pytest.mark.slow
def test_training_is_unchanged_by_the_hooks(runs):
    """Same seed, with and without hooks: identical parameters and identical TRL logs."""
    _, recorded, plain = runs
    a = dict(recorded.model.named_parameters())
    b = dict(plain.model.named_parameters())
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    la, lb = _logs(recorded), _logs(plain)
    assert la.keys() == lb.keys()
    for s in la:
        ka = {k: v for k, v in la[s].items() if k not in TIME_KEYS}
        kb = {k: v for k, v in lb[s].items() if k not in TIME_KEYS}
        assert ka == kb, s


@pytest.mark.slow
def test_trl_trainer_state_imports_beside_the_recorded_run(runs, tmp_path):
    """The same run's trainer_state.json, imported, gives TRL's numbers in our columns."""
    level, recorded, _ = runs
    recorded.state.save_to_json(str(tmp_path / "trainer_state.json"))
    (tmp_path / "grpo_config.json").write_text(recorded.args.to_json_string())  # found beside
    res = importers.import_run(
        "trl",
        tmp_path,
        root=Path(recorded.gspo_dash_run_dir).parent,
        algorithm="dapo" if level == "token" else "gspo",
    )
    imported = pd.read_parquet(
        sorted((Path(res["run_dir"]) / schema.STEPS_DIR).glob("*.parquet"))
    ).set_index(Step.STEP)
    ours = _our_steps(recorded)
    lo = Step.TOKEN_CLIP_LOW_FRACTION if level == "token" else Step.SEQ_CLIP_LOW_FRACTION
    assert (imported[lo] - ours[lo]).abs().max() < 1e-6
    # TRL's kl is k3 times the ratio under use_bias_correction_kl (the token run): not ours, so
    # it is imported as trl/kl; plain k3 (the sequence run) fills kl_ref_mean
    kl = TRL_KL if level == "token" else Step.KL_REF_MEAN
    assert (imported[kl] - ours[kl]).abs().max() < 1e-5


def test_step_rows_reassemble_generation_order_and_drop_empty_groups():
    """Microbatches arrive shuffled and with different T: rows come back in generation order,
    right-padded with 0, and a group holding an empty completion is left out."""
    from training_hooks.trl import _StepRows

    # G = 2; generation indices 2, 3 (T = 2) then 0, 1 (T = 3); row 1 (group 0) is empty
    mb_a = {
        "index": torch.tensor([2, 3]),
        "logps": torch.tensor([[-1.0, -2.0], [-3.0, -4.0]]),
        "mask": torch.tensor([[1, 1], [1, 0]]),
    }
    mb_b = {
        "index": torch.tensor([0, 1]),
        "logps": torch.tensor([[-5.0, -6.0, -7.0], [-8.0, -9.0, -9.5]]),
        "mask": torch.tensor([[1, 1, 1], [0, 0, 0]]),
    }
    rows = _StepRows.assemble([mb_a, mb_b], G=2)
    assert rows.dropped_groups == 1  # group 0 (indices 0, 1) is out, group 1 (2, 3) stays
    assert rows["logps"].tolist() == [[-1.0, -2.0, 0.0], [-3.0, -4.0, 0.0]]
    assert rows["mask"].tolist() == [[1, 1, 0], [1, 0, 0]]
    assert rows["ref"] is None  # no microbatch carries it
    # without the empty row every group is kept, in generation order 0, 1, 2, 3
    mb_b["mask"] = torch.tensor([[1, 1, 1], [1, 0, 0]])
    rows = _StepRows.assemble([mb_a, mb_b], G=2)
    assert rows.dropped_groups == 0
    assert rows["logps"][:, 0].tolist() == [-5.0, -8.0, -1.0, -3.0]
    # a step that does not hold whole groups once each is refused with the reason
    mb_b["index"] = torch.tensor([0, 0])
    assert "whole groups" in _StepRows.assemble([mb_a, mb_b], G=2)
    mb_b["index"] = torch.tensor([0, 1])
    mb_a["mask"], mb_b["mask"] = torch.zeros(2, 2), torch.zeros(2, 3)
    assert "every group holds an empty completion" in _StepRows.assemble([mb_a, mb_b], G=2)


def test_policy_lag_from_trl_counters():
    """lag = optimizer steps since the generation whose old log-probs the step uses (TRL's
    global_step then), 0 when TRL skipped the old log-probs (its old = current, detached), and
    unknown when the step's rows come from two generations."""
    from types import SimpleNamespace

    from training_hooks.trl import GSPODashMixin, _Generation, _StepRows

    def rows(rollouts, old_given):
        mb = {
            "index": torch.arange(len(rollouts)),
            "logps": torch.zeros(len(rollouts), 2),
            "mask": torch.ones(len(rollouts), 2),
            "rollout": torch.tensor(rollouts),
            "old_given": torch.tensor([old_given] * len(rollouts)),
        }
        return _StepRows.assemble([mb], G=2)

    gens = {3: _Generation(3, 5, ["a", "b"], {}), 4: _Generation(4, 8, ["c", "d"], {})}
    me = SimpleNamespace(_gd_generations=gens)
    # TRL's step 8 (1-based, after the update: 7 updates before it), generation at global_step 5
    gen, lag = GSPODashMixin._gd_lag(me, rows([3, 3], True), 8)
    assert (gen.rollout, lag) == (3, 2)
    assert GSPODashMixin._gd_lag(me, rows([4, 4], True), 9)[1] == 0  # generated at this step
    assert GSPODashMixin._gd_lag(me, rows([3, 3], False), 8)[1] == 0  # old skipped: on-policy
    assert GSPODashMixin._gd_lag(me, rows([3, 4], True), 8) == (None, None)


def test_unsupported_layout_is_explained():
    """A layout where optimizer steps do not hold whole groups is named, not silently mis-recorded."""

    class Args:
        steps_per_generation = 4
        gradient_accumulation_steps = 2
        per_device_train_batch_size = 8
        num_generations = 4

    assert "steps_per_generation (4) != gradient_accumulation_steps (2)" in unsupported_layout(Args)
    Args.steps_per_generation = 2
    Args.per_device_train_batch_size = 3
    assert "not a multiple of num_generations (4)" in unsupported_layout(Args)
    Args.per_device_train_batch_size = 2
    assert unsupported_layout(Args) is None


_DIST_SCRIPT = r"""
import json, os, sys, warnings
warnings.simplefilter("ignore")
from pathlib import Path
import pandas as pd
from datasets import Dataset
from transformers import PreTrainedTokenizerFast, PrinterCallback
from trl import GRPOConfig, GRPOTrainer
from training_hooks.trl import attach

model_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
words = sys.argv[3].split(",")

def reward_a(completions, **kwargs):
    return [c.split().count("a") / len(c.split()) if c.split() else 0.0 for c in completions]

args = GRPOConfig(output_dir=str(out / "o"), per_device_train_batch_size=4, num_generations=4,
    max_completion_length=6, max_steps=4, num_iterations=2, learning_rate=0.05, beta=0.04,
    importance_sampling_level="token", logging_steps=1, report_to="none", use_cpu=True, seed=0,
    save_strategy="no", disable_tqdm=True)
trainer = GRPOTrainer(model=str(model_dir), reward_funcs=reward_a, args=args,
    train_dataset=Dataset.from_dict({"prompt": [" ".join(words[i:i + 3]) for i in range(6)]}),
    processing_class=PreTrainedTokenizerFast.from_pretrained(model_dir))
trainer.remove_callback(PrinterCallback)
attach(trainer, root=str(out / "runs"), name="dist")
trainer.train()
if int(os.environ.get("RANK", "0")) == 0:
    logs = [e for e in trainer.state.log_history if "loss" in e and "train_runtime" not in e]
    bias_kl = bool(getattr(args, "use_bias_correction_kl", False))  # default True from TRL 1.9
    (out / "result.json").write_text(
        json.dumps({"run_dir": trainer.gspo_dash_run_dir, "logs": logs, "bias_kl": bias_kl})
    )
"""


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("GSPO_DASH_DIST_TESTS") == "0",
    reason="2-process TRL run (slow) turned off by GSPO_DASH_DIST_TESTS=0",
)
def test_two_ranks_record_what_trl_logs(model_dir, tmp_path):
    """torchrun, 2 CPU ranks (gloo): every rank's sequences recorded; step scalars equal TRL's."""
    script = tmp_path / "run.py"
    script.write_text(_DIST_SCRIPT)
    # the ranks import this checkout, whatever this interpreter has installed
    repo = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            str(script),
            str(model_dir),
            str(tmp_path),
            ",".join(WORDS),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    run_dir = Path(result["run_dir"])
    ours = pd.read_parquet(sorted((run_dir / schema.STEPS_DIR).glob("*.parquet"))).set_index(
        Step.STEP
    )
    seqs = pd.read_parquet(sorted((run_dir / schema.SEQUENCES_DIR).glob("*.parquet")))
    assert sorted(seqs["rank"].unique()) == [0, 1] and len(seqs) == STEPS * 8
    per_rank = _rank_mean_logging()
    for e in result["logs"]:
        row = ours.loc[e["step"]]
        assert row[Step.NUM_RANKS] == 2 and row[Step.NUM_SEQUENCES] == 8
        step_seqs = seqs[seqs[schema.Seq.STEP] == e["step"]]
        trl_value = functools.partial(_as_trl_logs, row, step_seqs if per_rank else None)
        got = trl_value(Step.TOKEN_CLIP_LOW_FRACTION, schema.Seq.TOKEN_CLIP_LOW_FRACTION)
        assert abs(got - e["clip_ratio/low_mean"]) < 1e-6
        got = trl_value(Step.TOKEN_CLIP_HIGH_FRACTION, schema.Seq.TOKEN_CLIP_HIGH_FRACTION)
        assert abs(got - e["clip_ratio/high_mean"]) < 1e-6
        if result["bias_kl"]:  # TRL's kl: k3 x ratio (our extra), else plain k3
            assert abs(row[TRL_KL] - e["kl"]) < 1e-5
        else:
            assert abs(trl_value(Step.KL_REF_MEAN, schema.Seq.KL_REF) - e["kl"]) < 1e-5
        assert abs(trl_value(Step.ENTROPY_MEAN, schema.Seq.ENTROPY) - e["entropy"]) < 1e-5
        if "completions/mean_length" in e:
            assert abs(row[Step.LENGTH_MEAN] - e["completions/mean_length"]) < 1e-6
            assert abs(row[Step.REWARD_MEAN] - e["reward"]) < 1e-6


def _as_trl_logs(row, step_seqs, column: str, seq_column: str) -> float:
    """Ours as this TRL logs it: token-weighted over both ranks (our step ``column``), or, given
    the step's sequences (TRL 1.0), the mean over ranks of each rank's token-weighted mean of
    ``seq_column``."""
    if step_seqs is None:
        return row[column]
    n = step_seqs.groupby("rank")[schema.Seq.LENGTH].sum()
    weighted = step_seqs[seq_column] * step_seqs[schema.Seq.LENGTH]
    return float((weighted.groupby(step_seqs["rank"]).sum() / n).mean())


def _rank_mean_logging() -> bool:
    """True when this TRL logs its loss metrics as the mean over processes of each process's
    token mean (TRL 1.0's ``masked_batch_mean`` + ``gather(...).nanmean()``); False when it
    weights tokens over all processes (``global_masked_mean``, later 1.x)."""
    import inspect

    return "global_masked_mean" not in inspect.getsource(GRPOTrainer._compute_loss)


def test_unsupported_trl_versions_are_refused_naming_the_range(monkeypatch):
    """TRL 1.0 through 1.16 are recorded (patch releases too); any other release is refused
    when attach is called, with a message naming the supported range; the installed TRL is in
    it (CI runs this file on TRL 1.0.0 and 1.16)."""
    from training_hooks import trl as hooks

    for ok in ("1.0.0", "1.8.2", "1.16.0", "1.16.3"):
        hooks.check_trl_version(ok)
    for bad in ("0.29.1", "1.17.0", "2.0.0", "not-a-version"):
        with pytest.raises(ValueError, match=r"TRL 1\.0 through 1\.16 \(trl>=1\.0,<1\.17\)"):
            hooks.check_trl_version(bad)
    hooks.check_trl_version()  # the installed one
    monkeypatch.setattr(hooks, "_version", lambda dist: "1.17.0")
    trainer = GRPOTrainer.__new__(GRPOTrainer)  # attach refuses before reading anything else
    with pytest.raises(ValueError, match="this is trl 1.17.0"):
        attach(trainer, root="unused")
    assert not isinstance(trainer, hooks.GSPODashMixin)  # left as it was


def test_every_wrapped_trl_internal_exists_in_the_installed_trl():
    """The internals attach wraps exist on the installed GRPOTrainer, and Trainer's public
    compute_loss is what the recorder overrides."""
    from training_hooks.trl import TRL_INTERNALS, GSPODashMixin

    for name in TRL_INTERNALS:
        assert callable(getattr(GRPOTrainer, name, None)), name
    assert (
        "compute_loss" in GSPODashMixin.__dict__ and "_compute_loss" not in GSPODashMixin.__dict__
    )


def test_stop_tokens_are_found_where_each_trl_keeps_them():
    """TRL 1.0 keeps eos_token_id on the trainer, 1.4 - 1.12 only on its tokenizer, 1.16 a list
    eos_token_ids; the pad id is the tokenizer's (pad_token_id on the trainer in 1.0)."""
    from types import SimpleNamespace

    from training_hooks.trl import _stop_token_ids

    tok = SimpleNamespace(eos_token_id=1, pad_token_id=0)
    assert _stop_token_ids(SimpleNamespace(eos_token_id=1, pad_token_id=0)) == [1, 0]
    assert _stop_token_ids(SimpleNamespace(_tokenizer=tok)) == [1, 0]
    assert _stop_token_ids(SimpleNamespace(eos_token_ids=[1, 7], _tokenizer=tok)) == [1, 7, 0]
