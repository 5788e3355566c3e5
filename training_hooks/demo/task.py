"""The demo's synthetic verifiable task: short string transformations with a binary checker.

A prompt asks for one transformation of a short string over a small alphabet (default ``abc``)::

    copy  bca =   ->  bca<eos>        rev  bca =   ->  acb<eos>
    sort  bca =   ->  abc<eos>        dup  bc  =   ->  bbcc<eos>

The checker gives reward 1 when the completion ends with ``<eos>`` (it was not truncated) and the
symbols before it equal the target exactly, else 0. Difficulty varies with the operation and the
string length (a 1-symbol ``copy`` is nearly free, a 4-symbol ``rev`` is hard for a random policy),
so a batch holds all-correct, all-wrong (zero-variance) and mixed groups, and the mix shifts as the
policy learns.

Token ids: the policy's actions come first (``EOS = 0``, then the symbols), so the policy head
outputs ``num_actions`` logits and can only emit an alphabet symbol or ``<eos>``. Prompt-only
tokens (``<pad>``, ``<bos>``, ``=``, the operation names) follow. Prompts are left-padded with
``<pad>`` to one length, so every completion starts at the same position.

Torch-free apart from ``encode_prompts``; the checker is plain Python so tests can state cases.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

OPS = ("copy", "rev", "sort", "dup")


def target(op: str, symbols: str) -> str:
    """The string the checker accepts for ``op`` applied to ``symbols``."""
    if op == "copy":
        return symbols
    if op == "rev":
        return symbols[::-1]
    if op == "sort":
        return "".join(sorted(symbols))
    if op == "dup":
        return "".join(c + c for c in symbols)
    raise ValueError(f"op must be one of {OPS}, got {op!r}")


@dataclass(frozen=True)
class Prompt:
    op: str
    symbols: str

    @property
    def text(self) -> str:
        return f"{self.op} {self.symbols} ="

    @property
    def answer(self) -> str:
        return target(self.op, self.symbols)


class Task:
    """Vocabulary, prompt sampler and checker of the demo task; the arguments are the
    ``DemoConfig`` fields of the same names (``ops`` a subset of ``OPS``)."""

    def __init__(
        self,
        alphabet: str = "abc",
        ops: Sequence[str] = ("copy", "rev", "sort"),
        min_len: int = 1,
        max_len: int = 4,
    ) -> None:
        if len(set(alphabet)) != len(alphabet) or not alphabet:
            raise ValueError(f"alphabet must be distinct characters, got {alphabet!r}")
        for op in ops:
            if op not in OPS:
                raise ValueError(f"ops must be a subset of {OPS}, got {tuple(ops)!r}")
        if not 1 <= min_len <= max_len:
            raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
        self.alphabet = alphabet
        self.ops = tuple(ops)
        self.min_len = min_len
        self.max_len = max_len
        # actions first: <eos> = 0, symbols 1..S; then prompt-only tokens
        self.EOS = 0
        self.sym_id = {c: i + 1 for i, c in enumerate(alphabet)}
        self.num_actions = 1 + len(alphabet)
        self.PAD = self.num_actions
        self.BOS = self.PAD + 1
        self.SEP = self.PAD + 2
        self.op_id = {op: self.PAD + 3 + i for i, op in enumerate(self.ops)}
        self.vocab_size = self.PAD + 3 + len(self.ops)
        self.prompt_len = self.max_len + 3  # <bos> op s_1..s_L =

    @property
    def longest_answer(self) -> int:
        """Symbols in the longest target (``dup`` doubles the string)."""
        return max(len(target(op, "a" * self.max_len)) for op in self.ops)

    def sample_prompts(self, n: int, rng: random.Random) -> list[Prompt]:
        """``n`` prompts: operation and length uniform, symbols uniform."""
        out = []
        for _ in range(n):
            op = rng.choice(self.ops)
            length = rng.randint(self.min_len, self.max_len)
            out.append(Prompt(op, "".join(rng.choice(self.alphabet) for _ in range(length))))
        return out

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        """Left-padded token ids, length ``prompt_len``."""
        ids = [self.BOS, self.op_id[prompt.op], *(self.sym_id[c] for c in prompt.symbols), self.SEP]
        return [self.PAD] * (self.prompt_len - len(ids)) + ids

    def encode_prompts(self, prompts: Sequence[Prompt]):
        """(N, prompt_len) int64 tensor of the prompts' ids."""
        import torch

        return torch.tensor([self.prompt_ids(p) for p in prompts], dtype=torch.long)

    def demonstration(
        self, prompt: Prompt, rng: random.Random, max_new_tokens: int, noise: float = 0.0
    ) -> list[int]:
        """A teacher's completion (action ids) for the warm-start: the answer, then ``<eos>``.

        With probability ``noise`` the teacher errs, one of three ways with equal odds: a wrong
        symbol, a wrong length (one symbol dropped or added), or rambling on without ``<eos>``
        for all ``max_new_tokens`` (a truncated completion). The result is cut to
        ``max_new_tokens``.
        """
        ids = [self.sym_id[c] for c in prompt.answer]
        if noise and rng.random() < noise:
            kind = rng.randrange(3)
            if kind == 0:
                i = rng.randrange(len(ids))
                ids[i] = rng.choice([a for a in self.sym_id.values() if a != ids[i]])
            elif kind == 1:
                if len(ids) > 1 and rng.random() < 0.5:
                    del ids[rng.randrange(len(ids))]
                else:
                    ids.insert(rng.randrange(len(ids) + 1), rng.choice(list(self.sym_id.values())))
            else:
                ids += [rng.choice(list(self.sym_id.values())) for _ in range(max_new_tokens)]
                return ids[:max_new_tokens]
        return (ids + [self.EOS])[:max_new_tokens]

    def decode(self, actions: Sequence[int], truncated: bool) -> str:
        """Completion text: the symbols, then ``<eos>`` (or ``...`` when truncated)."""
        chars = []
        for a in actions:
            if a == self.EOS:
                break
            chars.append(self.alphabet[a - 1])
        return "".join(chars) + ("..." if truncated else "<eos>")

    def check(self, prompt: Prompt, actions: Sequence[int], truncated: bool) -> float:
        """1.0 if the completion is ``target + <eos>`` and was not truncated, else 0.0.

        ``actions`` are the completion's action ids up to and including ``<eos>`` (anything after
        the first ``<eos>`` is ignored).
        """
        if truncated:
            return 0.0
        out = []
        for a in actions:
            if a == self.EOS:
                break
            if not 1 <= a <= len(self.alphabet):
                raise ValueError(f"actions: {a} is not an action id (0..{len(self.alphabet)})")
            out.append(self.alphabet[a - 1])
        else:
            return 0.0  # no <eos>
        return 1.0 if "".join(out) == prompt.answer else 0.0
