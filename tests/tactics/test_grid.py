"""The grid and GEMM-loop tactics' precondition pairs: a program each applies to (and what it
writes), and a near twin it refuses with its rule id at the line it looked at; and the
rewrites checked on the interpreter where the property test's corpus says little."""

from __future__ import annotations

import numpy as np
import pytest

import tactics
from kir import interp
from kir import symexpr as sx
from kir.diagnostics import KirError
from tests.tactics.test_preconditions import check_pair, line_of, program, twin

GEMM = """
kernel gemm<BM = 16, BN = 16, BK = 16>(
    a: global f32[M, K],
    b: global f32[K, N],
    c: out global f32[M, N],
)
  where K % BK == 0
  target sm_90 grid(cdiv(M, BM), cdiv(N, BN)) warps(4)
{
  rows = program_id(0) * BM + arange(0, BM)
  cols = program_id(1) * BN + arange(0, BN)
  rmask = rows < M
  cmask = cols < N
  acc = zeros(f32[BM, BN])
  for k in 0 .. K / BK pipeline(stages = 2) {
    ks = k * BK + arange(0, BK)
    at = load(a[rows[:, None], ks[None, :]], mask = rmask[:, None])
    bt = load(b[ks[:, None], cols[None, :]], mask = cmask[None, :])
    acc = dot<f32>(at, bt, acc)
  }
  store(c[rows[:, None], cols[None, :]], acc, mask = rmask[:, None] & cmask[None, :])
}
"""

ROWSUMS = "acc = acc + sum(at, axis = 1)[:, None] * sum(bt, axis = 0)[None, :]"

ROWNORM = """
kernel rownorm<BLOCK = 64>(x: global f32[M, N], w: global f32[N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols], mask = mask)
  s = sum(v * v, axis = 0) + cast<f32>(num_programs(0))
  store(y[row, cols], v / s * load(w[cols], mask = mask), mask = mask)
}
"""

