"""A training tool's own loss settings -> the registered loss that computes what that tool computes.

``loss_for("trl", settings)`` reads TRL 1.16's ``GRPOConfig`` names (``loss_type``,
``importance_sampling_level``, ``epsilon``, ``epsilon_high``, ``delta``, ``max_completion_length``,
``sapo_temperature_pos/neg``, ``vespo_k_pos``...); ``loss_for("verl", settings)`` verl 0.9.1's actor
config names (``loss_mode``, ``clip_ratio``, ``clip_ratio_low/high``, ``clip_ratio_c``,
``loss_agg_mode``, ``loss_scale_factor``, ``tau_pos/neg``, ``kl_cov_ratio``, ``ppo_kl_coef``,
``dro_beta``; flat, or the policy-loss ones under a ``policy_loss`` mapping). The result is a
``ToolLoss``: called as ``(logprobs, old_logprobs, advantages, mask) -> LossOutput``, its loss and
gradient equal the tool's own code on the same tensors (TRL's ``GRPOTrainer._compute_loss``,
verl's ``core_algos.get_policy_loss_fn(loss_mode)``; the parity tests run both in float64), and it
says which loss it is, with which parameters, and which settings it took from the tool's defaults.

What "equal" covers, and what it does not:

- One call is one batch: the reduction normalises over the tensors given. TRL also divides by its
  gradient-accumulation steps, and its ``dapo``/``cispo``/``vespo`` by the token count of the whole
  accumulated batch; verl by its global batch (``global_batch_info``). The parity is for one batch
  that is the whole window (one process, no accumulation).
- The policy term only. TRL adds terms that need inputs this signature has not (the KL penalty
  ``beta``, the entropy mask and bonus, the off-policy mask, vLLM's importance-sampling
  correction): a stated non-neutral value raises, unless ``policy_only=True``, which lists it in
  ``ToolLoss.left_out``. verl's policy loss function has no such term (verl adds its KL loss and
  entropy bonus outside it).
- Settings not given take the tool's default for the version named in ``ToolLoss.version``, and
  are listed in ``ToolLoss.defaulted``; a setting the tool has no default for raises. Keys this
  mapping does not read are ignored; ``settings["reduction"]`` (one of ours, ``ALL_REDUCTIONS``)
  replaces the tool's reduction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .checks import check_choice, check_number
from .losses import ALL_REDUCTIONS, LOSS_INFO, LossOutput, get_loss
from .spec import TRL_LOSS_TYPES, VERL_LOSS_MODES, algorithm_label

TOOLS = ("trl", "verl")
#: The tool versions whose code and defaults this mapping follows (and the parity tests run).
VERSIONS = {"trl": "1.16.0", "verl": "0.9.1"}

#: TRL 1.16 ``GRPOConfig`` defaults of the settings read here (``epsilon_high`` None: = epsilon).
TRL_DEFAULTS: dict[str, Any] = {
    "loss_type": "dapo",
    "importance_sampling_level": "token",
    "epsilon": 0.2,
    "epsilon_high": None,
    "delta": None,
    "max_completion_length": 512,
    "sapo_temperature_pos": 1.0,
    "sapo_temperature_neg": 1.05,
    "vespo_k_pos": 2.0,
    "vespo_lambda_pos": 3.0,
    "vespo_k_neg": 3.0,
    "vespo_lambda_neg": 2.0,
    "beta": 0.0,
    "top_entropy_quantile": 1.0,
    "off_policy_mask_threshold": None,
    "entropy_coef": 0.0,
    "use_adaptive_entropy": False,
    "use_vllm": False,
    "vllm_importance_sampling_correction": True,
}
#: TRL's loss_type -> its reduction in TRL.
_TRL_REDUCTIONS: dict[str, str] = {
    "grpo": "seq_mean_token_mean",
    "bnpo": "token_mean",
    "dr_grpo": "seq_mean_token_sum_norm",
    "dapo": "token_mean",
    "luspo": "seq_mean_token_sum",
    "cispo": "token_mean",
    "sapo": "seq_mean_token_mean",
    "vespo": "token_mean",
}
#: TRL's loss_type -> (our registered loss, its reduction in TRL); the names in ``spec``.
TRL_LOSSES: dict[str, tuple[str, str]] = {
    loss_type: (loss, _TRL_REDUCTIONS[loss_type]) for loss_type, loss in TRL_LOSS_TYPES.items()
}
#: TRL settings that add a term outside the policy surrogate: (neutral value, what it adds).
TRL_OUTSIDE: dict[str, tuple[Any, str]] = {
    "beta": (
        0.0,
        "the KL penalty beta * k3(pi_ref / pi_theta), which needs the reference log-probs",
    ),
    "top_entropy_quantile": (
        1.0,
        "the entropy mask (only high-entropy tokens train), which needs the entropies",
    ),
    "off_policy_mask_threshold": (
        None,
        "the off-policy sequence mask, which needs the sampler's log-probs",
    ),
    "entropy_coef": (0.0, "the entropy bonus, which needs the entropies"),
    "use_adaptive_entropy": (False, "the adaptive entropy bonus, which needs the entropies"),
}

#: verl 0.9.1 ``ActorConfig`` / ``PolicyLossConfig`` defaults of the settings read here.
VERL_DEFAULTS: dict[str, Any] = {
    "loss_mode": "vanilla",
    "clip_ratio": 0.2,
    "clip_ratio_low": 0.2,
    "clip_ratio_high": 0.2,
    "clip_ratio_c": 3.0,
    "loss_agg_mode": "token-mean",
    "loss_scale_factor": None,
    "tau_pos": 1.0,
    "tau_neg": 1.05,
    "kl_cov_ratio": 0.0002,
    "ppo_kl_coef": 0.1,
    "dro_beta": None,
}
#: verl's loss_agg_mode -> our reduction.
VERL_REDUCTIONS: dict[str, str] = {
    "token-mean": "token_mean",
    "token-sum": "sum",
    "seq-mean-token-sum": "seq_mean_token_sum",
    "seq-mean-token-mean": "seq_mean_token_mean",
    "seq-mean-token-sum-norm": "seq_mean_token_sum_norm",
}
#: verl loss modes this mapping does not reproduce, and why.
VERL_UNSUPPORTED: dict[str, str] = {
    "clip_cov": "it detaches a random subset of tokens (torch.randperm on the global generator), "
    "so no function of the four tensors equals it",
    "bypass_mode": "it reads policy_loss.rollout_correction and computes its importance weights "
    "and rejection masks in verl's rollout-correction helper before dispatching to vanilla or "
    "REINFORCE; record the loss it dispatches to instead",
}
#: verl clamps log r to [-20, 20] before exp in these modes (gradient 0 outside).
VERL_CLAMP = (-20.0, 20.0)


@dataclass(frozen=True)
class ToolLoss:
    """A tool's loss as a registered loss: call it like any loss, without options."""

    tool: str
    """"trl" or "verl"."""
    version: str
    """The tool version whose code and defaults this follows."""
    tool_loss: str
    """The tool's own name of the loss: TRL's ``loss_type``, verl's ``loss_mode``."""
    loss: str
    """Our registered loss (``LOSSES``) that computes it."""
    params: Mapping[str, Any]
    """The keyword arguments passed to it (``reduction`` among them)."""
    settings: Mapping[str, Any]
    """Every tool setting read, as used: the stated ones, and the defaulted ones."""
    defaulted: tuple[str, ...]
    """The settings not given, taken from the tool's default (unstated is not stated)."""
    left_out: Mapping[str, str] = field(default_factory=dict)
    """With ``policy_only``: stated settings whose term this loss leaves out, and what it adds."""
    notes: tuple[str, ...] = ()
    """How the tool computes this loss where that is worth knowing (a reduction it ignores...)."""
    norm_length_from_width: bool = False
    """verl without loss_scale_factor: "seq_mean_token_sum_norm" divides by the padded width T."""

    @property
    def level(self) -> str:
        """The ratio level, "token" or "sequence" (the ratio attenuation is measured against)."""
        return str(self.params.get("level", LOSS_INFO[self.loss].level))

    @property
    def reduction(self) -> str:
        return str(self.params["reduction"])

    @property
    def algorithm(self) -> str:
        """The run's ``algorithm`` label (``spec.algorithm_label``): ``"cispo"``, ``"dapo-seq"``,
        ``"gspo"`` (GRPO's clip at the sequence level, TRL's GSPO)..."""
        return algorithm_label(self.loss, self.level)

    def __call__(
        self,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: torch.Tensor,
        mask: torch.Tensor,
    ) -> LossOutput:
        params = dict(self.params)
        if self.norm_length_from_width:
            params["norm_length"] = float(logprobs.shape[-1])
        return get_loss(self.loss)(logprobs, old_logprobs, advantages, mask, **params)


