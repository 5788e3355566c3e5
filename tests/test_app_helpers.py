"""Shared helpers for the dashboard tests: runs recorded by the real hooks, and damaged copies.

Imported by the other ``tests/test_app_*.py`` files (``from test_app_helpers import ...``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAIN = str(REPO / "app" / "main.py")
sys.path.insert(0, str(REPO / "bench"))

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
            old = -torch.rand(B, T, generator=gen) * 3
            logp = old + spread * torch.randn(B, T, generator=gen)
            mask = torch.ones(B, T, dtype=torch.bool)
            mask[:, T - 1 - step % 3 :] = False  # lengths vary with the step
            rewards = torch.randint(0, 2, (P, G), generator=gen).float()
            rewards[0] = 1.0  # one zero-variance group per step (all correct)
            completions = [HTML_COMPLETION if b == 0 else f"answer {b}" for b in range(B)]
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


@pytest.fixture(scope="session")
def recorded_root(tmp_path_factory) -> Path:
    """A root with a GRPO and a GSPO run written by the real recorder (read-only: copy to edit)."""
    root = tmp_path_factory.mktemp("recorded")
    record_run(root, "grpo-small", "grpo", seed=1, spread=0.05)
    record_run(root, "gspo-small", "gspo", seed=2, spread=1e-3)
    return root


@pytest.fixture
def root_copy(recorded_root, tmp_path) -> Path:
    """A writable copy of ``recorded_root``."""
    dst = tmp_path / "root"
    shutil.copytree(recorded_root, dst)
    return dst


@pytest.fixture
def app_env(monkeypatch, tmp_path):
    """Environment for AppTest: root from GSPO_DASH_ROOT, no MLflow, a clean cwd, fresh caches."""
    import streamlit as st

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    st.cache_data.clear()

    def set_root(root) -> None:
        monkeypatch.setenv("GSPO_DASH_ROOT", os.fspath(root))

    return set_root


def run_ids(root) -> dict[str, str]:
    """{name: run_id} of the runs under ``root``."""
    import json

    out = {}
    for d in Path(root).iterdir():
        if (d / "run.json").is_file():
            out[json.loads((d / "run.json").read_text())["name"]] = d.name
    return out


def test_recorded_runs_are_found(recorded_root):
    """The data layer finds both recorded runs, finished, with sequences and tokens tables."""
    from app import data

    found = data.discover(str(recorded_root))
    by_name = {r.name: r for r in found.runs}
    assert set(by_name) == {"grpo-small", "gspo-small"}
    for r in by_name.values():
        assert r.status == "finished"
        assert r.has_sequences and r.has_tokens
        assert r.last_step == STEPS - 1
        assert r.problems == ()
    assert found.problems == []
