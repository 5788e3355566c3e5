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

import ast
import importlib.util
import json
import math
import os
import re
import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from training_hooks import importers, schema, tables
from training_hooks.importers import _text
from training_hooks.importers._describe import dialect_of, report_lines
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
    """(tool, log) for every log in the folder: trl/**/*trainer_state*.json, tinker/**/*.jsonl,
    verl/**/*.jsonl (the .config.json beside a verl log is its config, not a log); and the newer
    formats: verl/**/*.log (console), trl/**/events.out.tfevents.* (TensorBoard) and
    trl/**/wandb/run-*/ (a W&B run folder, given as the folder)."""
    if folder is None:
        return []
    found = [("trl", p) for p in (folder / "trl").rglob("*trainer_state*.json")]
    found += [(tool, p) for tool in ("tinker", "verl") for p in (folder / tool).rglob("*.jsonl")]
    found += [("verl", p) for p in (folder / "verl").rglob("*.log")]
    found += [("trl", p) for p in (folder / "trl").rglob("events.out.tfevents.*")]
    found += [("trl", p) for p in (folder / "trl").rglob("wandb/run-*") if p.is_dir()]
    return sorted(found, key=lambda tp: str(tp[1]))


def log_id(path: Path) -> str:
    """A test id: the log's folder under the tool's (its format added for the newer ones)."""
    rel = path.relative_to(REAL) if REAL else path
    kind = (
        "tfevents" if path.name.startswith("events.") else "wandb" if "wandb" in rel.parts else ""
    )
    return rel.parts[1] + (f"-{kind}" if kind else "") if len(rel.parts) > 1 else path.parent.name


def kind_of(path: Path) -> str:
    if path.name.startswith("events.out.tfevents."):
        return "tfevents"
    if path.is_dir():
        return "wandb"
    return "console" if path.suffix == ".log" else "json"


ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: TRL's end-of-training entry: a summary, no step (trainer_state.json, events, console alike)
TRL_SUMMARY = {"train_runtime", "train_samples_per_second", "train_steps_per_second"}
TRL_SUMMARY_EVENTS = TRL_SUMMARY | {"train_loss", "total_flos"}
WANDB_LOGGING_STEPS = 10  # the README: the source's config.yaml (not kept) says logging_steps=10


def source_rows(tool: str, path: Path) -> dict[int, dict[str, Any]]:
    """The log as its tool wrote it, parsed here independently of the importer: {step: {name:
    value}}, a later value of a name at a step replacing the earlier one. TRL's final summary
    entry (train_runtime) is no step; a line that is not JSON is skipped."""
    kind = kind_of(path)
    if kind != "json":
        return {"console": _verl_console_rows, "tfevents": _event_rows, "wandb": _wandb_rows}[kind](
            path
        )
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


def source_runs(tool: str, path: Path) -> list[dict[int, dict[str, Any]]]:
    """A JSON-lines log split into the runs appended to it, parsed here: a line that logs a name
    again at a step at or before its run's first step starts a new run. Other logs: one run."""
    if kind_of(path) != "json" or tool == "trl":
        return [source_rows(tool, path)]
    runs: list[dict[int, dict[str, Any]]] = []
    first = None
    for line in path.read_text().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        data = obj["data"] if tool == "verl" else {k: v for k, v in obj.items() if k != "step"}
        step = obj["step"]
        if not runs or (step <= first and set(data) & set(runs[-1].get(step, {}))):
            runs.append({})
            first = step
        runs[-1].setdefault(step, {}).update(data)
    return runs


def _verl_console_rows(path: Path) -> dict[int, dict[str, Any]]:
    """verl's console lines: ``(Actor pid=N) step:N - key:value - ...`` once the colours are
    dropped; every value a float (numpy 2's ``np.float64(x)`` read as x)."""
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.search(r"(?:^|\) )step:(\d+) - (.*)$", ANSI.sub("", line))
        if m:
            parts = (p.rpartition(":") for p in m.group(2).strip().split(" - "))
            rows.setdefault(int(m.group(1)), {}).update({k: _np_float(v) for k, _, v in parts})
    return rows


def _np_float(text: str) -> float:
    """A value as verl prints it: ``0.5``, ``nan``, or (numpy 2) ``np.float64(0.5)``."""
    m = re.fullmatch(r"np\.(?:float|int)\d*\((.*)\)", text.strip())
    return float(m.group(1) if m else text)


def _wandb_rows(run: Path) -> dict[int, dict[str, Any]]:
    """The dicts of a W&B run's output.log (every value a quoted number), the k-th at step
    k x logging_steps; the end-of-training dict is no step."""
    rows: dict[int, dict[str, Any]] = {}
    text = (run / "files" / "output.log").read_text(encoding="utf-8", errors="replace")
    for line in text.splitlines():
        if (i := line.find("{'")) >= 0:
            d = ast.literal_eval(line[i:])  # the test's own route: a known file, no code runs
            if not TRL_SUMMARY & set(d):
                rows[(len(rows) + 1) * WANDB_LOGGING_STEPS] = {k: float(v) for k, v in d.items()}
    return rows


