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

import re
from collections.abc import Callable, Iterator

from xdsl.ir import Operation

from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import TileType, dtype_of
from kir.spans import span_of
from kir.targets import TargetSpec, spec, targets
from verifier.context import Context
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.numerics import f32_accumulator

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


# ---- fixes: the same program written with what the target has --------------------------------


def call_args(text: str | None) -> list[str] | None:
    """The top-level arguments of a call's text, `f(a[i, j], b, k = c)` -> `a[i, j]`, `b`,
    `k = c`; None where `text` is not one call."""
    if not text or "(" not in text or not text.endswith(")"):
        return None
    open_at = text.index("(")
    out, depth, start = [], 0, open_at + 1
    for i in range(open_at + 1, len(text) - 1):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                return None
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    last = text[start:-1].strip()
    return [*out, last] if last or out else []


def retargeted(ctx: Context, fits: Callable[[TargetSpec], bool]) -> list[tuple[Edit, str]]:
    """Edits of the kernel's `target` clause to each target for which `fits` holds (the
    target's own vendor first), with the target's name."""
    span = ctx.program.clause_spans.get("target")
    if span is None:
        return []
    names = [t for t in targets() if t not in (ctx.target, "interp") and fits(spec(t))]
    names.sort(key=lambda t: spec(t).vendor != ctx.spec.vendor)
    return [(Edit(span, t), t) for t in names[:2]]


def _statement_lines(edits: list[Edit]) -> frozenset[int]:
    """The lines that edits remove whole."""
    return frozenset(
        e.span.line for e in edits if e.span.col == 1 and e.span.end_line == e.span.line + 1 and not e.text
    )


def flattened(ctx: Context, role: st.RoleOp, dropped: frozenset[int] = frozenset()) -> list[Edit] | None:
    """The edits that write a role's body at the top level: its `role ... {` and `}` lines
    removed and the lines between dedented (those in `dropped`, removed by another edit, left
    alone)."""
    span = span_of(role)
    lines = (ctx.program.source or "").splitlines()
    if span is None or not 1 <= span.line < span.end_line <= len(lines):
        return None
    header, closing = lines[span.line - 1], lines[span.end_line - 1]
    if not header.split("#", 1)[0].rstrip().endswith("{") or closing.strip() != "}":
        return None
    body = [n for n in range(span.line + 1, span.end_line) if lines[n - 1].strip() and n not in dropped]
    outer = len(header) - len(header.lstrip())
    inner = min((len(lines[n - 1]) - len(lines[n - 1].lstrip()) for n in body), default=outer)
    extra = inner - outer
    edits = [Edit(Span(n, 1, n + 1, 1, span.file), "") for n in (span.line, span.end_line)]
    if extra > 0:
        edits += [Edit(Span(n, 1, n, 1 + extra, span.file), "") for n in body]
    return edits


def _plain_copy(ctx: Context, op: Operation) -> Edit | None:
    """`store(dst, load(src))` in place of a TMA copy or a cp.async (its mask, if any, on both)."""
    args = call_args(ctx.text_of(op))
    if args is None or len(args) < 2:
        return None
    src, dst, rest = args[0], args[1], args[2:]
    if any(not a.replace(" ", "").startswith(("mask=", "signal=")) for a in rest):
        return None
    mask = next((f", {a}" for a in rest if a.replace(" ", "").startswith("mask=")), "")
    return ctx.replace_in(op, ctx.text_of(op) or "", f"store({dst}, load({src}{mask}){mask})")


def _as_barrier(ctx: Context, op: Operation) -> Edit | None:
    return ctx.replace_in(op, ctx.text_of(op) or "", "barrier()")


