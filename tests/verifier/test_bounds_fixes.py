"""The bounds rules write their hints as edits (`verifier.rules.bounds_fixes`): the access's own
mask, its broadcast over a block slice, the `if` that lets a row through, the condition computed
for a prefetch, a stage index taken from the ring, an index loaded from memory clamped, a TMA box
parameter rounded up. Each edit, applied, leaves a program without the error; where no edit
holds (the program id of an axis the grid lacks), the diagnostic has no hint."""

from __future__ import annotations

from kir.diagnostics import Diagnostic, apply_edits
from tests.verifier.harness import describe, diagnose


def found(text: str) -> list[Diagnostic]:
    return diagnose(text, "t.kir")


def at(diags: list[Diagnostic], rule: str, line: int) -> Diagnostic:
    hits = [d for d in diags if d.rule == rule and d.span is not None and d.span.line == line]
    assert len(hits) == 1, describe(diags)
    return hits[0]


def fixed(text: str, d: Diagnostic) -> str:
    assert d.edits, f"no edits: {d.hint}"
    return apply_edits(text, d.edits)


def errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.is_error]


TILE_COPY = """\
kernel copy<BM = 64, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where N == BN
  target sm_90 grid(cdiv(M, BM)) warps(4)
{
  m0 = program_id(0) * BM
  v = load(x[m0 : m0 + BM, 0 : BN])
  store(y[m0 : m0 + BM, 0 : BN], v)
}
"""


def test_a_block_slice_is_masked_by_its_lanes_laid_out_for_the_access():
    bad = found(TILE_COPY)
    load = at(bad, "bounds.global-access", 6)
    assert load.hint == "mask the load with `(m0 + arange(0, BM))[:, None] < M`", load.hint
    assert not errors(found(fixed(fixed(TILE_COPY, load), at(bad, "bounds.global-access", 7))))


ROWS = """\
kernel copy_rows<BLOCK = 128>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M + 1) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  if row <= M {
    v = load(x[row, cols], mask = cols < N)
    store(y[row, cols], v, mask = cols < N)
  }
}
"""


def test_a_row_let_through_by_its_if_is_fixed_at_the_if():
    bad = found(ROWS)
    for line in (8, 9):
        d = at(bad, "bounds.global-access", line)
        assert [e.text for e in d.edits] == ["row < M"] and d.edits[0].span.line == 7, d.edits
    assert not errors(found(fixed(ROWS, at(bad, "bounds.global-access", 8))))


PREFETCH = """\
kernel row_sums<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[0])
  cp.async.commit()
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {
    k1 = (k + 1) * BK<flag>
    cp.async(x[m0 : m0 + BM, k1 : k1 + BK], buf[(k + 1) % 2])
    cp.async.commit()
    cp.async.wait(1)
    barrier()
    acc = acc + sum(load(buf[k % 2]), axis = 1)
    barrier()
  }
  store(out[m0 : m0 + BM], acc)
}
"""


def test_a_prefetch_past_the_end_is_masked_with_its_condition_or_its_start():
    with_flag = PREFETCH.replace("<flag>", "\n    more = k + 1 < K / BK")
    d = at(found(with_flag), "bounds.global-access", 13)
    assert d.hint.startswith("mask the cp.async with `more`"), d.hint
    assert not errors(found(fixed(with_flag, d)))
    plain = PREFETCH.replace("<flag>", "")
    d = at(found(plain), "bounds.global-access", 12)
    assert d.hint == "mask the cp.async with `k1 < K`", d.hint  # the blocks are all in or all out
    assert not errors(found(fixed(plain, d)))


STAGES = """\
kernel stream<BM = 64, BK = 64, S = 2>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{
  buf = smem(f32[S, BM, BK])
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {
    s = k % S
    cp.async(x[m0 : m0 + BM, k * BK : k * BK + BK], buf[<stage>])
    cp.async.commit()
    cp.async.wait(0)
    barrier()
    acc = acc + sum(load(buf[s]), axis = 1)
    barrier()
  }
  store(out[m0 : m0 + BM], acc)
}
"""


def test_a_stage_index_past_the_ring_takes_the_ring_index_already_named():
    bad = STAGES.replace("<stage>", "k % (S + 1)")
    d = at(found(bad), "bounds.smem-access", 10)
    assert "`s`" in d.hint and [e.text for e in d.edits] == ["buf[s"], (d.hint, d.edits)
    assert not errors(found(fixed(bad, d)))


GATHER = """\
kernel gather<BLOCK = 128>(table: global f32[R], idx: global i32[N], out: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  rows = load(idx[offs], mask = mask)
  v = load(table[rows], mask = mask)
  store(out[offs], v, mask = mask)
}
"""


def test_an_index_loaded_from_memory_is_clamped_where_it_is_loaded():
    d = at(found(GATHER), "bounds.unproven", 7)
    assert [(e.span.line, e.text) for e in d.edits] == [(6, "minimum(maximum(load(idx[offs], mask = mask), 0), R - 1)")]
    assert not [x for x in found(fixed(GATHER, d)) if x.rule == "bounds.unproven"]


def test_an_index_of_a_grid_axis_that_does_not_exist_gets_no_hint():
    text = """\
kernel col_scale<BM = 32, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = program_id(2) * BN + arange(0, BN)
  v = load(x[rows[:, None], cols[None, :]])
  store(y[rows[:, None], cols[None, :]], v * 2.0)
}
"""
    d = at(found(text), "bounds.unproven", 7)
    assert d.hint == "" and not d.edits  # `types.axis` at line 6 says what to change


def test_a_tma_box_too_narrow_is_widened_at_its_parameter():
    text = """\
kernel column_pairs<BM = 64, BN = 2>(y: out global f32[M, N] align(16), x: global f32[M, N] align(16))
  where M % BM == 0, N % 4 == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{
  buf = smem(f32[1, BM, BN])
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  expect(bar[0], bytes = sizeof(buf[0]))
  tma.load(x[m0 : m0 + BM, n0 : n0 + BN], buf[0], signal = bar[0])
  wait(bar[0], parity = 0)
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0]))
}
"""
    bad = [d for d in found(text) if d.rule == "bounds.alignment"]
    assert len(bad) == 2 and all([e.text for e in d.edits] == ["BN = 4"] for d in bad), describe(bad)
    assert not errors(found(fixed(text, bad[0])))
