"""Health on other people's real runs, labelled by ../shared/real_logs/README.md: import every log
(each run of a file that holds several), print per log the columns mapped and withheld and the
findings, then recall against the README's description and the false alarms.

    python bench/bench_real_logs.py [REAL_LOGS_DIR]

- **recall**: of the problems the README describes (``LABELS``: the section "What each of the
  newer logs shows"), the share Health finds at warning or error under the codes that name it.
- **false alarms**: a warning or error on a log the README shows no problem in (its "healthy
  learning" log; the restarts of a reused log path: 5 runs of 1-2 steps), or a code a log must not get
  (``forbid``: the TensorBoard import's step 113, which has no ``train/loss``, is not a NaN).
- warnings the README does not describe, on a labelled log, are listed (not counted: Health may
  see more than the README says); logs the README does not describe are printed, not scored.

The logs are found and imported as tests/test_importers_real.py finds them, read as the Health
page reads them (``tables.step_frame``: the app's read, uncached) and judged with the run's facts
(``facts_of``). Exit status 0 when recall is 100% and there is no false alarm, else 1.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from test_importers_real import real_logs, real_logs_dir  # noqa: E402

from training_hooks import findings, importers, schema, tables  # noqa: E402

SERIOUS = (findings.ERROR, findings.WARNING)
#: A run the source says stopped before its end, as Health and the Runs page show it: a status
#: other than finished / running (what both pages print for the run), or a warning or error
#: under one of these codes.
STATUS_CODES = ("stopped_early", findings.CRASHED, findings.FAILED)


@dataclass(frozen=True)
class Problem:
    what: str  # the README's words
    codes: tuple[str, ...]  # a warning or error under one of these finds it
    status: bool = False  # a run that stopped early (found by its status too)


@dataclass(frozen=True)
class Label:
    problems: tuple[Problem, ...] = ()
    allowed: tuple[str, ...] = ()  # codes of further true things the README states
    forbid: tuple[str, ...] = ()  # codes this log must not get at warning or error
    shows_none: bool = False  # the README shows no problem: any warning is a false alarm


STOPPED = Problem("stopped before its planned end", STATUS_CODES, status=True)
#: The README's "What each of the newer logs shows", as data: a log's path under the folder (a
#: file of several runs: "path#N" for run N) -> what Health must and must not find.
LABELS: dict[str, Label] = {
    "trl/graphcross-lil-anchutka/checkpoint-600/trainer_state.json": Label(
        (
            Problem(
                "collapse to zero signal: frac_reward_zero_std 1.0 in 46 of 60 rows",
                (findings.ZERO_VARIANCE,),
            ),
            Problem(
                "loss 0.0 in all 60 rows, grad_norm 0.18-0.31 -> ~2e-4, reward flat at 0.07",
                (findings.NO_SIGNAL,),
            ),
            Problem("length falls 359 -> ~140 tokens", (findings.LENGTH_COLLAPSE,)),
        ),
        allowed=("loss_constant",),  # the README: loss 0.0 in all 60 rows
    ),
    "trl/qwen2-grpo-test-furixturi/checkpoint-113/trainer_state.json": Label(
        (
            Problem(
                "format reward rises 0.010 -> 0.129 while the accuracy reward stays near 0",
                (findings.REWARD_PINNED,),
            ),
        ),
    ),
    "trl/qwen2-grpo-test-furixturi/runs/Apr01_09-57-15_h100x2-nc80-eastus2/"
    "events.out.tfevents.1743501588.h100x2-nc80-eastus2": Label(
        (
            Problem(
                "format reward rises while the accuracy reward stays near 0 (same run)",
                (findings.REWARD_PINNED,),
            ),
        ),
        forbid=(findings.NONFINITE,),  # step 113 holds rewards but no train/loss: not a NaN
    ),
    "trl/pythia-grpo-vemz/checkpoint-100/trainer_state.json": Label(
        (
            Problem(
                "every completion hits the 48-token cap (clipped_ratio 1.0 in every row)",
                (findings.TRUNCATION,),
            ),
        ),
    ),
    "trl/qwen-grpo-multigpu-seriserendipia/checkpoint-462/trainer_state.json": Label(
        (Problem("grad_norm exactly 0.0 in 78 of 231 rows", (findings.NO_SIGNAL,)),),
        allowed=(findings.ZERO_VARIANCE,),  # frac_reward_zero_std averages 0.52-0.60
    ),
    "trl/wandb-qwen3-sparse-hiepdema/wandb/run-20260707_151546-bp5e8rq3": Label(
        (
            Problem(
                "a sparse reward that almost never fires: frac_reward_zero_std 1.0 in 40 of 50",
                (findings.ZERO_VARIANCE, findings.NO_SIGNAL),
            ),
        ),
    ),
    "verl/gui-cursor-grpo-yuzhaouoe/verl_demo.log": Label(
        (
            Problem(
                "10 steps of a run planned for 250 epochs; ends inside step 11", STATUS_CODES, True
            ),
        ),
    ),
    "tinker/rlvr-gptoss20b-v3b-joanvelja/gptoss-20b-v3b-metrics.jsonl": Label(shows_none=True),
    **{
        f"tinker/bash-codeforces-astowolfo/metrics.jsonl#{k}": Label(shows_none=True)
        for k in range(1, 6)
    },
    "tinker/code-rl-shaider10-run1/metrics.jsonl": Label(
        (
            STOPPED,
            Problem(
                "loss:sum 6.08e11 at step 92 (every other step within 2.7e4)",
                (findings.LOSS_SPIKE,),
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Judged:
    key: str
    info: schema.RunInfo
    facts: findings.RunFacts  # as the Health page judges the run (its status as shown)
    report: findings.HealthReport


def judge_all(folder: Path, root: Path) -> list[Judged]:
    """Every log of ``folder`` imported into ``root`` (each run of a several-run file) and judged
    as the Health page judges it."""
    out = []
    for tool, path in real_logs(folder):
        rel = str(path.relative_to(folder))
        try:
            segments: list[int | None] = [None]
            importers.import_run(tool, path, root=root / "probe")
        except importers.SeveralRuns as e:
            segments = list(range(1, len(e.segments) + 1))
        for seg in segments:
            res = importers.import_run(tool, path, root=root, segment=seg)
            df, _ = tables.step_frame(res["run_dir"])
            info = schema.read_run_info(res["run_dir"])
            facts = findings.facts_of(info)
            report = findings.run_health(df, facts)
            out.append(Judged(rel if seg is None else f"{rel}#{seg}", info, facts, report))
    return out


def found(problem: Problem, j: Judged) -> bool:
    if any(f.code in problem.codes and f.severity in SERIOUS for f in j.report.findings):
        return True
    return problem.status and j.facts.status not in (schema.STATUS_FINISHED, schema.STATUS_RUNNING)


def columns_line(info: schema.RunInfo) -> tuple[str, str]:
    """(mapped, withheld) of an import, as text."""
    imp = info.imported
    if imp is None:
        return "-", "-"
    mapped = ", ".join(f"{k} -> {v}" for k, v in sorted(imp.mapped.items())) or "none"
    held = [f"{k} (kept as {v})" for k, v in sorted(imp.renamed.items())]
    held += [f"{k} (not stored: {v})" for k, v in sorted(imp.nulled.items())]
    return mapped, ", ".join(held) or "none"


def score(judged: list[Judged]) -> dict:
    """Recall, false alarms and undescribed warnings over the labelled logs."""
    hits, missed, alarms, extra = 0, [], [], []
    for j in judged:
        label = LABELS.get(j.key)
        if label is None:
            continue
        serious = [f for f in j.report.findings if f.severity in SERIOUS]
        for p in label.problems:
            if found(p, j):
                hits += 1
            else:
                missed.append((j.key, p.what))
        for f in serious:
            if label.shows_none or f.code in label.forbid:
                alarms.append((j.key, f.code, f.evidence))
            elif not any(f.code in p.codes for p in label.problems) and f.code not in label.allowed:
                extra.append((j.key, f.code))
    total = hits + len(missed)
    return {
        "recall": hits / total if total else 1.0,
        "found": hits,
        "problems": total,
        "missed": missed,
        "false_alarms": alarms,
        "undescribed": extra,
    }


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else real_logs_dir()
    if folder is None or not folder.is_dir():
        print("no real_logs folder (set GSPO_DASH_REAL_LOGS or pass it)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        judged = judge_all(folder, Path(tmp))
    for j in judged:
        mapped, held = columns_line(j.info)
        tag = "labelled" if j.key in LABELS else "not described by the README"
        print(f"== {j.key} ({tag}; last step {j.info.last_step}, status {j.facts.status})")
        print(f"   mapped: {mapped}")
        print(f"   withheld: {held}")
        for f in j.report.findings:
            print(f"   [{f.severity}] {f.code}: {f.evidence}")
    s = score(judged)
    print()
    print(f"recall: {s['found']}/{s['problems']} = {s['recall']:.0%} of the README's problems")
    for key, what in s["missed"]:
        print(f"   missed: {key}: {what}")
    print(f"false alarms: {len(s['false_alarms'])}")
    for key, code, _ in s["false_alarms"]:
        print(f"   false alarm: {key}: {code}")
    for key, code in s["undescribed"]:
        print(f"   warning the README does not describe: {key}: {code}")
    unlabelled = sorted({j.key for j in judged if j.key not in LABELS})
    print(f"not described by the README (printed, not scored): {len(unlabelled)} logs")
    return 0 if s["recall"] == 1.0 and not s["false_alarms"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
