"""Trust regions without a hard clip: SAPO's soft gate, and the penalties of DRO and KL-Cov.

SAPO replaces the clip by a smooth function of the ratio that fades the gradient as the ratio
leaves 1; DRO and KL-Cov keep the plain importance-weighted term and add a penalty on log r, whose
gradient can add to the policy gradient as well as take from it (their attenuation is unbounded).
"""

from __future__ import annotations

import math

import torch

from .checks import check_number
from .losses_core import LossOutput, loss_output, prepare_batch, register_loss, scalar, to_logprobs
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

    ``tau_pos`` / ``tau_neg`` are TRL's ``sapo_temperature_pos/neg``, verl's ``tau_pos/neg``;
    verl clamps log rho to (-20, 20) (``log_ratio_clamp``). Other arguments as ``grpo_loss``.

    Attenuation, 1 - sum_t 4 sigma_t (1 - sigma_t) rho_t |A_t| / sum_t rho_t |A_t|, is what the
    gate removed: in [0, 1), since 4 sigma (1 - sigma) <= 1 (at the sequence level with per-token
    advantages of both signs, their cancellation in d s_b counts as removed too).
    """
    check_number(tau_pos, "tau_pos", above=0.0)
    check_number(tau_neg, "tau_neg", above=0.0)
    batch = prepare_batch(
        logprobs, old_logprobs, advantages, mask, reduction, norm_length, level, log_ratio_clamp
    )
    log_rho, rho, passes = batch.ratio(level, log_ratio_clamp)
    adv_B_T = batch.adv_B_T
    tau_B_T = torch.where(adv_B_T > 0, scalar(tau_pos, adv_B_T), scalar(tau_neg, adv_B_T))
    gate_B_T = torch.sigmoid(tau_B_T * (rho - 1)) * 4 / tau_B_T
    loss = batch.reduce(-gate_B_T * adv_B_T)
    with torch.no_grad():
        r = rho.detach()
        sig_B_T = torch.sigmoid(tau_B_T * (r - 1))
        dl_dlog_rho = -4 * sig_B_T * (1 - sig_B_T) * r * adv_B_T * passes
        grad_B_T = to_logprobs(dl_dlog_rho, batch, level)
    return loss_output(loss, batch, grad_B_T, torch.exp(log_rho.detach()))


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
    log_r_B_T = batch.log_r_B_T
    loss = batch.reduce(-(batch.lp_B_T * batch.adv_B_T - 0.5 * beta * log_r_B_T.square()))
    with torch.no_grad():
        x = log_r_B_T.detach()
        grad_B_T = masked_fill_zero(-batch.adv_B_T + beta * x, batch.mask_B_T)
    return loss_output(loss, batch, grad_B_T, torch.exp(x))


def top_covariance_tokens(
    adv_B_T: torch.Tensor, lp_B_T: torch.Tensor, mask_B_T: torch.Tensor, ratio: float
) -> torch.Tensor:
    """(B, T) bool: the max(1, floor(N * ratio)) masked tokens of largest centred covariance
    (A_t - mean A) (log pi_t - mean log pi) over the batch's N masked tokens (KL-Cov's choice).

    The one host transfer is N (the number of tokens to pick depends on it)."""
    n_tokens = int(mask_B_T.sum())
    k = max(1, int(n_tokens * ratio))
    adv_mean = adv_B_T.sum() / n_tokens
    lp_mean = lp_B_T.sum() / n_tokens
    cov_B_T = (adv_B_T - adv_mean) * (lp_B_T - lp_mean)
    cov_B_T = torch.where(mask_B_T, cov_B_T, torch.full_like(cov_B_T, -math.inf))
    chosen = torch.zeros(cov_B_T.numel(), dtype=torch.bool, device=cov_B_T.device)
    chosen[torch.topk(cov_B_T.flatten(), min(k, n_tokens), largest=True).indices] = True
    return chosen.view_as(mask_B_T)


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
    log_r_B_T, adv_B_T = batch.log_r_B_T, batch.adv_B_T
    ratio_B_T = torch.exp(log_r_B_T)
    with torch.no_grad():
        chosen_B_T = top_covariance_tokens(
            adv_B_T, batch.lp_B_T.detach(), batch.mask_B_T, kl_cov_ratio
        )
    pg_B_T = -adv_B_T * ratio_B_T
    loss_B_T = torch.where(chosen_B_T, pg_B_T + ppo_kl_coef * log_r_B_T.abs(), pg_B_T)
    loss = batch.reduce(loss_B_T)
    with torch.no_grad():
        r = ratio_B_T.detach()
        grad_B_T = -adv_B_T * r + ppo_kl_coef * torch.sign(log_r_B_T.detach()) * chosen_B_T
        grad_B_T = masked_fill_zero(grad_B_T, batch.mask_B_T)
        penalised_B = chosen_B_T.sum(-1) / batch.n_B
    return loss_output(loss, batch, grad_B_T, r, extra={"penalised": penalised_B})
