"""Accesses of different shapes do not share lane variables: a load of a [BM, BK] block before
a store of a [BM, BN] block must not narrow the store's lanes to BK (which hid the store's
overflow in dimension 1 until the lanes of one tag were named by their extent as well)."""

from __future__ import annotations

from tests.verifier.harness import describe, diagnose

GEMM_TILE = """\
kernel grouped<BM = 32, BN = 32, BK = 16, GM = 2>(
    a: global bf16[M, K],
    c: out global bf16[M, N],
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM * (N / BN)) warps(4)
{
  pid = program_id(0)
  width = GM * (N / BN)
  first = pid / width * GM
  height = minimum(M / BM - first, GM)
  m0 = (first + (pid % width) % height) * BM
  n0 = pid % width / height * BN
  at = load(a[m0 : m0 + BM, 0 : BK])
  n1 = n0 + SHIFT
  store(c[m0 : m0 + BM, n1 : n1 + BN], cast<bf16>(zeros(f32[BM, BN]) + cast<f32>(sum(at, axis = 1))[:, None]))
}
"""


def test_a_narrower_access_before_does_not_hide_a_wider_one_s_overflow():
    diags = diagnose(GEMM_TILE.replace("SHIFT", "1"), "grouped.kir")
    hits = [d for d in diags if d.rule == "bounds.global-access" and d.span and d.span.line == 16]
    assert hits and "dimension 1" in hits[0].message, describe(diags)
    assert hits[0].counterexample and max(hits[0].counterexample["lane"]) >= 16  # a lane the load lacks


def test_without_the_shift_the_program_is_clean():
    diags = diagnose(GEMM_TILE.replace("SHIFT", "0"), "grouped.kir")
    assert not [d for d in diags if d.rule.startswith("bounds.")], describe(diags)
