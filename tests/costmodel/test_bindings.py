"""What the cost model refuses to estimate: shapes that break the kernel's `where`, shapes below
1, parameters that leave no shapes or make a tile empty, a preset the task does not have. Each
refusal is one located diagnostic, and each has a twin just inside the rule that is estimated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app
from costmodel import predict
from costmodel.cli import task_bindings
from kir.diagnostics import KirError
from kir.parser import parse_file
from verifier import verify
from verifier.facts import CHECKS

ROOT = Path(__file__).resolve().parents[2]
LAYERNORM = ROOT / "examples" / "layernorm.kir"  # `where N <= BLOCK`, BLOCK = 1024, on line 9


def refusal(program, params=None, shapes=None, target=None, checks=None):
    with pytest.raises(KirError) as err:
        predict(program, target, params, shapes, checks=checks)
    (diag,) = err.value.diagnostics
    return diag


@pytest.mark.parametrize("target", ["sm_90", "mtia-sim"])
def test_a_shape_that_breaks_the_where_is_refused_at_the_clause(target):
    program = parse_file(LAYERNORM)
    diag = refusal(program, shapes={"M": 4096, "N": 1025}, target=target)
    assert diag.rule == "cost.where-violated" and diag.is_error
    assert (diag.span.line, diag.span.col) == (9, 3)
    assert "`where N <= BLOCK`" in diag.message and "BLOCK = 1024, N = 1025" in diag.message
    est = predict(program, target, None, {"M": 4096, "N": 1024})  # the twin: N == BLOCK
    assert est.time_s > 0


def test_kir_cost_reports_the_broken_where_as_a_program_error():
    result = CliRunner().invoke(app, ["cost", str(LAYERNORM), "-s", "M=4096", "-s", "N=8192"])
    assert result.exit_code == 1, result.output
    assert "error[cost.where-violated]" in result.output
    assert "9 |   where N <= BLOCK" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("value", [0, -3])
def test_a_shape_below_one_is_refused_at_the_argument(value):
    program = parse_file(LAYERNORM)
    diag = refusal(program, shapes={"M": 8, "N": value})
    assert diag.rule == "cost.shape" and f"`N` = {value}" in diag.message
    assert diag.span.line == 4  # x: global bf16[M, N], the first argument it sizes
    assert predict(program, "sm_90", None, {"M": 8, "N": 1}).time_s > 0


@pytest.mark.parametrize("block", [0, -4])
def test_parameters_that_leave_no_shapes_are_refused_as_kir_check_refuses_them(block):
    program = parse_file(LAYERNORM)
    diag = refusal(program, {"BLOCK": block}, {"M": 8, "N": 1}, checks=CHECKS)
    (checked,) = verify(program, None, {"BLOCK": block})
    assert (diag.rule, diag.message, diag.span) == (checked.rule, checked.message, checked.span)
    assert diag.rule == "types.where"


def test_a_parameter_that_empties_a_tile_is_refused_at_the_tile():
    program = parse_file(ROOT / "examples" / "vector_add.kir")  # arange(0, BLOCK), no `where` on BLOCK
    diag = refusal(program, {"BLOCK": -8}, {"N": 4096})
    assert diag.rule == "cost.value" and "`BLOCK` is -8" in diag.message
    assert diag.span.line == 6
    assert predict(program, "sm_90", {"BLOCK": 1}, {"N": 4096}).time_s > 0
    # kir check refuses it too, at the same tile (and takes BLOCK = 1)
    (checked,) = verify(program, None, {"BLOCK": -8})
    assert checked.rule == "types.extent" and checked.span == diag.span and "`BLOCK` is -8" in checked.message
    assert not verify(program, None, {"BLOCK": 1})


SOFTMAX = ROOT / "benchmarks" / "tasks" / "softmax" / "seed.kir"


def cost_record(*args: str) -> dict:
    result = CliRunner().invoke(app, ["cost", str(SOFTMAX), "--json", *args])
    return json.loads(result.output)


@pytest.mark.parametrize("preset", ["test", "bench"])
def test_kir_cost_takes_every_preset_of_the_task(preset):
    record = cost_record("--preset", preset)
    _, shapes = task_bindings(SOFTMAX, preset)
    assert record["schema"] == "kir.record/1" and record["stage"] == "cost" and record["ok"]
    assert record["estimate"]["counts"]["global_read_bytes"] == shapes["M"] * shapes["N"] * 2


def test_the_default_preset_takes_the_parameters_defaults_and_asks_for_shapes():
    record = cost_record("--preset", "default")
    assert [d["rule"] for d in record["diagnostics"]] == ["cost.shape"] and record["estimate"] is None
    record = cost_record("--preset", "default", "-s", "M=8", "-s", "N=1024")
    assert record["estimate"]["counts"]["programs"] == 8


def test_an_unknown_preset_is_a_usage_error_naming_the_tasks_presets():
    record = cost_record("--preset", "tset")
    (diag,) = record["diagnostics"]
    assert diag["rule"] == "cli.preset" and diag["message"] == "task `softmax` has no preset `tset`"
    assert diag["hint"] == "presets: default, test, bench"


def test_a_broken_task_toml_is_located_in_it(tmp_path):
    (tmp_path / "task.toml").write_text("[presets.test]\nM = \n")
    kir = tmp_path / "k.kir"
    kir.write_text(LAYERNORM.read_text())
    with pytest.raises(KirError) as err:
        task_bindings(kir, "test")
    (diag,) = err.value.diagnostics
    assert diag.rule == "task.toml" and diag.span.file == str(tmp_path / "task.toml") and diag.span.line == 2
