"""Typing errors found while a program is read come with their fix as edits (`kir.fixes`): the
first candidate after which the text reads without error, or no hint at all."""

from __future__ import annotations

import pytest

from kir.diagnostics import KirError, apply_edits
from kir.parser import parse

KERNEL = """\
kernel k<BLOCK = 256>(x: global f32[N], y: out global bf16[N], z: global bf16[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
%s
}
"""


def _error(line: str):
    text = KERNEL % f"  {line}"
    with pytest.raises(KirError) as err:
        parse(text, "k.kir")
    (d,) = err.value.diagnostics
    return text, d


def _reads(text: str) -> bool:
    try:
        parse(text, "k.kir")
    except KirError:
        return False
    return True


@pytest.mark.parametrize(
    ("line", "rule", "fixed"),
    [
        ("store(y[offs], v * 2.0, mask = mask)", "types.store-dtype", "cast<bf16>(v * 2.0)"),
        ("store(y[offs], cast<f16>(v), mask = mask)", "types.store-dtype", "cast<bf16>(v)"),
        ("store(y[offs], cast<bf16>(v + load(z[offs], mask = mask)), mask = mask)", "types.operand-dtype",
         "v + cast<f32>(load(z[offs], mask = mask))"),
        ("store(y[offs], cast<bf16>(exp(offs)), mask = mask)", "types.float-only", "exp(cast<f32>(offs))"),
        ("s = sum(v, axis = 1)", "types.axis", "sum(v, axis = 0)"),
        ("store(y[offs], cast<bf16>(x * 2.0), mask = mask)", "types.value", "load(x[offs], mask = mask) * 2.0"),
    ],
)  # fmt: skip
def test_a_typing_error_comes_with_the_edit_that_fixes_it(line, rule, fixed):
    text, d = _error(line)
    assert d.rule == rule and d.edits, d
    after = apply_edits(text, d.edits)
    assert fixed in after and _reads(after), after
    assert fixed.split("(")[0] in d.hint or d.edits[0].text in d.hint, d.hint


def test_no_candidate_that_reads_means_no_hint():
    """Tiles of BLOCK and BLOCK / 2 lanes: no axis makes them broadcast, and the right sizes are
    the program's to choose."""
    _, d = _error("w = v + cast<f32>(arange(0, BLOCK / 2))")
    assert d.rule == "types.broadcast" and not d.edits and d.hint == ""
    assert "do not broadcast" in d.message
