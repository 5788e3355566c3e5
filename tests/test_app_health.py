"""Health findings on hand-made step tables: each check fires on its case and stays quiet otherwise."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app import health
from training_hooks.schema import Step

N = 200


def _healthy(n: int = N, seed: int = 0) -> pd.DataFrame:
    """A GSPO-ish run with nothing wrong: ratios move a little, ~15% sequence clipping."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            Step.STEP: np.arange(n),
            Step.LOSS: rng.normal(0, 0.01, n),
            Step.REWARD_MEAN: np.linspace(0.2, 0.6, n),
            Step.SEQ_LOG_RATIO_MEAN: rng.normal(0, 1e-5, n),
            Step.SEQ_LOG_RATIO_MIN: -4e-4 + rng.normal(0, 2e-5, n),
            Step.SEQ_LOG_RATIO_MAX: 4e-4 + rng.normal(0, 2e-5, n),
            Step.TOKEN_LOG_RATIO_ABS_MAX: 0.3 + rng.normal(0, 0.01, n),
            Step.SEQ_CLIP_FRACTION: 0.15 + rng.normal(0, 0.01, n),
            Step.TOKEN_CLIP_FRACTION: 0.002 + np.abs(rng.normal(0, 1e-4, n)),
            Step.ZERO_VARIANCE_FRACTION: np.full(n, 0.2),
            Step.LENGTH_MEAN: 200 + rng.normal(0, 5, n),
            Step.TRUNCATED_FRACTION: np.full(n, 0.01),
            Step.KL_REF_MEAN: 0.01 + rng.normal(0, 1e-3, n),
            Step.KL_OLD_MEAN: 1e-4 + np.abs(rng.normal(0, 1e-5, n)),
            Step.NONFINITE_COUNT: np.zeros(n, np.int64),
        }
    )


def _titles(found):
    return [f.title for f in found]


def _findings(df, algorithm="gspo", status="finished", **kw):
    return health.run_findings(
        df, algorithm=algorithm, status=status, seq_eps=(3e-4, 4e-4), token_eps=(0.2, 0.2), **kw
    )


def test_healthy_run_is_ok():
    """A healthy GSPO run gets exactly one OK finding."""
    found = _findings(_healthy())
    assert [f.severity for f in found] == [health.OK], _titles(found)


def test_ratios_identically_one():
    """All log-ratios exactly 0 -> the on-policy warning (and GSPO 'almost never clips')."""
    df = _healthy()
    for c in (Step.SEQ_LOG_RATIO_MIN, Step.SEQ_LOG_RATIO_MAX, Step.TOKEN_LOG_RATIO_ABS_MAX):
        df[c] = 0.0
    df[Step.SEQ_CLIP_FRACTION] = 0.0
    found = _findings(df)
    assert "Ratios are identically 1" in found[0].title
    assert any("almost never clips" in t for t in _titles(found))
    # one token moving 1e-6 is enough to lift the verdict
    df.loc[7, Step.TOKEN_LOG_RATIO_ABS_MAX] = 1e-6
    assert health.check_on_policy(df) == []


