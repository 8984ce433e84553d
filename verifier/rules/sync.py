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

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterator
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
from verifier.registry import CHECKS, rule
from verifier.rules import sync_fix as fx
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


# ---- counterexamples and fixes ----------------------------------------------------------------


def witness(ctx: Context, fallback: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """How the program fails: the counterexample of the model check's first finding (the shapes
    of the small instance, where it stops, and the trace of synchronization events before it),
    or, when the run shows nothing, the rule's own schematic interleaving `fallback`."""
    found = model_run(ctx)
    if found and found[0].counterexample is not None:
        return found[0].counterexample
    return fallback


def step(ctx: Context, op: Operation, what: str, **where: Any) -> dict[str, Any]:
    """One event of a schematic trace, in the shape of the interpreter's (`kir.interp.trace`)."""
    info = ctx.info_of.get(op)
    role = info.role if info is not None else None
    out: dict[str, Any] = {"role": role.name_text if role is not None else "cta"}
    loops = info.loops if info is not None else ()
    if loops:
        out["iteration"] = {(loop.body.block.args[0].name_hint or "i"): where.pop("at", "k") for loop in loops[-1:]}
    else:
        where.pop("at", None)
    span = ctx.span(op)
    if span is not None:
        out["line"] = span.line
    out["op"] = what
    out.update(where)
    return out


TRACE_SHOWN = 8  # events of a counterexample's trace


def focus(cex: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a run's trace that concern its failure: those on the raced buffer's stage
    (and the barriers of that stage), or on the barriers the blocked waits wait on; the last few."""
    events = cex.get("trace") or []
    keep: list[dict[str, Any]] = []
    if "buffer" in cex and "element" in cex:
        stage = cex["element"][0] if cex["element"] else None
        for ev in events:
            same_buffer = ev.get("buffer") == cex["buffer"] and ev.get("stage", stage) == stage
            same_stage = "barrier" in ev and ev["barrier"].endswith(f"[{stage}]")
            if same_buffer or same_stage:
                keep.append(ev)
    elif "blocked" in cex:
        bars = {b.get("barrier") for b in cex["blocked"].values()}
        keep = [ev for ev in events if ev.get("barrier") in bars or ev.get("op") == "barrier()"]
    return (keep or events)[-TRACE_SHOWN:]


def trace_text(cex: dict[str, Any] | None, last: int = 4) -> str:
    """The end of a counterexample's trace, for a message."""
    events = (cex or {}).get("trace") or []
    if not events:
        return ""
    shown = []
    for ev in events[-last:]:
        it = ", ".join(f"{k} = {v}" for k, v in (ev.get("iteration") or {}).items())
        where = f"{ev.get('role', '?')}{' ' + it if it else ''}"
        phase = f" (phase {ev['phase']})" if "phase" in ev else ""
        shown.append(f"{where}: {ev.get('op', '?')}{phase}")
    return "; trace: " + " -> ".join(shown)


def fixed_hint(ctx: Context, edits: list[fx.Edit | None]) -> str:
    """The text of the first edit that makes the program pass the synchronization check, or ""."""
    edit = fx.fixes(ctx, edits)
    return "" if edit is None else _checked_text(ctx, edit)


def _checked_text(ctx: Context, edit: fx.Edit) -> str:
    """A checked edit's hint text; the edit is kept to go with the diagnostic (`_mechanical`)."""
    text = _edit_text(edit)
    ctx.__dict__.setdefault("_sync_checked_edits", {})[text] = edit
    return text


def _mechanical(fn: Callable[[Context], Iterator[Diagnostic]]) -> Callable[[Context], Iterator[Diagnostic]]:
    """A rule whose checked hint also comes as `Diagnostic.edits`: a replacement within a line,
    or a statement inserted as a line of its own."""

    @functools.wraps(fn)
    def check(ctx: Context) -> Iterator[Diagnostic]:
        for d in fn(ctx):
            edit = ctx.__dict__.get("_sync_checked_edits", {}).get(d.hint) if d.hint else None
            if edit is not None and not d.edits and ctx.program.source is not None:
                made = edit.as_source_edits(ctx.program.source, ctx.file)
                if made is not None:
                    d = dataclasses.replace(d, edits=made)
            yield d

    return check


def _index_text(ctx: Context, value: SSAValue | None, fallback: str = "s") -> str:
    if value is None:
        return fallback
    owner = value.owner
    if isinstance(owner, tl.ConstOp):
        return str(owner.value.data)
    return value.name_hint or fallback


def _parities(ctx: Context, op: Operation, bar: SSAValue, reader: bool) -> list[str]:
    """Parity expressions to try for a wait at `op` on the ring `bar`: the round's phase (a
    reader) or the previous round's (a producer waiting for a release), then the constants."""
    info = ctx.info_of[op]
    out = []
    size = str(cast(MBarrierType, bar.type).size.data)
    if info.loops:
        iv = info.loops[-1].body.block.args[0].name_hint or "k"
        ring = f"{iv} / {size}" if size != "1" else iv
        out += [f"({ring}) % 2", f"({ring} + 1) % 2"] if reader else [f"({ring} + 1) % 2", f"({ring}) % 2"]
    out += ["0", "1"] if reader else ["1", "0"]
    return out


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
@_mechanical
def read_before_wait(ctx: Context) -> Iterator[Diagnostic]:
    writers = [a for a in all_accesses(ctx) if a.write and a.kind in ("tma", "cp.async")]
    signalled = wrong_signals(ctx)
    for acc in all_accesses(ctx):
        if acc.write:
            continue
        fills = [w for w in writers if w.buffer is acc.buffer]
        if not fills:
            continue
        doms = list(dominators(ctx, acc.op))
        for w in fills:
            if w.kind == "tma":
                if w.op in signalled:
                    continue  # the copy signals the wrong barrier: reported there
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
                index = _index_text(ctx, acc.stage if acc.stage is not None else bar_index)
                # a buffer filled once is waited for once, before the loops of the reading role
                at = _hoisted(ctx, acc.op) if not ctx.info_of[w.op].loops else acc.op
                waits = [f"wait({bar.name_hint}[{index}], parity = {p})" for p in _parities(ctx, at, bar, True)]
                name = acc.op.name.removeprefix("kir.")
                cex = witness(
                    ctx,
                    {
                        "trace": [
                            step(ctx, w.op, "tma.load issued", buffer=acc.buffer.res.name_hint, barrier=bar.name_hint),
                            step(
                                ctx, acc.op, f"{name} reads before the copy completes", buffer=acc.buffer.res.name_hint
                            ),
                        ]
                    },
                )
                yield ctx.report(
                    at,
                    f"{name} reads `{_buf_name(acc)}`, which the tma.load filling it "
                    f"completes on `{_bar_name(ctx, bar, bar_index)}`, but no wait on `{bar.name_hint}` for this "
                    "stage comes before it" + (" (nor before the loop)" if at is not acc.op else "") + trace_text(cex),
                    fixed_hint(ctx, [fx.insert_before(at, text) for text in waits]),
                    related=[(w.op, "the asynchronous copy that fills it")]
                    + ([(acc.op, "the read")] if at is not acc.op else []),
                    counterexample=cex,
                )
                break
            if w.kind == "cp.async" and role_of(ctx, w.op) is role_of(ctx, acc.op):
                if any(isinstance(d, ex.CpAsyncWaitOp) for d in doms):
                    continue
                cex = witness(
                    ctx,
                    {
                        "trace": [
                            step(ctx, w.op, "cp.async issued", buffer=acc.buffer.res.name_hint),
                            step(ctx, acc.op, "read with the copy in flight", buffer=acc.buffer.res.name_hint),
                        ]
                    },
                )
                yield ctx.report(
                    acc.op,
                    f"reads `{_buf_name(acc)}`, which a cp.async fills, before any cp.async.wait" + trace_text(cex),
                    fixed_hint(ctx, [fx.insert_before(acc.op, "cp.async.wait(0)")]),
                    related=[(w.op, "the copy")],
                    counterexample=cex,
                )
                break


def _sized_buffers(value: SSAValue, depth: int = 0) -> set[Operation]:
    """The shared buffers whose `sizeof` an expect's byte count adds up."""
    owner = value.owner
    if isinstance(owner, ex.SizeofOp):
        buf = _buffer_of(owner.mem)
        return {buf} if buf is not None else set()
    if isinstance(owner, tl.BinaryOp) and depth < 8:
        return _sized_buffers(owner.lhs, depth + 1) | _sized_buffers(owner.rhs, depth + 1)
    return set()


def wrong_signals(ctx: Context) -> dict[ex.TmaLoadOp, tuple[SSAValue, SSAValue]]:
    """TMA copies that complete on another barrier than the one their data is announced on and
    waited for: the copy into X signals B, while an expect beside it counts sizeof(X) on
    barrier C (and none on B does), or every reader of X waits on C, filled by a copy beside
    it, and none waits on B. Maps each such copy to C and its index."""
    if "_sync_wrong_signals" in ctx.__dict__:
        return ctx.__dict__["_sync_wrong_signals"]
    out: dict[ex.TmaLoadOp, tuple[SSAValue, SSAValue]] = {}
    ctx.__dict__["_sync_wrong_signals"] = out
    for info in ctx.ops(ex.TmaLoadOp):
        load = info.op
        buf = _buffer_of(load.dst)
        block = load.parent_block()
        if buf is None or block is None:
            continue
        expects = [o for o in block.ops if isinstance(o, ex.ExpectOp)]
        naming = [e for e in expects if buf in _sized_buffers(e.nbytes)]
        if naming and not any(e.bar is load.bar for e in naming):
            e = naming[0]
            out[load] = (e.bar, e.bar_index)
            continue
        if naming:
            continue  # its bytes are announced on the barrier it signals
        siblings = [o for o in block.ops if isinstance(o, ex.TmaLoadOp) and o is not load and o.bar is not load.bar]
        reads = [
            a for a in all_accesses(ctx) if a.buffer is buf and not a.write and role_of(ctx, a.op) is not info.role
        ]
        if not siblings or not reads:
            continue
        waited: set[SSAValue] | None = None
        for r in reads:
            bars = {d.bar for d in dominators(ctx, r.op) if isinstance(d, ex.WaitOp)}
            waited = bars if waited is None else waited & bars
        if not waited or load.bar in waited:
            continue
        for sib in siblings:
            if sib.bar in waited:
                out[load] = (sib.bar, sib.bar_index)
                break
    return out


@rule(
    "sync.signal-barrier",
    family="sync",
    severity="error",
    summary="a TMA copy completes on another mbarrier than the one its readers wait on",
    explanation="""
A `tma.load(..., X[s], signal = bar[s])` delivers its bytes to `bar[s]`; the readers of X know
the data is there by waiting on the barrier whose expect counts `sizeof(X[s])`. A copy that
signals another barrier (a release barrier, or the barrier of another buffer, often after
copying the line above) completes the wrong phase: the barrier the readers wait on lacks its
bytes (deadlock), or passes before this copy lands (race), and the other barrier completes a
phase early.""",
    bad=_GOOD_GEMM.replace(
        "      tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[s], signal = full[s])\n",
        "      tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[s], signal = empty[s])  # <-\n",
    ),
    good=_GOOD_GEMM,
)
@_mechanical
def signal_barrier(ctx: Context) -> Iterator[Diagnostic]:
    for load, (bar, index) in wrong_signals(ctx).items():
        text = fx.op_text(ctx, load) or ""
        old = f"signal = {_bar_name(ctx, load.bar, load.bar_index)}"
        new = f"signal = {_bar_name(ctx, bar, index)}"
        buf = _buffer_of(load.dst)
        bname = buf.res.name_hint if buf is not None else "the buffer"
        cex = witness(
            ctx,
            {
                "trace": [
                    step(ctx, load, f"tma.load into {bname} completes on {load.bar.name_hint}", buffer=bname),
                    {"op": f"the phase of {bar.name_hint} waits for bytes that never come to it"},
                ]
            },
        )
        yield ctx.report(
            load,
            f"the tma.load into `{bname}` signals `{_bar_name(ctx, load.bar, load.bar_index)}`, but the data of "
            f"`{bname}` is announced and waited for on `{_bar_name(ctx, bar, index)}`" + trace_text(cex),
            fixed_hint(ctx, [fx.replace_in(load, old, new)] if old in text else []),
            related=[
                (o, "the expect that counts its bytes")
                for o in (load.parent_block() or Block()).ops
                if isinstance(o, ex.ExpectOp) and o.bar is bar
            ],
            counterexample=cex,
        )


def _retire(
    ctx: Context, last_wait: ex.WgmmaWaitOp | None, newer: int, op: Operation
) -> tuple[Operation, str | None, list[fx.Edit | None]]:
    """Where to retire a wgmma still in flight at `op`, with `newer` wgmmas issued after it: the
    last wgmma.wait before `op` (its count as written, and the depths that retire it, deepest
    first), or, with none, a `wgmma.wait(0)` written before `op`."""
    if last_wait is None:
        return op, None, [fx.insert_before(op, "wgmma.wait(0)")]
    n_text = _call_args(ctx, last_wait) or str(_pending(ctx, last_wait))
    edits = [fx.replace_in(last_wait, f"wgmma.wait({n_text})", f"wgmma.wait({m})") for m in range(newer, -1, -1)]
    return last_wait, n_text, edits


def _hoisted(ctx: Context, op: Operation) -> Operation:
    """The outermost loop around `op` inside its role (`op` itself outside loops)."""
    info = ctx.info_of[op]
    inside = [loop for loop in info.loops if info.role is None or info.role.is_ancestor(loop)]
    return inside[0] if inside else op


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
        "      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))\n",
        "      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))  # <-\n",
    ),
    good=_GOOD_GEMM,
)
@_mechanical
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
        # a barrier() later in the writer's loop orders this trip's write after every role's
        # work of the previous trip (the roles reach barrier() as many times: sync.barrier-divergent)
        looped_barrier = any(
            isinstance(o, ex.CtaBarrierOp) for loop in ctx.info_of[w.op].loops for o in loop.body.block.ops
        )
        for role in reader_roles:
            releases = _releases(ctx, role, w.buffer)
            bars = {r.bar for r in releases}
            if (
                looped_barrier
                # a wait for the release of this stage (another barrier's, or another stage's, does not order it)
                or any(
                    isinstance(d, ex.WaitOp) and d.bar in bars and _same_index(ctx, d.bar_index, w.stage) for d in doms
                )
                or any(isinstance(d, ex.CtaBarrierOp) for d in doms)
            ):
                continue
            if not releases:
                found = _missing_release(ctx, w, doms, role)
                if found is not None:
                    reported.update(x.op for x in _refill(ctx, w, role)[1])
                    yield found
                    break
            # the wait belongs before the whole refill: the copies of this block that write
            # stages of the readers' buffers, and the expects that announce them
            start, writes = _refill(ctx, w, role)
            reported.update(x.op for x in writes)
            rname = role.name_text if role is not None else "the CTA"
            hint = ""
            if releases:
                r = releases[0]
                index = _index_text(ctx, w.stage if w.stage is not None else r.bar_index)
                waits = [f"wait({r.bar.name_hint}[{index}], parity = {p})" for p in _parities(ctx, w.op, r.bar, False)]
                hint = fixed_hint(ctx, [fx.insert_before(start, text) for text in waits])
            reads = [
                r for r in all_accesses(ctx) if r.buffer is w.buffer and not r.write and role_of(ctx, r.op) is role
            ]
            bname = w.buffer.res.name_hint
            cex = witness(
                ctx,
                {
                    "trace": [
                        step(ctx, reads[0].op, "reads the stage in round r", at="k", buffer=bname),
                        step(
                            ctx, w.op, "refills the stage in round r + 1 before the read ends", at="k + S", buffer=bname
                        ),
                    ]
                },
            )
            yield ctx.report(
                start,
                f"refills `{_buf_name(w)}` while role `{rname}` may still read it: nothing here waits for "
                f"`{rname}` to release the stage"
                + (f" (it arrives on `{releases[0].bar.name_hint}`)" if releases else ", and it releases nothing")
                + trace_text(cex),
                hint,
                related=[(x.op, "a write into the stage") for x in writes if x.op is not start]
                + [(r.op, "the read it may overwrite") for r in reads[:1]],
                counterexample=cex,
            )
            break


