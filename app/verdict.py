"""The verdict of runs grouped over seeds, from the shell (for CI pipelines) and for the Compare page:

    python -m app.verdict ROOT --by KEY --metric COLUMN [--final 0.2] [--json]
                          [--group-metric GROUP=COLUMN ...] [--steps all|on-policy|off-policy|auto]

prints a table of the groups (N, mean score, 95% CI, runs) and of every pair (difference, its 95%
CI, P(A > B), the verdict), then the warnings (groups under 3 seeds) and the runs left out (setting
unknown, metric not logged). ``--json`` prints one object instead (the names are a contract):

    {"metric", "by", "final",
     "groups": [{"name", "n", "estimate", "ci": [lo, hi], "runs": [run ids]}],
     "pairs": [{"a", "b", "delta", "ci": [lo, hi], "p_better", "verdict"}]}

with ``delta`` = estimate(a) - estimate(b), ``p_better`` = P(a > b) and ``verdict`` a group's name
or "inconclusive"; warnings and left-out runs then go to stderr. Asked for (below), each group
also carries ``"metric"``, the column it was scored on, and the object ``"steps"``, the steps
scored (absent: --metric for every group, all steps, as without them).

``--group-metric GROUP=COLUMN`` (repeatable) scores the group GROUP on COLUMN instead of
``--metric`` (every other group): "GSPO clips more sequences than GRPO clips tokens" is
``--by ratio_level --metric token_clip_fraction --group-metric GSPO=seq_clip_fraction`` (``--by
ratio_level``: GSPO against GRPO by the ratio the loss ran on, whatever its aggregation;
``--by algorithm``: one group per loss label, "gspo", "dapo-seq", ...). The output
names each group's column; "better" then compares two columns' scores, no more.
``--steps``: the steps a score averages over, as Compare's "steps" control (``lag``): all (the
default), on-policy or off-policy steps only (a clip share or a KL old→new is 0 by construction at
an on-policy step), or auto (off-policy steps for a metric whose Compare panel shows them by
default, of a run that has both kinds; else all). The final fraction is of those steps. The statistics are
``app.verdict_stats``; the groups ``app.run_groups``. Exit status 0 with a verdict, 2 on a bad
argument or when fewer than two groups have a score.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from app import run_groups as rg
from app import verdict_stats as vs
from app.compare import panels, view
from app.records import RunRef, Table
from training_hooks.findings import lag
from training_hooks.schema import Step


def parse_group_metrics(items: Sequence[str]) -> dict[str, str]:
    """{group: column} from "GROUP=COLUMN" items (``--group-metric``; the page's field splits
    on commas first). Raises ValueError naming the bad item."""
    out: dict[str, str] = {}
    for item in items:
        group, eq, column = (t.strip() for t in item.partition("="))
        if not eq or not group or not column:
            raise ValueError(f"group metric must be GROUP=COLUMN, got {item!r}")
        if group in out and out[group] != column:
            raise ValueError(f"group {group!r} given two columns: {out[group]!r} and {column!r}")
        out[group] = column
    return out


def _subset(df, column: str, steps: str) -> tuple[str, np.ndarray | None]:
    """(the subset of steps scored, its row mask; None: every row); ``report`` checks ``steps``."""
    off_default = any(p.off_policy_default for p in panels.PANELS if p.column == column)
    if steps == lag.ALL or (steps == view.AUTO and not off_default):
        return lag.ALL, None  # no lag split needed (the page's default on reward_mean)
    split = lag.lag_split(df)
    subset = view.panel_subset(off_default, steps, split)
    return subset, None if subset == lag.ALL else split.mask(subset)


@dataclass(frozen=True)
class Report:
    """The verdict of ``runs`` grouped by ``by`` on ``metric``, with what was left out."""

    metric: str
    by: str
    final: float
    grouping: rg.Grouping
    verdict: vs.Verdict
    left_out: list[tuple[RunRef, str]]  # (run, why it has no score or no group)
    group_metrics: dict[str, str] = field(default_factory=dict)  # {group: its own column}
    steps: str = lag.ALL

    def metric_of(self, group: str) -> str:
        """The column ``group`` was scored on."""
        return self.group_metrics.get(group, self.metric)

    def to_json(self) -> dict:
        return {
            "metric": self.metric,
            "by": self.by,
            "final": self.final,
            **({"steps": self.steps} if self.steps != lag.ALL else {}),
            "groups": [
                {
                    "name": g.name,
                    **({"metric": self.metric_of(g.name)} if self.group_metrics else {}),
                    "n": g.n,
                    "estimate": g.estimate,
                    "ci": list(g.ci),
                    "runs": list(g.runs),
                }
                for g in self.verdict.groups
            ],
            "pairs": [
                {
                    "a": p.a,
                    "b": p.b,
                    "delta": p.delta,
                    "ci": list(p.ci),
                    "p_better": p.p_better,
                    "verdict": p.verdict,
                }
                for p in self.verdict.pairs
            ],
        }


def _load(run: RunRef) -> Table:
    from app import data  # streamlit's import: only when steps are read

    return data.load_steps(run)


def report(
    runs: Sequence[RunRef],
    by: str,
    metric: str,
    final: float = vs.DEFAULT_FINAL,
    load: Callable[[RunRef], Table] = _load,
    group_metrics: Mapping[str, str] | None = None,
    steps: str = lag.ALL,
) -> Report:
    """Group ``runs`` by ``by``, score each on ``metric`` (``verdict_stats.final_score``), or on
    ``group_metrics[group]`` for a group named there, over the ``steps`` subset of its steps
    (``view.STEP_CHOICES``: Compare's "steps" control), and compare the groups; a run
    without a finite value there is left out, with the reason. A group named in
    ``group_metrics`` that is not a group is an error."""
    if not 0 < final <= 1:
        raise ValueError(f"final must be in (0, 1], got {final}")
    if steps not in view.STEP_CHOICES:
        raise ValueError(f"steps must be one of {view.STEP_CHOICES}, got {steps!r}")
    grouping = rg.group_runs(runs, by)
    own = dict(group_metrics or {})
    unknown = sorted(set(own) - {g.name for g in grouping.groups})
    if unknown:
        names = ", ".join(g.name for g in grouping.groups) or "none"
        raise ValueError(f"group metric names no group of {by!r}: {unknown} (groups: {names})")
    left_out = list(grouping.ungrouped)
    scores: dict[str, tuple[list[str], list[float]]] = {}
    for g in grouping.groups:
        column = own.get(g.name, metric)
        ids, values = [], []
        for run in g.runs:
            df = load(run).df
            if column not in df.columns or Step.STEP not in df.columns:
                left_out.append((run, f"did not log {column!r}"))
                continue
            subset, rows = _subset(df, column, steps)
            x = df[Step.STEP].to_numpy(np.float64)
            y = df[column].to_numpy(np.float64, na_value=np.nan)
            if rows is not None:
                x, y = x[rows], y[rows]
            score = vs.final_score(x, y, final)  # NaN without a finite value (or a step)
            if np.isfinite(score):
                ids.append(run.key)
                values.append(score)
            else:
                where = "" if subset == lag.ALL else f" at {subset} steps"
                left_out.append((run, f"no finite value of {column!r}{where}"))
        if ids:
            scores[g.name] = (ids, values)
    return Report(metric, by, final, grouping, vs.compare(scores), left_out, own, steps)


def _num(v: float) -> str:
    return f"{v:.4g}"


def _ci(ci: Sequence[float]) -> str:
    return f"[{_num(ci[0])}, {_num(ci[1])}]"


def group_rows(r: Report) -> list[dict]:
    """The groups' table (the page's and the shell's)."""
    return [
        {
            "group": g.name,
            **({"scored on": r.metric_of(g.name)} if r.group_metrics else {}),
            "N": g.n,
            "mean score": _num(g.estimate),
            "95% CI": _ci(g.ci),
            "runs": ", ".join(g.runs),
        }
        for g in r.verdict.groups
    ]


def pair_rows(r: Report) -> list[dict]:
    """The pairs' table: A, B, the difference A - B with its CI, P(A > B), the verdict."""
    return [
        {
            "A": p.a,
            "B": p.b,
            "A - B": _num(p.delta),
            "95% CI of A - B": _ci(p.ci),
            "P(A > B)": f"{p.p_better:.3f}",
            "verdict": vs.INCONCLUSIVE if p.verdict == vs.INCONCLUSIVE else f"{p.verdict} better",
        }
        for p in r.verdict.pairs
    ]


def notes(r: Report) -> list[str]:
    """The warnings, the groups whose runs differ in more than the seed, the runs left out."""
    differ = [
        f"{g.name}: its runs also differ in {', '.join(g.differ)}"
        for g in r.grouping.groups
        if g.differ
    ]
    repeats = [
        f"{g.name}: runs {', '.join(keys)} state one seed ({seed}): repeats, not seeds"
        for g in r.grouping.groups
        for seed, keys in g.repeated_seeds().items()
    ]
    left = [f"left out: {run.key}: {why}" for run, why in r.left_out]
    return [*r.verdict.warnings, *differ, *repeats, *left]


def _text_table(rows: list[dict]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(row[c])) for row in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols)]
    lines += ["  ".join(str(row[c]).ljust(width[c]) for c in cols) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def scored(r: Report) -> str:
    """What a score is: the column(s), the steps, the final fraction."""
    if r.group_metrics:
        named = "; ".join(f"{g} on {c}" for g, c in r.group_metrics.items())
        what = f"{named}; any other group on {r.metric}"
    else:
        what = r.metric
    steps = {
        **view.SUBSET_TEXT,
        lag.ALL: "logged steps",
        view.AUTO: "steps (off-policy ones for a clip or KL old→new column of a run with both)",
    }[r.steps]
    return f"{what}: mean over the final {r.final:.0%} of each run's {steps}"


def text(r: Report) -> str:
    """The shell's table: what is scored, the groups, the pairs, the notes."""
    head = (
        f"{scored(r)}, runs grouped by {r.by}; 95% percentile bootstrap CIs "
        f'({vs.N_RESAMPLES:,} resamples per group); "better" means a higher score'
        + (" (of each group's own column)" if r.group_metrics else "")
    )
    parts = [head, _text_table(group_rows(r)), _text_table(pair_rows(r)), "\n".join(notes(r))]
    return "\n\n".join(p for p in parts if p) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m app.verdict",
        description="Which group of runs is better on a step metric, and how sure (runs grouped "
        "over seeds; bootstrap CIs, P(A > B)).",
    )
    p.add_argument("root", metavar="ROOT", help="folder (or s3:// URI) holding one folder per run")
    p.add_argument(
        "--by",
        required=True,
        metavar="KEY",
        help="ratio_level (GSPO / GRPO by the loss's ratio), algorithm, or a config key (lr)",
    )
    p.add_argument("--metric", required=True, metavar="COLUMN", help="a step-table column")
    p.add_argument(
        "--final",
        type=float,
        default=vs.DEFAULT_FINAL,
        help="the final fraction of each run's logged steps its score averages (default 0.2)",
    )
    p.add_argument(
        "--group-metric",
        action="append",
        default=[],
        metavar="GROUP=COLUMN",
        help="score the group GROUP on COLUMN instead of --metric (repeatable)",
    )
    p.add_argument(
        "--steps",
        choices=view.STEP_CHOICES,
        default=lag.ALL,
        help="the steps a score averages over (default all; off-policy: a clip share or KL "
        "old→new is 0 at on-policy steps; auto: as Compare's default)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not 0 < args.final <= 1:
        parser().error(f"--final must be in (0, 1], got {args.final}")
    try:
        own = parse_group_metrics(args.group_metric)
    except ValueError as e:
        parser().error(f"--group-metric: {e}")
    from streamlit.logger import get_logger

    # outside a Streamlit server its caches warn once per cached function as the app's modules
    # are imported ("No runtime found"): noise here (a filter: Streamlit resets its loggers'
    # levels when it reads its config)
    get_logger("streamlit.runtime.caching.cache_data_api").addFilter(
        lambda record: "No runtime found" not in record.getMessage()
    )
    from app.discovery import discover

    found = discover(args.root)
    for problem in found.problems:
        print(problem, file=sys.stderr)
    try:
        r = report(
            found.runs, args.by, args.metric, args.final, group_metrics=own, steps=args.steps
        )
    except ValueError as e:
        parser().error(f"--group-metric: {e}")
    if args.json:
        print(json.dumps(r.to_json(), indent=2))
        for note in notes(r):
            print(note, file=sys.stderr)
    else:
        print(text(r), end="")
    if len(r.verdict.groups) < 2:
        print(
            f"fewer than two groups of runs by {args.by!r} have a score on {args.metric!r}: "
            "nothing to compare",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
