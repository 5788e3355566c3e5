"""Where things lie in the buffers a step's diagnostics travel in.

``SEQ_ROWS``: the rows of the per-sequence stack (K, B), each named by its sequence-table column.
``Layout``: the named parts of one flat buffer (``pack``), so a step's tensors cross from the
device to the host in ONE copy and the host reads each part back by name and shape.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from gspo_metrics.spec import CALLER_VALUES, SEQUENCE_DIAGNOSTICS

#: Rows of the per-sequence stack (K, B): the caller's values, then the rows of
#: ``stacked_sequence_diagnostics``; each name is its sequence-table column.
SEQ_ROWS: tuple[str, ...] = (*CALLER_VALUES, *SEQUENCE_DIAGNOSTICS)
SEQ_ROW: dict[str, int] = {name: k for k, name in enumerate(SEQ_ROWS)}


@dataclass(frozen=True)
class Layout:
    """Where each named part lies in a packed 1-D buffer, recorded once when the parts are
    packed: ``layout["loss"]`` is the part's slice, ``layout.read(flat, "seq")`` the part in its
    shape, ``"loss" in layout`` whether it was packed."""

    parts: Mapping[str, tuple[slice, tuple[int, ...]]]
    size: int

    @classmethod
    def of(cls, shapes: Mapping[str, tuple[int, ...]]) -> Layout:
        """The layout of parts of these shapes, packed one after the other in this order."""
        return _layout(tuple(shapes.items()))

    def __contains__(self, name: object) -> bool:
        return name in self.parts

    def __getitem__(self, name: str) -> slice:
        return self.parts[name][0]

    def __iter__(self):
        return iter(self.parts)

    def read(self, flat: Any, name: str) -> Any:
        where, shape = self.parts[name]
        return flat[where].reshape(shape)


@functools.lru_cache(maxsize=64)  # (a run packs the same shapes step after step)
def _layout(shapes: tuple[tuple[str, tuple[int, ...]], ...]) -> Layout:
    sizes = [math.prod(shape) for _, shape in shapes]
    ends = list(itertools.accumulate(sizes))
    parts = {
        name: (slice(end - size, end), tuple(shape))
        for (name, shape), size, end in zip(shapes, sizes, ends, strict=True)
    }
    return Layout(parts, ends[-1] if ends else 0)


def pack(parts: Mapping[str, torch.Tensor], dtype, device) -> tuple[torch.Tensor, Layout]:
    """One flat ``dtype`` buffer of ``parts`` (converted by the copy) and its layout."""
    layout = Layout.of({name: tuple(p.shape) for name, p in parts.items()})
    flat = torch.empty(layout.size, dtype=dtype, device=device)
    torch.cat([p if p.dim() == 1 else p.reshape(-1) for p in parts.values()], out=flat)
    return flat, layout
