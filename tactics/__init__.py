"""Tactics: the typed moves of the search (docs/tactics.md).

    import tactics
    program = tactics.get("warps").apply(program, warps=16)
    for tactic, domains in tactics.applicable(program, "sm_90"):
        ...

Importing the package loads the framework only (`base`, `registry`: the standard library and
`kir`'s light modules); the tactic modules, and the IR they import, are loaded by the first
question about the registry, so `kir --help` does not pay for them.
"""

from __future__ import annotations

from tactics.base import (
    NUMERICS,
    Choice,
    IntRange,
    Names,
    Numerics,
    Param,
    PowersOfTwo,
    Tactic,
    not_applicable,
)
from tactics.registry import all, applicable, get, names, register  # noqa: A004 - tactics.all()

__all__ = [
    "NUMERICS",
    "Choice",
    "IntRange",
    "Names",
    "Numerics",
    "Param",
    "PowersOfTwo",
    "Tactic",
    "all",
    "applicable",
    "get",
    "names",
    "not_applicable",
    "register",
]
