"""`pipeline(stages = S)` lowered to sm_80-style cp.async copies into an S-stage shared ring.

    for k in 0 .. K / BK pipeline(stages = 3) {        as = smem(bf16[3, BM, BK])
      ks = k * BK + arange(0, BK)                      # prologue: iterations 0 .. S - 2
      at = load(a[rows[:, None], ks[None, :]],    =>   if 0 < K / BK { cp.async(a[m0 : m0 + BM, 0 * BK : ...], as[0], mask = ...) }
                mask = rmask[:, None])                 cp.async.commit()
      ...                                              ...
    }                                                  for k in 0 .. K / BK {
                                                         cp.async.wait(1)
                                                         barrier()
                                                         at = load(as[k % 3])
                                                         if k + 2 < K / BK { cp.async(<iteration k + 2>, as[(k + 2) % 3], mask = ...) }
                                                         cp.async.commit()
                                                         ...
                                                       }

Every iteration commits exactly one group (empty when the guard fails), so `cp.async.wait(S - 2)`
at the top of iteration k leaves only the group of iteration k + 1 .. k + S - 2 in flight and the
data of iteration k has landed. The `barrier()` after it both publishes the copied data to every
thread and orders every thread's reads of the previous iteration's stage before the copy that
overwrites it (stage (k + S - 1) % S is stage (k - 1) % S).

What qualifies. The loop is at the top level of the kernel body, has a constant positive step
and S >= 2 stages; its body has no store, atomic or hardware-explicit op (a prefetch may not move
a read above a write), and its global loads are all at the body's top level, tile-shaped, with no
`other` (cp.async writes masked-off lanes as zero, which is what the load gave them) and either
- a block access (scalars and slices), copied as it is, or
- a gather whose index tile for dimension d is `start + arange(0, E)` (or `arange(a, b)`) put on
  axis d by `[:, None]`-style expansions: the box `start : start + E`.
The box starts and the mask are recomputed for a later iteration by cloning the pure ops they
are computed from in the body with the loop variable replaced, so any pure function of the loop
variable works (affine or not); a dependence on a carried value or on a load is refused.

Anything else leaves the loop unchanged, with a `lower.pipeline` warning that says why. Known gaps:
gathers that are not contiguous ranges (`table[idx[:, None], ...]` with loaded `idx`), loads under
an `if` or an inner loop, loops nested in loops or roles, and a symbolic stage count is fixed at
the parameter's default value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Span
from kir.dialect.explicit import CpAsyncCommitOp, CpAsyncOp, CpAsyncWaitOp, CtaBarrierOp, SmemAllocOp
from kir.dialect.structure import ForOp, IfOp, KernelOp, RoleOp, YieldOp
from kir.dialect.tile import (
    ArangeOp,
    AtomicOp,
    BinaryOp,
    BroadcastOp,
    CastOp,
    CompareOp,
    ConstOp,
    ExpandDimsOp,
    FullOp,
    LoadOp,
    NumProgramsOp,
    ProgramIdOp,
    ReshapeOp,
    StoreOp,
    SymValueOp,
    TransOp,
    UnaryOp,
    WhereOp,
    ZerosOp,
)
from kir.dialect.types import Access, GlobalType, ScalarType, TileType, dtype_of, shape_of, smem, tile_type
from kir.program import Program, set_span, span_of
from lowering.passes import PassResult

RULE = "lower.pipeline"

# Ops without effects: they may be recomputed for another iteration, and dropped when unused.
_PURE = (
    ProgramIdOp,
    NumProgramsOp,
    SymValueOp,
    ConstOp,
    ArangeOp,
    ZerosOp,
    FullOp,
    BinaryOp,
    CompareOp,
    UnaryOp,
    WhereOp,
    CastOp,
    ExpandDimsOp,
    BroadcastOp,
    ReshapeOp,
    TransOp,
)


class _Refusal(Exception):
    def __init__(self, message: str, span: Span | None = None, hint: str = ""):
        super().__init__(message)
        self.message, self.span, self.hint = message, span, hint


@dataclass(frozen=True)
class _Copy:
    """One global load turned into a box copy: `src[access]` with `starts` (a value of the loop
    body, or a static integer start) and the load's mask."""

    load: LoadOp
    access: Access
    starts: tuple[SSAValue | int, ...]
    mask: SSAValue | None


@dataclass(frozen=True)
class _Plan:
    stages: int
    step: int
    copies: tuple[_Copy, ...]
    body_ops: frozenset[Operation]


