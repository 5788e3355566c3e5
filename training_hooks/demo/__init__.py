"""Train a small policy with GRPO and with GSPO on CPU, recorded by the hooks: the reference demo.

    python -m training_hooks.demo            # or: gspo-dash-demo
    streamlit run app/main.py                # then compare the two runs

What it does, per algorithm (same seed: the same initial weights and the same prompt stream):

* Policy: a causal transformer (``policy.Policy``: 2 pre-LN blocks, d_model 96, 4 heads,
  ~226k parameters, an action-only head), initialised in-process; nothing is downloaded.
* Warm start ("pretraining"): 60 supervised steps on a noisy teacher (``Task.demonstration``: 20%
  of its demonstrations have a wrong symbol, a wrong length, or never emit ``<eos>``). This leaves
  the policy partly competent, as an SFT model is when RL starts (seed 0: 36% reward, about 65%
  on 1-symbol prompts, 2-18% on 4-symbol ones, 5% truncated). The warm-started weights are computed once per process and
  shared by both runs. A frozen copy of them is the reference policy pi_ref (KL statistics).
  Departure from LLM practice: the model is tiny and so is the pretraining. ``warmup_steps=0``
  gives RL from random weights, which is far too slow to learn within the demo's budget.
* Task (``task.Task``): ``copy``/``rev``/``sort`` of a 1-4 symbol string over ``abc``, binary
  reward from an exact checker (the answer, then ``<eos>``). Completions stop at ``<eos>``
  (included in the mask) or are truncated at ``max_new_tokens = 6`` (reward 0), so lengths vary
  (1-6 tokens) and truncation is real. Easy prompts give all-correct groups, hard ones all-wrong
  groups (both zero-variance), the rest mixed ones; the mix shifts as the policy learns.
* Each step samples G = 8 completions (temperature 1, KV cache) for each of P = 16 prompts, scores
  them, and computes group-relative advantages ``group_advantages(rewards_P_G)`` (z-score within
  the group, population std, eps 1e-4; zero-variance groups get exactly 0).
* Off-policy updates: each rollout batch is split into ``minibatches = 2`` of whole groups and
  used for ``epochs = 1`` pass, one Adam step (lr 5e-5, gradient norm clipped at 1) per minibatch,
  against pi_old: the sampling policy's log-probabilities, recomputed with one forward after
  sampling. The first optimizer step of a batch is on-policy (policy lag 0, ratio exactly 1); the
  second (lag 1) sees the ratios the first update caused, so ratios leave 1 and clipping happens.
* Loss: ``grpo_loss`` (token clip, eps 0.2 / 0.2) or ``gspo_loss`` (sequence clip, the paper's
  eps 3e-4 / 4e-4), both with ``reduction="seq_mean_token_mean"``: the GSPO paper's
  normalisation and also the original GRPO formula's (1/G sum_i 1/|y_i| sum_t), so the two runs
  differ only in the ratio and clip unit. No KL penalty by default (``kl_coef=0``, as in DAPO and
  Dr. GRPO): the KL to pi_ref is measured, not optimised.
* Every optimizer step goes to ``RunRecorder.log_step`` with the minibatch's rewards (P_mb, G),
  current / old / reference log-probabilities (B, T), mask, advantages, the ``LossOutput``, the
  policy's per-token entropy, the truncated flags, the completions' text ("rev abc = cba<eos>"),
  the rollout index and policy lag, the sampler's own log-probs (from the KV-cached sampling pass:
  equal to the trainer's up to float rounding, so ``sampler_kl_mean`` is ~1e-14) and extras (lr,
  grad_norm). 8 sequences per step keep their per-token log-ratios (``token_samples``), besides
  the step's culprits, for the dashboard's token view.
* Faults (``--inject NAME[@STEP]``, ``faults``): a learning-rate spike, NaN log-probs, stale old
  log-probs, a noisy sampler, entropy collapse, length collapse, a constant reward; each one
  named transform in the loop, to prove the Health checks (``bench/bench_health.py``).
* One torch thread by default: the matrices are tiny, a second intra-op thread only spins (it
  made the loop several times slower on the 2-core machine), and the recorder's writer threads
  get the other core.

With GSPO's eps the sequence-unit clip fraction is large on the off-policy minibatches (a whole
sequence's mean log-ratio only has to move by 4e-4), while the token-unit fraction stays at a few
percent: the demo prints what it measured, both units for both runs, whatever they are.

For benchmarks and tests, ``train(DemoConfig(...), recorder)`` runs one loop with a ``RunRecorder``
(or None), and ``build(config)`` returns the task, policy and reference policy.

Modules: ``config`` (``DemoConfig``, ``Session``: every setting, declared once), ``cli`` (the
command line, generated from them), ``loop`` (``build``, ``train`` and its steps), ``policy`` (the
transformer, its sampler and log-probabilities), ``task`` (prompts and the checker), ``faults``
(``--inject``), ``report`` (progress line, summary table).
"""

from __future__ import annotations

from .cli import main, parse_args, record_run, run
from .config import ALGORITHMS, DemoConfig, Session
from .loop import RunResult, StepStats, build, train, warm_start
from .report import ProgressLine, summary_table

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
    "summary_table",
    "train",
    "warm_start",
]
