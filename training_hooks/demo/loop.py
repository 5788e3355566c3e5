"""The demo's training loop: ``build`` (task, warm-started policy, reference) and ``train``.

One rollout step of ``train``, step by step (each a function of its own)::

    batch = collect(learner, rollout, step)      # sample G completions of P prompts, score them,
                                                 # advantages, log pi_old and log pi_ref
    for epoch: for mb in minibatches(...):       # whole groups, in a fresh order per epoch
        upd = update(learner, mb, step)          # one optimizer step on the minibatch
        record(recorder, step, mb, upd)          # RunRecorder.log_step
        stats.append(measure(mb, upd))           # the host-side numbers the demo prints

Shapes: P prompts, G completions each, B = P * G rows group by group, T completion positions;
a minibatch holds P_mb = P / minibatches whole groups (B_mb = P_mb * G rows).

Policy lag: old log-probs are computed once per rollout, right after sampling, so the k-th
optimizer step on a rollout batch (k = epoch * minibatches + minibatch, from 0) has policy lag k:
the first is on-policy, the others see the updates made since. Faults (``--inject``,
``faults.Faults``) are applied at one named place each: ``collect`` (sampler noise, logit scale,
rewards), the minibatch loop (stale old log-probs) and ``update`` (lr spike, NaN log-probs).
"""

from __future__ import annotations

import copy
import dataclasses
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gspo_metrics import (
    LossOutput,
    get_loss,
    group_advantages,
    kl_estimate,
    sequence_diagnostics,
    zero_variance_groups,
)

from .config import DemoConfig
from .faults import Faults
from .policy import Policy, Rollout, action_logprobs, sample
from .task import Task


@dataclass
class StepStats:
    """Host-side numbers of one optimizer step (for the progress line and the summary)."""

    rollout: int
    reward_mean: float
    seq_clip_fraction: float  # sequences outside the sequence-unit range (GSPO's)
    token_clip_fraction: float  # tokens outside the token-unit range (GRPO's), token-weighted
    length_mean: float
    truncated_fraction: float
    zero_variance_fraction: float
    entropy_mean: float = float("nan")  # token-weighted policy entropy (nats per token)
    policy_lag: int = 0  # optimizer steps since the rollout's old log-probs (0: on-policy)


def field_mean(rows: Sequence[StepStats], name: str) -> float:
    """Mean of a ``StepStats`` field over ``rows``; NaN without rows."""
    return sum(getattr(s, name) for s in rows) / len(rows) if rows else float("nan")