def _event_rows(path: Path) -> dict[int, dict[str, Any]]:
    """A TensorBoard event file, framed here (8-byte length, 4-byte CRC, the Event, 4-byte CRC)
    and decoded with TensorBoard's Event class; TRL's names without transformers' ``train/``."""
    event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    data, pos = path.read_bytes(), 0
    rows: dict[int, dict[str, Any]] = {}
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        ev = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + n])
        pos += n + 16
        for v in ev.summary.value:
            vals = v.tensor.float_val if v.WhichOneof("value") == "tensor" else [v.simple_value]
            name = v.tag.removeprefix("train/")
            if len(vals) == 1 and name not in TRL_SUMMARY_EVENTS:
                rows.setdefault(ev.step, {})[name] = vals[0]
    return rows


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _import(
    tool: str, path: Path, root: Path, segment: int | None = None, **kw: Any
) -> tuple[pd.DataFrame, schema.RunInfo]:
    res = importers.import_run(tool, path, root=root, segment=segment, **kw)
    df = tables.read_table(res["run_dir"], schema.STEPS_DIR).set_index(Step.STEP)
    return df, schema.read_run_info(res["run_dir"])


LOGS = real_logs()


@pytest.fixture(scope="module")
def imported_info(real_logs):
    """``get(tool, path)``: the run.json of a real log as the session imported it (``real_logs``:
    once, with the importer's defaults; a file of several runs: its last run), a copy per call;
    the per-log tests that read only run.json share that import."""

    def get(tool: str, path: Path) -> schema.RunInfo:
        runs = len(source_runs(tool, path))  # counted here: the importer's split must agree
        return schema.read_run_info(real_logs.runs[tool, str(path), runs if runs > 1 else None])

    return get


def test_the_seven_logs_of_the_readme_are_found():
    """The folder's README lists seven logs: three TRL generations, two Tinker, two verl."""
    tools = [t for t, _ in LOGS]
    assert len(LOGS) >= 7 and tools.count("trl") >= 3 and tools.count("verl") >= 2
    assert tools.count("tinker") >= 2


def test_the_newer_formats_of_the_readme_are_found():
    """The README's newer logs: a verl console log, a TensorBoard event file beside a
    trainer_state.json, a W&B run folder, and a Tinker file that six starts appended to."""
    kinds = {(t, kind_of(p)) for t, p in LOGS}
    assert {("verl", "console"), ("trl", "tfevents"), ("trl", "wandb")} <= kinds
    assert any(len(source_runs(t, p)) > 1 for t, p in LOGS if t == "tinker")


def _needs_extra(path: Path) -> None:
    if kind_of(path) == "tfevents":
        pytest.importorskip("tensorboard", reason="the 'tensorboard' extra is not installed")


@pytest.mark.slow
@pytest.mark.parametrize(("tool", "path"), LOGS, ids=[log_id(p) for _, p in LOGS])
def test_every_value_equals_the_source(tool, path, tmp_path):
    """Each stored foreign metric equals the source at every step (null where the source has
    none); each of our columns no source name fills is null; one row per step with numbers. A
    file holding several runs is refused as a whole and each of its runs compared alone."""
    _needs_extra(path)
    runs = source_runs(tool, path)
    if len(runs) > 1:
        with pytest.raises(importers.SeveralRuns, match=f"holds {len(runs)} runs"):
            importers.import_run(tool, path, root=tmp_path)
    for k, src in enumerate(runs, 1):
        segment = k if len(runs) > 1 else None
        df, info = _import(tool, path, tmp_path / str(k), segment)
        _equals_the_source(tool, path, src, df, info)
        assert info.imported.segment == (f"{k} of {len(runs)}" if segment else None)


def _equals_the_source(tool: str, path: Path, src, df: pd.DataFrame, info: schema.RunInfo):
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
    assert rec.file_format  # the record says which kind of file it read


def _names(src: dict[int, dict[str, Any]]) -> set[str]:
    return {k for m in src.values() for k in m}


