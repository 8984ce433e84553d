"""Running a KIR text through everything that can reject it: the parser, op verification and
the rule verifier."""

from __future__ import annotations

from kir.diagnostics import Diagnostic, KirError
from kir.parser import parse
from verifier.check import check_program
from verifier.registry import BAD_MARKER


def diagnose(text: str, file: str = "t.kir", target: str | None = None) -> list[Diagnostic]:
    try:
        program = parse(text, file=file)
    except KirError as err:
        return err.diagnostics
    return check_program(program, target)


def marked(text: str) -> tuple[int, str | None]:
    """The line marked `# <-` (and the rule id written after the marker, if any)."""
    for i, line in enumerate(text.splitlines(), start=1):
        if BAD_MARKER in line:
            rest = line.split(BAD_MARKER, 1)[1].strip()
            return i, (rest.split()[0] if rest else None)
    raise AssertionError("no line is marked with '# <-'")


def describe(diags: list[Diagnostic]) -> str:
    return "; ".join(f"{d.rule}@{d.span.line if d.span else '?'}: {d.message}" for d in diags) or "no diagnostics"
