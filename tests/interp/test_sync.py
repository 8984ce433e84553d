"""Roles, mbarriers and the race detector: each correct program runs clean, and each broken
twin is reported with the rule and at the line that the missing synchronization leaves open."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tests.interp.util import error_of, line_of, lines_of, run_text

BF16 = ml_dtypes.bfloat16

# A producer role fills a 2-stage ring of shared buffers with `store`; a consumer role reads
# them. full[s]: the stage holds data; empty[s]: the consumer is done with it.
PC_HEAD = """
kernel pc<B = 16, S = 2>(x: global f32[N], y: out global f32[N])
  where N % B == 0
  target sm_90 grid(1) warps(2)
{
  buf = smem(f32[S, B])
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 1)
"""
PRODUCER = """
  role producer warps(0) {
    for k in 0 .. N / B {
      s = k % S
      wait(empty[s], parity = (k / S + 1) % 2)
      store(buf[s], load(x[k * B : k * B + B]) * 2.0)
      arrive(full[s])
    }
  }
"""
CONSUMER = """
  role consumer warps(1) {
    for k in 0 .. N / B {
      s = k % S
      wait(full[s], parity = (k / S) % 2)
      v = load(buf[s])
      arrive(empty[s])
      store(y[k * B : k * B + B], v + 1.0)
    }
  }
