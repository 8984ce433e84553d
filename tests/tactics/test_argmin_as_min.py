"""argmin-as-min's precondition pair: a program it applies to (and what it writes), and a near
twin it refuses with its rule id at the line it looked at; and the rewrite checked on the
interpreter where the property test's corpus (the k-means programs) says little: ties, argmax,
a 1-D tile and axis 0, integers, a minimum it must take itself, and the NaN rows where the
results differ (why the tactic is not "exact")."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tactics
from kir.diagnostics import KirError
from kir.interp import run
from tests.tactics.test_preconditions import check_pair, line_of, program, twin

NEAREST = """
kernel nearest<BP = 16, BC = 8>(d: global f32[P, C], at: out global i32[P], lo: out global f32[P])
  where C == BC
  target sm_90 grid(cdiv(P, BP)) warps(4)
{
  rows = program_id(0) * BP + arange(0, BP)
  rmask = rows < P
  dist = load(d[rows[:, None], arange(0, BC)[None, :]], mask = rmask[:, None])
  dmin = min(dist, axis = 1)
  store(at[rows], argmin(dist, axis = 1), mask = rmask)
  store(lo[rows], dmin, mask = rmask)
}
"""

# tactic: (the program it applies to, its parameters, a fragment of the result; the twin, the
# rule it is refused with, a fragment of the line the reason points at)
PAIRS = {
    "argmin-as-min": (
        NEAREST, {}, "store(at[rows], min(where(dist == dmin[:, None], lanes[None, :], BC), axis = 1), mask = rmask)",
        twin(NEAREST, "argmin(dist, axis = 1)", "cast<i32>(dmin)"), "tactic.argmin-as-min.no-argmin", "kernel nearest",
    ),
}  # fmt: skip


def test_applies_to_one_and_refuses_its_twin():
    result = check_pair("argmin-as-min", PAIRS["argmin-as-min"])
    assert "  lanes = arange(0, BC)\n  dist = load(" not in result.text()  # made before the statement that needs it


def outputs(source: str, inputs: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """The outputs of the program and of the program with its first argmin rewritten."""
    before = program(source)
    after = tactics.get("argmin-as-min").apply(before)
    want = run(before, {k: v.copy() for k, v in inputs.items()})
    got = run(after, {k: v.copy() for k, v in inputs.items()})
    return want, got


def test_ties_go_to_the_lowest_lane_as_argmin_sends_them():
    rng = np.random.default_rng(0)
    d = rng.integers(0, 3, size=(40, 8)).astype(np.float32)  # many ties, a few rows all equal
    d[3] = -0.0
    d[3, 5] = 0.0  # -0.0 and 0.0 tie
    d[4] = np.inf  # a row of infinities: lane 0
    inputs = {"d": d, "at": np.zeros(40, np.int32), "lo": np.zeros(40, np.float32)}
    want, got = outputs(NEAREST, inputs)
    assert np.array_equal(got["at"], want["at"]) and np.array_equal(got["at"], np.argmin(d, axis=1))


ONE_ROW = """
kernel one_row<B = 16>(x: global {dtype}[N], i: out global i32[1])
  where N == B
  target sm_90 grid(1) warps(4)
{{
  v = load(x[arange(0, B)])
  store(i[0], {fn}(v, axis = 0))
}}
"""

COLUMNS = """
kernel columns<BR = 8, BC = 4>(x: global f32[R, C], i: out global i32[C])
  where R == BR, C == BC
  target sm_90 grid(1) warps(4)
{
  v = load(x[arange(0, BR)[:, None], arange(0, BC)[None, :]])
  store(i[arange(0, BC)], argmax(v, axis = 0) + cast<i32>(max(v, axis = 0) > 100.0))
}
"""


@pytest.mark.parametrize("dtype, fn", [("f32", "argmin"), ("f32", "argmax"), ("i32", "argmin"), ("bf16", "argmax")])
def test_a_one_dimensional_tile_takes_its_own_minimum_and_gives_the_same_index(dtype, fn):
    source = ONE_ROW.format(dtype=dtype, fn=fn)
    after = tactics.get("argmin-as-min").apply(program(source)).text()
    extreme = "min" if fn == "argmin" else "max"
    assert f"min(where(v == {extreme}(v, axis = 0), lanes, B), axis = 0)" in after, after
    numpy_dtype = {"f32": np.float32, "i32": np.int32, "bf16": ml_dtypes.bfloat16}[dtype]
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.integers(-3, 3, size=16).astype(numpy_dtype)  # few values: ties in most draws
        want, got = outputs(source, {"x": x, "i": np.zeros(1, np.int32)})
        assert np.array_equal(got["i"], want["i"]), (x, want, got)


def test_axis_zero_reuses_the_maximum_the_program_takes_after_it_only_when_before():
    after = tactics.get("argmin-as-min").apply(program(COLUMNS)).text()
    # the max of the same value is taken after the argmax: the rewrite takes its own before it
    assert "min(where(v == max(v, axis = 0)[None, :], lanes[:, None], BR), axis = 0)" in after, after
    x = np.random.default_rng(2).integers(0, 4, size=(8, 4)).astype(np.float32)
    want, got = outputs(COLUMNS, {"x": x, "i": np.zeros(4, np.int32)})
    assert np.array_equal(got["i"], want["i"])


LOOP = """
kernel loop<BP = 4, BC = 4>(d: global f32[P, C], at: out global i32[P])
  where P == BP, C % BC == 0
  target sm_90 grid(1) warps(4)
{
  rows = arange(0, BP)
  best = full(f32[BP], inf)
  best_idx = zeros(i32[BP])
  for j in 0 .. C / BC {
    dist = load(d[rows[:, None], (j * BC + arange(0, BC))[None, :]])
    dmin = min(dist, axis = 1)
    better = dmin < best
    best_idx = where(better, j * BC + argmin(dist, axis = 1), best_idx)
    best = where(better, dmin, best)
  }
  store(at[rows], best_idx)
}
"""


def test_the_lanes_are_made_once_before_the_loop_and_a_running_argmin_is_kept():
    after = tactics.get("argmin-as-min").apply(program(LOOP)).text()
    assert "  lanes = arange(0, BC)\n  for j in 0 .. C / BC {" in after, after
    assert "j * BC + min(where(dist == dmin[:, None], lanes[None, :], BC), axis = 1)" in after, after
    d = np.random.default_rng(3).integers(0, 5, size=(4, 16)).astype(np.float32)
    want, got = outputs(LOOP, {"d": d, "at": np.zeros(4, np.int32)})
    assert np.array_equal(got["at"], want["at"]) and np.array_equal(got["at"], np.argmin(d, axis=1))


def test_a_row_with_nan_gives_the_extent_where_argmin_gives_the_first_nan():
    assert tactics.get("argmin-as-min").numerics == "approximate"
    assert "NaN" in tactics.get("argmin-as-min").explain
    d = np.ones((16, 8), np.float32)
    d[2, 5] = np.nan
    d[2, 6] = -1.0
    inputs = {"d": d, "at": np.zeros(16, np.int32), "lo": np.zeros(16, np.float32)}
    want, got = outputs(NEAREST, inputs)
    assert want["at"][2] == 5 and got["at"][2] == 8  # the first NaN; BC, one past the last lane
    rest = np.arange(16) != 2
    assert np.array_equal(got["at"][rest], want["at"][rest])


def test_site_picks_one_argmin_and_a_site_past_the_last_is_located():
    two = twin(
        NEAREST,
        "store(lo[rows], dmin, mask = rmask)",
        "store(lo[rows], cast<f32>(argmax(dist, axis = 1)), mask = rmask)",
    )
    after = tactics.get("argmin-as-min").apply(program(two), site=1).text()
    assert "store(at[rows], argmin(dist, axis = 1), mask = rmask)" in after
    assert "cast<f32>(min(where(dist == max(dist, axis = 1)[:, None], lanes[None, :], BC), axis = 1))" in after, after
    assert tactics.get("argmin-as-min").domains(program(two)) == {"site": (0, 1)}
    with pytest.raises(KirError) as err:
        tactics.get("argmin-as-min").apply(program(two), site=2)
    (d,) = err.value.diagnostics
    assert d.rule == "tactic.argmin-as-min.site" and d.span.line == line_of(two, "argmax(dist")
