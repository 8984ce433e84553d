"""The tactics there are: each file `tactics/<name>.py` registers its tactic when imported, and
the first question about the registry imports every module of the package (the framework's own
modules aside), so adding a tactic is adding a file."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kir.diagnostics import Diagnostic, KirError
from kir.names import suggest
from tactics.base import NUMERICS, Numerics, Tactic, Value

if TYPE_CHECKING:
    from kir.program import Program

# The package's modules that are not tactics.
FRAMEWORK = frozenset({"base", "registry", "cli", "ir", "replay"})

_TACTICS: dict[str, Tactic] = {}
_loaded = False


def register(tactic: Tactic) -> Tactic:
    """Add a tactic (a module calls this at import); two tactics of one name are an error."""
    known = _TACTICS.get(tactic.name)
    if known is not None and known is not tactic:
        raise KirError(Diagnostic("tactic.duplicate", "error", None, f"two tactics are named {tactic.name!r}"))
    _TACTICS[tactic.name] = tactic
    return tactic


def load() -> None:
    """Import every tactic module of the package once."""
    global _loaded
    if _loaded:
        return
    import tactics

    for info in pkgutil.iter_modules(tactics.__path__):
        if info.name not in FRAMEWORK and not info.name.startswith("_"):
            importlib.import_module(f"tactics.{info.name}")
    _loaded = True


def all() -> tuple[Tactic, ...]:  # noqa: A001 - the registry's verb, tactics.all()
    """Every registered tactic, by name."""
    load()
    return tuple(_TACTICS[n] for n in sorted(_TACTICS))


def names() -> tuple[str, ...]:
    return tuple(t.name for t in all())


def get(name: str) -> Tactic:
    """The tactic called `name`, or a `tactic.unknown` `KirError` that suggests a near name."""
    load()
    tactic = _TACTICS.get(name)
    if tactic is None:
        raise KirError(
            Diagnostic(
                "tactic.unknown",
                "error",
                None,
                f"no tactic {name!r}",
                suggest(name, _TACTICS) or f"tactics: {', '.join(sorted(_TACTICS))}",
            )
        )
    return tactic


def applicable(
    program: Program,
    target: str | None = None,
    numerics: Iterable[Numerics] = NUMERICS,
    shapes: Mapping[str, int] | None = None,
) -> list[tuple[Tactic, dict[str, tuple[Value, ...]]]]:
    """The tactics whose precondition holds for `program` on `target`, each with the parameter
    values that make sense here. `numerics` says which kinds of result change the caller
    accepts: ("exact",) where a task compares bitwise, all three where its tolerance admits an
    approximation. `shapes`: the shape symbols' values the program will run at, where known."""
    allowed = set(numerics)
    out = []
    for tactic in all():
        if tactic.numerics in allowed and not tactic.precondition(program, target):
            out.append((tactic, tactic.domains(program, target, shapes)))
    return out
