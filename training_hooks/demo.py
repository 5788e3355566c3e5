"""Train a small policy with GRPO and with GSPO on CPU, recorded by the hooks: the reference demo.

    python -m training_hooks.demo            # or: gspo-dash-demo
    streamlit run app/main.py                # then compare the two runs

What it does, per algorithm (same seed: the same initial weights and the same prompt stream):

* Policy: a causal transformer (``demo_policy.Policy``: 2 pre-LN blocks, d_model 96, 4 heads,
  ~226k parameters, an action-only head), initialised in-process; nothing is downloaded.
* Warm start ("pretraining"): 60 supervised steps on a noisy teacher (``Task.demonstration``: 20%
  of its demonstrations have a wrong symbol, a wrong length, or never emit ``<eos>``). This leaves
  the policy partly competent, as an SFT model is when RL starts (seed 0: 36% reward, about 65%
  on 1-symbol prompts, 2-18% on 4-symbol ones, 5% truncated). The warm-started weights are computed once per process and
  shared by both runs. A frozen copy of them is the reference policy pi_ref (KL statistics).
  Departure from LLM practice: the model is tiny and so is the pretraining. ``warmup_steps=0``
  gives RL from random weights, which is far too slow to learn within the demo's budget.
* Task (``demo_task.Task``): ``copy``/``rev``/``sort`` of a 1-4 symbol string over ``abc``, binary
  reward from an exact checker (the answer, then ``<eos>``). Completions stop at ``<eos>``
  (included in the mask) or are truncated at ``max_new_tokens = 6`` (reward 0), so lengths vary
  (1-6 tokens) and truncation is real. Easy prompts give all-correct groups, hard ones all-wrong
  groups (both zero-variance), the rest mixed ones; the mix shifts as the policy learns.
* Each step samples G = 8 completions (temperature 1, KV cache) for each of P = 16 prompts, scores
  them, and computes group-relative advantages ``group_advantages(rewards_P_G)`` (z-score within
  the group, population std, eps 1e-4; zero-variance groups get exactly 0).
* Off-policy updates: each rollout batch is split into ``minibatches = 2`` of whole groups and
  used for ``epochs = 1`` pass, one Adam step (lr 3e-4, gradient norm clipped at 1) per minibatch,
  against pi_old: the sampler's log-probabilities, recomputed with one forward after sampling.
  The first optimizer step of a batch is on-policy (ratio exactly 1); the second sees the ratios
  the first update caused, so ratios leave 1 and clipping happens.
* Loss: ``grpo_loss`` (token clip, eps 0.2 / 0.2) or ``gspo_loss`` (sequence clip, the paper's
  eps 3e-4 / 4e-4), both with ``reduction="seq_mean_token_mean"``: the GSPO paper's
  normalisation and also the original GRPO formula's (1/G sum_i 1/|y_i| sum_t), so the two runs
  differ only in the ratio and clip unit. No KL penalty by default (``kl_coef=0``, as in DAPO and
  Dr. GRPO): the KL to pi_ref is measured, not optimised.
* Every optimizer step goes to ``RunRecorder.log_step`` with the minibatch's rewards (P_mb, G),
  current / old / reference log-probabilities (B, T), mask, advantages, the ``LossOutput``, the
  policy's per-token entropy, the truncated flags, the completions' text ("rev abc = cba<eos>")
  and extras (lr, grad_norm, rollout, epoch). 8 sequences per step keep their per-token
  log-ratios (``token_samples``) for the dashboard's token view.
* One torch thread by default: the matrices are tiny, a second intra-op thread only spins (it
  made the loop several times slower on the 2-core machine), and the recorder's writer threads
  get the other core.

With GSPO's eps the sequence-unit clip fraction is large on the off-policy minibatches (a whole
sequence's mean log-ratio only has to move by 4e-4), while the token-unit fraction stays at a few
percent: the demo prints what it measured, both units for both runs, whatever they are.

For benchmarks and tests, ``train(DemoConfig(...), recorder)`` runs one loop with any object that
has ``log_step`` (or None), and ``build(config)`` returns the task, policy and reference policy.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from gspo_metrics import get_loss, group_advantages, kl_estimate, sequence_diagnostics

from .demo_policy import Policy, action_logprobs, sample
from .demo_task import Task

ALGORITHMS = ("grpo", "gspo")


@dataclass
class DemoConfig:
    """Everything that defines one demo run (stored as the run's config)."""

    algorithm: str = "gspo"
    """"grpo" (grpo_loss, token clip) or "gspo" (gspo_loss, sequence clip)."""
    steps: int = 120
    """Rollout steps (each gives ``epochs * minibatches`` optimizer steps)."""
    seed: int = 0
    """Seeds the initial weights, the prompt stream and the sampler (identical across algorithms)."""
    group_size: int = 8
    """G: completions sampled per prompt."""
    prompts_per_step: int = 16
    """P: prompts per rollout step."""
    minibatches: int = 2
    """Optimizer steps per epoch over a rollout batch (each takes P / minibatches whole groups)."""
    epochs: int = 1
    """Passes over each rollout batch."""
    lr: float = 3e-4
    """Adam learning rate."""
    max_grad_norm: float = 1.0
    """Gradient norm clip."""
    kl_coef: float = 0.0
    """beta of an optional k3 KL penalty to the reference policy (0: measured only)."""
    eps_low: float | None = None
    """Clip eps below 1 (None: 0.2 for grpo, 3e-4 for gspo)."""
    eps_high: float | None = None
    """Clip eps above 1 (None: 0.2 for grpo, 4e-4 for gspo)."""
    reduction: str = "seq_mean_token_mean"
    """Loss reduction (see gspo_metrics.REDUCTIONS)."""
    alphabet: str = "abc"
    """Symbols of the task's strings."""
    ops: tuple[str, ...] = ("copy", "rev", "sort")
    """Transformations prompts ask for."""
    min_len: int = 1
    """Shortest prompt string."""
    max_len: int = 4
    """Longest prompt string."""
    max_new_tokens: int = 6
    """Completion length limit T (``<eos>`` included); longer completions are truncated."""
    warmup_steps: int = 60
    """Supervised warm-start steps on a noisy teacher before RL (0: RL from random weights)."""
    warmup_lr: float = 1e-3
    """Adam learning rate of the warm-start."""
    warmup_batch: int = 64
    """Demonstrations per warm-start step."""
    teacher_noise: float = 0.2
    """Probability that a warm-start demonstration is wrong (symbol, length, or no ``<eos>``)."""
    d_model: int = 96
    """Transformer width."""
    n_layers: int = 2
    """Transformer blocks."""
    n_heads: int = 4
    """Attention heads."""
    device: str = "cpu"
    """Torch device."""

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        for name in ("steps", "group_size", "prompts_per_step", "minibatches", "epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(
                f"group_size must be >= 2 (a group of 1 has zero variance, so no gradient), "
                f"got {self.group_size}"
            )
        if self.prompts_per_step % self.minibatches:
            raise ValueError(
                f"prompts_per_step ({self.prompts_per_step}) must be divisible by minibatches "
                f"({self.minibatches}): minibatches take whole groups"
            )
        if self.eps_low is None:
            self.eps_low = 0.2 if self.algorithm == "grpo" else 3e-4
        if self.eps_high is None:
            self.eps_high = 0.2 if self.algorithm == "grpo" else 4e-4
        self.ops = tuple(self.ops)

    @property
    def optimizer_steps(self) -> int:
        return self.steps * self.epochs * self.minibatches

    def make_task(self) -> Task:
        return Task(self.alphabet, self.ops, self.min_len, self.max_len)


@dataclass
class StepStats:
    """Host-side numbers of one optimizer step (for the progress line and the summary)."""

    rollout: int
    reward_mean: float
    seq_clip_fraction: float  # sequences outside GSPO's range (3e-4 / 4e-4)
    token_clip_fraction: float  # tokens outside GRPO's range (0.2 / 0.2), token-weighted
    length_mean: float
    truncated_fraction: float
    zero_variance_fraction: float


@dataclass
class RunResult:
    config: DemoConfig
    stats: list[StepStats] = field(default_factory=list)
    rollout_rewards: list[float] = field(default_factory=list)
    wall_time: float = 0.0
    run_dir: str | None = None

    def fifths(self) -> tuple[float, float]:
        """Mean reward over the first and the last fifth of the rollout steps."""
        r = self.rollout_rewards
        k = max(1, len(r) // 5)
        return sum(r[:k]) / k, sum(r[-k:]) / k

    def mean(self, name: str, off_policy_only: bool = False) -> float:
        per = self.config.epochs * self.config.minibatches
        rows = [s for i, s in enumerate(self.stats) if not (off_policy_only and i % per == 0)]
        return sum(getattr(s, name) for s in rows) / max(1, len(rows))


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
    task = config.make_task()
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


def _accepts(fn: Callable, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def train(
    config: DemoConfig,
    recorder: Any = None,
    progress: Callable[[int, StepStats], None] | None = None,
) -> RunResult:
    """Run ``config.steps`` rollout steps; hand every optimizer step to ``recorder.log_step``.

    ``recorder`` is anything with RunRecorder's ``log_step`` (or None). ``progress`` is called
    after each rollout step with (rollout index, the last optimizer step's stats).
    """
    t0 = time.perf_counter()
    task, policy, ref = build(config)
    device = torch.device(config.device)
    loss_fn = get_loss(config.algorithm)
    opt = torch.optim.Adam(policy.parameters(), lr=config.lr)
    prompt_rng = random.Random(config.seed)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    perm_gen = torch.Generator().manual_seed(config.seed + 1)
    P, G = config.prompts_per_step, config.group_size
    P_mb = P // config.minibatches
    send_text = recorder is not None and _accepts(recorder.log_step, "completions")
    result = RunResult(config)
    opt_step = 0

    for rollout in range(config.steps):
        prompts = task.sample_prompts(P, prompt_rng)
        prompt_ids = task.encode_prompts(prompts).to(device)  # (P, Lp)
        # (P, Lp) -> (B, Lp), rows group by group
        policy.eval()
        ro = sample(
            policy,
            prompt_ids.repeat_interleave(G, dim=0),
            max_new_tokens=config.max_new_tokens,
            eos_id=task.EOS,
            pad_id=task.PAD,
            generator=gen,
        )
        actions_cpu = ro.actions.cpu().tolist()
        trunc_cpu = ro.truncated.cpu().tolist()
        rewards_P_G = torch.tensor(
            [
                [
                    task.check(prompts[p], actions_cpu[p * G + g], trunc_cpu[p * G + g])
                    for g in range(G)
                ]
                for p in range(P)
            ],
            device=device,
        )
        texts = None
        if send_text:
            texts = [
                f"{prompts[b // G].text} {task.decode(actions_cpu[b], trunc_cpu[b])}"
                for b in range(P * G)
            ]
        adv_B = group_advantages(rewards_P_G).flatten()  # (P, G) -> (B,)
        with torch.no_grad():
            old_B_T, _ = action_logprobs(policy, ro.ids, ro.actions)
            ref_B_T, _ = action_logprobs(ref, ro.ids, ro.actions)
        result.rollout_rewards.append(rewards_P_G.mean().item())
        policy.train()

        for epoch in range(config.epochs):
            order = torch.randperm(P, generator=perm_gen)
            for m in range(config.minibatches):
                groups = order[m * P_mb : (m + 1) * P_mb]
                # whole groups, still group by group: (P_mb,) -> (P_mb * G,)
                rows = (groups[:, None] * G + torch.arange(G)).flatten().to(device)
                ids, actions, mask = ro.ids[rows], ro.actions[rows], ro.mask[rows]
                old, ref_lp, adv = old_B_T[rows], ref_B_T[rows], adv_B[rows]
                logp, entropy = action_logprobs(policy, ids, actions, with_entropy=True)
                out = loss_fn(
                    logp,
                    old,
                    adv,
                    mask,
                    eps_low=config.eps_low,
                    eps_high=config.eps_high,
                    reduction=config.reduction,
                )
                loss = out.loss
                if config.kl_coef:
                    loss = loss + config.kl_coef * kl_estimate(logp, ref_lp, mask).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(
                    policy.parameters(), config.max_grad_norm
                )
                opt.step()

                rewards_mb = rewards_P_G[groups.to(device)]  # (P_mb, G)
                trunc_mb = ro.truncated[rows]
                if recorder is not None:
                    kwargs: dict[str, Any] = {}
                    if texts is not None:
                        kwargs["completions"] = [texts[r] for r in rows.tolist()]
                    recorder.log_step(
                        opt_step,
                        rewards=rewards_mb,
                        logprobs=logp,
                        old_logprobs=old,
                        mask=mask,
                        advantages=adv,
                        ref_logprobs=ref_lp,
                        loss=out,
                        entropy=entropy,
                        truncated=trunc_mb,
                        extra={
                            "lr": config.lr,
                            "grad_norm": grad_norm,
                            "rollout": rollout,
                            "epoch": epoch,
                        },
                        **kwargs,
                    )
                diag = sequence_diagnostics(logp, old, mask, adv)
                n_tok = mask.sum()
                zero_var = (rewards_mb == rewards_mb[:, :1]).all(-1)
                host = torch.stack(
                    [
                        rewards_mb.mean(),
                        diag["seq_clipped"].mean(),
                        (diag["token_clip_fraction"] * diag["length"]).sum() / n_tok,
                        diag["length"].float().mean(),
                        trunc_mb.float().mean(),
                        zero_var.float().mean(),
                    ]
                ).tolist()
                result.stats.append(StepStats(rollout, *host))
                opt_step += 1
        if progress is not None:
            progress(rollout, result.stats[-1])
    result.wall_time = time.perf_counter() - t0
    return result


class ProgressLine:
    """One ``\\r``-rewritten status line per run (a plain line every 10% when not a terminal)."""

    def __init__(self, label: str, total: int, stream=None) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.rewards: list[float] = []

    def __call__(self, rollout: int, s: StepStats) -> None:
        self.rewards.append(s.reward_mean)
        done = rollout + 1
        now = time.perf_counter()
        final = done == self.total
        if self.tty and not final and now - self.last < 0.2:
            return
        if not self.tty and not final and done % max(1, self.total // 10):
            return
        self.last = now
        recent = self.rewards[-10:]
        rate = done / max(now - self.t0, 1e-9)
        width = 20
        bar = "#" * (width * done // self.total)
        line = (
            f"{self.label:5s} [{bar:<{width}}] {done}/{self.total} {rate:5.1f} steps/s "
            f"reward {sum(recent) / len(recent):.2f} "
            f"clip seq {s.seq_clip_fraction:.2f} tok {s.token_clip_fraction:.4f} "
            f"len {s.length_mean:.1f}"
        )
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        if self.tty and final:
            self.stream.write("\n")
        self.stream.flush()


def summary_table(results: Sequence[RunResult]) -> str:
    """The end-of-demo table: reward first vs last fifth, clip fractions in both units."""
    head = (
        f"{'algo':5s} {'reward first 1/5':>16s} {'last 1/5':>8s} "
        f"{'seq clip':>8s} {'tok clip':>9s} {'seq clip*':>9s} {'tok clip*':>9s} "
        f"{'trunc 1st/last':>14s} {'time s':>6s}"
    )
    lines = [head]
    for r in results:
        first, last = r.fifths()
        k = max(1, len(r.stats) // 5)
        trunc_first = sum(s.truncated_fraction for s in r.stats[:k]) / k
        trunc_last = sum(s.truncated_fraction for s in r.stats[-k:]) / k
        lines.append(
            f"{r.config.algorithm:5s} {first:16.3f} {last:8.3f} "
            f"{r.mean('seq_clip_fraction'):8.3f} {r.mean('token_clip_fraction'):9.5f} "
            f"{r.mean('seq_clip_fraction', True):9.3f} {r.mean('token_clip_fraction', True):9.5f} "
            f"{trunc_first:7.3f}/{trunc_last:.3f} {r.wall_time:6.1f}"
        )
    lines += [
        "seq clip: sequences whose s = exp(mean token log-ratio) is outside [1-3e-4, 1+4e-4]"
        " (GSPO's unit)",
        "tok clip: tokens whose own ratio is outside [0.8, 1.2] (GRPO's unit); both units are"
        " measured on both runs",
        "*: off-policy optimizer steps only (the first step of each rollout batch has ratio 1)",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    d = DemoConfig()
    p = argparse.ArgumentParser(
        prog="gspo-dash-demo",
        description="Train a small transformer policy with GRPO and GSPO on a synthetic "
        "verifiable task and record both runs (Parquet + MLflow).",
    )
    p.add_argument("--out", default="runs", help="run folder root (default: runs)")
    p.add_argument("--steps", type=int, default=d.steps, help="rollout steps per run")
    p.add_argument("--algorithms", default="grpo,gspo", help="comma-separated: grpo,gspo")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--group-size", type=int, default=d.group_size, help="G")
    p.add_argument("--prompts-per-step", type=int, default=d.prompts_per_step, help="P")
    p.add_argument("--minibatches", type=int, default=d.minibatches)
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--kl-coef", type=float, default=d.kl_coef)
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=d.warmup_steps,
        help="supervised warm-start steps before RL (0: RL from random weights)",
    )
    p.add_argument(
        "--token-samples",
        type=int,
        default=8,
        help="sequences per step whose per-token log-ratios are stored (dashboard token view)",
    )
    p.add_argument("--device", default=d.device)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: the matrices are tiny, a second thread only "
        "spins, and the recorder's writer threads get the other core)",
    )
    p.add_argument("--name-prefix", default="demo", help="run names are PREFIX-ALGORITHM")
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--mlflow",
        default=None,
        metavar="URI",
        help="MLflow tracking URI (default: MLFLOW_TRACKING_URI or sqlite:///mlflow.db)",
    )
    g.add_argument("--no-mlflow", action="store_true", help="record to Parquet only")
    args = p.parse_args(argv)
    args.algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    for a in args.algorithms:
        if a not in ALGORITHMS:
            p.error(f"--algorithms: unknown {a!r}; valid: {', '.join(ALGORITHMS)}")
    return args


def run(argv: Sequence[str] | None = None) -> list[RunResult]:
    """The command line: train and record every requested algorithm, print the summary."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    from training_hooks import RunRecorder

    mlflow: bool | str = False if args.no_mlflow else (args.mlflow or True)
    results = []
    for algo in args.algorithms:
        cfg = DemoConfig(
            algorithm=algo,
            steps=args.steps,
            seed=args.seed,
            group_size=args.group_size,
            prompts_per_step=args.prompts_per_step,
            minibatches=args.minibatches,
            epochs=args.epochs,
            lr=args.lr,
            kl_coef=args.kl_coef,
            warmup_steps=args.warmup_steps,
            device=args.device,
        )
        config = {**asdict(cfg), "ops": ",".join(cfg.ops)}
        with RunRecorder(
            root=args.out,
            name=f"{args.name_prefix}-{algo}",
            algorithm=algo,
            config=config,
            mlflow=mlflow,
            reduction=cfg.reduction,
            group_size=cfg.group_size,
            token_samples=args.token_samples,
        ) as rec:
            res = train(cfg, rec, ProgressLine(algo, cfg.steps))
            res.run_dir = str(rec.run_dir)
        results.append(res)
    print()
    print(summary_table(results))
    print()
    for r in results:
        print(f"{r.config.algorithm}: {r.run_dir}")
    if mlflow:
        uri = (
            mlflow
            if isinstance(mlflow, str)
            else os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
        )
        print(f"MLflow: mlflow ui --backend-store-uri {uri}")
    print("Open the dashboard: streamlit run app/main.py")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point (``gspo-dash-demo``): exit status 0."""
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
