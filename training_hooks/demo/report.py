"""What the demo prints: the header, a progress line per run while it trains, the results table
and the time of each phase. Every number says what it covers (which rollouts, which steps, what
a time includes)."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gspo_metrics.spec import clip_unit_of

from .config import LOSS_PARAMS, PAPER_EPS, DemoConfig
from .faults import FAULTS, Faults
from .loop import RunResult, StepStats, field_mean


def fmt_eps(x: float) -> str:
    """3e-4 as "3e-4", 0.02 as "0.02" (Python writes 0.0003 and 2e-02)."""
    return f"{x:.0e}".replace("e-0", "e-") if x < 1e-3 else f"{x:g}"


def eps_text(eps: tuple[float, float]) -> str:
    return f"{fmt_eps(eps[0])}/{fmt_eps(eps[1])}"


def eps_whose(config: DemoConfig) -> str:
    """This run's clip range, its unit and whose it is: "0.02/0.03 per sequence, the demo's (the
    paper's: 3e-4/4e-4)"."""
    unit = "per token" if clip_unit_of(config.algorithm) == "token" else "per sequence"
    whose = {"paper": "the paper's", "demo": "the demo's", "option": "set by option"}
    text = f"{eps_text(config.eps)} {unit}, {whose[config.eps_source]}"
    if config.eps_source != "paper":
        text += f" (the paper's: {eps_text(PAPER_EPS[config.algorithm])})"
    return text


def trust_region_text(config: DemoConfig) -> str:
    """A run's trust region in the header: its clip range, or its loss's parameters."""
    if config.hard_clip:
        return f"clip range: {eps_whose(config)}"
    params = ", ".join(f"{k} {v:g}" for k, v in LOSS_PARAMS[config.algorithm].items())
    return f"no clip; {params} (config.LOSS_PARAMS)"


def faults_text(inject: Sequence[str]) -> str:
    """The injected faults, each with when it acts: "lr-spike@40 (at step 40)", or "none"."""
    if not inject:
        return "none"
    parts = []
    for i in Faults.parse(inject).injections:
        when = f"at step {i.step}" if FAULTS[i.name].at else f"from step {i.step or 0}"
        parts.append(f"{i} ({when})")
    return ", ".join(parts)


def run_label(config: DemoConfig, seeds: int = 1) -> str:
    """A run in the demo's printout: its algorithm, and "sSEED" when there are several seeds."""
    return config.algorithm if seeds == 1 else f"{config.algorithm} s{config.seed}"


def header(configs: Sequence[DemoConfig], out: str, mlflow_uri: str | None) -> str:
    """What this invocation trains and records, before it starts."""
    c = configs[0]
    by_algo = {x.algorithm: x for x in configs}  # in order; its runs differ only in seed
    algos = " and ".join(a.upper() for a in by_algo)
    seeds = sorted({x.seed for x in configs})
    seeded = f"seed {c.seed}" if len(seeds) == 1 else f"{len(seeds)} seeds ({seeds[0]}-{seeds[-1]})"
    lines = [
        f"gspo-dash demo: {algos}, {c.steps} rollout steps each, {seeded}",
        f"  each rollout step: P={c.prompts_per_step} prompts x G={c.group_size} completions, "
        f"{c.minibatches} minibatches x {c.epochs} epoch(s) = {c.epochs * c.minibatches} "
        f"optimizer steps (policy lag 0..{c.epochs * c.minibatches - 1}), lr {c.lr:g}",
    ]
    lines += [f"  {x.algorithm.upper()} {trust_region_text(x)}" for x in by_algo.values()]
    lines += [
        f"  faults injected: {faults_text(c.inject)}",
        f"  recording to {out} (Parquet)"
        + (f" and {mlflow_uri} (MLflow)" if mlflow_uri else "; MLflow off"),
    ]
    return "\n".join(lines)


def _window(rollouts: Sequence[Sequence[StepStats]]) -> dict[str, float]:
    """Means over the given rollouts' optimizer steps: reward and length over all of them, the
    clip shares over the off-policy ones (NaN when there are none)."""
    steps = [s for r in rollouts for s in r]
    off = [s for s in steps if s.policy_lag > 0]
    return {
        "reward": field_mean(steps, "reward_mean"),
        "length": field_mean(steps, "length_mean"),
        "tok": field_mean(off, "token_clip_fraction"),
        "seq": field_mean(off, "seq_clip_fraction"),
    }


def _pct(x: float, digits: int = 1) -> str:
    return "n/a" if math.isnan(x) else f"{100 * x:.{digits}f}%"


class ProgressLine:
    """One status line per run, rewritten in place on a terminal (a plain line every 10% of the
    run otherwise). Each value says what it covers::

        grpo [####      ] 20/50 | 3.1 rollouts/s over rollouts 2-20 | rollouts 11-20: reward 0.47,
        off-policy clip 1.2% of tokens, 14% of sequences, length 3.4

    The rate leaves out the first rollout step, which pays one-time costs (the first calls of
    torch's ops).
    """

    WINDOW = 10  # rollout steps the values average over

    def __init__(self, label: str, total: int, stream=None) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.first_done: float | None = None  # when the first rollout step ended
        self.last = 0.0
        self.rollouts: list[list[StepStats]] = []

    def __call__(self, rollout: int, stats: Sequence[StepStats]) -> None:
        self.rollouts.append(list(stats))
        done = rollout + 1
        now = time.perf_counter()
        if self.first_done is None:
            self.first_done = now
        final = done == self.total
        if self.tty and not final and now - self.last < 0.2:
            return
        if not self.tty and not final and done % max(1, self.total // 10):
            return
        self.last = now
        line = self.line(done, now)
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        if self.tty and final:
            self.stream.write("\n")
        self.stream.flush()

    def line(self, done: int, now: float) -> str:
        width = 10
        bar = "#" * (width * done // self.total)
        if done > 1:
            if self.first_done is None:
                raise RuntimeError("the progress line of a rollout past the first before the first")
            over = "rollout 2" if done == 2 else f"rollouts 2-{done}"
            rate = f"{(done - 1) / max(now - self.first_done, 1e-9):.1f} rollouts/s over {over}"
        else:
            rate = "rate from rollout 2 on"
        lo = max(1, done - self.WINDOW + 1)
        w = _window(self.rollouts[lo - 1 : done])
        span = f"rollout {done}" if lo == done else f"rollouts {lo}-{done}"
        return (
            f"{self.label:4s} [{bar:<{width}}] {done}/{self.total} | {rate} | {span}: "
            f"reward {w['reward']:.2f}, off-policy clip {_pct(w['tok'])} of tokens, "
            f"{_pct(w['seq'], 0)} of sequences, length {w['length']:.1f}"
        )


def _first_last(r: RunResult, name: str) -> tuple[float, float]:
    """Mean of a ``StepStats`` field over the optimizer steps of the first and last fifth of the
    rollout steps."""
    k = r.fifth_size()
    last_from = len(r.rollout_rewards) - k
    first = [s for s in r.stats if s.rollout < k]
    last = [s for s in r.stats if s.rollout >= last_from]
    return field_mean(first, name), field_mean(last, name)


def results_table(results: Sequence[RunResult], seeds: int = 1) -> str:
    """The end-of-demo table: reward first vs last fifth, the off-policy clip shares in both
    units, entropy and truncation first vs last fifth, the training time and rate; then what
    each column covers. One row per run (``run_label``: with its seed when ``seeds`` > 1)."""
    names = [run_label(r.config, seeds) for r in results]
    w = max(4, *(len(n) for n in names))
    head = (
        f"{'algo':{w}s} {'reward 1st 1/5':>14s} {'last 1/5':>8s} {'tok clip*':>9s} "
        f"{'seq clip*':>9s} {'entropy 1st/last':>16s} {'trunc 1st/last':>14s} "
        f"{'train s':>7s} {'rollouts/s':>10s}"
    )
    lines = [head]
    for name, r in zip(names, results, strict=True):
        first, last = r.fifths()
        e0, e1 = _first_last(r, "entropy_mean")
        t0, t1 = _first_last(r, "truncated_fraction")
        lines.append(
            f"{name:{w}s} {first:14.3f} {last:8.3f} "
            f"{_pct(r.mean('token_clip_fraction', True), 2):>9s} "
            f"{_pct(r.mean('seq_clip_fraction', True)):>9s} "
            f"{f'{e0:.2f}/{e1:.2f}':>16s} {f'{t0:.3f}/{t1:.3f}':>14s} "
            f"{r.train_time:7.1f} {r.rollouts_per_s:10.1f}"
        )
    n = len(results[0].rollout_rewards)
    k = results[0].fifth_size()
    every = "both runs" if len(results) == 2 else ("the run" if len(results) == 1 else "every run")
    ranges = {(c["seq_eps"], c["token_eps"]) for c in (r.config.clip_ranges() for r in results)}
    lines.append(
        f"1/5: rollout steps 1-{k} and {n - k + 1}-{n} of {n}; "
        "*: off-policy optimizer steps only (policy lag >= 1; an on-policy step has ratio 1)"
    )
    for seq, tok in sorted(ranges):
        lines += [
            f"tok clip: share of tokens whose own ratio is outside [{1 - tok[0]:g}, "
            f"{1 + tok[1]:g}] (GRPO's unit and ε)",
            f"seq clip: share of sequences whose s = exp(mean token log-ratio) is outside "
            f"[{1 - seq[0]:g}, {1 + seq[1]:g}] (GSPO's unit, the demo's ε)",
        ]
    lines += [
        f"both units are measured on {every}, each hard-clip algorithm clips in its own "
        "(CISPO and SAPO clip in neither)",
        "train s: the rollout loop (sampling, updates, log_step), first rollout included; "
        "rollouts/s: rollout steps 2 on (the first pays one-time costs); start-up, warm start "
        "and writing are timed apart (below)",
    ]
    if len({r.config.inject for r in results}) > 1:
        lines += [
            f"faults injected in {r.config.algorithm}: {faults_text(r.config.inject)}"
            for r in results
        ]
    elif results[0].config.inject:
        lines.append(f"faults injected in {every}: {faults_text(results[0].config.inject)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Phase:
    """One phase of the invocation: its name, wall seconds and what it includes."""

    name: str
    seconds: float
    what: str


def phases_text(phases: Sequence[Phase], total: float | None) -> str:
    """The time of each phase, one per line, then the total (None: not measured)."""
    width = max(len(p.name) for p in phases)
    lines = ["time (wall clock, s):"]
    lines += [f"  {p.name:<{width}s} {p.seconds:6.1f}  {p.what}" for p in phases]
    if total is not None:
        lines.append(f"  {'total':<{width}s} {total:6.1f}  from the process's start")
    return "\n".join(lines)
