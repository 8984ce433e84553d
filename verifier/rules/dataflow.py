"""Dataflow: where values and memory contents come from and go to.

- `dataflow.output-unwritten`: an `out` tensor that nothing writes, or whose writes cannot
  cover every element for some shape the `where` clause allows (proved with z3);
- `dataflow.input-written`: a write to a tensor that is not marked `out`;
- `dataflow.write-overlap`: two programs of the grid write the same output element;
- `dataflow.smem-overlap`: an asynchronous copy into a shared view while an overlapping but
  different view of the same buffer is used, or a role reading a view that overlaps what
  another role writes in the same iteration without being covered by it;
- `dataflow.read-before-write`: a read of shared memory that nothing writes first, or of an
  output before the program wrote it;
- `dataflow.unused-value`: a load whose value nothing uses;
- `dataflow.dead-store`: a loop-carried value reset in the loop, a value or a store overwritten
  before any use;
- `dataflow.masked-reduce`: a reduction over masked-off lanes that do not hold its identity.

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
rule only reports what it proves.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass

import z3
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.tile import access_shape
from kir.dialect.types import Access, GlobalType, SmemType, TileType, shape_of
from verifier.context import Context, OpInfo
from verifier.registry import rule
from verifier.symbolic import format_counterexample, readable

# ---- memory operands -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """One memory operand of an op."""

    op: Operation
    mem: SSAValue
    access: Access
    indices: tuple[SSAValue, ...]
    mask: SSAValue | None
    verb: str

    @property
    def shape(self) -> tuple[sx.SymExpr, ...]:
        return access_shape(self.mem.type, self.access, list(self.indices))

    @property
    def is_gather(self) -> bool:
        return any(isinstance(v.type, TileType) for v in self.indices)


def writes(op: Operation) -> list[Ref]:
    """The memory an op writes (global tensors and shared buffers)."""
    if isinstance(op, tl.StoreOp):
        return [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, "store to")]
    if isinstance(op, tl.AtomicOp):
        return [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, f"atomic_{op.fn.data} on")]
    if isinstance(op, ex.TmaStoreOp):
        return [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, "tma.store to")]
    if isinstance(op, ex.TmaLoadOp):
        return [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, "tma.load into")]
    if isinstance(op, ex.CpAsyncOp):
        return [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), op.mask, "cp.async into")]
    return []


def reads(op: Operation) -> list[Ref]:
    """The memory an op reads."""
    if isinstance(op, tl.LoadOp):
        return [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, "load from")]
    if isinstance(op, tl.AtomicOp):
        return [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, f"atomic_{op.fn.data} on")]
    if isinstance(op, ex.TmaLoadOp):
        return [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.load from")]
    if isinstance(op, ex.CpAsyncOp):
        return [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), op.mask, "cp.async from")]
    if isinstance(op, ex.TmaStoreOp):
        return [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.store from")]
    if isinstance(op, ex.WgmmaOp):
        a = [] if op.a_in_registers else [Ref(op, op.a, op.a_access.data, tuple(op.a_indices), None, "wgmma reading")]
        return [*a, Ref(op, op.b, op.b_access.data, tuple(op.b_indices), None, "wgmma reading")]
    return []


def arg_name(ctx: Context, mem: SSAValue) -> str | None:
    """The kernel argument a memory value is, if it is one."""
    if isinstance(mem, BlockArgument) and isinstance(mem.block.parent_op(), st.KernelOp):
        return ctx.kernel.args[mem.index][0]
    return None


def name_of(v: SSAValue) -> str:
    return v.name_hint or "?"


def may_precede(ctx: Context, first: OpInfo, then: OpInfo) -> bool:
    """Whether `first` can run before `then` in some schedule: earlier in program order, in an
    enclosing loop of both (a later statement runs before it in the next iteration), or in
    another role (roles run concurrently)."""
    if first.role is not None and then.role is not None and first.role is not then.role:
        return True
    if ctx.order[first.op] < ctx.order[then.op]:
        return True
    return any(loop in first.loops for loop in then.loops)


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
    return v.type.dtype.data in tl.INT_DTYPES


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
        if not arg.type.is_out:
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
            at, related = grid_span, [(info.op, "the write that stops short")]
            axis = top[1]
            extent = shape_of(ref.mem.type)[d]
            reason = (
                f"the grid launches too few programs along axis {axis} "
                f"(grid({ctx.kernel.grid.data[axis].data}) for {extent} elements): {reason}"
            )
            hint = (
                f"launch cdiv({extent}, {terms[-1][0]}) programs along axis {axis} with a mask on the store, "
                f"or state the constraint the grid relies on in `where` (e.g. `{extent} % {terms[-1][0]} == 0`)"
            )
        elif kind == "loop":
            at, related = top[1], [(info.op, "the write")]
            reason = f"the loop stops too early: {reason}"
            hint = "run the loop over every tile: cdiv(extent, tile) iterations, with a mask"
        else:
            hint = "cover the whole extent: more lanes or programs, or a constraint in `where`"
    message = f"`{name}[{dims}]` is not written everywhere when {where}: element [{index}] is never written; {reason}"
    out = [ctx.report(at, message, hint=hint, related=related, counterexample=counterexample)]
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
    index_terms = _index_terms(ctx, ref, lanes)
    if index_terms is None:
        return
    guard = [path]
    if ref.mask is not None:
        guard.append(sym.at(ref.mask, lanes))
    if any(g.tainted for g in guard) or any(t.tainted for t in index_terms):
        return
    # A guard on something the index does not depend on (another role rank, another grid
    # axis, a loop that does not move the write) may hold for a sibling that writes the same
    # element: only a guard over the index's own variables (and the shapes) decides.
    own = set(ctx.kernel.shape_symbols).union(*(sym.variables(t.expr) for t in index_terms))
    if any(not sym.variables(g.expr) <= own for g in guard):
        return
    mem_shape = shape_of(ref.mem.type)
    inside = z3.And(*[z3.And(t.expr >= 0, t.expr < sym.sym(mem_shape[d])) for d, t in enumerate(index_terms)])
    claim = z3.Implies(inside, z3.And(*[g.expr for g in guard]))
    evaluate = {f"__index{d}": t.expr for d, t in enumerate(index_terms)}
    evaluate["__masked"] = guard[-1].expr if ref.mask is not None else z3.BoolVal(True)
    cex = sym.counterexample(claim, evaluate=evaluate)
    if cex is None or "unknown" in cex:
        return
    element = [cex[f"__index{d}"] for d in range(len(index_terms))]
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


def _index_terms(ctx: Context, ref: Ref, lanes: tuple):
    sym = ctx.symbolic
    out = []
    if not ref.is_gather:
        axis = 0
        for extent, v in zip(ref.access.dims, ref.indices, strict=True):
            t = sym.value(v)
            if extent is not None:
                t = type(t)(t.expr + lanes[axis], t.tainted, t.why)
                axis += 1
            out.append(t)
        return out
    for v in ref.indices:
        out.append(sym.at(v, lanes))
    return out


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
            if name is None or ref.mem.type.is_out:
                continue
            span = ctx.program.arg_spans.get(name)
            yield ctx.report(
                info.op,
                f"{ref.verb} `{name}`, which is an input (not marked `out`): inputs must be unchanged after the run",
                hint=f"write the result to an output tensor, or declare `{name}: out global ...` if it is one",
                related=[(span, f"`{name}` is declared here")] if span is not None else [],
            )


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
        terms = _index_terms(ctx, ref, lanes)
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
        self.ranges = ranges
        self.usable = [i for i, r in enumerate(ranges) if r is not None]
        ranks = {len(ranges[i]) for i in self.usable}
        self.dim: int | None = None
        if len(ranks) == 1:  # (writes of different ranks: every pair is asked, as before)
            rank = ranks.pop()
            known = [sum(ranges[i][d] is not None for i in self.usable) for d in range(rank)]
            if known and max(known) > 0:
                self.dim = known.index(max(known))
        if self.dim is None:
            return
        d = self.dim
        self.wild = [i for i in self.usable if ranges[i][d] is None]
        finite = sorted((ranges[i][d][0], ranges[i][d][1], i) for i in self.usable if ranges[i][d] is not None)
        self.starts = [lo for lo, _, _ in finite]
        self.ends = [hi for _, hi, _ in finite]
        self.index = [i for _, _, i in finite]
        self.reach: list[int] = []  # the largest end among the first k ranges (by start)
        for hi in self.ends:
            self.reach.append(max(hi, self.reach[-1]) if self.reach else hi)

    def after(self, i: int) -> list[int]:
        r = self.ranges[i]
        if self.dim is None:
            pool = self.usable[bisect.bisect_left(self.usable, i) :]
        elif r[self.dim] is None:
            pool = self.usable[bisect.bisect_left(self.usable, i) :]
        else:
            lo, hi = r[self.dim]
            pool = self.wild[bisect.bisect_left(self.wild, i) :]
            k = bisect.bisect_right(self.starts, hi) - 1  # the ranges starting at or before hi
            while k >= 0 and self.reach[k] >= lo:  # stop where every earlier range ends before lo
                if self.ends[k] >= lo and self.index[k] >= i:
                    pool.append(self.index[k])
                k -= 1
            pool.sort()
        return [j for j in pool if self._meet(r, self.ranges[j])]

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
    ia, ib = _index_terms(ctx, a, lanes_a), _index_terms(ctx, b, lanes_b)
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
    return ctx.report(
        a.op,
        f"programs {first} and {second} both write element {element} of `{name}` (with "
        f"{format_counterexample(shapes) or 'any shape'}): {why}, and programs run in any order",
        hint=hint,
        related=related,
        counterexample={**shapes, "program_id": first, "other program_id": second, "element": element},
    )


def _is_loop_name(sym, name: str) -> bool:
    # a name in `names` stands for one variable, so a loop's variable is known by its name
    return name in sym.names and name in sym.loop_names


# ---- dataflow.smem-overlap ----------------------------------------------------------------------------


@rule(
    "dataflow.smem-overlap",
    family="dataflow",
    severity="error",
    summary="an asynchronous copy writes a shared view that overlaps another view in use",
    explanation="""
