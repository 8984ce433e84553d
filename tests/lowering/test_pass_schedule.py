"""The passes inside `lower()` (lowering/passes/schedule.py): a tile-level program with hints
reaches Gluon (and a warp_specialize loop CUDA) through legalize -> warp_specialize -> pipeline
-> layouts, computes what it computed, and compiles; a backend that carries a hint out itself
or ignores it gets the program as written, with a `lower.hint` warning where it ignores one; a
pass that cannot apply leaves its located warning on the `Lowered`, on the refusal, and on
`kir lower` / `kir compile`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from agent.cli import app
from kir.diagnostics import KirError
from kir.dialect.explicit import ConvertLayoutOp, TmaLoadOp, WgmmaOp
from kir.dialect.structure import RoleOp
from kir.parser import parse, parse_file
from kir.program import same_ir
from lowering.emit.base import emitter_of, program_level
from lowering.entry import lower
from lowering.passes.layouts import LayoutPass
from lowering.passes.legalize import LegalizePass
from lowering.passes.pipeline import PipelinePass
from lowering.passes.schedule import passes_for
from lowering.passes.warp_specialize import WarpSpecializePass
from lowering.report import find_tool
from tests.examples.references import BF16
from tests.lowering.helpers import assert_clean, run

HERE = Path(__file__).parent
EXAMPLES = HERE.parents[1] / "examples"
TILE_GEMM = (HERE / "programs" / "gemm_ws_tile.kir").read_text()
HINTED_LOOP = "  for k in 0 .. K / BK warp_specialize {"
LOOP_LINE = TILE_GEMM.splitlines().index(HINTED_LOOP) + 1
# the loop asks for both: the warp specialization takes the stage count as its ring's depth
STAGED = TILE_GEMM.replace("warp_specialize {", "pipeline(stages = 4) warp_specialize {")
# and a loop after it that the pipeline pass cannot take (it ends up inside the consumer role)
EPILOGUE = STAGED.replace("  store(c", "  for j in 0 .. 2 pipeline(stages = 2) {\n    acc = acc * 0.5\n  }\n  store(c")
EPILOGUE_LOOP_LINE = EPILOGUE.splitlines().index("  for j in 0 .. 2 pipeline(stages = 2) {") + 1

needs_nvcc = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")


def program(text: str = TILE_GEMM):
    return parse(text, file="gemm.kir")


def gemm_inputs(m=256, n=256, k=256, seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((m, k)).astype(BF16), "b": rng.standard_normal((k, n)).astype(BF16)}


def found(diagnostics) -> list[tuple[str, str, int | None]]:
    return [(d.rule, d.severity, d.span.line if d.span else None) for d in diagnostics]


# -- the order ------------------------------------------------------------------------------------


def test_the_passes_for_gluon_run_in_one_order():
    both = passes_for(program(STAGED), "gluon", "sm_90")
    assert [type(p) for p in both] == [LegalizePass, WarpSpecializePass, PipelinePass, LayoutPass]
    pipelined = passes_for(parse_file(EXAMPLES / "gemm_bias_gelu.kir"), "gluon", "sm_90")
    assert [type(p) for p in pipelined] == [LegalizePass, PipelinePass, LayoutPass]
    assert passes_for(program(TILE_GEMM.replace(" warp_specialize", "")), "gluon", "sm_90") == []


def test_warp_specialization_runs_before_the_pipeline_pass():
    lowered = lower(program(STAGED), "gluon")
    text = lowered.program.text()
    assert "a_tile_ring = smem(bf16[4, BM, BK], swizzle = 128)" in text  # the loop's stage count
    assert "cp.async" not in text and "pipeline" not in text
    # the other order: the pipeline pass takes the loop first, and the specialization refuses it
    copied = PipelinePass().apply(program(STAGED)).program
    [refusal] = WarpSpecializePass().apply(copied).diagnostics
    assert "already at the explicit level" in refusal.message


def test_the_layouts_are_written_last_and_change_no_emitted_line():
    lowered = lower(program(), "gluon")
    assert any(isinstance(op, ConvertLayoutOp) for op in lowered.program.kernel.walk())
    assert "acc = convert_layout(zeros(f32[BM, BN]), mma([3, 0], [4, 1], [16, 128, 16]))" in lowered.program.text()
    unlaid = WarpSpecializePass().apply(LegalizePass().apply(program()).program).program
    assert lower(unlaid, "gluon").source == lowered.source


# -- what reaches gluon --------------------------------------------------------------------------


@pytest.mark.parametrize("text", [TILE_GEMM, STAGED], ids=["warp_specialize", "pipeline+warp_specialize"])
def test_a_warp_specialize_gemm_reaches_gluon_and_computes_the_same(text):
    original = program(text)
    assert program_level(original) == "tile"
    lowered = lower(original, "gluon")
    assert lowered.diagnostics == []
    out = lowered.program
    assert program_level(out) == "explicit"
    assert [op.name_text for op in out.kernel.walk() if isinstance(op, RoleOp)] == ["load", "mma"]
    assert any(isinstance(op, TmaLoadOp) for op in out.kernel.walk())
    assert any(isinstance(op, WgmmaOp) for op in out.kernel.walk())
    again = assert_clean(out)
    inputs = gemm_inputs()  # 4 k-iterations: the ring of 3 (or 4) stages wraps around
    want = run(original, inputs)["c"]
    for lowered_program in (out, again):  # a race or a deadlock would raise
        np.testing.assert_array_equal(run(lowered_program, inputs)["c"], want)
    assert "gl.warp_specialize" in lowered.source and "warpgroup_mma(" in lowered.source


def test_the_passes_see_the_parameters():
    lowered = lower(program(), "gluon", {"BN": 64})
    assert lowered.params["BN"] == 64 and lowered.diagnostics == []
    inputs = gemm_inputs()
    np.testing.assert_array_equal(
        run(lowered.program, inputs, {"BN": 64})["c"], run(program(), inputs, {"BN": 64})["c"]
    )
    # 32 rows are no wgmma tile: the specialization refuses, and the refusal says why
    with pytest.raises(KirError) as err:
        lower(program(), "gluon", {"BM": 32})
    assert found(err.value.diagnostics) == [
        ("lower.level", "error", 4),
        ("lower.warp-specialize", "warning", LOOP_LINE),
    ]
    assert "resources.wgmma-shape" in err.value.diagnostics[1].message


def test_a_loop_the_pass_cannot_take_keeps_its_warning_and_the_program_still_lowers():
    original = program(EPILOGUE)
    lowered = lower(original, "gluon")
    [d] = lowered.diagnostics
    assert found([d]) == [("lower.pipeline", "warning", EPILOGUE_LOOP_LINE)]
    assert "only loops at the top level" in d.message
    inputs = gemm_inputs()
    np.testing.assert_array_equal(run(lowered.program, inputs)["c"], run(original, inputs)["c"])


def test_a_pipeline_loop_does_not_reach_gluon_and_the_refusal_says_why():
    # the pipeline pass writes sm_80 cp.async copies, which the gluon backend does not lower:
    # the refusal stays the program's own, and the warnings say what the pass left in the way
    original = parse_file(EXAMPLES / "gemm_bias_gelu.kir")
    with pytest.raises(KirError) as err:
        lower(original, "gluon")
    first, *rest = err.value.diagnostics
    assert (first.rule, first.severity) == ("lower.level", "error")
    assert rest and all((d.rule, d.severity) == ("lower.unsupported", "warning") for d in rest)
    copies = [d for d in rest if "`kir.cp_async`" in d.message]
    assert len(copies) == 1 and copies[0].message.startswith("after the passes (legalize, pipeline): ")
    assert copies[0].span is not None and "tma.load" in copies[0].hint
    assert len({d.message for d in rest}) == len(rest)  # once per kind of op


def test_lower_still_says_which_backend_or_parameter_does_not_exist():
    with pytest.raises(KirError) as err:
        lower(program(), "fortran")
    assert [d.rule for d in err.value.diagnostics] == ["lower.backend"]
    with pytest.raises(KirError) as err:
        lower(program(), "gluon", {"BX": 1})
    assert [d.rule for d in err.value.diagnostics] == ["lower.param"]


# -- what cuda and the other backends get --------------------------------------------------------


def test_cuda_takes_a_warp_specialize_gemm_through_the_pass_and_computes_the_same():
    assert [type(p) for p in passes_for(program(STAGED), "cuda", "sm_90")] == [LegalizePass, WarpSpecializePass]
    original = program(STAGED)
    lowered = lower(original, "cuda")
    assert lowered.diagnostics == []  # the loop's stage count went into the ring: no hint is left
    assert program_level(lowered.program) == "explicit" and "wgmma" in lowered.source
    inputs = gemm_inputs()
    np.testing.assert_array_equal(run(lowered.program, inputs)["c"], run(original, inputs)["c"])


def test_a_loop_the_pass_cannot_take_is_lowered_as_written_with_its_warning():
    # cuda takes the tile level: the program the specialization refuses lowers as written
    original = program(STAGED)
    lowered = lower(original, "cuda", {"BM": 32})
    assert same_ir(lowered.program, original.with_params(BM=32))
    assert found(lowered.diagnostics) == [
        ("lower.warp-specialize", "warning", LOOP_LINE),
        ("lower.hint", "warning", LOOP_LINE),
    ]
    assert "`pipeline(stages = 4)` is not carried out" in lowered.diagnostics[1].message


PLAIN = [(b, "STAGED") for b in ("triton", "hip")] + [
    (b, "gemm_bias_gelu") for b in ("triton", "cuda", "hip")
]  # mtia-sim takes a pipelined loop through the pipelining pass (tests/lowering/test_mtia.py)


@pytest.mark.parametrize("backend, name", PLAIN)
def test_a_backend_that_takes_the_tile_level_gets_the_program_as_written(backend, name):
    original = program(STAGED) if name == "STAGED" else parse_file(EXAMPLES / "gemm_bias_gelu.kir")
    assert passes_for(original, backend, "sm_90") == []
    lowered = lower(original, backend)
    assert same_ir(lowered.program, original)
    assert lowered.source == emitter_of(backend).emit(original, original.params).source


def test_a_backend_that_ignores_a_hint_says_so_at_the_loop():
    lowered = lower(program(STAGED), "hip")
    assert found(lowered.diagnostics) == [("lower.hint", "warning", LOOP_LINE)] * 2
    pipeline, specialize = (d.message for d in lowered.diagnostics)
    assert "the hip backend lowers this loop as a plain loop: `pipeline(stages = 4)` is not carried out" == pipeline
    assert "`warp_specialize` is not carried out" in specialize
    gelu = parse_file(EXAMPLES / "gemm_bias_gelu.kir")
    [d] = lower(gelu, "cuda").diagnostics
    assert (d.rule, d.span.line) == ("lower.hint", 19) and "triton" in d.hint
    assert lower(program(STAGED), "triton").diagnostics == []  # triton carries both out itself
    assert lower(program(EPILOGUE), "cuda").diagnostics[0].span.line == EPILOGUE_LOOP_LINE  # left in the role


# -- compiled for real ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_warp_specialized_gemm_compiles_with_gluon():
    pytest.importorskip("triton")
    from lowering.compile import compile_program

    report = compile_program(program(EPILOGUE), "gluon", "sm_90")
    assert report.ok, report.log
    assert report.instructions["wgmma"] and report.instructions["tma"]
    assert found(report.diagnostics) == [("lower.pipeline", "warning", EPILOGUE_LOOP_LINE)]


@pytest.mark.slow
@needs_nvcc
def test_the_warp_specialized_gemm_compiles_with_nvcc():
    from lowering.compile import compile_program

    report = compile_program(program(EPILOGUE), "cuda", "sm_90a")
    assert report.ok, report.log
    assert report.instructions["wgmma"] and report.instructions["tma"]
    assert found(report.diagnostics)[0] == ("lower.hint", "warning", EPILOGUE_LOOP_LINE)  # the lowering's first


@pytest.mark.slow
@needs_nvcc
def test_a_pipelined_program_compiles_with_nvcc_as_written():
    from lowering.compile import compile_program

    report = compile_program(parse_file(EXAMPLES / "gemm_bias_gelu.kir"), "cuda", "sm_90a")
    assert report.ok, report.log
    assert found(report.diagnostics)[0] == ("lower.hint", "warning", 19)


# -- the command line ----------------------------------------------------------------------------

runner = CliRunner()


@pytest.mark.slow
def test_kir_compile_to_gluon_prints_the_pass_warning(tmp_path):
    pytest.importorskip("triton")
    path = tmp_path / "gemm.kir"
    path.write_text(EPILOGUE)
    result = runner.invoke(app, ["compile", str(path), "--to", "gluon"])
    assert result.exit_code == 0, result.output
    assert "warning[lower.pipeline]" in result.output and f"gemm.kir:{EPILOGUE_LOOP_LINE}:" in result.output
    result = runner.invoke(app, ["compile", str(tmp_path / "gemm.kir"), "--to", "gluon", "--json"])
    assert '"rule": "lower.pipeline"' in result.output


def test_kir_lower_prints_the_warnings(tmp_path):
    path = tmp_path / "gemm.kir"
    path.write_text(STAGED)
    result = runner.invoke(app, ["lower", str(path), "--to", "hip"])
    assert result.exit_code == 0, result.output
    assert result.output.count("warning[lower.hint]") == 2
    result = runner.invoke(app, ["lower", str(path), "--to", "gluon"])
    assert result.exit_code == 0, result.output
    assert "warning[" not in result.output and "gl.warp_specialize" in result.output
