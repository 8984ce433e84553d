"""Resources blame the cause: a size over a limit that a parameter's default sets is reported at
that parameter's declaration (the line to change), with the allocation or tile as a related
span and a value that fits; a literal `pipeline(stages = N)` is blamed at its loop; what no
single knob fixes stays at the allocation. Each case has a near twin that checks clean."""

from __future__ import annotations

from tests.verifier.harness import describe, diagnose


def _hits(text: str, rule_id: str):
    diags = diagnose(text)
    return diags, [d for d in diags if d.rule == rule_id]


def _clean(text: str) -> None:
    diags = diagnose(text)
    assert not [d for d in diags if d.severity in ("error", "warning")], describe(diags)


RING = """
kernel ring_sums<BM = 128, BK = 128, S = {stages}>(x: global f32[M, K], y: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{{
  buf = smem(f32[S, BM, BK])
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {{
    s = k % S
    store(buf[s], load(x[m0 : m0 + BM, k * BK : k * BK + BK]))
    barrier()
    acc = acc + sum(load(buf[s]), axis = 1)
    barrier()
  }}
  store(y[m0 : m0 + BM], acc)
}}
"""


def test_smem_sized_by_a_parameter_is_blamed_at_its_declaration():
    diags, hits = _hits(RING.format(stages=3), "resources.smem")
    assert len(hits) == 1 and hits[0].span.line == 2, describe(diags)
    d = hits[0]
    assert RING.splitlines()[1][d.span.col - 1 :].startswith("S = "), d.span
    assert "`S = 3`" in d.message and "S = 2 fits" in d.message
    assert any(r.span.line == 6 for r in d.related), d.related  # the allocation
    assert "S = 2" in d.hint
    _clean(RING.format(stages=2))


PIPELINED = """
kernel mm<BM = 128, BN = 128, BK = 64>(a: global bf16[M, K], b: global bf16[K, N], c: out global bf16[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_80 grid(M / BM, N / BN) warps(8)
{{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK pipeline(stages = {stages}) {{
    acc = dot<f32>(load(a[m0 : m0 + BM, k * BK : k * BK + BK]), load(b[k * BK : k * BK + BK, n0 : n0 + BN]), acc)
  }}
  store(c[m0 : m0 + BM, n0 : n0 + BN], cast<bf16>(acc))
}}
"""


def test_a_literal_stage_count_is_blamed_at_its_loop():
    diags, hits = _hits(PIPELINED.format(stages=6), "resources.smem")
    assert len(hits) == 1 and hits[0].span.line == 9, describe(diags)
    assert "stages = 5 fits" in hits[0].message
    _clean(PIPELINED.format(stages=5))


FIXED = """
kernel fixed(x: global f32[M, 4096], y: out global f32[M])
  where M % 4 == 0
  target gfx942 grid(M / 4) warps(4)
{{
  big = smem(f32[{rows}, 4096])
  m0 = program_id(0) * 4
  store(big[0 : 4], load(x[m0 : m0 + 4, 0 : 4096]))
  barrier()
  store(y[m0 : m0 + 4], sum(load(big[0 : 4]), axis = 1))
}}
"""


def test_a_size_no_parameter_sets_stays_at_the_allocation():
    diags, hits = _hits(FIXED.format(rows=8), "resources.smem")
    assert len(hits) == 1 and hits[0].span.line == 6, describe(diags)
    _clean(FIXED.format(rows=4))


BIG_TILE = """
kernel big_acc<BM = {bm}, BN = 256, BK = 32>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warps(4)
{{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {{
    acc = dot<f32>(load(a[m0 : m0 + BM, k * BK : k * BK + BK]), load(b[k * BK : k * BK + BK, n0 : n0 + BN]), acc)
  }}
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}}
"""


def test_registers_spilled_by_a_parameter_are_blamed_at_its_declaration():
    diags, hits = _hits(BIG_TILE.format(bm=256), "resources.registers")
    assert len(hits) == 1 and hits[0].span.line == 2, describe(diags)
    d = hits[0]
    assert d.message.startswith("`BM = 256`") or d.message.startswith("`BN = 256`"), d.message
    assert any(r.span.line == 8 for r in d.related), d.related  # the accumulator
    _clean(BIG_TILE.format(bm=64))


ROW = """
kernel row_scale<BLOCK = {block}>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target {target} grid(M) warps(4)
{{
  row = program_id(0)
  cols = arange(0, {extent})
  mask = cols < N
  store(y[row, cols], load(x[row, cols], mask = mask) * 2.0, mask = mask)
}}
"""


def test_a_tile_that_is_not_a_power_of_two_on_gfx942_blames_the_parameter():
    diags, hits = _hits(ROW.format(block=768, target="gfx942", extent="BLOCK"), "resources.tile-pow2")
    assert len(hits) == 1 and hits[0].span.line == 2, describe(diags)
    assert "BLOCK = 1024" in hits[0].hint
    assert any(r.span.line == 7 for r in hits[0].related), hits[0].related
    _clean(ROW.format(block=1024, target="gfx942", extent="BLOCK"))


def test_a_literal_extent_that_is_not_a_power_of_two_is_blamed_where_it_is_written():
    diags, hits = _hits(ROW.format(block=1024, target="gfx942", extent="1000"), "resources.tile-pow2")
    assert hits and hits[0].span.line == 7, describe(diags)
    assert "1024" in hits[0].hint


def test_targets_with_a_cpp_backend_take_any_tile_size():
    for target in ("sm_90", "sm_80", "gfx90a"):
        diags, hits = _hits(ROW.format(block=768, target=target, extent="BLOCK"), "resources.tile-pow2")
        assert not hits, describe(diags)