@pytest.mark.parametrize(("tool", "path"), LOGS, ids=[log_id(p) for _, p in LOGS])
def test_settings_are_null_unless_a_file_beside_the_log_states_them(tool, path, imported_info):
    """run.json's ε, reduction and group size come from the config beside the log (read here
    independently), or printed in it (verl's console, TRL's TensorBoard args), or stay null;
    never our defaults."""
    _needs_extra(path)
    info = imported_info(tool, path)
    cfg_file = path.with_name(path.stem + ".config.json")
    if kind_of(path) in ("console", "tfevents"):
        _settings_printed_in_the_log(path, info)
    elif kind_of(path) == "wandb":  # requirements.txt gives the version, nothing else
        assert [Path(f).name for f in info.imported.settings_files] == ["requirements.txt"]
        assert info.token_eps_low is None and info.group_size is None and info.reduction is None
        assert info.versions["trl"] == "0.24.0"
    elif tool == "verl" and cfg_file.is_file():
        actor = json.loads(cfg_file.read_text())["config"]["actor_rollout_ref"]["actor"]
        assert (info.token_eps_low, info.token_eps_high) == (
            actor["clip_ratio_low"],
            actor["clip_ratio_high"],
        )
        assert info.reduction == actor["loss_agg_mode"].replace("-", "_")
        assert info.group_size == actor["rollout_n"] and info.seq_eps_low is None
        assert info.algorithm == "grpo" and actor["policy_loss"]["loss_mode"] == "vanilla"
    elif tool == "tinker" and path.with_name("config.json").is_file():
        # the loop's config: read, but it states no ε or reduction, and a flat ``group_size``
        # is not the cookbook's G (code-rl-shaider10: group_size 8 beside groups_total 8 and
        # n_datums 48 = 3 kept groups x 16)
        cfg = json.loads(path.with_name("config.json").read_text())
        assert info.imported.settings_files == (str(path.with_name("config.json")),)
        assert info.group_size == cfg.get("dataset_builder", {}).get("group_size")
        assert info.token_eps_low is None and info.seq_eps_low is None and info.reduction is None
    else:  # nothing beside these logs states a setting
        assert info.imported.settings_files == ()
        for key in ("seq_eps_low", "seq_eps_high", "token_eps_low", "token_eps_high"):
            assert getattr(info, key) is None, key
        assert info.reduction == _one_loss_reduction(info) and info.group_size is None


def _one_loss_reduction(info: schema.RunInfo) -> str | None:
    """TRL < 0.17 had one loss, GRPO's (no loss_type): a fact of the version, not a setting, and
    with it its reduction (the per-sequence token mean); else the reduction is unstated."""
    loss_type = (info.imported.settings or {}).get("loss_type")
    if loss_type is not None and loss_type["from"].startswith("TRL < 0.17 has one loss"):
        assert loss_type["value"] == "grpo" and info.algorithm == "grpo"
        return "seq_mean_token_mean"
    return None


def _settings_printed_in_the_log(path: Path, info: schema.RunInfo) -> None:
    """verl's console log prints its resolved config (a pprint'ed dict, read here with
    ast.literal_eval); TRL's event file holds its training arguments as JSON text."""
    if kind_of(path) == "console":
        cfg = _printed_config(path)
        actor, rollout = cfg["actor_rollout_ref"]["actor"], cfg["actor_rollout_ref"]["rollout"]
        assert (info.token_eps_low, info.token_eps_high) == (
            actor["clip_ratio_low"],
            actor["clip_ratio_high"],
        )
        assert info.reduction == actor["loss_agg_mode"].replace("-", "_") == "token_mean"
        assert info.group_size == rollout["n"] and info.seq_eps_low is None
        assert actor["policy_loss"]["loss_mode"] == "vanilla" and info.algorithm == "grpo"
        return
    args = _event_args(path)
    assert info.group_size == args["num_generations"] == 4
    assert args["epsilon_high"] is None  # TRL 0.16: one epsilon for both sides
    assert (info.token_eps_low, info.token_eps_high) == (args["epsilon"], args["epsilon"])
    assert info.algorithm == "grpo" and info.seq_eps_low is None and "loss_type" not in args
    assert info.reduction == _one_loss_reduction(info) == "seq_mean_token_mean"


def _printed_config(path: Path) -> dict[str, Any]:
    lines = [
        re.sub(r"^\([^)]*\) ", "", ANSI.sub("", line))
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
    ]
    start = next(i for i, line in enumerate(lines) if line.startswith("{'actor_rollout_ref'"))
    for end in range(start, len(lines)):
        if lines[end].endswith("}"):
            try:
                return ast.literal_eval("\n".join(lines[start : end + 1]))
            except SyntaxError:
                continue
    raise AssertionError("no config printed")


def _event_args(path: Path) -> dict[str, Any]:
    event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    data, pos = path.read_bytes(), 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        ev = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + n])
        pos += n + 16
        for v in ev.summary.value:
            if v.tag == "args/text_summary":
                return json.loads(v.tensor.string_val[0])
    raise AssertionError("no args in the event file")


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
    """The README's table: one row per real log, computed by importers.describe."""
    rows = []
    have_tb = importlib.util.find_spec("tensorboard") is not None
    logs = [(t, p) for t, p in LOGS if have_tb or kind_of(p) != "tfevents"]
    for tool, path in logs:
        runs = len(source_runs(tool, path))  # a file of several runs: its last one
        res = importers.import_run(tool, path, root=tmp_path, segment=runs if runs > 1 else None)
        rows.append((str(path.relative_to(REAL)), importers.describe(res["run_dir"])))
    table = importers.markdown_table(rows)
    assert len(table.splitlines()) == 2 + len(logs)
    by_log = dict(rows)
    verl = next(s for k, s in by_log.items() if "clip-sweep" in k)
    assert Step.SAMPLER_KL_MEAN in verl.filled and Step.KL_REF_MEAN in verl.unknown
    tinker = next(s for k, s in by_log.items() if "arithmetic" in k)
    assert Step.REWARD_MEAN in tinker.filled and Step.KL_OLD_MEAN in tinker.unknown


