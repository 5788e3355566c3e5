"""A table's non-finite numbers as text: "NaN", "+inf", "-inf".

Streamlit hands a DataFrame to the browser through Arrow, which stores a float NaN as a null, and
the grid draws a null as "None": a NaN log-ratio would read as a missing value. A column that holds
a non-finite value is therefore shown as text, each finite value in the column's own number format
and each non-finite one by name (a column may name its NaN: a NaN reward is "unscored (NaN)").
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd


def number_text(x: object, fmt: str | None = None, nan: str = "NaN") -> str:
    """``x`` in the printf-style ``fmt`` ("%.3e"; None: up to 6 significant digits), a NaN as
    ``nan``, ±inf as "+inf" / "-inf", a null (None, pd.NA) as "" (not recorded)."""
    if x is None or x is pd.NA:
        return ""
    v = float(x)  # type: ignore[arg-type]
    if math.isnan(v):
        return nan
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    return fmt % v if fmt else f"{v:.6g}"


def nonfinite_as_text(
    view: pd.DataFrame,
    formats: Mapping[str, str | None],
    nan_names: Mapping[str, str] | None = None,
    optional: Collection[str] = (),
) -> tuple[pd.DataFrame, list[str]]:
    """``view`` with each numeric column of ``formats`` that holds a NaN or ±inf as text
    (``number_text`` with its format; ``nan_names[column]`` names its NaN), and those columns'
    names. Other columns are left as numbers (they sort as numbers). A column of ``optional``
    (a value the run may not have given: its NaN means "not given") that is NaN in every row is
    left alone: not recorded, not a NaN."""
    out = view.copy()
    changed = []
    for column, fmt in formats.items():
        if column not in out.columns or out[column].dtype.kind not in "fiu":
            continue
        values = out[column].to_numpy(np.float64, na_value=np.nan)
        if np.isfinite(values).all() or (column in optional and np.isnan(values).all()):
            continue
        nan = (nan_names or {}).get(column, "NaN")
        out[column] = [number_text(v, fmt, nan) for v in values]
        changed.append(column)
    return out, changed
