"""gspo_metrics: the exact math of GRPO and GSPO updates, as pure functions of tensors and a mask.

Axes, named once and used in variable names throughout, one capital per axis (``rewards_P_G``,
``mask_B_T``, ``log_s_B``; ``K`` the rows of a stack of per-sequence values, ``out_K_B``):

    P  prompts in a batch
    G  completions sampled per prompt (the group)
    B  sequences, B = P * G, ordered group by group (row b is prompt b // G, sample b % G)
    T  token positions (padded); ``mask`` (B, T) marks the real tokens

Names are loaded lazily: ``gspo_metrics.spec`` (the clip-range defaults, the declaration of the
per-sequence diagnostics) imports no torch, so the on-disk schema and the dashboard can use it.

Modules: ``spec`` (declarations), ``checks`` (argument checks), ``masked``, ``ratios``,
``advantages``, ``losses`` (every loss, registered: ``losses_core`` and its families
``losses_clip``, ``losses_weight``, ``losses_soft``), ``tool_losses`` (``loss_for``: a TRL or
verl run's settings as the loss it trains with), ``kl``, ``tinker`` (the math), ``diagnostics`` (the per-sequence
diagnostics: one form of each, torch ops on the inputs' device; their equations are the tests'
oracle, ``tests/diagnostics_oracle.py``).

Nothing here does I/O, reads globals or transfers to the host, except ``gspo_metrics.tinker``
(whose metrics are floats by Tinker's contract) and the argument checks (one bool for "every row
marks a token"). Bad input raises ValueError naming the argument and its shape.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .spec import GRPO_EPS, GSPO_EPS, SEQUENCE_DIAGNOSTICS

_EXPORTS = {
    "group_advantages": "advantages",
    "zero_variance_groups": "advantages",
    "sequence_diagnostics": "diagnostics",
    "kl_estimate": "kl",
    "ALL_REDUCTIONS": "losses",
    "LOSSES": "losses",
    "LOSS_INFO": "losses",
    "REDUCTIONS": "losses",
    "LossInfo": "losses",
    "LossOutput": "losses",
    "get_loss": "losses",
    "grpo_loss": "losses",
    "gspo_loss": "losses",
    "register_loss": "losses",
    "masked_mean": "masked",
    "masked_sum": "masked",
    "sequence_log_ratio": "ratios",
    "token_log_ratio": "ratios",
    "ToolLoss": "tool_losses",
    "loss_for": "tool_losses",
}

__all__ = [
    "ALL_REDUCTIONS",
    "GRPO_EPS",
    "GSPO_EPS",
    "LOSSES",
    "LOSS_INFO",
    "REDUCTIONS",
    "SEQUENCE_DIAGNOSTICS",
    "LossInfo",
    "LossOutput",
    "ToolLoss",
    "get_loss",
    "group_advantages",
    "grpo_loss",
    "gspo_loss",
    "kl_estimate",
    "loss_for",
    "masked_mean",
    "masked_sum",
    "register_loss",
    "sequence_diagnostics",
    "sequence_log_ratio",
    "token_log_ratio",
    "zero_variance_groups",
]

if TYPE_CHECKING:
    from .advantages import group_advantages, zero_variance_groups
    from .diagnostics import sequence_diagnostics
    from .kl import kl_estimate
    from .losses import (
        ALL_REDUCTIONS,
        LOSS_INFO,
        LOSSES,
        REDUCTIONS,
        LossInfo,
        LossOutput,
        get_loss,
        grpo_loss,
        gspo_loss,
        register_loss,
    )
    from .masked import masked_mean, masked_sum
    from .ratios import sequence_log_ratio, token_log_ratio
    from .tool_losses import ToolLoss, loss_for


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gspo_metrics' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
