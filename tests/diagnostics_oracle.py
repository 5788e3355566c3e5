"""The per-sequence diagnostics as their equations: the tests' oracle.

``gspo_metrics.diagnostics`` computes each diagnostic once, in eager torch ops built for speed
(masking by a multiplication, one reused buffer, a second pass for a step holding a NaN or inf).
Here each is written as plainly as possible, masked with ``torch.where`` so no padding value can
leak, in the order of ``gspo_metrics.spec.SEQUENCE_DIAGNOSTICS``; ``tests/test_diagnostics.py``
runs every hand case on both and compares them on random inputs (float64: to rounding), and
``tests/test_hooks.py`` compares a recorded step's table with it. Not part of the product.

M_b is row b's masked tokens, n_b = |M_b| (every row marks one), d_bt = log r_bt =
log pi_theta - log pi_old, mean_t a masked mean over M_b.
"""

from __future__ import annotations

import math

import torch

from gspo_metrics.checks import as_bool_mask, check_nonempty_rows
from gspo_metrics.diagnostics import OPTIONAL, check_diagnostics_inputs
from gspo_metrics.spec import GRPO_EPS, GSPO_EPS, SEQUENCE_DIAGNOSTICS, WHOLE_NUMBERS


def oracle_diagnostics(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    seq_eps: tuple[float, float] = GSPO_EPS,
    token_eps: tuple[float, float] = GRPO_EPS,
    **optional: torch.Tensor | None,
) -> dict[str, torch.Tensor]:
    """What ``sequence_diagnostics`` returns for the same arguments (its checks, its dtypes:
    counts int64, the rest the inputs' floating dtype, float32 for half precision), from the
    equations below. ``optional``: ``ref_logprobs``, ``entropy``, ``sampler_logprobs``."""
    given = tuple(optional.get(name) for name in OPTIONAL)
    check_diagnostics_inputs(logprobs, old_logprobs, mask, advantages, seq_eps, token_eps, given)
    check_nonempty_rows(as_bool_mask(mask))
    dtype = torch.promote_types(logprobs.dtype, torch.float32)
    with torch.no_grad():
        out = reference_diagnostics(
            logprobs, old_logprobs, mask, advantages, *given, dtype, seq_eps, token_eps
        )
    assert set(out) == set(SEQUENCE_DIAGNOSTICS)
    out = {name: out[name] for name in SEQUENCE_DIAGNOSTICS}
    for name in WHOLE_NUMBERS:
        out[name] = out[name].to(torch.int64)
    return out


def reference_diagnostics(
    logprobs,
    old_logprobs,
    mask,
    advantages,
    ref_logprobs,
    entropy,
    sampler_logprobs,
    dtype,
    seq_eps,
    token_eps,
) -> dict[str, torch.Tensor]:
    """Every diagnostic of ``SEQUENCE_DIAGNOSTICS`` as its equation: name -> (B,) in ``dtype``
    (the counts as whole floats)."""
    mask_B_T = as_bool_mask(mask)
    n_B = mask_B_T.sum(-1).to(dtype)

    def masked(x_B_T: torch.Tensor) -> torch.Tensor:  # x on M_b, 0 on padding, in dtype
        return torch.where(mask_B_T, x_B_T.detach().to(dtype), 0.0)

    def k3_mean(x_B_T: torch.Tensor) -> torch.Tensor:  # mean_t k3(x) = e^x - 1 - x
        return (torch.expm1(x_B_T) - x_B_T).sum(-1) / n_B

    lp_B_T = logprobs.detach().to(dtype)
    d_B_T = torch.where(mask_B_T, lp_B_T - old_logprobs.detach().to(dtype), 0.0)  # log r_bt
    log_s_B = d_B_T.sum(-1) / n_B  # log s_b = mean_t d_bt
    adv = advantages.detach().to(dtype)
    adv_B_T = adv[:, None] if adv.dim() == 1 else masked(adv)
    # padding takes log s_b, which lies inside [min, max] of the row and adds 0 to the deviations
    centred_B_T = torch.where(mask_B_T, d_B_T, log_s_B[:, None])
    kl_ref_B = entropy_B = torch.full_like(log_s_B, math.nan)  # NaN: not given
    probe_B_T = d_B_T + adv_B_T  # non-finite where an input is, at masked positions
    if ref_logprobs is not None:
        e_B_T = masked(ref_logprobs.detach().to(dtype) - lp_B_T)  # log pi_ref - log pi_theta
        kl_ref_B = k3_mean(e_B_T)
        probe_B_T = probe_B_T + e_B_T
    if entropy is not None:
        ent_B_T = masked(entropy)
        entropy_B = ent_B_T.sum(-1) / n_B
        probe_B_T = probe_B_T + ent_B_T
    sampler_kl_B = sampler_max_B = torch.full_like(log_s_B, math.nan)  # NaN: not given
    if sampler_logprobs is not None:
        # u = log pi_old - log pi_sampler, the trainer's log-prob of the sampling policy against
        # the sampler's; k3 = e^u - 1 - u estimates KL(pi_sampler || pi_old) from its tokens
        u_B_T = masked(old_logprobs.detach().to(dtype) - sampler_logprobs.detach().to(dtype))
        sampler_kl_B = k3_mean(u_B_T)
        sampler_max_B = u_B_T.abs().amax(-1)  # (padding: |0| is below every masked |u|)
        probe_B_T = probe_B_T + u_B_T
    return {
        "length": n_B,
        # per-token advantages: their masked mean
        "advantage": adv if adv.dim() == 1 else adv_B_T.sum(-1) / n_B,
        "seq_log_ratio": log_s_B,
        **_reference_clip_fractions(
            mask_B_T, n_B, d_B_T, log_s_B, adv, adv_B_T, seq_eps, token_eps
        ),
        # (padding at +-inf, not at log s: a NaN or overflowed log s would leak into them)
        "token_log_ratio_min": torch.where(mask_B_T, d_B_T, math.inf).amin(-1),
        "token_log_ratio_max": torch.where(mask_B_T, d_B_T, -math.inf).amax(-1),
        # population std: sqrt(mean_t (d_bt - log s_b)^2)
        "token_log_ratio_std": torch.linalg.vector_norm(centred_B_T - log_s_B[:, None], dim=-1)
        / n_B.sqrt(),
        "kl_ref": kl_ref_B,
        "kl_old": k3_mean(d_B_T),
        "sampler_kl": sampler_kl_B,  # mean_t k3(u)
        "sampler_logp_abs_diff_max": sampler_max_B,  # max_t |u|
        "entropy": entropy_B,
        "nonfinite_count": (~torch.isfinite(probe_B_T) & mask_B_T).sum(-1).to(dtype),
    }


