"""`warp-specialize`: ask for a GEMM-like loop to be split into producer and consumer warps
(`for k in 0 .. K / BK pipeline(stages = 3)` -> `for k in 0 .. K / BK pipeline(stages = 3)
warp_specialize`).

The language's way to ask for warp specialization at the tile level is the loop hint: each
backend carries it out its own way (lowering/passes/schedule.py). Triton takes it natively
(`tl.range(..., warp_specialize=True)`); gluon and cuda take the loop through
`lowering.passes.warp_specialize`, which writes a TMA producer warpgroup and wgmma consumer
warpgroups over an mbarrier ring whose depth is the loop's `pipeline(stages = S)`; a loop that
pass does not take stays a plain loop, with a `lower.warp-specialize` warning that says why.
Writing the hint rather than running the pass keeps the program at the tile level, where the
other tactics (retile, warps, stages) still apply, and leaves the choice of lowering to the
backend. Which warps issue the copies changes when data moves, never the values: exact.

Offered on sm_90 (Hopper: TMA, wgmma and setmaxnreg are what the split is for) for a loop at
the top level of a tile-level body that loads from global memory and accumulates a `dot`.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import UnitAttr

from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp
from kir.dialect.tile import DotOp, LoadOp
from kir.dialect.types import GlobalType
from kir.program import Program
from tactics import ir
from tactics.base import IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "warp-specialize"
TARGETS = ("sm_90",)


def _gemm_like(loop: ForOp) -> bool:
    ops = list(loop.walk())
    loads = any(isinstance(op, LoadOp) and isinstance(op.mem.type, GlobalType) for op in ops)
    return loads and any(isinstance(op, DotOp) for op in ops)


def candidates(program: Program) -> list[ForOp]:
    """The loops at the body's top level without the hint that load from global memory and
    take a dot, in the order of the text."""
    return [
        op
        for op in program.kernel.body.block.ops
        if isinstance(op, ForOp) and op.warp_specialize is None and _gemm_like(op)
    ]


def _check(program: Program, target: str) -> list[Diagnostic]:
    if target not in TARGETS:
        return [
            not_applicable(
                NAME,
                "target",
                ir.clause(program, "target"),
                f"warp specialization is for sm_90 (TMA and wgmma), not {target}",
            )
        ]
    explicit = ir.explicit_level(NAME, program, "where its roles are written out")
    if explicit:
        return explicit
    if candidates(program):
        return []
    loops = [op for op in program.kernel.body.block.ops if isinstance(op, ForOp)]
    return [
        not_applicable(
            NAME,
            "no-loop",
            ir.span(program, loops[0]) if loops else program.span(),
            "no loop at the top level of the body loads from global memory into a dot without the hint"
            if loops
            else "the body has no loop at its top level",
            "the hint is for a GEMM-like k-loop: loads of a and b tiles and acc = dot<f32>(a, b, acc)",
        )
    ]


def _validate(program: Program, values: dict[str, Value]) -> list[Diagnostic]:
    found = candidates(program)
    if int(values["loop"]) < len(found):
        return []
    return [
        Diagnostic(
            "tactic.warp-specialize.loop",
            "error",
            ir.span(program, found[-1]) if found else program.span(),
            f"tactic warp-specialize: loop = {values['loop']}, but {len(found)} loops can take the hint",
            f"loop is 0 .. {len(found) - 1}, in the order of the text",
        )
    ]


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    return {"loop": tuple(range(len(candidates(program))))}


def _rewrite(program: Program, *, loop: int) -> None:
    candidates(program)[loop].warp_specialize = UnitAttr()


WARP_SPECIALIZE = register(
    Tactic(
        name=NAME,
        summary="split a GEMM-like loop into producer and consumer warps: the warp_specialize hint",
        explain=__doc__ or "",
        params=(Param("loop", IntRange(0, 63), 0, "which candidate loop, counted from 0 in the order of the text"),),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        validate=_validate,
        examples=("kir tactics apply benchmarks/tasks/gemm/seed.kir warp-specialize",),
    )
)
