"""One optimizer step's inputs: ``StepArgs`` as given, ``StepInputs`` checked once.

``StepArgs`` declares ``RunRecorder.log_step``'s arguments once (name, type, default, shape and
meaning); ``log_step`` and ``step_diagnostics`` take their signatures from it
(``params.takes_params_of``), ``StepInputs.check`` checks one, and
``training_hooks.compute.reduce_step`` reduces the result. Adding a step input is one field in
``StepArgs``, its checked form in ``StepInputs`` and ``check``, and its use in the reduction.

Axes: P prompts, G completions per prompt, B = P*G sequences (group by group), T token positions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np
import torch

from gspo_metrics.checks import check_float, check_tensor

from .params import DOC
from .schema import validate_extra_key


def buffer_dtype(device: torch.device) -> torch.dtype:
    """The dtype of a step's packed buffer on ``device``: float64 (exact for every part; MPS
    has none, so float32 there)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _arg(doc: str) -> dict[str, str]:
    return {DOC: doc}


@dataclass(frozen=True, eq=False)
class StepArgs:
    """``RunRecorder.log_step``'s arguments as the caller gave them, unchecked: the one
    declaration of them (each field's metadata says its shape and meaning; ``log_step``'s
    docstring lists them). B = P*G sequences, T token positions."""

    step: int = field(metadata=_arg("the optimizer step: an int >= 0, above the last logged"))
    _: KW_ONLY
    rewards: torch.Tensor = field(
        metadata=_arg("(P, G) rewards, the sequences ordered group by group (B = P*G)")
    )
    logprobs: torch.Tensor = field(metadata=_arg("(B, T) log pi_theta of the sampled tokens"))
    old_logprobs: torch.Tensor = field(metadata=_arg("(B, T) log pi_old of the same tokens"))
    mask: torch.Tensor = field(metadata=_arg("(B, T) any dtype, nonzero marks a token"))
    advantages: torch.Tensor | None = field(
        default=None, metadata=_arg("(B,) or (B, T); default ``group_advantages(rewards)``")
    )
    ref_logprobs: torch.Tensor | None = field(
        default=None, metadata=_arg("(B, T) log pi_ref, for the KL to the reference policy")
    )
    loss: Any = field(
        default=None, metadata=_arg("the step's ``LossOutput`` (its attenuation too) or scalar")
    )
    entropy: torch.Tensor | None = field(
        default=None, metadata=_arg("(B, T) per-token entropy of pi_theta")
    )
    truncated: torch.Tensor | None = field(
        default=None, metadata=_arg("(B,) bool: the sequence hit the length limit")
    )
    extra: Mapping[str, Any] | None = field(
        default=None, metadata=_arg("name -> scalar (number or one-element tensor)")
    )
    completions: Sequence[str | None] | None = field(
        default=None, metadata=_arg("B strings: the model's output only")
    )
    rollout: int | None = field(
        default=None, metadata=_arg("int >= 0: the batch of samples this step trains on")
    )
    policy_lag: int | None = field(
        default=None,
        metadata=_arg(
            "int >= 0: optimizer steps since the policy that produced ``old_logprobs`` "
            "(0: on-policy; a second minibatch or epoch on one batch: 1, 2, ...)"
        ),
    )
    sampler_logprobs: torch.Tensor | None = field(
        default=None,
        metadata=_arg(
            "(B, T) the log-probs the inference engine (vLLM, SGLang) reported when it sampled"
        ),
    )
    prompts: Sequence[str | None] | None = field(
        default=None, metadata=_arg("P strings: a group's prompt, stored apart")
    )
    token_texts: Sequence[Sequence[str] | None] | None = field(
        default=None, metadata=_arg("B rows of T decoded tokens (one per position), or None")
    )


