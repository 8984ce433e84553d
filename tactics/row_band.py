"""`row-band`: give each program a band of R consecutive rows, streamed through a pipelined
loop (`grid(M)`, `row = program_id(0)` -> `grid(M / R)`, `where M % R == 0` and
`for i in 0 .. R pipeline(stages = 2) { row = program_id(0) * R + i ... }`).

A program of one row loads its row and waits for it: nothing else is in flight while it
computes, and its loads are issued one after another. In a pipelined loop the lowering issues
an iteration's global loads ahead, as asynchronous copies into a ring of local buffers
(lowering/passes/pipeline.py): the next row streams in while this one is computed, and the
loads of one row (the row and the weights) are in flight together. On mtia-sim this is the
processing element's DMA (the row copies need rows that start on 8 bytes: with `N` free the
loop keeps its direct loads, and fix-shape or a divisibility clause makes it a DMA); on a GPU,
Triton's pipelined loop. R = 1 keeps the grid and only overlaps a row's own loads; a larger R
launches R times fewer programs, each streaming its rows (mtia-sim's hand-written softmax is
this shape of kernel).

The whole body moves into the loop (as persistent's does), `program_id(0)` reads
`program_id(0) * R + i` and `num_programs(0)` the old grid's extent, and `M % R == 0` joins the
`where` clauses (the interpreter and the harness check it at launch). Where the old extent is a
product (`R0 * R1` rows), `R0 * R1 <= 2147483647` joins them too: the old launch could not pass
the grid's limit, and the band's row index, computed in i32, relies on it. Each row is computed by
the same ops as before, once: exact. Offered for a tile-level program with a one-axis grid that
reads `program_id(0)` (its tiles, rows or blocks of a flat array, are the band's rows), whose
work is not all in one loop already (a band, or a persistent walk).
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.dialects.builtin import ArrayAttr
from xdsl.ir import Block, Region

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp, YieldOp
from kir.dialect.tile import ProgramIdOp
from kir.dialect.types import ScalarType, SymAttr, scalar
from kir.program import Program, set_span
from tactics import _grid, ir
from tactics.base import IntRange, Param, Tactic, Value, not_applicable
from tactics.registry import register

NAME = "row-band"
MAX_ROWS = 256
STAGES = 2  # the ring's slots: the next row in flight while this one is computed


def _check(program: Program, target: str) -> list[Diagnostic]:
    explicit = _grid.explicit_reason(NAME, program)
    if explicit:
        return explicit
    grid = _grid.grid(program)
    at = ir.clause(program, "grid")
    if len(grid) != 1:
        return [not_applicable(NAME, "grid", at, f"the grid has {len(grid)} axes; a band of rows is one axis's")]
    if not any(op.axis.data == 0 for op in _grid.program_ids(program)):
        return [not_applicable(NAME, "no-row", at, "the body does not read program_id(0): no row to band")]
    ops = [op for op in program.kernel.body.block.ops if not isinstance(op, YieldOp)]
    loops = [op for op in ops if isinstance(op, ForOp)]
    scalars = all(
        op.results and all(isinstance(r.type, ScalarType) for r in op.results) for op in ops if op not in loops
    )
    if len(loops) == 1 and scalars:  # the work is all in one loop, its bounds computed before it
        return [
            not_applicable(
                NAME,
                "looped",
                ir.span(program, loops[0]),
                "the body is one loop already (a band of rows, or a persistent walk of the tiles)",
                "set its row count with `retile`, or start from the program of one row a program",
            )
        ]
    return []


def _domains(program: Program, target: str, shapes: Mapping[str, int]) -> dict[str, tuple[Value, ...]]:
    (extent,) = _grid.grid(program)
    try:
        rows = extent.evaluate({**shapes, **program.params})
    except (KeyError, ZeroDivisionError):
        return {"rows": (1,)}
    return {"rows": tuple(r for r in (2**k for k in range(9)) if r <= min(rows, MAX_ROWS) and rows % r == 0)}


def _rewrite(program: Program, *, rows: int) -> None:
    kernel = program.kernel
    (extent,) = _grid.grid(program)
    band = _grid.add_param(program, "R", rows)
    body = kernel.body.block
    ids = [op for op in _grid.program_ids(program) if op.axis.data == 0]
    name = ids[0].res.name_hint if len(ids) == 1 else None
    span = ir.span(program, ids[0])
    taken = _grid.taken_names(program)

    loop_body = Block(arg_types=[scalar("i32")])
    loop_body.args[0].name_hint = _grid.fresh("i", taken)
    for op in list(body.ops):
        op.detach()
        loop_body.add_op(op)
    loop_body.add_op(YieldOp())

    emit = _grid.Emitter(body, None, span)
    start_op = ProgramIdOp(0)
    first = emit.binary("mul", emit(start_op), emit.static(sx.Sym(band)), _grid.fresh("first", taken))
    upper = emit.static(sx.Sym(band))  # before the literals, as the parser orders `0 .. R`
    loop = ForOp(emit.const(0), upper, emit.const(1), [], Region(loop_body), stages=STAGES)
    set_span(loop, span)
    body.add_op(loop)

    inner = _grid.Emitter(loop_body, loop_body.first_op, span)
    row = inner.binary("add", first, loop_body.args[0], _grid.fresh("row", taken))
    _grid.stand_in(program, {0: row}, keep=start_op)
    if name:  # the old program id's name, free again: the body reads as it did
        row.name_hint = name
    _grid.set_grid(program, [sx.Bin("/", extent, sx.Sym(band))])
    clause = SymAttr(sx.Bin("==", sx.Bin("%", extent, sx.Sym(band)), sx.Int(0)))
    kernel.where = ArrayAttr([*kernel.where.data, clause])
    _grid.bound_i32(program, [extent])  # the band's row `program_id(0) * R + i` is i32


ROW_BAND = register(
    Tactic(
        name=NAME,
        summary="R consecutive rows a program, streamed through a pipelined loop: grid(M / R)",
        explain=__doc__ or "",
        params=(Param("rows", IntRange(1, MAX_ROWS), 1, "R: the rows each program computes, one after another"),),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        domains_of=_domains,
        anchor=lambda program: ir.clause(program, "grid"),
        examples=("kir tactics apply benchmarks/tasks/rmsnorm/seed.kir row-band --param rows=1",),
    )
)
