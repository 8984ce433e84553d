"""Work whose result nothing uses.

- `dataflow.unused-value`: a load whose value nothing uses;
- `dataflow.dead-store`: a loop-carried value reset in the loop, a value or a store overwritten
  before any use."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.traits import has_effect, is_pure, synchronizes
from kir.dialect.types import TileType
from verifier.context import Context
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.dataflow_facts import (
    arg_name,
    argument_span,
    name_of,
    reads,
    renamed_in,
    same_tensor_type,
    unwritten_outputs,
    writes,
)

# ---- dataflow.unused-value ------------------------------------------------------------------------------


@rule(
    "dataflow.unused-value",
    family="dataflow",
    severity="warning",
    summary="a loaded value, or a result computed from a stored value, is never used",
    explanation="""
A `load` whose value reaches no store, atomic, copy, barrier or other effect (directly or
through the values computed from it, loop-carried values included) moves memory for nothing:
it costs bandwidth, registers and latency. More often it is a bug: the value was meant to be
used (a bias that never gets added, a scale that is loaded and forgotten, an accumulator
updated in a loop but never stored).

A named result that nothing uses, computed from a value that a store writes, is the same bug
seen from the other side: the epilogue was computed (`out = gelu(acc + bias)`) and the store
still writes the value from before it (`store(c[...], cast<bf16>(acc))`). That is reported at
the store, the line to change, with the dropped result as a related span (and the loads that
only feed the dropped result are not reported again).
""",
    bad="""
kernel scale<BLOCK = 256>(x: global f32[N], w: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  s = load(w[offs], mask = mask)  # <-
  store(y[offs], v * 2.0, mask = mask)
}
""",
    good="""
kernel scale<BLOCK = 256>(x: global f32[N], w: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  s = load(w[offs], mask = mask)
  store(y[offs], v * s, mask = mask)
}
""",
)
def check_unused_value(ctx: Context) -> Iterator[Diagnostic]:
    live = _live_ops(ctx)
    explained: set[Operation] = set()  # dead loads that a dropped result accounts for
    for dropped in _dropped_results(ctx, live):
        explained |= dropped.loads
        name, kept = dropped.value.name_hint, dropped.kept.name_hint
        at = ctx.span(dropped.value.owner)
        yield ctx.report(
            dropped.store,
            f"this {dropped.verb} writes `{kept}`, but `{name}`, computed from `{kept}`"
            + (f" on line {at.line}" if at is not None else "")
            + f", is never used: the computed result is thrown away, and the {dropped.verb} writes the value "
            "from before the computation",
            hint=f"{dropped.verb} `{name}` (the computed result) in place of `{kept}`",
            related=[(cast(Operation, dropped.value.owner), f"`{name}`, computed and never used")],
            edits=[_renamed(ctx, dropped.store, str(kept), str(name))],
        )
    for info in ctx.ops(tl.LoadOp):
        if info.op in live or info.op in explained:
            continue
        (ref,) = reads(info.op)
        what = arg_name(ctx, ref.mem) or name_of(ref.mem)
        named = f" (`{info.op.res.name_hint}`)" if info.op.res.name_hint else ""
        hint, fix = _first(ctx, info.op, _unused_fixes(ctx, info.op, what, live), "dataflow.unused-value")
        yield ctx.report(
            info.op,
            f"the value loaded from `{what}`{named} is never used: nothing that is stored or has another effect depends on it",
            hint=hint,
            edits=fix,
        )


@dataclass(frozen=True)
class _Dropped:
    """A computed value nothing uses, derived from a value that a store writes instead."""

    value: OpResult  # the value computed and dropped (`out`)
    kept: SSAValue  # its ancestor that the store writes (`acc`)
    store: Operation
    verb: str
    loads: frozenset[Operation]  # the loads whose only use is the dropped value


_PLAIN = (tl.CastOp, tl.ExpandDimsOp, tl.BroadcastOp, ex.ConvertLayoutOp)


def _stored_values(ctx: Context) -> dict[SSAValue, tuple[Operation, str]]:
    """The values that stores write (through casts and broadcasts), with the store."""
    out: dict[SSAValue, tuple[Operation, str]] = {}
    for info in ctx.ops(tl.StoreOp):
        v: SSAValue = info.op.value
        while isinstance(v, OpResult) and isinstance(v.owner, _PLAIN):
            out.setdefault(v, (info.op, "store"))
            v = v.owner.operands[0]
        out.setdefault(v, (info.op, "store"))
    return out


def _dropped_results(ctx: Context, live: set[Operation]) -> Iterator[_Dropped]:
    """A named value that nothing uses (and whose op is pure), computed from a value that is
    stored: an epilogue computed and then forgotten (`out = gelu(acc + bias)` with
    `store(c, acc)`). The store is what to change: it writes the value from before the
    computation. The nearest stored ancestor, of the dropped value's shape, is the one."""
    stored = _stored_values(ctx)
    if not stored:
        return
    for info in ctx.infos:
        op = info.op
        if op in live or not is_pure(op) or len(op.results) != 1 or _used(op.results[0]):
            continue
        value = op.results[0]
        if not value.name_hint or not isinstance(value.type, TileType):
            continue
        loads: set[Operation] = set()
        kept: SSAValue | None = None
        todo: list[SSAValue] = list(op.operands)
        seen: set[SSAValue] = set()
        while todo:  # breadth first: the nearest stored ancestor
            v = todo.pop(0)
            if v in seen:
                continue
            seen.add(v)
            if kept is None and v in stored and _same_shape(v, value):
                kept = v
            owner = v.owner
            if not isinstance(owner, Operation) or owner in live:
                if kept is None and isinstance(owner, Operation) and not isinstance(owner, st.ForOp):
                    todo += list(owner.operands)
                continue
            if isinstance(owner, tl.LoadOp):
                loads.add(owner)
            elif is_pure(owner):
                todo += list(owner.operands)
        if kept is None or not kept.name_hint:
            continue
        store, verb = stored[kept]
        yield _Dropped(value, kept, store, verb, frozenset(loads))


