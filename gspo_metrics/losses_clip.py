"""PPO-clip recipes: the clip of ``grpo_loss`` with each paper's normaliser and defaults, and GMPO.

DAPO, BNPO, Dr. GRPO and LUSPO share GRPO's per-token surrogate l_t = -min(rho_t A_t, clip(rho_t)
A_t) (``grpo_loss``, at the token or the sequence level); they differ in how the per-token losses
are reduced and in their default clip range, so each is that surrogate with its paper's reduction
and eps (``clip_recipe``; every other option as ``grpo_loss``). GMPO clips each token in log space
and then takes the geometric mean of the sequence's ratios: one loss per sequence.
"""

from __future__ import annotations

from typing import Any

import torch

from .checks import check_eps
from .losses_core import (
    LossFn,
    LossOutput,
    clip_fractions,
    grpo_loss,
    loss_output,
    pick_min,
    prepare_batch,
    register_loss,
)
from .masked import masked_fill_zero
from .spec import GSPO_EPS


def clip_recipe(
    name: str, doc: str, eps: tuple[float, float], reduction: str, level: str = "token"
) -> LossFn:
    """Register loss ``name``: ``grpo_loss`` with the defaults of a recipe (its clip range, its
    reduction, its ratio level), every option as ``grpo_loss``, documented by ``doc``."""

    def loss(
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
        *,
        eps_low: float = eps[0],
        eps_high: float = eps[1],
        reduction: str = reduction,
        level: str = level,
        **options: Any,
    ) -> LossOutput:
        return grpo_loss(
            logprobs,
            old_logprobs,
            advantages,
            mask,
            eps_low=eps_low,
            eps_high=eps_high,
            reduction=reduction,
            level=level,
            **options,
        )

    loss.__name__ = loss.__qualname__ = f"{name}_loss"
    loss.__doc__ = doc
    return register_loss(name)(loss)


dapo_loss = clip_recipe(
    "dapo",
    """DAPO (Yu et al., 2025, arXiv:2503.14476): PPO's clip with a raised upper bound
    ("clip-higher": eps 0.2 / 0.28, the paper's) and the token mean over the whole batch,

        loss = sum_{b, t in M_b} l_bt / sum_b |M_b|      (reduction "token_mean")

    so every token weighs the same whatever its sequence's length. DAPO's dynamic sampling and
    overlong reward shaping act on the data, not on the loss. TRL's ``dapo`` (its default
    ``loss_type``) and verl's ``vanilla`` with ``loss_agg_mode="token-mean"``.
    """,
    (0.2, 0.28),
    "token_mean",
)

bnpo_loss = clip_recipe(
    "bnpo",
    """TRL's ``bnpo``: GRPO's clip (eps 0.2 / 0.2) with the token mean over the local batch,

        loss = sum_{b, t in M_b} l_bt / sum_b |M_b|      (reduction "token_mean")

    DAPO's token-level normaliser (arXiv:2503.14476) applied to each micro-batch: TRL's ``dapo``
    divides by the tokens of the whole accumulated batch, ``bnpo`` by those of the micro-batch it
    is given (on one batch the two agree). A TRL name, not a paper's.
    """,
    (0.2, 0.2),
    "token_mean",
)

dr_grpo_loss = clip_recipe(
    "dr_grpo",
    """Dr. GRPO (Liu et al., 2025, "Understanding R1-Zero-Like Training", arXiv:2503.20783):
    GRPO's clip with a constant normaliser instead of each sequence's length,

        loss = sum_{b, t in M_b} l_bt / (B * L)          (reduction "seq_mean_token_sum_norm")

    L = ``norm_length``, a constant (the generation budget: TRL's ``max_completion_length``; verl's
    ``loss_scale_factor`` for ``loss_agg_mode="seq-mean-token-sum-norm"``), so no sequence's
    length rescales its gradient. No default: L is the run's budget. (Dr. GRPO also drops the std
    scaling of advantages: that is the advantages' business, ``group_advantages(scale="none")``.)
    """,
    (0.2, 0.2),
    "seq_mean_token_sum_norm",
)

