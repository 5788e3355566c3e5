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
