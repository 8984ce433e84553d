"""The programs the tactic tests draw from, each with inputs for the reference interpreter.

Every program of every suite task (benchmarks/tasks/*/task.toml `[programs]`) at its `test`
preset: inputs from the task's own reference (`get_inputs()` through the harness's instance and
binding, as `kir run` makes them), the preset's parameters written into the program as its
defaults, and the task's tolerance. Every example (examples/*.kir) that has a reference case in
tests/examples/references.py, with that case's inputs, parameters and tolerance.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kir.interp import run
from kir.parser import parse
from kir.program import Program

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "tasks"
EXAMPLES = ROOT / "examples"
# rtol, atol (atol in units of the reference's root mean square), by dtype: the harness's
# (agent/harness/correctness.py TOLERANCES), where a task says nothing else
TOLERANCES = {"f64": (1e-9, 1e-9), "f32": (1e-4, 1e-5), "f16": (5e-3, 1e-3), "bf16": (2e-2, 1e-2)}


@dataclass(frozen=True, eq=False)
class Case:
    """One program with the inputs it runs on and how close a reordered result must be."""

    name: str  # task/program or example name
    file: Path
    inputs: dict[str, np.ndarray]
    rtol: float | None = None  # None: by the output's dtype
    atol: float | None = None
    params: tuple[tuple[str, int], ...] = ()  # written into the program as its defaults

    @functools.cached_property
    def program(self) -> Program:
        return read(self.file, self.params)

    @functools.cached_property
    def shapes(self) -> dict[str, int]:
        """The shape symbols' values in these inputs (those a dimension names alone)."""
        from kir import symexpr as sx

        out: dict[str, int] = {}
        for name, arg in self.program.kernel.args:
            if name in self.inputs:
                for dim, size in zip(arg.type.shape.data, self.inputs[name].shape, strict=False):
                    if isinstance(dim.data, sx.Sym):
                        out[dim.data.name] = int(size)
        return out

    def run(self, program: Program) -> dict[str, np.ndarray]:
        return run(program, {k: v.copy() for k, v in self.inputs.items()})

    @functools.cached_property
    def expected(self) -> dict[str, np.ndarray]:
        """The outputs of the program itself: what every tactic's result must reproduce."""
        return self.run(self.program)


def read(file: Path, params: tuple[tuple[str, int], ...]) -> Program:
    program = parse(file.read_text(), file=str(file.relative_to(ROOT)))
    known = {k: v for k, v in params if k in program.params}
    return program.with_params(**known) if known else program


def _suite_cases() -> list[Case]:
    import torch

    from agent.harness.backends import bind, to_numpy
    from agent.harness.instance import make_instance, native_outputs
    from agent.tasks import load_task

    cases = []
    for folder in sorted(p for p in SUITE.iterdir() if (p / "task.toml").is_file()):
        task = load_task(folder)
        if "test" not in task.presets:
            continue
        inst = make_instance(task, "test", seed=0)
        outputs = [torch.zeros_like(o) for o in native_outputs(inst)]
        for name, spec in task.programs.items():
            params = tuple(sorted(spec.params_for("test").items()))
            program = read(spec.file, params)
            tensors = bind(program, task, inst.inputs, outputs, inst.model)
            arrays = {k: to_numpy(t.cpu()) for k, t in tensors.items()}
            rtol, atol = task.tolerance.get("rtol"), task.tolerance.get("atol")
            cases.append(Case(f"{task.name}/{name}", spec.file, arrays, rtol, atol, params))
    return cases


def _example_cases() -> list[Case]:
    from tests.examples.references import CASES

    out = []
    for ref in CASES:
        inputs = ref.make(np.random.default_rng(0))
        params = tuple(sorted(ref.params.items()))
        out.append(Case(ref.example, EXAMPLES / f"{ref.example}.kir", inputs, ref.rtol, ref.atol, params))
    return out


@functools.cache
def cases() -> tuple[Case, ...]:
    return tuple(_suite_cases() + _example_cases())


def tolerance(case: Case, dtype: str) -> tuple[float, float]:
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    return (rtol if case.rtol is None else case.rtol, atol if case.atol is None else case.atol)
