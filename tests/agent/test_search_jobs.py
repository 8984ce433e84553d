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


def _records(monkeypatch, rules: list[str | None]):
    """run_job against an evaluation whose successive Records fail with `rules` (None: passes);
    the waits it made between them."""
    from agent.execute import base
    from agent.pipeline import Record
    from kir.diagnostics import Diagnostic

    answers = iter(rules)

    def fake(candidate, **kwargs):
        rule = next(answers)
        diags = () if rule is None else (Diagnostic(rule, "error", None, "out of memory"),)
        return Record(
            candidate=candidate.key(), file="<t>", stage="run", ok=rule is None, until="run", diagnostics=diags
        )

    monkeypatch.setattr(base, "evaluate", fake)
    waits: list[float] = []
    return waits, lambda backend: base.run_job(
        base.Job(key=_key(), text=SEED_TEXT, task=str(TASK.folder), backend=backend), wait=waits.append
    )


SEED_TEXT = (TASK.folder / "seed.kir").read_text()


def _key() -> str:
    from agent.pipeline import Candidate

    return Candidate(SEED_TEXT, (), "<t>").key()


def test_a_gpu_evaluation_the_shared_device_ran_out_of_memory_is_run_again(monkeypatch):
    waits, run = _records(monkeypatch, ["harness.device-memory", "harness.out-of-memory", None])
    record = run("triton")
    assert record.ok and len(waits) == 2 and waits[1] > waits[0]


def test_it_counts_as_the_candidates_failure_after_the_retries(monkeypatch):
    waits, run = _records(monkeypatch, ["harness.out-of-memory"] * 3)
    record = run("triton")
    assert not record.ok and len(waits) == 2


def test_a_failure_of_the_candidate_itself_and_any_failure_on_the_cpu_are_not_run_again(monkeypatch):
    waits, run = _records(monkeypatch, ["harness.mismatch"])
    assert not run("triton").ok and waits == []
    waits, run = _records(monkeypatch, ["harness.out-of-memory"])
    assert not run("mtia-sim").ok and waits == []  # the job's own memory limit: the same every time


def test_a_reference_that_runs_the_device_out_of_memory_is_the_devices_state_not_the_tasks():
    import pytest

    from agent.tasks import TaskError

    class OutOfMemoryError(RuntimeError):  # torch.OutOfMemoryError's name, without a GPU
        pass

    def allocates():
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")

    def fails():
        raise ValueError("a bug of the reference")

    with pytest.raises(TaskError) as caught:
        TASK.call("the reference", allocates)
    assert caught.value.diagnostics[0].rule == "harness.device-memory"
    with pytest.raises(TaskError) as caught:
        TASK.call("the reference", fails)
    assert caught.value.diagnostics[0].rule == "task.reference"
