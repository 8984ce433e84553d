"""Every program of every benchmark task is correct on mtia-sim on the test preset (the harness's
protocol), except explicit-level ones written with Hopper's ops (refused at the op), and the
record of a run carries the simulated cycles."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.harness.backends import KirCandidate
from agent.harness.correctness import KirRun, check
from agent.tasks import load_suite
from kir.diagnostics import KirError
from kir.parser import parse_file
from lowering.emit.base import program_level

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"
PROGRAMS = [(task, name) for task in load_suite(SUITE) for name in task.programs]


@pytest.mark.parametrize("case", PROGRAMS, ids=lambda c: f"{c[0].name}-{c[1]}")
def test_program_is_correct_on_mtia_sim(case):
    task, name = case
    spec = task.programs[name]
    program = parse_file(spec.file)
    candidate = KirCandidate(program, "mtia-sim", spec.params_for("test"))
    try:
        candidate.lowered()
    except KirError as err:
        # Hopper's mbarriers, TMA, wgmma and roles have no counterpart on the chip; the tile
        # level always lowers
        assert program_level(program) == "explicit", [d.render() for d in err.diagnostics]
        assert {d.rule for d in err.diagnostics} == {"lower.unsupported"}
        pytest.skip("explicit level with ops mtia-sim does not have")
    verdict = check(task, KirRun(candidate), "test", seeds=[11, 12])
    assert verdict.ok, [d.render() for d in verdict.diagnostics]
    assert candidate._cache["cycles"] > 0


def test_worker_record_has_cycles():
    from agent.harness.worker import evaluate

    task = SUITE / "softmax"
    record = evaluate(
        {
            "task": str(task),
            "candidate": {"kind": "kir", "file": str(task / "mtia.kir"), "backend": "mtia-sim",
                          "params": {"BLOCK": 512, "R": 4}},
            "preset": "test",
            "device": "cpu",
            "seeds": [1],
        }
    )  # fmt: skip
    assert record["ok"], record
    assert record["metrics"]["cycles"] > 0
