"""Train a small policy with GRPO and with GSPO on CPU, recorded by the hooks: the reference demo.

    python -m training_hooks.demo            # or: gspo-dash-demo
    gspo-dash --root runs                    # then compare the two runs

docs/demo.md says what each setting does to the numbers and measures the defaults. Per
algorithm (same seed: the same initial weights and the same prompt stream):

* Policy: a causal transformer (``policy.Policy``: 2 pre-LN blocks, d_model 96, 4 heads,
  ~226k parameters, an action-only head), initialised in-process; nothing is downloaded.
* Warm start ("pretraining"): 60 supervised steps on a noisy teacher (``Task.demonstration``: 20%
  of its demonstrations have a wrong symbol, a wrong length, or never emit ``<eos>``). This leaves
  the policy partly competent, as an SFT model is when RL starts. The warm-started weights are
  computed once per process and shared by every run; a frozen copy of them is the reference
  policy pi_ref (KL statistics). ``warmup_steps=0`` gives RL from random weights, far too slow
  to learn within the demo's budget.
* Task (``task.Task``): ``copy``/``rev``/``sort`` of a 2-4 symbol string over ``abc``, binary
  reward from an exact checker (the answer, then ``<eos>``). Completions stop at ``<eos>``
  (included in the mask) or are truncated at ``max_new_tokens = 6`` (reward 0), so lengths vary
  and truncation is real. Easy prompts give all-correct groups, hard ones all-wrong groups (both
  zero-variance), the rest mixed ones; the mix shifts as the policy learns.
* Each rollout step samples G = 12 completions (temperature 1, KV cache) for each of P = 12
  prompts, scores them, and computes group-relative advantages ``group_advantages(rewards_P_G)``
  (z-score within the group, population std, eps 1e-4; zero-variance groups get exactly 0).
* Off-policy updates: each rollout batch is split into ``minibatches = 4`` of whole groups (as
  in the GSPO paper) and used for ``epochs = 1`` pass, one Adam step (lr 8e-5, gradient norm
  clipped at 1) per minibatch, against pi_old: the sampling policy's log-probabilities,
  recomputed with one forward after sampling. The k-th optimizer step on a batch has policy lag
  k (0..3): the first is on-policy (ratio exactly 1), the others see the updates made since, so
  ratios leave 1 and clipping happens.
* Loss: ``grpo_loss`` (token clip, the paper's eps 0.2 / 0.2) or ``gspo_loss`` (sequence clip,
  the demo's eps 0.02 / 0.03, ``config.DEMO_GSPO_EPS``, not the paper's 3e-4 / 4e-4: sized for
  completions of a few tokens whose every token moves; run.json says whose eps a run used), both
  with ``reduction="seq_mean_token_mean"``, so the two runs differ only in the ratio and clip
  unit. No KL penalty by default (``kl_coef=0``): the KL to pi_ref is measured, not optimised.
  Each run's recorder measures both units with the same ranges (``DemoConfig.clip_ranges``).
* Every optimizer step goes to ``RunRecorder.log_step`` with the minibatch's rewards (P_mb, G),
  current / old / reference log-probabilities (B, T), mask, advantages, the ``LossOutput``, the
  policy's per-token entropy, the truncated flags, the completions' text ("rev abc = cba<eos>"),
  the rollout index and policy lag, the sampler's own log-probs (from the KV-cached sampling pass:
  equal to the trainer's up to float rounding) and extras (lr, grad_norm).
* Faults (``--inject NAME[@STEP]``, ``faults``): known failures of a loop, each one named
  transform, to prove the Health checks (``bench/bench_health.py``).

For benchmarks and tests, ``train(DemoConfig(...), recorder)`` runs one loop with a ``RunRecorder``
(or None), and ``build(config)`` returns the task, policy and reference policy.

Modules: ``config`` (``DemoConfig``, ``Session``: every setting, declared once), ``cli`` (the
command line, generated from them), ``loop`` (``build``, ``train`` and its steps), ``policy`` (the
transformer, its sampler and log-probabilities), ``task`` (prompts and the checker), ``faults``
(``--inject``), ``report`` (header, progress line, results table, phases).
"""

from __future__ import annotations

from .cli import main, parse_args, record_run, run
from .config import ALGORITHMS, DemoConfig, Session
from .loop import RunResult, StepStats, build, train, warm_start
from .report import ProgressLine, results_table

__all__ = [
    "ALGORITHMS",
    "DemoConfig",
    "ProgressLine",
    "RunResult",
    "Session",
    "StepStats",
    "build",
    "main",
    "parse_args",
    "record_run",
    "run",
    "results_table",
    "train",
    "warm_start",
]
