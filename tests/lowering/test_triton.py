"""The Triton backend without a GPU.

- every tile-level example lowers, and its emitted module matches a snapshot
  (`tests/lowering/snapshots/triton/`; regenerate with `KIR_UPDATE_SNAPSHOTS=1`);
- under Triton's CPU interpreter, every example and a corpus of small programs that touch every
  tile-level op agree with the reference interpreter (`kir.interp.run`), and the examples with
  their float64 references;
- refusals (explicit level, tile shapes Triton cannot have, dot shapes, atomics) point at the op;
- a compile error in emitted code is reported at the KIR op that produced the failing line;
- (marked `slow`) every example and every corpus program compiles ahead of time to an sm_90
  cubin and a gfx942 hsaco, with the matrix instructions where a dot is.

Interpreted kernels run in one worker process started with TRITON_INTERPRET=1 (see
`lowering.targets.triton.runtime`); compiled reports are cached on disk by content hash
(`$KIR_CACHE_DIR`, default `~/.cache/kir`). On a GPU machine, `KIR_TRITON_DEVICE=cuda` runs the
same comparisons on the GPU instead of the interpreter (float tolerances then allow for the
hardware's transcendentals).
"""

from __future__ import annotations

import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.interp import run
from kir.parser import parse, parse_file
from lowering import lower
from lowering.compile import compile_program
from lowering.emit.base import program_level
from lowering.targets.triton.compile import compile_lowered, replace_line
from lowering.targets.triton.runtime import run_lowered, run_triton
from tests.examples.references import CASES, Case

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SNAPSHOTS = Path(__file__).parent / "snapshots" / "triton"
INTERPRET = os.environ.get("KIR_TRITON_DEVICE", "interpreter") != "cuda"
TILE_CASES = [c for c in CASES if program_level(parse_file(EXAMPLES / f"{c.example}.kir")) == "tile"]
BF16 = ml_dtypes.bfloat16


def _example(name: str):
    return parse_file(EXAMPLES / f"{name}.kir")


