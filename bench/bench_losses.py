"""Benchmark: loss forward+backward and per-sequence diagnostics at B=512, T=1024 on CPU.

Every time is the median of several repeats, and each row also gives its ratio to the GRPO loss's
forward+backward measured in the same run (ratios survive a noisy, shared machine better than
seconds do). The baseline row "seed loop" is the Tinker seed's reference code applied sequence by
sequence, the obvious way to write GSPO without vectorising. ``sequence_diagnostics`` (both clip
units, both KL estimates, entropy; eager torch ops, its one form) is timed at the benchmark's
size and at the demo's (64 sequences of 6 tokens).

    python bench/bench_losses.py [--B 512] [--T 1024] [--repeats 7] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gspo_metrics import GSPO_EPS, grpo_loss, gspo_loss, sequence_diagnostics


def _time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_inputs(B: int, T: int) -> dict[str, torch.Tensor]:
    """A (B, T) batch: log-probs near the old ones, lengths T/8 .. T, one advantage per row."""
    g = torch.Generator().manual_seed(0)  # (the draws in this order: the published inputs)
    old = -torch.rand(B, T, generator=g) * 4
    logits = old + 0.01 * torch.randn(B, T, generator=g)
    lengths = torch.randint(T // 8, T + 1, (B,), generator=g)
    return {
        "old": old,
        "logits": logits,
        "lengths": lengths,
        "mask": torch.arange(T)[None, :] < lengths[:, None],
        "adv": torch.randn(B, generator=g),
        "ref": old + 0.05 * torch.randn(B, T, generator=g),
        "ent": torch.rand(B, T, generator=g),
    }


def benchmarks(x: dict[str, torch.Tensor]) -> list[tuple[str, object]]:
    """(row name, function to time) for every row of the table."""
    logits, old, mask, adv = x["logits"], x["old"], x["mask"], x["adv"]

    def fwd_bwd(fn, reduction="token_mean"):
        def run():
            lp = logits.clone().requires_grad_()
            fn(lp, old, adv, mask, reduction=reduction).loss.backward()

        return run

    def seed_loop():  # the Tinker seed's reference code, one sequence at a time
        lp_all = logits.clone().requires_grad_()
        total = lp_all.new_zeros(())
        for b in range(len(lp_all)):
            n = int(x["lengths"][b])
            lp, q = lp_all[b, :n], old[b, :n]
            log_ratio = (lp.detach() - q).mean()
            ratio = torch.exp(log_ratio + lp - lp.detach())
            clipped = torch.clamp(ratio, 1 - GSPO_EPS[0], 1 + GSPO_EPS[1])
            total = total - torch.minimum(ratio * adv[b], clipped * adv[b]).sum()
        total.backward()

    def diags(rows=None, cols=None):  # rows/cols: the demo's batch, 64 x at most 6
        sel = [t[:rows, :cols].contiguous() for t in (logits, old, x["ref"], x["ent"])]
        m = mask[:rows, :cols].clone()
        m[:, 0] = True
        a = adv[:rows].contiguous()

        def run():
            sequence_diagnostics(sel[0], sel[1], m, a, ref_logprobs=sel[2], entropy=sel[3])

        return run

    def forward_only():
        with torch.no_grad():
            gspo_loss(logits, old, adv, mask)

    return [
        ("grpo_loss fwd+bwd (token_mean)", fwd_bwd(grpo_loss)),
        ("gspo_loss fwd+bwd (token_mean)", fwd_bwd(gspo_loss)),
        ("gspo_loss fwd+bwd (seq_mean_token_mean)", fwd_bwd(gspo_loss, "seq_mean_token_mean")),
        ("gspo_loss forward only (no grad)", forward_only),
        ("sequence_diagnostics", diags()),
        ("  same at B=64, T=6", diags(64, 6)),
        ("seed loop: Tinker reference per sequence", seed_loop),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=512)
    ap.add_argument("--T", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    x = make_inputs(args.B, args.T)
    rows = benchmarks(x)
    results = [(name, _time(fn, args.repeats if "seed" not in name else 3)) for name, fn in rows]
    base = results[0][1]
    gspo = results[1][1]
    print(
        f"B={args.B} T={args.T} tokens={int(x['mask'].sum())} threads={torch.get_num_threads()} "
        f"torch={torch.__version__}"
    )
    print(f"| {'what':<48} | {'ms':>8} | {'x grpo':>7} | {'x gspo':>7} |")
    print(f"|{'-' * 50}|{'-' * 10}|{'-' * 9}|{'-' * 9}|")
    for name, t in results:
        print(f"| {name:<48} | {t * 1e3:8.2f} | {t / base:7.2f} | {t / gspo:7.2f} |")


if __name__ == "__main__":
    main()
