"""The newer log formats, on hand-made files and damaged copies written into tmp_path: TRL /
Unsloth console dicts, verl console lines, TensorBoard event files, W&B run folders; files holding
several runs; a file of another format; the bounds on untrusted text.

Each file is written as its tool writes it (the event files by torch's SummaryWriter, which TRL's
Trainer uses), then damaged the way real logs are (a record cut or garbled by a progress bar, a
flipped byte, a torn last line), and the expected rows are worked out by hand in the comments.
The real logs of other people's runs are in tests/test_importers_real.py.
"""

from __future__ import annotations

import ast
import json
import math
import pprint
import struct
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from training_hooks import importers, schema, tables
from training_hooks.importers import _literal, _text
from training_hooks.importers._literal import LiteralError, parse_literal
from training_hooks.metric_map import Derived
from training_hooks.schema import Step


def _import(tool, path, root, **kw) -> tuple[pd.DataFrame, schema.RunInfo]:
    res = importers.import_run(tool, path, root=root, **kw)
    df = tables.read_table(res["run_dir"], schema.STEPS_DIR).set_index(Step.STEP)
    return df, schema.read_run_info(res["run_dir"])


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """``python -m training_hooks.importers ARGS`` in this process: (exit status, stdout, stderr)."""
    code = importers.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# ----------------------------------------------------------------------------- literals

