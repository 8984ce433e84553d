"""The mtia-sim timing model: one PE's schedule of engines, port and control processor.

The GPU model (`timing.py`) times waves of blocks that hide each other's latency; an MTIA-sim PE
runs one program at a time with one thread of control, so its mechanisms are different
(docs/hardware/mtia-sim.md, section 4):

- **each engine is its own resource**: the vector unit (VEC), the special-function unit (SFU),
  the reduction engine (RED) and the dot-product engine (DPE) each run one command at a time, for
  `ceil(size / rate)` cycles, and overlap each other;
- **one thread of control** issues one command per cycle; it blocks on a direct load (transfer
  plus the 500-cycle latency) and on `cp.async.wait` for copies still in flight;
- **the port**: reads (DMA, direct loads) and writes (stores) of one PE share its share of device
  memory, `min(64, 1600 / active PEs)` bytes per cycle, in 32-byte bursts;
- **DMA overlap only when the program double-buffers**: a loop that issues `cp.async` and waits
  with `cp.async.wait(n >= 1)` keeps n + 1 copies in flight while the engines work, so a trip
  costs the largest of the engines, the port, the commands and (Little's law) a copy's transfer
  and latency over n + 1; with `wait(0)` (or direct loads) the control processor also pays each
  transfer and its latency in every trip;
- **a tile-level `pipeline(stages = S)` loop is DMA-double-buffered too**: the lowering's
  pipelining pass (lowering/passes/pipeline.py) turns its global loads into copies into an
  S-slot SRAM ring, S - 1 in flight, read back by the vector unit; modelled so where the pass
  takes the loop (at the kernel's top level, no store, atomic or explicit op in its body, the
  loads at the body's top level without `other`), else the loads stay blocking reads;
- **programs on a PE run one after the other**: the kernel is the launch plus the busiest PE's
  `ceil(programs / 64)` programs.

A loop trip is the largest of: each engine's busy cycles, the port's cycles, the control
processor's commands and stalls, and the latency chain through the values the loop carries (an
accumulator that waits for its own DPE result). The loop adds one pass of its whole latency chain
(pipeline fill and drain). Every figure comes from the `[cost]` section of
`kir/targets/mtia_sim.toml`; nothing is fitted per task.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from costmodel.checks import Checks
from costmodel.counting import Evaluator, sample_ids
from costmodel.estimate import Estimate, Term, bind_env, count_or_fail
from costmodel.occupancy import Occupancy
from costmodel.spec import Chip, chip
from costmodel.timing import Raw
from kir.aliasing import blocking_write
from kir.alignment import Facts, unaligned_strides
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, ScalarType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.program import Program, span_of
from kir.targets import spec

ENGINES = ("vec", "sfu", "red", "dpe")
SFU_UNARY = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "erf", "sigmoid", "tanh", "sin", "cos"}
SFU_BINARY = {"div", "rem", "pow"}  # on floats
_DATA_OPS = (
    tl.LoadOp,
    tl.AtomicOp,
    tl.DotOp,
    tl.ReduceOp,
    tl.ArgReduceOp,
    tl.ScanOp,
    tl.TopKOp,
)
_FREE_OPS = (tl.ExpandDimsOp, tl.ReshapeOp, ex.ConvertLayoutOp, ex.CtaBarrierOp, ex.FenceAsyncOp, ex.SmemAllocOp)


@dataclass(frozen=True)
class Pe:
    """The PE's figures, from the chip table's `[cost]` (and `[arch]`) sections."""

    pes: int
    clock_hz: float
    device_bytes_per_clk: float
    port_bytes_per_clk: float
    burst: int
    latency: float
    sram_bytes_per_clk: float
    vec_lanes: int
    vec_latency: float
    sfu_per_clk: float
    sfu_latency: float
    red_per_clk: float
    red_latency: float
    dpe_tile: int
    dpe_cycles_16: float
    dpe_cycles_32: float
    dpe_latency: float
    issue_per_clk: float
    launch_cycles: float

    @classmethod
    def of(cls, c: Chip, cost: dict) -> Pe:
        clock = c.clock_hz
        return cls(
            pes=c.sms,
            clock_hz=clock,
            device_bytes_per_clk=c.dram_bps / clock,
            port_bytes_per_clk=float(cost.get("port_bytes_per_clk", 64)),
            burst=int(cost.get("burst_bytes", 32)),
            latency=c.dram_latency_s * clock,
            sram_bytes_per_clk=c.smem_bps_per_sm / clock,
            vec_lanes=int(cost.get("vec_lanes", 32)),
            vec_latency=float(cost.get("vec_latency", 4)),
            sfu_per_clk=c.sfu_ops_per_sm / clock,
            sfu_latency=float(cost.get("sfu_latency", 16)),
            red_per_clk=float(cost.get("red_per_clk", 16)),
            red_latency=float(cost.get("red_latency", 8)),
            dpe_tile=int(cost.get("dpe_tile", 32)),
            dpe_cycles_16=float(cost.get("dpe_cycles_16", 32)),
            dpe_cycles_32=float(cost.get("dpe_cycles_32", 128)),
            dpe_latency=float(cost.get("dpe_latency", 32)),
            issue_per_clk=c.issue_per_sm / clock,
            launch_cycles=c.launch_s * clock,
        )

    def rate(self, programs: int) -> float:
        """Bytes per cycle of one port while `programs` programs share the device (manual 3.1)."""
        active = min(self.pes, max(1, programs))
        return min(self.port_bytes_per_clk, self.device_bytes_per_clk / active)


@dataclass
class Span_:
    """What a run of ops costs on each resource (cycles), and its latency chain."""

    busy: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ENGINES, 0.0))
    issue: float = 0.0  # commands of the control processor
    stall: float = 0.0  # cycles the control processor blocks (direct loads, waits, inner loops)
    read_bytes: float = 0.0  # port bytes, in whole bursts
    write_bytes: float = 0.0
    dma: bool = False  # a cp.async is issued here
    dma_bytes: float = 0.0
    waits: list[int] = field(default_factory=list)  # cp.async.wait's pending counts
    chain: float = 0.0  # the longest dependent path (busy + latency), fill and drain
    latency: float = 0.0  # device-memory latency (a copy lands this long after its last burst)
    sid: int = field(default_factory=itertools.count().__next__)  # ready times are per span

    def time(self, rate: float, with_latency: bool) -> float:
        """Cycles of the span once (`with_latency`: until its copies have landed) or of one trip
        of a loop in steady state (the latency of a copy in flight is hidden)."""
        port = (self.read_bytes + self.write_bytes) / rate
        ctrl = self.issue + self.stall
        if not with_latency:
            return max(ctrl, port, *self.busy.values())
        landed = self.read_bytes / rate + self.latency if self.dma else 0.0
        return max(ctrl, port, self.chain, landed, *self.busy.values())


@dataclass
class Schedule:
    """The timing of one program and of the kernel, in cycles."""

    program_cycles: float
    programs: int
    per_pe: int
    cycles: float
    rate: float
    busy: dict[str, float]  # per program, summed over trips
    port_cycles: float
    ctrl_cycles: float
    terms: list[tuple[str, float, Operation | None]] = field(default_factory=list)

    @property
    def bottleneck(self) -> str:
        res = {**self.busy, "port": self.port_cycles, "control": self.ctrl_cycles}
        return max(res, key=lambda k: res[k])


class _Walk:
    def __init__(self, program: Program, env: dict[str, int], pe: Pe, busiest: bool = False):
        self.busiest = busiest  # a loop takes the most trips of any program, not their mean
        self.program = program
        self.env = env
        self.pe = pe
        kernel = program.kernel
        self.grid = tuple(max(0, g.data.evaluate(env)) for g in kernel.grid.data)
        self.programs = math.prod(self.grid) if self.grid else 1
        self.rate = pe.rate(self.programs)
        self.ev = Evaluator(kernel, env, self.grid, sample_ids(max(1, self.programs), 64))
        self.data: set[SSAValue] = set()  # values an engine or the port produces
        # when a value is ready, from the start of the span that makes it (span id, cycles)
        self.ready: dict[SSAValue, tuple[int, float]] = {}
        self.carried: dict[SSAValue, tuple[int, float]] = {}  # ... counting only paths from carried values
        self.total_busy = dict.fromkeys(ENGINES, 0.0)
        self.total_port = 0.0
        self.total_ctrl = 0.0
        self.terms: dict[Operation, float] = {}
        self.ring_body: Block | None = None  # the body of a loop the pipelining pass takes

    # ---- sizes ---------------------------------------------------------------------------------

    def elems(self, t) -> int:
        if not isinstance(t, TileType):
            return 1
        return math.prod(d.evaluate(self.env) for d in shape_of(t))

    def bursts_bytes(self, op: Operation, mem: SSAValue, indices, access) -> float:
        """Port bytes (whole bursts) of a global access: contiguous runs of the box, or one burst
        per element when the innermost index depends on data."""
        t = mem.type
        assert isinstance(t, GlobalType)
        dims = [d.evaluate(self.env) for d in shape_of(t)]
        shape = tl.access_shape(t, access, list(indices))
        extents = [d.evaluate(self.env) for d in shape]
        b = DTYPES[dtype_of(t)].nbytes
        keys = [self.ev.get(v) for v in indices]
        if indices and isinstance(indices[-1].type, TileType) and keys[-1] is None:
            return math.prod(extents) * self.pe.burst
        # a box narrower than the tensor: clamp to the tensor (masked lanes move nothing)
        extents = extents[-len(dims) :] if len(extents) >= len(dims) else [1] * (len(dims) - len(extents)) + extents
        extents = [min(e, d) for e, d in zip(extents, dims, strict=True)]
        run = 1
        for e, d in zip(reversed(extents), reversed(dims), strict=True):
            run *= e
            if e != d:
                break
        total = math.prod(extents)
        runs = total / max(1, run)
        return runs * math.ceil(run * b / self.pe.burst) * self.pe.burst

    # ---- one block: spans and loops ------------------------------------------------------------

    def block(self, block: Block, carried: set[SSAValue], args=()) -> tuple[float, Span_]:
        """(cycles of the loops and straight spans in sequence, the span of the last straight
        ops). Straight ops accumulate into a span; a loop closes it."""
        total = 0.0
        span = Span_(latency=self.pe.latency)
        for a in args:  # a loop's carried values start its trip
            self.ready[a] = (span.sid, 0.0)
            self.carried[a] = (span.sid, 0.0)
        for op in block.ops:
            if isinstance(op, st.ForOp):
                total += span.time(self.rate, True)
                self.flush(span)
                span = Span_(latency=self.pe.latency)
                total += self.loop(op)
                continue
            if isinstance(op, st.IfOp):
                for region in (op.then_body, op.else_body):
                    inner, s = self.block(region.block, carried)
                    span.stall += inner + s.time(self.rate, True)
                    self.flush(s)
                for r in op.res:
                    self.data.add(r)
                continue
            self.op(op, span, carried)
        return total, span

    def flush(self, span: Span_, trips: float = 1.0) -> None:
        for e in ENGINES:
            self.total_busy[e] += span.busy[e] * trips
        self.total_port += (span.read_bytes + span.write_bytes) / self.rate * trips
        self.total_ctrl += (span.issue + span.stall) * trips

    def loop(self, op: st.ForOp) -> float:
        trips_arr, _ = self.ev.trips(op)
        reduce = np.max if self.busiest else np.mean
        trips = float(reduce(trips_arr)) if len(trips_arr) else 0.0
        body = op.body.block
        args = list(body.args[1:])
        saved = dict(self.carried)
        for a in args:
            self.data.add(a)
        ring = _pipelined_stages(op, self.program, self.env)
        outer, self.ring_body = self.ring_body, (body if ring else None)
        inner, span = self.block(body, set(args), args)
        self.ring_body = outer
        if ring:
            span.waits.append(ring - 2)
        yield_op = body.last_op
        recurrence = 0.0
        if isinstance(yield_op, st.YieldOp):
            recurrence = max([self.carried[v][1] for v in yield_op.values if v in self.carried] or [0.0])
        span.stall += inner
        double_buffered = span.dma and (ring >= 2 or any(n >= 1 for n in span.waits))
        if span.dma and not double_buffered:
            # the control processor waits for this trip's copy: transfer and latency in series
            span.stall += span.read_bytes / self.rate + self.pe.latency
        trip = max(span.time(self.rate, False), recurrence)
        if double_buffered:
            # Little's law: a trip's copy is issued before the wait for the previous one, so
            # wait(n) keeps n + 1 copies in flight to cover the transfer and the latency (the
            # pipelining pass issues after its wait(S - 2): S - 1 in flight)
            inflight = ring - 1 if ring else max(span.waits) + 1
            trip = max(trip, (span.dma_bytes / self.rate + self.pe.latency) / inflight)
        self.flush(span, trips)
        self.carried = saved
        for r in op.res:
            self.data.add(r)
        if trips <= 0:
            return 0.0
        fill = 0.0
        if ring:
            # the pipelining pass issues its prologue right before the loop, so the first trip
            # waits for a copy with nothing to hide it behind: its transfer and latency come
            # before the trip's chain (a loop of one trip pays them in full)
            fill = span.dma_bytes / self.rate + self.pe.latency
        cycles = (trips - 1) * trip + max(trip, fill + span.chain)
        self.terms[op] = cycles
        return cycles

    # ---- one op --------------------------------------------------------------------------------

    def _dep(self, values, table: dict[SSAValue, tuple[int, float]], span: Span_) -> float | None:
        """The latest ready time of the operands produced in this span (others are ready)."""
        got = [table[v][1] for v in values if v is not None and v in table and table[v][0] == span.sid]
        return max(got) if got else None

    def _finish(self, op: Operation, span: Span_, engine: str | None, busy: float, latency: float, start_extra=0.0):
        """Account a command: the engine's busy cycles, and the ready times of its results."""
        if engine is not None:
            span.busy[engine] += busy
        operands = list(op.operands)
        start = max(self._dep(operands, self.ready, span) or 0.0, span.issue + span.stall)
        done = start + busy + latency + start_extra
        car = self._dep(operands, self.carried, span)
        for r in op.results:
            self.data.add(r)
            self.ready[r] = (span.sid, done)
            if car is not None:
                self.carried[r] = (span.sid, car + busy + latency + start_extra)
        span.chain = max(span.chain, done)
        self.terms[op] = self.terms.get(op, 0.0) + busy + start_extra

    def op(self, op: Operation, span: Span_, carried: set[SSAValue]) -> None:  # noqa: C901
        pe = self.pe
        if isinstance(op, _FREE_OPS) or isinstance(op, st.YieldOp):
            if isinstance(op, tl.ExpandDimsOp | tl.ReshapeOp | ex.ConvertLayoutOp):
                self._pass(op)
            return
        if isinstance(op, ex.CpAsyncOp):
            span.issue += 1
            span.dma = True
            nbytes = self.bursts_bytes(op, op.src, list(op.src_indices), op.src_access.data)
            span.read_bytes += nbytes
            span.dma_bytes += nbytes
            self.terms[op] = self.terms.get(op, 0.0) + nbytes / self.rate
            return
        if isinstance(op, ex.CpAsyncCommitOp):
            span.issue += 1
            return
        if isinstance(op, ex.CpAsyncWaitOp):
            span.issue += 1
            span.waits.append(op.pending.data.evaluate(self.env))
            return
        if isinstance(op, tl.LoadOp | tl.StoreOp | tl.AtomicOp):
            self.memory(op, span)
            return
        if not op.results:
            return
        res = op.results[0]
        data_in = any(v in self.data for v in op.operands)
        if isinstance(op, _DATA_OPS[2:]):
            data_in = True
        if not data_in:
            return  # a pure function of indices and scalars: recomputed where used, no command
        span.issue += 1
        if isinstance(op, tl.ReduceOp | tl.ArgReduceOp | tl.ScanOp | tl.TopKOp):
            src = self.elems(op.operands[0].type)
            if isinstance(op, tl.TopKOp):
                last = shape_of(op.operands[0].type)[-1].evaluate(self.env)
                src *= max(1, (last - 1).bit_length())
            levels = max(0, math.ceil(math.log2(max(src, 1))))
            self._finish(op, span, "red", math.ceil(src / pe.red_per_clk), pe.red_latency + levels)
            return
        if isinstance(res.type, ScalarType) or not isinstance(res.type, TileType):
            self._finish(op, span, "vec", 1.0, 1.0)  # scalar arithmetic on an engine's result
            return
        n = self.elems(res.type)
        if isinstance(op, tl.DotOp):
            m, k = (d.evaluate(self.env) for d in shape_of(op.lhs.type))
            nn = shape_of(op.rhs.type)[1].evaluate(self.env)
            blocks = math.ceil(m / pe.dpe_tile) * math.ceil(nn / pe.dpe_tile) * math.ceil(k / pe.dpe_tile)
            wide = DTYPES[dtype_of(op.lhs.type)].nbytes >= 4
            self._finish(op, span, "dpe", blocks * (pe.dpe_cycles_32 if wide else pe.dpe_cycles_16), pe.dpe_latency)
            return
        dt = dtype_of(res.type)
        sfu = (isinstance(op, tl.UnaryOp) and op.fn.data in SFU_UNARY) or (
            isinstance(op, tl.BinaryOp) and op.fn.data in SFU_BINARY and DTYPES[dt].is_float
        )
        if sfu:
            self._finish(op, span, "sfu", math.ceil(n / pe.sfu_per_clk), pe.sfu_latency)
        else:
            lanes = pe.vec_lanes // 2 if DTYPES[dt].nbytes > 4 else pe.vec_lanes
            self._finish(op, span, "vec", math.ceil(n / lanes), pe.vec_latency)

    def _pass(self, op: Operation) -> None:
        src = op.operands[0]
        for r in op.results:
            if src in self.data:
                self.data.add(r)
            if src in self.ready:
                self.ready[r] = self.ready[src]
            if src in self.carried:
                self.carried[r] = self.carried[src]

    def memory(self, op: tl.LoadOp | tl.StoreOp | tl.AtomicOp, span: Span_) -> None:
        pe = self.pe
        span.issue += 1
        mem = op.mem
        if isinstance(mem.type, SmemType):
            t = op.res.type if isinstance(op, tl.LoadOp) else op.value.type
            nbytes: float = self.elems(t) * DTYPES[dtype_of(mem.type)].nbytes
            self._finish(op, span, "vec", math.ceil(nbytes / pe.sram_bytes_per_clk), pe.vec_latency)
            return
        nbytes = self.bursts_bytes(op, mem, list(op.indices), op.access.data)
        transfer = nbytes / self.rate
        if isinstance(op, tl.LoadOp) and self.ring_body is not None and op.parent_block() is self.ring_body:
            # a copy into the pipelining pass's SRAM ring, read back by the vector unit
            span.dma = True
            span.read_bytes += nbytes
            span.dma_bytes += nbytes
            span.issue += 2  # the copy and its commit
            sram = self.elems(op.res.type) * DTYPES[dtype_of(mem.type)].nbytes
            self._finish(op, span, "vec", math.ceil(sram / pe.sram_bytes_per_clk), pe.vec_latency)
            return
        if isinstance(op, tl.StoreOp):
            # posted: leaves through the write queue once its data is ready; done 500 later
            span.write_bytes += nbytes
            self._finish(op, span, None, 0.0, pe.latency, transfer)
            return
        passes = 2 if isinstance(op, tl.AtomicOp) else 1
        span.read_bytes += nbytes * passes
        if isinstance(op, tl.AtomicOp):
            span.write_bytes += 0.0
        stall = passes * (transfer + pe.latency)
        self._finish(op, span, None, 0.0, 0.0, stall)
        span.stall += stall  # blocking: the control processor waits for the data


