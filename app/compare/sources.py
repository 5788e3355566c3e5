"""Where an imported run's columns came from: the foreign metric each built-in column was mapped
from (verl ``critic/score/mean`` -> ``reward_mean``), for the Compare hover and for the "More
metrics" search, which finds a mapped metric by its source name.

run.json is read from disk (untrusted): a mapping is used only when ``training_hooks.metric_map``
declares it for that tool, so every source name shown is one of the map's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from training_hooks.metric_map import MAPPINGS, STRIP_PREFIXES

#: (tool, foreign name, our column) of every declared mapping
_DECLARED = frozenset((m.source, m.name, m.column) for m in MAPPINGS if m.column)


def _declared(tool: str, name: str, column: str) -> bool:
    """True when the map declares ``name`` for (tool, column), a STRIP_PREFIXES prefix removed
    when that is how it was looked up."""
    stripped = (name[len(p) :] for p in STRIP_PREFIXES if name.startswith(p))
    return any((tool, candidate, column) in _DECLARED for candidate in (name, *stripped))


def mapped_sources(info) -> dict[str, str]:
    """{our column: "tool foreign name"} of a run's ``RunInfo`` (``imported.mapped``), for the
    mappings ``metric_map`` declares; {} for a run that was not imported."""
    imported = getattr(info, "imported", None)
    if imported is None:
        return {}
    tool = str(imported.tool)
    out = {}
    for name, column in dict(imported.mapped).items():
        if _declared(tool, str(name), str(column)):
            out[str(column)] = f"{tool} {name}"
    return out


@dataclass(frozen=True)
class SourceMatch:
    """A built-in panel found by the source name of the metric mapped onto it."""

    panel_key: str
    panel_title: str
    source: str  # "verl critic/score/mean"
    runs: tuple[str, ...]  # labels of the runs whose column came from it


def find_by_source(
    query: str, sources_by_run: Mapping[str, Mapping[str, str]], panels: Sequence
) -> list[SourceMatch]:
    """The ``panels`` whose column some run mapped from a metric whose "tool name" holds every
    word of ``query`` (case-insensitive, "/" and "_" read as spaces too: "critic score" finds
    ``critic/score/mean``). ``sources_by_run``: {run label: ``mapped_sources``}."""
    words = query.lower().split()
    if not words:
        return []
    found: dict[tuple[str, str], list[str]] = {}
    for run, sources in sources_by_run.items():
        for column, source in sources.items():
            text = source.lower()
            spaced = text.replace("/", " ").replace("_", " ")
            if all(w in text or w in spaced for w in words):
                found.setdefault((column, source), []).append(run)
    out = []
    for p in panels:
        for (column, source), runs in found.items():
            if p.column == column:
                out.append(SourceMatch(p.key, p.title, source, tuple(runs)))
    return out


def matches_sentence(matches: Sequence[SourceMatch]) -> str:
    """'Found by source name: verl critic/score/mean is drawn as Reward (run a).' ("" for none);
    plain text (names from disk inside: the caller escapes it for Markdown)."""
    if not matches:
        return ""
    parts = [f"{m.source} is drawn as {m.panel_title} ({', '.join(m.runs)})" for m in matches]
    return "Found by source name: " + "; ".join(parts) + "."
