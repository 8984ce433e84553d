"""Synchronization and asynchronous copies in Gluon: mbarriers, fences, CTA barriers and TMA."""

from __future__ import annotations

from typing import cast

from xdsl.ir import SSAValue

from kir.diagnostics import KirError
from kir.dialect import explicit as ex
from kir.dialect.types import shape_of
from lowering.emit.pyexpr import PRODUCT, SUM

from .refusals import unsupported
from .values import Desc, Fn, Val, static_int


class Sync:
    """The synchronization and TMA ops of `GluonWriter`."""

    def barrier(self, bar: SSAValue, index: SSAValue, fn: Fn) -> str:
        return f"{self.ref(bar, fn).text}.index({self.ref(index, fn).text})"

    def op_ExpectOp(self, op: ex.ExpectOp, fn: Fn) -> None:
        nbytes = self.ref(op.nbytes, fn)
        if nbytes.kind not in ("static", "constexpr"):
            raise KirError(
                unsupported(
                    op, "gluon's mbarrier.expect takes a byte count known at compile time", "write bytes = sizeof(...)"
                )
            )
        fn.line(f"mbarrier.expect({self.barrier(op.bar, op.bar_index, fn)}, {nbytes.text})", op)

    def op_ArriveOp(self, op: ex.ArriveOp, fn: Fn) -> None:
        fn.line(f"mbarrier.arrive({self.barrier(op.bar, op.bar_index, fn)}, count={op.count.data})", op)

    def op_WaitOp(self, op: ex.WaitOp, fn: Fn) -> None:
        fn.line(f"mbarrier.wait({self.barrier(op.bar, op.bar_index, fn)}, {self.ref(op.parity, fn).text})", op)

    def _desc(self, op, glob: SSAValue, access, smem: SSAValue) -> Desc:
        box = tuple(self.static(d, op) for d in access.dims if d is not None)
        arg = next(n for n, a in self.kernel.args if a is glob)
        return self.descs[(arg, box, smem.type.swizzle.data)]

    def tma_coords(self, op, glob: SSAValue, indices, fn: Fn) -> str:
        """The coordinates of a TMA box. A box `x[b, h, r0 : r0 + BM, c0 : c0 + BN]` of an N-D
        tensor goes through a 2-D descriptor over its rows (the leading dimensions merged, see
        lowering/targets/gluon/runtime.py): its row is `(b * H + h) * S + r0`. The box never runs into
        the next (b, h)'s rows, since the verifier's bounds rule proves r0 + BM <= S; where it
        would (an unverified program), the 2-D descriptor reads those rows where an N-D one
        would fill zeros."""
        vals = [self.ref(v, fn) for v in indices]
        if len(vals) == 2:
            return ", ".join(v.text for v in vals)
        dims = shape_of(glob.type)
        row = vals[0]
        for extent, index in zip(dims[1:-1], vals[1:-1], strict=True):
            row = self._mul_add(row, self.sym_text(extent, fn), index)
        return f"{row.text}, {vals[-1].text}"

    @staticmethod
    def _mul_add(a: Val, b: Val, c: Val) -> Val:
        """`a * b + c` as code, folded where the emitter knows the values."""
        if a.kind == "static" and b.kind == "static" and c.kind == "static":
            return static_int(cast(int, a.static) * cast(int, b.static) + cast(int, c.static))  # static: known
        if a.kind == "static" and a.static == 0 or b.kind == "static" and b.static == 0:
            return c
        if b.kind == "static" and b.static == 1:
            prod = a
        elif a.kind == "static" and a.static == 1:
            prod = b
        else:
            prod = Val(f"{a.operand(PRODUCT)} * {b.operand(PRODUCT, True)}", "scalar", prec=PRODUCT)
        if c.kind == "static" and c.static == 0:
            return prod
        return Val(f"{prod.operand(SUM)} + {c.operand(SUM, True)}", "scalar", prec=SUM)

    def op_TmaLoadOp(self, op: ex.TmaLoadOp, fn: Fn) -> None:
        d = self._desc(op, op.src, op.src_access.data, op.dst)
        desc = d.name
        if fn.role is not None:
            fn.needs[desc] = None
        coords = self.tma_coords(op, op.src, op.src_indices, fn)
        dst = self.smem_view(op.dst, op.dst_access.data, list(op.dst_indices), op, fn)
        bar = self.barrier(op.bar, op.bar_index, fn)
        fn.line(f"tma.async_copy_global_to_shared({desc}, [{coords}], {bar}, {dst})", op)

    def op_TmaStoreOp(self, op: ex.TmaStoreOp, fn: Fn) -> None:
        d = self._desc(op, op.dst, op.dst_access.data, op.src)
        if fn.role is not None:
            fn.needs[d.name] = None
        coords = self.tma_coords(op, op.dst, op.dst_indices, fn)
        src = self.smem_view(op.src, op.src_access.data, list(op.src_indices), op, fn)
        fn.line(f"tma.async_copy_shared_to_global({d.name}, [{coords}], {src})", op)

    def op_TmaStoreWaitOp(self, op: ex.TmaStoreWaitOp, fn: Fn) -> None:
        fn.line(f"tma.store_wait({self.pending_count(op)})", op)

    def op_FenceAsyncOp(self, op: ex.FenceAsyncOp, fn: Fn) -> None:
        fn.line("fence_async_shared()", op)

    def op_CtaBarrierOp(self, op: ex.CtaBarrierOp, fn: Fn) -> None:
        fn.line("gl.thread_barrier()", op)