def _reference_clip_fractions(mask_B_T, n_B, d_B_T, log_s_B, adv, adv_B_T, seq_eps, token_eps):
    """The clip diagnostics of both units (see the module docstring), NaN where the answer
    depends on a NaN: the sequence unit where log s_b is; the token unit's fractions where a masked
    log r is; a binding fraction also where the advantage of an out-of-range token (or sequence) is.
    """
    nan = math.nan
    # sequence unit: s_b against [1 - eps_low, 1 + eps_high], in log space
    below_B = (log_s_B < math.log1p(-seq_eps[0])).to(n_B.dtype)
    above_B = (log_s_B > math.log1p(seq_eps[1])).to(n_B.dtype)
    seq_unknown_B = torch.isnan(log_s_B)
    # token unit: each r_bt against [1 - eps_low, 1 + eps_high]; padding (d = 0) is inside
    below_B_T = d_B_T < math.log1p(-token_eps[0])
    above_B_T = d_B_T > math.log1p(token_eps[1])
    tok_unknown_B = torch.isnan(d_B_T).any(-1)  # (d is 0 on padding)
    n_below_B, n_above_B = below_B_T.sum(-1), above_B_T.sum(-1)
    if adv.dim() == 1:  # A_b: every token binds on the side A_b pushes, or none does
        adv_nan_B = torch.isnan(adv)
        neg_B = torch.where(adv_nan_B, nan, (adv < 0).to(n_B.dtype))  # fractions 0 or 1
        pos_B = torch.where(adv_nan_B, nan, (adv > 0).to(n_B.dtype))
        tok_low_B = torch.where(n_below_B > 0, n_below_B / n_B * neg_B, 0.0)
        tok_high_B = torch.where(n_above_B > 0, n_above_B / n_B * pos_B, 0.0)
    else:  # A_bt (0 on padding): token by token
        adv_nan_B_T = torch.isnan(adv_B_T)
        neg_B_T, pos_B_T = adv_B_T < 0, adv_B_T > 0
        adv_unknown_B = adv_nan_B_T.any(-1)
        neg_B = torch.where(adv_unknown_B, nan, (neg_B_T & mask_B_T).sum(-1) / n_B)
        pos_B = torch.where(adv_unknown_B, nan, (pos_B_T & mask_B_T).sum(-1) / n_B)
        tok_low_B = torch.where(
            (below_B_T & adv_nan_B_T).any(-1), nan, (below_B_T & neg_B_T).sum(-1) / n_B
        )
        tok_high_B = torch.where(
            (above_B_T & adv_nan_B_T).any(-1), nan, (above_B_T & pos_B_T).sum(-1) / n_B
        )

    def seq_unit(x_B: torch.Tensor) -> torch.Tensor:
        return torch.where(seq_unknown_B, nan, x_B)

    def token_unit(x_B: torch.Tensor) -> torch.Tensor:
        return torch.where(tok_unknown_B, nan, x_B)

    return {
        "seq_clipped": seq_unit(below_B + above_B),  # (disjoint)
        # every token carries s_b: GSPO binds low on the tokens with A < 0 when s_b is below
        "seq_clip_low": seq_unit(torch.where(below_B > 0, neg_B, 0.0)),
        "seq_clip_high": seq_unit(torch.where(above_B > 0, pos_B, 0.0)),
        "token_clip_fraction": token_unit((n_below_B + n_above_B) / n_B),
        "token_clip_low_fraction": token_unit(tok_low_B),
        "token_clip_high_fraction": token_unit(tok_high_B),
    }
