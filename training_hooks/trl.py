"""Record a TRL ``GRPOTrainer`` run (TRL 1.0 through 1.16) with gspo-dash, without changing its training.

Two lines, on any ``GRPOTrainer`` (or subclass) instance, before ``trainer.train()``::

    from training_hooks.trl import attach
    attach(trainer, root="runs", mlflow=True)  # GRPO or GSPO (importance_sampling_level)

or build the trainer from the recording class directly (same arguments as ``GRPOTrainer`` plus a
``gspo_dash`` dict of ``RunRecorder`` arguments)::

    from training_hooks.trl import RecordedGRPOTrainer
    trainer = RecordedGRPOTrainer(model, reward_funcs, args=cfg, train_dataset=ds,
                                  gspo_dash={"root": "runs"})

What is recorded, per optimizer step, on every rank (``RunRecorder.log_step``):

* inside ``compute_loss`` (Trainer's public override point): the very tensors TRL's loss uses, detached: the policy's per-token
  log-probs and entropies (captured from TRL's own ``_get_per_token_logps_and_entropies`` call, so
  nothing is recomputed), ``old_per_token_logps`` (or the detached log-probs when TRL skips them, as
  it does itself), ``ref_per_token_logps`` (when ``beta != 0``), ``advantages`` and the loss mask
  (``completion_mask``, times ``tool_mask`` when present). The loss TRL returns is recorded as
  ``loss`` (summed over the accumulation window: TRL already divides by it);
* after generation: each completion's reward (the weighted sum of the reward functions, as TRL
  logs ``reward``), whether it was truncated (its last token is no EOS, TRL's ``clipped_ratio``), and
  its index in the generation batch, carried through TRL's shuffle and split in the inputs dict
  under ``_gspo_dash_*`` keys, so the step's sequences are re-assembled group by group; and, per
  generation (``_Generation``): TRL's optimizer step when it generated, its completions' text
  (at most ``COMPLETION_CHARS`` characters each, a cut one marked) and each reward function's
  mean over the generation batch (TRL's ``rewards/<fn>/mean``);
* the policy lag, from TRL's own counters. TRL generates once every ``steps_per_generation *
  num_iterations`` micro-steps (``_step``) and computes ``old_per_token_logps`` then, with the
  policy of that moment: the step's ``rollout`` is ``_step // (steps_per_generation *
  num_iterations)`` at generation, its ``policy_lag`` the optimizer steps taken since
  (``global_step`` now minus at generation: 0, 1, ..., num_iterations - 1). When TRL skips the old
  log-probs (``num_iterations == 1`` and ``steps_per_generation == gradient_accumulation_steps``,
  no vLLM correction) its old log-probs are the current ones detached: lag 0;
* per generation, each reward function's unscored completions (TRL's ``None``, a NaN in
  ``rewards_per_func``; ``unscored_counts``) as ``rewards/<fn>/unscored``, and the completions
  no function scored as ``rewards/unscorable`` (Health: ``reward_unscored``);
* ``sampling_per_token_logps`` (the log-probs vLLM reported when it sampled, which TRL keeps for
  ``vllm_importance_sampling_correction``) as ``sampler_logprobs``, when TRL has them; TRL's
  ``grad_norm`` (the value it logs, captured from ``Trainer._get_grad_norm``) and
  ``rewards/<fn>/mean`` as extras.

The run's algorithm label, its eps per unit and the attenuation it records, the TRL releases
it accepts and the TRL internals it wraps (each checked present when attaching,
``TRL_INTERNALS``) are in ``docs/trl.md``; ``training_hooks.metric_map`` maps TRL's logged names.

It does not change the training: it only reads detached tensors, draws no random numbers, adds
keys TRL never reads, and leaves the loss TRL computes untouched (tests/test_trl.py checks equal
parameters and logged metrics with and without it).

Supported layout: every optimizer step must consume whole groups exactly once, which is TRL's
default (``steps_per_generation == gradient_accumulation_steps``) with
``per_device_train_batch_size * steps_per_generation`` a multiple of ``num_generations``. Other
layouts train normally but are not recorded (a warning says why).

``mask_truncated_completions=True`` zeroes a truncated completion's loss mask: such a row is
recorded over its generated tokens (so lengths and ``truncated_fraction`` stay true), although TRL's
loss and clip metrics ignore it; the ``trl/loss_masked_sequences`` extra counts them per step (with
it on, our token statistics include those rows and TRL's do not). A group holding an empty
completion (no token at all) is left out (``trl/dropped_groups``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import TrainerCallback

from gspo_metrics.spec import clip_unit_of

from ._trl_base import TrainerMethods
from ._trl_rows import _concat, _StepRows
from .names import REWARD_UNSCORABLE, REWARD_UNSCORED_KEY
from .recorder import RunRecorder
from .tool_versions import installed_version as _version
from .trl_loss import default_run_name, loss_output, tool_loss, trl_algorithm

try:  # the optional extra: gspo-dash[trl]
    from trl import GRPOTrainer
except ImportError as e:  # pragma: no cover - exercised only without trl
    raise ImportError(
        "training_hooks.trl needs TRL: pip install 'gspo-dash[trl]' (trl>=1.0,<1.17)"
    ) from e

#: The TRL releases ``attach`` records: 1.0 through 1.16 (``trl>=1.0,<1.17``).
SUPPORTED_TRL = ((1, 0), (1, 17))
SUPPORTED_TRL_TEXT = "TRL 1.0 through 1.16 (trl>=1.0,<1.17)"

#: The ``GRPOTrainer`` internals the recorder wraps (no public extension point gives them
#: without computing the log-probs twice): each must exist, or ``attach`` refuses.
TRL_INTERNALS = (
    "_generate_and_score_completions",
    "_calculate_rewards",
    "_get_per_token_logps_and_entropies",
)


def check_trl_version(version: str | None = None) -> None:
    """ValueError naming the supported range when ``version`` (default: the installed TRL) is
    outside it."""
    from packaging.version import InvalidVersion, Version

    version = _version("trl") if version is None else version
    try:
        release = Version(version).release[:2]
    except InvalidVersion:
        release = None
    if release is None or not SUPPORTED_TRL[0] <= release < SUPPORTED_TRL[1]:
        raise ValueError(
            f"gspo-dash records {SUPPORTED_TRL_TEXT}; this is trl {version or 'unknown'}: "
            "pip install 'trl>=1.0,<1.17', or record your loop with RunRecorder.log_step"
        )


def _check_trainer(trainer: Any) -> None:
    """The version, the internals, and no Liger loss (its path skips the log-probs we read)."""
    check_trl_version()
    missing = [name for name in TRL_INTERNALS if not callable(getattr(trainer, name, None))]
    if missing:
        raise ValueError(
            f"this GRPOTrainer lacks {', '.join(missing)}: gspo-dash records {SUPPORTED_TRL_TEXT}"
        )
    if getattr(trainer, "use_liger_kernel", False):
        raise ValueError(
            "gspo-dash cannot record a GRPOTrainer with the Liger GRPO loss (use_liger_kernel): "
            "that loss never exposes the per-token log-probs"
        )


def _check_options(recorder_kwargs: dict[str, Any]) -> None:
    if "algorithm" in recorder_kwargs:
        raise ValueError(
            "algorithm comes from TRL's loss_type and importance_sampling_level; do not pass it"
        )


def _stop_token_ids(trainer: Any) -> list[int]:
    """The ids that end a completion: TRL's EOS ids and the pad id. TRL keeps the EOS as
    ``eos_token_id`` (1.0), its tokenizer's ``eos_token_id`` (1.4 - 1.12, read on
    ``_tokenizer``) or ``eos_token_ids`` (1.16)."""
    eos = getattr(trainer, "eos_token_ids", None)
    if eos is None:
        eos = [getattr(trainer, "eos_token_id", None)]
    if all(t is None for t in eos):
        eos = [getattr(getattr(trainer, "_tokenizer", None), "eos_token_id", None)]
    return [t for t in [*eos, _pad_token_id(trainer)] if t is not None]


def _pad_token_id(trainer: Any) -> int | None:
    tokenizer = getattr(trainer, "_tokenizer", None)
    if tokenizer is not None:
        return tokenizer.pad_token_id
    return getattr(trainer, "pad_token_id", None)


_KEY_REWARD = "_gspo_dash_reward"
_KEY_INDEX = "_gspo_dash_index"
_KEY_TRUNC = "_gspo_dash_truncated"
_KEY_LENGTH = "_gspo_dash_length"
_KEY_ROLLOUT = "_gspo_dash_rollout"

#: At most this many characters of a completion's text are recorded; a longer one is cut there
#: and marked (``bounded_text``).
COMPLETION_CHARS = 4000

#: Extra column: TRL's own ``kl`` definition when ``use_bias_correction_kl`` is on (TRL's default):
#: the k3 estimate weighted by the importance ratio pi_theta/pi_old. ``kl_ref_mean`` is unweighted.
TRL_KL = "trl/kl"

#: GRPOConfig fields stored in run.json (``config``) and as MLflow params.
TRL_SETTINGS = (
    "epsilon",
    "epsilon_high",
    "delta",
    "loss_type",
    "scale_rewards",
    "num_iterations",
    "steps_per_generation",
    "gradient_accumulation_steps",
    "per_device_train_batch_size",
    "num_generations",
    "importance_sampling_level",
    "beta",
    "max_grad_norm",
    "use_bias_correction_kl",
    "learning_rate",
    "max_completion_length",
    "temperature",
    "top_p",
    "mask_truncated_completions",
    "multi_objective_aggregation",
    "top_entropy_quantile",
    "sapo_temperature_pos",
    "sapo_temperature_neg",
    "seed",
    "max_steps",
    "reward_weights",
)


def trl_settings(trainer: Any) -> dict[str, Any]:
    """The run's TRL settings (``TRL_SETTINGS`` of ``trainer.args``) plus the effective eps."""
    args = trainer.args
    out = {k: getattr(args, k) for k in TRL_SETTINGS if hasattr(args, k)}
    out["epsilon_low_effective"] = float(trainer.epsilon_low)
    out["epsilon_high_effective"] = float(trainer.epsilon_high)
    out["reward_funcs"] = list(getattr(trainer, "reward_func_names", []))
    applied: Any = getattr(trainer, "reward_weights", None)  # TRL: ones for reward_weights=None
    weights = [float(w) for w in applied.tolist()] if hasattr(applied, "tolist") else []
    if weights and len(out["reward_funcs"]) == len(weights):
        out["reward_weights_applied"] = dict(zip(out["reward_funcs"], weights, strict=True))
    model = getattr(trainer, "model", None)
    cfg = getattr(model, "config", None)
    if cfg is not None:
        out["model"] = getattr(cfg, "_name_or_path", "") or type(model).__name__
    out["trl_version"] = _version("trl")
    out["transformers_version"] = _version("transformers")
    return out


