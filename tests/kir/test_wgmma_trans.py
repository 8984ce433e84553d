"""`wgmma(A, trans(B), acc)`: a transposed shared operand. The text round-trips, `trans` of a
shared view anywhere but a wgmma operand is a located error, the shape rule reads the stored
view transposed, the verifier accepts it, and the interpreter multiplies by the transpose."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.parser import parse
from kir.program import same_ir
from tests.kir.helpers import first_error, only_wgmma
from verifier.check import check_program

# S = Q K^T: K's tile is stored [BN, D] (D contiguous), wgmma's K-major B. BN != D, so only the
# transposed shape rule makes the product [BM, BN].
QKT = """\
kernel qkt<BM = 64, BN = 128, D = 64>(
    q: global bf16[M, D] align(16),
    k: global bf16[N, D] align(16),
    out: out global f32[M, N] align(16),
)
  where M % BM == 0, N % BN == 0
  target sm_90 grid(M / BM, N / BN) warpgroups(1)
{
  qs = smem(bf16[BM, D], swizzle = 128)
  ks = smem(bf16[BN, D], swizzle = 128)
  bar = mbarrier(1, count = 1)
  m0 = program_id(0) * BM
  n0 = program_id(1) * BN
  expect(bar[0], bytes = sizeof(qs[0 : BM]) + sizeof(ks[0 : BN]))
  tma.load(q[m0 : m0 + BM, 0 : D], qs[0 : BM], signal = bar[0])
  tma.load(k[n0 : n0 + BN, 0 : D], ks[0 : BN], signal = bar[0])
  wait(bar[0], parity = 0)
  s = wgmma(qs[0 : BM], trans(ks[0 : BN]), zeros(f32[BM, BN]))
  wgmma.wait(0)
  store(out[m0 : m0 + BM, n0 : n0 + BN], s)
}
"""

# Both operands transposed: A stored [K, M] (M contiguous), B stored [N, K]; out = at^T b^T.
BOTH = (
    QKT.replace("q: global bf16[M, D]", "q: global bf16[D, M]")
    .replace("qs = smem(bf16[BM, D]", "qs = smem(bf16[D, BM]")
    .replace("sizeof(qs[0 : BM])", "sizeof(qs[0 : D])")
    .replace("tma.load(q[m0 : m0 + BM, 0 : D], qs[0 : BM]", "tma.load(q[0 : D, m0 : m0 + BM], qs[0 : D]")
    .replace("wgmma(qs[0 : BM], trans(", "wgmma(trans(qs[0 : D]), trans(")
)


@pytest.mark.parametrize("text", [QKT, BOTH], ids=["trans_b", "trans_a_b"])
def test_round_trip_is_exact(text):
    program = parse(text)
    assert program.text() == text
    again = parse(program.text())
    assert same_ir(program, again)
    op = only_wgmma(program)
    assert op.is_trans_b and op.is_trans_a == (text is BOTH)


def test_trans_is_part_of_the_ir():
    op = only_wgmma(parse(QKT))
    plain = op.clone()
    del plain.properties["trans_b"]
    assert plain.trans_b is None and not plain.is_trans_b
    assert not op.is_structurally_equivalent(plain)


def test_the_shape_rule_reads_the_stored_view_transposed():
    d = first_error(QKT.replace("trans(ks[0 : BN])", "ks[0 : BN]"))
    assert d.rule == "types.dot-shape" and d.span.line == 18
    assert "[BM, D] x [BN, D]" in d.message
    d = first_error(QKT.replace("zeros(f32[BM, BN])", "zeros(f32[BM, D])"))
    assert d.rule == "types.dot-shape" and "trans([BN, D])" in d.message


@pytest.mark.parametrize(
    "line, col, what",
    [
        ("x = trans(ks[0 : BN])", 7, "trans of a shared view ('ks[...]') is only allowed as an operand of wgmma"),
        ("x = trans(q[0 : BM, 0 : D])", 7, "trans of global memory ('q[...]') is only allowed as an operand of wgmma"),
        ("x = load(trans(ks[0 : BN]))", 12, "load takes a memory access as stored, not trans(...) of one"),
        ("tma.load(k[0 : BN, 0 : D], trans(ks[0 : BN]), signal = bar[0])", 30, "tma.load takes a memory access"),
    ],
)
def test_trans_of_memory_elsewhere_is_a_located_error(line, col, what):
    text = QKT.replace("  wgmma.wait(0)\n", f"  wgmma.wait(0)\n  {line}\n")
    d = first_error(text)
    assert d.rule == "types.access" and (d.span.line, d.span.col) == (20, col)
    assert what in d.message and "wgmma" in (d.message + d.hint)


def test_trans_of_a_loaded_tile_is_still_the_tile_op():
    text = QKT.replace("  wgmma.wait(0)\n", "  wgmma.wait(0)\n  t = trans(load(ks[0 : BN]))\n")
    parse(text)


@pytest.mark.parametrize("text", [QKT, BOTH], ids=["trans_b", "trans_a_b"])
def test_verifier_accepts_it(text):
    program = parse(text)
    assert [d for d in check_program(program) if d.severity != "hint"] == []


def test_the_wgmma_shape_rule_takes_k_from_the_stored_rows_of_trans_a():
    bad = BOTH.replace("D = 64", "D = 72")  # trans(A) stored [K, M]: K = 72 is not a multiple of k16
    rules = {d.rule for d in check_program(parse(bad))}
    assert "resources.wgmma-shape" in rules


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


def test_interpreter_multiplies_by_the_transpose():
    from kir.interp import run

    rng = np.random.default_rng(0)
    q, k = _bf16(rng, (128, 64)), _bf16(rng, (256, 64))
    out = run(parse(QKT), {"q": q, "k": k})
    want = q.astype(np.float64) @ k.astype(np.float64).T
    np.testing.assert_allclose(np.asarray(out["out"], np.float64), want, rtol=1e-4, atol=1e-3)


def test_interpreter_with_both_operands_transposed():
    from kir.interp import run

    rng = np.random.default_rng(1)
    q, k = _bf16(rng, (64, 128)), _bf16(rng, (256, 64))
    out = run(parse(BOTH), {"q": q, "k": k})
    want = q.astype(np.float64).T @ k.astype(np.float64).T
    np.testing.assert_allclose(np.asarray(out["out"], np.float64), want, rtol=1e-4, atol=1e-3)


def test_a_missing_wait_is_still_a_race_on_the_transposed_operand():
    from kir.interp import run

    # K's tile lands on its own mbarrier, which nobody waits for: the wgmma reads `ks` unordered
    text = (
        QKT.replace("mbarrier(1, count = 1)", "mbarrier(2, count = 1)")
        .replace(
            "expect(bar[0], bytes = sizeof(qs[0 : BM]) + sizeof(ks[0 : BN]))",
            "expect(bar[0], bytes = sizeof(qs[0 : BM]))\n  expect(bar[1], bytes = sizeof(ks[0 : BN]))",
        )
        .replace("ks[0 : BN], signal = bar[0]", "ks[0 : BN], signal = bar[1]")
    )
    rng = np.random.default_rng(0)
    with pytest.raises(KirError) as err:
        run(parse(text, file="t.kir"), {"q": _bf16(rng, (64, 64)), "k": _bf16(rng, (128, 64))})
    (d, *_) = err.value.diagnostics
    assert d.rule == "interp.race" and d.span.line == 19 and "`ks`" in d.message and "wgmma" in d.message
