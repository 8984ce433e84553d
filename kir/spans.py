"""Where each op was written and the comments around it, kept beside the IR.

Spans and comments are attributes of the Python objects of the ops, not op attributes, so that
two programs that differ only in layout or comments are the same IR (`kir.program.same_ir`) and
hash alike. The printer reads them and the program's text comes from the printer, so they live
below both.
"""

from __future__ import annotations

from xdsl.ir import Operation

from kir.diagnostics import Span

_SPAN = "_kir_span"
_COMMENTS = "_kir_comments"
_BLOCK_COMMENTS = "_kir_block_comments"
# The names of the notes an op may carry (its instance attributes): what a copy of it carries.
SOURCE_NOTES = (_SPAN, _COMMENTS, _BLOCK_COMMENTS)


def span_of(op: Operation) -> Span | None:
    return getattr(op, _SPAN, None)


def set_span(op: Operation, span: Span | None) -> None:
    if span is not None:
        setattr(op, _SPAN, span)


def comments_of(op: Operation) -> tuple[list[str], str | None, bool]:
    """The comment lines written before an op's statement, the one after it on its line, and
    whether a blank line precedes it."""
    return getattr(op, _COMMENTS, ([], None, False))


def set_comments(op: Operation, leading: list[str], trailing: str | None, blank_before: bool = False) -> None:
    if leading or trailing or blank_before:
        setattr(op, _COMMENTS, (leading, trailing, blank_before))


def block_comments_of(op: Operation, region: int = 0) -> tuple[str | None, list[str], bool]:
    """For the block of region `region` of a kernel, loop, branch or role: the comment after its
    `{`, the comment lines after its last statement, and whether a blank line precedes those."""
    return getattr(op, _BLOCK_COMMENTS, {}).get(region, (None, [], False))


def set_block_comments(op: Operation, region: int, head: str | None, end: list[str], end_blank: bool = False) -> None:
    if head or end:
        blocks = dict(getattr(op, _BLOCK_COMMENTS, {}))  # a clone may share the old dict
        blocks[region] = (head, end, end_blank and bool(end))
        setattr(op, _BLOCK_COMMENTS, blocks)


def copy_source_notes(old: Operation, new: Operation) -> None:
    """Give `new` (a clone of `old`) the span and comments of `old`."""
    for key in SOURCE_NOTES:
        if hasattr(old, key):
            setattr(new, key, getattr(old, key))
