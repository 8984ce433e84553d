"""Dataflow into the kernel's tensor arguments: every output written everywhere, no input written.

- `dataflow.output-unwritten`: an `out` tensor that nothing writes, or whose writes cannot
  cover every element for some shape the `where` clause allows (proved with z3);
- `dataflow.input-written`: a write to a tensor that is not marked `out`.

Coverage is decided per dimension on affine indices. An index such as
`program_id(0) * BM + arange(0, BM)` (or the slice `m0 : m0 + BM`) is a sum `c1 * v1 + c2 * v2
+ ...` over *counters*: program ids (ranging over the grid), loop iterations, role ranks and
lanes, each from 0 to its extent. Sorted by coefficient, the counters cover `[0, L)` without a
hole exactly when each coefficient is at most the length covered by the smaller ones (a mixed
radix), with `L = 1 + sum(c_i * (n_i - 1))`; the first counter whose coefficient exceeds the
covered length leaves a hole right there. The claim "every element is written" is then a z3
query over the shape symbols, and its counterexample names the shape and the element missed.
When the dimensions use disjoint counters and the radix is exact (each element is reached by
one lane only), a mask or an enclosing `if` that is false at an in-bounds lane also leaves that
element unwritten. Anything else (several writes, data-dependent indices, atomics, a loop whose
trip count depends on the program or an outer loop, as a persistent grid's) is not judged: the
rule only reports what it proves."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import z3
from xdsl.ir import BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, dtype_of, shape_of
from verifier.context import Context, OpInfo
from verifier.registry import rule
from verifier.rules.dataflow_facts import Ref, arg_name, index_terms, writes
from verifier.symbolic import format_counterexample, readable


def _arg_span(ctx: Context, name: str) -> Span | None:
    return ctx.program.arg_spans.get(name) or ctx.program.span()


# ---- affine indices over counters ------------------------------------------------------------------

Counter = tuple  # ("pid", axis) | ("rank", role) | ("loop", ForOp) | ("lane", access axis)


@dataclass(frozen=True)
class Affine:
    const: int
    coeffs: tuple[tuple[Counter, int], ...]

    def scaled(self, k: int) -> Affine:
        return Affine(self.const * k, tuple((c, v * k) for c, v in self.coeffs))

    def plus(self, other: Affine) -> Affine:
        out = dict(self.coeffs)
        for c, v in other.coeffs:
            out[c] = out.get(c, 0) + v
        return Affine(self.const + other.const, tuple((c, v) for c, v in out.items() if v != 0))

    @property
    def counters(self) -> set[Counter]:
        return {c for c, _ in self.coeffs}


def _const(n: int) -> Affine:
    return Affine(n, ())


def affine(ctx: Context, v: SSAValue, lanes: tuple[int | None, ...]) -> Affine | None:
    """`v` as const + sum(coefficient * counter), with its dimensions placed on the access
    axes `lanes` (None: a dimension of extent 1); None when it is not of that form."""
    if isinstance(v, BlockArgument):
        owner = v.block.parent_op()
        if isinstance(owner, st.ForOp) and v.index == 0:
            lo, step = _static_int(ctx, owner.lower), _static_int(ctx, owner.step)
            if lo is None or step is None or step <= 0:
                return None
            return Affine(lo, ((("loop", owner), step),))
        return None
    op = v.owner
    if isinstance(op, tl.ConstOp):
        n = op.number
        return _const(int(n)) if isinstance(n, int) and not isinstance(n, bool) else None
    if isinstance(op, tl.SymValueOp):
        name = op.symbol.data
        return _const(ctx.params[name]) if name in ctx.params else None
    if isinstance(op, tl.ProgramIdOp):
        if op.axis.data >= len(ctx.kernel.grid.data):
            return _const(0)  # an axis the grid does not have (types.axis)
        return Affine(0, ((("pid", op.axis.data), 1),))
    if isinstance(op, st.RoleRankOp):
        role = op.parent_op()
        while role is not None and not isinstance(role, st.RoleOp):
            role = role.parent_op()
        return Affine(0, ((("rank", role), 1),)) if role is not None else _const(0)
    if isinstance(op, tl.ArangeOp):
        start = ctx.static(op.start.data)
        if start is None:
            return None
        if lanes[0] is None:
            return _const(start)
        return Affine(start, ((("lane", lanes[0]), 1),))
    if isinstance(op, tl.CastOp):
        if not _int_dtype(op.operand) or not _int_dtype(op.res):
            return None
        return affine(ctx, op.operand, lanes)
    if isinstance(op, tl.ExpandDimsOp):
        inner = tuple(lane for i, lane in enumerate(lanes) if i != op.axis.data)
        return affine(ctx, op.operand, inner)
    if isinstance(op, tl.BroadcastOp):
        return affine(ctx, op.operand, _placed(ctx, op.operand, lanes))
    if isinstance(op, tl.BinaryOp) and op.fn.data in ("add", "sub", "mul"):
        a = affine(ctx, op.lhs, _placed(ctx, op.lhs, lanes))
        b = affine(ctx, op.rhs, _placed(ctx, op.rhs, lanes))
        if a is None or b is None:
            return None
        if op.fn.data == "add":
            return a.plus(b)
        if op.fn.data == "sub":
            return a.plus(b.scaled(-1))
        if not a.coeffs:
            return b.scaled(a.const)
        if not b.coeffs:
            return a.scaled(b.const)
    if isinstance(op, tl.BinaryOp) and op.fn.data in ("div", "rem"):
        # a constant of constants (`BM / 2` with the parameters bound), as C computes it
        a = affine(ctx, op.lhs, _placed(ctx, op.lhs, lanes))
        b = affine(ctx, op.rhs, _placed(ctx, op.rhs, lanes))
        if a is None or b is None or a.coeffs or b.coeffs or b.const == 0:
            return None
        return _const(sx.c_div(a.const, b.const) if op.fn.data == "div" else sx.c_rem(a.const, b.const))
    return None


def _placed(ctx: Context, operand: SSAValue, lanes: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """The access axes of an operand broadcast (right-aligned) to a value placed on `lanes`."""
    shape = shape_of(operand.type)
    k = len(lanes) - len(shape)
    return tuple(None if _extent(ctx, d) == 1 else lanes[k + i] for i, d in enumerate(shape))


def _extent(ctx: Context, d: sx.SymExpr) -> int | None:
    folded = sx.fold(d).as_int()
    return folded if folded is not None else ctx.static(d)


def _static_int(ctx: Context, v: SSAValue) -> int | None:
    a = affine(ctx, v, ())
    return a.const if a is not None and not a.coeffs else None


def _int_dtype(v: SSAValue) -> bool:
    return dtype_of(v.type) in tl.INT_DTYPES


def dimension_indices(ctx: Context, ref: Ref) -> list[Affine] | None:
    """The affine index of each dimension of a global access (None if one is not affine)."""
    shape = ref.shape
    out: list[Affine] = []
    if not ref.is_gather:
        axis = 0
        for extent, v in zip(ref.access.dims, ref.indices, strict=True):
            a = affine(ctx, v, ())
            if a is None:
                return None
            if extent is not None:
                a = a.plus(Affine(0, ((("lane", axis), 1),)))
                axis += 1
            out.append(a)
        return out
    for v in ref.indices:
        a = affine(ctx, v, _placed(ctx, v, tuple(range(len(shape)))))
        if a is None:
            return None
        out.append(a)
    return out


def counter_extent(ctx: Context, counter: Counter, ref: Ref) -> z3.ArithRef | None:
    sym = ctx.symbolic
    kind, what = counter
    if kind == "pid":
        return sym.sym(ctx.kernel.grid.data[what].data)
    if kind == "rank":
        return z3.IntVal(len(what.id_list))
    if kind == "lane":
        return sym.sym(ref.shape[what])
    if kind == "loop":
        lo, step = _static_int(ctx, what.lower), _static_int(ctx, what.step)
        hi = sym.value(what.upper)
        if hi.tainted or lo is None or step is None:
            return None
        shapes = {str(sym.names[n]) for n in ctx.kernel.shape_symbols if n in sym.names}
        if not sym.variables(hi.expr) <= shapes:
            # a trip count that depends on the program (a persistent grid's share of tiles) or
            # on an outer loop: the iteration space is no product of ranges; not judged
            return None
        return _ceil_div(hi.expr - lo, step)
    return None


def _ceil_div(a: z3.ArithRef, b: int) -> z3.ArithRef:
    return z3.If(a <= 0, z3.IntVal(0), (a + (b - 1)) / b)


def counter_text(ctx: Context, counter: Counter) -> str:
    kind, what = counter
    if kind == "pid":
        return f"program_id({what})"
    if kind == "rank":
        return f"role_rank() of role `{what.name_text}`"
    if kind == "loop":
        return f"the loop over `{what.body.block.args[0].name_hint or 'k'}`"
    return "the lanes"


# ---- dataflow.output-unwritten ----------------------------------------------------------------------

_COVER_VEC = """\
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  where N %% BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  b0 = program_id(0) * BLOCK
  store(y[b0 : b0 + %s], load(x[b0 : b0 + %s]) * 2.0)%s
}
"""


@rule(
    "dataflow.output-unwritten",
    family="dataflow",
    severity="error",
    summary="an output tensor is not written everywhere",
    explanation="""
