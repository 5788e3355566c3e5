"""The demo's regime and time: run the default demo, then read its recorded runs back.

    python bench/bench_demo_learning.py            # the default demo, in a fresh temporary folder
    python bench/bench_demo_learning.py --keep DIR # keep the runs and mlflow.db in DIR
    python bench/bench_demo_learning.py -- --steps 60 --no-mlflow   # extra demo arguments

Runs ``python -m training_hooks.demo`` as a user would (a fresh working directory, so a fresh
``mlflow.db`` whose migration is part of the time), measures its wall time, the CPU time of its
process tree and the load average, and then reads each run's Parquet step table (not the demo's
own printout) and checks it against the bands of the demo's regime
(``training_hooks.demo.config.REGIME_BANDS``, docs/demo.md):

- it learns: mean reward of the last fifth of the rollout steps minus the first fifth >= 0.15
  (rewards are 0 or 1, so that is 0.15 of the reward range);
- GRPO's off-policy token clip share (tokens outside [1-0.2, 1+0.2]: the mean over the optimizer
  steps at policy lag >= 1 of each step's share, as the demo's table, Compare and Health average
  it) between 0.05% and 3%;
- GSPO's off-policy sequence clip share (sequences outside the run's own sequence range) between
  5% and 40%;
- no warning or error from the Health checks (``training_hooks.run_summary.page_findings``: what the page lists);
- the entropy does not collapse: mean of the last fifth >= 0.3 of the first fifth.

It prints one Markdown row per run (the table in docs/demo.md) and exits with status 1 when a
band is missed or the demo took longer than ``LIMIT_S``.
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import subprocess
import sys
import tempfile
import time

import pandas as pd

from training_hooks import findings, schema, tables
from training_hooks.demo.config import REGIME_BANDS
from training_hooks.run_summary import page_findings
from training_hooks.schema import Step

LIMIT_S = 30.0


def fifths(s: pd.Series) -> tuple[float, float]:
    k = max(1, len(s) // 5)
    return float(s.iloc[:k].mean()), float(s.iloc[-k:].mean())


def report(run_dir: str) -> dict:
    """One run's numbers from its step table: reward, clip shares, entropy, zero-variance groups,
    truncation and KL by fifths of the rollout steps, and its Health findings."""
    info = schema.read_run_info(run_dir)
    df = tables.read_table(run_dir, schema.STEPS_DIR)
    per_rollout = df.groupby(Step.ROLLOUT)
    reward = per_rollout[Step.REWARD_MEAN].mean()  # minibatches hold equal numbers of sequences
    off = df[df[Step.POLICY_LAG] > 0]  # a step at lag 0 has ratio 1
    found = page_findings(run_dir, info)  # what the Health page lists
    return {
        "algorithm": info.algorithm,
        "eps": f"{info.seq_eps_low:g}/{info.seq_eps_high:g}",
        "rollouts": len(reward),
        "optimizer_steps": len(df),
        "reward": fifths(reward),
        "seq_clip_off": float(off[Step.SEQ_CLIP_FRACTION].mean()),
        "tok_clip_off": float(off[Step.TOKEN_CLIP_FRACTION].mean()),  # a mean of step shares
        "entropy": fifths(per_rollout[Step.ENTROPY_MEAN].mean()),
        "zero_var": fifths(per_rollout[Step.ZERO_VARIANCE_FRACTION].mean()),
        "truncated": fifths(per_rollout[Step.TRUNCATED_FRACTION].mean()),
        "kl_ref_last": fifths(per_rollout[Step.KL_REF_MEAN].mean())[1],
        "alarms": [f.code for f in found if f.severity in (findings.ERROR, findings.WARNING)],
        "notes": [f.code for f in found if f.severity == findings.INFO],
        "status": info.status,
    }


def in_band(name: str, value: float) -> bool:
    lo, hi = REGIME_BANDS[name]
    return (lo is None or value >= lo) and (hi is None or value <= hi)


def misses(r: dict) -> list[str]:
    """The bands this run misses, by name."""
    out = []
    first, last = r["reward"]
    if not in_band("gain", last - first):
        out.append("gain")
    if r["algorithm"] == "grpo" and not in_band("grpo_tok_clip_off", r["tok_clip_off"]):
        out.append("grpo_tok_clip_off")
    if r["algorithm"] == "gspo" and not in_band("gspo_seq_clip_off", r["seq_clip_off"]):
        out.append("gspo_seq_clip_off")
    if not in_band("entropy_kept", r["entropy"][1] / r["entropy"][0]):
        out.append("entropy_kept")
    if r["alarms"]:
        out.append("health: " + ",".join(r["alarms"]))
    if r["status"] != schema.STATUS_FINISHED:
        out.append("status " + r["status"])
    return out


def markdown_row(r: dict) -> str:
    (r0, r1), (e0, e1), (z0, z1), (t0, t1) = (
        r["reward"],
        r["entropy"],
        r["zero_var"],
        r["truncated"],
    )
    health_cell = ", ".join(r["alarms"]) or "no warning" + (
        f" (info: {', '.join(r['notes'])})" if r["notes"] else ""
    )
    return (
        f"| {r['algorithm']} | {r0:.3f} -> {r1:.3f} (+{r1 - r0:.3f}) "
        f"| {r['tok_clip_off']:.2%} | {r['seq_clip_off']:.1%} | {e0:.2f} -> {e1:.2f} "
        f"| {z0:.2f} -> {z1:.2f} | {t0:.3f} -> {t1:.3f} | {r['kl_ref_last']:.3f} "
        f"| {health_cell} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keep", default=None, help="run in this folder and keep what it writes")
    p.add_argument("demo_args", nargs="*", help="extra arguments for the demo (after --)")
    args = p.parse_args(argv)
    workdir = args.keep or tempfile.mkdtemp(prefix="gspo-dash-demo-")
    os.makedirs(workdir, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    cmd = [sys.executable, "-m", "training_hooks.demo", "--out", "runs", *args.demo_args]
    print(f"$ (cd {workdir} && python {' '.join(cmd[1:])})", flush=True)
    load0 = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    load1 = os.getloadavg()[0]
    sys.stdout.write(proc.stdout)
    if proc.returncode:
        print(f"demo failed with exit status {proc.returncode}")
        return 1

    runs = sorted(glob.glob(os.path.join(workdir, "runs", "*", schema.RUN_JSON)))
    rows = [report(os.path.dirname(r)) for r in runs]
    print()
    print(f"wall time of the whole demo (all runs, MLflow included): {wall:.1f} s")
    print(
        f"CPU time of the demo and its child processes: {cpu:.1f} s; load average (1 min) "
        f"{load0:.1f} before, {load1:.1f} after, on {os.cpu_count()} CPUs (a shared machine "
        "stretches the wall time, not the CPU time)"
    )
    print()
    print(
        "| algo | reward first 1/5 -> last 1/5 | token clip, off-policy | sequence clip, "
        "off-policy | entropy first -> last 1/5 | zero-var groups | truncated | KL to ref, "
        "last 1/5 | Health |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    missed = []
    for r in rows:
        print(markdown_row(r))
        missed += [f"{r['algorithm']}: {m}" for m in misses(r)]
    if wall > LIMIT_S:
        missed.append(f"wall time {wall:.1f} s > {LIMIT_S:.0f} s")
    print()
    print(
        f"bands (docs/demo.md) and wall time <= {LIMIT_S:.0f} s: " + ("; ".join(missed) or "PASS")
    )
    if not args.keep:
        print(f"(runs kept in {workdir})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
