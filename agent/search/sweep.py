"""Sweep: expand the seed once and stop, so that every child its proposer makes is measured
side by side (the mutation proposer's corpus of failures: agent.learn)."""

from __future__ import annotations

from agent.search.base import Expand, Strategy
from agent.search.registry import register
from agent.search.tree import Tree


@register
class Sweep(Strategy):
    name = "sweep"

    def ask(self, tree: Tree) -> list[Expand]:
        root = tree.root
        if root is None or root.id in self.expanded or root.record is None or not root.record.ok:
            return []  # a seed that is not correct has no mutants worth measuring
        return [self.expand(root, "fresh")]
