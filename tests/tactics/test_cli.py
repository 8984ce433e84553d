"""`kir tactics list | explain | apply`, in-process through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agent.cli import app
from kir.parser import parse
from kir.program import same_ir

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = str(ROOT / "benchmarks" / "tasks" / "softmax" / "seed.kir")
TUNED = ROOT / "benchmarks" / "tasks" / "softmax" / "tuned.kir"
runner = CliRunner()


def kir(*argv: str):
    result = runner.invoke(app, list(argv))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def test_list_names_every_tactic_with_its_numerics():
    result = kir("tactics", "list")
    assert result.exit_code == 0
    rows = {line.split()[0]: line.split()[1] for line in result.output.splitlines()[1:]}
    assert rows["warps"] == "exact" and rows["reciprocal"] == "approximate" and rows["retile"] == "reassociates"
    data = json.loads(kir("tactics", "list", "--json").output)
    assert data["schema"] == "kir.tactics.list/1" and data["ok"]
    record = next(t for t in data["tactics"] if t["name"] == "warps")
    assert record["params"][0]["domain"] == "a power of two in 1..32" and record["explain"]


def test_explain_says_what_when_and_the_parameters():
    result = kir("tactics", "explain", "stages")
    assert result.exit_code == 0
    assert (
        result.output.startswith("stages (exact): ") and "Parameters:" in result.output and "stages:" in result.output
    )
    unknown = kir("tactics", "explain", "stage")
    assert unknown.exit_code == 2 and "error[tactic.unknown]" in unknown.output and "'stages'" in unknown.output


def test_apply_prints_the_new_program_and_two_moves_give_the_tuned_softmax(tmp_path):
    first = kir("tactics", "apply", SOFTMAX, "reciprocal")
    assert first.exit_code == 0, first.output
    step = tmp_path / "step.kir"
    step.write_text(first.output)
    second = kir("tactics", "apply", str(step), "warps", "--param", "warps=16")
    assert second.exit_code == 0, second.output
    tuned = parse(TUNED.read_text(), file=str(TUNED))
    assert same_ir(parse(second.output), tuned)


def test_apply_that_does_not_apply_prints_the_located_reason_and_exits_1():
    result = kir("tactics", "apply", SOFTMAX, "stages")
    assert result.exit_code == 1
    assert "error[tactic.stages.no-pipeline]" in result.output and "seed.kir:" in result.output
    data = json.loads(kir("tactics", "apply", SOFTMAX, "stages", "--json").output)
    assert (
        data["ok"] is False and data["text"] is None and data["diagnostics"][0]["rule"] == "tactic.stages.no-pipeline"
    )


def test_apply_usage_errors_exit_2():
    bad_value = kir("tactics", "apply", SOFTMAX, "warps", "-p", "warps=3")
    assert bad_value.exit_code == 2 and "error[tactic.param]" in bad_value.output and "power of two" in bad_value.output
    for argv, said in (
        (["warps", "-p", "wraps=8"], "did you mean 'warps'?"),
        (["warps", "-p", "warps"], "bad --param 'warps'"),
        (["warps", "-p", "warps=x"], "bad --param 'warps=x'"),
        (["warps", "-p", "warps=8", "-p", "warps=16"], "given twice"),
        (["wraps"], "did you mean 'warps'?"),
        (["warps", "-t", "sm_9O"], "unknown target 'sm_9O'"),
    ):
        result = kir("tactics", "apply", SOFTMAX, *argv)
        assert result.exit_code == 2 and said in result.output, (argv, result.output)
