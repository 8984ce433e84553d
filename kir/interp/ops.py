"""Handlers of the structural and tile-level ops: one numpy call per tile op (the arithmetic
lives in `values`, the addressing in `memory`). Loads and stores on shared buffers also go
through the race checks of `sync`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import SSAValue

from kir import random
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import dtype_of
from kir.dtypes import DTYPES, INDEX
from kir.interp import memory as M
from kir.interp import sync as S
from kir.interp import values as V
from kir.interp.errors import OutOfBounds, fail
from kir.interp.machine import Cta, Strand, as_int, handles


def _dt(t) -> V.DType:
    return DTYPES[dtype_of(t)]


# ---- structure -----------------------------------------------------------------------------


@handles(st.ForOp, blocking=True)
def _for(cta: Cta, op: st.ForOp, strand: Strand):
    lo, hi, step = (as_int(cta.get(v)) for v in (op.lower, op.upper, op.step))
    if step <= 0:
        fail("interp.bad-step", op, f"the loop step is {step}; it must be positive", "", (), cta.context(strand))
    block = op.body.block
    var, *args = block.args
    var_dtype = _dt(op.lower.type).numpy
    ops = cta.block_ops(block)
    carried = [cta.get(v) for v in op.inits]
    strand.loops.append([var.name_hint or "i", lo])
    for i in range(lo, hi, step):
        strand.loops[-1][1] = i
        cta.set(var, np.asarray(i, dtype=var_dtype))
        for a, v in zip(args, carried, strict=True):
            cta.set(a, v)
        carried = yield from cta.exec_ops(ops, strand)
    strand.loops.pop()
    for r, v in zip(op.res, carried, strict=True):
        cta.set(r, v)


@handles(st.IfOp, blocking=True)
def _if(cta: Cta, op: st.IfOp, strand: Strand):
    region = op.then_body if bool(cta.get(op.cond)) else op.else_body
    results = []
    if region.blocks:
        results = yield from cta.exec_ops(cta.block_ops(region.block), strand)
    for r, v in zip(op.res, results, strict=True):
        cta.set(r, v)


# ---- values --------------------------------------------------------------------------------


@handles(tl.ProgramIdOp)
def _program_id(cta: Cta, op, strand):
    axis = op.axis.data
    cta.set(op.res, np.asarray(cta.pid[axis] if axis < len(cta.launch.grid) else 0, dtype=INDEX.numpy))


@handles(tl.NumProgramsOp)
def _num_programs(cta: Cta, op, strand):
    axis = op.axis.data
    cta.set(op.res, np.asarray(cta.launch.grid[axis] if axis < len(cta.launch.grid) else 1, dtype=INDEX.numpy))


@handles(tl.SymValueOp)
def _symbol(cta: Cta, op, strand):
    def make():
        name = op.symbol.data
        if name not in cta.launch.symbols:
            fail("interp.unbound-symbol", op, f"`{name}` is neither a parameter nor a shape symbol of the arguments")
        return op.res, V.const(cta.launch.symbols[name], INDEX)

    res, value = cta.launch.cached(op, make)
    cta.env[res] = value


@handles(tl.ConstOp)
def _const(cta: Cta, op, strand):
    res, value = cta.launch.cached(op, lambda: (op.res, V.const(op.number, _dt(op.res.type))))
    cta.env[res] = value


@handles(tl.ArangeOp)
def _arange(cta: Cta, op, strand):
    res, value = cta.launch.cached(
        op, lambda: (op.res, np.arange(cta.launch.sym(op.start.data), cta.launch.sym(op.end.data), dtype=INDEX.numpy))
    )
    cta.env[res] = value  # values are never written in place, so one array serves every program


@handles(tl.ZerosOp)
def _zeros(cta: Cta, op, strand):
    cta.set(op.res, np.zeros(cta.launch.shape(op.res.type), dtype=_dt(op.res.type).numpy))


@handles(tl.FullOp)
def _full(cta: Cta, op, strand):
    cta.set(op.res, np.full(cta.launch.shape(op.res.type), cta.get(op.value), dtype=_dt(op.res.type).numpy))


@handles(tl.BinaryOp)
def _binary(cta: Cta, op, strand):
    fn, lhs, rhs, res, d = cta.launch.cached(op, lambda: (op.fn.data, op.lhs, op.rhs, op.res, _dt(op.res.type)))
    env = cta.env
    env[res] = V.binary(fn, env[lhs], env[rhs], d)


@handles(tl.CompareOp)
def _compare(cta: Cta, op, strand):
    pred, lhs, rhs, res = cta.launch.cached(op, lambda: (op.predicate.data, op.lhs, op.rhs, op.res))
    env = cta.env
    env[res] = V.compare(pred, env[lhs], env[rhs])


@handles(tl.UnaryOp)
def _unary(cta: Cta, op, strand):
    fn, x, res, d = cta.launch.cached(op, lambda: (op.fn.data, op.operand, op.res, _dt(op.res.type)))
    cta.env[res] = V.unary(fn, cta.env[x], d)


@handles(tl.WhereOp)
def _where(cta: Cta, op, strand):
    c, a, b, res, d = cta.launch.cached(op, lambda: (op.cond, op.lhs, op.rhs, op.res, _dt(op.res.type)))
    env = cta.env
    env[res] = V.select(env[c], env[a], env[b], d)


@handles(tl.RandOp)
def _rand(cta: Cta, op, strand):
    fn, seed, offs, res, odt = cta.launch.cached(
        op, lambda: (op.fn.data, op.seed, op.offsets, op.res, _dt(op.offsets.type))
    )
    env = cta.env
    bits = random.randint(env[seed], np.asarray(env[offs]).astype(odt.numpy))
    env[res] = random.uniform(bits) if fn == "rand" else bits


@handles(tl.CastOp)
def _cast(cta: Cta, op, strand):
    x, res, src, dst = cta.launch.cached(op, lambda: (op.operand, op.res, _dt(op.operand.type), _dt(op.res.type)))
    cta.env[res] = V.cast(cta.env[x], src, dst)


@handles(tl.ExpandDimsOp)
def _expand_dims(cta: Cta, op, strand):
    x, res, axis = cta.launch.cached(op, lambda: (op.operand, op.res, op.axis.data))
    cta.env[res] = np.expand_dims(cta.env[x], axis)


@handles(tl.BroadcastOp)
def _broadcast(cta: Cta, op, strand):
    cta.set(op.res, np.broadcast_to(cta.get(op.operand), cta.launch.shape(op.res.type)))


@handles(tl.ReshapeOp)
def _reshape(cta: Cta, op, strand):
    x = cta.get(op.operand)
    shape = cta.launch.shape(op.res.type)
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        fail(
            "interp.bad-reshape",
            op,
            f"cannot reshape {x.size} elements {list(x.shape)} into {list(shape)}",
            "",
            (),
            cta.context(strand),
        )
    cta.set(op.res, np.reshape(x, shape))


@handles(tl.TransOp)
def _trans(cta: Cta, op, strand):
    cta.set(op.res, np.transpose(cta.get(op.operand)))


@handles(tl.ReduceOp)
def _reduce(cta: Cta, op, strand):
    cta.set(op.res, V.reduce(op.fn.data, cta.get(op.operand), op.axis.data, _dt(op.res.type)))


@handles(tl.ArgReduceOp)
def _argreduce(cta: Cta, op, strand):
    cta.set(op.res, V.argreduce(op.fn.data, cta.get(op.operand), op.axis.data, _dt(op.operand.type)))


@handles(tl.ScanOp)
def _scan(cta: Cta, op, strand):
    cta.set(op.res, V.scan(op.fn.data, cta.get(op.operand), op.axis.data, bool(op.reverse.data), _dt(op.res.type)))


@handles(tl.TopKOp)
def _topk(cta: Cta, op, strand):
    x = cta.get(op.operand)
    k = cta.launch.sym(op.k.data)
    if not 1 <= k <= x.shape[-1]:
        fail("interp.bad-topk", op, f"topk: k = {k} must be between 1 and {x.shape[-1]}", "", (), cta.context(strand))
    vals, idx = V.topk(x, k, bool(op.largest.data), _dt(op.operand.type))
    cta.set(op.values, vals)
    cta.set(op.indices, idx)


@handles(tl.GatherOp)
def _gather(cta: Cta, op, strand):
    src, index, axis = cta.get(op.src), cta.get(op.index), op.axis.data
    extent = src.shape[axis]
    lane = V.gather_out_of_range(index, extent)
    if lane is not None:
        value = int(index[lane])
        name = f"`{op.src.name_hint}`" if op.src.name_hint else "the source"
        fail(
            "interp.out-of-bounds",
            op,
            f"gather: index {value} at lane {list(lane)} is outside 0 .. {extent - 1} along axis {axis} of {name}",
            "keep the indices in range (clamp them with minimum/maximum, or fix how they are computed)",
            (),
            {**cta.context(strand), "index": value, "extent": extent, "lane": list(lane)},
        )
    cta.set(op.res, V.gather(src, index, axis))


@handles(tl.DotOp)
def _dot(cta: Cta, op, strand):
    acc = cta.get(op.acc) if op.acc is not None else None
    cta.set(op.res, V.dot(cta.get(op.lhs), cta.get(op.rhs), acc, _dt(op.lhs.type), _dt(op.res.type), op.tf32))


# ---- memory --------------------------------------------------------------------------------


def access_lanes(cta: Cta, mem_type, access, indices, mask, op=None, tag: str = "") -> M.Lanes:
    """The lanes of an access (`access` is a `kir.dialect.types.Access`). With `op`, the static
    part (memory shape, slice extents, operand lists) is computed once per op and `tag`."""

    def make():
        extents = [None if d is None else cta.launch.sym(d) for d in access.dims]
        return cta.launch.shape(mem_type), access.dims, extents, list(indices), mask

    shape, dims, extents, idx, m = make() if op is None else cta.launch.cached(op, make, tag)
    env = cta.env
    return M.lanes(shape, dims, extents, [env[v] for v in idx], None if m is None else env[m])


def smem_flat(ln: M.Lanes) -> np.ndarray:
    """Distinct linear addresses of the active lanes (for the race shadow)."""
    flat = ln.active_flat()
    return np.unique(flat) if ln.gather else flat


def checked_lanes(
    cta: Cta, op, strand: Strand, what: str, mem, mem_type, access, indices, mask, tag: str = ""
) -> M.Lanes:
    ln = access_lanes(cta, mem_type, access, indices, mask, op, tag)
    try:
        ln.check()
    except OutOfBounds as err:
        cta.out_of_bounds(op, strand, what, mem.name, err)
    return ln


@dataclass(frozen=True)
class _Access:
    """The static part of a load, store or atomic, read from the op once per launch."""

    mem: SSAValue
    dtype: V.DType
    shape: tuple[int, ...]
    dims: tuple
    extents: list[int | None]
    indices: list[SSAValue]
    mask: SSAValue | None
    extra: SSAValue | None  # `other` of a load, the value of a store or atomic
    res: SSAValue | None


def _access(cta: Cta, op, extra: SSAValue | None, res: SSAValue | None) -> _Access:
    access = op.access.data
    launch = cta.launch
    return _Access(
        op.mem,
        _dt(op.mem.type),
        launch.shape(op.mem.type),
        access.dims,
        [None if d is None else launch.sym(d) for d in access.dims],
        list(op.indices),
        op.mask,
        extra,
        res,
    )


def _lanes(cta: Cta, a: _Access) -> M.Lanes:
    env = cta.env
    return M.lanes(a.shape, a.dims, a.extents, [env[v] for v in a.indices], None if a.mask is None else env[a.mask])


@handles(tl.LoadOp)
def _load(cta: Cta, op: tl.LoadOp, strand: Strand):
    a = cta.launch.cached(op, lambda: _access(cta, op, op.other, op.res))
    env = cta.env
    mem = env[a.mem]
    other = None if a.extra is None else env[a.extra]
    ln = _lanes(cta, a)
    try:
        if isinstance(mem, S.SmemBuffer):
            ln.check()
            S.read_check(
                cta.clocks, mem, smem_flat(ln), strand.agent, op, lambda: cta.context(strand), cta.report_uninitialized
            )
        env[a.res] = M.read(mem.data, ln, other, a.dtype)
    except OutOfBounds as err:
        cta.out_of_bounds(op, strand, "load from", mem.name, err)


@handles(tl.StoreOp)
def _store(cta: Cta, op: tl.StoreOp, strand: Strand):
    a = cta.launch.cached(op, lambda: _access(cta, op, op.value, None))
    env = cta.env
    mem = env[a.mem]
    ln = _lanes(cta, a)
    try:
        if isinstance(mem, S.SmemBuffer):
            ln.check()
            S.write_check(
                cta.clocks, mem, smem_flat(ln), strand.agent, op, lambda: cta.context(strand), strand.agent.id
            )
        M.write(mem.data, ln, env[a.extra])
    except OutOfBounds as err:
        cta.out_of_bounds(op, strand, "store to", mem.name, err)


@handles(tl.AtomicOp)
def _atomic(cta: Cta, op: tl.AtomicOp, strand: Strand):
    a = cta.launch.cached(op, lambda: _access(cta, op, op.value, op.res))
    mem = cta.env[a.mem]
    fn = op.fn.data
    try:
        old = M.atomic(fn, mem.data, _lanes(cta, a), cta.env[a.extra], a.dtype)
    except OutOfBounds as err:
        cta.out_of_bounds(op, strand, f"atomic_{fn} on", mem.name, err)
    cta.env[a.res] = old if old.shape else old.reshape(())
