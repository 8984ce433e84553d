"""Running a KIR text through everything that can reject it: the parser, op verification and
the rule verifier."""

from __future__ import annotations

from pathlib import Path

from kir.diagnostics import Diagnostic, KirError, apply_edits
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


HERE = Path(__file__).parent


def code(text: str) -> list[str]:
    """The program's statements, without comments and blank lines (to compare a fixed program
    with its twin)."""
    return [s for line in text.splitlines() if (s := line.split("#")[0].rstrip())]


def fixed(name: str, rule: str, line: int) -> tuple[str, str]:
    """The corpus program `name` (`<corpus>/<family>/<program>`, under tests/verifier) with the
    edits of its one diagnostic of `rule` at `line` made, and that diagnostic's hint."""
    text = (HERE / f"{name}.bad.kir").read_text()
    (diag,) = [d for d in diagnose(text, name) if d.rule == rule and d.span is not None and d.span.line == line]
    assert diag.edits, diag.hint
    return apply_edits(text, diag.edits), diag.hint
