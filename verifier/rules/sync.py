"""Synchronization: who may touch a shared buffer when.

Static rules first: each looks for one pattern of the producer/consumer protocol (a read
before the wait that guards it, a producer overwriting a stage its readers have not released,
parity that does not follow the stage ring, expected bytes that differ from the bytes copied,
arrival counts that differ from the init count, a CTA barrier in divergent role code). Then a
bounded model check: the reference interpreter runs the kernel's synchronization on a small
instance of its shapes (one program, enough iterations to go round every ring twice) and
reports the races and deadlocks no static rule named, at the op that does them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import z3
from xdsl.ir import Block, Operation, SSAValue

from kir.diagnostics import Diagnostic, KirError, Related, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.traits import BARRIER, allocates, is_async
from kir.dialect.types import MBarrierType, SmemType
from verifier.context import Context, OpInfo
from verifier.registry import rule
from verifier.symbolic import CACHE

# ---- facts about shared-memory traffic ----------------------------------------------------------


@dataclass(frozen=True)
class Access:
    op: Operation
    buffer: ex.SmemAllocOp
    stage: SSAValue | None  # the first index, when the access picks one stage
    write: bool
    kind: str  # "tma", "cp.async", "wgmma", "tma.store", "generic"


def _buffer_of(value: SSAValue) -> ex.SmemAllocOp | None:
    owner = value.owner
    return owner if isinstance(owner, ex.SmemAllocOp) else None


def _stage(access, indices) -> SSAValue | None:
    idx = list(indices)
    return idx[0] if access.dims and access.dims[0] is None and idx else None


def accesses(op: Operation) -> list[Access]:
    out: list[Access] = []

    def add(mem, access, indices, write, kind):
        buf = _buffer_of(mem)
        if buf is not None:
            out.append(Access(op, buf, _stage(access, indices), write, kind))

    if isinstance(op, ex.TmaLoadOp):
        add(op.dst, op.dst_access.data, op.dst_indices, True, "tma")
    elif isinstance(op, ex.CpAsyncOp):
        add(op.dst, op.dst_access.data, op.dst_indices, True, "cp.async")
    elif isinstance(op, ex.WgmmaOp):
        if not op.a_in_registers:
            add(op.a, op.a_access.data, op.a_indices, False, "wgmma")
        add(op.b, op.b_access.data, op.b_indices, False, "wgmma")
    elif isinstance(op, ex.TmaStoreOp):
        add(op.src, op.src_access.data, op.src_indices, False, "tma.store")
    elif isinstance(op, tl.LoadOp) and isinstance(op.mem.type, SmemType):
        add(op.mem, op.access.data, op.indices, False, "generic")
    elif isinstance(op, tl.StoreOp) and isinstance(op.mem.type, SmemType):
        add(op.mem, op.access.data, op.indices, True, "generic")
    return out


def dominators(ctx: Context, op: Operation) -> Iterator[Operation]:
    """Ops that run before `op` in every execution of its role instance, nearest first: the
    earlier ops of its block, then of each enclosing block, up to the role (or kernel) body."""
    current = op
    while True:
        block = current.parent_block()
        if block is None:
            return
        prev = current.prev_op
        while prev is not None:
            yield prev
            prev = prev.prev_op
        parent = block.parent_op()
        if parent is None or isinstance(parent, st.KernelOp):
            return
        if isinstance(parent, st.RoleOp):
            # the kernel's top-level code before the role runs first, as the whole CTA
            current = parent
            continue
        current = parent


def between(start: Operation, end: Operation) -> Iterator[Operation]:
    """Ops after `start` and before `end` in one block (both in the same block)."""
    op = start.next_op
    while op is not None and op is not end:
        yield op
        op = op.next_op


def role_of(ctx: Context, op: Operation) -> st.RoleOp | None:
    return ctx.info_of[op].role


def _same_index(ctx: Context, a: SSAValue | None, b: SSAValue | None) -> bool:
    if a is None or b is None:
        return True
    return ctx.same_value(a, b)


def _bar_name(ctx: Context, bar: SSAValue, index: SSAValue | None = None) -> str:
    name = bar.name_hint or "barrier"
    return f"{name}[{index.name_hint}]" if index is not None and index.name_hint else name


def _buf_name(acc: Access) -> str:
    name = acc.buffer.res.name_hint or "buffer"
    return f"{name}[{acc.stage.name_hint}]" if acc.stage is not None and acc.stage.name_hint else name


def all_accesses(ctx: Context) -> list[Access]:
    if "_sync_accesses" not in ctx.__dict__:
        ctx.__dict__["_sync_accesses"] = [a for info in ctx.infos for a in accesses(info.op)]
    return ctx.__dict__["_sync_accesses"]


# ---- rules ------------------------------------------------------------------------------------

_GEMM_HEAD = """\
kernel k<BM = 64, BN = 64, BK = 64, S = 2>(a: global bf16[M, K] align(16), b: global bf16[K, N] align(16), c: out global bf16[M, N] align(16))
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(2)
{
  as = smem(bf16[S, BM, BK], swizzle = 128)
  bs = smem(bf16[S, BK, BN], swizzle = 128)
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  role load warpgroups(0) regs(40) {
    for k in 0 .. K / BK {
      s = k % S
      wait(empty[s], parity = (k / S + 1) % 2)
      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))
      tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])
      tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[s], signal = full[s])
    }
  }
  role mma warpgroups(1) regs(232) {
    acc = zeros(f32[BM, BN])
    for k in 0 .. K / BK {
      s = k % S
"""
_GEMM_TAIL = """\
      acc = wgmma(as[s], bs[s], acc)
      wgmma.wait(0)
      arrive(empty[s])
    }
    store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))
  }
}
"""
_GOOD_GEMM = _GEMM_HEAD + "      wait(full[s], parity = (k / S) % 2)\n" + _GEMM_TAIL


def _gemm(consumer_wait: str = "      wait(full[s], parity = (k / S) % 2)\n", **edits: str) -> str:
    text = _GEMM_HEAD + consumer_wait + _GEMM_TAIL
    for old, new in edits.items():
        old_text = {
            "producer_wait": "      wait(empty[s], parity = (k / S + 1) % 2)\n",
            "expect": "      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))\n",
            "empty_init": "  empty = mbarrier(S, count = 1)\n",
            "wgmma_wait": "      wgmma.wait(0)\n",
        }[old]
        assert old_text in text
        text = text.replace(old_text, new)
    return text


@rule(
    "sync.read-before-wait",
    family="sync",
    severity="error",
    summary="a shared buffer filled asynchronously is read before the wait that guards it",
    explanation="""
