"""`dataflow.read-before-write`: a read of shared memory that nothing writes first, or of an
output before the program wrote it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import z3
from xdsl.ir import Operation, SSAValue

from kir.diagnostics import Diagnostic, Edit
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, SmemType, TileType, shape_of
from verifier.context import Context, OpInfo
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.dataflow_facts import (
    Ref,
    arg_name,
    index_terms,
    line_of,
    name_of,
    reads,
    renamed_in,
    same_tensor_type,
    writes,
)
from verifier.symbolic import Term


def may_precede(ctx: Context, first: OpInfo, then: OpInfo) -> bool:
    """Whether `first` can run before `then` in some schedule: earlier in program order, in an
    enclosing loop of both (a later statement runs before it in the next iteration), or in
    another role (roles run concurrently)."""
    if first.role is not None and then.role is not None and first.role is not then.role:
        return True
    if ctx.order[first.op] < ctx.order[then.op]:
        return True
    return any(loop in first.loops for loop in then.loops)


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
                if isinstance(mem.type, SmemType) and info.loops:
                    yield from _first_trip(ctx, info, ref, written[mem])
                continue
            if isinstance(mem.type, SmemType):
                later = written.get(mem, [])
                hint, edits = _first(ctx, info.op, _buffer_fixes(ctx, info.op, mem, written))
                yield ctx.report(
                    info.op,
                    f"{ref.verb} shared buffer `{name_of(mem)}`, which nothing has written before: "
                    "shared memory starts with garbage"
                    + (" (the only writes come after this read, and no loop brings them round)" if later else ""),
                    hint=hint,
                    related=[(w.op, "written only here, later") for w in later[:1]],
                    edits=edits,
                )
            elif isinstance(mem.type, GlobalType) and mem.type.is_out and not isinstance(info.op, tl.AtomicOp):
                name = arg_name(ctx, mem)
                later = written.get(mem, [])
                hint, edits = _first(ctx, info.op, _unread_inputs(ctx, info.op, mem))
                yield ctx.report(
                    info.op,
                    f"{ref.verb} output `{name}` before this program writes it: it holds the poison the harness "
                    "fills outputs with (or stale data), not a result",
                    hint=hint,
                    related=[(w.op, "the first write") for w in later[:1]],
                    severity="warning",
                    edits=edits,
                )


def _first_trip(ctx: Context, info: OpInfo, read: Ref, writers: list[OpInfo]) -> Iterator[Diagnostic]:
    """A read of a shared buffer inside loops, on the first trip of each: the writes that can
    precede it then are those before it in program order (at the same first trips, for the
    loops they share with it; at any trip of the others) and those of other roles. When none of
    them can touch what the read reads (`cp.async(..., buf[1])` before a loop whose first trip
    reads `buf[k % 2]`, slot 0), the read sees garbage. The write to blame is the one before
    the loop (the prologue, which fills the wrong part); without one, the read."""
    sym = ctx.symbolic
    first: list = []
    for loop in info.loops:
        k, lo, hi = (sym.value(v) for v in (loop.body.block.args[0], loop.lower, loop.upper))
        if k.tainted or lo.tainted or hi.tainted:
            return
        first += [k.expr == lo.expr, lo.expr < hi.expr]
    lanes = sym.lanes(read.shape, f"rbw{ctx.order[info.op]}")
    at_read = _every_dimension(ctx, read, lanes)
    guard = [sym.path(info.op)] + ([sym.at(read.mask, lanes)] if read.mask is not None else [])
    if at_read is None or any(t.tainted for t in [*at_read, *guard]):
        return
    preceding = []
    for w in writers:
        other_role = w.role is not None and w.role is not info.role
        if not other_role and ctx.order[w.op] >= ctx.order[info.op]:
            continue  # after the read in program order: not on the first trip
        for ref in writes(w.op):
            if ref.mem is not read.mem:
                continue
            wl = sym.lanes(ref.shape, f"rbw{ctx.order[w.op]}w")
            at_write = _every_dimension(ctx, ref, wl)
            wguard = [sym.path(w.op)] + ([sym.at(ref.mask, wl)] if ref.mask is not None else [])
            if at_write is None or len(at_write) != len(at_read) or any(t.tainted for t in [*at_write, *wguard]):
                return  # not judged
            same = [a.expr == b.expr for a, b in zip(at_read, at_write, strict=True)]
            meets = z3.And(*same, *[g.expr for g in guard + wguard])
            if sym.counterexample(z3.Not(meets), first) is not None:
                return  # this write can fill something the first trip reads
            preceding.append((w, ref))
    if not preceding:
        return  # nothing precedes at all: the buffer-level check's case
    prologue = [(w, ref) for w, ref in preceding if not w.loops and w.role is info.role]
    name = name_of(read.mem)
    view = _view_at_first_trip(ctx, read, first)
    reads_text = f"`{name}[{view}]`" if view is not None else f"part of `{name}`"
    if len(prologue) == 1:
        w, ref = prologue[0]
        yield ctx.report(
            w.op,
            f"this fills a part of `{name}` that the loop's first trip does not read: the first trip reads "
            f"{reads_text}, which nothing has written before it (shared memory starts with garbage)",
            hint=f"fill {reads_text}, the part the first trip reads" if view is not None else "",
            related=[(info.op, "the first trip's read")],
            edits=[_refilled(ctx, w.op, ref, name, view)],
        )
        return
    yield ctx.report(
        info.op,
        f"{read.verb} shared buffer `{name}` reads, on the loop's first trip, {reads_text}, which nothing has "
        f"written before it: shared memory starts with garbage, so {reads_text} must be filled before the loop",
        related=[(w.op, "writes another part") for w, _ in preceding[:1]],
    )


def _view_at_first_trip(ctx: Context, read: Ref, first: list) -> str | None:
    """The read's stage indices at the first trip, where they are constants (`1` of `buf[k % 2]`)."""
    sym = ctx.symbolic
    out = []
    for extent, v in zip(read.access.dims, read.indices, strict=True):
        if extent is not None or isinstance(v.type, TileType):
            break
        t = sym.value(v)
        got = sym.counterexample(z3.BoolVal(False), first, {"__v": t.expr})
        if got is None or not isinstance(got.get("__v"), int):
            return None
        if sym.counterexample(t.expr == got["__v"], first) is not None:
            return None  # not one constant at the first trip
        out.append(str(got["__v"]))
    return ", ".join(out) if out else None


