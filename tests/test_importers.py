"""Importers: TRL trainer_state.json, Tinker cookbook metrics.jsonl, verl file logger -> our runs.

Each test writes a small file in the tool's own format (as its logger writes it), imports it, and
reads the run back with pandas, checking values by hand.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from training_hooks import importers, schema
from training_hooks.schema import Step


def _steps(run_dir: str) -> pd.DataFrame:
    files = sorted((Path(run_dir) / schema.STEPS_DIR).glob("*.parquet"))
    assert len(files) == 1 and not files[0].name.startswith(".")
    return pd.read_parquet(files[0]).set_index(Step.STEP)


def _trl_state(path: Path, log_history: list[dict]) -> Path:
    # the shape transformers.TrainerState.save_to_json writes (sorted keys, indent 2)
    state = {
        "best_global_step": None,
        "best_metric": None,
        "epoch": 1.0,
        "eval_steps": 500,
        "global_step": max(e["step"] for e in log_history),
        "is_world_process_zero": True,
        "log_history": log_history,
        "logging_steps": 1,
        "max_steps": 3,
        "num_train_epochs": 1,
        "trial_name": None,
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    return path / "trainer_state.json"


TRL_STEP = {
    "clip_ratio/high_max": 0.0,
    "clip_ratio/high_mean": 0.125,
    "clip_ratio/low_mean": 0.0625,
    "clip_ratio/low_min": 0.0,
    "clip_ratio/region_mean": 0.1875,
    "completions/clipped_ratio": 0.25,
    "completions/max_length": 16.0,
    "completions/mean_length": 11.5,
    "completions/min_length": 3.0,
    "entropy": 2.5,
    "epoch": 0.33,
    "frac_reward_zero_std": 0.5,
    "grad_norm": 0.75,
    "kl": 0.002,
    "learning_rate": 1e-6,
    "loss": 0.0125,
    "num_tokens": 1234.0,
    "reward": 0.625,
    "reward_std": 0.5,
    "rewards/accuracy/mean": 0.625,
    "step_time": 1.5,
}


def test_trl_trainer_state_maps_names_and_keeps_extras(tmp_path):
    """TRL log_history -> one row per step: mapped columns, extras under their own names, NaN gaps."""
    step2 = {**TRL_STEP, "reward": 0.75, "loss": -0.01}
    eval2 = {"eval_reward": 0.5, "eval_loss": 0.2, "epoch": 0.66, "step": 2}
    summary = {
        "epoch": 1.0,
        "step": 3,
        "total_flos": 0.0,
        "train_loss": 0.003,
        "train_runtime": 12.5,
        "train_samples_per_second": 3.2,
        "train_steps_per_second": 0.24,
    }
    history = [
        {**TRL_STEP, "step": 1},
        {**step2, "step": 2},
        eval2,
        {**TRL_STEP, "step": 3},
        summary,
    ]
    out = tmp_path / "out"
    _trl_state(out / "checkpoint-2", history[:2])  # an older checkpoint: ignored
    _trl_state(out / "checkpoint-3", history)
    res = importers.import_run("trl", out, root=tmp_path / "runs", algorithm="grpo")
    df = _steps(res["run_dir"])
    assert list(df.index) == [1, 2, 3]  # the summary entry is no step
    r1, r2 = df.loc[1], df.loc[2]
    assert r1[Step.TOKEN_CLIP_LOW_FRACTION] == 0.0625
    assert r1[Step.TOKEN_CLIP_HIGH_FRACTION] == 0.125
    # region = where the clip binds = low + high, never our "outside the range" fraction
    assert r1["token_clip_binding_fraction"] == 0.1875
    assert math.isnan(r1[Step.TOKEN_CLIP_FRACTION])
    assert r1[Step.ZERO_VARIANCE_FRACTION] == 0.5
    assert r1[Step.LENGTH_MEAN] == 11.5 and r1[Step.LENGTH_MIN] == 3.0
    assert r1[Step.TRUNCATED_FRACTION] == 0.25
    assert r1[Step.KL_REF_MEAN] == 0.002 and r1[Step.ENTROPY_MEAN] == 2.5
    assert r1[Step.REWARD_MEAN] == 0.625 and r2[Step.REWARD_MEAN] == 0.75
    assert r2[Step.LOSS] == -0.01
    # extras under their own names; TRL's cumulative num_tokens must not pose as ours
    assert r1["grad_norm"] == 0.75 and r1["rewards/accuracy/mean"] == 0.625
    assert r1["trl/num_tokens"] == 1234.0 and pd.isna(r1[Step.NUM_TOKENS])
    assert r2["eval_reward"] == 0.5 and math.isnan(r1["eval_reward"])  # eval merged into step 2
    assert math.isnan(r1[Step.SEQ_CLIP_LOW_FRACTION]) and math.isnan(r1[Step.KL_OLD_MEAN])
    assert set(df[Step.ALGORITHM]) == {"grpo"} and set(df[Step.SCHEMA_VERSION]) == {1}
    info = schema.read_run_info(res["run_dir"])
    assert info.source == "trl" and info.status == schema.STATUS_FINISHED
    assert info.algorithm == "grpo" and info.last_step == 3 and info.name == "out"
    assert info.other["summary"]["train_runtime"] == 12.5
    assert info.other["imported_from"].endswith("checkpoint-3/trainer_state.json")


def test_trl_gspo_clip_metrics_are_sequence_unit(tmp_path):
    """With importance_sampling_level="sequence", TRL's clip_ratio/* fill our seq_clip_* columns."""
    file = _trl_state(tmp_path / "o", [{**TRL_STEP, "step": 5}])
    config = tmp_path / "cfg.json"
    config.write_text(
        json.dumps({"importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4})
    )
    root = tmp_path / "runs"
    code = importers.main(
        [
            "trl",
            str(file),
            "--root",
            str(root),
            "--name",
            "g",
            "--config",
            str(config),
            "--run-id",
            "g1",
        ]
    )
    assert code == 0
    df = _steps(str(root / "g1"))
    assert df.loc[5, Step.SEQ_CLIP_LOW_FRACTION] == 0.0625
    assert df.loc[5, Step.SEQ_CLIP_HIGH_FRACTION] == 0.125
    assert df.loc[5, "seq_clip_binding_fraction"] == 0.1875
    assert math.isnan(df.loc[5, Step.TOKEN_CLIP_LOW_FRACTION])
    info = schema.read_run_info(root / "g1")
    assert info.algorithm == "gspo"  # guessed from the config
    assert (info.seq_eps_low, info.seq_eps_high) == (3e-4, 4e-4)


def test_tinker_metrics_jsonl(tmp_path):
    """Tinker: zero_variance_fraction = frac_all_good + frac_all_bad; parts and the rest kept."""
    log = tmp_path / "tinker-run"
    log.mkdir()
    lines = [
        {
            "step": 0,
            "env/all/by_group/frac_all_good": 0.25,
            "env/all/by_group/frac_all_bad": 0.125,
            "env/all/by_group/frac_mixed": 0.625,
            "optim/kl_sample_train_v1": 0.001,
            "optim/entropy": 1.75,
            "env/all/reward/total": 0.4,
            "time/total": 10.0,
            "progress/done_frac": 0.5,
            "note": "text is dropped",
        },
        {
            "step": 1,
            "env/all/by_group/frac_all_good": 0.5,
            "env/all/by_group/frac_all_bad": 0.0,
            "env/all/by_group/frac_mixed": 0.5,
            "optim/kl_sample_train_v1": -0.002,
            "optim/entropy": 1.5,
            "env/all/reward/total": 0.6,
            "time/total": 20.0,
        },
    ]
    (log / "metrics.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines) + '{"step": 2, "optim'
    )
    (log / "config.json").write_text(
        json.dumps({"loss_fn": "importance_sampling", "group_size": 4, "learning_rate": 4e-5})
    )
    res = importers.import_run("tinker", log, root=tmp_path / "runs")
    df = _steps(res["run_dir"])
    assert list(df.index) == [0, 1]  # the torn last line (a run still writing) is skipped
    assert df.loc[0, Step.ZERO_VARIANCE_FRACTION] == 0.375  # 0.25 + 0.125
    assert df.loc[1, Step.ZERO_VARIANCE_FRACTION] == 0.5
    assert df.loc[0, "env/all/by_group/frac_all_good"] == 0.25
    assert df.loc[0, "env/all/by_group/frac_mixed"] == 0.625
    assert df.loc[1, Step.KL_OLD_MEAN] == -0.002 and df.loc[0, Step.ENTROPY_MEAN] == 1.75
    assert df.loc[1, "env/all/reward/total"] == 0.6
    assert math.isnan(df.loc[1, "progress/done_frac"]) and "note" not in df.columns
    # wall time from the per-step durations, ending at the file's mtime: 10 s apart... 20 s
    assert df.loc[1, Step.WALL_TIME] - df.loc[0, Step.WALL_TIME] == pytest.approx(20.0)
    info = schema.read_run_info(res["run_dir"])
    assert info.source == "tinker" and info.config["group_size"] == 4
    assert info.algorithm == "grpo" and info.name == "tinker-run"


def test_verl_file_logger_cli(tmp_path):
    """verl {"step", "data"} lines via the CLI: pg_clipfrac is where the clip binds, not outside."""
    proj = tmp_path / "my_project"
    proj.mkdir()
    recs = [
        {
            "step": 1,
            "data": {
                "actor/pg_clipfrac": 0.02,
                "actor/ppo_kl": 0.0005,
                "response_length/mean": 256.0,
                "response_length/clip_ratio": 0.1,
                "actor/entropy": 0.9,
                "critic/score/mean": 0.3,
                "actor/pg_loss": 0.01,
                "timing_s/step": 30.0,
                "actor/grad_norm": 1.25,
            },
        },
        {
            "step": 2,
            "data": {
                "actor/pg_clipfrac": 0.04,
                "actor/ppo_kl": -0.0001,
                "response_length/mean": 300.0,
                "response_length/clip_ratio": 0.2,
                "actor/entropy": 0.8,
                "critic/score/mean": 0.35,
                "actor/pg_loss": 0.02,
                "timing_s/step": 31.0,
                "actor/grad_norm": 1.0,
            },
        },
    ]
    f = proj / "exp_gspo.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    root = tmp_path / "runs"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "training_hooks.importers",
            "verl",
            str(f),
            "--root",
            str(root),
            "--run-id",
            "v1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "imported 2 steps" in out.stdout
    df = _steps(str(root / "v1"))
    assert df.loc[1, "token_clip_binding_fraction"] == 0.02
    assert math.isnan(df.loc[1, Step.TOKEN_CLIP_FRACTION])
    assert df.loc[2, Step.KL_OLD_MEAN] == -0.0001
    assert df.loc[2, Step.LENGTH_MEAN] == 300.0 and df.loc[1, Step.TRUNCATED_FRACTION] == 0.1
    assert df.loc[1, Step.REWARD_MEAN] == 0.3 and df.loc[2, Step.LOSS] == 0.02
    assert df.loc[2, "actor/grad_norm"] == 1.0
    assert df.loc[2, Step.WALL_TIME] - df.loc[1, Step.WALL_TIME] == pytest.approx(31.0)
    info = schema.read_run_info(root / "v1")
    assert info.source == "verl" and info.name == "exp_gspo" and info.algorithm == "unknown"
    assert info.other["project"] == "my_project"


def test_bad_inputs_raise_clear_errors(tmp_path):
    """A file of the wrong format names the file and what is missing."""
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"step": 1, "loss": 0.1}\n{"step": 2, "loss": 0.2}\n')
    with pytest.raises(ValueError, match=r'"data"'):
        importers.import_run("verl", bad, root=tmp_path / "runs")
    with pytest.raises(ValueError, match="not valid JSON"):
        importers.import_run("trl", bad, root=tmp_path / "runs")
    state = tmp_path / "trainer_state.json"
    state.write_text('{"global_step": 3}')
    with pytest.raises(ValueError, match="no 'log_history' list"):
        importers.import_run("trl", state, root=tmp_path / "runs")
    with pytest.raises(ValueError, match="source must be one of"):
        importers.import_run("wandb", bad, root=tmp_path / "runs")
    with pytest.raises(ValueError, match="holds no metrics.jsonl"):
        importers.import_run("tinker", tmp_path, root=tmp_path / "runs")