A `tma.load` (or `cp.async`) writes its destination asynchronously: the data is there only once
the mbarrier it signals has completed the phase (or `cp.async.wait` has retired the group).
A read of that buffer (wgmma operand, load, tma.store source) must come after a `wait` on that
mbarrier, for the same stage, in the reading role; otherwise it reads whatever the buffer held
before, or a half-written tile.""",
    bad=_gemm(consumer_wait="").replace(
        "      acc = wgmma(as[s], bs[s], acc)\n", "      acc = wgmma(as[s], bs[s], acc)  # <-\n"
    ),
    good=_GOOD_GEMM,
)
def read_before_wait(ctx: Context) -> Iterator[Diagnostic]:
    writers = [a for a in all_accesses(ctx) if a.write and a.kind in ("tma", "cp.async")]
    for acc in all_accesses(ctx):
        if acc.write:
            continue
        fills = [w for w in writers if w.buffer is acc.buffer]
        if not fills:
            continue
        doms = list(dominators(ctx, acc.op))
        for w in fills:
            if w.kind == "tma":
                tma = cast(ex.TmaLoadOp, w.op)  # the kind of a TMA load's write
                bar, bar_index = tma.bar, tma.bar_index
                ok = any(
                    isinstance(d, ex.WaitOp)
                    and d.bar is bar
                    and _same_index(ctx, d.bar_index, acc.stage if acc.stage is not None else None)
                    for d in doms
                )
                if ok:
                    continue
                yield ctx.report(
                    acc.op,
                    f"{acc.op.name.removeprefix('kir.')} reads `{_buf_name(acc)}`, which the tma.load filling it "
                    f"completes on `{_bar_name(ctx, bar, bar_index)}`, but no wait on `{bar.name_hint}` for this "
                    "stage comes before it",
                    f"wait({bar.name_hint}[{(acc.stage.name_hint if acc.stage is not None and acc.stage.name_hint else 's')}], "
                    "parity = ...) before reading the buffer",
                    related=[(w.op, "the asynchronous copy that fills it")],
                )
                break
            if w.kind == "cp.async" and role_of(ctx, w.op) is role_of(ctx, acc.op):
                if any(isinstance(d, ex.CpAsyncWaitOp) for d in doms):
                    continue
                yield ctx.report(
                    acc.op,
                    f"reads `{_buf_name(acc)}`, which a cp.async fills, before any cp.async.wait",
                    "cp.async.commit() after the copies, then cp.async.wait(n) before reading",
                    related=[(w.op, "the copy")],
                )
                break


def _releases(ctx: Context, reader_role: st.RoleOp | None, buffer: Operation) -> list[ex.ArriveOp]:
    """Arrives in a role that come after its reads of `buffer`: in the same block chain, or
    later in a loop that also holds the read (the arrive of trip j + 1 releasing what trip j
    read)."""
    reads = [
        a.op for a in all_accesses(ctx) if a.buffer is buffer and not a.write and role_of(ctx, a.op) is reader_role
    ]
    out = []
    for info in ctx.ops(ex.ArriveOp):
        if info.role is not reader_role:
            continue
        doms = list(dominators(ctx, info.op))
        if any(a.buffer is buffer and not a.write for d in doms for a in accesses(d)) or any(
            loop in ctx.info_of[r].loops for loop in info.loops for r in reads
        ):
            out.append(info.op)
    return out


@rule(
    "sync.overwrite-before-release",
    family="sync",
    severity="error",
    summary="a producer refills a shared stage without waiting for its readers to release it",
    explanation="""
