"""Target legality: an op, a dtype, a launch or a layout that the target cannot do.

Every fact comes from the target's table (`kir/targets/*.toml`): its `features` (tma, wgmma,
mbarrier, mbarrier_tx, cp_async, fence_async, setmaxnreg, warpgroups, warp_roles), its `dtypes`,
its warp size, its wgmma table and the versions of `mma(...)` register layouts it has. The
interpreter's table has every feature, so `target interp` accepts whatever a program can mean.

Decisions this family makes, and documents in the rules' explanations:
- a KIR warp is 32 threads on every target (docs/language.md); on AMD a 64-lane wavefront is two
  KIR warps, so every role must own whole wavefronts (`target.wavefront`), and a launch of an
  odd number of warps leaves half a wavefront idle (`target.partial-wavefront`, a warning);
- `mtia-sim` runs one thread of control per processing element: `warps(1)` (checked by
  `resources.threads`), no roles, no mbarriers, TMA, wgmma or register budgets; its shared
  buffers are the local SRAM and `cp.async` is a DMA into it.

The helpers at the top (warps of a launch or a role, threads that hold a tile) are shared with
the resources family.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.ir import Operation

from kir.diagnostics import Diagnostic, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import dtype_of
from verifier.context import Context
from verifier.registry import rule

KIR_WARP_THREADS = 32  # a KIR warp, on every target
WARPGROUP_WARPS = 4


# ---- launch facts shared with the resources family ---------------------------------------------


def launch_warps(ctx: Context) -> int:
    """KIR warps (32 threads) of one program: `warps(N)` is N, `warpgroups(N)` is 4N."""
    n = ctx.kernel.num_warps.data
    return n * WARPGROUP_WARPS if ctx.kernel.warp_unit.data == "warpgroups" else n


def launch_threads(ctx: Context) -> int:
    return launch_warps(ctx) * KIR_WARP_THREADS


def launch_span(ctx: Context) -> Span | None:
    return ctx.program.clause_spans.get("launch") or ctx.program.span()


def launch_text(ctx: Context) -> str:
    return f"{ctx.kernel.warp_unit.data}({ctx.kernel.num_warps.data})"


def role_warps(role: st.RoleOp) -> list[int]:
    """The KIR warps a role runs on (warpgroup g is warps 4g .. 4g + 3)."""
    per = role.warps_per_unit
    return [i * per + j for i in role.id_list for j in range(per)]


def tile_threads(ctx: Context, role: st.RoleOp | None) -> int:
    """The threads over which a tile computed here is distributed: one unit of the role (each
    unit runs its own instance of the body), or the whole CTA outside roles."""
    if role is None:
        return launch_threads(ctx)
    return role.warps_per_unit * KIR_WARP_THREADS


def role_text(role: st.RoleOp) -> str:
    ids = ", ".join(str(i) for i in role.id_list)
    return f"role `{role.name_text}` {role.unit.data}({ids})"


def is_gpu(ctx: Context) -> bool:
    """A real GPU (NVIDIA or AMD): the interpreter has no hardware limits to respect, and
    mtia-sim no warps or registers in the GPU sense."""
    return ctx.spec.vendor in ("nvidia", "amd")


def target_text(ctx: Context) -> str:
    chip = ctx.spec.raw.get("chip")
    return f"{ctx.target} ({chip})" if chip and chip != ctx.target else ctx.target


# ---- target.tma ----------------------------------------------------------------------------------

_TMA_OPS = (ex.TmaLoadOp, ex.TmaStoreOp, ex.TmaStoreWaitOp)
_OP_TEXT = {
    ex.TmaLoadOp: "tma.load",
    ex.TmaStoreOp: "tma.store",
    ex.TmaStoreWaitOp: "tma.store_wait",
    ex.WgmmaOp: "wgmma",
    ex.WgmmaWaitOp: "wgmma.wait",
    ex.MBarrierAllocOp: "mbarrier",
    ex.ArriveOp: "arrive",
    ex.WaitOp: "wait",
    ex.ExpectOp: "expect",
    ex.CpAsyncOp: "cp.async",
    ex.CpAsyncCommitOp: "cp.async.commit",
    ex.CpAsyncWaitOp: "cp.async.wait",
    ex.FenceAsyncOp: "fence.async",
}


def _tma_hint(ctx: Context, op: Operation) -> str:
    if isinstance(op, ex.TmaStoreOp | ex.TmaStoreWaitOp):
        return "write the tile with store(...) to the global tensor (and drop tma.store_wait), or target sm_90"
    if ctx.spec.has("cp_async") and ctx.spec.vendor == "nvidia":
        return "copy with cp.async(...), then cp.async.commit() and cp.async.wait(n) and barrier(), or target sm_90"
    if ctx.spec.has("cp_async"):
        return "copy into local SRAM with cp.async(...) (a DMA), or load(...) the tile directly"
    return "load(...) the tile into registers (and store(...) it to shared memory if it must be shared), order with barrier(), or target sm_90"


@rule(
    "target.tma",
    family="target",
    severity="error",
    summary="TMA copies (tma.load, tma.store, tma.store_wait) only exist on sm_90",
    explanation="""
