"""The fused kernel's batch split: torch's OpenMP team (``gspo_metrics.omp_team``), the thread
pool it falls back to, and one thread give the same bits; the split never makes a caller wait
for a compilation; a forked child does not touch its parent's OpenMP runtime. And the log-ratio
extremes, integer extremes of order keys, equal the reference route's."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_diagnostics import _random_step

from gspo_metrics import sequence_diagnostics

fused = pytest.importorskip("gspo_metrics.fused")
from gspo_metrics import omp_team  # noqa: E402  (after the skip: it needs numba too)

THR = (-0.2, 0.2, -3e-4, 4e-4)


def _team():
    found = omp_team.team(fused.diagnostics_kernel)
    if found is None:
        pytest.skip("torch runs its ops on no OpenMP runtime found in this process")
    return found


def _args(seed, B, T, dtype, per_tok, with_ref=True, with_ent=True, with_smp=True, odd=True):
    """``fused_rows``'s arguments for a random step; ``odd`` puts NaN, inf and huge values at a
    few masked tokens and NaN under the padding."""
    g = torch.Generator().manual_seed(seed)
    logp, old, ref, ent, mask, adv, smp = _random_step(g, B, T, dtype, per_tok)
    if odd:
        where = mask.nonzero()[torch.randperm(int(mask.sum()), generator=g)[:6]]
        for (b, t), v in zip(
            where.tolist(), [np.nan, np.inf, -np.inf, 1e30, -7.5, 3.0], strict=True
        ):
            logp[b, t] = v
        logp[~mask] = np.nan
    adv2 = adv if per_tok else adv.reshape(-1, 1)
    return (
        logp.numpy(),
        old.numpy(),
        mask.view(torch.uint8).numpy(),
        adv2.contiguous().numpy(),
        ref.numpy() if with_ref else None,
        ent.numpy() if with_ent else None,
        per_tok,
        THR,
    ), (smp.numpy() if with_smp else None)


def _kernel_args(args, sampler):
    """``diagnostics_kernel``'s arguments (without b0, b1) for ``fused_rows``', into a fresh
    ``out`` filled with -1 (so a row nobody wrote shows)."""
    out = np.full((fused.K, args[0].shape[0]), -1.0)
    return fused.kernel_args(*args, out, sampler)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("per_tok", [False, True])
@pytest.mark.parametrize("given_", [(1, 1, 1), (0, 0, 0), (1, 0, 0), (0, 1, 1)])
def test_team_split_equals_one_thread_bit_for_bit(dtype, per_tok, given_):
    team = _team()
    args, smp = _args(7, 37, 300, dtype, per_tok, *map(bool, given_))
    one = fused.fused_rows(*args, threads=1, sampler=smp)
    kargs = _kernel_args(args, smp)
    team.prepare(kargs[0].dtype)
    for threads in (2, 3, 5):
        kargs[-1][:] = -1.0
        assert team.run(kargs, threads)
        assert kargs[-1].tobytes() == one.tobytes(), threads


def test_pool_route_equals_team_route(monkeypatch):
    """Where torch has no OpenMP team, the thread pool splits the rows: the same bits."""
    team = _team()
    args, smp = _args(11, 64, 600, torch.float32, False)
    team.prepare(np.float32)
    by_team = fused.fused_rows(*args, threads=2, sampler=smp)
    monkeypatch.setattr(fused, "team", lambda kernel: None)
    by_pool = fused.fused_rows(*args, threads=2, sampler=smp)
    assert by_team.tobytes() == by_pool.tobytes()
    assert np.isnan(by_team[fused.ROW.token_log_ratio_max]).any()  # the odd values got in


def test_a_split_call_never_waits_for_the_compilation():
    """A new team's first call for a dtype returns False at once (the job compiles on a
    background thread) and fused_rows still gives every row; once compiled, the team runs it."""
    kernel = fused.diagnostics_kernel
    _team()
    fresh = omp_team._find(kernel)
    assert fresh is not None
    args, smp = _args(3, 40, 900, torch.float64, False, odd=False)
    kargs = _kernel_args(args, smp)
    assert not fresh.run(kargs, 2)
    assert (kargs[-1] == -1.0).all()  # nothing done
    fresh.prepare(np.float64)  # (waits for the background compilation, or compiles)
    assert fresh.run(kargs, 2)
    assert kargs[-1].tobytes() == fused.fused_rows(*args, threads=1, sampler=smp).tobytes()


def test_concurrent_split_calls_each_get_their_rows():
    """Two threads splitting at once (a recorder's background thread beside a caller): each
    gets its own team and its own numbers."""
    _team().prepare(np.float32)
    inputs = [_args(s, 48, 700, torch.float32, s % 2 == 1) for s in range(4)]
    want = [fused.fused_rows(*a, threads=1, sampler=s) for a, s in inputs]
    got: dict[int, list[bytes]] = {0: [], 1: []}

    def work(k):
        for _ in range(5):
            for a, s in inputs[2 * k : 2 * k + 2]:
                got[k].append(fused.fused_rows(*a, threads=2, sampler=s).tobytes())

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        assert got[k] == [w.tobytes() for w in want[2 * k : 2 * k + 2]] * 5


def _child(queue, args, smp):
    # (no torch op here: torch's own OpenMP ops hang in a forked child of a process that used
    # them, whatever this project does; the inputs come from the parent)
    queue.put(
        (
            omp_team.team(fused.diagnostics_kernel) is None,
            fused.fused_rows(*args, threads=2, sampler=smp).tobytes(),
        )
    )


def test_a_forked_child_leaves_the_parents_openmp_alone():
    _team().prepare(np.float32)
    args, smp = _args(5, 32, 1100, torch.float32, False)
    want = fused.fused_rows(*args, threads=1, sampler=smp).tobytes()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, args, smp))
    proc.start()
    try:
        no_team, got = queue.get(timeout=120)
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
    assert no_team
    assert got == want


_ODD = [0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e300, 1e300, float("inf"), -float("inf"), 0.49]


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.sampled_from(_ODD), st.floats(-1e6, 1e6, allow_subnormal=True)),
        min_size=1,
        max_size=40,
    ),
    pad=st.integers(0, 5),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_log_ratio_extremes_equal_the_reference(values, pad, dtype):
    """token_log_ratio_min / max from the order keys: signed zeros, subnormals, huge values and
    infinities (both signs in one row too: log s is then NaN, which must not reach them), with
    garbage (NaN) under the padding, equal the reference route's."""
    T = len(values) + pad
    logp = torch.full((1, T), float("nan"), dtype=torch.float64)
    logp[0, : len(values)] = torch.tensor(values, dtype=torch.float64)
    logp = logp.to(dtype)
    old = torch.zeros(1, T, dtype=dtype)
    mask = torch.zeros(1, T, dtype=torch.bool)
    mask[0, : len(values)] = True
    adv = torch.ones(1, dtype=dtype)
    got = sequence_diagnostics(logp, old, mask, adv, backend="fused")
    ref = sequence_diagnostics(logp, old, mask, adv, backend="reference")
    for k in ("token_log_ratio_min", "token_log_ratio_max"):
        a, b = got[k], ref[k]
        assert a.isnan().tolist() == b.isnan().tolist(), k
        if not b.isnan().any():
            assert a.item() == b.item(), k  # (-0.0 == 0.0: either zero is the extreme of both)
