"""Run colours: one palette colour per run, derived from the run's key alone (stable across
processes and selections), distinct among the runs on screen while the palette lasts."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#393b79",
    "#ad494a",
    "#637939",
    "#7b4173",
    "#e7ba52",
    "#3182bd",
)


def color_slot(key: str) -> int:
    """The palette slot a run key prefers: crc32 of the key (fixed across processes, unlike
    Python's salted ``hash``) modulo the palette's size."""
    return zlib.crc32(str(key).encode("utf-8")) % len(PALETTE)


def run_colors(keys: Sequence[str], distinct: Sequence[str] = ()) -> dict[str, str]:
    """A colour per run key, derived from the key alone (``color_slot``), so a run keeps its
    colour when other runs come and go. The runs of ``distinct`` (those on screen, oldest first)
    get different colours while the palette lasts: one whose slot an earlier of them holds takes
    the next free slot, so only the later of two clashing runs moves."""
    out = {k: PALETTE[color_slot(k)] for k in keys}
    taken: set[int] = set()
    for k in dict.fromkeys(distinct):
        slot = color_slot(k)
        if len(taken) < len(PALETTE):
            while slot in taken:
                slot = (slot + 1) % len(PALETTE)
        taken.add(slot)
        out[k] = PALETTE[slot]
    return out


def rgba(hex_color: str, alpha: float) -> str:
    """``#rrggbb`` as ``rgba(r,g,b,alpha)``."""
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"
