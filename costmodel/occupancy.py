"""Occupancy: how many programs (blocks) one SM holds at once, and what limits it.

The limits are the chip's: blocks per SM, warps per SM, the register file (registers per thread,
rounded up to the allocation granularity, times the block's threads) and shared memory (the
block's allocation plus 1 KB the runtime reserves per block on NVIDIA). A program with roles
that set `regs(N)` asks for the sum of its roles' budgets. Registers come from the count (the
live tiles) unless a compile report gives the real figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.counting import Counts
from costmodel.spec import Chip

SMEM_RESERVED = 1024  # bytes per block the CUDA runtime keeps (sm_80 and later)


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    limiter: str  # warps, registers, shared memory, blocks, none
    registers: int  # per thread, as allocated
    smem_bytes: int  # per block
    warps: int  # per block
    spills: bool  # the estimate exceeds the per-thread maximum

    def to_json(self) -> dict:
        return dict(self.__dict__)


def occupancy(counts: Counts, chip: Chip, registers: int | None = None, smem_bytes: int | None = None) -> Occupancy:
    if chip.single_thread:
        smem = smem_bytes if smem_bytes is not None else counts.smem_alloc
        return Occupancy(1, "one program per processing element", 0, smem, 1, False)
    warps = counts.warps
    threads = counts.threads
    regs = registers if registers is not None else counts.registers
    spills = regs > chip.max_registers_per_thread
    regs = min(regs, chip.max_registers_per_thread)
    gran = chip.register_granularity
    regs = -(-regs // gran) * gran
    block_regs = regs * threads
    if counts.role_regs and registers is None:
        block_regs = sum(t * r for _, t, r, _ in counts.role_regs)
        block_regs += max(0, threads - sum(t for _, t, _, _ in counts.role_regs)) * regs
        regs = -(-block_regs // max(1, threads))  # the roles' budgets, averaged over the block's threads
    smem = smem_bytes if smem_bytes is not None else counts.smem_alloc
    limits = {
        "blocks": chip.max_blocks_per_sm,
        "warps": chip.max_warps_per_sm // max(1, warps),
        "registers": chip.registers_per_sm // max(1, block_regs),
        "shared memory": chip.smem_per_sm // (smem + SMEM_RESERVED) if smem else chip.max_blocks_per_sm,
    }
    limiter = min(limits, key=lambda k: (limits[k], k != "registers"))
    blocks = max(1, limits[limiter])  # a block that does not fit at all is the verifier's error
    return Occupancy(blocks, limiter, regs, smem, warps, spills)
