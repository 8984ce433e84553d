"""Running the rules over a program."""

from __future__ import annotations

import importlib
import pkgutil

import verifier.rules
from kir.diagnostics import Diagnostic, Span
from kir.parser import collections_paused
from kir.program import Program
from verifier.context import Context
from verifier.registry import CHECKS

_LOADED = False


def load_rules() -> None:
    """Import every rule family module; each registers its rules (`learned_files` registers the
    learned rules' files)."""
    global _LOADED
    if _LOADED:
        return
    for mod in sorted(pkgutil.iter_modules(verifier.rules.__path__), key=lambda m: m.name):
        if not mod.ispkg:
            importlib.import_module(f"verifier.rules.{mod.name}")
    _LOADED = True  # only once every module imported: a failed import is retried next time


def verify(
    program: Program,
    target: str | None = None,
    params: dict[str, int] | None = None,
    *,
    rules: set[str] | None = None,
) -> list[Diagnostic]:
    """Every diagnostic of every rule (or of the given rule ids), errors first, in a
    deterministic order. A rule that crashes becomes an `internal.error` diagnostic."""
    with collections_paused():
        return _verify(program, target, params, rules)


def _verify(
    program: Program, target: str | None, params: dict[str, int] | None, rules: set[str] | None
) -> list[Diagnostic]:
    load_rules()
    ctx = Context(program, target, params)
    if rules is None or "types.where" in rules:
        # Not imported with the engine: a rule module registers its rules when imported, and
        # `load_rules` (above) is what imports the families, in their order.
        from verifier.rules.types_where import unsatisfiable_where

        try:
            contradiction = unsatisfiable_where(ctx)
        except Exception:  # noqa: BLE001 - the rule itself reports its crash below
            contradiction = []
        if contradiction:  # every other proof would hold vacuously
            return contradiction
    out: list[Diagnostic] = []
    for check in CHECKS:
        if rules is not None and check.rule.id not in rules:
            continue
        ctx.rule = check.rule
        try:
            out.extend(check.fn(ctx))
        except Exception as err:  # a rule's bug must not hide the other rules' findings
            out.append(
                Diagnostic(
                    "internal.error",
                    "error",
                    program.span() or Span(1, 1, 1, 2, program.file),
                    f"internal error in rule {check.rule.id}: {type(err).__name__}: {err}",
                    "this is a bug in KIR; please report it with the input",
                )
            )
    if "symbolic" in ctx.__dict__:
        from verifier.symbolic import CACHE  # with z3: only once a rule used the solver

        CACHE.flush()
    unique: list[Diagnostic] = []
    seen: set[Diagnostic] = set()  # equal diagnostics hash alike (the counterexample aside)
    for d in sorted(out, key=Diagnostic.sort_key):
        if d not in seen:
            seen.add(d)
            unique.append(d)
    return unique
