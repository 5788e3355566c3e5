"""A clip range's ε as text: "3e-4" for a small ε, "ε 3e-4/4e-4" for a (low, high) pair."""

from __future__ import annotations

from training_hooks.findings.core import fmt_eps


def eps_text(eps: tuple[float, float] | None) -> str:
    """'ε 3e-4/4e-4' for a known (low, high) pair, 'ε unknown' for None."""
    return f"ε {fmt_eps(eps[0])}/{fmt_eps(eps[1])}" if eps else "ε unknown"
