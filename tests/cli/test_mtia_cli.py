"""mtia-sim through the command line: `kir compile -b mtia-sim`, `kir run`'s default backend
(mtia-sim where no CUDA device is present, triton where one is) and `kir cost` on mtia-sim."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agent.cli
from agent.cli import app
from agent.pipeline import Record
from lowering.targets.triton import runtime as runtime_triton

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "benchmarks" / "tasks"
runner = CliRunner()


def test_compile_to_mtia_sim_builds_the_simulator_library():
    result = runner.invoke(app, ["compile", str(TASKS / "gemm" / "mtia.kir"), "-b", "mtia-sim", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    report = data["report"]
    assert report["backend"] == "mtia-sim" and report["arch"] == "mtia-sim" and report["ok"]
    assert report["binary"].endswith("kernel.so")
    assert (data["backend"], data["target"]) == ("mtia-sim", "mtia-sim")
    text = runner.invoke(app, ["compile", str(TASKS / "gemm" / "mtia.kir"), "-b", "mtia-sim"]).output
    # after the verifier's warnings (a compile verifies first)
    assert f"\n{TASKS / 'gemm' / 'mtia.kir'}: compiled (backend mtia-sim, target mtia-sim)\n" in text


def test_compile_to_mtia_sim_refuses_another_arch():
    result = runner.invoke(app, ["compile", str(TASKS / "gemm" / "mtia.kir"), "-b", "mtia-sim", "-t", "gfx90a"])
    assert result.exit_code == 2
    assert result.output == "error[cli.target]: mtia-sim compiles for mtia-sim, not gfx90a\n"


@pytest.mark.parametrize(("cuda", "expected"), [(False, "mtia-sim"), (True, "triton")])
def test_run_default_backend_follows_the_cuda_check(monkeypatch, cuda, expected):
    monkeypatch.setattr(runtime_triton, "cuda_available", lambda: cuda)
    assert agent.cli.default_run_backend() == expected
    seen = {}

    def fake_run_command(file, task, backend, *rest):
        seen["backend"] = backend
        return Record(candidate="c", file=file, stage="run", ok=True, until="run", verdict={"ok": True}), ""

    monkeypatch.setattr(agent.cli, "run_command", fake_run_command)
    monkeypatch.setattr(agent.cli, "describe", lambda record, file, task, backend, preset: f"backend {backend}")
    result = runner.invoke(app, ["run", str(TASKS / "softmax" / "seed.kir"), "--task", "softmax"])
    assert result.exit_code == 0, result.output
    assert seen["backend"] == expected
    assert f"backend {expected}" in result.output


def test_run_an_explicit_backend_wins(monkeypatch):
    monkeypatch.setattr(runtime_triton, "cuda_available", lambda: False)
    result = runner.invoke(
        app, ["run", str(TASKS / "softmax" / "seed.kir"), "--task", "softmax", "-b", "interp", "--seed", "3"]
    )
    assert result.exit_code == 0, result.output
    assert "backend interp" in result.output


def test_run_without_a_gpu_runs_on_the_simulator(monkeypatch):
    monkeypatch.setattr(runtime_triton, "cuda_available", lambda: False)
    result = runner.invoke(app, ["run", str(TASKS / "softmax" / "mtia.kir"), "--task", "softmax", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "backend mtia-sim" in result.output


@pytest.mark.parametrize("cuda", [False, True])
def test_cost_without_a_target_costs_the_declared_target(monkeypatch, cuda):
    """`kir cost` has no fixed default target: a program is costed on the target it declares,
    with or without a GPU (an mtia-sim program on mtia-sim)."""
    monkeypatch.setattr(runtime_triton, "cuda_available", lambda: cuda)
    result = runner.invoke(app, ["cost", str(TASKS / "softmax" / "mtia.kir"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["estimate"]["target"] == "mtia-sim"
    result = runner.invoke(app, ["cost", str(TASKS / "softmax" / "seed.kir"), "--json"])
    assert json.loads(result.output)["estimate"]["target"] == "sm_90"


def test_cost_on_mtia_sim_prints_the_engines():
    args = ["cost", str(TASKS / "gemm" / "mtia.kir"), "--target", "mtia-sim", "--preset", "bench"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "bound by dot-product engine" in result.output
