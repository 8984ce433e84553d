"""The cuda backend without a GPU: every example lowers (snapshots of the emitted kernels),
compiles with nvcc for sm_90a (the explicit GEMM's SASS holds HGMMA), generated lines map back
to their KIR ops, a compile error in emitted code is reported at the KIR op that produced the
failing line, and what the backend cannot express is refused with a located diagnostic.

Regenerate the snapshots with `KIR_UPDATE_SNAPSHOTS=1 pytest tests/lowering/test_cuda.py`.
Compiles are cached on disk by content hash (`$KIR_CACHE_DIR`, default `~/.cache/kir`); the
nvcc tests are skipped where nvcc is missing. Running the kernels needs a GPU:
`benchmarks/h200_cuda.py` does that."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kir.diagnostics import KirError
from kir.parser import parse, parse_file
from lowering.emit.cbase import CExprs
from lowering.entry import lower
from lowering.report import find_tool
from lowering.targets.cuda.compile import compile_lowered
from lowering.targets.cuda.emit import CUDA, CudaEmitter
from tests.lowering.helpers import TMA_STORE_TEXT, check_snapshot, kernel_part

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ALL = sorted(p.stem for p in EXAMPLES.glob("*.kir"))
SNAPSHOTS = Path(__file__).parent / "snapshots" / "cuda"
GEMM_LINES = (EXAMPLES / "gemm_hopper_ws.kir").read_text().splitlines()

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")

# Programs that reach what the examples do not.
PROGRAMS = {
    # one warpgroup, no roles: wgmma at the top level, the accumulator through a branch and
    # elementwise ops, stored to a swizzled shared buffer from the wgmma layout, a TMA store
    "gemm_tma_store": TMA_STORE_TEXT,
    # the explicit GEMM with a row maximum of each consumer's accumulator: a reduction and a
    # broadcast inside a role, through the warpgroup's own scratch area and named barrier
    "gemm_rowmax": """\
kernel gemm_rowmax<BM = 128, BN = 128, BK = 64, S = 2>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    c: out global bf16[M, N] align(16),
    rmax: out global f32[M],
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(3)
{
  as = smem(bf16[S, BM, BK], swizzle = 128)
  bs = smem(bf16[S, BK, BN], swizzle = 128)
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 2)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN

  role load warpgroups(0) regs(40) {
    for k in 0 .. K / BK {
      s = k % S
      wait(empty[s], parity = (k / S + 1) % 2)
      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))
      tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])
      tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[s], signal = full[s])
    }
  }

  role mma warpgroups(1, 2) regs(232) {
    r0 = role_rank() * (BM / 2)
    acc = zeros(f32[BM / 2, BN])
    for k in 0 .. K / BK {
      s = k % S
      wait(full[s], parity = (k / S) % 2)
      acc = wgmma(as[s, r0 : r0 + BM / 2], bs[s], acc)
      wgmma.wait(0)
      arrive(empty[s])
    }
    m = max(acc, axis = 1)
    if program_id(1) == 0 {
      store(rmax[m0 + r0 : m0 + r0 + BM / 2], m)
    }
    store(c[m0 + r0 : m0 + r0 + BM / 2, n0 : n0 + BN], cast<bf16>(acc - m[:, None]))
  }
}
""",
    # roles of single warps, generic loads from a swizzled ring, arrivals after them
    "ws_rows": """\
kernel ws_rows<BM = 64, BN = 64, S = 2>(x: global f32[M, N] align(16), y: out global f32[M, N] align(16))
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM) warps(5)
{
  xs = smem(f32[S, BM, BN], swizzle = 128)
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 4)
  m0 = program_id(0) * BM
  role load warps(0) {
    for j in 0 .. N / BN {
      s = j % S
      wait(empty[s], parity = (j / S + 1) % 2)
      expect(full[s], bytes = sizeof(xs[s]))
      tma.load(x[m0 : m0 + BM, j * BN : j * BN + BN], xs[s], signal = full[s])
    }
  }
  role compute warps(1, 2, 3, 4) {
    r0 = role_rank() * (BM / 4)
    for j in 0 .. N / BN {
      s = j % S
      wait(full[s], parity = (j / S) % 2)
      v = load(xs[s, r0 : r0 + BM / 4])
      arrive(empty[s])
      store(y[m0 + r0 : m0 + r0 + BM / 4, j * BN : j * BN + BN], where(v > 0.0, exp(v), v * 2.0 - 1.0))
    }
  }
}
""",
    # a row's inclusive scan, top-k and argmax
    "probe_scan": """\
