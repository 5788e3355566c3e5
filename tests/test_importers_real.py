"""Every real log under ../shared/real_logs/ (other people's TRL, Tinker and verl runs, kept byte
for byte as their authors committed them) imports, and what the run holds is what the log holds.

The test parses each source itself (plain ``json``) and compares: every mapped, renamed or kept
metric equals the source value at every step; every one of our columns that no source name
fills is null (nothing shown is a number the source did not contain); settings no file states
are null in run.json; the verl KL loss (``use_kl_loss=False``, logged as 0.0) is null. Named
columns at named steps are checked per log. Skipped when the folder is absent (a plain clone):
the files belong to their authors and are never copied into the project.
"""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from training_hooks import importers, schema
from training_hooks.metric_map import Derived
from training_hooks.schema import Step


def real_logs_dir() -> Path | None:
    """``$GSPO_DASH_REAL_LOGS``, else ``<repo>/../shared/real_logs``, else /work/shared/real_logs."""
    repo = Path(__file__).resolve().parent.parent
    for cand in (os.environ.get("GSPO_DASH_REAL_LOGS"), repo.parent / "shared" / "real_logs"):
        if cand and Path(cand).is_dir():
            return Path(cand)
    fixed = Path("/work/shared/real_logs")
    return fixed if fixed.is_dir() else None


REAL = real_logs_dir()
pytestmark = pytest.mark.skipif(REAL is None, reason="../shared/real_logs/ is absent")


def real_logs(folder: Path | None = REAL) -> list[tuple[str, Path]]:
    """(tool, log file) for every log in the folder: trl/**/*trainer_state*.json, tinker/**/*.jsonl,
    verl/**/*.jsonl (the .config.json beside a verl log is its config, not a log)."""
    if folder is None:
        return []
    found = [("trl", p) for p in (folder / "trl").rglob("*trainer_state*.json")]
    found += [(tool, p) for tool in ("tinker", "verl") for p in (folder / tool).rglob("*.jsonl")]
    return sorted(found, key=lambda tp: str(tp[1]))


def source_rows(tool: str, path: Path) -> dict[int, dict[str, Any]]:
    """The log as its tool wrote it, parsed here independently of the importer: {step: {name:
    value}}, a later value of a name at a step replacing the earlier one. TRL's final summary
    entry (train_runtime) is no step; a line that is not JSON is skipped."""
    rows: dict[int, dict[str, Any]] = defaultdict(dict)
    if tool == "trl":
        for e in json.loads(path.read_text())["log_history"]:
            if "train_runtime" not in e:
                rows[e["step"]].update({k: v for k, v in e.items() if k != "step"})
        return dict(rows)
    for line in path.read_text().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        data = obj["data"] if tool == "verl" else {k: v for k, v in obj.items() if k != "step"}
        rows[obj["step"]].update(data)
    return dict(rows)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _import(tool: str, path: Path, root: Path) -> tuple[pd.DataFrame, schema.RunInfo]:
    res = importers.import_run(tool, path, root=root)
    df = schema.read_table(res["run_dir"], schema.STEPS_DIR).set_index(Step.STEP)
    return df, schema.read_run_info(res["run_dir"])


LOGS = real_logs()


def test_the_seven_logs_of_the_readme_are_found():
    """The folder's README lists seven logs: three TRL generations, two Tinker, two verl."""
    tools = [t for t, _ in LOGS]
    assert len(LOGS) >= 7 and tools.count("trl") >= 3 and tools.count("verl") >= 2
    assert tools.count("tinker") >= 2


