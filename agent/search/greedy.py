"""Greedy: expand the fastest node not expanded yet, one a round (`width` of them)."""

from __future__ import annotations

from agent.search.base import Expand, Strategy, unexpanded
from agent.search.registry import register
from agent.search.tree import Tree


@register
class Greedy(Strategy):
    name = "greedy"

    def ask(self, tree: Tree) -> list[Expand]:
        return [self.expand(n, "parent") for n in unexpanded(tree, self.expanded)[: self.width]]
