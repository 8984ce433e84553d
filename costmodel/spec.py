"""The chip as the cost model sees it: rates and sizes read from the target tables.

There is one table per chip (`kir/targets/*.toml`), shared with the verifier: the verifier reads
`[arch]`, the cost model reads `[arch]`, `[rates]` and its own `[cost]` section. A chip is
selected by KIR target (`sm_90` is the H200 we measure on) or by table name (`h100`, `a100`),
so a chip that is not a target of its own (the H100) can still be costed.

Everything here is in base units: bytes, seconds, operations per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from kir.targets import TargetSpec, spec

# Operand dtypes a tensor core multiplies at the f32 rate of its table: a KIR f32 dot lowers
# to FMAs on NVIDIA (input_precision="ieee"), to MFMA f32 on AMD.
_FMA_DOT_VENDORS = {"nvidia"}


@dataclass(frozen=True)
class Chip:
    name: str  # table name: h200, h100, a100, mi250x, mi300x, mtia_sim
    target: str  # KIR target of the table
    chip: str  # what the table calls the chip
    sms: int
    clock_hz: float
    dram_bps: float
    l2_bps: float
    l2_bytes: int
    dram_latency_s: float
    smem_per_sm: int
    max_smem_per_block: int
    registers_per_sm: int
    max_registers_per_thread: int
    register_granularity: int
    max_blocks_per_sm: int
    max_warps_per_sm: int  # KIR warps of 32 threads
    max_threads_per_block: int
    smem_bps_per_sm: float
    alu_ops_per_sm: float  # f32 lane operations per second per SM
    int_ops_per_sm: float
    sfu_ops_per_sm: float
    issue_per_sm: float  # warp instructions per second per SM
    schedulers: int  # warp schedulers per SM, each issuing one warp instruction a clock
    lsu_per_sm: float  # warp-wide global load/store instructions per second per SM
    shfl_per_sm: float  # warp shuffles per second per SM
    launch_s: float
    cta_overhead_s: float
    spill_bytes_per_latency: float  # bytes of spill code a thread gets through per memory latency
    block_launch_s: float = 0.0  # the block scheduler starts one block on an SM per this long
    drain_share: float = 0.0  # of one program's lifetime, lost as the slots of a multi-wave grid empty at its end
    l1_latency_s: float = 0.0  # load-to-use of an L1 hit (local memory that stays in L1)
    l2_latency_s: float = 0.0  # load-to-use of an L2 hit
    l1_bytes: int = 0  # L1 and shared memory together, per SM
    l2_reuse_bytes: int = 0  # the part of L2 that holds data a program reads a second time
    spill_inflight_bytes: float = 0.0  # straight-line spill reloads a thread keeps in flight
    latency_warps: int = 0  # resident warps per SM that hide ALU latency (4 schedulers x ~4-6 clk)
    shfl_latency_s: float = 0.0  # one dependent shuffle step (shfl and the combining op)
    sync_latency_s: float = 0.0  # a cross-warp exchange: smem store, barrier, load, barrier
    fma_dot_lds_conflict: float = 1.0  # shared-memory wavefronts per ideal one of an FFMA dot's operand reads
    has_wgmma: bool = False  # warpgroup MMA (Hopper): a dot with M % 64 == 0 on warpgroups
    tc_flops: dict[str, float] = field(default_factory=dict)  # operand dtype -> flop/s, whole chip
    fma_flops: dict[str, float] = field(default_factory=dict)
    vendor: str = "nvidia"
    single_thread: bool = False  # mtia-sim: one thread of control per PE

    def tc_rate(self, dtype: str) -> tuple[str, float]:
        """(unit, flop/s) of a matrix product with this operand dtype (`tf32`: f32 operands of a
        `precision = tf32` dot; a chip without TF32 units multiplies them as f32)."""
        if dtype == "tf32" and dtype not in self.tc_flops:
            dtype = "f32"
        if dtype == "f32" and self.vendor in _FMA_DOT_VENDORS:
            return "fma", self.fma_flops.get("f32", self.alu_ops_per_sm * 2 * self.sms)
        if dtype in self.tc_flops:
            return "tensor", self.tc_flops[dtype]
        if dtype in self.fma_flops:
            return "fma", self.fma_flops[dtype]
        return "fma", self.fma_flops.get("f32", self.alu_ops_per_sm * 2 * self.sms)

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity (bf16 tensor-core flops per DRAM byte) where the roofline turns."""
        return self.tc_flops.get("bf16", max(self.tc_flops.values(), default=1.0)) / self.dram_bps


