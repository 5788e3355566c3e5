"""Any trainer's log through a key map (``jsonl``, ``csv``) and ROLL's metrics (``roll``): every
value lands where the map says, cell by cell; the map, the step key and what was withheld are in
run.json; a bad map is refused with the reason; each tool is read by its own reader.

The ROLL log is ../shared/real_logs/other/rdan-grpo-roll-beingamanforever/metrics.jsonl, read
from its path (skipped when absent) and compared with its source lines at named steps.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from app.provenance import source_lines
from training_hooks import findings, importers, schema, tables
from training_hooks.importers import _pick
from training_hooks.importers._core import TOOLS
from training_hooks.importers._describe import report_lines
from training_hooks.importers._read import SourceLog
from training_hooks.importers._spec import RunSettings, ToolSpec
from training_hooks.importers.keymap import GUESSED, MEANINGS, STEP_GUESSED, key_map_of
from training_hooks.schema import Step


class Steps:
    """An imported run's step table as written: a column's cells with null as None (a NaN stays
    NaN: the log wrote one)."""

    def __init__(self, run_dir: str | Path):
        import pyarrow.parquet as pq

        table = pq.read_table(Path(run_dir) / schema.STEPS_DIR)
        self.table = table.sort_by("step")
        self.columns = self.table.column_names

    def __getitem__(self, column: str) -> list:
        return self.table.column(column).to_pylist()


def _steps(run_dir: str | Path) -> Steps:
    return Steps(run_dir)


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _cells(steps: Steps, column: str) -> list:
    return steps[column]


# ----------------------------------------------------------------------------- jsonl


def test_jsonl_key_map_puts_each_value_in_its_column_and_records_the_map(tmp_path):
    """--map reward=mean_reward, kl=train/kl (nested): our columns hold those values, cell by
    cell; 'loss' (unmapped) takes the meaning its name has (our loss, recorded as guessed) and
    'acc' (a success rate; the reward is mapped) a reward component's column; the text 'n/a' is
    left null and counted; step 2 logged twice keeps the later record's values."""
    log = _jsonl(
        tmp_path / "metrics.jsonl",
        [
            {"it": 0, "mean_reward": 0.25, "train": {"kl": 0.001}, "loss": 0.5, "phase": "a"},
            {"it": 1, "mean_reward": "n/a", "train": {"kl": 0.002}, "loss": 0.4, "phase": "a"},
            {"it": 2, "mean_reward": 0.5, "train": {"kl": 0.004}, "loss": "0.3", "acc": 1},
            {"it": 2.0, "mean_reward": 0.75},
        ],
    )
    km = key_map_of(
        "jsonl",
        step="it",
        maps=["reward=mean_reward", "kl=train/kl"],
        sets=["epsilon=0.2"],
        group_size=4,
    )
    res = importers.import_run("jsonl", log, root=tmp_path / "runs", algorithm="grpo", key_map=km)
    df = _steps(res["run_dir"])
    assert df["step"] == [0, 1, 2]
    assert _cells(df, Step.REWARD_MEAN) == [0.25, None, 0.75]  # 'n/a' null; step 2: the later
    assert _cells(df, Step.KL_REF_MEAN) == [0.001, 0.002, 0.004]
    assert _cells(df, Step.LOSS) == [0.5, 0.4, 0.3]  # guessed by name; "0.3" is a number as text
    assert _cells(df, "rewards/acc/mean") == [None, None, 1.0]
    assert "acc" not in df.columns and "jsonl/loss" not in df.columns
    assert "phase" not in df.columns
    info = schema.read_run_info(res["run_dir"])
    rec = info.imported
    assert rec.tool == "jsonl"
    assert rec.key_map == {
        "step": {"key": "it", "from": "--step"},
        "map": {
            "reward_mean": {"key": "mean_reward", "from": "--map"},
            "kl_ref_mean": {"key": "train/kl", "from": "--map"},
            "loss": {"key": "loss", "from": GUESSED},
            "rewards/acc/mean": {"key": "acc", "from": GUESSED},
        },
    }
    assert rec.mapped == {
        "mean_reward": "reward_mean",
        "train/kl": "kl_ref_mean",
        "loss": "loss",
        "acc": "rewards/acc/mean",
    }
    assert rec.renamed == {}
    facts = findings.facts_of(info)
    assert facts.guessed == frozenset({"loss", "rewards/acc/mean"})  # said on every finding
    assert rec.withheld == {
        "mean_reward": "1 value is not a number ('n/a' at line 2): left null, not NaN"
    }
    assert rec.duplicate_steps == (2,)
    assert rec.dropped_non_numeric == ("phase",)
    assert any("later record's value is kept" in n for n in rec.reader_notes)
    # --algorithm grpo: epsilon is the token ratio's range; --group-size 4
    assert (info.algorithm, info.token_eps_low, info.token_eps_high) == ("grpo", 0.2, 0.2)
    assert (info.seq_eps_low, info.group_size) == (None, 4)
    assert rec.settings["epsilon"] == {"value": 0.2, "from": "--set epsilon"}
    assert rec.settings["group_size"] == {"value": 4, "from": "--group-size"}
    facts = findings.facts_of(info)
    assert facts.sources[Step.REWARD_MEAN] == "mean_reward"  # Health names their key
    lines = report_lines(rec, info)
    assert "step: 'it' (--step)" in lines
    said = next(ln for ln in lines if ln.startswith("key map: "))
    assert said.startswith(
        "key map: reward_mean = 'mean_reward' (--map), kl_ref_mean = 'train/kl' (--map), "
        f"loss = 'loss' ({GUESSED})"
    )
    assert (
        "withheld: mean_reward: 1 value is not a number ('n/a' at line 2): left null, not NaN"
        in lines
    )
    assert "Step: 'it' (--step)." in source_lines(info)  # the dashboard's provenance