def _same_shape(a: SSAValue, b: SSAValue) -> bool:
    return isinstance(a.type, TileType) and isinstance(b.type, TileType) and a.type.shape == b.type.shape


def _renamed(ctx: Context, op: Operation, old: str, new: str) -> Edit | None:
    """`old` made `new` in the op's text, where it is written there once as a name."""
    span, text = ctx.span(op), ctx.text_of(op)
    if span is None or text is None:
        return None
    found = list(re.finditer(rf"(?<![\w.]){re.escape(old)}(?!\w)", text))
    if len(found) != 1:
        return None
    col = span.col + found[0].start()
    return Edit(Span(span.line, col, span.line, col + len(old), span.file), new)


def _live_ops(ctx: Context) -> set[Operation]:
    """Ops whose work reaches an effect, by backward propagation over SSA values; a loop's
    carried value is live when its result or its use inside the loop is."""
    live_ops: set[Operation] = set()
    live_vals: set[SSAValue] = set()
    work: list[SSAValue | Operation] = [i.op for i in ctx.infos if has_effect(i.op)]
    while work:
        item = work.pop()
        if isinstance(item, Operation):
            if item in live_ops:
                continue
            live_ops.add(item)
            if isinstance(item, st.ForOp):
                work += [item.lower, item.upper, item.step]
            elif isinstance(item, st.IfOp):
                work.append(item.cond)
            elif not isinstance(item, st.YieldOp | st.RoleOp | st.KernelOp):
                work += list(item.operands)
            parent = item.parent_op()
            if isinstance(parent, st.ForOp | st.IfOp | st.RoleOp):
                work.append(parent)
            continue
        if item in live_vals:
            continue
        live_vals.add(item)
        if isinstance(item, BlockArgument):
            owner = item.block.parent_op()
            if isinstance(owner, st.ForOp):
                work.append(owner)
                if item.index >= 1:
                    i = item.index - 1
                    work += [owner.inits[i], _yielded(owner.body.block)[i]]
            continue
        result = cast(OpResult, item)  # not a block's argument: an op's result
        op = result.owner
        work.append(op)
        if isinstance(op, st.ForOp):
            i = list(op.results).index(result)
            work += [op.inits[i], _yielded(op.body.block)[i]]
        elif isinstance(op, st.IfOp):
            i = list(op.results).index(result)
            work += [_yielded(op.then_body.block)[i], _yielded(op.else_body.block)[i]]
    return live_ops


# ---- dataflow.dead-store --------------------------------------------------------------------------------


