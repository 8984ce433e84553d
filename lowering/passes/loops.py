"""What the loop passes share: which loads of a loop body become box copies, and the small
rewriting tools (emitting ops with spans, recomputing a body value for another iteration,
fresh copies of loop bounds, dropping dead pure ops).

A global load of a loop body becomes a box copy (cp.async for `pipeline`, TMA for
`warp_specialize`) when it is tile-shaped, has no `other`, and is either
- a block access (scalars and slices), copied as it is, or
- a gather whose index tile for dimension d is `start + arange(0, E)` (or `arange(a, b)`) put on
  its own axis by `[:, None]`-style expansions: the box `start : start + E`; a scalar index
  among them is a point of its dimension.
The box starts and the mask must be pure functions of the loop variable and of values defined
before the loop, so that they can be recomputed for another iteration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from kir import symexpr as sx
from kir.aliasing import blocking_write
from kir.diagnostics import Span
from kir.dialect.structure import ForOp, KernelOp, RoleOp
from kir.dialect.tile import (
    ArangeOp,
    ArgReduceOp,
    AtomicOp,
    BinaryOp,
    ConstOp,
    DotOp,
    ExpandDimsOp,
    GatherOp,
    LoadOp,
    ReduceOp,
    ScanOp,
    StoreOp,
    TopKOp,
)
from kir.dialect.traits import is_explicit, is_pure
from kir.dialect.types import Access, GlobalType, ScalarType, TileType, dtype_of, shape_of, tile_type
from kir.program import set_span, span_of

# What the passes recompute for another iteration (or another role) and drop when unused: the
# pure ops of the tile level, except those that combine many lanes (reductions, scans, top-k,
# gathers, products), which are not worth computing twice.
_NOT_RECOMPUTED = (ReduceOp, ArgReduceOp, ScanOp, TopKOp, GatherOp, DotOp)


def recomputable(op: Operation) -> bool:
    """A pure tile-level op that a pass may clone or drop (see `_NOT_RECOMPUTED`)."""
    return is_pure(op) and not is_explicit(op) and not isinstance(op, _NOT_RECOMPUTED)


class Refusal(Exception):
    """Why a pass leaves a loop as it is: the message, where, and what to write instead."""

    def __init__(self, message: str, span: Span | None = None, hint: str = ""):
        super().__init__(message)
        self.message, self.span, self.hint = message, span, hint


@dataclass(frozen=True)
class Copy:
    """One global load turned into a box copy: `src[access]` with `starts` (a value of the loop
    body, or a static integer start) and the load's mask."""

    load: LoadOp
    access: Access
    starts: tuple[SSAValue | int, ...]
    mask: SSAValue | None


@dataclass(frozen=True)
class Body:
    """A qualified loop body: its global loads (all at its top level) and every op inside it."""

    loads: tuple[LoadOp, ...]
    ops: frozenset[Operation]


def static(expr: sx.SymExpr, params: dict[str, int]) -> int | None:
    try:
        return expr.evaluate(params)
    except (KeyError, ZeroDivisionError):
        return None


def const_int(v: SSAValue) -> int | None:
    owner = v.owner
    if isinstance(owner, ConstOp) and isinstance(owner.number, int) and not isinstance(owner.number, bool):
        return owner.number
    return None


