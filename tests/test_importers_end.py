"""How an import says its run ended (``importers._end``), what it kept of cut records
(``findings.records``), and how both reach the pages: hand-made cases, each verdict worked out
in its docstring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from training_hooks import schema
from training_hooks.findings import INFO, WARNING, RunFacts, run_health
from training_hooks.findings.core import Coverage
from training_hooks.findings.records import RECORDS_CUT, check_records_cut
from training_hooks.importers._end import (
    Evidence,
    Planned,
    Reached,
    from_epochs,
    from_settings,
    judge,
)
from training_hooks.schema import Step
from training_hooks.tool_settings import Setting

BAR = Planned(55990, "the Training Progress bar, line 412: 19/55990")


def test_far_below_its_planned_end_without_an_end_line_is_stopped_early():
    """Planned 55,990, the bar's count 238, no end line: 55,752 steps short, stopped early, and
    the sentence cites both sources."""
    ev = Evidence((BAR,), (Reached(238, "the Training Progress bar, line 9000: 238/55990", True),))
    got = judge(ev)
    assert got.finished is False and got.planned == BAR
    assert got.text == (
        "planned 55,990 steps (the Training Progress bar, line 412: 19/55990); reached step 238 "
        "(the Training Progress bar, line 9000: 238/55990); no end-of-training line"
    )


def test_reaching_the_plan_or_an_end_line_is_finished():
    """At (or past) the plan: finished; below it but with an end-of-training line (an early
    stopping callback returns from train()): finished, and it says it ended early."""
    plan = Planned(500, "trainer_state.json: max_steps")
    done = judge(Evidence((plan,), (Reached(500, "global_step", True),), end_expected=False))
    assert done.finished is True and done.text.endswith("reached step 500 (global_step)")
    early = judge(Evidence((plan,), (Reached(300, "global_step", True),), "the end row"))
    assert early.finished is True and early.text.endswith("; it ended before its planned end")


@pytest.mark.parametrize(
    ("last", "exact", "finished"),
    [
        (491, False, None),  # 9 short with rows every 10: the last window may hold the end
        (490, False, False),  # 10 short: a whole window unlogged, no end line
        (499, True, False),  # the trainer's own count says 499: one step short
    ],
)
def test_a_logging_window_before_the_end_is_not_a_verdict(last, exact, finished):
    """Rows every 10 steps: a last logged step 491 of 500 may be a run that finished (steps
    492-500 unlogged): unknown; 490 is a whole window short: stopped early; an exact counter
    at 499 is short whatever the window."""
    ev = Evidence((Planned(500, "max_steps"),), (Reached(last, "row", exact),), window=10)
    assert judge(ev).finished is finished


def test_no_planned_end_is_unknown_never_finished():
    """Nothing gives the plan: unknown, saying what was looked for; an end line alone: finished."""
    got = judge(Evidence((), (Reached(99, "its last line"),)))
    assert got.finished is None and got.text.startswith(
        "no source gives the planned end (max_steps"
    )
    assert judge(Evidence((), (Reached(99, "x"),), "train_runtime at line 9")).finished is True


def test_planned_epochs_scale_by_the_logged_epoch():
    """3 epochs, the last row at step 250 and epoch 0.5 (500 steps an epoch): planned ≈ 1,500
    steps; 250 is far short: stopped early. 1 epoch with step 100 at epoch 0.999 (printed
    digits): ≈ 100 steps, reached within the 1% an estimate is good to: finished."""
    p = from_epochs(3, "config.yaml: num_train_epochs", 250, 0.5)
    assert (
        p.steps == 1500
        and p.text() == "planned 3 epochs ≈ 1,500 steps (config.yaml: num_train_epochs)"
    )
    assert judge(Evidence((p,), (Reached(250, "row"),))).finished is False
    one = from_epochs(1, "args", 100, 0.999)
    assert one.steps == 100 and judge(Evidence((one,), (Reached(99, "row"),))).finished is True


def test_settings_give_steps_before_epochs():
    """TRL runs epochs only when max_steps is not set (-1): max_steps wins, -1 is no plan."""
    both = {
        "max_steps": Setting(400, "config.yaml: max_steps"),
        "num_train_epochs": Setting(3.0, "config.yaml: num_train_epochs"),
    }
    assert from_settings(both, 10, 0.1) == [Planned(400, "config.yaml: max_steps")]
    epochs_only = {**both, "max_steps": Setting(-1, "config.yaml: max_steps")}
    assert from_settings(epochs_only, 10, 0.1) == [
        Planned(300, "config.yaml: num_train_epochs", 3.0)
    ]
    assert from_settings({"total_training_steps": Setting(None, "x")}, 10, None) == []


def _cut_record(n_cut: int, rows: int) -> schema.ImportRecord:
    cut = tuple(
        {"line": 100 + k, "step": 10 * (k + 1), "kept": 30, "reason": "cut at 4,096 characters"}
        for k in range(n_cut)
    )
    return schema.ImportRecord(tool="verl", format="verl console", rows=rows, records_cut=cut)


@pytest.mark.parametrize(("n_cut", "rows", "severity"), [(23, 238, WARNING), (2, 100, INFO)])
def test_records_cut_by_share(n_cut, rows, severity):
    """23 of 238 records cut is 9.7%, above the 5% that warns; 2 of 100 is a note. The evidence
    counts them, says what each keeps and names the steps and lines."""
    cov = Coverage()
    (f,) = check_records_cut(pd.DataFrame(), None, RunFacts(imported=_cut_record(n_cut, rows)), cov)
    assert f.code == RECORDS_CUT and f.severity == severity
    assert f.evidence.startswith(
        f"{n_cut} of the {rows} records read were cut or damaged (cut at 4,096 characters): each keeps the 30 metrics before its cut"
    )
    assert f.steps[:2] == (10, 20) and "line 100, 101" in f.evidence
    assert cov.checked["records read whole"] == f"{n_cut} of {rows} records cut"


def test_records_cut_is_silent_on_whole_imports_and_recorded_runs():
    """An import with nothing cut: checked, no finding; a recorded run: not an import, no line."""
    cov = Coverage()
    assert check_records_cut(pd.DataFrame(), None, RunFacts(imported=_cut_record(0, 50)), cov) == []
    assert cov.checked == {"records read whole": ""}
    cov = Coverage()
    assert check_records_cut(pd.DataFrame(), None, RunFacts(), cov) == [] and not cov.checked


def test_records_cut_reaches_the_health_report():
    """The registered check runs on the Health page's route (``run_health``)."""
    df = pd.DataFrame({Step.STEP: np.arange(1, 11), Step.REWARD_MEAN: np.linspace(0, 1, 10)})
    report = run_health(df, RunFacts(imported=_cut_record(3, 10)))
    codes = {f.code: f.severity for f in report.findings}
    assert codes[RECORDS_CUT] == WARNING and "records read whole" in report.checked


