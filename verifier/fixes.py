"""Hints checked by applying them.

A rule that can write its fix as edits of the source offers candidate edits; `first_fix` applies
each to the program's text, checks the edited program with every rule, and keeps the first after
which the diagnostic is gone from its place (its line moved by what the edit inserts) and no error
appears that the program did not have. The hint is then that edit (`Diagnostic.edits`); with no
candidate that holds, the rule gives no hint. `tests/verifier/test_hints_apply.py` checks the same
over both corpora. While an edited program is checked, rules do not look for fixes again:
`first_fix` there returns its first candidate unchecked (inside a check only errors count).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from contextvars import ContextVar

from kir.check import verify_ops
from kir.diagnostics import Diagnostic, Edit, KirError, apply_edits, moved_line
from kir.parser import parse
from verifier.context import Context
from verifier.engine import verify

Place = tuple[str, int]  # rule, line

_CHECKING: ContextVar[bool] = ContextVar("fixes_checking", default=False)
_FOUND: dict[str, list[tuple[Place, bool]] | None] = {}  # per text, target and parameters


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
