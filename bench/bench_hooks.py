"""Benchmark: what RunRecorder costs a training loop, on CPU.

Part 1 (B=512, T=1024): the time ``log_step`` blocks the caller, relative to ``gspo_loss``
forward+backward on the same tensors measured alone first (goals, printed beside each row: at
most 0.27x with minimal inputs, 0.30x with full inputs), with Parquet only
and with Parquet+MLflow (SQLite store in a temp folder), reducing on the recorder's background
thread (``compute_thread=True``; the default when torch leaves a core spare) and on the caller's
thread (``compute_thread=False``; the default when torch uses every core). Each
iteration runs the loss's forward+backward and then ``log_step``, as a training loop does, so the
background threads compete with the loss for the CPU and the GIL as they would in training; the
"iteration" column shows that cost (loss + log_step against the loss alone). Timing calls back to
back, without the loss step between them, measures something else (the sink threads, woken by
the previous call, competing for the GIL), not what a training loop pays. Input sets
(``--inputs``): "minimal" (rewards, logprobs, old_logprobs, mask, loss), "ref" (+ ref_logprobs,
entropy, truncated, two extras) and "full" (every input a PPO loop has: ref +
sampler_logprobs, rollout, policy_lag). The extras (a learning rate and the gradient norm, which
a loop computes anyway to clip it) are built before the timer starts. ``--route`` picks where
the step is reduced (``auto``: the recorder's default for this machine) and ``--rounds`` repeats
every configuration, alternating, and reports the median ratio over the rounds.

Part 2: wall time of a whole training loop with the recorder and both sinks against the same loop
without it (goal: under 5% slower), and with Parquet but live findings off (``findings_every=0``),
so the findings thread's cost shows as the difference of two variants run in the same schedule. The loop is the demo's (``training_hooks.demo.train``: a
small causal transformer sampling, scoring and updating on CPU), recorder creation included,
``close`` (final flush, compaction, MLflow upload) timed apart. This machine's speed drifts by
10-20% over tens of seconds, more than the effect measured, so the runs go A X A Y A X ... A
(A without the recorder) and each recorder run is compared with the mean of the two baseline
runs around it, which cancels a drift that is linear over three runs; the table gives the mean
overhead with a 90% bootstrap interval. Besides wall time it reports the process's CPU time
(every thread of the training process), the CPU time of the MLflow child process, and
``RunRecorder.cpu_stats()`` per step.

    python bench/bench_hooks.py [--B 512] [--T 1024] [--iters 30] [--loop-steps 100] [--repeats 8]
        [--threads N] [--skip-blocking] [--skip-loop] [--inputs minimal,ref,full]
        [--route auto|caller|thread|both] [--sinks parquet,parquet+mlflow] [--rounds R]
        [--findings-every 10,0]
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
        "sampler_logprobs": old + 0.02 * torch.randn(B, T, generator=g),
    }


def _loss_step(x: dict, adv: torch.Tensor):
    lp = x["logits"].clone().requires_grad_()
    out = gspo_loss(lp, x["old_logprobs"], adv, x["mask"])
    out.loss.backward()
    return lp, out


#: The blocking goal of each input set: log_step's time over the loss step's.
GOALS = {"minimal": 0.27, "ref": 0.30, "full": 0.30}
SINKS = {"parquet": None, "parquet+mlflow": "sqlite:///{tmp}/mlflow.db"}


def _step_kwargs(inputs: str, x: dict, lp: torch.Tensor, i: int) -> dict:
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


def _routes(route: str) -> tuple[bool | None, ...]:
    """``compute_thread`` values to run: None (auto), False (caller), True (thread)."""
    return {"auto": (None,), "caller": (False,), "thread": (True,), "both": (True, False)}[route]


def bench_blocking(args, tmp: str) -> list[tuple]:
    """Per configuration: the loss alone (its baseline, measured right before it, as the
    machine's speed drifts), then (loss fwd+bwd, log_step) pairs as in a training loop. Returns,
    per configuration and round, (name, inputs, median loss alone, median log_step blocking,
    median whole iteration, share of steps reduced on the background thread, log_step's CPU time
    on the caller's thread over the loss's)."""
    x = make_inputs(args.B, args.T)
    from gspo_metrics import group_advantages
    from gspo_metrics.diagnostics import prepare_fused

    adv = group_advantages(x["rewards"]).flatten()
    med = statistics.median
    # A run's steady state: the kernel loaded and its split over torch's threads compiled (a
    # recorder starts both on a background thread; they take a second or two, once).
    prepare_fused(x["logits"].dtype)

    def loss_alone() -> tuple[float, float]:
        """Median wall and caller-thread CPU seconds of the loss step alone."""
        ts, cs = [], []
        for i in range(args.iters + 2):
            t0, c0 = time.perf_counter(), time.thread_time()
            _loss_step(x, adv)
            if i >= 2:
                ts.append(time.perf_counter() - t0)
                cs.append(time.thread_time() - c0)
        return med(ts), med(cs)

    rows = []
    configs = [
        (thread, sinks, inputs, every)
        for thread in _routes(args.route)
        for sinks in args.sinks.split(",")
        for inputs in args.inputs.split(",")
        for every in (int(e) for e in args.findings_every.split(","))
    ]
    for r in range(args.rounds):
        for thread, sinks, inputs, every in configs if r % 2 == 0 else configs[::-1]:
            base, base_cpu = loss_alone()
            log_t, it_t, log_c = [], [], []
            uri = SINKS[sinks] and SINKS[sinks].format(tmp=tmp)
            with RunRecorder(
                root=os.path.join(tmp, "runs"),
                name=f"bench-{sinks}",
                algorithm="gspo",
                mlflow=uri,
                compute_thread=thread,
                findings_every=every,
            ) as rec:
                for i in range(args.iters + 2):
                    t0 = time.perf_counter()
                    lp, out = _loss_step(x, adv)
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
                    t2, c2 = time.perf_counter(), time.thread_time()
                    if i >= 2:  # warm-up: first allocations, MLflow store opening
                        log_t.append(t2 - t1)
                        it_t.append(t2 - t0)
                        log_c.append(c2 - c1)
                deferred = rec._deferred
                rec.flush()
                on_thread = deferred.computed / (args.iters + 2) if deferred is not None else 0.0
            route = {None: "auto", True: "thread", False: "caller"}[thread]
            if thread is None:
                route += " (thread)" if deferred is not None else " (caller)"
            name = f"{route}, {sinks}, {inputs}"
            name += ", no findings" if not every else ""
            cpu = med(log_c) / base_cpu
            rows.append((name, inputs, base, med(log_t), med(it_t), on_thread, cpu))
            print(f"  round {r + 1}: {name}: {med(log_t) / base:.2f}x", file=sys.stderr)
    return rows


def print_blocking(args, rows: list[tuple]) -> None:
    """One line per configuration: medians over the rounds (each a median of ``iters``)."""
    med = statistics.median
    print(
        f"\nlog_step at B={args.B}, T={args.T}, torch threads {torch.get_num_threads()}, "
        f"medians of {args.iters} per round, then the median over {args.rounds} round(s). 'loss': "
        "gspo_loss fwd+bwd alone, measured right before each configuration. 'blocks': log_step's "
        "time on the caller over the loss, beside its goal. 'iteration': loss + log_step over the "
        "loss alone (what a background reduction also costs the next loss step). 'CPU': "
        "log_step's CPU time on the caller's thread over the loss's (with --threads 1 every op "
        "of both runs there: a ratio a loaded machine does not distort, unlike wall time)"
    )
    print(
        f"{'reduce on / sinks / inputs':<38} {'loss':>8} {'log_step':>9} {'blocks':>7}"
        f" {'goal':>6} {'':>6} {'iteration':>10} {'overhead':>9} {'on thread':>10} {'CPU':>6}"
    )
    names = list(dict.fromkeys(r[0] for r in rows))
    for name in names:
        mine = [r for r in rows if r[0] == name]
        inputs = mine[0][1]
        base = med(r[2] for r in mine)
        bm = med(r[3] for r in mine)
        ratio = med(r[3] / r[2] for r in mine)
        it = med(r[4] / r[2] for r in mine)
        on_thread = med(r[5] for r in mine)
        cpu = med(r[6] for r in mine)
        goal = GOALS[inputs]
        verdict = "ok" if ratio <= goal else "over"
        print(
            f"{name:<38} {base * 1e3:>5.1f} ms {bm * 1e3:>6.2f} ms {ratio:>6.2f}x"
            f" {goal:>5.2f}x {verdict:>6} {it * base * 1e3:>7.1f} ms {100 * (it - 1):>+8.0f}%"
            f" {100 * on_thread:>9.0f}% {cpu:>5.2f}x"
        )
    print(f"(load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())})")


LOOP_VARIANTS = (
    "without recorder",
    "with Parquet",
    "with Parquet + MLflow",
    "with Parquet, no findings",  # findings_every=0: what the live findings thread costs
)


def _child_cpu() -> float:
    """CPU seconds of this process's waited-for children (the MLflow child, once it exited)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _live_child_cpu(rec) -> float:
    """CPU seconds the recorder's MLflow child has used so far (Linux /proc; 0 without one)."""
    sink = getattr(rec, "mlflow_sink", None)
    child = getattr(sink, "_child", None)
    if child is None:
        return 0.0
    try:
        with open(f"/proc/{child.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    except (OSError, ValueError, IndexError):
        return float("nan")


def run_loop_variant(variant: str, config, root: str, uri: str | None, name: str) -> dict:
    """One demo loop: wall and process CPU of the loop (recorder creation included, ``close``
    not), then ``close`` (final flush, compaction, MLflow upload) and the child's CPU."""
    from training_hooks.demo import train

    k0 = _child_cpu()
    c0, t0 = time.process_time(), time.perf_counter()
    rec = None
    if variant == LOOP_VARIANTS[0]:
        train(config)
    else:
        rec = RunRecorder(
            root=root,
            name=name,
            algorithm="gspo",
            config={"steps": config.steps},
            mlflow=uri,
            **({"findings_every": 0} if "no findings" in variant else {}),
        )
        train(config, recorder=rec)
    out = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    out["child_in_loop"] = _live_child_cpu(rec)
    t1 = time.perf_counter()
    if rec is not None:
        rec.close()  # waits for the MLflow child process to exit
        out["stats"] = rec.cpu_stats()
    out["close"] = time.perf_counter() - t1
    out["child"] = _child_cpu() - k0
    return out


def bench_loop(args, tmp: str) -> tuple[list[dict], int]:
    """The loop runs as A X A Y A X A Y ... A (A: without the recorder, X and Y: the two
    recorder variants, alternating), so every recorder run has a baseline run right before and
    right after it; a warm-up run of each variant comes first and is discarded."""
    from training_hooks.demo import DemoConfig

    config = DemoConfig(algorithm="gspo", steps=args.loop_steps)
    warm = DemoConfig(algorithm="gspo", steps=2)
    from mlflow.tracking import MlflowClient

    # an existing store, as after a user's first run (a new one spends seconds migrating)
    uri = f"sqlite:///{tmp}/loop-mlflow.db"
    MlflowClient(uri).search_experiments()
    root = os.path.join(tmp, "loop-runs")
    for v in LOOP_VARIANTS:  # warm-up: imports, first-call costs, the warm-start cache
        run_loop_variant(v, warm, root, uri if "MLflow" in v else None, "warm")
    base, others = LOOP_VARIANTS[0], LOOP_VARIANTS[1:]
    order = []
    for r in range(args.repeats):
        for v in others if r % 2 == 0 else others[::-1]:
            order += [base, v]
    order.append(base)
    seq: list[dict] = []
    for i, v in enumerate(order):
        out = run_loop_variant(v, config, root, uri if "MLflow" in v else None, f"loop-{i}")
        out["variant"] = v
        seq.append(out)
        print(
            f"  run {i + 1}/{len(order)} {v:<22} wall {out['wall']:6.2f} s"
            f"  CPU {out['cpu']:6.2f} s  child CPU {out['child']:5.2f} s"
            f" ({out['child_in_loop']:.2f} s of it during the loop)",
            file=sys.stderr,
            flush=True,
        )
    return seq, config.optimizer_steps


def _overheads(seq: list[dict], v: str, key: str) -> list[float]:
    """Per run of variant ``v``: its ``key`` over the mean of the two baseline runs around it,
    minus 1 (a drift of the machine's speed that is linear over the three runs cancels)."""
    return [
        seq[i][key] / ((seq[i - 1][key] + seq[i + 1][key]) / 2) - 1
        for i in range(1, len(seq) - 1)
        if seq[i]["variant"] == v
    ]


def _mean_ci(xs: list[float], n_boot: int = 4000, level: float = 0.9) -> tuple[float, float, float]:
    """Mean and a bootstrap confidence interval of the mean (percentile method, fixed seed)."""
    import random

    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(xs, k=len(xs))) for _ in range(n_boot))
    lo = means[int((1 - level) / 2 * n_boot)]
    hi = means[int((1 + level) / 2 * n_boot) - 1]
    return statistics.fmean(xs), lo, hi


