"""What the Compare page draws, decided from the runs' step tables (pure pandas/numpy, no Streamlit):

- which steps each panel shows (the "steps" control: policy lag, ``training_hooks.findings.lag``);
- which metrics a run logged beyond the schema become curves, which are constants (shown as a
  value), which are bookkeeping counters (not drawn), and their groups by name prefix (``actor/``,
  ``timing_s/``, ...), collapsed until the user asks;
- the per-panel notes computed on the steps shown (``PanelView``), and the zoom of the log s panel
  onto GSPO's band.

Metric names come from disk (untrusted): nothing here formats them as Markdown or HTML.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from app.compare.panels import PANEL_COLUMNS, PANELS
from app.compare.series_math import finite_range
from training_hooks.findings import lag
from training_hooks.metric_map import Derived, candidate_columns, is_known_column
from training_hooks.schema import STEP_COLUMNS, STEP_KEY_COLUMNS, RunInfo, Step

# ------------------------------------------------------------------------------ the steps control

AUTO = "auto"
STEP_CHOICES = (AUTO, *lag.SUBSETS)  # the "steps" control, kept in the URL as ?steps=
SUBSET_TEXT = {
    lag.ALL: "all steps",
    lag.ON_POLICY: "on-policy steps",
    lag.OFF_POLICY: "off-policy steps",
}


def panel_subset(off_policy_default: bool, choice: str, split: lag.LagSplit | None) -> str:
    """The subset of one run's steps a panel shows: the user's ``choice``; under ``AUTO``,
    off-policy for the clip and KL old→new panels (``off_policy_default``) of a run that has both
    kinds of steps (on-policy steps clip nothing and move nothing by construction), else all."""
    if choice not in STEP_CHOICES:
        raise ValueError(f"choice must be one of {STEP_CHOICES}, got {choice!r}")
    if choice != AUTO:
        return choice
    if off_policy_default and split is not None and split.has_both:
        return lag.OFF_POLICY
    return lag.ALL


def subset_text(subsets: Mapping[str, str]) -> str:
    """What a panel shows, from {run label: subset}: "off-policy steps", or per run when they
    differ ("off-policy steps of a, b; all steps of c")."""
    kinds = list(dict.fromkeys(subsets.values()))
    if not kinds:
        return ""
    if len(kinds) == 1:
        return SUBSET_TEXT[kinds[0]]
    parts = []
    for k in kinds:
        names = [label for label, s in subsets.items() if s == k]
        parts.append(f"{SUBSET_TEXT[k]} of {short_list(names, len(subsets))}")
    return "; ".join(parts)


# --------------------------------------------------------------- metrics beyond the built-in panels

#: Bookkeeping counters, not drawn as panels: ours (rollout, policy_lag, the batch sizes) and the
#: step/epoch counters other tools log (TRL ``epoch``, verl ``training/global_step`` and
#: ``training/epoch``, Tinker ``progress/batch`` and ``progress/done_frac``), by full name or prefix.
COUNTER_NAMES = frozenset(
    {
        Step.ROLLOUT,
        Step.POLICY_LAG,
        Step.NUM_GROUPS,
        Step.NUM_SEQUENCES,
        Step.NUM_RANKS,
        "epoch",
        "step",
        "global_step",
        "train/epoch",
        "train/global_step",
        "training/epoch",
        "training/global_step",
    }
)
COUNTER_PREFIXES = ("progress/",)
OTHER_GROUP = "other"  # metrics without a prefix (groups with one end in "/")


def is_counter(name: str) -> bool:
    """True for a bookkeeping counter (``COUNTER_NAMES``, ``COUNTER_PREFIXES``)."""
    return name in COUNTER_NAMES or name.startswith(COUNTER_PREFIXES)


def metric_group(name: str) -> str:
    """A metric's group: its first ``/`` component with the slash (``actor/``), else OTHER_GROUP."""
    head, sep, _ = name.partition("/")
    return f"{head}/" if sep and head else OTHER_GROUP


@dataclass(frozen=True)
class ExtraStats:
    """One numeric column a run logged beyond the schema: its finite values' count, min and max."""

    points: int
    low: float
    high: float


