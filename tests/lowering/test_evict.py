"""`load(..., evict = first | last)`: the caches' eviction priority for a global load. It parses,
prints and is checked (`types.evict`), changes no value (the interpreters), and reaches the
machine code of every NVIDIA backend: Triton and Gluon as `eviction_policy`, CUDA C++ as
`ld.global.L1::evict_*` with an L2 `createpolicy`. HIP and the MTIA simulator read as before."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.interp import run
from kir.parser import parse
from kir.printer import print_program
from lowering.entry import lower
from lowering.report import find_tool
from tests.lowering.helpers import SOFTSIGN_TEXT

# The two passes of an RMSNorm over a row: the first pass's lines are read again (last), the
# second pass's are not (first); the weight is read by every row (last).
TWO_PASS = """\
kernel rmsnorm<CH = 64>(x: global bf16[M, N], w: global bf16[N], y: out global bf16[M, N])
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  lane = arange(0, CH)
  acc = zeros(f32[CH])
  for c in 0 .. (N + CH - 1) / CH {
    cols = c * CH + lane
    v = cast<f32>(load(x[row, cols], mask = cols < N, evict = last))
    acc = acc + v * v
  }
  rstd = rsqrt(sum(acc, axis = 0) * (1.0 / cast<f32>(N)) + 1e-06)
  for c in 0 .. (N + CH - 1) / CH {
    cols = c * CH + lane
    mask = cols < N
    v = cast<f32>(load(x[row, cols], mask = mask, evict = first))
    wv = cast<f32>(load(w[cols], mask = mask, evict = last))
    store(y[row, cols], cast<bf16>(v * rstd * wv), mask = mask)
  }
}
"""

# Every element width the CUDA helper takes: 1, 2, 4 and 8 bytes, and a scalar load.
WIDTHS = """\
kernel widths<BLOCK = 128>(
    a: global i8[N],
    b: global f16[N],
    c: global f32[N],
    d: global i64[N],
    s: global f32[1],
    y: out global f32[N],
)
  target sm_90 grid((N + BLOCK - 1) / BLOCK) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  m = offs < N
  av = cast<f32>(load(a[offs], mask = m, evict = first))
  bv = cast<f32>(load(b[offs], mask = m, evict = last))
  cv = load(c[offs], mask = m, evict = first)
  dv = cast<f32>(load(d[offs], mask = m, evict = last))
  sv = load(s[0], evict = last)
  store(y[offs], av + bv + cv + dv + sv, mask = m)
}
"""

# An explicit-level program (a shared buffer): the Gluon backend takes it.
STAGED = SOFTSIGN_TEXT.replace("other = 0.0)", "other = 0.0, evict = first)")


def error(text: str):
    with pytest.raises(KirError) as err:
        parse(text, file="t.kir")
    (d,) = err.value.diagnostics
    return d


# ---- the language ---------------------------------------------------------------------------


def test_evict_prints_as_written():
    program = parse(TWO_PASS, file="t.kir")
    assert print_program(program) == TWO_PASS
    loads = [op for op in program.kernel.walk() if op.name == "kir.load"]
    assert [op.evict.data for op in loads] == ["last", "first", "last"]


def test_a_policy_that_is_not_one_is_located():
    d = error(TWO_PASS.replace("evict = first", "evict = sometimes"))
    assert d.rule == "types.evict" and d.span.line == 16
    assert TWO_PASS.splitlines()[15][d.span.col - 1 :].startswith("first")  # under the value
    d = error(TWO_PASS.replace("evict = first", "evict = 1"))
    assert d.rule == "types.evict" and d.span.line == 16


def test_shared_memory_takes_no_policy():
    d = error(STAGED.replace("u = load(buf[0 : BN])", "u = load(buf[0 : BN], evict = last)"))
    assert d.rule == "types.evict" and d.span.line == 11 and "shared memory" in d.message


def test_the_policy_changes_no_value():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 150)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal(150).astype(ml_dtypes.bfloat16)
    plain = TWO_PASS.replace(", evict = last", "").replace(", evict = first", "")
    got = run(parse(TWO_PASS), {"x": x, "w": w})["y"]
    want = run(parse(plain), {"x": x, "w": w})["y"]
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_the_cost_model_takes_it():
    from costmodel import predict

    est = predict(parse(TWO_PASS), "sm_90", {"CH": 2048}, {"M": 8192, "N": 8192})
    assert est.time_s > 0 and est.bottleneck.startswith("dram")


# ---- the lowerings --------------------------------------------------------------------------


def test_triton_passes_the_policy_to_tl_load():
    src = lower(parse(TWO_PASS), "triton").source
    assert src.count('eviction_policy="evict_last"') == 2 and src.count('eviction_policy="evict_first"') == 1


def test_triton_interpreter_runs_it():
    pytest.importorskip("triton")
    from lowering.targets.triton.runtime import run_triton

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 100)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal(100).astype(ml_dtypes.bfloat16)
    got = run_triton(parse(TWO_PASS), {"x": x, "w": w}, interpret=True)["y"]
    want = run(parse(TWO_PASS), {"x": x, "w": w})["y"]
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_triton_compiles_it_to_evicting_loads():
    pytest.importorskip("triton")
    from lowering.targets.triton.compile import compile_lowered

    report = compile_lowered(lower(parse(TWO_PASS), "triton", {"CH": 2048}), symbols={"M": 8192, "N": 8192})
    assert report.ok, report.log
    assert "ld.global.L1::evict_last" in report.ptx and "ld.global.L1::evict_first" in report.ptx


def test_gluon_passes_the_policy_and_compiles():
    pytest.importorskip("triton")
    from lowering.targets.gluon.compile import compile_lowered

    lowered = lower(parse(STAGED), "gluon")
    assert 'eviction_policy="evict_first"' in lowered.source
    report = compile_lowered(lowered)
    assert report.ok, report.log
    assert "L1::evict_first" in report.ptx


def test_cuda_reads_through_the_helper_at_every_width():
    src = lower(parse(WIDTHS), "cuda").source
    assert src.count("kir_ld_evict<true>(&") == 2 and src.count("kir_ld_evict<false>(&") == 3
    plain = lower(parse(TWO_PASS.replace(", evict = last", "").replace(", evict = first", "")), "cuda").source
    assert "kir_ld_evict<" not in plain.split("__global__")[1]


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
def test_cuda_compiles_the_policies():
    from lowering.targets.cuda.compile import compile_lowered

    report = compile_lowered(lower(parse(WIDTHS), "cuda"))
    assert report.ok, report.log
    for width in ("u8", "b16", "b32", "b64"):
        assert f".L2::cache_hint.{width}" in report.ptx, width
    assert "createpolicy.fractional.L2::evict_first" in report.ptx
    assert "createpolicy.fractional.L2::evict_last" in report.ptx


def test_hip_reads_as_before():
    src = lower(parse(WIDTHS.replace("sm_90", "gfx942")), "hip").source
    assert "evict" not in src.split("__global__")[1]