def test_verl_console_log(tmp_path):
    """verl's console log (Ray prefixes, colours, rollout text between the metric lines, the
    file ending inside step 11): the ten steps, its settings from the config it printed
    (use_kl_loss False, one optimizer step a row: pg_loss is the loss), unfinished (10 of the
    133,000 steps it printed)."""
    tool, path = _console("gui-cursor-grpo-yuzhaouoe")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    assert list(df.index) == list(range(1, 11))
    assert df.loc[1, Step.REWARD_MEAN] == src[1]["critic/score/mean"] == 0.5721990466117859
    assert df.loc[10, Step.REWARD_MEAN] == src[10]["critic/score/mean"]
    assert df.loc[1, Step.LOSS] == src[1]["actor/pg_loss"] == -1.7394086171407253e-10
    assert df.loc[9, "grad_norm"] == src[9]["actor/grad_norm"] == 8.100706100463867
    assert "actor/grad_norm" not in df.columns
    assert (df[Derived.TOKEN_CLIP_BINDING] == 0.0).all()  # actor/pg_clipfrac 0.0 throughout
    assert df[Step.KL_REF_MEAN].isna().all() and "actor/kl_loss" not in _names(src)
    rec = info.imported
    assert rec.file_format == "verl console log" and rec.source_finished is False
    assert rec.settings["total_training_steps"]["value"] == 133000
    assert any("ends inside a step" in n for n in rec.reader_notes)
    assert info.name == "uitars-bs32n12"  # trainer.experiment_name of the printed config


def test_wandb_run_folder(tmp_path):
    """A W&B run of an Unsloth GRPOTrainer: every value a quoted 4-digit string, no step in the
    dicts (logging_steps inferred from train/global_step 500 over 50 records, and said so), the
    exact TRL version from requirements.txt, the summary agreeing with the last record."""
    tool, path = next((t, p) for t, p in LOGS if kind_of(p) == "wandb")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    assert list(df.index) == list(range(10, 501, 10))
    assert df.loc[10, Step.LOSS] == src[10]["loss"] == 1.755e-07
    assert (df[Step.REWARD_MEAN] == 0.0).sum() == 35 and df[Step.REWARD_MEAN].max() == 0.05
    assert (df[Step.ZERO_VARIANCE_FRACTION] == 1.0).sum() == 40
    # Unsloth's compute_loss logs kl (sequence-weighted k3): kept as trl/kl, ours left null
    assert df["trl/kl"].idxmax() == 170 and df.loc[170, "trl/kl"] == src[170]["kl"] == 0.01642
    assert df[Step.KL_REF_MEAN].isna().all()
    rec = info.imported
    assert dialect_of(rec) == "unsloth" and "requirements.txt pins unsloth==2026.6.9" in " ".join(
        rec.evidence
    )
    assert rec.version == "0.24.0" and rec.settings["logging_steps"]["value"] == 10
    assert rec.settings["logging_steps"]["from"].startswith("inferred")
    assert any("logging_steps (10, inferred" in n for n in rec.reader_notes)
    assert any(
        "agrees with the last record of output.log (step 500)" in c for c in rec.cross_checks
    )
    assert rec.summary["train_runtime"] == 1572.0 and rec.source_finished is True


def test_trainer_state_and_its_event_file_agree_but_for_step_113(tmp_path):
    """The furixturi run left a trainer_state.json (checkpoint-113, steps 10-110) and the
    Trainer's TensorBoard event file: importing either compares it with the other; the 132
    values both hold are equal at float32, and the event file has step 113 besides."""
    pytest.importorskip("tensorboard", reason="the 'tensorboard' extra is not installed")
    tool, state = _one("qwen2-grpo-test-furixturi/checkpoint-113")
    _, info = _import(tool, state.parent.parent, tmp_path / "a")  # the output dir
    checks = info.imported.cross_checks
    assert any("agrees with checkpoint-113/trainer_state.json: 132 values" in c for c in checks)
    assert any("has 1 step checkpoint-113/trainer_state.json lacks: step 113" in c for c in checks)
    assert any("found in" in n and "compared" in n for n in info.imported.reader_notes)
    _, events = next((t, p) for t, p in LOGS if kind_of(p) == "tfevents")
    src = source_rows(tool, events)
    df, info = _import(tool, events, tmp_path / "b")
    assert list(df.index) == [*range(10, 111, 10), 113]
    assert df.loc[113, Step.REWARD_MEAN] == src[113]["reward"] and pd.isna(df.loc[113, Step.LOSS])
    assert "the event file's own clock" in info.imported.wall_time
    assert df.loc[10, Step.WALL_TIME] == pytest.approx(1743501857.68, abs=0.01)
    assert any("lacks: step 113" in c for c in info.imported.cross_checks)


