"""Isolation: a candidate that hangs, crashes, raises, or meets a broken reference becomes a
structured record, and the caller goes on."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from agent.harness.isolate import run_job

SOFTMAX = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "softmax"


def python_job(tmp_path: Path, body: str, task: Path = SOFTMAX) -> dict:
    solution = tmp_path / "solution.py"
    solution.write_text(
        "import os, ctypes, time\nimport torch\n\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def forward(self, x):\n" + "".join(f"        {line}\n" for line in body.splitlines())
    )
    return {"task": str(task), "candidate": {"kind": "python", "file": str(solution)}, "preset": "test", "seeds": [1]}


def rules(record: dict) -> list[str]:
    return [d["rule"] for d in record["diagnostics"]]


def test_a_correct_python_candidate_passes(tmp_path):
    record = run_job(python_job(tmp_path, "return torch.softmax(x.float(), -1).to(x.dtype)"), timeout=120)
    assert record["ok"] and record["stage"] == "done", record


def test_a_hang_is_killed_by_the_timeout(tmp_path):
    start = time.monotonic()
    record = run_job(python_job(tmp_path, "while True:\n    time.sleep(0.01)"), timeout=5)
    assert time.monotonic() - start < 30
    assert record["stage"] == "timeout" and rules(record) == ["harness.timeout"]


@pytest.mark.parametrize("body, signal", [("os.abort()", "SIGABRT"), ("ctypes.string_at(0)", "SIGSEGV")])
def test_a_crash_is_a_record_with_the_signal(tmp_path, body, signal):
    record = run_job(python_job(tmp_path, body), timeout=120)
    assert record["stage"] == "crash" and rules(record) == ["harness.crash"]
    assert signal in record["diagnostics"][0]["message"]


def test_a_python_error_is_a_record_with_its_traceback(tmp_path):
    record = run_job(python_job(tmp_path, "raise ValueError('no luck')"), timeout=120)
    assert record["stage"] == "run" and rules(record) == ["harness.candidate-error"]
    assert "no luck" in record["diagnostics"][0]["message"]
    assert "solution.py" in record["log_tail"]


def test_an_exit_without_a_record_is_reported(tmp_path):
    record = run_job(python_job(tmp_path, "os._exit(3)"), timeout=120)
    assert record["stage"] == "crash" and rules(record) == ["harness.no-record"]
    assert "status 3" in record["diagnostics"][0]["message"]


def test_a_broken_reference_is_a_task_record_at_its_line(tmp_path):
    task = tmp_path / "broken"
    shutil.copytree(SOFTMAX, task)
    text = (task / "reference.py").read_text()
    (task / "reference.py").write_text(
        text.replace("return torch.softmax(x, dim=-1)", "return torch.softmax(x, dim=5)")
    )
    line = (task / "reference.py").read_text().splitlines().index("        return torch.softmax(x, dim=5)") + 1
    record = run_job(python_job(tmp_path, "return x * 1", task=task), timeout=120)
    assert record["stage"] == "task" and rules(record) == ["task.reference"]
    assert record["diagnostics"][0]["line"] == line
    assert record["diagnostics"][0]["file"].endswith("reference.py")


def test_a_reference_with_all_zero_inputs_is_refused(tmp_path):
    task = tmp_path / "zeros"
    shutil.copytree(SOFTMAX, task)
    text = (task / "reference.py").read_text()
    (task / "reference.py").write_text(text.replace("torch.randn(M, N)", "torch.zeros(M, N)"))
    record = run_job(python_job(tmp_path, "return x * 1", task=task), timeout=120)
    assert record["stage"] == "task" and rules(record) == ["task.inputs"]


def test_a_kir_program_that_never_ends_is_killed(tmp_path):
    program = (SOFTMAX / "seed.kir").read_text()
    # a loop of 10^9 iterations: the interpreter would run for days
    program = program.replace(
        "  row = program_id(0)\n", "  row = program_id(0)\n  for i in 0 .. 1000000000 {\n    z = i + 1\n  }\n"
    )
    job = {
        "task": str(SOFTMAX),
        "candidate": {"kind": "kir", "text": program, "backend": "interp", "params": {"BLOCK": 512}},
        "preset": "test",
        "seeds": [1],
        "verify": False,
    }
    record = run_job(job, timeout=5)
    assert record["stage"] == "timeout", record


def test_a_kir_program_that_is_wrong_is_a_correctness_record_at_the_output(tmp_path):
    program = (SOFTMAX / "seed.kir").read_text().replace("e / sum(e, axis = 0)", "e / (sum(e, axis = 0) + 1.0)")
    job = {
        "task": str(SOFTMAX),
        "candidate": {"kind": "kir", "text": program, "backend": "interp", "params": {"BLOCK": 512}},
        "preset": "test",
        "seeds": [1],
    }
    record = run_job(job, timeout=120)
    assert record["stage"] == "correctness" and rules(record) == ["harness.mismatch"]
    assert record["diagnostics"][0]["line"] == 4  # the `y: out global bf16[M, N]` argument


def test_a_kir_syntax_error_is_a_parse_record(tmp_path):
    job = {
        "task": str(SOFTMAX),
        "candidate": {"kind": "kir", "text": "kernel k(", "backend": "interp"},
        "preset": "test",
    }
    record = run_job(job, timeout=120)
    assert record["stage"] == "parse" and record["diagnostics"][0]["line"] == 1


def test_a_reference_that_computes_nan_is_refused(tmp_path):
    task = tmp_path / "nan"
    shutil.copytree(SOFTMAX, task)
    text = (task / "reference.py").read_text()
    (task / "reference.py").write_text(text.replace("return torch.softmax(x, dim=-1)", "return torch.log(x - 100)"))
    record = run_job(python_job(tmp_path, "return x * 1", task=task), timeout=120)
    assert record["stage"] == "task" and rules(record) == ["task.reference"]
    assert "NaN" in record["diagnostics"][0]["message"]


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_a_timeout_that_is_no_duration_is_a_usage_record(tmp_path, timeout):
    record = run_job(python_job(tmp_path, "return x * 1"), timeout=timeout)
    assert record["stage"] == "usage" and rules(record) == ["harness.usage"]
