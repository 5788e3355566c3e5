"""``findings.CHECKS_VERSION`` is bumped whenever the checks' findings can change: the findings
(code, severity: what a run's summary keeps) of a fixed set of runs are held against
``tests/checks_findings.json``, which records the version they were made with.

When the findings change, bump ``CHECKS_VERSION`` (training_hooks/findings/run.py), so every
kept summary is set aside, then write the new findings with
``python tests/test_checks_version.py --update`` (it refuses while the version is the one the
file records). The runs are generated (``bench/make_runs.py``, seeded) and recorded
(``app_runs.record_run``, seeded), so a change to those generators shows up here too.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "checks_findings.json"
START = 1.7e9  # a fixed start and heartbeat: nothing depends on when the test runs

#: (label, make_run keyword arguments) of the generated runs
MADE = (
    ("gspo-spikes", dict(algorithm="gspo", steps=60, seed=0, spikes=3)),
    ("grpo-spikes", dict(algorithm="grpo", steps=60, seed=1, spikes=3)),
    ("gspo-on-policy", dict(algorithm="gspo", steps=30, seed=2, spikes=0, on_policy=True)),
    ("grpo-long", dict(algorithm="grpo", steps=240, seed=3, spikes=1, groups=8)),
    ("gspo-big-groups", dict(algorithm="gspo", steps=40, seed=4, spikes=0, group_size=16)),
)
#: (label, algorithm, seed, spread, steps) of the recorded runs
RECORDED = (
    ("rec-gspo-calm", "gspo", 0, 0.02, 6),
    ("rec-grpo-calm", "grpo", 1, 0.02, 6),
    ("rec-gspo-wide", "gspo", 2, 0.3, 40),
    ("rec-grpo-wide", "grpo", 3, 0.3, 40),
)
#: generated runs whose run.json then states another algorithm (judged in the other unit)
MISLABELLED = ("gspo-spikes", "grpo-long")


def findings_of_fixed_runs(root: str) -> dict[str, list[list[str]]]:
    """{run label: [[code, severity], ...]} of the fixed runs, written under ``root``, as their
    summaries keep them (``training_hooks.run_summary.summarise_run``)."""
    sys.path.insert(0, str(HERE.parent / "bench"))
    sys.path.insert(0, str(HERE))
    from app_runs import record_run
    from make_runs import make_run

    from training_hooks import storage
    from training_hooks.run_summary import summarise_run
    from training_hooks.schema import RUN_JSON, read_run_info, write_json_atomic

    dirs = {}
    for label, kw in MADE:
        t = START + 10 * kw["steps"]
        dirs[label] = make_run(
            root, label, tokens_per_step=0, summary=False, start_time=START, updated_at=t, **kw
        )
    for label in MISLABELLED:
        info = read_run_info(dirs[label])
        info.algorithm = {"gspo": "grpo", "grpo": "gspo"}[str(info.algorithm)]
        info.run_id = info.name = label + "-mislabelled"
        dirs[info.name] = storage.join(root, info.name)
        shutil.copytree(dirs[label], dirs[info.name])
        write_json_atomic(storage.join(dirs[info.name], RUN_JSON), info.to_json())
    for label, algo, seed, spread, steps in RECORDED:
        folder = os.path.join(root, label)
        dirs[label] = record_run(folder, label, algo, seed=seed, spread=spread, steps=steps)
    return {
        label: [list(f) for f in summarise_run(d, read_run_info(d)).findings]
        for label, d in dirs.items()
    }


def test_the_findings_of_the_fixed_runs_match_the_declared_checks_version(tmp_path):
    """The findings of the fixed runs are the ones recorded for this CHECKS_VERSION: a change
    in them without a bump would leave summaries made by the older checks trusted."""
    from training_hooks.findings import CHECKS_VERSION

    golden = json.loads(GOLDEN.read_text())
    found = findings_of_fixed_runs(str(tmp_path))
    assert sum(len(v) for v in found.values()) >= 5  # the set holds findings to change
    if golden["checks_version"] == CHECKS_VERSION:
        assert found == golden["findings"], (
            "the checks' findings changed but findings.CHECKS_VERSION did not: bump it, then "
            "run `python tests/test_checks_version.py --update`"
        )
    else:
        pytest.fail(
            f"CHECKS_VERSION is {CHECKS_VERSION}, {GOLDEN.name} was made with "
            f"{golden['checks_version']}: run `python tests/test_checks_version.py --update`"
        )


def update() -> int:
    """Write the fixed runs' findings into ``GOLDEN``; refuses when they changed under the
    version the file already records (bump CHECKS_VERSION first)."""
    from training_hooks.findings import CHECKS_VERSION

    with tempfile.TemporaryDirectory() as root:
        found = findings_of_fixed_runs(root)
    if GOLDEN.exists():
        golden = json.loads(GOLDEN.read_text())
        if golden["checks_version"] == CHECKS_VERSION and golden["findings"] != found:
            print("the findings changed: bump findings.CHECKS_VERSION first", file=sys.stderr)
            return 1
    body = {"checks_version": CHECKS_VERSION, "findings": found}
    GOLDEN.write_text(json.dumps(body, indent=1) + "\n")
    print(f"wrote {GOLDEN} (CHECKS_VERSION {CHECKS_VERSION})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_checks_version.py --update")
    raise SystemExit(update())
