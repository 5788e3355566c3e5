"""Per-sequence diagnostics of one policy-gradient update, in both clipping units at once.

The sequence unit (GSPO's): s_b = exp(mean_t log r_bt) against [1 - seq_eps_low, 1 + seq_eps_high].
The token unit (GRPO's):    r_bt = exp(log pi_theta - log pi_old) against [1 - token_eps_low, 1 + token_eps_high].
Computing both on every run puts a GRPO run and a GSPO run on the same scale, whatever trained.

Clip tests are done in log space (log r < log(1 - eps_low), log r > log1p(eps_high)), so no ratio
is exponentiated and padding (log r = 0, inside the range) can never count as clipped.
Where the clip *binds* (the gradient is zeroed) is where the ratio is out of range on the side the
advantage pushes: low with A < 0, high with A > 0 (TRL's clip_ratio/low|high, verl's pg_clipfrac).

All outputs are (B,) tensors on the inputs' device; nothing is transferred to the host.
"""

from __future__ import annotations

import math

import torch

from ._validate import check_eps, check_float, check_same_shape, check_tensor
from .kl import kl_terms
from .losses import check_advantages
from .masked import masked_fill_zero
from .ratios import check_token_inputs

SEQUENCE_DIAGNOSTICS = (
    "length",  # masked tokens
    "advantage",  # the sequence's advantage (masked mean if per token)
    "seq_log_ratio",  # log s
    "seq_clipped",  # 1.0 if s is outside the sequence-unit range (Tinker's clipped fraction)
    "seq_clip_low",  # fraction of tokens where GSPO's clip binds low (s < 1-eps_low, A < 0)
    "seq_clip_high",  # fraction of tokens where GSPO's clip binds high (s > 1+eps_high, A > 0)
    "token_log_ratio_min",
    "token_log_ratio_max",
    "token_log_ratio_std",  # population std over the sequence's tokens
    "token_clip_fraction",  # fraction of tokens whose own ratio is outside the token-unit range
    "token_clip_low_fraction",
    "token_clip_high_fraction",
    "kl_ref",  # k3 estimate of KL(pi_theta || pi_ref), masked mean; NaN without ref_logprobs
    "kl_old",  # k3 estimate of KL(pi_old || pi_theta), masked mean
    "entropy",  # masked mean; NaN without entropy
    "nonfinite_count",  # masked positions where any input is NaN or inf
)


