"""Trust regions without a hard clip: SAPO's soft gate, and the penalties of DRO and KL-Cov.

SAPO replaces the clip by a smooth function of the ratio that fades the gradient as the ratio
leaves 1; DRO and KL-Cov keep the plain importance-weighted term and add a penalty on log r, whose
gradient can add to the policy gradient as well as take from it (their attenuation is unbounded).
"""

from __future__ import annotations

import math

import torch

from .checks import check_number
from .losses import (
    LossOutput,
    check_level,
    check_log_ratio_clamp,
    clamp_log_ratio,
    level_log_ratio,
    loss_output,
    prepare_batch,
    reduce_loss,
    register_loss,
    scalar,
    to_logprobs,
)
from .masked import masked_fill_zero


@register_loss("sapo")
def sapo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
    level: str = "token",
    reduction: str = "seq_mean_token_mean",
    log_ratio_clamp: tuple[float, float] | None = None,
    norm_length: float | None = None,
) -> LossOutput:
    """SAPO (Soft Adaptive Policy Optimization, arXiv:2511.20347; TRL's and verl's ``sapo``): a
    temperature-controlled gate instead of the clip,

        f_tau(x) = sigmoid(tau (x - 1)) * 4 / tau
        l_t      = -f_{tau_t}(rho_t) A_t,      tau_t = tau_pos where A_t > 0, else tau_neg
        d l_t / d log rho_t = -4 sigma_t (1 - sigma_t) rho_t A_t,   sigma_t = sigmoid(tau_t (rho_t - 1))

    so at rho = 1 the gradient is plain importance sampling's (4 sigma (1 - sigma) = 1) and it
    fades smoothly as rho leaves 1, faster for a larger tau (tau_neg > tau_pos damps negative
    updates more). Defaults: TRL's and verl's (1.0, 1.05) and the sequence mean of token means
    (verl always reduces SAPO so, whatever its ``loss_agg_mode``).

    Args:
        tau_pos: the gate's temperature where A > 0 (TRL ``sapo_temperature_pos``, verl ``tau_pos``).
        tau_neg: where A <= 0 (TRL ``sapo_temperature_neg``, verl ``tau_neg``).
        level: "token" (rho_t = r_t) or "sequence" (rho_t = s_b; TRL's sequence level).
        reduction: one of ``losses.ALL_REDUCTIONS``.
        log_ratio_clamp: verl's (-20, 20) on log rho.
        norm_length: L of reduction "seq_mean_token_sum_norm" (only with it).

    Attenuation, 1 - sum_t 4 sigma_t (1 - sigma_t) rho_t |A_t| / sum_t rho_t |A_t|, is what the
    gate removed: in [0, 1), since 4 sigma (1 - sigma) <= 1 (at the sequence level with per-token
    advantages of both signs, their cancellation in d s_b counts as removed too).
    """
    check_number(tau_pos, "tau_pos", above=0.0)
    check_number(tau_neg, "tau_neg", above=0.0)
    check_level(level)
    check_log_ratio_clamp(log_ratio_clamp)
    batch = prepare_batch(logprobs, old_logprobs, advantages, mask, reduction, norm_length)
    log_rho = level_log_ratio(batch, level)
    log_rho_c, passes = clamp_log_ratio(log_rho, log_ratio_clamp)
    rho = torch.exp(log_rho_c)
    adv_bt = batch.adv_bt
    tau_bt = torch.where(adv_bt > 0, scalar(tau_pos, adv_bt), scalar(tau_neg, adv_bt))
    gate_bt = torch.sigmoid(tau_bt * (rho - 1)) * 4 / tau_bt
    loss_bt = masked_fill_zero(-gate_bt * adv_bt, batch.mask_bt)
    loss = reduce_loss(loss_bt, batch.count_b, reduction, norm_length)
    with torch.no_grad():
        r = rho.detach()
        sig_bt = torch.sigmoid(tau_bt * (r - 1))
        dl_dlog_rho = -4 * sig_bt * (1 - sig_bt) * r * adv_bt * passes
        grad_bt = to_logprobs(dl_dlog_rho, batch, level)
    return loss_output(loss, batch, grad_bt, torch.exp(log_rho.detach()))


