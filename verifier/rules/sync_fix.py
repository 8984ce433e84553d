"""Fixes of synchronization errors, checked by applying them.

A synchronization rule blames the statement whose change fixes the program, and its hint is that
change. A hint is given only when it holds: the edit is applied to the program's text and the
edited program is checked again by every synchronization rule (the model check included) and
every target rule (the fix must be one the target has); the hint is kept only when none of them
reports an error. A rule that cannot write its fix as an edit gives no hint. The edit goes with
the diagnostic as `Diagnostic.edits` (`verifier.rules.sync._mechanical`).
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from dataclasses import dataclass

from xdsl.ir import Operation

from kir.diagnostics import Diagnostic, Span
from kir.diagnostics import Edit as SourceEdit
from kir.program import span_of
from verifier.context import Context

# Set while an edited program is checked: its rules report, but do not check hints again.
_CHECKING: ContextVar[bool] = ContextVar("sync_fix_checking", default=False)
_PASSES: dict[str, bool] = {}  # per source, target, parameters and edit


@dataclass(frozen=True)
class Edit:
    """One change to the text: `replace` the first `old` on a line by `new`, insert `new` as a
    line of its own `before` or `after` it (with that line's indentation), or `delete` the line;
    `also`, a change made with it at another line (a barrier moved, or one in each of two roles)."""

    line: int
    mode: str  # "replace", "before", "after", "delete"
    new: str
    old: str = ""
    also: Edit | None = None

    def apply(self, source: str) -> str | None:
        """The text with the change (and `also`) made; the later line first, so that the earlier
        one's number still holds."""
        if self.also is not None:
            first, then = (self.also, self._alone()) if self.also.line > self.line else (self._alone(), self.also)
            text = first.apply(source)
            return None if text is None else then.apply(text)
        lines = source.split("\n")
        if not 1 <= self.line <= len(lines):
            return None
        text = lines[self.line - 1]
        if self.mode == "replace":
            if self.old not in text:
                return None
            lines[self.line - 1] = text.replace(self.old, self.new, 1)
        elif self.mode == "delete":
            del lines[self.line - 1]
        else:
            indent = text[: len(text) - len(text.lstrip())]
            at = self.line - 1 if self.mode == "before" else self.line
            lines.insert(at, indent + self.new)
        return "\n".join(lines)

    def _alone(self) -> Edit:
        return Edit(self.line, self.mode, self.new, self.old)

    def as_source_edits(self, source: str, file: str) -> tuple[SourceEdit, ...] | None:
        """The same change as `kir.diagnostics.Edit`s (what `Diagnostic.edits` carries): a
        replacement within the line, a whole line inserted at the start of the next one, or a
        line removed with its newline."""
        mine = self._alone()._source_edit(source, file)
        if mine is None:
            return None
        if self.also is None:
            return (mine,)
        more = self.also.as_source_edits(source, file)
        return None if more is None else (mine, *more)

    def _source_edit(self, source: str, file: str) -> SourceEdit | None:
        lines = source.split("\n")
        if not 1 <= self.line <= len(lines):
            return None
        text = lines[self.line - 1]
        if self.mode == "replace":
            col = text.find(self.old) + 1
            return (
                None if col == 0 else SourceEdit(Span(self.line, col, self.line, col + len(self.old), file), self.new)
            )
        if self.mode == "delete":
            return SourceEdit(Span(self.line, 1, self.line + 1, 1, file), "") if self.line < len(lines) else None
        indent = text[: len(text) - len(text.lstrip())]
        if self.mode == "before":
            return SourceEdit(Span(self.line, 1, self.line, 1, file), f"{indent}{self.new}\n")
        if self.line < len(lines):
            return SourceEdit(Span(self.line + 1, 1, self.line + 1, 1, file), f"{indent}{self.new}\n")
        end = len(text) + 1  # the last line, with no newline after it
        return SourceEdit(Span(self.line, end, self.line, end, file), f"\n{indent}{self.new}")


def replace_in(op: Operation, old: str, new: str) -> Edit | None:
    span = span_of(op)
    return None if span is None else Edit(span.line, "replace", new, old)


def insert_before(op: Operation, new: str) -> Edit | None:
    span = span_of(op)
    return None if span is None else Edit(span.line, "before", new)


def insert_after(op: Operation, new: str) -> Edit | None:
    span = span_of(op)
    return None if span is None else Edit(span.end_line, "after", new)


def op_text(ctx: Context, op: Operation) -> str | None:
    """The source text of a one-line op, from its own span (not an enclosing op's)."""
    span = span_of(op)
    return None if span is None else ctx.text_of(span)


def fixes(ctx: Context, edits: list[Edit | None]) -> Edit | None:
    """The first edit that makes the program pass every synchronization rule (None when there
    is none, or the program has no text to edit)."""
    for edit in edits:
        if edit is not None and passes(ctx, edit):
            return edit
    return None


def passes(ctx: Context, edit: Edit) -> bool:
    source = ctx.program.source
    if source is None:
        return False
    if _CHECKING.get():
        return True  # a check inside a check: only errors count there, not hints
    overrides = {k: v for k, v in ctx.params.items() if ctx.kernel.params.get(k) != v}
    blob = "\0".join([source, ctx.file, ctx.target, repr(sorted(overrides.items())), repr(edit)])
    key = hashlib.sha256(blob.encode()).hexdigest()
    if key in _PASSES:
        return _PASSES[key]
    text = edit.apply(source)
    ok = text is not None and not any(d.is_error for d in _sync_errors(text, ctx, overrides))
    if len(_PASSES) > 4096:
        _PASSES.clear()
    _PASSES[key] = ok
    return ok


def _sync_errors(text: str, ctx: Context, overrides: dict[str, int]) -> list[Diagnostic]:
    from kir.diagnostics import KirError
    from kir.parser import parse
    from verifier.engine import verify
    from verifier.registry import RULES

    try:
        program = parse(text, file=ctx.file)
    except KirError as err:
        return err.diagnostics
    sync_rules = {r for r, rule in RULES.items() if rule.family in ("sync", "target")}  # a fix the target has
    token = _CHECKING.set(True)
    try:
        return verify(program, ctx.target, overrides, rules=sync_rules)
    finally:
        _CHECKING.reset(token)
