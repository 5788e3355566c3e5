"""gspo_metrics: the exact math of GRPO and GSPO updates, as pure functions of tensors and a mask.

Axes, named once and used in variable names throughout (``rewards_P_G``, ``mask_bt``):

    P  prompts in a batch
    G  completions sampled per prompt (the group)
    B  sequences, B = P * G, ordered group by group (row b is prompt b // G, sample b % G)
    T  token positions (padded); ``mask`` (B, T) marks the real tokens

Nothing here does I/O, reads globals or transfers to the host, except ``gspo_metrics.tinker``
(whose metrics are floats by Tinker's contract) and the argument checks (one bool for "every row
marks a token"). Bad input raises ValueError naming the argument and its shape.
"""

from .advantages import group_advantages, zero_variance_groups
from .diagnostics import SEQUENCE_DIAGNOSTICS, sequence_diagnostics
from .kl import kl_estimate
from .losses import LOSSES, REDUCTIONS, LossOutput, get_loss, grpo_loss, gspo_loss, register_loss
from .masked import masked_mean, masked_sum
from .ratios import sequence_log_ratio, token_log_ratio

__all__ = [
    "LOSSES",
    "REDUCTIONS",
    "SEQUENCE_DIAGNOSTICS",
    "LossOutput",
    "get_loss",
    "group_advantages",
    "grpo_loss",
    "gspo_loss",
    "kl_estimate",
    "masked_mean",
    "masked_sum",
    "register_loss",
    "sequence_diagnostics",
    "sequence_log_ratio",
    "token_log_ratio",
    "zero_variance_groups",
]
