"""`dataflow.smem-overlap`: an asynchronous copy into a shared view while an overlapping but
different view of the same buffer is used, or a role reading a view that overlaps what another
role writes in the same iteration without being covered by it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import cast

import z3
from xdsl.ir import Operation, SSAValue

from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import SmemType, shape_of
from verifier.context import Context, OpInfo
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.dataflow_facts import (
    Ref,
    factor_text,
    feeding_ops,
    line_of,
    name_of,
    reads,
    renamed_in,
    warpgroup_roles,
    writes,
)
from verifier.symbolic import format_counterexample, readable

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
        for later in _until_completion(ctx, info.op):
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
    found = [_regions(ctx, w) for w in wrefs]
    written = [w for w in found if w is not None]
    if region is None or len(written) != len(found):
        return None

    def same_round(e: z3.ExprRef) -> z3.ExprRef:  # the writers' iteration is the reader's
        return z3.substitute(e, (k_write.expr, k_read.expr))

    rounds = [[(same_round(lo), same_round(hi)) for lo, hi in w] for w in written]
    # A role of several units writes the union of its units' views: one box per unit
    boxes, box_refs = [], []
    for box, w in zip(rounds, wrefs, strict=True):
        for unit_box in _per_unit(sym, w.op, box):
            boxes.append(unit_box)
            box_refs.append(w)
    wrefs = box_refs
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
        *[z3.Not(inside(w)) for w in boxes],
        z3.Or(*[meets(box, w) for box, w in zip(boxes, wrefs, strict=True)]),
    )
    cex = sym.counterexample(z3.Not(uncovered))
    if cex is None or "unknown" in cex:
        return None
    at = [cex.get(f"__element{d}", 0) for d in range(len(region))]
    shown = readable({k: v for k, v in cex.items() if not k.startswith(("__", "lane", "?"))}, len(ctx.kernel.grid.data))
    buf = name_of(ref.mem)
    role: Operation | None = wrefs[0].op
    while role is not None and not isinstance(role, st.RoleOp):
        role = role.parent_op()
    who = f"role `{role.name_text}`" if role is not None else "another role"
    fixes = [
        *_offsets_dropped(ctx, ref),
        *_stage_strides(ctx, ref, list(dict.fromkeys(wrefs))),
        *warpgroup_roles(ctx, ref),
    ]
    hint, edits = _first(ctx, info.op, fixes)
    return ctx.report(
        info.op,
        f"{ref.verb} `{buf}` through a view that overlaps what {who} writes in the same iteration (the same "
        f"stage) but is not covered by it: element {at} of `{buf}` is read but not written in that round "
        f"({format_counterexample(shown)}), so it holds data of another round, or none",
        hint=hint,
        related=[(w.op, f"what {who} writes") for w in wrefs[:2]],
        counterexample={**shown, "element": at},
        edits=edits,
    )


def _per_unit(sym, op: Operation, box: list) -> list[list]:
    """`box` (bounds per dimension) once for each unit of `op`'s role, its rank made constant;
    `[box]` when the box does not depend on the rank."""
    role: Operation | None = op
    while role is not None and not isinstance(role, st.RoleOp):
        role = role.parent_op()
    rank = sym.names.get(f"role_rank({role.name_text})") if role is not None else None
    if role is None or rank is None or not any(str(rank) in sym.variables(e) for bounds in box for e in bounds):
        return [box]
    return [
        [(z3.substitute(lo, (rank, z3.IntVal(u))), z3.substitute(hi, (rank, z3.IntVal(u)))) for lo, hi in box]
        for u in range(len(role.id_list))
    ]


def _until_completion(ctx: Context, op: Operation) -> Iterator[Operation]:
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
        return isinstance(inner, ex.CpAsyncWaitOp) and commits - 1 >= (ctx.static(inner.pending.data) or 0)

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
    fixes = [*_unfilled_buffers(ctx, other), *_next_stage(ctx, other), *_stage_strides(ctx, copy, [other])]
    fixes += _stage_strides(ctx, other, [copy])
    hint, edits = _first(ctx, other.op, fixes)
    return ctx.report(
        other.op,
        f"{verb} `{buf}` while the {copy.verb.split()[0]} above is still writing {what}"
        + (f" when {format_counterexample(shown)}" if shown else "")
        + ": the copy completes only at a later wait, so the two accesses overlap in time and in memory",
        hint=hint,
        related=[(copy.op, "the copy still in flight")],
        counterexample={**shown, "stage": [cex[f"__a{d}"] for d in range(len(copy.access.dims))]},
        edits=edits,
    )


# ---- fixes ---------------------------------------------------------------------------------------

Fix = tuple[str, Edit | tuple[Edit, ...] | None]  # a hint and its edits


def _first(ctx: Context, op: Operation, fixes: list[Fix]) -> tuple[str, tuple[Edit, ...]]:
    """The first fix that holds (`first_fix`), with its hint; ("", ()) where none does."""
    line = getattr(ctx.span(op), "line", 0)
    found = first_fix(ctx, "dataflow.smem-overlap", line, [edits for _, edits in fixes[:5]])
    return next(((hint, found) for hint, e in fixes if found and found in (e, (e,))), ("", ()))


def _unfilled_buffers(ctx: Context, ref: Ref) -> list[Fix]:
    """The access sent to a buffer of the same type that nothing writes (a copy into the wrong
    buffer)."""
    if not isinstance(ref.op, ex.TmaLoadOp | ex.CpAsyncOp):
        return []
    written = {r.mem for op in ctx.kernel.walk() for r in writes(op)}
    name = name_of(ref.mem)
    out: list[Fix] = []
    for info in ctx.infos:
        if (
            isinstance(info.op, ex.SmemAllocOp)
            and (buf := info.op.results[0]) not in written
            and buf.type == ref.mem.type
        ):
            out.append(
                (
                    f"copy into `{name_of(buf)}`, the buffer of this type that nothing fills",
                    renamed_in(ctx, ref.op, name, name_of(buf)),
                )
            )
    return out[:2]


def _next_stage(ctx: Context, ref: Ref) -> list[Fix]:
    """A stage index `(k + c) % S` that meets another copy's made the next stage, `(k + 1) % S`."""
    for v in ref.indices:
        for op in feeding_ops(v):
            if not (isinstance(op, tl.BinaryOp) and op.fn.data == "rem" and isinstance(op.lhs.owner, tl.BinaryOp)):
                continue
            add, const = op.lhs.owner, op.lhs.owner.rhs.owner
            if add.fn.data != "add" or not isinstance(const, tl.ConstOp) or const.number == 1:
                continue
            span, at, text = ctx.span(op), ctx.span(const), ctx.text_of(op)
            if span is None or at is None or text is None or at.line != span.line:
                continue
            new = text[: at.col - span.col] + "1" + text[at.end_col - span.col :]
            return [(f"copy into the next stage: `{text}` becomes `{new}`", Edit(at, "1"))]
    return []