A `tma.load` or `cp.async` writes its shared destination asynchronously, until the wait that
completes it. In that window, another access of the same buffer through a *different* view
that overlaps the destination (another stage index that can be equal to it, a slice that
crosses it) reads half-written data or races with the copy: two copies in one iteration into
`buf[k % 2]` and `buf[(k + 2) % 2]`, a second copy into the stage the first one is filling, a
copy of B into the buffer of A. The verifier proves with z3 that the two views share an
element in some iteration (and reports the loop variables and stage where they do). It only
looks within one role, between the copy and the next wait or barrier; ordering across roles
is the `sync` family's business, and an access to the *same* view before its wait is
`sync.read-before-wait`.
""",
    bad="""
kernel pairs<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {
    cp.async(x[m0 : m0 + BM, k * BK : k * BK + BK], buf[k % 2])
    cp.async(x[m0 : m0 + BM, k * BK : k * BK + BK], buf[(k + 2) % 2])  # <-
    cp.async.commit()
    cp.async.wait(0)
    barrier()
    acc = acc + sum(load(buf[k % 2]), axis = 1)
    barrier()
  }
  store(out[m0 : m0 + BM], acc)
}
""",
    good="""
kernel pairs<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {
    cp.async(x[m0 : m0 + BM, k * BK : k * BK + BK], buf[k % 2])
    cp.async(x[m0 : m0 + BM, k * BK : k * BK + BK], buf[(k + 1) % 2])
    cp.async.commit()
    cp.async.wait(0)
    barrier()
    acc = acc + sum(load(buf[k % 2]), axis = 1) + sum(load(buf[(k + 1) % 2]), axis = 1)
    barrier()
  }
  store(out[m0 : m0 + BM], acc)
}
""",
)
def check_smem_overlap(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.infos:
        if not isinstance(info.op, ex.TmaLoadOp | ex.CpAsyncOp):
            continue
        (copy,) = writes(info.op)
        if copy.is_gather:
            continue
        for later in _until_completion(info.op):
            for ref, is_write in [*((r, True) for r in writes(later)), *((r, False) for r in reads(later))]:
                if ref.mem is not copy.mem or ref.is_gather:
                    continue
                found = _overlap(ctx, copy, ref, is_write)
                if found is not None:
                    yield found
                    break
            else:
                continue
            break
    yield from _cross_role_views(ctx)


def _cross_role_views(ctx: Context) -> Iterator[Diagnostic]:
    """A role that reads, in iteration k of its loop, a view that overlaps what another role
    writes in iteration k of a loop with the same bounds, but is not covered by those writes:
    part of what it reads belongs to another stage (or to nothing written in that round)."""
    writers: dict[SSAValue, list[tuple[OpInfo, Ref]]] = {}
    for info in ctx.infos:
        if info.role is None or not info.loops:
            continue
        for ref in writes(info.op):
            if isinstance(ref.mem.type, SmemType) and not ref.is_gather:
                writers.setdefault(ref.mem, []).append((info, ref))
    for info in ctx.infos:
        if info.role is None or not info.loops:
            continue
        for ref in reads(info.op):
            if not isinstance(ref.mem.type, SmemType) or ref.is_gather:
                continue
            by_loop: dict[st.ForOp, list[Ref]] = {}
            for winfo, wref in writers.get(ref.mem, []):
                if winfo.role is not info.role:
                    by_loop.setdefault(winfo.loops[-1], []).append(wref)
            for wloop, wrefs in by_loop.items():
                found = _uncovered_read(ctx, info, ref, wloop, wrefs)
                if found is not None:
                    yield found
                    break


def _same_bounds(ctx: Context, a: st.ForOp, b: st.ForOp) -> bool:
    sym = ctx.symbolic
    terms = [(sym.value(x), sym.value(y)) for x, y in ((a.lower, b.lower), (a.upper, b.upper), (a.step, b.step))]
    if any(t.tainted for pair in terms for t in pair):
        return False
    return sym.holds(z3.And(*[x.expr == y.expr for x, y in terms]))


def _uncovered_read(ctx: Context, info: OpInfo, ref: Ref, wloop: st.ForOp, wrefs: list[Ref]) -> Diagnostic | None:
    sym = ctx.symbolic
    rloop = info.loops[-1]
    if not _same_bounds(ctx, rloop, wloop):
        return None
    k_read = sym.value(rloop.body.block.args[0])
    k_write = sym.value(wloop.body.block.args[0])
    if k_read.tainted or k_write.tainted:
        return None
    region = _regions(ctx, ref)
    written = [_regions(ctx, w) for w in wrefs]
    if region is None or any(w is None for w in written):
        return None

    def same_round(e: z3.ExprRef) -> z3.ExprRef:  # the writers' iteration is the reader's
        return z3.substitute(e, (k_write.expr, k_read.expr))

    written = [[(same_round(lo), same_round(hi)) for lo, hi in w] for w in written]
    # A role of several units writes the union of its units' views: one box per unit
    boxes, box_refs = [], []
    for box, w in zip(written, wrefs, strict=True):
        for unit_box in _per_unit(sym, w.op, box):
            boxes.append(unit_box)
            box_refs.append(w)
    written, wrefs = boxes, box_refs
    element = [z3.Int(f"__element{d}") for d in range(len(region))]

    def inside(box) -> z3.BoolRef:
        return z3.And(*[z3.And(lo <= e, e < hi) for e, (lo, hi) in zip(element, box, strict=True)])

    def points(r: Ref) -> set[int]:
        return {d for d, extent in enumerate(r.access.dims) if extent is None}

    def meets(box, w: Ref) -> z3.BoolRef:
        # Same stage: the dimensions both index with a point (the stage index) coincide; with
        # no such dimension, the views overlap somewhere.
        dims = sorted(points(ref) & points(w)) or range(len(region))
        return z3.And(*[z3.And(region[d][0] < box[d][1], box[d][0] < region[d][1]) for d in dims])

    uncovered = z3.And(
        inside(region),
        *[z3.Not(inside(w)) for w in written],
        z3.Or(*[meets(box, w) for box, w in zip(written, wrefs, strict=True)]),
    )
    cex = sym.counterexample(z3.Not(uncovered))
    if cex is None or "unknown" in cex:
        return None
    at = [cex.get(f"__element{d}", 0) for d in range(len(region))]
    shown = readable({k: v for k, v in cex.items() if not k.startswith(("__", "lane", "?"))}, len(ctx.kernel.grid.data))
    buf = name_of(ref.mem)
    role = wrefs[0].op
    while role is not None and not isinstance(role, st.RoleOp):
        role = role.parent_op()
    who = f"role `{role.name_text}`" if role is not None else "another role"
    return ctx.report(
        info.op,
        f"{ref.verb} `{buf}` through a view that overlaps what {who} writes in the same iteration (the same "
        f"stage) but is not covered by it: element {at} of `{buf}` is read but not written in that round "
        f"({format_counterexample(shown)}), so it holds data of another round, or none",
        hint="read exactly the view the producer fills for this iteration (same stage index and slice bounds), "
        "or make the producer's copies cover it",
        related=[(w.op, f"what {who} writes") for w in wrefs[:2]],
        counterexample={**shown, "element": at},
    )


def _per_unit(sym, op: Operation, box: list) -> list[list]:
    """`box` (bounds per dimension) once for each unit of `op`'s role, its rank made constant;
    `[box]` when the box does not depend on the rank."""
    role = op
    while role is not None and not isinstance(role, st.RoleOp):
        role = role.parent_op()
    rank = sym.names.get(f"role_rank({role.name_text})") if role is not None else None
    if rank is None or not any(str(rank) in sym.variables(e) for bounds in box for e in bounds):
        return [box]
    return [
        [(z3.substitute(lo, (rank, z3.IntVal(u))), z3.substitute(hi, (rank, z3.IntVal(u)))) for lo, hi in box]
        for u in range(len(role.id_list))
    ]


def _until_completion(op: Operation) -> Iterator[Operation]:
    """The ops after the copy `op` in its block while the copy may still be in flight: up to
    the mbarrier wait that could complete a TMA copy, or the `cp.async.wait(n)` that retires
    the group of a cp.async (the first commit after the copy closes its group; `wait(n)` leaves
    the n newest groups in flight). Loops and branches are looked into when they hold no such
    completion (one that does may complete the copy in its first iteration: the search stops
    there)."""
    commits = 0

    def completes(inner: Operation) -> bool:
        if isinstance(op, ex.TmaLoadOp):
            return isinstance(inner, ex.WaitOp)
        return isinstance(inner, ex.CpAsyncWaitOp) and commits - 1 >= inner.pending.data

    nxt = op.next_op
    while nxt is not None:
        nested = list(nxt.walk())
        if len(nested) > 1 and any(isinstance(i, ex.WaitOp | ex.CpAsyncWaitOp | ex.CpAsyncCommitOp) for i in nested):
            return
        for inner in nested:
            if isinstance(inner, ex.CpAsyncCommitOp):
                commits += 1
            if completes(inner):
                return
            yield inner
        nxt = nxt.next_op


def _regions(ctx: Context, ref: Ref) -> list[tuple[z3.ArithRef, z3.ArithRef]] | None:
    sym = ctx.symbolic
    out = []
    for extent, v in zip(ref.access.dims, ref.indices, strict=True):
        t = sym.value(v)
        if t.tainted:
            return None
        out.append((t.expr, t.expr + (sym.sym(extent) if extent is not None else 1)))
    for d in shape_of(ref.mem.type)[len(ref.access.dims) :]:
        out.append((z3.IntVal(0), sym.sym(d)))
    return out


def _overlap(ctx: Context, copy: Ref, other: Ref, other_writes: bool) -> Diagnostic | None:
    sym = ctx.symbolic
    ra, rb = _regions(ctx, copy), _regions(ctx, other)
    if ra is None or rb is None:
        return None
    identical = sym.holds(z3.And(*[z3.And(a0 == b0, a1 == b1) for (a0, a1), (b0, b1) in zip(ra, rb, strict=True)]))
    if identical and not other_writes:
        return None  # the same view before its wait: sync.read-before-wait
    overlap = z3.And(*[z3.And(a0 < b1, b0 < a1) for (a0, a1), (b0, b1) in zip(ra, rb, strict=True)])
    evaluate = {f"__a{d}": a0 for d, (a0, _) in enumerate(ra)} | {f"__b{d}": b0 for d, (b0, _) in enumerate(rb)}
    cex = sym.counterexample(z3.Not(overlap), evaluate=evaluate)
    if cex is None or "unknown" in cex:
        return None
    shown = readable({k: v for k, v in cex.items() if not k.startswith(("__", "lane"))}, len(ctx.kernel.grid.data))
    buf = name_of(copy.mem)
    first = ", ".join(str(cex[f"__a{d}"]) for d in range(len(copy.access.dims)))
    second = ", ".join(str(cex[f"__b{d}"]) for d in range(len(other.access.dims)))
    verb = other.verb
    what = "the same view" if identical else f"a view that overlaps it ({buf}[{second}...] against {buf}[{first}...])"
    return ctx.report(
        other.op,
        f"{verb} `{buf}` while the {copy.verb.split()[0]} above is still writing {what}"
        + (f" when {format_counterexample(shown)}" if shown else "")
        + ": the copy completes only at a later wait, so the two accesses overlap in time and in memory",
        hint="give each in-flight copy its own stage (index stages so that they differ, e.g. (k + 1) % S), "
        "or wait for the copy before touching the buffer again",
        related=[(copy.op, "the copy still in flight")],
        counterexample={**shown, "stage": [cex[f"__a{d}"] for d in range(len(copy.access.dims))]},
    )


# ---- dataflow.read-before-write --------------------------------------------------------------------------


@rule(
    "dataflow.read-before-write",
    family="dataflow",
    severity="error",
    summary="a read of memory that nothing has written yet",
    explanation="""
