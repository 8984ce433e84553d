"""The gluon backend without a GPU: the explicit Hopper GEMM lowers (snapshot of the emitted
module), compiles ahead of time to an sm_90 cubin holding wgmma, and a compile error in
emitted code is reported at the KIR op that produced the failing line.

Regenerate the snapshots with `KIR_UPDATE_SNAPSHOTS=1 pytest tests/lowering/test_gluon.py`.
Compiles are cached on disk by content hash (`$KIR_CACHE_DIR`, default `~/.cache/kir`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kir.diagnostics import KirError
from kir.parser import parse
from lowering.entry import lower
from lowering.targets.gluon.emit import _fold, _mma_layout
from tests.lowering.helpers import SOFTSIGN_TEXT, TMA_STORE_TEXT, check_snapshot

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).parent / "snapshots" / "gluon"
GEMM_TEXT = (ROOT / "examples" / "gemm_hopper_ws.kir").read_text()
GEMM_LINES = GEMM_TEXT.splitlines()


# Roles of single warps: no unit is a warpgroup, so an idle four-warp default partition hosts
# none of them and every unit is a worker.
WS_ROWS_TEXT = """\
# A producer warp streams row blocks of x with the TMA; four consumer warps each take a
# quarter of the rows, transform them and store them.
kernel ws_rows<BM = 64, BN = 64, S = 2>(
    x: global f32[M, N] align(16),
    y: out global f32[M, N] align(16),
)
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM) warps(5)
{
  xs = smem(f32[S, BM, BN], swizzle = 128)
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 4)
  m0 = program_id(0) * BM
  role load warps(0) regs(40) {
    for j in 0 .. N / BN {
      s = j % S
      wait(empty[s], parity = (j / S + 1) % 2)
      expect(full[s], bytes = sizeof(xs[s]))
      tma.load(x[m0 : m0 + BM, j * BN : j * BN + BN], xs[s], signal = full[s])
    }
  }
  role compute warps(1, 2, 3, 4) regs(128) {
    r0 = role_rank() * (BM / 4)
    for j in 0 .. N / BN {
      s = j % S
      wait(full[s], parity = (j / S) % 2)
      v = load(xs[s, r0 : r0 + BM / 4])
      arrive(empty[s])
      w = where(v > 0.0, exp(v), v * 2.0 - 1.0)
      store(y[m0 + r0 : m0 + r0 + BM / 4, j * BN : j * BN + BN], w)
    }
  }
}
"""


# The im2col gather of conv1d in a producer warpgroup (benchmarks/ablations/conv1d_ws1.kir; the
# task's ws.kir splits it over two): a load through index tiles, widened by expand_dims, stored
# into a swizzled ring for wgmma.
CONV_WS_TEXT = (ROOT / "benchmarks" / "ablations" / "conv1d_ws1.kir").read_text()
CONV_WS2_TEXT = (ROOT / "benchmarks" / "tasks" / "conv1d" / "ws.kir").read_text()
CONV_WS_SMALL = {"BM": 128, "BN": 64, "BK": 64, "S": 2}


def gemm(text: str = GEMM_TEXT):
    """The example at BN = 128 (its default is 256): the assertions below describe that shape."""
    program = parse(text, file="gemm_hopper_ws.kir")
    return program.with_params(BN=128) if "BN" in program.params else program


def kir_line(fragment: str) -> int:
    return next(i + 1 for i, line in enumerate(GEMM_LINES) if fragment in line)


def generated_line(lowered, fragment: str) -> int:
    return next(i + 1 for i, line in enumerate(lowered.source.splitlines()) if fragment in line)


# ---- lowering -------------------------------------------------------------------------------


def test_gemm_lowers_with_one_partition_per_role_unit():
    lowered = lower(gemm(), "gluon")
    assert lowered.backend == "gluon" and lowered.entry == "gemm_hopper_ws"
    assert lowered.num_warps == 4  # the default partition's warps: the launch's num_warps
    opts = lowered.options
    assert opts["total_warps"] == 12
    assert [(p["role"], p["rank"], p["warps"], p["regs"], p["default"]) for p in opts["partitions"]] == [
        ("mma", 0, 4, 232, True),
        ("load", 0, 4, 40, False),
        ("mma", 1, 4, 232, False),
    ]
    assert opts["default_regs"] == 232  # what Triton leaves the default partition
    assert [(p["kind"], p["name"]) for p in opts["launch"]] == [
        ("desc", "a_desc"),
        ("desc", "b_desc"),
        ("ptr", "c"),
        ("symbol", "M"),
        ("symbol", "K"),
        ("symbol", "N"),
    ]
    assert opts["launch"][0]["box"] == [128, 64] and opts["launch"][1]["box"] == [64, 128]
    src = lowered.source
    assert "gl.warp_specialize([" in src and "], [4, 4], [40, 232])" in src
    assert "NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 128, 16])" in src
    assert "mbarrier.init(empty.index(i_1), count=2)" in src  # two consumer partitions, two arrivals


def test_every_generated_line_of_an_op_maps_to_its_kir_line():
    lowered = lower(gemm(), "gluon")
    pairs = {
        "mbarrier.arrive(empty.index(s), count=1)": "arrive(empty[s])",
        "mbarrier.expect(full.index(s), 32768)": "expect(full[s]",
        "tma.async_copy_global_to_shared(a_desc": "tma.load(a[",
        "warpgroup_mma(as_.index(s).slice(r0, 64, dim=0)": "acc = wgmma(",
        "warpgroup_mma_wait(0": "wgmma.wait(0)",
        "gl.store(c_ptrs": "store(c[",
        "(gemm_hopper_ws_load, (": "role load",
    }
    for generated, kir in pairs.items():
        span = lowered.span_for_line(generated_line(lowered, generated))
        assert span is not None and span.line == kir_line(kir), generated


def test_snapshot_gemm_hopper_ws():
    check_snapshot(SNAPSHOTS / "gemm_hopper_ws.py.snap", lower(gemm(), "gluon").source)


def test_snapshot_gemm_hopper_ws_bn256():
    check_snapshot(SNAPSHOTS / "gemm_hopper_ws_bn256_s4.py.snap", lower(gemm(), "gluon", {"BN": 256, "S": 4}).source)


def test_snapshot_single_warpgroup_tma_store():
    check_snapshot(
        SNAPSHOTS / "gemm_tma_store.py.snap", lower(parse(TMA_STORE_TEXT, file="gemm_tma_store.kir"), "gluon").source
    )


def test_snapshot_single_warp_roles():
    check_snapshot(SNAPSHOTS / "ws_rows.py.snap", lower(parse(WS_ROWS_TEXT, file="ws_rows.kir"), "gluon").source)


def test_single_warp_roles_get_an_idle_default_partition():
    lowered = lower(parse(WS_ROWS_TEXT, file="ws_rows.kir"), "gluon")
    parts = lowered.options["partitions"]
    assert parts[0] == {"role": None, "rank": 0, "warps": 4, "regs": 0, "default": True}
    assert [(p["role"], p["rank"], p["warps"]) for p in parts[1:]] == [("load", 0, 1)] + [
        ("compute", r, 1) for r in range(4)
    ]
    assert lowered.num_warps == 4 and "mbarrier.init(empty.index(i_1), count=4)" in lowered.source


def test_an_im2col_gather_lowers_with_slice_layouts():
    lowered = lower(parse(CONV_WS_TEXT, file="ws.kir"), "gluon", CONV_WS_SMALL)
    src = lowered.source
    blocked = re.search(r"^(blocked_layout_\d+) = gl.constexpr\(gl.BlockedLayout\(\[1, 8\]", src, re.M).group(1)
    rows = re.search(rf"^(slice_layout_\d+) = gl.constexpr\(gl.SliceLayout\(1, {blocked}\)\)", src, re.M).group(1)
    cols = re.search(rf"^(slice_layout_\d+) = gl.constexpr\(gl.SliceLayout\(0, {blocked}\)\)", src, re.M).group(1)
    # the 1-D tiles are made in the slices of the gather's layout: widening them moves nothing
    assert f"cols = l0 + gl.arange(0, 64, layout={cols})" in src
    assert f"kk = k * 64 + gl.arange(0, 64, layout={rows})" in src
    assert "pos = gl.expand_dims(cols, 0) + gl.expand_dims(kk % 7 - 3, 1)" in src
    assert "x_ptrs = x + b.to(gl.int64) * (C * L) + gl.expand_dims(ci, 1).to(gl.int64) * L + pos" in src
    assert "xt = gl.load(x_ptrs, mask=(pos >= 0) & (pos < L), other=0)" in src
    gather_fn = src[src.index("def conv1d_ws_gather") : src.index("def conv1d_ws_mma")]
    assert "convert_layout" not in gather_fn and "bs.index(s).store(xt)" in gather_fn


def test_an_expansion_of_a_tile_with_another_layout_converts_it():
    text = CONV_WS_TEXT.replace(
        "cols = l0 + arange(0, BN)", "cols = l0 + convert_layout(arange(0, BN), blocked([1], [32], [4], [0]))"
    )
    src = lower(parse(text, file="ws.kir"), "gluon", CONV_WS_SMALL).source
    assert re.search(r"pos = gl.expand_dims\(gl.convert_layout\(cols, slice_layout_\d+\), 0\)", src)


def test_refuses_scattered_stores():
    text = CONV_WS_TEXT.replace(
        "store(y[b, o0 + r0 : o0 + r0 + BM / 2, l0 : l0 + BN], cast<bf16>(acc))",
        "store(y[b, (o0 + r0 + arange(0, BM / 2))[:, None], (l0 + arange(0, BN))[None, :]], cast<bf16>(acc))",
    )
    with pytest.raises(KirError) as err:
        lower(parse(text, file="ws.kir"), "gluon", CONV_WS_SMALL)
    (d,) = err.value.diagnostics
    assert d.rule == "lower.unsupported" and "scattered stores" in d.message
    assert "store(y[b, (o0" in text.splitlines()[d.span.line - 1]


def test_refuses_tile_level_programs():
    program = parse((ROOT / "examples" / "softmax.kir").read_text(), file="softmax.kir")
    with pytest.raises(KirError) as err:
        lower(program, "gluon")
    assert [d.rule for d in err.value.diagnostics] == ["lower.level"]


def test_refuses_a_cta_barrier_inside_a_role_at_its_line():
    text = GEMM_TEXT.replace("      arrive(empty[s])\n", "      arrive(empty[s])\n      barrier()\n")
    with pytest.raises(KirError) as err:
        lower(gemm(text), "gluon")
    (d,) = err.value.diagnostics
    assert d.rule == "lower.unsupported" and "barrier" in d.message
    assert text.splitlines()[d.span.line - 1].strip() == "barrier()"


def test_refuses_an_accumulator_too_small_for_a_warpgroup():
    with pytest.raises(KirError) as err:
        lower(gemm(), "gluon", {"BM": 64, "BN": 64, "BK": 32, "S": 2})  # 32 rows per consumer
    assert {d.rule for d in err.value.diagnostics} == {"lower.unsupported"}
    assert kir_line("acc = zeros(") in {d.span.line for d in err.value.diagnostics}


def test_refuses_other_targets():
    text = GEMM_TEXT.replace("target sm_90", "target sm_80")
    with pytest.raises(KirError) as err:
        lower(gemm(text), "gluon")
    assert "lower.target" in {d.rule for d in err.value.diagnostics}


def test_integer_folding_follows_kir_semantics():
    assert _fold("div", -7, 2, "i32") == -3  # truncates toward zero, as in C
    assert _fold("rem", -7, 2, "i32") == -1
    assert _fold("div", 5, 0, "i32") == -1 and _fold("rem", 5, 0, "i32") == 5
    assert _fold("add", 2**31 - 1, 1, "i32") == -(2**31)  # wraps
    assert _fold("shl", 1, 40, "i32") == 0


def test_wgmma_instruction_shapes():
    assert _mma_layout(64, 128, 16, 4) == ([4, 1], [16, 128, 16])
    assert _mma_layout(64, 256, 16, 4) == ([4, 1], [16, 256, 16])
    assert _mma_layout(128, 128, 16, 8) == ([8, 1], [16, 128, 16])
    assert _mma_layout(64, 96, 8, 4) == ([4, 1], [16, 96, 32])


# ---- ahead-of-time compilation (no GPU) ----------------------------------------------------

triton = pytest.importorskip("triton")


def compile_report(program, params=None, **kwargs):
    from lowering.targets.gluon.compile import compile_lowered

    return compile_lowered(lower(program, "gluon", params), **kwargs)


def test_gemm_compiles_to_sm90_with_wgmma():
    report = compile_report(gemm())
    assert report.ok, report.log
    assert report.instructions["wgmma"] and report.num_warps == 12
    assert report.shared_bytes == 147528  # 4 stages of 16 KB + 16 KB, two 8 KB layout scratches, barriers
    ptx = report.ptx
    assert ".target sm_90a" in ptx and "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx  # the TMA loads
    assert {"dec 40", "inc 232"} <= set(report.extra["setmaxnreg"])  # the load and mma budgets
    assert Path(report.binary).stat().st_size > 0 and report.instructions["HGMMA"]  # in the SASS
    assert report.registers and report.spills == 0 and report.local_bytes == 0  # ptxas -v


# `wgmma.mma_async ... {d}, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b`
WGMMA_IMMEDIATES = re.compile(r"wgmma\.mma_async\S* \{[^}]*\}, %rd\d+, %rd\d+, \S+ (\d), (\d), (\d), (\d);")


def test_attention_scores_take_k_major_b_through_a_permuted_descriptor():
    """`wgmma(qs[...], trans(ks[st]), s)`: B is the K tile's descriptor `.permute((1, 0))`, which
    the compiler issues as wgmma's K-major B (imm-trans-b 0; the GEMM's N-major B has 1)."""
    program = parse((ROOT / "examples" / "attention_scores_hopper.kir").read_text(), file="attention_scores_hopper.kir")
    lowered = lower(program, "gluon")
    assert "warpgroup_mma(qs.slice(r0, 64, dim=0), ks.index(st).permute((1, 0)), s, is_async=True)" in lowered.source
    report = compile_report(program)
    assert report.ok, report.log
    assert report.instructions["wgmma"] and report.instructions["HGMMA"]
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in report.ptx
    assert set(WGMMA_IMMEDIATES.findall(report.ptx)) == {("1", "1", "0", "0")}
    assert set(WGMMA_IMMEDIATES.findall(compile_report(gemm()).ptx)) == {("1", "1", "0", "1")}


def test_bn256_fits_four_stages_and_five_do_not():
    ok = compile_report(gemm(), {"BN": 256, "S": 4})
    assert ok.ok and ok.instructions["wgmma"] and ok.shared_bytes <= 232448
    assert "m64n256k16" in ok.ptx
    too_big = compile_report(gemm(), {"BN": 256, "S": 5})
    assert not too_big.ok
    (d,) = too_big.diagnostics
    assert d.rule == "lower.shared-memory" and d.span.line == 9  # the kernel's parameter S


def test_single_warpgroup_tma_store_compiles():
    report = compile_report(parse(TMA_STORE_TEXT, file="gemm_tma_store.kir"))
    assert report.ok, report.log
    assert report.instructions["wgmma"] and report.num_warps == 4
    assert "cp.async.bulk.tensor.2d.global.shared" in report.ptx  # the TMA store


def test_single_warp_roles_and_masked_blocks_compile():
    roles = compile_report(parse(WS_ROWS_TEXT, file="ws_rows.kir"))
    assert roles.ok, roles.log
    assert roles.num_warps == 12  # the idle default warpgroup, five one-warp workers padded to eight
    masked = compile_report(parse(SOFTSIGN_TEXT, file="row_softsign.kir"))
    assert masked.ok, masked.log


def test_conv1d_ws_compiles_without_spills_at_bench_size():
    report = compile_report(parse(CONV_WS_TEXT, file="ws.kir"), {"BM": 256, "BN": 128, "BK": 64, "S": 4})
    assert report.ok, report.log
    assert report.spills == 0 and report.local_bytes == 0
    assert "m64n128k16" in report.ptx and report.shared_bytes <= 232448
    assert {"inc 160", "inc 168"} <= set(report.extra["setmaxnreg"])  # the gather and mma budgets
    two = compile_report(parse(CONV_WS2_TEXT, file="ws.kir"), {"BM": 256, "BN": 128, "BK": 64, "S": 3})
    assert two.ok, two.log
    assert two.spills == 0 and two.local_bytes == 0 and two.shared_bytes <= 232448
    assert {"inc 88", "inc 168"} <= set(two.extra["setmaxnreg"])  # the two producers and the mma budgets


def test_a_front_end_error_in_emitted_code_points_at_the_kir_op():
    """The test hook corrupts the generated line of `arrive(empty[s])`."""
    report = compile_report(
        gemm(), transform_source=lambda s: s.replace("mbarrier.arrive(empty", "mbarrier.arrive_corrupted(empty")
    )
    assert not report.ok
    (d,) = report.diagnostics
    assert d.rule == "lower.compile" and d.severity == "error"
    assert d.span.line == kir_line("arrive(empty[s])")
    assert "arrive_corrupted" in d.message and "bug of the gluon backend" in d.hint


def test_a_compiler_crash_in_emitted_code_points_at_the_kir_op():
    """A wrong accumulator layout makes Triton's MLIR passes abort; the child process dies,
    and the location in its MLIR diagnostic still leads back to the wgmma."""
    lowered = lower(gemm(), "gluon")
    mma = re.search(r"^(mma_layout_\d+) = ", lowered.source, re.M).group(1)
    blocked = re.search(r"^(blocked_layout_\d+) = ", lowered.source, re.M).group(1)
    report = compile_report(gemm(), transform_source=lambda s: s.replace(f"layout={mma})", f"layout={blocked})"))
    assert not report.ok
    (d,) = report.diagnostics
    assert d.rule == "lower.compile"
    assert d.span.line == kir_line("acc = wgmma(")


def test_ptxas_out_of_registers_is_the_programs_resource_error():
    # conv1d's warp-specialized program at BM = 128, BN = 256: 16 warps leave 128 registers a
    # thread, and a consumer's m64n256 wgmma needs more; ptxas's own words become the message
    program = parse((ROOT / "benchmarks/tasks/conv1d/ws.kir").read_text(), file="ws.kir")
    report = compile_report(program, {"BM": 128, "BN": 256, "BK": 64, "S": 3})
    assert not report.ok
    (d,) = report.diagnostics
    assert d.rule == "lower.registers" and d.severity == "error"
    assert "in 128 registers a thread" in d.message and "16 warps" in d.message
    assert d.counterexample["needed"] > 128 and "bug of the" not in d.message + (d.hint or "")


# ---- reductions and N-D TMA boxes: causal attention's warp-specialized program ---------------

ATTENTION_WS_TEXT = (ROOT / "benchmarks" / "tasks" / "causal_attention" / "ws.kir").read_text()
ATTENTION_BENCH = {"BM": 128, "BN": 64, "HD": 128, "ST": 2}  # the task's bench parameters

# Reductions of a wgmma accumulator's rows (the row maximum, a bf16 row sum) and of a 1-D tile
# to a scalar.
ROW_STATS_TEXT = """\
kernel row_stats<BM = 64, BN = 128, BK = 64>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    rmax: out global f32[M],
    rsum: out global bf16[M],
    lowest: out global f32[P],
)
  where M == P * BM, N == BN, K % BK == 0
  target sm_90 grid(P) warpgroups(1)
{
  as = smem(bf16[1, BM, BK], swizzle = 128)
  bs = smem(bf16[1, BK, BN], swizzle = 128)
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  acc = zeros(f32[BM, BN])
  ph = 0
  for k in 0 .. K / BK {
    expect(bar[0], bytes = sizeof(as[0]) + sizeof(bs[0]))
    tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[0], signal = bar[0])
    tma.load(b[k * BK : k * BK + BK, 0 : BN], bs[0], signal = bar[0])
    wait(bar[0], parity = ph)
    ph = ph ^ 1
    acc = wgmma(as[0], bs[0], acc)
    wgmma.wait(0)
  }
  m = max(acc, axis = 1)
  e = exp(acc - m[:, None])
  store(rmax[m0 : m0 + BM], m)
  store(rsum[m0 : m0 + BM], sum(cast<bf16>(e), axis = 1))
  store(lowest[program_id(0)], min(m, axis = 0))
}
"""

# A box x[b, rows, cols] of a 3-D tensor, in and out by TMA.
BATCHED_SCALE_TEXT = """\
kernel batched_scale<BM = 64, BN = 64>(
    x: global bf16[B, M, N] align(16),
    y: out global bf16[B, M, N] align(16),
)
  where M % BM == 0, N == BN
  target sm_90 grid(M / BM, B) warpgroups(1)
{
  xs = smem(bf16[BM, BN], swizzle = 128)
  ys = smem(bf16[BM, BN], swizzle = 128)
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  b = program_id(1)
  expect(bar[0], bytes = sizeof(xs[0 : BM]))
  tma.load(x[b, m0 : m0 + BM, 0 : BN], xs[0 : BM], signal = bar[0])
  wait(bar[0], parity = 0)
  v = load(xs[0 : BM])
  store(ys[0 : BM], cast<bf16>(cast<f32>(v) * 2.0))
  fence.async()
  tma.store(ys[0 : BM], y[b, m0 : m0 + BM, 0 : BN])
  tma.store_wait(0)
}
"""


def attention_ws():
    return parse(ATTENTION_WS_TEXT, file="ws.kir")


def test_online_softmax_statistics_live_in_the_row_slice_of_the_scores():
    src = lower(attention_ws(), "gluon", ATTENTION_BENCH).source
    mma_s = re.search(r"^(mma_layout_\d+) = .*instr_shape=\[16, 64, 16\]", src, re.M).group(1)
    mma_acc = re.search(r"^(mma_layout_\d+) = .*instr_shape=\[16, 128, 16\]", src, re.M).group(1)
    rows = re.search(rf"^(slice_layout_\d+) = gl.constexpr\(gl.SliceLayout\(1, {mma_s}\)\)", src, re.M).group(1)
    acc_rows = re.search(rf"^(slice_layout_\d+) = gl.constexpr\(gl.SliceLayout\(1, {mma_acc}\)\)", src, re.M).group(1)
    # made, reduced into and widened back in the scores' row slice: no conversion
    assert f'm_i = gl.full([64], float("-inf"), gl.float32, layout={rows})' in src
    assert f"l_i = gl.zeros([64], gl.float32, layout={rows})" in src
    assert "m_new = gl.maximum(m_i, gl.reduce(s, 1, kir_max) * qk_scale, propagate_nan=tl.PropagateNan.ALL)" in src
    assert "p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))" in src
    assert "l_i = l_i * alpha + gl.sum(p, axis=1)" in src
    # against the m64n128 accumulator: a conversion between row slices (the same rows per thread)
    assert f"acc * gl.expand_dims(gl.convert_layout(alpha, {acc_rows}), 1)" in src
    # KIR's max reduction combines with `maximum`, which propagates NaN
    assert "return gl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)" in src


def test_4d_tma_boxes_go_through_descriptors_over_the_rows():
    lowered = lower(attention_ws(), "gluon", ATTENTION_BENCH)
    src = lowered.source
    assert "tma.async_copy_global_to_shared(q_desc, [(b * H + h) * S + m0, 0], qbar.index(0), qs)" in src
    assert (
        "tma.async_copy_global_to_shared(k_desc, [(b * H + h) * S + j * 64, 0], kfull.index(st), ks.index(st))" in src
    )
    descs = [(p["name"], p["box"], p["rank"]) for p in lowered.options["launch"] if p["kind"] == "desc"]
    assert descs == [("q_desc", [128, 128], 4), ("k_desc", [64, 128], 4), ("v_desc", [64, 128], 4)]


def test_snapshot_causal_attention_ws():
    check_snapshot(SNAPSHOTS / "causal_attention_ws.py.snap", lower(attention_ws(), "gluon", ATTENTION_BENCH).source)


def test_reductions_by_dtype():
    src = lower(parse(ROW_STATS_TEXT, file="row_stats.kir"), "gluon").source
    assert "m = gl.reduce(acc, 1, kir_max)" in src
    # a bf16 sum reduces in f32 and rounds once; a 1-D tile reduces to a scalar
    assert "gl.sum(e.to(gl.bfloat16).to(gl.float32), axis=1).to(gl.bfloat16)" in src
    assert "gl.store(lowest_ptrs, gl.reduce(m, 0, kir_min))" in src
    ints = ROW_STATS_TEXT.replace(
        "store(lowest[program_id(0)], min(m, axis = 0))",
        "store(lowest[program_id(0)], cast<f32>(sum(cast<i8>(m), axis = 0) + cast<i8>(prod(cast<i32>(m), axis = 0))))",
    )
    src = lower(parse(ints, file="row_stats.kir"), "gluon").source
    assert "gl.sum(m.to(gl.int8), axis=0).to(gl.int8)" in src  # Gluon sums i8 in i32: wrap back
    assert "gl.reduce(m.to(gl.int32), 0, kir_prod)" in src and "def kir_prod(a, b):" in src


def test_3d_tma_boxes_load_and_store_at_the_merged_row():
    lowered = lower(parse(BATCHED_SCALE_TEXT, file="batched_scale.kir"), "gluon")
    assert "tma.async_copy_global_to_shared(x_desc, [b * M + m0, 0], bar.index(0), xs)" in lowered.source
    assert "tma.async_copy_shared_to_global(y_desc, [b * M + m0, 0], ys)" in lowered.source


def test_refuses_tma_boxes_that_slice_a_leading_dimension():
    text = BATCHED_SCALE_TEXT.replace("x[b, m0 : m0 + BM, 0 : BN]", "x[m0 : m0 + BM, b, 0 : BN]")
    text = text.replace("x: global bf16[B, M, N]", "x: global bf16[M, B, N]")
    with pytest.raises(KirError) as err:
        lower(parse(text, file="batched_scale.kir"), "gluon")
    (d,) = err.value.diagnostics
    assert d.rule == "lower.unsupported" and "slice the last two dimensions" in d.message
    assert "tma.load(x[m0 : m0 + BM, b, 0 : BN]" in text.splitlines()[d.span.line - 1]


def test_refuses_tma_boxes_of_tensors_whose_rows_do_not_merge():
    text = BATCHED_SCALE_TEXT.replace(
        "x: global bf16[B, M, N] align(16)", "x: global bf16[B, M, N] strides(N, B * N, 1) align(16)"
    )
    with pytest.raises(KirError) as err:
        lower(parse(text, file="batched_scale.kir"), "gluon")
    (d,) = err.value.diagnostics
    assert d.rule == "lower.unsupported" and "merge into rows" in d.message
    contiguous = BATCHED_SCALE_TEXT.replace(
        "x: global bf16[B, M, N] align(16)", "x: global bf16[B, M, N] strides(M * N, N, 1) align(16)"
    )
    assert lower(parse(contiguous, file="batched_scale.kir"), "gluon").source


def test_descriptor_rows_of_a_4d_tensor():
    torch = pytest.importorskip("torch")
    from lowering.targets.gluon.runtime import row_view

    q = torch.empty(2, 3, 8, 16)
    assert row_view(q, "q") == ([48, 16], [16, 1])
    assert row_view(q[1:], "q") == ([24, 16], [16, 1])  # a slice of whole batches still merges
    with pytest.raises(ValueError, match="dimension 0 has stride 384, not 128"):
        row_view(q[:, :1], "q")  # one head of each batch: the batches' rows are 384 apart, not 128
    assert row_view(torch.empty(8, 16), "a") == ([8, 16], [16, 1])
    with pytest.raises(ValueError, match="dimension 1 has stride 16, not 384"):
        row_view(q.transpose(1, 2), "q")  # [2, 8, 3, 16]: heads interleaved within rows


def test_attention_ws_compiles_at_its_bench_parameters():
    report = compile_report(attention_ws(), ATTENTION_BENCH)
    assert report.ok, report.log
    assert report.spills == 0 and report.local_bytes == 0
    ptx = report.ptx
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in ptx  # s = q k^T
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx  # acc += p v
    assert report.instructions["HGMMA"] and "cp.async.bulk.tensor.2d" in ptx
    assert "max.NaN.f32" in ptx  # the row maximum propagates NaN
    assert {"dec 40", "inc 232"} <= set(report.extra["setmaxnreg"])
    # qs 32 KB, the k and v rings 2 x 2 x 16 KB, ps 16 KB, the epilogue's 16 KB layout scratch, barriers
    assert report.shared_bytes == 131136


def test_row_reductions_of_an_accumulator_compile():
    report = compile_report(parse(ROW_STATS_TEXT, file="row_stats.kir"))
    assert report.ok, report.log
    assert report.instructions["wgmma"] and report.spills == 0
    assert "max.NaN.f32" in report.ptx and "min.NaN.f32" in report.ptx


def test_3d_tma_boxes_compile():
    report = compile_report(parse(BATCHED_SCALE_TEXT, file="batched_scale.kir"))
    assert report.ok, report.log
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in report.ptx  # the load
    assert "cp.async.bulk.tensor.2d.global.shared" in report.ptx  # the store


def test_an_accumulator_left_in_flight_across_trips_is_waited_for_at_the_next_trip():
    # pingpong_overlap.kir's consumers end a trip with `wgmma.wait(1)`: p v stays in flight
    # into the next trip, whose `wgmma.wait(0)` must reach gluon (it was dropped as "no wgmma
    # in flight", and ptxas serialized every wgmma to keep the accumulator's reads safe)
    path = ROOT / "benchmarks" / "tasks" / "causal_attention" / "pingpong_overlap.kir"
    src = lower(parse(path.read_text()), "gluon", params={"BN": 64, "ST": 3}).source
    body = src[src.index("for j in range(0, nb):", src.index("def causal_attention_pingpong_overlap_mma")) :]
    body = body[: body.index("    acc = warpgroup_mma_wait(0, deps=(acc,))\n    o_ptrs")]
    wait = body.index("acc = warpgroup_mma_wait(0, deps=(acc,))")
    assert wait < body.index("acc * gl.expand_dims"), body
    assert "no wgmma in flight" not in body
    assert "s, acc = warpgroup_mma_wait(1, deps=(s, acc,))" in body


def test_a_launch_out_of_shared_memory_is_a_located_error():
    """Gluon compiles at the first launch, where the GPU's limit applies (the compiler's layout
    scratch comes on top of the program's buffers): Triton's OutOfResources becomes
    `lower.shared-memory` at the stage parameter, as `kir compile` reports it."""
    from triton.runtime.errors import OutOfResources

    from lowering.targets.gluon.runtime import GluonLaunch

    program = parse(GEMM_TEXT, "gemm.kir")
    lowered = lower(program, "gluon", {})

    class Kernel:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise OutOfResources(245920, 232448, "shared memory")

            return launch

    launch = GluonLaunch(lowered, Kernel(), [], (1,), {})
    with pytest.raises(KirError) as err:
        launch()
    (d,) = err.value.diagnostics
    assert d.rule == "lower.shared-memory" and "245920" in d.message and "232448" in d.message
    stage = next(p for p in ("S", "ST", "STAGES", "NSTAGES") if p in program.param_spans)
    assert d.span == program.param_spans[stage]


ROWS_TEXT = """\
# A two-row shared buffer, one row written and read back through 1-D views.
kernel rows<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  buf = smem(f32[2, 1024])
  n0 = program_id(0) * BLOCK
  store(buf[1, 0 : BLOCK], load(x[n0 : n0 + BLOCK]))
  barrier()
  store(y[n0 : n0 + BLOCK], load(buf[1, 0 : BLOCK]) * 2.0)
}
"""


def test_a_buffer_of_rows_gets_the_layout_of_one_row():
    """A 2-D buffer that loads and stores index by row is allocated with a 1-D layout: the
    2-D NVMMA layout it had made `buf.index(1).slice(0, 256, dim=0)` fail to compile."""
    lowered = lower(parse(ROWS_TEXT, file="rows.kir"), "gluon")
    assert "gl.allocate_shared_memory(gl.float32, [2, 1024], shared_layout)" in lowered.source
    report = compile_report(parse(ROWS_TEXT, file="rows.kir"))
    assert report.ok, report.log
    assert report.shared_bytes >= 8192
    # swizzled, the buffer keeps its 2-D layout, whose rows Gluon cannot view: a located refusal
    # at the first row access, not a compile error in the generated code
    swizzled = ROWS_TEXT.replace("smem(f32[2, 1024])", "smem(f32[2, 1024], swizzle = 128)")
    with pytest.raises(KirError) as err:
        lower(parse(swizzled, file="rows.kir"), "gluon")
    diags = err.value.diagnostics
    assert [(d.rule, d.span.line) for d in diags] == [("lower.unsupported", 8), ("lower.unsupported", 10)]
    assert "1-D view" in diags[0].message
