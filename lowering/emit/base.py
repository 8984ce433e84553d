"""What every emitter shares: the result type, the registry, the source writer that remembers
which KIR op produced each generated line, and the checks that an emitter accepts a program.

An emitter is a class with a `name` ("triton", "gluon", "cuda", ...), `accepts(program)` (the
diagnostics that make it refuse a program: a level or an op it cannot express) and
`emit(program, params)` returning a `Lowered`. Each target's emitter lives in its folder under
`lowering/targets/`, which names it (`lowering.targets`: the registry); `lower` asks it there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation

from kir import symexpr as sx
from kir.diagnostics import Diagnostic, KirError, Span
from kir.dialect.traits import is_explicit
from kir.program import Program, span_of
from lowering.targets import emitting, target


@dataclass(frozen=True)
class ArgInfo:
    name: str  # the KIR name (validated; see lowering.emit.names)
    dtype: str
    shape: tuple[sx.SymExpr, ...]
    out: bool


@dataclass
class Lowered:
    backend: str
    source: str
    entry: str  # the kernel function's name in the source
    program: Program
    params: dict[str, int]
    args: list[ArgInfo]
    shape_symbols: list[str]  # passed as scalar arguments after the tensors, in this order
    grid: tuple[sx.SymExpr, ...]
    num_warps: int
    options: dict = field(default_factory=dict)  # backend options (num_stages, smem bytes, ...)
    line_spans: dict[int, Span] = field(default_factory=dict)  # generated line -> KIR span
    diagnostics: list[Diagnostic] = field(default_factory=list)  # the passes' warnings (lowering/passes/schedule.py)

    def span_for_line(self, line: int) -> Span | None:
        """The KIR op that produced a generated line (or the nearest line before it that has one)."""
        for n in range(line, 0, -1):
            if n in self.line_spans:
                return self.line_spans[n]
        return self.program.span()


class SourceWriter:
    """Builds generated source line by line, remembering the KIR op of each line."""

    def __init__(self, indent: str = "    "):
        self.lines: list[str] = []
        self.spans: dict[int, Span] = {}
        self.depth = 0
        self.indent_unit = indent

    def line(self, text: str = "", op: Operation | None = None) -> None:
        self.lines.append((self.indent_unit * self.depth + text) if text else "")
        span = span_of(op) if op is not None else None
        if span is not None:
            self.spans[len(self.lines)] = span

    def indent(self) -> None:
        self.depth += 1

    def dedent(self) -> None:
        self.depth -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class Emitter:
    name = "?"
    levels: tuple[str, ...] = ("tile",)  # "tile" and/or "explicit"

    def accepts(self, program: Program) -> list[Diagnostic]:
        """Diagnostics that say why this emitter cannot lower the program (empty: it can)."""
        return []

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:  # pragma: no cover
        raise NotImplementedError


def emitter_of(to: str) -> Emitter:
    """The emitter of the target `to` (lowering.targets), or a `lower.backend` error that
    suggests the nearest name."""
    chosen = target(to)
    if chosen.emitter is None:
        message = f"the {to} target lowers nothing (it runs programs as they are)"
        raise KirError(
            Diagnostic("lower.backend", "error", None, message, f"lower with one of {', '.join(emitting())}")
        )
    return chosen.emitter_object()


def program_level(program: Program) -> str:
    """ "explicit" when the program uses any op of the hardware-explicit level (the `Explicit`
    trait: shared buffers, mbarriers, async copies, wgmma, roles, layouts...), else "tile"."""
    return "explicit" if any(is_explicit(op) for op in program.kernel.walk()) else "tile"


def level_refusal(program: Program, emitter: str, accepted: tuple[str, ...]) -> list[Diagnostic]:
    level = program_level(program)
    if level in accepted:
        return []
    return [
        Diagnostic(
            "lower.level",
            "error",
            program.span(),
            f"the {emitter} backend takes {' and '.join(accepted)}-level programs; this one is {level}-level",
            "lower it with a backend for its level (the explicit level: gluon or cuda)",
        )
    ]
