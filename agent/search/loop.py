"""The search loop: round by round, the strategy asks for nodes to expand, the proposer turns
each into children (checked statically and ranked by the cost model), the children not seen
before are written to the store as proposed, measured by the executor, written again with their
Records, and told to the strategy.

Everything but the measurements is deterministic (the strategy's generator is seeded, the
proposer and the cost model are functions of the program), and the measurements are kept: so
a search resumed after `kill -9` replays its rounds, taking every Record it finds in the store
(the same node: same id, parent and candidate key) instead of measuring again, and measures
only what had not come back. Its tree is then the tree of a run that was never interrupted,
given measurements that repeat (the simulator's cycles do). A resumed search whose rounds make
another tree than the stored one (a newer strategy or proposer) keeps every stored node it has
not made: at the end of the round where the trees part, each is grafted, with its Record and
move, under the node of its parent's program (in the order of the stored ids, so a parent comes
before its children), takes a new id, and is told to the strategy with the round's nodes. A
better program an older run found stays in the tree and the strategy can expand it.

Budgets: measured evaluations (a node measured or found measured), wall seconds, device seconds
(the run stages' wall time on a GPU backend: what held the GPU), rounds without a better best
(`stall`), the best's distance to the roofline floor (`roofline`: stop once floor / best
reaches it, `Settings.floor` from agent.search.roofline), and an LLM proposer's tokens and money
(`Proposer.usage`; the proposer sends no request its budget cannot pay for). The first one
spent stops the search after its round, as does a proposer that can propose no more
(`Proposer.done_reason`: its endpoint gone)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from concurrent.futures import as_completed
from dataclasses import dataclass, field, replace
from typing import Any

from agent.execute.base import CPU_BACKENDS, Executor, Job
from agent.pipeline import Candidate
from agent.propose.base import Context, Proposer
from agent.search.base import Strategy
from agent.search.memory import remembered
from agent.search.tree import EVALUATED, PROPOSED, Move, Node, Tree
from agent.store.base import Store

STATIC_STAGES = ("parse", "verify", "cost")  # what stops a proposal before compile


@dataclass(frozen=True)
class Budget:
    evaluations: int | None = 200
    seconds: float | None = None
    gpu_seconds: float | None = None
    stall: int | None = None  # rounds without a better best
    roofline: float | None = None  # stop once floor / best reaches this (Settings.floor)
    tokens: int | None = None  # an LLM proposer's tokens, read and written (it keeps to them)
    money: float | None = None  # and their price

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluations": self.evaluations,
            "seconds": self.seconds,
            "gpu_seconds": self.gpu_seconds,
            "stall": self.stall,
            "roofline": self.roofline,
            "tokens": self.tokens,
            "money": self.money,
        }


@dataclass(frozen=True)
class Settings:
    """Where the candidates run: the task (its folder and loaded object), the backend and the
    target the tactics and the cost model assume, the preset (its shapes), how many children of
    an expansion are measured, the random seed (strategy and correctness seeds), and what the
    harness is asked beyond correctness (`{"time": {...}}` on a GPU)."""

    task: Any  # agent.tasks.Task
    backend: str
    target: str | None = None
    preset: str = "test"
    measure_top: int = 4
    seed: int = 0
    timeout: float = 600.0
    harness: Mapping[str, Any] = field(default_factory=dict)
    floor: float | None = None  # the roofline floor in the scores' unit (agent.search.roofline)

    @property
    def shapes(self) -> dict[str, int]:
        return self.task.shape_values(self.preset)

    def context(self) -> dict[str, Any]:
        """What a measurement depends on besides the candidate: the evaluations cache's key."""
        return {
            "task": self.task.name,
            "backend": self.backend,
            "target": self.target,
            "preset": self.preset,
            "harness": dict(self.harness),
        }

    def seeds(self, key: str, n: int = 3) -> tuple[int, ...]:
        """The correctness seeds of one candidate: drawn from the search's seed and the
        candidate, so that a replayed round checks with the same inputs."""
        rng = random.Random(f"{self.seed}:{key}")
        return tuple(rng.randrange(2**31) for _ in range(n))


