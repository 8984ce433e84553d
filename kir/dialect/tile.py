"""Tile-level ops: the portable part of KIR that every target accepts.

Each op infers its result type in its constructor (so the builder API and the parser share one
set of typing rules) and re-checks it in `verify_`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from kir import symexpr as sx
from kir.dialect.errors import RuleViolation
from kir.dialect.opdef import KirOperation, op_definition
from kir.dialect.traits import GLOBAL, SHARED, Elementwise, Pure, Reads, Writes
from kir.dialect.types import (
    Access,
    AccessAttr,
    GlobalType,
    ScalarType,
    SmemType,
    SymAttr,
    TileType,
    broadcast_shapes,
    dtype_of,
    scalar,
    shape_of,
    shape_text,
    sym,
    tile_type,
    value_type,
)
from kir.dtypes import DTYPES

INT_DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def _value(t: Attribute) -> bool:
    return isinstance(t, ScalarType | TileType)


def _require_value(v: SSAValue, what: str) -> None:
    if not _value(v.type):
        raise RuleViolation(
            f"{what} must be a scalar or a tile, not {v.type}",
            rule="types.value",
            hint="memory is only named inside an access: read it with load(a[...]) first",
        )


def _broadcast(a: SSAValue, b: SSAValue, what: str) -> tuple[sx.SymExpr, ...]:
    shape = broadcast_shapes(shape_of(a.type), shape_of(b.type))
    if shape is None:
        raise RuleViolation(
            f"{what}: shapes {shape_text(shape_of(a.type))} and {shape_text(shape_of(b.type))} do not broadcast",
            rule="types.broadcast",
            hint="dimensions aligned on the right must be equal or 1: add an axis (x[:, None]) or fix the tile sizes",
        )
    return shape


def _same_dtype(a: SSAValue, b: SSAValue, what: str) -> str:
    da, db = dtype_of(a.type), dtype_of(b.type)
    if da != db:
        raise RuleViolation(
            f"{what}: operand dtypes differ ({da} and {db}); use cast<T>(x)",
            rule="types.operand-dtype",
            hint=f"there is no implicit promotion: cast one operand, e.g. cast<{da}>(...) or cast<{db}>(...)",
        )
    return da


@op_definition
class ProgramIdOp(KirOperation):
    """The index of this program along a grid axis: `pid = program_id(0)`."""

    name = "kir.program_id"
    axis = prop_def(IntAttr)
    res = result_def(ScalarType)
    traits = traits_def(Pure())

    def __init__(self, axis: int):
        super().__init__(properties={"axis": IntAttr(axis)}, result_types=[scalar("i32")])

    def verify_(self) -> None:
        if not 0 <= self.axis.data < 3:
            raise RuleViolation(
                "program_id axis is 0, 1 or 2",
                rule="types.axis",
                hint="a grid has at most three axes: 0, 1, 2",
            )


@op_definition
class NumProgramsOp(KirOperation):
    """The grid's extent along an axis: `n = num_programs(0)`."""

    name = "kir.num_programs"
    axis = prop_def(IntAttr)
    res = result_def(ScalarType)
    traits = traits_def(Pure())

    def __init__(self, axis: int):
        super().__init__(properties={"axis": IntAttr(axis)}, result_types=[scalar("i32")])

    def verify_(self) -> None:
        if not 0 <= self.axis.data < 3:
            raise RuleViolation(
                "num_programs axis is 0, 1 or 2",
                rule="types.axis",
                hint="a grid has at most three axes: 0, 1, 2",
            )


@op_definition
class SymValueOp(KirOperation):
    """The value of a shape symbol or compile-time parameter as an i32 scalar: `M`, `BM`.

    In KIR:

        m0 = program_id(0) * BM
    """

    name = "kir.symbol"
    symbol = prop_def(StringAttr)
    res = result_def(ScalarType)
    traits = traits_def(Pure())

    def __init__(self, symbol: str):
        super().__init__(properties={"symbol": StringAttr(symbol)}, result_types=[scalar("i32")])


@op_definition
class ConstOp(KirOperation):
    """A scalar constant. In KIR text a bare literal takes the dtype of the other operand
    (`x * 2.0` with `x: bf16[...]` is a bf16 constant); alone, integers are i32 and reals f32;
    `bf16(0.5)` states the dtype. Values are kept as canonical text so that `inf` and `nan`
    compare equal to themselves.
    """

    name = "kir.const"
    value = prop_def(StringAttr)
    res = result_def(ScalarType)
    traits = traits_def(Pure())

    def __init__(self, value: int | float | bool | str, dtype: str):
        super().__init__(properties={"value": StringAttr(const_text(value, dtype))}, result_types=[scalar(dtype)])

    @property
    def dtype(self) -> str:
        return dtype_of(self.res.type)

    @property
    def number(self) -> int | float | bool:
        return const_number(self.value.data, self.dtype)

    def verify_(self) -> None:
        try:
            const_number(self.value.data, self.dtype)
        except ValueError as e:
            raise RuleViolation(
                str(e),
                rule="types.literal",
                hint=f"write a constant that {self.dtype} can hold",
            ) from None


def const_text(value: int | float | bool | str, dtype: str) -> str:
    d = DTYPES[dtype]
    if isinstance(value, str):
        value = const_number(value, dtype)
    if d.kind == "bool":
        return "true" if value else "false"
    if d.is_int:
        if isinstance(value, float):
            if value != int(value):
                raise RuleViolation(
                    f"{value} is not an integer; {dtype} needs one",
                    rule="types.literal",
                    hint="write an integer",
                )
            value = int(value)
        return str(int(value))
    f = float(value)
    if f != f:
        return "nan"
    if f in (float("inf"), float("-inf")):
        return "inf" if f > 0 else "-inf"
    return repr(f)


