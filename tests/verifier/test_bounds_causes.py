"""An out-of-bounds access is blamed at what to change when that is not the access: the loop that
runs one trip too many, the `where` clause that lacks the divisibility the unmasked blocks rely
on, the offset that scales a role's rank past its share; the access keeps its own error, with
the cause as a related span. And `bounds.coverage`: a masked dimension that the grid, a loop or
a single tile never reaches to its end. Each form is a bad program and its fixed twin, at the
tile level and at the explicit level, with the near misses that must stay blamed at the access."""

from __future__ import annotations

from kir.diagnostics import Diagnostic, apply_edits
from tests.verifier.harness import describe, diagnose


def found(text: str) -> list[Diagnostic]:
    return diagnose(text, "t.kir")


def at(diags: list[Diagnostic], rule: str, line: int) -> list[Diagnostic]:
    return [d for d in diags if d.rule == rule and d.span is not None and d.span.line == line]


def errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.is_error]


# ---- the loop runs one trip too many ---------------------------------------------------------------

BLOCK_SUMS = """\
kernel block_sums<BM = 16, BK = 64>(x: global f32[M, K], y: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{{
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for k in 0 .. {trips} {{
    k0 = k * BK
    acc = acc + sum(load(x[m0 : m0 + BM, k0 : k0 + BK]), axis = 1)
  }}
  store(y[m0 : m0 + BM], acc)
}}
"""


def test_a_loop_one_trip_too_long_is_blamed_at_the_loop():
    bad = found(BLOCK_SUMS.format(trips="K / BK + 1"))
    loop = at(bad, "bounds.global-access", 7)
    assert len(loop) == 1 and "one trip too many" in loop[0].message, describe(bad)
    assert loop[0].counterexample and "K" in loop[0].counterexample
    assert [r.span.line for r in loop[0].related] == [9]
    access = at(bad, "bounds.global-access", 9)  # the access keeps its error, the loop related
    assert access and [r.span.line for r in access[0].related] == [7]
    assert not errors(found(BLOCK_SUMS.format(trips="K / BK")))


PREFETCH = """\
kernel row_sums<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[0])
  cp.async.commit()
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {{
    cp.async(x[m0 : m0 + BM, (k + 1) * BK : (k + 1) * BK + BK], buf[(k + 1) % 2]{mask})
    cp.async.commit()
    cp.async.wait(1)
    barrier()
    acc = acc + sum(load(buf[k % 2]), axis = 1)
    barrier()
  }}
  store(out[m0 : m0 + BM], acc)
}}
"""


def test_a_prefetch_past_the_end_is_blamed_at_the_access_not_the_loop():
    bad = found(PREFETCH.format(mask=""))
    assert at(bad, "bounds.global-access", 11), describe(bad)
    assert not at(bad, "bounds.global-access", 10)  # the look-ahead is what to mask
    assert not errors(found(PREFETCH.format(mask=", mask = k + 1 < K / BK")))


PARTIAL = """\
kernel chunks<BLOCK = 256>(x: global f32[M, N], y: out global f32[M])
  target sm_90 grid(M) warps(4)
{{
  row = program_id(0)
  acc = zeros(f32[BLOCK])
  for c in 0 .. (N + BLOCK - 1) / BLOCK {{
    cols = c * BLOCK + arange(0, BLOCK)
    acc = acc + load(x[row, cols]{mask})
  }}
  store(y[row], sum(acc, axis = 0))
}}
"""


def test_a_partial_last_tile_is_blamed_at_the_access_not_the_loop():
    bad = found(PARTIAL.format(mask=""))
    assert at(bad, "bounds.global-access", 8), describe(bad)
    assert not at(bad, "bounds.global-access", 6)  # every trip starts inside: a mask, not fewer trips
    assert not errors(found(PARTIAL.format(mask=", mask = cols < N")))


# ---- the `where` clause lacks a divisibility -------------------------------------------------------

