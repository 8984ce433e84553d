"""`bounds.index-overflow`: an index computed in i32 (or a narrower integer) that wraps.

Program ids, aranges, loop variables and shape symbols are i32, and i32 arithmetic wraps. The
bounds rules prove indices in bounds as exact integers; an index whose computation leaves the
i32 range on the way (`cast<i64>(program_id(0) * BLOCK)`: the product wraps before the cast)
is in bounds on paper and negative on the device. i32 arithmetic is exact modulo 2^32, so a
product that wraps inside a chain of sums and products whose result comes back in range
(`S0 * 2 - 1`) is right; what goes wrong is a value that leaves such a chain out of range: the
index itself, or an operand of a division, a remainder, a comparison or a widening cast. For
every access, the verifier follows each index back through the integer arithmetic that makes it
and asks z3, for each such value with a product (or shift) in its chain, whether it can leave
its type's range for shapes allowed by `where` (each shape symbol, program id, grid extent and
tensor dimension itself fits in i32) on a lane the access does not mask off. The error is at
the innermost product that leaves the range, with the shape values and program ids that make
it wrap, and the accesses as related spans.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import z3
from xdsl.ir import Operation, OpResult, SSAValue

from kir.diagnostics import Diagnostic, Edit
from kir.dialect import tile as tl
from kir.dialect.types import ScalarType, TileType, shape_of
from kir.dtypes import DTYPES
from verifier.context import Context
from verifier.registry import rule
from verifier.rules import bounds_fixes as fx
from verifier.rules.bounds import MemRef, bounds_of, global_refs, name_of
from verifier.symbolic import ZERO, format_counterexample, readable

I32_MAX = 2**31 - 1
# the range of each integer type narrower than 64 bits: (lowest, highest)
_RANGE = {
    "i8": (-(2**7), 2**7 - 1),
    "i16": (-(2**15), 2**15 - 1),
    "i32": (-(2**31), 2**31 - 1),
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
}
# Products and shifts: a flat offset across dimensions. A sum of in-range values wraps only when
# one of them is within the other of the limit (`program_id(0) + lane` for a grid of 2^31 - 1
# programs), which no launch meets; a sum of a wrapped product is reported at the product.
_WRAPPING = ("mul", "shl")
_MODULAR = ("add", "sub", "mul", "shl")  # exact modulo 2^32 (i32): a wrap inside may come back
_SIGN = {"add": "+", "sub": "-", "mul": "*", "shl": "<<"}


@dataclass
class _Wrap:
    op: tl.BinaryOp
    counterexample: dict
    value: int
    accesses: list[MemRef] = field(default_factory=list)


def _dtype(v: SSAValue) -> str | None:
    t = v.type
    return t.dtype.data if isinstance(t, ScalarType | TileType) else None


def _placed(ctx: Context, operand: SSAValue, lanes: tuple) -> tuple:
    """The lanes of an operand broadcast (numpy style, right-aligned) to a value at `lanes`."""
    shape = shape_of(operand.type)
    k = len(lanes) - len(shape)
    out = []
    for i, d in enumerate(shape):
        out.append(ZERO if ctx.static(d) == 1 else lanes[k + i])
    return tuple(out)


def _narrow(v: SSAValue) -> bool:
    return _dtype(v) in _RANGE


class _Walk:
    """The values along an index's computation whose true value must fit their narrow integer
    type: those that leave a chain of wrapping arithmetic (`+ - * <<`, selects, broadcasts), by
    a division, a remainder, a widening cast, a comparison... or by being the index itself.
    Inside a chain, i32 arithmetic is exact modulo 2^32, so a product that wraps and a later
    subtraction that brings the value back (`S0 * 2 - 1` with the result in range) is right;
    a value that leaves the chain out of range is not. Each comes with the products of its chain."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.out: list[tuple[SSAValue, tuple, list]] = []
        self.seen: set[tuple] = set()

    def boundary(self, v: SSAValue, lanes: tuple) -> None:
        key = (id(v), tuple(x.get_id() for x in lanes))
        if key in self.seen or not isinstance(v, OpResult):
            return
        self.seen.add(key)
        if not _narrow(v):
            self._operands(v.owner, lanes)  # a wide value: its narrow operands leave their chains
            return
        products: list = []
        self._chain(v, lanes, products, set())
        self.out.append((v, lanes, products))

    def _chain(self, v: SSAValue, lanes: tuple, products: list, seen: set) -> None:
        key = (id(v), tuple(x.get_id() for x in lanes))
        if key in seen or not isinstance(v, OpResult):
            return
        seen.add(key)
        op = v.owner
        if isinstance(op, tl.BinaryOp) and op.fn.data in _MODULAR:
            if op.fn.data in _WRAPPING:
                products.append((op, lanes))
            for operand in (op.lhs, op.rhs):
                self._into(operand, lanes, products, seen)
        elif isinstance(op, tl.WhereOp):
            for operand in (op.lhs, op.rhs):
                self._into(operand, lanes, products, seen)
        elif isinstance(op, tl.CastOp) and _narrow(op.operand):
            self._into(op.operand, lanes, products, seen)  # narrow to narrow: bits kept
        elif isinstance(op, tl.BroadcastOp):
            self._into(op.operand, lanes, products, seen)
        elif isinstance(op, tl.ExpandDimsOp):
            self._chain(op.operand, tuple(x for i, x in enumerate(lanes) if i != op.axis.data), products, seen)
        elif isinstance(op, tl.TransOp):
            self._chain(op.operand, tuple(reversed(lanes)), products, seen)
        else:
            self._operands(op, lanes)

    def _into(self, operand: SSAValue, lanes: tuple, products: list, seen: set) -> None:
        placed = _placed(self.ctx, operand, lanes)
        if _narrow(operand):
            self._chain(operand, placed, products, seen)
        elif isinstance(operand.type, ScalarType | TileType):
            self.boundary(operand, placed)

    def _operands(self, op: Operation, lanes: tuple) -> None:
        """The operands of an op that does not wrap with them: each a boundary of its own."""
        if not isinstance(op, tl.BinaryOp | tl.CompareOp | tl.WhereOp | tl.CastOp | tl.BroadcastOp | tl.UnaryOp):
            if isinstance(op, tl.ExpandDimsOp):
                self.boundary(op.operand, tuple(x for i, x in enumerate(lanes) if i != op.axis.data))
            elif isinstance(op, tl.TransOp):
                self.boundary(op.operand, tuple(reversed(lanes)))
            return
        for operand in op.operands:
            dtype = _dtype(operand)
            if dtype is not None and DTYPES[dtype].is_int and dtype != "i1":
                self.boundary(operand, _placed(self.ctx, operand, lanes))


