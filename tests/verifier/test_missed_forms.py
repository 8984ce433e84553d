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


LSE = """\
kernel lse<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask, other = -inf)
%s
}
"""


def test_a_log_sum_exp_without_the_max_shift_is_flagged_at_the_exp():
    bad = check_program(parse(LSE % "  store(y[row], log(sum(exp(v), axis = 0)))", "l.kir"))
    hits = [d for d in bad if d.rule == "numerics.unshifted-exp"]
    assert [(d.span.line, d.span.col) for d in hits] == [(9, 25)] and "m + log(sum(exp(v - m)" in hits[0].hint
    good = LSE % "  m = max(v, axis = 0)\n  store(y[row], m + log(sum(exp(v - m), axis = 0)))"
    assert not [d for d in check_program(parse(good, "l.kir")) if d.rule == "numerics.unshifted-exp"]
