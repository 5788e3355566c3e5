"""The grid a step's ratios move on: the log-probs' dtype spacing, and the finest step seen.

A floating dtype of p significant bits (``logprob_bits``: bfloat16 8, float16 11, float32 24)
holds a value x = m 2^e (0.5 <= |m| < 1, ``torch.frexp``) to multiples of its grid step

    q(x) = 2^(e - p)        (bfloat16, x = -3: e = 2, q = 2^-6 = 0.0156; float32: 2^-22)

A token's log-ratio d_t = log π - log π_old moves on its log-probs' grid q_t (that of the coarser
dtype of the two; log π's when both are alike), and GSPO's log s_b = (1/L_b) Σ_t d_t in steps of
q_t / L_b when one token moves one step. Per step
(``token_stats``, sums so that ranks add up exactly):

* ``abs_min_nonzero``: the smallest non-zero finite |d_t| over the masked tokens (+inf: none moved);
* ``grid_sum``: Σ_{b,t} m_bt q_bt, over M the mean grid step of a token's log r
  (``token_log_ratio_grid``);
* ``seq_grid_sum``: Σ_b (Σ_t m_bt q_bt) / L_b², over S the mean step log s takes when one
  average token of its sequence moves one grid step (``seq_log_ratio_grid``: 2^-6 / 20 =
  7.8e-4 for a 20-token bfloat16 sequence near -3, coarser than GSPO's ε of 3e-4/4e-4).

A non-finite log-prob has no grid (q = 0 there); neither has 0 (a probability of 1).
"""

from __future__ import annotations

import math

import torch

#: What ``token_stats`` returns, in order.
TOKEN_STATS = ("abs_min_nonzero", "grid_sum", "seq_grid_sum")


def significant_bits(dtype: torch.dtype) -> int:
    """Significant bits of a floating dtype, the implicit leading one included."""
    return 1 - round(math.log2(torch.finfo(dtype).eps))


def grid_step(x: torch.Tensor) -> torch.Tensor:
    """q(x) = 2^(e - p) elementwise, in float32 at least: the spacing of ``x``'s own dtype at
    each value (0 where x is 0 or not finite)."""
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    _, e = torch.frexp(wide)
    q = torch.exp2((e - significant_bits(x.dtype)).to(wide.dtype))
    return torch.where(torch.isfinite(wide) & (wide != 0), q, 0.0)


def token_stats(logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor):
    """(3,) ``TOKEN_STATS`` of one step's (B, T) tensors (see the module docstring), detached,
    in float32 at least, on their device."""
    with torch.no_grad():
        dtype = torch.promote_types(
            torch.promote_types(logprobs.dtype, old_logprobs.dtype), torch.float32
        )
        m = mask != 0
        d = logprobs.to(dtype) - old_logprobs.to(dtype)  # exact for two half-precision values
        moved = m & (d != 0) & torch.isfinite(d)
        abs_min = torch.where(moved, d.abs(), math.inf).amin()
        # the coarser dtype's tensor (both alike: the current log-probs'; the two grids differ
        # only where a change crosses a power of 2)
        coarse = logprobs
        if significant_bits(old_logprobs.dtype) < significant_bits(logprobs.dtype):
            coarse = old_logprobs
        q_B = torch.where(m, grid_step(coarse).to(dtype), 0.0).sum(-1)
        length_B = m.sum(-1).to(dtype).clamp(min=1.0)
        return torch.stack([abs_min, q_B.sum(), (q_B / length_B.square()).sum()])
