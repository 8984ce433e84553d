"""`split-row`: tile the columns of a one-row-per-program kernel over a second grid axis
(`grid(M)` with the row in one tile `cols = arange(0, BLOCK)`, `where N <= BLOCK` ->
`grid(cdiv(N, BLOCK), M)` with `cols = program_id(0) * BLOCK + arange(0, BLOCK)`).

A row in one tile ties the tile size to the row length: a long row is a large tile (many
values a thread, many registers, few programs resident), a short one wastes lanes. Where no
op mixes the columns of a row, the columns can be split into blocks that programs of their
own compute, and the block size becomes a free tile parameter (retile it next). The column
blocks go on axis 0, so that consecutive programs read consecutive memory of a row; the rows
move to axis 1. Every global access the columns reach must already be masked by them (the
masks compare the columns with the row length), so that the last, partial block reads and
writes only the row; the `where N <= BLOCK` that held the row in one tile is dropped. Each
element is computed by the same operations as before: results are bitwise equal.

The values may have more axes than the columns' (an embedding bag loads a [BL, BD] tile of
table rows and sums it over the bag's BL rows): what matters is that no op mixes the column
axis. A dataflow over the straight-line body follows which values carry the columns, and on
which of their axes:
- the column tile carries them on axis 0, `x[:, None]` moves them; an elementwise op or a
  `broadcast` aligns its operands on the right, and those that carry the columns must put them
  on one axis of the result, where those that do not must have extent 1;
- a reduction, arg-reduction, scan or top-k may run along another axis, never the columns';
  gather, dot, reshape and trans move values between lanes, so the columns may not enter them;
- a load or store the columns reach must index with them and be masked by them; a load so
  indexed carries them; a store they do not reach would be repeated by every column block.
A tile that does not carry the columns may not span BLOCK lanes either: it would count on the
row fitting one tile, or meet other columns once they are split.

The column tile is the first `arange(0, P)` of the text, P a compile-time parameter with a
`where S <= P` clause (S a shape symbol), whose columns the dataflow finds unmixed: in the
embedding bag, not the bag's `j = arange(0, BL)` (the sum runs along it) but `cols = arange(0, BD)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect.structure import ForOp, IfOp, RoleOp
from kir.dialect.tile import (
    ArangeOp,
    ArgReduceOp,
    AtomicOp,
    BinaryOp,
    BroadcastOp,
    ExpandDimsOp,
    LoadOp,
    NumProgramsOp,
    ProgramIdOp,
    ReduceOp,
    ScanOp,
    StoreOp,
    SymValueOp,
    TopKOp,
)
from kir.dialect.traits import is_elementwise
from kir.dialect.types import SymAttr, TileType, shape_of
from kir.program import Program
from kir.spans import copy_source_notes
from tactics import ir
from tactics.base import Tactic, not_applicable
from tactics.registry import register

NAME = "split-row"
# ops that make the body more than one straight pass of per-program work
CONTROL = (AtomicOp, ForOp, IfOp, RoleOp, NumProgramsOp)


@dataclass(eq=False)
class _Refused(Exception):
    """Why the columns of a tile cannot be split: at `op`, rule `tactic.split-row.<why>`."""

    why: str
    op: Operation
    message: str
    hint: str = ""


def _row_clause(program: Program, param: str) -> tuple[int, str] | None:
    """(position, symbol) of the `where S <= param` clause that holds the row in one tile."""
    for i, w in enumerate(program.kernel.where.data):
        e = w.data
        if isinstance(e, sx.Bin) and e.op == "<=" and isinstance(e.lhs, sx.Sym) and e.rhs == sx.Sym(param):
            if e.lhs.name in program.kernel.shape_symbols:
                return i, e.lhs.name
    return None


def _extent(tile: ArangeOp) -> str:
    """The compile-time parameter a column tile `arange(0, P)` spans."""
    end = tile.end.data
    assert isinstance(end, sx.Sym)
    return end.name


def _name(tile: ArangeOp) -> str:
    """How a diagnostic names a column tile: its value's name, else the arange itself."""
    return tile.res.name_hint or f"arange(0, {_extent(tile)})"


