"""Where an error Triton raised on generated code points, and the diagnostic it becomes.

A compile error in generated code is a bug of the backend, not of the program: it becomes a
`lower.compile` diagnostic located at the KIR op that produced the failing generated line
(`Lowered.span_for_line`). Compiling ahead of time (`compile.py`) and launching
(`runtime.py`, whose interpreted launches compile as they run) both report through here.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from kir.diagnostics import Diagnostic
from lowering.emit.base import Lowered
from lowering.report import compile_error


def exception_chain(err: BaseException) -> list[BaseException]:
    """An exception and its causes (explicit or implicit), the outermost first."""
    chain: list[BaseException] = []
    e: BaseException | None = err
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


def front_end_location(source: str, chain: list[BaseException], *, innermost: bool):
    """(line, column, error) of a Triton front-end CompilationError in the generated module, or
    None. Triton parses each jit function from its own text (`e.src`), so an AST node's line
    counts from the function's `def`. The outermost error names the kernel's own line (the
    call of a helper), the innermost the failing node inside the helper."""
    from triton.compiler.errors import CompilationError

    for e in reversed(chain) if innermost else chain:
        if isinstance(e, CompilationError) and getattr(e, "src", None) and getattr(e.node, "lineno", None):
            at = source.find(e.src)
            if at >= 0:
                return source.count("\n", 0, at) + e.node.lineno, e.node.col_offset + 1, e
    return None


def error_line(source: str, path: Path | str, err: BaseException) -> int | None:
    """The generated line an exception points at: a Triton CompilationError carries the AST
    node and the source of the function it was compiling; other errors may name the file."""
    chain = exception_chain(err)
    found = front_end_location(source, chain, innermost=False)
    if found:
        return found[0]
    for e in chain:
        for frame in _traceback_lines(e, str(path)):
            return frame
        m = re.search(re.escape(str(path)) + r'"?(?:, line |:)(\d+)', str(e))
        if m:
            return int(m.group(1))
    return None


def _traceback_lines(err: BaseException, path: str) -> list[int]:
    """Lines of the generated file in an exception's traceback, innermost first (an error
    raised by the Python of an interpreted kernel)."""
    return [f.lineno for f in reversed(traceback.extract_tb(err.__traceback__)) if f.filename == path and f.lineno]


def compile_diagnostic(lowered: Lowered, message: str, line: int | None) -> Diagnostic:
    """A `lower.compile` diagnostic for an error Triton raised on the generated code, located
    at the KIR op of the generated line (at the kernel when no line is known)."""
    return compile_error(lowered, line, _last_line(message))


# Exceptions of a launch that mean "the generated code is wrong" (Triton's front end raises
# CompilationError; the interpreter wraps what the Python of the kernel raised in InterpreterError).
COMPILE_ERRORS = (
    "CompilationError",
    "CompileTimeAssertionFailure",
    "UnsupportedLanguageConstruct",
    "InterpreterError",
    "SyntaxError",
    "NameError",
    "PTXASError",
)


def _last_line(text: str) -> str:
    """The reason in an error message (Triton's end with it, after the source excerpt)."""
    lines = [ln for ln in text.strip().split("\n") if ln.strip()]
    return lines[-1][:300] if lines else ""