def chip_names() -> list[str]:
    return ["h200", "h100", "a100", "mi250x", "mi300x", "mtia_sim"]


@cache
def chip(target: str) -> Chip:
    """The chip of a KIR target (`sm_90`, `gfx942`, `mtia-sim`) or of a table (`h100`)."""
    s: TargetSpec = spec(target)
    rates = s.raw.get("rates", {})
    cost = s.raw.get("cost", {})
    clock = float(rates.get("clock_ghz", 1.0)) * 1e9
    sms = s.sms
    dram = float(rates.get("hbm_gbps", 1.0)) * 1e9
    fma = {k: float(v) * 1e12 for k, v in cost.get("fma_tflops", {}).items()}
    fma.setdefault("f32", float(rates.get("f32_tflops", 1.0)) * 1e12)
    tc = {k: float(v) * 1e12 for k, v in cost.get("tc_tflops", {}).items()}
    for key in ("bf16", "f16", "fp8"):
        if f"{key}_tflops" in rates:
            tc.setdefault(key if key != "fp8" else "f8e4m3", float(rates[f"{key}_tflops"]) * 1e12)
    alu = float(cost.get("alu_ops_per_clk", fma["f32"] / 2 / sms / clock)) * clock
    return Chip(
        name=s.name,
        target=s.target,
        chip=s.raw.get("chip", s.name),
        sms=sms,
        clock_hz=clock,
        dram_bps=dram,
        l2_bps=float(cost.get("l2_gbps", rates.get("l2_gbps", dram / 1e9))) * 1e9,
        l2_bytes=int(cost.get("l2_bytes", 0)),
        dram_latency_s=float(cost.get("dram_latency_ns", 700.0)) * 1e-9,
        smem_per_sm=s.smem_per_sm,
        max_smem_per_block=s.max_smem_per_block,
        registers_per_sm=s.registers_per_sm,
        max_registers_per_thread=s.max_registers_per_thread,
        register_granularity=max(1, s.register_alloc_granularity),
        max_blocks_per_sm=int(cost.get("max_blocks_per_sm", 32)),
        max_warps_per_sm=int(cost.get("max_warps_per_sm", 64)),
        max_threads_per_block=s.max_threads_per_block,
        smem_bps_per_sm=float(cost.get("smem_bytes_per_clk", 128)) * clock,
        alu_ops_per_sm=alu,
        int_ops_per_sm=float(cost.get("int_ops_per_clk", 64)) * clock,
        sfu_ops_per_sm=float(cost.get("sfu_ops_per_clk", 16)) * clock,
        issue_per_sm=float(cost.get("issue_per_clk", 4)) * clock,
        schedulers=max(1, int(cost.get("issue_per_clk", 4))),
        lsu_per_sm=float(cost.get("lsu_insts_per_clk", 4)) * clock,
        shfl_per_sm=float(cost.get("shfl_insts_per_clk", 1)) * clock,
        launch_s=float(cost.get("launch_us", rates.get("launch_us", 3.0))) * 1e-6,
        cta_overhead_s=float(cost.get("cta_overhead_ns", 400.0)) * 1e-9,
        block_launch_s=float(cost.get("block_launch_ns", 0.0)) * 1e-9,
        drain_share=float(cost.get("drain_share", 0.0)),
        spill_bytes_per_latency=float(cost.get("spill_bytes_per_latency", 6.0)),
        l1_latency_s=float(cost.get("l1_latency_clk", 35)) / clock,
        l2_latency_s=float(cost.get("l2_latency_clk", 270)) / clock,
        l1_bytes=int(cost.get("l1_bytes", s.smem_per_sm)),
        l2_reuse_bytes=int(cost.get("l2_reuse_bytes", int(cost.get("l2_bytes", 0)) // 2)),
        spill_inflight_bytes=float(cost.get("spill_inflight_bytes", 24.0)),
        latency_warps=int(cost.get("latency_warps", 0)),
        shfl_latency_s=float(cost.get("shfl_latency_clk", 0)) / clock,
        sync_latency_s=float(cost.get("sync_latency_clk", 0)) / clock,
        fma_dot_lds_conflict=float(cost.get("fma_dot_lds_conflict", 1.0)),
        has_wgmma=s.has("wgmma"),
        tc_flops=tc,
        fma_flops=fma,
        vendor=s.vendor,
        single_thread=s.warp_size == 1,
    )
