"""The verifier's answers to what the cost model asks of a program (`costmodel.checks.Checks`).

    from verifier.facts import CHECKS
    CostModel().predict(program, "gfx942", params, shapes, checks=CHECKS)

The verifier and the cost model are siblings in the layers and never import each other: the
cost model declares its two questions and the caller that has both passes this object in.
"""

from __future__ import annotations

from kir.diagnostics import Diagnostic
from kir.program import Program
from verifier.engine import load_rules, verify
from verifier.registry import RULES


class VerifierChecks:
    """`Checks` answered by the verifier's own rules, with the same words `kir check` uses."""

    def target_errors(self, program: Program, target: str, params: dict[str, int] | None) -> list[Diagnostic]:
        """What `kir check --target TARGET` finds with the target family's rules alone."""
        load_rules()
        ids = {r for r, rule in RULES.items() if rule.family == "target"}
        return verify(program, target, params, rules=ids)

    def where_contradiction(self, program: Program, params: dict[str, int]) -> list[Diagnostic]:
        """`types.where` for these parameters: no shapes satisfy the kernel's `where` (the
        engine asks it before any other rule and, with it found, asks nothing else)."""
        return verify(program, None, params, rules={"types.where"})


CHECKS = VerifierChecks()
