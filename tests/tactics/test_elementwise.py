"""The elementwise, reduction and memory-layout tactics' precondition pairs: a program each
applies to (and what it writes), and a near twin it refuses with its rule id at the line it
looked at; and the rewrites checked on the interpreter where the property test's corpus says
little (the corpus has few programs of each shape these tactics look for)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tactics
from kir.diagnostics import KirError
from kir.interp import run
from tests.tactics.test_preconditions import check_pair, line_of, program, twin

STAGE = """
kernel stage<BM = 64, BK = 32>(x: global bf16[M, K] align(16), y: out global bf16[M, K] align(16))
  where M % BM == 0, K % BK == 0
  target sm_90 grid(M / BM, K / BK) warps(4)
{
  buf = smem(bf16[BM, BK])
  m0 = program_id(0) * BM
  k0 = program_id(1) * BK
  store(buf[0 : BM], load(x[m0 : m0 + BM, k0 : k0 + BK]))
  barrier()
  store(y[m0 : m0 + BM, k0 : k0 + BK], load(buf[0 : BM]))
}
"""

ROW = """
kernel row<BLOCK = 256>(x: global f32[M, N], w: global f32[N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask, other = -inf)
  d = where(mask, v - max(v, axis = 0), 0.0)
  store(y[row, cols], d * load(w[cols], mask = mask), mask = mask)
}
"""

GATE = """
kernel gate<BLOCK = 128>(a: global f32[M, N], b: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  av = load(a[row, cols], mask = mask)
  store(y[row, cols], av * sigmoid(av) * load(b[row, cols], mask = mask), mask = mask)
}
"""

NORM = """
kernel norm<BLOCK = 128>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask)
  mean = sum(v, axis = 0) / cast<f32>(N)
  d = where(mask, v - mean, 0.0)
  store(y[row, cols], d * rsqrt(sum(d * d, axis = 0) / cast<f32>(N) + 1e-05), mask = mask)
}
"""

# tactic: (the program it applies to, its parameters, a fragment of the result; the twin, the
# rule it is refused with, a fragment of the line the reason points at)
PAIRS = {
    "smem-layout": (
        STAGE, {"swizzle": 64}, "smem(bf16[BM, BK], swizzle = 64)",
        twin(STAGE, "BK = 32>", "BK = 8>"), "tactic.smem-layout.no-choice", "buf = smem",
    ),
    "specialize-where": (
        ROW, {"symbol": "N", "by": "BLOCK"}, "  v = load(x[row, 0 : BLOCK])\n  d = v - max(v, axis = 0)\n",
        twin(ROW, "mask = cols < N", "mask = cols < 100"), "tactic.specialize-where.no-mask", "  v = load(",
    ),
    "split-row": (
        GATE, {}, "grid(cdiv(N, BLOCK), M) warps(4)\n{\n  row = program_id(1)\n  cols = program_id(0) * BLOCK + arange(0, BLOCK)",
        twin(GATE, "av * sigmoid(av)", "av * max(av, axis = 0)"), "tactic.split-row.mixes", "store(y",
    ),
    "one-pass": (
        NORM, {}, "rsqrt((sum(v * v, axis = 0) - mean * row_sum) / cast<f32>(N) + 1e-05)",
        twin(NORM, "v = load(x[row, cols], mask = mask)", "v = load(x[row, cols], mask = mask, other = 1.0)"),
        "tactic.one-pass.no-variance", "mean = sum(v",
    ),
    "align": (
        GATE, {"arg": "b"}, "b: global f32[M, N] align(16)",
        GATE.replace("global f32[M, N]", "global f32[M, N] align(16)"), "tactic.align.aligned", "kernel gate",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_applies_to_one_and_refuses_its_twin(name):
    check_pair(name, PAIRS[name])


def same_on(before, after, inputs: dict[str, np.ndarray]) -> None:
    """Both programs give bitwise the same outputs on `inputs`."""
    want = run(before, {k: v.copy() for k, v in inputs.items()})
    got = run(after, {k: v.copy() for k, v in inputs.items()})
    assert set(got) == set(want)
    for name in want:
        assert np.array_equal(got[name], want[name], equal_nan=True), name


def test_smem_layout_refuses_a_swizzle_wider_than_the_rows_and_other_targets():
    stage = program(STAGE)  # rows of 32 bf16: 64 bytes
    with pytest.raises(KirError) as err:
        tactics.get("smem-layout").apply(stage, swizzle=128)
    (d,) = err.value.diagnostics
    assert d.rule == "tactic.smem-layout.width" and d.span.line == line_of(STAGE, "buf = smem") and "64" in d.hint
    assert tactics.get("smem-layout").domains(stage) == {"buffer": (0,), "swizzle": (0, 32, 64)}
    reasons = tactics.get("smem-layout").precondition(stage, "gfx942")
    assert [r.rule for r in reasons] == ["tactic.smem-layout.target"]
    swizzled = tactics.get("smem-layout").apply(stage, swizzle=32)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    inputs = {"x": x.astype(ml_dtypes.bfloat16), "y": np.zeros((128, 64), ml_dtypes.bfloat16)}
    same_on(stage, swizzled, inputs)


def test_specialize_where_keeps_the_masks_it_cannot_prove_and_the_results():
    block = twin(ROW, "where N <= BLOCK", "where N <= 2 * BLOCK")  # N == BLOCK no longer follows
    with pytest.raises(KirError) as err:
        tactics.get("specialize-where").apply(program(block), symbol="M", by="BLOCK")
    (d,) = err.value.diagnostics
    assert d.rule == "tactic.specialize-where.nothing" and d.span.line == line_of(block, "where")
    with pytest.raises(KirError) as err:
        tactics.get("specialize-where").apply(program(ROW), symbol="N", by="BLOK")
    assert [d.rule for d in err.value.diagnostics] == ["tactic.specialize-where.by"]
    assert "'BLOCK'" in err.value.diagnostics[0].hint
    offsets = """
