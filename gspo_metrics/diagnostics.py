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
diagnostics and their meaning are declared once, in ``gspo_metrics.spec.PER_SEQUENCE``; each has
one form, here, in eager torch ops on the inputs' own device (``_diagnostics``), and an import
fails while a declared diagnostic has none (``check_every_diagnostic_has_a_form``). Each one's
equation, written as plainly as possible, is the tests' oracle (``tests/diagnostics_oracle.py``),
which holds this form to it on hand cases and random inputs.

The cost: masking is a multiplication by the 0/1 mask, in one reused (R, B, T) buffer. That is
exact when every input is finite everywhere, padding included (``x * 1 = x``, ``x * 0 = 0``); a
NaN or inf anywhere, even under the padding, reaches the returned probe sum (``inf * 0 = nan``),
and that step is computed again by the same form on its inputs with the padding zeroed, with the
rules of the unknown applied (``_nonfinite_step``; rare). Every (B, T) pass and every fresh
(B, T) allocation costs memory traffic, so passes are few and the buffer is reused in place;
every per-token quantity that is summed over T is written to a row of the buffer and all rows are
summed in one reduction, so small batches pay for few tensor ops.
"""

from __future__ import annotations

import functools
import math

import torch

from .checks import (
    as_bool_mask,
    check_choice,
    check_eps_pair,
    check_logprobs_at_most_zero,
    check_nonempty_rows,
    check_same_shape,
    check_tensor,
    positive_logprob_probe,
)
from .losses_core import check_advantages
from .ratios import check_token_shapes
from .spec import GRPO_EPS, GSPO_EPS, SEQUENCE_DIAGNOSTICS, WHOLE_NUMBERS

#: ``backend``'s choices, one form: "torch" and "auto" (the default) name the same ops.
BACKENDS = ("auto", "torch")
#: The optional (B, T) inputs, in the form's argument order.
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
            this every step then allocates nothing). Results never alias it.
        backend: ``"torch"`` or ``"auto"`` (the default), the same: eager tensor ops on the
            inputs' device, the one form of each diagnostic. (The readable equations are the
            tests' oracle, ``tests/diagnostics_oracle.py``, not a route of the product.)

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
    form a recorder wants (one tensor to move to the host). It costs a few dozen tensor ops
    whatever B and T are.

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
        args = (logprobs, old_logprobs, mask, advantages, *optional, dtype, seq_eps, token_eps)
        named = {}
        if check_logprobs:
            named = {
                "logprobs": logprobs,
                "old_logprobs": old_logprobs,
                "ref_logprobs": ref_logprobs,
                "sampler_logprobs": sampler_logprobs,
            }
        values, probe = _diagnostics(*args, workspace)
        out_K_B = stack_diagnostics(values)
        # One host sync for the data-dependent questions: is a row empty, is a log-prob above 0
        # (errors), is anything non-finite anywhere (then ``_nonfinite_step``; rare).
        # ``probe`` sums the row means of every input: an empty row (0 / 0) or a NaN/inf input
        # makes it non-finite (so can an overflow, which only costs the second pass), and so
        # does a log-prob above 0 anywhere (``positive_logprob_probe``; the exact check is masked).
        if named:
            probe = probe + positive_logprob_probe(*named.values()).to(probe.dtype)
        if not math.isfinite(probe.item()):
            check_nonempty_rows(as_bool_mask(mask))  # raises, naming the rows
            check_logprobs_at_most_zero(mask, **named)  # raises, naming the tensor
            out_K_B = stack_diagnostics(_nonfinite_step(*args))
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
    tensor or None) but the empty rows, which the form finds within its one host sync:
    ValueError naming the argument and its shape."""
    check_token_shapes(logprobs, old_logprobs, mask)
    check_advantages(advantages, logprobs)
    check_eps_pair("seq_eps", seq_eps)
    check_eps_pair("token_eps", token_eps)
    for name, x in zip(OPTIONAL, optional, strict=True):
        if x is not None:
            check_tensor(x, name, 2, "(B, T)", floating=True)
            check_same_shape(logprobs, "logprobs", **{name: x})


