"""Print pip constraints pinning every dependency of pyproject.toml's ``[project]`` at its floor
(``name>=X`` -> ``name==X``), for the minimum-versions run of ``.ci/run``: the floors are what is
installed and tested there, never a second list. A dependency without a ``>=`` floor is an error.

    python .ci/floors.py [pyproject.toml] > floors.txt
"""

from __future__ import annotations

import re
import sys
import tomllib

FLOOR = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?>=([^,;\s]+)")


def floors(pyproject: str = "pyproject.toml") -> list[str]:
    """``name==floor`` for each of ``[project] dependencies``, in their order."""
    with open(pyproject, "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    out = []
    for dep in deps:
        m = FLOOR.fullmatch(dep.replace(" ", ""))
        if m is None:
            raise SystemExit(f"{pyproject}: dependency {dep!r} needs a single '>=' floor")
        out.append(f"{m.group(1)}=={m.group(3)}")
    return out


if __name__ == "__main__":
    print("\n".join(floors(*sys.argv[1:])))