def const_number(text: str, dtype: str) -> int | float | bool:
    d = DTYPES[dtype]
    if d.kind == "bool":
        if text not in ("true", "false"):
            raise ValueError(f"'{text}' is not an i1 constant")
        return text == "true"
    if d.is_int:
        return int(text)
    return float(text)


@op_definition
class ArangeOp(KirOperation):
    """The i32 tile `[start, start + 1, ..., end - 1]`; both bounds are static.

    In KIR:

        cols = arange(0, BN)
    """

    name = "kir.arange"
    start = prop_def(SymAttr)
    end = prop_def(SymAttr)
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, start: sx.SymExpr | int, end: sx.SymExpr | int):
        s, e = sym(start), sym(end)
        extent = sx.fold(sx.Bin("-", e.data, s.data))
        super().__init__(properties={"start": s, "end": e}, result_types=[tile_type("i32", [extent])])


@op_definition
class ZerosOp(KirOperation):
    """A tile of zeros: `acc = zeros(f32[BM, BN])`."""

    name = "kir.zeros"
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, result_type: TileType):
        super().__init__(result_types=[result_type])


@op_definition
class FullOp(KirOperation):
    """A tile filled with a scalar: `m = full(f32[BM], -inf)`."""

    name = "kir.full"
    value = operand_def(ScalarType)
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, result_type: TileType, value: SSAValue):
        super().__init__(operands=[value], result_types=[result_type])

    def verify_(self) -> None:
        if dtype_of(self.value.type) != dtype_of(self.res.type):
            raise RuleViolation(
                f"full: the fill value is {self.value.type}, the tile holds {self.res.type.dtype.data}",
                rule="types.operand-dtype",
                hint=f"cast the fill value: cast<{self.res.type.dtype.data}>(...)",
            )


BINARY_FNS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "rem": "%",
    "and": "&",
    "or": "|",
    "xor": "^",
    "shl": "<<",
    "shr": ">>",
    "maximum": None,
    "minimum": None,
    "pow": None,
}
INT_ONLY_FNS = ("and", "or", "xor", "shl", "shr", "rem")


@op_definition
class BinaryOp(KirOperation):
    """Elementwise binary arithmetic with numpy broadcasting; both operands have one dtype.

    fn: add `+`, sub `-`, mul `*`, div `/` (integers truncate toward zero), rem `%`, and `&`,
    or `|`, xor `^`, shl `<<`, shr `>>`, and the calls `maximum(a, b)`, `minimum(a, b)`,
    `pow(a, b)`.

        y = (x - mean) * rstd
    """

    name = "kir.binary"
    fn = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    res = result_def()
    traits = traits_def(Pure(), Elementwise())

    def __init__(self, fn: str, lhs: SSAValue, rhs: SSAValue):
        _require_value(lhs, fn)
        _require_value(rhs, fn)
        dt = _same_dtype(lhs, rhs, fn)
        shape = _broadcast(lhs, rhs, fn)
        super().__init__(properties={"fn": StringAttr(fn)}, operands=[lhs, rhs], result_types=[value_type(dt, shape)])

    def verify_(self) -> None:
        fn = self.fn.data
        if fn not in BINARY_FNS:
            raise VerifyException(f"unknown binary function '{fn}'")
        dt = _same_dtype(self.lhs, self.rhs, fn)
        if fn in INT_ONLY_FNS[:-1] and DTYPES[dt].is_float:
            raise RuleViolation(
                f"'{BINARY_FNS[fn]}' takes integers, not {dt}",
                rule="types.float-only",
                hint="bit operations and % need integer (or i1) operands: cast<i32>(...) first, or use float arithmetic",
            )
        if fn == "pow" and not DTYPES[dt].is_float:
            raise RuleViolation(
                "pow takes floating-point operands", rule="types.float-only", hint="cast<f32>(...) the operands first"
            )
        if shape_of(self.res.type) != _broadcast(self.lhs, self.rhs, fn) or dtype_of(self.res.type) != dt:
            raise VerifyException(f"{fn}: the result type does not follow from the operands")


CMP_PREDICATES = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


@op_definition
class CompareOp(KirOperation):
    """Elementwise comparison giving i1, with broadcasting: `mask = cols < N`."""

    name = "kir.cmp"
    predicate = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    res = result_def()
    traits = traits_def(Pure(), Elementwise())

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue):
        _require_value(lhs, "comparison")
        _require_value(rhs, "comparison")
        _same_dtype(lhs, rhs, "comparison")
        shape = _broadcast(lhs, rhs, "comparison")
        super().__init__(
            properties={"predicate": StringAttr(predicate)}, operands=[lhs, rhs], result_types=[value_type("i1", shape)]
        )

    def verify_(self) -> None:
        if self.predicate.data not in CMP_PREDICATES:
            raise VerifyException(f"unknown comparison '{self.predicate.data}'")
        _same_dtype(self.lhs, self.rhs, "comparison")


UNARY_FNS = (
    "neg",
    "not",
    "abs",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "erf",
    "sigmoid",
    "tanh",
    "sin",
    "cos",
    "floor",
    "ceil",
)
FLOAT_ONLY_UNARY = tuple(f for f in UNARY_FNS if f not in ("neg", "not", "abs"))