def test_clip_fraction_out_of_range_per_algorithm():
    """GSPO at 60% sequence clipping and GRPO at 30% token clipping warn; GRPO at 2% does not."""
    df = _healthy()
    df[Step.SEQ_CLIP_FRACTION] = 0.6
    (f,) = health.check_clip_range(df, "gspo", (3e-4, 4e-4))
    assert f.severity == health.WARNING and "= 0.6 of sequences" in f.evidence
    assert "ε 3e-4/4e-4" in f.evidence
    df[Step.TOKEN_CLIP_FRACTION] = 0.3
    (f,) = health.check_clip_range(df, "grpo", (0.2, 0.2))
    assert "GRPO clips far more" in f.title
    df[Step.TOKEN_CLIP_FRACTION] = 0.02
    assert health.check_clip_range(df, "grpo", (0.2, 0.2)) == []
    # only the second half counts: a high start does not fire
    df[Step.SEQ_CLIP_FRACTION] = np.r_[np.full(N // 2, 0.9), np.full(N // 2, 0.15)]
    assert health.check_clip_range(df, "gspo") == []


def test_zero_variance_groups():
    """Median zero-variance share over the last quarter: 0.6 warns, 0.95 is an error, 0.4 is ok."""
    df = _healthy()
    df[Step.ZERO_VARIANCE_FRACTION] = 0.6
    assert health.check_zero_variance(df)[0].severity == health.WARNING
    df[Step.ZERO_VARIANCE_FRACTION] = 0.95
    (f,) = health.check_zero_variance(df)
    assert f.severity == health.ERROR and "95%" in f.evidence
    df[Step.ZERO_VARIANCE_FRACTION] = np.r_[np.full(N - 10, 0.95), np.full(10, 0.4)]
    assert health.check_zero_variance(df)[0].severity == health.ERROR  # last quarter is 50 steps
    df[Step.ZERO_VARIANCE_FRACTION] = 0.4
    assert health.check_zero_variance(df) == []


def test_kl_and_log_ratio_spikes():
    """A 50x KL old->new spike at step 123 and a log-ratio spike at 40 are named with their steps."""
    df = _healthy()
    df.loc[123, Step.KL_OLD_MEAN] = 5e-3
    df.loc[40, Step.SEQ_LOG_RATIO_MAX] = 0.05
    found = health.check_spikes(df)
    by = {f.title.split(" spikes")[0]: f for f in found}
    assert set(by) == {"KL old→new", "sequence |log-ratio|"}
    assert by["KL old→new"].steps == (123,) and "step 123" in by["KL old→new"].evidence
    assert by["sequence |log-ratio|"].steps == (40,)
    assert health.check_spikes(_healthy()) == []


def test_length_collapse_blowup_and_truncation():
    """Median length 200 -> 80 collapses, 200 -> 500 blows up; 30% late truncation warns."""
    df = _healthy()
    df[Step.LENGTH_MEAN] = np.linspace(200, 80, N)
    assert _titles(health.check_lengths(df)) == ["Completion length collapsed"]
    df[Step.LENGTH_MEAN] = np.linspace(200, 500, N)
    assert _titles(health.check_lengths(df)) == ["Completion length blew up"]
    df[Step.LENGTH_MEAN] = 200.0
    df[Step.TRUNCATED_FRACTION] = np.r_[np.zeros(N - 20), np.full(20, 0.3)]
    assert _titles(health.check_lengths(df)) == ["Many completions are truncated"]


def test_nonfinite_values():
    """nonfinite_count > 0 at steps 5 and 9 and a NaN loss at 11 -> one error naming 5, 9, 11."""
    df = _healthy()
    df.loc[[5, 9], Step.NONFINITE_COUNT] = [3, 1]
    df.loc[11, Step.LOSS] = np.nan
    (f,) = health.check_nonfinite(df)
    assert f.severity == health.ERROR and f.steps == (5, 9, 11)
    assert "4 non-finite input values" in f.evidence and "loss is NaN/inf at 1 steps" in f.evidence
    # a metric that was never logged (all NaN, e.g. no ref model) is not a finding
    df2 = _healthy()
    df2[Step.KL_OLD_MEAN] = np.nan
    assert health.check_nonfinite(df2) == []


def test_crashed_and_failed_runs():
    """A crashed run (stale heartbeat) and a failed run are errors with the last step and age."""
    (f,) = health.check_status("crashed", updated_at=1000.0, last_step=41, now=1000.0 + 600)
    assert f.severity == health.ERROR and "10 min ago at step 41" in f.evidence
    assert "without finishing" in f.title
    (f,) = health.check_status("failed", 1000.0, 3, now=2000.0)
    assert f.severity == health.ERROR
    assert health.check_status("finished", 1000.0, 3, now=2000.0) == []
    found = _findings(_healthy(), status="crashed", updated_at=1.0, last_step=199, now=10_000.0)
    assert found[0].title == "Stopped without finishing (crashed)"
    assert health.OK not in [f.severity for f in found]


def test_empty_table():
    """An empty step table gives an info finding, no exception."""
    found = _findings(pd.DataFrame(columns=[Step.STEP]))
    assert "No steps recorded yet" in _titles(found)
