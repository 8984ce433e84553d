"""Synchronization of code that every warp of the CTA runs (outside roles): cp.async groups and
the barriers between warps.

A cp.async copy is retired by `cp.async.wait(n)` only once committed, and only for the thread
that issued it; outside roles every warp issues its share of a copy and reads elements other
warps copied, so a read needs the wait and then a `barrier()`, and the next write of a stage a
`barrier()` after every warp's read. The rules here share the facts and the reporting of
`verifier.rules.sync` (counterexamples from its model check, hints checked by `sync_fix`).
"""

from __future__ import annotations

from collections.abc import Iterator

import z3
from xdsl.ir import Operation

from kir.diagnostics import Diagnostic
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from verifier.context import Context
from verifier.registry import rule
from verifier.rules import sync_fix as fx
from verifier.rules.sync import (
    Access,
    _buf_name,
    _call_args,
    _checked_text,
    _mechanical,
    _pending,
    _pure,
    accesses,
    all_accesses,
    dominators,
    fixed_hint,
    model_run,
    role_of,
    step,
    trace_text,
    witness,
)

# The rules' bad examples; each good example is its bad one with the fix made.
_UNCOMMITTED = """\
kernel k<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_80 grid(M / BM, N / BN) warps(1)
{
  buf = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  cp.async(x[m0 : m0 + BM, n0 : n0 + BN], buf[0 : BM])  # <-
  cp.async.wait(0)
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]) * 2.0)
}
"""


_REFILL = """\
kernel k<BM = 32, BK = 64>(x: global f32[M, K], y: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[0])
  cp.async.commit()
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {
    nxt = (k + 1) * BK
    cp.async(x[m0 : m0 + BM, nxt : nxt + BK], buf[(k + 1) % 2], mask = k + 1 < K / BK)
    cp.async.commit()
    cp.async.wait(1)
    barrier()
    acc = acc + sum(load(buf[k % 2]), axis = 1)  # <-
  }
  store(y[m0 : m0 + BM], acc)
}
"""


_UNPUBLISHED = """\
kernel k<BM = 32, BK = 64>(x: global f32[M, K], y: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{
  buf = smem(f32[BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[0 : BM])
  cp.async.commit()
  cp.async.wait(0)  # <-
  store(y[m0 : m0 + BM], sum(load(buf[0 : BM]), axis = 1))
}
"""


@rule(
    "sync.cp-async-group",
    family="sync",
    severity="error",
    summary="a cp.async group that the cp.async.wait before a read does not retire",
    explanation="""
`cp.async.wait(n)` retires every committed group but the n newest; copies issued after the last
`cp.async.commit()` belong to no group, and no wait retires them. A read of a buffer that
cp.async fills is safe once the group holding its copy is retired: the copy must be committed
before the wait, and n must leave pending only the groups committed after it (in a ring of S
stages with S - 1 tiles in flight, `cp.async.wait(S - 2)`).""",
    bad=_UNCOMMITTED,
    good=_UNCOMMITTED.replace(
        "  cp.async(x[m0 : m0 + BM, n0 : n0 + BN], buf[0 : BM])  # <-\n",
        "  cp.async(x[m0 : m0 + BM, n0 : n0 + BN], buf[0 : BM])\n  cp.async.commit()\n",
    ),
)
@_mechanical
def cp_async_group(ctx: Context) -> Iterator[Diagnostic]:
    copies = [a for a in all_accesses(ctx) if a.write and a.kind == "cp.async"]
    reported: set[Operation] = set()
    for w in copies:
        wait = _uncommitted_until(w.op)
        if wait is None or w.op in reported:
            continue
        last = _run_end(w.op)  # the commit goes after the last copy of the run
        reported.update(o for o in [w.op, last])
        cex = witness(
            ctx,
            {
                "trace": [
                    step(ctx, last, "cp.async issued, in no group", buffer=w.buffer.res.name_hint),
                    step(ctx, wait, "retires the committed groups only"),
                ]
            },
        )
        yield ctx.report(
            last,
            f"the cp.async into `{_buf_name(w)}` is never committed before the cp.async.wait, which retires "
            "committed groups only: the data may still be in flight when it is read" + trace_text(cex),
            fixed_hint(ctx, [fx.insert_after(last, "cp.async.commit()")]),
            related=[(wait, "the wait that does not cover it")],
            counterexample=cex,
        )
    if reported:
        return
    yield from _wait_depth(ctx, copies)


def _run_end(op: Operation) -> Operation:
    """The last cp.async of the run of copies that `op` starts (index math between them aside)."""
    last = op
    nxt = last.next_op
    while nxt is not None and (isinstance(nxt, ex.CpAsyncOp) or _pure(nxt)):
        if isinstance(nxt, ex.CpAsyncOp):
            last = nxt
        nxt = nxt.next_op
    return last