def test_jsonl_gspo_epsilon_is_the_sequence_range_and_max_steps_gives_the_status(tmp_path):
    rows = [{"step": s, "r": 0.1 * s} for s in (1, 2, 3)]
    log = _jsonl(tmp_path / "a.jsonl", rows)
    km = key_map_of("jsonl", step="step", maps=["reward=r"], sets=["epsilon=3e-4", "max_steps=5"])
    res = importers.import_run("jsonl", log, root=tmp_path / "r", algorithm="gspo", key_map=km)
    info = schema.read_run_info(res["run_dir"])
    assert (info.seq_eps_low, info.seq_eps_high, info.token_eps_low) == (3e-4, 3e-4, None)
    # steps from 1: the planned last step is 5; the log ends at 3
    assert info.imported.source_finished is False
    assert info.imported.stopped_early == "the log ends at step 3 of max_steps 5 (--set max_steps)"
    assert findings.facts_of(info).status == "stopped early"
    # steps from 0 reaching max_steps - 1: finished
    log0 = _jsonl(tmp_path / "b.jsonl", [{"step": s, "r": 1.0} for s in (0, 1, 2)])
    km0 = key_map_of("jsonl", step="step", maps=["reward=r"], sets=["max_steps=3"])
    info0 = schema.read_run_info(
        importers.import_run("jsonl", log0, root=tmp_path / "r", key_map=km0)["run_dir"]
    )
    assert info0.imported.source_finished is True
    assert findings.facts_of(info0).status == "finished"


def test_jsonl_without_step_takes_a_step_key_by_its_name_and_says_so(tmp_path):
    """No --step: 'step' (integers, never falling) is the step, said as guessed from its name."""
    log = _jsonl(tmp_path / "x.jsonl", [{"step": 10, "r": 1.0}, {"step": 20, "r": 2.0}])
    res = importers.import_run(
        "jsonl", log, root=tmp_path / "r", key_map=key_map_of("jsonl", maps=["reward=r"])
    )
    df = _steps(res["run_dir"])
    assert df["step"] == [10, 20]
    assert _cells(df, Step.REWARD_MEAN) == [1.0, 2.0]
    rec = schema.read_run_info(res["run_dir"]).imported
    assert rec.key_map["step"] == {"key": "step", "from": STEP_GUESSED}


def test_jsonl_without_a_step_key_uses_the_record_index_and_says_so(tmp_path):
    """A 'step' that falls (10, 5) is no step: the record index, said so."""
    log = _jsonl(tmp_path / "x.jsonl", [{"step": 10, "r": 1.0}, {"step": 5, "r": 2.0}])
    res = importers.import_run(
        "jsonl", log, root=tmp_path / "r", key_map=key_map_of("jsonl", maps=["reward=r"])
    )
    df = _steps(res["run_dir"])
    assert df["step"] == [0, 1]
    assert _cells(df, "step") == [0, 1]  # the record's own 'step' is not read as the step
    rec = schema.read_run_info(res["run_dir"]).imported
    assert rec.key_map["step"] == {"key": None, "from": "the record index from 0 (no --step)"}
    assert any("--step step reads it" in n for n in rec.reader_notes)


