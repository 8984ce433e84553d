"""A search resumed by a KIR whose strategy or proposer makes another tree than the stored one
(a newer version, another strategy under the same name): the replay leaves the stored tree, the
stored nodes it does not make again are grafted back under their parents' programs with their
Records, nothing is measured twice, and a better program the older run found stays the best and
is expanded further."""

from __future__ import annotations

import random
from concurrent.futures import Future
from pathlib import Path

from agent.execute.base import Executor, Job
from agent.pipeline import Record
from agent.propose.base import Context, Proposal, Proposer
from agent.search import registry
from agent.search.loop import Budget, Settings, run_search
from agent.search.tree import Move
from agent.store import open_store
from agent.tasks import load_task

TASK = load_task(Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "softmax")
SEED = (TASK.folder / "seed.kir").read_text()


class Letters(Proposer):
    """Children `<key>a`, `<key>b`, `<key>c` of every node."""

    name = "letters"

    def propose(self, context: Context) -> list[Proposal]:
        base = "" if context.node.parent is None else context.node.key
        return [Proposal(SEED, Move(self.name, c), base + c) for c in "abc" if base + c not in context.seen]


class Cycles(Executor):
    """A node's cycles from its key alone: the seed's (a hash) 1000, every other node the
    faster the longer its key and the later its letters."""

    name = "cycles"

    def __init__(self) -> None:
        self.measured: list[str] = []

    def submit(self, job: Job) -> Future[Record]:
        self.measured.append(job.key)
        cycles = 1000 if len(job.key) > 8 else 900 - 10 * len(job.key) - sum(ord(c) - 96 for c in job.key)
        future: Future[Record] = Future()
        future.set_result(
            Record(job.key, "<t>", "run", True, "run", verdict={"ok": True, "metrics": {"cycles": float(cycles)}})
        )
        return future


class Digits(Letters):
    """Children `<key>1`, `<key>2` of every node: slower than any letter (Cycles)."""

    name = "digits"

    def propose(self, context: Context) -> list[Proposal]:
        base = "" if context.node.parent is None else context.node.key
        return [Proposal(SEED, Move(self.name, c), base + c) for c in "12" if base + c not in context.seen]


def test_resuming_with_another_strategy_keeps_every_node_and_measures_nothing_twice(tmp_path):
    db = str(tmp_path / "s.sqlite")
    settings = Settings(task=TASK, backend="mtia-sim")
    first = Cycles()
    with open_store(db) as store:
        sid = store.search("one", "softmax", {})
        strategy = registry.get("greedy")(random.Random(0), width=1)
        run_search(settings, SEED, strategy, Letters(), first, store, sid, Budget(evaluations=8))
    with open_store(db) as store:
        again = Cycles()
        strategy = registry.get("beam")(random.Random(0), width=2)
        result = run_search(settings, SEED, strategy, Letters(), again, store, sid, Budget(evaluations=14))
        stored = store.nodes(sid)
    assert not set(again.measured) & set(first.measured)  # what the first run measured came from the store
    assert result.progress.reused >= 1
    assert sorted((n.id, n.key) for n in stored) == sorted((n.id, n.key) for n in result.tree)
    assert set(first.measured) <= {n.key for n in result.tree}  # no evaluated node lost


def test_resuming_with_another_proposer_keeps_the_better_nodes_and_expands_them(tmp_path):
    db = str(tmp_path / "s.sqlite")
    settings = Settings(task=TASK, backend="mtia-sim")
    first = Cycles()
    with open_store(db) as store:
        sid = store.search("one", "softmax", {})
        strategy = registry.get("beam")(random.Random(0), width=2)
        before = run_search(settings, SEED, strategy, Letters(), first, store, sid, Budget(evaluations=10))
    scores = {n.key: n.score for n in before.tree}
    with open_store(db) as store:
        again = Cycles()
        strategy = registry.get("beam")(random.Random(0), width=2)
        result = run_search(settings, SEED, strategy, Digits(), again, store, sid, Budget(evaluations=16))
        stored = {n.key: n for n in store.nodes(sid)}
    tree = {n.key: n for n in result.tree}
    assert {k: tree[k].score for k in scores} == scores  # every node of the first run, with its Record
    assert not set(again.measured) & set(first.measured)
    best = before.tree.best()
    assert result.tree.best().key == best.key  # the digits are slower: the letters' best stays the best
    for key in scores:  # each grafted node under its parent's program
        node = tree[key]
        if key != before.tree.root.key:
            assert tree[key[:-1] if len(key) > 1 else before.tree.root.key].id == node.parent
    assert any(k.startswith(best.key) and k[-1].isdigit() for k in tree)  # the strategy expanded it
    assert set(stored) == set(tree) and all(stored[k].id == tree[k].id for k in tree)


class Stuck(Cycles):
    """Measures the round's first child; every later job of the round never comes back (a
    search killed while they run): the test gives up on the run when the first is stored."""

    name = "stuck"

    def submit(self, job: Job) -> Future[Record]:
        if len(self.measured) < 2:  # the seed and the round's first child
            return super().submit(job)
        self.measured.append(job.key)
        return Future()  # never set


def test_a_round_cut_short_keeps_what_it_measured(tmp_path):
    import threading
    import time

    db = str(tmp_path / "s.sqlite")
    settings = Settings(task=TASK, backend="mtia-sim")
    stuck = Stuck()

    def run() -> None:
        with open_store(db) as store:
            sid = store.search("cut", "softmax", {})
            strategy = registry.get("beam")(random.Random(0), width=1)
            run_search(settings, SEED, strategy, Letters(), stuck, store, sid, Budget(evaluations=8))

    threading.Thread(target=run, daemon=True).start()  # stays blocked on the round's other jobs
    deadline = time.monotonic() + 30
    evaluated: list[str] = []
    while time.monotonic() < deadline and len(evaluated) < 2:
        time.sleep(0.1)
        with open_store(db) as store:
            evaluated = [n.key for s in store.searches() for n in store.nodes(s["id"]) if n.record is not None]
    assert len(evaluated) == 2 and "a" in evaluated  # the seed, and the child measured before the cut