# tactic: (the program it applies to, its parameters, a fragment of the result; the twin, the
# rule it is refused with, a fragment of the line the reason points at)
PAIRS = {
    "warp-specialize": (
        GEMM, {}, "pipeline(stages = 2) warp_specialize {",
        twin(GEMM, "target sm_90", "target sm_80"), "tactic.warp-specialize.target", "target sm_80",
    ),
    "grouped-order": (
        GEMM, {"group": 4}, "grid(cdiv(M, BM) * cdiv(N, BN))",
        twin(GEMM, "acc = dot<f32>(at, bt, acc)", ROWSUMS), "tactic.grouped-order.no-dot", "grid(",
    ),
    "persistent": (
        GEMM, {"programs": 132}, "for tile in program_id(0) .. tiles step NSM {",
        twin(GEMM, "  for k in 0 .. K / BK pipeline(stages = 2) {\n", "  k = 0\n  if K > 0 {\n"),
        "tactic.persistent.no-loop", "grid(",
    ),
    "split-dot": (
        GEMM, {}, "acc = dot<f32>(at_lo, bt_hi, acc)",
        GEMM.replace("f32[M, K]", "bf16[M, K]").replace("f32[K, N]", "bf16[K, N]"),
        "tactic.split-dot.no-f32-dot", "acc = dot<f32>",
    ),
    "tf32": (
        GEMM, {}, "acc = dot<f32>(at, bt, acc, precision = tf32)",
        GEMM.replace("f32[M, K]", "bf16[M, K]").replace("f32[K, N]", "bf16[K, N]"),
        "tactic.tf32.no-f32-dot", "acc = dot<f32>",
    ),
    "row-band": (
        ROWNORM, {"rows": 4}, "for i in 0 .. R pipeline(stages = 2) {",
        twin(ROWNORM, "grid(M)", "grid(M, 1)"), "tactic.row-band.grid", "grid(M, 1)",
    ),
    "reverse-order": (
        GEMM, {"axis": 1}, "cols = ((N + BN - 1) / BN - 1 - program_id(1)) * BN",
        twin(GEMM, "  for k in 0 .. K / BK pipeline(stages = 2) {\n", "  k = 0\n  if K > 0 {\n"),
        "tactic.reverse-order.no-loop", "grid(",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_applies_to_one_and_refuses_its_twin(name):
    check_pair(name, PAIRS[name])


def test_warp_specialize_wants_a_dot_in_the_loop():
    rowsum = twin(
        GEMM, "acc = dot<f32>(at, bt, acc)", "acc = acc + sum(at, axis = 1)[:, None] * sum(bt, axis = 0)[None, :]"
    )
    reasons = tactics.get("warp-specialize").precondition(program(rowsum))
    assert [d.rule for d in reasons] == ["tactic.warp-specialize.no-loop"]
    assert reasons[0].span.line == line_of(rowsum, "for k in")


def run(text: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return interp.run(program(text) if isinstance(text, str) else text, {k: v.copy() for k, v in inputs.items()})


def gemm_inputs(m: int, n: int, k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "a": rng.standard_normal((m, k), dtype=np.float32),
        "b": rng.standard_normal((k, n), dtype=np.float32),
        "c": np.full((m, n), np.nan, dtype=np.float32),
    }


@pytest.mark.parametrize("group", [1, 2, 4])
def test_grouped_order_computes_every_tile_once_with_a_short_last_group(group):
    inputs = gemm_inputs(80, 48, 32)  # 5 x 3 tiles: the last group of 2 or 4 rows is short
    grouped = tactics.get("grouped-order").apply(program(GEMM), group=group)
    assert run(grouped, inputs)["c"].tobytes() == run(GEMM, inputs)["c"].tobytes()


@pytest.mark.parametrize("programs", [1, 2, 4, 64])
def test_persistent_programs_walk_every_tile_once(programs):
    inputs = gemm_inputs(80, 48, 32)  # 15 tiles: some programs take one more tile than others
    walked = tactics.get("persistent").apply(program(GEMM), programs=programs)
    assert walked.kernel.grid.data[0].data == sx.Sym("NSM")
    assert run(walked, inputs)["c"].tobytes() == run(GEMM, inputs)["c"].tobytes()


def test_persistent_over_a_grouped_order_and_a_three_axis_grid():
    inputs = gemm_inputs(80, 48, 32)
    grouped = tactics.get("grouped-order").apply(program(GEMM), group=2)
    walked = tactics.get("persistent").apply(grouped, programs=3)
    assert "for tile in program_id(0) .. tiles step NSM" in walked.text()
    assert run(walked, inputs)["c"].tobytes() == run(GEMM, inputs)["c"].tobytes()
    batched = twin(
        twin(twin(GEMM, "grid(cdiv(M, BM), cdiv(N, BN))", "grid(cdiv(M, BM), cdiv(N, BN), 2)"),
             "store(c[rows", "bump = cast<f32>(program_id(2) * num_programs(1))\n  store(c[rows"),
        ", acc, mask", ", acc + bump, mask",
    )  # fmt: skip
    walked = tactics.get("persistent").apply(program(batched), programs=5)
    assert run(walked, inputs)["c"].tobytes() == run(batched, inputs)["c"].tobytes()


def test_split_dot_is_within_bf16x3_error_of_the_f32_product():
    inputs = gemm_inputs(32, 32, 128)
    split = tactics.get("split-dot").apply(program(GEMM))
    text = split.text()
    assert "at_hi = cast<bf16>(at)" in text and "bt_lo = cast<bf16>(bt - cast<f32>(bt_hi))" in text
    got, want = run(split, inputs)["c"], run(GEMM, inputs)["c"]
    scale = np.abs(inputs["a"]) @ np.abs(inputs["b"])  # the sum of |a_k b_k|: what the error scales with
    error = np.abs(got - want) / scale
    assert error.max() < 2.0**-14 and error.max() > 0  # changed, and by about 2^-16 a product


@pytest.mark.parametrize("axis", [0, 1])
def test_reverse_order_computes_every_tile_once(axis):
    inputs = gemm_inputs(80, 48, 32)
    reversed_ = tactics.get("reverse-order").apply(program(GEMM), axis=axis)
    assert run(reversed_, inputs)["c"].tobytes() == run(GEMM, inputs)["c"].tobytes()
    with pytest.raises(KirError) as err:
        tactics.get("reverse-order").apply(program(GEMM), axis=2)
    assert [d.rule for d in err.value.diagnostics] == ["tactic.reverse-order.axis"]


def test_persistent_refuses_a_grid_that_is_persistent_already():
    walked = tactics.get("persistent").apply(program(GEMM), programs=4)
    with pytest.raises(KirError) as err:
        tactics.get("persistent").apply(walked, programs=8)
    assert "persistent already" in str(err.value)
    assert "persistent" not in [t.name for t, _ in tactics.applicable(walked, "sm_90")]


def test_reverse_order_refuses_an_axis_reversed_already():
    once = tactics.get("reverse-order").apply(program(GEMM), axis=0)
    again = program(once.text())  # as a search's node holds it: printed and parsed back
    with pytest.raises(KirError) as err:
        tactics.get("reverse-order").apply(again, axis=0)
    assert "last first already" in str(err.value)
    domains = dict(tactics.applicable(again, "sm_90"))[tactics.get("reverse-order")]
    assert domains["axis"] == (1,)
    both = tactics.get("reverse-order").apply(again, axis=1)
    assert "reverse-order" not in [t.name for t, _ in tactics.applicable(program(both.text()), "sm_90")]


@pytest.mark.parametrize("rows", [1, 2, 4])
def test_row_band_computes_every_row_once_and_keeps_the_grids_extent_where_it_is_read(rows):
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((8, 50), dtype=np.float32),
        "w": rng.standard_normal(50, dtype=np.float32),
        "y": np.full((8, 50), np.nan, dtype=np.float32),
    }
    banded = tactics.get("row-band").apply(program(ROWNORM), rows=rows)
    text = banded.text()
    assert "grid(M / R)" in text and "M % R == 0" in text and "row = first + i" in text
    assert run(banded, inputs)["y"].tobytes() == run(ROWNORM, inputs)["y"].tobytes()
    with pytest.raises(KirError) as err:  # a band of bands: the body is one loop now
        tactics.get("row-band").apply(banded, rows=2)
    assert [d.rule for d in err.value.diagnostics] == ["tactic.row-band.looped"]


def test_row_band_offers_the_row_counts_that_divide_the_rows():
    domains = tactics.get("row-band").domains(program(ROWNORM), "mtia-sim", {"M": 12, "N": 50})
    assert domains["rows"] == (1, 2, 4)
