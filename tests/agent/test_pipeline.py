"""agent.pipeline: one path for every candidate, one Record that reads back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent import pipeline
from agent.pipeline import Candidate, Record, evaluate

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "softmax.kir"
TASK_SOFTMAX = ROOT / "benchmarks" / "tasks" / "softmax" / "seed.kir"
SMEM_TOO_BIG = """\
kernel big<BLOCK = 256>(x: global f32[N], y: out global f32[N])
  where N % BLOCK == 0
  target sm_90 grid(N / BLOCK) warps(4)
{
  buf = smem(f32[65536])
  n0 = program_id(0) * BLOCK
  store(buf[0 : BLOCK], load(x[n0 : n0 + BLOCK]))
  barrier()
  store(y[n0 : n0 + BLOCK], load(buf[0 : BLOCK]))
}
"""


def round_trips(record: Record) -> None:
    data = json.loads(json.dumps(record.to_json()))
    assert Record.from_json(data) == record
    assert Record.from_json(data).to_json() == record.to_json()


@pytest.mark.parametrize(
    ("until", "options"),
    [
        ("parse", {}),
        ("verify", {}),
        ("cost", {"shapes": {"M": 64, "N": 1000}}),
        ("lower", {"backend": "triton"}),
        ("compile", {"backend": "mtia-sim"}),
    ],
)
def test_each_stage_gives_a_record_that_round_trips(until, options):
    record = evaluate(Candidate.from_file(SOFTMAX), until=until, **options)
    assert record.ok and record.stage == until and record.until == until, record.errors
    assert record.kernel == "softmax" and record.ops and set(dict(record.seconds)) >= {"parse"}
    assert (record.estimate is not None) == (until == "cost")
    assert (record.lowered is not None) == (until == "lower")
    assert (record.report is not None) == (until == "compile")
    round_trips(record)


def test_a_record_with_diagnostics_round_trips():
    broken = SOFTMAX.read_text().replace("mask = mask", "mask = nomask", 1)
    record = evaluate(Candidate(broken, file="broken.kir"), until="compile", backend="triton")
    assert not record.ok and record.stage in ("parse", "verify") and record.errors
    round_trips(record)


def test_a_verifier_error_stops_the_candidate_before_any_compiler(monkeypatch):
    def no_compile(*args, **kwargs):
        raise AssertionError("a compiler ran")

    monkeypatch.setattr(pipeline, "compile_program", no_compile)
    monkeypatch.setattr(pipeline, "lower", no_compile)
    for until in ("lower", "compile", "cost", "run"):
        record = evaluate(Candidate(SMEM_TOO_BIG, file="big.kir"), until=until, backend="triton")
        assert record.stage == "verify" and not record.ok
        assert "resources.smem" in {d.rule for d in record.errors}


def test_the_verify_stage_says_what_kir_check_says(tmp_path):
    from typer.testing import CliRunner

    from agent.cli import app

    path = tmp_path / "big.kir"
    path.write_text(SMEM_TOO_BIG)
    checked = json.loads(CliRunner().invoke(app, ["check", str(path), "--json"]).output)
    compiled = json.loads(CliRunner().invoke(app, ["compile", str(path), "-b", "triton", "--json"]).output)
    assert compiled["diagnostics"] == checked["diagnostics"] and compiled["report"] is None


def test_a_candidate_is_its_canonical_text_and_its_bound_parameters():
    text = SOFTMAX.read_text()
    respaced = text.replace("\n{", "\n# a comment\n{", 1).replace(" = ", "  =  ")
    same = [evaluate(Candidate(t), until="parse").candidate for t in (text, respaced)]
    assert same[0] == same[1]
    default = dict(evaluate(Candidate(text), until="parse").params) or {}
    bound = evaluate(Candidate(text, (("BLOCK", 2048),)), until="parse").candidate
    assert bound != same[0] and default == {}
    # a parameter bound to its default is the same candidate
    block = pipeline.parse(text).params["BLOCK"]
    assert evaluate(Candidate(text, (("BLOCK", block),)), until="parse").candidate == same[0]


def test_text_that_does_not_parse_is_a_parse_record_keyed_by_its_bytes():
    record = evaluate(Candidate("kernel (", file="cut.kir"), until="compile", backend="triton")
    assert record.stage == "parse" and record.candidate.startswith("text:") and record.errors
    assert record.errors[0].span.file == "cut.kir"
    round_trips(record)


def test_an_unknown_parameter_stops_at_parse():
    record = evaluate(Candidate(SOFTMAX.read_text(), (("NOPE", 1),)), until="verify")
    assert record.stage == "parse" and [d.rule for d in record.errors] == ["cli.param"]


def test_a_run_goes_through_the_harness_and_keeps_its_verdict():
    from agent.tasks import load_task

    task = load_task(TASK_SOFTMAX.parent)
    record = evaluate(
        Candidate.from_file(TASK_SOFTMAX), until="run", backend="interp", task=task, preset="test", seeds=[3]
    )
    assert record.ok and record.stage == "run" and record.verdict["ok"], record.errors
    assert record.verdict["metrics"]["seeds"] == [3] and record.task == "softmax"
    round_trips(record)


def test_a_record_of_another_schema_is_refused():
    with pytest.raises(ValueError, match="kir.record/1"):
        Record.from_json({"schema": "kir.check/1"})


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="no stage"):
        evaluate(Candidate("x"), until="profile")
