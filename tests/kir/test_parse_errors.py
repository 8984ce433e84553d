"""Bad input gets a located diagnostic with a rule id, never a traceback."""

from __future__ import annotations

import pytest

from kir.diagnostics import KirError
from kir.parser import parse

HEAD = "kernel k<B = 64>(x: global f32[N], y: out global f32[N])\n  target sm_90 grid(cdiv(N, B)) warps(4)\n{\n"


def diag(text: str):
    with pytest.raises(KirError) as err:
        parse(text, file="t.kir")
    (d, *_) = err.value.diagnostics
    return d


def body(*lines: str) -> str:
    return HEAD + "".join(f"  {line}\n" for line in lines) + "}\n"


def test_unexpected_token_says_what_was_expected():
    d = diag(body("i = arange(0, B)", "v = load(x[i] mask = i < N)"))
    assert d.rule == "syntax.unexpected-token"
    assert (d.span.file, d.span.line, d.span.col) == ("t.kir", 5, 17)
    assert "expected" in d.hint and "','" in d.hint
    text = d.render(body("i = arange(0, B)", "v = load(x[i] mask = i < N)"))
    assert text.splitlines()[0] == "t.kir:5:17: error[syntax.unexpected-token]: unexpected 'mask'"
    assert "^^^^" in text


def test_unexpected_character():
    d = diag(body("i = arange(0, B) $"))
    assert d.rule == "syntax.unexpected-char" and (d.span.line, d.span.col) == (4, 20)


def test_end_of_file():
    d = diag(HEAD + "  i = arange(0, B)\n")
    assert d.rule == "syntax.unexpected-token" and "end of file" in d.message
    assert d.span.line == 4


def test_undefined_name_suggests_a_close_one():
    d = diag(body("idx = arange(0, B)", "v = load(x[idz])"))
    assert d.rule == "name.undefined" and d.span.line == 5
    assert "idx" in d.hint


def test_type_error_is_located_at_the_op():
    d = diag(body("i = arange(0, B)", "v = load(x[i])", "w = v + cast<bf16>(v)"))
    assert d.rule == "types.operand-dtype" and d.span.line == 6
    assert "f32" in d.message and "bf16" in d.message


def test_store_of_wrong_dtype_hints_a_cast():
    d = diag(body("i = arange(0, B)", "store(y[i], cast<bf16>(load(x[i])))"))
    assert d.rule == "types.store-dtype" and "cast<f32>" in d.hint


def test_float_literal_where_an_integer_is_needed():
    d = diag(body("i = arange(0, B) + 1.5"))
    assert d.rule == "types.literal" and d.span.line == 4


def test_assigning_a_parameter_is_refused():
    d = diag(body("B = 3"))
    assert d.rule == "name.reserved" and d.span.line == 4


def test_carried_value_changing_type():
    d = diag(body("acc = zeros(f32[B])", "for k in 0 .. 4 {", "  acc = cast<bf16>(acc)", "}"))
    assert d.rule == "types.carried" and d.span.line == 6


def test_slice_needs_a_static_extent():
    d = diag(body("n = program_id(0)", "v = load(x[n : n * 2])"))
    assert d.rule == "syntax.slice" and d.span.line == 5


def test_unknown_op_suggests():
    d = diag(body("i = arange(0, B)", "v = exq(cast<f32>(i))"))
    assert d.rule == "call.unknown" and "exp" in d.hint


def test_nul_byte_and_binary_junk():
    assert diag("kernel \x00").rule == "syntax.unexpected-char"
    d = diag("\xff\xfe garbage ((((")
    assert d.span is not None and d.span.line == 1


def test_unknown_target():
    d = diag("kernel k(x: global f32[N]) target sm_99 grid(1) warps(4) {\n}\n")
    assert d.rule == "kernel.signature" and "sm_99" in d.message


def test_grid_names_must_be_known():
    d = diag("kernel k(x: global f32[N]) target sm_90 grid(Q) warps(4) {\n}\n")
    assert d.rule == "name.undefined" and "Q" in d.message


def test_json_fields():
    d = diag(body("v = load(x[zz])"))
    j = d.to_json()
    for key in ("rule", "severity", "file", "line", "col", "end_line", "end_col", "message", "hint"):
        assert key in j
    assert j["line"] == 4 and j["col"] <= j["end_col"]
