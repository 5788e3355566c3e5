"""Which version (and dialect) of a tool wrote a log, and the settings its defaults decide.

``detect_format`` reads a log's metric names (``VERSION_EVIDENCE``: the release that added or
removed a name), a version a file or the user states, and what the files beside the log say of
the trainer (``UNSLOTH``: a model card tagged ``unsloth``, a requirements file pinning it). Torch-
free; ``metric_map`` resolves names against the ``SourceFormat`` this returns.

Unsloth's GRPO trainer is TRL's ``GRPOTrainer`` with Unsloth's ``compute_loss`` (its compiled
``UnslothGRPOTrainer.py``): every TRL key keeps TRL's meaning, and ``compute_loss`` logs two keys
of its own beside them in every version, whatever the TRL underneath: ``completion_length`` (the
mean completion tokens per sequence of each micro-batch) and ``kl`` (per micro-batch, the mean
over sequences of each one's token-mean k3 to the reference), plus, with vLLM,
``sampling/sampling_logp_difference/*`` and ``sampling/importance_sampling_ratio/*`` per
micro-batch. So ``completion_length`` beside TRL >= 0.17's ``completions/*`` is Unsloth's, not
evidence of TRL <= 0.16: the Unsloth dialect (``UNSLOTH``) dates the log by its other names.

``DEFAULTS`` are the tool defaults that decide a setting when no file states it; a default holds
over a version range, and outside it (or when the range spans a change) nothing is assumed.
``assumed_defaults`` says which of them an import relies on, and why: the report and the app
show them as assumed, never as the run's settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from training_hooks.tool_settings import CSV as _CSV
from training_hooks.tool_settings import JSONL as _JSONL
from training_hooks.tool_settings import ROLL as _ROLL
from training_hooks.tool_settings import SWIFT as _SWIFT
from training_hooks.tool_settings import TINKER as _TINKER
from training_hooks.tool_settings import TOOL_NAMES
from training_hooks.tool_settings import TRL as _TRL
from training_hooks.tool_settings import VERL as _VERL


def installed_version(dist: str) -> str:
    """The installed version of distribution ``dist``; "" when it is not installed."""
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001
        return ""


Version = tuple[int, ...]
UNSLOTH = "unsloth"  # the dialect of TRL's logs written through Unsloth's GRPO trainer


@dataclass(frozen=True)
class SourceFormat:
    """What a log's names (and files) say about the tool, its version and dialect."""

    source: str
    label: str  # e.g. "TRL 0.16-0.2x (>=0.17,<0.27)"
    since: Version | None = None  # the version is >= this
    until: Version | None = None  # ... and < this
    evidence: tuple[str, ...] = ()
    version: str | None = None  # exact, when a file (or the user) says so
    dialect: str = ""  # "" the tool itself; UNSLOTH: TRL through Unsloth's GRPO trainer

    @property
    def version_range(self) -> str | None:
        return _range(self.since, self.until)

    @property
    def range_text(self) -> str:
        """The range as words: ``">=0.17,<0.27"``, or ``"any version"`` when nothing dates it."""
        return self.version_range or "any version"


#: (tool, a metric name present, absent name that voids the rule or "", since, until, why).
VERSION_EVIDENCE: tuple[tuple[str, str, str, Version | None, Version | None, str], ...] = (
    (_TRL, "completion_length", "", None, (0, 17), "completion_length: TRL <= 0.16"),
    (_TRL, "completion_length", "num_tokens", None, (0, 16), "no num_tokens: TRL <= 0.15"),
    (_TRL, "num_tokens", "", (0, 16), None, "num_tokens: TRL >= 0.16"),
    (_TRL, "completions/mean_length", "", (0, 17), None, "completions/*: TRL >= 0.17"),
    (_TRL, "frac_reward_zero_std", "", (0, 18), None, "frac_reward_zero_std: TRL >= 0.18"),
    (_TRL, "entropy", "", (0, 20), None, "entropy: TRL >= 0.20"),
    (_TRL, "sampling/sampling_logp_difference/mean", "", (0, 23), None, "sampling/*: TRL >= 0.23"),
    (_TRL, "step_time", "", (0, 26), None, "step_time: TRL >= 0.26"),
    (_TRL, "cispo_clip_ratio", "", (0, 27), None, "cispo_clip_ratio: TRL >= 0.27"),
    (_TRL, "tools/call_frequency", "", (0, 27), None, "tools/*: TRL >= 0.27"),
    (_TRL, "vespo/phi_seq_mean", "", (1, 0), None, "vespo/*: TRL >= 1.0"),
    # ROLL's actor metrics carry their reduction in the name from v0.2.0 ("actor/pg_loss@sum")
    (_ROLL, "actor/pg_loss@sum", "", (0, 2, 0), None, "actor/*@sum: ROLL >= 0.2.0"),
    (_ROLL, "actor/pg_loss", "", None, (0, 2, 0), "actor/pg_loss without @sum: ROLL < 0.2.0"),
    # ms-swift's GRPO trainer (swift/trainers/rlhf_trainer/grpo_trainer.py 3.x,
    # swift/rlhf_trainers/grpo_trainer.py 4.x), read at every release tag 3.2-4.5 and 4.6.0
    (_SWIFT, "completion_length", "", None, (3, 3), "completion_length: ms-swift < 3.3"),
    (_SWIFT, "completions/mean_length", "", (3, 3), None, "completions/*: ms-swift >= 3.3"),
    (_SWIFT, "clip_ratio/region_mean", "", (3, 4), None, "clip_ratio/*: ms-swift >= 3.4"),
    (_SWIFT, "frac_reward_zero_std", "", (3, 7), None, "frac_reward_zero_std: ms-swift >= 3.7"),
    (_SWIFT, "entropy/mean", "", (3, 7), None, "entropy/*: ms-swift >= 3.7"),
    (_SWIFT, "cispo_clip_ratio", "", (3, 11), None, "cispo_clip_ratio: ms-swift >= 3.11"),
    (_SWIFT, "teacher_kl", "", (4, 4), None, "teacher_kl: ms-swift >= 4.4"),
)
#: Names the Unsloth dialect logs itself in every version: they date nothing there.
UNSLOTH_OWN = frozenset({"completion_length", "kl", "sampling/sampling_logp_difference/mean"})

