"""The Ray executor (agent/execute/ray.py) on a local Ray cluster: the same search as the pool's
gives the same tree (issue #21's acceptance), and a job that hangs past its timeout is a Record
saying so, its worker killed. Skipped where Ray is not installed (it is in the test extras)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[test]')")

from agent.execute.base import Job  # noqa: E402
from agent.execute.ray import RayExecutor  # noqa: E402
from agent.pipeline import Candidate  # noqa: E402
from agent.search.tree import score_of  # noqa: E402
from agent.tasks import load_task  # noqa: E402
from kir.parser import parse  # noqa: E402
from tests.agent.test_search_run import ARGS, HANG, SEED, SOFTMAX, finish, tree_of  # noqa: E402


@pytest.fixture
def local_ray(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # a cluster of the test's own, never a shared one


def test_ray_and_pool_make_one_tree(tmp_path, local_ray):
    a = finish(*ARGS, "--db", str(tmp_path / "ray.sqlite"), "--executor", "ray", "--workers", "2", cwd=tmp_path)
    finish(*ARGS, "--db", str(tmp_path / "pool.sqlite"), "--executor", "pool", cwd=tmp_path)
    assert a["progress"]["evaluations"] == 5
    assert tree_of(tmp_path / "ray.sqlite") == tree_of(tmp_path / "pool.sqlite")


def test_a_hang_past_the_timeout_is_an_executor_timeout(local_ray):
    task = load_task(SOFTMAX)
    seed = parse(SEED).with_params(**task.programs["seed"].params_for("test")).text()
    before = orphaned_checkers()
    with RayExecutor(workers=1, margin=0.0) as ex:
        warm = ex.submit(job(seed, timeout=60.0)).result(timeout=300)  # the worker started: the hang reaches its run
        record = ex.submit(job(HANG, timeout=1.0)).result(timeout=300)
    assert warm.ok and score_of(warm) is not None
    assert not record.ok and record.stage == "run"
    assert [d.rule for d in record.diagnostics] == ["executor.timeout"]
    assert not ray.is_initialized()  # the cluster it started is shut down on close
    time.sleep(1)
    assert orphaned_checkers() <= before  # the cancelled task took the harness's checker down with it


def job(text: str, timeout: float) -> Job:
    return Job(key=Candidate(text).parsed().key(), text=text, task=str(SOFTMAX), backend="mtia-sim", timeout=timeout)


def orphaned_checkers() -> set[int]:
    """The harness's checker processes left to init (their parent gone)."""
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"agent.harness.worker" in args and ppid == 1:
            found.add(int(proc.name))
    return found
