"""The Compare page's attenuation panel: four losses (CISPO, SAPO, GRPO, GSPO) on one scale.

Four runs by the real recorder, each step's ``loss`` the registered loss's ``LossOutput`` on the
same kind of batch (on-policy even steps, off-policy odd ones), so the recorder keeps its
``per_sequence["attenuation"]``: the panel draws one line per run, in its loss's own style and
legend name, with the step table's values.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from app_runs import run_ids
from test_app_pages import _assert_clean, _open

from app import line_style
from app.compare.panels import PANELS_BY_KEY
from gspo_metrics import get_loss
from training_hooks import RunRecorder
from training_hooks.schema import STEPS_DIR, Step

STEPS = 24
#: each run's loss (its registered name) and parameters: CISPO's weight clamped to [0.8, 1.2]
#: (verl's convention at its default clip ratios), SAPO's and GSPO's defaults, GRPO's eps 0.2
LOSSES = {
    "cispo": {"weight_min": 0.8, "weight_max": 1.2},
    "sapo": {},
    "grpo": {"eps_low": 0.2, "eps_high": 0.2},
    "gspo": {},
}


def _record(root, loss: str, seed: int) -> str:
    gen = torch.Generator().manual_seed(seed)
    P, G, T = 2, 4, 6
    fn = get_loss(loss)
    with RunRecorder(root=root, name=f"run-{loss}", algorithm=loss, group_size=G) as rec:
        for step in range(STEPS):
            old = -torch.rand(P * G, T, generator=gen) * 3
            off = step % 2 == 1
            noisy = (old + 0.3 * torch.randn(P * G, T, generator=gen)).clamp(max=0.0)  # log p <= 0
            logp = noisy if off else old.clone()
            rewards = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
            adv = ((rewards - rewards.mean(1, keepdim=True)) / 0.5).reshape(-1)
            mask = torch.ones(P * G, T, dtype=torch.bool)
            out = fn(logp, old, adv, mask, **LOSSES[loss])
            rec.log_step(
                step,
                rewards=rewards,
                logprobs=logp,
                old_logprobs=old,
                mask=mask,
                advantages=adv,
                loss=out,
                policy_lag=int(off),
            )
        return rec.run_id


@pytest.fixture(scope="module")
def four_losses(tmp_path_factory):
    root = tmp_path_factory.mktemp("four-losses")
    ids = {loss: _record(root, loss, seed) for seed, loss in enumerate(LOSSES)}
    return root, ids


def test_every_loss_is_drawn_by_its_ratio_level_and_named_by_its_loss():
    """The four runs' lines follow their ratio level (GSPO on s solid; GRPO, CISPO and SAPO on
    r_t dashed), none dotted (the unknown algorithm's); the legend names the level first and the
    loss after it, so two dashed runs are told apart by name (and colour)."""
    dashes = {loss: line_style.dash_for(loss) for loss in LOSSES}
    assert dashes == {"cispo": "dash", "sapo": "dash", "grpo": "dash", "gspo": "solid"}
    assert [line_style.algorithm_text(x) for x in LOSSES] == [
        "GRPO (CISPO loss)",
        "GRPO (SAPO loss)",
        "GRPO",
        "GSPO",
    ]
    every = {a: line_style.dash_for(a) for a in line_style.KNOWN_ALGORITHMS}
    assert line_style.UNKNOWN_DASH not in every.values()
    assert line_style.algorithm_text("cispo-seq") == "GSPO (CISPO loss)"
    assert every["cispo-seq"] == "solid"


@pytest.mark.slow
def test_compare_draws_four_losses_on_the_attenuation_panel(four_losses, app_env):
    """The attenuation panel holds one raw line per run (CISPO, SAPO, GRPO, GSPO), each in its
    loss's style, with the step table's attenuation_mean at the off-policy steps (the panel's
    default subset); the legend names each loss."""
    root, ids = four_losses
    app_env(root)
    at = _open("compare", {"runs": list(ids.values())})
    _assert_clean(at)
    (grid,) = [e for e in at.get("echarts_chart") if e.proto.id.rsplit("-", 2)[-2] == "grid"]
    spec = json.loads(grid.proto.spec)
    title = PANELS_BY_KEY["attenuation"].title
    i = [t["text"] for t in spec["title"]].index(title)
    raw = [s for s in spec["series"] if s["xAxisIndex"] == i and "|raw|" in s["id"]]
    by_run = {s["id"].split("|")[0]: s for s in raw}
    assert set(by_run) == set(ids.values())
    for loss, run_id in ids.items():
        s = by_run[run_id]
        assert s["lineStyle"]["type"] == line_style.echarts_type(loss)
        table = pq.read_table(root / run_ids(root)[f"run-{loss}"] / STEPS_DIR).to_pandas()
        off = table[table[Step.POLICY_LAG] == 1].sort_values(Step.STEP)
        want = off[Step.ATTENUATION_MEAN].to_numpy(np.float64)
        assert np.isfinite(want).all() and np.abs(want).mean() > 1e-3  # the trust region acts
        got = np.array([p[1] for p in s["data"]], dtype=np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-4)
    legend = json.loads(at.get("echarts_chart")[0].proto.spec)["legend"]["data"]
    names = {e["name"].rsplit(" · ", 1)[1] for e in legend}
    assert names == {"GRPO (CISPO loss)", "GRPO (SAPO loss)", "GRPO", "GSPO"}