@op_definition
class UnaryOp(KirOperation):
    """Elementwise unary math: `-x` (neg), `~m` (not: bitwise, or logical on i1), and the calls
    abs, exp, exp2, log, log2, sqrt, rsqrt, erf, sigmoid, tanh, sin, cos, floor, ceil.

        e = exp(x - m)
    """

    name = "kir.unary"
    fn = prop_def(StringAttr)
    operand = operand_def()
    res = result_def()
    traits = traits_def(Pure(), Elementwise())

    def __init__(self, fn: str, operand: SSAValue):
        _require_value(operand, fn)
        super().__init__(properties={"fn": StringAttr(fn)}, operands=[operand], result_types=[operand.type])

    def verify_(self) -> None:
        fn = self.fn.data
        if fn not in UNARY_FNS:
            raise VerifyException(f"unknown unary function '{fn}'")
        dt = DTYPES[dtype_of(self.operand.type)]
        if fn in FLOAT_ONLY_UNARY and not dt.is_float:
            raise RuleViolation(
                f"{fn} takes a floating-point operand, not {dt.name}; cast first",
                rule="types.float-only",
                hint=f"cast<f32>(x) before {fn}",
            )
        if fn == "not" and dt.is_float:
            raise RuleViolation(
                f"'~' takes an integer or i1 operand, not {dt.name}",
                rule="types.float-only",
                hint="negate a float with -x; ~ is a bitwise (or logical) not",
            )
        if fn == "neg" and dt.kind in ("uint", "bool"):
            raise RuleViolation(
                f"cannot negate {dt.name}",
                rule="types.float-only",
                hint="negate a signed type (cast<i32>(...) first), or use ~ for a logical not of i1",
            )


@op_definition
class WhereOp(KirOperation):
    """Elementwise select with broadcasting: `y = where(mask, x, 0.0)`."""

    name = "kir.where"
    cond = operand_def()
    lhs = operand_def()
    rhs = operand_def()
    res = result_def()
    traits = traits_def(Pure(), Elementwise())

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue):
        for v in (cond, lhs, rhs):
            _require_value(v, "where")
        dt = _same_dtype(lhs, rhs, "where")
        if dtype_of(cond.type) != "i1":
            raise RuleViolation(
                f"where: the condition is i1, not {dtype_of(cond.type)}",
                rule="types.mask",
                hint="compare to get an i1 condition, e.g. where(c != 0, a, b)",
            )
        shape = broadcast_shapes(_broadcast(lhs, rhs, "where"), shape_of(cond.type))
        if shape is None:
            raise RuleViolation(
                "where: the condition does not broadcast with the values",
                rule="types.broadcast",
                hint="give the condition the values' shape, or dimensions of 1 (m[:, None])",
            )
        super().__init__(operands=[cond, lhs, rhs], result_types=[value_type(dt, shape)])

    def verify_(self) -> None:
        if dtype_of(self.cond.type) != "i1":
            raise RuleViolation("where: the condition is i1", rule="types.mask", hint="compare to get an i1 condition")
        _same_dtype(self.lhs, self.rhs, "where")


RAND_FNS = ("rand", "randint")


@op_definition
class RandOp(KirOperation):
    """Counter-based random numbers: Philox4x32 with 10 rounds, keyed by an integer scalar
    `seed`, counting by integer `offsets` (Triton's `tl.rand` / `tl.randint`, bit for bit).

        u = rand(seed, offs)       # f32 in [0, 1), one a lane
        r = randint(seed, offs)    # u32

    The same seed and offset give the same number on every backend and in the reference
    interpreter; `kir.random` computes them for a task's reference. The result has the offsets'
    shape; the seed is one value for the whole program (load it from a `global i64[1]`)."""

    name = "kir.rand"
    fn = prop_def(StringAttr)
    seed = operand_def()
    offsets = operand_def()
    res = result_def()
    traits = traits_def(Pure(), Elementwise())

    def __init__(self, fn: str, seed: SSAValue, offsets: SSAValue):
        for v in (seed, offsets):
            _require_value(v, fn)
        out = "f32" if fn == "rand" else "u32"
        super().__init__(
            properties={"fn": StringAttr(fn)},
            operands=[seed, offsets],
            result_types=[value_type(out, shape_of(offsets.type))],
        )

    def verify_(self) -> None:
        fn = self.fn.data
        if fn not in RAND_FNS:
            raise VerifyException(f"unknown random function '{fn}'")
        if shape_of(self.seed.type):
            raise RuleViolation(
                f"{fn}: the seed is one value, not a tile {self.seed.type}",
                rule="types.random",
                hint="load the seed once: s = load(seed[0]), and vary the offsets for each lane",
            )
        for what, v in (("seed", self.seed), ("offsets", self.offsets)):
            dt = DTYPES[dtype_of(v.type)]
            if not dt.is_int or dt.kind == "bool":
                raise RuleViolation(
                    f"{fn}: the {what} are integers, not {dt.name}",
                    rule="types.random",
                    hint="seed and offsets are i32, i64, u32 or u64: a counter, not a value to randomize",
                )
        if DTYPES[dtype_of(self.offsets.type)].bits < 32:
            raise RuleViolation(
                f"{fn}: the offsets are 32- or 64-bit integers, not {dtype_of(self.offsets.type)}",
                rule="types.random",
                hint="cast<i32>(offs)",
            )


