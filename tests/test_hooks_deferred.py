"""The CPU background reduction (training_hooks.deferred): same numbers as reducing on the caller,
safe against the caller reusing its tensors, in step order when it falls behind, and no change to
torch's thread settings anywhere else."""

from __future__ import annotations

import threading

import pandas as pd
import pytest
import torch

import training_hooks.recorder as recorder_module
from training_hooks import RunRecorder, step_diagnostics
from training_hooks.compute import compute_step
from training_hooks.schema import Seq, Step, read_table


def batches(n: int, make_batch) -> list[dict]:
    out = []
    for s in range(n):
        b = make_batch(4, 4, 40, seed=s, ref=True, entropy=True, truncated=True)
        b["extra"] = {"lr": 1e-3 * (s + 1), "grad_norm": torch.tensor(0.5 + s)}
        b["completions"] = [f"text {s}-{i}" for i in range(16)]
        out.append(b)
    out[2]["logprobs"][1, 0] = float("nan")  # inside the mask: the exact path, counted
    out[3]["advantages"] = torch.randn(16, 40, generator=torch.Generator().manual_seed(9))
    return out


def record(tmp_path, name: str, steps: list[dict], *, thread: bool, **kw) -> RunRecorder:
    rec = RunRecorder(root=tmp_path, name=name, compute_thread=thread, token_samples=3, **kw)
    rec.defer_min_elements = 0
    with rec:
        for s, b in enumerate(steps):
            rec.log_step(s, **b)
            if rec._deferred is not None:
                assert rec._deferred.drain(10)  # so that every step is reduced on the thread
    return rec


def tables(rec: RunRecorder) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    out = []
    for table in ("steps", "sequences", "tokens"):
        df = read_table(rec.run_dir, table)
        out.append(df.drop(columns=[c for c in ("run_id", "wall_time") if c in df]))
    return tuple(out)


def test_thread_and_caller_write_identical_tables(tmp_path, make_batch):
    """Both routes run compute_step on equal tensors: every table is equal, bit for bit."""
    steps = batches(5, make_batch)
    on_thread = record(tmp_path, "thread", steps, thread=True)
    on_caller = record(tmp_path, "caller", steps, thread=False)
    assert on_thread._deferred.computed == 5  # really reduced on the thread
    assert on_caller._deferred is None
    for a, b in zip(tables(on_thread), tables(on_caller), strict=True):
        assert len(a) > 0
        pd.testing.assert_frame_equal(a, b)
    steps_df = tables(on_thread)[0]
    assert steps_df[Step.NONFINITE_COUNT].tolist() == [0, 0, 1, 0, 0]
    assert steps_df["grad_norm"].tolist() == [0.5, 1.5, 2.5, 3.5, 4.5]


def test_caller_may_overwrite_its_tensors_once_log_step_returns(tmp_path, make_batch):
    """log_step copies: garbage written into the inputs right after the call changes nothing."""
    steps = batches(4, make_batch)
    expected = [step_diagnostics(**b) for b in steps]
    rec = RunRecorder(root=tmp_path, name="reuse", compute_thread=True)
    rec.defer_min_elements = 0
    gate = threading.Event()
    with rec:
        # hold the thread so that every overwrite happens before it reduces the step
        slot = rec._deferred.acquire()
        rec._deferred.submit(lambda ws: (gate.wait(10), _tiny_record())[1], slot)
        for s, b in enumerate(steps):
            rec.log_step(s + 1, **b)
            for key in ("logprobs", "old_logprobs", "ref_logprobs", "entropy"):
                b[key].fill_(float("nan"))
            b["mask"].fill_(False)
            b["rewards"].fill_(-7.0)
            b["truncated"].fill_(True)
        gate.set()
    got = read_table(rec.run_dir, "steps").set_index(Step.STEP)
    seqs = read_table(rec.run_dir, "sequences")
    for s, (row, seq) in enumerate(expected):
        for col in (
            Step.REWARD_MEAN,
            Step.SEQ_LOG_RATIO_MEAN,
            Step.KL_REF_MEAN,
            Step.ENTROPY_MEAN,
            Step.TRUNCATED_FRACTION,
            Step.NONFINITE_COUNT,
        ):
            assert got.loc[s + 1, col] == pytest.approx(row[col], rel=1e-6, nan_ok=True)
        mine = seqs[seqs[Seq.STEP] == s + 1]
        assert mine[Seq.LENGTH].tolist() == seq[Seq.LENGTH].tolist()


