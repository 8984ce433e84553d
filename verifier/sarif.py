"""Diagnostics as a SARIF 2.1.0 log: what `kir check --sarif` prints, for the tools that read
static analysis results (code-scanning services, editors, review bots).

    log = sarif_log([("a.kir", diagnostics_of_a), ("b.kir", diagnostics_of_b)])

One run. Its driver is `kir`; its rules are the rule ids that appear, described from the rule
registry where the rule is one of the verifier's (summary, explanation, the rejected and accepted
examples; a learned rule's provenance) and otherwise by id and level alone (a parse error, a file
that cannot be read). Each diagnostic is one result: its rule, its level (a hint is a `note`),
its message with the hint, its span as the region, its related spans as related locations, and
its counterexample in the result's properties. A diagnostic without a span is located at its
file alone; one of the command line (an unknown target) at nothing.

Regions keep KIR's columns: counted from 1 in code points, the end column exclusive, which is
SARIF's convention once the run says `columnKind: unicodeCodePoints` (its default counts UTF-16
code units). A path under the current directory is written relative to it, against the base id
`%SRCROOT%` (which the run maps to that directory); any other as an absolute `file:` URI.

The log validates against the OASIS schema (tests/data/sarif-schema-2.1.0.json,
tests/cli/test_sarif.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kir import __version__
from kir.diagnostics import Diagnostic, Span
from verifier.engine import load_rules
from verifier.learned import LOADED, load_learned_rules
from verifier.registry import RULES, Rule

SARIF_VERSION = "2.1.0"
SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# KIR has no home on the web: the README of the checkout is where the verifier is described.
INFORMATION_URI = (Path(__file__).resolve().parents[1] / "README.md").as_uri()
SRCROOT = "%SRCROOT%"
LEVELS = {"error": "error", "warning": "warning", "hint": "note"}

# (the files checked, each with its diagnostics); None for the command line's own diagnostics
Checked = Sequence[tuple[str | None, Sequence[Diagnostic]]]


def known_rules() -> Mapping[str, Rule]:
    """The registry with every rule family and every learned rule file loaded."""
    load_rules()
    load_learned_rules()  # rule files installed since the registry was first loaded
    return RULES


def level(severity: str) -> str:
    return LEVELS.get(severity, "note")


def sarif_log(checked: Checked, rules: Mapping[str, Rule] | None = None, root: str | None = None) -> dict[str, Any]:
    """The SARIF log of `checked`, with the rules described from `rules` (default: the loaded
    registry) and paths under `root` (default: the current directory) written relative to it."""
    rules = known_rules() if rules is None else rules
    where = _Places(Path(os.path.abspath(root or os.getcwd())))
    for file, _ in checked:
        if file is not None:
            where.artifact(file, checked=True)
    ids = sorted({d.rule for _, diags in checked for d in diags})
    first: dict[str, Diagnostic] = {}
    for _, diags in checked:
        for d in diags:
            first.setdefault(d.rule, d)
    index = {rule_id: i for i, rule_id in enumerate(ids)}
    results = [_result(d, file, index[d.rule], where) for file, diags in checked for d in diags]
    driver = {
        "name": "kir",
        "version": __version__,
        "informationUri": INFORMATION_URI,
        "rules": [_descriptor(rule_id, rules.get(rule_id), first[rule_id]) for rule_id in ids],
    }
    run: dict[str, Any] = {"tool": {"driver": driver}}
    if where.relative:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": where.root.as_uri().rstrip("/") + "/"}}
    run["artifacts"] = where.artifacts
    run["columnKind"] = "unicodeCodePoints"
    run["results"] = results
    return {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


class _Places:
    """The run's artifacts, one per distinct location (the files checked first, in order), and
    the artifact locations that point into them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.artifacts: list[dict[str, Any]] = []
        self.index: dict[tuple[str, ...], int] = {}
        self.relative = False

    def artifact(self, path: str, checked: bool = False) -> dict[str, Any]:
        location = self._location(path)
        key = tuple(location.values())
        if key not in self.index:
            self.index[key] = len(self.artifacts)
            artifact: dict[str, Any] = {"location": dict(location)}
            if checked:
                artifact["roles"] = ["analysisTarget"]
            self.artifacts.append(artifact)
        return {**location, "index": self.index[key]}

    def _location(self, path: str) -> dict[str, str]:
        absolute = Path(os.path.abspath(path))
        try:
            relative = absolute.relative_to(self.root)
        except ValueError:
            return {"uri": absolute.as_uri()}
        self.relative = True
        return {"uri": quote(relative.as_posix()), "uriBaseId": SRCROOT}

    def physical(self, path: str, span: Span | None) -> dict[str, Any]:
        out: dict[str, Any] = {"artifactLocation": self.artifact(path)}
        region = _region(span)
        if region is not None:
            out["region"] = region
        return out


