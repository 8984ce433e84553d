"""The rule registry: every rule has an id, a family, a severity, a one-line summary, a longer
explanation, and a pair of examples: a program it must reject (the offending line ends with
the marker comment `# <-`) and a near twin it must accept. The pairs are tests.

A rule family is one module under `verifier/rules/`; each rule there is a function decorated
with `@rule(...)` that takes the analysis `Context` and yields diagnostics built with
`ctx.report(...)`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kir.diagnostics import Diagnostic

if TYPE_CHECKING:  # the context imports the registry
    from verifier.context import Context

FAMILIES = ("types", "dataflow", "target", "resources", "bounds", "sync", "numerics", "learned")
BAD_MARKER = "# <-"


@dataclass(frozen=True)
class Rule:
    id: str
    family: str
    severity: str
    summary: str
    explanation: str
    bad: str
    good: str
    target: str | None = None  # the target the examples are checked for (default: declared)

    @property
    def bad_line(self) -> int:
        """The line of the bad example that the diagnostic must point at."""
        for i, line in enumerate(self.bad.splitlines(), start=1):
            if line.rstrip().endswith(BAD_MARKER) or f"{BAD_MARKER} " in line:
                return i
        raise ValueError(f"rule {self.id}: the bad example marks no line with '{BAD_MARKER}'")

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "family": self.family,
            "severity": self.severity,
            "summary": self.summary,
            "explanation": self.explanation,
            "bad": self.bad,
            "good": self.good,
            "bad_line": self.bad_line,
            "target": self.target,
        }


CheckFn = Callable[["Context"], Iterable[Diagnostic]]


@dataclass(frozen=True)
class Check:
    rule: Rule
    fn: CheckFn


RULES: dict[str, Rule] = {}
CHECKS: list[Check] = []


def rule(
    id: str,
    *,
    family: str,
    severity: str,
    summary: str,
    explanation: str,
    bad: str,
    good: str,
    target: str | None = None,
) -> Callable[[CheckFn], CheckFn]:
    """Register a check function under a new rule."""
    if family not in FAMILIES:
        raise ValueError(f"unknown rule family {family}")
    if not id.startswith(family + "."):
        raise ValueError(f"rule id {id} must start with its family '{family}.'")
    if id in RULES:
        raise ValueError(f"rule {id} is registered twice")
    r = Rule(id, family, severity, summary, explanation.strip(), _dedent(bad), _dedent(good), target)

    def register(fn: CheckFn) -> CheckFn:
        RULES[id] = r
        CHECKS.append(Check(r, fn))
        return fn

    return register


def register_data_rule(r: Rule, fn: CheckFn) -> None:
    """Learned rules come from data files; they register through here."""
    if r.id in RULES:
        raise ValueError(f"rule {r.id} is registered twice")
    RULES[r.id] = r
    CHECKS.append(Check(r, fn))


def _dedent(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"
