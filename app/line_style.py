"""How a run's line looks on the step charts: its algorithm by line style, a sparse series by its
markers.

- GSPO solid, GRPO dashed, any other or unknown algorithm dotted: a run whose algorithm is not
  known is never drawn like one that is, and the legend names it ("algorithm unknown").
- A panel's second column (the p90 of the length panel) is open triangles, never a line: no
  line style (the unknown algorithm's dotted one included) can read as it.
- A series with few points (validation lines, a one-entry import) is drawn with a marker at each
  point and never EMA-smoothed: with a handful of points an EMA moves the peaks (a 4-point
  validation line's best value shown lower than logged), and a line of one point has no length.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Plotly's dash per algorithm; every other algorithm (unknown, "?", a new one) gets UNKNOWN_DASH
DASH_BY_ALGO = {"grpo": "dash", "gspo": "solid"}
UNKNOWN_DASH = "dot"
#: the same styles in ECharts' words, and in the page's
ECHARTS_TYPE = {"solid": "solid", "dash": "dashed", "dot": "dotted"}
STYLE_WORDS = {"solid": "solid", "dash": "dashed", "dot": "dotted"}
UNKNOWN_TEXT = "algorithm unknown"

#: A series is sparse below this many points, or when it has a point on at most one row in
#: SPARSE_ROW_SHARE of the rows it could have one (a validation line logged every tenth step)
SPARSE_POINTS = 20
SPARSE_ROW_SHARE = 5
MARKER_SIZE = 6  # px, a sparse series' markers
#: a marker's shape: a sparse series' points are dots, a second column's open triangles
DOT, OPEN_TRIANGLE = "dot", "open triangle"
ECHARTS_SYMBOL = {DOT: "circle", OPEN_TRIANGLE: "emptyTriangle"}
PLOTLY_SYMBOL = {DOT: "circle", OPEN_TRIANGLE: "triangle-up-open"}
SECOND_MARKER_SIZE = 5  # px, a second column's triangles


def dash_for(algorithm: object) -> str:
    """The Plotly dash of ``algorithm``'s runs: DASH_BY_ALGO, else UNKNOWN_DASH."""
    return DASH_BY_ALGO.get(str(algorithm).lower(), UNKNOWN_DASH)


def echarts_type(algorithm: object) -> str:
    """The ECharts ``lineStyle.type`` of ``algorithm``'s runs (solid, dashed, dotted)."""
    return ECHARTS_TYPE[dash_for(algorithm)]


def algorithm_text(algorithm: object) -> str:
    """The algorithm as the legend names it: "GSPO", "GRPO", or UNKNOWN_TEXT for any other."""
    a = str(algorithm).lower()
    return a.upper() if a in DASH_BY_ALGO else UNKNOWN_TEXT


def styles_sentence(algorithms: Iterable[object] = ()) -> str:
    """The line styles in words ("GRPO dashed, GSPO solid"), with the unknown style when any of
    ``algorithms`` is not a known one."""
    parts = [f"{a.upper()} {STYLE_WORDS[d]}" for a, d in sorted(DASH_BY_ALGO.items())]
    if any(str(a).lower() not in DASH_BY_ALGO for a in algorithms):
        parts.append(f"{UNKNOWN_TEXT} {STYLE_WORDS[UNKNOWN_DASH]}")
    return ", ".join(parts)


def is_sparse(points: int, rows: int) -> bool:
    """True when a series of ``points`` finite values, out of ``rows`` rows that could hold one,
    is drawn with markers and unsmoothed: fewer than SPARSE_POINTS points, or at most one point
    per SPARSE_ROW_SHARE rows."""
    if points < 0 or rows < points:
        raise ValueError(f"need 0 <= points <= rows, got points={points}, rows={rows}")
    return points < SPARSE_POINTS or points * SPARSE_ROW_SHARE <= rows
