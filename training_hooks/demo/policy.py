"""The demo's policy: a small causal transformer, its sampler and its log-probabilities.

Shapes: B sequences, L = prompt_len + T input positions, T = max_new_tokens completion positions,
A = num_actions (the head only scores the task's actions: ``<eos>`` and the alphabet).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention, then a 4x GELU MLP."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(
        self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """(B, L, D) -> (B, L, D), and the keys/values (B, H, L_past + L, D/H) for a KV cache.

        With ``past`` (the keys and values of every earlier position), ``x`` must be the single
        next position, which may attend to all of them.
        """
        B, L, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        # (B, L, D) -> (B, H, L, D/H)
        q, k, v = (t.view(B, L, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        x = x + self.proj(att.transpose(1, 2).reshape(B, L, D))
        return x + self.mlp(self.ln2(x)), (k, v)


class Policy(nn.Module):
    """Causal transformer over the task vocabulary with an action-only head: (B, L) -> (B, L, A)."""

    def __init__(
        self,
        vocab_size: int,
        num_actions: int,
        max_positions: int,
        d_model: int = 96,
        n_layers: int = 2,
        n_heads: int = 4,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_positions, d_model)
        blocks = [Block(d_model, n_heads) for _ in range(n_layers)]
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_actions)
        self.logit_scale = 1.0  # an inverse temperature on every logit (1: none)
        self.apply(self._init)
        for block in blocks:  # GPT-2's scaled init of the residual projections
            # (Sequential's [] is typed Module: its third layer is the Linear built above)
            for lin in (block.proj, cast(nn.Linear, block.mlp[2])):
                nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * n_layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.forward_cached(ids)[0]

    def forward_cached(
        self, ids: torch.Tensor, past: list | None = None
    ) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """(B, L) -> logits (B, L, A) and every block's keys/values.

        Without ``past``: ids are positions 0..L-1 (causal). With ``past`` (what an earlier call
        returned): ids is the single next position (L = 1).
        """
        start = 0 if past is None else past[0][0].shape[2]
        L = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(start, start + L, device=ids.device))
        present = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if past is None else past[i])
            present.append(kv)
        logits = self.head(self.ln_f(x))
        return (logits if self.logit_scale == 1.0 else logits * self.logit_scale), present


@dataclass
class Rollout:
    """G completions of each of P prompts, rows group by group (B = P * G)."""

    ids: torch.Tensor
    """(B, prompt_len + T) int64: prompt, then the completion, ``pad_id`` after ``<eos>``."""
    actions: torch.Tensor
    """(B, T) int64: sampled action ids, ``<eos>`` (0) after the end (masked out)."""
    mask: torch.Tensor
    """(B, T) bool: the completion's tokens, ``<eos>`` included; every row has >= 1."""
    truncated: torch.Tensor
    """(B,) bool: no ``<eos>`` within T tokens."""
    sample_logprobs: torch.Tensor
    """(B, T) float32: the sampler's log-prob of each action as sampled (0 on padding): log
    pi_old up to float rounding, unless ``adjust_logits`` changed the sampler's logits."""


@torch.no_grad()
def sample(
    policy: Policy,
    prompt_ids: torch.Tensor,
    *,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    generator: torch.Generator,
    adjust_logits: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> Rollout:
    """Sample one completion per row of ``prompt_ids`` (B, prompt_len) until ``<eos>`` or T tokens.

    One causal forward over the prompts, then one position per token against a KV cache. Rows
    that have ended keep being fed ``<pad>`` (their outputs are discarded) so the batch stays
    rectangular. ``adjust_logits`` (B, A) -> (B, A), when given, changes the logits the sampler
    samples from (and reports log-probs of), not the policy's: a sampler that differs from the
    trainer.
    """
    B, Lp = prompt_ids.shape
    device = prompt_ids.device
    ids = torch.cat([prompt_ids, torch.full((B, max_new_tokens), pad_id, device=device)], dim=1)
    actions = torch.full((B, max_new_tokens), eos_id, dtype=torch.long, device=device)
    logps = torch.zeros(B, max_new_tokens, device=device)
    alive = torch.ones(B, dtype=torch.bool, device=device)
    mask = torch.zeros(B, max_new_tokens, dtype=torch.bool, device=device)
    past = None
    for t in range(max_new_tokens):
        # prefill the prompt, then feed one token at a time against the KV cache
        step_ids = ids[:, :Lp] if past is None else ids[:, Lp + t - 1 : Lp + t]
        logits, past = policy.forward_cached(step_ids, past)
        logits = logits[:, -1]  # (B, A), temperature 1
        if adjust_logits is not None:
            logits = adjust_logits(logits)
        logp = torch.log_softmax(logits.float(), dim=-1)
        a = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)
        a = torch.where(alive, a, torch.full_like(a, eos_id))
        mask[:, t] = alive
        actions[:, t] = a
        logps[:, t] = torch.where(alive, logp.gather(1, a[:, None]).squeeze(1), 0.0)
        ids[:, Lp + t] = torch.where(alive, a, torch.full_like(a, pad_id))
        alive = alive & (a != eos_id)
        if not alive.any():
            break
    return Rollout(ids, actions, mask, truncated=alive, sample_logprobs=logps)


def action_logprobs(
    policy: Policy, ids: torch.Tensor, actions: torch.Tensor, *, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(actions) (B, T) under ``policy`` from one forward over ``ids`` (B, Lp + T).

    The logits at position Lp - 1 + t score completion token t. With ``with_entropy`` also returns
    the policy's entropy per position, -sum_a p log p over the actions, detached (B, T).
    """
    T = actions.shape[1]
    logits = policy(ids[:, :-1])[:, -T:].float()  # (B, T, A)
    logp_bta = torch.log_softmax(logits, dim=-1)
    logp_B_T = logp_bta.gather(-1, actions[..., None]).squeeze(-1)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(logp_bta.exp() * logp_bta).sum(-1)
    return logp_B_T, entropy
