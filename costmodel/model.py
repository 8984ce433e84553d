"""The cost model's interface: predict, update, save, load (as TVM MetaSchedule's cost model).

    from costmodel import CostModel
    model = CostModel()                          # or CostModel.load("calibration.json")
    est = model.predict(program, "sm_90", params={"BM": 128}, shapes={"M": 4096})
    est.time_s, est.bottleneck, est.breakdown, est.hints
    model.update(measurements)                   # fit per-target corrections from measured runs
    model.save("calibration.json")

`predict` counts the program (`counting.py`), finds its occupancy (`occupancy.py`), models L2
reuse between the programs of a wave (here), and times it wave by wave (`timing.py`); the
calibration (`calibration.py`) multiplies each resource's time by a fitted per-target factor.
mtia-sim has a model of its own (`mtia.py`); both answer with an `Estimate` (`estimate.py`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.ir import Operation

from costmodel import calibration, hints, mtia
from costmodel.checks import Checks
from costmodel.counting import Access, Counts, Evaluator, synchronous_on
from costmodel.estimate import Estimate, Term, bind_env, count_or_fail
from costmodel.occupancy import SMEM_RESERVED, Occupancy, occupancy
from costmodel.spec import Chip, chip
from costmodel.timing import COMPUTE, RESOURCES, Raw, overlap
from kir.diagnostics import Diagnostic, Related, Span
from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dtypes import DTYPES
from kir.program import Program
from kir.targets import spec

WAVE_SAMPLE_LIMIT = 8192
L2_RESIDENT = 0.75  # a tensor up to this share of L2 stays there once read  # programs of the first wave whose tiles are compared for reuse

UNIT_NAMES = {
    "dram": "DRAM",
    "l2": "L2",
    "tensor": "tensor cores",
    "fma": "FMA (f32 dot)",
    "alu": "ALU",
    "int": "integer ALU",
    "sfu": "special functions",
    "l1": "shared memory / L1",
    "spill": "register spills (local memory)",
    "lsu": "LSU / MIO issue (load, store, shuffle instructions)",
    "shfl": "LSU / MIO issue (load, store, shuffle instructions)",
}


def _reuse(
    counts: Counts, ev_wave: Evaluator | None, wave: int, c: Chip, concurrent: int
) -> list[tuple[Access, float, float]]:
    """(access, DRAM bytes, ideal bytes) over all programs. A tile that several programs of one
    wave read comes from DRAM once per wave (they run together, so it is still in L2); a tensor
    small enough to stay in L2 comes from DRAM once; data-dependent reads get no reuse. A
    program's second read of what it read before (`_reread_hit`) comes from L2 as far as L2
    still holds it."""
    out = []
    p = counts.programs
    seen: dict[tuple, Access] = {}
    for a in counts.accesses:
        requested = a.bytes * p
        ideal = min(requested, a.tensor_bytes) if not a.write else requested
        if a.write:
            out.append((a, requested, ideal))
            continue
        dram = requested
        keys = None
        if not a.data_dependent and ev_wave is not None and wave > 1:
            keys = ev_wave.index_keys(a.indices)
            if keys is not None and len(keys):
                distinct = len(np.unique(keys, axis=0))
                dram = requested * distinct / len(keys)
        first = None
        if keys is not None:
            key = (a.tensor, a.bytes, keys.shape, keys.tobytes())
            first = seen.get(key)
            seen.setdefault(key, a)
        if first is not None:
            ideal = 0.0
            dram *= 1.0 - _reread_hit(first, concurrent, c)
        dram = max(dram, ideal)
        if a.tensor_bytes <= L2_RESIDENT * c.l2_bytes:
            dram = min(dram, a.tensor_bytes)
        out.append((a, dram, ideal))
    return out


def _reread_hit(first: Access, concurrent: int, c: Chip) -> float:
    """The share of a program's second read of the same tiles that L2 still holds. Between the
    two reads every resident program reads its own tiles, so the data live for re-reading is
    about the concurrent programs times the bytes the first read brought in. The resident
    programs are at different points of their rows, so the bytes that pass through L2 between a
    line's two reads spread around that mean, and the share of re-reads that still find their
    line falls off linearly: all of them hit while the live data fit in `l2_reuse_bytes` / 2 (a
    quarter of L2: Hopper caches a line in the L2 partition near the SM that reads it as well as
    at home), none once the live data fill the whole L2 (`l2_bytes`). Fitted to rmsnorm in two
    chunked passes over a 16 KB row on the H200 (repeat sweep): 4 blocks an SM (9 MB live) all
    from L2, 8 (17 MB) ~0.85, 10 (22 MB) ~0.75, 16 (35 MB) ~0.35, 32 (69 MB) all from DRAM; the
    earlier min(1, l2_reuse_bytes / live) kept 8-10 blocks an SM all in L2 and half of 16's,
    and ordered 0.73 of that task's pairs right (0.88 with the ramp)."""
    live = concurrent * first.bytes
    full = c.l2_reuse_bytes / 2
    if live <= full:
        return 1.0
    return max(0.0, (c.l2_bytes - live) / max(1.0, c.l2_bytes - full))


