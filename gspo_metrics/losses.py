"""Clipped policy-gradient losses: GRPO (PPO token clip) and GSPO-token, with explicit reductions.

Notation: B sequences, T token positions, ``mask`` (B, T) marks the tokens the ratio and the loss are
taken over, ``A`` the advantages ((B,) broadcast over tokens, or (B, T) per token), and
``clip(x) = clamp(x, 1 - eps_low, 1 + eps_high)``. Both losses share one surrogate:

    l_t = -min(rho_t * A_t, clip(rho_t) * A_t)

GRPO (Shao et al., 2024; PPO's token clip):  rho_t = exp(log pi_theta(y_t) - log pi_old(y_t))

GSPO-token (Zheng et al., 2025, sec. 4.3; exactly Tinker's ``gspo`` loss):
    log s   = mean_{t in M} (sg[log pi_theta(y_t)] - log pi_old(y_t))
    rho_t   = sg[s] * pi_theta(y_t) / sg[pi_theta(y_t)]      (value s, gradient of its own token)
so every token carries the sequence ratio's value and clip decision, and d l_t / d log pi_theta(y_t)
= -s * A_t where the clip does not bind. Defaults follow the paper and Tinker: eps 3e-4 / 4e-4.

Reductions (the loss's implicit length weighting; see ``REDUCTIONS``):
    "sum"                 sum_{b,t in M} l_bt                      Tinker's ``loss:sum``; gradient -s*A_t
    "token_mean"          sum_{b,t in M} l_bt / sum_b |M_b|        DAPO, verl's "token-mean"
    "seq_mean_token_mean" mean_b (sum_{t in M_b} l_bt / |M_b|)     the GSPO paper; gradient -s*A/|y|

Per-sequence diagnostics (detached, (B,)), in the loss's own unit and eps:
    log_ratio     log s_b (the sequence log-ratio; for GRPO too, as a comparison point)
    out_of_range  fraction of the sequence's tokens whose rho lies outside the clip range, whatever
                  A's sign (GSPO: 0 or 1 = Tinker's clipped fraction)
    clip_low      fraction of tokens with rho < 1 - eps_low and A < 0  (the clip zeroes the gradient)
    clip_high     fraction of tokens with rho > 1 + eps_high and A > 0 (TRL's clip_ratio/high)
    length        |M_b|, the number of masked tokens
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

import torch

from .checks import check_choice, check_eps, check_float, check_same_shape, check_tensor
from .masked import masked_fill_zero
from .ratios import check_token_inputs
from .spec import GRPO_EPS, GSPO_EPS

REDUCTIONS = ("sum", "token_mean", "seq_mean_token_mean")


class LossOutput(NamedTuple):
    """What every registered loss returns."""

    loss: torch.Tensor
    """() scalar with grad, reduced as asked."""
    per_sequence: Mapping[str, torch.Tensor]
    """Detached (B,) tensors: log_ratio, out_of_range, clip_low, clip_high, length."""


class LossFn(Protocol):
    def __call__(
        self,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        *,
        eps_low: float = ...,
        eps_high: float = ...,
        reduction: str = ...,
    ) -> LossOutput: ...


LOSSES: dict[str, LossFn] = {}


def register_loss(name: str) -> Callable[[LossFn], LossFn]:
    """Decorator adding a loss to ``LOSSES`` under ``name``."""

    def wrap(fn: LossFn) -> LossFn:
        if name in LOSSES:
            raise ValueError(f"a loss named {name!r} is already registered")
        LOSSES[name] = fn
        return fn

    return wrap


def get_loss(name: str) -> LossFn:
    """The registered loss called ``name``; an unknown name raises ValueError listing the valid ones."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(
            f"unknown loss {name!r}; valid: {', '.join(repr(k) for k in sorted(LOSSES))}"
        ) from None


