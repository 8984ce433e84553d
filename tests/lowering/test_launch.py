"""lowering.launch.bind_shapes: shape symbols of a launch on torch tensors, checked."""

from __future__ import annotations

import pytest
import torch

from kir.diagnostics import KirError
from kir.parser import parse

PROGRAM = """\
kernel k<BLOCK = 16>(x: global f32[M, N], y: out global f32[M, N])
  where N <= BLOCK
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  store(y[row, cols], load(x[row, cols], mask = cols < N), mask = cols < N)
}
"""


def bind(x, y, params=None):
    from lowering.launch import bind_shapes

    return bind_shapes(parse(PROGRAM), params or {}, {"x": x, "y": y})


def test_symbols_come_from_the_shapes():
    assert bind(torch.zeros(3, 10), torch.zeros(3, 10)) == {"M": 3, "N": 10}


def test_a_shape_that_disagrees_is_reported_at_the_argument():
    with pytest.raises(KirError) as err:
        bind(torch.zeros(3, 10), torch.zeros(3, 11))
    (d,) = err.value.diagnostics
    assert d.rule == "run.bind" and d.span.line == 1 and "[3, 11]" in d.message and "[3, 10]" in d.message


def test_a_broken_where_and_a_strided_tensor_are_refused():
    with pytest.raises(KirError, match="N <= BLOCK"):
        bind(torch.zeros(3, 20), torch.zeros(3, 20))
    assert bind(torch.zeros(3, 20), torch.zeros(3, 20), {"BLOCK": 32}) == {"M": 3, "N": 20}
    with pytest.raises(KirError, match="contiguous"):
        bind(torch.zeros(10, 3).t(), torch.zeros(3, 10))


def test_a_shape_symbol_past_i32_is_refused():
    """Shape symbols are i32 (docs/language.md): a tensor longer than 2^31 - 1 on a dimension
    that binds one is refused at its argument (an expanded view: no memory behind it)."""
    huge = torch.zeros(3, 1).expand(3, 2**31)
    with pytest.raises(KirError) as err:
        bind(huge, huge, {"BLOCK": 2**32})
    (d,) = err.value.diagnostics
    assert d.rule == "run.bind" and d.span.line == 1 and "2147483648" in d.message and "i32" in d.message
