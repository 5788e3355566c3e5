"""``stacked_sequence_diagnostics`` in eager tensor ops, on the inputs' own device: the route every
call runs.

It must give the numbers of the reference route (``diagnostics.reference_diagnostics``, where
each diagnostic is its equation); the tests hold it to them. What differs is the cost: masking
is a multiplication by the 0/1 mask, in one reused (R, B, T) buffer. That is exact when every
input is finite everywhere, padding included (``x * 1 = x``, ``x * 0 = 0``); a NaN or inf
anywhere, even under the padding, reaches the returned probe sum (``inf * 0 = nan``), and the
caller then takes the reference route. Every (B, T) pass and every fresh (B, T) allocation costs
memory traffic, so passes are few and the buffer is reused in place; every per-token quantity
that is summed over T is written to a row of the buffer and all rows are summed in one
reduction, so small batches pay for few tensor ops. A diagnostic this route has no form of is
left out of its values; the caller takes it from the reference route
(``diagnostics._with_reference``).
"""

from __future__ import annotations

import functools
import math

import torch

from .checks import as_bool_mask
from .spec import SEQUENCE_DIAGNOSTICS

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


def eager_diagnostics(
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
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The diagnostics this route has a form of (name -> (B,), views of the buffer: stack them
    before the next call) and the probe: the sum of the row means of every input's masked
    values, non-finite iff a row is empty (0 / 0) or an input is non-finite (barring overflow)."""
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
    if per_tok:  # per-token advantages: the binding side is decided token by token
        low_high = _per_token_adv_stats(
            w[row["advantage"]], d_B_T < tok_lo, d_B_T > tok_hi, as_bool_mask(mask), n_B
        )
    else:
        probe = probe + adv.sum()
        low_high = None
    # (the spread overwrites the "below" row: its count was summed above)
    values.update(_spread(d_B_T, mask_f, log_s_B, n_B, out=w[row["below"]]))
    below_above_2_B = means_R_B[row["below"] : row["above"] + 1]
    values.update(_clip_sides(values, below_above_2_B, seq_eps, dtype, low_high))
    return values, probe


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
    subtracted in float32, as the other routes do, not rounded to half precision first)."""
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


def _spread(d_B_T, mask_f, log_s_B, n_B, out) -> dict[str, torch.Tensor]:
    """Masked min, max and population std of each row's log r, using ``out`` (B, T) as scratch.

    Padding takes the row mean, which lies inside [min, max] of the row's tokens and adds 0 to
    the squared deviations: one tensor gives exact masked min, max and std. (amin + amax, not
    torch.aminmax, which is slower on small CPU tensors.) lerp(a, b, w) is exactly a at w = 0 and
    exactly b at w = 1 (torch evaluates it as a + w (b - a) for w < 0.5 and b - (b - a)(1 - w)
    otherwise), so this is where(mask, d, log s) in float arithmetic, on the float mask the
    buffer already holds.
    """
    log_s_col = log_s_B[:, None]
    work_B_T = torch.lerp(log_s_col, d_B_T, mask_f, out=out)
    tmin_B, tmax_B = work_B_T.amin(-1), work_B_T.amax(-1)
    tstd_B = torch.linalg.vector_norm(work_B_T.sub_(log_s_col), dim=-1) / n_B.sqrt()
    return {
        "token_log_ratio_min": tmin_B,
        "token_log_ratio_max": tmax_B,
        "token_log_ratio_std": tstd_B,
    }


def _clip_sides(values, below_above_2_B, seq_eps, dtype, low_high) -> dict[str, torch.Tensor]:
    """The clip-binding diagnostics from ``values``' advantage and log s, two rows at a time
    (few tensor ops for small batches). ``below_above_2_B``: the fraction of a row's tokens below
    / above the token-unit range; ``low_high``: with per-token advantages, the fractions of
    tokens binding low / high and of tokens with A < 0 / A > 0 (None with (B,) advantages)."""
    adv_B, log_s_B = values["advantage"], values["seq_log_ratio"]
    lo_2_1, hi_2_1 = _side_thresholds(seq_eps, dtype, log_s_B.device)
    x_2_B = torch.stack([adv_B, log_s_B])
    # [[A < 0, s below the range], [A > 0, s above it]] as 0/1
    side_2_2_B = torch.stack([x_2_B < lo_2_1, x_2_B > hi_2_1]).to(dtype)
    seq_side_2_B = side_2_2_B[:, 1]
    if low_high is None:  # (B,) advantages: a row binds low on all its below tokens iff A < 0
        frac_2_B = side_2_2_B[:, 0]
        # (n_below / n) * 1 == (n_below * 1) / n, and (n_below / n) * 0 == 0: exact either way
        tok_2_B = below_above_2_B * frac_2_B
    else:
        tok_low_B, tok_high_B, neg_frac_B, pos_frac_B = low_high
        frac_2_B = torch.stack([neg_frac_B, pos_frac_B])
        tok_2_B = torch.stack([tok_low_B, tok_high_B])
    # GSPO binds where s is out of range on the side A pushes; fractions are finite, in [0, 1],
    # so the product equals torch.where(side, frac, 0)
    seq_clip_2_B = seq_side_2_B * frac_2_B
    return {
        "seq_clipped": seq_side_2_B.sum(0),  # (below and above are disjoint)
        "seq_clip_low": seq_clip_2_B[0],
        "seq_clip_high": seq_clip_2_B[1],
        "token_clip_low_fraction": tok_2_B[0],
        "token_clip_high_fraction": tok_2_B[1],
    }


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


def _per_token_adv_stats(adv_B_T, below_B_T, above_B_T, mask_B_T, n_B):
    """Fractions of a row's tokens: binding low (below, A < 0), binding high (above, A > 0),
    with A < 0, with A > 0. ``adv_bt`` is 0 on padding."""
    neg_B_T = adv_B_T < 0
    pos_B_T = adv_B_T > 0
    return (
        (below_B_T & neg_B_T).sum(-1) / n_B,
        (above_B_T & pos_B_T).sum(-1) / n_B,
        (neg_B_T & mask_B_T).sum(-1) / n_B,
        (pos_B_T & mask_B_T).sum(-1) / n_B,
    )


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
