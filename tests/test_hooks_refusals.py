"""A hook never ends the user's run after its first step: ``log_step`` refuses bad inputs with a
ValueError on the first call (the user is watching), and afterwards drops the refused step with a
warning, a fault in run.json and Health's ``steps_dropped``; ``strict=True`` raises instead."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from training_hooks import RunRecorder, schema, tables
from training_hooks.findings import facts_of, run_health
from training_hooks.findings.dropped import STEPS_DROPPED, dropped_of


def _positive_logprob(batch: dict) -> dict:
    """The batch with one log-prob of +0.01 inside the mask (a value the recorder refuses)."""
    logp = batch["logprobs"].clone()
    logp[0, 0] = 0.01
    return {**batch, "logprobs": logp}


def test_the_first_step_still_raises(tmp_path, make_batch):
    with RunRecorder(root=tmp_path, name="first", mlflow=False) as rec:
        with pytest.raises(ValueError, match="logprobs"):
            rec.log_step(0, **_positive_logprob(make_batch(seed=0)))
        rec.log_step(0, **make_batch(seed=0))  # nothing was recorded: the step is free


def test_a_later_refusal_drops_the_step_and_the_run_goes_on(tmp_path, make_batch):
    bad = {3, 5, 6, 7}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with RunRecorder(root=tmp_path, name="drop", mlflow=False, flush_interval_s=0.2) as rec:
            for s in range(10):
                batch = make_batch(seed=s)
                rec.log_step(s, **(_positive_logprob(batch) if s in bad else batch))
            rec.log_step(4, **make_batch(seed=4))  # out of order after 9: dropped too
    ours = [str(w.message) for w in caught if "was not recorded" in str(w.message)]
    assert len(ours) == 3  # the first three drops warn; the rest are counted
    assert ours[0].startswith("gspo-dash: step 3 was not recorded (ValueError: ")
    assert "not warned" in ours[2]
    info = schema.read_run_info(rec.run_dir)
    assert info.status == "finished" and info.last_step == 9
    count, kept = dropped_of(info.faults)
    assert count == 5 and [s for s, _ in kept] == [3, 5, 6, 7, 4]
    assert "logprobs" in kept[0][1] and "step 4" in kept[-1][1]
    steps = tables.read_table(rec.run_dir, schema.STEPS_DIR)
    assert sorted(steps["step"].tolist()) == [0, 1, 2, 4, 8, 9]
    report = run_health(steps.sort_values("step"), facts_of(info))
    found = {f.code: f for f in report.findings}[STEPS_DROPPED]
    assert found.severity == "warning" and found.steps == (3, 5, 6, 7, 4)
    assert found.title == "5 steps not recorded" and "logprobs" in found.evidence
    assert "steps dropped by the recorder" in report.checked


def test_no_drop_no_finding_and_an_import_is_not_judged(tmp_path, make_batch):
    with RunRecorder(root=tmp_path, name="clean", mlflow=False) as rec:
        for s in range(3):
            rec.log_step(s, **make_batch(seed=s))
    info = schema.read_run_info(rec.run_dir)
    steps = tables.read_table(rec.run_dir, schema.STEPS_DIR)
    report = run_health(steps, facts_of(info))
    assert STEPS_DROPPED not in {f.code for f in report.findings}
    assert "steps dropped by the recorder" in report.checked
    assert facts_of(None).dropped_steps is None


def test_strict_raises_at_any_step(tmp_path, make_batch):
    with RunRecorder(root=tmp_path, name="strict", mlflow=False, strict=True) as rec:
        rec.log_step(0, **make_batch(seed=0))
        with pytest.raises(ValueError, match="logprobs"):
            rec.log_step(1, **_positive_logprob(make_batch(seed=1)))
    assert dropped_of(schema.read_run_info(rec.run_dir).faults) == (0, ())


def test_faults_beyond_the_bound_are_counted(tmp_path, make_batch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with RunRecorder(root=tmp_path, name="many", mlflow=False) as rec:
            rec.log_step(0, **make_batch(seed=0))
            for s in range(1, 31):
                rec.log_step(s, **_positive_logprob(make_batch(seed=s)))
    count, kept = dropped_of(schema.read_run_info(rec.run_dir).faults)
    assert count == 30 and len(kept) == 20  # run.json keeps 20 per sink, counts the rest


def test_trl_callback_drops_a_step_it_cannot_assemble_after_the_first(tmp_path, make_batch):
    """TRL's on_step_end: before the first recorded step an error raises (the user is watching);
    after it, the step is dropped and ``trainer.train()`` goes on."""
    pytest.importorskip("trl", reason="trl is not installed: pip install 'gspo-dash[trl]'")
    from training_hooks.trl import _RecorderCallback

    calls = []

    def record(step):
        calls.append(step)
        if step == 2:
            raise KeyError("completion_mask")
        rec.log_step(step, **make_batch(seed=step))

    with RunRecorder(root=tmp_path, name="trl", mlflow=False) as rec:
        trainer = SimpleNamespace(gspo_dash_recorder=rec, _gd_record=record)
        cb = _RecorderCallback(trainer)
        with pytest.raises(KeyError):  # no step recorded yet: raises
            cb.on_step_end(None, SimpleNamespace(global_step=2), None)
        for step in (1, 2, 3):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                cb.on_step_end(None, SimpleNamespace(global_step=step), None)
    count, kept = dropped_of(schema.read_run_info(rec.run_dir).faults)
    assert count == 1 and kept[0][0] == 2 and "completion_mask" in kept[0][1]
    assert rec.last_step == 3