kernel scale<BLOCK = 64>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  store(y[offs], load(x[offs], mask = mask) * 2.0, mask = mask)
}
"""
    before = program(offsets)
    after = tactics.get("specialize-where").apply(before, symbol="N", by="BLOCK")
    text = after.text()
    assert "where N % BLOCK == 0" in text and "mask" not in text, text
    assert "store(y[offs : offs + BLOCK], load(x[offs : offs + BLOCK]) * 2.0)" in text, text
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    same_on(before, after, {"x": x, "y": np.zeros(256, np.float32)})
    # a clause the others imply is not written twice
    fixed = twin(offsets, "  target", "  where N == 4 * BLOCK\n  target")
    assert "N % BLOCK" not in tactics.get("specialize-where").apply(program(fixed), symbol="N", by="BLOCK").text()


def test_split_row_computes_each_column_block_as_the_row_did():
    before = program(GATE)
    split = tactics.get("split-row").apply(before)
    smaller = tactics.get("retile").apply(split, param="BLOCK", value=32)  # 3 blocks a row, the last partial
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((5, 70)).astype(np.float32) for _ in range(2))
    same_on(before, smaller, {"a": a, "b": b, "y": np.zeros((5, 70), np.float32)})
    unmasked = twin(
        GATE,
        "store(y[row, cols], av * sigmoid(av) * load(b[row, cols], mask = mask), mask = mask)",
        "store(y[row, cols], av * sigmoid(av) * load(b[row, cols], mask = mask))",
    )
    reasons = tactics.get("split-row").precondition(program(unmasked))
    assert [r.rule for r in reasons] == ["tactic.split-row.unmasked"] and reasons[0].span.line == line_of(
        unmasked, "store(y"
    )


def test_one_pass_variance_is_within_tolerance_of_the_centred_one():
    before = program(NORM)
    after = tactics.get("one-pass").apply(before)
    assert tactics.get("one-pass").numerics == "reassociates"
    x = np.random.default_rng(3).standard_normal((6, 100)).astype(np.float32) + 0.5
    inputs = {"x": x, "y": np.zeros((6, 100), np.float32)}
    want = run(before, {k: v.copy() for k, v in inputs.items()})["y"]
    got = run(after, {k: v.copy() for k, v in inputs.items()})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_align_refuses_what_is_aligned_already_at_the_argument():
    aligned = twin(GATE, "b: global f32[M, N]", "b: global f32[M, N] align(64)")
    with pytest.raises(KirError) as err:
        tactics.get("align").apply(program(aligned), arg="b", bytes=32)
    (d,) = err.value.diagnostics
    assert d.rule == "tactic.align.aligned" and d.span.line == line_of(aligned, "align(64)")
    assert "align(128)" in tactics.get("align").apply(program(aligned), arg="b", bytes=128).text()


TILE = """
kernel tile<BM = 4, BN = 32>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BN
  target sm_90 grid(cdiv(M, BM)) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = arange(0, BN)
  rmask = rows < M
  cmask = cols < N
  v = load(x[rows[:, None], cols[None, :]], mask = rmask[:, None] & cmask[None, :], other = 1.0)
  v = where(rmask[:, None] & cmask[None, :], v, 0.0)
  mask = rmask[:, None] & cmask[None, :]
  store(y[rows[:, None], cols[None, :]], v * 2.0, mask = mask)
}
"""


def test_specialize_where_drops_the_terms_of_an_inline_conjunction_it_proves_and_keeps_the_rest():
    before = program(TILE)
    after = tactics.get("specialize-where").apply(before, symbol="N", by="BN")
    text = after.text()
    # N % BN == 0 with N <= BN is N == BN: the column mask is true on every lane, the row mask not
    assert "where N <= BN, N % BN == 0" in text, text
    assert "mask = rmask[:, None], other = 1.0)" in text, text
    assert "v = where(rmask[:, None], v, 0.0)" in text, text
    # a named conjunction is one term (it may guard accesses where the proof does not hold): kept
    assert "mask = rmask[:, None] & cmask[None, :]" in text and "v * 2.0, mask = mask)" in text, text
    x = np.random.default_rng(4).standard_normal((10, 32)).astype(np.float32)  # a partial last block of rows
    same_on(before, after, {"x": x, "y": np.zeros((10, 32), np.float32)})


def test_specialize_where_drops_the_kmeans_seeds_dims_mask_where_d_is_bd():
    from kir.parser import parse_file
    from tests.tactics.corpus import SUITE

    seed = parse_file(SUITE / "kmeans_assign" / "seed.kir").with_params(BP=32, BC=16, BD=32)
    after = tactics.get("specialize-where").apply(seed, symbol="D", by="BD")
    text = after.text()
    assert "dmask" not in text and "dims" not in text, text
    assert "mask = rmask[:, None])" in text and "mask = cmask[:, None])" in text, text
    rng = np.random.default_rng(5)
    x, cent = rng.standard_normal((40, 32)).astype(np.float32), rng.standard_normal((24, 32)).astype(np.float32)
    same_on(seed, after, {"x": x, "cent": cent, "assign": np.zeros(40, np.int64)})
