"""`split-row`: tile the columns of a one-row-per-program elementwise kernel over a second grid
axis (`grid(M)` with the row in one tile `cols = arange(0, BLOCK)`, `where N <= BLOCK` ->
`grid(cdiv(N, BLOCK), M)` with `cols = program_id(0) * BLOCK + arange(0, BLOCK)`).

A row in one tile ties the tile size to the row length: a long row is a large tile (many
values a thread, many registers, few programs resident), a short one wastes lanes. Where no
op mixes the columns of a row (no reduction, scan, gather, dot or reshape: every value is a
column vector of the row or a scalar), the columns can be split into blocks that programs of
their own compute, and the block size becomes a free tile parameter (retile it next). The
column blocks go on axis 0, so that consecutive programs read consecutive memory of a row; the
rows move to axis 1. Every global access must already be masked (the masks compare the columns
with the row length), so that the last, partial block reads and writes only the row; the `where
N <= BLOCK` that held the row in one tile is dropped. Each element is computed by the same
operations as before: results are bitwise equal.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntAttr

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp, IfOp, RoleOp
from kir.dialect.tile import (
    ArangeOp,
    ArgReduceOp,
    AtomicOp,
    BinaryOp,
    BroadcastOp,
    DotOp,
    ExpandDimsOp,
    GatherOp,
    LoadOp,
    NumProgramsOp,
    ProgramIdOp,
    ReduceOp,
    ReshapeOp,
    ScanOp,
    StoreOp,
    SymValueOp,
    TopKOp,
    TransOp,
)
from kir.dialect.types import GlobalType, SymAttr, TileType, shape_of
from kir.program import Program
from kir.spans import copy_source_notes
from tactics import ir
from tactics.base import Tactic, not_applicable
from tactics.registry import register

NAME = "split-row"
# ops that combine the columns of a row (or move them around): the row must stay whole
MIXING = (ReduceOp, ArgReduceOp, ScanOp, TopKOp, GatherOp, DotOp, ReshapeOp, TransOp, BroadcastOp, ExpandDimsOp)


def _row_clause(program: Program, param: str) -> tuple[int, str] | None:
    """(position, symbol) of the `where S <= param` clause that holds the row in one tile."""
    for i, w in enumerate(program.kernel.where.data):
        e = w.data
        if isinstance(e, sx.Bin) and e.op == "<=" and isinstance(e.lhs, sx.Sym) and e.rhs == sx.Sym(param):
            if e.lhs.name in program.kernel.shape_symbols:
                return i, e.lhs.name
    return None


def _column_tile(program: Program) -> ArangeOp | None:
    """The one `arange(0, P)` of the body, P a compile-time parameter."""
    found = [op for op in program.kernel.walk() if isinstance(op, ArangeOp)]
    if len(found) != 1:
        return None
    op = found[0]
    start, end = sx.fold(op.start.data), op.end.data
    if start.as_int() != 0 or not isinstance(end, sx.Sym) or end.name not in program.params:
        return None
    return op


def _check(program: Program, target: str) -> list[Diagnostic]:
    def no(why: str, at, message: str, hint: str = "") -> list[Diagnostic]:
        return [not_applicable(NAME, why, at, message, hint)]

    explicit = ir.first_explicit(program)
    if explicit is not None:
        return no("explicit", ir.span(program, explicit), "the program is at the explicit level")
    if len(program.kernel.grid.data) != 1:
        return no("grid", ir.clause(program, "grid"), "the grid has more than one axis", "the tactic adds the second")
    cols = _column_tile(program)
    if cols is None:
        return no(
            "no-row",
            program.span(),
            "the body has no single column tile arange(0, P) with P a compile-time parameter",
        )
    param = cols.end.data
    assert isinstance(param, sx.Sym)
    if _row_clause(program, param.name) is None:
        return no(
            "no-row",
            ir.clause(program, "where"),
            f"no `where N <= {param.name}` holds a row in the column tile",
        )
    for op in program.kernel.walk():
        if isinstance(op, MIXING):
            return no("mixes", ir.span(program, op), "this op combines the columns of a row, which must stay whole")
        if isinstance(op, AtomicOp | ForOp | IfOp | RoleOp | NumProgramsOp):
            return no("control", ir.span(program, op), "the body is not straight-line elementwise code")
        for r in op.results:
            if isinstance(r.type, TileType) and not (
                len(shape_of(r.type)) == 1 and sx.same(shape_of(r.type)[0], param)
            ):
                return no("shape", ir.span(program, op), f"a value of this op is not a column vector [{param.name}]")
        if isinstance(op, LoadOp | StoreOp) and isinstance(op.mem.type, GlobalType):
            if isinstance(op, StoreOp) and not isinstance(op.value.type, TileType):
                return no("shape", ir.span(program, op), "a scalar store would be repeated by every column block")
            if op.mask is None:
                return no(
                    "unmasked",
                    ir.span(program, op),
                    "this access has no mask, so a partial column block would reach past the row",
                    "mask it with the row length (cols < N)",
                )
    return []


def _rewrite(program: Program) -> None:
    kernel = program.kernel
    cols = _column_tile(program)
    assert cols is not None and isinstance(cols.end.data, sx.Sym)
    param = cols.end.data.name
    found = _row_clause(program, param)
    assert found is not None
    position, symbol = found
    for op in kernel.walk():
        if isinstance(op, ProgramIdOp):
            op.axis = IntAttr(op.axis.data + 1)
    block = cols.parent_block()
    assert block is not None
    pid, size = ProgramIdOp(0), SymValueOp(param)
    start = BinaryOp("mul", pid.res, size.res)
    shifted = BinaryOp("add", start.res, cols.res)
    for new in (pid, size, start):
        copy_source_notes(cols, new)
        block.insert_op_before(new, cols)
    copy_source_notes(cols, shifted)
    block.insert_op_after(shifted, cols)
    cols.res.replace_all_uses_with(shifted.res)
    shifted.operands = (start.res, cols.res)
    shifted.res.name_hint, cols.res.name_hint = cols.res.name_hint, None
    kernel.grid = ArrayAttr([SymAttr(sx.Bin("cdiv", sx.Sym(symbol), sx.Sym(param))), *kernel.grid.data])
    kernel.where = ArrayAttr([w for i, w in enumerate(kernel.where.data) if i != position])


SPLIT_ROW = register(
    Tactic(
        name=NAME,
        summary="tile the columns of a row-per-program elementwise kernel over a second grid axis",
        explain=__doc__ or "",
        params=(),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        examples=("kir tactics apply benchmarks/tasks/silu_mul/seed.kir split-row",),
    )
)
