"""What the tactics share about a program's IR: its loops and loads in the order they are
written, where its clauses are, and whether it is at the hardware-explicit level."""

from __future__ import annotations

from xdsl.ir import Operation

from kir.diagnostics import Span
from kir.dialect.structure import ForOp, RoleOp
from kir.dialect.tile import LoadOp
from kir.dialect.traits import is_explicit
from kir.dialect.types import GlobalType
from kir.program import Program, span_of
from kir.where import where_span


def loops(program: Program) -> list[ForOp]:
    """Every `for` loop, in the order of the text (outer before inner)."""
    return [op for op in program.kernel.walk() if isinstance(op, ForOp)]


def global_loads(program: Program) -> list[LoadOp]:
    """Every load of a global tensor, in the order of the text."""
    return [op for op in program.kernel.walk() if isinstance(op, LoadOp) and isinstance(op.mem.type, GlobalType)]


def first_explicit(program: Program) -> Operation | None:
    """The first op of the hardware-explicit level (a role, shared memory, a barrier...), if any."""
    for op in program.kernel.walk():
        if isinstance(op, RoleOp) or is_explicit(op):
            return op
    return None


def span(program: Program, op: Operation | None) -> Span | None:
    """Where `op` was written, else the nearest enclosing op's span, else the kernel's."""
    while op is not None:
        found = span_of(op)
        if found is not None:
            return found
        op = op.parent_op()
    return program.span()


def clause(program: Program, name: str) -> Span | None:
    """The span of a header clause ("target", "grid", "launch", "where"), else the kernel's."""
    if name == "where":
        return where_span(program)
    return program.clause_spans.get(name) or program.span()


def param_span(program: Program, name: str) -> Span | None:
    """The span of a compile-time parameter's declaration (`BM = 64`), else the kernel's."""
    return program.param_spans.get(name) or program.span()