def extra_stats(df: pd.DataFrame) -> dict[str, ExtraStats]:
    """{column: stats} for the numeric columns of a step table that no built-in panel reads (not a
    schema or derived column, nor an extra a built-in panel draws: ``grad_norm``); columns with no
    finite value are left out (nothing was logged)."""
    out = {}
    for c in df.columns:
        if is_known_column(c) or c in STEP_KEY_COLUMNS or c in PANEL_COLUMNS:
            continue
        if df[c].dtype.kind not in "fiu":
            continue
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(np.float64, na_value=np.nan)
        v = v[np.isfinite(v)]
        if len(v):
            out[c] = ExtraStats(len(v), float(v.min()), float(v.max()))
    return out


@dataclass(frozen=True)
class Constant:
    """A metric that never changed in one run: shown as a value, not as a flat line."""

    metric: str
    run: str  # the run's label
    value: float
    points: int  # how many steps logged it


@dataclass(frozen=True)
class Extras:
    """The shown runs' metrics beyond the built-in panels, sorted out."""

    groups: dict[str, tuple[str, ...]]  # group -> metrics drawn as curves (vary in some run)
    constants: tuple[Constant, ...]  # metrics constant in every run that logged them
    counters: tuple[str, ...]  # bookkeeping counters (not drawn)
    default_groups: tuple[str, ...]  # drawn without asking (our own hooks' unprefixed extras)

    @property
    def n_curves(self) -> int:
        return sum(len(v) for v in self.groups.values())


DEFAULT_GROUP_MAX = 8  # our own runs' unprefixed extras are drawn by default up to this many


def classify_extras(
    stats_by_run: Mapping[str, Mapping[str, ExtraStats]], own: Iterable[str]
) -> Extras:
    """Sort the extra metrics of the runs ({run label: ``extra_stats``}) into counters, constants
    (every run that logged it logged one value) and curves grouped by prefix. ``own``: labels of
    runs recorded by our hooks; their unprefixed extras (``log_step(extra=...)``) are drawn by
    default when there are at most DEFAULT_GROUP_MAX; foreign ones wait to be asked for."""
    names = sorted({n for st in stats_by_run.values() for n in st})
    counters = tuple(n for n in names if is_counter(n))
    constants: list[Constant] = []
    groups: dict[str, list[str]] = {}
    for n in names:
        if is_counter(n):
            continue
        per_run = {r: st[n] for r, st in stats_by_run.items() if n in st}
        if all(s.low == s.high for s in per_run.values()):
            constants += [Constant(n, r, s.low, s.points) for r, s in per_run.items()]
        else:
            groups.setdefault(metric_group(n), []).append(n)
    ordered = {g: tuple(groups[g]) for g in sorted(groups, key=lambda g: (g != OTHER_GROUP, g))}
    own = set(own)
    own_other = any(metric_group(n) == OTHER_GROUP for r in own for n in stats_by_run.get(r, {}))
    default = (
        (OTHER_GROUP,)
        if own_other and 0 < len(ordered.get(OTHER_GROUP, ())) <= DEFAULT_GROUP_MAX
        else ()
    )
    return Extras(ordered, tuple(constants), counters, default)


def short_list(names: Sequence[str], of: int) -> str:
    """A few names for a one-line note ("a, b", or "3 of 6 runs" beyond two), each cut to 28
    characters."""
    if len(names) > 2:
        return f"{len(names)} of {of} runs"
    return ", ".join(n if len(n) <= 28 else n[:27] + "…" for n in names)


def filter_names(names: Sequence[str], query: str) -> list[str]:
    """The names containing every word of ``query`` (case-insensitive, plain substrings)."""
    words = query.lower().split()
    return [n for n in names if all(w in n.lower() for w in words)]


def constants_frame(constants: Sequence[Constant]) -> pd.DataFrame:
    """The constants as a table (metric, run, value, steps logged) for ``st.dataframe``."""
    return pd.DataFrame(
        {
            "metric": [c.metric for c in constants],
            "run": [c.run for c in constants],
            "value": [f"{c.value:.6g}" for c in constants],
            "steps logged": [c.points for c in constants],
        }
    )