kernel probe_scan<BLOCK = 256, K = 8>(
    x: global f32[M, N],
    cs: out global f32[M, N],
    tv: out global f32[M, K],
    ti: out global i32[M, K],
    am: out global i32[M],
)
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask, other = -inf)
  c = cumsum(where(mask, v, 0.0), axis = 0)
  store(cs[row, cols], c, mask = mask)
  vals, idx = topk(v, k = K)
  kk = arange(0, K)
  store(tv[row, kk], vals)
  store(ti[row, kk], idx)
  store(am[row], argmax(v, axis = 0))
}
""",
    # a histogram with atomics through gathered indices
    "probe_hist": """\
kernel probe_hist<BLOCK = 256, B = 16>(x: global i32[N], hist: out global i32[B], first: out global i32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  old = atomic_add(hist[v], full(i32[BLOCK], 1), mask = mask)
  store(first[offs], where(old >= 0, 1, 0), mask = mask)
}
""",
    # a dot with a transposed operand, and reductions along both axes in branches
    "probe_dot": """\
kernel probe_dot<BM = 32, BN = 16, BK = 32>(
    a: global f32[M, K],
    b: global f32[N, K],
    c: out global f32[M, N],
    rs: out global f32[M],
    cm: out global f32[N],
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = program_id(1) * BN + arange(0, BN)
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {
    ks = k * BK + arange(0, BK)
    at = load(a[rows[:, None], ks[None, :]])
    bt = load(b[cols[:, None], ks[None, :]])
    acc = dot<f32>(at, trans(bt), acc)
  }
  store(c[rows[:, None], cols[None, :]], acc)
  if program_id(1) == 0 {
    store(rs[rows], sum(acc, axis = 1))
  }
  if program_id(0) == 0 {
    store(cm[cols], max(acc, axis = 0))
  }
}
""",
    # TMA in and out of swizzled buffers that the threads also read and write
    "probe_tma": """\
kernel probe_tma<BM = 64, BN = 128>(x: global bf16[M, N] align(16), y: out global bf16[M, N] align(16))
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  xs = smem(bf16[BM, BN], swizzle = 128)
  ys = smem(bf16[BM, BN], swizzle = 128)
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  expect(bar[0], bytes = sizeof(xs[0 : BM]))
  tma.load(x[m0 : m0 + BM, n0 : n0 + BN], xs[0 : BM], signal = bar[0])
  wait(bar[0], parity = 0)
  v = load(xs[0 : BM, 0 : BN])
  store(ys[0 : BM, 0 : BN], v * 2.0 + 1.0)
  fence.async()
  barrier()
  tma.store(ys[0 : BM], y[m0 : m0 + BM, n0 : n0 + BN])
  tma.store_wait(0)
}
""",
    # cp.async double buffering (the language reference's example)
    "probe_cpasync": """\
kernel row_sums<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[0])
  cp.async.commit()
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {
    more = k + 1 < K / BK
    cp.async(x[m0 : m0 + BM, (k + 1) * BK : (k + 1) * BK + BK], buf[(k + 1) % 2], mask = more)
    cp.async.commit()
    cp.async.wait(1)
    barrier()
    acc = acc + sum(load(buf[k % 2]), axis = 1)
    barrier()
  }
  store(out[m0 : m0 + BM], acc)
}
""",
    # scans, top-k, arg-reductions, atomics, trans and dot at the tile level
    "tile_ops": """\
