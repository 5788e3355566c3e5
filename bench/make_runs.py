"""Generate schema-conforming synthetic gspo-dash runs (for the dashboard's tests and benchmark).

    python bench/make_runs.py OUT_ROOT --runs 20 --steps 5000 --groups 16 --group-size 16
    python bench/make_runs.py s3://bucket/prefix --runs 2000 --steps 10 --groups 4 --group-size 8

OUT_ROOT is a local folder or an object-store URI (``training_hooks.storage``: credentials and
endpoint from the environment, e.g. ``AWS_ENDPOINT_URL``); runs are written by ``--workers``
threads at once (default 1 locally, 16 on an object store).

Each run is written exactly as the hooks lay it out (``training_hooks/schema.py``): ``run.json``,
``steps/``, ``sequences/`` and (optionally) ``tokens/`` Parquet parts with the schema's Arrow
types and version metadata. The per-sequence rows are drawn first (binary rewards per group,
group-normalised advantages, sequence log-ratios whose spread depends on the algorithm), and the
step table is aggregated from them, so the two tables agree the way the recorder's do.

Dynamics (per run, seeded): reward rises along a logistic curve, zero-variance groups grow as the
policy saturates, lengths drift, GRPO's sequence log-ratios are ~30x wider than GSPO's (GSPO clips
a sequence when s leaves [1-3e-4, 1+4e-4], so its sequence clip fraction sits near 10-20%),
and a few steps carry a log-ratio/KL spike.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if __name__ == "__main__":  # a script: this checkout's packages (an importer chose its own,
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # e.g. bench_scale --code)
from gspo_metrics.spec import GRPO_EPS, GSPO_EPS  # noqa: E402
from training_hooks import schema, storage  # noqa: E402
from training_hooks.schema import (  # noqa: E402
    SEQUENCES_DIR,
    STATUS_FINISHED,
    STATUS_RUNNING,
    STEPS_DIR,
    TOKENS_DIR,
    RunInfo,
    Seq,
    Step,
    Tok,
)

STEPS_PER_PART = 500
#: A GSPO run's token-unit range here: DAPO's clip-higher (eps_high 0.28), so the two algorithms'
#: runs do not share every setting.
CLIP_HIGHER_EPS = (GRPO_EPS[0], 0.28)
MAX_LEN = 512  # completion length limit: longer draws are truncated


def _write(table: pa.Table, folder: str, first: int, last: int, seq: int) -> None:
    storage.makedirs(folder)
    name = schema.part_name(first, last, 0, seq)
    with storage.atomic_path(storage.join(folder, name)) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=64 * 1024)


@dataclass(frozen=True)
class Draws:
    """A run's per-sequence numbers, (S, B) with B = P * G rows group by group (rewards (S, P, G)).

    Drawn in one fixed order from one generator, so a seed gives the same run every time.
    """

    P: int
    G: int
    t: np.ndarray  # (S,) training progress 0 -> 1
    rewards: np.ndarray  # (S, P, G) binary
    std_spg: np.ndarray  # (S, P, 1) the group's reward std
    adv: np.ndarray  # (S, P, G) group-normalised
    length: np.ndarray  # (S, B) int32, at most MAX_LEN
    truncated: np.ndarray  # (S, B) bool
    spike_mul: np.ndarray  # (S,) 25 on the spike steps, else 1
    seq_lr: np.ndarray  # (S, B) sequence log-ratio
    tok_std: np.ndarray  # (S, B) token log-ratio spread
    tmin: np.ndarray
    tmax: np.ndarray
    tok_clip: np.ndarray
    tok_low: np.ndarray
    tok_high: np.ndarray
    seq_clipped: np.ndarray
    seq_clip_low: np.ndarray
    seq_clip_high: np.ndarray
    kl_ref: np.ndarray
    kl_old: np.ndarray
    entropy: np.ndarray

    @property
    def adv_sb(self) -> np.ndarray:
        return self.adv.reshape(len(self.t), -1)


def _draw_rewards(rng, steps: int, P: int, G: int) -> tuple[np.ndarray, ...]:
    """Progress t, binary rewards around a logistic skill curve, their group std and advantages."""
    t = np.arange(steps, dtype=np.int64) / max(steps - 1, 1)
    skill = 1 / (1 + np.exp(-(t - 0.45) * 8)) * (0.75 + 0.1 * rng.random())  # (steps,)
    # per-group success probability around the step's skill
    p_sg = np.clip(skill[:, None] + rng.normal(0, 0.25, (steps, P)), 0.01, 0.99)
    rewards = (rng.random((steps, P, G)) < p_sg[:, :, None]).astype(np.float32)  # (S, P, G)
    mean_spg = rewards.mean(-1, keepdims=True)
    std_spg = rewards.std(-1, keepdims=True)
    adv = ((rewards - mean_spg) / (std_spg + 1e-4)).astype(np.float32)
    return t, rewards, std_spg, adv


def _draw_ratios(rng, t, length, adv_sb, gspo: bool, spikes: int, on_policy: bool) -> dict:
    """Sequence and token log-ratios (GRPO's ~30x wider than GSPO's, a few spike steps), the
    clip fractions they imply in both units, and the spike multiplier."""
    steps, B = length.shape
    scale = 0.0 if on_policy else (2.2e-4 if gspo else 1.2e-2)
    spike_steps = rng.choice(steps, size=min(spikes, steps), replace=False) if spikes else []
    spike_mul = np.ones(steps)
    for s in spike_steps:
        spike_mul[s] = 25.0
    seq_lr = (rng.normal(0, 1, (steps, B)) * scale * spike_mul[:, None]).astype(np.float32)
    # token log-ratio spread: sqrt-length law, GRPO wider
    tok_std = (
        np.abs(rng.normal(0.08 if not gspo else 0.05, 0.02, (steps, B))) * (scale > 0)
    ).astype(np.float32)
    tmin = seq_lr - tok_std * (2.0 + 0.5 * np.log(length))
    tmax = seq_lr + tok_std * (2.0 + 0.5 * np.log(length))
    tok_clip = np.clip(tok_std * 0.05 + rng.normal(0, 0.002, (steps, B)), 0, 1).astype(np.float32)
    lo, hi = math.log1p(-GSPO_EPS[0]), math.log1p(GSPO_EPS[1])
    return {
        "spike_mul": spike_mul,
        "seq_lr": seq_lr,
        "tok_std": tok_std,
        "tmin": tmin,
        "tmax": tmax,
        "tok_clip": tok_clip,
        "tok_low": (tok_clip * (adv_sb < 0)).astype(np.float32),
        "tok_high": (tok_clip * (adv_sb > 0)).astype(np.float32),
        "seq_clipped": (seq_lr < lo) | (seq_lr > hi),
        "seq_clip_low": ((seq_lr < lo) & (adv_sb < 0)).astype(np.float32),
        "seq_clip_high": ((seq_lr > hi) & (adv_sb > 0)).astype(np.float32),
    }


def draw(rng, steps: int, P: int, G: int, *, gspo: bool, spikes: int, on_policy: bool) -> Draws:
    """Every per-sequence number of a run: rewards, lengths, ratios, then KL and entropy."""
    B = P * G
    t, rewards, std_spg, adv = _draw_rewards(rng, steps, P, G)
    base_len = 120 + 200 * t + 40 * np.sin(t * 7)
    length = np.maximum(rng.normal(base_len[:, None], 60, (steps, B)), 4).astype(np.int32)
    truncated = length >= MAX_LEN
    length = np.minimum(length, MAX_LEN)
    r = _draw_ratios(rng, t, length, adv.reshape(steps, B), gspo, spikes, on_policy)
    kl_ref = (
        0.002 + 0.05 * t[:, None] * rng.random((steps, B)) * r["spike_mul"][:, None] ** 0.5
    ).astype(np.float32)
    kl_old = (0.5 * r["seq_lr"].astype(np.float64) ** 2 + 0.5 * r["tok_std"] ** 2).astype(
        np.float32
    )
    entropy = (1.2 - 0.6 * t[:, None] + rng.normal(0, 0.1, (steps, B))).astype(np.float32)
    return Draws(
        P,
        G,
        t,
        rewards,
        std_spg,
        adv,
        length,
        truncated,
        kl_ref=kl_ref,
        kl_old=kl_old,
        entropy=entropy,
        **r,
    )


def _run_info(
    run_id: str,
    algorithm: str,
    d: Draws,
    *,
    seed: int,
    status: str,
    start: float,
    updated_at: float | None,
) -> RunInfo:
    steps = len(d.t)
    gspo = algorithm == "gspo"
    end = start + steps * 2.0
    return RunInfo(
        run_id=run_id,
        name=run_id,
        algorithm=algorithm,
        seq_eps_low=GSPO_EPS[0],
        seq_eps_high=GSPO_EPS[1],
        token_eps_low=(CLIP_HIGHER_EPS if gspo else GRPO_EPS)[0],
        token_eps_high=(CLIP_HIGHER_EPS if gspo else GRPO_EPS)[1],
        reduction="seq_mean_token_mean" if gspo else "token_mean",
        group_size=d.G,
        config={"lr": 1e-6 * (1 + seed % 3), "groups": d.P, "group_size": d.G, "max_len": MAX_LEN},
        created_at=start,
        updated_at=updated_at if updated_at is not None else end,
        ended_at=None if status != STATUS_FINISHED else end,
        status=status,
        last_step=steps - 1,
        source="gspo_dash",
        host="bench",
        flush_interval_s=5.0,
    )


def sequence_columns(d: Draws) -> dict[str, np.ndarray]:
    """The sequence table's columns (all but the run id and the completion), (S * B,) each."""
    steps, B = d.length.shape
    n = steps * B
    return {
        Seq.SCHEMA_VERSION: np.full(n, schema.SCHEMA_VERSION, np.int16),
        Seq.STEP: np.repeat(np.arange(steps, dtype=np.int64), B),
        Seq.RANK: np.zeros(n, np.int32),
        Seq.GROUP: np.tile(np.repeat(np.arange(d.P, dtype=np.int32), d.G), steps),
        Seq.SAMPLE: np.tile(np.arange(d.G, dtype=np.int32), steps * d.P),
        Seq.LENGTH: d.length.ravel(),
        Seq.TRUNCATED: d.truncated.ravel(),
        Seq.REWARD: d.rewards.ravel(),
        Seq.ADVANTAGE: d.adv.ravel(),
        Seq.SEQ_LOG_RATIO: d.seq_lr.ravel(),
        Seq.SEQ_CLIPPED: d.seq_clipped.ravel(),
        Seq.SEQ_CLIP_LOW: d.seq_clip_low.ravel(),
        Seq.SEQ_CLIP_HIGH: d.seq_clip_high.ravel(),
        Seq.TOKEN_LOG_RATIO_MIN: d.tmin.ravel(),
        Seq.TOKEN_LOG_RATIO_MAX: d.tmax.ravel(),
        Seq.TOKEN_LOG_RATIO_STD: d.tok_std.ravel(),
        Seq.TOKEN_CLIP_FRACTION: d.tok_clip.ravel(),
        Seq.TOKEN_CLIP_LOW_FRACTION: d.tok_low.ravel(),
        Seq.TOKEN_CLIP_HIGH_FRACTION: d.tok_high.ravel(),
        Seq.KL_REF: d.kl_ref.ravel(),
        Seq.KL_OLD: d.kl_old.ravel(),
        Seq.ENTROPY: d.entropy.ravel(),
        Seq.NONFINITE_COUNT: np.zeros(n, np.int32),
    }