def _uncommitted_until(op: Operation) -> ex.CpAsyncWaitOp | None:
    """The cp.async.wait reached from a copy before any cp.async.commit, in program order
    within its role (out of enclosing blocks, never into nested ones)."""
    current: Operation | None = op
    while current is not None:
        nxt = current.next_op
        while nxt is not None:
            if isinstance(nxt, ex.CpAsyncCommitOp):
                return None
            if isinstance(nxt, ex.CpAsyncWaitOp):
                return nxt
            if any(isinstance(o, ex.CpAsyncCommitOp) for o in nxt.walk()):
                return None
            nxt = nxt.next_op
        parent = current.parent_op()
        if parent is None or isinstance(parent, st.KernelOp | st.RoleOp):
            return None  # the end of the role: judged by the run, not here
        if isinstance(parent, st.ForOp) and any(isinstance(o, ex.CpAsyncCommitOp) for o in parent.walk()):
            return None  # a ring: the next trip commits it
        current = parent
    return None


def _wait_depth(ctx: Context, copies: list[Access]) -> Iterator[Diagnostic]:
    """A read that the run finds racing with a cp.async, after a cp.async.wait(n) whose smaller
    depth makes the program pass: that depth is what is wrong."""
    if not copies:
        return
    found = [d for d in model_run(ctx) if d.rule == "sync.race" and "cp.async" in repr(d.counterexample)]
    if not found:
        return
    filled = {a.buffer for a in copies}
    # a run of copies that no commit closes before the next copies: committed with them, into a
    # group the wait may leave in flight; closing it is the fix when that passes
    for w in copies:
        last = _run_end(w.op)
        nxt = last.next_op
        while nxt is not None and _pure(nxt):
            nxt = nxt.next_op
        if isinstance(nxt, ex.CpAsyncCommitOp):
            continue
        edit = fx.insert_after(last, "cp.async.commit()")
        if edit is not None and fx.passes(ctx, edit):
            cex = found[0].counterexample
            yield ctx.report(
                last,
                f"the cp.async into `{_buf_name(w)}` is not committed here: it joins the group of the next copies, "
                "which the cp.async.wait before its read leaves in flight" + trace_text(cex),
                _checked_text(ctx, edit),
                related=[(found[0].span, "the read that races with it")] if found[0].span else [],
                counterexample=cex,
            )
            return
    for acc in all_accesses(ctx):
        if acc.write or acc.buffer not in filled:
            continue
        wait = next((d for d in dominators(ctx, acc.op) if isinstance(d, ex.CpAsyncWaitOp)), None)
        n = _pending(ctx, wait) if wait is not None else None
        if wait is None or not n:
            continue
        n_text = _call_args(ctx, wait) or str(n)
        edits = [fx.replace_in(wait, f"cp.async.wait({n_text})", f"cp.async.wait({m})") for m in range(n - 1, -1, -1)]
        hint = fixed_hint(ctx, edits)
        if not hint:
            continue
        cex = found[0].counterexample
        yield ctx.report(
            wait,
            f"cp.async.wait({n_text}) leaves {n} group(s) in flight, among them the one that fills `{_buf_name(acc)}` "
            "for the read below" + trace_text(cex),
            hint,
            related=[(acc.op, "the read of the copy still in flight")],
            counterexample=cex,
        )
        return