The Tensor Memory Accelerator is a Hopper unit: `tma.load`, `tma.store` and `tma.store_wait`
lower to `cp.async.bulk.tensor` and need a tensor map, which sm_80, the AMD targets and
mtia-sim do not have (their tables lack the `tma` feature). On sm_80 copy asynchronously with
`cp.async`; on gfx90a/gfx942 load the tile and order shared-memory use with `barrier()`; on
mtia-sim `cp.async` is a DMA into local SRAM.
""",
    bad="""
    kernel scale<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N] align(16))
      where M % BM == 0, N % BN == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
    {
      buf = smem(f32[BM, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]) * 2.0)
      barrier()
      tma.store(buf[0 : BM], y[m0 : m0 + BM, n0 : n0 + BN])  # <-
    }
    """,
    good="""
    kernel scale<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N] align(16))
      where M % BM == 0, N % BN == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
    {
      buf = smem(f32[BM, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]) * 2.0)
      barrier()
      store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
    }
    """,
)
def tma_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.spec.has("tma"):
        return
    for info in ctx.ops(*_TMA_OPS):
        yield ctx.report(
            info.op,
            f"{_OP_TEXT[type(info.op)]} needs the Tensor Memory Accelerator, which {target_text(ctx)} does not have",
            hint=_tma_hint(ctx, info.op),
        )


# ---- target.wgmma --------------------------------------------------------------------------------


@rule(
    "target.wgmma",
    family="target",
    severity="error",
    summary="wgmma and wgmma.wait only exist on sm_90",
    explanation="""
`wgmma` is Hopper's warpgroup-level asynchronous matrix instruction (`wgmma.mma_async`); sm_80
has the warp-level `mma.sync`, the AMD targets MFMA, and mtia-sim its dot-product engine. On
those targets write the product at the tile level, `acc = dot<f32>(load(as[s]), load(bs[s]), acc)`,
and the lowering picks the target's matrix instruction.
""",
    bad="""
    kernel mm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
    {
      as = smem(bf16[BM, BK])
      bs = smem(bf16[BK, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
      for k in 0 .. K / BK {
        store(as[0 : BM], load(a[m0 : m0 + BM, k * BK : k * BK + BK]))
        store(bs[0 : BK], load(b[k * BK : k * BK + BK, n0 : n0 + BN]))
        barrier()
        acc = wgmma(as[0 : BM], bs[0 : BK], acc)  # <-
        barrier()
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
    good="""
    kernel mm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
    {
      as = smem(bf16[BM, BK])
      bs = smem(bf16[BK, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
      for k in 0 .. K / BK {
        store(as[0 : BM], load(a[m0 : m0 + BM, k * BK : k * BK + BK]))
        store(bs[0 : BK], load(b[k * BK : k * BK + BK, n0 : n0 + BN]))
        barrier()
        acc = dot<f32>(load(as[0 : BM]), load(bs[0 : BK]), acc)
        barrier()
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
)
def wgmma_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.spec.has("wgmma"):
        return
    for info in ctx.ops(ex.WgmmaOp, ex.WgmmaWaitOp):
        if isinstance(info.op, ex.WgmmaOp):
            hint = "multiply at the tile level: acc = dot<f32>(load(A), load(B), acc); the lowering picks the target's matrix instruction"
        else:
            hint = "drop wgmma.wait: a tile-level dot completes in program order"
        yield ctx.report(
            info.op,
            f"{_OP_TEXT[type(info.op)]} is a Hopper (sm_90) instruction; {target_text(ctx)} does not have it",
            hint=hint,
        )


# ---- target.mbarrier -----------------------------------------------------------------------------


@rule(
    "target.mbarrier",
    family="target",
    severity="error",
    summary="mbarriers exist on NVIDIA only; expect (transaction bytes) on sm_90 only",
    explanation="""
mbarriers are NVIDIA shared-memory barriers: sm_80 has `mbarrier.init/arrive/try_wait`, and
sm_90 adds transaction counts (`mbarrier.expect_tx`, the completion of TMA copies), which KIR
writes `expect(b[i], bytes = n)`. The AMD targets (gfx90a, gfx942) and mtia-sim have no
mbarriers at all: order shared-memory use with `barrier()` (s_barrier) and fill buffers with
plain loads. Every allocation, arrive, wait and expect is reported, since each one would have to
change.
""",
    bad="""
    kernel stage_sum<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M])
      where M % BM == 0, N % BN == 0
      target gfx90a grid(M / BM) warps(4)
    {
      buf = smem(f32[BM, BN])
      ready = mbarrier(1, count = 1)  # <-
      m0 = program_id(0) * BM
      acc = zeros(f32[BM])
      for j in 0 .. N / BN {
        store(buf[0 : BM], load(x[m0 : m0 + BM, j * BN : j * BN + BN]))
        barrier()
        acc = acc + sum(load(buf[0 : BM]), axis = 1)
        barrier()
      }
      store(y[m0 : m0 + BM], acc)
    }
    """,
    good="""
    kernel stage_sum<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M])
      where M % BM == 0, N % BN == 0
      target gfx90a grid(M / BM) warps(4)
    {
      buf = smem(f32[BM, BN])
      m0 = program_id(0) * BM
      acc = zeros(f32[BM])
      for j in 0 .. N / BN {
        store(buf[0 : BM], load(x[m0 : m0 + BM, j * BN : j * BN + BN]))
        barrier()
        acc = acc + sum(load(buf[0 : BM]), axis = 1)
        barrier()
      }
      store(y[m0 : m0 + BM], acc)
    }
    """,
)
def mbarrier_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    has_mbar, has_tx = ctx.spec.has("mbarrier"), ctx.spec.has("mbarrier_tx")
    if has_mbar and has_tx:
        return
    for info in ctx.ops(ex.MBarrierAllocOp, ex.ArriveOp, ex.WaitOp, ex.ExpectOp):
        op = info.op
        what = _OP_TEXT[type(op)]
        if not has_mbar:
            yield ctx.report(
                op,
                f"{what}: {target_text(ctx)} has no mbarriers",
                hint="use barrier() and plain loads (load/store through shared memory), or target sm_90",
            )
        elif isinstance(op, ex.ExpectOp):
            yield ctx.report(
                op,
                f"expect adds transaction bytes to an mbarrier (mbarrier.expect_tx), which {target_text(ctx)} does not have",
                hint="count arrivals only (arrive(...)) and complete copies with cp.async.wait(n) then barrier(), or target sm_90",
            )


# ---- target.cp-async -----------------------------------------------------------------------------


@rule(
    "target.cp-async",
    family="target",
    severity="error",
    summary="cp.async copies need sm_80 or later (or mtia-sim, where they are DMAs)",
    explanation="""
