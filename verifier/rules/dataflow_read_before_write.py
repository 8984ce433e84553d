"""`dataflow.read-before-write`: a read of shared memory that nothing writes first, or of an
output before the program wrote it."""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.ir import SSAValue

from kir.diagnostics import Diagnostic
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, SmemType
from verifier.context import Context, OpInfo
from verifier.registry import rule
from verifier.rules.dataflow_facts import arg_name, name_of, reads, writes


def may_precede(ctx: Context, first: OpInfo, then: OpInfo) -> bool:
    """Whether `first` can run before `then` in some schedule: earlier in program order, in an
    enclosing loop of both (a later statement runs before it in the next iteration), or in
    another role (roles run concurrently)."""
    if first.role is not None and then.role is not None and first.role is not then.role:
        return True
    if ctx.order[first.op] < ctx.order[then.op]:
        return True
    return any(loop in first.loops for loop in then.loops)


# ---- dataflow.read-before-write --------------------------------------------------------------------------


@rule(
    "dataflow.read-before-write",
    family="dataflow",
    severity="error",
    summary="a read of memory that nothing has written yet",
    explanation="""
Shared memory starts with garbage: a `load`, `wgmma` or `tma.store` from a shared buffer
that no `store`, `tma.load` or `cp.async` writes before it (in program order, in an enclosing
loop, or in another role) reads whatever the previous CTA left there. That is an error.

An `out` tensor read by a program before that program has written it reads the poison the
harness fills outputs with (or the caller's stale data): reported as a warning, since a kernel
may legitimately read an in/out tensor it was given. Accumulating into the output (`c = c +
a @ b`) is the usual cause: accumulate in registers and store once.
""",
    bad="""
kernel stage<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[BM, BN])
  tmp = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]))
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(tmp[0 : BM]))  # <-
}
""",
    good="""
kernel stage<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[BM, BN])
  tmp = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  store(buf[0 : BM], load(x[m0 : m0 + BM, n0 : n0 + BN]))
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
}
""",
)
def check_read_before_write(ctx: Context) -> Iterator[Diagnostic]:
    written: dict[SSAValue, list[OpInfo]] = {}
    for info in ctx.infos:
        for ref in writes(info.op):
            written.setdefault(ref.mem, []).append(info)
    for info in ctx.infos:
        for ref in reads(info.op):
            mem = ref.mem
            earlier = [w for w in written.get(mem, []) if w.op is not info.op and may_precede(ctx, w, info)]
            if earlier:
                continue
            if isinstance(mem.type, SmemType):
                later = written.get(mem, [])
                yield ctx.report(
                    info.op,
                    f"{ref.verb} shared buffer `{name_of(mem)}`, which nothing has written before: "
                    "shared memory starts with garbage"
                    + (" (the only writes come after this read, and no loop brings them round)" if later else ""),
                    hint=f"fill `{name_of(mem)}` first (store, tma.load or cp.async, then the wait), or read the buffer that was filled",
                    related=[(w.op, "written only here, later") for w in later[:1]],
                )
            elif isinstance(mem.type, GlobalType) and mem.type.is_out and not isinstance(info.op, tl.AtomicOp):
                name = arg_name(ctx, mem)
                later = written.get(mem, [])
                yield ctx.report(
                    info.op,
                    f"{ref.verb} output `{name}` before this program writes it: it holds the poison the harness "
                    "fills outputs with (or stale data), not a result",
                    hint="keep the value in registers (accumulate in a loop-carried tile) and store once; read inputs, not outputs",
                    related=[(w.op, "the first write") for w in later[:1]],
                    severity="warning",
                )
