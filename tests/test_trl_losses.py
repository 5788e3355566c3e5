"""TRL's other losses recorded as what they are: ``attach`` on a CISPO and a SAPO run.

The tiny Llama of ``test_trl`` trains 2 steps with num_iterations=2 (step 1 on-policy, step 2 on
the same completions with the policy one update later). The run's algorithm is TRL's loss_type,
neither clip unit takes TRL's eps (neither loss has a hard clip), and each sequence's recorded
attenuation equals the one autograd gives on the very tensors the step recorded:

    attenuation_b = 1 - sum_t |d l^sum / d log pi_bt| / sum_t |r_bt A_b|

with l^sum TRL's loss (``loss_for("trl", settings)``) under the sum reduction.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("trl", reason="trl is not installed: pip install 'gspo-dash[trl]'")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from test_trl import _train, model_dir  # noqa: E402, F401, F811  (model_dir: the fixture)

from gspo_metrics import loss_for  # noqa: E402
from training_hooks import schema, tables  # noqa: E402
from training_hooks.recorder import RunRecorder  # noqa: E402
from training_hooks.schema import Seq, Step  # noqa: E402

#: (loss_type, the GRPOConfig settings of the run): CISPO's cap at epsilon_high as an absolute
#: weight (1.02: the second step's ratios pass it), SAPO's temperatures TRL's defaults
RUNS = {
    "cispo": {"epsilon": 0.2, "epsilon_high": 1.02},
    "sapo": {"epsilon": 0.2},
}


def _autograd_attenuation(loss_type, settings, step) -> np.ndarray:
    """(B,) 1 - sum_t |grad| / sum_t |r A| by autograd of TRL's loss under the sum reduction."""
    tool = loss_for("trl", {"loss_type": loss_type, **settings, "reduction": "sum"})
    lp = step["logprobs"].double().requires_grad_(True)
    old, mask = step["old_logprobs"].double(), step["mask"]
    adv = step["advantages"].double()
    tool(lp, old, adv, mask).loss.backward()
    m = mask.bool()
    grad = torch.where(m, lp.grad, 0.0).abs().sum(-1)
    r = torch.exp(torch.where(m, lp.detach() - old, 0.0))
    plain = torch.where(m, r * adv.abs()[:, None], 0.0).sum(-1)
    return (1 - grad / plain).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", sorted(RUNS))
def test_attach_records_cispo_and_sapo_as_such_with_their_attenuation(
    loss_type,
    model_dir,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    """algorithm "cispo" / "sapo", no clip eps of TRL's, and the sequence table's attenuation
    equal to autograd's on the recorded tensors (float32 storage: 1e-5); the step means over
    A > 0 and A < 0 are the means of those sequences'."""
    steps: dict[int, dict] = {}
    log_step = RunRecorder.log_step

    def keep(self, step, **kw):
        steps[step] = {k: v.detach().clone() for k, v in kw.items() if torch.is_tensor(v)}
        return log_step(self, step, **kw)

    monkeypatch.setattr(RunRecorder, "log_step", keep)
    settings = RUNS[loss_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = _train(
            model_dir, tmp_path, "token", record=True, steps=2, loss_type=loss_type, **settings
        )
    run_dir = trainer.gspo_dash_run_dir
    info = schema.read_run_info(run_dir)
    assert info.algorithm == loss_type and info.name == "trl-token"
    assert (info.token_eps_low, info.token_eps_high) == (0.2, 0.2)  # the defaults, not TRL's
    seqs = tables.read_table(run_dir, schema.SEQUENCES_DIR).sort_values([Seq.STEP, Seq.GROUP])
    table = tables.read_table(run_dir, schema.STEPS_DIR).set_index(Step.STEP)
    assert sorted(steps) == [1, 2] and table[Step.POLICY_LAG].tolist() == [0, 1]
    for step, inputs in steps.items():
        rows = seqs[seqs[Seq.STEP] == step].sort_values([Seq.GROUP, Seq.SAMPLE])
        want = _autograd_attenuation(loss_type, settings, inputs)
        got = rows[Seq.ATTENUATION].to_numpy(np.float64)
        assert np.isnan(got).tolist() == np.isnan(want).tolist()  # A = 0: unknown, both
        np.testing.assert_allclose(got, want, atol=1e-5, equal_nan=True)
        adv = rows[Seq.ADVANTAGE].to_numpy()
        for column, side in (
            (Step.ATTENUATION_POS_MEAN, adv > 0),
            (Step.ATTENUATION_NEG_MEAN, adv < 0),
        ):
            if side.any():
                assert table.loc[step, column] == pytest.approx(np.nanmean(got[side]), abs=1e-6)
    # on-policy (ratio 1): SAPO's gate has slope 1 and CISPO's weight 1 is under the cap: 0
    on = seqs[(seqs[Seq.STEP] == 1) & seqs[Seq.ATTENUATION].notna()][Seq.ATTENUATION]
    assert len(on) and (on.abs() < 1e-6).all()
    off = seqs[(seqs[Seq.STEP] == 2)][Seq.ATTENUATION]
    assert pd.notna(off).any() and (off.abs() > 1e-6).any()  # the second step removes some