class _Settings:
    """Reads a tool's settings, recording each one read and whether it was defaulted."""

    def __init__(self, tool: str, given: Mapping[str, Any], defaults: Mapping[str, Any]):
        self.tool, self.given, self.defaults = tool, given, defaults
        self.used: dict[str, Any] = {}
        self.defaulted: list[str] = []

    def get(self, key: str) -> Any:
        if key in self.given:
            value = self.given[key]
        elif key in self.defaults:
            value = self.defaults[key]
            self.defaulted.append(key)
        else:  # (every key read has a default entry; this names a mapping bug)
            raise KeyError(key)
        self.used[key] = value
        return value

    def number(self, key: str, **bounds: float) -> float:
        return check_number(self.get(key), f"{self.tool} setting {key}", **bounds)

    def optional(self, key: str, **bounds: float) -> float | None:
        value = self.get(key)
        if value is None:
            return None
        return check_number(value, f"{self.tool} setting {key}", **bounds)

    def choice(self, key: str, choices: tuple[str, ...]) -> str:
        value = self.get(key)
        check_choice(value, f"{self.tool} {key}", choices)
        return str(value)

    def tool_loss(self, tool_loss: str, loss: str, params: dict, **fields: Any) -> ToolLoss:
        """The ``ToolLoss`` of these settings, with the ones read and defaulted so far."""
        tool, used, defaulted = self.tool, self.used, tuple(self.defaulted)
        return ToolLoss(tool, VERSIONS[tool], tool_loss, loss, params, used, defaulted, **fields)