DMA_ROW_ALIGN = 8  # bytes: where a DMA row starts, in device memory and in SRAM (manual 3.2)


def _pipelined_stages(loop: st.ForOp, program: Program, env: dict[str, int]) -> int:
    """S where the lowering's pipelining pass takes this `pipeline(stages = S)` loop, else 0: the
    pass's conditions as far as they show in the IR (lowering/passes/pipeline.py says them all;
    where it refuses more, this model is optimistic)."""
    if loop.stages is None or loop.parent_block() is not program.kernel.body.block:
        return 0
    try:
        stages = loop.stages.data.evaluate(env)
    except (KeyError, ZeroDivisionError):
        return 0
    body = loop.body.block
    carried = set(body.args[1:])
    top = set(body.ops)
    facts = Facts(program)
    loads = []
    if blocking_write(loop) is not None:
        return 0  # a prefetch may not move a read above a write to what the loop reads
    for op in loop.body.walk():
        if type(op).__module__ == ex.__name__:
            return 0  # explicit ops stay as written
        if isinstance(op, tl.LoadOp) and isinstance(op.mem.type, GlobalType):
            if op not in top or op.other is not None or not isinstance(op.res.type, TileType):
                return 0
            if unaligned_strides(op.mem, DMA_ROW_ALIGN, facts) is not None:
                return 0  # rows that may start off 8 bytes stay direct loads
            loads.append(op)

    def from_data(v: SSAValue, seen: set[SSAValue]) -> bool:
        if v in carried:
            return True
        owner = v.owner
        if v in seen or not isinstance(owner, Operation) or owner.parent_block() is not body:
            return False
        seen.add(v)
        return isinstance(owner, tl.LoadOp) or any(from_data(o, seen) for o in owner.operands)

    for load in loads:
        if any(from_data(v, set()) for v in [*load.indices, *([load.mask] if load.mask else [])]):
            return 0  # a gather by loaded indices, or a box that moves with a carried value
    return stages if stages >= 2 and loads else 0


