"""Policy-gradient losses: one registry, one signature, explicit reductions, one attenuation measure.

Notation: B sequences, T token positions, ``mask`` (B, T) marks the tokens the ratio and the loss are
taken over (M_b the marked tokens of row b, |M_b| their number), ``A`` the advantages ((B,) broadcast
over tokens, or (B, T) per token), ``sg[x]`` a stop-gradient, and

    log r_t = log pi_theta(y_t) - log pi_old(y_t)        the token log-ratio
    log s_b = mean_{t in M_b} log r_t                    the sequence log-ratio (GSPO)
    clip(x) = clamp(x, 1 - eps_low, 1 + eps_high)

Every registered loss is ``fn(logprobs, old_logprobs, advantages, mask, **params) -> LossOutput``;
its parameters, equation and paper are in its docstring, and ``LOSS_INFO`` says what kind of trust
region it has. The registry holds every loss once ``gspo_metrics.losses`` (the API) has imported
the families, each of which registers its own from this module's building blocks:

- here: PPO's clipped surrogate ``l_t = -min(rho_t A_t, clip(rho_t) A_t)``, at the token level
  (``grpo``) and in GSPO-token's form (``gspo``);
- ``losses_clip``: the same clip with other normalisers and defaults (``dapo``, ``bnpo``,
  ``dr_grpo``, ``luspo``) and GMPO's clip of the geometric mean (``gmpo``);
- ``losses_weight``: a stop-gradient weight times log pi (``cispo``, ``vespo``, ``dppo_tv``,
  ``dppo_kl``, ``gpg``);
- ``losses_soft``: a soft gate or a penalty instead of a clip (``sapo``, ``dro``, ``kl_cov``).

GRPO (Shao et al., 2024; PPO's token clip):  rho_t = r_t = exp(log r_t)

GSPO-token (Zheng et al., 2025, sec. 4.3; exactly Tinker's ``gspo`` loss, verl's ``gspo``):
    rho_t   = sg[s] * pi_theta(y_t) / sg[pi_theta(y_t)]      (value s, gradient of its own token)
so every token carries the sequence ratio's value and clip decision, and d l_t / d log pi_theta(y_t)
= -s * A_t where the clip does not bind. Defaults follow the paper and Tinker: eps 3e-4 / 4e-4.

Ratio level (``level``, TRL's ``importance_sampling_level``), for the losses that take it:
    "token"     rho_t = r_t
    "sequence"  rho_t = s_b, differentiated through every token of the sequence (TRL's GSPO:
                d s_b / d log pi_theta(y_t) = s_b / |M_b|). With one advantage per sequence this
                gives GSPO-token's loss and gradient; with per-token advantages it does not.

Reductions (the loss's implicit length weighting; ``REDUCTIONS`` and ``SUM_REDUCTIONS``):
    "sum"                     sum_{b,t in M} l_bt                  Tinker's ``loss:sum``; verl "token-sum"
    "token_mean"              sum_{b,t in M} l_bt / sum_b |M_b|    DAPO, BNPO; verl "token-mean"
    "seq_mean_token_mean"     mean_b (sum_{t in M_b} l_bt / |M_b|) the GSPO paper, TRL's grpo
    "seq_mean_token_sum"      mean_b sum_{t in M_b} l_bt           LUSPO; verl "seq-mean-token-sum"
    "seq_mean_token_sum_norm" mean_b sum_{t in M_b} l_bt / L       Dr. GRPO's constant normaliser
                              (``norm_length=L``: TRL's max_completion_length, verl's loss_scale_factor)

Per-sequence diagnostics (detached, (B,)), in ``LossOutput.per_sequence``:
    log_ratio     log s_b (the sequence log-ratio, for every loss as a comparison point)
    length        |M_b|, the number of masked tokens
    attenuation   the share of the plain importance-weighted policy gradient that the loss's trust
                  region removed from the sequence (below); every loss
and, for the losses with a hard clip on the ratio (``LossInfo.hard_clip``), in the loss's own unit:
    out_of_range  fraction of the sequence's tokens whose rho lies outside the clip range, whatever
                  A's sign (GSPO: 0 or 1 = Tinker's clipped fraction)
    clip_low      fraction of tokens with rho < 1 - eps_low and A < 0  (the clip zeroes the gradient)
    clip_high     fraction of tokens with rho > 1 + eps_high and A > 0 (TRL's clip_ratio/high)

Attenuation, one measure for every loss:

    attenuation_b = 1 - sum_{t in M_b} |d l^sum / d log pi_theta(y_bt)| / sum_{t in M_b} |rho_bt A_bt|

with l^sum the loss under the "sum" reduction and rho the plain ratio of the loss's level (r_t, or
s_b; verl's numerical clamps of log r are not applied to it). Every reduction multiplies all of a
sequence's tokens by one positive constant (1 / sum_b |M_b|, 1 / (B |M_b|), ...), so against the
plain gradient reduced the same way the share is the same under every reduction, and each loss
returns it whatever reduction it is given. Each computes it in closed form from its own equation
(no autograd inside a loss; the tests hold it to autograd).
It is NaN where the sequence has no plain gradient (A = 0 on all its tokens): unknown, not 0. It lies
in [0, 1] where the trust region only removes weight: a hard clip (the share of |rho A| on the
binding tokens), CISPO's cap, SAPO's gate, DPPO's mask. A loss that can also add weight leaves that
range below 0 (``LossInfo.bounded`` is False; its docstring says how).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple, TypeVar

import torch

from .checks import (
    check_choice,
    check_eps,
    check_number,
    check_same_shape,
    check_tensor,
)
from .masked import masked_fill_zero
from .ratios import check_token_inputs
from .spec import GRPO_EPS, GSPO_EPS, LOSS_INFO, LossInfo  # noqa: F401 (re-exported)

REDUCTIONS = ("sum", "token_mean", "seq_mean_token_mean")
#: The reductions that sum each sequence's tokens and average over sequences (LUSPO, Dr. GRPO).
SUM_REDUCTIONS = ("seq_mean_token_sum", "seq_mean_token_sum_norm")
#: Every reduction a registered loss accepts.
ALL_REDUCTIONS = REDUCTIONS + SUM_REDUCTIONS
LEVELS = ("token", "sequence")


class LossOutput(NamedTuple):
    """What every registered loss returns."""

    loss: torch.Tensor
    """() scalar with grad, reduced as asked."""
    per_sequence: Mapping[str, torch.Tensor]
    """Detached (B,) tensors: log_ratio, length, attenuation for every loss; out_of_range,
    clip_low, clip_high for the losses with a hard clip; see each loss for any other."""


LossFn = Callable[..., LossOutput]
F = TypeVar("F", bound=LossFn)

LOSSES: dict[str, LossFn] = {}


def register_loss(name: str) -> Callable[[F], F]:
    """Decorator adding a loss to ``LOSSES`` under ``name``, a loss declared in
    ``gspo_metrics.spec.LOSS_INFO`` (what kind of trust region it has, read torch-free)."""

    def wrap(fn: F) -> F:
        if name in LOSSES:
            raise ValueError(f"a loss named {name!r} is already registered")
        if name not in LOSS_INFO:
            raise ValueError(f"declare loss {name!r} in gspo_metrics.spec.LOSS_INFO first")
        LOSSES[name] = fn
        return fn

    return wrap


def get_loss(name: str) -> LossFn:
    """The registered loss called ``name``; an unknown name raises ValueError listing the valid ones."""
    try:
        return LOSSES[name]
    except KeyError:
        raise ValueError(
            f"unknown loss {name!r}; valid: {', '.join(repr(k) for k in sorted(LOSSES))}"
        ) from None


def check_advantages(advantages: torch.Tensor, logprobs: torch.Tensor) -> None:
    check_tensor(advantages, "advantages", (1, 2), "(B,) or (B, T)", floating=True)
    B, T = logprobs.shape
    if advantages.dim() == 1 and advantages.shape[0] != B:
        raise ValueError(
            f"advantages has shape {tuple(advantages.shape)} but logprobs has shape {(B, T)}; "
            f"per-sequence advantages must be ({B},)"
        )
    if advantages.dim() == 2:
        check_same_shape(logprobs, "logprobs", advantages=advantages)


def check_reduction(reduction: str, norm_length: float | None) -> None:
    """A reduction of ``ALL_REDUCTIONS``, with ``norm_length`` given exactly when it uses one."""
    check_choice(reduction, "reduction", ALL_REDUCTIONS)
    if reduction == "seq_mean_token_sum_norm":
        if norm_length is None:
            raise ValueError(
                "reduction 'seq_mean_token_sum_norm' divides by a constant length: pass "
                "norm_length (TRL's max_completion_length, verl's loss_scale_factor)"
            )
        check_number(norm_length, "norm_length", above=0.0)
    elif norm_length is not None:
        raise ValueError(
            f"norm_length is used by reduction 'seq_mean_token_sum_norm' only, got "
            f"norm_length={norm_length!r} with reduction {reduction!r}"
        )


def check_log_ratio_clamp(bounds: tuple[float, float] | None) -> None:
    """None, or (low, high) with low <= 0 <= high (the on-policy ratio 1 stays unclamped)."""
    if bounds is None:
        return
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise ValueError(f"log_ratio_clamp must be None or a pair (low, high), got {bounds!r}")
    low, high = bounds
    for name, v in (("log_ratio_clamp[0]", low), ("log_ratio_clamp[1]", high)):
        if not isinstance(v, int | float) or math.isnan(v):
            raise ValueError(f"{name} must be a number, got {v!r}")
    if not low <= 0.0 <= high:
        raise ValueError(f"log_ratio_clamp must have low <= 0 <= high, got {bounds!r}")


class Batch(NamedTuple):
    """A loss's checked inputs and reduction; every (B, T) tensor is exactly 0 outside the mask."""

    mask_B_T: torch.Tensor  # (B, T) bool
    count_B: torch.Tensor  # (B,) integer |M_b| >= 1
    n_B: torch.Tensor  # (B,) |M_b| in the inputs' dtype
    lp_B_T: torch.Tensor  # (B, T) log pi_theta, with grad
    old_B_T: torch.Tensor  # (B, T) log pi_old
    adv_B_T: torch.Tensor  # (B, T) advantages, broadcast if (B,)
    reduction: str
    norm_length: float | None

    @property
    def log_r_B_T(self) -> torch.Tensor:
        """(B, T) log r_t with grad, 0 on padding."""
        return self.lp_B_T - self.old_B_T

    @property
    def log_s_B(self) -> torch.Tensor:
        """(B,) log s_b, detached."""
        return (self.lp_B_T.detach() - self.old_B_T).sum(-1) / self.n_B

    def reduce(self, loss_B_T: torch.Tensor) -> torch.Tensor:
        """A per-token loss replaced by 0 on padding, then reduced by the batch's reduction (the
        module docstring)."""
        loss_B_T = masked_fill_zero(loss_B_T, self.mask_B_T)
        if self.reduction == "sum":
            return loss_B_T.sum()
        if self.reduction == "token_mean":
            return loss_B_T.sum() / self.count_B.sum().to(loss_B_T.dtype)
        if self.reduction == "seq_mean_token_mean":
            return (loss_B_T.sum(-1) / self.count_B.to(loss_B_T.dtype)).mean()
        seq_sum = loss_B_T.sum(-1).mean()
        if self.reduction == "seq_mean_token_sum":
            return seq_sum
        assert self.norm_length is not None  # (prepare_batch checked the reduction)
        return seq_sum / self.norm_length

    def fraction(self, flag_B_T: torch.Tensor) -> torch.Tensor:
        """(B,) the share of each sequence's tokens where ``flag_bt`` holds (padding never counts)."""
        return (flag_B_T.expand_as(self.mask_B_T) & self.mask_B_T).sum(-1) / self.n_B

    def ratio(
        self, level: str, bounds: tuple[float, float] | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | float]:
        """log rho with grad, (B, T) log r_t ("token") or (B, 1) log s_b ("sequence"); rho = exp
        of it after verl's clamp to ``bounds``; the clamp's detached factor (``clamp_log_ratio``)."""
        log_rho = self.log_r_B_T
        if level == "sequence":
            log_rho = log_rho.sum(-1, keepdim=True) / self.n_B[:, None]
        log_rho_c, passes = clamp_log_ratio(log_rho, bounds)
        return log_rho, torch.exp(log_rho_c), passes