@dataclass
class Progress:
    round: int = 0
    evaluations: int = 0  # measured (or found measured) this search
    reused: int = 0  # of which found in the store
    stopped_statically: int = 0  # children that the verifier or the cost stage stopped
    failed_at_run: int = 0  # measured children that failed (compile, correctness, a hang, a crash)
    gpu_seconds: float = 0.0  # the run stages' wall time of measurements on a GPU backend
    started: float = field(default_factory=time.monotonic)
    best: Node | None = None
    seed_score: float | None = None
    stall: int = 0
    reason: str = ""
    spent: dict[str, Any] = field(default_factory=dict)  # the proposer's usage (tokens, money, requests)

    def to_json(self) -> dict[str, Any]:
        proposed = self.evaluations + self.stopped_statically
        return {
            "rounds": self.round,
            "evaluations": self.evaluations,
            "reused": self.reused,
            "stopped_statically": self.stopped_statically,
            "failed_at_run": self.failed_at_run,
            "share_stopped_statically": self.stopped_statically / proposed if proposed else 0.0,
            "share_failed_at_run": self.failed_at_run / self.evaluations if self.evaluations else 0.0,
            "seconds": time.monotonic() - self.started,
            "gpu_seconds": self.gpu_seconds,
            "seed_score": self.seed_score,
            "best_score": None if self.best is None else self.best.score,
            "best_node": None if self.best is None else self.best.id,
            "speedup": (self.seed_score / self.best.score)
            if self.best is not None and self.seed_score and self.best.score
            else None,
            "stopped": self.reason,
            **({"proposer": dict(self.spent)} if self.spent else {}),
        }


@dataclass
class Result:
    search: int
    tree: Tree
    progress: Progress


def run_search(
    settings: Settings,
    seed_text: str,
    strategy: Strategy,
    proposer: Proposer,
    executor: Executor,
    store: Store,
    search: int,
    budget: Budget = Budget(),
    on_round: Callable[[Progress, Tree], None] | None = None,
) -> Result:
    """Search from `seed_text` (its parameters bound in its defaults already). The store's
    nodes of search `search` are taken as measured where they match."""
    stored = {n.key: n for n in store.nodes(search)}
    stored_ids = {n.id: n for n in stored.values()}
    context = settings.context()
    tree = Tree()
    progress = Progress()

    written: set[int] = set()  # the ids this run has written (replayed or new)
    parent_key = {n.id: stored_ids[n.parent].key for n in stored.values() if n.parent in stored_ids}
    orphans: list[Node] = []  # stored nodes left by a replay that parted from the stored tree

    def put(node: Node) -> None:
        """Write the node. Where the replay of a resumed search leaves the stored tree (a newer
        strategy or proposer makes other nodes, so a key comes under another id), the stored
        nodes it has not written again are taken out of the store under their old ids and kept
        as orphans, which `graft` puts back into the tree at the end of the round."""
        old, same_id = stored.get(node.key), stored_ids.get(node.id)
        if (old is not None and old.id != node.id) or (same_id is not None and same_id.key != node.key):
            stale = sorted(i for i in stored_ids if i not in written)
            store.drop(search, stale)
            for i in stale:
                orphan = stored_ids.pop(i)
                stored.pop(orphan.key, None)
                orphans.append(orphan)
        store.put(search, node)
        written.add(node.id)

    def graft() -> list[Node]:
        """The orphans measured before, each under the tree's node of its parent's program, with
        new ids; an orphan whose program the tree has already is not added again (its children
        go under the tree's node). Orphans not measured (in flight when the run died) are left:
        the search measures them if it proposes them again."""
        added: list[Node] = []
        for old in sorted(orphans, key=lambda n: n.id):
            if tree.by_key(old.key) is not None or old.record is None or old.parent is None:
                continue
            parent = tree.by_key(parent_key.get(old.id, ""))
            if parent is None:
                continue
            node = replace(old, id=tree.next_id(), parent=parent.id, depth=parent.depth + 1, round=progress.round)
            put(node)
            tree.add(node)
            added.append(node)
            if node.stage in STATIC_STAGES:  # stopped before compile, as when it was proposed
                progress.stopped_statically += 1
                continue
            progress.reused += 1
            progress.evaluations += 1
            if node.record is None or not node.record.ok:
                progress.failed_at_run += 1
        orphans.clear()
        return added

    def measure(nodes: list[Node]) -> list[Node]:
        """Each node's Record: from the store (this search's, or any search's evaluation in
        this context), else measured; written when proposed and when evaluated."""
        done: dict[int, Node] = {}
        jobs: list[tuple[Node, Job]] = []
        for node in nodes:
            old = stored.get(node.key)
            record = old.record if old is not None and old.status == EVALUATED and old.id == node.id else None
            if record is None:
                record = store.cached(node.key, context)
            if record is not None:
                done[node.id] = node.evaluated(record)
                progress.reused += 1
                put(done[node.id])
                continue
            put(node)  # proposed: if the search dies now, it is measured on resume
            jobs.append((node, _job(settings, node)))
        # each Record written as it comes back (a search killed mid-round keeps what its round
        # measured); the tree takes them in the nodes' order once the round is in
        futures = {executor.submit(job): node for node, job in jobs}
        for future in as_completed(futures):
            node, record = futures[future], future.result()
            if settings.backend not in CPU_BACKENDS:
                progress.gpu_seconds += dict(record.seconds).get("run", 0.0)
            done[node.id] = node.evaluated(record)
            put(done[node.id])
            store.remember(node.key, context, record)
        out = [done[n.id] for n in nodes]
        for n in out:
            progress.evaluations += 1
            if n.record is None or not n.record.ok:  # (an untimed backend scores nothing)
                progress.failed_at_run += 1
            tree.add(n)
        return out

    root = Node(0, None, Candidate(seed_text).parsed().key(), seed_text, Move("seed", "seed"), status=PROPOSED)
    measure([root])
    progress.seed_score = tree.root.score
    progress.best = tree.best()
    progress.spent = proposer.usage()  # a resumed search's proposer spent before
    if on_round:
        on_round(progress, tree)

    while True:
        reason = _spent(budget, progress, settings.floor) or proposer.done_reason() or ""
        if reason:
            progress.reason = reason
            break
        asks = strategy.ask(tree)
        if not asks:
            progress.reason = "nothing left to expand"
            break
        progress.round += 1
        to_measure: list[Node] = []
        statics: list[Node] = []
        left = None if budget.evaluations is None else budget.evaluations - progress.evaluations
        for ask in asks:
            parent = tree.get(ask.node)
            ctx = Context(
                node=parent,
                memory=remembered(tree, ask.node, ask.memory),
                task=settings.task,
                target=settings.target,
                backend=settings.backend,
                preset=settings.preset,
                shapes=settings.shapes,
                measure_top=settings.measure_top,
                seen=frozenset(n.key for n in tree),
            )
            for p in proposer.propose(ctx):
                if tree.by_key(p.key) is not None:
                    continue  # one canonical program, one node: never evaluated twice
                if not p.stopped and left is not None and len(to_measure) >= left:
                    continue  # over the evaluation budget: not proposed
                node = Node(
                    tree.next_id(), parent.id, p.key, p.text, p.move, p.params, parent.depth + 1, progress.round,
                    p.predicted,
                )  # fmt: skip
                if p.stopped:
                    node = node.evaluated(p.static)  # type: ignore[arg-type]  # stopped: it has its Record
                    put(node)
                    statics.append(node)
                    progress.stopped_statically += 1
                else:
                    to_measure.append(node)
                tree.add(node)
        progress.spent = proposer.usage()
        measured = measure(to_measure)
        grafted = graft()
        strategy.tell(tree, sorted(statics + measured + grafted, key=lambda n: n.id))
        best = tree.best()
        if best is not None and (progress.best is None or best.id != progress.best.id):
            progress.best, progress.stall = best, 0
        else:
            progress.stall += 1
        if on_round:
            on_round(progress, tree)
    # stored nodes this run did not make, past where it stopped (a resume with a smaller budget):
    # the store holds this run's tree, their Records stay in the evaluations cache
    store.drop(search, sorted(i for i in stored_ids if i not in written))
    return Result(search, tree, progress)


