"""Every program of every benchmark task lowers to each backend that accepts its level (or to
the backends its task entry names, the others refusing it at a located op), and the tuned ones
compile ahead of time for sm_90: Triton (or Gluon) with their bench parameters, and
nvcc for CUDA (where it is installed) with their test parameters: the CUDA emitter unrolls a
tile-level dot fully, and nvcc takes minutes on the bench tiles of the GEMMs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.tasks import load_suite
from kir.diagnostics import KirError
from kir.parser import parse_file
from lowering.emit.base import program_level
from lowering.entry import lower

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"
PROGRAMS = [(task, name) for task in load_suite(SUITE) for name in task.programs]
BACKENDS = {"tile": ("triton", "cuda"), "explicit": ("gluon", "cuda")}


def _id(case) -> str:
    return f"{case[0].name}-{case[1]}"


@pytest.mark.parametrize("case", PROGRAMS, ids=_id)
def test_every_suite_program_lowers_to_each_backend_of_its_level(case):
    task, name = case
    spec = task.programs[name]
    program = parse_file(spec.file)
    for preset in ("test", "bench"):
        mtia = program.kernel.target.data == "mtia-sim"  # written for the simulator
        for backend in ("mtia-sim",) if mtia else BACKENDS[program_level(program)]:
            if spec.backends and backend not in spec.backends:
                # a backend the entry leaves out refuses the program at a located op
                with pytest.raises(KirError) as err:
                    lower(program, backend, spec.params_for(preset))
                (d, *_) = err.value.diagnostics
                assert d.rule == "lower.unsupported" and d.span is not None and d.span.line > 1
                continue
            lowered = lower(program, backend, spec.params_for(preset))
            assert lowered.source and lowered.entry in lowered.source


def _for_mtia(case) -> bool:
    """A program written for the simulated accelerator (it runs there, not on sm_90)."""
    return parse_file(case[0].programs[case[1]].file).kernel.target.data == "mtia-sim"


TUNED = [case for case in PROGRAMS if case[1] != "seed" and not _for_mtia(case)]


@pytest.mark.parametrize("case", TUNED, ids=_id)
def test_tuned_programs_compile_for_sm_90(case):
    from lowering.compile import compile_program

    task, name = case
    spec = task.programs[name]
    program = parse_file(spec.file)
    backends = ["triton"] if program_level(program) == "tile" else ["gluon"]
    if shutil.which("nvcc") and (not spec.backends or "cuda" in spec.backends):
        backends.append("cuda")
    for backend in backends:
        params = spec.params_for("test" if backend == "cuda" else "bench")
        report = compile_program(program, backend, "sm_90a" if backend == "cuda" else "sm_90", params)
        assert report.ok, [d.render() for d in report.diagnostics]