def check_advantages(advantages: torch.Tensor, logprobs: torch.Tensor) -> None:
    check_tensor(advantages, "advantages", (1, 2), "(B,) or (B, T)")
    check_float(advantages, "advantages")
    B, T = logprobs.shape
    if advantages.dim() == 1 and advantages.shape[0] != B:
        raise ValueError(
            f"advantages has shape {tuple(advantages.shape)} but logprobs has shape {(B, T)}; "
            f"per-sequence advantages must be ({B},)"
        )
    if advantages.dim() == 2:
        check_same_shape(logprobs, "logprobs", advantages=advantages)


def check_loss_inputs(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
    reduction: str,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate; returns (mask_bt bool, count_b, advantages_bt with 0 on padding)."""
    check_choice(reduction, "reduction", REDUCTIONS)
    check_eps(eps_low, eps_high)
    mask_bt, count_b = check_token_inputs(logprobs, old_logprobs, mask)
    check_advantages(advantages, logprobs)
    adv = advantages.to(logprobs.dtype)
    adv_bt = adv[:, None].expand_as(logprobs) if adv.dim() == 1 else adv
    return mask_bt, count_b, masked_fill_zero(adv_bt, mask_bt)


def reduce_loss(
    per_token_loss_bt: torch.Tensor, count_b: torch.Tensor, reduction: str
) -> torch.Tensor:
    """Apply a reduction to a per-token loss that is exactly 0 on padding (see module docstring)."""
    if reduction == "sum":
        return per_token_loss_bt.sum()
    if reduction == "token_mean":
        return per_token_loss_bt.sum() / count_b.sum().to(per_token_loss_bt.dtype)
    if reduction == "seq_mean_token_mean":
        return (per_token_loss_bt.sum(-1) / count_b.to(per_token_loss_bt.dtype)).mean()
    check_choice(reduction, "reduction", REDUCTIONS)
    raise AssertionError("unreachable")


def clipped_surrogate(
    log_rho_bt: torch.Tensor,
    adv_bt: torch.Tensor,
    count_b: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    reduction: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reduced -min(rho*A, clip(rho)*A); returns (loss, detached rho (B, T)).

    Precondition (what keeps padding out without a mask multiply): ``log_rho_bt`` and ``adv_bt`` are
    exactly 0 outside the loss's tokens, so there rho = 1 and the objective is 1 * 0 = 0 exactly.
    ``log_rho_bt`` carries the gradient; ``count_b`` is each row's number of loss tokens.
    """
    rho_bt = torch.exp(log_rho_bt)
    clipped_bt = torch.clamp(rho_bt, 1.0 - eps_low, 1.0 + eps_high)
    per_token_loss_bt = -torch.minimum(rho_bt * adv_bt, clipped_bt * adv_bt)
    return reduce_loss(per_token_loss_bt, count_b, reduction), rho_bt.detach()


def token_clip_stats(
    rho_bt: torch.Tensor,
    adv_bt: torch.Tensor,
    count_b: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> dict[str, torch.Tensor]:
    """Per-sequence token fractions: out of range, binding low (A < 0), binding high (A > 0).

    Padding has rho = 1 (inside the range, since eps >= 0) and A = 0, so it is never counted.
    """
    below_bt = rho_bt < 1.0 - eps_low
    above_bt = rho_bt > 1.0 + eps_high
    n_b = count_b.to(rho_bt.dtype)
    return {
        "out_of_range": (below_bt | above_bt).sum(-1) / n_b,
        "clip_low": (below_bt & (adv_bt < 0)).sum(-1) / n_b,
        "clip_high": (above_bt & (adv_bt > 0)).sum(-1) / n_b,
    }


def sequence_clip_stats(
    log_s_b: torch.Tensor,
    advantages: torch.Tensor,
    adv_bt: torch.Tensor,
    count_b: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> dict[str, torch.Tensor]:
    """The same fractions when every token carries the sequence's ratio s (GSPO-token).

    A sequence is out of range as a whole (0 or 1); the clip binds on its tokens whose advantage
    pushes past the violated bound, which for per-sequence advantages is again 0 or 1.
    """
    s_b = torch.exp(log_s_b)  # the exact value every token's rho takes
    below_b = s_b < 1.0 - eps_low
    above_b = s_b > 1.0 + eps_high
    if advantages.dim() == 1:
        neg_b, pos_b = (advantages < 0).to(s_b.dtype), (advantages > 0).to(s_b.dtype)
    else:  # adv_bt is 0 on padding, so padding never counts
        n_b = count_b.to(s_b.dtype)
        neg_b, pos_b = (adv_bt < 0).sum(-1) / n_b, (adv_bt > 0).sum(-1) / n_b
    zero = torch.zeros((), dtype=s_b.dtype, device=s_b.device)
    return {
        "out_of_range": (below_b | above_b).to(s_b.dtype),
        "clip_low": torch.where(below_b, neg_b, zero),
        "clip_high": torch.where(above_b, pos_b, zero),
    }


@register_loss("gspo")
def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    reduction: str = "sum",
) -> LossOutput:
    """GSPO-token loss (Tinker's ``gspo``; see the module docstring for the equations).

    Args:
        logprobs: (B, T) log pi_theta of the sampled tokens, with grad.
        old_logprobs: (B, T) log pi_old of the same tokens (the sampler's), no grad needed.
        advantages: (B,) one per sequence, or (B, T) per token.
        mask: (B, T) nonzero on the tokens the sequence ratio and the loss are taken over; every
            row must mark at least one token.
        eps_low: the clip range [1 - eps_low, 1 + eps_high] on the sequence ratio s.
        eps_high: see eps_low.
        reduction: "sum", "token_mean" or "seq_mean_token_mean".
    """
    mask_bt, count_b, adv_bt = check_loss_inputs(
        logprobs, old_logprobs, advantages, mask, eps_low, eps_high, reduction
    )
    lp_bt = masked_fill_zero(logprobs, mask_bt)
    old_bt = masked_fill_zero(old_logprobs, mask_bt)
    # log s = mean over masked tokens of sg[log pi_theta] - log pi_old        (B,)
    log_s_b = (lp_bt.detach() - old_bt).sum(-1) / count_b.to(lp_bt.dtype)
    # log rho_t = sg[log s] + log pi_theta(y_t) - sg[log pi_theta(y_t)]       (B, T); 0 on padding
    log_rho_bt = masked_fill_zero(log_s_b[:, None] + (lp_bt - lp_bt.detach()), mask_bt)
    loss, _ = clipped_surrogate(
        log_rho_bt, adv_bt, count_b, eps_low=eps_low, eps_high=eps_high, reduction=reduction
    )
    with torch.no_grad():
        stats = sequence_clip_stats(log_s_b, advantages, adv_bt, count_b, eps_low, eps_high)
    return LossOutput(loss, {"log_ratio": log_s_b.detach(), **stats, "length": count_b})


@register_loss("grpo")
def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = GRPO_EPS[0],
    eps_high: float = GRPO_EPS[1],
    reduction: str = "sum",
) -> LossOutput:
    """GRPO's PPO token-clipped surrogate: rho_t = exp(log pi_theta(y_t) - log pi_old(y_t)).

    Same arguments as ``gspo_loss``; eps defaults to PPO's 0.2 on both sides. No KL penalty term:
    add ``beta * kl_estimate(...)`` yourself if your recipe has one.
    """
    mask_bt, count_b, adv_bt = check_loss_inputs(
        logprobs, old_logprobs, advantages, mask, eps_low, eps_high, reduction
    )
    # log rho_t = log pi_theta(y_t) - log pi_old(y_t)                          (B, T); 0 on padding
    log_rho_bt = masked_fill_zero(logprobs, mask_bt) - masked_fill_zero(old_logprobs, mask_bt)
    loss, rho_bt = clipped_surrogate(
        log_rho_bt, adv_bt, count_b, eps_low=eps_low, eps_high=eps_high, reduction=reduction
    )
    with torch.no_grad():
        stats = token_clip_stats(rho_bt, adv_bt, count_b, eps_low, eps_high)
    log_s_b = log_rho_bt.detach().sum(-1) / count_b.to(log_rho_bt.dtype)
    return LossOutput(loss, {"log_ratio": log_s_b, **stats, "length": count_b})
