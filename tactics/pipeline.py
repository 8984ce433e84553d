"""`pipeline`: ask for a loop to be software-pipelined (`for k in 0 .. K / BK` ->
`for k in 0 .. K / BK pipeline(stages = 3)`).

The hint lets the lowering issue a loop's global loads stages - 1 iterations ahead into a ring
of shared buffers (lowering/passes/pipeline.py), so that the copies of the next iterations
overlap this iteration's arithmetic. It changes when data moves, never the values. Offered for
loops at the top level of the body with a global load in them, the loops the lowering can
pipeline; a loop that does not qualify in the end keeps its plain form, with a `lower.pipeline`
warning that says why.
"""

from __future__ import annotations

from collections.abc import Mapping

from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp
from kir.dialect.tile import LoadOp
from kir.dialect.types import GlobalType, sym
from kir.program import Program
from tactics import ir
from tactics.base import IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "pipeline"


def candidates(program: Program) -> list[ForOp]:
    """The loops of the body's top level without a pipeline or warp_specialize hint that load
    from global memory, in the order of the text."""
    out = []
    for op in program.kernel.body.block.ops:
        if isinstance(op, ForOp) and op.stages is None and op.warp_specialize is None:
            if any(isinstance(inner, LoadOp) and isinstance(inner.mem.type, GlobalType) for inner in op.walk()):
                out.append(op)
    return out


def _check(program: Program, target: str) -> list[Diagnostic]:
    explicit = ir.explicit_level(NAME, program, "where its copies are written out")
    if explicit:
        return explicit
    if candidates(program):
        return []
    loops = ir.loops(program)
    return [
        not_applicable(
            NAME,
            "no-loop",
            ir.span(program, loops[0]) if loops else program.span(),
            "no loop at the top level of the body loads from global memory without a hint"
            if loops
            else "the kernel has no loop",
        )
    ]


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    found = candidates(program)
    if int(values["loop"]) < len(found):
        return []
    return [
        Diagnostic(
            "tactic.pipeline.loop",
            "error",
            ir.span(program, found[-1]) if found else program.span(),
            f"tactic pipeline: loop = {values['loop']}, but {len(found)} loops can take the hint",
            f"loop is 0 .. {len(found) - 1}, in the order of the text",
        )
    ]


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    return {"loop": tuple(range(len(candidates(program)))), "stages": (2, 3, 4)}


def _rewrite(program: Program, *, loop: int, stages: int) -> None:
    candidates(program)[loop].stages = sym(stages)


PIPELINE = register(
    Tactic(
        name=NAME,
        summary="software-pipeline a loop: pipeline(stages = S)",
        explain=__doc__ or "",
        params=(
            Param("loop", IntRange(0, 63), 0, "which candidate loop, counted from 0 in the order of the text"),
            Param("stages", IntRange(2, 8), 3, "the stage count: copies in flight + 1"),
        ),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/rmsnorm_backward/seed.kir pipeline --param stages=3",),
    )
)