def _tiles(program: Program) -> list[ArangeOp]:
    """Every `arange(0, P)` of the body, P a compile-time parameter, in the order of the text."""
    return [
        op
        for op in ir.ops(program)
        if isinstance(op, ArangeOp)
        and sx.fold(op.start.data).as_int() == 0
        and isinstance(op.end.data, sx.Sym)
        and op.end.data.name in program.params
    ]


def _candidates(program: Program) -> list[ArangeOp]:
    """The tiles that a `where S <= P` clause holds a row in: the column tile is one of them."""
    return [t for t in _tiles(program) if _row_clause(program, _extent(t)) is not None]


def _column_tile(program: Program) -> ArangeOp | None:
    """The first candidate whose columns no op of the body mixes."""
    for tile in _candidates(program):
        try:
            _trace(program, tile)
        except _Refused:
            continue
        return tile
    return None


# ---- the dataflow --------------------------------------------------------------------------------


def _trace(program: Program, tile: ArangeOp) -> None:
    """Follow the columns of `tile` through the body, value by value: `axes` holds the values
    that carry them, with the axis they are on. A `_Refused` at the first op that mixes them;
    else at the first tile that spans the columns' extent without carrying them."""
    param = _extent(tile)
    axes: dict[SSAValue, int] = {tile.res: 0}
    body = ir.ops(program)[1:]
    for op in body:
        if isinstance(op, CONTROL):
            raise _Refused("control", op, "the body is not straight-line code")
        axes.update(_through(op, axes))
    for op in body:
        for r in op.results:
            if r not in axes and isinstance(r.type, TileType) and any(param in d.symbols() for d in shape_of(r.type)):
                raise _Refused(
                    "shape",
                    op,
                    f"this tile spans {param} lanes but does not depend on the column tile: it counts on the "
                    f"row fitting one tile, which the split undoes",
                    f"derive it from the column tile `{_name(tile)}`, or give it a parameter of its own",
                )


def _through(op: Operation, axes: dict[SSAValue, int]) -> dict[SSAValue, int]:
    """The results of `op` that carry the columns, with their axis."""
    if isinstance(op, LoadOp | StoreOp):
        return _access(op, axes)
    if not any(v in axes for v in op.operands):
        return {}
    if is_elementwise(op) or isinstance(op, BroadcastOp):
        (result,) = op.results
        axis = _aligned(op, op.operands, len(shape_of(result.type)), axes)
        assert axis is not None
        return {result: axis}
    if isinstance(op, ExpandDimsOp):
        axis = axes[op.operand]
        return {op.res: axis + 1 if op.axis.data <= axis else axis}
    if isinstance(op, ReduceOp | ArgReduceOp | ScanOp):
        axis = axes[op.operand]
        if op.axis.data == axis:
            raise _Refused(
                "mixes",
                op,
                "this op combines the columns of a row, which must stay whole",
                "a reduction or scan may run along another axis of the tile, not the columns'",
            )
        removed = not isinstance(op, ScanOp) and op.axis.data < axis
        return {op.res: axis - 1 if removed else axis}
    if isinstance(op, TopKOp):
        axis = axes[op.operand]
        if axis == len(shape_of(op.operand.type)) - 1:
            raise _Refused(
                "mixes",
                op,
                "this top-k selects among the columns of a row, which must stay whole",
                "topk runs along the last axis",
            )
        return {op.values: axis, op.indices: axis}
    # gather, dot, reshape, trans (and any op not known here): values move between lanes
    raise _Refused("mixes", op, "this op moves values between the columns of a row, which must stay whole")


