"""Element semantics (kir.interp.values): rounding, wrapping, C division, casts, reductions."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kir.dtypes import DTYPES
from kir.interp import values as V
from tests.budget import examples

BF16 = ml_dtypes.bfloat16
bf16, f16, f32, f64 = (DTYPES[n] for n in ("bf16", "f16", "f32", "f64"))
i8, i32, i64, u8, u32 = (DTYPES[n] for n in ("i8", "i32", "i64", "u8", "u32"))


def test_bf16_add_rounds_every_result_to_bf16():
    # 1 + 2^-9 is below half an ulp of bf16 at 1 (2^-8): the sum stays 1
    one = np.array([1.0], BF16)
    tiny = np.array([2.0**-9], BF16)
    assert V.binary("add", one, tiny, bf16)[0] == 1.0
    assert V.binary("add", one, tiny, bf16).dtype == BF16


def test_f16_mul_rounds_to_f16():
    a = np.array([1.0 + 2.0**-10], np.float16)
    got = V.binary("mul", a, a, f16)
    assert got.dtype == np.float16 and float(got[0]) == float(np.float16((1 + 2.0**-10) ** 2))


def test_integers_wrap_in_their_width():
    assert V.binary("add", np.array([127], np.int8), np.array([1], np.int8), i8)[0] == -128
    assert V.binary("mul", np.array([2**31 - 1], np.int32), np.array([2], np.int32), i32)[0] == -2
    assert V.binary("sub", np.array([0], np.uint8), np.array([1], np.uint8), u8)[0] == 255
    assert V.unary("neg", np.array([-(2**31)], np.int32), i32)[0] == -(2**31)


def test_integer_division_truncates_toward_zero_like_c():
    a = np.array([7, -7, 7, -7, -(2**31)], np.int32)
    b = np.array([2, 2, -2, -2, -1], np.int32)
    assert V.binary("div", a, b, i32).tolist() == [3, -3, -3, 3, -(2**31)]
    assert V.binary("rem", a, b, i32).tolist() == [1, -1, 1, -1, 0]


def test_integer_division_by_zero_is_defined():
    a = np.array([5, -5], np.int32)
    z = np.zeros(2, np.int32)
    assert V.binary("div", a, z, i32).tolist() == [-1, -1]
    assert V.binary("rem", a, z, i32).tolist() == [5, -5]
    assert V.binary("div", np.array([5], np.uint32), np.array([0], np.uint32), u32)[0] == 2**32 - 1


def test_float_rem_is_c_fmod():
    assert V.binary("rem", np.array([-7.5], np.float32), np.array([2.0], np.float32), f32)[0] == -1.5


def test_shifts_clamp_like_ptx():
    one = np.array([1, 1, 1], np.int32)
    assert V.binary("shl", one, np.array([3, 32, -1], np.int32), i32).tolist() == [8, 0, 0]
    neg = np.array([-8, -8], np.int32)
    assert V.binary("shr", neg, np.array([1, 40], np.int32), i32).tolist() == [-4, -1]  # arithmetic
    assert V.binary("shr", np.array([256], np.uint32), np.array([40], np.uint32), u32)[0] == 0


def test_float_to_int_truncates_and_saturates():
    x = np.array([3.7, -3.7, 1e10, -1e10, np.nan], np.float32)
    assert V.cast(x, f32, i32).tolist() == [3, -3, 2**31 - 1, -(2**31), 0]
    assert V.cast(np.array([300.0, -5.0]), f64, u8).tolist() == [255, 0]


def test_f64_to_bf16_rounds_once():
    # 1 + 2^-8 + 2^-30 is just above the midpoint between 1 and the next bf16 (1 + 2^-7):
    # rounding through f32 first would land on the midpoint and round to even (1.0)
    x = np.array([1 + 2.0**-8 + 2.0**-30])
    assert float(V.cast(x, f64, bf16)[0]) == 1 + 2.0**-7
    assert float(V.const(1 + 2.0**-8 + 2.0**-30, bf16)) == 1 + 2.0**-7


def test_casts_to_and_from_i1():
    assert V.cast(np.array([0.0, -0.5, np.nan], np.float32), f32, DTYPES["i1"]).tolist() == [False, True, True]
    assert V.cast(np.array([True, False]), DTYPES["i1"], f32).tolist() == [1.0, 0.0]


def test_integer_casts_wrap():
    assert V.cast(np.array([300, -1], np.int32), i32, u8).tolist() == [44, 255]


def test_transcendentals_in_f32_then_rounded():
    x = np.array([0.5, 1.0], BF16)
    got = V.unary("exp", x, bf16)
    assert got.dtype == BF16
    assert got.tolist() == np.exp(np.array([0.5, 1.0], np.float32)).astype(BF16).tolist()
    erf = V.unary("erf", np.array([0.5], np.float32), f32)
    assert erf[0] == np.float32(math.erf(0.5))
    assert V.unary("rsqrt", np.array([4.0], np.float32), f32)[0] == 0.5
    assert V.unary("sigmoid", np.array([0.0], np.float32), f32)[0] == 0.5


def test_maximum_propagates_nan():
    got = V.binary("maximum", np.array([np.nan, 1.0], np.float32), np.array([0.0, np.nan], np.float32), f32)
    assert np.isnan(got).all()


def test_reduction_is_a_tree_in_the_dtype():
    # [1, 2^-8, 2^-8, 2^-8] in bf16: the tree adds 1 + 2^-8 (rounds to 1) and 2^-8 + 2^-8,
    # then 1 + 2^-7: a sequential sum would stay at 1
    x = np.array([1.0, 2.0**-8, 2.0**-8, 2.0**-8], BF16)
    assert float(V.reduce("sum", x, 0, bf16)) == 1 + 2.0**-7
    # an odd extent carries its last element to the next level
    assert int(V.reduce("sum", np.arange(7, dtype=np.int32), 0, i32)) == 21
    m = np.array([[1, 5, 3], [7, 2, 9]], np.int32)
    assert V.reduce("max", m, 1, i32).tolist() == [5, 9]
    assert V.reduce("min", m, 0, i32).tolist() == [1, 2, 3]
    assert int(V.reduce("prod", np.array([2**16, 2**16], np.int32), 0, i32)) == 0  # wraps


def test_argmax_ties_go_to_the_lowest_index():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], BF16)
    assert V.argreduce("argmax", x, 1, bf16).tolist() == [1, 0]
    assert V.argreduce("argmin", x, 1, bf16).tolist() == [3, 0]
    assert V.argreduce("argmax", x, 1, bf16).dtype == np.int32


def test_topk_sorted_with_ties_in_index_order():
    x = np.array([[1.0, 3.0, 3.0, 2.0, np.nan]], np.float32)
    vals, idx = V.topk(x, 3, True, f32)
    assert np.isnan(vals[0, 0]) and vals[0, 1:].tolist() == [3.0, 3.0]
    assert idx.tolist() == [[4, 1, 2]]
    vals, idx = V.topk(x[:, :4], 2, False, f32)
    assert vals.tolist() == [[1.0, 2.0]] and idx.tolist() == [[0, 3]]


def test_scans_inclusive_and_reverse():
    x = np.array([[1, 2, 3]], np.int32)
    assert V.scan("cumsum", x, 1, False, i32).tolist() == [[1, 3, 6]]
    assert V.scan("cumsum", x, 1, True, i32).tolist() == [[6, 5, 3]]
    assert V.scan("cummax", np.array([2, 1, 5, 3], np.int32), 0, False, i32).tolist() == [2, 2, 5, 5]
    assert V.scan("cumprod", np.array([1.0, 2.0, 3.0], BF16), 0, False, bf16).dtype == BF16


def test_dot_accumulates_bf16_in_f32():
    a = np.full((2, 256), 1.0, BF16)
    b = np.full((256, 2), 2.0**-8, BF16)
    acc = np.full((2, 2), 1.0, np.float32)
    got = V.dot(a, b, acc, bf16, f32)
    assert got.dtype == np.float32 and got.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    # into a bf16 accumulator the f32 result is rounded once
    assert V.dot(a, b, None, bf16, bf16).dtype == BF16


def test_integer_dot_wraps_in_the_accumulator():
    a = np.full((1, 4), 127, np.int8)
    b = np.full((4, 1), 127, np.int8)
    assert V.dot(a, b, None, i8, i32).tolist() == [[4 * 127 * 127]]
    big = np.full((1, 2), 2**31 - 1, np.int32)
    assert V.dot(big, np.ones((2, 1), np.int32), None, i32, i32).tolist() == [[-2]]


def test_constants_wrap_and_round():
    assert int(V.const(-1, u32)) == 2**32 - 1
    assert int(V.const(2**31, i32)) == -(2**31)
    assert float(V.const(0.1, bf16)) == float(np.float32(0.1).astype(BF16))
    assert V.const(3, i64).dtype == np.int64 and V.const(3, i64).shape == ()


def test_poison_values():
    assert np.isnan(V.poison(bf16))
    assert int(V.poison(i32)) == -(2**31) and int(V.poison(u8)) == 255


@settings(max_examples=examples(200), deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1).filter(lambda v: v != 0),
)
def test_c_division_identity_holds_for_every_i32(a, b):
    x, y = np.array([a], np.int32), np.array([b], np.int32)
    q = V.binary("div", x, y, i32)
    r = V.binary("rem", x, y, i32)
    # a == q * b + r in 32-bit wrapping arithmetic, |r| < |b|, and r has the sign of a
    assert V.binary("add", V.binary("mul", q, y, i32), r, i32)[0] == a
    assert abs(int(r[0])) < abs(b)
    assert int(r[0]) == 0 or (int(r[0]) < 0) == (a < 0)


@settings(max_examples=examples(200), deadline=None)
@given(st.floats(allow_nan=False, width=64))
def test_f64_to_bf16_matches_exact_rounding(x):
    got = float(V.cast(np.array([x]), f64, bf16)[0])
    # the nearest bf16 (ties to even) computed with exact integers on the bit patterns
    if abs(x) > 3.3e38:
        return  # rounds to inf (or the largest bf16); not the point here
    lo = np.array([x], np.float64).astype(np.float32).astype(BF16)
    candidates = {
        float(lo[0]),
        float(np.nextafter(lo, np.array([np.inf], BF16))[0]),
        float(np.nextafter(lo, np.array([-np.inf], BF16))[0]),
    }
    finite = [c for c in candidates if math.isfinite(c)]
    best = min(abs(c - x) for c in finite)
    assert abs(got - x) == best
