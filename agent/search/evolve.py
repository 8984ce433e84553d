"""Evolutionary search with islands (ShinkaEvolve's parent selection): `width` islands, each
expanding one parent a round, drawn with weight sigmoid(rank) / (1 + children) among the
island's scored nodes not expanded yet (fast nodes are likely, nodes with many children
already less so). A child joins its parent's island; the root's children are dealt to the
islands in turn. Every `migrate` rounds each island's best joins the next island. The memory
operator is drawn per expansion: mostly the parent chain or the siblings, sometimes both or a
fresh start."""

from __future__ import annotations

import math

from agent.search.base import Expand, Strategy
from agent.search.registry import register
from agent.search.tree import Node, Tree


@register
class Evolve(Strategy):
    name = "evolve"

    def __init__(self, *args, migrate: int = 3, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.migrate = max(1, migrate)
        self.islands: list[set[int]] = [set() for _ in range(self.width)]
        self.rounds = 0
        self.dealt = 0

    def ask(self, tree: Tree) -> list[Expand]:
        if tree.root.score is None:
            return []
        if tree.root.id not in self.expanded:
            return [self.expand(tree.root, "fresh")]
        self.rounds += 1
        if self.rounds % self.migrate == 0:
            self._migrate(tree)
        picks: list[Expand] = []
        chosen: set[int] = set()
        for island in self.islands:
            members = [tree.get(i) for i in sorted(island) if i not in self.expanded and i not in chosen]
            members = [n for n in members if n.score is not None]
            if not members:
                continue
            members.sort(key=lambda n: (n.score, n.id))
            weights = [
                _sigmoid(len(members) / 2 - rank) / (1 + len(tree.children(n.id))) for rank, n in enumerate(members)
            ]
            parent = self.rng.choices(members, weights=weights)[0]
            memory = self.rng.choices(("parent", "siblings", "both", "fresh"), weights=(4, 3, 2, 1))[0]
            chosen.add(parent.id)
            picks.append(self.expand(parent, memory))
        return picks

    def tell(self, tree: Tree, nodes: list[Node]) -> None:
        for n in nodes:
            home = next((i for i, isl in enumerate(self.islands) if n.parent in isl), None)
            if home is None:  # a child of the root (or of a node of no island): dealt in turn
                home = self.dealt % len(self.islands)
                self.dealt += 1
            self.islands[home].add(n.id)

    def _migrate(self, tree: Tree) -> None:
        bests = []
        for island in self.islands:
            scored = [tree.get(i) for i in island if tree.get(i).score is not None]
            bests.append(min(scored, key=lambda n: (n.score, n.id)).id if scored else None)
        for i, best in enumerate(bests):
            if best is not None:
                self.islands[(i + 1) % len(self.islands)].add(best)


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))
