"""Beam search with MaxKernel's gate: each round expands the beam (at most `width` nodes), and
the next beam is the fastest of their children that are not slower than their own parent (a
child that regresses is kept in the tree but not followed). The search ends when no child
passes the gate."""

from __future__ import annotations

from agent.search.base import Expand, Strategy
from agent.search.registry import register
from agent.search.tree import Node, Tree


@register
class Beam(Strategy):
    name = "beam"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.beam: list[int] | None = None  # None: not started (the root is the first beam)

    def ask(self, tree: Tree) -> list[Expand]:
        if self.beam is None:
            self.beam = [tree.root.id] if tree.root.score is not None else []
        return [self.expand(tree.get(i), "both") for i in self.beam if i not in self.expanded]

    def tell(self, tree: Tree, nodes: list[Node]) -> None:
        passed = []
        for n in nodes:
            parent = None if n.parent is None else tree.get(n.parent)
            if n.score is None or parent is None or parent.score is None or n.score > parent.score:
                continue  # failed, or slower than its parent: the gate
            passed.append(n)
        passed.sort(key=lambda n: (n.score, n.id))
        self.beam = [n.id for n in passed[: self.width]]
