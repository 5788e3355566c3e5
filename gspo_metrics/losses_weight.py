"""Losses that weight log pi by a stop-gradient factor: CISPO, VESPO, DPPO-TV/KL and GPG.

Each is l_t = -w_t A_t log pi_theta(y_t) with w_t = sg[...] (a capped, shaped, truncated or masked
importance weight, or 1), so d l_t / d log pi_theta(y_t) = -w_t A_t exactly: where PPO's clip
zeroes a token's gradient, these keep it and change its weight instead. Attenuation is then
1 - sum_t w_t |A_t| / sum_t rho_t |A_t| (module ``losses``): what the weighting took away from plain
importance sampling, below 0 where it gives more than rho.
"""

from __future__ import annotations

import math

import torch

from .checks import check_number
from .losses_core import (
    Batch,
    LossFn,
    LossOutput,
    check_log_ratio_clamp,
    loss_output,
    prepare_batch,
    register_loss,
    scalar,
)
from .masked import masked_fill_zero


def weighted_log_prob_loss(
    batch: Batch,
    w_B_T: torch.Tensor,
    rho: torch.Tensor,
    extra: dict[str, torch.Tensor] | None = None,
) -> LossOutput:
    """Reduced -w A log pi (``w_bt`` detached, (B, T) or broadcastable), with the per-sequence
    diagnostics; ``rho`` is the plain ratio attenuation is measured against."""
    loss = batch.reduce(-w_B_T * batch.adv_B_T * batch.lp_B_T)
    with torch.no_grad():
        grad_B_T = masked_fill_zero(-w_B_T * batch.adv_B_T, batch.mask_B_T)  # d l_t / d log pi(y_t)
    return loss_output(loss, batch, grad_B_T, rho, extra=extra)


@register_loss("cispo")
def cispo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    weight_max: float | None = 5.0,
    weight_min: float | None = None,
    level: str = "token",
    reduction: str = "token_mean",
    log_ratio_clamp: tuple[float, float] | None = None,
    norm_length: float | None = None,
) -> LossOutput:
    """CISPO (MiniMax-M1, Chen et al., 2025, arXiv:2506.13585): the clip moves from the update to
    the importance weight, which is bounded and stopped from carrying gradient, so every token
    keeps a gradient:

        w_t = sg[clamp(rho_t, weight_min, weight_max)]
        l_t = -w_t A_t log pi_theta(y_t)        d l_t / d log pi_theta(y_t) = -w_t A_t

    The two tools' conventions are two settings of the bounds:

        TRL ``cispo``:  w = min(rho, epsilon_high)   weight_max = epsilon_high, an absolute ratio
                                                     (ScaleRL's eps_max), weight_min = None
        verl ``cispo``: w = clamp(rho, 1 - clip_ratio_low, 1 + clip_ratio_high), after clamping
                        log r to [-20, 20] (``log_ratio_clamp``)

    Defaults: a cap of 5 and no floor (TRL's documented recommendation; the paper tunes only the
    upper bound), the paper's token mean over the batch.

    ``weight_max`` / ``weight_min`` (None: no bound) bound w; ``log_ratio_clamp`` applies before
    the weight is taken. Other arguments as ``grpo_loss``.

    ``per_sequence["capped"]``: the share of tokens whose weight a bound changed (verl's
    pg_clipfrac, whatever A's sign). Attenuation, 1 - sum_t w_t |A_t| / sum_t rho_t |A_t|, is what
    the cap removed; it is bounded only without a floor: a floor above rho raises the weight
    (verl's lower bound at rho = 0.5, floor 0.8: attenuation 1 - 0.8 / 0.5 = -0.6).
    """
    if weight_max is not None:
        check_number(weight_max, "weight_max", above=0.0)
    if weight_min is not None:
        check_number(weight_min, "weight_min", at_least=0.0)
        if weight_max is not None and weight_min > weight_max:
            raise ValueError(f"weight_min {weight_min!r} must be <= weight_max {weight_max!r}")
    batch = prepare_batch(
        logprobs, old_logprobs, advantages, mask, reduction, norm_length, level, log_ratio_clamp
    )
    with torch.no_grad():
        log_rho, rho, _ = batch.ratio(level, log_ratio_clamp)  # (B, T) or (B, 1)
        w = torch.clamp(rho, min=weight_min, max=weight_max)
        capped_B = batch.fraction(w != rho)
    return weighted_log_prob_loss(batch, w, torch.exp(log_rho), {"capped": capped_B})