# ----------------------------------------------------------------------------- the form


#: The per-token inputs a row of the buffer may hold besides log r, in buffer order ("sampler":
#: u = log pi_old - log pi_sampler).
_INPUTS = ("ref", "entropy", "advantage", "sampler")


@functools.lru_cache(maxsize=32)
def _buffer_rows(has_ref: bool, has_ent: bool, per_tok: bool, has_smp: bool) -> dict[str, int]:
    """Row of each per-token quantity in the (R, B, T) buffer: the 0/1 mask; log r and the other
    inputs' masked values (the rows whose means the probe sums); the terms of the means."""
    given = dict(zip(_INPUTS, (has_ref, has_ent, per_tok, has_smp), strict=True))
    names = ["mask", "log_ratio", *(name for name in _INPUTS if given[name])]
    names += ["kl_old", "below", "above"] + ["kl_ref"] * has_ref + ["sampler_kl"] * has_smp
    return {name: i for i, name in enumerate(names)}


def _diagnostics(
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
    workspace=None,
    nonfinite=False,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Every diagnostic (name -> (B,), views of the buffer: stack them before the next call) and
    the probe: the sum of the row means of every input's masked values, non-finite iff a row is
    empty (0 / 0) or an input is non-finite (barring overflow). ``nonfinite``: the inputs hold a
    NaN or inf inside the mask, and nothing but 0 on the padding (``_nonfinite_step``'s call)."""
    per_tok = advantages.dim() == 2
    has = (ref_logprobs is not None, entropy is not None, per_tok, sampler_logprobs is not None)
    row = _buffer_rows(*has)
    B, T = mask.shape
    w = _scratch(workspace, "rows", (len(row), B, T), dtype, mask.device)
    tok_lo, tok_hi = math.log1p(-token_eps[0]), math.log1p(token_eps[1])
    adv = advantages.to(dtype)
    inputs = (logprobs, old_logprobs, mask, adv, ref_logprobs, entropy, sampler_logprobs)
    sums_R_B, mask_f, d_B_T = _write_rows(w, row, *inputs, tok_lo, tok_hi)
    n_B = sums_R_B[row["mask"]]
    means_R_B = sums_R_B / n_B
    log_s_B = means_R_B[row["log_ratio"]]
    # the rows between the mask and kl_old hold the inputs
    probe = means_R_B[row["log_ratio"] : row["kl_old"]].sum()
    nan_B = torch.full_like(log_s_B, float("nan"))
    values = {
        "length": n_B,
        "advantage": means_R_B[row["advantage"]] if per_tok else adv,
        "seq_log_ratio": log_s_B,
        "token_clip_fraction": (sums_R_B[row["below"]] + sums_R_B[row["above"]]) / n_B,
        "kl_ref": means_R_B[row["kl_ref"]] if "kl_ref" in row else nan_B,
        "kl_old": means_R_B[row["kl_old"]],
        "entropy": means_R_B[row["entropy"]] if "entropy" in row else nan_B,
        **_sampler_values(w, row, means_R_B, nan_B),
        "nonfinite_count": torch.zeros_like(n_B),  # (the probe sends any non-finite step away)
    }
    mask_B_T = as_bool_mask(mask) if per_tok or nonfinite else None
    if per_tok:  # per-token advantages: the binding side is decided token by token
        low_high = _per_token_adv_stats(
            w[row["advantage"]], d_B_T < tok_lo, d_B_T > tok_hi, mask_B_T, n_B, nonfinite
        )
    else:
        probe = probe + adv.sum()
        low_high = None
    # (the spread overwrites the "below" row: its count was summed above)
    values.update(
        _spread(d_B_T, mask_f, log_s_B, n_B, w[row["below"]], mask_B_T if nonfinite else None)
    )
    below_above_2_B = means_R_B[row["below"] : row["above"] + 1]
    values.update(_clip_sides(values, below_above_2_B, seq_eps, dtype, low_high, nonfinite))
    if nonfinite:
        values.update(_unknowns(values, w, row, d_B_T, mask_B_T, adv))
    return values, probe


def _nonfinite_step(
    logprobs, old_logprobs, mask, advantages, ref_logprobs, entropy, smp, dtype, seq_eps, token_eps
) -> dict[str, torch.Tensor]:
    """A step holding a NaN or inf somewhere (the probe said so): every diagnostic by the same
    form (``_diagnostics``), on the inputs with their padding zeroed (``where``, so a NaN there
    can no longer reach a row through ``x * 0``) and with the rules of the unknown applied inside
    the mask (``_unknowns``). A fresh buffer: the workspace's may hold the first pass's views."""
    mask_B_T = as_bool_mask(mask)

    def clean(x: torch.Tensor | None) -> torch.Tensor | None:
        return None if x is None else torch.where(mask_B_T, x.to(dtype), 0.0)

    adv = clean(advantages) if advantages.dim() == 2 else advantages
    tensors = (clean(logprobs), clean(old_logprobs), mask, adv, clean(ref_logprobs))
    values, _ = _diagnostics(
        *tensors, clean(entropy), clean(smp), dtype, seq_eps, token_eps, nonfinite=True
    )
    return values


#: The diagnostics of each clip unit, unknown (NaN) where that unit's log-ratio is.
SEQUENCE_UNIT = ("seq_clipped", "seq_clip_low", "seq_clip_high")
TOKEN_UNIT = ("token_clip_fraction", "token_clip_low_fraction", "token_clip_high_fraction")


def _unknowns(values, w, row, d_B_T, mask_B_T, adv) -> dict[str, torch.Tensor]:
    """The rules of the unknown, for a step with a NaN or inf inside the mask (the form's other
    diagnostics carry them by arithmetic): ``nonfinite_count``, the masked tokens where an input
    (log r, A, and the optional inputs the buffer holds, summed) is not finite; the sequence
    unit's clip diagnostics NaN where log s_b is, the token unit's where a masked log r_bt is
    (a comparison with NaN is false: it would count as inside)."""
    nan = math.nan
    probe_B_T = d_B_T + (w[row["advantage"]] if "advantage" in row else adv[:, None])
    for name in ("ref", "entropy", "sampler"):
        if name in row:
            probe_B_T = probe_B_T + w[row[name]]
    count_B = (~torch.isfinite(probe_B_T) & mask_B_T).sum(-1).to(d_B_T.dtype)
    seq_unknown_B = torch.isnan(values["seq_log_ratio"])
    tok_unknown_B = torch.isnan(d_B_T).any(-1)  # (d is 0 on padding)
    return {
        "nonfinite_count": count_B,
        **{name: torch.where(seq_unknown_B, nan, values[name]) for name in SEQUENCE_UNIT},
        **{name: torch.where(tok_unknown_B, nan, values[name]) for name in TOKEN_UNIT},
    }


def stack_diagnostics(values: dict[str, torch.Tensor]) -> torch.Tensor:
    """The (K, B) stack of named (B,) diagnostics, rows in ``SEQUENCE_DIAGNOSTICS`` order."""
    return torch.stack([values[name] for name in SEQUENCE_DIAGNOSTICS])


def _write_rows(w, row, lp, old_logprobs, mask, adv, ref_logprobs, entropy, smp, tok_lo, tok_hi):
    """Fill the buffer's rows (``row``: name -> index); returns their sums over T (R, B), and
    the rows of the 0/1 mask and of log r (0 on padding), (B, T) each.

    Small batches: one reduction of every row at the end (few ops). Large ones: each row is
    summed right after it is written, while it is still in cache (one sum of R large rows
    re-reads them all from memory). Same per-row reduction, same bits. (No .detach(): the caller
    runs this under torch.no_grad, so nothing here records a graph.)
    """
    R, B, T = w.shape
    per_row = B * T >= 1 << 16
    sums_R_B = torch.empty((R, B), dtype=w.dtype, device=w.device) if per_row else None

    def written(*names: str) -> None:
        if sums_R_B is not None:  # (per_row)
            for name in names:
                torch.sum(w[row[name]], -1, out=sums_R_B[row[name]])

    def difference(name: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Row ``name`` := a - b, 0 on padding."""
        x_B_T = _sub_into(w[row[name]], a, b).mul_(mask_f)
        written(name)
        return x_B_T

    def k3(name: str, x_B_T: torch.Tensor) -> None:
        """Row ``name`` := expm1(x) - x, the k3 term of a log-ratio x (exactly 0 where x = 0)."""
        torch.expm1(x_B_T, out=w[row[name]]).sub_(x_B_T)
        written(name)

    # the 0/1 mask as floats. A bool tensor's bytes are 0/1: converting them as uint8 gives the
    # same values, and torch's uint8 -> float conversion is faster on CPU than bool -> float
    if mask.dtype == torch.bool:
        mask_f = w[row["mask"]].copy_(mask.view(torch.uint8))
    else:  # any dtype: nonzero marks a token (as_bool_mask's rule), written as 0/1 floats
        mask_f = torch.ne(mask, 0, out=w[row["mask"]])
    written("mask")
    d_B_T = difference("log_ratio", lp, old_logprobs)  # log r = log pi_theta - log pi_old
    if ref_logprobs is not None:
        # k3 of d = logp - ref: exp(-d) - 1 + d = expm1(e) - e with e = ref - logp
        k3("kl_ref", difference("ref", ref_logprobs, lp))
    if entropy is not None:
        torch.mul(entropy, mask_f, out=w[row["entropy"]])
        written("entropy")
    if "advantage" in row:
        torch.mul(adv, mask_f, out=w[row["advantage"]])
        written("advantage")
    if smp is not None:
        # u = log pi_old - log pi_sampler, 0 on padding; its k3 = expm1(u) - u
        k3("sampler_kl", difference("sampler", old_logprobs, smp))
    k3("kl_old", d_B_T)  # (0 where d = 0: the padding needs no second mask)
    # padding has d = 0, inside every range; counts of 0/1 floats are exact below 2^24
    torch.lt(d_B_T, tok_lo, out=w[row["below"]])
    torch.gt(d_B_T, tok_hi, out=w[row["above"]])
    written("below", "above")
    return (sums_R_B if per_row else w.sum(-1)), mask_f, d_B_T


def _sub_into(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a - b written to ``out``, computed in ``out``'s dtype (half-precision inputs are
    subtracted in float32, as every other input is, not rounded to half precision first)."""
    if a.dtype == out.dtype and b.dtype == out.dtype:
        return torch.sub(a, b, out=out)
    return out.copy_(a).sub_(b)


def _sampler_values(w, row, means_R_B, nan_B) -> dict[str, torch.Tensor]:
    """``sampler_kl`` (mean_t k3(u)) and ``sampler_logp_abs_diff_max`` (max_t |u|) from the
    buffer's rows, NaN without sampler log-probs. u is 0 on padding, so max(amax u, -amin u) is
    the masked max of |u| (0 lies inside [min u, max u] of a row with padding) and no |u| buffer
    is needed."""
    if "sampler" not in row:
        return {"sampler_kl": nan_B, "sampler_logp_abs_diff_max": nan_B}
    u_B_T = w[row["sampler"]]
    return {
        "sampler_kl": means_R_B[row["sampler_kl"]],
        "sampler_logp_abs_diff_max": torch.maximum(u_B_T.amax(-1), u_B_T.amin(-1).neg_()),
    }


def _spread(d_B_T, mask_f, log_s_B, n_B, out, mask_B_T=None) -> dict[str, torch.Tensor]:
    """Masked min, max and population std of each row's log r, using ``out`` (B, T) as scratch.

    Padding takes the row mean, which lies inside [min, max] of the row's tokens and adds 0 to
    the squared deviations: one tensor gives exact masked min, max and std. (amin + amax, not
    torch.aminmax, which is slower on small CPU tensors.) lerp(a, b, w) is exactly a at w = 0 and
    exactly b at w = 1 (torch evaluates it as a + w (b - a) for w < 0.5 and b - (b - a)(1 - w)
    otherwise), so this is where(mask, d, log s) in float arithmetic, on the float mask the
    buffer already holds.

    ``mask_B_T`` (a step holding a NaN or inf): log s may be unknown or infinite, so the padding
    is ``where``'s log s for the std (lerp's ``0 * inf`` would be NaN) and +-inf for min and max.
    """
    log_s_col = log_s_B[:, None]
    if mask_B_T is None:
        work_B_T = torch.lerp(log_s_col, d_B_T, mask_f, out=out)
        tmin_B, tmax_B = work_B_T.amin(-1), work_B_T.amax(-1)
    else:
        work_B_T = torch.where(mask_B_T, d_B_T, log_s_col)
        tmin_B = torch.where(mask_B_T, d_B_T, math.inf).amin(-1)
        tmax_B = torch.where(mask_B_T, d_B_T, -math.inf).amax(-1)
    tstd_B = torch.linalg.vector_norm(work_B_T.sub_(log_s_col), dim=-1) / n_B.sqrt()
    return {
        "token_log_ratio_min": tmin_B,
        "token_log_ratio_max": tmax_B,
        "token_log_ratio_std": tstd_B,
    }


def _clip_sides(
    values, below_above_2_B, seq_eps, dtype, low_high, nonfinite
) -> dict[str, torch.Tensor]:
    """The clip-binding diagnostics from ``values``' advantage and log s, two rows at a time
    (few tensor ops for small batches). ``below_above_2_B``: the fraction of a row's tokens below
    / above the token-unit range; ``low_high``: with per-token advantages, the fractions of
    tokens binding low / high and of tokens with A < 0 / A > 0 (None with (B,) advantages).
    ``nonfinite``: an advantage may be NaN (the side it pushes is then unknown)."""
    adv_B, log_s_B = values["advantage"], values["seq_log_ratio"]
    lo_2_1, hi_2_1 = _side_thresholds(seq_eps, dtype, log_s_B.device)
    x_2_B = torch.stack([adv_B, log_s_B])
    # [[A < 0, s below the range], [A > 0, s above it]] as 0/1
    side_2_2_B = torch.stack([x_2_B < lo_2_1, x_2_B > hi_2_1]).to(dtype)
    seq_side_2_B = side_2_2_B[:, 1]
    if low_high is None:  # (B,) advantages: a row binds low on all its below tokens iff A < 0
        frac_2_B = side_2_2_B[:, 0]
        if nonfinite:
            frac_2_B = torch.where(torch.isnan(adv_B), math.nan, frac_2_B)
        # (n_below / n) * 1 == (n_below * 1) / n, and (n_below / n) * 0 == 0: exact either way
        tok_2_B = _binding(below_above_2_B, frac_2_B, nonfinite)
    else:
        tok_low_B, tok_high_B, neg_frac_B, pos_frac_B = low_high
        frac_2_B = torch.stack([neg_frac_B, pos_frac_B])
        tok_2_B = torch.stack([tok_low_B, tok_high_B])
    # GSPO binds where s is out of range on the side A pushes
    seq_clip_2_B = _binding(seq_side_2_B, frac_2_B, nonfinite)
    return {
        "seq_clipped": seq_side_2_B.sum(0),  # (below and above are disjoint)
        "seq_clip_low": seq_clip_2_B[0],
        "seq_clip_high": seq_clip_2_B[1],
        "token_clip_low_fraction": tok_2_B[0],
        "token_clip_high_fraction": tok_2_B[1],
    }


def _binding(out_2_B, frac_2_B, nonfinite) -> torch.Tensor:
    """The share of a row binding on each side: the share out of range there times the share
    pushing that way. A product while every share is finite, in [0, 1] (then it equals
    ``where(out > 0, out * frac, 0)``); ``nonfinite``: that ``where``, so a row with nothing out
    of range binds nothing even where the advantage is unknown (0 * NaN would be NaN)."""
    product_2_B = out_2_B * frac_2_B
    return torch.where(out_2_B > 0, product_2_B, 0.0) if nonfinite else product_2_B


_THRESHOLDS: dict = {}


def _side_thresholds(seq_eps, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(2, 1) columns [[0], [log(1 - eps_low)]] and [[0], [log1p(eps_high)]] in ``dtype``,
    compared against [advantage, log s] (cached: building a tensor costs as much as using it).
    A Python scalar is rounded to the tensor's dtype when compared, and so are these."""
    key = (float(seq_eps[0]), float(seq_eps[1]), dtype, device)
    out = _THRESHOLDS.get(key)
    if out is None:
        lo, hi = math.log1p(-seq_eps[0]), math.log1p(seq_eps[1])
        out = (
            torch.tensor([[0.0], [lo]], dtype=dtype, device=device),
            torch.tensor([[0.0], [hi]], dtype=dtype, device=device),
        )
        if len(_THRESHOLDS) > 64:
            _THRESHOLDS.clear()
        _THRESHOLDS[key] = out
    return out


def _per_token_adv_stats(adv_B_T, below_B_T, above_B_T, mask_B_T, n_B, nonfinite):
    """Fractions of a row's tokens: binding low (below, A < 0), binding high (above, A > 0),
    with A < 0, with A > 0. ``adv_bt`` is 0 on padding. ``nonfinite``: NaN where a token they
    count on has a NaN advantage (binding: an out-of-range token's; sides: any masked token's)."""
    neg_B_T = adv_B_T < 0
    pos_B_T = adv_B_T > 0
    out = (
        (below_B_T & neg_B_T).sum(-1) / n_B,
        (above_B_T & pos_B_T).sum(-1) / n_B,
        (neg_B_T & mask_B_T).sum(-1) / n_B,
        (pos_B_T & mask_B_T).sum(-1) / n_B,
    )
    if not nonfinite:
        return out
    nan_B_T = torch.isnan(adv_B_T)
    any_B = nan_B_T.any(-1)
    unknown = ((below_B_T & nan_B_T).any(-1), (above_B_T & nan_B_T).any(-1), any_B, any_B)
    return tuple(torch.where(u_B, math.nan, x_B) for u_B, x_B in zip(unknown, out, strict=True))


def _scratch(workspace: dict | None, key: str, shape: tuple, dtype, device) -> torch.Tensor:
    """An uninitialised tensor of ``shape``: a view of a reused buffer in ``workspace``."""
    n = math.prod(shape)
    if workspace is None:
        return torch.empty(shape, dtype=dtype, device=device)
    buf = workspace.get(key)
    if buf is None or buf.numel() < n or buf.dtype != dtype or buf.device != device:
        size = n if buf is None else max(n, buf.numel() * 5 // 4)  # grows with varying T
        buf = workspace[key] = torch.empty(size, dtype=dtype, device=device)
    return buf[:n].view(shape)


def check_every_diagnostic_has_a_form(names: tuple[str, ...] = SEQUENCE_DIAGNOSTICS) -> None:
    """ImportError naming each declared diagnostic (``spec.PER_SEQUENCE``) the form does not
    compute, or each it computes that is not declared: run at import on a 1 x 1 step, so a new
    diagnostic without its form fails the first import, never a step or a silent slow path."""
    x = torch.zeros(1, 1, dtype=torch.float64)
    ones = torch.ones(1, 1, dtype=torch.bool)
    values, _ = _diagnostics(x, x, ones, x[0], None, None, None, x.dtype, GSPO_EPS, GRPO_EPS)
    missing = [name for name in names if name not in values]
    undeclared = [name for name in values if name not in names]
    if missing or undeclared:
        raise ImportError(
            "gspo_metrics.diagnostics: every diagnostic declared in spec.PER_SEQUENCE needs its "
            f"form in _diagnostics; no form: {missing}; a form but no declaration: {undeclared}"
        )


check_every_diagnostic_has_a_form()