kernel tile_ops<BLOCK = 128, K = 4>(
    x: global f32[M, N],
    cs: out global f32[M, N],
    tv: out global f32[M, K],
    ti: out global i32[M, K],
    hist: out global i32[N],
    g: out global f32[M, 8],
)
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask, other = -inf)
  store(cs[row, cols], cumsum(where(mask, v, 0.0), axis = 0, reverse = 1), mask = mask)
  vals, idx = topk(v, k = K)
  kk = arange(0, K)
  store(tv[row, kk], vals)
  store(ti[row, kk], idx)
  old = atomic_add(hist[argmax(v, axis = 0)], 1)
  m = reshape(where(mask, v, 0.0), [16, 8])
  store(g[row, arange(0, 8)], sum(dot<f32>(trans(m), m), axis = 0))
}
""",
}


# The explicit GEMM's assertions describe BN = 128; the example's default is 256.
BN128 = {"BN": 128}


def example(name: str):
    return parse_file(EXAMPLES / f"{name}.kir")


def program(name: str):
    return parse(PROGRAMS[name], file=f"{name}.kir")


def generated_line(lowered, fragment: str) -> int:
    """The first line of the kernel (not of the helpers before it) holding `fragment`."""
    lines = lowered.source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('extern "C"'))
    return next(i + 1 for i, line in enumerate(lines) if i > start and fragment in line)


def kir_line(fragment: str, after: str = "") -> int:
    start = next(i for i, line in enumerate(GEMM_LINES) if after in line) if after else 0
    return next(i + 1 for i, line in enumerate(GEMM_LINES) if i >= start and fragment in line)


# ---- lowering ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_every_example_is_accepted_and_lowers(name):
    prog = example(name)
    assert CudaEmitter().accepts(prog) == []
    lowered = lower(prog, "cuda")
    assert lowered.backend == "cuda" and lowered.entry == prog.name
    assert lowered.shape_symbols == prog.kernel.shape_symbols
    assert f'extern "C" __global__ void __launch_bounds__({prog.kernel.threads}, 1) {prog.name}(' in lowered.source


@pytest.mark.parametrize("name", ALL)
def test_snapshot_example(name):
    check_snapshot(SNAPSHOTS / f"{name}.cu", kernel_part(lower(example(name), "cuda").source))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_snapshot_program(name):
    check_snapshot(SNAPSHOTS / f"{name}.cu", kernel_part(lower(program(name), "cuda").source))


def test_snapshot_gemm_bn128_and_helpers():
    source = lower(example("gemm_hopper_ws"), "cuda", {"BN": 128, "S": 4}).source
    check_snapshot(SNAPSHOTS / "gemm_hopper_ws_bn128_s4.cu", kernel_part(source))
    check_snapshot(SNAPSHOTS / "helpers.cu", source[: source.index('extern "C"')])


def test_gemm_kernel_shape():
    lowered = lower(example("gemm_hopper_ws"), "cuda", BN128)
    src = lowered.source
    launch = lowered.options["launch"]
    assert launch.threads == 384 and lowered.num_warps == 12
    # 4 stages of 16 KiB (A) + 16 KiB (B), 8 mbarriers, and the 1024-byte alignment slack
    assert launch.smem_bytes == 4 * 32768 + 64 + 1024
    # A: one 128 x 64 box; B's 64 x 128 box is two 64-column (128-byte) chunks with swizzle 128
    assert [(t.arg, t.box, t.swizzle) for t in launch.tma] == [("a", [64, 128], 128), ("b", [64, 64], 128)]
    assert "kir_setmaxnreg_dec<40>();" in src and "kir_setmaxnreg_inc<232>();" in src
    assert src.count("kir_wgmma_m64n128k16_bf16(v_acc + 0,") == 4  # K = 64: four k16 steps
    assert "kir_wgmma_desc(kir_b + 2048, 8192, 1024, 1)" in src  # N-major B: LBO = chunk, SBO = 8 rows
    assert "kir_wgmma_desc(kir_a + 32, 16, 1024, 1)" in src  # K-major A: 32 bytes per k16 step
    assert "kir_wgmma_wait<0>();" in src and "kir_mbar_arrive(" in src
    assert "if ((kir_tid % 128) == 0) {  // the role holds no tile: one thread runs it" in src


def test_generated_lines_map_to_their_kir_ops():
    lowered = lower(example("gemm_hopper_ws"), "cuda", BN128)
    pairs = {
        "kir_mbar_expect(": "expect(full[s]",
        "kir_tma_load_2d(kir_smem_addr + (0 + (v_s) * 16384": "tma.load(a[",
        "kir_wgmma_m64n128k16_bf16(v_acc + 0, kir_wgmma_desc(kir_a + 96": "acc = wgmma(",
        "kir_wgmma_wait<0>();": "wgmma.wait(0)",
        "kir_mbar_arrive(": "arrive(empty[s])",
        "kir_pair<__nv_bfloat16>{": "store(c[",
        "kir_setmaxnreg_inc<232>();": "role mma",
    }
    for generated, kir in pairs.items():
        span = lowered.span_for_line(generated_line(lowered, generated))
        assert span is not None and span.line == kir_line(kir), generated


def test_literals_follow_the_interpreter():
    c = CExprs(CUDA)
    assert c.literal(0.1, "bf16") == "__ushort_as_bfloat16(0x3dcd)"  # rounded once, from f64
    assert c.literal(float("-inf"), "f32") == "kir_f32_bits(4286578688u)"
    assert c.literal(1.5, "f32") == "1.5f"
    assert c.literal(-(2**31), "i32") == "(-2147483647 - 1)"
    assert c.literal(300, "u8") == "((unsigned char)44)"  # wraps, as the interpreter's constants do
    assert c.binary("div", "a", "b", "i32") == "kir_sdiv<int>(a, b)"  # x / 0 and INT_MIN / -1
    assert c.binary("div", "a", "b", "i32", rhs_const=4) == "((int)(a / b))"
    assert c.cast("x", "f32", "i8") == "kir_f2i<signed char>((double)x, ((signed char)-128), ((signed char)127))"


# ---- refusals ----------------------------------------------------------------------------------


def refusal(prog, params=None):
    with pytest.raises(KirError) as err:
        lower(prog, "cuda", params)
    (d,) = err.value.diagnostics
    assert d.rule == "lower.unsupported"
    return d


def test_a_narrow_swizzled_buffer_is_refused_at_its_allocation():
    d = refusal(example("gemm_hopper_ws"), {"BK": 32})  # rows of 64 bytes with swizzle(128)
    assert d.span.line == kir_line("as = smem(")
    assert "multiple of 128 bytes" in d.message


def test_a_warpgroup_accumulator_of_32_rows_is_refused():
    d = refusal(example("gemm_hopper_ws"), {"BM": 64, "BK": 64})  # 32 rows per consumer
    assert "[64 k, 8 j]" in d.message


def test_a_tile_sized_by_a_shape_symbol_is_refused_at_the_op():
    prog = parse(
        "kernel k(x: global f32[N], y: out global f32[N]) target sm_90 grid(1) warps(4)\n"
        "{\n  i = arange(0, N)\n  store(y[i], load(x[i]))\n}\n"
    )
    d = refusal(prog)
    assert d.span.line == 3 and "shape symbol `N`" in d.message


def test_a_wgmma_in_a_role_over_warps_is_refused():
    text = (EXAMPLES / "gemm_hopper_ws.kir").read_text()
    text = text.replace("role mma warpgroups(1, 2) regs(232)", "role mma warps(4, 8)")
    d = refusal(parse(text, file="gemm_hopper_ws.kir"))
    # the first code that needs the accumulator's registers: the loop that carries it
    assert d.span.line == kir_line("for k in 0 .. K / BK {", after="role mma") and "warpgroup" in d.message


def test_one_byte_atomics_are_refused():
    prog = parse(
        "kernel k<B = 128>(x: global i32[B], h: out global u8[16]) target sm_90 grid(1) warps(4)\n"
        "{\n  old = atomic_add(h[load(x[0 : B])], u8(1))\n}\n"
    )
    assert "1-byte" in refusal(prog).message


def test_register_budgets_beyond_the_sm_are_refused():
    prog = parse(
        "kernel k(x: out global f32[1]) target sm_90 grid(1) warpgroups(3)\n"
        "{\n  role a warpgroups(0) regs(240) {\n    store(x[0], 1.0)\n  }\n"
        "  role b warpgroups(1, 2) regs(240) {\n  }\n}\n"
    )
    assert "65536" in refusal(prog).message


# ---- nvcc ----------------------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize("name", ALL)
def test_example_compiles_for_sm90a(name):
    report = compile_lowered(lower(example(name), "cuda"), sass=False)
    assert report.ok, report.log
    assert report.registers is not None and report.registers <= 255
    assert not [d for d in report.diagnostics if d.is_error]


@needs_nvcc
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_compiles_for_sm90a(name):
    report = compile_lowered(lower(program(name), "cuda"), sass=False)
    assert report.ok, report.log


@needs_nvcc
def test_gemm_sass_holds_hgmma_without_spills():
    report = compile_lowered(lower(example("gemm_hopper_ws"), "cuda", BN128))
    assert report.ok, report.log
    assert report.instructions["HGMMA"] and "HGMMA.64x128x16.F32.BF16" in report.sass
    assert report.instructions["wgmma"] and report.instructions["tma"] and report.instructions["UTMALDG"]
    assert "UTMALDG.2D" in report.sass and "SYNCS.PHASECHK" in report.sass  # TMA and mbarrier waits
    assert report.spills == 0 and report.local_bytes == 0
    assert report.registers == 168  # __launch_bounds__(384, 1); the roles then setmaxnreg 40 / 232
    assert report.shared_bytes == 4 * 32768 + 64 + 1024
    assert report.diagnostics == []


@needs_nvcc
def test_a_compile_error_points_at_the_kir_op():
    lowered = lower(example("gemm_hopper_ws"), "cuda", BN128)
    line = generated_line(lowered, "kir_mbar_expect(")
    report = compile_lowered(lowered, corrupt_line=line)
    assert not report.ok
    d = report.diagnostics[0]
    assert d.rule == "lower.compile" and d.severity == "error"
    assert d.span.line == kir_line("expect(full[s]")
    assert f"kernel.cu:{line}" in d.message and "kir_corrupted_by_test_hook" in d.message


# `wgmma.mma_async ... {d}, a-desc, b-desc, p, imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b`
WGMMA_IMMEDIATES = re.compile(r"wgmma\.mma_async\S* \{[^}]*\}, %rd\d+, %rd\d+, p, (\d), (\d), (\d), (\d);")


def test_trans_b_is_the_k_major_descriptor_of_a():
    """`trans(ks[st])` is stored [N, K]: B is addressed and described as A is (K steps of 32
    bytes along the row, leading byte offset 16, stride 8 rows of 128 bytes), imm-trans-b 0."""
    lowered = lower(example("attention_scores_hopper"), "cuda")
    src = lowered.source
    assert "p, 1, 1, 0, 0;" in src and "p, 1, 1, 0, 1;" not in src
    for kb in (0, 32, 64, 96):
        assert f"kir_wgmma_desc(kir_a + {kb}, 16, 1024, 1), kir_wgmma_desc(kir_b + {kb}, 16, 1024, 1)" in src
    assert "kir_wgmma_m64n64k16_bf16_ta0_tb0(" in src


@needs_nvcc
def test_attention_scores_compile_with_k_major_b():
    report = compile_lowered(lower(example("attention_scores_hopper"), "cuda"))
    assert report.ok, report.log
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in report.ptx
    assert set(WGMMA_IMMEDIATES.findall(report.ptx)) == {("1", "1", "0", "0")}
    hgmma = [line for line in report.sass.splitlines() if "HGMMA" in line]
    assert hgmma and not any(".tnsp" in line for line in hgmma)  # the GEMM's N-major B is `.tnspB`
    assert report.spills == 0 and report.diagnostics == []


@needs_nvcc
def test_trans_a_is_the_m_major_a():
    """`trans(qs[...])` stored [K, M]: A is described as an N-major B is (K rows 128 bytes
    apart, the chunk as leading byte offset), imm-trans-a 1."""
    from tests.kir.test_wgmma_trans import BOTH

    lowered = lower(parse(BOTH, file="both.kir"), "cuda")
    assert "kir_wgmma_desc(kir_a + 2048, 8192, 1024, 1)" in lowered.source  # K rows 16 .. 31
    report = compile_lowered(lowered)
    assert report.ok, report.log
    assert set(WGMMA_IMMEDIATES.findall(report.ptx)) == {("1", "1", "1", "0")}
    assert all(".tnspA" in line for line in report.sass.splitlines() if "HGMMA" in line)


@needs_nvcc
def test_the_launcher_builds():
    from lowering.targets.cuda.runtime import build, launcher_source

    lowered = lower(example("gemm_hopper_ws"), "cuda", BN128)
    text = launcher_source(lowered)
    assert "cudaGetDriverEntryPointByVersion" in text and "CU_TENSOR_MAP_SWIZZLE_128B" in text
    assert "const cuuint32_t box[2] = {64, 64};" in text  # B's box, one 128-byte chunk wide
    kernel = build(lowered)
    assert Path(kernel.path).exists()


@needs_nvcc
def test_a_launcher_library_cut_short_is_built_again(monkeypatch, tmp_path):
    """A `kernel.so` left truncated on disk (a killed writer, a full disk) is not loaded: the
    checksum written after it no longer matches, so the next build compiles it again."""
    from lowering.targets.cuda import runtime as runtime_cuda

    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(runtime_cuda, "_BUILT", {})
    lowered = lower(example("vector_add"), "cuda")
    lib = Path(runtime_cuda.build(lowered).path)
    whole = lib.read_bytes()
    lib.write_bytes(whole[: len(whole) // 3])
    monkeypatch.setattr(runtime_cuda, "_BUILT", {})
    again = Path(runtime_cuda.build(lowered).path).read_bytes()
    # nvcc's libraries differ from build to build (temporary names), not in size
    assert len(again) == len(whole) and again != whole[: len(whole) // 3]


def test_a_bug_of_the_backend_is_an_internal_diagnostic(monkeypatch):
    from lowering.targets.cuda import emit as cuda

    def broken(self, op):
        raise ValueError("planted")

    monkeypatch.setattr(cuda.CudaGen, "op_wait", broken)
    with pytest.raises(KirError) as err:
        lower(example("gemm_hopper_ws"), "cuda", BN128)
    (d,) = err.value.diagnostics
    assert d.rule == "internal.lower" and "planted" in d.message


@needs_nvcc
def test_explicit_attention_compiles_and_its_big_tiles_do_not_fit():
    # causal attention's warp-specialized program: the second wgmma's accumulator is declared
    # later in the loop body than the first wgmma.wait, which must not name it
    root = Path(__file__).resolve().parents[2]
    program = parse_file(str(root / "benchmarks/tasks/causal_attention/ws.kir"))
    report = compile_lowered(lower(program, "cuda", {"BN": 64}))
    assert report.ok, [d.message for d in report.diagnostics]
    assert report.instructions["HGMMA"] and report.spills == 0
    # at BN = 128 the program's 192 KB of buffers and the backend's scratch exceed a block's 227 KB
    big = compile_lowered(lower(program, "cuda", {"BN": 128}))
    assert not big.ok
    (d,) = big.diagnostics
    kernel_line = 1 + program.source.split("\n").index(
        next(ln for ln in program.source.split("\n") if ln.startswith("kernel "))
    )
    assert d.rule == "lower.shared-memory" and "232448" in d.message and d.span.line == kernel_line  # at ST


def test_a_kernel_beyond_shared_memory_is_refused_before_it_is_built():
    """The ping-pong attention at BN = 128 fits in a block through Gluon, but the CUDA backend
    adds 65 KB of exchange space for its row reductions: building it for a launch is a located
    `lower.shared-memory` error that tells the two apart, not a failed cudaFuncSetAttribute."""
    from lowering.targets.cuda.runtime import build

    program = parse_file(ROOT / "benchmarks/tasks/causal_attention/pingpong.kir")
    lowered = lower(program, "cuda", {"BM": 128, "BN": 128, "HD": 128, "ST": 2})
    with pytest.raises(KirError) as err:
        build(lowered)
    (d,) = err.value.diagnostics
    assert d.rule == "lower.shared-memory" and d.span.line == program.param_spans["ST"].line
    assert "needs 263264 bytes" in d.message and "the program's buffers 196704" in d.message
    assert "exchange space" in d.message and "232448" in d.message
    smaller = lower(program, "cuda", {"BM": 128, "BN": 64, "HD": 128, "ST": 2})
    assert smaller.options["smem_bytes"] <= 232448