@pytest.mark.slow
@pytest.mark.parametrize(("tool", "path"), LOGS, ids=[p.parent.name for _, p in LOGS])
def test_every_value_equals_the_source(tool, path, tmp_path):
    """Each stored foreign metric equals the source at every step (null where the source has
    none); each of our columns no source name fills is null; one row per step with numbers."""
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    rec = info.imported
    numeric_steps = {s for s, m in src.items() if any(_is_num(v) for v in m.values())}
    assert list(df.index) == sorted(numeric_steps)
    stored = {**{n: c for n, c in rec.mapped.items() if n in _names(src)}, **rec.renamed}
    stored |= {n: n for n in rec.unmapped}
    for name, col in stored.items():
        want = [src[s].get(name) for s in df.index]
        got = df[col].tolist()
        for s, w, g in zip(df.index, want, got, strict=True):
            if _is_num(w):
                assert g == w or (math.isnan(g) and math.isnan(w)), (name, col, s, w, g)
            else:
                assert pd.isna(g), (name, col, s, g)
    filled_by = set(stored.values()) | set(rec.mapped.values()) | {Step.WALL_TIME}
    for col in (*schema.STEP_METRIC_COLUMNS, Derived.TOKEN_CLIP_BINDING, Derived.SEQ_CLIP_BINDING):
        if col not in filled_by and col in df.columns:
            assert df[col].isna().all(), f"{col} holds numbers no source name gave"
    for name in rec.nulled:  # a feature that was off: no column at all
        assert name not in df.columns and f"{tool}/{name}" not in df.columns
    assert rec.path == str(path) and rec.rows == len(df) and rec.tool == tool


def _names(src: dict[int, dict[str, Any]]) -> set[str]:
    return {k for m in src.values() for k in m}


@pytest.mark.parametrize(("tool", "path"), LOGS, ids=[p.parent.name for _, p in LOGS])
def test_settings_are_null_unless_a_file_beside_the_log_states_them(tool, path, tmp_path):
    """run.json's ε, reduction and group size come from the config beside the log (read here
    independently) or stay null; never our defaults."""
    _, info = _import(tool, path, tmp_path)
    cfg_file = path.with_name(path.stem + ".config.json")
    if tool == "verl" and cfg_file.is_file():
        actor = json.loads(cfg_file.read_text())["config"]["actor_rollout_ref"]["actor"]
        assert (info.token_eps_low, info.token_eps_high) == (
            actor["clip_ratio_low"],
            actor["clip_ratio_high"],
        )
        assert info.reduction == actor["loss_agg_mode"].replace("-", "_")
        assert info.group_size == actor["rollout_n"] and info.seq_eps_low is None
        assert info.algorithm == "grpo" and actor["policy_loss"]["loss_mode"] == "vanilla"
    else:  # nothing beside these logs states a setting
        assert info.imported.settings_files == ()
        for key in ("seq_eps_low", "seq_eps_high", "token_eps_low", "token_eps_high"):
            assert getattr(info, key) is None, key
        assert info.reduction is None and info.group_size is None


def _one(name: str) -> tuple[str, Path]:
    (hit,) = [(t, p) for t, p in LOGS if name in str(p)]
    return hit


def test_old_trl_unsloth_log(tmp_path):
    """Unsloth / TRL <= 0.15: completion_length is the length; reward_std (mean of per-group
    stds) and kl (sequence-weighted) keep trl/ names; no wall time (no step_time)."""
    tool, path = _one("gemma3-rl-abdo-ashraf")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    assert df.loc[10, Step.REWARD_MEAN] == src[10]["reward"] == 0.4269749991595745
    assert df.loc[250, Step.LENGTH_MEAN] == src[250]["completion_length"] == 340.375
    assert df.loc[250, "trl/reward_std"] == src[250]["reward_std"]
    assert df.loc[250, "trl/kl"] == src[250]["kl"]
    assert df[[Step.REWARD_STD, Step.KL_REF_MEAN, Step.WALL_TIME]].isna().all().all()
    assert (
        df.loc[10, "rewards/correctness_reward_func"] == src[10]["rewards/correctness_reward_func"]
    )
    assert info.imported.format == "TRL <=0.15 / Unsloth (<0.16)" and info.algorithm == "grpo"
    assert info.imported.wall_time == "null: the log has no step_time"


