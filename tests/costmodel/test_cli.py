"""`kir cost` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agent.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_cost_task_program_uses_its_preset():
    result = runner.invoke(app, ["cost", str(ROOT / "benchmarks/tasks/gemm/tuned.kir"), "--target", "sm_90"])
    assert result.exit_code == 0, result.output
    assert "bound by" in result.output and "breakdown" in result.output


def test_cost_json_with_shapes():
    args = ["cost", str(ROOT / "examples/softmax.kir"), "-t", "gfx942", "-s", "M=4096", "-s", "N=1024", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["estimate"]["time_s"] > 0
    assert data["estimate"]["counts"]["global_read_bytes"] == 4096 * 1024 * 2


def test_cost_missing_shape_is_an_error():
    result = runner.invoke(app, ["cost", str(ROOT / "examples/softmax.kir")])
    assert result.exit_code == 1
    assert "cost.shape" in result.output and "--shape" in result.output


def test_cost_unknown_target():
    result = runner.invoke(app, ["cost", str(ROOT / "examples/softmax.kir"), "-t", "sm_99", "-s", "M=1", "-s", "N=1"])
    assert result.exit_code == 2
