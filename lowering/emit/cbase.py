"""What the C++ emitters (CUDA and HIP) share: the table of names that differ between
the two languages, the element semantics of KIR as C++ expressions, and the code generator of
the tile level.

The CUDA and HIP emitters differ in a handful of names (the CTA barrier, the shared-memory
qualifier, the bf16 and fp8 type names and their conversion intrinsics, the runtime header),
which live in one `CDialect` table each; everything else is written once here.

How the tile level maps to C++ (correctness over speed; the hardware-explicit level is where
speed is decided):

- A **scalar** is one C++ variable, uniform across the threads of its instance (the CTA, or one
  warp or warpgroup of a role).
- A **tile** is a per-thread register array. In the default `Cyclic` layout, thread `t` of an
  instance of `T` threads holds the elements `e` (row-major linear index) with `e % T == t`, in
  slot `e / T`; every size is a compile-time constant, so the slot loops unroll and the arrays
  stay in registers.
- **Elementwise** ops are one unrolled loop over the slots. An operand of another shape or
  layout (broadcasting, `trans`) is either recomputed at the needed index, when it is a pure
  function of the index (`arange` and what is computed from it and from scalars), or exchanged
  through shared memory (write, barrier, read, barrier).
- **Reductions** run the interpreter's exact tree (element i with element i + n/2, level by
  level) in shared memory; scans run one thread per row; `argmin`/`argmax` carry the index
  through the tree; `topk` ranks every element of its row; `gather` stages its source in shared
  memory and each thread reads its elements at the index (a source the CTA defines at the top
  level is written there once, where it is defined, and read in place by every gather: a
  binary search's table); `dot` stages both operands in shared
  memory and each thread computes its own outputs.
- **Loads, stores, gathers and atomics** compute one address per element, with masks.

An op the generator cannot express raises `Unsupported`; `accepts()` turns that into a
`lower.unsupported` diagnostic at the op, so a program is refused rather than miscompiled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, ScalarType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.interp import values as V
from kir.program import Program, span_of
from lowering.emit.base import ArgInfo, Emitter, Lowered, SourceWriter
from lowering.emit.names import CXX_RESERVED, identifier

# ---- the table of names that differ between CUDA and HIP ---------------------------------------


@dataclass(frozen=True)
class CDialect:
    """The names a C++ GPU dialect spells its own way; CUDA and HIP each fill one."""

    name: str
    headers: tuple[str, ...]
    kernel_qualifier: str  # before the kernel's return type
    shared: str  # the shared-memory qualifier
    barrier: str  # the CTA barrier
    types: Mapping[str, str]  # KIR dtype -> C++ type
    # conversion intrinsics: narrow float -> float, float -> narrow float (round to nearest
    # even), double -> narrow float (one rounding), and bits -> narrow float
    to_float: Mapping[str, str]
    from_float: Mapping[str, str]
    from_double: Mapping[str, str]
    from_bits: Mapping[str, str]
    thread_index: str = "threadIdx.x"
    block_index: tuple[str, str, str] = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
    grid_size: tuple[str, str, str] = ("gridDim.x", "gridDim.y", "gridDim.z")
    warp_size: int = 32


def c_types(f16: str, bf16: str, **fp8: str) -> dict[str, str]:
    """A dialect's `types`: the integers, f32 and f64 are C++'s own on every backend; only the
    16-bit floats (and fp8, where there is one) have a name of the dialect's."""
    return {
        "i1": "bool",
        "i8": "signed char",
        "i16": "short",
        "i32": "int",
        "i64": "long long",
        "u8": "unsigned char",
        "u16": "unsigned short",
        "u32": "unsigned int",
        "u64": "unsigned long long",
        "f16": f16,
        "bf16": bf16,
        "f32": "float",
        "f64": "double",
        **fp8,
    }


NARROW_FLOATS = ("bf16", "f16", "f8e4m3", "f8e5m2")
_UNSIGNED_OF = {8: "unsigned char", 16: "unsigned short", 32: "unsigned int", 64: "unsigned long long"}


class Unsupported(Exception):
    """An op this backend cannot lower; becomes a `lower.unsupported` diagnostic at the op."""

    def __init__(self, op: Operation | None, message: str, hint: str = ""):
        super().__init__(message)
        self.op = op
        self.message = message
        self.hint = hint


def _prod(shape) -> int:
    return int(math.prod(shape))


# ---- element semantics as C++ expressions ------------------------------------------------------


class CExprs:
    """KIR's element semantics (`kir/interp/values.py`) as C++ expressions over operand
    expressions. Operands are simple names (the generator binds anything larger to a local
    first), so an operand may appear twice in a result."""

    def __init__(self, dialect: CDialect):
        self.d = dialect

    def ctype(self, dtype: str) -> str:
        return self.d.types[dtype]

    # -- literals

    def literal(self, number: int | float | bool, dtype: str) -> str:
        d = DTYPES[dtype]
        value = V.const(number, d)
        if d.kind == "bool":
            return "true" if bool(value) else "false"
        if d.is_int:
            v = int(value)
            t = self.ctype(dtype)
            if dtype == "i32":
                return str(v) if v != -(2**31) else "(-2147483647 - 1)"
            if dtype == "i64":
                return f"{v}LL" if v != -(2**63) else "(-9223372036854775807LL - 1)"
            if dtype == "u32":
                return f"{v}u"
            if dtype == "u64":
                return f"{v}ull"
            return f"(({t}){v})"
        if dtype == "f32":
            f = float(value)
            if math.isfinite(f):
                return f"{f!r}f"
            return f"kir_f32_bits({int(np.asarray(value, np.float32).view(np.uint32))}u)"
        if dtype == "f64":
            f = float(value)
            if math.isfinite(f):
                return repr(f)
            return f"kir_f64_bits({int(np.asarray(value, np.float64).view(np.uint64))}ull)"
        bits = int(np.asarray(value).view(np.uint16 if d.bits == 16 else np.uint8))
        return f"{self.d.from_bits[dtype]}({bits:#x})"

    def zero(self, dtype: str) -> str:
        return self.literal(0, dtype)

    # -- float helpers

    @staticmethod
    def compute_dtype(dtype: str) -> str:
        """Where arithmetic on a float dtype happens: f64 for f64, f32 for the rest."""
        return "f64" if dtype == "f64" else "f32"

    def widen(self, x: str, dtype: str) -> str:
        return f"{self.d.to_float[dtype]}({x})" if dtype in NARROW_FLOATS else x

    def narrow(self, x: str, dtype: str) -> str:
        return f"{self.d.from_float[dtype]}({x})" if dtype in NARROW_FLOATS else x

    # -- operators

    def binary(self, fn: str, a: str, b: str, dtype: str, rhs_const: int | None = None) -> str:
        d = DTYPES[dtype]
        if d.kind == "bool":
            return {
                "add": f"({a} != {b})",
                "sub": f"({a} != {b})",
                "mul": f"({a} && {b})",
                "div": f"({b} ? {a} : true)",
                "rem": f"({b} ? false : {a})",
                "and": f"({a} && {b})",
                "or": f"({a} || {b})",
                "xor": f"({a} != {b})",
                "shl": f"({b} ? false : {a})",
                "shr": f"({b} ? false : {a})",
                "maximum": f"({a} || {b})",
                "minimum": f"({a} && {b})",
            }[fn]
        if d.is_float:
            f64 = dtype == "f64"
            x, y = self.widen(a, dtype), self.widen(b, dtype)
            sfx = "" if f64 else "f"
            expr = {
                "add": f"{x} + {y}",
                "sub": f"{x} - {y}",
                "mul": f"{x} * {y}",
                "div": f"{x} / {y}",
                "rem": f"fmod{sfx}({x}, {y})",
                "maximum": f"kir_fmax({x}, {y})",
                "minimum": f"kir_fmin({x}, {y})",
                "pow": f"pow{sfx}({x}, {y})",
            }[fn]
            return self.narrow(expr, dtype) if dtype in NARROW_FLOATS else f"({expr})"
        t = self.ctype(dtype)
        w = "unsigned long long" if d.bits == 64 else "unsigned int"
        signed = d.kind == "int"
        if fn in ("add", "sub", "mul"):
            sym = {"add": "+", "sub": "-", "mul": "*"}[fn]
            return f"(({t})(({w}){a} {sym} ({w}){b}))"
        if fn in ("div", "rem"):
            # C's `/` and `%` are exact when the divisor is a constant other than 0 and -1
            if rhs_const is not None and rhs_const not in (0, -1):
                return f"(({t})({a} {'/' if fn == 'div' else '%'} {b}))"
            helper = (
                ("kir_sdiv" if fn == "div" else "kir_srem") if signed else ("kir_udiv" if fn == "div" else "kir_urem")
            )
            return f"{helper}<{t}>({a}, {b})"
        if fn in ("and", "or", "xor"):
            sym = {"and": "&", "or": "|", "xor": "^"}[fn]
            return f"(({t})({a} {sym} {b}))"
        if fn == "shl":
            return f"kir_shl<{t}, {w}, {d.bits}>({a}, {b})"
        if fn == "shr":
            return f"kir_shr<{t}, {d.bits}>({a}, {b})"
        if fn == "maximum":
            return f"({a} > {b} ? {a} : {b})"
        if fn == "minimum":
            return f"({a} < {b} ? {a} : {b})"
        raise ValueError(f"no integer {fn}")

    def compare(self, pred: str, a: str, b: str, dtype: str) -> str:
        sym = tl.CMP_PREDICATES[pred]
        return f"({self.widen(a, dtype)} {sym} {self.widen(b, dtype)})"

    def unary(self, fn: str, a: str, dtype: str) -> str:
        d = DTYPES[dtype]
        if fn == "not":
            return f"(!{a})" if d.kind == "bool" else f"(({self.ctype(dtype)})~{a})"
        if d.is_int:
            t = self.ctype(dtype)
            w = "unsigned long long" if d.bits == 64 else "unsigned int"
            neg = f"(({t})(0u - ({w}){a}))"
            if fn == "neg":
                return neg
            if fn == "abs":
                return a if d.kind == "uint" else f"({a} < 0 ? {neg} : {a})"
            raise ValueError(f"no integer {fn}")
        f64 = dtype == "f64"
        sfx = "" if f64 else "f"
        one = "1.0" if f64 else "1.0f"
        x = self.widen(a, dtype)
        expr = {
            "neg": f"-{x}",
            "abs": f"fabs{sfx}({x})",
            "exp": f"exp{sfx}({x})",
            "exp2": f"exp2{sfx}({x})",
            "log": f"log{sfx}({x})",
            "log2": f"log2{sfx}({x})",
            "sqrt": f"sqrt{sfx}({x})",
            "rsqrt": f"{one} / sqrt{sfx}({x})",
            "erf": f"erf{sfx}({x})",
            "sigmoid": f"{one} / (exp{sfx}(-{x}) + {one})",
            "tanh": f"tanh{sfx}({x})",
            "sin": f"sin{sfx}({x})",
            "cos": f"cos{sfx}({x})",
            "floor": f"floor{sfx}({x})",
            "ceil": f"ceil{sfx}({x})",
        }[fn]
        return self.narrow(expr, dtype) if dtype in NARROW_FLOATS else f"({expr})"

    def cast(self, a: str, src: str, dst: str) -> str:
        if src == dst:
            return a
        s, t = DTYPES[src], DTYPES[dst]
        if t.kind == "bool":
            return f"({self.widen(a, src)} != 0)"
        if s.kind == "bool":
            return f"({a} ? {self.literal(1, dst)} : {self.literal(0, dst)})"
        if s.is_float and t.is_float:
            if src == "f64":
                return f"{self.d.from_double[dst]}({a})" if dst in NARROW_FLOATS else f"((float){a})"
            wide = self.widen(a, src)  # exact
            if dst == "f64":
                return f"((double){wide})"
            return self.narrow(wide, dst) if dst in NARROW_FLOATS else wide
        if s.is_float:
            info = np.iinfo(t.numpy)
            lo, hi = self.literal(int(info.min), dst), self.literal(int(info.max), dst)
            return f"kir_f2i<{self.ctype(dst)}>((double){self.widen(a, src)}, {lo}, {hi})"
        if t.is_float:
            # integers convert through f64, then round once (as the interpreter does)
            if dst in NARROW_FLOATS:
                return f"{self.d.from_double[dst]}((double){a})"
            return f"(({self.ctype(dst)})(double){a})"
        return f"(({self.ctype(dst)}){a})"  # integer to integer wraps


