"""The builder API builds the same IR as the parser, and programs are values."""

from __future__ import annotations

from pathlib import Path

import pytest

from kir.builder import Builder
from kir.diagnostics import KirError
from kir.dialect import OPS
from kir.parser import parse, parse_file
from kir.program import same_ir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SCALE = """kernel scale<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  store(y[offs], v * 2.0, mask = mask)
}
"""


def build_scale():
    b = Builder("scale", params={"BLOCK": 256}, target="sm_90", grid=["cdiv(N, BLOCK)"], warps=4)
    b.arg("x", "f32", ["N"])
    b.arg("y", "f32", ["N"], out=True)
    b.begin()
    base = b.binary("mul", b.program_id(0), b.value("BLOCK"))
    offs = b.assign("offs", b.binary("add", base, b.arange(0, "BLOCK")))
    mask = b.assign("mask", b.compare("lt", offs, b.value("N")))
    v = b.assign("v", b.load(b.value("x"), [offs], mask=mask))
    b.store(b.value("y"), [offs], b.binary("mul", v, b.const(2.0, "f32")), mask=mask)
    return b.finish()


def test_builder_and_parser_agree():
    built = build_scale()
    parsed = parse(SCALE)
    assert same_ir(built, parsed)
    assert built.text() == SCALE
    assert built.content_hash() == parsed.content_hash()


def test_builder_loop_carries_named_values():
    b = Builder("acc", params={"B": 16}, grid=[1], warps=1)
    b.arg("x", "f32", ["B"])
    b.arg("y", "f32", ["B"], out=True)
    b.begin()
    i = b.assign("i", b.arange(0, "B"))
    b.assign("acc", b.load(b.value("x"), [i]))
    b.begin_for("k", b.const(0, "i32"), b.const(3, "i32"), b.const(1, "i32"), ["acc"])
    b.assign("acc", b.binary("add", b.value("acc"), b.value("acc")))
    b.end_for()
    b.store(b.value("y"), [i], b.value("acc"))
    p = b.finish()
    assert "for k in 0 .. 3 {" in p.text()
    assert same_ir(parse(p.text()), p)


def test_builder_type_errors_are_diagnostics():
    b = Builder("bad", grid=[1])
    b.arg("x", "f32", ["N"])
    b.begin()
    with pytest.raises(KirError) as err:
        b.binary("add", b.const(1, "i32"), b.const(1.0, "f32"))
    assert err.value.diagnostics[0].rule == "types.operand-dtype"


def test_hash_ignores_layout_and_comments_but_not_meaning():
    p = parse_file(EXAMPLES / "vector_add.kir")
    reformatted = parse("# a comment\n" + p.text().replace("  offs", "\n  offs"))
    assert reformatted.content_hash() == p.content_hash()
    assert p.with_params(BLOCK=512).content_hash() != p.content_hash()


def test_with_params_returns_a_new_program():
    p = parse_file(EXAMPLES / "gemm_hopper_ws.kir")
    q = p.with_params(S=2, BK=32)
    assert q.params["S"] == 2 and p.params["S"] == 4
    assert "S = 2" in q.text() and "S = 4" in p.text()
    with pytest.raises(KeyError):
        p.with_params(NOPE=1)


def test_every_op_is_documented_with_an_example():
    for op in OPS:
        doc = op.__doc__ or ""
        assert len(doc.strip()) > 20, f"{op.name} has no docstring"
        shows_kir = "`" in doc or any(line.startswith("        ") and line.strip() for line in doc.splitlines())
        assert shows_kir, f"{op.name}: the docstring shows no KIR example"
