"""The README's table of real logs: import every log under ../shared/real_logs/ into a temporary
root and print one row per log (tool and version, rows, our columns filled, columns unknown); a
file holding several runs gets one row per run.

    python bench/real_logs_table.py [REAL_LOGS_DIR]

The logs are found and read exactly as tests/test_importers_real.py does (same discovery).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from test_importers_real import real_logs, real_logs_dir  # noqa: E402

from training_hooks import importers  # noqa: E402


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else real_logs_dir()
    if folder is None or not folder.is_dir():
        print("no real_logs folder (set GSPO_DASH_REAL_LOGS or pass it)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for tool, path in real_logs(folder):
            label = str(path.relative_to(folder))
            try:
                runs = [(None, label)]
                importers.import_run(tool, path, root=Path(root) / "probe")
            except importers.SeveralRuns as e:  # a file of several runs: one row per run
                n = len(e.segments)
                runs = [(k, f"{label} (run {k} of {n})") for k in range(1, n + 1)]
            for segment, name in runs:
                res = importers.import_run(tool, path, root=root, segment=segment)
                rows.append((name, importers.describe(res["run_dir"])))
    print(importers.markdown_table(rows))
    print()
    for label, s in rows:
        print(
            f"{label}: unknown = {', '.join(s.unknown)}; settings null = {', '.join(s.settings_unknown) or 'none'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
