"""Types and attributes of the KIR dialect.

| type | KIR | meaning |
| --- | --- | --- |
| `ScalarType` | `f32` | one value per program (or per role) |
| `TileType` | `f32[BM, BN]` | a tile in registers, optionally with a register layout |
| `GlobalType` | `global bf16[M, K] align(16)` | a kernel argument in device memory |
| `SmemType` | `smem bf16[S, BM, BK] swizzle(128)` | a shared (on-chip) buffer |
| `MBarrierType` | `mbarrier[S]` | an array of mbarriers in shared memory |

Dimensions are symbolic (`SymAttr` wraps a `kir.symexpr.SymExpr`), so a program stays generic
over its compile-time parameters and shape symbols until it is run or lowered.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Data, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.exceptions import VerifyException

from kir import symexpr as sx
from kir.dtypes import DTYPES


@irdl_attr_definition
class SymAttr(Data[sx.SymExpr]):
    """A symbolic integer expression (`BM`, `M / BM`, `cdiv(N, 128)`)."""

    name = "kir.sym"

    @classmethod
    def parse_parameter(cls, parser) -> sx.SymExpr:  # pragma: no cover - KIR has its own syntax
        raise NotImplementedError("kir.sym is parsed by the KIR surface parser")

    def print_parameter(self, printer) -> None:
        printer.print_string(f'"{self.data}"')


def sym(value: sx.SymExpr | int | str) -> SymAttr:
    if isinstance(value, int):
        value = sx.Int(value)
    elif isinstance(value, str):
        value = sx.Sym(value)
    return SymAttr(value)


def syms(values: Sequence[sx.SymExpr | int | str]) -> ArrayAttr[SymAttr]:
    return ArrayAttr([sym(v) for v in values])


@dataclass(frozen=True)
class Layout:
    """A register layout, as in Triton's `BlockedLayout` / `NVMMADistributedLayout`.

    kind "blocked": params (size_per_thread, threads_per_warp, warps_per_cta, order);
    kind "mma": params (version, warps_per_cta, instr_shape).
    """

    kind: str
    params: tuple[tuple[int, ...], ...]

    KINDS = {"blocked": 4, "mma": 3}

    def __str__(self) -> str:
        inner = ", ".join("[" + ", ".join(str(v) for v in p) + "]" for p in self.params)
        return f"{self.kind}({inner})"


@irdl_attr_definition
class LayoutAttr(Data[Layout]):
    name = "kir.layout"

    @classmethod
    def parse_parameter(cls, parser) -> Layout:  # pragma: no cover
        raise NotImplementedError("kir.layout is parsed by the KIR surface parser")

    def print_parameter(self, printer) -> None:
        printer.print_string(f'"{self.data}"')


@dataclass(frozen=True)
class Access:
    """How a memory operand is indexed: one entry per given dimension, `None` for a point
    index (a scalar or an index tile), or the static extent of a slice `start : start + E`.
    Dimensions after the given ones are taken whole (only for shared buffers, whose shape is
    static)."""

    dims: tuple[sx.SymExpr | None, ...]

    def __str__(self) -> str:
        return "[" + ", ".join("i" if d is None else f":{d}" for d in self.dims) + "]"


@irdl_attr_definition
class AccessAttr(Data[Access]):
    name = "kir.access"

    @classmethod
    def parse_parameter(cls, parser) -> Access:  # pragma: no cover
        raise NotImplementedError("kir.access is parsed by the KIR surface parser")

    def print_parameter(self, printer) -> None:
        printer.print_string(f'"{self.data}"')


def _check_dtype(name: str) -> None:
    if name not in DTYPES:
        raise VerifyException(f"unknown dtype '{name}'")


@irdl_attr_definition
class ScalarType(ParametrizedAttribute, TypeAttribute):
    """`f32`: one value, uniform across the program (or role) that computes it."""

    name = "kir.scalar"
    dtype: StringAttr

    def verify(self) -> None:
        _check_dtype(self.dtype.data)

    def __str__(self) -> str:
        return self.dtype.data


@irdl_attr_definition
class TileType(ParametrizedAttribute, TypeAttribute):
    """`f32[BM, BN]`: a tile held in registers, distributed over the threads of its program."""

    name = "kir.tile"
    dtype: StringAttr
    shape: ArrayAttr[SymAttr]
    layout: ArrayAttr[LayoutAttr]  # empty: the lowering chooses

    def verify(self) -> None:
        _check_dtype(self.dtype.data)
        if len(self.shape.data) == 0:
            raise VerifyException("a tile has at least one dimension; use a scalar")

    def __str__(self) -> str:
        dims = ", ".join(str(d.data) for d in self.shape.data)
        lay = f" layout({self.layout.data[0].data})" if self.layout.data else ""
        return f"{self.dtype.data}[{dims}]{lay}"


@irdl_attr_definition
class GlobalType(ParametrizedAttribute, TypeAttribute):
    """`global bf16[M, K] align(16)`: a tensor in device memory, row-major unless strides say
    otherwise; `out` marks a tensor the kernel writes."""

    name = "kir.global"
    dtype: StringAttr
    shape: ArrayAttr[SymAttr]
    strides: ArrayAttr[SymAttr]  # empty: contiguous row-major
    align: IntAttr  # bytes; 0 means the element size
    out: IntAttr

    def verify(self) -> None:
        _check_dtype(self.dtype.data)
        if self.strides.data and len(self.strides.data) != len(self.shape.data):
            raise VerifyException("strides must give one stride per dimension")

    @property
    def is_out(self) -> bool:
        return bool(self.out.data)

    def __str__(self) -> str:
        dims = ", ".join(str(d.data) for d in self.shape.data)
        text = f"{'out ' if self.is_out else ''}global {self.dtype.data}[{dims}]"
        if self.strides.data:
            text += " strides(" + ", ".join(str(s.data) for s in self.strides.data) + ")"
        if self.align.data:
            text += f" align({self.align.data})"
        return text


@irdl_attr_definition
class SmemType(ParametrizedAttribute, TypeAttribute):
    """`smem bf16[S, BM, BK] swizzle(128)`: a shared-memory buffer (or a view of one)."""

    name = "kir.smem"
    dtype: StringAttr
    shape: ArrayAttr[SymAttr]
    swizzle: IntAttr  # bytes: 0, 32, 64 or 128

    def verify(self) -> None:
        _check_dtype(self.dtype.data)
        if self.swizzle.data not in (0, 32, 64, 128):
            raise VerifyException("swizzle must be 0, 32, 64 or 128 bytes")

    def __str__(self) -> str:
        dims = ", ".join(str(d.data) for d in self.shape.data)
        sw = f" swizzle({self.swizzle.data})" if self.swizzle.data else ""
        return f"smem {self.dtype.data}[{dims}]{sw}"


@irdl_attr_definition
class MBarrierType(ParametrizedAttribute, TypeAttribute):
    """`mbarrier[S]`: S mbarriers in shared memory, each with an arrival count, a transaction
    byte count and a phase bit."""

    name = "kir.mbarrier"
    size: SymAttr

    def __str__(self) -> str:
        return f"mbarrier[{self.size.data}]"


MemoryType = GlobalType | SmemType


@functools.lru_cache(maxsize=256)
def scalar(dtype: str) -> ScalarType:
    return ScalarType(StringAttr(dtype))


def tile_type(dtype: str, shape: Sequence[sx.SymExpr | int | str], layout: Layout | None = None) -> TileType:
    if layout is None:
        return _plain_tile_type(dtype, tuple(shape))
    return TileType(StringAttr(dtype), syms(shape), ArrayAttr([LayoutAttr(layout)]))


@functools.lru_cache(maxsize=4096)
def _plain_tile_type(dtype: str, shape: tuple[sx.SymExpr | int | str, ...]) -> TileType:
    """A tile type without a layout. Types are immutable values, so one instance serves every op
    of that type: building and verifying a fresh one (xdsl checks each parameter against its
    declared type) was a tenth of parsing a long program."""
    return TileType(StringAttr(dtype), syms(shape), ArrayAttr([]))


def value_type(dtype: str, shape: Sequence[sx.SymExpr]) -> ScalarType | TileType:
    """A scalar for rank 0, else a tile."""
    return tile_type(dtype, shape) if shape else scalar(dtype)


def global_tensor(
    dtype: str,
    shape: Sequence[sx.SymExpr | int | str],
    *,
    strides: Sequence[sx.SymExpr | int | str] = (),
    align: int = 0,
    out: bool = False,
) -> GlobalType:
    return GlobalType(StringAttr(dtype), syms(shape), syms(strides), IntAttr(align), IntAttr(int(out)))


def smem(dtype: str, shape: Sequence[sx.SymExpr | int | str], swizzle: int = 0) -> SmemType:
    return SmemType(StringAttr(dtype), syms(shape), IntAttr(swizzle))


def mbarrier(size: sx.SymExpr | int | str) -> MBarrierType:
    return MBarrierType(sym(size))


# The types with an element type, and those of them with a shape: looked up by exact class first
# (the type classes are final; an isinstance test against an ABC union is the slow path, and
# every op's typing asks these at each operand)
_ELEMENT_TYPES = frozenset({ScalarType, TileType, GlobalType, SmemType})
_SHAPED_TYPES = frozenset({TileType, GlobalType, SmemType})


def dtype_of(t: Attribute) -> str:
    if type(t) in _ELEMENT_TYPES or isinstance(t, ScalarType | TileType | GlobalType | SmemType):
        return cast(ScalarType, t).dtype.data
    raise VerifyException(f"{t} has no element type")


def shape_of(t: Attribute) -> tuple[sx.SymExpr, ...]:
    kind = type(t)
    if kind is ScalarType:
        return ()
    if kind in _SHAPED_TYPES or isinstance(t, TileType | GlobalType | SmemType):
        return tuple(d.data for d in cast(TileType, t).shape.data)
    if isinstance(t, ScalarType):
        return ()
    raise VerifyException(f"{t} has no shape")


def type_text(t: Attribute) -> str:
    return str(t) if isinstance(t, ScalarType | TileType | GlobalType | SmemType | MBarrierType) else repr(t)


def broadcast_shapes(a: Sequence[sx.SymExpr], b: Sequence[sx.SymExpr]) -> tuple[sx.SymExpr, ...] | None:
    """numpy broadcasting over symbolic dimensions: align on the right; equal dims or a 1."""
    out: list[sx.SymExpr] = []
    for i in range(max(len(a), len(b))):
        da = a[len(a) - 1 - i] if i < len(a) else None
        db = b[len(b) - 1 - i] if i < len(b) else None
        if da is None:
            out.append(db)  # type: ignore[arg-type]
        elif db is None or sx.same(da, db):
            out.append(da)
        elif sx.fold(db).as_int() == 1:
            out.append(da)
        elif sx.fold(da).as_int() == 1:
            out.append(db)
        else:
            return None
    return tuple(reversed(out))


def shape_text(shape: Sequence[sx.SymExpr]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
