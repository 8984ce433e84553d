"""Performance hints: what the estimate suggests changing, as diagnostics at the ops that cause it.

| rule | when |
| --- | --- |
| `cost.reuse` | a read moves well over the ideal bytes from DRAM (tiles re-read by programs that do not share them in L2) |
| `cost.occupancy` | one or two blocks per SM, limited by registers or shared memory (at the role or launch) |
| `cost.spills` | the live tiles need more registers than a thread can have |
| `cost.tail` | the last, partial wave costs a noticeable share of the time |
| `cost.stages` | a memory-bound loop with loads and fewer than 3 pipeline stages |
| `cost.synchronous` | a pipelined loop whose matrix-product operand is loaded fewer than 4 bytes a lane at a time: its stages overlap nothing |
| `cost.latency` | DRAM bandwidth limited by too few bytes in flight per SM |
| `cost.scattered` | a gather with data-dependent innermost index dominates the traffic |
| `cost.vector` | a load or store Triton cannot vectorize (unaligned start, strided innermost dimension) with a noticeable share of the LSU time |
"""

from __future__ import annotations

from costmodel.counting import synchronous_on
from kir.diagnostics import Diagnostic, Span
from kir.program import Program

MB = 1e6


def _diag(rule: str, span: Span | None, message: str, hint: str = "", severity: str = "hint", **extra) -> Diagnostic:
    return Diagnostic(rule, severity, span, message, hint, (), extra or None)