CP_ASYNC_GEMV = """\
kernel gemv<BM = 64, BK = 128>(a: global bf16[M, K], x: global bf16[K], y: out global f32[M])
  where {where}
  target sm_80 grid(cdiv(M, BM)) warps(4)
{{
  buf = smem(bf16[BM, BK])
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for k in 0 .. K / BK {{
    cp.async(a[m0 : m0 + BM, k * BK : k * BK + BK], buf[0 : BM])
    cp.async.commit()
    cp.async.wait(0)
    barrier()
    acc = acc + sum(cast<f32>(load(buf[0 : BM])) * cast<f32>(load(x[k * BK : k * BK + BK]))[None, :], axis = 1)
    barrier()
  }}
  store(y[m0 : m0 + BM], acc)
}}
"""


def test_a_where_without_the_divisibility_of_one_shape_is_blamed():
    bad = found(CP_ASYNC_GEMV.format(where="K % BK == 0"))
    where = at(bad, "bounds.global-access", 2)
    assert where and "M % BM == 0" in where[0].message and "`K % BK == 0`" in where[0].message, describe(bad)
    assert "add `M % BM == 0`" in where[0].hint
    assert at(bad, "bounds.global-access", 9) and at(bad, "bounds.global-access", 16)
    # the hint, applied
    assert not errors(found(CP_ASYNC_GEMV.format(where="K % BK == 0, M % BM == 0")))


def test_a_kernel_without_divisibility_constraints_is_blamed_at_the_access():
    text = CP_ASYNC_GEMV.format(where="K >= 1")
    bad = found(text)
    assert at(bad, "bounds.global-access", 9) and not at(bad, "bounds.global-access", 2), describe(bad)


# ---- an offset that scales the role's rank past its share ------------------------------------------

HALVES = """\
kernel halves<BM = 128, BN = 64>(x: global f32[M, N], y: out global f32[M, N])
  where M % BM == 0, N % BN == 0
  target sm_80 grid(M / BM, N / BN) warps(8)
{{
  buf = smem(f32[BM, BN])
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  role loader warps(0, 1, 2, 3) {{
    r0 = role_rank() * {share}
    store(buf[r0 : r0 + BM / 4], load(x[m0 + r0 : m0 + r0 + BM / 4, n0 : n0 + BN]))
  }}
  barrier()
  store(y[m0 : m0 + BM, n0 : n0 + BN], load(buf[0 : BM]))
}}
"""


def test_a_rank_offset_past_the_share_is_blamed_at_the_offset():
    bad = found(HALVES.format(share="(BM / 2)"))
    offset = at(bad, "bounds.smem-access", 9)
    assert offset and "rank 0" in offset[0].message and offset[0].counterexample, describe(bad)
    assert at(bad, "bounds.smem-access", 10)
    assert not errors(found(HALVES.format(share="(BM / 4)")))


# ---- bounds.coverage ------------------------------------------------------------------------------

COLS = """\
kernel colscale<BM = 32, BN = 64>(x: global f32[M, N], s: global f32[N], y: out global f32[M, N])
  where M % BM == 0
  target sm_90 grid(M / BM, {grid}) warps(4)
{{
  rows = program_id(0) * BM + arange(0, BM)
  cols = program_id(1) * BN + arange(0, BN)
  cmask = cols < N
  w = load(s[cols], mask = cmask)
  v = load(x[rows[:, None], cols[None, :]], mask = cmask[None, :])
  store(y[rows[:, None], cols[None, :]], v * w[None, :], mask = cmask[None, :])
}}
"""


def test_a_grid_that_rounds_down_a_masked_dimension_is_blamed_at_the_grid():
    bad = found(COLS.format(grid="N / BN"))
    grid = at(bad, "bounds.coverage", 3)
    assert len(grid) == 1 and grid[0].counterexample and "N" in grid[0].counterexample, describe(bad)
    assert "cdiv(N, BN)" in grid[0].hint
    assert not errors(found(COLS.format(grid="cdiv(N, BN)")))


