"""Health: automatic findings per run, each with its evidence, what to do, and the steps to open."""

import pandas as pd
import streamlit as st

from app import data, line_style, ui
from training_hooks.findings import ERROR, INFO, OK, WARNING, in_step_order
from training_hooks.findings.lag import lag_split

ICON = {
    ERROR: ":material/error:",
    WARNING: ":material/warning:",
    INFO: ":material/info:",
    OK: ":material/check_circle:",
}
BOX = {ERROR: st.error, WARNING: st.warning, INFO: st.info, OK: st.success}

ctx = ui.page_header(
    "Health",
    "Automatic checks on each run's step table, split by policy lag (declared policy_lag, else "
    "measured: a step whose token log-ratios are all 0 is on-policy). Clip share and KL old→new "
    "are judged on off-policy steps only, in the algorithm's own unit and with the run's ε (an "
    "unknown ε is never filled in; a recorded run that did not state its ε is judged at the "
    "recorder's default, and the finding says so); spikes and trends against steps of the same "
    "lag nearby. Also: sampler/trainer "
    "mismatch, stale old log-probs, zero-variance groups, the entropy trend, length read with "
    "truncation at the cap and the reward (collapse, blow-up, overlong answers cured, end of "
    "sequence never seen), "
    "non-finite values, and runs that stopped without finishing.",
)
shown = ui.shown_runs(
    ctx,
    empty="No runs: the root is empty. See the Runs page.",
    defaulted="No runs selected: checking the {n} most recent.",
)

problems: list[str] = []
results = []
for run in shown:
    t = data.load_steps(run)
    problems += [f"{run.label}: {p}" for p in t.problems]
    split = lag_split(in_step_order(t.df))
    results.append((run, t, split, ui.health_report(run, t.df)))

per_run = pd.DataFrame(
    [
        {
            "run": ctx.label(run),
            "algorithm": line_style.algorithm_text(run.algorithm),
            "status": run.status,
            "steps": len(t.df),
            "policy lag": f"{split.source}: {split.n_on} on / {split.n_off} off",
            "errors": sum(f.severity == ERROR for f in found),
            "warnings": sum(f.severity == WARNING for f in found),
            "notes": sum(f.severity == INFO for f in found),
            "most severe": found[0].title if found else "",
            "not checked": len(report.not_checked),
        }
        for run, t, split, report in results
        for found in [report.findings]
    ]
)
st.dataframe(per_run, hide_index=True)


def live_line(run) -> str:
    """What the recorder reported while the run trained (run.json ``findings``), in one line."""
    found = run.info.other.get("findings") if run.info is not None else None
    if not isinstance(found, list) or not found:
        return ""
    parts = [
        f"{f.get('code')} ({f.get('severity')}) at step {f.get('step')}"
        for f in found
        if isinstance(f, dict)
    ]
    return "Reported live by the recorder: " + ", ".join(parts) + "."


def culprit_links(run, steps: tuple[int, ...]) -> None:
    """Links to the Sequences page at the finding's worst steps. The link text is ours; the run's
    label (what its bound run picker reads from ``?run=``; untrusted text) only travels as a
    query-parameter value, encoded by Streamlit."""
    if not steps:
        return
    if not run.has_sequences:
        st.caption("This run has no sequences table: its steps cannot be opened.")
        return
    for col, step in zip(st.columns(len(steps)), steps, strict=True):
        col.page_link(
            "app_pages/sequences.py",
            label=f"Open step {step} on the Sequences page",
            icon=":material/open_in_new:",
            query_params={"run": ctx.label(run), "step": str(step)},
        )


for run, t, split, report in results:
    found = report.findings
    worst = found[0].severity if found else OK
    n_bad = sum(f.severity in (ERROR, WARNING) for f in found)
    n_info = sum(f.severity == INFO for f in found)
    head = f"{ui.md_escape(ctx.label(run))} · {ui.md_escape(line_style.algorithm_text(run.algorithm))} · {run.status} · {len(t.df)} steps"
    label = f"{head} — {n_bad} finding{'s' if n_bad != 1 else ''}"
    if n_info:  # info findings are not problems, but the table names them: say they are here
        label += f", {n_info} note{'s' if n_info != 1 else ''}"
    if report.not_checked:  # a card with no finding may still have checked little
        label += f"; {len(report.not_checked)} of {len(report.checked) + len(report.not_checked)}"
        label += " checks could not run"
    with st.expander(label, expanded=n_bad > 0, icon=ICON[worst]):
        st.caption(ui.md_escape(split.describe()))
        st.markdown(ui.md_escape(report.checked_line()))
        st.markdown(ui.md_escape(report.not_checked_line()))
        if live := live_line(run):
            st.caption(ui.md_escape(live))
        for f in found:
            text = f"**{ui.md_escape(f.title)}**  \n{ui.md_escape(f.evidence)}"
            if f.advice:
                text += f"  \n*What to do:* {ui.md_escape(f.advice)}"
            text += f"  \n`{f.code}`"
            BOX[f.severity](text, icon=ICON[f.severity])
            culprit_links(run, f.culprits)
        ui.import_details(run, key=f"health-{run.key}")  # nothing for a recorded run

ui.notice_problems(shown, problems)