_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=64),  # (ast reads no inf)
    st.text(max_size=8),
)
_tree = st.recursive(
    _leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.tuples(kids, kids),
        st.dictionaries(st.text(max_size=6), kids, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=120, deadline=None)
@given(_tree)
def test_literals_read_back_as_python_prints_them(value):
    """repr and pprint (which wraps long strings as 'a' 'b') of any literal tree parse back to
    the value, as ast.literal_eval reads them."""
    for text in (repr(value), pprint.pformat(value, width=30)):
        got, end = parse_literal(text)
        assert got == value == ast.literal_eval(text) and end == len(text)


@pytest.mark.parametrize(
    "text",
    [
        "{'a': __import__('os').system('x')}",
        "{'a': 1 + 2}",
        "{'a': (lambda: 0)}",
        "{'a': f()}",
        "{'a': [1, 2}",
        "[" * 100 + "]" * 100,
        "{'a': np.float64('x')}",
    ],
    ids=["call", "operator", "lambda", "name", "mismatch", "deep", "wrapped-text"],
)
def test_only_literals_are_read(text):
    """A name, a call, an operator, a bracket mismatch, nesting deeper than MAX_DEPTH: a
    LiteralError with a position; nothing is evaluated."""
    with pytest.raises(LiteralError, match="at character"):
        parse_literal(text)


def test_number_reprs_of_numpy_and_infinities():
    """numpy 2's repr, nan and infinities as repr writes them; a cut record is 'incomplete'."""
    got, _ = parse_literal("{'a': np.float64(0.5), 'b': nan, 'c': -inf, 'd': np.int64(-3)}")
    assert got["a"] == 0.5 and math.isnan(got["b"]) and got["c"] == -math.inf and got["d"] == -3
    with pytest.raises(LiteralError) as e:
        parse_literal("{'loss': 0.1, 'rew")
    assert e.value.incomplete
    assert _literal.number_text("1.755e-07") == 1.755e-07 and _literal.number_text("x") is None
    assert _literal.significant_digits("4.995e-06") == 4 and _literal.significant_digits("0") == 1


# ----------------------------------------------------------------------------- TRL console

BAR = "\r 40%|████      | 16/40 [00:16<00:24,  1.00s/it]"
TRL_LOG = (
    "==((====))==  Unsloth 2026.6.9: Fast Qwen3 patching.\n"
    "  0%|          | 0/40 [00:00<?, ?it/s]\r 10%|█         | 4/40 [00:04<00:36]\n"
    "\x1b[32m{'loss': 0.5, 'grad_norm': 1.25, 'learning_rate': 1e-06, 'reward': 0.25, "
    "'epoch': 0.1}\x1b[0m\n"
    " 20%|██        | 8/40 [00:08<00:32]{'loss': 0.4, 'reward': 0.5, 'epoch': 0.2}\n"
    "{'loss': 0. 30%|███       | 12/40 [00:12<00:28]3, 'reward': 0.75, 'epoch': 0.3}\n"
    "{'eval_loss': 0.9, 'epoch': 0.3}\n"
    f"{BAR}{{'loss': '0.2', 'reward': '1', 'epoch': '0.4'}}\n"
    "some text {'not': 'a record'}\n"
    "{'train_runtime': 12.5, 'train_samples_per_second': 3.2, 'train_steps_per_second': 0.8, "
    "'train_loss': 0.35, 'epoch': 0.4}\n"
)


def _trl_log(tmp_path: Path, text: str = TRL_LOG, name: str = "train.log") -> Path:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (out / name).write_text(text, encoding="utf-8")
    return out / name


def test_trl_console_steps_are_record_positions_times_logging_steps(tmp_path):
    """logging_steps 4 (--config): the training records are steps 4, 8, 12, 16 (k x 4), the
    third garbled by a progress bar and skipped but keeping its place, so the fourth (Unsloth's
    quoted strings) is step 16; the eval record takes step 12, the one before it."""
    log = _trl_log(tmp_path)
    df, info = _import("trl", log, tmp_path / "runs", config={"logging_steps": 4})
    assert list(df.index) == [4, 8, 12, 16]
    assert df.loc[4, Step.LOSS] == 0.5 and df.loc[4, Step.REWARD_MEAN] == 0.25
    assert df.loc[8, Step.REWARD_MEAN] == 0.5  # the dict after the progress bar, same line
    assert df.loc[12, "eval_loss"] == 0.9 and pd.isna(df.loc[12, Step.LOSS])
    assert df.loc[16, Step.REWARD_MEAN] == 1.0 and df.loc[16, Step.LOSS] == 0.2  # '1', '0.2'
    rec = info.imported
    assert rec.file_format == "TRL console log"
    assert [d["line"] for d in rec.malformed_lines] == [5]
    assert rec.summary["train_runtime"] == 12.5 and rec.source_finished is True
    notes = " | ".join(rec.reader_notes)
    assert "step k x logging_steps (4, from --config: logging_steps)" in notes
    assert "1 damaged training records skipped; each keeps its place" in notes
    assert "3 values were printed as quoted text" in notes and "ANSI colour codes" in notes


def test_trl_console_without_logging_steps_says_the_steps_are_record_numbers(tmp_path):
    """No file states logging_steps and no progress bar fixes it: the steps are the records'
    numbers 1-4, the import says so (the step axis is a record index; given the folder, the
    record names the log it found); a trainer_state.json beside the log that states it is used
    instead."""
    log = _trl_log(tmp_path, _without_bars(TRL_LOG))
    df, info = _import("trl", log.parent, tmp_path / "a")  # the folder: its console log found
    assert list(df.index) == [1, 2, 3, 4]
    notes = info.imported.reader_notes
    assert any("steps are the training records' numbers 1-4" in n for n in notes)
    assert any(n.startswith("found in") and "train.log (TRL console log)" in n for n in notes)
    assert "logging_steps" not in info.imported.settings
    assert info.imported.step_axis.startswith("record index: ")
    (log.parent / "trainer_state.json").write_text(json.dumps({"logging_steps": 10}))
    df, info = _import("trl", log, tmp_path / "b")
    assert list(df.index) == [10, 20, 30, 40]
    assert info.imported.settings["logging_steps"]["from"] == "trainer_state.json: logging_steps"
    assert info.imported.step_axis == ""


def _without_bars(text: str) -> str:
    """``text`` with its progress bars taken out (what a log without a bar reads like)."""
    return _text.BAR.sub("", text.replace(BAR, ""))


def test_trl_console_progress_bar_fixes_logging_steps(tmp_path):
    """The Trainer's bar (no description) last drawn at 16/40 beside 4 training records: only
    logging_steps 4 gives floor(16 / L) = 4, so the records are steps 4, 8, 12, 16; the bar's
    total plans 40 steps, and the end-of-training record says the run returned (at 16: before
    its plan, as an early stop does)."""
    df, info = _import("trl", _trl_log(tmp_path), tmp_path / "r")
    assert list(df.index) == [4, 8, 12, 16]
    rec = info.imported
    assert rec.settings["logging_steps"]["value"] == 4 and rec.step_axis == ""
    assert (
        "the progress bar, line 7: 16/40 gives the last step 16"
        in (rec.settings["logging_steps"]["from"])
    )
    assert rec.planned_end == {
        "steps": 40,
        "epochs": None,
        "from": "the progress bar, line 7: 16/40",
    }
    assert info.status == "finished" and "it ended before its planned end" in rec.status_basis


#: A console run of 400 steps logged every 10 that died at step 238 (its bar's count), and the
#: same run finished: Unsloth's banner, the bar, 23 records, then (finished) the rest and the
#: end-of-training record.
def _console_run(last: int, finished: bool) -> str:
    out = ["  \\   /|    Num examples = 3,200 | Num Epochs = 2 | Total steps = 400"]
    for step in range(1, last + 1):
        out.append(f"{100 * step // 400:3d}%|██  | {step}/400 [00:{step % 60:02d}<01:00,  1.0s/it]")
        if step % 10 == 0:
            out.append(f"{{'loss': {step / 1000}, 'reward': {step / 400}, 'epoch': {step / 200}}}")
    if finished:
        out.append("{'train_runtime': 400.0, 'train_samples_per_second': 8.0, 'epoch': 2.0}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("last", "finished", "status", "basis"),
    [
        (
            238,
            False,
            "stopped early",
            "planned 400 steps (the progress bar, line 262: 238/400); reached step 238 (the "
            "progress bar, line 262: 238/400); no end-of-training line",
        ),
        (
            400,
            True,
            "finished",
            "planned 400 steps (the progress bar, line 440: 400/400); reached step 400 (the "
            "progress bar, line 440: 400/400); the end-of-training record (train_runtime), "
            "line 442",
        ),
    ],
)
def test_trl_console_status_from_its_bar(tmp_path, last, finished, status, basis):
    """The bar's total is the planned end and its count how far the run got: 238 of 400
    without an end-of-training record is stopped early, never finished; the records are steps
    10, 20, ... (logging_steps 10 from the bar: 238 // 10 = 23 records)."""
    df, info = _import("trl", _trl_log(tmp_path, _console_run(last, finished)), tmp_path / "r")
    assert list(df.index) == list(range(10, last + 1, 10))
    assert df.loc[230, Step.LOSS] == 0.23
    rec = info.imported
    assert info.status == status and rec.status_basis == basis
    assert rec.planned_end["steps"] == 400 and rec.settings["logging_steps"]["value"] == 10


def test_trl_console_epochs_fix_logging_steps_without_a_final_count(tmp_path):
    """No bar count to divide (the bar lines lost) but the banner: 2 epochs of 400 steps (200
    an epoch) and the last of 23 records at epoch 1.15 is step 230 = 23 x 10: logging_steps 10,
    said to come from the epochs; the run planned 400 steps and reached 230 (its last record):
    stopped early."""
    lines = [line for line in _console_run(238, False).split("\n") if "%|" not in line]
    # a bar drawn once, at the start: its total only (its count 0 gives no last step)
    lines.insert(1, "  0%|          | 0/400 [00:00<?, ?it/s]")
    df, info = _import("trl", _trl_log(tmp_path, "\n".join(lines)), tmp_path / "r")
    assert list(df.index) == list(range(10, 231, 10))
    rec = info.imported
    assert rec.settings["logging_steps"]["value"] == 10
    assert "epoch 1.15, and an epoch is 200 steps" in rec.settings["logging_steps"]["from"]
    assert info.status == "stopped early"
    assert "last step 230 (its last training record)" in rec.status_basis


def test_trl_console_cut_last_line_and_a_restart(tmp_path):
    """A last record cut mid-line keeps its entries before the cut (counted); a record after the
    end-of-training one starts a second run, and so does the epoch going back (0.2 -> 0.1):
    refused as one, each run read alone, its steps counted from its own first record."""
    text = TRL_LOG + "{'loss': 0.9, 'reward': 0.125, 'epoch': 0.1}\n{'loss': 0.8, 'rew"
    log = _trl_log(tmp_path, text)
    with pytest.raises(importers.SeveralRuns, match=r"line 10 \(after the end-of-training"):
        importers.import_run("trl", log, root=tmp_path / "runs")
    first, _ = _import("trl", log, tmp_path / "runs", segment=1, config={"logging_steps": 2})
    assert list(first.index) == [2, 4, 6, 8]
    df, info = _import("trl", log, tmp_path / "runs", segment=2, config={"logging_steps": 2})
    assert list(df.index) == [2, 4] and df.loc[2, Step.REWARD_MEAN] == 0.125
    assert df.loc[4, Step.LOSS] == 0.8 and pd.isna(df.loc[4, Step.REWARD_MEAN])  # its prefix
    assert info.imported.truncated_last_line is None and info.imported.segment == "2 of 2"
    assert info.imported.records_cut == (
        {"line": 11, "kept": 1, "reason": "the file's last line, cut mid-write", "step": 4},
    )
    assert info.name.endswith("-run2")
    again = _trl_log(
        tmp_path, "{'loss': 0.5, 'epoch': 0.2}\n{'loss': 0.4, 'epoch': 0.1}\n", "b.log"
    )
    with pytest.raises(importers.SeveralRuns, match=r"line 2 \(epoch 0.1 after 0.2 at line 1\)"):
        importers.import_run("trl", again, root=tmp_path / "runs")


def test_a_progress_bar_inside_a_name_is_damage(tmp_path):
    """A bar written into a record's text where it still parses (inside a quoted name): the
    record is damaged, not a metric called 'rew 30%|...': it keeps the entries before the
    damaged name (counted), never the value after it."""
    text = "{'loss': 0.5, 'epoch': 0.1}\n{'loss': 0.4, 'rew 30%|███ | 12/40 ard': 0.75}\n"
    df, info = _import("trl", _trl_log(tmp_path, text), tmp_path / "r", config={"logging_steps": 1})
    assert list(df.index) == [1, 2] and not any("%|" in c for c in df.columns)
    assert df.loc[2, Step.LOSS] == 0.4 and info.imported.malformed_lines == ()
    (cut,) = info.imported.records_cut
    assert cut["line"] == 2 and cut["kept"] == 1
    assert cut["reason"].startswith("a progress bar written into name 'rew 30%|")


def test_long_lines_are_skipped_and_counted(tmp_path, monkeypatch):
    """A line longer than the bound is skipped whole (never held), counted, and said; the
    records around it are read."""
    monkeypatch.setattr(_text, "MAX_LINE_BYTES", 200)
    text = "{'loss': 0.5, 'epoch': 0.1}\n" + "x" * 1000 + "\n{'loss': 0.4, 'epoch': 0.2}\n"
    df, info = _import("trl", _trl_log(tmp_path, text), tmp_path / "r", config={"logging_steps": 1})
    assert list(df[Step.LOSS]) == [0.5, 0.4]
    assert any(
        "1 lines longer than 200 bytes skipped (line 2)" in n for n in info.imported.reader_notes
    )


# ----------------------------------------------------------------------------- verl console

VERL_CONFIG = (
    "{'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,\n"
    "                                 'clip_ratio_high': HIGH,\n"
    "                                 'clip_ratio_low': 0.2,\n"
    "                                 'loss_agg_mode': 'token-mean',\n"
    "                                 'policy_loss': {'loss_mode': 'vanilla'},\n"
    "                                 'ppo_epochs': 1,\n"
    "                                 'ppo_mini_batch_size': 16,\n"
    "                                 'use_kl_loss': False},\n"
    "                       'rollout': {'n': 4}},\n"
    " 'algorithm': {'adv_estimator': 'grpo'},\n"
    " 'data': {'train_batch_size': 16},\n"
    " 'trainer': {'experiment_name': 'exp-a', 'project_name': 'p', 'total_training_steps': None}}"
)
TASK = "\x1b[36m(TaskRunner pid=7)\x1b[0m "


def _verl_run(high: float) -> str:
    dump = VERL_CONFIG.replace("HIGH", str(high)).split("\n")
    lines = [TASK + dump[0], TASK + dump[1], "(WorkerDict pid=9) interleaved { text"]
    lines += [TASK + d for d in dump[2:]]
    lines += [
        TASK + "Total training steps: 3",
        TASK + "step:1 - actor/pg_clipfrac:0.125 - actor/pg_loss:-0.5 - critic/score/mean:0.25 "
        "- actor/kl_loss:0.0 - timing_s/step:10.0",
        "(WorkerDict pid=9) ValueError: step 1 - rollout text, not a metric line",
        TASK + "step:2 - actor/pg_clipfrac:np.float64(0.0625) - critic/score/mean:0.5 - "
        "timing_s/step:12.5",
        TASK + "step:3 - actor/pg_clipfrac:0.x - critic/score/mean:0.75",
    ]
    return "\n".join(lines) + "\n"


def test_verl_console_log_with_its_printed_config(tmp_path):
    """Metric lines among other actors' text, a config printed over lines another actor writes
    between: steps 1-2 read (numpy's repr too), step 3 garbled at its first metric (skipped,
    counted), step 4 cut at the end (its metric before the cut kept, counted). The config gives
    clip 0.2/0.28, token-mean, n=4, use_kl_loss off (its 0.0 not stored) and one optimizer step
    a row (pg_loss is the loss); wall time 10, 22.5. 'Total training steps: 3' and step 4 kept:
    it reached its planned end."""
    f = tmp_path / "job.log"
    f.write_text(_verl_run(0.28) + TASK + "step:4 - actor/pg_clipfrac:0.1 - critic/score/mea")
    df, info = _import("verl", f, tmp_path / "runs")
    assert list(df.index) == [1, 2, 4]
    assert list(df[Derived.TOKEN_CLIP_BINDING]) == [0.125, 0.0625, 0.1]
    assert pd.isna(df.loc[4, Step.REWARD_MEAN])  # cut inside its name: not kept
    df = df.loc[[1, 2]]
    assert list(df[Step.REWARD_MEAN]) == [0.25, 0.5] and df.loc[1, Step.LOSS] == -0.5
    assert list(df[Step.WALL_TIME]) == [10.0, 22.5]  # 10, then 10 + 12.5
    assert "actor/kl_loss" not in df.columns and df[Step.KL_REF_MEAN].isna().all()
    assert (info.token_eps_low, info.token_eps_high) == (0.2, 0.28) and info.group_size == 4
    assert info.reduction == "token_mean" and info.algorithm == "grpo" and info.name == "exp-a"
    rec = info.imported
    assert [d["line"] for d in rec.malformed_lines] == [18] and rec.truncated_last_line is None
    assert "is not a number" in rec.malformed_lines[0]["reason"]
    assert [(d["line"], d["kept"]) for d in rec.records_cut] == [(19, 1)]
    assert rec.settings["total_training_steps"]["value"] == 3 and rec.source_finished is True
    assert rec.status_basis == (
        "planned 3 steps (job.log: line 14 (Total training steps: 3)); last step 4 (its last "
        "step line); no end-of-training line"
    )


def test_verl_console_restarted_run_has_its_own_config(tmp_path):
    """The job restarted into the same log with clip_ratio_high 0.3: two runs; each takes the
    config printed before its first step."""
    f = tmp_path / "job.log"
    f.write_text(_verl_run(0.28) + _verl_run(0.3))
    with pytest.raises(
        importers.SeveralRuns, match=r"a new run starts at line 33 \(step 1 after step 2\)"
    ):
        importers.import_run("verl", f, root=tmp_path / "runs")
    _, a = _import("verl", f, tmp_path / "runs", segment=1)
    _, b = _import("verl", f, tmp_path / "runs", segment=2)
    assert a.token_eps_high == 0.28 and b.token_eps_high == 0.3
    assert a.run_id != b.run_id and a.imported.segment == "1 of 2"


# ----------------------------------------------------------------------------- JSON lines


def test_tinker_restart_resume_and_a_late_eval_line(tmp_path):
    """Steps 0, 1, 2, then 3, 4 logged again and 5 (a resume: the later values win, said),
    then an eval line for step 1 written late (merged, said), then 0, 1 (a new run: refused as
    one file, read run by run)."""
    rows = [(0, 0.1), (1, 0.2), (2, 0.3), (3, 0.4), (4, 0.5), (3, 0.45), (4, 0.55), (5, 0.6)]
    lines = [{"step": s, "env/all/reward/total": r} for s, r in rows]
    lines.append({"step": 1, "test/env/all/reward/total": 0.9})
    lines += [{"step": 0, "env/all/reward/total": 0.7}, {"step": 1, "env/all/reward/total": 0.8}]
    f = tmp_path / "metrics.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(
        importers.SeveralRuns, match=r"holds 2 runs.*line 10 \(step 0 after step 1\)"
    ):
        importers.import_run("tinker", f, root=tmp_path / "runs")
    df, info = _import("tinker", f, tmp_path / "runs", segment=1)
    assert list(df[Step.REWARD_MEAN]) == [0.1, 0.2, 0.3, 0.45, 0.55, 0.6]
    assert df.loc[1, "test/env/all/reward/total"] == 0.9
    notes = " | ".join(info.imported.reader_notes)
    assert "line 6: step 3 logged again after step 4 (a resume" in notes
    assert "line 9: step 1 written after step 5 (out of order)" in notes
    assert info.imported.duplicate_steps == (3, 4)
    df2, _ = _import("tinker", f, tmp_path / "runs", segment=2)
    assert list(df2[Step.REWARD_MEAN]) == [0.7, 0.8]


