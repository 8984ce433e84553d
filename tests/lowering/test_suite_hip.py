"""The AMD half of the suite, compile-verified (there is no AMD GPU here): every program of every
benchmark task and every example that the hip backend accepts compiles with hipcc for gfx90a
(the task's test parameters: the HIP emitter unrolls a tile-level dot, as the CUDA one does), and
every tile-level one compiles through Triton for gfx942 (the bench parameters, as it would be
launched). A program the hip backend refuses must be an explicit-level one: the tile level is
the portable one."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tasks import load_suite
from kir.diagnostics import KirError
from kir.parser import parse_file
from lowering.compile import compile_program
from lowering.emit.base import program_level
from lowering.entry import lower
from lowering.targets.hip.compile import find_hipcc

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "tasks"
PROGRAMS = [(task, name) for task in load_suite(SUITE) for name in task.programs]
EXAMPLES = sorted(ROOT.glob("examples/*.kir"))

needs_hipcc = pytest.mark.skipif(find_hipcc() is None, reason="hipcc is not installed (apt-get install hipcc)")


def _id(case) -> str:
    return f"{case[0].name}-{case[1]}"


def accepted(program, params) -> bool:
    """Whether the hip backend takes the program; a refusal must be of the explicit level."""
    try:
        lower(program, "hip", params)
    except KirError as err:
        assert program_level(program) == "explicit", [d.render() for d in err.diagnostics]
        assert {d.rule for d in err.diagnostics} == {"lower.level"}
        return False
    return True


def errors(report) -> list[str]:
    return [d.render() for d in report.diagnostics if d.is_error] or [report.log[-2000:]]


@needs_hipcc
@pytest.mark.parametrize("case", PROGRAMS, ids=_id)
def test_suite_program_compiles_with_hipcc_for_gfx90a(case):
    task, name = case
    spec = task.programs[name]
    program = parse_file(spec.file)
    params = spec.params_for("test")
    if not accepted(program, params):
        pytest.skip("explicit level: the hip backend refuses it")
    report = compile_program(program, "hip", "gfx90a", params)
    assert report.ok, errors(report)
    assert report.registers and report.occupancy and report.static_shared_bytes is not None


@pytest.mark.parametrize("case", PROGRAMS, ids=_id)
def test_suite_program_compiles_through_triton_for_gfx942(case):
    task, name = case
    spec = task.programs[name]
    program = parse_file(spec.file)
    params = spec.params_for("bench")
    if program_level(program) != "tile":
        pytest.skip("explicit level: Triton takes the tile level")
    report = compile_program(program, "triton", "gfx942", params)
    assert report.ok, errors(report)
    assert report.registers and report.sgprs


@needs_hipcc
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_compiles_with_hipcc_for_gfx90a(path):
    program = parse_file(str(path))
    if not accepted(program, None):
        pytest.skip("explicit level: the hip backend refuses it")
    report = compile_program(program, "hip", "gfx90a")
    assert report.ok, errors(report)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_compiles_through_triton_for_gfx942(path):
    program = parse_file(str(path))
    if program_level(program) != "tile":
        pytest.skip("explicit level: Triton takes the tile level")
    report = compile_program(program, "triton", "gfx942")
    assert report.ok, errors(report)
