"""loss_for: a tool's settings -> the registered loss, its parameters, what was defaulted, what
raises. The equality with the tools' own code is in test_losses_trl.py and test_losses_verl.py."""

from __future__ import annotations

import math

import pytest
import torch
from loss_inputs import random_inputs

from gspo_metrics import get_loss, loss_for
from gspo_metrics.spec import VERL_LOSS_MODES
from gspo_metrics.tool_losses import TRL_LOSSES, float32


def _same(a, b):
    torch.testing.assert_close(a.loss, b.loss, rtol=0, atol=0)
    for key, v in a.per_sequence.items():
        torch.testing.assert_close(b.per_sequence[key], v, rtol=0, atol=0, equal_nan=True)


def test_unknown_tool_loss_type_and_loss_mode_name_the_known_ones():
    """An unknown tool, TRL loss_type or verl loss_mode raises ValueError listing the valid ones."""
    with pytest.raises(ValueError, match="unknown tool 'tinker'; valid: 'trl', 'verl'"):
        loss_for("tinker", {})
    trl_names = ", ".join(f"'{n}'" for n in sorted(TRL_LOSSES))
    assert trl_names == "'bnpo', 'cispo', 'dapo', 'dr_grpo', 'grpo', 'luspo', 'sapo', 'vespo'"
    with pytest.raises(ValueError, match=f"unknown trl loss_type 'ppo'; valid: {trl_names}$"):
        loss_for("trl", {"loss_type": "ppo"})
    with pytest.raises(
        ValueError,
        match="unknown verl loss_mode 'ppo'; known: 'cispo', 'dppo_kl', 'dppo_tv', 'dro', "
        "'geo_mean', 'gpg', 'gspo', 'kl_cov', 'sapo', 'vanilla' "
        r"\(not supported: 'bypass_mode', 'clip_cov'\)",
    ):
        loss_for("verl", {"loss_mode": "ppo"})
    with pytest.raises(ValueError, match="verl loss_mode 'clip_cov' is not supported: it detaches"):
        loss_for("verl", {"loss_mode": "clip_cov"})
    with pytest.raises(ValueError, match="unknown trl importance_sampling_level 'seq'"):
        loss_for("trl", {"loss_type": "grpo", "importance_sampling_level": "seq"})


def test_trl_defaults_are_trls_and_are_listed():
    """No settings: TRL 1.16's default loss, dapo at the token level with epsilon 0.2 on both sides
    (epsilon_high None means epsilon: not DAPO's paper 0.28), every read setting listed as
    defaulted; a stated one is not."""
    tl = loss_for("trl", {})
    assert (tl.tool, tl.version, tl.tool_loss, tl.loss) == ("trl", "1.16.0", "dapo", "dapo")
    assert tl.params == {
        "reduction": "token_mean",
        "level": "token",
        "eps_low": 0.2,
        "eps_high": 0.2,
    }
    assert set(tl.defaulted) == {
        "loss_type", "importance_sampling_level", "epsilon", "epsilon_high", "delta", "beta",
        "top_entropy_quantile", "off_policy_mask_threshold", "entropy_coef", "use_adaptive_entropy",
        "use_vllm",
    }  # fmt: skip
    assert tl.settings["epsilon_high"] is None and tl.level == "token"
    stated = loss_for("trl", {"loss_type": "grpo", "epsilon": 3e-4, "epsilon_high": 4e-4})
    assert "epsilon" not in stated.defaulted and "loss_type" not in stated.defaulted
    assert stated.params["eps_high"] == 4e-4 and stated.reduction == "seq_mean_token_mean"
    logp, old, adv, mask = random_inputs(seed=2)
    _same(tl(logp, old, adv, mask), get_loss("dapo")(logp, old, adv, mask, eps_high=0.2))


@pytest.mark.parametrize(
    ("settings", "loss", "params"),
    [
        ({"loss_type": "grpo", "importance_sampling_level": "sequence"}, "grpo",
         {"reduction": "seq_mean_token_mean", "level": "sequence", "eps_low": 0.2, "eps_high": 0.2}),
        ({"loss_type": "dr_grpo", "max_completion_length": 256}, "dr_grpo",
         {"reduction": "seq_mean_token_sum_norm", "level": "token", "eps_low": 0.2, "eps_high": 0.2,
          "norm_length": 256}),
        ({"loss_type": "luspo", "delta": 2.0}, "luspo",
         {"reduction": "seq_mean_token_sum", "level": "token", "eps_low": 0.2, "eps_high": 0.2,
          "delta": 2.0}),
        ({"loss_type": "cispo", "epsilon_high": 5.0}, "cispo",
         {"reduction": "token_mean", "level": "token", "weight_max": 5.0, "weight_min": None}),
        ({"loss_type": "cispo"}, "cispo",  # epsilon_high unset: TRL caps at epsilon (0.2!)
         {"reduction": "token_mean", "level": "token", "weight_max": 0.2, "weight_min": None}),
        ({"loss_type": "sapo"}, "sapo",
         {"reduction": "seq_mean_token_mean", "level": "token", "tau_pos": 1.0,
          "tau_neg": float32(1.05)}),
        ({"loss_type": "vespo", "vespo_k_pos": 2.1}, "vespo",
         {"reduction": "token_mean", "k_pos": float32(2.1), "lambda_pos": 3.0, "k_neg": 3.0,
          "lambda_neg": 2.0}),
    ],
)  # fmt: skip
def test_trl_settings_to_parameters(settings, loss, params):
    """Each TRL loss_type's settings become the registered loss's parameters (TRL's float32
    SAPO temperatures and VESPO constants included)."""
    tl = loss_for("trl", settings)
    assert tl.loss == loss and dict(tl.params) == params
    assert float32(1.05) != 1.05  # (the rounding is real: 1.0499999523...)