def bounded_text(text: str, limit: int = COMPLETION_CHARS) -> str:
    """``text`` itself when it has at most ``limit`` characters, else its first ``limit`` and a
    marker saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [cut: {len(text) - limit} more characters]"


def completion_text(completion: Any) -> str | None:
    """A TRL completion as text: the string itself, or a conversational completion's message
    contents joined (a content given as parts: their "text" parts); None when it is neither."""
    if isinstance(completion, str):
        return bounded_text(completion)
    if not isinstance(completion, list):
        return None
    parts: list[str] = []
    for message in completion:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p["text"] for p in content if isinstance(p, dict) and "text" in p]
    return bounded_text("\n".join(str(p) for p in parts))


@dataclass(frozen=True)
class _Generation:
    """What the recorder keeps of one TRL generation (a batch of samples)."""

    rollout: int  # TRL's _step // generate_every when it generated
    global_step: int  # optimizer steps taken when it generated (its old log-probs' policy)
    texts: list[str | None]  # this process's completions, by generation index
    reward_means: dict[str, torch.Tensor]  # rewards/<fn>/mean over every process (TRL's)
    prompts: list[str | None] | None = None  # this process's rows' prompts, by generation index
    #: rewards/<fn>/unscored and rewards/unscorable over every process (``unscored_counts``)
    unscored: dict[str, torch.Tensor] = field(default_factory=dict)


def unscored_counts(rewards_per_func: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """The completions of a generation batch (N, F) that each reward function left unscored: TRL
    (1.0 - 1.16) turns a function's ``None`` into NaN, then sums the others with ``nansum``, so
    an abstaining function counts as 0 in that completion's reward and moves its group's mean
    and advantages; a completion no function scored is TRL's "unscorable" row (reward NaN,
    advantage 0). ``rewards/<fn>/unscored`` per function, ``rewards/unscorable`` for those no
    function scored: float32 0-d tensor counts (step extras)."""
    nan_N_F = torch.isnan(rewards_per_func)
    out = {
        REWARD_UNSCORED_KEY.format(name): nan_N_F[:, i].sum().float()
        for i, name in enumerate(names)
    }
    out[REWARD_UNSCORABLE] = nan_N_F.all(dim=1).sum().float()
    return out


def unsupported_layout(args: Any) -> str | None:
    """Why this GRPOConfig cannot be recorded step by step (None when it can)."""
    spg = args.steps_per_generation
    ga = args.gradient_accumulation_steps
    if spg != ga:
        return (
            f"steps_per_generation ({spg}) != gradient_accumulation_steps ({ga}): an optimizer step "
            "then sees part of a generation batch, or the same completions twice"
        )
    local = args.per_device_train_batch_size * spg
    if local % args.num_generations:
        return (
            f"per_device_train_batch_size * steps_per_generation ({local}) is not a multiple of "
            f"num_generations ({args.num_generations}): groups straddle processes"
        )
    return None


class _RecorderCallback(TrainerCallback):
    """Opens the recorder at train start, records at each optimizer step's end, closes at the end."""

    def __init__(self, trainer: GSPODashMixin):
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer._gd_open()

    def on_step_end(self, args, state, control, **kwargs):
        step = int(state.global_step)
        try:
            self.trainer._gd_record(step)
        except Exception as e:
            # a step that cannot be recorded ends the run only while the user is watching:
            # before the first recorded step (or with strict=True); later it is dropped
            rec = self.trainer.gspo_dash_recorder
            if rec is None or rec.last_step is None or rec.settings.strict:
                raise
            rec.drop_step(step, e)

    def on_train_end(self, args, state, control, **kwargs):
        self.trainer._gd_close("finished")