@op_definition
class CastOp(KirOperation):
    """Convert elementwise to another dtype (round to nearest even; float to int truncates):
    `y = cast<bf16>(acc)`."""

    name = "kir.cast"
    operand = operand_def()
    res = result_def()
    traits = traits_def(Pure(), Elementwise())

    def __init__(self, operand: SSAValue, dtype: str):
        _require_value(operand, "cast")
        if dtype not in DTYPES:
            raise VerifyException(f"unknown dtype '{dtype}'")
        super().__init__(operands=[operand], result_types=[value_type(dtype, shape_of(operand.type))])

    def verify_(self) -> None:
        if shape_of(self.operand.type) != shape_of(self.res.type):
            raise VerifyException("cast keeps the shape")


@op_definition
class ExpandDimsOp(KirOperation):
    """Insert a dimension of extent 1, written with `None`: `rows[:, None]` is axis 1."""

    name = "kir.expand_dims"
    axis = prop_def(IntAttr)
    operand = operand_def()
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, axis: int):
        _require_value(operand, "expand_dims")
        shape = list(shape_of(operand.type))
        if not 0 <= axis <= len(shape):
            raise RuleViolation(
                f"expand_dims: axis {axis} is out of range for rank {len(shape)}",
                rule="types.axis",
                hint=f"a new axis goes at a position from 0 to {len(shape)}",
            )
        shape.insert(axis, sx.Int(1))
        super().__init__(
            properties={"axis": IntAttr(axis)},
            operands=[operand],
            result_types=[tile_type(dtype_of(operand.type), shape)],
        )


@op_definition
class BroadcastOp(KirOperation):
    """Broadcast to a shape: `b = broadcast(bias[None, :], [BM, BN])`."""

    name = "kir.broadcast"
    operand = operand_def()
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, shape: Sequence[sx.SymExpr]):
        _require_value(operand, "broadcast")
        got = broadcast_shapes(shape_of(operand.type), shape)
        if got is None or len(got) != len(shape) or any(not sx.same(a, b) for a, b in zip(got, shape, strict=True)):
            raise RuleViolation(
                f"broadcast: {shape_text(shape_of(operand.type))} does not broadcast to {shape_text(shape)}",
                rule="types.broadcast",
                hint="each dimension (aligned on the right) must equal the target's or be 1",
            )
        super().__init__(operands=[operand], result_types=[tile_type(dtype_of(operand.type), shape)])


@op_definition
class ReshapeOp(KirOperation):
    """Reshape a tile, keeping row-major element order: `y = reshape(x, [BM * BN])`."""

    name = "kir.reshape"
    operand = operand_def(TileType)
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, shape: Sequence[sx.SymExpr]):
        super().__init__(operands=[operand], result_types=[tile_type(dtype_of(operand.type), shape)])

    def verify_(self) -> None:
        before = _product(shape_of(self.operand.type))
        after = _product(shape_of(self.res.type))
        if before is not None and after is not None and before != after:
            raise RuleViolation(
                f"reshape keeps the element count: {before} elements cannot become {after}",
                rule="types.reshape",
                hint="give a shape whose dimensions multiply to the same element count",
            )


def _product(shape: Sequence[sx.SymExpr]) -> int | None:
    """The element count when every dimension is a constant (parameters not yet bound)."""
    total = 1
    for d in shape:
        v = sx.fold(d).as_int()
        if v is None:
            return None
        total *= v
    return total


@op_definition
class TransOp(KirOperation):
    """Transpose a 2-D tile: `bt = trans(b)`."""

    name = "kir.trans"
    operand = operand_def(TileType)
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue):
        shape = shape_of(operand.type)
        if len(shape) != 2:
            raise RuleViolation(
                f"trans takes a 2-D tile, not {shape_text(shape)}",
                rule="types.rank",
                hint="reshape(x, [A, B]) to two dimensions first",
            )
        super().__init__(operands=[operand], result_types=[tile_type(dtype_of(operand.type), shape[::-1])])


def _reduced(operand: SSAValue, axis: int, what: str) -> list[sx.SymExpr]:
    if not isinstance(operand.type, TileType):
        raise RuleViolation(
            f"{what} reduces a tile, not {operand.type}",
            rule="types.rank",
            hint="a scalar has nothing to reduce: use the value itself",
        )
    shape = list(shape_of(operand.type))
    if not 0 <= axis < len(shape):
        raise RuleViolation(
            f"{what}: axis {axis} is out of range for rank {len(shape)}",
            rule="types.axis",
            hint=f"the axes of a rank-{len(shape)} tile are 0 to {len(shape) - 1}",
        )
    del shape[axis]
    return shape


REDUCE_FNS = ("sum", "max", "min", "prod")


@op_definition
class ReduceOp(KirOperation):
    """Reduce a tile along an axis; a 1-D tile reduces to a scalar. fn: sum, max, min, prod.

    In KIR:

        m = max(x, axis = 0)
    """

    name = "kir.reduce"
    fn = prop_def(StringAttr)
    axis = prop_def(IntAttr)
    operand = operand_def(TileType)
    res = result_def()
    traits = traits_def(Pure())

    def __init__(self, fn: str, operand: SSAValue, axis: int):
        shape = _reduced(operand, axis, fn)
        super().__init__(
            properties={"fn": StringAttr(fn), "axis": IntAttr(axis)},
            operands=[operand],
            result_types=[value_type(dtype_of(operand.type), shape)],
        )

    def verify_(self) -> None:
        if self.fn.data not in REDUCE_FNS:
            raise VerifyException(f"unknown reduction '{self.fn.data}'")