def schedule(program: Program, env: dict[str, int], pe: Pe) -> Schedule:
    """The cycles of one program of `program` (parameters and shapes bound by `env`) and of the
    kernel on mtia-sim."""
    w = _Walk(program, env, pe)
    loops, span = w.block(program.kernel.body.block, set())
    program_cycles = loops + span.time(w.rate, True)
    w.flush(span)
    per_pe = math.ceil(w.programs / pe.pes) if w.programs else 0
    # The kernel takes its busiest PE: at least its share of the mean program, and at least the
    # longest program (a persistent grid over few tiles, a causal loop's last query block)
    b = _Walk(program, env, pe, busiest=True)
    loops_b, span_b = b.block(program.kernel.body.block, set())
    longest = loops_b + span_b.time(b.rate, True)
    cycles = pe.launch_cycles + max(per_pe * program_cycles, longest)
    terms: list[tuple[str, float, Operation | None]] = sorted(
        ((str(getattr(op, "name", "")), c, op) for op, c in w.terms.items()), key=lambda t: -t[1]
    )
    return Schedule(program_cycles, w.programs, per_pe, cycles, w.rate, w.total_busy, w.total_port, w.total_ctrl, terms)


UNIT_NAMES = {
    "vec": "vector unit",
    "sfu": "special-function unit",
    "red": "reduction engine",
    "dpe": "dot-product engine",
    "port": "device-memory port",
    "control": "control processor (commands and stalls)",
}