L1_RESIDENT = 65536  # bytes: a tensor this small stays in L1 after a program's first touch


def _l2_bytes(a: Access) -> float:
    """Bytes one program requests from L2 for an access: a small tensor read over and over (the
    boundaries of a binary search) is served by L1 after the first touch."""
    if not a.write and a.tensor_bytes <= L1_RESIDENT:
        return min(a.bytes, a.tensor_bytes)
    return a.bytes


def _ring_stages(program: Program, env: dict[str, int]) -> int:
    """The depth of an explicit shared-memory ring (the leading dimension of its buffers)."""
    best = 1
    for op in program.kernel.walk():
        if isinstance(op, ex.SmemAllocOp) and len(op.res.type.shape.data) >= 3:
            try:
                best = max(best, op.res.type.shape.data[0].data.evaluate(env))
            except (KeyError, ZeroDivisionError):
                pass
    return best


def analyze(
    program: Program,
    target: str,
    params: dict[str, int] | None = None,
    shapes: dict[str, int] | None = None,
    registers: int | None = None,
    smem_bytes: int | None = None,
    spills: int | None = None,
    checks: Checks | None = None,
) -> tuple[Raw, Counts, Occupancy, list, Chip]:
    """Everything before calibration: the raw timing inputs, counts, occupancy, DRAM per access."""
    c = chip(target)
    env = bind_env(program, params, shapes, checks)
    counts = count_or_fail(program, env)
    occ = occupancy(counts, c, registers, smem_bytes)
    concurrent = occ.blocks_per_sm * c.sms
    wave = min(counts.programs, concurrent, WAVE_SAMPLE_LIMIT)
    ev_wave = Evaluator(program.kernel, env, counts.grid, np.arange(wave, dtype=np.int64)) if wave > 1 else None
    dram = _reuse(counts, ev_wave, wave, c, min(counts.programs, concurrent))
    p = max(1, counts.programs)

    per_program: dict[str, float] = {r: 0.0 for r in COMPUTE}
    for w in counts.work:
        if w.unit == "tensor":
            _, rate = c.tc_rate(w.dtype)
            unit = "tensor" if c.tc_rate(w.dtype)[0] == "tensor" else "fma"
            per_program[unit] += w.amount / (rate / c.sms)
        elif w.unit == "alu":
            per_program["alu"] += w.amount / c.alu_ops_per_sm
        elif w.unit == "int":
            per_program["int"] += w.amount / c.int_ops_per_sm
        elif w.unit == "sfu":
            per_program["sfu"] += w.amount / c.sfu_ops_per_sm
        elif w.unit == "shfl":
            per_program["lsu"] += w.amount / c.shfl_per_sm
    per_program["lsu"] += sum(a.instructions for a in counts.accesses) / c.lsu_per_sm
    dot_reads = 0.0
    for d in counts.dots:
        path = dot_path(d.m, d.n, d.k, d.dtype, counts.warps, len(counts.dots) >= 2, c)
        dot_reads += path.smem_bytes * d.mult
        if path.replicas > 1:  # the duplicated warps' products issue too
            unit = "fma" if path.name == "fma" else "tensor"
            per_program[unit] += 2 * d.m * d.n * d.k * d.mult * (path.replicas - 1) / (c.tc_rate(d.dtype)[1] / c.sms)
    l1_bytes = counts.smem_bytes + sum(a.l1_bytes for a in counts.accesses) + dot_reads
    per_program["l1"] = l1_bytes / c.smem_bps_per_sm

    unscaled = dict(per_program)
    # Little's law for the issue of dependent lane work: a scheduler hides an instruction's
    # latency only with enough warps resident; below that the ALU pipes idle between them.
    resident = occ.blocks_per_sm * max(1, counts.warps)
    if not c.single_thread and resident < c.latency_warps:
        for r in ("alu", "int", "sfu"):
            per_program[r] *= c.latency_warps / resident
    stages = max([1, *(info.stages for info in counts.loops if not synchronous_on(info, c.vendor))])
    if counts.roles >= 2:
        stages = max(stages, _ring_stages(program, env))
    loop_inflight = [
        info.load_bytes_per_trip * (1 if synchronous_on(info, c.vendor) else max(1, info.stages - 1))
        for info in counts.loops
    ]
    inflight = max([counts.straight_load_bytes, *loop_inflight]) if counts.accesses else 0.0
    if counts.roles >= 2:
        inflight *= max(1, stages - 1)
    lane_overlap = _phase_overlap(counts, unscaled, stages, c)
    streams = _streams(counts, occ.blocks_per_sm, c)
    raw = Raw(
        programs=counts.programs,
        sms=c.sms,
        blocks_per_sm=occ.blocks_per_sm,
        per_program_s=per_program,
        dram_bytes=sum(d for _, d, _ in dram) / p,
        l2_bytes=sum(_l2_bytes(a) for a in counts.accesses),
        dram_bps=c.dram_bps,
        l2_bps=c.l2_bps,
        inflight_bytes=inflight,
        latency_s=c.dram_latency_s,
        overlap=overlap(streams, stages, counts.roles) * lane_overlap,
        cta_overhead_s=c.cta_overhead_s,
        launch_s=c.launch_s,
        spill_s=_spill_s(spills or 0, counts, occ, c),
        chain_s=counts.chain_shuffles * c.shfl_latency_s + counts.chain_syncs * c.sync_latency_s,
        block_launch_s=c.block_launch_s,
        drain_share=c.drain_share,
        extra={"stages": stages, "registers": occ.registers, "warps": counts.warps},
    )
    return raw, counts, occ, dram, c


