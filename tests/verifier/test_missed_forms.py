"""Forms the verifier used to miss or misname (issue 25), each a bad program and its fixed twin."""

from __future__ import annotations

from kir.parser import parse
from verifier.check import check_program

FP8_DOT = """\
kernel g<BM = 64, BN = 64, BK = 64>(a: global f8e4m3[M, K], b: global f8e4m3[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target {target} grid(M / BM, N / BN) warps(4)
{{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {{
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>(at, bt, acc)
  }}
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}}
"""


def test_an_fp8_dot_on_a_target_without_fp8_is_an_error_at_the_dot():
    found = check_program(parse(FP8_DOT.format(target="sm_80"), "g.kir"))
    at_dot = [d for d in found if d.span is not None and d.span.line == 11]
    assert [(d.rule, d.severity) for d in at_dot] == [("target.dtype", "error")], found
    assert "dot of f8e4m3 operands" in at_dot[0].message
    assert not any("vector units" in d.message for d in found)  # not a legal dot on the wrong unit
    assert not [d for d in check_program(parse(FP8_DOT.format(target="sm_90"), "g.kir")) if d.is_error]