def _wraps(ctx: Context) -> list[_Wrap]:
    sym = ctx.symbolic
    bnd = bounds_of(ctx)
    i32 = [sym.names[n] <= I32_MAX for n in ctx.kernel.shape_symbols if n in sym.names]
    i32 += [p <= I32_MAX for p in sym.pids]
    # the number of programs along an axis is an i32 too (`num_programs`), as on the hardware
    i32 += [sym.sym(g.data) <= I32_MAX for g in ctx.kernel.grid.data]
    # A dimension longer than 2^31 cannot be indexed in i32 at all: every kernel assumes its
    # dimensions fit, and the wrap that matters is that of an offset across dimensions.
    for _, arg in ctx.kernel.args:
        i32 += [sym.sym(d) <= I32_MAX for d in shape_of(arg.type)]
    found: dict[Operation, _Wrap] = {}
    clean: set[tuple] = set()

    def breaks(v: SSAValue, at: tuple, assume: list) -> dict | None:
        term = sym.value(v, at)
        if term.tainted:
            return None
        key = (term.expr.get_id(), tuple(a.get_id() for a in assume))
        if key in clean:
            return None
        low, high = _RANGE[_dtype(v) or "i32"]
        cex = sym.counterexample(z3.And(term.expr >= low, term.expr <= high), assume, {"__value": term.expr})
        if cex is None or "unknown" in cex:
            clean.add(key)
            return None
        return cex

    for info in ctx.infos:
        for ref in global_refs(info.op):
            lanes, dims = bnd.dims(ref)
            conds = bnd.conditions(ref, lanes)
            if any(c.tainted for c in conds):
                continue
            assume = [c.expr for c in conds] + i32
            walk = _Walk(ctx)
            for d in dims:
                v = d.index_value
                walk.boundary(v, _placed(ctx, v, lanes) if isinstance(v.type, TileType) else ())
            for value, at, products in walk.out:
                if not products or breaks(value, at, assume) is None:
                    continue  # no product in its chain, or it comes back in range
                # the innermost product that leaves the range is what to compute wider
                for op, op_lanes in reversed(products):
                    if op in found:
                        if ref not in found[op].accesses:
                            found[op].accesses.append(ref)
                        break
                    cex = breaks(op.res, op_lanes, assume)
                    if cex is None:
                        continue
                    value_at = cex.pop("__value")
                    shown = readable(
                        {k: v for k, v in cex.items() if not k.startswith("lane")}, len(ctx.kernel.grid.data)
                    )
                    found[op] = _Wrap(op, shown, value_at, [ref])
                    break
    return list(found.values())


