"""What a proposer is asked and what it answers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agent.pipeline import Record
from agent.search.tree import Move, Node


@dataclass(frozen=True)
class Context:
    """The node to expand and what the proposer sees around it (the memory operator's choice:
    its ancestors, its siblings, both, or nothing), with the search's settings: the task, the
    target and preset the children will run at, the shapes there, and how many children may
    go on to be measured (`measure_top`)."""

    node: Node
    memory: tuple[Node, ...] = ()
    task: Any = None  # agent.tasks.Task
    target: str | None = None
    backend: str | None = None
    preset: str = "test"
    shapes: Mapping[str, int] = field(default_factory=dict)
    measure_top: int = 4
    seen: frozenset[str] = frozenset()  # candidate keys the search has already (no need to send them)


@dataclass(frozen=True)
class Proposal:
    """A child: its program text, the move that made it, and, where the proposer checked it
    statically (verify and cost), that Record and the predicted time (seconds)."""

    text: str
    move: Move
    key: str
    params: tuple[tuple[str, int], ...] = ()
    predicted: float | None = None
    static: Record | None = None  # a Record that stopped it before compile, if one did
    # the best predicted time one more move from it reaches, where the proposer looked ahead
    potential: float | None = None

    @property
    def stopped(self) -> bool:
        return self.static is not None and not self.static.ok


class Proposer(ABC):
    name: ClassVar[str]

    def usage(self) -> dict[str, Any]:
        """What proposing has spent for the search so far, where it spends (an LLM proposer:
        `tokens`, `money`, `requests`); the search holds it to its budgets."""
        return {}

    def done_reason(self) -> str | None:
        """Why the proposer cannot propose any more (its budget spent, its endpoint gone), or None."""
        return None

    @abstractmethod
    def propose(self, context: Context) -> list[Proposal]:
        """The children of `context.node`, best first: those to measure (at most
        `context.measure_top`), then those that stopped before compile (their Records say
        why); a proposal whose key is in `context.seen` is left out."""