# ---- the helpers every C++ kernel carries ------------------------------------------------------

COMMON_HELPERS = r"""
#define KIR_DEV __device__ __forceinline__

KIR_DEV float kir_f32_bits(unsigned int b) { return __uint_as_float(b); }
KIR_DEV double kir_f64_bits(unsigned long long b) { return __longlong_as_double((long long)b); }
// maximum/minimum propagate NaN (the first NaN operand wins), as numpy's do
KIR_DEV float kir_fmax(float a, float b) { return a != a ? a : (b != b ? b : fmaxf(a, b)); }
KIR_DEV float kir_fmin(float a, float b) { return a != a ? a : (b != b ? b : fminf(a, b)); }
KIR_DEV double kir_fmax(double a, double b) { return a != a ? a : (b != b ? b : fmax(a, b)); }
KIR_DEV double kir_fmin(double a, double b) { return a != a ? a : (b != b ? b : fmin(a, b)); }
// C division: truncation toward zero; x / 0 is all ones and x % 0 is x (as PTX div does);
// the most negative value divided by -1 wraps
template <typename T> KIR_DEV T kir_sdiv(T a, T b) {
    if (b == 0) return (T)-1;
    if (b == (T)-1) return (T)(0ull - (unsigned long long)a);
    return (T)(a / b);
}
template <typename T> KIR_DEV T kir_srem(T a, T b) {
    if (b == 0) return a;
    if (b == (T)-1) return (T)0;
    return (T)(a % b);
}
template <typename T> KIR_DEV T kir_udiv(T a, T b) { return b == 0 ? (T)~(T)0 : (T)(a / b); }
template <typename T> KIR_DEV T kir_urem(T a, T b) { return b == 0 ? a : (T)(a % b); }
// shifts take the amount as unsigned: by the width or more, << gives 0 and >> the sign fill
template <typename T, typename W, int BITS> KIR_DEV T kir_shl(T a, T b) {
    unsigned long long n = (unsigned long long)(long long)b;
    return n >= BITS ? (T)0 : (T)((W)a << n);
}
template <typename T, int BITS> KIR_DEV T kir_shr(T a, T b) {
    unsigned long long n = (unsigned long long)(long long)b;
    if (n >= BITS) return (T)((T)-1 < (T)0 && a < (T)0 ? (T)-1 : (T)0);
    return (T)(a >> n);
}
// float to integer: truncate toward zero, saturate, NaN gives 0
template <typename T> KIR_DEV T kir_f2i(double x, T lo, T hi) {
    if (x != x) return (T)0;
    if (x >= (double)hi) return hi;
    if (x <= (double)lo) return lo;
    return (T)trunc(x);
}
template <typename To, typename From> KIR_DEV To kir_bitcast(From x) {
    To r;
    memcpy(&r, &x, sizeof(To));
    return r;
}
"""


# ---- layouts of register tiles -----------------------------------------------------------------


@dataclass(frozen=True)
class Cyclic:
    """Thread `tid` of `threads` holds the elements e with e % threads == tid, in slot e / threads."""

    threads: int
    tid: str


@dataclass
class Tile:
    name: str
    dtype: str
    shape: tuple[int, ...]
    layout: object  # Cyclic, or a backend's own layout (the CUDA wgmma accumulator)
    lazy: bool = False  # a pure function of the index: recomputed where used, never stored


@dataclass
class Scalar:
    name: str
    dtype: str


@dataclass
class Instance:
    """Who runs the code being emitted: the whole CTA, or one unit (warp or warpgroup) of a
    role. `elect` is the condition of the one thread that performs the unit's single effects
    (an arrive, a TMA issue, a scalar store); `single` says the code runs on that thread only.
    Exchanges between the unit's threads go through its own scratch area (at `scratch_at`)
    and its own barrier (`unit_sync`)."""

    threads: int
    tid: str
    elect: str
    cta: bool  # the whole CTA
    unit_sync: str  # how the unit's threads synchronize among themselves
    single: bool = False
    role: st.RoleOp | None = None
    rank: str | None = None
    scratch_at: str = "0"  # C++: where the unit's scratch area starts (bytes past the base)


@dataclass
class GlobalArg:
    name: str  # C name
    dtype: str
    shape: tuple[sx.SymExpr, ...]
    strides: tuple[sx.SymExpr, ...]  # elements; row-major when not declared


# ---- the generator -----------------------------------------------------------------------------


