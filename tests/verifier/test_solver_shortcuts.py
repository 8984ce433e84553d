"""The shortcuts that spare the solver on long programs decide only what the solver would: the
bounds of terms over constants and lanes (`Symbolic.interval`, `Symbolic.affine`), the pairs of
writes that `dataflow.write-overlap` passes over, and the dimensions that `bounds` leaves out
of its claims. Each case has a twin that the shortcut must not hide."""

from __future__ import annotations

import pytest
import z3

from kir import symexpr as sx
from kir.parser import parse
from tests.verifier.harness import describe, diagnose
from verifier.context import Context
from verifier.symbolic import CACHE


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KIR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KIR_Z3_CACHE", "1")
    CACHE.reset()
    yield
    CACHE.reset()


KERNEL = """
kernel k<BLOCK = 128>(x: global f32[M, N]) where N <= BLOCK target sm_90 grid(M) warps(4) {
  row = program_id(0)
}
"""


def test_interval_and_affine_forms_of_terms():
    s = Context(parse(KERNEL)).symbolic
    (lane,) = s.lanes((sx.Int(128),), "t")
    pid, n = s.pids[0], s.names["N"]
    assert s.interval(z3.IntVal(-3)) == (-3, -3)
    assert s.interval(lane) == (0, 127)
    assert s.interval(3 - lane) == (-124, 3)
    assert s.interval((lane + 5) / 4) == (1, 33)
    assert s.interval(lane % 7) == (0, 6)
    assert s.interval(z3.If(lane > 3, lane, z3.IntVal(200))) == (0, 200)
    assert s.interval(lane * lane) == (0, 127 * 127)
    assert s.interval(pid + lane) is None  # a program id has no static bounds
    assert s.affine(pid * 128 + lane) == ({"program_id(0)": 128}, (0, 127))
    assert s.affine(2 * (pid + n) - n) == ({"program_id(0)": 2, "N": 1}, (0, 0))
    assert s.affine(pid * n) is None  # not linear
    assert s.affine(s.fresh("x") + 1) is None  # an unknown
    (wide,) = s.lanes((sx.Sym("N"),), "u")
    assert s.interval(wide) is None  # a lane over a symbolic extent


def planes(stores: list[str], count: int) -> str:
    body = "\n".join(f"  {s}" for s in stores)
    return f"""
kernel planes<BLOCK = 128>(x: global f32[M, N], y: out global f32[{count}, M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask)
{body}
}}
"""


def test_stores_to_disjoint_planes_are_valid():
    text = planes([f"store(y[{k}, row, cols], v * {k + 1}.0, mask = mask)" for k in range(8)], 8)
    assert diagnose(text) == [], describe(diagnose(text))


def test_an_overlap_among_disjoint_planes_is_still_found():
    stores = [f"store(y[{k}, row, cols], v * {k + 1}.0, mask = mask)" for k in range(8)]
    stores.append("store(y[5, 0, cols], v, mask = mask)")  # every program writes row 0 of plane 5
    diags = diagnose(planes(stores, 8))
    overlap = [d for d in diags if d.rule == "dataflow.write-overlap"]
    assert len(overlap) == 1, describe(diags)
    assert overlap[0].span.line == 15  # the first write of the pair: `y[5, row, cols]`
    assert overlap[0].related[0].span.line == 18


def test_a_plane_past_the_end_is_still_out_of_bounds():
    stores = [f"store(y[{k}, row, cols], v, mask = mask)" for k in range(4)]
    diags = diagnose(planes(stores, 3))
    bad = [d for d in diags if d.rule == "bounds.global-access"]
    assert len(bad) == 1 and bad[0].span.line == 13, describe(diags)
    assert "dimension 0: index 3 >= 3" in bad[0].message


def test_a_lane_past_the_end_of_a_constant_extent_is_still_out_of_bounds():
    text = """
kernel wide<BLOCK = 128>(x: global f32[64], y: out global f32[64]) target sm_90 grid(1) warps(4) {
  cols = arange(0, BLOCK)
  store(y[cols], load(x[cols]))
}
"""
    diags = [d for d in diagnose(text) if d.rule == "bounds.global-access"]
    assert len(diags) == 2 and all("index 64 >= 64" in d.message or ">= 64" in d.message for d in diags), describe(
        diags
    )


def test_tiles_of_different_programs_are_disjoint_and_a_half_step_is_not():
    def kernel(step: str) -> str:
        return f"""
kernel tiles<BLOCK = 128>(x: global f32[N], y: out global f32[N]) where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{{
  offs = program_id(0) * {step} + arange(0, BLOCK)
  store(y[offs], load(x[offs]))
}}
"""

    assert [d.rule for d in diagnose(kernel("BLOCK"))] == []
    assert "dataflow.write-overlap" in [d.rule for d in diagnose(kernel("(BLOCK / 2)"))]


def test_dead_stores_and_overwritten_values_in_a_long_block():
    stores = [f"store(y[{k // 2}, row, cols], v * {k + 1}.0, mask = mask)" for k in range(6)]
    diags = diagnose(planes(stores, 3))
    dead = sorted(d.span.line for d in diags if d.rule == "dataflow.dead-store")
    assert dead == [10, 12, 14], describe(diags)
    # another write to the tensor in between ends the search (it is not judged)
    stores = [f"store(y[{k % 2}, row, cols], v * {k + 1}.0, mask = mask)" for k in range(4)]
    assert [d for d in diagnose(planes(stores, 2)) if d.rule == "dataflow.dead-store"] == []
    # a read of the tensor in between keeps the first store alive
    stores = [
        "store(y[0, row, cols], v, mask = mask)",
        "w = load(y[0, row, cols], mask = mask)",
        "store(y[0, row, cols], w * 2.0, mask = mask)",
    ]
    assert [d for d in diagnose(planes(stores, 1)) if d.rule == "dataflow.dead-store"] == []
    stores = ["a = v * 2.0", "b = v * 3.0", "a = v * 4.0", "store(y[0, row, cols], a + b, mask = mask)"]
    diags = [d for d in diagnose(planes(stores, 1)) if d.rule == "dataflow.dead-store"]
    assert [(d.span.line, d.related[0].span.line) for d in diags] == [(10, 12)], describe(diags)