def test_tinker_loop_logging_loss_sum(tmp_path):
    """A Tinker loop of its own: loss:sum (forward_backward's summed loss) is the loss, with its
    6.08e11 spike at step 92; mean_reward the reward."""
    tool, path = _one("code-rl-shaider10-run1")
    src = source_rows(tool, path)
    df, info = _import(tool, path, tmp_path)
    assert df.loc[92, Step.LOSS] == src[92]["loss:sum"] and df[Step.LOSS].idxmax() == 92
    assert df.loc[92, Step.LOSS] > 6e11 and df.drop(index=92)[Step.LOSS].abs().max() < 2.7e4
    assert df.loc[0, Step.REWARD_MEAN] == src[0]["mean_reward"] == 0.6125
    assert info.imported.mapped["loss:sum"] == Step.LOSS


def test_tinker_file_of_several_runs_is_refused_then_read_run_by_run(tmp_path):
    """Six lines (steps 0, 0, 0, 0, 1, 0) appended by restarts: refused as one run, naming the
    lines where a run starts again; the fourth run holds lines 4-5 (steps 0 and 1, its progress
    going on); config.json is the last run's only."""
    tool, path = _one("bash-codeforces-astowolfo")
    with pytest.raises(importers.SeveralRuns) as err:
        importers.import_run(tool, path, root=tmp_path)
    assert "holds 5 runs" in str(err.value) and "line 6 (step 0 after step 1)" in str(err.value)
    assert _tree_empty(tmp_path)
    df, info = _import(tool, path, tmp_path, 4)
    assert list(df.index) == [0, 1] and info.imported.segment == "4 of 5"
    assert info.imported.settings_files == () and info.group_size is None
    _, last = _import(tool, path, tmp_path, 5)
    assert last.imported.settings["loss_fn"]["value"] == "importance_sampling"


def _console(name: str) -> tuple[str, Path]:
    """The console log of the folder ``name`` (pytest skips the test when it is absent)."""
    found = [(t, p) for t, p in LOGS if kind_of(p) == "console" and p.parent.name == name]
    if not found:
        pytest.skip(f"{name} is not among the real logs")
    return found[0]


def test_verl_console_log_that_died_one_step_short(tmp_path):
    """The econ run's console: its config plans 700 steps, its bar reaches 699/700 and the file
    ends in a traceback without 'Final validation metrics': crashed (the README: it died saving
    the step-700 checkpoint), the basis quoting the last exception line, then citing the config
    and the bar."""
    tool, path = _console("econ-grpo-uqcxu9")
    _, info = _import(tool, path, tmp_path)
    rec = info.imported
    assert info.status == "crashed" and rec.source_finished is False
    assert rec.crashed.startswith('the log ends in an error after step 699: "RuntimeError: ')
    assert rec.status_basis.startswith(rec.crashed + "; planned 700 steps")
    assert rec.planned_end == {
        "steps": 700,
        "epochs": None,
        "from": "train.log: the config printed at line 4: trainer.total_training_steps",
    }
    assert "reached step 699 (the Training Progress bar, line " in rec.status_basis
    assert rec.status_basis.endswith(": 699/700); no end-of-training line")
    assert rec.stopped_early == rec.status_basis


def _tree_empty(root: Path) -> bool:
    return not root.exists() or not any(root.iterdir())


def test_damaged_copies_of_the_real_logs(tmp_path):
    """Copies of the new-format logs, damaged here in tmp_path the way real logs are: verl's step-5
    line garbled and the file cut inside step 10's line; the W&B console's third dict garbled by
    a progress bar and the file cut inside its 40th. Each damaged record keeps the metrics before
    the damage (their values the source's; a value the cut may have shortened is dropped) and is
    counted; the others keep their steps and values."""
    tool, log = _console("gui-cursor-grpo-yuzhaouoe")
    src = source_rows(tool, log)
    lines = log.read_bytes().split(b"\n")
    at = {s: next(i for i, b in enumerate(lines) if b"step:%d - " % s in b) for s in (5, 10)}
    lines[at[5]] = lines[at[5]].replace(b"actor/entropy:1.", b"actor/entropy:1.x")
    cut = tmp_path / "verl_demo.log"
    cut.write_bytes(b"\n".join(lines[: at[10]] + [lines[at[10]][:900]]))
    df, info = _import(tool, cut, tmp_path / "a")
    assert list(df.index) == list(range(1, 11))
    assert all(df.loc[s, Step.REWARD_MEAN] == src[s]["critic/score/mean"] for s in (1, 4, 6, 9))
    rec = info.imported
    for step, line, damaged in (
        (5, lines[at[5]], b"actor/entropy:"),
        (10, lines[at[10]][:900], None),
    ):
        names = _names_in(line)
        n_kept = _parts_before(line, damaged) - (damaged is None)  # a cut's last value dropped
        for k, name in enumerate(names):
            col = rec.mapped.get(name) or rec.renamed.get(name) or name
            if col not in df.columns or name in rec.nulled:
                continue
            got = df.loc[step, col]
            assert (got == src[step][name]) if k < n_kept else pd.isna(got), (step, name)
    assert rec.malformed_lines == () and rec.truncated_last_line is None
    assert [(d["line"], d["kept"]) for d in rec.records_cut] == [
        (at[5] + 1, _parts_before(lines[at[5]], b"actor/entropy:")),
        (at[10] + 1, _parts_before(lines[at[10]][:900], None) - 1),  # its last value dropped
    ]
    assert "the file's last line, cut mid-write" in rec.records_cut[1]["reason"]
    _, run = next((t, p) for t, p in LOGS if kind_of(p) == "wandb")
    src = source_rows("trl", run)
    files = tmp_path / "run-x" / "files"
    files.mkdir(parents=True)
    text = (run / "files" / "output.log").read_text(encoding="utf-8").split("\n")
    dicts = [i for i, line in enumerate(text) if line.startswith("{'loss'")]
    text[dicts[2]] = text[dicts[2]].replace("'grad_norm': '", "'grad_norm':  30%|███ | 3/500 '")
    (files / "output.log").write_text("\n".join(text[: dicts[39]] + [text[dicts[39]][:300]]))
    df, info = _import("trl", files.parent, tmp_path / "b", config={"logging_steps": 10})
    want = [10 * k for k in range(1, 41)]  # the 3rd and the cut 40th keep their prefix
    assert list(df.index) == want
    assert all(df.loc[s, Step.LOSS] == src[s]["loss"] for s in want)
    assert pd.isna(df.loc[30, "grad_norm"]) and df.loc[20, "grad_norm"] == src[20]["grad_norm"]
    rec = info.imported
    assert rec.malformed_lines == () and rec.truncated_last_line is None
    assert [d["line"] for d in rec.records_cut] == [dicts[2] + 1, dicts[39] + 1]
    assert rec.records_cut[0]["kept"] == 1  # 'loss', the one entry before the bar
    assert rec.settings["logging_steps"]["value"] == 10