def float32(value: float) -> float:
    """``value`` rounded to float32, as TRL computes with the numbers it passes to ``torch.where``
    as Python floats (its SAPO temperatures, VESPO's k and lambda)."""
    return float(torch.tensor(value, dtype=torch.float32))


def loss_for(tool: str, settings: Mapping[str, Any], *, policy_only: bool = False) -> ToolLoss:
    """The loss ``tool`` ("trl" or "verl") trains with under ``settings`` (see the module
    docstring): an unknown ``loss_type`` / ``loss_mode`` raises ValueError naming the known ones.

    Args:
        tool: "trl" (TRL 1.16's ``GRPOTrainer``) or "verl" (verl 0.9.1's policy losses).
        settings: the tool's own setting names -> values; missing ones take the tool's default
            (listed in ``ToolLoss.defaulted``); ``settings["reduction"]``, one of ours, replaces
            the tool's reduction.
        policy_only: accept TRL settings that add a term outside the policy loss (``beta`` > 0,
            an entropy mask or bonus, an off-policy mask, vLLM's correction), listing them in
            ``ToolLoss.left_out`` instead of raising.
    """
    check_choice(tool, "tool", TOOLS)
    if not isinstance(settings, Mapping):
        raise ValueError(f"settings must be a mapping of {tool}'s setting names, got {settings!r}")
    reduction = settings.get("reduction")
    if reduction is not None:
        check_choice(reduction, "settings['reduction']", ALL_REDUCTIONS)
    if tool == "trl":
        return _trl(settings, reduction, policy_only)
    return _verl(_flat_verl(settings), reduction)


