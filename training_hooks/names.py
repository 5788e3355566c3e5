"""Run names as folder-name stems (``slug``), nested settings flat (``flatten``) and a long list
in a sentence (``few``): helpers of ``training_hooks.schema`` (which re-exports the first two),
torch- and pyarrow-free."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SLUG_RE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(name: str) -> str:
    """A run name as a safe folder-name stem: runs of other characters become "-", at most 80."""
    s = _SLUG_RE.sub("-", name).strip("-.")
    return s[:80] or "run"


def flatten(config: Mapping[str, Any], sep: str = ".", prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> one level, keys joined by ``sep`` (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``).

    An empty nested mapping is kept as a value (``{"a": {}}`` -> ``{"a": {}}``)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        k = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, sep, k))
        else:
            out[k] = value
    return out


def few(items: list[str], limit: int, sep: str = ", ") -> str:
    """The first ``limit`` of ``items`` joined by ``sep``, then "... (N in all)" if there are more."""
    more = f"{sep}... ({len(items)} in all)" if len(items) > limit else ""
    return sep.join(items[:limit]) + more


#: The step extra counting the completions a reward function returned no score for (TRL turns a
#: ``None`` into NaN): ``rewards/<function>/unscored``, beside TRL's ``rewards/<function>/mean``.
REWARD_UNSCORED_KEY = "rewards/{}/unscored"
#: The step extra counting the completions no reward function scored (TRL's "unscorable" rows:
#: reward NaN, advantage 0).
REWARD_UNSCORABLE = "rewards/unscorable"
_UNSCORED_RE = re.compile(r"(?:^|/)rewards/(.+)/unscored$")


def unscored_function(column: object) -> str | None:
    """The reward function a ``REWARD_UNSCORED_KEY`` column counts for (behind any prefix), else None:
    ``unscored_function("rewards/judge/unscored") == "judge"``."""
    m = _UNSCORED_RE.search(column) if isinstance(column, str) else None
    return m.group(1) if m else None
