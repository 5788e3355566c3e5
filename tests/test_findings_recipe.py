"""``gspo_recipe_departs``: a run on the sequence ratio whose loss, ε or β is not the recipe TRL
documents for the GSPO paper (loss_type "grpo", ε 3e-4/4e-4, β 0), and where β is stated."""

from __future__ import annotations

import numpy as np
import pandas as pd

from training_hooks.findings import facts_of
from training_hooks.findings.core import Coverage, RunFacts
from training_hooks.findings.recipe import (
    GSPO_RECIPE_DEPARTS,
    RECIPE_CHECK,
    check_gspo_recipe,
    stated_kl_coef,
)
from training_hooks.findings.run import run_health
from training_hooks.schema import ImportRecord, RunInfo, Step

GSPO = (3e-4, 4e-4)


def _check(facts: RunFacts):
    cov = Coverage()
    return check_gspo_recipe(pd.DataFrame(), None, facts, cov), cov


def test_trl_sequence_level_with_its_defaults_departs_on_all_three():
    """TRL 1.16's defaults with importance_sampling_level="sequence" (loss_type "dapo", ε 0.2,
    β 0.04): one info naming the three departures with the run's and the recipe's values, the
    advice asking for exactly those three settings."""
    (f,), cov = _check(RunFacts("dapo-seq", seq_eps=(0.2, 0.2), kl_coef=0.04, kl_coef_origin="b"))
    assert (f.code, f.severity) == (GSPO_RECIPE_DEPARTS, "info")
    assert f.title == "GSPO (DAPO aggregation): not the GSPO paper's recipe"
    assert "with 3 settings other than the recipe" in f.evidence
    assert "DAPO aggregation: it sums per-token terms" in f.evidence
    assert "ε 0.2/0.2 in the sequence unit (the paper's 3e-4/4e-4)" in f.evidence
    assert "β 0.04, b (the paper's 0" in f.evidence
    assert "set loss_type='grpo', epsilon=3e-4, epsilon_high=4e-4, beta=0.0 (" in f.advice
    assert cov.checked == {RECIPE_CHECK: ""}


def test_the_recipe_itself_and_what_is_not_stated():
    """The recipe (ε as float32 stores it) gives nothing and a clean Checked line; β unstated is
    not compared (said on the Checked line), never taken for 0; a recorder default ε is said;
    only the departing settings are asked for (β alone here)."""
    eps32 = tuple(float(np.float32(e)) for e in GSPO)
    assert eps32 != GSPO  # 3.0000001e-4: the comparison allows a float32 round trip
    found, cov = _check(RunFacts("gspo", seq_eps=eps32, kl_coef=0.0))
    assert found == [] and cov.checked == {RECIPE_CHECK: ""}
    found, cov = _check(RunFacts("gspo", seq_eps=GSPO, defaults=("seq_eps",)))
    assert found == []
    assert cov.checked[RECIPE_CHECK] == (
        "ε is the recorder's default 3e-4/4e-4: the run did not state it; "
        "β not stated: not compared"
    )
    (f,), _ = _check(RunFacts("gspo", seq_eps=GSPO, kl_coef=0.04))
    assert "with 1 setting other" in f.evidence and "β 0.04 (the paper's 0" in f.evidence
    assert "set beta=0.0 (" in f.advice and "loss_type" not in f.advice.split("(")[0]


def test_token_level_unknown_and_other_losses():
    """A token-ratio run (GRPO, DAPO) and an unknown algorithm are not judged, with the reason;
    CISPO on s departs by its loss, its ε (a cap, not a clip) not compared; a demo-style ε stated
    as the run's own is still a departure, said as the run's own."""
    for algo, why in (("grpo", "token ratios"), ("dapo", "token ratios"), ("?", "algorithm")):
        found, cov = _check(RunFacts(algo, kl_coef=0.04))
        assert found == [] and why in cov.not_checked[RECIPE_CHECK] and not cov.checked
    (f,), _ = _check(RunFacts("cispo-seq", seq_eps=(0.2, 5.0), kl_coef=0.0))
    assert "with 1 setting other" in f.evidence and "CISPO loss on the sequence ratio" in f.evidence
    assert "ε 0.2/5" not in f.evidence
    (f,), _ = _check(RunFacts("gspo", seq_eps=(1e-3, 1e-3), kl_coef=0.0, eps_source="demo"))
    assert "ε 1e-3/1e-3 in the sequence unit, stated as the run's own (eps_source = 'demo')" in (
        f.evidence
    )


def test_beta_is_read_wherever_the_run_states_it():
    """β from TRL's config (attach), an import's settings, verl's use_kl_loss / kl_loss_coef
    (false: 0; true: the coefficient; a KL in the reward: not the loss's β), Tinker's
    kl_penalty_coef; None when nothing states it; facts_of carries it to the check."""
    trl = RunInfo(run_id="t", name="t", algorithm="dapo-seq", config={"beta": 0.04})
    assert stated_kl_coef(trl) == (0.04, "config beta")
    actor = {"actor_rollout_ref": {"actor": {"use_kl_loss": False, "kl_loss_coef": 0.001}}}
    verl = RunInfo(run_id="v", name="v", algorithm="gspo", config=actor)
    assert stated_kl_coef(verl) == (0.0, "config actor_rollout_ref.actor.use_kl_loss = false")
    actor["actor_rollout_ref"]["actor"]["use_kl_loss"] = True
    assert stated_kl_coef(verl) == (0.001, "config actor_rollout_ref.actor.kl_loss_coef")
    in_reward = {**actor, "algorithm": {"use_kl_in_reward": True}}
    in_reward["actor_rollout_ref"] = {"actor": {"use_kl_loss": False}}
    assert stated_kl_coef(RunInfo(run_id="r", name="r", algorithm="gspo", config=in_reward)) == (
        None,
        "",
    )
    tinker = RunInfo(run_id="k", name="k", algorithm="gspo", config={"kl_penalty_coef": 0})
    assert stated_kl_coef(tinker) == (0.0, "config kl_penalty_coef")
    assert stated_kl_coef(RunInfo(run_id="n", name="n", algorithm="gspo", config={"lr": 1e-6})) == (
        None,
        "",
    )
    imp = ImportRecord(
        "trl", "trainer_state.json", settings={"beta": {"value": 0.0, "from": "args.json: beta"}}
    )
    imported = RunInfo(run_id="i", name="i", algorithm="gspo", imported=imp, config={"beta": 0.5})
    assert stated_kl_coef(imported) == (0.0, "args.json: beta")
    facts = facts_of(trl)
    assert (facts.kl_coef, facts.kl_coef_origin) == (0.04, "config beta")


def test_the_health_report_carries_it_on_a_trl_default_gspo_run():
    """run_health on a step table of a TRL "importance_sampling_level='sequence'" run with its
    defaults: the finding is in the report and its check on the Checked line."""
    df = pd.DataFrame({Step.STEP: np.arange(10), Step.REWARD_MEAN: np.linspace(0, 1, 10)})
    info = RunInfo(
        run_id="t",
        name="t",
        algorithm="dapo-seq",
        seq_eps_low=0.2,
        seq_eps_high=0.2,
        config={"beta": 0.04, "loss_type": "dapo", "importance_sampling_level": "sequence"},
    )
    report = run_health(df, facts_of(info))
    (f,) = [f for f in report.findings if f.code == GSPO_RECIPE_DEPARTS]
    assert "with 3 settings other than the recipe" in f.evidence
    assert RECIPE_CHECK in report.checked
