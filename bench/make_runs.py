"""Generate schema-conforming synthetic gspo-dash runs (for the dashboard's tests and benchmark).

    python bench/make_runs.py OUT_ROOT --runs 20 --steps 5000 --groups 16 --group-size 16

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
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from training_hooks import schema  # noqa: E402
from training_hooks.schema import (  # noqa: E402
    SEQUENCES_DIR,
    STATUS_FINISHED,
    STEPS_DIR,
    TOKENS_DIR,
    RunInfo,
    Seq,
    Step,
    Tok,
)

STEPS_PER_PART = 500


def _write(table: pa.Table, folder: Path, first: int, last: int, seq: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    name = schema.part_name(first, last, 0, seq)
    tmp = folder / f".tmp-{name}"
    pq.write_table(table, tmp, compression="zstd", row_group_size=64 * 1024)
    os.replace(tmp, folder / name)


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
) -> Path:
    """Write one run under ``root/run_id`` and return its folder."""
    rng = np.random.default_rng(seed)
    run_dir = Path(root) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    P, G = groups, group_size
    B = P * G
    n = steps * B
    gspo = algorithm == "gspo"
    seq_eps = (3e-4, 4e-4)
    tok_eps = (0.2, 0.2) if not gspo else (0.2, 0.28)
    start = start_time if start_time is not None else time.time() - steps * 2.0

    step_s = np.arange(steps, dtype=np.int64)
    t = step_s / max(steps - 1, 1)
    skill = 1 / (1 + np.exp(-(t - 0.45) * 8)) * (0.75 + 0.1 * rng.random())  # (steps,)
    # per-group success probability around the step's skill
    p_sg = np.clip(skill[:, None] + rng.normal(0, 0.25, (steps, P)), 0.01, 0.99)
    rewards = (rng.random((steps, P, G)) < p_sg[:, :, None]).astype(np.float32)  # (S, P, G)
    mean_spg = rewards.mean(-1, keepdims=True)
    std_spg = rewards.std(-1, keepdims=True)
    adv = ((rewards - mean_spg) / (std_spg + 1e-4)).astype(np.float32)

    base_len = 120 + 200 * t + 40 * np.sin(t * 7)
    length = np.maximum(rng.normal(base_len[:, None], 60, (steps, B)), 4).astype(np.int32)
    max_len = 512
    truncated = length >= max_len
    length = np.minimum(length, max_len)

    scale = 2.2e-4 if gspo else 1.2e-2
    if on_policy:
        scale = 0.0
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
    tok_low = (tok_clip * (adv.reshape(steps, B) < 0)).astype(np.float32)
    tok_high = (tok_clip * (adv.reshape(steps, B) > 0)).astype(np.float32)
    lo, hi = math.log1p(-seq_eps[0]), math.log1p(seq_eps[1])
    seq_clipped = (seq_lr < lo) | (seq_lr > hi)
    a_sb = adv.reshape(steps, B)
    seq_clip_low = ((seq_lr < lo) & (a_sb < 0)).astype(np.float32)
    seq_clip_high = ((seq_lr > hi) & (a_sb > 0)).astype(np.float32)
    kl_ref = (
        0.002 + 0.05 * t[:, None] * rng.random((steps, B)) * spike_mul[:, None] ** 0.5
    ).astype(np.float32)
    kl_old = (0.5 * seq_lr.astype(np.float64) ** 2 + 0.5 * tok_std**2).astype(np.float32)
    entropy = (1.2 - 0.6 * t[:, None] + rng.normal(0, 0.1, (steps, B))).astype(np.float32)
    nonfinite = np.zeros((steps, B), np.int32)

    info = RunInfo(
        run_id=run_id,
        name=run_id,
        algorithm=algorithm,
        seq_eps_low=seq_eps[0],
        seq_eps_high=seq_eps[1],
        token_eps_low=tok_eps[0],
        token_eps_high=tok_eps[1],
        reduction="seq_mean_token_mean" if gspo else "token_mean",
        group_size=G,
        config={"lr": 1e-6 * (1 + seed % 3), "groups": P, "group_size": G, "max_len": max_len},
        created_at=start,
        updated_at=updated_at if updated_at is not None else start + steps * 2.0,
        ended_at=None if status != STATUS_FINISHED else start + steps * 2.0,
        status=status,
        last_step=steps - 1,
        source="gspo_dash",
        host="bench",
        flush_interval_s=5.0,
    )
    schema.write_json_atomic(run_dir / schema.RUN_JSON, info.to_json())

    wall = start + step_s * 2.0 + rng.random(steps) * 0.2
    seq_cols_all = {
        Seq.SCHEMA_VERSION: np.full(n, schema.SCHEMA_VERSION, np.int16),
        Seq.STEP: np.repeat(step_s, B),
        Seq.RANK: np.zeros(n, np.int32),
        Seq.GROUP: np.tile(np.repeat(np.arange(P, dtype=np.int32), G), steps),
        Seq.SAMPLE: np.tile(np.arange(G, dtype=np.int32), steps * P),
        Seq.LENGTH: length.ravel(),
        Seq.TRUNCATED: truncated.ravel(),
        Seq.REWARD: rewards.ravel(),
        Seq.ADVANTAGE: adv.ravel(),
        Seq.SEQ_LOG_RATIO: seq_lr.ravel(),
        Seq.SEQ_CLIPPED: seq_clipped.ravel(),
        Seq.SEQ_CLIP_LOW: seq_clip_low.ravel(),
        Seq.SEQ_CLIP_HIGH: seq_clip_high.ravel(),
        Seq.TOKEN_LOG_RATIO_MIN: tmin.ravel(),
        Seq.TOKEN_LOG_RATIO_MAX: tmax.ravel(),
        Seq.TOKEN_LOG_RATIO_STD: tok_std.ravel(),
        Seq.TOKEN_CLIP_FRACTION: tok_clip.ravel(),
        Seq.TOKEN_CLIP_LOW_FRACTION: tok_low.ravel(),
        Seq.TOKEN_CLIP_HIGH_FRACTION: tok_high.ravel(),
        Seq.KL_REF: kl_ref.ravel(),
        Seq.KL_OLD: kl_old.ravel(),
        Seq.ENTROPY: entropy.ravel(),
        Seq.NONFINITE_COUNT: nonfinite.ravel(),
    }
    seq_schema = schema.sequence_schema()

    # step table, aggregated from the sequences (token-weighted where the recorder weights by tokens)
    w = length.astype(np.float64)
    tokens = w.sum(1)
    zero_var = (std_spg[..., 0] == 0).sum(1)
    step_cols = {
        Step.SCHEMA_VERSION: np.full(steps, schema.SCHEMA_VERSION, np.int16),
        Step.STEP: step_s,
        Step.WALL_TIME: wall,
        Step.LOSS: -(a_sb * np.exp(seq_lr)).mean(1) * 0.01 + rng.normal(0, 0.01, steps),
        Step.REWARD_MEAN: rewards.reshape(steps, B).mean(1),
        Step.REWARD_STD: rewards.reshape(steps, B).std(1),
        Step.ADVANTAGE_MEAN: a_sb.mean(1),
        Step.ADVANTAGE_STD: a_sb.std(1),
        Step.ADVANTAGE_ABS_MEAN: np.abs(a_sb).mean(1),
        Step.SEQ_LOG_RATIO_MEAN: seq_lr.mean(1),
        Step.SEQ_LOG_RATIO_STD: seq_lr.std(1),
        Step.SEQ_LOG_RATIO_MIN: seq_lr.min(1),
        Step.SEQ_LOG_RATIO_MAX: seq_lr.max(1),
        Step.SEQ_CLIP_FRACTION: seq_clipped.mean(1),
        Step.SEQ_CLIP_LOW_FRACTION: (seq_clip_low * w).sum(1) / tokens,
        Step.SEQ_CLIP_HIGH_FRACTION: (seq_clip_high * w).sum(1) / tokens,
        Step.TOKEN_CLIP_FRACTION: (tok_clip * w).sum(1) / tokens,
        Step.TOKEN_CLIP_LOW_FRACTION: (tok_low * w).sum(1) / tokens,
        Step.TOKEN_CLIP_HIGH_FRACTION: (tok_high * w).sum(1) / tokens,
        Step.TOKEN_LOG_RATIO_ABS_MAX: np.maximum(np.abs(tmin), np.abs(tmax)).max(1),
        Step.ZERO_VARIANCE_GROUPS: zero_var.astype(np.int64),
        Step.ZERO_VARIANCE_FRACTION: zero_var / P,
        Step.NUM_GROUPS: np.full(steps, P, np.int64),
        Step.NUM_SEQUENCES: np.full(steps, B, np.int64),
        Step.NUM_TOKENS: tokens.astype(np.int64),
        Step.LENGTH_MEAN: w.mean(1),
        Step.LENGTH_MIN: w.min(1),
        Step.LENGTH_MAX: w.max(1),
        Step.LENGTH_P90: np.percentile(w, 90, axis=1),
        Step.TRUNCATED_FRACTION: truncated.mean(1),
        Step.KL_REF_MEAN: (kl_ref * w).sum(1) / tokens,
        Step.KL_OLD_MEAN: (kl_old * w).sum(1) / tokens,
        Step.ENTROPY_MEAN: (entropy * w).sum(1) / tokens,
        Step.NONFINITE_COUNT: nonfinite.sum(1).astype(np.int64),
        Step.NUM_RANKS: np.ones(steps, np.int64),
    }
    extras = {}
    if "grad_norm" in extra:
        extras["grad_norm"] = np.abs(rng.normal(0.5, 0.15, steps)) * spike_mul**0.5
    if "learning_rate" in extra:
        extras["learning_rate"] = np.full(steps, info.config["lr"])
    step_schema = schema.step_schema(tuple(extras))

    tok_schema = schema.token_schema()
    for part, first in enumerate(range(0, steps, steps_per_part)):
        last = min(first + steps_per_part, steps) - 1
        sl = slice(first, last + 1)
        k = last + 1 - first
        cols = {c: v[sl] for c, v in step_cols.items()}
        cols.update({c: v[sl] for c, v in extras.items()})
        cols[Step.RUN_ID] = np.full(k, run_id, object)
        cols[Step.ALGORITHM] = np.full(k, algorithm, object)
        table = pa.table(
            {  # columns not synthesised here (schema v2's lag/sampler) are null
                f.name: pa.array(cols[f.name], f.type) if f.name in cols else pa.nulls(k, f.type)
                for f in step_schema
            }
        ).replace_schema_metadata(step_schema.metadata)
        _write(table, run_dir / STEPS_DIR, first, last, part)

        rs = slice(first * B, (last + 1) * B)
        cols = {c: v[rs] for c, v in seq_cols_all.items()}
        cols[Seq.RUN_ID] = np.full(k * B, run_id, object)
        if completions:
            cols[Seq.COMPLETION] = np.array(
                [_completion(i, int(r)) for i, r in enumerate(cols[Seq.REWARD])], object
            )
        else:
            cols[Seq.COMPLETION] = np.full(k * B, None, object)
        table = pa.table(
            {f.name: pa.array(cols[f.name], f.type) for f in seq_schema}
        ).replace_schema_metadata(seq_schema.metadata)
        _write(table, run_dir / SEQUENCES_DIR, first, last, part)

        if tokens_per_step:
            _write(
                _token_table(
                    rng,
                    run_id,
                    first,
                    last,
                    P,
                    G,
                    seq_lr,
                    length,
                    tok_std,
                    adv,
                    tok_schema,
                    tokens_per_step,
                ),
                run_dir / TOKENS_DIR,
                first,
                last,
                part,
            )
    return run_dir


def _completion(i: int, reward: int) -> str:
    if i % 7 == 0:
        return "<b>not bold</b> **not bold** <script>alert(1)</script>\nThe answer is 42."
    return f"Let me think step by step.\nSample {i}: the answer is {42 if reward else 41}."


def _token_table(rng, run_id, first, last, P, G, seq_lr, length, tok_std, adv, tok_schema, k):
    rows = {f.name: [] for f in tok_schema}
    B = P * G
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
    return pa.table(
        {f.name: pa.array(rows[f.name], f.type) for f in tok_schema}
    ).replace_schema_metadata(tok_schema.metadata)


def make_root(
    root: str | os.PathLike,
    runs: int = 20,
    steps: int = 5000,
    groups: int = 16,
    group_size: int = 16,
    tokens_per_step: int = 2,
) -> list[Path]:
    """``runs`` runs alternating GRPO and GSPO (names ``grpo-00``, ``gspo-01``, ...)."""
    out = []
    for i in range(runs):
        algo = ("grpo", "gspo")[i % 2]
        out.append(
            make_run(
                root,
                f"{algo}-{i:02d}",
                algorithm=algo,
                steps=steps,
                groups=groups,
                group_size=group_size,
                seed=i,
                tokens_per_step=tokens_per_step,
                spikes=3,
            )
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--groups", type=int, default=16)
    p.add_argument("--group-size", type=int, default=16)
    p.add_argument("--tokens-per-step", type=int, default=2)
    a = p.parse_args()
    t0 = time.perf_counter()
    make_root(a.root, a.runs, a.steps, a.groups, a.group_size, a.tokens_per_step)
    print(
        f"wrote {a.runs} runs x {a.steps} steps x {a.groups * a.group_size} sequences "
        f"to {a.root} in {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