def synchronous(ctx: Context) -> tuple[tuple[Edit, ...], str] | None:
    """The copies and their synchronization written with what the target has: a TMA copy or a
    cp.async becomes `store(dst, load(src))`; a cp.async.wait becomes barrier() (dropped where
    one follows); an mbarrier the target lacks (or one that only TMA loads signal) goes with
    its expects, each arrive becomes barrier() and each wait barrier() too, or nothing where
    arrives order it; roles that arrive or wait on such an mbarrier are written at the top
    level, in their order. None where some part of it cannot be written out."""
    edits: list[Edit | None] = []
    said: list[str] = []
    no_tma, no_cp, no_mbar = not ctx.spec.has("tma"), not ctx.spec.has("cp_async"), not ctx.spec.has("mbarrier")
    copies = [*(ctx.ops(ex.TmaLoadOp, ex.TmaStoreOp) if no_tma else []), *(ctx.ops(ex.CpAsyncOp) if no_cp else [])]
    for info in copies:
        edits.append(copy := _plain_copy(ctx, info.op))
        if copy is not None and not said:
            said.append(
                f"`{copy.text}` in place of the {_OP_TEXT[type(info.op)]}" + (" (and so on)" if len(copies) > 1 else "")
            )
    if no_tma and list(ctx.ops(ex.TmaStoreWaitOp)):
        edits += [ctx.drop_line(info.op) for info in ctx.ops(ex.TmaStoreWaitOp)]
        said.append("tma.store_wait dropped")
    if no_cp and list(ctx.ops(ex.CpAsyncCommitOp, ex.CpAsyncWaitOp)):
        said.append("cp.async.commit and cp.async.wait dropped (barrier() orders the stores)")
        edits += [ctx.drop_line(info.op) for info in ctx.ops(ex.CpAsyncCommitOp)]
        for wait in ctx.ops(ex.CpAsyncWaitOp):
            followed = isinstance(wait.op.next_op, ex.CtaBarrierOp)
            edits.append(ctx.drop_line(wait.op) if followed else _as_barrier(ctx, wait.op))
    in_roles = False
    for alloc in ctx.ops(ex.MBarrierAllocOp):
        users = [u.operation for u in alloc.op.res.uses]
        arrived = any(isinstance(u, ex.ArriveOp) for u in users)
        tma_only = no_tma and all(isinstance(u, ex.TmaLoadOp | ex.ExpectOp | ex.WaitOp) for u in users)
        if not (no_mbar or tma_only):
            continue
        edits.append(ctx.drop_line(alloc.op))
        name = alloc.op.res.name_hint or "..."
        if not users:
            said.append(f"the unused mbarrier `{name}` dropped")
        else:
            waits = ", its arrives as barrier() and its waits with them" if arrived else ", its waits as barrier()"
            said.append(f"the mbarrier `{name}` dropped{waits}")
        for user in users:
            if isinstance(user, ex.ExpectOp):
                edits.append(ctx.drop_line(user))
            elif isinstance(user, ex.ArriveOp):
                edits.append(_as_barrier(ctx, user))
            elif isinstance(user, ex.WaitOp):
                edits.append(ctx.drop_line(user) if arrived else _as_barrier(ctx, user))
            elif not (isinstance(user, ex.TmaLoadOp) and no_tma):
                return None
            in_roles = in_roles or ctx.info_of[user].role is not None
    if None in edits or not edits:
        return None
    made = list(dict.fromkeys(e for e in edits if e is not None))
    if in_roles:
        for role in ctx.roles:
            flat = flattened(ctx, role, _statement_lines(made))
            if flat is None:
                return None
            made += flat
        said.append("the roles written at the top level")
    return tuple(made), "; ".join(said)


def _loaded(view: str) -> str:
    """A shared view read into registers: `load(v)`, or `trans(load(v))` for `trans(v)`."""
    if view.startswith("trans(") and view.endswith(")"):
        return f"trans(load({view[len('trans(') : -1]}))"
    return f"load({view})"


def tile_dots(ctx: Context, ops: list[ex.WgmmaOp], waits: bool) -> tuple[tuple[Edit, ...], str] | None:
    """Each wgmma written as the tile-level `dot` of its operands loaded from shared memory,
    and (with `waits`) the wgmma.waits dropped: a tile-level dot completes in program order."""
    edits: list[Edit | None] = []
    shown = ""
    for op in ops:
        args = call_args(ctx.text_of(op))
        if args is None or len(args) != 3:
            return None
        a = args[0] if isinstance(op.a.type, TileType) else _loaded(args[0])
        shown = f"dot<{dtype_of(op.acc.type)}>({a}, {_loaded(args[1])}, {args[2]})"
        edits.append(ctx.replace_in(op, ctx.text_of(op) or "", shown))
    dropped = ""
    if waits and list(ctx.ops(ex.WgmmaWaitOp)):
        edits += [ctx.drop_line(info.op) for info in ctx.ops(ex.WgmmaWaitOp)]
        dropped = ", and drop wgmma.wait (a tile-level dot completes in program order)"
    if None in edits or not edits:
        return None
    return tuple(e for e in edits if e is not None), f"multiply at the tile level: `{shown}`{dropped}"