def _trl(settings: Mapping[str, Any], reduction: str | None, policy_only: bool) -> ToolLoss:
    s = _Settings("trl", settings, TRL_DEFAULTS)
    loss_type = s.choice("loss_type", tuple(sorted(TRL_LOSSES)))
    level = s.choice("importance_sampling_level", ("token", "sequence"))
    name, tool_reduction = TRL_LOSSES[loss_type]
    params: dict[str, Any] = {"reduction": reduction or tool_reduction}
    notes: list[str] = []
    if loss_type == "sapo":
        params.update(level=level, tau_pos=float32(s.number("sapo_temperature_pos", above=0.0)))
        params["tau_neg"] = float32(s.number("sapo_temperature_neg", above=0.0))
        notes.append("TRL makes the SAPO temperatures float32 (torch.where on Python floats)")
    elif loss_type == "vespo":
        for key in ("k_pos", "lambda_pos", "k_neg", "lambda_neg"):
            params[key] = float32(s.number(f"vespo_{key}"))
        notes.append("TRL makes VESPO's k and lambda float32 (torch.where on Python floats)")
        if level == "sequence":
            notes.append("TRL's vespo loss does not depend on importance_sampling_level")
    else:
        eps = s.number("epsilon", at_least=0.0)
        eps_high = s.optional("epsilon_high", at_least=0.0)
        eps_high = eps if eps_high is None else eps_high  # TRL: epsilon_high None means epsilon
        if loss_type == "cispo":  # TRL caps the weight at epsilon_high, an absolute ratio
            params.update(level=level, weight_max=eps_high, weight_min=None)
        else:
            params.update(level=level, eps_low=eps, eps_high=eps_high)
            delta = s.optional("delta", above=0.0)
            if delta is not None:
                params["delta"] = delta
    if loss_type in ("dapo", "cispo", "vespo"):
        notes.append(
            "TRL divides by the token count of the whole accumulated batch (num_items_in_batch); "
            "this loss by the tokens of the batch it is given"
        )
    if params["reduction"] == "seq_mean_token_sum_norm":
        length = s.get("max_completion_length")
        if length is None:
            raise ValueError(
                "trl setting max_completion_length is None (TRL infers it from the model's "
                "config): pass the value, the constant Dr. GRPO divides by"
            )
        params["norm_length"] = check_number(length, "trl setting max_completion_length", above=0)
    left_out = _trl_outside(s, loss_type, policy_only)
    return s.tool_loss(loss_type, name, params, left_out=left_out, notes=tuple(notes))


def _trl_outside(s: _Settings, loss_type: str, policy_only: bool) -> dict[str, str]:
    """TRL's terms outside the policy surrogate that are on: raise, or list them (policy_only)."""
    on = {}
    for key, (neutral, adds) in TRL_OUTSIDE.items():
        value = s.get(key)
        if value != neutral:
            on[key] = f"{key}={value!r} adds {adds}"
    if s.get("use_vllm") and s.get("vllm_importance_sampling_correction"):
        what = "vespo's weight" if loss_type == "vespo" else "the per-token loss"
        on["vllm_importance_sampling_correction"] = (
            f"vLLM's importance-sampling correction multiplies {what} by pi_old / pi_sampler, "
            "which needs the sampler's log-probs"
        )
    if on and not policy_only:
        raise ValueError(
            "these TRL settings add terms this loss cannot compute from (logprobs, old_logprobs, "
            f"advantages, mask): {'; '.join(on.values())}. Pass policy_only=True to get the "
            "policy term alone (they are then listed in ToolLoss.left_out)"
        )
    return on


def _flat_verl(settings: Mapping[str, Any]) -> dict[str, Any]:
    """verl settings flat: the keys of a nested ``policy_loss`` mapping join the others."""
    flat = {k: v for k, v in settings.items() if k != "policy_loss"}
    nested = settings.get("policy_loss")
    if isinstance(nested, Mapping):
        for key, value in nested.items():
            if key in flat and flat[key] != value:
                raise ValueError(
                    f"verl setting {key} is given twice: {flat[key]!r} and policy_loss.{key} "
                    f"{value!r}"
                )
            flat[key] = value
    return flat


def verl_eps(settings: Mapping[str, Any] | _Settings) -> tuple[float, float]:
    """verl's clip_ratio_low/high, each falling back to clip_ratio where set to None, of verl's
    settings (flat; unset ones take ``VERL_DEFAULTS``) or of the ``_Settings`` reading them."""
    s = settings if isinstance(settings, _Settings) else _Settings("verl", settings, VERL_DEFAULTS)
    low = s.optional("clip_ratio_low", at_least=0.0)
    high = s.optional("clip_ratio_high", at_least=0.0)
    if low is None or high is None:
        ratio = s.number("clip_ratio", at_least=0.0)
        low, high = (ratio if low is None else low), (ratio if high is None else high)
    return low, high


