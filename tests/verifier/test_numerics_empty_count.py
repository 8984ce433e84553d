"""A float division by a count of lanes of a data-dependent condition (a masked mean over a
padding mask): 0 / 0 for a row where no lane holds, `numerics.divide-by-zero` at the division;
the guarded forms (the hint, applied) and counts of index conditions are clean."""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from tests.verifier.harness import describe, diagnose

RULE = "numerics.divide-by-zero"


def at(diags: list[Diagnostic], line: int) -> list[Diagnostic]:
    return [d for d in diags if d.rule == RULE and d.span is not None and d.span.line == line]


MEAN = """\
kernel masked_mean<BLOCK = 1024>(x: global f32[M, N], w: global f32[M, N], y: out global f32[M])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{{
  row = program_id(0)
  cols = arange(0, BLOCK)
  keep = load(w[row, cols], mask = cols < N) > 0.0
  v = load(x[row, cols], mask = keep)
  n = sum(cast<f32>(keep), axis = 0)
  store(y[row], sum(v, axis = 0) / {divisor})
}}
"""


def test_a_mean_over_a_data_dependent_mask_divides_by_a_count_that_can_be_zero():
    bad = diagnose(MEAN.format(divisor="n"))
    hit = at(bad, 10)
    assert hit and hit[0].severity == "warning" and "`keep`" in hit[0].message, describe(bad)
    assert [r.span.line for r in hit[0].related] == [9]
    assert not at(diagnose(MEAN.format(divisor="maximum(n, 1.0)")), 10)  # the hint, applied


def test_a_count_of_lanes_inside_the_row_is_not_judged():
    text = MEAN.format(divisor="n").replace(
        "n = sum(cast<f32>(keep), axis = 0)", "n = sum(cast<f32>(cols < N), axis = 0)"
    )
    assert not at(diagnose(text), 10)


STAGED = """\
kernel pooled<BL = 128, BD = 64>(x: global f32[B, L, D], valid: global u8[B, L], y: out global f32[B, D])
  where L <= BL, D % BD == 0
  target mtia-sim grid(B, D / BD) warps(1)
{{
  buf = smem(f32[BL, BD])
  b = program_id(0)
  d0 = program_id(1) * BD
  t = arange(0, BL)
  keep = load(valid[b, t], mask = t < L) != 0
  store(buf[0 : BL], load(x[b, t[:, None], d0 + arange(0, BD)[None, :]], mask = keep[:, None] & t[:, None] < L))
  barrier()
  total = sum(load(buf[0 : BL]), axis = 0)
  count = sum(cast<f32>(keep), axis = 0)
  store(y[b, d0 : d0 + BD], {result})
}}
"""


def test_an_explicit_level_pooling_is_judged_alike():
    bad = diagnose(STAGED.format(result="total / count"))
    assert at(bad, 14), describe(bad)
    good = STAGED.format(result="where(count > 0.0, total / count, 0.0)")
    assert not at(diagnose(good), 14)