Shared memory starts with garbage: a `load`, `wgmma` or `tma.store` from a shared buffer
that no `store`, `tma.load` or `cp.async` writes before it (in program order, in an enclosing
loop, or in another role) reads whatever the previous CTA left there. That is an error.

An `out` tensor read by a program before that program has written it reads the poison the
harness fills outputs with (or the caller's stale data): reported as a warning, since a kernel
may legitimately read an in/out tensor it was given. Accumulating into the output (`c = c +
a @ b`) is the usual cause: accumulate in registers and store once.
""",
    bad="""
kernel stage<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[BM, BN])
  tmp = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]))
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(tmp[0 : BM]))  # <-
}
""",
    good="""
kernel stage<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[BM, BN])
  tmp = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]))
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
}
""",
)
def check_read_before_write(ctx: Context) -> Iterator[Diagnostic]:
    written: dict[SSAValue, list[OpInfo]] = {}
    for info in ctx.infos:
        for ref in writes(info.op):
            written.setdefault(ref.mem, []).append(info)
    for info in ctx.infos:
        for ref in reads(info.op):
            mem = ref.mem
            earlier = [w for w in written.get(mem, []) if w.op is not info.op and may_precede(ctx, w, info)]
            if earlier:
                continue
            if isinstance(mem.type, SmemType):
                later = written.get(mem, [])
                yield ctx.report(
                    info.op,
                    f"{ref.verb} shared buffer `{name_of(mem)}`, which nothing has written before: "
                    "shared memory starts with garbage"
                    + (" (the only writes come after this read, and no loop brings them round)" if later else ""),
                    hint=f"fill `{name_of(mem)}` first (store, tma.load or cp.async, then the wait), or read the buffer that was filled",
                    related=[(w.op, "written only here, later") for w in later[:1]],
                )
            elif isinstance(mem.type, GlobalType) and mem.type.is_out and not isinstance(info.op, tl.AtomicOp):
                name = arg_name(ctx, mem)
                later = written.get(mem, [])
                yield ctx.report(
                    info.op,
                    f"{ref.verb} output `{name}` before this program writes it: it holds the poison the harness "
                    "fills outputs with (or stale data), not a result",
                    hint="keep the value in registers (accumulate in a loop-carried tile) and store once; read inputs, not outputs",
                    related=[(w.op, "the first write") for w in later[:1]],
                    severity="warning",
                )


# ---- dataflow.unused-value ------------------------------------------------------------------------------

_EFFECTS = (
    tl.StoreOp,
    tl.AtomicOp,
    ex.ExpectOp,
    ex.ArriveOp,
    ex.WaitOp,
    ex.TmaLoadOp,
    ex.TmaStoreOp,
    ex.TmaStoreWaitOp,
    ex.CpAsyncOp,
    ex.CpAsyncCommitOp,
    ex.CpAsyncWaitOp,
    ex.CtaBarrierOp,
    ex.FenceAsyncOp,
    ex.WgmmaOp,
    ex.WgmmaWaitOp,
)


@rule(
    "dataflow.unused-value",
    family="dataflow",
    severity="warning",
    summary="a loaded value is never used",
    explanation="""
