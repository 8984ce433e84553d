"""The Triton kernel writer: one pass over the KIR program writing one line per statement, and
the module around the kernel (imports, the helpers it uses, the signature)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from xdsl.ir import Block, Operation, OpResult, SSAValue

from kir import symexpr as sx
from kir.dialect import structure as st
from kir.dialect import tile as kt
from kir.dialect.traits import is_pure
from kir.dialect.types import GlobalType, dtype_of, shape_of
from kir.program import Program
from lowering.emit.base import ArgInfo, Lowered, SourceWriter
from lowering.emit.pyexpr import ATOM, SIGNATURE_DTYPE

from .control import ControlFlow
from .elementwise import Elementwise
from .helpers import HELPERS
from .liveness import Liveness
from .memory import Memory
from .naming import Naming, Scope
from .tables import (
    GENERATED_RESERVED,
    INLINE_LIMIT,
    NARROW_FLOATS,
    TILE_LIMIT,
    TL_DTYPE,
    ident,
    refuse,
)
from .tiles import Tiles
from .values import Statics, Val


@dataclass(frozen=True)
class Arg:
    name: str  # the Python name
    dtype: str
    strides: tuple[tuple[str, int], ...]  # (text, precedence) per dimension


class KernelWriter(Naming, Elementwise, Tiles, Memory, ControlFlow):
    """Writes one kernel: the ops' handlers come from the mixins, one per kind of op."""

    def __init__(self, program: Program, params: dict[str, int]):
        self.program = program
        self.kernel = program.kernel
        self.params = params
        self.w = SourceWriter()
        self.helpers: list[str] = []
        self.uses_libdevice = False
        self.notes: list[str] = []
        self.vals: dict[SSAValue, Val] = {}
        self.liveness = Liveness(self.kernel)
        self.scopes: list[Scope] = [Scope()]
        self.holder: dict[str, SSAValue] = {}
        self.yield_names: dict[SSAValue, str] = {}  # value -> the carried variable it ends up in
        self.temp_count = 0

        self.entry = ident(self.kernel.kernel_name)
        self.param_names = {p: ident(p) for p in self.kernel.params}
        self.symbol_names = {s: ident(s) for s in self.kernel.shape_symbols}
        self.statics = Statics(params, self.param_names, self.symbol_names)
        self.reserved = {*GENERATED_RESERVED, self.entry}
        self.args: dict[SSAValue, Arg] = {}
        for name, arg in self.kernel.args:
            assert isinstance(arg.type, GlobalType)
            self.args[arg] = Arg(ident(name), dtype_of(arg.type), self._strides(arg.type))
        self.reserved |= (
            {a.name for a in self.args.values()} | set(self.param_names.values()) | set(self.symbol_names.values())
        )

    # ---- arguments -------------------------------------------------------------------------

    def _strides(self, t: GlobalType) -> tuple[tuple[str, int], ...]:
        if t.strides.data:
            return tuple(self.statics.render(s.data) for s in t.strides.data)
        shape = shape_of(t)
        out = []
        for d in range(len(shape)):
            rest = shape[d + 1 :]
            if not rest:
                out.append(("1", ATOM))
                continue
            expr = rest[0]
            for e in rest[1:]:
                expr = sx.Bin("*", expr, e)
            out.append(self.statics.render(expr))
        return tuple(out)

    # ---- values ------------------------------------------------------------------------------

    def _shape(self, value: SSAValue | None, op: Operation | None, t=None) -> tuple[int, ...]:
        t = cast(SSAValue, value).type if t is None else t  # a value, or its type
        dims = []
        for d in shape_of(t):
            n = self.statics.value(d)
            if n is None:
                raise refuse(
                    op or (value.owner if isinstance(value, OpResult) else None),
                    "lower.tile-shape",
                    f"tile dimension `{d}` depends on a shape symbol; Triton needs tile shapes known at compile time",
                    "make the extent a parameter (BLOCK) and mask against the shape symbol",
                )
            dims.append(n)
        return tuple(dims)

    def _check_tile(self, op: Operation, shape: tuple[int, ...]) -> None:
        total = 1
        for n in shape:
            if n < 1 or n & (n - 1):
                raise refuse(
                    op,
                    "lower.tile-shape",
                    f"a tile of shape {list(shape)}: Triton's tile dimensions are powers of two",
                    "choose power-of-two tile parameters and mask the remainder",
                )
            total *= n
        if total > TILE_LIMIT:
            raise refuse(
                op,
                "lower.tile-shape",
                f"a tile of {total} elements exceeds Triton's limit of {TILE_LIMIT}",
                "use smaller tiles",
            )

    def val(self, value: SSAValue) -> Val:
        return self.vals[value]

    def strict(self, v: Val) -> Val:
        """The value as a Triton tensor of exactly its KIR dtype."""
        if not v.loose:
            return v
        if v.dtype in NARROW_FLOATS:  # Triton's interpreter has no bf16 constants: go through f32
            return Val(f"tl.full((), {v.text}, tl.float32).to({TL_DTYPE[v.dtype]})", v.dtype, v.shape)
        return Val(f"tl.full((), {v.text}, {TL_DTYPE[v.dtype]})", v.dtype, v.shape)

    def f32(self, v: Val) -> Val:
        """A narrow float value seen in f32 (exact)."""
        if v.dtype not in NARROW_FLOATS:
            return v
        if v.loose:
            return Val(v.text, "f32", v.shape, v.prec, True, v.known)
        return Val(f"{v.operand()}.to(tl.float32)", "f32", v.shape)

    def narrow(self, v: Val, dtype: str) -> Val:
        """An f32 result rounded back to a narrow float dtype."""
        if dtype not in NARROW_FLOATS:
            return v
        return self.cast(v, dtype)

    def define(self, op: Operation, value: SSAValue, v: Val) -> None:
        """Bind a value: inline (its text travels to the user) or a line `name = text`. A long
        expression gets a line of its own even where it could be inlined, to keep lines short."""
        if self.liveness.inline.get(op) and len(v.text) <= INLINE_LIMIT:
            self.vals[value] = v
            return
        if v.loose and any(isinstance(u.operation, st.ForOp | st.YieldOp) for u in value.uses):
            v = self.strict(v)  # a loop-carried variable is a tensor of its type from the start
        name = self._name(value, self.liveness.pos[op])
        self.w.line(f"{name} = {v.text}", op)
        self.vals[value] = Val(name, v.dtype, v.shape, ATOM, v.loose, v.known, v.lo, v.hi)

    # ---- the program -------------------------------------------------------------------------

    def write(self) -> Lowered:
        head = [
            f'"""Triton kernel for KIR kernel `{self.kernel.kernel_name}`, generated by lowering.emit.triton; do not edit."""',
            "",
            "import triton",
            "import triton.language as tl",
        ]
        for arg, info in self.args.items():
            self.vals[arg] = Val(info.name, info.dtype)
        params = [a.name for a in self.args.values()]
        params += list(self.symbol_names.values())
        params += [f"{n}: tl.constexpr" for n in self.param_names.values()]
        body = SourceWriter()
        self.w = body
        self.w.line(f"def {self.entry}({', '.join(params)}):", self.kernel)
        self.w.indent()
        before = len(self.w.lines)
        self.block(self.kernel.body.block)
        if len(self.w.lines) == before:
            self.w.line("pass")
        if self.uses_libdevice:
            head.append("from triton.language.extra import libdevice")
        lines = list(head)
        for name in HELPERS:
            if name in self.helpers:
                lines += ["", "", *HELPERS[name].strip("\n").split("\n")]
        lines += ["", "", "@triton.jit"]
        offset = len(lines)
        lines += body.lines
        spans = {n + offset: s for n, s in body.spans.items()}
        source = "\n".join(lines) + "\n"
        constexprs = {self.param_names[p]: self.params[p] for p in self.kernel.params}
        signature = {a.name: "*" + SIGNATURE_DTYPE[a.dtype] for a in self.args.values()}
        signature |= {n: "i32" for n in self.symbol_names.values()}
        signature |= {n: "constexpr" for n in constexprs}
        unit = 4 if self.kernel.warp_unit.data == "warpgroups" else 1
        return Lowered(
            backend="triton",
            source=source,
            entry=self.entry,
            program=self.program,
            params=dict(self.params),
            args=[
                ArgInfo(name, dtype_of(a.type), shape_of(a.type), cast(GlobalType, a.type).is_out)
                for name, a in self.kernel.args
            ],
            shape_symbols=list(self.kernel.shape_symbols),
            grid=tuple(g.data for g in self.kernel.grid.data),
            num_warps=self.kernel.num_warps.data * unit,
            options={
                "constexprs": constexprs,
                "arg_names": [a.name for a in self.args.values()],
                "symbol_names": list(self.symbol_names.values()),
                "signature": signature,
                "notes": self.notes,
            },
            line_spans=spans,
        )

    def block(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, st.YieldOp):
                continue
            handler = HANDLERS.get(type(op))
            if handler is None:
                raise refuse(
                    op,
                    "lower.unsupported",
                    f"the Triton backend cannot lower `{op.name}`",
                    "lower this program with the gluon or cuda backend",
                )
            if is_pure(op) and not self.liveness.used(op):
                continue  # dead pure code
            if isinstance(op, kt.LoadOp) and not self.liveness.used(op):
                continue  # a dead load reads nothing anyone sees
            handler(self, op)

    def need(self, helper: str) -> str:
        if helper not in self.helpers:
            self.helpers.append(helper)
        return helper