@rule(
    "dataflow.dead-store",
    family="dataflow",
    severity="warning",
    summary="a value or a memory store is overwritten before anything uses it",
    explanation="""
Work whose result is overwritten before it is used is wasted, and usually a sign that the
program does not do what was meant. Three forms are reported:

- a loop-carried variable that the loop body reassigns without reading its previous value
  (an accumulator reset inside the loop, `acc = zeros(...)` before `acc = dot<f32>(a, b, acc)`):
  every iteration but the last is thrown away;
- a variable assigned and then assigned again in the same block before any use;
- a `store` to memory that a second store to exactly the same place (same access, same mask)
  overwrites before anything reads it or any barrier lets another thread read it.
""",
    bad="""
kernel gemm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {
    acc = zeros(f32[BM, BN])  # <-
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>(at, bt, acc)
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}
""",
    good="""
kernel gemm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>(at, bt, acc)
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}
""",
)
def check_dead_store(ctx: Context) -> Iterator[Diagnostic]:
    yield from _reset_in_loop(ctx)
    yield from _overwritten_values(ctx)
    yield from _overwritten_stores(ctx)


def _used(v: SSAValue) -> bool:
    return v.first_use is not None


def _yielded(block: Block) -> tuple[SSAValue, ...]:
    """The values a loop body or a branch yields (a verified body ends with its yield)."""
    return tuple(cast(st.YieldOp, block.last_op).values)


def _reset_in_loop(ctx: Context) -> Iterator[Diagnostic]:
    for info in ctx.ops(st.ForOp):
        loop = info.op
        block = loop.body.block
        yielded = _yielded(block)
        for i, arg in enumerate(block.args[1:]):
            if _used(arg) or yielded[i] is arg or not _used(loop.results[i]):
                continue
            name = arg.name_hint or "the carried value"
            reset = next(
                (op for op in block.ops if any(r.name_hint == arg.name_hint for r in op.results)), yielded[i].owner
            )
            if not isinstance(reset, Operation):
                continue
            line = getattr(ctx.span(reset), "line", 0)
            fix = first_fix(ctx, "dataflow.dead-store", line, [ctx.drop_line(reset)])
            yield ctx.report(
                reset,
                f"`{name}` is carried by the loop, but each iteration reassigns it here without reading its previous "
                "value: every iteration but the last is thrown away",
                hint=f"drop the reset: `{name}` is initialized before the loop and carried through it" if fix else "",
                related=[(loop, "the loop")],
                edits=fix,
            )


def _overwritten_values(ctx: Context) -> Iterator[Diagnostic]:
    named: dict[Block, dict[str, list[Operation]]] = {}  # block -> name -> its ops that assign it, in order
    position: dict[Operation, int] = {}
    for info in ctx.infos:
        op = info.op
        if not is_pure(op) or not op.results:
            continue
        for r in op.results:
            if r.name_hint is None or _used(r):
                continue
            block = op.parent_block()
            if block not in named:
                named[block] = _assignments(block, position)
            later = _next_assignment(named[block][r.name_hint], op, position)
            if later is None:
                continue
            hint, fix = _first(ctx, op, _overwrite_fixes(ctx, r.name_hint, op, later))
            yield ctx.report(
                op,
                f"the value assigned to `{r.name_hint}` here is never used: `{r.name_hint}` is assigned again before any use",
                hint=hint,
                related=[(later, "assigned again here")],
                edits=fix,
            )


def _assignments(block: Block, position: dict[Operation, int]) -> dict[str, list[Operation]]:
    """The ops of a block that give a value each name, in order (numbering the ops in `position`)."""
    out: dict[str, list[Operation]] = {}
    for i, op in enumerate(block.ops):
        position[op] = i
        for name in dict.fromkeys(x.name_hint for x in op.results if x.name_hint is not None):
            out.setdefault(name, []).append(op)
    return out


def _next_assignment(ops: list[Operation], op: Operation, position: dict[Operation, int]) -> Operation | None:
    """The first op of `ops` (in block order) after `op`."""
    positions = [position[o] for o in ops]  # (short: the assignments of one name)
    k = bisect.bisect_right(positions, position[op])
    return ops[k] if k < len(ops) else None