def _tiny_record():
    """A valid one-group record for step 0 (the gate job's result)."""
    b = {
        "rewards": torch.tensor([[1.0, 0.0]]),
        "logprobs": torch.zeros(2, 3),
        "old_logprobs": torch.zeros(2, 3),
        "mask": torch.ones(2, 3, dtype=torch.bool),
    }
    return compute_step(0, **b)


def test_a_busy_thread_hands_steps_to_the_caller_in_order(tmp_path, make_batch):
    """With every slot taken, the caller reduces the step itself and it still reaches the sinks
    after the queued ones: the step table is in order and complete."""
    rec = RunRecorder(root=tmp_path, name="busy", compute_thread=True)
    rec.defer_min_elements = 0
    gate = threading.Event()
    order: list[int] = []
    forward = rec._forward

    def spy(record):
        order.append(record.step)
        forward(record)

    rec._deferred._forward = spy
    slot = rec._deferred.acquire()
    rec._deferred.submit(lambda ws: (gate.wait(10), _tiny_record())[1], slot)  # step 0, held
    with rec:
        for s in range(1, 6):
            rec.log_step(s, **make_batch(1, 2, 5, seed=s))
        # one slot was left: step 1 is queued on the thread, steps 2-5 were reduced here
        assert rec._deferred.pending == 6 and order == []
        gate.set()
    assert order == [0, 1, 2, 3, 4, 5]
    assert rec._deferred.computed == 2  # the gate job and step 1
    assert read_table(rec.run_dir, "steps")[Step.STEP].tolist() == [0, 1, 2, 3, 4, 5]


def test_bad_input_raises_at_the_call_and_frees_the_slot(tmp_path, make_batch):
    rec = RunRecorder(root=tmp_path, name="bad", compute_thread=True)
    rec.defer_min_elements = 0
    with rec:
        b = make_batch(2, 2, 6)
        b["mask"][3] = False
        for mask in (b["mask"], b["mask"].long(), b["mask"].float()):  # 3 > 2 slots: each
            with pytest.raises(ValueError, match=r"marks no token in row\(s\) \[3\]"):
                rec.log_step(0, **{**b, "mask": mask})  # failed call gives its slot back
        with pytest.raises(ValueError, match="ref_logprobs has shape"):
            rec.log_step(0, **make_batch(2, 2, 6), ref_logprobs=torch.zeros(4, 5))
        rec.log_step(0, **make_batch(2, 2, 6))
        rec.flush()
        assert rec._deferred.computed == 1
    assert read_table(rec.run_dir, "steps")[Step.STEP].tolist() == [0]


def test_the_thread_leaves_torch_threads_of_other_threads_alone(tmp_path, make_batch):
    before = torch.get_num_threads()
    rec = RunRecorder(root=tmp_path, name="threads", compute_thread=True)
    rec.defer_min_elements = 0
    with rec:
        rec.log_step(0, **make_batch())
        rec.flush()
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        t.start()
        t.join()
    assert torch.get_num_threads() == before
    assert seen == [before]


@pytest.mark.parametrize("cores, expect_thread", [(1 << 20, True), (1, False)])
def test_default_uses_the_thread_only_with_a_spare_core(
    tmp_path, monkeypatch, cores, expect_thread
):
    monkeypatch.setattr(recorder_module, "_usable_cores", lambda: cores)
    with RunRecorder(root=tmp_path, name="auto") as rec:
        assert (rec._deferred is not None) is expect_thread
    with RunRecorder(root=tmp_path, name="off", compute_thread=False) as rec:
        assert rec._deferred is None