def hints(program: Program, est, counts, dram, chip) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    launch_span = program.clause_spans.get("launch") or program.span()
    grid_span = program.clause_spans.get("grid") or program.span()
    total = est.time_s or 1.0
    memory_bound = est.bottleneck in ("dram", "dram-latency", "l2")
    dram_total = sum(d for _, d, _ in dram) or 1.0

    for a, d, ideal in dram:
        if a.write or not ideal or d < 2 * ideal or d < 0.2 * dram_total:
            continue
        where = "the loop's " if a.in_loop is not None else ""
        out.append(
            _diag(
                "cost.reuse",
                a.span,
                f"{where}loads of `{a.tensor}` move {d / ideal:.1f}x the bytes of the ideal "
                f"({d / MB:.0f} MB from DRAM for {ideal / MB:.0f} MB): tile reuse is low",
                "larger tiles along the other dimension, or a program order (grid swizzle) that keeps the "
                "programs sharing a tile in the same wave",
                dram_bytes=d,
                ideal_bytes=ideal,
            )
        )
        if a.scattered and d > 0.5 * dram_total:
            out.append(
                _diag(
                    "cost.scattered",
                    a.span,
                    f"the gather of `{a.tensor}` has a data-dependent innermost index: each lane is its own "
                    f"32-byte sector ({d / MB:.0f} MB)",
                    "make neighbouring lanes read neighbouring elements (index tile on an outer dimension)",
                )
            )

    insts = sum(a.instructions for a in counts.accesses) or 1.0
    for a in counts.accesses:
        if a.vector >= a.vector_max or a.scattered or a.instructions < 0.1 * insts:
            continue
        share = est.resources.get("lsu", 0.0) * a.instructions / insts / total
        out.append(
            _diag(
                "cost.vector",
                a.span,
                f"{'stores to' if a.write else 'loads of'} `{a.tensor}` move {a.vector} element(s) per instruction, "
                f"not {a.vector_max} (16 bytes): {a.vector_why} ({a.instructions * counts.programs:.3g} warp "
                f"instructions, about {100 * share:.0f}% of the time on the LSU)",
                "start the innermost index at a multiple of the vector (`program_id(0) * BN`), make the innermost "
                "dimension contiguous, or declare the tensor `align(16)`",
                vector=a.vector,
            )
        )

    occ = est.occupancy
    if occ.spills:
        out.append(
            _diag(
                "cost.spills",
                launch_span,
                f"the live tiles need about {counts.registers} registers per thread, over the "
                f"{chip.max_registers_per_thread} a thread can have: the compiler spills",
                "smaller tiles, or more warps to spread them",
                severity="warning",
            )
        )
    if not chip.single_thread and occ.blocks_per_sm <= 2 and occ.limiter in ("registers", "shared memory"):
        warps_per_sm = occ.blocks_per_sm * occ.warps
        span = launch_span
        what = (
            f"{occ.registers} registers per thread"
            if occ.limiter == "registers"
            else f"{occ.smem_bytes} bytes of shared memory"
        )
        if occ.limiter == "registers" and counts.role_regs:
            name, _, regs, span = max(counts.role_regs, key=lambda r: r[1] * r[2])
            what = f"regs({regs}) in role `{name}`"
        if warps_per_sm < 16 or memory_bound:
            out.append(
                _diag(
                    "cost.occupancy",
                    span,
                    f"low occupancy: {occ.blocks_per_sm} block(s) of {occ.warps} warps per SM "
                    f"({warps_per_sm} of {chip.max_warps_per_sm} warps), limited by {what}",
                    "fewer live tiles (smaller tiles) or fewer stages leave room for another block"
                    if memory_bound
                    else "fine for a compute-bound kernel with enough work per block; otherwise shrink the tiles",
                    blocks_per_sm=occ.blocks_per_sm,
                    limiter=occ.limiter,
                )
            )

    tail = est.resources and est.breakdown and next((t.seconds for t in est.breakdown if t.name == "tail wave"), 0.0)
    if tail and est.waves > 1 and tail / total > 0.05:
        c = est.raw.concurrent
        left = counts.programs % c
        out.append(
            _diag(
                "cost.tail",
                grid_span,
                f"a tail wave of {left} programs ({100 * left / c:.0f}% of a full wave of {c}) costs "
                f"{100 * tail / total:.0f}% of the time ({est.waves:.2f} waves)",
                "a tile size that makes the program count a multiple of the wave, or a persistent grid",
                waves=est.waves,
            )
        )

    for info in counts.loops:
        if not synchronous_on(info, chip.vendor):
            continue
        a = info.synchronous
        out.append(
            _diag(
                "cost.synchronous",
                a.span,
                f"`pipeline(stages = {info.stages})` overlaps nothing here: this load of `{a.tensor}` feeds the "
                f"matrix product {a.vector} element(s) a lane at a time, under the 4 bytes cp.async copies, so "
                "it is loaded synchronously and every trip waits for the product",
                "load rows that start 4-byte aligned (whole vectors), or gather in a producer role that "
                "fills a shared ring while the product runs (benchmarks/tasks/conv1d/ws.kir)",
            )
        )

    if memory_bound:
        for info in counts.loops:
            if synchronous_on(info, chip.vendor):
                continue  # more stages would not overlap it either: cost.synchronous
            if info.load_bytes_per_trip and info.stages < 3 and info.trips >= 4 and counts.roles < 2:
                out.append(
                    _diag(
                        "cost.stages",
                        info.span,
                        f"memory-bound loop ({info.trips:.0f} trips, {info.load_bytes_per_trip / 1024:.0f} KB of loads "
                        f"per trip) with {info.stages} stage(s)",
                        "pipeline(stages = 3) or more keeps the next trips' loads in flight",
                    )
                )
    if est.bottleneck == "dram-latency":
        out.append(_latency(est.raw, launch_span))
    return out


def _latency(raw, span: Span | None) -> Diagnostic:
    """`cost.latency`, in the figures of the wave the timing found short of bytes in flight:
    the SMs that wave keeps busy share the chip's bandwidth-latency product, so a grid of fewer
    programs than SMs needs more in flight on each of them, and more blocks per SM do not help it."""
    programs = raw.latency_wave()
    inflight, busy = raw.inflight(programs)
    need = raw.dram_bps * raw.latency_s / busy
    plural = "s" if programs != 1 else ""
    where = "per SM" if busy == raw.sms else f"on each busy SM ({programs} program{plural} on {busy} of {raw.sms} SMs)"
    return _diag(
        "cost.latency",
        span,
        f"too few bytes in flight to reach DRAM bandwidth: about {_bytes(inflight)} {where}, {_bytes(need)} needed",
        "more blocks per SM (fewer registers per thread), more stages, or more loads per program"
        if busy == raw.sms
        else "more programs (smaller tiles, or a split of each program's work), more stages, or more loads per program",
        inflight_bytes=inflight,
        needed_bytes=need,
    )


def _bytes(n: float) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    return f"{n / 1024:.0f} KB" if n >= 1024 else f"{n:.0f} B"