A `load` whose value reaches no store, atomic, copy, barrier or other effect (directly or
through the values computed from it, loop-carried values included) moves memory for nothing:
it costs bandwidth, registers and latency. More often it is a bug: the value was meant to be
used (a bias that never gets added, a scale that is loaded and forgotten, an accumulator
updated in a loop but never stored).
""",
    bad="""
kernel scale<BLOCK = 256>(x: global f32[N], w: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  s = load(w[offs], mask = mask)  # <-
  store(y[offs], v * 2.0, mask = mask)
}
""",
    good="""
kernel scale<BLOCK = 256>(x: global f32[N], w: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  s = load(w[offs], mask = mask)
  store(y[offs], v * s, mask = mask)
}
""",
)
def check_unused_value(ctx: Context) -> Iterator[Diagnostic]:
    live = _live_ops(ctx)
    for info in ctx.ops(tl.LoadOp):
        if info.op in live:
            continue
        (ref,) = reads(info.op)
        what = arg_name(ctx, ref.mem) or name_of(ref.mem)
        named = f" (`{info.op.res.name_hint}`)" if info.op.res.name_hint else ""
        yield ctx.report(
            info.op,
            f"the value loaded from `{what}`{named} is never used: nothing that is stored or has another effect depends on it",
            hint="use the value (was it meant to be in the stored result?) or drop the load",
        )


def _live_ops(ctx: Context) -> set[Operation]:
    """Ops whose work reaches an effect, by backward propagation over SSA values; a loop's
    carried value is live when its result or its use inside the loop is."""
    live_ops: set[Operation] = set()
    live_vals: set[SSAValue] = set()
    work: list[SSAValue | Operation] = [i.op for i in ctx.infos if isinstance(i.op, _EFFECTS)]
    while work:
        item = work.pop()
        if isinstance(item, Operation):
            if item in live_ops:
                continue
            live_ops.add(item)
            if isinstance(item, st.ForOp):
                work += [item.lower, item.upper, item.step]
            elif isinstance(item, st.IfOp):
                work.append(item.cond)
            elif not isinstance(item, st.YieldOp | st.RoleOp | st.KernelOp):
                work += list(item.operands)
            parent = item.parent_op()
            if isinstance(parent, st.ForOp | st.IfOp | st.RoleOp):
                work.append(parent)
            continue
        if item in live_vals:
            continue
        live_vals.add(item)
        if isinstance(item, BlockArgument):
            owner = item.block.parent_op()
            if isinstance(owner, st.ForOp):
                work.append(owner)
                if item.index >= 1:
                    i = item.index - 1
                    work += [owner.inits[i], owner.body.block.last_op.values[i]]
            continue
        op = item.owner
        work.append(op)
        if isinstance(op, st.ForOp):
            i = list(op.results).index(item)
            work += [op.inits[i], op.body.block.last_op.values[i]]
        elif isinstance(op, st.IfOp):
            i = list(op.results).index(item)
            work += [op.then_body.block.last_op.values[i], op.else_body.block.last_op.values[i]]
    return live_ops


_ = ex


# ---- dataflow.dead-store --------------------------------------------------------------------------------


@rule(
    "dataflow.dead-store",
    family="dataflow",
    severity="warning",
    summary="a value or a memory store is overwritten before anything uses it",
    explanation="""
