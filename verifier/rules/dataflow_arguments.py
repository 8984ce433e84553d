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

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import z3
from xdsl.ir import BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, TileType, dtype_of, shape_of
from verifier.context import Context, OpInfo
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.dataflow_facts import (
    Ref,
    access_parts,
    arg_name,
    argument_span,
    factor_text,
    feeding_ops,
    index_terms,
    line_of,
    redirected_writes,
    renamed_in,
    same_tensor_type,
    scale_of,
    size_text,
    unwritten_outputs,
    writes,
)
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
            yield _never_written(ctx, name, arg)
            continue
        if len(infos) != 1 or any(isinstance(i.op, tl.AtomicOp) for i in infos):
            continue  # several writes or atomics: coverage is not judged
        (info,) = infos
        (ref,) = [r for r in writes(info.op) if r.mem is arg]
        yield from _coverage(ctx, name, info, ref)


def _never_written(ctx: Context, name: str, arg: SSAValue) -> Diagnostic:
    at = _arg_span(ctx, name)
    message = f"`{name}` is an output, but nothing writes it: every element keeps the poison the harness fills it with"
    line = at.line if at is not None else 0
    redirects = redirected_writes(ctx, arg)
    fix = first_fix(ctx, "dataflow.output-unwritten", line, redirects)
    if fix:
        old = ctx.text_of(Span(fix[0].span.line, fix[0].span.col, fix[0].span.end_line, fix[0].span.end_col, ""))
        hint = f"write `{name}` where the program writes `{old}` by mistake (line {fix[0].span.line})"
    else:
        fix = first_fix(ctx, "dataflow.output-unwritten", line, [ctx.replace_in(at, "out global", "global")])
        hint = f"drop `out` from `{name}`: the kernel does not produce it" if fix else ""
    return ctx.report(at, message, hint=hint, edits=fix)


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


Fix = tuple[str, Edit | tuple[Edit, ...] | None]  # a hint and its edits


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
    fixes: list[Fix] = []
    top = terms[-1][2] if terms else None
    grid_span = ctx.program.clause_spans.get("grid")
    extent = shape_of(ref.mem.type)[d]
    at: Operation | Span = info.op
    if cause == "empty":
        empty = next((t for t in terms if t[2][0] in ("pid", "loop")), None)
        reason = "no program (or no iteration) writes it at all"
        if empty is not None and empty[2][0] == "pid" and grid_span is not None:
            at, related = grid_span, [(info.op, "the write")]
            reason = f"the grid has no program along axis {empty[2][1]}"
        fixes += _sized_lanes(ctx, ref, terms)
    elif cause == "offset":
        reason = "the index never comes down to 0"
    elif cause.startswith("gap"):
        i = int(cause[3:])
        c, _, counter = terms[i]
        reason = (
            f"{counter_text(ctx, counter)} steps by {c} elements but each step writes only {element - const} "
            f"contiguous ones, so index {element} of dimension {d} falls between two writes"
        )
        width = _lanes_text(ctx, ref, terms[:i])
        if width is not None:
            fixes += [f for t in terms[i:] for f in _step_by(ctx, ref, t[2], width)]
            fixes += _widened(ctx, info.op, ref, counter, width)
    else:
        kind = top[0] if top is not None else None
        reason = f"the writes stop before index {element} of dimension {d} (extent {extent})"
        if kind == "pid" and grid_span is not None:
            assert top is not None  # its kind is "pid"
            at, related = grid_span, [(info.op, "the write that stops short")]
            axis = top[1]
            reason = (
                f"the grid launches too few programs along axis {axis} "
                f"(grid({ctx.kernel.grid.data[axis].data}) for {extent} elements): {reason}"
            )
            divides = f"{extent} % {terms[-1][0]} == 0"
            try:  # the constraint fixes it only where the shapes that show the gap break it
                broken = extent.evaluate(shape_values) % int(terms[-1][0]) != 0
            except (KeyError, ValueError, TypeError, ZeroDivisionError):
                broken = False
            if broken:
                fixes.append(
                    (f"state the constraint the grid relies on: `where {divides}`", ctx.state_in_where(divides))
                )
            width = _lanes_text(ctx, ref, terms[:-1])
            if width is not None and width[0] > terms[-1][0]:
                fixes += _step_by(ctx, ref, top, width)  # the tiles overlap: the step is what is short
            fixes += _grid_fixes(ctx, ref, top, int(terms[-1][0]), extent)
        elif kind == "loop":
            assert top is not None  # its kind is "loop"
            at, related = top[1], [(info.op, "the write")]
            reason = f"the loop stops too early: {reason}"
            fixes += _loop_fixes(ctx, ref, top, int(terms[-1][0]), extent)
        else:
            fixes += _unused_axis(ctx, ref)
            width = _lanes_text(ctx, ref, terms)
            if width is not None and not any(t[2][0] != "lane" for t in terms):
                bound = f"{extent} <= {width[1]}"
                fixes.append((f"state the constraint the tile relies on: `where {bound}`", ctx.state_in_where(bound)))
    line = (at.line if isinstance(at, Span) else getattr(ctx.span(at), "line", 0)) or 0
    hint, edits = _first(ctx, line, fixes)
    message = f"`{name}[{dims}]` is not written everywhere when {where}: element [{index}] is never written; {reason}"
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


