"""Target specifications: one table per chip, read by the verifier's resource and legality
rules and by the cost model. The tables are data (`*.toml` beside this file); this module only
loads them.

A spec names the architecture facts the rules need (warp size, shared memory per block,
registers, the features the chip has: TMA, wgmma, fp8, ...) and the rates and bandwidths the
cost model needs. Figures are per SM (or per processing element) unless a key says otherwise.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

_DIR = Path(__file__).parent

# KIR target names -> the table that describes them (a KIR target is an ISA level; the table
# is the chip we measure on for it).
TARGET_TABLES = {
    "sm_90": "h200",
    "sm_80": "a100",
    "gfx90a": "mi250x",
    "gfx942": "mi300x",
    "mtia-sim": "mtia_sim",
    "interp": "interp",
}


@dataclass(frozen=True)
class TargetSpec:
    name: str  # table name, e.g. "h200"
    target: str  # KIR target, e.g. "sm_90"
    vendor: str
    warp_size: int
    max_threads_per_block: int
    max_smem_per_block: int  # bytes, the opt-in maximum a kernel can request
    smem_per_sm: int
    registers_per_sm: int  # 32-bit registers
    max_registers_per_thread: int
    register_alloc_granularity: int  # setmaxnreg / allocation step, registers per thread
    min_registers_per_thread: int
    sms: int
    features: frozenset[str]
    dtypes: frozenset[str]
    mma_shapes: tuple[tuple[int, int, int], ...]  # (M, N, K) of the matrix instruction, per dtype class
    tma_box_max: int  # elements per box dimension
    tma_align: int  # bytes: global address and strides
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    max_warps_per_block: int = 32  # KIR warps of 32 threads (a warpgroup is 4)
    setmaxnreg_max: int = 0  # largest `regs(N)` budget; 0 where there is no setmaxnreg
    mma_dtypes: frozenset[str] = frozenset()  # operand dtypes the matrix unit takes
    mma_layout_versions: tuple[int, ...] = ()  # versions of `mma(...)` register layouts
    mbarrier_max_count: int = 0  # largest arrival count of one mbarrier
    tma_inner_bytes: int = 16  # the innermost box dimension is a multiple of this many bytes
    wgmma: dict[str, Any] | None = field(default=None, compare=False)  # instruction shape table
    pow2_tiles: bool = False  # every compiler for the target needs power-of-two tile dimensions
    convert_dtypes: frozenset[str] = frozenset()  # held in memory and converted, never multiplied by a dot

    def has(self, feature: str) -> bool:
        return feature in self.features

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]


@cache
def spec(target: str) -> TargetSpec:
    """The spec of a KIR target (`sm_90`) or of a table by name (`h200`)."""
    table = TARGET_TABLES.get(target, target)
    path = _DIR / f"{table}.toml"
    if not path.exists():
        raise KeyError(f"no target table for '{target}'")
    raw = tomllib.loads(path.read_text())
    arch = raw["arch"]
    return TargetSpec(
        name=table,
        target=raw["target"],
        vendor=raw["vendor"],
        warp_size=arch["warp_size"],
        max_threads_per_block=arch["max_threads_per_block"],
        max_smem_per_block=arch["max_smem_per_block"],
        smem_per_sm=arch["smem_per_sm"],
        registers_per_sm=arch["registers_per_sm"],
        max_registers_per_thread=arch["max_registers_per_thread"],
        register_alloc_granularity=arch.get("register_alloc_granularity", 8),
        min_registers_per_thread=arch.get("min_registers_per_thread", 24),
        sms=arch["sms"],
        features=frozenset(arch.get("features", [])),
        dtypes=frozenset(arch.get("dtypes", [])),
        mma_shapes=tuple(tuple(s) for s in arch.get("mma_shapes", [])),
        tma_box_max=arch.get("tma_box_max", 0),
        tma_align=arch.get("tma_align", 16),
        raw=raw,
        max_warps_per_block=arch.get("max_warps_per_block", arch["max_threads_per_block"] // 32),
        setmaxnreg_max=arch.get("setmaxnreg_max", 0),
        mma_dtypes=frozenset(arch.get("mma_dtypes", [])),
        mma_layout_versions=tuple(arch.get("mma_layout_versions", [])),
        mbarrier_max_count=arch.get("mbarrier_max_count", 0),
        tma_inner_bytes=arch.get("tma_inner_bytes", 16),
        wgmma=raw.get("wgmma"),
        pow2_tiles=arch.get("pow2_tiles", False),
        convert_dtypes=frozenset(arch.get("convert_dtypes", [])),
    )


def targets() -> list[str]:
    return list(TARGET_TABLES)
