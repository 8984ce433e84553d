"""Where values are used: program order, which ops are written inline into their user, and
the last use of every value (after which its Python name is free)."""

from __future__ import annotations

from typing import cast

from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from kir.dialect import structure as st
from kir.dialect import tile as kt
from kir.dialect.traits import is_pure, writes

# Pure ops cheap enough to be written at every use, even at several.
ALWAYS_INLINE = (kt.ConstOp, kt.SymValueOp, kt.ProgramIdOp, kt.NumProgramsOp, kt.ExpandDimsOp)


def writes_memory(op: Operation) -> bool:
    """Whether an op may write memory that a load reads: a store or an atomic, or any op with
    regions (a loop or a branch, whose body is not looked into)."""
    return bool(writes(op)) or bool(op.regions)


class Liveness:
    """Program order of the ops, which ops are written inline into their user, and the last
    (effective) use of every value: a use inside a loop keeps a value from outside the loop
    alive to the loop's end, and a use by an inlined op counts where that op's text lands."""

    def __init__(self, kernel: st.KernelOp):
        self.pos: dict[Operation, int] = {}
        self.end: dict[Operation, int] = {}
        self.loops: dict[Operation, tuple[st.ForOp, ...]] = {}
        self._number(kernel.body.block, ())
        self.inline: dict[Operation, bool] = {}
        for op in self.pos:
            self.inline[op] = self._inlined(op)
        self._last: dict[SSAValue, int] = {}

    def _number(self, block: Block, loops: tuple[st.ForOp, ...]) -> None:
        for op in block.ops:
            self.pos[op] = len(self.pos)
            self.loops[op] = loops
            inner = (*loops, op) if isinstance(op, st.ForOp) else loops
            for region in op.regions:
                for b in region.blocks:
                    self._number(b, inner)
            self.end[op] = len(self.pos) - 1

    def _inlined(self, op: Operation) -> bool:
        if len(op.results) != 1 or op.results[0].name_hint:
            return False  # a KIR name stays a name
        if isinstance(op, ALWAYS_INLINE):
            return True
        res = op.results[0]
        uses = list(res.uses)
        if len(uses) != 1:
            return False
        user = uses[0].operation
        if user.parent_block() is not op.parent_block() or isinstance(user, kt.TopKOp):
            return False  # not into another region, nor into topk (which reads its operand twice)
        if is_pure(op):
            return True  # every pure op of the tile level, the only level this backend takes
        if isinstance(op, kt.LoadOp):
            # Moving a load to its user is safe when nothing in between writes memory.
            block_ops = list(cast(Block, op.parent_block()).ops)
            between = block_ops[block_ops.index(op) + 1 : block_ops.index(user)]
            return not any(writes_memory(o) for o in between)
        return False

    def defined_in(self, value: SSAValue, loop: st.ForOp) -> bool:
        """Whether a value is made inside the loop (each iteration makes it anew)."""
        owner: Operation | Block | None
        if isinstance(value, BlockArgument):
            owner = value.block.parent_op()
            if owner is loop:
                return True
        else:
            owner = value.owner
        return owner in self.pos and self.pos[loop] < self.pos[cast(Operation, owner)] <= self.end[loop]

    def consumers(self, value: SSAValue):
        """The ops whose generated line reads the value: its users, and for a user written
        inline, that user's own consumers."""
        for use in value.uses:
            user = use.operation
            if user not in self.pos:
                continue
            if self.inline.get(user) and user.results:
                for r in user.results:
                    yield from self.consumers(r)
            else:
                yield user

    def last_use(self, value: SSAValue, skip: Region | None = None) -> int:
        """The position after which the value's Python name is free (-1: never read), not
        counting reads inside the region `skip` (the other branch of an `if`)."""
        if skip is None and value in self._last:
            return self._last[value]
        best = -1
        for user in self.consumers(value):
            if skip is not None and skip.is_ancestor(user):
                continue
            p = self.pos[user]
            for loop in self.loops[user]:  # outermost first
                if not self.defined_in(value, loop):
                    p = max(p, self.end[loop])  # read again by the next iteration
                    break
            best = max(best, p)
        if skip is None:
            self._last[value] = best
        return best

    def used(self, op: Operation) -> bool:
        return any(self.last_use(r) >= 0 for r in op.results)
