"""`dataflow.write-overlap`: two programs of the grid write the same output element.

Each pair of writes to one tensor is a z3 query for two different program ids that reach one
element; on a long kernel most pairs are passed over without a query, by their index ranges
and their affine forms, where those already show that the two writes cannot meet."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

import z3
from xdsl.ir import Operation, SSAValue

from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import TileType, shape_of
from verifier.context import Context, OpInfo
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.dataflow_facts import (
    Ref,
    arg_name,
    factor_text,
    feeding_ops,
    index_terms,
    line_of,
    scale_of,
    warpgroup_roles,
    writes,
)
from verifier.symbolic import format_counterexample

# ---- dataflow.write-overlap ----------------------------------------------------------------------------


@rule(
    "dataflow.write-overlap",
    family="dataflow",
    severity="error",
    summary="two programs of the grid write the same output element",
    explanation="""
Programs of the grid run in any order, concurrently, so when two of them store to the same
element the result is whichever lands last: a race the reference interpreter (which runs the
programs one after another) cannot show. The usual causes are an index that does not depend on
a grid axis (a second grid axis added for a split that the store ignores, a `row` taken from
the wrong axis) or a tile stride smaller than the tile. The verifier asks z3 for two different
program ids and lanes (under the masks, enclosing `if`s and `where`) that store to one
element, and reports them. Atomics are exempt: they exist to combine such writes. Split-K
style partial results must be combined with `atomic_add` or written to separate slices.
""",
    bad="""
kernel rowsum<BM = 16, BN = 64>(x: global f32[M, N], out: out global f32[M])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  part = sum(load(x[m0 : m0 + BM, n0 : n0 + BN]), axis = 1)
  store(out[m0 : m0 + BM], part)  # <-
}
""",
    good="""
