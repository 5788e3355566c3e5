"""Importance ratios in log space.

Token log-ratio:     log r_t = log pi_theta(y_t) - log pi_old(y_t)
GSPO sequence ratio: s = exp( (1/|M|) sum_{t in M} log r_t )   (Zheng et al., 2025, eq. 7; the
geometric mean of the token ratios, length-normalised so that e^0.1 per token gives s = e^0.1 at
any length). It is computed as a mean of log-ratios, never as a product of ratios, so a
32,768-token sequence stays finite in float32.
"""

from __future__ import annotations

import torch

from .checks import as_bool_mask, check_nonempty_rows, check_same_shape, check_tensor
from .masked import masked_fill_zero


def check_token_shapes(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    *,
    other: str = "old_logprobs",
) -> None:
    """Validate (B, T) inputs' shapes and dtypes only: the caller does the empty-row check (a
    host sync) and the count. ``other`` is the second tensor's name in the errors
    (``kl_estimate`` passes "ref_logprobs")."""
    check_tensor(logprobs, "logprobs", 2, "(B, T)", floating=True)
    check_tensor(old_logprobs, other, 2, "(B, T)", floating=True)
    check_tensor(mask, "mask", 2, "(B, T)")
    check_same_shape(logprobs, "logprobs", **{other: old_logprobs, "mask": mask})


def check_token_inputs(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    *,
    other: str = "old_logprobs",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate (B, T) inputs (``check_token_shapes``, and no empty row); returns the bool mask
    (B, T) and the per-row token count (B,)."""
    check_token_shapes(logprobs, old_logprobs, mask, other=other)
    mask_B_T = as_bool_mask(mask)
    return mask_B_T, check_nonempty_rows(mask_B_T)


def token_log_ratio(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """(B, T) log r_t = logprobs - old_logprobs on masked tokens, exactly 0 on padding."""
    mask_B_T = as_bool_mask(mask)
    return masked_fill_zero(logprobs, mask_B_T) - masked_fill_zero(old_logprobs, mask_B_T)


def sequence_log_ratio(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """log s_b = sum_t mask * (logprobs - old_logprobs) / sum_t mask, (B, T) x3 -> (B,).

    Differentiable in ``logprobs``; NaN/inf at positions the mask excludes do not reach the result.
    Raises ValueError on mismatched shapes or a row whose mask marks no token.
    """
    mask_B_T, count_B = check_token_inputs(logprobs, old_logprobs, mask)
    log_ratio_B_T = token_log_ratio(logprobs, old_logprobs, mask_B_T)
    return log_ratio_B_T.sum(-1) / count_B.to(log_ratio_B_T.dtype)