def _aligned(op: Operation, values: Sequence[SSAValue], rank: int, axes: dict[SSAValue, int]) -> int | None:
    """The axis of a rank-`rank` result that carries the columns of `values` once they are
    broadcast (aligned on the right), or None where none carries them. Those that carry them
    must agree on the axis; those that do not must have extent 1 there (or not reach it)."""
    found = {axes[v] + rank - len(shape_of(v.type)) for v in values if v in axes}
    if not found:
        return None
    if len(found) > 1:
        raise _Refused("mixes", op, "this op pairs columns of a row with other columns of it (on different axes)")
    (axis,) = found
    for v in values:
        if v in axes:
            continue
        shape = shape_of(v.type)
        at = axis - (rank - len(shape))
        if at >= 0 and sx.fold(shape[at]).as_int() != 1:
            raise _Refused(
                "shape",
                op,
                f"an operand of this op spans the column axis ({shape[at]} lanes) but does not depend on the "
                "column tile: once the columns are split it would meet other columns",
                "give it extent 1 on the column axis, or derive it from the column tile",
            )
    return axis


def _access(op: LoadOp | StoreOp, axes: dict[SSAValue, int]) -> dict[SSAValue, int]:
    """A load's result when its indices carry the columns; the access's own rules checked."""
    rank = len(op.shape)
    tiles = [v for v in op.indices if isinstance(v.type, TileType)]
    axis = _aligned(op, tiles, rank, axes)
    rest = [v for v in (op.mask, op.value if isinstance(op, StoreOp) else None) if v is not None]
    if axis is None:
        if any(v in axes for v in rest):
            raise _Refused(
                "shape",
                op,
                "the columns reach this access through its mask or value, not its indices: every column block "
                "would address the same elements",
                "index the row with the column tile (x[row, cols])",
            )
        if isinstance(op, StoreOp):
            raise _Refused("shape", op, "this store does not depend on the columns: every column block would repeat it")
        return {}
    _aligned(op, [*tiles, *rest], rank, axes)
    if op.mask is None:
        raise _Refused(
            "unmasked",
            op,
            "this access has no mask, so a partial column block would reach past the row",
            "mask it with the row length (cols < N)",
        )
    if op.mask not in axes:
        raise _Refused(
            "unmasked",
            op,
            "the mask of this access does not depend on the columns, so a partial column block would reach past the row",
            "mask it with the row length as well (cols < N)",
        )
    return {op.res: axis} if isinstance(op, LoadOp) else {}


# ---- the tactic ----------------------------------------------------------------------------------


def _check(program: Program, target: str) -> list[Diagnostic]:
    def no(why: str, at, message: str, hint: str = "") -> list[Diagnostic]:
        return [not_applicable(NAME, why, at, message, hint)]

    explicit = ir.first_explicit(program)
    if explicit is not None:
        return no("explicit", ir.span(program, explicit), "the program is at the explicit level")
    if len(program.kernel.grid.data) != 1:
        return no("grid", ir.clause(program, "grid"), "the grid has more than one axis", "the tactic adds the second")
    tiles = _tiles(program)
    if not tiles:
        return no("no-row", program.span(), "the body has no column tile arange(0, P) with P a compile-time parameter")
    candidates = _candidates(program)
    if not candidates:
        params = list(dict.fromkeys(_extent(t) for t in tiles))
        if len(params) == 1:
            message = f"no `where N <= {params[0]}` holds a row in the column tile"
        else:
            message = f"no `where N <= P` holds a row in a tile arange(0, P), P one of {', '.join(params)}"
        return no("no-row", ir.clause(program, "where"), message)
    reasons = []
    for tile in candidates:
        try:
            _trace(program, tile)
        except _Refused as refused:
            which = f" (with `{_name(tile)}` as the column tile)" if len(candidates) > 1 else ""
            reasons.append(
                not_applicable(NAME, refused.why, ir.span(program, refused.op), refused.message + which, refused.hint)
            )
            continue
        return []
    return reasons


def _rewrite(program: Program) -> None:
    kernel = program.kernel
    cols = _column_tile(program)
    assert cols is not None
    param = _extent(cols)
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
        summary="tile the columns of a row-per-program kernel over a second grid axis",
        explain=__doc__ or "",
        params=(),
        numerics="exact",
        check=_check,
        rewrite=_rewrite,
        examples=(
            "kir tactics apply benchmarks/tasks/silu_mul/seed.kir split-row",
            "kir tactics apply benchmarks/tasks/embedding_bag/seed.kir split-row",
        ),
    )
)