kernel rowsum<BM = 16, BN = 64>(x: global f32[M, N], out: out global f32[M])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, 1) warps(4)
{
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for j in 0 .. N / BN {
    acc = acc + sum(load(x[m0 : m0 + BM, j * BN : j * BN + BN]), axis = 1)
  }
  store(out[m0 : m0 + BM], acc)
}
""",
)
def check_write_overlap(ctx: Context) -> Iterator[Diagnostic]:
    by_tensor: dict[SSAValue, list[tuple[OpInfo, Ref]]] = {}
    for info in ctx.infos:
        for ref in writes(info.op):
            if isinstance(info.op, tl.AtomicOp) or arg_name(ctx, ref.mem) is None:
                continue
            by_tensor.setdefault(ref.mem, []).append((info, ref))
    for items in by_tensor.values():
        found = _first_overlap(ctx, items)
        if found is not None:
            yield found


def _first_overlap(ctx: Context, items: list[tuple[OpInfo, Ref]]) -> Diagnostic | None:
    """The first pair of writes (a, b), b at or after a in program order, that two programs
    can make to one element. Every pair is a z3 query, and a long kernel writes one tensor
    many times, so pairs that cannot meet are passed over without one: a write whose index
    or guard is tainted (the query would not be asked), and a pair whose index ranges are
    disjoint in some dimension (constants and lanes alone: `y[0, ...]` and `y[1, ...]`, or
    `cols + 64` and `cols + 128`). The pairs left are asked in the same order, so the pair
    reported is the same."""
    sym = ctx.symbolic
    ranges: list[list[tuple[int, int] | None] | None] = []
    forms: list[list] = []
    for _, ref in items:
        lanes = sym.lanes(ref.shape, _FIRST)  # the lanes `_two_programs` gives a first write
        terms = index_terms(ctx, ref, lanes)
        guards = [sym.path(ref.op)] + ([sym.at(ref.mask, lanes)] if ref.mask is not None else [])
        if terms is None or any(t.tainted for t in [*terms, *guards]):
            ranges.append(None)  # as the first or the second of a pair, `_two_programs` gives None
            forms.append([])
        else:
            ranges.append([sym.interval(t.expr) for t in terms])
            forms.append([sym.affine(t.expr) for t in terms])
    pairs = _MeetingRanges(ranges)
    pids = [str(p) for p in sym.pids]
    shapes = set(ctx.kernel.shape_symbols)
    for i, (info_a, a) in enumerate(items):
        if ranges[i] is None:
            continue
        for j in pairs.after(i):
            if _separated(forms[i], forms[j], pids, shapes):
                continue
            info_b, b = items[j]
            found = _two_programs(ctx, info_a, a, info_b, b)
            if found is not None:
                return found
    return None


def _separated(a: list, b: list, pids: list[str], shapes: set[str]) -> bool:
    """Whether two writes made by different programs can never meet, evidently: for every grid
    axis k, some dimension indexes both as s * program_id(k) + (the same shape-symbol terms) +
    (constants and lanes), with the constant-and-lane parts less than |s| apart (a tile of BM
    rows at program_id(0) * BM). Equal indices there force equal program ids on every axis,
    which `_two_programs` then asks z3 to make differ: it would find no pair."""
    if len(a) != len(b) or not pids:
        return False
    for pid in pids:
        for fa, fb in zip(a, b, strict=True):
            if fa is None or fb is None or fa[0] != fb[0]:
                continue
            coeffs, (alo, ahi) = fa
            _, (blo, bhi) = fb
            s = abs(coeffs.get(pid, 0))
            if s and all(n == pid or n in shapes for n in coeffs) and bhi - alo < s and ahi - blo < s:
                break
        else:
            return False
    return True


class _MeetingRanges:
    """For each write i, the writes j >= i whose index ranges meet its own in every dimension
    where both are known, in order. The writes are bucketed on the dimension where most ranges
    are known (sorted by their start), so a long run of writes to disjoint places costs about
    one candidate each rather than one per pair."""

    def __init__(self, ranges: list[list[tuple[int, int] | None] | None]):
        self.known = {i: r for i, r in enumerate(ranges) if r is not None}  # the writes asked about
        self.usable = list(self.known)
        ranks = {len(r) for r in self.known.values()}
        self.dim: int | None = None
        if len(ranks) == 1:  # (writes of different ranks: every pair is asked, as before)
            rank = ranks.pop()
            counts = [sum(self.known[i][d] is not None for i in self.usable) for d in range(rank)]
            if counts and max(counts) > 0:
                self.dim = counts.index(max(counts))
        if self.dim is None:
            return
        d = self.dim
        self.wild = [i for i in self.usable if self.known[i][d] is None]
        finite = sorted((b[0], b[1], i) for i in self.usable if (b := self.known[i][d]) is not None)
        self.starts = [lo for lo, _, _ in finite]
        self.ends = [hi for _, hi, _ in finite]
        self.index = [i for _, _, i in finite]
        self.reach: list[int] = []  # the largest end among the first k ranges (by start)
        for hi in self.ends:
            self.reach.append(max(hi, self.reach[-1]) if self.reach else hi)

    def after(self, i: int) -> list[int]:
        r = self.known[i]
        if self.dim is None:
            pool = self.usable[bisect.bisect_left(self.usable, i) :]
        elif (bound := r[self.dim]) is None:
            pool = self.usable[bisect.bisect_left(self.usable, i) :]
        else:
            lo, hi = bound
            pool = self.wild[bisect.bisect_left(self.wild, i) :]
            k = bisect.bisect_right(self.starts, hi) - 1  # the ranges starting at or before hi
            while k >= 0 and self.reach[k] >= lo:  # stop where every earlier range ends before lo
                if self.ends[k] >= lo and self.index[k] >= i:
                    pool.append(self.index[k])
                k -= 1
            pool.sort()
        return [j for j in pool if self._meet(r, self.known[j])]

    def _meet(self, a: list, b: list) -> bool:
        if len(a) != len(b):
            return True
        return all(x is None or y is None or (x[0] <= y[1] and y[0] <= x[1]) for x, y in zip(a, b, strict=True))


# The lanes of the first and the second write of a pair. A query is about one pair, so the
# writes of one shape share them (their terms are built once), and the two of a pair differ.
_FIRST, _SECOND = "ow-a", "ow-b"


def _two_programs(ctx: Context, info_a: OpInfo, a: Ref, info_b: OpInfo, b: Ref) -> Diagnostic | None:
    sym = ctx.symbolic
    lanes_a = sym.lanes(a.shape, _FIRST)
    lanes_b = sym.lanes(b.shape, _SECOND)
    ia, ib = index_terms(ctx, a, lanes_a), index_terms(ctx, b, lanes_b)
    if ia is None or ib is None:
        return None
    guards_a = [sym.path(a.op)] + ([sym.at(a.mask, lanes_a)] if a.mask is not None else [])
    guards_b = [sym.path(b.op)] + ([sym.at(b.mask, lanes_b)] if b.mask is not None else [])
    if any(t.tainted for t in [*ia, *ib, *guards_a, *guards_b]):
        return None
    # The second write runs in another program: rename its program ids, loop variables and
    # role ranks (lanes already differ), and assume the renamed facts about them.
    renamed: dict[str, z3.ArithRef] = {}
    for t in [*ib, *guards_b]:
        for v in sym.variables(t.expr):
            if v.startswith(("program_id", "role_rank")) or _is_loop_name(sym, v):
                renamed.setdefault(v, z3.Int(f"{v}'"))
    for p in sym.pids:
        renamed.setdefault(str(p), z3.Int(f"{p}'"))
    pairs = [(sym.names[n], new) for n, new in renamed.items() if n in sym.names]
    sub = (lambda e: z3.substitute(e, *pairs)) if pairs else (lambda e: e)
    facts = [sub(f) for f in sym.facts_mentioning(renamed)]
    mem_shape = shape_of(a.mem.type)
    same = [
        z3.And(x.expr == sub(y.expr), x.expr >= 0, x.expr < sym.sym(mem_shape[d]))
        for d, (x, y) in enumerate(zip(ia, ib, strict=True))
    ]
    other_pids = [renamed[str(p)] for p in sym.pids]
    differ = z3.Or(*[p != q for p, q in zip(sym.pids, other_pids, strict=True)])
    conflict = z3.And(*same, *[g.expr for g in guards_a], *[sub(g.expr) for g in guards_b], differ)
    evaluate = {f"__index{d}": t.expr for d, t in enumerate(ia)}
    evaluate |= {f"__other{i}": q for i, q in enumerate(other_pids)}
    evaluate |= {f"__pid{i}": p for i, p in enumerate(sym.pids)}
    cex = sym.counterexample(z3.Not(conflict), list(facts), evaluate=evaluate)
    if cex is None or "unknown" in cex:
        return None
    element = [cex[f"__index{d}"] for d in range(len(ia))]
    first = [cex[f"__pid{i}"] for i in range(len(sym.pids))]
    second = [cex[f"__other{i}"] for i in range(len(sym.pids))]
    shapes = {k: v for k, v in cex.items() if k in ctx.kernel.shape_symbols}
    name = arg_name(ctx, a.mem)
    unused = [
        i
        for i, p in enumerate(sym.pids)
        if not any(str(p) in sym.variables(t.expr) for t in ia) and first[i] != second[i]
    ]
    why = f"the index does not depend on program_id({unused[0]})" if unused else "their index ranges overlap"
    hint = (
        f"make the index depend on program_id({unused[0]}) (or drop that grid axis), or combine the partial results with an atomic"
        if unused
        else "make the tiles of different programs disjoint: step by at least the tile size"
    )
    related = [(b.op, "the other write")] if b.op is not a.op else []
    fixes = _axis_fixes(ctx, a, unused[0]) if unused else _step_fixes(ctx, a)
    line = getattr(ctx.span(a.op), "line", 0)
    found = first_fix(ctx, "dataflow.write-overlap", line, [edits for _, edits in fixes])
    hint, edits = next(((h, found) for h, e in fixes if found and found in (e, (e,))), ("", ()))
    return ctx.report(
        a.op,
        f"programs {first} and {second} both write element {element} of `{name}` (with "
        f"{format_counterexample(shapes) or 'any shape'}): {why}, and programs run in any order",
        hint=hint,
        related=related,
        counterexample={**shapes, "program_id": first, "other program_id": second, "element": element},
        edits=edits,
    )


# ---- fixes ---------------------------------------------------------------------------------------

Fix = tuple[str, Edit | tuple[Edit, ...] | None]  # a hint and its edits


def _axis_fixes(ctx: Context, ref: Ref, axis: int) -> list[Fix]:
    """The index taken from the grid axis it ignores (a `program_id` of the index moved to it),
    else the writes combined with an atomic (split-K partial sums)."""
    fixes: list[Fix] = []
    for op in [op for v in ref.indices for op in feeding_ops(v) if isinstance(op, tl.ProgramIdOp)][:3]:
        if op.axis.data != axis and (span := ctx.span(op)) is not None:
            hint = f"take the index from program_id({axis}), the axis it ignores: `program_id({op.axis.data})` on line {span.line}"
            fixes.append((hint, Edit(span, f"program_id({axis})")))
    span = ctx.span(ref.op)
    if isinstance(ref.op, tl.StoreOp) and span is not None and (ctx.text_of(ref.op) or "").startswith("store("):
        add = Edit(Span(span.line, span.col, span.line, span.col + len("store("), span.file), "old = atomic_add(")
        fixes.append(
            (f"combine the partial results of program_id({axis}) with an atomic: `old = atomic_add(...)`", add)
        )
    return fixes


def _step_fixes(ctx: Context, ref: Ref) -> list[Fix]:
    """Tiles made disjoint: the step of a program id or role rank made the width of the tile
    it writes, or a role declared over warps that are whole warpgroups declared over those."""
    fixes: list[Fix] = []
    counter = lambda v: isinstance(v.owner, tl.ProgramIdOp | st.RoleRankOp)  # noqa: E731
    for d, v in enumerate(ref.indices):
        width = _width(ctx, ref, d)
        for scale in scale_of((v,), counter) if width is not None else []:
            old = ctx.text_of(scale.owner) if isinstance(scale.owner, Operation) else None
            span = ctx.span(scale.owner) if isinstance(scale.owner, Operation) else None
            if width is None or old is None or span is None or old == width:
                continue
            line = line_of(ctx, span.line) or ""
            col, end = span.col, span.end_col
            if line[col - 2 : col - 1] == "(" and line[end - 1 : end] == ")":
                col, end = col - 1, end + 1
            new = factor_text(width)
            hint = f"step by the width of the tile: `{old}` becomes `{new}` on line {span.line}"
            fixes.append((hint, Edit(Span(span.line, col, span.line, end, span.file), new)))
    fixes += warpgroup_roles(ctx, ref)
    return fixes[:4]


def _width(ctx: Context, ref: Ref, d: int) -> str | None:
    """How many elements of dimension `d` one write covers, as the program writes it: a slice's
    extent, or an index tile's longest dimension."""
    extent = ref.access.dims[d] if not ref.is_gather else None
    if extent is not None:
        return str(extent)
    shape = shape_of(ref.indices[d].type) if isinstance(ref.indices[d].type, TileType) else ()
    sizes = [(n, e) for e in shape if (n := ctx.static(e)) is not None and n > 1]
    return str(max(sizes, key=lambda t: t[0])[1]) if sizes else None


def _is_loop_name(sym, name: str) -> bool:
    # a name in `names` stands for one variable, so a loop's variable is known by its name
    return name in sym.names and name in sym.loop_names