def test_cli_segment_all_imports_each_run_once(tmp_path, capsys):
    """--segment all imports every run as its own; again, it is refused (exit 1, nothing
    written)."""
    f = tmp_path / "metrics.jsonl"
    f.write_text("".join(json.dumps({"step": s, "reward/mean": 0.5}) + "\n" for s in (0, 1, 0)))
    root = tmp_path / "runs"
    code, out, err = _cli(capsys, "tinker", str(f), "--root", str(root), "--segment", "all")
    assert code == 0, err
    assert out.count("imported ") == 2 and len(list(root.iterdir())) == 2
    code, out, err = _cli(capsys, "tinker", str(f), "--root", str(root), "--segment", "all")
    assert code == 1 and out == "" and err.startswith("refused: already imported")


# ----------------------------------------------------------------------------- a file of another kind


def test_a_file_of_another_format_names_it_and_its_command(tmp_path, capsys):
    """Each tool given another tool's file: one line, exit 2, naming what the file looks like
    and the command that reads it (not "Extra data: line 2")."""
    tinker = tmp_path / "metrics.jsonl"
    tinker.write_text('{"step": 0, "env/all/reward/total": 0.1}\n{"step": 1}\n')
    state = tmp_path / "o" / "trainer_state.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.1}]}))
    verl = tmp_path / "verl.log"
    verl.write_text("step:1 - critic/score/mean:0.5\n")
    trl = _trl_log(tmp_path)
    cases = [
        ("trl", tinker, "a Tinker metrics.jsonl", "importers tinker"),
        ("tinker", state, "a TRL trainer_state.json", "importers trl"),
        ("trl", verl, "a verl console log", "importers verl"),
        ("verl", trl, "a TRL / Unsloth console log", "importers trl"),
    ]
    for tool, f, looks, command in cases:
        code, _, err = _cli(capsys, tool, str(f), "--root", str(tmp_path / "runs"))
        err = err.strip()
        assert code == 2 and len(err.splitlines()) == 1, err
        assert (
            f"it looks like {looks}" in err and f"`python -m training_hooks.{command} {f}`" in err
        )
        assert "Extra data" not in err
    assert not (tmp_path / "runs").exists()