# What lets another thread see a store before it is overwritten: the synchronizing ops, except
# those that only retire this thread's own async reads (wgmma.wait, tma.store_wait) or group
# its copies (cp.async.commit).
_NOT_STOPS = (ex.WgmmaWaitOp, ex.TmaStoreWaitOp, ex.CpAsyncCommitOp)


def _stops(op: Operation) -> bool:
    return synchronizes(op) and not isinstance(op, _NOT_STOPS)


@dataclass
class _Touches:
    """For the ops of one block (each with what it nests): which hold a barrier, wait or fence,
    and which read or write each memory value, by position; so that finding what follows a store
    takes a search, not a walk over the rest of the block for every store."""

    ops: list[Operation]
    position: dict[Operation, int]
    stops: list[int]
    memory: dict[SSAValue, list[int]]

    @staticmethod
    def of(block: Block) -> _Touches:
        ops = list(iter(block.ops))  # (list would ask the len of a block's ops: another walk)
        stops: list[int] = []
        memory: dict[SSAValue, list[int]] = {}
        for i, op in enumerate(ops):
            stop = False
            touched: dict[SSAValue, None] = {}
            for o in op.walk():
                stop = stop or _stops(o)
                for r in reads(o) + writes(o):
                    touched[r.mem] = None
            if stop:
                stops.append(i)
            for mem in touched:
                memory.setdefault(mem, []).append(i)
        return _Touches(ops, {op: i for i, op in enumerate(ops)}, stops, memory)

    def next_touch(self, op: Operation, mem: SSAValue) -> Operation | None:
        """The first op after `op` that holds a stop or reads or writes `mem`."""
        i = self.position[op]
        found = [
            lst[k] for lst in (self.stops, self.memory.get(mem, [])) if (k := bisect.bisect_right(lst, i)) < len(lst)
        ]
        return self.ops[min(found)] if found else None


def _overwritten_stores(ctx: Context) -> Iterator[Diagnostic]:
    touches: dict[Block, _Touches] = {}
    for info in ctx.ops(tl.StoreOp):
        first = info.op
        block = cast(Block, first.parent_block())  # a store of the program sits in a block
        if block not in touches:
            touches[block] = _Touches.of(block)
        # the walk stops at the first op that holds a stop, reads the tensor or writes it; only
        # a store to the same place there (with nothing else in it to stop at) overwrites
        nxt = touches[block].next_touch(first, first.mem)
        if nxt is None or not (isinstance(nxt, tl.StoreOp) and nxt.mem is first.mem):
            continue
        if _stops(nxt) or any(r.mem is first.mem for r in reads(nxt)):
            continue
        if _same_place(ctx, first, nxt):
            hint, fix = _first(ctx, first, _store_fixes(ctx, first, nxt))
            yield ctx.report(
                first,
                f"this store to `{name_of(first.mem)}` is overwritten by the store below, to the same place, before "
                "anything reads it",
                hint=hint,
                related=[(nxt, "overwritten here")],
                edits=fix,
            )


def _same_place(ctx: Context, a: tl.StoreOp, b: tl.StoreOp) -> bool:
    if a.access.data != b.access.data or len(a.indices) != len(b.indices):
        return False
    if b.mask is not None and b.mask is not a.mask:
        return False
    for x, y in zip(a.indices, b.indices, strict=True):
        if x is y:
            continue
        if isinstance(x.type, TileType) or isinstance(y.type, TileType) or not ctx.same_value(x, y):
            return False
    return True


# ---- fixes ---------------------------------------------------------------------------------------

Fix = tuple[str, Edit | None]  # a hint and its edit


def _first(
    ctx: Context, op: Operation, fixes: list[Fix], rule: str = "dataflow.dead-store"
) -> tuple[str, tuple[Edit, ...]]:
    """The first fix that holds (`first_fix`), with its hint; ("", ()) where none does."""
    line = getattr(ctx.span(op), "line", 0)
    found = first_fix(ctx, rule, line, [edit for _, edit in fixes])
    return next(((hint, found) for hint, edit in fixes if found and found == (edit,)), ("", ()))


def _line(ctx: Context, op: Operation) -> int:
    return getattr(ctx.span(op), "line", 0)


def _overwrite_fixes(ctx: Context, name: str, op: Operation, later: Operation) -> list[Fix]:
    """The later assignment dropped (the value assigned here is the one used after it), else
    this one."""
    return [
        (
            f"drop the assignment on line {_line(ctx, later)}, which overwrites `{name}` before any use",
            ctx.drop_line(later),
        ),
        ("drop this assignment", ctx.drop_line(op)),
    ]