# ----------------------------------------------------------------------------- csv


def test_csv_cells_empty_text_and_nan(tmp_path):
    """An empty cell is not logged (null), 'nan' is a NaN the log wrote (kept), 'oops' is no
    number (null, counted); a cut last row is skipped and said."""
    log = tmp_path / "log.csv"
    log.write_text(
        "iter,avg_reward,kl_to_ref,grad\n1,0.5,0.01,1.5\n2,,0.02,oops\n3,nan,0.03,2.5\n4,0.7\n"
    )
    km = key_map_of(
        "csv",
        step="iter",
        maps=["reward_mean=avg_reward", "kl_ref_mean=kl_to_ref", "grad_norm=grad"],
    )
    res = importers.import_run("csv", log, root=tmp_path / "r", key_map=km)
    df = _steps(res["run_dir"])
    assert df["step"] == [1, 2, 3]
    reward = _cells(df, Step.REWARD_MEAN)
    assert reward[0] == 0.5 and reward[1] is None and math.isnan(reward[2])
    assert _cells(df, Step.KL_REF_MEAN) == [0.01, 0.02, 0.03]
    assert _cells(df, "grad_norm") == [1.5, None, 2.5]
    rec = schema.read_run_info(res["run_dir"]).imported
    assert rec.withheld == {
        "grad": "1 value is not a number ('oops' at line 3): left null, not NaN"
    }
    assert rec.truncated_last_line == 5
    assert rec.file_format == "CSV"


def test_csv_delimiter_is_sniffed(tmp_path):
    log = tmp_path / "log.tsv"
    log.write_text("step\treward\n0\t0.25\n1\t0.5\n")
    km = key_map_of("csv", step="step", maps=["reward=reward"])
    df = _steps(importers.import_run("csv", log, root=tmp_path / "r", key_map=km)["run_dir"])
    assert _cells(df, Step.REWARD_MEAN) == [0.25, 0.5]


# ----------------------------------------------------------------------------- refusals


def test_a_target_that_is_not_ours_lists_the_valid_meanings():
    with pytest.raises(ValueError) as e:
        key_map_of("jsonl", maps=["rewards=mean_reward"])
    msg = str(e.value)
    assert "'rewards' is not one of our meanings (did you mean reward" in msg
    for meaning in ("reward (= reward_mean)", "kl (= kl_ref_mean)", "kl_old_mean", "grad_norm"):
        assert meaning in msg
    assert all(m in msg for m in MEANINGS)


def test_the_cli_refuses_a_bad_map_with_the_whole_list(tmp_path, capsys):
    log = _jsonl(tmp_path / "a.jsonl", [{"step": 0, "r": 1.0}])
    with pytest.raises(SystemExit) as e:
        importers.main(["jsonl", str(log), "--root", str(tmp_path / "r"), "--map", "rwd=r"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "'rwd' is not one of our meanings" in err and "zero_variance_fraction" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"maps": ["reward=mean_rewrd"]},
            "--map reward_mean=mean_rewrd: no record of {log} holds it (its keys: step, "
            "mean_reward, phase); did you mean 'mean_reward'?",
        ),
        ({"step": "iteration"}, "--step 'iteration': no record of {log} holds it"),
        ({"maps": ["reward=phase"]}, "--map reward_mean=phase: 'phase' holds no number"),
        ({"step": "phase"}, "--step 'phase': it holds no number"),
    ],
)
def test_a_key_the_file_lacks_is_named(tmp_path, kwargs, message):
    log = _jsonl(tmp_path / "a.jsonl", [{"step": 0, "mean_reward": 1.0, "phase": "warm"}])
    with pytest.raises(ValueError) as e:
        importers.import_run(
            "jsonl", log, root=tmp_path / "r", key_map=key_map_of("jsonl", **kwargs)
        )
    assert message.format(log=log) in str(e.value)
    assert not (tmp_path / "r").exists()


