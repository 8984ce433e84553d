"""`warps`: set the number of warps a program runs on (`warps(4)` -> `warps(16)`).

The tile level leaves the distribution of a tile's elements over threads to the lowering, so
the warp count changes how many elements each thread holds, how many registers it needs and how
many programs fit on an SM, never what is computed. The explicit level names warps itself
(roles, warpgroup products), so there the count is part of the program and is not moved.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import IntAttr

from kir.diagnostics import Diagnostic
from kir.program import Program
from tactics import ir
from tactics.base import Param, PowersOfTwo, Tactic, not_applicable
from tactics.registry import register

NAME = "warps"
# At most 1024 threads a program: 32 warps of 32 lanes (NVIDIA), 16 wavefronts of 64 (AMD).
MOST = {"gfx90a": 16, "gfx942": 16}


def _check(program: Program, target: str) -> list[Diagnostic]:
    kernel = program.kernel
    if kernel.warp_unit.data != "warps":
        return [
            not_applicable(
                NAME,
                "warpgroups",
                ir.clause(program, "launch"),
                f"the kernel runs on {kernel.warp_unit.data}, which its explicit-level code is written for",
                "the count of a warpgroup program is part of its roles and products",
            )
        ]
    return ir.explicit_level(
        NAME,
        program,
        "where the code says what each warp does",
        "change the warp count of the tile-level program it came from",
    )


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[int | str, ...]]:
    current = program.kernel.num_warps.data
    most = MOST.get(target, 32)
    return {"warps": tuple(v for v in PowersOfTwo(1, most).values() if v != current)}


def _rewrite(program: Program, *, warps: int) -> None:
    program.kernel.num_warps = IntAttr(warps)


WARPS = register(
    Tactic(
        name=NAME,
        summary="set the number of warps each program runs on",
        explain=__doc__ or "",
        params=(Param("warps", PowersOfTwo(1, 32), 4, "warps a program runs on (a power of two)"),),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        anchor=lambda program: ir.clause(program, "launch"),
        examples=("kir tactics apply benchmarks/tasks/softmax/seed.kir warps --param warps=16",),
    )
)