def step_columns(d: Draws, rng, start: float) -> dict[str, np.ndarray]:
    """The step table's columns but the run id and algorithm, aggregated from the sequences the
    way the recorder aggregates them (token-weighted where it weights by tokens)."""
    steps, B = d.length.shape
    step_s = np.arange(steps, dtype=np.int64)
    wall = start + step_s * 2.0 + rng.random(steps) * 0.2
    rewards, a_sb, seq_lr = d.rewards.reshape(steps, B), d.adv_sb, d.seq_lr
    w = d.length.astype(np.float64)
    tokens = w.sum(1)
    zero_var = (d.std_spg[..., 0] == 0).sum(1)

    def tw(x: np.ndarray) -> np.ndarray:  # token-weighted mean per step
        return (x * w).sum(1) / tokens

    return {
        Step.SCHEMA_VERSION: np.full(steps, schema.SCHEMA_VERSION, np.int16),
        Step.STEP: step_s,
        Step.WALL_TIME: wall,
        Step.LOSS: -(a_sb * np.exp(seq_lr)).mean(1) * 0.01 + rng.normal(0, 0.01, steps),
        Step.REWARD_MEAN: rewards.mean(1),
        Step.REWARD_STD: rewards.std(1),
        Step.ADVANTAGE_MEAN: a_sb.mean(1),
        Step.ADVANTAGE_STD: a_sb.std(1),
        Step.ADVANTAGE_ABS_MEAN: np.abs(a_sb).mean(1),
        Step.SEQ_LOG_RATIO_MEAN: seq_lr.mean(1),
        Step.SEQ_LOG_RATIO_STD: seq_lr.std(1),
        Step.SEQ_LOG_RATIO_MIN: seq_lr.min(1),
        Step.SEQ_LOG_RATIO_MAX: seq_lr.max(1),
        Step.SEQ_CLIP_FRACTION: d.seq_clipped.mean(1),
        Step.SEQ_CLIP_LOW_FRACTION: tw(d.seq_clip_low),
        Step.SEQ_CLIP_HIGH_FRACTION: tw(d.seq_clip_high),
        Step.TOKEN_CLIP_FRACTION: tw(d.tok_clip),
        Step.TOKEN_CLIP_LOW_FRACTION: tw(d.tok_low),
        Step.TOKEN_CLIP_HIGH_FRACTION: tw(d.tok_high),
        Step.TOKEN_LOG_RATIO_ABS_MAX: np.maximum(np.abs(d.tmin), np.abs(d.tmax)).max(1),
        Step.ZERO_VARIANCE_GROUPS: zero_var.astype(np.int64),
        Step.ZERO_VARIANCE_FRACTION: zero_var / d.P,
        Step.NUM_GROUPS: np.full(steps, d.P, np.int64),
        Step.NUM_SEQUENCES: np.full(steps, B, np.int64),
        Step.NUM_TOKENS: tokens.astype(np.int64),
        Step.LENGTH_MEAN: w.mean(1),
        Step.LENGTH_MIN: w.min(1),
        Step.LENGTH_MAX: w.max(1),
        Step.LENGTH_P90: np.percentile(w, 90, axis=1),
        Step.TRUNCATED_FRACTION: d.truncated.mean(1),
        Step.KL_REF_MEAN: tw(d.kl_ref),
        Step.KL_OLD_MEAN: tw(d.kl_old),
        Step.ENTROPY_MEAN: tw(d.entropy),
        Step.NONFINITE_COUNT: np.zeros(steps, np.int64),
        Step.NUM_RANKS: np.ones(steps, np.int64),
    }


