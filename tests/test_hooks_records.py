"""The typed records between the recorder's stages: StepInputs, the packed buffer's Layout,
RecorderSettings, and the per-sequence declaration reaching the sequence table."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import os

import numpy as np
import pytest
import torch

from gspo_metrics.spec import GRPO_EPS, GSPO_EPS, PER_SEQUENCE
from training_hooks import (
    DEFAULT_SEQ_EPS,
    DEFAULT_TOKEN_EPS,
    RecorderSettings,
    RunRecorder,
    StepArgs,
    StepInputs,
    step_diagnostics,
)
from training_hooks.compute import TOKEN_PARTS, Reduction, reduce_step
from training_hooks.layout import SEQ_ROWS, Layout, pack
from training_hooks.schema import Step
from training_hooks.step_reduction import COUNTS, MINS, SQUARED, SUMS, TOKEN_WEIGHTED


def test_the_sequence_table_has_every_declared_value_with_its_type(make_batch):
    """Every entry of ``PER_SEQUENCE`` is a column of a step's sequences, typed as declared;
    the per-sequence rows of a record are the declaration's, caller values first."""
    _, seqs = step_diagnostics(**make_batch(2, 3, 7, truncated=True, ref=True, entropy=True))
    numpy_type = {"int32": np.int32, "float32": np.float32, "bool": np.bool_}
    for v in PER_SEQUENCE:
        assert seqs[v.name].dtype == numpy_type[v.dtype], v.name
    assert sorted(SEQ_ROWS) == sorted(v.name for v in PER_SEQUENCE)
    caller = tuple(v.name for v in PER_SEQUENCE if v.source == "caller")
    assert caller == ("truncated", "reward", "attenuation") and SEQ_ROWS[:3] == caller


