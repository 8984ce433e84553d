"""Counting: what one program of a kernel moves and computes, op by op, at given shapes.

Everything is counted per program and tied to the op (and so the source span) that causes it:

- **global accesses** (`load`, `store`, atomics, `tma.load`, `tma.store`, `cp.async`): the bytes of
  the block or gather, times the trip counts of the enclosing loops. A gather whose innermost
  index is data-dependent (loaded, reduced) is *scattered*: each lane is its own 32-byte sector
  through L1. Accesses keep the per-program index of their first element, which the model uses
  to find how many programs of a wave read the same tile (reuse in L2).
- **shared memory**: explicit `smem` loads and stores, TMA and cp.async writes, wgmma operand
  reads, and the operand staging of a tile-level `dot` (its operands pass through shared memory once, as
  Triton stages them for the tensor cores) and of a `gather` (its source written once, each result
  element read back; with a data-dependent index, as many times as the lanes' words share a bank,
  unless the index is XOR-swizzled).
- **operations** per unit: matrix products (`dot`, `wgmma`: 2·M·N·K on the tensor cores by
  operand dtype, or on the FMA pipes for an f32 dot, which lowers as IEEE f32), elementwise
  float work (ALU lanes), integer work (weighted: i64 and division cost several instructions),
  special functions (SFU), reductions.

Run-time scalars (program ids, loop bounds, tile positions) are evaluated with numpy over a
sample of program ids at once, C semantics for `/` and `%`. A loop's trip count is the mean over
the sample, so a causal loop `for j in 0 .. m0 / BN` counts its average length. A loop inside
another is also averaged over the outer loop's iterations (each sampled program at other ones):
a persistent program's key loop over tiles of different lengths counts their mean.

A bound that depends on data (`for r in 0 .. minimum(n, K)`) is unknowable statically: anything
from 0 to its static upper bound U. It counts sqrt(U) trips (and is marked `bound_is_upper`), the
geometric midpoint of one trip and U. The model ranks variants and is scored on log(predicted /
measured), so the log-midpoint bounds the error at sqrt(U)x either way; counting U would let a
loop that usually runs once or twice (a top-K list that a new block rarely improves) dominate the
ranking and scale with every per-trip cost added to its body, and counting 0 would drop a loop a
program exists to run. The same rule applies to every data-dependent bound.

A program's **critical path** (`chain_shuffles`, `chain_syncs`): a reduction is a chain of
dependent steps, log2(lanes) warp shuffles and, when the axis spans warps, a shared-memory round
trip between two barriers; the next op waits for its result. Each reduction's chain, times the
trips of its loops, is summed: a loop of reductions (a top-K round loop) runs at the chain's
latency when few warps are resident, not at the shuffle throughput (`costmodel/timing.py`).
A tile's value is tracked as its first element ("base"): enough to tell two programs' tiles
apart (`pid * BM + arange(0, BM)` has base `pid * BM`) and to see data-dependent indices (None).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from costmodel.vectorize import VECTOR_BYTES, divisor, layout, pow2, reduction_shuffles, stride
from kir import symexpr as sx
from kir.diagnostics import Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect import tile as tl
from kir.dialect.types import GlobalType, SmemType, TileType, dtype_of, shape_of
from kir.dtypes import DTYPES
from kir.interp.values import COMPARISONS
from kir.liveness import BASE_REGISTERS, fused, live_ranges, recomputed
from kir.program import Program, span_of

SECTOR = 32  # bytes: the unit of a scattered access
SFU_FNS = {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "erf": 2, "sigmoid": 2, "tanh": 1}
SFU_ALU = {"exp": 1, "log": 1, "erf": 10, "sigmoid": 3, "sin": 8, "cos": 8}  # extra ALU work around the MUFU
SIN_COS_SFU = {"sin": 1, "cos": 1}


class CountError(Exception):
    """A program the model cannot count (a size it cannot evaluate)."""


@dataclass
class Access:
    """One op's traffic to global memory, per program (loop trips included)."""

    op: Operation
    span: Span | None
    tensor: str
    kind: str  # load, store, atomic, tma.load, tma.store, cp.async
    write: bool
    bytes: float  # per program, all trips
    elements: float
    trips: float
    tensor_bytes: int  # the whole tensor
    scattered: bool  # data-dependent innermost index: one sector per lane
    data_dependent: bool  # some index is data-dependent: no reuse between programs is known
    in_loop: Operation | None  # the innermost enclosing loop
    bytes_per_trip: float = 0.0
    indices: list[SSAValue] = field(default_factory=list)
    vector: int = 1  # elements per load/store instruction (`costmodel/vectorize.py`)
    vector_max: int = 1  # elements in a 16-byte vector of this dtype
    vector_why: str = ""  # why the access is not 16-byte vectorized
    instructions: float = 0.0  # warp-wide load/store instructions per program, all trips
    # L1 sectors beyond the useful bytes (scalar strided lanes), or every lane's of a scattered load
    l1_bytes: float = 0.0


@dataclass
class Work:
    """One op's computation, per program (loop trips included)."""

    op: Operation
    span: Span | None
    unit: str  # tensor, fma, alu, int, sfu
    amount: float  # flops (tensor, fma: 2 per multiply-add) or lane operations
    dtype: str
    what: str


@dataclass
class DotShape:
    """One tile-level `dot`: its M x N x K shape and operand dtype, and how often it runs (loop
    trips). The model (`costmodel/model.py`, `dot_path`) decides from the shape and
    the warps which instruction path Triton takes and what each warp reads of the operands."""

    op: Operation
    span: Span | None
    m: int
    n: int
    k: int
    dtype: str
    mult: float


@dataclass
class LoopInfo:
    op: st.ForOp
    span: Span | None
    trips: float
    stages: int
    bound_is_upper: bool  # the bound depends on data: counted at its static upper bound
    load_bytes_per_trip: float = 0.0
    # pipelined, but this load into a dot is narrower than cp.async copies (NVIDIA: synchronous)
    synchronous: Access | None = None