def prepare_batch(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    reduction: str,
    norm_length: float | None = None,
    level: str = "token",
    log_ratio_clamp: tuple[float, float] | None = None,
) -> Batch:
    """Check a loss's inputs, ratio level, clamp and reduction; padding replaced by 0
    (``torch.where``, so NaN or inf under the mask reaches no value and no gradient)."""
    check_choice(level, "level", LEVELS)
    check_log_ratio_clamp(log_ratio_clamp)
    check_reduction(reduction, norm_length)
    mask_B_T, count_B = check_token_inputs(logprobs, old_logprobs, mask)
    check_advantages(advantages, logprobs)
    adv = advantages.to(logprobs.dtype)
    adv_B_T = adv[:, None].expand_as(logprobs) if adv.dim() == 1 else adv
    return Batch(
        mask_B_T,
        count_B,
        count_B.to(logprobs.dtype),
        masked_fill_zero(logprobs, mask_B_T),
        masked_fill_zero(old_logprobs, mask_B_T),
        masked_fill_zero(adv_B_T, mask_B_T),
        reduction,
        norm_length,
    )


def clamp_log_ratio(
    log_rho: torch.Tensor, bounds: tuple[float, float] | None
) -> tuple[torch.Tensor, torch.Tensor | float]:
    """verl's numerical guard: log rho clamped to [low, high] (gradient 0 outside), and the
    detached factor d clamped / d log rho (1 where the clamp passes the gradient)."""
    if bounds is None:
        return log_rho, 1.0
    low, high = bounds
    clamped = torch.clamp(log_rho, low, high)
    x = log_rho.detach()
    return clamped, ((x >= low) & (x <= high)).to(x.dtype)


