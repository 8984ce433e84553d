"""`gather` on every backend: Triton's `tl.gather` (agreeing with the interpreter under Triton's
CPU interpreter, and compiled ahead of time), the C++ backends' shared-memory staging (CUDA and
HIP compiled, mtia-sim run against the interpreter), and Gluon's refusal at the op."""

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
from lowering.report import find_tool
from lowering.targets.cuda.compile import compile_lowered as compile_cuda
from lowering.targets.hip.compile import compile_lowered as compile_hip
from lowering.targets.hip.compile import find_hipcc
from lowering.targets.mtia_sim.runtime import run_mtia
from lowering.targets.triton.runtime import run_triton

PROGRAMS = Path(__file__).parent / "programs"
INTERPRET = os.environ.get("KIR_TRITON_DEVICE", "interpreter") != "cuda"
needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
needs_hipcc = pytest.mark.skipif(find_hipcc() is None, reason="hipcc is not installed (apt-get install hipcc)")

# An i1 source (Triton gathers it as i8) read backwards.
FLAGS = """
kernel gather_flags<B = 16>(x: global i32[B], y: out global i32[B])
  target sm_90 grid(1) warps(4)
{
  v = load(x[0 : B])
  odd = v % 2 == 1
  rev = gather(odd, B - 1 - arange(0, B), axis = 0)
  store(y[0 : B], where(rev, v, 0))
}
"""

# The explicit level: a gather of a tile read back from shared memory.
ROTATE_SMEM = """
kernel rotate_smem<B = 128>(x: global f32[B], y: out global f32[B])
  target sm_90 grid(1) warps(4)
{
  buf = smem(f32[B])
  store(buf[0 : B], load(x[0 : B]))
  barrier()
  v = load(buf[0 : B])
  store(y[0 : B], gather(v, (arange(0, B) + 1) % B, axis = 0))
}
"""


def _lut_inputs(rng):
    return {"b": rng.standard_normal(1024).astype(np.float32), "m": rng.integers(0, 1024, 300).astype(np.int32)}


def _columns_inputs(rng):
    return {"w": rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)}


def _flags_inputs(rng):
    return {"x": rng.integers(-50, 50, 16).astype(np.int32)}


CASES = {
    "lut": (lambda: parse_file(PROGRAMS / "gather_lut.kir"), _lut_inputs),
    "columns": (lambda: parse_file(PROGRAMS / "gather_columns.kir"), _columns_inputs),
    "flags": (lambda: parse(FLAGS), _flags_inputs),
}