@dataclass(frozen=True)
class PipelinePass:
    """Lower every `pipeline(stages = S)` loop that qualifies; `stages` overrides each loop's S."""

    stages: int | None = None

    def apply(self, program: Program) -> PassResult:
        out = program.clone()
        diagnostics: list[Diagnostic] = []
        loops = [op for op in out.kernel.walk() if isinstance(op, ForOp) and op.stages is not None]
        for loop in loops:
            try:
                plan = self._plan(out, loop)
            except _Refusal as refusal:
                diagnostics.append(
                    Diagnostic(
                        RULE,
                        "warning",
                        refusal.span or span_of(loop),
                        f"the loop is not pipelined: {refusal.message}",
                        refusal.hint,
                    )
                )
                continue
            _rewrite(loop, plan)
        return PassResult(out, diagnostics)

    # -- deciding (no change to the IR) ------------------------------------------------------

    def _plan(self, program: Program, loop: ForOp) -> _Plan:
        stages = self.stages if self.stages is not None else _static(loop.stages.data, program.params)
        if stages is None or stages < 2:
            raise _Refusal(
                f"{loop.stages.data if stages is None else stages} is not a static stage count of at least 2",
                hint="write pipeline(stages = S) with S >= 2 known at compile time",
            )
        if not isinstance(loop.parent_op(), KernelOp):
            raise _Refusal(
                "only loops at the top level of the kernel body are pipelined",
                hint="the shared ring and the CTA barrier need every thread of the CTA",
            )
        step = _const_int(loop.step)
        if step is None or step <= 0:
            raise _Refusal("the step is not a positive constant", hint="write `step` as a positive literal")
        if dtype_of(loop.lower.type) != dtype_of(loop.upper.type):
            raise _Refusal("the bounds have different dtypes", hint="cast one bound to the other's dtype")
        body = loop.body.block
        body_ops = frozenset(op for op in loop.walk() if op is not loop)
        loads: list[LoadOp] = []
        for op in loop.walk():
            if op is loop:
                continue
            if isinstance(op, StoreOp | AtomicOp):
                raise _Refusal(
                    f"the body writes memory (`{op.name}`), and a prefetched read may not move above a write",
                    span_of(op),
                    "move the write out of the loop, or write the schedule yourself with cp.async",
                )
            if type(op).__module__ == "kir.dialect.explicit" or isinstance(op, RoleOp):
                raise _Refusal(
                    f"the body is already at the explicit level (`{op.name}`)",
                    span_of(op),
                    "drop the pipeline hint when you write the schedule yourself",
                )
            if isinstance(op, LoadOp) and isinstance(op.mem.type, GlobalType):
                if op.parent_block() is not body:
                    raise _Refusal(
                        "a global load is under an `if` or an inner loop, so it does not run every iteration",
                        span_of(op),
                        "load unconditionally (with a mask) at the top level of the loop body",
                    )
                loads.append(op)
        if not loads:
            raise _Refusal("the body loads nothing from global memory", hint="drop the pipeline hint")
        iv = body.args[0]
        copies = tuple(_copy_of(load, iv, body_ops) for load in loads)
        return _Plan(stages, step, copies, body_ops)


def _static(expr: sx.SymExpr, params: dict[str, int]) -> int | None:
    try:
        return expr.evaluate(params)
    except (KeyError, ZeroDivisionError):
        return None


def _const_int(v: SSAValue) -> int | None:
    owner = v.owner
    if isinstance(owner, ConstOp) and isinstance(owner.number, int) and not isinstance(owner.number, bool):
        return owner.number
    return None


def _copy_of(load: LoadOp, iv: SSAValue, body_ops: frozenset[Operation]) -> _Copy:
    span = span_of(load)
    if load.other is not None:
        raise _Refusal(
            "a load gives masked-off lanes `other`, but cp.async writes them as zero",
            span,
            "drop `other`, and select the value with where(mask, x, other) after the load",
        )
    if not isinstance(load.res.type, TileType):
        raise _Refusal("a load reads a scalar, not a tile", span, "load scalars outside the loop")
    indices = list(load.indices)
    if any(isinstance(v.type, TileType) for v in indices):
        access, starts = _gather_box(load, span)
    else:
        access, starts = load.access.data, tuple(indices)
    shape = [d for d in access.dims if d is not None]
    if tile_type(dtype_of(load.res.type), shape) != load.res.type:
        raise _Refusal("the box does not have the shape of the loaded tile", span)
    for v in [*(s for s in starts if isinstance(s, SSAValue)), *([load.mask] if load.mask else [])]:
        _check_recomputable(v, iv, body_ops)
    return _Copy(load, access, starts, load.mask)


