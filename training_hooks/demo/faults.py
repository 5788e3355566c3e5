"""Faults the demo can inject, ``--inject NAME[@STEP]``: known failures of a GRPO/GSPO loop.

Each fault is one small named transform, applied at one place in the loop (``loop.py`` calls
them by name), so a run with a fault differs from the healthy run by that transform alone. They
exist to prove the Health checks on runs whose faults are known (``bench/bench_health.py``).

``STEP`` is an optimizer step (the recorder's step). A fault marked "at" acts on that one step
(``@STEP`` required); the others act from the rollout whose first optimizer step is ``>= STEP``
on (default: from the start). A step's diagnostics are measured on the log-probs computed before
its own update, so a fault that moves the policy (``lr-spike``) shows at the next step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

#: lr-spike: the learning rate of the spiked step is multiplied by this.
LR_SPIKE_FACTOR = 30.0
#: sampler-noise: std of the Gaussian noise the sampler adds to each logit before sampling.
SAMPLER_NOISE_STD = 1.0
#: entropy-collapse: the policy's logits are multiplied by 1 + this per rollout since the start.
ENTROPY_SCALE_PER_ROLLOUT = 0.15
#: length-collapse: reward minus this per completion token beyond the first.
LENGTH_PENALTY = 1.0
#: all-same-reward: the reward every completion gets.
SAME_REWARD = 1.0


@dataclass(frozen=True)
class FaultSpec:
    name: str
    at: bool  # True: acts on the one step @STEP (required); False: from @STEP on (default 0)
    help: str


FAULTS: dict[str, FaultSpec] = {
    spec.name: spec
    for spec in (
        FaultSpec(
            "lr-spike",
            True,
            f"the learning rate of step STEP times {LR_SPIKE_FACTOR:g} (seen from step STEP+1: "
            "a step is measured before its own update)",
        ),
        FaultSpec(
            "nan-logprobs",
            True,
            "a NaN log-prob inside the mask at step STEP (the loss and gradient are NaN; the "
            "loop skips an update whose gradient norm is not finite, as torch's GradScaler does)",
        ),
        FaultSpec(
            "stale-old-logprobs",
            False,
            "old log-probs recomputed from the current policy at every minibatch (ratios exactly "
            "1) while policy_lag still says how many updates the batch has seen",
        ),
        FaultSpec(
            "sampler-noise",
            False,
            f"the sampler adds N(0, {SAMPLER_NOISE_STD:g}^2) noise to every logit, samples from "
            "that and reports its log-probs as sampler_logprobs; the trainer recomputes "
            "old_logprobs without it (a sampler/trainer mismatch, as vLLM's kernels against the "
            "trainer's)",
        ),
        FaultSpec(
            "entropy-collapse",
            False,
            f"the policy's logits are scaled by 1 + {ENTROPY_SCALE_PER_ROLLOUT:g} per rollout "
            "(sampler and trainer alike), driving it to near-determinism",
        ),
        FaultSpec(
            "length-collapse",
            False,
            f"reward minus {LENGTH_PENALTY:g} per completion token beyond the first: stopping at "
            "once beats most correct answers, so completions shrink",
        ),
        FaultSpec(
            "all-same-reward",
            False,
            f"every completion gets reward {SAME_REWARD:g} (a verifier that passes everything): "
            "every group has zero variance, so zero advantages",
        ),
    )
}


def fault_help(width: int = 78) -> str:
    """The command line's list of faults (``--help``'s epilog): each fault and what it does."""
    import textwrap

    head = (
        "faults (--inject NAME[@STEP], repeatable; STEP is an optimizer step: the step a fault "
        "marked @STEP acts on, else the step it acts from, default 0):"
    )
    lines = textwrap.wrap(head, width)
    for s in FAULTS.values():
        head = f"  {s.name}{'@STEP' if s.at else '[@STEP]'}"
        lines.append(head)
        lines += textwrap.wrap(s.help, width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


@dataclass(frozen=True)
class Injection:
    """One ``NAME[@STEP]``: the fault and its step (``at``: that step; else from it on)."""

    name: str
    step: int

    @classmethod
    def parse(cls, text: str) -> Injection:
        name, sep, step_text = str(text).strip().partition("@")
        spec = FAULTS.get(name)
        if spec is None:
            raise ValueError(f"inject: unknown fault {name!r}; valid: {', '.join(FAULTS)}")
        if spec.at and not sep:
            raise ValueError(f"inject: {name} needs a step, {name}@STEP")
        try:
            step = int(step_text) if sep else 0
        except ValueError:
            raise ValueError(f"inject: {text!r}: STEP must be an int") from None
        if step < 0:
            raise ValueError(f"inject: {text!r}: STEP must be >= 0")
        return cls(name, step)

    def __str__(self) -> str:
        return f"{self.name}@{self.step}"


@dataclass(frozen=True)
class Faults:
    """The run's injected faults; ``on(name, step)`` says whether one acts at ``step``."""

    injections: tuple[Injection, ...] = ()

    @classmethod
    def parse(cls, specs: Sequence[str]) -> Faults:
        return cls(tuple(Injection.parse(s) for s in specs))

    def on(self, name: str, step: int) -> bool:
        """Whether fault ``name`` acts at optimizer step ``step`` (for the rollout-level faults:
        ``step`` is the rollout's first optimizer step)."""
        at = FAULTS[name].at
        return any(
            i.name == name and (step == i.step if at else step >= i.step) for i in self.injections
        )

    # --------------------------------------------------------------- the transforms, by name

    def lr_factor(self, step: int) -> float:
        """lr-spike: the factor on this step's learning rate."""
        return LR_SPIKE_FACTOR if self.on("lr-spike", step) else 1.0

    def nan_logprobs(self, step: int, logp_B_T: torch.Tensor, mask_B_T: torch.Tensor):
        """nan-logprobs: a NaN added at row 0's first masked token, as a NaN the model computed
        (the loss and, through that token, the gradient are NaN)."""
        if not self.on("nan-logprobs", step):
            return logp_B_T
        first = torch.zeros_like(mask_B_T, dtype=torch.bool)
        first[0, int(mask_B_T[0].nonzero()[0, 0])] = True
        return logp_B_T + torch.where(first, math.nan, 0.0)

    def stale_old(self, step: int, recompute: Callable[[], torch.Tensor], old: torch.Tensor):
        """stale-old-logprobs: the minibatch's old log-probs recomputed from the current policy."""
        return recompute() if self.on("stale-old-logprobs", step) else old

    def sampler_logits(self, step: int, generator: torch.Generator):
        """sampler-noise: the function the sampler applies to its logits (None: none)."""
        if not self.on("sampler-noise", step):
            return None

        def noisy(logits: torch.Tensor) -> torch.Tensor:
            noise = torch.randn(logits.shape, generator=generator, device=logits.device)
            return logits + SAMPLER_NOISE_STD * noise

        return noisy

    def logit_scale(self, step: int, steps_per_rollout: int) -> float:
        """entropy-collapse: the policy's logit scale for the rollout starting at ``step``:
        1 + ENTROPY_SCALE_PER_ROLLOUT per rollout since the fault's first one."""
        if not self.on("entropy-collapse", step):
            return 1.0
        start = min(i.step for i in self.injections if i.name == "entropy-collapse")
        first = -(-start // steps_per_rollout) * steps_per_rollout  # first rollout at or after
        return 1.0 + ENTROPY_SCALE_PER_ROLLOUT * ((step - first) // steps_per_rollout)

    def rewards(self, step: int, rewards_P_G: torch.Tensor, lengths_P_G: torch.Tensor):
        """length-collapse and all-same-reward: the rollout's rewards, reshaped."""
        if self.on("length-collapse", step):
            rewards_P_G = rewards_P_G - LENGTH_PENALTY * (lengths_P_G - 1)
        if self.on("all-same-reward", step):
            rewards_P_G = torch.full_like(rewards_P_G, SAME_REWARD)
        return rewards_P_G


__all__ = ["FAULTS", "FaultSpec", "Faults", "Injection", "fault_help"]
