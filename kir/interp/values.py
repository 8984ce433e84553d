"""Element semantics of KIR values, as numpy functions: this module *is* the numeric definition
of the language.

A scalar is a 0-d numpy array and a tile an n-d numpy array, both of the value's dtype; bf16
and fp8 are carried by ml_dtypes. Every function below takes and returns such arrays, one numpy
call per tile op (the only Python loops are over the log2(n) levels of a reduction tree).

Choices, where hardware or C leaves room:

- Arithmetic on bf16, f16 and fp8 happens in the dtype itself: every result is rounded to the
  storage format (ml_dtypes and numpy compute in f32 and round once, which is exact for + - * /
  because f32 carries more than twice the bits).
- Transcendentals (exp, exp2, log, log2, sqrt, rsqrt, erf, sigmoid, tanh, sin, cos, pow) are
  computed in f32 for floats of at most 32 bits (f64 for f64), then rounded to the dtype. erf
  uses `math.erf` (numpy has none) rounded to f32.
- maximum/minimum propagate NaN (a NaN in either operand gives NaN), so a poisoned value is
  never hidden.
- Integers wrap (two's complement) in their width. `/` and `%` truncate toward zero as in C;
  `x / 0` gives -1 (all ones, as PTX `div` does) and `x % 0` gives x. Shifts take the amount
  as unsigned: `<<` by at least the width gives 0; `>>` by at least the width gives 0 for
  unsigned and the sign fill for signed (PTX clamps the same way); `>>` of signed is
  arithmetic.
- Casts round to nearest even. Float to integer truncates toward zero and saturates (NaN gives
  0), as PTX `cvt.rzi.sat`. To i1 means `!= 0`. f64 (and integers, through f64) to bf16 or fp8
  round once (round-to-odd through f32, so no double rounding). Out-of-range values to
  `f8e4m3` (which has no infinity) give NaN, as ml_dtypes and PyTorch do.
- Reductions (sum, prod, max, min) run in the tile's dtype as a tree: element i is combined with
  element i + n/2 (an odd last element waits for the next level), level after level, every
  partial result rounded to the dtype. This is the shape of a shuffle-down reduction on a GPU
  and it is deterministic. A sum of bf16 therefore accumulates in bf16: cast to f32 first to
  accumulate in f32.
- Scans (cumsum, cumprod, cummax, cummin) are sequential inclusive scans in the dtype (each
  step rounded); `reverse` scans from the last element.
- argmax/argmin return the lowest index among ties; NaN counts as the largest and the smallest
  value (the first NaN wins either way).
- topk sorts descending (largest) or ascending with ties in index order; NaN ranks above every
  number.
- gather picks `src` along an axis at the positions of an integer index tile
  (`numpy.take_along_axis`); an index outside the axis is an error, never wrapped or clamped.
- dot converts both operands to the accumulate dtype's compute type (f32 for float accumulate
  types up to 32 bits, f64 for f64, i64 for integers), multiplies and sums there (f32 BLAS
  order), adds the accumulator there, and rounds once to the accumulate dtype (integers wrap).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kir.dtypes import DTYPES, DType

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def of(x: np.ndarray | np.generic | int | float | bool, d: DType) -> np.ndarray:
    """`x` as an array of dtype `d` (0-d for a scalar); no rounding happens here for values
    already of that dtype."""
    return np.asarray(x).astype(d.numpy, copy=False)


def poison(d: DType):
    """The fill of memory nobody wrote: NaN for floats, the most negative value for signed
    integers, the largest for unsigned ones, true for i1."""
    if d.is_float:
        return np.array(np.nan, dtype=d.numpy)
    if d.kind == "bool":
        return np.array(True)
    info = np.iinfo(d.numpy)
    return np.array(info.min if d.kind == "int" else info.max, dtype=d.numpy)


def const(number: int | float | bool, d: DType) -> np.ndarray:
    if d.kind == "bool":
        return np.array(bool(number))
    if d.is_int:
        # Wrap a literal into the width (the parser keeps literals in range; builders may not).
        bits = d.bits
        raw = int(number) % (1 << bits)
        return np.array(raw, dtype=np.dtype(f"u{bits // 8}")).view(d.numpy).reshape(())
    return cast(np.array(float(number), dtype=F64), DTYPES["f64"], d)


def _compute_type(d: DType) -> np.dtype:
    return F64 if d.bits == 64 else F32


def _compute_dtype(d: DType) -> DType:
    """The KIR dtype of `_compute_type(d)`."""
    return DTYPES["f64" if d.bits == 64 else "f32"]


# ---- casts ---------------------------------------------------------------------------------


def _f64_to_narrow(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Round f64 to a float narrower than f32 in one step: round to odd into f32 (f32 has more
    than twice the bits of bf16 and fp8), then round to nearest even into the target."""
    with np.errstate(over="ignore", invalid="ignore"):  # beyond f32 is inf, as it must be
        f = x.astype(F32)
    back = f.astype(F64)
    inexact = (back != x) & ~np.isnan(x)
    if np.any(inexact):
        toward_zero = np.where(np.abs(back) > np.abs(x), np.nextafter(f, np.float32(0)), f)
        bits = toward_zero.view(np.uint32) | np.uint32(1)
        f = np.where(inexact, bits.view(F32), f)
    return f.astype(target)


