"""Where a kernel's `where` clauses are written, for the diagnostics about them.

The verifier's `types.where` (no shapes satisfy the clauses with these parameters) and the cost
model's `cost.where-violated` (these shapes break a clause) point at the same place; the place
is a fact of the program's text, so it lives here, below both.
"""

from __future__ import annotations

import re

from kir.diagnostics import Span
from kir.program import Program

_WHERE = re.compile(r"\bwhere\b")


def where_span(program: Program) -> Span | None:
    """From the `where` keyword to the end of its line, comments left out (the kernel's own span
    where the text is not at hand, or where the header has no `where` before the body's `{`)."""
    source, kernel_span = program.source, program.span()
    if source is None or kernel_span is None:
        return kernel_span
    for i, line in enumerate(source.splitlines()[kernel_span.line - 1 :], start=kernel_span.line):
        code = line.split("#", 1)[0]
        found = _WHERE.search(code)
        if found:
            return Span(i, found.start() + 1, i, len(code.rstrip()) + 1, kernel_span.file)
        if code.strip().startswith("{"):
            break
    return kernel_span