def test_a_folder_with_two_console_logs_asks_for_one(tmp_path):
    _trl_log(tmp_path, name="a.log")
    _trl_log(tmp_path, name="b.log")
    with pytest.raises(ValueError, match=r"holds 2 TRL console logs \(a.log, b.log\): pass one"):
        importers.import_run("trl", tmp_path / "out", root=tmp_path / "runs")


# ----------------------------------------------------------------------------- W&B run folder


def _wandb_run(tmp_path: Path, summary_loss: float) -> Path:
    files = tmp_path / "wandb" / "run-20260101_000000-abc123" / "files"
    files.mkdir(parents=True)
    dicts = [
        "{'loss': '0.0125', 'reward': '0.25', 'num_tokens': '1.2e+04', 'epoch': '0.33'}",
        "{'loss': '0.01', 'reward': '0.5', 'num_tokens': '2.4e+04', 'epoch': '0.67'}",
        "{'loss': '0.007501', 'reward': '0.75', 'num_tokens': '3.6e+04', 'epoch': '1'}",
        "{'train_runtime': '30.5', 'train_samples_per_second': '1', "
        "'train_steps_per_second': '1', 'train_loss': '0.01', 'epoch': '1'}",
    ]
    (files / "output.log").write_text(" 33%|███▎      | 10/30\n".join(dicts) + "\n")
    summary = {"train/loss": summary_loss, "train/reward": 0.75, "train/num_tokens": 36000,
               "train/global_step": 30, "_step": 99}  # fmt: skip
    (files / "wandb-summary.json").write_text(json.dumps(summary))
    (files / "requirements.txt").write_text("torch==2.8.0\ntrl==0.19.1\nwandb==0.21.0\n")
    (files / "config.yaml").write_text(
        "_wandb:\n  value: {cli_version: 0.21.0}\nlogging_steps:\n  value: 10\n"
        "num_generations:\n  value: 4\n"
    )
    return files.parent