In a ring of shared stages, the producer may only write stage s again once every reader of
the previous round has finished with it. Readers say so by arriving on a release mbarrier
(`arrive(empty[s])`); the producer must `wait` on that mbarrier before it issues the copy into
the stage. Without the wait, a fast producer overwrites operands a wgmma is still reading.""",
    bad=_gemm(producer_wait="").replace(
        "      tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])\n",
        "      tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])  # <-\n",
    ),
    good=_GOOD_GEMM,
)
def overwrite_before_release(ctx: Context) -> Iterator[Diagnostic]:
    reported: set[Operation] = set()
    for w in all_accesses(ctx):
        if not w.write or w.kind not in ("tma", "cp.async", "generic") or w.op in reported:
            continue
        writer_role = role_of(ctx, w.op)
        if writer_role is None or not ctx.info_of[w.op].loops:
            continue  # a write that happens once cannot overwrite an earlier round
        reader_roles = {role_of(ctx, r.op) for r in all_accesses(ctx) if r.buffer is w.buffer and not r.write}
        reader_roles.discard(writer_role)
        if not reader_roles:
            continue
        doms = list(dominators(ctx, w.op))
        for role in reader_roles:
            releases = _releases(ctx, role, w.buffer)
            bars = {r.bar for r in releases}
            if any(isinstance(d, ex.WaitOp) and d.bar in bars for d in doms) or any(
                isinstance(d, ex.CtaBarrierOp) for d in doms
            ):
                continue
            reported.add(w.op)
            rname = role.name_text if role is not None else "the CTA"
            if not releases:
                hint = f"have role `{rname}` arrive on a release mbarrier after its reads, and wait on it here"
            else:
                r = releases[0]
                hint = f"wait({_bar_name(ctx, r.bar, r.bar_index)}, parity = ...) before this copy"
            yield ctx.report(
                w.op,
                f"writes `{_buf_name(w)}` while role `{rname}` may still read it: nothing here waits for "
                f"`{rname}` to release the stage",
                hint,
                related=[
                    (r.op, "the read it may overwrite")
                    for r in all_accesses(ctx)
                    if r.buffer is w.buffer and not r.write and role_of(ctx, r.op) is role
                ][:1],
            )
            break


@rule(
    "sync.arrive-before-retire",
    family="sync",
    severity="error",
    summary="a stage is released while a wgmma may still be reading it",
    explanation="""
`wgmma` reads its shared operands asynchronously until `wgmma.wait(n)` retires it. Arriving on
the release mbarrier of a stage right after issuing the wgmma lets the producer overwrite the
operands mid-multiply. Retire the wgmma (`wgmma.wait(0)`, or `wgmma.wait(1)` and release the
previous stage) before the arrive.""",
    bad=_gemm(wgmma_wait="").replace("      arrive(empty[s])\n", "      arrive(empty[s])  # <-\n"),
    good=_GOOD_GEMM,
)
def arrive_before_retire(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(ex.ArriveOp):
        arrive = info.op
        in_flight: list[ex.WgmmaOp] = []
        for op in cast(Block, arrive.parent_block()).ops:
            if op is arrive:
                break
            if isinstance(op, ex.WgmmaOp):
                in_flight.append(op)
            elif isinstance(op, ex.WgmmaWaitOp):
                n = op.pending.data
                in_flight = in_flight[len(in_flight) - n :] if n else []
        for wg in in_flight:
            reads = [a for a in accesses(wg) if _guards_writes(ctx, arrive.bar, a.buffer)]
            if arrive_stage_matches(ctx, arrive, [a.stage for a in reads]):
                yield ctx.report(
                    arrive,
                    f"arrive on `{_bar_name(ctx, arrive.bar, arrive.bar_index)}` releases the stage while the wgmma "
                    "reading it has not been retired",
                    "wgmma.wait(0) before this arrive",
                    related=[(wg, "the wgmma still reading the stage")],
                )
                break


def _guards_writes(ctx: Context, bar: SSAValue, buffer: Operation) -> bool:
    """Some write of `buffer` waits on `bar` first: an arrive on `bar` releases the buffer (an
    mbarrier that only orders the consumers among themselves releases nothing)."""
    return any(
        a.write and a.buffer is buffer and any(isinstance(d, ex.WaitOp) and d.bar is bar for d in dominators(ctx, a.op))
        for a in all_accesses(ctx)
    )


def arrive_stage_matches(ctx: Context, arrive: ex.ArriveOp, stages: list[SSAValue | None]) -> bool:
    return any(s is None or ctx.same_value(s, arrive.bar_index) for s in stages)


def _ring(ctx: Context, wait: ex.WaitOp):
    """(loop, loop variable, ring size) when the wait's barrier index is `k % n` over the
    innermost loop `for k in 0 .. _` and the barrier array has n entries."""
    info = ctx.info_of[wait]
    if not info.loops:
        return None
    loop = info.loops[-1]
    iv = loop.body.block.args[0]
    size = ctx.static(cast(MBarrierType, wait.bar.type).size.data)
    if size is None:
        return None
    sym = ctx.symbolic
    lo = sym.value(loop.lower)
    step = sym.value(loop.step)
    if lo.tainted or not (z3.is_int_value(lo.expr) and lo.expr.as_long() == 0):
        return None
    if not (z3.is_int_value(step.expr) and step.expr.as_long() == 1):
        return None
    k = sym.value(iv).expr
    idx = sym.value(wait.bar_index)
    if idx.tainted or sym.counterexample(idx.expr == k % size) is not None:
        return None
    return loop, k, size


def _after_in_loop(wait: Operation) -> list[Operation]:
    out = []
    op = wait.next_op
    while op is not None:
        out.append(op)
        out.extend(o for o in op.walk() if o is not op)
        op = op.next_op
    return out


@rule(
    "sync.parity",
    family="sync",
    severity="error",
    summary="a wait's parity does not follow the stage ring",
    explanation="""
