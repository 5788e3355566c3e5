"""Masked reductions shared by everything in gspo_metrics.

Padding never leaks into a result: masked-out entries are replaced with ``torch.where`` (never
multiplied by 0, since ``0 * inf = nan``), so NaN or inf under the padding changes neither a value
nor a gradient.
"""

from __future__ import annotations

import torch


def masked_fill_zero(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` where ``mask`` is True, exactly 0 elsewhere (gradient 0 at masked-out positions)."""
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """sum over ``mask`` of ``x``, along ``dim`` (all dims when None)."""
    filled = masked_fill_zero(x, mask)
    return filled.sum() if dim is None else filled.sum(dim)


def masked_mean(
    x: torch.Tensor, mask: torch.Tensor, dim: int | None = None, count: torch.Tensor | None = None
) -> torch.Tensor:
    """mean over ``mask`` of ``x``: masked_sum / number of marked entries.

    ``count`` may pass a precomputed ``mask.sum(dim)`` to save a pass. Callers guarantee count > 0.
    """
    if count is None:
        count = mask.sum() if dim is None else mask.sum(dim)
    return masked_sum(x, mask, dim) / count.to(x.dtype)
