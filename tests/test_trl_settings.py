"""What a TRL run states is what its cards use: ``attach``'s default run name (the ratio level and
the loss, not "trl-dapo" for every run), and the settings run.json holds (updates per batch from
num_iterations / steps_per_generation / gradient_accumulation_steps, max_grad_norm, β) read by
Health instead of "unknown". No TRL needed: the helpers take what ``attach`` writes."""

from __future__ import annotations

import calendar

import numpy as np
import pandas as pd

from training_hooks.findings import CLIP_HIGH, CLIP_ONE_UPDATE, facts_of
from training_hooks.findings.clip import HIGH, LOW, NO_OFF_POLICY
from training_hooks.findings.core import RunFacts
from training_hooks.findings.onpolicy import NAME as ONE_UPDATE_CHECK
from training_hooks.findings.run import run_health
from training_hooks.schema import RunInfo, Step
from training_hooks.trl_loss import default_run_name

WHEN = calendar.timegm((2026, 12, 7, 9, 30, 0, 0, 0, 0))  # 2026-12-07 09:30 UTC


def test_default_run_name_says_ratio_level_loss_model_and_start():
    """TRL's GSPO recipe "gspo", its default loss_type at the sequence level "gspo-dapo", at the
    token level "grpo-dapo", Dr. GRPO "grpo-dr-grpo"; the model's last path component (a Hub
    id's name, a local folder's); the UTC start as MMDD-HHMM; an unknown loss "trl"."""
    hub = "Qwen/Qwen2.5-0.5B-Instruct"
    assert default_run_name("gspo", hub, WHEN) == "gspo-Qwen2.5-0.5B-Instruct-1207-0930"
    assert default_run_name("dapo-seq", hub, WHEN) == "gspo-dapo-Qwen2.5-0.5B-Instruct-1207-0930"
    assert default_run_name("dapo", "/tmp/tiny llama/", WHEN) == "grpo-dapo-tiny-llama-1207-0930"
    assert default_run_name("dr_grpo", None, WHEN) == "grpo-dr-grpo-1207-0930"
    assert default_run_name("unknown", "m", WHEN) == "trl-m-1207-0930"
    assert len(default_run_name("grpo", "x" * 200, WHEN)) == len("grpo-") + 40 + len("-1207-0930")


def _trl_run(**config) -> RunInfo:
    """A run.json as ``attach`` writes it (source "trl", TRL's settings in its config)."""
    return RunInfo(run_id="t", name="t", algorithm="gspo", source="trl", config=config)


def test_updates_per_batch_max_grad_norm_and_beta_come_from_trls_settings():
    """num_iterations 2 with steps_per_generation = gradient_accumulation_steps: 2 updates per
    generated batch; steps_per_generation 4 over accumulation 2: 2; 1 x 1 / 1: 1 (then the clip
    is judged as clipping at one update); a setting missing or a fraction of an update: unknown.
    max_grad_norm and beta as TRL's arguments hold them."""
    base = {"steps_per_generation": 1, "gradient_accumulation_steps": 1}
    facts = facts_of(_trl_run(num_iterations=2, max_grad_norm=1.0, beta=0.04, **base))
    assert (facts.updates_per_batch, facts.max_grad_norm, facts.kl_coef) == (2, 1.0, 0.04)
    assert facts.updates_origin == (
        "num_iterations = 2, steps_per_generation = 1, gradient_accumulation_steps = 1: "
        "TRL's settings in run.json"
    )
    four = {"num_iterations": 1, "steps_per_generation": 4, "gradient_accumulation_steps": 2}
    assert facts_of(_trl_run(**four)).updates_per_batch == 2
    assert facts_of(_trl_run(num_iterations=1, **base)).updates_per_batch == 1
    assert facts_of(_trl_run(**base)).updates_per_batch is None  # num_iterations not stated
    three = {"num_iterations": 1, "steps_per_generation": 3, "gradient_accumulation_steps": 2}
    assert facts_of(_trl_run(**three)).updates_per_batch is None  # 1.5 updates per batch
    ours = RunInfo(run_id="o", name="o", algorithm="gspo", config={"num_iterations": 2, **base})
    assert facts_of(ours).updates_per_batch is None  # not TRL's: its words are not read as TRL's


def test_clip_on_a_run_with_every_step_on_policy_is_not_called_lag_unknown():
    """Every step declared on-policy (policy_lag 0) and 40% of tokens clipped, updates per batch
    unknown: clip_high is judged on all steps and its Checked line says no step is off-policy,
    not that the lag is unknown; with 1 update per batch stated (TRL's settings) the same run is
    judged as clipping at one update per batch instead."""
    n = 40
    df = pd.DataFrame(
        {
            Step.STEP: np.arange(n),
            Step.POLICY_LAG: np.zeros(n, int),
            Step.TOKEN_CLIP_FRACTION: np.full(n, 0.4),
        }
    )
    report = run_health(df, RunFacts("grpo", token_eps=(0.2, 0.2)))
    assert CLIP_HIGH in {f.code for f in report.findings}
    assert report.checked[HIGH] == NO_OFF_POLICY and report.not_checked[LOW] == NO_OFF_POLICY
    facts = facts_of(
        RunInfo(
            run_id="t",
            name="t",
            algorithm="grpo",
            source="trl",
            token_eps_low=0.2,
            token_eps_high=0.2,
            config={
                "num_iterations": 1,
                "steps_per_generation": 1,
                "gradient_accumulation_steps": 1,
            },
        )
    )
    report = run_health(df, facts)
    codes = {f.code for f in report.findings}
    assert CLIP_ONE_UPDATE in codes and CLIP_HIGH not in codes
    assert report.checked[ONE_UPDATE_CHECK].startswith("num_iterations = 1")


def test_an_imports_updates_follow_steps_per_generation_where_stated():
    """A TRL import stating steps_per_generation 4 and gradient_accumulation_steps 2 beside the
    log: 1 x 4 / 2 = 2 updates per generated batch (TRL's default num_iterations said so), not
    the 1 num_iterations alone would give; 3 / 2 is no whole number: unknown; without them the
    default 1, as before."""
    from training_hooks.schema import ImportRecord

    def imported(**settings) -> RunInfo:
        said = {k: {"value": v, "from": f"args.json: {k}"} for k, v in settings.items()}
        rec = ImportRecord("trl", "trainer_state.json", settings=said)
        return RunInfo(run_id="i", name="i", algorithm="gspo", imported=rec)

    facts = facts_of(imported(steps_per_generation=4, gradient_accumulation_steps=2))
    assert facts.updates_per_batch == 2
    assert facts.updates_origin == (
        "TRL's default num_iterations = 1; the log does not state it; steps_per_generation = 4, "
        "gradient_accumulation_steps = 2 (args.json: steps_per_generation)"
    )
    assert facts_of(imported(num_iterations=2, max_grad_norm=0.5)).max_grad_norm == 0.5
    three = imported(steps_per_generation=3, gradient_accumulation_steps=2)
    assert facts_of(three).updates_per_batch is None
    assert facts_of(imported()).updates_per_batch == 1