def sequence_diagnostics(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    seq_eps: tuple[float, float] = (3e-4, 4e-4),
    token_eps: tuple[float, float] = (0.2, 0.2),
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """Every per-sequence diagnostic in ``SEQUENCE_DIAGNOSTICS``, as detached (B,) tensors.

    Args:
        logprobs, old_logprobs, mask: (B, T), as for the losses.
        advantages: (B,) or (B, T).
        seq_eps: (eps_low, eps_high) of the sequence unit (GSPO's clip range).
        token_eps: (eps_low, eps_high) of the token unit (GRPO's clip range).
        ref_logprobs: optional (B, T) log pi_ref, for the KL to the reference policy.
        entropy: optional (B, T) per-token entropy of pi_theta.
    """
    with torch.no_grad():
        mask_bt, count_b = check_token_inputs(logprobs, old_logprobs, mask)
        check_advantages(advantages, logprobs)
        for name, eps in (("seq_eps", seq_eps), ("token_eps", token_eps)):
            if not isinstance(eps, tuple | list) or len(eps) != 2:
                raise ValueError(f"{name} must be a pair (eps_low, eps_high), got {eps!r}")
            try:
                check_eps(*eps)
            except ValueError as e:
                raise ValueError(f"{name}: {e}") from None
        for name, x in (("ref_logprobs", ref_logprobs), ("entropy", entropy)):
            if x is not None:
                check_tensor(x, name, 2, "(B, T)")
                check_float(x, name)
                check_same_shape(logprobs, "logprobs", **{name: x})

        dtype = logprobs.dtype
        n_b = count_b.to(dtype)
        lp_bt = masked_fill_zero(logprobs.detach(), mask_bt)
        d_bt = lp_bt - masked_fill_zero(old_logprobs.detach(), mask_bt)  # log r, 0 on padding

        adv = advantages.detach().to(dtype)
        if adv.dim() == 1:
            adv_b = adv
            adv_bt = adv[:, None]  # broadcasts over T
        else:
            adv_bt = masked_fill_zero(adv, mask_bt)
            adv_b = adv_bt.sum(-1) / n_b

        log_s_b = d_bt.sum(-1) / n_b
        # Padding takes the row mean, which lies inside [min, max] of the row's tokens and adds 0
        # to the squared deviations: one tensor gives exact masked min, max and std.
        centred_bt = torch.where(mask_bt, d_bt, log_s_b[:, None])
        tmin_b, tmax_b = torch.aminmax(centred_bt, dim=-1)
        tstd_b = ((centred_bt - log_s_b[:, None]).square().sum(-1) / n_b).sqrt()

        seq_lo, seq_hi = math.log1p(-seq_eps[0]), math.log1p(seq_eps[1])
        tok_lo, tok_hi = math.log1p(-token_eps[0]), math.log1p(token_eps[1])

        below_bt = d_bt < tok_lo  # padding has d = 0, inside every range
        above_bt = d_bt > tok_hi
        neg_bt = adv_bt < 0
        pos_bt = adv_bt > 0
        tok_out_b = (below_bt | above_bt).sum(-1) / n_b
        tok_low_b = (below_bt & neg_bt).sum(-1) / n_b
        tok_high_b = (above_bt & pos_bt).sum(-1) / n_b

        seq_below_b = log_s_b < seq_lo
        seq_above_b = log_s_b > seq_hi
        if adv.dim() == 1:
            neg_frac_b = (adv_b < 0).to(dtype)
            pos_frac_b = (adv_b > 0).to(dtype)
        else:
            neg_frac_b = (neg_bt & mask_bt).sum(-1) / n_b
            pos_frac_b = (pos_bt & mask_bt).sum(-1) / n_b
        seq_low_b = torch.where(seq_below_b, neg_frac_b, 0.0)
        seq_high_b = torch.where(seq_above_b, pos_frac_b, 0.0)

        kl_old_b = masked_fill_zero(torch.expm1(d_bt) - d_bt, mask_bt).sum(-1) / n_b
        nan_b = torch.full_like(log_s_b, float("nan"))
        # any non-finite input at a masked position makes this sum non-finite there
        probe_bt = d_bt + adv_bt
        if ref_logprobs is not None:
            dref_bt = lp_bt - masked_fill_zero(ref_logprobs.detach(), mask_bt)
            kl_ref_b = masked_fill_zero(kl_terms(dref_bt, "k3"), mask_bt).sum(-1) / n_b
            probe_bt = probe_bt + dref_bt
        else:
            kl_ref_b = nan_b
        if entropy is not None:
            ent_bt = masked_fill_zero(entropy.detach(), mask_bt)
            entropy_b = ent_bt.sum(-1) / n_b
            probe_bt = probe_bt + ent_bt
        else:
            entropy_b = nan_b
        nonfinite_b = (~torch.isfinite(probe_bt) & mask_bt).sum(-1)

        return {
            "length": count_b,
            "advantage": adv_b,
            "seq_log_ratio": log_s_b,
            "seq_clipped": (seq_below_b | seq_above_b).to(dtype),
            "seq_clip_low": seq_low_b,
            "seq_clip_high": seq_high_b,
            "token_log_ratio_min": tmin_b,
            "token_log_ratio_max": tmax_b,
            "token_log_ratio_std": tstd_b,
            "token_clip_fraction": tok_out_b,
            "token_clip_low_fraction": tok_low_b,
            "token_clip_high_fraction": tok_high_b,
            "kl_ref": kl_ref_b,
            "kl_old": kl_old_b,
            "entropy": entropy_b,
            "nonfinite_count": nonfinite_b,
        }