LSE = """\
kernel lse<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M]){where}
  target gfx942 grid(M) warps(4)
{{
  row = program_id(0)
  cols = arange(0, BLOCK)
  v = load(x[row, cols], mask = cols < N, other = -inf)
  m = max(v, axis = 0)
  store(y[row], m + log(sum(exp(v - m), axis = 0)))
}}
"""


def test_one_tile_over_a_dimension_that_may_be_longer_is_blamed_at_the_kernel():
    bad = found(LSE.format(where=""))
    head = at(bad, "bounds.coverage", 1)
    assert head and "`where N <= BLOCK`" in head[0].hint and head[0].counterexample == {"N": 1025}, describe(bad)
    assert not errors(found(LSE.format(where="\n  where N <= BLOCK")))


CHUNKS = """\
kernel row_max<BLOCK = 256>(x: global f32[M, N], y: out global f32[M])
  target sm_80 grid(M) warps(4)
{{
  row = program_id(0)
  best = full(f32[BLOCK], -inf)
  for c in 0 .. {trips} {{
    cols = c * BLOCK + arange(0, BLOCK)
    best = maximum(best, load(x[row, cols], mask = cols < N, other = -inf))
  }}
  store(y[row], max(best, axis = 0))
}}
"""


def test_a_loop_that_stops_a_tile_early_over_a_masked_dimension_is_blamed_at_the_loop():
    bad = found(CHUNKS.format(trips="N / BLOCK"))
    loop = at(bad, "bounds.coverage", 6)
    assert loop and "(N + 256 - 1) / 256" in loop[0].hint, describe(bad)
    assert not errors(found(CHUNKS.format(trips="(N + BLOCK - 1) / BLOCK")))


def test_a_mask_against_something_else_than_the_extent_is_not_judged():
    text = LSE.format(where="").replace("mask = cols < N", "mask = cols < N / 2")
    assert not at(found(text), "bounds.coverage", 1)


# ---- a mask taken from another access under a new name --------------------------------------------

SHIFTED = """\
kernel right_neighbour<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  in_mask = offs < N
  src = offs + 1
  {alias}
  right = load(x[src], mask = src_mask)
  store(y[offs], load(x[offs], mask = in_mask) - right, mask = in_mask)
}}
"""


def test_a_mask_reused_under_another_name_for_other_indices_is_blamed_at_the_alias():
    bad = found(SHIFTED.format(alias="src_mask = in_mask"))
    hit = at(bad, "bounds.global-access", 7)
    assert hit and "`src_mask` is `in_mask`" in hit[0].message and hit[0].counterexample, describe(bad)
    assert sorted(r.span.line for r in hit[0].related) == [5, 8]
    assert "`src_mask = src < N`" in hit[0].hint
    assert not errors(found(SHIFTED.format(alias="src_mask = src < N")))  # the hint, applied


def test_a_mask_reused_under_another_name_for_the_same_indices_is_clean():
    text = SHIFTED.format(alias="src_mask = in_mask").replace("load(x[src]", "load(x[offs]")
    assert not errors(found(text))


# ---- the hints as edits ----------------------------------------------------------------------------


def fixed(text: str, d: Diagnostic) -> str:
    assert d.edits, f"no edits: {d.hint}"
    return apply_edits(text, d.edits)


def test_the_edits_are_the_fixes():
    loop = BLOCK_SUMS.format(trips="K / BK + 1")
    assert fixed(loop, at(found(loop), "bounds.global-access", 7)[0]) == BLOCK_SUMS.format(trips="K / BK")
    where = CP_ASYNC_GEMV.format(where="K % BK == 0")
    assert fixed(where, at(found(where), "bounds.global-access", 2)[0]) == CP_ASYNC_GEMV.format(
        where="K % BK == 0, M % BM == 0"
    )
    grid = COLS.format(grid="N / BN")
    assert fixed(grid, at(found(grid), "bounds.coverage", 3)[0]) == COLS.format(grid="cdiv(N, BN)")
    trips = CHUNKS.format(trips="N / BLOCK")
    assert fixed(trips, at(found(trips), "bounds.coverage", 6)[0]) == CHUNKS.format(trips="(N + BLOCK - 1) / BLOCK")
    alias = SHIFTED.format(alias="src_mask = in_mask")
    assert fixed(alias, at(found(alias), "bounds.global-access", 7)[0]) == SHIFTED.format(alias="src_mask = src < N")
    lse = LSE.format(where="")
    assert not errors(found(fixed(lse, at(found(lse), "bounds.coverage", 1)[0])))