def test_wandb_run_folder_agrees_with_its_summary(tmp_path):
    """output.log's dicts at steps 10, 20, 30 (logging_steps 10 from config.yaml), TRL 0.19.1
    from requirements.txt, group size 4; the summary's last values agree with the last record
    at the 4 digits it printed (0.0075012 prints as '0.007501')."""
    run = _wandb_run(tmp_path, summary_loss=0.0075012)
    df, info = _import("trl", tmp_path, tmp_path / "runs")  # the folder holding wandb/
    assert list(df.index) == [10, 20, 30] and list(df[Step.REWARD_MEAN]) == [0.25, 0.5, 0.75]
    assert df.loc[10, "trl/num_tokens"] == 12000.0
    rec = info.imported
    assert rec.version == "0.19.1" and info.group_size == 4
    assert rec.settings["logging_steps"]["from"] == "config.yaml: logging_steps"
    assert rec.file == str(run / "files" / "output.log")
    checks = " | ".join(rec.cross_checks)
    assert "agrees with the last record of output.log (step 30) on all 3 metrics" in checks
    assert "train/global_step 30 equals the last record's step 30" in checks


def test_wandb_run_folder_that_differs_says_where(tmp_path):
    """A summary whose loss rounds to another 4-digit value: the cross-check names it."""
    _wandb_run(tmp_path, summary_loss=0.0075)
    _, info = _import("trl", tmp_path / "wandb", tmp_path / "runs")
    assert (
        "differs from the last record of output.log (step 30) on 1 of 3 metrics: loss (0.007501 vs 0.0075)"
        in (" | ".join(info.imported.cross_checks))
    )


