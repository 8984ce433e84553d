"""The Triton backend: a tile-level KIR program becomes a Python module with one `@triton.jit`
kernel (and the few `@triton.jit` helpers it calls).

    from lowering import lower
    out = lower(program, "triton", {"BLOCK": 256})
    out.source          # the module text; out.entry names the kernel in it

The kernel's arguments are, in order: one pointer per tensor argument, one i32 scalar per shape
symbol (`Lowered.shape_symbols` order), then one `tl.constexpr` per compile-time parameter
(passed by keyword; `Lowered.options["constexprs"]` maps their Python names to values). The
launch grid is the KIR grid; `num_warps` comes from `warps(N)` (`warpgroups(N)` is 4N warps).

How KIR's meaning is kept (the reference interpreter defines it):

- **Dtypes are exact.** A value of KIR dtype T is a Triton value of dtype T. A literal, a
  parameter, a shape symbol or a loop variable is "loose" (a Python number or a constexpr at
  run time: Triton specializes an i32 argument equal to 1 into a constexpr, and the
  interpreter runs loops over Python ints); it is written bare next to a tensor partner, whose
  dtype it then takes (Triton's weak typing of scalars), and materialized with
  `tl.full((), v, dtype)` where it stands alone.
- **Narrow floats compute in f32.** KIR rounds every bf16/f16/fp8 result once from f32; the
  emitted code converts the operands to f32, computes there and converts back, which is that
  definition and what Triton's interpreter can run (it stores bf16 as raw 16-bit integers and
  has only the f32 conversions right). Data movement (load, store, where, reshape, ...) stays in
  the narrow dtype.
- **Integer `/` and `%`** are Triton's `//` and `%` on integers, which truncate toward zero as
  in C; a divisor that is not a known non-zero constant is guarded to give KIR's `x / 0 == -1`
  and `x % 0 == x`. Shifts by the width or more are guarded to give 0 (or the sign fill).
- **Float `/`** is `tl.div_rn` (IEEE) for f32 and `/` for f64; `sqrt` is `tl.sqrt_rn` for f32.
  The other transcendentals are Triton's (fast, a few ulp from numpy's).
- **NaN propagates** through `maximum`/`minimum` and the max/min reductions and scans
  (`propagate_nan=ALL`); argmax/argmin count NaN as the extreme value and break ties toward the
  lower index (`_kir_argmax`/`_kir_argmin` combine functions).
- **Casts**: float to integer truncates and saturates, NaN gives 0 (`_kir_float_to_int`);
  sources wider than f32 that round to a narrow float go through f32 rounded to odd
  (`_kir_f64_to_f32_odd`) so that they round once; f32 to fp8 E4M3 gives NaN past the range and
  to E5M2 gives infinity (the hardware conversion saturates instead).
- **Loads** with a mask always pass `other` (zero by default): Triton leaves masked lanes
  undefined without it. Atomics return 0 on masked-off lanes, as in KIR.
- **dot** is `tl.dot` with the accumulate dtype as `out_dtype` (`input_precision="ieee"` for
  f32 operands, since KIR's f32 dot is an f32 dot, not TF32); an f16/bf16 accumulator is
  accumulated in f32 and rounded once. K must be at least 16 (32 for 8-bit operands): tl.dot's
  rule on NVIDIA in Triton 3.6 (M and N may be small; Triton pads them).
- **topk** is k rounds of "take the best element not taken yet" (`_kir_topk`), which gives the
  sorted values with their indices, NaN first and ties by index, as KIR specifies; Triton's own
  `tl.topk` returns no indices and needs a power-of-two k.
- **gather** is `tl.gather(src, index, axis)` (an i1 source goes through i8). Triton leaves an
  index out of range undefined; KIR calls it an error, which the interpreter reports.

What differs, by the nature of the hardware: the order in which a reduction combines elements
(a float sum can differ in the last bits); sums, products and their scans of bf16/f16/fp8 add in
f32 and round once, where KIR rounds every partial result to the dtype (so they come out more
accurate than the interpreter's); which lane wins when a store or an atomic hits one element
several times, and in which order an atomic's lanes see each other; the transcendentals' last
bits. Tile dimensions must be powers of two known at compile time (Triton's rule); a program
that breaks that is refused with `lower.tile-shape`. Offsets are computed in i32 (i64 where an
index is i64), so a tensor of more than 2^31 elements needs i64 indices.

The generated code reads like hand-written Triton: one line per KIR statement, unnamed
intermediate values written inline into their single user (long ones get a `_tN` name), KIR
names kept (with a suffix where Python would otherwise rebind a live name), and a loop-carried
variable kept as one Python variable (Triton turns a name assigned in a loop body into a
loop-carried value, so names from outside a loop body are never reused inside it). Every line
records the KIR op it came from (`Lowered.line_spans`), which is how a compile error in
generated code is reported at the KIR op (`lowering.compile_triton`).

Hints: `pipeline(stages = S)` becomes `tl.range(..., num_stages=S)`; `warp_specialize` becomes
`tl.range(..., warp_specialize=True)`, which Triton 3.6 applies where its automatic warp
specialization handles the loop and otherwise ignores (recorded in `Lowered.options["notes"]`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError
from kir.dialect import structure as st
from kir.dialect import tile as kt
from kir.dialect.types import GlobalType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.interp.values import cast as cast_values
from kir.program import Program, span_of
from lowering.emit.base import ArgInfo, Emitter, Lowered, SourceWriter, level_refusal, register
from lowering.emit.names import PYTHON_RESERVED, identifier

# ---- tables ------------------------------------------------------------------------------------

TL_DTYPE = {
    "i1": "tl.int1",
    "i8": "tl.int8",
    "i16": "tl.int16",
    "i32": "tl.int32",
    "i64": "tl.int64",
    "u8": "tl.uint8",
    "u16": "tl.uint16",
    "u32": "tl.uint32",
    "u64": "tl.uint64",
    "f16": "tl.float16",
    "bf16": "tl.bfloat16",
    "f32": "tl.float32",
    "f64": "tl.float64",
    "f8e4m3": "tl.float8e4nv",
    "f8e5m2": "tl.float8e5",
}
# Triton's names in a kernel signature (`ASTSource`), without the pointer star.
SIGNATURE_DTYPE = {
    "i1": "i1",
    "i8": "i8",
    "i16": "i16",
    "i32": "i32",
    "i64": "i64",
    "u8": "u8",
    "u16": "u16",
    "u32": "u32",
    "u64": "u64",
    "f16": "fp16",
    "bf16": "bf16",
    "f32": "fp32",
    "f64": "fp64",
    "f8e4m3": "fp8e4nv",
    "f8e5m2": "fp8e5",
}
NARROW_FLOATS = ("f16", "bf16", "f8e4m3", "f8e5m2")
UNSIGNED_OF = {"i8": "u8", "i16": "u16", "i32": "u32", "i64": "u64"}
BITS_TYPE = {8: "tl.int8", 16: "tl.int16", 32: "tl.int32", 64: "tl.int64"}

# Python precedence, loosest first: what needs parentheses where.
P_CMP, P_OR, P_XOR, P_AND, P_SHIFT, P_ADD, P_MUL, P_UNARY, P_ATOM = range(1, 10)
INFIX = {
    "add": ("+", P_ADD),
    "sub": ("-", P_ADD),
    "mul": ("*", P_MUL),
    "and": ("&", P_AND),
    "or": ("|", P_OR),
    "xor": ("^", P_XOR),
    "shl": ("<<", P_SHIFT),
    "shr": (">>", P_SHIFT),
}
COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# Unary math that differs only in spelling; f32/f64 operands (narrow floats go through f32).
MATH = {
    "exp": "tl.exp",
    "exp2": "tl.exp2",
    "log": "tl.log",
    "log2": "tl.log2",
    "rsqrt": "tl.rsqrt",
    "erf": "tl.math.erf",
    "sigmoid": "tl.sigmoid",
    "tanh": "libdevice.tanh",  # not in triton.language 3.6; libdevice on NVIDIA, ocml on AMD
    "sin": "tl.sin",
    "cos": "tl.cos",
    "floor": "tl.floor",
    "ceil": "tl.ceil",
    "abs": "tl.abs",
}
SQRT = {"f32": "tl.sqrt_rn", "f64": "tl.sqrt"}  # sqrt_rn: IEEE, as numpy; tl.sqrt is approximate for f32
# Atomics Triton 3.6 takes, by KIR dtype (bf16/f16 adds are native on sm_90 and gfx942).
ATOMIC_DTYPES = {
    "add": ("i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64"),
    "max": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "min": ("i32", "u32", "i64", "u64", "f32", "f64"),
    "xchg": ("i32", "u32", "i64", "u64", "f32", "f64"),
}
# (operand dtype, accumulate dtype) pairs tl.dot takes as they are.
NATIVE_DOT = {
    ("bf16", "f32"),
    ("f16", "f32"),
    ("f8e4m3", "f32"),
    ("f8e5m2", "f32"),
    ("f32", "f32"),
    ("f64", "f64"),
    ("i8", "i32"),
}
TILE_LIMIT = 1 << 20  # Triton's largest tile (elements)
INLINE_LIMIT = 64  # characters: a longer unnamed expression gets a line and a temporary name

# Helper functions, emitted into the module only when used. Each is @triton.jit.
HELPERS = {
    "_kir_max": """