_FORMAT_LABELS = {
    _TRL: "TRL GRPOTrainer log",
    _VERL: "verl metrics",
    _TINKER: "Tinker cookbook metrics",
    _JSONL: "JSON lines read through a key map",
    _CSV: "CSV read through a key map",
    "text": "a loop's own text log, keys mapped by name",
    _ROLL: "ROLL metrics",
    _SWIFT: "ms-swift GRPO logging.jsonl",
    "openrlhf": "OpenRLHF metrics",
}

#: Named generations of a tool's log format: (since, until, name).
GENERATIONS: dict[str, tuple[tuple[Version | None, Version | None, str], ...]] = {
    _TRL: (
        (None, (0, 16), "TRL <=0.15 / Unsloth"),
        ((0, 16), (1, 0), "TRL 0.16-0.2x"),
        ((1, 0), None, "TRL 1.x"),
    ),
}


@dataclass(frozen=True)
class Default:
    """``setting`` is ``value`` in ``source``'s versions [since, until) when no file states it;
    ``absent``: the setting does not exist there (the behaviour is the value's)."""

    source: str
    setting: str
    value: Any
    since: Version | None
    until: Version | None
    absent: bool = False


DEFAULTS: tuple[Default, ...] = (
    # GRPOConfig.num_iterations (TRL >= 0.16; one update per generation batch before it)
    Default(_TRL, "num_iterations", 1, None, (0, 16), absent=True),
    Default(_TRL, "num_iterations", 1, (0, 16), None),
    # GRPOConfig.use_bias_correction_kl (TRL >= 0.26): False as read at 1.9, True at 1.16
    Default(_TRL, "use_bias_correction_kl", False, None, (0, 26), absent=True),
    Default(_TRL, "use_bias_correction_kl", False, (0, 26), (1, 10)),
    Default(_TRL, "use_bias_correction_kl", True, (1, 16), None),
    # ROLL: a reference model always before 0.1.3 (enable_reference added 2025-11, default off)
    Default(_ROLL, "enable_reference", True, None, (0, 1, 3), absent=True),
    Default(_ROLL, "enable_reference", False, (0, 1, 3), None),
    # ROLL's rlvr_config.importance_sampling: "token" in every version read (0.1.1 - 2026-08)
    Default(_ROLL, "importance_sampling", "token", None, None),
    # ms-swift: the KL in the loss before kl_in_reward (3.10); from 3.10 its default for
    # advantage_estimator grpo (rloo / reinforce_plus_plus: true)
    Default(_SWIFT, "kl_in_reward", False, None, (3, 10), absent=True),
    # importance_sampling_level: token before it existed (3.7) and its default since
    Default(_SWIFT, "importance_sampling_level", "token", None, (3, 7), absent=True),
    Default(_SWIFT, "importance_sampling_level", "token", (3, 7), None),
)
#: The settings an import reports as assumed defaults when no file states them.
REPORTED_DEFAULTS = {
    _TRL: ("num_iterations", "use_bias_correction_kl"),
    _ROLL: ("enable_reference", "importance_sampling"),
    _SWIFT: ("kl_in_reward", "importance_sampling_level"),
}


def default_for(
    fmt: SourceFormat, setting: str, lo: Version | None, hi: Version | None
) -> tuple[Any, str] | None:
    """(value, why) when one default of ``fmt.source`` decides ``setting`` over every version
    in [lo, hi); None when no default does (or the range spans a change)."""
    for d in DEFAULTS:
        if d.source == fmt.source and d.setting == setting and covers(d.since, d.until, lo, hi):
            rng = _range(d.since, d.until) or "all versions"
            tool = TOOL_NAMES.get(fmt.source, fmt.source)
            if d.absent:
                why = f"no such setting in {tool} {rng}: it behaves as {setting}={value_text(d.value)}"
            else:
                why = f"{tool}'s default in {rng}" if rng != "all versions" else f"{tool}'s default"
            return d.value, why
    return None


