"""One optimizer step's diagnostics: validate, reduce on the inputs' device, one host transfer.

Axes: P prompts, G completions per prompt, B = P*G sequences (group by group), T token positions.

What ``compute_step`` does for one step, on the caller's thread:

1. validate every argument (ValueError naming the argument and its shape); nothing is written;
2. ``gspo_metrics.stacked_sequence_diagnostics`` on the inputs' device: the 16 per-sequence
   diagnostics as one (16, B) tensor, both clip units at once;
3. prepend rewards and truncation: ``seq_K_B`` (K, B). Under ``torch.distributed`` reduce it to a
   step summary on the device (a vector of sums and counts, all-reduced with SUM, and a vector of
   minima, maxima negated, all-reduced with MIN) and all-gather the lengths (for the exact p90),
   so every step scalar is the one a single process would compute on the concatenated batch,
   never a mean of per-rank means;
4. start ONE device-to-host copy of everything (non-blocking into pinned memory on CUDA).

The host arithmetic that turns this into step scalars (``StepRecord.materialize``) runs on the
writer thread, which waits for the copy; the caller never does. Without ``torch.distributed`` the
summary is reduced there too, from the transferred (K, B) rows with numpy (``_summary``, the same
code as the device reduction): on small batches each tensor op costs microseconds of fixed
overhead, which the training thread no longer pays.

Step scalars (S = the step's sequences over all ranks, M = their masked tokens):

    reward_mean/std, advantage_*, seq_log_ratio_*     over S (population std)
    seq_clip_fraction                                 |{b in S: s_b outside GSPO's range}| / |S|
    seq_clip_low/high_fraction                        mean over S of the per-sequence binding
                                                      fraction (0/1 with per-sequence advantages)
    token_clip_fraction, token_clip_low/high_fraction token-weighted: sum_b n_b f_b / sum_b n_b
    kl_ref_mean, kl_old_mean, entropy_mean            token-weighted, like the token clip fractions
    length_p90                                        numpy's linear-interpolation 90th percentile
                                                      (of all ranks' lengths, gathered)
    loss                                              the LossOutput's loss; mean over ranks
    extra keys                                        the caller's values (rank 0's, distributed)
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gspo_metrics import SEQUENCE_DIAGNOSTICS, group_advantages
from gspo_metrics.checks import check_float, check_tensor
from gspo_metrics.diagnostics import stacked_sequence_diagnostics

from .schema import Seq, Step, validate_extra_key

DEFAULT_SEQ_EPS = (3e-4, 4e-4)  # GSPO's clip range (the paper, Tinker)
DEFAULT_TOKEN_EPS = (0.2, 0.2)  # GRPO's / PPO's

# Rows of the per-sequence stack (K, B), in this order: reward and truncation, then the rows of
# gspo_metrics.stacked_sequence_diagnostics, whose names equal the Seq column names.
SEQ_ROWS: tuple[str, ...] = (Seq.REWARD, Seq.TRUNCATED, *SEQUENCE_DIAGNOSTICS)
# The per-sequence columns a record hands the sinks, in this (historical) order
_SEQ_COLUMNS: tuple[str, ...] = (
    Seq.REWARD,
    Seq.ADVANTAGE,
    Seq.LENGTH,
    Seq.TRUNCATED,
    Seq.SEQ_LOG_RATIO,
    Seq.SEQ_CLIPPED,
    Seq.SEQ_CLIP_LOW,
    Seq.SEQ_CLIP_HIGH,
    Seq.TOKEN_LOG_RATIO_MIN,
    Seq.TOKEN_LOG_RATIO_MAX,
    Seq.TOKEN_LOG_RATIO_STD,
    Seq.TOKEN_CLIP_FRACTION,
    Seq.TOKEN_CLIP_LOW_FRACTION,
    Seq.TOKEN_CLIP_HIGH_FRACTION,
    Seq.KL_REF,
    Seq.KL_OLD,
    Seq.ENTROPY,
    Seq.NONFINITE_COUNT,
)
assert sorted(SEQ_ROWS) == sorted(_SEQ_COLUMNS)
_R = {name: i for i, name in enumerate(SEQ_ROWS)}
_SQ_ROWS = [_R[Seq.REWARD], _R[Seq.ADVANTAGE], _R[Seq.SEQ_LOG_RATIO]]
_TOKW_ROWS = [
    _R[Seq.TOKEN_CLIP_FRACTION],
    _R[Seq.TOKEN_CLIP_LOW_FRACTION],
    _R[Seq.TOKEN_CLIP_HIGH_FRACTION],
    _R[Seq.KL_REF],
    _R[Seq.KL_OLD],
    _R[Seq.ENTROPY],
]
# Layout of the summary's sum vector: host constants, zero-variance groups, per-row sums (K),
# squares (3), |advantage| sum, token-weighted sums (6), loss.
_CONSTS = ("ranks", "sequences", "groups", "truncated_n", "loss_n")
_NSUM = len(_CONSTS) + 1 + len(SEQ_ROWS) + len(_SQ_ROWS) + 1 + len(_TOKW_ROWS) + 1
# minima: seq_log_ratio min, -max; length min, -max; -max |token log-ratio|; -B (for the gather)
_NMIN = 6


def _summary(seq_K_B, consts, zero_var, loss, lib):
    """The step summary of the (K, B) per-sequence rows: ``(sums, mins)``, maxima negated.

    One formula for both places it runs: torch tensors on the device (distributed: the vectors
    are then all-reduced with SUM and MIN) and numpy arrays on the host (one process, in
    ``StepRecord.materialize``); ``lib`` is ``torch`` or ``numpy``. ``consts`` (5,) as
    ``_CONSTS``, ``zero_var`` (1,) zero-variance groups, ``loss`` (1,) the loss (0 when none).
    The first five of the ``_NMIN`` minima; the sixth (-B, for the gather) is the caller's.
    """
    cat = torch.cat if lib is torch else np.concatenate
    sq_3_B = seq_K_B[_SQ_ROWS]
    length_B = seq_K_B[_R[Seq.LENGTH]]
    sums = cat(
        [
            consts,
            zero_var,
            seq_K_B.sum(1),
            (sq_3_B * sq_3_B).sum(1),
            abs(seq_K_B[_R[Seq.ADVANTAGE]]).sum().reshape(1),
            (seq_K_B[_TOKW_ROWS] * length_B).sum(1),
            loss,
        ]
    )
    slr_B = seq_K_B[_R[Seq.SEQ_LOG_RATIO]]
    # min/max propagate NaN in both libraries (torch: not aminmax, ~100x slower on small tensors)
    abs_max = lib.maximum(
        abs(seq_K_B[_R[Seq.TOKEN_LOG_RATIO_MIN]]), abs(seq_K_B[_R[Seq.TOKEN_LOG_RATIO_MAX]])
    ).max()
    mins = lib.stack([slr_B.min(), -slr_B.max(), length_B.min(), -length_B.max(), -abs_max])
    return sums, mins


def _zero_var_groups(reward_P_G) -> Any:
    """Groups whose rewards are all equal (``gspo_metrics.zero_variance_groups``), summed."""
    return (reward_P_G == reward_P_G[:, :1]).all(-1).sum()


@dataclass
class StepRecord:
    """One step's diagnostics, as handed to the sinks.

    ``materialize()`` (called by the writer thread) waits for the device-to-host copy and fills
    ``row`` (the step-table row: column -> Python scalar, extras included) and ``seq`` (column ->
    (B,) numpy array of this rank's sequences).

    ``host_buffer`` (float64) holds, in order: ``seq_K_B`` (K*B); then either the summary
    (``reduced``: _NSUM sums and _NMIN minima, reduced over ranks) or the loss (if
    ``loss_given``) and the zero-variance group count (if ``zero_var_given``); the tensor
    extras; the gathered lengths; the sampled tokens.
    """

    step: int
    wall_time: float
    rank: int
    num_prompts: int  # P on this rank
    group_size: int  # G
    run_id: str = ""
    algorithm: str = ""
    extra: dict[str, float] = field(default_factory=dict)  # host-side extras
    tensor_extra_keys: tuple[str, ...] = ()
    truncated_given: bool = False
    completions: list[str | None] | None = None
    token_sample_idx: list[int] = field(default_factory=list)
    token_width: int = 0  # T of the sampled rows
    num_gathered_lengths: int = 0  # distributed: (world * Bmax) padded lengths in the buffer
    host_buffer: torch.Tensor | None = None
    ready_event: Any = None  # a torch.cuda.Event when the copy is asynchronous
    reduced: bool = False  # the buffer holds the summary reduced on the device (distributed)
    loss_given: bool = False
    zero_var_given: bool = False  # counted on the device (rewards wider than the stack's dtype)
    row: dict[str, Any] | None = None
    seq: dict[str, np.ndarray] | None = None
    tokens: dict[str, list] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def batch_size(self) -> int:
        return self.num_prompts * self.group_size

    def materialize(self) -> StepRecord:
        """Split the host buffer into the per-sequence table and the step row (idempotent)."""
        with self._lock:
            if self.row is not None:
                return self
            if self.ready_event is not None:
                self.ready_event.synchronize()
            flat = self.host_buffer.numpy().astype(np.float64, copy=False)
            B, K = self.batch_size, len(SEQ_ROWS)
            seq_K_B = flat[: K * B].reshape(K, B)
            o = K * B
            if self.reduced:
                sums = flat[o : o + _NSUM]
                mins = flat[o + _NSUM : o + _NSUM + _NMIN]
                o += _NSUM + _NMIN
            else:
                loss = flat[o : o + self.loss_given]
                o += self.loss_given
                if self.zero_var_given:
                    zero_var = flat[o : o + 1]
                    o += 1
                else:
                    reward_P_G = seq_K_B[_R[Seq.REWARD]].reshape(self.num_prompts, -1)
                    zero_var = np.array([_zero_var_groups(reward_P_G)], dtype=np.float64)
                consts = np.array(
                    [1.0, B, self.num_prompts, B if self.truncated_given else 0, len(loss)],
                    dtype=np.float64,
                )
                loss = loss if self.loss_given else np.zeros(1)
                sums, mins = _summary(seq_K_B, consts, zero_var, loss, np)
            n_tensor_extra = len(self.tensor_extra_keys)
            tensor_extra = flat[o : o + n_tensor_extra]
            o += n_tensor_extra
            if self.num_gathered_lengths:
                gathered = flat[o : o + self.num_gathered_lengths]
                o += self.num_gathered_lengths
                lengths = gathered[gathered >= 0]
            else:
                lengths = seq_K_B[_R[Seq.LENGTH]]
            n_tok = len(self.token_sample_idx)
            if n_tok:
                W = self.token_width
                tok = flat[o : o + 3 * n_tok * W].reshape(3, n_tok, W)
                o += 3 * n_tok * W
            self.seq = _sequence_columns(self, seq_K_B)
            self.row = _step_row(self, sums, mins, lengths)
            for key, value in zip(self.tensor_extra_keys, tensor_extra, strict=True):
                self.row[key] = float(value)
            if n_tok:
                self.tokens = _token_columns(self, tok)
            self.host_buffer = None
            self.ready_event = None
            return self


def _sequence_columns(rec: StepRecord, seq_K_B: np.ndarray) -> dict[str, np.ndarray]:
    B, G = rec.batch_size, rec.group_size
    b = np.arange(B)
    # one conversion of the whole stack instead of one per column (float64 -> float32 is the
    # same rounding either way; whole numbers and 0/1 flags are exact in both)
    f32 = seq_K_B.astype(np.float32)
    out: dict[str, Any] = {
        Seq.STEP: np.full(B, rec.step, dtype=np.int64),
        Seq.RANK: np.full(B, rec.rank, dtype=np.int32),
        Seq.GROUP: (b // G).astype(np.int32),
        Seq.SAMPLE: (b % G).astype(np.int32),
    }
    for name in _SEQ_COLUMNS:
        i = _R[name]
        if name in (Seq.LENGTH, Seq.NONFINITE_COUNT):
            out[name] = seq_K_B[i].astype(np.int32)
        elif name == Seq.TRUNCATED:
            out[name] = seq_K_B[i] != 0 if rec.truncated_given else None
        elif name == Seq.SEQ_CLIPPED:
            out[name] = seq_K_B[i] != 0
        else:
            out[name] = f32[i]
    out[Seq.COMPLETION] = rec.completions
    return out


def _token_columns(rec: StepRecord, tok: np.ndarray) -> dict[str, list]:
    d, adv, mask = tok[0], tok[1], tok[2] > 0.5
    G = rec.group_size
    cols: dict[str, list] = {
        "group": [],
        "sample": [],
        "token_log_ratios": [],
        "advantages": [],
    }
    for i, b in enumerate(rec.token_sample_idx):
        m = mask[i]
        cols["group"].append(b // G)
        cols["sample"].append(b % G)
        cols["token_log_ratios"].append(d[i][m].astype(np.float32))
        cols["advantages"].append(adv[i][m].astype(np.float32))
    return cols


def _p90(x: np.ndarray) -> float:
    """numpy's default ("linear") 90th percentile, without np.percentile's ~1 ms of overhead."""
    n = len(x)
    if n == 0:
        return math.nan
    a = np.sort(x)
    h = (n - 1) * 0.9
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    return float(a[lo] + (h - lo) * (a[hi] - a[lo]))


def _div(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def _step_row(
    rec: StepRecord, sums: np.ndarray, mins: np.ndarray, lengths: np.ndarray
) -> dict[str, Any]:
    sums, mins = sums.tolist(), mins.tolist()  # Python floats: cheaper scalar arithmetic
    c = {name: sums[i] for i, name in enumerate(_CONSTS)}
    o = len(_CONSTS)
    zero_var = sums[o]
    o += 1
    row_sum = dict(zip(SEQ_ROWS, sums[o : o + len(SEQ_ROWS)], strict=True))
    o += len(SEQ_ROWS)
    sq = dict(zip((Seq.REWARD, Seq.ADVANTAGE, Seq.SEQ_LOG_RATIO), sums[o : o + 3], strict=True))
    o += 3
    adv_abs = sums[o]
    o += 1
    tokw = dict(zip([SEQ_ROWS[i] for i in _TOKW_ROWS], sums[o : o + 6], strict=True))
    o += 6
    loss_sum = sums[o]

    n = c["sequences"]
    n_tok = row_sum[Seq.LENGTH]

    def mean(name: str) -> float:
        return _div(row_sum[name], n)

    def std(name: str) -> float:
        m = mean(name)
        var = _div(sq[name], n) - m * m
        return math.sqrt(max(var, 0.0)) if math.isfinite(var) else math.nan

    def tok_mean(name: str) -> float:
        return _div(tokw[name], n_tok)

    row: dict[str, Any] = {
        Step.RUN_ID: rec.run_id,
        Step.STEP: int(rec.step),
        Step.WALL_TIME: rec.wall_time,
        Step.ALGORITHM: rec.algorithm,
        Step.LOSS: _div(loss_sum, c["loss_n"]),
        Step.REWARD_MEAN: mean(Seq.REWARD),
        Step.REWARD_STD: std(Seq.REWARD),
        Step.ADVANTAGE_MEAN: mean(Seq.ADVANTAGE),
        Step.ADVANTAGE_STD: std(Seq.ADVANTAGE),
        Step.ADVANTAGE_ABS_MEAN: _div(adv_abs, n),
        Step.SEQ_LOG_RATIO_MEAN: mean(Seq.SEQ_LOG_RATIO),
        Step.SEQ_LOG_RATIO_STD: std(Seq.SEQ_LOG_RATIO),
        Step.SEQ_LOG_RATIO_MIN: float(mins[0]),
        Step.SEQ_LOG_RATIO_MAX: float(-mins[1]),
        Step.SEQ_CLIP_FRACTION: mean(Seq.SEQ_CLIPPED),
        Step.SEQ_CLIP_LOW_FRACTION: mean(Seq.SEQ_CLIP_LOW),
        Step.SEQ_CLIP_HIGH_FRACTION: mean(Seq.SEQ_CLIP_HIGH),
        Step.TOKEN_CLIP_FRACTION: tok_mean(Seq.TOKEN_CLIP_FRACTION),
        Step.TOKEN_CLIP_LOW_FRACTION: tok_mean(Seq.TOKEN_CLIP_LOW_FRACTION),
        Step.TOKEN_CLIP_HIGH_FRACTION: tok_mean(Seq.TOKEN_CLIP_HIGH_FRACTION),
        Step.TOKEN_LOG_RATIO_ABS_MAX: float(-mins[4]),
        Step.ZERO_VARIANCE_GROUPS: int(zero_var),
        Step.ZERO_VARIANCE_FRACTION: _div(zero_var, c["groups"]),
        Step.NUM_GROUPS: int(c["groups"]),
        Step.NUM_SEQUENCES: int(n),
        Step.NUM_TOKENS: int(n_tok),
        Step.LENGTH_MEAN: _div(n_tok, n),
        Step.LENGTH_MIN: float(mins[2]),
        Step.LENGTH_MAX: float(-mins[3]),
        Step.LENGTH_P90: _p90(lengths),
        Step.TRUNCATED_FRACTION: _div(row_sum[Seq.TRUNCATED], c["truncated_n"]),
        Step.KL_REF_MEAN: tok_mean(Seq.KL_REF),
        Step.KL_OLD_MEAN: tok_mean(Seq.KL_OLD),
        Step.ENTROPY_MEAN: tok_mean(Seq.ENTROPY),
        Step.NONFINITE_COUNT: int(row_sum[Seq.NONFINITE_COUNT])
        if math.isfinite(row_sum[Seq.NONFINITE_COUNT])
        else 0,
        Step.NUM_RANKS: int(c["ranks"]),
    }
    row.update(rec.extra)
    return row


# ----------------------------------------------------------------------------- validation


def _check_rewards(rewards: object, B: int) -> torch.Tensor:
    rewards_P_G = check_tensor(rewards, "rewards", 2, "(P, G)")
    if not rewards_P_G.is_floating_point():  # 0/1 or integer scores are fine: as float
        if rewards_P_G.is_complex():
            check_float(rewards_P_G, "rewards")
        rewards_P_G = rewards_P_G.to(torch.float32)
    P, G = rewards_P_G.shape
    if P * G != B or G == 0:
        raise ValueError(
            f"rewards has shape {(P, G)} but logprobs has B = {B} rows; rewards must be (P, G) "
            "with P * G == B, the sequences ordered group by group"
        )
    return rewards_P_G


def _check_truncated(truncated: object, B: int) -> torch.Tensor:
    if isinstance(truncated, list | tuple | np.ndarray):
        truncated = torch.as_tensor(np.asarray(truncated, dtype=bool))
    t = check_tensor(truncated, "truncated", 1, "(B,)")
    if t.shape[0] != B:
        raise ValueError(f"truncated has shape {tuple(t.shape)} but there are B = {B} sequences")
    if t.is_complex():
        raise ValueError(f"truncated must be bool or 0/1, got dtype {t.dtype}")
    return t


def _check_extra(extra: object) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Split ``extra`` into host floats and 0-d tensors (the latter ride the single transfer)."""
    if extra is None:
        return {}, {}
    if not isinstance(extra, Mapping):
        raise ValueError(f"extra must be a dict of scalars, got {type(extra).__name__}")
    host: dict[str, float] = {}
    dev: dict[str, torch.Tensor] = {}
    for key, value in extra.items():
        validate_extra_key(key)
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(
                    f"extra[{key!r}] must be a scalar, got a tensor of shape {tuple(value.shape)}"
                )
            if value.is_complex():
                raise ValueError(f"extra[{key!r}] must be real, got dtype {value.dtype}")
            dev[key] = value.detach().reshape(())
        elif isinstance(value, int | float | np.integer | np.floating | np.bool_ | bool):
            host[key] = float(value)
        elif value is None:
            host[key] = math.nan
        else:
            raise ValueError(
                f"extra[{key!r}] must be a number or a one-element tensor, got {type(value).__name__}"
            )
    return host, dev


def _check_completions(completions: object, B: int) -> list[str | None] | None:
    if completions is None:
        return None
    if isinstance(completions, str) or not isinstance(completions, Sequence):
        raise ValueError(f"completions must be a list of B = {B} strings")
    if len(completions) != B:
        raise ValueError(f"completions has {len(completions)} entries but there are B = {B}")
    out = list(completions)
    if not all(c is None or type(c) is str for c in out):
        for i, c in enumerate(out):
            if c is not None and not isinstance(c, str):
                raise ValueError(f"completions[{i}] must be a str or None, got {type(c).__name__}")
    return out


def _check_step(step: object) -> int:
    if isinstance(step, bool) or not isinstance(step, int | np.integer):
        raise ValueError(f"step must be an int, got {step!r}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return int(step)


def _loss_tensor(loss: object, device: torch.device, dtype: torch.dtype) -> torch.Tensor | None:
    if loss is None:
        return None
    value = getattr(loss, "loss", loss)  # LossOutput or anything with .loss
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"loss must be a scalar, got a tensor of shape {tuple(value.shape)}")
        return value.detach().reshape(1).to(device=device, dtype=dtype)
    if isinstance(value, int | float | np.integer | np.floating):
        return torch.tensor([float(value)], device=device, dtype=dtype)
    raise ValueError(
        f"loss must be a LossOutput, a scalar tensor or a number, got {type(loss).__name__}"
    )


# ----------------------------------------------------------------------------- the step


def check_step_inputs(
    step: object,
    *,
    rewards: object,
    logprobs: object,
    truncated: object = None,
    extra: object = None,
    completions: object = None,
    group_size: int | None = None,
) -> tuple[int, torch.Tensor, torch.Tensor | None, dict, dict, list | None]:
    """The step-level checks of ``compute_step`` (the token-level ones are
    ``gspo_metrics.diagnostics.check_diagnostics_inputs``): ValueError naming the argument.

    Returns the normalised ``(step, rewards_P_G, truncated, host_extra, tensor_extra,
    completions)``: rewards as a floating tensor, extras split into host floats and 0-d tensors.
    """
    step = _check_step(step)
    check_tensor(logprobs, "logprobs", 2, "(B, T)")
    B = logprobs.shape[0]
    rewards_P_G = _check_rewards(rewards, B)
    P, G = rewards_P_G.shape
    if group_size is not None and G != group_size:
        raise ValueError(f"rewards has shape {(P, G)} but the run's group_size is {group_size}")
    if truncated is not None:
        truncated = _check_truncated(truncated, B)
    host_extra, dev_extra = _check_extra(extra)
    completions = _check_completions(completions, B)
    return step, rewards_P_G, truncated, host_extra, dev_extra, completions


def _dist_info(distributed: bool | None) -> tuple[bool, int, int]:
    import torch.distributed as dist

    on = dist.is_available() and dist.is_initialized()
    if distributed is False or not on:
        return False, 0, 1
    return True, dist.get_rank(), dist.get_world_size()


def token_sample_indices(B: int, n: int) -> list[int]:
    """``n`` sequence indices spread evenly over the batch (first and last included)."""
    if n <= 0:
        return []
    if n >= B:
        return list(range(B))
    return sorted({round(i * (B - 1) / (n - 1)) for i in range(n)}) if n > 1 else [0]


def compute_step(
    step: int,
    *,
    rewards: torch.Tensor,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
    loss: Any = None,
    entropy: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
    extra: Mapping[str, Any] | None = None,
    completions: Sequence[str | None] | None = None,
    seq_eps: tuple[float, float] = DEFAULT_SEQ_EPS,
    token_eps: tuple[float, float] = DEFAULT_TOKEN_EPS,
    group_size: int | None = None,
    token_samples: int = 0,
    distributed: bool | None = None,
    run_id: str = "",
    algorithm: str = "",
    workspace: dict | None = None,
    wall_time: float | None = None,
) -> StepRecord:
    """Validate, reduce on device, and start the single host transfer; see the module docstring.

    The returned record is not materialised yet (call ``.materialize()``). Under an initialised
    ``torch.distributed`` process group (unless ``distributed=False``) every rank must call this
    for every step: it runs three collectives. ``workspace``: a dict reused across calls for
    scratch buffers (see ``gspo_metrics.sequence_diagnostics``). ``wall_time``: when the step was
    logged (default: now).
    """
    wall_time = time.time() if wall_time is None else wall_time
    c = check_step_inputs(
        step,
        rewards=rewards,
        logprobs=logprobs,
        truncated=truncated,
        extra=extra,
        completions=completions,
        group_size=group_size,
    )
    step, rewards_P_G, truncated, host_extra, dev_extra, completions = c
    B, T = logprobs.shape
    P, G = rewards_P_G.shape
    if advantages is None:
        advantages = group_advantages(rewards_P_G.detach()).reshape(B)  # (P, G) -> (B,)
    # validates logprobs/old_logprobs/mask/advantages/ref_logprobs/entropy, empty mask rows, eps
    diag_16_B = stacked_sequence_diagnostics(
        logprobs,
        old_logprobs,
        mask,
        advantages,
        seq_eps=tuple(seq_eps),
        token_eps=tuple(token_eps),
        ref_logprobs=ref_logprobs,
        entropy=entropy,
        workspace=workspace,
    )
    dist_on, rank, world = _dist_info(distributed)
    device = logprobs.device
    dtype = torch.float32 if device.type == "mps" else torch.float64
    with torch.no_grad():  # (so no .detach() is needed below: nothing records a graph)
        loss_t = _loss_tensor(loss, device, dtype)
        ddt = diag_16_B.dtype  # float32/float64: every row fits it exactly
        reward_1_B = rewards_P_G.reshape(1, B).to(device=device, dtype=ddt)
        if truncated is not None:
            truncated_1_B = truncated.reshape(1, B).to(device=device, dtype=ddt)
        else:
            truncated_1_B = diag_16_B.new_zeros(1, B)
        seq_K_B = torch.cat([reward_1_B, truncated_1_B, diag_16_B])  # (K, B), SEQ_ROWS order
        parts = [seq_K_B.reshape(-1)]
        num_gathered = 0
        # the zero-variance test must see the rewards themselves, not their rounding to ddt
        zero_var_on_device = dist_on or rewards_P_G.dtype.itemsize > ddt.itemsize
        zero_var = None
        if zero_var_on_device:
            zero_var = _zero_var_groups(rewards_P_G).to(dtype).reshape(1)
        if dist_on:  # step summary on the device, reduced over ranks: sums (SUM), minima (MIN)
            import torch.distributed as dist

            consts = torch.tensor(
                [1.0, B, P, B if truncated is not None else 0, 0 if loss_t is None else 1],
                dtype=dtype,
                device=device,
            )
            no_loss = torch.zeros(1, dtype=dtype, device=device)
            seq64_K_B = seq_K_B.to(dtype)
            sums, mins5 = _summary(
                seq64_K_B, consts, zero_var, no_loss if loss_t is None else loss_t, torch
            )
            mins = torch.cat([mins5, consts[1:2].neg()])  # -B: the gather needs the largest B
            dist.all_reduce(sums, op=dist.ReduceOp.SUM)
            dist.all_reduce(mins, op=dist.ReduceOp.MIN)
            bmax = int(-mins[5].item())  # one small sync
            padded = torch.full((bmax,), -1.0, dtype=dtype, device=device)
            padded[:B] = seq64_K_B[_R[Seq.LENGTH]]
            gathered = [torch.empty_like(padded) for _ in range(world)]
            dist.all_gather(gathered, padded)
            num_gathered = bmax * world
            parts += [sums, mins]
        else:  # the host reduces seq_K_B (materialize); it needs the loss (and maybe zero_var)
            if loss_t is not None:
                parts.append(loss_t)
            if zero_var is not None:
                parts.append(zero_var)
        tensor_keys = tuple(dev_extra)
        if tensor_keys:
            parts += [dev_extra[k].reshape(1).to(device=device) for k in tensor_keys]
        if dist_on:
            parts += gathered
        idx = token_sample_indices(B, int(token_samples))
        if idx:
            sel = torch.tensor(idx, device=device)
            m_nt = mask[sel] != 0
            d_nt = torch.where(m_nt, logprobs.detach()[sel] - old_logprobs.detach()[sel], 0.0)
            adv = advantages.detach()
            adv_nt = adv[sel][:, None].expand(-1, T) if adv.dim() == 1 else adv[sel]
            parts += [
                d_nt.to(dtype).reshape(-1),
                adv_nt.to(dtype).reshape(-1),
                m_nt.to(dtype).reshape(-1),
            ]
        # one buffer of everything, converted to float64 (exact for every part) by the copy
        flat = torch.empty(sum(p.numel() for p in parts), dtype=dtype, device=device)
        torch.cat(parts, out=flat)
        event = None
        if device.type == "cuda":
            host = torch.empty(flat.shape, dtype=dtype, pin_memory=True)
            host.copy_(flat, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        else:
            host = flat.to("cpu")  # the one transfer (a no-op view on CPU)
    return StepRecord(
        step=step,
        wall_time=wall_time,
        rank=rank,
        num_prompts=P,
        group_size=G,
        run_id=run_id,
        algorithm=algorithm,
        extra=host_extra,
        tensor_extra_keys=tensor_keys,
        truncated_given=truncated is not None,
        completions=completions,
        token_sample_idx=idx,
        token_width=T,
        num_gathered_lengths=num_gathered,
        host_buffer=host,
        ready_event=event,
        reduced=dist_on,
        loss_given=loss_t is not None and not dist_on,
        zero_var_given=zero_var is not None and not dist_on,
    )


def step_diagnostics(
    *,
    rewards: torch.Tensor,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor | None = None,
    ref_logprobs: torch.Tensor | None = None,
    loss: Any = None,
    entropy: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
    extra: Mapping[str, Any] | None = None,
    completions: Sequence[str | None] | None = None,
    seq_eps: tuple[float, float] = DEFAULT_SEQ_EPS,
    token_eps: tuple[float, float] = DEFAULT_TOKEN_EPS,
    step: int = 0,
    algorithm: str = "",
    distributed: bool | None = False,
):
    """The recorder's numbers without a recorder: ``(step_row, sequences)``.

    ``step_row`` is the step-table row (``Step.*`` column -> float/int, plus ``extra`` keys);
    ``sequences`` a pandas DataFrame with one row per sequence (``Seq.*`` columns). Same
    arguments and code path as ``RunRecorder.log_step``; with ``distributed=None`` the step
    scalars are reduced over an initialised ``torch.distributed`` group.
    """
    import pandas as pd

    rec = compute_step(
        step,
        rewards=rewards,
        logprobs=logprobs,
        old_logprobs=old_logprobs,
        mask=mask,
        advantages=advantages,
        ref_logprobs=ref_logprobs,
        loss=loss,
        entropy=entropy,
        truncated=truncated,
        extra=extra,
        completions=completions,
        seq_eps=seq_eps,
        token_eps=token_eps,
        distributed=distributed,
        algorithm=algorithm,
    ).materialize()
    row = {k: v for k, v in rec.row.items() if k not in (Step.RUN_ID, Step.ALGORITHM)}
    seq = {k: v for k, v in rec.seq.items() if v is not None}
    return row, pd.DataFrame(seq)
