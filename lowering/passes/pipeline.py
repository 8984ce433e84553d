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
and S >= 2 stages; its body has no hardware-explicit op and writes only to arguments it does not
read (a prefetch may not move a read above a write to what it reads; distinct arguments never
overlap, kir/aliasing.py), and its global loads are all at the body's top level, tile-shaped, with no
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
from typing import cast

from xdsl.ir import Block, Operation, Region, SSAValue

from kir import symexpr as sx
from kir.alignment import Facts, unaligned_row
from kir.diagnostics import Diagnostic
from kir.dialect.explicit import CpAsyncCommitOp, CpAsyncOp, CpAsyncWaitOp, CtaBarrierOp, SmemAllocOp
from kir.dialect.structure import ForOp, IfOp, YieldOp
from kir.dialect.tile import CompareOp, LoadOp
from kir.dialect.types import Access, SymAttr, dtype_of, shape_of, smem
from kir.program import Program, set_span, span_of
from lowering.passes import PassResult
from lowering.passes.loops import (
    Copy,
    Emitter,
    Refusal,
    bounds_start,
    const_int,
    copy_of,
    drop_dead,
    fresh,
    qualify_body,
    recompute,
    static,
    taken_names,
)

RULE = "lower.pipeline"


@dataclass(frozen=True)
class _Plan:
    stages: int
    step: int
    copies: tuple[Copy, ...]
    body_ops: frozenset[Operation]


@dataclass(frozen=True)
class PipelinePass:
    """Lower every `pipeline(stages = S)` loop that qualifies; `stages` overrides each loop's S;
    `row_align` (bytes) is the target's rule for a copy's rows (lowering/passes/alignment.py):
    a loop with a copy whose rows may start off it is not pipelined."""

    stages: int | None = None
    row_align: int | None = None

    def apply(self, program: Program) -> PassResult:
        out = program.clone()
        diagnostics: list[Diagnostic] = []
        loops = [op for op in out.kernel.walk() if isinstance(op, ForOp) and op.stages is not None]
        for loop in loops:
            try:
                plan = self._plan(out, loop)
            except Refusal as refusal:
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
        hinted = cast(SymAttr, loop.stages)  # only loops with a stage count are planned
        stages = self.stages if self.stages is not None else static(hinted.data, program.params)
        if stages is None or stages < 2:
            raise Refusal(
                f"{hinted.data if stages is None else stages} is not a static stage count of at least 2",
                hint="write pipeline(stages = S) with S >= 2 known at compile time",
            )
        step, body = qualify_body(loop, "pipelined", writes_elsewhere=True)
        iv = loop.body.block.args[0]
        copies = tuple(copy_of(load, iv, body.ops, "cp.async") for load in body.loads)
        if self.row_align:
            facts = Facts(program)
            for copy in copies:
                reason = unaligned_row(program, copy.load.mem, copy.access.dims, copy.starts, self.row_align, facts)
                if reason is not None:
                    raise Refusal(
                        f"the copy's rows must start on {self.row_align}-byte boundaries here, and {reason}",
                        span_of(copy.load),
                        "promise it in a `where` clause (`N % 4 == 0` for bf16 rows, or fix the shape), or load it directly",
                    )
        return _Plan(stages, step, copies, body.ops)


# -- rewriting ---------------------------------------------------------------------------------


def _rewrite(loop: ForOp, plan: _Plan) -> None:
    S, step = plan.stages, plan.step
    loop_span = span_of(loop)
    kernel_block = loop.parent_block()
    assert kernel_block is not None
    body = loop.body.block
    iv = body.args[0]
    idt = dtype_of(iv.type)
    before_loop = Emitter(kernel_block, bounds_start(loop))

    kernel = loop.parent_op()
    assert kernel is not None
    taken = taken_names(kernel)
    rings = []
    for copy in plan.copies:
        shape = shape_of(copy.load.res.type)
        ring = before_loop(SmemAllocOp(smem(dtype_of(copy.load.res.type), [sx.Int(S), *shape])), span_of(copy.load))
        name = f"{copy.load.res.name_hint}_ring"
        if copy.load.res.name_hint and name not in taken:
            ring.results[0].name_hint = name
        rings.append(ring.results[0])

    def issue(emit: Emitter, k: SSAValue, stage: Callable[[Emitter], SSAValue]) -> None:
        """`if k < hi { cp.async(<iteration k>, ring[stage]) ... }` then `cp.async.commit()`."""
        cond = emit(CompareOp("lt", k, fresh(loop.upper, emit)), loop_span).results[0]
        then = Block()
        inner = Emitter(then, None)
        memo: dict[SSAValue, SSAValue] = {}
        s = stage(inner)
        for copy, ring in zip(plan.copies, rings, strict=True):
            span = span_of(copy.load)
            starts = [
                inner.const(x, "i32", span) if isinstance(x, int) else recompute(x, iv, k, plan.body_ops, memo, inner)
                for x in copy.starts
            ]
            mask = recompute(copy.mask, iv, k, plan.body_ops, memo, inner) if copy.mask is not None else None
            inner(CpAsyncOp(copy.load.mem, copy.access, starts, ring, Access((None,)), [s], mask), span)
        inner(YieldOp(), loop_span)
        emit(IfOp(cond, [], Region(then), Region(Block([YieldOp()]))), loop_span)
        emit(CpAsyncCommitOp(), loop_span)

    # prologue: the copies of iterations 0 .. S - 2, one commit group each
    for i in range(S - 1):
        lower0 = const_int(loop.lower)
        if lower0 is not None:
            k = before_loop.const(lower0 + i * step, idt, loop_span)
        else:
            lower = fresh(loop.lower, before_loop)
            k = (
                lower
                if i == 0
                else before_loop.binary("add", lower, before_loop.const(i * step, idt, loop_span), loop_span)
            )
        issue(before_loop, k, lambda e, i=i: e.const(i, idt, loop_span))  # type: ignore[misc]  # a lambda binding i

    # the loop: wait for this iteration's group, read the stage, then issue iteration k + S - 1
    top = Emitter(body, body.first_op)
    top(CpAsyncWaitOp(S - 2), loop_span)
    top(CtaBarrierOp(), loop_span)
    it: SSAValue = iv
    if const_int(loop.lower) != 0:
        it = top.binary("sub", it, fresh(loop.lower, top), loop_span)
    if step != 1:
        it = top.binary("div", it, top.const(step, idt, loop_span), loop_span)
    stage = top.binary("rem", it, top.const(S, idt, loop_span), loop_span)

    last_new: Operation | None = None
    for copy, ring_value in zip(plan.copies, rings, strict=True):
        old = copy.load
        new = LoadOp(ring_value, Access((None,)), [stage])
        set_span(new, span_of(old))
        body.insert_op_before(new, old)
        new.res.name_hint = old.res.name_hint
        old.res.replace_all_uses_with(new.res)
        if last_new is None or body.get_operation_index(old) > body.get_operation_index(last_new):
            last_new = new
        body.erase_op(old)
    assert last_new is not None
    after = Emitter(body, last_new.next_op)
    k_next = after.binary("add", iv, after.const((S - 1) * step, idt, loop_span), loop_span)
    issue(
        after,
        k_next,
        lambda e: e.binary(
            "rem", e.binary("add", it, e.const(S - 1, idt, loop_span), loop_span), e.const(S, idt, loop_span), loop_span
        ),
    )

    drop_dead(body)
    del loop.properties["stages"]
