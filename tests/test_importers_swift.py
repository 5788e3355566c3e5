"""ms-swift's output folder (``logging.jsonl`` + ``args.json``): the step is the N of
``global_step/max_steps``, every value equal to its source line, the settings from args.json,
GSPO runs labelled gspo, evaluation lines apart, the status from the planned end M.

``GSPO_LINES`` are lines 1-4, 9 and 10 of a logging.jsonl that ms-swift 4.6.0's own code wrote
(``swift rlhf --rlhf_type grpo --importance_sampling_level sequence``, a tiny random Qwen2 on a
CPU; /work/fetched_logs/generated/swift/README.md says how), copied verbatim but for the final
record's ``log_history``, emptied here; ``EVAL_LINE`` is written by hand in the shape
``Trainer.evaluate`` logs through ms-swift's callback (``eval_*`` keys and the progress).
The generated folders themselves, when present, are compared cell by cell with their source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training_hooks import importers, schema
from training_hooks.importers import swift
from training_hooks.importers._cli import _parser
from training_hooks.schema import Step

GSPO_LINES = [
    '{"loss": -1e-08, "grad_norm": 0.50455356, "learning_rate": 0.0096194, "completions/mean_length": 11.0, "completions/min_length": 4.0, "completions/max_length": 12.0, "completions/clipped_ratio": 0.875, "reward": 0.00892857, "reward_std": 0.01785714, "frac_reward_zero_std": 0.5, "rewards/DigitShare/mean": 0.00892857, "rewards/DigitShare/std": 0.02525382, "entropy/mean": 5.79763103, "entropy/max": 5.7978394, "entropy/min": 5.79740405, "kl": 0.0, "clip_ratio/low_mean": 0.0, "clip_ratio/low_min": 0.0, "clip_ratio/high_mean": 0.0, "clip_ratio/high_max": 0.0, "clip_ratio/region_mean": 0.0, "step_time": 0.30602025, "epoch": 0.015625, "global_step/max_steps": "1/8", "elapsed_time": "0s", "remaining_time": "2s", "train_speed(s/it)": 0.314831}',
    '{"loss": 0.00100559, "grad_norm": 0.01502717, "learning_rate": 0.00853553, "entropy/mean": 5.79777861, "entropy/max": 5.79816413, "entropy/min": 5.79715323, "kl": 0.02870792, "clip_ratio/low_mean": 0.375, "clip_ratio/low_min": 0.375, "clip_ratio/high_mean": 0.125, "clip_ratio/high_max": 0.125, "clip_ratio/region_mean": 0.5, "step_time": 0.04974852, "epoch": 0.03125, "global_step/max_steps": "2/8", "elapsed_time": "0s", "remaining_time": "1s", "train_speed(s/it)": 0.18843}',
    '{"loss": 0.00219231, "grad_norm": 0.36630398, "learning_rate": 0.00691342, "completions/mean_length": 10.75, "completions/min_length": 2.0, "completions/max_length": 12.0, "completions/clipped_ratio": 0.875, "reward": 0.02105978, "reward_std": 0.02946626, "frac_reward_zero_std": 0.5, "rewards/DigitShare/mean": 0.02105978, "rewards/DigitShare/std": 0.04466901, "entropy/mean": 5.78296423, "entropy/max": 5.78339887, "entropy/min": 5.78251338, "kl": 0.05641946, "clip_ratio/low_mean": 0.0, "clip_ratio/low_min": 0.0, "clip_ratio/high_mean": 0.0, "clip_ratio/high_max": 0.0, "clip_ratio/region_mean": 0.0, "step_time": 0.25502375, "epoch": 0.046875, "global_step/max_steps": "3/8", "elapsed_time": "1s", "remaining_time": "1s", "train_speed(s/it)": 0.213609}',
    '{"loss": 0.00197816, "grad_norm": 0.01213736, "learning_rate": 0.005, "entropy/mean": 5.77800012, "entropy/max": 5.77844572, "entropy/min": 5.77736092, "kl": 0.05552688, "clip_ratio/low_mean": 0.25, "clip_ratio/low_min": 0.25, "clip_ratio/high_mean": 0.125, "clip_ratio/high_max": 0.125, "clip_ratio/region_mean": 0.375, "step_time": 0.0851504, "epoch": 0.0625, "global_step/max_steps": "4/8", "elapsed_time": "1s", "remaining_time": "1s", "train_speed(s/it)": 0.182802}',
]
SUMMARY_LINE = '{"train_runtime": 1.513, "train_samples_per_second": 42.3, "train_steps_per_second": 5.288, "total_flos": 0.0, "train_loss": 0.0019821, "epoch": 0.125, "global_step/max_steps": "8/8", "elapsed_time": "2s", "remaining_time": "0s", "train_speed(s/it)": 0.188014}'
FINAL_LINE = '{"model_parameter_info": "Qwen2ForCausalLM: 0.0293M Params (0.0293M Trainable [100.0000%]), 0.0000M Buffers.", "last_model_checkpoint": null, "best_model_checkpoint": null, "best_metric": null, "global_step": 8, "log_history": [], "memory": 0}'
EVAL_LINE = '{"eval_loss": 0.0021, "eval_reward": 0.25, "eval_completions/mean_length": 9.5, "eval_runtime": 0.8, "epoch": 0.0625, "global_step/max_steps": "4/8", "elapsed_time": "1s", "remaining_time": "1s"}'
ARGS = {
    "rlhf_type": "grpo",
    "importance_sampling_level": "sequence",
    "epsilon": 0.0003,
    "epsilon_high": 0.0004,
    "beta": 0.04,
    "num_generations": 4,
    "loss_type": "grpo",
    "kl_in_reward": False,
    "scale_rewards": "group",
    "num_iterations": 2,
    "logging_steps": 1,
    "max_steps": 8,
    "num_train_epochs": 3.0,
    "max_grad_norm": 1.0,
}
GENERATED = Path("/work/fetched_logs/generated/swift")


def _folder(tmp_path: Path, lines: list[str], args: dict | None = ARGS, name: str = "v0") -> Path:
    out = tmp_path / name
    out.mkdir()
    (out / swift.LOG_FILE).write_text("".join(line + "\n" for line in lines))
    if args is not None:
        (out / swift.ARGS_FILE).write_text(json.dumps(args, indent=2))
    return out


def _import(folder: Path, root: Path, **kw):
    res = importers.import_run("swift", folder, root=root, **kw)
    info = schema.read_run_info(res["run_dir"])
    import pyarrow.parquet as pq

    df = pq.read_table(Path(res["run_dir"]) / schema.STEPS_DIR).to_pandas().set_index("step")
    return res, info, df


def _cell(df, step: int, column: str):
    v = df.loc[step, column]
    return None if v != v else float(v)  # NaN (null) -> None


def test_every_value_is_its_source_lines_value_at_the_step_of_its_progress(tmp_path):
    folder = _folder(tmp_path, [*GSPO_LINES, SUMMARY_LINE, FINAL_LINE])
    res, info, df = _import(folder, tmp_path / "runs")
    assert list(df.index) == [1, 2, 3, 4]
    for k, line in enumerate(GSPO_LINES, start=1):
        src = json.loads(line)
        for key, column in (
            ("loss", Step.LOSS),
            ("kl", Step.KL_REF_MEAN),
            ("reward", Step.REWARD_MEAN),
            ("frac_reward_zero_std", Step.ZERO_VARIANCE_FRACTION),
            ("completions/mean_length", Step.LENGTH_MEAN),
            ("completions/min_length", Step.LENGTH_MIN),
            ("completions/max_length", Step.LENGTH_MAX),
            ("completions/clipped_ratio", Step.TRUNCATED_FRACTION),
            ("grad_norm", "grad_norm"),
            ("entropy/mean", "swift/entropy/mean"),
            ("reward_std", "swift/reward_std"),
            ("rewards/DigitShare/mean", "rewards/DigitShare/mean"),
            ("learning_rate", "learning_rate"),
        ):
            assert _cell(df, k, column) == src.get(key), (k, key)
    # line 2 is the second iteration over the same generation: no rollout metrics, null here
    assert _cell(df, 2, Step.REWARD_MEAN) is None
    assert _cell(df, 2, Step.KL_REF_MEAN) == 0.02870792
    rec = info.imported
    assert rec.tool == "swift" and rec.file_format == "ms-swift logging.jsonl"
    assert set(rec.dropped_non_numeric) == {"elapsed_time", "remaining_time"}
    assert rec.summary["train_runtime"] == 1.513  # the end-of-training record: no row
    # wall time: step_time accumulated (one optimizer step a line: logging_steps 1)
    assert df.loc[4, Step.WALL_TIME] == pytest.approx(
        0.30602025 + 0.04974852 + 0.25502375 + 0.0851504
    )


def test_args_json_settings_make_a_gspo_run_with_its_sequence_eps(tmp_path):
    folder = _folder(tmp_path, [*GSPO_LINES, SUMMARY_LINE, FINAL_LINE])
    _, info, df = _import(folder, tmp_path / "runs")
    assert info.algorithm == "gspo"
    assert (info.seq_eps_low, info.seq_eps_high) == (0.0003, 0.0004)
    assert (info.token_eps_low, info.token_eps_high) == (None, None)
    assert info.group_size == 4 and info.reduction == "seq_mean_token_mean"
    settings = info.imported.settings
    assert settings["importance_sampling_level"] == {
        "value": "sequence",
        "from": "args.json: importance_sampling_level",
    }
    assert settings["group_size"]["from"] == "args.json: num_generations"
    assert set(df[Step.ALGORITHM]) == {"gspo"}
    # the token level and dapo: GRPO's ratio, DAPO's aggregation, token eps
    token = {**ARGS, "importance_sampling_level": "token"}
    _, tok, _ = _import(_folder(tmp_path, GSPO_LINES, token, "t"), tmp_path / "runs2")
    assert tok.algorithm == "grpo" and (tok.token_eps_low, tok.token_eps_high) == (0.0003, 0.0004)
    assert (
        swift.run_settings({"loss_type": "dapo", "importance_sampling_level": "sequence"}).algorithm
        == "dapo-seq"
    )
    assert (
        swift.run_settings(
            {"loss_type": "grpo", "importance_sampling_level": "sequence_token"}
        ).algorithm
        == "gspo"
    )
    assert swift.run_settings({"loss_type": "grpo"}).algorithm is None  # the level unstated
    assert (
        swift.run_settings(
            {"rlhf_type": "dpo", "loss_type": "grpo", "importance_sampling_level": "token"}
        ).algorithm
        is None
    )
    cispo = swift.run_settings(
        {"loss_type": "cispo", "importance_sampling_level": "token", "epsilon": 0.2}
    )
    assert cispo.algorithm == "cispo" and cispo.token_eps is None  # CISPO's cap is no clip range


def test_sequence_clip_shares_are_ours_only_where_the_version_says_what_they_count(tmp_path):
    """ms-swift < 4.4: A one value a sequence, the share of sequences (ours); >= 4.4: per token,
    each sequence weighed by its length (own name); undated: withheld, said why."""
    folder = _folder(tmp_path, [*GSPO_LINES, SUMMARY_LINE, FINAL_LINE])
    _, info, df = _import(folder, tmp_path / "a")
    assert _cell(df, 2, "swift/clip_ratio/low_mean") == 0.375
    assert Step.SEQ_CLIP_LOW_FRACTION not in df or df[Step.SEQ_CLIP_LOW_FRACTION].isna().all()
    assert info.imported.renamed["clip_ratio/low_mean"] == "swift/clip_ratio/low_mean"
    assert "changed within" in info.imported.notes["clip_ratio/low_mean"]
    _, old, df = _import(folder, tmp_path / "b", tool_version="4.3.2")
    assert _cell(df, 2, Step.SEQ_CLIP_LOW_FRACTION) == 0.375
    assert _cell(df, 4, Step.SEQ_CLIP_HIGH_FRACTION) == 0.125
    assert _cell(df, 4, "seq_clip_binding_fraction") == 0.375
    _, new, df = _import(folder, tmp_path / "c", tool_version="4.6.0")
    assert Step.SEQ_CLIP_LOW_FRACTION not in df or df[Step.SEQ_CLIP_LOW_FRACTION].isna().all()
    assert _cell(df, 2, "swift/clip_ratio/low_mean") == 0.375
    assert "length" in new.imported.notes["clip_ratio/low_mean"]


def test_token_level_clip_shares_and_kl_in_reward(tmp_path):
    folder = _folder(tmp_path, GSPO_LINES, {**ARGS, "importance_sampling_level": "token"})
    _, _, df = _import(folder, tmp_path / "a")
    assert _cell(df, 2, Step.TOKEN_CLIP_LOW_FRACTION) == 0.375
    assert _cell(df, 2, "token_clip_binding_fraction") == 0.5
    folder = _folder(tmp_path, GSPO_LINES, {**ARGS, "kl_in_reward": True}, "k")
    _, info, df = _import(folder, tmp_path / "b")
    # with the KL in the reward, ms-swift's kl is a per-sequence sum of k1 and its reward has
    # the penalty subtracted: neither is ours
    assert Step.KL_REF_MEAN not in df or df[Step.KL_REF_MEAN].isna().all()
    assert _cell(df, 3, "swift/kl") == 0.05641946
    assert Step.REWARD_MEAN not in df or df[Step.REWARD_MEAN].isna().all()


def test_evaluation_lines_keep_their_own_names(tmp_path):
    lines = [*GSPO_LINES, EVAL_LINE, SUMMARY_LINE, FINAL_LINE]
    _, info, df = _import(_folder(tmp_path, lines), tmp_path / "runs")
    assert _cell(df, 4, "eval_reward") == 0.25 and _cell(df, 4, "eval_loss") == 0.0021
    assert _cell(df, 4, Step.LOSS) == 0.00197816  # the training line's loss, not eval's
    assert _cell(df, 4, Step.LENGTH_MEAN) is None  # eval's length is not a training length
    assert info.imported.duplicate_steps == ()  # an eval line adds columns, cancels nothing


def test_status_from_the_planned_end(tmp_path):
    runs = tmp_path / "runs"
    _, done, _ = _import(_folder(tmp_path, [*GSPO_LINES, SUMMARY_LINE, FINAL_LINE], name="a"), runs)
    assert done.status == schema.STATUS_FINISHED
    assert done.imported.planned_end["steps"] == 8
    assert "global_step/max_steps" in done.imported.planned_end["from"]
    # a crash at step 4: the final record (written in a finally) without the end-of-training one
    crashed = FINAL_LINE.replace('"global_step": 8', '"global_step": 4')
    _, crash, _ = _import(_folder(tmp_path, [*GSPO_LINES, crashed], name="b"), runs)
    assert crash.status == "stopped early"
    assert "reached step 4" in crash.imported.status_basis
    assert "no end-of-training line" in crash.imported.status_basis
    # no args.json and the log cut at step 4: planned 8 from the progress, stopped early
    _, cut, _ = _import(_folder(tmp_path, GSPO_LINES, None, "c"), runs)
    assert cut.status == "stopped early" and cut.imported.planned_end["steps"] == 8
    assert cut.algorithm == "unknown"  # no args.json: the loss and level are not stated


def test_a_line_without_progress_is_counted_not_fatal(tmp_path):
    lines = [GSPO_LINES[0], '{"loss": 1.0}', "not json", *GSPO_LINES[1:]]
    _, info, df = _import(_folder(tmp_path, lines), tmp_path / "runs")
    assert list(df.index) == [1, 2, 3, 4]
    reasons = {d["line"]: d["reason"] for d in info.imported.malformed_lines}
    assert "global_step/max_steps" in reasons[2] and "not JSON" in reasons[3]
    with pytest.raises(ValueError, match="holds no ms-swift log line"):
        importers.import_run(
            "swift", _folder(tmp_path, ['{"loss": 1}'], name="x"), root=tmp_path / "r"
        )


def test_progress_text():
    assert swift.progress("12/500") == (12, 500)
    assert swift.progress(" 3 / 8 ") == (3, 8)
    assert swift.progress("3/8/9") is None and swift.progress(3) is None


def test_the_cli_lists_swift():
    assert "swift" in _parser().format_help()


@pytest.mark.skipif(not GENERATED.is_dir(), reason="the generated ms-swift logs are absent")
@pytest.mark.parametrize("run", ["out_grpo", "out_gspo", "out_grpo_win"])
def test_generated_logs_equal_their_source_cell_by_cell(run, tmp_path):
    folder = GENERATED / run
    _, info, df = _import(folder, tmp_path / "runs")
    args = json.loads((folder / "args.json").read_text())
    rows = [json.loads(x) for x in (folder / "logging.jsonl").read_text().splitlines()]
    train = [r for r in rows if "loss" in r and "global_step/max_steps" in r]
    assert list(df.index) == [int(r["global_step/max_steps"].split("/")[0]) for r in train]
    for r in train:
        step = int(r["global_step/max_steps"].split("/")[0])
        for key, column in (
            ("loss", Step.LOSS),
            ("kl", Step.KL_REF_MEAN),
            ("reward", Step.REWARD_MEAN),
            ("grad_norm", "grad_norm"),
            ("completions/mean_length", Step.LENGTH_MEAN),
        ):
            assert _cell(df, step, column) == r.get(key), (run, step, key)
    assert info.status == schema.STATUS_FINISHED
    assert (
        info.algorithm == {"token": "grpo", "sequence": "gspo"}[args["importance_sampling_level"]]
    )
