"""The lag split: declared policy_lag first, else measured from the ratios, else unknown."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from training_hooks.findings import lag
from training_hooks.schema import Step


def _table(policy_lag, ratio_max) -> pd.DataFrame:
    return pd.DataFrame(
        {
            Step.STEP: np.arange(len(ratio_max)) + 10,
            Step.POLICY_LAG: pd.array(policy_lag, dtype="Int64"),
            Step.TOKEN_LOG_RATIO_ABS_MAX: np.asarray(ratio_max, float),
        }
    )


def test_declared_lag_wins_over_the_ratio():
    """policy_lag 0 is on-policy even with ratios far from 1 (a sampler mismatch), >= 1 is off-policy
    even with ratios exactly 1 (stale old log-probs): the declaration is what the loop did."""
    df = _table([0, 1, 0, 2], [0.3, 0.0, 0.0, 0.5])
    assert lag.step_lag_classes(df).tolist() == ["on", "off", "on", "off"]
    s = lag.lag_split(df)
    assert s.source == lag.DECLARED and (s.n_on, s.n_off, s.n_unknown) == (2, 2, 0)
    assert s.lag == (0, 1, 0, 2) and s.has_both
    assert s.steps(lag.OFF_POLICY).tolist() == [11, 13]
    assert s.describe() == "lag declared (policy_lag): 2 on-policy, 2 off-policy steps"


def test_measured_lag_uses_float_noise_tolerance():
    """No policy_lag: max |token log-ratio| 0 and 1e-5 (= the tolerance) are on, 1.1e-5 and 0.2 are
    off, NaN is unknown."""
    df = _table([None] * 5, [0.0, 1e-5, 1.1e-5, 0.2, np.nan])
    assert lag.step_lag_classes(df).tolist() == ["on", "on", "off", "off", None]
    s = lag.lag_split(df)
    assert s.source == lag.MEASURED and (s.n_on, s.n_off, s.n_unknown) == (2, 2, 1)
    assert s.mask(lag.ALL).tolist() == [True] * 5  # unknown steps only in "all"
    assert s.mask(lag.ON_POLICY).tolist() == [True, True, False, False, False]
    assert "1 unknown" in s.describe() and s.describe().startswith("lag measured")


def test_mixed_unknown_and_invalid():
    """Declared on some rows and measured on others is MIXED; a negative lag is invalid (unknown);
    no lag and no ratio column at all is UNKNOWN; an empty table is UNKNOWN with no steps."""
    df = _table([0, None, -1], [0.5, 0.5, np.nan])
    assert lag.step_lag_classes(df).tolist() == ["on", "off", None]
    assert lag.lag_split(df).source == lag.MIXED
    bare = pd.DataFrame({Step.STEP: [0, 1], Step.LOSS: [0.1, 0.2]})
    s = lag.lag_split(bare)
    assert s.source == lag.UNKNOWN and s.lag_class == (None, None) and not s.has_both
    empty = lag.lag_split(pd.DataFrame(columns=[Step.STEP]))
    assert empty.source == lag.UNKNOWN and empty.step == ()


def test_alternating_minibatches_measured():
    """The demo's pattern: 2 minibatches per rollout, the first has ratio exactly 1."""
    df = _table([None] * 6, [0.0, 0.7, 0.0, 0.4, 0.0, 1.3])
    s = lag.lag_split(df)
    assert s.steps(lag.ON_POLICY).tolist() == [10, 12, 14]
    assert s.steps(lag.OFF_POLICY).tolist() == [11, 13, 15]
    assert s.has_both and s.source == lag.MEASURED


def test_bad_subset_is_a_value_error():
    with pytest.raises(ValueError, match="subset must be one of"):
        lag.lag_split(_table([0], [0.0])).mask("offpolicy")
