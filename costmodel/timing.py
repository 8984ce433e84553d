"""Timing: from per-program work and occupancy to seconds, wave by wave.

Resources, and where their rate comes from (`costmodel/spec.py`):

| resource | work | rate |
| --- | --- | --- |
| `dram` | bytes from HBM (after L2 reuse) | `hbm_gbps`, lowered by Little's law when too few bytes are in flight |
| `l2` | bytes requested from L2 (every global access) | `l2_gbps` |
| `tensor` | matrix-product flops by operand dtype | `[cost.tc_tflops]` (an f32 dot: the FMA rate on NVIDIA) |
| `alu`, `int`, `sfu` | float lane operations, integer operations (weighted), special functions | per SM per clock |
| `l1` | shared-memory bytes, scattered sectors, sectors of scalar strided loads | `smem_bytes_per_clk` per SM |
| `lsu` | warp-wide load/store instructions (16-byte vectors, or one per element where Triton cannot vectorize), warp shuffles of reductions | `lsu_insts_per_clk`, `shfl_insts_per_clk` per SM |

A wave is the programs resident at once (blocks per SM x SMs). The per-SM resources of a wave
take the work of the busiest SM's programs at that SM's rate; DRAM and L2 are shared by the chip.
Within a wave, memory and compute overlap by a factor that grows with the independent streams
per SM and the pipeline stages (`overlap = 1 - 1 / (streams x stages)`, `costmodel/model.py`):
the streams are the blocks per SM, times the warps per scheduler when no barrier ties a block's
warps together (an elementwise program). A program without a pipelined loop loads, computes,
then stores; where one warp's compute phase outlasts a memory latency, only latency / phase of
the overlap is left (the other warps' loads hide that much of it). A block's launch, prologue and
epilogue overlap the other resident blocks, so a wave exposes 1 / (blocks per SM) of it:

    wave = max(memory, compute) + (1 - overlap) * min(memory, compute) + block overhead / blocks per SM
    time = full waves x wave(C) + wave(tail programs) + drain + launch

The block scheduler refills a slot as soon as its program ends, so after the first wave the
resident programs are at staggered points of their lives, and a grid of several waves ends
staggered too: its last programs finish spread over about one wave, with fewer and fewer left to
keep the chip busy. That `drain` costs `drain_share` of a full wave (growing from none at one
wave to all of it at two, as the refills stagger the programs): a share of a program's lifetime,
not of its count, so the same bytes moved by fat programs (long waves) end later than by thin
ones (silu_mul: 97 us at 3 us a wave, 99 us at 11 us).

A program's chain of dependent reductions (`chain`: shuffle steps and cross-warp exchanges, each
waiting on the one before, `costmodel/counting.py`) is a latency floor: a wave lasts at least one
program's chain, however little throughput it uses. Programs resident together run their chains
side by side, so the floor does not grow with the programs per SM; a top-K round loop at one or two
programs per SM is bound by it (the knn seed programs: ~1 us per round of four reductions).

Lane work (`alu`, `int`, `sfu`) issues at full rate only with `latency_warps` warps resident per
SM (`costmodel/spec.py`: 4 schedulers x ~4 clocks of dependent-issue latency); with fewer, each
scheduler idles between its warps' dependent instructions, so that work takes latency_warps /
resident warps longer (`costmodel/model.py`). This is what slows a streaming kernel of few, fat
programs (a 4-warp block of 32 i64 per thread at 3 blocks per SM) when its lane work no longer
hides under the memory time.

Register spills (`spill`: the compile report's bytes of spill stores and loads per thread) are
a memory resource of their own (`costmodel/model.py`, `_spill_s`). In a loop a spilled value is
reloaded every trip on its thread's critical path: a DRAM latency per `spill_bytes_per_latency`
bytes. Straight-line code stores and reloads each value once; the spilled values of every
resident thread are live together, so L1 serves the share of them it can hold, L2 its share of
the rest and DRAM the remainder, each at the longer of its latency over the bytes a thread keeps
in flight and its bandwidth shared by the wave's threads (a 16 KB-a-thread spill of 32 resident
blocks is DRAM traffic; 432 bytes a thread on 4 blocks stays in L1).

A program's second read of what it read before (rmsnorm's two passes over a row) comes from L2
for the share of re-reads whose line L2 still holds: all while the resident programs' tiles fit
in `l2_reuse_bytes` / 2, none once they fill L2, linear between (`_reread_hit`).

The block scheduler starts a block on an SM at a bounded rate (`block_launch_ns`): a wave of
many short blocks (an elementwise kernel of 2 values a thread, 1000 blocks an SM) takes at
least its blocks per SM times that, however little memory time they need.

`Raw` holds every figure this needs, so calibration can re-time a program cheaply with other
correction factors (`Raw.time(factors)`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MEMORY = ("dram", "l2", "spill")
COMPUTE = ("tensor", "fma", "alu", "int", "sfu", "l1", "lsu")
RESOURCES = MEMORY + COMPUTE
FACTORS = (*RESOURCES, "overhead")


@dataclass(frozen=True)
class Raw:
    programs: int
    sms: int
    blocks_per_sm: int
    per_program_s: dict[str, float]  # per-SM resources: seconds of one program on one SM
    dram_bytes: float  # per program (average), after L2 reuse
    l2_bytes: float  # per program
    dram_bps: float
    l2_bps: float
    inflight_bytes: float  # global-load bytes one program keeps in flight
    latency_s: float
    overlap: float
    cta_overhead_s: float
    launch_s: float
    spill_s: float = 0.0  # per wave: each thread's spill stores and reloads, on its critical path
    chain_s: float = 0.0  # one program's chain of dependent reductions: a wave takes at least this
    block_launch_s: float = 0.0  # an SM takes in one block per this long: a wave takes at least its blocks' worth
    drain_share: float = 0.0  # of a full wave's time, lost at the end of a grid of several waves (`drain`)
    extra: dict = field(default_factory=dict)

    @property
    def concurrent(self) -> int:
        return self.blocks_per_sm * self.sms

    @property
    def waves(self) -> float:
        return self.programs / self.concurrent if self.concurrent else 0.0

    def wave(self, p: int, factors: dict[str, float]) -> dict[str, float]:
        """Each resource's seconds for a wave of p programs, and the wave's time."""
        f = factors
        per_sm = math.ceil(p / self.sms)
        active = min(p, self.sms)
        out = {r: per_sm * self.per_program_s.get(r, 0.0) * f.get(r, 1.0) for r in COMPUTE}
        inflight = active * self.inflight(p)[0]
        dram_bw = self.dram_bps
        if self.latency_s > 0 and inflight > 0:
            dram_bw = min(dram_bw, inflight / self.latency_s)
        out["dram"] = p * self.dram_bytes / dram_bw * f.get("dram", 1.0)
        out["l2"] = p * self.l2_bytes / (self.l2_bps * active / self.sms) * f.get("l2", 1.0)
        out["spill"] = self.spill_s * f.get("spill", 1.0) if p else 0.0
        out["dram_latency_bound"] = float(dram_bw < 0.9 * self.dram_bps)
        memory = max(out[r] for r in MEMORY)
        compute = max(out[r] for r in COMPUTE)
        out["wave"] = max(memory, compute) + (1 - self.overlap) * min(memory, compute)
        out["chain"] = self.chain_s if p else 0.0
        out["wave"] = max(out["wave"], out["chain"])
        # the block scheduler starts one block on an SM per `block_launch_s`: a floor that binds
        # only when blocks are many and short
        out["wave"] = max(out["wave"], per_sm * self.block_launch_s * f.get("overhead", 1.0))
        # a block's launch, prologue and epilogue overlap the other resident blocks' work
        out["wave"] += self.cta_overhead_s * f.get("overhead", 1.0) / max(1, self.blocks_per_sm)
        return out

    def inflight(self, p: int) -> tuple[float, int]:
        """(global-load bytes in flight on each busy SM, the busy SMs) in a wave of `p` programs."""
        return math.ceil(p / self.sms) * self.inflight_bytes, min(p, self.sms)

    def waves_of(self) -> list[tuple[int, int]]:
        """(programs, waves of that many): the full waves, then the partial tail."""
        c = max(1, self.concurrent)
        full, tail = divmod(self.programs, c)
        return [(p, n) for p, n in ((c, full), (tail, 1)) if n and p]

    def latency_wave(self) -> int:
        """The programs of the wave too few bytes in flight hold below DRAM bandwidth, when such
        waves take most of the DRAM time (the one that takes most of it); 0 when most of it runs
        at bandwidth."""
        return _latency_wave([(p, n, self.wave(p, {})) for p, n in self.waves_of()])

    def time(self, factors: dict[str, float] | None = None) -> tuple[float, dict[str, float]]:
        """(seconds, seconds per resource summed over the waves, plus `tail`, `drain`, `launch`, `overlap_saved`)."""
        factors = factors or {}
        c = max(1, self.concurrent)
        tail = self.programs % c
        totals = {r: 0.0 for r in RESOURCES}
        seconds = 0.0
        tail_s = full_s = 0.0
        waves = [(p, n, self.wave(p, factors)) for p, n in self.waves_of()]
        for p, n, w in waves:
            for r in RESOURCES:
                totals[r] += n * w[r]
            seconds += n * w["wave"]
            if p == tail:
                tail_s = w["wave"]
            else:
                full_s = w["wave"]
        latency_bound = float(_latency_wave(waves) > 0)
        drain = self.drain(full_s)
        launch = self.launch_s * factors.get("overhead", 1.0)
        seconds += drain + launch
        seconds *= factors.get("scale", 1.0)
        totals.update(tail=tail_s, drain=drain, launch=launch, dram_latency_bound=latency_bound)
        return seconds, totals

    def drain(self, wave_s: float) -> float:
        """The end of a grid of several waves (module docstring): `drain_share` of a full wave,
        from none at one wave to all of it at two, as the refills stagger the programs. A grid
        of one wave starts and ends together; its wave's own time covers it."""
        if not self.drain_share or self.programs <= self.concurrent:
            return 0.0
        return self.drain_share * wave_s * min(1.0, self.waves - 1)


def _latency_wave(waves: list[tuple[int, int, dict[str, float]]]) -> int:
    """`Raw.latency_wave` of (programs, waves of that many, the wave's figures). A grid of 31
    full waves at bandwidth and a tail of 64 programs, one an SM, is bandwidth-bound: the tail's
    few bytes in flight cost it a microsecond of 135. The DRAM factor scales every wave alike, so
    the answer does not depend on the calibration."""
    dram = sum(n * w["dram"] for _, n, w in waves)
    bound = [(n * w["dram"], p) for p, n, w in waves if w["dram_latency_bound"]]
    if not bound or sum(d for d, _ in bound) <= 0.5 * dram:
        return 0
    return max(bound)[1]


def overlap(blocks_per_sm: int, stages: int, roles: int) -> float:
    """The share of the shorter of memory and compute hidden behind the longer."""
    concurrency = max(1, blocks_per_sm) * max(1, stages) * (2 if roles >= 2 else 1)
    return 1.0 - 1.0 / concurrency