def test_step_inputs_check_normalises(make_batch):
    """``StepInputs.check`` gives the checked forms (integer rewards as float32, a truncation
    list as a tensor, extras split into floats and 0-d tensors, the loss as (1,) float64);
    the record is frozen and reduces to the loss and the rewards' mean."""
    b = make_batch(2, 2, 5)
    b["rewards"] = torch.tensor([[1, 0], [2, 2]])
    args = StepArgs(
        3,
        **b,
        truncated=[True, False, False, True],
        extra={"lr": 1e-3, "gn": torch.tensor([2.5]), "x": None},
        loss=torch.tensor(0.25),
    )
    inputs = StepInputs.check(args, wall_time=12.0)
    assert inputs.rewards.dtype == torch.float32 and inputs.rewards.tolist() == [[1, 0], [2, 2]]
    assert inputs.truncated.tolist() == [True, False, False, True]
    assert inputs.extra["lr"] == 1e-3 and np.isnan(inputs.extra["x"])
    assert set(inputs.tensor_extra) == {"gn"} and inputs.tensor_extra["gn"].shape == ()
    assert inputs.loss.dtype == torch.float64 and inputs.loss.tolist() == [0.25]
    assert (inputs.step, inputs.wall_time, inputs.num_prompts, inputs.group_size) == (3, 12.0, 2, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.step = 4
    got = reduce_step(inputs, Reduction()).materialize().row
    assert got["loss"] == 0.25 and got["reward_mean"] == 1.25  # (1 + 0 + 2 + 2) / 4


def test_step_inputs_check_names_the_bad_argument(make_batch):
    b = make_batch(2, 2, 5)
    with pytest.raises(ValueError, match=r"rewards has shape \(2, 2\) but the run's group_size"):
        StepInputs.check(StepArgs(0, **b), group_size=3)
    with pytest.raises(ValueError, match="loss must be a scalar"):
        StepInputs.check(StepArgs(0, **b, loss=torch.zeros(2)))
    with pytest.raises(ValueError, match="step must be >= 0"):
        StepInputs.check(StepArgs(-1, **b))


def test_layout_reads_each_part_back_by_name():
    """Packing records each part's slice and shape once; reading by name gives the part back."""
    parts = {
        "seq": torch.arange(6.0).reshape(2, 3),
        "loss": torch.tensor([0.5], dtype=torch.float64),
        "mask": torch.tensor([[True, False]]),
    }
    flat, layout = pack(parts, torch.float64, torch.device("cpu"))
    assert flat.tolist() == [0, 1, 2, 3, 4, 5, 0.5, 1, 0]
    assert layout["seq"] == slice(0, 6) and layout["loss"] == slice(6, 7)
    assert layout.read(flat, "seq").tolist() == parts["seq"].tolist()
    assert layout.read(flat.numpy(), "mask").tolist() == [[1.0, 0.0]]
    assert "loss" in layout and "sums" not in layout and list(layout) == list(parts)
    assert Layout.of({}).size == 0


def test_the_summary_vector_is_declared_part_by_part():
    """The step summary's sums are its named parts, sized by the lists they hold."""
    sizes = {name: s.stop - s.start for name, (s, _) in SUMS.parts.items()}
    assert sizes == {
        "counts": len(COUNTS),
        "zero_var": 2,  # zero-variance groups, groups whose rewards are known
        "rows": len(SEQ_ROWS),
        "squares": len(SQUARED),
        "adv_abs": 1,
        "token_weighted": len(TOKEN_WEIGHTED),
        "attenuation": 6,  # (sum, count) of the known attenuations: all, A > 0, A < 0
        "loss": 1,
        "grid": 2,  # ratio_grid.token_stats' two sums
    }
    assert SUMS.size == sum(sizes.values()) and len(MINS) == 8


def test_a_record_holds_its_parts_by_name(make_batch):
    """One process: the rows, the loss, each tensor extra and the token sample, no summary."""
    b = make_batch(2, 2, 5)
    inputs = StepInputs.check(StepArgs(0, **b, loss=1.0, extra={"gn": torch.tensor(3.0)}))
    rec = reduce_step(inputs, Reduction(token_samples=2))
    assert list(rec.layout) == [
        "seq",
        "loss",
        "token_stats",
        "extra/gn",
        "token_rows",
        *TOKEN_PARTS,
    ]
    assert rec.layout.parts["seq"][1] == (len(SEQ_ROWS), 4)
    # 2 culprit candidates for each of the 3 reasons, then the 2 baseline sequences
    assert rec.layout.parts["token_mask"][1] == (3 * 2 + 2, 5)
    rec.materialize()
    assert rec.row["gn"] == 3.0 and rec.row["loss"] == 1.0
    seq = rec.seq  # the culprits: the 2 largest |log s| and the 2 largest token |log r|
    tok_max = np.maximum(abs(seq["token_log_ratio_min"]), abs(seq["token_log_ratio_max"]))
    culprits = {*np.argsort(abs(seq["seq_log_ratio"]))[-2:], *np.argsort(tok_max)[-2:]}
    got = {2 * g + s for g, s in zip(rec.tokens["group"], rec.tokens["sample"], strict=True)}
    assert got == {0, 3} | culprits  # baseline: 0 and 3 spread over B = 4


def test_step_args_are_log_steps_and_step_diagnostics_arguments(tmp_path, make_batch):
    """``log_step``'s and ``step_diagnostics``' signatures are ``StepArgs``' /
    ``DiagnosticsArgs``' fields (names, order, defaults, annotations; ``step`` positional in
    ``log_step``, every one a keyword in ``step_diagnostics``, whose ``step`` defaults to 0),
    every field's shape and meaning is listed in both docstrings, and a misspelt keyword is a
    TypeError naming the call and the valid names, before anything is recorded."""
    from training_hooks.compute import DiagnosticsArgs
    from training_hooks.params import DOC

    for call, source, skip in (
        (RunRecorder.log_step, StepArgs, 1),
        (step_diagnostics, DiagnosticsArgs, 0),
    ):
        params = list(inspect.signature(call).parameters.values())[skip:]
        fields = dataclasses.fields(source)
        assert [p.name for p in params] == [f.name for f in fields]
        for p, f in zip(params, fields, strict=True):
            default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            assert (p.default, p.annotation) == (default, f.type), f.name
            assert f"``{f.name}``: {f.metadata[DOC]}" in inspect.getdoc(call), f.name
    kinds = [p.kind for p in inspect.signature(RunRecorder.log_step).parameters.values()]
    assert kinds[1] == inspect.Parameter.POSITIONAL_OR_KEYWORD  # step
    assert set(kinds[2:]) == {inspect.Parameter.KEYWORD_ONLY}
    assert len(kinds) == 18  # self and the 17 arguments of log_step
    assert inspect.signature(step_diagnostics).parameters["step"].default == 0
    b = make_batch(2, 2, 5)
    with RunRecorder(root=tmp_path, name="typo") as rec:
        with pytest.raises(TypeError, match=r"RunRecorder.log_step\(\).*'rolout'.*policy_lag"):
            rec.log_step(0, **b, rolout=1)
        with pytest.raises(TypeError, match=r"log_step\(\) missing a required argument: 'step'"):
            rec.log_step(**b)
        rec.log_step(0, **b, rollout=1)  # spelt right
    with pytest.raises(TypeError, match=r"step_diagnostics\(\).*'seq_epss'"):
        step_diagnostics(**b, seq_epss=(0.1, 0.1))


def test_recorder_settings_are_the_recorders_arguments(tmp_path):
    """``RunRecorder``'s signature, taken from ``RecorderSettings``, is its fields: the same names
    in the same order, defaults and annotations (the first five positional), every field is
    documented, an unknown keyword is a TypeError naming RunRecorder, and the settings are
    checked and normalised."""
    fields = [f.name for f in dataclasses.fields(RecorderSettings)]
    params = inspect.signature(RunRecorder).parameters
    assert list(params) == fields, set(fields) ^ set(params)  # a setting missing from __init__?
    for f in dataclasses.fields(RecorderSettings):
        assert (params[f.name].default, params[f.name].annotation) == (f.default, f.type), f.name
    kinds = [p.kind for p in params.values()]
    assert kinds[:5] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 5
    assert set(kinds[5:]) == {inspect.Parameter.KEYWORD_ONLY}
    source = inspect.getsource(RecorderSettings)
    for name in fields:  # a docstring line right under each field
        after = source.split(f"\n    {name}: ", 1)[1].split("\n", 2)[1]
        assert after.strip().startswith('"""'), name
    with pytest.raises(TypeError, match="RunRecorder.*'seq_epss'"):
        RunRecorder(root=tmp_path, seq_epss=(0.1, 0.1))
    with pytest.raises(ValueError, match="token_eps: eps_low must be in"):
        RunRecorder(root=tmp_path, token_eps=(1.5, 0.2))
    s = RecorderSettings(tmp_path, algorithm="grpo", seq_eps=[0, 1])
    assert (s.name, s.root, s.seq_eps, s.token_eps) == (
        "grpo",
        os.fspath(tmp_path),
        (0.0, 1.0),
        GRPO_EPS,
    )
    assert DEFAULT_SEQ_EPS == GSPO_EPS and DEFAULT_TOKEN_EPS == GRPO_EPS
    assert not os.listdir(tmp_path)  # nothing was written by the refused recorders


def test_recorder_from_settings_is_the_keyword_route(tmp_path):
    """``RunRecorder.from_settings(RecorderSettings(...))`` and ``RunRecorder(...)`` with the same
    keywords record the same run.json settings and ``setting_sources`` (only what was given is
    "stated"); the keyword route's TypeError lists the valid names; the sixth setting is
    keyword-only."""
    kw = {"algorithm": "dapo", "token_eps": (0.2, 0.28), "run_id": "r1", "mlflow": None}
    with RunRecorder(root=tmp_path / "a", **kw) as rec:
        by_keywords = rec.settings
    with RunRecorder.from_settings(RecorderSettings(root=tmp_path / "b", **kw)) as rec:
        by_settings = rec.settings
    assert dataclasses.replace(by_keywords, root="x") == dataclasses.replace(by_settings, root="x")
    runs = [json.loads((tmp_path / d / "r1" / "run.json").read_text()) for d in "ab"]
    assert runs[0]["setting_sources"] == {
        "seq_eps": "default",
        "token_eps": "stated",
        "reduction": "default",
    }
    assert (runs[0]["token_eps_low"], runs[0]["token_eps_high"]) == (0.2, 0.28)
    assert (runs[0]["seq_eps_low"], runs[0]["seq_eps_high"]) == GSPO_EPS
    keys = ["setting_sources", "name", "algorithm", "reduction", "group_size", "config"]
    keys += ["seq_eps_low", "seq_eps_high", "token_eps_low", "token_eps_high", "flush_interval_s"]
    assert [runs[0][k] for k in keys] == [runs[1][k] for k in keys]
    with pytest.raises(TypeError, match="'tokens_samples'.*: root, name, .*token_samples"):
        RunRecorder(root=tmp_path, tokens_samples=2)
    with pytest.raises(TypeError, match="RunRecorder.*positional"):
        RunRecorder(tmp_path, None, "gspo", None, None, "r2")


@pytest.mark.parametrize("reward_dtype", [torch.float32, torch.float64])
def test_groups_with_unknown_rewards_are_not_judged_zero_variance(make_batch, reward_dtype):
    """A group with a NaN reward (verl's split groups) is neither a zero-variance group nor a
    varied one: the count and fraction are over the groups whose rewards are known, and null /
    NaN when there is none (unknown is not 0). float64 rewards are counted before the stack's
    float32 rounding, float32 ones on the host: both routes."""
    b = make_batch(3, 2, 4)
    b["advantages"] = torch.zeros(6)
    nan = math.nan
    b["rewards"] = torch.tensor([[1.0, 1.0], [nan, 0.0], [0.0, 2.0]], dtype=reward_dtype)
    row = reduce_step(StepInputs.check(StepArgs(0, **b)), Reduction()).materialize().row
    assert row[Step.ZERO_VARIANCE_GROUPS] == 1  # group 0; group 1 unknown; group 2 varied
    assert row[Step.ZERO_VARIANCE_FRACTION] == 0.5  # of the 2 judged, not of 3
    assert row[Step.NUM_GROUPS] == 3
    b["rewards"] = torch.full((3, 2), nan, dtype=reward_dtype)
    row = reduce_step(StepInputs.check(StepArgs(0, **b)), Reduction()).materialize().row
    assert row[Step.ZERO_VARIANCE_GROUPS] is None
    assert math.isnan(row[Step.ZERO_VARIANCE_FRACTION])
    assert math.isnan(row[Step.REWARD_MEAN]) and row[Step.NUM_GROUPS] == 3
