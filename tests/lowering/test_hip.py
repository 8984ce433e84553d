"""The hip backend without an AMD GPU: every tile-level example lowers (snapshots of the emitted
kernels), compiles with hipcc for gfx90a with the compile report filled from the assembly, a
GEMM whose tiles fit a matrix instruction uses MFMA and one whose tiles do not falls back to the
FMA loop, a compile error in emitted code is reported at the KIR op that produced the failing
line, and what the AMD targets cannot express is refused with a located diagnostic and a hint.

Regenerate the snapshots with `KIR_UPDATE_SNAPSHOTS=1 pytest tests/lowering/test_hip.py`.
Compiles are cached on disk by content hash (`$KIR_CACHE_DIR`, default `~/.cache/kir`); the
hipcc tests are skipped where hipcc is missing (`apt-get install hipcc`). Nothing here runs a
kernel: there is no AMD GPU to run one on."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kir.diagnostics import KirError
from kir.parser import parse, parse_file
from lowering.compile import compile_program
from lowering.emit.base import program_level
from lowering.entry import lower
from lowering.targets.hip.compile import compile_lowered, find_hipcc
from lowering.targets.hip.emit import HIP, HipEmitter, mfma_shape
from tests.lowering.helpers import check_snapshot, kernel_part

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TILE_EXAMPLES = sorted(p.stem for p in EXAMPLES.glob("*.kir") if program_level(parse_file(str(p))) == "tile")
SNAPSHOTS = Path(__file__).parent / "snapshots" / "hip"

needs_hipcc = pytest.mark.skipif(find_hipcc() is None, reason="hipcc is not installed (apt-get install hipcc)")


def gemm(dtype: str = "bf16", bm: int = 32, bn: int = 32, bk: int = 32, warps: int = 4) -> str:
    """A tile-level GEMM with its tile sizes as parameters."""
    return f"""\