@dataclass(frozen=True)
class DotPath:
    """How Triton runs one tile-level dot: the instruction path, how many times the warps repeat
    the same product, and the shared-memory bytes its warps read as operands."""

    name: str  # wgmma, mma (mma.sync m16n8k16), fma (an f32 dot: FFMA with operands from LDS)
    replicas: float  # warps beyond the tile's instruction tiles compute copies of the same product
    smem_bytes: float  # operand bytes read from shared memory by all warps, one dot


def dot_path(m: int, n: int, k: int, dtype: str, warps: int, chained: bool, c: Chip) -> DotPath:
    """The instruction path of a dot and its operand traffic (Triton's AccelerateMatmul).

    Hopper's wgmma needs warps in warpgroups of 4, M a multiple of 64 and N of 8; otherwise a
    bf16/f16 dot falls back to mma.sync m16n8k16, and an f32 dot (IEEE) is FFMA on the FMA pipes.
    Warps tile the output: a warp covers 16 rows (a warpgroup 64) by at least 8 columns; Triton
    keeps splitting the tile until every warp has a place (`warpsPerTileV2/V3`), so warps beyond
    the instruction tiles compute duplicate copies (`replicas`); a chained dot (attention) puts
    every warp along M. Each unit (warpgroup for wgmma, warp for mma.sync, thread for FFMA)
    reads its rows of A and its columns of B over all of K from shared memory (ldmatrix,
    wgmma descriptors, LDS): small tiles and many warps read the operands many times over per
    flop, which bounds small-tile dots by shared-memory bandwidth, not the tensor cores."""
    b = DTYPES[dtype].nbytes if dtype in DTYPES else 4
    unit, _ = c.tc_rate(dtype)
    if c.single_thread or c.vendor != "nvidia":
        return DotPath("tensor", 1.0, 0.0)
    if unit == "fma":
        # an FFMA dot: each thread owns a ~square r x c patch of outputs and reads r rows of A
        # and c columns of B from shared memory for every k; the operand tiles are not swizzled,
        # so the lanes of an LDS.128 on different rows collide on the same banks
        threads = 32 * max(1, warps)
        per_thread = m * n / threads
        replicas = max(1.0, 1.0 / per_thread) if per_thread else 1.0
        side = math.sqrt(max(1.0, per_thread))
        reads = threads * 2 * side * k * b * c.fma_dot_lds_conflict
        return DotPath("fma", replicas, reads)
    wgmma = c.has_wgmma and warps % 4 == 0 and m % 64 == 0 and n % 8 == 0
    wm, wn = _warps_per_tile(m, n, warps, wgmma, chained)
    um = min(wm, max(1, -(-m // 16)))
    un = min(wn, max(1, -(-n // 8)))
    replicas = max(1.0, warps / (um * un))
    if wgmma:  # a warpgroup (4 warps along M, 64 rows) reads its A rows and B columns
        groups = max(1, warps // 4)
        rows = m / max(1, min(wm // 4, m // 64))
        cols = n / un
        return DotPath("wgmma", replicas, groups * (rows + cols) * k * b)
    return DotPath("mma", replicas, warps * (m / um + n / un) * k * b)


def _warps_per_tile(m: int, n: int, warps: int, wgmma: bool, chained: bool) -> tuple[int, int]:
    """Warps along M and N of a dot's output (Triton's warpsPerTileV3 / V2)."""
    if wgmma:
        if chained:
            return (warps, 1) if m >= n else (1, warps)
        wm, wn = 4, 1
        while wm * wn < warps:
            if m > 16 * wm:
                wm *= 2
            else:
                wn *= 2
        return wm, wn
    wm, wn = 1, 1
    while wm * wn < warps:
        if m / 16 / wm >= n / 16 / wn and wm < m / 16:
            wm *= 2
        else:
            wn *= 2
    return wm, wn


def _spill_s(spills: float, counts: Counts, occ: Occupancy, c: Chip) -> float:
    """Per wave: a thread's spill stores and reloads (`spills` bytes of spill code), on its
    critical path. In a loop they run every trip and the spilled tiles outgrow L1, so a reload
    waits about a DRAM latency (`spill_bytes_per_latency` bytes per latency, fitted to spilling
    gemm, attention, k-means and rmsnorm-backward loops). Straight-line code stores and reloads
    each value once: see `_straight_spill_s`."""
    if not spills:
        return 0.0
    if counts.loops:
        latency = spills / c.spill_bytes_per_latency * c.dram_latency_s
        return max(latency, _loop_spill_traffic_s(spills, counts, occ, c))
    return _straight_spill_s(spills, counts, occ, c)


def _loop_spill_traffic_s(spills: float, counts: Counts, occ: Occupancy, c: Chip) -> float:
    """Per wave: the local-memory traffic of spill code in a loop. Every trip of the loop runs
    the spill stores and reloads again, so a thread moves `spills` bytes per trip of its longest
    top-level loop; every resident thread does so at once, and the spilled values (half the
    spill bytes a thread, as in `_straight_spill_s`) live in L1 as far as it holds them, then
    L2, then DRAM, each at its bandwidth shared by the wave's threads (other resident warps
    hide a reload's latency; `_spill_s` keeps the latency chain as a floor). A top-K loop of
    2048 trips spilling 29 KB a thread is DRAM-bandwidth bound: a third of a second."""
    trips = max((i.trips for i in counts.loops if _top_level(i.op)), default=1.0)
    threads_sm = occ.blocks_per_sm * max(1, counts.threads)
    active = min(max(1, counts.programs), occ.blocks_per_sm * c.sms)
    sms = min(c.sms, math.ceil(active / max(1, occ.blocks_per_sm)))
    footprint_sm = spills / 2 * threads_sm
    l1 = max(0.0, c.l1_bytes - occ.blocks_per_sm * (occ.smem_bytes + SMEM_RESERVED if occ.smem_bytes else 0))
    in_l1 = min(1.0, l1 / footprint_sm) if footprint_sm else 1.0
    in_l2 = min(1.0, L2_RESIDENT * c.l2_bytes / (footprint_sm * sms)) if footprint_sm else 1.0
    l1_s = threads_sm / c.smem_bps_per_sm
    l2_s = threads_sm * sms / c.l2_bps
    dram_s = threads_sm * sms / c.dram_bps
    per_byte = in_l1 * l1_s + (1 - in_l1) * (in_l2 * l2_s + (1 - in_l2) * dram_s)
    return spills * max(1.0, trips) * per_byte


def _top_level(loop: Operation) -> bool:
    """A loop that no other loop encloses."""
    op = loop.parent_op()
    while op is not None:
        if isinstance(op, st.ForOp):
            return False
        op = op.parent_op()
    return True


def _straight_spill_s(spills: float, counts: Counts, occ: Occupancy, c: Chip) -> float:
    """Per wave: straight-line spill code, served by the memory level that holds the spilled
    values. Each value is stored once and reloaded once, so a thread's local-memory footprint is
    about half its spill bytes; every resident thread's is live together. L1 (what shared memory
    leaves of it) holds min(1, L1 / footprint) of an SM's; L2 holds its share of the rest, and
    DRAM serves what is left. At each level a byte costs the longer of its latency over the bytes a
    thread keeps in flight (`spill_inflight_bytes`: ptxas hoists independent reloads) and the
    level's bandwidth shared by every thread of the wave (layernorm at 16384 wide on one warp:
    16 KB a thread, 8 MB an SM, 4 GB from DRAM, 1.3 ms)."""
    threads_sm = occ.blocks_per_sm * max(1, counts.threads)
    active = min(max(1, counts.programs), occ.blocks_per_sm * c.sms)
    sms = min(c.sms, active)
    footprint_sm = spills / 2 * threads_sm
    l1 = max(0.0, c.l1_bytes - occ.blocks_per_sm * (occ.smem_bytes + SMEM_RESERVED if occ.smem_bytes else 0))
    in_l1 = min(1.0, l1 / footprint_sm) if footprint_sm else 1.0
    in_l2 = min(1.0, L2_RESIDENT * c.l2_bytes / (footprint_sm * sms)) if footprint_sm else 1.0
    inflight = c.spill_inflight_bytes
    # seconds per spill byte of one thread, at each level: latency- or bandwidth-bound
    l1_s = max(c.l1_latency_s / inflight, threads_sm / c.smem_bps_per_sm)
    l2_s = max(c.l2_latency_s / inflight, threads_sm * sms / c.l2_bps)
    dram_s = max(c.dram_latency_s / inflight, threads_sm * sms / c.dram_bps)
    per_byte = in_l1 * l1_s + (1 - in_l1) * (in_l2 * l2_s + (1 - in_l2) * dram_s)
    return spills * per_byte


def _streams(counts: Counts, blocks_per_sm: int, c: Chip) -> int:
    """Independent streams per SM for the memory/compute overlap: the resident warps on each
    scheduler when the warps run free of each other (64 warps an SM are 16 a scheduler, in
    blocks of 2 warps or of 8), else the resident blocks."""
    if _free_warps(counts, c):
        return max(1, blocks_per_sm * max(1, counts.warps) // c.schedulers)
    return blocks_per_sm


def _free_warps(counts: Counts, c: Chip) -> bool:
    """Whether a block's warps run free of each other: no barrier ties them together (an
    elementwise program: they drift apart and hide each other's phases, as blocks do). A
    cross-warp reduction, shared memory or warp roles put every warp of the block in step at
    each barrier."""
    return not (c.single_thread or counts.chain_syncs or counts.smem_bytes or counts.roles)


def _phase_overlap(counts: Counts, per_program: dict[str, float], stages: int, c: Chip) -> float:
    """The share of the memory/compute overlap left when a warp's compute phase outlasts a
    memory latency. A program without a pipelined loop loads, then computes on what it loaded,
    then stores: while a warp computes it has no loads in flight, and the other warps of its
    scheduler hide its compute only for as long as their own loads take (about one memory
    latency). One warp's compute phase is its share of the program's lane work at the rate of
    one scheduler (a quarter of the SM), per load phase (a loop's trip); where that is longer
    than the latency, only latency / phase of it overlaps with memory (a streaming kernel with
    32 i64 or 128 bf16 values per thread). Pipelined loops and warp-specialized programs keep
    loads in flight while they compute: untouched."""
    if c.single_thread or stages >= 2 or counts.roles >= 2 or c.dram_latency_s <= 0:
        return 1.0
    loads = [a.trips for a in counts.accesses if not a.write]
    if not loads:
        return 1.0
    phases = max(1.0, max(loads))
    lane = max(per_program.get(r, 0.0) for r in ("alu", "int", "sfu", "fma"))
    phase_s = lane / phases * c.schedulers / max(1, counts.warps)
    if phase_s <= c.dram_latency_s:
        return 1.0
    return c.dram_latency_s / phase_s


def _bottleneck(totals: dict[str, float]) -> str:
    main = max(RESOURCES, key=lambda r: totals.get(r, 0.0))
    busy = max(totals.get(r, 0.0) for r in RESOURCES)
    if totals.get("launch", 0.0) > busy:
        return "launch"
    if main == "dram" and totals.get("dram_latency_bound"):
        return "dram-latency"
    return main


def _breakdown(
    counts: Counts, dram: list, totals: dict[str, float], c: Chip, env, grid_span: Span | None = None
) -> list[Term]:
    p = counts.programs
    terms: list[Term] = []
    all_dram = sum(d for _, d, _ in dram) or 1.0
    for a, d, ideal in dram:
        share = d / all_dram
        note = ""
        if not a.write and ideal and d > 1.5 * ideal:
            note = f"{d / ideal:.1f}x the ideal {ideal / 1e6:.3g} MB: tile reuse between programs is low"
        elif a.scattered:
            note = "scattered: one 32-byte sector per lane"
        elif a.data_dependent:
            note = "data-dependent index: no reuse between programs assumed"
        what = "store to" if a.write else "load of"
        terms.append(Term(f"{a.kind}: {what} `{a.tensor}`", totals["dram"] * share, d, "bytes", a.span, note, "dram"))
    terms += _lsu_terms(counts, totals, c)

    def resource(w) -> str:
        """The resource a unit of work runs on (a dot runs on the FMA pipes where the dtype has no
        tensor-core rate)."""
        if w.unit != "tensor":
            return w.unit
        return "tensor" if c.tc_rate(w.dtype)[0] == "tensor" else "fma"

    timed = [(w, resource(w)) for w in counts.work if w.unit != "shfl"]
    unit_totals: dict[str, float] = {}
    for w, key in timed:
        unit_totals[key] = unit_totals.get(key, 0.0) + w.amount
    for w, key in timed:
        share = w.amount / unit_totals[key] if unit_totals[key] else 0.0
        unit = "flops" if w.unit == "tensor" else "ops"
        seconds = totals.get(key, 0.0) * share
        if seconds < 1e-3 * max(totals.get(r, 0.0) for r in RESOURCES):
            continue
        terms.append(Term(f"{UNIT_NAMES[key]}: {w.what} ({w.dtype})", seconds, w.amount * p, unit, w.span, "", key))
    if counts.smem_bytes:
        terms.append(
            Term("shared memory traffic", totals.get("l1", 0.0), counts.smem_bytes * p, "bytes", None, "", "l1")
        )
    if totals.get("tail"):
        terms.append(Term("tail wave", totals["tail"], 0, "s", None, "the last, partial wave", "waves"))
    if totals.get("drain"):
        note = "the last programs of the grid end staggered over about a wave"
        terms.append(Term("drain", totals["drain"], 0, "s", grid_span, note, "waves"))
    terms.append(Term("launch", totals["launch"], 0, "s", None, "", "launch"))
    terms.sort(key=lambda t: -t.seconds)
    return terms


def _lsu_terms(counts: Counts, totals: dict[str, float], c: Chip) -> list[Term]:
    """The LSU/MIO time of each load or store (by its instructions) and each reduction (by its shuffles)."""
    p = counts.programs
    parts = [
        (a.instructions / c.lsu_per_sm, a.instructions, a.span, f"{a.kind} of `{a.tensor}`", a.vector, a.vector_why)
        for a in counts.accesses
        if a.instructions
    ]
    parts += [(w.amount / c.shfl_per_sm, w.amount, w.span, w.what, 0, "") for w in counts.work if w.unit == "shfl"]
    whole = sum(s for s, *_ in parts) or 1.0
    lsu = totals.get("lsu", 0.0)
    terms = []
    for s, n, span, what, vec, why in parts:
        if s / whole * lsu < 1e-3 * max(totals.get(r, 0.0) for r in RESOURCES):
            continue
        if vec:
            name = f"LSU: {what}, {vec} element(s) per instruction"
        else:
            name = f"LSU: shuffles of {what}"
        terms.append(Term(name, lsu * s / whole, n * p, "warp instructions", span, why, "lsu"))
    return terms


def off_target(program: Program, target: str, params: dict[str, int] | None, checks: Checks | None) -> list[Diagnostic]:
    """One `cost.target` warning when the program is written for another target and the
    target rules (`checks.target_errors`) find what this one lacks (mbarriers, TMA, wgmma, warp
    roles, ...): the estimate leaves their work out or counts it as its nearest equivalent."""
    own = program.kernel.target.data
    if checks is None or spec(target).name == spec(own).name:
        return []
    found = [d for d in checks.target_errors(program, target, params) if d.is_error and d.span is not None]
    if not found:
        return []
    first, rest = found[0], found[1:]
    more = f" (and {len(rest)} more findings of `kir check --target {target}`)" if rest else ""
    return [
        Diagnostic(
            "cost.target",
            "warning",
            first.span,
            f"the program is written for {own}; on {target}, {first.message}{more}. The estimate leaves "
            "out what has no counterpart here, or counts it as its nearest equivalent",
            first.hint,
            tuple(Related(d.span, d.message) for d in rest[:4] if d.span is not None),
        )
    ]


class CostModel:
    """An analytic cost model with per-target correction factors (1.0 until `update`)."""

    def __init__(
        self,
        corrections: dict[str, dict[str, float]] | None = None,
        learned: dict[str, calibration.Correction] | None = None,
    ):
        self.corrections: dict[str, dict[str, float]] = corrections or {}
        # chip name -> a learned correction of the predictions made without a compile report
        self.learned_corrections: dict[str, calibration.Correction] = learned or {}

    @classmethod
    def learned(cls) -> CostModel:
        """The model with the learned calibrations (`calibration.library_dir()`) applied."""
        model = cls()
        for found in calibration.learned().values():
            model.corrections.update(found.factors)
            model.learned_corrections.update(found.corrections)
        return model

    def factors(self, target: str) -> dict[str, float]:
        return self.corrections.get(chip(target).name, {})

    def predict(
        self,
        program: Program,
        target: str | None = None,
        params: dict[str, int] | None = None,
        shapes: dict[str, int] | None = None,
        report=None,
        with_hints: bool = True,
        checks: Checks | None = None,
    ) -> Estimate:
        """The estimate of `program` on `target` (default: its own) with parameters and shape
        symbols bound. `report` (a lowering CompileReport) replaces the register and shared
        memory estimates with the compiler's figures. `checks` (`checks.py`: the verifier's
        answers, `verifier.facts.CHECKS`) gives the `cost.target` warning on another target and
        the `types.where` refusal of parameters that leave no shapes."""
        target = target or program.kernel.target.data
        if program.is_multi:
            return self._predict_kernels(program, target, params, shapes, with_hints, checks)
        if chip(target).name == "mtia_sim":  # a PE's engines, port and one thread of control
            est = mtia.estimate(program, target, params, shapes, self.factors(target), checks)
            est.hints = off_target(program, target, params, checks) + est.hints
            return est
        regs = getattr(report, "registers", None) if report is not None else None
        smem = getattr(report, "shared_bytes", None) if report is not None else None
        spills = getattr(report, "spills", None) if report is not None else None
        raw, counts, occ, dram, c = analyze(program, target, params, shapes, regs, smem, spills, checks)
        base_s, _ = raw.time()
        seconds, totals = raw.time(self.factors(target))
        learned = self.learned_corrections.get(c.name)
        if learned is not None and regs is None:  # fitted to, and applied to, predictions before compile
            seconds *= learned.factor(raw)
        bottleneck = _bottleneck(totals)
        env = bind_env(program, params, shapes)
        p = counts.programs
        tensor_flops = sum(w.amount for w in counts.work if w.unit == "tensor") * p
        summary = {
            "programs": p,
            "dram_bytes": sum(d for _, d, _ in dram),
            "ideal_dram_bytes": sum(i for _, _, i in dram),
            "l2_bytes": counts.global_bytes() * p,
            "global_read_bytes": counts.global_bytes(False) * p,
            "global_write_bytes": counts.global_bytes(True) * p,
            "smem_bytes": counts.smem_bytes * p,
            "matmul_flops": tensor_flops,
            "alu_ops": counts.unit_total("alu") * p,
            "int_ops": counts.unit_total("int") * p,
            "sfu_ops": counts.unit_total("sfu") * p,
            "registers": occ.registers,
            "smem_alloc_bytes": occ.smem_bytes,
            "stages": raw.extra["stages"],
            "overlap": raw.overlap,
        }
        est = Estimate(
            time_s=seconds,
            bottleneck=bottleneck,
            breakdown=_breakdown(counts, dram, totals, c, env, program.clause_spans.get("grid") or program.span()),
            counts=summary,
            occupancy=occ,
            waves=raw.waves,
            resources={r: totals[r] for r in RESOURCES},
            uncalibrated_s=base_s,
            target=target,
            raw=raw,
        )
        if with_hints:
            est.hints = off_target(program, target, params, checks) + hints.hints(program, est, counts, dram, c)
        return est

    def _predict_kernels(
        self,
        program: Program,
        target: str,
        params: dict[str, int] | None,
        shapes: dict[str, int] | None,
        with_hints: bool,
        checks: Checks | None,
    ) -> Estimate:
        """A program of several kernels (`kir.multi`) launches them one after another: its time
        is the sum of theirs (each with its own launch), its breakdown theirs in order (each
        line's note names its kernel), its counts their sums, its bottleneck and occupancy those
        of the slowest kernel. A compile report is of one kernel, so none is taken here."""
        parts = []
        for k in program.kernels():
            own = {n: v for n, v in (params or {}).items() if n in k.params}
            parts.append((k, self.predict(k, target, own, shapes, with_hints=with_hints, checks=checks)))
        slowest = max(parts, key=lambda p: p[1].time_s)[1]
        counts: dict[str, float] = {}
        resources: dict[str, float] = {}
        for _, est in parts:
            for key, value in est.counts.items():
                if isinstance(value, int | float) and key not in ("registers", "smem_alloc_bytes"):
                    counts[key] = counts.get(key, 0) + value
            for key, value in est.resources.items():
                resources[key] = resources.get(key, 0.0) + value
        counts["registers"] = slowest.counts.get("registers", 0)
        counts["smem_alloc_bytes"] = slowest.counts.get("smem_alloc_bytes", 0)
        counts["kernels"] = len(parts)
        breakdown = [
            replace(t, note=f"kernel {k.name}" + (f"; {t.note}" if t.note else ""))
            for k, est in parts
            for t in est.breakdown
        ]
        return Estimate(
            time_s=sum(est.time_s for _, est in parts),
            bottleneck=slowest.bottleneck,
            breakdown=breakdown,
            counts=counts,
            occupancy=slowest.occupancy,
            waves=sum(est.waves for _, est in parts),
            hints=[h for _, est in parts for h in est.hints],
            resources=resources,
            uncalibrated_s=sum(est.uncalibrated_s for _, est in parts),
            target=target,
            raw=slowest.raw,
        )

    # ---- calibration -------------------------------------------------------------------------

    def update(self, measurements: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
        """Fit per-target correction factors from measured runs. A measurement is
        {"target", "text" (KIR source) or "file", "params", "shapes", "seconds"} and optionally
        "registers", "smem_bytes" and "spills" (bytes per thread) from the compile report. Returns the new factors."""
        by_target: dict[str, list[tuple[Raw, float]]] = {}
        for m in measurements:
            raw = measurement_raw(m)
            by_target.setdefault(chip(m["target"]).name, []).append((raw, float(m["seconds"])))
        for name, pairs in by_target.items():
            self.corrections[name] = calibration.fit(pairs, self.corrections.get(name))
        return self.corrections

    def save(self, path: str | Path) -> None:
        data: dict[str, Any] = {"version": 1, "corrections": self.corrections}
        if self.learned_corrections:
            data["correction"] = {k: c.to_json() for k, c in self.learned_corrections.items()}
        Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        """A saved calibration: `save`'s file, or a learned one (`kir learn --calibrate`)."""
        data = json.loads(Path(path).read_text())
        return cls(
            {k: {f: float(v) for f, v in d.items()} for k, d in data.get("corrections", {}).items()},
            {k: calibration.Correction.from_json(c) for k, c in (data.get("correction") or {}).items()},
        )


_RAW_CACHE: dict[tuple, Raw] = {}


def measurement_raw(m: dict[str, Any]) -> Raw:
    """The uncalibrated timing inputs of one measurement (cached by its content)."""
    from kir.parser import parse, parse_file

    key = (
        m.get("text") or m.get("file"),
        m["target"],
        json.dumps(m.get("params") or {}, sort_keys=True),
        json.dumps(m.get("shapes") or {}, sort_keys=True),
        m.get("registers"),
        m.get("smem_bytes"),
        m.get("spills"),
    )
    if key not in _RAW_CACHE:
        program = parse(m["text"]) if m.get("text") else parse_file(m["file"])
        raw, *_ = analyze(
            program,
            m["target"],
            m.get("params"),
            m.get("shapes"),
            m.get("registers"),
            m.get("smem_bytes"),
            m.get("spills"),
        )
        _RAW_CACHE[key] = raw
    return _RAW_CACHE[key]


def predict(
    program: Program, target: str | None = None, params=None, shapes=None, report=None, checks: Checks | None = None
) -> Estimate:
    """The uncalibrated estimate (a fresh `CostModel().predict`)."""
    return CostModel().predict(program, target, params, shapes, report, checks=checks)


def span_text(span: Span | None) -> str:
    return "" if span is None else f"{Path(span.file).name}:{span.line}"