def assumed_defaults(fmt: SourceFormat, stated: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{setting: {"value", "from"}} of the ``REPORTED_DEFAULTS`` no file states that a default
    decides over the log's whole version range."""
    out: dict[str, dict[str, Any]] = {}
    for setting in REPORTED_DEFAULTS.get(fmt.source, ()):
        if setting in stated:
            continue
        got = default_for(fmt, setting, fmt.since, fmt.until)
        if got is not None:
            out[setting] = {"value": got[0], "from": f"assumed: {got[1]}"}
    return out


def detect_format(
    source: str,
    names: Iterable[str],
    version: str | None = None,
    *,
    version_from: str = "beside the log",
    dialect_evidence: Iterable[str] = (),
) -> SourceFormat:
    """The version range the metric names imply (``VERSION_EVIDENCE``), narrowed to ``version``
    when a file beside the log (or the user: ``version_from``) states it; the Unsloth dialect when
    a file says so (``dialect_evidence``) or TRL's key families say so (``completion_length``
    beside TRL >= 0.17's names)."""
    names = set(names)
    dialect_why = list(dialect_evidence) if source == _TRL else []
    if source == _TRL and not dialect_why and "completion_length" in names:
        newer = [
            why
            for tool, name, _, lo, _, why in VERSION_EVIDENCE
            if tool == _TRL and name in names and lo is not None and lo >= (0, 17)
        ]
        if newer:
            dialect_why.append(
                f"completion_length beside TRL >= 0.17's keys ({'; '.join(newer)}): Unsloth's "
                "compute_loss logs it in every version"
            )
    dialect = UNSLOTH if dialect_why else ""
    since: Version | None = None
    until: Version | None = None
    evidence = []
    for tool, name, unless, lo, hi, why in VERSION_EVIDENCE:
        if tool != source or name not in names or (unless and unless in names):
            continue
        if dialect == UNSLOTH and name in UNSLOTH_OWN:
            continue
        evidence.append(why)
        since = lo if lo is not None and (since is None or lo > since) else since
        until = hi if hi is not None and (until is None or hi < until) else until
    exact = parse_version(version) if version else None
    # names of different generations (a fork): no version has them all; say which
    disagree = exact is None and since is not None and until is not None and since >= until
    if disagree:
        since = until = None
    if exact is not None:
        since, until = exact, (*exact[:-1], exact[-1] + 1)
        evidence.append(f"version {version} stated {version_from}")
    evidence += [f"Unsloth: {w}" for w in dialect_why]
    fmt = SourceFormat(source, "", since, until, tuple(evidence), version, dialect)
    label = _label(fmt, names)
    if disagree:
        label += f" (key families of different versions: {'; '.join(evidence)})"
    return SourceFormat(source, label, since, until, tuple(evidence), version, dialect)


def _label(fmt: SourceFormat, names: set[str]) -> str:
    """The format's name, its generation where the version range lies within one, the range."""
    label = _FORMAT_LABELS.get(fmt.source, fmt.source)
    if fmt.source == _TINKER:
        label += " (rl/train.py)" if any(n.startswith("env/all/") for n in names) else " (a loop)"
    for lo, hi, name in GENERATIONS.get(fmt.source, ()):
        if covers(lo, hi, fmt.since, fmt.until):
            label = name
    if fmt.dialect == UNSLOTH:
        rng = f" {fmt.version_range}" if fmt.version_range else ", version not dated"
        return f"Unsloth GRPOTrainer log (TRL{rng})"
    return f"{label} ({fmt.version_range})" if fmt.version_range else label


def covers(
    since: Version | None, until: Version | None, a: Version | None, b: Version | None
) -> bool:
    """[since, until) holds the whole segment [a, b) (None = unbounded)."""
    lo_ok = since is None or (a is not None and a >= since)
    hi_ok = until is None or (b is not None and b <= until)
    return lo_ok and hi_ok


def parse_version(text: str) -> Version | None:
    """ "0.23.0" -> (0, 23, 0); the leading numeric parts only; None when there are none."""
    parts = []
    for bit in str(text).strip().lstrip("v").split("."):
        digits = "".join(c for c in bit if c.isdigit()) if bit[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def vtext(v: Version | None) -> str:
    return ".".join(map(str, v)) if v else "?"


def _range(lo: Version | None, hi: Version | None) -> str | None:
    """``">=0.17,<0.27"`` for [lo, hi); None when neither bound is known."""
    parts = [f">={vtext(lo)}"] if lo else []
    parts += [f"<{vtext(hi)}"] if hi else []
    return ",".join(parts) or None


def value_text(v: Any) -> str:
    """A setting's value as a config writes it: ``null``, ``true``, ``'token'``, ``0.2`` (never
    Python's None)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, str) else str(v)
