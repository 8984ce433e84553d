"""The cuda backend's zero-started wgmma accumulators: a loop that carries an accumulator from
`zeros` does not write the zeros into its registers (a non-wgmma instruction defining them made
ptxas serialize the persistent GEMM's wgmmas, C7515); the first step's wgmma discards the
accumulator's input (scale-d 0) instead, and the zeros are written only when the loop runs no
step. The epilogue stores the accumulator's column pairs into the swizzled staging buffer two
elements at a time (the per-element addresses, hoisted out of the tile loop, spilled)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kir.parser import parse, parse_file
from lowering.entry import lower
from lowering.report import find_tool
from lowering.targets.cuda.compile import compile_lowered

ROOT = Path(__file__).resolve().parents[2]
PERSISTENT = ROOT / "benchmarks" / "tasks" / "gemm" / "persistent.kir"
PARAMS = {"BM": 128, "BN": 256, "BK": 64, "S": 3}

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")

WGMMA = re.compile(r"kir_wgmma_m64n\d+k16_bf16\((\w+) \+ (\d+), .*, ([^,]+)\);$")

# one warpgroup, the accumulator carried by a loop; BODY is the loop's wgmma statement(s)
LOOP = """\
kernel k<BM = 64, BN = 64, BK = 64>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    c: out global f32[M, N] align(16),
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(1)
{
  as = smem(bf16[1, BM, BK], swizzle = 128)
  bs = smem(bf16[1, BK, BN], swizzle = 128)
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = INIT
  for k in 0 .. K / BK {
    expect(bar[0], bytes = sizeof(as[0]) + sizeof(bs[0]))
    tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[0], signal = bar[0])
    tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[0], signal = bar[0])
    wait(bar[0], parity = k % 2)
BODY
    wgmma.wait(0)
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}
"""
PLAIN = "    acc = wgmma(as[0], bs[0], acc)"


def loop_source(init: str = "zeros(f32[BM, BN])", body: str = PLAIN) -> str:
    text = LOOP.replace("INIT", init).replace("BODY", body)
    return lower(parse(text, file="k.kir"), "cuda").source


def scales(source: str) -> list[str]:
    return [m.group(3) for line in source.splitlines() if (m := WGMMA.search(line.strip()))]


def persistent_source() -> str:
    return lower(parse_file(PERSISTENT), "cuda", PARAMS).source


def test_the_first_wgmma_of_a_tile_takes_scale_d_from_the_step():
    src = persistent_source()
    calls = [WGMMA.search(line.strip()) for line in src.splitlines()]
    calls = [m for m in calls if m]
    assert len(calls) == 4  # 64 x 256 per warpgroup, BK = 64: four k16 instructions
    assert calls[0].group(3) == "v_k_1 != 0"  # the tile's k loop: D = A B on its first step
    assert [m.group(3) for m in calls[1:]] == ["1", "1", "1"]


def test_the_zeros_are_written_only_when_the_loop_runs_no_step():
    src = persistent_source()
    body = src[src.index("// role mma") :]
    fill = body.index("v_acc[kir_i] = 0.0f;")
    guard = body.rindex("if (!(0 < v_nk)) {", 0, fill)
    assert body.index("for (int v_k_1 = 0; v_k_1 < v_nk; v_k_1 += 1)") > fill > guard
    assert body.count("= 0.0f;") == 1


def test_the_epilogue_stores_pairs_into_the_swizzled_buffer():
    src = persistent_source()
    line = next(x for x in src.splitlines() if "kir_pair<__nv_bfloat16>{" in x)
    assert "kir_smem" in src[src.rindex("kir_p = ", 0, src.index(line)) :].splitlines()[0]
    assert "kir_p[1]" not in src  # the buffer's pairs are aligned: no run-time fallback


def test_every_accumulator_block_starts_from_the_step():
    """Two 64-row blocks of the accumulator: the first instruction into each discards."""
    text = LOOP.replace("BM = 64", "BM = 128")
    src = lower(parse(text.replace("INIT", "zeros(f32[BM, BN])").replace("BODY", PLAIN), file="k.kir"), "cuda")
    found = scales(src.source)
    assert len(found) == 8 and found.count("v_k != 0") == 2
    assert [found[0], found[4]] == ["v_k != 0", "v_k != 0"]


def test_a_loop_of_one_instruction_group_keeps_the_discard():
    assert scales(loop_source())[0] == "v_k != 0"


def test_a_non_zero_start_is_accumulated_onto():
    src = loop_source(init="full(f32[BM, BN], 1.0)")
    assert set(scales(src)) == {"1"}
    assert "if (!(" not in src


def test_zeros_straight_into_a_wgmma_are_never_written():
    src = loop_source(body="    acc = wgmma(as[0], bs[0], zeros(f32[BM, BN]))")
    assert set(scales(src)) == {"0", "1"} and scales(src)[0] == "0"


@needs_nvcc
def test_the_persistent_gemm_compiles_without_serialized_wgmma():
    report = compile_lowered(lower(parse_file(PERSISTENT), "cuda", PARAMS))
    assert report.ok, report.log
    assert "C7515" not in report.log
    assert not [d for d in report.diagnostics if d.rule == "compile.wgmma-serialized"]
    assert report.instructions["HGMMA"] == 4
    assert report.spills == 0


@needs_nvcc
def test_a_zero_started_loop_compiles():
    report = compile_lowered(lower(parse(LOOP.replace("INIT", "zeros(f32[BM, BN])").replace("BODY", PLAIN)), "cuda"))
    assert report.ok, report.log
    assert "C7515" not in report.log