_FEATURE_TEXT = {"tma": "TMA", "mbarrier": "mbarriers", "mbarrier_tx": "transaction bytes", "cp_async": "cp.async"}


def _portable(ctx: Context, op: Operation, feature: str) -> tuple[tuple[Edit, ...], str]:
    """The fix of an op the target lacks: the program written without TMA, cp.async or the
    mbarriers the target lacks (`synchronous`), else a target that has `feature`."""
    span = ctx.span(op)
    if span is None:
        return (), ""
    plain = synchronous(ctx)
    others = retargeted(ctx, lambda t: t.has(feature))
    made = first_fix(ctx, ctx.current_rule.id, span.line, [plain[0] if plain else None, *(e for e, _ in others)])
    if not made:
        return (), ""
    if plain and made == plain[0]:
        return made, f"do without {_FEATURE_TEXT[feature]}: {plain[1]}"
    chosen = next(t for e, t in others if made == (e,))
    return made, f"target {chosen}, which has {_FEATURE_TEXT[feature]}"


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
        edits, hint = _portable(ctx, info.op, "tma")
        yield ctx.report(
            info.op,
            f"{_OP_TEXT[type(info.op)]} needs the Tensor Memory Accelerator, which {target_text(ctx)} does not have",
            hint=hint,
            edits=edits,
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
    dots = tile_dots(ctx, [info.op for info in ctx.ops(ex.WgmmaOp)], waits=True)
    for info in ctx.ops(ex.WgmmaOp, ex.WgmmaWaitOp):
        span = ctx.span(info.op)
        others = retargeted(ctx, lambda t: t.has("wgmma"))
        edits = first_fix(ctx, ctx.current_rule.id, span.line if span else 0, [dots[0] if dots else None])
        hint = dots[1] if edits and dots else ""
        if not edits and others:
            target, name = others[0]
            edits = first_fix(ctx, ctx.current_rule.id, span.line if span else 0, [target])
            hint = f"target {name}, which has wgmma" if edits else ""
        yield ctx.report(
            info.op,
            f"{_OP_TEXT[type(info.op)]} is a Hopper (sm_90) instruction; {target_text(ctx)} does not have it",
            hint=hint,
            edits=edits,
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
            edits, hint = _portable(ctx, op, "mbarrier")
            yield ctx.report(op, f"{what}: {target_text(ctx)} has no mbarriers", hint=hint, edits=edits)
        elif isinstance(op, ex.ExpectOp):
            edits, hint = _portable(ctx, op, "mbarrier_tx")
            yield ctx.report(
                op,
                f"expect adds transaction bytes to an mbarrier (mbarrier.expect_tx), which {target_text(ctx)} does not have",
                hint=hint,
                edits=edits,
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
        edits, hint = _portable(ctx, info.op, "cp_async")
        yield ctx.report(
            info.op,
            f"{_OP_TEXT[type(info.op)]}: {target_text(ctx)} has no asynchronous copy into shared memory",
            hint=hint,
            edits=edits,
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
    budgeted = [role for role in ctx.roles if role.regs.data]
    # every budget goes at once: the fix of one is the fix of all
    dropped = [ctx.replace_in(role, f" regs({role.regs.data})", "") for role in budgeted]
    shown = ", ".join(f"`regs({role.regs.data})`" for role in budgeted)
    for role in budgeted:
        yield ctx.report(
            role,
            f"regs({role.regs.data}) on {role_text(role)}: per-role register budgets need setmaxnreg, "
            f"which {target_text(ctx)} does not have",
            hint=f"drop the roles' budgets ({shown}): every warp gets the kernel's register budget (launch bounds)",
            edits=dropped,
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
        span = ctx.span(role)
        edits = first_fix(ctx, ctx.current_rule.id, span.line if span else 0, [tuple(flattened(ctx, role) or ())])
        yield ctx.report(
            role,
            f"{role_text(role)}: {target_text(ctx)} runs one thread of control per processing element and has no warp "
            "roles (a DMA, cp.async, overlaps copies with compute instead)",
            hint="write the role's statements at the top level" if edits else "",
            edits=edits,
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

    def fix(line: int, dtype: str) -> tuple[tuple[Edit, ...], str]:
        """f32 for f64 on the line, else a target that has the dtype."""
        narrowed = _narrowed(ctx, line, dtype, "f32") if dtype == "f64" else None
        others = retargeted(ctx, lambda t: dtype in t.dtypes)
        made = first_fix(ctx, ctx.current_rule.id, line, [narrowed, *(e for e, _ in others)])
        if not made:
            return (), ""
        if made == narrowed:
            return made, f"use f32 on this line (`{dtype}` -> `f32`)"
        return made, f"target {next(t for e, t in others if made == (e,))}, which has {dtype}"

    seen: set[tuple[int, str]] = set()
    for name, arg in ctx.kernel.args:
        dtype = dtype_of(arg.type)
        span = ctx.program.arg_spans.get(name)
        if dtype not in have:
            seen.add((span.line if span else 0, dtype))
            edits, hint = fix(span.line if span else 0, dtype)
            yield ctx.report(
                span or ctx.program.span(),
                f"argument `{name}` is {dtype}, which {target_text(ctx)} does not have",
                hint=hint,
                edits=edits,
            )
    for info in ctx.infos:
        found = _introduced_dtype(info.op)
        operands = dtype_of(info.op.lhs.type) if isinstance(info.op, tl.DotOp) else None
        if operands is not None and operands not in ctx.spec.dtypes:
            # a product of operands the target has no type for: no matrix unit (nor vector unit) takes it
            found = (operands, f"dot of {operands} operands")
            if operands in ctx.spec.convert_dtypes:
                edits, hint = _widened_dot(ctx, info.op, operands)
                yield ctx.report(
                    info.op,
                    f"dot of {operands} operands: {target_text(ctx)} only stores and converts {operands}, "
                    f"no matrix instruction multiplies it",
                    hint=hint,
                    edits=edits,
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
        edits, hint = fix(key[0], dtype)
        yield ctx.report(info.op, f"{what}: {target_text(ctx)} does not have {dtype}", hint=hint, edits=edits)


def _narrowed(ctx: Context, line: int, dtype: str, to: str) -> tuple[Edit, ...] | None:
    """Every `dtype` written on the line made `to` (the line's text outside its comment)."""
    lines = (ctx.program.source or "").splitlines()
    if not 1 <= line <= len(lines):
        return None
    code = lines[line - 1].split("#", 1)[0]
    found = [m.start() for m in re.finditer(rf"(?<![\w.]){dtype}(?!\w)", code)]
    return tuple(Edit(Span(line, c + 1, line, c + 1 + len(dtype), ctx.file), to) for c in found) or None


def _widened_dot(ctx: Context, op: tl.DotOp, operands: str) -> tuple[tuple[Edit, ...], str]:
    """The dot's tiles cast to bf16 first, else a target whose matrix units take `operands`."""
    span = ctx.span(op)
    if span is None:
        return (), ""
    sides = [ctx.operand_span(op, v) for v in (op.lhs, op.rhs)]
    cast = tuple(Edit(s, f"cast<bf16>({ctx.text_of(s)})") for s in sides if s is not None) if all(sides) else None
    others = retargeted(ctx, lambda t: operands in t.dtypes)
    made = first_fix(ctx, ctx.current_rule.id, span.line, [cast, *(e for e, _ in others)])
    if not made:
        return (), ""
    if made == cast:
        return made, "cast the tiles to bf16 before the dot: " + ", ".join(f"`{e.text}`" for e in made)
    return made, f"target {next(t for e, t in others if made == (e,))}, which has {operands} matrix units"


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
            span = ctx.span(op)
            alone = len(list(ctx.ops(ex.WgmmaOp))) == 1
            dots = tile_dots(ctx, [op], waits=alone)
            edits = first_fix(ctx, ctx.current_rule.id, span.line if span else 0, [dots[0] if dots else None])
            yield ctx.report(
                op,
                f"wgmma does not multiply {operand} operands (it takes {', '.join(table['dtypes'])})",
                hint=dots[1] if edits and dots else "",
                edits=edits,
            )
            continue
        if operand in ("i8", "u8"):
            allowed = list(table["int_acc"])
        else:
            allowed = list(table["float_acc"]) + (["f16"] if operand in table["f16_acc_operands"] else [])
        if acc not in allowed:
            edits, hint = f32_accumulator(ctx, op, ctx.current_rule.id) if allowed[0] == "f32" else ((), "")
            yield ctx.report(
                op,
                f"wgmma of {operand} operands accumulates in {' or '.join(allowed)}, not {acc}",
                hint=hint,
                edits=edits,
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
                edits, hint = _relaid(ctx, info.op, lambda parts: _mma_candidates(parts, versions))  # noqa: B023 - called at once
                yield ctx.report(
                    info.op,
                    f"mma layout version {version}: {target_text(ctx)} has "
                    + (f"mma layouts of version {have} only" if versions else "no NVIDIA mma layouts"),
                    hint=hint,
                    edits=edits,
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
                size = ctx.spec.warp_size
                edits, hint = _relaid(ctx, info.op, lambda parts: _scaled(parts, 1, size))  # noqa: B023 - called at once
                yield ctx.report(
                    info.op,
                    f"blocked layout: threads_per_warp {list(lay.params[1])} makes {tpw} threads, "
                    f"but a warp of {target_text(ctx)} has {ctx.spec.warp_size}",
                    hint=hint,
                    edits=edits,
                )
                continue
        wpc = lay.params[2] if lay.kind == "blocked" else lay.params[1]
        if _product(wpc) != hw_warps:
            index = 2 if lay.kind == "blocked" else 1
            edits, hint = _relaid(ctx, info.op, lambda parts: _scaled(parts, index, hw_warps))  # noqa: B023 - called at once
            yield ctx.report(
                info.op,
                f"{lay.kind} layout: warps_per_cta {list(wpc)} makes {_product(wpc)} warps, but the tile is held by "
                f"{where}: {hw_warps} warp{'s' if hw_warps != 1 else ''} of {ctx.spec.warp_size} threads",
                hint=hint,
                edits=edits,
            )


def _int_list(text: str) -> list[int] | None:
    inner = text.strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        return None
    try:
        return [int(x) for x in inner[1:-1].split(",") if x.strip()]
    except ValueError:
        return None


def _scaled(parts: list[str], index: int, total: int) -> list[list[str]]:
    """The layout's argument `index` (a list) with one entry scaled so that the list multiplies
    to `total`: the first entry that takes the whole factor, each tried in turn."""
    values = _int_list(parts[index]) if index < len(parts) else None
    if not values:
        return []
    have = _product(tuple(values))
    out = []
    for i, v in enumerate(values):
        if (v * total) % have == 0 and v * total // have >= 1:
            scaled = [*values[:i], v * total // have, *values[i + 1 :]]
            out.append([*parts[:index], str(scaled), *parts[index + 1 :]])
    return out


def _mma_candidates(parts: list[str], versions: tuple[int, ...]) -> list[list[str]]:
    """An `mma` layout of version 2 (mma.sync, instruction shape [16, 8]) where the target has
    it."""
    if 2 not in versions or len(parts) < 2:
        return []
    return [["[2]", parts[1], "[16, 8]"]]


def _relaid(
    ctx: Context, op: ex.ConvertLayoutOp, candidates: Callable[[list[str]], list[list[str]]]
) -> tuple[tuple[Edit, ...], str]:
    """The layout of a convert_layout written with the first candidate arguments that hold."""
    args = call_args(ctx.text_of(op))
    span = ctx.span(op)
    if args is None or len(args) != 2 or span is None:
        return (), ""
    layout = args[1]
    parts = call_args(layout)
    if parts is None:
        return (), ""
    kind = layout[: layout.index("(")]
    texts = [f"{kind}({', '.join(p)})" for p in candidates(parts)][:4]
    made = first_fix(ctx, ctx.current_rule.id, span.line, [ctx.replace_in(op, layout, t) for t in texts])
    if not made:
        return (), ""
    return made, f"use `{made[0].text}`"
