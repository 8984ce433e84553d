"""`kir lower` and `kir compile` from the command line (the old spellings `--to`, `--arch`
and `--output` are tested in test_flags.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def kir(*args: str):
    return runner.invoke(app, list(args))


def test_lower_prints_triton_source():
    result = kir("lower", str(EXAMPLES / "vector_add.kir"), "-b", "triton")
    assert result.exit_code == 0, result.output
    assert "@triton.jit" in result.output and "def vector_add(" in result.output


def test_lower_refuses_a_level_the_backend_does_not_take():
    result = kir("lower", str(EXAMPLES / "gemm_hopper_ws.kir"), "-b", "triton", "--json")
    assert result.exit_code == 1
    assert '"rule": "lower.level"' in result.output and "Traceback" not in result.output


def test_lower_writes_a_file_and_takes_params(tmp_path):
    out = tmp_path / "k.py"
    result = kir("lower", str(EXAMPLES / "softmax.kir"), "-b", "triton", "-o", str(out), "-p", "BLOCK=256")
    assert result.exit_code == 0, result.output
    assert "BLOCK" in out.read_text()


def test_unknown_backend_is_a_usage_error():
    result = kir("lower", str(EXAMPLES / "vector_add.kir"), "-b", "fortran")
    assert result.exit_code == 2
    assert result.output == (
        "error[cli.backend]: unknown backend 'fortran' for kir lower\n"
        "  = hint: one of cuda, gluon, hip, mtia-sim, triton\n"
    )


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_compile_reports_hgmma_for_the_explicit_gemm():
    result = kir("compile", str(EXAMPLES / "gemm_hopper_ws.kir"), "-b", "cuda")
    assert result.exit_code == 0, result.output
    assert "instructions: " in result.output and "HGMMA " in result.output
    assert "spill_stores: 0" in result.output and "spills: 0" in result.output and "registers: 168" in result.output


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_compile_json_carries_the_report():
    result = kir("compile", str(EXAMPLES / "gemm_hopper_ws.kir"), "-b", "cuda", "-p", "BN=128", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    report = data["report"]
    assert report["backend"] == "cuda" and report["arch"] == "sm_90a" and report["ok"] is True
    assert report["entry"] == "gemm_hopper_ws" and report["registers"] == 168
    assert report["spill_stores"] == report["spill_loads"] == report["local_bytes"] == 0
    assert report["static_shared_bytes"] + report["dynamic_shared_bytes"] == report["shared_bytes"] > 0
    assert report["instructions"]["HGMMA"] > 0 and report["binary"].endswith(".cubin")
    assert len(report["sass"]) <= 4003 and "diagnostics" not in report and data["diagnostics"] == []


def test_compile_json_of_a_refused_program_is_a_failed_report():
    result = kir("compile", str(EXAMPLES / "gemm_hopper_ws.kir"), "-b", "triton", "--json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["report"]["ok"] is False and data["report"]["backend"] == "triton"
    assert "lower.level" in {d["rule"] for d in data["diagnostics"]}


def test_compile_for_a_target_the_backend_lacks_is_a_usage_error_without_a_report():
    result = kir("compile", str(EXAMPLES / "vector_add.kir"), "-b", "gluon", "-t", "gfx942", "--json")
    assert result.exit_code == 2
    data = json.loads(result.output)
    assert data["report"] is None and [d["rule"] for d in data["diagnostics"]] == ["cli.target"]
    assert data["diagnostics"][0]["message"] == "gluon compiles for sm_90, not gfx942"
