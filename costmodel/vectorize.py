"""Vector width of a global access and the cross-thread cost of a reduction, as Triton lowers them.

**Vector width.** Triton's AxisInfo pass vectorizes a load or store along the innermost tensor
dimension only where it can prove, per thread, `contiguity` (consecutive lanes of the index
tile hold consecutive elements) and `divisibility` (the first element's offset is a multiple of
the vector): then one `ld.global.v4.b32` moves 16 bytes. Otherwise it emits one scalar
instruction per element (`ld.global.b16` for bf16), and cannot stage the operand with 16-byte
`cp.async` either. Here, for the access's innermost index:

- contiguous: a slice `s : s + E`, or an index tile `start + arange(..)` whose arange runs along
  the tile's last axis with stride 1 (a scalar innermost index, or a stride of KW, is scalar);
- divisible: the element offset of the first element, `sum(index_i x stride_i)`, is provably a
  multiple of the vector, from the ops that build it (`program_id(0) * BN` with BN = 64 is a
  multiple of 64; `l0 - 3 + t` is a multiple of 1); shape symbols and parameters count with the
  power of two of their value, as Triton specializes integer arguments divisible by 16;
- the tensor's alignment: `align(N)` when declared, else 16 bytes (Triton specializes a pointer
  argument that is 16-byte aligned, as every torch allocation is).

**Reductions.** A reduction first combines the elements a thread holds, then across the lanes of
a warp (one `shfl` per step, log2(lanes on the axis) steps, for every output the thread holds),
then across warps through shared memory. Threads are laid out as Triton's default blocked
layout: 16 bytes per thread on the last axis, lanes and then warps innermost axis first.
"""

from __future__ import annotations

import math

from xdsl.ir import Block, Operation, SSAValue

from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import TileType, shape_of

VECTOR_BYTES = 16
_CAP = 1 << 12  # divisibility is only ever compared with vectors of at most 16 elements


def pow2(n: int) -> int:
    """The largest power of two dividing n (capped; 0 is divisible by anything)."""
    n = abs(int(n))
    return _CAP if n == 0 else min(_CAP, n & -n)


def divisor(v: SSAValue, env: dict[str, int], depth: int = 24) -> int:
    """A power of two that provably divides the (first element of the) integer value v."""
    if depth == 0:
        return 1
    owner = v.owner
    if isinstance(owner, Block):  # a loop's induction variable: lower + i * step
        loop = owner.parent_op()
        if isinstance(loop, st.ForOp) and v is owner.args[0]:
            return min(divisor(loop.lower, env, depth - 1), divisor(loop.step, env, depth - 1))
        return 1
    op = owner
    if isinstance(op, tl.ConstOp):
        try:
            return pow2(int(op.number))
        except (TypeError, ValueError):
            return 1
    if isinstance(op, tl.SymValueOp):
        name = op.symbol.data
        return pow2(env[name]) if name in env else 1
    if isinstance(op, tl.ArangeOp):
        try:
            return pow2(op.start.data.evaluate(env))
        except (KeyError, ZeroDivisionError):
            return 1
    if isinstance(op, tl.ExpandDimsOp | tl.BroadcastOp | tl.CastOp):
        return divisor(op.operand, env, depth - 1)
    if isinstance(op, tl.BinaryOp):
        fn = op.fn.data
        if fn in ("add", "sub", "minimum", "maximum"):
            return min(divisor(op.lhs, env, depth - 1), divisor(op.rhs, env, depth - 1))
        if fn == "mul":
            return min(_CAP, divisor(op.lhs, env, depth - 1) * divisor(op.rhs, env, depth - 1))
    return 1


def stride(v: SSAValue, depth: int = 24) -> int | None:
    """The step between neighbouring elements of v along its last axis: 0 for a value constant
    along it (a scalar, a broadcast), 1 for `start + arange`, None when unknown (data, products
    of tiles)."""
    t = v.type
    if not isinstance(t, TileType):
        return 0
    if depth == 0:
        return None
    op = v.owner
    if isinstance(op, tl.ArangeOp):
        return 1
    if isinstance(op, tl.ExpandDimsOp):
        rank = len(shape_of(op.operand.type)) if isinstance(op.operand.type, TileType) else 0
        return 0 if op.axis.data == rank else stride(op.operand, depth - 1)
    if isinstance(op, tl.BroadcastOp):
        src = op.operand.type
        if not isinstance(src, TileType) or str(shape_of(src)[-1]) == "1":
            return 0
        return stride(op.operand, depth - 1)
    if isinstance(op, tl.CastOp):
        return stride(op.operand, depth - 1)
    if isinstance(op, tl.ConstOp | tl.FullOp | tl.ZerosOp):
        return 0
    if isinstance(op, tl.BinaryOp):
        a, b = stride(op.lhs, depth - 1), stride(op.rhs, depth - 1)
        if a is None or b is None:
            return None
        fn = op.fn.data
        if fn == "add":
            return a + b
        if fn == "sub":
            return a - b
        if fn == "mul":
            if a == 0 and b == 0:
                return 0
            const = _const(op.rhs if b == 0 else op.lhs)
            return None if const is None else (a or b) * const
    return None


def _const(v: SSAValue) -> int | None:
    op: Operation | Block | None = v.owner
    while isinstance(op, tl.BroadcastOp | tl.ExpandDimsOp | tl.FullOp | tl.CastOp):
        op = op.operands[0].owner if op.operands else None
    if isinstance(op, tl.ConstOp):
        try:
            return int(op.number)
        except (TypeError, ValueError):
            return None
    if isinstance(op, tl.SymValueOp):
        return None
    return None


def layout(shape: list[int], threads: int, elem_bytes: int) -> tuple[list[int], list[int]]:
    """(lanes, warps) along each axis of a tile in Triton's default blocked layout: 16 bytes per
    thread on the last axis, then the lanes of a warp and the warps, innermost axis first.
    Threads left over once the tile is covered hold replicas and are not counted."""
    rank = len(shape)
    room = [max(1, e) for e in shape]
    if rank:
        room[-1] = max(1, room[-1] // max(1, min(VECTOR_BYTES // elem_bytes, shape[-1])))
    lanes, warps = [1] * rank, [1] * rank
    for group, out in ((32, lanes), (max(1, threads // 32), warps)):
        left = group
        for axis in reversed(range(rank)):
            take = min(left, room[axis])
            out[axis] *= take
            room[axis] //= take
            left //= take
    return lanes, warps


def reduction_shuffles(shape: list[int], axis: int, threads: int, elem_bytes: int) -> tuple[float, int, int]:
    """(warp shuffle instructions per program, lanes on the axis, warps on the axis) of
    reducing a tile of `shape` along `axis`."""
    lanes_of, warps_of = layout(shape, threads, elem_bytes)
    lanes, warps_on_axis = lanes_of[axis], warps_of[axis]
    outputs = math.prod(shape) // max(1, shape[axis])
    # threads that hold distinct outputs
    holders = max(1, math.prod(lanes_of) * math.prod(warps_of) // (lanes * warps_on_axis))
    per_thread = math.ceil(outputs / holders)
    steps = int(math.log2(lanes)) if lanes > 1 else 0
    return max(1, threads // 32) * steps * per_thread, lanes, warps_on_axis