def test_reduction_override_is_ours():
    """settings["reduction"] replaces the tool's reduction; the normalising one takes its L from
    the tool's setting (TRL's max_completion_length, defaulted and said so); unknown raises."""
    tl = loss_for("trl", {"loss_type": "grpo", "reduction": "sum"})
    assert tl.reduction == "sum" and "norm_length" not in tl.params
    norm = loss_for("trl", {"loss_type": "grpo", "reduction": "seq_mean_token_sum_norm"})
    assert norm.params["norm_length"] == 512 and "max_completion_length" in norm.defaulted
    dr = loss_for("trl", {"loss_type": "dr_grpo", "reduction": "token_mean"})
    assert dr.reduction == "token_mean" and "norm_length" not in dr.params
    sapo = loss_for("verl", {"loss_mode": "sapo", "reduction": "sum"})
    assert sapo.reduction == "sum" and not sapo.notes  # ours honoured, nothing ignored
    with pytest.raises(ValueError, match=r"unknown settings\['reduction'\] 'mean'; valid: 'sum'"):
        loss_for("trl", {"reduction": "mean"})
    logp, old, adv, mask = random_inputs(seed=3)
    _same(tl(logp, old, adv, mask), get_loss("grpo")(logp, old, adv, mask, reduction="sum"))


def test_trl_terms_outside_the_policy_loss_raise_or_are_listed():
    """beta > 0, an entropy mask or bonus, an off-policy mask, vLLM's correction: the callable
    cannot compute them, so they raise unless policy_only=True lists them in left_out."""
    with pytest.raises(ValueError, match=r"beta=0.04 adds the KL penalty .* policy_only=True"):
        loss_for("trl", {"loss_type": "grpo", "beta": 0.04})
    tl = loss_for(
        "trl",
        {"loss_type": "sapo", "beta": 0.04, "top_entropy_quantile": 0.2, "use_vllm": True},
        policy_only=True,
    )
    assert set(tl.left_out) == {
        "beta",
        "top_entropy_quantile",
        "vllm_importance_sampling_correction",
    }
    assert "vllm_importance_sampling_correction" in tl.defaulted  # True by default in TRL 1.16
    off = loss_for("trl", {"use_vllm": True, "vllm_importance_sampling_correction": False})
    assert off.left_out == {}