def test_the_pages_say_the_status_basis_and_the_cut_records():
    """The provenance lines (Health's card, the Runs page) and the problems line carry the
    status with its sources, the step axis and the cut records."""
    from app.discovery import import_problems
    from app.provenance import source_lines

    rec = schema.ImportRecord(
        tool="verl",
        format="verl console",
        source_finished=False,
        stopped_early="planned 700 steps (x); reached step 699 (y)",
        status_basis="planned 700 steps (x); reached step 699 (y)",
        records_cut=({"line": 12, "kept": 30, "reason": "cut"},),
        step_axis="record index: the k-th training record",
    )
    info = schema.RunInfo(run_id="r", name="r", algorithm="grpo", imported=rec, source="verl")
    lines = source_lines(info)
    assert "Status: stopped early (planned 700 steps (x); reached step 699 (y))." in lines
    assert "Step axis: record index: the k-th training record." in lines
    assert (
        "Records cut: 1 record cut or damaged, kept by the metrics before the cut (the rest of "
        "each is missing): line 12." in lines
    )
    problems = import_problems(rec)
    assert any(p.startswith("import: 1 record cut or damaged") for p in problems)
    assert "import: its step axis is a record index: the k-th training record" in problems


def test_sources_that_disagree_are_named():
    """The bar plans 500, max_steps says 400: the first trusted (the bar) decides and the other
    is named; an epoch estimate 2 steps off (its printed digits) is no disagreement."""
    ev = Evidence(
        (
            Planned(500, "the progress bar, line 9: 500/500"),
            Planned(400, "config.yaml: max_steps"),
            Planned(502, "config.yaml: num_train_epochs", 1.0),
        ),
        (Reached(500, "the progress bar, line 9: 500/500", True),),
    )
    assert judge(ev).text.endswith(
        "; other sources differ: planned 400 steps (config.yaml: max_steps)"
    )


# ------------------------------------------------- where a TRL state was saved (issue 44)


