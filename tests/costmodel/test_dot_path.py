"""The instruction path of a tile-level dot (wgmma, mma.sync, FFMA), the shared-memory operand
reads of its warps, the duplicate work of warps beyond its tiles, and spill traffic in loops."""

from __future__ import annotations

import pytest

from costmodel import chip, predict
from costmodel.model import analyze, dot_path
from kir.parser import parse

GEMM = """kernel gemm<BM = 64, BN = 64, BK = 32>(
    a: global DT[M, K],
    b: global DT[K, N],
    c: out global f32[M, N],
)
  where K % BK == 0
  target sm_90 grid(cdiv(M, BM), cdiv(N, BN)) warps(WARPS)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = program_id(1) * BN + arange(0, BN)
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK pipeline(stages = 3) {
    ks = k * BK + arange(0, BK)
    at = load(a[rows[:, None], ks[None, :]])
    bt = load(b[ks[:, None], cols[None, :]])
    acc = dot<f32>(at, bt, acc)
  }
  store(c[rows[:, None], cols[None, :]], acc)
}
"""
SHAPES = {"M": 4096, "N": 4096, "K": 4096}


def gemm(dtype: str = "bf16", warps: int = 4):
    return parse(GEMM.replace("DT", dtype).replace("WARPS", str(warps)))


def test_the_dot_path_follows_the_tile_shape_and_dtype():
    """Hopper runs wgmma on warpgroups with M a multiple of 64; a 32-row tile falls back to
    mma.sync, and an f32 dot is FFMA."""
    c = chip("sm_90")
    assert dot_path(128, 128, 32, "bf16", 4, False, c).name == "wgmma"
    assert dot_path(32, 16, 32, "bf16", 4, False, c).name == "mma"
    assert dot_path(64, 64, 32, "bf16", 2, False, c).name == "mma"  # no whole warpgroup
    assert dot_path(16, 16, 128, "f32", 4, False, c).name == "fma"


def test_a_small_dot_tile_costs_more_per_flop_than_a_128_square_one():
    """Each warp reads its rows of A and columns of B from shared memory for every k: a 32 x 16
    tile reads the operands many more times per flop than a 128 x 128 one (the gemm seed at
    BM=32, BN=16 ran 2.2 ms on the H200, against 0.4 ms at 128-wide tiles)."""
    c = chip("sm_90")
    big = dot_path(128, 128, 32, "bf16", 4, False, c)
    small = dot_path(32, 16, 32, "bf16", 4, False, c)
    assert small.smem_bytes / (32 * 16) > 4 * big.smem_bytes / (128 * 128)
    p = gemm()
    t_big = predict(p, "sm_90", {"BM": 128, "BN": 128}, SHAPES).time_s
    t_small = predict(p, "sm_90", {"BM": 32, "BN": 16}, SHAPES).time_s
    assert t_small > 2 * t_big


def test_an_f32_dot_on_ffma_is_bound_by_its_operand_reads():
    """An FFMA dot reads a row of A and a column of B per output patch from shared memory
    every k: at 16 x 16 on 4 warps that, not the FMA pipe, sets its time (k-means seed: 79 ms
    on the H200, 4 ms of FMAs)."""
    p = gemm("f32")
    est = predict(p, "sm_90", {"BM": 16, "BN": 16, "BK": 128}, SHAPES)
    assert est.resources["l1"] > 5 * est.resources["fma"]


def test_more_warps_on_a_fixed_tiny_tile_are_not_faster():
    """Warps beyond the tile's m16n8 instruction tiles compute duplicates of the same product
    (gemm seed BM=32 at 16 warps: 1.9 ms, against 0.6 at 4)."""
    c = chip("sm_90")
    assert dot_path(32, 16, 32, "bf16", 16, False, c).replicas == pytest.approx(4)
    assert dot_path(32, 16, 32, "bf16", 4, False, c).replicas == pytest.approx(1)
    params = {"BM": 32, "BN": 16}
    t4 = predict(gemm(warps=4), "sm_90", params, SHAPES).time_s
    t16 = predict(gemm(warps=16), "sm_90", params, SHAPES).time_s
    assert t16 >= t4


def test_a_chained_wgmma_dot_puts_every_warp_along_m():
    """Attention's two dots are chained: Triton puts all warps along M, so 8 warps on a 64-row
    tile hold two copies of the product."""
    c = chip("sm_90")
    assert dot_path(64, 64, 128, "bf16", 8, True, c).replicas == pytest.approx(2)
    assert dot_path(64, 64, 128, "bf16", 8, False, c).replicas == pytest.approx(1)


ROWSUM = """kernel rowsum<BN = 128>(x: global f32[M, N], y: out global f32[M])
  where N % BN == 0
  target sm_90 grid(M) warps(2)
{
  row = program_id(0)
  acc = zeros(f32[BN])
  for j in 0 .. N / BN {
    acc = acc + load(x[row, j * BN : j * BN + BN])
  }
  store(y[row], sum(acc, axis = 0))
}
"""


def test_spills_in_a_loop_are_traffic_every_trip():
    """Spill code in a loop runs every trip: a thread's spilled bytes times the trips, for every
    resident thread, at the bandwidth of the level that holds them (the knn tuned program at 2
    warps spills 29 KB a thread in a 2048-trip loop: 359 ms on the H200)."""
    p = parse(ROWSUM)
    short, *_ = analyze(p, "sm_90", None, {"M": 8192, "N": 1024}, registers=255, spills=30000)
    long, *_ = analyze(p, "sm_90", None, {"M": 8192, "N": 262144}, registers=255, spills=30000)
    assert long.spill_s > 50 * short.spill_s