# ----------------------------------------------------------------------------- TensorBoard

SCALARS = {
    10: {"train/loss": 0.5, "train/reward": 0.25, "train/kl": 0.001},
    20: {"train/loss": 0.4, "train/reward": 0.5, "train/kl": 0.002, "eval/loss": 0.9},
    30: {"train/loss": 0.3, "train/reward": 0.75, "train/kl": 0.003},
}


def _events(folder: Path, scalars=SCALARS) -> Path:
    """An event file as TRL's Trainer writes it (torch's SummaryWriter, transformers' names,
    the training arguments as text)."""
    pytest.importorskip("tensorboard", reason="the 'tensorboard' extra is not installed")
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(log_dir=str(folder))
    w.add_text("args", json.dumps({"logging_steps": 10, "num_generations": 4, "beta": 0.04}))
    for step, tags in scalars.items():
        for tag, v in tags.items():
            w.add_scalar(tag, v, step)
    w.close()
    (f,) = folder.glob("events.out.tfevents.*")
    return f


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _records(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each TFRecord in an event file."""
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append((pos, n))
        pos += n + 16
    return out


def test_event_file_as_the_trainer_names_it(tmp_path):
    """train/loss -> loss, eval/loss -> eval_loss (the Trainer's names, as trainer_state.json
    has them); values are the float32 the file holds; the args text gives the settings; the
    wall time is the file's own clock."""
    f = _events(tmp_path / "out" / "runs" / "Jan01_host")
    df, info = _import("trl", f, tmp_path / "runs")
    assert list(df.index) == [10, 20, 30]
    assert list(df[Step.LOSS]) == [_f32(0.5), _f32(0.4), _f32(0.3)]
    assert df.loc[20, "eval_loss"] == _f32(0.9) and df.loc[30, Step.REWARD_MEAN] == 0.75
    assert info.group_size == 4 and info.imported.settings["logging_steps"]["value"] == 10
    assert info.imported.file_format == "TensorBoard event file"
    assert df[Step.WALL_TIME].is_monotonic_increasing and df[Step.WALL_TIME].iloc[0] > 1.7e9


def test_damaged_event_files_lose_only_the_damaged_records(tmp_path):
    """A flipped byte in one record's payload (its CRC fails): that record alone is skipped and
    counted. A damaged length: the reader finds the next record. A file cut mid-record: the
    truncated last record, everything before it read."""
    f = _events(tmp_path / "ev")
    data = bytearray(f.read_bytes())
    recs = _records(bytes(data))
    # records: file_version, args text, then one scalar each (10: loss, reward, kl; 20: ...)
    off, n = recs[3]  # step 10's train/reward
    flipped = bytearray(data)
    flipped[off + 12 + n // 2] ^= 0xFF
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / f.name).write_bytes(bytes(flipped))
    df, info = _import("trl", tmp_path / "a" / f.name, tmp_path / "runs")
    assert pd.isna(df.loc[10, Step.REWARD_MEAN]) and df.loc[30, Step.REWARD_MEAN] == 0.75
    assert info.imported.malformed_lines == (
        {"record": 4, "reason": "its CRC does not match its bytes"},
    )
    length = bytearray(data)
    length[recs[3][0]] ^= 0x01  # the length field: its CRC fails
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / f.name).write_bytes(bytes(length))
    df, info = _import("trl", tmp_path / "b" / f.name, tmp_path / "runs")
    assert pd.isna(df.loc[10, Step.REWARD_MEAN]) and list(df[Step.LOSS]) == [
        _f32(0.5),
        _f32(0.4),
        _f32(0.3),
    ]
    assert "a damaged length at byte" in info.imported.malformed_lines[0]["reason"]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / f.name).write_bytes(bytes(data[: recs[-1][0] + 20]))
    df, info = _import("trl", tmp_path / "c" / f.name, tmp_path / "runs")
    rec = info.imported
    kl = rec.mapped.get("kl") or rec.renamed["kl"]  # the last record: step 30's train/kl, cut
    assert rec.truncated_last_line == len(recs) and pd.isna(df.loc[30, kl])
    assert df.loc[20, kl] == _f32(0.002) and df.loc[30, Step.REWARD_MEAN] == 0.75


