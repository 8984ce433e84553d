"""Tile-level kernels run end to end: masks, gathers, stores, atomics, reductions, scans, topk,
dot, loops and branches."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tests.interp.util import run_text

BF16 = ml_dtypes.bfloat16

VADD = """
kernel vadd<BLOCK = 64>(x: global f32[N], y: global f32[N], z: out global f32[N])
  target sm_90 grid((N + BLOCK - 1) / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  m = offs < N
  a = load(x[offs], mask = m)
  b = load(y[offs], mask = m, other = 100.0)
  store(z[offs], a + b, mask = m)
}
"""


def test_masked_vector_add_covers_the_tail():
    x = np.arange(150, dtype=np.float32)
    y = np.ones(150, dtype=np.float32)
    out = run_text(VADD, {"x": x, "y": y})
    np.testing.assert_array_equal(out["z"], x + 1)
    np.testing.assert_array_equal(out["x"], x)


def test_cdiv_grid_covers_the_tail():
    x = np.arange(150, dtype=np.float32)
    out = run_text(VADD.replace("(N + BLOCK - 1) / BLOCK", "cdiv(N, BLOCK)"), {"x": x, "y": x})
    np.testing.assert_array_equal(out["z"], 2 * x)


def test_other_fills_masked_lanes():
    text = """
    kernel k<B = 8>(x: global f32[N], z: out global f32[B])
      target sm_90 grid(1) warps(1)
    {
      i = arange(0, B)
      store(z[i], load(x[i], mask = i < N, other = -1.0))
    }
    """
    out = run_text(text, {"x": np.arange(5, dtype=np.float32)})
    assert out["z"].tolist() == [0, 1, 2, 3, 4, -1, -1, -1]


def test_bf16_arithmetic_rounds_in_the_kernel():
    text = """
    kernel k(x: global bf16[N], z: out global bf16[N])
      target sm_90 grid(1) warps(1)
    {
      i = arange(0, N)
      v = load(x[i])
      store(z[i], v + bf16(0.00390625))
    }
    """
    out = run_text(text, {"x": np.ones(4, BF16)}, {})
    assert out["z"].tolist() == [1.0] * 4  # 1 + 2^-8 rounds to even


def test_integer_wrap_and_c_division_in_a_kernel():
    text = """
    kernel k(a: global i32[N], b: global i32[N], q: out global i32[N], r: out global i32[N], s: out global i32[N])
      target sm_90 grid(1) warps(1)
    {
      i = arange(0, N)
      x = load(a[i])
      y = load(b[i])
      store(q[i], x / y)
      store(r[i], x % y)
      store(s[i], x + 2147483647)
    }
    """
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    out = run_text(text, {"a": a, "b": b})
    assert out["q"].tolist() == [3, -3, -3, 3]
    assert out["r"].tolist() == [1, -1, 1, -1]
    assert out["s"].tolist() == [-2147483642, 2147483640, -2147483642, 2147483640]


def test_two_dimensional_gather_of_rows():
    text = """
    kernel bag<BL = 4, BD = 8>(table: global f32[R, D], idx: global i64[L], out: out global f32[BL, BD])
      target sm_90 grid(1) warps(4)
    {
      j = arange(0, BL)
      c = arange(0, BD)
      rows = load(idx[j], mask = j < L)
      v = load(table[rows[:, None], c[None, :]], mask = (j < L)[:, None] & (c < D)[None, :], other = 0.0)
      store(out[j[:, None], c[None, :]], v)
    }
    """
    table = np.arange(30, dtype=np.float32).reshape(5, 6)
    idx = np.array([4, 0, 2], np.int64)
    out = run_text(text, {"table": table, "idx": idx})["out"]
    want = np.zeros((4, 8), np.float32)
    want[:3, :6] = table[idx]
    np.testing.assert_array_equal(out, want)


def test_store_with_repeated_addresses_keeps_the_last_lane():
    text = """
    kernel k<B = 6>(idx: global i32[B], z: out global f32[N])
      target sm_90 grid(1) warps(1)
    {
      i = arange(0, B)
      store(z[load(idx[i])], cast<f32>(i))
    }
    """
    out = run_text(text, {"idx": np.array([0, 1, 0, 2, 1, 0], np.int32), "z": np.zeros(3, np.float32)})
    assert out["z"].tolist() == [5.0, 4.0, 3.0]


def test_atomic_add_applies_lanes_in_order_and_returns_old_values():
    text = """
    kernel hist<B = 8>(x: global i32[B], h: out global i32[NB], old: out global i32[B])
      target sm_90 grid(2) warps(1)
    {
      i = arange(0, B)
      o = atomic_add(h[load(x[i])], full(i32[B], 1), mask = i < 7)
      store(old[i], o)
    }
    """
    x = np.array([0, 1, 0, 0, 2, 1, 0, 2], np.int32)
    out = run_text(text, {"x": x, "h": np.zeros(3, np.int32)})
    assert out["h"].tolist() == [8, 4, 2]  # two programs, the last lane masked off
    # second program: bucket 0 already holds 4, bucket 1 holds 2, bucket 2 holds 1
    assert out["old"].tolist() == [4, 2, 5, 6, 1, 3, 7, 0]


def test_atomic_max_and_xchg():
    text = """
    kernel k<B = 4>(v: global f32[B], m: out global f32[1], x: out global f32[1], old: out global f32[B])
      target sm_90 grid(1) warps(1)
    {
      i = arange(0, B)
      z = i * 0
      vals = load(v[i])
      atomic_max(m[z], vals)
      store(old[i], atomic_xchg(x[z], vals))
    }
    """
    v = np.array([3, 9, 1, 4], np.float32)
    out = run_text(text, {"v": v, "m": np.array([5], np.float32), "x": np.array([-1], np.float32)})
    assert out["m"].tolist() == [9.0]
    assert out["x"].tolist() == [4.0]
    assert out["old"].tolist() == [-1, 3, 9, 1]


def test_softmax_rows_with_reductions():
    text = """
    kernel softmax<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M, N])
      where N <= BLOCK
      target sm_90 grid(M) warps(4)
    {
      row = program_id(0)
      cols = arange(0, BLOCK)
      m = cols < N
      v = load(x[row, cols], mask = m, other = -inf)
      e = exp(v - max(v, axis = 0))
      store(y[row, cols], e / sum(e, axis = 0), mask = m)
    }
    """
    x = np.random.default_rng(0).standard_normal((64, 1000)).astype(np.float32)
    y = run_text(text, {"x": x})["y"]
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_scan_argmax_and_topk_in_a_kernel():
    text = """
    kernel k<B = 8, K = 3>(x: global f32[B], cs: out global f32[B], rc: out global f32[B],
                           am: out global i32[1], tv: out global f32[K], ti: out global i32[K])
      target sm_90 grid(1) warps(1)
    {
      i = arange(0, B)
      z = arange(0, 1)
      t = arange(0, K)
      v = load(x[i])
      store(cs[i], cumsum(v, axis = 0))
      store(rc[i], cumsum(v, axis = 0, reverse = 1))
      store(am[z], argmax(v, axis = 0))
      vals, idx = topk(v, k = K)
      store(tv[t], vals)
      store(ti[t], idx)
    }
    """
    x = np.array([1, 5, 2, 5, 0, 3, 1, 1], np.float32)
    out = run_text(text, {"x": x})
    assert out["cs"].tolist() == np.cumsum(x).tolist()
    assert out["rc"].tolist() == np.cumsum(x[::-1])[::-1].tolist()
    assert out["am"].tolist() == [1]
    assert out["tv"].tolist() == [5, 5, 3] and out["ti"].tolist() == [1, 3, 5]


def test_tiled_dot_with_a_carried_accumulator():
    text = """
    kernel mm<BM = 32, BN = 32, BK = 16>(a: global bf16[M, K], b: global bf16[K, N], c: out global f32[M, N])
      where M % BM == 0, N % BN == 0, K % BK == 0
      target sm_90 grid(M / BM, N / BN) warps(4)
    {
      m0 = program_id(0) * BM
      n0 = program_id(1) * BN
      acc = zeros(f32[BM, BN])
      for k in 0 .. K / BK pipeline(stages = 3) {
        x = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
        y = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
        acc = dot<f32>(x, y, acc)
      }
      store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
    }
    """
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 48)).astype(BF16)
    b = rng.standard_normal((48, 96)).astype(BF16)
    c = run_text(text, {"a": a, "b": b})["c"]
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_loops_with_step_branches_and_shape_ops():
    text = """
    kernel k<B = 4>(x: global f32[B, B], y: out global f32[B, B], s: out global i32[1])
      target sm_90 grid(1) warps(1)
    {
      r = arange(0, B)
      t = load(x[r[:, None], r[None, :]])
      tt = trans(t)
      flat = reshape(tt, [B * B])
      back = reshape(flat, [B, B])
      total = 0
      for i in 0 .. 10 step 3 {
        if i % 2 == 0 {
          total = total + i
        } else {
          total = total - 1
        }
      }
      store(y[r[:, None], r[None, :]], back + broadcast(cast<f32>(r)[None, :], [B, B]))
      store(s[arange(0, 1)], full(i32[1], total))
    }
    """
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = run_text(text, {"x": x})
    np.testing.assert_array_equal(out["y"], x.T + np.arange(4, dtype=np.float32)[None, :])
    assert out["s"].tolist() == [0 - 1 + 6 - 1]  # i = 0, 3, 6, 9


def test_two_dimensional_grid_and_num_programs():
    text = """
    kernel k(o: out global i32[P, Q])
      target sm_90 grid(P, Q) warps(1)
    {
      i = program_id(0)
      j = program_id(1)
      store(o[i, j], i * num_programs(1) + j)
    }
    """
    out = run_text(text, {"o": np.zeros((3, 4), np.int32)})
    assert out["o"].tolist() == np.arange(12).reshape(3, 4).tolist()
