"""No import cycles in the product (``app``, ``gspo_metrics``, ``training_hooks``), no module that
replaces itself in ``sys.modules``, and no import alias that shadows a standard-library module.

The imports are read with ``ast`` (nothing is imported), so a new module is checked the day it
lands. An edge ``a -> b`` is any ``import b`` / ``from b import x`` / ``from . import b`` in ``a``
that names a module of the three packages (``from p import x`` is an edge to ``p.x`` when that is
a module, else to ``p``). Every such statement counts, wherever it stands:

- at module level (inside ``if`` / ``try`` blocks and class bodies too: they run at import);
- under ``if TYPE_CHECKING:``: never run, but the type checker's graph is the design's graph,
  and a type a module borrows from its own importer belongs below both;
- inside a function (a lazy import): it runs at the first call instead of at import, which
  postpones the cycle, it does not remove it. Moving an import into a function is the usual way
  to hide a cycle from Python, so it must not hide it from this test. A lazy import that closes
  no cycle is fine (one kept for start-up cost, say); lazy imports of other packages (torch,
  pyarrow, streamlit) are not edges at all.

Not edges: the parent packages Python runs before a submodule (``import a.b.c`` runs ``a`` and
``a.b``; every package whose ``__init__`` imports one of its submodules would otherwise be a
cycle), and imports by a computed name (``importlib.import_module(name)``: the two packages'
lazy ``__getattr__`` name maps, which import their own submodules, and a user's
``on_finding`` callback), which no static reading can follow.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "gspo_metrics", "training_hooks")

MODULE, TYPE_CHECKING, FUNCTION = "module level", "under TYPE_CHECKING", "in a function"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    where: str  # MODULE, TYPE_CHECKING or FUNCTION

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line}, {self.where})"


def modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package)} of every module under ``root``'s ``packages``."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST, where: str = MODULE) -> Iterator[tuple[ast.stmt, str]]:
    """Every import statement of ``tree`` with where it stands."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, where
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _statements(node, FUNCTION)
        elif isinstance(node, ast.If) and where == MODULE and _is_type_checking(node.test):
            for child in node.body:
                yield from _statements(ast.Module(body=[child], type_ignores=[]), TYPE_CHECKING)
            for child in node.orelse:
                yield from _statements(ast.Module(body=[child], type_ignores=[]), where)
        else:
            yield from _statements(node, where)


def edges(name: str, path: Path, is_package: bool, known: set[str]) -> list[Edge]:
    """The edges from module ``name`` to the modules of ``known``."""

    def resolve(dotted: str) -> str | None:  # the module itself, else the package holding it
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    out = []
    for node, where in _statements(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [resolve(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join(here + ([node.module] if node.module else []))
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else resolve(base)
                for alias in node.names
            ]
        out += [Edge(name, t, node.lineno, where) for t in targets if t and t != name]
    return out


def graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, list[Edge]]:
    found = modules(root, packages)
    return {name: edges(name, path, pkg, set(found)) for name, (path, pkg) in found.items()}


def strongly_connected(g: dict[str, list[Edge]]) -> list[list[str]]:
    """The groups of two or more modules that import each other, directly or not (Tarjan's
    algorithm, iterative), each sorted, sorted by their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted({e.target for e in g[start]})))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, targets = work[-1]
            for w in targets:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted({e.target for e in g.get(w, [])}))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return sorted(groups)


def one_cycle(g: dict[str, list[Edge]], group: list[str]) -> list[Edge]:
    """A shortest cycle through the group's first module, edge by edge (breadth first)."""
    members, start = set(group), group[0]
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in g[v]:
                if e.target not in members or e.target in came:
                    continue
                came[e.target] = e
                if e.target == start:
                    path = [e]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                nxt.append(e.target)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # (a strongly connected group has one)


def describe(g: dict[str, list[Edge]], groups: list[list[str]]) -> str:
    return "\n".join(
        f"{len(group)} modules import each other: {', '.join(group)}\n  e.g. "
        + "\n       ".join(str(e) for e in one_cycle(g, group))
        for group in groups
    )


# ----------------------------------------------------------------------------- the walker


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def test_walker_finds_hidden_cycles(tmp_path):
    """A planted package: a -> b at module level, b -> a in a function (a cycle); c -> d under
    TYPE_CHECKING, d -> c by a relative import (a cycle); e -> the package p (its __init__, which
    imports e) is a cycle too, while e's implicit parent run is not an edge; f -> torch is no
    edge."""
    _write(
        tmp_path,
        {
            "p/__init__.py": "from p import e\n",
            "p/a.py": "from p.b import x\n",
            "p/b.py": "def f():\n    from p import a\n",
            "p/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.d import D\n",
            "p/d.py": "from .c import C\n",
            "p/e.py": "import p\n",
            "p/f.py": "import torch\nfrom p import a as gc\n",
        },
    )
    g = graph(tmp_path, ("p",))
    assert [str(e) for e in g["p.b"]] == ["p.b -> p.a (line 2, in a function)"]
    assert [str(e) for e in g["p.c"]] == ["p.c -> p.d (line 3, under TYPE_CHECKING)"]
    assert [str(e) for e in g["p.d"]] == ["p.d -> p.c (line 1, module level)"]
    assert [e.target for e in g["p.f"]] == ["p.a"]
    groups = strongly_connected(g)
    assert groups == [["p", "p.e"], ["p.a", "p.b"], ["p.c", "p.d"]]
    assert [str(e) for e in one_cycle(g, ["p.a", "p.b"])] == [
        "p.a -> p.b (line 1, module level)",
        "p.b -> p.a (line 2, in a function)",
    ]
    assert "p.c -> p.d (line 3, under TYPE_CHECKING)" in describe(g, groups)
    assert aliases_shadowing_stdlib(tmp_path, ("p",)) == ["p/f.py:2: a as gc"]


def test_no_import_cycle():
    """No group of product modules imports each other, counting lazy and TYPE_CHECKING imports
    (the module docstring says why)."""
    g = graph(REPO)
    assert len(g) > 100  # the walk found the packages
    assert sum(len(v) for v in g.values()) > 500  # ... and their imports
    groups = strongly_connected(g)
    assert not groups, "import cycles:\n" + describe(g, groups)


# ----------------------------------------------------------------------------- module tricks


def aliases_shadowing_stdlib(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """``file:line: name as alias`` of every import alias that is a standard-library module's name
    (``import group_chart as gc`` makes ``gc`` read as Python's garbage collector)."""
    out = []
    for path, _ in modules(root, packages).values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if a.asname and a.asname != a.name and a.asname in sys.stdlib_module_names:
                        rel = path.relative_to(root).as_posix()
                        out.append(f"{rel}:{node.lineno}: {a.name} as {a.asname}")
    return out


def test_no_alias_shadows_the_standard_library():
    """No product module imports a name under a standard-library module's name."""
    assert aliases_shadowing_stdlib(REPO) == []


def test_no_module_replaces_itself():
    """No product module assigns to ``sys.modules`` (a module that swaps itself for another is two
    names for one thing: import the other where it lives)."""
    found = []
    for path, _ in modules(REPO).values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Attribute)
                    and t.value.attr == "modules"
                ):
                    found.append(f"{path.relative_to(REPO).as_posix()}:{node.lineno}")
    assert found == []