With S stages indexed `s = k % S`, stage s completes one mbarrier phase per round r = k / S.
A reader of a filled stage waits for that round's phase: `parity = (k / S) % 2`. A producer
waiting for the readers' release needs the previous round's phase: `parity = (k / S + 1) % 2`,
which the first round finds already complete (the phase before phase 0 counts as parity 1).
Any other parity waits for the wrong round: it either passes before the data is there or never
passes.""",
    bad=_gemm(consumer_wait="      wait(full[s], parity = (k / S + 1) % 2)  # <-\n"),
    good=_GOOD_GEMM,
)
def parity(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(ex.WaitOp):
        wait = info.op
        ring = _ring(ctx, wait)
        if ring is None:
            continue
        loop, k, size = ring
        later = _after_in_loop(wait)
        writes = any(a.write for o in later for a in accesses(o))
        reads = any(not a.write for o in later for a in accesses(o))
        if writes and not reads:
            expected, text, kind = (k / size + 1) % 2, "(k / S + 1) % 2", "producer"
        elif reads:
            expected, text, kind = (k / size) % 2, "(k / S) % 2", "reader"
        else:
            continue
        sym = ctx.symbolic
        p = sym.value(wait.parity)
        if p.tainted:
            continue
        cex = sym.counterexample(p.expr == expected)
        if cex is None:
            continue
        iv_name = loop.body.block.args[0].name_hint or "k"
        at = cex.get(iv_name, cex.get(str(k)))
        ring_name = "S" if "S" in ctx.params else str(size)
        yield ctx.report(
            wait,
            f"the {kind} waits on `{wait.bar.name_hint}` with a parity that does not follow the {size}-stage ring"
            + (f": at {iv_name} = {at} it waits for the wrong phase" if at is not None else ""),
            f"parity = {text.replace('k', iv_name).replace('S', ring_name)}",
            counterexample=cex,
        )


def _static_bytes(ctx: Context, v: SSAValue) -> int | None:
    op = v.owner
    if isinstance(op, tl.ConstOp):
        n = op.number
        return int(n) if not isinstance(n, bool) else None
    if isinstance(op, tl.SymValueOp):
        return ctx.params.get(op.symbol.data)
    if isinstance(op, ex.SizeofOp):
        return ctx.access_bytes(op.mem.type, op.access.data)
    if isinstance(op, tl.BinaryOp) and op.fn.data in ("add", "sub", "mul", "div"):
        a, b = _static_bytes(ctx, op.lhs), _static_bytes(ctx, op.rhs)
        if a is None or b is None:
            return None
        return {"add": a + b, "sub": a - b, "mul": a * b, "div": a // b if b else None}[op.fn.data]
    return None


@rule(
    "sync.expect-bytes",
    family="sync",
    severity="error",
    summary="the bytes an expect announces differ from the bytes the copies deliver",
    explanation="""
