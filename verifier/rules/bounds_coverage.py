"""`bounds.coverage`: a mask bounds an index by the end of its dimension (`rows < M`), so the
kernel is written to reach that end, but the grid, the loop or the tile that produce the index
stop short of it for some shape the `where` clause allows: the elements past the last program's
(or trip's, or lane's) block are never read or written, and the mask's tail handling never runs.

The index is read as a sum of counters (program ids over the grid, loop trips, lanes; see
`dataflow_arguments`), and z3 looks for a shape where the last index they reach is below the
extent minus one. The one to change is the counter with the largest step: the grid
(`grid(M / BM)` rounds down: launch `cdiv(M, BM)`), the loop (`0 .. N / BLOCK`), or, where
only the lanes of one tile make the index, the `where` clause, which should say that the
dimension fits the tile (`where N <= BLOCK`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import z3
from xdsl.ir import Operation, OpResult, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import shape_of
from kir.where import where_span
from verifier.context import Context
from verifier.registry import rule
from verifier.rules.bounds import MemRef, _plain, global_refs, name_of
from verifier.rules.dataflow_arguments import counter_extent, dimension_indices
from verifier.rules.dataflow_facts import Ref
from verifier.symbolic import format_counterexample


@dataclass(frozen=True)
class _Short:
    """One access whose masked dimension is not reached to its end."""

    ref: MemRef
    axis: int
    bound: str  # the mask's comparison, as text
    counter: tuple  # the counter with the largest step (dataflow_arguments.Counter)
    step: int
    shapes: dict
    last: int  # the last index reached in the counterexample
    extent_text: str
    lane_extent: str | None  # the tile's extent, where only lanes make the index


def _bounding(mask: SSAValue, index: SSAValue, depth: int = 8) -> tl.CompareOp | None:
    """The comparison `index < X` (or `index <= X - 1`...) among the `&`-joined terms of a mask."""
    if depth == 0:
        return None
    mask = _plain(mask)
    owner = mask.owner if isinstance(mask, OpResult) else None
    if isinstance(owner, tl.CompareOp) and owner.predicate.data in ("lt", "le") and _plain(owner.lhs) is _plain(index):
        return owner
    if isinstance(owner, tl.BinaryOp) and owner.fn.data == "and":
        return _bounding(owner.lhs, index, depth - 1) or _bounding(owner.rhs, index, depth - 1)
    return None


def _short_accesses(ctx: Context) -> Iterator[_Short]:
    sym = ctx.symbolic
    for info in ctx.infos:
        for ref in global_refs(info.op):
            if ref.mask is None:
                continue
            compares = [_bounding(ref.mask, v) for v in ref.indices]
            if not any(compares):
                continue
            dref = Ref(ref.op, ref.mem, ref.access, ref.indices, ref.mask, ref.verb)
            dims = dimension_indices(ctx, dref)
            if dims is None:
                continue
            mem_shape = shape_of(ref.mem.type)
            for axis, (a, cmp) in enumerate(zip(dims, compares, strict=True)):
                if cmp is None:
                    continue
                extent = sym.sym(mem_shape[axis])
                bound = sym.value(cmp.rhs)
                limit = bound.expr if cmp.predicate.data == "lt" else bound.expr + 1
                if bound.tainted or not sym.holds(limit == extent):
                    continue  # the mask bounds the index by something other than the end
                terms: list[tuple[int, z3.ArithRef, tuple]] = []
                for counter, c in sorted(a.coeffs, key=lambda t: t[1]):
                    n = counter_extent(ctx, counter, dref)
                    if c <= 0 or n is None:
                        terms = []
                        break
                    terms.append((c, n, counter))
                if not terms:
                    continue
                found = _short(ctx, a.const, terms, extent)
                if found is None:
                    continue
                shapes, last = found
                top = terms[-1]
                lane_extent = None
                if all(t[2][0] == "lane" for t in terms) and len(terms) == 1:
                    lane_extent = str(dref.shape[top[2][1]])
                yield _Short(
                    ref, axis, _text(ctx, cmp), top[2], top[0], shapes, last, str(mem_shape[axis]), lane_extent
                )


def _short(ctx: Context, const: int, terms: list, extent: z3.ArithRef) -> tuple[dict, int] | None:
    """A shape (every counter running at least once) where the counters, each from 0 to its
    extent, stop before `extent - 1`: the shape values and the last index reached."""
    sym = ctx.symbolic
    last = z3.IntVal(const)
    nonempty = []
    for c, n, _ in terms:
        last = last + c * (n - 1)
        nonempty.append(n >= 1)
    cex = sym.counterexample(last >= extent - 1, nonempty, evaluate={"__last": last})
    if cex is None or "unknown" in cex:
        return None
    shapes = {k: v for k, v in cex.items() if k in ctx.kernel.shape_symbols}
    return shapes, cex["__last"]


def _text(ctx: Context, op: Operation) -> str:
    text = ctx.text_of(op)
    return "the mask" if text is None else f"`{text}`"


_ROWS = """\
kernel rownorm<BM = 4, BLOCK = 512>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(%s) warps(4)%s
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = arange(0, BLOCK)
  mask = (rows[:, None] < M) & (cols[None, :] < N)
  v = load(x[rows[:, None], cols[None, :]], mask = mask)
  ss = sum(v * v, axis = 1)
  store(y[rows[:, None], cols[None, :]], v * rsqrt(ss / cast<f32>(N) + 1e-06)[:, None], mask = mask)
}
"""


@rule(
    "bounds.coverage",
    family="bounds",
    severity="error",
    summary="a masked dimension is never reached to its end: the grid, a loop or the tile stops short",
    explanation="""
