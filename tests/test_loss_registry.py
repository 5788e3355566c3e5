"""Every registered loss through the same checks: attenuation against autograd, gradients, padding,
the attenuation bounds, outputs, bad input. The hand-computed cases are in test_loss_cases.py."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from loss_inputs import (
    F64,
    REQUIRED,
    all_variants,
    autograd_attenuation,
    random_inputs,
    with_reduction,
)

from gspo_metrics import ALL_REDUCTIONS, LOSS_INFO, LOSSES, LossOutput, get_loss, register_loss

VARIANTS = all_variants()
IDS = [f"{n}-{lv}-{i}" for i, (n, lv, _) in enumerate(VARIANTS)]
#: Losses whose value carries no stop-gradient, so finite differences of the loss are its
#: gradient (CISPO, VESPO, DPPO, GPG and GSPO-token differentiate a surrogate whose weights are
#: held fixed: their gradient is checked against the closed form and the tools instead).
NO_STOP_GRADIENT = {"grpo", "dapo", "bnpo", "dr_grpo", "luspo", "gmpo", "sapo", "dro", "kl_cov"}


def reduction_scale(reduction: str, mask: torch.Tensor, norm_length: float) -> torch.Tensor:
    """(B,) d loss / d loss^sum per sequence: the constant each reduction puts on b's tokens."""
    n_b = mask.sum(-1).to(F64)
    B = mask.shape[0]
    return {
        "sum": torch.ones(B, dtype=F64),
        "token_mean": torch.full((B,), 1 / float(n_b.sum()), dtype=F64),
        "seq_mean_token_mean": 1 / (B * n_b),
        "seq_mean_token_sum": torch.full((B,), 1 / B, dtype=F64),
        "seq_mean_token_sum_norm": torch.full((B,), 1 / (B * norm_length), dtype=F64),
    }[reduction]


def test_the_package_exports_what_it_lists():
    """``gspo_metrics.__all__`` (written out, for static tools) names exactly the lazily exported
    names and the constants imported at once, and each resolves."""
    import gspo_metrics

    eager = {"GRPO_EPS", "GSPO_EPS", "SEQUENCE_DIAGNOSTICS"}
    assert set(gspo_metrics.__all__) == set(gspo_metrics._EXPORTS) | eager
    assert len(gspo_metrics.__all__) == len(set(gspo_metrics.__all__))
    assert all(getattr(gspo_metrics, name) is not None for name in gspo_metrics.__all__)


def test_registry_names_and_info():
    """The registry holds the losses TRL 1.16 and verl 0.9.1 ship (less the two verl ones not
    reproducible), each with its LossInfo and an equation and a paper in its docstring."""
    assert sorted(LOSSES) == [
        "bnpo", "cispo", "dapo", "dppo_kl", "dppo_tv", "dr_grpo", "dro", "gmpo", "gpg", "grpo",
        "gspo", "kl_cov", "luspo", "sapo", "vespo",
    ]  # fmt: skip
    assert set(LOSS_INFO) == set(LOSSES)
    for name, fn in LOSSES.items():
        assert fn.__doc__ and "arXiv:" in fn.__doc__ and "=" in fn.__doc__, name
        assert LOSS_INFO[name].level in ("token", "sequence", "either")
    # which have a hard clip on the ratio (Health's clip checks apply to these only)
    assert {n for n, i in LOSS_INFO.items() if i.hard_clip} == {
        "grpo", "gspo", "dapo", "bnpo", "dr_grpo", "luspo", "gmpo",
    }  # fmt: skip


def test_register_refuses_a_duplicate_and_unknown_names_list_every_loss():
    """A second loss under a registered name raises; an unknown name lists every valid one."""
    with pytest.raises(ValueError, match="a loss named 'sapo' is already registered"):
        register_loss("sapo")(lambda *a, **k: None)  # type: ignore[arg-type,return-value]
    valid = ", ".join(f"'{n}'" for n in sorted(LOSSES))
    with pytest.raises(ValueError, match=f"^unknown loss 'ppo'; valid: {valid}$"):
        get_loss("ppo")


