"""One optimizer step's captured TRL micro-batches as one batch (``_StepRows``), for
``training_hooks.trl``; no TRL import. ``_concat`` joins verl's micro-batches too."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


def _concat(buffer: list[dict[str, torch.Tensor]], key: str) -> torch.Tensor:
    """``key`` of every microbatch (each holds it), concatenated; (B, T) tensors right-padded
    with 0 to the widest T."""
    T = max(mb["logps"].shape[1] for mb in buffer)
    parts = []
    for mb in buffer:
        x = mb[key]
        if x.dim() == 2 and x.shape[1] < T:
            x = torch.nn.functional.pad(x, (0, T - x.shape[1]))
        parts.append(x)
    return torch.cat(parts)


@dataclass(frozen=True)
class _StepRows:
    """One optimizer step's microbatches as one batch: ``rows[key]`` is ``key`` of every row in
    generation order (group by group), without the groups that hold an empty completion."""

    buffer: list[dict[str, torch.Tensor]]
    order: torch.Tensor  # (B,) concatenation row of each generation index
    keep_B: torch.Tensor | None  # (B,) bool, rows of the kept groups; None: every group kept
    dropped_groups: int
    _taken: dict[str, torch.Tensor | None] = field(default_factory=dict, repr=False)

    @classmethod
    def assemble(cls, buffer: list[dict[str, torch.Tensor]], G: int) -> _StepRows | str:
        """The step's rows, or why they cannot be recorded (the end of a warning)."""
        index = _concat(buffer, "index")
        order = torch.argsort(index)  # back to generation order: group by group
        index = index[order]
        B = index.numel()
        if B % G or not torch.equal(index, torch.arange(B, device=index.device)):
            return " did not hold whole groups once each"
        mask = _concat(buffer, "mask")[order]
        keep_P = (mask.sum(1) > 0).reshape(B // G, G).all(1)  # (P,) groups with no empty row
        dropped = int((~keep_P).sum())
        if dropped == B // G:
            return ": every group holds an empty completion"
        keep_B = keep_P.repeat_interleave(G) if dropped else None
        return cls(buffer, order, keep_B, dropped)

    def texts(self, texts: list[str | None]) -> list[str | None]:
        """The step's completions' text, rows as ``self[key]`` (``texts`` by generation index)."""
        keep = None if self.keep_B is None else self.keep_B.tolist()
        return [t for i, t in enumerate(texts) if keep is None or keep[i]]

    def need(self, key: str) -> torch.Tensor:
        """``self[key]`` of a key every captured microbatch holds (else a clear error)."""
        if (x := self[key]) is None:
            raise RuntimeError(f"gspo-dash: a captured TRL microbatch has no {key!r}")
        return x

    def __getitem__(self, key: str) -> torch.Tensor | None:
        if key not in self._taken:
            x = _concat(self.buffer, key) if all(key in mb for mb in self.buffer) else None
            if x is not None:
                x = x[self.order] if self.keep_B is None else x[self.order][self.keep_B]
            self._taken[key] = x
        return self._taken[key]
