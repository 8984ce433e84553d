"""The one compile report (`lowering.report.CompileReport`) that every compile driver fills,
and the pieces the drivers share: plain data and back, the derived totals, the ptxas log, the
instruction counts, the `lower.compile` error at the KIR op and the warnings at the kernel."""

from __future__ import annotations

import json
from pathlib import Path

from kir.parser import parse_file
from lowering.entry import lower
from lowering.report import (
    PTX_MARKS,
    SASS_MARKS,
    CompileReport,
    compile_error,
    count_instructions,
    load_report,
    read_ptxas,
    resource_warnings,
    save_report,
)

ROOT = Path(__file__).resolve().parents[2]
PTXAS_LOG = """\
ptxas info    : Compiling entry function 'gemm' for 'sm_90a'
ptxas info    : Function properties for gemm
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]
"""


def vector_add():
    return lower(parse_file(ROOT / "examples" / "vector_add.kir"), "triton")


def test_plain_data_and_back_keeps_every_field_and_adds_the_totals():
    report = CompileReport("cuda", "sm_90a", ok=True, entry="k", registers=40, spill_stores=8, spill_loads=4)
    report.static_shared_bytes, report.dynamic_shared_bytes = 1024, 65536
    report.instructions = {"HGMMA": 4}
    report.extra["maxnreg"] = 168
    data = json.loads(json.dumps(report.to_json()))
    assert data["spills"] == 12 and data["shared_bytes"] == 66560 and data["diagnostics"] == []
    back = CompileReport.from_json(data)
    assert back == report and back.spills == 12 and back.shared_bytes == 66560


def test_unknown_figures_stay_unknown():
    report = CompileReport("triton", "gfx942", ok=False)
    assert report.spills is None and report.shared_bytes is None and report.to_json()["registers"] is None


def test_texts_are_cut_short_only_when_asked():
    report = CompileReport("cuda", "sm_90a", ok=True, sass="S" * 5000, log="short")
    assert len(report.to_json()["sass"]) == 5000
    cut = report.to_json(max_text=100)
    assert cut["sass"] == "S" * 100 + "..." and cut["log"] == "short"


def test_the_cache_keeps_the_report_but_not_its_diagnostics(tmp_path):
    lowered = vector_add()
    binary = tmp_path / "kernel.cubin"
    binary.write_bytes(b"\x7fELF")
    # an ok report holds what an ok compile makes (lowering.report.artefacts: what its target declares), or is not cached
    report = CompileReport(
        "triton", "sm_90", ok=True, spill_stores=4, registers=255, binary=str(binary), ptx="ptx", sass="sass"
    )
    report.diagnostics = resource_warnings(lowered, report)
    save_report(tmp_path / "r.json", report)
    again = load_report(tmp_path / "r.json")
    assert again is not None and again.cached and again.diagnostics == [] and again.spill_stores == 4
    assert load_report(tmp_path / "missing.json") is None


def test_ptxas_log_fills_registers_spills_local_and_static_shared_memory():
    report = CompileReport("cuda", "sm_90a", ok=True)
    read_ptxas(PTXAS_LOG, report)
    assert (report.registers, report.spill_stores, report.spill_loads) == (255, 8, 12)
    assert report.local_bytes == 16 and report.static_shared_bytes == 1024 and "unavailable" not in report.extra
    empty = CompileReport("cuda", "sm_90a", ok=True)
    read_ptxas("", empty)
    assert empty.extra["unavailable"] == ["registers", "spill_stores", "local_bytes"]


def test_instructions_are_counted():
    ptx = "wgmma.mma_async.sync.aligned.m64n128k16\nwgmma.mma_async.sync.aligned.m64n128k16\ncp.async.bulk.tensor.2d"
    counts = count_instructions(ptx, PTX_MARKS)
    assert counts["wgmma"] == 2 and counts["tma"] == 1 and counts["mma"] == 0
    sass = "/*0a50*/ HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ ;\n/*0b00*/ UTMALDG.2D [UR8], [UR4] ;"
    assert count_instructions(sass, SASS_MARKS) == {
        "HGMMA": 1,
        "HMMA": 0,
        "UTMALDG": 1,
        "UTMASTG": 0,
        "LDGSTS": 0,
        "LDSM": 0,
    }


def test_a_compile_error_points_at_the_kir_op_of_the_generated_line():
    lowered = vector_add()
    line = next(n for n in sorted(lowered.line_spans) if "tl.load" in lowered.source.split("\n")[n - 1])
    d = compile_error(lowered, line, "NameError: boom", column=3, path="/tmp/k.py")
    assert d.rule == "lower.compile" and d.severity == "error" and d.span == lowered.span_for_line(line)
    assert f"generated line {line}: `" in d.message and "boom" in d.message and "bug of the triton backend" in d.hint
    assert d.counterexample == {"generated_line": line, "column": 3, "source_path": "/tmp/k.py"}
    nowhere = compile_error(lowered, None, "", where="kernel.cu")
    assert nowhere.span == lowered.program.span() and "(kernel.cu): unknown error" in nowhere.message


def test_spills_and_local_memory_are_warnings_at_the_kernel():
    lowered = vector_add()
    spills = resource_warnings(lowered, CompileReport("cuda", "sm_90a", ok=True, registers=255, spill_stores=8))
    assert [(d.rule, d.severity, d.span) for d in spills] == [("compile.spills", "warning", lowered.program.span())]
    local = resource_warnings(lowered, CompileReport("cuda", "sm_90a", ok=True, spill_stores=0, local_bytes=64))
    assert [d.rule for d in local] == ["compile.local-memory"]
    assert resource_warnings(lowered, CompileReport("cuda", "sm_90a", ok=True, spill_stores=0, local_bytes=0)) == []


def test_triton_specializes_shape_symbols_that_are_multiples_of_16_as_the_launch_does():
    import re
    from pathlib import Path

    from kir.parser import parse, parse_file
    from lowering.compile import compile_program

    root = Path(__file__).resolve().parents[2]
    program = parse_file(root / "benchmarks" / "tasks" / "softmax" / "tuned.kir")

    def loads(report):
        return sorted(set(re.findall(r"ld\.global[.\w]*", report.ptx)))

    assert loads(compile_program(program, "triton", "sm_90", {"BLOCK": 8192})) == ["ld.global.b16"]
    wide = compile_program(program, "triton", "sm_90", {"BLOCK": 8192}, symbols={"N": 8192})
    assert loads(wide) == ["ld.global.v4.b32"]
    # a `where N % 16 == 0` constraint says the same without a shape value
    constrained = parse(program.text().replace("where N <= BLOCK", "where N <= BLOCK, N % 16 == 0"))
    assert loads(compile_program(constrained, "triton", "sm_90", {"BLOCK": 8192})) == ["ld.global.v4.b32"]
