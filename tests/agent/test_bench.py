"""The benchmark runner's CPU side: what it plans, and the JSON and markdown it writes."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agent.cli import app
from agent.harness.bench import plan, summary_lines, table_lines, write
from agent.tasks import load_suite

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"


def test_the_plan_times_gpu_backends_by_level_and_leaves_simulator_programs_out():
    rows = plan(load_suite(SUITE), None, None)
    by_program = {(task.name, name): set() for task, name, _ in rows}
    for task, name, backend in rows:
        by_program[(task.name, name)].add(backend)
    assert by_program[("softmax", "tuned")] == {"triton"}
    assert by_program[("gemm", "explicit")] == {"gluon", "cuda"}
    assert ("softmax", "mtia") not in by_program  # a target mtia-sim program: cycles, not events
    assert {name for _, name, _ in plan(load_suite(SUITE, ["gemm"]), None, ["tuned"])} == {"tuned"}
    # backends asked for: each program through those its level takes
    asked = plan(load_suite(SUITE, ["gemm"]), ["triton", "gluon"], ["tuned", "persistent", "mtia"])
    assert {(name, backend) for _, name, backend in asked} == {("tuned", "triton"), ("persistent", "gluon")}


def _result() -> dict:
    row = {"task": "softmax", "program": "tuned", "backend": "triton", "correct": True, "stage": "done", "message": "",
           "bytes": 268435456, "flops": 0.0, "flags": []}  # fmt: skip
    return {
        "date": "2026-11-29",
        "gpu": "NVIDIA H200",
        "versions": {"torch": "2.11.0", "triton": "3.6.0"},
        "ceilings": {"copy_gbps": 4228.0, "bf16_tflops": 790.0},
        "preset": "bench",
        "rows": [
            {**row, "ms": 0.068, "eager_ms": 0.257, "compile_ms": 0.158, "floor_ms": 0.0635},
            {**row, "task": "gemm", "ms": 0.2, "eager_ms": 0.18, "compile_ms": 0.176, "floor_ms": 0.17},
            {
                **row,
                "task": "conv1d",
                "correct": False,
                "stage": "correctness",
                "message": "mismatch | at [0]",
                "ms": None,
                "eager_ms": None,
                "compile_ms": None,
                "floor_ms": None,
            },
        ],  # fmt: skip
    }


def test_written_results_hold_every_figure_needed_to_recompute_the_ratios(tmp_path):
    json_path, md_path = write(_result(), tmp_path / "out")
    data = json.loads(json_path.read_text())
    assert {"date", "gpu", "versions", "ceilings", "rows"} <= set(data)
    for row in data["rows"]:
        assert {"task", "backend", "correct", "ms", "eager_ms", "compile_ms", "floor_ms"} <= set(row)
    text = md_path.read_text()
    assert "| softmax | tuned | triton | yes | 0.068 | 0.257 | 0.158 | 0.064 | 3.78 | 2.32 | 1.07 |" in text
    assert "no: correctness" in text and "mismatch / at [0]" in text  # a | in a message cannot break the table


def test_the_summary_is_the_geometric_mean_of_compile_over_ours_and_names_the_slower_tasks():
    (line,) = summary_lines(_result())
    # sqrt(0.158 / 0.068 * 0.176 / 0.2) = 1.43
    assert "= 1.43 over 2 tasks" in line and "slower than torch.compile on: gemm" in line
    assert len(table_lines(_result())) == 2 + 3


def test_bench_refuses_a_cpu_backend():
    result = CliRunner().invoke(app, ["bench", "softmax", "--backend", "mtia-sim"])
    assert result.exit_code == 2 and "GPU backends" in result.output


def test_bench_without_a_gpu_stops_with_a_diagnostic_instead_of_failing_every_row():
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = CliRunner().invoke(app, ["bench", "softmax"])
    assert result.exit_code == 2 and "needs a CUDA GPU" in result.output
    assert result.output.startswith("error[cli.no-cuda]: ")  # and nothing before it (no harness.internal)


def test_each_task_s_rows_are_handed_over_as_soon_as_it_is_timed(monkeypatch):
    """A run cut short (the device's time limit) keeps the tasks it finished: `timed` gets the
    result after each task's timing (`on_timed`). The child processes are replaced by canned records."""
    import agent.harness.bench as bench

    def fake_run_job(job, timeout):
        if job.get("kind") == "ceilings":
            return {"ok": True, "metrics": {"ceilings": {"copy_gbps": 4000.0, "bf16_tflops": 700.0}, "environment": {}}}
        if job.get("kind") == "time":
            n = len(job["candidates"])
            metrics = {"candidates": [{"ms": 1.0}] * n, "eager_ms": 2.0, "compile_ms": 1.5, "bytes": 1e6, "flops": 0.0}
            return {"ok": True, "stage": "done", "metrics": metrics}
        return {"ok": True, "stage": "done", "diagnostics": []}

    import agent.pipeline as pipeline

    monkeypatch.setattr(bench, "run_job", fake_run_job)  # the ceilings and the timing
    monkeypatch.setattr(pipeline, "run_job", fake_run_job)  # each row's check, through the pipeline
    tasks = [t for t in load_suite(SUITE) if t.name in ("softmax", "silu_mul")]
    seen = []
    result = bench.run_suite(tasks, programs=["tuned"], on_timed=lambda partial: seen.append(partial))
    assert len(seen) == 2
    assert [r["ms"] is not None for r in seen[0]["rows"]].count(True) == 1  # the first task only
    assert all(r["ms"] == 1.0 for r in seen[1]["rows"]) and seen[1]["rows"] == result["rows"]
    assert all(r["predicted_ms"] > 0 for r in result["rows"])  # the cost model's time beside the measured one


def test_a_row_is_checked_through_the_pipeline_with_the_models_prediction_beside_it():
    from agent.harness.bench import check_row

    (task,) = load_suite(SUITE, ["softmax"])
    record = check_row(task, "tuned", "interp", "test", "cpu", timeout=300)
    assert record.ok and record.stage == "run" and record.until == "run"
    assert record.verdict["ok"] and record.verdict["stage"] == "done"
    assert record.estimate is not None and record.estimate["time_s"] > 0  # costed at the preset's shapes
    assert record.task == "softmax" and record.preset == "test" and record.backend == "interp"
    assert dict(record.params) == task.programs["tuned"].params_for("test")