@triton.jit
def _kir_max(a, b):
    # KIR's maximum: a NaN in either operand gives NaN
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
""",
    "_kir_min": """
@triton.jit
def _kir_min(a, b):
    # KIR's minimum: a NaN in either operand gives NaN
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
""",
    "_kir_imax": """
@triton.jit
def _kir_imax(a, b):
    return tl.maximum(a, b)
""",
    "_kir_imin": """
@triton.jit
def _kir_imin(a, b):
    return tl.minimum(a, b)
""",
    "_kir_prod": """
@triton.jit
def _kir_prod(a, b):
    return a * b
""",
    "_kir_argmax": """
@triton.jit
def _kir_argmax(v1, i1, v2, i2):
    # KIR's argmax: NaN counts as the largest value; ties go to the lower index
    n1 = v1 != v1
    n2 = v2 != v2
    tie = ((v1 == v2) | (n1 & n2)) & (i1 < i2)
    first = (v1 > v2) | (n1 & ~n2) | tie
    return tl.where(first, v1, v2), tl.where(first, i1, i2)
""",
    "_kir_argmin": """
@triton.jit
def _kir_argmin(v1, i1, v2, i2):
    # KIR's argmin: NaN counts as the smallest value; ties go to the lower index
    n1 = v1 != v1
    n2 = v2 != v2
    tie = ((v1 == v2) | (n1 & n2)) & (i1 < i2)
    first = (v1 < v2) | (n1 & ~n2) | tie
    return tl.where(first, v1, v2), tl.where(first, i1, i2)
""",
    "_kir_float_to_int": """
@triton.jit
def _kir_float_to_int(x, LO: tl.constexpr, HI: tl.constexpr, DT: tl.constexpr):
    # KIR's float-to-integer cast: truncate toward zero, saturate, NaN gives 0
    y = x.to(DT)
    y = tl.where(x >= HI, HI, y)
    y = tl.where(x <= LO, LO, y)
    return tl.where(x != x, 0, y)
""",
    "_kir_f64_to_f32_odd": """
@triton.jit
def _kir_f64_to_f32_odd(x):
    # f64 to f32 rounding to odd: a second rounding, to a float of at most 16 bits, then rounds once
    f = x.to(tl.float32)
    back = f.to(tl.float64)
    inexact = (back != x) & (x == x)
    bits = f.to(tl.int32, bitcast=True)
    bits = tl.where(inexact & (tl.abs(back) > tl.abs(x)), bits - 1, bits)
    return tl.where(inexact, (bits | 1).to(tl.float32, bitcast=True), f)
""",
    "_kir_to_f8e4m3": """
@triton.jit
def _kir_to_f8e4m3(x):
    # f32 to fp8 E4M3 as KIR rounds it: past 464 (above 448 once rounded) is NaN; the hardware saturates
    nan = tl.full(x.shape, 0x7F, tl.uint8).to(tl.float8e4nv, bitcast=True)
    return tl.where(tl.abs(x) > 464.0, nan, x.to(tl.float8e4nv))
""",
    "_kir_to_f8e5m2": """
@triton.jit
def _kir_to_f8e5m2(x):
    # f32 to fp8 E5M2 as KIR rounds it: from 61440 on is infinity; the hardware saturates
    inf = tl.where(x > 0, 0x7C, 0xFC).to(tl.uint8).to(tl.float8e5, bitcast=True)
    return tl.where(tl.abs(x) >= 61440.0, inf, x.to(tl.float8e5))
""",
    "_kir_topk": """
@triton.jit
def _kir_topk(key, x, K: tl.constexpr, LARGEST: tl.constexpr, WORST: tl.constexpr, BITS: tl.constexpr):
    # KIR's topk along the last axis of a 2-D tile: K rounds, each taking the best element not
    # taken yet (NaN ranks above every number, ties go to the lowest index). `key` is what is
    # compared (x, or x in f32); the values come back bit-exact, with their i32 indices.
    N: tl.constexpr = key.shape[1]
    lanes = tl.arange(0, N)[None, :]
    slots = tl.arange(0, K)[None, :]
    bits = x.to(BITS, bitcast=True)
    taken = tl.zeros(key.shape, tl.int1)
    vals = tl.zeros((key.shape[0], K), BITS)
    idx = tl.zeros((key.shape[0], K), tl.int32)
    for r in tl.static_range(K):
        nan = ~taken & (key != key)
        num = ~taken & (key == key)
        if LARGEST:
            best = tl.max(tl.where(num, key, WORST), axis=1, keep_dims=True)
            use_nan = tl.max(nan.to(tl.int32), axis=1, keep_dims=True) > 0
        else:
            best = tl.min(tl.where(num, key, WORST), axis=1, keep_dims=True)
            use_nan = tl.max(num.to(tl.int32), axis=1, keep_dims=True) == 0
        hit = tl.where(use_nan, nan, num & (key == best))
        at = tl.min(tl.where(hit, lanes, N), axis=1, keep_dims=True)
        chosen = lanes == at
        taken = taken | chosen
        v = tl.sum(tl.where(chosen, bits, 0), axis=1, keep_dims=True).to(BITS)
        vals = tl.where(slots == r, v, vals)
        idx = tl.where(slots == r, at, idx)
    return vals.to(x.dtype, bitcast=True), idx
""",
}


# Names the generated code uses besides the kernel's own: never given to a KIR value.
GENERATED_RESERVED = frozenset(PYTHON_RESERVED | {"libdevice", "float", "range", *HELPERS})


def _ident(name: str) -> str:
    return identifier(name, GENERATED_RESERVED)


def _refuse(op: Operation | None, rule: str, message: str, hint: str = "") -> KirError:
    return KirError(Diagnostic(rule, "error", span_of(op) if op is not None else None, message, hint))


# ---- values ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Val:
    """A KIR value in the generated code: a Python expression and the value's KIR type."""

    text: str
    dtype: str
    shape: tuple[int, ...] = ()
    prec: int = P_ATOM
    # A Python number or constexpr at run time (literal, parameter, shape symbol, loop
    # variable): it takes the dtype of a tensor partner, and is materialized where it stands alone.
    loose: bool = False
    known: int | float | bool | None = None  # the value, when known at emit time
    # Bounds of a loose integer, where known: Python's `//` and `%` agree with C's on operands
    # known to be non-negative (sizes, parameters, counters from 0).
    lo: int | None = None
    hi: int | None = None

    def wrap(self, prec: int) -> str:
        return self.text if self.prec >= prec else f"({self.text})"


