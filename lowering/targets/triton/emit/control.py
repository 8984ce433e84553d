"""Loops and branches in Triton: a loop-carried value stays one Python variable, an `if`'s
results are assigned at the end of each branch."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from kir.dialect import structure as st
from kir.dialect.types import dtype_of

from .naming import Scope
from .values import Val


class ControlFlow:
    """The loops and branches of `KernelWriter`."""

    def _carried_name(self, op: Operation, init: SSAValue, arg: SSAValue, taken: set[str]) -> tuple[str, bool]:
        """The Python variable of a loop-carried value, and whether the init must be copied in."""
        iv = self.vals[init]
        at = self.liveness.pos[op]
        owner = init.owner if isinstance(init, OpResult) else None
        if (
            owner is not None
            and not iv.loose
            and init.name_hint == arg.name_hint
            and iv.text in self.scopes[-1].names
            and self.holder.get(iv.text) is init
            and self.liveness.last_use(init) <= at
            and iv.text not in taken
        ):
            return iv.text, False
        return self._name(arg, at), True

    def op_for(self, op: st.ForOp) -> None:
        body = op.body.block
        var, *args = body.args
        lo, hi, step = self.val(op.lower), self.val(op.upper), self.val(op.step)
        names: list[str] = []
        copies: list[tuple[str, str]] = []
        for init, arg in zip(op.inits, args, strict=True):
            name, copy = self._carried_name(op, init, arg, set(names))
            names.append(name)
            self.holder[name] = arg
            init_text = self.strict(self.val(init)).text
            if copy and init_text != name:
                copies.append((name, init_text))
        if copies:
            self.w.line(f"{', '.join(n for n, _ in copies)} = {', '.join(t for _, t in copies)}", op)
        # An unused loop variable is named `_...`, as Python style has it.
        var_name = (
            self._fresh(var.name_hint or "i") if var.uses else self._fresh("_" + (var.name_hint or "i").lstrip("_"))
        )
        bounds = [lo.text, hi.text]
        if step.known != 1:
            bounds.append(step.text)
        hints = []
        if op.stages is not None:
            hints.append(f"num_stages={self.statics.static_text(op.stages.data, op, 'pipeline stages')[0]}")
        if op.warp_specialize is not None:
            hints.append("warp_specialize=True")
            self.notes.append(
                "warp_specialize: emitted as tl.range(..., warp_specialize=True); Triton 3.6 applies it where "
                "its automatic warp specialization handles the loop and ignores it elsewhere"
            )
        if hints:
            if len(bounds) == 2:
                bounds.append("1")
            header = f"for {var_name} in tl.range({', '.join(bounds + hints)}):"
        else:
            header = f"for {var_name} in range({', '.join(bounds)}):"
        self.w.line(header, op)
        self.w.indent()
        scope = Scope({var_name})
        for name, arg in zip(names, args, strict=True):
            scope.carried[name] = self._type(arg)
        self.scopes.append(scope)
        start = len(self.w.lines)
        var_dtype = dtype_of(op.lower.type)
        loop_dtype = "i64" if "i64" in (var_dtype, dtype_of(op.upper.type), dtype_of(op.step.type)) else "i32"
        if loop_dtype != var_dtype:  # Triton's induction variable has the widest bound's type
            narrow = self._fresh(f"{var_name}_i32")
            self.w.line(f"{narrow} = tl.cast({var_name}, tl.int32)", op)
            self.vals[var] = Val(narrow, var_dtype)
        else:
            self.vals[var] = Val(var_name, var_dtype, loose=True, lo=lo.lo if (step.lo or 0) > 0 else None)
        for name, arg in zip(names, args, strict=True):
            self.vals[arg] = Val(name, dtype_of(arg.type), self._shape(arg, op))
        self._yield_to(names, body)
        self.block(body)
        yielded = body.last_op
        assert isinstance(yielded, st.YieldOp)
        self._assign(names, list(yielded.values), yielded)
        if len(self.w.lines) == start:
            self.w.line("pass")
        self.scopes.pop()
        self.w.dedent()
        for name, res in zip(names, op.res, strict=True):
            self.holder[name] = res
            self.vals[res] = Val(name, dtype_of(res.type), self._shape(res, op))

    def _yield_to(self, names: Sequence[str], block: Block) -> None:
        """Values made in `block` and yielded at its end prefer the variables they go to."""
        yielded = block.last_op
        assert isinstance(yielded, st.YieldOp)
        for name, value in zip(names, yielded.values, strict=True):
            owner = value.owner if isinstance(value, OpResult) else None
            if owner is not None and owner.parent_block() is block and value not in self.yield_names:
                self.yield_names[value] = name

    def _assign(self, names: Sequence[str], values: Iterable[SSAValue], op: Operation) -> None:
        """`names = values` as one parallel assignment (a swap needs no temporary)."""
        pairs = []
        for name, value in zip(names, values, strict=True):
            text = self.strict(self.val(value)).text
            if text != name:
                pairs.append((name, text))
        if pairs:
            self.w.line(f"{', '.join(n for n, _ in pairs)} = {', '.join(t for _, t in pairs)}", op)

    def op_if(self, op: st.IfOp) -> None:
        cond = self.val(op.cond)
        at = self.liveness.end[op]
        before = dict(self.holder)
        names: list[str] = []
        for k, res in enumerate(op.res):
            # The value a branch passes through unchanged (`y` in `if c { y = y * 2.0 }`) lends
            # the result its variable.
            through = [
                self.vals[y].text
                for y in (
                    cast(Operation, op.then_body.block.last_op).operands[k],
                    cast(Operation, op.else_body.block.last_op).operands[k],
                )  # each branch ends with its yield
                if not op.is_ancestor(
                    y.owner if isinstance(y, OpResult) else cast(Operation, cast(BlockArgument, y).block.parent_op())
                )
                and y in self.vals
                and not self.vals[y].loose
            ]
            names.append(self._name(res, at, same_type=True, prefer=through))
        types = {name: self._type(res) for name, res in zip(names, op.res, strict=True)}
        for name in names:  # inside the branches, a reused name still holds the value before the `if`
            if name in before:
                self.holder[name] = before[name]
            else:
                self.holder.pop(name, None)
        self.w.line(f"if {cond.text}:", op)
        for i, region in enumerate((op.then_body, op.else_body)):
            block = region.block
            yielded = block.last_op
            assert isinstance(yielded, st.YieldOp)
            has_ops = any(not isinstance(o, st.YieldOp) for o in block.ops)
            needs = (
                any(self.strict(self.val(v)).text != n for n, v in zip(names, yielded.values, strict=True))
                if not has_ops
                else True
            )
            if i == 1 and not has_ops and not needs:
                break
            if i == 1:
                self.w.line("else:", op)
            self.w.indent()
            self.scopes.append(Scope(carried=dict(types), sibling=op.else_body if i == 0 else op.then_body))
            start = len(self.w.lines)
            self._yield_to(names, block)
            self.block(block)
            self._assign(names, list(yielded.values), yielded)
            for name in names:  # what the other branch sees under these names
                if name in before:
                    self.holder[name] = before[name]
                else:
                    self.holder.pop(name, None)
            if len(self.w.lines) == start:
                self.w.line("pass")
            self.scopes.pop()
            self.w.dedent()
        for name, res in zip(names, op.res, strict=True):
            self.holder[name] = res
            self.vals[res] = Val(name, dtype_of(res.type), self._shape(res, op))
