"""Shared by the loss tests: each registered loss's variants (its level and a valid set of
parameters), random inputs with ragged masks, and attenuation computed from autograd."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from gspo_metrics import LOSS_INFO, LOSSES

F64 = torch.float64

#: Parameters a loss needs beyond its defaults (no default: the run's own value).
REQUIRED: dict[str, dict[str, Any]] = {"dr_grpo": {"norm_length": 9.0}, "dro": {"beta": 0.3}}
#: Extra variants worth running through every generic check: each loss's tool conventions.
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "grpo": [{"delta": 1.25}, {"dual_clip": 1.5, "log_ratio_clamp": (-0.3, 0.3)}],
    "gspo": [{"log_ratio_clamp": (-float("inf"), 0.05)}],
    "cispo": [{"weight_max": 1.1}, {"weight_min": 0.9, "weight_max": 1.2}],
    "sapo": [{"tau_pos": 2.0, "tau_neg": 3.0, "log_ratio_clamp": (-0.2, 0.2)}],
    "dppo_tv": [{"truncation": 1.05, "eps_low": 0.05, "eps_high": 0.05}],
    "dppo_kl": [{"truncation": 1.05, "eps_low": 0.01, "eps_high": 0.01}],
    "kl_cov": [{"kl_cov_ratio": 0.3, "ppo_kl_coef": 0.5}],
    "vespo": [{"k_pos": 1.0, "lambda_pos": 0.5}],
}


def variants(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(level, params) of ``name``: each level it runs at, with its defaults and each variant."""
    info = LOSS_INFO[name]
    levels = ("token", "sequence") if info.level == "either" else (info.level,)
    for extra in [{}, *VARIANTS.get(name, [])]:
        for level in levels:
            params = {**REQUIRED.get(name, {}), **extra}
            if info.level == "either":
                params["level"] = level
            yield level, params


def all_variants() -> list[tuple[str, str, dict[str, Any]]]:
    """(name, level, params) for every registered loss and variant (pytest ids: name-level-i)."""
    return [(n, lv, p) for n in sorted(LOSSES) for lv, p in variants(n)]


def with_reduction(name: str, params: dict[str, Any], reduction: str) -> dict[str, Any]:
    """``params`` under ``reduction``, with the norm_length that reduction (and only it) takes."""
    out = {k: v for k, v in params.items() if k != "norm_length"}
    out["reduction"] = reduction
    if reduction == "seq_mean_token_sum_norm":
        out["norm_length"] = params.get("norm_length", 9.0)
    return out


def random_inputs(
    seed: int, b: int = 5, t: int = 7, spread: float = 0.4, per_token: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logprobs, old_logprobs, advantages, mask): log-probs in (-3, 0), log-ratios ~ N(0,
    spread^2) (some tokens out of a 0.2 clip range), ragged rows (every one marks a token)."""
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=gen, dtype=F64) * 2.5 - 0.05
    logp = (old + spread * torch.randn(b, t, generator=gen, dtype=F64)).clamp(max=-1e-3)
    mask = torch.rand(b, t, generator=gen) < 0.7
    mask[:, 0] = True
    adv = torch.randn((b, t) if per_token else (b,), generator=gen, dtype=F64)
    return logp, old, adv, mask


def plain_ratio(
    logprobs: torch.Tensor, old: torch.Tensor, mask: torch.Tensor, level: str
) -> torch.Tensor:
    """(B, T) the plain ratio attenuation is measured against: r_t, or s_b on every token."""
    log_r = torch.where(mask, logprobs.detach() - old, 0.0)
    if level == "token":
        return log_r.exp()
    return (log_r.sum(-1) / mask.sum(-1)).exp()[:, None].expand_as(log_r)


def autograd_attenuation(
    grad: torch.Tensor,
    logprobs: torch.Tensor,
    old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    level: str,
) -> torch.Tensor:
    """(B,) 1 - sum_t |grad| / sum_t |rho A| from an autograd gradient (NaN where A is all 0)."""
    adv = advantages[:, None].expand_as(mask) if advantages.dim() == 1 else advantages
    adv = torch.where(mask, adv, 0.0)
    plain = (plain_ratio(logprobs, old, mask, level) * adv.abs()).sum(-1)
    kept = torch.where(mask, grad, 0.0).abs().sum(-1)
    return torch.where(plain > 0, 1 - kept / plain, torch.nan)
