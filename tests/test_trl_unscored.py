"""A reward function that returns None: what TRL makes of it, what the hook records
(``rewards/<fn>/unscored``, ``rewards/unscorable``) and Health's ``reward_unscored``.

TRL 1.16 turns a None into NaN and sums the functions' weighted rewards with nansum: beside a
function that scored, an abstaining one counts as 0; a completion no function scored is
"unscorable" (reward NaN, advantage 0).
"""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("trl", reason="trl is not installed: pip install 'gspo-dash[trl]'")

import torch  # noqa: E402
from test_trl import PROMPTS, model_dir, reward_a  # noqa: E402, F401  (model_dir: the fixture)

from training_hooks import schema, tables  # noqa: E402
from training_hooks.findings import facts_of, run_health  # noqa: E402
from training_hooks.findings.core import Coverage, RunFacts  # noqa: E402
from training_hooks.findings.unscored import (  # noqa: E402
    NAME,
    REWARD_UNSCORED,
    check_reward_unscored,
)
from training_hooks.names import unscored_function  # noqa: E402
from training_hooks.schema import Seq, Step  # noqa: E402
from training_hooks.trl import GSPODashMixin, unscored_counts  # noqa: E402

NAN = math.nan


def test_unscored_counts_by_hand():
    """8 completions, 2 functions: judge abstains on rows 1, 2, 5, fmt on row 2 only, so judge
    leaves 3 unscored, fmt 1, and row 2 is unscored by both (unscorable: 1)."""
    rewards_N_F = torch.tensor(
        [[1, 0], [NAN, 1], [NAN, NAN], [0, 0], [1, 1], [NAN, 0], [0, 1], [1, 0]],
        dtype=torch.float32,
    )
    got = unscored_counts(rewards_N_F, ["judge", "fmt"])
    assert {k: float(v) for k, v in got.items()} == {
        "rewards/judge/unscored": 3.0,
        "rewards/fmt/unscored": 1.0,
        "rewards/unscorable": 1.0,
    }
    assert all(v.dim() == 0 for v in got.values())  # 0-d: they ride the step's transfer
    assert unscored_function("rewards/judge/unscored") == "judge"
    assert unscored_function("train/rewards/my/fn/unscored") == "my/fn"
    assert unscored_function("rewards/unscorable") is None
    assert unscored_function("rewards/judge/mean") is None


def test_a_generation_keeps_its_unscored_counts_for_its_steps():
    """The TRL stub: ``_gd_new_generation`` keeps the counts with the generation (over every
    process: TRL gathers rewards_per_func), and both steps trained on it carry them."""
    me = SimpleNamespace(
        args=SimpleNamespace(steps_per_generation=1),
        num_iterations=2,
        _step=4,
        state=SimpleNamespace(global_step=4),
        reward_func_names=["judge", "fmt"],
        _gd_generations={},
    )
    rewards_N_F = torch.tensor([[NAN, 1.0], [0.5, NAN], [NAN, NAN], [1.0, 0.0]])
    rollout = GSPODashMixin._gd_new_generation(me, rewards_N_F, ["w"] * 4, ["p"] * 4)
    assert rollout == 2  # _step 4 // (1 * 2)
    gen = me._gd_generations[2]
    assert {k: float(v) for k, v in gen.unscored.items()} == {
        "rewards/judge/unscored": 2.0,
        "rewards/fmt/unscored": 2.0,
        "rewards/unscorable": 1.0,
    }
    # TRL's own per-function mean: over the scored completions only, (0.5 + 1) / 2 (nanmean)
    assert float(gen.reward_means["rewards/judge/mean"]) == 0.75


def _steps(judge, fmt=None, none=None, n=16) -> pd.DataFrame:
    df = pd.DataFrame({Step.STEP: np.arange(1, len(judge) + 1), Step.NUM_SEQUENCES: n})
    df["rewards/judge/unscored"] = judge
    if fmt is not None:
        df["rewards/fmt/unscored"] = fmt
    if none is not None:
        df["rewards/unscorable"] = none
    return df