def _names_in(line: bytes) -> list[str]:
    """The metric names of a verl step line, in its order (a cut last part included)."""
    text = ANSI.sub("", line.decode("utf-8", errors="replace"))
    return [p.rpartition(":")[0] for p in text[text.index("step:") :].split(" - ")[1:]]


def _parts_before(line: bytes, damaged: bytes | None) -> int:
    """The ``key:value`` parts of a verl step line before the part starting with ``damaged``
    (None: every part)."""
    text = ANSI.sub("", line.decode("utf-8", errors="replace"))
    parts = text[text.index("step:") :].split(" - ")[1:]
    if damaged is None:
        return len(parts)
    return next(i for i, p in enumerate(parts) if p.encode().startswith(damaged))


#: Per real log (the last run of a file holding several): the foreign names mapped to our
#: columns, those withheld (kept as <tool>/<name>: their meaning differs from ours or is not
#: pinned by what the files say), and the status the source gives. Each withheld name was read
#: against the tool's code: TRL's reward_std is the mean of per-group stds before 0.27,
#: clip_ratio/* need importance_sampling_level from 0.20, min/max lengths are window means
#: unless logging_steps is 1, Unsloth's own completion_length yields to TRL's and its kl is
#: sequence-weighted, TRL 0.16's clip_ratio counts where the clip does not bind, kl from 0.26
#: depends on use_bias_correction_kl (assumed false at 0.26.2, its default there).
PINNED = {
    "bash-codeforces-astowolfo": (
        [
            "env/all/by_group/frac_all_good + env/all/by_group/frac_all_bad",
            "env/all/reward/total",
            "optim/entropy",
            "optim/kl_sample_train_v2",
        ],
        [
            "env/all/ac_tokens_per_turn",
            "env/all/total_ac_tokens",
            "env/all/total_episodes",
            "optim/kl_sample_train_v1",
        ],
        "stopped early",
    ),
    "code-rl-shaider10-run1": (
        ["loss:sum", "mean_reward"],
        [],
        "stopped early",
    ),
    "cookbook-cog-rl-exp8": (
        ["reward/mean"],
        [],
        "unknown",  # a recipe's own loop: no done_frac, no max_steps, no end line
    ),
    "rlvr-gptoss20b-v3b-joanvelja": (
        [
            "env/all/ac_tokens_per_turn",
            "env/all/by_group/frac_all_good + env/all/by_group/frac_all_bad",
            "env/all/reward/total",
            "env/all/total_ac_tokens",
            "env/all/total_episodes",
            "optim/entropy",
            "optim/kl_sample_train_v2",
        ],
        ["optim/kl_sample_train_v1"],
        "stopped early",
    ),
    "tinker-rl-lab-arithmetic": (
        [
            "env/all/ac_tokens_per_turn",
            "env/all/by_group/frac_all_good + env/all/by_group/frac_all_bad",
            "env/all/reward/total",
            "env/all/total_ac_tokens",
            "env/all/total_episodes",
            "optim/entropy",
            "optim/kl_sample_train_v2",
        ],
        ["optim/kl_sample_train_v1"],
        "finished",
    ),
    "agent-memory-redteam": (
        [
            "completions/clipped_ratio",
            "completions/max_length",
            "completions/mean_length",
            "completions/min_length",
            "entropy",
            "frac_reward_zero_std",
            "loss",
            "reward",
        ],
        [
            "clip_ratio/high_mean",
            "clip_ratio/low_mean",
            "clip_ratio/region_mean",
            "kl",
            "num_tokens",
            "reward_std",
        ],
        "stopped early",
    ),
    "gemma3-rl-abdo-ashraf": (
        ["completion_length", "loss", "reward"],
        ["kl", "reward_std"],
        "finished",
    ),
    "graphcross-lil-anchutka": (
        [
            "completions/clipped_ratio",
            "completions/mean_length",
            "frac_reward_zero_std",
            "loss",
            "reward",
        ],
        [
            "completion_length",
            "completions/max_length",
            "completions/min_length",
            "kl",
            "num_tokens",
            "reward_std",
        ],
        "finished",
    ),
    "minesweeper-aaipl-srinath": (
        [
            "completions/clipped_ratio",
            "completions/mean_length",
            "entropy",
            "frac_reward_zero_std",
            "loss",
            "reward",
        ],
        [
            "clip_ratio/high_mean",
            "clip_ratio/low_mean",
            "clip_ratio/region_mean",
            "completions/max_length",
            "completions/min_length",
            "num_tokens",
            "reward_std",
        ],
        "finished",
    ),
    "pythia-grpo-vemz": (
        [
            "completions/clipped_ratio",
            "completions/mean_length",
            "entropy",
            "frac_reward_zero_std",
            "kl",
            "loss",
            "reward",
        ],
        [
            "clip_ratio/high_mean",
            "clip_ratio/low_mean",
            "clip_ratio/region_mean",
            "completions/max_length",
            "completions/min_length",
            "num_tokens",
            "reward_std",
        ],
        "finished",
    ),
    "qwen-grpo-multigpu-seriserendipia": (
        [
            "completions/clipped_ratio",
            "completions/mean_length",
            "entropy",
            "frac_reward_zero_std",
            "loss",
            "reward",
        ],
        [
            "clip_ratio/high_mean",
            "clip_ratio/low_mean",
            "clip_ratio/region_mean",
            "completions/max_length",
            "completions/min_length",
            "num_tokens",
            "reward_std",
        ],
        "finished",
    ),
    "qwen2-grpo-test-furixturi": (
        ["completion_length", "kl", "loss", "reward"],
        ["clip_ratio", "num_tokens", "reward_std"],
        "finished",
    ),
    "qwen2-grpo-test-furixturi-tfevents": (
        ["completion_length", "kl", "loss", "reward"],
        ["clip_ratio", "num_tokens", "reward_std"],
        "finished",
    ),
    "wandb-qwen3-sparse-hiepdema-wandb": (
        [
            "completions/clipped_ratio",
            "completions/mean_length",
            "frac_reward_zero_std",
            "loss",
            "reward",
        ],
        [
            "clip_ratio/high_mean",
            "clip_ratio/low_mean",
            "clip_ratio/region_mean",
            "completion_length",
            "completions/max_length",
            "completions/min_length",
            "kl",
            "num_tokens",
            "reward_std",
        ],
        "finished",
    ),
    "asycn-verl-clip-sweep": (
        [
            "actor/entropy",
            "actor/grad_norm",
            "actor/pg_clipfrac",
            "actor/ppo_kl",
            "critic/score/mean",
            "response_length/clip_ratio",
            "response_length/max",
            "response_length/mean",
            "response_length/min",
            "rollout_corr/k3_kl",
        ],
        ["actor/pg_loss", "rollout_corr/kl"],
        "finished",
    ),
    "asycn-verl-lr-sigfrac": (
        [
            "actor/entropy",
            "actor/grad_norm",
            "critic/score/mean",
            "response_length/clip_ratio",
            "response_length/max",
            "response_length/mean",
            "response_length/min",
            "rollout_corr/k3_kl",
        ],
        ["actor/pg_loss", "rollout_corr/kl"],
        "finished",
    ),
    "gui-cursor-grpo-yuzhaouoe": (
        [
            "actor/entropy",
            "actor/grad_norm",
            "actor/pg_clipfrac",
            "actor/pg_loss",
            "actor/ppo_kl",
            "critic/score/mean",
            "response_length/clip_ratio",
            "response_length/max",
            "response_length/mean",
            "response_length/min",
        ],
        [],
        "stopped early",
    ),
    "econ-grpo-uqcxu9": (
        [
            "actor/entropy",
            "actor/grad_norm",
            "actor/pg_clipfrac",
            "actor/pg_loss",
            "actor/ppo_kl",
            "critic/score/mean",
            "response_length/clip_ratio",
            "response_length/max",
            "response_length/mean",
            "response_length/min",
        ],
        [],
        "crashed",  # step 699 of 700 (its bar: 699/700), then a traceback
    ),
    "gemma3-hint-hiding-ps-research": (
        [
            "completions/clipped_ratio",
            "completions/max_length",
            "completions/mean_length",
            "completions/min_length",
            "frac_reward_zero_std",
            "loss",
            "reward",
        ],
        [
            "clip_ratio/high_mean",
            "clip_ratio/low_mean",
            "clip_ratio/region_mean",
            "completion_length",
            "kl",
            "num_tokens",
            "reward_std",
        ],
        # global_step 100 of max_steps 300 in checkpoint-100/, nothing beside it: a save made
        # while training ran shows the run reached 100, not where it ended (issue 44)
        "unknown",
    ),
    "rlvr-mac-sandbox-spbui00": (
        [
            "completions/clipped_ratio",
            "completions/mean_length",
            "entropy",
            "frac_reward_zero_std",
            "loss",
            "reward",
            "reward_std",
        ],
        [
            "clip_ratio/high_mean",
            "clip_ratio/low_mean",
            "clip_ratio/region_mean",
            "completions/max_length",
            "completions/min_length",
            "num_tokens",
        ],
        "finished",
    ),
}


