"""Running the rules over a program, and checking the fixes they give.

Hints are checked by applying them. A rule that can write its fix as edits of the source offers
candidate edits; `first_fix` applies each to the program's text, checks the edited program with
every rule, and keeps the first after which the diagnostic is gone from its place (its line moved
by what the edit inserts or removes) and no error appears that the program did not have. The
hint is then that edit (`Diagnostic.edits`); with no candidate that holds, the rule gives no hint.
`tests/verifier/test_hints_apply.py` checks the same over both corpora. While an edited program
is checked, rules do not look for fixes again: `first_fix` there returns its first candidate
unchecked (inside a check only errors count).

Every diagnostic that a rule gives with edits is checked so (`_held`), whether or not the rule
used `first_fix`: a hint whose edits do not hold is dropped with them, and a hint without edits
is not given at all (a hint is a fix; advice goes in the message).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import pkgutil
from collections.abc import Iterable
from contextvars import ContextVar

import verifier.rules
from kir.check import verify_ops
from kir.diagnostics import Diagnostic, Edit, KirError, Span, apply_edits, moved_line
from kir.parser import collections_paused, parse
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
            out.extend(_held(ctx, d) for d in check.fn(ctx))
        except Exception as err:  # a rule's bug must not hide the other rules' findings
            out.append(
                Diagnostic(
                    "internal.error",
                    "error",
                    program.span() or Span(1, 1, 1, 2, program.file),
                    f"internal error in rule {check.rule.id}: {type(err).__name__}: {err} "
                    "(a bug in KIR: please report it with the input)",
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


# ---- fixes checked by applying them ---------------------------------------------------------

Place = tuple[str, int]  # rule, line

_CHECKING: ContextVar[bool] = ContextVar("fixes_checking", default=False)
_FOUND: dict[str, list[tuple[Place, bool]] | None] = {}  # per text, target and parameters


def _held(ctx: Context, d: Diagnostic) -> Diagnostic:
    """`d`, or `d` without its hint and edits where the edits do not remove it or add an error. A
    hint is a fix: one without edits is not given (a rule says its advice in the message)."""
    if not d.edits:
        return dataclasses.replace(d, hint="") if d.hint else d
    if _CHECKING.get():
        return d
    if first_fix(ctx, d.rule, d.span.line if d.span else 0, [d.edits]):
        return d
    return dataclasses.replace(d, hint="", edits=())


def first_fix(
    ctx: Context, rule: str, line: int, candidates: Iterable[Edit | tuple[Edit, ...] | None]
) -> tuple[Edit, ...]:
    """The first candidate (one edit or several made together) that removes the diagnostic of
    `rule` at `line` and adds no error; () when none does or the program has no text."""
    options = [(c,) if isinstance(c, Edit) else c for c in candidates if c]
    source = ctx.program.source
    if not options or source is None:
        return ()
    if _CHECKING.get():
        return options[0]
    before = _diagnosed(source, ctx)
    if before is None:
        return ()
    had = {p for p, error in before if error}
    for edits in options:
        after = _diagnosed(apply_edits(source, edits), ctx)
        if after is None:
            continue
        if (rule, moved_line(line, edits)) in {p for p, _ in after}:
            continue
        moved = {(r, moved_line(n, edits)) for r, n in had}
        if not {p for p, error in after if error} - moved:
            return edits
    return ()


def _diagnosed(text: str, ctx: Context) -> list[tuple[Place, bool]] | None:
    """Each diagnostic's place and whether it is an error, for the program `text` checked as
    `ctx`'s was (a target given from outside, parameters); None where it does not parse."""
    overrides = {k: v for k, v in ctx.params.items() if ctx.kernel.params.get(k) != v}
    # A target given from outside holds for the edited text too; otherwise the text's own `target`
    # clause decides, so that an edit of the clause is a candidate like any other.
    target = ctx.target if ctx.target != ctx.kernel.target.data else None
    key = hashlib.sha256(
        "\0".join([text, ctx.file, target or "", repr(sorted(overrides.items()))]).encode()
    ).hexdigest()
    if key not in _FOUND:
        if len(_FOUND) > 4096:
            _FOUND.clear()
        _FOUND[key] = _check(text, ctx.file, target, overrides)
    return _FOUND[key]


def _check(text: str, file: str, target: str | None, overrides: dict[str, int]) -> list[tuple[Place, bool]] | None:
    try:
        program = parse(text, file=file)
    except KirError:
        return None
    if program.is_multi:
        return None
    token = _CHECKING.set(True)
    try:
        diags: list[Diagnostic] = verify_ops(program)
        if not any(d.is_error for d in diags):
            diags += verify(program, target, overrides)
    except KirError as err:
        diags = err.diagnostics
    finally:
        _CHECKING.reset(token)
    return [((d.rule, d.span.line if d.span else 0), d.is_error) for d in diags]
