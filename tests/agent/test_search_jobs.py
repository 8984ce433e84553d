"""What a search sends to be measured: on a GPU the seed times the peers (eager, torch.compile,
warmed once) and is checked on three seeds; every other node is timed alone, without warming
torch.compile, and checked on one seed before its timing's fresh sets are compared."""

from __future__ import annotations

from pathlib import Path

from agent.search.loop import Settings, _job
from agent.search.tree import Move, Node
from agent.tasks import load_task

TASK = load_task(Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "softmax")
TIMED = {"time": {"sets": 3, "runs": 50, "peers": ["eager", "compile"]}, "warm": True}


def _node(i: int, parent: int | None) -> Node:
    return Node(i, parent, f"key{i}", "text", Move("tactic" if parent is not None else "seed", "x"))


def test_the_seed_times_the_peers_and_is_checked_on_three_seeds():
    job = _job(Settings(task=TASK, backend="triton", preset="bench", harness=TIMED), _node(0, None))
    assert job.harness == TIMED and len(job.seeds) == 3


def test_another_node_is_timed_alone_and_checked_on_one_seed():
    job = _job(Settings(task=TASK, backend="triton", preset="bench", harness=TIMED), _node(1, 0))
    assert job.harness["time"]["peers"] == [] and "warm" not in job.harness and len(job.seeds) == 1


def test_on_the_simulator_every_node_is_checked_on_three_seeds():
    job = _job(Settings(task=TASK, backend="mtia-sim"), _node(1, 0))
    assert job.harness == {} and len(job.seeds) == 3
