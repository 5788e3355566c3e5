"""A small, explicit parser for the Python literals that training logs print: a dict of metrics
(``{'loss': 0.1, 'reward': '0.25'}``), a pretty-printed config (``pprint`` of a dict), a number
as ``repr`` shows it (``1e-06``, ``nan``, ``-inf``, ``np.float64(0.5)``).

A log is untrusted text: nothing here evaluates it. The grammar is literals only: dicts, lists,
tuples, sets (as lists), strings (with the escapes ``repr`` writes), numbers, ``True`` /
``False`` / ``None``, ``nan`` / ``inf``, and numpy's scalar repr ``np.<type>(<number>)``.
Anything else (a name, a call, an operator) is an error with its position. Nesting is bounded
(``MAX_DEPTH``) and so is the text (``MAX_CHARS``)."""

from __future__ import annotations

import math
import re
from typing import Any

MAX_DEPTH = 40  # nested containers
MAX_CHARS = 4_000_000  # one literal's text

_NUMBER = re.compile(r"[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d+)?")
_NAME = re.compile(r"[-+]?[A-Za-z_][A-Za-z0-9_.]*")
_SPACE = re.compile(r"\s*")
_NAMES: dict[str, Any] = {
    "True": True,
    "False": False,
    "None": None,
    "nan": math.nan,
    "NaN": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
    "-nan": math.nan,
    "Infinity": math.inf,
    "-Infinity": -math.inf,
}
#: numpy's scalar repr (numpy >= 2 prints ``np.float64(0.5)``) and torch's ``tensor(0.5)``.
_WRAPPERS = re.compile(
    r"(?:np|numpy)\.(?:float(?:16|32|64|128)?|int(?:8|16|32|64)?|uint(?:8|16|32|64)?|bool_?|"
    r"longdouble|double|single|half)|tensor"
)
_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "0": "\0",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}
_HEX = {"x": 2, "u": 4, "U": 8}


class LiteralError(ValueError):
    """Not a literal: ``pos`` is where parsing stopped; ``incomplete`` when the text ended
    before the literal did (a record cut mid-line)."""

    def __init__(self, reason: str, pos: int, incomplete: bool = False):
        super().__init__(f"{reason} at character {pos + 1}")
        self.pos = pos
        self.incomplete = incomplete


def parse_literal(text: str, start: int = 0) -> tuple[Any, int]:
    """The literal starting at ``text[start]`` (leading spaces skipped) and the index after it."""
    if len(text) - start > MAX_CHARS:
        raise LiteralError(f"longer than {MAX_CHARS:,} characters", start)
    return _Parser(text).value(start, 0)


