"""A store refused for its value's shape, where the value is a reduction over the wrong axis of a
2-D tile: `types.store-shape` at the reduction (the line to change), the store related, the
other axis in the hint; other shape mismatches stay at the store."""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from tests.verifier.harness import describe, diagnose

RULE = "types.store-shape"


def at(diags: list[Diagnostic], line: int) -> list[Diagnostic]:
    return [d for d in diags if d.rule == RULE and d.span is not None and d.span.line == line]


ROWNORM = """\
kernel rownorm<BM = 16, BN = 128>(x: global f32[M, N], out: out global f32[M])
  where M % BM == 0, N <= BN
  target sm_90 grid(M / BM) warps(4)
{{
  rows = program_id(0) * BM + arange(0, BM)
  cols = arange(0, BN)
  t = load(x[rows[:, None], cols[None, :]], mask = cols[None, :] < N)
  ss = sum(t * t, axis = {axis})
  store(out[rows], sqrt(ss * 2.0))
}}
"""


def test_a_sum_over_the_wrong_axis_is_blamed_at_the_sum():
    bad = diagnose(ROWNORM.format(axis=0))
    hit = at(bad, 8)
    assert hit and "axis = 1" in hit[0].hint and [r.span.line for r in hit[0].related] == [9], describe(bad)
    assert not diagnose(ROWNORM.format(axis=1))  # the hint, applied


def test_a_mismatch_without_a_reduction_stays_at_the_store():
    text = ROWNORM.format(axis=1).replace("store(out[rows], sqrt(ss * 2.0))", "store(out[rows], t)")
    assert at(diagnose(text), 9)