Work whose result is overwritten before it is used is wasted, and usually a sign that the
program does not do what was meant. Three forms are reported:

- a loop-carried variable that the loop body reassigns without reading its previous value
  (an accumulator reset inside the loop, `acc = zeros(...)` before `acc = dot<f32>(a, b, acc)`):
  every iteration but the last is thrown away;
- a variable assigned and then assigned again in the same block before any use;
- a `store` to memory that a second store to exactly the same place (same access, same mask)
  overwrites before anything reads it or any barrier lets another thread read it.
""",
    bad="""
kernel gemm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {
    acc = zeros(f32[BM, BN])  # <-
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>(at, bt, acc)
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}
""",
    good="""
kernel gemm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>(at, bt, acc)
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}
""",
)
def check_dead_store(ctx: Context) -> Iterator[Diagnostic]:
    yield from _reset_in_loop(ctx)
    yield from _overwritten_values(ctx)
    yield from _overwritten_stores(ctx)


def _used(v: SSAValue) -> bool:
    return v.first_use is not None


def _reset_in_loop(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(st.ForOp):
        loop = info.op
        block = loop.body.block
        yielded = block.last_op.values
        for i, arg in enumerate(block.args[1:]):
            if _used(arg) or yielded[i] is arg or not _used(loop.results[i]):
                continue
            name = arg.name_hint or "the carried value"
            reset = next(
                (op for op in block.ops if any(r.name_hint == arg.name_hint for r in op.results)), yielded[i].owner
            )
            if not isinstance(reset, Operation):
                continue
            yield ctx.report(
                reset,
                f"`{name}` is carried by the loop, but each iteration reassigns it here without reading its previous "
                "value: every iteration but the last is thrown away",
                hint=f"initialize `{name}` once before the loop and update it from its previous value inside "
                f"(e.g. {name} = dot<f32>(a, b, {name}))",
                related=[(loop, "the loop")],
            )


_PURE_SKIP = (tl.LoadOp, tl.AtomicOp, ex.SmemAllocOp, ex.MBarrierAllocOp, st.ForOp, st.IfOp, st.RoleOp, st.YieldOp)


def _overwritten_values(ctx: Context) -> Iterator[Diagnostic]:
    named: dict[Block, dict[str, list[Operation]]] = {}  # block -> name -> its ops that assign it, in order
    position: dict[Operation, int] = {}
    for info in ctx.infos:
        op = info.op
        if isinstance(op, _PURE_SKIP) or isinstance(op, _EFFECTS) or not op.results:
            continue
        for r in op.results:
            if r.name_hint is None or _used(r):
                continue
            block = op.parent_block()
            if block not in named:
                named[block] = _assignments(block, position)
            later = _next_assignment(named[block][r.name_hint], op, position)
            if later is None:
                continue
            yield ctx.report(
                op,
                f"the value assigned to `{r.name_hint}` here is never used: `{r.name_hint}` is assigned again before any use",
                hint="drop this assignment, or use the value (was the later assignment meant to build on it?)",
                related=[(later, "assigned again here")],
            )


def _assignments(block: Block, position: dict[Operation, int]) -> dict[str, list[Operation]]:
    """The ops of a block that give a value each name, in order (numbering the ops in `position`)."""
    out: dict[str, list[Operation]] = {}
    for i, op in enumerate(block.ops):
        position[op] = i
        for name in dict.fromkeys(x.name_hint for x in op.results if x.name_hint is not None):
            out.setdefault(name, []).append(op)
    return out


def _next_assignment(ops: list[Operation], op: Operation, position: dict[Operation, int]) -> Operation | None:
    """The first op of `ops` (in block order) after `op`."""
    positions = [position[o] for o in ops]  # (short: the assignments of one name)
    k = bisect.bisect_right(positions, position[op])
    return ops[k] if k < len(ops) else None


_STOPS = (ex.CtaBarrierOp, ex.WaitOp, ex.FenceAsyncOp, ex.ArriveOp, ex.ExpectOp, ex.CpAsyncWaitOp)


@dataclass
class _Touches:
    """For the ops of one block (each with what it nests): which hold a barrier, wait or fence,
    and which read or write each memory value, by position; so that finding what follows a store
    takes a search, not a walk over the rest of the block for every store."""

    ops: list[Operation]
    position: dict[Operation, int]
    stops: list[int]
    memory: dict[SSAValue, list[int]]

    @staticmethod
    def of(block: Block) -> _Touches:
        ops = list(block.ops)
        stops: list[int] = []
        memory: dict[SSAValue, list[int]] = {}
        for i, op in enumerate(ops):
            stop = False
            touched: dict[SSAValue, None] = {}
            for o in op.walk():
                stop = stop or isinstance(o, _STOPS)
                for r in reads(o) + writes(o):
                    touched[r.mem] = None
            if stop:
                stops.append(i)
            for mem in touched:
                memory.setdefault(mem, []).append(i)
        return _Touches(ops, {op: i for i, op in enumerate(ops)}, stops, memory)

    def next_touch(self, op: Operation, mem: SSAValue) -> Operation | None:
        """The first op after `op` that holds a stop or reads or writes `mem`."""
        i = self.position[op]
        found = [
            lst[k] for lst in (self.stops, self.memory.get(mem, [])) if (k := bisect.bisect_right(lst, i)) < len(lst)
        ]
        return self.ops[min(found)] if found else None


def _overwritten_stores(ctx: Context) -> Iterator[Diagnostic]:
    touches: dict[Block, _Touches] = {}
    for info in ctx.ops(tl.StoreOp):
        first = info.op
        block = first.parent_block()
        if block not in touches:
            touches[block] = _Touches.of(block)
        # the walk stops at the first op that holds a stop, reads the tensor or writes it; only
        # a store to the same place there (with nothing else in it to stop at) overwrites
        nxt = touches[block].next_touch(first, first.mem)
        if nxt is None or not (isinstance(nxt, tl.StoreOp) and nxt.mem is first.mem):
            continue
        if isinstance(nxt, _STOPS) or any(r.mem is first.mem for r in reads(nxt)):
            continue
        if _same_place(ctx, first, nxt):
            yield ctx.report(
                first,
                f"this store to `{name_of(first.mem)}` is overwritten by the store below, to the same place, before "
                "anything reads it",
                hint="drop one of the two stores, or write the second one elsewhere (a different slice or tensor)",
                related=[(nxt, "overwritten here")],
            )


def _same_place(ctx: Context, a: tl.StoreOp, b: tl.StoreOp) -> bool:
    if a.access.data != b.access.data or len(a.indices) != len(b.indices):
        return False
    if b.mask is not None and b.mask is not a.mask:
        return False
    for x, y in zip(a.indices, b.indices, strict=True):
        if x is y:
            continue
        if isinstance(x.type, TileType) or isinstance(y.type, TileType) or not ctx.same_value(x, y):
            return False
    return True


# ---- dataflow.masked-reduce -------------------------------------------------------------------------------

_IDENTITY = {"sum": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf, "argmax": -math.inf, "argmin": math.inf}


@dataclass(frozen=True)
class Pad:
    """What the masked-off lanes of a tile hold, relative to the mask of the load they came
    from: a constant, `finite` (some finite value), `positive` (finite and > 0) or `unknown`;
    `varying[d]` says whether the mask can differ along dimension d."""

    mask: SSAValue
    load: Operation
    value: float | str
    varying: tuple[bool, ...]


def _pad_of(v: SSAValue, memo: dict) -> Pad | None:
    """The padding of `v` (None: `v` has no masked-off lanes that the analysis follows)."""
    if v in memo:
        return memo[v]
    memo[v] = None  # cycles (loop-carried values) are not followed
    memo[v] = out = _pad(v, memo)
    return out


def _pad(v: SSAValue, memo: dict) -> Pad | None:
    if isinstance(v, BlockArgument) or not isinstance(v.type, TileType):
        return None
    op = v.owner
    if isinstance(op, tl.LoadOp):
        if op.mask is None:
            return None
        value: float | str = 0.0
        if op.other is not None:
            o = op.other.owner
            value = float(o.number) if isinstance(o, tl.ConstOp) else "unknown"
        shape, mshape = shape_of(v.type), shape_of(op.mask.type)
        k = len(shape) - len(mshape)
        varying = tuple(i >= k and sx.fold(mshape[i - k]).as_int() != 1 for i in range(len(shape)))
        return Pad(op.mask, op, value, varying)
    if isinstance(op, tl.CastOp | ex.ConvertLayoutOp):
        return _pad_of(op.operand, memo)
    if isinstance(op, tl.ExpandDimsOp):
        p = _pad_of(op.operand, memo)
        if p is None:
            return None
        varying = list(p.varying)
        varying.insert(op.axis.data, False)
        return Pad(p.mask, p.load, p.value, tuple(varying))
    if isinstance(op, tl.BroadcastOp):
        p = _pad_of(op.operand, memo)
        if p is None:
            return None
        n = len(shape_of(op.res.type))
        return Pad(p.mask, p.load, p.value, (False,) * (n - len(p.varying)) + p.varying)
    if isinstance(op, tl.UnaryOp):
        p = _pad_of(op.operand, memo)
        return None if p is None else Pad(p.mask, p.load, _unary_pad(op.fn.data, p.value), p.varying)
    if isinstance(op, tl.BinaryOp):
        a, b = _pad_of(op.lhs, memo), _pad_of(op.rhs, memo)
        if a is None and b is None:
            return None
        if a is not None and b is not None and a.mask is not b.mask:
            return None
        base = a or b
        n = len(shape_of(op.res.type))
        varying = _merge_varying(n, a, b)
        value = _binary_pad(op.fn.data, _operand_pad(op.lhs, a), _operand_pad(op.rhs, b))
        return Pad(base.mask, base.load, value, varying)
    if isinstance(op, tl.WhereOp):
        a, b = _pad_of(op.lhs, memo), _pad_of(op.rhs, memo)
        cond = _through_shape(op.cond)
        for p in (a, b):
            if p is not None and cond is p.mask:
                # where(mask, x, y): the masked-off lanes take y
                n = len(shape_of(op.res.type))
                return Pad(p.mask, p.load, _operand_pad(op.rhs, b), _merge_varying(n, a, b))
        return None
    return None


def _through_shape(v: SSAValue) -> SSAValue:
    while isinstance(v.owner, tl.ExpandDimsOp | tl.BroadcastOp):
        v = v.owner.operand
    return v


def _merge_varying(n: int, a: Pad | None, b: Pad | None) -> tuple[bool, ...]:
    out = [False] * n
    for p in (a, b):
        if p is not None:
            k = n - len(p.varying)
            for i, flag in enumerate(p.varying):
                out[k + i] = out[k + i] or flag
    return tuple(out)


def _operand_pad(v: SSAValue, p: Pad | None) -> float | str:
    """The value an operand has at the padded lanes: its padding, a constant, or data."""
    if p is not None:
        return p.value
    o = v.owner
    if isinstance(o, tl.ConstOp) and not isinstance(o.number, bool):
        return float(o.number)
    if isinstance(o, tl.FullOp) and isinstance(o.value.owner, tl.ConstOp):
        return float(o.value.owner.number)
    return "finite"  # data of the unmasked operand: assumed finite


def _unary_pad(fn: str, x: float | str) -> float | str:
    if isinstance(x, float):
        try:
            return {"neg": -x, "abs": abs(x), "exp": math.exp(x) if x < 709 else math.inf}.get(fn, "unknown")
        except (OverflowError, ValueError):
            return "unknown"
    if fn == "exp" and x in ("finite", "positive"):
        return "positive"
    if fn in ("neg", "abs") and x == "finite":
        return "finite"
    return "unknown"


def _binary_pad(fn: str, a: float | str, b: float | str) -> float | str:
    if isinstance(a, float) and isinstance(b, float):
        try:
            value = {
                "add": lambda: a + b,
                "sub": lambda: a - b,
                "mul": lambda: a * b,
                "maximum": lambda: max(a, b),
                "minimum": lambda: min(a, b),
            }[fn]()
        except (KeyError, ArithmeticError):
            return "unknown"
        return "unknown" if math.isnan(value) else value
    const, other = (a, b) if isinstance(a, float) else (b, a)
    if not isinstance(const, float):
        return (
            "finite"
            if fn in ("add", "sub", "mul") and a in ("finite", "positive") and b in ("finite", "positive")
            else "unknown"
        )
    if other not in ("finite", "positive"):
        return "unknown"
    if fn in ("add", "sub"):
        if math.isinf(const):
            return const if (fn == "add" or const is a) else -const
        return "finite"
    if fn == "mul":
        return 0.0 if const == 0.0 else ("finite" if math.isfinite(const) else "unknown")
    if fn == "maximum" and const == -math.inf or fn == "minimum" and const == math.inf:
        return other
    return "unknown"


@rule(
    "dataflow.masked-reduce",
    family="dataflow",
    severity="error",
    summary="a reduction includes masked-off lanes whose value is not the reduction's identity",
    explanation="""
