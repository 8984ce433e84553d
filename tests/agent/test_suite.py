"""Every task of the benchmark suite: its programs are clean KIR, and each one is correct on the
`test` preset through the reference interpreter and through Triton's CPU interpreter (the full
correctness protocol: poisoned outputs, inputs checked unchanged, three seeds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.harness.backends import KirCandidate
from agent.harness.correctness import KirRun, check
from agent.tasks import load_suite
from kir.parser import parse_file
from lowering.emit.base import program_level
from verifier.check import check_program

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"
TASKS = load_suite(SUITE)
PROGRAMS = [(task, name) for task in TASKS for name in task.programs]


def _id(case) -> str:
    task, name = case
    return f"{task.name}-{name}"


def test_every_task_has_a_seed_and_a_tuned_program_and_both_presets():
    for task in TASKS:
        assert {"seed", "tuned"} <= set(task.programs), task.name
        assert {"test", "bench"} <= set(task.presets), task.name


@pytest.mark.parametrize("case", PROGRAMS, ids=_id)
def test_program_is_clean_and_canonical(case):
    task, name = case
    program = parse_file(task.programs[name].file)
    for preset in ("test", "bench"):
        params = task.programs[name].params_for(preset)
        checked = program.with_params(**params) if params else program
        errors = [d for d in check_program(checked) if d.is_error]
        assert not errors, [d.render() for d in errors]
    assert program.text() == task.programs[name].file.read_text()


# Triton's CPU interpreter runs conv1d's programs for close to a minute each: in CI they run on
# the reference interpreter (and compile for sm_90 in tests/lowering), and through Triton's
# interpreter in the full run.
SLOW_UNDER_TRITON = {"conv1d"}
CORRECTNESS = [
    pytest.param(
        case, backend, id=f"{_id(case)}-{backend}",
        marks=[pytest.mark.full_only] if backend == "triton-interp" and case[0].name in SLOW_UNDER_TRITON else [],
    )
    for case in PROGRAMS
    for backend in ("interp", "triton-interp")
]  # fmt: skip


@pytest.mark.parametrize("case, backend", CORRECTNESS)
def test_program_is_correct_on_the_test_preset(case, backend):
    task, name = case
    spec = task.programs[name]
    program = parse_file(spec.file)
    if backend == "triton-interp" and program_level(program) == "explicit":
        pytest.skip("the Triton backend takes tile-level programs (explicit ones run through gluon and cuda)")
    candidate = KirCandidate(program, backend, spec.params_for("test"))
    verdict = check(task, KirRun(candidate), "test", seeds=[11, 12, 13])
    assert verdict.ok, [d.render() for d in verdict.diagnostics]
