"""The demo's CISPO and SAPO runs: the registered loss with its published defaults, labelled as
such, no clip range, and the attenuation recorded at every step."""

from __future__ import annotations

import glob
import math
import os

import pandas as pd
import pytest
import torch

from gspo_metrics import get_loss
from training_hooks import schema
from training_hooks.demo import DemoConfig, Session, parse_args, record_run
from training_hooks.demo import config as demo_config
from training_hooks.demo.config import DEMO_GSPO_EPS
from training_hooks.demo.loop import Learner
from training_hooks.demo.report import header
from training_hooks.schema import Step

#: small, but with the default warm start: a policy that solves some prompts, so mixed groups
#: (a nonzero advantage, where attenuation is known) in every minibatch
SMALL = dict(steps=3, group_size=8, prompts_per_step=8, minibatches=2)


def _steps(run_dir: str) -> pd.DataFrame:
    files = sorted(glob.glob(os.path.join(run_dir, schema.STEPS_DIR, "*.parquet")))
    assert files, f"no steps parquet in {run_dir}"
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def test_cispo_and_sapo_configs():
    """No clip range for CISPO and SAPO (an eps is refused, naming the field), their loss's
    published parameters instead, both clip units measured with the demo's default ranges; the
    default --algorithms is still GRPO and GSPO."""
    cispo, sapo = DemoConfig(algorithm="cispo"), DemoConfig(algorithm="sapo")
    assert not cispo.hard_clip and not sapo.hard_clip
    assert DemoConfig(algorithm="grpo").hard_clip and DemoConfig(algorithm="gspo").hard_clip
    assert cispo.eps_low is None and cispo.eps_high is None
    assert cispo.loss_params() == {"weight_max": 5.0}
    assert sapo.loss_params() == {"tau_pos": 1.0, "tau_neg": 1.05}
    assert DemoConfig(algorithm="grpo").loss_params() == {"eps_low": 0.2, "eps_high": 0.2}
    with pytest.raises(ValueError, match="no clip range"):
        _ = cispo.eps
    with pytest.raises(ValueError, match="^eps_low applies to the hard-clip"):
        DemoConfig(algorithm="sapo", eps_low=0.1)
    for c in (cispo, sapo):
        assert c.clip_ranges() == {"token_eps": (0.2, 0.2), "seq_eps": DEMO_GSPO_EPS}
        stored = c.stored()
        assert "eps_low" not in stored and "eps_source" not in stored
        assert "paper_eps" not in stored
    assert cispo.stored()["weight_max"] == 5.0
    assert (sapo.stored()["tau_pos"], sapo.stored()["tau_neg"]) == (1.0, 1.05)

    assert Session().algorithms == ("grpo", "gspo")
    assert demo_config.ALGORITHMS == ("grpo", "gspo", "cispo", "sapo")
    # the command line's eps goes to the hard-clip runs only
    _, configs = parse_args(["--algorithms", "grpo,cispo,sapo", "--eps-low", "0.1", "--no-mlflow"])
    assert [(c.algorithm, c.eps_low) for c in configs] == [
        ("grpo", 0.1),
        ("cispo", None),
        ("sapo", None),
    ]
    text = header(configs, "runs", None)
    assert "CISPO no clip; weight_max 5 (config.LOSS_PARAMS)" in text
    assert "SAPO no clip; tau_pos 1, tau_neg 1.05 (config.LOSS_PARAMS)" in text
    assert "GRPO clip range: 0.1/0.2 per token, set by option" in text


def test_learner_calls_the_registered_loss_with_its_parameters():
    """The learner's loss is the registry's; CISPO's per-sequence output has its ``capped``
    share, which a clip loss does not. (No warm start: which loss the learner holds does not
    depend on the weights, and the quick tier trains no model.)"""
    for name in ("cispo", "sapo"):
        learner = Learner.start(DemoConfig(algorithm=name, **SMALL, warmup_steps=0))
        assert learner.loss_fn is get_loss(name)
    lp = torch.tensor([[0.0, -1.0]], dtype=torch.float64)
    old = torch.tensor([[-2.0, -1.0]], dtype=torch.float64)  # r = (e^2, 1): capped at 5 once
    out = get_loss("cispo")(
        lp, old, torch.tensor([1.0], dtype=torch.float64), torch.ones(1, 2, dtype=torch.bool),
        reduction="seq_mean_token_mean", **DemoConfig(algorithm="cispo").loss_params(),
    )  # fmt: skip
    # attenuation = 1 - (5 + 1) / (e^2 + 1), by hand
    assert out.per_sequence["capped"].item() == 0.5
    assert out.per_sequence["attenuation"].item() == pytest.approx(1 - 6 / (math.e**2 + 1))


@pytest.mark.slow
def test_short_cispo_and_sapo_runs_record_label_and_attenuation(tmp_path, monkeypatch):
    """A 3-rollout run of each: recorded as "cispo" / "sapo" with their parameters and no eps;
    the attenuation known (finite) at every off-policy step and exactly 0 at the on-policy ones
    (ratio 1: nothing capped, the gate at its full 4 sigma (1 - sigma) = 1). SAPO's gate removes
    a little where the ratio moved (1 - 4 sigma (1 - sigma) ~ tau^2 (r - 1)^2 / 4: above 0, far
    below 1); CISPO's cap of 5 is out of reach at policy lag 1, so the run is also trained with
    a cap of 1, which removes weight at off-policy steps."""
    session = Session(out=str(tmp_path), algorithms=("cispo", "sapo"), mlflow=False)
    runs = {}
    for config in session.configs(**SMALL):
        runs[config.algorithm] = record_run(config, session)
    monkeypatch.setitem(demo_config.LOSS_PARAMS, "cispo", {"weight_max": 1.0})
    capped = Session(out=str(tmp_path / "cap1"), algorithms=("cispo",), mlflow=False)
    runs["cispo cap 1"] = record_run(capped.configs(**SMALL)[0], capped)

    for label, res in runs.items():
        info = schema.read_run_info(res.run_dir)
        assert info.algorithm == label.split()[0]
        assert "eps_low" not in info.config and "eps_source" not in info.config
        steps = _steps(res.run_dir)
        assert len(steps) == 6
        off = steps[steps[Step.POLICY_LAG] > 0]
        on = steps[steps[Step.POLICY_LAG] == 0]
        assert len(off) == 3 and len(on) == 3
        att = off[Step.ATTENUATION_MEAN]
        assert att.notna().all() and att.map(math.isfinite).all(), label
        assert (on[Step.ATTENUATION_MEAN].abs() < 1e-6).all(), label
        if label == "sapo":
            assert ((att > 0) & (att < 0.05)).all()
        elif label == "cispo":
            assert (att == 0).all()  # no token ratio reached 5
        else:
            assert ((att > 0) & (att < 1)).all()
    assert schema.read_run_info(runs["cispo"].run_dir).config["weight_max"] == 5.0
    assert schema.read_run_info(runs["cispo cap 1"].run_dir).config["weight_max"] == 1.0
    sapo = schema.read_run_info(runs["sapo"].run_dir).config
    assert (sapo["tau_pos"], sapo["tau_neg"]) == (1.0, 1.05)
