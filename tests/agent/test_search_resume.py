"""A search resumed by a KIR whose strategy makes another tree than the stored one (a newer
version, another strategy under the same name): the replay leaves the stored tree, the stored
nodes it does not make again are dropped, and every measurement they held is taken from the
store's evaluations instead of measured again."""

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


def test_resuming_with_another_strategy_drops_the_stale_nodes_and_measures_nothing_twice(tmp_path):
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
