"""Tinker's custom-loss shape for GSPO-token: ``loss_fn(data, logprobs_list) -> (loss, metrics)``.

Matches Tinker's built-in ``gspo`` loss datum by datum:

    log s   = mean over sequence_ratio_mask of (sg[target_logprobs] - logprobs)
    rho_t   = exp(log s + target_logprobs - sg[target_logprobs])
    loss    = -sum_t min(rho_t * A_t, clamp(rho_t, clip_low_threshold, clip_high_threshold) * A_t)

The loss is summed over *all* of a datum's N tokens (tokens outside the ratio mask normally have
A_t = 0), and then over datums. Ragged lengths are padded internally; padding never enters a result.
This adapter is the one place in gspo_metrics that transfers to the host (metrics are floats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .losses_core import clip_terms, gspo_token_log_ratio
from .masked import masked_fill_zero, masked_mean
from .spec import GSPO_EPS

INPUT_KEYS = ("target_tokens", "logprobs", "advantages", "sequence_ratio_mask")


def _inputs(datum: Any, i: int) -> Mapping[str, Any]:
    inputs = datum.get("loss_fn_inputs") if isinstance(datum, Mapping) else None
    if inputs is None:
        inputs = getattr(datum, "loss_fn_inputs", None)
    if inputs is None or not isinstance(inputs, Mapping):
        raise ValueError(f"data[{i}] has no loss_fn_inputs mapping")
    missing = [k for k in INPUT_KEYS if k not in inputs]
    if missing:
        raise ValueError(f"data[{i}].loss_fn_inputs lacks {missing}; needs {list(INPUT_KEYS)}")
    return inputs


def _as_1d(value: Any, name: str, n: int | None, device, dtype) -> torch.Tensor:
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray | torch.Tensor):
        value = value.to_numpy()  # Tinker TensorData
    if hasattr(value, "tolist") and not isinstance(value, np.ndarray | torch.Tensor):
        value = value.tolist()
    t = torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value)
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D (N,), got shape {tuple(t.shape)}")
    if n is not None and t.shape[0] != n:
        raise ValueError(f"{name} has shape {tuple(t.shape)} but target_tokens has ({n},)")
    return t.to(device=device, dtype=dtype)


def _length(value: Any, name: str) -> int:
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray | torch.Tensor):
        value = value.to_numpy()  # Tinker TensorData
    shape = getattr(value, "shape", None)
    if shape is None:
        shape = np.shape(value)
    if len(shape) != 1:
        raise ValueError(f"{name} must be 1-D (N,), got shape {tuple(shape)}")
    return int(shape[0])


def gspo_loss_fn(
    data: Sequence[Any],
    logprobs_list: Sequence[torch.Tensor],
    *,
    clip_low_threshold: float = 1 - GSPO_EPS[0],
    clip_high_threshold: float = 1 + GSPO_EPS[1],
) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO-token over a list of Tinker datums.

    Args:
        data: datums whose ``loss_fn_inputs`` (attribute or key) hold ``target_tokens``,
            ``logprobs`` (the sampler's, q), ``advantages`` and ``sequence_ratio_mask``, each (N_i,)
            as numpy arrays, torch tensors or lists.
        logprobs_list: the model's (N_i,) log-probs of the targets, with grad.
        clip_low_threshold, clip_high_threshold: the clip range on the sequence ratio s.

    Returns:
        ``(loss, metrics)``: the summed loss with grad, and floats ``loss:sum``,
        ``gspo_sequence_log_ratio:mean`` (mean over datums of log s) and
        ``gspo_clipped_fraction:mean`` (fraction of datums whose s is outside the thresholds).
    """
    if len(data) == 0:
        raise ValueError("data is empty: gspo_loss_fn needs at least one datum")
    if len(logprobs_list) != len(data):
        raise ValueError(
            f"logprobs_list has {len(logprobs_list)} entries but data has {len(data)} datums"
        )
    if not 0.0 < clip_low_threshold <= 1.0 <= clip_high_threshold:
        raise ValueError(
            "need 0 < clip_low_threshold <= 1 <= clip_high_threshold, got "
            f"clip_low_threshold={clip_low_threshold!r}, clip_high_threshold={clip_high_threshold!r}"
        )
    rows = [
        _datum_row(datum, lp, i)
        for i, (datum, lp) in enumerate(zip(data, logprobs_list, strict=True))
    ]
    lengths = [r[0].shape[0] for r in rows]
    T = max(lengths)
    dev, dtype = rows[0][0].device, rows[0][0].dtype
    pad = torch.nn.utils.rnn.pad_sequence
    lp_B_T = pad([r[0] for r in rows], batch_first=True)  # (B, T), keeps grad
    q_B_T = pad([r[1] for r in rows], batch_first=True)
    adv_B_T = pad([r[2] for r in rows], batch_first=True)
    ratio_mask_B_T = pad([r[3] for r in rows], batch_first=True, padding_value=False)
    valid_B_T = torch.arange(T, device=dev)[None, :] < torch.tensor(lengths, device=dev)[:, None]

    # log s = mean over the ratio mask of sg[log pi_theta] - log q                  (B,)
    log_s_B = masked_mean(lp_B_T.detach() - q_B_T, ratio_mask_B_T, -1)
    # log rho_t = sg[log s] + log pi_theta(y_t) - sg[log pi_theta(y_t)] over the datum's N tokens
    log_rho_B_T = gspo_token_log_ratio(log_s_B, lp_B_T, valid_B_T)
    # adv and log rho are 0 outside the datum's N tokens: padding adds exactly 0
    adv_B_T = masked_fill_zero(adv_B_T, valid_B_T)
    eps = (1.0 - clip_low_threshold, clip_high_threshold - 1.0)
    loss = clip_terms(torch.exp(log_rho_B_T), adv_B_T, *eps)[0].sum()
    s_B = torch.exp(log_s_B)
    clipped_B = (s_B < clip_low_threshold) | (s_B > clip_high_threshold)
    stats = torch.stack([loss.detach(), log_s_B.mean(), clipped_B.to(dtype).mean()]).tolist()
    return loss, {
        "loss:sum": stats[0],
        "gspo_sequence_log_ratio:mean": stats[1],
        "gspo_clipped_fraction:mean": stats[2],
    }


def _datum_row(datum: Any, lp: Any, i: int) -> tuple[torch.Tensor, ...]:
    """Datum i's checked (N,) tensors: (log pi_theta, the sampler's log q, advantages, the
    ratio mask as bool), on ``lp``'s device and dtype."""
    inputs = _inputs(datum, i)
    if not isinstance(lp, torch.Tensor) or lp.dim() != 1:
        shape = tuple(lp.shape) if isinstance(lp, torch.Tensor) else type(lp).__name__
        raise ValueError(f"logprobs_list[{i}] must be a 1-D tensor (N,), got {shape}")
    n = _length(inputs["target_tokens"], f"data[{i}] target_tokens")
    if lp.shape[0] != n:
        raise ValueError(
            f"logprobs_list[{i}] has shape {tuple(lp.shape)} but target_tokens has ({n},)"
        )

    def row(key: str) -> torch.Tensor:
        return _as_1d(inputs[key], f"data[{i}] {key}", n=n, device=lp.device, dtype=lp.dtype)

    q = row("logprobs")
    adv = row("advantages")
    ratio_mask = row("sequence_ratio_mask") != 0
    if not bool(ratio_mask.any()):
        raise ValueError(
            f"data[{i}] sequence_ratio_mask marks no token: it must mark at least one token"
        )
    return lp, q, adv, ratio_mask