def _spent(budget: Budget, progress: Progress, floor: float | None = None) -> str:
    if budget.evaluations is not None and progress.evaluations >= budget.evaluations:
        return f"evaluation budget ({budget.evaluations}) spent"
    if budget.seconds is not None and time.monotonic() - progress.started >= budget.seconds:
        return f"time budget ({budget.seconds:g} s) spent"
    if budget.gpu_seconds is not None and progress.gpu_seconds >= budget.gpu_seconds:
        return f"device time budget ({budget.gpu_seconds:g} s) spent"
    if budget.stall is not None and progress.stall >= budget.stall:
        return f"no better program in {budget.stall} rounds"
    if budget.tokens is not None and progress.spent.get("tokens", 0) >= budget.tokens:
        return f"token budget ({budget.tokens}) spent"
    if budget.money is not None and progress.spent.get("money", 0.0) >= budget.money:
        return f"money budget ({budget.money:g}) spent"
    best = None if progress.best is None else progress.best.score
    if budget.roofline is not None and floor and best and floor / best >= budget.roofline:
        return f"the best is at {floor / best:.0%} of the roofline floor (--roofline {budget.roofline:g})"
    return ""


# A timed node other than the seed is checked on one seed (and the harness's varied shape), then
# on the timing's fresh input sets, whose last runs are compared too: at a GPU preset's shapes
# each round of the correctness check is seconds of inputs made and compared on the CPU. The
# best program's timing in `kir bench` checks it on every round again.
TIMED_NODE_SEEDS = 1


def _job(settings: Settings, node: Node) -> Job:
    harness = dict(settings.harness)
    if "time" in harness and node.parent is not None:
        # the peers (eager, torch.compile) are timed with the seed, once: every other node is
        # timed alone and compared with the seed's peers (and needs no torch.compile warmed)
        harness["time"] = {**harness["time"], "peers": []}
        harness.pop("warm", None)
    return Job(
        key=node.key,
        text=node.text,
        task=str(settings.task.folder),
        backend=settings.backend,
        preset=settings.preset,
        target=None,
        params=node.params,
        seeds=settings.seeds(node.key, TIMED_NODE_SEEDS if "time" in harness and node.parent is not None else 3),
        harness=harness,
        timeout=settings.timeout,
    )
