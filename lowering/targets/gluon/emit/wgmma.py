"""wgmma in Gluon: asynchronous warpgroup matrix multiplies and their waits, and which
accumulators are still in flight."""

from __future__ import annotations

from xdsl.ir import SSAValue

from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect.types import dtype_of
from kir.dtypes import DTYPES

from .values import Fn, Val


class Wgmma:
    """The wgmma ops of `GluonWriter`."""

    def op_WgmmaOp(self, op: ex.WgmmaOp, fn: Fn) -> None:
        if op.a_in_registers:
            # wgmma's register A: the dot-operand layout of the accumulator's, which a tile made
            # in another wgmma's accumulator layout (attention's p) reaches without moving data
            bits = DTYPES[dtype_of(op.a.type)].bits
            dot = f"gl.DotOperandLayout(operand_index=0, parent={self.layout_of(op.res, fn, op)}, k_width={32 // bits})"
            a = f"gl.convert_layout({self.operand(op.a, op, fn).text}, {dot})"
        else:
            a = self.smem_view(op.a, op.a_access.data, list(op.a_indices), op, fn)
        b = self.smem_view(op.b, op.b_access.data, list(op.b_indices), op, fn)
        # trans(view): the transposed descriptor of the same shared memory (wgmma's K-major B, M-major A)
        a = f"{a}.permute((1, 0))" if op.is_trans_a else a
        b = f"{b}.permute((1, 0))" if op.is_trans_b else b
        acc = self.ref(op.acc, fn)
        if op.acc in fn.pending:  # chained: the new group supersedes the one it accumulates on
            fn.pending.remove(op.acc)
            fn.tokens.discard(op.acc)
        self.layout_of(op.res, fn, op)  # checks the accumulator fits the partition's warps
        self.define(fn, op.res, Val(f"warpgroup_mma({a}, {b}, {acc.text}, is_async=True)", "wgmma"), op)
        fn.pending.append(op.res)
        fn.tokens.add(op.res)

    def op_WgmmaWaitOp(self, op: ex.WgmmaWaitOp, fn: Fn) -> None:
        n = self.pending_count(op)
        if not fn.pending:
            fn.line(f"# wgmma.wait({n}): no wgmma in flight", op)
            return
        names = [self.vals[v].text for v in fn.pending]
        lhs = ", ".join(names)
        fn.line(f"{lhs} = warpgroup_mma_wait({n}, deps=({', '.join(names)},))", op)
        for v in fn.pending:
            self.vals[v].kind = "tile"
        fn.tokens.clear()  # every in-flight accumulator came back through the wait as a tensor
        fn.pending = fn.pending[len(fn.pending) - n :] if n else []


def carried_in_flight(block, params: dict[str, int]) -> list[int]:
    """The carried values (by position) whose wgmma is still in flight at the end of a trip of
    the loop body `block`, following its wgmmas and wgmma.waits in order (the values in flight
    at the top of a trip are the oldest groups). A body whose nested loops or branches issue or
    wait on wgmmas is not followed: none."""
    if not isinstance(block.last_op, st.YieldOp):
        return []
    yields = list(block.last_op.values)
    at_top: list[SSAValue] = []
    for _ in range(2):  # the second trip starts with what the first left in flight
        flight = list(at_top)
        for o in block.ops:
            if isinstance(o, ex.WgmmaOp):
                if o.acc in flight:
                    flight.remove(o.acc)
                flight.append(o.res)
            elif isinstance(o, ex.WgmmaWaitOp):
                n = max(0, o.pending.data.evaluate(params))
                flight = flight[len(flight) - n :] if n else []
            elif o.regions and any(isinstance(x, ex.WgmmaOp | ex.WgmmaWaitOp) for x in o.walk()):
                return []
        at_top = [block.args[1 + i] for i, y in enumerate(yields) if y in flight]
    return [i for i, y in enumerate(yields) if y in flight]
