"""A fix the parser gives for an error found while reading (`kir/fixes.py`) is checked by the
rules too before the pipeline reports it (`verifier.check.read_fixes_held`): one whose edited
program has an error on a line the edit writes loses its hint and edits."""

from __future__ import annotations

from kir.diagnostics import Diagnostic, Edit, Span
from verifier.check import read_fixes_held

ROW = """\
kernel scale<BLOCK = 128>(x: global f32[M, N], y: out global f32[M, N])
  target sm_90 grid(M) warps(4)
{
  row = program_id(0)
  cols = arange(0, BLOCK)
  mask = cols < N
  store(y[row, cols], load(x[row, cols], mask = mask) * 2.0, mask = mask)
}
"""


def _said(line: int, edit: Edit) -> Diagnostic:
    return Diagnostic(
        "types.mask", "error", Span(line, 3, line, 9, "row.kir"), "a made-up error", "fix it", (), None, (edit,)
    )


def test_a_fix_that_brings_an_error_where_it_writes_is_dropped():
    col = ROW.splitlines()[5].index("<") + 1
    breaks = Edit(Span(6, col, 6, col + 1, "row.kir"), "<=")  # the mask now lets lane N through
    (d,) = read_fixes_held(ROW, "row.kir", [_said(6, breaks)])
    assert d.hint == "" and d.edits == ()


def test_a_fix_after_which_the_program_checks_clean_is_kept():
    keeps = Edit(Span(6, 3, 6, 7, "row.kir"), "mask")  # the same text: nothing goes wrong
    (d,) = read_fixes_held(ROW, "row.kir", [_said(6, keeps)])
    assert d.hint == "fix it" and d.edits == (keeps,)
