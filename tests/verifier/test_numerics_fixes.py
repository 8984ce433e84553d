"""The numerics rules' hints are edits: applied to a corpus program, each gives its fixed twin
(comments and blank lines aside), and where no single fix is right, the next one that holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.diagnostics import apply_edits
from tests.verifier.harness import code, diagnose, fixed

HERE = Path(__file__).parent

TWINS = [
    ("corpus/learned/attention_scores_bf16_gfx942", "numerics.low-precision-acc", 11),
    ("corpus/learned/gemm_f16_acc_gfx90a", "numerics.low-precision-acc", 13),
    ("corpus/numerics/batch_offset_i32", "numerics.int-overflow", 9),
    ("corpus/numerics/carried_bf16_sum", "numerics.low-precision-acc", 10),
    ("corpus/numerics/cumsum_bf16", "numerics.low-precision-reduce", 10),
    ("corpus/numerics/dot_f16_accumulator", "numerics.low-precision-acc", 12),
    ("corpus/numerics/scaled_scores_unshifted", "numerics.unshifted-exp", 10),
    ("corpus/numerics/softmax_reciprocal_unshifted", "numerics.unshifted-exp", 10),
    ("corpus/target/wgmma_bf16_accumulator", "numerics.low-precision-acc", 20),
    ("user_corpus/numerics/gemm_bf16_accumulator", "numerics.low-precision-acc", 17),
    ("user_corpus/numerics/logsumexp_no_shift", "numerics.unshifted-exp", 10),
    ("user_corpus/numerics/softmax_no_max", "numerics.unshifted-exp", 11),
]


@pytest.mark.parametrize(("name", "rule", "line"), TWINS, ids=[f"{n}:{r}" for n, r, _ in TWINS])
def test_the_edit_gives_the_fixed_twin(name, rule, line):
    after, _ = fixed(name, rule, line)
    assert code(after) == code((HERE / f"{name}.good.kir").read_text())


def test_a_divisor_that_can_be_zero_gets_the_least_bound_past_every_zero():
    after, hint = fixed("corpus/numerics/group_size_zero", "numerics.divide-by-zero", 6)
    assert "where N >= 4 target sm_90" in after and "`N >= 4`" in hint  # N / 4 is 0 up to N = 3


OVERFLOW = """\
kernel flatten<BLOCK = 256>(x: global f32[M, N], y: out global f32[M * N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  offs = row * N
  mask = cols < N
  store(y[offs + cols], load(x[row, cols], mask = mask), mask = mask & (offs < M * N))
}
"""


def test_an_overflowing_product_that_cannot_go_to_i64_bounds_the_shapes_instead():
    # `offs < M * N` compares with an i32: an i64 `offs` would be a type error there
    (diag,) = [d for d in diagnose(OVERFLOW, "o.kir") if d.rule == "numerics.int-overflow" and d.span.line == 7]
    assert "where N <= BLOCK, M * N < 2147483648\n" in apply_edits(OVERFLOW, diag.edits)
    assert diag.hint == "bound the shapes: add `M * N < 2147483648` to the `where` clause"


def test_a_reduction_cast_to_f32_at_once_drops_that_cast_and_widens_the_terms():
    name = "user_corpus/numerics/layernorm_f16_onepass_variance"
    after, _ = fixed(name, "numerics.low-precision-reduce", 18)
    assert "  var = sum(cast<f32>(v) * cast<f32>(v), axis = 0) / n - mean * mean" in after