def _region(span: Span | None) -> dict[str, int] | None:
    """The span as a region; none for a span outside the text (a line or column below 1)."""
    if span is None or span.line < 1 or span.col < 1:
        return None
    region = {"startLine": span.line, "startColumn": span.col}
    if (span.end_line, span.end_col) >= (span.line, span.col):
        region.update(endLine=span.end_line, endColumn=span.end_col)
    return region


def _result(d: Diagnostic, file: str | None, rule_index: int, where: _Places) -> dict[str, Any]:
    text = f"{d.message}\nhint: {d.hint}" if d.hint else d.message
    result: dict[str, Any] = {"ruleId": d.rule, "ruleIndex": rule_index, "level": level(d.severity)}
    result["message"] = {"text": text}
    if d.span is not None:
        result["locations"] = [{"physicalLocation": where.physical(d.span.file, d.span)}]
    elif file is not None:
        result["locations"] = [{"physicalLocation": where.physical(file, None)}]
    related: list[dict[str, Any]] = []
    for r in d.related:
        location = {"physicalLocation": where.physical(r.span.file, r.span), "message": {"text": r.label}}
        if location not in related:  # SARIF's related locations are unique
            related.append(location)
    if related:
        result["relatedLocations"] = related
    if d.edits and d.span is not None:
        # the hint as a fix: one replacement per edit, each a region of the file and its new text
        changes = {
            "artifactLocation": where.artifact(d.span.file),
            "replacements": [
                {"deletedRegion": _region(e.span) or {"startLine": 1}, "insertedContent": {"text": e.text}}
                for e in d.edits
            ],
        }
        result["fixes"] = [{"description": {"text": d.hint}, "artifactChanges": [changes]}]
    properties: dict[str, Any] = {}
    if d.hint:
        properties["hint"] = d.hint
    if d.counterexample is not None:
        properties["counterexample"] = d.counterexample
    if properties:
        result["properties"] = properties
    return result


def _descriptor(rule_id: str, rule: Rule | None, first: Diagnostic) -> dict[str, Any]:
    """A rule's reportingDescriptor: from the registry where it is known; else its id, and the
    level of its first diagnostic as the default."""
    if rule is None:
        return {"id": rule_id, "defaultConfiguration": {"level": level(first.severity)}}
    properties: dict[str, Any] = {"family": rule.family, "tags": [rule.family]}
    provenance = _provenance(rule_id)
    if provenance is not None:
        properties["provenance"] = provenance
    return {
        "id": rule_id,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.explanation},
        "help": _help(rule),
        "defaultConfiguration": {"level": level(rule.severity)},
        "properties": properties,
    }


def _help(rule: Rule) -> dict[str, str]:
    """What `kir rules explain` says of the rule, less the verifier's run on its example."""
    text = (
        f"{rule.explanation}\n\nRejected (line {rule.bad_line}):\n{rule.bad}\nAccepted:\n{rule.good}\n"
        f"`kir rules explain {rule.id}` shows the diagnostic."
    )
    markdown = (
        f"{rule.explanation}\n\nRejected (line {rule.bad_line}):\n\n```\n{rule.bad}```\n\n"
        f"Accepted:\n\n```\n{rule.good}```\n\n`kir rules explain {rule.id}` shows the diagnostic."
    )
    return {"text": text, "markdown": markdown}


def _provenance(rule_id: str) -> dict[str, Any] | None:
    """A learned rule's provenance (why it was kept, the failures it names), as `kir rules list
    --json` gives it."""
    learned = LOADED.get(rule_id)
    return learned.provenance.to_json() if learned is not None else None
