"""GRPO group-relative advantages.

For prompt p with G sampled completions and rewards r_{p,1..G} (DeepSeekMath's GRPO):

    A_{p,i} = (r_{p,i} - mean_j r_{p,j}) / (std_j r_{p,j} + eps)          scale="group"
    A_{p,i} = (r_{p,i} - mean_j r_{p,j}) / (std over the whole batch + eps) scale="batch"
    A_{p,i} =  r_{p,i} - mean_j r_{p,j}                                   scale="none" (Dr. GRPO)

``std="population"`` divides the squared deviations by G (torch's ``unbiased=False``);
``std="unbiased"`` divides by G - 1 (Bessel; what TRL and verl use). A group whose rewards are all
equal (zero variance) has no learning signal and gets exactly 0, never a rounding residue.
"""

from __future__ import annotations

import numpy as np
import torch

from .checks import check_choice, check_tensor

SCALES = ("group", "batch", "none")
STDS = ("population", "unbiased")


def zero_variance_groups(rewards: torch.Tensor) -> torch.Tensor:
    """(P, G) rewards -> (P,) bool: True where every completion of the prompt got the same reward.

    A (P, G) numpy array gives a numpy array (the recorder counts these groups on the host)."""
    if isinstance(rewards, np.ndarray) and rewards.ndim == 2:
        rewards_P_G = rewards
    else:
        rewards_P_G = check_tensor(rewards, "rewards", 2, "(P, G)")
    return (rewards_P_G == rewards_P_G[:, :1]).all(-1)


def _std(x: torch.Tensor, dim: int | None, std: str) -> torch.Tensor:
    n = x.shape[dim] if dim is not None else x.numel()
    mean = x.mean() if dim is None else x.mean(dim, keepdim=True)
    sq = (x - mean).square()
    ss = sq.sum() if dim is None else sq.sum(dim, keepdim=True)
    denom = n if std == "population" else max(n - 1, 1)
    return (ss / denom).sqrt()


def group_advantages(
    rewards: torch.Tensor,
    *,
    scale: str = "group",
    std: str = "population",
    eps: float = 1e-4,
) -> torch.Tensor:
    """Group-relative advantages: (P, G) float rewards (row p: the G completions of prompt p) ->
    (P, G) advantages, by the module docstring's ``scale`` ("batch": TRL's
    ``scale_rewards="batch"``) and ``std``. They sum to zero within each group; zero-variance
    groups are 0.
    """
    rewards_P_G = check_tensor(rewards, "rewards", 2, "(P, G)", floating=True)
    check_choice(scale, "scale", SCALES)
    check_choice(std, "std", STDS)
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not eps >= 0:
        raise ValueError(f"eps must be a number >= 0, got {eps!r}")
    if rewards_P_G.shape[1] == 0:
        raise ValueError(f"rewards has shape {tuple(rewards_P_G.shape)}: a group needs G >= 1")

    centred_P_G = rewards_P_G - rewards_P_G.mean(dim=-1, keepdim=True)
    if scale == "group":
        adv_P_G = centred_P_G / (_std(rewards_P_G, -1, std) + eps)
    elif scale == "batch":
        adv_P_G = centred_P_G / (_std(rewards_P_G, None, std) + eps)
    else:
        adv_P_G = centred_P_G
    zero_P = zero_variance_groups(rewards_P_G)
    return torch.where(zero_P[:, None], torch.zeros_like(adv_P_G), adv_P_G)
