"""`kir check --sarif`: one SARIF 2.1.0 log of every file's diagnostics (verifier/sarif.py).

Every log printed here is validated against the OASIS schema (tests/data/sarif-schema-2.1.0.json,
where it came from: tests/data/README.md), and its results are checked for the rule, the level,
the line and the column the text output gives. Commands run in-process through typer's
CliRunner, in a temporary current directory, so that paths under it come out relative.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from agent.cli import app
from kir import __version__
from kir.diagnostics import Diagnostic, Related, Span
from verifier.sarif import SRCROOT, known_rules, sarif_log

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
SOFTMAX = ROOT / "examples" / "softmax.kir"
LEARNED_BAD = ROOT / "tests" / "verifier" / "corpus" / "learned" / "gemm_f16_acc_gfx90a.bad.kir"
runner = CliRunner()

# An error (`hi` is never written: line 3, column 68), a warning with a related span (the store
# on line 9, column 3, overwritten by the one on line 10) and a warning with a counterexample
# (`N / 4` is 0 for N < 4: line 11, column 18).
SPLIT = """\
# `hi` is never written, the first store to `lo` is overwritten by the second, and N / 4 is 0
# when N < 4.
kernel split<BLOCK = 256>(x: global f32[N], lo: out global f32[N], hi: out global f32[N], g: out global i32[N])
  target sm_90 grid(cdiv(N, BLOCK)) warps(4)
{
  offs = program_id(0) * BLOCK + arange(0, BLOCK)
  mask = offs < N
  v = load(x[offs], mask = mask)
  store(lo[offs], minimum(v, 0.0), mask = mask)
  store(lo[offs], maximum(v, 0.0), mask = mask)
  store(g[offs], offs / (N / 4), mask = mask)
}
"""

# `target` where a `)` or `,` is expected: line 2, columns 3-9.
UNPARSED = "kernel k(x: global f32[N]\n  target sm_90 {\n}\n"


def valid(log: dict) -> dict:
    """The log, once the schema has accepted it."""
    validator = jsonschema.validators.validator_for(SCHEMA)
    assert validator is jsonschema.Draft4Validator  # the OASIS schema is draft-04
    errors = sorted(validator(SCHEMA).iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    return log


def sarif(*args: str | Path) -> tuple[int, dict]:
    """`kir check ARGS --sarif`: its exit status and its log, validated."""
    result = runner.invoke(app, ["check", *map(str, args), "--sarif"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, valid(json.loads(result.output))


def where(result: dict) -> tuple[str, int, int, int, int]:
    """A result's first location: its URI and region."""
    physical = result["locations"][0]["physicalLocation"]
    r = physical["region"]
    return physical["artifactLocation"]["uri"], r["startLine"], r["startColumn"], r["endLine"], r["endColumn"]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary current directory holding split.kir and unparsed.kir."""
    (tmp_path / "split.kir").write_text(SPLIT)
    (tmp_path / "unparsed.kir").write_text(UNPARSED)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_schema_is_the_oasis_one():
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    assert SCHEMA["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")


def test_a_clean_program_is_a_log_without_results(here: Path):
    shutil.copy(SOFTMAX, here / "softmax.kir")
    code, log = sarif("softmax.kir")
    assert code == 0 and log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"], driver["rules"]) == ("kir", __version__, [])
    assert driver["informationUri"].startswith("file://") and driver["informationUri"].endswith("/README.md")
    assert run["results"] == []
    assert run["artifacts"] == [{"location": {"uri": "softmax.kir", "uriBaseId": SRCROOT}, "roles": ["analysisTarget"]}]
    assert run["originalUriBaseIds"] == {SRCROOT: {"uri": here.resolve().as_uri() + "/"}}
    assert run["columnKind"] == "unicodeCodePoints"


def test_errors_and_warnings_carry_their_rule_level_and_place(here: Path):
    code, log = sarif("split.kir")
    assert code == 1
    run = log["runs"][0]
    results = run["results"]
    assert [(r["ruleId"], r["level"], where(r)) for r in results] == [
        ("dataflow.output-unwritten", "error", ("split.kir", 3, 68, 3, 89)),
        ("dataflow.dead-store", "warning", ("split.kir", 9, 3, 9, 48)),
        ("numerics.divide-by-zero", "warning", ("split.kir", 11, 18, 11, 32)),
    ]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(r["ruleId"] for r in results)
    registry = known_rules()
    for result in results:
        descriptor = rules[result["ruleIndex"]]
        rule = registry[result["ruleId"]]
        assert descriptor["id"] == result["ruleId"]
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert descriptor["fullDescription"]["text"] == rule.explanation
        assert rule.bad in descriptor["help"]["text"] and rule.good in descriptor["help"]["markdown"]
        assert descriptor["defaultConfiguration"]["level"] == rule.severity
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["index"] == 0
    unwritten, dead, divide = results
    assert unwritten["message"]["text"].startswith("`hi` is an output, but nothing writes it")
    assert "\nhint: write `hi` where the program writes `lo`" in unwritten["message"]["text"]
    assert unwritten["properties"]["hint"].startswith("write `hi` where the program writes `lo`")
    (overwritten,) = dead["relatedLocations"]
    assert overwritten["message"]["text"] == "overwritten here"
    assert overwritten["physicalLocation"]["region"]["startLine"] == 10
    assert divide["properties"]["counterexample"] == {"N": 1}
    assert "counterexample" not in unwritten.get("properties", {})


def test_several_files_are_one_run(here: Path, tmp_path_factory: pytest.TempPathFactory):
    """Files under the current directory are relative, others absolute `file:` URIs; a file given
    twice is one artifact; a learned rule's descriptor carries its provenance."""
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "learned.kir"
    shutil.copy(LEARNED_BAD, elsewhere)
    code, log = sarif(SOFTMAX, "split.kir", elsewhere, "./split.kir")
    assert code == 1
    run = log["runs"][0]
    uris = [a["location"]["uri"] for a in run["artifacts"]]
    assert uris == [SOFTMAX.as_uri(), "split.kir", elsewhere.as_uri()]
    assert "uriBaseId" not in run["artifacts"][0]["location"]
    by_file: dict[str, list[str]] = {}
    for r in run["results"]:
        location = r["locations"][0]["physicalLocation"]["artifactLocation"]
        assert uris[location["index"]] == location["uri"]
        by_file.setdefault(location["uri"], []).append(r["ruleId"])
    assert by_file[elsewhere.as_uri()] == ["learned.cdna-f16-accumulate", "numerics.low-precision-acc"]
    assert len(by_file["split.kir"]) == 6  # the three diagnostics, once for each spelling of the file
    assert SOFTMAX.as_uri() not in by_file
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["learned.cdna-f16-accumulate"]["properties"]["provenance"]["reason"]
    assert rules["learned.cdna-f16-accumulate"]["properties"]["family"] == "learned"


