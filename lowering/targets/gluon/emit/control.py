"""Loops, branches and roles: every unit of every role becomes a `gl.warp_specialize`
partition (see the package's docstring for the plan)."""

from __future__ import annotations

from kir.dialect import structure as st
from kir.dialect.types import TileType

from .values import Fn, Partition, Val
from .wgmma import carried_in_flight


class ControlFlow:
    """The loops, branches and partitions of `GluonWriter`."""

    # -- partitions ------------------------------------------------------------------------------

    def _plan_partitions(self, roles: list[st.RoleOp]) -> list[Partition]:
        """One partition per role unit; the first is the default partition. It must have a
        multiple of four warps (Triton's rule for warp-specialized kernels): the warpgroup unit
        with the largest register budget, since Triton hands the default partition whatever
        registers the workers leave; without a warpgroup unit, an idle four-warp default."""
        units = [
            Partition(role, rank, role.warps_per_unit, role.regs.data)
            for role in roles
            for rank in range(len(role.id_list))
        ]
        if not units:
            return []
        eligible = [u for u in units if u.warps % 4 == 0]
        if not eligible:
            return [Partition(None, 0, 4, 0), *units]
        default = max(eligible, key=lambda u: (u.regs, -units.index(u)))
        return [default, *(u for u in units if u is not default)]

    @staticmethod
    def _default_regs(total_warps: int) -> int:
        return max(24, min(256, (65536 // (32 * max(total_warps, 1))) // 8 * 8))

    @staticmethod
    def _leftover_regs(partitions: list[dict], num_warps: int) -> int | None:
        """The registers per thread Triton 3.6 leaves the default partition (AllocateWarpGroups:
        maxnreg = 64K / (32 * all warps), rounded down to 8; the workers' budgets, rounded up
        to 8 per warpgroup, are paid from it). None when Triton would first pad the workers to
        whole warpgroups: the compile report's setmaxnreg values then tell."""
        workers = partitions[1:]
        extra = sum(p["warps"] for p in workers)
        if extra % 4 or not all(p["regs"] for p in workers):
            return None
        groups = -(-extra // 4)
        maxnreg = 65536 // (num_warps + 4 * groups) // 32 // 8 * 8
        budget = maxnreg * num_warps * 32
        start = 0
        wg_max: list[int] = []
        for p in sorted(workers, key=lambda p: -p["warps"]):
            if start % 4 == 0:
                wg_max.append(0)
            wg_max[-1] = max(wg_max[-1], -(-p["regs"] // 8) * 8)
            start += p["warps"]
        budget += sum((maxnreg - r) * 4 * 32 for r in wg_max)
        return budget // (num_warps * 32) // 8 * 8 if budget > 0 else None

    # -- loops, branches, role ranks --------------------------------------------------------

    def op_ForOp(self, op: st.ForOp, fn: Fn) -> None:
        block = op.body.block
        lo, hi, step = (self.ref(v, fn) for v in (op.lower, op.upper, op.step))
        carried: list[str] = []
        for i, init in enumerate(op.inits):
            arg = block.args[1 + i]
            init_val = self.ref(init, fn)
            if (
                init_val.fn is fn
                and init_val.kind != "static"
                and self._dead_after(init, op)
                and init_val.text in fn.holders
            ):
                name = init_val.text
                fn.holders[name] = arg
            else:
                name = self.bind_name(fn, arg, arg.name_hint or op.res[i].name_hint, op)
                fn.line(f"{name} = {init_val.text}", op)
            self._check_not_token(init, op, fn)
            kind = "tile" if isinstance(arg.type, TileType) else "scalar"
            self.vals[arg] = Val(name, kind, fn=fn)
            carried.append(name)
        iv = block.args[0]
        iv_name = self.bind_name(fn, iv, iv.name_hint or "i", op)
        self.vals[iv] = Val(iv_name, "scalar", fn=fn)
        bounds = [lo.text, hi.text] + ([] if step.static == 1 else [step.text])
        fn.line(f"for {iv_name} in range({', '.join(bounds)}):", op)
        fn.depth += 1
        # an accumulator a trip leaves in flight (`wgmma.wait(1)` at the end of the body) is
        # still in flight at the top of the next trip: its wgmma.wait there must be emitted
        fn.pending += [block.args[1 + i] for i in carried_in_flight(block, self.params)]
        self.emit_block(block, fn)
        last = block.last_op
        if isinstance(last, st.YieldOp):
            for name, y in zip(carried, last.values, strict=True):
                self._check_not_token(y, op, fn)
                text = self.ref(y, fn).text
                if text != name:
                    fn.line(f"{name} = {text}", last)
            # after the loop, the results of the values in flight at the end of a trip are in flight
            after = {y: r for y, r in zip(last.values, op.res, strict=True)}
            after.update({a: r for a, r in zip(block.args[1:], op.res, strict=True)})
            fn.pending = [after.get(v, v) for v in fn.pending]
        if not any(True for o in block.ops if not isinstance(o, st.YieldOp)) and not carried:
            fn.line("pass", op)
        fn.depth -= 1
        for name, res in zip(carried, op.res, strict=True):
            fn.holders[name] = res
            self.vals[res] = Val(name, "tile" if isinstance(res.type, TileType) else "scalar", fn=fn)

    def op_IfOp(self, op: st.IfOp, fn: Fn) -> None:
        cond = self.ref(op.cond, fn)
        names = [self.bind_name(fn, r, r.name_hint, op) for r in op.res]
        for i, region in enumerate((op.then_body, op.else_body)):
            fn.line("if " + cond.text + ":" if i == 0 else "else:", op)
            fn.depth += 1
            start = len(fn.lines)
            self.emit_block(region.block, fn)
            last = region.block.last_op
            if isinstance(last, st.YieldOp):
                for name, y in zip(names, last.values, strict=True):
                    self._check_not_token(y, op, fn)
                    text = self.ref(y, fn).text
                    if text != name:
                        fn.line(f"{name} = {text}", last)
            fn.depth -= 1
            if len(fn.lines) == start:
                if i == 1:
                    fn.lines.pop()  # no `else:` for an empty else branch
                else:
                    fn.lines.append((fn.depth + 1, "pass", op))
        for name, res in zip(names, op.res, strict=True):
            self.vals[res] = Val(name, "tile" if isinstance(res.type, TileType) else "scalar", fn=fn)

    def op_RoleRankOp(self, op: st.RoleRankOp, fn: Fn) -> None:
        self.define(fn, op.res, Val("RANK", "constexpr"), op)