def _sized_lanes(ctx: Context, ref: Ref, terms) -> list[Fix]:
    """Lanes sized by a parameter of value 0 (`arange(0, BLOCK)` with `BLOCK = 0`): the
    parameter given the step between programs (or iterations)."""
    steps = [int(c) for c, _, counter in terms if counter[0] != "lane"]
    out: list[Fix] = []
    for _, _, counter in terms:
        size = ref.shape[counter[1]] if counter[0] == "lane" else None
        if steps and isinstance(size, sx.Sym) and ctx.params.get(size.name) == 0:
            span = ctx.program.param_spans.get(size.name)
            text = f"{size.name} = {steps[0]}"
            out.append((f"give `{size.name}` the step between programs: `{text}`", Edit(span, text) if span else None))
    return out


def _first(
    ctx: Context, line: int, fixes: list[Fix], rule: str = "dataflow.output-unwritten"
) -> tuple[str, tuple[Edit, ...]]:
    """The first fix that holds (`first_fix`), with its hint; ("", ()) where none does."""
    found = first_fix(ctx, rule, line, [edits for _, edits in fixes[:5]])
    for hint, edits in fixes:
        if found and found in (edits, (edits,)):
            return hint, found
    return "", ()


def _lanes_text(ctx: Context, ref: Ref, terms) -> tuple[int, str] | None:
    """How many contiguous elements the lanes among `terms` write, and how the program writes
    that size; None where they are not one run of lanes."""
    lanes = [t for t in terms if t[2][0] == "lane"]
    if len(lanes) != 1 or lanes[0][0] != 1 or len(lanes) != len(terms):
        return None
    size = ref.shape[lanes[0][2][1]]
    n = ctx.static(size)
    return None if n is None else (n, str(size))


def _counter_test(counter: Counter):
    kind, what = counter

    def test(v: SSAValue) -> bool:
        owner = v.owner
        if kind == "pid":
            return isinstance(owner, tl.ProgramIdOp) and owner.axis.data == what
        if kind == "rank":
            return isinstance(owner, st.RoleRankOp)
        if kind == "loop":
            return isinstance(v, BlockArgument) and v.block.parent_op() is what and v.index == 0
        return False

    return test


def _operand_edit(ctx: Context, value: SSAValue, text: str) -> Edit | None:
    """The edit that writes `text` in place of the operand `value` (its parentheses too)."""
    span = ctx.span(value.owner) if isinstance(value.owner, Operation) else None
    line = line_of(ctx, span.line) if span is not None else None
    if span is None or line is None or span.end_line != span.line:
        return None
    col, end = span.col, span.end_col
    if line[col - 2 : col - 1] == "(" and line[end - 1 : end] == ")":
        col, end = col - 1, end + 1
    return Edit(Span(span.line, col, span.line, end, span.file), text)


def _step_by(ctx: Context, ref: Ref, counter: Counter, width: tuple[int, str]) -> list[Fix]:
    """Make the counter step by the width the lanes write (`program_id(0) * BLOCK`)."""
    out: list[Fix] = []
    for scale in scale_of(ref.indices, _counter_test(counter))[:2]:
        old = ctx.text_of(scale.owner) if isinstance(scale.owner, Operation) else None
        text = factor_text(width[1])
        hint = f"step {counter_text(ctx, counter)} by the width each step writes: `{old}` becomes `{text}`"
        out.append((hint, _operand_edit(ctx, scale, text)))
    return out