def test_a_file_that_does_not_parse_gives_its_syntax_error(here: Path):
    code, log = sarif("unparsed.kir", "split.kir")
    assert code == 1
    run = log["runs"][0]
    first = run["results"][0]
    assert (first["ruleId"], first["level"], where(first)) == (
        "syntax.unexpected-token",
        "error",
        ("unparsed.kir", 2, 3, 2, 9),
    )
    assert "expected ')'" in first["message"]["text"]
    descriptor = run["tool"]["driver"]["rules"][first["ruleIndex"]]
    assert descriptor == {"id": "syntax.unexpected-token", "defaultConfiguration": {"level": "error"}}
    assert [a["location"]["uri"] for a in run["artifacts"]] == ["unparsed.kir", "split.kir"]


def test_a_missing_file_is_a_result_at_the_file(here: Path):
    code, log = sarif("missing.kir", "split.kir")
    assert code == 2  # as `kir check missing.kir`: a file that cannot be read is a usage error
    run = log["runs"][0]
    missing = run["results"][0]
    assert (missing["ruleId"], missing["level"]) == ("io.read", "error")
    assert "missing.kir" in missing["message"]["text"]
    assert missing["locations"] == [
        {"physicalLocation": {"artifactLocation": {"uri": "missing.kir", "uriBaseId": SRCROOT, "index": 0}}}
    ]
    assert [r["ruleId"] for r in run["results"][1:]] == [
        "dataflow.output-unwritten",
        "dataflow.dead-store",
        "numerics.divide-by-zero",
    ]


def test_a_command_line_error_is_a_result_without_a_location(here: Path):
    code, log = sarif("split.kir", "--target", "sm_9O")
    assert code == 2
    run = log["runs"][0]
    (result,) = run["results"]
    assert (result["ruleId"], result["level"], "locations" in result) == ("cli.target", "error", False)
    assert run["artifacts"] == []


def test_sarif_and_json_exclude_each_other(here: Path):
    result = runner.invoke(app, ["check", "split.kir", "--sarif", "--json"])
    assert result.exit_code == 2
    record = json.loads(result.output)
    assert record["schema"] == "kir.record/1" and record["stage"] == "usage"
    (diag,) = record["diagnostics"]
    assert diag["rule"] == "cli.usage" and "--sarif and --json" in diag["message"]
    text = runner.invoke(app, ["check", "split.kir", "--json", "unparsed.kir"])
    assert text.exit_code == 2 and json.loads(text.output)["diagnostics"][0]["rule"] == "cli.usage"


def test_several_files_as_text(here: Path):
    shutil.copy(SOFTMAX, here / "softmax.kir")
    result = runner.invoke(app, ["check", "softmax.kir", "split.kir"])
    assert result.exit_code == 1
    assert "softmax.kir: ok (kernel softmax" in result.output
    assert "split.kir: 1 error, 2 warnings" in result.output


def test_levels_and_regions_of_any_diagnostic(tmp_path: Path):
    """The conversion alone: a hint is a note; a span outside the text has no region; an
    unknown rule is its id and level; identical related spans are one related location."""
    file = str(tmp_path / "k.kir")
    twice = Related(Span(2, 1, 2, 4, file), "here")
    diags = [
        Diagnostic("x.hint", "hint", Span(1, 1, 1, 2, file), "a hint"),
        Diagnostic("x.outside", "warning", Span(0, 0, 0, 0, file), "no line", related=(twice, twice)),
    ]
    log = valid(sarif_log([(file, diags)], rules={}, root=str(tmp_path)))
    run = log["runs"][0]
    hint, outside = run["results"]
    assert hint["level"] == "note" and where(hint) == ("k.kir", 1, 1, 1, 2)
    assert "region" not in outside["locations"][0]["physicalLocation"]
    assert len(outside["relatedLocations"]) == 1
    assert run["tool"]["driver"]["rules"] == [
        {"id": "x.hint", "defaultConfiguration": {"level": "note"}},
        {"id": "x.outside", "defaultConfiguration": {"level": "warning"}},
    ]
