"""Every policy-gradient loss, registered: the API of ``gspo_metrics.losses_core`` (the registry,
the signature, the reductions, attenuation, ``grpo`` and ``gspo``, with their equations) once its
families have registered theirs. Each family is a module that registers its losses when imported,
here:

- ``losses_clip``: the clip of ``grpo_loss`` with other normalisers and defaults (``dapo``,
  ``bnpo``, ``dr_grpo``, ``luspo``) and GMPO's clip of the geometric mean (``gmpo``);
- ``losses_weight``: a stop-gradient weight times log pi (``cispo``, ``vespo``, ``dppo_tv``,
  ``dppo_kl``, ``gpg``);
- ``losses_soft``: a soft gate or a penalty instead of a clip (``sapo``, ``dro``, ``kl_cov``).

The families import ``losses_core``, never this module, so no import runs in a circle.
"""

from __future__ import annotations

from . import losses_clip, losses_soft, losses_weight  # noqa: F401 -- each registers its losses
from .losses_core import (
    ALL_REDUCTIONS,
    LEVELS,
    LOSS_INFO,
    LOSSES,
    REDUCTIONS,
    SUM_REDUCTIONS,
    LossFn,
    LossInfo,
    LossOutput,
    get_loss,
    grpo_loss,
    gspo_loss,
    register_loss,
)

__all__ = [
    "ALL_REDUCTIONS",
    "LEVELS",
    "LOSSES",
    "LOSS_INFO",
    "REDUCTIONS",
    "SUM_REDUCTIONS",
    "LossFn",
    "LossInfo",
    "LossOutput",
    "get_loss",
    "grpo_loss",
    "gspo_loss",
    "register_loss",
]
