"""Per-sequence diagnostics of one policy-gradient update, in both clipping units at once.

The sequence unit (GSPO's): s_b = exp(mean_t log r_bt) against [1 - seq_eps_low, 1 + seq_eps_high].
The token unit (GRPO's):    r_bt = exp(log pi_theta - log pi_old) against [1 - token_eps_low, 1 + token_eps_high].
Computing both on every run puts a GRPO run and a GSPO run on the same scale, whatever trained.

Clip tests are done in log space (log r < log(1 - eps_low), log r > log1p(eps_high)), so no ratio
is exponentiated and padding (log r = 0, inside the range) can never count as clipped.
Where the clip *binds* (the gradient is zeroed) is where the ratio is out of range on the side the
advantage pushes: low with A < 0, high with A > 0 (TRL's clip_ratio/low|high, verl's pg_clipfrac).

All outputs are (B,) tensors on the inputs' device; nothing is transferred to the host.

Two routes compute them. On CPU tensors (``backend="auto"``, numba installed) the fused kernel of
``gspo_metrics.fused`` reads each row a few times while it is in cache; elsewhere (a GPU) eager
tensor ops in one reused (R, B, T) buffer (``_fast``, with ``_exact`` for the rare step that
holds a NaN or inf). They agree to float32 rounding; the tests hold them to it.
"""

from __future__ import annotations

import math
import threading
import warnings

import torch

