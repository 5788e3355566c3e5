"""What the demo prints: a progress line per run while it trains, then the summary table."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from gspo_metrics.spec import GRPO_EPS, GSPO_EPS

from .loop import RunResult, StepStats


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


def _eps(x: float) -> str:
    """3e-4 as "3e-4" (Python writes 0.0003)."""
    return f"{x:.0e}".replace("e-0", "e-")


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
    seq_lo, seq_hi = GSPO_EPS
    tok_lo, tok_hi = GRPO_EPS
    lines += [
        "seq clip: sequences whose s = exp(mean token log-ratio) is outside "
        f"[1-{_eps(seq_lo)}, 1+{_eps(seq_hi)}] (GSPO's unit)",
        f"tok clip: tokens whose own ratio is outside [{1 - tok_lo:g}, {1 + tok_hi:g}] (GRPO's unit);"
        " both units are measured on both runs",
        "*: off-policy optimizer steps only (the first step of each rollout batch has ratio 1)",
    ]
    return "\n".join(lines)