def test_trl_0_23_log_with_beta_zero(tmp_path):
    """TRL 0.23 (its names say >= 0.20), logging_steps 10, beta = 0 (no kl logged): the KL column
    is null; the per-batch max/min are window means (trl/ names); the clip unit is unknown."""
    tool, path = _one("minesweeper-aaipl-srinath")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    s = 500
    assert df.loc[s, Step.REWARD_MEAN] == src[s]["reward"] == 0.425
    assert df.loc[s, Step.ENTROPY_MEAN] == src[s]["entropy"]
    assert df.loc[s, Step.ZERO_VARIANCE_FRACTION] == src[s]["frac_reward_zero_std"] == 0.7
    assert df.loc[s, Step.LENGTH_MEAN] == src[s]["completions/mean_length"]
    assert df.loc[s, Step.TRUNCATED_FRACTION] == src[s]["completions/clipped_ratio"]
    assert df.loc[s, "trl/completions/max_length"] == src[s]["completions/max_length"] == 128.0
    assert df.loc[s, "trl/num_tokens"] == src[s]["num_tokens"] == 4154653
    assert df.loc[s, "trl/clip_ratio/region_mean"] == src[s]["clip_ratio/region_mean"]
    assert df[Step.KL_REF_MEAN].isna().all() and "kl" not in _names(src)
    assert df[[Step.LENGTH_MAX, Step.NUM_TOKENS, Step.TOKEN_CLIP_LOW_FRACTION]].isna().all().all()
    assert info.algorithm == "unknown" and info.imported.version_range == ">=0.20"


def test_recent_trl_log_with_step_time(tmp_path):
    """A recent TRL (step_time: >= 0.26): wall time accumulates step_time (logging_steps 1), the
    per-batch extremes are ours, kl (ratio-weighted when use_bias_correction_kl) is trl/kl."""
    tool, path = _one("agent-memory-redteam")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    assert df.loc[1, Step.WALL_TIME] == src[1]["step_time"] == 21.498548832000004
    assert df.loc[100, Step.WALL_TIME] == pytest.approx(sum(src[s]["step_time"] for s in src))
    assert df.loc[100, Step.LENGTH_MIN] == src[100]["completions/min_length"] == 52.0
    assert df.loc[99, "trl/kl"] == src[99]["kl"] and df[Step.KL_REF_MEAN].isna().all()
    assert df.loc[100, Step.LOSS] == src[100]["loss"]
    assert info.imported.source_finished is False  # global_step 100 of max_steps 200
    assert "relative" in info.imported.wall_time


def test_tinker_rl_train_log(tmp_path):
    """Tinker rl/train.py (single-turn): reward, lengths, counts, the k2 sampler KL; v1 keeps a
    tinker/ name and KL old->new stays null; wall time accumulates time/total."""
    tool, path = _one("tinker-rl-lab-arithmetic")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    r0 = src[0]
    assert df.loc[0, Step.REWARD_MEAN] == r0["env/all/reward/total"] == 0.67625
    assert df.loc[0, Step.NUM_TOKENS] == r0["env/all/total_ac_tokens"] == 1967
    assert df.loc[0, Step.NUM_SEQUENCES] == r0["env/all/total_episodes"] == 400
    assert df.loc[0, Step.LENGTH_MEAN] == r0["env/all/ac_tokens_per_turn"]
    want = r0["env/all/by_group/frac_all_good"] + r0["env/all/by_group/frac_all_bad"]
    assert df.loc[0, Step.ZERO_VARIANCE_FRACTION] == want == 0.19
    assert df.loc[0, Step.SAMPLER_KL_MEAN] == r0["optim/kl_sample_train_v2"]
    assert df.loc[2, "tinker/optim/kl_sample_train_v1"] == src[2]["optim/kl_sample_train_v1"] < 0
    assert df[Step.KL_OLD_MEAN].isna().all() and df[Step.KL_REF_MEAN].isna().all()
    assert df.loc[0, Step.WALL_TIME] == r0["time/total"]
    assert df.loc[99, Step.WALL_TIME] == pytest.approx(sum(src[s]["time/total"] for s in src))
    assert info.imported.format == "Tinker cookbook metrics (rl/train.py)"


def test_tinker_recipe_loop_log(tmp_path):
    """A cookbook recipe's own loop: reward/mean is the reward; its other names stay theirs."""
    tool, path = _one("cookbook-cog-rl-exp8")
    src = source_rows(tool, path)
    df, _ = _import(tool, path, tmp_path)
    assert df.loc[0, Step.REWARD_MEAN] == src[0]["reward/mean"] == 0.5921875
    assert df.loc[99, Step.REWARD_MEAN] == src[99]["reward/mean"]
    assert df.loc[99, "data/num_rollouts"] == src[99]["data/num_rollouts"]
    assert df[Step.NUM_SEQUENCES].isna().all()