def test_trl_bad_values_and_missing_length_raise_naming_the_setting():
    """A setting of the wrong kind raises naming it; Dr. GRPO needs a stated length when TRL's
    is None (TRL then infers it from the model)."""
    with pytest.raises(ValueError, match="trl setting epsilon must be a finite number, got '0.2'"):
        loss_for("trl", {"epsilon": "0.2"})
    with pytest.raises(ValueError, match="max_completion_length is None"):
        loss_for("trl", {"loss_type": "dr_grpo", "max_completion_length": None})
    with pytest.raises(ValueError, match="settings must be a mapping"):
        loss_for("trl", [("loss_type", "grpo")])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "loss", "params"),
    [
        ({}, "grpo", {"eps_low": 0.2, "eps_high": 0.2, "dual_clip": 3.0,
                      "log_ratio_clamp": (-20.0, 20.0), "reduction": "token_mean", "level": "token"}),
        ({"loss_mode": "gspo", "loss_agg_mode": "seq-mean-token-mean"}, "gspo",
         {"eps_low": 0.2, "eps_high": 0.2, "log_ratio_clamp": (-math.inf, 10.0),
          "reduction": "seq_mean_token_mean"}),
        ({"loss_mode": "cispo", "clip_ratio_low": 1.0, "clip_ratio_high": 4.0}, "cispo",
         {"weight_min": 0.0, "weight_max": 5.0, "log_ratio_clamp": (-20.0, 20.0),
          "reduction": "token_mean", "level": "token"}),
        ({"loss_mode": "geo_mean", "clip_ratio_low": 0.4, "clip_ratio_high": 0.4}, "gmpo",
         {"eps_low": 0.4, "eps_high": 0.4, "reduction": "seq_mean_token_mean"}),
        ({"loss_mode": "dppo_tv"}, "dppo_tv",  # verl's ActorConfig clip_ratio_c: 3.0, not 20
         {"eps_low": 0.2, "eps_high": 0.2, "truncation": 3.0, "log_ratio_clamp": (-20.0, 20.0),
          "reduction": "token_mean"}),
        ({"loss_mode": "kl_cov", "policy_loss": {"kl_cov_ratio": 0.01}}, "kl_cov",
         {"kl_cov_ratio": 0.01, "ppo_kl_coef": 0.1, "reduction": "token_mean"}),
        ({"loss_mode": "gpg", "loss_agg_mode": "token-sum"}, "gpg", {"reduction": "sum"}),
        ({"loss_mode": "dro", "dro_beta": 0.1, "loss_agg_mode": "seq-mean-token-sum"}, "dro",
         {"beta": 0.1, "reduction": "seq_mean_token_sum"}),
    ],
)  # fmt: skip
def test_verl_settings_to_parameters(settings, loss, params):
    """Each verl loss_mode's settings become the registered loss's parameters (verl's numerical
    clamps and the dual clip of vanilla included); defaults are verl 0.9.1's ActorConfig's."""
    tl = loss_for("verl", settings)
    assert (tl.version, tl.loss) == ("0.9.1", loss) and dict(tl.params) == params
    assert tl.level == ("sequence" if loss in ("gspo", "gmpo") else "token")


def test_verl_clip_ratio_falls_back_only_where_low_or_high_is_none():
    """verl 0.9.1 defaults clip_ratio_low/high to 0.2 (not to clip_ratio): clip_ratio alone
    changes nothing; it fills a bound set to None."""
    alone = loss_for("verl", {"clip_ratio": 0.3})
    assert (alone.params["eps_low"], alone.params["eps_high"]) == (0.2, 0.2)
    assert "clip_ratio" not in alone.settings and "clip_ratio_low" in alone.defaulted
    none = loss_for("verl", {"clip_ratio": 0.3, "clip_ratio_low": None, "clip_ratio_high": 0.28})
    assert (none.params["eps_low"], none.params["eps_high"]) == (0.3, 0.28)


def test_verl_notes_conflicts_and_missing_values():
    """sapo and geo_mean ignore loss_agg_mode (said in notes); seq-mean-token-sum-norm without
    loss_scale_factor divides by the padded width (said, and done); dro needs dro_beta; a key
    given flat and under policy_loss with two values raises."""
    sapo = loss_for("verl", {"loss_mode": "sapo", "loss_agg_mode": "token-mean"})
    assert sapo.reduction == "seq_mean_token_mean" and "ignores loss_agg_mode" in sapo.notes[0]
    assert "loss_agg_mode" not in sapo.settings  # never read
    width = loss_for("verl", {"loss_agg_mode": "seq-mean-token-sum-norm"})
    assert width.norm_length_from_width and "padded width" in width.notes[0]
    logp, old, adv, mask = random_inputs(seed=4)  # T = 7
    _same(
        width(logp, old, adv, mask),
        get_loss("grpo")(logp, old, adv, mask, **{**width.params, "norm_length": 7.0}),
    )
    fixed = loss_for(
        "verl", {"loss_agg_mode": "seq-mean-token-sum-norm", "loss_scale_factor": 4096}
    )
    assert fixed.params["norm_length"] == 4096 and not fixed.norm_length_from_width
    with pytest.raises(ValueError, match="verl loss_mode 'dro' needs policy_loss.dro_beta > 0"):
        loss_for("verl", {"loss_mode": "dro"})
    with pytest.raises(ValueError, match="verl setting loss_mode is given twice"):
        loss_for("verl", {"loss_mode": "gspo", "policy_loss": {"loss_mode": "vanilla"}})
    with pytest.raises(ValueError, match="verl setting clip_ratio_c must be > 1.0, got 1.0"):
        loss_for("verl", {"clip_ratio_c": 1.0})


def test_every_tool_name_maps_to_a_registered_loss():
    """Every TRL loss_type and verl loss_mode mapped names a registered loss, and its ToolLoss
    runs (with the settings a mode requires)."""
    logp, old, adv, mask = random_inputs(seed=5)
    for loss_type in TRL_LOSSES:
        out = loss_for("trl", {"loss_type": loss_type})(logp, old, adv, mask)
        assert torch.isfinite(out.loss)
    for mode in VERL_LOSS_MODES:
        extra = {"dro_beta": 0.1} if mode == "dro" else {}
        out = loss_for("verl", {"loss_mode": mode, **extra})(logp, old, adv, mask)
        assert torch.isfinite(out.loss)