def _every_dimension(ctx: Context, ref: Ref, lanes: tuple) -> list[Term] | None:
    """The index of every dimension of the memory an access touches, at its lanes: the indexed
    ones (`index_terms`), then the dimensions it leaves whole (`as[s]` of an `[S, BM, BK]`
    buffer), which its remaining lanes run over."""
    terms = index_terms(ctx, ref, lanes)
    if terms is None:
        return None
    rank = len(shape_of(ref.mem.type))
    if ref.is_gather:
        return terms if len(terms) == rank else None
    used = sum(1 for e in ref.access.dims if e is not None)
    rest = rank - len(terms)
    if used + rest != len(lanes):
        return None
    return [*terms, *(Term(lanes[used + j], False) for j in range(rest))]


def _refilled(ctx: Context, op: Operation, ref: Ref, name: str, view: str | None) -> Edit | None:
    """The write's `buf[1]` made the `buf[0]` that the first trip reads."""
    written = _view_at_first_trip(ctx, ref, [])
    if view is None or written is None:
        return None
    return ctx.replace_in(op, f"{name}[{written}]", f"{name}[{view}]")


# ---- fixes ---------------------------------------------------------------------------------------

Fix = tuple[str, Edit | None]  # a hint and its edit


def _first(ctx: Context, op: Operation, fixes: list[Fix]) -> tuple[str, tuple[Edit, ...]]:
    """The first fix that holds (`first_fix`), with its hint; ("", ()) where none does."""
    line = getattr(ctx.span(op), "line", 0)
    found = first_fix(ctx, "dataflow.read-before-write", line, [edit for _, edit in fixes])
    return next(((hint, found) for hint, edit in fixes if found and found == (edit,)), ("", ()))


def _same_buffer_type(a: SSAValue, b: SSAValue) -> bool:
    return (
        isinstance(a.type, SmemType)
        and isinstance(b.type, SmemType)
        and a.type.shape == b.type.shape
        and a.type.dtype == b.type.dtype
    )


def _buffer_fixes(ctx: Context, op: Operation, mem: SSAValue, written: dict[SSAValue, list[OpInfo]]) -> list[Fix]:
    """For a buffer nothing writes: the last of several writes into another buffer of its type
    sent to it (a copy into the wrong buffer), the read sent to a buffer of its type that is
    filled, or (a read that only starts a loop-carried value) that value started from zeros."""
    name = name_of(mem)
    fixes: list[Fix] = []
    others = [m for m in written if m is not mem and _same_buffer_type(m, mem)]
    for other in others:
        if len(written[other]) > 1:
            last = written[other][-1].op
            fixes.append(
                (
                    f"fill `{name}` with the copy on line {getattr(ctx.span(last), 'line', 0)}, which writes `{name_of(other)}` a second time",
                    renamed_in(ctx, last, name_of(other), name),
                )
            )
    for other in others[:2]:
        fixes.append((f"read `{name_of(other)}`, the buffer that is filled", renamed_in(ctx, op, name, name_of(other))))
    start = _carried_start(ctx, op)
    if start is not None:
        text = f"zeros({start.results[0].type})"
        span = ctx.span(start)
        fixes.append(
            (
                f"start `{start.results[0].name_hint}` from `{text}`, not from the unfilled buffer",
                Edit(span, text) if span else None,
            )
        )
    return fixes


def _carried_start(ctx: Context, op: Operation) -> Operation | None:
    """The statement a read feeds, where the value it names only starts a loop-carried value."""
    for statement in feeding_users(op):
        value = statement.results[0] if len(statement.results) == 1 else None
        if (
            value is not None
            and value.name_hint
            and all(isinstance(u.operation, st.ForOp) for u in value.uses)
            and value.uses
        ):
            span, line = ctx.span(statement), None
            if (
                span is not None
                and (line := line_of(ctx, span.line)) is not None
                and line.split("=")[0].strip() == value.name_hint
            ):
                return statement
    return None


def feeding_users(op: Operation) -> list[Operation]:
    """The ops computed from `op`'s results, nearest first."""
    out: list[Operation] = []
    todo = list(op.results)
    while todo:
        for use in todo.pop(0).uses:
            if use.operation not in out and not isinstance(use.operation, st.ForOp):
                out.append(use.operation)
                todo += list(use.operation.results)
    return out


def _unread_inputs(ctx: Context, op: Operation, mem: SSAValue) -> list[Fix]:
    """The read sent to an input of the output's type that nothing reads (the operand meant)."""
    read = {r.mem for o in ctx.kernel.walk() for r in reads(o)}
    name = arg_name(ctx, mem) or ""
    return [
        (f"read `{other}`, the input nothing reads", renamed_in(ctx, op, name, other))
        for other, arg in ctx.kernel.args
        if arg not in read and not cast(GlobalType, arg.type).is_out and same_tensor_type(arg, mem)
    ][:2]
