"""Learned rules: declarative data under verifier/rules/learned/, never code."""

from __future__ import annotations


def load_learned_rules() -> None:
    """Register every learned rule file (filled in by the learned-rule loader)."""
    return None
