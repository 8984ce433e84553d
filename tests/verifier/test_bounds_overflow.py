"""`bounds.index-overflow`: an index whose i32 computation wraps before it reaches the access,
blamed at the step that wraps with the shapes that make it wrap; the same computation in i64
(the hint, applied) and flat offsets that cannot wrap are clean."""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from tests.verifier.harness import describe, diagnose

RULE = "bounds.index-overflow"


def at(diags: list[Diagnostic], line: int) -> list[Diagnostic]:
    return [d for d in diags if d.rule == RULE and d.span is not None and d.span.line == line]


def errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.is_error]


FLAT_ROWS = """\
kernel rows_scale<BLOCK = 256>(x: global f32[M, N], s: global f32[M], y: out global f32[M, N])
  where N <= BLOCK
  target sm_80 grid(M) warps(4)
{{
  row = program_id(0)
  cols = arange(0, BLOCK)
  base = {base}
  flat = base + cast<i64>(cols)
  v = load(x[flat / cast<i64>(N), flat % cast<i64>(N)], mask = cols < N)
  store(y[row, cols], v * load(s[row]), mask = cols < N)
}}
"""


def test_a_flat_offset_cast_after_the_i32_product_is_blamed_at_the_product():
    bad = diagnose(FLAT_ROWS.format(base="cast<i64>(row * N)"))
    hit = at(bad, 7)
    assert len(hit) == 1 and hit[0].is_error, describe(bad)
    cex = hit[0].counterexample
    assert cex is not None and cex["M"] * cex["N"] > 2**31 and cex["value"] > 2**31 - 1
    assert [r.span.line for r in hit[0].related] == [9]
    assert "cast<i64>(row) * cast<i64>(N)" in hit[0].hint
    # the hint, applied
    assert not errors(diagnose(FLAT_ROWS.format(base="cast<i64>(row) * cast<i64>(N)")))


STAGED = """\
kernel staged_copy<BLOCK = 512>(x: global f32[M, N], y: out global f32[M, N])
  target sm_90 grid(cdiv(M * N, BLOCK)) warps(4)
{{
  buf = smem(f32[BLOCK])
  start = {start}
  offs = start + cast<i64>(arange(0, BLOCK))
  n = cast<i64>(N)
  mask = offs < cast<i64>(M) * n
  store(buf[0 : BLOCK], load(x[offs / n, offs % n], mask = mask))
  barrier()
  store(y[offs / n, offs % n], load(buf[0 : BLOCK]), mask = mask)
}}
"""


def test_an_explicit_staging_copy_whose_start_wraps_is_blamed_at_the_start():
    bad = diagnose(STAGED.format(start="cast<i64>(program_id(0) * BLOCK)"))
    hit = at(bad, 5)
    assert hit and [r.span.line for r in hit[0].related] == [9, 11], describe(bad)
    assert not errors(diagnose(STAGED.format(start="cast<i64>(program_id(0)) * cast<i64>(BLOCK)")))


VECTOR_ADD = """\
kernel vector_add<BLOCK = 1024>(x: global f32[N], y: global f32[N], z: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  store(z[offs], load(x[offs], mask = mask) + load(y[offs], mask = mask), mask = mask)
}
"""


def test_a_flat_offset_over_one_dimension_cannot_wrap():
    # N fits in i32, and a power-of-two block count times the block stays within 2^31
    assert not at(diagnose(VECTOR_ADD), 4)


def test_a_masked_off_lane_past_the_end_does_not_count():
    text = VECTOR_ADD.replace("BLOCK = 1024", "BLOCK = 1000")
    assert not at(diagnose(text), 4)  # lanes past N are masked off (the mask, evaluated exactly)


BACK_IN_RANGE = """\
kernel upsample<BLOCK = 256>(x: global f32[NB, S0], y: out global f32[T])
  where T == NB * (S0 * 2 - 1)
  target sm_90 grid(cdiv(T, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < T
  od = S0 * 2 - 1
  o = offs % od
  store(y[offs], load(x[offs / od, o / 2], mask = mask & o % 2 == 0), mask = mask)
}
"""


def test_a_product_that_wraps_and_comes_back_in_range_is_exact():
    # S0 * 2 is 2^31 for S0 = 2^30, and S0 * 2 - 1 is back in range: i32 is exact modulo 2^32
    assert not at(diagnose(BACK_IN_RANGE), 7)