def _verl(settings: Mapping[str, Any], reduction: str | None) -> ToolLoss:
    s = _Settings("verl", settings, VERL_DEFAULTS)
    mode = s.get("loss_mode")
    if mode in VERL_UNSUPPORTED:
        raise ValueError(f"verl loss_mode {mode!r} is not supported: {VERL_UNSUPPORTED[mode]}")
    if mode not in VERL_LOSS_MODES:
        raise ValueError(
            f"unknown verl loss_mode {mode!r}; known: "
            f"{', '.join(map(repr, sorted(VERL_LOSS_MODES)))} "
            f"(not supported: {', '.join(map(repr, sorted(VERL_UNSUPPORTED)))})"
        )
    params = _verl_params(s, mode)
    notes: list[str] = []
    if "reduction" not in params:  # the modes that honour loss_agg_mode
        agg = s.choice("loss_agg_mode", tuple(VERL_REDUCTIONS))
        params["reduction"] = VERL_REDUCTIONS[agg]
    elif reduction is None:
        notes.append(f"verl's {mode} ignores loss_agg_mode: it reduces by {params['reduction']}")
    params["reduction"] = reduction or params["reduction"]
    from_width = False
    if params["reduction"] == "seq_mean_token_sum_norm":
        factor = s.optional("loss_scale_factor", above=0.0)
        if factor is None:
            from_width = True
            notes.append(
                "loss_scale_factor unset: verl divides by each batch's padded width T, so the "
                "loss changes with the padding"
            )
        else:
            params["norm_length"] = factor
    loss = VERL_LOSS_MODES[mode]
    if LOSS_INFO[loss].level == "either":  # verl's ratios are per token (its gspo is GSPO-token)
        params["level"] = "token"
    return s.tool_loss(mode, loss, params, notes=tuple(notes), norm_length_from_width=from_width)


def _verl_params(s: _Settings, mode: str) -> dict[str, Any]:
    """The registered loss's parameters for verl's ``mode`` (``reduction`` where verl fixes it)."""
    if mode in ("vanilla", "gspo", "cispo", "geo_mean", "dppo_tv", "dppo_kl"):
        low, high = verl_eps(s)
    if mode == "vanilla":
        c = s.number("clip_ratio_c", above=1.0)
        return {"eps_low": low, "eps_high": high, "dual_clip": c, "log_ratio_clamp": VERL_CLAMP}
    if mode == "gspo":
        return {"eps_low": low, "eps_high": high, "log_ratio_clamp": (-math.inf, 10.0)}
    if mode == "cispo":
        return {"weight_min": 1.0 - low, "weight_max": 1.0 + high, "log_ratio_clamp": VERL_CLAMP}
    if mode == "geo_mean":
        return {"eps_low": low, "eps_high": high, "reduction": "seq_mean_token_mean"}
    if mode in ("dppo_tv", "dppo_kl"):
        c = s.number("clip_ratio_c", above=0.0)
        return {"eps_low": low, "eps_high": high, "truncation": c, "log_ratio_clamp": VERL_CLAMP}
    if mode == "sapo":
        tau = {"tau_pos": s.number("tau_pos", above=0.0), "tau_neg": s.number("tau_neg", above=0.0)}
        return {**tau, "log_ratio_clamp": VERL_CLAMP, "reduction": "seq_mean_token_mean"}
    if mode == "dro":
        beta = s.get("dro_beta")
        if beta is None:
            raise ValueError("verl loss_mode 'dro' needs policy_loss.dro_beta > 0 (no default)")
        return {"beta": check_number(beta, "verl setting dro_beta", above=0.0)}
    if mode == "kl_cov":
        ratio = s.number("kl_cov_ratio", above=0.0)
        return {"kl_cov_ratio": ratio, "ppo_kl_coef": s.number("ppo_kl_coef", at_least=0.0)}
    return {}  # gpg