def _store_fixes(ctx: Context, first: tl.StoreOp, second: tl.StoreOp) -> list[Fix]:
    """The second store sent to an output of the same type that nothing writes (the fix of
    its `dataflow.output-unwritten`), else this store dropped."""
    fixes: list[Fix] = []
    old = arg_name(ctx, first.mem)
    for output in unwritten_outputs(ctx):
        new = arg_name(ctx, output)
        if old and new and same_tensor_type(output, first.mem):
            edit = renamed_in(ctx, second, old, new)
            fixes.append((f"write the store on line {_line(ctx, second)} to `{new}`, the output nothing writes", edit))
    fixes.append(("drop this store", ctx.drop_line(first)))
    return fixes


# What a loaded value is most likely meant for, by the name of the tensor or the value: a bias
# or a residual is added, anything else (a weight, a scale, a gate) multiplies.
_ADDED = ("bias", "resid", "shift", "beta", "offset")


def _unused_fixes(ctx: Context, load: tl.LoadOp, tensor: str, live: set[Operation]) -> list[Fix]:
    """The assignment that overwrites a value computed from the load dropped (the cause), the
    loaded value applied in a store's value, or the load dropped."""
    fixes: list[Fix] = [
        (
            f"drop the assignment on line {_line(ctx, later)}, which overwrites the value computed from this load (the dead store's fix)",
            ctx.drop_line(later),
        )
        for later in _overwriting(load.res)[:1]
    ]
    end = _named_end(load.res)
    if end is None:
        return fixes
    name = str(end.name_hint)
    added = any(w in f"{tensor} {name}".lower() for w in _ADDED)
    for info in ctx.ops(tl.StoreOp):
        if info.op in live and len(fixes) < 3:
            fixes += _applied(ctx, info.op, name, "+" if added else "*")
    fixes.append((f"drop the load: nothing uses `{name}`", ctx.drop_line(cast(Operation, end.owner))))
    return fixes


def _overwriting(value: SSAValue) -> list[Operation]:
    """The assignments that overwrite, before any use, a value computed from `value`."""
    out: list[Operation] = []
    todo, seen = [value], set()
    while todo:
        for use in todo.pop(0).uses:
            op = use.operation
            if op in seen or not is_pure(op):
                continue
            seen.add(op)
            for r in op.results:
                block = op.parent_block()
                if r.name_hint and not _used(r) and block is not None:
                    position: dict[Operation, int] = {}
                    later = _next_assignment(_assignments(block, position)[r.name_hint], op, position)
                    if later is not None:
                        out.append(later)
                todo.append(r)
    return out


def _named_end(value: SSAValue) -> SSAValue | None:
    """The named value a load's result becomes through its casts (`bv = cast<f32>(load(...))`),
    where nothing uses it."""
    while not value.name_hint:
        uses = list(value.uses)
        if len(uses) != 1 or not isinstance(uses[0].operation, _PLAIN) or len(uses[0].operation.results) != 1:
            return None
        value = uses[0].operation.results[0]
    return None if _used(value) else value


def _applied(ctx: Context, store: tl.StoreOp, name: str, sign: str) -> list[Fix]:
    """`name` applied to the value a store writes, inside its cast (`cast<bf16>(acc + bv)`)."""
    at = argument_span(ctx, store, None, 1)
    text = ctx.text_of(at) if at is not None else None
    if at is None or text is None:
        return []
    value: SSAValue = store.value
    prefix, inner, suffix = "", text, ""
    if text.startswith("cast<") and text.endswith(")") and isinstance(value.owner, tl.CastOp):
        k = text.index("(")
        prefix, inner, suffix = text[: k + 1], text[k + 1 : -1], ")"
        value = value.owner.operand
    owner = value.owner
    compound = isinstance(owner, tl.BinaryOp) and owner.fn.data not in ("mul", "div") and sign == "*"
    new = f"{prefix}{f'({inner})' if compound else inner} {sign} {name}{suffix}"
    verb = "add" if sign == "+" else "multiply by"
    return [(f"{verb} `{name}` in the value stored on line {at.line}: `{new}`", Edit(at, new))]