def test_the_finding_counts_by_function_and_says_what_trl_did():
    """judge abstains on 0, 5, 2, 0 completions, 1 of them (step 3) scored by no function: 6
    were counted as 0 beside fmt's score (5 at step 2, 1 at step 3)."""
    cov = Coverage()
    df = _steps([0, 5, 2, 0], [0, 0, 1, 0], [0, 0, 1, 0])
    (f,) = check_reward_unscored(df, None, RunFacts(), cov)
    assert f.code == REWARD_UNSCORED and f.severity == "warning" and f.basis is None
    assert f.steps == (2, 3) and f.culprits == (2, 3)
    assert f.title == "2 reward functions left completions unscored"
    assert (
        "judge returned None for completions at 2 of 4 steps (steps 2, 3): up to 5 at step 2 "
        "(of the 16 it recorded)." in f.evidence
    )
    assert "fmt returned None for completions at 1 of 4 steps (step 3): up to 1 at step 3" in (
        f.evidence
    )
    # judge: 5 + (2 - 1) = 6 beside fmt's score; fmt: 1 - 1 = 0
    assert "For 6 of them (summed over steps: " in f.evidence
    # steps 2 and 3 trained on one batch of samples (rollout 1): it counts once, 5 - 0
    df = _steps([0, 5, 5, 0], [0, 0, 0, 0], [0, 0, 0, 0]).assign(**{Step.ROLLOUT: [0, 1, 1, 2]})
    (once,) = check_reward_unscored(df, None, RunFacts(), Coverage())
    assert "For 5 of them (each batch of samples counted once)" in once.evidence
    assert "counted as 0" in f.evidence
    assert "Up to 1 a step had no score from any function" in f.evidence
    assert "judge and fmt" in f.advice and NAME in cov.checked


def test_one_function_only_loses_the_signal_and_none_is_no_finding():
    (f,) = check_reward_unscored(_steps([3, 0]), None, RunFacts(), Coverage())
    assert f.title == "Reward function judge left completions unscored"
    assert "only reward function" in f.evidence and "advantage 0" in f.evidence
    assert "counted as 0" not in f.evidence
    cov = Coverage()
    assert check_reward_unscored(_steps([0, 0], [0, 0], [0, 0]), None, RunFacts(), cov) == []
    assert NAME in cov.checked
    cov = Coverage()
    plain = pd.DataFrame({Step.STEP: [1, 2], "rewards/judge/mean": [0.5, 0.5]})
    assert check_reward_unscored(plain, None, RunFacts(), cov) == []
    assert "not logged" in cov.not_checked[NAME]
    # an import: no tool's log counts them; not applicable, so not listed either way
    cov = Coverage()
    assert check_reward_unscored(plain, None, RunFacts(tool="trl"), cov) == []
    assert NAME not in cov.not_checked and NAME not in cov.checked


def judge(completions, **kwargs):
    """Abstains (None) on a completion holding "b"; else 1 when it holds "a", 0 otherwise."""
    return [None if "b" in c.split() else float("a" in c.split()) for c in completions]


@pytest.mark.slow
def test_trl_run_with_an_abstaining_judge_is_recorded_and_found(model_dir, tmp_path):  # noqa: F811
    """4 steps of TRL 1.16 with reward_a and judge: the recorded counts equal judge's None
    count over each step's recorded completions, each sequence's reward is TRL's nansum (judge
    counted as 0 where it abstained), and Health warns with judge named."""
    from datasets import Dataset
    from transformers import PreTrainedTokenizerFast, PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from training_hooks.trl import attach

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        max_steps=4,
        num_iterations=2,
        learning_rate=0.05,
        beta=0.0,
        importance_sampling_level="sequence",
        loss_type="grpo",
        epsilon=3e-4,
        epsilon_high=4e-4,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[reward_a, judge],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": list(PROMPTS)}),
        processing_class=PreTrainedTokenizerFast.from_pretrained(model_dir),
    )
    attach(trainer, root=str(tmp_path / "runs"), name="judge")
    trainer.remove_callback(PrinterCallback)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    run_dir = trainer.gspo_dash_run_dir
    steps = tables.read_table(run_dir, schema.STEPS_DIR).sort_values(Step.STEP)
    seqs = tables.read_table(run_dir, schema.SEQUENCES_DIR)
    texts = seqs.groupby(Seq.STEP)[Seq.COMPLETION].apply(list)
    want = {s: sum(j is None for j in judge(t)) for s, t in texts.items()}
    got = dict(zip(steps[Step.STEP], steps["rewards/judge/unscored"], strict=True))
    assert got == want and sum(want.values()) > 0, (got, want)
    assert (steps["rewards/reward_a/unscored"] == 0).all()
    assert (steps["rewards/unscorable"] == 0).all()  # reward_a always scores
    # TRL's sum: reward_a + judge, judge's None as 0
    j = [0.0 if r is None else r for r in judge(seqs[Seq.COMPLETION].tolist())]
    total = np.array(reward_a(seqs[Seq.COMPLETION].tolist())) + np.array(j)
    np.testing.assert_allclose(seqs[Seq.REWARD].to_numpy(np.float64), total, atol=1e-6)
    report = run_health(steps, facts_of(schema.read_run_info(run_dir)))
    found = {f.code: f for f in report.findings}[REWARD_UNSCORED]
    assert found.severity == "warning" and found.title.endswith("judge left completions unscored")
    assert set(found.steps) == {s for s, n in want.items() if n}
    assert "counted as 0" in found.evidence
    # num_iterations=2: steps 1-2 and 3-4 train on one batch each, counted once
    assert want[1] == want[2] and want[3] == want[4]
    assert f"For {want[1] + want[3]} of them (each batch of samples counted once)" in found.evidence