def extra_columns(d: Draws, rng, extra: tuple[str, ...], lr: float) -> dict[str, np.ndarray]:
    """The extra step columns asked for: ``grad_norm`` (spiking with the ratios), ``learning_rate``."""
    steps = len(d.t)
    out = {}
    if "grad_norm" in extra:
        out["grad_norm"] = np.abs(rng.normal(0.5, 0.15, steps)) * d.spike_mul**0.5
    if "learning_rate" in extra:
        out["learning_rate"] = np.full(steps, lr)
    return out


def _table(cols: dict, sch: pa.Schema) -> pa.Table:
    """Columns not synthesised here (schema v2's lag/sampler columns) are null."""
    n = len(next(iter(cols.values())))
    arrays = {
        f.name: pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(n, f.type)
        for f in sch
    }
    return pa.table(arrays).replace_schema_metadata(sch.metadata)


def make_run(
    root: str | os.PathLike,
    run_id: str,
    *,
    algorithm: str = "gspo",
    steps: int = 200,
    groups: int = 4,
    group_size: int = 8,
    seed: int = 0,
    tokens_per_step: int = 4,
    completions: bool = False,
    status: str = STATUS_FINISHED,
    updated_at: float | None = None,
    extra: tuple[str, ...] = ("grad_norm", "learning_rate"),
    spikes: int = 2,
    on_policy: bool = False,
    start_time: float | None = None,
    steps_per_part: int = STEPS_PER_PART,
    summary: bool = True,
    config: dict | None = None,
) -> str:
    """Write one run under ``root/run_id`` (a folder or an object-store URI); returns its path.
    ``summary``: a run not running gets the summary its recorder would have written at close
    (``training_hooks.run_summary``). ``config``: more settings in run.json's config (a stated seed).
    """
    rng = np.random.default_rng(seed)
    run_dir = storage.join(root, run_id)
    storage.makedirs(run_dir)
    start = start_time if start_time is not None else time.time() - steps * 2.0
    d = draw(
        rng, steps, groups, group_size, gspo=algorithm == "gspo", spikes=spikes, on_policy=on_policy
    )
    info = _run_info(
        run_id, algorithm, d, seed=seed, status=status, start=start, updated_at=updated_at
    )
    if config:
        info = dataclasses.replace(info, config={**info.config, **config})
    schema.write_json_atomic(storage.join(run_dir, schema.RUN_JSON), info.to_json())
    seq_cols = sequence_columns(d)
    step_cols = step_columns(d, rng, start)
    extras = extra_columns(d, rng, extra, info.config["lr"])
    step_cols.update(extras)
    step_schema = schema.step_schema(tuple(extras))
    B = groups * group_size
    for part, first in enumerate(range(0, steps, steps_per_part)):
        last = min(first + steps_per_part, steps) - 1
        k = last + 1 - first
        cols = {c: v[first : last + 1] for c, v in step_cols.items()}
        cols[Step.RUN_ID] = np.full(k, run_id, object)
        cols[Step.ALGORITHM] = np.full(k, algorithm, object)
        _write(_table(cols, step_schema), storage.join(run_dir, STEPS_DIR), first, last, part)

        cols = {c: v[first * B : (last + 1) * B] for c, v in seq_cols.items()}
        cols[Seq.RUN_ID] = np.full(k * B, run_id, object)
        if completions:
            texts = [_completion(i, int(r)) for i, r in enumerate(cols[Seq.REWARD])]
            cols[Seq.COMPLETION] = np.array(texts, object)
        else:
            cols[Seq.COMPLETION] = np.full(k * B, None, object)
        folder = storage.join(run_dir, SEQUENCES_DIR)
        _write(_table(cols, schema.sequence_schema()), folder, first, last, part)

        if tokens_per_step:
            table = _token_table(rng, run_id, first, last, d, tokens_per_step)
            _write(table, storage.join(run_dir, TOKENS_DIR), first, last, part)
    if summary and status != STATUS_RUNNING:
        from training_hooks.run_summary import summarise_run

        info.summary = summarise_run(run_dir, info)
        schema.write_json_atomic(storage.join(run_dir, schema.RUN_JSON), info.to_json())
    return run_dir