`cp.async`, `cp.async.commit()` and `cp.async.wait(n)` are Ampere's asynchronous
global-to-shared copies (LDGSTS). sm_80 and sm_90 have them; on mtia-sim a `cp.async` is a DMA
into the PE's local SRAM and a commit group is a DMA completion token. The AMD targets have no
asynchronous copy into LDS: load the tile, store it to shared memory and `barrier()`.
""",
    bad="""
    kernel row_sums<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
      where M % BM == 0, K % BK == 0
      target gfx942 grid(M / BM) warps(4)
    {
      buf = smem(f32[BM, BK])
      m0 = program_id(0) * BM
      acc = zeros(f32[BM])
      for k in 0 .. K / BK {
        cp.async(x[m0 : m0 + BM, k * BK : k * BK + BK], buf[0 : BM])  # <-
        cp.async.commit()
        cp.async.wait(0)
        barrier()
        acc = acc + sum(load(buf[0 : BM]), axis = 1)
        barrier()
      }
      store(out[m0 : m0 + BM], acc)
    }
    """,
    good="""
    kernel row_sums<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
      where M % BM == 0, K % BK == 0
      target gfx942 grid(M / BM) warps(4)
    {
      buf = smem(f32[BM, BK])
      m0 = program_id(0) * BM
      acc = zeros(f32[BM])
      for k in 0 .. K / BK {
        store(buf[0 : BM], load(x[m0 : m0 + BM, k * BK : k * BK + BK]))
        barrier()
        acc = acc + sum(load(buf[0 : BM]), axis = 1)
        barrier()
      }
      store(out[m0 : m0 + BM], acc)
    }
    """,
)
def cp_async_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.spec.has("cp_async"):
        return
    for info in ctx.ops(ex.CpAsyncOp, ex.CpAsyncCommitOp, ex.CpAsyncWaitOp):
        yield ctx.report(
            info.op,
            f"{_OP_TEXT[type(info.op)]}: {target_text(ctx)} has no asynchronous copy into shared memory",
            hint="store(buf[...], load(x[...])) then barrier() before the buffer is read",
        )


# ---- target.fence-async --------------------------------------------------------------------------


@rule(
    "target.fence-async",
    family="target",
    severity="error",
    summary="fence.async (fence.proxy.async) only exists on sm_90",
    explanation="""
