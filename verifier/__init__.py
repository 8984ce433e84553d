"""The verifier: rules that say, before anything compiles or runs, what is wrong with a KIR
program, where, and how to fix it.

    from verifier import verify
    diagnostics = verify(program, "sm_90")

Rule families live one per module under `verifier/rules/`; learned rules are data under
`verifier/rules/learned/`. `RULES` is the registry (`kir rules list`).
"""

from verifier.registry import FAMILIES, RULES, Rule

__all__ = ["FAMILIES", "RULES", "Rule", "load_rules", "verify"]


def __getattr__(name: str):
    # The engine imports the parser and the dialect: `kir --help`, which imports `verifier.cli`,
    # must not pay for them (tests/cli/test_startup.py).
    if name in ("load_rules", "verify"):
        from verifier import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'verifier' has no attribute {name!r}")
