"""How the interpreter stops: one exception that carries one `Diagnostic`.

Handlers deep inside the machine raise `InterpError`; `kir.interp.run` turns the first one into
a `KirError`, so a caller sees the same diagnostic type as from the parser and the verifier.
Rule ids of the interpreter all start with `interp.`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from xdsl.ir import Operation

from kir.diagnostics import Diagnostic, Related, Span


class InterpError(Exception):
    def __init__(self, diagnostic: Diagnostic):
        self.diagnostic = diagnostic
        super().__init__(f"{diagnostic.rule}: {diagnostic.message}")


def span_of(op: Operation | None) -> Span | None:
    """The op's source span; programs built without text have none."""
    if op is None:
        return None
    try:
        from kir.program import span_of as program_span_of
    except ImportError:  # pragma: no cover - kir.program is part of the tree
        return getattr(op, "_kir_span", None)
    return program_span_of(op)


def related(op: Operation | None, label: str) -> tuple[Related, ...]:
    span = span_of(op)
    return (Related(span, label),) if span is not None else ()


def fail(
    rule: str,
    op: Operation | None,
    message: str,
    hint: str = "",
    related: tuple[Related, ...] = (),
    counterexample: dict[str, Any] | None = None,
) -> NoReturn:
    raise InterpError(Diagnostic(rule, "error", span_of(op), message, hint, related, counterexample))


class OutOfBounds(Exception):
    """Raised by the memory layer; the machine adds the op, the program ids and the loops."""

    def __init__(self, index: tuple[int, ...], shape: tuple[int, ...], lane: tuple[int, ...]):
        self.index = index
        self.shape = shape
        self.lane = lane
        super().__init__(f"index {list(index)} out of bounds for shape {list(shape)}")


class Unsupported(Exception):
    """A program the interpreter cannot give a meaning to (reported as `interp.unsupported`)."""