def _widened(ctx: Context, op: Operation, ref: Ref, counter: Counter, width: tuple[int, str]) -> list[Fix]:
    """Make the write (every `width` on its line) as wide as the counter's step."""
    steps = scale_of(ref.indices, _counter_test(counter))
    span, line = ctx.span(op), None
    if span is not None:
        line = line_of(ctx, span.line)
    if not steps or span is None or line is None or not isinstance(steps[0].owner, Operation):
        return []
    step = ctx.text_of(steps[0].owner)
    at = [m.start() for m in re.finditer(re.escape(width[1]), line)]
    if step is None or not at:
        return []
    edits = tuple(Edit(Span(span.line, k + 1, span.line, k + 1 + len(width[1]), span.file), step) for k in at)
    return [(f"write as many elements as each step covers: `{width[1]}` becomes `{step}` on line {span.line}", edits)]


def _grid_axis_span(ctx: Context, axis: int) -> Span | None:
    grid = ctx.program.clause_spans.get("grid")
    text = ctx.text_of(grid) if grid is not None else None
    if grid is None or text is None:
        return None
    starts, depth = [0], 0
    for k, ch in enumerate(text):
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if ch == "," and depth == 0:
            starts.append(k + 1)
    if axis >= len(starts):
        return None
    start = starts[axis]
    end = starts[axis + 1] - 1 if axis + 1 < len(starts) else len(text)
    piece = text[start:end]
    lead = len(piece) - len(piece.lstrip())
    return Span(grid.line, grid.col + start + lead, grid.line, grid.col + start + len(piece.rstrip()), grid.file)


def _step_text(ctx: Context, ref: Ref, counter: Counter, c: int) -> str:
    scales = scale_of(ref.indices, _counter_test(counter))
    text = ctx.text_of(scales[0].owner) if scales and isinstance(scales[0].owner, Operation) else None
    return text or size_text(ctx, c)


def _grid_fixes(ctx: Context, ref: Ref, top: Counter, c: int, extent: sx.SymExpr) -> list[Fix]:
    """Launch as many programs along the axis as the extent takes (`N / BLOCK`, or
    `cdiv(N, BLOCK)` where the store's mask keeps the last program in bounds)."""
    span = _grid_axis_span(ctx, top[1])
    step = _step_text(ctx, ref, top, c)
    if span is None:
        return []
    exact, rounded = f"{factor_text(str(extent))} / {step}", f"cdiv({extent}, {step})"
    return [
        (f"launch `{exact}` programs along axis {top[1]}", Edit(span, exact)),
        (f"launch `{rounded}` programs along axis {top[1]}, the last one masked", Edit(span, rounded)),
    ]


def _loop_fixes(ctx: Context, ref: Ref, top: Counter, c: int, extent: sx.SymExpr) -> list[Fix]:
    """Run the loop over every tile: its bound made `N / BN`, or rounded up where a mask keeps
    the last tile in bounds."""
    loop = top[1]
    upper = loop.upper.owner
    lo, step = _static_int(ctx, loop.lower), _static_int(ctx, loop.step)
    if not isinstance(upper, Operation) or lo != 0 or step is None:
        return []
    span = ctx.span(upper)
    if step == c:  # the loop counts elements (`for k in 0 .. K step BK`)
        return [(f"run the loop up to `{extent}`", Edit(span, str(extent)))] if span is not None else []
    if step != 1 or span is None:
        return []
    tile = _step_text(ctx, ref, top, c)
    n = factor_text(str(extent))
    exact, rounded = f"{n} / {tile}", f"({extent} + {tile} - 1) / {tile}"
    return [
        (f"run the loop over every tile: `{exact}` iterations", Edit(span, exact)),
        (f"run the loop over every tile, the last one masked: `{rounded}` iterations", Edit(span, rounded)),
    ]