def _float_text(value: float, dtype: str) -> str:
    """A Python literal whose f64 value, rounded to f32 (or f64), is exactly `value`."""
    if value != value:
        return 'float("nan")'
    if value in (float("inf"), float("-inf")):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    if dtype == "f64":
        return repr(float(value))
    f = np.float32(value)
    if f == 0 or 1e-4 <= abs(f) < 1e16:
        short = np.format_float_positional(f, unique=True, trim="0")
    else:
        short = np.format_float_scientific(f, unique=True, trim="0")
    if short.endswith("."):
        short += "0"
    # Python reads the text as f64 and Triton rounds that to f32: check the two roundings land on f.
    return short if np.float32(float(short)) == f else repr(float(f))


def _rounded(number: float, dtype: str) -> float:
    """A KIR float constant's value in its dtype (constants are rounded to their dtype)."""
    return float(np.asarray(number, dtype=np.float64).astype(DTYPES[dtype].numpy).astype(np.float64))


def _literal(number: int | float | bool, dtype: str) -> Val:
    d = DTYPES[dtype]
    if d.kind == "bool":
        return Val("True" if number else "False", dtype, loose=True, known=bool(number))
    if d.is_int:
        n = int(number)
        return Val(str(n), dtype, prec=P_ATOM if n >= 0 else P_UNARY, loose=True, known=n, lo=n, hi=n)
    value = _rounded(float(number), dtype)
    text = _float_text(value, "f64" if dtype == "f64" else "f32")
    neg = text.startswith("-") or text == 'float("-inf")'
    return Val(text, dtype, prec=P_UNARY if neg and not text.startswith("float") else P_ATOM, loose=True, known=value)


# ---- static expressions ------------------------------------------------------------------------


class _Statics:
    """Renders static expressions (shapes, bounds, strides) as Python text over the kernel's
    constexpr parameters and i32 shape-symbol arguments."""

    def __init__(self, params: dict[str, int], param_names: dict[str, str], symbol_names: dict[str, str]):
        self.params = params
        self.param_names = param_names
        self.symbol_names = symbol_names

    def value(self, expr: sx.SymExpr) -> int | None:
        """The value when the expression depends only on parameters."""
        try:
            return expr.evaluate(self.params)
        except (KeyError, ZeroDivisionError):
            return None

    def render(self, expr: sx.SymExpr) -> tuple[str, int]:
        """(text, precedence). Parameter-only expressions keep the parameters' names where the
        Python reading gives the same value (C division of sizes), else fold to the number."""
        expr = sx.fold(expr)
        value = self.value(expr)
        if value is not None:
            text, prec = self._render(expr, fold_calls=True)
            try:
                same = (
                    eval(
                        text,
                        {"__builtins__": {}},
                        dict(zip(self.param_names.values(), self.params.values(), strict=True)),
                    )
                    == value
                )  # noqa: S307 - our own text over ints
            except Exception:  # noqa: BLE001 - any failure means: use the number
                same = False
            return (text, prec) if same else (str(value), P_ATOM if value >= 0 else P_UNARY)
        return self._render(expr, fold_calls=False)

    def _render(self, expr: sx.SymExpr, fold_calls: bool) -> tuple[str, int]:
        if isinstance(expr, sx.Int):
            return str(expr.value), P_ATOM if expr.value >= 0 else P_UNARY
        if isinstance(expr, sx.Sym):
            if expr.name in self.param_names:
                return self.param_names[expr.name], P_ATOM
            return self.symbol_names[expr.name], P_ATOM
        assert isinstance(expr, sx.Bin)
        if expr.op in ("cdiv", "min", "max"):
            value = self.value(expr) if fold_calls else None
            if value is not None:
                return str(value), P_ATOM if value >= 0 else P_UNARY
            fn = {"cdiv": "tl.cdiv", "min": "tl.minimum", "max": "tl.maximum"}[expr.op]
            return f"{fn}({self._render(expr.lhs, fold_calls)[0]}, {self._render(expr.rhs, fold_calls)[0]})", P_ATOM
        op, prec = {"+": ("+", P_ADD), "-": ("-", P_ADD), "*": ("*", P_MUL), "/": ("//", P_MUL), "%": ("%", P_MUL)}[
            expr.op
        ]
        lt, lp = self._render(expr.lhs, fold_calls)
        rt, rp = self._render(expr.rhs, fold_calls)
        lt = lt if lp >= prec else f"({lt})"
        rt = rt if rp > prec else f"({rt})"
        return f"{lt} {op} {rt}", prec

    def static_text(self, expr: sx.SymExpr, op: Operation | None, what: str) -> tuple[str, int]:
        """A compile-time size: parameters only (Triton needs constexpr shapes)."""
        if self.value(expr) is None:
            raise _refuse(
                op,
                "lower.tile-shape",
                f"{what} `{expr}` depends on a shape symbol; Triton needs tile shapes known at compile time",
                "make the extent a parameter (BLOCK) and mask against the shape symbol",
            )
        return self.render(expr)


# ---- where values are used: liveness and inlining ----------------------------------------------

PURE_INLINE = (
    kt.BinaryOp,
    kt.CompareOp,
    kt.UnaryOp,
    kt.WhereOp,
    kt.CastOp,
    kt.ArangeOp,
    kt.ZerosOp,
    kt.FullOp,
    kt.BroadcastOp,
    kt.ReshapeOp,
    kt.TransOp,
    kt.ReduceOp,
    kt.ArgReduceOp,
    kt.ScanOp,
    kt.GatherOp,
    kt.DotOp,
)
ALWAYS_INLINE = (kt.ConstOp, kt.SymValueOp, kt.ProgramIdOp, kt.NumProgramsOp, kt.ExpandDimsOp)
SIDE_EFFECTS = (kt.StoreOp, kt.AtomicOp, st.ForOp, st.IfOp)


class _Layout:
    """Program order of the ops, which ops are written inline into their user, and the last
    (effective) use of every value: a use inside a loop keeps a value from outside the loop
    alive to the loop's end, and a use by an inlined op counts where that op's text lands."""

    def __init__(self, kernel: st.KernelOp):
        self.pos: dict[Operation, int] = {}
        self.end: dict[Operation, int] = {}
        self.loops: dict[Operation, tuple[st.ForOp, ...]] = {}
        self._number(kernel.body.block, ())
        self.inline: dict[Operation, bool] = {}
        for op in self.pos:
            self.inline[op] = self._inlined(op)
        self._last: dict[SSAValue, int] = {}

    def _number(self, block: Block, loops: tuple[st.ForOp, ...]) -> None:
        for op in block.ops:
            self.pos[op] = len(self.pos)
            self.loops[op] = loops
            inner = (*loops, op) if isinstance(op, st.ForOp) else loops
            for region in op.regions:
                for b in region.blocks:
                    self._number(b, inner)
            self.end[op] = len(self.pos) - 1

    def _inlined(self, op: Operation) -> bool:
        if len(op.results) != 1 or op.results[0].name_hint:
            return False  # a KIR name stays a name
        if isinstance(op, ALWAYS_INLINE):
            return True
        res = op.results[0]
        uses = list(res.uses)
        if len(uses) != 1:
            return False
        user = uses[0].operation
        if user.parent_block() is not op.parent_block() or isinstance(user, kt.TopKOp):
            return False  # not into another region, nor into topk (which reads its operand twice)
        if isinstance(op, PURE_INLINE):
            return True
        if isinstance(op, kt.LoadOp):
            # Moving a load to its user is safe when nothing in between writes memory.
            block_ops = list(op.parent_block().ops)
            between = block_ops[block_ops.index(op) + 1 : block_ops.index(user)]
            return not any(isinstance(o, SIDE_EFFECTS) for o in between)
        return False

    def defined_in(self, value: SSAValue, loop: st.ForOp) -> bool:
        """Whether a value is made inside the loop (each iteration makes it anew)."""
        if isinstance(value, BlockArgument):
            owner = value.block.parent_op()
            if owner is loop:
                return True
        else:
            owner = value.owner
        return owner in self.pos and self.pos[loop] < self.pos[owner] <= self.end[loop]

    def consumers(self, value: SSAValue):
        """The ops whose generated line reads the value: its users, and for a user written
        inline, that user's own consumers."""
        for use in value.uses:
            user = use.operation
            if user not in self.pos:
                continue
            if self.inline.get(user) and user.results:
                for r in user.results:
                    yield from self.consumers(r)
            else:
                yield user

    def last_use(self, value: SSAValue, skip: Region | None = None) -> int:
        """The position after which the value's Python name is free (-1: never read), not
        counting reads inside the region `skip` (the other branch of an `if`)."""
        if skip is None and value in self._last:
            return self._last[value]
        best = -1
        for user in self.consumers(value):
            if skip is not None and skip.is_ancestor(user):
                continue
            p = self.pos[user]
            for loop in self.loops[user]:  # outermost first
                if not self.defined_in(value, loop):
                    p = max(p, self.end[loop])  # read again by the next iteration
                    break
            best = max(best, p)
        if skip is None:
            self._last[value] = best
        return best

    def used(self, op: Operation) -> bool:
        return any(self.last_use(r) >= 0 for r in op.results)


