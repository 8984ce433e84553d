"""The `gather` op in the language: text and IR, every misuse the parser reports, the meaning the
interpreter gives it, the verifier's bounds proof and the cost model's counts. Its lowerings are
tested in tests/lowering/test_gather.py; both use the programs in tests/lowering/programs/."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from costmodel import predict
from costmodel.counting import RANDOM_BANK_LOAD
from kir.builder import Builder
from kir.diagnostics import KirError
from kir.dialect import tile as tl
from kir.interp import run
from kir.parser import parse, parse_file
from kir.program import same_ir
from verifier.check import check_program

PROGRAMS = Path(__file__).resolve().parents[1] / "lowering" / "programs"
BF16 = ml_dtypes.bfloat16


def lut():
    return parse_file(PROGRAMS / "gather_lut.kir")


def columns():
    return parse_file(PROGRAMS / "gather_columns.kir")


# A kernel around one statement: `v` is f32[BM, BN], `i` an i32[BM, BN] index, `r` i32[BN].
HEAD = """\
kernel k<BM = 4, BN = 8>(x: global f32[BM, BN], ix: global i32[BM, BN], y: out global f32[BM, BN])
  target sm_90 grid(1) warps(4)
{
  rows = arange(0, BM)
  r = arange(0, BN)
  v = load(x[rows[:, None], r[None, :]])
  i = load(ix[rows[:, None], r[None, :]])
"""


def kernel(*lines: str) -> str:
    return HEAD + "".join(f"  {line}\n" for line in lines) + "}\n"


def diag(*lines: str):
    with pytest.raises(KirError) as err:
        parse(kernel(*lines), file="t.kir")
    (d, *_) = err.value.diagnostics
    return d


def col_of(line: str, fragment: str) -> int:
    """The 1-based column of `fragment` in a body line (indented by two spaces)."""
    return line.index(fragment) + 3


# ---- text and IR --------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lut, columns], ids=["lut", "columns"])
def test_round_trip(make):
    program = make()
    text = program.text()
    again = parse(text)
    assert same_ir(program, again) and again.text() == text
    assert (PROGRAMS / f"{program.kernel.kernel_name}.kir").read_text() == text  # the files are canonical


def test_the_axis_of_a_1d_source_defaults_to_0_and_is_printed():
    text = lut().text().replace("gather(bnd, mid, axis = 0)", "gather(bnd, mid)")
    program = parse(text)
    (op,) = [op for op in program.kernel.walk() if isinstance(op, tl.GatherOp)]
    assert op.axis.data == 0 and "gather(bnd, mid, axis = 0)" in program.text()
    assert same_ir(program, lut())


def test_the_result_has_the_index_shape_and_the_source_dtype():
    program = columns()
    ops = [op for op in program.kernel.walk() if isinstance(op, tl.GatherOp)]
    assert [str(op.res.type) for op in ops] == ["bf16[BM, 16]", "bf16[BM, 16]"]
    assert [str(op.index.type) for op in ops] == ["i32[BM, 16]", "i64[BM, 16]"]


def test_a_broadcast_by_addition_is_an_index_too():
    p = parse(
        kernel("g = gather(v, r[None, :] + zeros(i32[BM, BN]), axis = 1)", "store(y[rows[:, None], r[None, :]], g)")
    )
    assert [op.axis.data for op in p.kernel.walk() if isinstance(op, tl.GatherOp)] == [1]


# ---- what the parser reports ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "fragment", "words"),
    [
        ("g = gather(v)", "gather(v)", "usage: gather(src, index, axis = A)"),
        ("g = gather(v, i, 1)", "gather(v, i, 1)", "usage: gather(src, index, axis = A)"),
        ("g = gather(v, i, dim = 1)", "1)", "gather has no argument 'dim'"),
        ("g = gather(v, cast<f32>(i), axis = 1)", "cast<f32>(i)", "integer tile (i32 or i64), not f32[BM, BN]"),
        ("g = gather(v, 3, axis = 0)", "3, axis", "the index must be a tile, not i32"),
        ("g = gather(max(r, axis = 0), r, axis = 0)", "max(r, axis = 0)", "the source must be a tile, not i32"),
        ("g = gather(v, i, axis = 1.0)", "1.0", "axis is an integer constant, not a real number"),
        ("g = gather(v, i, axis = 2)", "2)", "axis 2 is out of range for a rank-2 source"),
        ("g = gather(v, i, axis = -1)", "-1", "axis -1 is out of range"),
        ("g = gather(v, i)", "gather(v, i)", "gather of a rank-2 source needs axis = A"),
        ("g = gather(v, r, axis = 1)", "r, axis", "the index [BN] must have the rank of the source [BM, BN]"),
        ("g = gather(v, r[None, :], axis = 1)", "r[None, :]", "dimension 0 of the index is 1 but the source's is BM"),
    ],
)
def test_each_misuse_is_a_call_arguments_error_at_its_argument(line, fragment, words):
    d = diag(line)
    assert d.rule == "call.arguments", d
    assert words in d.message, d.message
    assert (d.span.line, d.span.col) == (8, col_of(line, fragment)), (d.span, line)


def test_a_shape_mismatch_names_triton_and_the_broadcast_that_fixes_it():
    d = diag("g = gather(v, r[None, :], axis = 1)")
    assert "Triton's tl.gather requires it too" in d.message
    assert "broadcast(idx, [BM, BN])" in d.hint


def test_the_builder_reports_the_same_facts_under_type_rules():
    b = Builder("k", params={"B": 8}, target="sm_90", grid=["1"], warps=4)
    b.arg("x", "f32", ["B"])
    b.begin()
    v = b.load(b.value("x"), [b.arange(0, "B")])
    f = b.make(tl.CastOp, b.arange(0, "B"), "f32").res
    row = b.make(tl.ExpandDimsOp, b.arange(0, "B"), 0).res
    for args, rule in [
        ((v, f, 0), "types.index"),
        ((v, b.arange(0, "B"), 1), "types.axis"),
        ((v, row, 0), "types.rank"),
    ]:
        with pytest.raises(KirError) as err:
            b.make(tl.GatherOp, *args)
        assert err.value.diagnostics[0].rule == rule
    assert str(b.make(tl.GatherOp, v, b.arange(0, 4), 0).res.type) == "f32[4]"


# ---- the interpreter ----------------------------------------------------------------------------


def test_lut_reads_the_table_at_each_index():
    rng = np.random.default_rng(0)
    b = rng.standard_normal(1024).astype(np.float32)
    m = rng.integers(0, 1024, 300).astype(np.int32)
    out = run(lut(), {"b": b, "m": m})
    np.testing.assert_array_equal(out["y"], b[m])


def test_columns_take_along_axis_1_with_i32_and_i64_indices():
    w = np.random.default_rng(1).standard_normal((64, 128)).astype(BF16)
    out = run(columns(), {"w": w})
    idx = np.arange(16) * 8
    np.testing.assert_array_equal(out["y"], w[:, idx])
    np.testing.assert_array_equal(out["z"], np.take_along_axis(w, np.broadcast_to(127 - idx, (64, 16)), axis=1))


AXIS0 = """
kernel k<R = 8, C = 4, K = 3>(x: global f32[R, C], ix: global i64[K, C], y: out global f32[K, C])
  target sm_90 grid(1) warps(4)
{
  c = arange(0, C)
  k = arange(0, K)
  v = load(x[arange(0, R)[:, None], c[None, :]])
  store(y[k[:, None], c[None, :]], gather(v, load(ix[k[:, None], c[None, :]]), axis = 0))
}
"""


def test_axis_0_of_a_2d_tile_with_i64_indices_is_numpys_take_along_axis():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    ix = rng.integers(0, 8, (3, 4)).astype(np.int64)
    out = run(parse(AXIS0), {"x": x, "ix": ix})
    np.testing.assert_array_equal(out["y"], np.take_along_axis(x, ix, axis=0))


@pytest.mark.parametrize("bad", [1024, -1])
def test_an_index_out_of_range_stops_the_interpreter_at_the_gather(bad):
    rng = np.random.default_rng(3)
    m = rng.integers(0, 1024, 300).astype(np.int32)
    m[128 + 7] = bad  # program 1, lane 7
    with pytest.raises(KirError) as err:
        run(lut(), {"b": np.zeros(1024, np.float32), "m": m})
    (d,) = err.value.diagnostics
    assert d.rule == "interp.out-of-bounds" and d.span.line == 9
    assert f"gather: index {bad} at lane [7] is outside 0 .. 1023 along axis 0 of `bnd`" == d.message
    assert d.counterexample == {"program_id": [1], "index": bad, "extent": 1024, "lane": [7]}


# ---- the verifier -------------------------------------------------------------------------------


def test_an_index_loaded_from_memory_is_unproven_not_wrong():
    diags = check_program(lut(), "sm_90")
    assert [(d.rule, d.severity, d.span.line) for d in diags] == [("bounds.unproven", "warning", 9)]
    assert "gather from `bnd`" in diags[0].message and "minimum(maximum(mid, 0), 1023)" in diags[0].hint


def test_computed_column_indices_are_proved_in_bounds():
    assert check_program(columns(), "sm_90") == []


def test_one_column_past_the_end_is_an_error_with_a_counterexample():
    text = columns().text().replace("127 - idx", "128 - idx")
    diags = [d for d in check_program(parse(text), "sm_90") if d.is_error]
    line = text.splitlines().index("  store(z[rows[:, None], cols[None, :]], gather(wrow, back, axis = 1))") + 1
    assert [(d.rule, d.span.line) for d in diags] == [("bounds.gather-index", line)]
    assert "index 128 >= 128" in diags[0].message and diags[0].counterexample is not None


def test_a_stride_one_too_large_leaves_the_row():
    ok = check_program(columns().with_params(STRIDE=8), "sm_90")
    bad = check_program(columns().with_params(STRIDE=9), "sm_90")
    assert not [d for d in ok if d.is_error]
    assert {d.rule for d in bad if d.is_error} == {"bounds.gather-index"}


# ---- the cost model -----------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["sm_90", "gfx942", "mtia-sim"])
@pytest.mark.parametrize(("make", "shapes"), [(lut, {"N": 100_000}), (columns, {"M": 4096})], ids=["lut", "columns"])
def test_the_cost_model_estimates_gathers_on_every_target(make, shapes, target):
    est = predict(make(), target, shapes=shapes)
    assert est.time_s > 0 and any("gather" in str(t) for t in est.breakdown)


def test_a_gather_counts_shared_memory_traffic_and_one_integer_op_per_element():
    base = predict(lut(), "sm_90", shapes={"N": 128 * 64}).counts
    twice = "gather(bnd, mid, axis = 0) + gather(bnd, mid, axis = 0)"
    text = lut().text().replace("gather(bnd, mid, axis = 0)", twice)
    both = predict(parse(text), "sm_90", shapes={"N": 128 * 64}).counts
    programs = 64
    # the table written once, 128 elements read back, per program; the index is loaded, so the
    # lanes' words share banks as random words of a 1024-word table do (costmodel/counting.py)
    read = 128 * RANDOM_BANK_LOAD[32]
    one = (1024 + read) * 4 * programs
    assert base["smem_bytes"] == pytest.approx(one) and both["smem_bytes"] == pytest.approx(2 * one)
    assert both["int_ops"] - base["int_ops"] == 128 * programs  # the second gather's addresses
    assert base["smem_alloc_bytes"] == 1024 * 4  # the staged table


def test_the_language_reference_documents_gather():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "language.md").read_text()
    assert "`kir.gather`" in doc and "gather(bnd, mid, axis = 0)" in doc
