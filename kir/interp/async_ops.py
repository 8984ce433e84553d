"""Handlers of the hardware-explicit ops: shared buffers, mbarriers, CTA barriers, fences,
TMA and cp.async copies, wgmma and their waits.

Asynchronous copies and wgmma do their data movement at issue (so a correct program reads the
same values in every schedule); what makes them asynchronous is the agent each one runs as in
`sync`, whose accesses only count as done at the wait that retires it.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect.types import dtype_of
from kir.dtypes import DTYPES, INDEX
from kir.interp import memory as M
from kir.interp import sync as S
from kir.interp import values as V
from kir.interp.errors import OutOfBounds, fail
from kir.interp.machine import Cta, CtaBarrierWait, MBarrierWait, Strand, as_int, handles
from kir.interp.ops import access_lanes, checked_lanes, smem_flat

# Virtual cycles from issue to completion of the async ops retired by a wait. They only shape
# the schedule (see `machine`), never values: long enough that a producer a few stages ahead
# is already waiting when a consumer releases a stage, as on hardware.
LATENCY = {"wgmma": 256, "cp.async": 256, "tma.store": 256}


def _dt(t) -> V.DType:
    return DTYPES[dtype_of(t)]


# ---- allocation ----------------------------------------------------------------------------


@handles(ex.SmemAllocOp)
def _smem(cta: Cta, op: ex.SmemAllocOp, strand: Strand):
    d = _dt(op.res.type)
    shape = cta.launch.shape(op.res.type)
    buf = S.SmemBuffer(op.res.name_hint or f"smem{len(cta.buffers)}", d, np.full(shape, V.poison(d), dtype=d.numpy))
    cta.buffers.append(buf)
    cta.set(op.res, buf)


@handles(ex.MBarrierAllocOp)
def _mbarrier(cta: Cta, op: ex.MBarrierAllocOp, strand: Strand):
    size = cta.launch.sym(op.res.type.size.data)
    count = cta.launch.sym(op.count.data)
    name = op.res.name_hint or "mbarrier"
    if size < 1 or count < 1:
        fail(
            "interp.bad-mbarrier",
            op,
            f"mbarrier `{name}` needs a size and a count of at least 1, not {size} and {count}",
        )
    cta.set(op.res, S.MBarriers(name, size, count))


@handles(ex.SizeofOp)
def _sizeof(cta: Cta, op: ex.SizeofOp, strand: Strand):
    ln = access_lanes(cta, op.mem.type, op.access.data, op.indices, None)
    cta.set(op.res, V.const(ln.size * _dt(op.mem.type).nbytes, INDEX))


@handles(st.RoleRankOp)
def _role_rank(cta: Cta, op, strand: Strand):
    cta.set(op.res, np.asarray(strand.rank, dtype=INDEX.numpy))


@handles(ex.ConvertLayoutOp)
def _convert_layout(cta: Cta, op: ex.ConvertLayoutOp, strand: Strand):
    cta.set(op.res, cta.get(op.operand))  # layouts place data in threads; values are unchanged


# ---- mbarriers and the CTA barrier ---------------------------------------------------------


def _barrier_ref(cta: Cta, op, strand: Strand) -> tuple[S.MBarriers, int]:
    bars: S.MBarriers = cta.get(op.bar)
    i = as_int(cta.get(op.bar_index))
    if not 0 <= i < bars.size:
        fail(
            "interp.out-of-bounds",
            op,
            f"mbarrier `{bars.name}[{i}]` does not exist: the array has {bars.size}",
            "index the mbarrier array with the stage (e.g. k % S)",
            (),
            {**cta.context(strand), "index": [i], "shape": [bars.size]},
        )
    return bars, i


@handles(ex.ExpectOp)
def _expect(cta: Cta, op: ex.ExpectOp, strand: Strand):
    bars, i = _barrier_ref(cta, op, strand)
    bars.expect(i, as_int(cta.get(op.nbytes)), strand.agent.vc)
    cta.clocks.tick(strand.agent)


@handles(ex.ArriveOp)
def _arrive(cta: Cta, op: ex.ArriveOp, strand: Strand):
    bars, i = _barrier_ref(cta, op, strand)
    bars.arrive(i, op.count.data, strand.agent.vc)
    cta.clocks.tick(strand.agent)


@handles(ex.WaitOp, blocking=True)
def _wait(cta: Cta, op: ex.WaitOp, strand: Strand):
    bars, i = _barrier_ref(cta, op, strand)
    parity = as_int(cta.get(op.parity))
    if parity not in (0, 1):
        fail(
            "interp.bad-parity",
            op,
            f"wait parity is {parity}; it must be 0 or 1",
            "take the phase parity modulo 2",
            (),
            cta.context(strand),
        )
    if bars.ready(i, parity):
        clock = bars.clock[i]
    else:
        blocker = MBarrierWait(op, bars, i, parity)
        yield blocker
        clock = cast(np.ndarray, blocker.clock)  # set when the wait was released
    cta.clocks.acquire(strand.agent, clock)


@handles(ex.CtaBarrierOp, blocking=True)
def _cta_barrier(cta: Cta, op: ex.CtaBarrierOp, strand: Strand):
    yield CtaBarrierWait(op)


@handles(ex.FenceAsyncOp)
def _fence(cta: Cta, op: ex.FenceAsyncOp, strand: Strand):
    S.fence_async(cta.buffers, strand.agent)


# ---- asynchronous copies -------------------------------------------------------------------


def _same_box(op, strand: Strand, cta: Cta, a: tuple, b: tuple) -> None:
    if tuple(a) != tuple(b):
        fail(
            "interp.bad-box",
            op,
            f"the source box {list(a)} and the destination {list(b)} differ",
            "",
            (),
            cta.context(strand),
        )


@handles(ex.TmaLoadOp)
def _tma_load(cta: Cta, op: ex.TmaLoadOp, strand: Strand):
    src, dst = cta.get(op.src), cta.get(op.dst)
    bars, i = _barrier_ref(cta, op, strand)
    d = _dt(op.src.type)
    src_ln = access_lanes(cta, op.src.type, op.src_access.data, op.src_indices, None, op, "src")
    data = M.read(src.data, src_ln, None, d, zero_out_of_bounds=True)  # TMA fills the box edge with zeros
    dst_ln = checked_lanes(
        cta, op, strand, "tma.load into shared buffer", dst, op.dst.type, op.dst_access.data, op.dst_indices, None
    )
    _same_box(op, strand, cta, src_ln.shape, dst_ln.shape)
    agent = cta.clocks.new_agent("tma.load", strand.who(), op, parent=strand.agent)
    S.write_check(cta.clocks, dst, smem_flat(dst_ln), agent, op, lambda: cta.context(strand), -1)
    M.write(dst.data, dst_ln, data)
    bars.complete_tx(i, data.size * d.nbytes, agent.vc)
    cta.clocks.tick(strand.agent)


@handles(ex.TmaStoreOp)
def _tma_store(cta: Cta, op: ex.TmaStoreOp, strand: Strand):
    src, dst = cta.get(op.src), cta.get(op.dst)
    d = _dt(op.src.type)
    src_ln = checked_lanes(
        cta, op, strand, "tma.store from shared buffer", src, op.src.type, op.src_access.data, op.src_indices, None
    )
    dst_ln = access_lanes(cta, op.dst.type, op.dst_access.data, op.dst_indices, None)
    _same_box(op, strand, cta, src_ln.shape, dst_ln.shape)
    agent = cta.clocks.new_agent("tma.store", strand.who(), op, parent=strand.agent)
    S.read_check(
        cta.clocks,
        src,
        smem_flat(src_ln),
        agent,
        op,
        lambda: cta.context(strand),
        cta.report_uninitialized,
        async_proxy=True,
    )
    M.write(dst.data, dst_ln, M.read(src.data, src_ln, None, d), skip_out_of_bounds=True)  # TMA clips the box
    agent.done_at = strand.t + LATENCY["tma.store"]
    strand.tma_stores.append(agent)
    cta.clocks.tick(strand.agent)


@handles(ex.CpAsyncOp)
def _cp_async(cta: Cta, op: ex.CpAsyncOp, strand: Strand):
    src, dst = cta.get(op.src), cta.get(op.dst)
    d = _dt(op.src.type)
    src_ln = access_lanes(cta, op.src.type, op.src_access.data, op.src_indices, op.mask)
    try:
        data = M.read(src.data, src_ln, None, d)  # masked-off elements are written as zero
    except OutOfBounds as err:
        cta.out_of_bounds(op, strand, "cp.async from", src.name, err)
    dst_ln = checked_lanes(
        cta, op, strand, "cp.async into shared buffer", dst, op.dst.type, op.dst_access.data, op.dst_indices, None
    )
    _same_box(op, strand, cta, src_ln.shape, dst_ln.shape)
    agent = cta.clocks.new_agent("cp.async", strand.who(), op, parent=strand.agent)
    # cp.async writes through the generic proxy: an async-proxy reader needs the issuer's fence.
    S.write_check(cta.clocks, dst, smem_flat(dst_ln), agent, op, lambda: cta.context(strand), strand.agent.id)
    M.write(dst.data, dst_ln, data)
    agent.done_at = strand.t + LATENCY["cp.async"]
    strand.cp_open.append(agent)
    cta.clocks.tick(strand.agent)


@handles(ex.CpAsyncCommitOp)
def _cp_commit(cta: Cta, op, strand: Strand):
    strand.cp_groups.append(strand.cp_open)
    strand.cp_open = []


def _keep_newest(items: list, pending: int) -> tuple[list, list]:
    """(retired, still pending): all but the `pending` newest are retired."""
    cut = max(0, len(items) - pending)
    return items[:cut], items[cut:]


def _retire(cta: Cta, strand: Strand, done: list[S.Agent]) -> None:
    """An async wait: the issuer waits (in virtual time) for what it retires, and from now on
    is ordered after its accesses."""
    for a in done:
        strand.t = max(strand.t, a.done_at)
    cta.clocks.retire(strand.agent, done)


@handles(ex.CpAsyncWaitOp)
def _cp_wait(cta: Cta, op, strand: Strand):
    done, strand.cp_groups = _keep_newest(strand.cp_groups, cta.launch.sym(op.pending.data))
    _retire(cta, strand, [a for group in done for a in group])


@handles(ex.TmaStoreWaitOp)
def _tma_store_wait(cta: Cta, op, strand: Strand):
    done, strand.tma_stores = _keep_newest(strand.tma_stores, cta.launch.sym(op.pending.data))
    _retire(cta, strand, done)


# ---- wgmma ---------------------------------------------------------------------------------


@handles(ex.WgmmaOp)
def _wgmma(cta: Cta, op: ex.WgmmaOp, strand: Strand):
    b = cta.get(op.b)
    b_ln = checked_lanes(cta, op, strand, "wgmma operand", b, op.b.type, op.b_access.data, op.b_indices, None, "b")
    agent = cta.clocks.new_agent("wgmma", strand.who(), op, parent=strand.agent)
    ctx = lambda: cta.context(strand)  # noqa: E731
    da = _dt(op.a.type)
    if op.a_in_registers:  # read at issue: nothing in shared memory to check
        av = cta.get(op.a)
    else:
        a = cta.get(op.a)
        a_ln = checked_lanes(cta, op, strand, "wgmma operand", a, op.a.type, op.a_access.data, op.a_indices, None)
        S.read_check(cta.clocks, a, smem_flat(a_ln), agent, op, ctx, cta.report_uninitialized, async_proxy=True)
        av = M.read(a.data, a_ln, None, da)
    S.read_check(cta.clocks, b, smem_flat(b_ln), agent, op, ctx, cta.report_uninitialized, async_proxy=True)
    bv = M.read(b.data, b_ln, None, da)
    # trans(view): the same elements were read (and race-checked) as stored; multiply the transpose
    if op.is_trans_a and av.ndim == 2:
        av = av.T
    if op.is_trans_b and bv.ndim == 2:
        bv = bv.T
    if av.ndim != 2 or bv.ndim != 2 or av.shape[1] != bv.shape[0]:
        fail(
            "interp.bad-box",
            op,
            f"wgmma operands {list(av.shape)} and {list(bv.shape)} do not multiply",
            "",
            (),
            cta.context(strand),
        )
    cta.set(op.res, V.dot(av, bv, cta.get(op.acc), da, _dt(op.acc.type)))
    agent.done_at = strand.t + LATENCY["wgmma"]
    strand.wgmma.append(agent)
    cta.clocks.tick(strand.agent)


@handles(ex.WgmmaWaitOp)
def _wgmma_wait(cta: Cta, op, strand: Strand):
    done, strand.wgmma = _keep_newest(strand.wgmma, cta.launch.sym(op.pending.data))
    _retire(cta, strand, done)
