"""Per-sequence KL estimates from sampled tokens (Schulman's k1/k2/k3 estimators).

With d_t = log pi_theta(y_t) - log pi_ref(y_t) on the sampled tokens:

    k1 = d_t                            unbiased, high variance, can be negative
    k2 = 0.5 * d_t^2                    biased, low variance
    k3 = exp(-d_t) + d_t - 1            unbiased for KL(pi_theta || pi_ref) when y ~ pi_theta, >= 0
                                        (the GRPO paper's estimator: ref/theta - log(ref/theta) - 1)

The result is the masked mean over each sequence's tokens, (B,). To estimate KL(pi_old || pi_theta)
from tokens sampled by pi_old, pass ``kl_estimate(old_logprobs, logprobs, mask)``.
"""

from __future__ import annotations

import torch

from .checks import check_choice
from .masked import masked_mean
from .ratios import check_token_inputs, token_log_ratio

ESTIMATORS = ("k1", "k2", "k3")


def kl_terms(log_diff_B_T: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token KL estimator from d = logp - ref_logp (already 0 on padding)."""
    if estimator == "k1":
        return log_diff_B_T
    if estimator == "k2":
        return 0.5 * log_diff_B_T.square()
    return torch.expm1(-log_diff_B_T) + log_diff_B_T  # exp(-d) - 1 + d, accurate near d = 0


def kl_estimate(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    mask: torch.Tensor,
    *,
    estimator: str = "k3",
) -> torch.Tensor:
    """(B, T) x3 -> (B,) masked mean of the chosen per-token KL estimator (see module docstring)."""
    check_choice(estimator, "estimator", ESTIMATORS)
    mask_B_T, count_B = check_token_inputs(logprobs, ref_logprobs, mask, other="ref_logprobs")
    d_B_T = token_log_ratio(logprobs, ref_logprobs, mask_B_T)
    return masked_mean(kl_terms(d_B_T, estimator), mask_B_T, -1, count_B)
