"""Resources: what a program asks of one SM (or processing element) against the target's table.

Shared memory per block, registers per thread and per CTA, warps per block and the warps roles
name, TMA box limits, wgmma instruction shapes, the matrix instruction shapes a dot is tiled
with, and mbarrier counts. Every limit is read from `kir/targets/*.toml`, where each figure cites
its source.

How the figures are computed:
- **Shared memory**: every `smem(...)` allocation with all its stages (each aligned to 128 bytes,
  1024 with a 128-byte swizzle, as TMA and wgmma require of swizzled buffers), 8 bytes per
  mbarrier, and for a loop with `pipeline(stages = S)` the S copies of each global tile it loads
  (the pipelining lowering stages them in shared memory, as Triton does).
- **Registers**: a tile of E elements of b bytes held by T threads costs ceil(E * b / 4 / T)
  32-bit registers per thread; T is one unit of the role the tile lives in (32 threads for a
  warp, 128 for a warpgroup) or the whole CTA outside roles. The estimate of a role (or of the
  code outside roles) is a fixed 16 registers for addresses, indices and loop counters plus the
  largest set of tiles live at one point: a value is live from its definition to its last use,
  carried loop values and values used inside a loop live through the whole loop, and an op may
  write its result over operands that die there (an accumulator is updated in place).
- **Register budgets**: `regs(N)` is setmaxnreg's per-thread budget; roles without one, and warps
  in no role, keep the launch budget: registers per SM / threads, rounded down to the allocation
  granularity, at most the per-thread maximum (168 for 384 threads on sm_90).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import cast

from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, Edit, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import Access, GlobalType, SymAttr, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.liveness import BASE_REGISTERS, fused, live_ranges
from verifier.context import Context
from verifier.engine import first_fix
from verifier.registry import rule
from verifier.rules.target import (
    KIR_WARP_THREADS,
    WARPGROUP_WARPS,
    is_gpu,
    launch_span,
    launch_text,
    launch_threads,
    launch_warps,
    role_text,
    role_warps,
    target_text,
    tile_threads,
)

MBARRIER_BYTES = 8


def _variant(text: str, mark: str, *changes: tuple[str, str]) -> str:
    """A bad example from a good one: apply the changes (each `old` must occur once), then mark
    the line that contains `mark` with `# <-`."""
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if mark in line]
    assert len(hits) == 1, mark
    lines[hits[0]] = lines[hits[0]].rstrip() + "  # <-"
    return "\n".join(lines) + "\n"


# A warp-specialized Hopper GEMM (examples/gemm_hopper_ws.kir): the good twin of several rules.
WS_GEMM = """
kernel gemm_ws<BM = 128, BN = 128, BK = 64, S = 4>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    c: out global bf16[M, N] align(16),
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(3)
{
  as = smem(bf16[S, BM, BK], swizzle = 128)
  bs = smem(bf16[S, BK, BN], swizzle = 128)
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 2)
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
  role mma warpgroups(1, 2) regs(232) {
    r0 = role_rank() * (BM / 2)
    acc = zeros(f32[BM / 2, BN])
    for k in 0 .. K / BK {
      s = k % S
      wait(full[s], parity = (k / S) % 2)
      acc = wgmma(as[s, r0 : r0 + BM / 2], bs[s], acc)
      wgmma.wait(0)
      arrive(empty[s])
    }
    store(c[m0 + r0 : m0 + r0 + BM / 2, n0 : n0 + BN], cast<bf16>(acc))
  }
}
"""

# One CTA copies a tile through shared memory with the TMA.
TMA_COPY = """
kernel tile_copy<BM = 128, BN = 64>(
    x: global bf16[M, N] align(16),
    y: out global bf16[M, N],
)
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(bf16[BM, BN], swizzle = 128)
  ready = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  expect(ready[0], bytes = sizeof(buf[0 : BM]))
  tma.load(x[m0 : m0 + BM, n0 : n0 + BN], buf[0 : BM], signal = ready[0])
  wait(ready[0], parity = 0)
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
}
"""


def _params_in(*exprs: sx.SymExpr) -> set[str]:
    out: set[str] = set()
    for e in exprs:
        out |= e.symbols()
    return out


def _evaluate(ctx: Context, expr: sx.SymExpr, env: dict[str, int] | None = None) -> int | None:
    try:
        return expr.evaluate(env if env is not None else ctx.params)
    except (KeyError, ZeroDivisionError):
        return None


# ---- resources.smem ------------------------------------------------------------------------------


@dataclass
class _Alloc:
    op: Operation
    what: str  # how to name it in a message
    factors: list[sx.SymExpr]  # their product times `unit` is the size in bytes
    unit: int
    align: int = 1
    params: set[str] = field(default_factory=set)
    stages_of: st.ForOp | None = None  # a pipelined loop whose literal `stages = N` multiplies it

    def nbytes(self, ctx: Context, env: dict[str, int] | None = None) -> int | None:
        total = self.unit
        for f in self.factors:
            v = _evaluate(ctx, f, env)
            if v is None:
                return None
            total *= v
        return total


def _smem_allocs(ctx: Context) -> list[_Alloc]:
    out: list[_Alloc] = []
    for info in ctx.infos:
        op = info.op
        if isinstance(op, ex.SmemAllocOp):
            t = op.res.type
            dims = [d.data for d in t.shape.data]
            align = 1024 if t.swizzle.data == 128 else 128
            name = op.res.name_hint or "a shared buffer"
            out.append(_Alloc(op, f"`{name}` {t}", dims, DTYPES[t.dtype.data].nbytes, align, _params_in(*dims)))
        elif isinstance(op, ex.MBarrierAllocOp):
            size = op.res.type.size.data
            name = op.res.name_hint or "mbarriers"
            out.append(_Alloc(op, f"`{name}` mbarrier[{size}]", [size], MBARRIER_BYTES, 8, _params_in(size)))
        elif isinstance(op, st.ForOp) and op.stages is not None:
            stages = op.stages.data
            if (_evaluate(ctx, stages) or 0) < 2:
                continue
            for load in _pipelined_loads(op):
                tile = cast(TileType, load.res.type)  # a global tile load
                dims = [d.data for d in tile.shape.data]
                out.append(
                    _Alloc(
                        op,
                        f"the {stages} pipeline stages of a {tile} load",
                        [stages, *dims],
                        DTYPES[tile.dtype.data].nbytes,
                        128,
                        _params_in(stages, *dims),
                        op if not stages.symbols() else None,
                    )
                )
    return out


def _pipelined_loads(loop: st.ForOp) -> list[tl.LoadOp]:
    """Global tile loads whose nearest enclosing loop is `loop`: the pipelining lowering keeps
    `stages` copies of each in shared memory."""
    found: list[tl.LoadOp] = []

    def visit(block: Block) -> None:
        for op in block.ops:
            if isinstance(op, tl.LoadOp) and isinstance(op.mem.type, GlobalType) and isinstance(op.res.type, TileType):
                found.append(op)
            if isinstance(op, st.ForOp):
                continue
            for region in op.regions:
                for b in region.blocks:
                    visit(b)

    visit(loop.body.block)
    return found


def _layout_total(ctx: Context, allocs: list[_Alloc], env: dict[str, int] | None = None) -> list[int | None]:
    """Running totals (bytes after each allocation, alignment padding included)."""
    total = 0
    out: list[int | None] = []
    for a in allocs:
        n = a.nbytes(ctx, env)
        if n is None:
            out.append(None)
            continue
        total = -(-total // a.align) * a.align + n
        out.append(total)
    return out


def _allowed(ctx: Context, param: str, values: Iterator[int]) -> Iterator[int]:
    """The values of a tuning parameter that the `where` clauses over parameters alone allow
    (`ST >= 3`: a ring the program's synchronization needs; `BM % BN == 0`). None for a
    parameter that sizes a kernel argument (a head dimension): that is the problem, not a tile."""
    if any(param in d.data.symbols() for _, arg in ctx.kernel.args for d in cast(GlobalType, arg.type).shape.data):
        return
    clauses = [
        w.data for w in ctx.kernel.where.data if param in w.data.symbols() and w.data.symbols() <= set(ctx.params)
    ]
    for v in values:
        env = {**ctx.params, param: v}
        if all(_evaluate(ctx, c, env) for c in clauses):
            yield v


def _smaller(value: int) -> Iterator[int]:
    """Candidate values below a parameter's: one less at a time for small values (stages),
    halving for large ones (tile sizes)."""
    if value <= 16:
        yield from range(value - 1, 0, -1)
    else:
        v = value // 2
        while v >= 1:
            yield v
            v //= 2


@rule(
    "resources.smem",
    family="resources",
    severity="error",
    summary="the shared memory of one block exceeds the target's limit",
    explanation="""
All shared memory a program allocates must fit in what one block may use on the target
(`max_smem_per_block`: 227 KB on sm_90, 163 KB on sm_80, 64 KB of LDS on the AMD targets, 384 KB
of local SRAM on mtia-sim). The verifier adds up every `smem(...)` allocation with all its
stages (aligned as TMA and wgmma need: 1024 bytes with a 128-byte swizzle, else 128), 8 bytes
per mbarrier, and the S copies a `pipeline(stages = S)` loop keeps of each global tile it loads.
The error blames the cause: when one knob brings the block within the limit (a parameter's
default, or the literal `stages = N` of a pipelined loop), it is reported at that knob (the
parameter's declaration; of several, the one that sizes the most allocations, then the smallest
change), with the allocations as related spans; otherwise at the allocation that crosses the
limit. The hint gives, for each knob, the largest smaller value that fits (fewer stages,
smaller tiles).
""",
    bad="""
    kernel stream_sums<BM = 128, BK = 128, S = 4>(x: global f32[M, K], y: out global f32[M])  # <-
      where M % BM == 0, K % BK == 0
      target sm_90 grid(M / BM) warps(4)
    {
      buf = smem(f32[S, BM, BK])
      m0 = program_id(0) * BM
      acc = zeros(f32[BM])
      for k in 0 .. K / BK {
        s = k % S
        store(buf[s], load(x[m0 : m0 + BM, k * BK : k * BK + BK]))
        barrier()
        acc = acc + sum(load(buf[s]), axis = 1)
        barrier()
      }
      store(y[m0 : m0 + BM], acc)
    }
    """,
    good="""
    kernel stream_sums<BM = 128, BK = 128, S = 3>(x: global f32[M, K], y: out global f32[M])
      where M % BM == 0, K % BK == 0
      target sm_90 grid(M / BM) warps(4)
    {
      buf = smem(f32[S, BM, BK])
      m0 = program_id(0) * BM
      acc = zeros(f32[BM])
      for k in 0 .. K / BK {
        s = k % S
        store(buf[s], load(x[m0 : m0 + BM, k * BK : k * BK + BK]))
        barrier()
        acc = acc + sum(load(buf[s]), axis = 1)
        barrier()
      }
      store(y[m0 : m0 + BM], acc)
    }
    """,
)
def smem_limit(ctx: Context) -> Iterator[Diagnostic]:
    limit = ctx.spec.max_smem_per_block
    allocs = _smem_allocs(ctx)
    totals = _layout_total(ctx, allocs)
    crossing = next((i for i, t in enumerate(totals) if t is not None and t > limit), None)
    if crossing is None:
        return
    total = max(t for t in totals if t is not None)
    culprit = allocs[crossing]
    # parameters that size more allocations first (stage counts usually size them all)
    params = sorted(
        set().union(*(a.params for a in allocs)) & set(ctx.params),
        key=lambda p: (-sum(1 for a in allocs if p in a.params), list(ctx.params).index(p)),
    )
    sizes = [a.nbytes(ctx) for a in allocs]

    fixes: list[_Fix] = []
    for p in params:
        for v in _allowed(ctx, p, _smaller(ctx.params[p])):
            got = _layout_total(ctx, allocs, {**ctx.params, p: v})
            used = max((t for t in got if t is not None), default=0)
            if used <= limit:
                fixes.append(_Fix(p, v, used, sum(1 for a in allocs if p in a.params)))
                break
    for loop in dict.fromkeys(a.stages_of for a in allocs if a.stages_of is not None):
        fix = _stages_fix(ctx, allocs, loop, limit)
        if fix is not None:
            fixes.append(fix)
    fixes.sort(key=lambda f: -f.kept)  # the smallest change (the most bytes kept) first
    cause = _cause(fixes)

    related: list[tuple[Operation | Span, str]] = []
    for i, a in enumerate(allocs):
        if sizes[i] and (i != crossing or cause is not None):
            related.append((a.op, f"{a.what}: {sizes[i]} bytes"))
    for p in params:
        span = ctx.program.param_spans.get(p)
        if span is not None and (cause is None or cause.knob != p):
            n = sum(1 for a in allocs if p in a.params)
            related.append((span, f"`{p} = {ctx.params[p]}`: {n} of the allocations scale with it"))

    fix_texts = [f"{f.text} ({f.kept} bytes)" for f in fixes]
    need = f"the block needs {total} bytes of shared memory; {target_text(ctx)} allows {limit} per block"
    hint = need + (": fits with " + ", or ".join(fix_texts) if fix_texts else ": use fewer stages or smaller tiles")
    counterexample = {**{p: ctx.params[p] for p in params}, "smem_bytes": total, "limit": limit}
    if cause is not None:
        # blame the cause: the knob whose value makes the block too large, where the fix goes
        yield ctx.report(
            _knob_span(ctx, cause),
            f"{_knob_text(ctx, cause)} sizes {cause.sized} of the shared-memory allocations: {need}; "
            f"{cause.text} fits ({cause.kept} bytes)",
            hint=hint,
            related=related,
            counterexample=counterexample,
            edits=[_knob_edit(ctx, cause)],
        )
        return
    if totals[crossing] == sizes[crossing]:
        message = f"{culprit.what} needs {sizes[crossing]} bytes of shared memory"
    else:
        message = f"shared memory overflows here: {culprit.what} ({sizes[crossing]} bytes) brings the block to {totals[crossing]} bytes"
    yield ctx.report(
        culprit.op,
        f"{message}, over the {limit} bytes a block may use on {target_text(ctx)}",
        hint=hint,
        related=related,
        counterexample=counterexample,
    )


@dataclass(frozen=True)
class _Fix:
    """A value of one knob (a parameter, or the literal stage count of a pipelined loop) that
    brings a resource within the limit: `kept` is what is still used with it."""

    knob: str | st.ForOp
    value: int
    kept: int
    sized: int  # how many allocations (or live tiles) the knob sizes

    @property
    def text(self) -> str:
        return f"{self.knob} = {self.value}" if isinstance(self.knob, str) else f"stages = {self.value}"


def _cause(fixes: list[_Fix]) -> _Fix | None:
    """The knob to blame: the one that sizes the most, then the smallest change (`fixes` come
    with the smallest change first). None when no single knob fixes it: the program's structure
    is the cause, and the allocation that crosses the limit is blamed."""
    return min(fixes, key=lambda f: -f.sized, default=None)


def _knob_span(ctx: Context, fix: _Fix) -> Operation | Span | None:
    if isinstance(fix.knob, str):
        return ctx.program.param_spans.get(fix.knob) or ctx.program.span()
    return fix.knob


def _knob_edit(ctx: Context, fix: _Fix) -> Edit | None:
    """The fix as an edit: the parameter's declaration, or the loop's `stages = N`."""
    if isinstance(fix.knob, str):
        span = ctx.program.param_spans.get(fix.knob)
        return Edit(span, fix.text) if span is not None else None
    stages = ctx.static(cast(SymAttr, fix.knob.stages).data)
    return ctx.replace_in(fix.knob, f"stages = {stages}", fix.text)


def _knob_text(ctx: Context, fix: _Fix) -> str:
    if isinstance(fix.knob, str):
        return f"`{fix.knob} = {ctx.params[fix.knob]}`"
    stages = cast(sx.SymExpr, cast(SymAttr, fix.knob.stages).data)
    return f"`pipeline(stages = {stages})`"


def _stages_fix(ctx: Context, allocs: list[_Alloc], loop: st.ForOp, limit: int) -> _Fix | None:
    """The largest literal stage count of `loop` that fits (at least 2: fewer is no pipeline)."""
    stages = ctx.static(cast(SymAttr, loop.stages).data) or 0
    mine = [a for a in allocs if a.stages_of is loop]
    for v in range(stages - 1, 1, -1):
        fewer = [replace(a, factors=[sx.Int(v), *a.factors[1:]]) if a.stages_of is loop else a for a in allocs]
        need = max((t for t in _layout_total(ctx, fewer) if t is not None), default=0)
        if need <= limit:
            return _Fix(loop, v, need, len(mine))
    return None


def _retuned(
    ctx: Context,
    line: int,
    params: Iterable[str],
    values: Callable[[int], list[int]],
    holds: Callable[[Context], bool],
) -> tuple[tuple[Edit, ...], _Fix | None]:
    """A new default for one of `params`: for each, the first of `values(default)` that the
    `where` clause allows and under which `holds` (the rule's own test, with that value bound);
    the first such edit that removes the diagnostic at `line` (at most three tried)."""
    fixes = []
    for p in sorted(params):
        if p not in ctx.params:
            continue
        for v in _allowed(ctx, p, iter(values(ctx.params[p]))):
            if v != ctx.params[p] and holds(Context(ctx.program, ctx.target, {**ctx.params, p: v})):
                fixes.append(_Fix(p, v, 0, 1))
                break
    edits = {f: _knob_edit(ctx, f) for f in fixes[:3]}
    made = first_fix(ctx, ctx.current_rule.id, line, list(edits.values()))
    return made, next((f for f, e in edits.items() if made == (e,)), None)


def _line(ctx: Context, where: Operation | Span | None) -> int:
    span = ctx.span(where)
    return span.line if span else 0


# ---- register estimates --------------------------------------------------------------------------


def _tile_regs(ctx: Context, v: SSAValue, threads: int) -> int:
    t = v.type
    if not isinstance(t, TileType) or v in ctx.recomputed or fused(v):  # (fused: the costliest test last)
        return 0
    n = ctx.elements(ctx.static_shape(t))
    if n is None:
        return 0
    return -(-n * DTYPES[t.dtype.data].nbytes // (4 * threads))


@dataclass
class Peak:
    regs: int = 0
    op: Operation | None = None
    tiles: list[tuple[SSAValue, int]] = field(default_factory=list)


def _peak(ctx: Context, block: Block, threads: int, outer: list[tuple[SSAValue, int]]) -> Peak:
    """The largest set of tiles live at one op of `block` (or of a block nested in it, roles
    aside), `outer` being the tiles live around the block.

    At op i, the tiles defined before it and used at or after it are live: those used later
    (or inside its regions) live through it, those whose last use it is die there, and the op's
    results take either the dying tiles' registers or their own, whichever is more. The sweep
    keeps the tiles live so far and their sum, adding each at its definition and dropping it
    after its last use, so a block of n ops costs O(n) plus the tiles listed at a new peak
    (asking every value at every op made a long kernel quadratic)."""
    ranges = live_ranges(block)
    ops, defs, last, nested = ranges.ops, ranges.defs, ranges.last, ranges.nested
    position = {v: k for k, v in enumerate(defs)}  # the order tiles are listed in, as defined
    regs: dict[SSAValue, int] = {}  # the values that take registers, and how many
    born: dict[int, list[SSAValue]] = {}  # op index -> the tiles that become live after it
    dies: dict[int, list[SSAValue]] = {}  # op index -> the tiles whose last use it is
    costs: dict[SSAValue, int] = {}

    def cost(v: SSAValue) -> int:
        c = costs.get(v)
        if c is None:
            c = costs[v] = _tile_regs(ctx, v, threads)
        return c

    for v, d in defs.items():
        j = last.get(v)
        if j is None or j <= d:
            continue  # never used in this block after its definition: never live at an op
        c = cost(v)
        if not c:
            continue
        regs[v] = c
        born.setdefault(d, []).append(v)
        dies.setdefault(j, []).append(v)

    def listed(vs) -> list[tuple[SSAValue, int]]:
        return [(v, regs[v]) for v in sorted(vs, key=position.__getitem__)]

    outer_total = sum(c for _, c in outer)
    live: set[SSAValue] = set(born.get(-1, ()))  # defined before op i, used at or after it
    live_total = sum(regs[v] for v in live)
    best = Peak()
    for i, op in enumerate(ops):
        inside = nested.get(i, set())
        dying = [v for v in dies.get(i, ()) if v not in inside]
        dying_total = sum(regs[v] for v in dying)
        # a loop's or branch's results are made by its body (they take the registers of the
        # values it yields) and count from the next op on
        results: list[tuple[SSAValue, int]] = [] if op.regions else [(v, c) for v in op.results if (c := cost(v))]
        results_total = sum(c for _, c in results)
        fresh_total = dying_total if dying_total >= results_total else results_total
        total = outer_total + live_total - dying_total + fresh_total
        through: list[tuple[SSAValue, int]] | None = None
        if total > best.regs:
            through = listed(live.difference(dying))
            fresh = listed(dying) if dying_total >= results_total else results
            best = Peak(total, op, outer + through + fresh)
        if not isinstance(op, st.RoleOp):  # a role has its own budget and threads: see _role_peaks
            for region in op.regions:
                for b in region.blocks:
                    if through is None:
                        through = listed(live.difference(dying))
                    inner = _peak(ctx, b, threads, outer + through)
                    if inner.regs > best.regs:
                        best = inner
        for v in dies.get(i, ()):
            live.discard(v)
            live_total -= regs[v]
        for v in born.get(i, ()):
            live.add(v)
            live_total += regs[v]
    return best


def _role_peaks(ctx: Context) -> list[tuple[st.RoleOp | None, Peak]]:
    """The peak of the code outside roles, then of each role (with the tiles of the enclosing
    code that it uses, counted over one unit of the role)."""
    body = ctx.kernel.body.block
    out: list[tuple[st.RoleOp | None, Peak]] = [(None, _peak(ctx, body, launch_threads(ctx), []))]
    for op in body.ops:
        if not isinstance(op, st.RoleOp):
            continue
        threads = tile_threads(ctx, op)
        used: dict[SSAValue, None] = {}  # an ordered set: the tiles are listed in this order
        for inner in op.walk():
            for v in inner.operands:
                owner = v.owner
                if isinstance(owner, Operation) and owner.parent_block() is body:
                    used.setdefault(v)
        outer = [(v, c) for v in used if (c := _tile_regs(ctx, v, threads))]
        out.append((op, _peak(ctx, op.body.block, threads, outer)))
    return out


def launch_budget(ctx: Context) -> int:
    """Registers per thread each warp gets at launch: the register file shared by the CTA's
    threads, rounded down to the allocation granularity, at most the per-thread maximum."""
    spec = ctx.spec
    gran = max(1, spec.register_alloc_granularity)
    per = spec.registers_per_sm // max(1, launch_threads(ctx)) // gran * gran
    return min(spec.max_registers_per_thread, per)


def _value_text(v: SSAValue) -> str:
    return f"`{v.name_hint}` {v.type}" if v.name_hint else str(v.type)


def _defining_op(v: SSAValue) -> Operation | None:
    """Where a tile is made: a carried value (a loop's block argument or result) is followed
    back to the value it starts from."""
    for _ in range(64):
        owner = v.owner
        if isinstance(owner, st.ForOp) and v in owner.res:
            v = owner.inits[list(owner.res).index(cast(OpResult, v))]
            continue
        if isinstance(owner, Block):
            loop = owner.parent_op()
            index = cast(BlockArgument, v).index  # a value owned by a block is its argument
            if isinstance(loop, st.ForOp) and index >= 1:
                v = loop.inits[index - 1]
                continue
            return loop
        return owner
    return None


@rule(
    "resources.registers",
    family="resources",
    severity="warning",
    summary="the tiles live at one point need more registers than the budget: the compiler spills",
    explanation="""
Tiles live in registers. A tile of E elements of b bytes spread over T threads takes
ceil(E * b / 4 / T) 32-bit registers per thread (T: one unit of the role, 32 threads for a warp and
128 for a warpgroup, or the whole CTA outside roles). The verifier estimates the registers a role
(or the code outside roles) needs as 16 for addresses and indices plus the largest set of tiles
live at the same time (carried loop values and values used inside a loop live through it), and
compares it with the role's `regs(N)` budget, or with the launch budget (the register file
divided among the CTA's threads, at most 255 on NVIDIA). Above it, the compiler spills to local
memory, which is slow. With a budget the warning is at the role (raise the budget, if the
register file has room, or shrink the tiles). Without one it blames the cause: the parameter
whose smaller default brings the tiles within the budget (of several, the one that sizes the
most live tiles, then the smallest change), with the largest tile as a related span; where no
single parameter does, the op that makes the largest live tile.
""",
    bad="""
    kernel big_acc<BM = 256, BN = 256, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])  # <-
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_90 grid(M / BM, N / BN) warps(4)
    {
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
      for k in 0 .. K / BK {
        acc = dot<f32>(load(a[m0 : m0 + BM, k * BK : k * BK + BK]), load(b[k * BK : k * BK + BK, n0 : n0 + BN]), acc)
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
    good="""
    kernel big_acc<BM = 128, BN = 128, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_90 grid(M / BM, N / BN) warps(4)
    {
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
      for k in 0 .. K / BK {
        acc = dot<f32>(load(a[m0 : m0 + BM, k * BK : k * BK + BK]), load(b[k * BK : k * BK + BK, n0 : n0 + BN]), acc)
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
)
def register_pressure(ctx: Context) -> Iterator[Diagnostic]:
    if not is_gpu(ctx):
        return
    default = launch_budget(ctx)
    for index, (role, peak) in enumerate(_role_peaks(ctx)):
        if peak.op is None:
            continue
        need = BASE_REGISTERS + peak.regs
        budget = role.regs.data if role is not None and role.regs.data else default
        if need <= budget:
            continue
        tiles = sorted(peak.tiles, key=lambda vc: -vc[1])
        listed = ", ".join(f"{_value_text(v)}: {c}" for v, c in tiles[:4])
        who = role_text(role) if role is not None else "the kernel"
        threads = tile_threads(ctx, role)
        related: list[tuple[Operation | Span, str]] = [(peak.op, "the most tiles are live here")]
        largest = _defining_op(tiles[0][0]) if tiles else None
        edits: list[Edit | None] = []
        if role is not None and role.regs.data:
            where: Operation | Span | None = role
            if largest is not None:
                related.append((largest, f"the largest live tile, {_value_text(tiles[0][0])}"))
            budget_text = f"its budget regs({budget})"
            gran = max(1, ctx.spec.register_alloc_granularity)
            raised = -(-need // gran) * gran
            if raised <= _room(ctx, role):
                hint = f"raise regs({budget}) to {raised} (the register file has room), or shrink the tiles"
                edits = [ctx.replace_in(role, f"regs({budget})", f"regs({raised})")]
            else:
                fixes = _register_fixes(ctx, index, budget, [v for v, _ in tiles])
                tried = {f: _knob_edit(ctx, f) for f in fixes[:3]}
                # a wgmma in a role of single warps is resources.wgmma-warpgroup's error, and the
                # tiles are spread over one warp each: its fix (whole warpgroups) is the cause's
                whole = _whole_warpgroups(ctx, role) if _issues_wgmma_per_warp(ctx, role) else None
                made = first_fix(ctx, ctx.current_rule.id, _line(ctx, role), [whole, *tried.values()])
                chosen = next((f for f, e in tried.items() if made == (e,)), None)
                if whole is not None and made == (whole,):
                    hint = (
                        f"declare the role over whole warpgroups, `{whole.text}`, as resources.wgmma-warpgroup says: "
                        "its tiles are then spread over 128 threads"
                    )
                elif chosen is not None:
                    hint = (
                        f"shrink the tiles: `{chosen.text}` (about {chosen.kept} registers) fits regs({budget}); the "
                        f"register file leaves no room for regs({raised})"
                    )
                else:
                    hint = ""
                edits = list(made)
        else:
            where = largest or peak.op
            budget_text = (
                f"the {budget} registers per thread a {launch_threads(ctx)}-thread CTA gets on {target_text(ctx)}"
            )
            hint = "shrink the tiles (a smaller block size), or spread them over more warps"
            fixes = _register_fixes(ctx, index, budget, [v for v, _ in tiles])
            cause = _cause(fixes)
            if cause is not None:
                # blame the cause: the parameter whose default makes the tiles too large
                if largest is not None:
                    related.insert(0, (largest, f"the largest live tile, {_value_text(tiles[0][0])}"))
                shown = ", or ".join(f"{f.text} (about {f.kept})" for f in fixes)
                yield ctx.report(
                    _knob_span(ctx, cause),
                    f"{_knob_text(ctx, cause)} sizes {cause.sized} of the tiles live at once: {who} needs about "
                    f"{need} registers per thread ({BASE_REGISTERS} + live tiles over {threads} threads: {listed}), "
                    f"more than {budget_text}, so the compiler will spill to local memory; {cause.text} fits "
                    f"(about {cause.kept})",
                    hint=f"fits with {shown} registers per thread, or spread the tiles over more warps",
                    related=related,
                    edits=[_knob_edit(ctx, cause)],
                )
                continue
        yield ctx.report(
            where,
            f"{who} needs about {need} registers per thread ({BASE_REGISTERS} + live tiles over {threads} threads: "
            f"{listed}), more than {budget_text}: the compiler will spill to local memory",
            hint=hint,
            related=related,
            edits=edits,
        )


def _room(ctx: Context, role: st.RoleOp) -> int:
    """The largest budget `role` can take: what the CTA's registers at launch leave once every
    other warp keeps its budget, at most setmaxnreg's maximum, in steps of the granularity."""
    gran = max(1, ctx.spec.register_alloc_granularity)
    default = launch_budget(ctx)
    pool = min(ctx.spec.registers_per_sm, launch_threads(ctx) * -(-default // gran) * gran)
    mine = set(role_warps(role))
    others = 0
    for w in range(launch_warps(ctx)):
        if w in mine:
            continue
        owner = next((r for r in ctx.roles if w in role_warps(r)), None)
        others += KIR_WARP_THREADS * ((owner.regs.data if owner is not None else 0) or default)
    per = (pool - others) // max(1, len(mine) * KIR_WARP_THREADS) // gran * gran
    return min(per, ctx.spec.setmaxnreg_max or ctx.spec.max_registers_per_thread)


def _register_fixes(ctx: Context, index: int, budget: int, tiles: list[SSAValue]) -> list[_Fix]:
    """For each parameter that sizes one of `tiles` (the live set of the `index`-th entry of
    `_role_peaks`), the largest smaller value under which that code fits `budget`; the smallest
    change (the most registers kept) first."""
    dims = [d for v in tiles for d in shape_of(v.type)]
    fixes: list[_Fix] = []
    for p in [p for p in ctx.params if any(p in d.symbols() for d in dims)]:
        for value in _allowed(ctx, p, _smaller(ctx.params[p])):
            _, peak = _role_peaks(Context(ctx.program, ctx.target, {**ctx.params, p: value}))[index]
            need = BASE_REGISTERS + peak.regs
            if need <= budget:
                sized = sum(1 for v in tiles if any(p in d.symbols() for d in shape_of(v.type)))
                fixes.append(_Fix(p, value, need, sized))
                break
    return sorted(fixes, key=lambda f: -f.kept)


# ---- resources.regs-budget -----------------------------------------------------------------------


@rule(
    "resources.regs-budget",
    family="resources",
    severity="error",
    summary="regs(N) is not a multiple of the allocation granularity within [min, max]",
    explanation="""
`setmaxnreg` takes a per-thread register count that is a multiple of 8 in [24, 256] on sm_90
(PTX ISA; the table's `register_alloc_granularity`, `min_registers_per_thread` and
`setmaxnreg_max`). Any other `regs(N)` cannot be encoded: round it to a multiple of the
granularity inside the range.
""",
    bad=_variant(WS_GEMM, "regs(36)", ("regs(40)", "regs(36)")),
    good=WS_GEMM,
)
def regs_budget_values(ctx: Context) -> Iterator[Diagnostic]:
    spec = ctx.spec
    if not spec.has("setmaxnreg"):
        return
    gran, lo, hi = max(1, spec.register_alloc_granularity), spec.min_registers_per_thread, spec.setmaxnreg_max
    for role in ctx.roles:
        n = role.regs.data
        if not n:
            continue
        if n % gran == 0 and lo <= n <= hi:
            continue
        fixed = min(hi, max(lo, -(-n // gran) * gran))
        yield ctx.report(
            role,
            f"regs({n}) on {role_text(role)}: a register budget on {target_text(ctx)} is a multiple of {gran} "
            f"in [{lo}, {hi}]",
            hint=f"use regs({fixed})",
            edits=[ctx.replace_in(role, f"regs({n})", f"regs({fixed})")],
        )


# ---- resources.regs-warpgroup --------------------------------------------------------------------


@rule(
    "resources.regs-warpgroup",
    family="resources",
    severity="error",
    summary="a register budget applies to whole warpgroups",
    explanation="""
`setmaxnreg` must be executed by all four warps of a warpgroup with the same count (PTX ISA:
".sync.aligned", per warpgroup), so a role with `regs(N)` must own whole warpgroups: declare it
over `warpgroups(...)`, or over warps 4g .. 4g + 3 together. A producer that only issues TMA
still takes a whole warpgroup (with a small budget such as regs(40)).
""",
    bad=_variant(WS_GEMM, "role load", ("role load warpgroups(0)", "role load warps(0)")),
    good=WS_GEMM,
)
def regs_whole_warpgroups(ctx: Context) -> Iterator[Diagnostic]:
    if not ctx.spec.has("setmaxnreg") or not is_gpu(ctx):
        return
    for role in ctx.roles:
        if not role.regs.data or role.unit.data == "warpgroups":
            continue
        warps = set(role_warps(role))
        partial = sorted({w // WARPGROUP_WARPS for w in warps if not all(w // 4 * 4 + j in warps for j in range(4))})
        if partial:
            groups = ", ".join(str(g) for g in partial)
            whole = _whole_warpgroups(ctx, role)
            edits = first_fix(ctx, ctx.current_rule.id, _line(ctx, role), [whole])
            yield ctx.report(
                role,
                f"regs({role.regs.data}) on {role_text(role)}: setmaxnreg applies to whole warpgroups, and the role "
                f"has only part of warpgroup {groups}",
                hint=f"declare the role over whole warpgroups: `{whole.text}`" if edits and whole else "",
                edits=edits,
            )


def _issues_wgmma_per_warp(ctx: Context, role: st.RoleOp) -> bool:
    """The role runs a wgmma on units of single warps, and its warps make whole warpgroups."""
    warps = set(role_warps(role))
    whole = all(w // WARPGROUP_WARPS * WARPGROUP_WARPS + j in warps for w in warps for j in range(WARPGROUP_WARPS))
    return role.unit.data == "warps" and whole and any(info.role is role for info in ctx.ops(ex.WgmmaOp))


def _unit_text(role: st.RoleOp) -> str:
    return f"{role.unit.data}({', '.join(str(i) for i in role.id_list)})"


def _whole_warpgroups(ctx: Context, role: st.RoleOp) -> Edit | None:
    """The role declared over the warpgroups its warps touch: `warps(0)` -> `warpgroups(0)`."""
    groups = sorted({w // WARPGROUP_WARPS for w in role_warps(role)})
    return ctx.replace_in(role, _unit_text(role), f"warpgroups({', '.join(str(g) for g in groups)})")


# ---- resources.register-file ---------------------------------------------------------------------


@rule(
    "resources.register-file",
    family="resources",
    severity="error",
    summary="the role register budgets add up to more than the CTA's registers",
    explanation="""
`setmaxnreg` moves registers between the warpgroups of one CTA: a role that lowers its budget
releases registers to a per-CTA pool, a role that raises it takes them from the pool and blocks
until they are there (PTX ISA, setmaxnreg). The pool is what the CTA got at launch: each thread
the launch budget (the register file divided among the CTA's threads, rounded down to 8: 168 for
3 warpgroups on sm_90). So the budgets, each times the threads of its role (warps in no role and
roles without a budget keep the launch budget), must add up to at most threads x launch budget,
else the raising role waits forever. The classic split for 3 warpgroups is regs(40) for the
producer and regs(232) for two consumers: 128 x (40 + 2 x 232) = 64512 = 384 x 168.
""",
    bad=_variant(WS_GEMM, "role mma", ("regs(232)", "regs(240)")),
    good=WS_GEMM,
)
def register_file(ctx: Context) -> Iterator[Diagnostic]:
    if not ctx.spec.has("setmaxnreg") or not any(r.regs.data for r in ctx.roles):
        return
    if launch_warps(ctx) > ctx.spec.max_warps_per_block:
        return  # resources.threads says so; no register file holds that launch
    default = launch_budget(ctx)
    threads = launch_threads(ctx)
    # registers are allocated in steps of the granularity: a 255-register launch budget holds 256
    gran = max(1, ctx.spec.register_alloc_granularity)
    pool = min(ctx.spec.registers_per_sm, threads * -(-default // gran) * gran)
    owner: dict[int, st.RoleOp] = {}
    for role in ctx.roles:
        for w in role_warps(role):
            owner.setdefault(w, role)
    warps = range(launch_warps(ctx))
    unowned = [w for w in warps if w not in owner]
    total = len(unowned) * KIR_WARP_THREADS * default
    parts = [f"{len(unowned) * KIR_WARP_THREADS} threads without a budget x {default}"] if unowned else []
    crossing: st.RoleOp | None = None
    for role in ctx.roles:
        mine = [w for w in role_warps(role) if owner.get(w) is role and w < launch_warps(ctx)]
        budget = role.regs.data or default
        total += len(mine) * KIR_WARP_THREADS * budget
        parts.append(f"`{role.name_text}` {len(mine) * KIR_WARP_THREADS} x {budget}")
        if total > pool and crossing is None:
            crossing = role
    if crossing is None:
        return
    related: list[tuple[Operation | Span, str]] = [
        (r, f"`{r.name_text}`: regs({r.regs.data or default})") for r in ctx.roles if r is not crossing
    ]
    span = launch_span(ctx)
    if span is not None:
        related.append((span, f"{launch_text(ctx)}: {threads} threads x {pool // threads} registers at launch"))
    # a role with a budget over part of a warpgroup leaves the rest of it at the launch budget:
    # that is the cause (resources.regs-warpgroup), and its fix comes first
    partial = [r for r in ctx.roles if r.regs.data and r.unit.data != "warpgroups"]
    wholes = [e for r in partial if (e := _whole_warpgroups(ctx, r)) is not None]
    whole = tuple(wholes) if len(wholes) == len(partial) else None
    fit = _fit(ctx, crossing, pool, total)
    lowered = ctx.replace_in(crossing, f"regs({crossing.regs.data})", f"regs({fit})") if crossing.regs.data else None
    edits = first_fix(ctx, ctx.current_rule.id, _line(ctx, crossing), [whole, lowered])
    if not edits:
        hint = ""
    elif lowered is not None and edits == (lowered,):
        hint = (
            f"lower the budget of `{crossing.name_text}` to regs({fit}), so that the budgets add up to at most {pool}"
        )
    else:
        shown = ", ".join(f"`{e.text}`" for e in edits)
        hint = f"declare the roles with a budget over whole warpgroups ({shown}), as resources.regs-warpgroup says"
    yield ctx.report(
        crossing,
        f"the register budgets add up to {total} registers ({' + '.join(parts)}), more than the {pool} the CTA gets at "
        f"launch ({threads} threads x {pool // threads}) on {target_text(ctx)}: setmaxnreg on {role_text(crossing)} would wait forever",
        hint=hint,
        related=related,
        edits=edits,
    )


def _fit(ctx: Context, role: st.RoleOp, pool: int, total: int) -> int:
    """The largest budget of `role` (in steps of the granularity) that brings `total` to `pool`."""
    threads = len(role_warps(role)) * KIR_WARP_THREADS
    gran = max(1, ctx.spec.register_alloc_granularity)
    over = total - pool
    budget = role.regs.data or launch_budget(ctx)
    return (budget - (-(-over // threads))) // gran * gran


# ---- resources.tile-pow2 -------------------------------------------------------------------------


def _is_pow2(n: int) -> bool:
    return n >= 1 and not n & (n - 1)


@rule(
    "resources.tile-pow2",
    family="resources",
    severity="error",
    summary="a tile dimension is not a power of two on a target whose compiler needs one",
    explanation="""
Triton builds tiles from `tl.arange`, whose extent is a power of two, and every tensor dimension
is one. On a target that only Triton compiles for (gfx942; the table's `pow2_tiles`), a tile of
3072 lanes cannot be built: size it to the next power of two and mask the lanes past the data,
as the masks against the shape symbols already do. When the size is a parameter's default, the
error is at the parameter's declaration, where the fix goes, with the first tile it sizes as a
related span. Targets with a C++ backend (sm_80, sm_90, gfx90a, mtia-sim) take any size.
""",
    bad="""
    kernel row_scale<BLOCK = 3072>(x: global f32[M, N], y: out global f32[M, N])  # <-
      where N <= BLOCK
      target gfx942 grid(M) warps(4)
    {
      row = program_id(0)
      cols = arange(0, BLOCK)
      mask = cols < N
      store(y[row, cols], load(x[row, cols], mask = mask) * 2.0, mask = mask)
    }
    """,
    good="""
    kernel row_scale<BLOCK = 4096>(x: global f32[M, N], y: out global f32[M, N])
      where N <= BLOCK
      target gfx942 grid(M) warps(4)
    {
      row = program_id(0)
      cols = arange(0, BLOCK)
      mask = cols < N
      store(y[row, cols], load(x[row, cols], mask = mask) * 2.0, mask = mask)
    }
    """,
)
def tile_pow2(ctx: Context) -> Iterator[Diagnostic]:
    if not ctx.spec.pow2_tiles:
        return
    blamed: set[str] = set()
    for info in ctx.infos:
        for v in info.op.results:
            if not isinstance(v.type, TileType):
                continue
            for d in shape_of(v.type):
                n = ctx.static(d)
                if n is None or _is_pow2(n):
                    continue
                fix = _pow2_fix(ctx, d)
                where = (
                    f"the tile of {_value_text(v)} is {n} wide along `{d}`"
                    if d.symbols()
                    else f"{_value_text(v)} is {n} wide"
                )
                limit = f"not a power of two; {target_text(ctx)} is built by Triton, whose tile dimensions are powers of two"
                if fix is None:  # a literal extent: written as the next power of two, where the check holds
                    wide = 1 << n.bit_length()
                    line = span.line if (span := ctx.span(info.op)) is not None else 0
                    edits = first_fix(ctx, "resources.tile-pow2", line, [ctx.replace_in(info.op, str(n), str(wide))])
                    yield ctx.report(
                        info.op,
                        f"{where}, {limit}",
                        hint=f"make it {wide} wide (the lanes past the data masked)" if edits else "",
                        edits=edits,
                    )
                    break
                p, value = fix
                if p in blamed:
                    break
                blamed.add(p)
                yield ctx.report(
                    ctx.program.param_spans.get(p) or info.op,
                    f"`{p} = {ctx.params[p]}`: {where}, {limit}",
                    hint=f"{p} = {value} (a power of two), masking the lanes past the data",
                    related=[(info.op, f"{_value_text(v)}, {n} wide")],
                    edits=[_knob_edit(ctx, _Fix(p, value, 0, 1))],
                )
                break


def _pow2_fix(ctx: Context, dim: sx.SymExpr) -> tuple[str, int] | None:
    """A parameter of `dim` and the nearest larger value that makes `dim` a power of two."""
    for p in [p for p in ctx.params if p in dim.symbols()]:
        value = ctx.params[p]
        for candidate in sorted({1 << value.bit_length(), *(value * 2**k for k in range(1, 4))}):
            got = _evaluate(ctx, dim, {**ctx.params, p: candidate})
            if got is not None and _is_pow2(got):
                return p, candidate
    return None


# ---- resources.threads ---------------------------------------------------------------------------


@rule(
    "resources.threads",
    family="resources",
    severity="error",
    summary="the launch has more warps than a block may have",
    explanation="""
A block has at most `max_threads_per_block` threads: 1024 on NVIDIA and AMD, that is 32 KIR warps
(`warps(32)`) or 8 warpgroups. A KIR warp is 32 threads on every target. mtia-sim runs one thread
of control per processing element, so its programs launch `warps(1)`: the vector width is in
its tile engines, not in threads.
""",
    bad="""
    kernel vadd<BLOCK = 2048>(x: global f32[N], y: global f32[N], z: out global f32[N])
      target sm_90 grid(cdiv(N, BLOCK)) warps(64)  # <-
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(z[offs], load(x[offs], mask = mask) + load(y[offs], mask = mask), mask = mask)
    }
    """,
    good="""
    kernel vadd<BLOCK = 2048>(x: global f32[N], y: global f32[N], z: out global f32[N])
      target sm_90 grid(cdiv(N, BLOCK)) warps(8)
    {
      offs = program_id(0) * BLOCK + arange(0, BLOCK)
      mask = offs < N
      store(z[offs], load(x[offs], mask = mask) + load(y[offs], mask = mask), mask = mask)
    }
    """,
)
def threads_per_block(ctx: Context) -> Iterator[Diagnostic]:
    most = ctx.spec.max_warps_per_block
    warps = launch_warps(ctx)
    if warps <= most:
        return
    if most == 1:
        yield ctx.report(
            launch_span(ctx),
            f"{launch_text(ctx)}: a processing element of {target_text(ctx)} runs one thread of control",
            hint="launch warps(1)",
        )
        return
    limit = most * KIR_WARP_THREADS
    fix = f"warps({most})" if ctx.kernel.warp_unit.data == "warps" else f"warpgroups({most // WARPGROUP_WARPS})"
    yield ctx.report(
        launch_span(ctx),
        f"{launch_text(ctx)} is {warps * KIR_WARP_THREADS} threads; a block on {target_text(ctx)} has at most {limit}",
        hint=f"launch at most {fix} and give each program more work per thread",
        edits=[ctx.replace_in(launch_span(ctx), launch_text(ctx), fix)],
    )


# ---- resources.role-units ------------------------------------------------------------------------


@rule(
    "resources.role-units",
    family="resources",
    severity="error",
    summary="a role names a warp or warpgroup the launch does not have",
    explanation="""
A role runs on the warps (or warpgroups) it lists, which must exist in the launch: with
`warps(N)` warps 0 .. N - 1, with `warpgroups(N)` warpgroups 0 .. N - 1 (warps 0 .. 4N - 1).
Warpgroup g is warps 4g .. 4g + 3. A role on a missing unit never runs, so whatever waits for it
waits forever.
""",
    bad=_variant(WS_GEMM, "role mma", ("warpgroups(1, 2)", "warpgroups(1, 3)")),
    good=WS_GEMM,
)
def role_units_exist(ctx: Context) -> Iterator[Diagnostic]:
    warps = launch_warps(ctx)
    for role in ctx.roles:
        per = role.warps_per_unit
        missing = [i for i in role.id_list if (i + 1) * per > warps]
        if not missing:
            continue
        unit = role.unit.data[:-1]
        have = warps // per
        have_text = f"{role.unit.data} 0 .. {have - 1}" if have else f"no whole {unit}"
        need = max(missing) + 1
        grow = f"warps({need * per})" if ctx.kernel.warp_unit.data == "warps" else f"warpgroups({-(-need * per // 4)})"
        # renumbering onto units no other role runs on keeps the launch (and its register file) as it is
        used = {w for r in ctx.roles if r is not role for w in role_warps(r)}
        kept = [i for i in role.id_list if i not in missing]
        free = [u for u in range(have) if u not in kept and not any(u * per + j in used for j in range(per))]
        if len(free) >= len(missing):
            ids = sorted(kept + free[: len(missing)])
            renumbered = f"{role.unit.data}({', '.join(map(str, ids))})"
            written = f"{role.unit.data}({', '.join(map(str, role.id_list))})"
            hint, fix = f"renumber the role: {renumbered}, or launch {grow}", ctx.replace_in(role, written, renumbered)
        else:
            hint, fix = f"launch {grow}", ctx.replace_in(launch_span(ctx), launch_text(ctx), grow)
        yield ctx.report(
            role,
            f"{role_text(role)} names {unit} {', '.join(str(i) for i in missing)}, but {launch_text(ctx)} has {have_text}",
            hint=hint,
            edits=[fix],
            related=[(s, "the launch") for s in [launch_span(ctx)] if s is not None],
        )


# ---- resources.role-overlap ----------------------------------------------------------------------


@rule(
    "resources.role-overlap",
    family="resources",
    severity="error",
    summary="two roles run on the same warp",
    explanation="""
Each warp runs at most one role: the roles of a program are concurrent, and a warp cannot run
two bodies at once (the lowering branches on the warp id). Give every role its own warps or
warpgroups; remember that warpgroup g is warps 4g .. 4g + 3.
""",
    bad=_variant(WS_GEMM, "role mma", ("warpgroups(1, 2)", "warpgroups(0, 1)")),
    good=WS_GEMM,
)
def role_overlap(ctx: Context) -> Iterator[Diagnostic]:
    seen: list[tuple[st.RoleOp, set[int]]] = []
    for role in ctx.roles:
        mine = set(role_warps(role))
        for other, theirs in seen:
            shared = sorted(mine & theirs)
            if shared:
                edits, moved = _separated(ctx, role, other)
                yield ctx.report(
                    role,
                    f"{role_text(role)} and {role_text(other)} both run on warp{'s' if len(shared) > 1 else ''} "
                    f"{', '.join(str(w) for w in shared)}",
                    hint=f"give each role its own warps: `{moved}`" if edits else "",
                    related=[(other, f"role `{other.name_text}` runs there too")],
                    edits=edits,
                )
                break
        seen.append((role, mine))


def _separated(ctx: Context, role: st.RoleOp, other: st.RoleOp) -> tuple[tuple[Edit, ...], str]:
    """One of the two roles moved onto units no other role runs on (the lowest free ones): the
    move that keeps the roles' units rising in program order first (a producer on warpgroup 0,
    its consumers after it), then the role with fewer units."""
    options = []
    for moving in (other, role):
        per = moving.warps_per_unit
        used = {w for r in ctx.roles if r is not moving for w in role_warps(r)}
        free = [u for u in range(launch_warps(ctx) // per) if not any(u * per + j in used for j in range(per))]
        if len(free) < len(moving.id_list):
            continue
        moved = f"{moving.unit.data}({', '.join(str(u) for u in free[: len(moving.id_list)])})"
        firsts = [free[0] if r is moving else min(r.id_list) * r.warps_per_unit // per for r in ctx.roles]
        rising = firsts == sorted(firsts)
        edit = ctx.replace_in(moving, _unit_text(moving), moved)
        if edit is not None:
            options.append((not rising, len(moving.id_list), edit, f"role {moving.name_text} {moved}"))
    options.sort(key=lambda o: (o[0], o[1]))
    made = first_fix(ctx, ctx.current_rule.id, _line(ctx, role), [o[2] for o in options])
    return made, next((o[3] for o in options if made == (o[2],)), "")


# ---- TMA boxes -----------------------------------------------------------------------------------


def _tma_global(op: ex.TmaLoadOp | ex.TmaStoreOp) -> tuple[SSAValue, Access, SSAValue, Access]:
    """(global tensor, its access, shared buffer, its access) of a TMA copy."""
    if isinstance(op, ex.TmaLoadOp):
        return op.src, op.src_access.data, op.dst, op.dst_access.data
    return op.dst, op.dst_access.data, op.src, op.src_access.data


def _box(ctx: Context, mem: SSAValue, access) -> list[int | None]:
    """The TMA box: the slice extent of each dimension of the global tensor (1 for an index)."""
    return [1 if d is None else ctx.static(d) for d in access.dims]


def _name(v: SSAValue) -> str:
    return v.name_hint or "the tensor"


@rule(
    "resources.tma-box",
    family="resources",
    severity="error",
    summary="a TMA box dimension is over 256 elements, or the tensor has more than 5 dimensions",
    explanation="""
A TMA copy moves a box described by a tensor map: at most 5 dimensions, each box dimension at most
256 elements (`tma_box_max`, cuTensorMapEncodeTiled). A larger tile is copied as several boxes:
issue one `tma.load` per 256-row (or column) slab, each into its own part of the shared buffer,
and count all their bytes in the `expect`.
""",
    bad=_variant(TMA_COPY, "tma.load", ("BM = 128", "BM = 512")),
    good=TMA_COPY.replace("BM = 128", "BM = 256"),
)
def tma_box_limits(ctx: Context) -> Iterator[Diagnostic]:
    most = ctx.spec.tma_box_max
    if not ctx.spec.has("tma") or not most:
        return
    for info in ctx.ops(ex.TmaLoadOp, ex.TmaStoreOp):
        mem, access, _, _ = _tma_global(info.op)
        rank = len(cast(GlobalType, mem.type).shape.data)
        if rank > 5:
            yield ctx.report(
                info.op,
                f"`{_name(mem)}` has {rank} dimensions; a TMA tensor map has at most 5",
                hint="merge contiguous dimensions (declare the tensor with fewer, larger dimensions)",
            )
            continue
        box = _box(ctx, mem, access)
        over = [(i, b) for i, b in enumerate(box) if b is not None and b > most]
        if over:
            dims = ", ".join(f"dimension {i} is {b}" for i, b in over)
            sized = _params_in(
                *(d for i, d in enumerate(access.dims) if d is not None and any(i == j for j, _ in over))
            )

            def fits(c: Context, access: Access = access, mem: SSAValue = mem) -> bool:
                return all(b is None or b <= most for b in _box(c, mem, access))

            edits, fix = _retuned(ctx, _line(ctx, info.op), sized, lambda v: list(_smaller(v))[:4], fits)
            yield ctx.report(
                info.op,
                f"the TMA box on `{_name(mem)}` is {box}: {dims} elements, over the {most} a box dimension may have "
                f"on {target_text(ctx)} (a larger tile is copied as several boxes, one tma.load per slab)",
                hint=f"make the box smaller: `{fix.text}`" if fix else "",
                edits=edits,
            )


@rule(
    "resources.tma-align",
    family="resources",
    severity="error",
    summary="a tensor copied with the TMA is declared without 16-byte alignment",
    explanation="""
A TMA tensor map needs the tensor's base address aligned to 16 bytes (`tma_align`). A tensor
argument promises its alignment with `align(N)`; without it only the element size is known.
The error is at the argument's declaration, where the fix goes (`align(16)`), with the TMA
copies as related spans; `bounds.alignment` reports the same requirement at the copies, with
the stride and box conditions.
""",
    bad=_variant(TMA_COPY, "x: global", ("x: global bf16[M, N] align(16)", "x: global bf16[M, N]")),
    good=TMA_COPY,
)
def tma_declared_align(ctx: Context) -> Iterator[Diagnostic]:
    need = ctx.spec.tma_align
    if not ctx.spec.has("tma") or need <= 1:
        return
    uses: dict[SSAValue, list[Operation]] = {}
    for info in ctx.ops(ex.TmaLoadOp, ex.TmaStoreOp):
        mem = _tma_global(info.op)[0]
        uses.setdefault(mem, []).append(info.op)
    for name, arg in ctx.kernel.args:
        if arg not in uses:
            continue
        t = cast(GlobalType, arg.type)
        esize = DTYPES[t.dtype.data].nbytes
        align = t.align.data or esize
        if align % need == 0:
            continue
        declared = f"align({t.align.data})" if t.align.data else f"no align, so only {esize}-byte alignment is known"
        span = ctx.program.arg_spans.get(name)
        if t.align.data:
            fix = ctx.replace_in(span, f"align({t.align.data})", f"align({need})")
        else:  # appended to the declaration
            fix = (
                Edit(Span(span.end_line, span.end_col, span.end_line, span.end_col, span.file), f" align({need})")
                if span
                else None
            )
        yield ctx.report(
            span or ctx.program.span(),
            f"`{name}` is copied with the TMA, which needs a {need}-byte aligned base address; it is declared with {declared}",
            hint=f"declare `{name}: ... align({need})` (and pass a {need}-byte aligned tensor)",
            related=[(op, "copied with the TMA here") for op in uses[arg]],
            edits=[fix],
        )


# ---- wgmma ---------------------------------------------------------------------------------------


def _wgmma_groups(ctx: Context, role: st.RoleOp | None) -> int | None:
    """How many warpgroups share one instance of a wgmma's accumulator: 1 in a role over
    warpgroups, the launch's warpgroups outside roles; None when the executing threads are not
    whole warpgroups."""
    if role is not None:
        return 1 if role.unit.data == "warpgroups" else None
    warps = launch_warps(ctx)
    return warps // WARPGROUP_WARPS if warps % WARPGROUP_WARPS == 0 else None


@rule(
    "resources.wgmma-warpgroup",
    family="resources",
    severity="error",
    summary="wgmma is issued by threads that are not whole warpgroups",
    explanation="""
`wgmma.mma_async` is executed by a warpgroup, four warps together. So a `wgmma` (and its
`wgmma.wait`) must run in a role over `warpgroups(...)`, or outside roles in a program of whole
warpgroups (`warpgroups(N)` or `warps(N)` with N a multiple of 4). A role over single warps runs
one instance per warp, and a `warps(2)` program has half a warpgroup.
""",
    bad="""
    kernel mm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_90 grid(M / BM, N / BN) warps(2)
    {
      as = smem(bf16[BM, BK])
      bs = smem(bf16[BK, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
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
    kernel mm<BM = 64, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_90 grid(M / BM, N / BN) warps(4)
    {
      as = smem(bf16[BM, BK])
      bs = smem(bf16[BK, BN])
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
      for k in 0 .. K / BK {
        store(as[0 : BM], load(a[m0 : m0 + BM, k * BK : k * BK + BK]))
        store(bs[0 : BK], load(b[k * BK : k * BK + BK, n0 : n0 + BN]))
        fence.async()
        barrier()
        acc = wgmma(as[0 : BM], bs[0 : BK], acc)
        wgmma.wait(0)
        barrier()
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
)
def wgmma_warpgroups(ctx: Context) -> Iterator[Diagnostic]:
    if not ctx.spec.wgmma or not ctx.spec.has("wgmma"):
        return
    for info in ctx.ops(ex.WgmmaOp, ex.WgmmaWaitOp):
        if _wgmma_groups(ctx, info.role) is not None:
            continue
        what = "wgmma" if isinstance(info.op, ex.WgmmaOp) else "wgmma.wait"
        if info.role is not None:
            warps = role_warps(info.role)
            groups = sorted({w // 4 for w in warps})
            message = (
                f"{what} in {role_text(info.role)}: each unit is one warp, but wgmma is issued by a whole warpgroup"
            )
            regrouped = f"warpgroups({', '.join(str(g) for g in groups)})"
            hint = f"declare the role over warpgroups: role {info.role.name_text} {regrouped}"
            related: list[tuple[Operation | Span, str]] = [(info.role, "the role")]
            # the same warps, written as the warpgroups they make up (only where they are whole ones)
            whole = sorted(warps) == [4 * g + j for g in groups for j in range(4)]
            written = f"warps({', '.join(map(str, info.role.id_list))})"
            fix = ctx.replace_in(info.role, written, regrouped) if whole else None
        else:
            launched = launch_warps(ctx)
            message = f"{what} in a program of {launch_text(ctx)}: {launched} warps are not whole warpgroups of 4"
            hint = f"launch warps({-(-launched // 4) * 4}) or warpgroups({-(-launched // 4)})"
            related = [(s, "the launch") for s in [launch_span(ctx)] if s is not None]
            fix = ctx.replace_in(launch_span(ctx), launch_text(ctx), f"warps({-(-launched // 4) * 4})")
        yield ctx.report(info.op, message, hint=hint, related=related, edits=[fix])


@rule(
    "resources.wgmma-shape",
    family="resources",
    severity="error",
    summary="a wgmma the instruction cannot tile: rows per warpgroup, N or K",
    explanation="""
One `wgmma.mma_async` computes a [64, N] accumulator per warpgroup from a [64, K] and a [K, N]
shared operand (the table's `[wgmma]`): N is a multiple of 8 up to 256, and K times the operand
size is 32 bytes (k16 for bf16/f16, k8 for tf32, k32 for fp8 and i8). A KIR `wgmma` issues one
instruction per 64 rows of the accumulator each warpgroup holds and one per K step, so the rows
per warpgroup (the accumulator's rows, divided among the warpgroups of the program outside
roles) must be a multiple of 64, N a multiple of 8 at most 256, and K a multiple of the
instruction's K.
""",
    bad=_variant(WS_GEMM, "acc = wgmma", ("BM = 128", "BM = 64")),
    good=WS_GEMM,
)
def wgmma_shape(ctx: Context) -> Iterator[Diagnostic]:
    table = ctx.spec.wgmma
    if not table or not ctx.spec.has("wgmma"):
        return
    for info in ctx.ops(ex.WgmmaOp):
        op = info.op
        groups = _wgmma_groups(ctx, info.role)
        if groups is None:
            continue  # resources.wgmma-warpgroup
        m, k, n, k_inst, problems = _wgmma_problems(ctx, op, groups)
        if problems:
            sized = _params_in(*(d.data for d in cast(TileType, op.acc.type).shape.data))
            if op.a_in_registers:
                sized |= _params_in(*(d.data for d in cast(TileType, op.a.type).shape.data))
            else:
                sized |= _params_in(*(d for d in op.a_access.data.dims if d is not None))

            def fits(c: Context, op: ex.WgmmaOp = op, groups: int = groups) -> bool:
                return not _wgmma_problems(c, op, groups)[4]

            edits, fix = _retuned(ctx, _line(ctx, op), sized, lambda v: [v * 2, v * 4, v // 2], fits)
            yield ctx.report(
                op,
                f"wgmma [{m}, {k}] x [{k}, {n}] cannot be tiled by wgmma.m{table['m']}nNk{k_inst}: "
                + "; ".join(problems),
                hint=f"retile: `{fix.text}` gives each warpgroup whole instructions" if fix else "",
                edits=edits,
            )


def _wgmma_problems(
    ctx: Context, op: ex.WgmmaOp, groups: int
) -> tuple[int | None, int | None, int | None, int, list[str]]:
    """M, K, N of a wgmma with the context's parameters, the instruction's K, and what of them
    the instruction cannot tile."""
    table = cast(dict, ctx.spec.wgmma)
    m, n = ctx.static_shape(op.acc.type)
    dtype = dtype_of(op.a.type)
    esize = DTYPES[dtype].nbytes
    k_inst = max(1, table["k_bytes"] // esize)
    a_shape = ctx.static_shape(op.a.type) if op.a_in_registers else ctx.access_extents(op.a.type, op.a_access.data)
    k = (a_shape[0] if op.is_trans_a else a_shape[-1]) if a_shape else None  # trans(A) is stored [K, M]
    problems = []
    if m is not None:
        rows = m // groups if m % groups == 0 else None
        if rows is None or rows % table["m"]:
            shown = f"{m} / {groups} = {m / groups:g}" if groups > 1 else f"{m}"
            problems.append(
                f"each warpgroup holds {shown} accumulator rows, not a multiple of the instruction's {table['m']}"
            )
    if n is not None and (n % table["n_step"] or n > table["n_max"]):
        problems.append(f"N = {n} is not a multiple of {table['n_step']} in [{table['n_step']}, {table['n_max']}]")
    if k is not None and k % k_inst:
        problems.append(f"K = {k} is not a multiple of the instruction's K = {k_inst} for {dtype}")
    return m, k, n, k_inst, problems


# ---- resources.dot-shape -------------------------------------------------------------------------


@rule(
    "resources.dot-shape",
    family="resources",
    severity="warning",
    summary="a dot's shape is not a multiple of any matrix instruction of the target",
    explanation="""
A tile-level `dot` lowers to the target's matrix instructions (the table's `mma_shapes`, given
for 16-bit operands: K scales so that K x operand size stays the same): m16n8k16 `mma.sync` (and
m64nNk16 wgmma) on NVIDIA, 32x32x8 and 16x16x16 MFMA on AMD, 32x32x32 blocks on mtia-sim's dot
engine. A dot whose M, N or K is not a multiple of any of them is padded up to one (wasting the
difference) or runs on the vector units; Triton rejects dots below 16 outright. Operand dtypes
the matrix unit does not take (the table's `mma_dtypes`) also run on the vector units.
""",
    bad="""
    kernel skinny<BM = 8, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
    {
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
      for k in 0 .. K / BK {
        at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
        bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
        acc = dot<f32>(at, bt, acc)  # <-
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """,
    good="""
    kernel skinny<BM = 16, BN = 64, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_80 grid(M / BM, N / BN) warps(4)
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
def dot_shape(ctx: Context) -> Iterator[Diagnostic]:
    shapes = ctx.spec.mma_shapes
    if not shapes:
        return
    for info in ctx.ops(tl.DotOp):
        op = info.op
        dtype = dtype_of(op.lhs.type)
        if ctx.spec.dtypes and dtype not in ctx.spec.dtypes:
            continue  # a dtype the target does not have at all: target.dtype's error at this dot
        if ctx.spec.mma_dtypes and dtype not in ctx.spec.mma_dtypes:
            yield ctx.report(
                op,
                f"dot of {dtype} operands: the matrix unit of {target_text(ctx)} takes "
                f"{', '.join(sorted(ctx.spec.mma_dtypes))}, so this product runs on the vector units",
                hint="cast the operands to a dtype the matrix unit takes (bf16, f16, or i8 for integers) if the precision allows",
            )
            continue
        m, k = ctx.static_shape(op.lhs.type)
        n = ctx.static_shape(op.rhs.type)[1]
        if m is None or n is None or k is None:
            continue
        esize = DTYPES[dtype].nbytes
        scaled = [(sm, sn, max(1, sk * 2 // esize)) for sm, sn, sk in shapes]
        if _dot_fits(ctx, op, scaled):
            continue
        smallest = min(scaled, key=lambda s: s[0] * s[1] * s[2])
        shown = " or ".join(f"m{sm}n{sn}k{sk}" for sm, sn, sk in scaled)
        sized = _params_in(*(d.data for v in (op.lhs, op.rhs) for d in cast(TileType, v.type).shape.data))

        def fits(c: Context, op: tl.DotOp = op, scaled: list[tuple[int, int, int]] = scaled) -> bool:
            return _dot_fits(c, op, scaled)

        edits, fix = _retuned(ctx, _line(ctx, op), sized, lambda v: [v * 2, v * 4], fits)
        yield ctx.report(
            op,
            f"dot [{m}, {k}] x [{k}, {n}] ({dtype}) is not a multiple of the matrix instructions of {target_text(ctx)} "
            f"({shown}): it is padded or runs on the vector units (M, N and K must be multiples of "
            f"{smallest[0]}, {smallest[1]} and {smallest[2]} at least)",
            hint=f"retile: `{fix.text}`" if fix else "",
            edits=edits,
        )


def _dot_fits(ctx: Context, op: tl.DotOp, scaled: list[tuple[int, int, int]]) -> bool:
    """The dot's M, N and K (with the context's parameters) are multiples of one instruction's."""
    m, k = ctx.static_shape(op.lhs.type)
    n = ctx.static_shape(op.rhs.type)[1]
    if m is None or n is None or k is None:
        return False
    return any(m % sm == 0 and n % sn == 0 and k % sk == 0 for sm, sn, sk in scaled)


# ---- resources.mbarrier-count --------------------------------------------------------------------


@rule(
    "resources.mbarrier-count",
    family="resources",
    severity="error",
    summary="an mbarrier's arrival count is outside what the hardware and the CTA's threads allow",
    explanation="""
`mbarrier.init` takes an expected arrival count in [1, 2^20 - 1] (the table's
`mbarrier_max_count`), and a phase can only complete if that many arrivals can come: one
arrival per thread at most when every arrive counts one, so a count above the CTA's threads
(with no `arrive(..., count = n)` on the barrier) never completes.
""",
    bad=_variant(TMA_COPY, "ready = mbarrier", ("count = 1)", "count = 256)")),
    good=TMA_COPY,
)
def mbarrier_count(ctx: Context) -> Iterator[Diagnostic]:
    most = ctx.spec.mbarrier_max_count
    if not ctx.spec.has("mbarrier") or not most:
        return
    threads = launch_threads(ctx)
    for info in ctx.ops(ex.MBarrierAllocOp):
        op = info.op
        count = ctx.static(op.count.data)
        if count is None:
            continue
        name = op.res.name_hint or "the mbarrier"
        if count < 1 or count > most:
            edits, hint = _recounted(ctx, op)
            yield ctx.report(
                op,
                f"`{name}` expects {count} arrivals per phase; an mbarrier's count is in [1, {most}] on {target_text(ctx)}",
                hint=hint,
                edits=edits,
            )
            continue
        multi = any(isinstance(u.operation, ex.ArriveOp) and u.operation.count.data > 1 for u in op.res.uses)
        if count > threads and not multi:
            edits, hint = _recounted(ctx, op)
            yield ctx.report(
                op,
                f"`{name}` expects {count} arrivals per phase, but the CTA has {threads} threads ({launch_text(ctx)}) "
                "and each arrive counts one",
                hint=hint,
                edits=edits,
            )


def _recounted(ctx: Context, op: ex.MBarrierAllocOp) -> tuple[tuple[Edit, ...], str]:
    """The count that the barrier's users make: each arrive its count, each expect one, once per
    unit of the role that runs it."""
    arrivals = 0
    for use in op.res.uses:
        user = use.operation
        units = ctx.units(ctx.info_of[user].role) if user in ctx.info_of else 1
        if isinstance(user, ex.ArriveOp):
            arrivals += user.count.data * units
        elif isinstance(user, ex.ExpectOp):
            arrivals += units
    written = re.search(r"count\s*=\s*[^,)]+", ctx.text_of(op) or "")
    if arrivals < 1 or written is None:
        return (), ""
    edit = ctx.replace_in(op, written.group(0), f"count = {arrivals}")
    made = first_fix(ctx, ctx.current_rule.id, _line(ctx, op), [edit])
    return made, f"count the arrivals its users make: `count = {arrivals}`" if made else ""