luspo_loss = clip_recipe(
    "luspo",
    """LUSPO (Length-Unbiased Sequence Policy Optimization, arXiv:2602.05261; TRL's ``luspo``):
    GSPO's sequence-level clip, each sequence's loss scaled by its length,

        loss = mean_b sum_{t in M_b} l_bt = mean_b |M_b| * L_b    (reduction "seq_mean_token_sum")

    with rho = s_b (``level="sequence"``, the paper's and TRL's recommended setup). eps defaults
    to GSPO's paper range (3e-4 / 4e-4; LUSPO modifies GSPO); TRL uses its ``epsilon``.
    """,
    GSPO_EPS,
    "seq_mean_token_sum",
    "sequence",
)


@register_loss("gmpo")
def gmpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.4,
    eps_high: float = 0.4,
    reduction: str = "seq_mean_token_mean",
    norm_length: float | None = None,
) -> LossOutput:
    """GMPO (Zhao et al., 2025, "Geometric-Mean Policy Optimization", arXiv:2507.20673; verl's
    ``geo_mean``): the geometric mean of the token ratios, each clipped in log space first,

        x_t   = log r_t,   g_t = sign(A_t)
        x'_t  = g_t * min(g_t x_t, g_t clamp(x_t, -eps_low, eps_high))   (PPO's side of the clip)
        R_b   = exp(mean_{t in M_b} x'_t),   Abar_b = mean_{t in M_b} A_t
        L_b   = -Abar_b R_b       one loss per sequence, counted on each of its tokens

    so "seq_mean_token_mean" (the default) gives mean_b L_b, verl's reduction (verl ignores
    ``loss_agg_mode`` here). eps are in log space: the paper's (0.4, 0.4) clip ratios to
    (e^-0.4, e^0.4). The clip statistics are per token, in that log-space range.

    Attenuation (rho = s_b): with d l^sum / d log pi(y_t) = -Abar_b R_b u_t (u_t = 1 where the
    clip lets x_t through), 1 - |Abar_b| R_b sum_t u_t / (s_b sum_t |A_t|). Not bounded: where
    A < 0, a token clipped at -eps_low lifts R above s and the other tokens' gradient with it
    (log r = [-5, 0], eps 0.2, A = -1: R / s = e^2.4, attenuation 1 - e^2.4 / 2 = -4.5).
    """
    check_eps(eps_low, eps_high)
    batch = prepare_batch(logprobs, old_logprobs, advantages, mask, reduction, norm_length)
    x_B_T, adv_B_T = batch.log_r_B_T, batch.adv_B_T
    g_B_T = torch.sign(adv_B_T)
    a1, a2 = g_B_T * x_B_T, g_B_T * torch.clamp(x_B_T, -eps_low, eps_high)
    x_clip_B_T = masked_fill_zero(g_B_T * torch.minimum(a1, a2), batch.mask_B_T)
    R_B = torch.exp(x_clip_B_T.sum(-1) / batch.n_B)
    abar_B = adv_B_T.sum(-1) / batch.n_B
    loss_B = -abar_B * R_B
    loss = batch.reduce(loss_B[:, None].expand_as(x_B_T))
    with torch.no_grad():
        x = x_B_T.detach()
        inside = ((x >= -eps_low) & (x <= eps_high)).to(x.dtype)
        # d x'_t / d x_t: g * (d min / d x), torch's tie rule (inside the range both branches agree)
        u_B_T = g_B_T * pick_min(a1.detach(), g_B_T, a2.detach(), g_B_T * inside)
        grad_B_T = masked_fill_zero(-(abar_B * R_B.detach())[:, None] * u_B_T, batch.mask_B_T)
        stats = clip_fractions(x < -eps_low, x > eps_high, batch)
    return loss_output(loss, batch, grad_B_T, torch.exp(batch.log_s_B)[:, None], stats)
