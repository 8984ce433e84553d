"""A DMA's rows start on 8-byte boundaries on mtia-sim (docs/hardware/mtia-sim.md 3.2): the
pipelining pass takes a loop there only where every row of every copy provably does, by the
`where` clauses and the copy's start; else the loop stays, with a located warning. (The
simulator refuses the unaligned copy at run time: mtia.dma-align.)"""

from __future__ import annotations

import pytest

from kir.dialect.explicit import CpAsyncOp
from kir.parser import parse
from lowering.passes.pipeline import PipelinePass

ROWS = """\
kernel rows<BLOCK = 512>(x: global bf16[M, N], y: out global f32[M, N], z: out global f32[M])
  where N <= BLOCK, M % 4 == 0WHERE
  target mtia-sim grid(M / 4) warps(1)
{
  cols = arange(0, BLOCK)
  mask = cols < N
  for r in 0 .. 4 pipeline(stages = 2) {
    row = program_id(0) * 4 + r
    v = cast<f32>(load(x[row, START]LOADMASK))
    store(z[row], sum(v, axis = 0))
  }
}
"""


def _pipelined(where: str = "", start: str = "cols", mask: str = ", mask = mask") -> tuple[bool, list]:
    text = ROWS.replace("WHERE", where).replace("START", start).replace("LOADMASK", mask)
    result = PipelinePass(row_align=8).apply(parse(text))
    return any(isinstance(op, CpAsyncOp) for op in result.program.kernel.walk()), result.diagnostics


@pytest.mark.parametrize("where", [", N % 4 == 0", ", N % 8 == 0", ", N == 300", ", N == 4096"])
def test_rows_the_clauses_align_are_copied(where):
    pipelined, diagnostics = _pipelined(where)
    assert pipelined and diagnostics == []


@pytest.mark.parametrize("where", ["", ", N % 2 == 0", ", N == 301"])
def test_rows_that_may_start_off_8_bytes_stay_loads_with_a_warning(where):
    pipelined, diagnostics = _pipelined(where)
    assert not pipelined
    [d] = diagnostics
    assert d.rule == "lower.pipeline" and d.severity == "warning" and "8-byte" in d.message
    assert d.span is not None and d.span.line == 9  # the load


def test_a_start_off_the_alignment_is_refused_and_one_on_it_copied():
    ok, _ = _pipelined(", N % 4 == 0", start="4 + arange(0, BLOCK)", mask="")
    off, diagnostics = _pipelined(", N % 4 == 0", start="2 + arange(0, BLOCK)", mask="")
    assert ok and not off and "start of the last dimension" in diagnostics[0].message


def test_without_a_row_rule_the_pass_copies_as_before():
    text = ROWS.replace("WHERE", "").replace("START", "cols").replace("LOADMASK", ", mask = mask")
    result = PipelinePass().apply(parse(text))
    assert any(isinstance(op, CpAsyncOp) for op in result.program.kernel.walk())
