"""`kir run FILE --task TASK`: the correctness protocol from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agent.cli import app

SOFTMAX = Path(__file__).resolve().parents[2] / "benchmarks" / "tasks" / "softmax"
runner = CliRunner()


def test_run_a_correct_program_by_task_name():
    result = runner.invoke(app, ["run", str(SOFTMAX / "seed.kir"), "--task", "softmax", "--seed", "5"])
    assert result.exit_code == 0, result.output
    assert "correct on task softmax" in result.output and "seeds 5" in result.output


def test_run_reports_a_wrong_program_at_its_output_argument(tmp_path):
    bad = tmp_path / "bad.kir"
    bad.write_text((SOFTMAX / "seed.kir").read_text().replace("e / sum(e, axis = 0)", "e"))
    result = runner.invoke(app, ["run", str(bad), "--task", str(SOFTMAX), "-p", "BLOCK=512", "--json"])
    assert result.exit_code == 1
    record = json.loads(result.output)
    assert record["stage"] == "run" and record["verdict"]["stage"] == "correctness"
    (diag,) = record["diagnostics"]
    assert diag["rule"] == "harness.mismatch" and diag["file"] == str(bad) and diag["line"] == 4


def test_run_names_the_known_tasks_when_one_is_missing():
    result = runner.invoke(app, ["run", str(SOFTMAX / "seed.kir"), "--task", "no_such_task"])
    assert result.exit_code == 2
    assert "task.missing" in result.output and "softmax" in result.output


def test_run_refuses_an_unknown_backend():
    result = runner.invoke(app, ["run", str(SOFTMAX / "seed.kir"), "--task", "softmax", "-b", "tpu"])
    assert result.exit_code == 2 and "unknown backend 'tpu' for kir run" in result.output