@dataclass(frozen=True, eq=False)
class StepInputs:
    """One step's inputs, checked (``check``): the step-level arguments here, the token-level
    ones by the diagnostics. The fields are ``StepArgs``' (shapes and meanings declared there);
    a field's docstring says what ``check`` made of it."""

    step: int
    rewards: torch.Tensor
    """(P, G) floating (0/1 or integer scores as float32)."""
    logprobs: torch.Tensor
    old_logprobs: torch.Tensor
    mask: torch.Tensor
    advantages: torch.Tensor | None = None
    """None: ``group_advantages(rewards)``, worked out by the reduction."""
    ref_logprobs: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    sampler_logprobs: torch.Tensor | None = None
    rollout: int | None = None
    policy_lag: int | None = None
    truncated: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    """(1,) the step's loss, detached, on ``logprobs``' device in ``buffer_dtype``."""
    attenuation: torch.Tensor | None = None
    """(B,) the loss's ``per_sequence["attenuation"]``, detached, when ``loss`` is a
    ``LossOutput`` that has it (None: unknown, NaN in the tables)."""
    extra: Mapping[str, float] = field(default_factory=dict)
    """The caller's scalar extras given as numbers (None as NaN)."""
    tensor_extra: Mapping[str, torch.Tensor] = field(default_factory=dict)
    """The caller's extras given as one-element tensors, detached, 0-d (they ride the transfer)."""
    # untrusted text, all three
    completions: list[str | None] | None = None
    prompts: list[str | None] | None = None
    token_texts: list[Sequence[str] | None] | None = None
    wall_time: float = 0.0
    """When the step was logged (seconds since the epoch)."""

    @property
    def num_prompts(self) -> int:  # P
        return self.rewards.shape[0]

    @property
    def group_size(self) -> int:  # G
        return self.rewards.shape[1]

    @classmethod
    def check(
        cls, args: StepArgs, *, group_size: int | None = None, wall_time: float | None = None
    ) -> StepInputs:
        """The checked inputs of one ``log_step`` call: ValueError naming the argument (and its
        shape) for a bad step, rewards, truncated, extra, completions, prompts, token_texts,
        rollout, policy_lag or loss, or rewards whose G is not the run's ``group_size``.
        ``wall_time``: default now."""
        wall_time = time.time() if wall_time is None else wall_time
        step = _check_int(args.step, "step")  # (checked in this order: the first error raises)
        rollout = _check_count(args.rollout, "rollout")
        policy_lag = _check_count(args.policy_lag, "policy_lag")
        logprobs = check_tensor(args.logprobs, "logprobs", 2, "(B, T)")
        B = logprobs.shape[0]
        rewards_P_G = _check_rewards(args.rewards, B, group_size)
        truncated = None if args.truncated is None else _check_truncated(args.truncated, B)
        host_extra, tensor_extra = _check_extra(args.extra)
        completions = _check_texts(args.completions, B, "completions", "B")
        prompts = _check_texts(args.prompts, rewards_P_G.shape[0], "prompts", "P")
        token_texts = _check_token_texts(args.token_texts, B, logprobs.shape[1])
        return cls(
            step=step,
            rewards=rewards_P_G,
            logprobs=logprobs,
            old_logprobs=args.old_logprobs,
            mask=args.mask,
            advantages=args.advantages,
            ref_logprobs=args.ref_logprobs,
            entropy=args.entropy,
            sampler_logprobs=args.sampler_logprobs,
            rollout=rollout,
            policy_lag=policy_lag,
            truncated=truncated,
            loss=_loss_tensor(args.loss, logprobs.device),
            attenuation=_loss_attenuation(args.loss, B),
            extra=host_extra,
            tensor_extra=tensor_extra,
            completions=completions,
            prompts=prompts,
            token_texts=token_texts,
            wall_time=wall_time,
        )


def _check_count(value: object, name: str) -> int | None:
    """An optional non-negative int (``rollout``, ``policy_lag``) as int; None stays None: not
    said, a null in the step table."""
    return None if value is None else _check_int(value, name)


def _check_int(value: object, name: str) -> int:
    """A non-negative int (``step``, or a given ``rollout``/``policy_lag``) as int."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return int(value)


def _check_rewards(rewards: object, B: int, group_size: int | None) -> torch.Tensor:
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
    if group_size is not None and G != group_size:
        raise ValueError(f"rewards has shape {(P, G)} but the run's group_size is {group_size}")
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


def _check_texts(texts: object, n: int, name: str, axis: str) -> list[str | None] | None:
    """``texts`` (completions: B, prompts: P) as a list of str or None, or ValueError."""
    if texts is None:
        return None
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise ValueError(f"{name} must be a list of {axis} = {n} strings")
    if len(texts) != n:
        raise ValueError(f"{name} has {len(texts)} entries but there are {axis} = {n}")
    out = list(texts)
    if not all(c is None or type(c) is str for c in out):
        for i, c in enumerate(out):
            if c is not None and not isinstance(c, str):
                raise ValueError(f"{name}[{i}] must be a str or None, got {type(c).__name__}")
    return out


def _check_token_texts(rows: object, B: int, T: int) -> list[Sequence[str] | None] | None:
    """B rows, each None or T strings (one per position of ``logprobs``). Only the rows' lengths
    are checked here (B x T strings would cost the step); a row is read when it is sampled."""
    if rows is None:
        return None
    if isinstance(rows, str) or not isinstance(rows, Sequence) or len(rows) != B:
        raise ValueError(f"token_texts must be a list of B = {B} rows of T = {T} strings")
    out = list(rows)
    for i, row in enumerate(out):
        if row is not None and (isinstance(row, str) or not isinstance(row, Sequence)):
            raise ValueError(f"token_texts[{i}] must be a list of T = {T} strings or None")
        if row is not None and len(row) != T:
            raise ValueError(f"token_texts[{i}] has {len(row)} entries but there are T = {T}")
    return out


def _loss_attenuation(loss: object, B: int) -> torch.Tensor | None:
    """The (B,) ``per_sequence["attenuation"]`` of a ``LossOutput`` (detached), None when
    ``loss`` has none (a scalar loss, a loss output without it); ValueError for a bad shape."""
    per_sequence = getattr(loss, "per_sequence", None)
    if not isinstance(per_sequence, Mapping) or "attenuation" not in per_sequence:
        return None
    name = "loss.per_sequence['attenuation']"
    att = check_tensor(per_sequence["attenuation"], name, 1, "(B,)", floating=True)
    if att.shape[0] != B:
        raise ValueError(f"{name} has shape {tuple(att.shape)} but there are B = {B} sequences")
    return att.detach()


def _loss_tensor(loss: object, device: torch.device) -> torch.Tensor | None:
    """A LossOutput (or anything with ``.loss``), a scalar tensor or a number, as (1,)."""
    if loss is None:
        return None
    value = getattr(loss, "loss", loss)
    dtype = buffer_dtype(device)
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"loss must be a scalar, got a tensor of shape {tuple(value.shape)}")
        return value.detach().reshape(1).to(device=device, dtype=dtype)
    if isinstance(value, int | float | np.integer | np.floating):
        return torch.tensor([float(value)], device=device, dtype=dtype)
    raise ValueError(
        f"loss must be a LossOutput, a scalar tensor or a number, got {type(loss).__name__}"
    )