def _ckpt(folder, step, max_steps=300, *, save_steps=50, stop=False, summary=False):
    """A Trainer state at ``step`` (rows every 10 steps up to it) in ``folder``, as
    ``_save_checkpoint`` writes it (``TrainerControl`` with should_training_stop ``stop``); with
    ``summary`` the end-of-training row train() logs when it returns."""
    import json

    rows = [{"step": s, "loss": 0.01 * s, "reward": 0.5} for s in range(10, step + 1, 10)]
    if summary:
        rows.append({"step": step, "train_runtime": 123.0, "train_loss": 0.1})
    control = {"args": {"should_save": True, "should_training_stop": stop}, "attributes": {}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(
        json.dumps(
            {
                "log_history": rows,
                "global_step": step,
                "max_steps": max_steps,
                "save_steps": save_steps,
                "logging_steps": 10,
                "stateful_callbacks": {"TrainerControl": control},
            }
        )
    )
    return folder / "trainer_state.json"


def _status(tmp_path, path):
    """run.json's status and its basis for an import of ``path``, and Health's status notes."""
    from training_hooks import findings, importers

    res = importers.import_run("trl", path, root=tmp_path / "runs", replace=True)
    info = schema.read_run_info(res["run_dir"])
    notes = findings.check_status(
        info.status,
        None,
        info.last_step,
        0.0,
        info.imported.stopped_early,
        info.imported.status_basis,
    )
    return info.status, info.imported.status_basis, notes


def test_a_lone_mid_run_checkpoint_is_unknown_and_says_why(tmp_path):
    """checkpoint-100/ of max_steps 300, should_training_stop false, nothing beside it: the
    Trainer saved it while training ran, so it shows the run reached 100, not that it stopped
    there: "unknown" (was "stopped early"), and Health's note gives the step and the plan."""
    status, basis, notes = _status(tmp_path, _ckpt(tmp_path / "out" / "checkpoint-100", 100))
    assert status == "unknown"
    assert basis == (
        "planned 300 steps (trainer_state.json: max_steps); reached step 100 "
        "(trainer_state.json: global_step); checkpoint-100/ is a checkpoint, saved while "
        "training ran: the run reached step 100 of its planned 300; whether it went on is not "
        "in this folder (a later checkpoint-N/, the output folder's own trainer_state.json or "
        "the run's console log would say)"
    )
    (note,) = notes
    assert note.code == "end_unknown" and note.severity == INFO
    assert note.evidence == basis + "; its last step here is 100."


def test_an_unknown_end_advises_no_other_tools_files():
    """A JSON-lines log that states no end (basis "the log does not say"): the note's advice
    names no TRL file (no checkpoint-N/, no trainer_state.json: this log has neither)."""
    from training_hooks import findings

    (note,) = findings.check_status("unknown", None, 58, 0.0, None, "the log does not say")
    assert note.code == "end_unknown"
    assert note.evidence == "the log does not say; its last step here is 58."
    assert "checkpoint" not in note.advice and "trainer_state" not in note.advice
    assert "a later or fuller log of the same run" in note.advice


def test_a_later_checkpoint_that_reached_the_plan_makes_it_finished(tmp_path):
    """checkpoint-100/ read with checkpoint-300/ (global_step 300 = max_steps) beside it: the
    run reached its planned end: finished, citing the later checkpoint and saying this file
    holds steps up to 100 only."""
    out = tmp_path / "out"
    _ckpt(out / "checkpoint-300", 300, stop=True)
    status, basis, notes = _status(tmp_path, _ckpt(out / "checkpoint-100", 100))
    assert status == "finished" and notes == []
    assert "reached step 300 (a later checkpoint, checkpoint-300/trainer_state.json)" in basis
    assert "this file (checkpoint-100/) holds the steps up to 100" in basis


def test_the_output_folders_own_state_with_the_end_row_makes_it_finished(tmp_path):
    """The output folder's trainer_state.json (Trainer.save_state after train()) holds the
    end-of-training row: training returned, so the run finished although the checkpoint read
    stops at 100 of 300 (here 300 = its global_step too)."""
    out = tmp_path / "out"
    _ckpt(out, 300, summary=True)
    status, basis, _ = _status(tmp_path, _ckpt(out / "checkpoint-100", 100))
    assert status == "finished"
    assert "the end-of-training row (train_runtime) of out/trainer_state.json" in basis


def test_several_checkpoints_every_save_steps_short_of_the_plan_stopped_early(tmp_path):
    """checkpoints 100, 150 and 200 of max_steps 300, every save_steps 50: a run that reached 250
    would have saved checkpoint-250 (a save_total_limit deletes the oldest, never the newest),
    so the run stopped between 200 and 250: stopped early, read from the newest (the folder)."""
    out = tmp_path / "out"
    for s in (100, 150, 200):
        _ckpt(out / f"checkpoint-{s}", s)
    status, basis, notes = _status(tmp_path, out)
    assert status == "stopped early" and [n.code for n in notes] == ["stopped_early"]
    assert basis.endswith(
        "the output folder out/ holds checkpoints 100, 150, 200 (every save_steps 50), the "
        "newest 200: a run that reached step 250 would have saved checkpoint-250, so it stopped "
        "between 200 and 250"
    )


@pytest.mark.parametrize(
    ("steps", "save_steps", "max_steps"),
    [
        ((100, 200), 100, 250),  # the next save (300) falls past the plan: the end is unsaved
        ((100, 150), 40, 300),  # 150 is not a multiple of save_steps 40: not saved every 40
    ],
)
def test_checkpoints_that_prove_no_stop_leave_it_unknown(tmp_path, steps, save_steps, max_steps):
    """The save rule proves a stop only where the next save falls within the plan and the
    checkpoints are every save_steps apart; otherwise the newest is a mid-run save: unknown."""
    out = tmp_path / "out"
    for s in steps:
        _ckpt(out / f"checkpoint-{s}", s, max_steps, save_steps=save_steps)
    status, basis, _ = _status(tmp_path, out)
    assert status == "unknown"
    assert f"checkpoint-{steps[-1]}/ is a checkpoint, saved while training ran" in basis


def test_a_state_outside_a_checkpoint_folder_is_the_runs_last_word(tmp_path):
    """trainer_state.json in a plain folder, 100 of 300, no end-of-training row: read as the
    state the run stopped in (stopped early), as before."""
    status, basis, _ = _status(tmp_path, _ckpt(tmp_path / "run", 100))
    assert status == "stopped early"
    assert basis == (
        "planned 300 steps (trainer_state.json: max_steps); reached step 100 "
        "(trainer_state.json: global_step)"
    )


def test_should_training_stop_below_the_plan_is_an_end(tmp_path):
    """A lone checkpoint-100/ of 300 saved with should_training_stop true: a callback was
    stopping training there (early stopping): finished, ended before its planned end."""
    status, basis, _ = _status(tmp_path, _ckpt(tmp_path / "out" / "checkpoint-100", 100, stop=True))
    assert status == "finished"
    assert basis.endswith(
        "trainer_state.json: TrainerControl.should_training_stop true (the Trainer was "
        "stopping); it ended before its planned end"
    )


def test_points_the_logger_dropped_are_no_cut_records():
    """W&B's "this data will be ignored" entries (``dropped``) are the run's logger's loss, not
    records the import cut: the pages say them as dropped log calls, and count the cut ones
    apart (a .wandb with 94 refused log calls said "94 records cut or damaged")."""
    from app.discovery import import_problems
    from app.provenance import source_lines

    dropped = tuple(  # two calls at step 0 (each step named once)
        {"line": 500 + k, "step": 5 * max(k - 1, 0), "kept": 0, "dropped": True, "reason": "W&B"}
        for k in range(4)
    )
    rec = schema.ImportRecord(
        tool="jsonl",
        format="x",
        records_cut=({"line": 7, "kept": 4, "reason": "cut"}, *dropped),
    )
    info = schema.RunInfo(run_id="r", name="r", algorithm="grpo", imported=rec, source="jsonl")
    lines = source_lines(info)
    assert (
        "Records cut: 1 record cut or damaged, kept by the metrics before the cut (the rest of "
        "each is missing): line 7." in lines
    )
    assert (
        "Points dropped: 4 log calls dropped by the run's logger (none of their values written; "
        "Health's steps_dropped): at steps 0, 5, 10 (console line 500, 501, 502, 503)." in lines
    )
    problems = import_problems(rec)
    assert "import: 1 record cut or damaged" in " ".join(problems)
    only_dropped = schema.ImportRecord(tool="jsonl", format="x", records_cut=dropped)
    only = schema.RunInfo(
        run_id="r", name="r", algorithm="grpo", imported=only_dropped, source="jsonl"
    )
    assert not any(x.startswith("Records cut") for x in source_lines(only))
    assert not any("cut or damaged" in p for p in import_problems(only_dropped))


def test_no_wall_time_is_said_in_words():
    """run.json's "null" wall time (no time in the log) reads "none" on the pages, not JSON."""
    from app.provenance import source_lines

    def lines(text: str) -> list[str]:
        rec = schema.ImportRecord(tool="csv", format="x", wall_time=text)
        info = schema.RunInfo(run_id="r", name="r", algorithm="grpo", imported=rec, source="csv")
        return source_lines(info)

    assert "Wall time: none (the log holds no time the import reads)." in lines("null")
    assert "Wall time: none: the log has no step_time." in lines("null: the log has no step_time")
    assert "Wall time: x: each row's _timestamp." in lines("x: each row's _timestamp")