@op_definition
class ArgReduceOp(KirOperation):
    """The i32 index of the largest (argmax) or smallest (argmin) element along an axis; ties
    go to the lowest index.

        best = argmin(dist, axis = 1)
    """

    name = "kir.argreduce"
    fn = prop_def(StringAttr)
    axis = prop_def(IntAttr)
    operand = operand_def(TileType)
    res = result_def()
    traits = traits_def(Pure())

    def __init__(self, fn: str, operand: SSAValue, axis: int):
        shape = _reduced(operand, axis, fn)
        super().__init__(
            properties={"fn": StringAttr(fn), "axis": IntAttr(axis)},
            operands=[operand],
            result_types=[value_type("i32", shape)],
        )

    def verify_(self) -> None:
        if self.fn.data not in ("argmax", "argmin"):
            raise VerifyException(f"unknown arg-reduction '{self.fn.data}'")


SCAN_FNS = ("cumsum", "cumprod", "cummax", "cummin")


@op_definition
class ScanOp(KirOperation):
    """Inclusive scan along an axis. fn: cumsum, cumprod, cummax, cummin.

    In KIR:

        offs = cumsum(counts, axis = 0)
    """

    name = "kir.scan"
    fn = prop_def(StringAttr)
    axis = prop_def(IntAttr)
    reverse = prop_def(IntAttr)
    operand = operand_def(TileType)
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, fn: str, operand: SSAValue, axis: int, reverse: bool = False):
        _reduced(operand, axis, fn)
        super().__init__(
            properties={"fn": StringAttr(fn), "axis": IntAttr(axis), "reverse": IntAttr(int(reverse))},
            operands=[operand],
            result_types=[operand.type],
        )

    def verify_(self) -> None:
        if self.fn.data not in SCAN_FNS:
            raise VerifyException(f"unknown scan '{self.fn.data}'")


@op_definition
class TopKOp(KirOperation):
    """The k largest (or smallest) values along the last axis, sorted, with their i32 indices.

    In KIR:

        vals, idx = topk(scores, k = 16, largest = 1)
    """

    name = "kir.topk"
    k = prop_def(SymAttr)
    largest = prop_def(IntAttr)
    operand = operand_def(TileType)
    values = result_def(TileType)
    indices = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue, k: sx.SymExpr | int, largest: bool = True):
        if not isinstance(operand.type, TileType):
            raise RuleViolation(
                f"topk takes a tile, not {operand.type}",
                rule="types.rank",
                hint="topk selects along the last axis of a tile",
            )
        ksym = sym(k)
        shape = [*shape_of(operand.type)[:-1], ksym.data]
        super().__init__(
            properties={"k": ksym, "largest": IntAttr(int(largest))},
            operands=[operand],
            result_types=[tile_type(dtype_of(operand.type), shape), tile_type("i32", shape)],
        )

    def verify_(self) -> None:
        k, n = sx.fold(self.k.data).as_int(), sx.fold(shape_of(self.operand.type)[-1]).as_int()
        if k is not None and (k < 1 or (n is not None and k > n)):
            raise RuleViolation(
                f"topk: k = {k} must be between 1 and the axis extent {n}"
                if n is not None
                else f"topk: k = {k} must be at least 1",
                rule="types.topk",
                hint=f"choose k from 1 to {n}, or widen the tile" if n is not None else "",
            )


@op_definition
class GatherOp(KirOperation):
    """Pick elements of a tile along one axis by an integer index tile, as `torch.gather`,
    `numpy.take_along_axis` and Triton's `tl.gather`: `src` and `index` have one rank, the
    result has `index`'s shape and `src`'s dtype, and

        result[i0, .., ia, .., ir] = src[i0, .., index[i0, .., ia, .., ir], .., ir]   (a = axis)

    Every dimension but `axis` of `index` equals `src`'s (Triton's rule: no broadcasting). An
    index outside `0 .. src.shape[axis] - 1` is an error. This moves registers; reading memory
    through index tiles is a `load` (section 7 of docs/language.md).

        v = gather(bnd, mid, axis = 0)
        w_t = gather(wrow, broadcast(idx[None, :], [BM, 16]), axis = 1)
    """

    name = "kir.gather"
    axis = prop_def(IntAttr)
    src = operand_def(TileType)
    index = operand_def(TileType)
    res = result_def(TileType)
    traits = traits_def(Pure())

    def __init__(self, src: SSAValue, index: SSAValue, axis: int):
        _check_gather(src.type, index.type, axis)
        super().__init__(
            properties={"axis": IntAttr(axis)},
            operands=[src, index],
            result_types=[tile_type(dtype_of(src.type), shape_of(index.type))],
        )

    def verify_(self) -> None:
        _check_gather(self.src.type, self.index.type, self.axis.data)
        got, want = shape_of(self.res.type), shape_of(self.index.type)
        same_shape = len(got) == len(want) and all(sx.same(a, b) for a, b in zip(got, want, strict=True))
        if not same_shape or dtype_of(self.res.type) != dtype_of(self.src.type):
            raise VerifyException("gather: the result has the index's shape and the source's dtype")