def _unused_axis(ctx: Context, ref: Ref) -> list[Fix]:
    """An index taken from a grid axis the grid does not have (always 0), moved to an axis that
    no index of the write uses."""
    rank = len(ctx.kernel.grid.data)
    feeding = [op for v in ref.indices for op in feeding_ops(v)]
    used = {op.axis.data for op in feeding if isinstance(op, tl.ProgramIdOp)}
    beyond = [op for op in feeding if isinstance(op, tl.ProgramIdOp) and op.axis.data >= rank]
    free = [axis for axis in range(rank) if axis not in used]
    return [
        (f"take the index from `program_id({axis})`, the grid axis it leaves unused", Edit(span, f"program_id({axis})"))
        for op in beyond[:1]
        for axis in free[:2]
        if (span := ctx.span(op)) is not None
    ]


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
    fixes = _mask_fixes(ctx, name, info.op, ref) if by_mask else _branch_fixes(ctx, branch)
    hint, edits = _first(ctx, getattr(ctx.span(at), "line", 0), fixes)
    yield ctx.report(
        at,
        f"element {element} of `{name}` is never written: the only write to `{name}` reaches it, but {what} "
        f"false there ({format_counterexample(shown)})",
        hint=hint,
        related=[] if at is info.op else [(info.op, "the only write")],
        counterexample={**shown, "element": element},
        edits=edits,
    )


def _mask_fixes(ctx: Context, name: str, op: Operation, ref: Ref) -> list[Fix]:
    """The mask that turns off only the lanes outside the tensor (`offs < N`, or one bound per
    gathered dimension), written where the mask is defined or in the write itself."""
    parts = access_parts(ctx, op, name)
    mask = ref.mask
    if parts is None or mask is None or len(parts) != len(ref.indices) or ref.access.dims and not ref.is_gather:
        return []
    extents = shape_of(ref.mem.type)
    bounds = [f"{p} < {e}" for p, e, v in zip(parts, extents, ref.indices, strict=True) if isinstance(v.type, TileType)]
    if not bounds:
        return []
    text = bounds[0] if len(bounds) == 1 else " & ".join(f"({b})" for b in bounds)
    hint = f"mask only the lanes outside `{name}`: `{text}`"
    fixes: list[Fix] = []
    at = argument_span(ctx, op, "mask")
    given = ctx.text_of(at) if at is not None else None
    owner = mask.owner
    if given == mask.name_hint and isinstance(owner, Operation) and (span := ctx.span(owner)) is not None:
        line = line_of(ctx, span.line) or ""
        if re.match(rf"\s*{re.escape(given or '')}\s*=", line):
            fixes.append((f"{hint}, where `{given}` is defined", Edit(span, text)))
    if at is not None:
        fixes.append((hint, Edit(at, text)))
    return fixes


def _branch_fixes(ctx: Context, branch: st.IfOp | None) -> list[Fix]:
    """The `if` made to let the last tile through (`<` become `<=`)."""
    if branch is None or not isinstance(branch.cond.owner, Operation):
        return []
    cond = branch.cond.owner
    return [
        (
            f"let the last tile through: `{old.strip()}` becomes `{new.strip()}` in the `if`",
            ctx.replace_in(cond, old, new),
        )
        for old, new in ((" < ", " <= "), (" > ", " >= "))
    ]


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
            line = getattr(ctx.span(info.op), "line", 0)
            hint, edits = _first(ctx, line, _input_fixes(ctx, info.op, ref, name), "dataflow.input-written")
            yield ctx.report(
                info.op,
                f"{ref.verb} `{name}`, which is an input (not marked `out`): inputs must be unchanged after the run",
                hint=hint,
                related=[(span, f"`{name}` is declared here")] if span is not None else [],
                edits=edits,
            )


def _input_fixes(ctx: Context, op: Operation, ref: Ref, name: str) -> list[Fix]:
    """The write sent to an output of the same type that nothing writes; a store of the value
    just loaded from the same tensor dropped (it writes back what is there); or the tensor
    declared `out`."""
    fixes: list[Fix] = []
    for output in unwritten_outputs(ctx):
        new = arg_name(ctx, output)
        if same_tensor_type(output, ref.mem) and new is not None:
            fixes.append((f"write the result to `{new}`, the output nothing writes", renamed_in(ctx, op, name, new)))
    value = op.value if isinstance(op, tl.StoreOp) else None
    if value is not None and isinstance(value.owner, tl.LoadOp) and value.owner.mem is ref.mem:
        fixes.append((f"drop this store: it writes back the value just loaded from `{name}`", ctx.drop_line(op)))
    fixes.append(
        (
            f"declare `{name}` as an output: `{name}: out global ...`",
            ctx.replace_in(ctx.program.arg_spans.get(name), "global", "out global"),
        )
    )
    return fixes