def qualify_body(loop: ForOp, what: str, writes_elsewhere: bool = False) -> tuple[int, Body]:
    """The step and the loads of a loop that a copy schedule may reorder; `what` names the
    transformation in messages ("pipelined", "warp-specialized"). With `writes_elsewhere` the
    body may write to arguments it does not read (kir/aliasing.py); else it writes nothing."""
    if not isinstance(loop.parent_op(), KernelOp):
        raise Refusal(
            f"only loops at the top level of the kernel body are {what}",
            hint="the shared ring and its synchronization need every thread of the CTA",
        )
    step = const_int(loop.step)
    if step is None or step <= 0:
        raise Refusal("the step is not a positive constant", hint="write `step` as a positive literal")
    if dtype_of(loop.lower.type) != dtype_of(loop.upper.type):
        raise Refusal("the bounds have different dtypes", hint="cast one bound to the other's dtype")
    body = loop.body.block
    loads: list[LoadOp] = []
    for op in loop.walk():
        if op is loop:
            continue
        if isinstance(op, StoreOp | AtomicOp) and (not writes_elsewhere or op is blocking_write(loop)):
            raise Refusal(
                f"the body writes memory (`{op.name}`) that the loop may read, and a prefetched read may "
                "not move above a write",
                span_of(op),
                "write to another argument than the loop reads, move the write out of the loop, or write "
                "the schedule yourself",
            )
        if type(op).__module__ == "kir.dialect.explicit" or isinstance(op, RoleOp):
            raise Refusal(
                f"the body is already at the explicit level (`{op.name}`)",
                span_of(op),
                "drop the hint when you write the schedule yourself",
            )
        if isinstance(op, LoadOp) and isinstance(op.mem.type, GlobalType):
            if op.parent_block() is not body:
                raise Refusal(
                    "a global load is under an `if` or an inner loop, so it does not run every iteration",
                    span_of(op),
                    "load unconditionally (with a mask) at the top level of the loop body",
                )
            loads.append(op)
    if not loads:
        raise Refusal("the body loads nothing from global memory", hint="drop the hint")
    return step, Body(tuple(loads), frozenset(op for op in loop.walk() if op is not loop))


def copy_of(load: LoadOp, iv: SSAValue, body_ops: frozenset[Operation], engine: str) -> Copy:
    """The box copy that replaces `load`, or a `Refusal` saying why there is none."""
    span = span_of(load)
    if load.other is not None:
        raise Refusal(
            f"a load gives masked-off lanes `other`, but {engine} writes them as zero",
            span,
            "drop `other`, and select the value with where(mask, x, other) after the load",
        )
    if not isinstance(load.res.type, TileType):
        raise Refusal("a load reads a scalar, not a tile", span, "load scalars outside the loop")
    indices = list(load.indices)
    if any(isinstance(v.type, TileType) for v in indices):
        access, starts = gather_box(load, span)
    else:
        access, starts = load.access.data, tuple(indices)
    shape = [d for d in access.dims if d is not None]
    if tile_type(dtype_of(load.res.type), shape) != load.res.type:
        raise Refusal("the box does not have the shape of the loaded tile", span)
    for v in [*(s for s in starts if isinstance(s, SSAValue)), *([load.mask] if load.mask else [])]:
        check_recomputable(v, iv, body_ops)
    return Copy(load, access, starts, load.mask)


def gather_box(load: LoadOp, span: Span | None) -> tuple[Access, tuple[SSAValue | int, ...]]:
    """The box `[s0 : s0 + E0, s1 : s1 + E1, ...]` that a gather through contiguous ranges reads;
    a scalar index is a point of its dimension (`x[row, cols]`: row `row`, the columns' range)."""
    indices = list(load.indices)
    tiles = [d for d, idx in enumerate(indices) if isinstance(idx.type, TileType)]
    rank = len(tiles)
    dims: list[sx.SymExpr | None] = []
    starts: list[SSAValue | int] = []
    for d, idx in enumerate(indices):
        if d not in tiles:
            dims.append(None)
            starts.append(idx)
            continue
        axis = tiles.index(d)
        shape = shape_of(idx.type)
        if len(shape) != rank or any(e != sx.Int(1) for i, e in enumerate(shape) if i != axis):
            raise Refusal(
                f"the index of dimension {d} is not a tile along axis {axis} only",
                span,
                "index each dimension with its own range, as in a[rows[:, None], ks[None, :]]",
            )
        v = strip_expands(idx)
        start = range_start(v)
        if start is None or len(shape_of(v.type)) != 1:
            raise Refusal(
                f"the index of dimension {d} is not a contiguous range `start + arange(0, E)`",
                span,
                "only gathers through contiguous ranges become box copies; other gathers stay loads",
            )
        dims.append(shape[axis])
        starts.append(start)
    return Access(tuple(dims)), tuple(starts)


def strip_expands(v: SSAValue) -> SSAValue:
    while isinstance(v.owner, ExpandDimsOp):
        v = v.owner.operand
    return v


