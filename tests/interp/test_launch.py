"""Binding arguments, `where` constraints, outputs, bounds and the error paths of `run`."""

from __future__ import annotations

import numpy as np
import pytest

from kir.diagnostics import KirError
from kir.interp import machine, run
from tests.interp.util import error_of, line_of, program, run_text

COPY = """
kernel copy<BLOCK = 16>(x: global f32[N], y: out global f32[N])
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(1)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  store(y[offs], load(x[offs]) * 2.0)
}
"""


def test_inputs_are_not_modified_and_every_argument_is_returned():
    x = np.arange(32, dtype=np.float32)
    keep = x.copy()
    out = run_text(COPY, {"x": x})
    np.testing.assert_array_equal(x, keep)
    assert set(out) == {"x", "y"}
    np.testing.assert_array_equal(out["y"], 2 * x)


def test_where_violated_is_reported_at_the_kernel():
    d = error_of(COPY, {"x": np.zeros(20, np.float32)})
    assert d.rule == "interp.where-violated"
    assert d.span.line == 1
    assert "N = 20" in d.message and "BLOCK = 16" in d.message
    assert d.counterexample == {"BLOCK": 16, "N": 20}


def test_params_override_defaults():
    out = run_text(COPY, {"x": np.arange(20, dtype=np.float32)}, {"BLOCK": 5})
    np.testing.assert_array_equal(out["y"], 2 * np.arange(20, dtype=np.float32))
    assert error_of(COPY, {"x": np.zeros(16, np.float32)}, {"BLOK": 4}).rule == "interp.bad-input"


@pytest.mark.parametrize(
    "inputs, words",
    [
        ({"x": np.zeros(16, np.float64)}, "float64"),
        ({}, "missing"),
        ({"x": np.zeros((4, 4), np.float32)}, "dimensions"),
        ({"x": np.zeros(16, np.float32), "w": np.zeros(1)}, "not an argument"),
    ],
)
def test_bad_inputs(inputs, words):
    d = error_of(COPY, inputs)
    assert d.rule == "interp.bad-input"
    assert words in d.message


def test_shape_symbols_must_agree_between_arguments():
    text = """
    kernel k(x: global f32[N], y: global f32[N], z: out global f32[N])
      target sm_90 grid(1) warps(1)
    {
      store(z[arange(0, 1)], load(x[arange(0, 1)]))
    }
    """
    d = error_of(text, {"x": np.zeros(4, np.float32), "y": np.zeros(5, np.float32)})
    assert d.rule == "interp.bad-input" and "N" in d.message


def test_absent_outputs_are_poisoned_and_given_outputs_kept():
    text = """
    kernel k(x: global f32[N], y: out global f32[N], c: out global i32[N])
      target sm_90 grid(1) warps(1)
    {
      store(y[arange(0, 2)], load(x[arange(0, 2)]))
    }
    """
    x = np.ones(4, np.float32)
    out = run_text(text, {"x": x})
    assert out["y"][:2].tolist() == [1, 1] and np.isnan(out["y"][2:]).all()
    assert (out["c"] == np.iinfo(np.int32).min).all()
    out = run_text(text, {"x": x, "y": np.full(4, 7.0, np.float32), "c": np.zeros(4, np.int32)})
    assert out["y"].tolist() == [1, 1, 7, 7]


def test_declared_strides_bind_their_symbols():
    text = """
    kernel k(x: global f32[M, N] strides(SM, 1), y: out global i32[1])
      target sm_90 grid(1) warps(1)
    {
      store(y[arange(0, 1)], full(i32[1], SM))
    }
    """
    base = np.zeros((4, 10), np.float32)
    out = run_text(text, {"x": base[:, :6]})
    assert out["y"].tolist() == [10]


def test_out_of_bounds_load_has_a_counterexample():
    text = """
    kernel k<B = 8>(x: global f32[N], y: out global f32[N])
      target sm_90 grid(2) warps(1)
    {
      offs = program_id(0) * B + arange(0, B)
      v = load(x[offs])
      store(y[offs], v, mask = offs < N)
    }
    """
    d = error_of(text, {"x": np.zeros(12, np.float32)})
    assert d.rule == "interp.out-of-bounds"
    assert d.span.line == line_of(text, "v = load")
    assert d.counterexample["program_id"] == [1]
    assert d.counterexample["index"] == [12] and d.counterexample["shape"] == [12]
    assert "`x`" in d.message and d.hint


def test_masked_off_lanes_are_not_bounds_checked():
    text = """
    kernel k<B = 8>(x: global f32[N], y: out global f32[N])
      target sm_90 grid(2) warps(1)
    {
      offs = program_id(0) * B + arange(0, B)
      store(y[offs], load(x[offs], mask = offs < N), mask = offs < N)
    }
    """
    out = run_text(text, {"x": np.arange(12, dtype=np.float32)})
    assert out["y"].tolist() == list(range(12))


def test_out_of_bounds_store_reports_the_loop_iteration():
    text = """
    kernel k(y: out global f32[N])
      target sm_90 grid(1) warps(1)
    {
      for i in 0 .. N + 1 {
        store(y[i], 1.0)
      }
    }
    """
    d = error_of(text, {"y": np.zeros(3, np.float32)})
    assert d.rule == "interp.out-of-bounds"
    assert d.counterexample["i"] == 3


def test_grid_limit_runs_the_first_and_last_programs():
    out = run(program(COPY), {"x": np.ones(16 * 10, np.float32)}, grid_limit=4)
    done = ~np.isnan(out["y"].reshape(10, 16)).any(axis=1)
    assert done.tolist() == [True, True] + [False] * 6 + [True, True]


def test_a_run_that_takes_too_long_stops_with_a_diagnostic():
    text = """
    kernel k(y: out global f32[1])
      target sm_90 grid(1) warps(1)
    {
      for i in 0 .. 100000000 {
        store(y[0], 1.0)
      }
    }
    """
    d = error_of(text, {"y": np.zeros(1, np.float32)}, time_limit=0.2)
    assert d.rule == "interp.timeout"


def test_an_interpreter_bug_becomes_an_internal_diagnostic(monkeypatch):
    from kir.dialect.tile import ArangeOp

    def broken(cta, op, strand):
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(machine.HANDLERS, ArangeOp, broken)
    with pytest.raises(KirError) as err:
        run_text(COPY, {"x": np.zeros(16, np.float32)})
    (d,) = err.value.diagnostics
    assert d.rule == "interp.internal"
    assert d.span is not None and d.span.line == line_of(COPY, "arange")
    assert "boom" in d.message


def test_a_non_positive_loop_step_is_reported():
    text = """
    kernel k(y: out global f32[1])
      target sm_90 grid(1) warps(1)
    {
      for i in 0 .. 4 step 0 {
        store(y[0], 1.0)
      }
    }
    """
    assert error_of(text, {"y": np.zeros(1, np.float32)}).rule == "interp.bad-step"


def test_a_shape_symbol_past_i32_is_refused():
    """Shape symbols are i32 (docs/language.md): an array longer than 2^31 - 1 is refused
    before anything runs (a broadcast view: no memory behind it)."""
    huge = np.broadcast_to(np.zeros(1, np.float32), (2**31,))
    d = error_of(COPY, {"x": huge})
    assert d.rule == "interp.bad-input" and "2147483648" in d.message and "i32" in d.message