`expect(bar[i], bytes = n)` tells the mbarrier how many bytes of TMA traffic complete the
phase. If n is larger than what the tma.loads signalling that barrier deliver, the phase never
completes (deadlock); if smaller, it completes before the last copy lands and the reader sees a
partial tile (race). Announce exactly the sum of the boxes: `sizeof(as[s]) + sizeof(bs[s])`.""",
    bad=_gemm(expect="      expect(full[s], bytes = sizeof(as[s]))  # <-\n"),
    good=_GOOD_GEMM,
)
def expect_bytes(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(ex.ExpectOp):
        exp = info.op
        announced = _static_bytes(ctx, exp.nbytes)
        if announced is None:
            continue
        block = cast(Block, exp.parent_block())
        copies = [
            o
            for o in block.ops
            if isinstance(o, ex.TmaLoadOp) and o.bar is exp.bar and ctx.same_value(o.bar_index, exp.bar_index)
        ]
        if not copies:
            continue
        sizes = [ctx.access_bytes(c.dst.type, c.dst_access.data) for c in copies]
        known = [s for s in sizes if s is not None]
        if len(known) != len(sizes):
            continue
        delivered = sum(known)
        if delivered == announced:
            continue
        parts = " + ".join(f"sizeof({c.dst.name_hint}[...]) = {s}" for c, s in zip(copies, sizes, strict=True))
        effect = (
            "the phase completes before the last copy lands" if announced < delivered else "the phase never completes"
        )
        names = " + ".join(f"sizeof({c.dst.name_hint}[{c.bar_index.name_hint or 's'}])" for c in copies)
        yield ctx.report(
            exp,
            f"expect announces {announced} bytes but the tma.loads signalling `{_bar_name(ctx, exp.bar, exp.bar_index)}` "
            f"here deliver {delivered} ({parts}): {effect}",
            f"bytes = {names}",
            related=[(c, "a copy completing on this barrier") for c in copies],
        )


@rule(
    "sync.arrive-count",
    family="sync",
    severity="error",
    summary="an mbarrier's init count differs from the arrivals each phase receives",
    explanation="""
An mbarrier phase completes when its pending arrival count reaches zero; the count is set at
allocation (`mbarrier(S, count = c)`). Every `arrive` counts its `count` (1 by default) once per
unit of its role (a role over warpgroups(1, 2) arrives twice), and every `expect` counts one.
If fewer arrivals come than the count, the phase never completes (deadlock); if more, phases
complete early and a producer overwrites a stage another reader still uses (race).""",
    bad=_GOOD_GEMM.replace("  role mma warpgroups(1) regs(232) {", "  role mma warpgroups(1, 2) regs(232) {")
    .replace("warpgroups(2)\n{", "warpgroups(3)\n{")
    .replace("kernel k<BM = 64,", "kernel k<BM = 128,")
    .replace("  empty = mbarrier(S, count = 1)\n", "  empty = mbarrier(S, count = 1)  # <-\n")
    .replace("acc = zeros(f32[BM, BN])", "r0 = role_rank() * (BM / 2)\n    acc = zeros(f32[BM / 2, BN])")
    .replace("acc = wgmma(as[s], bs[s], acc)", "acc = wgmma(as[s, r0 : r0 + BM / 2], bs[s], acc)")
    .replace(
        "store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))",
        "store(c[m0 + r0 : m0 + r0 + BM / 2, n0 : n0 + BN], cast<bf16>(acc))",
    ),
    good=_GOOD_GEMM.replace("  role mma warpgroups(1) regs(232) {", "  role mma warpgroups(1, 2) regs(232) {")
    .replace("warpgroups(2)\n{", "warpgroups(3)\n{")
    .replace("kernel k<BM = 64,", "kernel k<BM = 128,")
    .replace("  empty = mbarrier(S, count = 1)\n", "  empty = mbarrier(S, count = 2)\n")
    .replace("acc = zeros(f32[BM, BN])", "r0 = role_rank() * (BM / 2)\n    acc = zeros(f32[BM / 2, BN])")
    .replace("acc = wgmma(as[s], bs[s], acc)", "acc = wgmma(as[s, r0 : r0 + BM / 2], bs[s], acc)")
    .replace(
        "store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))",
        "store(c[m0 + r0 : m0 + r0 + BM / 2, n0 : n0 + BN], cast<bf16>(acc))",
    ),
)
def arrive_count(ctx: Context) -> Iterator[Diagnostic]:
    for alloc_info in ctx.ops(ex.MBarrierAllocOp):
        alloc = alloc_info.op
        count = ctx.static(alloc.count.data)
        if count is None:
            continue
        users = [i for i in ctx.infos if isinstance(i.op, ex.ArriveOp | ex.ExpectOp) and i.op.bar is alloc.res]
        if not users:
            continue
        # Arrivals per phase: each arrive op runs once per iteration of its loop for the stage
        # it indexes, on every unit of its role. Only the usual ring shape is counted: all
        # arrivals inside a loop that indexes the barrier, or all outside loops.
        looped = {bool(i.loops) for i in users}
        if len(looped) != 1:
            continue
        if any(i.in_if for i in users):
            continue
        per_phase = 0
        for i in users:
            n = i.op.count.data if isinstance(i.op, ex.ArriveOp) else 1
            per_phase += n * ctx.units(i.role)
        if per_phase == count:
            continue
        detail = "; ".join(
            f"{i.op.name.removeprefix('kir.')} in role `{i.role.name_text if i.role else 'CTA'}` x {ctx.units(i.role)} unit(s)"
            for i in users
        )
        effect = (
            "phases complete early, so a stage is released before all its readers are done"
            if per_phase > count
            else "the phase never completes"
        )
        yield ctx.report(
            alloc,
            f"`{alloc.res.name_hint}` expects {count} arrival(s) per phase but receives {per_phase} ({detail}): {effect}",
            f"count = {per_phase}",
            related=[(i.op, "an arrival") for i in users],
        )


@rule(
    "sync.barrier-divergent",
    family="sync",
    severity="error",
    summary="a CTA barrier that not every thread reaches as many times",
    explanation="""