class GSPODashMixin(TrainerMethods):
    """Mix into a ``GRPOTrainer`` (before it in the bases) to record every optimizer step.

    Use ``attach(trainer, ...)`` or ``RecordedGRPOTrainer``; ``self.gspo_dash_recorder`` is the
    ``RunRecorder`` while training runs (``None`` before ``train()`` and after it).
    """

    # "_gd_" (gspo-dash) prefixes every attribute and method this mixin adds to TRL's trainer, so
    # none can clash with one of GRPOTrainer's own (its private ones are "_" + a plain word).

    def _gd_setup(self, options: dict[str, Any] | None) -> None:
        self._gd_options = dict(options or {})
        self._gd_buffer: list[dict[str, torch.Tensor]] = []
        self._gd_capture = False
        self._gd_captured: tuple[torch.Tensor, torch.Tensor | None] | None = None
        self._gd_pending_rewards: tuple[torch.Tensor, list, list] | None = None
        self._gd_generations: dict[int, _Generation] = {}
        self._gd_grad_norm: Any = None
        self._gd_loss: Any = None  # loss_for("trl", ...) of the run, for the attenuation
        self.gspo_dash_recorder: RunRecorder | None = None
        self.gspo_dash_run_dir: str | None = None
        self._gd_reason = unsupported_layout(self.args)
        if self._gd_reason:
            warnings.warn(
                f"gspo-dash: this TRL run trains normally but is not recorded: {self._gd_reason}",
                RuntimeWarning,
                stacklevel=3,
            )
        self.add_callback(_RecorderCallback(self))

    # ------------------------------------------------------------------ recorder lifecycle
    @property
    def _gd_active(self) -> bool:
        return self._gd_reason is None and self.gspo_dash_recorder is not None

    def _gd_open(self) -> None:
        if self._gd_reason is not None or self.gspo_dash_recorder is not None:
            return
        opts = dict(self._gd_options)
        algorithm = trl_algorithm(self)
        self._gd_loss = tool_loss(self)
        unit = clip_unit_of(algorithm)
        eps = (float(self.epsilon_low), float(self.epsilon_high))
        if unit is not None:  # the eps of the loss's own clip unit (no hard clip: neither)
            opts.setdefault("seq_eps" if unit == "seq" else "token_eps", eps)
        config = trl_settings(self)
        config.update(opts.pop("config", None) or {})
        if opts.get("name") is None:
            opts["name"] = default_run_name(algorithm, config.get("model"))
        opts.setdefault("reduction", str(self.loss_type))
        opts.setdefault("group_size", int(self.num_generations))
        opts.setdefault("token_samples", 8)
        self.gspo_dash_recorder = RunRecorder(algorithm=algorithm, config=config, **opts)
        self.gspo_dash_run_dir = self.gspo_dash_recorder.run_dir
        with self.gspo_dash_recorder.state.lock:
            self.gspo_dash_recorder.state.info.source = "trl"

    def _gd_close(self, status: str) -> None:
        rec, self.gspo_dash_recorder = self.gspo_dash_recorder, None
        self._gd_buffer = []
        if rec is not None:
            rec.close(status)

    def train(self, *args: Any, **kwargs: Any):
        try:
            return super().train(*args, **kwargs)
        except BaseException:
            self._gd_close("failed")
            raise

    # ------------------------------------------------------------------ capture points
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        if self._gd_active and self.model.training:
            self._gd_pending_rewards = (rewards_per_func, list(completions), list(prompts))
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        pending, self._gd_pending_rewards = self._gd_pending_rewards, None
        if not (self._gd_active and self.model.training and pending is not None):
            return output
        with torch.no_grad():
            rewards_per_func, completions, prompts = pending  # (N_all, F): over processes
            n_local = len(completions)
            rollout = self._gd_new_generation(rewards_per_func, completions, prompts)
            weights = self.reward_weights.to(rewards_per_func.device).unsqueeze(0)
            rewards = (rewards_per_func * weights).nansum(dim=1)
            rewards[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan
            start = self.accelerator.process_index * n_local
            completion_ids = output["completion_ids"]
            rewards = rewards[start : start + n_local].to(completion_ids.device)
            cmask = output["completion_mask"]
            length = cmask.sum(1)  # (B,)
            last = completion_ids.gather(1, (length - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
            stop_t = torch.tensor(_stop_token_ids(self), device=last.device)
            truncated = (length == 0) | ~torch.isin(last, stop_t)
            # tokens generated, for rows whose loss mask TRL zeroed (mask_truncated_completions):
            # the row up to its trailing padding
            T = completion_ids.shape[1]
            not_pad = completion_ids != _pad_token_id(self)
            pos = torch.arange(1, T + 1, device=completion_ids.device)
            generated = (not_pad * pos).amax(1)  # 1 + position of the last non-pad token
            output[_KEY_LENGTH] = torch.where(length > 0, length, generated)
            output[_KEY_REWARD] = rewards.float()
            output[_KEY_INDEX] = torch.arange(len(rewards), device=completion_ids.device)
            output[_KEY_TRUNC] = truncated
            output[_KEY_ROLLOUT] = torch.full_like(output[_KEY_INDEX], rollout)
        return output

    def _gd_new_generation(
        self, rewards_per_func: torch.Tensor, completions: list, prompts: list
    ) -> int:
        """Keep what the recorder needs of the generation being scored (``_Generation``), by
        its rollout index: TRL's micro-step counter over the generation period."""
        generate_every = self.args.steps_per_generation * self.num_iterations
        rollout = int(self._step) // generate_every
        means = {
            f"rewards/{name}/mean": torch.nanmean(rewards_per_func[:, i])  # as TRL logs it
            for i, name in enumerate(self.reward_func_names)
        }
        texts = [completion_text(c) for c in completions]
        prompt_texts = [completion_text(p) for p in prompts]  # a row's prompt (G rows share it)
        self._gd_generations[rollout] = _Generation(
            rollout,
            int(self.state.global_step),
            texts,
            means,
            prompt_texts,
            unscored_counts(rewards_per_func, list(self.reward_func_names)),
        )
        for old in [r for r in self._gd_generations if r < rollout - 1]:  # bounded memory
            del self._gd_generations[old]
        return rollout

    def _get_grad_norm(self, *args: Any, **kwargs: Any):
        """TRL's (transformers') gradient norm of the optimizer step, the one it logs, kept."""
        grad_norm = super()._get_grad_norm(*args, **kwargs)
        self._gd_grad_norm = grad_norm
        return grad_norm

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any):
        out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._gd_capture:  # a 2-tuple in TRL 1.0 - 1.4, a 3-tuple in 1.8 - 1.16
            self._gd_captured = (out[0], out[1])
        return out

    def compute_loss(self, model, inputs, *args: Any, **kwargs: Any):
        """TRL's loss (``Trainer.compute_loss``, the public override point), with the log-probs
        TRL computes inside it kept (``_get_per_token_logps_and_entropies``)."""
        if not (self._gd_active and self.model.training and _KEY_INDEX in inputs):
            return super().compute_loss(model, inputs, *args, **kwargs)
        self._gd_capture, self._gd_captured = True, None
        try:
            loss = super().compute_loss(model, inputs, *args, **kwargs)
        finally:
            self._gd_capture = False
        captured, self._gd_captured = self._gd_captured, None
        if captured is not None:
            self._gd_buffer.append(self._gd_microbatch(inputs, captured, loss))
        return loss

    def _gd_microbatch(self, inputs, captured, loss) -> dict[str, torch.Tensor]:
        logps, entropies = captured
        logps = logps.detach()
        mask = inputs["completion_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        mask = mask.detach()
        # a row TRL's loss ignores entirely (mask_truncated_completions): record its generated
        # tokens, so its length and truncation still count (its ratios do not move TRL's loss)
        empty = mask.sum(1) == 0
        if bool(empty.any()):
            T = mask.shape[1]
            full = torch.arange(T, device=mask.device) < inputs[_KEY_LENGTH].unsqueeze(1)
            mask = torch.where(empty.unsqueeze(1), full.to(mask.dtype), mask)
        old = inputs.get("old_per_token_logps")
        ref = inputs.get("ref_per_token_logps") if self.beta != 0.0 else None
        mb = {
            "logps": logps,
            "old": logps if old is None else old.detach(),
            "mask": mask,
            "loss_masked": empty.to(torch.float64),
            "adv": inputs["advantages"].detach(),
            "reward": inputs[_KEY_REWARD],
            "index": inputs[_KEY_INDEX],
            "truncated": inputs[_KEY_TRUNC],
            "rollout": inputs[_KEY_ROLLOUT],
            "old_given": torch.full_like(inputs[_KEY_INDEX], old is not None),
            "loss": loss.detach().reshape(()),
        }
        if entropies is not None:
            mb["entropy"] = entropies.detach()
        if ref is not None:
            mb["ref"] = ref.detach()
        sampler = inputs.get("sampling_per_token_logps")  # vLLM's, when TRL has them
        if sampler is not None:
            mb["sampler"] = sampler.detach()
        return mb

    # ------------------------------------------------------------------ one optimizer step
    def _gd_record(self, step: int) -> None:
        buffer, self._gd_buffer = self._gd_buffer, []
        rec = self.gspo_dash_recorder
        if rec is None or not buffer:
            return
        G = int(self.num_generations)
        rows = _StepRows.assemble(buffer, G)
        if isinstance(rows, str):
            warnings.warn(
                f"gspo-dash: step {step}{rows}; not recorded", RuntimeWarning, stacklevel=2
            )
            return
        adv = rows.need("adv")
        if adv.dim() == 2 and adv.shape[1] == 1:
            adv = adv.squeeze(1)
        gen, lag = self._gd_lag(rows, step)
        rec.log_step(
            step,
            rewards=rows.need("reward").reshape(-1, G),
            logprobs=rows.need("logps"),
            old_logprobs=rows.need("old"),
            mask=rows.need("mask"),
            advantages=adv,
            ref_logprobs=rows["ref"],
            entropy=rows["entropy"],
            truncated=rows["truncated"],
            loss=self._gd_loss_output(rows, adv, torch.stack([mb["loss"] for mb in buffer]).sum()),
            extra=self._gd_extra(rows, gen),
            completions=rows.texts(gen.texts) if gen is not None else None,
            # one prompt per group (its first row's), None when unknown
            prompts=None if gen is None or gen.prompts is None else rows.texts(gen.prompts)[::G],
            rollout=None if gen is None else gen.rollout,
            policy_lag=lag,
            sampler_logprobs=rows["sampler"],
        )

    def _gd_loss_output(self, rows: _StepRows, adv: torch.Tensor, loss: torch.Tensor) -> Any:
        """TRL's loss, with the attenuation of TRL's loss on the step's rows (``trl_loss``)."""
        if self._gd_loss is None:
            return loss
        out = loss_output(self._gd_loss, rows, adv, loss)
        if out is loss:  # it could not be computed: not tried again
            self._gd_loss = None
        return out

    def _gd_lag(self, rows: _StepRows, step: int) -> tuple[_Generation | None, int | None]:
        """The step's generation and policy lag: optimizer steps taken since the generation
        whose old log-probs the step uses (``step`` is TRL's global_step after this step), 0
        when TRL skipped them (its old log-probs are then this step's own, detached). Unknown
        (None) if the step's rows come from more than one generation."""
        rollouts = rows.need("rollout").unique().tolist()
        gen = self._gd_generations.get(rollouts[0]) if len(rollouts) == 1 else None
        if gen is None:
            return None, None
        if not bool(rows.need("old_given").all()):
            return gen, 0
        return gen, step - 1 - gen.global_step

    def _gd_extra(self, rows: _StepRows, gen: _Generation | None) -> dict[str, Any]:
        """The step's extra columns: dropped groups, loss-masked rows, TRL's kl, learning rate,
        TRL's grad_norm, per-function reward means and unscored counts (``unscored_counts``)."""
        extra: dict[str, Any] = {
            "trl/dropped_groups": rows.dropped_groups,
            "trl/loss_masked_sequences": _concat(rows.buffer, "loss_masked").sum(),
        }
        grad_norm, self._gd_grad_norm = self._gd_grad_norm, None
        if grad_norm is not None:
            extra["grad_norm"] = grad_norm
        if gen is not None:
            extra.update(gen.reward_means)
            extra.update(gen.unscored)
        if rows["ref"] is not None and getattr(self.args, "use_bias_correction_kl", False):
            extra[TRL_KL] = self._gd_weighted_kl(
                rows["logps"], rows["old"], rows["ref"], rows["mask"]
            )
        try:
            extra["learning_rate"] = float(self._get_learning_rate())
        except Exception:  # noqa: BLE001
            extra["learning_rate"] = math.nan
        return extra

    def _gd_weighted_kl(self, logps, old, ref, mask) -> torch.Tensor:
        """TRL's logged ``kl`` under ``use_bias_correction_kl``: token mean of ``k3 * ratio``.

        k3 = exp(ref - logp) - (ref - logp) - 1; ratio = exp(logp - old) per token, or the
        sequence ratio exp(mean_t (logp - old)) broadcast when importance_sampling_level is
        "sequence". Token-weighted over all ranks, as TRL logs it. (Our ``kl_ref_mean`` is the
        unweighted k3 mean.)
        """
        with torch.no_grad():
            m = mask.to(logps.dtype)
            d = torch.where(mask.bool(), ref - logps, 0.0)
            k3 = torch.expm1(d) - d
            log_r = torch.where(mask.bool(), logps - old, 0.0)
            if self.importance_sampling_level == "sequence":
                log_r = log_r.sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1.0)
            totals = torch.stack([(k3 * torch.exp(log_r) * m).sum(), m.sum()])
            if self.accelerator.num_processes > 1:  # every rank records every step: no deadlock
                totals = self.accelerator.reduce(totals, reduction="sum")
            return totals[0] / totals[1].clamp(min=1.0)


def attach(trainer: GRPOTrainer, **recorder_kwargs: Any) -> GRPOTrainer:
    """Record ``trainer`` (a ``GRPOTrainer`` or subclass instance) with gspo-dash; returns it.

    ``recorder_kwargs`` go to ``RunRecorder`` (``root``, ``name``, ``mlflow``, ``config`` merged
    over the TRL settings, ``on_finding`` and ``findings_every`` for live findings, ...);
    ``algorithm`` and the eps of TRL's unit come from the trainer.
    The recorder opens when ``train()`` starts and closes when it ends (``failed`` on an error).
    """
    if not isinstance(trainer, GRPOTrainer):
        raise ValueError(f"trainer must be a trl.GRPOTrainer, got {type(trainer).__name__}")
    _check_trainer(trainer)
    _check_options(recorder_kwargs)
    if isinstance(trainer, GSPODashMixin):
        raise ValueError("this trainer is already recorded by gspo-dash")
    cls = type(trainer)
    trainer.__class__ = type(f"GSPODash{cls.__name__}", (GSPODashMixin, cls), {})
    trainer._gd_setup(recorder_kwargs)
    return trainer


class RecordedGRPOTrainer(GSPODashMixin, GRPOTrainer):
    """``GRPOTrainer`` that records with gspo-dash; ``gspo_dash`` = ``RunRecorder`` kwargs."""

    def __init__(self, *args: Any, gspo_dash: dict[str, Any] | None = None, **kwargs: Any):
        check_trl_version()
        super().__init__(*args, **kwargs)
        _check_trainer(self)
        opts = dict(gspo_dash or {})
        _check_options(opts)
        self._gd_setup(opts)


__all__ = [
    "COMPLETION_CHARS",
    "SUPPORTED_TRL",
    "SUPPORTED_TRL_TEXT",
    "TRL_INTERNALS",
    "check_trl_version",
    "TRL_KL",
    "TRL_SETTINGS",
    "GSPODashMixin",
    "RecordedGRPOTrainer",
    "attach",
    "bounded_text",
    "completion_text",
    "trl_settings",
    "unscored_counts",
    "unsupported_layout",
]