`fence.async()` is `fence.proxy.async.shared::cta`: it orders generic shared-memory writes before
reads by Hopper's async proxy (TMA stores, wgmma). Targets without the async proxy (sm_80, AMD,
mtia-sim) have nothing to fence: a `barrier()` orders shared-memory writes before other threads'
reads.
""",
    bad="""
    kernel copy_through<BM = 64>(x: global f32[M], y: out global f32[M])
      where M % BM == 0
      target sm_80 grid(M / BM) warps(2)
    {
      buf = smem(f32[BM])
      m0 = program_id(0) * BM
      store(buf[0 : BM], load(x[m0 : m0 + BM]))
      fence.async()  # <-
      barrier()
      store(y[m0 : m0 + BM], load(buf[0 : BM]))
    }
    """,
    good="""
    kernel copy_through<BM = 64>(x: global f32[M], y: out global f32[M])
      where M % BM == 0
      target sm_80 grid(M / BM) warps(2)
    {
      buf = smem(f32[BM])
      m0 = program_id(0) * BM
      store(buf[0 : BM], load(x[m0 : m0 + BM]))
      barrier()
      store(y[m0 : m0 + BM], load(buf[0 : BM]))
    }
    """,
)
def fence_async_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.spec.has("fence_async"):
        return
    for info in ctx.ops(ex.FenceAsyncOp):
        yield ctx.report(
            info.op,
            f"fence.async orders writes before the async proxy (TMA, wgmma), which {target_text(ctx)} does not have",
            hint="drop fence.async(); barrier() orders shared-memory writes before other threads' reads",
            edits=[ctx.replace_in(info.op, "fence.async()", "")],
        )


# ---- target.warpgroups ---------------------------------------------------------------------------


@rule(
    "target.warpgroups",
    family="target",
    severity="error",
    summary="warpgroups (launch or roles) only exist on sm_90",
    explanation="""
A warpgroup (4 consecutive warps, 128 threads) is the unit of Hopper's wgmma and setmaxnreg;
other targets have no such unit. There, launch `warps(4 * N)` instead of `warpgroups(N)`, and
give roles the warps they run on (`role mma warps(4, 5, 6, 7)`). Both the launch clause and each
role over warpgroups are reported.
""",
    bad="""
    kernel vadd<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
      target sm_80 grid(cdiv(N, BLOCK)) warpgroups(1)  # <-
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(z[offs], load(x[offs], mask = mask) + load(y[offs], mask = mask), mask = mask)
    }
    """,
    good="""
    kernel vadd<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
      target sm_80 grid(cdiv(N, BLOCK)) warps(4)
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(z[offs], load(x[offs], mask = mask) + load(y[offs], mask = mask), mask = mask)
    }
    """,
)
def warpgroups_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.spec.has("warpgroups"):
        return
    if ctx.kernel.warp_unit.data == "warpgroups" and ctx.spec.max_warps_per_block > 1:
        # (a single-thread target reports the launch under resources.threads)
        n = ctx.kernel.num_warps.data
        yield ctx.report(
            launch_span(ctx),
            f"{launch_text(ctx)}: {target_text(ctx)} has no warpgroups",
            hint=f"launch warps({n * WARPGROUP_WARPS}) instead",
            edits=[ctx.replace_in(launch_span(ctx), launch_text(ctx), f"warps({n * WARPGROUP_WARPS})")],
        )
    for role in ctx.roles if ctx.spec.has("warp_roles") else ():  # else target.roles
        if role.unit.data == "warpgroups":
            warps = ", ".join(str(w) for w in role_warps(role))
            yield ctx.report(
                role,
                f"{role_text(role)}: {target_text(ctx)} has no warpgroups",
                hint=f"name the warps instead: role {role.name_text} warps({warps})",
            )


# ---- target.setmaxnreg ---------------------------------------------------------------------------


@rule(
    "target.setmaxnreg",
    family="target",
    severity="error",
    summary="per-role register budgets regs(N) (setmaxnreg) only exist on sm_90",
    explanation="""