from ._validate import (
    as_bool_mask,
    check_choice,
    check_eps,
    check_float,
    check_no_empty_rows,
    check_nonempty_rows,
    check_same_shape,
    check_tensor,
)
from .losses import check_advantages
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
    workspace: dict | None = None,
    backend: str = "auto",
) -> dict[str, torch.Tensor]:
    """Every per-sequence diagnostic in ``SEQUENCE_DIAGNOSTICS``, as detached (B,) tensors.

    Args:
        logprobs, old_logprobs, mask: (B, T), as for the losses.
        advantages: (B,) or (B, T).
        seq_eps: (eps_low, eps_high) of the sequence unit (GSPO's clip range).
        token_eps: (eps_low, eps_high) of the token unit (GRPO's clip range).
        ref_logprobs: optional (B, T) log pi_ref, for the KL to the reference policy.
        entropy: optional (B, T) per-token entropy of pi_theta.
        workspace: optional dict the caller passes again on every call (one per thread): a
            (R, B, T) scratch buffer is kept in it and reused instead of allocated. On CPU a fresh
            (B, T) allocation costs about as much in page faults as a pass over it, so a loop
            calling this every step runs about 2x faster with a workspace. Results never alias it.
            (Used by the torch route only.)
        backend: ``"fused"``: one pass per row compiled with numba (``gspo_metrics.fused``), for
            CPU tensors; ``"torch"``: eager tensor ops on the inputs' device; ``"auto"`` (the
            default): fused on CPU when numba is installed, torch otherwise. Both give the same
            numbers to float32 rounding (the fused route sums in float64).

    ``length`` and ``nonfinite_count`` are int64, the others have the inputs' floating dtype
    (float32 for half-precision inputs). The values are rows of ``stacked_sequence_diagnostics``.
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
        workspace=workspace,
        backend=backend,
    )
    out = dict(zip(SEQUENCE_DIAGNOSTICS, out_K_B.unbind(0), strict=True))
    for name in ("length", "nonfinite_count"):  # whole numbers, exact in any float dtype
        out[name] = out[name].to(torch.int64)
    return out


def stacked_sequence_diagnostics(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    seq_eps: tuple[float, float] = (3e-4, 4e-4),
    token_eps: tuple[float, float] = (0.2, 0.2),
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    workspace: dict | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """``sequence_diagnostics`` as one detached (K, B) tensor, K = len(SEQUENCE_DIAGNOSTICS).

    Row k is ``SEQUENCE_DIAGNOSTICS[k]`` (``length`` and ``nonfinite_count`` as whole floats), in
    the inputs' floating dtype. Same arguments and checks as ``sequence_diagnostics``; this is the
    form a recorder wants (one tensor to move to the host). The torch route costs a few dozen
    tensor ops whatever B and T are; the fused route one kernel call.
    """
    with torch.no_grad():
        check_diagnostics_inputs(
            logprobs,
            old_logprobs,
            mask,
            advantages,
            seq_eps=seq_eps,
            token_eps=token_eps,
            ref_logprobs=ref_logprobs,
            entropy=entropy,
            nonempty=False,  # the probe below finds empty rows without a separate host sync
        )
        check_choice(backend, "backend", BACKENDS)
        # Half-precision inputs are reduced in float32 (sums of 1,000 bf16 terms are not exact).
        dtype = torch.promote_types(logprobs.dtype, torch.float32)
        args = (logprobs, old_logprobs, mask, advantages, ref_logprobs, entropy, dtype)
        if backend == "fused":
            if logprobs.device.type != "cpu":
                raise ValueError(f"backend='fused' needs CPU tensors, got {logprobs.device}")
            if not fused_available():
                raise ValueError(f"backend='fused' needs numba: {_FUSED_ERROR[0]}")
        if backend == "fused" or (backend == "auto" and fused_available(logprobs.device)):
            return _fused(*args, seq_eps, token_eps)
        out_K_B, probe = _fast(*args, seq_eps, token_eps, workspace)
        # One host sync for both data-dependent questions: is a row empty (an error), and is
        # anything non-finite anywhere (then redo it the exact way and count it; rare). ``probe``
        # sums the row means of every input: an empty row (0 / 0) or a NaN/inf input makes it
        # non-finite (so can an overflow, which only costs the exact pass).
        if not math.isfinite(probe.item()):
            check_nonempty_rows(as_bool_mask(mask))  # raises, naming the rows
            out_K_B = _exact(*args, seq_eps, token_eps, out_K_B[0].to(torch.int64))
        return out_K_B


BACKENDS = ("auto", "fused", "torch")
_FUSED: list = []  # [module] once imported, [None] if numba is missing or broken
_FUSED_ERROR: list = [""]  # why, then
_FUSED_LOCK = threading.Lock()


def fused_available(device: torch.device | str = "cpu") -> bool:
    """Whether ``backend="auto"`` takes the fused route for tensors on ``device``: a CPU device
    and numba installed. The first call imports ``gspo_metrics.fused`` (compiling its kernel, or
    loading it from numba's disk cache): a few seconds once per machine, about 1 s later on."""
    if torch.device(device).type != "cpu":
        return False
    if not _FUSED:
        with _FUSED_LOCK:
            if not _FUSED:
                try:
                    from . import fused
                except Exception as e:  # noqa: BLE001 -- numba missing or broken: torch serves
                    fused = None
                    _FUSED_ERROR[0] = f"{type(e).__name__}: {e}"
                    warnings.warn(
                        "gspo_metrics: the fused CPU kernel is unavailable "
                        f"({_FUSED_ERROR[0]}); sequence_diagnostics uses the torch route",
                        RuntimeWarning,
                        stacklevel=2,
                    )
                _FUSED.append(fused)
    return _FUSED[0] is not None


def _fused(
    logprobs, old_logprobs, mask, advantages, ref_logprobs, entropy, dtype, seq_eps, token_eps
) -> torch.Tensor:
    """The (K, B) stack by ``gspo_metrics.fused`` (CPU): numpy views of the inputs in ``dtype``,
    C-contiguous, the mask as uint8; one kernel call, split over torch's thread count."""
    from . import fused

    def arr(x):
        return x.detach().to(dtype).contiguous().numpy()

    B = mask.shape[0]
    mask_bt = as_bool_mask(mask.detach())
    mask_u8 = mask_bt.contiguous().view(torch.uint8).numpy()
    adv = advantages.detach().to(dtype)
    per_tok = adv.dim() == 2
    thresholds = (
        math.log1p(-token_eps[0]),
        math.log1p(token_eps[1]),
        math.log1p(-seq_eps[0]),
        math.log1p(seq_eps[1]),
    )
    out = fused.fused_rows(
        arr(logprobs),
        arr(old_logprobs),
        mask_u8,
        (adv if per_tok else adv.reshape(B, 1)).contiguous().numpy(),
        None if ref_logprobs is None else arr(ref_logprobs),
        None if entropy is None else arr(entropy),
        per_tok,
        thresholds,
        threads=torch.get_num_threads(),
    )
    if B and not out[0].all():  # a row without tokens
        check_nonempty_rows(mask_bt)  # raises, naming the rows
    return torch.from_numpy(out).to(dtype)


def check_diagnostics_inputs(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor | None,
    *,
    seq_eps: tuple[float, float] = (3e-4, 4e-4),
    token_eps: tuple[float, float] = (0.2, 0.2),
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    nonempty: bool = True,
) -> None:
    """Every check of ``sequence_diagnostics``' arguments: ValueError naming the argument and its
    shape. ``nonempty`` also checks that every row of ``mask`` marks a token (one host sync)."""
    check_token_inputs(logprobs, old_logprobs, mask, nonempty=False)
    if advantages is not None:  # (None: only for callers that derive them later themselves)
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
    if nonempty:
        check_no_empty_rows(mask)


def _finish(
    dtype,
    n_b,
    adv_b,
    log_s_b,
    tmin_b,
    tmax_b,
    tstd_b,
    tok_out_b,
    below_above_2_B,
    seq_eps,
    kl_old_b,
    kl_ref_b,
    entropy_b,
    nonfinite_b,
    low_high=None,
) -> torch.Tensor:
    """The (K, B) stack from the per-row reductions shared by both paths (SEQUENCE_DIAGNOSTICS
    order). ``below_above_2_B``: the fraction of a row's tokens below / above the token-unit
    range (used with (B,) advantages). The sides are computed two rows at a time (few tensor ops
    for small batches)."""
    lo_2_1, hi_2_1 = _side_thresholds(seq_eps, dtype, log_s_b.device)
    x_2_B = torch.stack([adv_b, log_s_b])
    # [[A < 0, s below the range], [A > 0, s above it]] as 0/1
    side_2_2_B = torch.stack([x_2_B < lo_2_1, x_2_B > hi_2_1]).to(dtype)
    seq_side_2_B = side_2_2_B[:, 1]
    if low_high is None:  # (B,) advantages: a row binds low on all its below tokens iff A < 0
        frac_2_B = side_2_2_B[:, 0]
        # (n_below / n) * 1 == (n_below * 1) / n, and (n_below / n) * 0 == 0: exact either way
        tok_2_B = below_above_2_B * frac_2_B
    else:
        tok_low_b, tok_high_b, neg_frac_b, pos_frac_b = low_high
        frac_2_B = torch.stack([neg_frac_b, pos_frac_b])
        tok_2_B = torch.stack([tok_low_b, tok_high_b])
    # GSPO binds where s is out of range on the side A pushes; fractions are finite, in [0, 1],
    # so the product equals torch.where(side, frac, 0)
    seq_clip_2_B = seq_side_2_B * frac_2_B
    return torch.stack(
        [
            n_b,  # length
            adv_b,
            log_s_b,
            seq_side_2_B.sum(0),  # seq_clipped (below and above are disjoint)
            seq_clip_2_B[0],  # seq_clip_low
            seq_clip_2_B[1],  # seq_clip_high
            tmin_b,
            tmax_b,
            tstd_b,
            tok_out_b,
            tok_2_B[0],
            tok_2_B[1],
            kl_ref_b,
            kl_old_b,
            entropy_b,
            nonfinite_b,
        ]
    )


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


def _per_token_adv_stats(adv_bt, below_bt, above_bt, mask_bt, n_b):
    neg_bt = adv_bt < 0
    pos_bt = adv_bt > 0
    return (
        (below_bt & neg_bt).sum(-1) / n_b,
        (above_bt & pos_bt).sum(-1) / n_b,
        (neg_bt & mask_bt).sum(-1) / n_b,
        (pos_bt & mask_bt).sum(-1) / n_b,
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


def _fast(
    logprobs,
    old_logprobs,
    mask,
    advantages,
    ref_logprobs,
    entropy,
    dtype,
    seq_eps,
    token_eps,
    workspace=None,
):
    """Masking by multiplying with the 0/1 mask, in one reused (R, B, T) buffer.

    Exact when every input is finite everywhere, padding included (``x * 1 = x``, ``x * 0 = 0``).
    A NaN or inf anywhere, even under the padding, reaches the returned probe sum
    (``inf * 0 = nan``), and the caller then reruns ``_exact``. Each (B, T) pass costs about
    0.1-1 ms at B=512, T=1024 on a CPU core and each fresh (B, T) allocation about as much in
    page faults, so passes are few and the buffer is reused in place. Every per-token quantity
    that is summed over T is written to a row of the buffer and all rows are summed in one
    reduction, so small batches pay for few tensor ops.

    Returns the (K, B) stack and the probe: the sum of the row means of every input's masked
    values, non-finite iff a row is empty (0 / 0) or an input is non-finite (barring overflow).
    """
    has_ref, has_ent, per_tok = ref_logprobs is not None, entropy is not None, advantages.dim() == 2
    # Buffer rows: 0 mask, 1 log r (0 on padding), then the other inputs' masked values (the
    # probe sums rows 1 .. n_in), then the per-token terms of the means.
    B, T = mask.shape
    device = mask.device
    i_ref = 2
    i_ent = i_ref + has_ref
    i_adv = i_ent + has_ent
    n_in = i_adv + per_tok  # rows 1 .. n_in - 1 hold the inputs
    i_kl_old, i_below, i_above, i_kl_ref = n_in, n_in + 1, n_in + 2, n_in + 3
    R = i_kl_ref + has_ref
    w = _scratch(workspace, "rows", (R, B, T), dtype, device)
    # Small batches: one reduction of every row at the end (few ops). Large ones: each row is
    # summed right after it is written, while it is still in cache (one sum of R large rows
    # re-reads them all from memory). Same per-row reduction, same bits.
    per_row = B * T >= 1 << 16
    sums_R_B = torch.empty((R, B), dtype=dtype, device=device) if per_row else None

    def written(*rows: int) -> None:
        if per_row:
            for r in rows:
                torch.sum(w[r], -1, out=sums_R_B[r])

    # (no .detach(): the caller runs this under torch.no_grad, so nothing here records a graph)
    # the 0/1 mask as floats. A bool tensor's bytes are 0/1: converting them as uint8 is the same
    # values and about 7x faster on CPU than the bool -> float conversion
    if mask.dtype == torch.bool:
        mask_f = w[0].copy_(mask.view(torch.uint8))
    else:  # any dtype: nonzero marks a token (as_bool_mask's rule), written as 0/1 floats
        mask_f = torch.ne(mask, 0, out=w[0])
    written(0)
    lp = logprobs
    d_bt = w[1]
    if lp.dtype == dtype:
        torch.sub(lp, old_logprobs, out=d_bt)
    else:  # half precision: subtract in float32
        d_bt.copy_(lp).sub_(old_logprobs)
    d_bt.mul_(mask_f)
    written(1)
    adv = advantages.to(dtype)
    if has_ref:
        # k3 of d = logp - ref: exp(-d) - 1 + d = expm1(e) - e with e = ref - logp
        e_bt = torch.sub(ref_logprobs, lp, out=w[i_ref]).mul_(mask_f)
        written(i_ref)
        torch.expm1(e_bt, out=w[i_kl_ref]).sub_(e_bt)
        written(i_kl_ref)
    if has_ent:
        torch.mul(entropy, mask_f, out=w[i_ent])
        written(i_ent)
    if per_tok:
        adv_bt = torch.mul(adv, mask_f, out=w[i_adv])
        written(i_adv)
    # k3 terms are exactly 0 where d = 0, so the padding needs no second mask
    torch.expm1(d_bt, out=w[i_kl_old]).sub_(d_bt)
    # padding has d = 0, inside every range; counts of 0/1 floats are exact below 2^24
    tok_lo, tok_hi = math.log1p(-token_eps[0]), math.log1p(token_eps[1])
    torch.lt(d_bt, tok_lo, out=w[i_below])
    torch.gt(d_bt, tok_hi, out=w[i_above])
    written(i_kl_old, i_below, i_above)
    if not per_row:
        sums_R_B = w.sum(-1)
    n_b = sums_R_B[0]
    means_R_B = sums_R_B[1:] / n_b  # row r of the buffer -> means_R_B[r - 1]
    log_s_b = means_R_B[0]
    probe = means_R_B[: n_in - 1].sum()  # row means of log r and every other input
    if not per_tok:
        probe = probe + adv.sum()
    low_high = None
    if per_tok:  # per-token advantages: the binding side is decided token by token
        adv_b = means_R_B[i_adv - 1]
        mask_bt = as_bool_mask(mask)
        low_high = _per_token_adv_stats(adv_bt, d_bt < tok_lo, d_bt > tok_hi, mask_bt, n_b)
    else:
        adv_b = adv
    tok_out_b = (sums_R_B[i_below] + sums_R_B[i_above]) / n_b  # disjoint (lo <= 0 <= hi)

    # Padding takes the row mean, which lies inside [min, max] of the row's tokens and adds 0
    # to the squared deviations: one tensor gives exact masked min, max and std.
    # (amin + amax, not torch.aminmax: aminmax is ~100x slower on small CPU tensors.)
    # lerp(a, b, w) is exactly a at w = 0 and exactly b at w = 1 (torch evaluates it as
    # a + w (b - a) for w < 0.5 and b - (b - a)(1 - w) otherwise), so this is
    # where(mask, d, log s) in float arithmetic, about 2x faster than where on a bool mask.
    log_s_col = log_s_b[:, None]
    work_bt = torch.lerp(log_s_col, d_bt, mask_f, out=w[i_below])  # the counts are summed
    tmin_b, tmax_b = work_bt.amin(-1), work_bt.amax(-1)
    tstd_b = torch.linalg.vector_norm(work_bt.sub_(log_s_col), dim=-1) / n_b.sqrt()

    nan_b = torch.full_like(log_s_b, float("nan"))
    kl_ref_b = means_R_B[i_kl_ref - 1] if has_ref else nan_b
    entropy_b = means_R_B[i_ent - 1] if has_ent else nan_b
    out_K_B = _finish(
        dtype,
        n_b,
        adv_b,
        log_s_b,
        tmin_b,
        tmax_b,
        tstd_b,
        tok_out_b,
        means_R_B[i_below - 1 : i_above],
        seq_eps,
        means_R_B[i_kl_old - 1],
        kl_ref_b,
        entropy_b,
        torch.zeros_like(n_b),
        low_high,
    )
    return out_K_B, probe


def _exact(
    logprobs,
    old_logprobs,
    mask,
    advantages,
    ref_logprobs,
    entropy,
    dtype,
    seq_eps,
    token_eps,
    count_b,
):
    """``torch.where`` masking, which no padding value can leak through, and an exact count of
    the non-finite inputs at masked positions. Used when an input holds a NaN or inf."""
    mask_bt = as_bool_mask(mask)
    n_b = count_b.to(dtype)
    lp = logprobs.detach().to(dtype)
    d_bt = torch.where(mask_bt, lp - old_logprobs.detach().to(dtype), 0.0)  # log r, 0 on pad
    log_s_b = d_bt.sum(-1) / n_b
    adv = advantages.detach().to(dtype)
    if adv.dim() == 1:
        adv_b, adv_bt = adv, adv[:, None]
    else:
        adv_bt = torch.where(mask_bt, adv, 0.0)
        adv_b = adv_bt.sum(-1) / n_b
    centred_bt = torch.where(mask_bt, d_bt, log_s_b[:, None])
    tmin_b, tmax_b = centred_bt.amin(-1), centred_bt.amax(-1)
    tstd_b = torch.linalg.vector_norm(centred_bt - log_s_b[:, None], dim=-1) / n_b.sqrt()
    tok_lo, tok_hi = math.log1p(-token_eps[0]), math.log1p(token_eps[1])
    below_bt, above_bt = d_bt < tok_lo, d_bt > tok_hi
    low_high = None
    if adv.dim() == 2:
        low_high = _per_token_adv_stats(adv_bt, below_bt, above_bt, mask_bt, n_b)
    kl_old_b = (torch.expm1(d_bt) - d_bt).sum(-1) / n_b
    probe_bt = d_bt + adv_bt  # non-finite where any input is, at masked positions
    nan_b = torch.full_like(log_s_b, float("nan"))
    kl_ref_b = entropy_b = nan_b
    if ref_logprobs is not None:
        e_bt = torch.where(mask_bt, ref_logprobs.detach().to(dtype) - lp, 0.0)
        kl_ref_b = (torch.expm1(e_bt) - e_bt).sum(-1) / n_b
        probe_bt = probe_bt + e_bt
    if entropy is not None:
        ent_bt = torch.where(mask_bt, entropy.detach().to(dtype), 0.0)
        entropy_b = ent_bt.sum(-1) / n_b
        probe_bt = probe_bt + ent_bt
    nonfinite_b = (~torch.isfinite(probe_bt) & mask_bt).sum(-1)
    n_below_b, n_above_b = below_bt.sum(-1), above_bt.sum(-1)
    return _finish(
        dtype,
        n_b,
        adv_b,
        log_s_b,
        tmin_b,
        tmax_b,
        tstd_b,
        (n_below_b + n_above_b) / n_b,
        torch.stack([n_below_b / n_b, n_above_b / n_b]),
        seq_eps,
        kl_old_b,
        kl_ref_b,
        entropy_b,
        nonfinite_b.to(dtype),
        low_high,
    )
