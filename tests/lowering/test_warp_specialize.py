"""WarpSpecializePass: the tile-level GEMM with `warp_specialize` becomes a TMA producer role and
wgmma consumer roles that verify cleanly for sm_90, round-trip, compute exactly what the input
computes under the interpreter (which detects races and deadlocks), and lower to Gluon and CUDA;
each refusal is a `lower.warp-specialize` warning on an unchanged program."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.dialect.explicit import SmemAllocOp, TmaLoadOp, WgmmaOp
from kir.dialect.tile import DotOp, LoadOp
from kir.parser import parse
from kir.program import same_ir, span_of
from lowering.entry import lower
from lowering.passes.warp_specialize import WarpSpecializePass
from lowering.report import find_tool
from tests.examples.references import BF16
from tests.lowering.helpers import assert_clean, run

HERE = Path(__file__).parent
TILE_GEMM = (HERE / "programs" / "gemm_ws_tile.kir").read_text()
EXAMPLES = HERE.parents[1] / "examples"


def gemm():
    return parse(TILE_GEMM, file="gemm_ws_tile.kir")


def gemm_inputs(m=256, n=256, k=256, seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((m, k)).astype(BF16), "b": rng.standard_normal((k, n)).astype(BF16)}


@pytest.mark.parametrize("consumers, stages", [(1, None), (2, None), (1, 1), (2, 2), (2, 5)])
def test_the_roles_verify_round_trip_and_compute_the_same(consumers, stages):
    original = gemm()
    result = WarpSpecializePass(stages=stages, consumers=consumers).apply(original)
    assert result.diagnostics == []
    again = assert_clean(result.program)
    inputs = gemm_inputs()  # 4 k-iterations: with S <= 3 the ring wraps around
    want = run(original, inputs)["c"]
    for program in (result.program, again):  # a race or a deadlock would raise
        np.testing.assert_array_equal(run(program, inputs)["c"], want)


def test_the_roles_have_the_shape_of_the_hopper_example():
    original = gemm()
    before = original.text()
    out = WarpSpecializePass(consumers=2).apply(original).program
    assert original.text() == before, "the pass changed its input"
    text = out.text()
    for line in (
        "target sm_90 grid(M / BM, N / BN) warpgroups(3)",
        "a_tile_ring = smem(bf16[3, BM, BK], swizzle = 128)",
        "full = mbarrier(3, count = 1)",
        "empty = mbarrier(3, count = 2)",
        "role load warpgroups(0) regs(40) {",
        "role mma warpgroups(1, 2) regs(232) {",
        "wait(empty[s], parity = (k / 3 + 1) % 2)",
        "expect(full[s], bytes = sizeof(a_tile_ring[s]) + sizeof(b_tile_ring[s]))",
        "tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], a_tile_ring[s], signal = full[s])",
        "r0 = role_rank() * (BM / 2)",
        "acc = zeros(f32[BM / 2, BN])",
        "wait(full[s], parity = (k / 3) % 2)",
        "acc = wgmma(a_tile_ring[s, r0 : r0 + BM / 2], b_tile_ring[s], acc)",
        "store(c[m0 + r0 : m0 + r0 + BM / 2, n0 : n0 + BN], cast<bf16>(acc))",
    ):
        assert line in text, line
    assert "warp_specialize" not in text
    # spans: the copies and rings point at the loads, the wgmma and its waits at the dot
    loads = {span_of(op) for op in original.kernel.walk() if isinstance(op, LoadOp)}
    [dot] = [span_of(op) for op in original.kernel.walk() if isinstance(op, DotOp)]
    copies = [op for op in out.kernel.walk() if isinstance(op, TmaLoadOp | SmemAllocOp)]
    assert len(copies) == 4 and all(span_of(op) in loads for op in copies)
    assert [span_of(op) for op in out.kernel.walk() if isinstance(op, WgmmaOp)] == [dot]
    assert all(span_of(op) is not None for op in out.kernel.walk())


@pytest.mark.parametrize(
    "edit, rule",
    [
        (("parity = (k / 3) % 2", "parity = (k / 3 + 1) % 2"), "interp.race"),  # reads before the data lands
        (("arrive(empty[s])", "arrive(full[s])"), "interp.deadlock"),  # the producer never gets a stage back
    ],
)
def test_a_broken_schedule_is_caught_by_the_interpreter(edit, rule):
    # the checks above could fail: a wrong parity or arrival is a race or a deadlock
    text = WarpSpecializePass().apply(gemm()).program.text()
    assert edit[0] in text
    with pytest.raises(KirError) as err:
        run(parse(text.replace(*edit)), gemm_inputs())
    assert rule in [d.rule for d in err.value.diagnostics]


def masked_gemm_bias_gelu():
    """examples/gemm_bias_gelu.kir (masked gathers through contiguous ranges, a fused epilogue)
    with warp_specialize, and the alignments that TMA needs."""
    text = (EXAMPLES / "gemm_bias_gelu.kir").read_text()
    for old, new in (
        ("pipeline(stages = 3)", "warp_specialize"),
        ("a: global bf16[M, K]", "a: global bf16[M, K] align(16)"),
        ("b: global bf16[K, N]", "b: global bf16[K, N] align(16)"),
        ("where K % BK == 0", "where K % BK == 0, N % 8 == 0"),
    ):
        assert old in text
        text = text.replace(old, new)
    return parse(text, file="gemm_bias_gelu.kir")


def test_masked_gathers_become_tma_boxes_whose_zero_fill_is_the_mask():
    original = masked_gemm_bias_gelu()
    result = WarpSpecializePass().apply(original)
    assert result.diagnostics == []
    assert_clean(result.program)
    text = result.program.text()
    producer = text[text.index("role load") : text.index("role mma")]
    assert "tma.load(a[" in producer and "mask" not in producer
    rng = np.random.default_rng(3)
    m, n, k = 100, 72, 96  # ragged rows and columns: the TMA reads zeros past M and N
    inputs = {
        "a": rng.standard_normal((m, k)).astype(BF16),
        "b": rng.standard_normal((k, n)).astype(BF16),
        "bias": rng.standard_normal(n).astype(BF16),
    }
    np.testing.assert_array_equal(run(result.program, inputs)["c"], run(original, inputs)["c"])


def test_a_pipeline_stage_count_on_the_loop_sets_the_ring():
    hinted = parse(TILE_GEMM.replace("warp_specialize {", "pipeline(stages = 4) warp_specialize {"))
    out = WarpSpecializePass().apply(hinted).program
    assert "smem(bf16[4, BM, BK], swizzle = 128)" in out.text()
    assert "pipeline" not in out.text()
    assert_clean(out)


@pytest.mark.parametrize("backend", ["gluon", "cuda"])
@pytest.mark.parametrize("consumers", [1, 2])
def test_the_roles_lower_to_gluon_and_cuda(backend, consumers):
    out = WarpSpecializePass(consumers=consumers).apply(gemm()).program
    lowered = lower(out, backend)
    assert lowered.source
    if backend == "gluon":
        assert "warp_specialize" in lowered.source and "warpgroup_mma(" in lowered.source
        assert len(lowered.options["partitions"]) == 1 + consumers
    else:
        assert "wgmma" in lowered.source


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
def test_the_roles_compile_with_nvcc():
    from lowering.compile import compile_program

    report = compile_program(WarpSpecializePass(consumers=2).apply(gemm()).program, "cuda", "sm_90a")
    assert report.ok, report.log
    assert report.instructions["wgmma"] and report.instructions["tma"]


# -- refusals: the program stays as it was, with one warning that says why ---------------------

GATHER = """\
kernel g<BM = 64, BN = 64, BK = 64>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    c: out global f32[M, N] align(16),
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = program_id(1) * BN + arange(0, BN)
  off = 0
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK warp_specialize {
    ks = KS
    at = load(a[rows[:, None], ks[None, :]]AMASK)
    bt = load(b[ks[:, None], cols[None, :]])
    acc = dot<f32>(at, bt, acc)
    off = off + BK
  }
  store(c[rows[:, None], cols[None, :]], acc)
}
"""


def gather(ks="k * BK + arange(0, BK)", amask=""):
    return GATHER.replace("KS", ks).replace("AMASK", amask)


def edit(*pairs):
    text = TILE_GEMM
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    return text


LOOP = "  for k in 0 .. K / BK warp_specialize {"
DOT = "    acc = dot<f32>(a_tile, b_tile, acc)"
REFUSED = {
    "target": (edit(("target sm_90", "target sm_80")), {}, "has no TMA and wgmma"),
    "explicit": (
        edit(("  acc = zeros", "  buf = smem(f32[2, 16])\n  acc = zeros")),
        {},
        "already at the explicit level",
    ),
    "stages": (TILE_GEMM, {"stages": 0}, "not a static stage count"),
    "consumers": (TILE_GEMM, {"consumers": 0}, "0 consumer warpgroups"),
    "nested": (
        edit(
            (LOOP, "  for j in 0 .. 1 {\n" + LOOP), ("    acc = dot<f32>(a_tile, b_tile, acc)\n  }", DOT + "\n  }\n  }")
        ),
        {},
        "only loops at the top level",
    ),
    "step": (edit((LOOP, "  kk = BK / BK\n  for k in 0 .. K / BK step kk warp_specialize {")), {}, "positive constant"),
    "write": (edit((DOT, DOT + "\n    store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))")), {}, "writes memory"),
    "load under if": (
        edit((DOT, DOT + "\n    if k > 0 {\n      acc = acc + cast<f32>(load(a[m0, 0]))\n    }")),
        {},
        "under an `if`",
    ),
    "no dot": (edit((DOT, "    acc = acc + 1.0")), {}, "does 0 dots"),
    "two dots": (edit((DOT, DOT + "\n" + DOT)), {}, "does 2 dots"),
    "no accumulator": (edit((DOT, "    acc = acc + dot<f32>(a_tile, b_tile)")), {}, "has no accumulator"),
    "bf16 accumulator": (
        edit(
            ("acc = zeros(f32[BM, BN])", "acc = zeros(bf16[BM, BN])"),
            (DOT, DOT.replace("f32", "bf16")),
            ("cast<bf16>(acc)", "acc"),
        ),
        {},
        "accumulates in bf16",
    ),
    "f32 operands": (
        edit(("global bf16[M, K]", "global f32[M, K]"), ("global bf16[K, N]", "global f32[K, N]")),
        {},
        "multiplies f32 tiles",
    ),
    "operand not loaded": (edit((DOT, DOT.replace("(a_tile,", "(a_tile * bf16(2.0),"))), {}, "not a tile loaded"),
    "operand reused": (
        edit((DOT, DOT + "\n    acc = acc + cast<f32>(max(max(a_tile, axis = 1), axis = 0))")),
        {},
        "used by more than the dot",
    ),
    "extra load": (edit((DOT, DOT + "\n    acc = acc + cast<f32>(load(a[m0, k]))")), {}, "loads more than"),
    "other": (gather(amask=", mask = rows[:, None] < M, other = 1.0"), {}, "`other`"),
    "strided gather": (gather(ks="k * BK + 2 * arange(0, BK)"), {}, "not a contiguous range"),
    "carried index": (gather(ks="off + arange(0, BK)"), {}, "carried value 'off'"),
    "mask": (gather(amask=", mask = rows[:, None] < M - 1"), {}, "not a bound that the TMA"),
    "block mask": (edit(("k * BK + BK])", "k * BK + BK], mask = m0 < M)")), {}, "block load is masked"),
    "write before": (
        edit(("  acc = zeros", "  store(c[m0 : m0 + BM, n0 : n0 + BN], zeros(bf16[BM, BN]))\n  acc = zeros")),
        {},
        "writes memory before the loop",
    ),
    "box from a tile": (
        edit(("m0 = program_id(0) * BM", "m0 = program_id(0) * BM + max(arange(0, 1), axis = 0)")),
        {},
        "moves into the consumer role",
    ),
    "verifier": (edit(("a: global bf16[M, K] align(16)", "a: global bf16[M, K]")), {}, "resources.tma-align"),
    "wgmma rows": (edit(("BM = 128", "BM = 64")), {"consumers": 2}, "resources.wgmma-shape"),
    "row split": (
        edit(("  store(c", "  m = max(max(acc, axis = 1), axis = 0)\n  store(c")),
        {"consumers": 2},
        "cannot be cut",
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refusals_leave_the_program_unchanged_with_a_warning(name):
    text, options, message = REFUSED[name]
    original = parse(text)
    result = WarpSpecializePass(**options).apply(original)
    assert same_ir(result.program, original)
    [d] = result.diagnostics
    assert (d.rule, d.severity) == ("lower.warp-specialize", "warning")
    assert message in d.message, d.message
    assert d.span is not None


def test_only_the_first_hinted_loop_is_specialized():
    text = edit(("  store(c", "  for k in 0 .. K / BK warp_specialize {\n    acc = acc + 1.0\n  }\n  store(c"))
    result = WarpSpecializePass().apply(parse(text))
    [d] = result.diagnostics
    second = [i for i, line in enumerate(text.splitlines(), 1) if line.endswith("warp_specialize {")][1]
    assert "one warp-specialized loop" in d.message and d.span.line == second
    assert result.program.text().count("warp_specialize") == 1
