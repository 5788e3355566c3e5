"""Policy lag per step: on-policy or off-policy, declared by the loop or measured from the ratios.

Pure pandas/numpy, no Streamlit, no torch: read by the Health checks (here and in the recorder)
and by the chart pages (``app`` imports it from here).

A step is **on-policy** when the policy that sampled its batch (``old_logprobs``) is the policy being
updated, so every ratio is 1 by construction and clip fractions and KL old→new are 0; it is
**off-policy** when the policy has already moved (a batch reused for a second minibatch or epoch).

- Declared: ``Step.POLICY_LAG`` (optimizer steps since the policy that produced ``old_logprobs``)
  where the loop or the source gave it: 0 -> on, >= 1 -> off.
- Measured, where the lag is null: on when every token log-ratio of the step is within float noise
  of 0, ``token_log_ratio_abs_max <= MEASURED_ON_TOL``; off above it. A sampler/trainer mismatch
  (ratios near but not exactly 1 at lag 0) therefore reads as off-policy when the lag is not
  declared: only a declared lag tells the two apart.
- Unknown (``None``) when neither is there (most imported runs).

``lag_split(df)`` returns a ``LagSplit``: each step's class and the run's verdict (declared /
measured / mixed / unknown, and whether it has both kinds). The pages offer ``SUBSETS`` and
take ``split.mask(subset)`` (a boolean array over the table's rows) or ``split.steps(subset)``
(the step numbers, to filter a per-sequence table).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from training_hooks.schema import Step

ON = "on"
OFF = "off"

#: max |token log-ratio| at or below this reads as "every ratio exactly 1" (value, unit, source):
#: 1e-5 nats; float32 spacing at a log-prob of magnitude 64 is 2**-17 = 7.6e-6, so two float32
#: log-probs of one token from the same weights differ by less than this for any probability above
#: e**-64. The demo's on-policy steps measure exactly 0; its off-policy steps 0.1 to 1.3.
MEASURED_ON_TOL = 1e-5

DECLARED = "declared"  # every classified step has a policy_lag
MEASURED = "measured"  # every classified step was classified by its ratios
MIXED = "mixed"  # some declared, some measured
UNKNOWN = "unknown"  # no step could be classified

ALL = "all"
ON_POLICY = "on-policy"
OFF_POLICY = "off-policy"
SUBSETS = (ALL, ON_POLICY, OFF_POLICY)  # the "steps" control of the chart pages


def _numeric(df: pd.DataFrame, column: str) -> np.ndarray:
    if column not in df.columns:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[column], errors="coerce").to_numpy(np.float64, na_value=np.nan)


def steps_of(df: pd.DataFrame) -> np.ndarray:
    """Each row's step number (-1 where it is not one; the row numbers without a step column)."""
    if Step.STEP in df.columns:
        return pd.to_numeric(df[Step.STEP], errors="coerce").fillna(-1).to_numpy(np.int64)
    return np.arange(len(df))


def _declared_lags(df: pd.DataFrame) -> np.ndarray:
    """``policy_lag`` as float (NaN where null or invalid: negative or not an integer)."""
    lag = _numeric(df, Step.POLICY_LAG)
    bad = ~np.isfinite(lag) | (lag < 0) | (lag != np.round(lag))
    return np.where(bad, np.nan, lag)


def step_lag_classes(df: pd.DataFrame) -> pd.Series:
    """Each row's class: ``ON``, ``OFF`` or ``None`` (unknown), on ``df``'s index.

    Declared ``policy_lag`` first (0 on, >= 1 off); else measured: ``token_log_ratio_abs_max <=
    MEASURED_ON_TOL`` on, above it off; else None."""
    lag = _declared_lags(df)
    ratio = np.abs(_numeric(df, Step.TOKEN_LOG_RATIO_ABS_MAX))
    out = np.full(len(df), None, dtype=object)
    measured = np.isnan(lag) & np.isfinite(ratio)
    out[measured & (ratio <= MEASURED_ON_TOL)] = ON
    out[measured & (ratio > MEASURED_ON_TOL)] = OFF
    out[lag == 0] = ON
    out[lag >= 1] = OFF
    # ``np.dtype(object)``, not ``object``: pandas resolves a bare ``object`` inside
    # ``warnings.catch_warnings()``, which resets the process's show-once registry from the
    # recorder's findings thread (issue 45).
    return pd.Series(out, index=df.index, name="lag_class", dtype=np.dtype(object))