# each handler takes an op of its key's class
HANDLERS: dict[type[Operation], Callable[[KernelWriter, Any], None]] = {
    kt.ProgramIdOp: KernelWriter.op_program_id,
    kt.NumProgramsOp: KernelWriter.op_num_programs,
    kt.SymValueOp: KernelWriter.op_symbol,
    kt.ConstOp: KernelWriter.op_const,
    kt.ArangeOp: KernelWriter.op_arange,
    kt.ZerosOp: KernelWriter.op_zeros,
    kt.FullOp: KernelWriter.op_full,
    kt.BinaryOp: KernelWriter.op_binary,
    kt.CompareOp: KernelWriter.op_cmp,
    kt.UnaryOp: KernelWriter.op_unary,
    kt.WhereOp: KernelWriter.op_where,
    kt.RandOp: KernelWriter.op_rand,
    kt.CastOp: KernelWriter.op_cast,
    kt.ExpandDimsOp: KernelWriter.op_expand_dims,
    kt.BroadcastOp: KernelWriter.op_broadcast,
    kt.ReshapeOp: KernelWriter.op_reshape,
    kt.TransOp: KernelWriter.op_trans,
    kt.ReduceOp: KernelWriter.op_reduce,
    kt.ArgReduceOp: KernelWriter.op_argreduce,
    kt.ScanOp: KernelWriter.op_scan,
    kt.TopKOp: KernelWriter.op_topk,
    kt.GatherOp: KernelWriter.op_gather,
    kt.DotOp: KernelWriter.op_dot,
    kt.LoadOp: KernelWriter.op_load,
    kt.StoreOp: KernelWriter.op_store,
    kt.AtomicOp: KernelWriter.op_atomic,
    st.ForOp: KernelWriter.op_for,
    st.IfOp: KernelWriter.op_if,
}