@register_loss("dro")
def dro_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    beta: float,
    reduction: str = "token_mean",
    norm_length: float | None = None,
) -> LossOutput:
    """verl's ``dro`` (after Direct Reward Optimisation, Richemond et al., 2024, arXiv:2405.19107):
    REINFORCE with a quadratic penalty on the log-ratio instead of a clip,

        l_t = -(A_t log pi_theta(y_t) - beta / 2 * (log r_t)^2)
        d l_t / d log pi_theta(y_t) = -A_t + beta log r_t

    ``beta`` > 0 has no default (verl requires ``policy_loss.dro_beta``). Attenuation against r_t:
    1 - sum_t |beta log r_t - A_t| / sum_t r_t |A_t|, unbounded below: the penalty pulls log r
    back to 0 whatever A's sign, adding to the gradient where it points the same way as -A.
    """
    check_number(beta, "beta", above=0.0)
    batch = prepare_batch(logprobs, old_logprobs, advantages, mask, reduction, norm_length)
    log_r_bt = batch.log_r_bt
    loss_bt = masked_fill_zero(
        -(batch.lp_bt * batch.adv_bt - 0.5 * beta * log_r_bt.square()), batch.mask_bt
    )
    loss = reduce_loss(loss_bt, batch.count_b, reduction, norm_length)
    with torch.no_grad():
        x = log_r_bt.detach()
        grad_bt = masked_fill_zero(-batch.adv_bt + beta * x, batch.mask_bt)
    return loss_output(loss, batch, grad_bt, torch.exp(x))


def top_covariance_tokens(
    adv_bt: torch.Tensor, lp_bt: torch.Tensor, mask_bt: torch.Tensor, ratio: float
) -> torch.Tensor:
    """(B, T) bool: the max(1, floor(N * ratio)) masked tokens of largest centred covariance
    (A_t - mean A) (log pi_t - mean log pi) over the batch's N masked tokens (KL-Cov's choice).

    The one host transfer is N (the number of tokens to pick depends on it)."""
    n_tokens = int(mask_bt.sum())
    k = max(1, int(n_tokens * ratio))
    adv_mean = adv_bt.sum() / n_tokens
    lp_mean = lp_bt.sum() / n_tokens
    cov_bt = (adv_bt - adv_mean) * (lp_bt - lp_mean)
    cov_bt = torch.where(mask_bt, cov_bt, torch.full_like(cov_bt, -math.inf))
    chosen = torch.zeros(cov_bt.numel(), dtype=torch.bool, device=cov_bt.device)
    chosen[torch.topk(cov_bt.flatten(), min(k, n_tokens), largest=True).indices] = True
    return chosen.view_as(mask_bt)


@register_loss("kl_cov")
def kl_cov_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    kl_cov_ratio: float = 0.0002,
    ppo_kl_coef: float = 0.1,
    reduction: str = "token_mean",
    norm_length: float | None = None,
) -> LossOutput:
    """KL-Cov (Cui et al., 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning
    Language Models", arXiv:2505.22617; verl's ``kl_cov``): the plain importance-weighted term,
    with a penalty on |log r| for the few tokens whose advantage and log-probability covary most
    (the ones that drive entropy down):

        K   = the max(1, floor(N * kl_cov_ratio)) tokens of the batch with the largest
              (A_t - mean A)(log pi_t - mean log pi) (``top_covariance_tokens``)
        l_t = -A_t r_t + ppo_kl_coef * |log r_t| [t in K]
        d l_t / d log pi_theta(y_t) = -A_t r_t + ppo_kl_coef * sign(log r_t) [t in K]

    The choice of K depends on the whole batch, not on the sequence alone. No clip: the loss is
    unclipped elsewhere. Defaults: verl 0.9.1's (0.0002, 0.1). Attenuation against r_t is 0 off K
    and unbounded below on it (the penalty pulls log r to 0, which can add to -A r).
    """
    check_number(kl_cov_ratio, "kl_cov_ratio", above=0.0)
    check_number(ppo_kl_coef, "ppo_kl_coef", at_least=0.0)
    batch = prepare_batch(logprobs, old_logprobs, advantages, mask, reduction, norm_length)
    log_r_bt, adv_bt = batch.log_r_bt, batch.adv_bt
    ratio_bt = torch.exp(log_r_bt)
    with torch.no_grad():
        chosen_bt = top_covariance_tokens(adv_bt, batch.lp_bt.detach(), batch.mask_bt, kl_cov_ratio)
    pg_bt = -adv_bt * ratio_bt
    loss_bt = torch.where(chosen_bt, pg_bt + ppo_kl_coef * log_r_bt.abs(), pg_bt)
    loss = reduce_loss(
        masked_fill_zero(loss_bt, batch.mask_bt), batch.count_b, reduction, norm_length
    )
    with torch.no_grad():
        r = ratio_bt.detach()
        grad_bt = -adv_bt * r + ppo_kl_coef * torch.sign(log_r_bt.detach()) * chosen_bt
        grad_bt = masked_fill_zero(grad_bt, batch.mask_bt)
        penalised_b = chosen_bt.sum(-1) / batch.n_b
    return loss_output(loss, batch, grad_bt, r, extra={"penalised": penalised_b})