A masked `load` gives its masked-off lanes `other` (0 when absent), and those lanes are still
part of the tile: a reduction over the tile includes them. They are harmless only when they
hold the reduction's identity: 0 for `sum`, 1 for `prod`, -inf for `max` and `argmax`, +inf
for `min` and `argmin`. The verifier follows the padding value through casts, arithmetic and
`where(mask, x, y)` from the load to each reduction along a dimension the mask varies in, and
reports a reduction whose padding is provably not its identity, when z3 shows the mask can be
false for some shape the `where` allows. The classic case is a softmax that loads with the
default `other` (0): the row maximum of an all-negative row becomes 0, and every padded lane
adds `exp(0 - max)` to the denominator.
""",
    bad="""
kernel softmax<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask)
  e = exp(v - max(v, axis = 0))  # <-
  store(y[row, cols], e / sum(where(mask, e, 0.0), axis = 0), mask = mask)
}
""",
    good="""
kernel softmax<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask, other = -inf)
  e = exp(v - max(v, axis = 0))
  store(y[row, cols], e / sum(where(mask, e, 0.0), axis = 0), mask = mask)
}
""",
)
def check_masked_reduce(ctx: Context) -> Iterator[Diagnostic]:
    memo: dict = {}
    sym = ctx.symbolic
    for info in ctx.ops(tl.ReduceOp, tl.ArgReduceOp):
        op = info.op
        fn = op.fn.data
        identity = _IDENTITY.get(fn)
        if identity is None or not _is_float(op.operand):
            continue
        pad = _pad_of(op.operand, memo)
        axis = op.axis.data
        if pad is None or not pad.varying[axis] or not _not_identity(fn, pad.value):
            continue
        lanes = sym.lanes(shape_of(pad.mask.type), f"pad{ctx.order[pad.load]}")
        m = sym.value(pad.mask, lanes)
        if m.tainted:
            continue
        cex = sym.counterexample(m.expr)
        if cex is None or "unknown" in cex:
            continue
        shown = readable({k: v for k, v in cex.items() if k in ctx.kernel.shape_symbols})
        held = _pad_text(pad.value)
        ident = {0.0: "0", 1.0: "1", -math.inf: "-inf", math.inf: "+inf"}[identity]
        yield ctx.report(
            op,
            f"{fn} along axis {axis} includes the lanes that the load's mask turns off (e.g. when "
            f"{format_counterexample(shown) or 'the mask is false'}); they hold {held}, not {fn}'s identity {ident}, "
            "so the result depends on the padding",
            hint=f"give the load `other = {ident}` (the identity of {fn}), or reset the masked lanes with "
            f"where(mask, x, {ident if ident != '+inf' else 'inf'}) before reducing",
            related=[(pad.load, "the masked load")],
            counterexample=shown or None,
        )


def _is_float(v: SSAValue) -> bool:
    return v.type.dtype.data not in tl.INT_DTYPES and v.type.dtype.data != "i1"


def _not_identity(fn: str, value: float | str) -> bool:
    identity = _IDENTITY[fn]
    if isinstance(value, float):
        return value != identity
    if value == "positive":
        return fn in ("sum", "max", "min", "argmax", "argmin")
    if value == "finite":
        return fn in ("max", "min", "argmax", "argmin")
    return False


def _pad_text(value: float | str) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "-inf" if value < 0 else "+inf"
        return f"{value:g}"
    return {"finite": "finite values", "positive": "positive values"}.get(value, "some value")
