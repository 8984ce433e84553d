"""`grouped-order`: walk a 2-D grid of tiles in groups of GM tile rows (`grid(cdiv(M, BM),
cdiv(N, BN))` -> `grid(cdiv(M, BM) * cdiv(N, BN))` with the tile of each program computed).

A GEMM-like program reads a row panel of one operand and a column panel of the other. Launched
row by row, the programs in flight at once share one row panel but each reads a different
column panel, so the other operand streams through L2 once per tile row. Numbering the tiles
column by column inside groups of GM tile rows (Triton's matmul tutorial, "L2 cache
optimizations") makes the programs in flight share GM row panels and a few column panels,
which stay in L2:

    pid = program_id(0)
    width = GM * G1                       # the tiles of one group of GM tile rows
    first = pid / width * GM              # the group's first tile row
    height = minimum(G0 - first, GM)      # the last group may be shorter
    pid_m = first + pid % width % height  # stands for program_id(0)
    pid_n = pid % width / height          # stands for program_id(1)

where G0 and G1 are the old grid's extents. Each tile is still computed by one program, by the
same ops: exact. Offered for a tile-level program with a 2-D grid and a `dot` (the operand
panels are what the order is for); the tile rows are axis 0, as `program_id(0) * BM` has them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.tile import ProgramIdOp
from kir.program import Program
from tactics import _grid, ir
from tactics.base import Param, PowersOfTwo, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "grouped-order"


def _check(program: Program, target: str) -> list[Diagnostic]:
    explicit = _grid.explicit_reason(NAME, program)
    if explicit:
        return explicit
    extents = _grid.grid(program)
    if len(extents) != 2:
        return [
            not_applicable(
                NAME,
                "grid",
                ir.clause(program, "grid"),
                f"the grid has {len(extents)} axes; the order groups the tiles of a 2-D grid (rows, columns)",
                "a 1-D grid is ordered already; a 3-D one (a batch axis) is not grouped here",
            )
        ]
    if not _grid.has_dot(program):
        return [
            not_applicable(
                NAME,
                "no-dot",
                ir.clause(program, "grid"),
                "the program has no dot: no operand panels are shared between tiles",
                "grouping is for GEMM-like programs, whose tiles share row and column panels in L2",
            )
        ]
    return []


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    return {"group": (1, 2, 4, 8, 16)}


def _rewrite(program: Program, *, group: int) -> None:
    g0, g1 = _grid.grid(program)
    gm = _grid.add_param(program, "GM", group)
    ids = _grid.program_ids(program)
    body = program.kernel.body.block
    taken = _grid.taken_names(program)
    emit = _grid.Emitter(body, body.first_op, ir.span(program, ids[0] if ids else None))
    pid_op = ProgramIdOp(0)
    pid = emit(pid_op, _grid.fresh("pid", taken))
    group_rows = emit.static(sx.Sym(gm))
    width = emit.binary("mul", group_rows, emit.static(g1), _grid.fresh("width", taken))
    first = emit.binary("mul", emit.binary("div", pid, width), emit.static(sx.Sym(gm)), _grid.fresh("first", taken))
    left = emit.binary("sub", emit.static(g0), first)
    height = emit.binary("minimum", left, emit.static(sx.Sym(gm)), _grid.fresh("height", taken))
    within = emit.binary("rem", emit.binary("rem", pid, width), height)
    pid_m = emit.binary("add", first, within, _grid.fresh("pid_m", taken))
    pid_n = emit.binary("div", emit.binary("rem", pid, width), height, _grid.fresh("pid_n", taken))
    _grid.stand_in(program, {0: pid_m, 1: pid_n}, keep=pid_op)
    _grid.set_grid(program, [sx.Bin("*", g0, g1)])
    _grid.bound_i32(program, [sx.Bin("*", g0, g1), sx.Bin("*", sx.Sym(gm), g1)])  # pid and width are i32


GROUPED_ORDER = register(
    Tactic(
        name=NAME,
        summary="walk a 2-D grid of tiles in groups of GM tile rows (L2 reuse of the operand panels)",
        explain=__doc__ or "",
        params=(Param("group", PowersOfTwo(1, 64), 8, "GM: the tile rows of one group"),),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        anchor=lambda program: ir.clause(program, "grid"),
        examples=("kir tactics apply benchmarks/tasks/gemm/seed.kir grouped-order --param group=8",),
    )
)
