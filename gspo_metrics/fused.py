"""``stacked_sequence_diagnostics`` on CPU, fused (numba): one pass over each row's inputs.

It must give the numbers of the reference route (``diagnostics.reference_diagnostics``, where
each diagnostic is its equation); the tests hold it to them. The eager-torch route
(``gspo_metrics.eager``) makes about 20 passes over (B, T) buffers, two of
them ``expm1``, and pays a few microseconds of dispatch per tensor op whatever B and T are. Here
one loop that LLVM vectorises reads each input of a row once (a few short ones then go over the
row's log-ratios, in L1), every per-row sum is accumulated in float64, and the kernel releases
the GIL, so the recorder's writer threads keep running beside it; a large batch is split over
torch's own OpenMP threads (``omp_team``).
At B=512, T=1024 this costs about half the eager route; on the demo's 64 x 6 batch, about a
twentieth (``bench/bench_losses.py``).

Per row b, over its masked tokens t (n_b of them), with d = log pi_theta - log pi_old:

    log s_b             = sum_t d / n_b
    token_log_ratio_std = sqrt(sum_t (d - log s_b)^2 / n_b)            (a second pass)
    k3(x)               = exp(x) - 1 - x, as x^2 sum_j x^j / (j + 2)! for |x| < 1/2, where
                          exp(x) - 1 - x would cancel (j <= 11 for float64 inputs, next term
                          < 6e-15 of the sum; j <= 7 for float32 ones, < 3e-9), and as
                          expm1(x) - x in an exact scalar walk for the rare larger |x|
    kl_old_b            = mean_t k3(d),   kl_ref_b = mean_t k3(log pi_ref - log pi_theta)
    sampler_kl_b        = mean_t k3(u),   u = log pi_old - log pi_sampler (with sampler log-probs)
    sampler_logp_abs_diff_max = max_t |u|

and the clip fractions as in ``gspo_metrics.diagnostics``. The kernel writes each diagnostic to
its row of the output, ``ROW.<name>`` (the order of ``spec.SEQUENCE_DIAGNOSTICS``). Padding is never used (every pass
selects 0 there), so garbage under it cannot leak. A NaN or inf at a masked position makes the
row's probe (the sum of every input's masked values) non-finite; only then is the row walked
again exactly, to count those tokens in ``nonfinite_count`` and let a NaN reach the row's extremes,
as the torch route does.

Compiled for float32 and float64 C-contiguous inputs when this module is first imported and cached
on disk (numba's ``cache=True``): the first import on a machine takes about 10 s, later ones about
1 s. ``training_hooks.RunRecorder`` imports it on a background thread when it starts.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections import namedtuple
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from llvmlite import ir
from numba import float32, float64, int64, njit, types, uint8, void
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .checks import as_bool_mask, check_nonempty_rows
from .omp_team import team
from .spec import SEQUENCE_DIAGNOSTICS

# k3(x) / x^2 = sum_j c_j x^j with c_j = 1 / (j + 2)!, j = 0 .. 11 (the series to x^13)
_C0, _C1, _C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11 = (
    1.0 / math.factorial(j + 2) for j in range(12)
)
SERIES_BOUND = 0.5  # |x| below it: the series (next term < 6e-15 of the sum); above: expm1

#: The output's row of each diagnostic (``ROW.kl_old``, ...), from the declaration. numba
#: compiles these as constants.
ROW: Any = namedtuple("Rows", SEQUENCE_DIAGNOSTICS)(*range(len(SEQUENCE_DIAGNOSTICS)))
K = len(ROW)

# The per-row passes are compiled, each as its own function (numba's IR inlining would drop
# their flags), with these LLVM fast-math flags: sums may be reordered, which lets LLVM
# vectorise the loops (4 float64 lanes on AVX2; a row's result does not depend on which thread
# runs it); NaN and inf keep their meaning (no "nnan"/"ninf"), so a non-finite input still
# reaches the row's probe sum.
_FM = {"reassoc", "contract", "nsz", "arcp"}
_INT_MAX = np.int64(0x7FFFFFFFFFFFFFFF)  # all but the sign bit of a float64


@intrinsic
def _prefetch(typingctx, arr, i, j):
    """Ask the CPU to bring element (i, j) of a 2-D array into its caches (``llvm.prefetch``:
    a hint, it never faults)."""

    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1], args[2]])
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()

    return types.void(arr, types.intp, types.intp), codegen


@njit(inline="always")
def _prefetch_row(x, b):
    """Prefetch the start of each 4 KB page that row b of ``x`` (B, T) touches: the hardware
    prefetcher streams the rest of a page once a loop reads it, but stops at page boundaries, so
    without this every row of every input starts with cache misses once the inputs have left the
    caches (as they have after a loss step). (One hint per cache line instead cost more than it
    saved once the row's inputs are read in one loop.)"""
    step = max(1, 4096 // x.itemsize)
    for j in range(0, x.shape[1], step):
        _prefetch(x, b, j)
    _prefetch(x, b, x.shape[1] - 1)  # (a row that starts inside a page ends in the next)


@njit(inline="always")
def _prefetch_inputs(lp, old, mask, adv, ref, ent, smp, b, per_tok, has_ref, has_ent, has_smp):
    """Prefetch row b of every input the kernel reads (the optional ones when given), so the
    next row is on its way to the cache while the current one is reduced."""
    _prefetch_row(lp, b)
    _prefetch_row(old, b)
    _prefetch_row(mask, b)
    if per_tok:
        _prefetch_row(adv, b)
    if has_ref:
        _prefetch_row(ref, b)
    if has_ent:
        _prefetch_row(ent, b)
    if has_smp:
        _prefetch_row(smp, b)


def _k3_series(x, like):  # pragma: no cover (numba compiles the overload below)
    """k3(x) = exp(x) - 1 - x for |x| < SERIES_BOUND: x^2 sum_j c_j x^j, Estrin's scheme, to the
    precision of ``like``'s type (the inputs' element): j <= 11 for float64 (next term < 6e-15
    of the sum), j <= 7 for float32 (next term < 3e-9 of the sum, below float32's rounding)."""


@overload(_k3_series, inline="always", jit_options={"fastmath": _FM})
def _k3_series_impl(x, like):
    if like == types.float32:

        def short(x, like):
            x2 = x * x
            x4 = x2 * x2
            q0 = (_C0 + x * _C1) + x2 * (_C2 + x * _C3)
            q1 = (_C4 + x * _C5) + x2 * (_C6 + x * _C7)
            return x2 * (q0 + x4 * q1)

        return short

    def full(x, like):
        x2 = x * x
        x4 = x2 * x2
        q0 = (_C0 + x * _C1) + x2 * (_C2 + x * _C3)
        q1 = (_C4 + x * _C5) + x2 * (_C6 + x * _C7)
        q2 = (_C8 + x * _C9) + x2 * (_C10 + x * _C11)
        return x2 * (q0 + x4 * (q1 + x4 * q2))

    return full


def _pass_row(lp, old, mask, ref, smp, b, tok_lo, tok_hi, has_ref, has_smp, d_row, u_row):
    """One loop over row b's tokens, reading each input once; ``has_ref`` / ``has_smp`` are
    literal booleans (``_row_sums``), so each combination compiles to its own loop:

    d = lp - old: count, sum, tokens below / above the token range, k3(d) summed where
    |d| < SERIES_BOUND and the number of other tokens (left to ``_fixup``); d written to
    ``d_row`` (T,) float64, the row's first d at padding (it changes no extreme).
    e = ref - lp and u = old - smp: k3 summed the same way, and their sums (the probe); u
    written to ``u_row`` (0 at padding).

    Returns (n, sum d, n below, n above, k3 of d, k3 of e, k3 of u, tokens left to _fixup,
    sum e, sum u)."""


@overload(_pass_row, jit_options={"fastmath": _FM})
def _pass_row_impl(lp, old, mask, ref, smp, b, tok_lo, tok_hi, has_ref, has_smp, d_row, u_row):
    if not isinstance(has_ref, types.BooleanLiteral) or not isinstance(
        has_smp, types.BooleanLiteral
    ):
        return None
    with_ref, with_smp = has_ref.literal_value, has_smp.literal_value

    def impl(lp, old, mask, ref, smp, b, tok_lo, tok_hi, has_ref, has_smp, d_row, u_row):
        T = lp.shape[1]
        d0 = 0.0
        for t in range(T):
            if mask[b, t] != 0:
                d0 = np.float64(lp[b, t]) - np.float64(old[b, t])
                break
        n = 0
        n_below = 0
        n_above = 0
        n_big = 0
        s_d = 0.0
        k_d = 0.0
        k_e = 0.0
        k_u = 0.0
        s_e = 0.0
        s_u = 0.0
        for t in range(T):
            m = mask[b, t] != 0
            x = np.float64(lp[b, t])
            o = np.float64(old[b, t])
            d: float = x - o  # (float64; reset to a float 0.0 on padding below)
            d_row[t] = d if m else d0
            d = d if m else 0.0
            n += m
            s_d += d
            n_below += d < tok_lo
            n_above += d > tok_hi
            small = abs(d) < SERIES_BOUND  # (False for NaN and inf: those go to _fixup)
            k_d += _k3_series(d if small else 0.0, lp[b, t])  # (k3(0) = 0)
            n_big += not small
            if with_ref:
                e: float = np.float64(ref[b, t]) - x
                e = e if m else 0.0
                small = abs(e) < SERIES_BOUND
                k_e += _k3_series(e if small else 0.0, lp[b, t])
                n_big += not small
                s_e += e
            if with_smp:
                u: float = o - np.float64(smp[b, t])
                u = u if m else 0.0  # (padding: |0| is below every masked |u|)
                small = abs(u) < SERIES_BOUND
                k_u += _k3_series(u if small else 0.0, lp[b, t])
                n_big += not small
                s_u += u
                u_row[t] = u
        return n, s_d, n_below, n_above, k_d, k_e, k_u, n_big, s_e, s_u

    return impl


@njit(fastmath=_FM)
def _row_sums(lp, old, mask, ref, smp, b, tok_lo, tok_hi, has_ref, has_smp, d_row, u_row):
    """``_pass_row`` compiled for the inputs given (runtime flags to literal ones)."""
    if has_ref:
        if has_smp:
            return _pass_row(lp, old, mask, ref, smp, b, tok_lo, tok_hi, True, True, d_row, u_row)
        return _pass_row(lp, old, mask, ref, smp, b, tok_lo, tok_hi, True, False, d_row, u_row)
    if has_smp:
        return _pass_row(lp, old, mask, ref, smp, b, tok_lo, tok_hi, False, True, d_row, u_row)
    return _pass_row(lp, old, mask, ref, smp, b, tok_lo, tok_hi, False, False, d_row, u_row)


@njit(fastmath=_FM)
def _pass_masked_sum(x, mask, b):
    s = 0.0
    for t in range(x.shape[1]):
        s += np.float64(x[b, t]) if mask[b, t] != 0 else 0.0
    return s


@njit(fastmath=_FM)
def _abs_max(u_row):
    """The largest |u| of ``u_row``, as an integer maximum of the bits of |u|: for floats >= 0
    the order of their bits is the order of their values, and an integer maximum vectorises
    where a float compare-and-select does not. A NaN (its bits are above inf's) wins, as it
    should."""
    bits = u_row.view(np.int64)
    top = np.int64(0)
    for t in range(bits.shape[0]):
        a = bits[t] & _INT_MAX
        top = a if a > top else top
    bits[0] = top
    return u_row[0]


@njit(fastmath=_FM)
def _pass_token_adv(lp, old, adv, mask, b, tok_lo, tok_hi):
    """Per-token advantages over row b's tokens: their sum, how many are < 0 and > 0, and how
    many tokens are below the token range with A < 0 / above it with A > 0."""
    s_a = 0.0
    n_neg = 0
    n_pos = 0
    n_below_neg = 0
    n_above_pos = 0
    for t in range(lp.shape[1]):
        m = mask[b, t] != 0
        a: float = np.float64(adv[b, t])
        a = a if m else 0.0
        d: float = np.float64(lp[b, t]) - np.float64(old[b, t])
        d = d if m else 0.0
        neg = a < 0.0
        pos = a > 0.0
        s_a += a
        n_neg += neg
        n_pos += pos
        n_below_neg += neg and d < tok_lo
        n_above_pos += pos and d > tok_hi
    return s_a, n_neg, n_pos, n_below_neg, n_above_pos


@njit(fastmath=_FM)
def _pass_spread(d_row, mask, b, mean):
    """min, max and sum of squared deviations from ``mean`` of row b's d (``d_row``, written by
    ``_pass_log_ratio``; valid only when the row holds no NaN).

    The extremes are integer extremes of order keys (``_order_key``): LLVM vectorises an integer
    minimum and maximum, not a float compare-and-select."""
    s_sq = 0.0
    for t in range(d_row.shape[0]):
        dev = d_row[t] - mean if mask[b, t] != 0 else 0.0
        s_sq += dev * dev
    keys = d_row.view(np.int64)
    lo = _INT_MAX
    hi = -_INT_MAX - 1
    for t in range(d_row.shape[0]):
        k = _order_key(keys[t])
        lo = k if k < lo else lo
        hi = k if k > hi else hi
    keys[0] = _order_key(lo)  # (the key map is its own inverse)
    keys[1] = _order_key(hi)
    return d_row[0], d_row[1], s_sq


@njit(inline="always")
def _order_key(bits):
    """A float64's bits as an int64 in the floats' order: a negative float's magnitude bits are
    flipped (-0.0 sorts just below +0.0, inf at the ends). Applied twice it gives the bits back."""
    return bits ^ ((bits >> 63) & _INT_MAX)


@njit
def _fixup(lp, old, mask, adv, ref, ent, smp, b, flags, a_row, count):
    """The slow, exact walk over row b (no fast-math): k3 by expm1 for the tokens the series
    does not cover, and, with ``count``, the tokens where an input is NaN or inf and whether
    a NaN is among the log-ratios d and among the sampler differences u. Returns (k3 of d,
    k3 of e, k3 of u, non-finite tokens, NaN in d, NaN in u)."""
    per_tok, has_ref, has_ent, has_smp = flags[0] != 0, flags[1] != 0, flags[2] != 0, flags[3] != 0
    k_d = 0.0
    k_e = 0.0
    k_u = 0.0
    n_bad = 0
    d_nan = False
    u_nan = False
    for t in range(lp.shape[1]):
        if mask[b, t] == 0:
            continue
        x = np.float64(lp[b, t])
        o = np.float64(old[b, t])
        d = x - o
        if not abs(d) < SERIES_BOUND:
            k_d += math.expm1(d) - d
        q = d + (np.float64(adv[b, t]) if per_tok else a_row)
        if has_ref:
            e = np.float64(ref[b, t]) - x
            if not abs(e) < SERIES_BOUND:
                k_e += math.expm1(e) - e
            q += e
        if has_ent:
            q += np.float64(ent[b, t])
        if has_smp:
            u = o - np.float64(smp[b, t])
            if not abs(u) < SERIES_BOUND:
                k_u += math.expm1(u) - u
            q += u
            u_nan = u_nan or u != u
        if count:
            n_bad += not math.isfinite(q)
            d_nan = d_nan or d != d
    return k_d, k_e, k_u, n_bad, d_nan, u_nan


def _kernel(lp, old, mask, adv, ref, ent, smp, flags, thr, out, b0, b1):  # pragma: no cover
    """Fill columns b0 .. b1 - 1 of ``out`` (K, B) float64: diagnostic ``name`` in row
    ``ROW.name`` (the order of SEQUENCE_DIAGNOSTICS).

    lp, old (B, T); mask (B, T) uint8, nonzero marks a token; adv (B, T) when flags[0] (per-token
    advantages) else (B, 1); ref (B, T) when flags[1] else unused; ent (B, T) when flags[2] else
    unused; smp (B, T) log pi_sampler when flags[3] else unused. thr = [token log lo, token log
    hi, seq log lo, seq log hi]. A row without tokens gets length 0 (the caller raises).

    Each row takes one vectorised loop over the log-probs (``_pass_row``), one over the entropy
    and one over per-token advantages when given, two short ones over its log-ratios
    (``_pass_spread``) and, only when a log-ratio is outside the series' range or an input is
    non-finite (the sum of every input's masked values, the probe, is then not finite), one
    exact scalar walk."""
    per_tok, has_ref, has_ent, has_smp = flags[0] != 0, flags[1] != 0, flags[2] != 0, flags[3] != 0
    tok_lo, tok_hi = thr[0], thr[1]
    nan = np.nan
    d_row = np.empty(lp.shape[1], dtype=np.float64)  # (T,) a row's d, for its spread
    u_row = np.empty(lp.shape[1], dtype=np.float64)  # (T,) a row's u, for its largest |u|
    for b in range(b0, b1):
        if b + 1 < b1:  # the next row's inputs, while this one is reduced
            _prefetch_inputs(
                lp, old, mask, adv, ref, ent, smp, b + 1, per_tok, has_ref, has_ent, has_smp
            )
        n, s_d, n_below, n_above, k_d, k_e, k_u, big, s_e, s_u = _row_sums(
            lp, old, mask, ref, smp, b, tok_lo, tok_hi, has_ref, has_smp, d_row, u_row
        )
        s_h = _pass_masked_sum(ent, mask, b) if has_ent else 0.0
        a_row = 0.0 if per_tok else np.float64(adv[b, 0])
        adv_sums = (0.0, 0, 0, 0, 0)
        if per_tok:
            adv_sums = _pass_token_adv(lp, old, adv, mask, b, tok_lo, tok_hi)
        probe = s_d + adv_sums[0] + a_row + s_e + s_h + s_u  # (the absent ones are 0)
        u_max = _abs_max(u_row) if has_smp else 0.0
        finite = math.isfinite(probe)
        n_bad = 0
        d_nan = False
        if big > 0 or not finite:
            fk_d, fk_e, fk_u, n_bad, d_nan, u_nan = _fixup(
                lp, old, mask, adv, ref, ent, smp, b, flags, a_row, not finite
            )
            k_d += fk_d
            k_e += fk_e
            k_u += fk_u
            u_max = nan if u_nan else u_max
        out[ROW.length, b] = n
        out[ROW.nonfinite_count, b] = n_bad
        if n == 0:
            continue
        nf = np.float64(n)
        log_s = s_d / nf
        d_min, d_max, s_sq = _pass_spread(d_row, mask, b, log_s)
        if not math.isfinite(s_d):  # an inf or NaN log-ratio: as the torch route gives
            s_sq = nan
        if d_nan:
            d_min = nan
            d_max = nan
        out[ROW.seq_log_ratio, b] = log_s
        out[ROW.token_log_ratio_min, b] = d_min
        out[ROW.token_log_ratio_max, b] = d_max
        out[ROW.token_log_ratio_std, b] = math.sqrt(s_sq / nf)
        out[ROW.kl_ref, b] = k_e / nf if has_ref else nan
        out[ROW.kl_old, b] = k_d / nf
        out[ROW.sampler_kl, b] = k_u / nf if has_smp else nan
        out[ROW.sampler_logp_abs_diff_max, b] = u_max if has_smp else nan
        out[ROW.entropy, b] = s_h / nf if has_ent else nan
        _store_clips(out, b, nf, log_s, n_below, n_above, a_row, adv_sums, per_tok, thr)


@njit(inline="always")
def _store_clips(out, b, nf, log_s, n_below, n_above, a_row, adv_sums, per_tok, thr):
    """Row b's advantage and clip diagnostics, from its n_below / n_above tokens outside the
    token range and either its advantage ``a_row`` or, per token, ``adv_sums`` (the sum of A, the
    tokens with A < 0, with A > 0, below with A < 0, above with A > 0)."""
    seq_below = 1.0 if log_s < thr[2] else 0.0
    seq_above = 1.0 if log_s > thr[3] else 0.0
    if per_tok:
        s_a, n_neg, n_pos, n_below_neg, n_above_pos = adv_sums
        a_b = s_a / nf
        neg_frac = n_neg / nf
        pos_frac = n_pos / nf
        tok_low = n_below_neg / nf
        tok_high = n_above_pos / nf
    else:
        a_b = a_row
        neg_frac = 1.0 if a_row < 0.0 else 0.0
        pos_frac = 1.0 if a_row > 0.0 else 0.0
        tok_low = (n_below / nf) * neg_frac
        tok_high = (n_above / nf) * pos_frac
    out[ROW.advantage, b] = a_b
    out[ROW.seq_clipped, b] = seq_below + seq_above
    out[ROW.seq_clip_low, b] = seq_below * neg_frac
    out[ROW.seq_clip_high, b] = seq_above * pos_frac
    out[ROW.token_clip_fraction, b] = (n_below + n_above) / nf
    out[ROW.token_clip_low_fraction, b] = tok_low
    out[ROW.token_clip_high_fraction, b] = tok_high


def _signature(ft):
    a2 = ft[:, ::1]
    return void(
        a2,
        a2,
        uint8[:, ::1],
        a2,
        a2,
        a2,
        a2,
        int64[::1],
        float64[::1],
        float64[:, ::1],
        int64,
        int64,
    )


# numba compiles ROW's values into the kernel, and its disk cache is keyed on this file and the
# function's name, not on spec.py: the name carries a digest of the declaration, so a changed
# declaration compiles afresh instead of loading a kernel that writes the old rows.
_kernel.__qualname__ = _kernel.__name__ = (
    "diagnostics_kernel_" + hashlib.sha1(repr(SEQUENCE_DIAGNOSTICS).encode()).hexdigest()[:12]
)
#: The compiled kernel: ``diagnostics_kernel(*args, b0, b1)`` fills columns b0 .. b1 - 1.
diagnostics_kernel: Callable[..., None] = njit(
    [_signature(float32), _signature(float64)], nogil=True, cache=True
)(_kernel)


_pool: tuple[ThreadPoolExecutor, int, int] | None = None  # (pool, workers, pid)
_pool_lock = threading.Lock()  # one splitting caller at a time; others run serially
MIN_ELEMENTS_PER_THREAD = 1 << 15


def stacked_diagnostics(
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
) -> torch.Tensor:
    """The (K, B) stack of ``stacked_sequence_diagnostics`` (CPU): numpy views of the inputs in
    ``dtype``, C-contiguous, the mask as uint8; one kernel call, split over torch's thread count."""

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
    out = fused_rows(
        arr(logprobs),
        arr(old_logprobs),
        mask_u8,
        (adv if per_tok else adv.reshape(B, 1)).contiguous().numpy(),
        None if ref_logprobs is None else arr(ref_logprobs),
        None if entropy is None else arr(entropy),
        per_tok,
        thresholds,
        threads=torch.get_num_threads(),
        sampler=None if sampler_logprobs is None else arr(sampler_logprobs),
    )
    if B and not out[ROW.length].all():  # a row without tokens
        check_nonempty_rows(mask_bt)  # raises, naming the rows
    return torch.from_numpy(out).to(dtype)


def prepare(dtype: torch.dtype = torch.float32) -> None:
    """Compile now what ``fused_rows`` needs to split ``dtype`` rows over torch's OpenMP team
    (otherwise its first split call starts that in the background and runs the rows on the
    other route meanwhile)."""
    omp = team(diagnostics_kernel)
    if omp is not None:
        omp.prepare(np.float64 if dtype == torch.float64 else np.float32)


def kernel_args(lp, old, mask_u8, adv_2d, ref, ent, per_tok, thresholds, out, sampler) -> tuple:
    """``diagnostics_kernel``'s arguments but b0, b1 (``Team.run`` takes them so too), from
    ``fused_rows``' (an absent ``ref``/``ent``/``sampler`` becomes a (1, 1) stand-in and a flag
    of 0); the kernel writes ``out`` (K, B) float64."""
    dummy = np.zeros((1, 1), dtype=lp.dtype)
    given = (ref, ent, sampler)
    flags = np.array([per_tok, *(x is not None for x in given)], dtype=np.int64)
    return (
        lp,
        old,
        mask_u8,
        adv_2d,
        *(dummy if x is None else x for x in given),
        flags,
        np.asarray(thresholds, dtype=np.float64),
        out,
    )


def fused_rows(
    lp,
    old,
    mask_u8,
    adv_2d,
    ref,
    ent,
    per_tok,
    thresholds,
    threads: int = 1,
    out=None,
    sampler=None,
) -> np.ndarray:
    """Run the kernel on numpy arrays (C-contiguous, float32 or float64 alike, mask uint8);
    ``adv_2d`` is (B, T) with ``per_tok`` else (B, 1); ``ref``/``ent``/``sampler`` (log
    pi_sampler) None when absent.
    Returns the (K, B) float64 rows (``ROW.<name>`` holds diagnostic ``name``), written into
    ``out`` when given.

    ``threads`` > 1 splits the rows into that many blocks (at least ``MIN_ELEMENTS_PER_THREAD``
    elements each). torch's own OpenMP team runs them when torch has one (``omp_team``: its
    workers are the ones spinning right after torch's last op; the first call for a dtype
    starts the team's compilation in the background and takes the next route meanwhile);
    otherwise the caller's thread runs the first block and a pool the others. The kernel
    releases the GIL, so they run in parallel. On the pool's route, if another call is already
    splitting, this one runs on the caller's thread alone.
    """
    global _pool
    B, T = lp.shape
    out = np.empty((K, B), dtype=np.float64) if out is None else out
    args = kernel_args(lp, old, mask_u8, adv_2d, ref, ent, per_tok, thresholds, out, sampler)
    blocks = max(1, min(int(threads), B, (B * T) // MIN_ELEMENTS_PER_THREAD))
    omp = team(diagnostics_kernel) if blocks > 1 else None
    if omp is not None and omp.run(args, blocks):
        return out
    if blocks == 1 or not _pool_lock.acquire(blocking=False):
        diagnostics_kernel(*args, 0, B)
        return out
    try:
        # (a new pool in a forked child too: the parent's pool threads do not exist there)
        if _pool is None or _pool[1] < blocks - 1 or _pool[2] != os.getpid():
            pool = ThreadPoolExecutor(max_workers=blocks - 1, thread_name_prefix="gspo-fused")
            _pool = (pool, blocks - 1, os.getpid())
        edges = [B * i // blocks for i in range(blocks + 1)]
        futures = [
            _pool[0].submit(diagnostics_kernel, *args, edges[i], edges[i + 1])
            for i in range(1, blocks)
        ]
        diagnostics_kernel(*args, edges[0], edges[1])
        for f in futures:
            f.result()
    finally:
        _pool_lock.release()
    return out
