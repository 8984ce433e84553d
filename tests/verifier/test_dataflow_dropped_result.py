"""A result computed from a stored value and then never used: reported at the store that writes
the value from before the computation (`dataflow.unused-value`), with the dropped result as a
related span, and the loads that only fed it not reported again."""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from tests.verifier.harness import describe, diagnose

RULE = "dataflow.unused-value"


def at(diags: list[Diagnostic], line: int) -> list[Diagnostic]:
    return [d for d in diags if d.rule == RULE and d.span is not None and d.span.line == line]


SOFTMAX = """\
kernel softmax<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{{
  row = program_id(0)
  cols = arange(0, BLOCK)
  v = load(x[row, cols], mask = cols < N, other = -inf)
  e = exp(v - max(v, axis = 0))
  p = e / sum(e, axis = 0)
  store(y[row, cols], {stored}, mask = cols < N)
}}
"""


def test_a_normalized_result_dropped_is_blamed_at_the_store():
    bad = diagnose(SOFTMAX.format(stored="e"))
    hit = at(bad, 10)
    assert hit and "`p`" in hit[0].message and "`e`" in hit[0].message, describe(bad)
    assert [r.span.line for r in hit[0].related] == [9]
    assert "store `p`" in hit[0].hint
    assert not at(diagnose(SOFTMAX.format(stored="p")), 10)  # the hint, applied


STAGED = """\
kernel scale_rows<BM = 32, BN = 64>(x: global f32[M, N], s: global f32[M], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_80 grid(M / BM, N / BN) warps(4)
{{
  buf = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  t = load(x[m0 : m0 + BM, n0 : n0 + BN])
  scaled = t * load(s[m0 : m0 + BM])[:, None]
  store(buf[0 : BM], {stored})
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
}}
"""


def test_a_scaled_tile_dropped_before_a_shared_store_is_blamed_at_the_store():
    bad = diagnose(STAGED.format(stored="t"))
    hit = at(bad, 10)
    assert hit and "`scaled`" in hit[0].message, describe(bad)
    assert not at(bad, 9)  # the scale's load only fed the dropped result: not reported again
    assert not [d for d in diagnose(STAGED.format(stored="scaled")) if d.rule == RULE]


def test_a_dead_value_that_no_store_could_have_written_is_not_blamed_on_a_store():
    text = SOFTMAX.format(stored="e").replace("  p = e / sum(e, axis = 0)\n", "  p = sum(e, axis = 0)\n")
    assert not at(diagnose(text), 10)  # a [1]-shaped sum is not what the [BLOCK] store meant
