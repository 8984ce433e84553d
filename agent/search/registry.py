"""The strategies there are, by name: each file of `agent/search/` that defines one registers
it when imported; `get` imports them all the first time."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from agent.search.base import Strategy

S = TypeVar("S", bound="type[Strategy]")

_STRATEGIES: dict[str, type[Strategy]] = {}
# the modules of the package that are not strategies
_FRAMEWORK = frozenset({"base", "registry", "tree", "memory", "loop", "cli", "report", "budget"})


def register(cls: S) -> S:
    _STRATEGIES[cls.name] = cls
    return cls


def _load() -> None:
    import agent.search

    for info in pkgutil.iter_modules(agent.search.__path__):
        if info.name not in _FRAMEWORK and not info.name.startswith("_"):
            importlib.import_module(f"agent.search.{info.name}")


def names() -> tuple[str, ...]:
    _load()
    return tuple(sorted(_STRATEGIES))


def get(name: str) -> type[Strategy]:
    _load()
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise KeyError(f"no strategy {name!r}: one of {', '.join(sorted(_STRATEGIES))}") from None
