"""The synchronization trace of one CTA: the last few synchronization events (waits, arrivals,
copies, shared-memory accesses, barriers), kept only when a run asks for it
(`run(..., trace=True)`).

A race or a deadlock is the end of an interleaving; the events that led to it are what a reader
needs to see how it happens. Each event is a small JSON value: the role instance, its loop
iteration, the source line, the op, and where it applies the barrier (with the phase it is in
after the event) and the buffer stage.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from kir.dialect import explicit as ex
from kir.dialect import tile as tl
from kir.interp import sync as S
from kir.interp.errors import span_of

if TYPE_CHECKING:
    from kir.interp.machine import Cta, Strand

LENGTH = 64  # events kept; a counterexample shows the last ones that concern the failure

TRACED: tuple[type, ...] = (
    ex.WaitOp,
    ex.ArriveOp,
    ex.ExpectOp,
    ex.TmaLoadOp,
    ex.TmaStoreOp,
    ex.CpAsyncOp,
    ex.CpAsyncCommitOp,
    ex.CpAsyncWaitOp,
    ex.WgmmaOp,
    ex.WgmmaWaitOp,
    ex.TmaStoreWaitOp,
    ex.CtaBarrierOp,
    ex.FenceAsyncOp,
    tl.LoadOp,
    tl.StoreOp,
)


_SURFACE = {
    "kir.cp_async_wait": "cp.async.wait",
    "kir.wgmma_wait": "wgmma.wait",
    "kir.tma_store_wait": "tma.store_wait",
}


def new_trace() -> deque[dict[str, Any]]:
    return deque(maxlen=LENGTH)


def _int(cta: Cta, v: SSAValue) -> int:
    return int(np.asarray(cta.get(v)))


def _barrier(cta: Cta, bar: SSAValue, index: SSAValue, out: dict[str, Any]) -> str:
    bars = cta.get(bar)
    i = _int(cta, index)
    if isinstance(bars, S.MBarriers) and 0 <= i < bars.size:
        out["barrier"] = f"{bars.name}[{i}]"
        out["phase"] = bars.phase[i]
    return f"{getattr(bars, 'name', '?')}[{i}]"


def _buffer(cta: Cta, mem: SSAValue, access: Any, indices: Any, out: dict[str, Any]) -> str | None:
    buf = cta.get(mem)
    if not isinstance(buf, S.SmemBuffer):
        return None
    idx = list(indices)
    name = buf.name
    if access.dims and access.dims[0] is None and idx:
        stage = _int(cta, idx[0])
        out.setdefault("buffer", name)
        out.setdefault("stage", stage)
        return f"{name}[{stage}]"
    out.setdefault("buffer", name)
    return name


def record(cta: Cta, op: Operation, strand: Strand, trace: deque[dict[str, Any]], outcome: str = "") -> None:
    """Append the event of `op`, just run by `strand` (a no-op for other ops); `outcome` says
    how it ended when it did not complete ("fails here", "blocks")."""
    ev: dict[str, Any] = {"role": strand.key()}
    if strand.loops:
        ev["iteration"] = {name: int(v) for name, v in strand.loops}
    span = span_of(op)
    if span is not None:
        ev["line"] = span.line
    text = _describe(cta, op, ev)
    if text is None:
        return
    if outcome:
        text = text.removesuffix(" passes") + f" {outcome}"
    ev["op"] = text
    trace.append(ev)


def _describe(cta: Cta, op: Operation, ev: dict[str, Any]) -> str | None:
    if isinstance(op, ex.WaitOp):
        name = _barrier(cta, op.bar, op.bar_index, ev)
        return f"wait({name}, parity = {_int(cta, op.parity)}) passes"
    if isinstance(op, ex.ArriveOp):
        return f"arrive({_barrier(cta, op.bar, op.bar_index, ev)})"
    if isinstance(op, ex.ExpectOp):
        return f"expect({_barrier(cta, op.bar, op.bar_index, ev)}, bytes = {_int(cta, op.nbytes)})"
    if isinstance(op, ex.TmaLoadOp):
        dst = _buffer(cta, op.dst, op.dst_access.data, op.dst_indices, ev)
        return f"tma.load into {dst}, signal = {_barrier(cta, op.bar, op.bar_index, ev)}"
    if isinstance(op, ex.TmaStoreOp):
        return f"tma.store from {_buffer(cta, op.src, op.src_access.data, op.src_indices, ev)}"
    if isinstance(op, ex.CpAsyncOp):
        return f"cp.async into {_buffer(cta, op.dst, op.dst_access.data, op.dst_indices, ev)}"
    if isinstance(op, ex.WgmmaOp):
        names = []
        if not op.a_in_registers:
            names.append(_buffer(cta, op.a, op.a_access.data, op.a_indices, ev))
        names.append(_buffer(cta, op.b, op.b_access.data, op.b_indices, ev))
        return "wgmma reads " + ", ".join(n for n in names if n)
    if isinstance(op, ex.CpAsyncCommitOp):
        return "cp.async.commit()"
    if isinstance(op, ex.CpAsyncWaitOp | ex.WgmmaWaitOp | ex.TmaStoreWaitOp):
        pending = op.pending.data  # a literal, or a static expression of parameters
        n = pending if isinstance(pending, int) else cta.launch.sym(pending)
        return f"{_SURFACE[op.name]}({n})"
    if isinstance(op, ex.CtaBarrierOp):
        return "barrier()"
    if isinstance(op, ex.FenceAsyncOp):
        return "fence.async()"
    if isinstance(op, tl.LoadOp | tl.StoreOp):
        view = _buffer(cta, op.mem, op.access.data, op.indices, ev)
        if view is None:
            return None  # global memory
        return f"{'load from' if isinstance(op, tl.LoadOp) else 'store to'} {view}"
    return None
