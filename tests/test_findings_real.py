"""Health on real logs of other people's runs (../shared/real_logs/, imported into a tmp root;
skipped when absent): what it says it checked, and no verdict the log cannot carry."""

from __future__ import annotations

import pytest
from test_importers_real import real_logs_dir

from app import data, health, ui
from app.discovery import discover
from training_hooks import importers
from training_hooks.findings.core import LAG_UNKNOWN, ROWS_MIX

REAL = real_logs_dir()
pytestmark = pytest.mark.skipif(REAL is None, reason="../shared/real_logs/ is absent")

LOGS = {
    "tinker-arithmetic": ("tinker", "tinker/tinker-rl-lab-arithmetic/arithmetic_metrics.jsonl"),
    "tinker-reward-only": ("tinker", "tinker/cookbook-cog-rl-exp8/training_metrics.jsonl"),
    "verl-clip-sweep": (
        "verl",
        "verl/asycn-verl-clip-sweep/deepseek1.5b_sync_8gpu_clip_low0.2_high0.28_seed0.jsonl",
    ),
    "trl-0.23": ("trl", "trl/minesweeper-aaipl-srinath/checkpoint-500/trainer_state.json"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, health.HealthReport]:
    """Each log imported into one root and read as the Health page reads it."""
    root = tmp_path_factory.mktemp("real")
    for name, (tool, rel) in LOGS.items():
        if (REAL / rel).exists():
            importers.import_run(tool, REAL / rel, root=root, name=name)
    out = {}
    for run in discover(str(root)).runs:
        out[run.name] = ui.health_report(run, data.load_steps(run).df)
    return out


def _get(reports, name):
    if name not in reports:
        pytest.skip(f"{name} is not in real_logs")
    r = reports[name]
    return r, {f.code: f for f in r.findings}


def test_every_card_says_what_was_and_was_not_checked(reports):
    """Every run has both lines; Nothing unusual never stands without them."""
    assert reports
    for r in reports.values():
        assert r.checked_line().startswith("Checked: run status")
        assert r.not_checked_line().startswith("Not checked: ")
        assert r.not_checked  # no imported log carries every metric


def test_tinker_solved_task_is_saturated_not_an_error(reports):
    """Tinker's arithmetic run ends with every group all-correct (frac_all_good 1.0): the task is
    saturated (a note), not a zero-variance error. Its mismatch check read Tinker's own metric."""
    r, found = _get(reports, "tinker-arithmetic")
    assert health.ZERO_VARIANCE not in found
    f = found[health.TASK_SATURATED]
    assert f.severity == health.INFO and "env/all/by_group/frac_all_good" in f.evidence
    assert r.checked["sampler/trainer mismatch"] == "tinker optim/kl_sample_train_v2"
    assert r.not_checked["stale old log-probs"] == "token log-ratios not logged"


def test_reward_only_tinker_log_is_not_a_clean_bill(reports):
    r, found = _get(reports, "tinker-reward-only")
    assert found[health.OK_CODE].title == "Nothing unusual in the little that could be checked"
    assert list(r.checked) == ["run status", "non-finite values", "reward signal"]
    assert len(r.not_checked) >= 10


def test_verl_rows_that_mix_updates(reports):
    """verl's rows each average 4 mini-batch updates (one_update_per_row false in run.json): the
    clip share is judged as a lower bound with that said, clip_low is listed as not checked, and
    the mismatch finding names verl's rollout_corr/k3_kl."""
    r, found = _get(reports, "verl-clip-sweep")
    assert r.checked["clip share too high"] == ROWS_MIX + ": a lower bound"
    assert r.not_checked["clip share too low"] == ROWS_MIX
    assert r.not_checked["on- / off-policy steps"] == LAG_UNKNOWN
    f = found[health.SAMPLER_MISMATCH]
    assert f.evidence.startswith("verl rollout_corr/k3_kl (stored as sampler_kl_mean): median")
    assert "Each row spans several optimizer updates" in f.evidence


def test_trl_split_unknown_is_said(reports):
    """TRL logs frac_reward_zero_std but not which groups were solved: the finding says so."""
    r, found = _get(reports, "trl-0.23")
    f = found[health.ZERO_VARIANCE]
    assert "whether they are all-correct (solved) or all-wrong is not logged" in f.evidence
    assert r.checked["zero-variance groups"] == "solved / failed split not logged"