# ------------------------------------------------------------------------------- per-panel notes

#: The log s panel opens zoomed to this many times GSPO's band [log(1-ε_low), log(1+ε_high)]
#: ("a few ε"), so the band is visible beside GRPO's far wider spread; points outside are counted.
SEQ_BAND_ZOOM = 4.0


@dataclass(frozen=True)
class PanelView:
    """How the grid draws one panel beyond its traces: a second title line computed on the steps
    shown, a y range (None: autorange), the note of an empty panel, a y floor at 0, whether the
    y axis ends at the drawn extent (a band cut to its values' observed range: 0/1 rewards end at
    0 and 1, not at the next round number beyond), and the float-noise floor every value shown
    lies below (``noise_floor``: the y axis then runs from 0 to it, so noise draws flat at 0)."""

    subtitle: str = ""
    y_range: tuple[float, float] | None = None
    empty_note: str = "no data for the selected runs"
    nonnegative: bool = False
    tight: bool = False
    noise_floor: float | None = None


def seq_band_range(eps_pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """SEQ_BAND_ZOOM times the widest of the runs' GSPO bands (``eps_pairs``: one or more) in
    log space."""
    lo = min(math.log1p(-p[0]) for p in eps_pairs)
    hi = max(math.log1p(p[1]) for p in eps_pairs)
    return SEQ_BAND_ZOOM * lo, SEQ_BAND_ZOOM * hi


def below_floor(values: Iterable[np.ndarray], floor: float) -> float | None:
    """The largest |value| over several series when every finite one lies below ``floor`` in size
    (float noise), else None (a value at or above it, or no finite value at all)."""
    ends = finite_range(np.abs(np.asarray(v, np.float64)) for v in values)
    return ends[1] if ends is not None and ends[1] < floor else None


def count_outside(values: Iterable[np.ndarray], y_range: tuple[float, float]) -> tuple[int, int]:
    """(points outside ``y_range``, finite points) over several series."""
    out = total = 0
    for v in values:
        v = np.asarray(v, np.float64)
        v = v[np.isfinite(v)]
        total += len(v)
        out += int(((v < y_range[0]) | (v > y_range[1])).sum())
    return out, total


# ------------------------------------------------------------------ logged under another name

#: Our columns whose values a built-in chart draws through another column (low + high binding).
DRAWN_AS = {
    Step.TOKEN_CLIP_LOW_FRACTION: Derived.TOKEN_CLIP_BINDING,
    Step.TOKEN_CLIP_HIGH_FRACTION: Derived.TOKEN_CLIP_BINDING,
    Step.SEQ_CLIP_LOW_FRACTION: Derived.SEQ_CLIP_BINDING,
    Step.SEQ_CLIP_HIGH_FRACTION: Derived.SEQ_CLIP_BINDING,
}


@dataclass(frozen=True)
class StandIn:
    """A run's foreign metric that a chart's column would hold if its meaning were pinned."""

    run: str  # the run's label
    stored: str  # the column it is stored as ("trl/kl")
    foreign: str  # the name in the log ("kl")
    why: str  # why it is not our column (the import's reason)


def stand_ins(
    runs: Sequence[tuple[str, RunInfo | None, pd.DataFrame]], columns: Iterable[str]
) -> dict[str, list[StandIn]]:
    """{chart column: the shown runs' metrics logged under another name that would fill it}:
    each run's imported names kept as ``<tool>/<name>`` (``ImportRecord.renamed``) whose
    mappings fill that column in some version or setting, and that hold a value in the run's
    table. A chart with none here is not logged by the shown runs."""
    wanted = set(columns)
    out: dict[str, list[StandIn]] = {}
    for label, info, df in runs:
        rec = info.imported if info is not None else None
        if rec is None:
            continue
        for foreign, stored in rec.renamed.items():
            if stored not in df.columns or not df[stored].notna().any():
                continue
            cols = {DRAWN_AS.get(c, c) for c in candidate_columns(rec.tool, foreign)}
            why = rec.notes.get(foreign) or "its meaning differs from the chart's"
            for c in sorted(cols & wanted):
                out.setdefault(c, []).append(StandIn(label, stored, foreign, why))
    return out


def stand_in_sentence(titles: Mapping[str, str], found: Mapping[str, list[StandIn]]) -> str:
    """ "Logged under another name (...): KL to reference: trl/kl in run A (why); ..." """
    parts = []
    for col, items in found.items():
        runs = "; ".join(f"{i.stored} in {i.run} ({i.why})" for i in items)
        parts.append(f"{titles.get(col, col)}: {runs}")
    return (
        "Logged under another name, not drawn in those charts (its meaning differs from the "
        "chart's, or the log does not say enough to pin it): " + ". ".join(parts) + "."
    )


def clip_units_line(series: Sequence[tuple[str, pd.DataFrame]]) -> str:
    """Which shown runs record clip fractions in both units (sequence and token), per run: a
    run recorded by the hooks records both; an import holds what its log had."""
    seq = (Step.SEQ_CLIP_FRACTION, Step.SEQ_CLIP_LOW_FRACTION, Derived.SEQ_CLIP_BINDING)
    tok = (Step.TOKEN_CLIP_FRACTION, Step.TOKEN_CLIP_LOW_FRACTION, Derived.TOKEN_CLIP_BINDING)

    def has(df: pd.DataFrame, cols: tuple[str, ...]) -> bool:
        return any(c in df.columns and df[c].notna().any() for c in cols)

    units = {label: (has(df, seq), has(df, tok)) for label, df in series}
    if all(a and b for a, b in units.values()):
        return "Every shown run records both clip units, so GRPO and GSPO sit on the same scale."
    both = [k for k, (a, b) in units.items() if a and b]
    one = [k for k, (a, b) in units.items() if a != b]
    none = [k for k, (a, b) in units.items() if not (a or b)]
    parts = []
    if both:
        parts.append(f"both units: {', '.join(both)}")
    if one:
        parts.append(
            "one unit only: "
            + ", ".join(f"{k} ({'sequence' if units[k][0] else 'token'})" for k in one)
        )
    if none:
        parts.append(f"no clip fraction: {', '.join(none)}")
    return "Clip units per run: " + "; ".join(parts) + " (an import holds what its log had)."


#: the schema's step columns Compare reads besides its panels' (with their bands and second
#: lines): the x axes and what the derived ones come from (``training_hooks.tables.add_derived``:
#: the clip binding shares, tokens seen, minutes elapsed), the policy lag's (``lag``) and the
#: clip units' (``clip_units_line``)
COMPARE_READS = frozenset(
    {
        Step.STEP,
        Step.WALL_TIME,
        Step.ROLLOUT,
        Step.NUM_TOKENS,
        Step.POLICY_LAG,
        Step.TOKEN_LOG_RATIO_ABS_MAX,
        Step.SEQ_CLIP_FRACTION,
        Step.SEQ_CLIP_LOW_FRACTION,
        Step.SEQ_CLIP_HIGH_FRACTION,
        Step.TOKEN_CLIP_FRACTION,
        Step.TOKEN_CLIP_LOW_FRACTION,
        Step.TOKEN_CLIP_HIGH_FRACTION,
    }
    | {c for p in PANELS for c in (p.column, p.second, *(p.band or ())) if c}
)


def unread_step_columns(info: RunInfo | None) -> tuple[str, ...]:
    """The schema's step columns Compare need not read for a run: those no panel, x axis, lag or
    clip unit uses, nor a stand-in of the run's (``stand_ins``). Every other column is read (the
    metrics beyond the schema: the page counts and draws them); the ones left are listed from the
    files' schemas (``tables.UNREAD_COLUMNS``: the verdict's metric choices) and read in full
    when the verdict scores one."""
    rec = info.imported if info is not None else None
    stored = set(rec.renamed.values()) if rec is not None else set()
    return tuple(c for c, _ in STEP_COLUMNS if c not in COMPARE_READS and c not in stored)
