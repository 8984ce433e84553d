"""The `@triton.jit` helpers that generated modules call, each written into a module only when
its kernel uses it (`KernelWriter.need`)."""

from __future__ import annotations

from lowering.emit.pyexpr import nan_combine, product_combine

# name -> source (the module writer strips the blank lines around it)
HELPERS = {
    "_kir_max": "\n".join(nan_combine("@triton.jit", "_kir_max", "tl", "maximum", "maximum")),
    "_kir_min": "\n".join(nan_combine("@triton.jit", "_kir_min", "tl", "minimum", "minimum")),
    "_kir_imax": """
@triton.jit
def _kir_imax(a, b):
    return tl.maximum(a, b)
""",
    "_kir_imin": """
@triton.jit
def _kir_imin(a, b):
    return tl.minimum(a, b)
""",
    "_kir_prod": "\n".join(product_combine("@triton.jit", "_kir_prod")),
    "_kir_argmax": """
@triton.jit
def _kir_argmax(v1, i1, v2, i2):
    # KIR's argmax: NaN counts as the largest value; ties go to the lower index
    n1 = v1 != v1
    n2 = v2 != v2
    tie = ((v1 == v2) | (n1 & n2)) & (i1 < i2)
    first = (v1 > v2) | (n1 & ~n2) | tie
    return tl.where(first, v1, v2), tl.where(first, i1, i2)
""",
    "_kir_argmin": """
@triton.jit
def _kir_argmin(v1, i1, v2, i2):
    # KIR's argmin: NaN counts as the smallest value; ties go to the lower index
    n1 = v1 != v1
    n2 = v2 != v2
    tie = ((v1 == v2) | (n1 & n2)) & (i1 < i2)
    first = (v1 < v2) | (n1 & ~n2) | tie
    return tl.where(first, v1, v2), tl.where(first, i1, i2)
""",
    "_kir_float_to_int": """
@triton.jit
def _kir_float_to_int(x, LO: tl.constexpr, HI: tl.constexpr, DT: tl.constexpr):
    # KIR's float-to-integer cast: truncate toward zero, saturate, NaN gives 0
    y = x.to(DT)
    y = tl.where(x >= HI, HI, y)
    y = tl.where(x <= LO, LO, y)
    return tl.where(x != x, 0, y)
""",
    "_kir_f64_to_f32_odd": """
@triton.jit
def _kir_f64_to_f32_odd(x):
    # f64 to f32 rounding to odd: a second rounding, to a float of at most 16 bits, then rounds once
    f = x.to(tl.float32)
    back = f.to(tl.float64)
    inexact = (back != x) & (x == x)
    bits = f.to(tl.int32, bitcast=True)
    bits = tl.where(inexact & (tl.abs(back) > tl.abs(x)), bits - 1, bits)
    return tl.where(inexact, (bits | 1).to(tl.float32, bitcast=True), f)
""",
    "_kir_to_f8e4m3": """
@triton.jit
def _kir_to_f8e4m3(x):
    # f32 to fp8 E4M3 as KIR rounds it: past 464 (above 448 once rounded) is NaN; the hardware saturates
    nan = tl.full(x.shape, 0x7F, tl.uint8).to(tl.float8e4nv, bitcast=True)
    return tl.where(tl.abs(x) > 464.0, nan, x.to(tl.float8e4nv))
""",
    "_kir_to_f8e5m2": """
@triton.jit
def _kir_to_f8e5m2(x):
    # f32 to fp8 E5M2 as KIR rounds it: from 61440 on is infinity; the hardware saturates
    inf = tl.where(x > 0, 0x7C, 0xFC).to(tl.uint8).to(tl.float8e5, bitcast=True)
    return tl.where(tl.abs(x) >= 61440.0, inf, x.to(tl.float8e5))
""",
    "_kir_topk": """
@triton.jit
def _kir_topk(key, x, K: tl.constexpr, LARGEST: tl.constexpr, WORST: tl.constexpr, BITS: tl.constexpr):
    # KIR's topk along the last axis of a 2-D tile: K rounds, each taking the best element not
    # taken yet (NaN ranks above every number, ties go to the lowest index). `key` is what is
    # compared (x, or x in f32); the values come back bit-exact, with their i32 indices.
    N: tl.constexpr = key.shape[1]
    lanes = tl.arange(0, N)[None, :]
    slots = tl.arange(0, K)[None, :]
    bits = x.to(BITS, bitcast=True)
    taken = tl.zeros(key.shape, tl.int1)
    vals = tl.zeros((key.shape[0], K), BITS)
    idx = tl.zeros((key.shape[0], K), tl.int32)
    for r in tl.static_range(K):
        nan = ~taken & (key != key)
        num = ~taken & (key == key)
        if LARGEST:
            best = tl.max(tl.where(num, key, WORST), axis=1, keep_dims=True)
            use_nan = tl.max(nan.to(tl.int32), axis=1, keep_dims=True) > 0
        else:
            best = tl.min(tl.where(num, key, WORST), axis=1, keep_dims=True)
            use_nan = tl.max(num.to(tl.int32), axis=1, keep_dims=True) == 0
        hit = tl.where(use_nan, nan, num & (key == best))
        at = tl.min(tl.where(hit, lanes, N), axis=1, keep_dims=True)
        chosen = lanes == at
        taken = taken | chosen
        v = tl.sum(tl.where(chosen, bits, 0), axis=1, keep_dims=True).to(BITS)
        vals = tl.where(slots == r, v, vals)
        idx = tl.where(slots == r, at, idx)
    return vals.to(x.dtype, bitcast=True), idx
""",
}