def _gather_box(load: LoadOp, span: Span | None) -> tuple[Access, tuple[SSAValue | int, ...]]:
    """The box `[s0 : s0 + E0, s1 : s1 + E1, ...]` that a gather through contiguous ranges reads."""
    indices = list(load.indices)
    rank = len(indices)
    extents: list[sx.SymExpr] = []
    starts: list[SSAValue | int] = []
    for d, idx in enumerate(indices):
        shape = shape_of(idx.type) if isinstance(idx.type, TileType) else ()
        if len(shape) != rank or any(e != sx.Int(1) for i, e in enumerate(shape) if i != d):
            raise _Refusal(
                f"the index of dimension {d} is not a tile along axis {d} only",
                span,
                "index each dimension with its own range, as in a[rows[:, None], ks[None, :]]",
            )
        v = idx
        while isinstance(v.owner, ExpandDimsOp):
            v = v.owner.operand
        start = _range_start(v)
        if start is None or len(shape_of(v.type)) != 1:
            raise _Refusal(
                f"the index of dimension {d} is not a contiguous range `start + arange(0, E)`",
                span,
                "only gathers through contiguous ranges become cp.async boxes; other gathers stay loads",
            )
        extents.append(shape[d])
        starts.append(start)
    return Access(tuple(extents)), tuple(starts)


def _range_start(v: SSAValue) -> SSAValue | int | None:
    owner = v.owner
    if isinstance(owner, ArangeOp):
        return owner.start.data.as_int()
    if isinstance(owner, BinaryOp) and owner.fn.data == "add":
        for base, rng in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs)):
            if (
                isinstance(base.type, ScalarType)
                and isinstance(rng.owner, ArangeOp)
                and rng.owner.start.data.as_int() == 0
            ):
                return base
    return None


def _check_recomputable(v: SSAValue, iv: SSAValue, body_ops: frozenset[Operation]) -> None:
    if v is iv:
        return
    if isinstance(v, BlockArgument):
        raise _Refusal(
            f"a copy's index or mask depends on the carried value '{v.name_hint}'",
            hint="compute load indices from the loop variable and values defined before the loop",
        )
    op = v.owner
    if op not in body_ops:
        return
    if not isinstance(op, _PURE):
        raise _Refusal(
            f"a copy's index or mask depends on `{op.name}` in the loop, which cannot be recomputed ahead",
            span_of(op),
            "compute load indices from the loop variable and values defined before the loop",
        )
    for operand in op.operands:
        _check_recomputable(operand, iv, body_ops)


# -- rewriting ---------------------------------------------------------------------------------


class _Emitter:
    """Appends new ops at a point of a block, each with the span of what it stands for."""

    def __init__(self, block: Block, before: Operation | None):
        self.block, self.before = block, before

    def __call__(self, op: Operation, span: Span | None) -> Operation:
        set_span(op, span)
        if self.before is None:
            self.block.add_op(op)
        else:
            self.block.insert_op_before(op, self.before)
        return op

    def const(self, value: int, dtype: str, span: Span | None) -> SSAValue:
        return self(ConstOp(value, dtype), span).results[0]

    def binary(self, fn: str, lhs: SSAValue, rhs: SSAValue, span: Span | None) -> SSAValue:
        return self(BinaryOp(fn, lhs, rhs), span).results[0]