def _close(name: str, want: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> None:
    """Integers and booleans exactly; floats within the tolerance, NaN where NaN."""
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"{name}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    )
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(
            got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True, err_msg=name
        )


# ---- the examples --------------------------------------------------------------------------------


def test_the_explicit_example_is_refused_at_its_kernel():
    program = _example("gemm_hopper_ws")
    with pytest.raises(KirError) as err:
        lower(program, "triton")
    (d,) = err.value.diagnostics
    assert d.rule == "lower.level" and d.span == program.span()


@pytest.mark.parametrize("case", TILE_CASES, ids=[c.example for c in TILE_CASES])
def test_example_lowers_with_defaults_and_preset(case: Case):
    program = _example(case.example)
    for params in ({}, case.params):
        out = lower(program, "triton", params)
        assert out.entry == program.name and f"def {out.entry}(" in out.source
        assert out.shape_symbols == program.kernel.shape_symbols
        compile(out.source, "<triton>", "exec")  # valid Python
        # Every line of the kernel's body maps to the KIR op that produced it.
        lines = out.source.split("\n")
        start = next(i for i, line in enumerate(lines, 1) if line.startswith(f"def {out.entry}("))
        for n in range(start, len(lines)):
            if lines[n - 1].strip():
                assert n in out.line_spans, f"generated line {n} has no KIR op: {lines[n - 1]}"


@pytest.mark.parametrize("case", TILE_CASES, ids=[c.example for c in TILE_CASES])
def test_example_snapshot(case: Case):
    source = lower(_example(case.example), "triton", case.params).source
    path = SNAPSHOTS / f"{case.example}.py"
    if os.environ.get("KIR_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    assert path.exists(), f"no snapshot {path.name}: run with KIR_UPDATE_SNAPSHOTS=1"
    assert source == path.read_text(), f"{path.name} changed: check the diff, then KIR_UPDATE_SNAPSHOTS=1"


def test_no_stale_snapshots():
    assert sorted(p.stem for p in SNAPSHOTS.glob("*.py")) == sorted(c.example for c in TILE_CASES)


@pytest.mark.parametrize("case", TILE_CASES, ids=[c.example for c in TILE_CASES])
def test_example_interpreted_matches_the_interpreter(case: Case):
    program = _example(case.example)
    inputs = case.make(np.random.default_rng(0))
    want = run(program, inputs, case.params)
    got = run_triton(program, inputs, case.params, interpret=INTERPRET)
    assert sorted(got) == sorted(want)
    for name in want:
        _close(name, want[name], got[name], case.rtol, case.atol)
    for name, value in inputs.items():  # inputs come back untouched
        np.testing.assert_array_equal(got[name].view(np.uint8), np.asarray(value).view(np.uint8))
    reference = case.reference(inputs)
    if case.check is not None:
        case.check(inputs, got)
    else:
        for name, value in reference.items():
            np.testing.assert_allclose(
                got[name].astype(np.float64), value, rtol=case.rtol, atol=case.atol, err_msg=name
            )


# ---- a corpus of small programs: every tile-level op -------------------------------------------


def _normal(rng, shape, dtype=np.float32):
    x = rng.standard_normal(shape)
    return np.where(np.abs(x) < 1e-3, 1e-3, x).astype(dtype)


def _ints(rng, lo, hi, shape, dtype):
    return rng.integers(lo, hi, shape).astype(dtype)


TOPK = """
kernel topk_rows<BM = 4, BN = 16, K = 4>(x: global f32[M, N], vals: out global f32[M, K],
    idx: out global i32[M, K], svals: out global f32[M, K], sidx: out global i32[M, K],
    flat: out global bf16[K], fidx: out global i32[K])
  where N <= BN, M % BM == 0
  target sm_90 grid(M / BM) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = arange(0, BN)
  v = load(x[rows[:, None], cols[None, :]], mask = cols[None, :] < N, other = -inf)
  tv, ti = topk(v, k = K)
  ks = arange(0, K)
  store(vals[rows[:, None], ks[None, :]], tv)
  store(idx[rows[:, None], ks[None, :]], ti)
  sv, si = topk(where(cols[None, :] < N, v, inf), k = K, largest = 0)
  store(svals[rows[:, None], ks[None, :]], sv)
  store(sidx[rows[:, None], ks[None, :]], si)
  fv, fi = topk(cast<bf16>(load(x[0, cols], mask = cols < N, other = 0.0)), k = K)
  store(flat[ks], fv)
  store(fidx[ks], fi)
}
"""


def _topk_inputs(rng):
    x = _normal(rng, (8, 12))
    x[1, 3] = x[1, 7] = x[1].max() + 1  # a tie at the top
    x[2, 5] = np.nan  # NaN ranks above every number
    x[3, :] = 1.0  # all equal: indices in order
    return {"x": x}


SCANS = """
kernel scans<B = 32>(x: global bf16[N], i: global i16[N], s: out global bf16[N], m: out global bf16[N],
    r: out global i16[N], p: out global i16[N], c: out global f32[N], t: out global i1[N])
  where N <= B
  target sm_90 grid(1) warps(4)
{
  offs = arange(0, B)
  mask = offs < N
  v = load(x[offs], mask = mask)
  w = load(i[offs], mask = mask)
  store(s[offs], cumsum(v, axis = 0), mask = mask)
  store(m[offs], cummax(v, axis = 0, reverse = 1), mask = mask)
  store(r[offs], cummin(w, axis = 0, reverse = 1), mask = mask)
  store(p[offs], cumprod(w, axis = 0), mask = mask)
  store(c[offs], cumprod(cast<f32>(v), axis = 0, reverse = 1), mask = mask)
  store(t[offs], cumsum(w > 0, axis = 0) ^ cummax(w > 1, axis = 0) | cummin(w < 2, axis = 0, reverse = 1), mask = mask)
}
"""

REDUCTIONS = """
kernel reductions<BM = 8, BN = 16>(x: global f32[BM, BN], y: global i8[BM, BN], a: out global i32[BM],
    b: out global i32[BN], c: out global i32[BM], d: out global i32[BN], mx: out global f32[BM],
    mn: out global i8[BN], sm: out global i8[BM], pr: out global f32[BN], bf: out global bf16[BM],
    bits: out global i1[BM])
  target sm_90 grid(1) warps(4)
{
  r = arange(0, BM)
  k = arange(0, BN)
  v = load(x[r[:, None], k[None, :]])
  w = load(y[r[:, None], k[None, :]])
  store(a[r], argmax(v, axis = 1))
  store(b[k], argmin(v, axis = 0))
  store(c[r], argmax(w, axis = 1))
  store(d[k], argmin(w, axis = 0))
  store(mx[r], max(v, axis = 1))
  store(mn[k], min(w, axis = 0))
  store(sm[r], sum(w, axis = 1) + prod(w, axis = 1))
  store(pr[k], prod(v, axis = 0))
  store(bf[r], max(cast<bf16>(v), axis = 1) - min(cast<bf16>(v), axis = 1))
  store(bits[r], sum(w > 0, axis = 1) ^ max(w > 50, axis = 1) | prod(w > -90, axis = 1))
}
"""


def _reduction_inputs(rng):
    x = _normal(rng, (8, 16))
    x[1, 3] = x[1, 7] = x[1].max() + 1  # ties go to the lower index
    x[2, 5] = np.nan  # NaN wins argmax and argmin
    x[3, :] = 2.0
    y = _ints(rng, -100, 100, (8, 16), np.int8)
    y[4, :] = 7
    return {"x": x, "y": y}


INTEGERS = """
kernel integers<B = 64>(a: global i32[N], b: global i32[N], u: global u32[N], q: out global i32[N],
    r: out global i32[N], sl: out global i32[N], sr: out global i32[N], ur: out global u32[N],
    uq: out global u32[N], bits: out global i32[N], small: out global i8[N], flags: out global i1[N])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  offs = program_id(0) * B + arange(0, B)
  m = offs < N
  x = load(a[offs], mask = m)
  y = load(b[offs], mask = m)
  z = load(u[offs], mask = m)
  store(q[offs], x / y, mask = m)
  store(r[offs], x % y, mask = m)
  store(sl[offs], x << y, mask = m)
  store(sr[offs], x >> y, mask = m)
  store(ur[offs], z >> cast<u32>(y) ^ z << 3, mask = m)
  store(uq[offs], z / cast<u32>(y) + z % 7 + ~z, mask = m)
  store(bits[offs], ((x & y) | ~x ^ 5) + maximum(x, y) * minimum(x, -y) - abs(x) + x / 4 - x % 3, mask = m)
  store(small[offs], cast<i8>(x) * cast<i8>(y) + i8(100), mask = m)
  p = x > 0
  q1 = y < 3
  store(flags[offs], (p ^ q1) | ~p & (p == q1) | p + q1 | p * q1 | (p < q1) | maximum(p, q1) | p / q1 | p % q1 | p << q1, mask = m)
}
"""


def _integer_inputs(rng):
    b = _ints(rng, -5, 40, 100, np.int32)
    b[::7] = 0  # x / 0 is -1, x % 0 is x; shifts past the width give 0 or the sign
    return {
        "a": _ints(rng, -50, 50, 100, np.int32),
        "b": b,
        "u": rng.integers(0, 2**32, 100, dtype=np.uint64).astype(np.uint32),
    }


CASTS = """
kernel casts<B = 64>(x: global f32[N], d: global f64[N], l: global i64[N], i8s: out global i8[N],
    u8s: out global u8[N], i32s: out global i32[N], bf: out global bf16[N], hf: out global f16[N],
    e4: out global f8e4m3[N], e5: out global f8e5m2[N], lf: out global f32[N], lb: out global bf16[N],
    bo: out global i1[N], back: out global f32[N], wide: out global u64[N])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  offs = program_id(0) * B + arange(0, B)
  m = offs < N
  v = load(x[offs], mask = m)
  w = load(d[offs], mask = m)
  n = load(l[offs], mask = m)
  store(i8s[offs], cast<i8>(v * 100.0), mask = m)
  store(u8s[offs], cast<u8>(v * 100.0), mask = m)
  store(i32s[offs], cast<i32>(v * 3.0e9), mask = m)
  store(bf[offs], cast<bf16>(w), mask = m)
  store(hf[offs], cast<f16>(w * 1.0e4), mask = m)
  store(e4[offs], cast<f8e4m3>(v * 300.0), mask = m)
  store(e5[offs], cast<f8e5m2>(v * 40000.0), mask = m)
  store(lf[offs], cast<f32>(n), mask = m)
  store(lb[offs], cast<bf16>(n), mask = m)
  store(bo[offs], cast<i1>(cast<i32>(v * 2.0)), mask = m)
  store(back[offs], cast<f32>(cast<f8e4m3>(v)) + cast<f32>(cast<bf16>(v)) + cast<f32>(cast<i1>(v)) + cast<f32>(N), mask = m)
  store(wide[offs], cast<u64>(cast<i8>(n)) + cast<u64>(i64(-1)), mask = m)
}
"""


def _cast_inputs(rng):
    x = _normal(rng, 100)
    x[:4] = [np.nan, np.inf, -np.inf, 1e10]  # saturation, NaN to 0
    d = _normal(rng, 100, np.float64) * 1e3
    d[0] = 1.0 + 2.0**-8 + 2.0**-30  # just above a bf16 tie: rounds once, up
    n = rng.integers(-(2**62), 2**62, 100).astype(np.int64)
    n[0] = 2**53 + 1
    return {"x": x, "d": d, "l": n}


MATH = """
kernel math<B = 64>(x: global f32[N], h: global f16[N], y: out global f32[N], z: out global f16[N],
    e: out global f64[N])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  offs = program_id(0) * B + arange(0, B)
  m = offs < N
  v = load(x[offs], mask = m)
  w = load(h[offs], mask = m)
  a = exp(v) + exp2(v) + log(abs(v)) + log2(abs(v)) + sqrt(abs(v)) + rsqrt(abs(v)) + erf(v) + sigmoid(v)
  c = tanh(v) + sin(v) + cos(v) + floor(v) + ceil(v) + pow(abs(v), v) + v % 0.75 + maximum(v, nan) - minimum(v, 1.0)
  store(y[offs], a + c - v / 3.0, mask = m)
  store(z[offs], exp(w) * tanh(w) - w / f16(3.0) + abs(w) + -w - sqrt(abs(w)), mask = m)
  f = cast<f64>(v)
  store(e[offs], exp(f) / 3.0 + sqrt(abs(f)) + erf(f) + tanh(f) + pow(abs(f), f64(0.5)), mask = m)
}
"""

ATOMICS = """
kernel atomics<B = 64, NB = 16>(x: global i32[N], h: out global i32[NB], s: out global f32[NB],
    mx: out global i32[NB], mn: out global f32[NB], swapped: out global i32[N])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  offs = program_id(0) * B + arange(0, B)
  m = offs < N
  v = load(x[offs], mask = m)
  bucket = (v % NB + NB) % NB
  atomic_add(h[bucket], 1, mask = m)
  atomic_add(s[bucket], cast<f32>(v), mask = m)
  atomic_max(mx[bucket], v, mask = m)
  atomic_min(mn[bucket], cast<f32>(v) * 0.5, mask = m)
  old = atomic_xchg(swapped[offs], v * 2, mask = m & offs % 2 == 0)
  store(swapped[offs], old + 1, mask = m & offs % 2 == 1)
  atomic_add(h[0], 0)
}
"""

CONTROL = """
kernel control<B = 32, S = 2>(x: global f32[N], y: out global f32[N], c: out global i32[B],
    g: out global i32[3])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  offs = program_id(0) * B + arange(0, B)
  m = offs < N
  v = load(x[offs], mask = m)
  a = zeros(f32[B])
  b = full(f32[B], 1.0)
  cnt = 0
  for k in 0 .. 7 step 2 pipeline(stages = S) warp_specialize {
    t = a
    a = b + v
    b = t * 0.5
    cnt = cnt + k
    if k == 4 {
      a = a * 2.0
    } else if k > 4 {
      cnt = cnt - 1
    }
  }
  if program_id(0) == num_programs(0) - 1 {
    v = -v
  }
  store(y[offs], a - b + v, mask = m)
  flat = reshape(trans(reshape(full(i32[B], cnt) + arange(0, B), [2, B / 2])), [B])
  store(c[arange(0, B)], reshape(broadcast(flat[None, :], [1, B]), [B]))
  n = N
  q = n / 3 + n % 5 - num_programs(0)
  store(g[arange(0, 4) / 2], broadcast(q, [4]), mask = arange(0, 4) < 3)
  one = cast<i32>(max(v, axis = 0) > 0.0)[None]
  store(g[2], sum(one, axis = 0) + program_id(0) * 0)
}
"""

DOTS = """
kernel dots<BM = 16, BN = 16, BK = 32>(a: global f16[BM, BK], b: global f16[BK, BN], i: global i8[BM, BK],
    j: global i8[BK, BN], f: global f32[BM, BK], fb: global f32[BK, BN], c: out global f16[BM, BN],
    d: out global i32[BM, BN], e: out global f32[BM, BN], g: out global f64[BM, BN])
  target sm_90 grid(1) warps(4)
{
  at = load(a[0 : BM, 0 : BK])
  bt = load(b[0 : BK, 0 : BN])
  store(c[0 : BM, 0 : BN], dot<f16>(at, bt, full(f16[BM, BN], 0.5)))
  store(d[0 : BM, 0 : BN], dot<i32>(load(i[0 : BM, 0 : BK]), load(j[0 : BK, 0 : BN])))
  ft = load(f[0 : BM, 0 : BK])
  fbt = load(fb[0 : BK, 0 : BN])
  store(e[0 : BM, 0 : BN], dot<f32>(ft, fbt) + dot<f32>(cast<bf16>(ft), trans(cast<bf16>(trans(fbt)))))
  store(g[0 : BM, 0 : BN], dot<f64>(ft, fbt))
}
"""


def _dot_inputs(rng):
    return {
        "a": _normal(rng, (16, 32), np.float16),
        "b": _normal(rng, (32, 16), np.float16),
        "i": _ints(rng, -100, 100, (16, 32), np.int8),
        "j": _ints(rng, -100, 100, (32, 16), np.int8),
        "f": _normal(rng, (16, 32)),
        "fb": _normal(rng, (32, 16)),
    }


STRUCTURE = """
kernel structure<B = 16>(x: global f32[N], y: out global f32[N], z: out global i64[N], w: out global i32[4])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  offs = program_id(0) * B + arange(0, B)
  m = offs < N
  v = load(x[offs], mask = m)
  a = v
  b = v * 2.0
  same = v + 1.0
  total = i64(0)
  for i in i64(0) .. i64(3) {
    tmp = a
    a = b
    b = tmp
    for j in 0 .. 3 {
      total = total + i + cast<i64>(j)
      if j == 1 {
        a = a + 1.0
      }
    }
  }
  acc = 0
  for k in 0 .. N step B {
    acc = acc + 1
  }
  for q in 0 .. 2 {
    acc = acc * 2
  }
  t = a - b
  if total > i64(10) {
    t = t * same
  }
  t = t + 1.0
  store(y[offs], t, mask = m)
  store(z[offs], broadcast(total, [B]), mask = m)
  store(w[arange(0, 4)], full(i32[4], acc) + arange(0, 4))
}
"""

STRIDED = """
kernel strided<BM = 8, BN = 8>(x: global f32[M, N] strides(SM, SN), s: global i64[2], y: out global f32[N, M],
    t: out global f32[M])
  where M <= BM, N <= BN
  target sm_90 grid(1) warps(4)
{
  r = arange(0, BM)
  k = arange(0, BN)
  mk = r[:, None] < M & k[None, :] < N
  v = load(x[r[:, None], k[None, :]], mask = mk)
  store(y[k[:, None], r[None, :]], trans(v), mask = trans(mk))
  one = load(x[cast<i32>(load(s[1])), 0])
  store(t[0 : BM], sum(v, axis = 1) + one, mask = r < M)
  store(t[0], one * 2.0)
}
"""


def _strided_inputs(rng):
    base = _normal(rng, (10, 12))
    return {"x": base[1:7:2, 2:11:2], "s": np.array([0, 2], np.int64)}


# name: (text, inputs, {output: (rtol, atol)} where floats are not bit-exact, params)
CORPUS = {
    "topk": (TOPK, _topk_inputs, {}, {}),
    # a bf16 scan accumulates in f32 on Triton, in bf16 (rounding each step) in KIR
    "scans": (
        SCANS,
        lambda rng: {"x": _normal(rng, 20, BF16), "i": _ints(rng, -3, 4, 20, np.int16)},
        {"s": (0.05, 0.1)},
        {},
    ),
    "reductions": (REDUCTIONS, _reduction_inputs, {"pr": (1e-5, 1e-6)}, {}),
    "integers": (INTEGERS, _integer_inputs, {}, {}),
    "casts": (CASTS, _cast_inputs, {}, {}),
    # transcendentals: numpy on both sides under the interpreter (erf differs in the last bit)
    "math": (
        MATH,
        lambda rng: {"x": _normal(rng, 70), "h": _normal(rng, 70, np.float16)},
        {"y": (1e-5, 1e-5), "z": (2e-3, 2e-3), "e": (1e-12, 1e-12)},
        {},
    ),
    "atomics": (
        ATOMICS,
        lambda rng: {
            "x": _ints(rng, -100, 100, 150, np.int32),
            "h": np.zeros(16, np.int32),
            "s": np.zeros(16, np.float32),
            "mx": np.full(16, -1000, np.int32),
            "mn": np.full(16, 1e9, np.float32),
            "swapped": np.zeros(150, np.int32),
        },
        {"s": (1e-5, 1e-4)},
        {},
    ),
    "control": (CONTROL, lambda rng: {"x": _normal(rng, 70)}, {}, {}),
    "dots": (DOTS, _dot_inputs, {"c": (1e-3, 1e-2), "e": (1e-5, 1e-4), "g": (1e-12, 1e-12)}, {}),
    "strided": (STRIDED, _strided_inputs, {"t": (1e-6, 1e-6)}, {}),
    # nested loops, a swap of carried values, an i64 counter, branches that update carried values
    "structure": (STRUCTURE, lambda rng: {"x": _normal(rng, 40)}, {}, {}),
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_interpreted_matches_the_interpreter(name: str):
    text, make, tolerances, params = CORPUS[name]
    program = parse(text)
    inputs = make(np.random.default_rng(0))
    want = run(program, inputs, params)
    got = run_triton(program, inputs, params, interpret=INTERPRET)
    for out in want:
        rtol, atol = tolerances.get(out, (0.0, 0.0) if INTERPRET else (1e-5, 1e-5))
        _close(out, want[out], got[out], rtol, atol)


def test_strided_arguments_keep_their_layout():
    """A tensor declared with stride symbols is passed with the strides it was bound with."""
    inputs = _strided_inputs(np.random.default_rng(1))
    program = parse(STRIDED)
    got = run_triton(program, inputs, interpret=INTERPRET)
    np.testing.assert_array_equal(got["y"], inputs["x"].T)


def test_carried_values_keep_their_names():
    """A loop-carried variable is one Python variable: updated in place in the body and in the
    branches, with no copies where KIR rebinds a name."""
    source = lower(parse(STRUCTURE), "triton").source
    assert "a_1 = a_1 + 1.0" in source and "t = t * same" in source and "a, b = a_1, a" in source
    assert "total = total + i + tl.cast(j, tl.int64)" in source
    assert "for _k in range(0, N, B):" in source  # an unused loop variable


def test_warp_specialize_is_noted():
    out = lower(parse(CONTROL), "triton")
    assert "warp_specialize=True" in out.source and "num_stages=S" in out.source
    assert any("warp_specialize" in note for note in out.options["notes"])


# ---- refusals ------------------------------------------------------------------------------------


def _refusal(text: str, params=None) -> tuple:
    program = parse(text)
    with pytest.raises(KirError) as err:
        lower(program, "triton", params)
    (d,) = err.value.diagnostics
    line = text.splitlines()[d.span.line - 1] if d.span else ""
    return d, line


ROW_SUM = """
kernel row_sum<B = 128>(x: global f32[M, N], y: out global f32[M])
  target sm_90 grid(M) warps(4)
{
  cols = arange(0, B)
  store(y[program_id(0)], sum(load(x[program_id(0), cols], mask = cols < N), axis = 0))
}
"""


def test_power_of_two_tiles_only():
    d, line = _refusal(ROW_SUM, {"B": 100})
    assert d.rule == "lower.tile-shape" and "powers of two" in d.message
    assert "arange(0, B)" in line


def test_tile_shapes_from_shape_symbols_are_refused():
    d, line = _refusal(ROW_SUM.replace("arange(0, B)", "arange(0, N)"))
    assert d.rule == "lower.tile-shape" and "shape symbol" in d.message and "arange(0, N)" in line


def test_dot_k_too_small_is_refused():
    text = """
kernel small_dot<B = 16, K = 8>(a: global bf16[B, K], b: global bf16[K, B], c: out global f32[B, B])
  target sm_90 grid(1) warps(4)
{
  r = arange(0, B)
  k = arange(0, K)
  c_tile = dot<f32>(load(a[r[:, None], k[None, :]]), load(b[k[:, None], r[None, :]]))
  store(c[r[:, None], r[None, :]], c_tile)
}
"""
    d, line = _refusal(text)
    assert d.rule == "lower.dot-shape" and "K >= 16" in d.message and "dot<f32>" in line
    assert lower(parse(text), "triton", {"K": 16}).source  # K = 16 is fine


def test_atomic_dtype_is_refused():
    text = """
kernel narrow_hist<B = 64>(x: global i32[N], h: out global i8[16])
  target sm_90 grid(cdiv(N, B)) warps(4)
{
  offs = program_id(0) * B + arange(0, B)
  atomic_add(h[load(x[offs], mask = offs < N) % 16], i8(1), mask = offs < N)
}
"""
    d, line = _refusal(text)
    assert d.rule == "lower.unsupported" and "atomic_add on i8" in d.message and "atomic_add" in line


# ---- compile errors in generated code ----------------------------------------------------------


def _corrupted(example: str, starts: str, text: str):
    """Lower an example and replace the generated line that starts with `starts`."""
    case = next(c for c in CASES if c.example == example)
    lowered = lower(_example(example), "triton", case.params)
    lines = lowered.source.split("\n")
    n = next(i for i, line in enumerate(lines, 1) if line.strip().startswith(starts))
    return lowered, n, replace_line(lowered, n, text)


def _kir_line(example: str, span) -> str:
    return (EXAMPLES / f"{example}.kir").read_text().splitlines()[span.line - 1]


def test_compile_error_points_at_the_kir_op():
    lowered, n, broken = _corrupted(
        "vector_add", "b = tl.load", "b = tl.load(y + offs, mask=mask, other=undefined_name)"
    )
    report = compile_lowered(broken, "sm_90")
    assert not report.ok
    (d,) = report.diagnostics
    assert d.rule == "lower.compile" and d.span == lowered.span_for_line(n)
    assert "b = load(y[offs]" in _kir_line("vector_add", d.span) and "undefined_name" in d.message


def test_compile_error_inside_a_loop_points_at_the_kir_op():
    _, _, broken = _corrupted(
        "gemm_bias_gelu", "acc = tl.dot", "acc = tl.dot(at, bt, acc, out_dtype=tl.float32) + tl.arange(0, 3)"
    )
    report = compile_lowered(broken, "gfx942")
    (d,) = report.diagnostics
    assert d.rule == "lower.compile" and "power of 2" in d.message
    assert "acc = dot<f32>(at, bt, acc)" in _kir_line("gemm_bias_gelu", d.span)


def test_compile_error_under_the_interpreter_points_at_the_kir_op():
    _, _, broken = _corrupted("softmax", "e = tl.exp", "e = tl.exp(v - no_such_max)")
    case = next(c for c in CASES if c.example == "softmax")
    with pytest.raises(KirError) as err:
        run_lowered(broken, case.make(np.random.default_rng(0)), interpret=INTERPRET)
    (d,) = err.value.diagnostics
    assert d.rule == "lower.compile" and "e = exp(v - max(v, axis = 0))" in _kir_line("softmax", d.span)


# ---- ahead-of-time compilation (slow: a few seconds uncached) ------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
@pytest.mark.parametrize("case", TILE_CASES, ids=[c.example for c in TILE_CASES])
def test_example_compiles_ahead_of_time(case: Case, arch: str):
    report = compile_program(_example(case.example), "triton", arch, case.params)
    assert report.ok, [d.message for d in report.diagnostics]
    assert report.registers and report.registers > 0 and report.spills == 0 and report.local_bytes == 0
    binary = Path(report.binary)
    assert binary.suffix == (".cubin" if arch == "sm_90" else ".hsaco") and binary.stat().st_size > 0
    assert report.entry == case.example and report.num_warps and not report.diagnostics
    if case.example == "gemm_bias_gelu":  # bf16 operands: tensor cores / matrix cores
        assert report.instructions["mma" if arch == "sm_90" else "mfma"]
        assert report.shared_bytes > 0


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_compiles_ahead_of_time(name: str, arch: str):
    text, _, _, params = CORPUS[name]
    report = compile_program(parse(text), "triton", arch, params)
    assert report.ok, [d.message for d in report.diagnostics]
    assert report.registers and report.registers > 0


@pytest.mark.slow
def test_the_report_reads_the_hardware_facts():
    """A 128 x 128 f32 accumulator on 4 warps is 128 registers a thread before the epilogue:
    wgmma, the register ceiling, and spills, as ptxas reports them."""
    report = compile_program(_example("gemm_bias_gelu"), "triton", "sm_90", {"BM": 128, "BN": 128, "BK": 64})
    assert report.ok and report.instructions["wgmma"] and report.instructions["HGMMA"]  # in the PTX and the SASS
    assert f"Used {report.registers} registers" in report.log and report.registers == 255
    assert report.spills > 0 and report.spill_stores > 0 and report.spill_loads > 0
    assert "compile.spills" in {d.rule for d in report.diagnostics}  # a warning at the kernel
    assert all(d.severity == "warning" and d.span == report_kernel_span() for d in report.diagnostics)
    assert report.shared_bytes >= (128 * 64 + 64 * 128) * 2  # at least one stage of A and B tiles
    small = compile_program(_example("gemm_bias_gelu"), "triton", "sm_90", {"BM": 64, "BN": 64, "BK": 32})
    assert small.spills == 0 and small.registers < report.registers and small.diagnostics == []
    assert report.to_json()["arch"] == "sm_90" and report.to_json()["spills"] == report.spills


def report_kernel_span():
    return _example("gemm_bias_gelu").span()


def test_ptxas_reason_is_ptxas_own_error_line():
    import subprocess

    from triton.runtime.errors import PTXASError

    from lowering.targets.triton.compile import _reason, ptxas_reason

    log = (
        "PTXAS error: Internal Triton PTX codegen error\n`ptxas` stderr:\n"
        "ptxas fatal   : (C7602) Insufficient registers (128) to compile instruction at line 422 in function k. "
        "Try to compile with register target of 154 or higher.\n"
        "ptxas fatal   : Ptx assembly aborted due to errors\n\nRepro command: ptxas k.ptx"
    )
    try:
        try:
            raise subprocess.CalledProcessError(255, ["ptxas"])
        except subprocess.CalledProcessError:
            raise PTXASError(log) from None
    except PTXASError as err:
        caught = err
    reason = ptxas_reason(caught)
    assert reason == (
        "ptxas: (C7602) Insufficient registers (128) to compile instruction at line 422 in function k. "
        "Try to compile with register target of 154 or higher."
    )
    assert _reason(caught) == reason
    assert ptxas_reason(ValueError("x")) is None
