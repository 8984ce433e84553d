"""Beam search with MaxKernel's gate: each round expands the beam (at most `width` nodes), and
the next beam is the fastest of their children that are not slower than their own parent (a
child that regresses is kept in the tree but not followed). When no child of a round passes,
the beam goes back to the fastest nodes of the tree that passed the gate and were not expanded
(on a GPU, a round whose children all time within the noise of their parent would otherwise end
the search with its budget unspent); when every such node was expanded, the fastest of them are
expanded again, for the children the proposer ranked below its `--measure-top` (a node whose
expansion brings no new child is spent). The search ends when no node is left to expand."""

from __future__ import annotations

from agent.search.base import Expand, Strategy, unexpanded
from agent.search.registry import register
from agent.search.tree import Node, Tree


@register
class Beam(Strategy):
    name = "beam"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.beam: list[int] | None = None  # None: not started (the root is the first beam)
        self.asked: list[int] = []  # the nodes the last round expanded
        self.spent: set[int] = set()  # nodes whose expansion brought no new child

    def ask(self, tree: Tree) -> list[Expand]:
        if self.beam is None:
            self.beam = [tree.root.id] if tree.root.score is not None else []
        asks = [self.expand(tree.get(i), "both") for i in self.beam if i not in self.expanded]
        if not asks and self.beam is not None:
            passed = [n for n in unexpanded(tree, self.expanded) if _passes(tree, n)]
            if not passed:  # each expanded once: the fastest again, for their next children
                again = (n for n in tree.scored() if n.id not in self.spent and _passes(tree, n))
                passed = sorted(again, key=lambda n: (n.score, n.id))
            self.beam = [n.id for n in passed[: self.width]]
            asks = [self.expand(tree.get(i), "both") for i in self.beam]
        self.asked = [a.node for a in asks]
        return asks

    def tell(self, tree: Tree, nodes: list[Node]) -> None:
        parents = {n.parent for n in nodes}
        self.spent |= {i for i in self.asked if i not in parents}
        passed = []
        for n in nodes:
            if n.parent is not None and _passes(tree, n):
                passed.append(n)
        passed.sort(key=lambda n: (n.score, n.id))
        self.beam = [n.id for n in passed[: self.width]]


def _passes(tree: Tree, n: Node) -> bool:
    """The gate: scored, and not slower than its parent (the root passes)."""
    if n.score is None:
        return False
    if n.parent is None:
        return True
    parent = tree.get(n.parent)
    return parent.score is not None and n.score <= parent.score
