"""The code base's size limits (house style): no function over 80 lines, no module over 700, in the
three packages. Walks every module with ``ast``, so a new module is checked the day it lands."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "gspo_metrics", "training_hooks")
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 700


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def function_lengths(source: str) -> dict[str, int]:
    """{qualified name: lines from its ``def`` line to its last line} of every function and
    method in ``source`` (nested ones too)."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def test_function_lengths_hand_counted():
    """A 3-line function, a 4-line method and a 2-line function nested in it, counted from the
    ``def`` line (a decorator above it is not counted)."""
    source = (
        "@staticmethod\n"
        "def f(x):\n"
        "    y = x\n"
        "    return y\n"
        "class C:\n"
        "    def m(self):\n"
        "        def g():\n"
        "            return 1\n"
        "        return g()\n"
    )
    assert function_lengths(source) == {"f": 3, "C.m": 4, "C.m.g": 2}


def test_no_long_function_or_module():
    """Every module of the three packages has at most MAX_MODULE_LINES lines and every function
    at most MAX_FUNCTION_LINES."""
    modules = _modules()
    assert len(modules) > 50  # the walk found the packages
    over = []
    for path in modules:
        rel = path.relative_to(REPO).as_posix()
        source = path.read_text(encoding="utf-8")
        n = len(source.splitlines())
        if n > MAX_MODULE_LINES:
            over.append(f"{rel}: {n} lines (at most {MAX_MODULE_LINES})")
        for name, lines in function_lengths(source).items():
            if lines > MAX_FUNCTION_LINES:
                over.append(f"{rel}: {name} is {lines} lines (at most {MAX_FUNCTION_LINES})")
    assert not over, "\n".join(over)
