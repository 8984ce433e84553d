"""Random tile-level programs, lowered to Triton and run under Triton's CPU interpreter, agree
with the reference interpreter.

A small focused generator (not tests/property/kirgen.py, whose programs are made to parse,
not to run) writes two kinds of well-typed, in-bounds programs:

- **elementwise**: a 1-D masked block of two inputs of one dtype (and an f32 input for casts)
  through an expression of depth <= 3: arithmetic, comparisons and `where`, bit operations and
  shifts (by run-time amounts, so the out-of-range rules are exercised), division by run-time
  divisors (zero included), math calls, casts between dtypes (saturating float-to-int);
- **reduction**: a 2-D masked tile through an expression, then a reduction, arg-reduction or
  scan (forward or reversed) along a random axis.

Integers and booleans must agree exactly. Floats agree bit for bit under the interpreter
(both sides compute with numpy in the same dtype), except that a float sum or cumsum may add
in another order: those are compared with a tolerance. Derandomized, so a failure reproduces.
"""

from __future__ import annotations

import os
import random

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kir.interp import run
from kir.parser import parse
from lowering.targets.triton.runtime import run_triton
from tests.budget import examples

INTERPRET = os.environ.get("KIR_TRITON_DEVICE", "interpreter") != "cuda"  # `cuda`: run on the GPU
FLOATS = ("f32", "bf16", "f16")
INTS = ("i32", "i8", "i64", "u8", "u32")
NUMPY = {
    "f32": np.float32,
    "bf16": ml_dtypes.bfloat16,
    "f16": np.float16,
    "i32": np.int32,
    "i8": np.int8,
    "i64": np.int64,
    "u8": np.uint8,
    "u32": np.uint32,
}


def _literal(r: random.Random, dt: str) -> str:
    if dt in FLOATS:
        return r.choice(["0.5", "2.0", "1.5", "3.0", "0.25"])
    lo = 0 if dt.startswith("u") else -5
    return str(r.randint(lo, 9))


class Gen:
    """Expressions of one dtype over named leaves; every text is fully parenthesized."""

    def __init__(self, r: random.Random, dt: str, leaves: list[str], floats: list[str]):
        self.r, self.dt, self.leaves, self.floats = r, dt, leaves, floats

    def expr(self, depth: int) -> str:
        """An expression with a leaf on its left spine, so that every literal in it has a
        partner that gives it the dtype (a literal alone, or among literals, would be f32)."""
        r = self.r
        if depth == 0 or r.random() < 0.2:
            return r.choice(self.leaves)
        a = self.expr(depth - 1)
        b = _literal(r, self.dt) if r.random() < 0.2 else self.expr(depth - 1)
        if self.dt in FLOATS:
            ops = [
                f"({a} + {b})",
                f"({a} - {b})",
                f"({a} * {b})",
                f"({a} / {b})",
                f"({a} % {b})",
                f"maximum({a}, {b})",
                f"minimum({a}, {b})",
                f"(-{a})",
                f"abs({a})",
                f"exp(-abs({a}))",
                f"sqrt(abs({a}))",
                f"log(abs({a}) + 1.0)",
                f"sigmoid({a})",
                f"tanh({a})",
                f"sin({a})",
                f"floor({a})",
                f"where({a} < {b}, {a}, {b})",
                f"where({a} >= {b}, {a} * 0.5, {b})",
                f"cast<{self.dt}>(cast<{r.choice(['f32', 'bf16', 'f16', 'i32', 'i8'])}>({a}))",
                f"cast<{self.dt}>({r.choice(self.floats)})",
            ]
        else:
            signed = not self.dt.startswith("u")
            ops = [
                f"({a} + {b})",
                f"({a} - {b})",
                f"({a} * {b})",
                f"({a} / {b})",
                f"({a} % {b})",
                f"({a} & {b})",
                f"({a} | {b})",
                f"({a} ^ {b})",
                f"({a} << {b})",
                f"({a} >> {b})",
                f"maximum({a}, {b})",
                f"minimum({a}, {b})",
                f"(~{a})",
                f"where({a} < {b}, {a}, {b})",
                f"where(({a} != {b}) & ({b} > {_literal(r, self.dt)}), {b}, {a})",
                f"cast<{self.dt}>({r.choice(self.floats)} * 10.0)",
                f"cast<{self.dt}>(cast<{r.choice(INTS)}>({a}))",
            ]
            if signed:
                ops += [f"(-{a})", f"abs({a})"]
        return r.choice(ops)