A mask such as `rows < M` says that the kernel handles the end of a dimension: the last block
may be partial, and the mask switches off the lanes past M. That only helps if some program
reaches the end. When the grid rounds down (`grid(M / BM)` without `where M % BM == 0`), a loop
stops a tile early (`0 .. N / BLOCK`), or a single tile of BLOCK lanes spans a dimension that
may be longer (no `where N <= BLOCK`), the elements past the last block are never read or
written: the output keeps its poison there and reductions miss them. The verifier reads the
index as a sum of counters (program ids, loop trips, lanes) and asks z3 for a shape, allowed
by the `where` clause, where the last index reached is below the extent minus one; it reports
at the grid, the loop or the `where` clause (the counter with the largest step), with the
shape values.""",
    bad=_ROWS % ("M / BM", "  # <-"),
    good=_ROWS % ("cdiv(M, BM)", ""),
)
def check_coverage(ctx: Context) -> Iterator[Diagnostic]:
    seen: set[tuple] = set()
    for s in _short_accesses(ctx):
        kind = s.counter[0]
        at: Operation | Span | None
        edit: Edit | None = None
        if kind == "pid":
            at = ctx.program.clause_spans.get("grid")
            grid = ctx.kernel.grid.data[s.counter[1]].data
            cause = f"the grid launches too few programs along axis {s.counter[1]} (grid({grid}) rounds down)"
            rounded = f"cdiv({grid.lhs}, {grid.rhs})" if isinstance(grid, sx.Bin) and grid.op == "/" else None
            edit = ctx.replace_in(at, str(grid), rounded) if rounded is not None and at is not None else None
            hint = (
                f"launch {rounded or f'cdiv({s.extent_text}, {s.step})'} programs along axis {s.counter[1]} (the mask "
                "already handles the partial last block)"
            )
        elif kind == "loop":
            at = s.counter[1]
            cause = "the loop stops a tile early"
            edit = _rounded_up(ctx, s.counter[1])
            hint = (
                f"run the loop over every tile, partial last one included: ({s.extent_text} + {s.step} - 1) / {s.step} "
                "trips"
            )
        elif kind == "lane" and s.lane_extent is not None:
            at = where_span(ctx.program)
            cause = (
                f"one tile of {s.lane_extent} lanes spans the dimension, and nothing says it is at most {s.lane_extent} "
                "long"
            )
            hint = (
                f"state that the dimension fits the tile: `where {s.extent_text} <= {s.lane_extent}` (or loop over it)"
            )
            edit = ctx.state_in_where(f"{s.extent_text} <= {s.lane_extent}")
        else:
            continue
        if at is None:
            continue
        key = (at if isinstance(at, Span) else id(at), s.extent_text, kind)
        if key in seen:
            continue
        seen.add(key)
        shapes = format_counterexample(s.shapes) or "some shape"
        yield ctx.report(
            at,
            f"{cause}: for {shapes} the {s.ref.verb} `{name_of(s.ref.mem)}` reaches index {s.last} of dimension "
            f"{s.axis} at most, so indices {s.last + 1} to {s.extent_text} - 1, which its mask {s.bound} is there "
            "to handle, are never touched",
            hint,
            related=[(s.ref.op, "the masked access that stops short")],
            counterexample=dict(s.shapes),
            edits=[edit],
        )


def _rounded_up(ctx: Context, loop: Operation) -> Edit | None:
    """A loop bound written `X / Y` made `(X + Y - 1) / Y`."""
    owner = cast(st.ForOp, loop).upper.owner
    span, text = (ctx.span(owner), ctx.text_of(owner)) if isinstance(owner, tl.BinaryOp) else (None, None)
    if span is None or text is None:
        return None
    parts = re.fullmatch(r"\s*(\w+)\s*/\s*(\w+)\s*", text)
    if parts is None:
        return None
    x, y = parts.groups()
    return Edit(span, f"({x} + {y} - 1) / {y}")