def print_loop(seq: list[dict], n: int, repeats: int) -> None:
    med = statistics.median
    base = [r for r in seq if r["variant"] == LOOP_VARIANTS[0]]
    print(
        f"\nwhole demo loop, {n} optimizer steps, torch threads {torch.get_num_threads()}; "
        f"{repeats} runs of each recorder variant, each between two runs without the recorder. "
        "Overhead: mean over runs of (run / mean of its two neighbours without the recorder - 1), "
        "with a 90% bootstrap interval"
    )
    print(
        f"{'variant':<26} {'runs':>4} {'wall':>8} {'wall overhead':>24} {'CPU overhead':>24}"
        f" {'close':>7} {'child CPU':>10} {'in loop':>8}"
    )
    for v in LOOP_VARIANTS:
        rs = [r for r in seq if r["variant"] == v]
        cols = []
        for key in ("wall", "cpu"):
            if v == LOOP_VARIANTS[0]:
                cols.append("")
            else:
                m, lo, hi = _mean_ci(_overheads(seq, v, key))
                cols.append(f"{100 * m:+.1f}% [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        print(
            f"{v:<26} {len(rs):>4} {med(r['wall'] for r in rs):>7.2f}s {cols[0]:>24} {cols[1]:>24}"
            f" {med(r['close'] for r in rs):>6.2f}s {med(r['child'] for r in rs):>9.2f}s"
            f" {med(r['child_in_loop'] for r in rs):>7.2f}s"
        )
    walls = [r["wall"] for r in base]
    print(
        f"(loop without the recorder: wall {min(walls):.2f}-{max(walls):.2f} s over its runs; "
        "CPU counts every thread of the training process, not the MLflow child; 'in loop': the "
        "child's CPU before close)"
    )
    # CPU accounting, robust to a busy machine: what the recorder itself spent per step
    base_step = med(r["cpu"] for r in base) / n
    print(f"\nrecorder CPU per optimizer step (the loop without it: {base_step * 1e3:.1f} ms)")
    print(
        f"{'variant':<26} {'log_step':>9} {'compute thread':>15} {'sink threads':>13}"
        f" {'of it findings':>15} {'in-process':>11} {'MLflow child':>13}"
    )
    for v in LOOP_VARIANTS[1:]:
        rs = [r for r in seq if r["variant"] == v]
        st = [r["stats"] for r in rs]
        skip = ("steps", "log_step", "compute")
        threads = med(sum(x for k, x in s.items() if k not in skip) / s["steps"] for s in st)
        ls = med(s["log_step"] / s["steps"] for s in st)
        comp = med(s.get("compute", 0.0) / s["steps"] for s in st)
        kid = med(r["child"] for r in rs) / n
        found = med(s.get("findings", 0.0) / s["steps"] for s in st)
        print(
            f"{v:<26} {ls * 1e3:>6.2f} ms {comp * 1e3:>12.2f} ms {threads * 1e3:>10.2f} ms "
            f"{found * 1e3:>12.2f} ms {100 * (ls + comp + threads) / base_step:>10.1f}% "
            f"{kid * 1e3:>10.2f} ms"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=512)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=30, help="timed log_step calls per config")
    ap.add_argument(
        "--loop-steps",
        type=int,
        default=100,
        help="demo rollout steps per loop run (2 optimizer steps each)",
    )
    ap.add_argument("--repeats", type=int, default=8, help="runs of each recorder variant")
    ap.add_argument("--skip-loop", action="store_true")
    ap.add_argument("--skip-blocking", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    ap.add_argument(
        "--inputs", default="minimal,full", help="input sets of part 1: " + ",".join(GOALS)
    )
    ap.add_argument("--route", default="both", choices=("auto", "caller", "thread", "both"))
    ap.add_argument("--sinks", default="parquet,parquet+mlflow", help="sink sets of part 1")
    ap.add_argument("--rounds", type=int, default=1, help="repeats of part 1's configurations")
    ap.add_argument(
        "--findings-every",
        default="10",
        help="part 1: RunRecorder findings_every values to run each configuration with "
        "(0: live findings off; e.g. 10,0 for the before/after of the findings thread)",
    )
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # MLflow puts a SQLite store's artifacts under ./mlruns: keep them here
        if not args.skip_blocking:
            print_blocking(args, bench_blocking(args, tmp))
        if args.skip_loop:
            return
        try:
            seq, n = bench_loop(args, tmp)
        except ImportError as e:
            print(f"\nloop benchmark skipped: {e}", file=sys.stderr)
            return
        print_loop(seq, n, args.repeats)


if __name__ == "__main__":
    main()