class KernelGen:
    """Generates one kernel's C++ source from a program and its parameter values. One instance
    per emission; a backend subclasses it to add its hardware-explicit ops and layouts."""

    PURE_LIMIT = 600  # characters: beyond this, a pure value is exchanged rather than recomputed

    def __init__(self, program: Program, params: dict[str, int], dialect: CDialect):
        self.program = program
        self.kernel = program.kernel
        self.params = dict(params)
        self.dialect = dialect
        self.c = CExprs(dialect)
        self.w = SourceWriter()
        self.names: dict[SSAValue, str] = {}
        self.vals: dict[SSAValue, Tile | Scalar] = {}
        self.used: set[str] = set()
        self.globals: dict[SSAValue, GlobalArg] = {}
        self.shape_symbols = [s for s in self.kernel.shape_symbols]
        self.threads = self.kernel.threads
        self.scratch_base = 0  # offset of the scratch area in dynamic shared memory
        self.scratch_top = 0  # bytes of scratch used by the op being emitted
        self.scratch_max = 0  # of the CTA's code
        self.unit_scratch: dict[int, int] = {}  # id(role) -> bytes one unit of it uses
        self.exchanged: dict[SSAValue, str] = {}
        # gather sources staged once in shared memory where they are defined (see plan_resident)
        self.resident_at: dict[SSAValue, int] = {}
        self.resident: dict[SSAValue, str] = {}
        self.views: set[str] = set()  # arrays that more than one value names (expand_dims, reshape)
        self.decl_block: dict[str, Block | None] = {}
        self.decl_line: dict[str, int] = {}  # the output line of a tile's declaration
        self.instance = Instance(self.threads, "kir_tid", "kir_tid == 0", cta=True, unit_sync=dialect.barrier)
        self.current_op: Operation | None = None
        self.pending: list[tuple[int, int, list[tuple[str, str]], Operation]] = []  # open slot loops
        self.handlers: dict[type, Callable[[Operation], None]] = {
            tl.ProgramIdOp: self.op_program_id,
            tl.NumProgramsOp: self.op_num_programs,
            tl.SymValueOp: self.op_symbol,
            tl.ConstOp: self.op_const,
            tl.ArangeOp: self.op_constructor,
            tl.ZerosOp: self.op_constructor,
            tl.FullOp: self.op_constructor,
            tl.BinaryOp: self.op_elementwise,
            tl.CompareOp: self.op_elementwise,
            tl.UnaryOp: self.op_elementwise,
            tl.WhereOp: self.op_elementwise,
            tl.CastOp: self.op_elementwise,
            tl.BroadcastOp: self.op_elementwise,
            tl.TransOp: self.op_elementwise,
            tl.ExpandDimsOp: self.op_reshape,
            tl.ReshapeOp: self.op_reshape,
            ex.ConvertLayoutOp: self.op_reshape,
            tl.ReduceOp: self.op_reduce,
            tl.ArgReduceOp: self.op_reduce,
            tl.ScanOp: self.op_scan,
            tl.TopKOp: self.op_topk,
            tl.GatherOp: self.op_gather,
            tl.DotOp: self.op_dot,
            tl.LoadOp: self.op_load,
            tl.StoreOp: self.op_store,
            tl.AtomicOp: self.op_atomic,
            st.ForOp: self.op_for,
            st.IfOp: self.op_if,
            st.YieldOp: lambda op: None,  # handled by the owner of the block
        }

    # ---- names, values and static sizes ------------------------------------------------------

    def fresh(self, base: str) -> str:
        name = base
        n = 1
        while name in self.used:
            name = f"{base}_{n}"
            n += 1
        self.used.add(name)
        return name

    def name_for(self, v: SSAValue, prefix: str = "v_") -> str:
        hint = v.name_hint
        base = (
            identifier(hint, CXX_RESERVED, prefix)
            if hint and SSAValue.is_valid_name(hint) and not hint.startswith("__")
            else "t"
        )
        return self.fresh(base)

    def param_name(self, name: str) -> str:
        return identifier(name, CXX_RESERVED, "p_")

    def symbol_name(self, name: str) -> str:
        return identifier(name, CXX_RESERVED, "n_")

    def static(self, expr: sx.SymExpr, what: str = "a size") -> int:
        """A static expression's value with the parameters bound (shape symbols are not known
        at compile time: such a size is refused)."""
        try:
            return int(sx.fold(expr).evaluate(self.params))
        except KeyError as err:
            raise Unsupported(
                self.current_op,
                f"{what} `{expr}` depends on the shape symbol `{err.args[0]}`; the {self.dialect.name} backend needs it known at compile time",
                "make the size a parameter (a compile-time constant), with a `where` constraint tying it to the shape",
            ) from None
        except ZeroDivisionError:
            raise Unsupported(self.current_op, f"{what} `{expr}` divides by zero") from None

    def static_shape(self, t) -> tuple[int, ...]:
        return tuple(self.static(d, "the tile dimension") for d in shape_of(t))

    def c_sym(self, expr: sx.SymExpr) -> str:
        """A static expression as C++ (parameters and shape symbols by name)."""
        expr = sx.fold(expr)
        if isinstance(expr, sx.Int):
            return str(expr.value)
        if isinstance(expr, sx.Sym):
            return self.param_name(expr.name) if expr.name in self.params else self.symbol_name(expr.name)
        assert isinstance(expr, sx.Bin)
        a, b = self.c_sym(expr.lhs), self.c_sym(expr.rhs)
        if expr.op == "cdiv":
            return f"kir_cdiv({a}, {b})"
        if expr.op in ("min", "max"):
            return f"kir_{expr.op}({a}, {b})"
        return f"({a} {expr.op} {b})"

    def val(self, v: SSAValue) -> Tile | Scalar:
        got = self.vals.get(v)
        if got is None:
            raise Unsupported(self.current_op, f"internal: no value for {v.name_hint or v}")
        return got

    def const_value(self, v: SSAValue) -> int | None:
        """The integer value of a scalar known at compile time (a constant or a parameter)."""
        owner = v.owner if not isinstance(v, BlockArgument) else None
        if isinstance(owner, tl.ConstOp) and DTYPES[owner.dtype].is_int:
            return int(owner.number)
        if isinstance(owner, tl.SymValueOp) and owner.symbol.data in self.params:
            return self.params[owner.symbol.data]
        return None

    def layout_of(self, v: SSAValue) -> object:
        """The register layout a tile value gets (the backend may choose others)."""
        return Cyclic(self.instance.threads, self.instance.tid)

    # ---- declarations -------------------------------------------------------------------------

    def slots(self, layout: object, shape: tuple[int, ...]) -> int:
        assert isinstance(layout, Cyclic)
        return -(-_prod(shape) // layout.threads)

    def declare(self, v: SSAValue, op: Operation, name: str | None = None, bind: bool = True) -> Tile | Scalar:
        """Declare storage for `v` (and bind it to `v`, unless `bind` is false)."""
        dtype = dtype_of(v.type)
        name = name or self.name_for(v)
        if isinstance(v.type, ScalarType):
            self.w.line(f"{self.c.ctype(dtype)} {name};", op)
            res: Tile | Scalar = Scalar(name, dtype)
        else:
            shape = self.static_shape(v.type)
            layout = self.layout_of(v)
            self.w.line(f"{self.c.ctype(dtype)} {name}[{self.slots(layout, shape)}];", op)
            res = Tile(name, dtype, shape, layout)
            self.decl_block[name] = op.parent_block()
            self.decl_line[name] = len(self.w.lines)
        if bind:
            self.vals[v] = res
        return res

    def define_scalar(self, v: SSAValue, expr: str, op: Operation) -> Scalar:
        dtype = dtype_of(v.type)
        name = self.name_for(v)
        self.w.line(f"{self.c.ctype(dtype)} {name} = {expr};", op)
        res = Scalar(name, dtype)
        self.vals[v] = res
        return res

    # ---- slot loops ---------------------------------------------------------------------------

    def open_slots(self, layout: object, shape: tuple[int, ...], op: Operation) -> tuple[list[str], str, int]:
        """Open a loop over the slots of a tile; returns the element's index expressions, its
        row-major linear index and the number of braces to close (with `close`)."""
        assert isinstance(layout, Cyclic)
        n = _prod(shape)
        decls = [("kir_e", f"const int kir_e = kir_i * {layout.threads} + {layout.tid};")]
        idx = self.delinearize("kir_e", shape)
        if len(shape) > 1:
            decls += [(f"kir_x{k}", f"const int kir_x{k} = {e};") for k, e in enumerate(idx)]
            idx = [f"kir_x{k}" for k in range(len(shape))]
        self.open_loop(self.slots(layout, shape), decls, op)
        closers = 1
        if n % layout.threads:
            self.w.line(f"if (kir_e < {n}) {{", op)
            self.w.indent()
            closers += 1
        return idx, "kir_e", closers

    def open_loop(self, count: int, decls: list[tuple[str, str]], op: Operation, step: int = 1) -> None:
        """An unrolled loop over `count` slots whose index declarations (name, C++) are written
        when the loop closes, and only those its body uses."""
        w = self.w
        w.line("#pragma unroll", op)
        inc = "++kir_i" if step == 1 else f"kir_i += {step}"
        w.line(f"for (int kir_i = 0; kir_i < {count}; {inc}) {{", op)
        w.indent()
        self.pending.append((len(w.lines), w.depth, decls, op))

    def close(self, closers: int) -> None:
        for _ in range(closers):
            self.w.dedent()
            self.w.line("}")
            self._flush_decls()

    def _flush_decls(self) -> None:
        w = self.w
        if not self.pending or self.pending[-1][1] != w.depth + 1:
            return
        at, depth, decls, op = self.pending.pop()
        body = "\n".join(w.lines[at:])
        texts = []
        for name, text in reversed(decls):  # later declarations use earlier ones
            if re.search(rf"\b{name}\b", body):
                texts.insert(0, w.indent_unit * depth + text)
                body += "\n" + text
        if not texts:
            return
        w.lines[at:at] = texts
        w.spans = {(n + len(texts) if n > at else n): s for n, s in w.spans.items()}
        span = span_of(op)
        if span is not None:
            for k in range(len(texts)):
                w.spans[at + 1 + k] = span
        self.pending = [(a + len(texts) if a > at else a, d, ds, o) for a, d, ds, o in self.pending]

    @staticmethod
    def delinearize(lin: str, shape: tuple[int, ...]) -> list[str]:
        out = []
        for k, d in enumerate(shape):
            inner = _prod(shape[k + 1 :])
            if d == 1:
                out.append("0")
            elif k == 0:
                out.append(lin if inner == 1 else f"({lin} / {inner})")
            elif inner == 1:
                out.append(f"({lin} % {d})")
            else:
                out.append(f"(({lin} / {inner}) % {d})")
        return out

    @staticmethod
    def linearize(idx: list[str], shape: tuple[int, ...]) -> str:
        terms = []
        for k, (e, d) in enumerate(zip(idx, shape, strict=True)):
            inner = _prod(shape[k + 1 :])
            if d == 1:
                continue
            terms.append(e if inner == 1 else f"{e} * {inner}")
        return "(" + " + ".join(terms) + ")" if terms else "0"

    @staticmethod
    def broadcast_index(shape: tuple[int, ...], res_shape: tuple[int, ...], idx: list[str]) -> list[str]:
        off = len(res_shape) - len(shape)
        return ["0" if d == 1 else idx[k + off] for k, d in enumerate(shape)]

    # ---- operand access at an element -------------------------------------------------------

    def value_at(self, v: SSAValue, idx: list[str]) -> str:
        """The element of `v` at index `idx` (in v's own coordinates), for a value that is not
        read in its own slot: recomputed when pure, else read from its exchange buffer."""
        x = self.val(v)
        if isinstance(x, Scalar):
            return x.name
        if v in self.exchanged:
            return f"{self.exchanged[v]}[{self.linearize(idx, x.shape)}]"
        if v in self.resident:
            return f"{self.resident[v]}[{self.linearize(idx, x.shape)}]"
        expr = self.pure(v, idx)
        if expr is None:
            raise Unsupported(self.current_op, f"internal: {x.name} was neither exchanged nor pure")
        return expr

    def fetch(self, v: SSAValue, res_shape: tuple[int, ...], res_layout: object, idx: list[str]) -> str:
        """Operand `v` at the element `idx` of a result of shape `res_shape` (broadcasting)."""
        x = self.val(v)
        if isinstance(x, Scalar):
            return x.name
        if x.shape == res_shape and x.layout == res_layout and not x.lazy:
            return f"{x.name}[kir_i]"
        return self.value_at(v, self.broadcast_index(x.shape, res_shape, idx))

    def pure(self, v: SSAValue, idx: list[str]) -> str | None:
        """`v` at `idx` as an expression of the index and of scalars alone, when `v` is computed
        from aranges, constants and scalars only (None otherwise, or when it is too large)."""
        expr = self._pure(v, idx)
        return expr if expr is not None and len(expr) <= self.PURE_LIMIT else None

    def _pure(self, v: SSAValue, idx: list[str]) -> str | None:
        x = self.vals.get(v)
        if isinstance(x, Scalar):
            return x.name
        if isinstance(v, BlockArgument) or x is None or not x.lazy:
            return None
        op = v.owner
        shape = x.shape
        c = self.c
        if isinstance(op, tl.ArangeOp):
            start = self.static(op.start.data)
            return f"({start} + {idx[0]})" if start else idx[0]
        if isinstance(op, tl.ZerosOp):
            return c.zero(x.dtype)
        if isinstance(op, tl.FullOp):
            return self.val(op.value).name

        def at(u: SSAValue) -> str | None:
            y = self.vals.get(u)
            if isinstance(y, Scalar):
                return y.name
            if y is None:
                return None
            e = self._pure(u, self.broadcast_index(y.shape, shape, idx))
            return None if e is None or len(e) > self.PURE_LIMIT else f"({e})"

        if isinstance(op, tl.BinaryOp | tl.CompareOp | tl.WhereOp | tl.UnaryOp | tl.CastOp):
            parts = [at(u) for u in op.operands]
            if any(p is None for p in parts):
                return None
            return self.elementwise_expr(op, parts)  # type: ignore[arg-type]
        if isinstance(op, tl.BroadcastOp | ex.ConvertLayoutOp):
            return at(op.operand)
        if isinstance(op, tl.ExpandDimsOp):
            axis = op.axis.data
            return self._pure(op.operand, idx[:axis] + idx[axis + 1 :])
        if isinstance(op, tl.ReshapeOp):
            src = self.vals[op.operand]
            assert isinstance(src, Tile)
            return self._pure(op.operand, self.delinearize(self.linearize(idx, shape), src.shape))
        if isinstance(op, tl.TransOp):
            return self._pure(op.operand, idx[::-1])
        if isinstance(op, tl.GatherOp):
            g = at(op.index)
            if g is None:
                return None
            where = list(idx)
            where[op.axis.data] = g
            return self._pure(op.src, where)
        return None

    # ---- shared-memory exchanges and scratch --------------------------------------------------

    def require_sync(self, what: str) -> None:
        if self.instance.single:  # pragma: no cover - a single-thread role holds no tile
            raise Unsupported(self.current_op, f"internal: {what} in a role run by one thread")

    def scratch(self, ctype: str, count: int, size: int) -> str:
        """Reserve scratch shared memory for the op being emitted (in the executing unit's own
        area); returns the name of a pointer to it."""
        off = -(-self.scratch_top // 16) * 16
        self.scratch_top = off + count * size
        inst = self.instance
        if inst.cta:
            self.scratch_max = max(self.scratch_max, self.scratch_top)
        else:
            key = id(inst.role)
            self.unit_scratch[key] = max(self.unit_scratch.get(key, 0), self.scratch_top)
        name = self.fresh("kir_scr")
        at = (
            f"{self.scratch_base + off}" if inst.scratch_at == "0" else f"{self.scratch_base + off} + {inst.scratch_at}"
        )
        self.w.line(f"{ctype}* {name} = reinterpret_cast<{ctype}*>(kir_smem + {at});", self.current_op)
        return name

    def store_to_scratch(self, v: SSAValue, ptr: str, op: Operation) -> None:
        x = self.val(v)
        assert isinstance(x, Tile)
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        self.w.line(f"{ptr}[{lin}] = {self.own(v, idx)};", op)
        self.close(closers)

    def own(self, v: SSAValue, idx: list[str]) -> str:
        """A tile's element in its own slot of a loop over its layout."""
        x = self.val(v)
        assert isinstance(x, Tile)
        return self.value_at(v, idx) if x.lazy else f"{x.name}[kir_i]"

    def sync(self, op: Operation | None = None) -> None:
        """A barrier of the executing unit (the CTA, a warpgroup or a warp)."""
        self.w.line(f"{self.instance.unit_sync};", op or self.current_op)

    def begin_exchange(
        self,
        operands: list[SSAValue],
        res_shape: tuple[int, ...],
        res_layout: object,
        op: Operation,
        anywhere: bool | tuple[SSAValue, ...] = False,
    ) -> bool:
        """Stage in shared memory the operands that are neither in place nor pure (`anywhere`:
        operands read at other elements than their own, even of the same shape: all of them, or
        those listed). Returns whether anything was staged (the caller then closes with
        `end_exchange`)."""
        need = []
        for v in operands:
            x = self.vals.get(v)
            if not isinstance(x, Tile) or v in need or x.lazy or v in self.resident:
                continue
            far = anywhere if isinstance(anywhere, bool) else v in anywhere
            if not far and x.shape == res_shape and x.layout == res_layout:
                continue
            need.append(v)
        if not need:
            return False
        self.require_sync(f"`{op.name}` on a value of another shape")
        self.w.line("{", op)
        self.w.indent()
        for v in need:
            x = self.val(v)
            assert isinstance(x, Tile)
            ptr = self.scratch(self.c.ctype(x.dtype), _prod(x.shape), DTYPES[x.dtype].nbytes)
            self.store_to_scratch(v, ptr, op)
            self.exchanged[v] = ptr
        self.sync(op)
        return True

    def end_exchange(self, staged: bool, op: Operation) -> None:
        if staged:
            self.sync(op)
            self.w.dedent()
            self.w.line("}", op)
        self.exchanged.clear()
        self.scratch_top = 0

    # ---- structure -----------------------------------------------------------------------------

    def emit_block(self, block: Block) -> None:
        for op in block.ops:
            self.emit_op(op)

    def emit_op(self, op: Operation) -> None:
        handler = self.handlers.get(type(op))
        if handler is None:
            raise Unsupported(op, f"the {self.dialect.name} backend cannot lower `{op.name}` here")
        prev, self.current_op = self.current_op, op
        try:
            handler(op)
            if self.resident_at:
                self.stage_resident(op)
        finally:
            self.current_op = prev

    def plan_resident(self) -> None:
        """Reserve shared memory for the gather sources that the CTA defines at the kernel's top
        level: each is written there once, where it is defined (one barrier), and every gather
        then reads it in place, instead of staging the source again at each gather (a write and
        two barriers; a binary search gathers from one table at every step)."""
        top = self.kernel.body.block
        offset = self.scratch_base
        for op in self.kernel.walk():
            if not isinstance(op, tl.GatherOp):
                continue
            src = op.src
            owner = src.owner
            if src in self.resident_at or not isinstance(owner, Operation) or owner.parent_block() is not top:
                continue
            if not isinstance(src.type, TileType):
                continue
            shape = self.static_shape(src.type)
            offset = -(-offset // 16) * 16
            self.resident_at[src] = offset
            offset += _prod(shape) * DTYPES[dtype_of(src.type)].nbytes
        self.scratch_base = -(-offset // 16) * 16

    def stage_resident(self, op: Operation) -> None:
        """Write the results of `op` that gathers read in place to their shared-memory home."""
        for r in op.results:
            at = self.resident_at.get(r)
            x = self.vals.get(r)
            if at is None or not isinstance(x, Tile) or x.lazy or not self.instance.cta:
                continue
            ct = self.c.ctype(x.dtype)
            ptr = self.fresh("kir_res")
            self.w.line(f"{ct}* {ptr} = reinterpret_cast<{ct}*>(kir_smem + {at});", op)
            self.store_to_scratch(r, ptr, op)
            self.sync(op)
            self.resident[r] = ptr

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

    # ---- scalars and constants ---------------------------------------------------------------

    def op_program_id(self, op: tl.ProgramIdOp) -> None:
        axis = op.axis.data
        expr = f"(int){self.dialect.block_index[axis]}" if axis < len(self.kernel.grid.data) else "0"
        self.define_scalar(op.res, expr, op)

    def op_num_programs(self, op: tl.NumProgramsOp) -> None:
        axis = op.axis.data
        expr = f"(int){self.dialect.grid_size[axis]}" if axis < len(self.kernel.grid.data) else "1"
        self.define_scalar(op.res, expr, op)

    def op_symbol(self, op: tl.SymValueOp) -> None:
        name = op.symbol.data
        if name in self.params:
            self.vals[op.res] = Scalar(self.param_name(name), "i32")
        elif name in self.shape_symbols:
            self.vals[op.res] = Scalar(self.symbol_name(name), "i32")
        else:
            raise Unsupported(op, f"`{name}` is neither a parameter nor a shape symbol of the arguments")

    def op_const(self, op: tl.ConstOp) -> None:
        self.vals[op.res] = Scalar(self.c.literal(op.number, op.dtype), op.dtype)

    # ---- tile construction ---------------------------------------------------------------------

    def try_lazy(self, res: SSAValue) -> bool:
        """Keep a tile that is a pure function of its index (aranges, constants, and what is
        computed from them and from scalars) unstored: each use recomputes its element."""
        shape = self.static_shape(res.type)
        self.vals[res] = Tile("", dtype_of(res.type), shape, self.layout_of(res), lazy=True)
        if self.pure(res, [f"kir_x{k}" for k in range(len(shape))]) is not None:
            return True
        del self.vals[res]
        return False

    def op_constructor(self, op: Operation) -> None:
        """arange, zeros and full are pure."""
        if not self.try_lazy(op.results[0]):
            raise Unsupported(op, f"internal: {op.name} is not pure")

    # ---- elementwise ---------------------------------------------------------------------------

    def elementwise_expr(self, op: Operation, parts: list[str]) -> str:
        c = self.c
        if isinstance(op, tl.BinaryOp):
            dt = dtype_of(op.lhs.type)
            return c.binary(op.fn.data, parts[0], parts[1], dt, self.const_value(op.rhs))
        if isinstance(op, tl.CompareOp):
            return c.compare(op.predicate.data, parts[0], parts[1], dtype_of(op.lhs.type))
        if isinstance(op, tl.UnaryOp):
            return c.unary(op.fn.data, parts[0], dtype_of(op.operand.type))
        if isinstance(op, tl.WhereOp):
            return f"({parts[0]} ? {parts[1]} : {parts[2]})"
        if isinstance(op, tl.CastOp):
            return c.cast(parts[0], dtype_of(op.operand.type), dtype_of(op.res.type))
        raise Unsupported(op, f"internal: {op.name} is not elementwise")

    def op_elementwise(self, op: Operation) -> None:
        res = op.results[0]
        if isinstance(res.type, ScalarType):
            parts = [self.val(v).name for v in op.operands]
            self.define_scalar(res, self.elementwise_expr(op, parts), op)
            return
        if self.try_lazy(res):
            return
        shape = self.static_shape(res.type)
        layout = self.layout_of(res)
        operands = list(op.operands)
        x = self.declare(res, op)
        assert isinstance(x, Tile)
        # trans reads each element at the transposed index, never in place
        staged = self.begin_exchange(operands, shape, layout, op, anywhere=isinstance(op, tl.TransOp))
        idx, _, closers = self.open_slots(layout, shape, op)
        if isinstance(op, tl.TransOp):
            self.w.line(f"{x.name}[kir_i] = {self.value_at(op.operand, idx[::-1])};", op)
        elif isinstance(op, tl.BroadcastOp):
            self.w.line(f"{x.name}[kir_i] = {self.fetch(op.operand, shape, layout, idx)};", op)
        else:
            parts = []
            for k, v in enumerate(operands):
                got = self.fetch(v, shape, layout, idx)
                if isinstance(self.val(v), Scalar) or got.endswith("[kir_i]"):
                    parts.append(got)
                else:
                    local = f"kir_a{k}"
                    self.w.line(f"const {self.c.ctype(dtype_of(v.type))} {local} = {got};", op)
                    parts.append(local)
            self.w.line(f"{x.name}[kir_i] = {self.elementwise_expr(op, parts)};", op)
        self.close(closers)
        self.end_exchange(staged, op)

    def op_reshape(self, op: Operation) -> None:
        """expand_dims, reshape and convert_layout keep the row-major element order: the
        cyclic layout holds the same elements in the same slots, so the result is the operand."""
        src = self.val(op.operands[0])
        res = op.results[0]
        if (isinstance(src, Scalar) or src.lazy) and self.try_lazy(res):
            return
        if isinstance(src, Scalar):
            raise Unsupported(op, f"internal: {op.name} of a scalar")
        shape = self.static_shape(res.type)
        layout = self.layout_of(res)
        if layout == src.layout and (isinstance(layout, Cyclic) or src.shape == shape):
            self.vals[res] = Tile(src.name, src.dtype, shape, layout)
            self.views.add(src.name)
            return
        x = self.declare(res, op)
        assert isinstance(x, Tile)
        # another layout: read each element of the operand by its row-major index
        staged = self.begin_exchange([op.operands[0]], shape, layout, op, anywhere=True)
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        self.w.line(f"{x.name}[kir_i] = {self.value_at(op.operands[0], self.delinearize(lin, src.shape))};", op)
        self.close(closers)
        self.end_exchange(staged, op)

    # ---- reductions, scans, top-k, dot --------------------------------------------------------

    def _reduce_setup(self, op: Operation, what: str) -> tuple[Tile, int, int, int, int]:
        x = self.val(op.operands[0])
        assert isinstance(x, Tile)
        self.require_sync(what)
        axis = op.axis.data  # type: ignore[attr-defined]
        n = x.shape[axis]
        return x, n, _prod(x.shape[:axis]), _prod(x.shape[axis + 1 :]), axis

    def strided(self, total: int, op: Operation) -> None:
        T, tid = self.instance.threads, self.instance.tid
        self.w.line(f"for (int kir_t = {tid}; kir_t < {total}; kir_t += {T}) {{", op)
        self.w.indent()

    def read_rows(self, x: Tile | Scalar, op: Operation, n: int, inner: int, ptr: str) -> None:
        """Read the reduced value of each (outer, inner) row from position 0 of the scratch."""
        if isinstance(x, Scalar):
            self.w.line(f"{x.name} = {ptr}[0];", op)
            return
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        self.w.line(f"{x.name}[kir_i] = {ptr}[({lin} / {inner}) * {n * inner} + {lin} % {inner}];", op)
        self.close(closers)

    def op_reduce(self, op: Operation) -> None:
        arg = isinstance(op, tl.ArgReduceOp)
        x, n, outer, inner, _ = self._reduce_setup(op, op.fn.data)
        dt = x.dtype
        ct = self.c.ctype(dt)
        w = self.w
        res = self.declare(op.results[0], op)
        w.line("{", op)
        w.indent()
        vals = self.scratch(ct, _prod(x.shape), DTYPES[dt].nbytes)
        idxs = self.scratch("int", _prod(x.shape), 4) if arg else None
        idx, lin, closers = self.open_slots(x.layout, x.shape, op)
        w.line(f"{vals}[{lin}] = {self.own(op.operands[0], idx)};", op)
        if idxs:
            w.line(f"{idxs}[{lin}] = ({lin} / {inner}) % {n};", op)
        self.close(closers)
        self.sync(op)
        m = n
        while m > 1:
            h = m // 2
            self.strided(outer * h * inner, op)
            w.line(f"const int kir_p = (kir_t / {h * inner}) * {n * inner} + kir_t % {h * inner};", op)
            w.line(f"const {ct} kir_a = {vals}[kir_p], kir_b = {vals}[kir_p + {h * inner}];", op)
            if idxs is None:
                fn = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}[op.fn.data]
                w.line(f"{vals}[kir_p] = {self.c.binary(fn, 'kir_a', 'kir_b', dt)};", op)
            else:
                w.line(f"if ({self.arg_better(op.fn.data, 'kir_b', 'kir_a', dt)}) {{", op)
                w.line(f"    {vals}[kir_p] = kir_b;", op)
                w.line(f"    {idxs}[kir_p] = {idxs}[kir_p + {h * inner}];", op)
                w.line("}", op)
            self.close(1)
            self.sync(op)
            if m % 2:  # the odd last element moves down to wait for the next level
                self.strided(outer * inner, op)
                w.line(f"const int kir_p = (kir_t / {inner}) * {n * inner} + kir_t % {inner};", op)
                w.line(f"{vals}[kir_p + {h * inner}] = {vals}[kir_p + {2 * h * inner}];", op)
                if idxs:
                    w.line(f"{idxs}[kir_p + {h * inner}] = {idxs}[kir_p + {2 * h * inner}];", op)
                self.close(1)
                self.sync(op)
            m = h + m % 2
        self.read_rows(res, op, n, inner, idxs or vals)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    def arg_better(self, fn: str, b: str, a: str, dt: str) -> str:
        """Whether the right candidate `b` replaces the left `a` (lower index) in argmax/argmin:
        strictly better, or NaN where `a` is not (the first NaN wins)."""
        x, y = self.c.widen(a, dt), self.c.widen(b, dt)
        cmp = ">" if fn == "argmax" else "<"
        if not DTYPES[dt].is_float:
            return f"{y} {cmp} {x}"
        return f"({x} == {x}) && ({y} != {y} || {y} {cmp} {x})"

    def op_scan(self, op: tl.ScanOp) -> None:
        x, n, outer, inner, _ = self._reduce_setup(op, op.fn.data)
        dt = x.dtype
        ct = self.c.ctype(dt)
        fn = {"cumsum": "add", "cumprod": "mul", "cummax": "maximum", "cummin": "minimum"}[op.fn.data]
        w = self.w
        res = self.declare(op.res, op)
        w.line("{", op)
        w.indent()
        vals = self.scratch(ct, _prod(x.shape), DTYPES[dt].nbytes)
        self.store_to_scratch(op.operand, vals, op)
        self.sync(op)
        self.strided(outer * inner, op)
        w.line(f"const int kir_p = (kir_t / {inner}) * {n * inner} + kir_t % {inner};", op)
        first, last, step = (n - 1, -1, -1) if op.reverse.data else (0, n, 1)
        w.line(f"{ct} kir_acc = {vals}[kir_p + {first * inner}];", op)
        w.line(f"for (int kir_j = {first + step}; kir_j != {last}; kir_j += {step}) {{", op)
        w.line(f"    const {ct} kir_b = {vals}[kir_p + kir_j * {inner}];", op)
        w.line(f"    kir_acc = {self.c.binary(fn, 'kir_acc', 'kir_b', dt)};", op)
        w.line(f"    {vals}[kir_p + kir_j * {inner}] = kir_acc;", op)
        w.line("}", op)
        self.close(1)
        self.sync(op)
        assert isinstance(res, Tile)
        idx, lin, closers = self.open_slots(res.layout, res.shape, op)
        w.line(f"{res.name}[kir_i] = {vals}[{lin}];", op)
        self.close(closers)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    def op_topk(self, op: tl.TopKOp) -> None:
        x = self.val(op.operand)
        assert isinstance(x, Tile)
        self.require_sync("topk")
        dt = x.dtype
        ct = self.c.ctype(dt)
        n = x.shape[-1]
        rows = _prod(x.shape[:-1])
        k = self.static(op.k.data, "k")
        if not 1 <= k <= n:
            raise Unsupported(op, f"topk: k = {k} must be between 1 and {n}")
        w = self.w
        results = [self.declare(op.values, op), self.declare(op.indices, op)]
        w.line("{", op)
        w.indent()
        vals = self.scratch(ct, rows * n, DTYPES[dt].nbytes)
        out_v = self.scratch(ct, rows * k, DTYPES[dt].nbytes)
        out_i = self.scratch("int", rows * k, 4)
        self.store_to_scratch(op.operand, vals, op)
        self.sync(op)
        # the rank of an element is the number of elements of its row that come before it
        # (better, or equal with a lower index; NaN ranks above every number)
        self.strided(rows * n, op)
        w.line(f"const int kir_row = kir_t / {n}, kir_j = kir_t % {n};", op)
        w.line(f"const {ct} kir_v = {vals}[kir_t];", op)
        w.line("int kir_rank = 0;", op)
        w.line(f"for (int kir_m = 0; kir_m < {n}; ++kir_m) {{", op)
        w.line(f"    const {ct} kir_u = {vals}[kir_row * {n} + kir_m];", op)
        w.line(
            f"    kir_rank += {self.topk_before('kir_u', 'kir_v', 'kir_m', 'kir_j', dt, bool(op.largest.data))};", op
        )
        w.line("}", op)
        w.line(f"if (kir_rank < {k}) {{", op)
        w.line(f"    {out_v}[kir_row * {k} + kir_rank] = kir_v;", op)
        w.line(f"    {out_i}[kir_row * {k} + kir_rank] = kir_j;", op)
        w.line("}", op)
        self.close(1)
        self.sync(op)
        for r, ptr in zip(results, (out_v, out_i), strict=True):
            assert isinstance(r, Tile)
            idx, lin, closers = self.open_slots(r.layout, r.shape, op)
            w.line(f"{r.name}[kir_i] = {ptr}[{lin}];", op)
            self.close(closers)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    def topk_before(self, u: str, v: str, m: str, j: str, dt: str, largest: bool) -> str:
        x, y = self.c.widen(u, dt), self.c.widen(v, dt)
        cmp = ">" if largest else "<"
        if not DTYPES[dt].is_float:
            return f"(({x} {cmp} {y}) || ({x} == {y} && {m} < {j}))"
        first = f"({x} != {x} && {y} == {y})" if largest else f"({x} == {x} && {y} != {y})"
        tie = f"((({x} == {y}) || ({x} != {x} && {y} != {y})) && {m} < {j})"
        return f"({first} || ({x} {cmp} {y}) || {tie})"

    def op_gather(self, op: tl.GatherOp) -> None:
        """Each thread reads its result elements from the source staged in shared memory (or
        recomputed, when pure) at the index's position along the axis. An index out of range
        is undefined here, as in Triton; the interpreter reports it."""
        if self.try_lazy(op.res):
            return
        res = self.declare(op.res, op)
        assert isinstance(res, Tile)
        staged = self.begin_exchange([op.src, op.index], res.shape, res.layout, op, anywhere=(op.src,))
        idx, _, closers = self.open_slots(res.layout, res.shape, op)
        self.w.line(f"const int kir_g = (int)({self.fetch(op.index, res.shape, res.layout, idx)});", op)
        at = list(idx)
        at[op.axis.data] = "kir_g"
        self.w.line(f"{res.name}[kir_i] = {self.value_at(op.src, at)};", op)
        self.close(closers)
        self.end_exchange(staged, op)

    def op_dot(self, op: tl.DotOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        assert isinstance(a, Tile) and isinstance(b, Tile)
        self.require_sync("dot")
        m, k = a.shape
        n = b.shape[1]
        in_dt, acc_dt = a.dtype, dtype_of(op.res.type)
        c = self.c
        if DTYPES[acc_dt].is_float:
            comp = c.compute_dtype(acc_dt)
        else:
            comp = "i64"
        cct = c.ctype(comp)
        w = self.w
        res = self.declare(op.res, op)
        assert isinstance(res, Tile)
        w.line("{", op)
        w.indent()
        pa = self.scratch(c.ctype(in_dt), m * k, DTYPES[in_dt].nbytes)
        pb = self.scratch(c.ctype(in_dt), k * n, DTYPES[in_dt].nbytes)
        self.store_to_scratch(op.lhs, pa, op)
        self.store_to_scratch(op.rhs, pb, op)
        self.sync(op)
        idx, lin, closers = self.open_slots(res.layout, res.shape, op)

        def widen(x: str) -> str:
            if DTYPES[acc_dt].is_float:
                return c.cast(x, in_dt, comp)
            return c.cast(c.cast(x, in_dt, acc_dt), acc_dt, "i64")

        w.line(f"{cct} kir_s = {c.zero(comp)};", op)
        w.line(f"for (int kir_k = 0; kir_k < {k}; ++kir_k) {{", op)
        xa, xb = widen(f"{pa}[{idx[0]} * {k} + kir_k]"), widen(f"{pb}[kir_k * {n} + {idx[1]}]")
        if comp == "i64":
            w.line(
                f"    kir_s = (long long)((unsigned long long)kir_s + (unsigned long long){xa} * (unsigned long long){xb});",
                op,
            )
        else:
            w.line(f"    kir_s += {xa} * {xb};", op)
        w.line("}", op)
        if op.acc is not None:
            wide = c.cast(self.fetch(op.acc, res.shape, res.layout, idx), acc_dt, comp)
            if comp == "i64":
                w.line(f"kir_s = (long long)((unsigned long long)kir_s + (unsigned long long){wide});", op)
            else:
                w.line(f"kir_s += {wide};", op)
        w.line(f"{res.name}[kir_i] = {c.cast('kir_s', comp, acc_dt)};", op)
        self.close(closers)
        self.sync(op)
        w.dedent()
        w.line("}", op)
        self.scratch_top = 0

    # ---- memory ---------------------------------------------------------------------------------

    def global_arg(self, v: SSAValue) -> GlobalArg:
        g = self.globals.get(v)
        if g is None:
            raise Unsupported(self.current_op, "internal: not a kernel argument")
        return g

    def element_ref(
        self,
        op: Operation,
        mem: SSAValue,
        access,
        indices,
        idx: list[str],
        shape: tuple[int, ...],
        layout: object = None,
    ) -> str:
        """The C++ lvalue of the element at `idx` of an access of shape `shape`, whose loop runs
        over `layout` (index tiles of a gather are read at the element)."""
        coords = self.coords(access, indices, idx, shape, len(shape_of(mem.type)), layout)
        if isinstance(mem.type, GlobalType):
            g = self.global_arg(mem)
            terms = []
            for cexpr, stride in zip(coords, g.strides, strict=True):
                s = self.c_sym(stride)
                terms.append(f"(long long)({cexpr})" + ("" if s == "1" else f" * {s}"))
            return f"{g.name}[{' + '.join(terms)}]"
        if isinstance(mem.type, SmemType):
            return self.smem_ref(mem, coords)
        raise Unsupported(op, f"cannot access {mem.type}")

    def coords(self, access, indices, idx: list[str], shape: tuple[int, ...], rank: int, layout: object) -> list[str]:
        """One C++ index per dimension of the memory: point indices (a scalar, or the index
        tile's element for a gather), slice starts plus the element's position, and the
        element's position in the trailing whole dimensions of a shared buffer."""
        out = []
        pos = 0
        indices = list(indices)
        for d in range(rank):
            if d < len(access.dims):
                v = indices[d]
                if access.dims[d] is None:
                    out.append(self.fetch(v, shape, layout, idx))
                else:
                    out.append(f"{self.val(v).name} + {idx[pos]}")
                    pos += 1
            else:
                out.append(idx[pos])
                pos += 1
        return out

    def smem_ref(self, mem: SSAValue, coords: list[str]) -> str:
        raise Unsupported(self.current_op, "shared buffers belong to the hardware-explicit level")

    def access_shape(self, op: Operation) -> tuple[int, ...]:
        return tuple(self.static(d, "the access extent") for d in op.shape)  # type: ignore[attr-defined]

    def mask_at(self, op: Operation, shape: tuple[int, ...], layout: object, idx: list[str]) -> str | None:
        if op.mask is None:  # type: ignore[attr-defined]
            return None
        return self.fetch(op.mask, shape, layout, idx)  # type: ignore[attr-defined]

    def memory_operands(self, op: Operation) -> list[SSAValue]:
        vals = [v for v in op.indices if isinstance(v.type, TileType)]  # type: ignore[attr-defined]
        if op.mask is not None:  # type: ignore[attr-defined]
            vals.append(op.mask)  # type: ignore[attr-defined]
        return vals

    def op_load(self, op: tl.LoadOp) -> None:
        shape = self.access_shape(op)
        c = self.c
        dt = dtype_of(op.res.type)
        other = self.val(op.other).name if op.other is not None else c.zero(dt)
        if not shape:
            ref = self.evicting(op, self.element_ref(op, op.mem, op.access.data, op.indices, [], ()))
            self.load_scalar(op, ref, None if op.mask is None else self.val(op.mask).name, other)
            return
        x = self.declare(op.res, op)
        assert isinstance(x, Tile)
        staged = self.begin_exchange(self.memory_operands(op), shape, x.layout, op)
        idx, _, closers = self.open_slots(x.layout, shape, op)
        mask = self.mask_at(op, shape, x.layout, idx)
        ref = self.evicting(op, self.element_ref(op, op.mem, op.access.data, op.indices, idx, shape, x.layout))
        self.w.line(self.load_element(op, f"{x.name}[kir_i]", ref, mask, other), op)
        self.close(closers)
        self.end_exchange(staged, op)

    def evicting(self, op: tl.LoadOp, ref: str) -> str:
        """The read of global element `ref` under the load's `evict` policy. The policy changes
        no value; a target without one (HIP, the MTIA simulator) reads `ref` as it is."""
        return ref

    def load_scalar(self, op: tl.LoadOp, ref: str, mask: str | None, other: str) -> None:
        """Define the result of a scalar load: element `ref`, or `other` where `mask` is false."""
        self.define_scalar(op.res, ref if mask is None else f"({mask} ? {ref} : {other})", op)

    def load_element(self, op: tl.LoadOp, dst: str, ref: str, mask: str | None, other: str) -> str:
        """The statement that loads element `ref` into `dst`, or `other` where `mask` is false."""
        if mask is None:
            return f"{dst} = {ref};"
        return f"{dst} = {mask} ? {ref} : {other};"

    def effect_open(self, op: Operation) -> int:
        """Open the guard of an effect performed once per unit (by its elected thread)."""
        if self.instance.single:
            return 0
        self.w.line(f"if ({self.instance.elect}) {{", op)
        self.w.indent()
        return 1

    def op_store(self, op: tl.StoreOp) -> None:
        shape = self.access_shape(op)
        value = self.val(op.value)
        if not shape:
            closers = self.effect_open(op)
            ref = self.element_ref(op, op.mem, op.access.data, op.indices, [], ())
            line = f"{ref} = {value.name};"
            if op.mask is not None:
                line = f"if ({self.val(op.mask).name}) {line}"
            self.w.line(line, op)
            self.close(closers)
            return
        # the loop runs over the value's own layout when it has the access shape
        same = isinstance(value, Tile) and value.shape == shape
        layout = value.layout if same else Cyclic(self.instance.threads, self.instance.tid)
        self.store_tile(op, shape, layout)

    def store_tile(self, op: tl.StoreOp, shape: tuple[int, ...], layout: object) -> None:
        staged = self.begin_exchange([op.value, *self.memory_operands(op)], shape, layout, op)
        idx, _, closers = self.open_slots(layout, shape, op)
        val = self.fetch(op.value, shape, layout, idx)
        mask = self.mask_at(op, shape, layout, idx)
        ref = self.element_ref(op, op.mem, op.access.data, op.indices, idx, shape, layout)
        self.w.line(f"{'if (' + mask + ') ' if mask else ''}{ref} = {val};", op)
        self.close(closers)
        self.end_exchange(staged, op)

    def op_atomic(self, op: tl.AtomicOp) -> None:
        shape = self.access_shape(op)
        dt = dtype_of(op.mem.type)
        if DTYPES[dt].nbytes < 2:
            raise Unsupported(
                op,
                f"atomic_{op.fn.data} on {dt} (1-byte elements) is not supported by the {self.dialect.name} backend",
                "use a 16-, 32- or 64-bit dtype",
            )
        if not shape:
            self.require_sync("a scalar atomic (its old value goes to every thread)")
            res = self.declare(op.res, op)
            self.w.line("{", op)
            self.w.indent()
            ptr = self.scratch(self.c.ctype(dt), 1, DTYPES[dt].nbytes)
            self.w.line(f"if ({self.instance.elect}) {{", op)
            self.w.indent()
            ref = self.element_ref(op, op.mem, op.access.data, op.indices, [], ())
            mask = self.val(op.mask).name if op.mask is not None else None
            self.atomic_line(op, f"{ptr}[0]", ref, self.val(op.value).name, dt, mask)
            self.close(1)
            self.sync(op)
            self.w.line(f"{res.name} = {ptr}[0];", op)
            self.sync(op)
            self.w.dedent()
            self.w.line("}", op)
            self.scratch_top = 0
            return
        x = self.declare(op.res, op)
        assert isinstance(x, Tile)
        staged = self.begin_exchange([op.value, *self.memory_operands(op)], shape, x.layout, op)
        idx, _, closers = self.open_slots(x.layout, shape, op)
        val = self.fetch(op.value, shape, x.layout, idx)
        mask = self.mask_at(op, shape, x.layout, idx)
        ref = self.element_ref(op, op.mem, op.access.data, op.indices, idx, shape, x.layout)
        self.atomic_line(op, f"{x.name}[kir_i]", ref, val, dt, mask)
        self.close(closers)
        self.end_exchange(staged, op)

    def atomic_line(self, op: tl.AtomicOp, dst: str, ref: str, val: str, dt: str, mask: str | None) -> None:
        """`dst = old value` after the read-modify-write of `ref` (a CAS loop, except where the
        hardware has the operation)."""
        w = self.w
        fn = op.fn.data
        ct = self.c.ctype(dt)
        native = {
            ("add", "f32"): "float",
            ("add", "f64"): "double",
            ("add", "i32"): "int",
            ("add", "u32"): "unsigned int",
            ("add", "u64"): "unsigned long long",
            ("add", "i64"): "unsigned long long",
            ("max", "i32"): "int",
            ("max", "u32"): "unsigned int",
            ("max", "i64"): "long long",
            ("max", "u64"): "unsigned long long",
            ("min", "i32"): "int",
            ("min", "u32"): "unsigned int",
            ("min", "i64"): "long long",
            ("min", "u64"): "unsigned long long",
            ("xchg", "f32"): "float",
            ("xchg", "i32"): "int",
            ("xchg", "u32"): "unsigned int",
            ("xchg", "u64"): "unsigned long long",
        }
        intrinsic = {"add": "atomicAdd", "max": "atomicMax", "min": "atomicMin", "xchg": "atomicExch"}[fn]
        if mask is not None:
            w.line(f"{dst} = {self.c.zero(dt)};", op)
            w.line(f"if ({mask}) {{", op)
            w.indent()
        key = (fn, dt)
        if key in native:
            carrier = native[key]
            w.line(f"{dst} = ({ct}){intrinsic}(reinterpret_cast<{carrier}*>(&{ref}), ({carrier}){val});", op)
        else:
            bits = DTYPES[dt].bits
            ut = _UNSIGNED_OF[bits]
            cas_t = "unsigned short" if bits == 16 else ut
            combine = {"add": "add", "max": "maximum", "min": "minimum", "xchg": None}[fn]
            w.line("{", op)
            w.indent()
            w.line(f"{cas_t}* kir_p = reinterpret_cast<{cas_t}*>(&{ref});", op)
            w.line(f"{cas_t} kir_old = *kir_p, kir_seen;", op)
            w.line("do {", op)
            w.indent()
            w.line("kir_seen = kir_old;", op)
            w.line(f"const {ct} kir_o = kir_bitcast<{ct}>(kir_seen);", op)
            w.line(f"const {ct} kir_v = {val};", op)
            new = "kir_v" if combine is None else self.c.binary(combine, "kir_o", "kir_v", dt)
            w.line(f"kir_old = atomicCAS(kir_p, kir_seen, kir_bitcast<{cas_t}>({new}));", op)
            w.dedent()
            w.line("} while (kir_old != kir_seen);", op)
            w.line(f"{dst} = kir_bitcast<{ct}>(kir_seen);", op)
            w.dedent()
            w.line("}", op)
        if mask is not None:
            self.close(1)

    # ---- the kernel ----------------------------------------------------------------------------------

    def plan(self) -> None:
        """Decisions taken before any code is written (the backend's shared memory, layouts)."""

    def emit_body(self) -> None:
        self.emit_block(self.kernel.body.block)

    def finish(self) -> None:
        """Work left once the body is written."""

    def helpers(self) -> list[str]:
        """Helper definitions written before the kernel."""
        return [COMMON_HELPERS]

    def extra_params(self) -> list[str]:
        """Kernel parameters after the tensors and the shape symbols."""
        return []

    def prologue_decls(self) -> list[tuple[str, str]]:
        """(name, C++) of the kernel's first lines; each is written only when the body uses it."""
        decls = [(self.param_name(p), f"constexpr int {self.param_name(p)} = {v};") for p, v in self.params.items()]
        return decls + [
            ("kir_tid", f"const int kir_tid = {self.dialect.thread_index};"),
            ("kir_lane", f"const int kir_lane = kir_tid % {self.dialect.warp_size};"),
            ("kir_warp", f"const int kir_warp = kir_tid / {self.dialect.warp_size};"),
            ("kir_wl", f"const int kir_wl = (kir_tid / {self.dialect.warp_size}) % 4;  // warp in its warpgroup"),
            ("kir_wg", f"const int kir_wg = kir_tid / {4 * self.dialect.warp_size};"),
            ("kir_smem_raw", f"extern {self.dialect.shared} __align__(1024) unsigned char kir_smem_raw[];"),
            ("kir_smem", "// the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)"),
            (
                "kir_smem",
                "unsigned char* kir_smem = kir_smem_raw + ((1024 - ((uintptr_t)kir_smem_raw & 1023)) & 1023);",
            ),
        ]

    def prologue(self, body: str) -> list[str]:
        keep: list[str] = []
        for name, text in reversed(self.prologue_decls()):
            if re.search(rf"\b{name}\b", body):
                keep.insert(0, text)
                if not text.startswith("//"):
                    body += "\n" + text
        return keep

    def scratch_bytes(self) -> int:
        return self.scratch_max

    def options(self, smem_bytes: int) -> dict:
        # `smem_bytes`: what a launch asks for; `smem_buffers`: the program's own buffers in it
        # (the rest is this backend's exchange space between threads and the alignment slack)
        return {"smem_bytes": smem_bytes, "smem_buffers": self.scratch_base, "threads": self.threads}

    def bind_arguments(self) -> tuple[list[ArgInfo], list[str]]:
        """The tensors as typed pointers and the shape symbols as ints: (args, signature)."""
        args: list[ArgInfo] = []
        sig: list[str] = []
        for name, v in self.kernel.args:
            t = v.type
            assert isinstance(t, GlobalType)
            cname = identifier(name, CXX_RESERVED, "t_")
            self.used.add(cname)
            shape = shape_of(t)
            if t.strides.data:
                strides = tuple(s.data for s in t.strides.data)
            else:
                strides = tuple(sx.fold(_product(shape[k + 1 :])) for k in range(len(shape)))
            self.globals[v] = GlobalArg(cname, t.dtype.data, shape, strides)
            sig.append(f"{'' if t.is_out else 'const '}{self.c.ctype(t.dtype.data)}* {cname}")
            args.append(ArgInfo(name, t.dtype.data, shape, t.is_out))
        sig += [f"const int {self.symbol_name(s)}" for s in self.shape_symbols]
        self.used.update(self.symbol_name(s) for s in self.shape_symbols)
        self.used.update(self.param_name(p) for p in self.params)
        return args, sig

    def generate(self) -> Lowered:
        """The kernel's source: helpers, signature, prologue and body, with the line map."""
        kernel = self.kernel
        entry = identifier(kernel.kernel_name, CXX_RESERVED)
        args, sig = self.bind_arguments()
        self.plan()
        self.plan_resident()
        body = self.w
        body.indent()
        self.emit_body()
        self.finish()
        body.dedent()
        sig += self.extra_params()
        prologue = self.prologue("\n".join(body.lines))
        out = SourceWriter()
        # the file's name only: generated source must not depend on where the checkout lives
        source_name = self.program.file.replace("\\", "/").rsplit("/", 1)[-1]
        out.line(f"// {kernel.kernel_name}: generated by KIR's {self.dialect.name} backend from {source_name}")
        for h in self.dialect.headers:
            out.line(f"#include <{h}>")
        for text in self.helpers():
            for line in text.strip("\n").split("\n"):
                out.line(line)
        out.line("")
        out.line(f"{self.dialect.kernel_qualifier} void __launch_bounds__({self.threads}, 1) {entry}(", kernel)
        for k, s in enumerate(sig):
            out.line(f"    {s}{',' if k < len(sig) - 1 else ') {'}", kernel)
        for line in prologue:
            out.line("    " + line, kernel)
        base = len(out.lines)
        out.lines += body.lines
        out.spans.update({n + base: s for n, s in body.spans.items()})
        out.line("}", kernel)
        smem = self.scratch_base + self.scratch_bytes()
        smem_bytes = smem + 1024 if smem else 0  # the slack of the 1024-byte alignment
        return Lowered(
            backend=self.dialect.name,
            source=out.text(),
            entry=entry,
            program=self.program,
            params=dict(self.params),
            args=args,
            shape_symbols=list(self.shape_symbols),
            grid=tuple(g.data for g in kernel.grid.data),
            num_warps=self.threads // 32,
            options=self.options(smem_bytes),
            line_spans=out.spans,
        )


def _product(dims) -> sx.SymExpr:
    out: sx.SymExpr = sx.Int(1)
    for d in dims:
        out = sx.Bin("*", out, d)
    return out


# ---- the emitter ---------------------------------------------------------------------------------


def unsupported_diagnostic(err: Unsupported, program: Program) -> Diagnostic:
    span: Span | None = span_of(err.op) if err.op is not None else None
    return Diagnostic(
        "lower.unsupported",
        "error",
        span or program.span(),
        err.message,
        err.hint or "rewrite this part of the program, or lower it with another backend",
    )


class CEmitter(Emitter):
    """The base of the C++ emitters: a backend gives its dialect table and its generator (a
    `KernelGen` subclass, whose `generate()` makes the `Lowered`)."""

    dialect: CDialect
    generator: type[KernelGen] = KernelGen

    def generate(self, program: Program, params: dict[str, int]) -> Lowered:
        return self.generator(program, params, self.dialect).generate()

    def accepts(self, program: Program) -> list[Diagnostic]:
        """Refusals at the program's default parameters (another choice of parameters can be
        refused by `emit`, with the same diagnostics)."""
        try:
            self.emit(program, dict(program.params))
        except KirError as err:
            return err.diagnostics
        return []

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:
        try:
            return self.generate(program, params)
        except Unsupported as err:
            raise KirError(unsupported_diagnostic(err, program)) from None
        except KirError:
            raise
        except Exception as err:  # a bug of the backend, never of the program
            raise KirError(
                Diagnostic(
                    "internal.lower",
                    "error",
                    program.span(),
                    f"internal error of the {self.name} backend: {type(err).__name__}: {err}",
                    f"this is a bug in lowering/emit/{self.name}.py; please report it with the program",
                )
            ) from err
