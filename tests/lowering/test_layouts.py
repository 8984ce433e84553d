"""LayoutPass: the layouts the Gluon backend chooses, written into the IR. The result verifies,
round-trips, computes the same under the interpreter, and lowers with Gluon to exactly the source
(and line map) of the program without them; what the pass refuses is a `lower.layouts` warning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kir.dialect import explicit as ex
from kir.dialect import structure as st
from kir.dialect.types import TileType
from kir.interp import run as interp_run
from kir.parser import parse, parse_file
from kir.program import same_ir, span_of
from lowering.entry import lower
from lowering.passes.layouts import MAKERS, LayoutPass
from lowering.passes.warp_specialize import WarpSpecializePass
from tests.examples.references import BF16
from tests.lowering.test_gluon import TMA_STORE_TEXT, WS_ROWS_TEXT
from verifier.check import check_program

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples"


def programs():
    tile_gemm = parse_file(HERE / "programs" / "gemm_ws_tile.kir")
    return {
        "gemm_hopper_ws": parse_file(EXAMPLES / "gemm_hopper_ws.kir"),
        "gemm_tma_store": parse(TMA_STORE_TEXT, file="gemm_tma_store.kir"),
        "ws_rows": parse(WS_ROWS_TEXT, file="ws_rows.kir"),
        "warp_specialized_1": WarpSpecializePass(consumers=1).apply(tile_gemm).program,
        "warp_specialized_2": WarpSpecializePass(consumers=2).apply(tile_gemm).program,
    }


def errors(program):
    return {(d.rule, d.message) for d in check_program(program, "sm_90") if d.is_error}


@pytest.mark.parametrize("name", list(programs()))
def test_layouts_verify_round_trip_and_give_the_same_gluon(name):
    original = programs()[name]
    result = LayoutPass().apply(original)
    assert result.diagnostics == []
    out = result.program
    assert errors(out) <= errors(original)  # ws_rows has its own (warp roles with budgets)
    text = out.text()
    again = parse(text)
    assert same_ir(out, again) and again.text() == text
    before, after = lower(original, "gluon"), lower(out, "gluon")
    assert after.source == before.source
    assert after.line_spans == before.line_spans
    assert same_ir(LayoutPass().apply(out).program, out), "a second application changed the program"


@pytest.mark.parametrize("name", list(programs()))
def test_every_tile_that_gluon_makes_has_its_layout_in_its_type(name):
    out = LayoutPass().apply(programs()[name]).program
    made = 0
    for op in out.kernel.walk():
        if isinstance(op, MAKERS) and isinstance(op.results[0].type, TileType):
            [use] = list(op.results[0].uses)
            assert isinstance(use.operation, ex.ConvertLayoutOp)
            assert span_of(use.operation) == span_of(op)
            made += 1
        if isinstance(op, ex.WgmmaOp):
            assert op.res.type.layout.data and op.res.type.layout.data[0].data.kind == "mma"
        if isinstance(op, st.ForOp):
            assert all(r.type.layout.data for r in op.res if isinstance(r.type, TileType))
    assert made


def test_the_hopper_accumulator_gets_the_wgmma_layout_and_the_rows_tiles_blocked_ones():
    text = LayoutPass().apply(programs()["gemm_hopper_ws"]).program.text()
    assert "acc = convert_layout(zeros(f32[BM / 2, BN]), mma([3, 0], [4, 1], [16, 256, 16]))" in text
    rows = LayoutPass().apply(programs()["ws_rows"]).program.text()
    assert "blocked(" in rows and "mma(" not in rows


def test_layouts_change_nothing_the_interpreter_computes():
    original = programs()["gemm_tma_store"]
    out = LayoutPass().apply(original).program
    rng = np.random.default_rng(0)
    inputs = {"a": rng.standard_normal((64, 128)).astype(BF16), "b": rng.standard_normal((128, 128)).astype(BF16)}
    want = interp_run(original, dict(inputs), {})["c"]
    np.testing.assert_array_equal(interp_run(out, dict(inputs), {})["c"], want)


REFUSED = {
    "tile level": (lambda: parse_file(EXAMPLES / "gemm_bias_gelu.kir"), {}, "the gluon backend does not take"),
    "target": (lambda: programs()["gemm_hopper_ws"], {"target": "sm_80"}, "not sm_80"),
    "small accumulator": (
        lambda: parse((EXAMPLES / "gemm_hopper_ws.kir").read_text().replace("BM = 128", "BM = 64")),
        {},
        "32-row wgmma accumulator",
    ),
    "tile outside roles": (
        lambda: parse(
            (EXAMPLES / "gemm_hopper_ws.kir")
            .read_text()
            .replace("  n0 = program_id(1) * BN\n", "  n0 = program_id(1) * BN\n  z = zeros(f32[16])\n")
        ),
        {},
        "outside the roles",
    ),
    "reduction": (
        lambda: parse_file(HERE.parents[1] / "benchmarks" / "tasks" / "causal_attention" / "ws.kir"),
        {},
        "slice of its operand's layout",
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refusals_leave_the_program_unchanged_with_a_warning(name):
    make, options, message = REFUSED[name]
    original = make()
    result = LayoutPass(**options).apply(original)
    assert same_ir(result.program, original)
    [d] = result.diagnostics
    assert (d.rule, d.severity) == ("lower.layouts", "warning")
    assert message in d.message, d.message
