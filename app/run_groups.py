"""Runs grouped over seeds: one group per value of a setting (the ratio level, the algorithm, or any
config key such as ``lr``, ``loss_type``, ``beta``), each naming its members.

The ratio level (``RATIO``: "GSPO" for every loss on the sequence ratio, "GRPO" on the token
ratio, ``gspo_metrics.spec.ratio_name``) is the primary axis: TRL's ``loss_type="dapo"`` at the
sequence level is in the GSPO group, and the group says its runs differ in algorithm.

A run's settings are what its source stated: the recorder's config and run settings (run.json),
an imported run's TRL / verl / Tinker settings as the importer read them (run.json's ``config``,
flattened: ``{"actor": {"lr": 1}}`` gives ``actor.lr``), an MLflow-only run's params. A key is
found by its full name, else by its last components (``lr`` finds ``optim.lr`` when no other key
ends so). A run whose setting is unknown (not stated, stated as null, an unknown algorithm, a key
that names two settings) is in no group: it is listed apart with the reason, never filed under a
default.

Runs of one group should differ only in their seed: a group lists the other settings in which its
members differ (``RunGroup.differ``), so a "seed group" that also mixes learning rates says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.records import RunRef
from gspo_metrics.spec import ratio_name
from training_hooks.schema import flatten

ALGORITHM = "algorithm"
#: The ratio level of the run's loss by its algorithm's name ("GSPO", "GRPO"): a derived setting
RATIO = "ratio_level"
#: The settings read from the run's algorithm, not its config (a group's name is their value)
DERIVED = (RATIO, ALGORITHM)
SEED = "seed"
#: run.json's own settings, read as config beside its ``config`` (None there: not stated)
RUN_SETTINGS = (
    "reduction",
    "group_size",
    "seq_eps_low",
    "seq_eps_high",
    "token_eps_low",
    "token_eps_high",
)
#: last components of keys that differ between seeds of one configuration by design: the seed
#: itself, and per-run names and folders (never a reason to split or to warn)
PER_RUN_KEYS = frozenset(
    {"seed", "data_seed", "random_seed", "run_name", "output_dir", "logging_dir", "name"}
)


@dataclass(frozen=True)
class RunGroup:
    """The runs whose setting ``key`` has one value."""

    name: str  # the value for the ratio level or the algorithm ("GSPO", "grpo"), else "lr=8e-05"
    value: str
    runs: tuple[RunRef, ...]
    differ: tuple[str, ...] = ()  # other settings whose values differ among ``runs``

    def repeated_seeds(self) -> dict[str, list[str]]:
        """{seed: run keys} of the seeds two or more members state (repeats, not seeds); runs
        that state no seed are not counted (their seed is unknown)."""
        by_seed: dict[str, list[str]] = {}
        for r in self.runs:
            if (seed := value_of(r, SEED)[0]) is not None:
                by_seed.setdefault(seed, []).append(r.key)
        return {k: v for k, v in by_seed.items() if len(v) > 1}


@dataclass(frozen=True)
class Grouping:
    key: str
    groups: list[RunGroup]  # sorted by name
    ungrouped: list[tuple[RunRef, str]]  # (run, why its setting is unknown)


def settings(run: RunRef) -> dict[str, Any]:
    """The settings ``run``'s source stated, one level (``flatten``): config, run settings, and
    the algorithm and its ratio level when known; an MLflow-only run's params."""
    out: dict[str, Any] = {}
    if run.info is not None:
        out.update(flatten(run.info.config))
        for k in RUN_SETTINGS:
            if (v := getattr(run.info, k)) is not None:
                out.setdefault(k, v)
    else:
        from app.mlflow_store import TAGS_KEY  # (streamlit's import: only for MLflow-only runs)

        out.update({k: v for k, v in run.params.items() if k != TAGS_KEY})
    if run.algorithm != "?":
        out[ALGORITHM] = run.algorithm
    else:
        out.pop(ALGORITHM, None)
    level = ratio_name(run.algorithm)
    if level is not None:
        out[RATIO] = level
    else:
        out.pop(RATIO, None)
    return out


