"""Benchmark: what RunRecorder costs a training loop, on CPU.

Part 1 (B=512, T=1024): the time ``log_step`` blocks the caller, relative to ``gspo_loss``
forward+backward on the same tensors (goal: at most 0.5x), with Parquet only and with
Parquet+MLflow (SQLite store in a temp folder). Each iteration runs the loss's forward+backward
and then ``log_step``, as a training loop does, so the background writers compete with the loss
for the CPU and the GIL exactly as they would in training. Two input sets: "minimal" (rewards,
logprobs, old_logprobs, mask, loss) and "full" (+ ref_logprobs, entropy, truncated, extras).

Part 2: wall time of a whole training loop with the recorder and both sinks against the same loop
without it (goal: under 5% slower). The loop is the demo's (``training_hooks.demo.train``: a
small causal transformer sampling, scoring and updating on CPU). Variants alternate (off,
Parquet, Parquet+MLflow, off, ...) and the table reports the median of each, so drift of a shared
machine hits all; it also reports the process's CPU time (all threads of the training process)
and the CPU time of the MLflow child process, which a busy neighbour disturbs less than wall time.

    python bench/bench_hooks.py [--B 512] [--T 1024] [--iters 15] [--loop-steps 60] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

import torch

from gspo_metrics import gspo_loss
from training_hooks import RunRecorder


def make_inputs(B: int, T: int, G: int = 8, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=g) * 4
    lengths = torch.randint(T // 8, T + 1, (B,), generator=g)
    return {
        "rewards": torch.randint(0, 2, (B // G, G), generator=g).float(),
        "logits": old + 0.01 * torch.randn(B, T, generator=g),
        "old_logprobs": old,
        "mask": torch.arange(T)[None, :] < lengths[:, None],
        "ref_logprobs": old + 0.05 * torch.randn(B, T, generator=g),
        "entropy": torch.rand(B, T, generator=g),
        "truncated": torch.rand(B, generator=g) < 0.1,
    }


def bench_blocking(args, tmp: str) -> list[tuple[str, float, float, float]]:
    x = make_inputs(args.B, args.T)
    from gspo_metrics import group_advantages

    adv = group_advantages(x["rewards"]).flatten()
    rows = []
    configs = [
        ("parquet", None, False),
        ("parquet", None, True),
        ("parquet+mlflow", f"sqlite:///{tmp}/mlflow.db", False),
        ("parquet+mlflow", f"sqlite:///{tmp}/mlflow.db", True),
    ]
    for sinks, uri, full in configs:
        loss_t, log_t = [], []
        with RunRecorder(
            root=os.path.join(tmp, "runs"), name=f"bench-{sinks}", algorithm="gspo", mlflow=uri
        ) as rec:
            for i in range(args.iters + 2):
                t0 = time.perf_counter()
                lp = x["logits"].clone().requires_grad_()
                out = gspo_loss(lp, x["old_logprobs"], adv, x["mask"])
                out.loss.backward()
                t1 = time.perf_counter()
                kw = {}
                if full:
                    kw = {
                        "ref_logprobs": x["ref_logprobs"],
                        "entropy": x["entropy"],
                        "truncated": x["truncated"],
                        "extra": {"lr": 1e-6, "grad_norm": lp.grad.norm()},
                    }
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
                t2 = time.perf_counter()
                if i >= 2:  # warm-up: first allocations, MLflow store opening
                    loss_t.append(t1 - t0)
                    log_t.append(t2 - t1)
        lm, bm = statistics.median(loss_t), statistics.median(log_t)
        rows.append((f"{sinks}, {'full' if full else 'minimal'} inputs", lm, bm, bm / lm))
    return rows


LOOP_VARIANTS = ("without recorder", "with Parquet", "with Parquet + MLflow")


def bench_loop(args, tmp: str):
    """Wall and process-CPU time of the demo loop per variant, alternating variants per repeat."""
    from training_hooks.demo import DemoConfig, train

    config = DemoConfig(algorithm="gspo", steps=args.loop_steps)
    train(DemoConfig(algorithm="gspo", steps=1))  # warm start (cached) and first-call costs
    from mlflow.tracking import MlflowClient

    # an existing store, as after a user's first run (a new one spends seconds migrating)
    MlflowClient(f"sqlite:///{tmp}/loop-mlflow.db").search_experiments()
    wall: dict[str, list[float]] = {v: [] for v in LOOP_VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in LOOP_VARIANTS}
    child: dict[str, list[float]] = {v: [] for v in LOOP_VARIANTS}
    stats: dict[str, list[dict]] = {v: [] for v in LOOP_VARIANTS}
    for r in range(args.repeats):
        for variant in LOOP_VARIANTS:
            uri = f"sqlite:///{tmp}/loop-mlflow.db" if "MLflow" in variant else None
            c0, t0 = time.process_time(), time.perf_counter()
            if variant == LOOP_VARIANTS[0]:
                train(config)
            else:
                rec = RunRecorder(
                    root=os.path.join(tmp, "loop-runs"),
                    name=f"loop-{r}",
                    algorithm="gspo",
                    config={"steps": args.loop_steps},
                    mlflow=uri,
                )
                train(config, recorder=rec)
            # the loop itself: close() (final flush, compaction, MLflow upload) comes after
            wall[variant].append(time.perf_counter() - t0)
            cpu[variant].append(time.process_time() - c0)
            if variant != LOOP_VARIANTS[0]:
                k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                rec.close()  # waits for the MLflow child process to exit
                k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                child[variant].append(k1.ru_utime + k1.ru_stime - k0.ru_utime - k0.ru_stime)
                stats[variant].append(rec.cpu_stats())
            else:
                child[variant].append(0.0)
    return wall, cpu, child, stats, config.optimizer_steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=512)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=15, help="timed log_step calls per config")
    ap.add_argument("--loop-steps", type=int, default=60, help="demo rollout steps per loop run")
    ap.add_argument("--repeats", type=int, default=3, help="loop runs with and without")
    ap.add_argument("--skip-loop", action="store_true")
    ap.add_argument("--skip-blocking", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # MLflow puts a SQLite store's artifacts under ./mlruns: keep them here
        if not args.skip_blocking:
            rows = bench_blocking(args, tmp)
            print(f"\nlog_step blocking time, B={args.B}, T={args.T} (median of {args.iters})")
            print(f"{'sinks / inputs':<32} {'loss fwd+bwd':>13} {'log_step':>10} {'ratio':>7}")
            for name, lm, bm, ratio in rows:
                print(f"{name:<32} {lm * 1e3:>10.1f} ms {bm * 1e3:>7.1f} ms {ratio:>6.2f}x")
        if args.skip_loop:
            return
        try:
            wall, cpu, child, stats, n = bench_loop(args, tmp)
        except ImportError as e:
            print(f"\nloop benchmark skipped: {e}", file=sys.stderr)
            return
        base_w = statistics.median(wall[LOOP_VARIANTS[0]])
        base_c = statistics.median(cpu[LOOP_VARIANTS[0]])
        print(f"\nwhole demo loop, {n} optimizer steps, median of {args.repeats} alternating runs")
        print(
            f"{'variant':<24} {'wall':>8} {'overhead':>9} {'process CPU':>12} {'overhead':>9}"
            f" {'child CPU':>10}"
        )
        for v in LOOP_VARIANTS:
            w, c = statistics.median(wall[v]), statistics.median(cpu[v])
            print(
                f"{v:<24} {w:>7.2f}s {100 * (w / base_w - 1):>+8.1f}% {c:>11.2f}s "
                f"{100 * (c / base_c - 1):>+8.1f}% {statistics.median(child[v]):>9.2f}s"
                "   wall runs: " + ", ".join(f"{t:.2f}" for t in wall[v])
            )
        # CPU accounting, robust to a busy machine: what the recorder itself spent per step
        base_step = base_c / n
        print(f"\nrecorder CPU per optimizer step (the loop without it: {base_step * 1e3:.1f} ms)")
        print(
            f"{'variant':<24} {'log_step':>9} {'sink threads':>13} {'in-process':>11} {'MLflow child':>13}"
        )
        for v in LOOP_VARIANTS[1:]:
            st = stats[v]
            threads = statistics.median(
                sum(x for k, x in s.items() if k not in ("steps", "log_step")) / s["steps"]
                for s in st
            )
            ls = statistics.median(s["log_step"] / s["steps"] for s in st)
            kid = statistics.median(child[v]) / n
            print(
                f"{v:<24} {ls * 1e3:>6.2f} ms {threads * 1e3:>10.2f} ms "
                f"{100 * (ls + threads) / base_step:>10.1f}% {kid * 1e3:>10.2f} ms"
            )


if __name__ == "__main__":
    main()