def test_bad_settings_and_maps_are_refused():
    with pytest.raises(ValueError, match="jsonl has no setting 'epsilom'; known: epsilon, "):
        key_map_of("jsonl", sets=["epsilom=0.2"])
    with pytest.raises(ValueError, match="reward_mean is given twice"):
        key_map_of("jsonl", maps=["reward=a", "reward_mean=b"])
    with pytest.raises(ValueError, match="key 'a' is given two meanings"):
        key_map_of("jsonl", maps=["reward=a", "loss=a"])
    with pytest.raises(ValueError, match="write MEANING=KEY"):
        key_map_of("jsonl", maps=["reward"])
    with pytest.raises(ValueError, match="--group-size must be a positive integer"):
        key_map_of("jsonl", group_size=0)


def test_a_key_map_is_refused_for_a_tool_that_reads_its_own_keys(tmp_path):
    log = _jsonl(tmp_path / "m.jsonl", [{"step": 0, "reward/mean": 0.5}])
    with pytest.raises(ValueError, match="are for jsonl, csv, roll, text imports"):
        importers.import_run(
            "tinker", log, root=tmp_path / "r", key_map=key_map_of("tinker", maps=["reward=x"])
        )


def test_help_lists_the_new_tools(capsys):
    with pytest.raises(SystemExit) as e:
        importers.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "{trl,tinker,verl,jsonl,csv,roll,swift,openrlhf,text}" in out
    assert "--map MEANING=KEY" in out and "--step KEY" in out


# ----------------------------------------------------------------------------- routing


def _fixtures(d: Path) -> dict[str, Path]:
    """A minimal log of each tool's own format."""
    (d / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}))
    return {
        "trl": d / "trainer_state.json",
        "verl": _jsonl(d / "v.jsonl", [{"step": 1, "data": {"critic/score/mean": 0.5}}]),
        "tinker": _jsonl(d / "t.jsonl", [{"step": 0, "reward/mean": 0.5}]),
        "jsonl": _jsonl(d / "j.jsonl", [{"step": 0, "r": 0.5}]),
        "csv": _write(d / "c.csv", "step,r\n0,0.5\n"),
        "roll": _jsonl(d / "metrics.jsonl", [{"system/step": 1.0, "actor/pg_loss": 0.1}]),
        "swift": _jsonl(d / "logging.jsonl", [{"loss": 0.1, "global_step/max_steps": "1/5"}]),
        "openrlhf": _write(d / "o.log", "✨ Global step 1: {'policy_loss': 0.1}\n"),
        "text": _write(d / "loop.log", "step 1/5 reward: 0.5 loss: 0.1\n"),
    }


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_every_tool_is_read_by_its_own_reader(tmp_path):
    """Each tool of TOOLS reads its own format (a log answering for another tool would be a
    misrouting: before issue 47 every tool but trl and verl went to the Tinker reader)."""
    files = _fixtures(tmp_path)
    assert set(files) == set(TOOLS)
    for tool, file in files.items():
        assert _pick.read(tool, file).tool == tool


def test_a_new_tool_is_read_by_its_spec_never_by_another_tools_reader(tmp_path, monkeypatch):
    """A tool registered in TOOLS alone (the documented importer files) is read by its own
    ToolSpec.read; an unknown tool is refused."""
    file = _jsonl(tmp_path / "metrics.jsonl", [{"step": 0, "reward/mean": 0.5}])  # Tinker-like
    seen = []

    def read(path: Path, config, segment, key_map) -> SourceLog:
        seen.append(path)
        return SourceLog(tool="newtool", file=path, name="n", steps={0: {"x": 1.0}})

    spec = ToolSpec(
        name="newtool",
        read=read,
        facts=lambda log, fmt, settings: {},
        run_settings=lambda s: RunSettings(),
    )
    monkeypatch.setitem(TOOLS, "newtool", spec)
    assert _pick.read("newtool", file).tool == "newtool"
    assert seen == [file]
    with pytest.raises(ValueError, match="source must be one of"):
        _pick.read("nosuchtool", file)
    # a reader that answers for another tool is a wiring fault, not a run
    monkeypatch.setitem(TOOLS, "newtool", dataclasses.replace(spec, read=_tinkerish))
    with pytest.raises(AssertionError, match="the newtool import was read as a tinker log"):
        _pick.read("newtool", file)


def _tinkerish(path: Path, config, segment, key_map) -> SourceLog:
    return SourceLog(tool="tinker", file=path, name="t", steps={0: {"x": 1.0}})


# ----------------------------------------------------------------------------- ROLL


