"""fp8 on sm_80 is a storage dtype: held in memory and converted in software (cuda_fp8.h), as
weight-only fp8 GEMMs on Ampere do, but never multiplied by a matrix instruction. So an fp8
GEMM that upcasts its tiles to bf16 before the dot checks clean, runs correctly on the
interpreter and lowers to CUDA, while a dot of fp8 operands is a `target.dtype` error at the
dot. gfx90a has no fp8 at all."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from kir.interp import run
from kir.parser import parse
from lowering.entry import lower
from tests.verifier.harness import describe, diagnose

GEMM = """
kernel w8_gemm<BM = 32, BN = 32, BK = 32>(a: global f8e4m3[M, K], b: global f8e4m3[K, N], c: out global f32[M, N])
  where M % BM == 0, N % BN == 0, K % BK == 0
  target {target} grid(M / BM, N / BN) warps(4)
{{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {{
    at = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    bt = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>({lhs}, {rhs}, acc)
  }}
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}}
"""
UPCAST = {"lhs": "cast<bf16>(at)", "rhs": "cast<bf16>(bt)"}
DIRECT = {"lhs": "at", "rhs": "bt"}


def test_fp8_kept_in_memory_and_upcast_before_the_dot_is_clean_on_sm80():
    diags = diagnose(GEMM.format(target="sm_80", **UPCAST))
    assert not [d for d in diags if d.severity in ("error", "warning")], describe(diags)


def test_the_upcast_gemm_runs_correctly_on_the_interpreter():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((64, 32)).astype(ml_dtypes.float8_e4m3fn)
    out = run(parse(GEMM.format(target="sm_80", **UPCAST)), {"a": a, "b": b})
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out["c"], want, rtol=1e-2, atol=1e-2)


def test_the_upcast_gemm_lowers_to_cuda_with_software_conversions():
    source = lower(parse(GEMM.format(target="sm_80", **UPCAST)), "cuda").source
    assert "cuda_fp8.h" in source and "kir_f8_to_f32" in source


def test_a_dot_of_fp8_operands_on_sm80_is_an_error_at_the_dot_only():
    diags = diagnose(GEMM.format(target="sm_80", **DIRECT))
    errors = [d for d in diags if d.severity == "error"]
    assert [(d.rule, d.span.line) for d in errors] == [("target.dtype", 12)], describe(diags)
    assert "cast<bf16>" in errors[0].hint


def test_gfx90a_has_no_fp8_even_in_memory():
    diags = diagnose(GEMM.format(target="gfx90a", **UPCAST))
    hits = [d for d in diags if d.rule == "target.dtype"]
    assert {d.span.line for d in hits} == {2}, describe(diags)  # the two fp8 arguments
