"""loss_for("verl", settings) against verl 0.9.1's own policy losses on the same tensors.

``verl.trainer.ppo.core_algos.get_policy_loss_fn(loss_mode)`` is called as verl's ``ppo_loss``
calls it: with an ``ActorConfig`` (its ``policy_loss`` a ``PolicyLossConfig``) whose
``global_batch_info`` is filled as ``ppo_loss`` fills it for one process and one batch (dp_size 1,
the batch's token count, its sequence count, the config's loss_scale_factor). Every loss_mode
loss_for supports, at every loss_agg_mode, with verl's defaults and with stated settings, on
inputs where verl's numerical clamps bind (a token at log r = 25, a sequence at log s = 12): loss
and gradient equal in float64 at rtol 1e-9. (verl's 1e-8 guards in its sequence means add
1e-8 to an integer token count in float32, where it vanishes, so they cost nothing here.)

Run in CI's verl virtualenv (``.ci/run``). Skipped where verl is not importable, except with
``GSPO_DASH_REQUIRE_VERL=1`` (CI), where a missing verl or another version fails.
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("GSPO_DASH_REQUIRE_VERL") == "1":
    import verl
else:
    verl = pytest.importorskip(
        "verl", reason="verl is not installed: pip install 'gspo-dash[verl]'"
    )

import torch  # noqa: E402
from loss_inputs import F64  # noqa: E402
from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, get_policy_loss_fn  # noqa: E402
from verl.workers.config import ActorConfig, PolicyLossConfig  # noqa: E402

from gspo_metrics import get_loss, loss_for  # noqa: E402
from gspo_metrics.spec import VERL_LOSS_MODES  # noqa: E402
from gspo_metrics.tool_losses import (  # noqa: E402
    VERL_DEFAULTS,
    VERL_REDUCTIONS,
    VERL_UNSUPPORTED,
    VERSIONS,
)

if verl.__version__ != VERSIONS["verl"]:
    if os.environ.get("GSPO_DASH_REQUIRE_VERL") == "1":
        raise AssertionError(f"verl {VERSIONS['verl']} required, {verl.__version__} installed")
    pytest.skip(f"loss_for follows verl {VERSIONS['verl']}", allow_module_level=True)

B, T = 6, 7
LENGTHS = (7, 5, 3, 1, 6, 4)
POLICY_LOSS_KEYS = ("loss_mode", "kl_cov_ratio", "ppo_kl_coef", "dro_beta")


def verl_config(settings: dict, mask: torch.Tensor) -> ActorConfig:
    """verl's ActorConfig for ``settings`` (flat names), with global_batch_info as ppo_loss sets it."""
    policy = {k: v for k, v in settings.items() if k in POLICY_LOSS_KEYS}
    actor = {k: v for k, v in settings.items() if k not in POLICY_LOSS_KEYS}
    config = ActorConfig(
        strategy="fsdp",
        rollout_n=4,
        ppo_micro_batch_size_per_gpu=1,
        policy_loss=PolicyLossConfig(**policy),
        **actor,
    )
    config.global_batch_info.update(
        dp_size=1,
        batch_num_tokens=int(mask.sum()),
        global_batch_size=B,
        loss_scale_factor=config.loss_scale_factor,
    )
    return config