def _check_gather(src: Attribute, index: Attribute, axis: int) -> None:
    for what, t in (("source", src), ("index", index)):
        if not isinstance(t, TileType):
            raise RuleViolation(
                f"gather: the {what} is a tile, not {t}",
                rule="types.rank",
                hint="gather picks elements of a tile; a scalar needs no gather",
            )
    if DTYPES[dtype_of(index)].kind not in ("int", "uint"):
        raise RuleViolation(
            f"gather: the index is an integer tile, not {index}",
            rule="types.index",
            hint="cast<i32>(...) the index",
        )
    s, i = shape_of(src), shape_of(index)
    if len(s) != len(i):
        raise RuleViolation(
            f"gather: the source {shape_text(s)} and the index {shape_text(i)} have different ranks",
            rule="types.rank",
            hint="give the index the source's rank (idx[None, :] adds an axis)",
        )
    if not 0 <= axis < len(s):
        raise RuleViolation(
            f"gather: axis {axis} is out of range for rank {len(s)}",
            rule="types.axis",
            hint=f"the axes of a rank-{len(s)} tile are 0 to {len(s) - 1}",
        )
    for d, (a, b) in enumerate(zip(s, i, strict=True)):
        if d != axis and not sx.same(a, b):
            raise RuleViolation(
                f"gather: dimension {d} of the index is {b}, the source's is {a} "
                f"(only the gathered axis {axis} may differ)",
                rule="types.index",
                hint="as in Triton's tl.gather, every other dimension of the index equals the source's: "
                "broadcast the index to it (broadcast(idx, [...]))",
            )


DOT_PRECISIONS = ("ieee", "tf32")