def range_start(v: SSAValue) -> SSAValue | int | None:
    owner = v.owner
    if isinstance(owner, ArangeOp):
        return owner.start.data.as_int()
    if isinstance(owner, BinaryOp) and owner.fn.data == "add":
        for base, rng in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs)):
            if (
                isinstance(base.type, ScalarType)
                and isinstance(rng.owner, ArangeOp)
                and rng.owner.start.data.as_int() == 0
            ):
                return base
    return None


def check_recomputable(v: SSAValue, iv: SSAValue, body_ops: frozenset[Operation]) -> None:
    if v is iv:
        return
    if isinstance(v, BlockArgument):
        raise Refusal(
            f"a copy's index or mask depends on the carried value '{v.name_hint}'",
            hint="compute load indices from the loop variable and values defined before the loop",
        )
    op = cast(OpResult, v).owner  # not a block's argument: an op's result
    if op not in body_ops:
        return
    if not recomputable(op):
        raise Refusal(
            f"a copy's index or mask depends on `{op.name}` in the loop, which cannot be recomputed ahead",
            span_of(op),
            "compute load indices from the loop variable and values defined before the loop",
        )
    for operand in op.operands:
        check_recomputable(operand, iv, body_ops)


# -- rewriting ---------------------------------------------------------------------------------


class Emitter:
    """Appends new ops at a point of a block, each with the span of what it stands for."""

    def __init__(self, block: Block, before: Operation | None):
        self.block, self.before = block, before

    def __call__(self, op: Operation, span: Span | None) -> Operation:
        set_span(op, span)
        if self.before is None:
            self.block.add_op(op)
        else:
            self.block.insert_op_before(op, self.before)
        return op

    def const(self, value: int, dtype: str, span: Span | None) -> SSAValue:
        return self(ConstOp(value, dtype), span).results[0]

    def binary(self, fn: str, lhs: SSAValue, rhs: SSAValue, span: Span | None) -> SSAValue:
        return self(BinaryOp(fn, lhs, rhs), span).results[0]


def recompute(
    v: SSAValue,
    iv: SSAValue,
    k: SSAValue,
    body_ops: frozenset[Operation],
    memo: dict[SSAValue, SSAValue],
    emit: Emitter,
) -> SSAValue:
    """`v` as the loop body computes it for iteration `k` (clones of the pure ops it comes from)."""
    if v is iv:
        return k
    if v in memo:
        return memo[v]
    if isinstance(v, BlockArgument):
        return v
    op = cast(OpResult, v).owner
    if op not in body_ops:
        return v
    mapper = {o: recompute(o, iv, k, body_ops, memo, emit) for o in op.operands}
    clone = emit(op.clone(value_mapper=mapper, clone_name_hints=False), span_of(op))
    for old, new in zip(op.results, clone.results, strict=True):
        memo[old] = new
    return memo[v]


def bounds_start(loop: ForOp) -> Operation:
    """The first of the ops just before the loop that only compute its operands: new ops go
    before them, so that the printer can still write the bounds inline."""
    mine: set[Operation] = {loop}
    anchor: Operation = loop
    while (prev := anchor.prev_op) is not None and recomputable(prev):
        if not all(use.operation in mine for r in prev.results for use in r.uses):
            break
        mine.add(prev)
        anchor = prev
    return anchor


def fresh(v: SSAValue, emit: Emitter) -> SSAValue:
    """A new copy of a scalar computed by pure ops (a loop bound): sharing the loop's own value
    would make the printer name it instead of writing `for k in 0 .. K / BK`."""
    if isinstance(v, BlockArgument):
        return v
    result = cast(OpResult, v)
    op = result.owner
    if not recomputable(op) or not isinstance(v.type, ScalarType):
        return v
    mapper = {o: fresh(o, emit) for o in op.operands}
    clone = emit(op.clone(value_mapper=mapper, clone_name_hints=False), span_of(op))
    return clone.results[list(op.results).index(result)]


def drop_dead(block: Block) -> None:
    """Erase the pure ops of a block whose results nobody uses (the replaced loads' indices)."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            if recomputable(op) and all(r.first_use is None for r in op.results):
                block.erase_op(op)
                changed = True


def taken_names(kernel: Operation) -> set[str]:
    """Every value name used in the kernel (new names must not shadow one)."""
    return {
        v.name_hint
        for op in kernel.walk()
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args))
        if v.name_hint
    }