def to_logprobs(dl_dlog_rho: torch.Tensor, batch: Batch, level: str) -> torch.Tensor:
    """(B, T) d l^sum / d log pi_theta from each token's d l_t / d log rho_t (detached).

    Token level (and GSPO-token): log rho_t moves with its own token only. Sequence level: log s_b
    moves with every token of b by 1 / |M_b|, so each token gets sum_t (d l_t / d log s_b) / |M_b|.
    """
    if level == "token":
        return masked_fill_zero(dl_dlog_rho, batch.mask_B_T)
    per_token_B = masked_fill_zero(dl_dlog_rho, batch.mask_B_T).sum(-1) / batch.n_B
    return masked_fill_zero(per_token_B[:, None].expand_as(batch.lp_B_T), batch.mask_B_T)


def attenuation(grad_B_T: torch.Tensor, rho: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(B,) 1 - sum_t |grad_bt| / sum_t |rho_bt A_bt| (see the module docstring); NaN where the
    denominator is 0 (no plain gradient to attenuate). ``grad_bt`` is 0 on padding; ``rho`` is
    the plain ratio, (B, T) or (B, 1)."""
    kept_B = grad_B_T.abs().sum(-1)
    plain_B = masked_fill_zero(rho * batch.adv_B_T.abs(), batch.mask_B_T).sum(-1)
    nan = torch.full_like(plain_B, math.nan)
    return torch.where(plain_B > 0, 1.0 - kept_B / plain_B, nan)


def loss_output(
    loss: torch.Tensor,
    batch: Batch,
    grad_B_T: torch.Tensor,
    rho: torch.Tensor,
    stats: Mapping[str, torch.Tensor] | None = None,
    extra: Mapping[str, torch.Tensor] | None = None,
) -> LossOutput:
    """``loss`` with the per-sequence diagnostics every loss records: log s_b, the clip ``stats``,
    length, the attenuation of ``grad_bt`` against the plain ratio ``rho``, then ``extra``."""
    with torch.no_grad():
        per_sequence = {
            "log_ratio": batch.log_s_B,
            **(stats or {}),
            "length": batch.count_B,
            "attenuation": attenuation(grad_B_T, rho, batch),
            **(extra or {}),
        }
    return LossOutput(loss, per_sequence)


def scalar(value: float, like: torch.Tensor) -> torch.Tensor:
    """``value`` as a 0-d tensor of ``like``'s dtype and device, made in that dtype (a Python
    float given to ``torch.where`` would pass through float32 first)."""
    return torch.tensor(value, dtype=like.dtype, device=like.device)


def pick_min(
    v1: torch.Tensor, d1: torch.Tensor, v2: torch.Tensor, d2: torch.Tensor
) -> torch.Tensor:
    """The derivative of min(v1, v2) as torch differentiates it: the smaller branch's derivative,
    the mean of the two on a tie (as inside the clip range, where both branches are rho * A)."""
    return torch.where(v1 < v2, d1, torch.where(v2 < v1, d2, 0.5 * (d1 + d2)))


def clip_terms(
    rho: torch.Tensor,
    adv_B_T: torch.Tensor,
    eps_low: float,
    eps_high: float,
    delta: float | None = None,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's per-token loss and its detached derivative in rho, (B, T) each:

    l = -min(cap(rho) * A, clip(rho) * A),  cap(rho) = min(rho, delta)   (delta: TRL's two-sided
                                                                          clip, INTELLECT-2)
    where A < 0 and dual_clip = c:  l = min(l, -c * A)                    (verl's dual clip,
                                                                          Ye et al., 2020)

    Where ``log rho`` and ``A`` are 0 (padding), rho = 1 and l = 1 * 0 = 0 exactly.
    """
    clipped = torch.clamp(rho, 1.0 - eps_low, 1.0 + eps_high)
    capped = rho if delta is None else torch.clamp(rho, max=delta)
    v1, v2 = capped * adv_B_T, clipped * adv_B_T
    loss_B_T = -torch.minimum(v1, v2)
    with torch.no_grad():
        r = rho.detach()
        d1 = adv_B_T if delta is None else adv_B_T * (r <= delta)
        d2 = adv_B_T * ((r >= 1.0 - eps_low) & (r <= 1.0 + eps_high))
        dl_drho = -pick_min(v1.detach(), d1, v2.detach(), d2)
    if dual_clip is not None:
        floor_B_T = -dual_clip * adv_B_T  # verl's pg_losses3; constant in rho
        floored = torch.minimum(floor_B_T, loss_B_T)
        with torch.no_grad():
            d_floored = pick_min(floor_B_T, torch.zeros_like(r), loss_B_T.detach(), dl_drho)
            dl_drho = torch.where(adv_B_T < 0, d_floored, dl_drho)
        loss_B_T = torch.where(adv_B_T < 0, floored, loss_B_T)
    return loss_B_T, dl_drho


