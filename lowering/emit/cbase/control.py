"""Loops and branches in C++: carried values updated in place, yields as copies."""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue

from kir.dialect import structure as st
from kir.dialect.types import dtype_of
from lowering.emit.cbase.values import Scalar, Tile


class ControlFlow:
    """The loops and branches of `KernelGen`."""

    def copy(self, dst: Tile | Scalar, src_value: SSAValue, op: Operation | None) -> None:
        src = self.val(src_value)
        if dst.name == src.name:
            return
        if isinstance(dst, Scalar):
            self.w.line(f"{dst.name} = {src.name};", op)
            return
        assert isinstance(src, Tile)
        if src.lazy:
            idx, _, closers = self.open_slots(dst.layout, dst.shape, op)
            self.w.line(f"{dst.name}[kir_i] = {self.value_at(src_value, idx)};", op)
            self.close(closers)
            return
        n = self.slots(dst.layout, dst.shape)
        self.w.line(f"for (int kir_i = 0; kir_i < {n}; ++kir_i) {dst.name}[kir_i] = {src.name}[kir_i];", op)

    def single_use(self, v: SSAValue, user: Operation) -> bool:
        return all(use.operation is user for use in v.uses)

    def op_for(self, op: st.ForOp) -> None:
        block = op.body.block
        var, *args = block.args
        carried: list[Tile | Scalar] = []
        for init, arg, res in zip(op.inits, args, op.res, strict=True):
            src = self.val(init)
            if isinstance(src, Tile) and not src.lazy and self.single_use(init, op) and src.name not in self.views:
                storage = src  # the loop updates the initial value's storage in place
            else:
                storage = self.declare(res, op, self.name_for(arg))
                self.copy(storage, init, op)
            carried.append(storage)
            self.vals[arg] = storage
            self.vals[res] = storage
        lo, hi, step = (self.val(v).name for v in (op.lower, op.upper, op.step))
        ivar = self.name_for(var)
        ctype = self.c.ctype(dtype_of(op.lower.type))
        self.vals[var] = Scalar(ivar, dtype_of(op.lower.type))
        self.w.line(f"for ({ctype} {ivar} = {lo}; {ivar} < {hi}; {ivar} += {step}) {{", op)
        self.w.indent()
        self.emit_block(block)
        self.assign_yield(block, carried, op)
        self.w.dedent()
        self.w.line("}", op)

    def assign_yield(self, block: Block, dests: list[Tile | Scalar], op: Operation) -> None:
        last = block.last_op
        assert isinstance(last, st.YieldOp)
        values = list(last.values)
        dest_names = {d.name for d in dests}
        names = [self.val(v).name for v in values]
        if any(n in dest_names and n != d.name for n, d in zip(names, dests, strict=True)):
            # a permutation of the carried values: go through temporaries first
            temps = []
            for v in values:
                t = self.declare(v, op, self.fresh("kir_tmp"), bind=False)
                self.copy(t, v, op)
                temps.append(t)
            for d, t in zip(dests, temps, strict=True):
                if isinstance(d, Scalar):
                    self.w.line(f"{d.name} = {t.name};", op)
                else:
                    n = self.slots(d.layout, d.shape)
                    self.w.line(f"for (int kir_i = 0; kir_i < {n}; ++kir_i) {d.name}[kir_i] = {t.name}[kir_i];", op)
            return
        for d, v in zip(dests, values, strict=True):
            self.copy(d, v, op)

    def op_if(self, op: st.IfOp) -> None:
        dests = [self.declare(r, op) for r in op.res]
        self.w.line(f"if ({self.val(op.cond).name}) {{", op)
        for k, region in enumerate((op.then_body, op.else_body)):
            if k == 1:
                if not region.blocks or (len(region.block.ops) == 1 and not op.res):
                    break
                self.w.line("} else {", op)
            self.w.indent()
            if region.blocks:
                self.emit_block(region.block)
                self.assign_yield(region.block, dests, op)
            self.w.dedent()
        self.w.line("}", op)
