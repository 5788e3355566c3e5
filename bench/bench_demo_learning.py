"""The demo's learning criterion: run the default demo, then read its recorded runs back.

    python bench/bench_demo_learning.py            # the default demo, in a fresh temporary folder
    python bench/bench_demo_learning.py --keep DIR # keep the runs and mlflow.db in DIR
    python bench/bench_demo_learning.py -- --steps 60 --no-mlflow   # extra demo arguments

Runs ``python -m training_hooks.demo`` as a user would (a fresh working directory, so a fresh
``mlflow.db`` whose migration is part of the time), measures its wall time, and then reads each
run's Parquet step table (not the demo's own printout) to report, per algorithm: mean reward over
the first and the last fifth of the optimizer steps, the clip fractions in both units (sequence
unit with GSPO's eps 3e-4 / 4e-4, token unit with GRPO's eps 0.2), over all steps and over the
off-policy steps only, zero-variance groups, truncation and the KL to the reference policy. It
also prints the CPU time of the demo's process tree, which other jobs on a shared machine do not
inflate the way they inflate the wall time.

Exit status 1 when a run does not learn (last fifth not at least 0.1 above the first) or the
demo took longer than 180 s.
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

from training_hooks import schema
from training_hooks.schema import Step

LIMIT_S = 180.0
MIN_GAIN = 0.1


def read_steps(run_dir: str) -> pd.DataFrame:
    files = sorted(glob.glob(os.path.join(run_dir, schema.STEPS_DIR, "*.parquet")))
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    return df.sort_values(Step.STEP).reset_index(drop=True)


def fifths(s: pd.Series) -> tuple[float, float]:
    k = max(1, len(s) // 5)
    return float(s.iloc[:k].mean()), float(s.iloc[-k:].mean())


def token_weighted(df: pd.DataFrame, col: str) -> float:
    return float((df[col] * df[Step.NUM_TOKENS]).sum() / df[Step.NUM_TOKENS].sum())


def report(run_dir: str) -> dict:
    info = schema.read_run_info(run_dir)
    df = read_steps(run_dir)
    per_rollout = df.groupby("rollout")
    reward = per_rollout[Step.REWARD_MEAN].mean()  # minibatches hold equal numbers of sequences
    first, last = fifths(reward)
    off = df[per_rollout.cumcount() > 0]  # the first optimizer step of a rollout has ratio 1
    zv_first, zv_last = fifths(per_rollout[Step.ZERO_VARIANCE_FRACTION].mean())
    tr_first, tr_last = fifths(per_rollout[Step.TRUNCATED_FRACTION].mean())
    return {
        "algorithm": info.algorithm,
        "rollouts": len(reward),
        "optimizer_steps": len(df),
        "reward_first": first,
        "reward_last": last,
        "seq_clip": float(df[Step.SEQ_CLIP_FRACTION].mean()),
        "seq_clip_off": float(off[Step.SEQ_CLIP_FRACTION].mean()),
        "tok_clip": token_weighted(df, Step.TOKEN_CLIP_FRACTION),
        "tok_clip_off": token_weighted(off, Step.TOKEN_CLIP_FRACTION),
        "zero_var": (zv_first, zv_last),
        "truncated": (tr_first, tr_last),
        "kl_ref_last": fifths(df[Step.KL_REF_MEAN])[1],
        "status": info.status,
    }


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
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    load = os.getloadavg()[0]
    sys.stdout.write(proc.stdout)
    if proc.returncode:
        print(f"demo failed with exit status {proc.returncode}")
        return 1

    runs = sorted(glob.glob(os.path.join(workdir, "runs", "*", schema.RUN_JSON)))
    rows = [report(os.path.dirname(r)) for r in runs]
    print()
    print(f"wall time of the whole demo (both runs, MLflow included): {wall:.1f} s")
    print(
        f"CPU time of the demo and its child processes: {cpu:.1f} s "
        f"(load average at the end: {load:.1f} on {os.cpu_count()} CPUs; a shared machine "
        f"stretches the wall time, not the CPU time)"
    )
    print()
    print(
        "| algo | reward first 1/5 | reward last 1/5 | seq clip (all / off-policy) "
        "| token clip (all / off-policy) | zero-var groups first -> last "
        "| truncated first -> last | KL to ref, last 1/5 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ok = wall <= LIMIT_S
    for r in rows:
        ok &= r["reward_last"] >= r["reward_first"] + MIN_GAIN and r["status"] == "finished"
        print(
            f"| {r['algorithm']} | {r['reward_first']:.3f} | {r['reward_last']:.3f} "
            f"| {r['seq_clip']:.1%} / {r['seq_clip_off']:.1%} "
            f"| {r['tok_clip']:.2%} / {r['tok_clip_off']:.2%} "
            f"| {r['zero_var'][0]:.2f} -> {r['zero_var'][1]:.2f} "
            f"| {r['truncated'][0]:.3f} -> {r['truncated'][1]:.3f} "
            f"| {r['kl_ref_last']:.3f} |"
        )
    print()
    print(
        f"criterion: last fifth >= first fifth + {MIN_GAIN} for every run, "
        f"wall time <= {LIMIT_S:.0f} s: {'PASS' if ok else 'FAIL'}"
    )
    if not args.keep:
        print(f"(runs kept in {workdir})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
