"""Monte Carlo tree search over tactic applications (UCT). A round selects up to `width`
nodes: from the root, the child of highest UCB1 value (mean reward plus `c` * sqrt(ln N / n))
down to a node not expanded yet; a node selected this round counts as visited once more
(a virtual loss), so the others spread out. The reward of a node is the root's time over its
own (its speedup over the seed; 0 where it failed), backed up along its ancestors. A subtree
whose every node is expanded and whose leaves all failed is exhausted and not entered again."""

from __future__ import annotations

import math

from agent.search.base import Expand, Strategy
from agent.search.registry import register
from agent.search.tree import Node, Tree


@register
class MCTS(Strategy):
    name = "mcts"

    def __init__(self, *args, c: float = 1.4, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.c = c
        self.visits: dict[int, int] = {}
        self.total: dict[int, float] = {}

    def reward(self, tree: Tree, node: Node) -> float:
        base, score = tree.root.score, node.score
        return 0.0 if base is None or score is None else base / score

    def ask(self, tree: Tree) -> list[Expand]:
        if tree.root.score is None:
            return []
        if not self.visits:
            self._backup(tree, tree.root, self.reward(tree, tree.root))
        exhausted: dict[int, bool] = {}
        extra: dict[int, int] = {}  # this round's virtual visits
        picks: list[Expand] = []
        for _ in range(self.width):
            node = tree.root
            while node.id in self.expanded:
                kids = [
                    k for k in tree.children(node.id) if k.score is not None and not self._exhausted(tree, k, exhausted)
                ]
                if not kids:
                    break
                parent_n = self.visits.get(node.id, 0) + extra.get(node.id, 0)
                node = max(kids, key=lambda k: (self._ucb(k, parent_n, extra), -k.id))
            if node.id in self.expanded or node.score is None:
                break  # the whole tree is exhausted
            for n in tree.chain(node.id):
                extra[n.id] = extra.get(n.id, 0) + 1
            picks.append(self.expand(node, "parent"))
        return picks

    def tell(self, tree: Tree, nodes: list[Node]) -> None:
        for n in nodes:
            self._backup(tree, n, self.reward(tree, n))

    def _ucb(self, node: Node, parent_visits: int, extra: dict[int, int]) -> float:
        n = self.visits.get(node.id, 0) + extra.get(node.id, 0)
        if n == 0:
            return math.inf
        mean = self.total.get(node.id, 0.0) / max(1, self.visits.get(node.id, 0))
        return mean + self.c * math.sqrt(math.log(max(1, parent_visits)) / n)

    def _backup(self, tree: Tree, node: Node, reward: float) -> None:
        for n in tree.chain(node.id):
            self.visits[n.id] = self.visits.get(n.id, 0) + 1
            self.total[n.id] = self.total.get(n.id, 0.0) + reward

    def _exhausted(self, tree: Tree, node: Node, memo: dict[int, bool]) -> bool:
        if node.id not in memo:
            memo[node.id] = node.id in self.expanded and all(
                k.score is None or self._exhausted(tree, k, memo) for k in tree.children(node.id)
            )
        return memo[node.id]