def _completion(i: int, reward: int) -> str:
    if i % 7 == 0:
        return "<b>not bold</b> **not bold** <script>alert(1)</script>\nThe answer is 42."
    return f"Let me think step by step.\nSample {i}: the answer is {42 if reward else 41}."


def _token_table(rng, run_id: str, first: int, last: int, d: Draws, k: int) -> pa.Table:
    """Per-token log-ratios of ``k`` random sequences per step (the dashboard's token view)."""
    tok_schema = schema.token_schema()
    rows = {f.name: [] for f in tok_schema}
    G, B = d.G, d.P * d.G
    seq_lr, length, tok_std, adv = d.seq_lr, d.length, d.tok_std, d.adv
    for s in range(first, last + 1):
        for b in rng.choice(B, size=min(k, B), replace=False):
            L = int(min(length[s, b], 256))
            if s == first and b == 0 or (s * 31 + b) % 97 == 0:
                # the explainer's case: token ratios [4, .5, .5, 1] -> s = 1 (log s = 0)
                lr = np.log(np.array([4, 0.5, 0.5, 1.0] * max(L // 4, 1), np.float32))
                L = len(lr)
            else:
                lr = rng.normal(0, tok_std[s, b] + 1e-6, L).astype(np.float32)
                lr += seq_lr[s, b] - lr.mean()
            rows[Tok.SCHEMA_VERSION].append(schema.SCHEMA_VERSION)
            rows[Tok.RUN_ID].append(run_id)
            rows[Tok.STEP].append(s)
            rows[Tok.RANK].append(0)
            rows[Tok.GROUP].append(int(b // G))
            rows[Tok.SAMPLE].append(int(b % G))
            rows[Tok.TOKEN_LOG_RATIOS].append(lr)
            rows[Tok.ADVANTAGES].append(np.full(L, adv.reshape(-1, B)[s, b], np.float32))
            rows[Tok.TOKENS].append(None)
            rows[Tok.REASON].append("baseline")  # random sequences: the recorder's baseline
    return _table(rows, tok_schema)


def add_summaries(root: str) -> int:
    """Write the summary of every run under ``root`` that is not running, as its recorder would
    have at close (``training_hooks.run_summary.summarise_root``, for roots generated without them);
    returns how many were written."""
    from training_hooks.run_summary import summarise_root

    n, problems = summarise_root(root)
    if problems:
        raise RuntimeError("; ".join(problems[:5]))
    return n


def make_root(
    root: str | os.PathLike,
    runs: int = 20,
    steps: int = 5000,
    groups: int = 16,
    group_size: int = 16,
    tokens_per_step: int = 2,
    workers: int | None = None,
    summary: bool = True,
) -> list[str]:
    """``runs`` runs alternating GRPO and GSPO (names ``grpo-00``, ``gspo-01``, ...), written by
    ``workers`` threads (default: 1 locally, 16 on an object store, where writes wait on the
    network). ``summary=False``: run.json holds no summary (a run from another writer or an
    older gspo-dash)."""

    def one(i: int) -> str:
        algo = ("grpo", "gspo")[i % 2]
        return make_run(
            root,
            f"{algo}-{i:02d}",
            algorithm=algo,
            steps=steps,
            groups=groups,
            group_size=group_size,
            seed=i,
            tokens_per_step=tokens_per_step,
            spikes=3,
            summary=summary,
        )

    workers = workers or (16 if storage.is_uri(root) else 1)
    if workers == 1:
        return [one(i) for i in range(runs)]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, range(runs)))


#: the grouped root's configurations (``make_grouped_root``): algorithm names of the registry
GROUPED_ALGORITHMS = ("grpo", "gspo", "dapo", "cispo", "sapo")


def make_grouped_root(
    root: str | os.PathLike, configs: int = 5, seeds: int = 10, steps: int = 5000, **kw
) -> list[str]:
    """``configs`` configurations (algorithms, ``GROUPED_ALGORITHMS``) x ``seeds`` runs each, every
    run stating its seed in its config (``seed`` 0..seeds-1), named ``ALGO-sK``: what Compare
    groups by algorithm by default. ``kw``: ``make_run``'s sizes (``groups``, ``group_size``)."""
    if not 1 <= configs <= len(GROUPED_ALGORITHMS):
        raise ValueError(f"configs must be in [1, {len(GROUPED_ALGORITHMS)}], got {configs}")
    return [
        make_run(
            root,
            f"{algo}-s{k}",
            algorithm=algo,
            steps=steps,
            seed=100 * c + k,
            spikes=3,
            config={"seed": k},
            **kw,
        )
        for c, algo in enumerate(GROUPED_ALGORITHMS[:configs])
        for k in range(seeds)
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--groups", type=int, default=16)
    p.add_argument("--group-size", type=int, default=16)
    p.add_argument("--tokens-per-step", type=int, default=2)
    p.add_argument("--workers", type=int, default=None, help="runs written at once")
    p.add_argument("--no-summaries", action="store_true", help="write no summary in run.json")
    a = p.parse_args()
    t0 = time.perf_counter()
    make_root(
        a.root,
        a.runs,
        a.steps,
        a.groups,
        a.group_size,
        a.tokens_per_step,
        a.workers,
        summary=not a.no_summaries,
    )
    print(
        f"wrote {a.runs} runs x {a.steps} steps x {a.groups * a.group_size} sequences "
        f"to {a.root} in {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