def lookup(found: dict[str, Any], key: str) -> tuple[str | None, str]:
    """(the setting's full name, "") or (None, why not): ``key`` itself, else the one setting
    whose name ends with ``.key``."""
    if key in found:
        return key, ""
    ends = [k for k in found if k.endswith("." + key)]
    if len(ends) == 1:
        return ends[0], ""
    if ends:
        return None, f"{key!r} names {len(ends)} settings ({', '.join(sorted(ends)[:3])})"
    return None, f"its settings do not state {key!r}"


def shown_value(value: Any) -> str:
    """A setting's value as text: floats in their shortest form (8e-05), text as is."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)


def value_of(run: RunRef, key: str) -> tuple[str | None, str]:
    """(the run's value of ``key`` as text, "") or (None, why it is unknown)."""
    if key == ALGORITHM and run.algorithm == "?":
        return None, "its algorithm is unknown"
    if key == RATIO and ratio_name(run.algorithm) is None:
        return None, "its ratio level is unknown (its algorithm is not a known loss's)"
    found = settings(run)
    name, why = lookup(found, key)
    if name is None:
        return None, why
    if found[name] is None:
        return None, f"{name!r} is null in its settings"
    return shown_value(found[name]), ""


def _per_run(name: str) -> bool:
    return name.rsplit(".", 1)[-1] in PER_RUN_KEYS


def differing(runs: Sequence[RunRef], skip: str) -> tuple[str, ...]:
    """The settings (but ``skip`` and the per-run ones) whose values differ among ``runs``, or
    that some of them state and others do not; the ratio level only where the algorithm (which
    names it) is the setting grouped by."""
    all_settings = [settings(r) for r in runs]
    names = sorted({k for s in all_settings for k in s})
    out = []
    for k in names:
        if k == skip or _per_run(k) or (k == RATIO and skip != ALGORITHM):
            continue
        values = {shown_value(s[k]) if k in s else None for s in all_settings}
        if len(values) > 1:
            out.append(k)
    return tuple(out)


def group_runs(runs: Sequence[RunRef], key: str) -> Grouping:
    """``runs`` by their value of ``key`` (groups sorted by name); the runs whose value is
    unknown apart, with the reason."""
    if not key or not key.strip():
        raise ValueError(f"key must name a setting, got {key!r}")
    by_value: dict[str, list[RunRef]] = {}
    ungrouped = []
    for run in runs:
        value, why = value_of(run, key)
        if value is None:
            ungrouped.append((run, why))
        else:
            by_value.setdefault(value, []).append(run)
    groups = []
    for value, members in by_value.items():
        name = value if key in DERIVED else f"{key}={value}"
        full = lookup(settings(members[0]), key)[0] or key
        members = sorted(members, key=lambda r: r.key)  # one order whatever the input's
        groups.append(RunGroup(name, value, tuple(members), differing(members, full)))
    return Grouping(key, sorted(groups, key=lambda g: g.name), ungrouped)


def candidate_keys(runs: Sequence[RunRef]) -> list[str]:
    """Settings worth grouping by: the ratio level, the algorithm, then every setting (but the
    per-run ones) that two or more of ``runs`` state and whose value differs between them."""
    all_settings = [settings(r) for r in runs]
    counts: dict[str, set[str]] = {}
    stated: dict[str, int] = {}
    for s in all_settings:
        for k, v in s.items():
            counts.setdefault(k, set()).add(shown_value(v))
            stated[k] = stated.get(k, 0) + 1
    keys = [
        k
        for k in sorted(counts)
        if k not in DERIVED and not _per_run(k) and stated[k] >= 2 and len(counts[k]) > 1
    ]
    return [*DERIVED, *keys]