def _rewrite(loop: ForOp, plan: _Plan) -> None:
    S, step = plan.stages, plan.step
    loop_span = span_of(loop)
    kernel_block = loop.parent_block()
    assert kernel_block is not None
    body = loop.body.block
    iv = body.args[0]
    idt = dtype_of(iv.type)
    before_loop = _Emitter(kernel_block, _bounds_start(loop))

    kernel = loop.parent_op()
    assert kernel is not None
    taken = {
        v.name_hint
        for op in kernel.walk()
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args))
    }
    rings = []
    for copy in plan.copies:
        shape = shape_of(copy.load.res.type)
        ring = before_loop(SmemAllocOp(smem(dtype_of(copy.load.res.type), [sx.Int(S), *shape])), span_of(copy.load))
        name = f"{copy.load.res.name_hint}_ring"
        if copy.load.res.name_hint and name not in taken:
            ring.results[0].name_hint = name
        rings.append(ring.results[0])

    def issue(emit: _Emitter, k: SSAValue, stage: Callable[[_Emitter], SSAValue]) -> None:
        """`if k < hi { cp.async(<iteration k>, ring[stage]) ... }` then `cp.async.commit()`."""
        cond = emit(CompareOp("lt", k, _fresh(loop.upper, emit)), loop_span).results[0]
        then = Block()
        inner = _Emitter(then, None)
        memo: dict[SSAValue, SSAValue] = {}
        s = stage(inner)
        for copy, ring in zip(plan.copies, rings, strict=True):
            span = span_of(copy.load)
            starts = [
                inner.const(x, "i32", span) if isinstance(x, int) else _recompute(x, iv, k, plan.body_ops, memo, inner)
                for x in copy.starts
            ]
            mask = _recompute(copy.mask, iv, k, plan.body_ops, memo, inner) if copy.mask is not None else None
            inner(CpAsyncOp(copy.load.mem, copy.access, starts, ring, Access((None,)), [s], mask), span)
        inner(YieldOp(), loop_span)
        emit(IfOp(cond, [], Region(then), Region(Block([YieldOp()]))), loop_span)
        emit(CpAsyncCommitOp(), loop_span)

    # prologue: the copies of iterations 0 .. S - 2, one commit group each
    for i in range(S - 1):
        lower0 = _const_int(loop.lower)
        if lower0 is not None:
            k = before_loop.const(lower0 + i * step, idt, loop_span)
        else:
            lower = _fresh(loop.lower, before_loop)
            k = (
                lower
                if i == 0
                else before_loop.binary("add", lower, before_loop.const(i * step, idt, loop_span), loop_span)
            )
        issue(before_loop, k, lambda e, i=i: e.const(i, idt, loop_span))

    # the loop: wait for this iteration's group, read the stage, then issue iteration k + S - 1
    top = _Emitter(body, body.first_op)
    top(CpAsyncWaitOp(S - 2), loop_span)
    top(CtaBarrierOp(), loop_span)
    it = iv
    if _const_int(loop.lower) != 0:
        it = top.binary("sub", it, _fresh(loop.lower, top), loop_span)
    if step != 1:
        it = top.binary("div", it, top.const(step, idt, loop_span), loop_span)
    stage = top.binary("rem", it, top.const(S, idt, loop_span), loop_span)

    last_new: Operation | None = None
    for copy, ring in zip(plan.copies, rings, strict=True):
        old = copy.load
        new = LoadOp(ring, Access((None,)), [stage])
        set_span(new, span_of(old))
        body.insert_op_before(new, old)
        new.res.name_hint = old.res.name_hint
        old.res.replace_all_uses_with(new.res)
        if last_new is None or body.get_operation_index(old) > body.get_operation_index(last_new):
            last_new = new
        body.erase_op(old)
    assert last_new is not None
    after = _Emitter(body, last_new.next_op)
    k_next = after.binary("add", iv, after.const((S - 1) * step, idt, loop_span), loop_span)
    issue(
        after,
        k_next,
        lambda e: e.binary(
            "rem", e.binary("add", it, e.const(S - 1, idt, loop_span), loop_span), e.const(S, idt, loop_span), loop_span
        ),
    )

    _drop_dead(body)
    del loop.properties["stages"]


def _recompute(
    v: SSAValue,
    iv: SSAValue,
    k: SSAValue,
    body_ops: frozenset[Operation],
    memo: dict[SSAValue, SSAValue],
    emit: _Emitter,
) -> SSAValue:
    """`v` as the loop body computes it for iteration `k` (clones of the pure ops it comes from)."""
    if v is iv:
        return k
    if v in memo:
        return memo[v]
    op = v.owner
    if isinstance(v, BlockArgument) or op not in body_ops:
        return v
    mapper = {o: _recompute(o, iv, k, body_ops, memo, emit) for o in op.operands}
    clone = emit(op.clone(value_mapper=mapper, clone_name_hints=False), span_of(op))
    for old, new in zip(op.results, clone.results, strict=True):
        memo[old] = new
    return memo[v]


def _bounds_start(loop: ForOp) -> Operation:
    """The first of the ops just before the loop that only compute its operands: new ops go
    before them, so that the printer can still write the bounds inline."""
    mine: set[Operation] = {loop}
    anchor: Operation = loop
    while (prev := anchor.prev_op) is not None and isinstance(prev, _PURE):
        if not all(use.operation in mine for r in prev.results for use in r.uses):
            break
        mine.add(prev)
        anchor = prev
    return anchor


def _fresh(v: SSAValue, emit: _Emitter) -> SSAValue:
    """A new copy of a scalar computed by pure ops (a loop bound): sharing the loop's own value
    would make the printer name it instead of writing `for k in 0 .. K / BK`."""
    op = v.owner
    if isinstance(v, BlockArgument) or not isinstance(op, _PURE) or not isinstance(v.type, ScalarType):
        return v
    mapper = {o: _fresh(o, emit) for o in op.operands}
    clone = emit(op.clone(value_mapper=mapper, clone_name_hints=False), span_of(op))
    return clone.results[list(op.results).index(v)]


def _drop_dead(block: Block) -> None:
    """Erase the pure ops of a block whose results nobody uses (the replaced loads' indices)."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            if isinstance(op, _PURE) and all(r.first_use is None for r in op.results):
                block.erase_op(op)
                changed = True
