"""The Gluon backend: explicit-level KIR for sm_90 as a `triton.experimental.gluon` kernel.

Written against triton 3.6.0 exactly (Gluon's API moves between releases). The emitted module
holds one `@gluon.jit` function per warp role, then the kernel. Every generated line records
the KIR op it comes from (`Lowered.line_spans`), so a compile error in emitted code points at
the KIR source.

How KIR maps onto Gluon:

| KIR | Gluon |
| --- | --- |
| `smem(bf16[S, BM, BK], swizzle = 128)` | `gl.allocate_shared_memory(gl.bfloat16, [S, BM, BK], NVMMASharedLayout(128, 16))` |
| `mbarrier(S, count = c)` | an `[S, 1]` int64 buffer with `MBarrierLayout`, each entry `mbarrier.init(..., count=c)` |
| `expect` / `arrive` / `wait(parity)` | `mbarrier.expect` / `mbarrier.arrive` / `mbarrier.wait(bar, parity)` |
| `tma.load(a[box], as[s], signal = full[s])` | `tma.async_copy_global_to_shared(a_desc, coords, full.index(s), as_.index(s))`; `a_desc` is a host-side `TensorDescriptor` over `a` with the box as block shape and the destination's shared layout |
| `tma.load(q[b, h, r0 : r0 + BM, 0 : HD], ...)` (rank > 2) | the same, with `q_desc` over q's rows (its leading dimensions merged, `lowering/runtime_gluon.py`'s `row_view`) and coordinates `[(b * H + h) * S + r0, 0]` |
| `tma.store`, `tma.store_wait` | `tma.async_copy_shared_to_global`, `tma.store_wait` |
| `max(s, axis = 1)`, `sum`, `min`, `prod` | `gl.reduce(s, 1, kir_max)` (a combine function propagating NaN), `gl.sum(p, axis=1)`, `gl.reduce(..., kir_min)`, `gl.reduce(..., kir_prod)`; bf16/f16/fp8 reduce in f32 and round once |
| `wgmma(A, B, acc)` / `wgmma.wait(n)` | `warpgroup_mma(A, B, acc, is_async=True)` / `warpgroup_mma_wait(n, deps=(pending accumulators,))` |
| `fence.async()` | `fence_async_shared()` |
| roles | `gl.warp_specialize` partitions (below) |
| `role_rank()` | the partition function's `RANK: gl.constexpr` argument |
| `store(c[block], v)` | `gl.store` of pointers in a `BlockedLayout`, `v` converted to it (`gl.convert_layout`) |

Layouts: a wgmma accumulator (and every tile that flows into or out of it through loops and
elementwise ops) gets `NVMMADistributedLayout(version=[3, 0], warps_per_cta, instr_shape=[16,
n, 256 / bits])`; other tiles get a `BlockedLayout` of 16-byte vectors; global stores and loads
address memory through a blocked layout.

Roles and `gl.warp_specialize`. KIR runs a role body once per listed unit (warp or warpgroup),
each unit its own instance with its own arrivals. Gluon's `warp_specialize` has one default
partition (running on the kernel's `num_warps` warps, which Triton requires to be a multiple
of four) and any number of worker partitions, each with its own warp count and register
budget. So every *unit* of every role becomes one partition running the role's function with
its `RANK` as a constexpr: for `examples/gemm_hopper_ws.kir`,

    default partition: mma, RANK 0   (4 warps; Triton leaves it 232 registers)
    worker 0:          load, RANK 0  (4 warps, 40 registers)
    worker 1:          mma, RANK 1   (4 warps, 232 registers)

The two consumer warpgroups stay two instances with an M = BM / 2 accumulator each (not one
8-warp partition with M = BM), so `empty` keeps its count of 2: Gluon's `mbarrier.arrive` is one
arrival per partition (one thread after the partition's own barrier), exactly KIR's one
arrival per unit; likewise `expect` and `tma.load` are issued once per partition. The
warpgroup unit with the largest register budget becomes the default partition (Triton gives
the default partition the registers the workers leave, computed from `maxnreg`; the launch's
`num_warps` is its warp count). When no role has warpgroup units (all `warps(...)`), an idle
four-warp default partition is added and every unit is a worker. Physical warp ids differ
from KIR's (`warpgroups(1, 2)` become warps 0-3 and 8-11), which no KIR semantics depends on.
Top-level statements before the last role run in the parent region (on the default
partition's warps, before the workers start); statements after the last role run there once
every partition has joined.

Gathers: a load from a global tensor through index tiles (`load(x[b, rows[:, None],
cols[None, :]])`, as an im2col tile) adds each index times its stride to the base pointer, the
index tiles broadcasting in the load's layout (they join its layout class). A tile that
`expand_dims` (`v[:, None]`) widens takes `gl.SliceLayout(axis, L)` of the layout L of what it
widens into, so the expansion moves nothing; if it already has another layout (the layouts pass
wrote one, or it widens into two layouts), it is converted first.

Reductions: reducing axis a of a tile in layout L gives a tile in `gl.SliceLayout(a, L)`, so the
class of a reduction's result takes that slice (the first reduction's, when several feed one
class), ahead of the expansion rule above: the online softmax's row maximum `m_new` is made in
`SliceLayout(1, L_s)` of the scores' wgmma layout and `m_new[:, None]` widens back into it for
free; widening it against an accumulator of another wgmma shape (`acc * alpha[:, None]`)
converts between the two row slices, which hold the same rows in the same threads (Triton
emits no data movement for it). A 1-D tile reduces to a scalar.

What the backend refuses (`lower.unsupported`, at the op): scans, arg-reductions, reshapes and
explicit broadcasts of tiles, `dot` (write `wgmma`), atomics, scattered stores, gathers from
shared memory, the `gather` op (`gl.gather` gives its result
the index's layout, which the layout pass does not model yet), `cp.async` (sm_80), a CTA `barrier()` inside a role (a partition can only
synchronize its own warps), a wgmma in a role of fewer than four warps, TMA boxes that do not
slice exactly the last two dimensions (the others indexed by scalars) or of a tensor whose
declared strides keep its leading dimensions from merging into rows, and tiles whose shape
depends on a shape symbol.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import (
    GlobalType,
    Layout,
    MBarrierType,
    SmemType,
    TileType,
    dtype_of,
    shape_of,
)
from kir.dtypes import DTYPES
from kir.program import Program, span_of
from lowering.emit.base import (
    ArgInfo,
    Emitter,
    Lowered,
    SourceWriter,
    level_refusal,
    register,
)
from lowering.emit.names import PYTHON_RESERVED, identifier
from lowering.emit.triton import SIGNATURE_DTYPE
from lowering.passes.layouts import MAKERS as LAYOUT_MAKERS
from lowering.passes.layouts import LayoutClasses, LayoutError, blocked_layout, mma_layout

TARGET = "sm_90"

GL_DTYPE = {
    "i1": "gl.int1",
    "i8": "gl.int8",
    "i16": "gl.int16",
    "i32": "gl.int32",
    "i64": "gl.int64",
    "u8": "gl.uint8",
    "u16": "gl.uint16",
    "u32": "gl.uint32",
    "u64": "gl.uint64",
    "f16": "gl.float16",
    "bf16": "gl.bfloat16",
    "f32": "gl.float32",
    "f64": "gl.float64",
    "f8e4m3": "gl.float8e4nv",
    "f8e5m2": "gl.float8e5",
}

# Triton's signature names of element types (`*bf16` is a pointer to bf16): one table for
# both Python backends.
SIG_DTYPE = SIGNATURE_DTYPE

MODULE_NAMES = frozenset(
    {
        "gluon",
        "gl",
        "tl",
        "tma",
        "mbarrier",
        "warpgroup_mma",
        "warpgroup_mma_wait",
        "fence_async_shared",
        "kir_div",
        "kir_rem",
        "kir_max",
        "kir_min",
        "kir_prod",
        "RANK",
    }
)
RESERVED = PYTHON_RESERVED | MODULE_NAMES | {"range", "int", "float", "abs", "min", "max", "print", "len"}

UNARY_CALLS = {
    "abs": "gl.abs",
    "exp": "gl.exp",
    "exp2": "gl.exp2",
    "log": "gl.log",
    "log2": "gl.log2",
    "sqrt": "gl.sqrt_rn",
    "rsqrt": "gl.rsqrt",
    "erf": "gl.erf",
    "sin": "gl.sin",
    "cos": "gl.cos",
    "floor": "gl.floor",
    "ceil": "gl.ceil",
}
BINARY_OPS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "rem": "%",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "shr": ">>",
}
CMP_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}

# Python's operator precedence, loosest first (comparisons chain in Python: always parenthesized).
CMP, OR, XOR, AND, SHIFT, SUM, PRODUCT, UNARY, ATOM = range(9)
PREC = {
    "|": OR,
    "^": XOR,
    "&": AND,
    "<<": SHIFT,
    ">>": SHIFT,
    "+": SUM,
    "-": SUM,
    "*": PRODUCT,
    "/": PRODUCT,
    "//": PRODUCT,
    "%": PRODUCT,
}

# Ops with no effect whose value may be written inline at its single use.
_PURE = (
    tl.ArangeOp,
    tl.ProgramIdOp,
    tl.NumProgramsOp,
    tl.SymValueOp,
    tl.ConstOp,
    tl.BinaryOp,
    tl.CompareOp,
    tl.UnaryOp,
    tl.WhereOp,
    tl.CastOp,
    tl.ExpandDimsOp,
    tl.ReduceOp,
    ex.SizeofOp,
    st.RoleRankOp,
)

SUPPORTED = (
    st.KernelOp,
    st.ForOp,
    st.IfOp,
    st.YieldOp,
    st.RoleOp,
    st.RoleRankOp,
    tl.ProgramIdOp,
    tl.NumProgramsOp,
    tl.SymValueOp,
    tl.ConstOp,
    tl.BinaryOp,
    tl.CompareOp,
    tl.UnaryOp,
    tl.WhereOp,
    tl.CastOp,
    tl.ExpandDimsOp,
    tl.ReduceOp,
    tl.ZerosOp,
    tl.FullOp,
    tl.ArangeOp,
    tl.LoadOp,
    tl.StoreOp,
    ex.SmemAllocOp,
    ex.MBarrierAllocOp,
    ex.ExpectOp,
    ex.ArriveOp,
    ex.WaitOp,
    ex.TmaLoadOp,
    ex.TmaStoreOp,
    ex.TmaStoreWaitOp,
    ex.FenceAsyncOp,
    ex.CtaBarrierOp,
    ex.WgmmaOp,
    ex.WgmmaWaitOp,
    ex.SizeofOp,
    ex.ConvertLayoutOp,
)


def _unsupported(op: Operation, message: str, hint: str = "") -> Diagnostic:
    return Diagnostic("lower.unsupported", "error", span_of(op), message, hint)


def _refusals(program: Program) -> list[Diagnostic]:
    """Ops and constructs the backend cannot express, each at its op (independent of params)."""
    out: list[Diagnostic] = []
    for op in program.kernel.walk():
        if not isinstance(op, SUPPORTED):
            hint = {
                "kir.dot": "write the product with wgmma on shared views at the explicit level",
                "kir.cp_async": "cp.async is sm_80: use tma.load completing on an mbarrier",
                "kir.gather": "lower this program with the cuda backend, which lowers gather at both levels "
                "(or keep the gather in a tile-level kernel for the triton backend's tl.gather)",
            }.get(op.name, "rewrite it with the supported ops, or lower this program with another backend")
            out.append(_unsupported(op, f"the gluon backend cannot lower `{op.name}`", hint))
            continue
        if isinstance(op, tl.BinaryOp) and op.fn.data == "pow":
            out.append(_unsupported(op, "the gluon backend has no `pow`", "write exp2(b * log2(a)) for positive a"))
        if isinstance(op, tl.UnaryOp) and op.fn.data == "tanh":
            out.append(_unsupported(op, "the gluon backend has no `tanh`", "write it with exp"))
        if isinstance(op, tl.LoadOp | tl.StoreOp) and any(isinstance(v.type, TileType) for v in op.indices):
            if isinstance(op, tl.StoreOp) or not isinstance(op.mem.type, GlobalType):
                out.append(
                    _unsupported(
                        op,
                        "the gluon backend gathers by loads from global tensors only (no scattered stores, "
                        "no gathers from shared memory)",
                        "index with slices",
                    )
                )

        if isinstance(op, tl.LoadOp | tl.StoreOp) and isinstance(op.mem.type, SmemType):
            if not isinstance(op.res.type if isinstance(op, tl.LoadOp) else op.value.type, TileType):
                out.append(_unsupported(op, "the gluon backend moves tiles, not scalars, through shared memory"))
        if isinstance(op, ex.CtaBarrierOp) and st.RoleOp.enclosing(op) is not None:
            out.append(
                _unsupported(
                    op,
                    "a CTA barrier inside a role: a gluon partition can only synchronize its own warps",
                    "synchronize roles with mbarriers (arrive/wait)",
                )
            )
        if isinstance(op, ex.WgmmaOp):
            role = st.RoleOp.enclosing(op)
            if role is not None and role.warps_per_unit < 4:
                out.append(
                    _unsupported(
                        op,
                        f"wgmma in role `{role.name_text}`, whose units are single warps: wgmma needs a warpgroup",
                        "declare the role with warpgroups(...)",
                    )
                )
        if isinstance(op, ex.TmaLoadOp | ex.TmaStoreOp):
            glob = op.src if isinstance(op, ex.TmaLoadOp) else op.dst
            glob_access = op.src_access.data if isinstance(op, ex.TmaLoadOp) else op.dst_access.data
            dims = glob_access.dims
            if len(dims) < 2 or any(d is None for d in dims[-2:]) or any(d is not None for d in dims[:-2]):
                out.append(
                    _unsupported(
                        op,
                        "the gluon backend takes TMA boxes that slice the last two dimensions "
                        "and index every other one with a scalar",
                        "write the box as a[r0 : r0 + BM, c0 : c0 + BN], or x[b, h, r0 : r0 + BM, c0 : c0 + BN]",
                    )
                )
            elif not _rows_merge(glob.type):
                out.append(
                    _unsupported(
                        op,
                        f"a TMA box of the {len(dims)}-D tensor `{glob.type}`, whose strides do not let "
                        "its leading dimensions merge into rows",
                        "the gluon backend addresses an N-D tensor through a 2-D descriptor over its rows: "
                        "declare it row-major (no strides), or contiguous in all but the last dimension",
                    )
                )
    return out


def _row_major_strides(t: GlobalType) -> list[sx.SymExpr]:
    dims = shape_of(t)
    strides: list[sx.SymExpr] = []
    for i in range(len(dims)):
        stride: sx.SymExpr = sx.Int(1)
        for d in dims[i + 1 :]:
            stride = sx.Bin("*", stride, d)
        strides.append(sx.fold(stride))
    return strides


def _rows_merge(t: GlobalType) -> bool:
    """Whether the dimensions of `t` before its last merge into one of rows: the stride of each
    leading dimension is the next one's stride times its extent (always so when row-major).
    Declared strides are compared as polynomials, at a few points (`M * N` is `N * M`); the
    launch checks the strides of the tensor it is given (lowering/runtime_gluon.py's row_view),
    so this is the early, located form of that check."""
    if len(t.shape.data) <= 2 or not t.strides.data:
        return True
    dims = shape_of(t)
    strides = [s.data for s in t.strides.data]
    pairs = [(strides[i], sx.Bin("*", strides[i + 1], dims[i + 1])) for i in range(len(dims) - 2)]
    names = sorted(set().union(*(a.symbols() | b.symbols() for a, b in pairs)))
    points = [{n: 3 + (7 * k + 5) * (j + 1) % 97 for j, n in enumerate(names)} for k in range(4)]
    return all(sx.same(a, b) or all(a.evaluate(e) == b.evaluate(e) for e in points) for a, b in pairs)


# ---- values --------------------------------------------------------------------------------


@dataclass
class _Val:
    """How a KIR value reads in the generated code.

    kind: "static" (an integer the emitter knows: `static` holds it), "constexpr" (known when
    Gluon compiles: it depends on RANK), "scalar", "tile", "wgmma" (an accumulator still in
    flight), "smem", "mbar", "global"."""

    text: str
    kind: str
    static: int | None = None
    prec: int = ATOM
    fn: _Fn | None = None  # the function whose scope binds `text` (None: a literal or an inline expression)

    def operand(self, parent: int = ATOM, right: bool = False) -> str:
        """The text as an operand of an operator of precedence `parent` (Python's rules;
        comparisons, which chain in Python, are always parenthesized)."""
        if self.prec == CMP or self.prec < parent or (right and self.prec == parent):
            return f"({self.text})"
        return self.text


@dataclass
class _Fn:
    """One emitted function: the kernel or the partition function of a role."""

    name: str
    warps: int
    role: st.RoleOp | None = None
    lines: list[tuple[int, str, Operation | None]] = field(default_factory=list)
    depth: int = 1
    holders: dict[str, SSAValue | None] = field(default_factory=dict)  # python name -> the KIR value bound to it
    needs: dict[str, None] = field(default_factory=dict)  # outer names this role reads (its parameters)
    pending: list[SSAValue] = field(default_factory=list)  # wgmma results a wgmma.wait has not retired
    tokens: set[SSAValue] = field(default_factory=set)  # ... and those still Gluon accumulator tokens
    kinds: dict[str, str] = field(default_factory=dict)  # python name -> the _Val kind bound to it

    def line(self, text: str, op: Operation | None) -> None:
        self.lines.append((self.depth, text, op))


@dataclass(frozen=True)
class _Partition:
    role: st.RoleOp | None  # None: an idle default partition
    rank: int
    warps: int
    regs: int


@dataclass(frozen=True)
class _Desc:
    name: str
    arg: str
    dtype: str
    box: tuple[int, ...]
    swizzle: int


def _static(v: int) -> _Val:
    return _Val(str(v), "static", v, prec=ATOM if v >= 0 else UNARY)


def _wrap(value: int, dtype: str) -> int:
    d = DTYPES[dtype]
    if d.kind == "bool":
        return int(bool(value))
    bits = d.bits
    value &= (1 << bits) - 1
    if d.kind == "int" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _rows_of_vectors(buf: SSAValue) -> bool:
    """A 2-D shared buffer without a swizzle that only loads and stores use, each through a
    point index on its first dimension: one 1-D buffer per row."""
    t = buf.type
    if not isinstance(t, SmemType) or len(t.shape.data) != 2 or t.swizzle.data:
        return False
    uses = [u.operation for u in buf.uses]
    return bool(uses) and all(
        isinstance(u, tl.LoadOp | tl.StoreOp | ex.SizeofOp) and u.access.data.dims[0] is None for u in uses
    )


def _fold(fn: str, a: int, b: int, dtype: str) -> int:
    """KIR integer arithmetic on constants (C division, wrapping; see kir/interp/values.py)."""
    bits = DTYPES[dtype].bits
    if fn == "div":
        r = -1 if b == 0 else sx.c_div(a, b)
    elif fn == "rem":
        r = a if b == 0 else sx.c_rem(a, b)
    elif fn == "shl":
        r = 0 if b >= bits or b < 0 else a << b
    elif fn == "shr":
        r = (-1 if a < 0 else 0) if b >= bits or b < 0 else a >> b
    else:
        r = {
            "add": a + b,
            "sub": a - b,
            "mul": a * b,
            "and": a & b,
            "or": a | b,
            "xor": a ^ b,
            "maximum": max(a, b),
            "minimum": min(a, b),
        }[fn]
    return _wrap(r, dtype)


# ---- layouts -------------------------------------------------------------------------------
# The choice of layouts is lowering.passes.layouts's (which can also write it into the IR);
# this backend only spells them.

_mma_layout = mma_layout  # the name tests/lowering/test_gluon.py knows it by


def _layout_text(layout: Layout) -> str:
    p = [list(x) for x in layout.params]
    if layout.kind == "blocked":
        return f"gl.BlockedLayout({p[0]}, {p[1]}, {p[2]}, {p[3]})"
    return f"gl.NVMMADistributedLayout(version={p[0]}, warps_per_cta={p[1]}, instr_shape={p[2]})"


class _Classes(LayoutClasses):
    """The layout classes, plus what gathers, expansions and reductions need: a gather's index
    tiles join its result's class (they broadcast in its layout), and the `expand_dims` and
    `reduce` ops are kept, so a widened tile can take the slice of the layout it widens into,
    and a reduced one the slice that Gluon's reduction gives it."""

    def __init__(self, kernel: st.KernelOp):
        self.expansions: list[tl.ExpandDimsOp] = []
        self.reductions: list[tl.ReduceOp] = []
        self.members: list[SSAValue] = []
        super().__init__(kernel)

    def _visit(self, op: Operation) -> None:
        super()._visit(op)
        self.members += [r for r in op.results if isinstance(r.type, TileType)]
        if isinstance(op, tl.LoadOp) and isinstance(op.mem.type, GlobalType):
            for v in op.indices:
                self.union(op.res, v)  # scalars and other ranks are left alone
        elif isinstance(op, tl.ExpandDimsOp):
            self.expansions.append(op)
        elif isinstance(op, tl.ReduceOp) and isinstance(op.res.type, TileType):
            self.reductions.append(op)


# ---- the emitter ---------------------------------------------------------------------------


class GluonEmitter(Emitter):
    name = "gluon"
    levels = ("explicit",)

    def accepts(self, program: Program) -> list[Diagnostic]:
        refusals = level_refusal(program, self.name, self.levels)
        if refusals:
            return refusals
        target = program.kernel.target.data
        if target != TARGET:
            refusals.append(
                Diagnostic(
                    "lower.target",
                    "error",
                    program.clause_spans.get("target", program.span()),
                    f"the gluon backend targets {TARGET} (Hopper); this kernel targets {target}",
                    f"write `target {TARGET}`, or lower it with the backend of its target",
                )
            )
        return refusals + _refusals(program)

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:
        return _Lowering(program, params).run()


class _Lowering:
    def __init__(self, program: Program, params: dict[str, int]):
        self.program = program
        self.kernel = program.kernel
        self.params = dict(params)
        self.symbols = self.kernel.shape_symbols
        self.vals: dict[SSAValue, _Val] = {}
        self.layouts = _Classes(self.kernel)
        self.layout_names: dict[str, str] = {}  # layout constructor text -> module constant
        self.layout_order: list[tuple[str, str]] = []
        self.inlined: set[Operation] = set()
        self.class_layouts: dict[tuple[SSAValue, int], str] = {}
        self.descs: dict[tuple, _Desc] = {}
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
                _unsupported(
                    op or self.kernel,
                    f"`{expr}` depends on the shape symbol `{err.args[0]}`; gluon needs tile shapes known at compile time",
                    "size tiles with parameters (BM, BN, ...) and let the grid cover the shape symbols",
                )
            ) from None

    def shape(self, t, op: Operation | None = None) -> list[int]:
        return [self.static(d, op) for d in shape_of(t)]

    def sym_text(self, expr: sx.SymExpr, fn: _Fn) -> _Val:
        """A static expression over parameters and shape symbols, as run-time code."""
        expr = sx.fold(expr)
        if not (expr.symbols() - set(self.params)):
            return _Val(str(expr.evaluate(self.params)), "static", expr.evaluate(self.params))
        if isinstance(expr, sx.Sym):
            return self.ref_symbol(expr.name, fn)
        if isinstance(expr, sx.Bin):
            a, b = self.sym_text(expr.lhs, fn), self.sym_text(expr.rhs, fn)
            if expr.op == "cdiv":
                return _Val(f"gl.cdiv({a.text}, {b.text})", "scalar")
            if expr.op in ("min", "max"):
                return _Val(f"gl.{expr.op}imum({a.text}, {b.text})", "scalar")
            op = "//" if expr.op == "/" else expr.op
            return _Val(f"{a.operand(PREC[op])} {op} {b.operand(PREC[op], True)}", "scalar", prec=PREC[op])
        return _Val(str(expr), "static", expr.as_int())

    def ref_symbol(self, name: str, fn: _Fn) -> _Val:
        if name in self.params:
            return _Val(str(self.params[name]), "static", self.params[name])
        text = identifier(name, RESERVED)
        if fn.role is not None:
            fn.needs[text] = None
        return _Val(text, "scalar")

    # -- names -------------------------------------------------------------------------------

    def ref(self, v: SSAValue, fn: _Fn) -> _Val:
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
            anc = user
            while anc is not None and anc.parent_block() is not block:
                anc = anc.parent_op()
            if anc is None or ops.index(anc) > pos:
                return False
            if anc is at and user is not at and not isinstance(at, st.IfOp):
                return False  # read inside a loop's body, where its carried names are bound
        return True

    def bind_name(self, fn: _Fn, v: SSAValue | None, hint: str | None, at: Operation | None) -> str:
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

    def define(self, fn: _Fn, v: SSAValue, val: _Val, op: Operation, hint: str | None = None) -> None:
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
        self.vals[v] = _Val(name, val.kind, val.static, ATOM, fn)

    def layout_of(self, v: SSAValue, fn: _Fn, op: Operation) -> str:
        """The layout constant of a tile: one per layout class, decided by the first member
        asked (its shape and dtype) in the function's warps."""
        root = self.layouts.find(v)
        if isinstance(v.type, TileType) and v.type.layout.data:
            return self.layout_const(v.type.layout.data[0].data)
        key = (root, fn.warps)
        if key not in self.class_layouts:
            self.class_layouts[key] = self._class_layout(v, root, fn, op)
        return self.class_layouts[key]

    def _class_layout(self, v: SSAValue, root: SSAValue, fn: _Fn, op: Operation) -> str:
        if root not in self.layouts.fixed:
            # A reduction's result comes in the slice of its operand's layout along the reduced
            # axis: the class takes the first reduction's, so that it moves nothing (the
            # online softmax's row maximum and sum, then widened back against the tile).
            for r in self.layouts.reductions:
                if self.layouts.find(r.res) is root:
                    return self.slice_const(r.axis.data, self.layout_of(r.operand, fn, r))
            # a tile widened by expand_dims takes the slice of what it widens into (one target)
            slices = {
                self.slice_const(e.axis.data, self.layout_of(e.res, fn, e))
                for e in self.layouts.expansions
                if self.layouts.find(e.operand) is root
            }
            if len(slices) == 1:
                return slices.pop()
        v = self._widest(v, root, op)
        try:
            layout = self.layouts.choose(v, self.shape(v.type, op), fn.warps)
        except LayoutError as err:
            raise KirError(_unsupported(op, err.message, err.hint)) from None
        return self.layout_const(layout)

    def _widest(self, v: SSAValue, root: SSAValue, op: Operation) -> SSAValue:
        """The member of `v`'s class with the most elements (`v` unless one has strictly more;
        a loaded tile first, whose dtype sizes the vectors): a class joined by broadcasting ([BK,
        1] index tiles and the [BK, BN] gather they address) gets the layout of its full shape."""

        def size(m: SSAValue) -> int:
            try:
                return math.prod(self.static(d) for d in shape_of(m.type))
            except KirError:
                return 0

        rank = len(shape_of(v.type))
        wider = [
            m
            for m in self.layouts.members
            if len(shape_of(m.type)) == rank and self.layouts.find(m) is root and size(m) > size(v)
        ]
        if not wider:
            return v
        return max(wider, key=lambda m: (size(m), isinstance(m.owner, tl.LoadOp)))

    def module_const(self, text: str, name: str | None = None, numbered: str | None = None) -> str:
        """The module constant holding the layout `text`, defined once: named `name`, or
        `<numbered>_<n>` with n counting the constants of that prefix."""
        known = self.layout_names.get(text)
        if known is not None:
            return known
        if name is None:
            name = f"{numbered}_{sum(1 for n in self.layout_names.values() if n.startswith(str(numbered)))}"
        self.layout_names[text] = name
        self.layout_order.append((name, text))
        self.module_names.add(name)
        return name

    def slice_const(self, axis: int, parent: str) -> str:
        """The module constant of `gl.SliceLayout(axis, parent)`."""
        return self.module_const(f"gl.SliceLayout({axis}, {parent})", numbered="slice_layout")

    def layout_const(self, layout: Layout) -> str:
        kind = "mma" if layout.kind == "mma" else "blocked"
        return self.module_const(_layout_text(layout), numbered=f"{kind}_layout")

    def smem_layout(self, buf: SSAValue) -> str:
        """A 1-D buffer, or a ring of rows that lanes read and write (`_rows_of_vectors`: the
        layout of one row; an NVMMA layout has two dimensions, and a 1-D view of it cannot be
        sliced), is swizzled for lanes; any other is an NVMMA layout for TMA and wgmma."""
        t = buf.type
        bits = DTYPES[t.dtype.data].bits
        if len(t.shape.data) < 2 or _rows_of_vectors(buf):
            text = "gl.SwizzledSharedLayout(1, 1, 1, [0])"
            base = "shared_layout"
        else:
            text = f"gl.NVMMASharedLayout({t.swizzle.data}, {bits}, 2)"
            base = f"nvmma_{t.swizzle.data}b_{bits}bit"
        return self.module_const(text, name=base)

    # -- the module --------------------------------------------------------------------------

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

        kernel_fn = _Fn(self.entry, num_warps)
        self.kparams = []
        for name, _arg in self.kernel.args:
            self.kparams += [d.name for d in self.descs.values() if d.arg == name]
            if name in self.pointer_args:
                self.kparams.append(self.arg_names[name])
        self.kparams += [identifier(s, RESERVED) for s in self.symbols]
        for name in self.kparams:
            kernel_fn.holders[name] = None
        for name, arg in self.kernel.args:
            self.vals[arg] = _Val(self.arg_names[name], "global", fn=kernel_fn)

        role_names = {role: self._unique_module_name(f"{self.entry}_{role.name_text}") for role in roles}
        idle_name = (
            self._unique_module_name(f"{self.entry}_idle")
            if self.partitions and self.partitions[0].role is None
            else None
        )
        for op in pre:
            self.emit_op(op, kernel_fn)

        role_fns: list[_Fn] = []
        fn_of_role: dict[st.RoleOp, _Fn] = {}
        for role in roles:
            rfn = _Fn(role_names[role], role.warps_per_unit, role)
            for name in kernel_fn.holders:
                rfn.holders[name] = None  # a role may not rebind the kernel's names it reads
            self.emit_block(role.body.block, rfn)
            tiles = [n for n in rfn.needs if kernel_fn.kinds.get(n) == "tile"]
            if tiles:
                self.errors.append(
                    _unsupported(
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

    def _plan_partitions(self, roles: list[st.RoleOp]) -> list[_Partition]:
        """One partition per role unit; the first is the default partition. It must have a
        multiple of four warps (Triton's rule for warp-specialized kernels): the warpgroup unit
        with the largest register budget, since Triton hands the default partition whatever
        registers the workers leave; without a warpgroup unit, an idle four-warp default."""
        units = [
            _Partition(role, rank, role.warps_per_unit, role.regs.data)
            for role in roles
            for rank in range(len(role.id_list))
        ]
        if not units:
            return []
        eligible = [u for u in units if u.warps % 4 == 0]
        if not eligible:
            return [_Partition(None, 0, 4, 0), *units]
        default = max(eligible, key=lambda u: (u.regs, -units.index(u)))
        return [default, *(u for u in units if u is not default)]

    def _unique_module_name(self, base: str) -> str:
        name = identifier(base, RESERVED)
        i = 0
        while name in self.module_names:
            i += 1
            name = f"{base}_{i}"
        self.module_names.add(name)
        return name

    @staticmethod
    def _default_regs(total_warps: int) -> int:
        return max(24, min(256, (65536 // (32 * max(total_warps, 1))) // 8 * 8))

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
            if isinstance(op, _PURE) or (
                isinstance(op, LAYOUT_MAKERS) and isinstance(uses[0].operation, ex.ConvertLayoutOp)
            ):
                self.inlined.add(op)

    def _plan_args(self) -> None:
        """Which kernel arguments travel as pointers and which as TMA descriptors."""
        used: set[str] = set()
        for name, _arg in self.kernel.args:
            self.arg_names[name] = identifier(name, RESERVED)
            self.module_names.add(self.arg_names[name])
        by_value = {arg: name for name, arg in self.kernel.args}
        for op in self.kernel.walk():
            if isinstance(op, ex.TmaLoadOp | ex.TmaStoreOp):
                glob = op.src if isinstance(op, ex.TmaLoadOp) else op.dst
                smem = op.dst if isinstance(op, ex.TmaLoadOp) else op.src
                access = op.src_access.data if isinstance(op, ex.TmaLoadOp) else op.dst_access.data
                arg = by_value[glob]
                box = tuple(self.static(d, op) for d in access.dims if d is not None)
                key = (arg, box, smem.type.swizzle.data)
                if key not in self.descs:
                    self.descs[key] = _Desc("", arg, dtype_of(glob.type), box, smem.type.swizzle.data)
                used.add(arg)
            elif isinstance(op, tl.LoadOp | tl.StoreOp) and isinstance(op.mem.type, GlobalType):
                self.pointer_args.add(by_value[op.mem])
        for name, _arg in self.kernel.args:
            if name not in used:
                self.pointer_args.add(name)
        per_arg: dict[str, int] = {}
        for d in self.descs.values():
            per_arg[d.arg] = per_arg.get(d.arg, 0) + 1
        seen: dict[str, int] = {}
        for key, d in list(self.descs.items()):
            base = f"{self.arg_names[d.arg]}_desc"
            if per_arg[d.arg] > 1:
                base += str(seen.get(d.arg, 0))
                seen[d.arg] = seen.get(d.arg, 0) + 1
            name = self._unique_module_name(base)
            self.descs[key] = _Desc(name, d.arg, d.dtype, d.box, d.swizzle)

    def _assemble(self, kernel_fn: _Fn, role_fns: list[_Fn], idle_name: str | None, num_warps: int) -> Lowered:
        w = SourceWriter()
        kop = self.kernel
        params_text = ", ".join(f"{k} = {v}" for k, v in self.params.items()) or "none"
        w.line(f"# Generated by KIR's gluon backend (triton 3.6) from kernel `{kop.kernel_name}`; do not edit.", kop)
        w.line(f"# Parameters: {params_text}.")
        if self.partitions:
            parts = []
            for i, part in enumerate(self.partitions):
                what = "default" if i == 0 else f"worker {i - 1}"
                if part.role is None:
                    parts.append(f"{what}: idle (4 warps; a default partition needs a warpgroup)")
                    continue
                regs = f"{part.regs} registers" if part.regs else "registers unset"
                parts.append(f"{what}: {part.role.name_text} rank {part.rank} ({part.warps} warps, {regs})")
            w.line("# Partitions: " + "; ".join(parts) + ".")
        if self.combines - {"kir_prod"} or self.nan_minmax:
            w.line("import triton.language as tl")
        w.line("from triton.experimental import gluon")
        w.line("from triton.experimental.gluon import language as gl")
        w.line(
            "from triton.experimental.gluon.language.nvidia.hopper import "
            "fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait"
        )
        w.line()
        for name, text in self.layout_order:
            w.line(f"{name} = gl.constexpr({text})")
        if self.uses_helpers:
            w.line()
            w.line()
            w.line("@gluon.constexpr_function")
            w.line("def kir_div(a, b):")
            w.line("    # KIR's integer `/` truncates toward zero (C), Python's `//` floors.")
            w.line("    q = abs(a) // abs(b) if b else -1")
            w.line("    return q if b == 0 or (a >= 0) == (b > 0) else -q")
            w.line()
            w.line()
            w.line("@gluon.constexpr_function")
            w.line("def kir_rem(a, b):")
            w.line("    return a - b * kir_div(a, b) if b else a")
        for name in sorted(self.combines):
            w.line()
            w.line()
            w.line("@gluon.jit")
            w.line(f"def {name}(a, b):")
            if name == "kir_prod":
                w.line("    return a * b")
                continue
            w.line(f"    # KIR's {name[4:]}: a NaN in either operand gives NaN")
            w.line(f"    return gl.{name[4:]}imum(a, b, propagate_nan=tl.PropagateNan.ALL)")
        if idle_name is not None:
            self._write_fn(w, _Fn(idle_name, 4), [], None)
        for rfn in role_fns:
            params = [*rfn.needs, "RANK: gl.constexpr"]
            self._write_fn(w, rfn, params, rfn.role)
        self._write_fn(w, kernel_fn, self.kparams, kop)

        launch = []
        for name, arg in kop.args:
            t = arg.type
            for d in self.descs.values():
                if d.arg == name:
                    launch.append(
                        {
                            "kind": "desc",
                            "name": d.name,
                            "arg": name,
                            "dtype": d.dtype,
                            "box": list(d.box),
                            "rank": len(shape_of(t)),  # > 2: a descriptor over the rows (runtime_gluon)
                            "swizzle": d.swizzle,
                            "bits": DTYPES[d.dtype].bits,
                        }
                    )
            if name in self.pointer_args:
                launch.append(
                    {
                        "kind": "ptr",
                        "name": self.arg_names[name],
                        "arg": name,
                        "dtype": t.dtype.data,
                        "align": t.align.data,
                    }
                )
        for s in self.symbols:
            launch.append({"kind": "symbol", "name": identifier(s, RESERVED), "arg": s, "dtype": "i32"})

        partitions = [
            {
                "role": p.role.name_text if p.role else None,
                "rank": p.rank,
                "warps": p.warps,
                "regs": p.regs,
                "default": i == 0,
            }
            for i, p in enumerate(self.partitions)
        ]
        total = sum(p["warps"] for p in partitions) if partitions else num_warps
        options = {
            "target": TARGET,
            "num_warps": num_warps,
            "total_warps": total,
            "partitions": partitions,
            "launch": launch,
            "default_regs": self._leftover_regs(partitions, num_warps) if partitions else None,
        }
        args = [
            ArgInfo(name, arg.type.dtype.data, tuple(shape_of(arg.type)), arg.type.is_out) for name, arg in kop.args
        ]
        return Lowered(
            backend="gluon",
            source=w.text(),
            entry=self.entry,
            program=self.program,
            params=self.params,
            args=args,
            shape_symbols=list(self.symbols),
            grid=tuple(d.data for d in kop.grid.data),
            num_warps=num_warps,
            options=options,
            line_spans=dict(w.spans),
        )

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

    def _write_fn(self, w: SourceWriter, fn: _Fn, params: list[str], op: Operation | None) -> None:
        w.line()
        w.line()
        w.line("@gluon.jit", op)
        w.line(f"def {fn.name}({', '.join(params)}):", op)
        if not fn.lines:
            w.line("    pass", op)
        for depth, text, line_op in fn.lines:
            w.depth = depth
            w.line(text, line_op)
        w.depth = 0

    # -- statements --------------------------------------------------------------------------

    def emit_block(self, block: Block, fn: _Fn) -> None:
        for op in block.ops:
            if isinstance(op, st.YieldOp):
                continue
            self.emit_op(op, fn)

    def emit_op(self, op: Operation, fn: _Fn) -> None:
        try:
            handler = getattr(self, f"op_{type(op).__name__}", None)
            if handler is None:
                raise KirError(_unsupported(op, f"the gluon backend cannot lower `{op.name}`"))
            handler(op, fn)
        except KirError as err:
            self.errors += err.diagnostics
            for r in op.results:  # keep going, to report every refusal at once
                self.vals.setdefault(r, _Val("None", "scalar"))
        except Exception as err:  # noqa: BLE001 - a bug of this backend, reported at the op
            self.errors.append(
                Diagnostic(
                    "internal.gluon",
                    "error",
                    span_of(op),
                    f"internal error of the gluon backend at `{op.name}`: {type(err).__name__}: {err}",
                    "this is a bug of lowering/emit/gluon.py, not of the program; please report it with the program",
                )
            )
            for r in op.results:
                self.vals.setdefault(r, _Val("None", "scalar"))

    # structure

    def op_ForOp(self, op: st.ForOp, fn: _Fn) -> None:
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
            self.vals[arg] = _Val(name, kind, fn=fn)
            carried.append(name)
        iv = block.args[0]
        iv_name = self.bind_name(fn, iv, iv.name_hint or "i", op)
        self.vals[iv] = _Val(iv_name, "scalar", fn=fn)
        bounds = [lo.text, hi.text] + ([] if step.static == 1 else [step.text])
        fn.line(f"for {iv_name} in range({', '.join(bounds)}):", op)
        fn.depth += 1
        # an accumulator a trip leaves in flight (`wgmma.wait(1)` at the end of the body) is
        # still in flight at the top of the next trip: its wgmma.wait there must be emitted
        fn.pending += [block.args[1 + i] for i in _carried_in_flight(block)]
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
            self.vals[res] = _Val(name, "tile" if isinstance(res.type, TileType) else "scalar", fn=fn)

    def op_IfOp(self, op: st.IfOp, fn: _Fn) -> None:
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
            self.vals[res] = _Val(name, "tile" if isinstance(res.type, TileType) else "scalar", fn=fn)

    def op_RoleRankOp(self, op: st.RoleRankOp, fn: _Fn) -> None:
        self.define(fn, op.res, _Val("RANK", "constexpr"), op)

    # scalars and elementwise

    def op_ProgramIdOp(self, op: tl.ProgramIdOp, fn: _Fn) -> None:
        self.define(fn, op.res, _Val(f"gl.program_id({op.axis.data})", "scalar"), op)

    def op_NumProgramsOp(self, op: tl.NumProgramsOp, fn: _Fn) -> None:
        self.define(fn, op.res, _Val(f"gl.num_programs({op.axis.data})", "scalar"), op)

    def op_SymValueOp(self, op: tl.SymValueOp, fn: _Fn) -> None:
        self.vals[op.res] = self.ref_symbol(op.symbol.data, fn)
        if op not in self.inlined and op.res.name_hint and self.vals[op.res].kind != "static":
            val = self.vals.pop(op.res)
            self.define(fn, op.res, _Val(val.text, "scalar"), op)

    def op_ConstOp(self, op: tl.ConstOp, fn: _Fn) -> None:
        d = DTYPES[op.dtype]
        number = op.number
        if d.kind == "bool":
            val = _Val("True" if number else "False", "scalar")
        elif d.is_int:
            val = _Val(str(int(number)), "static", int(number), prec=ATOM if int(number) >= 0 else UNARY)
        elif number != number:
            val = _Val('float("nan")', "scalar")
        elif number in (float("inf"), float("-inf")):
            val = _Val(f'float("{"inf" if number > 0 else "-inf"}")', "scalar")
        else:
            val = _Val(repr(float(number)), "scalar", prec=ATOM if float(number) >= 0 else UNARY)
        if op.dtype not in ("i32", "f32", "i1") and val.kind == "scalar":
            # A typed scalar constant (bf16(0.5)): make its dtype explicit.
            val = _Val(f"gl.full([], {val.text}, {GL_DTYPE[op.dtype]})", "scalar")
        self.define(fn, op.res, val, op)

    def op_BinaryOp(self, op: tl.BinaryOp, fn: _Fn) -> None:
        a, b = self.operand(op.lhs, op, fn), self.operand(op.rhs, op, fn)
        fnname, dt = op.fn.data, dtype_of(op.res.type)
        d = DTYPES[dt]
        if a.kind == "static" and b.kind == "static" and d.is_int:
            v = _fold(fnname, a.static, b.static, dt)
            self.define(fn, op.res, _static(v), op)
            return
        kind = self._kind(op.res, a, b)
        if fnname in ("maximum", "minimum"):
            # KIR's maximum / minimum: a NaN in either operand gives NaN
            nan = ", propagate_nan=tl.PropagateNan.ALL" if d.is_float else ""
            self.nan_minmax |= d.is_float
            val = _Val(f"gl.{fnname}({a.text}, {b.text}{nan})", kind)
        elif fnname in ("div", "rem") and kind == "constexpr":
            self.uses_helpers = True
            val = _Val(f"kir_{fnname[:3]}({a.text}, {b.text})", kind)
        elif fnname == "div":
            sym = "//" if d.is_int else "/"
            val = _Val(f"{a.operand(PRODUCT)} {sym} {b.operand(PRODUCT, True)}", kind, prec=PRODUCT)
        else:
            sym = BINARY_OPS[fnname]
            val = _Val(f"{a.operand(PREC[sym])} {sym} {b.operand(PREC[sym], True)}", kind, prec=PREC[sym])
        self.define(fn, op.res, val, op)

    def op_CompareOp(self, op: tl.CompareOp, fn: _Fn) -> None:
        a, b = self.operand(op.lhs, op, fn), self.operand(op.rhs, op, fn)
        sym = CMP_OPS[op.predicate.data]
        if a.kind == "static" and b.kind == "static":
            v = int(eval(f"{a.static} {sym} {b.static}"))  # noqa: S307 - two ints and an operator
            self.define(fn, op.res, _Val("True" if v else "False", "scalar"), op)
            return
        self.define(
            fn, op.res, _Val(f"{a.operand(CMP)} {sym} {b.operand(CMP)}", self._kind(op.res, a, b), prec=CMP), op
        )

    def op_UnaryOp(self, op: tl.UnaryOp, fn: _Fn) -> None:
        x = self.operand(op.operand, op, fn)
        f = op.fn.data
        kind = self._kind(op.res, x)
        if f == "neg":
            if x.kind == "static":
                v = _wrap(-x.static, dtype_of(op.res.type))
                self.define(fn, op.res, _static(v), op)
                return
            val = _Val(f"-{x.operand(UNARY)}", kind, prec=UNARY)
        elif f == "not":
            val = _Val(f"~{x.operand(UNARY)}", kind, prec=UNARY)
        elif f == "sigmoid":
            dt = dtype_of(op.res.type)
            wide = x.operand(UNARY) if dt in ("f32", "f64") else f"{x.operand()}.to(gl.float32)"
            text = f"1.0 / (1.0 + gl.exp(-{wide}))"
            val = _Val(
                text if dt in ("f32", "f64") else f"({text}).to({GL_DTYPE[dt]})",
                kind,
                prec=PRODUCT if dt in ("f32", "f64") else ATOM,
            )
        elif f in ("abs", "floor", "ceil") or dtype_of(op.res.type) in ("f32", "f64"):
            val = _Val(f"{UNARY_CALLS[f]}({x.text})", kind)
        else:
            # KIR computes transcendentals of narrow floats in f32 and rounds the result.
            dt = GL_DTYPE[dtype_of(op.res.type)]
            val = _Val(f"{UNARY_CALLS[f]}({x.operand()}.to(gl.float32)).to({dt})", kind)
        self.define(fn, op.res, val, op)

    def op_WhereOp(self, op: tl.WhereOp, fn: _Fn) -> None:
        c, a, b = (self.operand(v, op, fn) for v in (op.cond, op.lhs, op.rhs))
        self.define(fn, op.res, _Val(f"gl.where({c.text}, {a.text}, {b.text})", self._kind(op.res, c, a, b)), op)

    def op_CastOp(self, op: tl.CastOp, fn: _Fn) -> None:
        x = self.operand(op.operand, op, fn)
        dt = dtype_of(op.res.type)
        if x.kind == "static" and DTYPES[dt].is_int and DTYPES[dt].kind != "bool":
            v = _wrap(x.static, dt)
            self.define(fn, op.res, _static(v), op)
            return
        if x.kind in ("static", "constexpr"):
            text = f"gl.full([], {x.text}, {GL_DTYPE[dtype_of(op.operand.type)]}).to({GL_DTYPE[dt]})"
            self.define(fn, op.res, _Val(text, "scalar"), op)
            return
        self.define(fn, op.res, _Val(f"{x.operand()}.to({GL_DTYPE[dt]})", self._kind(op.res, x)), op)

    def operand(self, v: SSAValue, op: Operation, fn: _Fn) -> _Val:
        self._check_not_pending(v, op, fn)
        return self.ref(v, fn)

    def _check_not_pending(self, v: SSAValue, op: Operation, fn: _Fn) -> None:
        if v in fn.pending:
            raise KirError(
                _unsupported(
                    op,
                    "this reads a wgmma accumulator before a wgmma.wait retires it",
                    "put wgmma.wait(0) between the wgmma and this use",
                )
            )

    def _check_not_token(self, v: SSAValue, op: Operation, fn: _Fn) -> None:
        if v in fn.tokens:
            raise KirError(
                _unsupported(
                    op,
                    "a wgmma result leaves a loop or branch before any wgmma.wait: gluon carries only waited accumulators",
                    "put a wgmma.wait(n) after the wgmma, inside the loop or branch",
                )
            )

    @staticmethod
    def _kind(res: SSAValue, *vals: _Val) -> str:
        if isinstance(res.type, TileType):
            return "tile"
        if all(v.kind in ("static", "constexpr") for v in vals):
            return "constexpr"
        return "scalar"

    # tiles

    def op_ZerosOp(self, op: tl.ZerosOp, fn: _Fn) -> None:
        shape, dt = self.shape(op.res.type, op), dtype_of(op.res.type)
        lay = self.layout_of(op.res, fn, op)
        self.define(fn, op.res, _Val(f"gl.zeros({shape}, {GL_DTYPE[dt]}, layout={lay})", "tile"), op)

    def op_FullOp(self, op: tl.FullOp, fn: _Fn) -> None:
        shape, dt = self.shape(op.res.type, op), dtype_of(op.res.type)
        value = self.ref(op.value, fn)
        lay = self.layout_of(op.res, fn, op)
        self.define(fn, op.res, _Val(f"gl.full({shape}, {value.text}, {GL_DTYPE[dt]}, layout={lay})", "tile"), op)

    def op_ArangeOp(self, op: tl.ArangeOp, fn: _Fn) -> None:
        lo, hi = self.static(op.start.data, op), self.static(op.end.data, op)
        lay = self.layout_of(op.res, fn, op)
        self.define(fn, op.res, _Val(f"gl.arange({lo}, {hi}, layout={lay})", "tile"), op)

    def op_ExpandDimsOp(self, op: tl.ExpandDimsOp, fn: _Fn) -> None:
        x = self.operand(op.operand, op, fn)
        axis = op.axis.data
        want = self.slice_const(axis, self.layout_of(op.res, fn, op))
        text = x.text
        if self.layout_of(op.operand, fn, op) != want:
            text = f"gl.convert_layout({text}, {want})"
        self.define(fn, op.res, _Val(f"gl.expand_dims({text}, {axis})", "tile"), op)

    def op_ReduceOp(self, op: tl.ReduceOp, fn: _Fn) -> None:
        """`max(s, axis = 1)`: Gluon's reduction, whose result is in `gl.SliceLayout(1, L)` of
        the operand's layout L (converted when its class has another layout). Narrow floats
        reduce in f32 and round once, as the triton backend does; max and min propagate NaN
        (KIR combines with `maximum` / `minimum`), through the `kir_max` / `kir_min` combine
        functions; narrow integers, which Gluon widens to 32 bits, wrap back."""
        x = self.operand(op.operand, op, fn)
        axis, what = op.axis.data, op.fn.data
        dt = dtype_of(op.res.type)
        d = DTYPES[dt]
        prec = ATOM
        if d.kind == "bool":
            i = f"{x.operand()}.to(gl.int32)"
            text = {
                "sum": f"(gl.sum({i}, axis={axis}) & 1) != 0",  # i1 addition wraps: an xor
                "prod": f"gl.min({i}, axis={axis}) != 0",
                "max": f"gl.max({i}, axis={axis}) != 0",
                "min": f"gl.min({i}, axis={axis}) != 0",
            }[what]
            prec = CMP
        elif d.is_float:
            wide = dt in ("f32", "f64")
            src = x.text if wide else f"{x.operand()}.to(gl.float32)"
            if what == "sum":
                text = f"gl.sum({src}, axis={axis})"
            else:
                self.combines.add(f"kir_{what}")
                text = f"gl.reduce({src}, {axis}, kir_{what})"
            if not wide:
                text = f"{text}.to({GL_DTYPE[dt]})"
        else:
            narrow = d.bits < 32
            if what == "prod":
                self.combines.add("kir_prod")
                src = f"{x.operand()}.to({'gl.int32' if d.kind == 'int' else 'gl.uint32'})" if narrow else x.text
                text = f"gl.reduce({src}, {axis}, kir_prod)"
            else:
                text = f"gl.{what}({x.text}, axis={axis})"
            if narrow:
                text = f"{text}.to({GL_DTYPE[dt]})"
        if not isinstance(op.res.type, TileType):
            self.define(fn, op.res, _Val(text, "scalar", prec=prec), op)
            return
        lay = self.layout_of(op.res, fn, op)
        if lay != self.slice_const(axis, self.layout_of(op.operand, fn, op)):
            text, prec = f"gl.convert_layout({text}, {lay})", ATOM
        self.define(fn, op.res, _Val(text, "tile", prec=prec), op)

    def op_ConvertLayoutOp(self, op: ex.ConvertLayoutOp, fn: _Fn) -> None:
        x = self.operand(op.operand, op, fn)
        lay = self.layout_const(op.layout.data)
        if self.layout_of(op.operand, fn, op) == lay:
            # already there (how lowering.passes.layouts writes layouts): no conversion
            if x.fn is not None:
                self.vals[op.res] = x
            else:
                self.define(fn, op.res, _Val(x.text, x.kind, prec=x.prec), op)
            return
        self.define(fn, op.res, _Val(f"gl.convert_layout({x.text}, {lay})", "tile"), op)

    # memory

    def op_SmemAllocOp(self, op: ex.SmemAllocOp, fn: _Fn) -> None:
        t = op.res.type
        shape = self.shape(t, op)
        lay = self.smem_layout(op.res)
        text = f"gl.allocate_shared_memory({GL_DTYPE[t.dtype.data]}, {shape}, {lay})"
        self.define(fn, op.res, _Val(text, "smem"), op)

    def op_MBarrierAllocOp(self, op: ex.MBarrierAllocOp, fn: _Fn) -> None:
        assert isinstance(op.res.type, MBarrierType)
        size = self.static(op.res.type.size.data, op)
        count = self.static(op.count.data, op)
        self.define(
            fn, op.res, _Val(f"gl.allocate_shared_memory(gl.int64, [{size}, 1], mbarrier.MBarrierLayout())", "mbar"), op
        )
        name = self.vals[op.res].text
        i = self.bind_name(fn, None, "i", None)
        fn.line(f"for {i} in gl.static_range({size}):", op)
        fn.line(f"    mbarrier.init({name}.index({i}), count={count})", op)

    def op_SizeofOp(self, op: ex.SizeofOp, fn: _Fn) -> None:
        shape = tl.access_shape(op.mem.type, op.access.data, list(op.indices))
        n = math.prod(self.static(d, op) for d in shape) * DTYPES[dtype_of(op.mem.type)].nbytes
        self.define(fn, op.res, _Val(str(n), "static", n), op)

    def smem_view(self, mem: SSAValue, access, indices, op: Operation, fn: _Fn) -> str:
        """A shared view: `.index(i)` on leading dimensions, `.slice(start, extent, dim)` (the
        start known at compile time) on the others."""
        text = self.ref(mem, fn).text
        mem_shape = shape_of(mem.type)
        dim = 0  # the dimension in the view built so far
        for i, (extent, idx) in enumerate(zip(access.dims, indices, strict=True)):
            v = self.ref(idx, fn)
            if extent is None:
                if dim != 0:
                    raise KirError(
                        _unsupported(
                            op, "a point index after a slice of a shared buffer", "index leading dimensions first"
                        )
                    )
                text += f".index({v.text})"
                continue
            n = self.static(extent, op)
            if v.kind not in ("static", "constexpr"):
                raise KirError(
                    _unsupported(
                        op,
                        "a slice of a shared buffer at a run-time offset: gluon slices shared views at compile-time offsets",
                        "slice at a parameter or role_rank() offset, or index the leading (stage) dimension",
                    )
                )
            whole = v.kind == "static" and v.static == 0 and self.static(mem_shape[i], op) == n
            if not whole:
                text += f".slice({v.text}, {n}, dim={dim})"
            dim += 1
        indexed = sum(1 for extent in access.dims if extent is None)
        if len(mem_shape) - indexed == 1 and len(mem_shape) >= 2 and not _rows_of_vectors(mem):
            # the buffer's NVMMA layout has two dimensions; Gluon cannot view one of its rows
            raise KirError(
                _unsupported(
                    op,
                    "a 1-D view of a shared buffer laid out for 2-D tiles (a swizzle, a TMA copy or wgmma, or 2-D accesses elsewhere)",
                    "read and write it as 2-D tiles, or keep a buffer of rows without a swizzle and index only its first dimension",
                )
            )
        return text

    def op_LoadOp(self, op: tl.LoadOp, fn: _Fn) -> None:
        if isinstance(op.mem.type, SmemType):
            view = self.smem_view(op.mem, op.access.data, list(op.indices), op, fn)
            lay = self.layout_of(op.res, fn, op)
            self.define(fn, op.res, _Val(f"{view}.load({lay})", "tile"), op)
            return
        lay = self.layout_of(op.res, fn, op) if isinstance(op.res.type, TileType) else None
        ptr = self.pointer_line(op, lay, fn)
        extra = ""
        if op.mask is not None:
            extra += f", mask={self.operand(op.mask, op, fn).text}"
            if op.other is not None:
                extra += f", other={self.operand(op.other, op, fn).text}"
            else:
                extra += ", other=0"
        if op.evict is not None:
            extra += f', eviction_policy="evict_{op.evict.data}"'
        self.define(fn, op.res, _Val(f"gl.load({ptr}{extra})", "tile" if lay else "scalar"), op)

    def op_StoreOp(self, op: tl.StoreOp, fn: _Fn) -> None:
        value = self.operand(op.value, op, fn)
        if isinstance(op.mem.type, SmemType):
            view = self.smem_view(op.mem, op.access.data, list(op.indices), op, fn)
            fn.line(f"{view}.store({value.text})", op)
            return
        shape = self.shape_of_access(op)
        if shape:
            # Stores go through a blocked layout of 16-byte vectors: a wgmma accumulator (or
            # any other layout) is converted to it first.
            lay = self.layout_const(blocked_layout(shape, DTYPES[dtype_of(op.mem.type)].bits, fn.warps))
            if isinstance(op.value.type, TileType) and self.layout_of(op.value, fn, op) != lay:
                text = f"gl.convert_layout({value.text}, {lay})"
            elif isinstance(op.value.type, TileType):
                text = value.text
            else:
                text = f"gl.full({shape}, {value.text}, {GL_DTYPE[dtype_of(op.mem.type)]}, layout={lay})"
            ptr = self.pointer_line(op, lay, fn)
        else:
            ptr, text = self.pointer_line(op, None, fn), value.text
        extra = ""
        if op.mask is not None:
            mask = self.operand(op.mask, op, fn)
            if isinstance(op.mask.type, TileType) and shape and self.layout_of(op.mask, fn, op) != lay:
                extra = f", mask=gl.convert_layout({mask.text}, {lay})"
            else:
                extra = f", mask={mask.text}"
        fn.line(f"gl.store({ptr}, {text}{extra})", op)

    def shape_of_access(self, op) -> list[int]:
        return [self.static(d, op) for d in tl.access_shape(op.mem.type, op.access.data, list(op.indices))]

    def pointer_line(self, op, layout: str | None, fn: _Fn) -> str:
        """Bind the addresses of an access to a name on a line of their own."""
        expr = self.pointers(op, layout, fn)
        name = self.bind_name(fn, None, f"{self.ref(op.mem, fn).text}_ptrs", None)
        fn.line(f"{name} = {expr}", op)
        return name

    def pointers(self, op, layout: str | None, fn: _Fn) -> str:
        """Addresses of a block access `x[i, r0 : r0 + E, ...]` of a global tensor: the base,
        plus each index times its stride (int64 for all but the last dimension, so that large
        tensors do not overflow), with `arange` tiles on the sliced dimensions."""
        t = op.mem.type
        dims = shape_of(t)
        strides = [s.data for s in t.strides.data] if t.strides.data else _row_major_strides(t)
        access = op.access.data
        if any(isinstance(v.type, TileType) for v in op.indices):
            return self.gather_pointers(op, strides, layout, fn)
        sliced = [i for i, d in enumerate(access.dims) if d is not None]
        if len(sliced) > 2:
            raise KirError(_unsupported(op, "the gluon backend addresses 1-D and 2-D blocks of global tensors"))
        terms = [self.ref(op.mem, fn).text]
        for i, (extent, idx) in enumerate(zip(access.dims, op.indices, strict=True)):
            start = self.ref(idx, fn)
            wide = i < len(dims) - 1  # this index is scaled by a stride that may be large
            zero = start.kind == "static" and start.static == 0
            if extent is None:
                if zero:
                    continue
                index = f"{start.operand()}.to(gl.int64)" if wide and start.kind == "scalar" else start.operand(PRODUCT)
            else:
                n = self.static(extent, op)
                pos = sliced.index(i)
                where = layout if len(sliced) == 1 else f"gl.SliceLayout({1 - pos}, {layout})"
                index = f"gl.arange(0, {n}, layout={where})"
                if not zero:
                    index = f"({start.operand(SUM)} + {index})"
                if wide:
                    index = f"{index}.to(gl.int64)"
                if len(sliced) == 2:
                    index += "[:, None]" if pos == 0 else "[None, :]"
            step = self.sym_text(strides[i], fn)
            terms.append(
                index if step.kind == "static" and step.static == 1 else f"{index} * {step.operand(PRODUCT, True)}"
            )
        return " + ".join(terms)

    def gather_pointers(self, op, strides: list[sx.SymExpr], layout: str | None, fn: _Fn) -> str:
        """Addresses of a gather `x[b, rows[:, None], cols]`: the base plus each index (a scalar
        or an index tile, broadcasting in the load's layout) times its stride, int64 for all but
        the last dimension."""
        terms = [self.ref(op.mem, fn).text]
        last = len(op.indices) - 1
        for i, idx in enumerate(op.indices):
            v = self.ref(idx, fn)
            if v.kind == "static" and v.static == 0:
                continue
            if isinstance(idx.type, TileType):
                text = v.text
                if layout is not None and self.layout_of(idx, fn, op) != layout:
                    text = f"gl.convert_layout({text}, {layout})"
                    v = _Val(text, "tile")
                index = f"{v.operand()}.to(gl.int64)" if i < last else v.operand(PRODUCT)
            elif i < last and v.kind == "scalar":
                index = f"{v.operand()}.to(gl.int64)"
            else:
                index = v.operand(PRODUCT)
            step = self.sym_text(strides[i], fn)
            terms.append(
                index if step.kind == "static" and step.static == 1 else f"{index} * {step.operand(PRODUCT, True)}"
            )
        return " + ".join(terms)

    # synchronization and asynchronous copies

    def barrier(self, bar: SSAValue, index: SSAValue, fn: _Fn) -> str:
        return f"{self.ref(bar, fn).text}.index({self.ref(index, fn).text})"

    def op_ExpectOp(self, op: ex.ExpectOp, fn: _Fn) -> None:
        nbytes = self.ref(op.nbytes, fn)
        if nbytes.kind not in ("static", "constexpr"):
            raise KirError(
                _unsupported(
                    op, "gluon's mbarrier.expect takes a byte count known at compile time", "write bytes = sizeof(...)"
                )
            )
        fn.line(f"mbarrier.expect({self.barrier(op.bar, op.bar_index, fn)}, {nbytes.text})", op)

    def op_ArriveOp(self, op: ex.ArriveOp, fn: _Fn) -> None:
        fn.line(f"mbarrier.arrive({self.barrier(op.bar, op.bar_index, fn)}, count={op.count.data})", op)

    def op_WaitOp(self, op: ex.WaitOp, fn: _Fn) -> None:
        fn.line(f"mbarrier.wait({self.barrier(op.bar, op.bar_index, fn)}, {self.ref(op.parity, fn).text})", op)

    def _desc(self, op, glob: SSAValue, access, smem: SSAValue) -> _Desc:
        box = tuple(self.static(d, op) for d in access.dims if d is not None)
        arg = next(n for n, a in self.kernel.args if a is glob)
        return self.descs[(arg, box, smem.type.swizzle.data)]

    def tma_coords(self, op, glob: SSAValue, indices, fn: _Fn) -> str:
        """The coordinates of a TMA box. A box `x[b, h, r0 : r0 + BM, c0 : c0 + BN]` of an N-D
        tensor goes through a 2-D descriptor over its rows (the leading dimensions merged, see
        lowering/runtime_gluon.py): its row is `(b * H + h) * S + r0`. The box never runs into
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
    def _mul_add(a: _Val, b: _Val, c: _Val) -> _Val:
        """`a * b + c` as code, folded where the emitter knows the values."""
        if a.kind == "static" and b.kind == "static" and c.kind == "static":
            return _static(a.static * b.static + c.static)
        if a.kind == "static" and a.static == 0 or b.kind == "static" and b.static == 0:
            return c
        if b.kind == "static" and b.static == 1:
            prod = a
        elif a.kind == "static" and a.static == 1:
            prod = b
        else:
            prod = _Val(f"{a.operand(PRODUCT)} * {b.operand(PRODUCT, True)}", "scalar", prec=PRODUCT)
        if c.kind == "static" and c.static == 0:
            return prod
        return _Val(f"{prod.operand(SUM)} + {c.operand(SUM, True)}", "scalar", prec=SUM)

    def op_TmaLoadOp(self, op: ex.TmaLoadOp, fn: _Fn) -> None:
        d = self._desc(op, op.src, op.src_access.data, op.dst)
        desc = d.name
        if fn.role is not None:
            fn.needs[desc] = None
        coords = self.tma_coords(op, op.src, op.src_indices, fn)
        dst = self.smem_view(op.dst, op.dst_access.data, list(op.dst_indices), op, fn)
        bar = self.barrier(op.bar, op.bar_index, fn)
        fn.line(f"tma.async_copy_global_to_shared({desc}, [{coords}], {bar}, {dst})", op)

    def op_TmaStoreOp(self, op: ex.TmaStoreOp, fn: _Fn) -> None:
        d = self._desc(op, op.dst, op.dst_access.data, op.src)
        if fn.role is not None:
            fn.needs[d.name] = None
        coords = self.tma_coords(op, op.dst, op.dst_indices, fn)
        src = self.smem_view(op.src, op.src_access.data, list(op.src_indices), op, fn)
        fn.line(f"tma.async_copy_shared_to_global({d.name}, [{coords}], {src})", op)

    def op_TmaStoreWaitOp(self, op: ex.TmaStoreWaitOp, fn: _Fn) -> None:
        fn.line(f"tma.store_wait({op.pending.data})", op)

    def op_FenceAsyncOp(self, op: ex.FenceAsyncOp, fn: _Fn) -> None:
        fn.line("fence_async_shared()", op)

    def op_CtaBarrierOp(self, op: ex.CtaBarrierOp, fn: _Fn) -> None:
        fn.line("gl.thread_barrier()", op)

    def op_WgmmaOp(self, op: ex.WgmmaOp, fn: _Fn) -> None:
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
        self.define(fn, op.res, _Val(f"warpgroup_mma({a}, {b}, {acc.text}, is_async=True)", "wgmma"), op)
        fn.pending.append(op.res)
        fn.tokens.add(op.res)

    def op_WgmmaWaitOp(self, op: ex.WgmmaWaitOp, fn: _Fn) -> None:
        n = op.pending.data
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


def _carried_in_flight(block) -> list[int]:
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
                n = o.pending.data
                flight = flight[len(flight) - n :] if n else []
            elif o.regions and any(isinstance(x, ex.WgmmaOp | ex.WgmmaWaitOp) for x in o.walk()):
                return []
        at_top = [block.args[1 + i] for i, y in enumerate(yields) if y in flight]
    return [i for i, y in enumerate(yields) if y in flight]


register(GluonEmitter())
