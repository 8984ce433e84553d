"""A search strategy: `ask(tree) -> [Expand]` (which nodes to expand now, and what the proposer
sees of the tree for each), `tell(tree, nodes)` (the nodes those expansions made, evaluated).
One strategy a file in this folder, registered by name; each is deterministic given its random
generator and what it is told, so that a search run twice with one seed makes one tree."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from agent.search import MEMORIES
from agent.search.tree import Node, Tree


@dataclass(frozen=True)
class Expand:
    """Expand node `node`, the proposer seeing `memory` of the tree."""

    node: int
    memory: str = "parent"


class Strategy(ABC):
    """Chooses the nodes to expand. `width`: how many children the proposer sends to be
    measured per expansion is the proposer's business; a strategy's `width` is how many nodes
    it expands per round (the beam's width, MCTS's selections, one per island). `memory`
    overrides the strategy's own choice of memory operator."""

    name: ClassVar[str]

    def __init__(self, rng: random.Random, width: int = 4, memory: str | None = None) -> None:
        if memory is not None and memory not in MEMORIES:
            raise ValueError(f"no memory operator {memory!r}: one of {', '.join(MEMORIES)}")
        self.rng = rng
        self.width = max(1, width)
        self.memory = memory
        self.expanded: set[int] = set()

    def expand(self, node: Node, memory: str) -> Expand:
        self.expanded.add(node.id)
        return Expand(node.id, self.memory or memory)

    @abstractmethod
    def ask(self, tree: Tree) -> list[Expand]:
        """The nodes to expand this round; none when the strategy has nothing left to try."""

    def tell(self, tree: Tree, nodes: list[Node]) -> None:  # noqa: B027 - most strategies read the tree
        """The nodes this round's expansions made, with their Records (in node order)."""


def unexpanded(tree: Tree, expanded: set[int]) -> list[Node]:
    """The scored nodes not expanded yet, fastest first (the earliest of equals first)."""
    return sorted((n for n in tree.scored() if n.id not in expanded), key=lambda n: (n.score, n.id))