"""
PRODUCER_CONSUMER = PC_HEAD + PRODUCER + CONSUMER + "}\n"
X = {"x": np.arange(96, dtype=np.float32)}


def test_producer_consumer_is_clean_and_correct():
    out = run_text(PRODUCER_CONSUMER, X)
    np.testing.assert_array_equal(out["y"], 2 * X["x"] + 1)


def test_consumer_without_its_wait_races_at_its_read():
    text = PRODUCER_CONSUMER.replace("      wait(full[s], parity = (k / S) % 2)\n", "")
    d = error_of(text, X)
    assert d.rule == "interp.race"
    assert d.span.line == line_of(text, "v = load(buf[s])")
    assert {r.span.line for r in d.related} == {line_of(text, "store(buf[s]")}
    assert "`buf`" in d.message and "role `consumer`" in d.message and "role `producer`" in d.message
    assert "wait" in d.hint
    assert d.counterexample["buffer"] == "buf"


def test_the_race_does_not_depend_on_the_order_of_the_roles():
    # the consumer declared first runs first: its read now precedes the producer's write
    no_wait = CONSUMER.replace("      wait(full[s], parity = (k / S) % 2)\n", "")
    swapped = PC_HEAD + no_wait + PRODUCER + "}\n"
    d = error_of(swapped, X)
    assert d.rule == "interp.race"
    assert d.span.line == line_of(swapped, "v = load(buf[s])")


def test_producer_without_its_wait_races_at_its_write():
    text = PRODUCER_CONSUMER.replace("      wait(empty[s], parity = (k / S + 1) % 2)\n", "")
    d = error_of(text, X)
    assert d.rule == "interp.race"
    assert line_of(text, "store(buf[s]") in lines_of(d)


def test_arrive_count_mismatch_deadlocks_with_the_barrier_state():
    text = PRODUCER_CONSUMER.replace("empty = mbarrier(S, count = 1)", "empty = mbarrier(S, count = 2)")
    d = error_of(text, X)
    assert d.rule == "interp.deadlock"
    assert d.span.line == line_of(text, "wait(empty[s]")
    assert {r.span.line for r in d.related} == {line_of(text, "wait(full[s]")}
    assert "`empty[0]`" in d.message and "1 of 2 arrivals pending" in d.message
    assert "init count 2" in d.hint
    assert d.counterexample["blocked"]["producer"]["pending"] == 1


def test_wrong_parity_deadlocks_and_names_parity():
    text = PRODUCER_CONSUMER.replace("parity = (k / S) % 2", "parity = (k / S + 1) % 2")
    d = error_of(text, X)
    assert d.rule in ("interp.race", "interp.deadlock")


def test_over_arrival_counts_into_the_next_phase():
    text = """
    kernel k(y: out global i32[2])
      target sm_90 grid(1) warps(1)
    {
      b = mbarrier(1, count = 1)
      arrive(b[0], count = 2)
      wait(b[0], parity = 1)
      store(y[0], 1)
    }
    """
    assert run_text(text, {})["y"][0] == 1
    d = error_of(text.replace("parity = 1", "parity = 0"), {})
    assert d.rule == "interp.deadlock" and "phase 2" in d.message


def test_uninitialized_shared_read():
    text = """
    kernel k(y: out global f32[4])
      target sm_90 grid(1) warps(1)
    {
      t = smem(f32[8])
      store(t[0 : 0 + 4], full(f32[4], 1.0))
      store(y[0 : 0 + 4], load(t[2 : 2 + 4]))
    }
    """
    d = error_of(text, {})
    assert d.rule == "interp.uninitialized-read"
    assert d.span.line == line_of(text, "load(t[2")
    assert d.counterexample["element"] == [4]


# ---- TMA and wgmma -------------------------------------------------------------------------

GEMM = """
kernel gemm<BM = 64, BN = 64, BK = 32, S = 2>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(2)
{
  as = smem(bf16[S, BM, BK])
  bs = smem(bf16[S, BK, BN])
  full = mbarrier(S, count = 1)
  empty = mbarrier(S, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  role load warpgroups(0) {
    for k in 0 .. K / BK {
      s = k % S
      wait(empty[s], parity = (k / S + 1) % 2)
      expect(full[s], bytes = sizeof(as[s]) + sizeof(bs[s]))
      tma.load(a[m0 : m0 + BM, k * BK : k * BK + BK], as[s], signal = full[s])
      tma.load(b[k * BK : k * BK + BK, n0 : n0 + BN], bs[s], signal = full[s])
    }
  }
  role mma warpgroups(1) {
    acc = zeros(f32[BM, BN])
    for k in 0 .. K / BK {
      s = k % S
      wait(full[s], parity = (k / S) % 2)
      acc = wgmma(as[s], bs[s], acc)
      wgmma.wait(0)
      arrive(empty[s])
    }
    store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
  }
}
"""


def gemm_inputs(m=128, n=128, k=192):
    rng = np.random.default_rng(0)
    return {"a": rng.standard_normal((m, k)).astype(BF16), "b": rng.standard_normal((k, n)).astype(BF16)}


def test_tma_wgmma_pipeline_is_clean_and_correct():
    i = gemm_inputs()
    c = run_text(GEMM, i)["c"]
    np.testing.assert_allclose(c, i["a"].astype(np.float32) @ i["b"].astype(np.float32), rtol=1e-5, atol=1e-4)


def test_gemm_of_the_brief_runs_fast():
    import time

    i = gemm_inputs(256, 256, 128)
    start = time.perf_counter()
    run_text(GEMM, i, {"BM": 128, "BN": 128, "BK": 64})
    assert time.perf_counter() - start < 2.0


def test_missing_wgmma_wait_races_at_the_next_tma_load_into_the_stage():
    text = GEMM.replace("      wgmma.wait(0)\n", "")
    d = error_of(text, gemm_inputs())
    assert d.rule == "interp.race"
    assert d.span.line == line_of(text, "tma.load(a[")
    assert {r.span.line for r in d.related} == {line_of(text, "acc = wgmma(")}
    assert "wgmma.wait before arrive" in d.hint
    assert d.counterexample["element"][0] == 0 and d.counterexample["k"] == 2


def test_wgmma_without_the_full_wait_races_at_the_wgmma():
    text = GEMM.replace("      wait(full[s], parity = (k / S) % 2)\n", "")
    d = error_of(text, gemm_inputs())
    assert d.rule == "interp.race"
    assert d.span.line == line_of(text, "acc = wgmma(")
    assert "tma.load" in d.hint


def test_expect_bytes_short_lets_the_consumer_read_early():
    text = GEMM.replace("bytes = sizeof(as[s]) + sizeof(bs[s])", "bytes = sizeof(as[s])")
    d = error_of(text, gemm_inputs())
    assert d.rule == "interp.race"
    assert lines_of(d) & {line_of(text, "acc = wgmma("), line_of(text, "tma.load(b[")}


def test_expect_bytes_over_deadlocks_and_says_bytes():
    text = GEMM.replace("bytes = sizeof(as[s]) + sizeof(bs[s])", "bytes = sizeof(as[s]) + sizeof(bs[s]) + 2")
    d = error_of(text, gemm_inputs())
    assert d.rule == "interp.deadlock"
    assert "2 transaction bytes outstanding" in d.message
    assert "expect(bytes" in d.hint


def test_tma_load_zero_fills_outside_the_tensor():
    text = """
    kernel k<B = 8>(x: global f32[N], y: out global f32[B])
      target sm_90 grid(1) warps(1)
    {
      t = smem(f32[B])
      bar = mbarrier(1, count = 1)
      expect(bar[0], bytes = sizeof(t[0 : 0 + B]))
      tma.load(x[N - 4 : N - 4 + B], t[0 : 0 + B], signal = bar[0])
      wait(bar[0], parity = 0)
      store(y[0 : 0 + B], load(t[0 : 0 + B]))
    }
    """
    out = run_text(text, {"x": np.arange(1, 11, dtype=np.float32)})
    assert out["y"].tolist() == [7, 8, 9, 10, 0, 0, 0, 0]


# ---- fences, CTA barriers, cp.async, TMA stores --------------------------------------------

EPILOGUE = """
kernel k<B = 16>(y: out global f32[B])
  target sm_90 grid(1) warps(1)
{
  t = smem(f32[B])
  store(t[0 : 0 + B], cast<f32>(arange(0, B)))
  fence.async()
  tma.store(t[0 : 0 + B], y[0 : 0 + B])
  tma.store_wait(0)
  store(t[0 : 0 + B], full(f32[B], 0.0))
}
"""


def test_tma_store_after_a_fence_is_clean():
    out = run_text(EPILOGUE, {})
    assert out["y"].tolist() == list(range(16))


def test_tma_store_without_a_fence_is_reported():
    text = EPILOGUE.replace("  fence.async()\n", "")
    d = error_of(text, {})
    assert d.rule == "interp.missing-fence"
    assert d.span.line == line_of(text, "tma.store(t")
    assert {r.span.line for r in d.related} == {line_of(text, "store(t[0 : 0 + B], cast")}
    assert "fence.async()" in d.hint


def test_overwriting_a_buffer_before_tma_store_wait_is_a_race():
    text = EPILOGUE.replace("  tma.store_wait(0)\n", "")
    d = error_of(text, {})
    assert d.rule == "interp.race"
    assert d.span.line == line_of(text, "full(f32[B], 0.0)")
    assert "tma.store_wait" in d.hint


EXCHANGE = """
kernel k<B = 8>(y: out global f32[B])
  target sm_90 grid(1) warps(2)
{
  t = smem(f32[B])
  role writer warps(0) {
    store(t[0 : 0 + B], full(f32[B], 3.0))
    barrier()
  }
  role reader warps(1) {
    barrier()
    store(y[0 : 0 + B], load(t[0 : 0 + B]))
  }
}
"""


def test_cta_barrier_orders_two_roles():
    assert run_text(EXCHANGE, {})["y"].tolist() == [3.0] * 8


def test_without_the_cta_barrier_the_roles_race():
    text = EXCHANGE.replace("    barrier()\n", "")
    d = error_of(text, {})
    assert d.rule == "interp.race"
    assert lines_of(d) == {line_of(text, "store(t["), line_of(text, "load(t[")}


def test_a_role_that_ends_before_the_barrier_deadlocks_the_others():
    text = EXCHANGE.replace(
        "    store(t[0 : 0 + B], full(f32[B], 3.0))\n    barrier()\n", "    store(t[0 : 0 + B], full(f32[B], 3.0))\n"
    )
    d = error_of(text, {})
    assert d.rule == "interp.deadlock"
    assert d.span.line == line_of(text, "barrier()")
    assert "role `writer`" in d.hint


CP_ASYNC = """
kernel k<B = 8>(x: global f32[N], y: out global f32[B])
  target sm_90 grid(1) warps(1)
{
  t = smem(f32[2, B])
  i = arange(0, B)
  cp.async(x[0 : 0 + B], t[0], mask = i < N)
  cp.async.commit()
  cp.async(x[0 : 0 + B], t[1], mask = i < 2)
  cp.async.commit()
  cp.async.wait(1)
  store(y[0 : 0 + B], load(t[0]))
}
"""


def test_cp_async_groups_complete_at_their_wait():
    out = run_text(CP_ASYNC, {"x": np.arange(1, 6, dtype=np.float32)})
    assert out["y"].tolist() == [1, 2, 3, 4, 5, 0, 0, 0]  # masked-off elements are zero


def test_reading_a_cp_async_group_still_in_flight_is_a_race():
    text = CP_ASYNC.replace("load(t[0])", "load(t[1])")
    d = error_of(text, {"x": np.arange(1, 6, dtype=np.float32)})
    assert d.rule == "interp.race"
    assert d.span.line == line_of(text, "load(t[1])")
    assert "cp.async.wait" in d.hint


def test_role_rank_splits_the_work_between_units():
    text = """
    kernel k<B = 4>(y: out global i32[8])
      target sm_90 grid(1) warps(2)
    {
      role both warps(0, 1) {
        r = role_rank()
        store(y[r * B : r * B + B], full(i32[B], r + 10))
      }
    }
    """
    assert run_text(text, {})["y"].tolist() == [10] * 4 + [11] * 4