@dataclass
class RunResult:
    """One run's numbers: every optimizer step's ``StepStats``, each rollout's mean reward, and
    its times (seconds): ``first_rollout_time`` (the first rollout step, which also pays
    one-time costs), ``train_time`` (every rollout step: sampling, updates, ``log_step``) and
    ``write_time`` (the recorder's close: the last Parquet parts and MLflow), 0 until measured."""

    config: DemoConfig
    stats: list[StepStats] = field(default_factory=list)
    rollout_rewards: list[float] = field(default_factory=list)
    first_rollout_time: float = 0.0
    train_time: float = 0.0
    write_time: float = 0.0
    run_dir: str | None = None

    def fifths(self) -> tuple[float, float]:
        """Mean reward over the first and the last fifth of the rollout steps."""
        r, k = self.rollout_rewards, self.fifth_size()
        return sum(r[:k]) / k, sum(r[-k:]) / k

    def fifth_size(self) -> int:
        """Rollout steps in a fifth (``fifths``)."""
        return max(1, len(self.rollout_rewards) // 5)

    def mean(self, name: str, off_policy_only: bool = False) -> float:
        """Mean of a ``StepStats`` field over the optimizer steps (or the off-policy ones)."""
        rows = [s for s in self.stats if not (off_policy_only and s.policy_lag == 0)]
        return field_mean(rows, name)

    @property
    def rollouts_per_s(self) -> float:
        """Rollout steps per second after the first (which pays one-time costs); NaN with one."""
        n, t = len(self.rollout_rewards) - 1, self.train_time - self.first_rollout_time
        return n / t if n > 0 and t > 0 else float("nan")


# ----------------------------------------------------------------------------- initial weights

_INIT_FIELDS = (
    "seed",
    "alphabet",
    "ops",
    "min_len",
    "max_len",
    "max_new_tokens",
    "warmup_steps",
    "warmup_lr",
    "warmup_batch",
    "teacher_noise",
    "d_model",
    "n_layers",
    "n_heads",
)
_INIT_CACHE: dict[tuple, dict[str, torch.Tensor]] = {}


def warm_start(policy: Policy, task: Task, config: DemoConfig) -> None:
    """Supervised steps on the noisy teacher (``Task.demonstration``): the "pretrained" policy.

    Short on purpose: the policy leaves it partly competent (easy prompts mostly right, long
    ``rev``/``sort`` mostly wrong, a few completions that never emit ``<eos>``), which is where RL
    fine-tuning of a language model starts too. Loss: mean token negative log-likelihood.
    """
    rng = random.Random(config.seed + 2)
    T = config.max_new_tokens
    opt = torch.optim.Adam(policy.parameters(), lr=config.warmup_lr)
    policy.train()
    for _ in range(config.warmup_steps):
        prompts = task.sample_prompts(config.warmup_batch, rng)
        demos = [task.demonstration(p, rng, T, config.teacher_noise) for p in prompts]
        actions = torch.tensor([d + [task.EOS] * (T - len(d)) for d in demos])  # (N, T)
        mask = torch.arange(T)[None, :] < torch.tensor([len(d) for d in demos])[:, None]
        ids = torch.cat([task.encode_prompts(prompts), torch.where(mask, actions, task.PAD)], 1)
        logp, _ = action_logprobs(policy, ids.to(config.device), actions.to(config.device))
        mask = mask.to(config.device)
        loss = -torch.where(mask, logp, 0.0).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def build(config: DemoConfig) -> tuple[Task, Policy, Policy]:
    """The task, the warm-started policy and its frozen reference copy, seeded by ``config.seed``.

    The initial weights depend only on the task, model and warm-start fields of the config (not
    on the algorithm), and are cached in memory, so a GRPO and a GSPO run start from one policy.
    """
    task = Task(config.alphabet, config.ops, config.min_len, config.max_len)
    torch.manual_seed(config.seed)
    policy = Policy(
        task.vocab_size,
        task.num_actions,
        task.prompt_len + config.max_new_tokens,
        config.d_model,
        config.n_layers,
        config.n_heads,
    ).to(config.device)
    key = tuple(getattr(config, f) for f in _INIT_FIELDS)
    if key not in _INIT_CACHE:
        warm_start(policy, task, config)
        _INIT_CACHE[key] = {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}
    policy.load_state_dict(_INIT_CACHE[key])
    ref = copy.deepcopy(policy).eval().requires_grad_(False)
    return task, policy, ref


# ----------------------------------------------------------------------------- the loop's steps


@dataclass
class Learner:
    """What the loop carries from step to step: the models, the optimizer and the random streams.

    Four streams, all seeded by ``config.seed``: the prompts (``prompt_rng``), the sampled
    completions (``sample_gen``), the minibatch order (``order_gen``) and the noise of the
    sampler-noise fault (``noise_gen``, drawn from only when it is injected).
    """

    config: DemoConfig
    task: Task
    policy: Policy
    ref: Policy
    optimizer: torch.optim.Optimizer
    loss_fn: Callable[..., LossOutput]
    device: torch.device
    prompt_rng: random.Random
    sample_gen: torch.Generator
    order_gen: torch.Generator
    noise_gen: torch.Generator
    faults: Faults

    @classmethod
    def start(cls, config: DemoConfig) -> Learner:
        task, policy, ref = build(config)
        device = torch.device(config.device)
        return cls(
            config,
            task,
            policy,
            ref,
            # fused: one kernel per step instead of a dozen small ops per parameter
            torch.optim.Adam(policy.parameters(), lr=config.lr, fused=True),
            get_loss(config.algorithm),
            device,
            random.Random(config.seed),
            torch.Generator(device=device).manual_seed(config.seed),
            torch.Generator().manual_seed(config.seed + 1),
            torch.Generator(device=device).manual_seed(config.seed + 3),
            Faults.parse(config.inject),
        )

    @property
    def steps_per_rollout(self) -> int:
        return self.config.epochs * self.config.minibatches


@dataclass(frozen=True)
class RolloutBatch:
    """One rollout step: G completions of each of P prompts, scored, rows group by group."""

    rollout: int  # index of the rollout step
    completions: Rollout  # ids (B, Lp + T), actions, mask (B, T), truncated (B,)
    rewards_P_G: torch.Tensor
    advantages_B: torch.Tensor
    old_logprobs_B_T: torch.Tensor  # log pi_old: the sampling policy's, one forward
    ref_logprobs_B_T: torch.Tensor  # log pi_ref: the frozen warm-started policy's
    texts: list[str] | None  # "cba<eos>" per row (the completion), when a recorder stores them
    # (the sampler's log-probs as it sampled: completions.sample_logprobs)
    prompt_texts: list[str] | None = None  # "rev abc =" per group
    token_texts: list[list[str]] | None = None  # per row, each action's text ("c", "<eos>")


@dataclass(frozen=True)
class Minibatch:
    """Whole groups of one rollout batch: what one optimizer step trains on (B_mb rows)."""

    rollout: int
    policy_lag: int  # optimizer steps since the batch's old log-probs (0: on-policy)
    ids: torch.Tensor  # (B_mb, Lp + T)
    actions: torch.Tensor  # (B_mb, T)
    mask: torch.Tensor  # (B_mb, T)
    old_logprobs: torch.Tensor  # (B_mb, T)
    ref_logprobs: torch.Tensor  # (B_mb, T)
    sampler_logprobs: torch.Tensor  # (B_mb, T) the sampler's, as it sampled
    advantages: torch.Tensor  # (B_mb,)
    rewards_P_G: torch.Tensor  # (P_mb, G)
    truncated: torch.Tensor  # (B_mb,)
    texts: list[str] | None
    prompt_texts: list[str] | None = None  # (P_mb,)
    token_texts: list[list[str]] | None = None  # (B_mb, T)


@dataclass(frozen=True)
class Update:
    """One optimizer step's results: the policy's log-probs before the step, and the step's."""

    logprobs: torch.Tensor  # (B_mb, T) log pi_theta, the loss's input
    entropy: torch.Tensor  # (B_mb, T) the policy's per-token entropy, detached
    loss: LossOutput
    grad_norm: torch.Tensor  # before clipping
    lr: float  # the learning rate of this step


def collect(learner: Learner, rollout: int, step: int, *, with_text: bool) -> RolloutBatch:
    """Sample, score and evaluate one rollout batch (the policy in eval mode, then train mode);
    ``step`` is the batch's first optimizer step (when the rollout-level faults start)."""
    task, policy, config, faults = learner.task, learner.policy, learner.config, learner.faults
    P, G = config.prompts_per_step, config.group_size
    prompts = task.sample_prompts(P, learner.prompt_rng)
    prompt_ids = task.encode_prompts(prompts).to(learner.device)  # (P, Lp)
    policy.eval()
    policy.logit_scale = faults.logit_scale(step, learner.steps_per_rollout)  # entropy-collapse
    ro = sample(
        policy,
        prompt_ids.repeat_interleave(G, dim=0),  # (P, Lp) -> (B, Lp), rows group by group
        max_new_tokens=config.max_new_tokens,
        eos_id=task.EOS,
        pad_id=task.PAD,
        generator=learner.sample_gen,
        adjust_logits=faults.sampler_logits(step, learner.noise_gen),  # sampler-noise
    )
    actions, truncated = ro.actions.cpu().tolist(), ro.truncated.cpu().tolist()
    rewards = [task.check(prompts[b // G], actions[b], truncated[b]) for b in range(P * G)]
    rewards_P_G = torch.tensor(rewards, device=learner.device).view(P, G)
    # length-collapse, all-same-reward
    rewards_P_G = faults.rewards(step, rewards_P_G, ro.mask.sum(1).view(P, G).to(rewards_P_G))
    texts = prompt_texts = token_texts = None
    if with_text:
        texts = [task.decode(actions[b], truncated[b]) for b in range(P * G)]
        prompt_texts = [p.text for p in prompts]
        token_texts = [[action_text(task, a) for a in row] for row in actions]
    advantages_B = group_advantages(rewards_P_G).flatten()  # (P, G) -> (B,)
    with torch.no_grad():
        old_B_T, _ = action_logprobs(policy, ro.ids, ro.actions)
        ref_B_T, _ = action_logprobs(learner.ref, ro.ids, ro.actions)
    policy.train()
    return RolloutBatch(
        rollout, ro, rewards_P_G, advantages_B, old_B_T, ref_B_T, texts, prompt_texts, token_texts
    )


def action_text(task, action: int) -> str:
    """An action id's text: its symbol, ``<eos>``, or ``<pad>`` (after the end)."""
    if action == task.EOS:
        return "<eos>"
    return task.alphabet[action - 1] if 0 < action <= len(task.alphabet) else "<pad>"


def minibatches(learner: Learner, batch: RolloutBatch, epoch: int) -> Iterator[Minibatch]:
    """One epoch over ``batch``: a fresh random order of its groups, cut into whole-group slices."""
    config = learner.config
    P, G = config.prompts_per_step, config.group_size
    P_mb = P // config.minibatches
    order = torch.randperm(P, generator=learner.order_gen)
    ro = batch.completions
    for m in range(config.minibatches):
        groups = order[m * P_mb : (m + 1) * P_mb]
        # whole groups, still group by group: (P_mb,) -> (P_mb * G,)
        rows = (groups[:, None] * G + torch.arange(G)).flatten().to(learner.device)
        yield Minibatch(
            batch.rollout,
            epoch * config.minibatches + m,  # updates made since old_logprobs
            ro.ids[rows],
            ro.actions[rows],
            ro.mask[rows],
            batch.old_logprobs_B_T[rows],
            batch.ref_logprobs_B_T[rows],
            ro.sample_logprobs[rows],
            batch.advantages_B[rows],
            batch.rewards_P_G[groups.to(learner.device)],
            ro.truncated[rows],
            _take(batch.texts, rows.tolist()),
            _take(batch.prompt_texts, groups.tolist()),
            _take(batch.token_texts, rows.tolist()),
        )


def _take(items: list | None, indices: list[int]) -> list | None:
    """``items`` at ``indices`` (a minibatch's rows or groups of its rollout's texts), or None."""
    return None if items is None else [items[i] for i in indices]


def stale_old_logprobs(learner: Learner, mb: Minibatch, step: int) -> Minibatch:
    """The stale-old-logprobs fault: ``mb`` with its old log-probs recomputed from the current
    policy (a no-op without the fault)."""

    def recompute() -> torch.Tensor:
        with torch.no_grad():
            return action_logprobs(learner.policy, mb.ids, mb.actions)[0]

    old = learner.faults.stale_old(step, recompute, mb.old_logprobs)
    return mb if old is mb.old_logprobs else dataclasses.replace(mb, old_logprobs=old)


def update(learner: Learner, mb: Minibatch, step: int) -> Update:
    """One optimizer step: the algorithm's registered loss (plus the optional KL penalty). A step
    whose gradient norm is not finite is skipped (as torch.amp.GradScaler does): a NaN must not
    reach the weights."""
    config, faults = learner.config, learner.faults
    logp, entropy = action_logprobs(learner.policy, mb.ids, mb.actions, with_entropy=True)
    assert entropy is not None  # asked for with_entropy
    logp = faults.nan_logprobs(step, logp, mb.mask)  # nan-logprobs
    out = learner.loss_fn(
        logp,
        mb.old_logprobs,
        mb.advantages,
        mb.mask,
        reduction=config.reduction,
        **config.loss_params(),  # the clip range (GRPO, GSPO), CISPO's cap, SAPO's temperatures
    )
    loss = out.loss
    if config.kl_coef:
        loss = loss + config.kl_coef * kl_estimate(logp, mb.ref_logprobs, mb.mask).mean()
    learner.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(learner.policy.parameters(), config.max_grad_norm)
    lr = config.lr * faults.lr_factor(step)  # lr-spike
    for group in learner.optimizer.param_groups:
        group["lr"] = lr
    if torch.isfinite(grad_norm):
        learner.optimizer.step()
    return Update(logp, entropy, out, grad_norm, lr)


def record(recorder: Any, step: int, mb: Minibatch, upd: Update) -> None:
    """Hand the optimizer step to ``RunRecorder.log_step``: the rollout index and policy lag,
    the sampler's log-probs, extras lr and grad_norm."""
    recorder.log_step(
        step,
        rewards=mb.rewards_P_G,
        logprobs=upd.logprobs,
        old_logprobs=mb.old_logprobs,
        mask=mb.mask,
        advantages=mb.advantages,
        ref_logprobs=mb.ref_logprobs,
        loss=upd.loss,
        entropy=upd.entropy,
        truncated=mb.truncated,
        extra={"lr": upd.lr, "grad_norm": upd.grad_norm},
        completions=mb.texts,
        prompts=mb.prompt_texts,
        token_texts=mb.token_texts,
        rollout=mb.rollout,
        policy_lag=mb.policy_lag,
        sampler_logprobs=mb.sampler_logprobs,
    )


def measure(config: DemoConfig, mb: Minibatch, upd: Update) -> StepStats:
    """The step's host-side numbers, in one device-to-host transfer; the clip shares with the
    ranges the recorder measures (``DemoConfig.clip_ranges``)."""
    diag = sequence_diagnostics(
        upd.logprobs, mb.old_logprobs, mb.mask, mb.advantages, **config.clip_ranges()
    )
    n_tok = mb.mask.sum()
    host = torch.stack(
        [
            mb.rewards_P_G.mean(),
            diag["seq_clipped"].mean(),
            (diag["token_clip_fraction"] * diag["length"]).sum() / n_tok,
            diag["length"].float().mean(),
            mb.truncated.float().mean(),
            zero_variance_groups(mb.rewards_P_G).float().mean(),
            torch.where(mb.mask, upd.entropy, 0.0).sum() / n_tok,
        ]
    ).tolist()
    reward, seq_clip, tok_clip, length, truncated, zero_var, entropy = host
    return StepStats(
        mb.rollout,
        reward,
        seq_clip,
        tok_clip,
        length,
        truncated,
        zero_var,
        entropy,
        policy_lag=mb.policy_lag,
    )


def train(
    config: DemoConfig,
    recorder: Any = None,
    progress: Callable[[int, list[StepStats]], None] | None = None,
) -> RunResult:
    """Run ``config.steps`` rollout steps; hand every optimizer step to ``recorder.log_step``.

    ``recorder`` is a ``RunRecorder`` (or anything with its ``log_step``), or None. ``progress``
    is called after each rollout step with (rollout index, that rollout's optimizer steps' stats).
    """
    learner = Learner.start(config)
    result = RunResult(config)
    t0 = time.perf_counter()
    step = 0
    for rollout in range(config.steps):
        batch = collect(learner, rollout, step, with_text=recorder is not None)
        result.rollout_rewards.append(batch.rewards_P_G.mean().item())
        first = len(result.stats)
        for epoch in range(config.epochs):
            for mb in minibatches(learner, batch, epoch):
                mb = stale_old_logprobs(learner, mb, step)
                upd = update(learner, mb, step)
                if recorder is not None:
                    record(recorder, step, mb, upd)
                result.stats.append(measure(config, mb, upd))
                step += 1
        result.train_time = time.perf_counter() - t0
        if rollout == 0:
            result.first_rollout_time = result.train_time
        if progress is not None:
            progress(rollout, result.stats[first:])
    return result
