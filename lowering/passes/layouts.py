"""Register layouts made explicit: every tile that the Gluon backend would give a layout gets it in
its type, through `convert_layout` at the op that makes the tile.

    acc = zeros(f32[BM / 2, BN])          =>   acc = convert_layout(zeros(f32[BM / 2, BN]), mma([3, 0], [4, 1], [16, 256, 16]))
    for k in 0 .. K / BK {                     for k in 0 .. K / BK {        # acc: f32[BM / 2, BN] layout(mma(...))
      acc = wgmma(as[s], bs[s], acc)             acc = wgmma(as[s], bs[s], acc)
    ...                                        ...

The choice is the Gluon emitter's (lowering/targets/gluon/emit/layouts.py), which this pass writes
down: tiles that must share a layout form classes (union-find over values: an op's result and
its elementwise operands, a loop's init, body argument, yield and result, a branch's yields and
result, a load and its mask, a wgmma's accumulator and result). A class with a `convert_layout` result has that layout; a
class holding a wgmma accumulator has the wgmma register layout `mma([3, 0], warps_per_cta,
[16, n, 256 / bits])`; a class whose only claim is being converted by `convert_layout` takes the
layout it is converted to (so the conversion costs nothing); any other class gets a blocked
layout of 16-byte vectors along the last dimension for the first member the emitter asks about
(its shape and dtype). A layout is chosen for the warps of the code that holds the tile: one unit
of its role, or the launch.

What the pass writes. The tiles that Gluon makes with a layout (`zeros`, `full`, `arange`, tile
loads) are wrapped in `convert_layout(..., L)`, which moves nothing since the class already has
L; carried values, branch results and wgmma results then take the layout in their types, and a
yield whose value has no layout in its type is converted too. Elementwise results keep an
unannotated type: their layout is their operands' (as in Gluon, where only the ops that make
tiles name a layout). Lowering the result with Gluon gives the same source as lowering the input.

What it refuses (a `lower.layouts` warning, the program unchanged): a target other than sm_90,
a program that the Gluon backend does not take (a tile-level program: Triton chooses its own
layouts), tiles computed outside roles in a kernel with roles (KIR spreads them over the whole
CTA, Gluon over its default partition), a wgmma accumulator that the instruction cannot tile
(fewer than 16 rows per warp), and reductions (their results take a slice layout, which KIR's
layout types cannot write). Layouts are chosen for the parameters' default values.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import Rewriter

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import Layout, TileType, shape_of
from kir.program import Program, set_span, span_of
from lowering.passes import PassResult
from lowering.targets.gluon.emit import GluonEmitter
from lowering.targets.gluon.emit.layouts import MAKERS, LayoutClasses, LayoutError

RULE = "lower.layouts"
TARGETS = ("sm_90",)


class _Skip(Exception):
    def __init__(self, message: str, op: Operation | None, hint: str = ""):
        super().__init__(message)
        self.message, self.op, self.hint = message, op, hint


@dataclass(frozen=True)
class LayoutPass:
    """Write the register layout of every tile that the Gluon backend would give one."""

    target: str = "sm_90"

    def apply(self, program: Program) -> PassResult:
        out = program.clone()
        try:
            chosen = self._choose(out)
        except _Skip as skip:
            span = span_of(skip.op) if skip.op is not None else program.span()
            return PassResult(
                out, [Diagnostic(RULE, "warning", span, f"no layouts written: {skip.message}", skip.hint)]
            )
        _materialize(out.kernel, chosen)
        return PassResult(out, [])

    def _choose(self, program: Program) -> dict[SSAValue, Layout]:
        """The layout of each tile made by a MAKERS op or a wgmma, in the order the Gluon emitter
        asks (the order of the program)."""
        kernel = program.kernel
        if self.target not in TARGETS or kernel.target.data not in TARGETS:
            raise _Skip(
                f"register layouts are written for {', '.join(TARGETS)}, not {self.target}",
                None,
                "lower other targets without explicit layouts",
            )
        refusals = [d for d in GluonEmitter().accepts(program) if d.is_error]
        if refusals:
            raise _Skip(
                f"the gluon backend does not take this program ({refusals[0].rule}: {refusals[0].message})",
                None,
                "layouts are a Gluon decision: lower tile-level programs with Triton, which chooses its own",
            )
        reduction = next((op for op in kernel.walk() if isinstance(op, tl.ReduceOp)), None)
        if reduction is not None:
            raise _Skip(
                "a reduction's result has the slice of its operand's layout in Gluon, a layout kind "
                "KIR's layout types do not write yet",
                reduction,
                "lower the program without explicit layouts: the Gluon backend chooses the slices itself",
            )
        roles = [op for op in kernel.body.block.ops if isinstance(op, st.RoleOp)]
        launch = kernel.num_warps.data * (4 if kernel.warp_unit.data == "warpgroups" else 1)
        classes = LayoutClasses(kernel)
        decided: dict[tuple[SSAValue, int], Layout] = {}
        chosen: dict[SSAValue, Layout] = {}
        params = program.params
        for op in kernel.walk():
            values = [r for r in op.results if isinstance(r.type, TileType)] if isinstance(op, MAKERS) else []
            if isinstance(op, ex.WgmmaOp):
                values = [op.res]
            if not values:
                continue
            role = st.RoleOp.enclosing(op)
            if role is None and roles:
                raise _Skip(
                    "a tile is computed outside the roles of a kernel with roles",
                    op,
                    "compute tiles inside the role that uses them",
                )
            warps = role.warps_per_unit if role is not None else launch
            for v in values:
                try:
                    shape = [sx_static(d, params) for d in shape_of(v.type)]
                except KeyError as err:
                    raise _Skip(f"the tile's shape depends on the shape symbol `{err.args[0]}`", op) from None
                key = (classes.find(v), warps)
                if key not in decided:
                    try:
                        decided[key] = classes.choose(v, shape, warps)
                    except LayoutError as err:
                        raise _Skip(err.message, op, err.hint) from None
                chosen[v] = decided[key]
        return chosen


def sx_static(expr: sx.SymExpr, params: dict[str, int]) -> int:
    return sx.fold(expr).evaluate(params)


def _materialize(kernel: st.KernelOp, chosen: dict[SSAValue, Layout]) -> None:
    for v, layout in chosen.items():
        op = v.owner
        if not isinstance(op, MAKERS) or (isinstance(v.type, TileType) and v.type.layout.data):
            continue
        users = [u.operation for u in v.uses]
        if len(users) == 1 and isinstance(users[0], ex.ConvertLayoutOp) and users[0].layout.data == layout:
            continue  # written already (a second application changes nothing)
        block = op.parent_block()
        assert block is not None
        convert = ex.ConvertLayoutOp(v, layout)
        set_span(convert, span_of(op))
        block.insert_op_after(convert, op)
        v.replace_all_uses_with(convert.res)
        convert.operands[0] = v
        convert.res.name_hint, v.name_hint = v.name_hint, None
    _retype(kernel.body.block)


def _retype(block: Block) -> None:
    """Carry the layouts into the types that must equal others: loop arguments and results,
    branch results, wgmma results, and unary ops and scans (whose result has the operand's
    type); a yielded value without one is converted."""
    for op in list(block.ops):
        if isinstance(op, ex.WgmmaOp) and op.res.type != op.acc.type:
            Rewriter.replace_value_with_new_type(op.res, op.acc.type)
        elif isinstance(op, tl.UnaryOp | tl.ScanOp) and op.res.type != op.operand.type:
            Rewriter.replace_value_with_new_type(op.res, op.operand.type)  # they keep the operand's type
        elif isinstance(op, st.ForOp):
            body = op.body.block
            for i, init in enumerate(op.inits):
                if body.args[1 + i].type != init.type:
                    Rewriter.replace_value_with_new_type(body.args[1 + i], init.type)
            _retype(body)
            _match_yield(body, [v.type for v in op.inits])
            for res, init in zip(op.res, op.inits, strict=True):
                if res.type != init.type:
                    Rewriter.replace_value_with_new_type(res, init.type)
        elif isinstance(op, st.IfOp):
            blocks = (op.then_body.block, op.else_body.block)
            for b in blocks:
                _retype(b)
            for i, res in enumerate(op.res):
                types = [b.last_op.values[i].type for b in blocks if isinstance(b.last_op, st.YieldOp)]
                laid = next((t for t in types if isinstance(t, TileType) and t.layout.data), None)
                if laid is None:
                    continue
                for b in blocks:
                    _match_yield(b, [laid if j == i else r.type for j, r in enumerate(op.res)])
                if res.type != laid:
                    Rewriter.replace_value_with_new_type(res, laid)
        elif isinstance(op, st.RoleOp):
            _retype(op.body.block)


def _match_yield(block: Block, types: list) -> None:
    last = block.last_op
    if not isinstance(last, st.YieldOp):
        return
    for i, (v, want) in enumerate(zip(last.values, types, strict=True)):
        if v.type == want or not (isinstance(want, TileType) and want.layout.data):
            continue
        convert = ex.ConvertLayoutOp(v, want.layout.data[0].data)
        set_span(convert, span_of(v.owner) if isinstance(v.owner, Operation) else span_of(last))
        block.insert_op_before(convert, last)
        last.operands[i] = convert.res
        if v.has_one_use():  # the convert takes the name: `acc = convert_layout(acc * 2.0, ...)`
            convert.res.name_hint, v.name_hint = v.name_hint, None