@pytest.mark.parametrize(("tool", "path"), LOGS, ids=[log_id(p) for _, p in LOGS])
def test_each_real_log_maps_what_its_meaning_allows(tool, path, imported_info):
    """Mapped and withheld names and the status, pinned per log; every withheld name says why
    (never a Python None), and the report prints the versions assumed."""
    _needs_extra(path)
    info = imported_info(tool, path)
    rec = info.imported
    mapped, withheld, status = PINNED[log_id(path)]
    assert sorted(rec.mapped) == mapped
    assert sorted(rec.renamed) == withheld
    ended_early = status in ("stopped early", "crashed")
    assert info.status == status and (rec.stopped_early is not None) == ended_early
    for name in withheld:
        assert rec.notes.get(name) and "None" not in rec.notes[name], name
    lines = report_lines(rec, info)
    assert any(line.startswith("versions assumed: ") for line in lines)
    assert not any("None" in line for line in lines if not line.startswith(("read:", "note:")))


def _wandb_verl_copy(tmp_path: Path, cut_steps: set[int], last: int) -> tuple[Path, list[str]]:
    """A W&B run folder (in tmp_path) whose output.log is the real verl console's lines up to
    step ``last``, its step lines for ``cut_steps`` made longer than W&B keeps (the line's own
    metrics again, renamed ``again/<name>``) and cut at ``WANDB_LINE_CUT`` characters as W&B
    cuts them; a summary holding training/global_step. Returns the folder and the lines."""
    _, log = _console("gui-cursor-grpo-yuzhaouoe")
    lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    end = next(i for i, t in enumerate(lines) if f"step:{last} - " in t) + 1
    out = []
    for text in lines[:end]:
        m = re.search(r"step:(\d+) - (.*)$", text)
        if m and int(m.group(1)) in cut_steps:
            again = " - ".join("again/" + p for p in m.group(2).split(" - "))
            text = (text + " - " + again)[: _text.WANDB_LINE_CUT]
        out.append(text)
    files = tmp_path / "wandb" / "run-20260101_000000-cut1" / "files"
    files.mkdir(parents=True)
    (files / "output.log").write_text("\n".join(out) + "\n", encoding="utf-8")
    (files / "wandb-summary.json").write_text(json.dumps({"training/global_step": last}))
    return files.parent, out