def _missing_release(ctx: Context, w: Access, doms: list[Operation], role: st.RoleOp | None) -> Diagnostic | None:
    """The writer waits on a release barrier that nothing arrives on: the arrive is missing in
    the reading role, after its last use of the stage (after the wgmma.wait that retires a
    wgmma reading it)."""
    loops = ctx.info_of[w.op].loops
    arrived = {i.op.bar for i in ctx.ops(ex.ArriveOp, ex.ExpectOp)} | {i.op.bar for i in ctx.ops(ex.TmaLoadOp)}
    waits = [d for d in doms if isinstance(d, ex.WaitOp) and ctx.info_of[d].loops == loops and d.bar not in arrived]
    refilled = {a.buffer for a in _refill(ctx, w, role)[1]}  # one release frees every buffer of the stage
    reads = [r for r in all_accesses(ctx) if r.buffer in refilled and not r.write and role_of(ctx, r.op) is role]
    if not waits or not reads:
        return None
    wait = waits[0]
    last = reads[-1]
    after: Operation = last.op
    nxt = after.next_op
    while last.kind == "wgmma" and nxt is not None and not isinstance(nxt, ex.WgmmaOp):
        if isinstance(nxt, ex.WgmmaWaitOp):
            after = nxt
            break
        nxt = nxt.next_op
    index = _index_text(ctx, last.stage if last.stage is not None else wait.bar_index)
    rname = role.name_text if role is not None else "the CTA"
    bname = w.buffer.res.name_hint
    cex = witness(
        ctx,
        {
            "trace": [
                step(ctx, after, f"role `{rname}` is done with the stage and arrives on nothing", buffer=bname),
                step(ctx, wait, f"waits on `{wait.bar.name_hint}` for a release that never comes"),
            ]
        },
    )
    return ctx.report(
        after,
        f"role `{rname}` never arrives on `{wait.bar.name_hint}`, which the refill of `{_buf_name(w)}` waits on: "
        "the producer waits forever once the ring comes round (or, with the wrong parity, overwrites the stage)"
        + trace_text(cex),
        fixed_hint(ctx, [fx.insert_after(after, f"arrive({wait.bar.name_hint}[{index}])")]),
        related=[(wait, "the wait for the release"), (last.op, "the last read of the stage")],
        counterexample=cex,
        rule="sync.overwrite-before-release",
    )