@register_loss("vespo")
def vespo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    k_pos: float = 2.0,
    lambda_pos: float = 3.0,
    k_neg: float = 3.0,
    lambda_neg: float = 2.0,
    reduction: str = "token_mean",
    norm_length: float | None = None,
) -> LossOutput:
    """VESPO (arXiv:2602.10693; TRL's ``vespo``): a smooth Gamma-shaped function of the
    sequence's importance weight replaces the clip,

        log w_b = clamp(sum_{t in M_b} clamp(log r_t, -20, 20), log 1e-8, 20)   (TRL's clamps)
        phi(w)  = exp(lambda + k log w - lambda w) = e^lambda w^k e^(-lambda w)   (phi(1) = 1)
        l_t     = -sg[phi(w_b)] A_t log pi_theta(y_t)

    with (k, lambda) = (k_pos, lambda_pos) where A_t >= 0, else (k_neg, lambda_neg), lambda
    floored at 1e-4, and phi = 0 where it is not finite. w is the product of the sequence's
    ratios (a sum of log-ratios, not GSPO's mean). Defaults: TRL's (2, 3, 3, 2).

    Attenuation is measured against the token ratio r_t (TRL runs it at the token level):
    1 - sum_t phi |A_t| / sum_t r_t |A_t|. Not bounded: phi peaks at w = k / lambda at
    e^(lambda - k) (k / lambda)^k (1.21 for the positive defaults), so sequences near that
    weight get more than plain importance sampling gives them.
    """
    shape = {"k_pos": k_pos, "k_neg": k_neg, "lambda_pos": lambda_pos, "lambda_neg": lambda_neg}
    for name, v in shape.items():
        check_number(v, name)
    batch = prepare_batch(logprobs, old_logprobs, advantages, mask, reduction, norm_length)
    with torch.no_grad():
        log_r_B_T = batch.log_r_B_T.detach()
        seq_B = masked_fill_zero(torch.clamp(log_r_B_T, -20.0, 20.0), batch.mask_B_T).sum(-1)
        log_w = torch.clamp(seq_B, math.log(1e-8), 20.0)[:, None]  # (B, 1)
        nonneg_B_T = batch.adv_B_T >= 0
        k_B_T = torch.where(nonneg_B_T, scalar(k_pos, log_w), scalar(k_neg, log_w))
        lam_B_T = torch.where(nonneg_B_T, scalar(lambda_pos, log_w), scalar(lambda_neg, log_w))
        lam_B_T = lam_B_T.clamp(min=1e-4)
        log_phi = lam_B_T + k_B_T * log_w - lam_B_T * torch.exp(log_w)
        phi_B_T = torch.exp(log_phi).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    return weighted_log_prob_loss(batch, phi_B_T, torch.exp(log_r_B_T))