@dataclass
class Counts:
    """A program's counts and the launch they belong to."""

    program: Program
    env: dict[str, int]  # parameters and shape symbols
    grid: tuple[int, ...]
    programs: int
    threads: int
    warps: int
    accesses: list[Access] = field(default_factory=list)
    work: list[Work] = field(default_factory=list)
    loops: list[LoopInfo] = field(default_factory=list)
    smem_bytes: float = 0.0  # shared-memory traffic per program
    smem_alloc: int = 0  # bytes one block allocates (explicit buffers, pipeline stages, dot and gather staging)
    registers: int = 0  # estimated per thread
    role_regs: list[tuple[str, int, int, Span | None]] = field(default_factory=list)  # (role, threads, regs, span)
    roles: int = 0
    max_stages: int = 1
    straight_load_bytes: float = 0.0  # global loads issued outside loops, per program
    chain_shuffles: float = 0.0  # dependent shuffle steps on the program's critical path
    chain_syncs: float = 0.0  # dependent cross-warp exchanges (smem store, barrier, load, barrier)
    dots: list[DotShape] = field(default_factory=list)  # tile-level dots, for their instruction path

    def unit_total(self, unit: str) -> float:
        return sum(w.amount for w in self.work if w.unit == unit)

    @property
    def flops(self) -> float:
        return sum(w.amount for w in self.work if w.unit in ("tensor", "fma") or w.what == "flop")

    def global_bytes(self, write: bool | None = None) -> float:
        return sum(a.bytes for a in self.accesses if write is None or a.write == write)


# ---- run-time scalars over a sample of programs ------------------------------------------------


def _cdiv_trunc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    b = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b >= 0), q, -q)


_INT_BIN: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _cdiv_trunc,
    "rem": lambda a, b: a - np.where(b == 0, 1, b) * _cdiv_trunc(a, b),
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shl": lambda a, b: np.left_shift(a, np.clip(b, 0, 62)),
    "shr": lambda a, b: np.right_shift(a, np.clip(b, 0, 62)),
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def _is_int(t) -> bool:
    try:
        return not DTYPES[dtype_of(t)].is_float
    except Exception:
        return False