Every element of an `out` tensor must be written by some program: the harness fills outputs
with poison before the run, so an element that no program writes comes back as garbage (or
as last run's result, which hides the bug until the shapes change). Two cases are reported.

An `out` tensor that no `store`, atomic or `tma.store` writes at all.

A tensor whose single write cannot cover it for some shape that the `where` clause allows.
The verifier reads each index as a sum of counters (program ids over the grid, loop
iterations, role ranks, lanes) and proves with z3 that together they reach every index from
0 to the extent. The classic failures: `grid(M / BM)` without `where M % BM == 0` (the last
M % BM rows are never written; launch `cdiv(M, BM)` programs with a mask, or state the
constraint), a grid that is one program short, a slice narrower than the step between
programs (`c[m0 : m0 + BM / 2]` with `m0 = program_id(0) * BM`), a loop that stops one tile
early, and a mask or `if` that turns off lanes inside the tensor. The counterexample gives the
shape values and the element left unwritten.
""",
    bad=_COVER_VEC % ("BLOCK / 2", "BLOCK / 2", "  # <-"),
    good=_COVER_VEC % ("BLOCK", "BLOCK", ""),
)
def check_output_unwritten(ctx: Context) -> Iterator[Diagnostic]:
    written: dict[SSAValue, list[OpInfo]] = {}  # each tensor's writing ops (once per write)
    for i in ctx.infos:
        for r in writes(i.op):
            written.setdefault(r.mem, []).append(i)
    for name, arg in ctx.kernel.args:
        if not cast(GlobalType, arg.type).is_out:
            continue
        infos = written.get(arg, [])
        if not infos:
            yield ctx.report(
                _arg_span(ctx, name),
                f"`{name}` is an output, but nothing writes it: every element keeps the poison the harness fills it with",
                hint=f"store the result into `{name}` (store({name}[...], ...)), or drop `out` if it is only read",
            )
            continue
        if len(infos) != 1 or any(isinstance(i.op, tl.AtomicOp) for i in infos):
            continue  # several writes or atomics: coverage is not judged
        (info,) = infos
        (ref,) = [r for r in writes(info.op) if r.mem is arg]
        yield from _coverage(ctx, name, info, ref)


def _coverage(ctx: Context, name: str, info: OpInfo, ref: Ref) -> Iterator[Diagnostic]:
    dims = dimension_indices(ctx, ref)
    if dims is None:
        return
    seen: set[Counter] = set()
    for a in dims:
        if a.counters & seen:
            return  # two dimensions share a counter: the written set is not a product
        seen |= a.counters
    sym = ctx.symbolic
    mem_shape = shape_of(ref.mem.type)
    exact = True
    for d, a in enumerate(dims):
        terms = []
        for counter, c in sorted(a.coeffs, key=lambda t: t[1]):
            n = counter_extent(ctx, counter, ref)
            if c <= 0 or n is None:
                return
            terms.append((c, n, counter))
        extent = sym.sym(mem_shape[d])
        found = _dimension_hole(ctx, a.const, terms, extent)
        if found is None:
            continue
        if found == "exact-failed":
            exact = False
            continue
        yield from _report_hole(ctx, name, info, ref, d, a.const, terms, *found)
        return
    if exact:
        yield from _masked_hole(ctx, name, info, ref)


def _dimension_hole(ctx: Context, const: int, terms: list, extent: z3.ArithRef):
    """None when the counters cover [0, extent) for every admissible shape; "exact-failed"
    when they do but some element may be reached twice; else (counterexample, cause, element
    text) for a hole."""
    sym = ctx.symbolic
    cur = z3.IntVal(1)
    causes: list[tuple[z3.BoolRef, z3.ArithRef, str]] = []
    nonempty = z3.And(*[n >= 1 for _, n, _ in terms]) if terms else z3.BoolVal(True)
    causes.append((z3.Not(nonempty), z3.IntVal(0), "empty"))
    causes.append((z3.BoolVal(const > 0), z3.IntVal(0), "offset"))
    exact_claims = []
    for i, (c, n, _) in enumerate(terms):
        hole = const + cur
        causes.append((z3.And(c > cur, hole >= 0, hole < extent), hole, f"gap{i}"))
        exact_claims.append(cur == c)
        cur = cur + c * (n - 1)
    causes.append((const + cur < extent, const + cur, "short"))
    claim = z3.Not(z3.Or(*[f for f, _, _ in causes]))
    element = z3.IntVal(-1)
    which = z3.IntVal(-1)
    for k, (f, e, _) in reversed(list(enumerate(causes))):
        element = z3.If(f, e, element)
        which = z3.If(f, z3.IntVal(k), which)
    evaluate = {"__element": element, "__cause": which}
    # Prefer a shape where every counter runs (a hole more telling than an empty grid).
    cex = sym.counterexample(claim, [nonempty], evaluate=evaluate)
    if cex is None or "unknown" in cex:
        cex = sym.counterexample(claim, evaluate=evaluate)
    if cex is None:
        if exact_claims and not sym.holds(z3.And(*exact_claims), [nonempty]):
            return "exact-failed"
        return None
    if "unknown" in cex:
        return None
    cause = causes[cex["__cause"]][2] if 0 <= cex.get("__cause", -1) < len(causes) else "short"
    return cex, cause, cex["__element"]


def _report_hole(
    ctx: Context, name: str, info: OpInfo, ref: Ref, d: int, const: int, terms, cex: dict, cause: str, element: int
):
    shape_values = {k: v for k, v in cex.items() if k in ctx.kernel.shape_symbols}
    where = format_counterexample(shape_values) or "some shape"
    dims = ", ".join(str(x) for x in shape_of(ref.mem.type))
    rank = len(shape_of(ref.mem.type))
    index = ", ".join(str(element) if i == d else ":" for i in range(rank))
    counterexample = {**shape_values, "element": [element if i == d else ":" for i in range(rank)]}
    related: list = []
    edit: Edit | None = None
    top = terms[-1][2] if terms else None
    grid_span = ctx.program.clause_spans.get("grid")
    at: Operation | Span = info.op
    if cause == "empty":
        empty = next((t for t in terms if t[2][0] in ("pid", "loop")), None)
        reason = "no program (or no iteration) writes it at all"
        if empty is not None and empty[2][0] == "pid" and grid_span is not None:
            at, related = grid_span, [(info.op, "the write")]
            reason = f"the grid has no program along axis {empty[2][1]}"
        hint = "launch at least one program: use cdiv(...) in the grid with a mask, or state the constraint in `where`"
    elif cause == "offset":
        reason = "the index never comes down to 0"
        hint = "start the index at 0"
    elif cause.startswith("gap"):
        i = int(cause[3:])
        c, _, counter = terms[i]
        reason = (
            f"{counter_text(ctx, counter)} steps by {c} elements but each step writes only {element - const} "
            f"contiguous ones, so index {element} of dimension {d} falls between two writes"
        )
        hint = "make each program (or iteration) write as many elements as it steps over: widen the slice or the arange"
    else:
        kind = top[0] if top is not None else None
        reason = f"the writes stop before index {element} of dimension {d} (extent {shape_of(ref.mem.type)[d]})"
        if kind == "pid" and grid_span is not None:
            assert top is not None  # its kind is "pid"
            at, related = grid_span, [(info.op, "the write that stops short")]
            axis = top[1]
            extent = shape_of(ref.mem.type)[d]
            reason = (
                f"the grid launches too few programs along axis {axis} "
                f"(grid({ctx.kernel.grid.data[axis].data}) for {extent} elements): {reason}"
            )
            divides = f"{extent} % {terms[-1][0]} == 0"
            try:  # the constraint fixes it only where the shapes that show the gap break it
                broken = extent.evaluate(shape_values) % int(terms[-1][0]) != 0
            except (KeyError, ValueError, TypeError, ZeroDivisionError):
                broken = False
            edit = ctx.state_in_where(divides) if broken else None
            hint = (
                f"state the constraint the grid relies on: `where {divides}`, or launch cdiv({extent}, "
                f"{terms[-1][0]}) programs along axis {axis} with a mask on the store"
            )
        elif kind == "loop":
            assert top is not None  # its kind is "loop"
            at, related = top[1], [(info.op, "the write")]
            reason = f"the loop stops too early: {reason}"
            hint = "run the loop over every tile: cdiv(extent, tile) iterations, with a mask"
        else:
            hint = "cover the whole extent: more lanes or programs, or a constraint in `where`"
    message = f"`{name}[{dims}]` is not written everywhere when {where}: element [{index}] is never written; {reason}"
    edits = [edit] if edit is not None else []
    out = [ctx.report(at, message, hint=hint, related=related, counterexample=counterexample, edits=edits)]
    if at is not info.op:
        # The launch (or the loop) is to blame; the write that falls short is where a reader of
        # the body looks first, so it says so too.
        out.append(
            ctx.report(
                info.op,
                f"this write leaves element [{index}] of `{name}` unwritten when {where}: {reason}",
                hint=hint,
                related=[(at, "the grid" if isinstance(at, Span) else "the loop")],
                counterexample=counterexample,
                edits=edits,
            )
        )
    return out


def _masked_hole(ctx: Context, name: str, info: OpInfo, ref: Ref) -> Iterator[Diagnostic]:
    """With an exact cover, a lane inside the tensor whose mask (or enclosing `if`) is false
    writes nothing, and no other lane writes its element."""
    sym = ctx.symbolic
    path = sym.path(info.op)
    if ref.mask is None and not info.in_if:
        return
    shape = ref.shape
    lanes = sym.lanes(shape, f"cover{ctx.order[info.op]}")
    terms = index_terms(ctx, ref, lanes)
    if terms is None:
        return
    guard = [path]
    if ref.mask is not None:
        guard.append(sym.at(ref.mask, lanes))
    if any(g.tainted for g in guard) or any(t.tainted for t in terms):
        return
    # A guard on something the index does not depend on (another role rank, another grid
    # axis, a loop that does not move the write) may hold for a sibling that writes the same
    # element: only a guard over the index's own variables (and the shapes) decides.
    own = set(ctx.kernel.shape_symbols).union(*(sym.variables(t.expr) for t in terms))
    if any(not sym.variables(g.expr) <= own for g in guard):
        return
    mem_shape = shape_of(ref.mem.type)
    inside = z3.And(*[z3.And(t.expr >= 0, t.expr < sym.sym(mem_shape[d])) for d, t in enumerate(terms)])
    claim = z3.Implies(inside, z3.And(*[g.expr for g in guard]))
    evaluate = {f"__index{d}": t.expr for d, t in enumerate(terms)}
    evaluate["__masked"] = guard[-1].expr if ref.mask is not None else z3.BoolVal(True)
    cex = sym.counterexample(claim, evaluate=evaluate)
    if cex is None or "unknown" in cex:
        return
    element = [cex[f"__index{d}"] for d in range(len(terms))]
    shown = readable({k: v for k, v in cex.items() if not k.startswith("__")}, len(ctx.kernel.grid.data))
    by_mask = ref.mask is not None and str(cex.get("__masked")) == "False"
    branch = _innermost_if(info.op)
    at: Operation = info.op if by_mask or branch is None else branch
    what = "its mask is" if by_mask else "the condition of the enclosing `if` is"
    yield ctx.report(
        at,
        f"element {element} of `{name}` is never written: the only write to `{name}` reaches it, but {what} "
        f"false there ({format_counterexample(shown)})",
        hint="mask only the lanes outside the tensor (mask = offs < N), so that every element inside is written"
        if by_mask
        else "let every program write its tile: guard only the lanes outside the tensor, with a mask",
        related=[] if at is info.op else [(info.op, "the only write")],
        counterexample={**shown, "element": element},
    )


def _innermost_if(op: Operation) -> st.IfOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, st.KernelOp):
        if isinstance(parent, st.IfOp):
            return parent
        parent = parent.parent_op()
    return None


# ---- dataflow.input-written ----------------------------------------------------------------------------


@rule(
    "dataflow.input-written",
    family="dataflow",
    severity="error",
    summary="a kernel writes a tensor that is not marked `out`",
    explanation="""
Arguments not marked `out` are inputs: the harness checks that they are unchanged after the
run, other kernels may read them concurrently, and the lowering may place them in read-only
memory or pass them as `const __restrict__` pointers. A `store`, atomic or `tma.store` into
an input is either a wrong destination (the output was meant) or an output that lacks its
`out` marker.
""",
    bad="""
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  store(y[offs], v * 2.0, mask = mask)
  store(x[offs], v, mask = mask)  # <-
}
""",
    good="""
kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  store(y[offs], v * 2.0, mask = mask)
}
""",
)
def check_input_written(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.infos:
        for ref in writes(info.op):
            name = arg_name(ctx, ref.mem)
            if name is None or cast(GlobalType, ref.mem.type).is_out:  # an argument: a tensor
                continue
            span = ctx.program.arg_spans.get(name)
            yield ctx.report(
                info.op,
                f"{ref.verb} `{name}`, which is an input (not marked `out`): inputs must be unchanged after the run",
                hint=f"write the result to an output tensor, or declare `{name}: out global ...` if it is one",
                related=[(span, f"`{name}` is declared here")] if span is not None else [],
            )
