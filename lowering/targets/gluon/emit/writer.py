"""The Gluon module writer: one function per role and the kernel, each op handed to its
handler (the mixins, one per kind of op); static expressions, names and inlining."""

from __future__ import annotations

import re

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect.traits import is_pure
from kir.dialect.types import shape_of
from kir.program import Program, span_of
from lowering.emit.base import Lowered
from lowering.emit.names import identifier
from lowering.emit.pyexpr import ATOM, static_op

from .control import ControlFlow
from .expressions import Expressions
from .layouts import MAKERS, GluonClasses, Layouts
from .memory import Memory
from .module import ModuleParts
from .refusals import unsupported
from .sync import Sync
from .tables import NOT_INLINE, RESERVED
from .tiles import Tiles
from .values import Desc, Fn, Val
from .wgmma import Wgmma


class GluonWriter(Layouts, ModuleParts, ControlFlow, Expressions, Tiles, Memory, Sync, Wgmma):
    """Writes one module; an op's handler is the method `op_<its class name>` of a mixin."""

    def __init__(self, program: Program, params: dict[str, int]):
        self.program = program
        self.kernel = program.kernel
        self.params = dict(params)
        self.symbols = self.kernel.shape_symbols
        self.vals: dict[SSAValue, Val] = {}
        self.layouts = GluonClasses(self.kernel)
        self.layout_names: dict[str, str] = {}  # layout constructor text -> module constant
        self.layout_order: list[tuple[str, str]] = []
        self.inlined: set[Operation] = set()
        self.class_layouts: dict[tuple[SSAValue, int], str] = {}
        self.descs: dict[tuple, Desc] = {}
        self.pointer_args: set[str] = set()
        self.errors: list[Diagnostic] = []
        self.uses_helpers = False
        self.combines: set[str] = set()  # the reductions' combine functions the module needs
        self.nan_minmax = False  # a float maximum / minimum names tl.PropagateNan
        kname = identifier(self.kernel.kernel_name, RESERVED)
        self.entry = kname
        self.module_names: set[str] = set(RESERVED) | {kname}
        self.arg_names: dict[str, str] = {}

    # -- static expressions ------------------------------------------------------------------

    def static(self, expr: sx.SymExpr, op: Operation | None = None) -> int:
        try:
            return sx.fold(expr).evaluate(self.params)
        except KeyError as err:
            raise KirError(
                unsupported(
                    op or self.kernel,
                    f"`{expr}` depends on the shape symbol `{err.args[0]}`; gluon needs tile shapes known at compile time",
                    "size tiles with parameters (BM, BN, ...) and let the grid cover the shape symbols",
                )
            ) from None

    def pending_count(self, op: ex.WgmmaWaitOp | ex.TmaStoreWaitOp) -> int:
        """An async wait's count with the parameters bound; refused where they make it negative."""
        n = self.static(op.pending.data, op)
        if n < 0:
            what = "wgmma.wait" if isinstance(op, ex.WgmmaWaitOp) else "tma.store_wait"
            raise KirError(
                unsupported(
                    op,
                    f"{what}({op.pending.data}) is {what}({n}) with these parameters; the count is at least 0",
                    "give the parameters values that leave the count at 0 or more",
                )
            )
        return n

    def shape(self, t, op: Operation | None = None) -> list[int]:
        return [self.static(d, op) for d in shape_of(t)]

    def sym_text(self, expr: sx.SymExpr, fn: Fn) -> Val:
        """A static expression over parameters and shape symbols, as run-time code."""
        expr = sx.fold(expr)
        if not (expr.symbols() - set(self.params)):
            return Val(str(expr.evaluate(self.params)), "static", expr.evaluate(self.params))
        if isinstance(expr, sx.Sym):
            return self.ref_symbol(expr.name, fn)
        if isinstance(expr, sx.Bin):
            a, b = self.sym_text(expr.lhs, fn), self.sym_text(expr.rhs, fn)
            text, prec = static_op(expr.op, "gl", (a.text, a.prec), (b.text, b.prec))
            return Val(text, "scalar", prec=prec)
        return Val(str(expr), "static", expr.as_int())

    def ref_symbol(self, name: str, fn: Fn) -> Val:
        if name in self.params:
            return Val(str(self.params[name]), "static", self.params[name])
        text = identifier(name, RESERVED)
        if fn.role is not None:
            fn.needs[text] = None
        return Val(text, "scalar")

    # -- names -------------------------------------------------------------------------------

    def ref(self, v: SSAValue, fn: Fn) -> Val:
        val = self.vals[v]
        if val.fn is not None and val.fn is not fn:
            fn.needs[val.text] = None
        return val

    def _effective_users(self, v: SSAValue) -> list[Operation]:
        out: list[Operation] = []
        for use in v.uses:
            user = use.operation
            if user in self.inlined:
                out += self._effective_users(user.results[0])
            else:
                out.append(user)
        return out

    def _dead_after(self, u: SSAValue, at: Operation) -> bool:
        """No use of `u` comes after `at` (which reads it last, if at all), both in one block:
        then `at`'s result may take `u`'s Python name."""
        block = u.block if isinstance(u, BlockArgument) else u.owner.parent_block()
        if at.parent_block() is not block or block is None:
            return False
        ops = list(block.ops)
        pos = ops.index(at)
        for user in self._effective_users(u):
            anc: Operation | None = user
            while anc is not None and anc.parent_block() is not block:
                anc = anc.parent_op()
            if anc is None or ops.index(anc) > pos:
                return False
            if anc is at and user is not at and not isinstance(at, st.IfOp):
                return False  # read inside a loop's body, where its carried names are bound
        return True

    def bind_name(self, fn: Fn, v: SSAValue | None, hint: str | None, at: Operation | None) -> str:
        base = hint if hint and hint.isidentifier() and not hint.startswith("__") else "v"
        if re.match(r"(mma_layout|blocked_layout|slice_layout|nvmma|shared_layout)", base):
            base = "v_" + base  # the module's layout constants, which may be named later
        base = identifier(base, RESERVED)
        for i in range(10_000):
            name = base if i == 0 else f"{base}_{i}"
            if name in self.module_names:
                continue
            if name not in fn.holders:
                break
            holder = fn.holders[name]
            if holder is not None and at is not None and self._dead_after(holder, at):
                break
        fn.holders[name] = v
        return name

    def define(self, fn: Fn, v: SSAValue, val: Val, op: Operation, hint: str | None = None) -> None:
        """Give `v` its code: a literal, an inline expression, or a name bound by a new line."""
        if val.kind == "static" or op in self.inlined:
            self.vals[v] = val
            return
        name = self.bind_name(fn, v, hint if hint is not None else v.name_hint, op)
        if val.kind == "constexpr":
            fn.line(f"{name}: gl.constexpr = {val.text}", op)
        else:
            fn.line(f"{name} = {val.text}", op)
        fn.kinds[name] = val.kind
        self.vals[v] = Val(name, val.kind, val.static, ATOM, fn)

    # -- the kernel and its roles ------------------------------------------------------------

    def run(self) -> Lowered:
        self._plan_inline()
        self._plan_args()
        body = list(self.kernel.body.block.ops)
        roles = [op for op in body if isinstance(op, st.RoleOp)]
        last_role = body.index(roles[-1]) if roles else -1
        pre = [op for i, op in enumerate(body) if not isinstance(op, st.RoleOp) and (i < last_role or last_role < 0)]
        post = [op for i, op in enumerate(body) if i > last_role >= 0]

        total_warps = self.kernel.num_warps.data * (4 if self.kernel.warp_unit.data == "warpgroups" else 1)
        self.partitions = self._plan_partitions(roles)
        num_warps = self.partitions[0].warps if self.partitions else total_warps

        kernel_fn = Fn(self.entry, num_warps)
        self.kparams = []
        for name, _arg in self.kernel.args:
            self.kparams += [d.name for d in self.descs.values() if d.arg == name]
            if name in self.pointer_args:
                self.kparams.append(self.arg_names[name])
        self.kparams += [identifier(s, RESERVED) for s in self.symbols]
        for name in self.kparams:
            kernel_fn.holders[name] = None
        for name, arg in self.kernel.args:
            self.vals[arg] = Val(self.arg_names[name], "global", fn=kernel_fn)

        role_names = {role: self._unique_module_name(f"{self.entry}_{role.name_text}") for role in roles}
        idle_name = (
            self._unique_module_name(f"{self.entry}_idle")
            if self.partitions and self.partitions[0].role is None
            else None
        )
        for op in pre:
            self.emit_op(op, kernel_fn)

        role_fns: list[Fn] = []
        fn_of_role: dict[st.RoleOp, Fn] = {}
        for role in roles:
            rfn = Fn(role_names[role], role.warps_per_unit, role)
            for name in kernel_fn.holders:
                rfn.holders[name] = None  # a role may not rebind the kernel's names it reads
            self.emit_block(role.body.block, rfn)
            tiles = [n for n in rfn.needs if kernel_fn.kinds.get(n) == "tile"]
            if tiles:
                self.errors.append(
                    unsupported(
                        role,
                        f"role `{role.name_text}` reads the tile `{tiles[0]}` computed before the roles: "
                        "gluon hands worker partitions scalars, shared buffers and barriers, not tiles",
                        "compute the tile inside the role, or pass it through shared memory",
                    )
                )
            # A role's parameters: what it reads from the kernel, in the kernel's order.
            order = list(kernel_fn.holders)
            rfn.needs = dict.fromkeys(sorted(rfn.needs, key=order.index))
            role_fns.append(rfn)
            fn_of_role[role] = rfn

        if self.partitions:
            kernel_fn.line("gl.warp_specialize([", roles[0])
            kernel_fn.depth += 1
            for part in self.partitions:
                if part.role is None:
                    kernel_fn.line(f"({idle_name}, ()),", roles[0])
                    continue
                rfn = fn_of_role[part.role]
                args = ", ".join([*rfn.needs, str(part.rank)])
                kernel_fn.line(f"({rfn.name}, ({args}{',' if not rfn.needs else ''})),", part.role)
            kernel_fn.depth -= 1
            workers = self.partitions[1:]
            warps = [p.warps for p in workers]
            regs = [p.regs or self._default_regs(total_warps) for p in workers]
            kernel_fn.line(f"], {warps}, {regs})", roles[0])
        for op in post:
            self.emit_op(op, kernel_fn)
        if self.errors:
            raise KirError(self.errors)

        return self._assemble(kernel_fn, role_fns, idle_name, num_warps)

    def _unique_module_name(self, base: str) -> str:
        name = identifier(base, RESERVED)
        i = 0
        while name in self.module_names:
            i += 1
            name = f"{base}_{i}"
        self.module_names.add(name)
        return name

    def _plan_inline(self) -> None:
        for op in self.kernel.walk():
            if len(op.results) != 1:
                continue
            res = op.results[0]
            if res.name_hint is not None:
                continue
            uses = list(res.uses)
            if len(uses) != 1 or uses[0].operation.parent_block() is not op.parent_block():
                continue
            # a tile made only to be given a layout is written inside the convert_layout (which
            # binds the name, or is no conversion at all: see op_ConvertLayoutOp)
            if (is_pure(op) and not isinstance(op, NOT_INLINE)) or (
                isinstance(op, MAKERS) and isinstance(uses[0].operation, ex.ConvertLayoutOp)
            ):
                self.inlined.add(op)

    # -- statements --------------------------------------------------------------------------

    def emit_block(self, block: Block, fn: Fn) -> None:
        for op in block.ops:
            if isinstance(op, st.YieldOp):
                continue
            self.emit_op(op, fn)

    def emit_op(self, op: Operation, fn: Fn) -> None:
        try:
            handler = getattr(self, f"op_{type(op).__name__}", None)
            if handler is None:
                raise KirError(unsupported(op, f"the gluon backend cannot lower `{op.name}`"))
            handler(op, fn)
        except KirError as err:
            self.errors += err.diagnostics
            for r in op.results:  # keep going, to report every refusal at once
                self.vals.setdefault(r, Val("None", "scalar"))
        except Exception as err:  # noqa: BLE001 - a bug of this backend, reported at the op
            self.errors.append(
                Diagnostic(
                    "internal.gluon",
                    "error",
                    span_of(op),
                    f"internal error of the gluon backend at `{op.name}`: {type(err).__name__}: {err}",
                    "this is a bug of lowering/targets/gluon/emit/, not of the program; please report it with the program",
                )
            )
            for r in op.results:
                self.vals.setdefault(r, Val("None", "scalar"))