def test_verl_clip_sweep_log(tmp_path):
    """verl (fork, use_kl_loss=False): actor/kl_loss, logged as 0.0, is null and not stored;
    pg_clipfrac is the token binding fraction (loss_mode vanilla); rollout_corr/k3_kl is the
    sampler KL; wall time starts at the config's created_at."""
    tool, path = _one("asycn-verl-clip-sweep")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    assert all(src[s]["actor/kl_loss"] == 0.0 for s in src)  # logged, never measured
    assert df[Step.KL_REF_MEAN].isna().all() and "actor/kl_loss" not in df.columns
    assert "use_kl_loss" in info.imported.nulled["actor/kl_loss"]
    s1 = src[1]
    assert df.loc[1, Derived.TOKEN_CLIP_BINDING] == s1["actor/pg_clipfrac"]
    assert df.loc[1, Step.SAMPLER_KL_MEAN] == s1["rollout_corr/k3_kl"]
    assert df.loc[1, "verl/rollout_corr/kl"] == s1["rollout_corr/kl"]
    assert df.loc[1, Step.KL_OLD_MEAN] == s1["actor/ppo_kl"]
    assert df.loc[300, Step.REWARD_MEAN] == src[300]["critic/score/mean"]
    assert df.loc[300, "val-core/AIME/acc/mean@16"] == src[300]["val-core/AIME/acc/mean@16"]
    assert df.loc[1, "verl/actor/pg_loss"] == s1["actor/pg_loss"] and df[Step.LOSS].isna().all()
    cfg = json.loads(path.with_name(path.stem + ".config.json").read_text())
    assert cfg["created_at"] == "2026-05-23 01:43:45 +0000"
    start = 1779500625.0
    assert info.created_at == start
    assert df.loc[300, Step.WALL_TIME] == pytest.approx(
        start + sum(src[s]["timing_s/step"] for s in src)
    )


@pytest.mark.slow
def test_verl_resumed_style_log_with_validation_line_and_truncated_end(tmp_path):
    """verl with val_before_train: step 0 holds validation metrics only (kept as val-* columns,
    no train metric, no wall time, nothing cancelled elsewhere); the truncated last line is
    reported with its number, not skipped silently; the CLI prints it."""
    tool, path = _one("asycn-verl-lr-sigfrac")
    src = source_rows(tool, path)
    lines = path.read_text().splitlines()
    bad = [i + 1 for i, line in enumerate(lines) if line.strip() and not _parses(line)]
    assert bad == [302]
    df, info = _import(tool, path, tmp_path)
    assert info.imported.truncated_last_line == 302 and info.imported.malformed_lines == ()
    assert info.imported.validation_only_steps == (0,)
    assert df.loc[0, "val-core/AIME/acc/mean@16"] == src[0]["val-core/AIME/acc/mean@16"]
    assert df.loc[0, [Step.REWARD_MEAN, Step.WALL_TIME, Step.LENGTH_MEAN]].isna().all()
    assert df.loc[10, "val-core/AIME/acc/mean@16"] == src[10]["val-core/AIME/acc/mean@16"]
    assert df.loc[10, Step.REWARD_MEAN] == src[10]["critic/score/mean"]  # same line, both kept
    assert df.loc[1:, Step.WALL_TIME].notna().all()  # the validation line drops no wall time
    assert df[Step.KL_REF_MEAN].isna().all() and len(df) == 301
    assert "actor/kl_loss" not in _names(src)
    out = importers.main(["verl", str(path), "--root", str(tmp_path / "cli")])
    assert out == 0


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


@pytest.mark.slow
def test_readme_table_rows(tmp_path):
    """The README's table: one row per real log, computed by importers.summarize."""
    rows = []
    for tool, path in LOGS:
        res = importers.import_run(tool, path, root=tmp_path)
        rows.append((str(path.relative_to(REAL)), importers.summarize(res["run_dir"])))
    table = importers.markdown_table(rows)
    assert len(table.splitlines()) == 2 + len(LOGS)
    by_log = dict(rows)
    verl = next(s for k, s in by_log.items() if "clip-sweep" in k)
    assert Step.SAMPLER_KL_MEAN in verl.filled and Step.KL_REF_MEAN in verl.unknown
    tinker = next(s for k, s in by_log.items() if "arithmetic" in k)
    assert Step.REWARD_MEAN in tinker.filled and Step.KL_OLD_MEAN in tinker.unknown
