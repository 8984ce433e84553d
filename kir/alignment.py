"""Whether every row of a box copy starts on an aligned address: what a DMA engine that moves
rows needs (mtia-sim: 8 bytes, on the device side and in SRAM; docs/hardware/mtia-sim.md 3.2).
The lowering's pipelining pass copies only such rows; the cost model counts a loop as
pipelined on the same condition.

A copy of `src[access]` moves rows: the runs along the source's last dimension. Row r starts at
element `sum_d (start_d + j_d) * stride_d` of the argument (j_d over the box), and an argument
starts on an aligned boundary (the device allocator's). So every row starts aligned when, with
m the alignment in elements, every stride but the last is a multiple of m and the start of the
last dimension is a multiple of m, for every shape the kernel's `where` clauses admit; and the
SRAM slot's rows (the box's last extent in bytes) are multiples of the alignment too.

The proof is by divisibility, not by search: a product is a multiple of m when a factor is, a
sum when both terms are; a shape symbol is a multiple of c where a clause says `N % c == 0`
(c a multiple of m) or fixes it (`N == 300`); a run-time start (`k * BK`, `program_id(0) * BM`)
is read through its ops the same way. What it cannot show is refused: the loop stays a loop of
direct loads, with a located warning."""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

from kir import symexpr as sx
from kir.dialect.tile import BinaryOp, CastOp, ConstOp, SymValueOp
from kir.dialect.types import GlobalType, dtype_of
from kir.dtypes import DTYPES
from kir.program import Program


class Facts:
    """What the kernel's `where` clauses and parameters say about divisibility."""

    def __init__(self, program: Program):
        self.values: dict[str, int] = dict(program.params)
        self.divisors: dict[str, list[int]] = {}
        clauses = [c.data for c in program.kernel.where.data]
        for c in clauses:
            if isinstance(c, sx.Bin) and c.op == "==":
                for a, b in ((c.lhs, c.rhs), (c.rhs, c.lhs)):
                    value = self.value(b)
                    if isinstance(a, sx.Sym) and value is not None:
                        self.values.setdefault(a.name, value)
        for c in clauses:
            if isinstance(c, sx.Bin) and c.op == "==" and self.value(c.rhs) == 0:
                rem = c.lhs
                if isinstance(rem, sx.Bin) and rem.op == "%" and isinstance(rem.lhs, sx.Sym):
                    d = self.value(rem.rhs)
                    if d:
                        self.divisors.setdefault(rem.lhs.name, []).append(abs(d))

    def value(self, e: sx.SymExpr) -> int | None:
        try:
            return e.evaluate(self.values)
        except (KeyError, ZeroDivisionError):
            return None

    def multiple(self, e: sx.SymExpr, m: int) -> bool:
        """Whether `e` is a multiple of `m` for every shape the clauses admit."""
        if m <= 1:
            return True
        value = self.value(e)
        if value is not None:
            return value % m == 0
        if isinstance(e, sx.Sym):
            return any(d % m == 0 for d in self.divisors.get(e.name, []))
        if isinstance(e, sx.Bin):
            if e.op == "*":
                for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                    c = self.value(a)
                    if c is not None and self.multiple(b, m // math.gcd(m, abs(c) or m)):
                        return True
                return self.multiple(e.lhs, m) or self.multiple(e.rhs, m)
            if e.op in ("+", "-"):
                return self.multiple(e.lhs, m) and self.multiple(e.rhs, m)
        return False

    def multiple_value(self, v: SSAValue | int, m: int) -> bool:
        """Whether a run-time scalar (a copy's start) is a multiple of `m`: its ops read as a
        static expression, with every value they do not show (a loop variable, a program id)
        a symbol nothing is known of."""
        return self.multiple(_expr(v), m)


_UNKNOWN = sx.Sym("%run-time")  # not a name a program can bind: no clause speaks of it


def _expr(v: SSAValue | int) -> sx.SymExpr:
    """A run-time scalar as a static expression, as far as its ops are constants, parameters,
    shape symbols, casts, products, sums and differences."""
    if isinstance(v, int):
        return sx.Int(v)
    owner = v.owner
    if isinstance(owner, ConstOp) and isinstance(owner.number, int) and not isinstance(owner.number, bool):
        return sx.Int(owner.number)
    if isinstance(owner, SymValueOp):
        return sx.Sym(owner.symbol.data)
    if isinstance(owner, CastOp):
        return _expr(owner.operands[0])
    if isinstance(owner, BinaryOp) and owner.fn.data in _OPS:
        return sx.Bin(_OPS[owner.fn.data], _expr(owner.lhs), _expr(owner.rhs))
    return _UNKNOWN


_OPS = {"mul": "*", "add": "+", "sub": "-"}


def unaligned_row(
    program: Program, mem: SSAValue, dims: tuple, starts: tuple, align: int, facts: Facts | None = None
) -> str | None:
    """Why a copy of `mem[dims]` from `starts` may start a row off an `align`-byte boundary, or
    None where every row starts aligned (see the module docstring)."""
    facts = facts or Facts(program)
    t = mem.type
    if not isinstance(t, GlobalType):
        return "the copy's source is not a global tensor"
    size = DTYPES[dtype_of(t)].nbytes
    m = align // math.gcd(align, size)  # the alignment in elements
    reason = unaligned_strides(mem, align, facts)
    if reason is not None:
        return reason
    if not facts.multiple_value(starts[-1], m):
        return f"the start of the last dimension is not known to be a multiple of {m} elements ({align} bytes)"
    last = dims[-1]
    if last is None and m > 1:
        return f"the copy's rows are single elements of {size} bytes, not multiples of {align} bytes"
    if last is not None and not facts.multiple(last, m):
        return f"a row of the copy is {last} elements of {size} bytes, not a multiple of {align} bytes"
    return None


def unaligned_strides(mem: SSAValue, align: int, facts: Facts) -> str | None:
    """Why a row of `mem` (a global argument) may start off an `align`-byte boundary whatever
    the copy's start, or None: its last dimension is contiguous and every other stride is a
    multiple of the alignment."""
    t = mem.type
    if not isinstance(t, GlobalType):
        return "the copy's source is not a global tensor"
    size = DTYPES[dtype_of(t)].nbytes
    m = align // math.gcd(align, size)
    shape = [d.data for d in t.shape.data]
    if t.strides.data:
        strides = [s.data for s in t.strides.data]
    else:
        strides = [sx.Int(1)] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = sx.fold(sx.Bin("*", strides[d + 1], shape[d + 1]))
    if facts.value(strides[-1]) != 1:
        return "the source's last dimension is not contiguous"
    for d, stride in enumerate(strides[:-1]):
        if not facts.multiple(stride, m):
            return (
                f"a row of `{mem.name_hint or 'the source'}` starts at a multiple of its dimension {d}'s stride "
                f"{stride} elements of {size} bytes, which the kernel does not promise to be a multiple of {align} bytes"
            )
    return None
