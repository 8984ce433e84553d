"""`dataflow.masked-reduce` and the bounds of the lanes a mask keeps: a `max` over values that are
provably at least the padding (a `min` over values at most it) cannot be changed by the padding,
so it is not reported; the near twins where the padding can win still are."""

from __future__ import annotations

import pytest

from tests.verifier.harness import describe, diagnose

ROW = """
kernel row_stat<BLOCK = 1024>(x: global f32[M, N], y: out global f32[M])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  v = load(x[row, cols]{other}, mask = mask)
  store(y[row], {reduction})
}}
"""

KEPT = {
    "absmax, zero padding": ("", "max(abs(v), axis = 0)"),
    "max of squares": ("", "max(v * v, axis = 0)"),
    "max of exp, -inf padding": (", other = -inf", "max(exp(v), axis = 0)"),
    "max of relu": ("", "max(maximum(v, 0.0), axis = 0)"),
    "padding reset by where": ("", "max(where(mask, abs(v), 0.0), axis = 0)"),
    "squares reset by where": ("", "max(where(mask, v * v, 0.0), axis = 0)"),
    "shifted absmax, shifted padding": ("", "max(abs(v) - 1.0, axis = 0)"),
    "min of -abs": ("", "min(-abs(v), axis = 0)"),
    "padding below the data": (", other = -1.0", "max(sqrt(abs(v)), axis = 0)"),
    "max of a sigmoid over -1 padding": (", other = -1.0", "max(sigmoid(v), axis = 0)"),
}

FLAGGED = {
    "max of raw data, zero padding": ("", "max(v, axis = 0)"),
    "absmax, padding above the data's floor": (", other = 5.0", "max(abs(v), axis = 0)"),
    "min of abs, zero padding": ("", "min(abs(v), axis = 0)"),
    "argmax of abs: a tie may pick a padded lane": ("", "cast<f32>(argmax(abs(v), axis = 0))"),
    "where sets a padding above the data's floor": ("", "max(where(mask, abs(v), 1.0), axis = 0)"),
    "max of exp, zero padding: exp(-1) may be above every exp(v - 1)": ("", "max(exp(v - 1.0), axis = 0)"),
    "max of a product of two signs": ("", "max(v * abs(v), axis = 0)"),
}


def _program(other: str, reduction: str) -> str:
    return ROW.format(other=other, reduction=reduction)


@pytest.mark.parametrize("case", sorted(KEPT))
def test_padding_that_cannot_win_is_not_reported(case):
    diags = diagnose(_program(*KEPT[case]))
    assert not [d for d in diags if d.rule == "dataflow.masked-reduce"], describe(diags)
    assert not [d for d in diags if d.severity == "error"], describe(diags)


@pytest.mark.parametrize("case", sorted(FLAGGED))
def test_padding_that_can_win_is_reported(case):
    diags = diagnose(_program(*FLAGGED[case]))
    hits = [d for d in diags if d.rule == "dataflow.masked-reduce"]
    assert hits and hits[0].span is not None and hits[0].span.line == 10, describe(diags)