def _roll_rows() -> list[dict]:
    base = {
        "actor/kl_loss": 0.002,
        "actor/approxkl": 0.0019,
        "actor/total_loss": 0.01,
        "actor/clipfrac": 0.001,
        "actor_train/grad_norm": 1.5,
        "actor/pg_loss": 0.01,
        "reward/mine": 0.5,
    }
    return [{**base, "system/step": float(s), "actor_train/grad_norm": 1.0 + s} for s in (1, 2, 3)]


def test_roll_kl_loss_meaning_follows_enable_reference(tmp_path):
    """No reference (ROLL sets ref_log_probs = old_log_probs): actor/kl_loss is the KL to the old
    policy; with one, to the reference; unstated (and no version to take ROLL's default from):
    withheld, actor/approxkl (k2) fills kl_old_mean."""
    log = _jsonl(tmp_path / "metrics.jsonl", _roll_rows())
    cases = {
        "false": (Step.KL_OLD_MEAN, "roll/actor/approxkl"),
        "true": (Step.KL_REF_MEAN, Step.KL_OLD_MEAN),
    }
    for value, (kl_loss_col, approx_col) in cases.items():
        km = key_map_of("roll", sets=[f"enable_reference={value}"])
        res = importers.import_run("roll", log, root=tmp_path / value, key_map=km)
        df = _steps(res["run_dir"])
        assert _cells(df, kl_loss_col) == [0.002] * 3
        assert _cells(df, approx_col) == [0.0019] * 3
    res = importers.import_run("roll", log, root=tmp_path / "unknown")
    df = _steps(res["run_dir"])
    assert _cells(df, "roll/actor/kl_loss") == [0.002] * 3
    assert _cells(df, Step.KL_OLD_MEAN) == [0.0019] * 3
    assert _cells(df, Step.KL_REF_MEAN) == [None] * 3
    rec = schema.read_run_info(res["run_dir"]).imported
    assert rec.withheld["actor/kl_loss"].startswith(
        "kl_old_mean or kl_ref_mean not filled: enable_reference not given"
    )
    assert rec.key_map["step"] == {"key": "system/step", "from": "ROLL's step key"}
    assert _cells(df, "grad_norm") == [2.0, 3.0, 4.0]
    assert _cells(df, Step.LOSS) == [0.01] * 3
    assert _cells(df, "reward/mine") == [0.5] * 3  # the run's own key, kept


def test_roll_a_users_map_goes_before_rolls_own(tmp_path):
    """--map kl_old_mean=actor/approxkl takes the column ROLL's actor/kl_loss would fill (no
    reference): kl_loss is kept as roll/actor/kl_loss and the record says why."""
    log = _jsonl(tmp_path / "metrics.jsonl", _roll_rows())
    km = key_map_of(
        "roll",
        maps=["kl_old_mean=actor/approxkl", "reward=reward/mine"],
        sets=["enable_reference=false"],
    )
    res = importers.import_run("roll", log, root=tmp_path / "r", key_map=km)
    df = _steps(res["run_dir"])
    assert _cells(df, Step.KL_OLD_MEAN) == [0.0019] * 3
    assert _cells(df, "roll/actor/kl_loss") == [0.002] * 3
    assert _cells(df, Step.REWARD_MEAN) == [0.5] * 3
    rec = schema.read_run_info(res["run_dir"]).imported
    assert rec.mapped["actor/approxkl"] == Step.KL_OLD_MEAN
    assert rec.withheld["actor/kl_loss"].startswith(
        "kl_old_mean or kl_ref_mean not filled: kl_old_mean is filled by actor/approxkl"
    )


def test_roll_use_kl_loss_turns_the_reference_on(tmp_path):
    """ROLL's config turns enable_reference on when use_kl_loss (or init_kl_coef > 0): its
    actor/kl_loss is then the KL to the reference."""
    log = _jsonl(tmp_path / "metrics.jsonl", _roll_rows())
    km = key_map_of("roll", sets=["use_kl_loss=true"])
    res = importers.import_run("roll", log, root=tmp_path / "r", key_map=km)
    df = _steps(res["run_dir"])
    assert _cells(df, Step.KL_REF_MEAN) == [0.002] * 3
    assert _cells(df, Step.KL_OLD_MEAN) == [0.0019] * 3
    rec = schema.read_run_info(res["run_dir"]).imported
    assert rec.settings["enable_reference"] == {
        "value": True,
        "from": "ROLL turns the reference on: use_kl_loss = true (--set use_kl_loss)",
    }


