"""One optimizer step's diagnostics: reduce on the inputs' device, one host transfer, host scalars.

Axes: P prompts, G completions per prompt, B = P*G sequences (group by group), T token positions;
K the per-sequence values of a step (``layout.SEQ_ROWS``, rows of the (K, B) stack), N the rows of
its token sample. A name carries its shape (``seq_K_B``, ``d_N_T``).

What ``reduce_step`` does with one step's checked inputs (``StepInputs``), on the caller's thread:

1. ``gspo_metrics.stacked_sequence_diagnostics`` on the inputs' device: every per-sequence
   diagnostic as one (K, B) tensor, both clip units at once (it also checks the token-level
   arguments: ValueError naming the argument and its shape; nothing is written);
2. prepend the caller's per-sequence values (rewards, truncation): ``seq_K_B``, rows
   ``SEQ_ROWS``. Under ``torch.distributed`` reduce it over ranks to a step summary on the
   device (``_distributed_summary``; why it is exact: ``training_hooks.step_reduction``);
3. pick the token sample (``_token_sample``): a few sequences spread over the batch (the
   baseline) and the step's culprits (largest |log s|, largest token |log r|, non-finite
   values), chosen on the device by ``topk`` of per-sequence scores, so the choice rides the
   same transfer (no extra host sync); the host labels each row with its ``reason``;
4. pack every part into one buffer with a named ``Layout`` and start ONE device-to-host copy of
   it (``_to_host``: non-blocking into pinned memory on CUDA).

The host arithmetic that turns this into step scalars (``StepRecord.materialize``) runs on the
writer thread, which waits for the copy; the caller never does. Without ``torch.distributed`` the
summary is reduced there too, from the transferred (K, B) rows with numpy (``summarize``, the same
code as the device reduction): on small batches each tensor op costs microseconds of fixed
overhead, which the training thread does not pay.

Each step scalar's meaning and reduction is its column's declaration (``training_hooks.columns``:
``meaning(Step.X)``; S = the step's sequences over all ranks, M = their masked tokens); the
caller's extra keys are its own values (rank 0's, distributed).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gspo_metrics import group_advantages
from gspo_metrics.diagnostics import stacked_sequence_diagnostics
from gspo_metrics.spec import CALLER_VALUES, GRPO_EPS, GSPO_EPS, PER_SEQUENCE

from .inputs import StepArgs, StepInputs, buffer_dtype
from .layout import SEQ_ROW, Layout, pack
from .params import DOC, takes_fields_of
from .ratio_grid import significant_bits, token_stats
from .schema import RECORD_TOKEN_COLUMNS, TOKEN_SAMPLE_REASONS, Seq, Step, Tok
from .step_reduction import (
    MINS,
    SUMS,
    step_row,
    summarize,
    zero_variance_counts,
)

DEFAULT_SEQ_EPS = GSPO_EPS  # (public names of training_hooks, kept: gspo_metrics.spec's defaults)
DEFAULT_TOKEN_EPS = GRPO_EPS

# ----------------------------------------------------------------------------- the record

#: The token sample's parts, (n, T) each: log r (0 on padding), advantages, the 0/1 mask.
TOKEN_PARTS = ("token_log_ratios", "token_advantages", "token_mask")
#: The token sample's culprits, per reason (``TOKEN_SAMPLE_REASONS`` but "baseline"): the
#: per-sequence row its score is read from, and how many sequences (the largest scores) it keeps.
#: A sequence's reason is the first that picks it, in this order, then "baseline".
CULPRITS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nonfinite", (Seq.NONFINITE_COUNT,)),  # NaN/inf inside the mask: count > 0
    ("max_abs_log_s", (Seq.SEQ_LOG_RATIO,)),  # |log s_b|
    ("max_abs_token_log_ratio", (Seq.TOKEN_LOG_RATIO_MIN, Seq.TOKEN_LOG_RATIO_MAX)),  # max_t |d|
)
CULPRITS_PER_REASON = 2
assert tuple(r for r, _ in CULPRITS) + ("baseline",) == TOKEN_SAMPLE_REASONS


@dataclass
class StepRecord:
    """One step's diagnostics, as handed to the sinks.

    ``materialize()`` (called by the writer thread) waits for the device-to-host copy and fills
    ``row`` (the step-table row: column -> Python scalar, extras included), ``seq`` (column ->
    (B,) numpy array of this rank's sequences) and ``tokens`` (the token sample, if any).

    ``host_buffer`` (float64) holds the parts named in ``layout``: ``seq`` (the (K, B) rows
    ``SEQ_ROWS``); distributed, the summary reduced over ranks (``sums``, ``mins``) and every
    rank's ``lengths`` (padded with -1); else the ``loss`` (if given), ``zero_var`` (if counted
    on the device) and ``token_stats`` (``ratio_grid.token_stats``); ``extra/<key>`` per tensor extra; the token sample: ``token_rows`` (the
    sequence index of each sampled row: ``token_culprits`` culprit candidates, by reason in
    ``CULPRITS`` order, then the baseline) and ``TOKEN_PARTS``.
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
    prompts: list[str | None] | None = None  # P, one per group
    token_texts: list | None = None  # B rows of T decoded tokens (or None)
    rollout: int | None = None
    policy_lag: int | None = None
    logprob_bits: int | None = None  # significant bits of the log-probs' dtype (the fewer)
    token_culprits: int = 0  # culprit candidates per reason at the head of ``token_rows``
    host_buffer: torch.Tensor | None = None
    layout: Layout | None = None
    ready_event: Any = None  # a torch.cuda.Event when the copy is asynchronous
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
            if self.host_buffer is None or self.layout is None:
                raise RuntimeError(
                    f"StepRecord of step {self.step} has no host buffer and layout to materialize"
                )
            flat = self.host_buffer.numpy().astype(np.float64, copy=False)
            layout = self.layout
            seq_K_B = layout.read(flat, "seq")
            if "sums" in layout:  # reduced over ranks on the device
                sums, mins = flat[layout["sums"]], flat[layout["mins"]]
                lengths = flat[layout["lengths"]]
                lengths = lengths[lengths >= 0]  # (-1: the padding of a smaller rank)
            else:
                sums, mins = self._host_summary(layout, seq_K_B, flat)
                lengths = seq_K_B[SEQ_ROW[Seq.LENGTH]]
            self.seq = _sequence_columns(self, seq_K_B)
            row = step_row(self, sums, mins, lengths)
            for key in self.tensor_extra_keys:
                row[key] = float(flat[layout[f"extra/{key}"]][0])
            self.row = row
            if "token_rows" in layout:
                parts = (layout.read(flat, p) for p in ("token_rows", *TOKEN_PARTS))
                self.tokens = _token_columns(self, seq_K_B, *parts)
            self.host_buffer = None
            self.ready_event = None
            return self

    def materialized(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(row, seq)`` of a materialised record; a clear error before ``materialize()``."""
        if self.row is None or self.seq is None:
            raise RuntimeError(
                f"StepRecord of step {self.step} is not materialised: call materialize() first"
            )
        return self.row, self.seq

    def _host_summary(self, layout: Layout, seq_K_B: np.ndarray, flat: np.ndarray):
        """``summarize`` of this process's rows, on the host."""
        B = self.batch_size
        loss = flat[layout["loss"]] if "loss" in layout else None
        if "zero_var" in layout:
            zero_var = flat[layout["zero_var"]]
        else:
            reward_P_G = seq_K_B[SEQ_ROW[Seq.REWARD]].reshape(self.num_prompts, -1)
            zero_var = zero_variance_counts(reward_P_G, np)
        counts = np.array(
            [1.0, B, self.num_prompts, B if self.truncated_given else 0, float(loss is not None)],
            dtype=np.float64,
        )
        loss = np.zeros(1) if loss is None else loss
        return summarize(seq_K_B, counts, zero_var, loss, flat[layout["token_stats"]], np)


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
    for value in PER_SEQUENCE:  # the sequence table's columns, typed as declared
        k = SEQ_ROW[value.name]
        if value.name == Seq.TRUNCATED and not rec.truncated_given:
            out[value.name] = None  # not given: unknown, not False
        elif value.dtype == "int32":
            out[value.name] = seq_K_B[k].astype(np.int32)
        elif value.dtype == "bool":  # a NaN flag (unknown: its ratio is NaN) is None, a null
            unknown = np.isnan(seq_K_B[k])
            flag = seq_K_B[k] != 0
            out[value.name] = np.where(unknown, None, flag) if unknown.any() else flag
        else:
            out[value.name] = f32[k]
    out[Seq.COMPLETION] = rec.completions
    out[Seq.PROMPT] = None if rec.prompts is None else [rec.prompts[i // G] for i in range(B)]
    return out


def culprit_scores(seq_K_B, lib=np):
    """(len(CULPRITS), B) score of each sequence per culprit reason: max |row| over the reason's
    rows, a NaN read as +inf (it is a culprit). ``lib``: numpy (host) or torch (device)."""
    scores = []
    for _, rows in CULPRITS:
        score_B = abs(seq_K_B[SEQ_ROW[rows[0]]])
        for name in rows[1:]:
            score_B = lib.maximum(score_B, abs(seq_K_B[SEQ_ROW[name]]))
        scores.append(score_B)
    return lib.nan_to_num(lib.stack(scores), nan=math.inf)


def _token_columns(rec: StepRecord, seq_K_B, rows_n, d_N_T, adv_N_T, mask_N_T) -> dict[str, list]:
    """The token table's rows: each sampled sequence once, with the first reason that picked
    it. A culprit candidate whose score is 0 explains nothing (an on-policy step's |log s|) and
    is dropped unless the baseline has it."""
    mask_N_T = mask_N_T > 0.5
    G, k = rec.group_size, rec.token_culprits
    scores = culprit_scores(seq_K_B)
    reasons = [r for r, _ in CULPRITS for _ in range(k)]
    cols: dict[str, list] = {name: [] for name in RECORD_TOKEN_COLUMNS}
    seen: set[int] = set()
    for i, b in enumerate(rows_n.astype(np.int64).tolist()):
        reason = reasons[i] if i < len(reasons) else "baseline"
        if b in seen or (i < len(reasons) and not scores[i // k, b] > 0):
            continue
        seen.add(b)
        m = mask_N_T[i]
        cols[Tok.GROUP].append(b // G)
        cols[Tok.SAMPLE].append(b % G)
        cols[Tok.TOKEN_LOG_RATIOS].append(d_N_T[i][m].astype(np.float32))
        cols[Tok.ADVANTAGES].append(adv_N_T[i][m].astype(np.float32))
        cols[Tok.TOKENS].append(_token_texts(rec, b, m))
        cols[Tok.REASON].append(reason)
    return cols


def _token_texts(rec: StepRecord, b: int, mask_t: np.ndarray) -> list[str] | None:
    """Sequence ``b``'s decoded tokens at its masked positions (aligned with its token
    log-ratios), None when not given; a token that is not a str is kept as its ``str``."""
    row = rec.token_texts[b] if rec.token_texts is not None else None
    if row is None:
        return None
    return [
        t if type(t) is str else str(t)
        for t, keep in zip(row, mask_t.tolist(), strict=True)
        if keep
    ]


# ----------------------------------------------------------------------------- the reduction


@dataclass(frozen=True)
class Reduction:
    """How ``reduce_step`` reduces and labels a step (the run's settings it reads)."""

    seq_eps: tuple[float, float] = GSPO_EPS
    """GSPO's sequence-unit clip range (eps_low, eps_high)."""
    token_eps: tuple[float, float] = GRPO_EPS
    """GRPO's token-unit clip range (eps_low, eps_high)."""
    token_samples: int = 0
    """Sequences per step whose per-token log-ratios are kept (spread over the batch), besides
    up to ``CULPRITS_PER_REASON`` culprits per reason; 0: no token sample."""
    distributed: bool | None = None
    """None: reduce over an initialised ``torch.distributed`` group; False: this process only."""
    run_id: str = ""
    algorithm: str = ""


def dist_info(distributed: bool | None) -> tuple[bool, int, int]:
    """``(on, rank, world_size)``: on when ``torch.distributed`` is initialised, unless
    ``distributed`` is False."""
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


def reduce_step(inputs: StepInputs, how: Reduction, workspace: dict | None = None) -> StepRecord:
    """Reduce on the inputs' device and start the single host transfer (see the module
    docstring). The record is not materialised yet (call ``.materialize()``). Distributed
    (``how.distributed``) every rank must call this for every step: it runs three collectives.
    ``workspace``: a dict reused across calls for scratch buffers (see
    ``gspo_metrics.sequence_diagnostics``; one per thread)."""
    B, T = inputs.logprobs.shape
    advantages = inputs.advantages
    if advantages is None:
        advantages = group_advantages(inputs.rewards.detach()).reshape(B)  # (P, G) -> (B,)
    # checks logprobs/old_logprobs/mask/advantages/ref_logprobs/entropy, empty mask rows, eps,
    # log-probs above 0
    diag_K_B = stacked_sequence_diagnostics(
        inputs.logprobs,
        inputs.old_logprobs,
        inputs.mask,
        advantages,
        seq_eps=how.seq_eps,
        token_eps=how.token_eps,
        ref_logprobs=inputs.ref_logprobs,
        entropy=inputs.entropy,
        sampler_logprobs=inputs.sampler_logprobs,
        workspace=workspace,
        check_logprobs=True,  # a log-prob above 0 inside the mask: a ValueError naming it
    )
    dist_on, rank, world = dist_info(how.distributed)
    device = inputs.logprobs.device
    dtype = buffer_dtype(device)
    with torch.no_grad():  # (so no .detach() is needed below: nothing records a graph)
        seq_K_B = _sequence_rows(inputs, diag_K_B)
        parts = {"seq": seq_K_B}
        if dist_on:
            parts.update(_distributed_summary(inputs, seq_K_B, dtype, world))
        else:  # the host reduces seq_K_B (materialize); it needs the loss (and maybe zero_var)
            parts.update(_host_summary_parts(inputs, seq_K_B.dtype, dtype))
        for key, value in inputs.tensor_extra.items():
            parts[f"extra/{key}"] = value.reshape(1).to(device=device)
        idx = token_sample_indices(B, int(how.token_samples))
        k = min(CULPRITS_PER_REASON, B) if idx else 0
        if idx:
            parts.update(_token_sample(inputs, advantages, seq_K_B, idx, k, dtype))
        host, event, layout = _to_host(parts, dtype, device)
    return StepRecord(
        step=inputs.step,
        wall_time=inputs.wall_time,
        rank=rank,
        num_prompts=inputs.num_prompts,
        group_size=inputs.group_size,
        run_id=how.run_id,
        algorithm=how.algorithm,
        extra=dict(inputs.extra),
        tensor_extra_keys=tuple(inputs.tensor_extra),
        truncated_given=inputs.truncated is not None,
        completions=inputs.completions,
        prompts=inputs.prompts,
        token_texts=inputs.token_texts,
        rollout=inputs.rollout,
        policy_lag=inputs.policy_lag,
        logprob_bits=logprob_bits(inputs.logprobs.dtype, inputs.old_logprobs.dtype),
        token_culprits=k,
        host_buffer=host,
        layout=layout,
        ready_event=event,
    )


def skip_step_collectives(how: Reduction, device: torch.device) -> None:
    """Take part, with nothing to add, in the collectives of a step this rank dropped (its
    inputs were refused after the first step): sums 0, minima +inf, no lengths. The other
    ranks reduce the step over their own batches; none waits on this one. One process: nothing."""
    dist_on, _, world = dist_info(how.distributed)
    if not dist_on:
        return
    dtype = buffer_dtype(device)
    sums = torch.zeros(SUMS.size, dtype=dtype, device=device)
    mins = torch.full((len(MINS),), math.inf, dtype=dtype, device=device)
    _step_collectives(sums, mins, sums.new_zeros(0), world)


def _step_collectives(sums, mins, length_B, world: int):
    """The step's three collectives, one code for a rank with sequences and one that dropped the
    step: ``sums`` all-reduced with SUM (in place), ``mins`` with MIN, every rank's lengths
    all-gathered (each padded with -1 to the largest B, found by a MIN of -B along the minima).
    Returns ``(sums, mins, lengths)``."""
    import torch.distributed as dist

    B = len(length_B)
    mins_and_B = torch.cat(
        [mins, torch.full((1,), -float(B), dtype=mins.dtype, device=mins.device)]
    )
    dist.all_reduce(sums, op=dist.ReduceOp.SUM)
    dist.all_reduce(mins_and_B, op=dist.ReduceOp.MIN)
    bmax = int(-mins_and_B[-1].item())  # one small sync
    padded = torch.full((bmax,), -1.0, dtype=sums.dtype, device=sums.device)
    padded[:B] = length_B
    gathered = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return sums, mins_and_B[: len(mins)], torch.cat(gathered)


def _sequence_rows(inputs: StepInputs, diag_K_B: torch.Tensor) -> torch.Tensor:
    """The (K, B) per-sequence rows, ``SEQ_ROWS``: the caller's values (rewards, truncation: 0
    when not given, the loss's attenuation: NaN when not given), then the diagnostics, in their dtype (float32/float64: every row fits)."""
    B, ddt, device = diag_K_B.shape[1], diag_K_B.dtype, diag_K_B.device
    truncated = inputs.truncated
    attenuation = inputs.attenuation
    caller = {
        Seq.REWARD: inputs.rewards.reshape(1, B).to(device=device, dtype=ddt),
        Seq.TRUNCATED: diag_K_B.new_zeros(1, B)
        if truncated is None
        else truncated.reshape(1, B).to(device=device, dtype=ddt),
        Seq.ATTENUATION: diag_K_B.new_full((1, B), math.nan)  # not given: unknown
        if attenuation is None
        else attenuation.reshape(1, B).to(device=device, dtype=ddt),
    }
    return torch.cat([*(caller[name] for name in CALLER_VALUES), diag_K_B])


def _host_summary_parts(inputs: StepInputs, stack_dtype, dtype) -> dict[str, torch.Tensor]:
    """What the host's summary needs besides the rows: the loss, and the zero-variance group
    count when the rewards are wider than the stack's dtype (the test must see the rewards
    themselves, not their rounding)."""
    parts = {}
    if inputs.loss is not None:
        parts["loss"] = inputs.loss
    parts["token_stats"] = _token_stats(inputs)
    if inputs.rewards.dtype.itemsize > stack_dtype.itemsize:
        zero_var = zero_variance_counts(inputs.rewards, torch)
        parts["zero_var"] = zero_var.to(device=inputs.logprobs.device, dtype=dtype)
    return parts


def _token_stats(inputs: StepInputs) -> torch.Tensor:
    """(3,) ``ratio_grid.token_stats`` of the step's tokens, on their device."""
    return token_stats(inputs.logprobs, inputs.old_logprobs, inputs.mask)


def logprob_bits(*dtypes: torch.dtype) -> int | None:
    """Significant bits (the implicit leading one included) of the coarsest floating dtype of
    ``dtypes``: bfloat16 8, float16 11, float32 24, float64 53; None when one is not floating."""
    if not all(d.is_floating_point for d in dtypes):
        return None
    return min(significant_bits(d) for d in dtypes)


def _distributed_summary(inputs: StepInputs, seq_K_B, dtype, world) -> dict[str, torch.Tensor]:
    """The step summary on the device, reduced over ranks: ``sums`` (all-reduced with SUM),
    ``mins`` (MIN, maxima negated) and every rank's ``lengths`` (all-gathered for the exact p90,
    each padded with -1 to the largest B), so every step scalar is the concatenated batch's."""
    device = seq_K_B.device
    B = seq_K_B.shape[1]
    counts = torch.tensor(
        [
            1.0,
            B,
            inputs.num_prompts,
            B if inputs.truncated is not None else 0,
            float(inputs.loss is not None),
        ],
        dtype=dtype,
        device=device,
    )
    zero_var = zero_variance_counts(inputs.rewards, torch)
    loss = torch.zeros(1, dtype=dtype, device=device) if inputs.loss is None else inputs.loss
    seq64_K_B = seq_K_B.to(dtype)
    zero_var = zero_var.to(device=device, dtype=dtype)
    stats = _token_stats(inputs).to(dtype)
    sums, mins = summarize(seq64_K_B, counts, zero_var, loss, stats, torch)
    sums, mins, lengths = _step_collectives(sums, mins, seq64_K_B[SEQ_ROW[Seq.LENGTH]], world)
    return {"sums": sums, "mins": mins, "lengths": lengths}


def _token_sample(inputs: StepInputs, advantages, seq_K_B, idx: list[int], k: int, dtype):
    """The token sample's rows, chosen on the device (no host sync): the ``k`` largest scores
    of each culprit reason (``culprit_scores``), then the baseline ``idx``. Returns
    ``token_rows`` (n,) and the rows' ``TOKEN_PARTS``, (n, T) each, in ``dtype``."""
    T = inputs.logprobs.shape[1]
    device = inputs.logprobs.device
    culprits_R_k = culprit_scores(seq_K_B, torch).topk(k, dim=1).indices  # (reasons, k)
    sel = torch.cat([culprits_R_k.flatten(), _baseline(tuple(idx), device)])
    m_N_T = inputs.mask[sel] != 0
    d_N_T = torch.where(
        m_N_T, inputs.logprobs.detach()[sel] - inputs.old_logprobs.detach()[sel], 0.0
    )
    adv = advantages.detach()
    adv_N_T = adv[sel][:, None].expand(-1, T) if adv.dim() == 1 else adv[sel]
    parts = dict(
        zip(TOKEN_PARTS, (d_N_T.to(dtype), adv_N_T.to(dtype), m_N_T.to(dtype)), strict=True)
    )
    return {"token_rows": sel.to(dtype), **parts}


@functools.lru_cache(maxsize=16)
def _baseline(idx: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """The baseline's sequence indices as a tensor on ``device`` (built once per batch size)."""
    return torch.tensor(idx, dtype=torch.int64, device=device)


def _to_host(parts: Mapping[str, torch.Tensor], dtype, device) -> tuple[torch.Tensor, Any, Layout]:
    """Pack ``parts`` into one buffer (float64 is exact for every part) and start its one
    device-to-host copy: ``(host buffer, CUDA event to wait on or None, layout)``."""
    flat, layout = pack(parts, dtype, device)
    if device.type == "cuda":  # non-blocking, into pinned memory
        host = torch.empty(flat.shape, dtype=dtype, pin_memory=True)
        host.copy_(flat, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        return host, event, layout
    return flat.to("cpu"), None, layout  # (a no-op view on CPU)


# ----------------------------------------------------------------------------- the entry point


@dataclass(frozen=True, eq=False, kw_only=True)
class DiagnosticsArgs(StepArgs):
    """``step_diagnostics``' arguments: ``log_step``'s (``StepArgs``; every one a keyword here,
    ``step`` 0 by default) and the recorder settings the reduction reads."""

    step: int = field(default=0, metadata={DOC: "the step (a step-table key), an int >= 0"})
    seq_eps: tuple[float, float] = field(
        default=DEFAULT_SEQ_EPS, metadata={DOC: "(eps_low, eps_high) of the sequence unit"}
    )
    token_eps: tuple[float, float] = field(
        default=DEFAULT_TOKEN_EPS, metadata={DOC: "(eps_low, eps_high) of the token unit"}
    )
    algorithm: str = field(default="", metadata={DOC: "the run's algorithm label"})
    distributed: bool | None = field(
        default=False,
        metadata={DOC: "None: reduce the step scalars over an initialised process group"},
    )


@takes_fields_of(DiagnosticsArgs)
def step_diagnostics(args: DiagnosticsArgs):
    """The recorder's numbers without a recorder: ``(step_row, sequences)``.

    ``step_row`` is the step-table row (``Step.*`` column -> float/int, plus ``extra`` keys);
    ``sequences`` a pandas DataFrame with one row per sequence (``Seq.*`` columns). Same
    arguments (``DiagnosticsArgs``: ``log_step``'s, listed below) and code path as
    ``RunRecorder.log_step``; with ``distributed=None`` the step scalars are reduced over an
    initialised ``torch.distributed`` group.
    """
    import pandas as pd

    inputs = StepInputs.check(args)
    how = Reduction(
        args.seq_eps, args.token_eps, distributed=args.distributed, algorithm=args.algorithm
    )
    rec = reduce_step(inputs, how).materialize()
    rec_row, rec_seq = rec.materialized()
    row = {k: v for k, v in rec_row.items() if k not in (Step.RUN_ID, Step.ALGORITHM)}
    seq = {k: v for k, v in rec_seq.items() if v is not None}
    return row, pd.DataFrame(seq)
