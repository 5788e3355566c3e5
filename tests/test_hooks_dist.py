"""torch.distributed: 2 processes on gloo/CPU give the single-process numbers of the whole batch."""

from __future__ import annotations

import math
import os
import socket

import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from training_hooks import RunRecorder, step_diagnostics
from training_hooks.schema import STEP_COLUMN_NAMES, Seq, Step, read_run_info

STEPS = 3
G, T = 4, 10
PROMPTS = (3, 2)  # rank 0 holds 3 groups, rank 1 holds 2: unequal B exercises the padded gather
LOSSES = (1.0, 3.0)


def batch(step: int, rank: int) -> dict:
    """Rank ``rank``'s share of step ``step``: its own P groups, a (B, T) mask, ref and entropy."""
    gen = torch.Generator().manual_seed(100 * step + rank)
    P = PROMPTS[rank]
    B = P * G
    old = -torch.rand(B, T, generator=gen, dtype=torch.float64) * 2 - 2  # log-probs <= 0
    mask = torch.rand(B, T, generator=gen) < 0.7
    mask[:, 0] = True
    return {
        "rewards": torch.randint(0, 2, (P, G), generator=gen).double(),
        "logprobs": old + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64),
        "old_logprobs": old,
        "mask": mask,
        "ref_logprobs": old + 0.1 * torch.randn(B, T, generator=gen, dtype=torch.float64),
        "entropy": torch.rand(B, T, generator=gen, dtype=torch.float64),
        "truncated": torch.rand(B, generator=gen) < 0.5,
        "sampler_logprobs": old + 0.05 * torch.randn(B, T, generator=gen, dtype=torch.float64),
    }


def lag(step: int) -> dict:
    """The step's rollout and policy lag (two optimizer steps per rollout)."""
    return {"rollout": step // 2, "policy_lag": step % 2}


def whole_batch(step: int) -> dict:
    """Both ranks' shares concatenated, as one process would see the step."""
    parts = [batch(step, r) for r in range(2)]
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}


def _worker(rank: int, world: int, port: int, root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        with RunRecorder(root=root, name="ddp", algorithm="gspo", steps_per_file=2) as rec:
            for step in range(STEPS):
                rec.log_step(
                    step,
                    **batch(step, rank),
                    **lag(step),
                    loss=LOSSES[rank],
                    extra={"lr": 0.1 * (rank + 1)},
                )
        assert rec.rank == rank
    finally:
        dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_gloo_ranks_match_single_process_on_the_concatenated_batch(tmp_path):
    """Step scalars reduced over 2 gloo ranks (unequal B) equal one process on the whole batch;
    each rank writes its own sequences; only rank 0 writes steps and run.json."""
    mp.spawn(_worker, args=(2, _port(), str(tmp_path)), nprocs=2, join=True)
    (run_id,) = os.listdir(tmp_path)
    run_dir = tmp_path / run_id
    info = read_run_info(run_dir)
    assert info.status == "finished" and info.other["world_size"] == 2 and info.faults == []
    step_files = os.listdir(run_dir / "steps")
    assert len(step_files) == 1 and "-r0000-" in step_files[0]  # rank 0 only, compacted
    assert sorted(f.split("-")[3] for f in os.listdir(run_dir / "sequences")) == ["r0000", "r0001"]

    steps = pd.read_parquet(run_dir / "steps").set_index(Step.STEP)
    seqs = pd.read_parquet(run_dir / "sequences")
    assert len(steps) == STEPS
    for step in range(STEPS):
        # single process, concatenated batch
        want, _ = step_diagnostics(**whole_batch(step), **lag(step))
        got = steps.loc[step]
        for col in STEP_COLUMN_NAMES:
            if col in (Step.SCHEMA_VERSION, Step.RUN_ID, Step.STEP, Step.WALL_TIME, Step.ALGORITHM):
                continue
            if col == Step.LOSS:
                assert got[col] == pytest.approx(np.mean(LOSSES))  # mean over ranks
            elif col == Step.NUM_RANKS:
                assert got[col] == 2
            elif isinstance(want[col], float) and math.isnan(want[col]):
                assert math.isnan(got[col]), col
            else:
                assert got[col] == pytest.approx(want[col], rel=1e-9, abs=1e-12), col
        assert got["lr"] == pytest.approx(0.1)  # extras: rank 0's values
        # (not vacuous: the sampler columns are measured, the lag columns given)
        assert got[Step.SAMPLER_KL_MEAN] > 0 and got[Step.SAMPLER_LOGP_ABS_DIFF_MAX] > 0
        assert (got[Step.ROLLOUT], got[Step.POLICY_LAG]) == (step // 2, step % 2)
        # each rank's own sequences, with its rank and local group index
        for rank in range(2):
            mine = seqs[(seqs[Seq.STEP] == step) & (seqs[Seq.RANK] == rank)]
            b = batch(step, rank)
            assert len(mine) == PROMPTS[rank] * G
            assert mine[Seq.GROUP].max() == PROMPTS[rank] - 1
            assert mine[Seq.LENGTH].tolist() == b["mask"].sum(-1).tolist()
            np.testing.assert_allclose(mine[Seq.REWARD], b["rewards"].flatten().numpy())


def _dropping_worker(rank: int, world: int, port: int, root: str) -> None:
    """Rank 1's inputs at step 1 are refused (a log-prob of +0.01): it drops the step and still
    takes part in the step's collectives, so rank 0 neither waits nor fails."""
    import datetime
    import warnings

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60)
    )
    try:
        with RunRecorder(root=root, name="ddp-drop", algorithm="gspo") as rec:
            for step in range(STEPS):
                b = batch(step, rank)
                if rank == 1 and step == 1:
                    b["logprobs"][0, 0] = 0.01
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    rec.log_step(step, **b, loss=LOSSES[rank])
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_a_rank_that_drops_a_step_does_not_stall_the_others(tmp_path):
    """Step 1 is reduced over rank 0's batch alone (one rank), steps 0 and 2 over both."""
    mp.spawn(_dropping_worker, args=(2, _port(), str(tmp_path)), nprocs=2, join=True)
    (run_id,) = os.listdir(tmp_path)
    steps = pd.read_parquet(tmp_path / run_id / "steps").set_index(Step.STEP)
    seqs = pd.read_parquet(tmp_path / run_id / "sequences")
    assert steps[Step.NUM_RANKS].tolist() == [2, 1, 2]
    want, _ = step_diagnostics(**batch(1, 0))
    got = steps.loc[1]
    for col in (Step.NUM_SEQUENCES, Step.SEQ_LOG_RATIO_MEAN, Step.LENGTH_MEAN, Step.REWARD_MEAN):
        assert got[col] == pytest.approx(want[col], rel=1e-9), col
    assert got[Step.LOSS] == pytest.approx(LOSSES[0])
    assert sorted(seqs[seqs[Seq.STEP] == 1][Seq.RANK].unique().tolist()) == [0]