@pytest.mark.parametrize("per_token", [False, True], ids=["adv_B", "adv_BT"])
@pytest.mark.parametrize(("name", "level", "params"), VARIANTS, ids=IDS)
def test_attenuation_equals_autograd_under_every_reduction(name, level, params, per_token):
    """per_sequence["attenuation"] (closed form) equals 1 - sum|dl/dlogp| / sum|rho A| from
    autograd in float64, under every reduction (the gradient divided by the reduction's per-
    sequence constant), and is the same number whatever the reduction."""
    logp, old, adv, mask = random_inputs(seed=7, per_token=per_token)
    fn = get_loss(name)
    seen = []
    for reduction in ALL_REDUCTIONS:
        kwargs = with_reduction(name, params, reduction)
        x = logp.clone().requires_grad_()
        out = fn(x, old, adv, mask, **kwargs)
        (grad,) = torch.autograd.grad(out.loss, x)
        scale_b = reduction_scale(reduction, mask, kwargs.get("norm_length", 1.0))
        expected = autograd_attenuation(grad / scale_b[:, None], logp, old, adv, mask, level)
        got = out.per_sequence["attenuation"]
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12, equal_nan=True)
        seen.append(got)
    for got in seen[1:]:
        torch.testing.assert_close(got, seen[0], rtol=1e-12, atol=1e-14, equal_nan=True)
    assert torch.isfinite(seen[0]).all()  # every row has a nonzero advantage here


@pytest.mark.parametrize(
    ("name", "level", "params"),
    [v for v in VARIANTS if v[0] in NO_STOP_GRADIENT],
    ids=[i for i, v in zip(IDS, VARIANTS, strict=True) if v[0] in NO_STOP_GRADIENT],
)
def test_float64_gradcheck(name, level, params):
    """Analytic gradients equal finite differences, away from the clip edges (log-ratios ~1e-2)."""
    logp, old, adv, mask = random_inputs(seed=3, spread=0.01, per_token=True)
    old = logp - 0.01 * torch.randn(
        logp.shape, generator=torch.Generator().manual_seed(4), dtype=F64
    )
    fn = get_loss(name)

    def f(x):
        return fn(x, old, adv, mask, **params).loss

    assert torch.autograd.gradcheck(f, (logp.clone().requires_grad_(),), eps=1e-7, atol=1e-8)


@settings(max_examples=60, deadline=None)
@given(
    variant=st.sampled_from(VARIANTS),
    seed=st.integers(0, 10_000),
    extra=st.integers(1, 4),
    garbage=st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e30]),
    per_token=st.booleans(),
)
def test_padding_garbage_changes_nothing(variant, seed, extra, garbage, per_token):
    """NaN/inf under the mask (logprobs, old_logprobs, advantages) and extra padded columns leave
    the loss, its gradient and every per-sequence value unchanged, for every loss."""
    name, _, params = variant
    logp, old, adv, mask = random_inputs(seed, b=4, t=6, per_token=True)
    adv = torch.where(mask, adv, 0.0) if per_token else adv[:, 0].contiguous()
    fn = get_loss(name)
    x1 = logp.clone().requires_grad_()
    out1 = fn(x1, old, adv, mask, **params)
    (g1,) = torch.autograd.grad(out1.loss, x1)

    b = logp.shape[0]
    pad = torch.full((b, extra), garbage, dtype=F64)
    x2 = torch.cat([torch.where(mask, logp, garbage), pad], 1).requires_grad_()
    old2 = torch.cat([torch.where(mask, old, -garbage), -pad], 1)
    adv2 = torch.cat([torch.where(mask, adv, garbage), pad], 1) if per_token else adv
    mask2 = torch.cat([mask, torch.zeros(b, extra, dtype=torch.bool)], 1)
    out2 = fn(x2, old2, adv2, mask2, **params)
    (g2,) = torch.autograd.grad(out2.loss, x2)
    torch.testing.assert_close(out2.loss, out1.loss, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g2[:, : logp.shape[1]], g1, rtol=1e-12, atol=1e-12)
    assert (g2[:, logp.shape[1] :] == 0).all() and (g2[:, : logp.shape[1]][~mask] == 0).all()
    assert out2.per_sequence.keys() == out1.per_sequence.keys()
    for key, v in out1.per_sequence.items():
        torch.testing.assert_close(
            out2.per_sequence[key], v, rtol=1e-12, atol=1e-12, equal_nan=True
        )


