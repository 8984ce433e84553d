"""What the dataflow rules share: the memory each op reads and writes (`Ref`, `reads`,
`writes`), the kernel argument a memory value is, and the symbolic index of each dimension of
an access. A helper of the `dataflow_*` rule modules: it registers no rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.ir import BlockArgument, Operation, SSAValue

from kir import symexpr as sx
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.tile import access_shape
from kir.dialect.types import Access, TileType
from verifier.context import Context

# ---- memory operands -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """One memory operand of an op."""

    op: Operation
    mem: SSAValue
    access: Access
    indices: tuple[SSAValue, ...]
    mask: SSAValue | None
    verb: str

    @property
    def shape(self) -> tuple[sx.SymExpr, ...]:
        return access_shape(self.mem.type, self.access, list(self.indices))

    @property
    def is_gather(self) -> bool:
        return any(isinstance(v.type, TileType) for v in self.indices)


_WRITES: dict[type, Callable[[Any], list[Ref]]] = {
    tl.StoreOp: lambda op: [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, "store to")],
    tl.AtomicOp: lambda op: [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, f"atomic_{op.fn.data} on")],
    ex.TmaStoreOp: lambda op: [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, "tma.store to")],
    ex.TmaLoadOp: lambda op: [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), None, "tma.load into")],
    ex.CpAsyncOp: lambda op: [Ref(op, op.dst, op.dst_access.data, tuple(op.dst_indices), op.mask, "cp.async into")],
}


def _wgmma_reads(op: ex.WgmmaOp) -> list[Ref]:
    a = [] if op.a_in_registers else [Ref(op, op.a, op.a_access.data, tuple(op.a_indices), None, "wgmma reading")]
    return [*a, Ref(op, op.b, op.b_access.data, tuple(op.b_indices), None, "wgmma reading")]


_READS: dict[type, Callable[[Any], list[Ref]]] = {
    tl.LoadOp: lambda op: [Ref(op, op.mem, op.access.data, tuple(op.indices), op.mask, "load from")],
    tl.AtomicOp: _WRITES[tl.AtomicOp],
    ex.TmaLoadOp: lambda op: [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.load from")],
    ex.CpAsyncOp: lambda op: [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), op.mask, "cp.async from")],
    ex.TmaStoreOp: lambda op: [Ref(op, op.src, op.src_access.data, tuple(op.src_indices), None, "tma.store from")],
    ex.WgmmaOp: _wgmma_reads,
}

# Looked up by the op's exact class (KIR's op classes are final): the rules ask at every op, and
# most ops touch no memory.


def writes(op: Operation) -> list[Ref]:
    """The memory an op writes (global tensors and shared buffers)."""
    found = _WRITES.get(type(op))
    return found(op) if found is not None else []


def reads(op: Operation) -> list[Ref]:
    """The memory an op reads."""
    found = _READS.get(type(op))
    return found(op) if found is not None else []


def arg_name(ctx: Context, mem: SSAValue) -> str | None:
    """The kernel argument a memory value is, if it is one."""
    if isinstance(mem, BlockArgument) and isinstance(mem.block.parent_op(), st.KernelOp):
        return ctx.kernel.args[mem.index][0]
    return None


def name_of(v: SSAValue) -> str:
    return v.name_hint or "?"


def index_terms(ctx: Context, ref: Ref, lanes: tuple):
    """The symbolic index of each dimension of an access, its lanes placed at `lanes` (a slice
    adds the lane to its start; a gather's index tiles are taken at the lanes)."""
    sym = ctx.symbolic
    out = []
    if not ref.is_gather:
        axis = 0
        for extent, v in zip(ref.access.dims, ref.indices, strict=True):
            t = sym.value(v)
            if extent is not None:
                t = type(t)(t.expr + lanes[axis], t.tainted, t.why)
                axis += 1
            out.append(t)
        return out
    for v in ref.indices:
        out.append(sym.at(v, lanes))
    return out
