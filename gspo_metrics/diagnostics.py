"""Per-sequence diagnostics of one policy-gradient update, in both clipping units at once.

The sequence unit (GSPO's): s_b = exp(mean_t log r_bt) against [1 - seq_eps_low, 1 + seq_eps_high].
The token unit (GRPO's):    r_bt = exp(log pi_theta - log pi_old) against [1 - token_eps_low, 1 + token_eps_high].
Computing both on every run puts a GRPO run and a GSPO run on the same scale, whatever trained.

Clip tests are done in log space (log r < log(1 - eps_low), log r > log1p(eps_high)), so no ratio
is exponentiated and padding (log r = 0, inside the range) can never count as clipped.
Where the clip *binds* (the gradient is zeroed) is where the ratio is out of range on the side the
advantage pushes: low with A < 0, high with A > 0 (TRL's clip_ratio/low|high, verl's pg_clipfrac).

A diagnostic none of whose inputs is known is NaN, never 0: a comparison with NaN is false, so a
clip test on a NaN log-ratio would otherwise count the token (or the sequence) as "inside".

All outputs are (B,) tensors on the inputs' device; nothing is transferred to the host. The
diagnostics and their meaning are declared once, in ``gspo_metrics.spec.PER_SEQUENCE``.

Two routes compute them, and the tests hold them to the same numbers:

- the torch route (``gspo_metrics.eager``), what every call runs: few tensor ops in one reused
  (R, B, T) buffer on the inputs' device, exact while every input is finite; a step that holds a
  NaN or inf anywhere (or an empty row) is handed to the reference route;
- the reference route (``reference_diagnostics``, below): each diagnostic as its equation, masked
  with ``torch.where`` so no padding value can leak; the readable one, the tests' oracle, and the
  answer for a step that holds a NaN or inf.
"""

from __future__ import annotations

import math

import torch

from .checks import (
    as_bool_mask,
    check_choice,
    check_eps_pair,
    check_logprobs_at_most_zero,
    check_no_empty_rows,
    check_nonempty_rows,
    check_same_shape,
    check_tensor,
    positive_logprob_probe,
)
from .eager import eager_diagnostics, stack_diagnostics
from .losses_core import check_advantages
from .ratios import check_token_shapes
from .spec import GRPO_EPS, GSPO_EPS, SEQUENCE_DIAGNOSTICS, WHOLE_NUMBERS

BACKENDS = ("auto", "torch", "reference")
#: The optional (B, T) inputs, in the routes' argument order.
OPTIONAL = ("ref_logprobs", "entropy", "sampler_logprobs")


def sequence_diagnostics(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    seq_eps: tuple[float, float] = GSPO_EPS,
    token_eps: tuple[float, float] = GRPO_EPS,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    sampler_logprobs: torch.Tensor | None = None,
    workspace: dict | None = None,
    backend: str = "auto",
) -> dict[str, torch.Tensor]:
    """Every per-sequence diagnostic in ``SEQUENCE_DIAGNOSTICS``, as detached (B,) tensors.

    Args:
        logprobs, old_logprobs, mask, advantages: as for the losses (``gspo_loss``).
        seq_eps: (eps_low, eps_high) of the sequence unit (GSPO's clip range).
        token_eps: (eps_low, eps_high) of the token unit (GRPO's clip range).
        ref_logprobs: optional (B, T) log pi_ref, for the KL to the reference policy.
        entropy: optional (B, T) per-token entropy of pi_theta.
        sampler_logprobs: optional (B, T) log pi_sampler: the log-probs the inference engine
            (vLLM, SGLang) reported for the tokens it sampled, for the sampler/trainer mismatch
            (``sampler_kl``, ``sampler_logp_abs_diff_max``; NaN without them).
        workspace: optional dict the caller passes again on every call (one per thread): a
            (R, B, T) scratch buffer is kept in it and reused instead of allocated (a loop calling
            this every step then allocates nothing). Results never alias it. (Used by the torch
            route only.)
        backend: ``"torch"`` (or ``"auto"``, the default): eager tensor ops on the inputs'
            device; ``"reference"``: the readable route (slower; for checking). Both give the
            same numbers to float rounding.

    The counts (``length``, ``nonfinite_count``: ``spec.WHOLE_NUMBERS``) are int64, the others
    have the inputs' floating dtype (float32 for half-precision inputs). The values are rows of
    ``stacked_sequence_diagnostics``.
    """
    out_K_B = stacked_sequence_diagnostics(
        logprobs,
        old_logprobs,
        mask,
        advantages,
        seq_eps=seq_eps,
        token_eps=token_eps,
        ref_logprobs=ref_logprobs,
        entropy=entropy,
        sampler_logprobs=sampler_logprobs,
        workspace=workspace,
        backend=backend,
    )
    out = dict(zip(SEQUENCE_DIAGNOSTICS, out_K_B.unbind(0), strict=True))
    for name in WHOLE_NUMBERS:  # whole numbers, exact in any float dtype
        out[name] = out[name].to(torch.int64)
    return out


