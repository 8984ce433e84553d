"""Memory in Triton: addresses of global accesses, loads, stores and atomics."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from kir.dialect import tile as kt
from kir.dialect.types import dtype_of
from kir.dtypes import DTYPES
from lowering.emit.pyexpr import PRODUCT, SUM, paren

from .tables import ATOMIC_DTYPES, refuse
from .values import Val


class Memory:
    """The memory ops of `KernelWriter`."""

    def address(self, op: Operation) -> str:
        """The pointer (or pointer tile) of an access: base + sum of index * stride."""
        mem: SSAValue = op.mem
        if mem not in self.args:
            raise refuse(op, "lower.unsupported", "the Triton backend accesses global tensors only", "")
        arg = self.args[mem]
        dims = op.access.data.dims
        indices = list(op.indices)
        n_slices = sum(1 for d in dims if d is not None)
        terms = [arg.name]
        k = 0
        for dim, (extent, index) in enumerate(zip(dims, indices, strict=True)):
            v = self.val(index)
            if extent is None:
                if v.known == 0:
                    continue
                term = v
            else:
                e_text = self.statics.static_text(extent, op, "slice extent")[0]
                lanes = f"tl.arange(0, {e_text})"
                text = lanes if v.known == 0 else f"({v.operand(SUM)} + {lanes})"
                if n_slices > 1:
                    subs = ["None"] * n_slices
                    subs[k] = ":"
                    text += f"[{', '.join(subs)}]"
                k += 1
                term = Val(text, v.dtype)
            stride, sprec = arg.strides[dim]
            if stride == "1":
                terms.append(term.operand(SUM, right=True))
            else:
                terms.append(f"{term.operand(PRODUCT)} * {paren(stride, sprec, PRODUCT, right=True)}")
        return " + ".join(terms)

    def op_load(self, op: kt.LoadOp) -> None:
        d = dtype_of(op.res.type)
        shape = self._shape(op.res, op)
        if shape:
            self._check_tile(op, shape)
        parts = [self.address(op)]
        if op.mask is not None:
            parts.append(f"mask={self.val(op.mask).text}")
        if op.other is not None:
            parts.append(f"other={self.val(op.other).text}")
        elif op.mask is not None:  # masked-off lanes read zero in KIR; Triton leaves them undefined
            parts.append("other=" + ("False" if d == "i1" else "0" if DTYPES[d].is_int else "0.0"))
        if op.evict is not None:
            parts.append(f'eviction_policy="evict_{op.evict.data}"')
        self.define(op, op.res, Val(f"tl.load({', '.join(parts)})", d, shape))

    def op_store(self, op: kt.StoreOp) -> None:
        v = self.val(op.value)
        parts = [self.address(op), v.text]
        if op.mask is not None:
            parts.append(f"mask={self.val(op.mask).text}")
        self.w.line(f"tl.store({', '.join(parts)})", op)

    def op_atomic(self, op: kt.AtomicOp) -> None:
        fn = op.fn.data
        d = dtype_of(op.res.type)
        if d not in ATOMIC_DTYPES[fn]:
            raise refuse(
                op,
                "lower.unsupported",
                f"atomic_{fn} on {d}: Triton's atomic_{fn} takes {', '.join(ATOMIC_DTYPES[fn])}",
                "widen the tensor (i32, f32)",
            )
        shape = self._shape(op.res, op)
        parts = [self.address(op), self.val(op.value).text]
        mask = self.val(op.mask).text if op.mask is not None else None
        if mask is not None:
            parts.append(f"mask={mask}")
        call = f"tl.atomic_{fn}({', '.join(parts)})"
        if not self.liveness.used(op):
            self.w.line(call, op)
            return
        if mask is not None:  # KIR: masked-off lanes return 0
            call = f"tl.where({mask}, {call}, 0)"
        name = self._name(op.res, self.liveness.pos[op])
        self.w.line(f"{name} = {call}", op)
        self.vals[op.res] = Val(name, d, shape)