def test_wandb_output_log_cuts_a_verl_line_at_4096_characters(tmp_path):
    """W&B's output.log keeps 4,096 characters of a line: the real steps 3 and 7, made longer
    and cut there, keep every metric before the cut (each the source's value; the cut one
    dropped, whatever is left of it) and are counted, not skipped whole; Health's records_cut
    finding says how many."""
    from training_hooks import findings

    run, out = _wandb_verl_copy(tmp_path, {3, 7}, 10)
    _, log = _console("gui-cursor-grpo-yuzhaouoe")
    src = source_rows("verl", log)
    df, info = _import("verl", run, tmp_path / "runs")
    assert list(df.index) == list(range(1, 11))  # no step lost
    rec = info.imported
    cut_lines = [i + 1 for i, t in enumerate(out) if len(t) == _text.WANDB_LINE_CUT]
    assert [d["line"] for d in rec.records_cut] == cut_lines and len(cut_lines) == 2
    for d, step in zip(rec.records_cut, (3, 7), strict=True):
        text = out[d["line"] - 1]
        parts = text.count(" - ")  # the key:value parts after step:N, the last one cut
        assert d["kept"] == parts - 1 and d["kept"] > len(src[step])  # every real one kept
        assert d["reason"].startswith("cut at 4,096 characters")
        assert df.loc[step, Step.REWARD_MEAN] == src[step]["critic/score/mean"]
        assert df.loc[step, "again/critic/score/mean"] == src[step]["critic/score/mean"]
    assert rec.malformed_lines == ()
    facts = findings.facts_of(info)
    found = {f.code: f for f in findings.run_findings(df, algorithm="", status="", facts=facts)}
    assert found["records_cut"].evidence.startswith("2 of the 10 records read were cut")