def dppo_loss(name: str, divergence: str, doc: str) -> LossFn:
    """Register loss ``name``: DPPO with the trust region of ``divergence``, "tv" (the probability
    difference) or "kl" (the binary KL), documented by ``doc``; one implementation of both."""

    def loss(
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        *,
        eps_low: float = 0.2,
        eps_high: float = 0.2,
        truncation: float | None = 20.0,
        reduction: str = "token_mean",
        log_ratio_clamp: tuple[float, float] | None = None,
        norm_length: float | None = None,
    ) -> LossOutput:
        check_number(eps_low, "eps_low", at_least=0.0)
        check_number(eps_high, "eps_high", at_least=0.0)
        if truncation is not None:
            check_number(truncation, "truncation", above=0.0)
        check_log_ratio_clamp(log_ratio_clamp)
        batch = prepare_batch(logprobs, old_logprobs, advantages, mask, reduction, norm_length)
        with torch.no_grad():
            log_r, rho_B_T, _ = batch.ratio("token", log_ratio_clamp)
            w_B_T = rho_B_T if truncation is None else torch.clamp(rho_B_T, max=truncation)
            lp, old = batch.lp_B_T.detach(), batch.old_B_T
            p, p_old = torch.exp(lp), torch.exp(old)
            if divergence == "tv":
                keep_pos, keep_neg = (p - p_old) <= eps_high, (p - p_old) >= -eps_low
            else:  # the binary KL of (p_old, 1 - p_old) to (p, 1 - p), as verl writes it
                bkl = p_old * (old - lp) + (1 - p_old) * torch.log(
                    (1.0 - p_old + 1e-8) / (1.0 - p + 1e-8)
                )
                keep_pos = (bkl <= eps_high) | (p <= p_old)
                keep_neg = (bkl <= eps_low) | (p >= p_old)
            keep_B_T = torch.where(batch.adv_B_T > 0, keep_pos, keep_neg)
            masked_B = batch.fraction(~keep_B_T)
            w_B_T = w_B_T * keep_B_T
        return weighted_log_prob_loss(batch, w_B_T, torch.exp(log_r), {"masked": masked_B})

    loss.__name__ = loss.__qualname__ = f"{name}_loss"
    loss.__doc__ = doc
    return register_loss(name)(loss)


dppo_tv_loss = dppo_loss(
    "dppo_tv",
    "tv",
    """DPPO-Binary-TV (arXiv:2602.04879; verl's ``dppo_tv``): the trust region is a bound on how
    far each token's probability moved, not on its ratio:

        p_t = pi_theta(y_t), q_t = pi_old(y_t)
        keep_t = [p_t - q_t <= eps_high] where A_t > 0, [p_t - q_t >= -eps_low] elsewhere
        w_t = sg[min(r_t, truncation)] keep_t              (truncated importance sampling)
        l_t = -w_t A_t log pi_theta(y_t)

    eps are thresholds on the probability difference (verl's clip_ratio_low/high, default 0.2);
    ``truncation`` is verl's clip_ratio_c: its code falls back to 20 (the paper recommends a large
    one), but verl 0.9.1's ActorConfig sets 3.0, which is what a verl run uses unless it says
    otherwise. ``log_ratio_clamp``: verl's (-20, 20) before the weight. ``per_sequence["masked"]``:
    the share of tokens the mask dropped. Attenuation in [0, 1]: min(r, c) keep <= r.
    """,
)

dppo_kl_loss = dppo_loss(
    "dppo_kl",
    "kl",
    """DPPO-Binary-KL (arXiv:2602.04879; verl's ``dppo_kl``): as ``dppo_tv_loss`` with the binary
    KL divergence of the token's probability as the bound,

        kl_t   = q_t log(q_t / p_t) + (1 - q_t) log((1 - q_t + 1e-8) / (1 - p_t + 1e-8))
        keep_t = [kl_t <= eps_high or p_t <= q_t] where A_t > 0, [kl_t <= eps_low or p_t >= q_t]
                 elsewhere (a token moving against its advantage is never dropped)

    (verl's 1e-8 guards are part of the definition here). Other arguments as ``dppo_tv_loss``.
    """,
)


@register_loss("gpg")
def gpg_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    reduction: str = "token_mean",
    norm_length: float | None = None,
) -> LossOutput:
    """GPG (Chu et al., 2025, "GPG: A Simple and Strong Reinforcement Learning Baseline",
    arXiv:2504.02546; verl's ``gpg``): plain REINFORCE on the group advantages, no ratio and no
    trust region,

        l_t = -A_t log pi_theta(y_t)             d l_t / d log pi_theta(y_t) = -A_t

    ``old_logprobs`` enters only the diagnostics. Attenuation against r_t, 1 - sum_t |A_t| /
    sum_t r_t |A_t|, is 0 on-policy and below 0 where the policy moved away from its samples
    (r < 1): it is the weight importance sampling would have given, not a trust region's.
    """
    batch = prepare_batch(logprobs, old_logprobs, advantages, mask, reduction, norm_length)
    rho_B_T = torch.exp(batch.log_r_B_T.detach())
    return weighted_log_prob_loss(batch, scalar(1.0, rho_B_T), rho_B_T)
