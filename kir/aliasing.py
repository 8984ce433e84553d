"""Which writes may touch what a loop reads.

Distinct arguments of a kernel never overlap (docs/language.md, "Arguments"): a write to one
argument cannot change what a load of another reads. A pass that moves a loop's global reads
earlier (prefetching them iterations ahead: `pipeline`, `warp_specialize`) may move them above
the loop's writes to other arguments, and not above a write to an argument the loop also reads,
or to memory that is not an argument."""

from __future__ import annotations

from xdsl.ir import Operation

from kir.dialect.structure import ForOp, KernelOp
from kir.dialect.tile import AtomicOp, LoadOp, StoreOp
from kir.dialect.types import GlobalType


def blocking_write(loop: ForOp) -> Operation | None:
    """The first write in the loop's body that a prefetched global read may not move above, or
    None when every write goes to an argument the loop does not read."""
    kernel = loop.parent_op()
    args = set(kernel.body.block.args) if isinstance(kernel, KernelOp) else set()
    read = {op.mem for op in loop.walk() if isinstance(op, LoadOp) and isinstance(op.mem.type, GlobalType)}
    for op in loop.walk():
        if isinstance(op, StoreOp | AtomicOp):
            if op.mem not in args or op.mem in read or not isinstance(op.mem.type, GlobalType):
                return op
    return None