@op_definition
class DotOp(KirOperation):
    """Matrix product of tiles `[M, K] x [K, N]` accumulated in a stated dtype, optionally into
    an accumulator: `acc = dot<f32>(a, b, acc)`.

    `precision = tf32` (f32 operands only) lets the product round each operand to TF32 (10
    mantissa bits, round to nearest) and run on the tensor cores, as PyTorch's convolutions and
    matrix products do when TF32 is allowed; without it an f32 product is IEEE f32. A target
    without TF32 units computes it in f32, which is within what the precision allows."""

    name = "kir.dot"
    acc_dtype = prop_def(StringAttr)
    precision = opt_prop_def(StringAttr)
    lhs = operand_def(TileType)
    rhs = operand_def(TileType)
    acc = opt_operand_def(TileType)
    res = result_def(TileType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def __init__(
        self, lhs: SSAValue, rhs: SSAValue, acc_dtype: str, acc: SSAValue | None = None, precision: str | None = None
    ):
        a, b = shape_of(lhs.type), shape_of(rhs.type)
        if len(a) != 2 or len(b) != 2:
            raise RuleViolation(
                f"dot takes 2-D tiles, not {shape_text(a)} and {shape_text(b)}",
                rule="types.dot-shape",
                hint="reshape the operands to [M, K] and [K, N] (x[None, :] makes a row)",
            )
        if not sx.same(a[1], b[0]):
            raise RuleViolation(
                f"dot: inner dimensions differ ({a[1]} and {b[0]})",
                rule="types.dot-shape",
                hint="dot multiplies [M, K] by [K, N]: load matching K extents, or transpose with trans(b)",
            )
        props: dict[str, Attribute] = {"acc_dtype": StringAttr(acc_dtype)}
        if precision is not None and precision != "ieee":
            props["precision"] = StringAttr(precision)
        super().__init__(
            properties=props,
            operands=[lhs, rhs, [acc] if acc is not None else []],
            result_types=[tile_type(acc_dtype, [a[0], b[1]])],
        )

    def verify_(self) -> None:
        if self.acc_dtype.data not in DTYPES:
            raise RuleViolation(
                f"unknown accumulate dtype '{self.acc_dtype.data}'",
                rule="types.dot-acc",
                hint="accumulate in f32: dot<f32>(a, b)",
            )
        if dtype_of(self.lhs.type) != dtype_of(self.rhs.type):
            raise RuleViolation(
                f"dot: operand dtypes differ ({dtype_of(self.lhs.type)} and {dtype_of(self.rhs.type)})",
                rule="types.operand-dtype",
                hint=f"cast one operand: cast<{dtype_of(self.lhs.type)}>(...)",
            )
        if self.acc is not None and self.acc.type != self.res.type:
            raise RuleViolation(
                f"dot: the accumulator is {self.acc.type}, the product is {self.res.type}",
                rule="types.dot-acc",
                hint=f"make the accumulator {self.res.type} (zeros({self.res.type})), or state its dtype in dot<T>",
            )
        if self.precision is not None:
            if self.precision.data not in DOT_PRECISIONS:
                raise RuleViolation(
                    f"dot: precision = {self.precision.data} is not a precision",
                    rule="types.dot-precision",
                    hint="precision = ieee (the default) or precision = tf32",
                )
            if dtype_of(self.lhs.type) != "f32" or self.acc_dtype.data != "f32":
                raise RuleViolation(
                    f"dot: precision = tf32 is for f32 operands into f32, not {dtype_of(self.lhs.type)} "
                    f"into {self.acc_dtype.data}",
                    rule="types.dot-precision",
                    hint="drop precision: the product of low-precision operands is already on the matrix units",
                )

    @property
    def tf32(self) -> bool:
        """Whether the product may round its operands to TF32."""
        return self.precision is not None and self.precision.data == "tf32"


# ---------------------------------------------------------------------------------------------
# Memory access: global tensors and shared buffers share one indexing form.


def access_shape(mem_type: Attribute, access: Access, indices: Sequence[SSAValue]) -> tuple[sx.SymExpr, ...]:
    """The shape of the tile an access reads or writes.

    A block access (scalars and slices) has the slices' extents, then the untouched trailing
    dimensions; a gather (scalars and index tiles, no slice) has the broadcast of the index
    shapes. Mixing index tiles with slices is not allowed.
    """
    if not isinstance(mem_type, GlobalType | SmemType):
        raise RuleViolation(
            f"only global tensors and shared buffers are indexed, not {mem_type}",
            rule="types.access",
            hint="index a kernel argument or a smem(...) buffer",
        )
    rank = len(mem_type.shape.data)
    if len(access.dims) > rank:
        raise RuleViolation(
            f"{len(access.dims)} indices for a rank-{rank} {'tensor' if isinstance(mem_type, GlobalType) else 'buffer'}",
            rule="types.index",
            hint=f"give at most {rank} indices, one per dimension",
        )
    if len(indices) != len(access.dims):
        raise VerifyException("one index operand per indexed dimension")
    if len(access.dims) < rank and isinstance(mem_type, GlobalType):
        raise RuleViolation(
            f"index every dimension of a global tensor ({rank} needed, {len(access.dims)} given)",
            rule="types.index",
            hint="add a slice or an index for each missing dimension, e.g. x[row, c0 : c0 + BN]",
        )
    for v in indices:
        if not _value(v.type) or DTYPES[dtype_of(v.type)].kind not in ("int", "uint"):
            raise RuleViolation(
                f"indices are integer scalars or tiles, not {v.type}",
                rule="types.index",
                hint="cast<i32>(...) the index",
            )
    has_slice = any(d is not None for d in access.dims)
    has_tile = any(isinstance(v.type, TileType) for v in indices)
    if has_slice and has_tile:
        raise RuleViolation(
            "an access either slices (`a[r0 : r0 + BM, c]`) or gathers through index tiles, not both",
            rule="types.access-mix",
            hint="turn the slice into an index tile (r0 + arange(0, BM)) broadcast against the others, or use slices only",
        )
    if has_slice or not has_tile:
        shape = [d for d in access.dims if d is not None]
        shape += [d.data for d in mem_type.shape.data[len(access.dims) :]]
        return tuple(shape)
    if len(access.dims) < rank:
        raise RuleViolation(
            f"a gather indexes every dimension ({rank} needed, {len(access.dims)} given)",
            rule="types.index",
            hint="give an index (or index tile) for every dimension",
        )
    out: tuple[sx.SymExpr, ...] = ()
    for v in indices:
        got = broadcast_shapes(out, shape_of(v.type))
        if got is None:
            raise RuleViolation(
                "gather: the index tiles do not broadcast together",
                rule="types.broadcast",
                hint="give each index tile its own axis: rows[:, None] and cols[None, :]",
            )
        out = got
    return out


class MemAccess:
    """Mixin for ops that carry (memory, indices, access) operands/properties."""

    @property
    def shape(self) -> tuple[sx.SymExpr, ...]:
        return access_shape(self.mem.type, self.access.data, list(self.indices))  # type: ignore[attr-defined]


def _check_mask(mask: SSAValue | None, shape: Sequence[sx.SymExpr], what: str) -> None:
    if mask is None:
        return
    if not _value(mask.type) or dtype_of(mask.type) != "i1":
        raise RuleViolation(
            f"{what}: the mask is i1, not {mask.type}",
            rule="types.mask",
            hint="a mask is a comparison, e.g. mask = offs < N",
        )
    got = broadcast_shapes(shape_of(mask.type), shape)
    if got is None or len(got) != len(shape):
        raise RuleViolation(
            f"{what}: the mask {shape_text(shape_of(mask.type))} does not broadcast to {shape_text(shape)}",
            rule="types.mask",
            hint="give the mask the access shape, or dimensions of 1 that broadcast to it (m[:, None])",
        )


EVICT_POLICIES = ("first", "last")


@op_definition
class LoadOp(KirOperation, MemAccess):
    """Read a tile (or a scalar) from a global tensor or a shared buffer. Lanes where the mask
    is false are not read and take `other` (zero when absent). `evict` (global tensors only) is
    the caches' eviction priority for the lines read: `first` for data read once (streamed),
    `last` for data read again soon (a second pass over a row); it changes no value.

        x = load(x_ptr[row, cols], mask = cols < N, other = -inf)
        a = load(a_ptr[m0 : m0 + BM, k0 : k0 + BK])
        v = load(x_ptr[row, cols], evict = last)
    """

    name = "kir.load"
    access = prop_def(AccessAttr)
    evict = opt_prop_def(StringAttr)
    mem = operand_def()
    indices = var_operand_def()
    mask = opt_operand_def()
    other = opt_operand_def(ScalarType)
    res = result_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Reads(GLOBAL, SHARED, via="mem"))

    def __init__(
        self,
        mem: SSAValue,
        access: Access,
        indices: Sequence[SSAValue],
        mask: SSAValue | None = None,
        other: SSAValue | None = None,
        evict: str | None = None,
    ):
        shape = access_shape(mem.type, access, indices)
        props: dict[str, Attribute] = {"access": AccessAttr(access)}
        if evict is not None:
            props["evict"] = StringAttr(evict)
        super().__init__(
            properties=props,
            operands=[mem, list(indices), [mask] if mask else [], [other] if other else []],
            result_types=[value_type(dtype_of(mem.type), shape)],
        )

    def verify_(self) -> None:
        _check_mask(self.mask, self.shape, "load")
        if self.evict is not None:
            if self.evict.data not in EVICT_POLICIES:
                raise RuleViolation(
                    f"load: evict = {self.evict.data} is not a policy",
                    rule="types.evict",
                    hint="evict = first (data read once) or evict = last (data read again soon)",
                )
            if not isinstance(self.mem.type, GlobalType):
                raise RuleViolation(
                    "load: `evict` sets a cache policy, and shared memory is not cached",
                    rule="types.evict",
                    hint="give `evict` to the loads of global tensors only",
                )
        if self.other is not None and dtype_of(self.other.type) != dtype_of(self.mem.type):
            raise RuleViolation(
                f"load: `other` is {self.other.type}, the tensor holds {dtype_of(self.mem.type)}",
                rule="types.operand-dtype",
                hint=f"give `other` the tensor's dtype: cast<{dtype_of(self.mem.type)}>(...) or a literal",
            )


