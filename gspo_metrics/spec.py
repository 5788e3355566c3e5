"""Torch-free declarations shared by the math, the hooks, the on-disk schema and the app.

Importing this module imports no torch (``gspo_metrics/__init__`` loads its torch parts lazily),
so ``training_hooks.schema`` and the dashboard can read these names on a laptop.
"""

from __future__ import annotations

#: GSPO's sequence-unit clip range (eps_low, eps_high): s outside [1 - 3e-4, 1 + 4e-4] is clipped
#: (Zheng et al. 2025, section 5.1; Tinker's defaults).
GSPO_EPS: tuple[float, float] = (3e-4, 4e-4)
#: GRPO's / PPO's token-unit clip range (eps_low, eps_high): r_t outside [0.8, 1.2] is clipped.
GRPO_EPS: tuple[float, float] = (0.2, 0.2)