def test_a_roll_file_is_sniffed_as_roll(tmp_path):
    log = _jsonl(tmp_path / "metrics.jsonl", _roll_rows())
    with pytest.raises(
        ValueError,
        match="it looks like a ROLL metrics.jsonl .*, which `python -m training_hooks.importers roll ",
    ):
        importers.import_run("tinker", log, root=tmp_path / "r")


def _real_roll() -> Path | None:
    from test_importers_real import real_logs_dir

    folder = real_logs_dir()
    path = folder / "other/rdan-grpo-roll-beingamanforever/metrics.jsonl" if folder else None
    return path if path is not None and path.is_file() else None


ROLL_LOG = _real_roll()
#: What the log's README entry says of its config (configs/train/base.yaml + rdan.yaml)
ROLL_SETS = ["enable_reference=false", "init_kl_coef=0", "max_steps=500"]
ROLL_MAPS = ["reward=reward/selected_mean", "zero_variance_fraction=advantage/zero_rate"]


@pytest.mark.skipif(ROLL_LOG is None, reason="../shared/real_logs/ is absent")
def test_the_real_roll_log_holds_its_source_values(tmp_path):
    assert ROLL_LOG is not None
    source = {int(o["system/step"]): o for o in map(json.loads, ROLL_LOG.read_text().splitlines())}
    km = key_map_of("roll", maps=ROLL_MAPS, sets=ROLL_SETS, group_size=8)
    res = importers.import_run("roll", ROLL_LOG, root=tmp_path / "r", key_map=km)
    df = tables.read_table(res["run_dir"], schema.STEPS_DIR).set_index("step").sort_index()
    assert df.index.tolist() == list(range(1, 431))
    ours = {
        Step.KL_OLD_MEAN: "actor/kl_loss",
        Step.LOSS: "actor/total_loss",
        "grad_norm": "actor_train/grad_norm",
        "token_clip_binding_fraction": "actor/clipfrac",
        Step.REWARD_MEAN: "reward/selected_mean",
        Step.ZERO_VARIANCE_FRACTION: "advantage/zero_rate",
        "roll/actor/approxkl": "actor/approxkl",
        "actor/entropy": "actor/entropy",
        "judge/error_RateLimitError": "judge/error_RateLimitError",
    }
    for step in (1, 4, 39, 170, 171, 248, 250, 279, 415, 430):
        for column, key in ours.items():
            got, want = df.at[step, column], source[step].get(key)
            assert (got is None or pd.isna(got)) if want is None else got == want, (step, key)
    # named values of the README's description
    assert df.at[170, "grad_norm"] == pytest.approx(27.0597, abs=1e-4)
    assert df.at[171, Step.KL_OLD_MEAN] == pytest.approx(0.0203, abs=1e-4)
    assert df.at[279, Step.REWARD_MEAN] == pytest.approx(0.598, abs=1e-3)
    assert pd.isna(df.at[100, "actor/entropy"]) and df.at[101, "actor/entropy"] > 0
    info = schema.read_run_info(res["run_dir"])
    assert (info.group_size, info.last_step, info.status) == (8, 430, "stopped early")
    assert info.imported.stopped_early == (
        "the log ends at step 430 of max_steps 500 (--set max_steps)"
    )
    assert info.imported.format == "ROLL metrics (<0.2.0)"


@pytest.mark.skipif(ROLL_LOG is None, reason="../shared/real_logs/ is absent")
def test_health_on_the_real_roll_log_matches_its_description(tmp_path):
    """The README: stopped at 430 of 500; ~70% of responses without advantage; gradient-norm
    spikes (27.06 at 170); the KL (to the old policy: no reference) jumping at 171 and 250."""
    assert ROLL_LOG is not None
    km = key_map_of("roll", maps=ROLL_MAPS, sets=ROLL_SETS, group_size=8)
    res = importers.import_run("roll", ROLL_LOG, root=tmp_path / "r", key_map=km)
    df, _ = tables.step_frame(res["run_dir"])
    facts = findings.facts_of(schema.read_run_info(res["run_dir"]))
    report = findings.run_health(df, facts)
    serious = {f.code: f for f in report.findings if f.severity in ("error", "warning")}
    assert facts.status == "stopped early"
    assert set(serious) == {"zero_variance", "grad_norm_spike", "kl_old_spike"}
    assert "at step 170" in serious["grad_norm_spike"].evidence
    assert {171, 250} <= set(serious["kl_old_spike"].steps)
    assert "71.1% of groups" in serious["zero_variance"].evidence
