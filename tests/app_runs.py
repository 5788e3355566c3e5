"""Helpers for the dashboard tests: tiny runs recorded by the real hooks (``record_run``).

Imported by ``tests/test_app_*.py`` and by the app fixtures in ``conftest.py`` (``recorded_root``,
``root_copy``, ``app_env``).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def app_modules() -> list[str]:
    """Every dashboard module but the page scripts (``app/app_pages/``) and ``app/main.py``."""
    return sorted(
        "app." + ".".join(p.relative_to(REPO / "app").with_suffix("").parts)
        for p in (REPO / "app").rglob("*.py")
        if p.parent.name != "app_pages" and p.stem != "main"
    )


HTML_COMPLETION = "<b>bold?</b> **not bold** <script>alert(1)</script> # not a header"
P, G, T, STEPS = 3, 4, 10, 6


def record_run(root, name: str, algorithm: str, *, seed: int, spread: float, steps: int = STEPS):
    """Record a tiny run with training_hooks.RunRecorder (mlflow off); returns its run_dir."""
    import torch

    from training_hooks import RunRecorder

    gen = torch.Generator().manual_seed(seed)
    B = P * G
    with RunRecorder(
        root=root,
        name=name,
        algorithm=algorithm,
        config={"lr": 1e-6, "seed": seed},
        mlflow=False,
        group_size=G,
        token_samples=3,
        flush_interval_s=0.5,
    ) as rec:
        for step in range(steps):
            old = -torch.rand(B, T, generator=gen) * 3 - 2  # log-probs <= 0 with the noise
            logp = old + spread * torch.randn(B, T, generator=gen)
            mask = torch.ones(B, T, dtype=torch.bool)
            mask[:, T - 1 - step % 3 :] = False  # lengths vary with the step
            rewards = torch.randint(0, 2, (P, G), generator=gen).float()
            rewards[0] = 1.0  # one zero-variance group per step (all correct)
            # every completion holds Markdown/HTML, so whichever sequence a page selects shows it
            completions = [f"{HTML_COMPLETION} (answer {b})" for b in range(B)]
            rec.log_step(
                step,
                rewards=rewards,
                logprobs=logp,
                old_logprobs=old,
                mask=mask,
                ref_logprobs=old + 0.01 * torch.randn(B, T, generator=gen),
                entropy=torch.rand(B, T, generator=gen),
                truncated=torch.arange(B) % 5 == 0,
                loss=torch.tensor(0.25 * step),
                extra={"grad_norm": 0.5 + 0.1 * step},
                completions=completions,
            )
        return rec.run_dir


def run_ids(root) -> dict[str, str]:
    """{name: run_id} of the runs under ``root``."""
    import json

    out = {}
    for d in Path(root).iterdir():
        if (d / "run.json").is_file():
            out[json.loads((d / "run.json").read_text())["name"]] = d.name
    return out