def stacked_sequence_diagnostics(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    seq_eps: tuple[float, float] = GSPO_EPS,
    token_eps: tuple[float, float] = GRPO_EPS,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    sampler_logprobs: torch.Tensor | None = None,
    workspace: dict | None = None,
    backend: str = "auto",
    check_logprobs: bool = False,
) -> torch.Tensor:
    """``sequence_diagnostics`` as one detached (K, B) tensor, K = len(SEQUENCE_DIAGNOSTICS).

    Row k is ``SEQUENCE_DIAGNOSTICS[k]`` (``length`` and ``nonfinite_count`` as whole floats), in
    the inputs' floating dtype. Same arguments and checks as ``sequence_diagnostics``; this is the
    form a recorder wants (one tensor to move to the host). The torch route costs a few dozen
    tensor ops whatever B and T are.

    ``check_logprobs`` (the recorder's): a log-prob above 0 inside the mask (beyond
    ``checks.logprob_tolerance``: 1e-3 in float32) in ``logprobs``, ``old_logprobs``,
    ``ref_logprobs`` or ``sampler_logprobs`` is a ValueError naming the tensor and how many
    values (probabilities or logits passed as log-probs), found within the same host sync. Off,
    only differences of log-probs are read, so a hand case may shift them freely.
    """
    with torch.no_grad():
        optional = (ref_logprobs, entropy, sampler_logprobs)
        check_diagnostics_inputs(
            logprobs, old_logprobs, mask, advantages, seq_eps, token_eps, optional
        )
        check_choice(backend, "backend", BACKENDS)
        # Half-precision inputs are reduced in float32 (sums of 1,000 bf16 terms are not exact).
        dtype = torch.promote_types(logprobs.dtype, torch.float32)
        args = (logprobs, old_logprobs, mask, advantages, *optional, dtype)
        named = {}
        if check_logprobs:
            named = {
                "logprobs": logprobs,
                "old_logprobs": old_logprobs,
                "ref_logprobs": ref_logprobs,
                "sampler_logprobs": sampler_logprobs,
            }
        if backend == "reference":
            check_no_empty_rows(mask)
            check_logprobs_at_most_zero(mask, **named)
            return stack_diagnostics(reference_diagnostics(*args, seq_eps, token_eps))
        values, probe = eager_diagnostics(*args, seq_eps, token_eps, workspace)
        if len(values) < len(SEQUENCE_DIAGNOSTICS):  # a diagnostic with no eager form (yet)
            values = _with_reference(values, args[:-1], args[-1], seq_eps, token_eps)
        out_K_B = stack_diagnostics(values)
        # One host sync for the data-dependent questions: is a row empty, is a log-prob above 0
        # (errors), is anything non-finite anywhere (then the reference route counts it; rare).
        # ``probe`` sums the row means of every input: an empty row (0 / 0) or a NaN/inf input
        # makes it non-finite (so can an overflow, which only costs the reference pass), and so
        # does a log-prob above 0 anywhere (``positive_logprob_probe``; the exact check is masked).
        if named:
            probe = probe + positive_logprob_probe(*named.values()).to(probe.dtype)
        if not math.isfinite(probe.item()):
            check_nonempty_rows(as_bool_mask(mask))  # raises, naming the rows
            check_logprobs_at_most_zero(mask, **named)  # raises, naming the tensor
            out_K_B = stack_diagnostics(reference_diagnostics(*args, seq_eps, token_eps))
        return out_K_B


def check_diagnostics_inputs(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    seq_eps: tuple[float, float],
    token_eps: tuple[float, float],
    optional: tuple[torch.Tensor | None, ...],
) -> None:
    """Every check of ``sequence_diagnostics``' arguments (``optional``: ``OPTIONAL``'s, each a
    tensor or None) but the empty rows, which each route finds within its one host sync:
    ValueError naming the argument and its shape."""
    check_token_shapes(logprobs, old_logprobs, mask)
    check_advantages(advantages, logprobs)
    check_eps_pair("seq_eps", seq_eps)
    check_eps_pair("token_eps", token_eps)
    for name, x in zip(OPTIONAL, optional, strict=True):
        if x is not None:
            check_tensor(x, name, 2, "(B, T)", floating=True)
            check_same_shape(logprobs, "logprobs", **{name: x})


# ----------------------------------------------------------------------------- the reference


def _with_reference(values, inputs, dtype, seq_eps, token_eps):
    """``values`` (the torch route's) completed by the reference route's equations for the
    diagnostics that route has no form of: a new diagnostic needs only its equation
    (``reference_diagnostics``), at the cost of the reference pass on every step until it is
    written in ``gspo_metrics.eager`` too. ``inputs``: the seven tensors (or None) of the routes'
    argument order."""
    lp, old, mask, adv, ref_lp, ent, smp = inputs
    ref = reference_diagnostics(lp, old, mask, adv, ref_lp, ent, smp, dtype, seq_eps, token_eps)
    return {name: values[name] if name in values else ref[name] for name in SEQUENCE_DIAGNOSTICS}


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
    """Every diagnostic of ``SEQUENCE_DIAGNOSTICS`` as its equation: name -> (B,) in ``dtype``.

    M_b is row b's masked tokens, n_b = |M_b| (every row marks one), d_bt = log r_bt =
    log pi_theta - log pi_old, mean_t a masked mean over M_b.
    """
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
