"""Benchmark: what RunRecorder costs a training loop, measured from outside the product.

Part 1, ``log_step``'s blocking time (B=512, T=1024 by default): each iteration runs
``gspo_loss`` forward+backward and then ``log_step`` on the same tensors, as a training loop does
(calls timed back to back would measure the sink threads woken by the previous call, not what a
loop pays). The loss step alone is measured right before each configuration, and the ratio
log_step / loss is the figure; goals: at most 0.5x with minimal inputs (rewards, logprobs,
old_logprobs, mask, loss), at most 0.8x with more ("ref": + ref_logprobs, entropy, truncated and
two extras; "full": every input a PPO loop has, + sampler_logprobs, rollout, policy_lag). Times
are ``time.perf_counter`` around each call (after ``torch.cuda.synchronize`` on a GPU, so the
queued work is counted) and ``time.thread_time`` for the caller's CPU.

Part 2, the figure that matters on any machine: the demo's whole loop
(``training_hooks.demo.train``: a small transformer sampling, scoring and updating) with recording
on (a ``RunRecorder`` with Parquet, and with Parquet + MLflow) against the same loop with
recording off (``train(config)`` without a recorder), recorder creation included, ``close`` timed
apart; goal: at most 5% slower. The runs go A X A Y A X ... A (A: recording off), and each
recorder run is compared with the mean of the two runs around it, which cancels a drift of the
machine's speed that is linear over three runs; mean overhead with a 90% bootstrap interval.

``--code DIR`` runs every measurement on that checkout too (its packages first on
``PYTHONPATH``), alternating with this one round by round in one sitting, and prints both side by
side ("before" = DIR, "after" = this checkout). Each round of each code runs in a fresh
interpreter. On a CPU the figures depend on the machine and its load; a GPU (``--device cuda``)
is where the diagnostics' route is meant to run, and its figure is the one to trust.

    python bench/bench_hooks.py [--code DIR] [--rounds 3] [--device cpu|cuda] [--threads N]
        [--B 512] [--T 1024] [--iters 30] [--inputs minimal,full] [--sinks parquet]
        [--loop-steps 50] [--loop-repeats 4] [--skip-blocking] [--skip-loop]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
#: The blocking goal of each input set: log_step's time over the loss step's.
GOALS = {"minimal": 0.5, "ref": 0.8, "full": 0.8}
SINKS = {"parquet": None, "parquet+mlflow": "sqlite:///{tmp}/mlflow.db"}
LOOP_VARIANTS = ("recording off", "Parquet", "Parquet + MLflow")
LOOP_GOAL = 0.05


# ----------------------------------------------------------------------------- part 1 (worker)


def make_inputs(B: int, T: int, device: str, G: int = 8, seed: int = 0) -> dict:
    import torch

    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=g) * 4 - 1  # log-probs <= 0 with the noise
    lengths = torch.randint(max(1, T // 8), T + 1, (B,), generator=g)  # (no empty row)
    x = {
        "rewards": torch.randint(0, 2, (B // G, G), generator=g).float(),
        "logits": old + 0.01 * torch.randn(B, T, generator=g),
        "old_logprobs": old,
        "mask": torch.arange(T)[None, :] < lengths[:, None],
        "ref_logprobs": old + 0.05 * torch.randn(B, T, generator=g),
        "entropy": torch.rand(B, T, generator=g),
        "truncated": torch.rand(B, generator=g) < 0.1,
        "sampler_logprobs": old + 0.02 * torch.randn(B, T, generator=g),
    }
    return {k: v.to(device) for k, v in x.items()}


def _step_kwargs(inputs: str, x: dict, lp, i: int) -> dict:
    """log_step's optional arguments of an input set (``GOALS``)."""
    if inputs not in GOALS:
        raise ValueError(f"unknown input set {inputs!r}; valid: {', '.join(GOALS)}")
    kw: dict = {}
    if inputs != "minimal":
        kw = {
            "ref_logprobs": x["ref_logprobs"],
            "entropy": x["entropy"],
            "truncated": x["truncated"],
            "extra": {"lr": 1e-6, "grad_norm": lp.grad.norm()},
        }
    if inputs == "full":
        kw.update(sampler_logprobs=x["sampler_logprobs"], rollout=i // 2, policy_lag=i % 2)
    return kw


def blocking_worker(args, tmp: str) -> list[dict]:
    """Every (sinks, inputs) configuration once: the loss alone, then (loss, log_step) pairs.
    Medians of ``iters`` (two warm-up iterations dropped)."""
    import torch

    from gspo_metrics import group_advantages, gspo_loss
    from training_hooks import RunRecorder

    x = make_inputs(args.B, args.T, args.device)
    adv = group_advantages(x["rewards"]).flatten()
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    med = statistics.median

    def loss_step():
        lp = x["logits"].clone().requires_grad_()
        out = gspo_loss(lp, x["old_logprobs"], adv, x["mask"])
        out.loss.backward()
        sync()
        return lp, out

    def loss_alone() -> tuple[float, float]:
        """Median wall and caller-thread CPU seconds of the loss step alone."""
        ts, cs = [], []
        for i in range(args.iters + 2):
            t0, c0 = time.perf_counter(), time.thread_time()
            loss_step()
            if i >= 2:
                ts.append(time.perf_counter() - t0)
                cs.append(time.thread_time() - c0)
        return med(ts), med(cs)

    rows = []
    for sinks in args.sinks.split(","):
        for inputs in args.inputs.split(","):
            base, base_cpu = loss_alone()
            wall, cpu, it = [], [], []
            uri = SINKS[sinks] and SINKS[sinks].format(tmp=tmp)
            root = os.path.join(tmp, "runs")
            with RunRecorder(root=root, name=f"bench-{sinks}", algorithm="gspo", mlflow=uri) as rec:
                for i in range(args.iters + 2):
                    t0 = time.perf_counter()
                    lp, out = loss_step()
                    kw = _step_kwargs(inputs, x, lp, i)
                    t1, c1 = time.perf_counter(), time.thread_time()
                    rec.log_step(
                        i,
                        rewards=x["rewards"],
                        logprobs=lp,
                        old_logprobs=x["old_logprobs"],
                        mask=x["mask"],
                        advantages=adv,
                        loss=out,
                        **kw,
                    )
                    sync()
                    t2, c2 = time.perf_counter(), time.thread_time()
                    if i >= 2:  # warm-up: first allocations, the MLflow store opening
                        wall.append(t2 - t1)
                        cpu.append(c2 - c1)
                        it.append(t2 - t0)
            rows.append(
                {
                    "sinks": sinks,
                    "inputs": inputs,
                    "loss_s": base,
                    "loss_cpu_s": base_cpu,
                    "log_step_s": med(wall),
                    "log_step_cpu_s": med(cpu),
                    "iteration_s": med(it),
                }
            )
    return rows


# ----------------------------------------------------------------------------- part 2 (worker)


def _loop_once(variant: str, config, root: str, uri: str | None, name: str) -> dict:
    """One demo loop: wall and process CPU of the loop (recorder creation included, ``close``
    not), then ``close`` (final flush, compaction, MLflow upload) timed apart."""
    from training_hooks import RunRecorder
    from training_hooks.demo import train

    c0, t0 = time.process_time(), time.perf_counter()
    rec = None
    if variant == LOOP_VARIANTS[0]:
        train(config)  # recording off: the same loop, no recorder
    else:
        rec = RunRecorder(root=root, name=name, algorithm="gspo", config={}, mlflow=uri)
        train(config, recorder=rec)
    out = {"variant": variant, "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    t1 = time.perf_counter()
    if rec is not None:
        rec.close()
    out["close"] = time.perf_counter() - t1
    return out


def loop_worker(args, tmp: str) -> list[dict]:
    """A X A Y ... A (A: recording off), after one discarded warm-up run of each variant."""
    from training_hooks.demo import DemoConfig

    config = DemoConfig(algorithm="gspo", steps=args.loop_steps, device=args.device)
    warm = DemoConfig(algorithm="gspo", steps=2, device=args.device)
    uri = f"sqlite:///{tmp}/loop-mlflow.db"
    root = os.path.join(tmp, "loop-runs")
    for v in LOOP_VARIANTS:  # imports, first calls, the warm-start cache, the store's migration
        _loop_once(v, warm, root, uri if "MLflow" in v else None, "warm")
    base, others = LOOP_VARIANTS[0], LOOP_VARIANTS[1:]
    order = []
    for r in range(args.loop_repeats):
        for v in others if r % 2 == 0 else others[::-1]:
            order += [base, v]
    order.append(base)
    return [
        _loop_once(v, config, root, uri if "MLflow" in v else None, f"loop-{i}")
        for i, v in enumerate(order)
    ]


def worker(args) -> None:
    """One round of one code, in this interpreter: JSON on stdout."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    elif args.worker == "loop":  # the demo's own default (its matrices are tiny)
        from training_hooks.demo.config import Session

        torch.set_num_threads(Session().threads)
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # MLflow puts a SQLite store's artifacts under ./mlruns: keep them here
        out = {"threads": torch.get_num_threads(), "load_start": os.getloadavg()[0]}
        if args.worker == "blocking":
            out["rows"] = blocking_worker(args, tmp)
        else:
            out["runs"] = loop_worker(args, tmp)
        out["load_end"] = os.getloadavg()[0]
    print(json.dumps(out))


# ----------------------------------------------------------------------------- the driver


def _run_round(code: Path, part: str, args) -> dict:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(code), os.environ.get("PYTHONPATH", "")])
    )
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", part]
    for key in ("B", "T", "iters", "threads", "inputs", "sinks", "device"):
        cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    cmd += ["--loop-steps", str(args.loop_steps), "--loop-repeats", str(args.loop_repeats)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{part} round on {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _codes(args) -> list[tuple[str, Path]]:
    here = ("after", HERE)
    return [("before", Path(args.code).resolve()), here] if args.code else [("this", HERE)]


def _alternate(args, part: str) -> dict[str, list[dict]]:
    """``rounds`` rounds of each code, alternating (before, after, after, before, ...)."""
    codes = _codes(args)
    got: dict[str, list[dict]] = {label: [] for label, _ in codes}
    for r in range(args.rounds):
        for label, code in codes if r % 2 == 0 else codes[::-1]:
            res = _run_round(code, part, args)
            got[label].append(res)
            print(
                f"  {part} round {r + 1}, {label}: load {res['load_start']:.1f} -> "
                f"{res['load_end']:.1f}",
                file=sys.stderr,
                flush=True,
            )
    return got


def print_blocking(args, got: dict[str, list[dict]]) -> None:
    med = statistics.median
    labels = list(got)
    threads = next(iter(got.values()))[0]["threads"]
    print(
        f"\nlog_step at B={args.B}, T={args.T} on {args.device}, torch threads {threads}; per "
        f"round the median of {args.iters} iterations, then the median over {args.rounds} "
        "rounds (each round's ratios in brackets). 'blocks': log_step's wall time over the "
        "loss fwd+bwd measured right before it; 'CPU': the same ratio of the caller thread's CPU "
        "times (with --threads 1 every op of both runs there: a ratio the machine's load "
        "distorts far less than wall time); 'iteration': loss + log_step over the loss alone"
    )
    print(
        f"{'code':<7} {'sinks':<15} {'inputs':<8} {'loss':>8} {'log_step':>9} {'blocks':>7}"
        f" {'goal':>5} {'':>5} {'CPU':>6} {'iteration':>9}  rounds"
    )
    keys = [(r["sinks"], r["inputs"]) for r in got[labels[0]][0]["rows"]]
    for sinks, inputs in keys:
        for label in labels:
            rows = [
                r
                for res in got[label]
                for r in res["rows"]
                if (r["sinks"], r["inputs"]) == (sinks, inputs)
            ]
            ratios = [r["log_step_s"] / r["loss_s"] for r in rows]
            ratio, goal = med(ratios), GOALS[inputs]
            print(
                f"{label:<7} {sinks:<15} {inputs:<8} {med(r['loss_s'] for r in rows) * 1e3:>5.1f} ms"
                f" {med(r['log_step_s'] for r in rows) * 1e3:>6.2f} ms {ratio:>6.2f}x {goal:>4.1f}x"
                f" {'ok' if ratio <= goal else 'over':>5}"
                f" {med(r['log_step_cpu_s'] / r['loss_cpu_s'] for r in rows):>5.2f}x"
                f" {med(r['iteration_s'] / r['loss_s'] for r in rows) - 1:>+8.0%}"
                f"  [{', '.join(f'{x:.2f}' for x in ratios)}]"
            )
    _print_load(got)


def _overheads(runs: list[dict], v: str, key: str) -> list[float]:
    """Per run of variant ``v``: its ``key`` over the mean of the two runs around it (recording
    off), minus 1."""
    return [
        runs[i][key] / ((runs[i - 1][key] + runs[i + 1][key]) / 2) - 1
        for i in range(1, len(runs) - 1)
        if runs[i]["variant"] == v
    ]


def _mean_ci(xs: list[float], n_boot: int = 4000, level: float = 0.9) -> tuple[float, float, float]:
    """Mean and a bootstrap confidence interval of the mean (percentile method, fixed seed)."""
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(xs, k=len(xs))) for _ in range(n_boot))
    lo, hi = means[int((1 - level) / 2 * n_boot)], means[int((1 + level) / 2 * n_boot) - 1]
    return statistics.fmean(xs), lo, hi


def print_loop(args, got: dict[str, list[dict]]) -> None:
    from training_hooks.demo import DemoConfig

    n = DemoConfig(steps=args.loop_steps).optimizer_steps
    print(
        f"\nthe demo's whole loop on {args.device}, {n} optimizer steps, torch threads "
        f"{next(iter(got.values()))[0]['threads']}, recording on against "
        f"off; {args.loop_repeats} runs of each recorded variant per round, each between two "
        f"runs with recording off, {args.rounds} round(s). Overhead: mean over runs of (run / "
        "mean of its two neighbours - 1), 90% bootstrap interval; goal at most "
        f"+{LOOP_GOAL:.0%}"
    )
    print(
        f"{'code':<7} {'recording':<17} {'runs':>4} {'wall':>8} {'wall overhead':>24}"
        f" {'CPU overhead':>24} {'':>5} {'close':>7}"
    )
    for label, rounds in got.items():
        runs_by_round = [res["runs"] for res in rounds]
        for v in LOOP_VARIANTS:
            mine = [r for runs in runs_by_round for r in runs if r["variant"] == v]
            cols, verdict = [], ""
            for key in ("wall", "cpu"):
                if v == LOOP_VARIANTS[0]:
                    cols.append("")
                    continue
                xs = [x for runs in runs_by_round for x in _overheads(runs, v, key)]
                m, lo, hi = _mean_ci(xs)
                cols.append(f"{m:+.1%} [{lo:+.1%}, {hi:+.1%}]")
                if key == "wall":
                    verdict = "ok" if m <= LOOP_GOAL else "over"
            print(
                f"{label:<7} {v:<17} {len(mine):>4} {statistics.median(r['wall'] for r in mine):>7.2f}s"
                f" {cols[0]:>24} {cols[1]:>24} {verdict:>5}"
                f" {statistics.median(r['close'] for r in mine):>6.2f}s"
            )
    _print_load(got)


def _print_load(got: dict[str, list[dict]]) -> None:
    loads = [
        x for rounds in got.values() for res in rounds for x in (res["load_start"], res["load_end"])
    ]
    print(
        f"(1-minute load average over the rounds: {min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} CPUs)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", help="another checkout to measure too, alternating (before)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each code, alternating")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda when a GPU is there")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--B", type=int, default=512)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=30, help="timed log_step calls per config")
    ap.add_argument("--inputs", default="minimal,full", help="input sets: " + ",".join(GOALS))
    ap.add_argument("--sinks", default="parquet", help="sink sets: " + ",".join(SINKS))
    ap.add_argument("--loop-steps", type=int, default=50, help="demo rollout steps per loop run")
    ap.add_argument("--loop-repeats", type=int, default=4, help="runs of each recorded variant")
    ap.add_argument("--skip-blocking", action="store_true")
    ap.add_argument("--skip-loop", action="store_true")
    ap.add_argument("--worker", choices=("blocking", "loop"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    print(f"{os.cpu_count()} CPUs; codes: " + ", ".join(f"{k} = {v}" for k, v in _codes(args)))
    if not args.skip_blocking:
        print_blocking(args, _alternate(args, "blocking"))
    if not args.skip_loop:
        print_loop(args, _alternate(args, "loop"))


if __name__ == "__main__":
    main()