@rule(
    "sync.refill-without-barrier",
    family="sync",
    severity="error",
    summary="a loop refills a shared buffer that other warps may still be reading, with no barrier() between",
    explanation="""
Code outside roles runs on every warp of the CTA, and the warps do not run in step: the element
a thread copies or stores is in general read by another warp. In a loop that reads a shared
buffer and writes it again (a cp.async refill of a double buffer, a store of the next tile), a
fast warp's write of the next trip can land while a slow warp still reads the current one. A
`barrier()` between the read and the next write of the same stage (at the end of the loop body)
orders them: every warp has finished reading before any warp writes.""",
    bad=_REFILL,
    good=_REFILL.replace(
        "    acc = acc + sum(load(buf[k % 2]), axis = 1)  # <-\n",
        "    acc = acc + sum(load(buf[k % 2]), axis = 1)\n    barrier()\n",
    ),
)
@_mechanical
def refill_without_barrier(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.kernel.threads <= 32:
        return  # one warp: its threads read and write in program order
    for loop_info in ctx.ops(st.ForOp):
        loop = loop_info.op
        if loop_info.role is not None:
            continue
        body = list(loop.body.block.ops)
        top = {op: i for i, op in enumerate(body)}
        inside = [a for o in body for a in _walk_accesses(o)]
        barriers = [i for i, o in enumerate(body) if isinstance(o, ex.CtaBarrierOp)]
        for r in inside:
            if r.write or r.kind != "generic":
                continue
            for w in inside:
                if not w.write or w.buffer is not r.buffer or w.kind not in ("cp.async", "generic"):
                    continue
                ri, wi = top[_top_in(r.op, loop)], top[_top_in(w.op, loop)]
                next_trip = wi <= ri
                if next_trip:
                    fenced = any(b > ri or b < wi for b in barriers)
                else:
                    fenced = any(ri < b < wi for b in barriers)
                if fenced or not _stages_meet(ctx, loop, r, w, next_trip):
                    continue
                bname = r.buffer.res.name_hint
                trip = "the next trip" if next_trip else "the same trip"
                cex = witness(
                    ctx,
                    {
                        "trace": [
                            step(ctx, r.op, f"a slow warp still reads {_buf_name(r)}", at="k", buffer=bname),
                            step(
                                ctx,
                                w.op,
                                f"a fast warp, in {trip}, writes the same stage",
                                at="k + 1" if next_trip else "k",
                                buffer=bname,
                            ),
                        ]
                    },
                )
                yield ctx.report(
                    r.op,
                    f"the warps read `{_buf_name(r)}` here, and {trip}'s "
                    f"{'cp.async' if w.kind == 'cp.async' else 'store'} writes that stage again with no barrier() "
                    "between: a fast warp overwrites what a slow warp is still reading" + trace_text(cex),
                    fixed_hint(ctx, [fx.insert_after(r.op, "barrier()")]),
                    related=[(w.op, "the write of the next round")],
                    counterexample=cex,
                )
                break


@rule(
    "sync.copy-visibility",
    family="sync",
    severity="error",
    summary="a warp reads what other warps copied with cp.async, with no barrier() after the wait",
    explanation="""
`cp.async.wait(n)` waits for the copies the executing thread issued; outside roles every warp
issues its own share of a copy, and the elements a thread reads were in general copied by
another warp. Those are visible only after a `barrier()` that follows every warp's wait: wait,
then barrier(), then read.""",
    bad=_UNPUBLISHED,
    good=_UNPUBLISHED.replace("  cp.async.wait(0)  # <-\n", "  cp.async.wait(0)\n  barrier()\n"),
)
@_mechanical
def copy_visibility(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.kernel.threads <= 32:
        return  # one warp: a thread's own wait covers the copies it reads
    filled = {a.buffer for a in all_accesses(ctx) if a.write and a.kind == "cp.async" and role_of(ctx, a.op) is None}
    reported: set[Operation] = set()
    for r in all_accesses(ctx):
        if r.write or r.kind != "generic" or r.buffer not in filled or role_of(ctx, r.op) is not None:
            continue
        between: list[Operation] = []
        wait = None
        for d in dominators(ctx, r.op):
            if isinstance(d, ex.CpAsyncWaitOp):
                wait = d
                break
            between.append(d)
        if wait is None or wait in reported or any(isinstance(d, ex.CtaBarrierOp) for d in between):
            continue
        reported.add(wait)
        bname = r.buffer.res.name_hint
        cex = witness(
            ctx,
            {
                "trace": [
                    step(ctx, wait, "each warp waits for its own copies only", buffer=bname),
                    step(ctx, r.op, f"a warp reads {bname} elements another warp's copy may not have written yet"),
                ]
            },
        )
        yield ctx.report(
            wait,
            f"the wait covers this warp's own copies only, and `{_buf_name(r)}`, which every warp fills with its "
            "share of a cp.async, is read below with no barrier() between: the other warps' copies are not yet "
            "visible" + trace_text(cex),
            fixed_hint(ctx, [fx.insert_after(wait, "barrier()")]),
            related=[(r.op, "the read")],
            counterexample=cex,
        )


def _walk_accesses(op: Operation) -> list[Access]:
    return [a for o in op.walk() for a in accesses(o)]


def _top_in(op: Operation, loop: st.ForOp) -> Operation:
    """The op of the loop body that holds `op`."""
    current = op
    while current.parent_op() is not loop:
        parent = current.parent_op()
        if parent is None:
            return op
        current = parent
    return current


def _stages_meet(ctx: Context, loop: st.ForOp, r: Access, w: Access, next_trip: bool) -> bool:
    """Whether the write (of the next trip, or of this one) can hit the stage the read reads."""
    if r.stage is None or w.stage is None:
        return True
    sym = ctx.symbolic
    rv, wv = sym.value(r.stage), sym.value(w.stage)
    if rv.tainted or wv.tainted:
        return True
    k = sym.value(loop.body.block.args[0]).expr
    w_expr = z3.substitute(wv.expr, (k, k + 1)) if next_trip else wv.expr
    return sym.counterexample(rv.expr != w_expr) is not None
