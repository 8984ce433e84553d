"""`stages`: set the stage count of a pipelined loop (`pipeline(stages = 2)` -> `stages = 4`).

A `pipeline(stages = S)` loop has its global loads issued S - 1 iterations ahead into an S-deep
ring of shared buffers (lowering/passes/pipeline.py on the Triton and Gluon paths). More stages
hide more memory latency and cost S tiles of shared memory each; the values computed are the
same, because the hint moves copies, not arithmetic. Where the count is a parameter
(`stages = S`), the parameter's default is set; where it is a literal, the literal.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import ArrayAttr, IntAttr

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp
from kir.dialect.types import SymAttr, sym
from kir.program import Program
from tactics import ir
from tactics.base import IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "stages"
STAGES = IntRange(2, 8)


def pipelined(program: Program) -> list[ForOp]:
    """The loops with a `pipeline(stages = ...)` hint, in the order of the text."""
    return [loop for loop in ir.loops(program) if loop.stages is not None]


def _check(program: Program, target: str) -> list[Diagnostic]:
    if pipelined(program):
        return []
    loops = ir.loops(program)
    where = ir.span(program, loops[0]) if loops else program.span()
    return [
        not_applicable(
            NAME,
            "no-pipeline",
            where,
            "no loop has a pipeline(stages = ...) hint" if loops else "the kernel has no loop",
            "tactic pipeline adds the hint to a loop",
        )
    ]


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    loops = pipelined(program)
    if int(values["loop"]) < len(loops):
        return []
    return [
        Diagnostic(
            "tactic.stages.loop",
            "error",
            ir.span(program, loops[-1]) if loops else program.span(),
            f"tactic stages: loop = {values['loop']}, but the kernel has {len(loops)} pipelined loops",
            f"loop is 0 .. {len(loops) - 1}, in the order of the text",
        )
    ]


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    return {"loop": tuple(range(len(pipelined(program)))), "stages": (2, 3, 4, 5)}


def _rewrite(program: Program, *, loop: int, stages: int) -> None:
    chosen = pipelined(program)[loop]
    hinted = chosen.stages.data if isinstance(chosen.stages, SymAttr) else None
    kernel = program.kernel
    if isinstance(hinted, sx.Sym) and hinted.name in kernel.params:
        values = {**kernel.params, hinted.name: stages}
        kernel.param_defaults = ArrayAttr([IntAttr(values[n]) for n in kernel.params])
    else:
        chosen.stages = sym(stages)


STAGES_TACTIC = register(
    Tactic(
        name=NAME,
        summary="set the stage count of a pipelined loop",
        explain=__doc__ or "",
        params=(
            Param("loop", IntRange(0, 63), 0, "which pipelined loop, counted from 0 in the order of the text"),
            Param("stages", STAGES, 3, "the stage count: copies in flight + 1"),
        ),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/gemm/seed.kir stages --param stages=4",),
    )
)