def _refill(ctx: Context, w: Access, role: st.RoleOp | None) -> tuple[Operation, list[Access]]:
    """The first op of the refill that `w` is part of (where a wait for the readers' release
    goes) and the writes of that refill into buffers `role` reads."""
    read_bufs = {r.buffer for r in all_accesses(ctx) if not r.write and role_of(ctx, r.op) is role}
    block = w.op.parent_block()
    if block is None:
        return w.op, [w]
    writes = [a for o in block.ops for a in accesses(o) if a.write and a.buffer in read_bufs]
    first = writes[0].op if writes else w.op
    signals = {cast(ex.TmaLoadOp, a.op).bar for a in writes if a.kind == "tma"}
    start = first
    prev = first.prev_op
    while prev is not None:
        if isinstance(prev, ex.ExpectOp) and prev.bar in signals:
            start = prev
        elif not _pure(prev):
            break
        prev = prev.prev_op
    return start, writes or [w]


def _pure(op: Operation) -> bool:
    """An op that only computes a value (an index, a byte count): no memory, no synchronization."""
    return (
        bool(op.results)
        and not accesses(op)
        and not isinstance(op, ex.SmemAllocOp | ex.MBarrierAllocOp)
        and not op.regions
    )


def _pending(ctx: Context, op: ex.CpAsyncWaitOp | ex.WgmmaWaitOp) -> int | None:
    """The pending count of an async wait: a literal, or a static expression of parameters."""
    value = op.pending.data
    if isinstance(value, int):
        return value
    return ctx.static(op.pending)