# ---- the writer ------------------------------------------------------------------------------


@dataclass
class _Scope:
    names: set[str] = field(default_factory=set)
    # Names bound outside this region that a value of the same type may take here: the loop's
    # carried variables, or the results of the `if` this region is a branch of (assigning them
    # is what the region ends with anyway).
    carried: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    # A branch's sibling: the reads there of a value do not keep it alive in this branch.
    sibling: Region | None = None


@dataclass(frozen=True)
class _Arg:
    name: str  # the Python name
    dtype: str
    strides: tuple[tuple[str, int], ...]  # (text, precedence) per dimension


class _KernelWriter:
    def __init__(self, program: Program, params: dict[str, int]):
        self.program = program
        self.kernel = program.kernel
        self.params = params
        self.w = SourceWriter()
        self.helpers: list[str] = []
        self.uses_libdevice = False
        self.notes: list[str] = []
        self.vals: dict[SSAValue, Val] = {}
        self.layout = _Layout(self.kernel)
        self.scopes: list[_Scope] = [_Scope()]
        self.holder: dict[str, SSAValue] = {}
        self.yield_names: dict[SSAValue, str] = {}  # value -> the carried variable it ends up in
        self.temp_count = 0

        self.entry = _ident(self.kernel.kernel_name)
        self.param_names = {p: _ident(p) for p in self.kernel.params}
        self.symbol_names = {s: _ident(s) for s in self.kernel.shape_symbols}
        self.statics = _Statics(params, self.param_names, self.symbol_names)
        self.reserved = {*GENERATED_RESERVED, self.entry}
        self.args: dict[SSAValue, _Arg] = {}
        for name, arg in self.kernel.args:
            assert isinstance(arg.type, GlobalType)
            self.args[arg] = _Arg(_ident(name), dtype_of(arg.type), self._strides(arg.type))
        self.reserved |= (
            {a.name for a in self.args.values()} | set(self.param_names.values()) | set(self.symbol_names.values())
        )

    # ---- names -----------------------------------------------------------------------------

    def _strides(self, t: GlobalType) -> tuple[tuple[str, int], ...]:
        if t.strides.data:
            return tuple(self.statics.render(s.data) for s in t.strides.data)
        shape = shape_of(t)
        out = []
        for d in range(len(shape)):
            rest = shape[d + 1 :]
            if not rest:
                out.append(("1", P_ATOM))
                continue
            expr = rest[0]
            for e in rest[1:]:
                expr = sx.Bin("*", expr, e)
            out.append(self.statics.render(expr))
        return tuple(out)

    def _bound(self, name: str) -> bool:
        return any(name in s.names for s in self.scopes)

    def _can_take(self, name: str, value: SSAValue, at: int, vtype, same_type: bool) -> bool:
        if name in self.reserved:
            return False
        if not self._bound(name):
            return True
        holder = self.holder.get(name)
        dead = holder is None or self.layout.last_use(holder) <= at
        scope = self.scopes[-1]
        if name in scope.names and name not in scope.carried:
            return dead and (not same_type or holder is None or self._type(holder) == vtype)
        if name in scope.carried:
            if scope.sibling is not None and holder is not None:
                dead = self.layout.last_use(holder, skip=scope.sibling) <= at
            return dead and scope.carried[name] == vtype
        return False

    def _type(self, value: SSAValue) -> tuple[str, tuple[int, ...]]:
        return dtype_of(value.type), self._shape(value, None)

    def _name(self, value: SSAValue, at: int, same_type: bool = False, prefer: Sequence[str] = ()) -> str:
        """A Python name for a value defined at position `at`: its KIR name when no live value
        holds it in this region, else the name with a suffix. Names bound outside the region
        are not reused (Triton would make them loop-carried), except the loop's own carried
        variables by a value of their type; `same_type` asks the same of any reused name (an
        `if`'s results, which Triton checks against the value before the `if`). Names in `prefer`
        come first, and so does the variable a value is yielded to at the end of its region."""
        vtype = self._type(value)
        wanted = [*prefer, *([self.yield_names[value]] if value in self.yield_names else [])]
        for name in wanted:
            if self._can_take(name, value, at, vtype, same_type):
                return self._bind(name, value)
        if value.name_hint:
            base = _ident(value.name_hint)
            if self._can_take(base, value, at, vtype, same_type):
                return self._bind(base, value)
            n = 1
            while self._bound(f"{base}_{n}") or f"{base}_{n}" in self.reserved:
                n += 1
            return self._bind(f"{base}_{n}", value)
        while True:
            name = f"_t{self.temp_count}"
            self.temp_count += 1
            if not self._bound(name) and name not in self.reserved:
                return self._bind(name, value)

    def _bind(self, name: str, value: SSAValue) -> str:
        self.scopes[-1].names.add(name)
        self.holder[name] = value
        return name

    # ---- values ------------------------------------------------------------------------------

    def _shape(self, value: SSAValue | None, op: Operation | None, t=None) -> tuple[int, ...]:
        t = value.type if t is None else t
        dims = []
        for d in shape_of(t):
            n = self.statics.value(d)
            if n is None:
                raise _refuse(
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
                raise _refuse(
                    op,
                    "lower.tile-shape",
                    f"a tile of shape {list(shape)}: Triton's tile dimensions are powers of two",
                    "choose power-of-two tile parameters and mask the remainder",
                )
            total *= n
        if total > TILE_LIMIT:
            raise _refuse(
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
        return Val(f"{v.wrap(P_ATOM)}.to(tl.float32)", "f32", v.shape)

    def narrow(self, v: Val, dtype: str) -> Val:
        """An f32 result rounded back to a narrow float dtype."""
        if dtype not in NARROW_FLOATS:
            return v
        return self.cast(v, dtype)

    def define(self, op: Operation, value: SSAValue, v: Val) -> None:
        """Bind a value: inline (its text travels to the user) or a line `name = text`. A long
        expression gets a line of its own even where it could be inlined, to keep lines short."""
        if self.layout.inline.get(op) and len(v.text) <= INLINE_LIMIT:
            self.vals[value] = v
            return
        if v.loose and any(isinstance(u.operation, st.ForOp | st.YieldOp) for u in value.uses):
            v = self.strict(v)  # a loop-carried variable is a tensor of its type from the start
        name = self._name(value, self.layout.pos[op])
        self.w.line(f"{name} = {v.text}", op)
        self.vals[value] = Val(name, v.dtype, v.shape, P_ATOM, v.loose, v.known, v.lo, v.hi)

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
                ArgInfo(name, dtype_of(a.type), shape_of(a.type), a.type.is_out)  # type: ignore[attr-defined]
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
                raise _refuse(
                    op,
                    "lower.unsupported",
                    f"the Triton backend cannot lower `{op.name}`",
                    "lower this program with the gluon or cuda backend",
                )
            if (
                op.results
                and not isinstance(op, SIDE_EFFECTS)
                and not isinstance(op, kt.LoadOp | kt.AtomicOp)
                and not self.layout.used(op)
            ):
                continue  # dead pure code
            if isinstance(op, kt.LoadOp) and not self.layout.used(op):
                continue  # a dead load reads nothing anyone sees
            handler(self, op)

    def need(self, helper: str) -> str:
        if helper not in self.helpers:
            self.helpers.append(helper)
        return helper

    # ---- program and constants ---------------------------------------------------------------

    def op_program_id(self, op: kt.ProgramIdOp) -> None:
        self.define(op, op.res, Val(f"tl.program_id({op.axis.data})", "i32"))

    def op_num_programs(self, op: kt.NumProgramsOp) -> None:
        self.define(op, op.res, Val(f"tl.num_programs({op.axis.data})", "i32"))

    def op_symbol(self, op: kt.SymValueOp) -> None:
        name = op.symbol.data
        if name in self.param_names:
            value = self.params[name]
            self.define(op, op.res, Val(self.param_names[name], "i32", loose=True, known=value, lo=value, hi=value))
        elif name in self.symbol_names:  # a size: never negative
            self.define(op, op.res, Val(self.symbol_names[name], "i32", loose=True, lo=0))
        else:
            raise _refuse(
                op, "lower.unbound-symbol", f"`{name}` is neither a parameter nor a shape symbol of the arguments"
            )

    def op_const(self, op: kt.ConstOp) -> None:
        self.define(op, op.res, _literal(op.number, op.dtype))

    def op_arange(self, op: kt.ArangeOp) -> None:
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        start = self.statics.value(op.start.data)
        if start is None:
            raise _refuse(
                op,
                "lower.tile-shape",
                f"arange starts at `{op.start.data}`, a shape symbol; Triton needs it at compile time",
                "start at 0 and add the offset",
            )
        n_text = self.statics.static_text(sx.fold(sx.Bin("-", op.end.data, op.start.data)), op, "arange extent")[0]
        text = f"tl.arange(0, {n_text})"
        if start != 0:
            s_text, s_prec = self.statics.render(op.start.data)
            s_text = s_text if s_prec >= P_ADD else f"({s_text})"
            self.define(op, op.res, Val(f"{s_text} + {text}", "i32", shape, P_ADD))
        else:
            self.define(op, op.res, Val(text, "i32", shape))

    def _shape_text(self, op: Operation, t) -> str:
        dims = [self.statics.static_text(d, op, "tile dimension")[0] for d in shape_of(t)]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"

    def op_zeros(self, op: kt.ZerosOp) -> None:
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        d = dtype_of(op.res.type)
        if d in NARROW_FLOATS:
            text = f"tl.zeros({self._shape_text(op, op.res.type)}, tl.float32).to({TL_DTYPE[d]})"
        else:
            text = f"tl.zeros({self._shape_text(op, op.res.type)}, {TL_DTYPE[d]})"
        self.define(op, op.res, Val(text, d, shape))

    def op_full(self, op: kt.FullOp) -> None:
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        d = dtype_of(op.res.type)
        v = self.val(op.value)
        shape_text = self._shape_text(op, op.res.type)
        if v.loose and d in NARROW_FLOATS:
            text = f"tl.full({shape_text}, {v.text}, tl.float32).to({TL_DTYPE[d]})"
        elif v.loose:
            text = f"tl.full({shape_text}, {v.text}, {TL_DTYPE[d]})"
        else:
            text = f"tl.broadcast_to({v.text}, {shape_text})"
        self.define(op, op.res, Val(text, d, shape))

    # ---- elementwise -------------------------------------------------------------------------

    def op_binary(self, op: kt.BinaryOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        d = dtype_of(op.res.type)
        shape = self._shape(op.res, op)
        fn = op.fn.data
        if a.loose and b.loose:
            loose = self._loose_int(fn, a, b, d)
            if loose is not None:
                self.define(op, op.res, loose)
                return
            a = self.strict(a)
        if d == "i1":
            v = self._bool_binary(fn, a, b)
        elif DTYPES[d].is_float:
            v = self.narrow(self._float_binary(fn, self.f32(a), self.f32(b), "f64" if d == "f64" else "f32"), d)
        else:
            v = self._int_binary(fn, a, b, d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def _loose_int(self, fn: str, a: Val, b: Val, d: str) -> Val | None:
        """Integer arithmetic on two loose operands (sizes, parameters, counters), written as
        Python arithmetic where that gives KIR's number: + - * (these values are far from
        overflowing), and // % when both operands are known non-negative and the divisor
        positive. None where the operation must be done on a Triton tensor."""
        if DTYPES[d].kind not in ("int", "uint"):
            return None

        def add(x, y):
            return None if x is None or y is None else x + y

        if fn in ("add", "sub", "mul"):
            if fn == "add":
                lo, hi = add(a.lo, b.lo), add(a.hi, b.hi)
            elif fn == "sub":
                lo = None if a.lo is None or b.hi is None else a.lo - b.hi
                hi = None if a.hi is None or b.lo is None else a.hi - b.lo
            elif (a.lo or -1) >= 0 and (b.lo or -1) >= 0:
                lo = a.lo * b.lo  # type: ignore[operator]
                hi = None if a.hi is None or b.hi is None else a.hi * b.hi
            else:
                lo = hi = None
        elif fn in ("div", "rem") and a.lo is not None and a.lo >= 0 and b.lo is not None and b.lo > 0:
            if fn == "div":
                lo = a.lo // b.hi if b.hi is not None else 0
                hi = a.hi // b.lo if a.hi is not None else None
            else:
                lo, hi = 0, b.hi - 1 if b.hi is not None else None
        else:
            return None
        sym, prec = INFIX[fn] if fn in INFIX else ({"div": "//", "rem": "%"}[fn], P_MUL)
        text = f"{a.wrap(prec)} {sym} {b.wrap(prec + 1)}"
        return Val(text, d, (), prec, loose=True, lo=lo, hi=hi)

    @staticmethod
    def _infix(sym: str, prec: int, a: Val, b: Val, d: str) -> Val:
        return Val(f"{a.wrap(prec)} {sym} {b.wrap(prec + 1)}", d, prec=prec)

    def _bool_binary(self, fn: str, a: Val, b: Val) -> Val:
        # i1 arithmetic wraps in one bit: + and - are xor, * is and; x / 0 is 1 and x % 0 is x.
        table = {
            "add": ("^", P_XOR),
            "sub": ("^", P_XOR),
            "mul": ("&", P_AND),
            "and": ("&", P_AND),
            "or": ("|", P_OR),
            "xor": ("^", P_XOR),
            "maximum": ("|", P_OR),
            "minimum": ("&", P_AND),
        }
        if fn in table:
            return self._infix(*table[fn], a, b, "i1")
        not_b = Val(f"~{b.wrap(P_UNARY)}", "i1", prec=P_UNARY)
        if fn == "div":
            return self._infix("|", P_OR, a, not_b, "i1")
        # rem, and shifts by 1 (any set amount clears the one bit)
        return self._infix("&", P_AND, a, not_b, "i1")

    def _float_binary(self, fn: str, a: Val, b: Val, d: str) -> Val:
        if fn in ("add", "sub", "mul"):
            return self._infix(*INFIX[fn], a, b, d)
        if fn == "div":
            return Val(f"tl.div_rn({a.text}, {b.text})", d) if d == "f32" else self._infix("/", P_MUL, a, b, d)
        if fn == "rem":
            return self._infix("%", P_MUL, a, b, d)  # frem: C fmod, as KIR
        if fn in ("maximum", "minimum"):
            return Val(f"tl.{fn}({a.text}, {b.text}, propagate_nan=tl.PropagateNan.ALL)", d)
        if fn == "pow":
            self.uses_libdevice = True
            return Val(f"libdevice.pow({self.strict(a).text}, {self.strict(b).text})", d)
        raise AssertionError(fn)

    def _nonzero(self, v: Val) -> bool:
        return v.known is not None and v.known != 0

    def _int_binary(self, fn: str, a: Val, b: Val, d: str) -> Val:
        bits = DTYPES[d].bits
        signed = DTYPES[d].kind == "int"
        if fn in ("add", "sub", "mul", "and", "or", "xor"):
            return self._infix(*INFIX[fn], a, b, d)
        if fn in ("maximum", "minimum"):
            return Val(f"tl.{fn}({a.text}, {b.text})", d)
        if fn in ("div", "rem"):
            sym = "//" if fn == "div" else "%"
            if self._nonzero(b):
                return self._infix(sym, P_MUL, a, b, d)
            # KIR: x / 0 is -1 (all ones) and x % 0 is x; keep the hardware away from a zero divisor.
            b = self.strict(b)
            zero = f"{b.wrap(P_CMP + 1)} == 0"
            safe = Val(f"tl.where({zero}, 1, {b.text})", d)
            q = self._infix(sym, P_MUL, a, safe, d)
            fill = "-1" if signed else str((1 << bits) - 1)
            return Val(f"tl.where({zero}, {fill if fn == 'div' else a.text}, {q.text})", d)
        if fn in ("shl", "shr"):
            sym = INFIX[fn][0]
            if b.known is not None and 0 <= int(b.known) < bits:
                return self._infix(sym, P_SHIFT, a, b, d)
            # KIR: a shift by the width or more (or a negative amount) gives 0, or the sign fill.
            b = self.strict(b)
            far = (
                f"({b.wrap(P_CMP + 1)} < 0) | ({b.wrap(P_CMP + 1)} >= {bits})"
                if signed
                else f"{b.wrap(P_CMP + 1)} >= {bits}"
            )
            fill = f"{a.wrap(P_SHIFT)} >> {bits - 1}" if fn == "shr" and signed else "0"
            amount = Val(f"{b.wrap(P_AND)} & {bits - 1}", d, prec=P_AND)
            shifted = self._infix(sym, P_SHIFT, a, amount, d)
            return Val(f"tl.where({far}, {fill}, {shifted.text})", d)
        raise AssertionError(fn)

    def op_cmp(self, op: kt.CompareOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        shape = self._shape(op.res, op)
        d = dtype_of(op.lhs.type)
        sym = COMPARE[op.predicate.data]
        if a.loose and b.loose and d != "i1":
            # Counters, sizes and literals: Python compares them as Triton would.
            self.define(op, op.res, Val(f"{a.wrap(P_CMP + 1)} {sym} {b.wrap(P_CMP + 1)}", "i1", shape, P_CMP, True))
            return
        if d in NARROW_FLOATS:
            a, b = self.f32(a), self.f32(b)
        elif d == "i1":  # compare as 0 and 1 (Triton's i1 is signed: true would be -1)
            a = (
                Val(f"{a.wrap(P_ATOM)}.to(tl.int8)", "i8")
                if not a.loose
                else Val("1" if a.known else "0", "i8", loose=True)
            )
            b = (
                Val(f"{b.wrap(P_ATOM)}.to(tl.int8)", "i8")
                if not b.loose
                else Val("1" if b.known else "0", "i8", loose=True)
            )
            if a.loose and b.loose:
                a = self.strict(a)
        self.define(op, op.res, Val(f"{a.wrap(P_CMP + 1)} {sym} {b.wrap(P_CMP + 1)}", "i1", shape, P_CMP))

    def op_unary(self, op: kt.UnaryOp) -> None:
        x = self.val(op.operand)
        d = dtype_of(op.res.type)
        shape = self._shape(op.res, op)
        fn = op.fn.data
        if x.loose and DTYPES[d].kind in ("bool", "uint"):
            x = self.strict(x)  # Python's ~True is -2, and -5 is no u32
        if fn == "not":
            self.define(op, op.res, Val(f"~{x.wrap(P_UNARY)}", d, shape, P_UNARY, x.loose))
            return
        if fn == "neg" and d not in NARROW_FLOATS:
            self.define(op, op.res, Val(f"-{x.wrap(P_UNARY)}", d, shape, P_UNARY, x.loose))
            return
        if fn == "abs" and not DTYPES[d].is_float:
            self.define(op, op.res, Val(f"tl.abs({self.strict(x).text})", d, shape))
            return
        x32 = self.f32(self.strict(x))
        cd = "f64" if d == "f64" else "f32"
        if fn == "neg":
            v = Val(f"-{x32.wrap(P_UNARY)}", cd, prec=P_UNARY)
        elif fn == "sqrt":
            v = Val(f"{SQRT[cd]}({x32.text})", cd)
        else:
            if MATH[fn].startswith("libdevice."):
                self.uses_libdevice = True
            v = Val(f"{MATH[fn]}({x32.text})", cd)
        v = self.narrow(v, d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def op_where(self, op: kt.WhereOp) -> None:
        c, a, b = self.val(op.cond), self.val(op.lhs), self.val(op.rhs)
        d = dtype_of(op.res.type)
        if d in NARROW_FLOATS:  # a bare literal would become a bf16 constant, which the interpreter lacks
            a, b = self.strict(a), self.strict(b)
        elif a.loose and b.loose:
            a = self.strict(a)
        self.define(op, op.res, Val(f"tl.where({c.text}, {a.text}, {b.text})", d, self._shape(op.res, op)))

    def op_cast(self, op: kt.CastOp) -> None:
        v = self.cast(self.val(op.operand), dtype_of(op.res.type))
        self.define(op, op.res, Val(v.text, v.dtype, self._shape(op.res, op), v.prec))

    def cast(self, v: Val, dst: str) -> Val:
        """KIR's cast (see kir.interp.values.cast) from v's dtype to `dst`."""
        src = v.dtype
        if src == dst:
            return v
        s, t = DTYPES[src], DTYPES[dst]
        if v.loose and v.known is not None:  # a constant: KIR's cast, at emit time
            number = cast_values(np.asarray(v.known).astype(s.numpy), s, t)
            return _literal(number.item(), dst)
        if (
            v.loose
            and s.kind in ("int", "uint")
            and (dst in ("f32", "f64") or t.kind in ("int", "uint"))
            and s.bits <= 32
        ):
            # A size or a counter: tl.cast takes the Python int or constexpr as well as a tensor.
            return Val(f"tl.cast({v.text}, {TL_DTYPE[dst]})", dst)
        if t.kind == "bool":
            if v.loose:
                v = self.strict(v)
            if src in NARROW_FLOATS:
                v = self.f32(v)
            return Val(f"{v.wrap(P_CMP + 1)} != 0", "i1", prec=P_CMP)
        v = self.strict(v)
        to = TL_DTYPE[dst]
        if s.kind == "bool":
            if dst in NARROW_FLOATS:
                return self.cast(Val(f"{v.wrap(P_ATOM)}.to(tl.float32)", "f32"), dst)
            return Val(f"{v.wrap(P_ATOM)}.to({to})", dst)
        if s.is_float and t.is_float:
            if src in NARROW_FLOATS:
                v = self.f32(v)  # exact
                if dst == "f32":
                    return v
                return self.cast(v, dst)
            if dst in NARROW_FLOATS:
                if src == "f64":
                    v = Val(f"{self.need('_kir_f64_to_f32_odd')}({v.text})", "f32")
                return self._f32_to_narrow(v, dst)
            return Val(f"{v.wrap(P_ATOM)}.to({to})", dst)
        if s.is_float:  # to an integer: truncate, saturate, NaN gives 0
            x = self.f32(v)
            lo, hi = np.iinfo(t.numpy).min, np.iinfo(t.numpy).max
            return Val(f"{self.need('_kir_float_to_int')}({x.text}, {lo}, {hi}, {to})", dst)
        if t.is_float:  # from an integer
            if dst == "f64":
                return Val(f"{v.wrap(P_ATOM)}.to(tl.float64)", dst)
            if dst == "f32":
                if s.bits == 64:  # KIR goes through f64: round there first, as it does
                    return Val(f"{v.wrap(P_ATOM)}.to(tl.float64).to(tl.float32)", dst)
                return Val(f"{v.wrap(P_ATOM)}.to(tl.float32)", dst)
            if s.bits <= 16:  # exact in f32
                return self._f32_to_narrow(Val(f"{v.wrap(P_ATOM)}.to(tl.float32)", "f32"), dst)
            odd = f"{self.need('_kir_f64_to_f32_odd')}({v.wrap(P_ATOM)}.to(tl.float64))"
            return self._f32_to_narrow(Val(odd, "f32"), dst)
        return Val(f"{v.wrap(P_ATOM)}.to({to})", dst)  # integer to integer wraps

    def _f32_to_narrow(self, v: Val, dst: str) -> Val:
        if dst == "f8e4m3":
            return Val(f"{self.need('_kir_to_f8e4m3')}({v.text})", dst)
        if dst == "f8e5m2":
            return Val(f"{self.need('_kir_to_f8e5m2')}({v.text})", dst)
        return Val(f"{v.wrap(P_ATOM)}.to({TL_DTYPE[dst]})", dst)

    # ---- shape ops ---------------------------------------------------------------------------

    def op_expand_dims(self, op: kt.ExpandDimsOp) -> None:
        x = self.val(op.operand)
        shape = self._shape(op.res, op)
        if not x.shape:
            text = f"tl.broadcast_to({self.strict(x).text}, (1,))"
        else:
            subs = [":"] * len(x.shape)
            subs.insert(op.axis.data, "None")
            text = f"{x.wrap(P_ATOM)}[{', '.join(subs)}]"
        self.define(op, op.res, Val(text, x.dtype, shape))

    def op_broadcast(self, op: kt.BroadcastOp) -> None:
        x = self.strict(self.val(op.operand))
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        self.define(op, op.res, Val(f"tl.broadcast_to({x.text}, {self._shape_text(op, op.res.type)})", x.dtype, shape))

    def op_reshape(self, op: kt.ReshapeOp) -> None:
        x = self.val(op.operand)
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        self.define(op, op.res, Val(f"tl.reshape({x.text}, {self._shape_text(op, op.res.type)})", x.dtype, shape))

    def op_trans(self, op: kt.TransOp) -> None:
        x = self.val(op.operand)
        self.define(op, op.res, Val(f"tl.trans({x.text})", x.dtype, self._shape(op.res, op)))

    # ---- reductions, scans, dot ----------------------------------------------------------------

    def op_reduce(self, op: kt.ReduceOp) -> None:
        x = self.val(op.operand)
        d, axis, fn = x.dtype, op.axis.data, op.fn.data
        shape = self._shape(op.res, op)
        if d == "i1":
            i = f"{x.wrap(P_ATOM)}.to(tl.int32)"
            text = {
                "sum": f"(tl.sum({i}, axis={axis}) & 1) != 0",
                "prod": f"tl.min({i}, axis={axis}) != 0",
                "max": f"tl.max({i}, axis={axis}) != 0",
                "min": f"tl.min({i}, axis={axis}) != 0",
            }[fn]
            self.define(op, op.res, Val(text, d, shape, P_CMP))
            return
        if DTYPES[d].is_float:
            src = self.f32(x)
            combine = {"sum": None, "max": "_kir_max", "min": "_kir_min", "prod": "_kir_prod"}[fn]
        else:
            src = x
            combine = {"sum": None, "max": None, "min": None, "prod": "_kir_prod"}[fn]
            if fn == "prod" and DTYPES[d].bits < 32:
                src = Val(f"{x.wrap(P_ATOM)}.to({'tl.int32' if DTYPES[d].kind == 'int' else 'tl.uint32'})", d)
        if combine is None:
            v = Val(f"tl.{fn}({src.text}, axis={axis})", src.dtype)
        else:
            v = Val(f"tl.reduce({src.text}, {axis}, {self.need(combine)})", src.dtype)
        if DTYPES[d].is_float:
            v = self.narrow(v, d)
        elif DTYPES[d].bits < 32:  # Triton accumulates narrow integers in 32 bits; wrap back
            v = Val(f"{v.wrap(P_ATOM)}.to({TL_DTYPE[d]})", d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def _lane_index(self, op: Operation, t, axis: int) -> str:
        """An i32 tile of type `t`'s shape holding each element's index along `axis`."""
        dims = [self.statics.static_text(d, op, "tile dimension")[0] for d in shape_of(t)]
        lanes = f"tl.arange(0, {dims[axis]})"
        if len(dims) == 1:
            return lanes
        subs = ["None"] * len(dims)
        subs[axis] = ":"
        return f"tl.broadcast_to({lanes}[{', '.join(subs)}], ({', '.join(dims)}))"

    def op_argreduce(self, op: kt.ArgReduceOp) -> None:
        x = self.val(op.operand)
        axis, fn = op.axis.data, op.fn.data
        shape = self._shape(op.res, op)
        if DTYPES[x.dtype].is_float:
            key = self.f32(x)
            lanes = self._lane_index(op, op.operand.type, axis)
            text = f"tl.reduce(({key.text}, {lanes}), {axis}, {self.need('_kir_' + fn)})[1]"
        else:
            key = Val(f"{x.wrap(P_ATOM)}.to(tl.int8)", "i8") if x.dtype == "i1" else x
            text = f"tl.{fn}({key.text}, axis={axis}, tie_break_left=True)"
        self.define(op, op.res, Val(text, "i32", shape))

    def op_scan(self, op: kt.ScanOp) -> None:
        x = self.val(op.operand)
        d, axis, fn = x.dtype, op.axis.data, op.fn.data
        rev = ", reverse=True" if op.reverse.data else ""
        shape = self._shape(op.res, op)
        if d == "i1":  # as 0/1: a sum is a parity, a product a running and, max an or
            i = f"{x.wrap(P_ATOM)}.to(tl.int32)"
            if fn == "cumsum":
                text = f"(tl.cumsum({i}, axis={axis}{rev}) & 1) != 0"
            else:
                combine = self.need("_kir_imax" if fn == "cummax" else "_kir_imin")
                text = f"tl.associative_scan({i}, {axis}, {combine}{rev}) != 0"
            self.define(op, op.res, Val(text, d, shape, P_CMP))
            return
        is_float = DTYPES[d].is_float
        src = self.f32(x) if is_float else x
        if fn in ("cumsum", "cumprod"):
            v = Val(f"tl.{fn}({src.text}, axis={axis}{rev})", src.dtype)
        else:
            combine = (
                {"cummax": "_kir_max", "cummin": "_kir_min"}[fn]
                if is_float
                else {"cummax": "_kir_imax", "cummin": "_kir_imin"}[fn]
            )
            v = Val(f"tl.associative_scan({src.text}, {axis}, {self.need(combine)}{rev})", src.dtype)
        if is_float:
            v = self.narrow(v, d)
        elif DTYPES[d].bits < 32:
            v = Val(f"{v.wrap(P_ATOM)}.to({TL_DTYPE[d]})", d)
        self.define(op, op.res, Val(v.text, d, shape, v.prec))

    def op_gather(self, op: kt.GatherOp) -> None:
        src, index = self.val(op.src), self.val(op.index)
        shape = self._shape(op.res, op)
        self._check_tile(op, shape)
        data = f"{src.wrap(P_ATOM)}.to(tl.int8)" if src.dtype == "i1" else src.text
        text = f"tl.gather({data}, {index.text}, {op.axis.data})"
        if src.dtype == "i1":
            self.define(op, op.res, Val(f"{text} != 0", "i1", shape, P_CMP))
        else:
            self.define(op, op.res, Val(text, src.dtype, shape))

    def op_topk(self, op: kt.TopKOp) -> None:
        x = self.val(op.operand)
        shape = self._shape(op.values, op)
        self._check_tile(op, shape)
        if len(x.shape) > 2:
            raise _refuse(
                op,
                "lower.unsupported",
                "the Triton backend lowers topk of 1-D and 2-D tiles",
                "reshape the tile to 2-D first",
            )
        k_text = self.statics.static_text(op.k.data, op, "topk k")[0]
        largest = bool(op.largest.data)
        d = x.dtype
        data = Val(f"{x.wrap(P_ATOM)}.to(tl.int8)", "i8") if d == "i1" else x
        key = self.f32(data)
        if DTYPES[data.dtype].is_float:
            worst = 'float("-inf")' if largest else 'float("inf")'
        else:
            info = np.iinfo(DTYPES[data.dtype].numpy)
            worst = str(info.min if largest else info.max)
        bits = BITS_TYPE[DTYPES[data.dtype].bits]
        if len(x.shape) == 1:
            key = Val(f"{key.wrap(P_ATOM)}[None, :]", key.dtype)
            data = Val(f"{data.wrap(P_ATOM)}[None, :]", data.dtype)
        call = f"{self.need('_kir_topk')}({key.text}, {data.text}, {k_text}, {largest}, {worst}, {bits})"
        vals_name = self._name(op.values, self.layout.pos[op])
        idx_name = self._name(op.indices, self.layout.pos[op])
        self.w.line(f"{vals_name}, {idx_name} = {call}", op)
        if len(x.shape) == 1:
            self.w.line(f"{vals_name} = tl.reshape({vals_name}, ({k_text},))", op)
            self.w.line(f"{idx_name} = tl.reshape({idx_name}, ({k_text},))", op)
        if d == "i1":
            self.w.line(f"{vals_name} = {vals_name} != 0", op)
        self.vals[op.values] = Val(vals_name, d, shape)
        self.vals[op.indices] = Val(idx_name, "i32", shape)

    def op_dot(self, op: kt.DotOp) -> None:
        a, b = self.val(op.lhs), self.val(op.rhs)
        acc = self.val(op.acc) if op.acc is not None else None
        shape = self._shape(op.res, op)
        k = a.shape[1]
        src, acc_d = a.dtype, dtype_of(op.res.type)
        if DTYPES[acc_d].is_float:
            cd = "f64" if acc_d == "f64" else "f32"
        elif acc_d == "i32" and src == "i8":
            cd = "i32"
        else:
            raise _refuse(
                op,
                "lower.unsupported",
                f"dot of {src} operands into {acc_d}: Triton's tl.dot takes floats (into f32/f64) and i8 (into i32)",
                "accumulate in f32 (dot<f32>) or i32 from i8 operands",
            )
        if (src, cd) not in NATIVE_DOT:
            a, b = self.cast(a, cd), self.cast(b, cd)
        min_k = 32 if DTYPES[a.dtype].bits == 8 else 16  # Triton 3.6 on NVIDIA (AMD takes any K)
        if k < min_k:
            raise _refuse(
                op,
                "lower.dot-shape",
                f"dot with K = {k}: Triton's tl.dot needs K >= {min_k} for {a.dtype} operands",
                f"load K in blocks of at least {min_k} (or write the product as a broadcast multiply and a sum)",
            )
        parts = [a.text, b.text]
        if acc is not None:
            parts.append(self.cast(acc, cd).text if acc_d != cd else acc.text)
        parts.append(f"out_dtype={TL_DTYPE[cd]}")
        if a.dtype in ("f32", "f64"):
            parts.append('input_precision="ieee"')  # KIR's f32 dot is f32, not TF32
        v = Val(f"tl.dot({', '.join(parts)})", cd)
        if cd != acc_d:
            v = self.cast(v, acc_d)
        self.define(op, op.res, Val(v.text, acc_d, shape, v.prec))

    # ---- memory ------------------------------------------------------------------------------

    def address(self, op: Operation) -> str:
        """The pointer (or pointer tile) of an access: base + sum of index * stride."""
        mem: SSAValue = op.mem  # type: ignore[attr-defined]
        if mem not in self.args:
            raise _refuse(op, "lower.unsupported", "the Triton backend accesses global tensors only", "")
        arg = self.args[mem]
        dims = op.access.data.dims  # type: ignore[attr-defined]
        indices = list(op.indices)  # type: ignore[attr-defined]
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
                text = lanes if v.known == 0 else f"({v.wrap(P_ADD)} + {lanes})"
                if n_slices > 1:
                    subs = ["None"] * n_slices
                    subs[k] = ":"
                    text += f"[{', '.join(subs)}]"
                k += 1
                term = Val(text, v.dtype)
            stride, sprec = arg.strides[dim]
            if stride == "1":
                terms.append(term.wrap(P_ADD + 1))
            else:
                terms.append(f"{term.wrap(P_MUL)} * {stride if sprec > P_MUL else '(' + stride + ')'}")
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
            raise _refuse(
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
        if not self.layout.used(op):
            self.w.line(call, op)
            return
        if mask is not None:  # KIR: masked-off lanes return 0
            call = f"tl.where({mask}, {call}, 0)"
        name = self._name(op.res, self.layout.pos[op])
        self.w.line(f"{name} = {call}", op)
        self.vals[op.res] = Val(name, d, shape)

    # ---- structure ---------------------------------------------------------------------------

    def _carried_name(self, op: Operation, init: SSAValue, arg: SSAValue, taken: set[str]) -> tuple[str, bool]:
        """The Python variable of a loop-carried value, and whether the init must be copied in."""
        iv = self.vals[init]
        at = self.layout.pos[op]
        owner = init.owner if isinstance(init, OpResult) else None
        if (
            owner is not None
            and not iv.loose
            and init.name_hint == arg.name_hint
            and iv.text in self.scopes[-1].names
            and self.holder.get(iv.text) is init
            and self.layout.last_use(init) <= at
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
        scope = _Scope({var_name})
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

    def _fresh(self, hint: str) -> str:
        base = _ident(hint) if hint else "i"
        name, n = base, 0
        while self._bound(name) or name in self.reserved:
            n += 1
            name = f"{base}_{n}"
        self.scopes[-1].names.add(name)
        return name

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
        at = self.layout.end[op]
        before = dict(self.holder)
        names: list[str] = []
        for k, res in enumerate(op.res):
            # The value a branch passes through unchanged (`y` in `if c { y = y * 2.0 }`) lends
            # the result its variable.
            through = [
                self.vals[y].text
                for y in (op.then_body.block.last_op.operands[k], op.else_body.block.last_op.operands[k])
                if not op.is_ancestor(y.owner if isinstance(y, OpResult) else y.block.parent_op())
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
            self.scopes.append(_Scope(carried=dict(types), sibling=op.else_body if i == 0 else op.then_body))
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


HANDLERS = {
    kt.ProgramIdOp: _KernelWriter.op_program_id,
    kt.NumProgramsOp: _KernelWriter.op_num_programs,
    kt.SymValueOp: _KernelWriter.op_symbol,
    kt.ConstOp: _KernelWriter.op_const,
    kt.ArangeOp: _KernelWriter.op_arange,
    kt.ZerosOp: _KernelWriter.op_zeros,
    kt.FullOp: _KernelWriter.op_full,
    kt.BinaryOp: _KernelWriter.op_binary,
    kt.CompareOp: _KernelWriter.op_cmp,
    kt.UnaryOp: _KernelWriter.op_unary,
    kt.WhereOp: _KernelWriter.op_where,
    kt.CastOp: _KernelWriter.op_cast,
    kt.ExpandDimsOp: _KernelWriter.op_expand_dims,
    kt.BroadcastOp: _KernelWriter.op_broadcast,
    kt.ReshapeOp: _KernelWriter.op_reshape,
    kt.TransOp: _KernelWriter.op_trans,
    kt.ReduceOp: _KernelWriter.op_reduce,
    kt.ArgReduceOp: _KernelWriter.op_argreduce,
    kt.ScanOp: _KernelWriter.op_scan,
    kt.TopKOp: _KernelWriter.op_topk,
    kt.GatherOp: _KernelWriter.op_gather,
    kt.DotOp: _KernelWriter.op_dot,
    kt.LoadOp: _KernelWriter.op_load,
    kt.StoreOp: _KernelWriter.op_store,
    kt.AtomicOp: _KernelWriter.op_atomic,
    st.ForOp: _KernelWriter.op_for,
    st.IfOp: _KernelWriter.op_if,
}


class TritonEmitter(Emitter):
    name = "triton"
    levels = ("tile",)

    def accepts(self, program: Program) -> list[Diagnostic]:
        refusals = level_refusal(program, "triton", self.levels)
        if refusals:
            return refusals
        out = []
        for op in program.kernel.walk():
            if op is program.kernel or isinstance(op, st.YieldOp):
                continue
            if type(op) not in HANDLERS:
                out.append(
                    Diagnostic(
                        "lower.unsupported",
                        "error",
                        span_of(op),
                        f"the Triton backend cannot lower `{op.name}`",
                        "lower this program with the gluon or cuda backend",
                    )
                )
        return out

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:
        return _KernelWriter(program, params).write()


register(TritonEmitter())