def _inputs(per_token: bool, seed: int = 0):
    """Ragged rows; log-ratios ~ N(0, 0.35^2) and a far token per row; row 0's first token at
    log r = 25 (verl clamps at 20) and row 3 (one token) at log s = 12 (verl's gspo clamps at
    10); every log-prob <= 0 (DPPO reads probabilities)."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=gen, dtype=F64) * 2 - 0.4
    log_r = 0.35 * torch.randn(B, T, generator=gen, dtype=F64)
    log_r[:, 1] += torch.tensor([1.2, -1.5, 0.9, 0.0, 2.0, -2.2], dtype=F64)
    logp = (old + log_r).clamp(max=-0.01)
    old[0, 0], logp[0, 0] = -27.0, -2.0
    old[3, 0], logp[3, 0] = -13.0, -1.0
    mask = torch.zeros(B, T, dtype=torch.bool)
    for b, n in enumerate(LENGTHS):
        mask[b, :n] = True
    adv = torch.randn((B, T) if per_token else (B,), generator=gen, dtype=F64)
    return logp, old, adv, mask


#: Stated settings per loss_mode ({} = verl's defaults for the rest).
STATED: dict[str, list[dict]] = {
    "vanilla": [{}, {"clip_ratio_high": 0.28}, {"clip_ratio_c": 1.5}, {"clip_ratio": 0.3, "clip_ratio_low": None}],
    "gspo": [{}, {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4}],
    "sapo": [{}, {"tau_pos": 1.3, "tau_neg": 2.1}],
    "cispo": [{}, {"clip_ratio_low": 1.0, "clip_ratio_high": 4.0}],
    "geo_mean": [{}, {"clip_ratio_low": 0.4, "clip_ratio_high": 0.4}],
    "gpg": [{}],
    "dppo_tv": [{}, {"clip_ratio_c": 20.0, "clip_ratio_low": 0.05, "clip_ratio_high": 0.05}],
    "dppo_kl": [{}, {"clip_ratio_c": 20.0, "clip_ratio_low": 0.01, "clip_ratio_high": 0.02}],
    "dro": [{"dro_beta": 0.3}],
    "kl_cov": [{}, {"kl_cov_ratio": 0.2, "ppo_kl_coef": 0.5}],
}  # fmt: skip
CASES = [
    {"loss_mode": mode, "loss_agg_mode": agg, **extra, **scale}
    for mode in sorted(VERL_LOSS_MODES)
    for extra in STATED[mode]
    for agg in VERL_REDUCTIONS
    for scale in ([{}, {"loss_scale_factor": 16}] if agg == "seq-mean-token-sum-norm" else [{}])
]


def test_every_verl_loss_mode_is_covered_or_refused():
    """verl's registry is exactly the modes loss_for reproduces and the two it refuses (why: in
    tool_losses.VERL_UNSUPPORTED); every reproduced one is in the cases."""
    assert set(POLICY_LOSS_REGISTRY) == set(VERL_LOSS_MODES) | set(VERL_UNSUPPORTED)
    assert {c["loss_mode"] for c in CASES} == set(VERL_LOSS_MODES) == set(STATED)


@pytest.mark.parametrize("per_token", [False, True], ids=["adv_B", "adv_BT"])
@pytest.mark.parametrize("settings", CASES, ids=lambda s: "-".join(map(str, s.values())))
def test_loss_and_gradient_equal_verls(settings, per_token):
    """Our loss and gradient equal verl's policy loss function's at float64, rtol 1e-9 (verl
    takes (B, T) advantages: a per-sequence A is given to it broadcast, to us as (B,))."""
    logp, old, adv, mask = _inputs(per_token)
    adv_bt = adv if per_token else adv[:, None].expand(B, T).contiguous()
    config = verl_config(settings, mask)
    x = logp.clone().requires_grad_()
    ref_loss, _ = get_policy_loss_fn(settings["loss_mode"])(
        old, x, adv_bt, mask, settings["loss_agg_mode"], config, None
    )
    (ref_grad,) = torch.autograd.grad(ref_loss, x)
    y = logp.clone().requires_grad_()
    out = loss_for("verl", settings)(y, old, adv, mask)
    (grad,) = torch.autograd.grad(out.loss, y)
    torch.testing.assert_close(out.loss.detach(), ref_loss.detach(), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-9, atol=1e-12)
    assert grad.abs().sum() > 0


def test_verl_clamps_bind_in_these_inputs():
    """The inputs exercise the clamps the mapping reproduces: without verl's [-20, 20] on log r,
    vanilla's loss differs (token at 25); without gspo's 10 on log s, gspo's differs (s = e^12)."""
    logp, old, adv, mask = _inputs(per_token=False)
    adv = adv.abs().neg()  # A < 0: the unclipped (large-ratio) branch is the one taken
    for settings in ({"loss_mode": "vanilla", "clip_ratio_c": 1e9}, {"loss_mode": "gspo"}):
        tl = loss_for("verl", settings)
        unclamped = {k: v for k, v in tl.params.items() if k != "log_ratio_clamp"}
        a = tl(logp, old, adv, mask).loss
        b = get_loss(tl.loss)(logp, old, adv, mask, **unclamped).loss
        assert abs(float(a - b)) > 1.0, settings


def test_defaults_are_verls_own():
    """Every default loss_for takes is verl 0.9.1's ActorConfig / PolicyLossConfig default."""
    config = verl_config({}, torch.ones(B, T, dtype=torch.bool))
    for key, value in VERL_DEFAULTS.items():
        where = config.policy_loss if key in POLICY_LOSS_KEYS else config
        assert getattr(where, key) == value, key