def clip_fractions(
    below_B_T: torch.Tensor, above_B_T: torch.Tensor, batch: Batch
) -> dict[str, torch.Tensor]:
    """Per-sequence token fractions of a clip range: out of range, binding low (below, A < 0),
    binding high (above, A > 0)."""
    return {
        "out_of_range": batch.fraction(below_B_T | above_B_T),
        "clip_low": batch.fraction(below_B_T & (batch.adv_B_T < 0)),
        "clip_high": batch.fraction(above_B_T & (batch.adv_B_T > 0)),
    }


def sequence_clip_stats(batch: Batch, eps_low: float, eps_high: float) -> dict[str, torch.Tensor]:
    """The same fractions when every token carries the sequence's ratio s (GSPO-token).

    A sequence is out of range as a whole (0 or 1); the clip binds on its tokens whose advantage
    pushes past the violated bound, which for per-sequence advantages is again 0 or 1.
    """
    s_B = torch.exp(batch.log_s_B)  # the exact value every token's rho takes
    below_B = s_B < 1.0 - eps_low
    above_B = s_B > 1.0 + eps_high
    zero = scalar(0.0, s_B)
    return {
        "out_of_range": (below_B | above_B).to(s_B.dtype),
        "clip_low": torch.where(below_B, batch.fraction(batch.adv_B_T < 0), zero),
        "clip_high": torch.where(above_B, batch.fraction(batch.adv_B_T > 0), zero),
    }


