"""The roofline stop: the floor of a task on a chip (launch, then the larger of its compulsory
bytes over DRAM bandwidth and its flops over the fastest matrix rate), and a search that stops
once its best reaches the asked fraction of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.pipeline import Record
from agent.search.loop import Budget, Progress, _spent
from agent.search.roofline import compulsory_bytes, floor
from agent.search.tree import Move, Node
from agent.tasks import load_task
from costmodel.spec import chip
from kir.parser import parse_file

TASKS = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"


def test_the_floor_of_a_memory_bound_task_is_its_bytes_over_the_bandwidth():
    task = load_task(TASKS / "softmax")
    program = parse_file(task.programs["seed"].file)
    shapes = task.preset("bench").variables
    nbytes = compulsory_bytes(program, {k: v for k, v in shapes.items() if isinstance(v, int)})
    assert nbytes == 2 * shapes["M"] * shapes["N"] * 2  # x read, y written, bf16
    c = chip("h200")
    assert floor(program, task, "bench", "h200", "ms") == pytest.approx((c.launch_s + nbytes / c.dram_bps) * 1e3)
    cycles = floor(program, task, "bench", "mtia-sim", "cycles")
    m = chip("mtia-sim")
    assert cycles == pytest.approx((m.launch_s + nbytes / m.dram_bps) * m.clock_hz)


def test_the_floor_of_a_gemm_is_its_flops_over_the_matrix_rate():
    task = load_task(TASKS / "gemm")
    program = parse_file(task.programs["seed"].file)
    c = chip("h200")
    flops = task.counted_flops("bench")
    assert floor(program, task, "bench", "h200", "ms") == pytest.approx(
        (c.launch_s + flops / max(c.tc_flops.values())) * 1e3
    )


def _progress(best: float) -> Progress:
    record = Record(candidate="k", file="f", stage="run", ok=True, until="run", verdict={"metrics": {"cycles": best}})
    return Progress(best=Node(0, None, "k", "", Move("seed", "seed"), record=record))


def test_a_search_stops_once_its_best_reaches_the_fraction_of_the_floor():
    budget = Budget(evaluations=None, roofline=0.5)
    assert _spent(budget, _progress(2100.0), floor=1000.0) == ""  # 48%
    assert "roofline" in _spent(budget, _progress(1900.0), floor=1000.0)  # 53%
    assert _spent(Budget(evaluations=None), _progress(1000.0), floor=1000.0) == ""  # no --roofline