kernel gemm<BM = {bm}, BN = {bn}, BK = {bk}>(
    a: global {dtype}[M, K],
    b: global {dtype}[K, N],
    c: out global f32[M, N],
)
  where M % BM == 0, N % BN == 0, K % BK == 0
  target gfx90a grid(M / BM, N / BN) warps({warps})
{{
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK {{
    a_tile = load(a[m0 : m0 + BM, k * BK : k * BK + BK])
    b_tile = load(b[k * BK : k * BK + BK, n0 : n0 + BN])
    acc = dot<f32>(a_tile, b_tile, acc)
  }}
  store(c[m0 : m0 + BM, n0 : n0 + BN], acc)
}}
"""


PROGRAMS = {
    "gemm_mfma32": gemm(),  # 32 x 32 tiles: the 32x32x8 form, one output block
    "gemm_mfma16": gemm("f16", 16, 48, 16, 2),  # M = 16: the 16x16x16 form
    "gemm_fma": gemm("bf16", 24, 40, 8, 2),  # 24 x 40 fits no MFMA: the FMA loop
}

CP_ASYNC = """\
kernel row_sums<BM = 64, BK = 64>(x: global f32[M, K], out: out global f32[M])
  where M % BM == 0, K % BK == 0
  target gfx90a grid(M / BM) warps(4)
{
  buf = smem(f32[2, BM, BK])
  m0 = program_id(0) * BM
  cp.async(x[m0 : m0 + BM, 0 : BK], buf[0])
  cp.async.commit()
  cp.async.wait(0)
  barrier()
  store(out[m0 : m0 + BM], sum(load(buf[0]), axis = 1))
}
"""


def example(name: str):
    return parse_file(str(EXAMPLES / f"{name}.kir"))


def program(name: str):
    return parse(PROGRAMS[name], file=f"{name}.kir")


def refusal(prog):
    with pytest.raises(KirError) as err:
        lower(prog, "hip")
    return err.value.diagnostics[0]


# ---- lowering ----------------------------------------------------------------------------------


def test_the_table_differs_from_cuda_in_names():
    assert HIP.warp_size == 64 and HIP.barrier == "__syncthreads()"
    assert HIP.types["bf16"] == "hip_bfloat16" and "hip/hip_runtime.h" in HIP.headers


@pytest.mark.parametrize("name", TILE_EXAMPLES)
def test_every_tile_example_is_accepted_and_lowers(name):
    prog = example(name)
    assert HipEmitter().accepts(prog) == []
    lowered = lower(prog, "hip")
    assert lowered.backend == "hip" and lowered.entry == prog.name
    assert lowered.options["smem_bytes"] == 0  # all LDS is static


@pytest.mark.parametrize("name", ["vector_add", "softmax", "gemm_bias_gelu", "embedding_bag"])
def test_snapshot_example(name):
    check_snapshot(SNAPSHOTS / f"{name}.hip", kernel_part(lower(example(name), "hip").source))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_snapshot_program(name):
    check_snapshot(SNAPSHOTS / f"{name}.hip", kernel_part(lower(program(name), "hip").source))


def test_snapshot_helpers():
    source = lower(program("gemm_mfma32"), "hip").source
    check_snapshot(SNAPSHOTS / "helpers.hip", source[: source.index('extern "C"')])


def test_mfma_is_chosen_where_the_shape_fits():
    assert mfma_shape("bf16", "f32", 32, 32, 32, 256) == 32
    assert mfma_shape("f16", "f32", 64, 128, 8, 128) == 32
    assert mfma_shape("bf16", "f32", 16, 48, 16, 128) == 16
    assert mfma_shape("f32", "f32", 32, 64, 2, 64) == 32
    assert mfma_shape("bf16", "f32", 32, 32, 4, 256) is None  # K below one 32x32x8 step, and 16x16x16
    assert mfma_shape("bf16", "f32", 24, 40, 8, 128) is None
    assert mfma_shape("bf16", "bf16", 32, 32, 32, 128) is None  # MFMA accumulates in f32
    assert mfma_shape("i8", "i32", 32, 32, 32, 128) is None
    assert mfma_shape("bf16", "f32", 32, 32, 32, 96) is None  # 96 threads: not whole wavefronts


def test_the_gemm_source_calls_the_mfma_builtins():
    assert "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k(" in lower(program("gemm_mfma32"), "hip").source
    assert "__builtin_amdgcn_mfma_f32_16x16x16f16(" in lower(program("gemm_mfma16"), "hip").source
    fma = lower(program("gemm_fma"), "hip").source
    assert "__builtin_amdgcn_mfma" not in fma and "kir_s += " in fma


def test_an_explicit_program_is_refused_with_a_hint():
    d = refusal(example("gemm_hopper_ws"))
    assert d.rule == "lower.level" and d.severity == "error"
    assert "TMA" in d.hint and "wgmma" in d.hint and "gluon or cuda" in d.hint


def test_cp_async_is_refused_at_the_explicit_level():
    d = refusal(parse(CP_ASYNC, file="row_sums.kir"))
    assert d.rule == "lower.level" and "cp.async" in d.hint


def test_fp8_is_refused_where_it_appears():
    prog = parse(
        "kernel k<B = 128>(x: global bf16[B], y: out global bf16[B]) target gfx942 grid(1) warps(2)\n"
        "{\n  v = cast<f8e4m3>(load(x[0 : B]))\n  store(y[0 : B], cast<bf16>(v))\n}\n",
        file="fp8.kir",
    )
    d = refusal(prog)
    assert d.rule == "lower.unsupported" and d.span.line == 3 and "fp8" in d.message and "triton" in d.hint


# ---- hipcc ---------------------------------------------------------------------------------------


def assert_report(report) -> None:
    assert report.ok, report.log
    assert report.backend == "hip" and report.arch == "gfx90a"
    assert report.registers and 0 < report.registers <= 512
    assert report.sgprs and report.sgprs <= 112
    assert report.static_shared_bytes is not None and report.static_shared_bytes <= 65536
    assert report.dynamic_shared_bytes == 0
    assert report.local_bytes == 0 and report.spills == 0
    assert report.occupancy and 1 <= report.occupancy <= 8
    assert report.binary and Path(report.binary).read_bytes()[:4] == b"\x7fELF"
    assert not [d for d in report.diagnostics if d.is_error]


@needs_hipcc
@pytest.mark.parametrize("name", TILE_EXAMPLES)
def test_example_compiles_for_gfx90a(name):
    assert_report(compile_program(example(name), "hip", "gfx90a"))


@needs_hipcc
def test_the_32x32_gemm_holds_mfma():
    report = compile_lowered(lower(program("gemm_mfma32"), "hip"))
    assert_report(report)
    assert report.instructions["mfma"] and "v_mfma_f32_32x32x8bf16_1k" in report.asm
    # A (2 KiB) and B (2 KiB) in bf16, one 32 x 32 f32 block row (4 KiB)
    assert report.static_shared_bytes == 2048 + 2048 + 4096
    assert report.extra["agprs"] is not None and report.extra["sgpr_spills"] == 0


@needs_hipcc
def test_the_16x16_gemm_holds_the_16x16_mfma():
    report = compile_lowered(lower(program("gemm_mfma16"), "hip"))
    assert_report(report)
    assert "v_mfma_f32_16x16x16f16" in report.asm


@needs_hipcc
def test_a_shape_without_mfma_compiles_to_fma():
    report = compile_lowered(lower(program("gemm_fma"), "hip"))
    assert_report(report)
    assert report.instructions["mfma"] == 0 and re.search(r"\bv_(pk_)?fma_f32", report.asm)


@needs_hipcc
def test_a_compile_error_points_at_the_kir_op():
    lowered = lower(program("gemm_mfma32"), "hip")
    lines = lowered.source.splitlines()
    line = next(i + 1 for i, text in enumerate(lines) if "__builtin_amdgcn_mfma" in text)
    report = compile_lowered(lowered, corrupt_line=line)
    assert not report.ok
    d = report.diagnostics[0]
    assert d.rule == "lower.compile" and d.severity == "error"
    assert d.span.line == PROGRAMS["gemm_mfma32"].splitlines().index("    acc = dot<f32>(a_tile, b_tile, acc)") + 1
    assert f"kernel.hip:{line}:" in d.message and "kir_corrupted_by_test_hook" in d.message


@needs_hipcc
def test_the_report_is_cached_and_survives_json(tmp_path, monkeypatch):
    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path))
    lowered = lower(example("vector_add"), "hip")
    first = compile_lowered(lowered)
    again = compile_lowered(lowered)
    assert not first.cached and again.cached
    assert again.to_json()["registers"] == first.registers and again.occupancy == first.occupancy
    json.dumps(first.to_json())


def test_compile_program_knows_the_hip_arch():
    with pytest.raises(KirError) as err:
        compile_program(example("vector_add"), "hip", "gfx942")
    assert err.value.diagnostics[0].rule == "lower.arch"
    refused = compile_program(example("gemm_hopper_ws"), "hip", "gfx90a")
    assert not refused.ok and refused.diagnostics[0].rule == "lower.level"


@needs_hipcc
def test_kir_compile_to_hip():
    from typer.testing import CliRunner

    from agent.cli import app

    out = CliRunner().invoke(
        app, ["compile", str(EXAMPLES / "softmax.kir"), "--to", "hip", "--arch", "gfx90a", "--json"]
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)["report"]
    assert report["backend"] == "hip" and report["ok"] and report["occupancy"] and report["sgprs"]


# ---- the helpers' numerics, on the host ----------------------------------------------------------

HOST_SHIMS = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
using std::fabs; using std::isinf;
#define KIR_DEV static inline
#define __host__
#define __device__
static float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
struct hip_bfloat16 { unsigned short data; };
struct __half { unsigned short data; };
static __half __float2half_rn(float) { return __half{0}; }
static unsigned short atomicCAS(unsigned int*, unsigned int, unsigned int) { return 0; }
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_the_bf16_conversions_round_as_the_interpreter(tmp_path):
    """kir_f32_to_bf16 and kir_f64_to_bf16 (one rounding from double) compiled for the host and
    compared bit for bit with the interpreter's casts."""
    import ml_dtypes
    import numpy as np

    from kir.dtypes import DTYPES
    from kir.interp import values as V
    from lowering.targets.hip.emit import HIP_HELPERS

    helpers = HIP_HELPERS.replace("atomicCAS(unsigned short*", "kir_unused_cas(unsigned short*")
    main = r"""
int main() {
    double x;
    while (scanf("%lf", &x) == 1)
        printf("%u %u\n", kir_f32_to_bf16((float)x).data, kir_f64_to_bf16(x).data);
}
"""
    (tmp_path / "t.cpp").write_text(HOST_SHIMS + helpers + main)
    subprocess.run(["g++", "-O1", "-o", str(tmp_path / "t"), str(tmp_path / "t.cpp")], check=True)
    rng = np.random.default_rng(0)
    base = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-40, 39, 2000), [0.0, -0.0, 1.0]])
    # halfway cases: a bf16 value plus half its ulp, and a hair above (a double that rounds
    # through f32 to the halfway point must not round twice)
    b = base.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    b = b[(b != 0) & np.isfinite(b)]
    ulp = 2.0 ** (np.floor(np.log2(np.abs(b))) - 7)  # bf16 keeps 8 significant bits
    halfway = [b + ulp / 2, b + ulp / 2 * (1 + 2.0**-30), b - ulp / 2, b + ulp * 1.5]
    values = np.concatenate([base, *halfway, [np.inf, -np.inf, np.nan]])
    text = "\n".join(repr(float(v)) for v in values)
    out = subprocess.run([str(tmp_path / "t")], input=text, capture_output=True, text=True, check=True).stdout
    got = np.array([[int(t) for t in line.split()] for line in out.splitlines()], dtype=np.uint16)
    f32, f64, bf16 = DTYPES["f32"], DTYPES["f64"], DTYPES["bf16"]
    want32 = V.cast(values.astype(np.float32), f32, bf16).view(np.uint16)
    want64 = V.cast(values, f64, bf16).view(np.uint16)  # one rounding, as the interpreter does
    nan = np.isnan(values)
    assert (got[~nan, 0] == want32[~nan]).all()
    assert (got[~nan, 1] == want64[~nan]).all()
    assert ((got[nan] & 0x7FC0) == 0x7FC0).all()