`barrier()` waits until every thread of the CTA has arrived, wherever in the code each thread
arrives: the hardware counts arrivals (`bar.sync 0` on NVIDIA, `s_barrier` on AMD), not
program points. Roles may each call `barrier()` as long as every role reaches it the same
number of times (a role's calls, times the trips of the loops around them inside the role): the
k-th arrival of each role then meets the k-th of the others. A role that reaches it more often
than another waits for arrivals that never come, and the CTA deadlocks. So does a `barrier()`
under an `if` that some threads skip. Synchronize roles with mbarriers where their counts
differ.""",
    bad="""\
kernel k<B = 128>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target sm_90 grid(N / B) warps(8)
{
  buf = smem(f32[B])
  i = program_id(0) * B + arange(0, B)
  role producer warps(0, 1, 2, 3) {
    store(buf[0 : B], load(x[i]))
    barrier()  # <-
  }
  role consumer warps(4, 5, 6, 7) {
    store(y[i], load(buf[0 : B]))
  }
}
""",
    good="""\
kernel k<B = 128>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target sm_90 grid(N / B) warps(2)
{
  buf = smem(f32[B])
  i = program_id(0) * B + arange(0, B)
  role producer warps(0) {
    store(buf[0 : B], load(x[i]))
    barrier()
  }
  role consumer warps(1) {
    barrier()
    store(y[i], load(buf[0 : B]))
  }
}
""",
)
def barrier_divergent(ctx: Context) -> Iterator[Diagnostic]:
    by_role: dict[st.RoleOp, list[OpInfo]] = {}
    for info in ctx.ops(ex.CtaBarrierOp):
        if info.in_if:
            yield ctx.report(
                info.op,
                "barrier() under an if: threads that skip the branch never reach it",
                "move the barrier out of the conditional",
            )
        elif info.role is not None:
            by_role.setdefault(info.role, []).append(info)
    if not by_role:
        return
    roles = [op for op in ctx.kernel.walk() if isinstance(op, st.RoleOp)]
    counts = {role: _barrier_count(by_role.get(role, [])) for role in roles}
    if len(set(counts.values())) <= 1:
        return  # every role arrives as many times: the k-th arrivals meet
    fewest = min(counts.values(), key=_count_order)
    for role, infos in by_role.items():
        if counts[role] == fewest:
            continue
        others = ", ".join(
            f"`{r.name_text}` {_count_text(c)}" for r, c in counts.items() if r is not role and c != counts[role]
        )
        yield ctx.report(
            infos[0].op,
            f"role `{role.name_text}` reaches barrier() {_count_text(counts[role])}, but {others}: its extra "
            "arrivals wait for threads that never come",
            "call barrier() as many times in every role, or order the roles with mbarriers (arrive / wait)",
            related=[(role, "the role")] + [(r, "a role with fewer") for r, c in counts.items() if c == fewest],
        )


def _barrier_count(infos: list[OpInfo]) -> tuple[tuple[Any, int], ...]:
    """How many times a role reaches barrier(): per nest of loops inside the role (a loop by its
    bounds: constants and shape symbols by value, other values by identity), how many calls sit
    in it; with constant bounds, the trips multiplied out into one number."""
    found: dict[Any, int] = {}
    for info in infos:
        inside = tuple(loop for loop in info.loops if info.role is not None and info.role.is_ancestor(loop))
        trips = 1
        keys = []
        for loop in inside:
            n = _const_trips(loop)
            if n is None:
                keys.append(tuple(_value_key(v) for v in (loop.lower, loop.upper, loop.step)))
            else:
                trips *= n
        key = tuple(keys)
        found[key] = found.get(key, 0) + trips
    return tuple(sorted(((k, v) for k, v in found.items() if v), key=repr))


def _value_key(value: SSAValue, depth: int = 0) -> Any:
    owner = value.owner
    if isinstance(owner, tl.ConstOp):
        return ("const", owner.value.data)
    if isinstance(owner, tl.SymValueOp):
        return ("symbol", owner.symbol.data)
    if isinstance(owner, Operation) and depth < 6 and isinstance(owner, tl.BinaryOp | tl.UnaryOp):
        return (owner.name, getattr(getattr(owner, "fn", None), "data", None),
                tuple(_value_key(v, depth + 1) for v in owner.operands))  # fmt: skip
    return ("value", id(value))


def _const_trips(loop: st.ForOp) -> int | None:
    bounds = []
    for v in (loop.lower, loop.upper, loop.step):
        owner = v.owner
        if not isinstance(owner, tl.ConstOp):
            return None
        try:
            bounds.append(int(owner.value.data))
        except ValueError:
            return None
    lo, hi, step = bounds
    return max(0, -(-(hi - lo) // step)) if step > 0 else None


def _count_order(count: tuple[tuple[Any, int], ...]) -> tuple[int, int]:
    """Fewest first: a count that loops with run-time bounds set is taken as the larger."""
    return (sum(1 for key, _ in count if key != ()), sum(n for _, n in count))


def _count_text(count: tuple[tuple[Any, int], ...]) -> str:
    if not count:
        return "never"
    if len(count) == 1 and count[0][0] == ():
        n = count[0][1]
        return "once" if n == 1 else f"{n} times"
    return "a number of times set by its loops"


@rule(
    "sync.missing-fence",
    family="sync",
    severity="error",
    summary="shared memory written by stores is read by the async proxy without fence.async",
    explanation="""
Plain stores to shared memory go through the generic proxy; wgmma and tma.store read through
the async proxy, which does not see those writes until the writing threads execute
`fence.async()` (`fence.proxy.async.shared::cta`). Store, fence, then issue the async read.""",
    bad="""\
kernel k<BM = 64, BN = 64>(c: out global f32[M, N] align(16))
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(1)
{
  cs = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(cs[0 : BM], zeros(f32[BM, BN]))
  tma.store(cs[0 : BM], c[m0 : m0 + BM, n0 : n0 + BN])  # <-
  tma.store_wait(0)
}
""",
    good="""\
kernel k<BM = 64, BN = 64>(c: out global f32[M, N] align(16))
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(1)
{
  cs = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(cs[0 : BM], zeros(f32[BM, BN]))
  fence.async()
  tma.store(cs[0 : BM], c[m0 : m0 + BM, n0 : n0 + BN])
  tma.store_wait(0)
}
""",
)
def missing_fence(ctx: Context) -> Iterator[Diagnostic]:
    for r in all_accesses(ctx):
        if r.write or r.kind not in ("wgmma", "tma.store"):
            continue
        for d in dominators(ctx, r.op):
            if isinstance(d, ex.FenceAsyncOp):
                break
            hit = [a for a in accesses(d) if a.write and a.kind == "generic" and a.buffer is r.buffer]
            if hit:
                yield ctx.report(
                    r.op,
                    f"{r.op.name.removeprefix('kir.')} reads `{_buf_name(r)}` through the async proxy after plain "
                    "stores with no fence.async() between",
                    "fence.async() after the stores",
                    related=[(d, "the store")],
                )
                break


# ---- bounded model check ------------------------------------------------------------------------

_MODEL_RULES = {"interp.race": "sync.race", "interp.deadlock": "sync.deadlock"}


def _static_findings(ctx: Context) -> bool:
    """Whether a static sync rule already explains a problem (then the model check, which would
    report its consequence elsewhere, stays quiet)."""
    if "_sync_static" not in ctx.__dict__:
        checks = (
            read_before_wait,
            overwrite_before_release,
            arrive_before_retire,
            parity,
            expect_bytes,
            arrive_count,
            barrier_divergent,
            missing_fence,
        )
        ctx.__dict__["_sync_static"] = any(any(True for _ in fn(ctx)) for fn in checks)
    return ctx.__dict__["_sync_static"]


def _uses_sync(ctx: Context) -> bool:
    # async ops, mbarriers, warp roles and CTA barriers: what the model check has something to find in
    return any(
        is_async(i.op) or allocates(i.op) == BARRIER or isinstance(i.op, st.RoleOp | ex.CtaBarrierOp) for i in ctx.infos
    )


def model_check(ctx: Context) -> list[Diagnostic]:
    """Run the kernel's first program on a small instance with the reference interpreter and
    return its synchronization findings (cached per context)."""
    if "_sync_model" in ctx.__dict__:
        return ctx.__dict__["_sync_model"]
    result: list[Diagnostic] = []
    ctx.__dict__["_sync_model"] = result
    if not _uses_sync(ctx) or _static_findings(ctx):
        return result
    key = _model_key(ctx)
    if key is not None:
        hit, cached = CACHE.get(key)
        if hit and isinstance(cached, list):
            result.extend(_diagnostic_from_json(d) for d in cached)
            return result
    _run_model(ctx, result)
    if key is not None:
        CACHE.put(key, [d.to_json() for d in result])
    return result


def _model_key(ctx: Context) -> str | None:
    """The model check's answer depends on the exact text (spans), the target and parameters."""
    if ctx.program.source is None:
        return None
    blob = "\0".join([ctx.program.source, ctx.file, ctx.target, repr(sorted(ctx.params.items()))])
    return "model-check:" + hashlib.sha256(blob.encode()).hexdigest()


def _diagnostic_from_json(j: dict) -> Diagnostic:
    def span(d):
        return Span(d["line"], d["col"], d["end_line"], d["end_col"], d["file"]) if d.get("line") else None

    return Diagnostic(
        j["rule"],
        j["severity"],
        span(j),
        j["message"],
        j["hint"],
        tuple(Related(span(r), r["label"]) for r in j.get("related", [])),
        j.get("counterexample"),
    )


def _run_model(ctx: Context, result: list[Diagnostic]) -> None:
    # numpy and the interpreter are loaded only for a kernel whose synchronization is run
    from verifier.instance import small_instance

    inst = small_instance(ctx)
    if inst is None:
        return
    inputs, shapes = inst
    from kir.interp import run

    try:
        run(ctx.program, inputs, ctx.params, grid_limit=1, time_limit=5.0)
    except KirError as err:
        for d in err.diagnostics:
            rid = _MODEL_RULES.get(d.rule)
            if rid is None:
                continue
            shown = ", ".join(f"{k} = {v}" for k, v in shapes.items())
            result.append(
                Diagnostic(
                    rid,
                    "error",
                    d.span,
                    f"{d.message} (found by running one program with {shown})",
                    d.hint,
                    d.related,
                    {**shapes, **(d.counterexample or {})},
                )
            )


def _model_rule(rule_id: str):
    def check(ctx: Context) -> Iterator[Diagnostic]:
        yield from (d for d in model_check(ctx) if d.rule == rule_id)

    return check


rule(
    "sync.deadlock",
    family="sync",
    severity="error",
    summary="roles wait on each other forever (found by running a small instance)",
    explanation="""
The verifier runs the kernel's synchronization on a small instance of its shapes (one program,
enough iterations to go round each stage ring twice) with the reference interpreter's mbarrier
and CTA-barrier semantics. When every role is blocked, it reports the wait each one is stuck
on, with the barrier's phase, pending arrivals and outstanding bytes.""",
    bad="""\
kernel k<B = 64>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target sm_90 grid(N / B) warps(2)
{
  buf = smem(f32[B])
  ready = mbarrier(1, count = 1)
  done = mbarrier(1, count = 1)
  i = program_id(0) * B + arange(0, B)
  role producer warps(0) {
    wait(done[0], parity = 0)  # <-
    store(buf[0 : B], load(x[i]))
    arrive(ready[0])
  }
  role consumer warps(1) {
    wait(ready[0], parity = 0)
    store(y[i], load(buf[0 : B]))
    arrive(done[0])
  }
}
""",
    good="""\
kernel k<B = 64>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target sm_90 grid(N / B) warps(2)
{
  buf = smem(f32[B])
  ready = mbarrier(1, count = 1)
  done = mbarrier(1, count = 1)
  i = program_id(0) * B + arange(0, B)
  role producer warps(0) {
    store(buf[0 : B], load(x[i]))
    arrive(ready[0])
  }
  role consumer warps(1) {
    wait(ready[0], parity = 0)
    store(y[i], load(buf[0 : B]))
    arrive(done[0])
  }
}
""",
)(_model_rule("sync.deadlock"))

rule(
    "sync.race",
    family="sync",
    severity="error",
    summary="two roles touch a shared element with nothing ordering them (found by running a small instance)",
    explanation="""
The verifier runs the kernel on a small instance with the reference interpreter, which tracks
happens-before with vector clocks: mbarrier phases, waits, CTA barriers and async waits order
accesses, nothing else does. A read and a write (or two writes) of one shared element by
different roles or asynchronous units that no such edge orders is a race, reported at the
second access with the first as a related span.""",
    bad="""\
kernel k<B = 64>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target sm_90 grid(N / B) warps(2)
{
  buf = smem(f32[B])
  ready = mbarrier(1, count = 1)
  i = program_id(0) * B + arange(0, B)
  role producer warps(0) {
    arrive(ready[0])
    store(buf[0 : B], load(x[i]))
  }
  role consumer warps(1) {
    wait(ready[0], parity = 0)
    store(y[i], load(buf[0 : B]))  # <-
  }
}
""",
    good="""\
kernel k<B = 64>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target sm_90 grid(N / B) warps(2)
{
  buf = smem(f32[B])
  ready = mbarrier(1, count = 1)
  i = program_id(0) * B + arange(0, B)
  role producer warps(0) {
    store(buf[0 : B], load(x[i]))
    arrive(ready[0])
  }
  role consumer warps(1) {
    wait(ready[0], parity = 0)
    store(y[i], load(buf[0 : B]))
  }
}
""",
)(_model_rule("sync.race"))
