"""Every hint the verifier gives is edits of the source (`Diagnostic.edits`), and applied to the
program it was given for, gives a program without that error: the rule no longer fires at that
place (moved by the lines the edits insert or remove), and no error appears that was not there
before. Over every bad program of the rule corpus, the user corpus and the rules' own bad
examples."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kir.diagnostics import Diagnostic, Edit, apply_edits, moved_line
from tests.verifier.harness import describe, diagnose
from verifier import RULES, load_rules

load_rules()
HERE = Path(__file__).parent


def _programs() -> list[tuple[str, str]]:
    out = [(str(p.relative_to(HERE)), p.read_text()) for p in sorted(HERE.glob("*corpus/**/*.bad.kir"))]
    out += [(f"{rule_id} (bad example)", RULES[rule_id].bad) for rule_id in sorted(RULES)]
    return out


def _hinted() -> tuple[list[tuple[str, str, Diagnostic]], list[str]]:
    """The diagnostics whose hint comes as edits, and those whose hint does not."""
    found, prose = [], []
    for name, text in _programs():
        for d in diagnose(text, name):
            if d.edits:
                found.append((name, text, d))
            elif d.hint:
                prose.append(f"{name}:{_place(d)[1]}: {d.rule}: {d.hint}")
    return found, prose


def _place(d: Diagnostic) -> tuple[str, int]:
    return d.rule, d.span.line if d.span else 0


CASES, PROSE = _hinted()


def _moved(place: tuple[str, int], edits: tuple[Edit, ...]) -> tuple[str, int]:
    return place[0], moved_line(place[1], edits)


def test_every_hint_is_an_edit():
    """A hint is a fix that can be applied (and is, below): none is advice in words only."""
    assert not PROSE, "\n".join(PROSE)


def test_there_are_hints_to_apply():
    rules = {d.rule for _, _, d in CASES}
    assert len(CASES) >= 10 and len(rules) >= 5, sorted(rules)


@pytest.mark.parametrize(
    ("name", "text", "diag"), CASES, ids=[f"{name}:{d.rule}@{_place(d)[1]}" for name, _, d in CASES]
)
def test_an_applied_hint_removes_its_error(name, text, diag):
    fixed = apply_edits(text, diag.edits)
    assert fixed != text
    before = diagnose(text, name)
    after = diagnose(fixed, name)
    moved = _moved(_place(diag), diag.edits)
    assert moved not in {_place(d) for d in after}, f"still there after {diag.edits}: {describe(after)}"
    new_errors = {_place(d) for d in after if d.is_error} - {
        _moved(_place(d), diag.edits) for d in before if d.is_error
    }
    assert not new_errors, f"new errors after {diag.edits}: {describe(after)}"


def test_edits_are_sarif_fixes(tmp_path: Path):
    """A diagnostic's edits are a SARIF fix (the hint as its description, one replacement per
    edit) in a log the OASIS schema accepts; an insertion is an empty deleted region."""
    from tests.cli.test_sarif import valid
    from verifier.sarif import sarif_log

    name, text, diag = next(c for c in CASES if any(e.span.col == e.span.end_col for e in c[2].edits))
    file = str(tmp_path / "k.kir")
    Path(file).write_text(text)
    moved = [replace(e, span=replace(e.span, file=file)) for e in diag.edits]
    assert diag.span is not None
    d = replace(diag, span=replace(diag.span, file=file), edits=tuple(moved))
    log = valid(sarif_log([(file, [d])], root=str(tmp_path)))
    (fix,) = log["runs"][0]["results"][0]["fixes"]
    assert fix["description"]["text"] == diag.hint
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "k.kir"
    got = [
        (r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"], r["insertedContent"]["text"])
        for r in change["replacements"]
    ]
    assert got == [(e.span.line, e.span.col, e.text) for e in diag.edits]


def test_edits_survive_json():
    """`kir check --json` carries the edits, and a diagnostic read back has them."""
    for _, _, d in CASES:
        back = Diagnostic.from_json(json.loads(json.dumps(d.to_json())))
        assert back.edits == d.edits
