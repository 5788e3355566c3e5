"""How a run's line looks on the step charts: its algorithm by line style, a sparse series by its
markers.

- GSPO solid, GRPO dashed, each other known loss (DAPO, CISPO, SAPO, ..., and the ones at the
  sequence level) a dash pattern of its own and its name in the legend, an unknown algorithm
  dotted: a run whose loss is not known is never drawn like one that is, and the legend names it
  ("algorithm unknown").
- A panel's second column (the p90 of the length panel) is open triangles, never a line: no
  line style (the unknown algorithm's dotted one included) can read as it.
- A series with few points (validation lines, a one-entry import) is drawn with a marker at each
  point and never EMA-smoothed: with a handful of points an EMA moves the peaks (a 4-point
  validation line's best value shown lower than logged), and a line of one point has no length.
"""

from __future__ import annotations

from collections.abc import Iterable

from gspo_metrics.spec import LOSS_INFO, algorithm_label, parse_algorithm

#: Plotly's dash of GSPO and GRPO; every other known loss (``KNOWN_ALGORITHMS``) gets a pattern of
#: its own (``DASH_PATTERNS``); an unknown algorithm ("unknown", "?", a new one) gets UNKNOWN_DASH
NAMED_DASH = {"gspo": "solid", "grpo": "dash"}
UNKNOWN_DASH = "dot"
#: the same styles in ECharts' words, which are the page's too
ECHARTS_TYPE = {"solid": "solid", "dash": "dashed", "dot": "dotted"}
UNKNOWN_TEXT = "algorithm unknown"

#: Every label a run of a known loss is recorded under (``gspo_metrics.spec.algorithm_label``):
#: each loss at its level(s), GSPO and GRPO first.
KNOWN_ALGORITHMS: tuple[str, ...] = tuple(
    dict.fromkeys(
        ["gspo", "grpo"]
        + [algorithm_label(loss) for loss in LOSS_INFO]
        + [
            algorithm_label(loss, "sequence")
            for loss, i in LOSS_INFO.items()
            if i.level == "either"
        ]
    )
)


def _patterns() -> list[tuple[int, ...]]:
    """Distinct dash patterns (px: on, off, on, off, ...): a long dash of 6-24 px and 0-2 short
    dashes (never 1-3 px dots only, UNKNOWN_DASH's look)."""
    out = []
    for gap in (4, 7):
        for dots in (0, 1, 2):
            for dash in (6, 10, 16, 24):
                out.append((dash, gap) + (3, gap) * dots)
    return out


#: The dash pattern of each known loss other than GSPO and GRPO, in ``KNOWN_ALGORITHMS`` order.
DASH_PATTERNS: dict[str, tuple[int, ...]] = dict(
    zip([a for a in KNOWN_ALGORITHMS if a not in NAMED_DASH], _patterns(), strict=False)
)
assert len(DASH_PATTERNS) == len(KNOWN_ALGORITHMS) - len(NAMED_DASH), "more losses than patterns"

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


def _key(algorithm: object) -> str:
    return str(algorithm).strip().lower()


def dash_for(algorithm: object) -> str:
    """The Plotly dash of ``algorithm``'s runs: GSPO solid, GRPO dash, each other known loss its
    ``DASH_PATTERNS`` pattern ("10px,4px,3px,4px"), any other UNKNOWN_DASH."""
    a = _key(algorithm)
    if a in NAMED_DASH:
        return NAMED_DASH[a]
    pattern = DASH_PATTERNS.get(a)
    return UNKNOWN_DASH if pattern is None else ",".join(f"{n}px" for n in pattern)


def echarts_type(algorithm: object) -> str | list[int]:
    """The ECharts ``lineStyle.type`` of ``algorithm``'s runs: solid, dashed, dotted, or the
    loss's dash pattern as ECharts' list of lengths."""
    return echarts_dash(dash_for(algorithm))


def echarts_dash(dash: str) -> str | list[int]:
    """A Plotly dash (``dash_for``'s: a name, or "10px,4px" lengths) as ECharts'
    ``lineStyle.type`` (a name, or the lengths' list)."""
    if dash in ECHARTS_TYPE:
        return ECHARTS_TYPE[dash]
    parts = dash.split(",")
    if not all(p.removesuffix("px").isdigit() for p in parts):
        raise ValueError(f"not a dash of line_style: {dash!r}")
    return [int(p.removesuffix("px")) for p in parts]


def algorithm_text(algorithm: object) -> str:
    """The algorithm as the legend names it: the loss ("GSPO", "CISPO", "DAPO (sequence
    ratio)"), or UNKNOWN_TEXT for a label that is not a known loss's."""
    parsed = parse_algorithm(algorithm)
    if parsed is None or _key(algorithm) not in KNOWN_ALGORITHMS:
        return UNKNOWN_TEXT
    name = parsed.loss.upper()
    if parsed.level == "sequence" and parsed.info.level == "either":
        return f"{name} (sequence ratio)"
    return name


def style_words(algorithm: object) -> str:
    """``algorithm``'s line style in words: "solid", "dashed", "dotted", "dash 10-4-3-4"."""
    dash = echarts_type(algorithm)
    return dash if isinstance(dash, str) else "dash " + "-".join(map(str, dash))


def styles_sentence(algorithms: Iterable[object] = ()) -> str:
    """The line styles in words ("GRPO dashed, GSPO solid"): GRPO's and GSPO's, each other known
    loss among ``algorithms``, and the unknown style when any of them is not a known loss."""
    shown = {_key(a) for a in algorithms}
    known = sorted(NAMED_DASH) + [a for a in KNOWN_ALGORITHMS if a in shown and a not in NAMED_DASH]
    parts = [f"{algorithm_text(a)} {style_words(a)}" for a in known]
    if any(a not in KNOWN_ALGORITHMS for a in shown):
        parts.append(f"{UNKNOWN_TEXT} {ECHARTS_TYPE[UNKNOWN_DASH]}")
    return ", ".join(parts)


def is_sparse(points: int, rows: int) -> bool:
    """True when a series of ``points`` finite values, out of ``rows`` rows that could hold one,
    is drawn with markers and unsmoothed: fewer than SPARSE_POINTS points, or at most one point
    per SPARSE_ROW_SHARE rows."""
    if points < 0 or rows < points:
        raise ValueError(f"need 0 <= points <= rows, got points={points}, rows={rows}")
    return points < SPARSE_POINTS or points * SPARSE_ROW_SHARE <= rows
