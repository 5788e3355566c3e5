"""Health: automatic findings per run, each with its evidence and what to do."""

import pandas as pd
import streamlit as st

from app import data, ui
from app.health import ERROR, INFO, OK, WARNING

ICON = {
    ERROR: ":material/error:",
    WARNING: ":material/warning:",
    INFO: ":material/info:",
    OK: ":material/check_circle:",
}

ctx = ui.page_header(
    "Health",
    "Automatic checks on each run's step table: ratios identically 1 (on-policy: clip metrics mean "
    "nothing), clip fraction far from the algorithm's usual range for its ε, most groups "
    "zero-variance, KL or log-ratio spikes, length collapse or blow-up, non-finite values, and "
    "runs that stopped without finishing.",
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
    found = ui.findings_for(run, t.df)
    results.append((run, t, found))

summary = pd.DataFrame(
    [
        {
            "run": run.name,
            "algorithm": run.algorithm.upper(),
            "status": run.status,
            "steps": len(t.df),
            "errors": sum(f.severity == ERROR for f in found),
            "warnings": sum(f.severity == WARNING for f in found),
            "most severe": found[0].title if found else "",
        }
        for run, t, found in results
    ]
)
st.dataframe(summary, hide_index=True)

for run, t, found in results:
    worst = found[0].severity if found else OK
    n_bad = sum(f.severity in (ERROR, WARNING) for f in found)
    head = f"{ui.md_escape(run.name)} · {run.algorithm.upper()} · {run.status} · {len(t.df)} steps"
    with st.expander(
        f"{head} — {n_bad} finding{'s' if n_bad != 1 else ''}", expanded=n_bad > 0, icon=ICON[worst]
    ):
        for f in found:
            box = {ERROR: st.error, WARNING: st.warning, INFO: st.info, OK: st.success}[f.severity]
            text = f"**{ui.md_escape(f.title)}**  \n{ui.md_escape(f.evidence)}"
            if f.advice:
                text += f"  \n*What to do:* {ui.md_escape(f.advice)}"
            box(text, icon=ICON[f.severity])

ui.notice_problems(shown, problems)
