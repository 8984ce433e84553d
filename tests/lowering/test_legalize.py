"""LegalizePass: narrow-float transcendentals computed in f32, dots below the matrix instruction
unrolled to multiply-and-sum, and what the target lacks reported at the op. Each rewrite keeps
spans, verifies, round-trips and computes the same under the interpreter."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kir.dialect.tile import CastOp, DotOp, UnaryOp
from kir.interp import run as interp_run
from kir.parser import parse, parse_file
from kir.program import same_ir, span_of
from lowering.passes.legalize import TRANSCENDENTAL, LegalizePass
from tests.examples.references import BF16
from tests.lowering.helpers import assert_clean

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

UNARY = """\
kernel k<BLOCK = 64>(x: global DT[N], y: out global DT[N])
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  i = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[i], FN(load(x[i])))
}
"""

NUMPY = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "rsqrt": lambda v: 1 / np.sqrt(v),
    "erf": np.vectorize(math.erf, otypes=[np.float32]),
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
}


@pytest.mark.parametrize("fn", TRANSCENDENTAL)
def test_narrow_transcendentals_are_computed_in_f32(fn):
    original = parse(UNARY.replace("DT", "bf16").replace("FN", fn))
    result = LegalizePass().apply(original)
    assert result.diagnostics == []
    out = result.program
    assert_clean(out)
    assert f"store(y[i], cast<bf16>({fn}(cast<f32>(load(x[i])))))" in out.text()
    [unary] = [op for op in original.kernel.walk() if isinstance(op, UnaryOp)]
    new = [op for op in out.kernel.walk() if isinstance(op, UnaryOp | CastOp)]
    assert len(new) == 3 and {span_of(op) for op in new} == {span_of(unary)}
    rng = np.random.default_rng(0)
    x = (np.abs(rng.standard_normal(256)) + 0.25).astype(BF16)  # positive: log, sqrt, rsqrt are defined
    got = interp_run(out, {"x": x}, {})["y"]
    np.testing.assert_array_equal(got, interp_run(original, {"x": x}, {})["y"])
    want = NUMPY[fn](x.astype(np.float32)).astype(np.float32).astype(BF16)  # computed in float32
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2**-7, atol=0)


@pytest.mark.parametrize("fn", ["exp", "erf", "sqrt"])
def test_f32_math_is_left_alone(fn):
    original = parse(UNARY.replace("DT", "f32").replace("FN", fn))
    result = LegalizePass().apply(original)
    assert result.diagnostics == [] and same_ir(result.program, original)


SMALL_DOT = """\
kernel k<BM = 8, BN = 32, BK = 32>(a: global IN[M, K], b: global IN[K, N], c: out global OUT[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target TARGET grid(M / BM, N / BN) warps(WARPS)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(OUT[BM, BN])
  for k in 0 .. K / BK {
    acc = dot<OUT>(load(a[m0 : m0 + BM, k * BK : k * BK + BK]), load(b[k * BK : k * BK + BK, n0 : n0 + BN]), acc)
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}
"""


def small_dot(inp="bf16", out="f32", target="sm_90", bm=8):
    text = SMALL_DOT.replace("IN", inp).replace("OUT", out).replace("TARGET", target)
    text = text.replace("WARPS", "1" if target == "mtia-sim" else "4")
    return parse(text.replace("BM = 8", f"BM = {bm}"))


def dot_inputs(inp, seed=0):
    rng = np.random.default_rng(seed)
    if inp == "i8":
        return {
            "a": rng.integers(-100, 100, (32, 64)).astype(np.int8),
            "b": rng.integers(-100, 100, (64, 64)).astype(np.int8),
        }
    return {"a": rng.standard_normal((32, 64)).astype(BF16), "b": rng.standard_normal((64, 64)).astype(BF16)}


@pytest.mark.parametrize("inp, out", [("bf16", "f32"), ("bf16", "bf16"), ("i8", "i32")])
def test_a_dot_below_the_matrix_instruction_becomes_multiply_and_sum(inp, out):
    original = small_dot(inp, out)
    result = LegalizePass().apply(original)
    assert result.diagnostics == []
    program = result.program
    assert_clean(program)
    assert not [op for op in program.kernel.walk() if isinstance(op, DotOp)]
    if out == "f32":  # inline; with a cast accumulator the printer names the parts
        assert "acc = acc + sum(cast<f32>(load(a[" in program.text()
        assert "[:, :, None] * cast<f32>(load(b[" in program.text()
    [dot] = [span_of(op) for op in original.kernel.walk() if isinstance(op, DotOp)]
    assert dot in {span_of(op) for op in program.kernel.walk()}
    inputs = dot_inputs(inp)
    want = interp_run(original, dict(inputs), {})["c"]
    got = interp_run(program, dict(inputs), {})["c"]
    if inp == "i8":
        np.testing.assert_array_equal(got, want)
    else:  # the dot rounds once, the sum each level of its tree (in f32)
        rtol = 1e-5 if out == "f32" else 2**-7
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=1e-4)


def test_dots_the_matrix_unit_takes_are_left_alone():
    for program, target in ((small_dot(bm=16), "sm_90"), (small_dot(), "interp")):
        result = LegalizePass(target).apply(program)
        assert result.diagnostics == [] and same_ir(result.program, program)


def test_the_smallest_dot_depends_on_the_target():
    # mtia-sim's dot engine multiplies 32 x 32 x 32 blocks: BM = 16 is below it
    program = small_dot(bm=16, target="mtia-sim")
    out = LegalizePass("mtia-sim").apply(program).program
    assert not [op for op in out.kernel.walk() if isinstance(op, DotOp)]
    assert_clean(out, "mtia-sim")


def test_what_the_target_lacks_is_an_error_at_the_op_with_a_hint():
    program = parse_file(EXAMPLES / "gemm_hopper_ws.kir")
    assert LegalizePass("sm_90").apply(program).diagnostics == []
    result = LegalizePass("sm_80").apply(program)
    assert same_ir(result.program, program)
    found = {(d.rule, d.severity, d.message.split(" for ")[0]) for d in result.diagnostics}
    assert found == {
        ("lower.legalize", "error", "sm_80 has no tma"),
        ("lower.legalize", "error", "sm_80 has no wgmma"),
        ("lower.legalize", "error", "sm_80 has no mbarrier_tx"),
        ("lower.legalize", "error", "sm_80 cannot give roles register budgets (no setmaxnreg)"),
    }
    assert all(d.hint and d.span is not None for d in result.diagnostics)


def test_a_dtype_the_target_lacks_is_an_error():
    program = parse(UNARY.replace("DT", "f64").replace("FN", "exp").replace("sm_90", "mtia-sim"))
    diagnostics = LegalizePass("mtia-sim").apply(program).diagnostics
    assert diagnostics and all(d.rule == "lower.legalize" and "has no f64" in d.message for d in diagnostics)
    assert "f32" in diagnostics[0].hint