def _same(want: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    """Gathers move values: every backend must give the interpreter's bits."""
    for name, a in want.items():
        b = np.asarray(got[name])
        assert b.dtype == a.dtype and b.shape == a.shape, name
        np.testing.assert_array_equal(b.view(np.uint8), np.asarray(a).view(np.uint8), err_msg=name)


# ---- Triton ----------------------------------------------------------------------------------------


def test_triton_emits_tl_gather():
    lut = lower(CASES["lut"][0](), "triton").source
    columns = lower(CASES["columns"][0](), "triton").source
    flags = lower(CASES["flags"][0](), "triton").source
    assert "v = tl.gather(bnd, mid, 0)" in lut
    assert "w_t = tl.gather(wrow, tl.broadcast_to(idx[None, :], (BM, 16)), 1)" in columns
    assert "tl.gather(odd.to(tl.int8), " in flags and ") != 0" in flags


@pytest.mark.parametrize("name", list(CASES))
def test_triton_interpreted_matches_the_interpreter(name):
    make, inputs_of = CASES[name]
    program, inputs = make(), inputs_of(np.random.default_rng(0))
    _same(run(program, inputs), run_triton(program, inputs, interpret=INTERPRET))


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
@pytest.mark.parametrize("name", list(CASES))
def test_triton_compiles_ahead_of_time(name, arch):
    report = compile_program(CASES[name][0](), "triton", arch)
    assert report.ok, [d.message for d in report.diagnostics]
    assert report.registers and report.spills == 0


# ---- Gluon -----------------------------------------------------------------------------------------


def test_gluon_refuses_gather_at_the_op():
    with pytest.raises(KirError) as err:
        lower(parse(ROTATE_SMEM), "gluon")
    hits = [d for d in err.value.diagnostics if "kir.gather" in d.message]
    assert len(hits) == 1
    (d,) = hits
    assert d.rule == "lower.unsupported" and "the gluon backend cannot lower `kir.gather`" == d.message
    assert "gather(v, (arange(0, B) + 1) % B" in ROTATE_SMEM.splitlines()[d.span.line - 1]
    assert "cuda backend" in d.hint


# ---- CUDA, HIP, mtia-sim ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_mtia_sim_runs_equal_to_the_interpreter(name):
    make, inputs_of = CASES[name]
    program, inputs = make(), inputs_of(np.random.default_rng(1))
    got = run_mtia(program, inputs)
    _same(run(program, inputs), got.outputs)
    assert got.cycles > 0


def test_the_cuda_source_stages_the_source_and_reads_it_at_the_index():
    """A source the CTA defines at the top level is written to shared memory once, where it is
    defined; every gather reads it in place (no staging and no barrier per gather)."""
    source = lower(CASES["lut"][0](), "cuda").source
    assert source.count("kir_res[kir_e] = v_bnd[kir_i];") == 1
    assert "const int kir_g = (int)(v_mid[kir_i]);" in source and "v_v[kir_i] = kir_res[(kir_g)];" in source
    assert "kir_scr" not in source


REBUILT = """
kernel rebuilt<B = 128>(x: global f32[B], y: out global f32[B])
  target sm_90 grid(1) warps(4)
{
  acc = zeros(f32[B])
  for r in 0 .. 3 {
    t = load(x[0 : B]) + cast<f32>(r)
    acc = acc + gather(t, (arange(0, B) + r) % B, axis = 0)
  }
  store(y[0 : B], acc)
}
"""


def test_a_source_defined_in_a_loop_is_staged_at_each_gather():
    program = parse(REBUILT)
    source = lower(program, "cuda").source
    assert "kir_res" not in source and "kir_scr[kir_e] = v_t[kir_i];" in source
    x = np.arange(128, dtype=np.float32)
    want = sum(np.roll(x + r, -r) for r in range(3))
    assert np.allclose(run(program, {"x": x})["y"], want)
    assert np.allclose(run_mtia(program, {"x": x}).outputs["y"], want)


def test_a_pure_gather_is_recomputed_where_it_is_used():
    text = (
        CASES["flags"][0]()
        .text()
        .replace("gather(odd, ", "gather(arange(0, B) * 2, ")
        .replace("where(rev, v, 0)", "v + rev")
    )
    source = lower(parse(text), "cuda").source
    assert "kir_scr" not in source  # nothing staged: arange(0, B) * 2 at index B - 1 - i


@needs_nvcc
@pytest.mark.parametrize("name", list(CASES))
def test_cuda_compiles(name):
    report = compile_cuda(lower(CASES[name][0](), "cuda"), sass=False)
    assert report.ok, report.log


@needs_nvcc
def test_cuda_compiles_a_gather_at_the_explicit_level():
    program = parse(ROTATE_SMEM)
    assert np.array_equal(run(program, {"x": np.arange(128, dtype=np.float32)})["y"], np.roll(np.arange(128.0), -1))
    report = compile_cuda(lower(program, "cuda"), sass=False)
    assert report.ok, report.log


@needs_hipcc
@pytest.mark.parametrize("name", list(CASES))
def test_hip_compiles(name):
    report = compile_hip(lower(CASES[name][0](), "hip"))
    assert report.ok, report.log
    assert report.static_shared_bytes and report.spills == 0
