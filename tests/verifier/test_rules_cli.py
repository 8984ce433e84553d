"""`kir rules list | explain | add`, run in-process through typer's CliRunner."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.cli import app
from verifier import RULES, load_rules
from verifier.learned import LEARNED_DIR, forget, read_rule_file

load_rules()
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict | None = None):
    return runner.invoke(app, ["rules", *args], env=env)


# ---- list ----------------------------------------------------------------------------------------------


def test_list_is_a_table_of_every_rule():
    result = run("list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["ID", "FAMILY", "SEVERITY", "SUMMARY"]
    ids = [line.split()[0] for line in lines[1:]]
    assert ids == sorted(RULES)
    row = next(line for line in lines if line.startswith("bounds.global-access "))
    assert row.split()[1:3] == ["bounds", "error"] and RULES["bounds.global-access"].summary in row


def test_list_by_family():
    result = run("list", "--family", "bounds")
    assert result.exit_code == 0
    ids = [line.split()[0] for line in result.output.splitlines()[1:]]
    assert ids and all(i.startswith("bounds.") for i in ids) and len(ids) >= 5


def test_list_json_has_full_records():
    result = run("list", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == "kir.rules.list/1" and data["ok"] is True
    records = {r["id"]: r for r in data["rules"]}
    assert set(records) == set(RULES)
    rec = records["bounds.tma-box"]
    assert {"family", "severity", "summary", "explanation", "bad", "good", "bad_line"} <= set(rec)
    assert "# <-" in rec["bad"].splitlines()[rec["bad_line"] - 1]
    learned = [r for r in records.values() if r["family"] == "learned"]
    assert len(learned) >= 2 and all(r["provenance"]["failures"] for r in learned)


def test_list_unknown_family_is_a_usage_error():
    result = run("list", "--family", "bogus")
    assert result.exit_code == 2 and "unknown rule family 'bogus'" in result.output and "bounds" in result.output


# ---- explain -----------------------------------------------------------------------------------------------


def test_explain_shows_why_the_examples_and_the_diagnostic():
    result = run("explain", "bounds.global-access")
    assert result.exit_code == 0, result.output
    out = result.output
    rule = RULES["bounds.global-access"]
    assert out.startswith("bounds.global-access (bounds, error)")
    assert rule.explanation.splitlines()[0] in out
    assert "Rejected (line 7):" in out and "Accepted:" in out
    # the bad example's diagnostic, rendered with its caret and counterexample
    assert "bad.kir:7:7: error[bounds.global-access]" in out and "^^^" in out and "= counterexample:" in out


def test_explain_a_learned_rule_shows_its_provenance():
    result = run("explain", "learned.tma-store-without-wait")
    assert result.exit_code == 0, result.output
    assert "Provenance:" in result.output and "scale_tma_store.bad.kir" in result.output
    assert "error[learned.tma-store-without-wait]" in result.output


def test_explain_unknown_rule_suggests_one():
    result = run("explain", "bounds.global-acess")
    assert result.exit_code == 2
    assert "no rule 'bounds.global-acess'" in result.output and "bounds.global-access" in result.output


# ---- add ----------------------------------------------------------------------------------------------------

BAD = textwrap.dedent(
    """\
    kernel top<B = 1024>(x: global f32[N], v: out global f32[N])
      where N == B
      target sm_90 grid(1) warps(4)
    {
      offs = arange(0, B)
      vals, idx = topk(load(x[offs]), k = 512)  # <-
      store(v[offs], where(offs < 512, 0.0, 0.0))
    }
    """
)


def rule_file(
    tmp_path: Path,
    *,
    match: str = 'op = "kir.topk"\n[match.props]\nk = { gt = 256 }',
    rid: str = "learned.cli-topk",
    message: str = "topk of {k}",
) -> Path:
    text = f'''id = "{rid}"
severity = "warning"
summary = "a wide topk"
explanation = "a test rule"
message = "{message}"

[match]
{match}

[examples]
bad = """
{BAD}"""
good = """
{BAD.replace("k = 512)  # <-", "k = 16)")}"""

[provenance]
reason = "a test"
failures = ["run 1"]
support = 1
false_positives = 0
'''
    path = tmp_path / "rule.toml"
    path.write_text(text)
    return path


@pytest.fixture
def env(tmp_path):
    target = tmp_path / "installed"
    yield {"KIR_LEARNED_DIR": str(target)}
    for path in target.glob("*.toml") if target.exists() else []:
        lr, _ = read_rule_file(path)
        if lr is not None:
            forget(lr.rule.id)


def test_add_installs_and_the_rule_is_listed(tmp_path, env):
    path = rule_file(tmp_path)
    result = run("add", str(path), env=env)
    assert result.exit_code == 0, result.output
    dest = Path(env["KIR_LEARNED_DIR"]) / "cli-topk.toml"
    assert dest.read_text() == path.read_text() and f"installed as {dest}" in result.output
    listed = run("list", "--family", "learned", env=env)
    assert "learned.cli-topk" in listed.output
    explained = run("explain", "learned.cli-topk", env=env)
    assert "warning[learned.cli-topk]: topk of 512" in explained.output
    assert not (LEARNED_DIR / "cli-topk.toml").exists()


def test_add_refuses_a_rule_that_flags_known_good_programs(tmp_path, env):
    path = rule_file(tmp_path, match='op = "kir.arange"', rid="learned.cli-arange", message="an {op}")
    result = run("add", str(path), env=env)
    assert result.exit_code == 1
    assert "refused" in result.output and "learned.false-positive" in result.output
    assert "examples/vector_add.kir" in result.output
    assert not Path(env["KIR_LEARNED_DIR"]).exists()


def test_add_schema_errors_have_line_numbers(tmp_path, env):
    path = rule_file(tmp_path)
    text = path.read_text().replace('severity = "warning"', 'severity = "loud"')
    path.write_text(text)
    result = run("add", str(path), env=env)
    assert result.exit_code == 1
    assert f"{path}:2:1: error[learned.schema]: severity must be one of" in result.output
    assert '2 | severity = "loud"' in result.output  # the snippet of the rule file


def test_add_json(tmp_path, env):
    path = rule_file(tmp_path)
    path.write_text(path.read_text().replace("[match]", "[match]\nnonsense = 1"))
    result = run("add", "--json", str(path), env=env)
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["schema"] == "kir.rules.add/1" and data["ok"] is False and data["installed"] is None
    [diag] = data["diagnostics"]
    assert diag["rule"] == "learned.schema" and diag["line"] == 8 and "nonsense" in diag["message"]


def test_add_a_missing_file_is_a_usage_error(tmp_path, env):
    result = run("add", str(tmp_path / "nope.toml"), env=env)
    assert result.exit_code == 2 and "cannot read" in result.output


def test_add_with_a_corpus_of_known_programs(tmp_path, env):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "wide.good.kir").write_text(BAD.replace("  # <-", ""))  # a known-good wide topk
    path = rule_file(tmp_path)
    result = run("add", str(path), "--corpus", str(corpus), env=env)
    assert result.exit_code == 1 and "wide.good.kir" in result.output
