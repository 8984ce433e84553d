"""The base of the C++ emitters: `Unsupported` becomes a located `lower.unsupported`, and a
crash of the generator an `internal.lower` diagnostic."""

from __future__ import annotations

from kir.diagnostics import Diagnostic, KirError, Span
from kir.program import Program, span_of
from lowering.emit.base import Emitter, Lowered
from lowering.emit.cbase.dialect import CDialect, Unsupported
from lowering.emit.cbase.kernel import KernelGen


def unsupported_diagnostic(err: Unsupported, program: Program) -> Diagnostic:
    span: Span | None = span_of(err.op) if err.op is not None else None
    return Diagnostic(
        "lower.unsupported",
        "error",
        span or program.span(),
        err.message,
        err.hint or "rewrite this part of the program, or lower it with another backend",
    )


class CEmitter(Emitter):
    """The base of the C++ emitters: a backend gives its dialect table and its generator (a
    `KernelGen` subclass, whose `generate()` makes the `Lowered`)."""

    dialect: CDialect
    generator: type[KernelGen] = KernelGen

    def generate(self, program: Program, params: dict[str, int]) -> Lowered:
        return self.generator(program, params, self.dialect).generate()

    def accepts(self, program: Program) -> list[Diagnostic]:
        """Refusals at the program's default parameters (another choice of parameters can be
        refused by `emit`, with the same diagnostics)."""
        try:
            self.emit(program, dict(program.params))
        except KirError as err:
            return err.diagnostics
        return []

    def emit(self, program: Program, params: dict[str, int]) -> Lowered:
        try:
            lowered = self.generate(program, params)
            lowered.backend = self.name  # the target's name (a copy of the folder has its own)
            return lowered
        except Unsupported as err:
            raise KirError(unsupported_diagnostic(err, program)) from None
        except KirError:
            raise
        except Exception as err:  # a bug of the backend, never of the program
            raise KirError(
                Diagnostic(
                    "internal.lower",
                    "error",
                    program.span(),
                    f"internal error of the {self.name} backend: {type(err).__name__}: {err}",
                    f"this is a bug in the {self.name} emitter ({type(self).__module__}); please report it with the program",
                )
            ) from err