def gspo_token_log_ratio(
    log_s_B: torch.Tensor, lp_B_T: torch.Tensor, mask_B_T: torch.Tensor
) -> torch.Tensor:
    """(B, T) GSPO-token's log rho_t = sg[log s_b] + log pi_theta(y_t) - sg[log pi_theta(y_t)], 0
    off the mask: the value of log s_b, the gradient of the token's own log-prob."""
    lp_B_T = masked_fill_zero(lp_B_T, mask_B_T)
    return masked_fill_zero(log_s_B[:, None] + (lp_B_T - lp_B_T.detach()), mask_B_T)


@register_loss("gspo")
def gspo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = GSPO_EPS[0],
    eps_high: float = GSPO_EPS[1],
    reduction: str = "sum",
    log_ratio_clamp: tuple[float, float] | None = None,
    norm_length: float | None = None,
) -> LossOutput:
    """GSPO-token loss (Zheng et al., 2025, arXiv:2507.18071, sec. 4.3; Tinker's ``gspo``, verl's
    ``gspo``):

        log s_b = mean_{t in M_b} (sg[log pi_theta(y_t)] - log pi_old(y_t))
        rho_t   = sg[s_b] * pi_theta(y_t) / sg[pi_theta(y_t)]
        l_t     = -min(rho_t A_t, clip(rho_t) A_t)     d l_t / d log pi_theta(y_t) = -s_b A_t or 0

    Attenuation (rho = s_b) in [0, 1]: the share of |A| on the tokens where the clip binds.

    Args:
        logprobs: (B, T) log pi_theta of the sampled tokens, with grad.
        old_logprobs: (B, T) log pi_old of the same tokens (the sampler's), no grad needed.
        advantages: (B,) one per sequence, or (B, T) per token.
        mask: (B, T) nonzero on the tokens the sequence ratio and the loss are taken over; every
            row must mark at least one token.
        eps_low, eps_high: the clip range [1 - eps_low, 1 + eps_high] on the sequence ratio s.
        reduction: one of ``ALL_REDUCTIONS``.
        log_ratio_clamp: verl's numerical guard, (low, high) on log rho_t (verl's gspo: (-inf,
            10)): clamped in value, gradient 0 outside. None (Tinker, TRL, the paper): no clamp.
        norm_length: L of reduction "seq_mean_token_sum_norm" (only with it).
    """
    check_eps(eps_low, eps_high)
    batch = prepare_batch(
        logprobs, old_logprobs, advantages, mask, reduction, norm_length, "token", log_ratio_clamp
    )
    log_s_B = batch.log_s_B
    log_rho_B_T = gspo_token_log_ratio(log_s_B, batch.lp_B_T, batch.mask_B_T)
    log_rho_c, passes = clamp_log_ratio(log_rho_B_T, log_ratio_clamp)
    rho_B_T = torch.exp(log_rho_c)
    loss_B_T, dl_drho = clip_terms(rho_B_T, batch.adv_B_T, eps_low, eps_high)
    with torch.no_grad():
        stats = sequence_clip_stats(batch, eps_low, eps_high)
        # each token's log rho_t moves with its own log pi_theta(y_t) only: the token-level chain
        grad_B_T = to_logprobs(dl_drho * rho_B_T * passes, batch, "token")
    return loss_output(batch.reduce(loss_B_T), batch, grad_B_T, torch.exp(log_s_B)[:, None], stats)


