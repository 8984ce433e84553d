"""Hardware-explicit ops: shared buffers, asynchronous copies, mbarriers, fences, wgmma and
register layouts. These are what the lowering of `pipeline` and `warp_specialize` produces, and
what a person or an agent writes when they want to decide the schedule themselves.

Synchronization semantics (the reference interpreter implements them exactly):
- an mbarrier phase completes when its pending arrivals reach zero and its transaction bytes
  reach zero; `wait(b[i], parity = p)` returns once the phase with parity p has completed
  (initially the phase before phase 0 counts as completed with parity 1);
- `expect(b[i], bytes = n)` arrives once and adds n expected transaction bytes;
- `tma.load` writes its destination asynchronously and completes its bytes on the barrier it
  signals; the data may be read only after a wait on that barrier;
- `wgmma` reads its shared operands asynchronously until a `wgmma.wait(n)` retires it;
- `cp.async` copies complete at `cp.async.wait(n)` for all but the n newest committed groups.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr, StringAttr, UnitAttr
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AnyOf,
    AttrSizedOperandSegments,
    base,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from kir import symexpr as sx
from kir.dialect.errors import RuleViolation
from kir.dialect.opdef import KirOperation, op_definition
from kir.dialect.tile import access_shape
from kir.dialect.traits import BARRIER, GLOBAL, SHARED, Allocates, Async, Explicit, Pure, Reads, Synchronizes, Writes
from kir.dialect.types import (
    Access,
    AccessAttr,
    GlobalType,
    Layout,
    LayoutAttr,
    MBarrierType,
    ScalarType,
    SmemType,
    SymAttr,
    TileType,
    dtype_of,
    scalar,
    shape_of,
    shape_text,
    sym,
    tile_type,
)
from kir.dtypes import DTYPES


def _index_scalar(v: SSAValue, what: str) -> None:
    if not isinstance(v.type, ScalarType) or v.type.dtype.data not in ("i32", "i64"):
        raise RuleViolation(
            f"{what} is an i32 scalar, not {v.type}",
            rule="types.index",
            hint="cast<i32>(...) it to an i32 scalar",
        )


@op_definition
class SmemAllocOp(KirOperation):
    """Allocate a shared-memory buffer for the whole CTA; the leading dimension is usually the
    pipeline stage.

        as = smem(bf16[S, BM, BK], swizzle = 128)
    """

    name = "kir.smem"
    res = result_def(SmemType)
    traits = traits_def(Allocates(SHARED), Explicit())

    def __init__(self, buffer_type: SmemType):
        super().__init__(result_types=[buffer_type])


@op_definition
class MBarrierAllocOp(KirOperation):
    """Allocate and initialize an array of mbarriers, each expecting `count` arrivals per phase.

    In KIR:

        full = mbarrier(S, count = 1)
    """

    name = "kir.mbarrier"
    count = prop_def(SymAttr)
    res = result_def(MBarrierType)
    traits = traits_def(Allocates(BARRIER), Explicit())

    def __init__(self, size: sx.SymExpr | int, count: sx.SymExpr | int):
        super().__init__(properties={"count": sym(count)}, result_types=[MBarrierType(sym(size))])


class _BarrierUser:
    def _check_barrier(self) -> None:
        if not isinstance(self.bar.type, MBarrierType):  # type: ignore[attr-defined]
            raise RuleViolation(
                f"expected an mbarrier, not {self.bar.type}",  # type: ignore[attr-defined]
                rule="types.access",
                hint="name an mbarrier made by mbarrier(S, count = C), as in full[s]",
            )
        _index_scalar(self.bar_index, "the mbarrier index")  # type: ignore[attr-defined]


@op_definition
class ExpectOp(KirOperation, _BarrierUser):
    """Arrive once on an mbarrier and add expected transaction bytes to its current phase
    (`mbarrier.arrive.expect_tx`).

        expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))
    """

    name = "kir.expect"
    bar = operand_def(MBarrierType)
    bar_index = operand_def(ScalarType)
    nbytes = operand_def(ScalarType)
    traits = traits_def(Reads(BARRIER, via="bar"), Writes(BARRIER, via="bar"), Synchronizes(), Explicit())

    def __init__(self, bar: SSAValue, bar_index: SSAValue, nbytes: SSAValue):
        super().__init__(operands=[bar, bar_index, nbytes])

    def verify_(self) -> None:
        self._check_barrier()
        _index_scalar(self.nbytes, "the byte count")


@op_definition
class ArriveOp(KirOperation, _BarrierUser):
    """Arrive on an mbarrier (`count` arrivals, one by default): `arrive(empty[s])`."""

    name = "kir.arrive"
    bar = operand_def(MBarrierType)
    bar_index = operand_def(ScalarType)
    count = prop_def(IntAttr)
    traits = traits_def(Reads(BARRIER, via="bar"), Writes(BARRIER, via="bar"), Synchronizes(), Explicit())

    def __init__(self, bar: SSAValue, bar_index: SSAValue, count: int = 1):
        super().__init__(operands=[bar, bar_index], properties={"count": IntAttr(count)})

    def verify_(self) -> None:
        self._check_barrier()
        if self.count.data < 1:
            raise VerifyException("an arrive counts at least one arrival")


@op_definition
class WaitOp(KirOperation, _BarrierUser):
    """Block until the mbarrier phase of the given parity has completed.

    In KIR:

        wait(full[s], parity = (k / S) % 2)
    """

    name = "kir.wait"
    bar = operand_def(MBarrierType)
    bar_index = operand_def(ScalarType)
    parity = operand_def(ScalarType)
    traits = traits_def(Reads(BARRIER, via="bar"), Synchronizes(), Explicit())

    def __init__(self, bar: SSAValue, bar_index: SSAValue, parity: SSAValue):
        super().__init__(operands=[bar, bar_index, parity])

    def verify_(self) -> None:
        self._check_barrier()
        _index_scalar(self.parity, "the parity")


@op_definition
class TmaLoadOp(KirOperation, _BarrierUser):
    """Copy a box of a global tensor into a shared buffer with the Tensor Memory Accelerator;
    the copy completes its bytes on the signalled mbarrier. Out-of-bounds elements are zero.

        tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])
    """

    name = "kir.tma_load"
    src_access = prop_def(AccessAttr)
    dst_access = prop_def(AccessAttr)
    src = operand_def(GlobalType)
    src_indices = var_operand_def()
    dst = operand_def(SmemType)
    dst_indices = var_operand_def()
    bar = operand_def(MBarrierType)
    bar_index = operand_def(ScalarType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(
        Reads(GLOBAL, via="src"), Writes(SHARED, via="dst"), Writes(BARRIER, via="bar"), Async("kir.wait"), Explicit()
    )

    def __init__(
        self,
        src: SSAValue,
        src_access: Access,
        src_indices: Sequence[SSAValue],
        dst: SSAValue,
        dst_access: Access,
        dst_indices: Sequence[SSAValue],
        bar: SSAValue,
        bar_index: SSAValue,
    ):
        super().__init__(
            properties={"src_access": AccessAttr(src_access), "dst_access": AccessAttr(dst_access)},
            operands=[src, list(src_indices), dst, list(dst_indices), bar, bar_index],
        )

    def verify_(self) -> None:
        self._check_barrier()
        _same_box(self, "tma.load")


def _same_box(op, what: str) -> None:
    """The checks of a box copy (`tma.load`, `tma.store`, `cp.async`): both sides are boxes of one
    shape and one dtype."""
    src, dst, src_idx, dst_idx = op.src, op.dst, op.src_indices, op.dst_indices
    a = access_shape(src.type, op.src_access.data, list(src_idx))
    b = access_shape(dst.type, op.dst_access.data, list(dst_idx))
    if any(isinstance(v.type, TileType) for v in [*src_idx, *dst_idx]):
        raise RuleViolation(
            f"{what} copies a box: index with scalars and slices, not index tiles",
            rule="types.access-mix",
            hint="write the box as slices, a[r0 : r0 + BM, c0 : c0 + BN]; gathers go through load",
        )
    if dtype_of(src.type) != dtype_of(dst.type):
        raise RuleViolation(
            f"{what}: source holds {dtype_of(src.type)}, destination {dtype_of(dst.type)}",
            rule="types.store-dtype",
            hint=f"a copy does not convert: give the destination dtype {dtype_of(src.type)}",
        )
    if len(a) != len(b) or any(not sx.same(x, y) for x, y in zip(a, b, strict=True)):
        raise RuleViolation(
            f"{what}: the box {shape_text(a)} does not match the destination {shape_text(b)}",
            rule="types.store-shape",
            hint="make the slice extents equal to the destination view's shape",
        )


@op_definition
class TmaStoreOp(KirOperation):
    """Copy a shared buffer to a box of a global tensor with the TMA (bulk async store);
    out-of-bounds elements are not written. The shared data must be fenced first
    (`fence.async`) and not overwritten before `tma.store_wait`.

        tma.store(cs[0], c[m0 : m0 + BM, n0 : n0 + BN])
    """

    name = "kir.tma_store"
    src_access = prop_def(AccessAttr)
    dst_access = prop_def(AccessAttr)
    src = operand_def(SmemType)
    src_indices = var_operand_def()
    dst = operand_def(GlobalType)
    dst_indices = var_operand_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Reads(SHARED, via="src"), Writes(GLOBAL, via="dst"), Async("kir.tma_store_wait"), Explicit())

    def __init__(self, src, src_access, src_indices, dst, dst_access, dst_indices):
        super().__init__(
            properties={"src_access": AccessAttr(src_access), "dst_access": AccessAttr(dst_access)},
            operands=[src, list(src_indices), dst, list(dst_indices)],
        )

    def verify_(self) -> None:
        _same_box(self, "tma.store")


@op_definition
class TmaStoreWaitOp(KirOperation):
    """Wait until at most `pending` TMA stores of this role are still reading shared memory:
    `tma.store_wait(0)`. The count is a static expression of parameters."""

    name = "kir.tma_store_wait"
    pending = prop_def(SymAttr)
    traits = traits_def(Synchronizes(), Explicit())

    def __init__(self, pending: sx.SymExpr | int):
        super().__init__(properties={"pending": sym(pending)})


@op_definition
class CpAsyncOp(KirOperation):
    """An asynchronous global-to-shared copy (Ampere `cp.async`), completed by
    `cp.async.commit()` then `cp.async.wait(n)`. Masked-off elements are written as zero.

        cp.async(a[m0 : m0 + BM, k0 : k0 + BK], as[s], mask = rows[:, None] < M)
    """

    name = "kir.cp_async"
    src_access = prop_def(AccessAttr)
    dst_access = prop_def(AccessAttr)
    src = operand_def(GlobalType)
    src_indices = var_operand_def()
    dst = operand_def(SmemType)
    dst_indices = var_operand_def()
    mask = opt_operand_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Reads(GLOBAL, via="src"), Writes(SHARED, via="dst"), Async("kir.cp_async_wait"), Explicit())

    def __init__(self, src, src_access, src_indices, dst, dst_access, dst_indices, mask=None):
        super().__init__(
            properties={"src_access": AccessAttr(src_access), "dst_access": AccessAttr(dst_access)},
            operands=[src, list(src_indices), dst, list(dst_indices), [mask] if mask else []],
        )

    def verify_(self) -> None:
        _same_box(self, "cp.async")


@op_definition
class CpAsyncCommitOp(KirOperation):
    """Close the current group of `cp.async` copies: `cp.async.commit()`."""

    name = "kir.cp_async_commit"
    traits = traits_def(Synchronizes(), Explicit())

    def __init__(self):
        super().__init__()


@op_definition
class CpAsyncWaitOp(KirOperation):
    """Wait until at most `pending` committed groups are in flight: `cp.async.wait(0)`. The
    count is a static expression of parameters (`cp.async.wait(S - 2)` for an S-stage ring),
    known when the kernel is compiled."""

    name = "kir.cp_async_wait"
    pending = prop_def(SymAttr)
    traits = traits_def(Synchronizes(), Explicit())

    def __init__(self, pending: sx.SymExpr | int):
        super().__init__(properties={"pending": sym(pending)})


@op_definition
class CtaBarrierOp(KirOperation):
    """Every thread of the CTA waits here (`__syncthreads`): `barrier()`. In divergent role code
    it deadlocks."""

    name = "kir.barrier"
    traits = traits_def(Synchronizes(), Explicit())

    def __init__(self):
        super().__init__()


@op_definition
class FenceAsyncOp(KirOperation):
    """Order this role's earlier shared-memory writes before later async-proxy reads (TMA
    store, wgmma): `fence.async()` (`fence.proxy.async.shared::cta`)."""

    name = "kir.fence_async"
    traits = traits_def(Synchronizes(), Explicit())

    def __init__(self):
        super().__init__()


@op_definition
class WgmmaOp(KirOperation):
    """Warpgroup matrix multiply-accumulate from shared buffers (Hopper `wgmma.mma_async`):
    `acc += a @ b`, issued asynchronously. Its shared operands stay in use, and `acc` is not
    ready, until `wgmma.wait`.

        acc = wgmma(as[s], bs[s], acc)
        s = wgmma(qs, trans(ks[st]), s)

    An operand written `trans(view)` (the `trans_a` / `trans_b` properties) is the transpose of
    its stored view: with `trans_b` the view is [N, K] (K contiguous: wgmma's K-major B), with
    `trans_a` it is [K, M] (M contiguous). The elements read are those of the stored view.

    A may instead be a 16-bit tile in registers (wgmma's register-A form), read at issue:

        acc = wgmma(cast<bf16>(p), vs[st], acc)

    It then has no access and no indices (`a_in_registers`).
    """

    name = "kir.wgmma"
    a_access = prop_def(AccessAttr)
    b_access = prop_def(AccessAttr)
    trans_a = opt_prop_def(UnitAttr)
    trans_b = opt_prop_def(UnitAttr)
    a = operand_def(AnyOf((base(SmemType), base(TileType))))
    a_indices = var_operand_def()
    b = operand_def(SmemType)
    b_indices = var_operand_def()
    acc = operand_def(TileType)
    res = result_def(TileType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Reads(SHARED, via="a"), Reads(SHARED, via="b"), Async("kir.wgmma_wait"), Explicit())

    def __init__(
        self,
        a,
        a_access: Access,
        a_indices,
        b,
        b_access: Access,
        b_indices,
        acc: SSAValue,
        trans_a: bool = False,
        trans_b: bool = False,
    ):
        props: dict = {"a_access": AccessAttr(a_access), "b_access": AccessAttr(b_access)}
        if trans_a:
            props["trans_a"] = UnitAttr()
        if trans_b:
            props["trans_b"] = UnitAttr()
        super().__init__(
            properties=props,
            operands=[a, list(a_indices), b, list(b_indices), acc],
            result_types=[acc.type],
        )

    @property
    def is_trans_a(self) -> bool:
        return self.trans_a is not None

    @property
    def a_in_registers(self) -> bool:
        return isinstance(self.a.type, TileType)

    @property
    def is_trans_b(self) -> bool:
        return self.trans_b is not None

    def stored_shapes(self) -> tuple[Sequence[sx.SymExpr], Sequence[sx.SymExpr]]:
        """The shapes of the two operands as stored (before any `trans`): shared views, or A's tile."""
        a: Sequence[sx.SymExpr]
        if self.a_in_registers:
            a = list(shape_of(self.a.type))
        else:
            a = access_shape(self.a.type, self.a_access.data, list(self.a_indices))
        b = access_shape(self.b.type, self.b_access.data, list(self.b_indices))
        return a, b

    def operand_shapes(self) -> tuple[Sequence[sx.SymExpr], Sequence[sx.SymExpr]]:
        """The shapes of the operands as multiplied, [M, K] and [K, N] (`trans` applied)."""
        a, b = self.stored_shapes()
        if self.is_trans_a and len(a) == 2:
            a = a[::-1]
        if self.is_trans_b and len(b) == 2:
            b = b[::-1]
        return a, b

    def verify_(self) -> None:
        sa, sb = self.stored_shapes()
        a, b = self.operand_shapes()
        c = shape_of(self.acc.type)
        if self.a_in_registers and (self.is_trans_a or DTYPES[dtype_of(self.a.type)].bits != 16):
            raise RuleViolation(
                f"wgmma: an A operand in registers is a 16-bit tile as multiplied, not {self.a.type}"
                + (" transposed" if self.is_trans_a else ""),
                rule="types.operand-dtype",
                hint="cast it first: wgmma(cast<bf16>(p), vs[s], acc); a transposed A comes from shared memory",
            )
        if len(sa) != 2 or len(sb) != 2:
            raise RuleViolation(
                f"wgmma takes 2-D operands, not {shape_text(sa)} and {shape_text(sb)}",
                rule="types.dot-shape",
                hint="index the stage dimension away: as[s], bs[s]",
            )
        if not (sx.same(a[1], b[0]) and sx.same(a[0], c[0]) and sx.same(b[1], c[1])):
            ta = f"trans({shape_text(sa)})" if self.is_trans_a else shape_text(sa)
            tb = f"trans({shape_text(sb)})" if self.is_trans_b else shape_text(sb)
            raise RuleViolation(
                f"wgmma: {ta} x {tb} does not give the accumulator {shape_text(c)}",
                rule="types.dot-shape",
                hint="wgmma multiplies [M, K] by [K, N] into an [M, N] accumulator; "
                "trans(B) takes B stored [N, K], trans(A) takes A stored [K, M]",
            )
        if dtype_of(self.a.type) != dtype_of(self.b.type):
            raise RuleViolation(
                "wgmma: both operands have one dtype",
                rule="types.operand-dtype",
                hint="stage both operands in one dtype",
            )


@op_definition
class WgmmaWaitOp(KirOperation):
    """Wait until at most `pending` wgmma groups of this role are in flight: `wgmma.wait(0)`.
    The count is a static expression of parameters."""

    name = "kir.wgmma_wait"
    pending = prop_def(SymAttr)
    traits = traits_def(Synchronizes(), Explicit())

    def __init__(self, pending: sx.SymExpr | int):
        super().__init__(properties={"pending": sym(pending)})


@op_definition
class SizeofOp(KirOperation):
    """The size in bytes of a shared buffer or view, as an i32: `sizeof(as[s])`."""

    name = "kir.sizeof"
    access = prop_def(AccessAttr)
    mem = operand_def(SmemType)
    indices = var_operand_def()
    res = result_def(ScalarType)
    traits = traits_def(Pure(), Explicit())

    def __init__(self, mem: SSAValue, access: Access, indices: Sequence[SSAValue]):
        super().__init__(
            properties={"access": AccessAttr(access)}, operands=[mem, list(indices)], result_types=[scalar("i32")]
        )

    def verify_(self) -> None:
        access_shape(self.mem.type, self.access.data, list(self.indices))


@op_definition
class ConvertLayoutOp(KirOperation):
    """Give a tile a register layout (moving data between threads if needed):

    In KIR:

        acc = convert_layout(acc, blocked([1, 8], [4, 8], [4, 1], [1, 0]))
    """

    name = "kir.convert_layout"
    layout = prop_def(LayoutAttr)
    operand = operand_def(TileType)
    res = result_def(TileType)
    traits = traits_def(Pure(), Explicit())

    def __init__(self, operand: SSAValue, layout: Layout):
        if not isinstance(operand.type, TileType):
            raise RuleViolation(
                f"convert_layout takes a tile, not {operand.type}", rule="types.rank", hint="a scalar has no layout"
            )
        super().__init__(
            properties={"layout": LayoutAttr(layout)},
            operands=[operand],
            result_types=[tile_type(dtype_of(operand.type), shape_of(operand.type), layout)],
        )

    def verify_(self) -> None:
        lay = self.layout.data
        if lay.kind not in Layout.KINDS or len(lay.params) != Layout.KINDS[lay.kind]:
            raise RuleViolation(
                f"layout {lay.kind} takes {Layout.KINDS.get(lay.kind, '?')} lists",
                rule="types.layout",
                hint="blocked(size_per_thread, threads_per_warp, warps_per_cta, order) or mma(version, warps_per_cta, instr_shape)",
            )
        rank = len(shape_of(self.operand.type))
        if lay.kind == "blocked" and any(len(p) != rank for p in lay.params):
            raise RuleViolation(
                f"a blocked layout gives one entry per dimension (rank {rank})",
                rule="types.layout",
                hint=f"give each of the four lists {rank} entries",
            )


_ = StringAttr
