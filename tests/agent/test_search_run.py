"""The search loop with real evaluations: softmax's seed on mtia-sim (the simulator's cycles are
deterministic), through the command line as a user runs it.

- the same search twice with one random seed makes one tree;
- `kill -9` of a running search at random points, each followed by `--resume`: no evaluated
  node is lost, no canonical program is evaluated twice, and the final tree is the tree of a
  run never interrupted (CI: 4 points; KIR_TESTS=full: 20);
- a candidate that hangs and one that crashes, inside a search: both recorded with their stage,
  the search goes on, neither is evaluated again.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent.execute import make_executor
from agent.propose.base import Context, Proposal, Proposer
from agent.search import registry
from agent.search.loop import Budget, Settings, run_search
from agent.search.tree import Move
from agent.store import open_store
from agent.tasks import load_task
from kir.parser import parse
from tests.budget import FULL

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "benchmarks" / "tasks" / "softmax"
ARGS = "search softmax --strategy mcts --budget 5 --measure-top 2 --width 2 --random-seed 7".split()


def kir(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agent.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )


def finish(*args: str, cwd: Path) -> dict:
    proc = kir(*args, "--json", cwd=cwd)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out)


def tree_of(db: Path) -> list[tuple]:
    with open_store(str(db)) as store:
        (search,) = store.searches()
        return [
            (n.id, n.parent, n.key, n.move.describe(), n.status, n.stage, n.score) for n in store.nodes(search["id"])
        ]


def test_same_seed_same_tree(tmp_path):
    a = finish(*ARGS, "--db", str(tmp_path / "a.sqlite"), "--executor", "inline", cwd=tmp_path)
    finish(*ARGS, "--db", str(tmp_path / "b.sqlite"), "--executor", "pool", cwd=tmp_path)
    assert a["progress"]["evaluations"] == 5
    assert a["best"]["score"] <= a["progress"]["seed_score"]
    assert tree_of(tmp_path / "a.sqlite") == tree_of(tmp_path / "b.sqlite")  # inline and pool agree


def test_kill_9_and_resume(tmp_path):
    finish(*ARGS, "--db", str(tmp_path / "whole.sqlite"), cwd=tmp_path)
    whole = tree_of(tmp_path / "whole.sqlite")
    db = tmp_path / "killed.sqlite"
    rng = random.Random(11)
    evaluated_before: dict[str, object] = {}
    for point in range(20 if FULL else 4):
        args = [*ARGS, "--db", str(db)] + (["--resume"] if db.exists() else [])
        proc = kir(*args, cwd=tmp_path)
        time.sleep(rng.uniform(1.0, 12.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if not db.exists():
            continue
        now = {row[2]: row[6] for row in tree_of(db) if row[4] == "evaluated"}
        for key, score in evaluated_before.items():
            assert now.get(key, "lost") == score, f"kill {point}: evaluated node {key[:12]} lost or changed"
        evaluated_before = now
    result = finish(*ARGS, "--db", str(db), "--resume", cwd=tmp_path)
    assert tree_of(db) == whole
    keys = [row[2] for row in tree_of(db)]
    assert len(keys) == len(set(keys))  # no canonical program twice
    assert result["progress"]["evaluations"] == 5


class Planted(Proposer):
    """Proposes, once, a program that never ends, one that crashes its process, and an honest one."""

    name = "planted"

    def __init__(self, texts: list[tuple[str, str]]):
        self.texts = texts
        self.calls = 0

    def propose(self, context: Context) -> list[Proposal]:
        self.calls += 1
        if context.node.parent is not None:
            return []
        out = []
        from agent.pipeline import Candidate

        for name, text in self.texts:
            key = Candidate(text).parsed().key()
            if key not in context.seen:
                out.append(Proposal(text, Move(self.name, name), key, predicted=1.0))
        return out


SEED = (SOFTMAX / "seed.kir").read_text()
# a loop of 2^31 - 1 simulated loads: it does not end within the harness's timeout
HANG = """kernel softmax<BLOCK = 512>(x: global bf16[M, N], y: out global bf16[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  spin = zeros(f32[BLOCK])
  for k in 0 .. 2147483647 {
    spin = spin + cast<f32>(load(x[row, cols], mask = mask, other = 0.0))
  }
  v = cast<f32>(load(x[row, cols], mask = mask, other = -inf)) + spin * 0.0
  e = exp(v - max(v, axis = 0))
  store(y[row, cols], cast<bf16>(e / sum(e, axis = 0)), mask = mask)
}
"""


def test_hang_and_crash_are_recorded_and_not_retried(tmp_path):
    task = load_task(SOFTMAX)
    seed = parse(SEED).with_params(**task.programs["seed"].params_for("test")).text()
    honest = parse(seed).with_params(BLOCK=1024).text()
    crash = parse(seed).with_params(BLOCK=2**28).text()  # 1 GiB tiles: the candidate's process dies
    planted = Planted([("hang", HANG), ("crash", crash), ("honest", honest)])
    settings = Settings(task=task, backend="mtia-sim", target="mtia-sim", preset="test", measure_top=3, timeout=20.0)
    with open_store(str(tmp_path / "s.sqlite")) as store, make_executor("pool", workers=2) as ex:
        sid = store.search("planted", "softmax", {})
        strategy = registry.get("greedy")(random.Random(0), width=1)
        result = run_search(settings, seed, strategy, planted, ex, store, sid, Budget(evaluations=10))
        nodes = {n.move.name: n for n in result.tree}
        assert nodes["hang"].record is not None and not nodes["hang"].record.ok
        assert nodes["hang"].stage == "run"
        assert any("time" in d.message for d in nodes["hang"].record.diagnostics)
        assert nodes["crash"].stage == "run" and not nodes["crash"].record.ok
        assert (nodes["crash"].record.verdict or {}).get("stage") == "crash"
        assert nodes["honest"].score is not None  # the search went on
        assert result.progress.failed_at_run == 2
        # asked again (a resumed search), the hang is the store's answer, not measured again
        again = run_search(
            settings, seed, registry.get("greedy")(random.Random(0), width=1), Planted(planted.texts), ex, store, sid,
            Budget(evaluations=10),
        )  # fmt: skip
        assert again.progress.reused == again.progress.evaluations
