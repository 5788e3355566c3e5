"""Fuzz the readers: hypothesis damages a recorded run (its run.json: junk,
wrong types, missing keys, huge and non-finite values, deep nesting, wrong encodings; its Parquet
parts: truncated, bit-flipped, wrong column types, missing or extra columns) and checks that the
app's readers never raise and name the run, that every page renders (no exception, no "could not
be drawn") with the run named in the data problems, and that nothing in the root changes.

Deterministic (``derandomize=True``, fixed ``max_examples``): CI tries the same cases every time.
Importer inputs get the same treatment through ``IMPORTER_INPUTS`` (one entry per reader: TRL,
Tinker, verl), with the text damages of ``text_damages``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from app_runs import record_run
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from test_security import PAGES, open_page, tree_snapshot

from app import data, ui
from app.discovery import discover
from training_hooks.schema import RUN_JSON, TABLE_DIRS

READER_EXAMPLES = 200  # reader-level cases (milliseconds each)
PAGE_EXAMPLES = 12  # page-level cases (every page in AppTest: seconds each)
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.explicit, Phase.generate),  # no shrinking: the first failing case is reported
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@dataclass(frozen=True)
class Damage:
    """One way to damage a run folder."""

    kind: str  # e.g. "run.json retype", "steps truncate" (counted in the statistics)
    what: str  # for the failure message
    apply: Callable[[Path], None]
    named: bool  # the readers must name the run (the damage loses information for sure)


# ----------------------------------------------------------------------------- run.json

REQUIRED = ("run_id", "name", "algorithm")
JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["NaN", "Infinity", "-inf", "", "1e999", "0x10", "\u202e", "<b>x</b>"]),
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _run_json(run_dir: Path) -> dict:
    return json.loads((run_dir / RUN_JSON).read_text())


def _write(run_dir: Path, raw: bytes) -> None:
    (run_dir / RUN_JSON).write_bytes(raw)


def _retyped(key: str, value) -> Callable[[Path], None]:
    def apply(run_dir: Path) -> None:
        info = _run_json(run_dir)
        info[key] = value
        _write(run_dir, json.dumps(info, allow_nan=True).encode())

    return apply


def _without(key: str) -> Callable[[Path], None]:
    def apply(run_dir: Path) -> None:
        info = _run_json(run_dir)
        info.pop(key, None)
        _write(run_dir, json.dumps(info).encode())

    return apply


def _nested(depth: int) -> Callable[[Path], None]:
    def apply(run_dir: Path) -> None:
        text = (run_dir / RUN_JSON).read_text()
        deep = "[" * depth + "]" * depth
        _write(run_dir, text.replace('"config": {', f'"config": {{"deep": {deep}, ', 1).encode())

    return apply


def _encoded(encoding: str) -> Callable[[Path], None]:
    def apply(run_dir: Path) -> None:
        info = _run_json(run_dir)
        info["name"] = "ünïcödé run ½"  # (every encoding below has these)
        # other text (a live finding's "ε") may have no code in ``encoding``: a "?" then
        _write(run_dir, json.dumps(info, ensure_ascii=False).encode(encoding, errors="replace"))

    return apply


@st.composite
def run_json_damages(draw) -> Damage:
    kind = draw(st.sampled_from(["junk", "retype", "missing", "nested", "encoding", "truncated"]))
    if kind == "junk":
        raw = draw(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
        return Damage("run.json junk", f"run.json = {raw[:60]!r}", lambda d: _write(d, raw), True)
    if kind == "retype":
        key = draw(
            st.sampled_from(
                [*REQUIRED, "seq_eps_low", "token_eps_high", "group_size", "config", "status"]
                + ["created_at", "updated_at", "ended_at", "last_step", "faults", "mlflow"]
                + ["flush_interval_s", "schema_version", "versions", "pid", "reduction"]
            )
        )
        value = draw(JSON_VALUES)
        return Damage(
            "run.json retype", f"run.json[{key!r}] = {value!r:.80}", _retyped(key, value), False
        )
    if kind == "missing":
        key = draw(st.sampled_from(REQUIRED))
        return Damage("run.json missing key", f"run.json without {key!r}", _without(key), True)
    if kind == "nested":
        depth = draw(st.sampled_from([50, 2_000, 100_000]))
        return Damage(
            "run.json nested", f"run.json config nested {depth} deep", _nested(depth), depth > 1_000
        )
    if kind == "encoding":
        enc = draw(st.sampled_from(["utf-16", "utf-32", "latin-1", "utf-8-sig", "cp1252"]))
        return Damage("run.json encoding", f"run.json encoded {enc}", _encoded(enc), True)
    cut = draw(st.integers(min_value=0, max_value=200))
    return Damage(
        "run.json truncated",
        f"run.json cut to {cut} bytes",
        lambda d: _write(d, (d / RUN_JSON).read_bytes()[:cut]),
        True,
    )


# ----------------------------------------------------------------------------- Parquet parts


def _parts(run_dir: Path, table: str) -> list[Path]:
    return sorted((run_dir / table).glob("*.parquet"))


def _rewrite(path: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    table = pq.read_table(path)
    meta = table.schema.metadata
    table = change(table)
    pq.write_table(table.replace_schema_metadata(meta), path)


EXTRA_TYPES = {
    "string": lambda n: pa.array(["<b>x</b>"] * n),
    "float": lambda n: pa.array([float("nan")] * n),
    "int": lambda n: pa.array([2**62] * n),
    "list": lambda n: pa.array([[1.0, 2.0]] * n),
    "struct": lambda n: pa.array([{"a": 1}] * n),
    "null": lambda n: pa.nulls(n),
}


@st.composite
def parquet_damages(draw) -> Damage:
    table = draw(st.sampled_from(TABLE_DIRS))
    kind = draw(st.sampled_from(["truncate", "flip", "retype", "drop", "extra", "junk"]))
    index = draw(st.integers(min_value=0, max_value=10))

    def part(run_dir: Path) -> Path:
        parts = _parts(run_dir, table)
        return parts[index % len(parts)]

    if kind == "truncate":
        frac = draw(st.floats(min_value=0.0, max_value=0.999))

        def truncate(d: Path) -> None:
            p = part(d)
            p.write_bytes(p.read_bytes()[: int(p.stat().st_size * frac)])

        return Damage(
            f"{table} {kind}", f"{table} part cut to {frac:.3f} of its size", truncate, True
        )
    if kind == "flip":
        flips = draw(
            st.lists(st.tuples(st.floats(0, 0.999), st.integers(0, 7)), min_size=1, max_size=8)
        )

        def flip(d: Path) -> None:
            p = part(d)
            raw = bytearray(p.read_bytes())
            for where, bit in flips:
                raw[int(where * len(raw))] ^= 1 << bit
            p.write_bytes(bytes(raw))

        return Damage(f"{table} {kind}", f"{table} part bit-flipped at {flips}", flip, False)
    if kind == "junk":
        raw = draw(st.binary(max_size=200))
        return Damage(
            f"{table} {kind}",
            f"{table} part = {raw[:40]!r}",
            lambda d: part(d).write_bytes(raw),
            True,
        )
    column = draw(st.sampled_from(["step", "wall_time", "reward_mean", "seq_log_ratio", "group"]))
    column = draw(st.just(column) | st.text(min_size=1, max_size=12))
    if kind == "retype":

        def retype(t: pa.Table) -> pa.Table:
            if column not in t.column_names:
                return t
            i = t.column_names.index(column)
            return t.set_column(i, column, pa.array([f"<{v}>" for v in t[column].to_pylist()]))

        return Damage(
            f"{table} {kind}",
            f"{table}.{column} as strings",
            lambda d: _rewrite(part(d), retype),
            False,
        )
    if kind == "drop":

        def drop(t: pa.Table) -> pa.Table:
            return t.drop_columns([column]) if column in t.column_names else t

        return Damage(
            f"{table} {kind}", f"{table} without {column}", lambda d: _rewrite(part(d), drop), False
        )
    extra = draw(st.sampled_from(sorted(EXTRA_TYPES)))

    def add(t: pa.Table) -> pa.Table:
        if column in t.column_names:
            t = t.drop_columns([column])
        return t.append_column(column, EXTRA_TYPES[extra](t.num_rows))

    return Damage(
        f"{table} {kind}",
        f"{table} with an extra {extra} column {column!r}",
        lambda d: _rewrite(part(d), add),
        False,
    )


DAMAGES = run_json_damages() | parquet_damages()


# ----------------------------------------------------------------------------- the harness


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    """A tiny recorded run (steps, sequences, tokens) that every case copies, then damages."""
    return Path(
        record_run(tmp_path_factory.mktemp("fuzz-base"), "fuzzed", "gspo", seed=3, spread=0.05)
    )


def _damaged_root(base_run: Path, damage: Damage, where: Path) -> tuple[Path, Path]:
    root = where / "root"
    run_dir = root / base_run.name
    shutil.copytree(base_run, run_dir)
    damage.apply(run_dir)
    return root, run_dir


def _read_everything(root: Path) -> tuple[object, list[str]]:
    """What the pages read of the only run under ``root``; (the run, every problem)."""
    found = discover(str(root))
    assert len(found.runs) == 1, found
    run = found.runs[0]
    problems = list(found.problems) + list(run.problems)
    steps = data.load_steps(run)
    problems += steps.problems + data.load_steps(run, ["reward_mean", "loss"]).problems
    ui.health_report(run, steps.df)
    seq = data.load_sequences(run)
    problems += seq.problems + data.load_sequences(run, ["step", "seq_log_ratio"], (1, 3)).problems
    for s in data.sequence_steps(run)[:2]:
        problems += data.load_tokens(run, int(s)).problems
    return run, problems


@pytest.mark.slow
@given(damage=DAMAGES)
@settings(FUZZ, max_examples=READER_EXAMPLES)
def test_readers_never_raise_and_name_the_damage(base_run, damage):
    """The app's readers on a damaged run: no exception; a damage that loses information is
    named in a problem; reading changes nothing on disk."""
    event(damage.kind)
    with tempfile.TemporaryDirectory() as tmp:
        root, run_dir = _damaged_root(base_run, damage, Path(tmp))
        before = tree_snapshot(root)
        run, problems = _read_everything(root)
        assert tree_snapshot(root) == before, damage.what
        if damage.named:
            assert problems, damage.what
            if "run.json" in damage.what:
                assert any("run.json" in p for p in run.problems), (damage.what, problems)


def _page_text(at) -> str:
    return " ".join(
        [m.value for m in at.markdown]
        + [e.label for e in at.expander]
        + [w.value for w in at.warning]
        + [i.value for i in at.info]
        + [c.value for c in at.caption]
    )


@pytest.mark.slow
@given(damage=DAMAGES)
@settings(FUZZ, max_examples=PAGE_EXAMPLES)
def test_every_page_renders_a_damaged_run(base_run, damage):
    """Every page over a root holding the damaged run: no exception and no "could not be drawn";
    when the damage loses information, some page names the run in its data problems; the root
    is unchanged."""
    event(damage.kind)
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        root, run_dir = _damaged_root(base_run, damage, Path(tmp))
        mp.setenv("GSPO_DASH_ROOT", str(root))
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.chdir(tmp)
        data.clear_caches()
        before = tree_snapshot(root)
        named = False
        for page in PAGES:
            at = open_page(page)
            assert not at.exception, (damage.what, page, [e.value for e in at.exception])
            assert not [e.value for e in at.error], (damage.what, page)
            text = re.sub(r"\\(.)", r"\1", _page_text(at))
            named |= "Data problems" in text and run_dir.name in text
        assert tree_snapshot(root) == before, damage.what
        assert named or not damage.named, damage.what


# ----------------------------------------------------------------------------- importers (hook)


@dataclass(frozen=True)
class ImporterInput:
    """A well-formed input of one importer: ``files`` (relative path -> bytes) form the folder
    passed to ``python -m training_hooks.importers SOURCE FOLDER/path``."""

    source: str  # "trl", "tinker", "verl"
    files: dict[str, bytes]
    path: str  # the path given to the importer, relative to the folder


def _importer_inputs() -> list[ImporterInput]:
    """A small well-formed log of each tool, with the settings file its reader looks for beside
    it (the same shapes ``tests/test_importers.py`` checks value by value)."""
    from test_importers import TINKER_LINES, TRL_ARGS, TRL_STEP, VERL_CONFIG, _verl_lines

    def jsonl(rows) -> bytes:
        return "\n".join(json.dumps(r) for r in rows).encode() + b"\n"

    history = [{**TRL_STEP, "step": s} for s in (1, 2, 3)]
    state = {"global_step": 3, "log_history": history, "logging_steps": 1, "max_steps": 3}
    verl_config = {"created_at": "2026-05-23 01:43:45 +0000", "config": VERL_CONFIG}
    return [
        ImporterInput(
            "trl",
            {
                "out/trainer_state.json": json.dumps(state, indent=2).encode(),
                "out/training_args.json": json.dumps(TRL_ARGS).encode(),
            },
            "out/trainer_state.json",
        ),
        ImporterInput(
            "tinker",
            {
                "run/metrics.jsonl": jsonl(TINKER_LINES),
                "run/config.json": b'{"loss_fn": "ppo", "dataset_builder": {"group_size": 4}}',
            },
            "run/metrics.jsonl",
        ),
        ImporterInput(
            "verl",
            {
                "proj/exp.jsonl": jsonl(_verl_lines([1, 2, 3])),
                "proj/exp.config.json": json.dumps(verl_config).encode(),
            },
            "proj/exp.jsonl",
        ),
    ]


#: One entry per importer reader: the test below damages each with ``text_damages``.
IMPORTER_INPUTS: list[ImporterInput] = _importer_inputs()

TEXT_JUNK = st.sampled_from(
    [
        b"NaN",
        b"Infinity",
        b'{"step": NaN}',
        b"-Infinity",
        b"\xff\xfe\x00",
        b"\x00" * 64,
        b"{",
        b"[]",
    ]
)


@st.composite
def text_damages(draw, content: bytes) -> bytes:
    """Damaged JSON / JSON-lines text: junk lines, huge lines, NaN/Infinity strings, deep
    nesting, wrong encodings, truncation."""
    lines = content.split(b"\n")
    kind = draw(st.sampled_from(["junk", "huge", "nested", "encoding", "truncate", "binary"]))
    at = draw(st.integers(0, max(0, len(lines) - 1)))
    if kind == "junk":
        lines.insert(at, draw(TEXT_JUNK))
    elif kind == "huge":
        lines.insert(at, b'{"step": 1, "x": "' + b"a" * 2_000_000 + b'"}')
    elif kind == "nested":
        lines.insert(at, b"[" * 100_000 + b"]" * 100_000)
    elif kind == "encoding":
        return content.decode("utf-8", "replace").encode(
            draw(st.sampled_from(["utf-16", "utf-32"]))
        )
    elif kind == "truncate":
        return content[: draw(st.integers(0, max(0, len(content) - 1)))]
    else:
        return draw(st.binary(max_size=500))
    return b"\n".join(lines)


@pytest.mark.parametrize("inp", IMPORTER_INPUTS, ids=lambda i: i.source)
def test_importer_rejects_damaged_input(inp: ImporterInput, tmp_path_factory):
    """An importer fed damaged input exits non-zero with a one-line reason and leaves the root
    as it was, or imports (then the root holds the new run)."""
    from training_hooks import importers

    @given(data=st.data())
    @settings(FUZZ, max_examples=40)
    def check(data):
        folder = tmp_path_factory.mktemp("importer-input")
        for rel, content in inp.files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(content)
        target = folder / inp.path
        if target.is_file():
            target.write_bytes(data.draw(text_damages(target.read_bytes())))
        root = tmp_path_factory.mktemp("importer-root")
        before = tree_snapshot(root)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                code = importers.main([inp.source, str(target), "--root", str(root)])
            except SystemExit as e:
                code = e.code
        if code:
            assert len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
            assert tree_snapshot(root) == before
        else:
            assert tree_snapshot(root) != before

    check()


# ----------------------------------------------------------------------------- what fuzzing found


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("updated_at", "NaN", "'updated_at' must be float"),
        ("group_size", True, "'group_size' must be int | None"),
        ("seq_eps_low", float("inf"), "'seq_eps_low' must be float | None"),
        ("last_step", 10**30, "'last_step' must be int | None"),
        ("config", "lr=1e-6", "'config' must be dict"),
        ("faults", [1, 2], "'faults' must be list"),
        ("imported", {"tool": 5, "format": "x"}, "'imported.tool' must be str"),
        ("config", json.loads("[" * 100 + "]" * 100), "nests deeper than 64"),
    ],
)
def test_bad_run_json_fields_are_named(base_run, tmp_path, field, value, why):
    """Regressions from fuzzing: a wrongly typed or absurdly nested run.json field makes the run's
    run.json unreadable with the field named (never a crash of the runs list or the cache)."""
    damage = Damage("run.json retype", field, _retyped(field, value), True)
    root, _ = _damaged_root(base_run, damage, tmp_path)
    run, problems = _read_everything(root)
    assert run.info is None and any(why in p for p in run.problems), run.problems


def test_parquet_column_of_the_wrong_type_is_left_out(base_run, tmp_path):
    """Regression from fuzzing: sequences.step as strings (it crashed the per-sequence pages):
    the part is unreadable for want of a usable step, and said so; a float column as strings is
    left out of that part, and said so."""
    for column, why in (("step", "no usable 'step' column"), ("reward", "column 'reward' is")):

        def retype(t: pa.Table, column=column) -> pa.Table:
            i = t.column_names.index(column)
            return t.set_column(i, column, pa.array([f"<{v}>" for v in t[column].to_pylist()]))

        damage = Damage(
            "sequences retype", column, lambda d: _rewrite(_parts(d, "sequences")[0], retype), False
        )
        root, _ = _damaged_root(base_run, damage, tmp_path / column)
        run, problems = _read_everything(root)
        assert any(why in p for p in problems), problems
