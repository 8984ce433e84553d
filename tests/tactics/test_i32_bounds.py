"""Rewrites that compute an index in i32 from a product of shapes (a flattened tile number, a
band's row) state the bound it relies on in `where`, so that bounds.index-overflow proves their
result: the old grid's launch could not pass 2^31 - 1 programs on an axis either."""

from __future__ import annotations

import pytest

import tactics
from kir.parser import parse
from verifier.check import check_program

ROWS_3D = """
kernel argmin_rows<BLOCK = 64>(x: global f32[R0, R1, N], y: out global i64[R0, R1])
  where N <= BLOCK
  target sm_90 grid(R0 * R1) warps(4)
{
  p = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  x1 = load(x[p / R1, p % R1, cols], mask = mask)
  store(y[p / R1, p % R1], cast<i64>(argmin(where(mask, x1, inf), axis = 0)))
}
"""

ATTENTION_GRID = """
kernel heads<BM = 64, D = 64>(q: global f32[B, H, S, D], o: out global f32[B, H, S, D])
  where S % BM == 0
  target sm_90 grid(S / BM, B * H) warps(4)
{
  m0 = program_id(0) * BM
  b = program_id(1) / H
  h = program_id(1) % H
  qt = load(q[b, h, m0 : m0 + BM, 0 : D])
  acc = zeros(f32[BM, D])
  for j in 0 .. S / BM {
    kt = load(q[b, h, j * BM : j * BM + BM, 0 : D])
    acc = dot<f32>(dot<f32>(qt, trans(kt)), kt, acc)
  }
  store(o[b, h, m0 : m0 + BM, 0 : D], acc)
}
"""


def errors(program):
    return [f"{d.rule}: {d.message}" for d in check_program(program) if d.severity == "error"]


@pytest.mark.parametrize(
    ("source", "tactic", "params", "clause"),
    [
        (ROWS_3D, "row-band", {"rows": 4}, "R0 * R1 <= 2147483647"),
        (ATTENTION_GRID, "grouped-order", {"group": 4}, "GM * (B * H) <= 2147483647"),
        (ATTENTION_GRID, "persistent", {"programs": 132}, "S / BM * (B * H) <= 2147483647"),
    ],
    ids=["row-band", "grouped-order", "persistent"],
)
def test_the_bound_is_stated_and_the_result_verifies(source, tactic, params, clause):
    program = parse(source, file="<test>")
    assert not errors(program)
    child = tactics.get(tactic).apply(program, **params)
    assert clause in child.text()
    assert not errors(child)


def test_one_symbol_needs_no_bound():
    source = ROWS_3D.replace(
        "x: global f32[R0, R1, N], y: out global i64[R0, R1]", "x: global f32[M, N], y: out global i64[M]"
    )
    source = source.replace("grid(R0 * R1)", "grid(M)").replace("p / R1, p % R1", "p")
    child = tactics.get("row-band").apply(parse(source, file="<test>"), rows=4)
    assert "2147483647" not in child.text()
    assert not errors(child)
