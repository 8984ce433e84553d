"""How KIR values read in the generated code (`Val`), the functions being written (`Fn`), and
KIR's integer arithmetic on constants, which the backend folds."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from kir import symexpr as sx
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import SmemType
from kir.dtypes import DTYPES
from lowering.emit.pyexpr import ATOM, PyExpr, int_text


@dataclass
class Val(PyExpr):
    """How a KIR value reads in the generated code.

    kind: "static" (an integer the emitter knows: `static` holds it), "constexpr" (known when
    Gluon compiles: it depends on RANK), "scalar", "tile", "wgmma" (an accumulator still in
    flight), "smem", "mbar", "global"."""

    text: str
    kind: str
    static: int | None = None
    prec: int = ATOM
    fn: Fn | None = None  # the function whose scope binds `text` (None: a literal or an inline expression)


@dataclass
class Fn:
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
    kinds: dict[str, str] = field(default_factory=dict)  # python name -> the Val kind bound to it

    def line(self, text: str, op: Operation | None) -> None:
        self.lines.append((self.depth, text, op))


@dataclass(frozen=True)
class Partition:
    role: st.RoleOp | None  # None: an idle default partition
    rank: int
    warps: int
    regs: int


@dataclass(frozen=True)
class Desc:
    name: str
    arg: str
    dtype: str
    box: tuple[int, ...]
    swizzle: int


def static_int(v: int) -> Val:
    text, prec = int_text(v)
    return Val(text, "static", v, prec=prec)


def wrap_int(value: int, dtype: str) -> int:
    d = DTYPES[dtype]
    if d.kind == "bool":
        return int(bool(value))
    bits = d.bits
    value &= (1 << bits) - 1
    if d.kind == "int" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def rows_of_vectors(buf: SSAValue) -> bool:
    """A 2-D shared buffer without a swizzle that only loads and stores use, each through a
    point index on its first dimension: one 1-D buffer per row."""
    t = buf.type
    if not isinstance(t, SmemType) or len(t.shape.data) != 2 or t.swizzle.data:
        return False
    uses = [u.operation for u in buf.uses]
    return bool(uses) and all(
        isinstance(u, tl.LoadOp | tl.StoreOp | ex.SizeofOp) and u.access.data.dims[0] is None for u in uses
    )


def fold_int(fn: str, a: int, b: int, dtype: str) -> int:
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
    return wrap_int(r, dtype)
