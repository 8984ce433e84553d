"""The search tree as the strategies see it: nodes (a program, the move that made it from its
parent, and the Record of its evaluation) and the questions asked of them. A strategy sees
Records and scores, never backends, compilers or the store.

A node's `score` is its measured time, lower is better: the harness's median milliseconds on a
GPU, the simulator's cycles on mtia-sim. A node without a score failed somewhere (its Record
says at which stage) or has not been evaluated yet.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agent.pipeline import Record

# What a node's evaluation came to, beside the Record's own `stage`.
PROPOSED = "proposed"  # written when proposed: its evaluation has not come back (yet)
EVALUATED = "evaluated"  # its Record is in


@dataclass(frozen=True)
class Move:
    """What made a node from its parent: a proposer's name and what it did (a tactic and its
    parameter values; for the root, the seed it came from)."""

    proposer: str
    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def describe(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in self.params)})"

    def to_json(self) -> dict[str, Any]:
        return {"proposer": self.proposer, "name": self.name, "params": dict(self.params)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Move:
        return cls(str(data["proposer"]), str(data["name"]), tuple(sorted(dict(data.get("params") or {}).items())))


@dataclass(frozen=True)
class Node:
    """One program of the search. `key` is its candidate's hash (`agent.pipeline.Candidate.key`):
    two nodes of one search never share it. `predicted` is the cost model's time for it (ms),
    what ranked it among its siblings; `round` the round that proposed it."""

    id: int
    parent: int | None
    key: str
    text: str
    move: Move
    params: tuple[tuple[str, int], ...] = ()
    depth: int = 0
    round: int = 0
    predicted: float | None = None
    status: str = PROPOSED
    record: Record | None = None

    @property
    def score(self) -> float | None:
        return score_of(self.record)

    @property
    def stage(self) -> str | None:
        """Where its evaluation stopped ("run" with a score when it went through)."""
        return None if self.record is None else self.record.stage

    def evaluated(self, record: Record) -> Node:
        return replace(self, status=EVALUATED, record=record)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent": self.parent,
            "key": self.key,
            "move": self.move.to_json(),
            "params": dict(self.params),
            "depth": self.depth,
            "round": self.round,
            "predicted": self.predicted,
            "status": self.status,
            "score": self.score,
            "stage": self.stage,
            "record": None if self.record is None else self.record.to_json(),
        }


def score_of(record: Record | None) -> float | None:
    """The measured time of an evaluation that went through (lower is better): the harness's
    milliseconds where it timed, else the simulator's cycles; None otherwise."""
    if record is None or not record.ok or record.verdict is None:
        return None
    metrics = record.verdict.get("metrics") or {}
    for key in ("ms", "cycles"):
        value = metrics.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


@dataclass
class Tree:
    """The nodes of one search, by id, with their children; what strategies and memory
    operators read."""

    nodes: dict[int, Node] = field(default_factory=dict)
    _children: dict[int | None, list[int]] = field(default_factory=dict)
    _keys: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Tree:
        tree = cls()
        for n in sorted(nodes, key=lambda n: n.id):
            tree.add(n)
        return tree

    def add(self, node: Node) -> None:
        """Add a node or replace it (the same id: its evaluation came in)."""
        if node.id not in self.nodes:
            self._children.setdefault(node.parent, []).append(node.id)
            self._keys[node.key] = node.id
        self.nodes[node.id] = node

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def get(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def by_key(self, key: str) -> Node | None:
        found = self._keys.get(key)
        return None if found is None else self.nodes[found]

    @property
    def root(self) -> Node:
        return self.nodes[self._children[None][0]]

    def children(self, node_id: int) -> list[Node]:
        return [self.nodes[i] for i in self._children.get(node_id, ())]

    def siblings(self, node_id: int) -> list[Node]:
        parent = self.nodes[node_id].parent
        return [self.nodes[i] for i in self._children.get(parent, ()) if i != node_id]

    def chain(self, node_id: int) -> list[Node]:
        """The node and its ancestors, root first."""
        out = []
        current: int | None = node_id
        while current is not None:
            node = self.nodes[current]
            out.append(node)
            current = node.parent
        return out[::-1]

    def scored(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.score is not None]

    def best(self) -> Node | None:
        """The fastest node that went through (the first of equals: the earliest found)."""
        found = self.scored()
        return min(found, key=lambda n: (n.score, n.id)) if found else None

    def next_id(self) -> int:
        return max(self.nodes, default=-1) + 1


def dumps(nodes: Iterable[Node]) -> str:
    return json.dumps([n.to_json() for n in nodes], indent=1)