class Evaluator:
    """Values (scalars, or a tile's first element) of every integer op, for many programs at
    once: `values[v]` is an int64 array over the sample, or None where the value depends on data.
    `upper` marks values that are upper bounds (a `minimum` with a data-dependent side).

    A loop's variable is its first value in every program of the sample; with `spread`, each
    program of the sample takes a different iteration instead (spread over the trips by the
    golden ratio), so that a nested loop whose bound follows the outer loop's variable (a
    persistent program's tiles of different lengths) averages its trips over the iterations."""

    def __init__(
        self,
        kernel: st.KernelOp,
        env: dict[str, int],
        grid: tuple[int, ...],
        linear: np.ndarray,
        spread: bool = False,
    ):
        self.env = env
        self.spread = spread
        self.values: dict[SSAValue, np.ndarray | None] = {}
        self.upper: set[SSAValue] = set()
        g = [max(1, x) for x in (*grid, 1, 1)]
        self.pid = [linear % g[0], (linear // g[0]) % g[1], linear // (g[0] * g[1])]
        self.grid = grid
        self.n = len(linear)
        self._block(kernel.body.block)

    def static(self, e: sx.SymExpr) -> int:
        return e.evaluate(self.env)

    def get(self, v: SSAValue | None) -> np.ndarray | None:
        return None if v is None else self.values.get(v)

    def _full(self, x: int) -> np.ndarray:
        return np.full(self.n, int(x), dtype=np.int64)

    def _block(self, block: Block) -> None:
        for op in block.ops:
            self._op(op)

    def _op(self, op: Operation) -> None:  # noqa: C901 - one case per op kind
        val: np.ndarray | None = None
        if isinstance(op, tl.ProgramIdOp):
            val = self.pid[op.axis.data].astype(np.int64)
        elif isinstance(op, tl.NumProgramsOp):
            a = op.axis.data
            val = self._full(self.grid[a] if a < len(self.grid) else 1)
        elif isinstance(op, tl.SymValueOp):
            name = op.symbol.data
            val = self._full(self.env[name]) if name in self.env else None
        elif isinstance(op, tl.ConstOp):
            if _is_int(op.res.type):
                val = self._full(int(op.number))
        elif isinstance(op, tl.ArangeOp):
            val = self._full(self.static(op.start.data))
        elif isinstance(op, tl.ZerosOp):
            val = self._full(0) if _is_int(op.res.type) else None
        elif isinstance(op, tl.FullOp):
            val = self.get(op.value) if _is_int(op.res.type) else None
        elif isinstance(op, tl.BinaryOp):
            a, b = self.get(op.lhs), self.get(op.rhs)
            fn = op.fn.data
            if fn == "minimum" and (a is None) != (b is None):
                val = a if a is not None else b
                self.upper.add(op.res)
            elif a is not None and b is not None and fn in _INT_BIN and _is_int(op.res.type):
                with np.errstate(all="ignore"):
                    val = _INT_BIN[fn](a, b).astype(np.int64)
                if op.lhs in self.upper or op.rhs in self.upper:
                    self.upper.add(op.res)
        elif isinstance(op, tl.CompareOp):
            a, b = self.get(op.lhs), self.get(op.rhs)
            if a is not None and b is not None:
                val = COMPARISONS[op.predicate.data](a, b).astype(np.int64)
        elif isinstance(op, tl.WhereOp):
            c, a, b = self.get(op.cond), self.get(op.lhs), self.get(op.rhs)
            if c is not None and a is not None and b is not None:
                val = np.where(c != 0, a, b)
        elif isinstance(op, tl.CastOp):
            if _is_int(op.res.type) and _is_int(op.operand.type):
                val = self.get(op.operand)
        elif isinstance(op, tl.ExpandDimsOp | tl.BroadcastOp | tl.ReshapeOp | tl.TransOp):
            val = self.get(op.operand)
        elif isinstance(op, tl.UnaryOp):
            a = self.get(op.operand)
            if a is not None and op.fn.data == "neg":
                val = -a
            elif a is not None and op.fn.data == "abs":
                val = np.abs(a)
        elif isinstance(op, st.RoleRankOp):
            val = self._full(0)
        elif isinstance(op, st.ForOp):
            block = op.body.block
            first = self.get(op.lower)
            if self.spread and first is not None:
                trips, _ = self.trips(op)
                at = np.floor(np.arange(self.n) * 0.6180339887498949 % 1.0 * np.maximum(trips, 1)).astype(np.int64)
                step = self.get(op.step)
                first = first + at * (step if step is not None else 1)
            self.values[block.args[0]] = first
            for arg in block.args[1:]:
                self.values[arg] = None
            self._block(block)
            for r in op.res:
                self.values[r] = None
        elif isinstance(op, st.IfOp):
            self._block(op.then_body.block)
            self._block(op.else_body.block)
        elif isinstance(op, st.RoleOp):
            self._block(op.body.block)
        for r in op.results:
            self.values.setdefault(r, val)

    def trips(self, loop: st.ForOp) -> tuple[np.ndarray, bool]:
        lo, hi, step = self.get(loop.lower), self.get(loop.upper), self.get(loop.step)
        upper = loop.upper in self.upper
        if lo is None or hi is None:
            return np.ones(self.n), True
        step = step if step is not None else np.ones(self.n, dtype=np.int64)
        step = np.where(step <= 0, 1, step)
        return np.maximum(0, -(-(hi - lo) // step)).astype(np.float64), upper

    def index_keys(self, indices) -> np.ndarray | None:
        """The first element of each index of an access, per program (rows: programs)."""
        cols = []
        for v in indices:
            x = self.get(v)
            if x is None:
                return None
            cols.append(x)
        if not cols:
            return np.zeros((self.n, 1), dtype=np.int64)
        return np.stack(cols, axis=1)


def sample_ids(programs: int, limit: int) -> np.ndarray:
    """Evenly spread program ids (all of them when there are at most `limit`)."""
    if programs <= limit:
        return np.arange(programs, dtype=np.int64)
    return np.unique(np.linspace(0, programs - 1, limit).astype(np.int64))


# ---- counting ----------------------------------------------------------------------------------


def _static(e: sx.SymExpr, env: dict[str, int], what: str) -> int:
    try:
        return e.evaluate(env)
    except KeyError as err:
        raise CountError(f"{what} `{e}` needs a value for {err.args[0]} (give it with --shape or --param)") from None
    except ZeroDivisionError:
        raise CountError(f"{what} `{e}` divides by zero at these values") from None


def _elements(shape, env: dict[str, int], what: str) -> int:
    return math.prod(_static(d, env, what) for d in shape)


def _tile_elems(t, env) -> int:
    return _elements(shape_of(t), env, "a tile size") if isinstance(t, TileType) else 1


def _name(v: SSAValue) -> str:
    return v.name_hint or "a tensor"


def _dtype_bytes(t) -> int:
    return DTYPES[dtype_of(t)].nbytes


_INT_WEIGHT = {"div": 20, "rem": 20, "mul": 1}
PHILOX_ROUNDS = 10  # rand / randint (kir.random)
# Division by a compile-time constant is a multiply-high, a shift and (for `%`) a multiply and
# subtract: LLVM never emits the ~20-instruction division loop for it.
_INT_WEIGHT_CONST = {"div": 3, "rem": 4}


def _is_const(v: SSAValue) -> bool:
    op: Operation | Block | None = v.owner
    while isinstance(op, tl.BroadcastOp | tl.ExpandDimsOp | tl.FullOp | tl.CastOp):
        op = op.operands[0].owner if op.operands else None
    return isinstance(op, tl.ConstOp)


BANKS = 32  # shared-memory banks of 4 bytes
# The expected number of distinct words in a warp's busiest bank when its 32 lanes read random
# words of a table, by the words each bank holds (simulated: 32 draws, duplicates broadcast).
RANDOM_BANK_LOAD = {1: 1.0, 2: 2.0, 4: 2.78, 8: 3.15, 16: 3.33, 32: 3.44, 64: 3.48, 128: 3.51}


def _gather_conflicts(op: tl.GatherOp, table_bytes: int) -> float:
    """Wavefronts a warp's gather takes per ideal one when its index depends on data: lanes
    reading different words of one bank are served one after another, as random words of the
    table would be (`RANDOM_BANK_LOAD`). An index XOR-ed with its own high bits (a swizzle,
    `i ^ (i >> 5)`) spreads a search's lanes over the banks: none."""
    if _xor_swizzled(op.index):
        return 1.0
    words_per_bank = max(1.0, table_bytes / (4 * BANKS))
    known = sorted(RANDOM_BANK_LOAD)  # interpolated in log2 of the words a bank holds, flat past the last
    return float(np.interp(math.log2(words_per_bank), np.log2(known), [RANDOM_BANK_LOAD[k] for k in known]))


def _fed_by(v: SSAValue, found, through=Operation, depth: int = 8) -> bool:
    """Whether an op for which `found(op)` holds computes tile `v`, walking back through the
    ops of types `through` that compute it (at most `depth` of them)."""
    op = v.owner
    if not isinstance(op, Operation):
        return False
    if found(op):
        return True
    if depth <= 0 or not isinstance(op, through):
        return False
    return any(_fed_by(x, found, through, depth - 1) for x in op.operands if isinstance(x.type, TileType))


def _xor_swizzled(v: SSAValue) -> bool:
    """Whether an xor feeds `v` (through the ops that compute it): how a swizzle mixes an
    index's high bits into its bank bits (`at ^ (at >> 5 & 31)`)."""
    return _fed_by(v, lambda op: isinstance(op, tl.BinaryOp) and op.fn.data == "xor", depth=6)


def _taken(op: st.IfOp, spread: Evaluator) -> float:
    """The share of programs (and of loop iterations, spread over them) that take an `if`'s first
    branch: conv1d's `if l0 > 0 & l0 + BN < L` takes the unmasked loads in 30 of 32 column blocks,
    the masked ones in the other two, not both everywhere. A condition that depends on data is
    an even chance between two branches; without an else, its branch counts in full (the most
    it can cost)."""
    cond = spread.get(op.cond)
    if cond is not None and len(cond):
        return float(np.mean(cond != 0))
    return 0.5 if list(op.else_body.block.ops)[:-1] else 1.0


def _synchronous(a: Access, dot_loads: set[SSAValue]) -> bool:
    """A load into a matrix product that a pipelined loop cannot make asynchronous on NVIDIA:
    cp.async copies 4, 8 or 16 bytes a lane, so Triton leaves a dot operand read fewer than 4
    bytes at a time (conv1d's im2col rows, shifted by the tap: one bf16 a load) as plain
    loads, stores them to shared memory itself and waits on the product before the next trip.
    The loop overlaps nothing then: its stages do not count (`costmodel/model.py`). Checked in
    the SASS on NVIDIA only; other targets keep counting the stages."""
    if a.write or a.kind != "load" or not isinstance(a.op, tl.LoadOp) or a.op.res not in dot_loads:
        return False
    return a.vector * _dtype_bytes(a.op.mem.type) < 4


def synchronous_on(info: LoopInfo, vendor: str) -> bool:
    """Whether a pipelined loop overlaps nothing on a chip of `vendor` (`_synchronous`: checked
    in NVIDIA's SASS only)."""
    return info.synchronous is not None and vendor == "nvidia"


def _nested_loops(kernel: st.KernelOp) -> bool:
    """Whether a loop sits inside another (at any depth)."""

    def inside_loop(op: Operation) -> bool:
        parent = op.parent_op()
        while parent is not None and not isinstance(parent, st.ForOp):
            parent = parent.parent_op()
        return parent is not None

    return any(isinstance(o, st.ForOp) and inside_loop(o) for o in kernel.walk())


def count(program: Program, env: dict[str, int], sample_limit: int = 256) -> tuple[Counts, Evaluator]:
    """Count one program of `program` with parameters and shape symbols bound by `env`."""
    kernel = program.kernel
    grid = tuple(max(0, _static(g.data, env, "the grid")) for g in kernel.grid.data)
    programs = math.prod(grid) if grid else 1
    threads = kernel.threads
    counts = Counts(program, env, grid, programs, threads, max(1, threads // 32))
    ids = sample_ids(max(1, programs), sample_limit)
    ev = Evaluator(kernel, env, grid, ids)
    # trip counts of nested loops, averaged over the iterations of the loops around them (each
    # sampled program repeated to 64 samples at least, each at other iterations)
    repeat = -(-64 // len(ids))
    branches = any(isinstance(op, st.IfOp) for op in kernel.walk())
    spread = (
        Evaluator(kernel, env, grid, np.tile(ids, repeat), spread=True) if _nested_loops(kernel) or branches else ev
    )
    loads_into_dots = _dot_operand_loads(kernel)

    def access(op, mem, indices, access_attr, kind, write, mult, loop, shape_override=None):
        t = mem.type
        shape = shape_override if shape_override is not None else tl.access_shape(t, access_attr.data, list(indices))
        extents = [_static(d, env, "an access extent") for d in shape]
        if isinstance(t, GlobalType):
            _clamp_gather(extents, indices, t, env, known=[ev.get(v) is not None for v in indices])
        elems = math.prod(extents)
        b = _dtype_bytes(t)
        if isinstance(t, SmemType):
            counts.smem_bytes += elems * b * mult
            return
        tensor_elems = _elements(shape_of(t), env, "a tensor dimension")
        # lanes the mask turns off move nothing (their instructions still issue: `lanes`)
        lanes = elems
        elems *= _mask_fraction(getattr(op, "mask", None), extents, ev)
        requested = elems  # lanes that ask: a gather from a small table asks more than it holds
        elems = min(elems, tensor_elems) if tensor_elems else elems
        keys = [ev.get(v) for v in indices]
        dependent = any(k is None for k in keys)
        scattered = bool(indices) and isinstance(indices[-1].type, TileType) and keys[-1] is None
        nbytes = elems * (SECTOR if scattered and not write else b)
        vec, why, lane_stride = _vector(mem, indices, access_attr, extents, env, scattered)
        vmax = max(1, VECTOR_BYTES // b)
        warp_insts = (
            min(lanes, tensor_elems or lanes) / vec / 32 * mult
            if kind in ("load", "store", "atomic", "cp.async")
            else 0.0
        )
        l1_extra = 0.0
        if vec < vmax and not scattered and warp_insts:
            # a scalar instruction's 32 lanes, `lane_stride` elements apart, touch this many sectors
            sectors = min(32, math.ceil(32 * max(1, lane_stride) * b / SECTOR) + (lane_stride == 1))
            l1_extra = max(0.0, warp_insts * sectors * SECTOR - elems * b * mult)
        elif scattered and not write:
            # every lane's sector goes through L1, however few distinct elements the table has
            l1_extra = requested * SECTOR * mult
        counts.accesses.append(
            Access(
                op,
                span_of(op),
                _name(mem),
                kind,
                write,
                nbytes * mult,
                elems * mult,
                mult,
                tensor_elems * b,
                scattered,
                dependent,
                loop,
                nbytes,
                list(indices),
                vec,
                vmax,
                why,
                warp_insts,
                l1_extra,
            )  # fmt: skip
        )

    def work(op, unit, amount, dtype, what, mult):
        if amount:
            counts.work.append(Work(op, span_of(op), unit, amount * mult, dtype, what))

    def elementwise(op, res, mult):
        t = res.type
        if not isinstance(t, TileType):
            return
        n = _tile_elems(t, env)
        dt = dtype_of(t)
        if isinstance(op, tl.RandOp):
            # Philox4x32-10: per round and lane two 32x32->64 multiplies (IMAD.WIDE, two issues
            # each) and two XORs of three operands (LOP3); the key schedule depends on the seed
            # alone, one value for the warp (uniform registers); then the float conversion
            work(op, "int", n * (PHILOX_ROUNDS * 6 + (3 if op.fn.data == "rand" else 0)), dt, op.fn.data, mult)
            return
        if isinstance(op, tl.UnaryOp):
            fn = op.fn.data
            src = dtype_of(op.operand.type)
            if fn in SFU_FNS or fn in SIN_COS_SFU:
                work(op, "sfu", n * SFU_FNS.get(fn, 1), src, fn, mult)
                work(op, "alu", n * SFU_ALU.get(fn, 0), src, fn, mult)
            else:
                work(op, "alu" if DTYPES[src].is_float else "int", n, src, fn, mult)
            return
        if isinstance(op, tl.BinaryOp):
            fn = op.fn.data
            src = dtype_of(op.lhs.type)
            if DTYPES[src].is_float:
                if fn == "div":
                    work(op, "sfu", n, src, "div", mult)
                    work(op, "alu", 2 * n, src, "flop", mult)
                elif fn == "pow":
                    work(op, "sfu", 2 * n, src, "pow", mult)
                else:
                    work(op, "alu", n, src, "flop", mult)
            else:
                wide = 4 if DTYPES[src].nbytes == 8 else 1
                weight = _INT_WEIGHT_CONST.get(fn) if _is_const(op.rhs) else None
                work(op, "int", n * (weight or _INT_WEIGHT.get(fn, 1)) * wide, src, fn, mult)
            return
        if isinstance(op, tl.CompareOp | tl.WhereOp | tl.CastOp):
            src = dtype_of(op.operands[-1].type) if not isinstance(op, tl.CastOp) else dtype_of(op.operand.type)
            unit = "alu" if DTYPES[src].is_float or DTYPES[dt].is_float else "int"
            wide = 2 if DTYPES[src].nbytes == 8 or DTYPES[dt].nbytes == 8 else 1
            work(op, unit, n * wide, dt, op.name.removeprefix("kir."), mult)

    def visit(block: Block, mult: float, loop: st.ForOp | None) -> None:
        for op in block.ops:
            if isinstance(op, st.ForOp):
                trips_arr, upper = spread.trips(op)
                trips = float(trips_arr.mean()) if len(trips_arr) else 0.0
                if upper:  # a data-dependent bound: the log-midpoint of 1 and the upper bound
                    trips = math.sqrt(trips) if trips >= 1 else trips
                stages = _static(op.stages.data, env, "pipeline stages") if op.stages is not None else 1
                info = LoopInfo(op, span_of(op), trips, max(1, stages), upper)
                counts.loops.append(info)
                counts.max_stages = max(counts.max_stages, info.stages)
                visit(op.body.block, mult * trips, op)
                continue
            if isinstance(op, st.IfOp):
                taken = _taken(op, spread)
                visit(op.then_body.block, mult * taken, loop)
                visit(op.else_body.block, mult * (1.0 - taken), loop)
                continue
            if isinstance(op, st.RoleOp):
                counts.roles += 1
                units = len(op.id_list)
                visit(op.body.block, mult * units, loop)
                continue
            if isinstance(op, tl.LoadOp):
                access(op, op.mem, list(op.indices), op.access, "load", False, mult, loop)
            elif isinstance(op, tl.StoreOp):
                access(op, op.mem, list(op.indices), op.access, "store", True, mult, loop)
            elif isinstance(op, tl.AtomicOp):
                access(op, op.mem, list(op.indices), op.access, "atomic", True, mult, loop)
                access(op, op.mem, list(op.indices), op.access, "atomic", False, mult, loop)
            elif isinstance(op, ex.TmaLoadOp | ex.CpAsyncOp):
                kind = "tma.load" if isinstance(op, ex.TmaLoadOp) else "cp.async"
                access(op, op.src, list(op.src_indices), op.src_access, kind, False, mult, loop)
                access(op, op.dst, list(op.dst_indices), op.dst_access, kind, True, mult, loop)
            elif isinstance(op, ex.TmaStoreOp):
                access(op, op.src, list(op.src_indices), op.src_access, "tma.store", False, mult, loop)
                access(op, op.dst, list(op.dst_indices), op.dst_access, "tma.store", True, mult, loop)
            elif isinstance(op, ex.WgmmaOp):
                a, b = op.operand_shapes()  # as multiplied: [M, K] and [K, N], `trans` applied
                m, k = (_static(d, env, "a wgmma operand") for d in a)
                n = _static(b[1], env, "a wgmma operand")
                dt = dtype_of(op.a.type)
                work(op, "tensor", 2 * m * n * k, dt, "wgmma", mult)
                # an A operand in registers is read at issue, not from shared memory
                a_bytes = 0 if op.a_in_registers else m * k
                counts.smem_bytes += (a_bytes + k * n) * DTYPES[dt].nbytes * mult
            elif isinstance(op, tl.DotOp):
                m, k = (_static(d, env, "a dot operand") for d in shape_of(op.lhs.type))
                n = _static(shape_of(op.rhs.type)[1], env, "a dot operand")
                dt = dtype_of(op.lhs.type)
                rate = "tf32" if op.tf32 else dt  # the tensor cores' TF32 rate, operands still 4 bytes
                work(op, "tensor", 2 * m * n * k, rate, "dot", mult)
                counts.smem_bytes += (m * k + k * n) * DTYPES[dt].nbytes * mult
                counts.dots.append(DotShape(op, span_of(op), m, n, k, rate, mult))
            elif isinstance(op, tl.ReduceOp | tl.ArgReduceOp | tl.ScanOp):
                n = _tile_elems(op.operand.type, env)
                dt = dtype_of(op.operand.type)
                factor = 2 if isinstance(op, tl.ArgReduceOp) else 1
                name = op.name.removeprefix("kir.")
                work(op, "alu" if DTYPES[dt].is_float else "int", n * factor, dt, name, mult)
                shape = [_static(d, env, "a tile size") for d in shape_of(op.operand.type)]
                axis = op.axis.data if hasattr(op, "axis") else len(shape) - 1
                laid = _layout_bytes(op.operand)  # the element size the tile's layout was made for
                shuffles, lanes, warps_on = reduction_shuffles(shape, axis, threads, laid)
                # each step is a shfl and the combining op, on the MIO pipe with the loads
                work(op, "shfl", shuffles * factor, dt, f"{name}: {lanes} lanes x {warps_on} warps on the axis", mult)
                counts.chain_shuffles += math.ceil(math.log2(max(1, lanes))) * factor * mult
                counts.chain_syncs += (1 if warps_on > 1 else 0) * factor * mult
                if warps_on > 1:  # partials of each warp through shared memory and back
                    outputs = math.prod(shape) // max(1, shape[axis])
                    conflicts = 1 if _from_dot(op.operand) else _partials_conflicts(shape, axis, threads, laid)
                    counts.smem_bytes += 2 * outputs * warps_on * DTYPES[dt].nbytes * factor * mult * conflicts
            elif isinstance(op, tl.GatherOp):
                # the source goes through shared memory (written once, each result element read
                # back at its index), as Triton lowers a gather across warps; one address per
                # result element on the integer pipe. A data-dependent index reads the words of
                # one bank one after another (`_gather_conflicts`).
                n = _tile_elems(op.res.type, env)
                esize = _dtype_bytes(op.res.type)
                src_elems = _tile_elems(op.src.type, env)
                data = ev.get(op.index) is None or op.index in ev.upper
                bank_conflicts = _gather_conflicts(op, src_elems * esize) if data else 1.0
                counts.smem_bytes += (src_elems + n * bank_conflicts) * esize * mult
                work(op, "int", n, dtype_of(op.index.type), "gather", mult)
            elif isinstance(op, tl.TopKOp):
                n = _tile_elems(op.operand.type, env)
                k = _static(op.k.data, env, "topk's k")
                work(
                    op, "alu", n * max(1, math.ceil(math.log2(max(2, k)))) * 2, dtype_of(op.operand.type), "topk", mult
                )
            else:
                for r in op.results:
                    elementwise(op, r, mult)

    visit(kernel.body.block, 1.0, None)

    for info in counts.loops:
        info.load_bytes_per_trip = sum(
            a.bytes_per_trip for a in counts.accesses if a.in_loop is info.op and not a.write
        )
        if info.stages >= 2:
            info.synchronous = next(
                (a for a in counts.accesses if a.in_loop is info.op and _synchronous(a, loads_into_dots)), None
            )
    counts.straight_load_bytes = sum(a.bytes for a in counts.accesses if a.in_loop is None and not a.write)
    counts.smem_alloc = _smem_alloc(kernel, env, counts, loads_into_dots)
    counts.registers, counts.role_regs = _registers(program, env, loads_into_dots)
    return counts, ev


def _layout_bytes(v: SSAValue) -> int:
    """The element size a tile's register layout was chosen for: a load's 16-byte vectors hold
    8 bf16 values, and widening them (`cast<f32>(load(...))`) keeps 8 a thread, not 4."""
    op = v.owner
    while isinstance(op, tl.CastOp) and isinstance(op.operand.type, TileType):
        op = op.operand.owner
    src = op.mem.type if isinstance(op, tl.LoadOp) else v.type
    return min(DTYPES[dtype_of(src)].nbytes, DTYPES[dtype_of(v.type)].nbytes)


def _from_dot(v: SSAValue) -> bool:
    """Whether a tile is computed elementwise from a matrix product's result: it keeps the
    product's register layout, not the blocked layout `_partials_conflicts` describes."""
    elementwise = tl.BinaryOp | tl.UnaryOp | tl.CastOp | tl.WhereOp | tl.CompareOp | tl.BroadcastOp
    return _fed_by(v, lambda op: isinstance(op, tl.DotOp | ex.WgmmaOp), elementwise)


def _partials_conflicts(shape: list[int], axis: int, threads: int, elem_bytes: int) -> int:
    """Bank conflicts of writing and reading back the warps' partials of a reduction across
    warps along an outer axis (a column sum: `sum(x, axis = 0)`). Triton's scratch puts the
    warps' partials of one output next to each other (word `output * warps + warp`), and each
    lane holds `v` neighbouring outputs (a 16-byte vector along the innermost axis): the lanes
    that write, those along the innermost axis, are v x warps words apart and fall into
    32 / gcd(v x warps, 32) banks (Nsight Compute, embedding_bag on 16 warps: every partial
    store and load 32-way, 2.4 ms of a kernel whose HBM traffic takes 0.12). A reduction along
    the innermost axis leaves one partial a lane."""
    if not shape or axis == len(shape) - 1:
        return 1
    lanes, warps = layout(shape, threads, elem_bytes)
    v = max(1, min(VECTOR_BYTES // elem_bytes, shape[-1]))
    banks = 32 // math.gcd(v * warps[axis], 32)
    return max(1, math.ceil(lanes[-1] / banks))


def _vector(mem, indices, access_attr, extents, env, scattered) -> tuple[int, str, int]:
    """(elements per instruction, why not 16 bytes, element step between neighbouring lanes)
    of a global access, as Triton's AxisInfo can prove them (`costmodel/vectorize.py`)."""
    t = mem.type
    b = _dtype_bytes(t)
    vmax = max(1, VECTOR_BYTES // b)
    if not isinstance(t, GlobalType) or not indices or not extents:
        return vmax, "", 1
    if scattered:
        return 1, "the innermost index is data-dependent", 1
    dims = [_static(d.data, env, "a tensor dimension") for d in t.shape.data]
    if t.strides.data:
        strides = [_static(s.data, env, "a tensor stride") for s in t.strides.data]
    else:
        strides = [math.prod(dims[i + 1 :]) for i in range(len(dims))]
    last = indices[-1]
    sliced = access_attr.data.dims[-1] is not None
    step = 1 if sliced else stride(last)
    if step is None:
        return 1, "the innermost index is not `start + arange(..)`", 1
    if step == 0:  # the lanes differ along an outer dimension: each reads its own element
        lanes = [abs(st_ or 0) * strides[i] for i, st_ in enumerate(stride(v) for v in indices[:-1])]
        apart = next((x for x in reversed(lanes) if x), 32)
        return 1, f"the innermost index is the same for every lane: lanes are {apart} elements apart", apart
    step *= strides[-1]
    if step != 1:
        return 1, f"the innermost elements are {step} apart (stride {step}), not contiguous", step
    vec = vmax
    vec = min(vec, pow2(extents[-1]))
    align = (t.align.data or VECTOR_BYTES) // b
    vec = min(vec, max(1, align))
    offset = min(divisor(v, env) * pow2(s) for v, s in zip(indices, strides, strict=False))
    if offset < vmax:
        vec = min(vec, offset)
        return vec, f"its first element's offset is only provably a multiple of {offset} element(s)", 1
    if vec < vmax:
        return vec, f"only {vec} contiguous, aligned element(s) per thread", 1
    return vec, "", 1


def _clamp_gather(extents: list[int], indices, t: GlobalType, env: dict[str, int], known: list[bool]) -> None:
    """A gather axis driven by one index tile along one tensor dimension touches at most that
    dimension's extent (`x[row, cols]` with BLOCK > N: the lanes past N are masked off). Only
    for index tiles known before the run: a data-dependent index (a binary search's probe into a
    1023-entry table) asks once per lane, however small the table."""
    if not any(isinstance(v.type, TileType) for v in indices):
        return
    rank = len(extents)
    dims = shape_of(t)
    for i, v in enumerate(indices):
        if not isinstance(v.type, TileType) or not known[i]:
            continue
        shape = [_static(d, env, "an index tile") for d in shape_of(v.type)]
        axes = [rank - len(shape) + j for j, e in enumerate(shape) if e != 1]
        if len(axes) == 1 and i < len(dims):
            extents[axes[0]] = min(extents[axes[0]], _static(dims[i], env, "a tensor dimension"))


def _mask_fraction(mask: SSAValue | None, extents: list[int], ev: Evaluator) -> float:
    """The share of an access's lanes that its mask lets through, from the conjuncts of the
    mask that bound one axis: `j < L` with j an arange along that axis (plus a scalar offset,
    broadcast), averaged over the sampled programs (an embedding bag's `j < L` in a BL-row tile
    with BL > L, a tail block's `offs < N`). Other conjuncts count as all lanes on."""
    if mask is None or not isinstance(mask.type, TileType):
        return 1.0
    rank = len(extents)
    share = 1.0
    limits: dict[int, float] = {}
    for cmp, axis in _conjuncts(mask, len(shape_of(mask.type))):
        axis += rank - len(shape_of(mask.type))
        if not 0 <= axis < rank or not extents[axis]:
            continue
        first, bound = ev.get(cmp.lhs), ev.get(_scalar_source(cmp.rhs))
        if first is None or bound is None or _arange_axis(cmp.lhs) is None:
            continue
        inclusive = 1 if cmp.predicate.data == "le" else 0
        active = float(np.mean(np.clip(bound + inclusive - first, 0, extents[axis])))
        limits[axis] = min(limits.get(axis, extents[axis]), active)
    for axis, active in limits.items():
        share *= active / extents[axis]
    return share


def _conjuncts(v: SSAValue, rank: int):
    """(comparison `x < y` or `x <= y`, the axis of v's rank-`rank` tile that x runs along) for
    each conjunct of a mask built with `&`, expand_dims and broadcasts."""
    op = v.owner
    if isinstance(op, tl.BinaryOp) and op.fn.data == "and":
        for side in (op.lhs, op.rhs):
            r = len(shape_of(side.type)) if isinstance(side.type, TileType) else 0
            for cmp, axis in _conjuncts(side, r):
                yield cmp, axis + rank - r
    elif isinstance(op, tl.ExpandDimsOp):
        for cmp, axis in _conjuncts(op.operand, rank - 1):
            yield cmp, axis + (1 if op.axis.data <= axis else 0)
    elif isinstance(op, tl.BroadcastOp) and isinstance(op.operand.type, TileType):
        r = len(shape_of(op.operand.type))
        for cmp, axis in _conjuncts(op.operand, r):
            yield cmp, axis + rank - r
    elif isinstance(op, tl.CompareOp) and op.predicate.data in ("lt", "le"):
        axis = _arange_axis(op.lhs)
        if axis is not None and _scalar_source(op.rhs) is not None:
            yield op, axis + rank - len(shape_of(op.lhs.type))


def _arange_axis(v: SSAValue) -> int | None:
    """The one axis along which an integer tile steps by 1 (an arange, expanded, broadcast, or
    plus a scalar), or None."""
    op = v.owner
    if isinstance(op, tl.ArangeOp):
        return 0
    if isinstance(op, tl.ExpandDimsOp):
        axis = _arange_axis(op.operand)
        return None if axis is None else axis + (1 if op.axis.data <= axis else 0)
    if isinstance(op, tl.BroadcastOp) and isinstance(op.operand.type, TileType):
        axis = _arange_axis(op.operand)
        return None if axis is None else axis + len(shape_of(v.type)) - len(shape_of(op.operand.type))
    if isinstance(op, tl.BinaryOp) and op.fn.data in ("add", "sub"):
        sides = [(op.lhs, op.rhs)] if op.fn.data == "sub" else [(op.lhs, op.rhs), (op.rhs, op.lhs)]
        for tile, other in sides:
            if _scalar_source(other) is not None:
                axis = _arange_axis(tile)
                if axis is not None:
                    return axis + len(shape_of(v.type)) - len(shape_of(tile.type))
    return None


def _scalar_source(v: SSAValue) -> SSAValue | None:
    """The scalar a value broadcasts (itself when it is a scalar), or None for a varying tile."""
    while isinstance(v.type, TileType):
        op = v.owner
        if isinstance(op, tl.BroadcastOp | tl.ExpandDimsOp):
            v = op.operand
        elif isinstance(op, tl.FullOp | tl.ConstOp):
            return v
        else:
            return None
    return v


def _dot_operand_loads(kernel: st.KernelOp) -> set[SSAValue]:
    """Global tile loads whose only uses are dot operands (possibly through a cast or trans):
    Triton copies them into shared memory, so they hold no registers."""
    out: set[SSAValue] = set()
    for op in kernel.walk():
        if isinstance(op, tl.LoadOp) and isinstance(op.mem.type, GlobalType) and isinstance(op.res.type, TileType):
            if _feeds_only_dots(op.res, 3):
                out.add(op.res)
    return out


def _feeds_only_dots(v: SSAValue, depth: int) -> bool:
    uses = list(v.uses)
    if not uses or depth == 0:
        return False
    for use in uses:
        user = use.operation
        if isinstance(user, tl.DotOp) and use.index < 2:
            continue
        if isinstance(user, tl.TransOp | tl.CastOp) and _feeds_only_dots(user.results[0], depth - 1):
            continue
        return False
    return True


def _smem_alloc(kernel: st.KernelOp, env: dict[str, int], counts: Counts, dot_loads: set[SSAValue]) -> int:
    """Bytes of shared memory one block allocates: explicit buffers and mbarriers, the stages of
    pipelined loads, and the staging of dot operands loaded outside a pipelined loop and of
    gather sources."""
    total: float = 0  # the stages' bytes per trip are floats
    for op in kernel.walk():
        if isinstance(op, ex.SmemAllocOp):
            t = op.res.type
            total += _elements(shape_of(t), env, "a shared buffer") * _dtype_bytes(t)
        elif isinstance(op, ex.MBarrierAllocOp):
            total += 8 * _static(op.res.type.size.data, env, "an mbarrier count")
    for info in counts.loops:
        if info.stages >= 2:
            total += info.stages * sum(
                a.bytes_per_trip for a in counts.accesses if a.in_loop is info.op and not a.write and not a.scattered
            )
    staged = 0
    for op in kernel.walk():
        if isinstance(op, tl.DotOp):
            loop = op.parent_op()
            pipelined = isinstance(loop, st.ForOp) and loop.stages is not None
            if not pipelined:
                m, k = (_static(d, env, "a dot operand") for d in shape_of(op.lhs.type))
                n = _static(shape_of(op.rhs.type)[1], env, "a dot operand")
                staged = max(staged, (m * k + k * n) * DTYPES[dtype_of(op.lhs.type)].nbytes)
        elif isinstance(op, tl.GatherOp):  # the source, staged for the lanes that read it
            staged = max(staged, _tile_elems(op.src.type, env) * _dtype_bytes(op.src.type))
    return math.ceil(total + staged)  # the stages' bytes per trip are floats: whole bytes are allocated


# ---- registers ---------------------------------------------------------------------------------


def _tile_regs(v: SSAValue, env: dict[str, int], threads: int, free: set[SSAValue]) -> int:
    t = v.type
    if not isinstance(t, TileType) or v in free or fused(v):
        return 0
    n = _tile_elems(t, env)
    return -(-n * _dtype_bytes(t) // (4 * threads))


def _block_peak(block: Block, env, threads: int, outer: int, free: set[SSAValue]) -> int:
    ranges = live_ranges(block)
    ops, defs, last = ranges.ops, ranges.defs, ranges.last
    cost = {v: _tile_regs(v, env, threads, free) for v in defs}
    best = outer
    for i, op in enumerate(ops):
        live = sum(c for v, c in cost.items() if c and defs[v] < i <= last.get(v, -1))
        fresh = 0 if op.regions else sum(cost.get(r, 0) for r in op.results)
        dying = sum(c for v, c in cost.items() if c and defs[v] < i and last.get(v, -1) == i)
        here = outer + live - dying + max(fresh, dying)
        best = max(best, here)
        if isinstance(op, st.RoleOp):
            continue
        through = outer + sum(c for v, c in cost.items() if c and defs[v] < i < last.get(v, -1) + 1)
        for region in op.regions:
            for b in region.blocks:
                best = max(best, _block_peak(b, env, threads, through, free))
    return best


def _registers(program: Program, env, free: set[SSAValue]) -> tuple[int, list]:
    """Registers per thread: the largest set of live tiles (values a loop uses live through it)
    spread over the threads that hold them, plus a base for addresses and counters. Roles have
    their own threads and their `regs(N)` budget when they give one."""
    kernel = program.kernel
    threads = kernel.threads
    body = kernel.body.block
    free = free | recomputed(kernel)
    top = BASE_REGISTERS + _block_peak(body, env, threads, 0, free)
    roles = []
    for op in body.ops:
        if isinstance(op, st.RoleOp):
            unit = 128 if op.unit.data == "warpgroups" else 32
            estimate = BASE_REGISTERS + _block_peak(op.body.block, env, unit, 0, free)
            regs = op.regs.data or estimate
            roles.append((op.role_name.data, unit * len(op.id_list), regs, span_of(op)))
    return top, roles