class _Parser:
    def __init__(self, text: str):
        self.text = text

    def skip(self, i: int) -> int:
        m = _SPACE.match(self.text, i)
        return m.end() if m else i

    def value(self, i: int, depth: int) -> tuple[Any, int]:
        i = self.skip(i)
        if i >= len(self.text):
            raise LiteralError("the text ended where a value was expected", i, incomplete=True)
        c = self.text[i]
        if c in "{[(":
            if depth >= MAX_DEPTH:
                raise LiteralError(f"nested deeper than {MAX_DEPTH}", i)
            return self.container(i, depth + 1)
        if c in "'\"":
            return self.strings(i)
        if c.isdigit() or c == "." or (c in "+-" and i + 1 < len(self.text)):
            m = _NUMBER.match(self.text, i)
            if m and m.end() > i and not self._name_follows(m.end()):
                return _number(m.group(0)), m.end()
        m = _NAME.match(self.text, i)
        if m:
            word = m.group(0)
            if word in _NAMES:
                return _NAMES[word], m.end()
            if _WRAPPERS.fullmatch(word.lstrip("+-")):
                return self.wrapped(word, m.end(), depth)
            raise LiteralError(f"{word[:40]!r} is a name, not a literal", i)
        raise LiteralError(f"unexpected {c!r}", i)

    def _name_follows(self, j: int) -> bool:
        return j < len(self.text) and (self.text[j].isalpha() or self.text[j] == "_")

    def wrapped(self, word: str, i: int, depth: int) -> tuple[Any, int]:
        """``np.float64(0.5)`` / ``tensor(0.5)``: a number inside the call, nothing else."""
        if i >= len(self.text) or self.text[i] != "(":
            raise LiteralError(f"{word!r} without a value", i, incomplete=i >= len(self.text))
        inner, j = self.value(i + 1, depth + 1)
        j = self.skip(j)
        if j >= len(self.text):
            raise LiteralError(f"{word}( not closed", j, incomplete=True)
        if self.text[j] != ")" or isinstance(inner, str | dict | list | tuple) or inner is None:
            raise LiteralError(f"{word}(...) holds no single number", j)
        value = float(inner) if not isinstance(inner, bool) else inner
        return (-value if word.startswith("-") else value), j + 1

    def container(self, i: int, depth: int) -> tuple[Any, int]:
        opener = self.text[i]
        closer = {"{": "}", "[": "]", "(": ")"}[opener]
        items: list[Any] = []
        pairs: list[tuple[Any, Any]] = []
        is_dict: bool | None = None if opener == "{" else False
        commas = 0
        i += 1
        while True:
            i = self.skip(i)
            if i >= len(self.text):
                raise LiteralError(f"{opener} not closed", i, incomplete=True)
            if self.text[i] == closer:
                i += 1
                break
            key, i = self.value(i, depth)
            i = self.skip(i)
            if is_dict is None:
                is_dict = i < len(self.text) and self.text[i] == ":"
            if is_dict:
                if i >= len(self.text) or self.text[i] != ":":
                    raise LiteralError("a dict entry without ':'", i, i >= len(self.text))
                if isinstance(key, dict | list):
                    raise LiteralError("a dict key that is a container", i)
                val, i = self.value(i + 1, depth)
                pairs.append((key, val))
            else:
                items.append(key)
            i = self.skip(i)
            if i >= len(self.text):
                raise LiteralError(f"{opener} not closed", i, incomplete=True)
            if self.text[i] == ",":
                commas += 1
                i += 1
            elif self.text[i] != closer:
                raise LiteralError(f"expected ',' or {closer!r}, got {self.text[i]!r}", i)
        if is_dict or (opener == "{" and is_dict is None):
            return dict(pairs), i
        if opener == "(":  # ``('a' 'b')`` is a parenthesised value (pprint wraps long strings)
            return (items[0] if len(items) == 1 and not commas else tuple(items)), i
        return items, i

    def strings(self, i: int) -> tuple[str, int]:
        """Adjacent string literals, concatenated as Python does (``'a' 'b'`` is ``'ab'``)."""
        parts = []
        while True:
            part, i = self.string(i)
            parts.append(part)
            j = self.skip(i)
            if j >= len(self.text) or self.text[j] not in "'\"":
                return "".join(parts), i
            i = j

    def string(self, i: int) -> tuple[str, int]:
        text, quote = self.text, self.text[i]
        out: list[str] = []
        j = i + 1
        while True:
            k = _next_special(text, j, quote)
            if k < 0:
                raise LiteralError("a string not closed", len(text), incomplete=True)
            out.append(text[j:k])
            if text[k] == quote:
                return "".join(out), k + 1
            if text[k] == "\n":
                raise LiteralError("a line break inside a string", k)
            if k + 1 >= len(text):
                raise LiteralError("a string not closed", len(text), incomplete=True)
            e = text[k + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                j = k + 2
            elif e in _HEX:
                digits = text[k + 2 : k + 2 + _HEX[e]]
                if len(digits) < _HEX[e] or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise LiteralError(f"a bad \\{e} escape", k)
                out.append(chr(int(digits, 16)))
                j = k + 2 + _HEX[e]
            else:  # Python keeps an unknown escape as written
                out.append("\\" + e)
                j = k + 2


def _next_special(text: str, j: int, quote: str) -> int:
    """The first quote, backslash or newline at or after ``j`` (-1: none)."""
    hits = [p for p in (text.find(quote, j), text.find("\\", j), text.find("\n", j)) if p >= 0]
    return min(hits) if hits else -1


def _number(token: str) -> int | float:
    clean = token.replace("_", "")
    if any(c in clean for c in ".eE"):
        return float(clean)
    return int(clean)


def number_text(value: str) -> float | None:
    """A number printed as text (``'1.755e-07'``, ``'0'``, ``'nan'``, ``'-inf'``) as float, else
    None. Unsloth (and transformers 5) print every logged value so."""
    text = value.strip()
    if not text or len(text) > 40:
        return None
    if _NUMBER.fullmatch(text):
        return float(text.replace("_", ""))
    named = _NAMES.get(text)
    return named if isinstance(named, float) else None


def significant_digits(value: str) -> int | None:
    """How many significant digits a number printed as text carries (``'4.995e-06'`` -> 4,
    ``'0'`` -> 1); None for anything else."""
    text = value.strip().lstrip("+-")
    m = re.fullmatch(r"(\d*)(?:\.(\d*))?(?:[eE][-+]?\d+)?", text)
    if not m or not (m.group(1) or m.group(2)):
        return None
    digits = (m.group(1) + (m.group(2) or "")).lstrip("0")
    return max(len(digits), 1)


def brace_depth(text: str, state: tuple[int, str]) -> tuple[int, str]:
    """Track how deep ``{[(`` nesting stands after ``text``, quotes respected: ``state`` is
    (depth, the open quote or ""), as returned for the text before. A multi-line literal (a
    pretty-printed config) is complete when the depth returns to 0 outside a string."""
    depth, quote = state
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
        i += 1
    return depth, quote


def dict_prefix(text: str, start: int = 0) -> dict[Any, Any]:
    """The entries of the dict literal at ``text[start]`` that precede its first damage (a cut,
    a name where a value should be): each entry kept only when a ``,`` or the closing ``}``
    follows it, so a number the text was cut inside is never kept. {} when the first entry is
    already damaged (or ``text[start]`` is no ``{``)."""
    p = _Parser(text)
    i = p.skip(start)
    if i >= len(text) or text[i] != "{":
        return {}
    out: dict[Any, Any] = {}
    i += 1
    while True:
        try:
            i = p.skip(i)
            if i >= len(text) or text[i] == "}":
                return out
            key, i = p.value(i, 1)
            i = p.skip(i)
            if i >= len(text) or text[i] != ":" or isinstance(key, dict | list):
                return out
            val, i = p.value(i + 1, 1)
            i = p.skip(i)
        except LiteralError:
            return out
        if i >= len(text) or text[i] not in ",}":
            return out
        out[key] = val
        if text[i] == "}":
            return out
        i += 1