def test_trainer_state_and_event_file_compared(tmp_path):
    """The output dir holds both: agreeing values are said to agree (at float32); a step the
    event file alone has, and a value that differs, are named."""
    out = tmp_path / "out"
    _events(out / "runs" / "Jan01_host", {**SCALARS, 33: {"train/reward": 0.875}})
    history = [{"step": s, **{k.split("/", 1)[1]: v for k, v in t.items() if k.startswith("train/")}}
               for s, t in SCALARS.items()]  # fmt: skip
    history[1]["loss"] = 0.41
    (out / "trainer_state.json").write_text(
        json.dumps({"log_history": history, "logging_steps": 10})
    )
    _, info = _import("trl", out, tmp_path / "runs")
    checks = " | ".join(info.imported.cross_checks)
    assert (
        "differs from trainer_state.json at 1 of 9 values of the 3 steps both hold: loss at step 20 (0.41 vs"
        in checks
    )
    assert "has 1 step trainer_state.json lacks: step 33 (reward)" in checks
    assert "alone holds 1 metrics at the common steps: eval_loss" in checks


def test_missing_extra_is_named(tmp_path, monkeypatch):
    """Without TensorBoard the error names the extra and how to install it."""
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(b"\0" * 16)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setitem(sys.modules, "tensorboard.compat", None)
    monkeypatch.setitem(sys.modules, "tensorboard.compat.proto", None)
    with pytest.raises(
        ValueError,
        match=r"the optional 'tensorboard' extra.*pip install 'gspo-dash\[tensorboard\]'",
    ):
        importers.import_run("trl", f, root=tmp_path / "runs")