def _offsets_dropped(ctx: Context, ref: Ref) -> list[Fix]:
    """A view shifted by a constant (`r0 + 1 : r0 + 1 + BM / 2`) read at the unshifted place."""
    out: list[Fix] = []
    for v in ref.indices:
        op = v.owner
        if isinstance(op, tl.BinaryOp) and op.fn.data == "add" and isinstance(op.rhs.owner, tl.ConstOp):
            text, base, span = ctx.text_of(op), op.lhs, ctx.span(op)
            inner = ctx.span(base.owner) if isinstance(base.owner, Operation) else None
            within = inner is not None and span is not None and inner.line == span.line and inner.col >= span.col
            base_text = ctx.text_of(cast(Operation, base.owner)) if within else base.name_hint
            if text and base_text:
                out.append((f"read the view at `{base_text}`, not `{text}`", _everywhere(ctx, op, text, base_text)))
    return out


def _stage_strides(ctx: Context, ref: Ref, others: list[Ref]) -> list[Fix]:
    """A stage or rank stride that differs from the other side's (`s * BM` against the
    producer's `s * (BM + 8)`) made the same; else made the width of the view it places."""
    out: list[Fix] = []
    theirs = [(m, k) for o in others for m, k, _ in _strides(ctx, o)]
    for mul, scale, d in _strides(ctx, ref):
        old = ctx.text_of(scale.owner) if isinstance(scale.owner, Operation) else None
        if old is None:
            continue
        for _, other in theirs:
            new = ctx.text_of(other.owner) if isinstance(other.owner, Operation) else None
            if new is not None and new != old:
                out.append(
                    (
                        f"step by `{factor_text(new)}` as the other side does, not `{old}`",
                        _rescaled(ctx, mul, scale, factor_text(new)),
                    )
                )
        extent = ref.access.dims[d]
        if extent is not None and str(extent) != old:
            width = factor_text(str(extent))
            out.append((f"step by the width of the view, `{width}`, not `{old}`", _rescaled(ctx, mul, scale, width)))
    return out


def _strides(ctx: Context, ref: Ref) -> list[tuple[tl.BinaryOp, SSAValue, int]]:
    """The products `x * size` an access's indices are computed from, each with its size (the
    operand that is a constant of the program) and the dimension it places."""
    out = []
    for d, v in enumerate(ref.indices):
        for op in feeding_ops(v):
            if isinstance(op, tl.BinaryOp) and op.fn.data == "mul":
                scale = op.rhs if _is_size(op.rhs) else op.lhs if _is_size(op.lhs) else None
                if scale is not None:
                    out.append((op, scale, d))
    return out


def _is_size(v: SSAValue) -> bool:
    """Whether `v` is computed from constants and parameters only."""
    todo = [v]
    while todo:
        owner = todo.pop().owner
        if isinstance(owner, tl.BinaryOp):
            todo += list(owner.operands)
        elif not isinstance(owner, tl.SymValueOp | tl.ConstOp):
            return False
    return True


def _rescaled(ctx: Context, mul: tl.BinaryOp, scale: SSAValue, new: str) -> tuple[Edit, ...] | None:
    """The product `mul` with its size `scale` written `new`, at every place its text stands on
    its line (a slice writes its start twice: `r * BM : r * BM + BM / 2`)."""
    span, text, at = (
        ctx.span(mul),
        ctx.text_of(mul),
        ctx.span(scale.owner) if isinstance(scale.owner, Operation) else None,
    )
    line = line_of(ctx, span.line) if span is not None else None
    if span is None or text is None or at is None or line is None or at.line != span.line:
        return None
    a, b = at.col - span.col, at.end_col - span.col
    if text[a - 1 : a] == "(" and text[b : b + 1] == ")":
        a, b = a - 1, b + 1
    return _everywhere(ctx, mul, text, text[:a] + new + text[b:])


def _everywhere(ctx: Context, op: Operation, old: str, new: str) -> tuple[Edit, ...] | None:
    """`old` made `new` wherever it stands (as a whole expression) on `op`'s line."""
    span = ctx.span(op)
    line = line_of(ctx, span.line) if span is not None else None
    if span is None or line is None:
        return None
    found = [m.start() for m in re.finditer(rf"(?<![\w.]){re.escape(old)}(?![\w(\[])", line)]
    return tuple(Edit(Span(span.line, k + 1, span.line, k + 1 + len(old), span.file), new) for k in found) or None
