"""`dot<f32>(a, b, acc, precision = tf32)`: TF32 as a dot precision, from the text to the chip.

The reference interpreter rounds the operands to TF32 as the hardware does (so a CPU run tells
whether the task's tolerance admits it), the cost model charges the tensor cores' TF32 rate,
Triton gets `input_precision="tf32"` where the target has TF32 units (and "ieee" where not), and
the compiled cubin multiplies on the tensor cores instead of FFMA.
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodel import predict
from kir.diagnostics import KirError
from kir.interp import run
from kir.interp.values import tf32
from kir.parser import parse
from lowering import lower
from lowering.compile import compile_program

GEMM = """kernel gemm<BM = 32, BN = 32, BK = 16>(a: global f32[M, K], b: global f32[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target TARGET grid(M / BM, N / BN) warps(4)
{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>(at, bt, accPRECISION)
  }
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}
"""


def gemm(precision: str = ", precision = tf32", target: str = "sm_90") -> str:
    return GEMM.replace("PRECISION", precision).replace("TARGET", target)


def test_the_precision_prints_back_and_ieee_is_the_default():
    program = parse(gemm())
    assert "dot<f32>(at, bt, acc, precision = tf32)" in program.text()
    assert parse(program.text()).text() == program.text()
    explicit = parse(gemm(", precision = ieee"))
    assert explicit.text() == parse(gemm("")).text()  # one canonical text for the default


@pytest.mark.parametrize(
    ("edit", "column_text", "message"),
    [
        (", precision = fast", "fast", "precision is `ieee` or `tf32`"),
        (", precision = 3", "3", "precision is `ieee` or `tf32`"),
        (", exact = tf32", "tf32", "dot has no argument 'exact'"),
    ],
)
def test_a_wrong_precision_is_located(edit, column_text, message):
    text = gemm(edit)
    with pytest.raises(KirError) as err:
        parse(text)
    d = err.value.diagnostics[0]
    line = text.splitlines()[d.span.line - 1]
    assert message in d.message and line[d.span.col - 1 :].startswith(column_text)


def test_tf32_is_for_f32_operands():
    text = gemm().replace("a: global f32", "a: global bf16").replace("b: global f32", "b: global bf16")
    with pytest.raises(KirError) as err:
        parse(text)
    d = err.value.diagnostics[0]
    assert d.rule == "types.dot-precision" and "not bf16 into f32" in d.message and d.span.line == 11


def test_tf32_rounds_to_ten_mantissa_bits_to_nearest_ties_away():
    x = np.array([1.0 + 2**-11, 1.0 + 2**-12, -(1.0 + 3 * 2**-11), 1.0 + 2**-10 + 2**-11, np.inf, np.nan], np.float32)
    got = tf32(x)
    assert got[0] == 1.0 + 2**-10  # a tie rounds away from zero (cvt.rna)
    assert got[1] == 1.0  # below the half: down
    assert got[2] == -(1.0 + 2 * 2**-10)
    assert got[3] == 1.0 + 2 * 2**-10
    assert np.isinf(got[4]) and np.isnan(got[5])
    assert np.array_equal(tf32(got[:4]), got[:4])  # TF32 values are kept


def test_the_interpreter_multiplies_tf32_operands():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    c = np.zeros((64, 64), np.float32)
    got = run(parse(gemm()), {"a": a, "b": b, "c": c})["c"]
    exact = a.astype(np.float64) @ b.astype(np.float64)
    rounded = tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)
    assert np.allclose(got, rounded, rtol=1e-5, atol=1e-5)
    error = np.abs(got - exact).max() / np.abs(exact).max()
    assert 1e-5 < error < 5e-3  # TF32's error: far above f32's, far below bf16's
    ieee = run(parse(gemm("")), {"a": a, "b": b, "c": c})["c"]
    assert np.abs(ieee - exact).max() / np.abs(exact).max() < 1e-6


def test_the_cost_model_charges_the_tf32_rate():
    shapes = {"M": 4096, "N": 4096, "K": 4096}
    tf = predict(parse(gemm()), "sm_90", shapes=shapes)
    ieee = predict(parse(gemm("")), "sm_90", shapes=shapes)
    assert tf.time_s * 3 < ieee.time_s
    assert any("dot (tf32)" in t.name for t in tf.breakdown) and not any("tf32" in t.name for t in ieee.breakdown)
    # gfx90a has no TF32 units: the product is an f32 MFMA either way
    amd_tf = predict(parse(gemm(target="gfx90a")), "gfx90a", shapes=shapes)
    amd = predict(parse(gemm("", target="gfx90a")), "gfx90a", shapes=shapes)
    assert amd_tf.time_s == pytest.approx(amd.time_s)


@pytest.mark.parametrize(
    ("target", "precision"), [("sm_90", "tf32"), ("sm_80", "tf32"), ("gfx942", "tf32"), ("gfx90a", "ieee")]
)
def test_triton_gets_tf32_where_the_target_has_it(target, precision):
    source = lower(parse(gemm(target=target)), "triton", {}).source
    assert f'input_precision="{precision}"' in source


@pytest.mark.slow
def test_the_cubin_multiplies_on_the_tensor_cores():
    params = {"BM": 64, "BN": 64, "BK": 32}
    tf = compile_program(parse(gemm()), "triton", "sm_90", params)
    ieee = compile_program(parse(gemm("")), "triton", "sm_90", params)
    assert tf.ok and ieee.ok
    assert tf.instructions.get("HGMMA") or tf.instructions.get("HMMA")
    assert not ieee.instructions.get("HGMMA") and not ieee.instructions.get("HMMA")  # FFMA