@settings(max_examples=150, deadline=None)
@given(
    variant=st.sampled_from(VARIANTS),
    seed=st.integers(0, 10_000),
    spread=st.sampled_from([0.01, 0.3, 1.0, 3.0]),
    per_token=st.booleans(),
)
def test_attenuation_bounds(variant, seed, spread, per_token):
    """attenuation <= 1 for every loss (it is 1 minus a share of absolute values); >= 0 too for
    the losses whose trust region only removes weight (LossInfo.bounded, and CISPO without a
    floor). The others go below 0 in test_loss_cases.py's worked cases."""
    name, _, params = variant
    logp, old, adv, mask = random_inputs(seed, spread=spread, per_token=per_token)
    att = get_loss(name)(logp, old, adv, mask, **params).per_sequence["attenuation"]
    assert torch.isfinite(att).all()
    assert (att <= 1 + 1e-12).all()
    floorless_cispo = name == "cispo" and params.get("weight_min") is None
    if LOSS_INFO[name].bounded or floorless_cispo:
        assert (att >= -1e-12).all(), (name, params, att)


@pytest.mark.parametrize(("name", "level", "params"), VARIANTS, ids=IDS)
def test_outputs_detached_and_zero_advantage_is_nan(name, level, params):
    """LossOutput: a scalar loss with grad; detached (B,) per-sequence tensors with log_ratio,
    length, attenuation (and the clip statistics for the hard-clip losses), the same under
    torch.no_grad; a sequence whose advantage is 0 has no plain gradient, so its attenuation is
    NaN (unknown), not 0."""
    logp, old, adv, mask = random_inputs(seed=11)
    adv[2] = 0.0
    x = logp.clone().requires_grad_()
    out = get_loss(name)(x, old, adv, mask, **params)
    assert isinstance(out, LossOutput) and out.loss.shape == () and out.loss.requires_grad
    keys = {"log_ratio", "length", "attenuation"}
    if LOSS_INFO[name].hard_clip:
        keys |= {"out_of_range", "clip_low", "clip_high"}
    assert keys <= set(out.per_sequence)
    for key, v in out.per_sequence.items():
        assert isinstance(v, torch.Tensor) and v.shape == (5,) and not v.requires_grad, key
    att = out.per_sequence["attenuation"]
    assert math.isnan(att[2]) and torch.isfinite(att[[0, 1, 3, 4]]).all()
    torch.testing.assert_close(out.per_sequence["length"], mask.sum(-1))
    with torch.no_grad():  # a recorder's call: the diagnostics need no autograd graph
        quiet = get_loss(name)(logp, old, adv, mask, **params)
    for key, v in out.per_sequence.items():
        torch.testing.assert_close(quiet.per_sequence[key], v, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_bad_reduction_and_shapes_raise_clear_errors(name):
    """Every loss refuses an unknown reduction (listing all five), a norm_length its reduction
    does not use, the normalising reduction without one, and mismatched shapes, naming them."""
    logp, old, adv, mask = random_inputs(seed=1)
    fn = get_loss(name)
    base = {k: v for k, v in REQUIRED.get(name, {}).items() if k != "norm_length"}
    with pytest.raises(ValueError, match="unknown reduction 'mean'; valid: 'sum', 'token_mean', "):
        fn(logp, old, adv, mask, **base, reduction="mean")
    with pytest.raises(ValueError, match="norm_length is used by reduction 'seq_mean_token_sum_"):
        fn(logp, old, adv, mask, **base, reduction="sum", norm_length=4.0)
    with pytest.raises(ValueError, match="reduction 'seq_mean_token_sum_norm' divides by a const"):
        fn(logp, old, adv, mask, **base, reduction="seq_mean_token_sum_norm")
    with pytest.raises(ValueError, match=r"norm_length must be > 0.0, got -2"):
        fn(logp, old, adv, mask, **base, reduction="seq_mean_token_sum_norm", norm_length=-2)
    with pytest.raises(ValueError, match=r"advantages has shape \(3,\) but logprobs has shape"):
        fn(logp, old, adv[:3], mask, **REQUIRED.get(name, {}))
    with pytest.raises(ValueError, match=r"old_logprobs has shape \(5, 6\) but logprobs"):
        fn(logp, old[:, :6], adv, mask, **REQUIRED.get(name, {}))
    if LOSS_INFO[name].level == "either":
        with pytest.raises(ValueError, match="unknown level 'seq'; valid: 'token', 'sequence'"):
            fn(logp, old, adv, mask, level="seq")


@pytest.mark.parametrize(
    ("name", "kwargs", "match"),
    [
        ("grpo", {"delta": 0.0}, "delta must be > 0.0"),
        ("grpo", {"dual_clip": 1.0}, "dual_clip must be > 1.0"),
        ("grpo", {"log_ratio_clamp": (0.1, 1.0)}, "log_ratio_clamp must have low <= 0 <= high"),
        ("grpo", {"eps_low": 1.0}, r"eps_low must be in \[0, 1\)"),
        ("gmpo", {"eps_high": -0.1}, "eps_high must be >= 0"),
        ("cispo", {"weight_min": 2.0, "weight_max": 1.5}, "weight_min 2.0 must be <= weight_max"),
        ("cispo", {"weight_max": 0.0}, "weight_max must be > 0.0"),
        ("sapo", {"tau_neg": 0.0}, "tau_neg must be > 0.0"),
        ("vespo", {"k_pos": float("nan")}, "k_pos must be a finite number"),
        ("dppo_tv", {"eps_low": -0.1}, "eps_low must be >= 0.0"),
        ("dppo_kl", {"truncation": 0.0}, "truncation must be > 0.0"),
        ("dro", {"beta": 0.0}, "beta must be > 0.0"),
        ("kl_cov", {"kl_cov_ratio": 0.0}, "kl_cov_ratio must be > 0.0"),
    ],
)
def test_bad_parameters_raise_naming_them(name, kwargs, match):
    """A parameter out of its loss's range raises ValueError naming it and the bound."""
    logp, old, adv, mask = random_inputs(seed=1)
    with pytest.raises(ValueError, match=match):
        get_loss(name)(logp, old, adv, mask, **{**REQUIRED.get(name, {}), **kwargs})


def test_dr_grpo_and_dro_have_no_default_for_the_runs_own_constant():
    """Dr. GRPO's L and DRO's beta are the run's: missing, they raise (never a made-up default)."""
    logp, old, adv, mask = random_inputs(seed=1)
    with pytest.raises(ValueError, match="divides by a constant length: pass norm_length"):
        get_loss("dr_grpo")(logp, old, adv, mask)
    with pytest.raises(TypeError, match="beta"):
        get_loss("dro")(logp, old, adv, mask)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), spread=st.sampled_from([0.05, 0.5, 2.0]))
def test_where_the_unbounded_losses_stay_within_0_1(seed, spread):
    """The unbounded losses leave [0, 1] only for the reason their docstrings give: GMPO with
    every A > 0 (no negative token lifts R), GPG where every r >= 1, CISPO with its floor at or
    below every rho stay in [0, 1]."""
    logp, old, adv, mask = random_inputs(seed, spread=spread)
    att = get_loss("gmpo")(logp, old, adv.abs() + 0.1, mask).per_sequence["attenuation"]
    assert ((att >= -1e-12) & (att <= 1 + 1e-12)).all()
    up = torch.where(mask, (logp - old).abs(), 0.0) + old  # log r = |log r| >= 0
    att = get_loss("gpg")(up, old, adv, mask).per_sequence["attenuation"]
    assert ((att >= -1e-12) & (att <= 1 + 1e-12)).all()
    r_min = float(torch.where(mask, (logp - old).exp(), torch.inf).min())
    att = get_loss("cispo")(logp, old, adv, mask, weight_min=r_min, weight_max=1.2)
    assert (att.per_sequence["attenuation"] >= -1e-12).all()
