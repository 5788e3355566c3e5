"""mypy, with the project's settings (``[tool.mypy]`` in pyproject.toml), catches the mistakes it is
in CI for: a column constant that does not exist, an argument ``RunRecorder`` does not take, a
misspelt keyword of ``log_step``; and passes the same code spelt right."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (the dev extra)")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]

SNIPPET = """
    import torch

    from training_hooks.recorder import RunRecorder
    from training_hooks.schema import Seq, Step

    columns = [Seq.{seq}, Step.{step}]
    rec = RunRecorder("runs", {recorder_arg}=(0.1, 0.2))
    x = torch.zeros(1, 1)
    rec.log_step(0, rewards=x, logprobs=x, old_logprobs=x, mask=x, {step_arg}=1)
"""


def _mypy(tmp_path: Path, **names: str) -> subprocess.CompletedProcess:
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(SNIPPET.format(**names)))
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
        + ["--follow-imports", "silent", "--no-error-summary", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_mypy_reports_wrong_names(tmp_path):
    """Seq.NOT_A_COLUMN, Step.LOSSES, RunRecorder(seq_epss=...) and log_step(rolout=...) are each
    an error naming the wrong name; spelt right, the snippet is clean."""
    wrong = _mypy(
        tmp_path, seq="NOT_A_COLUMN", step="LOSSES", recorder_arg="seq_epss", step_arg="rolout"
    )
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    errors = [line for line in wrong.stdout.splitlines() if ": error:" in line]
    for name in ("NOT_A_COLUMN", "LOSSES", "seq_epss", "rolout"):
        assert [e for e in errors if f'"{name}"' in e], (name, wrong.stdout)
    assert len(errors) == 4, wrong.stdout
    right = _mypy(tmp_path, seq="LENGTH", step="LOSS", recorder_arg="seq_eps", step_arg="rollout")
    assert right.returncode == 0, right.stdout + right.stderr
