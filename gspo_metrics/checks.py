"""Argument checks shared by every public function: clear errors that name the argument and shape.

Also used by ``training_hooks`` (the recorder's step checks and settings), so that each rule is
written once.
"""

from __future__ import annotations

import math
from numbers import Real

import torch


def as_bool_mask(mask: torch.Tensor, name: str = "mask") -> torch.Tensor:
    """A mask of any dtype as bool: nonzero marks a token (Tinker's ``sequence_ratio_mask`` rule)."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    return mask if mask.dtype == torch.bool else mask != 0


def check_tensor(
    x: object, name: str, ndim: int | tuple[int, ...], axes: str, *, floating: bool = False
) -> torch.Tensor:
    """``x``, a tensor of ``ndim`` dimensions (named ``axes``), of a floating dtype if ``floating``."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {axes}, got {type(x).__name__}")
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if x.dim() not in dims:
        raise ValueError(
            f"{name} must have shape {axes} ({' or '.join(map(str, dims))}-D), got {tuple(x.shape)}"
        )
    if floating:
        check_float(x, name)
    return x


def check_float(x: torch.Tensor, name: str) -> None:
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def check_same_shape(ref: torch.Tensor, ref_name: str, **others: torch.Tensor | None) -> None:
    for name, x in others.items():
        if x is not None and x.shape != ref.shape:
            raise ValueError(
                f"{name} has shape {tuple(x.shape)} but {ref_name} has shape {tuple(ref.shape)}; "
                "they must match (B, T)"
            )


def check_nonempty_rows(mask_B_T: torch.Tensor, name: str = "mask") -> torch.Tensor:
    """Every sequence must mark at least one token; returns the per-row token count (B,).

    This is the one data-dependent check (a single bool transferred to the host): a row with no
    token has no sequence ratio, and silently returning 0/0 = NaN would be a wrong number.
    """
    counts_B = mask_B_T.sum(-1)
    if mask_B_T.shape[-1] == 0 or bool((counts_B == 0).any()):
        empty = torch.nonzero(counts_B == 0).flatten()[:8].tolist()
        raise ValueError(
            f"{name} of shape {tuple(mask_B_T.shape)} marks no token in row(s) {empty}: "
            "every sequence must mark at least one token"
        )
    return counts_B


#: A log-probability is <= 0; a stored one may sit above 0 by float rounding (a log-softmax's two
#: terms rounded apart): up to this many machine epsilons of its dtype, and never less than 1e-3.
LOGPROB_TOLERANCE_EPS = 32
LOGPROB_TOLERANCE_MIN = 1e-3


def logprob_tolerance(dtype: torch.dtype) -> float:
    """How far above 0 a log-probability of ``dtype`` may read by rounding: 1e-3 for float32 and
    float64, 32 epsilons for half precision (bfloat16: 0.25, float16: 0.031)."""
    return max(LOGPROB_TOLERANCE_MIN, LOGPROB_TOLERANCE_EPS * torch.finfo(dtype).eps)


def positive_logprob_probe(*logprobs: torch.Tensor | None) -> torch.Tensor:
    """0-d float32 on the tensors' device: NaN when a tensor holds a value above its tolerance
    anywhere (padding included), else 0. Added to a probe sum, it sends the step to the exact,
    masked check (``check_logprobs_at_most_zero``) within the caller's one host sync."""
    given = [x for x in logprobs if x is not None and x.numel()]
    if not given:
        return torch.zeros((), dtype=torch.float32)
    over = [x.amax().float() > logprob_tolerance(x.dtype) for x in given]
    bad = torch.stack(over).any() if len(over) > 1 else over[0]
    return torch.where(bad, torch.nan, 0.0)


def check_logprobs_at_most_zero(mask: torch.Tensor, **logprobs: torch.Tensor | None) -> None:
    """Every finite log-probability inside ``mask`` is <= 0 (within ``logprob_tolerance``; a NaN or
    inf is the non-finite count's, not refused): ValueError
    naming the tensor, how many values are above 0 and the largest (probabilities, or logits,
    passed as log-probs: ``torch.rand`` would be). One host sync per tensor; callers run it only
    when ``positive_logprob_probe`` (or another probe) says so."""
    inside = as_bool_mask(mask)
    for name, x in logprobs.items():
        if x is None or not x.numel():
            continue
        over = (x > logprob_tolerance(x.dtype)) & torch.isfinite(x) & inside  # (inf: nonfinite)
        n = int(over.sum())
        if n:
            largest = float(x[over].max())
            raise ValueError(
                f"{name} of shape {tuple(x.shape)} has {n} value(s) above 0 inside the mask "
                f"(largest {largest:.4g}; tolerance {logprob_tolerance(x.dtype):.3g}): "
                "log-probabilities are <= 0; were probabilities or logits passed?"
            )


def check_eps(eps_low: float, eps_high: float) -> None:
    """A clip range [1 - eps_low, 1 + eps_high]: finite numbers, 0 <= eps_low < 1, eps_high >= 0."""
    check_number(eps_low, "eps_low")
    check_number(eps_high, "eps_high")
    if not 0.0 <= eps_low < 1.0:
        raise ValueError(f"eps_low must be in [0, 1) so that 1 - eps_low > 0, got {eps_low!r}")
    if eps_high < 0.0:
        raise ValueError(f"eps_high must be >= 0, got {eps_high!r}")


def check_eps_pair(name: str, eps: object) -> tuple[float, float]:
    """``eps`` as a checked pair of floats (eps_low, eps_high); errors start with ``name``."""
    if not isinstance(eps, tuple | list) or len(eps) != 2:
        raise ValueError(f"{name} must be a pair (eps_low, eps_high), got {eps!r}")
    try:
        check_eps(*eps)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return float(eps[0]), float(eps[1])


def check_choice(value: str, name: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(repr(c) for c in choices)}")


def check_number(
    value: object,
    name: str,
    *,
    above: float | None = None,
    at_least: float | None = None,
) -> float:
    """``value`` as a finite float, with optional bounds (``above`` strict, ``at_least``
    inclusive); errors name the argument and the bound it broke."""
    number = type(value) in (float, int) or (
        isinstance(value, Real) and not isinstance(value, bool)
    )
    if not number or not math.isfinite(value):  # type: ignore[arg-type]
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    x = float(value)  # type: ignore[arg-type]
    if above is not None and not x > above:
        raise ValueError(f"{name} must be > {above}, got {value!r}")
    if at_least is not None and not x >= at_least:
        raise ValueError(f"{name} must be >= {at_least}, got {value!r}")
    return x