@op_definition
class StoreOp(KirOperation, MemAccess):
    """Write a tile (or scalar, broadcast) to a global tensor or a shared buffer where the mask
    holds.

        store(y[row, cols], out, mask = cols < N)
    """

    name = "kir.store"
    access = prop_def(AccessAttr)
    mem = operand_def()
    indices = var_operand_def()
    value = operand_def()
    mask = opt_operand_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Writes(GLOBAL, SHARED, via="mem"))

    def __init__(
        self,
        mem: SSAValue,
        access: Access,
        indices: Sequence[SSAValue],
        value: SSAValue,
        mask: SSAValue | None = None,
    ):
        super().__init__(
            properties={"access": AccessAttr(access)},
            operands=[mem, list(indices), value, [mask] if mask else []],
        )

    def verify_(self) -> None:
        shape = self.shape
        _require_value(self.value, "store")
        if dtype_of(self.value.type) != dtype_of(self.mem.type):
            raise RuleViolation(
                f"store: the value is {dtype_of(self.value.type)}, the destination holds {dtype_of(self.mem.type)}; "
                f"use cast<{dtype_of(self.mem.type)}>(...)",
                rule="types.store-dtype",
                hint=f"use cast<{dtype_of(self.mem.type)}>(...)",
            )
        got = broadcast_shapes(shape_of(self.value.type), shape)
        if got is None or len(got) != len(shape) or any(not sx.same(a, b) for a, b in zip(got, shape, strict=True)):
            message = f"store: a {shape_text(shape_of(self.value.type))} value does not fit the {shape_text(shape)} destination"
            reduced = _reduced_along_other_axis(self.value, shape)
            if reduced is not None:
                op, axis = reduced
                kept = shape_text(shape_of(op.operand.type))
                raise RuleViolation(
                    f"{message}: this {op.fn.data} over axis {op.axis.data} of the {kept} tile leaves "
                    f"{shape_text(shape_of(op.res.type))}; over axis {axis} it leaves the {shape_text(shape)} "
                    "the store writes",
                    rule="types.store-shape",
                    hint=f"reduce over axis {axis}: {op.fn.data}(..., axis = {axis})",
                    at=op,
                )
            raise RuleViolation(
                message,
                rule="types.store-shape",
                hint="the value must have the access shape (or broadcast to it): check the slice extents and index tiles",
            )
        _check_mask(self.mask, shape, "store")


ATOMIC_FNS = ("add", "max", "min", "xchg")


@op_definition
class AtomicOp(KirOperation, MemAccess):
    """Atomic read-modify-write on a global tensor, returning the old values. Lanes of one op
    that hit the same element are applied one after another. fn: add, max, min, xchg.

        old = atomic_add(hist[bucket], ones, mask = valid)
    """

    name = "kir.atomic"
    fn = prop_def(StringAttr)
    access = prop_def(AccessAttr)
    mem = operand_def(GlobalType)
    indices = var_operand_def()
    value = operand_def()
    mask = opt_operand_def()
    res = result_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Reads(GLOBAL, via="mem"), Writes(GLOBAL, via="mem"))

    def __init__(
        self,
        fn: str,
        mem: SSAValue,
        access: Access,
        indices: Sequence[SSAValue],
        value: SSAValue,
        mask: SSAValue | None = None,
    ):
        shape = access_shape(mem.type, access, indices)
        super().__init__(
            properties={"fn": StringAttr(fn), "access": AccessAttr(access)},
            operands=[mem, list(indices), value, [mask] if mask else []],
            result_types=[value_type(dtype_of(mem.type), shape)],
        )

    def verify_(self) -> None:
        if self.fn.data not in ATOMIC_FNS:
            raise VerifyException(f"unknown atomic '{self.fn.data}'")
        if dtype_of(self.value.type) != dtype_of(self.mem.type):
            raise RuleViolation(
                f"atomic: the value is {dtype_of(self.value.type)}, the tensor holds {dtype_of(self.mem.type)}",
                rule="types.store-dtype",
                hint=f"use cast<{dtype_of(self.mem.type)}>(...)",
            )
        _check_mask(self.mask, self.shape, "atomic")


def _reduced_along_other_axis(value: SSAValue, shape: Sequence[sx.SymExpr]) -> tuple[Any, int] | None:
    """The reduction (`max`, `argmax`...) that makes `value`, through ops that keep its shape,
    and the other axis that would give `shape`: a reduction over the wrong axis of a 2-D tile."""
    for _ in range(8):
        op = value.owner
        if isinstance(op, ReduceOp | ArgReduceOp):
            source = list(shape_of(op.operand.type))
            for axis in range(len(source)):
                left = source[:axis] + source[axis + 1 :]
                fits = len(left) == len(shape) and all(sx.same(a, b) for a, b in zip(left, shape, strict=True))
                if axis != op.axis.data and fits:
                    return op, axis
            return None
        same = [v for v in getattr(op, "operands", ()) if shape_of(v.type) == shape_of(value.type)]
        if not isinstance(op, Operation) or len(same) != 1:
            return None
        value = same[0]
    return None