def _float_to_float(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    if src.bits == 64 and dst.bits < 32 and dst.name != "f16":
        return _f64_to_narrow(x, dst.numpy)
    return x.astype(dst.numpy)


def _float_to_int(x: np.ndarray, dst: DType) -> np.ndarray:
    xf = np.trunc(x.astype(F64))
    xf = np.where(np.isnan(xf), 0.0, xf)
    info = np.iinfo(dst.numpy)
    hi = xf >= float(info.max)
    lo = xf <= float(info.min)
    mid = np.where(hi | lo, 0.0, xf).astype(dst.numpy)
    out = np.where(hi, np.array(info.max, dst.numpy), np.where(lo, np.array(info.min, dst.numpy), mid))
    return out.astype(dst.numpy)


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    x = np.asarray(x)
    if src.name == dst.name:
        return x
    if dst.kind == "bool":
        return x != 0
    if src.kind == "bool":
        return x.astype(dst.numpy)
    if src.is_float and dst.is_float:
        return _float_to_float(x, src, dst)
    if src.is_float:
        return _float_to_int(x, dst)
    if dst.is_float:
        as64 = x.astype(F64)
        return as64.astype(dst.numpy) if dst.name in ("f16", "f32", "f64") else _f64_to_narrow(as64, dst.numpy)
    return x.astype(dst.numpy)  # integer to integer wraps


# ---- elementwise ---------------------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    flat = np.asarray(x, dtype=F64).reshape(-1)
    out = np.fromiter((math.erf(v) for v in flat.tolist()), dtype=F64, count=flat.size)
    return out.reshape(np.shape(x))


_TRANSCENDENTAL: dict[str, Callable[[np.ndarray], Any]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "rsqrt": lambda v: np.reciprocal(np.sqrt(v)),
    "sigmoid": lambda v: np.reciprocal(np.exp(-v) + v.dtype.type(1)),
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
}


def unary(fn: str, x: np.ndarray, d: DType) -> np.ndarray:
    if fn == "neg":
        return of(np.negative(x), d)
    if fn == "not":
        return np.logical_not(x) if d.kind == "bool" else np.invert(x)
    if fn == "abs":
        return of(np.abs(x), d)
    ct = _compute_dtype(d)
    if fn == "erf":
        return cast(_erf(x).astype(ct.numpy), ct, d)
    wide = np.asarray(x).astype(ct.numpy)
    res = np.asarray(_TRANSCENDENTAL[fn](wide)).astype(ct.numpy)
    return cast(res, ct, d)


def _c_div(a: np.ndarray, b: np.ndarray, d: DType) -> tuple[np.ndarray, np.ndarray]:
    """C quotient and remainder (truncation toward zero) in the dtype's width, with the
    division-by-zero results documented above."""
    zero = b == 0
    if d.kind == "uint" or d.bits == 64:
        wa, wb = a, np.where(zero, np.ones_like(b), b)
    else:
        wa, wb = a.astype(np.int64), np.where(zero, 1, b).astype(np.int64)
    q = np.floor_divide(wa, wb)
    if d.kind != "uint":
        r_floor = wa - q * wb
        q = q + ((r_floor != 0) & ((wa < 0) != (wb < 0)))
    q = q.astype(d.numpy)
    r = (a - q * np.where(zero, np.ones_like(b), b)).astype(d.numpy)
    q = np.where(zero, np.array(-1).astype(d.numpy), q)  # all ones
    r = np.where(zero, a, r)
    return q.astype(d.numpy), r.astype(d.numpy)


def _shift(fn: str, a: np.ndarray, b: np.ndarray, d: DType) -> np.ndarray:
    if d.kind == "bool":  # one bit: any shift by 1 or more clears it
        return np.where(b, False, a)
    amount = b.astype(np.int64) if d.kind == "int" else b.astype(np.uint64).astype(np.int64)
    too_far = (amount < 0) | (amount >= d.bits)
    safe = np.where(too_far, 0, amount).astype(d.numpy)
    if fn == "shl":
        res = np.left_shift(a, safe)
        return of(np.where(too_far, np.zeros_like(a), res), d)
    res = np.right_shift(a, safe)
    fill = np.right_shift(a, np.array(d.bits - 1, d.numpy)) if d.kind == "int" else np.zeros_like(a)
    return of(np.where(too_far, fill, res), d)


def binary(fn: str, a: np.ndarray, b: np.ndarray, d: DType) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    if d.kind == "bool" and fn in ("add", "sub", "mul", "div", "rem"):
        # i1 arithmetic wraps in one bit.
        ai, bi = a.astype(np.uint8), b.astype(np.uint8)
        res = {
            "add": ai ^ bi,
            "sub": ai ^ bi,
            "mul": ai & bi,
            "div": np.where(bi == 0, 1, ai),
            "rem": np.where(bi == 0, ai, 0),
        }[fn]
        return np.asarray(res).astype(bool)
    if fn == "add":
        return of(np.add(a, b), d)
    if fn == "sub":
        return of(np.subtract(a, b), d)
    if fn == "mul":
        return of(np.multiply(a, b), d)
    if fn == "div":
        if d.is_float:
            return of(np.true_divide(a, b), d)
        return _c_div(a, b, d)[0]
    if fn == "rem":
        if d.is_float:
            ct = _compute_type(d)
            return of(np.fmod(a.astype(ct), b.astype(ct)), d)
        return _c_div(a, b, d)[1]
    if fn == "and":
        return of(np.bitwise_and(a, b), d)
    if fn == "or":
        return of(np.bitwise_or(a, b), d)
    if fn == "xor":
        return of(np.bitwise_xor(a, b), d)
    if fn in ("shl", "shr"):
        return _shift(fn, a, b, d)
    if fn == "maximum":
        return of(np.maximum(a, b), d)
    if fn == "minimum":
        return of(np.minimum(a, b), d)
    if fn == "pow":
        wide = _compute_dtype(d)
        return cast(np.asarray(np.power(a.astype(wide.numpy), b.astype(wide.numpy))), wide, d)
    raise ValueError(f"unknown binary function {fn}")


COMPARISONS = {  # KIR predicate -> numpy comparison
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def compare(pred: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(COMPARISONS[pred](a, b))


def select(cond: np.ndarray, a: np.ndarray, b: np.ndarray, d: DType) -> np.ndarray:
    return of(np.where(cond, a, b), d)


# ---- reductions and scans ------------------------------------------------------------------

_REDUCE_BINARY = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def reduce(fn: str, x: np.ndarray, axis: int, d: DType) -> np.ndarray:
    """Tree reduction in the dtype (see the module docstring for the exact tree)."""
    op = _REDUCE_BINARY[fn]
    v = np.moveaxis(np.asarray(x), axis, 0)
    if v.shape[0] == 0:
        lo, hi = (-np.inf, np.inf) if d.is_float else (np.iinfo(d.numpy).min, np.iinfo(d.numpy).max)
        identity = {"sum": 0, "prod": 1, "max": lo, "min": hi}[fn]
        return of(np.full(v.shape[1:], identity), d)
    while v.shape[0] > 1:
        n = v.shape[0]
        h = n // 2
        level = binary(op, v[:h], v[h : 2 * h], d)
        v = np.concatenate([level, v[2 * h :]], axis=0) if n % 2 else level
    return of(v[0], d)


def _sortable(x: np.ndarray, d: DType) -> np.ndarray:
    """A view of the values that numpy sorts and compares exactly (bf16 and fp8 as f32)."""
    if d.is_float and d.bits < 64:
        return np.asarray(x).astype(F32)
    return np.asarray(x)


def argreduce(fn: str, x: np.ndarray, axis: int, d: DType) -> np.ndarray:
    v = _sortable(x, d)
    res = np.argmax(v, axis=axis) if fn == "argmax" else np.argmin(v, axis=axis)
    return np.asarray(res).astype(np.int32)


_SCAN_UFUNC = {"cumsum": "add", "cumprod": "mul", "cummax": "maximum", "cummin": "minimum"}


def scan(fn: str, x: np.ndarray, axis: int, reverse: bool, d: DType) -> np.ndarray:
    v = np.asarray(x)
    if reverse:
        v = np.flip(v, axis=axis)
    ufunc: np.ufunc
    if d.kind == "bool":
        ufunc = {
            "cumsum": np.logical_xor,
            "cumprod": np.logical_and,
            "cummax": np.logical_or,
            "cummin": np.logical_and,
        }[fn]
    else:
        ufunc = {"add": np.add, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}[_SCAN_UFUNC[fn]]
    res = ufunc.accumulate(v, axis=axis, dtype=d.numpy)
    if reverse:
        res = np.flip(res, axis=axis)
    return of(res, d).copy()


def topk(x: np.ndarray, k: int, largest: bool, d: DType) -> tuple[np.ndarray, np.ndarray]:
    v = _sortable(x, d)
    n = v.shape[-1]
    if largest:
        # Descending with ties in index order: a stable ascending sort of the reversed row,
        # read backwards. NaN sorts last ascending, so it comes first here.
        order = np.argsort(np.flip(v, axis=-1), axis=-1, kind="stable")
        idx = (n - 1) - np.flip(order, axis=-1)
    else:
        idx = np.argsort(v, axis=-1, kind="stable")
    idx = idx[..., :k]
    vals = np.take_along_axis(np.asarray(x), idx, axis=-1)
    return of(vals, d).copy(), idx.astype(np.int32)


def gather_out_of_range(index: np.ndarray, extent: int) -> tuple[int, ...] | None:
    """The first lane (row-major) of `index` outside `0 .. extent - 1`, if any."""
    bad = (index < 0) | (index >= extent)
    if not bad.any():
        return None
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))


def gather(src: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
    """`src` at `index` along `axis` (every index already in range)."""
    return np.take_along_axis(np.asarray(src), np.asarray(index).astype(np.int64), axis=axis).copy()


# ---- dot -----------------------------------------------------------------------------------


# Below this many multiply-adds a product skips BLAS: starting (or contending for) its thread
# pool costs more than the arithmetic of a tile, by up to three orders of magnitude on a busy
# machine.
_SMALL_MATMUL = 1 << 21


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.shape[0] * a.shape[1] * b.shape[1] <= _SMALL_MATMUL:
        return np.einsum("ik,kj->ij", a, b, optimize=False)
    return np.matmul(a, b)


def tf32(x: np.ndarray) -> np.ndarray:
    """f32 values rounded to TF32 (10 mantissa bits), to nearest with ties away from zero, as
    `cvt.rna.tf32.f32` does; infinities and NaNs are kept."""
    x = np.asarray(x, dtype=F32)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(F32)
    return np.where(np.isfinite(x), rounded, x)


def dot(
    a: np.ndarray, b: np.ndarray, acc: np.ndarray | None, in_dtype: DType, acc_dtype: DType, tf32_inputs: bool = False
) -> np.ndarray:
    if acc_dtype.is_float:
        ct = _compute_dtype(acc_dtype)
        if tf32_inputs:
            a, b = tf32(a), tf32(b)
        res = _matmul(cast(a, in_dtype, ct), cast(b, in_dtype, ct))
        if acc is not None:
            res = res + cast(acc, acc_dtype, ct)
        return cast(np.asarray(res, dtype=ct.numpy), ct, acc_dtype)
    i64 = DTYPES["i64"]
    wa = cast(cast(a, in_dtype, acc_dtype), acc_dtype, i64)
    wb = cast(cast(b, in_dtype, acc_dtype), acc_dtype, i64)
    res = _matmul(wa, wb)
    if acc is not None:
        res = res + cast(acc, acc_dtype, i64)
    return cast(res, i64, acc_dtype)
