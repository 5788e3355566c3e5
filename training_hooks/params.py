"""Signatures taken from a dataclass: the arguments of a call declared once, as its fields.

``RunRecorder(...)`` takes ``RecorderSettings``' fields, ``RunRecorder.log_step(...)``
``StepArgs``' and ``step_diagnostics(...)`` ``DiagnosticsArgs``': each is written as a function
of the built dataclass, and ``takes_params_of`` (a method) or ``takes_fields_of`` (a function)
gives it the dataclass's parameters. mypy checks each call's keywords and types against the
dataclass (a ``ParamSpec``), ``inspect.signature`` and ``help`` show them, and an unknown
keyword is a TypeError naming the call and the valid names. A field's ``metadata[DOC]`` (its
shape and meaning) is listed in the decorated function's docstring.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S")
R = TypeVar("R")

#: A field's ``metadata`` key for its documentation (shape, meaning), listed in the docstring of
#: every call that takes the field as an argument.
DOC = "doc"


def takes_params_of(
    source: Callable[P, T],
) -> Callable[[Callable[[S, T], R]], Callable[Concatenate[S, P], R]]:
    """Decorate a method ``f(self, built)`` so it takes ``source``'s parameters instead:
    ``source(*args, **kwargs)`` is built and passed on (see the module docstring)."""
    build = _builder(source)

    def decorate(method: Callable[[S, T], R]) -> Callable[Concatenate[S, P], R]:
        def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            label = type(self).__name__ if method.__name__ == "__init__" else method.__qualname__
            return method(self, build(label, args, kwargs))

        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        return _dressed(wrapper, method, source, [self_param])

    return decorate


def takes_fields_of(source: Callable[P, T]) -> Callable[[Callable[[T], R]], Callable[P, R]]:
    """Decorate a function ``f(built)`` so it takes ``source``'s parameters instead."""
    build = _builder(source)

    def decorate(fn: Callable[[T], R]) -> Callable[P, R]:
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            return fn(build(fn.__qualname__, args, kwargs))

        return _dressed(wrapper, fn, source, [])

    return decorate


def _builder(source: Callable[..., T]) -> Callable[[str, tuple, dict], T]:
    """``build(label, args, kwargs)``: ``source(*args, **kwargs)``; arguments that do not bind
    are a TypeError worded as Python's own, naming ``label``'s call, not ``source``. (Binding is
    checked only when building fails: ``inspect.Signature.bind`` costs ~20 us a call.)"""
    sig = inspect.signature(source)
    owner = getattr(source, "__name__", "the settings") + "'"
    valid = ", ".join(sig.parameters)

    def build(label: str, args: tuple, kwargs: dict) -> T:
        try:
            return source(*args, **kwargs)
        except TypeError:
            try:
                sig.bind(*args, **kwargs)
            except TypeError as e:
                raise TypeError(
                    f"{label}() {e}; its arguments are {owner} fields: {valid}"
                ) from None
            raise

    return build


def _dressed(wrapper: Any, fn: Callable, source: Callable, first: list) -> Any:
    """``wrapper`` named and documented as ``fn``, with ``source``'s signature after ``first``
    and its fields' ``DOC`` listed after ``fn``'s docstring."""
    sig = inspect.signature(source)
    wrapper.__doc__ = _with_fields_doc(fn.__doc__ or "", source)
    wrapper.__name__, wrapper.__qualname__ = fn.__name__, fn.__qualname__
    wrapper.__module__ = fn.__module__
    params = [*first, *sig.parameters.values()]
    returns = inspect.signature(fn).return_annotation  # (fn's: the dataclass's is None)
    wrapper.__signature__ = sig.replace(parameters=params, return_annotation=returns)
    return wrapper


def _with_fields_doc(doc: str, source: Callable) -> str:
    """``doc`` and, when ``source`` is a dataclass whose fields carry ``DOC``, a list of them
    (indented as ``doc``'s body, so ``inspect.getdoc`` shows one block)."""
    if not dataclasses.is_dataclass(source):
        return doc
    fields = [f for f in dataclasses.fields(source) if DOC in f.metadata]
    if not fields:
        return doc
    body = [line for line in doc.splitlines()[1:] if line.strip()]
    pad = " " * min((len(line) - len(line.lstrip()) for line in body), default=4)
    lines = [f"{pad}Arguments (the fields of ``{getattr(source, '__name__', '')}``):", ""]
    lines += [f"{pad}- ``{f.name}``: {f.metadata[DOC]}" for f in fields]
    return doc.rstrip() + "\n\n" + "\n".join(lines) + "\n"
