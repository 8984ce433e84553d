"""The verifier's answers handed to the cost model (`costmodel.checks.Checks`, answered by
`verifier.facts.CHECKS`): through the pipeline's cost stage the warnings and refusals are the
ones `predict` gave when it asked the verifier itself, and without them the cost model says only
what it knows on its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.pipeline import Candidate, evaluate
from costmodel import predict
from kir.diagnostics import KirError
from kir.parser import parse, parse_file
from kir.where import where_span
from verifier import verify
from verifier.facts import CHECKS

ROOT = Path(__file__).resolve().parents[2]
HOPPER = ROOT / "benchmarks" / "tasks" / "gemm" / "persistent.kir"  # written for sm_90: TMA, mbarriers, wgmma
LAYERNORM = ROOT / "examples" / "layernorm.kir"  # `where N <= BLOCK` on line 9
SQUARE = {"M": 1024, "N": 1024, "K": 1024}


def target_warnings(diags) -> list:
    return [d for d in diags if d.rule == "cost.target"]


def test_a_program_for_sm_90_costed_on_gfx942_gets_its_target_warning_through_the_pipeline():
    program = parse_file(HOPPER)
    record = evaluate(Candidate.from_program(program), until="cost", target="gfx942", shapes=SQUARE)
    assert record.ok and record.stage == "cost"
    (warning,) = target_warnings(record.diagnostics)
    assert warning.severity == "warning" and "written for sm_90; on gfx942" in warning.message
    # the first of the target rules' findings, as `kir check --target gfx942` reports them
    found = [d for d in CHECKS.target_errors(program, "gfx942", None) if d.is_error and d.span is not None]
    assert warning.span == found[0].span and found[0].message in warning.message
    assert f"and {len(found) - 1} more findings" in warning.message
    assert [r.span for r in warning.related] == [d.span for d in found[1:5]]
    # the estimate's JSON carries the same warning among its hints
    assert [h["rule"] for h in record.estimate["hints"]].count("cost.target") == 1
    on_own = evaluate(Candidate.from_program(program), until="cost", target="sm_90", shapes=SQUARE)
    assert on_own.ok and not target_warnings(on_own.diagnostics)


def test_without_checks_the_cost_model_gives_no_target_warning_and_the_same_figures():
    program = parse_file(HOPPER)
    told = predict(program, "gfx942", shapes=SQUARE, checks=CHECKS)
    alone = predict(program, "gfx942", shapes=SQUARE)
    assert target_warnings(told.hints) and not target_warnings(alone.hints)
    assert told.time_s == alone.time_s and told.to_json()["breakdown"] == alone.to_json()["breakdown"]
    assert [d for d in told.hints if d.rule != "cost.target"] == alone.hints


@pytest.mark.parametrize("target", ["sm_90", "mtia-sim"])
def test_a_broken_where_is_cost_where_violated_at_the_clause_through_the_pipeline(target):
    program = parse_file(LAYERNORM)
    record = evaluate(Candidate.from_program(program), until="cost", target=target, shapes={"M": 4096, "N": 1025})
    assert not record.ok and record.stage == "cost" and record.estimate is None
    (diag,) = record.errors
    assert diag.rule == "cost.where-violated" and "BLOCK = 1024, N = 1025" in diag.message
    assert diag.span == where_span(program) and (diag.span.line, diag.span.col) == (9, 3)
    # the verifier's own `types.where` points at the same clause
    (checked,) = verify(program, None, {"BLOCK": 0})
    assert checked.rule == "types.where" and checked.span == diag.span


def test_parameters_that_leave_no_shapes_are_types_where_only_when_the_verifier_is_asked():
    program = parse_file(LAYERNORM)
    with pytest.raises(KirError) as told:
        predict(program, "sm_90", {"BLOCK": 0}, {"M": 8, "N": 1}, checks=CHECKS)
    with pytest.raises(KirError) as alone:
        predict(program, "sm_90", {"BLOCK": 0}, {"M": 8, "N": 1})
    ((a,), (b,)) = told.value.diagnostics, alone.value.diagnostics
    assert (a.rule, b.rule) == ("types.where", "cost.where-violated")
    assert a.span == b.span == where_span(program)
    # the pipeline's verify stage refuses them before any cost
    record = evaluate(Candidate.from_program(program, {"BLOCK": 0}), until="cost", shapes={"M": 8, "N": 1})
    assert record.stage == "verify" and [d.rule for d in record.errors] == ["types.where"]


def test_the_where_span_runs_from_the_keyword_to_the_end_of_its_line_without_the_comment():
    text = (
        "kernel k<BLOCK = 256>(x: global f32[N], y: out global f32[N])\n"
        "  where N % BLOCK == 0, N <= 4096  # one launch\n"
        "  target sm_90 grid(N / BLOCK) warps(4)\n"
        "{\n"
        "  offs = program_id(0) * BLOCK + arange(0, BLOCK)\n"
        "  store(y[offs], load(x[offs]))\n"
        "}\n"
    )
    span = where_span(parse(text, file="k.kir"))
    assert (span.line, span.col, span.end_line, span.end_col, span.file) == (2, 3, 2, 34, "k.kir")
    unconstrained = parse(text.replace("  where N % BLOCK == 0, N <= 4096  # one launch\n", ""), file="k.kir")
    assert where_span(unconstrained) == unconstrained.span()  # no clause: the kernel