def test_verl_file_log_of_two_runs_ends_each_by_its_own_steps(tmp_path):
    """Steps 1-3, then 1-2 appended by a restart; the config beside (total_training_steps 3)
    was written by the last start: run 2 stopped at step 2 of 3; run 1's end is unknown (the
    config is not its own), not 'finished' because the file's largest step is 3."""
    rows = [(s, 0.1 * s) for s in (1, 2, 3)] + [(1, 0.2), (2, 0.3)]
    f = tmp_path / "exp.jsonl"
    f.write_text(
        "".join(json.dumps({"step": s, "data": {"critic/score/mean": r}}) + "\n" for s, r in rows)
    )
    (tmp_path / "exp.config.json").write_text(
        json.dumps({"config": {"trainer": {"total_training_steps": 3}}})
    )
    df1, one = _import("verl", f, tmp_path / "runs", segment=1)
    df2, two = _import("verl", f, tmp_path / "runs", segment=2)
    assert list(df1[Step.REWARD_MEAN]) == [0.1, 0.2, 0.30000000000000004]
    assert list(df2[Step.REWARD_MEAN]) == [0.2, 0.3]
    assert one.imported.source_finished is None and one.imported.settings_files == ()
    assert two.imported.source_finished is False


def test_verl_console_in_a_wandb_run_stopped_far_before_its_bar_total(tmp_path):
    """A verl console in a W&B run folder that prints no 'Total training steps' line: its
    Training Progress bar (19/55990, then 238/55990) plans 55,990 steps; step lines up to 238
    and no 'Final validation metrics': stopped early, the basis citing the bar; the summary's
    training/global_step agrees."""
    files = tmp_path / "wandb" / "run-20260101_000000-v1" / "files"
    files.mkdir(parents=True)
    out = [TASK + "Training Progress:   0%|          | 19/55990 [00:10<99:00:00,  1.9s/it]"]
    for step in range(20, 239):
        out.append(TASK + f"step:{step} - critic/score/mean:{step / 1000} - timing_s/step:2.0")
        out.append(
            TASK + f"Training Progress:   0%|          | {step}/55990 [00:{step % 60:02d}<9:00]"
        )
    (files / "output.log").write_text("\n".join(out) + "\n", encoding="utf-8")
    (files / "wandb-summary.json").write_text(json.dumps({"training/global_step": 238}))
    df, info = _import("verl", tmp_path, tmp_path / "runs")
    assert list(df.index) == list(range(20, 239))
    rec = info.imported
    assert info.status == "stopped early"
    assert rec.planned_end == {
        "steps": 55990,
        "epochs": None,
        "from": f"the Training Progress bar, line {len(out)}: 238/55990",
    }
    assert rec.status_basis == (
        f"planned 55,990 steps (the Training Progress bar, line {len(out)}: 238/55990); reached "
        f"step 238 (the Training Progress bar, line {len(out)}: 238/55990); no end-of-training line"
    )
    done = out + [TASK + "step:239 - critic/score/mean:0.5", TASK + "Final validation metrics: {}"]
    (files / "output.log").write_text("\n".join(done) + "\n", encoding="utf-8")
    _, info = _import("verl", tmp_path, tmp_path / "runs2")
    assert info.status == "finished"
    assert info.imported.status_basis.endswith(
        f"'Final validation metrics' at line {len(done)} (verl prints it at its last step); it "
        "ended before its planned end"
    )