@dataclass(frozen=True)
class LagSplit:
    """A run's steps split by policy lag (one entry per row of the step table, in its order)."""

    step: tuple[int, ...]  # the step number of each row
    lag_class: tuple[str | None, ...]  # ON, OFF or None (unknown)
    lag: tuple[int | None, ...]  # the declared policy_lag, None where not declared
    source: str  # DECLARED, MEASURED, MIXED or UNKNOWN

    @cached_property
    def _classes(self) -> np.ndarray:
        return np.array(self.lag_class, dtype=object)

    @property
    def n_on(self) -> int:
        return int((self._classes == ON).sum())

    @property
    def n_off(self) -> int:
        return int((self._classes == OFF).sum())

    @property
    def n_unknown(self) -> int:
        return len(self.lag_class) - self.n_on - self.n_off

    @property
    def has_both(self) -> bool:
        """The run has on-policy and off-policy steps (the charts then default to off-policy for
        the clip and KL old→new panels)."""
        return self.n_on > 0 and self.n_off > 0

    def mask(self, subset: str) -> np.ndarray:
        """Boolean mask over the rows for ``subset`` in ``SUBSETS`` (unknown steps only in ALL)."""
        if subset == ALL:
            return np.ones(len(self.lag_class), bool)
        if subset not in SUBSETS:
            raise ValueError(f"subset must be one of {SUBSETS}, got {subset!r}")
        return self._classes == (ON if subset == ON_POLICY else OFF)

    def steps(self, subset: str) -> np.ndarray:
        """The step numbers in ``subset`` (to filter a per-sequence or per-token table)."""
        return np.asarray(self.step, np.int64)[self.mask(subset)]

    def describe(self) -> str:
        """One sentence for a caption, e.g. "lag measured: 120 on-policy, 120 off-policy steps"."""
        how = {
            DECLARED: "lag declared (policy_lag)",
            MEASURED: f"lag measured (on-policy: every token |log-ratio| ≤ {MEASURED_ON_TOL:g})",
            MIXED: "lag declared on some steps, measured on the others",
            UNKNOWN: "lag unknown (no policy_lag, no token log-ratios)",
        }[self.source]
        parts = [f"{self.n_on} on-policy", f"{self.n_off} off-policy"]
        if self.n_unknown:
            parts.append(f"{self.n_unknown} unknown")
        return f"{how}: {', '.join(parts)} steps"


def _ints_or_none(values: np.ndarray) -> tuple[int | None, ...]:
    """Each value as an int, NaN as None (vectorised: a step table has thousands of rows)."""
    nan = np.isnan(values)
    if nan.all():
        return (None,) * len(values)
    if np.abs(values[~nan]).max() >= 2.0**62:  # past int64: one by one
        return tuple(None if np.isnan(v) else int(v) for v in values.tolist())
    out: list[int | None] = list(np.where(nan, 0, values).astype(np.int64).tolist())
    for i in np.flatnonzero(nan).tolist():
        out[i] = None
    return tuple(out)


def lag_split(df: pd.DataFrame) -> LagSplit:
    """The ``LagSplit`` of a step table (columns ``Step.*``; any row order)."""
    classes = step_lag_classes(df)
    lag = _declared_lags(df)
    known = classes.notna().to_numpy()
    declared = np.isfinite(lag)
    if not known.any():
        source = UNKNOWN
    elif declared[known].all():
        source = DECLARED
    elif not declared[known].any():
        source = MEASURED
    else:
        source = MIXED
    return LagSplit(
        step=tuple(steps_of(df).tolist()),
        lag_class=tuple(classes.tolist()),
        lag=_ints_or_none(lag),
        source=source,
    )
