"""The strategies on trees made by hand: what each expands, in what order, and that each is
deterministic given its generator. (The search loop with real evaluations: test_search_run.py.)"""

from __future__ import annotations

import random

import pytest

from agent.pipeline import Record
from agent.search import registry
from agent.search.memory import remembered
from agent.search.tree import Move, Node, Tree, score_of


def rec(key: str, cycles: float | None) -> Record:
    if cycles is None:
        return Record(candidate=key, file="<t>", stage="run", ok=False, until="run", verdict={"ok": False})
    return Record(
        candidate=key,
        file="<t>",
        stage="run",
        ok=True,
        until="run",
        verdict={"ok": True, "metrics": {"cycles": cycles}},
    )


def node(i: int, parent: int | None, cycles: float | None, round_: int = 0) -> Node:
    key = f"k{i}"
    return Node(i, parent, key, f"text {i}", Move("t", f"m{i}"), round=round_).evaluated(rec(key, cycles))


def grow(tree: Tree, parent: int, scores: list[float | None], round_: int) -> list[Node]:
    made = []
    for s in scores:
        n = node(tree.next_id(), parent, s, round_)
        tree.add(n)
        made.append(n)
    return made


def strategy(name: str, seed: int = 0, **kw):
    return registry.get(name)(random.Random(seed), **kw)


def test_registry_lists_the_four():
    assert set(registry.names()) >= {"beam", "greedy", "mcts", "evolve"}
    with pytest.raises(KeyError, match="no strategy"):
        registry.get("annealing")


def test_score_is_ms_then_cycles_and_none_for_failures():
    ok = Record(
        candidate="a", file="f", stage="run", ok=True, until="run", verdict={"metrics": {"ms": 0.5, "cycles": 9}}
    )
    assert score_of(ok) == 0.5
    assert score_of(rec("b", None)) is None
    assert score_of(None) is None


def test_greedy_expands_the_fastest_unexpanded_first():
    tree = Tree.of([node(0, None, 100)])
    s = strategy("greedy", width=1)
    assert [e.node for e in s.ask(tree)] == [0]
    grow(tree, 0, [90, 80, None], 1)
    assert [e.node for e in s.ask(tree)] == [2]  # 80 cycles
    assert [e.node for e in s.ask(tree)] == [1]  # then 90; the failure is never expanded
    assert s.ask(tree) == []


def test_beam_gate_drops_children_slower_than_their_parent():
    tree = Tree.of([node(0, None, 100)])
    s = strategy("beam", width=2)
    assert [e.node for e in s.ask(tree)] == [0]
    kids = grow(tree, 0, [120, 95, 90, None], 1)
    s.tell(tree, kids)
    assert [e.node for e in s.ask(tree)] == [3, 2]  # 90 and 95; 120 regressed
    kids = grow(tree, 3, [91], 2) + grow(tree, 2, [94, 96], 2)
    s.tell(tree, kids)
    assert [e.node for e in s.ask(tree)] == [6]  # 94 beats its parent 95; 91 and 96 do not beat theirs
    s.tell(tree, grow(tree, 6, [99], 3))
    # nothing passed the gate and every node that passed was expanded: the fastest two again
    assert [e.node for e in s.ask(tree)] == [3, 6]


def test_mcts_follows_rewards_and_is_deterministic():
    def run(seed: int) -> list[list[int]]:
        tree = Tree.of([node(0, None, 100)])
        s = strategy("mcts", seed, width=2)
        order = []
        scores = iter([90, 110, 50, 95, 80, 70, 60, 85, 75, 65] * 3)
        for r in range(5):
            asks = s.ask(tree)
            order.append([e.node for e in asks])
            made = []
            for e in asks:
                made += grow(tree, e.node, [next(scores), next(scores)], r + 1)
            s.tell(tree, made)
        return order

    first = run(0)
    assert first == run(0)
    assert first[0] == [0]  # the root first
    assert first[1] == [1, 2]  # both children: the second by the first one's virtual loss
    assert first[2][0] == 3  # the 50-cycle grandchild is the most rewarding


def test_mcts_leaves_an_exhausted_subtree():
    tree = Tree.of([node(0, None, 100)])
    s = strategy("mcts", width=1)
    assert [e.node for e in s.ask(tree)] == [0]
    s.tell(tree, grow(tree, 0, [90], 1))
    assert [e.node for e in s.ask(tree)] == [1]
    s.tell(tree, grow(tree, 1, [None, None], 2))  # every child of 1 failed
    assert s.ask(tree) == []


def test_evolve_islands_and_determinism():
    def run(seed: int):
        tree = Tree.of([node(0, None, 100)])
        s = strategy("evolve", seed, width=2, migrate=2)
        asks = s.ask(tree)
        assert [e.node for e in asks] == [0]
        s.tell(tree, grow(tree, 0, [90, 80, 70, 60], 1))
        picks = []
        for r in range(4):
            asks = s.ask(tree)
            picks.append([(e.node, e.memory) for e in asks])
            made = []
            for e in asks:
                made += grow(tree, e.node, [50 + r], r + 2)
            s.tell(tree, made)
        return picks, [sorted(i) for i in s.islands]

    picks, islands = run(3)
    assert (picks, islands) == run(3)
    assert islands[0][:2] == [1, 3] and islands[1][:2] == [2, 4]  # the root's children dealt in turn
    assert all(len(p) <= 2 for p in picks)


def test_memory_operators():
    tree = Tree.of([node(0, None, 100)])
    grow(tree, 0, [90, 80], 1)
    grow(tree, 1, [70], 2)
    assert [n.id for n in remembered(tree, 3, "parent")] == [0, 1]
    assert [n.id for n in remembered(tree, 2, "siblings")] == [1]
    assert [n.id for n in remembered(tree, 2, "both")] == [0, 1]
    assert remembered(tree, 3, "fresh") == ()
    with pytest.raises(ValueError, match="memory operator"):
        registry.get("greedy")(random.Random(0), memory="everything")


def test_beam_goes_back_to_the_best_unexpanded_node_that_passed_when_a_round_passes_none():
    tree = Tree.of([node(0, None, 100)])
    s = strategy("beam", width=1)
    assert [e.node for e in s.ask(tree)] == [0]
    s.tell(tree, grow(tree, 0, [90, 95], 1))
    assert [e.node for e in s.ask(tree)] == [1]  # 90; 95 passed too but the beam is one wide
    s.tell(tree, grow(tree, 1, [93], 2))  # regressed
    assert [e.node for e in s.ask(tree)] == [2]  # back to 95, which passed its gate
    s.tell(tree, grow(tree, 2, [97], 3))
    # 93 and 97 regressed: every node that passed was expanded once, so the fastest of them is
    # expanded again (for the children its proposer ranked lower), until each brings none
    assert [e.node for e in s.ask(tree)] == [1]
    s.tell(tree, grow(tree, 1, [89], 4))  # a new child of 90, faster: the beam follows it
    assert [e.node for e in s.ask(tree)] == [5]
    s.tell(tree, [])  # 89 has no children to give
    order = []
    while asks := s.ask(tree):
        order.append(asks[0].node)
        s.tell(tree, [])
    assert order == [1, 2, 0]  # 90, 95, 100 once more each (89 is spent), then nothing