def _inputs(r: random.Random, spec: dict[str, tuple[str, tuple[int, ...]]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(r.randrange(2**32))
    out = {}
    for name, (dt, shape) in spec.items():
        if dt in FLOATS:
            x = rng.standard_normal(shape) * 3
            out[name] = np.where(np.abs(x) < 1e-3, 1e-3, x).astype(NUMPY[dt])
        else:
            lo = 0 if dt.startswith("u") else -20
            out[name] = rng.integers(lo, 40, shape).astype(NUMPY[dt])
    return out


def elementwise(r: random.Random):
    dt = r.choice(FLOATS + INTS)
    block = r.choice([16, 32, 64])
    n = r.randint(1, 100)
    body = Gen(r, dt, ["x", "y"], ["f"]).expr(r.randint(1, 3))
    text = f"""
kernel elementwise<BLOCK = {block}>(a: global {dt}[N], b: global {dt}[N], g: global f32[N], out: out global {dt}[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  x = load(a[offs], mask = mask, other = {_literal(r, dt)})
  y = load(b[offs], mask = mask)
  f = load(g[offs], mask = mask)
  store(out[offs], {body}, mask = mask)
}}
"""
    inputs = _inputs(r, {"a": (dt, (n,)), "b": (dt, (n,)), "g": ("f32", (n,))})
    return text, inputs, set()


def reduction(r: random.Random):
    dt = r.choice(FLOATS + INTS)
    bm, bn = r.choice([2, 4, 8]), r.choice([16, 32])
    m, n = r.randint(1, 20), r.randint(1, bn)
    axis = r.randint(0, 1)
    value = Gen(r, dt, ["v"], ["w"]).expr(r.randint(0, 2))
    exact = ["max", "min", "argmax", "argmin", "cummax", "cummin"]
    fn = r.choice(exact + ["sum", "cumsum", "prod", "cumprod"])
    if fn in ("prod", "cumprod") and dt in FLOATS:
        value = f"(1.0 + {value} * 0.01)"  # products of numbers near 1 stay finite
    rev = ", reverse = 1" if fn.startswith("cum") and r.random() < 0.5 else ""
    call = f"{fn}({value}, axis = {axis}{rev})"
    result = "i32" if fn.startswith("arg") else dt
    if fn.startswith("cum"):
        store = f"store(full_out[rows[:, None], cols[None, :]], {call}, mask = mask)"
    elif axis == 1:
        store = f"store(rows_out[rows], {call}, mask = rmask)"
    else:
        store = f"store(cols_out[program_id(0), cols], {call}, mask = cmask)"
    text = f"""
kernel reduction<BM = {bm}, BN = {bn}>(a: global {dt}[M, N], g: global f32[M, N], rows_out: out global {result}[M],
    cols_out: out global {result}[M, N], full_out: out global {result}[M, N])
  where N <= BN
  target sm_90 grid(cdiv(M, BM)) warps(4)
{{
  rows = program_id(0) * BM + arange(0, BM)
  cols = arange(0, BN)
  rmask = rows < M
  cmask = cols < N
  mask = rmask[:, None] & cmask[None, :]
  v = load(a[rows[:, None], cols[None, :]], mask = mask, other = {_literal(r, dt)})
  w = load(g[rows[:, None], cols[None, :]], mask = mask)
  {store}
}}
"""
    inputs = _inputs(r, {"a": (dt, (m, n)), "g": ("f32", (m, n))})
    inexact = {"rows_out", "cols_out", "full_out"} if fn in ("sum", "cumsum", "prod", "cumprod") else set()
    return text, inputs, inexact


@settings(max_examples=examples(80), derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.sampled_from([elementwise, reduction]))
def test_random_programs_agree_with_the_interpreter(r: random.Random, kind):
    text, inputs, inexact = kind(r)
    program = parse(text)  # a generator bug if this fails
    want = run(program, inputs)
    got = run_triton(program, inputs, interpret=INTERPRET)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=f"{name}\n{text}")
        elif name in inexact or not INTERPRET:
            w64, g64 = w.astype(np.float64), g.astype(np.float64)
            scale = 1.0 + np.nanmax(np.abs(np.where(np.isfinite(w64), w64, 0.0)), initial=0.0)
            tol = 2e-2 if w.dtype != np.float32 else 1e-5
            np.testing.assert_allclose(g64, w64, rtol=tol, atol=tol * scale, equal_nan=True, err_msg=f"{name}\n{text}")
        else:
            # the same numbers (NaN where NaN; the payload of a NaN is not compared)
            np.testing.assert_array_equal(g.astype(np.float64), w.astype(np.float64), err_msg=f"{name}\n{text}")