# ---- the explicit level ----------------------------------------------------------------------------

STAGED_ROWS = """\
kernel staged_rows<BM = 8, BN = 256>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BN
  target sm_80 grid({grid}) warps(4)
{{
  buf = smem(f32[BM, BN])
  rows = program_id(0) * BM + arange(0, BM)
  cols = arange(0, BN)
  mask = (rows[:, None] < M) & (cols[None, :] < N)
  store(buf[0 : BM], load(x[rows[:, None], cols[None, :]], mask = mask, other = 0.0))
  barrier()
  t = load(buf[0 : BM])
  store(y[rows[:, None], cols[None, :]], t * 2.0, mask = mask)
}}
"""


def test_a_grid_that_rounds_down_at_the_explicit_level():
    bad = found(STAGED_ROWS.format(grid="M / BM"))
    assert at(bad, "bounds.coverage", 3), describe(bad)
    assert not errors(found(STAGED_ROWS.format(grid="cdiv(M, BM)")))


RING = """\
kernel ring_sums<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target sm_80 grid(M / BM) warps(4)
{{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  acc = zeros(f32[BM])
  for k in 0 .. {trips} {{
    cp.async(x[m0 : m0 + BM, k * BK : k * BK + BK], buf[k % 2])
    cp.async.commit()
    cp.async.wait(0)
    barrier()
    acc = acc + sum(load(buf[k % 2]), axis = 1)
    barrier()
  }}
  store(out[m0 : m0 + BM], acc)
}}
"""


def test_a_copy_loop_one_trip_too_long_at_the_explicit_level():
    bad = found(RING.format(trips="K / BK + 1"))
    loop = at(bad, "bounds.global-access", 8)
    assert loop and loop[0].edits and at(bad, "bounds.global-access", 9), describe(bad)
    assert not errors(found(RING.format(trips="K / BK")))


WS_GEMM = """\
kernel gemm_ws<BM = 128, BN = 128, BK = 64, S = 4>(
    a: global bf16[M, K] align(16),
    b: global bf16[K, N] align(16),
    c: out global bf16[M, N] align(16),
)
  where N % BN == 0, K % BK == 0
  target sm_90 grid({grid}, N / BN) warpgroups(3)
{{
  as = smem(bf16[S, BM, BK], swizzle = 128)
  bs = smem(bf16[S, BK, BN], swizzle = 128)
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 2)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  role load warpgroups(0) regs(40) {{
    for k in 0 .. K / BK {{
      s = k % S
      wait(empty[s], parity = (k / S + 1) % 2)
      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))
      tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])
      tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[s], signal = full[s])
    }}
  }}
  role mma warpgroups(1, 2) regs(232) {{
    r0 = role_rank() * (BM / 2)
    acc = zeros(f32[BM / 2, BN])
    for k in 0 .. K / BK {{
      s = k % S
      wait(full[s], parity = (k / S) % 2)
      acc = wgmma(as[s, r0 : r0 + BM / 2], bs[s], acc)
      wgmma.wait(0)
      arrive(empty[s])
    }}
    rows = m0 + r0 + arange(0, BM / 2)
    store(c[rows[:, None], n0 + arange(0, BN)[None, :]], cast<bf16>(acc), mask = rows[:, None] < M)
  }}
}}
"""


def test_a_warp_specialized_gemm_whose_grid_rounds_down_over_masked_rows():
    bad = found(WS_GEMM.format(grid="M / BM"))
    grid = at(bad, "bounds.coverage", 7)
    assert grid and grid[0].counterexample and grid[0].edits, describe(bad)
    assert at(bad, "dataflow.output-unwritten", 7)
    assert not errors(found(WS_GEMM.format(grid="cdiv(M, BM)")))
