"""The verifier: rules that say, before anything compiles or runs, what is wrong with a KIR
program, where, and how to fix it.

    from verifier import verify
    diagnostics = verify(program, "sm_90")

Rule families live one per module under `verifier/rules/`; learned rules are data under
`verifier/rules/learned/`. `RULES` is the registry (`kir rules list`).
"""

from verifier.engine import load_rules, verify
from verifier.registry import FAMILIES, RULES, Rule

__all__ = ["FAMILIES", "RULES", "Rule", "load_rules", "verify"]