def _source(ctx: Context, v: SSAValue, within: Operation) -> str:
    """The text of the operand `v` as the expression `within` writes it: the expression that
    makes it where that is written inside (on one line), else its name."""
    owner = v.owner
    span = ctx.span(owner) if isinstance(owner, Operation) else None
    outer, source = ctx.span(within), ctx.program.source
    inside = (
        span is not None
        and outer is not None
        and span.line == span.end_line == outer.line == outer.end_line
        and outer.col <= span.col
        and span.end_col <= outer.end_col
    )
    if not inside or span is None or source is None:
        return v.name_hint or "..."
    text = source.splitlines()[span.line - 1][span.col - 1 : span.end_col - 1]
    return text if text.isidentifier() or text.endswith(")") else f"({text})"


_FLAT = """\
kernel gelu_flat<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])
  target sm_90 grid(cdiv(M * N, BLOCK)) warps(4)
{
  offs = %s + cast<i64>(arange(0, BLOCK))%s
  n = cast<i64>(N)
  mask = offs < cast<i64>(M) * n
  v = load(x[offs / n, offs %% n], mask = mask)
  store(y[offs / n, offs %% n], v * 0.5, mask = mask)
}
"""


@rule(
    "bounds.index-overflow",
    family="bounds",
    severity="error",
    summary="an index is computed through i32 (or narrower) arithmetic that can wrap",
    explanation="""
Program ids, aranges, loop variables and shape symbols are i32, and i32 arithmetic wraps. A
flat offset over a tensor of more than 2^31 elements, `program_id(0) * BLOCK` under a grid of
`cdiv(M * N, BLOCK)` programs, passes 2^31 - 1 and wraps negative; casting it to i64 afterwards
(`cast<i64>(program_id(0) * BLOCK)`) keeps the wrapped value. The bounds proofs see exact
integers, so the verifier follows every index back through the arithmetic that makes it and
asks z3 whether a value computed in i32 with a product in it can leave the i32 range where it
leaves the wrapping arithmetic (the index itself, a division, a remainder, a comparison, a
widening cast), for shapes the `where` clause allows (each shape symbol, program id, grid
extent and tensor dimension fits in i32) and lanes the access does not mask off; a wrap that later arithmetic
undoes is exact modulo 2^32 and is not reported. Cast the operands before the arithmetic
(`cast<i64>(program_id(0)) * cast<i64>(BLOCK)`), index in several dimensions, or bound the
shapes in `where`.""",
    bad=_FLAT % ("cast<i64>(program_id(0) * BLOCK)", "  # <-"),
    good=_FLAT % ("cast<i64>(program_id(0)) * cast<i64>(BLOCK)", ""),
)
def check_index_overflow(ctx: Context) -> Iterator[Diagnostic]:
    for w in _wraps(ctx):
        op = w.op
        dtype = _dtype(op.res) or "i32"
        low, high = _RANGE[dtype]
        first = w.accesses[0]
        wide = "u64" if DTYPES[dtype].kind == "uint" else "i64"
        lhs, rhs = _source(ctx, op.lhs, op), _source(ctx, op.rhs, op)
        widened = _widened(ctx, op, wide, lhs, rhs)
        edits: tuple[Edit, ...]
        if widened is not None:
            hint, edits = (
                f"compute it in {wide}: cast<{wide}>({lhs}) {_SIGN[op.fn.data]} cast<{wide}>({rhs}), "
                "or bound the shapes in `where`",
                (widened,),
            )
        else:  # widened, it would change the types around it; a program id of the wrong axis may be the cause
            hint, edits = fx.choose(
                ctx,
                "bounds.index-overflow",
                _line(ctx, op),
                [
                    (f"take it from `{pid}`, the grid axis whose programs it steps over", edit)
                    for pid, edit in itertools.islice(fx.other_axes(ctx, op.res), 2)
                ],
            )
        yield ctx.report(
            op,
            f"this {dtype} `{_SIGN[op.fn.data]}` can leave the {dtype} range [{low}, {high}]: for "
            f"{format_counterexample(w.counterexample)} it is {w.value}, which wraps, and the {first.verb} "
            f"`{name_of(first.mem)}` is indexed with the wrapped value",
            hint,
            related=[(r.op, "the access indexed with it") for r in w.accesses],
            counterexample={**w.counterexample, "value": w.value},
            edits=edits,
        )


def _line(ctx: Context, op: Operation) -> int:
    span = ctx.span(op)
    return span.line if span is not None else 0


def _widened(ctx: Context, op: tl.BinaryOp, wide: str, lhs: str, rhs: str) -> Edit | None:
    """The product written with its operands cast, where its only use is a cast to `wide` (so
    the types around it do not change)."""
    uses = list(op.res.uses)
    if len(uses) != 1 or not isinstance(uses[0].operation, tl.CastOp) or _dtype(uses[0].operation.res) != wide:
        return None
    if "..." in (lhs, rhs):
        return None
    span = ctx.span(op)
    if span is None or span.line != span.end_line:
        return None
    return Edit(span, f"cast<{wide}>({lhs}) {_SIGN[op.fn.data]} cast<{wide}>({rhs})")