def _call_args(ctx: Context, op: Operation) -> str | None:
    """The argument text of a one-line call statement: `3` of `cp.async.wait(3)`."""
    text = fx.op_text(ctx, op)
    if text is None or "(" not in text or not text.endswith(")"):
        return None
    return text[text.index("(") + 1 : -1]


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
@_mechanical
def arrive_before_retire(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(ex.ArriveOp):
        arrive = info.op
        in_flight: list[ex.WgmmaOp] = []
        last_wait: ex.WgmmaWaitOp | None = None  # the wgmma.wait that left them in flight
        for op in cast(Block, arrive.parent_block()).ops:
            if op is arrive:
                break
            if isinstance(op, ex.WgmmaOp):
                in_flight.append(op)
                last_wait = None
            elif isinstance(op, ex.WgmmaWaitOp):
                n = _pending(ctx, op) or 0
                in_flight = in_flight[len(in_flight) - n :] if n else []
                last_wait = op
        for wg in in_flight:
            reads = [a for a in accesses(wg) if _guards_writes(ctx, arrive.bar, a.buffer)]
            if not arrive_stage_matches(ctx, arrive, [a.stage for a in reads]):
                continue
            newer = len(in_flight) - 1 - in_flight.index(wg)  # wgmmas issued after this one
            blame, n_text, edits = _retire(ctx, last_wait, newer, arrive)
            what = (
                f"wgmma.wait({n_text}) leaves the wgmma reading the stage in flight, and the arrive"
                if n_text is not None
                else "the arrive"
            )
            cex = witness(
                ctx,
                {
                    "trace": [
                        step(ctx, wg, "wgmma issued, still reading the stage"),
                        step(ctx, arrive, "arrive releases the stage", barrier=arrive.bar.name_hint),
                        {"op": "the producer refills the stage while the wgmma reads it"},
                    ]
                },
            )
            yield ctx.report(
                blame,
                f"{what} on `{_bar_name(ctx, arrive.bar, arrive.bar_index)}` releases the stage while that wgmma "
                "has not been retired" + trace_text(cex),
                fixed_hint(ctx, edits),
                related=[(wg, "the wgmma still reading the stage")]
                + ([(arrive, "the arrive that releases it")] if blame is not arrive else []),
                counterexample=cex,
            )
            break


@rule(
    "sync.wgmma-result-in-flight",
    family="sync",
    severity="error",
    summary="the result of a wgmma is used before a wgmma.wait retires it",
    explanation="""
`acc = wgmma(a, b, acc)` only issues the multiply: its result is in the registers once
`wgmma.wait(n)` has retired it (n is how many of the newest wgmmas may stay in flight). Another
wgmma may take it as its accumulator (the chain stays in order), but any other use (scaling,
a softmax, a cast, a store, after the loop too) must come after a wait that retires it.""",
    bad=_GOOD_GEMM.replace(
        "      wgmma.wait(0)\n      arrive(empty[s])\n    }\n", "      arrive(empty[s])\n    }\n"
    ).replace(
        "    store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))\n",
        "    store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))  # <-\n",
    ),
    good=_GOOD_GEMM,
)
@_mechanical
def wgmma_result_in_flight(ctx: Context) -> Iterator[Diagnostic]:
    yield from _scan_in_flight(ctx, ctx.kernel.body.block)


def _scan_in_flight(ctx: Context, block: Block) -> Iterator[Diagnostic]:
    for op in block.ops:
        for region in op.regions:
            for inner in region.blocks:
                yield from _scan_in_flight(ctx, inner)
    yield from _uses_in_flight(ctx, block)


def _pending_at_end(ctx: Context, block: Block) -> tuple[list[tuple[ex.WgmmaOp, SSAValue]], ex.WgmmaWaitOp | None]:
    """The wgmmas of a block still in flight at its end, each with the value it stands for, and
    the block's wgmma.wait that left them so (None when none came after them)."""
    pending: list[tuple[ex.WgmmaOp, SSAValue]] = []
    last: ex.WgmmaWaitOp | None = None
    for op in block.ops:
        if isinstance(op, ex.WgmmaOp):
            pending.append((op, op.res))
            last = None
        elif isinstance(op, ex.WgmmaWaitOp):
            n = _pending(ctx, op) or 0
            pending = pending[len(pending) - n :] if n else []
            last = op
    return pending, last


def _uses_in_flight(ctx: Context, block: Block) -> Iterator[Diagnostic]:
    pending: list[tuple[ex.WgmmaOp, SSAValue]] = []
    last_wait: ex.WgmmaWaitOp | None = None
    for op in block.ops:
        if isinstance(op, ex.WgmmaOp):
            pending.append((op, op.res))
            last_wait = None
            continue
        if isinstance(op, ex.WgmmaWaitOp):
            n = _pending(ctx, op) or 0
            pending = pending[len(pending) - n :] if n else []
            last_wait = op
            continue
        if isinstance(op, st.YieldOp):
            continue  # carried to the next trip (or out of the loop: judged where it is used)
        values = {v: i for i, (_, v) in enumerate(pending)}
        used = [values[v] for v in op.operands if v in values]
        if used:
            i = min(used)
            wg = pending[i][0]
            newer = len(pending) - 1 - i
            blame, n_text, edits = _retire(ctx, last_wait, newer, op)
            what = (
                f"wgmma.wait({n_text}) leaves the wgmma in flight, and its result is used below"
                if n_text is not None
                else "the result of a wgmma is used here with no wgmma.wait retiring it"
            )
            cex = witness(
                ctx,
                {
                    "trace": [
                        step(ctx, wg, "wgmma issued: its result is not in the registers yet"),
                        step(ctx, op, "uses the result"),
                    ]
                },
            )
            yield ctx.report(
                blame,
                what + trace_text(cex),
                fixed_hint(ctx, edits),
                related=[(wg, "the wgmma in flight")] + ([(op, "the use")] if blame is not op else []),
                counterexample=cex,
            )
            return
        if isinstance(op, st.ForOp):
            body = op.body.block
            if any(isinstance(o, ex.WgmmaWaitOp) for o in body.ops):
                pending = []
            carried, body_wait = _pending_at_end(ctx, body)
            term = body.last_op
            if isinstance(term, st.YieldOp):
                for wg, v in carried:
                    for idx, out in enumerate(term.operands):
                        if out is v and idx < len(op.res):
                            pending.append((wg, op.res[idx]))
                            last_wait = body_wait  # the wait in the loop that leaves it in flight


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
@_mechanical
def parity(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(ex.WaitOp):
        wait = info.op
        ring = _ring(ctx, wait)
        if ring is None:
            yield from _first_wait_parity(ctx, info)
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
        seen = witness(ctx)
        if seen and seen.get("trace"):
            cex = {**cex, "trace": seen["trace"]}
        yield ctx.report(
            wait,
            f"the {kind} waits on `{wait.bar.name_hint}` with a parity that does not follow the {size}-stage ring"
            + (f": at {iv_name} = {at} it waits for the wrong phase" if at is not None else "")
            + trace_text(cex),
            _parity_hint(ctx, wait, [text.replace("k", iv_name).replace("S", ring_name)]),
            counterexample=cex,
        )


def _parity_hint(ctx: Context, wait: ex.WaitOp, candidates: list[str]) -> str:
    text = fx.op_text(ctx, wait) or ""
    at = text.find("parity = ")
    if at < 0:
        return ""
    old = text[at : text.rfind(")")]
    return fixed_hint(ctx, [fx.replace_in(wait, old, f"parity = {c}") for c in candidates])


def _first_wait_parity(ctx: Context, info: OpInfo[ex.WaitOp]) -> Iterator[Diagnostic]:
    """A wait outside loops, the first of its role on a barrier whose phase completes once (every
    arrive, expect and copy on it runs once): it waits for that first completion, parity 0.
    Parity 1 passes at once before the phase completes, and never after."""
    wait = info.op
    if info.loops or info.in_if or info.role is None:
        return
    p = wait.parity.owner
    if not isinstance(p, tl.ConstOp) or p.number != 1:
        return
    if any(isinstance(d, ex.WaitOp) and d.bar is wait.bar for d in dominators(ctx, wait)):
        return
    users = [
        i for i in ctx.infos if isinstance(i.op, ex.ArriveOp | ex.ExpectOp | ex.TmaLoadOp) and i.op.bar is wait.bar
    ]
    if not users or any(i.loops or i.in_if or i.role is info.role for i in users):
        return
    later = _after_in_loop(wait)
    if not any(not a.write for o in later for a in accesses(o)):
        return  # only a reader's wait is judged
    cex = witness(
        ctx,
        {
            "trace": [
                step(ctx, wait, f"wait({wait.bar.name_hint}, parity = 1) passes at once: no phase has completed yet"),
                step(ctx, users[-1].op, "completes phase 0 only now"),
            ]
        },
    )
    yield ctx.report(
        wait,
        f"the first wait on `{wait.bar.name_hint}` asks for parity 1, which passes before its only phase completes "
        "(and never once it has): it waits for nothing" + trace_text(cex),
        _parity_hint(ctx, wait, ["0"]),
        related=[(i.op, "what completes the phase") for i in users],
        counterexample=cex,
    )


def _dst_text(ctx: Context, copy: ex.TmaLoadOp) -> str:
    """The destination view of a copy as written (`as[s]`), for a byte count."""
    text = fx.op_text(ctx, copy) or ""
    name = copy.dst.name_hint or "buffer"
    at = text.find(f" {name}[")
    if at < 0:
        return f"{name}[{_index_text(ctx, copy.bar_index)}]"
    depth, end = 0, at + 1
    for i in range(at + 1, len(text)):
        depth += {"[": 1, "]": -1}.get(text[i], 0)
        if text[i] == "]" and depth == 0:
            end = i + 1
            break
    return text[at + 1 : end]


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
@_mechanical
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
        misrouted = wrong_signals(ctx)
        if any(o in misrouted and (o.bar is exp.bar or misrouted[o][0] is exp.bar) for o in block.ops):
            continue  # a copy signals the wrong barrier: reported at the copy
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
        names = " + ".join(f"sizeof({_dst_text(ctx, c)})" for c in copies)
        text = fx.op_text(ctx, exp) or ""
        old_bytes = text[text.find("bytes = ") : text.rfind(")")] if "bytes = " in text else ""
        cex = witness(
            ctx,
            {
                "trace": [step(ctx, exp, f"expect {announced} bytes", barrier=exp.bar.name_hint)]
                + [
                    step(ctx, c, f"tma.load delivers {n} bytes", barrier=exp.bar.name_hint)
                    for c, n in zip(copies, sizes, strict=True)
                ]
            },
        )
        yield ctx.report(
            exp,
            f"expect announces {announced} bytes but the tma.loads signalling `{_bar_name(ctx, exp.bar, exp.bar_index)}` "
            f"here deliver {delivered} ({parts}): {effect}" + trace_text(cex),
            fixed_hint(ctx, [fx.replace_in(exp, old_bytes, f"bytes = {names}")] if old_bytes else []),
            related=[(c, "a copy completing on this barrier") for c in copies],
            counterexample=cex,
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
@_mechanical
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
        text = fx.op_text(ctx, alloc) or ""
        at = text.find("count = ")
        old_count = text[at:].split(")")[0] if at >= 0 else ""
        name = alloc.res.name_hint
        cex = witness(
            ctx,
            {
                "count": count,
                "arrivals_per_phase": per_phase,
                "trace": [
                    step(ctx, i.op, f"{i.op.name.removeprefix('kir.')} x {ctx.units(i.role)}", barrier=name)
                    for i in users
                ]
                + [{"op": f"`{name}` phase 0 " + ("completes early" if per_phase > count else "never completes")}],
            },
        )
        yield ctx.report(
            alloc,
            f"`{name}` expects {count} arrival(s) per phase but receives {per_phase} ({detail}): {effect}"
            + trace_text(cex),
            fixed_hint(ctx, [fx.replace_in(alloc, old_count, f"count = {per_phase}")] if old_count else []),
            related=[(i.op, "an arrival") for i in users],
            counterexample=cex,
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
@_mechanical
def barrier_divergent(ctx: Context) -> Iterator[Diagnostic]:
    by_role: dict[st.RoleOp, list[OpInfo]] = {}
    for info in ctx.ops(ex.CtaBarrierOp):
        if info.in_if:
            cex = witness(
                ctx,
                {
                    "trace": [
                        step(ctx, info.op, "barrier() reached by the threads that take the branch"),
                        {"op": "the threads that skip it never arrive: the barrier waits forever"},
                    ]
                },
            )
            yield ctx.report(
                info.op,
                "barrier() under an if: threads that skip the branch never reach it" + trace_text(cex),
                fixed_hint(ctx, [_out_of_if(ctx, info.op)]),
                related=[(info.op.parent_op() or info.op, "the conditional")],
                counterexample=cex,
            )
        elif info.role is not None:
            by_role.setdefault(info.role, []).append(info)
    if not by_role:
        return
    roles = [op for op in ctx.kernel.walk() if isinstance(op, st.RoleOp)]
    counts = {role: _barrier_count(by_role.get(role, [])) for role in roles}
    if len(set(counts.values())) <= 1:
        return  # every role arrives as many times: the k-th arrivals meet
    trips = _loop_trips_blame(ctx, by_role)
    if trips is not None:
        yield trips
        return
    fewest = min(counts.values(), key=_count_order)
    missing = _missing_barrier(ctx, [r for r in roles if counts[r] == fewest])
    for role, infos in by_role.items():
        if counts[role] == fewest:
            continue
        others = ", ".join(
            f"`{r.name_text}` {_count_text(c)}" for r, c in counts.items() if r is not role and c != counts[role]
        )
        cex = witness(
            ctx,
            {
                "trace": [step(ctx, infos[0].op, f"barrier() in role `{role.name_text}`, {_count_text(counts[role])}")]
                + [
                    {"role": r.name_text, "op": f"barrier() {_count_text(c)}"}
                    for r, c in counts.items()
                    if r is not role
                ]
            },
        )
        yield ctx.report(
            infos[0].op,
            f"role `{role.name_text}` reaches barrier() {_count_text(counts[role])}, but {others}: its extra "
            "arrivals wait for threads that never come" + trace_text(cex),
            _checked_text(ctx, missing[1]) if missing is not None else "",
            related=[(role, "the role")]
            + [(r, "a role with fewer") for r, c in counts.items() if c == fewest]
            + ([(missing[0], "where the role with fewer lacks a barrier()")] if missing is not None else []),
            counterexample=cex,
        )


def _out_of_if(ctx: Context, barrier: Operation) -> fx.Edit | None:
    """The barrier moved out of the `if` it stands in, to just after it (every thread reaches it
    there); None where the barrier or the `if` has no text."""
    here, branch = ctx.span(barrier), barrier.parent_op()
    while branch is not None and not isinstance(branch, st.IfOp):
        branch = branch.parent_op()
    after = ctx.span(branch) if branch is not None else None
    if here is None or after is None or here.line != here.end_line:
        return None
    return fx.Edit(after.end_line, "after", "barrier()", also=fx.Edit(here.line, "delete", ""))


_BARRIER_PLACES = 24  # insertion points tried for a missing barrier()


def _missing_barrier(ctx: Context, fewer: list[st.RoleOp]) -> tuple[Operation, fx.Edit] | None:
    """A role that reaches barrier() fewer times than the others may lack one: the first place
    in it (outside conditionals) where an inserted barrier() makes the program pass."""
    if len(fewer) != 1:
        return None
    places: list[tuple[Operation, fx.Edit | None]] = []

    def visit(block: Block) -> None:
        for op in block.ops:
            if isinstance(op, st.YieldOp) or _pure(op):
                continue
            places.append((op, fx.insert_before(op, "barrier()")))
            if isinstance(op, st.ForOp):
                visit(op.body.block)
        last = [o for o in block.ops if not isinstance(o, st.YieldOp) and not _pure(o)]
        if last:
            places.append((last[-1], fx.insert_after(last[-1], "barrier()")))

    visit(fewer[0].body.block)
    for op, edit in places[:_BARRIER_PLACES]:
        if edit is not None and fx.passes(ctx, edit):
            return op, edit
    return None


def _loop_trips_blame(ctx: Context, by_role: dict[st.RoleOp, list[OpInfo]]) -> Diagnostic | None:
    """Two roles that each reach barrier() the same number of times per trip of one loop, whose
    trip counts differ for some shapes: the loop that runs fewer trips there is blamed (it
    stops before the other role's last barriers), with the shapes as the counterexample."""
    if len(by_role) != 2:
        return None
    loops: list[tuple[st.ForOp, int]] = []
    for infos in by_role.values():
        nests: set[st.ForOp | None] = {
            i.loops[-1] if i.loops and i.role is not None and i.role.is_ancestor(i.loops[-1]) else None for i in infos
        }
        if len(nests) != 1 or None in nests:
            return None
        loop = nests.pop()
        if loop is None:
            return None
        if ctx.info_of[loop].loops and any(
            i.role is not None and i.role.is_ancestor(o) for i in infos for o in ctx.info_of[loop].loops
        ):
            return None  # nested loops inside the role: counted by the general rule
        loops.append((loop, len(infos)))
    (la, na), (lb, nb) = loops
    if na != nb:
        return None
    sym = ctx.symbolic
    ta = sym.value(la.upper).expr - sym.value(la.lower).expr
    tb = sym.value(lb.upper).expr - sym.value(lb.lower).expr
    for lp in (la, lb):
        step_v = sym.value(lp.step)
        if step_v.tainted or not (z3.is_int_value(step_v.expr) and step_v.expr.as_long() == 1):
            return None
    cex = sym.counterexample(ta == tb, evaluate={"trips_a": ta, "trips_b": tb})
    if not cex or "unknown" in cex or "trips_a" not in cex:
        return None
    short, long_ = (la, lb) if cex["trips_a"] < cex["trips_b"] else (lb, la)
    n_short, n_long = sorted((cex.pop("trips_a"), cex.pop("trips_b")))
    role_s, role_l = ctx.info_of[short].role, ctx.info_of[long_].role
    name_s = role_s.name_text if role_s is not None else "CTA"
    name_l = role_l.name_text if role_l is not None else "CTA"
    shown = ", ".join(f"{k} = {v}" for k, v in cex.items())
    text_s, text_l = _range_text(ctx, short), _range_text(ctx, long_)
    hint = fixed_hint(ctx, [fx.replace_in(short, text_s, text_l)] if text_s and text_l else [])
    cex["trace"] = [
        step(ctx, short, f"role `{name_s}` ends after {n_short} trip(s), {na * n_short} barrier() call(s)"),
        step(ctx, long_, f"role `{name_l}` runs {n_long} trip(s): its barrier() of trip {n_short} waits forever"),
    ]
    return ctx.report(
        short,
        f"role `{name_s}` loops {text_s or 'fewer times'} and role `{name_l}` {text_l or 'more'}: with {shown} "
        f"the first makes {n_short} trip(s) and the second {n_long}, so the barrier() calls of the second's last "
        "trips wait for threads that have left" + trace_text(cex),
        hint,
        related=[(long_, f"the loop of role `{name_l}`")]
        + [(i.op, "a barrier() in the loop") for i in by_role[role_s]][:1]
        if role_s is not None
        else [(long_, f"the loop of role `{name_l}`")],
        counterexample=cex,
    )


def _range_text(ctx: Context, loop: st.ForOp) -> str | None:
    """The range of a `for` header as written: `0 .. M / BM`."""
    span = ctx.span(loop)
    source = ctx.program.source
    if span is None or source is None:
        return None
    header = source.split("\n")[span.line - 1]
    if " in " not in header or "{" not in header:
        return None
    return header[header.index(" in ") + 4 : header.rindex("{")].strip()


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
  store(cs[0 : BM], zeros(f32[BM, BN]))  # <-
  tma.store(cs[0 : BM], c[m0 : m0 + BM, n0 : n0 + BN])
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
@_mechanical
def missing_fence(ctx: Context) -> Iterator[Diagnostic]:
    for r in all_accesses(ctx):
        if r.write or r.kind not in ("wgmma", "tma.store"):
            continue
        for d in dominators(ctx, r.op):
            if isinstance(d, ex.FenceAsyncOp):
                break
            hit = [a for a in accesses(d) if a.write and a.kind == "generic" and a.buffer is r.buffer]
            if hit:
                cex = witness(
                    ctx,
                    {
                        "trace": [
                            step(ctx, d, "store through the generic proxy", buffer=r.buffer.res.name_hint),
                            step(ctx, r.op, "async-proxy read, the stores not yet visible to it"),
                        ]
                    },
                )
                # the fence follows the last store: that is where the fix goes
                yield ctx.report(
                    d,
                    f"{r.op.name.removeprefix('kir.')} reads `{_buf_name(r)}` through the async proxy after this "
                    "plain store, with no fence.async() between" + trace_text(cex),
                    fixed_hint(ctx, [fx.insert_after(d, "fence.async()"), fx.insert_before(r.op, "fence.async()")]),
                    related=[(r.op, "the async-proxy read")],
                    counterexample=cex,
                )
                break
    yield from _handover_without_fence(ctx)


def _handover_without_fence(ctx: Context) -> Iterator[Diagnostic]:
    """Plain stores to a shared buffer that another role reads through the async proxy: the
    writing role must run fence.async() after its last store and before the arrive (or
    expect) that hands the buffer over; a fence in the reading role does not order another
    role's writes."""
    async_reads = [a for a in all_accesses(ctx) if not a.write and a.kind in ("wgmma", "tma.store")]
    for w in all_accesses(ctx):
        if not w.write or w.kind != "generic":
            continue
        readers = [r for r in async_reads if r.buffer is w.buffer and role_of(ctx, r.op) is not role_of(ctx, w.op)]
        if not readers:
            continue
        fenced = False
        later_store = False
        handover: Operation | None = None
        op = w.op.next_op
        while op is not None:
            if isinstance(op, ex.FenceAsyncOp):
                fenced = True
                break
            if isinstance(op, ex.ArriveOp | ex.ExpectOp | ex.CtaBarrierOp):
                handover = op
                break
            if any(
                a.write and a.kind == "generic" and a.buffer in {r.buffer for r in async_reads} for a in accesses(op)
            ):
                later_store = True  # the fence goes after the last store
                break
            op = op.next_op
        if fenced or later_store:
            continue
        reader = readers[0]
        rrole = role_of(ctx, reader.op)
        wrole = role_of(ctx, w.op)
        cex = witness(
            ctx,
            {
                "trace": [
                    step(ctx, w.op, "store through the generic proxy", buffer=w.buffer.res.name_hint),
                ]
                + ([step(ctx, handover, "hands the buffer over")] if handover is not None else [])
                + [step(ctx, reader.op, "reads it through the async proxy: the stores are not visible to it")]
            },
        )
        yield ctx.report(
            w.op,
            f"this store to `{_buf_name(w)}` is read by the {reader.op.name.removeprefix('kir.')} of role "
            f"`{rrole.name_text if rrole else 'CTA'}` through the async proxy, but role "
            f"`{wrole.name_text if wrole else 'CTA'}` hands it over with no fence.async() after it" + trace_text(cex),
            fixed_hint(ctx, [fx.insert_after(w.op, "fence.async()")]),
            related=[(reader.op, "the async-proxy read")]
            + ([(handover, "the hand-over")] if handover is not None else []),
            counterexample=cex,
        )


# ---- bounded model check ------------------------------------------------------------------------

_MODEL_RULES = {"interp.race": "sync.race", "interp.deadlock": "sync.deadlock"}
# what else a run can show of a synchronization error: a counterexample for a static rule
_WITNESSES = {**_MODEL_RULES, "interp.missing-fence": "sync.missing-fence", "interp.uninitialized-read": "sync.race"}


def _static_findings(ctx: Context) -> bool:
    """Whether a static sync rule already explains a problem (then the model check, which would
    report its consequence elsewhere, stays quiet)."""
    if "_sync_static" not in ctx.__dict__:
        # every static sync rule, of this module and of `sync_cta`
        checks = [c.fn for c in CHECKS if c.rule.family == "sync" and c.rule.id not in _MODEL_RULES.values()]
        ctx.__dict__["_sync_static"] = any(any(True for _ in fn(ctx)) for fn in checks)
    return ctx.__dict__["_sync_static"]


def _uses_sync(ctx: Context) -> bool:
    # async ops, mbarriers, warp roles and CTA barriers: what the model check has something to find in
    return any(
        is_async(i.op) or allocates(i.op) == BARRIER or isinstance(i.op, st.RoleOp | ex.CtaBarrierOp) for i in ctx.infos
    )


def model_check(ctx: Context) -> list[Diagnostic]:
    """The model check's findings that no static rule explains (the run's first race or
    deadlock), or nothing when a static rule already reports the problem: the run then shows
    its consequence, and serves as that rule's counterexample instead."""
    if not _uses_sync(ctx) or _static_findings(ctx):
        return []
    if "_sync_model_blamed" not in ctx.__dict__:
        found = [d for d in model_run(ctx) if d.rule in _MODEL_RULES.values()]
        ctx.__dict__["_sync_model_blamed"] = [_blame(ctx, d) for d in found]
    return ctx.__dict__["_sync_model_blamed"]


def _blame(ctx: Context, d: Diagnostic) -> Diagnostic:
    """A finding of the run moved to the statement whose change makes the program pass, with
    that change as its hint: for a race, a barrier() after the first access or before the
    second; for a deadlock, another parity for one of the blocked waits. Unchanged when no
    such edit passes."""
    if d.span is None:
        return d
    spans = [d.span] + [r.span for r in d.related]
    candidates: list[tuple[Span, fx.Edit]] = []
    waits = {ctx.span(i.op): i.op for i in ctx.ops(ex.WaitOp)}
    if d.rule == "sync.race":
        second = next((i for i in ctx.infos if ctx.span(i.op) == d.span), None)
        if second is not None:
            # a wait that passes too early: the nearest waits before the racing access
            near = [o for o in dominators(ctx, second.op) if isinstance(o, ex.WaitOp)][:_PARITY_TRIES]
            candidates += _parity_edits(ctx, near)
        if "wgmma" in str((d.counterexample or {}).get("first", "")):
            # a wgmma still reading: a wait that keeps fewer in flight
            for info in ctx.ops(ex.WgmmaWaitOp):
                n = _pending(ctx, info.op)
                n_text = _call_args(ctx, info.op)
                span = ctx.span(info.op)
                if n and n_text is not None and span is not None:
                    candidates += [
                        (span, fx.Edit(span.line, "replace", f"wgmma.wait({m})", f"wgmma.wait({n_text})"))
                        for m in range(n - 1, -1, -1)
                    ]
        if d.related:
            first = d.related[0].span
            candidates.append((first, fx.Edit(first.end_line, "after", "barrier()")))
        candidates.append((d.span, fx.Edit(d.span.line, "before", "barrier()")))
        if d.related:  # roles reach barrier() as often as each other: one in each of the two
            both = fx.Edit(first.end_line, "after", "barrier()", also=fx.Edit(d.span.line, "before", "barrier()"))
            candidates.append((d.span, both))
        second = next((i for i in ctx.infos if ctx.span(i.op) == d.span), None)
        if second is not None and second.loops:
            # a race across trips: the barrier closes the loop body
            last = second.loops[-1].body.block.last_op
            while last is not None and (isinstance(last, st.YieldOp) or _pure(last)):
                last = last.prev_op
            span = ctx.span(last) if last is not None else None
            if span is not None:
                candidates.append((span, fx.Edit(span.end_line, "after", "barrier()")))
    else:
        # the blocked waits first, then the others (one passing too early lets a role run ahead)
        blocked = [waits[span] for span in spans if span in waits]
        rest = [i.op for i in ctx.ops(ex.WaitOp) if i.op not in blocked]
        candidates += _parity_edits(ctx, (blocked + rest)[: 2 * _PARITY_TRIES])
    for span, edit in candidates:
        if fx.passes(ctx, edit):
            related = [r for r in d.related if r.span != span]
            if span != d.span:
                related.append(Related(d.span, "where the run fails"))
            return Diagnostic(
                d.rule, d.severity, span, d.message, _checked_text(ctx, edit), tuple(related), d.counterexample
            )
    return d


_PARITY_TRIES = 6  # waits whose parity a repair of the run's finding tries


def _parity_edits(ctx: Context, waits: list[ex.WaitOp]) -> list[tuple[Span, fx.Edit]]:
    out = []
    seen: set[tuple[Span, str]] = set()
    for wait in waits:
        span = ctx.span(wait)
        text = fx.op_text(ctx, wait) or ""
        at = text.find("parity = ")
        if span is None or at < 0:
            continue
        old = text[at : text.rfind(")")]
        current = old.removeprefix("parity = ")
        # the same formula for the other phase first, then the ring's and the constants
        toggled = [current.replace(" + 1) % 2", ") % 2")] if current.endswith(" + 1) % 2") else []
        if not toggled and current.endswith(") % 2") and current.startswith("("):
            toggled = [current[: -len(") % 2")] + " + 1) % 2"]
        for p in toggled + _parities(ctx, wait, wait.bar, True):
            if p != current and (span, p) not in seen:
                seen.add((span, p))
                out.append((span, fx.Edit(span.line, "replace", f"parity = {p}", old)))
    return out


def _edit_text(edit: fx.Edit) -> str:
    if edit.mode == "replace":
        said = f"{edit.new} (line {edit.line}: instead of {edit.old})"
    elif edit.mode == "delete":
        said = f"remove line {edit.line}"
    else:
        said = f"{edit.new} ({edit.mode} line {edit.line})"
    return said if edit.also is None else f"{said}, and {_edit_text(edit.also)}"


def model_run(ctx: Context) -> list[Diagnostic]:
    """Run the kernel's first program on a small instance with the reference interpreter and
    return its synchronization findings, each with its counterexample and trace (cached per
    context, and on disk per text, target and parameters)."""
    if "_sync_model" in ctx.__dict__:
        return ctx.__dict__["_sync_model"]
    result: list[Diagnostic] = []
    ctx.__dict__["_sync_model"] = result
    if not _uses_sync(ctx):
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
    return "model-check/5:" + hashlib.sha256(blob.encode()).hexdigest()


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
        run(ctx.program, inputs, ctx.params, grid_limit=1, time_limit=5.0, trace=True)
    except KirError as err:
        for d in err.diagnostics:
            rid = _WITNESSES.get(d.rule)
            if rid is None:
                continue
            shown = ", ".join(f"{k} = {v}" for k, v in shapes.items())
            cex = {**shapes, **(d.counterexample or {})}
            if "trace" in cex:
                cex["trace"] = focus(cex)
            result.append(
                Diagnostic(
                    rid,
                    "error",
                    d.span,
                    f"{d.message} (found by running one program with {shown}{trace_text(cex)})",
                    "",  # the interpreter's advice is not a checked edit: no hint (see sync_fix)
                    d.related,
                    cex,
                )
            )


def _model_rule(rule_id: str):
    @_mechanical
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