@register_loss("grpo")
def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = GRPO_EPS[0],
    eps_high: float = GRPO_EPS[1],
    reduction: str = "sum",
    level: str = "token",
    delta: float | None = None,
    dual_clip: float | None = None,
    log_ratio_clamp: tuple[float, float] | None = None,
    norm_length: float | None = None,
) -> LossOutput:
    """GRPO's PPO-clipped surrogate (Shao et al., 2024, arXiv:2402.03300; PPO: Schulman et al.,
    2017): l_t = -min(rho_t A_t, clip(rho_t) A_t), rho_t = exp(log pi_theta(y_t) - log pi_old(y_t)).

    Same arguments as ``gspo_loss``; eps defaults to PPO's 0.2 on both sides. No KL penalty term:
    add ``beta * kl_estimate(...)`` yourself if your recipe has one. Also:

    Args:
        level: "token" (rho_t = r_t), or "sequence" (rho_t = s_b with its gradient through every
            token: TRL's GSPO, ``importance_sampling_level="sequence"``).
        delta: TRL's two-sided clip (INTELLECT-2, arXiv:2505.07291): the unclipped branch's ratio
            capped at delta, l_t = -min(min(rho_t, delta) A_t, clip(rho_t) A_t). None: no cap.
        dual_clip: verl's dual clip c > 1 (Ye et al., 2020, arXiv:1912.09729; verl's
            ``clip_ratio_c``): where A_t < 0, l_t = min(l_t, -c A_t). None: no dual clip.
        log_ratio_clamp: verl's numerical guard on log rho ((-20, 20) in verl's vanilla).

    Attenuation in [0, 1]: each token keeps |rho A| or nothing (0 where the clip, the cap or the
    dual clip binds); at the sequence level with per-token advantages of both signs, the tokens'
    terms also cancel in d s_b, which the measure counts as removed.
    """
    check_eps(eps_low, eps_high)
    if delta is not None:
        check_number(delta, "delta", above=0.0)
    if dual_clip is not None:
        check_number(dual_clip, "dual_clip", above=1.0)
    batch = prepare_batch(
        logprobs, old_logprobs, advantages, mask, reduction, norm_length, level, log_ratio_clamp
    )
    # log rho = log r_t (B, T), or log s_b (B, 1) differentiated through all of b's tokens
    log_rho, rho, passes = batch.ratio(level, log_ratio_clamp)
    loss_B_T, dl_drho = clip_terms(rho, batch.adv_B_T, eps_low, eps_high, delta, dual_clip)
    with torch.no_grad():
        # d l / d log rho = d l / d rho * rho (times 0 where verl's clamp holds log rho)
        grad_B_T = to_logprobs(dl_drho * rho * passes, batch, level)
        if level == "token":
            stats = clip_fractions(rho < 1.0 - eps_low, rho > 1.0 + eps_high, batch)
        else:
            stats = sequence_clip_stats(batch, eps_low, eps_high)
    return loss_output(batch.reduce(loss_B_T), batch, grad_B_T, torch.exp(log_rho.detach()), stats)