def _matmul_flops(program: Program, env: dict[str, int]) -> float:
    """The dots' flops over all programs, counted as for every other target (`counting.py`: 2
    per multiply-add, loop trips and the branches taken included), so that a program's matmul
    figure does not depend on the chip it is estimated for."""
    counts = count_or_fail(program, env)
    return counts.unit_total("tensor") * counts.programs


def estimate(
    program: Program, target: str, params, shapes, factors: dict[str, float] | None = None, checks: Checks | None = None
):
    """The `Estimate` of `program` on mtia-sim (`CostModel.predict` calls this for the chip;
    `checks` as there)."""
    c = chip(target)
    pe = Pe.of(c, spec(target).raw.get("cost", {}))
    env = bind_env(program, params, shapes, checks)
    s = schedule(program, env, pe)
    matmul_flops = _matmul_flops(program, env)
    clk = pe.clock_hz
    scale = (factors or {}).get("scale", 1.0)
    seconds = s.cycles / clk * scale
    resources = {k: v * s.per_pe / clk for k, v in {**s.busy, "port": s.port_cycles, "control": s.ctrl_cycles}.items()}
    terms = [
        Term(name, cyc * s.per_pe / clk, cyc, "cycles", span_of(op) if op is not None else None, "", "")
        for name, cyc, op in s.terms[:12]
    ]  # fmt: skip
    terms.append(Term("launch", pe.launch_cycles / clk, pe.launch_cycles, "cycles", None, "", "launch"))
    sram = sum(
        math.prod(d.evaluate(env) for d in shape_of(op.res.type)) * DTYPES[dtype_of(op.res.type)].nbytes
        for op in program.kernel.walk()
        if isinstance(op, ex.SmemAllocOp)
    )
    occ = Occupancy(1, "one program per PE", 0, int(sram), 1, False)
    raw = Raw(
        programs=s.programs,
        sms=pe.pes,
        blocks_per_sm=1,
        per_program_s={k: v / clk for k, v in s.busy.items()},
        dram_bytes=s.port_cycles * s.rate,
        l2_bytes=0.0,
        dram_bps=c.dram_bps,
        l2_bps=c.l2_bps,
        inflight_bytes=0.0,
        latency_s=c.dram_latency_s,
        overlap=0.0,
        cta_overhead_s=0.0,
        launch_s=c.launch_s,
        extra={"stages": 1, "program_cycles": s.program_cycles, "cycles": s.cycles, "port_bytes_per_clk": s.rate},
    )
    port_bytes = s.port_cycles * s.rate * s.programs
    counts = {
        "programs": s.programs,
        "dram_bytes": port_bytes,
        "ideal_dram_bytes": port_bytes,
        "l2_bytes": 0.0,
        "global_read_bytes": 0.0,
        "global_write_bytes": 0.0,
        "smem_bytes": 0.0,
        "matmul_flops": matmul_flops,
        "alu_ops": 0.0,
        "int_ops": 0.0,
        "sfu_ops": 0.0,
        "registers": 0,
        "smem_alloc_bytes": int(sram),
        "stages": 1,
        "overlap": 0.0,
        "program_cycles": s.program_cycles,
        "cycles": s.cycles,
    }
    return Estimate(
        time_s=seconds,
        bottleneck=UNIT_NAMES[s.bottleneck],
        breakdown=terms,
        counts=counts,
        occupancy=occ,
        waves=s.per_pe,
        resources=resources,
        uncalibrated_s=s.cycles / clk,
        target=target,
        raw=raw,
    )