`regs(N)` on a role lowers to `setmaxnreg`, which moves registers between the warpgroups of a
CTA at run time; only sm_90 has it. Elsewhere every warp of a kernel gets the same register
budget, fixed at compile time by the launch bounds: drop `regs(N)` (or target sm_90).
""",
    bad="""
    kernel halves<BLOCK = 256>(x: global f32[N], y: out global f32[N])
      where N % BLOCK == 0
      target sm_80 grid(N / BLOCK) warps(4)
    {
      role lo warps(0, 1) regs(40) {  # <-
        offs = program_id(0) * BLOCK + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
      role hi warps(2, 3) {
        offs = program_id(0) * BLOCK + BLOCK / 2 + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
    }
    """,
    good="""
    kernel halves<BLOCK = 256>(x: global f32[N], y: out global f32[N])
      where N % BLOCK == 0
      target sm_80 grid(N / BLOCK) warps(4)
    {
      role lo warps(0, 1) {
        offs = program_id(0) * BLOCK + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
      role hi warps(2, 3) {
        offs = program_id(0) * BLOCK + BLOCK / 2 + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
    }
    """,
)
def setmaxnreg_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.spec.has("setmaxnreg") or not ctx.spec.has("warp_roles"):  # no roles at all: target.roles
        return
    for role in ctx.roles:
        if role.regs.data:
            yield ctx.report(
                role,
                f"regs({role.regs.data}) on {role_text(role)}: per-role register budgets need setmaxnreg, "
                f"which {target_text(ctx)} does not have",
                hint="drop regs(N): every warp gets the kernel's register budget (launch bounds), or target sm_90",
                edits=[ctx.replace_in(role, f" regs({role.regs.data})", "")],
            )


# ---- target.roles --------------------------------------------------------------------------------


@rule(
    "target.roles",
    family="target",
    severity="error",
    summary="warp roles need a target with warps (not mtia-sim)",
    explanation="""
A role runs its body on some warps of the program, concurrently with the other roles. A
processing element of mtia-sim has one thread of control (its table has no `warp_roles`): there
is nothing to specialize. Write the body at the top level; the PE's DMA engines (`cp.async`)
give the overlap of loads and compute that roles give on a GPU.
""",
    bad="""
    kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
      where N % BLOCK == 0
      target mtia-sim grid(N / BLOCK) warps(1)
    {
      role work warps(0) {  # <-
        offs = program_id(0) * BLOCK + arange(0, BLOCK)
        store(y[offs], load(x[offs]) * 2.0)
      }
    }
    """,
    good="""
    kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
      where N % BLOCK == 0
      target mtia-sim grid(N / BLOCK) warps(1)
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      store(y[offs], load(x[offs]) * 2.0)
    }
    """,
)
def roles_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    if ctx.spec.has("warp_roles"):
        return
    for role in ctx.roles:
        yield ctx.report(
            role,
            f"{role_text(role)}: {target_text(ctx)} runs one thread of control per processing element and has no warp roles",
            hint="write the role's statements at the top level; overlap copies with cp.async (a DMA) instead",
        )


# ---- target.wavefront ----------------------------------------------------------------------------


def _wavefront_warps(ctx: Context) -> int | None:
    """KIR warps per hardware warp where the hardware warp is wider than a KIR warp (2 on AMD's
    64-lane wavefronts); None elsewhere."""
    size = ctx.spec.warp_size
    if size <= KIR_WARP_THREADS or size % KIR_WARP_THREADS:
        return None
    return size // KIR_WARP_THREADS


@rule(
    "target.wavefront",
    family="target",
    severity="error",
    summary="on AMD (64-lane wavefronts) every role owns whole wavefronts",
    explanation="""
A KIR warp is 32 threads on every target (docs/language.md), so on gfx90a and gfx942, whose
wavefronts have 64 lanes, one wavefront is two KIR warps: warps 2i and 2i + 1. The lanes of a
wavefront run in lockstep, so two roles cannot share one: they would run one after the other,
and a wait of one role on the other never returns. Give each role whole wavefronts (warps 2i and
2i + 1 together).
""",
    bad="""
    kernel halves<BLOCK = 256>(x: global f32[N], y: out global f32[N])
      where N % BLOCK == 0
      target gfx90a grid(N / BLOCK) warps(4)
    {
      role lo warps(0) {  # <-
        offs = program_id(0) * BLOCK + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
      role hi warps(2, 3) {
        offs = program_id(0) * BLOCK + BLOCK / 2 + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
    }
    """,
    good="""
    kernel halves<BLOCK = 256>(x: global f32[N], y: out global f32[N])
      where N % BLOCK == 0
      target gfx90a grid(N / BLOCK) warps(4)
    {
      role lo warps(0, 1) {
        offs = program_id(0) * BLOCK + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
      role hi warps(2, 3) {
        offs = program_id(0) * BLOCK + BLOCK / 2 + arange(0, BLOCK / 2)
        store(y[offs], load(x[offs]) * 2.0)
      }
    }
    """,
)
def role_wavefronts(ctx: Context) -> Iterator[Diagnostic]:
    per = _wavefront_warps(ctx)
    if per is None:
        return
    plan = _wavefront_plan(ctx, per)
    for role in ctx.roles:
        if role.unit.data != "warps":
            continue  # warpgroups are reported by target.warpgroups
        warps = set(role_warps(role))
        partial = sorted({w // per for w in warps if any(w // per * per + j not in warps for j in range(per))})
        if partial:
            fronts = ", ".join(f"{f} (warps {f * per} .. {f * per + per - 1})" for f in partial)
            message = (
                f"{role_text(role)} covers part of wavefront {fronts}: on {target_text(ctx)} a wavefront is "
                f"{per} KIR warps running in lockstep, so a role must own whole wavefronts"
            )
            if plan is None:
                yield ctx.report(role, message, hint="give every role whole wavefronts (warps 2i and 2i + 1 together)")
                continue
            moved = [(r, w) for r, w in plan if list(w) != role_warps(r)]
            text = "; ".join(f"role {r.name_text} warps({', '.join(map(str, w))})" for r, w in moved)
            yield ctx.report(
                role,
                message,
                hint=f"give the roles whole wavefronts of their own: {text}",
                edits=[
                    ctx.replace_in(
                        r, f"warps({', '.join(map(str, role_warps(r)))})", f"warps({', '.join(map(str, w))})"
                    )
                    for r, w in moved
                ],
            )


def _wavefront_plan(ctx: Context, per: int) -> list[tuple[st.RoleOp, tuple[int, ...]]] | None:
    """Whole wavefronts for every role over warps, as few as hold its warps, those it touches
    first, none shared; None where the launch has too few."""
    fronts = launch_warps(ctx) // per
    taken: set[int] = set()
    plan = []
    for role in ctx.roles:
        if role.unit.data != "warps":
            continue
        warps = role_warps(role)
        need = -(-len(warps) // per)
        touched = sorted({w // per for w in warps})
        order = [f for f in touched if f < fronts] + [f for f in range(fronts) if f not in touched]
        mine = [f for f in order if f not in taken][:need]
        if len(mine) < need:
            return None
        taken.update(mine)
        plan.append((role, tuple(f * per + j for f in sorted(mine) for j in range(per))))
    return plan


@rule(
    "target.partial-wavefront",
    family="target",
    severity="warning",
    summary="on AMD a launch of an odd number of warps leaves half a wavefront idle",
    explanation="""
On gfx90a and gfx942 a wavefront is 64 lanes, two KIR warps of 32 threads. A launch of an odd
number of warps (`warps(3)`: 96 threads) still occupies whole wavefronts, so half of the last
one idles, and the Triton lowering, whose `num_warps` counts wavefronts on AMD, has to round the
launch up. Launch an even number of warps (`warps(4)` is two wavefronts).
""",
    bad="""
    kernel vadd<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
      target gfx90a grid(cdiv(N, BLOCK)) warps(3)  # <-
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(z[offs], load(x[offs], mask = mask) + load(y[offs], mask = mask), mask = mask)
    }
    """,
    good="""
    kernel vadd<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
      target gfx90a grid(cdiv(N, BLOCK)) warps(4)
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(z[offs], load(x[offs], mask = mask) + load(y[offs], mask = mask), mask = mask)
    }
    """,
)
def launch_wavefronts(ctx: Context) -> Iterator[Diagnostic]:
    per = _wavefront_warps(ctx)
    if per is None:
        return
    size = ctx.spec.warp_size
    threads = launch_threads(ctx)
    if threads % size:
        n = ctx.kernel.num_warps.data
        yield ctx.report(
            launch_span(ctx),
            f"{launch_text(ctx)} is {threads} threads, {threads / size:g} wavefronts of {size} lanes on "
            f"{target_text(ctx)}: part of the last wavefront idles",
            hint=f"launch a multiple of {per} warps: warps({-(-n // per) * per})",
            edits=[ctx.replace_in(launch_span(ctx), launch_text(ctx), f"warps({-(-n // per) * per})")]
            if ctx.kernel.warp_unit.data == "warps"
            else [None],
        )


# ---- target.dtype --------------------------------------------------------------------------------


def _introduced_dtype(op: Operation) -> tuple[str, str] | None:
    """The dtype an op brings into the program (a cast, a new tile or buffer, a dot's
    accumulator) and how to name the op; None for ops that only carry their operands' dtypes
    along."""
    if isinstance(op, tl.CastOp):
        dtype = dtype_of(op.res.type)
        return dtype, f"cast<{dtype}>"
    if isinstance(op, tl.ZerosOp | tl.FullOp):
        return op.res.type.dtype.data, f"{'zeros' if isinstance(op, tl.ZerosOp) else 'full'}({op.res.type})"
    if isinstance(op, ex.SmemAllocOp):
        return op.res.type.dtype.data, f"the shared buffer {op.res.type}"
    if isinstance(op, tl.DotOp):
        return op.acc_dtype.data, f"dot<{op.acc_dtype.data}>"
    return None


@rule(
    "target.dtype",
    family="target",
    severity="error",
    summary="a dtype the target does not have (fp8 on gfx90a, an fp8 dot on sm_80; f64 on mtia-sim)",
    explanation="""
Each target's table lists its dtypes. fp8 (`f8e4m3`, `f8e5m2`) exists on sm_90 and gfx942 but not
on gfx90a; mtia-sim has no f64. The rule reports every place a missing dtype enters the
program: a kernel argument, a cast, a new tile (`zeros`, `full`), a shared buffer, a dot's
accumulate dtype, and a dot of such operands (no matrix unit of the target multiplies them).
Some dtypes a target only stores and converts (the table's `convert_dtypes`): sm_80 keeps fp8 in
memory and converts it in software (cuda_fp8.h), as weight-only fp8 GEMMs on Ampere do, so fp8
arguments, buffers and casts are fine there; only a dot of fp8 operands is an error (cast the
tiles to bf16 first).
""",
    bad="""
    kernel quantize<BLOCK = 1024>(x: global f32[N], y: out global f8e4m3[N])  # <-
      target gfx90a grid(cdiv(N, BLOCK)) warps(4)
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(y[offs], cast<f8e4m3>(load(x[offs], mask = mask)), mask = mask)
    }
    """,
    good="""
    kernel quantize<BLOCK = 1024>(x: global f32[N], y: out global f8e4m3[N])
      target gfx942 grid(cdiv(N, BLOCK)) warps(4)
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(y[offs], cast<f8e4m3>(load(x[offs], mask = mask)), mask = mask)
    }
    """,
)
def dtype_unavailable(ctx: Context) -> Iterator[Diagnostic]:
    have = ctx.spec.dtypes | ctx.spec.convert_dtypes
    if not have:
        return

    def hint(dtype: str) -> str:
        if dtype.startswith("f8"):
            return "use bf16 or f16 here, or target sm_90 or gfx942 (they have fp8; sm_80 stores and converts it)"
        if dtype == "f64":
            return "use f32"
        return f"use one of {', '.join(sorted(have))}"

    seen: set[tuple[int, str]] = set()
    for name, arg in ctx.kernel.args:
        dtype = dtype_of(arg.type)
        span = ctx.program.arg_spans.get(name)
        if dtype not in have:
            seen.add((span.line if span else 0, dtype))
            yield ctx.report(
                span or ctx.program.span(),
                f"argument `{name}` is {dtype}, which {target_text(ctx)} does not have",
                hint=hint(dtype),
            )
    for info in ctx.infos:
        found = _introduced_dtype(info.op)
        operands = dtype_of(info.op.lhs.type) if isinstance(info.op, tl.DotOp) else None
        if operands is not None and operands not in ctx.spec.dtypes:
            # a product of operands the target has no type for: no matrix unit (nor vector unit) takes it
            found = (operands, f"dot of {operands} operands")
            if operands in ctx.spec.convert_dtypes:
                yield ctx.report(
                    info.op,
                    f"dot of {operands} operands: {target_text(ctx)} only stores and converts {operands}, "
                    f"no matrix instruction multiplies it",
                    hint=f"cast the tiles to bf16 before the dot (dot<{info.op.acc_dtype.data}>(cast<bf16>(a), "
                    "cast<bf16>(b), acc)), or target sm_90 or gfx942 (they have fp8 matrix units)",
                )
                continue
        if found is None or found[0] in have:
            continue
        dtype, what = found
        span = ctx.span(info.op)
        key = (span.line if span else 0, dtype)
        if key in seen:
            continue
        seen.add(key)
        yield ctx.report(info.op, f"{what}: {target_text(ctx)} does not have {dtype}", hint=hint(dtype))


# ---- target.wgmma-dtype --------------------------------------------------------------------------


@rule(
    "target.wgmma-dtype",
    family="target",
    severity="error",
    summary="wgmma operand and accumulator dtypes the instruction does not take (f64, i32, ...)",
    explanation="""
`wgmma.mma_async` multiplies f16, bf16, tf32 (f32 operands), fp8 (e4m3, e5m2) and 8-bit
integers (the table's `[wgmma] dtypes`); there is no f64 or other integer wgmma (Hopper's f64
tensor-core path is the warp-level DMMA, reached from a tile-level `dot<f64>`). The accumulator
is f32 (also f16 for f16 and fp8 operands), and i32 for i8/u8.
""",
    bad="""
    kernel mm64<BM = 64, BN = 64, BK = 16>(a: global f64[M, K], b: global f64[K, N], c: out global f64[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_90 grid(M / BM, N / BN) warpgroups(1)
    {
      as = smem(f64[BM, BK])
      bs = smem(f64[BK, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f64[BM, BN])
      for k in 0 .. K / BK {
        store(as[0 : BM], load(a[m0 : m0 + BM, k * BK : k * BK + BK]))
        store(bs[0 : BK], load(b[k * BK : k * BK + BK, n0 : n0 + BN]))
        fence.async()
        barrier()
        acc = wgmma(as[0 : BM], bs[0 : BK], acc)  # <-
        wgmma.wait(0)
        barrier()
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
    good="""
    kernel mm64<BM = 64, BN = 64, BK = 16>(a: global f64[M, K], b: global f64[K, N], c: out global f64[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_90 grid(M / BM, N / BN) warpgroups(1)
    {
      as = smem(f64[BM, BK])
      bs = smem(f64[BK, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f64[BM, BN])
      for k in 0 .. K / BK {
        store(as[0 : BM], load(a[m0 : m0 + BM, k * BK : k * BK + BK]))
        store(bs[0 : BK], load(b[k * BK : k * BK + BK, n0 : n0 + BN]))
        barrier()
        acc = dot<f64>(load(as[0 : BM]), load(bs[0 : BK]), acc)
        barrier()
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
)
def wgmma_dtypes(ctx: Context) -> Iterator[Diagnostic]:
    table = ctx.spec.wgmma
    if not table or not ctx.spec.has("wgmma"):
        return
    for info in ctx.ops(ex.WgmmaOp):
        op = info.op
        operand = dtype_of(op.a.type)
        acc = dtype_of(op.acc.type)
        if operand not in table["dtypes"]:
            hint = (
                "multiply at the tile level: acc = dot<f64>(load(A), load(B), acc)"
                if operand == "f64"
                else (
                    f"convert the operands to one of {', '.join(table['dtypes'])}, or multiply at the tile level with dot"
                )
            )
            yield ctx.report(
                op,
                f"wgmma does not multiply {operand} operands (it takes {', '.join(table['dtypes'])})",
                hint=hint,
            )
            continue
        if operand in ("i8", "u8"):
            allowed = list(table["int_acc"])
        else:
            allowed = list(table["float_acc"]) + (["f16"] if operand in table["f16_acc_operands"] else [])
        if acc not in allowed:
            yield ctx.report(
                op,
                f"wgmma of {operand} operands accumulates in {' or '.join(allowed)}, not {acc}",
                hint=f"make the accumulator {allowed[0]}: zeros({allowed[0]}[...]), and cast the result afterwards",
            )


# ---- target.layout -------------------------------------------------------------------------------


def _product(values: tuple[int, ...]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


@rule(
    "target.layout",
    family="target",
    severity="error",
    summary="a register layout the target cannot have (mma version, threads per warp, warps)",
    explanation="""
`mma(version, warps_per_cta, instr_shape)` is the register layout of an NVIDIA matrix
instruction's accumulator: version 2 is `mma.sync` (sm_80 and later), version 3 is wgmma (sm_90
only); AMD's MFMA and mtia-sim's dot engine have no such layout (the table's
`mma_layout_versions`). In a `blocked(size_per_thread, threads_per_warp, warps_per_cta, order)`
layout the threads per warp multiply to the hardware warp size (32 on NVIDIA, 64 on AMD), and in
both kinds the warps per CTA multiply to the hardware warps holding the tile: those of the
program, or of one unit of the role it is computed in.
""",
    bad="""
    kernel relayout<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
      where M % BM == 0, N % BN == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
    {
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      t = load(x[m0 : m0 + BM, n0 : n0 + BN])
      v = convert_layout(t, mma([3], [4, 1], [16, 64, 16]))  # <-
      store(y[m0 : m0 + BM, n0 : n0 + BN], v)
    }
    """,
    good="""
    kernel relayout<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
      where M % BM == 0, N % BN == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
    {
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      t = load(x[m0 : m0 + BM, n0 : n0 + BN])
      v = convert_layout(t, mma([2], [4, 1], [16, 8]))
      store(y[m0 : m0 + BM, n0 : n0 + BN], v)
    }
    """,
)
def layout_legality(ctx: Context) -> Iterator[Diagnostic]:
    gpu = is_gpu(ctx)
    for info in ctx.ops(ex.ConvertLayoutOp):
        lay = info.op.layout.data
        if lay.kind == "mma":
            version = lay.params[0][0] if lay.params and lay.params[0] else None
            versions = ctx.spec.mma_layout_versions
            if version not in versions:
                have = ", ".join(str(v) for v in versions)
                yield ctx.report(
                    info.op,
                    f"mma layout version {version}: {target_text(ctx)} has "
                    + (f"mma layouts of version {have} only" if versions else "no NVIDIA mma layouts"),
                    hint=(
                        f"use mma([{versions[-1]}], ...)"
                        if versions
                        else "use a blocked(...) layout, or leave the layout to the lowering"
                    ),
                )
                continue
        if not gpu:
            continue
        threads = tile_threads(ctx, info.role)
        hw_warps = max(1, threads // ctx.spec.warp_size)
        where = "one unit of " + role_text(info.role) if info.role is not None else launch_text(ctx)
        if lay.kind == "blocked":
            tpw = _product(lay.params[1])
            if tpw != ctx.spec.warp_size:
                yield ctx.report(
                    info.op,
                    f"blocked layout: threads_per_warp {list(lay.params[1])} makes {tpw} threads, "
                    f"but a warp of {target_text(ctx)} has {ctx.spec.warp_size}",
                    hint=f"make threads_per_warp multiply to {ctx.spec.warp_size}",
                )
                continue
        wpc = lay.params[2] if lay.kind == "blocked" else lay.params[1]
        if _product(wpc) != hw_warps:
            yield ctx.report(
                info.op,
                f"{lay.kind} layout: warps_per_cta {list(wpc)} makes {_product(wpc)} warps, but the tile is held by "
                f"{where}: {hw_warps} warp{'s' if hw_warps != 1 else ''} of {ctx.spec.warp_size} threads",
                hint=f"make warps_per_cta multiply to {hw_warps}",
            )
