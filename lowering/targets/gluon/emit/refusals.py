"""What the Gluon backend refuses, each at its op, before anything is written (independent of
the parameters; a tile shape that depends on a shape symbol is refused while writing)."""

from __future__ import annotations

from typing import cast

from xdsl.ir import Operation

from kir import symexpr as sx
from kir.diagnostics import Diagnostic
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, SmemType, TileType, shape_of
from kir.program import Program, span_of

SUPPORTED = (
    st.KernelOp,
    st.ForOp,
    st.IfOp,
    st.YieldOp,
    st.RoleOp,
    st.RoleRankOp,
    tl.ProgramIdOp,
    tl.NumProgramsOp,
    tl.SymValueOp,
    tl.ConstOp,
    tl.BinaryOp,
    tl.CompareOp,
    tl.UnaryOp,
    tl.WhereOp,
    tl.CastOp,
    tl.ExpandDimsOp,
    tl.ReduceOp,
    tl.ZerosOp,
    tl.FullOp,
    tl.ArangeOp,
    tl.LoadOp,
    tl.StoreOp,
    ex.SmemAllocOp,
    ex.MBarrierAllocOp,
    ex.ExpectOp,
    ex.ArriveOp,
    ex.WaitOp,
    ex.TmaLoadOp,
    ex.TmaStoreOp,
    ex.TmaStoreWaitOp,
    ex.FenceAsyncOp,
    ex.CtaBarrierOp,
    ex.WgmmaOp,
    ex.WgmmaWaitOp,
    ex.SizeofOp,
    ex.ConvertLayoutOp,
)


def unsupported(op: Operation, message: str, hint: str = "") -> Diagnostic:
    return Diagnostic("lower.unsupported", "error", span_of(op), message, hint)


def refusals(program: Program) -> list[Diagnostic]:
    """Ops and constructs the backend cannot express, each at its op (independent of params)."""
    out: list[Diagnostic] = []
    for op in program.kernel.walk():
        if not isinstance(op, SUPPORTED):
            hint = {
                "kir.dot": "write the product with wgmma on shared views at the explicit level",
                "kir.cp_async": "cp.async is sm_80: use tma.load completing on an mbarrier",
                "kir.gather": "lower this program with the cuda backend, which lowers gather at both levels "
                "(or keep the gather in a tile-level kernel for the triton backend's tl.gather)",
            }.get(op.name, "rewrite it with the supported ops, or lower this program with another backend")
            out.append(unsupported(op, f"the gluon backend cannot lower `{op.name}`", hint))
            continue
        if isinstance(op, tl.BinaryOp) and op.fn.data == "pow":
            out.append(unsupported(op, "the gluon backend has no `pow`", "write exp2(b * log2(a)) for positive a"))
        if isinstance(op, tl.UnaryOp) and op.fn.data == "tanh":
            out.append(unsupported(op, "the gluon backend has no `tanh`", "write it with exp"))
        if isinstance(op, tl.LoadOp | tl.StoreOp) and any(isinstance(v.type, TileType) for v in op.indices):
            if isinstance(op, tl.StoreOp) or not isinstance(op.mem.type, GlobalType):
                out.append(
                    unsupported(
                        op,
                        "the gluon backend gathers by loads from global tensors only (no scattered stores, "
                        "no gathers from shared memory)",
                        "index with slices",
                    )
                )

        if isinstance(op, tl.LoadOp | tl.StoreOp) and isinstance(op.mem.type, SmemType):
            if not isinstance(op.res.type if isinstance(op, tl.LoadOp) else op.value.type, TileType):
                out.append(unsupported(op, "the gluon backend moves tiles, not scalars, through shared memory"))
        if isinstance(op, ex.CtaBarrierOp) and st.RoleOp.enclosing(op) is not None:
            out.append(
                unsupported(
                    op,
                    "a CTA barrier inside a role: a gluon partition can only synchronize its own warps",
                    "synchronize roles with mbarriers (arrive/wait)",
                )
            )
        if isinstance(op, ex.WgmmaOp):
            role = st.RoleOp.enclosing(op)
            if role is not None and role.warps_per_unit < 4:
                out.append(
                    unsupported(
                        op,
                        f"wgmma in role `{role.name_text}`, whose units are single warps: wgmma needs a warpgroup",
                        "declare the role with warpgroups(...)",
                    )
                )
        if isinstance(op, ex.TmaLoadOp | ex.TmaStoreOp):
            glob = op.src if isinstance(op, ex.TmaLoadOp) else op.dst
            glob_access = op.src_access.data if isinstance(op, ex.TmaLoadOp) else op.dst_access.data
            dims = glob_access.dims
            if len(dims) < 2 or any(d is None for d in dims[-2:]) or any(d is not None for d in dims[:-2]):
                out.append(
                    unsupported(
                        op,
                        "the gluon backend takes TMA boxes that slice the last two dimensions "
                        "and index every other one with a scalar",
                        "write the box as a[r0 : r0 + BM, c0 : c0 + BN], or x[b, h, r0 : r0 + BM, c0 : c0 + BN]",
                    )
                )
            elif not rows_merge(cast(GlobalType, glob.type)):
                out.append(
                    unsupported(
                        op,
                        f"a TMA box of the {len(dims)}-D tensor `{glob.type}`, whose strides do not let "
                        "its leading dimensions merge into rows",
                        "the gluon backend addresses an N-D tensor through a 2-D descriptor over its rows: "
                        "declare it row-major (no strides), or contiguous in all but the last dimension",
                    )
                )
    return out


def row_major_strides(t: GlobalType) -> list[sx.SymExpr]:
    dims = shape_of(t)
    strides: list[sx.SymExpr] = []
    for i in range(len(dims)):
        stride: sx.SymExpr = sx.Int(1)
        for d in dims[i + 1 :]:
            stride = sx.Bin("*", stride, d)
        strides.append(sx.fold(stride))
    return strides


def rows_merge(t: GlobalType) -> bool:
    """Whether the dimensions of `t` before its last merge into one of rows: the stride of each
    leading dimension is the next one's stride times its extent (always so when row-major).
    Declared strides are compared as polynomials, at a few points (`M * N` is `N * M`); the
    launch checks the strides of the tensor it is given (lowering/targets/gluon/runtime.py's row_view),
    so this is the early, located form of that check."""
    if len(t.shape.data) <= 2 or not t.strides.data:
        return True
    dims = shape_of(t)
    strides = [s.data for s in t.strides.data]
    pairs = [(strides[i], sx.Bin("*", strides[i + 1], dims[i + 1])) for i in range(len(dims) - 2)]
    names = sorted(set().union(*(a.symbols() | b.symbols() for a, b in pairs)))
    points = [{n: 3 + (7 * k + 5) * (j + 1) % 97 for j, n in enumerate(names)} for k in range(4)]
    return all(sx.same(a, b) or all(a.evaluate(e) == b.evaluate(e) for e in points) for a, b in pairs)
