"""`wgmma(tile, B, acc)`: wgmma's A operand from registers (a 16-bit tile, read at issue). The
text round-trips, the interpreter multiplies by the tile, the shape and dtype rules hold for
it, the shared-memory rules leave it alone, Gluon feeds it in the accumulator's dot-operand
layout, and the CUDA backend refuses it at the op."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.dialect import explicit as ex
from kir.parser import parse
from kir.program import same_ir
from lowering.entry import lower
from tests.kir.helpers import first_error, only_wgmma
from verifier.check import check_program

ROOT = Path(__file__).resolve().parents[2]

# o = p v over key blocks: p's block loaded into registers, v's through TMA into shared memory
PV = """\
kernel pv<BM = 64, BN = 64, HD = 64>(
    p: global bf16[M, N] align(16),
    v: global bf16[N, HD] align(16),
    o: out global f32[M, HD] align(16),
)
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM) warpgroups(1)
{
  vs = smem(bf16[BN, HD], swizzle = 128)
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  acc = zeros(f32[BM, HD])
  for j in 0 .. N / BN {
    expect(bar[0], bytes = sizeof(vs[0 : BN]))
    tma.load(v[j * BN : j * BN + BN, 0 : HD], vs[0 : BN], signal = bar[0])
    wait(bar[0], parity = j % 2)
    pt = cast<f32>(load(p[m0 : m0 + BM, j * BN : j * BN + BN]))
    acc = wgmma(cast<bf16>(pt * 2.0), vs[0 : BN], acc)
    wgmma.wait(0)
    barrier()
  }
  store(o[m0 : m0 + BM, 0 : HD], acc)
}
"""
WGMMA_LINE = 18


def test_round_trip_is_exact():
    program = parse(PV)
    assert program.text() == PV
    assert same_ir(program, parse(program.text()))
    op = only_wgmma(program)
    assert op.a_in_registers and list(op.a_indices) == []


def test_the_verifier_accepts_it():
    assert [d for d in check_program(parse(PV)) if d.severity != "hint"] == []


def test_interpreter_multiplies_by_the_register_tile():
    from kir.interp import run

    rng = np.random.default_rng(0)
    p = rng.standard_normal((128, 192)).astype(ml_dtypes.bfloat16)
    v = rng.standard_normal((192, 64)).astype(ml_dtypes.bfloat16)
    out = run(parse(PV), {"p": p, "v": v})
    want = (2.0 * p.astype(np.float64)) @ v.astype(np.float64)
    np.testing.assert_allclose(np.asarray(out["o"], np.float64), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "a, rule, what",
    [
        ("pt", "types.operand-dtype", "a 16-bit tile as multiplied, not f32[BM, BN]"),
        ("trans(cast<bf16>(pt))", "types.access", "trans(A) takes a shared view"),
        ("1.0", "types.access", "a shared view or a tile in registers, not f32"),
        ("bar", "types.access", "not mbarrier[1]"),
        ("zeros(bf16[BM, 32])", "types.dot-shape", "[BM, 32] x [BN, HD]"),
    ],
)
def test_a_bad_register_operand_is_a_located_error(a, rule, what):
    d = first_error(PV.replace("cast<bf16>(pt * 2.0)", a))
    assert d.rule == rule and d.span.line == WGMMA_LINE and what in d.message, d.message


def test_gluon_feeds_it_in_the_dot_operand_layout_of_the_accumulator():
    pytest.importorskip("triton")
    from lowering.targets.gluon.compile import compile_lowered

    program = parse(PV)
    lowered = lower(program, "gluon")
    src = lowered.source
    assert (
        "warpgroup_mma(gl.convert_layout((pt * 2.0).to(gl.bfloat16), gl.DotOperandLayout(operand_index=0, parent=mma_layout_0, k_width=2)), vs"
        in src
    )
    report = compile_lowered(lowered)
    assert report.ok, report.log
    # wgmma's register-A form: A is a brace list of registers, B a descriptor
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16" in report.ptx
    hgmma = [line.split("HGMMA", 1)[1] for line in report.sass.splitlines() if "HGMMA" in line]
    assert hgmma and all(re.search(r"\sR\d+, R\d+, gdesc", h) for h in hgmma), hgmma


def test_the_attention_program_keeps_p_in_registers():
    text = (ROOT / "benchmarks" / "tasks" / "causal_attention" / "pingpong_rs.kir").read_text()
    program = parse(text)
    wgmmas = [o for o in program.kernel.walk() if isinstance(o, ex.WgmmaOp)]
    assert [o.a_in_registers for o in wgmmas] == [False, True, False]
    assert "smem(bf16[2, BM / 2, BN]" not in text and "fence.async()" not in text


def test_cuda_refuses_it_at_the_op():
    with pytest.raises(KirError) as err:
        lower(parse(PV, file="t.kir"), "cuda")
    (d, *_) = err.value.diagnostics
    assert d.rule == "lower.unsupported" and d.span.line == WGMMA_LINE
    assert "from shared memory, not from registers" in d.message
