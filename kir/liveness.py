"""Live ranges of the values of one block, at the granularity of its ops: where each value is
defined and the last op of the block that uses it (a use inside a nested region counts at the op
that holds the region), and which values never exist as a whole tile (`fused`, `recomputed`). The
cost model's register estimate and the verifier's register rule both walk these ranges, each
costing the live tiles in its own way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from xdsl.ir import Block, Operation, SSAValue

from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.traits import is_elementwise
from kir.dialect.types import TileType, dtype_of
from kir.dtypes import DTYPES

BASE_REGISTERS = 16  # addresses, indices, loop counters: what a kernel holds besides its tiles


@dataclass
class LiveRanges:
    ops: list[Operation]
    defs: dict[SSAValue, int]  # value -> index of the op that defines it (-1: a block argument)
    last: dict[SSAValue, int]  # value -> index of the last op of the block that uses it
    nested: dict[int, set[SSAValue]]  # op index -> the values used inside that op's regions


def holder_index(op: Operation | None, block: Block, index: dict[Operation, int]) -> int | None:
    """The index in `block` of the op that is `op` or holds it in a nested region, or None."""
    while op is not None:
        if op.parent_block() is block:
            return index.get(op)
        op = op.parent_op()
    return None


def live_ranges(block: Block) -> LiveRanges:
    ops = list(iter(block.ops))  # (a block's ops have a len, which walks them: list would ask it)
    index = {op: i for i, op in enumerate(ops)}
    defs: dict[SSAValue, int] = {a: -1 for a in block.args}
    for i, op in enumerate(ops):
        for r in op.results:
            defs[r] = i
    last: dict[SSAValue, int] = {}
    nested: dict[int, set[SSAValue]] = {}
    for v in defs:
        latest = -1
        for use in v.uses:
            user = use.operation
            # the op of this block that is the user or holds it (`holder_index`, inlined: this
            # runs for every use of every value of every block)
            j = index.get(user) if user.parent is block else holder_index(user, block, index)
            if j is None:
                continue
            if j > latest:
                latest = j
            if user is not ops[j]:
                nested.setdefault(j, set()).add(v)
        if latest >= 0:
            last[v] = latest
    return LiveRanges(ops, defs, last, nested)


def fused(v: SSAValue) -> bool:
    """An intermediate of an elementwise chain: made by an elementwise op and used only by
    elementwise ops of the same block with the same shape, or only by reductions of that block.
    The compiler computes such a chain element by element (`0.5 * h * (1.0 + erf(h * c))` needs
    h and the result, not a tile per step), so the value takes no tile of registers of its own."""
    owner = v.owner
    if not isinstance(owner, Operation) or not is_elementwise(owner):
        return False
    users = [u.operation for u in v.uses]
    if not users:
        return False
    block = owner.parent
    if any(op.parent is not block for op in users):
        return False
    # reductions alone take the chain element by element too (`sum(cast<f32>(vals))` holds the
    # loaded bf16 tile and running sums, never the f32 tile); a value also used after a
    # reduction (softmax's exp, divided by its sum) is held whole until then
    if all(isinstance(op, tl.ReduceOp) for op in users):
        return True
    shape = cast(TileType, v.type).shape
    if not all(is_elementwise(op) and cast(TileType, op.results[0].type).shape == shape for op in users):
        return False
    # a value that feeds a reduction and is read again after it (one-pass rmsnorm's v: the sum
    # of v * v, then v * rstd) is held whole across the reduction. With one user there is no
    # "again": every reduction it feeds is reached through that user, so comes after it.
    if all(op is users[0] for op in users):
        return True
    reduced = {r for r in _reductions_fed(v) if r.parent is block}
    if not reduced:
        return True
    # Are all the uses before the first of those reductions? Both follow `owner` in the block,
    # so a walk from it answers by the last use or the first reduction, whichever comes first
    # (numbering the whole block for each value made a long block quadratic).
    pending = set(users)
    op = owner.next_op
    while op is not None:
        if op in reduced:
            return False
        pending.discard(op)
        if not pending:
            return True
        op = op.next_op
    return True


def _reductions_fed(v: SSAValue, depth: int = 8) -> set[Operation]:
    """The reductions that `v` feeds directly or through at most `depth` elementwise ops. Each
    value is followed once, with the most steps left of any path to it (following every path
    costs the number of paths, which grows exponentially in a chain of `x * x` terms)."""
    out: set[Operation] = set()
    left: dict[SSAValue, int] = {v: depth}
    todo = [v]
    while todo:
        x = todo.pop()
        steps = left[x]
        for u in x.uses:
            op = u.operation
            if isinstance(op, tl.ReduceOp):
                out.add(op)
            elif steps and is_elementwise(op):
                r = op.results[0]
                if left.get(r, -1) < steps - 1:
                    left[r] = steps - 1
                    todo.append(r)
    return out


def recomputed(kernel: st.KernelOp) -> set[SSAValue]:
    """Integer and mask tiles computed from aranges and scalars only (offsets, positions, masks):
    the compiler recomputes them lane by lane where they are used (an address for each load it
    issues) rather than keeping them whole in registers."""
    cheap: set[SSAValue] = set()
    for op in kernel.walk():
        if isinstance(op, tl.ArangeOp):
            cheap.add(op.res)
        elif isinstance(op, tl.BinaryOp | tl.CompareOp | tl.ExpandDimsOp | tl.BroadcastOp | tl.CastOp):
            res = op.results[0]
            if isinstance(res.type, TileType) and not DTYPES[dtype_of(res.type)].is_float:
                if all(v in cheap for v in op.operands if isinstance(v.type, TileType)):
                    cheap.add(res)
    return cheap
